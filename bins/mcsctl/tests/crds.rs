//! `mcsctl crds` prints exactly the CRDs of `mcs_types::crd`, in a form that parses back.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::process::{Command, Output};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

fn mcsctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcsctl"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout_of(args: &[&str]) -> String {
    let out = mcsctl(args);
    assert!(
        out.status.success(),
        "mcsctl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

#[test]
fn crds_prints_the_mcs_crds_as_multi_document_yaml() {
    let yaml = stdout_of(&["crds"]);
    let parsed: Vec<CustomResourceDefinition> = serde_saphyr::from_multiple(&yaml).unwrap();
    assert_eq!(parsed, mcs_types::crd::mcs_crds().unwrap());
    let names: Vec<_> = parsed
        .iter()
        .map(|c| c.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(
        names,
        [
            "serviceexports.multicluster.x-k8s.io",
            "serviceimports.multicluster.x-k8s.io"
        ]
    );
}

#[test]
fn crds_about_prints_the_cluster_property_crd() {
    let yaml = stdout_of(&["crds", "--about"]);
    let parsed: Vec<CustomResourceDefinition> = serde_saphyr::from_multiple(&yaml).unwrap();
    assert_eq!(parsed, mcs_types::crd::about_crds().unwrap());
    assert_eq!(parsed[0].spec.scope, "Cluster");
}

#[test]
fn crds_json_is_an_array_of_the_same_crds() {
    let json = stdout_of(&["crds", "-o", "json"]);
    let parsed: Vec<CustomResourceDefinition> = serde_json::from_str(&json).unwrap();
    assert_eq!(parsed, mcs_types::crd::mcs_crds().unwrap());
}

#[test]
fn usage_errors_exit_with_2_and_say_what_is_wrong() {
    let out = mcsctl(&["crds", "-o", "xml"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("invalid value 'xml'"), "{stderr}");
    assert!(
        stderr.contains("[possible values: table, wide, yaml, json, name]"),
        "{stderr}"
    );
}

#[test]
fn crds_table_lists_each_crd_with_group_kind_versions_and_scope() {
    let table = stdout_of(&["crds", "-o", "table"]);
    let lines: Vec<Vec<&str>> = table
        .lines()
        .map(|l| {
            l.split("   ")
                .map(str::trim)
                .filter(|c| !c.is_empty())
                .collect()
        })
        .collect();
    assert_eq!(
        lines,
        [
            vec!["NAME", "GROUP", "KIND", "VERSIONS", "SCOPE"],
            vec![
                "serviceexports.multicluster.x-k8s.io",
                "multicluster.x-k8s.io",
                "ServiceExport",
                "v1alpha1, v1beta1 (storage)",
                "Namespaced"
            ],
            vec![
                "serviceimports.multicluster.x-k8s.io",
                "multicluster.x-k8s.io",
                "ServiceImport",
                "v1alpha1, v1beta1 (storage)",
                "Namespaced"
            ],
        ]
    );
    assert!(!table.contains('\u{1b}'), "no colours on a pipe: {table:?}");
    let about = stdout_of(&["crds", "--about", "-o", "table"]);
    assert!(
        about.contains("clusterproperties.about.k8s.io") && about.contains("Cluster\n"),
        "{about}"
    );
}

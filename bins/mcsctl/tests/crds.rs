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
    assert!(stderr.contains("[possible values: yaml, json]"), "{stderr}");
}

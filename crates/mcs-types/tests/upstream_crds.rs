//! The generated CRDs against the upstream CRD files (mcs-api v0.5.0, about-api): every served
//! version's `openAPIV3Schema` is compared structurally with descriptions ignored, plus names,
//! scope, served/storage flags, subresources and printer columns. Every accepted difference is
//! listed in `KNOWN_DIFFERENCES` with its reason; anything else fails.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::path::PathBuf;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, CustomResourceDefinitionVersion,
};
use serde_json::{Map, Value};

/// Differences between our CRDs and the upstream files that are intended.
/// (CRD name, version, what, why)
const KNOWN_DIFFERENCES: &[(&str, &str, &str, &str)] = &[(
    "clusterproperties.about.k8s.io",
    "v1alpha1",
    "version exists only in ours",
    "the about-api fixture serves only v1beta1, but MCS implementations (Submariner, GKE) and \
     our issue read about.k8s.io/v1alpha1, and earlier about-api releases served it; we serve \
     v1alpha1 with the v1beta1 schema (not the storage version) so both work",
)];

fn fixture(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/upstream")
        .join(path)
}

fn upstream_crd(path: &str) -> CustomResourceDefinition {
    let text = std::fs::read_to_string(fixture(path)).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// Removes `description` from every schema node (not from property names).
fn without_descriptions(schema: &Value) -> Value {
    let Value::Object(node) = schema else {
        return schema.clone();
    };
    let mut out = Map::new();
    for (key, value) in node {
        match key.as_str() {
            "description" => {}
            "properties" => {
                let props = value
                    .as_object()
                    .unwrap()
                    .iter()
                    .map(|(name, prop)| (name.clone(), without_descriptions(prop)))
                    .collect();
                out.insert(key.clone(), Value::Object(props));
            }
            "items" | "additionalProperties" | "not" => {
                out.insert(key.clone(), without_descriptions(value));
            }
            "anyOf" | "allOf" | "oneOf" => {
                let variants = value
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(without_descriptions)
                    .collect();
                out.insert(key.clone(), Value::Array(variants));
            }
            _ => {
                out.insert(key.clone(), value.clone());
            }
        }
    }
    Value::Object(out)
}

/// Every path where `a` and `b` differ, for a readable failure.
fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<_> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let here = format!("{path}.{key}");
                match (x.get(key), y.get(key)) {
                    (Some(p), Some(q)) => differences(&here, p, q, out),
                    (Some(p), None) => out.push(format!("{here}: only in ours: {p}")),
                    (None, Some(q)) => out.push(format!("{here}: only upstream: {q}")),
                    (None, None) => {}
                }
            }
        }
        _ if a != b => out.push(format!("{path}: ours {a} != upstream {b}")),
        _ => {}
    }
}

fn is_known(crd: &str, version: &str, what: &str) -> bool {
    KNOWN_DIFFERENCES
        .iter()
        .any(|(c, v, w, _)| *c == crd && *v == version && *w == what)
}

/// The parts of a version that define the API, as JSON, with descriptions removed.
fn version_view(version: &CustomResourceDefinitionVersion) -> Value {
    let mut value = serde_json::to_value(version).unwrap();
    let schema = &value["schema"]["openAPIV3Schema"];
    value["schema"]["openAPIV3Schema"] = without_descriptions(schema);
    // Printer column descriptions are text, like schema descriptions.
    if let Some(columns) = value["additionalPrinterColumns"].as_array_mut() {
        for column in columns {
            column.as_object_mut().unwrap().remove("description");
        }
    }
    value
}

fn compare(ours: &CustomResourceDefinition, upstream: &CustomResourceDefinition) {
    let name = upstream.metadata.name.clone().unwrap();
    assert_eq!(ours.metadata.name, upstream.metadata.name);
    assert_eq!(ours.spec.group, upstream.spec.group);
    assert_eq!(ours.spec.scope, upstream.spec.scope);

    // Names: the API server defaults listKind to <kind>List, so compare with that default.
    let mut upstream_names = upstream.spec.names.clone();
    upstream_names
        .list_kind
        .get_or_insert_with(|| format!("{}List", upstream.spec.names.kind));
    assert_eq!(ours.spec.names, upstream_names, "names of {name}");

    let mut problems = Vec::new();
    for ours_version in &ours.spec.versions {
        let upstream_version = upstream
            .spec
            .versions
            .iter()
            .find(|v| v.name == ours_version.name);
        let Some(upstream_version) = upstream_version else {
            if !is_known(&name, &ours_version.name, "version exists only in ours") {
                problems.push(format!(
                    "{name} {}: version exists only in ours",
                    ours_version.name
                ));
            }
            continue;
        };
        let mut diffs = Vec::new();
        differences(
            &ours_version.name,
            &version_view(ours_version),
            &version_view(upstream_version),
            &mut diffs,
        );
        problems.extend(diffs.into_iter().map(|d| format!("{name} {d}")));
    }
    for upstream_version in &upstream.spec.versions {
        if !ours
            .spec
            .versions
            .iter()
            .any(|v| v.name == upstream_version.name)
        {
            problems.push(format!(
                "{name} {}: version missing from ours",
                upstream_version.name
            ));
        }
    }
    assert!(problems.is_empty(), "differences:\n{}", problems.join("\n"));
}

#[test]
fn service_export_crd_is_equivalent_to_upstream() {
    compare(
        &mcs_types::crd::service_export_crd().unwrap(),
        &upstream_crd("mcs-api/multicluster.x-k8s.io_serviceexports.yaml"),
    );
}

#[test]
fn service_import_crd_is_equivalent_to_upstream() {
    compare(
        &mcs_types::crd::service_import_crd().unwrap(),
        &upstream_crd("mcs-api/multicluster.x-k8s.io_serviceimports.yaml"),
    );
}

#[test]
fn cluster_property_crd_is_equivalent_to_upstream() {
    compare(
        &mcs_types::crd::cluster_property_crd().unwrap(),
        &upstream_crd("about-api/about.k8s.io_clusterproperties.yaml"),
    );
}

#[test]
fn mcs_crds_carry_the_upstream_release_labels() {
    for (ours, path) in mcs_types::crd::mcs_crds().unwrap().iter().zip([
        "mcs-api/multicluster.x-k8s.io_serviceexports.yaml",
        "mcs-api/multicluster.x-k8s.io_serviceimports.yaml",
    ]) {
        assert_eq!(ours.metadata.labels, upstream_crd(path).metadata.labels);
    }
}

#[test]
fn the_comparison_catches_a_changed_schema() {
    // Guard against a comparison that cannot fail: a tightened field must be reported.
    let upstream = upstream_crd("mcs-api/multicluster.x-k8s.io_serviceimports.yaml");
    let mut ours = mcs_types::crd::service_import_crd().unwrap();
    let schema = ours.spec.versions[1]
        .schema
        .as_mut()
        .unwrap()
        .open_api_v3_schema
        .as_mut()
        .unwrap();
    let ips = schema
        .properties
        .as_mut()
        .unwrap()
        .get_mut("spec")
        .unwrap()
        .properties
        .as_mut()
        .unwrap()
        .get_mut("ips")
        .unwrap();
    ips.max_items = Some(3);
    let result = std::panic::catch_unwind(|| compare(&ours, &upstream));
    let message = *result.unwrap_err().downcast::<String>().unwrap();
    assert!(
        message.contains("v1beta1.schema.openAPIV3Schema.properties.spec.properties.ips.maxItems"),
        "{message}"
    );
}

#[test]
fn every_known_difference_still_applies() {
    // A listed difference that no longer exists would hide nothing and mislead readers.
    for (crd, version, what, _) in KNOWN_DIFFERENCES {
        assert_eq!(*what, "version exists only in ours");
        let ours = mcs_types::crd::about_crds()
            .unwrap()
            .into_iter()
            .chain(mcs_types::crd::mcs_crds().unwrap())
            .find(|c| c.metadata.name.as_deref() == Some(crd))
            .unwrap();
        assert!(ours.spec.versions.iter().any(|v| v.name == *version));
        let upstream = upstream_crd("about-api/about.k8s.io_clusterproperties.yaml");
        assert!(!upstream.spec.versions.iter().any(|v| v.name == *version));
    }
}

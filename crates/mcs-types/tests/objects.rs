//! Objects: upstream examples round-trip, unknown fields survive, wrong documents are rejected
//! with a clear error, and the kube `Resource` metadata is right.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::path::PathBuf;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube_core::Resource;
use mcs_types::conditions::{ConflictReason, ConflictReasons, DesiredCondition, StatusConditions};
use mcs_types::{ServiceExportStatus, ServiceImportType, about, v1alpha1, v1beta1};
use serde_json::{Value, json};

fn fixture_json(path: &str) -> Value {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../tests/fixtures/upstream")
        .join(path);
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

#[test]
fn upstream_example_imports_round_trip_to_equal_json() {
    for path in [
        "mcs-api/serviceimport.yaml",
        "mcs-api/serviceimport-with-vip.yaml",
    ] {
        let original = fixture_json(path);
        let import: v1beta1::ServiceImport = serde_json::from_value(original.clone()).unwrap();
        assert_eq!(import.spec.type_, ServiceImportType::ClusterSetIP);
        assert_eq!(import.spec.ports[0].port, 80);
        assert_eq!(serde_json::to_value(&import).unwrap(), original, "{path}");
    }
    let with_vip: v1beta1::ServiceImport =
        serde_json::from_value(fixture_json("mcs-api/serviceimport-with-vip.yaml")).unwrap();
    assert_eq!(
        with_vip.spec.parsed_ips().unwrap(),
        vec!["1.2.3.4".parse::<std::net::IpAddr>().unwrap()]
    );
}

fn full_import() -> Value {
    json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceImport",
        "metadata": {"name": "hello", "namespace": "mcs", "uid": "1234", "resourceVersion": "7"},
        "spec": {
            "ports": [
                {"name": "tcp", "protocol": "TCP", "port": 42, "appProtocol": "kubernetes.io/h2c"},
                {"name": "udp", "protocol": "UDP", "port": 42}
            ],
            "ips": ["242.0.0.1", "fd00::1"],
            "type": "ClusterSetIP",
            "sessionAffinity": "ClientIP",
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 10}},
            "ipFamilies": ["IPv4", "IPv6"],
            "internalTrafficPolicy": "Cluster",
            "trafficDistribution": "PreferClose"
        },
        "status": {
            "clusters": [{"cluster": "east"}, {"cluster": "west"}],
            "conditions": [{
                "type": "Ready", "status": "True", "reason": "Ready", "message": "",
                "lastTransitionTime": "2026-11-01T10:00:00Z", "observedGeneration": 3
            }]
        }
    })
}

#[test]
fn every_import_field_round_trips() {
    let original = full_import();
    let import: v1beta1::ServiceImport = serde_json::from_value(original.clone()).unwrap();
    assert_eq!(import.spec.ips.len(), 2);
    assert_eq!(
        import
            .spec
            .session_affinity_config
            .as_ref()
            .unwrap()
            .client_ip
            .as_ref()
            .unwrap()
            .timeout_seconds,
        Some(10)
    );
    assert!(import.is_ready());
    assert_eq!(serde_json::to_value(&import).unwrap(), original);
}

#[test]
fn unknown_fields_from_a_newer_server_are_kept() {
    let mut original = full_import();
    original["spec"]["futureField"] = json!({"nested": [1, 2]});
    original["status"]["endpointSliceObjects"] = json!("Present");
    original["status"]["clusters"][0]["weight"] = json!(3);
    let import: v1beta1::ServiceImport = serde_json::from_value(original.clone()).unwrap();
    assert_eq!(
        import.status.as_ref().unwrap().unknown_fields["endpointSliceObjects"],
        "Present"
    );
    assert_eq!(serde_json::to_value(&import).unwrap(), original);

    let export = json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceExport",
        "metadata": {"name": "hello"},
        "spec": {"exportedLabels": {"a": "b"}, "futureSpec": true},
        "status": {"futureStatus": "x"}
    });
    let parsed: v1beta1::ServiceExport = serde_json::from_value(export.clone()).unwrap();
    assert_eq!(serde_json::to_value(&parsed).unwrap(), export);
}

#[test]
fn an_export_without_spec_is_the_common_case() {
    let export: v1beta1::ServiceExport = serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceExport",
        "metadata": {"name": "hello", "namespace": "mcs"}
    }))
    .unwrap();
    assert!(export.spec.exported_labels.is_empty());
    assert!(!export.is_valid());
    // Written back like Go writes it: an empty spec object.
    assert_eq!(serde_json::to_value(&export).unwrap()["spec"], json!({}));
}

#[test]
fn an_import_without_spec_is_rejected_clearly() {
    let err = serde_json::from_value::<v1beta1::ServiceImport>(json!({
        "metadata": {"name": "hello"}
    }))
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "ServiceImport \"hello\" has no spec: a ServiceImport must have a spec"
    );
}

#[test]
fn a_document_of_another_kind_is_rejected_clearly() {
    let err = serde_json::from_value::<v1beta1::ServiceExport>(full_import()).unwrap_err();
    assert_eq!(
        err.to_string(),
        "document is multicluster.x-k8s.io/v1beta1/ServiceImport, expected ServiceExport in API group multicluster.x-k8s.io: deserialize it into the matching type"
    );
    let err = serde_json::from_value::<v1beta1::ServiceExport>(json!({
        "apiVersion": "net.gke.io/v1", "kind": "ServiceExport", "metadata": {"name": "x"}
    }))
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("expected ServiceExport in API group multicluster.x-k8s.io")
    );
}

#[test]
fn a_v1alpha1_document_reads_into_either_version() {
    let mut doc = full_import();
    doc["apiVersion"] = json!("multicluster.x-k8s.io/v1alpha1");
    let alpha: v1alpha1::ServiceImport = serde_json::from_value(doc.clone()).unwrap();
    let beta: v1beta1::ServiceImport = serde_json::from_value(doc).unwrap();
    assert_eq!(v1beta1::ServiceImport::from(alpha.clone()), beta);
    assert_eq!(v1alpha1::ServiceImport::from(beta), alpha);
    assert_eq!(
        serde_json::to_value(&alpha).unwrap()["apiVersion"],
        "multicluster.x-k8s.io/v1alpha1"
    );
}

#[test]
fn resource_metadata_gives_the_right_api_paths() {
    assert_eq!(
        v1beta1::ServiceImport::url_path(&(), Some("rook-ceph")),
        "/apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceimports"
    );
    assert_eq!(
        v1alpha1::ServiceExport::url_path(&(), Some("shop")),
        "/apis/multicluster.x-k8s.io/v1alpha1/namespaces/shop/serviceexports"
    );
    assert_eq!(
        about::v1alpha1::ClusterProperty::url_path(&(), None),
        "/apis/about.k8s.io/v1alpha1/clusterproperties"
    );
    assert!(v1beta1::ServiceExport::API_VERSION.starts_with(mcs_types::labels::GROUP));
    assert!(
        about::v1beta1::ClusterProperty::API_VERSION.starts_with(mcs_types::labels::ABOUT_GROUP)
    );
}

#[test]
fn cluster_property_holds_the_cluster_id() {
    let property = about::v1alpha1::ClusterProperty::with_value(
        mcs_types::labels::CLUSTER_ID_PROPERTY,
        "east",
    );
    let json = serde_json::to_value(&property).unwrap();
    assert_eq!(
        json,
        json!({
            "apiVersion": "about.k8s.io/v1alpha1",
            "kind": "ClusterProperty",
            "metadata": {"name": "cluster.clusterset.k8s.io"},
            "spec": {"value": "east"}
        })
    );
    let back: about::v1beta1::ClusterProperty = serde_json::from_value(json).unwrap();
    assert_eq!(back.spec.value, "east");
}

#[test]
fn export_status_helpers_read_what_set_condition_wrote() {
    let now = Time(Timestamp::from_second(1_800_000_000).unwrap());
    let mut status = ServiceExportStatus::default();
    status.set_condition(DesiredCondition::export_valid(), Some(1), now.clone());
    status.set_condition(
        DesiredCondition::export_conflict(
            &ConflictReasons::from_iter([ConflictReason::Port, ConflictReason::IpFamily]),
            "Conflicting ports. Using the ports of the oldest export in \"east\".",
        ),
        Some(1),
        now,
    );
    let mut export = v1beta1::ServiceExport::new("hello", Default::default());
    export.status = Some(status);
    assert!(export.is_valid());
    assert!(!export.is_ready());
    assert!(export.has_conflict());
    let reasons = export.conflict_reasons();
    assert!(reasons.contains(ConflictReason::Port) && reasons.contains(ConflictReason::IpFamily));
    let json = serde_json::to_value(&export).unwrap();
    assert_eq!(
        json["status"]["conditions"][1]["reason"],
        "PortConflict,IPFamilyConflict"
    );
    assert_eq!(
        json["status"]["conditions"][1]["lastTransitionTime"],
        "2027-01-15T08:00:00Z"
    );
}

#[test]
fn malformed_ips_are_named() {
    let mut doc = full_import();
    doc["spec"]["ips"] = json!(["242.0.0.1", "not-an-ip"]);
    let import: v1beta1::ServiceImport = serde_json::from_value(doc).unwrap();
    let err = import.spec.parsed_ips().unwrap_err();
    assert_eq!(err.value, "not-an-ip");
}

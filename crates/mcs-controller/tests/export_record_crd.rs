//! The broker's `ExportRecord` CRD, generated from [`ExportRecord`], against the API server's
//! rules (kube-syntax): the CRD itself is accepted (names, structural schema), every record the
//! controller builds is accepted, and what the schema promises is refused or kept as a real
//! API server would. The committed `deploy/clusterset-agent/broker-crd.yaml` is held to this
//! CRD by `bins/clusterset-agent/tests/cli.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::api::core::v1::{Service, ServicePort as CorePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use kube_fake::crd::CrdCheck;
use mcs_controller::broker::{GROUP, KIND, PLURAL, VERSION};
use mcs_controller::crd::export_record_crd;
use mcs_controller::{EndpointMode, ExportRecord, LocalExport};
use mcs_types::{ClusterId, ServiceKey};
use serde_json::{Value, json};

fn check() -> CrdCheck {
    CrdCheck::new(&export_record_crd().unwrap())
}

/// A record as `ExportRecord::from_local` builds it, with endpoints, labels and global IPs.
fn record(mode: EndpointMode) -> ExportRecord {
    let key = ServiceKey::new("rook-ceph", "rook-ceph-mon-a");
    let service = Service {
        spec: Some(ServiceSpec {
            cluster_ip: Some("10.96.0.11".into()),
            ports: Some(vec![CorePort {
                name: Some("tcp-msgr2".into()),
                port: 3300,
                ..Default::default()
            }]),
            ..Default::default()
        }),
        ..Default::default()
    };
    let slice = EndpointSlice {
        metadata: ObjectMeta {
            name: Some("rook-ceph-mon-a-x1".into()),
            namespace: Some("rook-ceph".into()),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: vec![Endpoint {
            addresses: vec!["10.244.0.7".into()],
            ..Default::default()
        }],
        ports: Some(vec![EndpointPort {
            name: Some("tcp-msgr2".into()),
            port: Some(3300),
            ..Default::default()
        }]),
    };
    let export_spec = mcs_types::ServiceExportSpec {
        exported_labels: [("tier".to_owned(), "storage".to_owned())].into(),
        ..Default::default()
    };
    ExportRecord::from_local(LocalExport {
        cluster_id: &ClusterId::new("east").unwrap(),
        key: &key,
        export_created: &Time(Timestamp::from_second(1_800_000_000).unwrap()),
        export_spec: &export_spec,
        service: Some(&service),
        endpoint_slices: &[slice],
        global_ips: &["242.1.0.11".parse().unwrap()],
        mode,
    })
    .unwrap()
}

/// A broker object holding `record`'s JSON.
fn object(spec: Value) -> Value {
    json!({
        "apiVersion": format!("{GROUP}/{VERSION}"),
        "kind": KIND,
        "metadata": {"name": "east.rook-ceph.rook-ceph-mon-a", "namespace": "clusterset-broker-east"},
        "spec": spec,
    })
}

fn spec() -> Value {
    serde_json::to_value(record(EndpointMode::GlobalIngress)).unwrap()
}

/// The fields of the refusals of `object`, with their error kinds.
fn refused(object: &Value) -> Vec<String> {
    check().refused(object)
}

#[test]
fn the_crd_passes_the_api_server_rules() {
    check().assert_crd_accepted();
}

#[test]
fn the_crd_names_one_namespaced_version_with_its_columns_and_no_status() {
    let crd = export_record_crd().unwrap();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("exportrecords.clusterset.io")
    );
    assert_eq!(crd.spec.group, GROUP);
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.kind, KIND);
    assert_eq!(crd.spec.names.plural, PLURAL);
    assert_eq!(crd.spec.names.singular.as_deref(), Some("exportrecord"));
    assert_eq!(
        crd.spec.names.list_kind.as_deref(),
        Some("ExportRecordList")
    );
    assert_eq!(crd.spec.names.short_names, Some(vec!["exrec".to_owned()]));
    assert_eq!(crd.metadata.annotations, None);
    let [version] = crd.spec.versions.as_slice() else {
        panic!("one version: {:?}", crd.spec.versions)
    };
    assert_eq!(version.name, VERSION);
    assert!(version.served && version.storage);
    assert_eq!(version.subresources, None);
    let columns: Vec<_> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| (c.name.as_str(), c.type_.as_str(), c.json_path.as_str()))
        .collect();
    assert_eq!(
        columns,
        [
            ("Cluster", "string", ".spec.clusterId"),
            ("Namespace", "string", ".spec.serviceKey.namespace"),
            ("Service", "string", ".spec.serviceKey.name"),
            ("Exported", "date", ".spec.exportCreated"),
            ("Age", "date", ".metadata.creationTimestamp"),
        ]
    );
}

#[test]
fn every_record_the_controller_builds_is_accepted() {
    for mode in [EndpointMode::GlobalIngress, EndpointMode::PodAddresses] {
        let object = object(serde_json::to_value(record(mode)).unwrap());
        // Nothing the record says is dropped by pruning.
        check().assert_accepted_and_kept(&object, &format!("{mode:?}"));
    }
}

#[test]
fn the_identity_of_a_record_is_checked() {
    let cases: [(&str, Value, &str); 8] = [
        (
            "/clusterId",
            json!("East_1"),
            "spec.clusterId: Invalid value",
        ),
        ("/clusterId", json!(""), "spec.clusterId: Invalid value"),
        (
            "/clusterId",
            json!("e".repeat(64)),
            "spec.clusterId: Too long",
        ),
        (
            "/serviceKey/namespace",
            json!("Rook.Ceph"),
            "spec.serviceKey.namespace: Invalid value",
        ),
        (
            "/serviceKey/name",
            json!("n".repeat(64)),
            "spec.serviceKey.name: Too long",
        ),
        (
            "/exportCreated",
            json!("yesterday"),
            "spec.exportCreated: Invalid value",
        ),
        ("/globalIps", json!([7]), "spec.globalIps[0]: Invalid value"),
        (
            "/exportedLabels",
            json!({"tier": 1}),
            "spec.exportedLabels.tier: Invalid value",
        ),
    ];
    for (pointer, value, expected) in cases {
        let mut spec = spec();
        *spec.pointer_mut(pointer).unwrap() = value;
        check().assert_refused(&object(spec), expected, pointer);
    }
}

#[test]
fn a_record_without_its_required_fields_is_refused() {
    for field in ["clusterId", "serviceKey", "exportCreated", "service"] {
        let mut spec = spec();
        spec.as_object_mut().unwrap().remove(field);
        let errors = refused(&object(spec));
        assert!(
            errors.contains(&format!("spec.{field}: Required value")),
            "{field}: {errors:#?}"
        );
    }
    let mut nameless = spec();
    nameless["serviceKey"]
        .as_object_mut()
        .unwrap()
        .remove("name");
    assert!(
        refused(&object(nameless)).contains(&"spec.serviceKey.name: Required value".to_owned())
    );

    let mut no_spec = object(Value::Null);
    no_spec.as_object_mut().unwrap().remove("spec");
    assert!(refused(&no_spec).contains(&"spec: Required value".to_owned()));

    // Labels, annotations, global IPs and endpoints may be left out.
    let mut minimal = spec();
    for field in [
        "exportedLabels",
        "exportedAnnotations",
        "globalIps",
        "endpoints",
    ] {
        minimal.as_object_mut().unwrap().remove(field);
    }
    assert_eq!(refused(&object(minimal)), Vec::<String>::new());
}

#[test]
fn a_newer_agents_fields_are_kept_and_the_service_and_endpoints_are_not_checked() {
    let mut spec = spec();
    spec["futureField"] = json!({"x": 1});
    spec["service"]["futureServiceField"] = json!(true);
    spec["service"]["ports"] = json!("not checked here: the agents read it with serde");
    spec["endpoints"][0]["futureEndpointField"] = json!([1, 2]);
    let object = object(spec);
    check().assert_accepted_and_kept(&object, "a newer agent's record");

    // The service key is a closed object: an unknown field there is dropped.
    let mut with_extra = object.clone();
    with_extra["spec"]["serviceKey"]["extra"] = json!("x");
    let with_extra = check().pruned(&with_extra);
    assert_eq!(with_extra, object);

    // An endpoints entry must still be an object.
    let mut spec = with_extra["spec"].clone();
    spec["endpoints"] = json!(["10.0.0.1"]);
    check().assert_refused(
        &self::object(spec),
        "spec.endpoints[0]",
        "an endpoint that is no object",
    );
}

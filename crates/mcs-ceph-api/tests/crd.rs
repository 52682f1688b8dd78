//! The `CephClusterAddressing` CRD, generated from [`AddressingStatus`], against the API
//! server's rules (kube-syntax): the CRD itself is accepted, every status the types can hold is
//! accepted and kept whole, and what the schema promises is refused as a real API server
//! would. The committed `deploy/mcs-ceph-operator/crd.yaml` and the Helm chart's copy (plus its
//! `helm.sh/resource-policy: keep`) are held to this CRD by `bins/mcs-ceph-operator/tests/deploy.rs`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use kube_fake::crd::CrdCheck;
use mcs_ceph_api::{
    AddressingStatus, CephClusterAddressing, DaemonEntry, GROUP, KIND, LookupRecord, PLURAL, Phase,
    RemovedOsd, VERSION, crd,
};
use serde_json::{Value, json};

fn check() -> CrdCheck {
    CrdCheck::new(&crd().unwrap())
}

fn at(second: i64) -> Time {
    Time(Timestamp::from_second(second).unwrap())
}

/// A status with every field the types have.
fn full_status() -> AddressingStatus {
    let mut status = AddressingStatus {
        observed_generation: Some(3),
        phase: Phase::Resolving,
        message: "1 of 2 global IPs known".into(),
        ready_daemons: 1,
        daemon_count: 2,
        conditions: vec![Condition {
            type_: "Resolved".into(),
            status: "False".into(),
            reason: "LookupFailed".into(),
            message: "osd.0: no answer".into(),
            last_transition_time: at(1_800_000_000),
            observed_generation: Some(3),
        }],
        daemons: vec![
            DaemonEntry {
                name: "mon.a".into(),
                service: "rook-ceph-mon-a".into(),
                exported: true,
                export: Some("Valid, Ready".into()),
                global_ip: Some("242.1.0.11".into()),
                advertised: Some("242.1.0.11:3300".into()),
                state: "UpToDate".into(),
                message: None,
                lookup: None,
            },
            DaemonEntry {
                name: "osd.0".into(),
                service: "rook-ceph-osd-0".into(),
                exported: true,
                state: "Waiting".into(),
                message: Some("waiting for its global IP".into()),
                lookup: Some(LookupRecord {
                    name: "rook-ceph-osd-0.rook-ceph.svc.clusterset.local".into(),
                    export_uid: Some("u-1".into()),
                    import_ips: vec!["243.0.0.5".into()],
                    error: Some("no answer".into()),
                    failures: 2,
                    retry_at: Some(at(1_800_000_060)),
                }),
                ..DaemonEntry::default()
            },
        ],
        removed_osds: vec![RemovedOsd {
            name: "osd.7".into(),
            since: at(1_800_000_000),
        }],
        mon_host: Some("[v2:242.1.0.11:3300]".into()),
        mon_failover: Some(json!({"phase": "Idle", "moves": []})),
        ..AddressingStatus::default()
    };
    status
        .unknown_fields
        .insert("futureField".into(), json!({"x": 1}));
    status
}

fn object(status: Value) -> Value {
    let mut object = serde_json::to_value(CephClusterAddressing::new(
        "my-cluster",
        "rook-ceph",
        AddressingStatus::default(),
    ))
    .unwrap();
    object["status"] = status;
    object
}

fn status_json() -> Value {
    serde_json::to_value(full_status()).unwrap()
}

#[test]
fn the_crd_passes_the_api_server_rules() {
    check().assert_crd_accepted();
}

#[test]
fn the_crd_names_one_namespaced_version_with_its_columns_and_no_spec() {
    let crd = crd().unwrap();
    assert_eq!(
        crd.metadata.name.as_deref(),
        Some("cephclusteraddressings.clusterset.io")
    );
    assert_eq!(crd.spec.group, GROUP);
    assert_eq!(crd.spec.scope, "Namespaced");
    assert_eq!(crd.spec.names.kind, KIND);
    assert_eq!(crd.spec.names.plural, PLURAL);
    assert_eq!(
        crd.spec.names.singular.as_deref(),
        Some("cephclusteraddressing")
    );
    assert_eq!(
        crd.spec.names.list_kind.as_deref(),
        Some("CephClusterAddressingList")
    );
    assert_eq!(
        crd.spec.names.short_names,
        Some(vec!["cephaddr".to_owned()])
    );
    let [version] = crd.spec.versions.as_slice() else {
        panic!("one version: {:?}", crd.spec.versions)
    };
    assert_eq!(version.name, VERSION);
    assert!(version.served && version.storage);
    // The operator writes the status with the object.
    assert_eq!(version.subresources, None);
    let root = version
        .schema
        .as_ref()
        .and_then(|s| s.open_api_v3_schema.as_ref())
        .unwrap();
    let properties: Vec<_> = root.properties.iter().flatten().map(|(k, _)| k).collect();
    assert_eq!(properties, ["apiVersion", "kind", "metadata", "status"]);
    assert_eq!(root.required, None);
    let columns: Vec<_> = version
        .additional_printer_columns
        .iter()
        .flatten()
        .map(|c| {
            (
                c.name.as_str(),
                c.type_.as_str(),
                c.json_path.as_str(),
                c.priority,
            )
        })
        .collect();
    assert_eq!(
        columns,
        [
            ("Phase", "string", ".status.phase", None),
            ("Ready", "integer", ".status.readyDaemons", None),
            ("Daemons", "integer", ".status.daemonCount", None),
            ("Message", "string", ".status.message", Some(1)),
            ("Age", "date", ".metadata.creationTimestamp", None),
        ]
    );
}

#[test]
fn every_field_of_the_status_is_accepted_and_kept() {
    for (what, status) in [
        (
            "the default status",
            serde_json::to_value(AddressingStatus::default()).unwrap(),
        ),
        ("a full status", status_json()),
    ] {
        check().assert_accepted_and_kept(&object(status), what);
    }
}

#[test]
fn a_newer_operators_phase_and_fields_are_stored() {
    let mut status = status_json();
    status["phase"] = json!("Teleporting");
    status["daemons"][0]["futureDaemonField"] = json!(1);
    status["daemons"][1]["lookup"]["futureLookupField"] = json!("x");
    let object = object(status);
    check().assert_accepted_and_kept(&object, "a newer operator's status");
    let read: CephClusterAddressing = serde_json::from_value(object).unwrap();
    assert_eq!(read.status.unwrap().phase, Phase::Unknown);
}

#[test]
fn what_the_schema_promises_is_refused() {
    let cases: [(&str, Value, &str); 7] = [
        (
            "/daemons/0/exported",
            json!("yes"),
            "status.daemons[0].exported: Invalid value",
        ),
        (
            "/removedOsds/0/since",
            json!("soon"),
            "status.removedOsds[0].since: Invalid value",
        ),
        (
            "/conditions/0/status",
            json!("Maybe"),
            "status.conditions[0].status: Unsupported value",
        ),
        (
            "/conditions/0/message",
            json!("m".repeat(32769)),
            "status.conditions[0].message: Too long",
        ),
        (
            "/readyDaemons",
            json!("one"),
            "status.readyDaemons: Invalid value",
        ),
        (
            "/observedGeneration",
            json!(1.5),
            "status.observedGeneration: Invalid value",
        ),
        (
            "/daemons/1/lookup/retryAt",
            json!("later"),
            "status.daemons[1].lookup.retryAt: Invalid value",
        ),
    ];
    for (pointer, value, expected) in cases {
        let mut status = status_json();
        *status.pointer_mut(pointer).unwrap() = value;
        check().assert_refused(&object(status), expected, pointer);
    }
    for (entry, field) in [
        ("daemons", "name"),
        ("daemons", "service"),
        ("removedOsds", "since"),
    ] {
        let mut status = status_json();
        status[entry][0].as_object_mut().unwrap().remove(field);
        let errors = check().refused(&object(status));
        let expected = format!("status.{entry}[0].{field}: Required value");
        assert!(errors.contains(&expected), "{expected}: {errors:#?}");
    }
}

/// Refused now, accepted by the hand-written CRD this one replaced: values the types cannot
/// read (a negative count, a lookup without its name) and conditions that break the
/// `metav1.Condition` rules every controller-gen CRD carries (the MCS CRDs' schema).
#[test]
fn what_the_types_cannot_read_and_malformed_conditions_are_refused() {
    let cases: [(&str, Value, &str); 5] = [
        (
            "/readyDaemons",
            json!(-1),
            "status.readyDaemons: Invalid value",
        ),
        (
            "/daemonCount",
            json!(-2),
            "status.daemonCount: Invalid value",
        ),
        (
            "/daemons/1/lookup/failures",
            json!(-1),
            "status.daemons[1].lookup.failures: Invalid value",
        ),
        (
            "/conditions/0/reason",
            json!(""),
            "status.conditions[0].reason: ",
        ),
        (
            "/conditions/0/reason",
            json!("lookup failed"),
            "status.conditions[0].reason: Invalid value",
        ),
    ];
    for (pointer, value, expected) in cases {
        let mut status = status_json();
        *status.pointer_mut(pointer).unwrap() = value;
        check().assert_refused(&object(status), expected, pointer);
    }
    let mut status = status_json();
    status["daemons"][1]["lookup"]
        .as_object_mut()
        .unwrap()
        .remove("name");
    let errors = check().refused(&object(status));
    assert!(
        errors.contains(&"status.daemons[1].lookup.name: Required value".to_owned()),
        "{errors:#?}"
    );
}

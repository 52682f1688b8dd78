//! Per-service updates through the store: what changes, what stays, what a bad object does.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

mod common;

use clusterset_dns::wire::{Transport, respond};
use clusterset_dns::{ObjectKind, ZoneChange, ZoneConfig, ZoneObject, ZoneStore};
use common::{import, slice};
use hickory_proto::op::{Message, Query, ResponseCode};
use hickory_proto::rr::{Name, RecordType};

fn wire(store: &ZoneStore, name: &str, qtype: RecordType) -> Message {
    let mut q = Message::query();
    q.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    let mut out = Vec::new();
    assert!(respond(
        &store.snapshot(),
        &q.to_vec().unwrap(),
        Transport::Tcp,
        &mut out
    ));
    Message::from_vec(&out).unwrap()
}

fn rdata(message: &Message) -> Vec<String> {
    message
        .answers
        .iter()
        .chain(&message.additionals)
        .map(|r| r.data.to_string())
        .collect()
}

const SRV_NAME: &str = "_http._tcp.web.shop.svc.clusterset.local.";

#[test]
fn an_ip_change_reaches_the_glue_of_unchanged_srv_names() {
    let store = ZoneStore::new(ZoneConfig::default());
    store.mark_synced();
    let web = |ip: &str| import("shop", "web", "ClusterSetIP", &[ip], &[("http", "TCP", 80)]);
    store.upsert_service_import(&web("242.0.0.1")).unwrap();
    // Encode the SRV answer once, so that a stale one would be served.
    assert_eq!(
        rdata(&wire(&store, SRV_NAME, RecordType::SRV)),
        ["0 100 80 web.shop.svc.clusterset.local.", "242.0.0.1"]
    );
    store.upsert_service_import(&web("242.0.0.2")).unwrap();
    assert_eq!(
        rdata(&wire(&store, SRV_NAME, RecordType::SRV)),
        ["0 100 80 web.shop.svc.clusterset.local.", "242.0.0.2"]
    );
}

#[test]
fn deleting_the_last_import_of_a_namespace_removes_the_namespace() {
    let store = ZoneStore::new(ZoneConfig::default());
    store.mark_synced();
    store
        .upsert_service_import(&import("shop", "web", "ClusterSetIP", &["242.0.0.1"], &[]))
        .unwrap();
    store
        .upsert_service_import(&import("shop", "db", "ClusterSetIP", &["242.0.0.2"], &[]))
        .unwrap();
    let ns = "shop.svc.clusterset.local.";
    assert_eq!(
        wire(&store, ns, RecordType::A).metadata.response_code,
        ResponseCode::NoError
    );
    store.delete_service_import("shop", "web");
    assert_eq!(
        wire(&store, ns, RecordType::A).metadata.response_code,
        ResponseCode::NoError
    );
    assert_eq!(
        wire(&store, "web.shop.svc.clusterset.local.", RecordType::A)
            .metadata
            .response_code,
        ResponseCode::NXDomain
    );
    assert_eq!(
        wire(&store, "1.0.0.242.in-addr.arpa.", RecordType::PTR)
            .metadata
            .response_code,
        ResponseCode::Refused
    );
    store.delete_service_import("shop", "db");
    assert_eq!(
        wire(&store, ns, RecordType::A).metadata.response_code,
        ResponseCode::NXDomain
    );
}

#[test]
fn slices_wait_for_their_import_and_follow_relabelling() {
    let store = ZoneStore::new(ZoneConfig::default());
    store.mark_synced();
    let http = [("http", "TCP", 80)];
    let s = |service: &str| {
        slice(
            "shop",
            "db-east",
            service,
            "east",
            "IPv4",
            &http,
            &[(&["10.0.0.1"], Some("db-0"), None)],
        )
    };
    store.upsert_endpoint_slice(&s("db")).unwrap();
    let db = "db.shop.svc.clusterset.local.";
    assert_eq!(
        wire(&store, db, RecordType::A).metadata.response_code,
        ResponseCode::NXDomain,
        "no import yet"
    );
    store
        .upsert_service_import(&import("shop", "db", "Headless", &[], &http))
        .unwrap();
    assert_eq!(rdata(&wire(&store, db, RecordType::A)), ["10.0.0.1"]);
    // The slice now belongs to another service: it leaves db.
    store
        .upsert_service_import(&import("shop", "db2", "Headless", &[], &http))
        .unwrap();
    store.upsert_endpoint_slice(&s("db2")).unwrap();
    assert_eq!(
        wire(&store, db, RecordType::A).metadata.response_code,
        ResponseCode::NXDomain
    );
    assert_eq!(
        rdata(&wire(
            &store,
            "db-0.east.db2.shop.svc.clusterset.local.",
            RecordType::A
        )),
        ["10.0.0.1"]
    );
    store.delete_endpoint_slice("shop", "db-east");
    assert_eq!(
        wire(&store, "db2.shop.svc.clusterset.local.", RecordType::A)
            .metadata
            .response_code,
        ResponseCode::NXDomain
    );
}

#[test]
fn one_ptr_name_serves_every_service_that_holds_the_address() {
    let store = ZoneStore::new(ZoneConfig::default());
    store.mark_synced();
    for service in ["db", "db-read"] {
        store
            .upsert_service_import(&import("shop", service, "Headless", &[], &[]))
            .unwrap();
        let s = slice(
            "shop",
            &format!("{service}-east"),
            service,
            "east",
            "IPv4",
            &[],
            &[(&["10.0.0.1"], Some("db-0"), None)],
        );
        store.upsert_endpoint_slice(&s).unwrap();
    }
    let ptr = "1.0.0.10.in-addr.arpa.";
    let mut names = rdata(&wire(&store, ptr, RecordType::PTR));
    names.sort();
    assert_eq!(
        names,
        [
            "db-0.east.db-read.shop.svc.clusterset.local.",
            "db-0.east.db.shop.svc.clusterset.local."
        ]
    );
    store.delete_service_import("shop", "db");
    assert_eq!(
        rdata(&wire(&store, ptr, RecordType::PTR)),
        ["db-0.east.db-read.shop.svc.clusterset.local."]
    );
}

#[test]
fn bad_objects_are_rejected_by_name_and_field_and_the_last_good_version_stays() {
    let store = ZoneStore::new(ZoneConfig::default());
    store.mark_synced();
    store
        .upsert_service_import(&import("shop", "web", "ClusterSetIP", &["242.0.0.1"], &[]))
        .unwrap();
    let bad = import("shop", "web", "ClusterSetIP", &["242.0.0.300"], &[]);
    let err = store.upsert_service_import(&bad).unwrap_err();
    assert_eq!(err.kind, ObjectKind::ServiceImport);
    assert_eq!(
        err.to_string(),
        "ServiceImport shop/web: spec.ips[0]: \"242.0.0.300\" is not an IPv4 or IPv6 address"
    );
    assert_eq!(
        rdata(&wire(
            &store,
            "web.shop.svc.clusterset.local.",
            RecordType::A
        )),
        ["242.0.0.1"]
    );

    let bad_port = import(
        "shop",
        "api",
        "ClusterSetIP",
        &["242.0.0.2"],
        &[("http", "TCP", 70000)],
    );
    let unlabelled: k8s_openapi::api::discovery::v1::EndpointSlice =
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "x", "namespace": "shop"}, "addressType": "IPv4", "endpoints": []
        }))
        .unwrap();
    let good = import("shop", "ok", "ClusterSetIP", &["242.0.0.3"], &[]);
    let report = store.apply([
        ZoneChange::Upsert(ZoneObject::ServiceImport(Box::new(bad_port))),
        ZoneChange::Upsert(ZoneObject::EndpointSlice(Box::new(unlabelled))),
        ZoneChange::Upsert(ZoneObject::ServiceImport(Box::new(good))),
    ]);
    assert_eq!(report.applied, 1);
    let messages: Vec<String> = report.rejected.iter().map(ToString::to_string).collect();
    assert_eq!(
        messages,
        [
            "ServiceImport shop/api: spec.ports[0].port: 70000 is not a port number (1-65535)",
            "EndpointSlice shop/x: metadata.labels[multicluster.kubernetes.io/service-name]: is missing: an MCS EndpointSlice names its ServiceImport in this label",
        ]
    );
    assert_eq!(
        rdata(&wire(
            &store,
            "ok.shop.svc.clusterset.local.",
            RecordType::A
        )),
        ["242.0.0.3"]
    );

    // replace_all is all or nothing.
    let err = store
        .replace_all(vec![ZoneObject::ServiceImport(Box::new(bad))])
        .unwrap_err();
    assert_eq!(err.len(), 1);
    assert_eq!(
        rdata(&wire(
            &store,
            "web.shop.svc.clusterset.local.",
            RecordType::A
        )),
        ["242.0.0.1"]
    );
}

/// A service with an import skips the checks its import passed (its namespace and name, ports
/// equal to its ports); anything else in a new import of it is checked in full.
#[test]
fn a_new_import_of_a_known_service_is_checked_where_it_differs() {
    let store = ZoneStore::new(ZoneConfig::default());
    store.mark_synced();
    let good = import(
        "shop",
        "web",
        "ClusterSetIP",
        &["242.0.0.1"],
        &[("http", "TCP", 80), ("dns", "UDP", 53)],
    );
    store.upsert_service_import(&good).unwrap();
    type Ports<'a> = &'a [(&'a str, &'a str, i32)];
    let cases: [(Ports, &str); 5] = [
        (
            &[("http", "TCP", 80), ("dns", "XYZ", 53)],
            "spec.ports[1].protocol: unknown protocol \"XYZ\"",
        ),
        (
            &[("http", "TCP", 80), ("dns", "UDP", 70053)],
            "spec.ports[1].port: 70053 is not a port number (1-65535)",
        ),
        (
            &[("http", "TCP", 0), ("dns", "UDP", 53)],
            "spec.ports[0].port: 0 is not a port number (1-65535)",
        ),
        (
            &[("HTTP", "TCP", 80), ("dns", "UDP", 53)],
            "spec.ports[0].name: port name \"HTTP\"",
        ),
        (
            &[("http", "TCP", 80), ("dns", "UDP", 53), ("dns_", "UDP", 54)],
            "spec.ports[2].name: port name \"dns_\"",
        ),
    ];
    for (ports, problem) in cases {
        let bad = import("shop", "web", "ClusterSetIP", &["242.0.0.9"], ports);
        let err = store.upsert_service_import(&bad).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("ServiceImport shop/web: {problem}")),
            "{ports:?}: {err}"
        );
    }
    // The last good import keeps serving; the same ports with a new address are accepted.
    let name = "web.shop.svc.clusterset.local.";
    assert_eq!(rdata(&wire(&store, name, RecordType::A)), ["242.0.0.1"]);
    let moved = import(
        "shop",
        "web",
        "ClusterSetIP",
        &["242.0.0.2"],
        &[("http", "TCP", 80), ("dns", "UDP", 53)],
    );
    store.upsert_service_import(&moved).unwrap();
    assert_eq!(rdata(&wire(&store, name, RecordType::A)), ["242.0.0.2"]);
}

#[test]
fn documents_of_other_kinds_and_wrong_shapes_name_the_field() {
    let err = ZoneObject::from_document(serde_json::json!({
        "apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "shop"}
    }))
    .unwrap_err();
    assert_eq!(err.object, "shop/web");
    assert!(
        err.to_string().contains("is not served in clusterset DNS"),
        "{err}"
    );
    let err = ZoneObject::from_document(serde_json::json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"type": "Loadbalanced", "ports": []}
    }))
    .unwrap_err();
    assert_eq!(err.field, "spec.type");
    assert!(
        err.problem.contains("unknown variant `Loadbalanced`"),
        "{err}"
    );
}

#[test]
fn a_snapshot_answers_from_its_own_facts_even_when_first_asked_after_a_change() {
    let store = ZoneStore::new(ZoneConfig::default());
    store.mark_synced();
    let web = |ip: &str| import("shop", "web", "ClusterSetIP", &[ip], &[("http", "TCP", 80)]);
    store.upsert_service_import(&web("242.0.0.1")).unwrap();
    // Nobody has asked for web yet: its answers are computed on the first query, and an old
    // snapshot must compute them from its own facts.
    let old = store.snapshot();
    store.upsert_service_import(&web("242.0.0.2")).unwrap();
    let ask = |snapshot: &clusterset_dns::wire::Snapshot, name: &str, qtype| {
        let mut q = Message::query();
        q.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
        let mut out = Vec::new();
        assert!(respond(
            snapshot,
            &q.to_vec().unwrap(),
            Transport::Udp,
            &mut out
        ));
        rdata(&Message::from_vec(&out).unwrap())
    };
    let name = "web.shop.svc.clusterset.local.";
    assert_eq!(ask(&old, name, RecordType::A), ["242.0.0.1"]);
    assert_eq!(ask(&store.snapshot(), name, RecordType::A), ["242.0.0.2"]);
    assert_eq!(
        ask(&old, "1.0.0.242.in-addr.arpa.", RecordType::PTR),
        ["web.shop.svc.clusterset.local."]
    );
    assert!(
        ask(
            &store.snapshot(),
            "1.0.0.242.in-addr.arpa.",
            RecordType::PTR
        )
        .is_empty()
    );
}

#[test]
fn unchanged_facts_publish_nothing() {
    let store = ZoneStore::new(ZoneConfig::default());
    store.mark_synced();
    let web = import(
        "shop",
        "web",
        "ClusterSetIP",
        &["242.0.0.1"],
        &[("http", "TCP", 80)],
    );
    let report = store.apply([ZoneChange::Upsert(ZoneObject::ServiceImport(Box::new(
        web.clone(),
    )))]);
    assert_eq!((report.applied, report.names_recomputed), (1, 1));
    let before = store.snapshot();
    let report = store.apply([ZoneChange::Upsert(ZoneObject::ServiceImport(Box::new(web)))]);
    assert_eq!((report.applied, report.names_recomputed), (1, 0));
    assert!(std::sync::Arc::ptr_eq(&before, &store.snapshot()));
    // Deleting what is not there is no change either.
    store.delete_endpoint_slice("shop", "nope");
    store.delete_service_import("shop", "nope");
    assert!(std::sync::Arc::ptr_eq(&before, &store.snapshot()));
}

#[test]
fn the_model_still_reports_the_names_a_change_touched() {
    use clusterset_dns::ClustersetZone;
    let mut zone = ClustersetZone::new(ZoneConfig::default());
    let web = |ip: &str| import("shop", "web", "ClusterSetIP", &[ip], &[("http", "TCP", 80)]);
    let mut changed: Vec<String> = zone
        .upsert_service_import(&web("242.0.0.1"))
        .unwrap()
        .into_iter()
        .collect();
    changed.sort();
    assert_eq!(
        changed,
        [
            "1.0.0.242.in-addr.arpa",
            "_http._tcp.web.shop.svc.clusterset.local",
            "shop.svc.clusterset.local",
            "web.shop.svc.clusterset.local",
        ]
    );
    assert!(
        zone.upsert_service_import(&web("242.0.0.1"))
            .unwrap()
            .is_empty()
    );
    let mut changed: Vec<String> = zone
        .upsert_service_import(&web("242.0.0.2"))
        .unwrap()
        .into_iter()
        .collect();
    changed.sort();
    assert_eq!(
        changed,
        [
            "1.0.0.242.in-addr.arpa",
            "2.0.0.242.in-addr.arpa",
            "_http._tcp.web.shop.svc.clusterset.local",
            "web.shop.svc.clusterset.local",
        ]
    );
    let mut names: Vec<&str> = zone.names().collect();
    names.sort_unstable();
    assert!(names.contains(&"2.0.0.242.in-addr.arpa"));
    assert!(!names.contains(&"1.0.0.242.in-addr.arpa"));
    let mut changed: Vec<String> = zone
        .delete_service_import("shop", "web")
        .into_iter()
        .collect();
    changed.sort();
    assert_eq!(
        changed,
        [
            "2.0.0.242.in-addr.arpa",
            "_http._tcp.web.shop.svc.clusterset.local",
            "shop.svc.clusterset.local",
            "web.shop.svc.clusterset.local",
        ]
    );
    assert_eq!(zone.service_count(), 0);
}

#[test]
fn every_snapshot_answers_with_its_own_serial_at_the_apex_and_in_negative_answers() {
    let store = ZoneStore::new(ZoneConfig::default());
    store.mark_synced();
    let serial = |message: &Message| -> String {
        let soa = message
            .answers
            .iter()
            .chain(&message.authorities)
            .find(|r| r.record_type() == RecordType::SOA)
            .expect("an SOA record");
        soa.data.to_string().split(' ').nth(2).unwrap().to_owned()
    };
    let mut seen = Vec::new();
    for (i, ip) in ["242.0.0.1", "242.0.0.2", "242.0.0.3"].iter().enumerate() {
        store
            .upsert_service_import(&import(
                "shop",
                "web",
                "ClusterSetIP",
                &[ip],
                &[("http", "TCP", 80)],
            ))
            .unwrap();
        let apex = wire(&store, "clusterset.local.", RecordType::SOA);
        // `svc.<zone>` exists without data (NODATA), `dns-version` has no A: both carry the SOA.
        let nodata = wire(&store, "svc.clusterset.local.", RecordType::A);
        let version = wire(&store, "dns-version.clusterset.local.", RecordType::A);
        let txt = wire(&store, "dns-version.clusterset.local.", RecordType::TXT);
        assert_eq!(rdata(&txt), ["1.0.0"], "change {i}");
        let serials = [serial(&apex), serial(&nodata), serial(&version)];
        assert!(serials.iter().all(|s| *s == serials[0]), "{serials:?}");
        assert_eq!(
            serials[0],
            store.answer("clusterset.local", RecordType::SOA).answers[0]
                .data
                .to_string()
                .split(' ')
                .nth(2)
                .unwrap()
        );
        seen.push(serials[0].clone());
    }
    seen.dedup();
    assert_eq!(seen.len(), 3, "each change raises the serial: {seen:?}");
}

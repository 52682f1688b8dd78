//! Any datagram, over UDP or TCP, gets a well-formed answer (or FORMERR, NOTIMP, REFUSED,
//! SERVFAIL, BADVERS) with the request's id, or nothing when it is shorter than a header or is
//! itself a response; never a panic, and UDP answers always fit the client's buffer.
//!
//! `cargo fuzz run respond` (nightly), or see docs/clusterset-dns.md for the stable-toolchain
//! build used in CI-less runs.
#![no_main]

#[path = "../../benches/common/synthetic.rs"]
mod synthetic;

use std::sync::LazyLock;

use clusterset_dns::wire::{Transport, respond, MAX_UDP_PAYLOAD};
use clusterset_dns::{ZoneConfig, ZoneObject, ZoneStore};
use hickory_proto::op::Message;
use libfuzzer_sys::fuzz_target;

/// A zone with every kind of name: ClusterSetIP services (synthetic), a dual-stack one, a
/// headless service with hostnames, dashed IPs, a not-ready endpoint and IPv6.
static STORE: LazyLock<ZoneStore> = LazyLock::new(|| {
    let mut objects = synthetic::zone_objects(20);
    let documents = [
        serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
            "metadata": {"name": "db", "namespace": "shop"},
            "spec": {"type": "Headless", "ports": [{"name": "pg", "port": 5432}]}
        }),
        serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"type": "ClusterSetIP", "ips": ["242.0.0.1", "fd00::1"],
                     "ports": [{"name": "http", "port": 80}, {"name": "dns", "protocol": "UDP", "port": 53}]}
        }),
        serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "db-east", "namespace": "shop", "labels": {
                "multicluster.kubernetes.io/service-name": "db",
                "multicluster.kubernetes.io/source-cluster": "east"}},
            "addressType": "IPv4",
            "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}],
            "endpoints": [
                {"addresses": ["10.0.0.1"], "hostname": "db-0"},
                {"addresses": ["10.0.0.2"]},
                {"addresses": ["10.0.0.3"], "conditions": {"ready": false}}
            ]
        }),
        serde_json::json!({
            "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "db-west", "namespace": "shop", "labels": {
                "multicluster.kubernetes.io/service-name": "db",
                "multicluster.kubernetes.io/source-cluster": "west"}},
            "addressType": "IPv6",
            "ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}],
            "endpoints": [{"addresses": ["fd00::10"], "hostname": "db-0"}]
        }),
    ];
    for document in documents {
        match ZoneObject::from_document(document) {
            Ok(object) => objects.push(object),
            Err(e) => panic!("fuzz fixture: {e}"),
        }
    }
    let config = ZoneConfig { lighthouse_cluster_names: true, ..ZoneConfig::default() };
    let store = ZoneStore::new(config);
    if let Err(errors) = store.replace_all(objects) {
        panic!("fuzz fixture: {errors:?}");
    }
    store
});

fuzz_target!(|data: &[u8]| {
    let snapshot = STORE.snapshot();
    let mut out = Vec::new();
    for transport in [Transport::Udp, Transport::Tcp] {
        if !respond(&snapshot, data, transport, &mut out) {
            assert!(data.len() < 12 || data[2] & 0x80 != 0, "silence is only for short datagrams and responses");
            continue;
        }
        let answer = match Message::from_vec(&out) {
            Ok(answer) => answer,
            Err(e) => panic!("malformed answer ({e}) to {data:02x?}: {out:02x?}"),
        };
        assert_eq!(answer.metadata.id, u16::from_be_bytes([data[0], data[1]]));
        assert_eq!(out[2] & 0x80, 0x80, "QR set");
        if transport == Transport::Udp {
            assert!(out.len() <= usize::from(MAX_UDP_PAYLOAD), "UDP answer of {} bytes", out.len());
        }
    }
});

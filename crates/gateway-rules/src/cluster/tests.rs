use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use mcs_controller::broker::{BrokerRecord, GatewayRecord, GatewaySpec};
use serde_json::json;

use super::*;
use crate::RuleSet;

const BROKER: &str = "clusterset-broker";

fn east() -> ClusterNetworks {
    ClusterNetworks {
        cluster_id: ClusterId::new("east").unwrap(),
        global_range: "242.0.0.0/8".parse().unwrap(),
        global_cidr: "242.1.0.0/16".parse().unwrap(),
        pod_cidr: "10.244.0.0/16".parse().unwrap(),
        service_cidr: "10.96.0.0/12".parse().unwrap(),
        egress_ips: vec!["242.1.255.254".parse().unwrap()],
        gateway_ip: "172.30.0.1".parse().unwrap(),
    }
}

/// The agent's record of `cluster`'s export `namespace/name` with `global_ips`, stored in
/// `stored_in`.
fn record(
    cluster: &str,
    namespace: &str,
    name: &str,
    global_ips: &[&str],
    stored_in: &str,
) -> BrokerRecord {
    serde_json::from_value(json!({
        "apiVersion": "clusterset.io/v1alpha1", "kind": "ExportRecord",
        "metadata": {"name": format!("{cluster}.{namespace}.{name}"), "namespace": stored_in},
        "spec": {
            "clusterId": cluster, "serviceKey": {"namespace": namespace, "name": name},
            "exportCreated": "2026-01-01T00:00:00Z",
            "service": {"headless": false, "ports": [], "sessionAffinity": "None",
                        "ipFamilies": ["IPv4"], "internalTrafficPolicy": "Cluster"},
            "globalIps": global_ips,
            "endpoints": []
        }
    }))
    .unwrap()
}

fn own(namespace: &str, name: &str, global_ip: &str) -> BrokerRecord {
    record(
        "east",
        namespace,
        name,
        &[global_ip],
        "clusterset-broker-east",
    )
}

/// A slice of Service `namespace/service`: `(address, ready)` per endpoint.
fn slice(
    namespace: &str,
    service: &str,
    name: &str,
    endpoints: &[(&str, Option<bool>)],
) -> EndpointSlice {
    serde_json::from_value(json!({
        "metadata": {"name": name, "namespace": namespace, "labels": {
            "kubernetes.io/service-name": service,
            "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io",
        }},
        "addressType": "IPv4",
        "endpoints": endpoints.iter().map(|(address, ready)| json!({
            "addresses": [address], "conditions": {"ready": ready},
        })).collect::<Vec<_>>(),
    }))
    .unwrap()
}

fn gateway(cluster: &str, cidr: &str, gateway_ip: &str) -> GatewayRecord {
    GatewayRecord::new(
        &GatewaySpec {
            cluster_id: ClusterId::new(cluster).unwrap(),
            global_cidr: cidr.parse().unwrap(),
            gateway_ip: gateway_ip.parse().unwrap(),
        },
        BROKER,
    )
}

fn assemble(
    records: &[BrokerRecord],
    slices: &[EndpointSlice],
    gateways: &[GatewayRecord],
) -> Assembled {
    let records: Vec<&BrokerRecord> = records.iter().collect();
    let slices: Vec<&EndpointSlice> = slices.iter().collect();
    let gateways: Vec<&GatewayRecord> = gateways.iter().collect();
    gateway_state(
        &east(),
        ClusterObjects {
            broker_namespace: BROKER,
            own_records: &records,
            local_slices: &slices,
            gateways: &gateways,
        },
    )
}

#[test]
fn exports_get_their_ready_pods_and_peers_their_gateways() {
    let mut imported = slice("rook-ceph", "mon-a", "imported", &[("10.244.9.9", None)]);
    imported.metadata.labels.as_mut().unwrap().insert(
        "endpointslice.kubernetes.io/managed-by".into(),
        "mcs-controller.clusterset.io".into(),
    );
    let assembled = assemble(
        &[
            own("rook-ceph", "mon-a", "242.1.0.11"),
            own("rook-ceph", "osd-0", "242.1.0.20"),
        ],
        &[
            // Two slices of mon-a, one endpoint not ready, one listed twice.
            slice(
                "rook-ceph",
                "mon-a",
                "mon-a-1",
                &[("10.244.0.12", Some(true)), ("10.244.0.13", Some(false))],
            ),
            slice(
                "rook-ceph",
                "mon-a",
                "mon-a-2",
                &[("10.244.0.11", None), ("10.244.0.12", Some(true))],
            ),
            // The agent's imported slice and another namespace's service of the same name.
            imported,
            slice("other", "mon-a", "mon-a-x", &[("10.244.7.7", None)]),
        ],
        &[
            gateway("west", "242.2.0.0/16", "172.30.0.2"),
            gateway("east", "242.1.0.0/16", "172.30.0.1"),
            gateway("north", "242.3.0.0/16", "172.30.0.3"),
        ],
    );
    assert_eq!(assembled.skipped, []);
    let state = assembled.state;
    assert_eq!(state.cluster_id, "east");
    let exports: Vec<(String, Ipv4Addr, Backend)> = state
        .exports
        .iter()
        .map(|e| (e.key(), e.global_ip, e.backend.clone()))
        .collect();
    assert_eq!(
        exports,
        [
            (
                "rook-ceph/mon-a".to_owned(),
                "242.1.0.11".parse().unwrap(),
                Backend::Endpoints(vec![
                    "10.244.0.11".parse().unwrap(),
                    "10.244.0.12".parse().unwrap()
                ])
            ),
            // No slice yet: a valid export without endpoints (its global IP is rejected).
            (
                "rook-ceph/osd-0".to_owned(),
                "242.1.0.20".parse().unwrap(),
                Backend::Endpoints(vec![])
            ),
        ]
    );
    let peers: Vec<(&str, String, String)> = state
        .peers
        .iter()
        .map(|p| {
            (
                p.cluster_id.as_str(),
                p.global_cidr.to_string(),
                p.gateway.to_string(),
            )
        })
        .collect();
    assert_eq!(
        peers,
        [
            ("north", "242.3.0.0/16".to_owned(), "172.30.0.3".to_owned()),
            ("west", "242.2.0.0/16".to_owned(), "172.30.0.2".to_owned()),
        ]
    );
    // The state is one the rules accept.
    let rules = RuleSet::desired(&state).unwrap();
    assert_eq!(rules.ingress().len(), 2);
}

#[test]
fn the_same_objects_in_any_order_give_the_same_state() {
    let records = [
        own("a", "x", "242.1.0.1"),
        own("b", "y", "242.1.0.2"),
        own("a", "z", "242.1.0.3"),
    ];
    let slices = [
        slice(
            "a",
            "x",
            "x1",
            &[("10.244.0.3", None), ("10.244.0.1", None)],
        ),
        slice("a", "x", "x2", &[("10.244.0.2", None)]),
        slice("b", "y", "y1", &[("10.244.1.1", None)]),
    ];
    let gateways = [
        gateway("west", "242.2.0.0/16", "172.30.0.2"),
        gateway("north", "242.3.0.0/16", "172.30.0.3"),
    ];
    let forward = assemble(&records, &slices, &gateways);
    let mut records_rev = records.clone();
    records_rev.reverse();
    let mut slices_rev = slices.clone();
    slices_rev.reverse();
    let mut gateways_rev = gateways.clone();
    gateways_rev.reverse();
    assert_eq!(assemble(&records_rev, &slices_rev, &gateways_rev), forward);
}

#[test]
fn a_bad_object_is_left_out_with_its_reason_and_the_others_keep_their_rules() {
    let mut v6_peer = gateway("south", "fd00:242::/48", "fd00::5");
    v6_peer.metadata.name = Some("south".into());
    let mut forged = gateway("west", "242.2.0.0/16", "172.30.0.66");
    forged.metadata.namespace = Some("clusterset-broker-north".into());
    let assembled = assemble(
        &[
            own("rook-ceph", "mon-a", "242.1.0.11"),
            // The agent's --global-cidr is not the gateway's.
            own("rook-ceph", "mon-b", "242.9.0.12"),
            // West's record in east's namespace: not east's.
            record(
                "west",
                "rook-ceph",
                "mon-c",
                &["242.2.0.13"],
                "clusterset-broker-east",
            ),
            // East's record in the shared namespace: any member could have written it.
            record("east", "rook-ceph", "mon-d", &["242.1.0.14"], BROKER),
        ],
        &[slice(
            "rook-ceph",
            "mon-a",
            "s",
            &[("10.244.0.11", None), ("192.168.1.5", None)],
        )],
        &[
            gateway("north", "242.3.0.0/16", "172.30.0.3"),
            forged,
            v6_peer,
        ],
    );
    let reasons: Vec<String> = assembled.skipped.iter().map(ToString::to_string).collect();
    let expect = [
        "export rook-ceph/mon-a: endpoint 192.168.1.5 is outside the pod CIDR 10.244.0.0/16",
        "export rook-ceph/mon-b has no global IP in this cluster's global CIDR 242.1.0.0/16 (its record lists [242.9.0.12])",
        "export record west.rook-ceph.mon-c: it is cluster west's, not this gateway's cluster east",
        "export record east.rook-ceph.mon-d: record of cluster east stored in the shared broker namespace clusterset-broker",
        "gateway record of cluster west stored as clusterset-broker-north/west, where cluster west cannot write",
        "the gateway of cluster south publishes fd00:242::/48 via fd00::5: not IPv4",
    ];
    for expected in expect {
        assert!(
            reasons.iter().any(|r| r.contains(expected)),
            "no {expected:?} in {reasons:#?}"
        );
    }
    assert_eq!(reasons.len(), expect.len(), "{reasons:#?}");
    let state = assembled.state;
    assert_eq!(state.exports.len(), 1);
    assert_eq!(
        state.exports[0].backend,
        Backend::Endpoints(vec!["10.244.0.11".parse().unwrap()])
    );
    assert_eq!(state.peers.len(), 1);
    assert_eq!(state.peers[0].cluster_id, "north");
    assert!(RuleSet::desired(&state).is_ok());
}

#[test]
fn a_peer_that_could_steer_this_node_s_traffic_is_not_routed_and_the_others_are() {
    let mut older = gateway("west", "242.2.0.0/16", "172.30.0.2");
    older.metadata.creation_timestamp = Some(Time(Timestamp::from_second(1_800_000_000).unwrap()));
    let mut newer = gateway("north", "242.2.128.0/17", "172.30.0.3");
    newer.metadata.creation_timestamp = Some(Time(Timestamp::from_second(1_800_000_100).unwrap()));
    let assembled = assemble(
        &[own("a", "x", "242.1.0.1")],
        &[],
        &[
            newer,
            older,
            // The hub's API server, or any address: outside the clusterset's global range.
            gateway("south", "10.0.0.1/32", "172.30.0.4"),
            // Overlapping this cluster's global CIDR, and a gateway inside the pod CIDR.
            gateway("east2", "242.1.128.0/17", "172.30.0.5"),
            gateway("west2", "242.5.0.0/16", "10.244.3.3"),
            gateway("ok", "242.6.0.0/16", "172.30.0.6"),
        ],
    );
    let reasons: Vec<String> = assembled.skipped.iter().map(ToString::to_string).collect();
    let expect = [
        "cluster north (242.2.128.0/17 via 172.30.0.3) conflicts with cluster west's global CIDR 242.2.0.0/16",
        "cluster south publishes global CIDR 10.0.0.1/32, outside the clusterset's global range 242.0.0.0/8",
        "cluster east2 (242.1.128.0/17 via 172.30.0.5) conflicts with this cluster's global CIDR 242.1.0.0/16",
        "cluster west2 (242.5.0.0/16 via 10.244.3.3) conflicts with the pod CIDR 10.244.0.0/16 (its gateway is inside it)",
    ];
    for expected in expect {
        assert!(
            reasons.iter().any(|r| r.contains(expected)),
            "no {expected:?} in {reasons:#?}"
        );
    }
    assert_eq!(reasons.len(), expect.len(), "{reasons:#?}");
    let peers: Vec<&str> = assembled
        .state
        .peers
        .iter()
        .map(|p| p.cluster_id.as_str())
        .collect();
    assert_eq!(
        peers,
        ["ok", "west"],
        "the older of two overlapping peers keeps its route"
    );
    assert!(
        RuleSet::desired(&assembled.state).is_ok(),
        "what is left is a valid state"
    );
}

#[test]
fn the_published_spec_is_the_flags() {
    let spec = east().gateway_spec();
    assert_eq!(spec.cluster_id.as_str(), "east");
    assert_eq!(spec.global_cidr.to_string(), "242.1.0.0/16");
    assert_eq!(spec.gateway_ip.to_string(), "172.30.0.1");
}

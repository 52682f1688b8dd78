//! Builders for the objects of the tests: ServiceImports and MCS EndpointSlices, written as the
//! JSON an API server would return.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use clusterset_dns::{ZoneObject, ZoneStore};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use mcs_types::v1beta1::ServiceImport;
use serde_json::{Value, json};

/// A ServiceImport; `ports` are (name, protocol, port).
pub fn import(
    ns: &str,
    name: &str,
    type_: &str,
    ips: &[&str],
    ports: &[(&str, &str, i32)],
) -> ServiceImport {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p, port)| {
            let mut v = json!({"protocol": p, "port": port});
            if !n.is_empty() {
                v["name"] = json!(n);
            }
            v
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1",
        "kind": "ServiceImport",
        "metadata": {"name": name, "namespace": ns},
        "spec": {"type": type_, "ips": ips, "ports": ports},
    }))
    .unwrap()
}

/// An endpoint: (addresses, hostname, ready).
pub type Ep<'a> = (&'a [&'a str], Option<&'a str>, Option<bool>);

/// An MCS EndpointSlice of `service` from `cluster`.
pub fn slice(
    ns: &str,
    name: &str,
    service: &str,
    cluster: &str,
    address_type: &str,
    ports: &[(&str, &str, i32)],
    endpoints: &[Ep<'_>],
) -> EndpointSlice {
    let ports: Vec<Value> = ports
        .iter()
        .map(|(n, p, port)| json!({"name": n, "protocol": p, "port": port}))
        .collect();
    let endpoints: Vec<Value> = endpoints
        .iter()
        .map(|(addresses, hostname, ready)| {
            let mut v = json!({"addresses": addresses});
            if let Some(h) = hostname {
                v["hostname"] = json!(h);
            }
            if let Some(r) = ready {
                v["conditions"] = json!({"ready": r});
            }
            v
        })
        .collect();
    serde_json::from_value(json!({
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": ns,
            "labels": {
                "multicluster.kubernetes.io/service-name": service,
                "multicluster.kubernetes.io/source-cluster": cluster,
                "endpointslice.kubernetes.io/managed-by": "mcs-controller.clusterset.io",
            },
        },
        "addressType": address_type,
        "ports": ports,
        "endpoints": endpoints,
    }))
    .unwrap()
}

/// The objects of the CoreDNS multicluster handler tests, in namespace `testns`, cluster id
/// `clusterid` (see the crate's table tests).
pub fn coredns_fixture() -> Vec<ZoneObject> {
    let http = [("http", "TCP", 80)];
    let imports = vec![
        import("testns", "svc1", "ClusterSetIP", &["10.0.0.5"], &http),
        import("testns", "svc6", "ClusterSetIP", &["1234:abcd::1"], &http),
        import(
            "testns",
            "svcdual",
            "ClusterSetIP",
            &["10.0.0.7", "1234:abcd::7"],
            &http,
        ),
        import("testns", "svcempty", "ClusterSetIP", &["10.0.0.8"], &http),
        import("testns", "noips", "ClusterSetIP", &[], &http),
        import(
            "testns",
            "tcpudp",
            "ClusterSetIP",
            &["10.0.0.9"],
            &[("tcp", "TCP", 42), ("udp", "UDP", 42)],
        ),
        import("testns", "hdls1", "Headless", &[], &http),
        import("testns", "hdlsportless", "Headless", &[], &[]),
        import("testns", "hdlsnoready", "Headless", &[], &http),
    ];
    let slices = vec![
        slice(
            "testns",
            "svc1-c1",
            "svc1",
            "clusterid",
            "IPv4",
            &http,
            &[(&["172.0.0.1"], Some("ep1a"), None)],
        ),
        slice(
            "testns",
            "hdls1-c1-v4",
            "hdls1",
            "clusterid",
            "IPv4",
            &http,
            &[
                (&["172.0.0.2"], None, Some(true)),
                (&["172.0.0.3"], Some("ep3"), None),
                (&["172.0.0.4"], Some("dup-name"), Some(true)),
                (&["172.0.0.5"], Some("dup-name"), Some(true)),
                (&["172.0.0.9"], Some("notready"), Some(false)),
            ],
        ),
        slice(
            "testns",
            "hdls1-c1-v6",
            "hdls1",
            "clusterid",
            "IPv6",
            &http,
            &[
                (&["5678:abcd::1"], None, None),
                (&["5678:abcd::2"], Some("ep6"), None),
            ],
        ),
        slice(
            "testns",
            "hdlsportless-c1",
            "hdlsportless",
            "clusterid",
            "IPv4",
            &[],
            &[(&["172.0.1.1"], None, None)],
        ),
        slice(
            "testns",
            "hdlsnoready-c1",
            "hdlsnoready",
            "clusterid",
            "IPv4",
            &http,
            &[(&["172.0.2.1"], None, Some(false))],
        ),
    ];
    imports
        .into_iter()
        .map(|i| ZoneObject::ServiceImport(Box::new(i)))
        .chain(
            slices
                .into_iter()
                .map(|s| ZoneObject::EndpointSlice(Box::new(s))),
        )
        .collect()
}

/// A synced store holding `objects`.
pub fn store_with(config: clusterset_dns::ZoneConfig, objects: Vec<ZoneObject>) -> ZoneStore {
    let store = ZoneStore::new(config);
    store.replace_all(objects).unwrap();
    store
}

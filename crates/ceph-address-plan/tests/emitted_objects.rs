//! Every object the planner builds is one a real API server accepts (kube-syntax's rules): for
//! arbitrary valid inputs — namespaces, cluster names and cluster ids at their maximum lengths,
//! OSD ids in the thousands, mon ids far past `z` — the Services, ServiceExports and the
//! `rook-ceph-mon-endpoints` ConfigMap pass, and every label is a valid key and value.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::net::{IpAddr, Ipv4Addr, SocketAddr};

use ceph_address_plan::{
    CephVersion, ClusterSettings, Daemon, DnsNameForm, Inventory, MonId, MonInput, OsdInput, Plan,
    PlanInput,
};
use kube_syntax::object::{Catalog, Completeness};
use proptest::prelude::*;

fn catalog() -> Catalog {
    mcs_types::crd::mcs_crds()
        .unwrap()
        .into_iter()
        .map(|crd| serde_json::to_value(crd).unwrap())
        .fold(Catalog::builtin(), |catalog, crd| catalog.with_crd(&crd))
}

/// A DNS-1123 label of 1..=63 characters (namespaces, cluster ids).
fn dns_label() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]([-a-z0-9]{0,61}[a-z0-9])?",
        // At the limit.
        "[a-z][a-z0-9]{62}",
    ]
}

fn ip(n: u32) -> IpAddr {
    let [_, a, b, c] = n.to_be_bytes();
    IpAddr::V4(Ipv4Addr::new(10 + a % 100, 96, b, c.max(1)))
}

fn global(n: u32) -> IpAddr {
    let [_, a, b, c] = n.to_be_bytes();
    IpAddr::V4(Ipv4Addr::new(242, a, b, c.max(1)))
}

#[derive(Debug, Clone)]
struct Input {
    namespace: String,
    name: String,
    cluster_id: String,
    unique_names: bool,
    mons: Vec<u32>,
    osds: Vec<u32>,
    globals: bool,
}

fn input() -> impl Strategy<Value = Input> {
    (
        dns_label(),
        dns_label(),
        dns_label(),
        any::<bool>(),
        prop::collection::btree_set(0u32..20_000, 1..6),
        prop::collection::btree_set(0u32..10_000, 0..12),
        any::<bool>(),
    )
        .prop_map(
            |(namespace, name, mut cluster_id, unique_names, mons, osds, globals)| {
                // `<cluster id>-rook-ceph-osd-9999` must fit a Service name (63): longer ids
                // are the planner's clear error (tested below), not objects to check.
                if unique_names && cluster_id.len() > 44 {
                    cluster_id.truncate(44);
                    cluster_id = cluster_id.trim_end_matches('-').to_owned();
                }
                Input {
                    namespace,
                    name,
                    cluster_id,
                    unique_names,
                    mons: mons.into_iter().collect(),
                    osds: osds.into_iter().collect(),
                    globals,
                }
            },
        )
}

fn plan_input(input: &Input) -> PlanInput {
    let mut cluster = ClusterSettings::new(&input.name, &input.namespace);
    cluster.uid = Some("0b5e8f6a-0000-4000-8000-000000000001".into());
    cluster.multi_cluster_service.enabled = true;
    cluster.multi_cluster_service.cluster_id = input.cluster_id.clone();
    cluster.ceph_version = Some(CephVersion::new(18, 2, 4));
    if input.unique_names {
        cluster.dns_name_form = DnsNameForm::UniqueServiceName;
    }
    let mut inventory = Inventory::default();
    for &index in &input.mons {
        let id = MonId::from_index(index);
        let mut mon = MonInput::new(id.clone());
        mon.cluster_ip = Some(ip(index));
        mon.advertised = Some(SocketAddr::new(ip(index), 6789));
        if input.globals {
            inventory.global_ips.insert(Daemon::Mon(id), global(index));
        }
        inventory.mons.push(mon);
    }
    for &id in &input.osds {
        let osd = OsdInput::new(id, format!("node-{}", id % 7));
        if input.globals {
            inventory
                .global_ips
                .insert(Daemon::Osd(id), global(100_000 + id));
        }
        inventory.osds.push(osd);
    }
    PlanInput { cluster, inventory }
}

fn refusals(catalog: &Catalog, object: &serde_json::Value) -> Vec<String> {
    catalog
        .object_errors(object, Completeness::Whole)
        .iter()
        .map(|e| format!("{} {}: {e}", object["kind"], object["metadata"]["name"]))
        .collect()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]

    #[test]
    fn every_object_of_a_plan_is_accepted_by_the_api_server_rules(input in input()) {
        let catalog = catalog();
        let plan = Plan::new(plan_input(&input));
        prop_assert!(plan.is_ok(), "{:?}", plan.err());
        let plan = plan.unwrap();
        let mut refused = Vec::new();
        for service in plan.service_manifests() {
            refused.extend(refusals(&catalog, &serde_json::to_value(service).unwrap()));
        }
        for export in plan.service_export_manifests() {
            refused.extend(refusals(&catalog, &serde_json::to_value(export).unwrap()));
        }
        refused.extend(refusals(
            &catalog,
            &serde_json::to_value(plan.mon_endpoints_config_map()).unwrap(),
        ));
        prop_assert!(refused.is_empty(), "{:#?}", refused);
    }
}

#[test]
fn a_plan_at_the_maximum_lengths_is_accepted() {
    let long = "a".repeat(63);
    let input = Input {
        namespace: long.clone(),
        name: long.clone(),
        // `<id>-rook-ceph-osd-9999` is exactly 63 characters.
        cluster_id: "b".repeat(44),
        unique_names: true,
        mons: vec![0, 25, 26, 701, 702, 18_277],
        osds: vec![0, 999, 9_999],
        globals: true,
    };
    let catalog = catalog();
    let plan = Plan::new(plan_input(&input)).unwrap();
    let mut checked = 0;
    for service in plan.service_manifests() {
        assert_eq!(
            refusals(&catalog, &serde_json::to_value(service).unwrap()),
            Vec::<String>::new()
        );
        checked += 1;
    }
    for export in plan.service_export_manifests() {
        assert_eq!(
            refusals(&catalog, &serde_json::to_value(export).unwrap()),
            Vec::<String>::new()
        );
        checked += 1;
    }
    assert!(checked >= 3, "the plan built {checked} objects");
}

#[test]
fn a_cluster_id_too_long_for_the_unique_service_names_is_the_planners_clear_error() {
    let input = Input {
        namespace: "rook-ceph".into(),
        name: "my-cluster".into(),
        cluster_id: "b".repeat(45),
        unique_names: true,
        mons: vec![0],
        osds: vec![9_999],
        globals: true,
    };
    let error = Plan::new(plan_input(&input)).unwrap_err().to_string();
    assert!(error.contains("rook-ceph-osd-9999"), "{error}");
}

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! Property tests: for any valid input (cluster ids and namespaces up to 63 characters, service
//! names up to 63, any ports, endpoint addresses, exported labels, several clusters), every
//! object the agent emits passes the rules a real kube-apiserver applies ([`kube_syntax`], on
//! the built-in types plus the MCS, About and broker CRDs): ServiceImports (spec and status),
//! imported EndpointSlices (names and labels), ServiceExport status conditions, broker
//! ExportRecords (named `<cluster>.<namespace>.<service>`), heartbeat Leases, and the label
//! selectors of the agent's watches.
//!
//! Two routes: the simulation (its API servers are strict; every write the real core makes is
//! checked and a refused one is kept in `Simulation::refused`), and direct checks of the
//! builders the core uses.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use clusterset_sim::{self as sim, Simulation, api_catalog, refusal};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube_syntax::names::dns1123_subdomain;
use kube_syntax::object::Catalog;
use kube_syntax::selector::LabelSelector;
use mcs_controller::broker::{self, BrokerRecord, Heartbeat};
use mcs_controller::watch::Event;
use mcs_controller::watch::{LEASES_SELECTOR, imported_slices_selector, local_slices_selector};
use mcs_controller::{AgentConfig, Input};
use mcs_controller::{EndpointMode, ExportRecord, LocalExport};
use mcs_types::ServiceExportStatus;
use mcs_types::conditions::{DesiredCondition, set_condition};
use mcs_types::labels::{ENDPOINTSLICE_MANAGED_BY_LABEL, KUBERNETES_SERVICE_NAME_LABEL};
use mcs_types::v1beta1::ServiceExport;
use mcs_types::{ClusterId, ServiceKey};
use proptest::prelude::*;

const BROKER: &str = sim::BROKER_NAMESPACE;

fn start() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

/// A DNS-1123 label (cluster ids, namespaces), often at the full 63 characters.
fn dns1123_label() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?",
        "[a-z0-9][-a-z0-9]{61}[a-z0-9]",
    ]
}

/// A DNS-1035 label (Service names), often at the full 63 characters.
fn dns1035_label() -> impl Strategy<Value = String> {
    prop_oneof![
        "[a-z]([-a-z0-9]{0,61}[a-z0-9])?",
        "[a-z][-a-z0-9]{61}[a-z0-9]",
    ]
}

/// An address a pod can have: not unspecified, loopback, link-local or multicast (a real API
/// server refuses those in EndpointSlices).
fn pod_address() -> impl Strategy<Value = Ipv4Addr> {
    (1u8..=223, any::<u8>(), any::<u8>(), 1u8..=254)
        .prop_filter("loopback or link-local", |(a, b, ..)| {
            *a != 127 && !(*a == 169 && *b == 254)
        })
        .prop_map(|(a, b, c, d)| Ipv4Addr::new(a, b, c, d))
}

/// Ports of a Service: distinct, any valid number.
fn ports() -> impl Strategy<Value = Vec<i32>> {
    prop::collection::btree_set(1i32..=65535, 1..=3).prop_map(|p| p.into_iter().collect())
}

/// Labels (or annotations) a user exports: valid keys, with or without a prefix, and values.
fn exported_labels() -> impl Strategy<Value = BTreeMap<String, String>> {
    prop::collection::btree_map(
        "([a-z]{1,10}\\.example\\.com/)?[a-z0-9]([-a-z0-9_.]{0,30}[a-z0-9])?",
        "([A-Za-z0-9]([-A-Za-z0-9_.]{0,30}[A-Za-z0-9])?)?",
        0..=3,
    )
}

/// One exported service: its namespace (an index into the namespaces), name, ports, exporting
/// cluster (an index into the clusters), endpoint addresses and exported labels.
#[derive(Debug, Clone)]
struct Exported {
    namespace: usize,
    name: String,
    ports: Vec<i32>,
    cluster: usize,
    addresses: Vec<Ipv4Addr>,
    labels: BTreeMap<String, String>,
}

fn exported() -> impl Strategy<Value = Exported> {
    (
        any::<prop::sample::Index>(),
        dns1035_label(),
        ports(),
        any::<prop::sample::Index>(),
        prop::collection::vec(pod_address(), 1..=4),
        exported_labels(),
    )
        .prop_map(
            |(namespace, name, ports, cluster, addresses, labels)| Exported {
                namespace: namespace.index(usize::MAX),
                name,
                ports,
                cluster: cluster.index(usize::MAX),
                addresses,
                labels,
            },
        )
}

/// Fails with the 422 message a real API server answers when it refuses `object`.
fn assert_valid(catalog: &Catalog, what: &str, object: &impl serde::Serialize) {
    if let Some(message) = refusal(catalog, object) {
        panic!("{what} is refused: {message}");
    }
}

fn selector(text: &str) -> LabelSelector {
    LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text:?}: {}", e.message))
}

/// The agent's selectors parse, its imported slices are exactly what its imported-slices watch
/// selects, and its local-slices watch never sees them.
fn assert_selects_imported(slice: &EndpointSlice) {
    let labels = slice.metadata.labels.clone().unwrap_or_default();
    assert!(
        selector(&imported_slices_selector()).matches(&labels),
        "the imported-slices watch misses {labels:?}"
    );
    assert!(
        !selector(&local_slices_selector()).matches(&labels),
        "the local-slices watch takes {labels:?} for a Service's own slice"
    );
}

/// The simulation with one cluster per id, each cluster publishing pod addresses or global
/// ingress IPs as `pod_addresses` says.
fn simulation(ids: &[String], pod_addresses: &[bool], namespaces: &[&str]) -> Simulation {
    let configs: Vec<AgentConfig> = ids
        .iter()
        .enumerate()
        .map(|(i, id)| {
            let mut config = sim::cluster_config(i, Some(Duration::from_secs(120))).unwrap();
            config.cluster_id = ClusterId::new(id).unwrap();
            config.identity = format!("clusterset-agent-{id}-7d9f8b6c5-x2k4q");
            if pod_addresses.get(i).copied().unwrap_or(false) {
                config.endpoint_mode = EndpointMode::PodAddresses;
            }
            config
        })
        .collect();
    Simulation::with_configs(configs, namespaces, start()).unwrap()
}

fn settle(sim: &mut Simulation) {
    sim.settle_accepted(1000)
        .unwrap_or_else(|refused| panic!("{refused}"));
}

/// Exports `e` from its cluster: Service, EndpointSlice with its addresses, ServiceExport with
/// its exported labels and annotations.
fn export(sim: &mut Simulation, namespaces: &[String], e: &Exported) -> (usize, ServiceKey) {
    let cluster = e.cluster % sim.clusters.len();
    let key = ServiceKey::new(&namespaces[e.namespace % namespaces.len()], &e.name);
    sim.export(cluster, &key, &e.ports);
    let addresses: Vec<String> = e.addresses.iter().map(ToString::to_string).collect();
    let addresses: Vec<&str> = addresses.iter().map(String::as_str).collect();
    let slice = sim::endpoint_slice(&key, &addresses, &e.ports);
    sim.local_apply(cluster, Input::LocalEndpointSlice(Event::Apply(slice)));
    let mut service_export = sim::service_export(&key, sim.now);
    service_export.spec.exported_labels = e.labels.clone();
    service_export.spec.exported_annotations = e.labels.clone();
    sim.local_apply(cluster, Input::ServiceExport(Event::Apply(service_export)));
    (cluster, key)
}

/// Everything the simulation stores that the agents wrote passes the rules, and the imported
/// slices are the ones the agents' watches select.
fn assert_stored_objects_valid(sim: &Simulation, catalog: &Catalog) {
    for cluster in &sim.clusters {
        let id = &cluster.core.config().cluster_id;
        for import in cluster.store.imports.values() {
            assert_valid(catalog, &format!("{id}'s ServiceImport"), import);
        }
        for slice in cluster.store.imported_slices.values() {
            assert_valid(catalog, &format!("{id}'s imported EndpointSlice"), slice);
            assert_selects_imported(slice);
        }
        for export in cluster.store.exports.values() {
            assert_valid(catalog, &format!("{id}'s ServiceExport"), export);
        }
    }
    for (name, record) in &sim.records {
        assert_valid(catalog, "an ExportRecord", record);
        assert!(
            record.checked_record().is_ok(),
            "{name:?}: {:?}",
            record.checked_record()
        );
    }
    let leases = selector(LEASES_SELECTOR);
    for lease in sim.leases.values() {
        assert_valid(catalog, "a heartbeat Lease", lease);
        let labels = lease.metadata.labels.clone().unwrap_or_default();
        assert!(leases.matches(&labels), "{labels:?}");
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 32, ..ProptestConfig::default() })]

    /// N agents (the real core) on strict simulated API servers: exports, imports in every
    /// cluster, conflicts, heartbeats, a stale cluster, unexports. No write is ever refused.
    #[test]
    fn the_simulated_api_servers_refuse_no_write_of_the_agents(
        ids in prop::collection::btree_set(dns1123_label(), 1..=4),
        pod_addresses in prop::collection::vec(any::<bool>(), 4),
        namespaces in prop::collection::btree_set(dns1123_label(), 1..=2),
        exports in prop::collection::vec(exported(), 1..=5),
    ) {
        let ids: Vec<String> = ids.into_iter().collect();
        let namespaces: Vec<String> = namespaces.into_iter().collect();
        let names: Vec<&str> = namespaces.iter().map(String::as_str).collect();
        let catalog = api_catalog().unwrap();
        let mut sim = simulation(&ids, &pod_addresses, &names);
        sim.start_all();
        settle(&mut sim);

        let mut exported = Vec::new();
        for e in &exports {
            sim.advance(Duration::from_secs(1));
            exported.push(export(&mut sim, &namespaces, e));
            settle(&mut sim);
        }
        // Every export is published and imported everywhere (the writes were not refused).
        for (cluster, key) in &exported {
            let id = ClusterId::new(&ids[*cluster]).unwrap();
            prop_assert!(sim.record(&id, key).is_some());
            for (i, id) in ids.iter().enumerate() {
                prop_assert!(sim.import(i, key).is_some(), "{key} not imported in {id}");
                prop_assert!(!sim.imported_slices(i, key).is_empty());
            }
        }
        assert_stored_objects_valid(&sim, &catalog);

        // The last cluster stops heartbeating: its exports are marked stale, then dropped.
        if let Some(last) = sim.clusters.last_mut() {
            last.heartbeating = false;
        }
        for _ in 0..16 {
            sim.advance(Duration::from_secs(10));
            sim.heartbeat_all();
            settle(&mut sim);
        }
        assert_stored_objects_valid(&sim, &catalog);

        // Back, then every export is withdrawn.
        if let Some(last) = sim.clusters.last_mut() {
            last.heartbeating = true;
        }
        sim.heartbeat_all();
        settle(&mut sim);
        for (cluster, key) in &exported {
            if let Some(export) = sim.export_of(*cluster, key).cloned() {
                sim.local_apply(*cluster, Input::ServiceExport(Event::Delete(export)));
            }
        }
        settle(&mut sim);
        prop_assert!(sim.records.is_empty());
        assert_stored_objects_valid(&sim, &catalog);
    }
}

/// Checks every object the builders make when `clusters` all export `key` (each with the
/// same Service, EndpointSlice of `addresses` and exported `labels`).
fn check_builders(
    catalog: &Catalog,
    key: &ServiceKey,
    clusters: &[(ClusterId, EndpointMode)],
    ports: &[i32],
    addresses: &[Ipv4Addr],
    labels: &BTreeMap<String, String>,
) {
    let created = Time(start());
    let addresses: Vec<String> = addresses.iter().map(ToString::to_string).collect();
    let addresses: Vec<&str> = addresses.iter().map(String::as_str).collect();
    let service = sim::service(key, "10.96.0.10", ports);
    let slice = sim::endpoint_slice(key, &addresses, ports);
    let spec = mcs_types::ServiceExportSpec {
        exported_labels: labels.clone(),
        exported_annotations: labels.clone(),
        ..Default::default()
    };
    let mut records = Vec::new();
    for (i, (cluster, mode)) in clusters.iter().enumerate() {
        let global_ip = IpAddr::V4(Ipv4Addr::new(242, u8::try_from(i).unwrap(), 0, 1));
        let record = ExportRecord::from_local(LocalExport {
            cluster_id: cluster,
            key,
            export_created: &created,
            export_spec: &spec,
            service: Some(&service),
            endpoint_slices: std::slice::from_ref(&slice),
            global_ips: &[global_ip],
            mode: *mode,
        })
        .unwrap();

        // The broker record: named <cluster>.<namespace>.<service>, a DNS subdomain.
        let name = broker::record_name(cluster, key);
        assert!(name.len() <= 191, "{name}");
        dns1123_subdomain(&name).unwrap();
        let object = BrokerRecord::new(record.clone(), BROKER, start());
        assert_valid(catalog, "the ExportRecord", &object);
        records.push(record);

        // The heartbeat Lease, created and renewed.
        let claim = broker::heartbeat_claim(
            cluster,
            &format!("clusterset-agent-{cluster}"),
            BROKER,
            std::time::Duration::from_secs(30),
        );
        let Heartbeat::Create(lease) = broker::heartbeat(None, &claim, start()) else {
            panic!("a first heartbeat creates")
        };
        assert_valid(catalog, "the heartbeat Lease", &lease);
        let mut stored = *lease;
        stored.metadata.resource_version = Some("1".into());
        let seen = kube_lease::Observed::seen_change(stored, start());
        let renewed = broker::heartbeat(Some(&seen), &claim, start());
        let Heartbeat::Replace(renewed) = renewed else {
            panic!("{renewed:?}")
        };
        assert_valid(catalog, "the renewed heartbeat Lease", &renewed);
        assert!(selector(LEASES_SELECTOR).matches(&renewed.metadata.labels.clone().unwrap()));
    }

    let merged = mcs_controller::merge_exports(&records).unwrap().unwrap();
    let clusterset_ips = ["243.0.0.1".parse().unwrap()];
    let mut import = mcs_controller::desired_import(&merged, &clusterset_ips);
    let mut conditions = Vec::new();
    set_condition(
        &mut conditions,
        mcs_controller::import_ready_condition(&merged, &clusterset_ips),
        Some(1),
        created.clone(),
    );
    if let Some(status) = import.status.as_mut() {
        status.conditions = conditions;
    }
    assert_valid(catalog, "the ServiceImport", &import);

    let slices = mcs_controller::desired_endpoint_slices(&merged);
    assert!(!slices.is_empty());
    for slice in &slices {
        assert_valid(catalog, "the imported EndpointSlice", slice);
        assert_selects_imported(slice);
    }

    // The exporters' conditions on their ServiceExport.
    for publication in [
        mcs_controller::Publication::Published,
        mcs_controller::Publication::Pending,
        mcs_controller::Publication::Failed("Writing the record to the broker failed".into()),
    ] {
        let desired = mcs_controller::export_conditions(Ok(()), Some(&merged), &publication);
        let mut status = ServiceExportStatus::default();
        for condition in desired.set {
            set_condition(&mut status.conditions, condition, Some(1), created.clone());
        }
        let mut export = ServiceExport::new(&key.name, spec.clone());
        export.metadata.namespace = Some(key.namespace.clone());
        export.status = Some(status);
        assert_valid(catalog, "the ServiceExport with our conditions", &export);
    }
    let mut export = sim::service_export(key, start());
    let mut status = ServiceExportStatus::default();
    set_condition(
        &mut status.conditions,
        DesiredCondition::export_valid(),
        Some(1),
        created,
    );
    export.status = Some(status);
    assert_valid(catalog, "the ServiceExport", &export);

    // A Service's own slice is what the local watch selects (and not the imported one).
    let labels = slice.metadata.labels.clone().unwrap();
    assert!(selector(&local_slices_selector()).matches(&labels));
    assert!(!selector(&imported_slices_selector()).matches(&labels));
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// The builders the core uses make valid objects for any valid names, ports, addresses and
    /// labels, alone or with other clusters exporting the same service.
    #[test]
    fn the_builders_make_objects_a_real_api_server_accepts(
        ids in prop::collection::btree_set(dns1123_label(), 1..=6),
        modes in prop::collection::vec(any::<bool>(), 6),
        namespace in dns1123_label(),
        name in dns1035_label(),
        ports in ports(),
        addresses in prop::collection::vec(pod_address(), 1..=8),
        labels in exported_labels(),
    ) {
        let catalog = api_catalog().unwrap();
        let clusters: Vec<(ClusterId, EndpointMode)> = ids
            .iter()
            .zip(modes)
            .map(|(id, pods)| {
                let mode = if pods { EndpointMode::PodAddresses } else { EndpointMode::GlobalIngress };
                (ClusterId::new(id).unwrap(), mode)
            })
            .collect();
        let key = ServiceKey::new(&namespace, &name);
        check_builders(&catalog, &key, &clusters, &ports, &addresses, &labels);
    }

    /// The agent's selectors stay parseable selectors, and an imported slice of any service
    /// from any cluster is selected by the imported-slices watch only.
    #[test]
    fn the_watch_selectors_parse_and_split_imported_from_local_slices(
        cluster in dns1123_label(),
        namespace in dns1123_label(),
        name in dns1035_label(),
    ) {
        for text in [imported_slices_selector(), local_slices_selector(), LEASES_SELECTOR.to_owned()] {
            selector(&text);
        }
        let key = ServiceKey::new(&namespace, &name);
        let local = sim::endpoint_slice(&key, &["10.0.0.1"], &[80]);
        let mut labels = local.metadata.labels.clone().unwrap();
        prop_assert!(selector(&local_slices_selector()).matches(&labels));
        // A slice some other controller manages is still the Service's own.
        labels.insert(ENDPOINTSLICE_MANAGED_BY_LABEL.into(), "endpointslice-controller.k8s.io".into());
        prop_assert!(selector(&local_slices_selector()).matches(&labels));
        prop_assert!(!selector(&imported_slices_selector()).matches(&labels));
        // Ours never is, even if someone put the service-name label on it.
        let id = ClusterId::new(&cluster).unwrap();
        let clusters = [(id, EndpointMode::GlobalIngress)];
        check_builders(&api_catalog().unwrap(), &key, &clusters, &[80], &[Ipv4Addr::new(10, 0, 0, 1)], &BTreeMap::new());
        let mut ours = labels.clone();
        ours.insert(ENDPOINTSLICE_MANAGED_BY_LABEL.into(), mcs_types::labels::CLUSTERSET_ENDPOINTSLICE_CONTROLLER.into());
        ours.insert(KUBERNETES_SERVICE_NAME_LABEL.into(), name.clone());
        prop_assert!(!selector(&local_slices_selector()).matches(&ours));
        prop_assert!(selector(&imported_slices_selector()).matches(&ours));
    }
}

/// Every name at its maximum length at once: a 63-character cluster id, namespace and service
/// name (the record name is then 191 characters, the slice names 141).
#[test]
fn objects_at_the_maximum_name_lengths_are_accepted() {
    let cluster = format!("c{}", "1".repeat(62));
    let namespace = format!("n{}", "-".repeat(61)) + "s";
    let name = format!("s{}", "9".repeat(62));
    let key = ServiceKey::new(&namespace, &name);
    let id = ClusterId::new(&cluster).unwrap();
    assert_eq!(broker::record_name(&id, &key).len(), 191);
    let catalog = api_catalog().unwrap();
    let other = ClusterId::new(&format!("d{}", "0".repeat(62))).unwrap();
    check_builders(
        &catalog,
        &key,
        &[
            (id.clone(), EndpointMode::GlobalIngress),
            (other, EndpointMode::PodAddresses),
        ],
        &[1, 65535],
        &[Ipv4Addr::new(10, 244, 1, 2)],
        &BTreeMap::from([("app.kubernetes.io/name".into(), "x".repeat(63))]),
    );

    let ids = [cluster.clone(), format!("e{}", "-".repeat(61)) + "e"];
    let mut sim = simulation(&ids, &[false, true], &[namespace.as_str()]);
    sim.start_all();
    settle(&mut sim);
    let e = Exported {
        namespace: 0,
        name: name.clone(),
        ports: vec![1, 65535],
        cluster: 1,
        addresses: vec![Ipv4Addr::new(10, 244, 1, 2)],
        labels: BTreeMap::new(),
    };
    export(&mut sim, std::slice::from_ref(&namespace), &e);
    export(
        &mut sim,
        std::slice::from_ref(&namespace),
        &Exported { cluster: 0, ..e },
    );
    settle(&mut sim);
    let slice_names: BTreeSet<usize> = sim
        .imported_slices(0, &key)
        .iter()
        .map(|s| s.metadata.name.as_ref().unwrap().len())
        .collect();
    assert_eq!(slice_names, BTreeSet::from([141]));
    assert_eq!(sim.records.len(), 2);
    assert_stored_objects_valid(&sim, &catalog);
}

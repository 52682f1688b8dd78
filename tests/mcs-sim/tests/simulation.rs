#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! End-to-end behaviour of the agent's core on simulated clusters: N cores, in-memory API
//! servers and an in-memory broker (`clusterset_sim`). The simulated API servers check
//! every write with Kubernetes' rules; [`settle`] asserts after every step that none was refused.

use std::time::Duration;

use clusterset_sim::{self as sim, Simulation};
use k8s_openapi::jiff::Timestamp;
use mcs_controller::AgentConfig;
use mcs_controller::core::{ClusterHealth, Input, STALE_CLUSTERS_CONDITION};
use mcs_controller::watch::Event;
use mcs_types::ServiceImportType;
use mcs_types::conditions::find_condition;
use mcs_types::{ClusterId, ServiceKey};

const ROUNDS: usize = 1000;

fn start() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn web() -> ServiceKey {
    ServiceKey::new("shop", "web")
}

/// Settles the simulation and checks that its strict API servers refused no write: every
/// object the agents wrote passed the rules a real kube-apiserver applies.
fn settle(sim: &mut Simulation) -> sim::SettleStats {
    sim.settle_accepted(ROUNDS)
        .unwrap_or_else(|refused| panic!("{refused}"))
}

fn running(n: usize, drop_after: Option<Duration>) -> Simulation {
    let mut sim = Simulation::new(n, &["shop", "rook-ceph"], start(), drop_after).unwrap();
    sim.start_all();
    settle(&mut sim);
    for cluster in &sim.clusters {
        assert!(
            cluster.core.is_started(),
            "every agent starts once both sides listed"
        );
    }
    sim
}

fn condition(sim: &Simulation, i: usize, key: &ServiceKey, type_: &str) -> (String, String) {
    let export = sim.export_of(i, key).expect("export");
    let c = find_condition(&export.status.as_ref().expect("status").conditions, type_)
        .unwrap_or_else(|| panic!("no {type_} condition on c{i}'s export"));
    (c.status.clone(), c.reason.clone())
}

fn import_condition(
    sim: &Simulation,
    i: usize,
    key: &ServiceKey,
    type_: &str,
) -> (String, String, String) {
    let import = sim.import(i, key).expect("import");
    let c = find_condition(&import.status.as_ref().expect("status").conditions, type_)
        .unwrap_or_else(|| panic!("no {type_} condition on c{i}'s import"));
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

#[test]
fn an_export_is_imported_in_every_cluster_with_the_namespace_and_removed_after_unexport() {
    let mut sim = running(3, None);
    // c2 has no "shop" namespace.
    sim.local_apply(2, Input::Namespace(Event::Delete(sim::namespace("shop"))));
    sim.export(0, &web(), &[80]);
    settle(&mut sim);

    for i in 0..2 {
        let import = sim
            .import(i, &web())
            .unwrap_or_else(|| panic!("no import in c{i}"));
        assert_eq!(import.spec.type_, ServiceImportType::ClusterSetIP);
        assert_eq!(import.spec.ports.len(), 1);
        assert_eq!(
            import.spec.ips,
            [format!("243.{i}.0.1")],
            "clusterset IP from c{i}'s own range"
        );
        let clusters: Vec<&str> = import.status.as_ref().unwrap().cluster_ids().collect();
        assert_eq!(clusters, ["c0"]);
        assert_eq!(import_condition(&sim, i, &web(), "Ready").0, "True");
        assert_eq!(
            import_condition(&sim, i, &web(), STALE_CLUSTERS_CONDITION).0,
            "False"
        );
        let slices = sim.imported_slices(i, &web());
        assert_eq!(slices.len(), 1);
        assert_eq!(
            slices[0].endpoints[0].addresses,
            ["242.0.0.1"],
            "c0's global IP for the service"
        );
    }
    assert!(
        sim.import(2, &web()).is_none(),
        "no import where the namespace does not exist"
    );
    assert_eq!(
        condition(&sim, 0, &web(), "Valid"),
        ("True".into(), "Valid".into())
    );
    assert_eq!(
        condition(&sim, 0, &web(), "Ready"),
        ("True".into(), "Exported".into())
    );
    assert_eq!(
        condition(&sim, 0, &web(), "Conflict"),
        ("False".into(), "NoConflicts".into())
    );

    // The namespace appears in c2: the import follows.
    sim.local_apply(2, Input::Namespace(Event::Apply(sim::namespace("shop"))));
    settle(&mut sim);
    assert_eq!(sim.import(2, &web()).unwrap().spec.ips, ["243.2.0.1"]);

    // Unexport: the record is withdrawn, imports and slices go everywhere.
    let export = sim.export_of(0, &web()).unwrap().clone();
    sim.local_apply(0, Input::ServiceExport(Event::Delete(export)));
    settle(&mut sim);
    assert!(sim.records.is_empty());
    for i in 0..3 {
        assert!(sim.import(i, &web()).is_none(), "c{i} still imports");
        assert!(sim.imported_slices(i, &web()).is_empty());
    }
}

#[test]
fn conflict_is_reported_on_every_exporter_and_ports_are_unioned() {
    let mut sim = running(3, None);
    sim.export(0, &web(), &[80]);
    settle(&mut sim);
    sim.advance(Duration::from_secs(5));
    sim.export(1, &web(), &[81]);
    settle(&mut sim);
    for i in 0..2 {
        assert_eq!(
            condition(&sim, i, &web(), "Conflict"),
            ("True".into(), "PortConflict".into())
        );
        assert_eq!(
            condition(&sim, i, &web(), "Ready"),
            ("True".into(), "Exported".into())
        );
    }
    for i in 0..3 {
        let ports: Vec<i32> = sim
            .import(i, &web())
            .unwrap()
            .spec
            .ports
            .iter()
            .map(|p| p.port)
            .collect();
        assert_eq!(ports, [80, 81], "c{i}");
        let clusters: Vec<&str> = sim
            .import(i, &web())
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .cluster_ids()
            .collect();
        assert_eq!(clusters, ["c0", "c1"]);
        assert_eq!(
            sim.imported_slices(i, &web()).len(),
            2,
            "one slice per source cluster"
        );
    }
}

#[test]
fn an_invalid_export_gets_valid_false_and_is_not_published() {
    let mut sim = running(2, None);
    // A ServiceExport without a Service: its first status waits for the Service, then says
    // so.
    sim.local_apply(
        0,
        Input::ServiceExport(Event::Apply(sim::service_export(&web(), sim.now))),
    );
    settle(&mut sim);
    assert!(
        sim.export_of(0, &web())
            .expect("export")
            .status
            .as_ref()
            .is_none_or(|s| s.conditions.is_empty()),
        "the first status waits for the Service"
    );
    sim.advance(AgentConfig::DEFAULT_FIRST_STATUS_WAIT);
    settle(&mut sim);
    assert_eq!(
        condition(&sim, 0, &web(), "Valid"),
        ("False".into(), "NoService".into())
    );
    assert!(sim.records.is_empty());
    assert!(sim.import(1, &web()).is_none());
    // The Service arrives: exported.
    sim.local_apply(
        0,
        Input::Service(Event::Apply(sim::service(&web(), "10.96.0.9", &[80]))),
    );
    settle(&mut sim);
    assert_eq!(
        condition(&sim, 0, &web(), "Valid"),
        ("True".into(), "Valid".into())
    );
    assert!(sim.import(1, &web()).is_some());
}

#[test]
fn one_changed_export_touches_only_its_service() {
    let mut sim = running(4, None);
    for n in 0..50 {
        sim.export(n % 4, &ServiceKey::new("shop", &format!("svc-{n}")), &[80]);
    }
    settle(&mut sim);
    let changed = ServiceKey::new("shop", "svc-7");
    sim.local_apply(
        3,
        Input::Service(Event::Apply(sim::service(
            &changed,
            "10.96.0.4",
            &[80, 443],
        ))),
    );
    let stats = settle(&mut sim);
    // The exporter reconciles on the Service change, every cluster on the record, and the
    // exporter once more for its own record's echo: no other service is touched.
    assert!(
        stats.reconciled <= 2 * 4 + 2,
        "reconciled {} services for one change",
        stats.reconciled
    );
    for i in 0..4 {
        let ports: Vec<i32> = sim
            .import(i, &changed)
            .unwrap()
            .spec
            .ports
            .iter()
            .map(|p| p.port)
            .collect();
        assert_eq!(ports, [80, 443]);
    }
    // Steady state costs nothing.
    let idle = settle(&mut sim);
    assert_eq!((idle.writes, idle.reconciled), (0, 0));
}

#[test]
fn a_restart_keeps_ips_and_writes_nothing_when_nothing_changed() {
    let mut sim = running(2, None);
    sim.export(0, &web(), &[80]);
    let api = ServiceKey::new("shop", "api");
    sim.export(0, &api, &[8080]);
    settle(&mut sim);
    let global_ip = |sim: &Simulation, key: &ServiceKey| {
        sim.record(&ClusterId::new("c0").unwrap(), key)
            .unwrap()
            .checked_record()
            .unwrap()
            .global_ips
            .clone()
    };
    let web_ip = global_ip(&sim, &web());
    let web_import_ip = sim.import(1, &web()).unwrap().spec.ips.clone();

    // Both agents restart, and db was exported in c0 while its agent was down: db must get a
    // free address, not one that web or api hold (the pool is restored from the broker first).
    let api_ip = global_ip(&sim, &api);
    let db = ServiceKey::new("shop", "db");
    sim.export(0, &db, &[5432]);
    sim.start_agent(0);
    sim.start_agent(1);
    let stats = settle(&mut sim);
    assert_eq!(global_ip(&sim, &web()), web_ip);
    assert_eq!(global_ip(&sim, &api), api_ip);
    let db_ip = global_ip(&sim, &db);
    assert!(
        db_ip != web_ip && db_ip != api_ip,
        "db got {db_ip:?}, a held address"
    );
    assert_eq!(
        sim.import(1, &web()).unwrap().spec.ips,
        web_import_ip,
        "clusterset IP kept"
    );
    // Only db's publication and import were written.
    assert!(stats.writes <= 12, "{stats:?}");
}

#[test]
fn no_deletion_before_both_caches_synced_and_stale_data_is_cleaned_after() {
    let mut sim = running(2, None);
    sim.export(0, &web(), &[80]);
    settle(&mut sim);
    // While c0's agent is down, its ServiceExport is deleted (Lighthouse #1416: stale slices
    // after restarts). The store changes, no event is seen.
    let id = mcs_controller::cache::ObjectId::new("shop", "web");
    sim.clusters[0].store.exports.remove(&id);
    // Restart c0 with only the local side listed: nothing may be written yet.
    let config = sim.clusters[0].core.config().clone();
    let mut core = mcs_controller::AgentCore::new(config);
    let store = sim.clusters[0].store.clone();
    fn list<T>(items: Vec<T>, wrap: fn(Event<T>) -> Input, core: &mut mcs_controller::AgentCore) {
        core.handle(wrap(Event::Init));
        for item in items {
            core.handle(wrap(Event::InitApply(item)));
        }
        core.handle(wrap(Event::InitDone));
    }
    list(
        store.namespaces.values().cloned().collect(),
        Input::Namespace,
        &mut core,
    );
    list(
        store.services.values().cloned().collect(),
        Input::Service,
        &mut core,
    );
    list(
        store.exports.values().cloned().collect(),
        Input::ServiceExport,
        &mut core,
    );
    list(
        store.local_slices.values().cloned().collect(),
        Input::LocalEndpointSlice,
        &mut core,
    );
    list(
        store.imports.values().cloned().collect(),
        Input::ServiceImport,
        &mut core,
    );
    list(
        store.imported_slices.values().cloned().collect(),
        Input::ImportedEndpointSlice,
        &mut core,
    );
    // The broker list is in progress (Cilium #47793: an unsynced empty set is not authoritative).
    core.handle(Input::Record(Event::Init));
    core.handle(Input::Lease(Event::Init));
    let out = core.process(sim.now);
    assert!(
        out.writes.is_empty(),
        "wrote before the broker synced: {:?}",
        out.writes
    );
    for lease in sim.leases.values() {
        core.handle(Input::Lease(Event::InitApply(lease.clone())));
    }
    core.handle(Input::Lease(Event::InitDone));
    let out = core.process(sim.now);
    assert!(
        out.writes.is_empty(),
        "wrote before the records listed: {:?}",
        out.writes
    );
    // Now let the simulation drive the restarted agent: the stale record is withdrawn and the
    // imports go everywhere.
    sim.start_agent(0);
    settle(&mut sim);
    assert!(sim.records.is_empty());
    assert!(sim.import(0, &web()).is_none());
    assert!(sim.import(1, &web()).is_none());
}

#[test]
fn a_cluster_that_stops_heartbeating_is_marked_then_dropped_then_welcomed_back() {
    let mut sim = running(3, Some(Duration::from_secs(120)));
    sim.export(1, &web(), &[80]);
    settle(&mut sim);
    sim.clusters[1].heartbeating = false;
    for _ in 0..4 {
        sim.advance(Duration::from_secs(10));
        sim.heartbeat_all();
        settle(&mut sim);
    }
    let c1 = ClusterId::new("c1").unwrap();
    assert!(matches!(
        sim.clusters[0].core.cluster_health(&c1),
        Some(ClusterHealth::Stale { .. })
    ));
    let (status, reason, message) = import_condition(&sim, 0, &web(), STALE_CLUSTERS_CONDITION);
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "ClustersNotHeartbeating")
    );
    assert!(message.contains("c1"), "{message}");
    assert_eq!(
        sim.imported_slices(0, &web()).len(),
        1,
        "last-known-good endpoints kept"
    );

    // After the drop time the stale cluster's export is left out: the import goes.
    for _ in 0..12 {
        sim.advance(Duration::from_secs(10));
        sim.heartbeat_all();
        settle(&mut sim);
    }
    assert!(matches!(
        sim.clusters[0].core.cluster_health(&c1),
        Some(ClusterHealth::Dropped { .. })
    ));
    assert!(sim.import(0, &web()).is_none());
    assert_eq!(
        sim.records.len(),
        1,
        "the record itself stays in the broker"
    );

    // c1 heartbeats again: imported again, condition clear.
    sim.clusters[1].heartbeating = true;
    sim.heartbeat_all();
    settle(&mut sim);
    assert_eq!(
        import_condition(&sim, 0, &web(), STALE_CLUSTERS_CONDITION).0,
        "False"
    );
}

#[test]
fn every_cluster_computes_the_same_import() {
    let mut sim = running(5, None);
    for n in 0..20 {
        sim.advance(Duration::from_secs(1));
        sim.export(
            n % 5,
            &ServiceKey::new("rook-ceph", &format!("mon-{n}")),
            &[3300, 6789],
        );
        sim.export(
            (n + 2) % 5,
            &ServiceKey::new("rook-ceph", &format!("mon-{n}")),
            &[3300],
        );
    }
    settle(&mut sim);
    for n in 0..20 {
        let key = ServiceKey::new("rook-ceph", &format!("mon-{n}"));
        let reference = sim.import(0, &key).unwrap();
        for i in 1..5 {
            let import = sim.import(i, &key).unwrap();
            assert_eq!(import.spec.ports, reference.spec.ports);
            assert_eq!(import.spec.type_, reference.spec.type_);
            assert_eq!(
                import
                    .status
                    .as_ref()
                    .unwrap()
                    .cluster_ids()
                    .collect::<Vec<_>>(),
                reference
                    .status
                    .as_ref()
                    .unwrap()
                    .cluster_ids()
                    .collect::<Vec<_>>()
            );
        }
    }
}

#[test]
fn an_exhausted_global_cidr_is_reported_on_the_export_and_frees_up_on_unexport() {
    let mut sim = Simulation::new(2, &["shop"], start(), None).unwrap();
    let mut config = sim.clusters[0].core.config().clone();
    config.global_cidrs = vec!["242.0.0.0/30".parse().unwrap()]; // two usable addresses
    sim.clusters[0].core = mcs_controller::AgentCore::new(config);
    sim.start_all();
    settle(&mut sim);
    let keys: Vec<ServiceKey> = (0..3)
        .map(|n| ServiceKey::new("shop", &format!("svc-{n}")))
        .collect();
    for key in &keys {
        sim.advance(Duration::from_secs(1));
        sim.export(0, key, &[80]);
        settle(&mut sim);
    }
    assert_eq!(sim.records.len(), 2, "only two exports have a global IP");
    let (status, reason) = condition(&sim, 0, &keys[2], "Ready");
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Failed"));
    let message = find_condition(
        &sim.export_of(0, &keys[2])
            .unwrap()
            .status
            .as_ref()
            .unwrap()
            .conditions,
        "Ready",
    )
    .unwrap()
    .message
    .clone();
    assert!(message.contains("--global-cidr"), "{message}");
    assert!(sim.import(1, &keys[2]).is_none());

    // Unexporting svc-0 frees its address; svc-2, waiting for one, gets it with no event of its own.
    let export = sim.export_of(0, &keys[0]).unwrap().clone();
    sim.local_apply(0, Input::ServiceExport(Event::Delete(export)));
    settle(&mut sim);
    assert_eq!(
        condition(&sim, 0, &keys[2], "Ready"),
        ("True".into(), "Exported".into())
    );
    assert_eq!(
        sim.import(1, &keys[2]).unwrap().spec.type_,
        ServiceImportType::ClusterSetIP
    );
}

#[test]
fn a_catalog_that_cannot_be_set_up_keeps_the_cause_as_the_errors_source() {
    use std::error::Error as _;

    let not_json = || serde_json::from_str::<u8>("not json").unwrap_err();
    let crd = mcs_types::crd::CrdError {
        type_name: "ServiceExport",
        source: not_json(),
    };
    let error = sim::SimError::from(crd);
    let source = error.source().expect("the CRD error is the source");
    assert!(source.is::<mcs_types::crd::CrdError>(), "{source:?}");
    assert!(
        source.source().is_some_and(|s| s.is::<serde_json::Error>()),
        "and its own source, the JSON error, is kept"
    );

    let error = sim::SimError::from(not_json());
    assert!(
        error.source().is_some_and(|s| s.is::<serde_json::Error>()),
        "{error:?}"
    );
}

/// The Service c`i` derived from its import of `key`, if any.
fn derived(
    sim: &Simulation,
    i: usize,
    key: &ServiceKey,
) -> Option<k8s_openapi::api::core::v1::Service> {
    let name = mcs_controller::derived_service_name(&key.name);
    sim.clusters[i]
        .store
        .services
        .get(&mcs_controller::cache::ObjectId::new(&key.namespace, &name))
        .cloned()
}

#[test]
fn an_import_gets_a_derived_service_that_kube_proxy_serves_at_its_clusterset_ip() {
    let mut sim = running(2, None);
    sim.export(0, &web(), &[80]);
    settle(&mut sim);
    for i in 0..2 {
        let service =
            derived(&sim, i, &web()).unwrap_or_else(|| panic!("no derived Service in c{i}"));
        assert_eq!(service.metadata.name.as_deref(), Some("clusterset-web"));
        let labels = service.metadata.labels.clone().unwrap();
        assert_eq!(labels["multicluster.kubernetes.io/service-name"], "web");
        assert_eq!(
            labels["app.kubernetes.io/managed-by"],
            "mcs-controller.clusterset.io"
        );
        let spec = service.spec.clone().unwrap();
        assert_eq!(
            spec.selector, None,
            "no selector: its endpoints are the imported slices"
        );
        assert_eq!(spec.type_.as_deref(), Some("ClusterIP"));
        let import = sim.import(i, &web()).unwrap();
        assert_eq!(
            spec.external_ips,
            Some(import.spec.ips.clone()),
            "kube-proxy serves the clusterset IP"
        );
        let ports: Vec<(i32, Option<String>)> = spec
            .ports
            .unwrap()
            .iter()
            .map(|p| (p.port, p.protocol.clone()))
            .collect();
        assert_eq!(ports, [(80, Some("TCP".to_owned()))]);
        for slice in sim.imported_slices(i, &web()) {
            assert_eq!(
                slice.metadata.labels.as_ref().unwrap()["kubernetes.io/service-name"],
                "clusterset-web",
                "the imported slices are the derived Service's, for kube-proxy"
            );
        }
    }

    // Settled: nothing more to write.
    let before = sim.clusters[1].writes_of("apply_derived_service");
    assert_eq!(before, 1, "one write of c1's derived Service");
    sim.advance(Duration::from_secs(5));
    settle(&mut sim);
    assert_eq!(sim.clusters[1].writes_of("apply_derived_service"), before);

    // Unexported: the import and its derived Service go.
    let export = sim.export_of(0, &web()).unwrap().clone();
    sim.local_apply(0, Input::ServiceExport(Event::Delete(export)));
    settle(&mut sim);
    for i in 0..2 {
        assert!(sim.import(i, &web()).is_none());
        assert!(
            derived(&sim, i, &web()).is_none(),
            "c{i}'s derived Service is deleted"
        );
    }
}

#[test]
fn a_service_of_the_derived_name_that_is_not_ours_is_left_alone() {
    let mut sim = running(2, None);
    // A user's own Service `clusterset-web` in c1, before web is imported there.
    let user: k8s_openapi::api::core::v1::Service = serde_json::from_value(serde_json::json!({
        "metadata": {"name": "clusterset-web", "namespace": "shop", "labels": {"app": "mine"}},
        "spec": {"selector": {"app": "mine"}, "ports": [{"port": 8080}], "clusterIP": "10.96.9.9"},
    }))
    .unwrap();
    sim.local_apply(1, Input::Service(Event::Apply(user.clone())));
    sim.export(0, &web(), &[80]);
    settle(&mut sim);
    assert!(sim.import(1, &web()).is_some(), "web is imported in c1");
    assert_eq!(
        derived(&sim, 1, &web()),
        Some(user.clone()),
        "the user's Service is untouched"
    );
    assert_eq!(sim.clusters[1].writes_of("apply_derived_service"), 0);
    // Nor does it get the imported endpoints: c1's slices are not labelled as its.
    for slice in sim.imported_slices(1, &web()) {
        let labels = slice.metadata.labels.as_ref().unwrap();
        assert!(
            !labels.contains_key("kubernetes.io/service-name"),
            "the user's Service would get the imported endpoints: {labels:?}"
        );
    }
    assert!(
        derived(&sim, 0, &web()).is_some(),
        "c0 derives its Service as usual"
    );

    // The user deletes theirs: c1 derives its own, and its slices become that Service's.
    sim.local_apply(1, Input::Service(Event::Delete(user)));
    settle(&mut sim);
    let ours = derived(&sim, 1, &web()).expect("c1's derived Service once the name is free");
    assert_eq!(
        ours.spec.unwrap().external_ips,
        Some(sim.import(1, &web()).unwrap().spec.ips.clone())
    );
    for slice in sim.imported_slices(1, &web()) {
        assert_eq!(
            slice.metadata.labels.as_ref().unwrap()["kubernetes.io/service-name"],
            "clusterset-web"
        );
    }
}

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! Broker write isolation on simulated clusters (`clusterset_sim`): each member's records
//! live in its own hub namespace, the simulated hub refuses what its RBAC refuses, and the
//! upgrade from the shared broker namespace moves every record without an import ever missing.

use std::collections::BTreeMap;
use std::time::Duration;

use clusterset_sim::{self as sim, Simulation};
use k8s_openapi::jiff::Timestamp;
use kube_syntax::status::{Denied, forbidden};
use mcs_controller::AgentConfig;
use mcs_controller::broker::SharedRecords;
use mcs_types::conditions::find_condition;
use mcs_types::{ClusterId, ServiceKey};

const ROUNDS: usize = 1000;
const CLUSTERS: usize = 3;

fn start() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn web() -> ServiceKey {
    ServiceKey::new("shop", "web")
}

/// The service only cluster `i` exports.
fn solo(i: usize) -> ServiceKey {
    ServiceKey::new("shop", &format!("solo-{i}"))
}

fn config(i: usize, shared_records: SharedRecords) -> AgentConfig {
    let mut config = sim::cluster_config(i, None).unwrap();
    config.shared_records = shared_records;
    config
}

/// What one cluster imports of one service: its clusterset IPs, its ports, the clusters it
/// names, and its EndpointSlices' endpoints (by slice name).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Imported {
    ips: Vec<String>,
    ports: Vec<i32>,
    clusters: Vec<String>,
    endpoints: BTreeMap<String, Vec<String>>,
}

/// What every cluster imports of `web` and of every cluster's solo service.
fn imports(sim: &Simulation) -> BTreeMap<(usize, ServiceKey), Option<Imported>> {
    let keys: Vec<ServiceKey> = std::iter::once(web())
        .chain((0..CLUSTERS).map(solo))
        .collect();
    let mut seen = BTreeMap::new();
    for i in 0..sim.clusters.len() {
        for key in &keys {
            let imported = sim.import(i, key).map(|import| Imported {
                ips: import.spec.ips.clone(),
                ports: import.spec.ports.iter().map(|p| p.port).collect(),
                clusters: import
                    .status
                    .iter()
                    .flat_map(|s| s.cluster_ids())
                    .map(str::to_owned)
                    .collect(),
                endpoints: sim
                    .imported_slices(i, key)
                    .into_iter()
                    .map(|s| {
                        (
                            s.metadata.name.clone().unwrap_or_default(),
                            s.endpoints
                                .iter()
                                .flat_map(|e| e.addresses.iter().cloned())
                                .collect(),
                        )
                    })
                    .collect(),
            });
            seen.insert((i, key.clone()), imported);
        }
    }
    seen
}

/// The namespaces on the hub that hold cluster `i`'s records, one entry per record.
fn homes(sim: &Simulation, i: usize) -> Vec<String> {
    let cluster = ClusterId::new(&format!("c{i}")).unwrap();
    sim.records
        .iter()
        .filter(|(_, r)| r.checked_record().is_ok_and(|r| r.cluster_id == cluster))
        .map(|(id, _)| id.namespace.clone())
        .collect()
}

/// Settles the simulation one round at a time until nothing is left to do; after every round,
/// every cluster imports exactly `expected` and (unless `may_refuse`) the simulated API servers
/// have refused nothing.
fn settle_watching(
    sim: &mut Simulation,
    expected: &BTreeMap<(usize, ServiceKey), Option<Imported>>,
    step: &str,
    may_refuse: bool,
) {
    for round in 0..ROUNDS {
        let stats = sim.settle(1);
        assert!(
            may_refuse || sim.refused.is_empty(),
            "{step}, round {round}: {:#?}",
            sim.refused
        );
        let now = imports(sim);
        if &now != expected {
            let changed: Vec<_> = now
                .iter()
                .filter(|(k, v)| expected.get(*k) != Some(*v))
                .collect();
            panic!("{step}, round {round}: the imports changed: {changed:#?}");
        }
        if stats.events == 0 && stats.writes == 0 {
            return;
        }
    }
    panic!("{step}: still busy after {ROUNDS} rounds");
}

#[test]
fn the_upgrade_moves_every_record_home_without_an_import_ever_changing() {
    // Step 0: agents of before the upgrade. Every record is in the shared broker namespace,
    // where every member may write (as agents in `write` mode on a legacy hub keep it).
    let configs = (0..CLUSTERS)
        .map(|i| config(i, SharedRecords::Write))
        .collect();
    let mut sim = Simulation::with_configs(configs, &["shop"], start()).unwrap();
    sim.shared_records_writable = true;
    sim.start_all();
    sim.settle_accepted(ROUNDS).unwrap();
    for i in 0..CLUSTERS {
        // `web` from every cluster, ports 80, 81, 82 merged; and one service of its own.
        let port = 80 + i32::try_from(i).unwrap();
        sim.export(i, &web(), &[port]);
        sim.export(i, &solo(i), &[8000 + port]);
    }
    sim.settle_accepted(ROUNDS).unwrap();
    let expected = imports(&sim);
    for i in 0..CLUSTERS {
        let web = expected[&(i, web())].as_ref().unwrap();
        assert_eq!(web.ports, [80, 81, 82], "c{i}");
        assert_eq!(web.clusters, ["c0", "c1", "c2"], "c{i}");
        assert_eq!(
            web.endpoints.len(),
            CLUSTERS,
            "c{i}: one slice per exporter"
        );
        for j in 0..CLUSTERS {
            let solo = expected[&(i, solo(j))]
                .as_ref()
                .unwrap_or_else(|| panic!("c{i} does not import c{j}'s solo service"));
            assert_eq!(solo.clusters, [format!("c{j}")]);
            assert_eq!(solo.ips.len(), 1);
        }
        assert_eq!(homes(&sim, i), [sim::BROKER_NAMESPACE; 2], "c{i}");
    }

    // Step 1: the hub's manifests allow the shared namespace (`--legacy-shared-records`), and
    // every agent is restarted with `--shared-records=write`, one at a time.
    for i in 0..CLUSTERS {
        sim.advance(Duration::from_secs(1));
        sim.restart_agent_with(i, config(i, SharedRecords::Write));
        settle_watching(
            &mut sim,
            &expected,
            &format!("step 1, c{i} on write"),
            false,
        );
        assert_eq!(homes(&sim, i), [sim::BROKER_NAMESPACE; 2], "c{i}");
    }

    // Step 2: each agent is restarted with `--shared-records=read`: its records move to its own
    // namespace, and only its own.
    for i in 0..CLUSTERS {
        sim.advance(Duration::from_secs(1));
        sim.restart_agent_with(i, config(i, SharedRecords::Read));
        settle_watching(&mut sim, &expected, &format!("step 2, c{i} on read"), false);
        for j in 0..CLUSTERS {
            let home = if j <= i {
                format!("{}-c{j}", sim::BROKER_NAMESPACE)
            } else {
                sim::BROKER_NAMESPACE.to_owned()
            };
            assert_eq!(homes(&sim, j), [home.clone(), home], "c{i} moved; c{j}");
        }
    }

    // Step 3: every agent is restarted with the default `ignore`, then the hub's manifests are
    // generated without the legacy flag.
    for i in 0..CLUSTERS {
        sim.advance(Duration::from_secs(1));
        sim.restart_agent_with(i, config(i, SharedRecords::Ignore));
        settle_watching(
            &mut sim,
            &expected,
            &format!("step 3, c{i} on ignore"),
            false,
        );
    }
    sim.shared_records_writable = false;
    settle_watching(&mut sim, &expected, "step 3, legacy RBAC removed", false);

    assert!(
        sim.records
            .keys()
            .all(|id| id.namespace != sim::BROKER_NAMESPACE),
        "records left in the shared namespace: {:?}",
        sim.records.keys().collect::<Vec<_>>()
    );
    assert_eq!(sim.records.len(), 2 * CLUSTERS);
    for i in 0..CLUSTERS {
        let cluster = ClusterId::new(&format!("c{i}")).unwrap();
        assert!(sim.record(&cluster, &web()).is_some(), "c{i}'s web");
        assert!(sim.record(&cluster, &solo(i)).is_some(), "c{i}'s solo");
        let stats = sim.clusters[i].core.stats();
        assert_eq!(stats.published_records, 2, "c{i}");
        assert!(
            stats.foreign_writers.iter().all(|(_, n)| *n == 0),
            "c{i}: {:?}",
            stats.foreign_writers
        );
    }
    let idle = sim.settle_accepted(ROUNDS).unwrap();
    assert_eq!(idle.writes, 0, "{idle:?}");
}

#[test]
fn the_hub_refuses_a_record_outside_the_writers_namespace_with_rbacs_403() {
    // c0's agent still writes into the shared namespace, but the hub's manifests were generated
    // without `--legacy-shared-records`.
    let configs = vec![
        config(0, SharedRecords::Write),
        config(1, SharedRecords::Ignore),
    ];
    let mut sim = Simulation::with_configs(configs, &["shop"], start()).unwrap();
    assert!(!sim.shared_records_writable);
    sim.start_all();
    sim.settle_accepted(ROUNDS).unwrap();
    sim.export(0, &web(), &[80]);
    sim.settle(ROUNDS);

    let message = forbidden(&Denied {
        user: "system:serviceaccount:clusterset-broker:agent-c0",
        verb: "patch",
        group: "clusterset.io",
        plural: "exportrecords",
        name: "c0.shop.web",
        namespace: "clusterset-broker",
    })
    .message()
    .to_owned();
    assert_eq!(
        message,
        "exportrecords.clusterset.io \"c0.shop.web\" is forbidden: User \"system:serviceaccount:clusterset-broker:agent-c0\" cannot patch resource \"exportrecords\" in API group \"clusterset.io\" in the namespace \"clusterset-broker\""
    );
    assert_eq!(sim.refused, [format!("c0: {message}")]);
    assert_eq!(
        sim.clusters[0].failed_writes.get("publish_record"),
        Some(&1)
    );
    assert!(sim.records.is_empty(), "nothing stored: {:?}", sim.records);
    assert!(sim.import(1, &web()).is_none());

    let export = sim.export_of(0, &web()).unwrap();
    let ready = find_condition(&export.status.as_ref().unwrap().conditions, "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("False", "Failed")
    );
    assert_eq!(
        ready.message,
        format!("Writing the record to the broker failed: {message}")
    );
}

#[test]
fn an_agent_put_back_on_write_without_the_legacy_rbac_keeps_its_own_copy() {
    let configs = vec![
        config(0, SharedRecords::Ignore),
        config(1, SharedRecords::Ignore),
    ];
    let mut sim = Simulation::with_configs(configs, &["shop"], start()).unwrap();
    sim.start_all();
    sim.settle_accepted(ROUNDS).unwrap();
    sim.export(0, &web(), &[80]);
    sim.settle_accepted(ROUNDS).unwrap();
    let expected = imports(&sim);
    assert!(expected[&(1, web())].is_some());
    assert_eq!(homes(&sim, 0), ["clusterset-broker-c0"]);

    // A rollback to step 1 that forgot the hub's manifests: c0's agent publishes into the
    // shared namespace, which the hub refuses. Its record stays where it is, and nobody's
    // import changes meanwhile.
    sim.advance(Duration::from_secs(1));
    sim.restart_agent_with(0, config(0, SharedRecords::Write));
    settle_watching(&mut sim, &expected, "c0 back on write", true);
    assert_eq!(sim.refused.len(), 1, "{:#?}", sim.refused);
    assert!(
        sim.refused[0].starts_with("c0: exportrecords.clusterset.io \"c0.shop.web\" is forbidden"),
        "{}",
        sim.refused[0]
    );
    assert_eq!(homes(&sim, 0), ["clusterset-broker-c0"]);
    let export = sim.export_of(0, &web()).unwrap();
    let ready = find_condition(&export.status.as_ref().unwrap().conditions, "Ready").unwrap();
    assert_eq!(ready.status, "False", "{ready:?}");
}

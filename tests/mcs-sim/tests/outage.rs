#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! Outages on simulated clusters (`clusterset_sim`), whose API servers, like real ones,
//! send no watch event for a write that leaves the stored object as it was: while the hub (the
//! broker) or a member's API server is down the agents write only what changes, wake up only
//! when there is something to do, and catch up promptly when it returns.

use std::collections::BTreeMap;
use std::time::Duration;

use clusterset_sim::{self as sim, Simulation};
use k8s_openapi::jiff::Timestamp;
use mcs_controller::core::ClusterHealth;
use mcs_types::conditions::find_condition;
use mcs_types::{ClusterId, ServiceKey};

const ROUNDS: usize = 1000;
/// The simulated time between two looks at the agents (the runtime reacts to events at once;
/// this is the resolution of the measurements below).
const TICK: Duration = Duration::from_millis(100);

fn start() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn web() -> ServiceKey {
    ServiceKey::new("shop", "web")
}

fn api() -> ServiceKey {
    ServiceKey::new("shop", "api")
}

/// East (c0: a member, and its API server is also the hub) and west (c1), with heartbeat
/// Leases of `lease` (the end-to-end test uses 10 s).
fn east_and_west(lease: Duration) -> Simulation {
    let configs = (0..2)
        .map(|i| {
            let mut config = sim::cluster_config(i, None).unwrap();
            config.lease_duration = lease;
            config
        })
        .collect();
    let mut sim = Simulation::with_configs(configs, &["shop"], start()).unwrap();
    sim.start_all();
    settle(&mut sim);
    sim
}

fn settle(sim: &mut Simulation) -> sim::SettleStats {
    sim.settle_accepted(ROUNDS)
        .unwrap_or_else(|refused| panic!("{refused}"))
}

/// What the agents did over some simulated time.
#[derive(Debug, Default)]
struct Watched {
    /// West's writes by kind (successful ones, as `clusterset_agent_writes_total` counts them).
    writes: BTreeMap<&'static str, usize>,
    /// West's failed writes by kind.
    failed: BTreeMap<&'static str, usize>,
    /// Looks at which an agent had nothing to do yet asked to be woken up at a time already
    /// past: its runtime would loop without sleeping.
    spins: usize,
}

fn diff(
    after: &BTreeMap<&'static str, usize>,
    before: &BTreeMap<&'static str, usize>,
) -> BTreeMap<&'static str, usize> {
    after
        .iter()
        .map(|(k, v)| (*k, v - before.get(k).copied().unwrap_or(0)))
        .filter(|(_, v)| *v > 0)
        .collect()
}

/// Runs the simulation for `duration` the way the runtime drives an agent: every [`TICK`] the
/// events are taken in and the agents reconcile, every third of the Lease they heartbeat.
/// Stops early when `until` holds. Returns what west did and how long it ran.
fn run_for(
    sim: &mut Simulation,
    duration: Duration,
    lease: Duration,
    mut until: impl FnMut(&Simulation) -> bool,
) -> (Watched, Duration) {
    let west = 1;
    let writes_before = sim.clusters[west].writes.clone();
    let failed_before = sim.clusters[west].failed_writes.clone();
    let mut watched = Watched::default();
    let heartbeat_every = lease / 3;
    let mut since_heartbeat = Duration::ZERO;
    let mut elapsed = Duration::ZERO;
    while elapsed < duration && !until(sim) {
        sim.advance(TICK);
        elapsed += TICK;
        since_heartbeat += TICK;
        if since_heartbeat >= heartbeat_every {
            since_heartbeat = Duration::ZERO;
            sim.heartbeat_all();
        }
        settle(sim);
        for cluster in &sim.clusters {
            if cluster.core.dirty_count() == 0
                && cluster.core.next_wakeup().is_some_and(|at| at < sim.now)
            {
                watched.spins += 1;
            }
        }
    }
    watched.writes = diff(&sim.clusters[west].writes, &writes_before);
    watched.failed = diff(&sim.clusters[west].failed_writes, &failed_before);
    (watched, elapsed)
}

fn ready(sim: &Simulation, i: usize, key: &ServiceKey) -> (String, String, String) {
    let export = sim.export_of(i, key).expect("export");
    let c = find_condition(&export.status.as_ref().expect("status").conditions, "Ready")
        .expect("Ready condition");
    (c.status.clone(), c.reason.clone(), c.message.clone())
}

fn imported_from(sim: &Simulation, i: usize, key: &ServiceKey) -> Vec<String> {
    sim.import(i, key)
        .and_then(|import| import.status.as_ref())
        .map(|status| status.cluster_ids().map(str::to_owned).collect())
        .unwrap_or_default()
}

#[test]
fn while_the_hub_is_down_west_writes_only_what_changes_and_does_not_spin() {
    let lease = Duration::from_secs(10);
    let mut sim = east_and_west(lease);
    sim.export(0, &web(), &[80]);
    settle(&mut sim);
    assert_eq!(imported_from(&sim, 1, &web()), ["c0"]);

    // The hub (east's API server) stops; while it is down, `api` is exported in west.
    sim.stop_hub();
    sim.stop_api(0);
    sim.export(1, &api(), &[8080]);
    let (outage, _) = run_for(&mut sim, Duration::from_secs(60), lease, |_| false);
    println!("west during a 60 s hub outage: {outage:?}");

    // West reports the failure on the export and marks east stale on its import of `web`.
    let (status, reason, message) = ready(&sim, 1, &api());
    assert_eq!((status.as_str(), reason.as_str()), ("False", "Failed"));
    assert!(message.contains(sim::UNREACHABLE), "{message}");
    assert!(matches!(
        sim.clusters[1]
            .core
            .cluster_health(&ClusterId::new("c0").unwrap()),
        Some(ClusterHealth::Stale { .. })
    ));
    // A handful of writes: the export's status when it is created and when its publication
    // fails (in one write or two), the import's status once when east goes stale. Nothing in a
    // loop.
    let export_status = outage
        .writes
        .get("apply_service_export_status")
        .copied()
        .unwrap_or(0);
    let import_status = outage
        .writes
        .get("apply_service_import_status")
        .copied()
        .unwrap_or(0);
    assert!(
        (1..=2).contains(&export_status),
        "the export's status was written {export_status} times during the outage: {outage:?}"
    );
    assert_eq!(
        import_status, 1,
        "the import's status was written {import_status} times during the outage: {outage:?}"
    );
    assert!(
        outage.writes.values().sum::<usize>() <= 3,
        "west wrote more than what changed: {outage:?}"
    );
    // Failed publications are retried with backoff, not in a loop (and not at all once the
    // agent no longer holds its Lease).
    assert!(
        outage.failed.values().sum::<usize>() <= 8,
        "west retried too often: {outage:?}"
    );
    assert_eq!(
        outage.spins, 0,
        "an agent with nothing to do asked to be woken up at a time already past"
    );
}

#[test]
fn while_a_members_api_server_is_down_its_failed_writes_back_off() {
    let lease = Duration::from_secs(10);
    let mut sim = east_and_west(lease);
    sim.export(1, &api(), &[8080]);
    settle(&mut sim);
    assert_eq!(imported_from(&sim, 0, &api()), ["c1"]);
    assert_eq!(ready(&sim, 1, &api()).1, "Exported");

    // West's API server stops. Meanwhile east exports `web`, and `api` too with another port
    // (a conflict that west's ServiceExport should show): west's agent cannot write its import
    // of `web` nor its export's status until its API server returns.
    sim.stop_api(1);
    sim.advance(Duration::from_secs(1));
    sim.export(0, &web(), &[80]);
    sim.export(0, &api(), &[9090]);
    let (outage, _) = run_for(&mut sim, Duration::from_secs(30), lease, |_| false);
    println!("west during a 30 s outage of its API server: {outage:?}");
    // Backoff of 1 s doubling, per write: at most 6 attempts of each in 30 s (after 0, 1, 3,
    // 7, 15 and 31 s), and west writes each kind for at most its two services (`web`, `api`).
    for (kind, failed) in &outage.failed {
        assert!(
            *failed <= 12,
            "west's {kind} failed {failed} times in 30 s: retried without backoff ({outage:?})"
        );
    }
    assert!(outage.failed.contains_key("apply_service_export_status"));
    assert_eq!(outage.spins, 0);

    // When it returns, west catches up at once: the failed writes do not wait out their backoff.
    sim.start_api(1);
    let (back, took) = run_for(&mut sim, Duration::from_secs(60), lease, |sim| {
        imported_from(sim, 1, &web()) == ["c0"]
            && sim
                .export_of(1, &api())
                .and_then(|e| e.status.as_ref())
                .and_then(|s| find_condition(&s.conditions, "Conflict"))
                .is_some_and(|c| c.status == "True")
    });
    println!("west caught up {took:?} after its API server returned: {back:?}");
    assert_eq!(imported_from(&sim, 1, &web()), ["c0"]);
    assert!(took <= Duration::from_secs(1), "took {took:?}");
}

#[test]
fn a_failed_publication_goes_out_as_soon_as_the_hub_answers_again() {
    // A Lease that outlives the outage, so that only the retry of the failed publication stands
    // between the hub's return and the export reaching east.
    let lease = Duration::from_secs(120);
    let mut sim = east_and_west(lease);
    sim.export(0, &web(), &[80]);
    settle(&mut sim);

    sim.stop_hub();
    sim.stop_api(0);
    sim.export(1, &api(), &[8080]);
    let (outage, _) = run_for(&mut sim, Duration::from_secs(40), lease, |_| false);
    assert!(
        outage.failed.get("publish_record").copied().unwrap_or(0) >= 2,
        "the publication failed and was retried during the outage: {outage:?}"
    );
    assert_eq!(ready(&sim, 1, &api()).1, "Failed");

    sim.start_hub();
    sim.start_api(0);
    let (_, took) = run_for(&mut sim, Duration::from_secs(120), lease, |sim| {
        imported_from(sim, 0, &api()) == ["c1"]
    });
    println!("west's export reached east {took:?} after the hub returned");
    assert_eq!(imported_from(&sim, 0, &api()), ["c1"]);
    assert!(
        took <= Duration::from_secs(1),
        "west's export reached east {took:?} after the hub returned: the failed publication waited out its backoff"
    );
    assert_eq!(ready(&sim, 1, &api()).1, "Exported");
}

#[test]
fn an_expired_lease_is_taken_again_and_the_export_published_when_the_hub_returns() {
    // The end-to-end test's setting: a 10 s Lease, which runs out during the outage.
    let lease = Duration::from_secs(10);
    let mut sim = east_and_west(lease);
    sim.export(0, &web(), &[80]);
    settle(&mut sim);

    sim.stop_hub();
    sim.stop_api(0);
    sim.export(1, &api(), &[8080]);
    run_for(&mut sim, Duration::from_secs(30), lease, |_| false);

    sim.start_hub();
    sim.start_api(0);
    let (back, took) = run_for(&mut sim, Duration::from_secs(120), lease, |sim| {
        imported_from(sim, 0, &api()) == ["c1"]
    });
    println!("west's export reached east {took:?} after the hub returned: {back:?}");
    assert_eq!(imported_from(&sim, 0, &api()), ["c1"]);
    assert!(took <= Duration::from_secs(1), "took {took:?}");
    assert_eq!(ready(&sim, 1, &api()).1, "Exported");
    // And east is fresh again on west's import of `web`.
    assert!(matches!(
        sim.clusters[1]
            .core
            .cluster_health(&ClusterId::new("c0").unwrap()),
        Some(ClusterHealth::Fresh)
    ));
}

#[test]
fn a_publication_the_hub_stored_without_answering_makes_the_export_ready() {
    let lease = Duration::from_secs(10);
    let mut sim = east_and_west(lease);
    // The hub stores west's record but the connection breaks before its answer: the agent is
    // told the publication failed, and then sees the record in the broker.
    sim.hub_answers_lost = true;
    sim.export(1, &api(), &[8080]);
    settle(&mut sim);
    sim.hub_answers_lost = false;
    assert!(
        sim.clusters[1].failed_writes.contains_key("publish_record"),
        "west was told the publication failed"
    );
    assert_eq!(
        imported_from(&sim, 0, &api()),
        ["c1"],
        "yet it is in the broker"
    );

    let (after, _) = run_for(&mut sim, Duration::from_secs(120), lease, |_| false);
    let (status, reason, message) = ready(&sim, 1, &api());
    assert_eq!(
        (status.as_str(), reason.as_str()),
        ("True", "Exported"),
        "the export still says {message:?} although its record is in the broker: {after:?}"
    );
}

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The pure decision, cluster by cluster: guards, first enable, exports pending / valid /
//! conflicting, lookups and their failures, steady state, disabling, and the ServiceImport
//! source. An in-memory cluster (the `mcs-ceph-fixtures` test-support crate) carries out the
//! writes between reconciles.

use std::net::IpAddr;
use std::time::Duration;

use ceph_address_plan::Daemon;
use k8s_openapi::jiff::Timestamp;
use mcs_ceph_api::{AddressingStatus, DaemonEntry, Phase, RemovedOsd};
use mcs_ceph_core::decide::{EventType, LookupRequest, Outcome, Write, prepare};
use mcs_ceph_core::{Config, GlobalIpSource, McsApi, McsVersion, RetryPolicy, Snapshot};
use mcs_ceph_fixtures::*;

/// One reconcile: the writes and lookups it asked for and its outcome. `answer` plays DNS.
struct Reconciled {
    writes: Vec<Write>,
    lookups: Vec<LookupRequest>,
    outcome: Outcome,
}

fn reconcile_with(
    snapshot: &Snapshot,
    config: &Config,
    now: Timestamp,
    answer: impl Fn(&Daemon) -> Result<Vec<IpAddr>, String>,
) -> Reconciled {
    let prepared = prepare(snapshot, config, now);
    let writes = prepared.writes().to_vec();
    let lookups = prepared.lookups().to_vec();
    let results = lookups
        .iter()
        .map(|l| (l.daemon.clone(), answer(&l.daemon)))
        .collect();
    Reconciled {
        writes,
        lookups,
        outcome: prepared.complete(results),
    }
}

fn dns_ok(daemon: &Daemon) -> Result<Vec<IpAddr>, String> {
    match daemon {
        Daemon::Osd(id) => Ok(vec![osd_global_ip(*id)]),
        Daemon::Mon(_) => Err("unexpected mon lookup".into()),
    }
}

fn no_dns(daemon: &Daemon) -> Result<Vec<IpAddr>, String> {
    panic!("no lookup expected, asked for {daemon}")
}

/// Reconciles and carries out every write on `snapshot`.
fn step(
    snapshot: &mut Snapshot,
    now: Timestamp,
    answer: impl Fn(&Daemon) -> Result<Vec<IpAddr>, String>,
) -> Reconciled {
    step_answering(snapshot, &Config::default(), now, answer)
}

fn status(snapshot: &Snapshot) -> &AddressingStatus {
    snapshot.prior.as_ref().unwrap().status.as_ref().unwrap()
}

/// The status entry of daemon `name` (`osd.1`), which must be listed.
fn entry<'a>(status: &'a AddressingStatus, name: &str) -> &'a DaemonEntry {
    status
        .daemons
        .iter()
        .find(|d| d.name == name)
        .unwrap_or_else(|| panic!("{name} is not listed in {:?}", status.daemons))
}

fn cond<'a>(status: &'a AddressingStatus, type_: &str) -> (&'a str, &'a str, &'a str) {
    let c = status
        .conditions
        .iter()
        .find(|c| c.type_ == type_)
        .unwrap_or_else(|| panic!("no {type_} condition in {:?}", status.conditions));
    (c.status.as_str(), c.reason.as_str(), c.message.as_str())
}

/// A cluster with `osds` OSDs walked to the point where every export is Valid and Ready and
/// every global IP is known.
fn converged(osds: u32) -> Snapshot {
    let mut snapshot = resolved(osds);
    // One failure domain (here: one OSD) per reconcile gets its arguments.
    for round in 0..osds {
        let r = step(&mut snapshot, at(11 + i64::from(round)), no_dns);
        assert_eq!(r.writes.len(), 1, "{:?}", r.writes);
        assert_eq!(r.writes[0].kind(), "apply_osd_args");
    }
    let r = step(&mut snapshot, at(11 + i64::from(osds)), no_dns);
    assert!(r.writes.is_empty(), "{:?}", r.writes);
    snapshot
}

/// Every export Valid and Ready and every global IP known; no OSD Deployment changed yet.
fn resolved(osds: u32) -> Snapshot {
    let mut snapshot = rook_cluster(osds);
    step(&mut snapshot, at(0), no_dns);
    set_export_conditions(&mut snapshot, &exported_conditions());
    step(&mut snapshot, at(10), dns_ok);
    snapshot
}

#[test]
fn a_cluster_without_mcs_costs_nothing() {
    let mut snapshot = rook_cluster(3);
    snapshot.cluster = cluster_with(serde_json::json!({"multiClusterService": {"enabled": false}}));
    let r = reconcile_with(&snapshot, &Config::default(), at(0), no_dns);
    assert!(r.writes.is_empty() && r.lookups.is_empty());
    assert_eq!(r.outcome.status, None);
    assert!(r.outcome.events.is_empty());
    assert_eq!(r.outcome.requeue_after, None);
}

#[test]
fn guard_failures_write_only_a_status_and_an_event_with_the_fix() {
    let cases: Vec<(&str, Snapshot, &str)> = vec![
        (
            "MissingClusterID",
            Snapshot {
                cluster: cluster_with(
                    serde_json::json!({"multiClusterService": {"enabled": true}}),
                ),
                ..rook_cluster(2)
            },
            "set it to this cluster's id",
        ),
        (
            "InvalidClusterID",
            Snapshot {
                cluster: cluster_with(
                    serde_json::json!({"multiClusterService": {"enabled": true, "clusterID": "East_1"}}),
                ),
                ..rook_cluster(2)
            },
            "lower case letters, digits and '-' only",
        ),
        (
            "HostNetworking",
            Snapshot {
                cluster: cluster_with(serde_json::json!({"provider": "host"})),
                ..rook_cluster(2)
            },
            "use pod networking",
        ),
        (
            "CephTooOld",
            {
                let mut s = rook_cluster(2);
                s.cluster.spec["cephVersion"]["image"] = "quay.io/ceph/ceph:v17.2.5".into();
                s
            },
            "upgrade Ceph",
        ),
        (
            "McsApiNotServed",
            Snapshot {
                mcs_api: McsApi::Missing("multicluster.x-k8s.io/v1beta1 is not served".into()),
                ..rook_cluster(2)
            },
            "install the MCS CRDs",
        ),
        (
            "UnreadableSpec",
            {
                let mut s = rook_cluster(2);
                s.cluster.spec["mon"]["count"] = "three".into();
                s
            },
            "fix that field",
        ),
    ];
    for (reason, mut snapshot, fix) in cases {
        let r = reconcile_with(&snapshot, &Config::default(), at(0), no_dns);
        assert!(r.writes.is_empty(), "{reason}: {:?}", r.writes);
        assert!(r.lookups.is_empty(), "{reason}");
        assert_eq!(r.outcome.phase, Phase::Blocked, "{reason}");
        assert_eq!(r.outcome.requeue_after, None, "{reason}");
        let Some(Write::ApplyStatus(object)) = &r.outcome.status else {
            panic!("{reason}: no status write");
        };
        let status = object.status.as_ref().unwrap();
        let (s, why, message) = cond(status, "Accepted");
        assert_eq!((s, why), ("False", reason));
        assert!(message.contains(fix), "{reason}: {message}");
        assert_eq!(
            status.conditions.len(),
            1,
            "{reason}: only Accepted while blocked"
        );
        let owner = &object.metadata.owner_references.as_ref().unwrap()[0];
        assert_eq!(
            (owner.uid.as_str(), owner.controller),
            (CLUSTER_UID, Some(true))
        );
        assert_eq!(r.outcome.events.len(), 1, "{reason}");
        let event = &r.outcome.events[0];
        assert_eq!(event.type_, EventType::Warning);
        assert_eq!(event.reason, reason);
        assert!(event.note.contains(fix), "{reason}: {}", event.note);

        // Nothing changed: nothing is written or said again.
        apply(&mut snapshot, r.outcome.status);
        let again = reconcile_with(&snapshot, &Config::default(), at(60), no_dns);
        assert!(
            again.writes.is_empty() && again.lookups.is_empty(),
            "{reason}"
        );
        assert_eq!(again.outcome.status, None, "{reason}");
        assert!(again.outcome.events.is_empty(), "{reason}");
    }
}

#[test]
fn a_lifted_guard_is_a_normal_event_and_the_cluster_proceeds() {
    let mut snapshot = Snapshot {
        mcs_api: McsApi::Missing("not served".into()),
        ..rook_cluster(2)
    };
    step(&mut snapshot, at(0), no_dns);
    snapshot.mcs_api = McsApi::Served(McsVersion::V1Beta1);
    let r = step(&mut snapshot, at(5), no_dns);
    assert_eq!(r.writes.len(), 4, "two OSD Services and two exports");
    assert_eq!(r.outcome.events.len(), 1);
    assert_eq!(r.outcome.events[0].type_, EventType::Normal);
    assert_eq!(r.outcome.events[0].reason, "GuardsPassed");
    assert_eq!(cond(status(&snapshot), "Accepted").0, "True");
}

#[test]
fn first_enable_applies_osd_services_and_exports_and_leaves_mons_to_failover() {
    let mut snapshot = rook_cluster(4);
    let r = step(&mut snapshot, at(0), no_dns);
    let names: Vec<(&str, &str)> = r.writes.iter().map(|w| (w.kind(), w.target().1)).collect();
    let mut expected = Vec::new();
    for id in 0..4 {
        expected.push(("apply_service", format!("rook-ceph-osd-{id}")));
    }
    for id in 0..4 {
        expected.push(("apply_service_export", format!("rook-ceph-osd-{id}")));
    }
    let expected: Vec<(&str, &str)> = expected.iter().map(|(k, n)| (*k, n.as_str())).collect();
    assert_eq!(names, expected);
    assert!(r.lookups.is_empty(), "no export is Ready yet");
    for write in &r.writes {
        let (namespace, _) = write.target();
        assert_eq!(namespace, NAMESPACE);
        let owners = match write {
            Write::ApplyService(s) => s.metadata.owner_references.clone(),
            Write::ApplyServiceExport { export, version } => {
                assert_eq!(*version, McsVersion::V1Beta1);
                export.metadata.owner_references.clone()
            }
            other => panic!("unexpected write on first enable: {other:?}"),
        };
        let owner = &owners.unwrap()[0];
        assert_eq!(owner.kind, "CephCluster");
        assert_eq!(owner.uid, CLUSTER_UID);
        assert_eq!(owner.controller, None, "Rook's non-controller reference");
    }
    let status = status(&snapshot);
    assert_eq!(status.phase, Phase::Exporting);
    assert_eq!((status.ready_daemons, status.daemon_count), (0, 7));
    let (s, reason, message) = cond(status, "Exported");
    assert_eq!((s, reason), ("Unknown", "ExportsPending"));
    assert!(
        message.starts_with("4 of 4 ServiceExports are pending"),
        "{message}"
    );
    let mon_a = entry(status, "mon.a");
    assert_eq!(mon_a.name, "mon.a");
    assert_eq!(mon_a.state, "Replace");
    assert!(
        !mon_a.exported,
        "a mon on its cluster IP is replaced, not exported"
    );
    assert!(
        mon_a
            .message
            .as_deref()
            .unwrap()
            .contains("a new mon replaces it")
    );
    let osd_0 = entry(status, "osd.0");
    assert_eq!(
        (osd_0.name.as_str(), osd_0.state.as_str()),
        ("osd.0", "Waiting")
    );
    assert_eq!(osd_0.advertised.as_deref(), Some("pod IP"));
    assert_eq!(osd_0.export.as_deref(), Some("not created yet"));
    assert!(r.outcome.events.is_empty(), "pending is not a warning");
}

#[test]
fn exports_pending_valid_and_conflicting_show_in_the_status() {
    let mut snapshot = rook_cluster(3);
    step(&mut snapshot, at(0), no_dns);

    // The MCS implementation has not looked at the exports yet.
    let r = step(&mut snapshot, at(1), no_dns);
    assert!(r.writes.is_empty(), "the exports exist: {:?}", r.writes);
    let s = status(&snapshot);
    assert_eq!(
        entry(s, "osd.0").export.as_deref(),
        Some("no conditions yet (is the MCS controller running in this cluster?)")
    );

    // One is invalid, one is in conflict, one is exported.
    set_export_conditions(&mut snapshot, &exported_conditions());
    export_mut(&mut snapshot, "rook-ceph-osd-0")
        .status
        .as_mut()
        .unwrap()
        .conditions[0] = condition(
        "Valid",
        "False",
        "NoService",
        "Service rook-ceph/rook-ceph-osd-0 not found",
    );
    export_mut(&mut snapshot, "rook-ceph-osd-1")
        .status
        .as_mut()
        .unwrap()
        .conditions[2] = condition(
        "Conflict",
        "True",
        "PortConflict",
        "2/3 clusters disagree on ports",
    );
    let r = step(&mut snapshot, at(2), dns_ok);
    let looked: Vec<String> = r.lookups.iter().map(|l| l.name.to_string()).collect();
    assert_eq!(
        looked,
        [
            "east.rook-ceph-osd-1.rook-ceph.svc.clusterset.local",
            "east.rook-ceph-osd-2.rook-ceph.svc.clusterset.local"
        ],
        "an invalid export is not looked up; a conflict does not stop the name"
    );
    let s = status(&snapshot);
    let (st, reason, message) = cond(s, "Exported");
    assert_eq!((st, reason), ("False", "ExportInvalid"));
    assert!(
        message.contains("rook-ceph-osd-0: Valid=False (NoService)"),
        "{message}"
    );
    assert_eq!(s.phase, Phase::Exporting);
    assert!(
        entry(s, "osd.1")
            .export
            .as_deref()
            .unwrap()
            .contains("Conflict=True (PortConflict)")
    );
    assert_eq!(entry(s, "osd.2").global_ip.as_deref(), Some("242.1.0.22"));
    assert_eq!(r.outcome.events.len(), 1);
    assert_eq!(r.outcome.events[0].reason, "ExportInvalid");

    // The Service shows up: only the conflict is left.
    export_mut(&mut snapshot, "rook-ceph-osd-0")
        .status
        .as_mut()
        .unwrap()
        .conditions[0] = condition("Valid", "True", "Valid", "");
    let r = step(&mut snapshot, at(3), dns_ok);
    assert_eq!(r.lookups.len(), 1, "only osd.0 is new");
    let (st, reason, _) = cond(status(&snapshot), "Exported");
    assert_eq!((st, reason), ("False", "ExportConflict"));
    assert_eq!(r.outcome.events[0].reason, "ExportConflict");

    // Resolved: all valid.
    export_mut(&mut snapshot, "rook-ceph-osd-1")
        .status
        .as_mut()
        .unwrap()
        .conditions[2] = condition("Conflict", "False", "NoConflicts", "");
    let r = step(&mut snapshot, at(4), no_dns);
    let s = status(&snapshot);
    assert_eq!(cond(s, "Exported").0, "True");
    assert_eq!(cond(s, "Resolved").0, "True");
    assert_eq!(r.outcome.events.len(), 1);
    assert_eq!(r.outcome.events[0].type_, EventType::Normal);
    assert_eq!(s.phase, Phase::Migrating, "OSDs still advertise pod IPs");
    assert!(
        s.message
            .contains("mons are replaced only by the mon migration"),
        "{}",
        s.message
    );
}

#[test]
fn a_failed_lookup_is_retried_with_backoff_and_recovers() {
    let config = Config {
        retry: RetryPolicy {
            first: Duration::from_secs(5),
            max: Duration::from_secs(300),
        },
        ..Config::default()
    };
    let mut snapshot = rook_cluster(2);
    step_answering(&mut snapshot, &config, at(0), no_dns);
    set_export_conditions(&mut snapshot, &exported_conditions());
    let servfail = |d: &Daemon| {
        match d {
        Daemon::Osd(1) => Err("east.rook-ceph-osd-1.rook-ceph.svc.clusterset.local: the server answered SERVFAIL after 4 attempts".to_owned()),
        other => dns_ok(other),
    }
    };
    let r = step_answering(&mut snapshot, &config, at(10), servfail);
    assert_eq!(r.lookups.len(), 2);
    assert_eq!(r.outcome.requeue_after, Some(Duration::from_secs(5)));
    let s = status(&snapshot);
    let (st, reason, message) = cond(s, "Resolved");
    assert_eq!((st, reason), ("False", "LookupFailed"));
    assert!(message.contains("SERVFAIL"), "{message}");
    let osd_1 = entry(s, "osd.1");
    assert_eq!(osd_1.global_ip, None);
    let lookup = osd_1.lookup.as_ref().unwrap();
    assert_eq!(lookup.failures, 1);
    assert_eq!(lookup.retry_at.as_ref().unwrap().0, at(15));
    assert!(osd_1.message.as_deref().unwrap().contains("lookup failed"));
    assert_eq!(r.outcome.events[0].type_, EventType::Warning);
    assert_eq!(r.outcome.events[0].reason, "LookupFailed");

    // Before the retry time nothing is looked up and nothing written.
    let r = step_answering(&mut snapshot, &config, at(12), no_dns);
    assert!(r.lookups.is_empty());
    assert!(
        r.writes.iter().all(|w| w.kind() == "apply_osd_args"),
        "only OSDs with a known IP get arguments: {:?}",
        r.writes
    );
    assert_eq!(r.outcome.status, None);
    assert_eq!(r.outcome.requeue_after, Some(Duration::from_secs(3)));

    // Due: only osd.1 is asked again; it fails again, the wait doubles.
    let r = step_answering(&mut snapshot, &config, at(15), servfail);
    assert_eq!(r.lookups.len(), 1);
    assert_eq!(r.lookups[0].daemon, Daemon::Osd(1));
    let lookup = entry(status(&snapshot), "osd.1").lookup.clone().unwrap();
    assert_eq!((lookup.failures, lookup.retry_at.unwrap().0), (2, at(25)));
    assert!(
        r.outcome.events.is_empty(),
        "the same failure is not announced twice"
    );

    // Recovery.
    let r = step_answering(&mut snapshot, &config, at(25), dns_ok);
    assert_eq!(r.lookups.len(), 1);
    let s = status(&snapshot);
    assert_eq!(entry(s, "osd.1").global_ip.as_deref(), Some("242.1.0.21"));
    assert_eq!(entry(s, "osd.1").lookup.as_ref().unwrap().failures, 0);
    assert_eq!(cond(s, "Resolved").0, "True");
    assert_eq!(r.outcome.requeue_after, None);
    assert_eq!(r.outcome.events[0].type_, EventType::Normal);
    assert_eq!(r.outcome.events[0].reason, "Resolved");
}

/// 1,000 OSDs in 100 failure domains (10 each), all on their global IPs: the status counts
/// them and lists only the mons (every settled OSD is only counted), and the whole object
/// stays under 64 KB; one failure domain is written per reconcile, each with its 10 OSDs.
#[test]
fn the_status_of_a_thousand_settled_osds_stays_under_64_kb() {
    const OSDS: u32 = 1000;
    let mut snapshot = rook_cluster(0);
    snapshot.deployments = (0..OSDS)
        .map(|id| osd_deployment_in(NAMESPACE, id, &format!("node-{}", id / 10), None))
        .collect();
    step(&mut snapshot, at(0), no_dns);
    set_export_conditions(&mut snapshot, &exported_conditions());
    step(&mut snapshot, at(10), dns_ok);
    for round in 0..OSDS / 10 {
        let r = step(&mut snapshot, at(11 + i64::from(round)), no_dns);
        assert_eq!(r.writes.len(), 10, "round {round}: {:?}", r.writes);
    }
    // The last domain's rollout seen finished: the status says so, once.
    let r = step(&mut snapshot, at(200), no_dns);
    assert!(
        r.writes.is_empty() && r.lookups.is_empty(),
        "{:?}",
        r.writes
    );
    let r = step(&mut snapshot, at(201), no_dns);
    assert!(
        r.writes.is_empty() && r.lookups.is_empty(),
        "{:?}",
        r.writes
    );
    assert_eq!(
        r.outcome.status, None,
        "a settled cluster's status is not written again"
    );
    let s = status(&snapshot);
    assert_eq!((s.ready_daemons, s.daemon_count), (OSDS, OSDS + 3));
    assert_eq!(s.daemon_states.get("UpToDate"), Some(&OSDS));
    let listed: Vec<&str> = s.daemons.iter().map(|d| d.name.as_str()).collect();
    assert_eq!(listed, ["mon.a", "mon.b", "mon.c"]);
    assert_eq!(s.unlisted_daemons, OSDS);
    let object = serde_json::to_vec(snapshot.prior.as_ref().unwrap()).unwrap();
    println!(
        "CephClusterAddressing of {OSDS} settled OSDs: {} bytes",
        object.len()
    );
    assert!(
        object.len() < 64 * 1024,
        "the CephClusterAddressing of {OSDS} OSDs is {} bytes",
        object.len()
    );
}

/// A restarted operator remembers no lookup: it looks up every OSD the status does not list
/// once, and writes nothing when the answers are the same; if the lookups fail instead, no
/// Deployment loses its arguments (an address half-known is never written).
#[test]
fn a_restarted_operator_looks_up_the_unlisted_osds_once_and_writes_nothing() {
    let converged = converged(5);
    let mut snapshot = converged.clone();
    snapshot.lookups.clear();
    let r = step(&mut snapshot, at(100), dns_ok);
    let asked: Vec<String> = r.lookups.iter().map(|l| l.daemon.to_string()).collect();
    assert_eq!(asked, ["osd.0", "osd.1", "osd.2", "osd.3", "osd.4"]);
    assert!(r.writes.is_empty(), "{:?}", r.writes);
    assert_eq!(r.outcome.status, None);
    let r = step(&mut snapshot, at(101), no_dns);
    assert!(r.lookups.is_empty() && r.writes.is_empty());

    let mut snapshot = converged;
    snapshot.lookups.clear();
    let down = |_: &Daemon| Err("the server answered SERVFAIL after 4 attempts".to_owned());
    let r = step(&mut snapshot, at(100), down);
    assert_eq!(r.lookups.len(), 5);
    assert!(
        r.writes.iter().all(|w| w.kind() != "apply_osd_args"),
        "{:?}",
        r.writes
    );
    let s = status(&snapshot);
    assert_eq!(cond(s, "Resolved").0, "False");
    assert!(entry(s, "osd.0").lookup.as_ref().unwrap().error.is_some());
}

#[test]
fn steady_state_writes_nothing_and_looks_nothing_up() {
    let snapshot = converged(50);
    for later in [20, 3600, 86_400] {
        let r = reconcile_with(&snapshot, &Config::default(), at(later), no_dns);
        assert!(r.writes.is_empty(), "{:?}", r.writes);
        assert!(r.lookups.is_empty());
        assert_eq!(r.outcome.status, None);
        assert!(r.outcome.events.is_empty());
        assert_eq!(r.outcome.requeue_after, None);
    }
    // Every OSD took its global IP (the mons wait for mon-failover): the status says so.
    let s = status(&snapshot);
    assert_eq!((s.ready_daemons, s.daemon_count), (50, 53));
    for deployment in &snapshot.deployments {
        let labels = deployment.metadata.labels.as_ref().unwrap();
        assert_eq!(labels["ceph.rook.io/do-not-reconcile"], "true");
    }
}

#[test]
fn only_daemons_whose_inputs_changed_are_looked_up_again() {
    let mut snapshot = converged(5);
    // osd.3's export was deleted and made again: a new uid, maybe a new global IP.
    let export = export_mut(&mut snapshot, "rook-ceph-osd-3");
    export.metadata.uid = Some("recreated".into());
    let r = step(&mut snapshot, at(100), dns_ok);
    assert_eq!(r.lookups.len(), 1);
    assert_eq!(r.lookups[0].daemon, Daemon::Osd(3));
    assert!(r.writes.is_empty());
    // A new OSD: its Service and export are applied; its name waits for the export.
    snapshot.deployments.push(osd_deployment(5, None));
    let r = step(&mut snapshot, at(110), no_dns);
    assert_eq!(r.writes.len(), 2);
    assert!(r.lookups.is_empty());
}

#[test]
fn objects_changed_by_someone_else_are_applied_again_and_foreign_ones_left_alone() {
    let mut snapshot = converged(2);
    // Someone edited our OSD Service's selector.
    let service = snapshot
        .services
        .iter_mut()
        .find(|s| s.metadata.name.as_deref() == Some("rook-ceph-osd-0"))
        .unwrap();
    service
        .spec
        .as_mut()
        .unwrap()
        .selector
        .as_mut()
        .unwrap()
        .insert("app".into(), "other".into());
    // A ServiceExport for osd.1 that Rook made (not ours) is left as it is.
    export_mut(&mut snapshot, "rook-ceph-osd-1")
        .metadata
        .managed_fields = None;
    export_mut(&mut snapshot, "rook-ceph-osd-1")
        .metadata
        .owner_references = None;
    let r = step(&mut snapshot, at(50), no_dns);
    let targets: Vec<(&str, &str)> = r.writes.iter().map(|w| (w.kind(), w.target().1)).collect();
    assert_eq!(targets, [("apply_service", "rook-ceph-osd-0")]);
}

fn container(snapshot: &Snapshot, id: u32) -> &k8s_openapi::api::core::v1::Container {
    &snapshot.deployments[id as usize]
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
}

fn labelled(snapshot: &Snapshot, id: u32) -> bool {
    snapshot.deployments[id as usize]
        .metadata
        .labels
        .as_ref()
        .unwrap()
        .contains_key("ceph.rook.io/do-not-reconcile")
}

#[test]
fn disabling_hands_the_osd_deployments_back_to_rook_one_failure_domain_at_a_time_then_costs_nothing()
 {
    let mut snapshot = converged(2);
    assert!(labelled(&snapshot, 0) && labelled(&snapshot, 1));
    assert!(container(&snapshot, 0).ports.is_some());
    snapshot.cluster = cluster_with(
        serde_json::json!({"multiClusterService": {"enabled": false, "clusterID": "east"}}),
    );
    // The fixtures put each OSD in its own failure domain: one per reconcile.
    let r = step(&mut snapshot, at(100), no_dns);
    let targets: Vec<_> = r.writes.iter().map(|w| (w.kind(), w.target().1)).collect();
    assert_eq!(targets, [("apply_osd_args", "rook-ceph-osd-0")]);
    assert!(r.lookups.is_empty());
    let s = status(&snapshot);
    assert_eq!(s.phase, Phase::Disabled);
    assert!(s.conditions.is_empty() && s.daemons.is_empty());
    assert!(
        s.message.contains(
            "handing 2 OSD Deployments back to Rook (address arguments and the do-not-reconcile label removed), 1 wait: one failure domain at a time (node-0)"
        ),
        "{}",
        s.message
    );
    // What Rook runs without MCS: its own arguments, no label, no env entry or ports of ours.
    assert_eq!(osd_args(&snapshot, 0), ["--foreground", "--id=0"]);
    assert!(!labelled(&snapshot, 0));
    assert!(
        container(&snapshot, 0)
            .env
            .iter()
            .flatten()
            .next()
            .is_none()
    );
    assert!(
        container(&snapshot, 0)
            .ports
            .iter()
            .flatten()
            .next()
            .is_none()
    );
    assert!(labelled(&snapshot, 1));

    let r = step(&mut snapshot, at(101), no_dns);
    let targets: Vec<_> = r.writes.iter().map(|w| w.target().1).collect();
    assert_eq!(targets, ["rook-ceph-osd-1"]);
    assert_eq!(osd_args(&snapshot, 1), ["--foreground", "--id=1"]);
    assert!(!labelled(&snapshot, 1));

    let r = step(&mut snapshot, at(102), no_dns);
    assert!(r.writes.is_empty(), "{:?}", r.writes);
    assert!(
        status(&snapshot)
            .message
            .contains("every OSD Deployment the operator labelled is Rook's again"),
        "{}",
        status(&snapshot).message
    );
    let r = reconcile_with(&snapshot, &Config::default(), at(200), no_dns);
    assert_eq!(r.outcome.status, None);
    assert!(r.writes.is_empty() && r.lookups.is_empty());
}

#[test]
fn a_do_not_reconcile_label_set_by_hand_is_not_removed_when_mcs_is_off() {
    let mut snapshot = converged(1);
    snapshot.cluster = cluster_with(
        serde_json::json!({"multiClusterService": {"enabled": false, "clusterID": "east"}}),
    );
    // The user took the Deployment over before (kubectl label: another field manager): the
    // label is theirs, and the operator's apply must not carry it.
    let deployment = &mut snapshot.deployments[0];
    deployment
        .metadata
        .managed_fields
        .as_mut()
        .unwrap()
        .iter_mut()
        .filter(|e| e.manager.as_deref() == Some(mcs_ceph_core::FIELD_MANAGER))
        .for_each(|e| {
            e.fields_v1.as_mut().unwrap().0["f:metadata"]["f:labels"] = serde_json::json!({});
        });
    let r = step(&mut snapshot, at(100), no_dns);
    assert!(r.writes.is_empty(), "{:?}", r.writes);
    assert!(labelled(&snapshot, 0));
    assert!(
        status(&snapshot)
            .message
            .contains("every OSD Deployment the operator labelled is Rook's again")
    );
}

/// Config with a one-minute grace for removed OSDs.
fn one_minute_grace() -> Config {
    Config {
        removed_osd_grace: Duration::from_secs(60),
        ..Config::default()
    }
}

fn step_with(snapshot: &mut Snapshot, config: &Config, now: Timestamp) -> Reconciled {
    step_answering(snapshot, config, now, no_dns)
}

fn step_answering(
    snapshot: &mut Snapshot,
    config: &Config,
    now: Timestamp,
    answer: impl Fn(&Daemon) -> Result<Vec<IpAddr>, String>,
) -> Reconciled {
    let reconciled = reconcile_with(snapshot, config, now, answer);
    apply(snapshot, reconciled.writes.clone());
    apply(snapshot, reconciled.outcome.status.clone());
    // What the runtime remembers for the next reconcile.
    snapshot.lookups = reconciled.outcome.lookups.clone();
    reconciled
}

#[test]
fn a_removed_osds_service_and_export_are_deleted_after_the_grace_period_and_not_before() {
    let config = one_minute_grace();
    let mut snapshot = converged(3);
    // Rook removes osd.1 (its Deployment goes; `ceph osd purge`).
    snapshot
        .deployments
        .retain(|d| d.metadata.name.as_deref() != Some("rook-ceph-osd-1"));
    let r = step_with(&mut snapshot, &config, at(100));
    assert!(r.writes.is_empty(), "{:?}", r.writes);
    let s = status(&snapshot);
    assert_eq!(
        s.removed_osds,
        [RemovedOsd {
            name: "osd.1".into(),
            since: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(100)),
        }]
    );
    assert!(s.message.contains("osd.1 (from "), "{}", s.message);
    assert!(!s.daemons.iter().any(|d| d.name == "osd.1"));
    // Reconciled again when the grace period ends.
    assert_eq!(r.outcome.requeue_after, Some(Duration::from_secs(60)));
    // Within the grace period: nothing deleted, the first sighting kept.
    let r = step_with(&mut snapshot, &config, at(159));
    assert!(r.writes.is_empty(), "{:?}", r.writes);
    assert_eq!(r.outcome.status, None);
    assert_eq!(r.outcome.requeue_after, Some(Duration::from_secs(1)));
    // After it: the export, then the Service, each by the uid seen.
    let r = step_with(&mut snapshot, &config, at(160));
    assert_eq!(
        r.writes,
        [
            Write::DeleteServiceExport {
                namespace: NAMESPACE.into(),
                name: "rook-ceph-osd-1".into(),
                uid: "export-rook-ceph-osd-1".into(),
                version: McsVersion::V1Beta1,
            },
            Write::DeleteService {
                namespace: NAMESPACE.into(),
                name: "rook-ceph-osd-1".into(),
                uid: "svc-rook-ceph-osd-1".into(),
            },
        ]
    );
    // Gone: the entry goes, nothing else of the cluster is touched, then nothing at all.
    let r = step_with(&mut snapshot, &config, at(161));
    assert!(r.writes.is_empty(), "{:?}", r.writes);
    assert!(status(&snapshot).removed_osds.is_empty());
    assert!(
        snapshot
            .services
            .iter()
            .any(|s| s.metadata.name.as_deref() == Some("rook-ceph-osd-2"))
    );
    let exports: Vec<_> = snapshot
        .exports
        .iter()
        .filter_map(|e| e.metadata.name.as_deref())
        .collect();
    assert_eq!(exports, ["rook-ceph-osd-0", "rook-ceph-osd-2"]);
    let r = reconcile_with(&snapshot, &config, at(500), no_dns);
    assert!(r.writes.is_empty() && r.outcome.status.is_none());
}

#[test]
fn an_osd_whose_deployment_comes_back_within_the_grace_period_keeps_its_objects() {
    let config = one_minute_grace();
    let mut snapshot = converged(2);
    let deployment = snapshot.deployments.remove(1);
    step_with(&mut snapshot, &config, at(100));
    assert_eq!(status(&snapshot).removed_osds.len(), 1);
    // Rook recreates it (as it does when it replaces a Deployment): back in the plan, its
    // global IP is looked up again (its status entry went while it was gone).
    snapshot.deployments.push(deployment);
    let r = step_answering(&mut snapshot, &config, at(130), dns_ok);
    assert_eq!(r.lookups.len(), 1);
    assert!(
        r.writes.iter().all(|w| !w.kind().starts_with("delete")),
        "{:?}",
        r.writes
    );
    assert!(status(&snapshot).removed_osds.is_empty());
    let r = step_with(&mut snapshot, &config, at(1000));
    assert!(r.writes.is_empty(), "{:?}", r.writes);
}

#[test]
fn objects_of_a_removed_osd_that_the_operator_did_not_make_are_left_alone() {
    let config = one_minute_grace();
    let mut snapshot = converged(2);
    snapshot.deployments.truncate(1);
    // Rook (with its own MCS support) made osd.1's Service and export: not ours.
    for meta in snapshot
        .services
        .iter_mut()
        .map(|s| &mut s.metadata)
        .chain(snapshot.exports.iter_mut().map(|e| &mut e.metadata))
        .filter(|m| m.name.as_deref() == Some("rook-ceph-osd-1"))
    {
        meta.managed_fields = None;
    }
    let r = step_with(&mut snapshot, &config, at(100));
    assert!(r.writes.is_empty(), "{:?}", r.writes);
    assert!(status(&snapshot).removed_osds.is_empty());
    let r = step_with(&mut snapshot, &config, at(1000));
    assert!(r.writes.is_empty(), "{:?}", r.writes);
}

#[test]
fn a_blocked_cluster_deletes_nothing_and_keeps_the_removal_record() {
    let config = one_minute_grace();
    let mut snapshot = converged(2);
    snapshot.deployments.truncate(1);
    step_with(&mut snapshot, &config, at(100));
    snapshot.mcs_api = McsApi::Missing("multicluster.x-k8s.io is not served".into());
    let r = step_with(&mut snapshot, &config, at(1000));
    assert!(r.writes.is_empty(), "{:?}", r.writes);
    assert_eq!(status(&snapshot).phase, Phase::Blocked);
    assert_eq!(status(&snapshot).removed_osds.len(), 1);
}

#[test]
fn a_cluster_being_deleted_is_left_alone() {
    let mut snapshot = rook_cluster(2);
    snapshot.cluster.metadata.deletion_timestamp =
        Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(0)));
    let r = reconcile_with(&snapshot, &Config::default(), at(1), no_dns);
    assert!(r.writes.is_empty() && r.lookups.is_empty());
    assert_eq!(r.outcome.status, None);
}

#[test]
fn v1alpha1_clusters_get_v1alpha1_exports() {
    let mut snapshot = rook_cluster(1);
    snapshot.mcs_api = McsApi::Served(McsVersion::V1Alpha1);
    let r = reconcile_with(&snapshot, &Config::default(), at(0), no_dns);
    let versions: Vec<McsVersion> = r
        .writes
        .iter()
        .filter_map(|w| match w {
            Write::ApplyServiceExport { version, .. } => Some(*version),
            _ => None,
        })
        .collect();
    assert_eq!(versions, [McsVersion::V1Alpha1]);
}

#[test]
fn the_service_import_source_needs_no_lookups() {
    let config = Config {
        global_ip_source: GlobalIpSource::ServiceImport,
        ..Config::default()
    };
    let mut snapshot = rook_cluster(2);
    let r = reconcile_with(&snapshot, &config, at(0), no_dns);
    apply(&mut snapshot, r.writes);
    set_export_conditions(&mut snapshot, &exported_conditions());
    snapshot.imports = vec![
        import("rook-ceph-osd-0", &["242.1.0.20"]),
        import("rook-ceph-osd-1", &[]),
    ];
    let r = reconcile_with(&snapshot, &config, at(1), no_dns);
    assert!(r.lookups.is_empty());
    let Some(Write::ApplyStatus(object)) = r.outcome.status else {
        panic!("status expected");
    };
    let s = object.status.unwrap();
    assert_eq!(entry(&s, "osd.0").global_ip.as_deref(), Some("242.1.0.20"));
    assert_eq!(entry(&s, "osd.1").global_ip, None);
    assert_eq!(cond(&s, "Resolved").1, "WaitingForExports");
}

/// The arguments of OSD `id`'s Deployment.
fn osd_args(snapshot: &Snapshot, id: u32) -> Vec<String> {
    snapshot.deployments[id as usize]
        .spec
        .as_ref()
        .unwrap()
        .template
        .spec
        .as_ref()
        .unwrap()
        .containers[0]
        .args
        .clone()
        .unwrap()
}

#[test]
fn osd_arguments_only_once_the_global_ip_is_known_and_the_export_ready_and_only_when_they_differ() {
    let mut snapshot = rook_cluster(3);
    // Exports applied but not taken yet: no global IP, no arguments.
    let r = step(&mut snapshot, at(0), no_dns);
    assert!(r.writes.iter().all(|w| w.kind() != "apply_osd_args"));
    // osd.1's export is not Ready: it is neither looked up nor updated.
    set_export_conditions(&mut snapshot, &exported_conditions());
    export_mut(&mut snapshot, "rook-ceph-osd-1")
        .status
        .as_mut()
        .unwrap()
        .conditions[1] = condition("Ready", "False", "Pending", "");
    step(&mut snapshot, at(1), dns_ok);
    let mut updated = Vec::new();
    for second in 2..6 {
        let r = step(&mut snapshot, at(second), no_dns);
        updated.extend(r.writes.iter().map(|w| (w.kind(), w.target().1.to_owned())));
    }
    assert_eq!(
        updated,
        [
            ("apply_osd_args", "rook-ceph-osd-0".to_owned()),
            ("apply_osd_args", "rook-ceph-osd-2".to_owned()),
        ]
    );
    assert_eq!(
        osd_args(&snapshot, 0),
        [
            "--foreground",
            "--id=0",
            "--public-addr=242.1.0.20",
            "--public-bind-addr=$(ROOK_POD_IP)",
            "--cluster-addr=$(ROOK_POD_IP)"
        ]
    );
    assert_eq!(osd_args(&snapshot, 1), ["--foreground", "--id=1"]);
    // An export that stops being Ready stops nothing already done, and starts nothing new.
    export_mut(&mut snapshot, "rook-ceph-osd-1")
        .status
        .as_mut()
        .unwrap()
        .conditions[1] = condition("Ready", "True", "Exported", "");
    let r = step(&mut snapshot, at(10), dns_ok);
    assert_eq!(r.lookups.len(), 1);
    let r = step(&mut snapshot, at(11), no_dns);
    assert_eq!(r.writes.len(), 1);
    assert_eq!(r.writes[0].target().1, "rook-ceph-osd-1");
    let r = step(&mut snapshot, at(12), no_dns);
    assert!(r.writes.is_empty(), "{:?}", r.writes);
    // Rook (or a user) puts the old address back: applied again, once.
    snapshot.deployments[2] = osd_deployment(2, Some("10.244.0.7"));
    let r = step(&mut snapshot, at(13), no_dns);
    let kinds: Vec<_> = r.writes.iter().map(|w| (w.kind(), w.target().1)).collect();
    assert_eq!(kinds, [("apply_osd_args", "rook-ceph-osd-2")]);
    assert!(osd_args(&snapshot, 2).contains(&"--public-addr=242.1.0.22".to_owned()));
    assert!(
        !osd_args(&snapshot, 2)
            .iter()
            .any(|a| a.contains("10.244.0.7"))
    );
}

#[test]
fn osds_of_one_failure_domain_restart_together_and_none_during_a_rollout() {
    let mut snapshot = rook_cluster(4);
    for (id, deployment) in snapshot.deployments.iter_mut().enumerate() {
        let host = if id < 2 { "node-a" } else { "node-b" };
        deployment
            .metadata
            .labels
            .as_mut()
            .unwrap()
            .insert("failure-domain".into(), host.into());
    }
    step(&mut snapshot, at(0), no_dns);
    set_export_conditions(&mut snapshot, &exported_conditions());
    step(&mut snapshot, at(1), dns_ok);
    let r = step(&mut snapshot, at(2), no_dns);
    let targets: Vec<_> = r.writes.iter().map(|w| w.target().1).collect();
    assert_eq!(targets, ["rook-ceph-osd-0", "rook-ceph-osd-1"]);
    // osd.0's rollout has not finished: nothing else is restarted.
    snapshot.deployments[0].status = Some(k8s_openapi::api::apps::v1::DeploymentStatus {
        observed_generation: snapshot.deployments[0].metadata.generation,
        replicas: Some(1),
        updated_replicas: Some(1),
        available_replicas: Some(0),
        ..Default::default()
    });
    let r = step(&mut snapshot, at(3), no_dns);
    assert!(r.writes.is_empty(), "{:?}", r.writes);
    snapshot.deployments[0]
        .status
        .as_mut()
        .unwrap()
        .available_replicas = Some(1);
    let r = step(&mut snapshot, at(4), no_dns);
    let targets: Vec<_> = r.writes.iter().map(|w| w.target().1).collect();
    assert_eq!(targets, ["rook-ceph-osd-2", "rook-ceph-osd-3"]);
}

/// `rook-ceph-mon-endpoints` with mons a, b, c on their global IPs.
fn mons_on_global_ips(snapshot: &mut Snapshot, data: &str, out_of_quorum: &str) {
    let config_map = snapshot.mon_endpoints.as_mut().unwrap();
    let map = config_map.data.as_mut().unwrap();
    map.insert("data".into(), data.into());
    map.insert("outOfQuorum".into(), out_of_quorum.into());
}

fn mon_dns(daemon: &Daemon) -> Result<Vec<IpAddr>, String> {
    match daemon {
        Daemon::Mon(id) => Ok(vec![format!("242.1.9.{}", 1 + id.index()).parse().unwrap()]),
        Daemon::Osd(id) => Ok(vec![osd_global_ip(*id)]),
    }
}

fn mon_config_writes(r: &Reconciled) -> Vec<&Write> {
    r.writes
        .iter()
        .filter(|w| matches!(w, Write::ApplyMonEndpoints(_) | Write::ApplyMonConfig(_)))
        .collect()
}

#[test]
fn mon_endpoints_and_mon_host_only_once_the_mons_advertise_their_global_ips() {
    let mut snapshot = rook_cluster(0);
    // The mons run on cluster IPs: they are to be replaced, nothing is written.
    step(&mut snapshot, at(0), no_dns);
    set_export_conditions(&mut snapshot, &exported_conditions());
    let r = step(&mut snapshot, at(1), mon_dns);
    assert!(mon_config_writes(&r).is_empty());

    // The mons were moved to global IPs (as mon-failover will do); c is out of quorum, the
    // CSI config still lists the cluster IPs. a and b are known, c's name still resolves.
    mons_on_global_ips(
        &mut snapshot,
        "b=242.1.9.2:6789,a=242.1.9.1:6789,c=242.1.9.3:6789",
        "c",
    );
    let config_map = snapshot.mon_endpoints.as_mut().unwrap();
    config_map.data.as_mut().unwrap().insert(
        "csi-cluster-config-json".into(),
        r#"[{"clusterID":"rook-ceph","monitors":["10.96.0.10:6789"]}]"#.into(),
    );
    // Their Services are exported now (a mon on its global IP is not replaced).
    let r = step(&mut snapshot, at(2), no_dns);
    assert_eq!(
        r.writes
            .iter()
            .filter(|w| w.kind() == "apply_service_export")
            .count(),
        3
    );
    assert!(mon_config_writes(&r).is_empty());
    set_export_conditions(&mut snapshot, &exported_conditions());
    let r = step(&mut snapshot, at(3), |d| match d {
        Daemon::Mon(id) if id.as_str() == "c" => Err("SERVFAIL".into()),
        other => mon_dns(other),
    });
    assert!(
        mon_config_writes(&r).is_empty(),
        "mon.c's global IP is not known yet"
    );

    let r = step(&mut snapshot, at(20), mon_dns);
    assert_eq!(r.lookups.len(), 1);
    let r = step(&mut snapshot, at(21), no_dns);
    let writes = mon_config_writes(&r);
    assert_eq!(writes.len(), 2, "{writes:?}");
    let Write::ApplyMonEndpoints(config_map) = writes[0] else {
        panic!("{writes:?}")
    };
    let data = config_map.data.as_ref().unwrap();
    assert_eq!(
        data["data"],
        "a=242.1.9.1:6789,b=242.1.9.2:6789,c=242.1.9.3:6789"
    );
    assert_eq!(data["outOfQuorum"], "c");
    assert_eq!(data["maxMonId"], "2");
    assert!(data["csi-cluster-config-json"].starts_with(
        r#"[{"clusterID":"rook-ceph","monitors":["242.1.9.1:6789","242.1.9.2:6789","242.1.9.3:6789"]"#
    ));
    assert!(
        !data.contains_key("externalMons"),
        "only keys the ConfigMap has"
    );
    let Write::ApplyMonConfig(secret) = writes[1] else {
        panic!("{writes:?}")
    };
    let secret_data = secret.data.as_ref().unwrap();
    assert_eq!(
        String::from_utf8(secret_data["mon_host"].0.clone()).unwrap(),
        "[v2:242.1.9.1:3300,v1:242.1.9.1:6789],[v2:242.1.9.2:3300,v1:242.1.9.2:6789]",
        "c is out of quorum and left out, as Rook does"
    );
    assert_eq!(
        String::from_utf8(secret_data["mon_initial_members"].0.clone()).unwrap(),
        "a,b"
    );
    assert_eq!(secret.type_.as_deref(), Some("kubernetes.io/rook"));
    assert_eq!(
        status(&snapshot).mon_host.as_deref(),
        Some("[v2:242.1.9.1:3300,v1:242.1.9.1:6789],[v2:242.1.9.2:3300,v1:242.1.9.2:6789]")
    );

    // Steady state: nothing again, even when Rook rewrites data in another order.
    mons_on_global_ips(
        &mut snapshot,
        "c=242.1.9.3:6789,b=242.1.9.2:6789,a=242.1.9.1:6789",
        "c",
    );
    for later in [22, 3600] {
        let r = reconcile_with(&snapshot, &Config::default(), at(later), no_dns);
        assert!(r.writes.is_empty(), "{:?}", r.writes);
        assert_eq!(r.outcome.status, None);
    }
    // Rook marks c back in quorum in the ConfigMap: that already agrees with the plan, and
    // mon_host follows (the Secret alone).
    mons_on_global_ips(
        &mut snapshot,
        "a=242.1.9.1:6789,b=242.1.9.2:6789,c=242.1.9.3:6789",
        "",
    );
    let r = step(&mut snapshot, at(30), no_dns);
    let writes = mon_config_writes(&r);
    assert!(
        matches!(writes[..], [Write::ApplyMonConfig(_)]),
        "{writes:?}"
    );
    assert!(
        status(&snapshot)
            .mon_host
            .as_deref()
            .unwrap()
            .contains("242.1.9.3")
    );
}

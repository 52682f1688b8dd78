#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The mon migration's gate: the opt-in annotation, the phase, every mon export Valid and
//! Ready with its global IP known (the in-flight new mon's excepted), a mon to replace or a
//! migration in flight.

use ceph_address_plan::MonId;
use mcs_ceph_api::{AddressingStatus, CephCluster, DaemonEntry, Phase};
use mcs_ceph_core::migration::{Gate, MIGRATION_ANNOTATION, gate, mon_addresses, mon_to_replace};
use serde_json::json;

const NS: &str = "rook-ceph";

fn id(text: &str) -> MonId {
    text.parse().unwrap()
}

/// No migration in flight.
fn gate_now(cluster: &CephCluster, status: &AddressingStatus) -> Gate {
    gate(cluster, status, Ok(None))
}

fn cluster(annotated: bool) -> CephCluster {
    let mut cluster = CephCluster::new(
        "rook-ceph",
        NS,
        json!({"network": {"multiClusterService": {"enabled": true, "clusterID": "east"}}}),
    );
    if annotated {
        cluster.metadata.annotations =
            Some([(MIGRATION_ANNOTATION.to_owned(), "enabled".to_owned())].into());
    }
    cluster
}

fn entry(name: &str, state: &str, export: Option<&str>, global_ip: Option<&str>) -> DaemonEntry {
    DaemonEntry {
        name: name.into(),
        service: format!("rook-ceph-{}", name.replace('.', "-")),
        exported: export.is_some(),
        export: export.map(Into::into),
        global_ip: global_ip.map(Into::into),
        state: state.into(),
        ..DaemonEntry::default()
    }
}

fn migrating_status() -> AddressingStatus {
    AddressingStatus {
        phase: Phase::Migrating,
        daemons: vec![
            entry("mon.a", "Replace", None, None),
            entry(
                "mon.b",
                "UpToDate",
                Some("Valid, Ready"),
                Some("242.1.0.11"),
            ),
            entry("osd.0", "UpdateArgs", Some("Valid"), None),
        ],
        ..AddressingStatus::default()
    }
}

#[test]
fn no_migration_without_the_annotation() {
    let status = migrating_status();
    assert!(
        matches!(gate_now(&cluster(false), &status), Gate::Wait(reason) if reason.contains(MIGRATION_ANNOTATION))
    );
    assert_eq!(
        gate_now(&cluster(true), &status),
        Gate::Go,
        "OSD exports do not hold mons back"
    );
}

#[test]
fn the_gate_waits_for_every_mon_export_and_global_ip() {
    let mut status = migrating_status();
    status.daemons[1].export = Some("Valid".into());
    assert!(
        matches!(gate_now(&cluster(true), &status), Gate::Wait(reason) if reason.contains("mon.b"))
    );
    let mut status = migrating_status();
    status.daemons[1].global_ip = None;
    assert!(
        matches!(gate_now(&cluster(true), &status), Gate::Wait(reason) if reason.contains("global IP"))
    );
    let mut status = migrating_status();
    status.phase = Phase::Blocked;
    assert!(matches!(gate_now(&cluster(true), &status), Gate::Wait(_)));
    let mut status = migrating_status();
    status.daemons.remove(0);
    assert_eq!(
        gate_now(&cluster(true), &status),
        Gate::Idle,
        "nothing to replace"
    );
    assert!(mon_addresses(&migrating_status())[&id("a")].replace);
}

#[test]
fn a_migration_in_flight_goes_on_and_its_new_mon_is_not_waited_for() {
    // mon.a is replaced by mon.d, whose export is not Valid and Ready yet: the machine goes on.
    let mut status = migrating_status();
    status.daemons[0] = entry(
        "mon.a",
        "UpToDate",
        Some("Valid, Ready"),
        Some("242.1.0.10"),
    );
    status
        .daemons
        .push(entry("mon.d", "Waiting", Some("Valid"), None));
    assert!(!mon_to_replace(&status));
    assert!(
        matches!(gate_now(&cluster(true), &status), Gate::Wait(reason) if reason.contains("mon.d"))
    );
    assert_eq!(gate(&cluster(true), &status, Ok(Some(id("d")))), Gate::Go);
    // An unreadable stored state holds the migration back, saying why.
    assert_eq!(
        gate(
            &cluster(true),
            &status,
            Err("status.monFailover is unreadable".into())
        ),
        Gate::Wait("status.monFailover is unreadable".into())
    );
    // Without MCS there is nothing to gate.
    let mut off = cluster(true);
    off.spec = json!({});
    assert_eq!(gate(&off, &status, Ok(Some(id("d")))), Gate::Idle);
}

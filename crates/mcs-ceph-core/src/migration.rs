//! The mon migration's gate, pure: whether mcs-ceph-operator's mon migration may run a step of
//! the mon-failover machine for a cluster now, from the CephCluster (its opt-in annotation)
//! and the status this reconcile decided. The machine's own rules (one mon at a time, full
//! quorum, majorities) are the machine's; its ports on Kubernetes are the operator's.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ceph_address_plan::MonId;
use mcs_ceph_api::{AddressingStatus, CephCluster, DaemonState, Phase};

/// The CephCluster annotation that hands mon migration to the operator.
pub const MIGRATION_ANNOTATION: &str = "clusterset.io/mon-migration";
/// The value of [`MIGRATION_ANNOTATION`] that enables mon migration.
pub const MIGRATION_ENABLED: &str = "enabled";

/// Whether the CephCluster opts in to mon migration by the operator.
pub fn opted_in(cluster: &CephCluster) -> bool {
    cluster
        .metadata
        .annotations
        .as_ref()
        .and_then(|a| a.get(MIGRATION_ANNOTATION))
        .is_some_and(|v| v == MIGRATION_ENABLED)
}

/// What the status says of one mon: its global IP, once known, and whether it sits on an
/// address of the other kind (the plan wants it replaced).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct MonAddress {
    /// The global IP of its export, once resolved.
    pub global_ip: Option<IpAddr>,
    /// The plan says `Replace`: it advertises an address that is not its global IP.
    pub replace: bool,
}

/// The mons of a status, by id.
pub fn mon_addresses(status: &AddressingStatus) -> BTreeMap<MonId, MonAddress> {
    status
        .daemons
        .iter()
        .filter_map(|entry| {
            let id: MonId = entry.name.strip_prefix("mon.")?.parse().ok()?;
            let address = MonAddress {
                global_ip: entry.global_ip.as_deref().and_then(|ip| ip.parse().ok()),
                replace: entry.daemon_state() == Some(DaemonState::Replace),
            };
            Some((id, address))
        })
        .collect()
}

/// Whether the status lists a mon the plan wants replaced.
pub fn mon_to_replace(status: &AddressingStatus) -> bool {
    status
        .daemons
        .iter()
        .any(|d| d.name.starts_with("mon.") && d.daemon_state() == Some(DaemonState::Replace))
}

/// Whether the machine may act for a cluster, and why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Gate {
    /// Run one driver tick.
    Go,
    /// Nothing to do: no mon to replace and no migration in flight.
    Idle,
    /// Not now, for this reason.
    Wait(String),
}

/// The gate: the annotation is set, the guards pass, every mon's export (but the migration's
/// new mon's) is Valid and Ready with its global IP known, and there is a mon to replace or a
/// migration in flight. Reads the status of this reconcile; `in_flight` is the new mon of the
/// migration the machine's stored state says is in flight (`Err`: the stored state cannot be
/// read, and the gate waits, saying why).
pub fn gate(
    cluster: &CephCluster,
    status: &AddressingStatus,
    in_flight: Result<Option<MonId>, String>,
) -> Gate {
    if !cluster.mcs_requested() {
        return Gate::Idle;
    }
    if !opted_in(cluster) {
        return Gate::Wait(format!(
            "mon migration is not enabled for this cluster: annotate the CephCluster {MIGRATION_ANNOTATION}={MIGRATION_ENABLED} once Rook's mon health check is off (docs/operator.md)"
        ));
    }
    if matches!(
        status.phase,
        Phase::Blocked | Phase::Disabled | Phase::Unknown
    ) {
        return Gate::Wait(format!(
            "the cluster is {:?}: no mon migration",
            status.phase
        ));
    }
    let in_flight = match in_flight {
        Ok(mon) => mon,
        Err(error) => return Gate::Wait(error),
    };
    let mut to_replace = false;
    for entry in &status.daemons {
        let Some(id) = entry.name.strip_prefix("mon.") else {
            continue;
        };
        if in_flight.as_ref().is_some_and(|m| m.as_str() == id) {
            continue;
        }
        if entry.daemon_state() == Some(DaemonState::Replace) {
            to_replace = true;
            continue;
        }
        if !entry.export_valid_ready() {
            return Gate::Wait(format!(
                "the export of {} is not Valid and Ready yet",
                entry.name
            ));
        }
        if entry.global_ip.is_none() {
            return Gate::Wait(format!("the global IP of {} is not known yet", entry.name));
        }
    }
    if to_replace || in_flight.is_some() {
        Gate::Go
    } else {
        Gate::Idle
    }
}

//! The status a decision publishes: the conditions (`Accepted`, `Exported`, `Resolved`,
//! `Ready`), the phase and its message, one entry per daemon, and the statuses of a blocked or
//! disabled cluster.

use std::collections::BTreeMap;

use ceph_address_plan::{Daemon, Plan, Readiness, export_problem};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use mcs_ceph_api::{
    AddressingStatus, DaemonEntry, DaemonState, LISTED_DAEMONS, LookupRecord, Phase, RemovedOsd,
};
use mcs_types::conditions::{ConditionStatus, DesiredCondition, remove_condition, set_condition};

use super::exports::ExportView;
use super::lookups::{LookupMemory, LookupResult, RememberedLookup, fold_results};
use super::removed::removal_due;
use super::writes::Paced;
use super::{Active, Context};
use crate::guards::GuardFailure;

/// Condition type: every guard passed.
pub const ACCEPTED: &str = "Accepted";
/// Condition type: every ServiceExport is Valid and Ready.
pub const EXPORTED: &str = "Exported";
/// Condition type: every exported daemon's global IP is known.
pub const RESOLVED: &str = "Resolved";
/// Condition type: every daemon advertises its planned address.
pub const READY: &str = "Ready";

/// Condition messages list at most this many items.
const LISTED: usize = 3;

pub(super) fn conditions_from_prior(context: &Context) -> Vec<Condition> {
    context
        .prior
        .as_ref()
        .map(|p| p.conditions.clone())
        .unwrap_or_default()
}

pub(super) fn set(context: &Context, conditions: &mut Vec<Condition>, desired: DesiredCondition) {
    set_condition(conditions, desired, context.generation, Time(context.now));
}

pub(super) fn disabled_status(context: &Context, handback: &Paced) -> AddressingStatus {
    const OFF: &str =
        "spec.network.multiClusterService.enabled is not true: nothing is exported or resolved";
    const STAYS: &str = "mons keep the addresses they advertise (moving them back to cluster IPs is not automated) and the Services and ServiceExports made earlier stay (see docs/operator.md, Disable)";
    let osds = match (handback.written + handback.deferred, handback.deferred) {
        (0, _) => "every OSD Deployment the operator labelled is Rook's again".to_owned(),
        (all, 0) => format!(
            "handing {all} OSD Deployments back to Rook now (address arguments and the do-not-reconcile label removed)"
        ),
        (all, deferred) => format!(
            "handing {all} OSD Deployments back to Rook (address arguments and the do-not-reconcile label removed), {deferred} wait: {}",
            handback.why
        ),
    };
    AddressingStatus {
        observed_generation: context.generation,
        phase: Phase::Disabled,
        message: format!("{OFF}; {osds}; {STAYS}"),
        ..AddressingStatus::default()
    }
}

pub(super) fn blocked_status(context: &Context, failures: &[GuardFailure]) -> AddressingStatus {
    let mut conditions = conditions_from_prior(context);
    for type_ in [EXPORTED, RESOLVED, READY] {
        remove_condition(&mut conditions, type_);
    }
    let reason = failures.first().map_or("Blocked", |f| f.reason);
    let message = failures
        .iter()
        .map(|f| f.message.as_str())
        .collect::<Vec<_>>()
        .join("; ");
    set(
        context,
        &mut conditions,
        DesiredCondition::new(ACCEPTED, ConditionStatus::False, reason, message.clone()),
    );
    let prior = context.prior.clone().unwrap_or_default();
    AddressingStatus {
        observed_generation: context.generation,
        phase: Phase::Blocked,
        message: format!("blocked, nothing is written: {message}"),
        conditions,
        // The daemons (and their lookup records) of the last plan stay until the block lifts,
        // so that it costs no lookups afterwards.
        ready_daemons: prior.ready_daemons,
        daemon_count: prior.daemon_count,
        daemon_states: prior.daemon_states,
        daemons: prior.daemons,
        unlisted_daemons: prior.unlisted_daemons,
        removed_osds: prior.removed_osds,
        mon_host: prior.mon_host,
        mon_failover: None,
        unknown_fields: prior.unknown_fields,
    }
}

/// `"a, b, c and 4 more"`.
pub(super) fn listing(items: &[String]) -> String {
    let shown = items
        .iter()
        .take(LISTED)
        .cloned()
        .collect::<Vec<_>>()
        .join("; ");
    match items.len().saturating_sub(LISTED) {
        0 => shown,
        more => format!("{shown}; and {more} more"),
    }
}

pub(super) fn active_status(
    context: &Context,
    active: Active,
    results: Vec<LookupResult>,
) -> (AddressingStatus, Vec<(String, bool)>, LookupMemory) {
    let Active {
        mut plan,
        mut records,
        exports,
        mon_host,
        removed_osds,
        ..
    } = active;
    fold_results(context, &mut plan, &mut records, results);

    let readiness = plan.readiness();
    let (entries, daemons) = daemon_entries(&plan, &records, &exports, &readiness);
    let count = entries.len();
    let up_to_date = daemons.iter().filter(|(_, ok)| *ok).count();

    let mut conditions = conditions_from_prior(context);
    for desired in [
        accepted_condition(&plan),
        exported_condition(&exports),
        resolved_condition(&plan, &records, &exports),
        ready_condition(&readiness, count, up_to_date),
    ] {
        set(context, &mut conditions, desired);
    }

    let lookups = remembered(&entries);
    let daemon_states = state_counts(&entries);
    let listed = listed(entries);
    let unlisted_daemons = u32::try_from(count - listed.len()).unwrap_or(u32::MAX);
    let (phase, message) = phase_and_message(&conditions, count);
    let message = match removal_line(context, &removed_osds) {
        Some(line) => format!("{message}; {line}"),
        None => message,
    };
    let status = AddressingStatus {
        observed_generation: context.generation,
        phase,
        message,
        ready_daemons: u32::try_from(up_to_date).unwrap_or(u32::MAX),
        daemon_count: u32::try_from(count).unwrap_or(u32::MAX),
        conditions,
        daemon_states,
        daemons: listed,
        unlisted_daemons,
        removed_osds,
        mon_host,
        mon_failover: None,
        unknown_fields: context
            .prior
            .as_ref()
            .map(|p| p.unknown_fields.clone())
            .unwrap_or_default(),
    };
    (status, daemons, lookups)
}

/// What to remember of every daemon's lookup for the next reconcile.
fn remembered(entries: &[DaemonEntry]) -> LookupMemory {
    entries
        .iter()
        .filter_map(|entry| {
            Some((
                entry.name.clone(),
                RememberedLookup {
                    record: entry.lookup.clone()?,
                    global_ip: entry.global_ip.clone(),
                },
            ))
        })
        .collect()
}

/// How many daemons are in each state.
fn state_counts(entries: &[DaemonEntry]) -> BTreeMap<String, u32> {
    let mut counts = BTreeMap::new();
    for entry in entries {
        *counts.entry(entry.state.clone()).or_insert(0) += 1;
    }
    counts
}

/// Whether a daemon is settled: up to date, its export (if any) Valid and Ready with its
/// global IP known, nothing to say. A settled OSD is only counted in the status.
fn settled(entry: &DaemonEntry) -> bool {
    entry.daemon_state() == Some(DaemonState::UpToDate)
        && entry.message.is_none()
        && (!entry.exported || (entry.export_valid_ready() && entry.global_ip.is_some()))
}

/// The entries the status lists: every mon, and every other daemon that is not settled, at
/// most [`LISTED_DAEMONS`] (mons first: they come first in the plan).
fn listed(entries: Vec<DaemonEntry>) -> Vec<DaemonEntry> {
    entries
        .into_iter()
        .filter(|entry| entry.name.starts_with("mon.") || !settled(entry))
        .take(LISTED_DAEMONS)
        .collect()
}

/// One status entry per daemon of the plan, and per daemon its name and whether it advertises
/// its planned address.
fn daemon_entries(
    plan: &Plan,
    records: &BTreeMap<Daemon, LookupRecord>,
    exports: &BTreeMap<Daemon, ExportView>,
    readiness: &Readiness,
) -> (Vec<DaemonEntry>, Vec<(String, bool)>) {
    let mut reasons: BTreeMap<String, String> = BTreeMap::new();
    for (daemon, reason) in readiness.by_daemon() {
        reasons
            .entry(daemon.to_string())
            .or_insert_with(|| reason.clone());
    }
    let mut entries = Vec::new();
    let mut daemons = Vec::new();
    for (daemon, _address, status) in plan.daemons() {
        let name = daemon.to_string();
        let view = exports.get(&daemon);
        let global_ip = plan
            .global_ips()
            .get(&daemon)
            .filter(|_| exports.contains_key(&daemon));
        let record = records.get(&daemon).cloned();
        let mut message = reasons.get(&name).cloned();
        if let Some(error) = record.as_ref().and_then(|r| r.error.as_ref())
            && global_ip.is_none()
        {
            message = Some(format!("{name}: lookup failed: {error}"));
        }
        daemons.push((name.clone(), status.is_up_to_date()));
        entries.push(DaemonEntry {
            name,
            service: view.map_or_else(|| daemon.service_name(), |v| v.name.clone()),
            exported: view.is_some(),
            export: view.map(ExportView::describe),
            global_ip: global_ip.map(ToString::to_string),
            advertised: advertised(plan, &daemon),
            state: DaemonState::from(status).to_string(),
            message,
            lookup: record,
        });
    }
    (entries, daemons)
}

/// The address a daemon advertises now, as its status entry shows it (an OSD without one
/// advertises its pod IP).
fn advertised(plan: &Plan, daemon: &Daemon) -> Option<String> {
    match daemon {
        Daemon::Mon(id) => plan
            .mon(id)
            .and_then(|m| m.input().advertised)
            .map(|a| a.to_string()),
        Daemon::Osd(id) => plan.osd(*id).map(|o| {
            o.input()
                .advertised
                .map_or_else(|| "pod IP".to_owned(), |ip| ip.to_string())
        }),
    }
}

/// `Accepted`, true: what the guards passed on.
fn accepted_condition(plan: &Plan) -> DesiredCondition {
    let settings = plan.settings();
    DesiredCondition::new(
        ACCEPTED,
        ConditionStatus::True,
        "GuardsPassed",
        format!(
            "clusterID {}, Ceph {}, pod networking, MCS API served",
            settings.multi_cluster_service.cluster_id,
            settings
                .ceph_version
                .map_or_else(|| "unknown".to_owned(), |v| v.to_string())
        ),
    )
}

/// `Exported`: false when an export is invalid or conflicts, unknown while one is pending,
/// true when all are Valid and Ready.
fn exported_condition(exports: &BTreeMap<Daemon, ExportView>) -> DesiredCondition {
    let total = exports.len();
    let problems = described(exports, |v| {
        v.status().and_then(|s| export_problem(&s)).is_some() || v.observed.is_none()
    });
    let invalid = described(exports, ExportView::invalid);
    let conflicts = described(exports, ExportView::conflict);
    if !invalid.is_empty() {
        DesiredCondition::new(
            EXPORTED,
            ConditionStatus::False,
            "ExportInvalid",
            format!(
                "{} of {total} ServiceExports are not valid: {}",
                invalid.len(),
                listing(&invalid)
            ),
        )
    } else if !conflicts.is_empty() {
        DesiredCondition::new(
            EXPORTED,
            ConditionStatus::False,
            "ExportConflict",
            format!(
                "{} of {total} ServiceExports conflict with another cluster's export of the same Service: {}",
                conflicts.len(),
                listing(&conflicts)
            ),
        )
    } else if problems.is_empty() {
        DesiredCondition::new(
            EXPORTED,
            ConditionStatus::True,
            "Exported",
            format!("{total} ServiceExports are Valid and Ready"),
        )
    } else {
        DesiredCondition::new(
            EXPORTED,
            ConditionStatus::Unknown,
            "ExportsPending",
            format!(
                "{} of {total} ServiceExports are pending: {}",
                problems.len(),
                listing(&problems)
            ),
        )
    }
}

/// `"<name>: <description>"` of each export `keep` selects.
fn described(
    exports: &BTreeMap<Daemon, ExportView>,
    keep: impl Fn(&ExportView) -> bool,
) -> Vec<String> {
    exports
        .values()
        .filter(|v| keep(v))
        .map(|v| format!("{}: {}", v.name, v.describe()))
        .collect()
}

/// `Resolved`: true when every exported daemon's global IP is known, false when a lookup
/// failed, unknown while exports are not ready to be looked up.
fn resolved_condition(
    plan: &Plan,
    records: &BTreeMap<Daemon, LookupRecord>,
    exports: &BTreeMap<Daemon, ExportView>,
) -> DesiredCondition {
    let total = exports.len();
    let missing: Vec<&Daemon> = exports
        .keys()
        .filter(|d| !plan.global_ips().contains_key(*d))
        .collect();
    let failed: Vec<String> = missing
        .iter()
        .filter_map(|d| {
            let record = records.get(*d)?;
            let error = record.error.as_ref()?;
            Some(format!("{d}: {error}"))
        })
        .collect();
    if missing.is_empty() {
        DesiredCondition::new(
            RESOLVED,
            ConditionStatus::True,
            "Resolved",
            format!("the global IPs of {total} exported daemons are known"),
        )
    } else if !failed.is_empty() {
        DesiredCondition::new(
            RESOLVED,
            ConditionStatus::False,
            "LookupFailed",
            format!(
                "{} global IP lookups failed and are retried with backoff: {}",
                failed.len(),
                listing(&failed)
            ),
        )
    } else {
        DesiredCondition::new(
            RESOLVED,
            ConditionStatus::Unknown,
            "WaitingForExports",
            format!(
                "{} of {total} exported daemons wait for their ServiceExport to be Valid and Ready before their global IP is looked up",
                missing.len()
            ),
        )
    }
}

/// `Ready`: whether all `count` daemons advertise their planned addresses (`up_to_date` do).
fn ready_condition(readiness: &Readiness, count: usize, up_to_date: usize) -> DesiredCondition {
    if readiness.ready {
        DesiredCondition::new(
            READY,
            ConditionStatus::True,
            "UpToDate",
            format!("all {count} daemons advertise their planned addresses"),
        )
    } else {
        DesiredCondition::new(
            READY,
            ConditionStatus::False,
            "UpdatesPending",
            format!(
                "{} of {count} daemons do not advertise their planned address yet: {}",
                count - up_to_date,
                listing(&readiness.reasons)
            ),
        )
    }
}

/// The phase and its message: the first of `Exported`, `Resolved` and `Ready` that is not
/// true says where the cluster is; all true is `Ready`.
fn phase_and_message(conditions: &[Condition], count: usize) -> (Phase, String) {
    let condition = |type_: &str| conditions.iter().find(|c| c.type_ == type_);
    let not_true = |type_: &str| condition(type_).filter(|c| c.status != "True");
    if let Some(c) = not_true(EXPORTED) {
        (Phase::Exporting, c.message.clone())
    } else if let Some(c) = not_true(RESOLVED) {
        (Phase::Resolving, c.message.clone())
    } else if let Some(c) = not_true(READY) {
        (
            Phase::Migrating,
            format!(
                "{}; OSD Deployments are updated one failure domain at a time; mons are replaced only by the mon migration (--mon-migration and the CephCluster annotation clusterset.io/mon-migration=enabled, docs/operator.md)",
                c.message
            ),
        )
    } else {
        (
            Phase::Ready,
            format!("all {count} daemons advertise their planned addresses"),
        )
    }
}

/// `"OSDs without a Deployment: osd.7 (its Service and ServiceExport are deleted at …)"`.
pub(super) fn removal_line(context: &Context, removed: &[RemovedOsd]) -> Option<String> {
    if removed.is_empty() {
        return None;
    }
    let items: Vec<String> = removed
        .iter()
        .map(|r| match removal_due(context, r) {
            Some(at) if at > context.now => format!("{} (from {at})", r.name),
            _ => format!("{} (now)", r.name),
        })
        .collect();
    Some(format!(
        "the Services and ServiceExports of OSDs without a Deployment are deleted: {}",
        listing(&items)
    ))
}

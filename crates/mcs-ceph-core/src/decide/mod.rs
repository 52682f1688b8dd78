//! The reconcile decision for one CephCluster, pure: a [`Snapshot`] (the cluster, the objects of
//! its namespace, the operator's prior status) and the time become the writes to make, the
//! names to resolve, and then — with the lookup results — the status to publish, the Events to
//! emit and when to look again.
//!
//! Two steps, so that lookups happen between them without the decision doing IO:
//!
//! 1. [`prepare`]: guards first (a failed guard yields only a status and an Event); then the
//!    plan, the Services and ServiceExports to server-side apply (only those missing or changed),
//!    and the lookups to make now (only daemons whose lookup inputs — clusterset name and
//!    ServiceExport uid — changed since the last lookup, or whose failed lookup is due for a
//!    retry).
//! 2. [`Prepared::complete`]: the lookup results fold into the plan; the status is built, and
//!    written only if it differs from the prior one; Events are emitted for condition
//!    transitions only.
//!
//! A cluster in steady state therefore costs no write and no lookup.
//!
//! Modules along the decision's concepts: `writes` (what is written and whether it must be),
//! `lookups` (which names to resolve, and what their answers make of the records), `exports`
//! (the observed ServiceExports), `removed` (OSDs gone whose objects remain), `status`
//! (conditions, phase, daemons) and `events`.

mod events;
mod exports;
mod lookups;
mod removed;
mod status;
mod writes;

use std::collections::BTreeMap;
use std::time::Duration;

use ceph_address_plan::rook_objects::{self, MonConfigWrites};
use ceph_address_plan::{Daemon, Plan, PlanInput, ServiceRole};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use k8s_openapi::jiff::Timestamp;
use mcs_ceph_api::{
    AddressingStatus, CephCluster, CephClusterAddressing, LookupRecord, Phase, RemovedOsd,
};

pub use events::{EventNote, EventType};
pub use lookups::{LookupMemory, LookupRequest, LookupResult, RememberedLookup};
pub use status::{ACCEPTED, EXPORTED, READY, RESOLVED};
pub use writes::{Write, covers};

use crate::config::Config;
use crate::guards::{self, GuardFailure};
use crate::snapshot::{self, McsApi, McsVersion, Snapshot};
use events::events;
use exports::ExportView;
use lookups::{LookupPlan, plan_lookups};
use removed::{removal_due, removed_osds};
use status::{active_status, blocked_status, conditions_from_prior, disabled_status};
use writes::{Handback, by_name, handback, needs_apply, osd_args_writes};

/// What a reconcile ends with.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The status write, when the status changed.
    pub status: Option<Write>,
    /// Events for condition transitions.
    pub events: Vec<EventNote>,
    /// When to reconcile again regardless of watch events (a failed lookup's retry).
    pub requeue_after: Option<Duration>,
    /// The phase reached.
    pub phase: Phase,
    /// Every daemon and whether it advertises its planned address.
    pub daemons: Vec<(String, bool)>,
    /// What to remember of the lookups for the next reconcile of this cluster
    /// ([`Snapshot::lookups`]): every daemon's, when active; what was remembered, when
    /// blocked (the block costs no lookups once it lifts); nothing otherwise.
    pub lookups: LookupMemory,
}

/// Identity of the cluster and what the previous reconcile published.
#[derive(Debug, Clone)]
struct Context {
    namespace: String,
    name: String,
    generation: Option<i64>,
    owner: Option<OwnerReference>,
    prior: Option<AddressingStatus>,
    /// The lookups remembered: the snapshot's, else those of the daemons the prior status
    /// lists.
    lookups: LookupMemory,
    now: Timestamp,
    config: Config,
}

#[derive(Debug)]
struct Active {
    plan: Plan,
    writes: Vec<Write>,
    lookups: Vec<LookupRequest>,
    records: BTreeMap<Daemon, LookupRecord>,
    exports: BTreeMap<Daemon, ExportView>,
    notes: Vec<String>,
    /// The `mon_host` the operator has written to `rook-ceph-config` (this time or before).
    mon_host: Option<String>,
    /// OSDs gone whose objects remain (until deleted).
    removed_osds: Vec<RemovedOsd>,
}

#[derive(Debug)]
enum Stage {
    /// Nothing to do and nothing to say (MCS never enabled, or the cluster is being deleted).
    Idle,
    /// MCS was enabled before and is off now: OSD Deployments go back to Rook.
    Disabled(Handback),
    /// Guards failed.
    Blocked(Vec<GuardFailure>),
    /// Planned.
    Active(Box<Active>),
}

/// The first half of a decision: writes and lookups; [`Prepared::complete`] finishes it.
#[derive(Debug)]
pub struct Prepared {
    context: Context,
    stage: Stage,
}

fn owner_of(cluster: &CephCluster) -> Option<OwnerReference> {
    Some(OwnerReference {
        api_version: cluster.api_version.clone(),
        kind: cluster.kind.clone(),
        name: cluster.metadata.name.clone()?,
        uid: cluster.metadata.uid.clone()?,
        controller: Some(true),
        block_owner_deletion: Some(true),
    })
}

/// The first step of a reconcile.
pub fn prepare(snapshot: &Snapshot, config: &Config, now: Timestamp) -> Prepared {
    let cluster = &snapshot.cluster;
    let prior = snapshot.prior.as_ref().and_then(|p| p.status.clone());
    let context = Context {
        namespace: cluster.metadata.namespace.clone().unwrap_or_default(),
        name: cluster.metadata.name.clone().unwrap_or_default(),
        generation: cluster.metadata.generation,
        owner: owner_of(cluster),
        lookups: remembered_lookups(snapshot, prior.as_ref()),
        prior,
        now,
        config: config.clone(),
    };
    let stage = stage(snapshot, &context);
    Prepared { context, stage }
}

fn stage(snapshot: &Snapshot, context: &Context) -> Stage {
    let cluster = &snapshot.cluster;
    if cluster.metadata.deletion_timestamp.is_some() {
        return Stage::Idle;
    }
    if !cluster.mcs_requested() {
        return if context.prior.is_some() {
            Stage::Disabled(handback(snapshot))
        } else {
            Stage::Idle
        };
    }
    let mut failures: Vec<GuardFailure> = guards::cluster_name(cluster).into_iter().collect();
    let settings = match guards::settings(cluster, &context.config) {
        Ok(settings) => Some(settings),
        Err(failure) => {
            failures.push(failure);
            None
        }
    };
    let observed = snapshot::inventory(snapshot);
    let plan = settings.and_then(|settings| {
        let mut inventory = observed.inventory.clone();
        inventory.global_ips.clear();
        Plan::new(PlanInput {
            cluster: settings,
            inventory,
        })
        .map_err(|rejections| failures.extend(guards::rejections(&rejections)))
        .ok()
    });
    failures.extend(guards::mcs_api(&snapshot.mcs_api));
    match (plan, &snapshot.mcs_api) {
        (Some(plan), McsApi::Served(version)) if failures.is_empty() => Stage::Active(Box::new(
            active(snapshot, context, plan, observed.notes, *version),
        )),
        _ => Stage::Blocked(failures),
    }
}

/// The lookups remembered: the snapshot's memory, completed by the records of the daemons
/// the prior status lists (all there is after a start, or after an upgrade from an operator
/// that listed every daemon).
fn remembered_lookups(snapshot: &Snapshot, prior: Option<&AddressingStatus>) -> LookupMemory {
    let mut lookups: LookupMemory = prior
        .iter()
        .flat_map(|p| p.daemons.iter())
        .filter_map(|entry| {
            let record = entry.lookup.clone()?;
            Some((
                entry.name.clone(),
                RememberedLookup {
                    record,
                    global_ip: entry.global_ip.clone(),
                },
            ))
        })
        .collect();
    lookups.extend(snapshot.lookups.clone());
    lookups
}

fn active(
    snapshot: &Snapshot,
    context: &Context,
    mut plan: Plan,
    notes: Vec<String>,
    mcs_version: McsVersion,
) -> Active {
    let exports_by_name = by_name(&snapshot.exports, |e| &e.metadata);
    let imports_by_name = by_name(&snapshot.imports, |i| &i.metadata);
    let services_by_name = by_name(&snapshot.services, |s| &s.metadata);
    let LookupPlan {
        exports,
        records,
        lookups,
        known_ips,
    } = plan_lookups(
        context,
        &plan,
        &exports_by_name,
        &imports_by_name,
        &context.lookups,
    );
    for (daemon, status) in exports
        .iter()
        .filter_map(|(d, v)| v.status().map(|s| (d.clone(), s)))
    {
        plan.set_export_status(&daemon, Some(status));
    }
    let mut notes = notes;
    for (daemon, ip) in known_ips {
        if let Err(rejection) = plan.set_global_ip(&daemon, Some(ip)) {
            notes.push(format!(
                "global IP {ip} of {daemon} is not used: {rejection}"
            ));
        }
    }

    let mut writes = Vec::new();
    for service in plan.services() {
        // Rook makes and owns the mon Services (the mon migration's runtime makes a new mon's);
        // the decision adds OSD and export Services.
        let ours = service.role == ServiceRole::Export || matches!(service.daemon, Daemon::Osd(_));
        if !ours {
            continue;
        }
        let manifest = plan.service_manifest(&service);
        let observed = services_by_name
            .get(service.name.as_str())
            .map(|s| (&s.metadata, *s));
        if needs_apply(&manifest, observed) {
            writes.push(Write::ApplyService(Box::new(manifest)));
        }
    }
    for export in plan.service_exports() {
        let manifest = plan.service_export_manifest(&export);
        let observed = exports_by_name
            .get(export.name.as_str())
            .map(|e| (&e.metadata, *e));
        if needs_apply(&manifest, observed) {
            writes.push(Write::ApplyServiceExport {
                export: Box::new(manifest),
                version: mcs_version,
            });
        }
    }
    osd_args_writes(snapshot, &plan, &exports, &mut writes, &mut notes);
    let MonConfigWrites {
        config_map,
        secret,
        mon_host,
        waiting: _,
    } = rook_objects::mon_config_writes(
        &plan,
        snapshot.mon_endpoints.as_ref(),
        context.prior.as_ref().and_then(|p| p.mon_host.as_deref()),
    );
    writes.extend(config_map.map(|c| Write::ApplyMonEndpoints(Box::new(c))));
    writes.extend(secret.map(|s| Write::ApplyMonConfig(Box::new(s))));
    let removed_osds = removed_osds(snapshot, context, &plan, mcs_version, &mut writes);
    Active {
        plan,
        writes,
        lookups,
        records,
        exports,
        notes,
        mon_host,
        removed_osds,
    }
}

impl Prepared {
    /// The objects to write now: Services, ServiceExports, OSD Deployments and Rook's mon
    /// objects when active; when MCS was turned off, the OSD Deployments handed back to Rook;
    /// nothing when blocked.
    pub fn writes(&self) -> &[Write] {
        match &self.stage {
            Stage::Active(active) => &active.writes,
            Stage::Disabled(handback) => &handback.writes,
            _ => &[],
        }
    }

    /// The names to resolve now.
    pub fn lookups(&self) -> &[LookupRequest] {
        match &self.stage {
            Stage::Active(active) => &active.lookups,
            _ => &[],
        }
    }

    /// Notes about objects that could not be read (for logs).
    pub fn notes(&self) -> &[String] {
        match &self.stage {
            Stage::Active(active) => &active.notes,
            _ => &[],
        }
    }

    /// The second step: folds in the lookup results and decides the status, the Events and
    /// the next reconcile.
    pub fn complete(self, results: Vec<LookupResult>) -> Outcome {
        let Self { context, stage } = self;
        match stage {
            Stage::Idle => Outcome {
                status: None,
                events: Vec::new(),
                requeue_after: None,
                phase: Phase::Disabled,
                daemons: Vec::new(),
                lookups: LookupMemory::new(),
            },
            Stage::Disabled(handback) => finish(
                &context,
                disabled_status(&context, &handback.paced),
                Vec::new(),
                LookupMemory::new(),
            ),
            Stage::Blocked(failures) => {
                let kept = context.lookups.clone();
                finish(
                    &context,
                    blocked_status(&context, &failures),
                    Vec::new(),
                    kept,
                )
            }
            Stage::Active(active) => {
                let (status, daemons, lookups) = active_status(&context, *active, results);
                finish(&context, status, daemons, lookups)
            }
        }
    }
}

fn finish(
    context: &Context,
    status: AddressingStatus,
    daemons: Vec<(String, bool)>,
    lookups: LookupMemory,
) -> Outcome {
    let prior_conditions = conditions_from_prior(context);
    let events = events(&prior_conditions, &status.conditions);
    let requeue_after = lookups
        .values()
        .filter(|l| l.global_ip.is_none())
        .filter_map(|l| l.record.retry_at.as_ref())
        .map(|t| t.0)
        .chain(
            status
                .removed_osds
                .iter()
                .filter_map(|r| removal_due(context, r)),
        )
        .min()
        .map(|at| {
            let wait = context.now.duration_until(at);
            Duration::try_from(wait)
                .unwrap_or(Duration::ZERO)
                .max(Duration::from_secs(1))
        })
        .filter(|_| status.phase != Phase::Blocked);
    let phase = status.phase;
    // The mon-failover state is the mon migration's (its own field manager): never written
    // here, and not a reason to write.
    let prior = context.prior.clone().map(|mut prior| {
        prior.mon_failover = None;
        prior
    });
    let changed = prior.as_ref() != Some(&status);
    let write = changed.then(|| {
        let mut object = CephClusterAddressing::new(&context.name, &context.namespace, status);
        object.metadata.owner_references = context.owner.clone().map(|o| vec![o]);
        Write::ApplyStatus(Box::new(object))
    });
    Outcome {
        status: write,
        events,
        requeue_after,
        phase,
        daemons,
        lookups,
    }
}

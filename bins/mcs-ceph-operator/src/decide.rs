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

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::time::Duration;

use ceph_address_plan::{
    Daemon, DaemonStatus, ExportStatus, IpFamily, Plan, PlanInput, ServiceRole, export_problem,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use mcs_types::conditions::{ConditionStatus, DesiredCondition, remove_condition, set_condition};
use mcs_types::names::ClustersetName;
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use serde_json::Value;

use crate::config::{Config, FIELD_MANAGER, GlobalIpSource};
use crate::guards::{self, GuardFailure};
use crate::observe::{self, McsApi, McsVersion, Snapshot};
use crate::rook_objects::{self, MonConfigWrites};
use mcs_ceph_api::{
    AddressingStatus, CephCluster, CephClusterAddressing, DaemonEntry, LookupRecord, Phase,
    RemovedOsd,
};

/// Condition type: every guard passed.
pub const ACCEPTED: &str = "Accepted";
/// Condition type: every ServiceExport is Valid and Ready.
pub const EXPORTED: &str = "Exported";
/// Condition type: every exported daemon's global IP is known.
pub const RESOLVED: &str = "Resolved";
/// Condition type: every daemon advertises its planned address.
pub const READY: &str = "Ready";

/// Events carry at most this many bytes of note (the Events API limit).
const MAX_NOTE: usize = 1024;
/// Condition messages list at most this many items.
const LISTED: usize = 3;

/// A write the decision asks for. Every write is a server-side apply under
/// [`FIELD_MANAGER`](crate::config::FIELD_MANAGER).
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// An OSD Service or a cluster-unique export Service.
    ApplyService(Box<Service>),
    /// A ServiceExport, built as v1beta1 and written in the version the cluster serves.
    ApplyServiceExport {
        /// The export.
        export: Box<ServiceExport>,
        /// The MCS API version to write it in.
        version: McsVersion,
    },
    /// The operator's status object.
    ApplyStatus(Box<CephClusterAddressing>),
    /// The address arguments, label, env entry and ports of an OSD Deployment: a partial
    /// Deployment ([`rook_objects::osd_args_body`] says what it holds and why).
    ApplyOsdArgs {
        /// Namespace of the Deployment.
        namespace: String,
        /// Name of the Deployment.
        name: String,
        /// The apply body.
        body: Box<Value>,
    },
    /// The keys of `rook-ceph-mon-endpoints` the plan writes.
    ApplyMonEndpoints(Box<ConfigMap>),
    /// `mon_host` and `mon_initial_members` of `rook-ceph-config`.
    ApplyMonConfig(Box<Secret>),
    /// Deletes a Service the operator made for an OSD that is gone: only the object with this
    /// uid (a Service of the same name made since is left alone).
    DeleteService {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The uid the decision saw.
        uid: String,
    },
    /// Deletes a ServiceExport the operator made for an OSD that is gone, by uid as above.
    DeleteServiceExport {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The uid the decision saw.
        uid: String,
        /// The MCS API version the cluster serves.
        version: McsVersion,
    },
}

impl Write {
    /// A short name of the kind of write, for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ApplyService(_) => "apply_service",
            Self::ApplyServiceExport { .. } => "apply_service_export",
            Self::ApplyStatus(_) => "apply_status",
            Self::ApplyOsdArgs { .. } => "apply_osd_args",
            Self::ApplyMonEndpoints(_) => "apply_mon_endpoints",
            Self::ApplyMonConfig(_) => "apply_mon_config",
            Self::DeleteService { .. } => "delete_service",
            Self::DeleteServiceExport { .. } => "delete_service_export",
        }
    }

    /// The namespace and name of the object written.
    pub fn target(&self) -> (&str, &str) {
        let meta = match self {
            Self::ApplyService(s) => &s.metadata,
            Self::ApplyServiceExport { export, .. } => &export.metadata,
            Self::ApplyStatus(a) => &a.metadata,
            Self::ApplyMonEndpoints(c) => &c.metadata,
            Self::ApplyMonConfig(s) => &s.metadata,
            Self::ApplyOsdArgs {
                namespace, name, ..
            }
            | Self::DeleteService {
                namespace, name, ..
            }
            | Self::DeleteServiceExport {
                namespace, name, ..
            } => return (namespace, name),
        };
        (
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }
}

/// Severity of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Things got better.
    Normal,
    /// Something needs attention.
    Warning,
}

/// An Event about the CephCluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventNote {
    /// Severity.
    pub type_: EventType,
    /// The condition reason that changed (`CephTooOld`, `LookupFailed`, ...).
    pub reason: String,
    /// What happened and what to do (at most 1 kB).
    pub note: String,
    /// What the operator was doing (`CheckGuards`, `Export`, `Resolve`).
    pub action: &'static str,
}

impl EventNote {
    /// A Warning Event; the note is cut to the 1 kB an Event holds.
    pub fn warning(reason: &str, note: String, action: &'static str) -> Self {
        Self {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: truncate(note, MAX_NOTE),
            action,
        }
    }
}

/// A clusterset name to resolve now, for one daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupRequest {
    /// The daemon whose global IP it is.
    pub daemon: Daemon,
    /// The name.
    pub name: ClustersetName,
}

/// The answer to one [`LookupRequest`]: the addresses, or why there are none.
pub type LookupResult = (Daemon, Result<Vec<IpAddr>, String>);

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
}

/// Identity of the cluster and what the previous reconcile published.
#[derive(Debug, Clone)]
struct Context {
    namespace: String,
    name: String,
    generation: Option<i64>,
    owner: Option<OwnerReference>,
    prior: Option<AddressingStatus>,
    now: Timestamp,
    config: Config,
}

/// What the decision keeps of an observed ServiceExport.
#[derive(Debug, Clone)]
struct ObservedExport {
    uid: Option<String>,
    status: Option<mcs_types::ServiceExportStatus>,
}

/// The export of one exported daemon, as observed.
#[derive(Debug, Clone)]
struct ExportView {
    name: String,
    observed: Option<ObservedExport>,
}

impl ExportView {
    fn status(&self) -> Option<ExportStatus> {
        self.observed.as_ref().map(|o| {
            o.status
                .as_ref()
                .map(ExportStatus::from)
                .unwrap_or_default()
        })
    }

    fn condition(&self, type_: &str) -> Option<&str> {
        let status = self.observed.as_ref()?.status.as_ref()?;
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.as_str())
    }

    /// Valid=False.
    fn invalid(&self) -> bool {
        self.condition("Valid") == Some("False")
    }

    /// Conflict=True.
    fn conflict(&self) -> bool {
        self.condition("Conflict") == Some("True")
    }

    /// The MCS implementation has taken the export: Valid (or no Valid condition) and Ready,
    /// or Valid without any Ready condition. A conflict does not stop the name from resolving.
    fn taken(&self) -> bool {
        match (self.condition("Valid"), self.condition("Ready")) {
            (Some("False"), _) => false,
            (_, Some("True")) => true,
            (Some("True"), None) => true,
            _ => false,
        }
    }

    /// The export's state in words.
    fn describe(&self) -> String {
        match self.status() {
            None => "not created yet".to_owned(),
            Some(status) => match export_problem(&status) {
                None => "Valid, Ready".to_owned(),
                Some(problem) => problem,
            },
        }
    }
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

/// Whether `observed` already says everything `desired` says (maps: every key, recursively;
/// arrays: every desired element matches some observed element; anything else: equal).
/// Fields others add are fine; nothing is removed by this check.
pub fn covers(observed: &Value, desired: &Value) -> bool {
    match (observed, desired) {
        (Value::Object(have), Value::Object(want)) => {
            want.iter().all(|(key, value)| match have.get(key) {
                Some(found) => covers(found, value),
                None => {
                    value.as_object().is_some_and(serde_json::Map::is_empty)
                        || value.as_array().is_some_and(Vec::is_empty)
                }
            })
        }
        (Value::Array(have), Value::Array(want)) => {
            want.iter().all(|w| have.iter().any(|h| covers(h, w)))
        }
        (have, want) => have == want,
    }
}

fn managed_by_us(meta: &ObjectMeta) -> bool {
    meta.managed_fields
        .iter()
        .flatten()
        .any(|entry| entry.manager.as_deref() == Some(FIELD_MANAGER))
}

fn labels_cover(
    have: Option<&BTreeMap<String, String>>,
    want: Option<&BTreeMap<String, String>>,
) -> bool {
    want.into_iter()
        .flatten()
        .all(|(k, v)| have.and_then(|h| h.get(k)) == Some(v))
}

fn owners_cover(have: &ObjectMeta, want: &ObjectMeta) -> bool {
    want.owner_references.iter().flatten().all(|w| {
        have.owner_references.iter().flatten().any(|h| {
            h.api_version == w.api_version
                && h.kind == w.kind
                && h.name == w.name
                && h.uid == w.uid
                && (w.controller.is_none() || h.controller == w.controller)
                && (w.block_owner_deletion.is_none()
                    || h.block_owner_deletion == w.block_owner_deletion)
        })
    })
}

/// A typed fast path of [`covers`] for the objects the decision applies: it looks at exactly
/// the fields the planner sets (a test checks that list against the planner's manifests), so
/// when it says "covered" the JSON comparison would too. When it says "not covered", the JSON
/// comparison decides.
trait FastCover {
    fn fast_covers(&self, desired: &Self) -> bool;
}

impl FastCover for Service {
    fn fast_covers(&self, desired: &Self) -> bool {
        let (have, want) = (&self.metadata, &desired.metadata);
        let meta = have.name == want.name
            && have.namespace == want.namespace
            && labels_cover(have.labels.as_ref(), want.labels.as_ref())
            && owners_cover(have, want);
        let spec = match (&self.spec, &desired.spec) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(have), Some(want)) => {
                labels_cover(have.selector.as_ref(), want.selector.as_ref())
                    && want.ports.iter().flatten().all(|w| {
                        have.ports.iter().flatten().any(|h| {
                            h.name == w.name
                                && h.port == w.port
                                && (w.protocol.is_none() || h.protocol == w.protocol)
                                && (w.target_port.is_none() || h.target_port == w.target_port)
                        })
                    })
            }
        };
        meta && spec
    }
}

impl FastCover for ServiceExport {
    fn fast_covers(&self, desired: &Self) -> bool {
        let (have, want) = (&self.metadata, &desired.metadata);
        have.name == want.name
            && have.namespace == want.namespace
            && labels_cover(have.labels.as_ref(), want.labels.as_ref())
            && owners_cover(have, want)
            && desired.spec == mcs_types::ServiceExportSpec::default()
    }
}

/// Whether a desired object must be applied: it is missing, or it is ours and differs. An
/// object someone else made (Rook, a user) is left alone.
fn needs_apply<T: serde::Serialize + FastCover>(
    desired: &T,
    observed: Option<(&ObjectMeta, &T)>,
) -> bool {
    let Some((meta, observed)) = observed else {
        return true;
    };
    if !managed_by_us(meta) {
        return false;
    }
    if observed.fast_covers(desired) {
        return false;
    }
    let strip = |value: Value| {
        let mut value = value;
        if let Some(object) = value.as_object_mut() {
            object.remove("apiVersion");
            object.remove("kind");
            object.remove("status");
        }
        value
    };
    match (
        serde_json::to_value(desired),
        serde_json::to_value(observed),
    ) {
        (Ok(want), Ok(have)) => !covers(&strip(have), &strip(want)),
        _ => true,
    }
}

fn by_name<T>(items: &[T], meta: impl Fn(&T) -> &ObjectMeta) -> BTreeMap<&str, &T> {
    items
        .iter()
        .filter_map(|item| meta(item).name.as_deref().map(|name| (name, item)))
        .collect()
}

fn import_ips(import: Option<&&ServiceImport>, family: IpFamily) -> Vec<IpAddr> {
    import
        .and_then(|i| i.spec.parsed_ips().ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|ip| family.admits(*ip))
        .collect()
}

/// The first step of a reconcile.
pub fn prepare(snapshot: &Snapshot, config: &Config, now: Timestamp) -> Prepared {
    let cluster = &snapshot.cluster;
    let context = Context {
        namespace: cluster.metadata.namespace.clone().unwrap_or_default(),
        name: cluster.metadata.name.clone().unwrap_or_default(),
        generation: cluster.metadata.generation,
        owner: owner_of(cluster),
        prior: snapshot.prior.as_ref().and_then(|p| p.status.clone()),
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
    let observed = observe::inventory(snapshot);
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

fn prior_entries(context: &Context) -> BTreeMap<String, &DaemonEntry> {
    context
        .prior
        .iter()
        .flat_map(|p| p.daemons.iter())
        .map(|entry| (entry.name.clone(), entry))
        .collect()
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
    let prior = prior_entries(context);
    let family = plan.settings().ip_family;

    let mut exports = BTreeMap::new();
    let mut records = BTreeMap::new();
    let mut lookups = Vec::new();
    let mut known_ips = Vec::new();
    for desired in plan.service_exports() {
        let view = ExportView {
            observed: exports_by_name
                .get(desired.name.as_str())
                .map(|e| ObservedExport {
                    uid: e.metadata.uid.clone(),
                    status: e.status.clone(),
                }),
            name: desired.name.clone(),
        };
        let daemon = desired.daemon.clone();
        let export_uid = view.observed.as_ref().and_then(|e| e.uid.clone());
        let previous = prior.get(&daemon.to_string()).copied();
        match context.config.global_ip_source {
            GlobalIpSource::ServiceImport => {
                let ips = import_ips(imports_by_name.get(desired.name.as_str()), family);
                let record = LookupRecord {
                    name: format!("{}/{} (ServiceImport)", context.namespace, desired.name),
                    export_uid,
                    import_ips: ips.iter().map(ToString::to_string).collect(),
                    ..LookupRecord::default()
                };
                if view.observed.is_some()
                    && let Some(ip) = ips.first()
                {
                    known_ips.push((daemon.clone(), *ip));
                }
                records.insert(daemon.clone(), record);
            }
            GlobalIpSource::Dns => {
                // The planner validated every exported daemon's name.
                let Ok(name) = plan.lookup_name(&daemon) else {
                    continue;
                };
                let record = LookupRecord {
                    name: name.to_string(),
                    export_uid,
                    ..LookupRecord::default()
                };
                let same = previous
                    .and_then(|p| p.lookup.as_ref().map(|l| (p, l)))
                    .filter(|(_, l)| l.same_inputs(&record));
                let reused = same.and_then(|(p, l)| {
                    let ip = p.global_ip.as_deref()?.parse::<IpAddr>().ok()?;
                    (l.error.is_none() && family.admits(ip)).then_some(ip)
                });
                let retry_later = same.is_some_and(|(_, l)| {
                    l.error.is_some() && l.retry_at.as_ref().is_some_and(|t| t.0 > context.now)
                });
                if let Some(ip) = reused {
                    known_ips.push((daemon.clone(), ip));
                    records.insert(daemon.clone(), record);
                } else if retry_later {
                    if let Some((_, l)) = same {
                        records.insert(daemon.clone(), l.clone());
                    }
                } else if view.observed.is_some() && view.taken() {
                    lookups.push(LookupRequest {
                        daemon: daemon.clone(),
                        name,
                    });
                    // Keep the failure count across retries of the same inputs.
                    let mut pending = record;
                    if let Some((_, l)) = same {
                        pending.failures = l.failures;
                    }
                    records.insert(daemon.clone(), pending);
                }
            }
        }
        exports.insert(daemon, view);
    }
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

fn owned_by(meta: &ObjectMeta, owner: Option<&OwnerReference>) -> bool {
    owner.is_some_and(|owner| {
        meta.owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == owner.uid)
    })
}

/// OSDs without a Deployment whose Service or ServiceExport the operator made (managed by its
/// field manager, owned by this CephCluster) remain. Each is recorded with the time it was
/// first seen gone, and once [`Config::removed_osd_grace`] has passed its ServiceExport, then
/// its Services, are deleted by uid. An OSD whose Deployment comes back, or whose objects are
/// all gone, leaves the list. The OSDs considered are those the operator knows of: its OSD
/// Services, the previous status's daemons and removed OSDs. Nothing is deleted for an OSD
/// that has any Deployment, parsed or not.
fn removed_osds(
    snapshot: &Snapshot,
    context: &Context,
    plan: &Plan,
    mcs_version: McsVersion,
    writes: &mut Vec<Write>,
) -> Vec<RemovedOsd> {
    use ceph_address_plan::rook::label;
    let owner = context.owner.as_ref();
    let ours = |meta: &ObjectMeta| managed_by_us(meta) && owned_by(meta, owner);
    let deployment_ids: BTreeSet<&str> = snapshot
        .deployments
        .iter()
        .filter_map(|d| d.metadata.labels.as_ref()?.get(label::OSD_ID))
        .map(String::as_str)
        .collect();
    let osd_id = |name: &str| {
        name.strip_prefix("osd.")
            .and_then(|id| id.parse::<u32>().ok())
    };
    let mut known: BTreeSet<u32> = snapshot
        .services
        .iter()
        .filter(|s| ours(&s.metadata))
        .filter_map(|s| {
            let labels = s.metadata.labels.as_ref()?;
            (labels.get(label::DAEMON_TYPE)? == "osd")
                .then(|| labels.get(label::DAEMON_ID)?.parse::<u32>().ok())
                .flatten()
        })
        .collect();
    let prior = context.prior.as_ref();
    known.extend(
        prior
            .iter()
            .flat_map(|p| p.daemons.iter().map(|d| d.name.as_str()))
            .chain(
                prior
                    .iter()
                    .flat_map(|p| p.removed_osds.iter().map(|r| r.name.as_str())),
            )
            .filter_map(osd_id),
    );
    let since_before: BTreeMap<u32, &Time> = prior
        .iter()
        .flat_map(|p| p.removed_osds.iter())
        .filter_map(|r| Some((osd_id(&r.name)?, &r.since)))
        .collect();
    let mut removed = Vec::new();
    let (mut export_deletes, mut service_deletes) = (Vec::new(), Vec::new());
    for id in known {
        if deployment_ids.contains(id.to_string().as_str()) {
            continue;
        }
        let daemon = Daemon::Osd(id);
        let exported = plan.exported_service_name(&daemon);
        let service_names = [daemon.service_name(), exported.clone()];
        let services: Vec<&Service> = snapshot
            .services
            .iter()
            .filter(|s| {
                s.metadata
                    .name
                    .as_ref()
                    .is_some_and(|n| service_names.contains(n))
                    && ours(&s.metadata)
            })
            .collect();
        let export = snapshot
            .exports
            .iter()
            .find(|e| e.metadata.name.as_deref() == Some(exported.as_str()) && ours(&e.metadata));
        if services.is_empty() && export.is_none() {
            continue;
        }
        let entry = RemovedOsd {
            name: daemon.to_string(),
            since: since_before
                .get(&id)
                .map_or(Time(context.now), |t| (*t).clone()),
        };
        if removal_due(context, &entry).is_some_and(|at| at <= context.now) {
            let namespace = context.namespace.clone();
            export_deletes.extend(export.and_then(|e| {
                Some(Write::DeleteServiceExport {
                    namespace: namespace.clone(),
                    name: exported.clone(),
                    uid: e.metadata.uid.clone()?,
                    version: mcs_version,
                })
            }));
            service_deletes.extend(services.iter().filter_map(|s| {
                Some(Write::DeleteService {
                    namespace: namespace.clone(),
                    name: s.metadata.name.clone()?,
                    uid: s.metadata.uid.clone()?,
                })
            }));
        }
        removed.push(entry);
    }
    // The export goes first: an export without its Service is invalid, a Service without an
    // export is merely unexported.
    writes.extend(export_deletes);
    writes.extend(service_deletes);
    removed
}

/// The OSD Deployments of a snapshot: by OSD id (the first Deployment of an id is the OSD, as
/// observe reads it), and the names of those still rolling out.
struct OsdDeployments<'a> {
    by_id: BTreeMap<u32, &'a Deployment>,
    rolling: Vec<String>,
}

fn osd_deployments(snapshot: &Snapshot) -> OsdDeployments<'_> {
    let mut found = OsdDeployments {
        by_id: BTreeMap::new(),
        rolling: Vec::new(),
    };
    let osd_deployments = snapshot.deployments.iter().filter(|d| {
        d.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ceph_address_plan::rook::label::APP))
            .is_some_and(|app| app == ceph_address_plan::rook::OSD_APP)
    });
    for deployment in osd_deployments {
        if rook_objects::rollout_in_progress(deployment) {
            found
                .rolling
                .push(deployment.metadata.name.clone().unwrap_or_default());
        }
        let id = deployment
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ceph_address_plan::rook::label::OSD_ID))
            .and_then(|id| id.parse::<u32>().ok());
        if let Some(id) = id {
            found.by_id.entry(id).or_insert(deployment);
        }
    }
    found
}

/// How [`paced_osd_writes`] went: how many OSD Deployments were written now, how many wait,
/// and why they wait.
#[derive(Debug, Default)]
struct Paced {
    written: usize,
    deferred: usize,
    why: String,
}

/// Writes OSD Deployment apply `bodies` (in OSD id order) one failure domain at a time, and
/// none while an OSD Deployment is still rolling out: each write restarts its OSD, and Ceph
/// must never see OSDs of two failure domains restart at once.
fn paced_osd_writes<'a>(
    bodies: impl IntoIterator<Item = (&'a Deployment, Value)>,
    rolling: &[String],
    writes: &mut Vec<Write>,
) -> Paced {
    let mut domain: Option<&str> = None;
    let mut paced = Paced::default();
    for (deployment, body) in bodies {
        let this_domain = rook_objects::failure_domain(deployment);
        if !rolling.is_empty() || domain.is_some_and(|d| d != this_domain) {
            paced.deferred += 1;
            continue;
        }
        domain = Some(this_domain);
        paced.written += 1;
        writes.push(Write::ApplyOsdArgs {
            namespace: deployment.metadata.namespace.clone().unwrap_or_default(),
            name: deployment.metadata.name.clone().unwrap_or_default(),
            body: Box::new(body),
        });
    }
    if paced.deferred > 0 {
        paced.why = if rolling.is_empty() {
            format!(
                "one failure domain at a time ({})",
                domain.unwrap_or_default()
            )
        } else {
            format!("OSD Deployments still rolling out: {}", rolling.join(", "))
        };
    }
    paced
}

/// The OSD Deployments to give the plan's address arguments: OSDs whose global IP is known and
/// whose export is Ready, whose Deployment does not say it yet, paced by [`paced_osd_writes`].
fn osd_args_writes(
    snapshot: &Snapshot,
    plan: &Plan,
    exports: &BTreeMap<Daemon, ExportView>,
    writes: &mut Vec<Write>,
    notes: &mut Vec<String>,
) {
    let found = osd_deployments(snapshot);
    let bodies = plan.osds().filter_map(|osd| {
        let daemon = Daemon::Osd(osd.id());
        let args = plan.daemon_args(&daemon)?;
        let deployment = *found.by_id.get(&osd.id())?;
        if !exports.get(&daemon).is_some_and(ExportView::taken) {
            return None;
        }
        let ports = plan.container_ports(&daemon);
        let body = rook_objects::osd_args_body(deployment, &args.to_args(), &ports)?;
        Some((deployment, body))
    });
    let paced = paced_osd_writes(bodies, &found.rolling, writes);
    if paced.deferred > 0 {
        notes.push(format!(
            "{} OSD Deployments wait for their address arguments: {}",
            paced.deferred, paced.why
        ));
    }
}

/// What a disabled cluster's reconcile does: hand the OSD Deployments the operator labelled
/// back to Rook ([`rook_objects::osd_handback_body`]), paced like the address arguments.
#[derive(Debug)]
struct Handback {
    writes: Vec<Write>,
    paced: Paced,
}

fn handback(snapshot: &Snapshot) -> Handback {
    let found = osd_deployments(snapshot);
    let bodies = found.by_id.values().filter_map(|deployment| {
        rook_objects::osd_handback_body(deployment, FIELD_MANAGER).map(|body| (*deployment, body))
    });
    let mut writes = Vec::new();
    let paced = paced_osd_writes(bodies, &found.rolling, &mut writes);
    Handback { writes, paced }
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
            },
            Stage::Disabled(handback) => finish(
                &context,
                disabled_status(&context, &handback.paced),
                Vec::new(),
            ),
            Stage::Blocked(failures) => {
                finish(&context, blocked_status(&context, &failures), Vec::new())
            }
            Stage::Active(active) => {
                let (status, daemons) = active_status(&context, *active, results);
                finish(&context, status, daemons)
            }
        }
    }
}

fn conditions_from_prior(context: &Context) -> Vec<Condition> {
    context
        .prior
        .as_ref()
        .map(|p| p.conditions.clone())
        .unwrap_or_default()
}

fn set(context: &Context, conditions: &mut Vec<Condition>, desired: DesiredCondition) {
    set_condition(conditions, desired, context.generation, Time(context.now));
}

fn disabled_status(context: &Context, handback: &Paced) -> AddressingStatus {
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

fn blocked_status(context: &Context, failures: &[GuardFailure]) -> AddressingStatus {
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
        daemons: prior.daemons,
        removed_osds: prior.removed_osds,
        mon_host: prior.mon_host,
        mon_failover: None,
        unknown_fields: prior.unknown_fields,
    }
}

/// `"a, b, c and 4 more"`.
fn listing(items: &[String]) -> String {
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

fn state_name(status: DaemonStatus) -> &'static str {
    match status {
        DaemonStatus::UpToDate => "UpToDate",
        DaemonStatus::Start => "Start",
        DaemonStatus::UpdateArgs { .. } => "UpdateArgs",
        DaemonStatus::Replace { .. } => "Replace",
        DaemonStatus::Waiting => "Waiting",
    }
}

fn pick_address(addresses: &[IpAddr], family: IpFamily) -> Result<IpAddr, String> {
    addresses
        .iter()
        .copied()
        .find(|ip| family.admits(*ip))
        .ok_or_else(|| {
            format!(
                "the answer has no {family} address (got {})",
                addresses
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

fn retry_time(context: &Context, failures: u32) -> Time {
    let delay = context.config.retry.delay(failures);
    let delay = SignedDuration::try_from(delay).unwrap_or(SignedDuration::MAX);
    Time(context.now.checked_add(delay).unwrap_or(Timestamp::MAX))
}

fn active_status(
    context: &Context,
    active: Active,
    results: Vec<LookupResult>,
) -> (AddressingStatus, Vec<(String, bool)>) {
    let Active {
        mut plan,
        mut records,
        exports,
        mon_host,
        removed_osds,
        ..
    } = active;
    let family = plan.settings().ip_family;
    for (daemon, result) in results {
        let Some(record) = records.get_mut(&daemon) else {
            continue;
        };
        match result.and_then(|addresses| pick_address(&addresses, family)) {
            Ok(ip) => match plan.set_global_ip(&daemon, Some(ip)) {
                Ok(_) => {
                    record.error = None;
                    record.failures = 0;
                    record.retry_at = None;
                }
                Err(rejection) => {
                    record.failures += 1;
                    record.error = Some(rejection.to_string());
                    record.retry_at = Some(retry_time(context, record.failures));
                }
            },
            Err(error) => {
                record.failures += 1;
                record.error = Some(error);
                record.retry_at = Some(retry_time(context, record.failures));
            }
        }
    }

    let readiness = plan.readiness();
    let mut reasons: BTreeMap<String, String> = BTreeMap::new();
    for reason in &readiness.reasons {
        if let Some((daemon, _)) = reason.split_once(' ') {
            reasons
                .entry(daemon.to_owned())
                .or_insert_with(|| reason.clone());
        }
    }
    let exported: BTreeSet<Daemon> = exports.keys().cloned().collect();
    let mut entries = Vec::new();
    let mut daemons = Vec::new();
    for (daemon, _address, status) in plan.daemons() {
        let name = daemon.to_string();
        let view = exports.get(&daemon);
        let global_ip = plan
            .global_ips()
            .get(&daemon)
            .filter(|_| exported.contains(&daemon));
        let record = records.get(&daemon).cloned();
        let advertised = match &daemon {
            Daemon::Mon(id) => plan
                .mon(id)
                .and_then(|m| m.input().advertised)
                .map(|a| a.to_string()),
            Daemon::Osd(id) => plan.osd(*id).map(|o| {
                o.input()
                    .advertised
                    .map_or_else(|| "pod IP".to_owned(), |ip| ip.to_string())
            }),
        };
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
            advertised,
            state: state_name(status).to_owned(),
            message,
            lookup: record,
        });
    }

    let mut conditions = conditions_from_prior(context);
    let settings = plan.settings();
    set(
        context,
        &mut conditions,
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
        ),
    );

    // Exported.
    let total = exports.len();
    let problems: Vec<String> = exports
        .values()
        .filter(|v| v.status().and_then(|s| export_problem(&s)).is_some() || v.observed.is_none())
        .map(|v| format!("{}: {}", v.name, v.describe()))
        .collect();
    let invalid: Vec<String> = exports
        .values()
        .filter(|v| v.invalid())
        .map(|v| format!("{}: {}", v.name, v.describe()))
        .collect();
    let conflicts: Vec<String> = exports
        .values()
        .filter(|v| v.conflict())
        .map(|v| format!("{}: {}", v.name, v.describe()))
        .collect();
    let exported_condition = if !invalid.is_empty() {
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
    };
    set(context, &mut conditions, exported_condition);

    // Resolved.
    let missing: Vec<&Daemon> = exported
        .iter()
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
    let resolved_condition = if missing.is_empty() {
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
    };
    set(context, &mut conditions, resolved_condition);

    // Ready.
    let count = entries.len();
    let up_to_date = daemons.iter().filter(|(_, ok)| *ok).count();
    let ready_condition = if readiness.ready {
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
    };
    set(context, &mut conditions, ready_condition);

    let condition = |type_: &str| conditions.iter().find(|c| c.type_ == type_);
    let not_true = |type_: &str| condition(type_).filter(|c| c.status != "True");
    let (phase, message) = if let Some(c) = not_true(EXPORTED) {
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
    };
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
        daemons: entries,
        removed_osds,
        mon_host,
        mon_failover: None,
        unknown_fields: context
            .prior
            .as_ref()
            .map(|p| p.unknown_fields.clone())
            .unwrap_or_default(),
    };
    (status, daemons)
}

/// When the objects of removed OSDs are deleted.
fn removal_due(context: &Context, removed: &RemovedOsd) -> Option<Timestamp> {
    let grace = SignedDuration::try_from(context.config.removed_osd_grace).ok()?;
    removed.since.0.checked_add(grace).ok()
}

/// `"OSDs without a Deployment: osd.7 (its Service and ServiceExport are deleted at …)"`.
fn removal_line(context: &Context, removed: &[RemovedOsd]) -> Option<String> {
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

fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max.saturating_sub(3);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}

/// Events for the transitions of `Accepted`, `Exported` and `Resolved`: a Warning when one
/// turns False (or changes its False reason), a Normal Event when one recovers from False.
fn events(prior: &[Condition], now: &[Condition]) -> Vec<EventNote> {
    let mut events = Vec::new();
    for (type_, action) in [
        (ACCEPTED, "CheckGuards"),
        (EXPORTED, "Export"),
        (RESOLVED, "Resolve"),
    ] {
        let Some(new) = now.iter().find(|c| c.type_ == type_) else {
            continue;
        };
        let old = prior.iter().find(|c| c.type_ == type_);
        let was_false = old.is_some_and(|c| c.status == "False");
        let type_ = if new.status == "False"
            && (!was_false || old.is_some_and(|c| c.reason != new.reason))
        {
            EventType::Warning
        } else if new.status == "True" && was_false {
            EventType::Normal
        } else {
            continue;
        };
        events.push(EventNote {
            type_,
            reason: new.reason.clone(),
            note: truncate(new.message.clone(), MAX_NOTE),
            action,
        });
    }
    events
}

fn finish(context: &Context, status: AddressingStatus, daemons: Vec<(String, bool)>) -> Outcome {
    let prior_conditions = conditions_from_prior(context);
    let events = events(&prior_conditions, &status.conditions);
    let requeue_after = status
        .daemons
        .iter()
        .filter(|d| d.global_ip.is_none())
        .filter_map(|d| d.lookup.as_ref()?.retry_at.as_ref())
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
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use ceph_address_plan::{CephVersion, ClusterSettings, Inventory, OsdInput};

    /// Every leaf path of a JSON document, array indexes dropped.
    fn leaves(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) if !map.is_empty() => {
                for (k, v) in map {
                    // Label and selector keys are data, not fields.
                    let key = if prefix.ends_with("labels") || prefix.ends_with("selector") {
                        "*"
                    } else {
                        k.as_str()
                    };
                    leaves(v, &format!("{prefix}.{key}"), out);
                }
            }
            Value::Array(items) => {
                for item in items {
                    leaves(item, &format!("{prefix}[]"), out);
                }
            }
            _ => {
                out.insert(prefix.to_owned());
            }
        }
    }

    fn plan() -> Plan {
        let mut cluster = ClusterSettings::new("c", "rook-ceph");
        cluster.uid = Some("u".into());
        cluster.multi_cluster_service.enabled = true;
        cluster.multi_cluster_service.cluster_id = "east".into();
        cluster.ceph_version = Some(CephVersion::new(18, 2, 4));
        cluster.dns_name_form = ceph_address_plan::DnsNameForm::UniqueServiceName;
        let mut inventory = Inventory::new_cluster(1);
        inventory.osds.push(OsdInput::new(0, "node-0"));
        Plan::new(PlanInput { cluster, inventory }).unwrap()
    }

    #[test]
    fn the_fast_path_looks_at_every_field_the_planner_sets() {
        let plan = plan();
        let mut fields = BTreeSet::new();
        for service in plan.services() {
            let manifest = serde_json::to_value(plan.service_manifest(&service)).unwrap();
            leaves(&manifest, "", &mut fields);
        }
        let expected: BTreeSet<String> = [
            ".apiVersion",
            ".kind",
            ".metadata.name",
            ".metadata.namespace",
            ".metadata.labels.*",
            ".metadata.ownerReferences[].apiVersion",
            ".metadata.ownerReferences[].kind",
            ".metadata.ownerReferences[].name",
            ".metadata.ownerReferences[].uid",
            ".spec.selector.*",
            ".spec.ports[].name",
            ".spec.ports[].port",
            ".spec.ports[].protocol",
            ".spec.ports[].targetPort",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(
            fields, expected,
            "the planner sets new Service fields: teach FastCover for Service"
        );
        let mut fields = BTreeSet::new();
        for export in plan.service_exports() {
            let manifest = serde_json::to_value(plan.service_export_manifest(&export)).unwrap();
            leaves(&manifest, "", &mut fields);
        }
        let expected: BTreeSet<String> = [
            ".apiVersion",
            ".kind",
            ".metadata.name",
            ".metadata.namespace",
            ".metadata.ownerReferences[].apiVersion",
            ".metadata.ownerReferences[].kind",
            ".metadata.ownerReferences[].name",
            ".metadata.ownerReferences[].uid",
            ".spec",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(
            fields, expected,
            "the planner sets new ServiceExport fields: teach FastCover for ServiceExport"
        );
    }

    #[test]
    fn the_fast_path_and_the_json_comparison_agree() {
        let plan = plan();
        for service in plan.services() {
            let desired = plan.service_manifest(&service);
            let mut observed = desired.clone();
            observed.metadata.uid = Some("x".into());
            if let Some(spec) = observed.spec.as_mut() {
                spec.cluster_ip = Some("10.96.0.1".into());
            }
            let json = |s: &Service| serde_json::to_value(s).unwrap();
            assert!(observed.fast_covers(&desired));
            assert!(covers(&json(&observed), &json(&desired)));
            let changes: [fn(&mut Service); 4] = [
                |s| {
                    let labels = s.metadata.labels.as_mut().unwrap();
                    let key = labels.keys().next().unwrap().clone();
                    labels.insert(key, "changed".into());
                },
                |s| s.metadata.owner_references = None,
                |s| s.spec.as_mut().unwrap().selector.as_mut().unwrap().clear(),
                |s| s.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].port = 1,
            ];
            for change in changes {
                let mut changed = observed.clone();
                change(&mut changed);
                assert!(!changed.fast_covers(&desired));
                assert!(!covers(&json(&changed), &json(&desired)));
            }
        }
    }
}

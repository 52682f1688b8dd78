//! The agent's sans-IO core: watch events in, writes out. The real agent and the simulation
//! harness run this same code; only the shell around it differs.
//!
//! - Every input updates a relist-safe [`Cache`] and marks the services it touches dirty
//!   (one changed export touches only its service).
//! - [`AgentCore::process`] does nothing until the local caches *and* the broker caches have
//!   listed everything once; then it restores the persisted IP assignments (global IPs from this
//!   cluster's own broker records, clusterset IPs from the local ServiceImports) and reconciles
//!   every known service once; afterwards only dirty services are reconciled.
//! - Reconciling a service: publish or withdraw this cluster's record, merge every cluster's
//!   records ([`mcs_controller::merge_exports`]), write the ServiceImport and EndpointSlices
//!   where the namespace exists (or delete them), and write the ServiceExport conditions. A
//!   write is emitted only when the stored object differs from the desired one, and not again
//!   while the same write is in flight.
//! - Clusters whose heartbeat Lease ran out are marked on the ServiceImports they export (a
//!   condition naming them), and their records are kept; they are left out of the merge only
//!   after `stale_drop_after`, if set.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::net::IpAddr;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::runtime::watcher::Event;
use mcs_controller::{
    ExportRecord, ExportedService, InvalidExport, IpPool, LocalExport, MergedService, Publication,
    desired_endpoint_slices, desired_import, export_conditions, family_of, import_ready_condition,
    merge_exports,
};
use mcs_types::conditions::{ConditionStatus, DesiredCondition};
use mcs_types::labels::{KUBERNETES_SERVICE_NAME_LABEL, SERVICE_NAME_LABEL};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use mcs_types::{ClusterId, ServiceKey};
use mcs_types::{ServiceExportStatus, ServiceImportStatus, ServiceImportType};

use crate::broker::{self, BrokerRecord, ForeignWriter, Heartbeat, RecordHome};
use crate::cache::{Cache, Change, ObjectId};
use crate::config::AgentConfig;
use crate::write::{Target, Write};

/// The ServiceImport condition type that names exporting clusters whose heartbeat stopped.
pub const STALE_CLUSTERS_CONDITION: &str = "clusterset.io/StaleClusters";
/// Its reason when some exporting clusters are stale.
pub const STALE_REASON: &str = "ClustersNotHeartbeating";
/// Its reason when every exporting cluster heartbeats.
pub const FRESH_REASON: &str = "AllClustersHeartbeating";

/// One watch event, tagged with what is watched.
#[derive(Debug, Clone)]
#[allow(
    clippy::large_enum_variant,
    reason = "an input is moved once into the core; boxing would allocate per event"
)]
pub enum Input {
    /// Local Services (all namespaces).
    Service(Event<Service>),
    /// Local ServiceExports.
    ServiceExport(Event<ServiceExport>),
    /// Local EndpointSlices of Services (label `kubernetes.io/service-name`).
    LocalEndpointSlice(Event<EndpointSlice>),
    /// Local Namespaces.
    Namespace(Event<Namespace>),
    /// Local ServiceImports (ours).
    ServiceImport(Event<ServiceImport>),
    /// Local imported EndpointSlices (managed by us).
    ImportedEndpointSlice(Event<EndpointSlice>),
    /// Every cluster's records in the broker namespace.
    Record(Event<BrokerRecord>),
    /// Every cluster's heartbeat Leases in the broker namespace.
    Lease(Event<Lease>),
}

/// What the core asks of its shell after [`AgentCore::process`].
#[derive(Debug, Default)]
pub struct Output {
    /// Writes, in order per service (different services are independent).
    pub writes: Vec<Write>,
    /// Changes for the clusterset DNS zone (from the stored ServiceImports and slices).
    pub zone_changes: Vec<clusterset_dns::ZoneChange>,
    /// True once, when the zone's sources have been listed completely.
    pub zone_synced: bool,
    /// Propagation lag observed for services whose import changed: now minus the publication
    /// time of the newest record behind the change.
    pub lags: Vec<(ServiceKey, SignedDuration)>,
    /// Problems worth a log line: unreadable records, IP assignments that could not be restored.
    pub problems: Vec<String>,
    /// How many services this pass reconciled.
    pub reconciled: usize,
}

/// Whether an exporting cluster heartbeats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClusterHealth {
    /// Its Lease is current.
    Fresh,
    /// Its Lease ran out at `since` (or it has none); its exports are kept and marked.
    Stale {
        /// When it went stale.
        since: Timestamp,
    },
    /// Stale for longer than `stale_drop_after`: left out of the merge.
    Dropped {
        /// When it went stale.
        since: Timestamp,
    },
}

/// Whether this agent holds its cluster's heartbeat Lease (and so may write to the broker).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LeaseState {
    /// Held and current.
    Held,
    /// Not yet held (no Lease, or it expired): the next heartbeat takes it.
    NotHeld,
    /// Another instance holds it.
    Blocked {
        /// The other holder.
        holder: String,
        /// When its Lease runs out.
        until: Timestamp,
    },
}

/// One of the two API servers an agent talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// The member cluster's own API server.
    Member,
    /// The hub's API server (the broker).
    Broker,
}

impl Target {
    /// The API server that stores the target.
    pub fn side(&self) -> Side {
        match self {
            Self::Record(_) => Side::Broker,
            Self::ImportSpec(_)
            | Self::ImportStatus(_)
            | Self::Slice(_)
            | Self::ExportStatus(_) => Side::Member,
        }
    }
}

/// One failed write's backoff. Each target keeps its own, so that one API server's return (or
/// one write's success) does not restart the backoff of another.
#[derive(Debug, Clone, Copy)]
struct Backoff {
    attempts: u32,
    retry_at: Option<Timestamp>,
    /// Its API server answered the last attempt (a refusal: 403, 409, 422...): retrying it
    /// when that API server returns from an outage would not help, so it keeps its backoff.
    answered: bool,
}

/// A service's failed writes, each with its backoff, and the broker error its ServiceExport
/// shows.
#[derive(Debug, Clone, Default)]
struct Failure {
    targets: BTreeMap<Target, Backoff>,
    publish_error: Option<String>,
}

impl Failure {
    /// Whether a failed write to `side` waits for its retry time at `now`.
    fn holds(&self, side: Side, now: Timestamp) -> bool {
        self.targets
            .iter()
            .any(|(t, b)| t.side() == side && b.retry_at.is_some_and(|at| at > now))
    }
}

/// Counts for metrics.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Local ServiceExports.
    pub local_exports: usize,
    /// This cluster's records in the broker.
    pub published_records: usize,
    /// Records of all clusters on the hub (not those in `foreign_writers`).
    pub broker_records: usize,
    /// ServiceImports stored in this cluster.
    pub imports: usize,
    /// Exporting clusters whose heartbeat stopped (stale or dropped).
    pub stale_clusters: usize,
    /// Records and Leases on the hub ignored because their writer could not have been the
    /// cluster they name, by [`ForeignWriter::reason`]: `record_namespace`, `shared_namespace`,
    /// `lease_name`.
    pub foreign_writers: [(&'static str, usize); 3],
}

/// The copies of one cluster's record of one service on the hub, by where they are stored:
/// during the upgrade a cluster's record can be both in its own namespace and in the shared
/// one. The first (its own namespace's) is the one that counts.
type RecordCopies = BTreeMap<RecordHome, ObjectId>;

/// The sans-IO agent: caches, indexes, IP pools and the reconcile rules of one member cluster.
#[derive(Debug)]
pub struct AgentCore {
    config: AgentConfig,
    services: Cache<Service>,
    exports: Cache<ServiceExport>,
    local_slices: Cache<EndpointSlice>,
    namespaces: Cache<Namespace>,
    imports: Cache<ServiceImport>,
    imported_slices: Cache<EndpointSlice>,
    records: Cache<BrokerRecord>,
    leases: Cache<Lease>,
    local_slices_by_service: HashMap<ServiceKey, BTreeSet<ObjectId>>,
    imported_slices_by_service: HashMap<ServiceKey, BTreeSet<String>>,
    records_by_service: BTreeMap<ServiceKey, BTreeMap<ClusterId, RecordCopies>>,
    services_by_cluster: HashMap<ClusterId, BTreeSet<ServiceKey>>,
    unreadable_records: BTreeMap<ObjectId, String>,
    foreign_records: BTreeMap<ObjectId, ForeignWriter>,
    foreign_leases: BTreeMap<ObjectId, ForeignWriter>,
    leases_by_cluster: HashMap<ClusterId, ObjectId>,
    global_pools: Vec<IpPool<ServiceKey>>,
    clusterset_pools: Vec<IpPool<ServiceKey>>,
    dirty: BTreeSet<ServiceKey>,
    started: bool,
    zone_synced: bool,
    health: HashMap<ClusterId, ClusterHealth>,
    missing_since: HashMap<ClusterId, Timestamp>,
    lease_state: LeaseState,
    pending: HashMap<Target, Write>,
    failures: HashMap<ServiceKey, Failure>,
    accounted: HashMap<ServiceKey, Timestamp>,
    zone_out: Vec<clusterset_dns::ZoneChange>,
    problems: Vec<String>,
    waiting_for_address: BTreeSet<ServiceKey>,
    freed: bool,
    /// The API servers that failed to answer (a watch or a heartbeat failed with a connection
    /// error, a timeout or a 5xx) and have not answered since.
    unreachable: BTreeSet<Side>,
}

#[derive(Debug, Clone, Copy)]
enum PoolKind {
    Global,
    Clusterset,
}

fn key_of(id: &ObjectId) -> ServiceKey {
    ServiceKey::new(&id.namespace, &id.name)
}

fn label<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

fn local_slice_service(slice: &EndpointSlice) -> Option<ServiceKey> {
    Some(ServiceKey::new(
        slice.metadata.namespace.as_deref()?,
        label(&slice.metadata, KUBERNETES_SERVICE_NAME_LABEL)?,
    ))
}

fn imported_slice_service(slice: &EndpointSlice) -> Option<ServiceKey> {
    Some(ServiceKey::new(
        slice.metadata.namespace.as_deref()?,
        label(&slice.metadata, SERVICE_NAME_LABEL)?,
    ))
}

fn subset(
    desired: Option<&BTreeMap<String, String>>,
    observed: Option<&BTreeMap<String, String>>,
) -> bool {
    desired
        .into_iter()
        .flatten()
        .all(|(k, v)| observed.and_then(|o| o.get(k)) == Some(v))
}

fn same_condition(a: &Condition, b: &Condition) -> bool {
    a.type_ == b.type_ && a.status == b.status && a.reason == b.reason && a.message == b.message
}

fn conditions_match(desired: &[Condition], observed: &[Condition], owned: &[&str]) -> bool {
    let ours: Vec<&Condition> = observed
        .iter()
        .filter(|c| owned.contains(&c.type_.as_str()))
        .collect();
    ours.len() == desired.len()
        && desired
            .iter()
            .all(|d| ours.iter().any(|o| same_condition(d, o)))
}

const IMPORT_CONDITIONS: [&str; 2] = ["Ready", STALE_CLUSTERS_CONDITION];
const EXPORT_CONDITIONS: [&str; 3] = ["Valid", "Conflict", "Ready"];

/// The label (`f:labels`) or annotation (`f:annotations`) keys that our field manager set by
/// server-side apply on the main resource, from `metadata.managedFields`.
fn applied_keys<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    field: &str,
) -> Vec<&'a str> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|e| {
            e.manager.as_deref() == Some(crate::write::FIELD_MANAGER)
                && e.operation.as_deref() == Some("Apply")
                && e.subresource.as_deref().unwrap_or("").is_empty()
        })
        .filter_map(|e| {
            e.fields_v1
                .as_ref()?
                .0
                .get("f:metadata")?
                .get(field)?
                .as_object()
        })
        .flat_map(|fields| fields.keys().filter_map(|k| k.strip_prefix("f:")))
        .collect()
}

/// Whether every key we applied earlier is still wanted (else the apply must run again, and
/// server-side apply removes the keys we no longer send).
fn no_stale_keys(
    desired: Option<&BTreeMap<String, String>>,
    observed: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    field: &str,
) -> bool {
    applied_keys(observed, field)
        .into_iter()
        .all(|k| desired.is_some_and(|d| d.contains_key(k)))
}

/// Whether the stored ServiceImport carries the desired spec, labels and annotations, and no
/// label or annotation we applied before and no longer want (a removed exported label).
pub fn import_spec_matches(desired: &ServiceImport, observed: &ServiceImport) -> bool {
    let mut observed_spec = observed.spec.clone();
    observed_spec.unknown_fields = desired.spec.unknown_fields.clone();
    observed_spec == desired.spec
        && subset(
            desired.metadata.labels.as_ref(),
            observed.metadata.labels.as_ref(),
        )
        && subset(
            desired.metadata.annotations.as_ref(),
            observed.metadata.annotations.as_ref(),
        )
        && no_stale_keys(
            desired.metadata.labels.as_ref(),
            &observed.metadata,
            "f:labels",
        )
        && no_stale_keys(
            desired.metadata.annotations.as_ref(),
            &observed.metadata,
            "f:annotations",
        )
}

/// Whether the stored ServiceImport carries the desired status (clusters and our conditions).
pub fn import_status_matches(desired: &ServiceImport, observed: &ServiceImport) -> bool {
    let empty = ServiceImportStatus::default();
    let d = desired.status.as_ref().unwrap_or(&empty);
    let o = observed.status.as_ref().unwrap_or(&empty);
    d.cluster_ids().eq(o.cluster_ids())
        && conditions_match(&d.conditions, &o.conditions, &IMPORT_CONDITIONS)
}

/// Whether the stored EndpointSlice carries the desired endpoints, ports and labels.
pub fn slice_matches(desired: &EndpointSlice, observed: &EndpointSlice) -> bool {
    desired.address_type == observed.address_type
        && desired.endpoints == observed.endpoints
        && desired.ports == observed.ports
        && subset(
            desired.metadata.labels.as_ref(),
            observed.metadata.labels.as_ref(),
        )
}

fn export_status_matches(desired: &ServiceExportStatus, observed: &ServiceExport) -> bool {
    let empty = ServiceExportStatus::default();
    let o = observed.status.as_ref().unwrap_or(&empty);
    conditions_match(&desired.conditions, &o.conditions, &EXPORT_CONDITIONS)
}

fn is_live(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    meta.deletion_timestamp.is_none()
}

/// Whether `lease` is an older version of `stored`: by resourceVersion when both are numbers
/// (as etcd's are), else by renewal time.
fn lease_is_older(lease: &Lease, stored: &Lease) -> bool {
    let version = |l: &Lease| l.metadata.resource_version.as_deref()?.parse::<u64>().ok();
    if let (Some(a), Some(b)) = (version(lease), version(stored)) {
        return a < b;
    }
    let renewed = |l: &Lease| l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0);
    matches!((renewed(lease), renewed(stored)), (Some(a), Some(b)) if a < b)
}

fn backoff(attempts: u32) -> SignedDuration {
    let seconds = 1_i64 << attempts.saturating_sub(1).min(6);
    SignedDuration::from_secs(seconds.min(60))
}

fn later(at: Timestamp, by: SignedDuration) -> Timestamp {
    at.checked_add(by).unwrap_or(Timestamp::MAX)
}

impl AgentCore {
    /// A core for `config` (which the caller has validated) with empty, unsynced caches.
    pub fn new(config: AgentConfig) -> Self {
        let global_pools = config
            .global_cidrs
            .iter()
            .map(|c| IpPool::new(*c))
            .collect();
        let clusterset_pools = config
            .clusterset_cidrs
            .iter()
            .map(|c| IpPool::new(*c))
            .collect();
        Self {
            config,
            services: Cache::default(),
            exports: Cache::default(),
            local_slices: Cache::default(),
            namespaces: Cache::default(),
            imports: Cache::default(),
            imported_slices: Cache::default(),
            records: Cache::default(),
            leases: Cache::default(),
            local_slices_by_service: HashMap::new(),
            imported_slices_by_service: HashMap::new(),
            records_by_service: BTreeMap::new(),
            services_by_cluster: HashMap::new(),
            unreadable_records: BTreeMap::new(),
            foreign_records: BTreeMap::new(),
            foreign_leases: BTreeMap::new(),
            leases_by_cluster: HashMap::new(),
            global_pools,
            clusterset_pools,
            dirty: BTreeSet::new(),
            started: false,
            zone_synced: false,
            health: HashMap::new(),
            missing_since: HashMap::new(),
            lease_state: LeaseState::NotHeld,
            pending: HashMap::new(),
            failures: HashMap::new(),
            accounted: HashMap::new(),
            zone_out: Vec::new(),
            problems: Vec::new(),
            waiting_for_address: BTreeSet::new(),
            freed: false,
            unreachable: BTreeSet::new(),
        }
    }

    /// The settings.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Whether every local watch has listed everything once.
    pub fn local_synced(&self) -> bool {
        self.services.is_synced()
            && self.exports.is_synced()
            && self.local_slices.is_synced()
            && self.namespaces.is_synced()
            && self.imports.is_synced()
            && self.imported_slices.is_synced()
    }

    /// Whether every broker watch has listed everything once.
    pub fn broker_synced(&self) -> bool {
        self.records.is_synced() && self.leases.is_synced()
    }

    /// Whether the core has started writing (both sides synced, IPs restored).
    pub fn is_started(&self) -> bool {
        self.started
    }

    /// Whether this agent holds its cluster's heartbeat Lease, as of the last `process`.
    pub fn lease_state(&self) -> &LeaseState {
        &self.lease_state
    }

    /// How a cluster stands, as of the last `process`.
    pub fn cluster_health(&self, cluster: &ClusterId) -> Option<ClusterHealth> {
        self.health.get(cluster).copied()
    }

    /// Services waiting to be reconciled.
    pub fn dirty_count(&self) -> usize {
        self.dirty.len()
    }

    /// Counts for metrics (walks the caches: call it at scrape or tick rate, not per event).
    pub fn stats(&self) -> Stats {
        let me = &self.config.cluster_id;
        Stats {
            local_exports: self.exports.len(),
            published_records: self.services_by_cluster.get(me).map_or(0, BTreeSet::len),
            // Records whose writer could not have been their cluster are counted apart.
            broker_records: self
                .records
                .len()
                .saturating_sub(self.foreign_records.len()),
            imports: self.imports.len(),
            stale_clusters: self
                .health
                .values()
                .filter(|h| !matches!(h, ClusterHealth::Fresh))
                .count(),
            foreign_writers: ["record_namespace", "shared_namespace", "lease_name"].map(|reason| {
                let count = self
                    .foreign_records
                    .values()
                    .chain(self.foreign_leases.values())
                    .filter(|f| f.reason() == reason)
                    .count();
                (reason, count)
            }),
        }
    }

    /// The heartbeat to write now: create or renew this cluster's Lease, or hold off because
    /// another instance holds it. `None` until the broker's Leases have been listed.
    pub fn heartbeat(&self, now: Timestamp) -> Option<Heartbeat> {
        if !self.leases.is_synced() {
            return None;
        }
        let stored = self.leases.get(&ObjectId::new(
            &self.config.broker_namespace,
            &broker::lease_name(&self.config.cluster_id),
        ));
        Some(broker::heartbeat(
            stored,
            &self.config.cluster_id,
            &self.config.identity,
            &self.config.broker_namespace,
            self.config.lease_duration_seconds(),
            now,
        ))
    }

    /// The Lease write that hands this cluster's heartbeat Lease back on a clean shutdown, if
    /// this agent holds it.
    pub fn release_heartbeat(&self) -> Option<Heartbeat> {
        let stored = self.leases.get(&ObjectId::new(
            &self.config.broker_namespace,
            &broker::lease_name(&self.config.cluster_id),
        ));
        broker::release(stored, &self.config.identity).map(|l| Heartbeat::Replace(Box::new(l)))
    }

    /// Takes in one watch event.
    pub fn handle(&mut self, input: Input) {
        self.answered(match &input {
            Input::Record(_) | Input::Lease(_) => Side::Broker,
            _ => Side::Member,
        });
        match input {
            Input::Service(event) => {
                for change in self.services.handle(event) {
                    if self.exports.get(&change.id).is_some() {
                        self.dirty.insert(key_of(&change.id));
                    }
                }
            }
            Input::ServiceExport(event) => {
                for change in self.exports.handle(event) {
                    if self.export_change_matters(&change) {
                        self.dirty.insert(key_of(&change.id));
                    }
                }
            }
            Input::LocalEndpointSlice(event) => {
                for change in self.local_slices.handle(event) {
                    let old = change.old.as_ref().and_then(local_slice_service);
                    let new = change.new.as_ref().and_then(local_slice_service);
                    for key in old.iter().chain(new.iter()) {
                        if let Some(set) = self.local_slices_by_service.get_mut(key) {
                            set.remove(&change.id);
                            if set.is_empty() {
                                self.local_slices_by_service.remove(key);
                            }
                        }
                        if self
                            .exports
                            .get(&ObjectId::new(&key.namespace, &key.name))
                            .is_some()
                        {
                            self.dirty.insert(key.clone());
                        }
                    }
                    if let Some(key) = new {
                        self.local_slices_by_service
                            .entry(key)
                            .or_default()
                            .insert(change.id.clone());
                    }
                }
            }
            Input::Namespace(event) => {
                for change in self.namespaces.handle(event) {
                    let was = change.old.as_ref().is_some_and(|n| is_live(&n.metadata));
                    let is = change.new.as_ref().is_some_and(|n| is_live(&n.metadata));
                    if was != is {
                        self.dirty_namespace(&change.id.name);
                    }
                }
            }
            Input::ServiceImport(event) => {
                for change in self.imports.handle(event) {
                    self.zone_import_change(&change);
                    let echo = self.settle_import(&change);
                    if !echo {
                        self.dirty.insert(key_of(&change.id));
                    }
                }
            }
            Input::ImportedEndpointSlice(event) => {
                for change in self.imported_slices.handle(event) {
                    self.zone_slice_change(&change);
                    let old = change.old.as_ref().and_then(imported_slice_service);
                    let new = change.new.as_ref().and_then(imported_slice_service);
                    if let Some(key) = &old
                        && let Some(set) = self.imported_slices_by_service.get_mut(key)
                    {
                        set.remove(&change.id.name);
                        if set.is_empty() {
                            self.imported_slices_by_service.remove(key);
                        }
                    }
                    if let Some(key) = &new {
                        self.imported_slices_by_service
                            .entry(key.clone())
                            .or_default()
                            .insert(change.id.name.clone());
                    }
                    if old.is_none() && new.is_none() {
                        self.problems.push(format!(
                            "EndpointSlice {}/{} is managed by clusterset but has no {SERVICE_NAME_LABEL} label: it is left alone; delete it if it is not needed",
                            change.id.namespace, change.id.name
                        ));
                    }
                    let echo = self.settle(
                        &Target::Slice(change.id.clone()),
                        change.new.as_ref(),
                        |write, observed| match (write, observed) {
                            (Write::ApplyEndpointSlice(d), Some(o)) => slice_matches(d, o),
                            (Write::DeleteEndpointSlice { .. }, None) => true,
                            _ => false,
                        },
                    );
                    if !echo {
                        for key in old.into_iter().chain(new) {
                            self.dirty.insert(key);
                        }
                    }
                }
            }
            Input::Record(event) => {
                for change in self.records.handle(event) {
                    self.pending.remove(&Target::Record(change.id.clone()));
                    if let Some(old) = &change.old {
                        self.unindex_record(&change.id, old);
                    }
                    if let Some(new) = &change.new {
                        self.index_record(&change.id, new);
                    }
                }
            }
            Input::Lease(event) => {
                let Some(event) = self.newest_lease(event) else {
                    return;
                };
                for change in self.leases.handle(event) {
                    self.foreign_leases.remove(&change.id);
                    if let Some(Ok(Some(cluster))) =
                        change.old.as_ref().map(broker::lease_writer_check)
                        && self.leases_by_cluster.get(&cluster) == Some(&change.id)
                    {
                        self.leases_by_cluster.remove(&cluster);
                    }
                    match change.new.as_ref().map(broker::lease_writer_check) {
                        Some(Ok(Some(cluster))) => {
                            self.leases_by_cluster.insert(cluster, change.id.clone());
                        }
                        Some(Err(foreign)) => {
                            self.problems.push(foreign.to_string());
                            self.foreign_leases.insert(change.id.clone(), foreign);
                        }
                        Some(Ok(None)) | None => {}
                    }
                }
            }
        }
    }

    /// `event`, unless it carries a Lease older than the one stored (a late event, or a relist
    /// from an earlier snapshot, after the heartbeat fed in the Lease the hub stored): a late
    /// `Apply` or `Delete` is dropped, and a relist keeps the stored Lease.
    fn newest_lease(&self, event: Event<Lease>) -> Option<Event<Lease>> {
        let newer = |lease: &Lease| {
            self.leases
                .get(&ObjectId::of(lease))
                .filter(|stored| lease_is_older(lease, stored))
                .cloned()
        };
        match event {
            Event::Apply(lease) | Event::Delete(lease) if newer(&lease).is_some() => None,
            Event::InitApply(lease) => Some(Event::InitApply(newer(&lease).unwrap_or(lease))),
            other => Some(other),
        }
    }

    fn export_change_matters(&mut self, change: &Change<ServiceExport>) -> bool {
        let (Some(old), Some(new)) = (&change.old, &change.new) else {
            self.pending
                .remove(&Target::ExportStatus(change.id.clone()));
            return true;
        };
        let user_change = old.spec != new.spec
            || old.metadata.creation_timestamp != new.metadata.creation_timestamp
            || old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
            || old.metadata.generation != new.metadata.generation;
        let echo = self.settle(
            &Target::ExportStatus(change.id.clone()),
            Some(new),
            |write, observed| match (write, observed) {
                (Write::ApplyServiceExportStatus { status, .. }, Some(o)) => {
                    export_status_matches(status, o)
                }
                _ => false,
            },
        );
        let status_changed = old.status != new.status;
        user_change || (status_changed && !echo)
    }

    /// If a write to `target` is in flight, checks whether `observed` is its echo; the pending
    /// entry is dropped either way (from now on the stored object is compared again).
    fn settle<T>(
        &mut self,
        target: &Target,
        observed: Option<&T>,
        matches: impl Fn(&Write, Option<&T>) -> bool,
    ) -> bool {
        match self.pending.remove(target) {
            Some(write) => matches(&write, observed),
            None => false,
        }
    }

    /// Whether a ServiceImport event is the echo of our own in-flight write(s). Matched
    /// writes are settled; when the event matches one of ours, the other (spec or status) write
    /// is still in flight and stays pending. An event that matches none of ours (someone else
    /// changed the object, or overwrote our write before we saw it) settles everything and the
    /// service is reconciled again.
    fn settle_import(&mut self, change: &Change<ServiceImport>) -> bool {
        let observed = change.new.as_ref();
        let spec_target = Target::ImportSpec(change.id.clone());
        let status_target = Target::ImportStatus(change.id.clone());
        let spec_echo = self.pending.get(&spec_target).map(|write| match write {
            Write::ApplyServiceImport(d) => observed.is_some_and(|o| import_spec_matches(d, o)),
            Write::DeleteServiceImport(_) => observed.is_none(),
            _ => false,
        });
        let status_echo = self.pending.get(&status_target).map(|write| match write {
            Write::ApplyServiceImportStatus(d) => {
                observed.is_some_and(|o| import_status_matches(d, o))
            }
            _ => false,
        });
        if spec_echo != Some(true) && status_echo != Some(true) {
            self.pending.remove(&spec_target);
            self.pending.remove(&status_target);
            return false;
        }
        if spec_echo == Some(true) {
            self.pending.remove(&spec_target);
        }
        if status_echo == Some(true) {
            self.pending.remove(&status_target);
        }
        true
    }

    fn index_record(&mut self, id: &ObjectId, object: &BrokerRecord) {
        let checked = object.checked_record().and_then(|record| {
            broker::record_writer_check(
                &self.config.broker_namespace,
                self.config.shared_records,
                &id.namespace,
                &record.cluster_id,
            )
            .map(|home| (record, home))
            .map_err(|foreign| {
                self.foreign_records.insert(id.clone(), foreign.clone());
                foreign.to_string()
            })
        });
        match checked {
            Ok((record, home)) => {
                let key = record.service_key.clone();
                let cluster = record.cluster_id.clone();
                self.records_by_service
                    .entry(key.clone())
                    .or_default()
                    .entry(cluster.clone())
                    .or_default()
                    .insert(home, id.clone());
                self.services_by_cluster
                    .entry(cluster)
                    .or_default()
                    .insert(key.clone());
                self.dirty.insert(key);
            }
            Err(problem) => {
                self.problems.push(format!(
                    "broker record {}/{} is ignored: {problem}",
                    id.namespace, id.name
                ));
                if !self.foreign_records.contains_key(id) {
                    self.unreadable_records.insert(id.clone(), problem);
                }
            }
        }
    }

    fn unindex_record(&mut self, id: &ObjectId, object: &BrokerRecord) {
        self.unreadable_records.remove(id);
        if self.foreign_records.remove(id).is_some() {
            return;
        }
        let Ok(record) = object.checked_record() else {
            return;
        };
        let key = &record.service_key;
        let cluster = &record.cluster_id;
        let mut last_copy = true;
        if let Some(by_cluster) = self.records_by_service.get_mut(key) {
            if let Some(copies) = by_cluster.get_mut(cluster) {
                copies.retain(|_, stored| stored != id);
                last_copy = copies.is_empty();
                if last_copy {
                    by_cluster.remove(cluster);
                }
            }
            if by_cluster.is_empty() {
                self.records_by_service.remove(key);
            }
        }
        if !last_copy {
            self.dirty.insert(key.clone());
            return;
        }
        if let Some(keys) = self.services_by_cluster.get_mut(cluster) {
            keys.remove(key);
            if keys.is_empty() {
                self.services_by_cluster.remove(cluster);
            }
        }
        self.dirty.insert(key.clone());
    }

    fn dirty_namespace(&mut self, namespace: &str) {
        let from = ServiceKey::new(namespace, "");
        let keys: Vec<ServiceKey> = self
            .records_by_service
            .range(from..)
            .take_while(|(k, _)| k.namespace == namespace)
            .map(|(k, _)| k.clone())
            .collect();
        self.dirty.extend(keys);
        let imported: Vec<ServiceKey> = self
            .imports
            .values()
            .filter(|i| i.metadata.namespace.as_deref() == Some(namespace))
            .map(|i| key_of(&ObjectId::of(i)))
            .collect();
        self.dirty.extend(imported);
    }

    fn zone_import_change(&mut self, change: &Change<ServiceImport>) {
        if !self.zone_synced {
            return;
        }
        self.zone_out.push(match &change.new {
            Some(import) => clusterset_dns::ZoneChange::Upsert(
                clusterset_dns::ZoneObject::ServiceImport(Box::new(import.clone())),
            ),
            None => clusterset_dns::ZoneChange::DeleteServiceImport(
                clusterset_dns::ServiceKey::new(&change.id.namespace, &change.id.name),
            ),
        });
    }

    fn zone_slice_change(&mut self, change: &Change<EndpointSlice>) {
        if !self.zone_synced {
            return;
        }
        self.zone_out.push(match &change.new {
            Some(slice) => clusterset_dns::ZoneChange::Upsert(
                clusterset_dns::ZoneObject::EndpointSlice(Box::new(slice.clone())),
            ),
            None => clusterset_dns::ZoneChange::DeleteEndpointSlice(clusterset_dns::SliceKey::new(
                &change.id.namespace,
                &change.id.name,
            )),
        });
    }

    /// Reports that an API server did not answer: one of its watches or (the broker) a
    /// heartbeat failed with a connection error, a timeout or a 5xx. A refusal (403, 404, 410
    /// Gone, 422...) is an answer: report it with [`answered`](Self::answered). When it answers
    /// again, the writes to it that failed without an answer are retried at once instead of
    /// waiting out their backoff.
    pub fn unreachable(&mut self, side: Side) {
        self.unreachable.insert(side);
    }

    /// Reports that an API server answered: a watch event from it (every input counts; the
    /// core calls this itself in [`handle`](Self::handle)), a watch error or a write it refused
    /// with a status below 500, a write it carried out, or a heartbeat the hub took. If it had
    /// not answered before ([`unreachable`](Self::unreachable)), every write to it that failed
    /// without an answer (connection error, timeout, 5xx) is retried now, its backoff started
    /// afresh. Writes it refused keep their backoff, and so do writes to the other API server.
    pub fn answered(&mut self, side: Side) {
        if !self.unreachable.remove(&side) {
            return;
        }
        for (key, failure) in &mut self.failures {
            let mut reset = false;
            for (target, backoff) in &mut failure.targets {
                if target.side() == side && !backoff.answered {
                    backoff.attempts = 0;
                    backoff.retry_at = None;
                    reset = true;
                }
            }
            if reset {
                self.dirty.insert(key.clone());
            }
        }
    }

    /// Reports that a write was not attempted because an earlier write of its service failed
    /// (writes of one service go out in order): it is emitted again when the service is next
    /// reconciled, and its service is reconciled now (so a ServiceExport shows the failure).
    pub fn write_skipped(&mut self, write: &Write) {
        self.pending.remove(&write.target());
        self.dirty.insert(write.service());
    }

    /// Reports that a write failed without an answer from its API server (a connection error,
    /// a timeout, a 5xx): it is retried with backoff (1 s doubling to 60 s, its own count per
    /// write), or at once when its API server answers again after an outage (see
    /// [`answered`](Self::answered)). A failed broker write shows as `Ready=False/Failed` on
    /// the ServiceExport. Meanwhile the service's other writes to the same API server wait too,
    /// except its ServiceExport's status (unless writing that is what failed).
    pub fn write_failed(&mut self, write: &Write, message: &str, now: Timestamp) {
        self.record_failure(write, message, false, now);
    }

    /// Reports that the API server refused a write (a status below 500 other than a 404 on a
    /// delete: 403, 409, 422...): as [`write_failed`](Self::write_failed), except that the
    /// refusal shows that the API server answers ([`answered`](Self::answered)) and that the
    /// write keeps its backoff when the API server returns from an outage (retrying it sooner
    /// would be refused again).
    pub fn write_refused(&mut self, write: &Write, message: &str, now: Timestamp) {
        self.answered(write.target().side());
        self.record_failure(write, message, true, now);
    }

    fn record_failure(&mut self, write: &Write, message: &str, answered: bool, now: Timestamp) {
        let target = write.target();
        self.pending.remove(&target);
        let key = write.service();
        let failure = self.failures.entry(key.clone()).or_default();
        let backoff_of = failure.targets.entry(target).or_insert(Backoff {
            attempts: 0,
            retry_at: None,
            answered,
        });
        backoff_of.attempts = backoff_of.attempts.saturating_add(1);
        backoff_of.retry_at = Some(later(now, backoff(backoff_of.attempts)));
        backoff_of.answered = answered;
        if write.is_broker() {
            failure.publish_error = Some(format!(
                "Writing the record to the broker failed: {message}"
            ));
        }
        // Reconcile now so the ServiceExport shows the failure; writes wait for the retry time.
        self.dirty.insert(key);
    }

    /// Reports that a write succeeded (clears its failure, if it had one); its API server
    /// answers ([`answered`](Self::answered)).
    pub fn write_succeeded(&mut self, write: &Write) {
        self.answered(write.target().side());
        let key = write.service();
        let Some(failure) = self.failures.get_mut(&key) else {
            return;
        };
        failure.targets.remove(&write.target());
        if write.is_broker() && failure.publish_error.take().is_some() {
            self.dirty.insert(key.clone());
        }
        if failure.targets.is_empty() {
            self.failures.remove(&key);
        }
    }

    /// When the core next needs [`process`](Self::process) without a new event: a Lease running
    /// out, a stale cluster reaching its drop time, or a retry.
    pub fn next_wakeup(&self) -> Option<Timestamp> {
        if self.started && !self.dirty.is_empty() {
            // Work left over from the last pass: now.
            return Some(Timestamp::MIN);
        }
        let mut next: Option<Timestamp> = None;
        let mut consider = |t: Timestamp| {
            next = Some(next.map_or(t, |n| n.min(t)));
        };
        for backoff in self.failures.values().flat_map(|f| f.targets.values()) {
            if let Some(t) = backoff.retry_at {
                consider(t);
            }
        }
        for (cluster, health) in &self.health {
            match health {
                ClusterHealth::Fresh => {
                    if let Some(t) = self.lease_of(cluster).and_then(broker::lease_expiry) {
                        consider(t);
                    }
                }
                ClusterHealth::Stale { since } => {
                    if let Some(after) = self.drop_after() {
                        consider(later(*since, after));
                    }
                }
                ClusterHealth::Dropped { .. } => {}
            }
        }
        // This agent's own Lease: when it runs out, this agent stops holding it (or another
        // instance stops blocking it). Once it has run out there is nothing to wait for (an
        // expired Lease in the past would wake the runtime up at once, again and again).
        match &self.lease_state {
            LeaseState::Held => {
                if let Some(own) = self.own_lease().and_then(broker::lease_expiry) {
                    consider(own);
                }
            }
            LeaseState::Blocked { until, .. } => consider(*until),
            LeaseState::NotHeld => {}
        }
        next
    }

    fn drop_after(&self) -> Option<SignedDuration> {
        let after = self.config.stale_drop_after?;
        SignedDuration::try_from(after).ok()
    }

    fn lease_of(&self, cluster: &ClusterId) -> Option<&Lease> {
        self.leases.get(self.leases_by_cluster.get(cluster)?)
    }

    fn own_lease(&self) -> Option<&Lease> {
        self.lease_of(&self.config.cluster_id)
    }

    fn compute_lease_state(&self, now: Timestamp) -> LeaseState {
        let Some(lease) = self.own_lease() else {
            return LeaseState::NotHeld;
        };
        match (broker::lease_holder(lease), broker::lease_expiry(lease)) {
            (Some(holder), Some(until)) if now < until => {
                if holder == self.config.identity {
                    LeaseState::Held
                } else {
                    LeaseState::Blocked {
                        holder: holder.to_owned(),
                        until,
                    }
                }
            }
            _ => LeaseState::NotHeld,
        }
    }

    fn compute_health(&mut self, cluster: &ClusterId, now: Timestamp) -> ClusterHealth {
        let since = match self.lease_of(cluster).and_then(broker::lease_expiry) {
            Some(expiry) if now < expiry => {
                self.missing_since.remove(cluster);
                return ClusterHealth::Fresh;
            }
            Some(expiry) => expiry,
            None => *self.missing_since.entry(cluster.clone()).or_insert(now),
        };
        match self.drop_after() {
            Some(after) if now >= later(since, after) => ClusterHealth::Dropped { since },
            _ => ClusterHealth::Stale { since },
        }
    }

    fn refresh_health(&mut self, now: Timestamp) {
        let clusters: Vec<ClusterId> = self
            .services_by_cluster
            .keys()
            .filter(|c| **c != self.config.cluster_id)
            .cloned()
            .collect();
        let mut seen = BTreeSet::new();
        for cluster in clusters {
            let health = self.compute_health(&cluster, now);
            let previous = self.health.insert(cluster.clone(), health);
            if previous != Some(health)
                && let Some(keys) = self.services_by_cluster.get(&cluster)
            {
                self.dirty.extend(keys.iter().cloned());
            }
            seen.insert(cluster);
        }
        self.health.retain(|c, _| seen.contains(c));
        self.missing_since.retain(|c, _| seen.contains(c));

        let lease_state = self.compute_lease_state(now);
        if lease_state != self.lease_state {
            self.lease_state = lease_state;
            let mine: Vec<ServiceKey> = self
                .exports
                .values()
                .map(|e| key_of(&ObjectId::of(e)))
                .chain(
                    self.services_by_cluster
                        .get(&self.config.cluster_id)
                        .into_iter()
                        .flatten()
                        .cloned(),
                )
                .collect();
            self.dirty.extend(mine);
        }
    }

    /// Restores the persisted IP assignments and marks everything known dirty; runs once, when
    /// both sides have synced.
    fn start(&mut self) {
        let me = self.config.cluster_id.clone();
        let own: Vec<ExportRecord> = self
            .services_by_cluster
            .get(&me)
            .into_iter()
            .flatten()
            .filter_map(|key| self.records_by_service.get(key)?.get(&me))
            .flat_map(BTreeMap::values)
            .filter_map(|id| self.records.get(id)?.checked_record().ok().cloned())
            .collect();
        for record in own {
            for ip in &record.global_ips {
                self.restore(true, &record.service_key, *ip);
            }
        }
        let imported: Vec<(ServiceKey, String)> = self
            .imports
            .values()
            .flat_map(|i| {
                let key = key_of(&ObjectId::of(i));
                i.spec.ips.iter().map(move |ip| (key.clone(), ip.clone()))
            })
            .collect();
        for (key, ip) in imported {
            match ip.parse::<IpAddr>() {
                Ok(ip) => self.restore(false, &key, ip),
                Err(_) => self.problems.push(format!(
                    "ServiceImport {key} has clusterset IP {ip:?}, which is not an IP address: a new one is assigned"
                )),
            }
        }
        let mut keys: BTreeSet<ServiceKey> = self.records_by_service.keys().cloned().collect();
        keys.extend(self.exports.values().map(|e| key_of(&ObjectId::of(e))));
        keys.extend(self.imports.values().map(|i| key_of(&ObjectId::of(i))));
        keys.extend(self.imported_slices_by_service.keys().cloned());
        self.dirty.extend(keys);
        self.started = true;
    }

    fn restore(&mut self, global: bool, key: &ServiceKey, ip: IpAddr) {
        let pools = if global {
            &mut self.global_pools
        } else {
            &mut self.clusterset_pools
        };
        let what = if global { "global" } else { "clusterset" };
        match pools
            .iter_mut()
            .find(|p| family_of(p.cidr().addr()) == family_of(ip))
        {
            Some(pool) => {
                if let Err(e) = pool.restore(key.clone(), ip) {
                    self.problems.push(format!(
                        "cannot keep {what} IP {ip} of {key}: {e}; a new one is assigned"
                    ));
                }
            }
            None => self.problems.push(format!(
                "{key} holds {what} IP {ip} but no {what} CIDR of its family is configured: a new one is assigned if a CIDR is added"
            )),
        }
    }

    /// Reconciles what changed. Returns nothing until both the local and the broker caches have
    /// synced (a partial cache must never cause a deletion or an IP handed out twice).
    pub fn process(&mut self, now: Timestamp) -> Output {
        let mut out = Output {
            problems: std::mem::take(&mut self.problems),
            ..Default::default()
        };
        if !self.zone_synced && self.imports.is_synced() && self.imported_slices.is_synced() {
            self.zone_synced = true;
            out.zone_synced = true;
            out.zone_changes.extend(self.imports.values().map(|i| {
                clusterset_dns::ZoneChange::Upsert(clusterset_dns::ZoneObject::ServiceImport(
                    Box::new(i.clone()),
                ))
            }));
            out.zone_changes
                .extend(self.imported_slices.values().map(|s| {
                    clusterset_dns::ZoneChange::Upsert(clusterset_dns::ZoneObject::EndpointSlice(
                        Box::new(s.clone()),
                    ))
                }));
        }
        out.zone_changes.append(&mut self.zone_out);
        if !(self.local_synced() && self.broker_synced()) {
            return out;
        }
        if !self.started {
            self.start();
        }
        self.refresh_health(now);
        for (key, failure) in &mut self.failures {
            for backoff in failure.targets.values_mut() {
                if backoff.retry_at.is_some_and(|t| t <= now) {
                    backoff.retry_at = None;
                    self.dirty.insert(key.clone());
                }
            }
        }
        // A released address may be what a waiting service needs: reconcile those again (a
        // bounded number of times; waiting services only assign, so this settles).
        for _ in 0..3 {
            let dirty = std::mem::take(&mut self.dirty);
            if dirty.is_empty() {
                break;
            }
            out.reconciled += dirty.len();
            for key in dirty {
                self.reconcile(&key, now, &mut out);
            }
            if !std::mem::take(&mut self.freed) {
                break;
            }
            let waiting: Vec<ServiceKey> = self.waiting_for_address.iter().cloned().collect();
            self.dirty.extend(waiting);
        }
        out.problems.append(&mut self.problems);
        out
    }

    fn pools_mut(&mut self, kind: PoolKind) -> &mut Vec<IpPool<ServiceKey>> {
        match kind {
            PoolKind::Global => &mut self.global_pools,
            PoolKind::Clusterset => &mut self.clusterset_pools,
        }
    }

    /// Addresses for `key`, one per wanted family that has a pool; releases the key's address in
    /// pools of unwanted families. A key left short (exhausted pool) waits for a release.
    fn assign_ips(&mut self, kind: PoolKind, key: &ServiceKey, families: &[String]) -> Vec<IpAddr> {
        let mut ips = Vec::new();
        let mut short = false;
        let mut freed = false;
        let mut problems = Vec::new();
        for pool in self.pools_mut(kind).iter_mut() {
            let family = family_of(pool.cidr().addr());
            if families.iter().any(|f| f == family) {
                match pool.assign(key) {
                    Ok(ip) => ips.push(ip),
                    Err(e) => {
                        short = true;
                        problems.push(format!("cannot assign an address to {key}: {e}"));
                    }
                }
            } else {
                freed |= pool.release(key).is_some();
            }
        }
        self.problems.append(&mut problems);
        self.freed |= freed;
        if short {
            self.waiting_for_address.insert(key.clone());
        } else {
            self.waiting_for_address.remove(key);
        }
        ips
    }

    fn release_ips(&mut self, kind: PoolKind, key: &ServiceKey) {
        let mut freed = false;
        for pool in self.pools_mut(kind).iter_mut() {
            freed |= pool.release(key).is_some();
        }
        self.freed |= freed;
    }

    fn emit(&mut self, out: &mut Output, write: Write, hold: bool) {
        if hold {
            return;
        }
        let target = write.target();
        if self.pending.get(&target) == Some(&write) {
            return;
        }
        self.pending.insert(target, write.clone());
        out.writes.push(write);
    }

    fn reconcile(&mut self, key: &ServiceKey, now: Timestamp, out: &mut Output) {
        let id = ObjectId::new(&key.namespace, &key.name);
        let me = self.config.cluster_id.clone();
        // While a write of this service waits for its retry time, write nothing else for it to
        // the same API server (conditions still show the failure: the ServiceExport's status
        // waits only if writing it is what failed).
        let failure = self.failures.get(key);
        let holding_broker = failure.is_some_and(|f| f.holds(Side::Broker, now));
        let holding = failure.is_some_and(|f| f.holds(Side::Member, now));
        let holding_status = holding
            && failure.is_some_and(|f| f.targets.contains_key(&Target::ExportStatus(id.clone())));

        // 1. This cluster's export: validity, global IPs, the record to publish.
        let export = self
            .exports
            .get(&id)
            .filter(|e| is_live(&e.metadata))
            .cloned();
        let mut validity: Result<(), InvalidExport> = Ok(());
        let mut desired_record: Option<ExportRecord> = None;
        let mut keep_published = false;
        let mut local_failure: Option<String> = None;
        if let Some(export) = &export {
            let service = self
                .services
                .get(&id)
                .filter(|s| is_live(&s.metadata))
                .cloned();
            match ExportedService::from_service(key, service.as_ref()) {
                Err(invalid) => {
                    self.release_ips(PoolKind::Global, key);
                    validity = Err(invalid);
                }
                Ok(exported) => {
                    let families = if exported.headless {
                        Vec::new()
                    } else {
                        exported.ip_families.clone()
                    };
                    let global_ips = self.assign_ips(PoolKind::Global, key, &families);
                    let wanted = self.config.endpoint_mode
                        == mcs_controller::EndpointMode::GlobalIngress
                        && !exported.headless;
                    if wanted && global_ips.is_empty() {
                        // No global address (pool exhausted or no range of the service's
                        // family): keep what is published rather than withdrawing it.
                        keep_published = true;
                        local_failure = Some(format!(
                            "No global IP for this export: this cluster has no free address in a global CIDR of the Service's IP families ({}); add or enlarge --global-cidr",
                            families.join(", ")
                        ));
                    } else {
                        let slices: Vec<EndpointSlice> = self
                            .local_slices_by_service
                            .get(key)
                            .into_iter()
                            .flatten()
                            .filter_map(|sid| self.local_slices.get(sid).cloned())
                            .collect();
                        let created = export
                            .metadata
                            .creation_timestamp
                            .clone()
                            .unwrap_or(Time(now));
                        match ExportRecord::from_local(LocalExport {
                            cluster_id: &me,
                            key,
                            export_created: &created,
                            export_spec: &export.spec,
                            service: service.as_ref(),
                            endpoint_slices: &slices,
                            global_ips: &global_ips,
                            mode: self.config.endpoint_mode,
                        }) {
                            Ok(record) => desired_record = Some(record),
                            Err(invalid) => validity = Err(invalid),
                        }
                    }
                }
            }
        } else {
            self.release_ips(PoolKind::Global, key);
        }

        // 2. Publish or withdraw (only while holding this cluster's heartbeat Lease).
        // This cluster's copies: one where it publishes, and during the upgrade maybe one in
        // the other place, withdrawn once the first is stored as desired.
        let publish_namespace = self.config.publish_namespace();
        let publish_home = if publish_namespace == self.config.broker_namespace {
            RecordHome::Shared
        } else {
            RecordHome::Own
        };
        let my_copies: RecordCopies = self
            .records_by_service
            .get(key)
            .and_then(|m| m.get(&me))
            .cloned()
            .unwrap_or_default();
        let stored_own = my_copies
            .get(&publish_home)
            .and_then(|rid| self.records.get(rid))
            .and_then(|r| r.checked_record().ok());
        let published = matches!((&desired_record, stored_own), (Some(d), Some(s)) if d == s);
        let has_stored_own = !my_copies.is_empty();
        // The broker holds what it should (our write went through although we were told it
        // failed, e.g. the hub went away before it answered; or nothing is left to withdraw):
        // a broker write that failed before has nothing left to retry or report.
        if published || (desired_record.is_none() && !has_stored_own) {
            self.broker_settled(key);
        }
        let lease_state = self.lease_state.clone();
        if lease_state == LeaseState::Held {
            match (&desired_record, has_stored_own) {
                (Some(record), _) if !published => {
                    let object = BrokerRecord::new(record.clone(), &publish_namespace, now);
                    let write = Write::PublishRecord(Box::new(object));
                    // The same record on its way (only its publication time would differ):
                    // wait for its echo instead of publishing it again.
                    let same_in_flight = matches!(
                        self.pending.get(&write.target()),
                        Some(Write::PublishRecord(p)) if p.checked_record().ok() == Some(record)
                    );
                    if !same_in_flight {
                        self.emit(out, write, holding_broker);
                    }
                }
                (None, true) if !keep_published => {
                    for rid in my_copies.values() {
                        self.emit(out, Write::withdraw(key, rid), holding_broker);
                    }
                }
                (Some(_), _) if published => {
                    // Moved: the copy where this agent publishes is stored as desired, so the
                    // other one can go without the record ever being missing.
                    for (_, rid) in my_copies.iter().filter(|(home, _)| **home != publish_home) {
                        self.emit(out, Write::withdraw(key, rid), holding_broker);
                    }
                }
                _ => {}
            }
        }
        let publish_error = self
            .failures
            .get(key)
            .and_then(|f| f.publish_error.clone())
            .or(local_failure);
        let publication = match (&lease_state, publish_error) {
            (LeaseState::Blocked { holder, until }, _) => Publication::Failed(format!(
                "Another agent ({holder}) holds the heartbeat Lease of cluster {me} until {until}: two agents must not use one cluster id; this one does not publish"
            )),
            (_, Some(error)) => Publication::Failed(error),
            // An update on its way keeps the export Ready: the previous version is published.
            _ if desired_record.is_some() && has_stored_own => Publication::Published,
            _ => Publication::Pending,
        };

        // 3. Merge every cluster's records (stale clusters kept, dropped ones left out).
        let records: Vec<(ExportRecord, Option<Timestamp>)> = self
            .records_by_service
            .get(key)
            .into_iter()
            .flatten()
            .filter(|(cluster, _)| {
                !matches!(
                    self.health.get(*cluster),
                    Some(ClusterHealth::Dropped { .. })
                )
            })
            .filter_map(|(_, copies)| {
                // The copy in the cluster's own namespace, else the shared one.
                let (_, rid) = copies.first_key_value()?;
                let object = self.records.get(rid)?;
                Some((object.checked_record().ok()?.clone(), object.published_at()))
            })
            .collect();
        let newest_publication = records.iter().filter_map(|(_, t)| *t).max();
        let plain: Vec<ExportRecord> = records.into_iter().map(|(r, _)| r).collect();
        let merged = match merge_exports(&plain) {
            Ok(merged) => merged,
            Err(e) => {
                out.problems
                    .push(format!("cannot merge the records of {key}: {e}"));
                return;
            }
        };

        // 4. Import side.
        let namespace_live = self
            .namespaces
            .get(&ObjectId::new("", &key.namespace))
            .is_some_and(|n| is_live(&n.metadata));
        let writes_before = out.writes.len();
        match (&merged, namespace_live) {
            (Some(merged), true) => self.write_import(key, &id, merged, now, holding, out),
            _ => {
                self.release_ips(PoolKind::Clusterset, key);
                self.remove_import(key, &id, holding, out);
            }
        }
        let import_changed = out.writes[writes_before..].iter().any(|w| {
            matches!(
                w,
                Write::ApplyServiceImport(_)
                    | Write::ApplyEndpointSlice(_)
                    | Write::ApplyServiceImportStatus(_)
            )
        });
        if import_changed
            && let Some(published_at) = newest_publication
            && self
                .accounted
                .get(key)
                .is_none_or(|seen| *seen < published_at)
        {
            self.accounted.insert(key.clone(), published_at);
            out.lags
                .push((key.clone(), now.duration_since(published_at)));
        }
        if merged.is_none() {
            self.accounted.remove(key);
        }

        // 5. Export conditions.
        if let Some(export) = &export {
            let in_merge = merged
                .as_ref()
                .filter(|m| m.records.iter().any(|r| r.cluster_id == me));
            let conditions =
                export_conditions(validity.as_ref().map(|_| ()), in_merge, &publication);
            let mut list: Vec<Condition> = export
                .status
                .as_ref()
                .map(|s| {
                    s.conditions
                        .iter()
                        .filter(|c| EXPORT_CONDITIONS.contains(&c.type_.as_str()))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            for remove in &conditions.remove {
                mcs_types::conditions::remove_condition(&mut list, remove.as_str());
            }
            let generation = export.metadata.generation;
            for desired in conditions.set {
                mcs_types::conditions::set_condition(&mut list, desired, generation, Time(now));
            }
            let status = ServiceExportStatus {
                conditions: list,
                ..Default::default()
            };
            let stored_matches = export_status_matches(&status, export)
                && export.status.as_ref().is_none_or(|s| {
                    s.conditions
                        .iter()
                        .filter(|c| EXPORT_CONDITIONS.contains(&c.type_.as_str()))
                        .all(|c| c.observed_generation == generation)
                });
            if !stored_matches {
                self.emit(
                    out,
                    Write::ApplyServiceExportStatus {
                        key: key.clone(),
                        status,
                    },
                    holding_status,
                );
            }
        }
    }

    /// Forgets the failed broker write of `key` (and the error it shows on the export).
    fn broker_settled(&mut self, key: &ServiceKey) {
        let Some(failure) = self.failures.get_mut(key) else {
            return;
        };
        failure.targets.retain(|t, _| t.side() != Side::Broker);
        failure.publish_error = None;
        if failure.targets.is_empty() {
            self.failures.remove(key);
        }
    }

    fn stale_condition(&self, merged: &MergedService) -> DesiredCondition {
        let stale: Vec<String> = merged
            .cluster_ids()
            .into_iter()
            .filter_map(|c| match self.health.get(c) {
                Some(ClusterHealth::Stale { since }) => Some(format!("{c} (since {since})")),
                _ => None,
            })
            .collect();
        if stale.is_empty() {
            DesiredCondition::new(
                STALE_CLUSTERS_CONDITION,
                ConditionStatus::False,
                FRESH_REASON,
                "Every exporting cluster renews its heartbeat Lease",
            )
        } else {
            let drop = match self.config.stale_drop_after {
                Some(after) => format!("until they have been stale for {}s", after.as_secs()),
                None => "until they heartbeat again or their records are removed".to_owned(),
            };
            DesiredCondition::new(
                STALE_CLUSTERS_CONDITION,
                ConditionStatus::True,
                STALE_REASON,
                format!(
                    "Exporting clusters have stopped renewing their heartbeat Lease: {}. Their last-known exports are kept {drop}.",
                    stale.join(", ")
                ),
            )
        }
    }

    fn write_import(
        &mut self,
        key: &ServiceKey,
        id: &ObjectId,
        merged: &MergedService,
        now: Timestamp,
        holding: bool,
        out: &mut Output,
    ) {
        let families: Vec<String> = if merged.service_type == ServiceImportType::ClusterSetIP {
            merged.ip_families.clone()
        } else {
            Vec::new()
        };
        let ips = self.assign_ips(PoolKind::Clusterset, key, &families);
        let mut desired = desired_import(merged, &ips);
        let observed = self.imports.get(id).cloned();
        if observed
            .as_ref()
            .is_none_or(|o| !import_spec_matches(&desired, o))
        {
            let mut spec_only = desired.clone();
            spec_only.status = None;
            self.emit(out, Write::ApplyServiceImport(Box::new(spec_only)), holding);
        }
        let mut conditions: Vec<Condition> = observed
            .as_ref()
            .and_then(|o| o.status.as_ref())
            .map(|s| {
                s.conditions
                    .iter()
                    .filter(|c| IMPORT_CONDITIONS.contains(&c.type_.as_str()))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for condition in [
            import_ready_condition(merged, &ips),
            self.stale_condition(merged),
        ] {
            mcs_types::conditions::set_condition(&mut conditions, condition, None, Time(now));
        }
        let status = desired.status.get_or_insert_with(Default::default);
        status.conditions = conditions;
        if observed
            .as_ref()
            .is_none_or(|o| !import_status_matches(&desired, o))
        {
            self.emit(
                out,
                Write::ApplyServiceImportStatus(Box::new(desired)),
                holding,
            );
        }

        let slices = desired_endpoint_slices(merged);
        let mut wanted = BTreeSet::new();
        for slice in slices {
            let name = slice.metadata.name.clone().unwrap_or_default();
            let stored = self
                .imported_slices
                .get(&ObjectId::new(&key.namespace, &name));
            if stored.is_none_or(|s| !slice_matches(&slice, s)) {
                self.emit(out, Write::ApplyEndpointSlice(Box::new(slice)), holding);
            }
            wanted.insert(name);
        }
        let extra: Vec<String> = self
            .imported_slices_by_service
            .get(key)
            .into_iter()
            .flatten()
            .filter(|name| !wanted.contains(*name))
            .cloned()
            .collect();
        for name in extra {
            self.emit(
                out,
                Write::DeleteEndpointSlice {
                    key: key.clone(),
                    name,
                },
                holding,
            );
        }
    }

    fn remove_import(&mut self, key: &ServiceKey, id: &ObjectId, holding: bool, out: &mut Output) {
        let slices: Vec<String> = self
            .imported_slices_by_service
            .get(key)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        for name in slices {
            self.emit(
                out,
                Write::DeleteEndpointSlice {
                    key: key.clone(),
                    name,
                },
                holding,
            );
        }
        if self.imports.get(id).is_some() {
            self.emit(out, Write::DeleteServiceImport(key.clone()), holding);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};

    fn import(labels: &[(&str, &str)]) -> ServiceImport {
        let mut import = ServiceImport::new(
            "web",
            mcs_types::ServiceImportSpec::new(ServiceImportType::ClusterSetIP, Vec::new()),
        );
        import.metadata.namespace = Some("shop".into());
        if !labels.is_empty() {
            import.metadata.labels = Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
        }
        import
    }

    fn managed(manager: &str, label: &str) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Apply".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1({
                let mut labels = serde_json::Map::new();
                labels.insert(format!("f:{label}"), serde_json::json!({}));
                serde_json::json!({"f:metadata": {"f:labels": labels}})
            })),
            ..Default::default()
        }
    }

    #[test]
    fn labels_match_as_a_subset_unless_we_applied_one_no_longer_wanted() {
        // (desired labels, stored labels, managers of stored labels, matches?)
        type Case<'a> = (
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
            bool,
        );
        let cases: [Case<'_>; 5] = [
            (
                &[("team", "a")],
                &[("team", "a")],
                &[("clusterset-agent", "team")],
                true,
            ),
            (
                &[("team", "a")],
                &[("team", "b")],
                &[("clusterset-agent", "team")],
                false,
            ),
            // Someone else's label on the import is not ours to remove.
            (&[], &[("owner", "x")], &[("kubectl", "owner")], true),
            // An exported label was removed: ours, so apply again (SSA then drops it).
            (
                &[],
                &[("team", "a")],
                &[("clusterset-agent", "team")],
                false,
            ),
            (
                &[("tier", "1")],
                &[("tier", "1"), ("team", "a")],
                &[("clusterset-agent", "team")],
                false,
            ),
        ];
        for (desired, stored, managers, expected) in cases {
            let desired = import(desired);
            let mut observed = import(stored);
            observed.metadata.managed_fields =
                Some(managers.iter().map(|(m, l)| managed(m, l)).collect());
            assert_eq!(
                import_spec_matches(&desired, &observed),
                expected,
                "desired {:?} stored {:?} managers {managers:?}",
                desired.metadata.labels,
                observed.metadata.labels
            );
        }
    }
}

//! The agent's sans-IO core: watch events in ([`Input`], each an [`Event`]), writes out
//! ([`Output`]). The real agent (its kube shell) and the simulation harness run this same code;
//! only the shell around it differs.
//!
//! - Every input updates a relist-safe [`Cache`] and marks the services it touches dirty
//!   (one changed export touches only its service).
//! - [`AgentCore::process`] does nothing until the local caches *and* the broker caches have
//!   listed everything once; then it restores the persisted IP assignments (global IPs from this
//!   cluster's own broker records, clusterset IPs from the local ServiceImports) and reconciles
//!   every known service once; afterwards only dirty services are reconciled.
//! - Reconciling a service: publish or withdraw this cluster's record, merge every cluster's
//!   records ([`crate::merge_exports`]), write the ServiceImport and EndpointSlices
//!   where the namespace exists (or delete them), and write the ServiceExport conditions. A
//!   write is emitted only when the stored object differs from the desired one, and not again
//!   while the same write is in flight.
//! - Clusters whose heartbeat Lease ran out are marked on the ServiceImports they export (a
//!   condition naming them), and their records are kept; they are left out of the merge only
//!   after `stale_drop_after`, if set.
//!
//! Modules: `inputs` takes in events and keeps the indexes, `process` runs a pass,
//! `reconcile` decides one service's writes, `matching` compares stored with desired objects,
//! `failures` keeps the backoff of failed writes, `heartbeat` the Leases and clusters' health.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use mcs_types::{ClusterId, ServiceKey};

use crate::IpPool;
use crate::broker::{BrokerRecord, ForeignWriter, RecordHome};
use crate::cache::{Cache, ObjectId};
use crate::config::AgentConfig;
use crate::watch::Event;
use crate::write::{Target, Write};

mod failures;
mod heartbeat;
mod in_flight;
mod inputs;
mod matching;
mod process;
mod reconcile;

use failures::Failure;
use matching::{EXPORT_CONDITIONS, IMPORT_CONDITIONS, export_status_matches, trim_managed_fields};
pub use matching::{
    derived_service_matches, import_spec_matches, import_status_matches, slice_matches,
};
use process::PoolKind;

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
    pub zone_changes: Vec<ZoneChange>,
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

/// A change of what the clusterset DNS zone is built from: the ServiceImports and imported
/// EndpointSlices stored in this cluster (the shell hands them to its DNS zone store).
#[derive(Debug, Clone, PartialEq)]
pub enum ZoneChange {
    /// A ServiceImport was stored (added or modified).
    ServiceImport(Box<ServiceImport>),
    /// An imported EndpointSlice was stored (added or modified).
    EndpointSlice(Box<EndpointSlice>),
    /// A ServiceImport was deleted.
    ServiceImportDeleted(ServiceKey),
    /// An imported EndpointSlice was deleted.
    EndpointSliceDeleted(ObjectId),
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
            | Self::DerivedService(_)
            | Self::ExportStatus(_) => Side::Member,
        }
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
    /// What this agent has observed: kept when it steps down.
    observed: Observations,
    /// What this agent has decided: reset when it steps down.
    decided: Decisions,
    /// Problems worth a log line not yet handed out (kept when it steps down).
    problems: Vec<String>,
    /// Whether this core decides and writes (the leader of the agent's replicas), or only keeps
    /// its caches warm and its DNS sources current (a follower).
    leading: bool,
}

/// What an agent has observed of both API servers: the watch caches and their indexes, the
/// records and Leases it ignores, the heartbeat Leases' observations, which API servers do not
/// answer, and the DNS zone's sources not yet handed out. A replica that steps down keeps all
/// of it (see [`AgentCore::step_down`]); a new field belongs here only if that is right for it.
#[derive(Debug, Default)]
struct Observations {
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
    /// Every heartbeat Lease as this agent observed it (kube-lease's rules: since when its
    /// record has been unchanged by this core's clock).
    lease_observations: HashMap<ObjectId, kube_lease::Observed<Timestamp>>,
    /// The API servers that failed to answer (a watch or a heartbeat failed with a connection
    /// error, a timeout or a 5xx) and have not answered since.
    unreachable: BTreeSet<Side>,
    /// Whether the DNS zone's sources have been listed completely (and handed out once).
    zone_synced: bool,
    /// Changes of the DNS zone's sources not yet handed out.
    zone_out: Vec<ZoneChange>,
}

/// What a leading agent has decided: whether it started, the IP pools, the services to
/// reconcile, the writes in flight and the export conditions they carry, the failed writes, the
/// clusters' health and this agent's heartbeat state, and the propagation lags accounted for. A
/// replica that steps down drops all of it (see [`AgentCore::step_down`]), so that if it leads
/// again it starts afresh from what is stored.
#[derive(Debug)]
struct Decisions {
    /// Whether both sides synced and the persisted IP assignments were restored.
    started: bool,
    global_pools: Vec<IpPool<ServiceKey>>,
    clusterset_pools: Vec<IpPool<ServiceKey>>,
    /// Services left short of an address by an exhausted pool.
    waiting_for_address: BTreeSet<ServiceKey>,
    /// Whether an address was released during this pass.
    freed: bool,
    /// Services waiting to be reconciled.
    dirty: BTreeSet<ServiceKey>,
    /// The writes in flight: the latest per target, and earlier ones not echoed yet.
    in_flight: in_flight::InFlight,
    /// The export conditions this agent last sent for each export: the base of its next
    /// status while the watch has not delivered that write yet (see
    /// [`WrittenConditions`]).
    export_conditions_written: HashMap<ServiceKey, WrittenConditions>,
    /// ServiceExports whose status write found them gone (404) and of which the watch has
    /// delivered nothing since: no status is written for them until it does.
    exports_gone: BTreeSet<ServiceKey>,
    /// Exports whose first status waits until this time (`None`: the wait is over) for the
    /// export to be published: valid exports never `Ready=True` yet whose record is on its way
    /// to the hub, and new exports whose Service has not come yet. An export published
    /// promptly gets one status write, `Ready=True`, instead of `Valid=False/NoService` or
    /// `Ready=Unknown/Pending` first.
    first_status_waits: HashMap<ServiceKey, Option<Timestamp>>,
    failures: HashMap<ServiceKey, Failure>,
    health: HashMap<ClusterId, ClusterHealth>,
    missing_since: HashMap<ClusterId, Timestamp>,
    lease_state: LeaseState,
    /// The newest record publication time whose propagation lag was reported, per service.
    accounted: HashMap<ServiceKey, Timestamp>,
}

impl Decisions {
    /// Nothing decided yet: empty IP pools of the configured ranges.
    fn new(config: &AgentConfig) -> Self {
        let pools = |cidrs: &[ipnet::IpNet]| -> Vec<IpPool<ServiceKey>> {
            cidrs.iter().map(|c| IpPool::new(*c)).collect()
        };
        Self {
            started: false,
            global_pools: pools(&config.global_cidrs),
            clusterset_pools: pools(&config.clusterset_cidrs),
            waiting_for_address: BTreeSet::new(),
            freed: false,
            dirty: BTreeSet::new(),
            in_flight: in_flight::InFlight::default(),
            export_conditions_written: HashMap::new(),
            exports_gone: BTreeSet::new(),
            first_status_waits: HashMap::new(),
            failures: HashMap::new(),
            health: HashMap::new(),
            missing_since: HashMap::new(),
            lease_state: LeaseState::NotHeld,
            accounted: HashMap::new(),
        }
    }
}

/// The conditions of the last status write this agent sent for one ServiceExport, and the uid
/// of the export it was for. Under load the export's watch runs behind the agent's own writes;
/// the next status is built on these conditions rather than on the older ones the cache still
/// holds, so that a condition whose status has not changed keeps its `lastTransitionTime`. A
/// write that failed is forgotten (the stored status is then the base again).
#[derive(Debug, Clone, PartialEq)]
struct WrittenConditions {
    uid: Option<String>,
    conditions: Vec<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition>,
}

fn key_of(id: &ObjectId) -> ServiceKey {
    ServiceKey::new(&id.namespace, &id.name)
}

fn is_live(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> bool {
    meta.deletion_timestamp.is_none()
}

fn later(at: Timestamp, by: SignedDuration) -> Timestamp {
    at.checked_add(by).unwrap_or(Timestamp::MAX)
}

impl AgentCore {
    /// A core for `config` (which the caller has validated) with empty, unsynced caches.
    pub fn new(config: AgentConfig) -> Self {
        Self {
            decided: Decisions::new(&config),
            config,
            observed: Observations::default(),
            problems: Vec::new(),
            leading: true,
        }
    }

    /// A core of a replica that does not lead (yet): it takes in every event and keeps its
    /// caches and the DNS zone's sources current, but decides nothing and writes nothing, not
    /// even its heartbeat, until [`lead`](Self::lead). [`new`](Self::new) makes a leading core
    /// (a single replica).
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcs_controller::core::AgentCore;
    /// use mcs_controller::{AgentConfig, EndpointMode};
    /// use mcs_types::ClusterId;
    /// let config = AgentConfig {
    ///     cluster_id: ClusterId::new("east")?,
    ///     identity: "clusterset-agent-7d9c4-x2lq8".into(),
    ///     broker_namespace: "clusterset-broker".into(),
    ///     shared_records: Default::default(),
    ///     global_cidrs: vec!["242.1.0.0/16".parse()?],
    ///     clusterset_cidrs: vec!["243.1.0.0/16".parse()?],
    ///     endpoint_mode: EndpointMode::GlobalIngress,
    ///     lease_duration: Duration::from_secs(30),
    ///     stale_drop_after: None,
    ///     first_status_wait: AgentConfig::DEFAULT_FIRST_STATUS_WAIT,
    /// };
    /// let mut core = AgentCore::follower(config);
    /// assert!(!core.is_leading());
    /// core.lead();
    /// assert!(core.is_leading());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn follower(config: AgentConfig) -> Self {
        Self {
            leading: false,
            ..Self::new(config)
        }
    }

    /// Makes this core the leader: the next [`process`](Self::process) starts deciding (IPs
    /// restored from what is stored, every service reconciled) and heartbeats begin. A leader
    /// that stops leading becomes a follower with [`step_down`](Self::step_down).
    pub fn lead(&mut self) {
        self.leading = true;
    }

    /// Whether this core decides and writes.
    pub fn is_leading(&self) -> bool {
        self.leading
    }

    /// This core as a follower again, for a replica that stopped leading (it could not renew
    /// the leader Lease): what it observed stays (the caches and indexes, so the DNS zone keeps
    /// being served and stays current, and the heartbeat Leases' observations), what it
    /// decided goes (IP pools, writes in flight, retries, cluster health, the heartbeat
    /// state), so that if it leads again it starts afresh from what is stored, as a new
    /// leader does. Call it only when no write is in flight.
    pub fn step_down(self) -> Self {
        // Every field is named: a new one must be sorted into kept or reset here (one of
        // `Observations` is kept, one of `Decisions` reset).
        let Self {
            config,
            observed,
            decided: _,
            problems,
            leading: _,
        } = self;
        Self {
            observed,
            problems,
            ..Self::follower(config)
        }
    }

    /// The settings.
    pub fn config(&self) -> &AgentConfig {
        &self.config
    }

    /// Whether every local watch has listed everything once.
    pub fn local_synced(&self) -> bool {
        self.observed.services.is_synced()
            && self.observed.exports.is_synced()
            && self.observed.local_slices.is_synced()
            && self.observed.namespaces.is_synced()
            && self.observed.imports.is_synced()
            && self.observed.imported_slices.is_synced()
    }

    /// Whether every broker watch has listed everything once.
    pub fn broker_synced(&self) -> bool {
        self.observed.records.is_synced() && self.observed.leases.is_synced()
    }

    /// Whether the core has started writing (both sides synced, IPs restored).
    pub fn is_started(&self) -> bool {
        self.decided.started
    }

    /// Whether this agent holds its cluster's heartbeat Lease, as of the last `process`.
    pub fn lease_state(&self) -> &LeaseState {
        &self.decided.lease_state
    }

    /// How a cluster stands, as of the last `process`.
    pub fn cluster_health(&self, cluster: &ClusterId) -> Option<ClusterHealth> {
        self.decided.health.get(cluster).copied()
    }

    /// Services waiting to be reconciled.
    pub fn dirty_count(&self) -> usize {
        self.decided.dirty.len()
    }

    /// Counts for metrics (walks the caches: call it at scrape or tick rate, not per event).
    pub fn stats(&self) -> Stats {
        let me = &self.config.cluster_id;
        Stats {
            local_exports: self.observed.exports.len(),
            published_records: self
                .observed
                .services_by_cluster
                .get(me)
                .map_or(0, BTreeSet::len),
            // Records whose writer could not have been their cluster are counted apart.
            broker_records: self
                .observed
                .records
                .len()
                .saturating_sub(self.observed.foreign_records.len()),
            imports: self.observed.imports.len(),
            stale_clusters: self
                .decided
                .health
                .values()
                .filter(|h| !matches!(h, ClusterHealth::Fresh))
                .count(),
            foreign_writers: ["record_namespace", "shared_namespace", "lease_name"].map(|reason| {
                let count = self
                    .observed
                    .foreign_records
                    .values()
                    .chain(self.observed.foreign_leases.values())
                    .filter(|f| f.reason() == reason)
                    .count();
                (reason, count)
            }),
        }
    }
}

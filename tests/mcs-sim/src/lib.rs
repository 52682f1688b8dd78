//! A simulation of N member clusters and a broker, all in memory, each cluster driven by the
//! same [`AgentCore`] the real agent runs. Writes are applied to in-memory stores the way the
//! API server would (server-side apply of the fields we send) and come back as watch events.
//! Used by the tests (convergence, restarts, stale clusters) and by the propagation benchmark.
//!
//! The in-memory API servers are strict: every object the agents write (ServiceImports and
//! their status, EndpointSlices, ServiceExport status, broker records, heartbeat Leases) is
//! checked with Kubernetes' own rules ([`kube_syntax`], on the built-in types plus the MCS,
//! About and broker CRDs) as a real kube-apiserver checks it. An invalid write is not stored:
//! the agent is told it failed with the API server's 422 message, and the refusal is kept in
//! [`Simulation::refused`] so that tests can assert that nothing was ever refused.
//!
//! Like a real API server, a write that leaves the stored object as it was (a server-side apply
//! of what is already there) succeeds without a watch event. The hub and each member's API
//! server can be stopped ([`Simulation::stop_hub`], [`Simulation::stop_api`]): meanwhile writes
//! to it fail with a connection error and its watches deliver nothing; when it returns
//! ([`Simulation::start_hub`], [`Simulation::start_api`]) its watches list again, as kube's
//! watcher does after its resource version expired.
//!
//! A test-support crate (not published): the tests and the `propagation` benchmark of
//! `mcs-controller` use it, and so do the agent's tests of its kube shell (for their objects).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube_syntax::object::Catalog;
use mcs_controller::EndpointMode;
use mcs_controller::broker::{
    self, BrokerRecord, CLUSTER_ID_LABEL, GROUP, Heartbeat, PLURAL, records_namespace,
};
use mcs_controller::cache::ObjectId;
use mcs_controller::config::AgentConfig;
use mcs_controller::core::{AgentCore, Input, Side};
use mcs_controller::watch::Event;
use mcs_controller::write::{Target, Write};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use mcs_types::{ClusterId, ServiceKey};

mod api;
mod objects;

use api::{Answer, accepted, forbidden_message, listed, local_listing, merge_maps};
pub use api::{api_catalog, refusal};
pub use objects::{endpoint_slice, namespace, service, service_export};

/// The broker namespace of the simulation.
pub const BROKER_NAMESPACE: &str = "clusterset-broker";

/// What a client is told while an API server does not answer (kube's error when the
/// connection is refused).
pub const UNREACHABLE: &str = "ServiceError: client error (Connect)";

/// One member cluster's stored objects.
#[derive(Debug, Default, Clone)]
pub struct ClusterStore {
    /// Services.
    pub services: BTreeMap<ObjectId, Service>,
    /// ServiceExports.
    pub exports: BTreeMap<ObjectId, ServiceExport>,
    /// Services' EndpointSlices.
    pub local_slices: BTreeMap<ObjectId, EndpointSlice>,
    /// Namespaces (by name).
    pub namespaces: BTreeMap<String, Namespace>,
    /// ServiceImports.
    pub imports: BTreeMap<ObjectId, ServiceImport>,
    /// Imported EndpointSlices.
    pub imported_slices: BTreeMap<ObjectId, EndpointSlice>,
}

/// One simulated member cluster.
#[derive(Debug)]
pub struct SimCluster {
    /// Its agent.
    pub core: AgentCore,
    /// Its API server's objects.
    pub store: ClusterStore,
    inbox: VecDeque<Input>,
    /// Whether its agent heartbeats (stop to simulate a dead cluster).
    pub heartbeating: bool,
    /// Whether its API server answers ([`Simulation::stop_api`], [`Simulation::start_api`]).
    pub api_up: bool,
    /// The writes its agent carried out, by kind ([`Write::kind`]), as the agent's
    /// `writes_total` metric counts them: every successful write, whether it changed the stored
    /// object or not.
    pub writes: BTreeMap<&'static str, usize>,
    /// Its agent's writes that failed, by kind (refused, not found, API server unreachable).
    pub failed_writes: BTreeMap<&'static str, usize>,
}

impl SimCluster {
    /// The writes of one kind its agent carried out.
    pub fn writes_of(&self, kind: &str) -> usize {
        self.writes.get(kind).copied().unwrap_or(0)
    }

    /// Every write its agent carried out.
    pub fn total_writes(&self) -> usize {
        self.writes.values().sum()
    }
}

/// Writes the simulated API servers refused, each as `<cluster>: <the 422 message>`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the API server refused writes of the agents:\n{}", .0.join("\n"))]
pub struct Refused(pub Vec<String>);

/// Counters of one [`Simulation::settle`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct SettleStats {
    /// `process` calls.
    pub rounds: usize,
    /// Watch events delivered.
    pub events: usize,
    /// Writes carried out.
    pub writes: usize,
    /// Services reconciled, summed over clusters.
    pub reconciled: usize,
}

/// N clusters and a broker.
#[derive(Debug)]
pub struct Simulation {
    /// The clusters, `c0`, `c1`, ...
    pub clusters: Vec<SimCluster>,
    /// The records on the hub, in every namespace.
    pub records: BTreeMap<ObjectId, BrokerRecord>,
    /// The heartbeat Leases in the broker namespace, by name. Every cluster's Lease is there
    /// from the start, without a holder, as `clusterset-agent hub-manifests` creates them.
    pub leases: BTreeMap<String, Lease>,
    /// Whether the hub lets every member write records in the shared broker namespace (hub
    /// manifests generated with `--legacy-shared-records`, during the upgrade). Otherwise each
    /// cluster may write records only in its own records namespace.
    pub shared_records_writable: bool,
    /// The simulated time.
    pub now: Timestamp,
    /// Every write the simulated API servers refused, as `<cluster>: <the 403 or 422 message>`,
    /// in order. A correct agent never makes an invalid or forbidden write, so tests assert this
    /// stays empty.
    pub refused: Vec<String>,
    /// Whether writes are checked (on unless turned off). Only the propagation benchmark turns
    /// it off: it measures the agents' CPU time, and the checks are the API server's work.
    pub strict: bool,
    /// Whether the hub's API server (the broker) answers ([`Simulation::stop_hub`],
    /// [`Simulation::start_hub`]).
    pub hub_up: bool,
    /// Whether the hub carries out broker writes but the agents never get its answer (the
    /// connection breaks after the request went through): they are told the write failed with
    /// [`UNREACHABLE`].
    pub hub_answers_lost: bool,
    catalog: Catalog,
    resource_version: u64,
}

/// A simulation that cannot be set up.
#[derive(Debug, thiserror::Error)]
pub enum SimError {
    /// A generated cluster id is invalid.
    #[error(transparent)]
    ClusterId(#[from] mcs_types::InvalidClusterId),
    /// The resource types of the simulated API servers cannot be set up: a CRD does not build.
    #[error("the simulated API server's resource types: {0}")]
    Crd(#[from] mcs_types::crd::CrdError),
    /// The resource types of the simulated API servers cannot be set up: a CRD does not
    /// serialize to JSON.
    #[error("the simulated API server's resource types: a CRD is not JSON: {0}")]
    CrdJson(#[from] serde_json::Error),
    /// The committed broker CRD (`deploy/clusterset-agent/broker-crd.yaml`) does not parse.
    #[error("the simulated API server's resource types: the broker CRD does not parse: {0}")]
    BrokerCrd(#[from] serde_saphyr::Error),
    /// More clusters than the address plan has room for.
    #[error(
        "cluster index {0} is too large: the simulation gives each cluster a /16 of 242/8 and 243/8, so at most 256 clusters"
    )]
    TooManyClusters(usize),
}

/// The settings of cluster `i` of a simulation: global CIDR `242.i.0.0/16`, clusterset CIDR
/// `243.i.0.0/16`, global-ingress endpoints, 30 s heartbeat Lease.
pub fn cluster_config(
    i: usize,
    stale_drop_after: Option<Duration>,
) -> Result<AgentConfig, SimError> {
    let octet = u8::try_from(i).map_err(|_| SimError::TooManyClusters(i))?;
    let net = |first: u8| {
        ipnet::IpNet::V4(
            ipnet::Ipv4Net::new(std::net::Ipv4Addr::new(first, octet, 0, 0), 16)
                .unwrap_or_default(),
        )
    };
    Ok(AgentConfig {
        cluster_id: ClusterId::new(&format!("c{i}"))?,
        identity: format!("agent-c{i}"),
        broker_namespace: BROKER_NAMESPACE.to_owned(),
        shared_records: broker::SharedRecords::Ignore,
        global_cidrs: vec![net(242)],
        clusterset_cidrs: vec![net(243)],
        endpoint_mode: EndpointMode::GlobalIngress,
        lease_duration: Duration::from_secs(30),
        stale_drop_after,
        first_status_wait: AgentConfig::DEFAULT_FIRST_STATUS_WAIT,
    })
}

impl Simulation {
    /// `n` clusters ([`cluster_config`]), each with the namespaces given, nothing exported, at
    /// time `start`.
    pub fn new(
        n: usize,
        namespaces: &[&str],
        start: Timestamp,
        stale_drop_after: Option<Duration>,
    ) -> Result<Self, SimError> {
        let configs = (0..n)
            .map(|i| cluster_config(i, stale_drop_after))
            .collect::<Result<Vec<_>, SimError>>()?;
        Self::with_configs(configs, namespaces, start)
    }

    /// One cluster per config (any cluster ids, address plans and endpoint modes), each with
    /// the namespaces given, nothing exported, at time `start`.
    pub fn with_configs(
        configs: Vec<AgentConfig>,
        namespaces: &[&str],
        start: Timestamp,
    ) -> Result<Self, SimError> {
        let clusters: Vec<SimCluster> = configs
            .into_iter()
            .map(|config| {
                let mut store = ClusterStore::default();
                for ns in namespaces {
                    store.namespaces.insert((*ns).to_owned(), namespace(ns));
                }
                SimCluster {
                    core: AgentCore::new(config),
                    store,
                    inbox: VecDeque::new(),
                    heartbeating: true,
                    api_up: true,
                    writes: BTreeMap::new(),
                    failed_writes: BTreeMap::new(),
                }
            })
            .collect();
        let mut leases = BTreeMap::new();
        for (version, cluster) in clusters.iter().enumerate() {
            let config = cluster.core.config();
            let name = broker::lease_name(&config.cluster_id);
            let lease = Lease {
                metadata: ObjectMeta {
                    name: Some(name.clone()),
                    namespace: Some(config.broker_namespace.clone()),
                    labels: Some(BTreeMap::from([(
                        CLUSTER_ID_LABEL.to_owned(),
                        config.cluster_id.to_string(),
                    )])),
                    resource_version: Some(version.to_string()),
                    ..ObjectMeta::default()
                },
                spec: None,
            };
            leases.insert(name, lease);
        }
        let resource_version = leases.len() as u64;
        Ok(Self {
            clusters,
            records: BTreeMap::new(),
            leases,
            shared_records_writable: false,
            now: start,
            refused: Vec::new(),
            strict: true,
            hub_up: true,
            hub_answers_lost: false,
            catalog: api_catalog()?,
            resource_version,
        })
    }

    /// Starts (or restarts, with a fresh core) cluster `i`'s agent: it lists everything (what
    /// answers: a stopped API server's watches list when it returns).
    pub fn start_agent(&mut self, i: usize) {
        let broker = if self.hub_up {
            self.broker_listing()
        } else {
            Vec::new()
        };
        let Some(cluster) = self.clusters.get_mut(i) else {
            return;
        };
        let config = cluster.core.config().clone();
        cluster.core = AgentCore::new(config);
        if cluster.api_up {
            let local = local_listing(&cluster.store);
            cluster.inbox.extend(local);
        }
        cluster.inbox.extend(broker);
    }

    /// Restarts cluster `i`'s agent with new settings (a rollout with changed flags, e.g.
    /// another `--shared-records`): a fresh core for `config`, which lists everything as
    /// [`start_agent`](Self::start_agent) does. `config` should name the same cluster (and,
    /// to hold the heartbeat Lease at once, the same identity).
    pub fn restart_agent_with(&mut self, i: usize, config: AgentConfig) {
        let Some(cluster) = self.clusters.get_mut(i) else {
            return;
        };
        cluster.core = AgentCore::new(config);
        self.start_agent(i);
    }

    /// Starts every agent.
    pub fn start_all(&mut self) {
        for i in 0..self.clusters.len() {
            self.start_agent(i);
        }
    }

    /// The broker's watches listing everything: records, then Leases.
    fn broker_listing(&self) -> Vec<Input> {
        let mut inputs = Vec::new();
        listed(self.records.values().cloned(), Input::Record, &mut inputs);
        listed(self.leases.values().cloned(), Input::Lease, &mut inputs);
        inputs
    }

    /// Stops the hub's API server: broker writes and heartbeats fail with [`UNREACHABLE`], and
    /// every agent's broker watches fail (the agents are told, as the runtime tells them of a
    /// failed broker watch) and deliver nothing until [`start_hub`](Self::start_hub).
    pub fn stop_hub(&mut self) {
        self.hub_up = false;
        for cluster in &mut self.clusters {
            cluster.core.unreachable(Side::Broker);
        }
    }

    /// Starts the hub's API server again: every agent's broker watches list again (their
    /// resource version expired meanwhile), so each agent sees what changed during the outage.
    pub fn start_hub(&mut self) {
        self.hub_up = true;
        let listing = self.broker_listing();
        for cluster in &mut self.clusters {
            cluster.inbox.extend(listing.iter().cloned());
        }
    }

    /// Stops cluster `i`'s API server: its agent's local writes fail with [`UNREACHABLE`] and
    /// its local watches fail (the agent is told) and deliver nothing until
    /// [`start_api`](Self::start_api).
    pub fn stop_api(&mut self, i: usize) {
        if let Some(cluster) = self.clusters.get_mut(i) {
            cluster.api_up = false;
            cluster.core.unreachable(Side::Member);
        }
    }

    /// Starts cluster `i`'s API server again: its agent's local watches list again.
    pub fn start_api(&mut self, i: usize) {
        if let Some(cluster) = self.clusters.get_mut(i) {
            cluster.api_up = true;
            let local = local_listing(&cluster.store);
            cluster.inbox.extend(local);
        }
    }

    fn next_version(&mut self) -> String {
        self.resource_version += 1;
        self.resource_version.to_string()
    }

    /// A user change in cluster `i`: stored, and delivered to its agent as a watch event.
    pub fn local_apply(&mut self, i: usize, input: Input) {
        let Some(cluster) = self.clusters.get_mut(i) else {
            return;
        };
        let s = &mut cluster.store;
        match &input {
            Input::Service(Event::Apply(o)) => {
                s.services.insert(ObjectId::of(o), o.clone());
            }
            Input::Service(Event::Delete(o)) => {
                s.services.remove(&ObjectId::of(o));
            }
            Input::ServiceExport(Event::Apply(o)) => {
                let id = ObjectId::of(o);
                let mut o = o.clone();
                o.status = s.exports.get(&id).and_then(|old| old.status.clone());
                s.exports.insert(id, o);
            }
            Input::ServiceExport(Event::Delete(o)) => {
                s.exports.remove(&ObjectId::of(o));
            }
            Input::LocalEndpointSlice(Event::Apply(o)) => {
                s.local_slices.insert(ObjectId::of(o), o.clone());
            }
            Input::LocalEndpointSlice(Event::Delete(o)) => {
                s.local_slices.remove(&ObjectId::of(o));
            }
            Input::Namespace(Event::Apply(o)) => {
                s.namespaces
                    .insert(o.metadata.name.clone().unwrap_or_default(), o.clone());
            }
            Input::Namespace(Event::Delete(o)) => {
                let name = o.metadata.name.clone().unwrap_or_default();
                s.namespaces.remove(&name);
                // Deleting a namespace deletes what is in it.
                let gone: Vec<Input> = s
                    .imports
                    .values()
                    .filter(|i| i.metadata.namespace.as_deref() == Some(&name))
                    .map(|i| Input::ServiceImport(Event::Delete(i.clone())))
                    .chain(
                        s.imported_slices
                            .values()
                            .filter(|i| i.metadata.namespace.as_deref() == Some(&name))
                            .map(|i| Input::ImportedEndpointSlice(Event::Delete(i.clone()))),
                    )
                    .collect();
                s.imports.retain(|id, _| id.namespace != name);
                s.imported_slices.retain(|id, _| id.namespace != name);
                cluster.inbox.extend(gone);
            }
            _ => {}
        }
        let input = match input {
            Input::ServiceExport(Event::Apply(o)) => {
                let id = ObjectId::of(&o);
                Input::ServiceExport(Event::Apply(s.exports.get(&id).cloned().unwrap_or(o)))
            }
            other => other,
        };
        cluster.inbox.push_back(input);
    }

    /// Exports `key` from cluster `i` (Service, slice and ServiceExport created now).
    pub fn export(&mut self, i: usize, key: &ServiceKey, ports: &[i32]) {
        let ip = format!("10.96.{}.{}", (i / 250) % 250, i % 250 + 1);
        self.local_apply(i, Input::Service(Event::Apply(service(key, &ip, ports))));
        self.local_apply(
            i,
            Input::LocalEndpointSlice(Event::Apply(endpoint_slice(key, &["10.244.0.10"], ports))),
        );
        let export = service_export(key, self.now);
        self.local_apply(i, Input::ServiceExport(Event::Apply(export)));
    }

    /// Renews the heartbeat of every cluster that heartbeats; returns how many Leases were
    /// written. While the hub is stopped every heartbeat fails, and the agent is told so (as the
    /// runtime tells it); a heartbeat the hub answers tells the agent that the broker answers.
    pub fn heartbeat_all(&mut self) -> usize {
        let mut written = 0;
        for i in 0..self.clusters.len() {
            if !self.clusters[i].heartbeating {
                continue;
            }
            let Some(heartbeat) = self.clusters[i].core.heartbeat(self.now) else {
                continue;
            };
            // The request is what the agent sends (POST or PUT), whatever the hub holds.
            let (lease, created) = match heartbeat {
                Heartbeat::Create(lease) => (*lease, true),
                Heartbeat::Replace(lease) => (*lease, false),
                Heartbeat::Blocked { .. } => continue,
            };
            if !self.hub_up {
                self.clusters[i].core.unreachable(Side::Broker);
                continue;
            }
            self.clusters[i].core.answered(Side::Broker);
            let mut lease = lease;
            let name = lease.metadata.name.clone().unwrap_or_default();
            let verb = if created { "create" } else { "update" };
            let namespace = lease.metadata.namespace.clone().unwrap_or_default();
            if let Some(message) = self.lease_forbidden(i, verb, &namespace, &name) {
                // 403: not stored; the agent logs it and tries again at the next heartbeat.
                let cluster = &self.clusters[i].core.config().cluster_id;
                self.refused.push(format!("{cluster}: {message}"));
                continue;
            }
            match self.leases.get(&name) {
                // 409 AlreadyExists (a create), or someone else changed it meanwhile (a replace).
                Some(stored)
                    if created
                        || stored.metadata.resource_version != lease.metadata.resource_version =>
                {
                    continue;
                }
                // 404: a replace of a Lease that does not exist.
                None if !created => continue,
                _ => {}
            }
            if let Some(message) = self.check(&lease) {
                // 422: not stored; the agent logs it and tries again at the next heartbeat.
                let cluster = &self.clusters[i].core.config().cluster_id;
                self.refused.push(format!("{cluster}: {message}"));
                continue;
            }
            lease.metadata.resource_version = Some(self.next_version());
            self.leases.insert(name, lease.clone());
            self.broadcast(|| Input::Lease(Event::Apply(lease.clone())));
            written += 1;
        }
        written
    }

    fn broadcast(&mut self, input: impl Fn() -> Input) {
        for cluster in &mut self.clusters {
            cluster.inbox.push_back(input());
        }
    }

    /// Advances the simulated time.
    pub fn advance(&mut self, by: Duration) {
        let by = SignedDuration::try_from(by).unwrap_or(SignedDuration::ZERO);
        self.now = self.now.checked_add(by).unwrap_or(self.now);
    }

    /// [`settle`](Self::settle), then fails if the simulated API servers have refused any write
    /// so far: every object the agents wrote passed the rules a real kube-apiserver applies.
    pub fn settle_accepted(&mut self, max_rounds: usize) -> Result<SettleStats, Refused> {
        let stats = self.settle(max_rounds);
        if self.refused.is_empty() {
            Ok(stats)
        } else {
            Err(Refused(self.refused.clone()))
        }
    }

    /// Delivers events and carries out writes until nothing is left to do, with heartbeats as
    /// needed; returns what it took. Stops after `max_rounds` rounds (a livelock is a bug the
    /// caller's assertions then show).
    pub fn settle(&mut self, max_rounds: usize) -> SettleStats {
        let mut stats = SettleStats::default();
        for round in 0..max_rounds {
            let mut busy = false;
            for i in 0..self.clusters.len() {
                let cluster = &mut self.clusters[i];
                // The first round visits every cluster (time may have moved); later ones only
                // those with something to do.
                if round > 0
                    && cluster.inbox.is_empty()
                    && cluster.core.dirty_count() == 0
                    && cluster.core.is_started()
                {
                    continue;
                }
                while let Some(input) = cluster.inbox.pop_front() {
                    stats.events += 1;
                    cluster.core.handle(input);
                }
                let output = cluster.core.process(self.now);
                stats.rounds += 1;
                stats.reconciled += output.reconciled;
                for write in output.writes {
                    busy = true;
                    stats.writes += 1;
                    self.carry_out(i, &write);
                }
            }
            if self.clusters.iter().any(|c| {
                c.core.is_started()
                    && *c.core.lease_state() != mcs_controller::core::LeaseState::Held
                    && c.heartbeating
            }) {
                busy |= self.heartbeat_all() > 0;
            }
            if !busy && self.clusters.iter().all(|c| c.inbox.is_empty()) {
                break;
            }
        }
        stats
    }

    /// Applies one write the way the API server would and delivers the resulting watch events.
    /// A write the API server would refuse (422) is not stored: the agent is told it failed and
    /// the refusal is kept in [`Simulation::refused`]. A write that leaves the stored object as
    /// it was succeeds without a watch event; a write to a stopped API server fails with
    /// [`UNREACHABLE`].
    fn carry_out(&mut self, i: usize, write: &Write) {
        let now = self.now;
        let up = if write.is_broker() {
            self.hub_up
        } else {
            self.clusters.get(i).is_some_and(|c| c.api_up)
        };
        if !up {
            self.failed(i, write, UNREACHABLE, false);
            return;
        }
        if let Write::PublishRecord(_) | Write::WithdrawRecord { .. } = write
            && let Target::Record(id) = write.target()
        {
            let verb = match write {
                Write::WithdrawRecord { .. } => "delete",
                _ => "patch",
            };
            if let Some(message) = self.record_forbidden(i, verb, &id.namespace, &id.name) {
                self.refuse(i, write, message);
                return;
            }
        }
        match write {
            Write::PublishRecord(record) => {
                let mut record = (**record).clone();
                let name = ObjectId::of(&record);
                let stored = self.records.get(&name);
                record.metadata.resource_version =
                    stored.and_then(|r| r.metadata.resource_version.clone());
                if stored == Some(&record) {
                    self.broker_answer(i, write);
                    return;
                }
                record.metadata.resource_version = Some(self.next_version());
                if let Some(message) = self.check(&record) {
                    self.refuse(i, write, message);
                    return;
                }
                self.records.insert(name, record.clone());
                self.broadcast(|| Input::Record(Event::Apply(record.clone())));
                self.broker_answer(i, write);
            }
            Write::WithdrawRecord {
                namespace, name, ..
            } => {
                if let Some(record) = self.records.remove(&ObjectId::new(namespace, name)) {
                    self.broadcast(|| Input::Record(Event::Delete(record.clone())));
                }
                self.broker_answer(i, write);
            }
            local => {
                let catalog = self.strict.then_some(&self.catalog);
                let Some(cluster) = self.clusters.get_mut(i) else {
                    return;
                };
                let s = &mut cluster.store;
                let result = match local {
                    Write::ApplyServiceImport(desired) => {
                        let id = ObjectId::of(desired.as_ref());
                        let old = s.imports.get(&id);
                        let mut stored = old.cloned().unwrap_or_else(|| {
                            let mut new = (**desired).clone();
                            new.metadata.creation_timestamp = Some(Time(now));
                            new.metadata.labels = None;
                            new.metadata.annotations = None;
                            new.status = None;
                            new
                        });
                        stored.spec = desired.spec.clone();
                        merge_maps(
                            &mut stored.metadata.labels,
                            desired.metadata.labels.as_ref(),
                        );
                        merge_maps(
                            &mut stored.metadata.annotations,
                            desired.metadata.annotations.as_ref(),
                        );
                        if old == Some(&stored) {
                            Answer::Unchanged
                        } else {
                            Answer::store(accepted(catalog, stored), |stored| {
                                s.imports.insert(id, stored.clone());
                                Input::ServiceImport(Event::Apply(stored))
                            })
                        }
                    }
                    Write::ApplyServiceImportStatus(desired) => {
                        let id = ObjectId::of(desired.as_ref());
                        match s.imports.get(&id) {
                            Some(old) if old.status == desired.status => Answer::Unchanged,
                            Some(old) => {
                                let mut stored = old.clone();
                                stored.status = desired.status.clone();
                                Answer::store(accepted(catalog, stored), |stored| {
                                    s.imports.insert(id, stored.clone());
                                    Input::ServiceImport(Event::Apply(stored))
                                })
                            }
                            None => Answer::NotFound, // 404 on the status subresource
                        }
                    }
                    Write::DeleteServiceImport(key) => match s
                        .imports
                        .remove(&ObjectId::new(&key.namespace, &key.name))
                    {
                        Some(o) => Answer::Stored(Box::new(Input::ServiceImport(Event::Delete(o)))),
                        None => Answer::Unchanged, // 404 on a delete: done
                    },
                    Write::ApplyEndpointSlice(desired) => {
                        let id = ObjectId::of(desired.as_ref());
                        if s.imported_slices.get(&id) == Some(desired.as_ref()) {
                            Answer::Unchanged
                        } else {
                            Answer::store(accepted(catalog, (**desired).clone()), |slice| {
                                s.imported_slices.insert(id, slice.clone());
                                Input::ImportedEndpointSlice(Event::Apply(slice))
                            })
                        }
                    }
                    Write::DeleteEndpointSlice { key, name } => match s
                        .imported_slices
                        .remove(&ObjectId::new(&key.namespace, name))
                    {
                        Some(o) => {
                            Answer::Stored(Box::new(Input::ImportedEndpointSlice(Event::Delete(o))))
                        }
                        None => Answer::Unchanged, // 404 on a delete: done
                    },
                    Write::ApplyDerivedService(desired) => {
                        let id = ObjectId::of(desired.as_ref());
                        let old = s.services.get(&id);
                        // The API server keeps what it defaulted (the cluster IP) and what
                        // other managers set; ours are the spec fields and labels we send.
                        let mut stored = old.cloned().unwrap_or_else(|| {
                            let mut new = (**desired).clone();
                            // The API server's uid of the new object.
                            new.metadata.uid = Some(format!("uid-{}/{}", id.namespace, id.name));
                            new
                        });
                        merge_maps(
                            &mut stored.metadata.labels,
                            desired.metadata.labels.as_ref(),
                        );
                        if let (Some(stored_spec), Some(spec)) =
                            (stored.spec.as_mut(), desired.spec.as_ref())
                        {
                            stored_spec.type_ = spec.type_.clone();
                            stored_spec.ports = spec.ports.clone();
                            stored_spec.external_ips = spec.external_ips.clone();
                            stored_spec.session_affinity = spec.session_affinity.clone();
                            stored_spec.session_affinity_config =
                                spec.session_affinity_config.clone();
                        }
                        if old == Some(&stored) {
                            Answer::Unchanged
                        } else {
                            Answer::store(accepted(catalog, stored), |stored| {
                                s.services.insert(id, stored.clone());
                                Input::Service(Event::Apply(stored))
                            })
                        }
                    }
                    Write::DeleteDerivedService { key, name, uid } => {
                        let id = ObjectId::new(&key.namespace, name);
                        match s.services.get(&id) {
                            // Another object under the name (409 on the uid precondition): done.
                            Some(o) if o.metadata.uid.as_deref().is_some_and(|u| u != uid) => {
                                Answer::Unchanged
                            }
                            Some(_) => match s.services.remove(&id) {
                                Some(o) => {
                                    Answer::Stored(Box::new(Input::Service(Event::Delete(o))))
                                }
                                None => Answer::Unchanged,
                            },
                            None => Answer::Unchanged, // 404 on a delete: done
                        }
                    }
                    Write::ApplyServiceExportStatus { key, status } => {
                        let id = ObjectId::new(&key.namespace, &key.name);
                        match s.exports.get(&id) {
                            Some(old) if old.status.as_ref() == Some(status) => Answer::Unchanged,
                            Some(old) => {
                                let mut stored = old.clone();
                                stored.status = Some(status.clone());
                                Answer::store(accepted(catalog, stored), |stored| {
                                    s.exports.insert(id, stored.clone());
                                    Input::ServiceExport(Event::Apply(stored))
                                })
                            }
                            None => Answer::NotFound,
                        }
                    }
                    Write::PublishRecord(_) | Write::WithdrawRecord { .. } => Answer::NotFound,
                };
                match result {
                    Answer::Stored(event) => self.succeeded(i, local, Some(*event)),
                    Answer::Unchanged => self.succeeded(i, local, None),
                    Answer::NotFound => self.failed(i, local, "not found (404)", true),
                    Answer::Refused(message) => self.refuse(i, write, message),
                }
            }
        }
    }

    /// A write carried out: counted, reported to the agent, and its watch event (if the stored
    /// object changed) delivered.
    fn succeeded(&mut self, i: usize, write: &Write, event: Option<Input>) {
        let Some(cluster) = self.clusters.get_mut(i) else {
            return;
        };
        *cluster.writes.entry(write.kind()).or_default() += 1;
        cluster.core.write_succeeded(write);
        cluster.inbox.extend(event);
    }

    /// A broker write carried out: the agent hears so, unless the hub's answers are lost.
    fn broker_answer(&mut self, i: usize, write: &Write) {
        if self.hub_answers_lost {
            self.failed(i, write, UNREACHABLE, false);
        } else {
            self.succeeded(i, write, None);
        }
    }

    /// A write that failed with `message`: counted and reported to the agent, as refused if
    /// the API server `answered` (a status below 500), else as failed without an answer.
    fn failed(&mut self, i: usize, write: &Write, message: &str, answered: bool) {
        let now = self.now;
        let Some(cluster) = self.clusters.get_mut(i) else {
            return;
        };
        *cluster.failed_writes.entry(write.kind()).or_default() += 1;
        if answered {
            cluster.core.write_refused(write, message, now);
        } else {
            cluster.core.write_failed(write, message, now);
        }
    }

    /// The 403 message with which the hub refuses cluster `i`'s `verb` of the record
    /// `namespace/name`, as the RBAC of `clusterset-agent hub-manifests` does: records only in
    /// the cluster's own records namespace, and in the shared broker namespace while
    /// [`Simulation::shared_records_writable`].
    fn record_forbidden(
        &self,
        i: usize,
        verb: &str,
        namespace: &str,
        name: &str,
    ) -> Option<String> {
        let config = self.clusters.get(i)?.core.config();
        let broker = config.broker_namespace.as_str();
        let allowed = namespace == records_namespace(broker, &config.cluster_id)
            || (namespace == broker && self.shared_records_writable);
        (!allowed).then(|| forbidden_message(config, verb, (GROUP, PLURAL), namespace, name))
    }

    /// The 403 message with which the hub refuses cluster `i`'s `verb` of the Lease `name`:
    /// a cluster may update only its own Lease and create none (the hub manifests create them).
    fn lease_forbidden(&self, i: usize, verb: &str, namespace: &str, name: &str) -> Option<String> {
        let config = self.clusters.get(i)?.core.config();
        let allowed = verb != "create" && name == broker::lease_name(&config.cluster_id);
        let name = if verb == "create" { "" } else { name };
        (!allowed).then(|| {
            forbidden_message(
                config,
                verb,
                ("coordination.k8s.io", "leases"),
                namespace,
                name,
            )
        })
    }

    /// The record of `cluster`'s export of `key` in that cluster's records namespace.
    pub fn record(&self, cluster: &ClusterId, key: &ServiceKey) -> Option<&BrokerRecord> {
        let config = self.clusters.first()?.core.config();
        self.records.get(&ObjectId::new(
            &records_namespace(&config.broker_namespace, cluster),
            &broker::record_name(cluster, key),
        ))
    }

    /// The 422 message that refuses `object`, if the simulation is strict.
    fn check(&self, object: &impl serde::Serialize) -> Option<String> {
        self.strict
            .then(|| refusal(&self.catalog, object))
            .flatten()
    }

    /// A write refused with 422 `message`: kept in [`Simulation::refused`] and reported to the
    /// agent as failed, as the real writer reports the API server's answer.
    fn refuse(&mut self, i: usize, write: &Write, message: String) {
        let Some(cluster) = self.clusters.get(i) else {
            return;
        };
        let id = cluster.core.config().cluster_id.to_string();
        self.refused.push(format!("{id}: {message}"));
        self.failed(i, write, &message, true);
    }

    /// Cluster `i`'s stored ServiceImport of `key`.
    pub fn import(&self, i: usize, key: &ServiceKey) -> Option<&ServiceImport> {
        self.clusters
            .get(i)?
            .store
            .imports
            .get(&ObjectId::new(&key.namespace, &key.name))
    }

    /// Cluster `i`'s stored ServiceExport of `key`.
    pub fn export_of(&self, i: usize, key: &ServiceKey) -> Option<&ServiceExport> {
        self.clusters
            .get(i)?
            .store
            .exports
            .get(&ObjectId::new(&key.namespace, &key.name))
    }

    /// Cluster `i`'s imported EndpointSlices of `key`.
    pub fn imported_slices(&self, i: usize, key: &ServiceKey) -> Vec<&EndpointSlice> {
        self.clusters.get(i).map_or_else(Vec::new, |c| {
            c.store
                .imported_slices
                .values()
                .filter(|s| {
                    s.metadata.namespace.as_deref() == Some(key.namespace.as_str())
                        && s.metadata
                            .labels
                            .as_ref()
                            .and_then(|l| l.get(mcs_types::labels::SERVICE_NAME_LABEL))
                            == Some(&key.name)
                })
                .collect()
        })
    }
}

#[cfg(test)]
mod tests {
    use mcs_types::labels::ENDPOINTSLICE_MANAGED_BY_LABEL;

    use super::*;

    #[test]
    fn an_imported_slice_with_the_old_managed_by_value_is_refused_with_422_and_not_stored() {
        let start = Timestamp::from_second(1_800_000_000).unwrap();
        let mut sim = Simulation::new(2, &["shop"], start, None).unwrap();
        sim.start_all();
        sim.settle(100);
        let web = ServiceKey::new("shop", "web");
        sim.export(0, &web, &[80]);
        sim.settle(100);
        assert!(sim.refused.is_empty(), "{:#?}", sim.refused);

        // The agent's own slice, but labelled as before the fix (a `/` in a label value).
        let mut slice = sim.imported_slices(1, &web)[0].clone();
        slice.metadata.name = Some("web-old".into());
        slice.metadata.labels.get_or_insert_default().insert(
            ENDPOINTSLICE_MANAGED_BY_LABEL.into(),
            "clusterset.io/mcs-controller".into(),
        );
        sim.carry_out(1, &Write::ApplyEndpointSlice(Box::new(slice)));
        assert_eq!(sim.refused.len(), 1, "{:#?}", sim.refused);
        let expected = "c1: EndpointSlice.discovery.k8s.io \"web-old\" is invalid: metadata.labels: Invalid value: \"clusterset.io/mcs-controller\"";
        assert!(sim.refused[0].starts_with(expected), "{}", sim.refused[0]);
        assert!(
            !sim.clusters[1]
                .store
                .imported_slices
                .contains_key(&ObjectId::new("shop", "web-old")),
            "a refused write is not stored"
        );
    }
}

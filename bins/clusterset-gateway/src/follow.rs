//! `clusterset-gateway run` with the cluster flags: the state from the API servers. Three
//! watches (this cluster's Services' EndpointSlices; on the hub, this cluster's export records
//! and every gateway record) fill reflector stores; once all three have listed, and after each
//! change (at most every [`SETTLE`]), `gateway_rules::cluster::gateway_state` computes the
//! state and, if it changed, it is applied (a delta when possible). This gateway's own
//! `GatewayRecord` is published on the hub and published again whenever the stored one is not
//! it. A hub or API server that goes away leaves the rules as they are: the stores keep what
//! they last saw, and nothing is applied from a store that has not listed.

use std::net::{Ipv4Addr, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use anyhow::{Context, Result, bail};
use clusterset_daemon::apply::Ownership;
use clusterset_daemon::kubeconfig::{self, FlagNames, KubeconfigArgs};
use clusterset_daemon::watch::WatchBackoff;
use clusterset_daemon::{Endpoints, ErrorChain, MetricsText, ReadinessCheck};
use futures::StreamExt;
use gateway_rules::RuleSet;
use gateway_rules::cluster::{ClusterNetworks, ClusterObjects, gateway_state};
use ipnet::Ipv4Net;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Api, Client};
use mcs_controller::broker::{BrokerRecord, GatewayRecord, records_namespace};
use mcs_types::ClusterId;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::registry::Registry;

use crate::apply::{self, Applied};

/// How long changes are gathered before the state is computed again: a burst of watch events
/// (a rollout, a relist) costs one transaction.
const SETTLE: Duration = Duration::from_millis(100);
/// How often a failed apply or publication is tried again.
const RETRY: Duration = Duration::from_secs(2);
/// How long a gateway whose record another gateway of its cluster rewrote waits before it
/// writes its own again.
const CONFLICT_BACKOFF: Duration = Duration::from_secs(30);
/// The field manager of the gateway record.
const MANAGER: &str = "clusterset-gateway";

/// The flags of `run` without `--state`: where the clusterset's state is and what no object of
/// it says. Each has an environment variable, as the chart sets them.
#[derive(Debug, Clone, clap::Args)]
pub struct ClusterArgs {
    /// This cluster (its EndpointSlices): `--kubeconfig`, `--context`; in a pod, its service
    /// account.
    #[command(flatten)]
    pub cluster: KubeconfigArgs,
    /// The hub cluster's kubeconfig (the cluster's broker credentials, as the agent's).
    #[arg(long, env = "CLUSTERSET_BROKER_KUBECONFIG", value_name = "FILE")]
    pub broker_kubeconfig: Option<std::path::PathBuf>,
    /// The hub kubeconfig's context (default: its current-context).
    #[arg(long, env = "CLUSTERSET_BROKER_CONTEXT", value_name = "NAME")]
    pub broker_context: Option<String>,
    /// The broker namespace on the hub (this cluster's records are in `<it>-<cluster id>`).
    #[arg(
        long,
        env = "CLUSTERSET_BROKER_NAMESPACE",
        default_value = "clusterset-broker"
    )]
    pub broker_namespace: String,
    /// This cluster's id (the agent's `--cluster-id`).
    #[arg(long, env = "CLUSTERSET_CLUSTER_ID")]
    pub cluster_id: Option<String>,
    /// The clusterset's global range, the same on every gateway: every cluster's global CIDR
    /// is inside it, and a peer that publishes one outside it is not routed.
    #[arg(long, env = "CLUSTERSET_GLOBAL_RANGE", default_value = "242.0.0.0/8")]
    pub global_range: Ipv4Net,
    /// This cluster's IPv4 global CIDR (the agent's `--global-cidr`).
    #[arg(long, env = "CLUSTERSET_GLOBAL_CIDR")]
    pub global_cidr: Option<Ipv4Net>,
    /// This cluster's pod CIDR.
    #[arg(long, env = "CLUSTERSET_POD_CIDR")]
    pub pod_cidr: Option<Ipv4Net>,
    /// This cluster's service CIDR.
    #[arg(long, env = "CLUSTERSET_SERVICE_CIDR")]
    pub service_cidr: Option<Ipv4Net>,
    /// The cluster's egress IPs, from its global CIDR and given to no export (the agent's
    /// allocations start at the bottom of the CIDR: take these from its top).
    #[arg(
        long = "egress-ip",
        env = "CLUSTERSET_EGRESS_IPS",
        value_delimiter = ','
    )]
    pub egress_ips: Vec<Ipv4Addr>,
    /// This gateway's address on the network between the gateways (published for the peers'
    /// routes).
    #[arg(long, env = "CLUSTERSET_GATEWAY_IP")]
    pub gateway_ip: Option<Ipv4Addr>,
    /// Address of the HTTP server for /metrics, /healthz and /readyz.
    #[arg(long, env = "CLUSTERSET_HTTP_LISTEN", default_value = "0.0.0.0:9092")]
    pub http_listen: SocketAddr,
}

impl ClusterArgs {
    /// The cluster's networks, or every flag that is missing (named, with the fix).
    pub fn networks(&self) -> Result<ClusterNetworks> {
        let mut missing = Vec::new();
        if self.broker_kubeconfig.is_none() {
            missing.push("--broker-kubeconfig");
        }
        if self.cluster_id.is_none() {
            missing.push("--cluster-id");
        }
        if self.global_cidr.is_none() {
            missing.push("--global-cidr");
        }
        if self.pod_cidr.is_none() {
            missing.push("--pod-cidr");
        }
        if self.service_cidr.is_none() {
            missing.push("--service-cidr");
        }
        if self.egress_ips.is_empty() {
            missing.push("--egress-ip");
        }
        if self.gateway_ip.is_none() {
            missing.push("--gateway-ip");
        }
        match (
            &self.cluster_id,
            self.global_cidr,
            self.pod_cidr,
            self.service_cidr,
            self.gateway_ip,
        ) {
            (Some(id), Some(global_cidr), Some(pod_cidr), Some(service_cidr), Some(gateway_ip))
                if missing.is_empty() =>
            {
                if !self.global_range.contains(&global_cidr) {
                    bail!(
                        "--global-cidr {global_cidr} is outside --global-range {}: every cluster's global CIDR must be inside the clusterset's global range (the peers would not route to it); fix one of the two",
                        self.global_range
                    );
                }
                Ok(ClusterNetworks {
                    global_range: self.global_range,
                    cluster_id: ClusterId::new(id)
                        .with_context(|| format!("--cluster-id {id:?}"))?,
                    global_cidr,
                    pod_cidr,
                    service_cidr,
                    egress_ips: self.egress_ips.clone(),
                    gateway_ip,
                })
            }
            _ => bail!(
                "run needs --state FILE (offline mode) or the cluster flags; missing: {} (see docs/data-plane.md)",
                missing.join(", ")
            ),
        }
    }
}

/// The gateway's metrics (`clusterset_gateway_*`).
#[derive(Debug, Default)]
struct Metrics {
    registry: Registry,
    applies: Family<Vec<(String, String)>, Counter>,
    exports: Gauge,
    peers: Gauge,
    skipped: Gauge,
    watch_errors: Family<Vec<(String, String)>, Counter>,
    ready: AtomicBool,
}

impl Metrics {
    fn new() -> Self {
        let mut metrics = Self::default();
        let mut registry = Registry::with_prefix("clusterset_gateway");
        registry.register(
            "applies",
            "Rule sets applied, by result (replaced, delta, unchanged, failed)",
            metrics.applies.clone(),
        );
        registry.register(
            "exports",
            "Exports in the rule set in place",
            metrics.exports.clone(),
        );
        registry.register(
            "peers",
            "Peers routed by the rule set in place",
            metrics.peers.clone(),
        );
        registry.register(
            "skipped_objects",
            "Objects left out of the last state computed (logged with their reasons)",
            metrics.skipped.clone(),
        );
        registry.register(
            "watch_errors",
            "Failed watches, by watch",
            metrics.watch_errors.clone(),
        );
        metrics.registry = registry;
        metrics
    }

    fn applied(&self, result: &str) {
        self.applies
            .get_or_create(&vec![("result".to_owned(), result.to_owned())])
            .inc();
    }
}

impl MetricsText for Metrics {
    fn metrics_text(&self) -> String {
        clusterset_daemon::encode_metrics(&self.registry)
    }
}

impl ReadinessCheck for Metrics {
    fn readiness(&self) -> Result<(), String> {
        if self.ready.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err("the watches have not all listed, or the first rule set is not applied".into())
        }
    }
}

/// A store filled by its watch, and the stream that fills it (yielding `()` per change).
fn reflect<K>(
    api: Api<K>,
    config: watcher::Config,
    name: &'static str,
    metrics: Arc<Metrics>,
) -> (Store<K>, futures::stream::BoxStream<'static, ()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + for<'de> k8s_openapi::serde::Deserialize<'de>
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let (store, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config))
        .backoff(WatchBackoff::default())
        .map(move |result| {
            if let Err(error) = result {
                metrics
                    .watch_errors
                    .get_or_create(&vec![("watch".to_owned(), name.to_owned())])
                    .inc();
                tracing::warn!(watch = name, error = %ErrorChain(&error), "watch failed; the rules stay as they are");
            }
        })
        .boxed();
    (store, stream)
}

/// Clients of the member cluster (`--kubeconfig`, `--context`) and of the hub
/// (`--broker-kubeconfig`, `--broker-context`), by kubectl's rules.
async fn clients(args: &ClusterArgs) -> Result<(Client, Client)> {
    let local = args
        .cluster
        .connect()
        .await
        .context("cannot reach the member cluster")?
        .client;
    let hub = kubeconfig::connect(
        args.broker_kubeconfig.as_deref(),
        args.broker_context.as_deref(),
        &FlagNames::BROKER,
    )
    .await
    .context("cannot reach the hub cluster")?
    .client;
    Ok((local, hub))
}

/// Runs the gateway from the API servers until SIGTERM (the rules stay in place).
pub async fn run(args: &ClusterArgs) -> Result<()> {
    let networks = args.networks()?;
    let (local, hub) = clients(args).await?;
    let metrics = Arc::new(Metrics::new());
    let (bound, _server) = Endpoints::new(metrics.clone(), metrics.clone())
        .listen(args.http_listen)
        .await
        .with_context(|| format!("binding --http-listen {}", args.http_listen))?;
    tracing::debug!(%bound, "serving /metrics, /healthz, /readyz");

    let own_namespace = records_namespace(&args.broker_namespace, &networks.cluster_id);
    let (slices, slice_events) = reflect(
        Api::<EndpointSlice>::all(local.clone()),
        watcher::Config::default().labels(&mcs_controller::watch::local_slices_selector()),
        "endpointslices",
        metrics.clone(),
    );
    let (records, record_events) = reflect(
        Api::<BrokerRecord>::namespaced(hub.clone(), &own_namespace),
        watcher::Config::default(),
        "exportrecords",
        metrics.clone(),
    );
    let (gateways, gateway_events) = reflect(
        Api::<GatewayRecord>::all(hub.clone()),
        watcher::Config::default(),
        "gatewayrecords",
        metrics.clone(),
    );
    let mut events = futures::stream::select_all([slice_events, record_events, gateway_events]);
    let synced = {
        let (slices, records, gateways) = (slices.clone(), records.clone(), gateways.clone());
        async move {
            let _ = futures::join!(
                slices.wait_until_ready(),
                records.wait_until_ready(),
                gateways.wait_until_ready()
            );
        }
    };
    tokio::pin!(synced);
    let mut is_synced = false;
    let mut follower = Follower {
        networks,
        broker_namespace: args.broker_namespace.clone(),
        hub,
        metrics: metrics.clone(),
        applied: None,
        computed: None,
        published: false,
        publish_blocked_until: None,
        apply_blocked_until: None,
        peers_left_out: false,
    };
    let mut dirty = true;
    let mut tick = tokio::time::interval(SETTLE);
    let mut routes_tick = tokio::time::interval(apply::ROUTES_RESYNC);
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            () = &mut synced, if !is_synced => {
                is_synced = true;
                tracing::info!("every watch has listed");
            }
            Some(()) = events.next() => dirty = true,
            _ = routes_tick.tick() => {
                apply::resync_routes(follower.applied.as_ref());
                // An unreachable peer may be reachable now; a record not stored is tried again.
                dirty |= follower.peers_left_out || !follower.published;
            }
            _ = tick.tick() => {
                let now = tokio::time::Instant::now();
                if is_synced && dirty && follower.apply_blocked_until.is_none_or(|t| now >= t) {
                    dirty = !follower.step(&slices, &records, &gateways).await;
                }
            }
        }
    }
    tracing::info!(
        "stopping; the rules stay in place so established connections survive a restart"
    );
    Ok(())
}

/// What the loop keeps between steps.
struct Follower {
    networks: ClusterNetworks,
    broker_namespace: String,
    hub: Client,
    metrics: Arc<Metrics>,
    /// The rule set in place (what this process applied last).
    applied: Option<RuleSet>,
    /// The state last computed (its problems logged once).
    computed: Option<gateway_rules::GatewayState>,
    /// Whether this process has stored its gateway record (and, once the watch shows it, that
    /// the stored one is ours).
    published: bool,
    /// No publication before this (after a failure, or another gateway of this cluster).
    publish_blocked_until: Option<tokio::time::Instant>,
    /// No apply before this (after a failed one).
    apply_blocked_until: Option<tokio::time::Instant>,
    /// Whether a peer was left out as unreachable (checked again on the routes' tick).
    peers_left_out: bool,
}

impl Follower {
    /// Publishes this gateway's record if needed, computes the state and applies it if it
    /// changed. Whether the rules are done (else the step is tried again after [`RETRY`]); the
    /// publication is tried again on its own schedule.
    async fn step(
        &mut self,
        slices: &Store<EndpointSlice>,
        records: &Store<BrokerRecord>,
        gateways: &Store<GatewayRecord>,
    ) -> bool {
        let (slices, records, gateways) = (slices.state(), records.state(), gateways.state());
        self.publish(&gateways).await;
        let slices: Vec<&EndpointSlice> = slices.iter().map(AsRef::as_ref).collect();
        let records: Vec<&BrokerRecord> = records.iter().map(AsRef::as_ref).collect();
        let gateways: Vec<&GatewayRecord> = gateways.iter().map(AsRef::as_ref).collect();
        let mut assembled = gateway_state(
            &self.networks,
            ClusterObjects {
                broker_namespace: &self.broker_namespace,
                own_records: &records,
                local_slices: &slices,
                gateways: &gateways,
            },
        );
        self.peers_left_out = keep_reachable_peers(&mut assembled.state.peers);
        if self.computed.as_ref() == Some(&assembled.state) && self.applied.is_some() {
            return true;
        }
        for skipped in &assembled.skipped {
            tracing::warn!(reason = %skipped, "object left out of the rules");
        }
        self.metrics
            .skipped
            .set(i64::try_from(assembled.skipped.len()).unwrap_or(i64::MAX));
        let rules = match RuleSet::desired(&assembled.state) {
            Ok(rules) => rules,
            Err(error) => {
                tracing::error!(error = %ErrorChain(&error), "the clusterset's state is invalid; keeping the rules in place");
                self.metrics.applied("failed");
                self.computed = Some(assembled.state);
                return true;
            }
        };
        let previous = self.applied.clone();
        let to_apply = rules.clone();
        let outcome =
            tokio::task::spawn_blocking(move || apply::apply(&to_apply, previous.as_ref())).await;
        match outcome {
            Ok(Ok(how)) => {
                self.metrics.applied(match how {
                    Applied::Replaced => "replaced",
                    Applied::Delta(_) => "delta",
                    Applied::Unchanged => "unchanged",
                });
                self.metrics
                    .exports
                    .set(i64::try_from(assembled.state.exports.len()).unwrap_or(i64::MAX));
                self.metrics
                    .peers
                    .set(i64::try_from(assembled.state.peers.len()).unwrap_or(i64::MAX));
                tracing::info!(
                    ?how,
                    exports = assembled.state.exports.len(),
                    peers = assembled.state.peers.len(),
                    rules = rules.rule_count(),
                    elements = rules.element_count(),
                    "applied"
                );
                self.applied = Some(rules);
                self.computed = Some(assembled.state);
                self.metrics.ready.store(true, Ordering::Relaxed);
                true
            }
            Ok(Err(error)) => {
                tracing::error!(
                    error = format!("{error:#}"),
                    "applying failed; keeping the last good rules"
                );
                self.metrics.applied("failed");
                self.apply_blocked_until = Some(tokio::time::Instant::now() + RETRY);
                false
            }
            Err(error) => {
                tracing::error!(error = %error, "the apply task failed; keeping the last good rules");
                self.metrics.applied("failed");
                self.apply_blocked_until = Some(tokio::time::Instant::now() + RETRY);
                false
            }
        }
    }

    /// Publishes this gateway's record unless the stored one is it.
    async fn publish(&mut self, stored: &[Arc<GatewayRecord>]) {
        let spec = self.networks.gateway_spec();
        let stored_spec = stored
            .iter()
            .filter_map(|record| record.checked_spec(&self.broker_namespace).ok())
            .find(|s| s.cluster_id == spec.cluster_id);
        if stored_spec.as_ref() == Some(&spec) {
            return;
        }
        let now = tokio::time::Instant::now();
        if self.publish_blocked_until.is_some_and(|t| now < t) {
            return;
        }
        if let Some(other) = stored_spec.filter(|_| self.published) {
            // Ours was stored, and something rewrote it: another gateway of this cluster (two
            // labelled nodes) or a stale one. Say so, and do not fight it at every change.
            tracing::error!(
                cluster = %spec.cluster_id,
                ours = %spec.gateway_ip,
                theirs = %other.gateway_ip,
                theirs_cidr = %other.global_cidr,
                "this cluster's gateway record was rewritten with another gateway: is another node labelled as this cluster's gateway? Label exactly one; writing ours again in 30 s"
            );
            self.publish_blocked_until = Some(now + CONFLICT_BACKOFF);
            self.published = false;
            return;
        }
        let record = GatewayRecord::new(&spec, &self.broker_namespace);
        match clusterset_daemon::apply::apply(
            &self.hub,
            MANAGER,
            Ownership::Force,
            &record,
            "clusterset-gateway",
        )
        .await
        {
            Ok(_) => {
                tracing::info!(cluster = %spec.cluster_id, global_cidr = %spec.global_cidr, gateway = %spec.gateway_ip, "gateway record published");
                self.published = true;
                self.publish_blocked_until = None;
            }
            Err(error) => {
                self.publish_blocked_until = Some(now + RETRY);
                tracing::error!(error = %ErrorChain(&error), "publishing the gateway record failed; the peers cannot route to this cluster until it is stored");
            }
        }
    }
}

/// Leaves out the peers whose gateway this node cannot reach directly (they would make the
/// whole transaction fail), logging each, so that the others are served; a peer whose route is
/// in place already was reachable when it was written. Whether any was left out.
fn keep_reachable_peers(peers: &mut Vec<gateway_rules::Peer>) -> bool {
    let routed = apply::our_routes().unwrap_or_else(|error| {
        tracing::warn!(
            error = format!("{error:#}"),
            "listing our routes failed; checking every peer"
        );
        Vec::new()
    });
    let before = peers.len();
    peers.retain(|peer| {
        if routed.contains(&(peer.global_cidr, Some(peer.gateway))) {
            return true;
        }
        match apply::check_direct(peer.gateway, &peer.global_cidr.to_string()) {
            Ok(()) => true,
            Err(error) => {
                tracing::error!(peer = %peer.cluster_id, error = format!("{error:#}"), "peer left out");
                false
            }
        }
    });
    peers.len() < before
}

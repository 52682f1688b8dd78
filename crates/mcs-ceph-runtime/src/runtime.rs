//! The running operator: MCS API discovery, one reflector watch per resource kind, and the
//! kube-runtime applier, started only once every cache has synced. Any change of an object in
//! a namespace queues the CephClusters of that namespace; the applier never runs two
//! reconciles of one cluster at once and merges queued requests.
//!
//! With leader election ([`run_with_election`]) every replica watches and keeps its caches
//! warm, but only the holder of the Lease runs the applier; a leader that stops leading makes
//! [`run_with_election`] return [`RunError::LeadershipLost`] at once, so the process exits and
//! Kubernetes restarts it as a follower.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use futures::channel::mpsc;
use futures::{Stream, StreamExt, future, stream};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use kube::runtime::reflector::{self, ObjectRef, Store};
use kube::runtime::{WatchStreamExt, applier, controller, watcher};
use kube::{Api, Client, Resource, ResourceExt};
use mcs_types::{v1alpha1, v1beta1};
use serde::de::DeserializeOwned;

use crate::kube_io::{Caches, ClusterApi, McsStores, discover_mcs_api};
use crate::metrics::Metrics;
use crate::mon_migration::{AdminSource, MonMigration};
use crate::readiness::Readiness;
use crate::reconciler::{self, Context, LookupMemories};
use clusterset_daemon::lease::{Elector, Leadership, LeaseSettings};
use clusterset_daemon::watch::WatchBackoff;
use clusterset_daemon::{Clock, Endpoints, ErrorChain};
use clusterset_dns::ClustersetResolver;
use mcs_ceph_api::{CephCluster, CephClusterAddressing};
use mcs_ceph_core::config::Config;
use mcs_ceph_core::snapshot::{McsApi, McsVersion};

/// What [`run`] needs besides the client.
pub struct RunOptions {
    /// The operator's configuration.
    pub config: Config,
    /// Writes and Events.
    pub api: Arc<dyn ClusterApi>,
    /// Global IP lookups.
    pub resolver: Arc<dyn ClustersetResolver>,
    /// Address of `/metrics`, `/healthz`, `/readyz`.
    pub listen: SocketAddr,
    /// Lookups in flight at once.
    pub lookup_concurrency: usize,
    /// CephClusters reconciled at once.
    pub reconcile_concurrency: u16,
    /// How long a cluster's queued reconcile waits for further changes, the wait starting
    /// again with each (kube-runtime's trailing-edge debounce: a burst of watch events becomes
    /// one reconcile). Zero: reconcile as soon as something changed, so that the next failure
    /// domain is written as soon as the previous one has rolled out; a debounce longer than
    /// the gap between a rollout's events would hold its reconcile back until the rollout ends.
    pub debounce: std::time::Duration,
    /// How often to ask again which MCS API is served; when the answer changes, [`run`] returns
    /// [`RunError::McsApiChanged`] so that the restarted operator watches what is served now.
    /// `None`: never.
    pub rediscover_every: Option<std::time::Duration>,
    /// Replace mons (`--mon-migration`) of the CephClusters that opt in with the annotation
    /// [`MIGRATION_ANNOTATION`](crate::mon_migration::MIGRATION_ANNOTATION), with the `ceph`
    /// CLI and the admin key of Rook's Secret. Off: mons are never replaced.
    pub mon_migration: bool,
    /// Watch (and so reconcile) only this namespace's CephClusters and objects, with a Role
    /// there instead of a ClusterRole; `None`: every namespace.
    pub watch_namespace: Option<String>,
}

impl std::fmt::Debug for RunOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RunOptions")
            .field("config", &self.config)
            .field("listen", &self.listen)
            .finish_non_exhaustive()
    }
}

/// Why the operator stopped.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// API discovery failed.
    #[error(
        "cannot ask the API server which MCS API it serves (is the kubeconfig or the service account right?)"
    )]
    Discovery(#[source] kube::Error),
    /// The HTTP port cannot be bound.
    #[error("cannot listen on {address} for /metrics, /healthz and /readyz")]
    Listen {
        /// The address.
        address: SocketAddr,
        /// Why.
        source: std::io::Error,
    },
    /// A watch ended before its cache synced (its stream was dropped).
    #[error("a watch stopped before its cache synced")]
    NotSynced,
    /// The served MCS API changed since the watches started.
    #[error(
        "the MCS API served changed from {before:?} to {after:?}: exiting so that the restarted operator watches what is served now"
    )]
    McsApiChanged {
        /// What was served when the operator started.
        before: McsApi,
        /// What is served now.
        after: McsApi,
    },
    /// This replica held the leader Lease and stopped holding it; it must not write any more.
    #[error(
        "leadership lost ({0}): exiting so that nothing more is written; the restarted operator follows the new leader"
    )]
    LeadershipLost(String),
}

type Trigger = mpsc::UnboundedSender<String>;

/// Starts the operator's reflector watches: every one shares the client, the trigger that
/// queues the namespaces of touched objects, and the metrics that count watch failures.
struct Watches {
    client: Client,
    trigger: Trigger,
    metrics: Arc<Metrics>,
    namespace: Option<String>,
}

/// What a watch does with each event besides caching it and queueing its namespace.
type OnEvent<K> = fn(&Metrics, &Store<K>, &watcher::Event<K>);

impl Watches {
    /// Watches every `K` matching `config` in all namespaces (or the one namespace watched) and
    /// returns its store, kept current
    /// by a spawned reflector; the namespace of every touched object goes to the trigger, and
    /// failures are counted (the watcher retries them with backoff while the store keeps its
    /// last complete list).
    fn watch<K>(&self, name: &'static str, config: watcher::Config) -> Store<K>
    where
        K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        self.watch_with(name, config, |_, _, _| {})
    }

    /// [`Watches::watch`], calling `on_event` with every event once the store holds it.
    fn watch_with<K>(
        &self,
        name: &'static str,
        config: watcher::Config,
        on_event: OnEvent<K>,
    ) -> Store<K>
    where
        K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug
            + Send
            + Sync
            + 'static,
    {
        let (store, writer) = reflector::store();
        let api = match &self.namespace {
            Some(namespace) => Api::namespaced(self.client.clone(), namespace),
            None => Api::all(self.client.clone()),
        };
        spawn_watch(
            name,
            api,
            config,
            writer,
            self.trigger.clone(),
            Arc::clone(&self.metrics),
            on_event,
        );
        store
    }
}

/// Drives one reflector watch (see [`Watches::watch_with`]).
fn spawn_watch<K>(
    name: &'static str,
    api: Api<K>,
    config: watcher::Config,
    writer: reflector::store::Writer<K>,
    trigger: Trigger,
    metrics: Arc<Metrics>,
    on_event: OnEvent<K>,
) where
    K: Resource<DynamicType = ()>
        + Clone
        + DeserializeOwned
        + std::fmt::Debug
        + Send
        + Sync
        + 'static,
{
    let store = writer.as_reader();
    // Cached with managedFields trimmed to what the operator reads of them.
    let watch = reflector::reflector(
        writer,
        watcher(api, config)
            .backoff(WatchBackoff::default())
            .modify(|object| {
                ceph_address_plan::rook_objects::trim_managed_fields(
                    object.meta_mut(),
                    mcs_ceph_core::FIELD_MANAGER,
                );
            }),
    )
    .for_each(move |result| {
        match result {
            Ok(event) => {
                // The objects touched: applied, listed or deleted.
                if let watcher::Event::Apply(object)
                | watcher::Event::InitApply(object)
                | watcher::Event::Delete(object) = &event
                {
                    let _ = trigger.unbounded_send(object.namespace().unwrap_or_default());
                }
                on_event(&metrics, &store, &event);
            }
            Err(error) => {
                metrics.watch_failed(name);
                tracing::warn!(
                    watch = name,
                    error = %ErrorChain(&error),
                    "watch failed, retrying{}",
                    hint(name, &error)
                );
            }
        }
        future::ready(())
    });
    tokio::spawn(watch);
}

/// Keeps the per-CephCluster series to the clusters that exist: a deleted cluster's go with its
/// Delete event, and those of clusters deleted while the watch was away go when the relist
/// completes (the store then holds exactly the clusters listed). Called once the reflector's
/// store holds the event, so a reconcile that ends afterwards finds its cluster gone (see
/// [`Metrics::set_daemons`]).
pub fn forget_deleted_clusters(
    metrics: &Metrics,
    clusters: &Store<CephCluster>,
    event: &watcher::Event<CephCluster>,
) {
    match event {
        watcher::Event::Delete(cluster) => metrics.forget_cluster(
            cluster.metadata.namespace.as_deref().unwrap_or_default(),
            cluster.metadata.name.as_deref().unwrap_or_default(),
        ),
        watcher::Event::InitDone => metrics.retain_clusters(|namespace, name| {
            clusters
                .get(&ObjectRef::new(name).within(namespace))
                .is_some()
        }),
        watcher::Event::Init | watcher::Event::InitApply(_) | watcher::Event::Apply(_) => {}
    }
}

/// What to do about a watch that fails because the API server does not know the resource or
/// the operator may not read it.
pub fn hint(watch: &str, error: &watcher::Error) -> &'static str {
    let code = match error {
        watcher::Error::InitialListFailed(kube::Error::Api(status))
        | watcher::Error::WatchStartFailed(kube::Error::Api(status))
        | watcher::Error::WatchFailed(kube::Error::Api(status)) => status.code,
        watcher::Error::WatchError(status) => status.code,
        _ => return "",
    };
    match (code, watch) {
        (404, "cephclusters") => " (is Rook's CephCluster CRD installed?)",
        (404, "cephclusteraddressings") => {
            " (install the operator's CRD: kubectl apply --server-side -f deploy/mcs-ceph-operator/crd.yaml)"
        }
        (404, _) => " (the resource is not served)",
        (403, _) => {
            " (the operator's ClusterRole, or its Role in the namespace with --watch-namespace, does not grant this: apply deploy/mcs-ceph-operator/operator.yaml or upgrade the Helm chart)"
        }
        _ => "",
    }
}

/// Asks again every `every` which MCS API is served; returns what is served once it differs
/// from `known`. Discovery errors are logged and retried at the next interval.
pub async fn watch_mcs_api(client: Client, known: McsApi, every: std::time::Duration) -> McsApi {
    loop {
        tokio::time::sleep(every).await;
        match discover_mcs_api(&client).await {
            Ok(now) if now != known => return now,
            Ok(_) => {}
            Err(error) => tracing::warn!(
                error = %ErrorChain(&error),
                "MCS API discovery failed, retrying later"
            ),
        }
    }
}

/// The CephClusters of the namespaces triggered.
fn queue(
    triggers: mpsc::UnboundedReceiver<String>,
    clusters: Store<CephCluster>,
) -> impl Stream<Item = Result<ObjectRef<CephCluster>, Infallible>> {
    triggers.flat_map(move |namespace| {
        let refs: Vec<_> = clusters
            .state()
            .iter()
            .filter(|c| c.namespace().as_deref() == Some(namespace.as_str()))
            .map(|c| Ok(ObjectRef::from_obj(c.as_ref())))
            .collect();
        stream::iter(refs)
    })
}

/// Runs the operator without leader election (it always writes) until `shutdown` completes.
pub async fn run(
    client: Client,
    options: RunOptions,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    run_with_election(client, options, None, shutdown).await
}

/// Runs the operator until `shutdown` completes. With `election`, the applier starts only once
/// this replica holds the Lease (the watches start at once either way), and the run ends with
/// [`RunError::LeadershipLost`] as soon as it stops holding it; on shutdown the Lease is handed
/// back after the applier has stopped.
pub async fn run_with_election(
    client: Client,
    options: RunOptions,
    election: Option<LeaseSettings>,
    shutdown: impl Future<Output = ()>,
) -> Result<(), RunError> {
    let mut shutdown = std::pin::pin!(shutdown);
    let metrics = Arc::new(Metrics::new());
    let readiness = Arc::new(Readiness::default());
    serve_http(options.listen, &metrics, &readiness).await?;
    let mut leadership = match election {
        Some(settings) => Leadership::spawn(
            Elector::new(client.clone(), settings, Clock::system()),
            metrics.leader.clone(),
        ),
        None => Leadership::always(&metrics.leader),
    };
    let mcs_api = discover_served_mcs_api(&client).await?;

    let (trigger, triggers) = mpsc::unbounded();
    let caches = Arc::new(start_watches(
        &client,
        trigger,
        &metrics,
        options.watch_namespace.clone(),
        mcs_api,
    ));
    let clusters = caches.clusters.clone();
    let started_with = caches.mcs_api.clone();

    // Nothing is decided before every cache holds a complete list.
    tracing::info!("waiting for the watch caches to sync");
    caches
        .wait_synced()
        .await
        .map_err(|_| RunError::NotSynced)?;
    readiness.set_synced();
    if !wait_for_lease(&mut leadership, shutdown.as_mut()).await {
        leadership.stop().await;
        return Ok(());
    }
    tracing::info!(
        clusters = clusters.state().len(),
        "caches synced; reconciling"
    );

    let controller_config = controller::Config::default()
        .concurrency(options.reconcile_concurrency)
        .debounce(options.debounce);
    let rediscover_every = options.rediscover_every;
    let context = reconcile_context(&client, options, caches, metrics);
    let reconciling = reconcile_queued(context, clusters, triggers, controller_config);
    let rediscovery = async {
        match rediscover_every {
            Some(every) => watch_mcs_api(client.clone(), started_with.clone(), every).await,
            None => future::pending().await,
        }
    };
    // The applier is dropped when the select ends, before the Lease is handed back.
    let ended = tokio::select! {
        () = reconciling => {
            tracing::warn!("the reconcile queue ended");
            Ok(())
        }
        () = &mut shutdown => {
            tracing::info!("shutting down");
            Ok(())
        }
        after = rediscovery => Err(RunError::McsApiChanged { before: started_with, after }),
        reason = leadership.lost() => return Err(RunError::LeadershipLost(reason)),
    };
    leadership.stop().await;
    ended
}

/// Binds `listen` and serves `/metrics`, `/healthz` and `/readyz` there from a spawned task.
async fn serve_http(
    listen: SocketAddr,
    metrics: &Arc<Metrics>,
    readiness: &Arc<Readiness>,
) -> Result<(), RunError> {
    Endpoints::new(Arc::clone(metrics), Arc::clone(readiness))
        .listen(listen)
        .await
        .map_err(|source| RunError::Listen {
            address: listen,
            source,
        })?;
    Ok(())
}

/// Asks which MCS API is served, and logs the answer.
async fn discover_served_mcs_api(client: &Client) -> Result<McsApi, RunError> {
    let mcs_api = discover_mcs_api(client)
        .await
        .map_err(RunError::Discovery)?;
    match &mcs_api {
        McsApi::Served(version) => tracing::info!(version = version.as_str(), "MCS API served"),
        McsApi::Missing(detail) => tracing::warn!(
            "the MCS API is not served ({detail}): every MCS-enabled CephCluster is reported as blocked until it is installed (the operator restarts itself when it notices)"
        ),
    }
    Ok(mcs_api)
}

/// Starts a watch of every kind the decision reads (the ServiceExports and ServiceImports in
/// the version `mcs_api` says is served, none when it is missing) and returns their caches.
/// Each watch queues the namespaces of the objects it sees on `trigger`.
fn start_watches(
    client: &Client,
    trigger: Trigger,
    metrics: &Arc<Metrics>,
    namespace: Option<String>,
    mcs_api: McsApi,
) -> Caches {
    match &namespace {
        Some(namespace) => tracing::info!(namespace, "watching one namespace"),
        None => tracing::info!("watching every namespace"),
    }
    let watches = Watches {
        client: client.clone(),
        trigger,
        metrics: Arc::clone(metrics),
        namespace,
    };
    let all = watcher::Config::default();
    let clusters: Store<CephCluster> =
        watches.watch_with("cephclusters", all.clone(), forget_deleted_clusters);
    let services: Store<Service> = watches.watch(
        "services",
        all.clone()
            .labels(ceph_address_plan::rook::label::ROOK_CLUSTER),
    );
    let deployments: Store<Deployment> = watches.watch(
        "deployments",
        all.clone()
            .labels(&format!("app={}", ceph_address_plan::rook::OSD_APP)),
    );
    let config_maps: Store<ConfigMap> = watches.watch(
        "configmaps",
        all.clone().fields(&format!(
            "metadata.name={}",
            ceph_address_plan::rook::MON_ENDPOINTS_CONFIG_MAP
        )),
    );
    let addressings: Store<CephClusterAddressing> =
        watches.watch("cephclusteraddressings", all.clone());
    let mcs = match &mcs_api {
        McsApi::Missing(_) => McsStores::None,
        McsApi::Served(McsVersion::V1Beta1) => {
            let exports: Store<v1beta1::ServiceExport> =
                watches.watch("serviceexports", all.clone());
            let imports: Store<v1beta1::ServiceImport> =
                watches.watch("serviceimports", all.clone());
            McsStores::V1Beta1 { exports, imports }
        }
        McsApi::Served(McsVersion::V1Alpha1) => {
            let exports: Store<v1alpha1::ServiceExport> =
                watches.watch("serviceexports", all.clone());
            let imports: Store<v1alpha1::ServiceImport> =
                watches.watch("serviceimports", all.clone());
            McsStores::V1Alpha1 { exports, imports }
        }
    };
    // The queue ends only when every watch has ended.
    drop(watches);
    Caches::new(
        clusters,
        services,
        deployments,
        config_maps,
        addressings,
        mcs,
        mcs_api,
    )
}

/// Waits until this replica holds the leader Lease; `false` when `shutdown` completes first.
async fn wait_for_lease(
    leadership: &mut Leadership,
    shutdown: std::pin::Pin<&mut impl Future<Output = ()>>,
) -> bool {
    if leadership.is_leading() {
        return true;
    }
    tracing::info!("caches synced; waiting for the leader Lease before writing");
    tokio::select! {
        () = leadership.acquired() => true,
        () = shutdown => {
            tracing::info!("shutting down");
            false
        }
    }
}

/// What every reconcile shares: the options' clients and settings, the synced caches, and the
/// mon migration when `--mon-migration` is on.
fn reconcile_context(
    client: &Client,
    options: RunOptions,
    caches: Arc<Caches>,
    metrics: Arc<Metrics>,
) -> Arc<Context> {
    Arc::new(Context {
        api: options.api,
        resolver: options.resolver,
        caches,
        config: options.config,
        clock: Clock::system(),
        metrics,
        lookup_concurrency: options.lookup_concurrency,
        mon_migration: options
            .mon_migration
            .then(|| Arc::new(MonMigration::new(client.clone(), AdminSource::RookSecret))),
        lookups: Arc::new(LookupMemories::default()),
    })
}

/// The kube-runtime applier over the CephClusters of the namespaces `triggers` names: it ends
/// when the queue does (every watch has ended).
fn reconcile_queued(
    context: Arc<Context>,
    clusters: Store<CephCluster>,
    triggers: mpsc::UnboundedReceiver<String>,
    controller_config: controller::Config,
) -> impl Future<Output = ()> {
    applier(
        |cluster, context| Box::pin(reconciler::reconcile(cluster, context)),
        reconciler::error_policy,
        context,
        clusters.clone(),
        queue(triggers, clusters),
        controller_config,
    )
    .for_each(|result| {
        if let Err(error) = result {
            tracing::debug!(error = %ErrorChain(&error), "applier");
        }
        future::ready(())
    })
}

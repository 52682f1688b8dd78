//! One reconcile of one CephCluster: snapshot from the synced caches, [`prepare`], apply the
//! Services and ServiceExports, look up the names asked for, [`Prepared::complete`], publish
//! the status (when it changed) and the Events. The kube-runtime applier calls [`reconcile`]
//! and, on error, [`error_policy`].
//!
//! [`Prepared::complete`]: crate::decide::Prepared::complete

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clusterset_dns::{ClustersetResolver, Resolution, ResolveError, resolve_all};
use k8s_openapi::jiff::Timestamp;
use kube::runtime::controller::Action;
use mcs_types::names::ClustersetName;

use crate::config::Config;
use crate::decide::{EventType, LookupResult, Write, prepare};
use crate::kube_io::{ApiError, Caches, ClusterApi, NotSynced, cluster_reference};
use crate::metrics::Metrics;
use crate::resources::CephCluster;

/// The clock the decision reads (replaceable in tests).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

/// A resolver that records each lookup's outcome and duration in the metrics.
struct TimedResolver<'a> {
    inner: &'a dyn ClustersetResolver,
    metrics: &'a Metrics,
}

#[async_trait]
impl ClustersetResolver for TimedResolver<'_> {
    async fn resolve(&self, name: &ClustersetName) -> Result<Resolution, ResolveError> {
        let started = Instant::now();
        let answer = self.inner.resolve(name).await;
        self.metrics.looked_up(answer.is_ok(), started.elapsed());
        answer
    }
}

/// What every reconcile shares.
pub struct Context {
    /// Writes and Events.
    pub api: Arc<dyn ClusterApi>,
    /// Global IP lookups.
    pub resolver: Arc<dyn ClustersetResolver>,
    /// The watch caches.
    pub caches: Arc<Caches>,
    /// The operator's configuration.
    pub config: Config,
    /// The time.
    pub clock: Clock,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// Lookups in flight at once.
    pub lookup_concurrency: usize,
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context")
            .field("config", &self.config)
            .field("caches", &self.caches)
            .finish_non_exhaustive()
    }
}

/// Why a reconcile stopped.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ReconcileError {
    /// The caches have not synced: nothing was done.
    #[error(transparent)]
    NotSynced(#[from] NotSynced),
    /// A write failed; the writes before it were made (every write is idempotent).
    #[error("{kind} of {namespace}/{name} failed: {source}")]
    Write {
        /// The kind of write.
        kind: &'static str,
        /// The object's namespace.
        namespace: String,
        /// The object's name.
        name: String,
        /// The API error.
        source: ApiError,
    },
}

async fn write(ctx: &Context, write: &Write) -> Result<(), ReconcileError> {
    let result = ctx.api.apply(write).await;
    ctx.metrics.wrote(write.kind(), result.is_ok());
    result.map_err(|source| {
        let (namespace, name) = write.target();
        ReconcileError::Write {
            kind: write.kind(),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            source,
        }
    })
}

/// Reconciles one CephCluster.
pub async fn reconcile(
    cluster: Arc<CephCluster>,
    ctx: Arc<Context>,
) -> Result<Action, ReconcileError> {
    let started = Instant::now();
    let result = reconcile_inner(&cluster, &ctx).await;
    let label = match &result {
        Ok(_) => "ok",
        Err(ReconcileError::NotSynced(_)) => "not_synced",
        Err(_) => "error",
    };
    ctx.metrics.reconciled(label, started.elapsed());
    result
}

async fn reconcile_inner(cluster: &CephCluster, ctx: &Context) -> Result<Action, ReconcileError> {
    let snapshot = ctx.caches.snapshot(cluster)?;
    let prepared = prepare(&snapshot, &ctx.config, (ctx.clock)());
    let namespace = cluster.metadata.namespace.as_deref().unwrap_or_default();
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    for note in prepared.notes() {
        tracing::warn!(namespace, cluster = name, "{note}");
    }
    for planned in prepared.writes() {
        write(ctx, planned).await?;
    }
    let requests = prepared.lookups();
    let mut results: Vec<LookupResult> = Vec::with_capacity(requests.len());
    if !requests.is_empty() {
        // At most `lookup_concurrency` in flight, answers in request order, each timed.
        let names: Vec<_> = requests.iter().map(|r| r.name.clone()).collect();
        let timed = TimedResolver {
            inner: ctx.resolver.as_ref(),
            metrics: &ctx.metrics,
        };
        let answers = resolve_all(&timed, &names, ctx.lookup_concurrency).await;
        for (request, answer) in requests.iter().zip(answers) {
            let answer = answer.map(|r| r.addresses).map_err(|e| e.to_string());
            if let Err(error) = &answer {
                tracing::info!(namespace, cluster = name, daemon = %request.daemon, "lookup failed: {error}");
            }
            results.push((request.daemon.clone(), answer));
        }
    }
    let outcome = prepared.complete(results);
    if let Some(status) = &outcome.status {
        write(ctx, status).await?;
    }
    let reference = cluster_reference(cluster);
    for event in &outcome.events {
        let type_ = match event.type_ {
            EventType::Normal => "Normal",
            EventType::Warning => "Warning",
        };
        // Events are best effort: the condition already says the same.
        match ctx.api.event(&reference, event).await {
            Ok(()) => ctx.metrics.evented(type_),
            Err(error) => {
                tracing::warn!(namespace, cluster = name, reason = %event.reason, "cannot publish an Event: {error}")
            }
        }
    }
    ctx.metrics.set_daemons(namespace, name, &outcome.daemons);
    tracing::debug!(namespace, cluster = name, phase = ?outcome.phase, "reconciled");
    Ok(match outcome.requeue_after {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

/// What the applier does after a failed reconcile: try again soon (not synced) or after a
/// while (a write failed).
pub fn error_policy(
    cluster: Arc<CephCluster>,
    error: &ReconcileError,
    _ctx: Arc<Context>,
) -> Action {
    match error {
        ReconcileError::NotSynced(_) => Action::requeue(Duration::from_secs(1)),
        ReconcileError::Write { .. } => {
            tracing::warn!(
                namespace = cluster.metadata.namespace.as_deref().unwrap_or_default(),
                cluster = cluster.metadata.name.as_deref().unwrap_or_default(),
                "reconcile failed: {error}"
            );
            Action::requeue(Duration::from_secs(15))
        }
    }
}

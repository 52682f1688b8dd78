//! One reconcile of one CephCluster: snapshot from the synced caches, [`prepare`], apply the
//! Services and ServiceExports, look up the names asked for, [`Prepared::complete`], publish
//! the status (when it changed) and the Events. The kube-runtime applier calls [`reconcile`]
//! and, on error, [`error_policy`].
//!
//! [`Prepared::complete`]: mcs_ceph_core::decide::Prepared::complete

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clusterset_dns::{ClustersetResolver, Resolution, ResolveError, resolve_all};
use kube::runtime::controller::Action;
use mcs_types::names::ClustersetName;

use crate::kube_io::{ApiError, Caches, ClusterApi, NotSynced, cluster_reference};
use crate::metrics::Metrics;
use crate::mon_migration::{MIGRATION_REQUEUE, MigrationInput, MigrationReport, MonMigration};
use mcs_ceph_api::{AddressingStatus, CephCluster, CephClusterAddressing};
use mcs_ceph_core::config::Config;
use mcs_ceph_core::decide::{EventNote, EventType, LookupMemory, LookupResult, Write, prepare};
use mcs_ceph_core::snapshot::{McsApi, McsVersion, Snapshot};

pub use clusterset_daemon::Clock;
use clusterset_daemon::ErrorChain;

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
    /// The mon migration (`--mon-migration`); `None`: mons are never replaced. Gated per
    /// cluster by the opt-in annotation, and run only here, inside the reconcile, which only
    /// the holder of the leader Lease runs.
    pub mon_migration: Option<Arc<MonMigration>>,
    /// What each cluster's last reconcile remembered of its lookups (shared by the
    /// reconciles of one operator process).
    pub lookups: Arc<LookupMemories>,
}

/// Per CephCluster (namespace, name), what its last reconcile remembered of its global IP
/// lookups ([`mcs_ceph_core::decide::Outcome::lookups`]), handed to the next one: the status
/// lists only the daemons worth reading, so it cannot carry every daemon's lookup. Empty after
/// a start (the decision then reads the records of the daemons the status lists, and looks up
/// the others once).
#[derive(Debug, Default)]
pub struct LookupMemories(std::sync::Mutex<BTreeMap<(String, String), LookupMemory>>);

impl LookupMemories {
    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<(String, String), LookupMemory>> {
        self.0
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// What cluster `namespace`/`name` remembered (empty if nothing).
    pub fn get(&self, namespace: &str, name: &str) -> LookupMemory {
        self.lock()
            .get(&(namespace.to_owned(), name.to_owned()))
            .cloned()
            .unwrap_or_default()
    }

    /// Keeps `memory` for cluster `namespace`/`name` (forgets it when empty), and forgets the
    /// clusters `exists` no longer knows.
    pub fn keep(
        &self,
        namespace: &str,
        name: &str,
        memory: LookupMemory,
        exists: impl Fn(&str, &str) -> bool,
    ) {
        let mut memories = self.lock();
        memories.retain(|(namespace, name), _| exists(namespace, name));
        let key = (namespace.to_owned(), name.to_owned());
        if memory.is_empty() {
            memories.remove(&key);
        } else {
            memories.insert(key, memory);
        }
    }
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
#[derive(Debug, Clone, thiserror::Error)]
pub enum ReconcileError {
    /// The caches have not synced: nothing was done.
    #[error(transparent)]
    NotSynced(#[from] NotSynced),
    /// A write failed; the writes before it were made (every write is idempotent).
    #[error("{kind} of {namespace}/{name} failed")]
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

/// Reconciles one CephCluster, in a span `reconcile` with the cluster's `namespace` and name
/// (as `cluster`, the name the lines logged in it and the metrics give it; a field `name`
/// would collide with the span's own name in the JSON log lines), as kube-rs' controller-rs
/// does: every line logged by the reconcile carries them.
#[tracing::instrument(
    name = "reconcile",
    skip_all,
    fields(
        namespace = cluster.metadata.namespace.as_deref().unwrap_or_default(),
        cluster = cluster.metadata.name.as_deref().unwrap_or_default(),
    )
)]
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
    let namespace = cluster.metadata.namespace.as_deref().unwrap_or_default();
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    let mut snapshot = ctx.caches.snapshot(cluster)?;
    snapshot.lookups = ctx.lookups.get(namespace, name);
    let prepared = prepare(&snapshot, &ctx.config, ctx.clock.now());
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
            if let Err(error) = &answer {
                tracing::info!(namespace, cluster = name, daemon = %request.daemon, error = %ErrorChain(error), "lookup failed");
            }
            let answer = answer.map(|r| r.addresses).map_err(|e| e.to_string());
            results.push((request.daemon.clone(), answer));
        }
    }
    let mut outcome = prepared.complete(results);
    ctx.lookups.keep(
        namespace,
        name,
        std::mem::take(&mut outcome.lookups),
        |namespace, name| ctx.caches.has_cluster(namespace, name),
    );
    let mut requeue_after = outcome.requeue_after;
    if let Some(migration) = &ctx.mon_migration {
        let report = migrate(ctx, migration, cluster, &snapshot, &outcome.status).await;
        if report.as_ref().is_some_and(|r| r.in_progress) {
            requeue_after =
                Some(requeue_after.map_or(MIGRATION_REQUEUE, |r| r.min(MIGRATION_REQUEUE)));
        }
        outcome.status = with_migration_line(&snapshot, outcome.status.take(), report.as_ref());
        outcome
            .events
            .extend(migration_failure_event(&snapshot, report.as_ref()));
    }
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
                tracing::warn!(namespace, cluster = name, reason = %event.reason, error = %ErrorChain(&error), "cannot publish an Event")
            }
        }
    }
    ctx.metrics
        .set_daemons(namespace, name, &outcome.daemons, || {
            ctx.caches.has_cluster(namespace, name)
        });
    tracing::debug!(namespace, cluster = name, phase = ?outcome.phase, "reconciled");
    Ok(match requeue_after {
        Some(after) => Action::requeue(after),
        None => Action::await_change(),
    })
}

/// The status this reconcile decided (`planned`, or the prior one when unchanged) with the
/// prior `monFailover`, as the migration gate reads it.
fn decided_status(snapshot: &Snapshot, planned: &Option<Write>) -> Option<AddressingStatus> {
    let prior = snapshot.prior.as_ref().and_then(|p| p.status.as_ref());
    let mut status = match planned {
        Some(Write::ApplyStatus(object)) => object.status.clone(),
        _ => prior.cloned(),
    }?;
    status.mon_failover = prior.and_then(|p| p.mon_failover.clone());
    Some(status)
}

/// Runs the mon migration after the plan's writes and lookups; its failures are reported in
/// the status line (and counted), not as a failed reconcile, so that the plan's status is
/// still published.
async fn migrate(
    ctx: &Context,
    migration: &MonMigration,
    cluster: &CephCluster,
    snapshot: &Snapshot,
    planned: &Option<Write>,
) -> Option<MigrationReport> {
    let status = decided_status(snapshot, planned)?;
    let settings = mcs_ceph_core::guards::settings(cluster, &ctx.config).ok()?;
    let millis = u64::try_from(ctx.clock.now().as_millisecond()).unwrap_or(0);
    let now = mon_failover::Timestamp::from_millis(millis);
    let input = MigrationInput {
        cluster,
        settings,
        status: &status,
        mon_endpoints: snapshot.mon_endpoints.as_ref(),
        mcs_version: match snapshot.mcs_api {
            McsApi::Served(version) => version,
            // Without the MCS API the gate does not let the migration start.
            McsApi::Missing(_) => McsVersion::V1Beta1,
        },
        now,
    };
    match migration.run(input).await {
        Ok(report) => {
            for step in report.iter().flat_map(|r| &r.steps) {
                ctx.metrics.failover_step(step.step, step.outcome);
            }
            report
        }
        Err(error) => {
            ctx.metrics.failover_step("tick", "error");
            tracing::warn!(
                namespace = cluster.metadata.namespace.as_deref().unwrap_or_default(),
                cluster = cluster.metadata.name.as_deref().unwrap_or_default(),
                error = %ErrorChain(&error),
                "mon migration failed, retrying soon"
            );
            Some(MigrationReport {
                line: format!("failed, retrying: {}", ErrorChain(&error)),
                in_progress: true,
                steps: Vec::new(),
                failure: Some(ErrorChain(&error).to_string()),
            })
        }
    }
}

/// The status write with the migration's line appended to the message; `None` when the
/// result equals what is published (the decision compares without the line).
fn with_migration_line(
    snapshot: &Snapshot,
    planned: Option<Write>,
    report: Option<&MigrationReport>,
) -> Option<Write> {
    let prior = snapshot.prior.as_ref();
    let published = prior.and_then(|p| p.status.clone()).map(|mut s| {
        s.mon_failover = None;
        s
    });
    let mut object = match planned {
        Some(Write::ApplyStatus(object)) => object,
        Some(other) => return Some(other),
        None => {
            let prior = prior?;
            let mut object = CephClusterAddressing::new(
                prior.metadata.name.as_deref().unwrap_or_default(),
                prior.metadata.namespace.as_deref().unwrap_or_default(),
                published.clone()?,
            );
            object.metadata.owner_references = prior.metadata.owner_references.clone();
            Box::new(object)
        }
    };
    if let (Some(report), Some(status)) = (report, object.status.as_mut()) {
        status.message.push_str(&migration_suffix(&report.line));
    }
    (object.status != published).then_some(Write::ApplyStatus(object))
}

/// How the migration's line ends the status message.
fn migration_suffix(line: &str) -> String {
    format!("; mon migration: {line}")
}

/// A Warning Event for a failed mon migration, unless the published status already ends with
/// this same failure (its Event was sent then): one Event per failure, not one per retry.
fn migration_failure_event(
    snapshot: &Snapshot,
    report: Option<&MigrationReport>,
) -> Option<EventNote> {
    let report = report?;
    let failure = report.failure.as_deref()?;
    let published = snapshot
        .prior
        .as_ref()
        .and_then(|p| p.status.as_ref())
        .is_some_and(|s| s.message.ends_with(&migration_suffix(&report.line)));
    (!published).then(|| {
        EventNote::warning(
            "MonMigrationFailed",
            format!(
                "the mon migration failed and is retried every {}s: {failure}; `kubectl get cephclusteraddressing -o yaml` shows its state (status.monFailover), the operator's log the details",
                MIGRATION_REQUEUE.as_secs()
            ),
            "MigrateMons",
        )
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
                error = %ErrorChain(error),
                "reconcile failed"
            );
            Action::requeue(Duration::from_secs(15))
        }
    }
}

//! The event loop around the core: feeds watch events in, carries writes out (concurrently
//! across services, in order within one), heartbeats, wakes up for Lease expiries and retries,
//! keeps the DNS zone and the metrics current.
//!
//! With several replicas, every replica runs this loop: each feeds its own core from its own
//! watches and serves DNS from its own zone, but only the holder of the leader Lease
//! ([`Election::Lease`]) decides, writes and heartbeats. A follower that becomes the leader
//! starts deciding on its warm caches; a leader that stops leading (it could not renew the
//! Lease: its API server is away) steps down between two passes, so no write is in flight, and
//! follows again, still serving DNS, until it wins the Lease again.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clusterset_daemon::ErrorChain;
use clusterset_daemon::lease::Leadership;
use clusterset_dns::ZoneStore;
use futures::{FutureExt, Stream, StreamExt};
use mcs_types::ServiceKey;
use tracing::{Instrument, Span};

use crate::kube_io::{AgentWriter, Feed, WriteError};
use crate::metrics::Metrics;
use crate::readiness::Readiness;
use mcs_controller::broker::Heartbeat;
use mcs_controller::core::{AgentCore, Input, Side, ZoneChange};
use mcs_controller::watch::Event;
use mcs_controller::write::Write;

pub use clusterset_daemon::Clock;

/// What became of one write: `None` if it was not attempted (an earlier write of its service
/// failed), else the writer's answer.
type Outcome = Option<Result<(), WriteError>>;

/// The most events taken in before reconciling (a burst is reconciled once, not per event).
const MAX_BATCH: usize = 4096;

/// The running agent.
pub struct Runtime {
    /// The core.
    pub core: AgentCore,
    /// Carries out writes.
    pub writer: Arc<dyn AgentWriter>,
    /// Metrics.
    pub metrics: Arc<Metrics>,
    /// What `/readyz` says.
    pub readiness: Arc<Readiness>,
    /// The clusterset DNS zone to keep current, if DNS is served.
    pub zone: Option<Arc<ZoneStore>>,
    /// Services written at once.
    pub write_concurrency: usize,
    /// How often the heartbeat Lease is renewed.
    pub heartbeat_every: Duration,
    /// The clock.
    pub clock: Clock,
    /// Who leads. With [`Election::Lease`] the core must start as a follower
    /// ([`AgentCore::follower`]): it is made the leader when this replica wins the Lease.
    pub election: Election,
}

/// How the replicas of one cluster's agent agree on who decides and writes.
pub enum Election {
    /// A single replica, which always leads.
    None,
    /// Leader election: starts a campaign for the Lease (again after each loss), reporting
    /// leadership on the `leader` gauge it was given.
    Lease(Box<dyn Fn() -> Leadership + Send + Sync>),
}

impl std::fmt::Debug for Election {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Self::None => "None",
            Self::Lease(_) => "Lease",
        })
    }
}

/// How [`Runtime::run`] ended.
#[derive(Debug)]
pub struct Stopped {
    /// The core, for inspection.
    pub core: AgentCore,
    /// How many times this replica stopped leading and stepped down to follow.
    pub stepped_down: usize,
}

impl std::fmt::Debug for Runtime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Runtime")
            .field("core", &self.core)
            .field("write_concurrency", &self.write_concurrency)
            .field("heartbeat_every", &self.heartbeat_every)
            .finish_non_exhaustive()
    }
}

impl Runtime {
    /// Runs until `shutdown` completes or the feeds end. On the way out the heartbeat Lease and
    /// then the leader Lease are handed back.
    pub async fn run<S>(mut self, mut feeds: S, shutdown: impl Future<Output = ()>) -> Stopped
    where
        S: Stream<Item = Feed> + Unpin,
    {
        let mut shutdown = std::pin::pin!(shutdown.fuse());
        let mut last_heartbeat: Option<Instant> = None;
        let mut leadership = self.campaign();
        let mut stepped_down = 0;
        loop {
            let now = self.clock.now();
            let wait = self
                .core
                .next_wakeup()
                .map(|at| Duration::try_from(at.duration_since(now)).unwrap_or(Duration::ZERO))
                .unwrap_or(self.heartbeat_every)
                .min(self.heartbeat_every);
            let leading = self.core.is_leading();
            tokio::select! {
                () = &mut shutdown => break,
                change = async {
                    if leading {
                        Err(leadership.lost().await)
                    } else {
                        leadership.acquired().await;
                        Ok(())
                    }
                } => match change {
                    Ok(()) => {
                        tracing::info!("leader Lease acquired: this replica now decides and writes");
                        self.core.lead();
                    }
                    Err(reason) => {
                        // Between two passes: every write of the last one has been answered.
                        tracing::warn!(%reason, "leader Lease lost: this replica stops deciding and writing, keeps serving DNS, and follows until it wins the Lease again");
                        stepped_down += 1;
                        let config = self.core.config().clone();
                        let core = std::mem::replace(&mut self.core, AgentCore::follower(config));
                        self.core = core.step_down();
                        last_heartbeat = None;
                        leadership = self.campaign();
                    }
                },
                feed = feeds.next() => {
                    let Some(feed) = feed else { break };
                    self.feed(feed);
                    let mut taken = 1;
                    while taken < MAX_BATCH {
                        match feeds.next().now_or_never() {
                            Some(Some(feed)) => { self.feed(feed); taken += 1; }
                            _ => break,
                        }
                    }
                }
                () = tokio::time::sleep(wait) => {}
            }
            if last_heartbeat.is_none_or(|at| at.elapsed() >= self.heartbeat_every)
                && self.heartbeat().await
            {
                last_heartbeat = Some(Instant::now());
            }
            self.step().await;
        }
        self.release_heartbeat().await;
        // Every write has finished (they are awaited within the loop): the leader Lease can go.
        leadership.stop().await;
        Stopped {
            core: self.core,
            stepped_down,
        }
    }

    /// A campaign for leadership as [`Runtime::election`] says.
    fn campaign(&self) -> Leadership {
        match &self.election {
            Election::None => Leadership::always(&self.metrics.leader),
            Election::Lease(campaign) => campaign(),
        }
    }

    /// Hands this cluster's heartbeat Lease back on a clean shutdown, if this replica holds it.
    async fn release_heartbeat(&mut self) {
        if let Some(release) = self.core.release_heartbeat(self.clock.now()) {
            match self.writer.heartbeat(&release).await {
                Ok(_) => tracing::info!("heartbeat Lease released for the next instance"),
                Err(error) => {
                    tracing::warn!(error = %ErrorChain(&error), "could not release the heartbeat Lease; the next instance waits for it to expire")
                }
            }
        }
    }

    fn feed(&mut self, feed: Feed) {
        match feed {
            Feed::Input(input) => self.core.handle(*input),
            Feed::WatchError {
                source,
                broker,
                unreachable,
                error,
            } => {
                let side = if broker { Side::Broker } else { Side::Member };
                // Only a connection error, a timeout or a 5xx says the API server is away; a
                // refusal (403, 404, the routine 410 Gone) is its answer.
                if unreachable {
                    self.core.unreachable(side);
                } else {
                    self.core.answered(side);
                }
                self.metrics.count_error(broker, source);
                tracing::warn!(watch = source, broker, unreachable, %error, "watch failed; retrying with backoff, the last complete view stays in use");
            }
        }
    }

    /// Renews the heartbeat Lease; false when the broker's Leases are not listed yet.
    async fn heartbeat(&mut self) -> bool {
        let now = self.clock.now();
        let Some(heartbeat) = self.core.heartbeat(now) else {
            return false;
        };
        if let Heartbeat::Blocked { holder, until } = &heartbeat {
            tracing::error!(%holder, %until, cluster = %self.core.config().cluster_id, "another agent holds this cluster's heartbeat Lease: a previous leader that stopped without handing it back (taken over once unchanged for its duration), or a second agent using this cluster id; not publishing meanwhile");
            return true;
        }
        match self.writer.heartbeat(&heartbeat).await {
            Ok(stored) => {
                self.core.answered(Side::Broker);
                // The Lease as the hub stored it: the core knows at once that it holds it
                // (after an outage it may publish without waiting for the Lease watch).
                if let Some(lease) = stored {
                    self.core.handle(Input::Lease(Event::Apply(lease)));
                }
            }
            Err(WriteError::Conflict(message)) => {
                self.core.answered(Side::Broker);
                tracing::debug!(%message, "heartbeat Lease changed meanwhile; retrying with the new version");
            }
            Err(error) => {
                if error.answered() {
                    self.core.answered(Side::Broker);
                } else {
                    self.core.unreachable(Side::Broker);
                }
                self.metrics.count_error(true, "heartbeat");
                if let WriteError::Refused { code: 403, .. } = &error {
                    let config = self.core.config();
                    tracing::error!(
                        error = %ErrorChain(&error),
                        fix = %format!(
                            "the hub lets this cluster update only its own Lease {}/{}, which the hub manifests create: apply `clusterset-agent hub-manifests --cluster {} ...` (every member) on the hub",
                            config.broker_namespace,
                            mcs_controller::broker::lease_name(&config.cluster_id),
                            config.cluster_id
                        ),
                        "heartbeat Lease refused"
                    );
                } else {
                    tracing::warn!(error = %ErrorChain(&error), "heartbeat Lease renewal failed");
                }
            }
        }
        true
    }

    /// One reconcile pass and its writes.
    async fn step(&mut self) {
        let now = self.clock.now();
        let output = self.core.process(now);
        // A deleted ServiceImport takes its service's lag series with it; before this pass's
        // lags, so that an import written again in this pass keeps its new one.
        for change in &output.zone_changes {
            if let ZoneChange::ServiceImportDeleted(key) = change {
                self.metrics.forget_service(&key.namespace, &key.name);
            }
        }
        if let Some(zone) = &self.zone {
            if !output.zone_changes.is_empty() {
                let report = zone.apply(output.zone_changes.into_iter().map(zone_change));
                for rejected in report.rejected {
                    tracing::warn!(error = %ErrorChain(&rejected), "object not served in clusterset DNS");
                }
            }
            if output.zone_synced {
                zone.mark_synced();
            }
        }
        for (key, lag) in &output.lags {
            self.metrics
                .observe_lag(&key.namespace, &key.name, lag.as_secs_f64().max(0.0));
        }
        for problem in &output.problems {
            tracing::warn!("{problem}");
        }
        self.execute(output.writes).await;
        self.readiness.set(
            self.core.local_synced(),
            self.core.broker_synced(),
            // A follower makes no first pass: it is ready once its caches (and so its DNS zone)
            // have synced.
            self.core.is_started() || !self.core.is_leading(),
        );
        self.metrics.set_stats(&self.core.stats());
    }

    async fn execute(&mut self, writes: Vec<Write>) {
        if writes.is_empty() {
            return;
        }
        let mut by_service: BTreeMap<ServiceKey, Vec<Write>> = BTreeMap::new();
        for write in writes {
            by_service.entry(write.service()).or_default().push(write);
        }
        let writer = Arc::clone(&self.writer);
        let results: Vec<(Span, Vec<(Write, Outcome)>)> = futures::stream::iter(by_service)
            .map(|(key, writes)| {
                let writer = Arc::clone(&writer);
                let span = service_span(&key);
                let writing = async move {
                    // `None`: not attempted, because an earlier write of the service failed.
                    let mut results = Vec::with_capacity(writes.len());
                    let mut failed = false;
                    for write in writes {
                        let result = if failed {
                            None
                        } else {
                            Some(writer.write(&write).await)
                        };
                        failed |= matches!(result, Some(Err(_)));
                        results.push((write, result));
                    }
                    results
                };
                writing
                    .instrument(span.clone())
                    .map(|results| (span, results))
            })
            .buffer_unordered(self.write_concurrency.max(1))
            .collect()
            .await;
        let now = self.clock.now();
        // What became of each write is logged in its service's span.
        let outcomes = results.into_iter().flat_map(|(span, results)| {
            results
                .into_iter()
                .map(move |(write, result)| (span.clone(), write, result))
        });
        let mut dropped: Vec<String> = Vec::new();
        for (span, write, result) in outcomes {
            let _entered = span.enter();
            match result {
                Some(Err(WriteError::Refused { code: 404, .. })) if !write.is_broker() => {
                    // The object (a ServiceExport whose status waited) or its namespace is gone:
                    // retrying cannot succeed, and the watch's delete event settles the rest.
                    self.metrics
                        .writes_dropped
                        .get_or_create(&crate::metrics::OperationLabels {
                            operation: write.kind().to_owned(),
                        })
                        .inc();
                    tracing::debug!(write = write.kind(), service = %write.service(), "write dropped: its object or namespace is gone (404)");
                    dropped.push(write.service().to_string());
                    self.core.write_gone(&write);
                }
                None => {
                    tracing::debug!(write = write.kind(), service = %write.service(), "write not attempted: an earlier write of this service failed");
                    self.core.write_skipped(&write);
                }
                Some(Ok(())) => {
                    self.metrics
                        .writes
                        .get_or_create(&crate::metrics::OperationLabels {
                            operation: write.kind().to_owned(),
                        })
                        .inc();
                    tracing::debug!(write = write.kind(), service = %write.service(), detail = ?write, "written");
                    self.core.write_succeeded(&write);
                }
                Some(Err(error)) => {
                    self.metrics.count_error(write.is_broker(), write.kind());
                    tracing::warn!(write = write.kind(), service = %write.service(), error = %ErrorChain(&error), "write failed; retrying with backoff");
                    if error.answered() {
                        self.core
                            .write_refused(&write, &ErrorChain(&error).to_string(), now);
                    } else {
                        self.core
                            .write_failed(&write, &ErrorChain(&error).to_string(), now);
                    }
                }
            }
        }
        // One line for the lot: deleting a namespace of 1,000 exports drops 1,000 writes.
        if let Some(first) = dropped.first() {
            tracing::info!(
                count = dropped.len(),
                first = %first,
                "dropped writes whose object or namespace is gone (404); counted in clusterset_agent_writes_dropped_total"
            );
        }
    }
}

/// The span of one service's reconcile: the writes the core decided for it and what became of
/// them, with the service's `namespace` and name (as `service`, the name the lines logged in
/// it and the metrics give it; a field `name` would collide with the span's own name in the
/// JSON log lines).
fn service_span(key: &ServiceKey) -> Span {
    tracing::info_span!(
        "reconcile_service",
        namespace = %key.namespace,
        service = %key.name
    )
}

/// A change of the core's DNS sources as the clusterset DNS zone store takes it.
fn zone_change(change: ZoneChange) -> clusterset_dns::ZoneChange {
    match change {
        ZoneChange::ServiceImport(import) => {
            clusterset_dns::ZoneChange::Upsert(clusterset_dns::ZoneObject::ServiceImport(import))
        }
        ZoneChange::EndpointSlice(slice) => {
            clusterset_dns::ZoneChange::Upsert(clusterset_dns::ZoneObject::EndpointSlice(slice))
        }
        ZoneChange::ServiceImportDeleted(key) => {
            clusterset_dns::ZoneChange::DeleteServiceImport(key)
        }
        ZoneChange::EndpointSliceDeleted(id) => {
            clusterset_dns::ZoneChange::DeleteEndpointSlice(clusterset_dns::SliceKey {
                namespace: id.namespace,
                name: id.name,
            })
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use futures::channel::mpsc;
    use mcs_controller::config::AgentConfig;
    use mcs_controller::watch::Event;
    use mcs_types::ServiceKey;

    use super::*;
    use crate::kube_io::MockAgentWriter;
    use clusterset_sim as sim;
    use mcs_controller::broker::Heartbeat;

    fn feed(input: Input) -> Feed {
        Feed::Input(Box::new(input))
    }

    fn listed<T>(items: Vec<T>, wrap: fn(Event<T>) -> Input) -> Vec<Feed> {
        let mut feeds = vec![feed(wrap(Event::Init))];
        feeds.extend(items.into_iter().map(|i| feed(wrap(Event::InitApply(i)))));
        feeds.push(feed(wrap(Event::InitDone)));
        feeds
    }

    /// The local watches' first lists of a member with namespace `shop` and `key` exported.
    fn listed_shop(key: &ServiceKey) -> Vec<Feed> {
        let mut local = listed(vec![sim::namespace("shop")], Input::Namespace);
        local.extend(listed(
            vec![sim::service(key, "10.96.0.1", &[80])],
            Input::Service,
        ));
        local.extend(listed(
            vec![sim::service_export(
                key,
                k8s_openapi::jiff::Timestamp::now(),
            )],
            Input::ServiceExport,
        ));
        local.extend(listed(Vec::new(), Input::LocalEndpointSlice));
        local.extend(listed(Vec::new(), Input::ServiceImport));
        local.extend(listed(Vec::new(), Input::ImportedEndpointSlice));
        local
    }

    /// Runs `runtime` on a channel of feeds until the returned sender says stop; the task
    /// returns the core.
    fn start(
        runtime: Runtime,
    ) -> (
        mpsc::UnboundedSender<Feed>,
        tokio::sync::oneshot::Sender<()>,
        tokio::task::JoinHandle<Stopped>,
    ) {
        let (events, feeds) = mpsc::unbounded::<Feed>();
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let task = tokio::spawn(runtime.run(feeds, async {
            let _ = stopped.await;
        }));
        (events, stop, task)
    }

    /// A runtime without DNS, with fresh metrics and readiness, on the real clock.
    fn bare_runtime(
        config: AgentConfig,
        writer: MockAgentWriter,
        heartbeat_every: Duration,
    ) -> Runtime {
        Runtime {
            core: AgentCore::new(config),
            writer: Arc::new(writer),
            metrics: Arc::new(Metrics::new()),
            readiness: Arc::new(Readiness::default()),
            zone: None,
            write_concurrency: 4,
            heartbeat_every,
            clock: Clock::system(),
            election: Election::None,
        }
    }

    async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !condition() {
            assert!(Instant::now() < deadline, "timed out waiting for {what}");
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }

    #[tokio::test]
    async fn publishes_after_both_sides_sync_and_retries_a_failed_broker_write() {
        let config = sim::cluster_config(0, None).unwrap();
        let key = ServiceKey::new("shop", "web");
        let writes: Arc<Mutex<Vec<Write>>> = Arc::default();
        let mut writer = MockAgentWriter::new();
        let recorded = Arc::clone(&writes);
        writer.expect_write().returning(move |write| {
            let mut recorded = recorded.lock().unwrap();
            let first_publish = matches!(write, Write::PublishRecord(_))
                && !recorded
                    .iter()
                    .any(|w| matches!(w, Write::PublishRecord(_)));
            recorded.push(write.clone());
            if first_publish {
                Err(WriteError::unreachable("hub unreachable"))
            } else {
                Ok(())
            }
        });
        let heartbeats: Arc<Mutex<Vec<Heartbeat>>> = Arc::default();
        let recorded = Arc::clone(&heartbeats);
        writer.expect_heartbeat().returning(move |h| {
            recorded.lock().unwrap().push(h.clone());
            Ok(None)
        });

        let metrics = Arc::new(Metrics::new());
        let readiness = Arc::new(Readiness::default());
        let runtime = Runtime {
            core: AgentCore::new(config.clone()),
            writer: Arc::new(writer),
            metrics: Arc::clone(&metrics),
            readiness: Arc::clone(&readiness),
            zone: Some(Arc::new(ZoneStore::new(Default::default()))),
            write_concurrency: 4,
            heartbeat_every: Duration::from_secs(10),
            clock: Clock::system(),
            election: Election::None,
        };
        let (events, stop, task) = start(runtime);

        let local = listed_shop(&key);
        for f in local {
            events.unbounded_send(f).unwrap();
        }
        wait_for("local sync", || {
            readiness
                .check()
                .is_err_and(|e| e == "waiting for the broker's caches to sync")
        })
        .await;
        assert!(
            writes.lock().unwrap().is_empty(),
            "nothing is written before the broker synced"
        );

        // The broker lists; the agent creates its Lease, and once the Lease (held by it) is
        // seen, it publishes.
        let mut broker = listed(Vec::new(), Input::Record);
        broker.extend(listed(Vec::new(), Input::Lease));
        for f in broker {
            events.unbounded_send(f).unwrap();
        }
        wait_for("a heartbeat", || !heartbeats.lock().unwrap().is_empty()).await;
        let Heartbeat::Create(lease) = heartbeats.lock().unwrap()[0].clone() else {
            panic!("the first heartbeat creates the Lease");
        };
        events
            .unbounded_send(feed(Input::Lease(Event::Apply(*lease))))
            .unwrap();
        wait_for("readiness", || readiness.check().is_ok()).await;

        // The first publication fails: the export says so, and the write is retried.
        wait_for("Ready=False/Failed on the export", || {
            writes.lock().unwrap().iter().any(|w| matches!(w,
                Write::ApplyServiceExportStatus { status, .. }
                    if status.conditions.iter().any(|c| c.type_ == "Ready" && c.reason == "Failed" && c.message.contains("hub unreachable"))))
        })
        .await;
        wait_for("the retried publication", || {
            writes
                .lock()
                .unwrap()
                .iter()
                .filter(|w| matches!(w, Write::PublishRecord(_)))
                .count()
                == 2
        })
        .await;
        assert!(
            metrics.encode().contains(
                "clusterset_agent_broker_sync_errors_total{operation=\"publish_record\"} 1"
            )
        );

        stop.send(()).unwrap();
        let core = task.await.unwrap().core;
        assert!(core.is_started());
        // A clean shutdown hands the Lease back (holder cleared) for the next instance.
        let last = heartbeats.lock().unwrap().last().cloned();
        match last {
            Some(Heartbeat::Replace(lease)) => {
                assert_eq!(kube_lease::holder(&lease), None);
            }
            other => panic!("expected the Lease release last, got {other:?}"),
        }
    }

    #[tokio::test]
    async fn a_refused_write_backs_off_while_watches_fail_and_recover() {
        use kube::runtime::watcher;

        let config = sim::cluster_config(0, None).unwrap();
        let key = ServiceKey::new("shop", "web");
        // The member's API server refuses every write of the export's status (an admission
        // webhook's 422); everything else goes through.
        let refused: Arc<Mutex<Vec<Instant>>> = Arc::default();
        let mut writer = MockAgentWriter::new();
        let recorded = Arc::clone(&refused);
        writer.expect_write().returning(move |write| {
            if matches!(write, Write::ApplyServiceExportStatus { .. }) {
                recorded.lock().unwrap().push(Instant::now());
                return Err(WriteError::Refused {
                    code: 422,
                    message: "admission webhook \"policy\" denied the request".into(),
                });
            }
            Ok(())
        });
        writer.expect_heartbeat().returning(|heartbeat| {
            let mut lease = match heartbeat {
                Heartbeat::Create(lease) | Heartbeat::Replace(lease) => (**lease).clone(),
                Heartbeat::Blocked { .. } => return Ok(None),
            };
            lease.metadata.resource_version = Some("7".into());
            Ok(Some(lease))
        });
        let runtime = bare_runtime(config, writer, Duration::from_secs(10));
        let (events, stop, task) = start(runtime);
        let mut all = listed_shop(&key);
        all.extend(listed(Vec::new(), Input::Record));
        all.extend(listed(Vec::new(), Input::Lease));
        for f in all {
            events.unbounded_send(f).unwrap();
        }
        wait_for("the first refused status write", || {
            !refused.lock().unwrap().is_empty()
        })
        .await;

        // For 3.5 s the member's watches keep failing, each failure followed by an event: a
        // routine 410 Gone (the API server answers) and a timeout (it does not), by turns.
        let status =
            |code| Box::new(kube::core::Status::failure("gone", "Expired").with_code(code));
        let start = Instant::now();
        let mut turn = 0;
        while start.elapsed() < Duration::from_millis(3500) {
            let error = if turn % 2 == 0 {
                watcher::Error::WatchError(status(410))
            } else {
                watcher::Error::WatchFailed(kube::Error::Service(Box::new(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "timed out",
                ))))
            };
            turn += 1;
            events
                .unbounded_send(Feed::watch_error("serviceimports", false, &error))
                .unwrap();
            events
                .unbounded_send(feed(Input::Namespace(Event::Apply(sim::namespace("shop")))))
                .unwrap();
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        stop.send(()).unwrap();
        task.await.unwrap();

        // Refused writes back off (1 s, then 2 s): attempts at 0, 1 and 3 s, not one per
        // watch error.
        let attempts = refused.lock().unwrap().len();
        assert!(
            (2..=4).contains(&attempts),
            "the refused status write was attempted {attempts} times in 3.5 s"
        );
    }

    /// An export deleted while its status write waited (under load the watch runs behind):
    /// the write's 404 drops it, counted once, and however often the service is reconciled
    /// meanwhile the status is not written again until the watch delivers the export again.
    #[tokio::test]
    async fn a_status_write_for_an_export_that_is_gone_is_dropped_not_retried() {
        use std::sync::atomic::{AtomicBool, Ordering};

        let config = sim::cluster_config(0, None).unwrap();
        let key = ServiceKey::new("shop", "web");
        let gone = Arc::new(AtomicBool::new(true));
        let attempts: Arc<Mutex<usize>> = Arc::default();
        let mut writer = MockAgentWriter::new();
        let (recorded, export_gone) = (Arc::clone(&attempts), Arc::clone(&gone));
        writer.expect_write().returning(move |write| {
            if matches!(write, Write::ApplyServiceExportStatus { .. }) {
                *recorded.lock().unwrap() += 1;
                if export_gone.load(Ordering::SeqCst) {
                    return Err(WriteError::Refused {
                        code: 404,
                        message: "serviceexports.multicluster.x-k8s.io \"web\" not found".into(),
                    });
                }
            }
            Ok(())
        });
        writer.expect_heartbeat().returning(|heartbeat| {
            let mut lease = match heartbeat {
                Heartbeat::Create(lease) | Heartbeat::Replace(lease) => (**lease).clone(),
                Heartbeat::Blocked { .. } => return Ok(None),
            };
            lease.metadata.resource_version = Some("7".into());
            Ok(Some(lease))
        });
        let metrics = Arc::new(Metrics::new());
        let mut runtime = bare_runtime(config, writer, Duration::from_secs(10));
        runtime.metrics = Arc::clone(&metrics);
        let (events, stop, task) = start(runtime);
        let mut all = listed_shop(&key);
        all.extend(listed(Vec::new(), Input::Record));
        all.extend(listed(Vec::new(), Input::Lease));
        for f in all {
            events.unbounded_send(f).unwrap();
        }
        wait_for("the status write's 404", || *attempts.lock().unwrap() == 1).await;
        // The Service changes ten times (each a reconcile of the export) before the watch
        // delivers the export's deletion.
        for port in 81..91 {
            events
                .unbounded_send(feed(Input::Service(Event::Apply(sim::service(
                    &key,
                    "10.96.0.1",
                    &[port],
                )))))
                .unwrap();
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let dropped =
            "clusterset_agent_writes_dropped_total{operation=\"apply_service_export_status\"} 1";
        wait_for("the dropped write's count", || {
            metrics.encode().contains(dropped)
        })
        .await;
        assert_eq!(
            *attempts.lock().unwrap(),
            1,
            "the dropped write was retried"
        );
        assert!(
            !metrics.encode().contains(
                "clusterset_agent_local_errors_total{operation=\"apply_service_export_status\"}"
            ),
            "a write for an object that is gone is not an error"
        );

        // A new export of the same name: its status is written again.
        gone.store(false, Ordering::SeqCst);
        events
            .unbounded_send(feed(Input::ServiceExport(Event::Apply(
                sim::service_export(&key, k8s_openapi::jiff::Timestamp::now()),
            ))))
            .unwrap();
        wait_for("the new export's status", || *attempts.lock().unwrap() == 2).await;
        stop.send(()).unwrap();
        task.await.unwrap();
    }

    #[tokio::test]
    async fn when_the_hub_answers_again_a_failed_publication_goes_out_at_once() {
        use std::sync::atomic::{AtomicBool, Ordering};

        let config = sim::cluster_config(0, None).unwrap();
        let key = ServiceKey::new("shop", "web");
        // The hub answers the first heartbeat and then goes away until `hub_up` is set again.
        let hub_up = Arc::new(AtomicBool::new(true));
        let publications: Arc<Mutex<Vec<(Instant, bool)>>> = Arc::default();
        let mut writer = MockAgentWriter::new();
        let (up, recorded) = (Arc::clone(&hub_up), Arc::clone(&publications));
        writer.expect_write().returning(move |write| {
            if !write.is_broker() {
                return Ok(());
            }
            let up = up.load(Ordering::SeqCst);
            recorded.lock().unwrap().push((Instant::now(), up));
            if up {
                Ok(())
            } else {
                Err(WriteError::unreachable(sim::UNREACHABLE))
            }
        });
        let up = Arc::clone(&hub_up);
        let first = AtomicBool::new(true);
        writer.expect_heartbeat().returning(move |heartbeat| {
            if !up.load(Ordering::SeqCst) {
                return Err(WriteError::unreachable(sim::UNREACHABLE));
            }
            let mut lease = match heartbeat {
                Heartbeat::Create(lease) | Heartbeat::Replace(lease) => (**lease).clone(),
                Heartbeat::Blocked { .. } => return Ok(None),
            };
            lease.metadata.resource_version = Some("7".into());
            if first.swap(false, Ordering::SeqCst) {
                up.store(false, Ordering::SeqCst);
            }
            Ok(Some(lease))
        });
        let runtime = bare_runtime(config, writer, Duration::from_millis(100));
        let (events, stop, task) = start(runtime);
        let mut all = listed_shop(&key);
        all.extend(listed(Vec::new(), Input::Record));
        all.extend(listed(Vec::new(), Input::Lease));
        for f in all {
            events.unbounded_send(f).unwrap();
        }

        // No Lease watch event is sent: the Lease the hub stored on the first heartbeat is
        // enough for the agent to publish. The hub is gone by then: the publication fails and
        // is retried with backoff (after 1 s, then 2 s, then 4 s).
        wait_for("three failed publications", || {
            publications.lock().unwrap().len() >= 3
        })
        .await;
        hub_up.store(true, Ordering::SeqCst);
        let back = Instant::now();
        wait_for("the publication after the hub's return", || {
            publications.lock().unwrap().iter().any(|(_, ok)| *ok)
        })
        .await;
        let took = back.elapsed();
        stop.send(()).unwrap();
        task.await.unwrap();
        let failed = publications
            .lock()
            .unwrap()
            .iter()
            .filter(|(_, ok)| !*ok)
            .count();
        assert_eq!(failed, 3, "{:?}", publications.lock().unwrap());
        assert!(
            took < Duration::from_secs(2),
            "the publication went out {took:?} after the hub answered a heartbeat again; its backoff was 4 s"
        );
    }
}

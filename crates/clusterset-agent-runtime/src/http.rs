//! `/metrics`, `/healthz` and `/readyz`: the server every clusterset daemon shares
//! ([`clusterset_daemon::http`]) with the agent's metrics and readiness.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clusterset_daemon::{MetricsText, ReadinessCheck};
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// What `/readyz` reports: ready only once the local and the broker caches have synced and the
/// core has started (a leader), or once they have synced (a follower, which serves DNS from
/// them and starts nothing).
#[derive(Debug, Default)]
pub struct Readiness {
    local_synced: AtomicBool,
    broker_synced: AtomicBool,
    started: AtomicBool,
}

impl Readiness {
    /// Records the sync state; `started`: the leader's core has made its first pass, or this
    /// replica follows.
    pub fn set(&self, local_synced: bool, broker_synced: bool, started: bool) {
        self.local_synced.store(local_synced, Ordering::Relaxed);
        self.broker_synced.store(broker_synced, Ordering::Relaxed);
        self.started.store(started, Ordering::Relaxed);
    }

    /// `Ok` when ready, else what is still awaited.
    pub fn check(&self) -> Result<(), String> {
        let mut waiting = Vec::new();
        if !self.local_synced.load(Ordering::Relaxed) {
            waiting.push("the member cluster's caches to sync");
        }
        if !self.broker_synced.load(Ordering::Relaxed) {
            waiting.push("the broker's caches to sync");
        }
        if waiting.is_empty() && !self.started.load(Ordering::Relaxed) {
            waiting.push("the first reconcile");
        }
        if waiting.is_empty() {
            Ok(())
        } else {
            Err(format!("waiting for {}", waiting.join(" and ")))
        }
    }
}

impl MetricsText for Metrics {
    fn metrics_text(&self) -> String {
        self.encode()
    }
}

impl ReadinessCheck for Readiness {
    fn readiness(&self) -> Result<(), String> {
        self.check()
    }
}

/// Serves `/metrics`, `/healthz` and `/readyz` until the task is dropped.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
) -> std::io::Result<()> {
    clusterset_daemon::serve(listener, Arc::new((metrics, readiness))).await
}

//! The agent's readiness, as `/readyz` reports it: the HTTP endpoints are every daemon's
//! ([`clusterset_daemon::Endpoints`]), serving this and the agent's
//! [`Metrics`](crate::metrics::Metrics).

use std::sync::atomic::{AtomicBool, Ordering};

use clusterset_daemon::ReadinessCheck;

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

impl ReadinessCheck for Readiness {
    fn readiness(&self) -> Result<(), String> {
        self.check()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ready_once_both_caches_synced_and_the_core_started() {
        let readiness = Readiness::default();
        assert_eq!(
            readiness.readiness(),
            Err(
                "waiting for the member cluster's caches to sync and the broker's caches to sync"
                    .into()
            )
        );
        readiness.set(true, true, false);
        assert_eq!(
            readiness.readiness(),
            Err("waiting for the first reconcile".into())
        );
        readiness.set(true, true, true);
        assert_eq!(readiness.readiness(), Ok(()));
    }
}

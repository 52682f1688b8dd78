//! The operator's readiness, as `/readyz` reports it: the HTTP endpoints are every daemon's
//! ([`clusterset_daemon::Endpoints`]), serving this and the operator's
//! [`Metrics`](crate::metrics::Metrics).

use std::sync::atomic::{AtomicBool, Ordering};

use clusterset_daemon::ReadinessCheck;

/// What `/readyz` reports: ready once every watch cache has synced and reconciling started.
#[derive(Debug, Default)]
pub struct Readiness {
    synced: AtomicBool,
}

impl Readiness {
    /// Records that the caches synced and the reconciler runs.
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
    }

    /// `Ok` when ready, else what is still awaited.
    pub fn check(&self) -> Result<(), String> {
        if self.synced.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err("waiting for the watch caches to sync (see the log for failing watches)".to_owned())
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
    fn ready_only_after_the_caches_synced() {
        let readiness = Readiness::default();
        assert_eq!(
            readiness.readiness(),
            Err("waiting for the watch caches to sync (see the log for failing watches)".into())
        );
        readiness.set_synced();
        assert_eq!(readiness.readiness(), Ok(()));
    }
}

//! Failed writes and unreachable API servers: each failed write keeps its own backoff, an API
//! server's return retries the writes that failed without an answer, and a failed broker write
//! shows on the ServiceExport.

use std::collections::BTreeMap;

use k8s_openapi::jiff::{SignedDuration, Timestamp};
use mcs_types::ServiceKey;

use super::{AgentCore, Side, later};
use crate::write::{Target, Write};

/// One failed write's backoff. Each target keeps its own, so that one API server's return (or
/// one write's success) does not restart the backoff of another.
#[derive(Debug, Clone, Copy)]
pub(super) struct Backoff {
    pub(super) attempts: u32,
    pub(super) retry_at: Option<Timestamp>,
    /// Its API server answered the last attempt (a refusal: 403, 409, 422...): retrying it
    /// when that API server returns from an outage would not help, so it keeps its backoff.
    pub(super) answered: bool,
}

/// A service's failed writes, each with its backoff, and the broker error its ServiceExport
/// shows.
#[derive(Debug, Clone, Default)]
pub(super) struct Failure {
    pub(super) targets: BTreeMap<Target, Backoff>,
    pub(super) publish_error: Option<String>,
}

impl Failure {
    /// Whether a failed write to `side` waits for its retry time at `now`.
    pub(super) fn holds(&self, side: Side, now: Timestamp) -> bool {
        self.targets
            .iter()
            .any(|(t, b)| t.side() == side && b.retry_at.is_some_and(|at| at > now))
    }
}

/// The wait before retry `attempts` of a failed write: 1 s doubling to 60 s.
pub(super) fn backoff(attempts: u32) -> SignedDuration {
    let seconds = 1_i64 << attempts.saturating_sub(1).min(6);
    SignedDuration::from_secs(seconds.min(60))
}

impl AgentCore {
    /// Reports that an API server did not answer: one of its watches or (the broker) a
    /// heartbeat failed with a connection error, a timeout or a 5xx. A refusal (403, 404, 410
    /// Gone, 422...) is an answer: report it with [`answered`](Self::answered). When it answers
    /// again, the writes to it that failed without an answer are retried at once instead of
    /// waiting out their backoff.
    pub fn unreachable(&mut self, side: Side) {
        self.observed.unreachable.insert(side);
    }

    /// Reports that an API server answered: a watch event from it (every input counts; the
    /// core calls this itself in [`handle`](Self::handle)), a watch error or a write it refused
    /// with a status below 500, a write it carried out, or a heartbeat the hub took. If it had
    /// not answered before ([`unreachable`](Self::unreachable)), every write to it that failed
    /// without an answer (connection error, timeout, 5xx) is retried now, its backoff started
    /// afresh. Writes it refused keep their backoff, and so do writes to the other API server.
    pub fn answered(&mut self, side: Side) {
        if !self.observed.unreachable.remove(&side) {
            return;
        }
        for (key, failure) in &mut self.decided.failures {
            let mut reset = false;
            for (target, backoff) in &mut failure.targets {
                if target.side() == side && !backoff.answered {
                    backoff.attempts = 0;
                    backoff.retry_at = None;
                    reset = true;
                }
            }
            if reset {
                self.decided.dirty.insert(key.clone());
            }
        }
    }

    /// Reports that a write was not attempted because an earlier write of its service failed
    /// (writes of one service go out in order): it is emitted again when the service is next
    /// reconciled, and its service is reconciled now (so a ServiceExport shows the failure).
    pub fn write_skipped(&mut self, write: &Write) {
        self.decided.in_flight.release(&write.target());
        self.forget_written(write);
        self.decided.dirty.insert(write.service());
    }

    /// Reports that a write failed without an answer from its API server (a connection error,
    /// a timeout, a 5xx): it is retried with backoff (1 s doubling to 60 s, its own count per
    /// write), or at once when its API server answers again after an outage (see
    /// [`answered`](Self::answered)). A failed broker write shows as `Ready=False/Failed` on
    /// the ServiceExport. Meanwhile the service's other writes to the same API server wait too,
    /// except its ServiceExport's status (unless writing that is what failed).
    pub fn write_failed(&mut self, write: &Write, message: &str, now: Timestamp) {
        self.record_failure(write, message, false, now);
    }

    /// Reports that the API server refused a write (a status below 500 other than a 404 on a
    /// delete: 403, 409, 422...): as [`write_failed`](Self::write_failed), except that the
    /// refusal shows that the API server answers ([`answered`](Self::answered)) and that the
    /// write keeps its backoff when the API server returns from an outage (retrying it sooner
    /// would be refused again).
    pub fn write_refused(&mut self, write: &Write, message: &str, now: Timestamp) {
        self.answered(write.target().side());
        self.record_failure(write, message, true, now);
    }

    pub(super) fn record_failure(
        &mut self,
        write: &Write,
        message: &str,
        answered: bool,
        now: Timestamp,
    ) {
        let target = write.target();
        self.decided.in_flight.release(&target);
        self.forget_written(write);
        let key = write.service();
        let failure = self.decided.failures.entry(key.clone()).or_default();
        let backoff_of = failure.targets.entry(target).or_insert(Backoff {
            attempts: 0,
            retry_at: None,
            answered,
        });
        backoff_of.attempts = backoff_of.attempts.saturating_add(1);
        backoff_of.retry_at = Some(later(now, backoff(backoff_of.attempts)));
        backoff_of.answered = answered;
        if write.is_broker() {
            failure.publish_error = Some(format!(
                "Writing the record to the broker failed: {message}"
            ));
        }
        // Reconcile now so the ServiceExport shows the failure; writes wait for the retry time.
        self.decided.dirty.insert(key);
    }

    /// Reports that a write to the member cluster found its object or its namespace gone (a
    /// 404: the ServiceExport deleted while its status write waited, the namespace deleted):
    /// the write is dropped, not retried; the watch's delete event settles the rest. No status
    /// is written for that export until the watch delivers it again (its deletion, or a new
    /// export of the same name). The API server answered ([`answered`](Self::answered)).
    pub fn write_gone(&mut self, write: &Write) {
        self.answered(write.target().side());
        self.decided.in_flight.release(&write.target());
        self.forget_written(write);
        let key = write.service();
        if let Write::ApplyServiceExportStatus { key, .. } = write {
            self.decided.exports_gone.insert(key.clone());
        }
        if let Some(failure) = self.decided.failures.get_mut(&key) {
            failure.targets.remove(&write.target());
            if failure.targets.is_empty() && failure.publish_error.is_none() {
                self.decided.failures.remove(&key);
            }
        }
    }

    /// An export status write that did not go through is no longer the newest state of the
    /// export's conditions: the stored status is.
    fn forget_written(&mut self, write: &Write) {
        if let Write::ApplyServiceExportStatus { key, .. } = write {
            self.decided.export_conditions_written.remove(key);
        }
    }

    /// Reports that a write succeeded (clears its failure, if it had one); its API server
    /// answers ([`answered`](Self::answered)).
    pub fn write_succeeded(&mut self, write: &Write) {
        self.answered(write.target().side());
        let key = write.service();
        let Some(failure) = self.decided.failures.get_mut(&key) else {
            return;
        };
        failure.targets.remove(&write.target());
        if write.is_broker() && failure.publish_error.take().is_some() {
            self.decided.dirty.insert(key.clone());
        }
        if failure.targets.is_empty() {
            self.decided.failures.remove(&key);
        }
    }

    /// Forgets the failed broker write of `key` (and the error it shows on the export).
    pub(super) fn broker_settled(&mut self, key: &ServiceKey) {
        let Some(failure) = self.decided.failures.get_mut(key) else {
            return;
        };
        failure.targets.retain(|t, _| t.side() != Side::Broker);
        failure.publish_error = None;
        if failure.targets.is_empty() {
            self.decided.failures.remove(key);
        }
    }
}

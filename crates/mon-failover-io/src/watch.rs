//! Watching the quorum while something else changes the mons: a background task that asks
//! Ceph for the quorum at a fixed interval and records every answer that was not a quorum.
//! The tests, `mcsctl demo` and the lab use it to show that a migration never lost quorum.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tokio::sync::watch;
use tokio::task::JoinHandle;

use clusterset_error_chain::ErrorChain;
use mon_failover::quorum::majority;
use mon_failover::{AdminError, CephMonAdmin, QuorumStatus};

/// What a [`QuorumWatch`] asks: the quorum now. Every [`CephMonAdmin`] is one (through the
/// cluster's clients); [`AdminSocketQuorum`](crate::AdminSocketQuorum) asks the mons of a local
/// cluster on their admin sockets.
#[async_trait]
pub trait QuorumProbe: Send + Sync {
    /// The quorum and the monmap, or why there is none.
    async fn quorum_status(&self) -> Result<QuorumStatus, AdminError>;
}

#[async_trait]
impl<T: CephMonAdmin + ?Sized> QuorumProbe for T {
    async fn quorum_status(&self) -> Result<QuorumStatus, AdminError> {
        CephMonAdmin::quorum_status(self).await
    }
}

/// What a [`QuorumWatch`] saw.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct QuorumRecord {
    /// Polls made.
    pub polls: u32,
    /// Polls that found no quorum: when (since the watch started) and why.
    pub losses: Vec<(Duration, String)>,
    /// Each distinct quorum seen, in order, as `monmap epoch: names in quorum / monmap size`.
    pub quorums: Vec<String>,
}

impl QuorumRecord {
    /// Whether every poll found a quorum.
    pub fn never_lost(&self) -> bool {
        self.losses.is_empty() && self.polls > 0
    }
}

/// A running watch; [`QuorumWatch::stop`] ends it and returns the record.
#[derive(Debug)]
pub struct QuorumWatch {
    stop: watch::Sender<bool>,
    task: JoinHandle<QuorumRecord>,
}

impl QuorumWatch {
    /// Starts polling `admin` every `every` (the first poll at once).
    pub fn start(admin: Arc<dyn QuorumProbe>, every: Duration) -> Self {
        let (stop, mut stopped) = watch::channel(false);
        let task = tokio::spawn(async move {
            let started = Instant::now();
            let mut record = QuorumRecord::default();
            let mut interval = tokio::time::interval(every);
            interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tokio::select! {
                    _ = stopped.changed() => return record,
                    _ = interval.tick() => {}
                }
                record.polls = record.polls.saturating_add(1);
                match admin.quorum_status().await {
                    Ok(status) => {
                        let size = status.monmap.mons.len();
                        let names = status.quorum_names.join(",");
                        if status.quorum_names.len() < majority(size) {
                            record.losses.push((
                                started.elapsed(),
                                format!("only {names} of {size} mons in quorum"),
                            ));
                        }
                        let line = format!("epoch {}: {names} / {size}", status.monmap.epoch);
                        if record.quorums.last() != Some(&line) {
                            record.quorums.push(line);
                        }
                    }
                    Err(error) => record
                        .losses
                        .push((started.elapsed(), ErrorChain(&error).to_string())),
                }
            }
        });
        QuorumWatch { stop, task }
    }

    /// Stops the watch (after the poll in progress) and returns what it saw.
    pub async fn stop(self) -> QuorumRecord {
        let _ = self.stop.send(true);
        self.task.await.unwrap_or_default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mon_failover::{CommandError, MockCephMonAdmin};

    fn status(quorum: &[&str], size: usize) -> QuorumStatus {
        let mons = [("a", ""), ("b", ""), ("c", "")];
        crate::test_support::quorum_status(&mons[..size], quorum)
    }

    #[tokio::test]
    async fn records_a_poll_without_quorum() {
        let mut admin = MockCephMonAdmin::new();
        let mut answers = vec![
            Ok(status(&["a", "b", "c"], 3)),
            Err(AdminError::Command(CommandError::Timeout {
                command: "ceph quorum_status".into(),
                after: Duration::from_secs(5),
            })),
            Ok(status(&["a", "b"], 3)),
        ]
        .into_iter();
        let (done_tx, done_rx) = tokio::sync::oneshot::channel();
        let mut done_tx = Some(done_tx);
        admin.expect_quorum_status().returning(move || {
            let answer = answers.next().unwrap_or_else(|| Ok(status(&["a", "b"], 3)));
            if answers.len() == 0
                && let Some(tx) = done_tx.take()
            {
                let _ = tx.send(());
            }
            answer
        });
        let watch = QuorumWatch::start(Arc::new(admin), Duration::from_millis(1));
        done_rx.await.unwrap();
        let record = watch.stop().await;
        assert!(record.polls >= 3);
        assert!(!record.never_lost());
        assert!(
            record.losses[0].1.contains("did not finish"),
            "{:?}",
            record.losses
        );
        assert_eq!(record.quorums[0], "epoch 3: a,b,c / 3");
        assert_eq!(record.quorums[1], "epoch 3: a,b / 3");
    }
}

//! Leader election over a `coordination.k8s.io/v1` Lease, so that only one replica writes while
//! every replica watches.
//!
//! The decision is [`clusterset_daemon::lease`]'s, the one the agent's heartbeat makes too
//! (client-go's rule): a follower takes the Lease only once it has seen the same record,
//! unchanged, for the record's `leaseDurationSeconds` **by its own clock**, so clock skew
//! between nodes cannot make a replica take a Lease that is still being renewed; every write
//! carries the `resourceVersion` read, so of two replicas racing for the Lease one gets 409
//! Conflict and stays a follower. What is the operator's own is the loop around it:
//!
//! - the holder renews every retry period; a leader that cannot renew within its renew deadline
//!   (shorter than the Lease duration) stops leading, before any other replica may take over;
//! - a leader that finds the Lease naming someone else (or no one) stops leading at once;
//! - on a clean stop the leader hands the Lease back ([`lease::release`]).
//!
//! [`Elector`] reads and writes the Lease; [`elect`] is the loop that keeps trying and reports
//! leadership on a [`tokio::sync::watch`] channel; [`Leadership`] runs it for the runtime.

use std::sync::Arc;
use std::time::Duration;

use clusterset_daemon::Clock;
use clusterset_daemon::lease::{self, Candidate, Decision, Observed};
use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::metrics::Metrics;

/// Which Lease, who this replica is, and the timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSettings {
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace.
    pub namespace: String,
    /// This replica's identity (the pod name); must be unique among the replicas.
    pub identity: String,
    /// `leaseDurationSeconds` written: how long the others wait, after the last renewal they
    /// saw, before taking over.
    pub duration: Duration,
    /// How long the leader keeps trying to renew before it gives up; shorter than `duration`.
    pub renew_deadline: Duration,
    /// Time between attempts (renewals of the leader, checks of the followers).
    pub retry_period: Duration,
}

impl LeaseSettings {
    /// Settings with client-go's default timing (15 s duration, 10 s renew deadline, 2 s
    /// retry period).
    pub fn new(name: &str, namespace: &str, identity: &str) -> Self {
        Self {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            identity: identity.to_owned(),
            duration: Duration::from_secs(15),
            renew_deadline: Duration::from_secs(10),
            retry_period: Duration::from_secs(2),
        }
    }

    /// This replica as a candidate for the Lease.
    pub fn candidate(&self) -> Candidate {
        Candidate::new(&self.name, &self.namespace, &self.identity, self.duration)
    }
}

/// Why reading or writing the Lease failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The API server refused or could not be reached.
    #[error(
        "cannot read or write Lease {namespace}/{name}: {source} (does the operator's Role grant get, create and update on leases?)"
    )]
    Api {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// Why.
        source: kube::Error,
    },
    /// The attempt did not finish in time.
    #[error("the Lease request did not finish within {0:?}")]
    Timeout(Duration),
}

/// Where one replica stands after an attempt.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Standing {
    /// This replica holds the Lease (it has just been written).
    Leader,
    /// Another replica holds the Lease, or won the race for it.
    Follower {
        /// The holder, when known.
        holder: Option<String>,
    },
}

/// Reads and writes the Lease for one replica, remembering what it observed.
pub struct Elector {
    api: Api<Lease>,
    settings: LeaseSettings,
    clock: Clock,
    observed: Option<Observed>,
    leading: bool,
}

impl std::fmt::Debug for Elector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Elector")
            .field("settings", &self.settings)
            .field("observed", &self.observed)
            .field("leading", &self.leading)
            .finish_non_exhaustive()
    }
}

fn is_status(error: &kube::Error, code: u16) -> bool {
    matches!(error, kube::Error::Api(status) if status.code == code)
}

impl Elector {
    /// An elector for `settings` through `client`, reading the time from `clock`.
    pub fn new(client: Client, settings: LeaseSettings, clock: Clock) -> Self {
        Self {
            api: Api::namespaced(client, &settings.namespace),
            settings,
            clock,
            observed: None,
            leading: false,
        }
    }

    /// The settings.
    pub fn settings(&self) -> &LeaseSettings {
        &self.settings
    }

    /// Whether the last attempt left this replica holding the Lease.
    pub fn is_leading(&self) -> bool {
        self.leading
    }

    fn api_error(&self, source: kube::Error) -> LeaseError {
        LeaseError::Api {
            namespace: self.settings.namespace.clone(),
            name: self.settings.name.clone(),
            source,
        }
    }

    /// One attempt: read the Lease, decide, and write if the decision says so. A 409 Conflict
    /// on the write means another replica changed the Lease first: this replica is then a
    /// follower. On an error the standing is unchanged.
    pub async fn attempt(&mut self) -> Result<Standing, LeaseError> {
        let read = match self.api.get_opt(&self.settings.name).await {
            Ok(read) => read,
            Err(error) => return Err(self.api_error(error)),
        };
        let now = (self.clock)();
        self.observed = read.map(|lease| Observed::update(self.observed.as_ref(), lease, now));
        let params = PostParams::default();
        let decision = lease::decide(self.observed.as_ref(), &self.settings.candidate(), now);
        let written = match decision {
            // A leader whose Lease names someone else, or no one, has lost it (another replica
            // took it, or it was handed back): it stops at once, whatever it could take.
            Decision::Acquire(_) | Decision::Wait { .. } if self.leading => {
                self.leading = false;
                let holder = self
                    .observed
                    .as_ref()
                    .and_then(|o| lease::holder(&o.lease))
                    .map(str::to_owned);
                return Ok(Standing::Follower { holder });
            }
            Decision::Wait { holder, .. } => {
                return Ok(Standing::Follower {
                    holder: Some(holder),
                });
            }
            Decision::Create(lease) => self.api.create(&params, &lease).await,
            Decision::Acquire(lease) | Decision::Renew(lease) => {
                self.api.replace(&self.settings.name, &params, &lease).await
            }
        };
        match written {
            Ok(lease) => {
                self.observed = Some(Observed {
                    lease,
                    since: (self.clock)(),
                });
                self.leading = true;
                Ok(Standing::Leader)
            }
            Err(error) if is_status(&error, 409) => {
                // Read again next time: the record changed.
                self.leading = false;
                Ok(Standing::Follower { holder: None })
            }
            Err(error) => Err(self.api_error(error)),
        }
    }

    /// Hands the Lease back if this replica holds it (see [`lease::release`]).
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        if !self.leading {
            return Ok(());
        }
        self.leading = false;
        let Some(released) = self
            .observed
            .as_ref()
            .and_then(|o| lease::release(&o.lease, &self.settings.identity, (self.clock)()))
        else {
            return Ok(());
        };
        match self
            .api
            .replace(&self.settings.name, &PostParams::default(), &released)
            .await
        {
            Ok(_) => Ok(()),
            // Someone else wrote it meanwhile: nothing to hand back.
            Err(error) if is_status(&error, 409) => Ok(()),
            Err(error) => Err(self.api_error(error)),
        }
    }
}

/// How [`elect`] ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ended {
    /// This replica led and stopped leading: another replica took the Lease, or it could not
    /// renew within the renew deadline. Nothing may be written any more.
    Lost(String),
    /// Asked to stop; the Lease was handed back if held.
    Stopped,
}

/// Keeps trying to lead: a follower checks the Lease every retry period; a leader renews it every
/// retry period. Sends `true` on `leading` when this replica becomes the leader. Returns
/// [`Ended::Lost`] as soon as a leader stops leading (it never sends `false`: the caller stops
/// writing by stopping altogether, as controller-runtime does), or [`Ended::Stopped`] when
/// `stop` fires (handing the Lease back first).
pub async fn elect(
    mut elector: Elector,
    leading: watch::Sender<bool>,
    metrics: Arc<Metrics>,
    mut stop: oneshot::Receiver<()>,
) -> Ended {
    let settings = elector.settings().clone();
    metrics.leader.set(0);
    // When the leader gives up if it cannot renew.
    let mut deadline: Option<Instant> = None;
    loop {
        let was_leading = elector.is_leading();
        let limit = deadline.unwrap_or_else(|| Instant::now() + settings.renew_deadline);
        let attempt = tokio::select! {
            attempt = tokio::time::timeout_at(limit, elector.attempt()) => attempt
                .unwrap_or(Err(LeaseError::Timeout(settings.renew_deadline))),
            _ = &mut stop => return stopped(&mut elector, &metrics).await,
        };
        match attempt {
            Ok(Standing::Leader) => {
                deadline = Some(Instant::now() + settings.renew_deadline);
                if !was_leading {
                    tracing::info!(
                        identity = settings.identity,
                        lease = settings.name,
                        "leading: this replica holds the Lease and starts writing"
                    );
                    metrics.leader.set(1);
                    leading.send_replace(true);
                }
            }
            Ok(Standing::Follower { holder }) => {
                if was_leading {
                    metrics.leader.set(0);
                    return Ended::Lost(format!(
                        "the Lease is now held by {}",
                        holder.as_deref().unwrap_or("another replica")
                    ));
                }
                tracing::debug!(?holder, "following: another replica holds the Lease");
            }
            Err(error) => {
                if was_leading && deadline.is_some_and(|d| Instant::now() >= d) {
                    metrics.leader.set(0);
                    return Ended::Lost(format!(
                        "the Lease could not be renewed within {:?}: {error}",
                        settings.renew_deadline
                    ));
                }
                tracing::warn!("leader election: {error}; retrying");
            }
        }
        let mut next = Instant::now() + settings.retry_period;
        if let Some(deadline) = deadline {
            next = next.min(deadline);
        }
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            _ = &mut stop => return stopped(&mut elector, &metrics).await,
        }
    }
}

async fn stopped(elector: &mut Elector, metrics: &Metrics) -> Ended {
    metrics.leader.set(0);
    if let Err(error) = elector.release().await {
        tracing::warn!(
            "could not hand the Lease back (the next leader waits for it to expire): {error}"
        );
    }
    Ended::Stopped
}

/// Leadership of this replica as the runtime sees it: an [`elect`] loop in its own task, or no
/// election at all (always leading, for a single replica started with
/// `--leader-election=false`).
#[derive(Debug)]
pub struct Leadership {
    leading: watch::Receiver<bool>,
    task: Option<tokio::task::JoinHandle<Ended>>,
    stop: Option<oneshot::Sender<()>>,
}

impl Leadership {
    /// No election: this replica always leads.
    pub fn always(metrics: &Metrics) -> Self {
        metrics.leader.set(1);
        let (_, leading) = watch::channel(true);
        Self {
            leading,
            task: None,
            stop: None,
        }
    }

    /// Starts [`elect`] with `elector` in a task of its own.
    pub fn spawn(elector: Elector, metrics: Arc<Metrics>) -> Self {
        let (sender, leading) = watch::channel(false);
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(elect(elector, sender, metrics, stopped));
        Self {
            leading,
            task: Some(task),
            stop: Some(stop),
        }
    }

    /// Whether this replica leads now.
    pub fn is_leading(&self) -> bool {
        *self.leading.borrow()
    }

    /// Waits until this replica leads (never returns if the election ends before that).
    pub async fn acquired(&mut self) {
        if self.leading.wait_for(|leading| *leading).await.is_err() {
            std::future::pending::<()>().await;
        }
    }

    /// Waits until this replica stops leading and says why (never returns without an
    /// election).
    pub async fn lost(&mut self) -> String {
        match self.task.as_mut() {
            None => std::future::pending().await,
            Some(task) => match task.await {
                Ok(Ended::Lost(reason)) => reason,
                Ok(Ended::Stopped) => "the election was stopped".to_owned(),
                Err(error) => format!("the election task failed: {error}"),
            },
        }
    }

    /// Stops the election, handing the Lease back if this replica holds it. Call it only after
    /// every writer has stopped.
    pub async fn stop(mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(task) = self.task.take() {
            let _ = task.await;
        }
    }
}

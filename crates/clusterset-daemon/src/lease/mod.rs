//! Holding a `coordination.k8s.io/v1` Lease against the API server: the IO around
//! [`kube_lease`]'s rules. Used for both daemons' leader election (every replica watches, only
//! the holder writes).
//!
//! - every write is a create or a replace carrying the `resourceVersion` that was read, so of two
//!   replicas racing for the Lease one gets 409 Conflict and stays a follower;
//! - another holder's Lease is taken only once this replica has seen its record unchanged for
//!   its duration by its own monotonic clock ([`kube_lease::Observed::takeover_at`]);
//! - a leader that cannot renew within its renew deadline (shorter than the Lease duration)
//!   stops leading, before any other replica may take over.
//!
//! [`Elector`] reads and writes the Lease; [`elect`] is the loop that keeps trying and reports
//! leadership on a [`tokio::sync::watch`] channel; [`Leadership`] runs it in a task.
//! [`LeaderElectionArgs`] are the flags both daemons flatten into their `run` command, with one
//! identity rule and one check of the timing.

mod args;

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use kube::api::PostParams;
use kube::{Api, Client};
use kube_lease::{Action, DEFAULT_SKEW_ALLOWANCE, Decision, LeaseClaim, Observed, decide, release};
use prometheus_client::metrics::gauge::Gauge;
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::{Clock, ErrorChain};

pub use args::{
    ElectionAliases, ElectionEnv, ElectionFlagsError, LeaderElectionArgs, LeaderElectionDefaults,
};

/// Which Lease, who this replica is, and the timing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseSettings {
    /// The Lease, this replica's identity and the duration it declares.
    pub claim: LeaseClaim,
    /// How long the leader keeps trying to renew before it gives up; shorter than the duration.
    pub renew_deadline: Duration,
    /// Time between attempts (renewals of the leader, checks of the followers).
    pub retry_period: Duration,
}

impl LeaseSettings {
    /// client-go's default Lease duration (15 s).
    pub const DEFAULT_DURATION: Duration = Duration::from_secs(15);
    /// client-go's default renew deadline (10 s).
    pub const DEFAULT_RENEW_DEADLINE: Duration = Duration::from_secs(10);
    /// client-go's default retry period (2 s).
    pub const DEFAULT_RETRY_PERIOD: Duration = Duration::from_secs(2);

    /// Settings with client-go's default timing ([`Self::DEFAULT_DURATION`],
    /// [`Self::DEFAULT_RENEW_DEADLINE`], [`Self::DEFAULT_RETRY_PERIOD`]).
    pub fn new(name: &str, namespace: &str, identity: &str) -> Self {
        Self {
            claim: LeaseClaim::new(name, namespace, identity, Self::DEFAULT_DURATION),
            renew_deadline: Self::DEFAULT_RENEW_DEADLINE,
            retry_period: Self::DEFAULT_RETRY_PERIOD,
        }
    }
}

impl LeaseSettings {
    /// These settings with the Lease's `duration`, the leader's `renew_deadline` and the
    /// `retry_period`, which must satisfy 0 < retry period < renew deadline < duration (as
    /// client-go's leader election requires: a leader gives up before anyone may take over).
    ///
    /// ```
    /// use std::time::Duration;
    /// use clusterset_daemon::lease::LeaseSettings;
    ///
    /// let settings = LeaseSettings::new("clusterset-agent", "clusterset-system", "agent-0");
    /// let secs = Duration::from_secs;
    /// assert!(settings.clone().with_timing(secs(15), secs(10), secs(2)).is_ok());
    /// let error = settings.with_timing(secs(15), secs(20), secs(2)).unwrap_err();
    /// assert_eq!(
    ///     error.to_string(),
    ///     "leader election needs retry period < renew deadline < Lease duration, all above zero; got retry period 2s, renew deadline 20s, duration 15s"
    /// );
    /// ```
    pub fn with_timing(
        mut self,
        duration: Duration,
        renew_deadline: Duration,
        retry_period: Duration,
    ) -> Result<Self, LeaseTimingError> {
        if !(Duration::ZERO < retry_period
            && retry_period < renew_deadline
            && renew_deadline < duration)
        {
            return Err(LeaseTimingError {
                duration,
                renew_deadline,
                retry_period,
            });
        }
        self.claim.duration = duration;
        self.renew_deadline = renew_deadline;
        self.retry_period = retry_period;
        Ok(self)
    }
}

/// Leader-election timing that cannot work (see [`LeaseSettings::with_timing`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "leader election needs retry period < renew deadline < Lease duration, all above zero; got retry period {retry_period:?}, renew deadline {renew_deadline:?}, duration {duration:?}"
)]
pub struct LeaseTimingError {
    /// The Lease duration asked for.
    pub duration: Duration,
    /// The renew deadline asked for.
    pub renew_deadline: Duration,
    /// The retry period asked for.
    pub retry_period: Duration,
}

/// Why reading or writing the Lease failed.
#[derive(Debug, thiserror::Error)]
pub enum LeaseError {
    /// The API server refused or could not be reached.
    #[error(
        "cannot read or write Lease {namespace}/{name} (does the Role bound to this pod's ServiceAccount grant get, create and update on leases?)"
    )]
    Api {
        /// The Lease's namespace.
        namespace: String,
        /// The Lease's name.
        name: String,
        /// Why.
        #[source]
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
            api: Api::namespaced(client, &settings.claim.namespace),
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
            namespace: self.settings.claim.namespace.clone(),
            name: self.settings.claim.name.clone(),
            source,
        }
    }

    /// One attempt: read the Lease, decide, and write if the decision says so. A 409 Conflict
    /// on the write means another replica changed the Lease first: this replica is then a
    /// follower. On an error the standing is unchanged.
    pub async fn attempt(&mut self) -> Result<Standing, LeaseError> {
        let read = match self.api.get_opt(&self.settings.claim.name).await {
            Ok(read) => read,
            Err(error) => return Err(self.api_error(error)),
        };
        let (wall, now) = (self.clock.now(), self.clock.monotonic());
        self.observed = read.map(|lease| {
            Observed::update(
                self.observed.as_ref(),
                lease,
                wall,
                now,
                DEFAULT_SKEW_ALLOWANCE,
            )
        });
        let params = PostParams::default();
        let decision = decide(
            self.observed.as_ref(),
            &self.settings.claim,
            self.leading,
            wall,
            now,
        );
        let written = match decision {
            Decision::Act(Action::Wait { holder, .. }) => {
                self.leading = false;
                return Ok(Standing::Follower {
                    holder: Some(holder),
                });
            }
            Decision::Lost { holder } => {
                self.leading = false;
                return Ok(Standing::Follower { holder });
            }
            Decision::Act(Action::Create(lease)) => self.api.create(&params, &lease).await,
            Decision::Act(Action::Acquire(lease) | Action::Renew(lease)) => {
                self.api
                    .replace(&self.settings.claim.name, &params, &lease)
                    .await
            }
        };
        match written {
            Ok(lease) => {
                self.observed = Some(Observed::seen_change(lease, self.clock.monotonic()));
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

    /// Hands the Lease back if this replica holds it (see [`kube_lease::release`]).
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        if !self.leading {
            return Ok(());
        }
        self.leading = false;
        let Some(mut lease) = self.observed.as_ref().map(|o| o.lease().clone()) else {
            return Ok(());
        };
        // At most twice: a 409 means the Lease changed since this replica last saw it (a
        // renewal of its own whose answer it never read, the attempt cut short by the stop,
        // or another replica's write); it decides again on the Lease as it is now.
        for last in [false, true] {
            let Some(released) = release(&lease, &self.settings.claim.identity, self.clock.now())
            else {
                // Not this replica's: nothing to hand back.
                return Ok(());
            };
            match self
                .api
                .replace(&self.settings.claim.name, &PostParams::default(), &released)
                .await
            {
                Ok(_) => return Ok(()),
                Err(error) if is_status(&error, 409) && !last => {
                    match self.api.get_opt(&self.settings.claim.name).await {
                        Ok(Some(current)) => lease = current,
                        Ok(None) => return Ok(()),
                        Err(error) => return Err(self.api_error(error)),
                    }
                }
                // Changed again meanwhile: another replica's by now.
                Err(error) if is_status(&error, 409) => return Ok(()),
                Err(error) => return Err(self.api_error(error)),
            }
        }
        Ok(())
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
/// retry period. Sends `true` on `leading` when this replica becomes the leader, and sets the
/// `leader` gauge to 1 while it leads. Returns [`Ended::Lost`] as soon as a leader stops leading
/// (it never sends `false`: the caller stops writing by stopping altogether, as
/// controller-runtime does), or [`Ended::Stopped`] when `stop` fires (handing the Lease back
/// first).
pub async fn elect(
    mut elector: Elector,
    leading: watch::Sender<bool>,
    leader: Gauge,
    mut stop: oneshot::Receiver<()>,
) -> Ended {
    let settings = elector.settings().clone();
    leader.set(0);
    // When the leader gives up if it cannot renew.
    let mut deadline: Option<Instant> = None;
    loop {
        let was_leading = elector.is_leading();
        let limit = deadline.unwrap_or_else(|| Instant::now() + settings.renew_deadline);
        let attempt = tokio::select! {
            attempt = tokio::time::timeout_at(limit, elector.attempt()) => attempt
                .unwrap_or(Err(LeaseError::Timeout(settings.renew_deadline))),
            _ = &mut stop => return stopped(&mut elector, &leader).await,
        };
        match attempt {
            Ok(Standing::Leader) => {
                deadline = Some(Instant::now() + settings.renew_deadline);
                if !was_leading {
                    tracing::info!(
                        identity = settings.claim.identity,
                        lease = settings.claim.name,
                        "leading: this replica holds the Lease and starts writing"
                    );
                    leader.set(1);
                    leading.send_replace(true);
                }
            }
            Ok(Standing::Follower { holder }) => {
                if was_leading {
                    leader.set(0);
                    return Ended::Lost(format!(
                        "the Lease is now held by {}",
                        holder.as_deref().unwrap_or("another replica")
                    ));
                }
                tracing::debug!(?holder, "following: another replica holds the Lease");
            }
            Err(error) => {
                if was_leading && deadline.is_some_and(|d| Instant::now() >= d) {
                    leader.set(0);
                    return Ended::Lost(format!(
                        "the Lease could not be renewed within {:?}: {}",
                        settings.renew_deadline,
                        ErrorChain(&error)
                    ));
                }
                tracing::warn!(error = %ErrorChain(&error), "leader election failed; retrying");
            }
        }
        let mut next = Instant::now() + settings.retry_period;
        if let Some(deadline) = deadline {
            next = next.min(deadline);
        }
        tokio::select! {
            () = tokio::time::sleep_until(next) => {}
            _ = &mut stop => return stopped(&mut elector, &leader).await,
        }
    }
}

async fn stopped(elector: &mut Elector, leader: &Gauge) -> Ended {
    leader.set(0);
    if let Err(error) = elector.release().await {
        tracing::warn!(
            error = %ErrorChain(&error),
            "could not hand the Lease back (the next leader waits for it to expire)"
        );
    }
    Ended::Stopped
}

/// Leadership of this replica as the runtime sees it: an [`elect`] loop in its own task, or no
/// election at all (always leading, for a single replica started without leader election).
#[derive(Debug)]
pub struct Leadership {
    leading: watch::Receiver<bool>,
    task: Option<tokio::task::JoinHandle<Ended>>,
    stop: Option<oneshot::Sender<()>>,
}

impl Leadership {
    /// No election: this replica always leads (`leader` is set to 1).
    pub fn always(leader: &Gauge) -> Self {
        leader.set(1);
        let (_, leading) = watch::channel(true);
        Self {
            leading,
            task: None,
            stop: None,
        }
    }

    /// Starts [`elect`] with `elector` in a task of its own.
    pub fn spawn(elector: Elector, leader: Gauge) -> Self {
        let (sender, leading) = watch::channel(false);
        let (stop, stopped) = oneshot::channel();
        let task = tokio::spawn(elect(elector, sender, leader, stopped));
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
    ///
    /// Cancel-safe; once it has returned, the election is over ([`stop`](Self::stop) then has
    /// nothing left to stop).
    pub async fn lost(&mut self) -> String {
        let Some(task) = self.task.as_mut() else {
            return std::future::pending().await;
        };
        let ended = task.await;
        // A finished task must not be polled again (by a later `lost` or `stop`).
        self.task = None;
        match ended {
            Ok(Ended::Lost(reason)) => reason,
            Ok(Ended::Stopped) => "the election was stopped".to_owned(),
            Err(error) => format!("the election task failed: {error}"),
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

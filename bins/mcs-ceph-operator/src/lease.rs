//! Leader election over a `coordination.k8s.io/v1` Lease, so that only one replica writes while
//! every replica watches.
//!
//! The semantics are client-go's `leaderelection` package:
//!
//! - the holder renews `renewTime` every retry period; `acquireTime` is when the current holder
//!   took the Lease, `leaseTransitions` counts the changes of holder;
//! - another replica takes the Lease only once it has seen the same record, unchanged, for the
//!   record's `leaseDurationSeconds` **by its own clock** ([`Observed::since`]). The holder's
//!   `renewTime` is never compared with the local clock, so clock skew between nodes cannot make
//!   a replica take a Lease that is still being renewed;
//! - every write is a create or a replace carrying the `resourceVersion` that was read, so of two
//!   replicas racing for the Lease one gets 409 Conflict and stays a follower;
//! - a leader that cannot renew within its renew deadline (shorter than the Lease duration)
//!   stops leading, before any other replica may take over.
//!
//! [`decide`] is the pure decision; [`Elector`] reads and writes the Lease; [`elect`] is the loop
//! that keeps trying and reports leadership on a [`tokio::sync::watch`] channel.

use std::sync::Arc;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::PostParams;
use kube::{Api, Client};
use tokio::sync::{oneshot, watch};
use tokio::time::Instant;

use crate::metrics::Metrics;

/// The wall clock the Lease timestamps come from (replaceable in tests).
pub type Clock = Arc<dyn Fn() -> Timestamp + Send + Sync>;

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

    fn duration_seconds(&self) -> i32 {
        i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// The Lease as one replica last read it, and since when (by the replica's clock) its record has
/// been unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// The Lease read.
    pub lease: Lease,
    /// When this replica first saw the Lease's current `spec`.
    pub since: Timestamp,
}

impl Observed {
    /// Records `lease` read at `now`: the time of observation is kept when the record is the
    /// one seen before (the holder has not renewed meanwhile).
    pub fn update(previous: Option<&Observed>, lease: Lease, now: Timestamp) -> Observed {
        let since = match previous {
            Some(previous) if previous.lease.spec == lease.spec => previous.since,
            _ => now,
        };
        Observed { lease, since }
    }
}

/// What a replica does about the Lease.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// There is no Lease: create this one (held by this replica).
    Create(Box<Lease>),
    /// The Lease is free, or its holder stopped renewing it for its whole duration: replace it
    /// with this one (held by this replica, carrying the `resourceVersion` read).
    Acquire(Box<Lease>),
    /// This replica holds the Lease: replace it with this renewal (carrying the
    /// `resourceVersion` read).
    Renew(Box<Lease>),
    /// Another replica holds the Lease and may still be renewing it: write nothing.
    Wait {
        /// The holder.
        holder: String,
        /// When, by this replica's clock, the Lease may be taken if it is not renewed.
        until: Timestamp,
    },
    /// This replica was leading but the Lease now names someone else (or no one): stop writing.
    Lost {
        /// The holder named now, if any.
        holder: Option<String>,
    },
}

/// The holder of a Lease, if any (an empty identity counts as none).
pub fn holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()?
        .holder_identity
        .as_deref()
        .filter(|h| !h.is_empty())
}

/// The decision of the replica `settings.identity` at `now`, given what it observed of the Lease
/// (`None`: the Lease does not exist) and whether it is leading.
pub fn decide(
    observed: Option<&Observed>,
    settings: &LeaseSettings,
    leading: bool,
    now: Timestamp,
) -> Decision {
    let Some(observed) = observed else {
        return Decision::Create(Box::new(held_by_me(None, settings, now)));
    };
    let lease = &observed.lease;
    match holder(lease) {
        Some(me) if me == settings.identity => {
            Decision::Renew(Box::new(held_by_me(Some(lease), settings, now)))
        }
        other if leading => Decision::Lost {
            holder: other.map(str::to_owned),
        },
        None => Decision::Acquire(Box::new(held_by_me(Some(lease), settings, now))),
        Some(other) => {
            let seconds = lease
                .spec
                .as_ref()
                .and_then(|s| s.lease_duration_seconds)
                .unwrap_or(0)
                .max(0);
            let until = observed
                .since
                .checked_add(SignedDuration::from_secs(i64::from(seconds)))
                .unwrap_or(Timestamp::MAX);
            if now < until {
                Decision::Wait {
                    holder: other.to_owned(),
                    until,
                }
            } else {
                Decision::Acquire(Box::new(held_by_me(Some(lease), settings, now)))
            }
        }
    }
}

/// The Lease held by this replica, renewed at `now`, replacing `previous`.
fn held_by_me(previous: Option<&Lease>, settings: &LeaseSettings, now: Timestamp) -> Lease {
    let previous_spec = previous.and_then(|l| l.spec.clone()).unwrap_or_default();
    let mine = previous.and_then(holder) == Some(settings.identity.as_str());
    let transitions = previous_spec.lease_transitions.unwrap_or(0);
    Lease {
        metadata: ObjectMeta {
            name: Some(settings.name.clone()),
            namespace: Some(settings.namespace.clone()),
            resource_version: previous.and_then(|l| l.metadata.resource_version.clone()),
            labels: previous.and_then(|l| l.metadata.labels.clone()),
            annotations: previous.and_then(|l| l.metadata.annotations.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(settings.identity.clone()),
            lease_duration_seconds: Some(settings.duration_seconds()),
            acquire_time: if mine {
                previous_spec.acquire_time.or(Some(MicroTime(now)))
            } else {
                Some(MicroTime(now))
            },
            renew_time: Some(MicroTime(now)),
            lease_transitions: Some(match previous {
                None => 0,
                Some(_) if mine => transitions,
                Some(_) => transitions.saturating_add(1),
            }),
            ..LeaseSpec::default()
        }),
    }
}

/// The Lease to write when the leader stops cleanly: no holder and a one-second duration, so
/// that another replica takes it at once instead of waiting for it to expire. `None` when
/// `identity` does not hold `observed`.
pub fn release(observed: &Lease, identity: &str, now: Timestamp) -> Option<Lease> {
    if holder(observed) != Some(identity) {
        return None;
    }
    let mut released = observed.clone();
    released.metadata.managed_fields = None;
    if let Some(spec) = released.spec.as_mut() {
        spec.holder_identity = None;
        spec.lease_duration_seconds = Some(1);
        spec.renew_time = Some(MicroTime(now));
    }
    Some(released)
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
        let written = match decide(self.observed.as_ref(), &self.settings, self.leading, now) {
            Decision::Wait { holder, .. } => {
                self.leading = false;
                return Ok(Standing::Follower {
                    holder: Some(holder),
                });
            }
            Decision::Lost { holder } => {
                self.leading = false;
                return Ok(Standing::Follower { holder });
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

    /// Hands the Lease back if this replica holds it (see [`release`]).
    pub async fn release(&mut self) -> Result<(), LeaseError> {
        if !self.leading {
            return Ok(());
        }
        self.leading = false;
        let Some(released) = self
            .observed
            .as_ref()
            .and_then(|o| release(&o.lease, &self.settings.identity, (self.clock)()))
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

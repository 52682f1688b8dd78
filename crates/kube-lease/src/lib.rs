//! The rules of a `coordination.k8s.io/v1` Lease, as pure functions: who holds it, when another
//! may take it, whether its holder still renews it, and the Lease to write to create, take,
//! renew or hand it back. No client, no runtime: the callers read and write the Lease
//! (`clusterset-daemon`'s elector for the operator's leader election, the agent's writer for
//! its heartbeat) and pass in the times.
//!
//! # Clock skew
//!
//! The holder writes `renewTime` by *its* clock; an observer must not compare it with its own
//! clock to decide that the Lease may be taken, or a replica whose clock runs ahead would take
//! a Lease that is still being renewed. The rule is client-go's (`leaderelection`): an observer
//! may take another holder's Lease only once it has seen the same record, unchanged, for the
//! record's `leaseDurationSeconds` **by its own monotonic clock** ([`Observed::takeover_at`]).
//!
//! Whether a holder is *alive* (the agent's judgement of another cluster's heartbeat) may use
//! the Lease's own times on first sight, within a skew allowance: an observer that starts and
//! finds a Lease last renewed an hour ago need not wait a whole duration to call its holder gone
//! ([`Observed::stale_at`]). The credit is `now - renewTime - skew_allowance` at first sight
//! only; a change of the record seen later restarts the observation without credit. With clocks
//! further apart than the allowance, a live holder can look stale on first sight until its next
//! renewal is seen (one renew period); it can never be *taken over* because of it.
//!
//! The observer's clock is any [`Moment`]: a monotonic [`Instant`] (the operator's elector), or
//! the timestamps a sans-IO core is given as its only clock (the agent's core). Observations are
//! compared only with readings of the same clock.
//!
//! ```
//! use std::time::{Duration, Instant};
//! use kube_lease::{Action, Decision, LeaseClaim, Observed, action, decide, DEFAULT_SKEW_ALLOWANCE};
//! use k8s_openapi::jiff::Timestamp;
//!
//! let claim = LeaseClaim::new("mcs-ceph-operator", "ops", "pod-a", Duration::from_secs(15));
//! let (wall, now) = (Timestamp::constant(1_777_636_800, 0), Instant::now());
//! // No Lease yet: create it, held by this replica.
//! let Action::Create(lease) = action(None, &claim, wall, now) else { unreachable!() };
//! // Another replica sees it, held by pod-a: it waits the Lease's duration by its own clock.
//! let other = LeaseClaim::new("mcs-ceph-operator", "ops", "pod-b", Duration::from_secs(15));
//! let seen = Observed::update(None, *lease, wall, now, DEFAULT_SKEW_ALLOWANCE);
//! assert!(matches!(action(Some(&seen), &other, wall, now), Action::Wait { .. }));
//! let later = now + Duration::from_secs(15);
//! assert!(matches!(action(Some(&seen), &other, wall, later), Action::Acquire(_)));
//! // Had pod-b led before, the Lease naming pod-a means it lost it.
//! assert!(matches!(decide(Some(&seen), &other, true, wall, later), Decision::Lost { .. }));
//! ```
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// How far apart the clocks of a Lease's holder and its observers may be before a live holder
/// can look stale on first sight (see the crate documentation). NTP keeps nodes' clocks within
/// milliseconds; five seconds is generous.
pub const DEFAULT_SKEW_ALLOWANCE: Duration = Duration::from_secs(5);

/// The Lease a holder claims: its name and namespace, the holder's identity, the duration it
/// declares, and labels every Lease it writes carries (labels and annotations others set are
/// kept).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LeaseClaim {
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace.
    pub namespace: String,
    /// The holder's identity (a pod name); unique among those who claim this Lease.
    pub identity: String,
    /// `leaseDurationSeconds` written: how long the others wait, after the last renewal they
    /// saw, before taking over.
    pub duration: Duration,
    /// Labels set on every Lease written.
    pub labels: BTreeMap<String, String>,
}

impl LeaseClaim {
    /// A claim without labels.
    pub fn new(name: &str, namespace: &str, identity: &str, duration: Duration) -> Self {
        Self {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            identity: identity.to_owned(),
            duration,
            labels: BTreeMap::new(),
        }
    }

    /// The claim with `key=value` among the labels it writes.
    #[must_use]
    pub fn with_label(mut self, key: &str, value: &str) -> Self {
        self.labels.insert(key.to_owned(), value.to_owned());
        self
    }

    /// The duration in whole seconds, as `leaseDurationSeconds` holds it (at least 1).
    pub fn duration_seconds(&self) -> i32 {
        i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
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

/// The duration a Lease declares (`leaseDurationSeconds`; zero when absent or negative).
pub fn declared_duration(lease: &Lease) -> Duration {
    let seconds = lease
        .spec
        .as_ref()
        .and_then(|s| s.lease_duration_seconds)
        .unwrap_or(0)
        .max(0);
    Duration::from_secs(u64::try_from(seconds).unwrap_or(0))
}

/// When the Lease says it was last renewed (its `renewTime`, else its `acquireTime`), by its
/// holder's clock.
pub fn renewed_at(lease: &Lease) -> Option<Timestamp> {
    let spec = lease.spec.as_ref()?;
    Some(spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?.0)
}

/// A reading of an observer's clock: a point in time that a duration can be added to or taken
/// from (saturating at the clock's ends).
pub trait Moment: Copy + Ord + std::fmt::Debug {
    /// `self + duration`, or the latest moment the clock can represent.
    fn plus(self, duration: Duration) -> Self;
    /// `self - duration`, or the earliest moment the clock can represent.
    fn minus(self, duration: Duration) -> Self;
}

impl Moment for Instant {
    fn plus(self, duration: Duration) -> Self {
        self.checked_add(duration)
            .or_else(|| self.checked_add(Duration::from_secs(u64::from(u32::MAX))))
            .unwrap_or(self)
    }

    fn minus(self, duration: Duration) -> Self {
        self.checked_sub(duration).unwrap_or(self)
    }
}

impl Moment for Timestamp {
    fn plus(self, duration: Duration) -> Self {
        SignedDuration::try_from(duration)
            .ok()
            .and_then(|d| self.checked_add(d).ok())
            .unwrap_or(Timestamp::MAX)
    }

    fn minus(self, duration: Duration) -> Self {
        SignedDuration::try_from(duration)
            .ok()
            .and_then(|d| self.checked_sub(d).ok())
            .unwrap_or(Timestamp::MIN)
    }
}

/// A Lease as one observer last read it, and since when, by the observer's clock (`M`, a
/// monotonic [`Instant`] unless the observer has another), its record (`spec`) has been
/// unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed<M: Moment = Instant> {
    lease: Lease,
    since: M,
    credit: Duration,
}

impl<M: Moment> Observed<M> {
    /// Records `lease`, read at `wall` (the observer's wall clock) and `now` (its monotonic
    /// clock). When the record equals the one seen before, the observation keeps its start;
    /// when it changed, it starts now; on first sight (`previous` is `None`) it starts now with
    /// the credit of the Lease's own age beyond `skew_allowance` (used by
    /// [`stale_at`](Self::stale_at) only).
    pub fn update(
        previous: Option<&Observed<M>>,
        lease: Lease,
        wall: Timestamp,
        now: M,
        skew_allowance: Duration,
    ) -> Observed<M> {
        match previous {
            Some(previous) if previous.lease.spec == lease.spec => Observed {
                lease,
                since: previous.since,
                credit: previous.credit,
            },
            Some(_) => Observed::seen_change(lease, now),
            None => {
                let age = renewed_at(&lease)
                    .and_then(|renewed| wall.duration_since(renewed).try_into().ok())
                    .unwrap_or(Duration::ZERO);
                Observed {
                    lease,
                    since: now,
                    credit: age.saturating_sub(skew_allowance),
                }
            }
        }
    }

    /// A Lease whose change was seen happen at `now`: this observer's own write as the API
    /// server stored it, or a renewal. No credit.
    pub fn seen_change(lease: Lease, now: M) -> Observed<M> {
        Observed {
            lease,
            since: now,
            credit: Duration::ZERO,
        }
    }

    /// The Lease read.
    pub fn lease(&self) -> &Lease {
        &self.lease
    }

    /// When this observer first saw the Lease's current record.
    pub fn since(&self) -> M {
        self.since
    }

    /// When another may take the Lease if its record does not change: the record's duration
    /// after this observer first saw it (client-go's rule; the Lease's own times never count).
    pub fn takeover_at(&self) -> M {
        self.since.plus(declared_duration(&self.lease))
    }

    /// When the Lease's holder counts as gone if the record does not change: as
    /// [`takeover_at`](Self::takeover_at), earlier by the first sight's credit (so for a Lease
    /// found long expired, an estimate of when its holder went away, before this observer
    /// first saw it).
    pub fn stale_at(&self) -> M {
        self.takeover_at().minus(self.credit)
    }

    /// Whether the holder counts as gone at `now` ([`stale_at`](Self::stale_at)).
    pub fn is_stale(&self, now: M) -> bool {
        now >= self.stale_at()
    }
}

/// What a claimant does about the Lease, as far as the record tells (see [`action`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Action<M: Moment = Instant> {
    /// There is no Lease: create this one (held by the claimant).
    Create(Box<Lease>),
    /// The Lease is free, or its holder stopped renewing it for its whole duration: replace it
    /// with this one (held by the claimant, carrying the `resourceVersion` read, so that of two
    /// claimants racing one gets 409 Conflict).
    Acquire(Box<Lease>),
    /// The claimant holds the Lease: replace it with this renewal (carrying the
    /// `resourceVersion` read).
    Renew(Box<Lease>),
    /// Another holder may still be renewing the Lease: write nothing.
    Wait {
        /// The holder.
        holder: String,
        /// When, by the claimant's clock, the Lease may be taken if it does not change.
        until: M,
    },
}

/// What a leader-election candidate does about the Lease (see [`decide`]).
#[derive(Debug, Clone, PartialEq)]
pub enum Decision<M: Moment = Instant> {
    /// What the record tells any claimant to do ([`action`]).
    Act(Action<M>),
    /// The claimant held the Lease but it now names someone else (or no one): stop writing.
    Lost {
        /// The holder named now, if any.
        holder: Option<String>,
    },
}

/// What `claim`'s holder does at `wall` / `now`, given what it observed of the Lease (`None`:
/// the Lease does not exist): renew a Lease it is named the holder of, create a missing one,
/// take a free one or one seen unchanged for its duration, else wait. A claimant that renews
/// its Lease whatever it held before (the agent's heartbeat) needs no more; a leader also
/// needs to know when it lost the Lease ([`decide`]).
pub fn action<M: Moment>(
    observed: Option<&Observed<M>>,
    claim: &LeaseClaim,
    wall: Timestamp,
    now: M,
) -> Action<M> {
    let Some(observed) = observed else {
        return Action::Create(Box::new(held_by(None, claim, wall)));
    };
    let lease = &observed.lease;
    match holder(lease) {
        Some(me) if me == claim.identity => {
            Action::Renew(Box::new(held_by(Some(lease), claim, wall)))
        }
        None => Action::Acquire(Box::new(held_by(Some(lease), claim, wall))),
        Some(other) => {
            let until = observed.takeover_at();
            if now < until {
                Action::Wait {
                    holder: other.to_owned(),
                    until,
                }
            } else {
                Action::Acquire(Box::new(held_by(Some(lease), claim, wall)))
            }
        }
    }
}

/// The decision of `claim`'s holder at `wall` / `now`, given what it observed of the Lease
/// (`None`: the Lease does not exist) and whether it holds the Lease as far as it knows
/// (`leading`): a leader whose Lease now names someone else, or no one, has lost it (it does
/// not take it back at once); otherwise the [`action`] the record calls for.
pub fn decide<M: Moment>(
    observed: Option<&Observed<M>>,
    claim: &LeaseClaim,
    leading: bool,
    wall: Timestamp,
    now: M,
) -> Decision<M> {
    if leading
        && let Some(observed) = observed
        && holder(&observed.lease) != Some(claim.identity.as_str())
    {
        return Decision::Lost {
            holder: holder(&observed.lease).map(str::to_owned),
        };
    }
    Decision::Act(action(observed, claim, wall, now))
}

/// The Lease held by `claim`'s holder, renewed at `wall`, replacing `previous` (its
/// `resourceVersion`, labels and annotations kept; the claim's labels set).
pub fn held_by(previous: Option<&Lease>, claim: &LeaseClaim, wall: Timestamp) -> Lease {
    let previous_spec = previous.and_then(|l| l.spec.clone()).unwrap_or_default();
    let mine = previous.and_then(holder) == Some(claim.identity.as_str());
    let transitions = previous_spec.lease_transitions.unwrap_or(0);
    let mut labels = previous
        .and_then(|l| l.metadata.labels.clone())
        .unwrap_or_default();
    labels.extend(claim.labels.clone());
    Lease {
        metadata: ObjectMeta {
            name: Some(claim.name.clone()),
            namespace: Some(claim.namespace.clone()),
            resource_version: previous.and_then(|l| l.metadata.resource_version.clone()),
            labels: (!labels.is_empty()).then_some(labels),
            annotations: previous.and_then(|l| l.metadata.annotations.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(claim.identity.clone()),
            lease_duration_seconds: Some(claim.duration_seconds()),
            acquire_time: if mine {
                previous_spec.acquire_time.or(Some(MicroTime(wall)))
            } else {
                Some(MicroTime(wall))
            },
            renew_time: Some(MicroTime(wall)),
            lease_transitions: Some(match previous {
                None => 0,
                Some(_) if mine => transitions,
                Some(_) => transitions.saturating_add(1),
            }),
            ..LeaseSpec::default()
        }),
    }
}

/// The Lease to write when its holder `identity` stops cleanly: the same record without a
/// holder, renewed at `wall`, so that the next claimant (another replica, or the next pod after
/// a rollout) takes it at once instead of waiting for it to expire, while observers of the
/// holder's liveness see a fresh renewal rather than a stale Lease. (client-go also shortens
/// the duration to one second; a free Lease is taken at once anyway, and the duration kept
/// keeps observers from calling the holder gone during a rollout.) `None` when `identity` does
/// not hold `observed`.
pub fn release(observed: &Lease, identity: &str, wall: Timestamp) -> Option<Lease> {
    if holder(observed) != Some(identity) {
        return None;
    }
    let mut released = observed.clone();
    released.metadata.managed_fields = None;
    if let Some(spec) = released.spec.as_mut() {
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(wall));
    }
    Some(released)
}

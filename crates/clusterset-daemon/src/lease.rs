//! The one `coordination.k8s.io/v1` Lease implementation of the clusterset daemons: the
//! operator's leader election and the agent's heartbeat make the same pure decision.
//!
//! The rule is client-go's (`leaderelection`):
//!
//! - a Lease that does not exist is created, held by this process ([`Decision::Create`]);
//! - this process's own Lease is renewed (`renewTime`), keeping `acquireTime` and
//!   `leaseTransitions` ([`Decision::Renew`]);
//! - a Lease without a holder (handed back with [`release`]) is taken at once
//!   ([`Decision::Acquire`]);
//! - a Lease held by another identity is taken only once **this process** has seen the same
//!   record, unchanged, for the record's `leaseDurationSeconds` **by its own clock**
//!   ([`Observed::since`]); until then it waits ([`Decision::Wait`]). The holder's `renewTime`
//!   is never compared with the local clock, so clock skew between nodes can neither end a Lease
//!   that is being renewed nor keep one alive that is not. The price: after a restart, this
//!   process waits one full duration before it takes a Lease whose holder died meanwhile;
//! - every write carries the `resourceVersion` read (a create carries none), so of two processes
//!   racing for the Lease one gets 409 Conflict;
//! - `acquireTime` is when the current holder took the Lease, and `leaseTransitions` counts the
//!   changes of holder.
//!
//! What the daemons do with the decision stays with them: the operator's elector loop (a leader
//! that sees another holder stops leading), the agent's heartbeat (its Lease name and labels).

use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// Who competes for a Lease: which Lease, this process's identity, and the duration it writes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Candidate {
    /// The Lease's name.
    pub name: String,
    /// The Lease's namespace.
    pub namespace: String,
    /// This process's identity (`holderIdentity`); unique among the processes that compete.
    pub identity: String,
    /// `leaseDurationSeconds` written: how long the others wait, after the last change of the
    /// record they saw, before they take the Lease.
    pub duration: Duration,
}

impl Candidate {
    /// A candidate for the Lease `namespace/name` as `identity`, writing `duration`.
    pub fn new(name: &str, namespace: &str, identity: &str, duration: Duration) -> Self {
        Self {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
            identity: identity.to_owned(),
            duration,
        }
    }

    /// The duration as the Lease stores it: whole seconds, at least 1.
    ///
    /// ```
    /// # use std::time::Duration;
    /// use clusterset_daemon::lease::Candidate;
    /// let candidate = Candidate::new("l", "ns", "me", Duration::from_millis(15_900));
    /// assert_eq!(candidate.duration_seconds(), 15);
    /// assert_eq!(Candidate { duration: Duration::ZERO, ..candidate }.duration_seconds(), 1);
    /// ```
    pub fn duration_seconds(&self) -> i32 {
        i32::try_from(self.duration.as_secs().max(1)).unwrap_or(i32::MAX)
    }
}

/// A Lease as this process last saw it, and since when, by this process's clock, its record
/// (`spec`) has been unchanged.
#[derive(Debug, Clone, PartialEq)]
pub struct Observed {
    /// The Lease read.
    pub lease: Lease,
    /// When this process first saw the Lease's current `spec`.
    pub since: Timestamp,
}

impl Observed {
    /// Records `lease` read at `now`: the time of observation is kept when the record is the
    /// one seen before (its holder has not renewed it meanwhile), else it is `now`.
    ///
    /// ```
    /// use clusterset_daemon::lease::Observed;
    /// use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
    /// use k8s_openapi::jiff::Timestamp;
    /// let lease = |holder: &str| Lease {
    ///     spec: Some(LeaseSpec { holder_identity: Some(holder.into()), ..Default::default() }),
    ///     ..Default::default()
    /// };
    /// let (t0, t1) = (Timestamp::from_second(0)?, Timestamp::from_second(10)?);
    /// let first = Observed::update(None, lease("a"), t0);
    /// assert_eq!(Observed::update(Some(&first), lease("a"), t1).since, t0);
    /// assert_eq!(Observed::update(Some(&first), lease("b"), t1).since, t1);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn update(previous: Option<&Observed>, lease: Lease, now: Timestamp) -> Observed {
        let since = match previous {
            Some(previous) if previous.lease.spec == lease.spec => previous.since,
            _ => now,
        };
        Observed { lease, since }
    }

    /// When, by this process's clock, the Lease runs out if its record does not change
    /// meanwhile (see [`expiry`]).
    pub fn expiry(&self) -> Option<Timestamp> {
        expiry(&self.lease, self.since)
    }
}

/// When, by the observer's clock, `lease` runs out if its record stays as it was first seen at
/// `since`: `since` plus the record's `leaseDurationSeconds`. `None` when the record states no
/// duration (a Lease created empty, never held).
///
/// ```
/// use clusterset_daemon::lease::expiry;
/// use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
/// use k8s_openapi::jiff::Timestamp;
/// let lease = Lease {
///     spec: Some(LeaseSpec { lease_duration_seconds: Some(30), ..Default::default() }),
///     ..Default::default()
/// };
/// let since = Timestamp::from_second(100)?;
/// assert_eq!(expiry(&lease, since), Some(Timestamp::from_second(130)?));
/// assert_eq!(expiry(&Lease::default(), since), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn expiry(lease: &Lease, since: Timestamp) -> Option<Timestamp> {
    let seconds = lease.spec.as_ref()?.lease_duration_seconds?.max(0);
    Some(
        since
            .checked_add(SignedDuration::from_secs(i64::from(seconds)))
            .unwrap_or(Timestamp::MAX),
    )
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

/// What a candidate does about the Lease.
#[derive(Debug, Clone, PartialEq)]
pub enum Decision {
    /// There is no Lease: create this one (held by the candidate, no `resourceVersion`).
    Create(Box<Lease>),
    /// The Lease has no holder, or its holder left its record unchanged for its whole duration
    /// by the candidate's clock: replace it with this one (held by the candidate, carrying the
    /// `resourceVersion` read, one more transition).
    Acquire(Box<Lease>),
    /// The candidate holds the Lease: replace it with this renewal (carrying the
    /// `resourceVersion` read).
    Renew(Box<Lease>),
    /// Another identity holds the Lease and its record changed within its duration: write
    /// nothing.
    Wait {
        /// The holder.
        holder: String,
        /// When, by the candidate's clock, the Lease may be taken if its record does not change
        /// before.
        until: Timestamp,
    },
}

/// The decision of `candidate` at `now` (by its own clock), given what it observed of the Lease
/// (`None`: the Lease does not exist).
///
/// ```
/// # use std::time::Duration;
/// use clusterset_daemon::lease::{Candidate, Decision, Observed, decide, holder};
/// use k8s_openapi::jiff::{SignedDuration, Timestamp};
/// let t0 = Timestamp::from_second(1_800_000_000)?;
/// let at = |s| t0.checked_add(SignedDuration::from_secs(s));
/// let a = Candidate::new("leader", "ops", "a", Duration::from_secs(15));
/// let b = Candidate { identity: "b".into(), ..a.clone() };
/// let Decision::Create(lease) = decide(None, &a, t0) else { panic!() };
/// // b saw a's Lease first at t0: it waits 15 s by its own clock, whatever a's renewTime says.
/// let seen = Observed { lease: *lease, since: t0 };
/// assert_eq!(decide(Some(&seen), &b, at(14)?), Decision::Wait { holder: "a".into(), until: at(15)? });
/// let Decision::Acquire(taken) = decide(Some(&seen), &b, at(15)?) else { panic!() };
/// assert_eq!(holder(&taken), Some("b"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn decide(observed: Option<&Observed>, candidate: &Candidate, now: Timestamp) -> Decision {
    let Some(observed) = observed else {
        return Decision::Create(Box::new(held_by(None, candidate, now)));
    };
    let lease = &observed.lease;
    match holder(lease) {
        Some(me) if me == candidate.identity => {
            Decision::Renew(Box::new(held_by(Some(lease), candidate, now)))
        }
        None => Decision::Acquire(Box::new(held_by(Some(lease), candidate, now))),
        Some(other) => {
            // A record without a duration protects nothing.
            let until = observed.expiry().unwrap_or(observed.since);
            if now < until {
                Decision::Wait {
                    holder: other.to_owned(),
                    until,
                }
            } else {
                Decision::Acquire(Box::new(held_by(Some(lease), candidate, now)))
            }
        }
    }
}

/// The Lease held by `candidate`, renewed at `now`, replacing `previous` (whose labels,
/// annotations and `resourceVersion` it keeps).
fn held_by(previous: Option<&Lease>, candidate: &Candidate, now: Timestamp) -> Lease {
    let previous_spec = previous.and_then(|l| l.spec.clone()).unwrap_or_default();
    let mine = previous.and_then(holder) == Some(candidate.identity.as_str());
    let transitions = previous_spec.lease_transitions.unwrap_or(0);
    Lease {
        metadata: ObjectMeta {
            name: Some(candidate.name.clone()),
            namespace: Some(candidate.namespace.clone()),
            resource_version: previous.and_then(|l| l.metadata.resource_version.clone()),
            labels: previous.and_then(|l| l.metadata.labels.clone()),
            annotations: previous.and_then(|l| l.metadata.annotations.clone()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: Some(candidate.identity.clone()),
            lease_duration_seconds: Some(candidate.duration_seconds()),
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

/// The Lease to write when its holder `identity` stops cleanly: the same record without a
/// holder, renewed at `now`, so that the next candidate takes it at once instead of waiting for
/// it to run out. `None` when `identity` does not hold `lease`.
///
/// The duration is kept (client-go also sets it to 1 s; a Lease without a holder is taken at
/// once either way, and the agent's Lease keeps telling the other clusters that this cluster is
/// alive while its next instance starts). `managedFields` are dropped (a replace must not send
/// them back).
///
/// ```
/// use clusterset_daemon::lease::{holder, release};
/// use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
/// use k8s_openapi::jiff::Timestamp;
/// let held = Lease {
///     spec: Some(LeaseSpec { holder_identity: Some("a".into()), ..Default::default() }),
///     ..Default::default()
/// };
/// let now = Timestamp::from_second(100)?;
/// assert_eq!(release(&held, "b", now), None);
/// assert_eq!(release(&held, "a", now).as_ref().and_then(holder), None);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn release(lease: &Lease, identity: &str, now: Timestamp) -> Option<Lease> {
    if holder(lease) != Some(identity) {
        return None;
    }
    let mut released = lease.clone();
    released.metadata.managed_fields = None;
    if let Some(spec) = released.spec.as_mut() {
        spec.holder_identity = None;
        spec.renew_time = Some(MicroTime(now));
    }
    Some(released)
}

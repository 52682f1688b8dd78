#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The Lease rules: creating, taking, renewing and handing back a Lease; client-go's clock-skew
//! rule for taking over; the first sight's credit for judging a holder gone.

use std::time::{Duration, Instant};

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube_lease::{
    Action, DEFAULT_SKEW_ALLOWANCE, Decision, LeaseClaim, Moment, Observed, action, decide,
    held_by, holder, release,
};

fn claim(identity: &str) -> LeaseClaim {
    LeaseClaim::new(
        "mcs-ceph-operator",
        "ops",
        identity,
        Duration::from_secs(15),
    )
}

fn t0() -> Timestamp {
    "2026-05-01T12:00:00Z".parse().unwrap()
}

/// `seconds` after `t0` on the wall clock.
fn at(seconds: i64) -> Timestamp {
    t0().checked_add(SignedDuration::from_secs(seconds))
        .unwrap()
}

/// The monotonic clock of one test: `seconds` after its start. One start per thread, so that
/// every instant of a test is comparable.
fn mono(seconds: u64) -> Instant {
    thread_local! {
        // Far enough from the clock's start that moments before it exist.
        static START: Instant = Instant::now() + Duration::from_secs(3600);
    }
    START.with(|start| *start + Duration::from_secs(seconds))
}

/// A Lease held by `holder`, renewed at `renewed`, with the given transitions and version.
fn lease(holder: Option<&str>, renewed: Timestamp, transitions: i32, version: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("mcs-ceph-operator".into()),
            namespace: Some("ops".into()),
            resource_version: Some(version.into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(t0())),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }),
    }
}

/// `lease` seen at `seconds` (wall and monotonic clocks in step) by an observer that saw it
/// change then: no first-sight credit.
fn seen(lease: Lease, seconds: u64) -> Observed {
    Observed::seen_change(lease, mono(seconds))
}

fn spec(lease: &Lease) -> &LeaseSpec {
    lease.spec.as_ref().unwrap()
}

/// The action of `identity` at `seconds`.
fn action_at(observed: Option<&Observed>, identity: &str, seconds: u64) -> Action {
    action(
        observed,
        &claim(identity),
        at(i64::try_from(seconds).unwrap()),
        mono(seconds),
    )
}

/// The decision of `identity` at `seconds`, leading or not.
fn decide_at(observed: Option<&Observed>, identity: &str, leading: bool, seconds: u64) -> Decision {
    decide(
        observed,
        &claim(identity),
        leading,
        at(i64::try_from(seconds).unwrap()),
        mono(seconds),
    )
}

#[test]
fn a_missing_lease_is_created_held_by_me() {
    let Action::Create(lease) = action_at(None, "a", 0) else {
        panic!("create expected");
    };
    let spec = spec(&lease);
    assert_eq!(holder(&lease), Some("a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.acquire_time, Some(MicroTime(t0())));
    assert_eq!(spec.renew_time, Some(MicroTime(t0())));
    assert_eq!(spec.lease_transitions, Some(0));
    assert_eq!(lease.metadata.resource_version, None);
    assert_eq!(lease.metadata.namespace.as_deref(), Some("ops"));
}

#[test]
fn a_free_lease_is_acquired_at_once_with_its_version() {
    let released = release(&lease(Some("b"), at(0), 3, "7"), "b", at(1)).unwrap();
    assert_eq!(holder(&released), None);
    let seen = seen(released, 2);
    let Action::Acquire(lease) = action_at(Some(&seen), "a", 2) else {
        panic!("acquire expected");
    };
    assert_eq!(holder(&lease), Some("a"));
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("7"));
    assert_eq!(spec(&lease).lease_transitions, Some(4));
    assert_eq!(spec(&lease).acquire_time, Some(MicroTime(at(2))));
}

#[test]
fn a_lease_held_by_another_is_taken_only_after_its_duration_unrenewed() {
    let seen = seen(lease(Some("b"), at(0), 2, "9"), 0);
    assert_eq!(
        action_at(Some(&seen), "a", 14),
        Action::Wait {
            holder: "b".into(),
            until: mono(15)
        }
    );
    let Action::Acquire(lease) = action_at(Some(&seen), "a", 15) else {
        panic!("acquire expected once expired");
    };
    assert_eq!(holder(&lease), Some("a"));
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("9"));
    assert_eq!(spec(&lease).lease_transitions, Some(3));
    assert_eq!(spec(&lease).acquire_time, Some(MicroTime(at(15))));
    assert_eq!(spec(&lease).renew_time, Some(MicroTime(at(15))));
}

#[test]
fn the_holder_renews_keeping_acquire_time_and_transitions() {
    let seen = seen(lease(Some("a"), at(0), 5, "11"), 0);
    // Also after a restart of the same pod (not leading yet).
    for leading in [true, false] {
        let Decision::Act(Action::Renew(lease)) = decide_at(Some(&seen), "a", leading, 2) else {
            panic!("renew expected");
        };
        assert_eq!(spec(&lease).acquire_time, Some(MicroTime(t0())));
        assert_eq!(spec(&lease).renew_time, Some(MicroTime(at(2))));
        assert_eq!(spec(&lease).lease_transitions, Some(5));
        assert_eq!(lease.metadata.resource_version.as_deref(), Some("11"));
    }
}

#[test]
fn the_holders_clock_is_never_compared_with_mine_for_a_takeover() {
    // The holder's clock is an hour behind mine, or 10 s ahead: its renewTime says nothing
    // about when I may take the Lease, even on first sight. Only how long I have seen the same
    // record counts.
    for renewed in [at(-3600), at(10)] {
        let first = Observed::update(
            None,
            lease(Some("b"), renewed, 0, "1"),
            at(0),
            mono(0),
            DEFAULT_SKEW_ALLOWANCE,
        );
        assert!(
            matches!(
                action_at(Some(&first), "a", 1),
                Action::Wait { until, .. } if until == mono(15)
            ),
            "renewed at {renewed}"
        );
        assert!(matches!(
            action_at(Some(&first), "a", 15),
            Action::Acquire(_)
        ));
    }
}

#[test]
fn a_renewal_seen_restarts_the_wait() {
    let observe = |previous: Option<&Observed>, lease: Lease, seconds: u64| {
        Observed::update(
            previous,
            lease,
            at(i64::try_from(seconds).unwrap()),
            mono(seconds),
            DEFAULT_SKEW_ALLOWANCE,
        )
    };
    let first = observe(None, lease(Some("b"), at(0), 0, "1"), 0);
    let same = observe(Some(&first), lease(Some("b"), at(0), 0, "1"), 10);
    assert_eq!(
        same.since(),
        mono(0),
        "unchanged record: still observed since t0"
    );
    let renewed = observe(Some(&same), lease(Some("b"), at(12), 0, "2"), 14);
    assert_eq!(renewed.since(), mono(14));
    assert!(matches!(
        action_at(Some(&renewed), "a", 20),
        Action::Wait { until, .. } if until == mono(29)
    ));
}

#[test]
fn a_holder_whose_lease_is_long_expired_is_stale_on_first_sight_within_the_allowance() {
    // An observer starts and finds a Lease last renewed 100 s ago by the holder's clock: the
    // holder counts as gone at once (it need not wait another duration), but the Lease may
    // still be taken only after a whole duration of watching it unchanged.
    let old = lease(Some("b"), at(-100), 0, "1");
    let first = Observed::update(None, old, at(0), mono(0), DEFAULT_SKEW_ALLOWANCE);
    assert!(first.is_stale(mono(0)));
    assert_eq!(first.takeover_at(), mono(15));

    // Long expired: gone (by the Lease's own times, less the allowance) before first sight.
    assert_eq!(first.stale_at(), mono(0).minus(Duration::from_secs(80)));

    // Renewed 12 s ago: 15 s duration, 5 s allowance: 7 s credit, gone 8 s from now.
    let recent = lease(Some("b"), at(-12), 0, "1");
    let first = Observed::update(None, recent, at(0), mono(0), DEFAULT_SKEW_ALLOWANCE);
    assert_eq!(first.stale_at(), mono(8));
    assert!(!first.is_stale(mono(7)));
    assert!(first.is_stale(mono(8)));

    // Within the allowance (the holder's clock may run behind mine): no credit at all.
    for renewed in [at(-5), at(-1), at(0), at(30)] {
        let first = Observed::update(
            None,
            lease(Some("b"), renewed, 0, "1"),
            at(0),
            mono(0),
            DEFAULT_SKEW_ALLOWANCE,
        );
        assert_eq!(first.stale_at(), mono(15), "renewed at {renewed}");
    }
}

#[test]
fn the_credit_of_the_first_sight_ends_with_the_first_change_seen() {
    let first = Observed::update(
        None,
        lease(Some("b"), at(-12), 0, "1"),
        at(0),
        mono(0),
        DEFAULT_SKEW_ALLOWANCE,
    );
    // The same record read again keeps the credit (and its start).
    let again = Observed::update(
        Some(&first),
        lease(Some("b"), at(-12), 0, "1"),
        at(5),
        mono(5),
        DEFAULT_SKEW_ALLOWANCE,
    );
    assert_eq!(again.stale_at(), mono(8));
    // A renewal seen: a whole duration from now, whatever its renewTime says.
    let renewed = Observed::update(
        Some(&again),
        lease(Some("b"), at(-3600), 0, "2"),
        at(6),
        mono(6),
        DEFAULT_SKEW_ALLOWANCE,
    );
    assert_eq!(renewed.stale_at(), mono(21));
}

#[test]
fn a_leader_that_sees_another_holder_has_lost() {
    let other = seen(lease(Some("b"), at(0), 1, "3"), 0);
    assert_eq!(
        decide_at(Some(&other), "a", true, 100),
        Decision::Lost {
            holder: Some("b".into())
        }
    );
    let free = seen(lease(None, at(0), 1, "3"), 0);
    assert_eq!(
        decide_at(Some(&free), "a", true, 1),
        Decision::Lost { holder: None }
    );
    // A candidate that did not lead does what the record calls for: wait for b, take the free one.
    assert_eq!(
        decide_at(Some(&other), "a", false, 14),
        Decision::Act(Action::Wait {
            holder: "b".into(),
            until: mono(15)
        })
    );
    assert!(matches!(
        decide_at(Some(&free), "a", false, 1),
        Decision::Act(Action::Acquire(_))
    ));
}

#[test]
fn transitions_count_changes_of_holder() {
    let write = |action: Action, version: &str| -> Lease {
        let (Action::Create(mut lease) | Action::Acquire(mut lease) | Action::Renew(mut lease)) =
            action
        else {
            panic!("a write expected, got {action:?}");
        };
        lease.metadata.resource_version = Some(version.into());
        *lease
    };
    let a = write(action_at(None, "a", 0), "1");
    let b = write(action_at(Some(&seen(a, 0)), "b", 20), "2");
    assert_eq!(spec(&b).lease_transitions, Some(1));
    let Decision::Act(renewal) = decide_at(Some(&seen(b, 20)), "b", true, 22) else {
        panic!("the leader renews");
    };
    let b = write(renewal, "3");
    assert_eq!(
        spec(&b).lease_transitions,
        Some(1),
        "a renewal is no transition"
    );
    let a = write(action_at(Some(&seen(b, 22)), "a", 40), "4");
    assert_eq!(spec(&a).lease_transitions, Some(2));
    assert_eq!(holder(&a), Some("a"));
}

#[test]
fn only_the_holder_releases_and_a_released_lease_looks_freshly_renewed() {
    let held = lease(Some("a"), at(0), 0, "1");
    assert_eq!(release(&held, "b", at(1)), None);
    let released = release(&held, "a", at(9)).unwrap();
    assert_eq!(holder(&released), None);
    assert_eq!(released.metadata.resource_version.as_deref(), Some("1"));
    // The holder's liveness: renewed when handed back, for its whole duration (a rollout's next
    // pod takes it at once; observers do not call the holder gone meanwhile).
    assert_eq!(spec(&released).renew_time, Some(MicroTime(at(9))));
    assert_eq!(spec(&released).lease_duration_seconds, Some(15));
}

#[test]
fn labels_of_the_claim_are_set_and_others_kept() {
    let mut previous = lease(Some("a"), at(0), 0, "1");
    previous.metadata.labels = Some(
        [(
            "app.kubernetes.io/part-of".to_owned(),
            "clusterset".to_owned(),
        )]
        .into_iter()
        .collect(),
    );
    previous.metadata.annotations = Some(
        [("note".to_owned(), "kept".to_owned())]
            .into_iter()
            .collect(),
    );
    let claim = claim("a").with_label("multicluster.x-k8s.io/cluster", "east");
    let renewed = held_by(Some(&previous), &claim, at(2));
    let labels = renewed.metadata.labels.unwrap();
    assert_eq!(labels["app.kubernetes.io/part-of"], "clusterset");
    assert_eq!(labels["multicluster.x-k8s.io/cluster"], "east");
    assert_eq!(renewed.metadata.annotations.unwrap()["note"], "kept");
    assert_eq!(
        held_by(None, &self::claim("a"), at(0)).metadata.labels,
        None
    );
}

#[test]
fn a_sans_io_core_observes_with_the_timestamps_it_is_given() {
    // The agent's core has one clock, the timestamps it is given; the rules are the same.
    let first: Observed<Timestamp> = Observed::update(
        None,
        lease(Some("b"), at(-100), 0, "1"),
        at(0),
        at(0),
        DEFAULT_SKEW_ALLOWANCE,
    );
    assert_eq!(first.takeover_at(), at(15));
    assert_eq!(first.stale_at(), at(-80));
    assert!(matches!(
        action(Some(&first), &claim("a"), at(3), at(3)),
        Action::Wait { until, .. } if until == at(15)
    ));
    assert_eq!(at(0).plus(Duration::from_secs(2)), at(2));
    assert_eq!(at(0).minus(Duration::from_secs(2)), at(-2));
}

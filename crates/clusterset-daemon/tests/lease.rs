#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The Lease decision both daemons use, as tables: client-go's rule over Kubernetes Lease
//! semantics (moved here from the operator's leader election tests).

use std::collections::BTreeMap;
use std::time::Duration;

use clusterset_daemon::lease::{Candidate, Decision, Observed, decide, expiry, holder, release};
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};

fn candidate(identity: &str) -> Candidate {
    Candidate::new(
        "mcs-ceph-operator",
        "ops",
        identity,
        Duration::from_secs(15),
    )
}

fn t0() -> Timestamp {
    "2026-05-01T12:00:00Z".parse().unwrap()
}

fn at(seconds: i64) -> Timestamp {
    t0().checked_add(SignedDuration::from_secs(seconds))
        .unwrap()
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

fn observed(lease: Lease, since: Timestamp) -> Observed {
    Observed { lease, since }
}

fn spec(lease: &Lease) -> &LeaseSpec {
    lease.spec.as_ref().unwrap()
}

#[test]
fn a_missing_lease_is_created_held_by_me() {
    let Decision::Create(lease) = decide(None, &candidate("a"), t0()) else {
        panic!("create expected");
    };
    let spec = spec(&lease);
    assert_eq!(holder(&lease), Some("a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.acquire_time, Some(MicroTime(t0())));
    assert_eq!(spec.renew_time, Some(MicroTime(t0())));
    assert_eq!(spec.lease_transitions, Some(0));
    assert_eq!(lease.metadata.resource_version, None);
    assert_eq!(lease.metadata.name.as_deref(), Some("mcs-ceph-operator"));
    assert_eq!(lease.metadata.namespace.as_deref(), Some("ops"));
}

#[test]
fn a_free_lease_is_acquired_at_once_with_its_version() {
    let released = release(&lease(Some("b"), at(0), 3, "7"), "b", at(1)).unwrap();
    assert_eq!(holder(&released), None);
    let seen = observed(released, at(2));
    let Decision::Acquire(lease) = decide(Some(&seen), &candidate("a"), at(2)) else {
        panic!("acquire expected");
    };
    assert_eq!(holder(&lease), Some("a"));
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("7"));
    assert_eq!(spec(&lease).lease_transitions, Some(4));
    assert_eq!(spec(&lease).acquire_time, Some(MicroTime(at(2))));
}

#[test]
fn a_lease_created_empty_is_free() {
    // As a cluster admin's manifests create it: a name and labels, no spec.
    let empty = Lease {
        metadata: ObjectMeta {
            resource_version: Some("3".into()),
            ..ObjectMeta::default()
        },
        spec: None,
    };
    let Decision::Acquire(lease) = decide(Some(&observed(empty, at(0))), &candidate("a"), at(0))
    else {
        panic!("acquire expected");
    };
    assert_eq!(holder(&lease), Some("a"));
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("3"));
    assert_eq!(spec(&lease).lease_transitions, Some(1));
}

#[test]
fn a_lease_held_by_another_is_taken_only_after_its_duration_unrenewed() {
    let seen = observed(lease(Some("b"), at(0), 2, "9"), at(0));
    assert_eq!(
        decide(Some(&seen), &candidate("a"), at(14)),
        Decision::Wait {
            holder: "b".into(),
            until: at(15)
        }
    );
    let Decision::Acquire(lease) = decide(Some(&seen), &candidate("a"), at(15)) else {
        panic!("acquire expected once expired");
    };
    assert_eq!(holder(&lease), Some("a"));
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("9"));
    assert_eq!(spec(&lease).lease_transitions, Some(3));
    assert_eq!(spec(&lease).acquire_time, Some(MicroTime(at(15))));
    assert_eq!(spec(&lease).renew_time, Some(MicroTime(at(15))));
}

#[test]
fn the_records_own_duration_is_waited_for() {
    // The holder writes 40 s; the candidate would write 15 s: the holder's record counts.
    let mut held = lease(Some("b"), at(0), 0, "1");
    held.spec.as_mut().unwrap().lease_duration_seconds = Some(40);
    let seen = observed(held, at(0));
    assert_eq!(seen.expiry(), Some(at(40)));
    assert!(matches!(
        decide(Some(&seen), &candidate("a"), at(39)),
        Decision::Wait { until, .. } if until == at(40)
    ));
    assert!(matches!(
        decide(Some(&seen), &candidate("a"), at(40)),
        Decision::Acquire(_)
    ));
}

#[test]
fn the_holder_renews_keeping_acquire_time_and_transitions() {
    let seen = observed(lease(Some("a"), at(0), 5, "11"), at(0));
    // Also long after the record was seen, and whatever its renewTime says: it is mine.
    for now in [at(2), at(3600)] {
        let Decision::Renew(lease) = decide(Some(&seen), &candidate("a"), now) else {
            panic!("renew expected");
        };
        assert_eq!(spec(&lease).acquire_time, Some(MicroTime(t0())));
        assert_eq!(spec(&lease).renew_time, Some(MicroTime(now)));
        assert_eq!(spec(&lease).lease_transitions, Some(5));
        assert_eq!(lease.metadata.resource_version.as_deref(), Some("11"));
    }
}

#[test]
fn labels_and_annotations_of_the_stored_lease_are_kept() {
    let mut held = lease(Some("a"), at(0), 0, "1");
    held.metadata.labels = Some(BTreeMap::from([("part-of".into(), "x".into())]));
    held.metadata.annotations = Some(BTreeMap::from([("note".into(), "kept".into())]));
    let Decision::Renew(renewed) =
        decide(Some(&observed(held.clone(), at(0))), &candidate("a"), at(1))
    else {
        panic!("renew expected");
    };
    assert_eq!(renewed.metadata.labels, held.metadata.labels);
    assert_eq!(renewed.metadata.annotations, held.metadata.annotations);
}

#[test]
fn the_holders_clock_is_never_compared_with_mine() {
    // The holder's clock is an hour behind mine, or 10 s ahead: its renewTime says nothing
    // about expiry. Only how long I have seen the same record counts.
    for renewed in [at(-3600), at(10)] {
        let seen = observed(lease(Some("b"), renewed, 0, "1"), at(0));
        assert!(
            matches!(
                decide(Some(&seen), &candidate("a"), at(1)),
                Decision::Wait { until, .. } if until == at(15)
            ),
            "renewed at {renewed}"
        );
        assert!(matches!(
            decide(Some(&seen), &candidate("a"), at(15)),
            Decision::Acquire(_)
        ));
    }
}

#[test]
fn a_renewal_seen_restarts_the_wait() {
    let first = Observed::update(None, lease(Some("b"), at(0), 0, "1"), at(0));
    let same = Observed::update(Some(&first), lease(Some("b"), at(0), 0, "1"), at(10));
    assert_eq!(
        same.since,
        at(0),
        "unchanged record: still observed since t0"
    );
    // A new resourceVersion alone (a label changed) is no renewal.
    let relabelled = Observed::update(Some(&same), lease(Some("b"), at(0), 0, "5"), at(11));
    assert_eq!(relabelled.since, at(0));
    let renewed = Observed::update(Some(&relabelled), lease(Some("b"), at(12), 0, "6"), at(14));
    assert_eq!(renewed.since, at(14));
    assert!(matches!(
        decide(Some(&renewed), &candidate("a"), at(20)),
        Decision::Wait { until, .. } if until == at(29)
    ));
}

#[test]
fn transitions_count_changes_of_holder() {
    let write = |decision: Decision, version: &str| -> Lease {
        let (Decision::Create(mut lease)
        | Decision::Acquire(mut lease)
        | Decision::Renew(mut lease)) = decision
        else {
            panic!("a write expected, got {decision:?}");
        };
        lease.metadata.resource_version = Some(version.into());
        *lease
    };
    let a = write(decide(None, &candidate("a"), at(0)), "1");
    let b = write(
        decide(Some(&observed(a, at(0))), &candidate("b"), at(20)),
        "2",
    );
    assert_eq!(spec(&b).lease_transitions, Some(1));
    let b = write(
        decide(Some(&observed(b, at(20))), &candidate("b"), at(22)),
        "3",
    );
    assert_eq!(
        spec(&b).lease_transitions,
        Some(1),
        "a renewal is no transition"
    );
    let a = write(
        decide(Some(&observed(b, at(22))), &candidate("a"), at(40)),
        "4",
    );
    assert_eq!(spec(&a).lease_transitions, Some(2));
    assert_eq!(holder(&a), Some("a"));
}

#[test]
fn only_the_holder_releases_clearing_the_holder_and_keeping_the_rest() {
    let mut held = lease(Some("a"), at(0), 4, "1");
    held.metadata.managed_fields = Some(Vec::new());
    assert_eq!(release(&held, "b", at(1)), None);
    let released = release(&held, "a", at(1)).unwrap();
    assert_eq!(holder(&released), None);
    assert_eq!(released.metadata.resource_version.as_deref(), Some("1"));
    assert_eq!(released.metadata.managed_fields, None);
    let spec = spec(&released);
    assert_eq!(spec.renew_time, Some(MicroTime(at(1))));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.lease_transitions, Some(4));
    assert_eq!(spec.acquire_time, Some(MicroTime(t0())));
}

#[test]
fn expiry_is_since_plus_the_records_duration() {
    assert_eq!(
        expiry(&lease(Some("b"), at(-3600), 0, "1"), at(5)),
        Some(at(20))
    );
    let mut no_duration = lease(Some("b"), at(0), 0, "1");
    no_duration.spec.as_mut().unwrap().lease_duration_seconds = None;
    assert_eq!(expiry(&no_duration, at(5)), None);
    // Without a duration nothing protects the holder.
    assert!(matches!(
        decide(Some(&observed(no_duration, at(5))), &candidate("a"), at(5)),
        Decision::Acquire(_)
    ));
}

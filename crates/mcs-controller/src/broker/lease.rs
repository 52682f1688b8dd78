//! The heartbeat Leases: one per cluster in the broker namespace, named after the cluster
//! ([`lease_name`]) and labelled with its id. An agent renews its own ([`heartbeat`]), a cluster
//! whose Lease ran out is stale, and a Lease whose name is not the one of the cluster its label
//! names was written by another member's credentials ([`lease_writer_check`]).
//!
//! The rules are [`kube_lease`]'s, shared with the operator's leader election: another
//! instance's Lease is taken only once this agent has seen it unchanged for its duration by its
//! own clock (client-go's rule; clock skew between clusters cannot end a Lease early), and a
//! cluster is stale once its Lease has been seen unchanged for its duration, less, on first
//! sight, the Lease's own age beyond [`kube_lease::DEFAULT_SKEW_ALLOWANCE`].

use std::time::Duration;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube_lease::{Action, LeaseClaim, Observed};
use mcs_types::ClusterId;

use super::{CLUSTER_ID_LABEL, ForeignWriter};

/// Whether a heartbeat Lease can have been written by the cluster its label names: only that
/// cluster's Lease name is writable with its credentials. `Ok(None)` for a Lease that names no
/// cluster (not a heartbeat).
pub fn lease_writer_check(lease: &Lease) -> Result<Option<ClusterId>, ForeignWriter> {
    let Some(cluster) = lease_cluster(lease) else {
        return Ok(None);
    };
    let expected = lease_name(&cluster);
    let name = lease.metadata.name.as_deref().unwrap_or_default();
    if name == expected {
        Ok(Some(cluster))
    } else {
        Err(ForeignWriter::LeaseName {
            cluster,
            namespace: lease.metadata.namespace.clone().unwrap_or_default(),
            name: name.to_owned(),
            expected,
        })
    }
}

/// The name of `cluster`'s heartbeat Lease.
pub fn lease_name(cluster: &ClusterId) -> String {
    format!("clusterset-agent-{cluster}")
}

/// The cluster a heartbeat Lease belongs to (its [`CLUSTER_ID_LABEL`]).
pub fn lease_cluster(lease: &Lease) -> Option<ClusterId> {
    let value = lease.metadata.labels.as_ref()?.get(CLUSTER_ID_LABEL)?;
    ClusterId::new(value).ok()
}

/// What the agent does about its own heartbeat Lease.
#[derive(Debug, Clone, PartialEq)]
pub enum Heartbeat {
    /// No Lease yet: create this one.
    Create(Box<Lease>),
    /// Replace the stored Lease with this one (it carries the stored `resourceVersion`, so a
    /// concurrent change makes the write fail with 409 instead of overwriting it).
    Replace(Box<Lease>),
    /// Another agent instance holds this cluster's Lease and this agent has not yet seen it
    /// unchanged for its duration: two agents use one cluster id. Do not publish; wait.
    Blocked {
        /// The other holder.
        holder: String,
        /// When, by this agent's clock, the Lease may be taken if it does not change.
        until: Timestamp,
    },
}

/// The claim of the agent `identity` on `cluster`'s heartbeat Lease in the broker `namespace`:
/// the Lease's name, the duration it declares, and the cluster id label every write carries.
pub fn heartbeat_claim(
    cluster: &ClusterId,
    identity: &str,
    namespace: &str,
    duration: Duration,
) -> LeaseClaim {
    LeaseClaim::new(&lease_name(cluster), namespace, identity, duration)
        .with_label(CLUSTER_ID_LABEL, cluster.as_str())
}

/// The heartbeat decision at `now` for `claim`, given what this agent observed of the Lease
/// (`None`: there is none).
pub fn heartbeat(
    observed: Option<&Observed<Timestamp>>,
    claim: &LeaseClaim,
    now: Timestamp,
) -> Heartbeat {
    // A heartbeat does not lead: whatever it held before, a Lease naming this identity is
    // renewed, a free or long-unrenewed one taken, another's waited for.
    match kube_lease::action(observed, claim, now, now) {
        Action::Create(lease) => Heartbeat::Create(lease),
        Action::Acquire(lease) | Action::Renew(lease) => Heartbeat::Replace(lease),
        Action::Wait { holder, until } => Heartbeat::Blocked { holder, until },
    }
}

/// The Lease to write on a clean shutdown at `now`: the stored one without a holder, so that
/// the next instance (a new pod after a rollout) takes it at once instead of waiting for it to
/// expire, renewed so that the cluster does not look stale to the others meanwhile
/// ([`kube_lease::release`]). `None` when `identity` does not hold the Lease.
pub fn release(stored: Option<&Lease>, identity: &str, now: Timestamp) -> Option<Lease> {
    kube_lease::release(stored?, identity, now)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
    use kube_lease::{DEFAULT_SKEW_ALLOWANCE, holder};

    use super::*;

    fn east() -> ClusterId {
        ClusterId::new("east").unwrap()
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    fn claim(identity: &str) -> LeaseClaim {
        heartbeat_claim(&east(), identity, "broker", Duration::from_secs(30))
    }

    /// `lease` as seen changing at `now` (no first-sight credit).
    fn seen(lease: &Lease, now: Timestamp) -> Observed<Timestamp> {
        Observed::seen_change(lease.clone(), now)
    }

    #[test]
    fn heartbeat_creates_renews_takes_over_unrenewed_and_blocks_live_others() {
        let created = match heartbeat(None, &claim("pod-a"), at(100)) {
            Heartbeat::Create(lease) => *lease,
            other => panic!("{other:?}"),
        };
        assert_eq!(holder(&created), Some("pod-a"));
        assert_eq!(lease_cluster(&created), Some(east()));
        assert_eq!(
            created.spec.as_ref().unwrap().lease_duration_seconds,
            Some(30)
        );

        let mut stored = created.clone();
        stored.metadata.resource_version = Some("7".into());
        // Our own lease: renewed, acquire time kept, resourceVersion carried for 409 detection.
        let Heartbeat::Replace(renewed) =
            heartbeat(Some(&seen(&stored, at(100))), &claim("pod-a"), at(110))
        else {
            panic!()
        };
        assert_eq!(renewed.metadata.resource_version.as_deref(), Some("7"));
        let spec = renewed.spec.as_ref().unwrap();
        assert_eq!(spec.acquire_time, Some(MicroTime(at(100))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(110))));
        assert_eq!(spec.lease_transitions, Some(0));

        // Another holder blocks until it has been seen unchanged for its duration.
        let observed = seen(&stored, at(105));
        assert_eq!(
            heartbeat(Some(&observed), &claim("pod-b"), at(134)),
            Heartbeat::Blocked {
                holder: "pod-a".into(),
                until: at(135)
            }
        );
        // Unrenewed for its duration: taken over, one more transition.
        let Heartbeat::Replace(taken) = heartbeat(Some(&observed), &claim("pod-b"), at(135)) else {
            panic!()
        };
        let spec = taken.spec.as_ref().unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("pod-b"));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(135))));
        assert_eq!(spec.lease_transitions, Some(1));
    }

    #[test]
    fn another_instances_lease_is_never_taken_by_its_own_times_on_first_sight() {
        // pod-a's clock is far behind: its renewTime says an hour ago. pod-b still waits the
        // whole duration of seeing it unchanged before taking it (it may be alive and renewing).
        let Heartbeat::Create(lease) = heartbeat(None, &claim("pod-a"), at(-3600)) else {
            panic!()
        };
        let first = Observed::update(None, *lease, at(0), at(0), DEFAULT_SKEW_ALLOWANCE);
        assert!(matches!(
            heartbeat(Some(&first), &claim("pod-b"), at(1)),
            Heartbeat::Blocked { until, .. } if until == at(30)
        ));
        // ... while the cluster's liveness, judged on the same first sight, counts it as gone.
        assert!(first.is_stale(at(0)));
    }

    #[test]
    fn the_lease_the_hub_manifests_create_is_taken_with_its_labels_kept() {
        // As `clusterset-agent hub-manifests` creates it: labels, no spec.
        let created = Lease {
            metadata: ObjectMeta {
                name: Some(lease_name(&east())),
                namespace: Some("broker".into()),
                labels: Some(BTreeMap::from([
                    (
                        crate::hub::PART_OF.0.to_owned(),
                        crate::hub::PART_OF.1.to_owned(),
                    ),
                    (CLUSTER_ID_LABEL.to_owned(), "east".to_owned()),
                ])),
                annotations: Some(BTreeMap::from([("note".to_owned(), "kept".to_owned())])),
                resource_version: Some("3".into()),
                ..Default::default()
            },
            spec: None,
        };
        let Heartbeat::Replace(taken) =
            heartbeat(Some(&seen(&created, at(100))), &claim("pod-a"), at(100))
        else {
            panic!("a Lease without a holder is free")
        };
        assert_eq!(holder(&taken), Some("pod-a"));
        assert_eq!(taken.metadata.labels, created.metadata.labels);
        assert_eq!(taken.metadata.annotations, created.metadata.annotations);
        assert_eq!(taken.metadata.resource_version.as_deref(), Some("3"));
        let Heartbeat::Replace(renewed) =
            heartbeat(Some(&seen(&taken, at(100))), &claim("pod-a"), at(110))
        else {
            panic!()
        };
        assert_eq!(renewed.metadata.labels, created.metadata.labels);
    }

    #[test]
    fn a_released_lease_is_taken_at_once_by_the_next_instance() {
        let Heartbeat::Create(lease) = heartbeat(None, &claim("pod-a"), at(100)) else {
            panic!()
        };
        assert_eq!(
            release(Some(&lease), "pod-b", at(120)),
            None,
            "only the holder releases"
        );
        let released = release(Some(&lease), "pod-a", at(120)).unwrap();
        assert_eq!(holder(&released), None);
        assert_eq!(
            released.spec.as_ref().unwrap().renew_time,
            Some(MicroTime(at(120))),
            "the cluster stays fresh"
        );
        let Heartbeat::Replace(taken) =
            heartbeat(Some(&seen(&released, at(121))), &claim("pod-b"), at(121))
        else {
            panic!("a released Lease is free")
        };
        assert_eq!(holder(&taken), Some("pod-b"));
    }
}

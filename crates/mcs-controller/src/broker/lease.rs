//! The heartbeat Leases: one per cluster in the broker namespace, named after the cluster
//! ([`lease_name`]) and labelled with its id. An agent renews its own ([`heartbeat`]), a cluster
//! whose Lease ran out is stale, and a Lease whose name is not the one of the cluster its label
//! names was written by another member's credentials ([`lease_writer_check`]).

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
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

/// When a Lease runs out: its renew (or acquire) time plus its duration. `None` when it says
/// neither.
pub fn lease_expiry(lease: &Lease) -> Option<Timestamp> {
    let spec = lease.spec.as_ref()?;
    let renewed = spec.renew_time.as_ref().or(spec.acquire_time.as_ref())?.0;
    let duration = SignedDuration::from_secs(i64::from(spec.lease_duration_seconds?.max(0)));
    Some(renewed.checked_add(duration).unwrap_or(Timestamp::MAX))
}

/// The holder of a Lease, if any (an empty identity counts as none).
pub fn lease_holder(lease: &Lease) -> Option<&str> {
    lease
        .spec
        .as_ref()?
        .holder_identity
        .as_deref()
        .filter(|h| !h.is_empty())
}

/// What the agent does about its own heartbeat Lease.
#[derive(Debug, Clone, PartialEq)]
pub enum Heartbeat {
    /// No Lease yet: create this one.
    Create(Box<Lease>),
    /// Replace the stored Lease with this one (it carries the stored `resourceVersion`, so a
    /// concurrent change makes the write fail with 409 instead of overwriting it).
    Replace(Box<Lease>),
    /// Another agent instance holds this cluster's Lease and it has not expired: two agents use
    /// one cluster id. Do not publish; wait.
    Blocked {
        /// The other holder.
        holder: String,
        /// When its Lease runs out.
        until: Timestamp,
    },
}

/// The heartbeat decision for `identity` of `cluster`, given the stored Lease.
pub fn heartbeat(
    stored: Option<&Lease>,
    cluster: &ClusterId,
    identity: &str,
    namespace: &str,
    duration_seconds: i32,
    now: Timestamp,
) -> Heartbeat {
    let fresh = |previous: Option<&Lease>| {
        let previous_spec = previous.and_then(|l| l.spec.clone()).unwrap_or_default();
        let same_holder = previous.and_then(lease_holder) == Some(identity);
        let transitions = previous_spec.lease_transitions.unwrap_or(0);
        Lease {
            metadata: ObjectMeta {
                name: Some(lease_name(cluster)),
                namespace: Some(namespace.to_owned()),
                // Labels and annotations others set (the hub manifests' `part-of`) are kept: a
                // replace would otherwise drop them.
                labels: Some({
                    let mut labels = previous
                        .and_then(|l| l.metadata.labels.clone())
                        .unwrap_or_default();
                    labels.insert(CLUSTER_ID_LABEL.to_owned(), cluster.to_string());
                    labels
                }),
                annotations: previous.and_then(|l| l.metadata.annotations.clone()),
                resource_version: previous.and_then(|l| l.metadata.resource_version.clone()),
                ..Default::default()
            },
            spec: Some(LeaseSpec {
                holder_identity: Some(identity.to_owned()),
                lease_duration_seconds: Some(duration_seconds),
                acquire_time: if same_holder {
                    previous_spec.acquire_time
                } else {
                    Some(MicroTime(now))
                },
                renew_time: Some(MicroTime(now)),
                lease_transitions: Some(if same_holder || previous.is_none() {
                    transitions
                } else {
                    transitions.saturating_add(1)
                }),
                ..Default::default()
            }),
        }
    };
    match stored {
        None => Heartbeat::Create(Box::new(fresh(None))),
        Some(lease) => match (lease_holder(lease), lease_expiry(lease)) {
            (Some(holder), Some(until)) if holder != identity && now < until => {
                Heartbeat::Blocked {
                    holder: holder.to_owned(),
                    until,
                }
            }
            _ => Heartbeat::Replace(Box::new(fresh(Some(lease)))),
        },
    }
}

/// The Lease to write on a clean shutdown: the stored one without a holder, so that the next
/// instance (a new pod after a rollout) takes it at once instead of waiting for it to expire.
/// The renew time is kept, so the cluster does not look stale to the others meanwhile. `None`
/// when `identity` does not hold the Lease.
pub fn release(stored: Option<&Lease>, identity: &str) -> Option<Lease> {
    let stored = stored?;
    if lease_holder(stored) != Some(identity) {
        return None;
    }
    let mut released = stored.clone();
    if let Some(spec) = released.spec.as_mut() {
        spec.holder_identity = None;
    }
    released.metadata.managed_fields = None;
    Some(released)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use super::*;

    fn east() -> ClusterId {
        ClusterId::new("east").unwrap()
    }

    fn at(second: i64) -> Timestamp {
        Timestamp::from_second(second).unwrap()
    }

    #[test]
    fn heartbeat_creates_renews_takes_over_expired_and_blocks_live_others() {
        let created = match heartbeat(None, &east(), "pod-a", "broker", 30, at(100)) {
            Heartbeat::Create(lease) => *lease,
            other => panic!("{other:?}"),
        };
        assert_eq!(lease_holder(&created), Some("pod-a"));
        assert_eq!(lease_expiry(&created), Some(at(130)));
        assert_eq!(lease_cluster(&created), Some(east()));

        let mut stored = created.clone();
        stored.metadata.resource_version = Some("7".into());
        // Our own lease: renewed, acquire time kept, resourceVersion carried for 409 detection.
        let Heartbeat::Replace(renewed) =
            heartbeat(Some(&stored), &east(), "pod-a", "broker", 30, at(110))
        else {
            panic!()
        };
        assert_eq!(renewed.metadata.resource_version.as_deref(), Some("7"));
        let spec = renewed.spec.as_ref().unwrap();
        assert_eq!(spec.acquire_time, Some(MicroTime(at(100))));
        assert_eq!(spec.renew_time, Some(MicroTime(at(110))));
        assert_eq!(spec.lease_transitions, Some(0));

        // Another live holder blocks.
        assert_eq!(
            heartbeat(Some(&stored), &east(), "pod-b", "broker", 30, at(129)),
            Heartbeat::Blocked {
                holder: "pod-a".into(),
                until: at(130)
            }
        );
        // Expired: taken over, one more transition.
        let Heartbeat::Replace(taken) =
            heartbeat(Some(&stored), &east(), "pod-b", "broker", 30, at(130))
        else {
            panic!()
        };
        let spec = taken.spec.as_ref().unwrap();
        assert_eq!(spec.holder_identity.as_deref(), Some("pod-b"));
        assert_eq!(spec.acquire_time, Some(MicroTime(at(130))));
        assert_eq!(spec.lease_transitions, Some(1));
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
                        "app.kubernetes.io/part-of".to_owned(),
                        "clusterset".to_owned(),
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
            heartbeat(Some(&created), &east(), "pod-a", "broker", 30, at(100))
        else {
            panic!("a Lease without a holder is free")
        };
        assert_eq!(lease_holder(&taken), Some("pod-a"));
        assert_eq!(taken.metadata.labels, created.metadata.labels);
        assert_eq!(taken.metadata.annotations, created.metadata.annotations);
        assert_eq!(taken.metadata.resource_version.as_deref(), Some("3"));
        let Heartbeat::Replace(renewed) =
            heartbeat(Some(&taken), &east(), "pod-a", "broker", 30, at(110))
        else {
            panic!()
        };
        assert_eq!(renewed.metadata.labels, created.metadata.labels);
    }

    #[test]
    fn a_released_lease_is_taken_at_once_by_the_next_instance() {
        let Heartbeat::Create(lease) = heartbeat(None, &east(), "pod-a", "broker", 30, at(100))
        else {
            panic!()
        };
        assert_eq!(
            release(Some(&lease), "pod-b"),
            None,
            "only the holder releases"
        );
        let released = release(Some(&lease), "pod-a").unwrap();
        assert_eq!(lease_holder(&released), None);
        assert_eq!(
            lease_expiry(&released),
            Some(at(130)),
            "the cluster stays fresh"
        );
        let Heartbeat::Replace(taken) =
            heartbeat(Some(&released), &east(), "pod-b", "broker", 30, at(101))
        else {
            panic!("a released Lease is free")
        };
        assert_eq!(lease_holder(&taken), Some("pod-b"));
    }
}

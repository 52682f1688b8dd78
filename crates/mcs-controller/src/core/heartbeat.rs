//! This cluster's heartbeat Lease and the other clusters' health: the Lease writes the shell
//! carries out, whether this agent holds its Lease, which clusters are stale or dropped, and
//! when the core must be woken up without a new event.

use std::collections::BTreeSet;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube_lease::{DEFAULT_SKEW_ALLOWANCE, Observed};
use mcs_types::{ClusterId, ServiceKey};

use super::{AgentCore, ClusterHealth, LeaseState, key_of, later};
use crate::broker::{self, Heartbeat};
use crate::cache::ObjectId;
use crate::watch::Event;

/// Whether `lease` is an older version of `stored`: by resourceVersion when both are numbers
/// (as etcd's are), else by renewal time.
pub(super) fn lease_is_older(lease: &Lease, stored: &Lease) -> bool {
    let version = |l: &Lease| l.metadata.resource_version.as_deref()?.parse::<u64>().ok();
    if let (Some(a), Some(b)) = (version(lease), version(stored)) {
        return a < b;
    }
    let renewed = |l: &Lease| l.spec.as_ref()?.renew_time.as_ref().map(|t| t.0);
    matches!((renewed(lease), renewed(stored)), (Some(a), Some(b)) if a < b)
}

/// `lease` as this core observes it at `now` (its one clock serves as wall and monotonic
/// clock), after `previous`: kube-lease's [`Observed::update`].
fn observe(
    previous: Option<&Observed<Timestamp>>,
    lease: &Lease,
    now: Timestamp,
) -> Observed<Timestamp> {
    Observed::update(previous, lease.clone(), now, now, DEFAULT_SKEW_ALLOWANCE)
}

impl AgentCore {
    /// The heartbeat to write now: create or renew this cluster's Lease, or hold off because
    /// another instance holds it. `None` until the broker's Leases have been listed, and in a
    /// follower.
    pub fn heartbeat(&self, now: Timestamp) -> Option<Heartbeat> {
        if !self.leading || !self.observed.leases.is_synced() {
            return None;
        }
        let claim = broker::heartbeat_claim(
            &self.config.cluster_id,
            &self.config.identity,
            &self.config.broker_namespace,
            self.config.lease_duration,
        );
        // The Lease as the cache holds it now (a heartbeat may come before the pass that
        // records the listed Leases: it must replace the Lease the hub manifests created, which
        // this agent may not create), observed since the last pass saw the same record.
        let id = self.own_lease_id();
        let observed = self
            .observed
            .leases
            .get(&id)
            .map(|lease| observe(self.observed.lease_observations.get(&id), lease, now));
        Some(broker::heartbeat(observed.as_ref(), &claim, now))
    }

    /// The Lease write at `now` that hands this cluster's heartbeat Lease back on a clean
    /// shutdown, if this agent holds it.
    pub fn release_heartbeat(&self, now: Timestamp) -> Option<Heartbeat> {
        let stored = self.observed.leases.get(&self.own_lease_id());
        broker::release(stored, &self.config.identity, now).map(|l| Heartbeat::Replace(Box::new(l)))
    }

    fn own_lease_id(&self) -> ObjectId {
        ObjectId::new(
            &self.config.broker_namespace,
            &broker::lease_name(&self.config.cluster_id),
        )
    }

    /// Records at `now` every heartbeat Lease the cache holds: an unchanged record keeps the
    /// time it was first seen, a changed one starts now, a new one starts now with the credit of
    /// its own age (kube-lease's [`Observed::update`]).
    pub(super) fn observe_leases(&mut self, now: Timestamp) {
        // Every pass: only what changed is observed anew (an unchanged Lease keeps its
        // observation as `Observed::update` would, without copying the Lease again).
        let leases = &self.observed.leases;
        let observations = &mut self.observed.lease_observations;
        observations.retain(|id, _| leases.get(id).is_some());
        for (id, lease) in leases.iter() {
            match observations.get_mut(id) {
                Some(seen) if seen.lease() == lease => {}
                Some(seen) => *seen = observe(Some(seen), lease, now),
                None => {
                    observations.insert(id.clone(), observe(None, lease, now));
                }
            }
        }
    }

    fn observed_lease_of(&self, cluster: &ClusterId) -> Option<&Observed<Timestamp>> {
        self.observed
            .lease_observations
            .get(self.observed.leases_by_cluster.get(cluster)?)
    }

    /// `event`, unless it carries a Lease older than the one stored (a late event, or a relist
    /// from an earlier snapshot, after the heartbeat fed in the Lease the hub stored): a late
    /// `Apply` or `Delete` is dropped, and a relist keeps the stored Lease.
    pub(super) fn newest_lease(&self, event: Event<Lease>) -> Option<Event<Lease>> {
        let newer = |lease: &Lease| {
            self.observed
                .leases
                .get(&ObjectId::of(lease))
                .filter(|stored| lease_is_older(lease, stored))
                .cloned()
        };
        match event {
            Event::Apply(lease) | Event::Delete(lease) if newer(&lease).is_some() => None,
            Event::InitApply(lease) => Some(Event::InitApply(newer(&lease).unwrap_or(lease))),
            other => Some(other),
        }
    }

    /// When the core next needs [`process`](Self::process) without a new event: a Lease running
    /// out, a stale cluster reaching its drop time, or a retry.
    pub fn next_wakeup(&self) -> Option<Timestamp> {
        if self.decided.started && !self.decided.dirty.is_empty() {
            // Work left over from the last pass: now.
            return Some(Timestamp::MIN);
        }
        let mut next: Option<Timestamp> = None;
        let mut consider = |t: Timestamp| {
            next = Some(next.map_or(t, |n| n.min(t)));
        };
        for backoff in self
            .decided
            .failures
            .values()
            .flat_map(|f| f.targets.values())
        {
            if let Some(t) = backoff.retry_at {
                consider(t);
            }
        }
        for until in self.decided.first_status_waits.values().flatten() {
            consider(*until);
        }
        for (cluster, health) in &self.decided.health {
            match health {
                ClusterHealth::Fresh => {
                    if let Some(observed) = self.observed_lease_of(cluster) {
                        consider(observed.stale_at());
                    }
                }
                ClusterHealth::Stale { since } => {
                    if let Some(after) = self.drop_after() {
                        consider(later(*since, after));
                    }
                }
                ClusterHealth::Dropped { .. } => {}
            }
        }
        // This agent's own Lease: when it runs out, this agent stops holding it (or another
        // instance stops blocking it). Once it has run out there is nothing to wait for (an
        // expired Lease in the past would wake the runtime up at once, again and again).
        match &self.decided.lease_state {
            LeaseState::Held => {
                if let Some(own) = self.observed.lease_observations.get(&self.own_lease_id()) {
                    consider(own.stale_at());
                }
            }
            LeaseState::Blocked { until, .. } => consider(*until),
            LeaseState::NotHeld => {}
        }
        next
    }

    pub(super) fn drop_after(&self) -> Option<SignedDuration> {
        let after = self.config.stale_drop_after?;
        SignedDuration::try_from(after).ok()
    }

    /// Whether this agent holds its cluster's Lease at `now`: it is named the holder and the
    /// Lease is not stale (renewed within its duration, judged on first sight by the times this
    /// identity wrote); another holder blocks it until this agent has seen the Lease unchanged
    /// for its duration (client-go's rule: the other holder's times never count).
    pub(super) fn compute_lease_state(&self, now: Timestamp) -> LeaseState {
        let Some(observed) = self.observed.lease_observations.get(&self.own_lease_id()) else {
            return LeaseState::NotHeld;
        };
        match kube_lease::holder(observed.lease()) {
            Some(holder) if holder == self.config.identity => {
                if observed.is_stale(now) {
                    LeaseState::NotHeld
                } else {
                    LeaseState::Held
                }
            }
            Some(holder) if now < observed.takeover_at() => LeaseState::Blocked {
                holder: holder.to_owned(),
                until: observed.takeover_at(),
            },
            _ => LeaseState::NotHeld,
        }
    }

    pub(super) fn compute_health(&mut self, cluster: &ClusterId, now: Timestamp) -> ClusterHealth {
        let since = match self.observed_lease_of(cluster) {
            Some(observed) if !observed.is_stale(now) => {
                self.decided.missing_since.remove(cluster);
                return ClusterHealth::Fresh;
            }
            Some(observed) => observed.stale_at(),
            None => *self
                .decided
                .missing_since
                .entry(cluster.clone())
                .or_insert(now),
        };
        match self.drop_after() {
            Some(after) if now >= later(since, after) => ClusterHealth::Dropped { since },
            _ => ClusterHealth::Stale { since },
        }
    }

    pub(super) fn refresh_health(&mut self, now: Timestamp) {
        self.observe_leases(now);
        let clusters: Vec<ClusterId> = self
            .observed
            .services_by_cluster
            .keys()
            .filter(|c| **c != self.config.cluster_id)
            .cloned()
            .collect();
        let mut seen = BTreeSet::new();
        for cluster in clusters {
            let health = self.compute_health(&cluster, now);
            let previous = self.decided.health.insert(cluster.clone(), health);
            if previous != Some(health)
                && let Some(keys) = self.observed.services_by_cluster.get(&cluster)
            {
                self.decided.dirty.extend(keys.iter().cloned());
            }
            seen.insert(cluster);
        }
        self.decided.health.retain(|c, _| seen.contains(c));
        self.decided.missing_since.retain(|c, _| seen.contains(c));

        let lease_state = self.compute_lease_state(now);
        if lease_state != self.decided.lease_state {
            self.decided.lease_state = lease_state;
            let mine: Vec<ServiceKey> = self
                .observed
                .exports
                .values()
                .map(|e| key_of(&ObjectId::of(e)))
                .chain(
                    self.observed
                        .services_by_cluster
                        .get(&self.config.cluster_id)
                        .into_iter()
                        .flatten()
                        .cloned(),
                )
                .collect();
            self.decided.dirty.extend(mine);
        }
    }
}

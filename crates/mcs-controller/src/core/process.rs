//! One pass of the core: the start once both sides synced (persisted IP assignments restored),
//! retries due, and the dirty services reconciled; the IP pools and the emission of writes.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::jiff::Timestamp;
use mcs_types::ServiceKey;

use super::{AgentCore, Output, ZoneChange, key_of};
use crate::cache::ObjectId;
use crate::write::Write;
use crate::{ExportRecord, IpPool, family_of};

#[derive(Debug, Clone, Copy)]
pub(super) enum PoolKind {
    Global,
    Clusterset,
}

impl AgentCore {
    /// Restores the persisted IP assignments and marks everything known dirty; runs once, when
    /// both sides have synced.
    pub(super) fn start(&mut self) {
        let me = self.config.cluster_id.clone();
        let own: Vec<ExportRecord> = self
            .observed
            .services_by_cluster
            .get(&me)
            .into_iter()
            .flatten()
            .filter_map(|key| self.observed.records_by_service.get(key)?.get(&me))
            .flat_map(BTreeMap::values)
            .filter_map(|id| {
                self.observed
                    .records
                    .get(id)?
                    .checked_record()
                    .ok()
                    .cloned()
            })
            .collect();
        for record in own {
            for ip in &record.global_ips {
                self.restore(true, &record.service_key, *ip);
            }
        }
        let imported: Vec<(ServiceKey, String)> = self
            .observed
            .imports
            .values()
            .flat_map(|i| {
                let key = key_of(&ObjectId::of(i));
                i.spec.ips.iter().map(move |ip| (key.clone(), ip.clone()))
            })
            .collect();
        for (key, ip) in imported {
            match ip.parse::<IpAddr>() {
                Ok(ip) => self.restore(false, &key, ip),
                Err(_) => self.problems.push(format!(
                    "ServiceImport {key} has clusterset IP {ip:?}, which is not an IP address: a new one is assigned"
                )),
            }
        }
        let mut keys: BTreeSet<ServiceKey> =
            self.observed.records_by_service.keys().cloned().collect();
        keys.extend(
            self.observed
                .exports
                .values()
                .map(|e| key_of(&ObjectId::of(e))),
        );
        keys.extend(
            self.observed
                .imports
                .values()
                .map(|i| key_of(&ObjectId::of(i))),
        );
        keys.extend(self.observed.imported_slices_by_service.keys().cloned());
        self.decided.dirty.extend(keys);
        self.decided.started = true;
    }

    pub(super) fn restore(&mut self, global: bool, key: &ServiceKey, ip: IpAddr) {
        let pools = if global {
            &mut self.decided.global_pools
        } else {
            &mut self.decided.clusterset_pools
        };
        let what = if global { "global" } else { "clusterset" };
        match pools
            .iter_mut()
            .find(|p| family_of(p.cidr().addr()) == family_of(ip))
        {
            Some(pool) => {
                if let Err(e) = pool.restore(key.clone(), ip) {
                    self.problems.push(format!(
                        "cannot keep {what} IP {ip} of {key}: {e}; a new one is assigned"
                    ));
                }
            }
            None => self.problems.push(format!(
                "{key} holds {what} IP {ip} but no {what} CIDR of its family is configured: a new one is assigned if a CIDR is added"
            )),
        }
    }

    /// Reconciles what changed. Returns nothing until both the local and the broker caches have
    /// synced (a partial cache must never cause a deletion or an IP handed out twice). A
    /// follower's pass returns only the DNS zone's changes and problems.
    pub fn process(&mut self, now: Timestamp) -> Output {
        let mut out = Output {
            problems: std::mem::take(&mut self.problems),
            ..Default::default()
        };
        if !self.observed.zone_synced
            && self.observed.imports.is_synced()
            && self.observed.imported_slices.is_synced()
        {
            self.observed.zone_synced = true;
            out.zone_synced = true;
            out.zone_changes.extend(
                self.observed
                    .imports
                    .values()
                    .map(|i| ZoneChange::ServiceImport(Box::new(i.clone()))),
            );
            out.zone_changes.extend(
                self.observed
                    .imported_slices
                    .values()
                    .map(|s| ZoneChange::EndpointSlice(Box::new(s.clone()))),
            );
        }
        out.zone_changes.append(&mut self.observed.zone_out);
        if !self.leading {
            // A follower keeps observing the heartbeat Leases, so that once it leads it can
            // take over its cluster's Lease from a leader that died as soon as the Lease's
            // duration has passed since its last renewal, rather than a whole duration later.
            if self.observed.leases.is_synced() {
                self.observe_leases(now);
            }
            out.problems.append(&mut self.problems);
            return out;
        }
        if !(self.local_synced() && self.broker_synced()) {
            return out;
        }
        if !self.decided.started {
            self.start();
        }
        self.refresh_health(now);
        for (key, failure) in &mut self.decided.failures {
            for backoff in failure.targets.values_mut() {
                if backoff.retry_at.is_some_and(|t| t <= now) {
                    backoff.retry_at = None;
                    self.decided.dirty.insert(key.clone());
                }
            }
        }
        // Exports whose first status waited long enough for their record: say Pending now.
        for (key, until) in &mut self.decided.first_status_waits {
            if until.is_some_and(|t| t <= now) {
                *until = None;
                self.decided.dirty.insert(key.clone());
            }
        }
        // A released address may be what a waiting service needs: reconcile those again (a
        // bounded number of times; waiting services only assign, so this settles).
        for _ in 0..3 {
            let dirty = std::mem::take(&mut self.decided.dirty);
            if dirty.is_empty() {
                break;
            }
            out.reconciled += dirty.len();
            for key in dirty {
                self.reconcile(&key, now, &mut out);
            }
            if !std::mem::take(&mut self.decided.freed) {
                break;
            }
            let waiting: Vec<ServiceKey> =
                self.decided.waiting_for_address.iter().cloned().collect();
            self.decided.dirty.extend(waiting);
        }
        out.problems.append(&mut self.problems);
        out
    }

    pub(super) fn pools_mut(&mut self, kind: PoolKind) -> &mut Vec<IpPool<ServiceKey>> {
        match kind {
            PoolKind::Global => &mut self.decided.global_pools,
            PoolKind::Clusterset => &mut self.decided.clusterset_pools,
        }
    }

    /// Addresses for `key`, one per wanted family that has a pool; releases the key's address in
    /// pools of unwanted families. A key left short (exhausted pool) waits for a release.
    pub(super) fn assign_ips(
        &mut self,
        kind: PoolKind,
        key: &ServiceKey,
        families: &[String],
    ) -> Vec<IpAddr> {
        let mut ips = Vec::new();
        let mut short = false;
        let mut freed = false;
        let mut problems = Vec::new();
        for pool in self.pools_mut(kind).iter_mut() {
            let family = family_of(pool.cidr().addr());
            if families.iter().any(|f| f == family) {
                match pool.assign(key) {
                    Ok(ip) => ips.push(ip),
                    Err(e) => {
                        short = true;
                        problems.push(format!("cannot assign an address to {key}: {e}"));
                    }
                }
            } else {
                freed |= pool.release(key).is_some();
            }
        }
        self.problems.append(&mut problems);
        self.decided.freed |= freed;
        if short {
            self.decided.waiting_for_address.insert(key.clone());
        } else {
            self.decided.waiting_for_address.remove(key);
        }
        ips
    }

    pub(super) fn release_ips(&mut self, kind: PoolKind, key: &ServiceKey) {
        let mut freed = false;
        for pool in self.pools_mut(kind).iter_mut() {
            freed |= pool.release(key).is_some();
        }
        self.decided.freed |= freed;
    }

    pub(super) fn emit(&mut self, out: &mut Output, write: Write, hold: bool) {
        if hold {
            return;
        }
        if self.decided.in_flight.send(&write) {
            out.writes.push(write);
        }
    }
}

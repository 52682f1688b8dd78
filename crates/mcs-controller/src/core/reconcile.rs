//! Reconciling one service: this cluster's export and record, the merge of every cluster's
//! records, the ServiceImport and EndpointSlices to write or delete, and the ServiceExport's
//! conditions.

use std::collections::BTreeSet;

use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::Timestamp;
use mcs_types::conditions::{ConditionStatus, DesiredCondition};
use mcs_types::{ServiceExportStatus, ServiceImportType, ServiceKey};

use super::{
    AgentCore, ClusterHealth, EXPORT_CONDITIONS, FRESH_REASON, IMPORT_CONDITIONS, LeaseState,
    Output, PoolKind, RecordCopies, STALE_CLUSTERS_CONDITION, STALE_REASON, Side,
    WrittenConditions, export_status_matches, import_spec_matches, import_status_matches, is_live,
    slice_matches,
};
use crate::broker::{BrokerRecord, RecordHome};
use crate::cache::ObjectId;
use crate::write::{Target, Write};
use crate::{
    ExportRecord, ExportedService, InvalidExport, LocalExport, MergedService, Publication,
    desired_endpoint_slices, desired_import, export_conditions, import_ready_condition,
    merge_exports,
};

impl AgentCore {
    pub(super) fn reconcile(&mut self, key: &ServiceKey, now: Timestamp, out: &mut Output) {
        let id = ObjectId::new(&key.namespace, &key.name);
        let me = self.config.cluster_id.clone();
        // While a write of this service waits for its retry time, write nothing else for it to
        // the same API server (conditions still show the failure: the ServiceExport's status
        // waits only if writing it is what failed).
        let failure = self.decided.failures.get(key);
        let holding_broker = failure.is_some_and(|f| f.holds(Side::Broker, now));
        let holding = failure.is_some_and(|f| f.holds(Side::Member, now));
        let holding_status = holding
            && failure.is_some_and(|f| f.targets.contains_key(&Target::ExportStatus(id.clone())));

        // 1. This cluster's export: validity, global IPs, the record to publish.
        let export = self
            .observed
            .exports
            .get(&id)
            .filter(|e| is_live(&e.metadata))
            .cloned();
        let mut validity: Result<(), InvalidExport> = Ok(());
        let mut desired_record: Option<ExportRecord> = None;
        let mut keep_published = false;
        let mut local_failure: Option<String> = None;
        if let Some(export) = &export {
            let service = self
                .observed
                .services
                .get(&id)
                .filter(|s| is_live(&s.metadata))
                .cloned();
            match ExportedService::from_service(key, service.as_ref()) {
                Err(invalid) => {
                    self.release_ips(PoolKind::Global, key);
                    validity = Err(invalid);
                }
                Ok(exported) => {
                    let families = if exported.headless {
                        Vec::new()
                    } else {
                        exported.ip_families.clone()
                    };
                    let global_ips = self.assign_ips(PoolKind::Global, key, &families);
                    let wanted = self.config.endpoint_mode == crate::EndpointMode::GlobalIngress
                        && !exported.headless;
                    if wanted && global_ips.is_empty() {
                        // No global address (pool exhausted or no range of the service's
                        // family): keep what is published rather than withdrawing it.
                        keep_published = true;
                        local_failure = Some(format!(
                            "No global IP for this export: this cluster has no free address in a global CIDR of the Service's IP families ({}); add or enlarge --global-cidr",
                            families.join(", ")
                        ));
                    } else {
                        let slices: Vec<EndpointSlice> = self
                            .observed
                            .local_slices_by_service
                            .get(key)
                            .into_iter()
                            .flatten()
                            .filter_map(|sid| self.observed.local_slices.get(sid).cloned())
                            .collect();
                        let created = export
                            .metadata
                            .creation_timestamp
                            .clone()
                            .unwrap_or(Time(now));
                        match ExportRecord::from_local(LocalExport {
                            cluster_id: &me,
                            key,
                            export_created: &created,
                            export_spec: &export.spec,
                            service: service.as_ref(),
                            endpoint_slices: &slices,
                            global_ips: &global_ips,
                            mode: self.config.endpoint_mode,
                        }) {
                            Ok(record) => desired_record = Some(record),
                            Err(invalid) => validity = Err(invalid),
                        }
                    }
                }
            }
        } else {
            self.release_ips(PoolKind::Global, key);
        }

        // 2. Publish or withdraw (only while holding this cluster's heartbeat Lease).
        // This cluster's copies: one where it publishes, and during the upgrade maybe one in
        // the other place, withdrawn once the first is stored as desired.
        let publish_namespace = self.config.publish_namespace();
        let publish_home = if publish_namespace == self.config.broker_namespace {
            RecordHome::Shared
        } else {
            RecordHome::Own
        };
        let my_copies: RecordCopies = self
            .observed
            .records_by_service
            .get(key)
            .and_then(|m| m.get(&me))
            .cloned()
            .unwrap_or_default();
        let stored_own = my_copies
            .get(&publish_home)
            .and_then(|rid| self.observed.records.get(rid))
            .and_then(|r| r.checked_record().ok());
        let published = matches!((&desired_record, stored_own), (Some(d), Some(s)) if d == s);
        let has_stored_own = !my_copies.is_empty();
        // The broker holds what it should (our write went through although we were told it
        // failed, e.g. the hub went away before it answered; or nothing is left to withdraw):
        // a broker write that failed before has nothing left to retry or report.
        if published || (desired_record.is_none() && !has_stored_own) {
            self.broker_settled(key);
        }
        let lease_state = self.decided.lease_state.clone();
        if lease_state == LeaseState::Held {
            match (&desired_record, has_stored_own) {
                (Some(record), _) if !published => {
                    let object = BrokerRecord::new(record.clone(), &publish_namespace, now);
                    let write = Write::PublishRecord(Box::new(object));
                    // The same record on its way (only its publication time would differ):
                    // wait for its echo instead of publishing it again.
                    let same_in_flight = matches!(
                        self.decided.pending.get(&write.target()),
                        Some(Write::PublishRecord(p)) if p.checked_record().ok() == Some(record)
                    );
                    if !same_in_flight {
                        self.emit(out, write, holding_broker);
                    }
                }
                (None, true) if !keep_published => {
                    for rid in my_copies.values() {
                        self.emit(out, Write::withdraw(key, rid), holding_broker);
                    }
                }
                (Some(_), _) if published => {
                    // Moved: the copy where this agent publishes is stored as desired, so the
                    // other one can go without the record ever being missing.
                    for (_, rid) in my_copies.iter().filter(|(home, _)| **home != publish_home) {
                        self.emit(out, Write::withdraw(key, rid), holding_broker);
                    }
                }
                _ => {}
            }
        }
        let publish_error = self
            .decided
            .failures
            .get(key)
            .and_then(|f| f.publish_error.clone())
            .or(local_failure);
        let publication = match (&lease_state, publish_error) {
            (LeaseState::Blocked { holder, until }, _) => Publication::Failed(format!(
                "Another agent ({holder}) holds the heartbeat Lease of cluster {me} until {until}: two agents must not use one cluster id; this one does not publish"
            )),
            (_, Some(error)) => Publication::Failed(error),
            // An update on its way keeps the export Ready: the previous version is published.
            _ if desired_record.is_some() && has_stored_own => Publication::Published,
            _ => Publication::Pending,
        };

        // 3. Merge every cluster's records (stale clusters kept, dropped ones left out).
        let records: Vec<(ExportRecord, Option<Timestamp>)> = self
            .observed
            .records_by_service
            .get(key)
            .into_iter()
            .flatten()
            .filter(|(cluster, _)| {
                !matches!(
                    self.decided.health.get(*cluster),
                    Some(ClusterHealth::Dropped { .. })
                )
            })
            .filter_map(|(_, copies)| {
                // The copy in the cluster's own namespace, else the shared one.
                let (_, rid) = copies.first_key_value()?;
                let object = self.observed.records.get(rid)?;
                Some((object.checked_record().ok()?.clone(), object.published_at()))
            })
            .collect();
        let newest_publication = records.iter().filter_map(|(_, t)| *t).max();
        let plain: Vec<ExportRecord> = records.into_iter().map(|(r, _)| r).collect();
        let merged = match merge_exports(&plain) {
            Ok(merged) => merged,
            Err(e) => {
                out.problems
                    .push(format!("cannot merge the records of {key}: {e}"));
                return;
            }
        };

        // 4. Import side.
        let namespace_live = self
            .observed
            .namespaces
            .get(&ObjectId::new("", &key.namespace))
            .is_some_and(|n| is_live(&n.metadata));
        let writes_before = out.writes.len();
        match (&merged, namespace_live) {
            (Some(merged), true) => self.write_import(key, &id, merged, now, holding, out),
            _ => {
                self.release_ips(PoolKind::Clusterset, key);
                self.remove_import(key, &id, holding, out);
            }
        }
        let import_changed = out.writes[writes_before..].iter().any(|w| {
            matches!(
                w,
                Write::ApplyServiceImport(_)
                    | Write::ApplyEndpointSlice(_)
                    | Write::ApplyServiceImportStatus(_)
            )
        });
        if import_changed
            && let Some(published_at) = newest_publication
            && self
                .decided
                .accounted
                .get(key)
                .is_none_or(|seen| *seen < published_at)
        {
            self.decided.accounted.insert(key.clone(), published_at);
            out.lags
                .push((key.clone(), now.duration_since(published_at)));
        }
        if merged.is_none() {
            self.decided.accounted.remove(key);
        }

        // 5. Export conditions (none for an export found gone that the watch still holds).
        if let Some(export) = export
            .as_ref()
            .filter(|_| !self.decided.exports_gone.contains(key))
        {
            let in_merge = merged
                .as_ref()
                .filter(|m| m.records.iter().any(|r| r.cluster_id == me));
            let conditions =
                export_conditions(validity.as_ref().map(|_| ()), in_merge, &publication);
            let mut list: Vec<Condition> = export
                .status
                .as_ref()
                .map(|s| {
                    s.conditions
                        .iter()
                        .filter(|c| EXPORT_CONDITIONS.contains(&c.type_.as_str()))
                        .cloned()
                        .collect()
                })
                .unwrap_or_default();
            let uid = export.metadata.uid.clone();
            if let Some(written) = self
                .decided
                .export_conditions_written
                .get(key)
                .filter(|w| w.uid == uid)
            {
                overlay_written(&mut list, &written.conditions);
            }
            for remove in &conditions.remove {
                mcs_types::conditions::remove_condition(&mut list, remove.as_str());
            }
            let generation = export.metadata.generation;
            for desired in conditions.set {
                mcs_types::conditions::set_condition(&mut list, desired, generation, Time(now));
            }
            let status = ServiceExportStatus {
                conditions: list,
                ..Default::default()
            };
            let stored_matches = export_status_matches(&status, export)
                && export.status.as_ref().is_none_or(|s| {
                    s.conditions
                        .iter()
                        .filter(|c| EXPORT_CONDITIONS.contains(&c.type_.as_str()))
                        .all(|c| c.observed_generation == generation)
                });
            if !stored_matches && !holding_status {
                self.decided.export_conditions_written.insert(
                    key.clone(),
                    WrittenConditions {
                        uid,
                        conditions: status.conditions.clone(),
                    },
                );
                self.emit(
                    out,
                    Write::ApplyServiceExportStatus {
                        key: key.clone(),
                        status,
                    },
                    holding_status,
                );
            }
        }
    }

    pub(super) fn stale_condition(&self, merged: &MergedService) -> DesiredCondition {
        let stale: Vec<String> = merged
            .cluster_ids()
            .into_iter()
            .filter_map(|c| match self.decided.health.get(c) {
                Some(ClusterHealth::Stale { since }) => Some(format!("{c} (since {since})")),
                _ => None,
            })
            .collect();
        if stale.is_empty() {
            DesiredCondition::new(
                STALE_CLUSTERS_CONDITION,
                ConditionStatus::False,
                FRESH_REASON,
                "Every exporting cluster renews its heartbeat Lease",
            )
        } else {
            let drop = match self.config.stale_drop_after {
                Some(after) => format!("until they have been stale for {}s", after.as_secs()),
                None => "until they heartbeat again or their records are removed".to_owned(),
            };
            DesiredCondition::new(
                STALE_CLUSTERS_CONDITION,
                ConditionStatus::True,
                STALE_REASON,
                format!(
                    "Exporting clusters have stopped renewing their heartbeat Lease: {}. Their last-known exports are kept {drop}.",
                    stale.join(", ")
                ),
            )
        }
    }

    pub(super) fn write_import(
        &mut self,
        key: &ServiceKey,
        id: &ObjectId,
        merged: &MergedService,
        now: Timestamp,
        holding: bool,
        out: &mut Output,
    ) {
        let families: Vec<String> = if merged.service_type == ServiceImportType::ClusterSetIP {
            merged.ip_families.clone()
        } else {
            Vec::new()
        };
        let ips = self.assign_ips(PoolKind::Clusterset, key, &families);
        let mut desired = desired_import(merged, &ips);
        let observed = self.observed.imports.get(id).cloned();
        if observed
            .as_ref()
            .is_none_or(|o| !import_spec_matches(&desired, o))
        {
            let mut spec_only = desired.clone();
            spec_only.status = None;
            self.emit(out, Write::ApplyServiceImport(Box::new(spec_only)), holding);
        }
        let mut conditions: Vec<Condition> = observed
            .as_ref()
            .and_then(|o| o.status.as_ref())
            .map(|s| {
                s.conditions
                    .iter()
                    .filter(|c| IMPORT_CONDITIONS.contains(&c.type_.as_str()))
                    .cloned()
                    .collect()
            })
            .unwrap_or_default();
        for condition in [
            import_ready_condition(merged, &ips),
            self.stale_condition(merged),
        ] {
            mcs_types::conditions::set_condition(&mut conditions, condition, None, Time(now));
        }
        let status = desired.status.get_or_insert_with(Default::default);
        status.conditions = conditions;
        if observed
            .as_ref()
            .is_none_or(|o| !import_status_matches(&desired, o))
        {
            self.emit(
                out,
                Write::ApplyServiceImportStatus(Box::new(desired)),
                holding,
            );
        }

        let slices = desired_endpoint_slices(merged);
        let mut wanted = BTreeSet::new();
        for slice in slices {
            let name = slice.metadata.name.clone().unwrap_or_default();
            let stored = self
                .observed
                .imported_slices
                .get(&ObjectId::new(&key.namespace, &name));
            if stored.is_none_or(|s| !slice_matches(&slice, s)) {
                self.emit(out, Write::ApplyEndpointSlice(Box::new(slice)), holding);
            }
            wanted.insert(name);
        }
        let extra: Vec<String> = self
            .observed
            .imported_slices_by_service
            .get(key)
            .into_iter()
            .flatten()
            .filter(|name| !wanted.contains(*name))
            .cloned()
            .collect();
        for name in extra {
            self.emit(
                out,
                Write::DeleteEndpointSlice {
                    key: key.clone(),
                    name,
                },
                holding,
            );
        }
    }

    pub(super) fn remove_import(
        &mut self,
        key: &ServiceKey,
        id: &ObjectId,
        holding: bool,
        out: &mut Output,
    ) {
        let slices: Vec<String> = self
            .observed
            .imported_slices_by_service
            .get(key)
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        for name in slices {
            self.emit(
                out,
                Write::DeleteEndpointSlice {
                    key: key.clone(),
                    name,
                },
                holding,
            );
        }
        if self.observed.imports.get(id).is_some() {
            self.emit(out, Write::DeleteServiceImport(key.clone()), holding);
        }
    }
}

/// Lays the conditions this agent last wrote over those of the cached export: where the cache
/// holds a condition type with another status than the one written, or none, the written one
/// (with its `lastTransitionTime`) is the newer state.
fn overlay_written(list: &mut Vec<Condition>, written: &[Condition]) {
    for condition in written {
        match list.iter_mut().find(|c| c.type_ == condition.type_) {
            Some(cached) if cached.status == condition.status => {}
            Some(cached) => *cached = condition.clone(),
            None => list.push(condition.clone()),
        }
    }
}

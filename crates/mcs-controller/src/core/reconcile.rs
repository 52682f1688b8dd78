//! Reconciling one service: this cluster's export and record, the merge of every cluster's
//! records, the ServiceImport and EndpointSlices to write or delete, and the ServiceExport's
//! conditions.

use std::collections::BTreeSet;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use mcs_types::conditions::{ConditionStatus, DesiredCondition};
use mcs_types::labels::KUBERNETES_SERVICE_NAME_LABEL;
use mcs_types::v1beta1::ServiceExport;
use mcs_types::{ServiceExportStatus, ServiceImportType, ServiceKey};

use super::{
    AgentCore, ClusterHealth, EXPORT_CONDITIONS, FRESH_REASON, IMPORT_CONDITIONS, LeaseState,
    Output, PoolKind, RecordCopies, STALE_CLUSTERS_CONDITION, STALE_REASON, Side,
    WrittenConditions, derived_service_matches, export_status_matches, import_spec_matches,
    import_status_matches, is_live, later, slice_matches,
};
use crate::broker::{BrokerRecord, RecordHome};
use crate::cache::ObjectId;
use crate::write::{Target, Write};
use crate::{
    ExportConditions, ExportRecord, ExportedService, InvalidExport, LocalExport, MergeError,
    MergedService, Publication, derived_from, derived_service_name, desired_derived_service,
    desired_endpoint_slices, desired_import, export_conditions, import_ready_condition,
    merge_exports,
};

/// Which of a service's writes wait: while a failed write of it waits for its retry time,
/// nothing else of it is written to the same API server (its conditions still show the failure:
/// the ServiceExport's status waits only if writing it is what failed).
#[derive(Debug, Clone, Copy)]
struct HeldWrites {
    /// Writes to the broker (this cluster's record).
    broker: bool,
    /// Writes to the member cluster (the ServiceImport and its EndpointSlices).
    member: bool,
    /// The ServiceExport's status.
    export_status: bool,
}

/// What this cluster's own export of a service comes to (step 1 of reconciling it).
#[derive(Debug)]
struct OwnExport {
    /// The live ServiceExport, if there is one.
    export: Option<ServiceExport>,
    /// Whether it can be published (`Ok` also when there is none).
    validity: Result<(), InvalidExport>,
    /// The record to publish, if any.
    record: Option<ExportRecord>,
    /// Why a valid export has no record: it needs a global IP and none is free. What is
    /// published then stays rather than being withdrawn.
    no_global_ip: Option<String>,
}

/// Where this cluster publishes its record of a service, and what of it the broker holds.
#[derive(Debug)]
struct OwnRecordOnBroker {
    /// The namespace it publishes in.
    namespace: String,
    /// Which of its places that namespace is.
    home: RecordHome,
    /// Its copies on the hub: one where it publishes, and during the upgrade maybe one in the
    /// other place, withdrawn once the first is stored as desired.
    copies: RecordCopies,
    /// Whether the copy where it publishes is the desired record.
    published: bool,
}

impl AgentCore {
    /// Reconciles one service, step by step: this cluster's own export, its record on the
    /// broker, the merge of every cluster's records, the import side, and the export's
    /// conditions.
    pub(super) fn reconcile(&mut self, key: &ServiceKey, now: Timestamp, out: &mut Output) {
        let id = ObjectId::new(&key.namespace, &key.name);
        let held = self.held_writes(key, &id, now);
        // 1. This cluster's export: validity, global IPs, the record to publish.
        let own = self.own_export(key, &id, now);
        // 2. Publish or withdraw (only while holding this cluster's heartbeat Lease).
        let publication = self.publish_own_record(key, &own, held.broker, now, out);
        // 3. Merge every cluster's records (stale clusters kept, dropped ones left out).
        let (merged, newest_publication) = match self.merge_records(key) {
            Ok(merged) => merged,
            Err(e) => {
                out.problems
                    .push(format!("cannot merge the records of {key}: {e}"));
                return;
            }
        };
        // 4. Import side.
        let import_changed =
            self.write_or_remove_import(key, &id, merged.as_ref(), now, held.member, out);
        self.account_lag(
            key,
            merged.is_some(),
            import_changed,
            newest_publication,
            now,
            out,
        );
        // 5. Export conditions (none for an export found gone that the watch still holds).
        if let Some(export) = own
            .export
            .as_ref()
            .filter(|_| !self.decided.exports_gone.contains(key))
        {
            if self.first_status_waits(key, export, &own, &publication, now) {
                return;
            }
            let conditions = self.own_export_conditions(&own, merged.as_ref(), &publication);
            self.write_export_status(key, export, conditions, held.export_status, now, out);
        } else {
            self.decided.first_status_waits.remove(key);
        }
    }

    /// Whether the export's first status waits at `now` for the export to be published, so
    /// that an export published promptly gets one status write, `Ready=True`:
    /// - a valid export that has never been `Ready=True` (none stored or sent: new, or invalid
    ///   until now, or its publication failed before) waits for its record, on its way to the
    ///   hub (this agent publishes: it holds its cluster's heartbeat Lease);
    /// - a new export (no status stored or sent) whose Service is not there waits for its
    ///   Service: created one after the other, the two reach the agent through two watches,
    ///   in either order.
    ///
    /// It waits the configuration's `first_status_wait` at most, from when it first waited;
    /// the Service and the hub's echo of the record usually come first. `process` reconciles
    /// the export again when the wait is over. Anything else (another problem, a Service
    /// deleted under a published export, a failed publication) is shown at once.
    fn first_status_waits(
        &mut self,
        key: &ServiceKey,
        export: &ServiceExport,
        own: &OwnExport,
        publication: &Publication,
        now: Timestamp,
    ) -> bool {
        // The export's conditions as this agent last sent them, else as stored.
        let written = self
            .written_conditions(key, export)
            .map(|w| &w.conditions[..]);
        let conditions = written.unwrap_or_else(|| {
            export
                .status
                .as_ref()
                .map_or(&[][..], |s| &s.conditions[..])
        });
        let never_ready = !conditions
            .iter()
            .any(|c| c.type_ == "Ready" && c.status == "True");
        let publishing = own.validity.is_ok()
            && own.record.is_some()
            && matches!(publication, Publication::Pending)
            && self.decided.lease_state == LeaseState::Held;
        let awaiting_service =
            conditions.is_empty() && matches!(own.validity, Err(InvalidExport::NoService(_)));
        if !((never_ready && publishing) || awaiting_service) {
            self.decided.first_status_waits.remove(key);
            return false;
        }
        let wait =
            SignedDuration::try_from(self.config.first_status_wait).unwrap_or(SignedDuration::MAX);
        let until = self
            .decided
            .first_status_waits
            .entry(key.clone())
            .or_insert_with(|| Some(later(now, wait)));
        until.is_some_and(|until| now < until)
    }

    /// The export conditions this agent last sent for `export` (its uid), if any.
    fn written_conditions(
        &self,
        key: &ServiceKey,
        export: &ServiceExport,
    ) -> Option<&WrittenConditions> {
        self.decided
            .export_conditions_written
            .get(key)
            .filter(|w| w.uid == export.metadata.uid)
    }

    /// Which writes of the service wait for a failed write's retry time at `now`.
    fn held_writes(&self, key: &ServiceKey, id: &ObjectId, now: Timestamp) -> HeldWrites {
        let failure = self.decided.failures.get(key);
        let member = failure.is_some_and(|f| f.holds(Side::Member, now));
        HeldWrites {
            broker: failure.is_some_and(|f| f.holds(Side::Broker, now)),
            member,
            export_status: member
                && failure
                    .is_some_and(|f| f.targets.contains_key(&Target::ExportStatus(id.clone()))),
        }
    }

    /// Step 1: this cluster's live export of the service, whether it is valid, and the record
    /// to publish (with its global IPs assigned). Without a valid export, its global IPs are
    /// released.
    fn own_export(&mut self, key: &ServiceKey, id: &ObjectId, now: Timestamp) -> OwnExport {
        let mut own = OwnExport {
            export: None,
            validity: Ok(()),
            record: None,
            no_global_ip: None,
        };
        let export = self
            .observed
            .exports
            .get(id)
            .filter(|e| is_live(&e.metadata))
            .cloned();
        let Some(export) = export else {
            self.release_ips(PoolKind::Global, key);
            return own;
        };
        let service = self
            .observed
            .services
            .get(id)
            .filter(|s| is_live(&s.metadata))
            .cloned();
        match ExportedService::from_service(key, service.as_ref()) {
            Err(invalid) => {
                self.release_ips(PoolKind::Global, key);
                own.validity = Err(invalid);
            }
            Ok(exported) => match self.assign_global_ips(key, &exported) {
                Err(no_global_ip) => own.no_global_ip = Some(no_global_ip),
                Ok(ips) => {
                    match self.record_to_publish(key, &export, service.as_ref(), &ips, now) {
                        Ok(record) => own.record = Some(record),
                        Err(invalid) => own.validity = Err(invalid),
                    }
                }
            },
        }
        own.export = Some(export);
        own
    }

    /// The global IPs of a valid export, one per IP family of its Service (none for a headless
    /// one); the message for its ServiceExport when it needs one and none is free (pool
    /// exhausted or no range of the service's family).
    fn assign_global_ips(
        &mut self,
        key: &ServiceKey,
        exported: &ExportedService,
    ) -> Result<Vec<IpAddr>, String> {
        let families = if exported.headless {
            Vec::new()
        } else {
            exported.ip_families.clone()
        };
        let global_ips = self.assign_ips(PoolKind::Global, key, &families);
        let wanted =
            self.config.endpoint_mode == crate::EndpointMode::GlobalIngress && !exported.headless;
        if wanted && global_ips.is_empty() {
            return Err(format!(
                "No global IP for this export: this cluster has no free address in a global CIDR of the Service's IP families ({}); add or enlarge --global-cidr",
                families.join(", ")
            ));
        }
        Ok(global_ips)
    }

    /// The record this cluster publishes for its export, from the Service and its local
    /// EndpointSlices, or why the export is invalid.
    fn record_to_publish(
        &self,
        key: &ServiceKey,
        export: &ServiceExport,
        service: Option<&Service>,
        global_ips: &[IpAddr],
        now: Timestamp,
    ) -> Result<ExportRecord, InvalidExport> {
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
        ExportRecord::from_local(LocalExport {
            cluster_id: &self.config.cluster_id,
            key,
            export_created: &created,
            export_spec: &export.spec,
            service,
            endpoint_slices: &slices,
            global_ips,
            mode: self.config.endpoint_mode,
        })
    }

    /// Step 2: publishes this cluster's record of the service, or withdraws it, while this
    /// agent holds its cluster's heartbeat Lease; a broker write that failed before is
    /// forgotten once the broker holds what it should. Returns how the publication stands, for
    /// the export's conditions.
    fn publish_own_record(
        &mut self,
        key: &ServiceKey,
        own: &OwnExport,
        hold: bool,
        now: Timestamp,
        out: &mut Output,
    ) -> Publication {
        let on_broker = self.own_record_on_broker(key, own.record.as_ref());
        let has_stored_own = !on_broker.copies.is_empty();
        // The broker holds what it should (our write went through although we were told it
        // failed, e.g. the hub went away before it answered; or nothing is left to withdraw):
        // a broker write that failed before has nothing left to retry or report.
        if on_broker.published || (own.record.is_none() && !has_stored_own) {
            self.broker_settled(key);
        }
        if self.decided.lease_state == LeaseState::Held {
            self.write_own_record(key, own, &on_broker, hold, now, out);
        }
        self.publication(key, own, has_stored_own)
    }

    /// Where this cluster publishes its record of `key`, its copies on the hub, and whether
    /// the one where it publishes is `desired`.
    fn own_record_on_broker(
        &self,
        key: &ServiceKey,
        desired: Option<&ExportRecord>,
    ) -> OwnRecordOnBroker {
        let namespace = self.config.publish_namespace();
        let home = if namespace == self.config.broker_namespace {
            RecordHome::Shared
        } else {
            RecordHome::Own
        };
        let copies: RecordCopies = self
            .observed
            .records_by_service
            .get(key)
            .and_then(|m| m.get(&self.config.cluster_id))
            .cloned()
            .unwrap_or_default();
        let stored = copies
            .get(&home)
            .and_then(|rid| self.observed.records.get(rid))
            .and_then(|r| r.checked_record().ok());
        let published = matches!((desired, stored), (Some(d), Some(s)) if d == s);
        OwnRecordOnBroker {
            namespace,
            home,
            copies,
            published,
        }
    }

    /// The broker writes of this cluster's record: publish the desired record (unless the same
    /// one is on its way), withdraw every copy when there is none (unless what is published
    /// stays), or withdraw the copy in the other place once the desired one is stored.
    fn write_own_record(
        &mut self,
        key: &ServiceKey,
        own: &OwnExport,
        on_broker: &OwnRecordOnBroker,
        hold: bool,
        now: Timestamp,
        out: &mut Output,
    ) {
        let has_stored_own = !on_broker.copies.is_empty();
        match (&own.record, has_stored_own) {
            (Some(record), _) if !on_broker.published => {
                let object = BrokerRecord::new(record.clone(), &on_broker.namespace, now);
                let write = Write::PublishRecord(Box::new(object));
                // The same record on its way (only its publication time would differ):
                // wait for its echo instead of publishing it again.
                let same_in_flight = matches!(
                    self.decided.in_flight.get(&write.target()),
                    Some(Write::PublishRecord(p)) if p.checked_record().ok() == Some(record)
                );
                if !same_in_flight {
                    self.emit(out, write, hold);
                }
            }
            (None, true) if own.no_global_ip.is_none() => {
                for rid in on_broker.copies.values() {
                    self.emit(out, Write::withdraw(key, rid), hold);
                }
            }
            (Some(_), _) if on_broker.published => {
                // Moved: the copy where this agent publishes is stored as desired, so the
                // other one can go without the record ever being missing.
                for (_, rid) in on_broker
                    .copies
                    .iter()
                    .filter(|(home, _)| **home != on_broker.home)
                {
                    self.emit(out, Write::withdraw(key, rid), hold);
                }
            }
            _ => {}
        }
    }

    /// How this cluster's publication of `key` stands: failed (another agent holds the
    /// heartbeat Lease, a broker write failed, no global IP), published (the desired record or
    /// an earlier version of it is stored) or pending.
    fn publication(&self, key: &ServiceKey, own: &OwnExport, has_stored_own: bool) -> Publication {
        let publish_error = self
            .decided
            .failures
            .get(key)
            .and_then(|f| f.publish_error.clone())
            .or_else(|| own.no_global_ip.clone());
        match (&self.decided.lease_state, publish_error) {
            (LeaseState::Blocked { holder, until }, _) => Publication::Failed(format!(
                "Another agent ({holder}) holds the heartbeat Lease of cluster {} until {until}: two agents must not use one cluster id; this one does not publish",
                self.config.cluster_id
            )),
            (_, Some(error)) => Publication::Failed(error),
            // An update on its way keeps the export Ready: the previous version is published.
            _ if own.record.is_some() && has_stored_own => Publication::Published,
            _ => Publication::Pending,
        }
    }

    /// Step 3: the merge of every cluster's records of `key` (a stale cluster's kept, a
    /// dropped one's left out; a cluster's copy in its own namespace before the shared one),
    /// and the publication time of the newest of them.
    fn merge_records(
        &self,
        key: &ServiceKey,
    ) -> Result<(Option<MergedService>, Option<Timestamp>), MergeError> {
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
        Ok((merge_exports(&plain)?, newest_publication))
    }

    /// Step 4: writes the ServiceImport and its EndpointSlices where the service is exported
    /// and its namespace exists, else deletes them (and releases its clusterset IPs). Returns
    /// whether the import changed (a ServiceImport, status or EndpointSlice applied).
    fn write_or_remove_import(
        &mut self,
        key: &ServiceKey,
        id: &ObjectId,
        merged: Option<&MergedService>,
        now: Timestamp,
        hold: bool,
        out: &mut Output,
    ) -> bool {
        let namespace_live = self
            .observed
            .namespaces
            .get(&ObjectId::new("", &key.namespace))
            .is_some_and(|n| is_live(&n.metadata));
        let writes_before = out.writes.len();
        match (merged, namespace_live) {
            (Some(merged), true) => self.write_import(key, id, merged, now, hold, out),
            _ => {
                self.release_ips(PoolKind::Clusterset, key);
                self.remove_import(key, id, hold, out);
            }
        }
        out.writes[writes_before..].iter().any(|w| {
            matches!(
                w,
                Write::ApplyServiceImport(_)
                    | Write::ApplyEndpointSlice(_)
                    | Write::ApplyServiceImportStatus(_)
            )
        })
    }

    /// Reports the propagation lag of an import change (now minus the publication time of the
    /// newest record behind it), once per publication; forgets the service's once no cluster
    /// exports it.
    fn account_lag(
        &mut self,
        key: &ServiceKey,
        exported: bool,
        import_changed: bool,
        newest_publication: Option<Timestamp>,
        now: Timestamp,
        out: &mut Output,
    ) {
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
        if !exported {
            self.decided.accounted.remove(key);
        }
    }

    /// The conditions of this cluster's export: its validity, its verdict in the merge (if it
    /// is part of it) and its publication.
    fn own_export_conditions(
        &self,
        own: &OwnExport,
        merged: Option<&MergedService>,
        publication: &Publication,
    ) -> ExportConditions {
        let me = &self.config.cluster_id;
        let in_merge = merged.filter(|m| m.records.iter().any(|r| r.cluster_id == *me));
        export_conditions(own.validity.as_ref().map(|_| ()), in_merge, publication)
    }

    /// Step 5: writes the export's status with `conditions` unless it is stored already (or
    /// the write waits), and remembers the conditions written.
    fn write_export_status(
        &mut self,
        key: &ServiceKey,
        export: &ServiceExport,
        conditions: ExportConditions,
        hold: bool,
        now: Timestamp,
        out: &mut Output,
    ) {
        let status = self.export_status(key, export, conditions, now);
        let generation = export.metadata.generation;
        let stored_matches = export_status_matches(&status, export)
            && export.status.as_ref().is_none_or(|s| {
                s.conditions
                    .iter()
                    .filter(|c| EXPORT_CONDITIONS.contains(&c.type_.as_str()))
                    .all(|c| c.observed_generation == generation)
            });
        if !stored_matches && !hold {
            self.decided.export_conditions_written.insert(
                key.clone(),
                WrittenConditions {
                    uid: export.metadata.uid.clone(),
                    conditions: status.conditions.clone(),
                },
            );
            self.emit(
                out,
                Write::ApplyServiceExportStatus {
                    key: key.clone(),
                    status,
                },
                hold,
            );
        }
    }

    /// The export's status with `conditions` applied to its conditions: those stored, overlaid
    /// with those this agent last wrote for the same export (the watch may not have delivered
    /// them yet).
    fn export_status(
        &self,
        key: &ServiceKey,
        export: &ServiceExport,
        conditions: ExportConditions,
        now: Timestamp,
    ) -> ServiceExportStatus {
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
        if let Some(written) = self.written_conditions(key, export) {
            overlay_written(&mut list, &written.conditions);
        }
        for remove in &conditions.remove {
            mcs_types::conditions::remove_condition(&mut list, remove.as_str());
        }
        let generation = export.metadata.generation;
        for desired in conditions.set {
            mcs_types::conditions::set_condition(&mut list, desired, generation, Time(now));
        }
        ServiceExportStatus {
            conditions: list,
            ..Default::default()
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

        self.write_slices(key, merged, holding, out);
        self.write_derived_service(key, desired_derived_service(merged, &ips), holding, out);
    }

    /// Writes the import's EndpointSlices that differ from the stored ones and deletes the
    /// stored ones no longer wanted.
    fn write_slices(
        &mut self,
        key: &ServiceKey,
        merged: &MergedService,
        holding: bool,
        out: &mut Output,
    ) {
        let slices = desired_endpoint_slices(merged);
        // The slices are the derived Service's only while that name is free or ours: a user's
        // Service of the derived name must not get the imported endpoints through kube-proxy.
        let derived_is_ours_or_free = self
            .observed
            .services
            .get(&ObjectId::new(
                &key.namespace,
                &derived_service_name(&key.name),
            ))
            .is_none_or(|s| derived_from(s).is_some());
        let mut wanted = BTreeSet::new();
        for mut slice in slices {
            let name = slice.metadata.name.clone().unwrap_or_default();
            if !derived_is_ours_or_free && let Some(labels) = slice.metadata.labels.as_mut() {
                labels.remove(KUBERNETES_SERVICE_NAME_LABEL);
            }
            let stored = self
                .observed
                .imported_slices
                .get(&ObjectId::new(&key.namespace, &name));
            let stray_label = |s: &EndpointSlice| {
                !derived_is_ours_or_free
                    && s.metadata
                        .labels
                        .as_ref()
                        .is_some_and(|l| l.contains_key(KUBERNETES_SERVICE_NAME_LABEL))
            };
            if stored.is_none_or(|s| !slice_matches(&slice, s) || stray_label(s)) {
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

    /// Writes the Service derived from the import of `key` (or deletes ours when none is
    /// wanted: a headless import). A Service of that name that is not ours is left alone and
    /// reported.
    fn write_derived_service(
        &mut self,
        key: &ServiceKey,
        desired: Option<Service>,
        holding: bool,
        out: &mut Output,
    ) {
        let name = derived_service_name(&key.name);
        let stored = self
            .observed
            .services
            .get(&ObjectId::new(&key.namespace, &name));
        let ours = stored.and_then(derived_from).is_some();
        if stored.is_some() && !ours {
            self.problems.push(format!(
                "Service {}/{name} exists and was not derived by clusterset: the import {}/{} gets no Service, so kube-proxy does not serve its clusterset IP; rename or delete that Service",
                key.namespace, key.namespace, key.name
            ));
            return;
        }
        match desired {
            Some(desired) if stored.is_none_or(|s| !derived_service_matches(&desired, s)) => {
                self.emit(out, Write::ApplyDerivedService(Box::new(desired)), holding);
            }
            None if ours => {
                let uid = stored
                    .and_then(|s| s.metadata.uid.clone())
                    .unwrap_or_default();
                self.emit(
                    out,
                    Write::DeleteDerivedService {
                        key: key.clone(),
                        name,
                        uid,
                    },
                    holding,
                );
            }
            _ => {}
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
        self.write_derived_service(key, None, holding, out);
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

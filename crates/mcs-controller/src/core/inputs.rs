//! Taking in watch events: each updates its cache, settles the echo of a write in flight,
//! keeps the indexes (slices by service, records by service and cluster, Leases by cluster)
//! and marks the services it touches dirty.

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use mcs_types::ServiceKey;
use mcs_types::labels::{KUBERNETES_SERVICE_NAME_LABEL, SERVICE_NAME_LABEL};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};

use super::{
    AgentCore, Input, Side, ZoneChange, derived_service_matches, export_status_matches,
    import_spec_matches, import_status_matches, in_flight, is_live, key_of, slice_matches,
    trim_managed_fields,
};
use crate::broker::{self, BrokerRecord};
use crate::cache::{Change, ObjectId};
use crate::watch::Event;
use crate::write::{Target, Write};

pub(super) fn label<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    key: &str,
) -> Option<&'a str> {
    meta.labels.as_ref()?.get(key).map(String::as_str)
}

pub(super) fn local_slice_service(slice: &EndpointSlice) -> Option<ServiceKey> {
    Some(ServiceKey::new(
        slice.metadata.namespace.as_deref()?,
        label(&slice.metadata, KUBERNETES_SERVICE_NAME_LABEL)?,
    ))
}

pub(super) fn imported_slice_service(slice: &EndpointSlice) -> Option<ServiceKey> {
    Some(ServiceKey::new(
        slice.metadata.namespace.as_deref()?,
        label(&slice.metadata, SERVICE_NAME_LABEL)?,
    ))
}

impl AgentCore {
    /// Takes in one watch event. Its object is cached with its managedFields trimmed to what
    /// the agent reads of them (its own applied label and annotation keys).
    pub fn handle(&mut self, mut input: Input) {
        fn trim<K: kube_core::Resource>(event: &mut Event<K>) {
            if let Some(object) = event.object_mut() {
                trim_managed_fields(object.meta_mut());
            }
        }
        match &mut input {
            Input::Service(event) => trim(event),
            Input::ServiceExport(event) => trim(event),
            Input::LocalEndpointSlice(event) | Input::ImportedEndpointSlice(event) => trim(event),
            Input::Namespace(event) => trim(event),
            Input::ServiceImport(event) => trim(event),
            Input::Record(event) => trim(event),
            Input::Lease(event) => trim(event),
        }
        self.answered(match &input {
            Input::Record(_) | Input::Lease(_) => Side::Broker,
            _ => Side::Member,
        });
        match input {
            Input::Service(event) => self.handle_service(event),
            Input::ServiceExport(event) => self.handle_export(event),
            Input::LocalEndpointSlice(event) => self.handle_local_slice(event),
            Input::Namespace(event) => self.handle_namespace(event),
            Input::ServiceImport(event) => self.handle_import(event),
            Input::ImportedEndpointSlice(event) => self.handle_imported_slice(event),
            Input::Record(event) => self.handle_record(event),
            Input::Lease(event) => self.handle_lease(event),
        }
    }

    /// A local Service changed: its service is dirty if exported; a Service derived from an
    /// import makes that import dirty, unless the change is the echo of our own write.
    fn handle_service(&mut self, event: Event<Service>) {
        for change in self.observed.services.handle(event) {
            if self.observed.exports.get(&change.id).is_some() {
                self.decided.dirty.insert(key_of(&change.id));
            }
            // The import a Service of ours was derived from, and the import whose derived
            // name it has (a user's Service of that name, gone or made, changes what we may do).
            let mut imports: Vec<ServiceKey> = change
                .old
                .as_ref()
                .and_then(crate::derived_from)
                .into_iter()
                .chain(change.new.as_ref().and_then(crate::derived_from))
                .collect();
            if let Some(name) = change.id.name.strip_prefix(crate::DERIVED_SERVICE_PREFIX) {
                let key = ServiceKey::new(&change.id.namespace, name);
                if self
                    .observed
                    .imports
                    .get(&ObjectId::new(&key.namespace, &key.name))
                    .is_some()
                {
                    imports.push(key);
                }
            }
            if imports.is_empty() {
                continue;
            }
            let echo = self.settle(
                &Target::DerivedService(change.id.clone()),
                change.new.as_ref(),
                |write, observed| match (write, observed) {
                    (Write::ApplyDerivedService(d), Some(o)) => derived_service_matches(d, o),
                    (Write::DeleteDerivedService { .. }, None) => true,
                    _ => false,
                },
            );
            if !echo {
                self.decided.dirty.extend(imports);
            }
        }
    }

    /// A local ServiceExport changed: its service is dirty unless the change is only the echo of
    /// our own status write.
    fn handle_export(&mut self, event: Event<ServiceExport>) {
        for change in self.observed.exports.handle(event) {
            if self.export_change_matters(&change) {
                self.decided.dirty.insert(key_of(&change.id));
            }
        }
    }

    /// A local EndpointSlice changed: it is indexed under its Service, and the exported
    /// services it belonged to or belongs to are dirty.
    fn handle_local_slice(&mut self, event: Event<EndpointSlice>) {
        for change in self.observed.local_slices.handle(event) {
            let old = change.old.as_ref().and_then(local_slice_service);
            let new = change.new.as_ref().and_then(local_slice_service);
            for key in old.iter().chain(new.iter()) {
                if let Some(set) = self.observed.local_slices_by_service.get_mut(key) {
                    set.remove(&change.id);
                    if set.is_empty() {
                        self.observed.local_slices_by_service.remove(key);
                    }
                }
                if self
                    .observed
                    .exports
                    .get(&ObjectId::new(&key.namespace, &key.name))
                    .is_some()
                {
                    self.decided.dirty.insert(key.clone());
                }
            }
            if let Some(key) = new {
                self.observed
                    .local_slices_by_service
                    .entry(key)
                    .or_default()
                    .insert(change.id.clone());
            }
        }
    }

    /// A Namespace came or went (its deletion beginning counts as going): the services of the
    /// broker's records and the ServiceImports in it are dirty.
    fn handle_namespace(&mut self, event: Event<Namespace>) {
        for change in self.observed.namespaces.handle(event) {
            let was = change.old.as_ref().is_some_and(|n| is_live(&n.metadata));
            let is = change.new.as_ref().is_some_and(|n| is_live(&n.metadata));
            if was != is {
                self.dirty_namespace(&change.id.name);
            }
        }
    }

    /// A ServiceImport changed: the DNS zone learns of it, and its service is dirty unless the
    /// change is the echo of our own write.
    fn handle_import(&mut self, event: Event<ServiceImport>) {
        for change in self.observed.imports.handle(event) {
            self.zone_import_change(&change);
            let echo = self.settle_import(&change);
            if !echo {
                self.decided.dirty.insert(key_of(&change.id));
            }
        }
    }

    /// An imported EndpointSlice changed: the DNS zone learns of it, it is indexed under its
    /// service, and that service is dirty unless the change is the echo of our own write.
    fn handle_imported_slice(&mut self, event: Event<EndpointSlice>) {
        for change in self.observed.imported_slices.handle(event) {
            self.zone_slice_change(&change);
            let (old, new) = self.index_imported_slice(&change);
            let echo = self.settle(
                &Target::Slice(change.id.clone()),
                change.new.as_ref(),
                |write, observed| match (write, observed) {
                    (Write::ApplyEndpointSlice(d), Some(o)) => slice_matches(d, o),
                    (Write::DeleteEndpointSlice { .. }, None) => true,
                    _ => false,
                },
            );
            if !echo {
                for key in old.into_iter().chain(new) {
                    self.decided.dirty.insert(key);
                }
            }
        }
    }

    /// Moves an imported EndpointSlice from the service it belonged to to the one it belongs to
    /// (by its label; one without it is reported and left alone), and returns both services.
    fn index_imported_slice(
        &mut self,
        change: &Change<EndpointSlice>,
    ) -> (Option<ServiceKey>, Option<ServiceKey>) {
        let old = change.old.as_ref().and_then(imported_slice_service);
        let new = change.new.as_ref().and_then(imported_slice_service);
        if let Some(key) = &old
            && let Some(set) = self.observed.imported_slices_by_service.get_mut(key)
        {
            set.remove(&change.id.name);
            if set.is_empty() {
                self.observed.imported_slices_by_service.remove(key);
            }
        }
        if let Some(key) = &new {
            self.observed
                .imported_slices_by_service
                .entry(key.clone())
                .or_default()
                .insert(change.id.name.clone());
        }
        if old.is_none() && new.is_none() {
            self.problems.push(format!(
                "EndpointSlice {}/{} is managed by clusterset but has no {SERVICE_NAME_LABEL} label: it is left alone; delete it if it is not needed",
                change.id.namespace, change.id.name
            ));
        }
        (old, new)
    }

    /// A broker record changed: the write of it in flight is settled (the echo of an earlier
    /// publication keeps the latest in flight; see [`settle`](Self::settle)), and it is indexed
    /// anew (which marks its service dirty).
    fn handle_record(&mut self, event: Event<BrokerRecord>) {
        for change in self.observed.records.handle(event) {
            let observed = change.new.as_ref().map(BrokerRecord::checked_record);
            self.settle(
                &Target::Record(change.id.clone()),
                observed.as_ref(),
                |write, observed| match (write, observed) {
                    (Write::PublishRecord(published), Some(Ok(stored))) => {
                        published.checked_record().ok().as_ref() == Some(stored)
                    }
                    (Write::WithdrawRecord { .. }, None) => true,
                    _ => false,
                },
            );
            if let Some(old) = &change.old {
                self.unindex_record(&change.id, old);
            }
            if let Some(new) = &change.new {
                self.index_record(&change.id, new);
            }
        }
    }

    /// A heartbeat Lease changed (an event older than the stored Lease is dropped): it is
    /// indexed under the cluster it names, or set apart if its writer could not be that cluster.
    fn handle_lease(&mut self, event: Event<Lease>) {
        let Some(event) = self.newest_lease(event) else {
            return;
        };
        for change in self.observed.leases.handle(event) {
            self.observed.foreign_leases.remove(&change.id);
            if let Some(Ok(Some(cluster))) = change.old.as_ref().map(broker::lease_writer_check)
                && self.observed.leases_by_cluster.get(&cluster) == Some(&change.id)
            {
                self.observed.leases_by_cluster.remove(&cluster);
            }
            match change.new.as_ref().map(broker::lease_writer_check) {
                Some(Ok(Some(cluster))) => {
                    self.observed
                        .leases_by_cluster
                        .insert(cluster, change.id.clone());
                }
                Some(Err(foreign)) => {
                    self.problems.push(foreign.to_string());
                    self.observed
                        .foreign_leases
                        .insert(change.id.clone(), foreign);
                }
                Some(Ok(None)) | None => {}
            }
        }
    }

    pub(super) fn export_change_matters(&mut self, change: &Change<ServiceExport>) -> bool {
        self.decided.exports_gone.remove(&key_of(&change.id));
        let (Some(old), Some(new)) = (&change.old, &change.new) else {
            self.decided
                .in_flight
                .release(&Target::ExportStatus(change.id.clone()));
            if change.new.is_none() {
                self.decided
                    .export_conditions_written
                    .remove(&key_of(&change.id));
            }
            return true;
        };
        let user_change = old.spec != new.spec
            || old.metadata.creation_timestamp != new.metadata.creation_timestamp
            || old.metadata.deletion_timestamp != new.metadata.deletion_timestamp
            || old.metadata.generation != new.metadata.generation;
        let echo = self.settle(
            &Target::ExportStatus(change.id.clone()),
            Some(new),
            |write, observed| match (write, observed) {
                (Write::ApplyServiceExportStatus { status, .. }, Some(o)) => {
                    export_status_matches(status, o)
                }
                _ => false,
            },
        );
        let status_changed = old.status != new.status;
        user_change || (status_changed && !echo)
    }

    /// If a write to `target` is in flight, checks whether `observed` is the echo of one of
    /// ours: the latest (nothing of ours is in flight any more) or an earlier one the latest
    /// replaced (the latest stays in flight). Anything else releases every write in flight to
    /// `target`: from now on the stored object is compared again.
    pub(super) fn settle<T>(
        &mut self,
        target: &Target,
        observed: Option<&T>,
        matches: impl Fn(&Write, Option<&T>) -> bool,
    ) -> bool {
        let is_echo = |write: &Write| matches(write, observed);
        let Some(echo) = self.decided.in_flight.classify(target, is_echo) else {
            return false;
        };
        self.decided.in_flight.settle(target, echo, is_echo);
        echo.is_ours()
    }

    /// Whether a ServiceImport event is the echo of our own in-flight write(s) (of the spec or
    /// the status, the latest or an earlier one; see [`settle`](Self::settle)). Matched writes
    /// are settled; when the event matches one of ours, the other (spec or status) write is
    /// still in flight and stays pending. An event that matches none of ours (someone else
    /// changed the object, or overwrote our write before we saw it) settles everything and the
    /// service is reconciled again.
    pub(super) fn settle_import(&mut self, change: &Change<ServiceImport>) -> bool {
        let observed = change.new.as_ref();
        let spec_target = Target::ImportSpec(change.id.clone());
        let status_target = Target::ImportStatus(change.id.clone());
        let spec_echo = |write: &Write| match write {
            Write::ApplyServiceImport(d) => observed.is_some_and(|o| import_spec_matches(d, o)),
            Write::DeleteServiceImport(_) => observed.is_none(),
            _ => false,
        };
        let status_echo = |write: &Write| match write {
            Write::ApplyServiceImportStatus(d) => {
                observed.is_some_and(|o| import_status_matches(d, o))
            }
            _ => false,
        };
        let spec = self.decided.in_flight.classify(&spec_target, spec_echo);
        let status = self.decided.in_flight.classify(&status_target, status_echo);
        let ours = |echo: Option<in_flight::Echo>| echo.is_some_and(in_flight::Echo::is_ours);
        if !ours(spec) && !ours(status) {
            self.decided.in_flight.release(&spec_target);
            self.decided.in_flight.release(&status_target);
            return false;
        }
        if let Some(echo) = spec.filter(|e| e.is_ours()) {
            self.decided.in_flight.settle(&spec_target, echo, spec_echo);
        }
        if let Some(echo) = status.filter(|e| e.is_ours()) {
            self.decided
                .in_flight
                .settle(&status_target, echo, status_echo);
        }
        true
    }

    pub(super) fn index_record(&mut self, id: &ObjectId, object: &BrokerRecord) {
        let checked = object.checked_record().and_then(|record| {
            broker::record_writer_check(
                &self.config.broker_namespace,
                self.config.shared_records,
                &id.namespace,
                &record.cluster_id,
            )
            .map(|home| (record, home))
            .map_err(|foreign| {
                self.observed
                    .foreign_records
                    .insert(id.clone(), foreign.clone());
                foreign.to_string()
            })
        });
        match checked {
            Ok((record, home)) => {
                let key = record.service_key.clone();
                let cluster = record.cluster_id.clone();
                self.observed
                    .records_by_service
                    .entry(key.clone())
                    .or_default()
                    .entry(cluster.clone())
                    .or_default()
                    .insert(home, id.clone());
                self.observed
                    .services_by_cluster
                    .entry(cluster)
                    .or_default()
                    .insert(key.clone());
                self.decided.dirty.insert(key);
            }
            Err(problem) => {
                self.problems.push(format!(
                    "broker record {}/{} is ignored: {problem}",
                    id.namespace, id.name
                ));
                if !self.observed.foreign_records.contains_key(id) {
                    self.observed.unreadable_records.insert(id.clone(), problem);
                }
            }
        }
    }

    pub(super) fn unindex_record(&mut self, id: &ObjectId, object: &BrokerRecord) {
        self.observed.unreadable_records.remove(id);
        if self.observed.foreign_records.remove(id).is_some() {
            return;
        }
        let Ok(record) = object.checked_record() else {
            return;
        };
        let key = &record.service_key;
        let cluster = &record.cluster_id;
        let mut last_copy = true;
        if let Some(by_cluster) = self.observed.records_by_service.get_mut(key) {
            if let Some(copies) = by_cluster.get_mut(cluster) {
                copies.retain(|_, stored| stored != id);
                last_copy = copies.is_empty();
                if last_copy {
                    by_cluster.remove(cluster);
                }
            }
            if by_cluster.is_empty() {
                self.observed.records_by_service.remove(key);
            }
        }
        if !last_copy {
            self.decided.dirty.insert(key.clone());
            return;
        }
        if let Some(keys) = self.observed.services_by_cluster.get_mut(cluster) {
            keys.remove(key);
            if keys.is_empty() {
                self.observed.services_by_cluster.remove(cluster);
            }
        }
        self.decided.dirty.insert(key.clone());
    }

    pub(super) fn dirty_namespace(&mut self, namespace: &str) {
        let from = ServiceKey::new(namespace, "");
        let keys: Vec<ServiceKey> = self
            .observed
            .records_by_service
            .range(from..)
            .take_while(|(k, _)| k.namespace == namespace)
            .map(|(k, _)| k.clone())
            .collect();
        self.decided.dirty.extend(keys);
        let imported: Vec<ServiceKey> = self
            .observed
            .imports
            .values()
            .filter(|i| i.metadata.namespace.as_deref() == Some(namespace))
            .map(|i| key_of(&ObjectId::of(i)))
            .collect();
        self.decided.dirty.extend(imported);
    }

    pub(super) fn zone_import_change(&mut self, change: &Change<ServiceImport>) {
        if !self.observed.zone_synced {
            return;
        }
        self.observed.zone_out.push(match &change.new {
            Some(import) => ZoneChange::ServiceImport(Box::new(import.clone())),
            None => ZoneChange::ServiceImportDeleted(key_of(&change.id)),
        });
    }

    pub(super) fn zone_slice_change(&mut self, change: &Change<EndpointSlice>) {
        if !self.observed.zone_synced {
            return;
        }
        self.observed.zone_out.push(match &change.new {
            Some(slice) => ZoneChange::EndpointSlice(Box::new(slice.clone())),
            None => ZoneChange::EndpointSliceDeleted(change.id.clone()),
        });
    }
}

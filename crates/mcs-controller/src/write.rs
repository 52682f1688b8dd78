//! The writes the agent's core asks for. The core decides; the kube layer
//! (the agent's kube shell) or the simulation carries them out.

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use mcs_types::ServiceExportStatus;
use mcs_types::ServiceKey;
use mcs_types::labels::SERVICE_NAME_LABEL;
use mcs_types::v1beta1::ServiceImport;

use crate::broker::BrokerRecord;
use crate::cache::ObjectId;

/// The field manager of every write the agent makes.
pub const FIELD_MANAGER: &str = "clusterset-agent";

/// One write to the member cluster or to the broker.
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// Server-side apply of a ServiceImport's spec, labels and annotations (creates it).
    ApplyServiceImport(Box<ServiceImport>),
    /// Server-side apply of a ServiceImport's status (`clusters` and our conditions), through the
    /// status subresource.
    ApplyServiceImportStatus(Box<ServiceImport>),
    /// Deletes a ServiceImport (and with it this cluster's clusterset IP for the service).
    DeleteServiceImport(ServiceKey),
    /// Server-side apply of an imported EndpointSlice.
    ApplyEndpointSlice(Box<EndpointSlice>),
    /// Deletes an imported EndpointSlice.
    DeleteEndpointSlice {
        /// The service the slice belonged to.
        key: ServiceKey,
        /// The slice's name.
        name: String,
    },
    /// Server-side apply of the Service derived from a ServiceImport
    /// ([`crate::desired_derived_service`]).
    ApplyDerivedService(Box<Service>),
    /// Deletes the Service derived from a ServiceImport: only the object with `uid` (one made
    /// again under the name since, perhaps a user's, is left alone).
    DeleteDerivedService {
        /// The import it was derived from.
        key: ServiceKey,
        /// The Service's name.
        name: String,
        /// The uid of the derived Service as observed.
        uid: String,
    },
    /// Server-side apply of our conditions on a local ServiceExport's status.
    ApplyServiceExportStatus {
        /// The export.
        key: ServiceKey,
        /// The conditions this agent owns (`Valid`, `Conflict`, `Ready`).
        status: ServiceExportStatus,
    },
    /// Server-side apply of this cluster's record of an export into the broker namespace.
    PublishRecord(Box<BrokerRecord>),
    /// Deletes one of this cluster's records of an export from the hub.
    WithdrawRecord {
        /// The service.
        key: ServiceKey,
        /// The record's namespace on the hub (this cluster's records namespace, or the shared
        /// broker namespace during the upgrade).
        namespace: String,
        /// The record's object name.
        name: String,
    },
}

/// What a write changes: the object and the part of it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Target {
    /// A ServiceImport's spec and metadata (also its deletion).
    ImportSpec(ObjectId),
    /// A ServiceImport's status.
    ImportStatus(ObjectId),
    /// An imported EndpointSlice.
    Slice(ObjectId),
    /// A Service derived from a ServiceImport.
    DerivedService(ObjectId),
    /// A ServiceExport's status.
    ExportStatus(ObjectId),
    /// A record on the hub.
    Record(ObjectId),
}

impl Write {
    /// Withdraws the record of `key` stored as `record`.
    pub fn withdraw(key: &ServiceKey, record: &ObjectId) -> Self {
        Self::WithdrawRecord {
            key: key.clone(),
            namespace: record.namespace.clone(),
            name: record.name.clone(),
        }
    }

    /// The service the write belongs to.
    pub fn service(&self) -> ServiceKey {
        match self {
            Self::ApplyServiceImport(import) | Self::ApplyServiceImportStatus(import) => {
                let id = ObjectId::of(import.as_ref());
                ServiceKey::new(&id.namespace, &id.name)
            }
            Self::ApplyEndpointSlice(slice) => ServiceKey::new(
                slice.metadata.namespace.as_deref().unwrap_or_default(),
                slice
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SERVICE_NAME_LABEL))
                    .map_or("", String::as_str),
            ),
            Self::ApplyDerivedService(service) => ServiceKey::new(
                service.metadata.namespace.as_deref().unwrap_or_default(),
                service
                    .metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SERVICE_NAME_LABEL))
                    .map_or("", String::as_str),
            ),
            Self::PublishRecord(record) => match record.spec.record() {
                Ok(r) => r.service_key.clone(),
                Err(_) => ServiceKey::new("", ""),
            },
            Self::DeleteServiceImport(key)
            | Self::DeleteEndpointSlice { key, .. }
            | Self::DeleteDerivedService { key, .. }
            | Self::ApplyServiceExportStatus { key, .. }
            | Self::WithdrawRecord { key, .. } => key.clone(),
        }
    }

    /// What the write changes.
    pub fn target(&self) -> Target {
        match self {
            Self::ApplyServiceImport(import) => Target::ImportSpec(ObjectId::of(import.as_ref())),
            Self::ApplyServiceImportStatus(import) => {
                Target::ImportStatus(ObjectId::of(import.as_ref()))
            }
            Self::DeleteServiceImport(key) => {
                Target::ImportSpec(ObjectId::new(&key.namespace, &key.name))
            }
            Self::ApplyEndpointSlice(slice) => Target::Slice(ObjectId::of(slice.as_ref())),
            Self::DeleteEndpointSlice { key, name } => {
                Target::Slice(ObjectId::new(&key.namespace, name))
            }
            Self::ApplyDerivedService(service) => {
                Target::DerivedService(ObjectId::of(service.as_ref()))
            }
            Self::DeleteDerivedService { key, name, .. } => {
                Target::DerivedService(ObjectId::new(&key.namespace, name))
            }
            Self::ApplyServiceExportStatus { key, .. } => {
                Target::ExportStatus(ObjectId::new(&key.namespace, &key.name))
            }
            Self::PublishRecord(record) => Target::Record(ObjectId::of(record.as_ref())),
            Self::WithdrawRecord {
                namespace, name, ..
            } => Target::Record(ObjectId::new(namespace, name)),
        }
    }

    /// Whether the write goes to the broker (hub) rather than the member cluster.
    pub fn is_broker(&self) -> bool {
        matches!(self, Self::PublishRecord(_) | Self::WithdrawRecord { .. })
    }

    /// A short name of the kind of write, for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ApplyServiceImport(_) => "apply_service_import",
            Self::ApplyServiceImportStatus(_) => "apply_service_import_status",
            Self::DeleteServiceImport(_) => "delete_service_import",
            Self::ApplyEndpointSlice(_) => "apply_endpoint_slice",
            Self::DeleteEndpointSlice { .. } => "delete_endpoint_slice",
            Self::ApplyDerivedService(_) => "apply_derived_service",
            Self::DeleteDerivedService { .. } => "delete_derived_service",
            Self::ApplyServiceExportStatus { .. } => "apply_service_export_status",
            Self::PublishRecord(_) => "publish_record",
            Self::WithdrawRecord { .. } => "withdraw_record",
        }
    }
}

//! Pure KEP-1645 Multi-Cluster Services aggregation: the same function in every cluster turns
//! every cluster's exports of a service into that service's ServiceImport, EndpointSlices and
//! ServiceExport conditions, so that all clusters agree without a shared mutable aggregate.
//!
//! - [`ExportRecord::from_local`]: what a cluster publishes for one local export (or why the
//!   export is invalid: no Service, ExternalName).
//! - [`merge_exports`]: the records of one service from all clusters → [`MergedService`]
//!   (oldest export wins, ties by cluster id; ports union merged by name then protocol/port;
//!   every standard conflict reason, the same verdict for every exporter).
//! - [`desired_import`], [`desired_endpoint_slices`], [`import_ready_condition`]: what an
//!   importing cluster writes; [`export_conditions`]: what an exporter writes.
//! - [`IpPool`]: Globalnet-style stable IP allocation (global IPs per export, clusterset IPs
//!   per import).
//! - [`crd`]: the broker's `ExportRecord` CRD, generated from [`ExportRecord`].
//!
//! No IO, no clock, no async: the agent feeds records in and writes the results out.
//!
//! ```
//! use k8s_openapi::api::core::v1::{Service, ServicePort as CorePort, ServiceSpec};
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
//! use k8s_openapi::jiff::Timestamp;
//! use mcs_controller::{ClusterId, EndpointMode, ExportRecord, LocalExport, ServiceKey};
//!
//! let key = ServiceKey::new("rook-ceph", "rook-ceph-mon-a");
//! let service = Service {
//!     spec: Some(ServiceSpec {
//!         cluster_ip: Some("10.96.0.11".into()),
//!         ports: Some(vec![CorePort { name: Some("tcp-msgr2".into()), port: 3300, ..Default::default() }]),
//!         ..Default::default()
//!     }),
//!     ..Default::default()
//! };
//! let east = ClusterId::new("east")?;
//! let created = Time(Timestamp::from_second(1_800_000_000)?);
//! let record = ExportRecord::from_local(LocalExport {
//!     cluster_id: &east,
//!     key: &key,
//!     export_created: &created,
//!     export_spec: &Default::default(),
//!     service: Some(&service),
//!     endpoint_slices: &[],
//!     global_ips: &["242.1.0.11".parse()?],
//!     mode: EndpointMode::GlobalIngress,
//! })?;
//! let merged = mcs_controller::merge_exports(&[record])?.expect("one export");
//! let import = mcs_controller::desired_import(&merged, &["243.0.0.5".parse()?]);
//! assert_eq!(import.spec.ips, ["243.0.0.5"]);
//! assert!(merged.conflicts.is_empty());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

mod alloc;
pub mod crd;
mod import;
mod merge;
mod model;

pub use alloc::{AllocError, IpPool};
pub use import::{
    ExportConditions, MAX_ENDPOINTS_PER_SLICE, Publication, desired_endpoint_slices,
    desired_import, export_conditions, import_ready_condition,
};
pub use merge::{MergeError, MergedService, merge_exports};
pub use model::{
    ClusterId, EndpointMode, ExportRecord, ExportedEndpoints, ExportedService, InvalidClusterId,
    InvalidExport, LocalExport, ServiceKey, family_of,
};

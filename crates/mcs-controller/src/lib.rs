//! The Multi-Cluster Services control-plane core, pure: the KEP-1645 aggregation (the same
//! function in every cluster turns every cluster's exports of a service into that service's
//! ServiceImport, EndpointSlices and ServiceExport conditions, so that all clusters agree
//! without a shared mutable aggregate) and the agent's sans-IO core around it.
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
//! The sans-IO core of one member cluster's agent:
//!
//! - [`core::AgentCore`]: caches, indexes, IP pools and the reconcile rules, fed watch events
//!   ([`core::Input`], each a [`watch::Event`]) and producing [`write::Write`]s and DNS zone
//!   changes ([`core::Output`]); [`watch`] also holds the label selectors of its watches.
//! - [`cache`]: the relist-safe watch cache; [`write`](mod@write): the writes and their targets.
//! - [`broker`]: the records on the hub ([`broker::BrokerRecord`], kind `ExportRecord`), their
//!   names and namespaces, the checks of who could have written a record or Lease, and the
//!   heartbeat Lease decisions.
//! - [`hub`]: the hub cluster's manifests (namespaces, RBAC, Leases) that isolate the members.
//! - [`config`]: the agent's validated settings.
//!
//! No IO, no clock, no async: the agent's kube shell (or the simulation of the test-support
//! crate `clusterset-sim`) feeds events in and carries the writes out.
//!
//! ```
//! use k8s_openapi::api::core::v1::{Service, ServicePort as CorePort, ServiceSpec};
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
//! use k8s_openapi::jiff::Timestamp;
//! use mcs_controller::{EndpointMode, ExportRecord, LocalExport};
//! use mcs_types::{ClusterId, ServiceKey};
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
pub mod broker;
pub mod cache;
pub mod config;
pub mod core;
pub mod crd;
pub mod hub;
mod import;
mod merge;
mod model;
pub mod watch;
pub mod write;

pub use alloc::{AllocError, IpPool};
pub use import::{
    DERIVED_SERVICE_MANAGED_BY, DERIVED_SERVICE_PREFIX, ExportConditions, MAX_ENDPOINTS_PER_SLICE,
    Publication, derived_from, derived_service_name, desired_derived_service,
    desired_endpoint_slices, desired_import, export_conditions, import_ready_condition,
};
pub use merge::{MergeError, MergedService, merge_exports};
pub use model::{
    EndpointMode, ExportRecord, ExportedEndpoints, ExportedService, InvalidExport, LocalExport,
    endpoint_ready, family_of,
};

pub use config::{AgentConfig, ConfigError};
pub use core::{AgentCore, Input, Output};
pub use write::{Target, Write};

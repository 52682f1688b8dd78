//! Kubernetes Multi-Cluster Services API types for Rust: the equivalent of
//! `sigs.k8s.io/mcs-api` v0.5.0 and the About API's `ClusterProperty` (KEP-2149).
//!
//! - [`v1beta1`] (the storage version) and [`v1alpha1`]: [`ServiceExport`](v1beta1::ServiceExport)
//!   and [`ServiceImport`](v1beta1::ServiceImport) in `multicluster.x-k8s.io`. The two versions
//!   share one schema, so their spec and status types are the same Rust types and each version
//!   converts into the other with `From`.
//! - [`about`]: [`ClusterProperty`](about::v1alpha1::ClusterProperty) in `about.k8s.io`.
//! - [`conditions`]: condition types and reasons as enums, and Kubernetes-style condition setters.
//! - [`labels`]: well-known label, annotation and ClusterProperty names.
//! - [`names`]: clusterset DNS names (`<svc>.<ns>.svc.clusterset.local` and its forms).
//! - [`crd`]: the CRDs, generated from these types and equivalent to the upstream ones.
//! - [`ServiceKey`] and [`ClusterId`]: a service's identity across the clusterset (namespace
//!   sameness) and a member cluster's id, the one definition every MCS component uses.
//!
//! The resource types implement `kube::Resource` (through `kube-core`), so they work with
//! `kube::Api` directly. Fields that a newer API server sends and these types do not know are
//! kept in `unknown_fields` and written back unchanged.
//!
//! Exporting a Service:
//!
//! ```
//! use mcs_types::v1beta1::ServiceExport;
//!
//! let mut export = ServiceExport::new("rook-ceph-mon-a", Default::default());
//! export.metadata.namespace = Some("rook-ceph".into());
//! let json = serde_json::to_value(&export)?;
//! assert_eq!(json["apiVersion"], "multicluster.x-k8s.io/v1beta1");
//! assert_eq!(json["kind"], "ServiceExport");
//! # Ok::<(), serde_json::Error>(())
//! ```
//!
//! Reading an import's clusterset IPs:
//!
//! ```
//! use mcs_types::v1beta1::ServiceImport;
//! use mcs_types::ServiceImportType;
//!
//! let import: ServiceImport = serde_json::from_str(r#"{
//!     "apiVersion": "multicluster.x-k8s.io/v1beta1",
//!     "kind": "ServiceImport",
//!     "metadata": {"name": "rook-ceph-mon-a", "namespace": "rook-ceph"},
//!     "spec": {"type": "ClusterSetIP", "ips": ["242.1.0.11"], "ports": [{"name": "tcp-msgr2", "port": 3300}]},
//!     "status": {"clusters": [{"cluster": "east"}]}
//! }"#)?;
//! assert_eq!(import.spec.type_, ServiceImportType::ClusterSetIP);
//! let ips = import.spec.parsed_ips()?;
//! assert_eq!(ips, vec!["242.1.0.11".parse::<std::net::IpAddr>()?]);
//! assert_eq!(import.status.unwrap().cluster_ids().collect::<Vec<_>>(), ["east"]);
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

mod cluster_property;
pub mod conditions;
pub mod crd;
mod ids;
pub mod labels;
pub mod names;
mod resources;
mod service_export;
mod service_import;

pub use cluster_property::{ClusterPropertySpec, ClusterPropertyStatus};
pub use ids::{ClusterId, InvalidClusterId, ServiceKey};
pub use resources::DocumentError;
pub use service_export::{ServiceExportSpec, ServiceExportStatus, UnknownFields};
pub use service_import::{
    ClusterStatus, IPV4, IPV6, InvalidIp, ServiceImportSpec, ServiceImportStatus,
    ServiceImportType, ServicePort,
};

/// The API group of clusterset's own resources: the broker's `ExportRecord`
/// (`mcs-controller`) and the operator's `CephClusterAddressing`. Not an MCS API group; kept
/// here, the crate both depend on, so that it is written once.
pub const CLUSTERSET_GROUP: &str = "clusterset.io";

/// `multicluster.x-k8s.io/v1beta1`, the storage version.
pub mod v1beta1 {
    crate::resources::mcs_version!("v1beta1", other: v1alpha1);
}

/// `multicluster.x-k8s.io/v1alpha1`, still served; same schema as [`v1beta1`].
pub mod v1alpha1 {
    crate::resources::mcs_version!("v1alpha1", other: v1beta1);
}

/// The About API (`about.k8s.io`, KEP-2149).
pub mod about {
    /// `about.k8s.io/v1beta1`, the storage version.
    pub mod v1beta1 {
        crate::resources::about_version!("v1beta1", other: v1alpha1);
    }

    /// `about.k8s.io/v1alpha1`, the version most MCS implementations read; same schema as
    /// [`v1beta1`](super::v1beta1).
    pub mod v1alpha1 {
        crate::resources::about_version!("v1alpha1", other: v1beta1);
    }
}

/// What [`impl_resource!`] names through this crate, so that its users need not depend on them.
#[doc(hidden)]
pub mod __private {
    pub use kube_core;
}

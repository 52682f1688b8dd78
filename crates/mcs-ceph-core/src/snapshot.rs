//! What the operator sees of one CephCluster ([`Snapshot`]): the cluster, the objects of its
//! namespace from synced caches, what API discovery said of the MCS API, and the operator's
//! prior status. The planner's inventory is read from it by
//! [`ceph_address_plan::observe`] ([`inventory`]).

use ceph_address_plan::observe::{self, ObservedInventory};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use mcs_ceph_api::{CephCluster, CephClusterAddressing};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};

use crate::decide::LookupMemory;

/// The MCS API version a cluster serves (v1beta1 preferred).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum McsVersion {
    /// `multicluster.x-k8s.io/v1alpha1` (Submariner, Rook).
    V1Alpha1,
    /// `multicluster.x-k8s.io/v1beta1`.
    V1Beta1,
}

impl McsVersion {
    /// `v1alpha1` or `v1beta1`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::V1Alpha1 => "v1alpha1",
            Self::V1Beta1 => "v1beta1",
        }
    }
}

/// Whether the API server serves the MCS API (ServiceExport and ServiceImport).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum McsApi {
    /// Both resources are served in this version.
    Served(McsVersion),
    /// They are not: what discovery found instead.
    Missing(String),
}

/// Everything the operator sees of one CephCluster, from synced caches: the cluster, and the
/// objects of its namespace that matter.
#[derive(Debug, Clone, PartialEq)]
pub struct Snapshot {
    /// The CephCluster.
    pub cluster: CephCluster,
    /// What API discovery said about the MCS API.
    pub mcs_api: McsApi,
    /// Mon and OSD Services (and export Services) of the namespace.
    pub services: Vec<Service>,
    /// ServiceExports of the namespace (v1alpha1 ones converted).
    pub exports: Vec<ServiceExport>,
    /// ServiceImports of the namespace (v1alpha1 ones converted).
    pub imports: Vec<ServiceImport>,
    /// OSD Deployments of the namespace.
    pub deployments: Vec<Deployment>,
    /// `rook-ceph-mon-endpoints`, if it exists.
    pub mon_endpoints: Option<ConfigMap>,
    /// The operator's status object of this cluster, if it exists.
    pub prior: Option<CephClusterAddressing>,
    /// What the operator remembered of its lookups after its last reconcile of this cluster
    /// ([`crate::decide::Outcome::lookups`]); empty after a start, when the lookup records of
    /// the daemons `prior` lists are read instead.
    pub lookups: LookupMemory,
}

/// The planner's inventory of a snapshot's Rook objects (ceph-address-plan's reader): mons,
/// external mons and OSDs, with notes on what could not be read. No global IPs: they are the
/// decision's business.
pub fn inventory(snapshot: &Snapshot) -> ObservedInventory {
    observe::inventory(
        &snapshot.services,
        &snapshot.deployments,
        snapshot.mon_endpoints.as_ref(),
    )
}

//! Input the planner refuses, each with what to change.

use std::fmt;
use std::net::IpAddr;

use mcs_types::names::NameError;

use crate::input::{Daemon, IpFamily};
use crate::{CephVersion, MonId};

/// One reason a plan cannot be made. The message names the problem and the fix.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Rejection {
    /// The cluster namespace is not a DNS label.
    #[error(
        "cluster namespace {namespace:?} {problem}: Kubernetes namespaces are DNS labels, fix metadata.namespace"
    )]
    InvalidNamespace {
        /// The namespace.
        namespace: String,
        /// What is wrong with it.
        problem: String,
    },
    /// MCS is enabled without a cluster id.
    #[error(
        "spec.network.multiClusterService.clusterID is empty: set it to this cluster's id in the clusterset (a DNS label such as \"east\"); Rook would look up \".rook-ceph-mon-a...\" and fail"
    )]
    MissingClusterId,
    /// The cluster id is not a DNS label.
    #[error(
        "spec.network.multiClusterService.clusterID {cluster_id:?} {problem}: it is used as a DNS label, so use lower case letters, digits and '-' only"
    )]
    InvalidClusterId {
        /// The cluster id.
        cluster_id: String,
        /// What is wrong with it.
        problem: String,
    },
    /// The clusterset zone is not a DNS name.
    #[error("{0}: set clustersetZone to the zone the MCS DNS serves (default clusterset.local)")]
    InvalidZone(NameError),
    /// MCS and host networking together.
    #[error(
        "multiClusterService is enabled together with host networking: host-networked daemons bind the node IP and have no Service to export; disable spec.network.multiClusterService or use pod networking (remove provider: host / hostNetwork: true)"
    )]
    McsWithHostNetwork,
    /// Ceph is too old for MCS.
    #[error(
        "Ceph {version} is older than 17.2.6, the first release whose OSDs accept --public-bind-addr: upgrade Ceph (spec.cephVersion.image) to 17.2.6 or later, or disable multiClusterService"
    )]
    CephTooOld {
        /// The version found.
        version: CephVersion,
    },
    /// The version does not say whether it is at least 17.2.6.
    #[error(
        "Ceph version {version} does not say whether it is at least 17.2.6 (MCS needs 17.2.6): give the full version, for example an image tag v17.2.6 or cephVersion: 17.2.6 in the inventory"
    )]
    CephVersionAmbiguous {
        /// The version found.
        version: CephVersion,
    },
    /// The version is unknown while MCS needs a minimum.
    #[error(
        "the Ceph version is unknown and MCS needs Ceph 17.2.6 or later: use a versioned image tag (quay.io/ceph/ceph:v18.2.4) or set cephVersion in the inventory"
    )]
    CephVersionUnknown,
    /// Two mons with one id.
    #[error("mon id {0} is listed twice: every mon needs its own id, remove or rename one")]
    DuplicateMon(MonId),
    /// Two OSDs with one id.
    #[error("OSD id {0} is listed twice: every OSD needs its own id, remove one")]
    DuplicateOsd(u32),
    /// Two external mons with one name, or an external mon named like an internal one.
    #[error(
        "external mon {0:?} is listed twice or shares its name with a mon: give each a unique name"
    )]
    DuplicateExternalMon(String),
    /// An external mon name that would break `data`.
    #[error(
        "external mon name {0:?} is empty or contains '=' or ',', which Rook's data format cannot hold: rename it"
    )]
    InvalidExternalMonName(String),
    /// An address of the wrong family.
    #[error(
        "{what} {ip} is not an {family} address but the cluster's ipFamily is {family}: fix the address or set spec.network.ipFamily / dualStack"
    )]
    WrongIpFamily {
        /// What the address is (e.g. "global IP of osd.3").
        what: String,
        /// The address.
        ip: IpAddr,
        /// The cluster's family.
        family: IpFamily,
    },
    /// A host-networked mon without a node address.
    #[error(
        "mon {0} has no node address in its mapping entry, and with host networking a mon advertises its node's IP: add node.address to the mon"
    )]
    HostNetworkMonWithoutNodeAddress(MonId),
    /// A clusterset name of a daemon cannot be built.
    #[error("the clusterset name of {daemon} cannot be built: {error}")]
    InvalidClustersetName {
        /// The daemon.
        daemon: Daemon,
        /// Why not.
        error: NameError,
    },
    /// A cluster-unique export Service name is longer than a Service name may be.
    #[error(
        "export Service name {name:?} of {daemon} is {len} characters long; Service names have at most 63: shorten the clusterID or use dnsNameForm clusterIdPrefix"
    )]
    ServiceNameTooLong {
        /// The daemon.
        daemon: Daemon,
        /// The name.
        name: String,
        /// Its length.
        len: usize,
    },
}

/// Every reason a plan could not be made (the planner reports all problems at once).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Rejections(pub Vec<Rejection>);

impl Rejections {
    /// The rejections.
    pub fn iter(&self) -> std::slice::Iter<'_, Rejection> {
        self.0.iter()
    }
}

impl From<Rejection> for Rejections {
    fn from(rejection: Rejection) -> Self {
        Self(vec![rejection])
    }
}

impl fmt::Display for Rejections {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0.as_slice() {
            [one] => write!(f, "the plan was rejected: {one}"),
            many => {
                write!(f, "the plan was rejected for {} reasons:", many.len())?;
                for rejection in many {
                    write!(f, "\n  - {rejection}")?;
                }
                Ok(())
            }
        }
    }
}

impl std::error::Error for Rejections {}

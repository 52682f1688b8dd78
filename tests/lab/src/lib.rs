//! The end-to-end lab of clusterset: two "clusters" whose pod networks overlap, each behind its
//! own gateway, joined by a tunnel, with Globalnet-style 1:1 NAT between each cluster's global
//! CIDR and its pod IPs programmed by the product's gateway (`clusterset-gateway` processes fed
//! state files), real Ceph mons, and our clusterset DNS server.
//!
//! Everything lives in network namespaces this crate creates (see `docs/lab.md` for the
//! diagram):
//!
//! - [`Topology`]: the namespaces, veth pairs and addresses, and in each gateway namespace a
//!   `clusterset-gateway run --state FILE` process ([`gateway_binary`] finds it) whose state
//!   file the lab writes ([`PodExport`]s: DNAT global -> pod, SNAT pod -> global, hairpin
//!   included; the route to the peer's global CIDR); created after removing the leftovers of a
//!   crashed run, and torn down on drop (processes in the lab's namespaces are killed first).
//! - [`NetnsThread`]: a thread whose sockets live in one namespace, to run async code (the
//!   DNS server, the resolver) there.
//! - [`LabDns`]: [`clusterset_dns::DnsServer`] serving the clusterset zone inside a cluster,
//!   fed with ServiceImports and MCS EndpointSlices of both clusters, and resolved through
//!   [`clusterset_dns::HickoryClustersetResolver`] from inside that cluster.
//! - [`GlobalnetEndpoints`]: the [`ceph_local::EndpointSource`] of a cluster with MCS: a new
//!   mon gets a pod IP, a global IP from the cluster's pool ([`mcs_controller::IpPool`]), an
//!   export in its gateway's state and a clusterset name, and its address is known once that name
//!   resolves.
//! - [`CephSite`]: a whole Ceph cluster (mons, mgr, OSDs, a mirrored pool, `rbd-mirror`) run
//!   from the Ceph Reef root filesystem ([`require_ceph_root`]) inside one cluster, every
//!   address argument from the plan of `ceph-address-plan`.
//! - [`mirror`]: two such clusters, RBD mirroring through global IPs, a disaster and the
//!   failback, stage by stage (the tests and the `clusterset-lab mirror` demo run it).
//! - [`require_host`]: fails with the `apt-get` command to run when the lab cannot run here.
#![forbid(unsafe_code)]

mod ceph;
mod dns;
mod endpoints;
mod error;
mod gateway;
mod host;
mod logs;
pub mod mirror;
mod netns;
mod topology;

pub use ceph::{
    CephSite, LockOwner, MGR_POD, OsdPodMove, OsdSlot, OsdState, POOL, RBD_MIRROR_HEARTBEAT_SECS,
    RBD_MIRROR_STATE_CHECK_SECS, SiteSpec, back_ip, ceph_version, front_ip, poll_until,
};
pub use dns::{LabDns, NAMESPACE};
pub use endpoints::{GlobalnetEndpoints, mon_service};
pub use error::LabError;
pub use gateway::{
    GATEWAY_BIN_DIR_ENV, GATEWAY_BINARY, PROGRAMMED_WITHIN, PodExport, TableStructure,
    gateway_binary,
};
pub use host::{CEPH_ROOT_TOOLS, REQUIRED_TOOLS, require_ceph_root, require_host};
pub use logs::print_log_tails;
pub use netns::NetnsThread;
pub use topology::{ClusterNet, GatewayRestart, Side, Topology, lab_namespaces};

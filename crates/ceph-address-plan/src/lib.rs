//! Pure planning of Ceph daemon addresses for Kubernetes Multi-Cluster Services, in Rook's
//! layout: given a cluster's identity, network settings and daemon inventory, and the global IPs
//! known so far, what must exist and how must every daemon be addressed.
//!
//! No Kubernetes client, no IO, no async: embed it in any controller.
//!
//! - Input: [`PlanInput`] = [`ClusterSettings`] (namespace, MCS on/off and cluster id, msgr2,
//!   IP family, Ceph version, host networking, which [`DnsNameForm`] to resolve) and an
//!   [`Inventory`] (mons, OSDs, global IPs resolved so far, export conditions). Plain serde
//!   types; [`manifest`] reads them from a Rook CephCluster manifest and an inventory file.
//! - Output: a [`Plan`]: the Services and ServiceExports that must exist
//!   ([`Plan::services`], [`Plan::service_exports`], as k8s-openapi objects through
//!   [`Plan::service_manifest`]), the clusterset names still to resolve ([`Plan::lookups`]),
//!   every daemon's address and status ([`Plan::daemons`]) and arguments
//!   ([`Plan::daemon_args`]), the `rook-ceph-mon-endpoints` data ([`Plan::mon_endpoints`]),
//!   `mon_host` ([`Plan::mon_host_config`]), the peer-token `mon_host`, the mons to replace
//!   ([`Plan::mon_replacements`]), the next mon id, and a readiness verdict
//!   ([`Plan::readiness`]). Invalid input is refused with [`Rejections`] that say what to change.
//! - Incremental: [`Plan::upsert_osd`], [`Plan::remove_osd`], [`Plan::set_global_ip`],
//!   [`Plan::set_export_status`] and [`Plan::replace_mons`] re-plan one daemon (or the mons)
//!   against a previous plan, with the same result as a full plan.
//! - Rook's objects, read and edited in one place for every tool: the mon endpoints ConfigMap
//!   ([`format::read_mon_endpoints`], [`format::edit_mon_endpoints`]), the address arguments
//!   of daemon containers ([`args`]: [`DaemonArgs`] writes them, [`args::public_addr`] and
//!   [`args::osd_public_addr`] read them in either `--flag=value` or `--flag value` form,
//!   [`args::replace_address_args`] edits them), the inventory read from Rook's objects
//!   ([`observe::inventory`]: mons from the endpoints ConfigMap and their Services, OSDs from
//!   their Deployments), the editors of the Rook objects mcs-ceph-operator changes
//!   ([`rook_objects`]: OSD Deployment apply bodies, the endpoints ConfigMap and `mon_host`
//!   writes), and typed builders of Rook's objects ([`mon_service`],
//!   [`cluster_owner_reference`], and a new mon's canary, Deployment and claim in
//!   [`mon_objects`]).
//!
//! Every name, port, label and text format matches Rook byte for byte ([`rook`], [`format`](mod@format)).
//!
//! ```
//! use ceph_address_plan::{CephVersion, ClusterSettings, Inventory, MonInput, Plan, PlanInput};
//!
//! let mut cluster = ClusterSettings::new("my-cluster", "rook-ceph");
//! cluster.multi_cluster_service.enabled = true;
//! cluster.multi_cluster_service.cluster_id = "east".into();
//! cluster.ceph_version = Some(CephVersion::new(18, 2, 4));
//!
//! let mut inventory = Inventory::default();
//! for (id, global) in [("a", "242.1.0.11"), ("b", "242.1.0.12"), ("c", "242.1.0.13")] {
//!     let mut mon = MonInput::new(id.parse()?);
//!     mon.advertised = Some(format!("{global}:6789").parse()?);
//!     inventory.mons.push(mon);
//!     inventory.global_ips.insert(format!("mon.{id}").parse()?, global.parse()?);
//! }
//!
//! let plan = Plan::new(PlanInput { cluster, inventory })?;
//! assert!(plan.readiness().ready);
//! assert_eq!(plan.mon_endpoints().data, "a=242.1.0.11:6789,b=242.1.0.12:6789,c=242.1.0.13:6789");
//! assert_eq!(
//!     plan.mon_host_config().mon_host,
//!     "[v2:242.1.0.11:3300,v1:242.1.0.11:6789],[v2:242.1.0.12:3300,v1:242.1.0.12:6789],[v2:242.1.0.13:3300,v1:242.1.0.13:6789]"
//! );
//! assert_eq!(plan.next_mon_id().as_str(), "d");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
#![forbid(unsafe_code)]

pub mod args;
pub mod document;
pub mod format;
mod input;
pub mod labels;
pub mod manifest;
pub mod mon_id;
pub mod mon_objects;
mod objects;
pub mod observe;
mod plan;
mod reject;
pub mod rook;
pub mod rook_objects;
mod version;

pub use args::DaemonArgs;
pub use input::{
    ClusterSettings, Daemon, DnsNameForm, ExportCondition, ExportStatus, ExternalMon,
    InvalidDaemon, Inventory, IpFamily, McsSettings, MonInput, NodeInfo, OsdInput, PlanInput,
};
pub use mon_id::{InvalidMonId, MonId};
pub use objects::{cluster_owner_reference, mon_service};
pub use plan::{
    Address, Change, DaemonStatus, DesiredExport, DesiredService, Lookup, MonEndpoints,
    MonHostConfig, MonPlan, MonReplacement, NamedPort, OsdPlan, Plan, Readiness, ServiceRole,
    WaitFor, export_problem, mon_ports, osd_ports,
};
pub use reject::{Rejection, Rejections};
pub use version::{CephVersion, InvalidCephVersion};

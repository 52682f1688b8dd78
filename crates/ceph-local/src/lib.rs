//! Local Ceph mon clusters: real `ceph-mon` processes on this machine, optionally in network
//! namespaces, run as `mon-failover`'s [`MonRuntime`](mon_failover::MonRuntime). For the
//! real-Ceph tests, `mcsctl demo` and the overlapping-network lab; not for production (the
//! operator runs mons through Kubernetes).
//!
//! - [`LocalCluster`]: the files of a cluster (`ceph.conf`, keyring, mon stores) and their
//!   bootstrap ([`LocalCluster::create`], or [`LocalCluster::open`] with another
//!   [`CephInstall`](mon_failover_io::CephInstall) and extra configuration, then
//!   [`LocalCluster::init`]); its admin port ([`LocalCluster::admin`], a `ceph` CLI) and its
//!   quorum watch on the mons' admin sockets ([`LocalCluster::quorum_watch`]).
//! - [`LocalMonRuntime`]: starts, stops and deletes `ceph-mon` daemons (a new mon's store is
//!   made from the current monmap; it joins by itself), rewrites `ceph.conf`'s `mon_host` as
//!   mons come and go (as Rook rewrites its mon endpoints), and waits for a quorum
//!   ([`LocalMonRuntime::wait_for_quorum`]), failing at once with the reason from its log when
//!   a mon it started exits ([`QuorumWaitError`], [`ExitedMon`], [`ceph_log_errors`]).
//! - [`MonEndpoint`]: the address a mon advertises, the one it binds (a pod IP behind a global
//!   IP) and its network namespace, given out by an [`EndpointSource`] (the local counterpart
//!   of Rook's per-mon Service and export; [`EndpointTable`] has fixed endpoints and pools).
//! - [`CEPH_TOOLS`]: the programs a cluster runs, with their Debian packages (check them with
//!   [`CephInstall::missing_tools`](mon_failover_io::CephInstall::missing_tools)).
//!
//! - [`demo`]: the guided run behind `mcsctl demo`: three mons move to global IPs published in
//!   our clusterset DNS server and resolved through it, told to a [`demo::Narrator`].
//!
//! The driver that moves the mons is `mon-failover-io`'s; this crate's `tests/real_ceph.rs`
//! runs it over real mons.
#![forbid(unsafe_code)]

mod cluster;
pub mod demo;
mod endpoint;
mod exited;
mod runtime;

pub use cluster::{CEPH_TOOLS, LocalCluster};
pub use endpoint::{EndpointSource, EndpointTable, MonEndpoint};
pub use exited::{ExitedMon, QuorumWaitError, ceph_log_errors};
pub use runtime::LocalMonRuntime;

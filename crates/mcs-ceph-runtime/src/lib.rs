//! The kube shell of `mcs-ceph-operator`, which brings a Rook-layout Ceph cluster onto
//! clusterset addresses through the Kubernetes Multi-Cluster Services API.
//!
//! For every `CephCluster` with `spec.network.multiClusterService.enabled: true` it checks the
//! guards, server-side-applies the per-OSD Services and the ServiceExports of the mon and OSD
//! Services, looks up each exported daemon's global IP, and publishes what it found in a
//! `CephClusterAddressing` object of the same name.
//!
//! Layout (the shape of kube-rs' controller-rs and linkerd's policy-controller: pure logic in
//! libraries, this thin IO shell, and a binary that only parses flags and wires them,
//! `bins/mcs-ceph-operator`):
//!
//! - pure, in [`mcs_ceph_core`]: [`config`](mcs_ceph_core::config),
//!   [`snapshot`](mcs_ceph_core::snapshot) (its inventory is read by
//!   [`ceph_address_plan::observe`]), [`guards`](mcs_ceph_core::guards) and
//!   [`decide`](mcs_ceph_core::decide), which turns a snapshot into writes, lookups, a status and
//!   Events, using [`ceph_address_plan`] for every name, label and address and
//!   [`ceph_address_plan::rook_objects`] for the Rook objects it changes (OSD arguments, mon
//!   endpoints, `mon_host`);
//! - shell: [`kube_io`] carries out writes with server-side apply and publishes Events;
//!   [`reconciler`] wires a snapshot from synced caches, the decision, the writes and the
//!   lookups ([`clusterset_dns::ClustersetResolver`]) into one reconcile; [`runtime`] runs the
//!   watches (retried with [`clusterset_daemon::watch::WatchBackoff`], the agent's too) and the
//!   kube-runtime applier;
//! - leader election over a `coordination.k8s.io/v1` Lease ([`clusterset_daemon::lease`], with
//!   [`kube_lease`]'s rules, shared with the agent); every replica watches, only the holder runs
//!   the applier;
//! - [`mon_migration`]: the ports of [`mon_failover`] on Kubernetes (mon runtime, state in the
//!   status object, `ceph` CLI with the admin keyring) around the pure gate of a migration
//!   step ([`mcs_ceph_core::migration`]);
//! - [`metrics`] and [`readiness`], which `/metrics` and `/readyz` serve
//!   ([`clusterset_daemon::Endpoints`], both daemons' HTTP endpoints).
//!
//! The custom resources (the `CephCluster` it reads, its `CephClusterAddressing` status object
//! and CRD) are [`mcs_ceph_api`]'s, a library without client or runtime that `mcsctl` shares.
#![forbid(unsafe_code)]

pub mod kube_io;
pub mod metrics;
pub mod mon_migration;
pub mod readiness;
pub mod reconciler;
pub mod runtime;

//! Mon migration: the operator's ports for [`mon_failover`] — a Kubernetes
//! [`MonRuntime`](mon_failover::MonRuntime) ([`KubeMonRuntime`]: a new mon's Rook-layout
//! Service, canary and mon Deployments, its entry in `rook-ceph-mon-endpoints`), a
//! [`StateStore`](mon_failover::StateStore) in the operator's own status object
//! ([`StatusStateStore`]), the `ceph` CLI with the admin keyring from the cluster's Secret
//! ([`ceph_cli_from_secret`]) — and the [`gate`] that says when the machine may act (the pure
//! gate is [`mcs_ceph_core::migration`]'s; this one reads the machine's stored state for it).
//! The new mon's objects are ceph-address-plan's typed builders
//! ([`mon_service`](ceph_address_plan::mon_service), [`ceph_address_plan::mon_objects`]).
//!
//! The mon-failover machine decides every step (one mon at a time, only with full quorum);
//! nothing here re-implements its rules. The runtime makes the new mon's Service (as Rook
//! does for the mons it places); its ServiceExport is the plan's: once the runtime lists the
//! new mon in `rook-ceph-mon-endpoints` (without an endpoint, as Rook does while a mon is
//! being placed), the decision exports its Service and resolves its global IP on the same
//! path as every OSD's, and the runtime reads that IP back from the status.
//!
//! Rook reads the same `multiClusterService` field; the operator migrates mons only for a
//! CephCluster that opts in with the annotation [`MIGRATION_ANNOTATION`]` = "enabled"`, set
//! once Rook's own mon health check (and with it Rook's MCS failover) is off.
//!
//! By concern: `error` (what fails), `state` (the machine's state in the status object, and
//! the gate that reads it), `mon_runtime` (the Kubernetes objects of a new mon), `admin` (the
//! `ceph` CLI as the cluster's admin), `report` (what a reconcile's share of the migration
//! did, for the status and the metrics) and `driver` (the reconcile's run of the machine).

mod admin;
mod driver;
mod error;
mod mon_runtime;
mod report;
mod state;

pub use admin::{AdminFiles, AdminSource, MON_SECRET, admin_key, ceph_cli_from_secret};
pub use ceph_address_plan::mon_objects::mon_claim_name;
pub use ceph_address_plan::rook::label::MON_CANARY as MON_CANARY_LABEL;
pub use ceph_address_plan::rook_objects::mon_host_of_endpoints;
pub use driver::{
    MAX_TICKS_PER_RECONCILE, MIGRATION_REQUEUE, MigrationInput, MonMigration, run_ticks,
};
pub use error::MigrationError;
pub use mcs_ceph_core::migration::{
    Gate, MIGRATION_ANNOTATION, MIGRATION_ENABLED, MonAddress, mon_addresses, opted_in,
};
pub use mon_runtime::KubeMonRuntime;
pub use report::{MigrationReport, StepOutcome};
pub use state::{StatusStateStore, gate, stored_state};

/// The field manager of the writes that belong to the mon migration alone: the machine's state
/// in the status object and the mon keys of `rook-ceph-mon-endpoints` it changes between two
/// plans. Distinct from [`FIELD_MANAGER`](mcs_ceph_core::config::FIELD_MANAGER), so that
/// neither's apply drops the other's fields.
pub const MON_FAILOVER_FIELD_MANAGER: &str = "mcs-ceph-operator-mon-failover";

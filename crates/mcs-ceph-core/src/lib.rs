//! The decision core of `mcs-ceph-operator`, pure: no Kubernetes client, no async runtime, no
//! IO. The operator's kube shell builds a [`Snapshot`] from its synced caches, calls
//! [`prepare`], carries out the writes, resolves the names, and publishes what
//! [`Prepared::complete`] decides.
//!
//! - [`config`]: how the operator addresses every cluster (its flags as plain values);
//! - [`snapshot`]: what the operator sees of one CephCluster, and its inventory (read by
//!   [`ceph_address_plan::observe`]);
//! - [`guards`]: the checks a CephCluster must pass before anything is written for it;
//! - [`decide`]: a snapshot and the time become the writes, the lookups, the status and the
//!   Events, using [`ceph_address_plan`] for every name, label, address and Rook object;
//! - [`migration`]: the gate of the mon migration (whether a step of the mon-failover machine
//!   may run now).
//!
//! The status types are [`mcs_ceph_api`]'s; Rook's layout and formats are
//! [`ceph_address_plan`]'s.
#![forbid(unsafe_code)]

pub mod config;
pub mod decide;
pub mod guards;
pub mod migration;
pub mod snapshot;

pub use config::{Config, FIELD_MANAGER, GlobalIpSource, RetryPolicy};
pub use decide::{
    EventNote, EventType, LookupRequest, LookupResult, Outcome, Prepared, Write, prepare,
};
pub use snapshot::{McsApi, McsVersion, Snapshot};

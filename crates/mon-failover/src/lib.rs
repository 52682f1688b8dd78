//! Moving Ceph mons to new addresses without losing quorum: Rook's mon failover as a pure,
//! persisted, event-driven state machine, with the IO around it behind small ports.
//!
//! A mon's identity is its address in the monmap, so a mon cannot simply move to a
//! clusterset-global IP: a new mon is added with the new address and the old one removed.
//!
//! # The machine
//!
//! [`Machine::step`]`(state, observation, now) -> (state, commands)` is pure. The
//! [`MachineState`] is serde-persisted by the caller *before* the commands run (write-ahead), so
//! a crash at any point continues or rolls back from the stored state. One migration at a time,
//! in mon-id order, and only while every mon is in quorum:
//!
//! 1. allocate the next Rook mon id (`maxMonId + 1`; ids are never reused);
//! 2. [`Command::ProvisionAddress`]: create the new mon's Service/export and wait for its address;
//! 3. [`Command::StartMon`]: start it; wait until it is in quorum;
//! 4. [`Command::RemoveFromMonmap`] the old mon, once the mons that stay keep a majority;
//! 5. [`Command::DeleteMon`] the old mon's daemon and objects.
//!
//! Timeouts (from [`Config`], against `now`) and failures before step 4 roll back: the new mon
//! is removed from the monmap if it got there and deleted; the old mon never stopped serving.
//! From step 4 on a migration only goes forward. A mon out of quorum for longer than
//! [`Config::mon_out_timeout`] is failed over the same way (Rook's general failover), removing
//! the dead mon first when a join would leave no majority ([`Order::RemoveFirst`]).
//!
//! Invariants, tested exhaustively for 3 and 5 mons over every interleaving of observations,
//! faults and crashes (`tests/model_check.rs`): a mon is never removed unless the mons left keep
//! a majority of the new monmap ([`quorum`]); at most one migration is in flight; a restart from
//! any persisted state never repeats a removal and never leaves two mons with one id.
//!
//! # Disabling MCS
//!
//! The [`Observation::addressing`] says which kind of address mons must advertise. Turning MCS
//! off makes every mon on a clusterset address [`Placement::Misplaced`], and the machine moves
//! them back to cluster-local addresses exactly as it moved them out, one at a time with quorum
//! kept. A migration in flight when the addressing changes is rolled back if its old mon is
//! still in the monmap (the new mon was provisioned for the other addressing), and finished if
//! the old mon is already removed; the new mon is then itself misplaced and moves back next.
//!
//! # The ports
//!
//! - [`CephMonAdmin`]: quorum status, monmap, add and remove mon, with Ceph 16+'s JSON typed
//!   ([`QuorumStatus`], [`MonMap`]); [`observed_mons`] turns a quorum status into the machine's
//!   view of the mons.
//! - [`MonRuntime`]: provision a mon's address, judge where a mon should be
//!   ([`judge_placement`]), start, stop and delete mon daemons.
//! - [`StateStore`]: where the state lives between steps ([`MemoryStateStore`] here).
//!
//! # What is where
//!
//! This crate is pure: no tokio, no clock read by the machine (only [`Timestamp::now`], for
//! drivers), no process, file or socket. Its neighbours implement the ports and drive the
//! machine:
//!
//! - `mon-failover-io`: the `Driver` (observe, step, persist, execute, until [`is_settled`]),
//!   the `ceph` CLI adapter (`CephCli`, implementing [`CephMonAdmin`]), `CommandLine` and
//!   `CephInstall` (which Ceph programs run, and how), the quorum watch with its admin-socket
//!   probe, and `FileStateStore`.
//! - `ceph-local`: local `ceph-mon` clusters (`LocalCluster`, and `LocalMonRuntime`
//!   implementing [`MonRuntime`] with processes, optionally in network namespaces), for the
//!   real-Ceph tests, `mcsctl demo` and the lab.
//! - `mcs-ceph-runtime` (mcs-ceph-operator's kube shell): the ports on Kubernetes (Rook's objects, the status object).
//!
//! With the `mock` feature the ports have mockall mocks (`MockCephMonAdmin`, `MockMonRuntime`,
//! `MockStateStore`).
#![forbid(unsafe_code)]

mod admin;
mod machine;
mod program;
mod runtime;
mod store;
mod time;

#[cfg(any(test, feature = "mock"))]
pub use admin::MockCephMonAdmin;
pub use admin::{
    AddrVec, AdminError, CephMonAdmin, EntityAddr, MonMap, MonMapEntry, MonMapError, QuorumStatus,
    observed_mons,
};
pub use machine::quorum;
pub use machine::{
    Addressing, AttemptResult, Blocker, ClusterView, Command, CommandOutcome, Config, ConfigError,
    FinishedAttempt, History, Machine, MachineState, Migration, Observation, ObservedMon, Order,
    Phase, Placement, Reason, RollbackCause, is_settled,
};
pub use program::CommandError;
#[cfg(any(test, feature = "mock"))]
pub use runtime::MockMonRuntime;
pub use runtime::{MonRuntime, RuntimeError, judge_placement};
#[cfg(any(test, feature = "mock"))]
pub use store::MockStateStore;
pub use store::{MemoryStateStore, StateStore, StoreError};
pub use time::Timestamp;

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
//! # The ports and the driver
//!
//! - [`CephMonAdmin`]: quorum status, monmap, add and remove mon, with Ceph 16+'s JSON typed
//!   ([`QuorumStatus`], [`MonMap`]). [`CephCli`] implements it with the `ceph` CLI, a
//!   `ceph.conf` and a keyring, with timeouts and errors that carry Ceph's stderr.
//! - [`MonRuntime`]: provision a mon's address, judge where a mon should be, start, stop and
//!   delete mon daemons. The operator implements it with Kubernetes objects;
//!   [`LocalMonRuntime`] with local `ceph-mon` processes (optionally in network namespaces),
//!   for tests, the demo and the lab.
//! - [`StateStore`]: where the state lives between steps ([`FileStateStore`],
//!   [`MemoryStateStore`]; the operator's status object).
//! - [`Driver`]: observe, step, persist, execute; [`Driver::run_until_settled`] loops until
//!   every mon is placed and in quorum.
//! - [`QuorumWatch`]: polls the quorum in the background and records any answer without one,
//!   through a [`QuorumProbe`]: any [`CephMonAdmin`], or [`AdminSocketQuorum`] (the mons' own
//!   state on their admin sockets, for local clusters).
//!
//! With the `mock` feature the ports have mockall mocks (`MockCephMonAdmin`, `MockMonRuntime`,
//! `MockStateStore`).
#![forbid(unsafe_code)]

mod admin;
mod asok;
mod cli;
mod driver;
mod install;
mod local;
mod machine;
mod process;
mod runtime;
mod store;
mod time;
mod watch;

#[cfg(any(test, feature = "mock"))]
pub use admin::MockCephMonAdmin;
pub use admin::{
    AddrVec, AdminError, CephMonAdmin, EntityAddr, MonMap, MonMapEntry, MonMapError, QuorumStatus,
    observed_mons,
};
pub use asok::{AdminSocketQuorum, DEFAULT_ELECTION_ALLOWANCE, MON_ELECTION_TIMEOUT};
pub use cli::CephCli;
pub use driver::{Driver, DriverError, Planned, RunOptions, RunReport, Tick, is_settled};
pub use install::{
    CEPH_ROOT_ENV, CEPH_ROOT_STAMP, CephInstall, DEFAULT_CEPH_ROOT, MissingCephRoot,
};
pub use local::{
    CEPH_TOOLS, EndpointSource, EndpointTable, ExitedMon, LocalCluster, LocalMonRuntime,
    MonEndpoint, QuorumWaitError, ceph_log_errors, missing_tools,
};
pub use machine::quorum;
pub use machine::{
    Addressing, AttemptResult, Blocker, ClusterView, Command, CommandOutcome, Config, ConfigError,
    FinishedAttempt, History, Machine, MachineState, Migration, Observation, ObservedMon, Order,
    Phase, Placement, Reason, RollbackCause,
};
pub use process::{CommandError, CommandLine};
#[cfg(any(test, feature = "mock"))]
pub use runtime::MockMonRuntime;
pub use runtime::{MonRuntime, RuntimeError, judge_placement};
#[cfg(any(test, feature = "mock"))]
pub use store::MockStateStore;
pub use store::{FileStateStore, MemoryStateStore, StateStore, StoreError};
pub use time::Timestamp;
pub use watch::{QuorumProbe, QuorumRecord, QuorumWatch};

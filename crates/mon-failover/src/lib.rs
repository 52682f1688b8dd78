//! Moving Ceph mons to new addresses without losing quorum (placeholder docs, replaced below).
#![forbid(unsafe_code)]

mod machine;
mod time;

pub use machine::quorum;
pub use machine::{
    Addressing, AttemptResult, Blocker, ClusterView, Command, CommandOutcome, Config, ConfigError,
    FinishedAttempt, History, Machine, MachineState, Migration, Observation, ObservedMon, Order,
    Phase, Placement, Reason, RollbackCause,
};
pub use time::Timestamp;

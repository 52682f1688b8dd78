//! The persisted state of the machine. Only [`Machine::step`](crate::Machine::step) changes it;
//! callers read it (status, progress) and store it verbatim (serde).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use ceph_address_plan::MonId;
use serde::{Deserialize, Serialize};

use super::Addressing;
use crate::Timestamp;

/// Everything the machine remembers between steps. Persist it after every step that changed it
/// and before executing that step's commands (write-ahead); then a restart from the stored state
/// continues or rolls back, whatever the moment of the crash.
///
/// ```
/// use mon_failover::MachineState;
///
/// // A cluster whose highest mon id ever allocated is "c" (Rook's maxMonId 2).
/// let state = MachineState::new(Some(2));
/// let json = serde_json::to_string(&state)?;
/// assert_eq!(serde_json::from_str::<MachineState>(&json)?, state);
/// assert!(state.migration().is_none());
/// # Ok::<(), serde_json::Error>(())
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct MachineState {
    pub(crate) max_mon_id: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) migration: Option<Migration>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub(crate) out_of_quorum_since: BTreeMap<MonId, Timestamp>,
    #[serde(default)]
    pub(crate) failures_in_a_row: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) next_attempt_at: Option<Timestamp>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) blocked: Option<Blocker>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) last_error: Option<String>,
    #[serde(default)]
    pub(crate) history: History,
}

impl MachineState {
    /// The state of a cluster where no migration has run yet. `max_mon_id` is the index of the
    /// highest mon id ever allocated (Rook's `maxMonId` in `rook-ceph-mon-endpoints`, `None`
    /// for its `-1`); the machine also raises it to the highest id it sees in the monmap, and
    /// allocates new ids above it, so that no id is ever used twice.
    pub fn new(max_mon_id: Option<u32>) -> Self {
        MachineState {
            max_mon_id,
            ..MachineState::default()
        }
    }

    /// The index of the highest mon id ever allocated (write it back as Rook's `maxMonId`).
    pub fn max_mon_id(&self) -> Option<u32> {
        self.max_mon_id
    }

    /// The migration in flight, if any (at most one).
    pub fn migration(&self) -> Option<&Migration> {
        self.migration.as_ref()
    }

    /// Mons seen out of quorum, with the first step that saw each of them out.
    pub fn out_of_quorum_since(&self) -> &BTreeMap<MonId, Timestamp> {
        &self.out_of_quorum_since
    }

    /// Why the machine waits, if it does.
    pub fn blocked(&self) -> Option<&Blocker> {
        self.blocked.as_ref()
    }

    /// The last command error reported by the driver, until the migration it belongs to ends.
    pub fn last_error(&self) -> Option<&str> {
        self.last_error.as_deref()
    }

    /// Rolled-back attempts since the last completed migration.
    pub fn failures_in_a_row(&self) -> u32 {
        self.failures_in_a_row
    }

    /// No new attempt starts before this instant (backoff after a rollback).
    pub fn next_attempt_at(&self) -> Option<Timestamp> {
        self.next_attempt_at
    }

    /// Counters and the last finished attempt.
    pub fn history(&self) -> &History {
        &self.history
    }
}

impl fmt::Display for MachineState {
    /// One line for status output: the migration in flight, or idle, and why it waits.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.migration {
            Some(migration) => write!(f, "{migration}")?,
            None => f.write_str("idle")?,
        }
        if let Some(blocked) = &self.blocked {
            write!(f, "; waiting: {blocked}")?;
        }
        Ok(())
    }
}

/// Why a mon is replaced.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Reason {
    /// It advertises an address it should not (for example a cluster IP once MCS is enabled).
    Misplaced,
    /// It has been out of quorum longer than the configured timeout (Rook's general failover).
    OutOfQuorum,
}

/// In which order the two monmap changes of a migration happen.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Order {
    /// The new mon joins, then the old one is removed. Used whenever the join guard holds: the
    /// old mon keeps serving until its replacement is in quorum, and until the removal the
    /// migration can be rolled back.
    AddFirst,
    /// The old mon (out of quorum) is removed, then the new one joins. Used only to fail over a
    /// mon when a join would leave the quorum without a majority (three mons, one down: a
    /// fourth in the monmap would need three of four). After the removal there is nothing to
    /// roll back to, so a failed new mon is replaced by another one.
    RemoveFirst,
}

/// Where a migration is. Phases are listed in the order an [`Order::AddFirst`] migration goes
/// through them; [`Order::RemoveFirst`] goes `RemovingOld`, `DeletingOld`,
/// `ProvisioningAddress`, `Joining`.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "name")]
pub enum Phase {
    /// Waiting for the new mon's address ([`Command::ProvisionAddress`](crate::Command)).
    ProvisioningAddress,
    /// Starting the new mon (`started` once the runtime confirmed the start), then waiting for
    /// it to be in quorum.
    Joining {
        /// Whether the runtime confirmed the start.
        started: bool,
    },
    /// The new mon is in quorum; waiting until removing the old one is allowed.
    WaitingToRemoveOld,
    /// Removing the old mon from the monmap. The removal may have happened as soon as the
    /// machine is in this phase, so from here on the migration only goes forward.
    RemovingOld,
    /// Deleting the old mon's daemon and objects.
    DeletingOld,
    /// Undoing the new mon: removed from the monmap if it got there, then deleted.
    RollingBack {
        /// Why.
        cause: RollbackCause,
        /// Whether the runtime confirmed the deletion.
        new_deleted: bool,
    },
    /// [`Order::RemoveFirst`] only: the old mon is gone and a new mon failed; waiting for the
    /// backoff before trying with another new mon.
    AwaitingRetry,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::ProvisioningAddress => f.write_str("provisioning the new mon's address"),
            Phase::Joining { started: false } => f.write_str("starting the new mon"),
            Phase::Joining { started: true } => {
                f.write_str("waiting for the new mon to join the quorum")
            }
            Phase::WaitingToRemoveOld => f.write_str("waiting until the old mon may be removed"),
            Phase::RemovingOld => f.write_str("removing the old mon from the monmap"),
            Phase::DeletingOld => f.write_str("deleting the old mon"),
            Phase::RollingBack { cause, .. } => write!(f, "rolling back ({cause})"),
            Phase::AwaitingRetry => f.write_str("waiting to retry with another new mon"),
        }
    }
}

/// Why a migration (or, for [`Order::RemoveFirst`], one new mon) was rolled back.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum RollbackCause {
    /// The new mon's address did not become known within `address_timeout`.
    AddressTimeout,
    /// The new mon was not in quorum within `join_timeout`.
    JoinTimeout,
    /// Removing the old mon was not allowed within `removal_wait_timeout`.
    RemovalWaitTimeout,
    /// The addressing changed (MCS enabled or disabled) before the old mon was removed.
    AddressingChanged {
        /// The addressing the new mon was provisioned for.
        from: Addressing,
        /// The addressing now.
        to: Addressing,
    },
    /// The new mon joined with another address than the one provisioned for it.
    WrongAddress {
        /// The provisioned address.
        expected: IpAddr,
        /// The address in the monmap.
        actual: IpAddr,
    },
}

impl fmt::Display for RollbackCause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            RollbackCause::AddressTimeout => {
                f.write_str("the new mon's address did not become known in time")
            }
            RollbackCause::JoinTimeout => {
                f.write_str("the new mon did not join the quorum in time")
            }
            RollbackCause::RemovalWaitTimeout => {
                f.write_str("the old mon could not be removed in time (mons out of quorum)")
            }
            RollbackCause::AddressingChanged { from, to } => {
                write!(f, "addressing changed from {from} to {to}")
            }
            RollbackCause::WrongAddress { expected, actual } => {
                write!(f, "the new mon joined at {actual} instead of {expected}")
            }
        }
    }
}

/// One migration in flight: the old mon being replaced and its new mon.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    pub(crate) old: MonId,
    pub(crate) old_address: IpAddr,
    pub(crate) reason: Reason,
    pub(crate) order: Order,
    pub(crate) new: MonId,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub(crate) new_address: Option<IpAddr>,
    pub(crate) addressing: Addressing,
    pub(crate) started_at: Timestamp,
    pub(crate) phase: Phase,
    pub(crate) phase_since: Timestamp,
    pub(crate) old_removed: bool,
    pub(crate) attempt: u32,
}

impl Migration {
    /// The mon being replaced.
    pub fn old(&self) -> &MonId {
        &self.old
    }
    /// The old mon's address when the migration started.
    pub fn old_address(&self) -> IpAddr {
        self.old_address
    }
    /// Why it is replaced.
    pub fn reason(&self) -> Reason {
        self.reason
    }
    /// In which order the monmap changes.
    pub fn order(&self) -> Order {
        self.order
    }
    /// The new mon (of the current attempt).
    pub fn new_mon(&self) -> &MonId {
        &self.new
    }
    /// The new mon's address, once provisioned.
    pub fn new_address(&self) -> Option<IpAddr> {
        self.new_address
    }
    /// The addressing the new mon is provisioned for.
    pub fn addressing(&self) -> Addressing {
        self.addressing
    }
    /// When the migration started.
    pub fn started_at(&self) -> Timestamp {
        self.started_at
    }
    /// Where it is.
    pub fn phase(&self) -> &Phase {
        &self.phase
    }
    /// When it entered that phase.
    pub fn phase_since(&self) -> Timestamp {
        self.phase_since
    }
    /// Whether the old mon has left the monmap.
    pub fn old_removed(&self) -> bool {
        self.old_removed
    }
    /// The attempt number (more than 1 only for [`Order::RemoveFirst`] after a failed new mon).
    pub fn attempt(&self) -> u32 {
        self.attempt
    }
}

impl fmt::Display for Migration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let why = match self.reason {
            Reason::Misplaced => "misplaced",
            Reason::OutOfQuorum => "out of quorum",
        };
        write!(
            f,
            "mon {} ({}, {why}) -> mon {}",
            self.old, self.old_address, self.new
        )?;
        if let Some(address) = self.new_address {
            write!(f, " ({address})")?;
        }
        write!(f, ": {}", self.phase)
    }
}

/// Why the machine does not go on.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum Blocker {
    /// Ceph did not answer with a quorum.
    CephUnreachable {
        /// What the admin port said.
        reason: String,
    },
    /// Backing off after a rolled-back attempt.
    Backoff {
        /// Until when.
        until: Timestamp,
    },
    /// Moving a mon's address (and removing the old mon of such a move) waits for every other
    /// mon to be in quorum.
    MonsOutOfQuorum {
        /// The mons out of quorum.
        mons: BTreeSet<MonId>,
    },
    /// Starting a new mon now would make the quorum depend on it while it synchronizes.
    JoinWouldLoseQuorum {
        /// Mons in the monmap.
        monmap: usize,
        /// Mons in quorum.
        in_quorum: usize,
    },
    /// Removing this mon now would leave no majority in quorum.
    RemovalWouldLoseQuorum {
        /// The mon.
        mon: MonId,
        /// Mons in the monmap.
        monmap: usize,
        /// Mons in quorum.
        in_quorum: usize,
    },
    /// No further Rook mon id can be allocated (ids are never reused).
    IdsExhausted {
        /// The highest id allocated.
        max_mon_id: u32,
    },
}

impl fmt::Display for Blocker {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Blocker::CephUnreachable { reason } => write!(f, "Ceph has no reachable quorum: {reason}"),
            Blocker::Backoff { until } => write!(f, "backing off after a rolled-back attempt until {until}"),
            Blocker::MonsOutOfQuorum { mons } => {
                let mons: Vec<&str> = mons.iter().map(MonId::as_str).collect();
                write!(f, "mons out of quorum: {} (every other mon must be in quorum)", mons.join(", "))
            }
            Blocker::JoinWouldLoseQuorum { monmap: 1, .. } => f.write_str(
                "a single-mon cluster cannot move its mon without losing quorum while the new mon joins: run at least 3 mons",
            ),
            Blocker::JoinWouldLoseQuorum { monmap, in_quorum } => write!(
                f,
                "{in_quorum} of {monmap} mons in quorum: a joining mon would leave no majority; waiting for mons to return"
            ),
            Blocker::RemovalWouldLoseQuorum { mon, monmap, in_quorum } => write!(
                f,
                "removing mon {mon} would leave no majority ({in_quorum} of {monmap} mons in quorum); waiting for mons to return"
            ),
            Blocker::IdsExhausted { max_mon_id } => write!(
                f,
                "mon id index {max_mon_id} is the last Rook mon id; no new mon can be created"
            ),
        }
    }
}

/// Counters and the last finished attempt.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct History {
    /// Migrations completed.
    pub completed: u32,
    /// Attempts rolled back.
    pub rolled_back: u32,
    /// The last finished attempt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last: Option<FinishedAttempt>,
}

/// How an attempt ended.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct FinishedAttempt {
    /// The mon that was to be replaced.
    pub old: MonId,
    /// Its replacement.
    pub new: MonId,
    /// Why.
    pub reason: Reason,
    /// What happened.
    pub result: AttemptResult,
    /// When.
    pub at: Timestamp,
}

/// The end of an attempt.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "kind")]
pub enum AttemptResult {
    /// The old mon is gone and the new one is in quorum.
    Completed,
    /// The new mon was undone.
    RolledBack {
        /// Why.
        cause: RollbackCause,
    },
}

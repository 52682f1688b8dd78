//! The pure state machine: `step(state, observation, now) -> (state, commands)`.
//!
//! See the crate documentation for the phases and invariants; this module holds the transition
//! function and its tests.

mod command;
mod config;
mod observation;
pub mod quorum;
mod state;

pub use command::Command;
pub use config::{Config, ConfigError};
pub use observation::{
    Addressing, ClusterView, CommandOutcome, Observation, ObservedMon, Placement,
};
pub use state::{
    AttemptResult, Blocker, FinishedAttempt, History, MachineState, Migration, Order, Phase,
    Reason, RollbackCause,
};

use std::net::IpAddr;

use ceph_address_plan::MonId;
use observation::MonView;

use crate::Timestamp;

/// The mon failover machine: a [`Config`] and the transition function [`Machine::step`].
///
/// ```
/// use mon_failover::{
///     Addressing, Command, Config, Machine, MachineState, ObservedMon, Observation, Placement,
///     Timestamp,
/// };
///
/// let machine = Machine::new(Config::default())?;
/// let mon = |ip: &str, placement| ObservedMon { address: ip.parse().unwrap(), in_quorum: true, placement };
/// // MCS was just enabled: mon a still advertises its cluster IP, b and c already moved.
/// let observation = Observation::reachable(
///     Addressing::Clusterset,
///     [
///         ("a".parse()?, mon("10.96.0.10", Placement::Misplaced)),
///         ("d".parse()?, mon("242.1.0.4", Placement::Placed)),
///         ("e".parse()?, mon("242.1.0.5", Placement::Placed)),
///     ],
/// );
/// let (state, commands) =
///     machine.step(&MachineState::new(Some(4)), &observation, Timestamp::from_millis(0));
/// // Mon a is replaced by f, the next Rook id after maxMonId 4 ("e"): first its address.
/// assert_eq!(
///     commands,
///     [Command::ProvisionAddress { mon: "f".parse()?, addressing: Addressing::Clusterset }]
/// );
/// assert_eq!(state.max_mon_id(), Some(5));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Machine {
    config: Config,
}

/// At most this many phase transitions happen in one step (there are fewer phases than this,
/// so a chain that reaches the bound simply continues at the next step).
const MAX_TRANSITIONS_PER_STEP: usize = 16;

impl Machine {
    /// A machine with this configuration, once it is validated.
    pub fn new(config: Config) -> Result<Self, ConfigError> {
        config.validate()?;
        Ok(Machine { config })
    }

    /// The configuration.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// One step: from the persisted `state`, what was observed and the current time, the next
    /// state and the commands to execute. Pure and deterministic.
    ///
    /// The caller persists the returned state (if it differs) *before* executing the commands,
    /// executes them in order, and reports their outcomes in the next observation.
    pub fn step(
        &self,
        state: &MachineState,
        observation: &Observation,
        now: Timestamp,
    ) -> (MachineState, Vec<Command>) {
        let mut next = state.clone();
        for outcome in &observation.outcomes {
            if let CommandOutcome::Failed { command, error } = outcome {
                next.last_error = Some(format!("{command}: {error}"));
            }
        }
        let mons = match &observation.cluster {
            ClusterView::Unreachable { reason } => {
                next.blocked = Some(Blocker::CephUnreachable {
                    reason: reason.clone(),
                });
                return (next, Vec::new());
            }
            ClusterView::Reachable { mons } => mons,
        };
        next.blocked = None;
        if let Some(highest) = mons.keys().map(MonId::index).max() {
            next.max_mon_id = Some(next.max_mon_id.map_or(highest, |max| max.max(highest)));
        }
        next.out_of_quorum_since
            .retain(|id, _| mons.contains_key(id));
        for (id, mon) in mons {
            if mon.in_quorum {
                next.out_of_quorum_since.remove(id);
            } else {
                next.out_of_quorum_since.entry(id.clone()).or_insert(now);
            }
        }

        let mut step = Stepper {
            config: &self.config,
            view: MonView { mons },
            addressing: observation.addressing,
            outcomes: &observation.outcomes,
            now,
            state: next,
            commands: Vec::new(),
        };
        for _ in 0..MAX_TRANSITIONS_PER_STEP {
            if step.advance() == Flow::Stop {
                break;
            }
        }
        (step.state, step.commands)
    }
}

/// Whether there is nothing left to do: Ceph answered, every mon of the monmap is in quorum
/// and placed, and no migration is in flight. A driver stops stepping once this holds after a
/// step that asked for no commands.
///
/// ```
/// use mon_failover::{Addressing, MachineState, Observation, ObservedMon, Placement, is_settled};
///
/// let observe = |placement| -> Result<Observation, Box<dyn std::error::Error>> {
///     let mon = ObservedMon { address: "242.1.0.4".parse()?, in_quorum: true, placement };
///     Ok(Observation::reachable(Addressing::Clusterset, [("d".parse()?, mon)]))
/// };
/// let state = MachineState::new(Some(3));
/// assert!(is_settled(&observe(Placement::Placed)?, &state));
/// let unknown = observe(Placement::Unknown)?;
/// assert!(!is_settled(&unknown, &state), "a mon of unknown placement is not settled");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn is_settled(observation: &Observation, state: &MachineState) -> bool {
    let ClusterView::Reachable { mons } = &observation.cluster else {
        return false;
    };
    state.migration().is_none()
        && !mons.is_empty()
        && mons
            .values()
            .all(|m| m.in_quorum && m.placement == Placement::Placed)
}

/// Whether the step goes on with another transition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Flow {
    Continue,
    Stop,
}

/// One step in progress.
struct Stepper<'a> {
    config: &'a Config,
    view: MonView<'a>,
    addressing: Addressing,
    outcomes: &'a [CommandOutcome],
    now: Timestamp,
    state: MachineState,
    commands: Vec<Command>,
}

impl Stepper<'_> {
    fn advance(&mut self) -> Flow {
        match self.state.migration.take() {
            None => self.start(),
            Some(migration) => self.advance_migration(migration),
        }
    }

    fn done(&self, command: &Command) -> bool {
        self.outcomes
            .iter()
            .any(|o| matches!(o, CommandOutcome::Done(c) if c == command))
    }

    fn address_ready(&self, mon: &MonId) -> Option<IpAddr> {
        self.outcomes.iter().find_map(|o| match o {
            CommandOutcome::AddressReady { mon: m, address } if m == mon => Some(*address),
            _ => None,
        })
    }

    fn emit(&mut self, command: Command) -> Flow {
        self.commands.push(command);
        Flow::Stop
    }

    fn block(&mut self, blocker: Blocker) -> Flow {
        self.state.blocked = Some(blocker);
        Flow::Stop
    }

    fn keep(&mut self, migration: Migration, flow: Flow) -> Flow {
        self.state.migration = Some(migration);
        flow
    }

    fn enter(&self, migration: &mut Migration, phase: Phase) {
        migration.phase = phase;
        migration.phase_since = self.now;
    }

    fn monmap_size(&self) -> usize {
        self.view.mons.len()
    }

    /// No migration in flight: start the next one, if any is due and allowed.
    fn start(&mut self) -> Flow {
        if let Some(at) = self.state.next_attempt_at
            && self.now < at
        {
            return self.block(Blocker::Backoff { until: at });
        }
        let size = self.monmap_size();
        let in_quorum = self.view.quorum_size();

        if let Some(timeout) = self.config.mon_out_timeout {
            let due = self
                .state
                .out_of_quorum_since
                .iter()
                .filter(|(_, since)| since.has_elapsed(timeout, self.now))
                .min_by_key(|(id, since)| (**since, (*id).clone()))
                .map(|(id, _)| id.clone());
            if let Some(old) = due {
                let order = if quorum::join_keeps_majority(size, in_quorum) {
                    Order::AddFirst
                } else if quorum::removal_keeps_majority(size, in_quorum, false) {
                    Order::RemoveFirst
                } else {
                    return self.block(Blocker::RemovalWouldLoseQuorum {
                        mon: old,
                        monmap: size,
                        in_quorum,
                    });
                };
                return self.begin(old, Reason::OutOfQuorum, order);
            }
        }

        let misplaced = self
            .view
            .mons
            .iter()
            .find(|(_, mon)| mon.placement == Placement::Misplaced)
            .map(|(id, _)| id.clone());
        let Some(old) = misplaced else {
            return Flow::Stop;
        };
        let out = self.view.out_of_quorum_except(&[]);
        if !out.is_empty() {
            return self.block(Blocker::MonsOutOfQuorum { mons: out });
        }
        if !quorum::join_keeps_majority(size, in_quorum) {
            return self.block(Blocker::JoinWouldLoseQuorum {
                monmap: size,
                in_quorum,
            });
        }
        self.begin(old, Reason::Misplaced, Order::AddFirst)
    }

    /// The next Rook mon id, recorded as allocated; ids are never reused.
    fn allocate_id(&mut self) -> Result<MonId, Blocker> {
        let next = MonId::next_after(self.state.max_mon_id);
        let exhausted =
            Some(next.index()) == self.state.max_mon_id || next.as_str().parse::<MonId>().is_err();
        if exhausted {
            return Err(Blocker::IdsExhausted {
                max_mon_id: self.state.max_mon_id.unwrap_or(0),
            });
        }
        self.state.max_mon_id = Some(next.index());
        Ok(next)
    }

    fn begin(&mut self, old: MonId, reason: Reason, order: Order) -> Flow {
        let Some(old_address) = self.view.address(&old) else {
            return Flow::Stop;
        };
        let new = match self.allocate_id() {
            Ok(id) => id,
            Err(blocker) => return self.block(blocker),
        };
        let phase = match order {
            Order::AddFirst => Phase::ProvisioningAddress,
            Order::RemoveFirst => Phase::RemovingOld,
        };
        self.state.last_error = None;
        self.state.migration = Some(Migration {
            old,
            old_address,
            reason,
            order,
            new,
            new_address: None,
            addressing: self.addressing,
            started_at: self.now,
            phase,
            phase_since: self.now,
            old_removed: false,
            attempt: 1,
        });
        Flow::Continue
    }

    /// One transition of the migration in flight, by its phase.
    fn advance_migration(&mut self, m: Migration) -> Flow {
        match m.phase.clone() {
            Phase::ProvisioningAddress => self.provisioning_address(m),
            Phase::Joining { started } => self.joining(m, started),
            Phase::WaitingToRemoveOld => self.waiting_to_remove_old(m),
            Phase::RemovingOld => self.removing_old(m),
            Phase::DeletingOld => self.deleting_old(m),
            Phase::RollingBack { cause, new_deleted } => self.rolling_back(m, cause, new_deleted),
            Phase::AwaitingRetry => self.awaiting_retry(m),
        }
    }

    /// The rollback cause when the addressing changed since the migration began.
    fn addressing_change(&self, m: &Migration) -> Option<RollbackCause> {
        (m.addressing != self.addressing).then_some(RollbackCause::AddressingChanged {
            from: m.addressing,
            to: self.addressing,
        })
    }

    /// `ProvisioningAddress`: the new mon's address is asked for until it is ready (then the
    /// new mon joins) or the address timeout passes (then the migration rolls back).
    fn provisioning_address(&mut self, mut m: Migration) -> Flow {
        if let Some(cause) = self.addressing_change(&m) {
            return self.roll_back(m, cause);
        }
        if let Some(address) = self.address_ready(&m.new) {
            m.new_address = Some(address);
            self.enter(&mut m, Phase::Joining { started: false });
            return self.keep(m, Flow::Continue);
        }
        if m.phase_since
            .has_elapsed(self.config.address_timeout, self.now)
        {
            return self.roll_back(m, RollbackCause::AddressTimeout);
        }
        let command = Command::ProvisionAddress {
            mon: m.new.clone(),
            addressing: m.addressing,
        };
        let flow = self.emit(command);
        self.keep(m, flow)
    }

    /// `Joining`: the new mon is started (once) and awaited in quorum at its planned address;
    /// then the old mon is removed, unless it already was.
    fn joining(&mut self, mut m: Migration, started: bool) -> Flow {
        let Some(address) = m.new_address else {
            // Only a hand-edited state lacks the address here: provision it again.
            self.enter(&mut m, Phase::ProvisioningAddress);
            return self.keep(m, Flow::Continue);
        };
        if let Some(cause) = self.addressing_change(&m) {
            return self.roll_back(m, cause);
        }
        if self.view.in_quorum(&m.new) {
            return self.joined(m, address);
        }
        if m.phase_since
            .has_elapsed(self.config.join_timeout, self.now)
        {
            return self.roll_back(m, RollbackCause::JoinTimeout);
        }
        if started {
            return self.keep(m, Flow::Stop);
        }
        self.start_new_mon(m, address)
    }

    /// The new mon is in quorum: at the wrong address it rolls back; else the migration
    /// completes (the old mon already removed) or goes on to remove the old mon.
    fn joined(&mut self, mut m: Migration, address: IpAddr) -> Flow {
        if let Some(actual) = self.view.address(&m.new)
            && actual != address
        {
            let cause = RollbackCause::WrongAddress {
                expected: address,
                actual,
            };
            return self.roll_back(m, cause);
        }
        if m.old_removed {
            return self.complete(m);
        }
        self.enter(&mut m, Phase::WaitingToRemoveOld);
        self.keep(m, Flow::Continue)
    }

    /// Starts the new mon at `address`, unless that is done already or its joining would lose
    /// the majority.
    fn start_new_mon(&mut self, mut m: Migration, address: IpAddr) -> Flow {
        let command = Command::StartMon {
            mon: m.new.clone(),
            address,
        };
        if self.done(&command) {
            m.phase = Phase::Joining { started: true };
            return self.keep(m, Flow::Stop);
        }
        let size = self.monmap_size();
        let in_quorum = self.view.quorum_size();
        if !self.view.contains(&m.new) && !quorum::join_keeps_majority(size, in_quorum) {
            let flow = self.block(Blocker::JoinWouldLoseQuorum {
                monmap: size,
                in_quorum,
            });
            return self.keep(m, flow);
        }
        let flow = self.emit(command);
        self.keep(m, flow)
    }

    /// `WaitingToRemoveOld`: the old mon is removed once [`Stepper::removal_of_old_allowed`]
    /// allows it; the migration rolls back when that takes longer than the removal wait timeout.
    fn waiting_to_remove_old(&mut self, mut m: Migration) -> Flow {
        if let Some(cause) = self.addressing_change(&m) {
            return self.roll_back(m, cause);
        }
        match self.removal_of_old_allowed(&m) {
            Ok(()) => {
                self.enter(&mut m, Phase::RemovingOld);
                self.keep(m, Flow::Continue)
            }
            Err(_)
                if m.phase_since
                    .has_elapsed(self.config.removal_wait_timeout, self.now) =>
            {
                self.roll_back(m, RollbackCause::RemovalWaitTimeout)
            }
            Err(blocker) => {
                let flow = self.block(blocker);
                self.keep(m, flow)
            }
        }
    }

    /// `RemovingOld`: the old mon leaves the monmap; then its objects are deleted.
    fn removing_old(&mut self, mut m: Migration) -> Flow {
        let command = Command::RemoveFromMonmap { mon: m.old.clone() };
        if !self.view.contains(&m.old) || self.done(&command) {
            m.old_removed = true;
            self.enter(&mut m, Phase::DeletingOld);
            return self.keep(m, Flow::Continue);
        }
        // The policy guard (every other mon in quorum, for a move) let the migration in
        // here; the removal may have happened since (its outcome lost in a crash), so
        // the migration cannot go back, and re-issuing it needs only the majority guard.
        // Waiting for a mon that never returns would deadlock: its failover must wait
        // for this migration to end.
        let flow = self.remove_from_monmap(command, &m.old);
        self.keep(m, flow)
    }

    /// Emits the removal of `mon` from the monmap (`command`) when the majority survives it;
    /// blocks otherwise.
    fn remove_from_monmap(&mut self, command: Command, mon: &MonId) -> Flow {
        let size = self.monmap_size();
        let in_quorum = self.view.quorum_size();
        if quorum::removal_keeps_majority(size, in_quorum, self.view.in_quorum(mon)) {
            self.emit(command)
        } else {
            self.block(Blocker::RemovalWouldLoseQuorum {
                mon: mon.clone(),
                monmap: size,
                in_quorum,
            })
        }
    }

    /// `DeletingOld`: the old mon's objects are deleted; then an add-first migration completes
    /// and a remove-first one provisions the new mon's address.
    fn deleting_old(&mut self, mut m: Migration) -> Flow {
        let command = Command::DeleteMon { mon: m.old.clone() };
        if !self.done(&command) {
            let flow = self.emit(command);
            return self.keep(m, flow);
        }
        match m.order {
            Order::AddFirst => self.complete(m),
            Order::RemoveFirst => {
                m.addressing = self.addressing;
                self.enter(&mut m, Phase::ProvisioningAddress);
                self.keep(m, Flow::Continue)
            }
        }
    }

    /// `RollingBack`: the new mon leaves the monmap and its objects are deleted; then the
    /// rollback is recorded.
    fn rolling_back(&mut self, m: Migration, cause: RollbackCause, new_deleted: bool) -> Flow {
        let remove = Command::RemoveFromMonmap { mon: m.new.clone() };
        if self.view.contains(&m.new) && !self.done(&remove) {
            let flow = self.remove_from_monmap(remove, &m.new);
            return self.keep(m, flow);
        }
        if !new_deleted {
            let delete = Command::DeleteMon { mon: m.new.clone() };
            if !self.done(&delete) {
                let flow = self.emit(delete);
                return self.keep(m, flow);
            }
        }
        self.finish_rollback(m, cause)
    }

    /// `AwaitingRetry` (the old mon is gone, the new one rolled back): once the backoff has
    /// passed, a new attempt with a new id provisions its address.
    fn awaiting_retry(&mut self, mut m: Migration) -> Flow {
        if let Some(at) = self.state.next_attempt_at
            && self.now < at
        {
            let flow = self.block(Blocker::Backoff { until: at });
            return self.keep(m, flow);
        }
        match self.allocate_id() {
            Ok(new) => {
                m.new = new;
                m.new_address = None;
                m.addressing = self.addressing;
                m.attempt = m.attempt.saturating_add(1);
                self.enter(&mut m, Phase::ProvisioningAddress);
                self.keep(m, Flow::Continue)
            }
            Err(blocker) => {
                let flow = self.block(blocker);
                self.keep(m, flow)
            }
        }
    }

    /// The guard for removing the old mon: the majority guard always; for a mon that moves
    /// address, every other mon in quorum; for a failover done add-first, the new mon in quorum.
    fn removal_of_old_allowed(&self, m: &Migration) -> Result<(), Blocker> {
        if !self.view.contains(&m.old) {
            return Ok(());
        }
        let size = self.monmap_size();
        let in_quorum = self.view.quorum_size();
        if !quorum::removal_keeps_majority(size, in_quorum, self.view.in_quorum(&m.old)) {
            return Err(Blocker::RemovalWouldLoseQuorum {
                mon: m.old.clone(),
                monmap: size,
                in_quorum,
            });
        }
        let out = match m.reason {
            Reason::Misplaced => self.view.out_of_quorum_except(&[&m.old]),
            Reason::OutOfQuorum if m.order == Order::AddFirst && !self.view.in_quorum(&m.new) => {
                [m.new.clone()].into()
            }
            Reason::OutOfQuorum => Default::default(),
        };
        if out.is_empty() {
            Ok(())
        } else {
            Err(Blocker::MonsOutOfQuorum { mons: out })
        }
    }

    fn roll_back(&mut self, mut m: Migration, cause: RollbackCause) -> Flow {
        self.enter(
            &mut m,
            Phase::RollingBack {
                cause,
                new_deleted: false,
            },
        );
        self.keep(m, Flow::Continue)
    }

    fn record(&mut self, m: &Migration, result: state::AttemptResult) {
        self.state.history.last = Some(state::FinishedAttempt {
            old: m.old.clone(),
            new: m.new.clone(),
            reason: m.reason,
            result,
            at: self.now,
        });
    }

    fn finish_rollback(&mut self, mut m: Migration, cause: RollbackCause) -> Flow {
        self.state.history.rolled_back = self.state.history.rolled_back.saturating_add(1);
        self.record(&m, AttemptResult::RolledBack { cause });
        self.state.failures_in_a_row = self.state.failures_in_a_row.saturating_add(1);
        self.state.next_attempt_at =
            Some(self.now + self.config.backoff(self.state.failures_in_a_row));
        if m.old_removed {
            self.enter(&mut m, Phase::AwaitingRetry);
            return self.keep(m, Flow::Continue);
        }
        Flow::Continue
    }

    fn complete(&mut self, m: Migration) -> Flow {
        self.state.history.completed = self.state.history.completed.saturating_add(1);
        self.record(&m, AttemptResult::Completed);
        self.state.failures_in_a_row = 0;
        self.state.next_attempt_at = None;
        self.state.last_error = None;
        Flow::Continue
    }
}

#[cfg(test)]
mod tests;

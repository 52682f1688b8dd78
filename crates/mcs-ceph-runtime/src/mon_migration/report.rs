//! What the mon migration did in one reconcile ([`MigrationReport`]): the state line of the
//! status message, and the steps executed with their outcomes for the failover step metric.

use mcs_ceph_api::AddressingStatus;
use mon_failover::MachineState;

/// One executed failover step and what became of it (the `step`/`outcome` labels of the
/// failover step metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepOutcome {
    /// `provision_address`, `start_mon`, `remove_from_monmap` or `delete_mon`.
    pub step: &'static str,
    /// `done`, `address_ready`, `address_pending` or `failed`.
    pub outcome: &'static str,
}

/// What the mon migration did in one reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// The machine's state (or why it waits) in one line, for the status message.
    pub line: String,
    /// A migration is in flight: reconcile again soon.
    pub in_progress: bool,
    /// The steps executed.
    pub steps: Vec<StepOutcome>,
    /// Why the migration failed in this reconcile (an error, or the machine's last failed
    /// step, which it retries); the line says it too.
    pub failure: Option<String>,
}

fn step_name(command: &mon_failover::Command) -> &'static str {
    use mon_failover::Command;
    match command {
        Command::ProvisionAddress { .. } => "provision_address",
        Command::StartMon { .. } => "start_mon",
        Command::RemoveFromMonmap { .. } => "remove_from_monmap",
        Command::DeleteMon { .. } => "delete_mon",
    }
}

fn step_outcome(outcome: &mon_failover::CommandOutcome) -> StepOutcome {
    use mon_failover::CommandOutcome;
    match outcome {
        CommandOutcome::Done(command) => StepOutcome {
            step: step_name(command),
            outcome: "done",
        },
        CommandOutcome::AddressReady { .. } => StepOutcome {
            step: "provision_address",
            outcome: "address_ready",
        },
        CommandOutcome::AddressPending { .. } => StepOutcome {
            step: "provision_address",
            outcome: "address_pending",
        },
        CommandOutcome::Failed { command, .. } => StepOutcome {
            step: step_name(command),
            outcome: "failed",
        },
    }
}

impl MigrationReport {
    /// The report of a migration the gate holds back for `reason`: `None` when there is
    /// nothing to say (no migration in flight and no mon to replace).
    pub(super) fn waiting(
        status: &AddressingStatus,
        in_flight: bool,
        reason: &str,
    ) -> Option<Self> {
        let to_replace = mcs_ceph_core::migration::mon_to_replace(status);
        if !in_flight && !to_replace {
            return None;
        }
        Some(Self {
            line: format!("waiting: {reason}"),
            in_progress: in_flight,
            steps: Vec::new(),
            failure: None,
        })
    }

    /// The report of the `ticks` run, ending in `state`.
    pub(super) fn after_ticks(state: &MachineState, ticks: &[mon_failover_io::Tick]) -> Self {
        let failure = state.last_error().map(str::to_owned);
        let line = match &failure {
            Some(error) => format!("{state}; last step failed, retrying: {error}"),
            None => state.to_string(),
        };
        Self {
            line,
            failure,
            in_progress: state.migration().is_some(),
            steps: ticks
                .iter()
                .flat_map(|t| t.outcomes.iter().map(step_outcome))
                .collect(),
        }
    }
}

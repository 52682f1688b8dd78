//! The driver: the thin IO shell around [`Machine::step`](mon_failover::Machine::step). One
//! tick observes Ceph (admin port) and the runtime's placement of every mon, steps the machine,
//! persists the new state (write-ahead), executes the commands, and keeps their outcomes for
//! the next observation.

use std::sync::Arc;
use std::time::{Duration, Instant};

use clusterset_error_chain::ErrorChain;
use mon_failover::{
    Addressing, CephMonAdmin, ClusterView, Command, CommandOutcome, Machine, MachineState,
    MonMapError, MonRuntime, Observation, Placement, StateStore, StoreError, Timestamp, is_settled,
    observed_mons,
};

/// Why the driver stopped.
#[derive(Debug, thiserror::Error)]
pub enum DriverError {
    /// The state could not be loaded or saved. Nothing was executed after a failed save.
    #[error("mon failover state")]
    Store(#[from] StoreError),
    /// The monmap holds something the machine cannot work with.
    #[error(transparent)]
    MonMap(#[from] MonMapError),
    /// [`Driver::run_until_settled`] ran out of time.
    #[error("the mons did not settle within {after:?}; the failover is at: {state}")]
    Deadline {
        /// The time allowed.
        after: Duration,
        /// The machine's state, as a status line.
        state: String,
    },
}

/// What one tick saw and did.
#[derive(Debug, Clone)]
pub struct Tick {
    /// What the machine was told.
    pub observation: Observation,
    /// The commands it asked for.
    pub commands: Vec<Command>,
    /// What became of them (reported in the next observation).
    pub outcomes: Vec<CommandOutcome>,
    /// The state after the step.
    pub state: MachineState,
    /// Time spent asking Ceph and the runtime for the observation.
    pub observe_time: Duration,
    /// Time spent executing the commands.
    pub command_time: Duration,
    /// Of `command_time`, the time spent in monmap changes through the admin port.
    pub monmap_change_time: Duration,
}

impl Tick {
    /// Whether the mons are settled after this tick (see
    /// [`is_settled`](mon_failover::is_settled)).
    pub fn settled(&self) -> bool {
        self.commands.is_empty() && is_settled(&self.observation, &self.state)
    }
}

/// Wall time of a [`Driver::run_until_settled`] run, split by what it waited on.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunReport {
    /// Ticks run.
    pub ticks: u32,
    /// Wall time of the whole run.
    pub elapsed: Duration,
    /// Observing: `ceph quorum_status` and the runtime's placement.
    pub observing: Duration,
    /// Monmap changes through the admin port (`ceph mon remove`).
    pub monmap_changes: Duration,
    /// Runtime commands: provisioning addresses, starting and deleting mons.
    pub runtime_commands: Duration,
    /// Waiting between ticks for Ceph to change (a new mon synchronizing and joining).
    pub polling: Duration,
}

impl RunReport {
    /// The part of the run spent waiting on Ceph: its answers, its monmap changes and the
    /// polls while a mon joins.
    pub fn waiting_on_ceph(&self) -> Duration {
        self.observing + self.monmap_changes + self.polling
    }
}

/// How [`Driver::run_until_settled`] runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RunOptions {
    /// How long to wait before observing again when the machine waits on Ceph.
    pub poll: Duration,
    /// Give up after this long.
    pub deadline: Duration,
}

impl Default for RunOptions {
    fn default() -> Self {
        RunOptions {
            poll: Duration::from_millis(500),
            deadline: Duration::from_secs(30 * 60),
        }
    }
}

/// The failover driver.
///
/// ```
/// use std::sync::Arc;
/// use mon_failover::{
///     Addressing, Config, Machine, MemoryStateStore, MockCephMonAdmin, MockMonRuntime, Placement,
///     QuorumStatus, Timestamp,
/// };
/// use mon_failover_io::Driver;
///
/// # tokio::runtime::Builder::new_current_thread().enable_all().build()?.block_on(async {
/// let status: QuorumStatus = serde_json::from_str(r#"{"election_epoch": 4, "quorum_names": ["a"],
///   "monmap": {"epoch": 1, "fsid": "f", "mons": [{"rank": 0, "name": "a",
///     "public_addrs": {"addrvec": [{"type": "v2", "addr": "242.1.0.1:3300"}]}}]}}"#)?;
/// let mut admin = MockCephMonAdmin::new();
/// admin.expect_quorum_status().returning(move || Ok(status.clone()));
/// let mut runtime = MockMonRuntime::new();
/// runtime.expect_placement().returning(|_, _, _| Ok(Placement::Placed));
///
/// let machine = Machine::new(Config::default())?;
/// let store = Arc::new(MemoryStateStore::new());
/// let mut driver =
///     Driver::resume(machine, Arc::new(admin), Arc::new(runtime), store, Some(0)).await?;
/// let tick = driver.tick(Addressing::Clusterset, Timestamp::now()).await?;
/// assert!(tick.settled(), "one mon, placed and in quorum: nothing to do");
/// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Driver {
    machine: Machine,
    admin: Arc<dyn CephMonAdmin>,
    runtime: Arc<dyn MonRuntime>,
    store: Arc<dyn StateStore>,
    state: MachineState,
    outcomes: Vec<CommandOutcome>,
}

impl std::fmt::Debug for Driver {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Driver")
            .field("state", &self.state)
            .field("outcomes", &self.outcomes)
            .finish_non_exhaustive()
    }
}

/// The planned half of a tick: what was observed and the commands to run. The state has been
/// persisted when this is returned.
#[derive(Debug, Clone)]
pub struct Planned {
    /// What the machine was told.
    pub observation: Observation,
    /// The commands to execute, in order.
    pub commands: Vec<Command>,
    /// Time spent observing.
    pub observe_time: Duration,
}

impl Driver {
    /// A driver that continues from the stored state, or starts from
    /// `MachineState::new(initial_max_mon_id)` when nothing is stored (Rook's `maxMonId`).
    pub async fn resume(
        machine: Machine,
        admin: Arc<dyn CephMonAdmin>,
        runtime: Arc<dyn MonRuntime>,
        store: Arc<dyn StateStore>,
        initial_max_mon_id: Option<u32>,
    ) -> Result<Self, DriverError> {
        let state = store
            .load()
            .await?
            .unwrap_or_else(|| MachineState::new(initial_max_mon_id));
        Ok(Driver {
            machine,
            admin,
            runtime,
            store,
            state,
            outcomes: Vec::new(),
        })
    }

    /// The machine's current state.
    pub fn state(&self) -> &MachineState {
        &self.state
    }

    /// Asks Ceph for the quorum and the runtime for each mon's placement. Takes the outcomes
    /// of the last executed commands into the observation.
    pub async fn observe(&mut self, addressing: Addressing) -> Result<Observation, DriverError> {
        let outcomes = std::mem::take(&mut self.outcomes);
        let status = match self.admin.quorum_status().await {
            Ok(status) => status,
            Err(error) => {
                return Ok(Observation {
                    addressing,
                    cluster: ClusterView::Unreachable {
                        reason: ErrorChain(&error).to_string(),
                    },
                    outcomes,
                });
            }
        };
        let mut placements = Vec::new();
        for entry in &status.monmap.mons {
            let id = entry.id()?;
            let address = entry.ip()?;
            let placement = match self.runtime.placement(&id, address, addressing).await {
                Ok(placement) => placement,
                Err(error) => {
                    tracing::warn!(mon = %id, error = %ErrorChain(&error), "cannot judge the mon's placement; leaving it alone");
                    Placement::Unknown
                }
            };
            placements.push((id, placement));
        }
        let mons = observed_mons(&status, |id, _| {
            placements
                .iter()
                .find(|(p, _)| p == id)
                .map_or(Placement::Unknown, |(_, placement)| *placement)
        })?;
        Ok(Observation {
            addressing,
            cluster: ClusterView::Reachable { mons },
            outcomes,
        })
    }

    /// Observes, steps the machine and persists the new state if it changed. Nothing runs
    /// until [`Driver::execute`]; a crash in between is safe (the machine re-issues).
    pub async fn plan(
        &mut self,
        addressing: Addressing,
        now: Timestamp,
    ) -> Result<Planned, DriverError> {
        let started = Instant::now();
        let observation = self.observe(addressing).await?;
        let observe_time = started.elapsed();
        let (next, commands) = self.machine.step(&self.state, &observation, now);
        if next != self.state {
            self.store.save(&next).await?;
            self.state = next;
        }
        Ok(Planned {
            observation,
            commands,
            observe_time,
        })
    }

    /// Executes commands in order; their outcomes go into the next observation. Returns the
    /// outcomes and the time spent in monmap changes.
    pub async fn execute(&mut self, commands: &[Command]) -> (Vec<CommandOutcome>, Duration) {
        let mut outcomes = Vec::with_capacity(commands.len());
        let mut monmap_time = Duration::ZERO;
        for command in commands {
            tracing::info!(%command, "executing");
            let started = Instant::now();
            let outcome = self.execute_one(command).await;
            if matches!(command, Command::RemoveFromMonmap { .. }) {
                monmap_time += started.elapsed();
            }
            if let CommandOutcome::Failed { error, .. } = &outcome {
                tracing::warn!(%command, %error, "command failed; the machine retries it");
            }
            outcomes.push(outcome);
        }
        self.outcomes.clone_from(&outcomes);
        (outcomes, monmap_time)
    }

    async fn execute_one(&self, command: &Command) -> CommandOutcome {
        // The outcome's text is the error with its causes (the machine keeps it as the last
        // error, which the operator's status shows).
        let failed = |error: &(dyn std::error::Error + 'static)| CommandOutcome::Failed {
            command: command.clone(),
            error: ErrorChain(error).to_string(),
        };
        match command {
            Command::ProvisionAddress { mon, addressing } => {
                match self.runtime.provision_address(mon, *addressing).await {
                    Ok(Some(address)) => CommandOutcome::AddressReady {
                        mon: mon.clone(),
                        address,
                    },
                    Ok(None) => CommandOutcome::AddressPending { mon: mon.clone() },
                    Err(e) => failed(&e),
                }
            }
            Command::StartMon { mon, address } => match self.runtime.start(mon, *address).await {
                Ok(()) => CommandOutcome::Done(command.clone()),
                Err(e) => failed(&e),
            },
            Command::RemoveFromMonmap { mon } => match self.admin.remove_mon(mon).await {
                Ok(()) => CommandOutcome::Done(command.clone()),
                Err(e) => failed(&e),
            },
            Command::DeleteMon { mon } => match self.runtime.delete(mon).await {
                Ok(()) => CommandOutcome::Done(command.clone()),
                Err(e) => failed(&e),
            },
        }
    }

    /// One whole tick: plan, then execute.
    pub async fn tick(
        &mut self,
        addressing: Addressing,
        now: Timestamp,
    ) -> Result<Tick, DriverError> {
        let planned = self.plan(addressing, now).await?;
        let started = Instant::now();
        let (outcomes, monmap_change_time) = self.execute(&planned.commands).await;
        Ok(Tick {
            observation: planned.observation,
            commands: planned.commands,
            outcomes,
            state: self.state.clone(),
            observe_time: planned.observe_time,
            command_time: started.elapsed(),
            monmap_change_time,
        })
    }

    /// Ticks until the mons are settled, observing again at once after commands ran and after
    /// `options.poll` while the machine waits on Ceph. `on_tick` sees every tick (progress
    /// display, quorum checks). Uses the system clock.
    pub async fn run_until_settled(
        &mut self,
        addressing: Addressing,
        options: RunOptions,
        mut on_tick: impl FnMut(&Tick),
    ) -> Result<RunReport, DriverError> {
        let started = Instant::now();
        let mut report = RunReport::default();
        loop {
            let tick = self.tick(addressing, Timestamp::now()).await?;
            report.ticks = report.ticks.saturating_add(1);
            report.observing += tick.observe_time;
            report.monmap_changes += tick.monmap_change_time;
            report.runtime_commands += tick.command_time.saturating_sub(tick.monmap_change_time);
            on_tick(&tick);
            if tick.settled() {
                report.elapsed = started.elapsed();
                return Ok(report);
            }
            if started.elapsed() > options.deadline {
                return Err(DriverError::Deadline {
                    after: options.deadline,
                    state: self.state.to_string(),
                });
            }
            if tick.commands.is_empty() {
                let waited = Instant::now();
                tokio::time::sleep(options.poll).await;
                report.polling += waited.elapsed();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mon_failover::{
        AdminError, CommandError, Config, MemoryStateStore, MockCephMonAdmin, MockMonRuntime,
        MockStateStore, QuorumStatus, RuntimeError,
    };

    use crate::test_support::quorum_status as status;

    async fn driver(
        admin: MockCephMonAdmin,
        runtime: MockMonRuntime,
        store: Arc<dyn StateStore>,
    ) -> Driver {
        Driver::resume(
            machine(),
            Arc::new(admin),
            Arc::new(runtime),
            store,
            Some(2),
        )
        .await
        .unwrap()
    }

    fn machine() -> Machine {
        Machine::new(Config::default()).unwrap()
    }

    const ABC: [(&str, &str); 3] = [("a", "10.0.0.1"), ("b", "10.0.0.2"), ("c", "10.0.0.3")];

    /// An admin that answers every quorum status with `answer()`.
    fn admin_answering(answer: fn() -> Result<QuorumStatus, AdminError>) -> MockCephMonAdmin {
        let mut admin = MockCephMonAdmin::new();
        admin.expect_quorum_status().returning(answer);
        admin
    }

    /// Mons a, b and c, all in quorum.
    fn abc_in_quorum() -> Result<QuorumStatus, AdminError> {
        Ok(status(&ABC, &["a", "b", "c"]))
    }

    /// A runtime that judges a mon on a 10.x address misplaced.
    fn runtime() -> MockMonRuntime {
        let mut runtime = MockMonRuntime::new();
        runtime.expect_placement().returning(|_, ip, _| {
            Ok(if ip.to_string().starts_with("10.") {
                Placement::Misplaced
            } else {
                Placement::Placed
            })
        });
        runtime
    }

    #[tokio::test]
    async fn persists_before_executing_and_reports_outcomes_next_tick() {
        let admin = admin_answering(abc_in_quorum);
        let mut runtime = runtime();
        let mut seq = mockall::Sequence::new();
        let mut store = MockStateStore::new();
        store.expect_load().returning(|| Ok(None));
        store
            .expect_save()
            .times(1)
            .in_sequence(&mut seq)
            .withf(|s| s.migration().is_some())
            .returning(|_| Ok(()));
        runtime
            .expect_provision_address()
            .times(1)
            .in_sequence(&mut seq)
            .withf(|mon, addressing| mon.as_str() == "d" && *addressing == Addressing::Clusterset)
            .returning(|_, _| Ok(Some("242.0.0.4".parse().unwrap())));
        let mut driver = driver(admin, runtime, Arc::new(store)).await;
        let tick = driver
            .tick(Addressing::Clusterset, Timestamp::from_millis(0))
            .await
            .unwrap();
        assert_eq!(tick.commands.len(), 1);
        assert!(matches!(
            tick.outcomes[0],
            CommandOutcome::AddressReady { .. }
        ));
        assert!(!tick.settled());
        // The next observation carries the outcome.
        assert_eq!(driver.outcomes, tick.outcomes);
    }

    #[tokio::test]
    async fn a_failed_save_runs_nothing() {
        let admin = admin_answering(abc_in_quorum);
        let mut runtime = runtime();
        runtime.expect_provision_address().never();
        let mut store = MockStateStore::new();
        store.expect_load().returning(|| Ok(None));
        store.expect_save().returning(|_| {
            Err(StoreError::Io {
                context: "saving /x".into(),
                source: std::io::Error::other("disk full"),
            })
        });
        let mut driver = driver(admin, runtime, Arc::new(store)).await;
        let err = driver
            .tick(Addressing::Clusterset, Timestamp::from_millis(0))
            .await
            .unwrap_err();
        // The message is the driver's; the store's error and its cause follow in the chain.
        assert_eq!(err.to_string(), "mon failover state");
        assert_eq!(
            ErrorChain(&err).to_string(),
            "mon failover state: saving /x: disk full"
        );
    }

    #[tokio::test]
    async fn a_failed_command_and_an_unreadable_quorum_keep_their_causes() {
        let admin = admin_answering(abc_in_quorum);
        let mut failing = runtime();
        failing.expect_provision_address().returning(|_, _| {
            Err(RuntimeError::Io {
                context: "writing /run/mon-d".into(),
                source: std::io::Error::other("disk full"),
            })
        });
        let mut failed = driver(admin, failing, Arc::new(MemoryStateStore::new())).await;
        let tick = failed
            .tick(Addressing::Clusterset, Timestamp::from_millis(0))
            .await
            .unwrap();
        let [CommandOutcome::Failed { error, .. }] = tick.outcomes.as_slice() else {
            panic!("one failed command: {:?}", tick.outcomes)
        };
        assert_eq!(error, "writing /run/mon-d: disk full");

        let admin = admin_answering(|| {
            Err(AdminError::Parse {
                command: "ceph quorum_status".into(),
                source: serde_json::from_str::<QuorumStatus>("{}").unwrap_err(),
            })
        });
        let mut unreachable = driver(admin, runtime(), Arc::new(MemoryStateStore::new())).await;
        let tick = unreachable
            .tick(Addressing::Clusterset, Timestamp::from_millis(0))
            .await
            .unwrap();
        let blocked = tick
            .state
            .blocked()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(
            blocked.contains(
                "`ceph quorum_status` printed unexpected JSON: missing field `election_epoch`"
            ),
            "{blocked}"
        );
    }

    #[tokio::test]
    async fn an_unreachable_cluster_is_observed_and_nothing_runs() {
        let mut admin = admin_answering(|| {
            Err(AdminError::Command(CommandError::Timeout {
                command: "ceph quorum_status".into(),
                after: Duration::from_secs(15),
            }))
        });
        admin.expect_remove_mon().never();
        let runtime = MockMonRuntime::new();
        let mut driver = driver(admin, runtime, Arc::new(MemoryStateStore::new())).await;
        let tick = driver
            .tick(Addressing::Clusterset, Timestamp::from_millis(0))
            .await
            .unwrap();
        assert!(tick.commands.is_empty());
        let blocked = tick
            .state
            .blocked()
            .map(ToString::to_string)
            .unwrap_or_default();
        assert!(blocked.contains("did not finish within 15s"), "{blocked}");
    }

    #[tokio::test]
    async fn a_placement_error_leaves_the_mon_alone() {
        let admin = admin_answering(abc_in_quorum);
        let mut runtime = MockMonRuntime::new();
        runtime
            .expect_placement()
            .returning(|_, _, _| Err(RuntimeError::Other("the API server is down".into())));
        runtime.expect_provision_address().never();
        let mut driver = driver(admin, runtime, Arc::new(MemoryStateStore::new())).await;
        let tick = driver
            .tick(Addressing::Clusterset, Timestamp::from_millis(0))
            .await
            .unwrap();
        assert!(tick.commands.is_empty());
        assert!(!tick.settled(), "unknown placement is not settled");
    }

    #[tokio::test]
    async fn resumes_from_the_stored_state() {
        let store = Arc::new(MemoryStateStore::new());
        let stored = MachineState::new(Some(7));
        store.save(&stored).await.unwrap();
        let driver = Driver::resume(
            machine(),
            Arc::new(MockCephMonAdmin::new()),
            Arc::new(MockMonRuntime::new()),
            store,
            Some(2),
        )
        .await
        .unwrap();
        assert_eq!(driver.state().max_mon_id(), Some(7));
    }

    #[tokio::test]
    async fn a_foreign_mon_in_the_monmap_stops_the_driver_with_the_fix() {
        let mut admin = MockCephMonAdmin::new();
        admin
            .expect_quorum_status()
            .returning(|| Ok(status(&[("a", "10.0.0.1"), ("mon1", "10.0.0.9")], &["a"])));
        let mut runtime = MockMonRuntime::new();
        runtime
            .expect_placement()
            .returning(|_, _, _| Ok(Placement::Placed));
        let mut driver = driver(admin, runtime, Arc::new(MemoryStateStore::new())).await;
        let err = driver
            .tick(Addressing::Clusterset, Timestamp::from_millis(0))
            .await
            .unwrap_err();
        assert!(err.to_string().contains("ceph mon remove mon1"), "{err}");
    }
}

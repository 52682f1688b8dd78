//! The failover driver (`mon-failover-io`) against real Ceph: Debian's `ceph-mon` daemons on
//! loopback addresses, run by this crate's local process runtime, and the `ceph` CLI adapter.
//! These tests need `ceph-mon` and `ceph-common` (`.ci/run` installs them) and fail, never
//! skip, without them.
//!
//! Each test has its own cluster on its own loopback range (127.0.N.x), so they run in
//! parallel: three mons start at 127.0.N.11-13 (cluster-local addresses) and move to
//! clusterset addresses from the pool 127.0.N.21-29, one at a time, while a [`QuorumWatch`]
//! asks the mons for their state on their admin sockets every second.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers too

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use ceph_address_plan::MonId;
use ceph_local::{EndpointTable, LocalCluster, LocalMonRuntime, MonEndpoint};
use mon_failover::{
    Addressing, AttemptResult, Blocker, CephMonAdmin, Command, Config, Machine, MonRuntime, Phase,
    Placement, RuntimeError, StateStore, Timestamp,
};
use mon_failover_io::{CephCli, Driver, FileStateStore, QuorumWatch, RunOptions};

fn id(s: &str) -> MonId {
    s.parse().unwrap()
}

fn ip(net: u8, host: u8) -> IpAddr {
    IpAddr::from([127, 0, net, host])
}

/// Fails (does not skip) when Ceph is not installed.
fn require_ceph() {
    let missing = mon_failover_io::missing_tools(&ceph_local::CEPH_TOOLS);
    assert!(
        missing.is_empty(),
        "{missing:?} not installed: these tests run real Ceph mons; install them with `apt-get install ceph-mon ceph-common` (as .ci/run does)"
    );
}

/// One real cluster at a time: on two cores, four clusters in parallel starve the mons' lease
/// and election timers, and the quorum watch would measure the machine's load, not the driver.
static ONE_CLUSTER_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// Three running mons a, b, c on 127.0.NET.11-13 and what drives them.
struct Cluster {
    _dir: tempfile::TempDir,
    net: u8,
    cluster: LocalCluster,
    runtime: Arc<LocalMonRuntime>,
    admin: Arc<CephCli>,
    store: Arc<FileStateStore>,
    /// Last, so that the next test starts only once this one's daemons are gone.
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

impl Cluster {
    async fn start(net: u8) -> Cluster {
        require_ceph();
        let serial = ONE_CLUSTER_AT_A_TIME.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let abc: Vec<(MonId, IpAddr)> = ["a", "b", "c"]
            .iter()
            .zip(11..)
            .map(|(m, host)| (id(m), ip(net, host)))
            .collect();
        let fsid = format!("6d2f3e1a-0000-4000-8000-0000000000{net:02x}");
        let cluster = LocalCluster::create(dir.path().join("ceph"), fsid, &abc)
            .await
            .unwrap();
        let table = EndpointTable::new()
            .with_mons_at(Addressing::ClusterLocal, &abc)
            .with_pool(
                Addressing::Clusterset,
                (21..30).map(|h| MonEndpoint::at(ip(net, h))),
            )
            .with_pool(
                Addressing::ClusterLocal,
                (31..40).map(|h| MonEndpoint::at(ip(net, h))),
            );
        let admin = Arc::new(cluster.admin(None).timeout(Duration::from_secs(10)));
        let runtime = Arc::new(LocalMonRuntime::new(
            cluster.clone(),
            Arc::new(table),
            cluster.admin(None).timeout(Duration::from_secs(10)),
        ));
        for (mon, address) in &abc {
            runtime.start(mon, *address).await.unwrap();
        }
        if let Err(error) = runtime
            .wait_for_quorum(admin.as_ref(), 3, Duration::from_secs(60))
            .await
        {
            panic!("the mons of 127.0.{net}.x formed no quorum: {error}");
        }
        let store = Arc::new(FileStateStore::new(dir.path().join("failover.json")));
        Cluster {
            _serial: serial,
            _dir: dir,
            net,
            cluster,
            runtime,
            admin,
            store,
        }
    }

    /// A quorum watch on the mons' admin sockets, every second.
    fn watch(&self) -> QuorumWatch {
        self.cluster.quorum_watch(Duration::from_secs(1))
    }

    async fn driver(&self, config: Config, runtime: Arc<dyn MonRuntime>) -> Driver {
        Driver::resume(
            Machine::new(config).unwrap(),
            self.admin.clone(),
            runtime,
            self.store.clone(),
            Some(2),
        )
        .await
        .unwrap()
    }

    /// The monmap as `(id, ip)`, and the mons in quorum.
    async fn monmap(&self) -> (BTreeSet<(String, IpAddr)>, BTreeSet<String>) {
        let status = self.admin.quorum_status().await.unwrap();
        let mons = status
            .monmap
            .mons
            .iter()
            .map(|m| (m.name.clone(), m.ip().unwrap()))
            .collect();
        (mons, status.quorum_names.into_iter().collect())
    }

    /// Every mon's election history from its log, oldest first (`<time> mon.<id>: <line>`):
    /// what a quorum-loss failure prints, so that CI's output says which mon held the election
    /// up.
    fn election_log(&self) -> String {
        let mut lines = Vec::new();
        let Ok(logs) = std::fs::read_dir(self.cluster.dir().join("log")) else {
            return "no log directory".to_string();
        };
        for log in logs.flatten() {
            let name = log.file_name().to_string_lossy().replace(".log", "");
            let text = std::fs::read_to_string(log.path()).unwrap_or_default();
            for line in text.lines() {
                let about_elections = [
                    "calling monitor election",
                    "is new leader",
                    "in quorum",
                    "adding/updating",
                    "removed from monmap",
                    "(synchronizing)",
                    "(probing)",
                ]
                .iter()
                .any(|w| line.contains(w));
                if about_elections && !line.contains("audit") {
                    let time = line.split(' ').next().unwrap_or_default();
                    let rest: String = line
                        .splitn(4, ' ')
                        .nth(3)
                        .unwrap_or(line)
                        .chars()
                        .take(160)
                        .collect();
                    lines.push(format!("{time} {name}: {rest}"));
                }
            }
        }
        lines.sort();
        let skip = lines.len().saturating_sub(80);
        lines[skip..].join("\n")
    }

    async fn assert_moved_to(&self, expected: &[(&str, u8)]) {
        self.assert_moved_from(&["a", "b", "c"], expected).await;
    }

    async fn assert_moved_from(&self, gone: &[&str], expected: &[(&str, u8)]) {
        let (mons, quorum) = self.monmap().await;
        let expected: BTreeSet<(String, IpAddr)> = expected
            .iter()
            .map(|(m, host)| ((*m).to_string(), ip(self.net, *host)))
            .collect();
        assert_eq!(
            mons, expected,
            "the final monmap holds exactly the new addresses"
        );
        let names: BTreeSet<String> = expected.iter().map(|(m, _)| m.clone()).collect();
        assert_eq!(quorum, names, "every mon is in quorum");
        for (mon, _) in &expected {
            assert!(self.runtime.pid(&id(mon)).await.is_some(), "mon {mon} runs");
        }
        for old in gone {
            assert!(
                self.runtime.pid(&id(old)).await.is_none(),
                "old mon {old} is stopped"
            );
            assert!(
                !self.cluster.mon_data(&id(old)).exists(),
                "old mon {old}'s data is deleted"
            );
        }
    }
}

fn config() -> Config {
    Config {
        address_timeout: Duration::from_secs(30),
        join_timeout: Duration::from_secs(90),
        removal_wait_timeout: Duration::from_secs(300),
        mon_out_timeout: None,
        retry_backoff: Duration::from_secs(1),
        max_retry_backoff: Duration::from_secs(5),
    }
}

fn options() -> RunOptions {
    RunOptions {
        poll: Duration::from_millis(500),
        deadline: Duration::from_secs(300),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn moves_three_mons_to_new_addresses_and_back_without_losing_quorum() {
    let c = Cluster::start(61).await;
    let watch = c.watch();
    let mut driver = c.driver(config(), c.runtime.clone()).await;
    let mut removals = Vec::new();
    let report = driver
        .run_until_settled(Addressing::Clusterset, options(), |tick| {
            for command in &tick.commands {
                if let Command::RemoveFromMonmap { mon } = command {
                    removals.push(mon.to_string());
                }
            }
        })
        .await
        .unwrap();
    c.assert_moved_to(&[("d", 21), ("e", 22), ("f", 23)]).await;
    assert_eq!(removals, ["a", "b", "c"], "one at a time, in id order");
    assert_eq!(driver.state().history().completed, 3);
    assert_eq!(driver.state().max_mon_id(), Some(5));

    // MCS disabled: the mons move back to cluster-local addresses the same way.
    removals.clear();
    driver
        .run_until_settled(Addressing::ClusterLocal, options(), |tick| {
            for command in &tick.commands {
                if let Command::RemoveFromMonmap { mon } = command {
                    removals.push(mon.to_string());
                }
            }
        })
        .await
        .unwrap();
    let record = watch.stop().await;
    assert!(
        record.never_lost(),
        "quorum was lost: {:?}\nthe mons' elections:\n{}",
        record.losses,
        c.election_log()
    );
    c.assert_moved_from(
        &["a", "b", "c", "d", "e", "f"],
        &[("g", 31), ("h", 32), ("i", 33)],
    )
    .await;
    assert_eq!(removals, ["d", "e", "f"]);
    assert_eq!(driver.state().history().completed, 6);
    // The run, for docs/benchmarks.md.
    eprintln!(
        "migrated 3 mons in {:.1?} over {} ticks: waiting on Ceph {:.1?} ({:.0}%: answers {:.1?}, monmap changes {:.1?}, polling while mons join {:.1?}), runtime commands {:.1?}; quorum polls {}, quorums seen {:?}",
        report.elapsed,
        report.ticks,
        report.waiting_on_ceph(),
        100.0 * report.waiting_on_ceph().as_secs_f64() / report.elapsed.as_secs_f64(),
        report.observing,
        report.monmap_changes,
        report.polling,
        report.runtime_commands,
        record.polls,
        record.quorums,
    );
}

/// How a driver incarnation ends.
#[derive(Debug, Clone, Copy)]
enum Crash {
    /// After persisting the step, before running its commands.
    BeforeCommands,
    /// After running the commands: their outcomes are lost.
    AfterCommands,
}

/// The name of the phase the migration in `state` is in.
fn phase_name(state: &mon_failover::MachineState) -> String {
    state.migration().map_or("Idle".to_string(), |m| {
        let debug = format!("{:?}", m.phase());
        debug
            .split([' ', '{'])
            .next()
            .unwrap_or_default()
            .to_string()
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn converges_when_the_driver_is_killed_at_every_step_boundary() {
    let c = Cluster::start(62).await;
    let watch = c.watch();
    // Where to kill the driver: in every phase that runs a command, right after the step was
    // persisted, once before its commands ran and once after (their outcomes lost).
    let phases = [
        "ProvisioningAddress",
        "Joining",
        "RemovingOld",
        "DeletingOld",
    ];
    let mut targets = phases
        .iter()
        .map(|p| (*p, Crash::BeforeCommands))
        .chain(phases.iter().map(|p| (*p, Crash::AfterCommands)))
        .peekable();
    let mut kills = Vec::new();
    let mut settled = false;
    'incarnations: for _ in 0..100 {
        // A new driver from the persisted state, as after a restart of the operator.
        let mut driver = c.driver(config(), c.runtime.clone()).await;
        for _ in 0..200 {
            let planned = driver
                .plan(Addressing::Clusterset, Timestamp::now())
                .await
                .unwrap();
            if planned.commands.is_empty() {
                if mon_failover::is_settled(&planned.observation, driver.state()) {
                    settled = true;
                    break 'incarnations;
                }
                // Waiting on Ceph (a new mon joining).
                tokio::time::sleep(Duration::from_millis(500)).await;
                continue;
            }
            let phase = phase_name(driver.state());
            if let Some((target, crash)) = targets.next_if(|(t, _)| *t == phase) {
                if matches!(crash, Crash::AfterCommands) {
                    driver.execute(&planned.commands).await;
                }
                kills.push(format!("{target} {crash:?}"));
                continue 'incarnations;
            }
            driver.execute(&planned.commands).await;
        }
        panic!(
            "an incarnation made no progress in 200 steps: {}",
            driver.state()
        );
    }
    assert!(settled, "the driver did not converge across restarts");
    assert_eq!(kills.len(), 8, "killed at every boundary: {kills:?}");
    let record = watch.stop().await;
    assert!(
        record.never_lost(),
        "quorum was lost: {:?}\nthe mons' elections:\n{}",
        record.losses,
        c.election_log()
    );
    c.assert_moved_to(&[("d", 21), ("e", 22), ("f", 23)]).await;
    let state = c.store.load().await.unwrap().unwrap();
    assert_eq!(state.history().completed, 3);
    assert_eq!(
        state.history().rolled_back,
        0,
        "crashes alone never roll back"
    );
    assert_eq!(state.max_mon_id(), Some(5), "no id was burned by a crash");
}

/// The local runtime, except that one mon's start does nothing: it never joins.
struct NeverStarts {
    inner: Arc<LocalMonRuntime>,
    mon: MonId,
}

#[async_trait]
impl MonRuntime for NeverStarts {
    async fn provision_address(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<IpAddr>, RuntimeError> {
        self.inner.provision_address(mon, addressing).await
    }
    async fn placement(
        &self,
        mon: &MonId,
        advertised: IpAddr,
        addressing: Addressing,
    ) -> Result<Placement, RuntimeError> {
        self.inner.placement(mon, advertised, addressing).await
    }
    async fn start(&self, mon: &MonId, address: IpAddr) -> Result<(), RuntimeError> {
        if *mon == self.mon {
            return Ok(());
        }
        self.inner.start(mon, address).await
    }
    async fn stop(&self, mon: &MonId) -> Result<(), RuntimeError> {
        self.inner.stop(mon).await
    }
    async fn delete(&self, mon: &MonId) -> Result<(), RuntimeError> {
        self.inner.delete(mon).await
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_mon_that_never_joins_is_rolled_back_within_the_timeout() {
    let c = Cluster::start(63).await;
    let watch = c.watch();
    let join_timeout = Duration::from_secs(15);
    let config = Config {
        join_timeout,
        ..config()
    };
    let runtime = Arc::new(NeverStarts {
        inner: c.runtime.clone(),
        mon: id("d"),
    });
    let mut driver = c.driver(config, runtime).await;
    let started = std::time::Instant::now();
    let mut rolled_back_after = None;
    let report = driver
        .run_until_settled(Addressing::Clusterset, options(), |tick| {
            if rolled_back_after.is_none() && tick.state.history().rolled_back > 0 {
                rolled_back_after = Some(started.elapsed());
            }
        })
        .await
        .unwrap();
    let record = watch.stop().await;
    assert!(
        record.never_lost(),
        "quorum was lost: {:?}\nthe mons' elections:\n{}",
        record.losses,
        c.election_log()
    );
    let after = rolled_back_after.expect("d was rolled back");
    assert!(
        after >= join_timeout && after < join_timeout + Duration::from_secs(30),
        "rolled back {after:?} after the start, join timeout {join_timeout:?}"
    );
    let history = driver.state().history();
    assert_eq!(history.rolled_back, 1);
    assert_eq!(history.completed, 3);
    // d is never reused: the migrations went to e, f, g, taking the pool's free addresses.
    c.assert_moved_to(&[("e", 21), ("f", 22), ("g", 23)]).await;
    assert!(
        !c.cluster.mon_data(&id("d")).exists(),
        "d's data was deleted"
    );
    eprintln!("rollback after {after:?}; whole run {:?}", report.elapsed);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mon_killed_mid_migration_blocks_removals_until_quorum_is_back() {
    let c = Cluster::start(64).await;
    let before_kill = c.watch();
    let mut driver = c.driver(config(), c.runtime.clone()).await;
    // Drive until the new mon d has been started.
    for _ in 0..100 {
        let tick = driver
            .tick(Addressing::Clusterset, Timestamp::now())
            .await
            .unwrap();
        if tick
            .commands
            .iter()
            .any(|c| matches!(c, Command::StartMon { .. }))
        {
            break;
        }
    }
    let record = before_kill.stop().await;
    assert!(
        record.never_lost(),
        "quorum was lost before the kill: {:?}",
        record.losses
    );
    // b dies while d joins. Until d has synchronized, only a and c of a, b, c, d are up: Ceph
    // itself has no quorum for a moment (no machine can prevent that), then a, c, d form one.
    c.runtime.stop(&id("b")).await.unwrap();
    let mut after_kill = None;
    let mut blocked_ticks = 0;
    let mut saw_waiting = false;
    for _ in 0..240 {
        let tick = driver
            .tick(Addressing::Clusterset, Timestamp::now())
            .await
            .unwrap();
        assert!(
            !tick
                .commands
                .iter()
                .any(|c| matches!(c, Command::RemoveFromMonmap { .. })),
            "a removal while b is down: {:?}",
            tick.commands
        );
        if let Some(Blocker::MonsOutOfQuorum { mons }) = tick.state.blocked() {
            assert_eq!(mons.iter().map(MonId::as_str).collect::<Vec<_>>(), ["b"]);
            let phase = tick.state.migration().map(|m| m.phase().clone());
            saw_waiting |= phase == Some(Phase::WaitingToRemoveOld);
            blocked_ticks += 1;
            // a, c, d are in quorum: from here on it must hold, through b's return and the
            // remaining migrations.
            after_kill.get_or_insert_with(|| c.watch());
            if blocked_ticks >= 10 {
                break;
            }
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(saw_waiting, "d joined and the removal of a waited for b");
    assert!(
        blocked_ticks >= 10,
        "the removal stayed blocked while b was down"
    );
    // b comes back; the migrations finish.
    c.runtime.start(&id("b"), ip(64, 12)).await.unwrap();
    driver
        .run_until_settled(Addressing::Clusterset, options(), |_| {})
        .await
        .unwrap();
    let record = after_kill.unwrap().stop().await;
    assert!(
        record.never_lost(),
        "quorum was lost: {:?}\nthe mons' elections:\n{}",
        record.losses,
        c.election_log()
    );
    c.assert_moved_to(&[("d", 21), ("e", 22), ("f", 23)]).await;
    let history = driver.state().history();
    assert_eq!(history.completed, 3);
    assert_eq!(
        history.rolled_back, 0,
        "the blocked removal waited; nothing was rolled back"
    );
    assert_eq!(
        history.last.as_ref().map(|l| &l.result),
        Some(&AttemptResult::Completed)
    );
}

/// The admin-socket probe the quorum watches use tells a quorum from none: with a, b and c
/// up it names all three; with b and c stopped, a alone cannot form one, and the probe says so
/// (with a's state). Like every client, it learns of the loss when the leader does: a leader
/// notices dead peons when their lease acknowledgements time out (10 s by default in Ceph),
/// then the election allowance (3 s here) passes; the test waits up to 60 s for that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_admin_socket_probe_sees_the_quorum_and_its_loss() {
    let c = Cluster::start(66).await;
    let probe = c
        .cluster
        .quorum_probe()
        .election_allowance(Duration::from_secs(3));
    let status = mon_failover_io::QuorumProbe::quorum_status(&probe)
        .await
        .unwrap();
    assert_eq!(status.quorum_names, ["a", "b", "c"]);
    assert_eq!(status.monmap.mons.len(), 3);
    assert!(status.quorum_leader_name.is_some(), "{status:?}");
    c.runtime.stop(&id("b")).await.unwrap();
    c.runtime.stop(&id("c")).await.unwrap();
    let watch = QuorumWatch::start(Arc::new(probe.clone()), Duration::from_secs(1));
    let deadline = tokio::time::Instant::now() + Duration::from_secs(60);
    let error = loop {
        match mon_failover_io::QuorumProbe::quorum_status(&probe).await {
            Err(error) => break error.to_string(),
            Ok(status) => assert!(
                tokio::time::Instant::now() < deadline,
                "a quorum is still reported 60 s after b and c stopped: {status:?}"
            ),
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    };
    assert!(
        error.contains("no mon in a quorum") && error.contains("mon.a "),
        "{error}"
    );
    let record = watch.stop().await;
    assert!(!record.never_lost(), "{record:?}");
    assert!(
        record
            .losses
            .iter()
            .any(|(_, why)| why.contains("no mon in a quorum")),
        "{record:?}"
    );
}

/// A mon that cannot start (here its store is corrupt) is reported at once, with the reason
/// from its log, instead of a quorum wait that runs out.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_mon_that_exits_at_start_is_reported_with_its_logs_reason() {
    require_ceph();
    let _serial = ONE_CLUSTER_AT_A_TIME.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let a = (id("a"), ip(65, 11));
    let cluster = LocalCluster::create(
        dir.path().join("ceph"),
        "6d2f3e1a-0000-4000-8000-000000000065",
        std::slice::from_ref(&a),
    )
    .await
    .unwrap();
    // The mon exits at once, its reason still queued for its log thread: the cluster's
    // configuration makes the exit flush the log.
    let flush_on_exit = std::process::Command::new("ceph-mon")
        .arg("-c")
        .arg(cluster.conf())
        .args(["-i", "a", "--show-config-value", "log_flush_on_exit"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&flush_on_exit.stdout).trim(),
        "true",
        "{flush_on_exit:?}"
    );
    std::fs::write(
        cluster.mon_data(&a.0).join("store.db").join("CURRENT"),
        "not a manifest\n",
    )
    .unwrap();
    let runtime = LocalMonRuntime::new(
        cluster.clone(),
        Arc::new(
            EndpointTable::new().with_mons_at(Addressing::ClusterLocal, std::slice::from_ref(&a)),
        ),
        cluster.admin(None).timeout(Duration::from_secs(5)),
    );
    let admin = cluster.admin(None).timeout(Duration::from_secs(5));
    runtime.start(&a.0, a.1).await.unwrap();
    let error = runtime
        .wait_for_quorum(&admin, 1, Duration::from_secs(60))
        .await
        .unwrap_err();
    let ceph_local::QuorumWaitError::MonExited { exited } = &error else {
        panic!("the mon's exit is the error, not a timeout: {error}");
    };
    assert_eq!(exited.len(), 1, "{error}");
    assert_eq!(exited[0].mon, a.0);
    assert!(!exited[0].status.success(), "{error}");
    let log =
        String::from_utf8_lossy(&std::fs::read(&exited[0].log).unwrap_or_default()).into_owned();
    let lines: Vec<&str> = log.lines().collect();
    let log = lines[lines.len().saturating_sub(15)..].join("\n");
    assert!(
        !exited[0].errors.is_empty() && error.to_string().contains(&exited[0].errors[0]),
        "the reason from the log is in the error: {error}\nthe log ends with:\n{log}"
    );
    assert!(
        error.to_string().contains("ceph-mon.a.log"),
        "the error names the log: {error}"
    );
}

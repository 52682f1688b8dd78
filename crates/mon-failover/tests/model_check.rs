#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! Exhaustive model check of the mon failover machine, for 3 and 5 mons.
//!
//! The real `Machine::step` runs against a model of Ceph and the mon runtime. A breadth-first
//! search explores every interleaving of:
//!
//! - driver ticks (observe, step, persist, execute) where each tick may end normally, or crash
//!   before its commands run, or crash after they ran (their outcomes lost), and where one
//!   command in the whole run may fail;
//! - new mons being admitted to the monmap and finishing their sync, at any moment;
//! - an address that is still pending or becomes ready;
//! - one mon killed and revived at any moment (one kill per run);
//! - MCS disabled at any moment (one flip per run);
//! - time jumping to the machine's next deadline (a bounded number of times).
//!
//! In every reachable state it checks the invariants of the issue; from every reachable state it
//! then runs a fair continuation (no more faults, joins happen, time passes) and checks that the
//! system converges: every mon on the right address, in quorum, the original number of mons,
//! nothing left over. Crashes are modelled exactly: the driver persists the state of a step
//! before executing its commands, so a restarted driver has the stored state and no outcomes.

use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashSet, VecDeque};
use std::hash::{Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr};
use std::time::Duration;

use ceph_address_plan::MonId;
use mon_failover::quorum::{join_keeps_majority, majority, removal_keeps_majority};
use mon_failover::{
    Addressing, ClusterView, Command, CommandOutcome, Config, Machine, MachineState, Observation,
    ObservedMon, Placement, Timestamp,
};

/// An address: its kind and a slot number.
type Addr = (Addressing, u8);

fn ip((kind, slot): Addr) -> IpAddr {
    match kind {
        Addressing::ClusterLocal => IpAddr::V4(Ipv4Addr::new(10, 0, 0, slot)),
        Addressing::Clusterset => IpAddr::V4(Ipv4Addr::new(242, 0, 0, slot)),
    }
}

fn addr_of(ip: IpAddr) -> Addr {
    match ip {
        IpAddr::V4(v4) if v4.octets()[0] == 10 => (Addressing::ClusterLocal, v4.octets()[3]),
        IpAddr::V4(v4) => (Addressing::Clusterset, v4.octets()[3]),
        IpAddr::V6(_) => unreachable!("the model uses IPv4 only"),
    }
}

/// Mon ids the model can hold (indexes 0..MAX_IDS); far more than any explored run allocates.
const MAX_IDS: usize = 40;

fn index(id: &MonId) -> usize {
    let index = usize::try_from(id.index()).unwrap();
    assert!(
        index < MAX_IDS,
        "mon {id} is beyond the model's {MAX_IDS} ids: raise MAX_IDS"
    );
    index
}

fn mon_id(index: usize) -> MonId {
    MonId::from_index(u32::try_from(index).unwrap())
}

/// A map from mon id to address without allocation (the model clones and hashes millions of
/// worlds).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Slots([Option<Addr>; MAX_IDS]);

impl Slots {
    fn empty() -> Slots {
        Slots([None; MAX_IDS])
    }
    fn contains_key(&self, id: &MonId) -> bool {
        self.0[index(id)].is_some()
    }
    fn get(&self, id: &MonId) -> Option<&Addr> {
        self.0[index(id)].as_ref()
    }
    fn insert(&mut self, id: MonId, addr: Addr) {
        self.0[index(&id)] = Some(addr);
    }
    fn remove(&mut self, id: &MonId) {
        self.0[index(id)] = None;
    }
    fn iter(&self) -> impl Iterator<Item = (MonId, &Addr)> + '_ {
        self.0
            .iter()
            .enumerate()
            .filter_map(|(i, a)| a.as_ref().map(|a| (mon_id(i), a)))
    }
    fn keys(&self) -> impl Iterator<Item = MonId> + '_ {
        self.iter().map(|(id, _)| id)
    }
    fn values(&self) -> impl Iterator<Item = &Addr> + '_ {
        self.0.iter().flatten()
    }
    fn len(&self) -> usize {
        self.values().count()
    }
}

impl std::ops::Index<&MonId> for Slots {
    type Output = Addr;
    fn index(&self, id: &MonId) -> &Addr {
        self.get(id).unwrap()
    }
}

/// A set of mon ids as a bit mask.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
struct IdSet(u64);

impl IdSet {
    fn contains(&self, id: &MonId) -> bool {
        self.0 & (1 << index(id)) != 0
    }
    fn insert(&mut self, id: MonId) {
        self.0 |= 1 << index(&id);
    }
    fn remove(&mut self, id: &MonId) {
        self.0 &= !(1 << index(id));
    }
}

impl Extend<MonId> for IdSet {
    fn extend<I: IntoIterator<Item = MonId>>(&mut self, ids: I) {
        for id in ids {
            self.insert(id);
        }
    }
}

/// Ceph and the runtime, as the model sees them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct World {
    addressing: Addressing,
    /// The monmap.
    monmap: Slots,
    /// Monmap members that finished synchronizing (they can be in quorum).
    synced: IdSet,
    /// Running mon daemons and the address they advertise.
    running: Slots,
    /// Daemons killed by the environment (they can be revived).
    killed: Slots,
    /// What the runtime holds per mon (address, data, Service, export).
    objects: Slots,
    /// Every id that ever had runtime objects.
    ever: IdSet,
    now_ms: u64,
    kills_left: u8,
    flips_left: u8,
    jumps_left: u8,
    failures_left: u8,
}

impl World {
    fn new(mons: usize) -> World {
        let mut monmap = Slots::empty();
        let mut all = IdSet::default();
        for index in 0..mons {
            let slot = u8::try_from(index + 1).unwrap();
            monmap.insert(mon_id(index), (Addressing::ClusterLocal, slot));
            all.insert(mon_id(index));
        }
        World {
            addressing: Addressing::Clusterset,
            synced: all,
            running: monmap,
            killed: Slots::empty(),
            objects: monmap,
            ever: all,
            monmap,
            now_ms: 1_000_000,
            kills_left: 1,
            flips_left: 1,
            jumps_left: 0,
            failures_left: 1,
        }
    }

    /// The quorum, if there is one: synced, running monmap members, when they are a majority.
    fn quorum(&self) -> Option<BTreeSet<MonId>> {
        let members: BTreeSet<MonId> = self
            .monmap
            .keys()
            .filter(|id| self.synced.contains(id) && self.running.contains_key(id))
            .collect();
        (members.len() >= majority(self.monmap.len())).then_some(members)
    }

    fn observe(&self, outcomes: Vec<CommandOutcome>) -> Observation {
        let cluster = match self.quorum() {
            None => ClusterView::Unreachable {
                reason: "no quorum".into(),
            },
            Some(quorum) => ClusterView::reachable(self.monmap.iter().map(|(id, addr)| {
                let placement = if addr.0 == self.addressing {
                    Placement::Placed
                } else {
                    Placement::Misplaced
                };
                let mon = ObservedMon {
                    address: ip(*addr),
                    in_quorum: quorum.contains(&id),
                    placement,
                };
                (id, mon)
            })),
        };
        Observation {
            addressing: self.addressing,
            cluster,
            outcomes,
        }
    }

    fn free_slot(&self, kind: Addressing) -> u8 {
        let used: BTreeSet<u8> = self
            .objects
            .values()
            .chain(self.monmap.values())
            .filter(|(k, _)| *k == kind)
            .map(|(_, slot)| *slot)
            .collect();
        (1..).find(|slot| !used.contains(slot)).unwrap()
    }

    /// Executes one command; `Err` is an invariant violation.
    fn execute(
        &mut self,
        command: &Command,
        state: &MachineState,
        address_ready: bool,
    ) -> Result<CommandOutcome, String> {
        let migration = state.migration();
        let is_old_or_new =
            |mon: &MonId| migration.is_some_and(|m| m.old() == mon || m.new_mon() == mon);
        match command {
            Command::ProvisionAddress { mon, addressing } => {
                if !self.objects.contains_key(mon) {
                    if self.ever.contains(mon) || self.monmap.contains_key(mon) {
                        return Err(format!("id {mon} reused"));
                    }
                    let slot = self.free_slot(*addressing);
                    self.objects.insert(mon.clone(), (*addressing, slot));
                    self.ever.insert(mon.clone());
                }
                if address_ready {
                    Ok(CommandOutcome::AddressReady {
                        mon: mon.clone(),
                        address: ip(self.objects[mon]),
                    })
                } else {
                    Ok(CommandOutcome::AddressPending { mon: mon.clone() })
                }
            }
            Command::StartMon { mon, address } => {
                let Some(provisioned) = self.objects.get(mon) else {
                    return Err(format!(
                        "{mon} started without its address provisioned (or after deletion)"
                    ));
                };
                if ip(*provisioned) != *address {
                    return Err(format!(
                        "{mon} started at {address}, provisioned {provisioned:?}"
                    ));
                }
                if !self.monmap.contains_key(mon) {
                    let in_quorum = self.quorum().map_or(0, |q| q.len());
                    if !join_keeps_majority(self.monmap.len(), in_quorum) {
                        return Err(format!(
                            "{mon} started while {in_quorum} of {} mons are in quorum: its join would leave no majority",
                            self.monmap.len()
                        ));
                    }
                }
                self.killed.remove(mon);
                self.running.insert(mon.clone(), addr_of(*address));
                Ok(CommandOutcome::Done(command.clone()))
            }
            Command::RemoveFromMonmap { mon } => {
                let Some(quorum) = self.quorum() else {
                    return Ok(CommandOutcome::Failed {
                        command: command.clone(),
                        error: "no quorum".into(),
                    });
                };
                if self.monmap.contains_key(mon) {
                    if !is_old_or_new(mon) {
                        return Err(format!(
                            "{mon} removed but it is neither the old nor the new mon of {migration:?}"
                        ));
                    }
                    if !removal_keeps_majority(
                        self.monmap.len(),
                        quorum.len(),
                        quorum.contains(mon),
                    ) {
                        return Err(format!(
                            "removing {mon} leaves no majority: {quorum:?} of {:?}",
                            self.monmap
                        ));
                    }
                    self.monmap.remove(mon);
                    self.synced.remove(mon);
                    // A mon removed from the monmap shuts itself down.
                    self.running.remove(mon);
                }
                Ok(CommandOutcome::Done(command.clone()))
            }
            Command::DeleteMon { mon } => {
                if !is_old_or_new(mon) {
                    return Err(format!(
                        "{mon} deleted but it is neither the old nor the new mon"
                    ));
                }
                self.running.remove(mon);
                self.killed.remove(mon);
                self.objects.remove(mon);
                Ok(CommandOutcome::Done(command.clone()))
            }
        }
    }

    fn check(&self, mons: usize, state: &MachineState) -> Result<(), String> {
        let everything: BTreeSet<MonId> = self
            .monmap
            .keys()
            .chain(self.objects.keys())
            .chain(self.running.keys())
            .collect();
        if everything.len() > mons + 1 {
            return Err(format!("more than one migration in flight: {everything:?}"));
        }
        if self.monmap.len() + 1 < mons {
            return Err(format!("monmap shrank to {:?}", self.monmap));
        }
        if self.kills_left > 0 && self.quorum().is_none() {
            return Err("quorum lost without any mon failure".into());
        }
        if let Some(m) = state.migration() {
            // The new id was never used by anything else: it has objects only as this new mon.
            if self.ever.contains(m.new_mon())
                && !self.objects.contains_key(m.new_mon())
                && !self.monmap.contains_key(m.new_mon())
            {
                // Allowed only during a rollback that already deleted it.
                if !matches!(
                    m.phase(),
                    mon_failover::Phase::RollingBack { .. } | mon_failover::Phase::AwaitingRetry
                ) {
                    return Err(format!(
                        "new mon {} was deleted outside a rollback",
                        m.new_mon()
                    ));
                }
            }
        }
        Ok(())
    }

    /// Settled: every mon on the right kind of address, in quorum, `mons` of them, nothing else.
    fn converged(&self, mons: usize, state: &MachineState) -> bool {
        let quorum = self.quorum().unwrap_or_default();
        state.migration().is_none()
            && self.monmap.len() == mons
            && self.monmap.values().all(|addr| addr.0 == self.addressing)
            && self.monmap.keys().all(|id| quorum.contains(&id))
            && self.objects.keys().eq(self.monmap.keys())
            && self.running.keys().eq(self.monmap.keys())
    }
}

/// One explored node: Ceph and runtime, the persisted machine state, and the outcomes the
/// running driver holds for its next observation.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
struct Node {
    world: World,
    state: MachineState,
    outcomes: Vec<CommandOutcome>,
}

fn config() -> Config {
    Config {
        address_timeout: Duration::from_secs(10),
        join_timeout: Duration::from_secs(20),
        removal_wait_timeout: Duration::from_secs(30),
        mon_out_timeout: Some(Duration::from_secs(40)),
        retry_backoff: Duration::from_secs(5),
        max_retry_backoff: Duration::from_secs(20),
    }
}

/// The earliest instant after `now` at which the machine would act differently.
fn next_deadline(state: &MachineState, config: &Config, now: u64) -> Option<u64> {
    let mut deadlines = Vec::new();
    if let Some(at) = state.next_attempt_at() {
        deadlines.push(at);
    }
    if let Some(timeout) = config.mon_out_timeout {
        deadlines.extend(
            state
                .out_of_quorum_since()
                .values()
                .map(|since| *since + timeout),
        );
    }
    if let Some(m) = state.migration() {
        let timeout = match m.phase() {
            mon_failover::Phase::ProvisioningAddress => Some(config.address_timeout),
            mon_failover::Phase::Joining { .. } => Some(config.join_timeout),
            mon_failover::Phase::WaitingToRemoveOld => Some(config.removal_wait_timeout),
            _ => None,
        };
        if let Some(timeout) = timeout {
            deadlines.push(m.phase_since() + timeout);
        }
    }
    deadlines
        .into_iter()
        .map(Timestamp::as_millis)
        .filter(|at| *at > now)
        .min()
}

/// How a tick ends.
#[derive(Debug, Clone, Copy)]
enum TickEnd {
    /// The commands ran and the driver keeps their outcomes.
    Normal,
    /// The driver crashed after persisting, before running the commands.
    CrashBeforeCommands,
    /// The driver crashed after running the commands: their outcomes are lost.
    CrashAfterCommands,
}

/// The step of a driver tick: observe and step (the result is persisted before any command
/// runs). Returns the violated invariant, if any.
fn plan(machine: &Machine, node: &Node) -> Result<(MachineState, Vec<Command>), String> {
    let observation = node.world.observe(node.outcomes.clone());
    let now = Timestamp::from_millis(node.world.now_ms);
    let (state, commands) = machine.step(&node.state, &observation, now);
    if let ClusterView::Reachable { mons } = &observation.cluster {
        for command in &commands {
            if let Command::RemoveFromMonmap { mon } = command
                && !mons.contains_key(mon)
            {
                return Err(format!(
                    "removal of {mon}, which the observation shows gone"
                ));
            }
        }
    } else if !commands.is_empty() {
        return Err(format!("commands while Ceph is unreachable: {commands:?}"));
    }
    Ok((state, commands))
}

/// The rest of a driver tick: run the planned commands. `fail` names the command that fails
/// (if any) and `address_ready` decides a provisioning's result.
fn run(
    node: &Node,
    state: &MachineState,
    commands: &[Command],
    end: TickEnd,
    fail: Option<usize>,
    address_ready: bool,
) -> Result<Node, String> {
    let mut world = node.world;
    let mut outcomes = Vec::new();
    if !matches!(end, TickEnd::CrashBeforeCommands) {
        for (index, command) in commands.iter().enumerate() {
            if fail == Some(index) {
                world.failures_left -= 1;
                outcomes.push(CommandOutcome::Failed {
                    command: command.clone(),
                    error: "injected failure".into(),
                });
                continue;
            }
            outcomes.push(world.execute(command, state, address_ready)?);
        }
    }
    if matches!(
        end,
        TickEnd::CrashAfterCommands | TickEnd::CrashBeforeCommands
    ) {
        outcomes.clear();
    }
    Ok(Node {
        world,
        state: state.clone(),
        outcomes,
    })
}

/// A whole tick that ends normally, with no failure and addresses ready.
fn tick(machine: &Machine, node: &Node) -> Result<(Node, usize), String> {
    let (state, commands) = plan(machine, node)?;
    let next = run(node, &state, &commands, TickEnd::Normal, None, true)?;
    Ok((next, commands.len()))
}

/// Every successor of a node.
fn successors(machine: &Machine, node: &Node) -> Result<Vec<Node>, String> {
    let mut next = Vec::new();
    // Driver ticks.
    let (state, commands) = plan(machine, node)?;
    let provisions = commands
        .iter()
        .any(|c| matches!(c, Command::ProvisionAddress { .. }));
    for end in [
        TickEnd::Normal,
        TickEnd::CrashBeforeCommands,
        TickEnd::CrashAfterCommands,
    ] {
        let readiness: &[bool] = if provisions { &[true, false] } else { &[true] };
        for &address_ready in readiness {
            let mut fails = vec![None];
            if node.world.failures_left > 0 && !matches!(end, TickEnd::CrashBeforeCommands) {
                fails.extend((0..commands.len()).map(Some));
            }
            for fail in fails {
                next.push(run(node, &state, &commands, end, fail, address_ready)?);
            }
        }
    }
    let world = &node.world;
    let with = |change: &dyn Fn(&mut World)| {
        let mut n = node.clone();
        change(&mut n.world);
        n
    };
    // A running daemon outside the monmap is admitted (the quorum adds it).
    if world.quorum().is_some() {
        for (id, addr) in world.running.iter() {
            if !world.monmap.contains_key(&id) {
                let addr = *addr;
                next.push(with(&move |w| {
                    w.monmap.insert(id.clone(), addr);
                }));
            }
        }
    }
    // An admitted mon finishes its sync.
    for id in world.monmap.keys() {
        if world.running.contains_key(&id) && !world.synced.contains(&id) {
            next.push(with(&move |w| {
                w.synced.insert(id.clone());
            }));
        }
    }
    // One mon is killed, and may come back.
    if world.kills_left > 0 {
        for (id, addr) in world.running.iter() {
            if world.monmap.contains_key(&id) {
                let addr = *addr;
                next.push(with(&move |w| {
                    w.kills_left -= 1;
                    w.running.remove(&id);
                    w.killed.insert(id.clone(), addr);
                }));
            }
        }
    }
    for (id, addr) in world.killed.iter() {
        if world.monmap.contains_key(&id) && world.objects.contains_key(&id) {
            let addr = *addr;
            next.push(with(&move |w| {
                w.killed.remove(&id);
                w.running.insert(id.clone(), addr);
            }));
        }
    }
    // MCS disabled.
    if world.flips_left > 0 {
        next.push(with(&|w| {
            w.flips_left -= 1;
            w.addressing = Addressing::ClusterLocal;
        }));
    }
    // Time jumps to the next deadline.
    if world.jumps_left > 0
        && let Some(at) = next_deadline(&node.state, machine.config(), world.now_ms)
    {
        next.push(with(&move |w| {
            w.jumps_left -= 1;
            w.now_ms = at;
        }));
    }
    Ok(next)
}

/// From `node`, no more faults: killed mons come back (or, with `revive` false, stay dead and
/// are failed over), joins complete, addresses are ready, time passes when nothing else
/// happens. Returns an error unless the system converges.
fn converge(
    machine: &Machine,
    node: &Node,
    mons: usize,
    revive: bool,
    known_to_converge: &mut HashSet<u64>,
) -> Result<(), String> {
    let mut node = node.clone();
    node.world.failures_left = 0;
    let mut path = Vec::new();
    for _ in 0..400 {
        let print = fingerprint(&node);
        if known_to_converge.contains(&print) {
            known_to_converge.extend(path);
            return Ok(());
        }
        path.push(print);
        if revive {
            let killed: Vec<(MonId, Addr)> =
                node.world.killed.iter().map(|(k, v)| (k, *v)).collect();
            for (id, addr) in killed {
                if node.world.monmap.contains_key(&id) && node.world.objects.contains_key(&id) {
                    node.world.killed.remove(&id);
                    node.world.running.insert(id, addr);
                }
            }
        }
        if node.world.quorum().is_some() {
            let joiners: Vec<(MonId, Addr)> = node
                .world
                .running
                .iter()
                .filter(|(id, _)| !node.world.monmap.contains_key(id))
                .map(|(k, v)| (k, *v))
                .collect();
            for (id, addr) in joiners {
                node.world.monmap.insert(id, addr);
            }
        }
        let syncing: Vec<MonId> = node
            .world
            .monmap
            .keys()
            .filter(|id| node.world.running.contains_key(id))
            .collect();
        node.world.synced.extend(syncing);
        if node.world.converged(mons, &node.state) {
            known_to_converge.extend(path);
            return Ok(());
        }
        let (next, commands) = tick(machine, &node)?;
        next.world.check(mons, &next.state)?;
        let idle = commands == 0 && next.state == node.state && next.outcomes.is_empty();
        node = next;
        if idle {
            match next_deadline(&node.state, machine.config(), node.world.now_ms) {
                Some(at) => node.world.now_ms = at,
                None => node.world.now_ms += 1_000,
            }
        }
    }
    Err(format!(
        "no convergence (revive: {revive}); machine: {}; world: {:?}",
        node.state, node.world
    ))
}

struct Report {
    states: usize,
    transitions: usize,
    convergence_checks: usize,
}

fn fingerprint(node: &Node) -> u64 {
    let mut hasher = DefaultHasher::new();
    node.hash(&mut hasher);
    hasher.finish()
}

/// Explores every state reachable from `mons` healthy misplaced mons with `jumps` time jumps,
/// checking invariants everywhere and convergence from every `converge_every`-th state.
fn explore(mons: usize, jumps: u8, converge_every: usize) -> Report {
    let machine = Machine::new(config()).unwrap();
    let mut world = World::new(mons);
    world.jumps_left = jumps;
    let start = Node {
        world,
        state: MachineState::new(Some(u32::try_from(mons - 1).unwrap())),
        outcomes: Vec::new(),
    };
    let mut seen = HashSet::from([fingerprint(&start)]);
    let mut converging = [HashSet::new(), HashSet::new()];
    let mut queue = VecDeque::from([start]);
    let mut report = Report {
        states: 0,
        transitions: 0,
        convergence_checks: 0,
    };
    while let Some(node) = queue.pop_front() {
        report.states += 1;
        if std::env::var_os("MODEL_PROGRESS").is_some() && report.states.is_multiple_of(100_000) {
            eprintln!(
                "{mons} mons: {} states, queue {}",
                report.states,
                queue.len()
            );
        }
        if let Err(violation) = node.world.check(mons, &node.state) {
            panic!(
                "invariant violated: {violation}\nmachine: {}\nnode: {node:#?}",
                node.state
            );
        }
        if report.states.is_multiple_of(converge_every) {
            report.convergence_checks += 1;
            for (revive, known) in [true, false].into_iter().zip(&mut converging) {
                if let Err(e) = converge(&machine, &node, mons, revive, known) {
                    panic!("{e}\nfrom: {node:#?}");
                }
            }
        }
        let next = successors(&machine, &node)
            .unwrap_or_else(|violation| panic!("invariant violated: {violation}\nfrom: {node:#?}"));
        for successor in next {
            report.transitions += 1;
            if seen.insert(fingerprint(&successor)) {
                queue.push_back(successor);
            }
        }
    }
    report
}

#[test]
fn three_mons_every_interleaving_of_observations_faults_and_crashes() {
    let jumps = std::env::var("MODEL_JUMPS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(3);
    let every = std::env::var("MODEL_CONVERGE_EVERY")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(1);
    let report = explore(3, jumps, every);
    eprintln!(
        "3 mons: {} states, {} transitions, {} convergence checks",
        report.states, report.transitions, report.convergence_checks
    );
    assert!(report.states > 1000, "the search explored the space");
}

#[test]
fn five_mons_every_interleaving_of_observations_faults_and_crashes() {
    let jumps = std::env::var("MODEL_JUMPS")
        .ok()
        .and_then(|j| j.parse().ok())
        .unwrap_or(2);
    let report = explore(5, jumps, 1);
    eprintln!(
        "5 mons: {} states, {} transitions, {} convergence checks",
        report.states, report.transitions, report.convergence_checks
    );
    assert!(report.states > 1000, "the search explored the space");
}

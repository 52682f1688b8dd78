//! Table tests of the transition function, one path or invariant each. The exhaustive model
//! check over every interleaving is `tests/model_check.rs`.

use std::time::Duration;

use super::*;
use Placement::{Misplaced, Placed};

fn id(s: &str) -> MonId {
    s.parse().unwrap()
}

fn ip(s: &str) -> IpAddr {
    s.parse().unwrap()
}

fn t(secs: u64) -> Timestamp {
    Timestamp::from_millis(secs * 1000)
}

/// `(id, address, in quorum, placement)`
type Row<'a> = (&'a str, &'a str, bool, Placement);

fn observe(addressing: Addressing, rows: &[Row<'_>]) -> Observation {
    Observation::reachable(
        addressing,
        rows.iter().map(|(m, address, in_quorum, placement)| {
            (
                id(m),
                ObservedMon {
                    address: ip(address),
                    in_quorum: *in_quorum,
                    placement: *placement,
                },
            )
        }),
    )
}

fn global(rows: &[Row<'_>]) -> Observation {
    observe(Addressing::Clusterset, rows)
}

fn config() -> Config {
    Config {
        address_timeout: Duration::from_secs(60),
        join_timeout: Duration::from_secs(120),
        removal_wait_timeout: Duration::from_secs(300),
        mon_out_timeout: Some(Duration::from_secs(600)),
        retry_backoff: Duration::from_secs(30),
        max_retry_backoff: Duration::from_secs(240),
    }
}

fn machine() -> Machine {
    Machine::new(config()).unwrap()
}

fn done(c: Command) -> CommandOutcome {
    CommandOutcome::Done(c)
}

fn provision(m: &str) -> Command {
    Command::ProvisionAddress {
        mon: id(m),
        addressing: Addressing::Clusterset,
    }
}

fn start(m: &str, address: &str) -> Command {
    Command::StartMon {
        mon: id(m),
        address: ip(address),
    }
}

fn remove(m: &str) -> Command {
    Command::RemoveFromMonmap { mon: id(m) }
}

fn delete(m: &str) -> Command {
    Command::DeleteMon { mon: id(m) }
}

fn ready(m: &str, address: &str) -> CommandOutcome {
    CommandOutcome::AddressReady {
        mon: id(m),
        address: ip(address),
    }
}

fn phase(state: &MachineState) -> Option<&Phase> {
    state.migration().map(Migration::phase)
}

/// Three mons on cluster IPs, all in quorum, MCS just enabled.
const ABC: [Row<'static>; 3] = [
    ("a", "10.0.0.1", true, Misplaced),
    ("b", "10.0.0.2", true, Misplaced),
    ("c", "10.0.0.3", true, Misplaced),
];

/// Runs a migration of `a` to `d` (242.0.0.4) up to the point where d is in quorum and the
/// removal of a is issued; returns that state.
fn a_to_d_until_removal(m: &Machine) -> MachineState {
    let (s, cmds) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    assert_eq!(cmds, [provision("d")]);
    let (s, cmds) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(1),
    );
    assert_eq!(cmds, [start("d", "242.0.0.4")]);
    let (s, cmds) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![done(start("d", "242.0.0.4"))]),
        t(2),
    );
    assert!(cmds.is_empty(), "waits for d to join: {cmds:?}");
    assert_eq!(phase(&s), Some(&Phase::Joining { started: true }));
    let joined = [ABC[0], ABC[1], ABC[2], ("d", "242.0.0.4", true, Placed)];
    let (s, cmds) = m.step(&s, &global(&joined), t(5));
    assert_eq!(cmds, [remove("a")]);
    s
}

#[test]
fn moves_misplaced_mons_one_at_a_time_in_id_order_with_new_rook_ids() {
    let m = machine();
    let s = a_to_d_until_removal(&m);
    let after_a = [
        ("b", "10.0.0.2", true, Misplaced),
        ("c", "10.0.0.3", true, Misplaced),
        ("d", "242.0.0.4", true, Placed),
    ];
    let (s, cmds) = m.step(
        &s,
        &global(&after_a).with_outcomes(vec![done(remove("a"))]),
        t(6),
    );
    assert_eq!(cmds, [delete("a")]);
    // Deleting a completes the migration and starts b's in the same step.
    let (s, cmds) = m.step(
        &s,
        &global(&after_a).with_outcomes(vec![done(delete("a"))]),
        t(7),
    );
    assert_eq!(cmds, [provision("e")]);
    assert_eq!(s.history().completed, 1);
    let migration = s.migration().unwrap();
    assert_eq!((migration.old(), migration.new_mon()), (&id("b"), &id("e")));
    assert_eq!(s.max_mon_id(), Some(4));
}

#[test]
fn the_old_mon_is_removed_only_after_the_new_one_is_in_quorum() {
    let m = machine();
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(1),
    );
    let (mut s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![done(start("d", "242.0.0.4"))]),
        t(2),
    );
    // d is in the monmap (synchronizing) but not in quorum yet: no removal.
    let syncing = [ABC[0], ABC[1], ABC[2], ("d", "242.0.0.4", false, Placed)];
    for second in 3..60 {
        let (next, cmds) = m.step(&s, &global(&syncing), t(second));
        assert!(cmds.is_empty(), "at {second}s: {cmds:?}");
        s = next;
    }
}

#[test]
fn nothing_starts_while_a_mon_is_out_of_quorum() {
    let m = machine();
    let rows = [ABC[0], ("b", "10.0.0.2", false, Misplaced), ABC[2]];
    let (s, cmds) = m.step(&MachineState::new(Some(2)), &global(&rows), t(0));
    assert!(cmds.is_empty());
    assert!(s.migration().is_none());
    assert_eq!(
        s.blocked(),
        Some(&Blocker::MonsOutOfQuorum {
            mons: [id("b")].into()
        })
    );
    assert_eq!(s.max_mon_id(), Some(2), "no id allocated while blocked");
}

#[test]
fn a_mon_lost_mid_migration_blocks_the_removal_until_quorum_is_back() {
    let m = machine();
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(1),
    );
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![done(start("d", "242.0.0.4"))]),
        t(2),
    );
    // d joins while b is down.
    let b_down = [
        ABC[0],
        ("b", "10.0.0.2", false, Misplaced),
        ABC[2],
        ("d", "242.0.0.4", true, Placed),
    ];
    let (mut s, cmds) = m.step(&s, &global(&b_down), t(10));
    assert!(cmds.is_empty(), "{cmds:?}");
    assert_eq!(phase(&s), Some(&Phase::WaitingToRemoveOld));
    assert_eq!(
        s.blocked(),
        Some(&Blocker::MonsOutOfQuorum {
            mons: [id("b")].into()
        })
    );
    for second in 11..200 {
        let (next, cmds) = m.step(&s, &global(&b_down), t(second));
        assert!(cmds.is_empty(), "no removal while b is down: {cmds:?}");
        s = next;
    }
    let b_back = [ABC[0], ABC[1], ABC[2], ("d", "242.0.0.4", true, Placed)];
    let (_, cmds) = m.step(&s, &global(&b_back), t(200));
    assert_eq!(cmds, [remove("a")]);
}

#[test]
fn waiting_to_remove_too_long_rolls_back_the_new_mon() {
    let m = machine();
    let s = a_to_d_until_removal(&m);
    let b_down = [
        ABC[0],
        ("b", "10.0.0.2", false, Misplaced),
        ABC[2],
        ("d", "242.0.0.4", true, Placed),
    ];
    let _ = s;
    // b died before d joined: the migration waits in WaitingToRemoveOld, for a bounded time.
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(1),
    );
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![done(start("d", "242.0.0.4"))]),
        t(2),
    );
    let (s, cmds) = m.step(&s, &global(&b_down), t(3));
    assert!(cmds.is_empty());
    assert_eq!(phase(&s), Some(&Phase::WaitingToRemoveOld));
    let (s, cmds) = m.step(&s, &global(&b_down), t(3 + 299));
    assert!(cmds.is_empty());
    let (s, cmds) = m.step(&s, &global(&b_down), t(3 + 300));
    // d is in the monmap and in quorum: it leaves the monmap first (3 of 3 stay a majority
    // minus b: a, c in quorum of a, b, c), then it is deleted.
    assert_eq!(cmds, [remove("d")]);
    let without_d = [ABC[0], ("b", "10.0.0.2", false, Misplaced), ABC[2]];
    let (s, cmds) = m.step(
        &s,
        &global(&without_d).with_outcomes(vec![done(remove("d"))]),
        t(304),
    );
    assert_eq!(cmds, [delete("d")]);
    let (s, cmds) = m.step(
        &s,
        &global(&without_d).with_outcomes(vec![done(delete("d"))]),
        t(305),
    );
    assert!(cmds.is_empty());
    assert!(s.migration().is_none());
    assert_eq!(
        s.history().last.as_ref().map(|l| &l.result),
        Some(&AttemptResult::RolledBack {
            cause: RollbackCause::RemovalWaitTimeout
        })
    );
}

#[test]
fn a_new_mon_that_never_joins_is_rolled_back_at_the_join_timeout_and_its_id_is_not_reused() {
    let m = machine();
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(1),
    );
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![done(start("d", "242.0.0.4"))]),
        t(2),
    );
    // The join timeout counts from entering Joining at t=1.
    let (s, cmds) = m.step(&s, &global(&ABC), t(120));
    assert!(cmds.is_empty());
    let (s, cmds) = m.step(&s, &global(&ABC), t(121));
    assert_eq!(
        cmds,
        [delete("d")],
        "d never reached the monmap: only deleted"
    );
    let (s, cmds) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![done(delete("d"))]),
        t(122),
    );
    assert!(cmds.is_empty());
    assert!(s.migration().is_none());
    assert_eq!(s.history().rolled_back, 1);
    assert_eq!(s.blocked(), Some(&Blocker::Backoff { until: t(152) }));
    // Backoff, then a new attempt with the next id: d is burned.
    let (s, cmds) = m.step(&s, &global(&ABC), t(151));
    assert!(cmds.is_empty());
    let (s, cmds) = m.step(&s, &global(&ABC), t(152));
    assert_eq!(cmds, [provision("e")]);
    assert_eq!(s.migration().unwrap().old(), &id("a"));
}

#[test]
fn backoff_doubles_with_failures_in_a_row_and_resets_on_success() {
    let m = machine();
    let mut s = MachineState::new(Some(2));
    let mut now = 0;
    for (attempt, wait) in [(1u32, 30u64), (2, 60), (3, 120), (4, 240), (5, 240)] {
        let (next, cmds) = m.step(&s, &global(&ABC), t(now));
        assert_eq!(cmds.len(), 1, "attempt {attempt}: {cmds:?}");
        let new = cmds[0].mon().clone();
        now += 61; // address timeout
        let (next, cmds) = m.step(&next, &global(&ABC), t(now));
        assert_eq!(cmds, [Command::DeleteMon { mon: new.clone() }]);
        let (next, _) = m.step(
            &next,
            &global(&ABC).with_outcomes(vec![done(cmds[0].clone())]),
            t(now),
        );
        assert_eq!(next.failures_in_a_row(), attempt);
        assert_eq!(
            next.next_attempt_at(),
            Some(t(now + wait)),
            "attempt {attempt}"
        );
        now += wait;
        s = next;
    }
}

#[test]
fn address_timeout_rolls_back() {
    let m = machine();
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    let pending = CommandOutcome::AddressPending { mon: id("d") };
    let (s, cmds) = m.step(&s, &global(&ABC).with_outcomes(vec![pending]), t(59));
    assert_eq!(cmds, [provision("d")], "asks again while pending");
    let (_, cmds) = m.step(&s, &global(&ABC), t(60));
    assert_eq!(cmds, [delete("d")]);
}

#[test]
fn a_joined_new_mon_leaves_the_monmap_before_it_is_deleted_on_rollback() {
    let m = machine();
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(1),
    );
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![done(start("d", "242.0.0.4"))]),
        t(2),
    );
    // d got into the monmap but never into quorum; b is down too. Deleting d first would be
    // harmless here, but removing it first is what keeps a quorum when d *is* a member.
    let stuck = [ABC[0], ABC[1], ABC[2], ("d", "242.0.0.4", false, Placed)];
    let (s, cmds) = m.step(&s, &global(&stuck), t(200));
    assert_eq!(cmds, [remove("d")]);
    let (s, cmds) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![done(remove("d"))]),
        t(201),
    );
    assert_eq!(cmds, [delete("d")]);
    let (s, cmds) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![done(delete("d"))]),
        t(202),
    );
    assert!(cmds.is_empty());
    assert!(s.migration().is_none());
}

#[test]
fn rollback_never_removes_the_new_mon_when_that_would_lose_quorum() {
    let m = machine();
    // A remove-first failover of a: a left the monmap, d was started ...
    let bc = [
        ("b", "10.0.0.2", true, Placed),
        ("c", "10.0.0.3", true, Placed),
    ];
    let abc = [("a", "10.0.0.1", false, Placed), bc[0], bc[1]];
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&abc), t(0));
    let (s, _) = m.step(&s, &global(&abc), t(600));
    let (s, _) = m.step(
        &s,
        &global(&bc).with_outcomes(vec![done(remove("a"))]),
        t(601),
    );
    let (s, _) = m.step(
        &s,
        &global(&bc).with_outcomes(vec![done(delete("a"))]),
        t(602),
    );
    let (s, _) = m.step(
        &s,
        &global(&bc).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(603),
    );
    // ... and joined at a wrong address while c went down: b and d are the quorum (2 of 3).
    // Rolling d back means removing it, which would leave b alone of b, c: not allowed.
    let rows = [
        bc[0],
        ("c", "10.0.0.3", false, Placed),
        ("d", "10.1.1.1", true, Misplaced),
    ];
    let (s, cmds) = m.step(&s, &global(&rows), t(604));
    assert!(cmds.is_empty(), "{cmds:?}");
    assert!(matches!(
        phase(&s),
        Some(Phase::RollingBack {
            cause: RollbackCause::WrongAddress { .. },
            ..
        })
    ));
    assert_eq!(
        s.blocked(),
        Some(&Blocker::RemovalWouldLoseQuorum {
            mon: id("d"),
            monmap: 3,
            in_quorum: 2
        })
    );
    // Once c is back, d goes.
    let rows = [bc[0], bc[1], ("d", "10.1.1.1", true, Misplaced)];
    let (_, cmds) = m.step(&s, &global(&rows), t(605));
    assert_eq!(cmds, [remove("d")]);
}

#[test]
fn an_unreachable_cluster_freezes_everything_including_timeouts() {
    let m = machine();
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(1),
    );
    let unreachable = Observation {
        addressing: Addressing::Clusterset,
        cluster: ClusterView::Unreachable {
            reason: "timed out".into(),
        },
        outcomes: vec![],
    };
    let (frozen, cmds) = m.step(&s, &unreachable, t(10_000));
    assert!(cmds.is_empty());
    assert_eq!(frozen.migration(), s.migration());
    assert_eq!(
        frozen.blocked(),
        Some(&Blocker::CephUnreachable {
            reason: "timed out".into()
        })
    );
}

#[test]
fn a_mon_out_of_quorum_too_long_is_failed_over_removing_it_first_with_three_mons() {
    let m = machine();
    let placed = |n: &'static str, a: &'static str, q| (n, a, q, Placed);
    let rows = [
        placed("a", "10.0.0.1", false),
        placed("b", "10.0.0.2", true),
        placed("c", "10.0.0.3", true),
    ];
    let (s, cmds) = m.step(&MachineState::new(Some(2)), &global(&rows), t(0));
    assert!(cmds.is_empty());
    assert_eq!(s.out_of_quorum_since().get(&id("a")), Some(&t(0)));
    let (s, cmds) = m.step(&s, &global(&rows), t(599));
    assert!(cmds.is_empty());
    // After the timeout: 2 of 3 in quorum, so a fourth mon may not join first (2 of 4): the
    // dead mon leaves the monmap first.
    let (s, cmds) = m.step(&s, &global(&rows), t(600));
    assert_eq!(cmds, [remove("a")]);
    let migration = s.migration().unwrap();
    assert_eq!(
        (migration.order(), migration.reason()),
        (Order::RemoveFirst, Reason::OutOfQuorum)
    );
    let bc = [placed("b", "10.0.0.2", true), placed("c", "10.0.0.3", true)];
    let (s, cmds) = m.step(
        &s,
        &global(&bc).with_outcomes(vec![done(remove("a"))]),
        t(601),
    );
    assert_eq!(cmds, [delete("a")]);
    let (s, cmds) = m.step(
        &s,
        &global(&bc).with_outcomes(vec![done(delete("a"))]),
        t(602),
    );
    assert_eq!(cmds, [provision("d")]);
    let (s, cmds) = m.step(
        &s,
        &global(&bc).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(603),
    );
    assert_eq!(
        cmds,
        [start("d", "242.0.0.4")],
        "2 of 3 keep a majority while d joins"
    );
    let bcd = [bc[0], bc[1], placed("d", "242.0.0.4", true)];
    let (s, cmds) = m.step(&s, &global(&bcd), t(610));
    assert!(cmds.is_empty());
    assert!(s.migration().is_none());
    assert_eq!(s.history().completed, 1);
}

#[test]
fn with_five_mons_a_failover_adds_the_new_mon_first() {
    let m = machine();
    let rows = [
        ("a", "10.0.0.1", false, Placed),
        ("b", "10.0.0.2", true, Placed),
        ("c", "10.0.0.3", true, Placed),
        ("d", "10.0.0.4", true, Placed),
        ("e", "10.0.0.5", true, Placed),
    ];
    let (s, _) = m.step(&MachineState::new(Some(4)), &global(&rows), t(0));
    let (s, cmds) = m.step(&s, &global(&rows), t(600));
    assert_eq!(cmds, [provision("f")]);
    assert_eq!(s.migration().unwrap().order(), Order::AddFirst);
}

#[test]
fn failover_is_off_without_a_mon_out_timeout() {
    let m = Machine::new(Config {
        mon_out_timeout: None,
        ..config()
    })
    .unwrap();
    let rows = [
        ("a", "10.0.0.1", false, Placed),
        ("b", "10.0.0.2", true, Placed),
        ("c", "10.0.0.3", true, Placed),
    ];
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&rows), t(0));
    let (s, cmds) = m.step(&s, &global(&rows), t(1_000_000));
    assert!(cmds.is_empty());
    assert!(s.migration().is_none());
}

#[test]
fn a_failover_goes_on_even_if_the_old_mon_returns_once_its_removal_was_issued() {
    let m = machine();
    let rows = [
        ("a", "10.0.0.1", false, Placed),
        ("b", "10.0.0.2", true, Placed),
        ("c", "10.0.0.3", true, Placed),
    ];
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&rows), t(0));
    let (s, cmds) = m.step(&s, &global(&rows), t(600));
    assert_eq!(cmds, [remove("a")]);
    // The removal's outcome was lost in a crash, and a is back. Whether the removal ran cannot
    // be told from a view that may be a moment old, so the failover goes on: a is replaced.
    let back = [("a", "10.0.0.1", true, Placed), rows[1], rows[2]];
    let (s, cmds) = m.step(&s, &global(&back), t(601));
    assert_eq!(cmds, [remove("a")]);
    assert_eq!(phase(&s), Some(&Phase::RemovingOld));
}

#[test]
fn a_reissued_removal_needs_only_the_majority_guard() {
    let m = machine();
    let s = a_to_d_until_removal(&m);
    // The removal of a was issued; its outcome was lost; then b died for good. Waiting for b
    // would deadlock (b's failover waits for this migration); a, c, d keep a majority of
    // b, c, d after the removal, so the removal is issued again.
    let b_down = [
        ABC[0],
        ("b", "10.0.0.2", false, Misplaced),
        ABC[2],
        ("d", "242.0.0.4", true, Placed),
    ];
    let (s, cmds) = m.step(&s, &global(&b_down), t(1000));
    assert_eq!(cmds, [remove("a")]);
    assert_eq!(phase(&s), Some(&Phase::RemovingOld));
}

#[test]
fn a_remove_first_failover_replaces_a_new_mon_that_never_joins_with_another_one() {
    let m = machine();
    let bc = [
        ("b", "10.0.0.2", true, Placed),
        ("c", "10.0.0.3", true, Placed),
    ];
    let abc = [("a", "10.0.0.1", false, Placed), bc[0], bc[1]];
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&abc), t(0));
    let (s, _) = m.step(&s, &global(&abc), t(600));
    let (s, _) = m.step(
        &s,
        &global(&bc).with_outcomes(vec![done(remove("a"))]),
        t(601),
    );
    let (s, _) = m.step(
        &s,
        &global(&bc).with_outcomes(vec![done(delete("a"))]),
        t(602),
    );
    let (s, _) = m.step(
        &s,
        &global(&bc).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(603),
    );
    let (s, cmds) = m.step(
        &s,
        &global(&bc).with_outcomes(vec![done(start("d", "242.0.0.4"))]),
        t(604),
    );
    assert!(cmds.is_empty());
    let (s, cmds) = m.step(&s, &global(&bc), t(603 + 120));
    assert_eq!(cmds, [delete("d")]);
    let (s, cmds) = m.step(
        &s,
        &global(&bc).with_outcomes(vec![done(delete("d"))]),
        t(724),
    );
    assert!(cmds.is_empty());
    assert_eq!(
        phase(&s),
        Some(&Phase::AwaitingRetry),
        "a is gone: no rollback to it"
    );
    let (s, cmds) = m.step(&s, &global(&bc), t(724 + 30));
    assert_eq!(cmds, [provision("e")]);
    assert_eq!(s.migration().unwrap().attempt(), 2);
}

#[test]
fn disabling_mcs_rolls_back_a_migration_whose_old_mon_is_still_there() {
    let m = machine();
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(1),
    );
    // MCS disabled: the cluster IPs a, b, c are right again.
    let local = [
        ("a", "10.0.0.1", true, Placed),
        ("b", "10.0.0.2", true, Placed),
        ("c", "10.0.0.3", true, Placed),
    ];
    let (s, cmds) = m.step(&s, &observe(Addressing::ClusterLocal, &local), t(2));
    assert_eq!(cmds, [delete("d")]);
    let (s, cmds) = m.step(
        &s,
        &observe(Addressing::ClusterLocal, &local).with_outcomes(vec![done(delete("d"))]),
        t(3),
    );
    assert!(cmds.is_empty());
    assert!(s.migration().is_none());
    assert_eq!(
        s.history().last.as_ref().map(|l| &l.result),
        Some(&AttemptResult::RolledBack {
            cause: RollbackCause::AddressingChanged {
                from: Addressing::Clusterset,
                to: Addressing::ClusterLocal
            }
        })
    );
}

#[test]
fn disabling_mcs_after_the_old_mon_left_finishes_and_then_moves_the_new_mon_back() {
    let m = machine();
    let s = a_to_d_until_removal(&m);
    // a was removed; then MCS is disabled: d (global IP) is now misplaced.
    let rows = [
        ("b", "10.0.0.2", true, Placed),
        ("c", "10.0.0.3", true, Placed),
        ("d", "242.0.0.4", true, Misplaced),
    ];
    let local = |outcomes| observe(Addressing::ClusterLocal, &rows).with_outcomes(outcomes);
    let (s, cmds) = m.step(&s, &local(vec![done(remove("a"))]), t(6));
    assert_eq!(cmds, [delete("a")]);
    let (s, cmds) = m.step(&s, &local(vec![done(delete("a"))]), t(7));
    assert_eq!(s.history().completed, 1);
    assert_eq!(
        cmds,
        [Command::ProvisionAddress {
            mon: id("e"),
            addressing: Addressing::ClusterLocal
        }]
    );
    assert_eq!(s.migration().unwrap().old(), &id("d"));
}

#[test]
fn a_new_mon_that_joins_at_another_address_is_rolled_back() {
    let m = machine();
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    let (s, _) = m.step(
        &s,
        &global(&ABC).with_outcomes(vec![ready("d", "242.0.0.4")]),
        t(1),
    );
    let wrong = [ABC[0], ABC[1], ABC[2], ("d", "10.1.1.1", true, Misplaced)];
    let (s, cmds) = m.step(&s, &global(&wrong), t(2));
    assert_eq!(cmds, [remove("d")]);
    assert!(matches!(
        phase(&s),
        Some(Phase::RollingBack {
            cause: RollbackCause::WrongAddress { .. },
            ..
        })
    ));
}

#[test]
fn max_mon_id_rises_to_the_highest_id_in_the_monmap() {
    let m = machine();
    let rows = [
        ("a", "10.0.0.1", true, Misplaced),
        ("x", "10.0.0.2", true, Placed),
        ("c", "10.0.0.3", true, Placed),
    ];
    let (s, cmds) = m.step(&MachineState::new(None), &global(&rows), t(0));
    assert_eq!(cmds, [provision("y")]);
    assert_eq!(s.max_mon_id(), Some(24));
}

#[test]
fn a_single_mon_is_never_moved() {
    let m = machine();
    let (s, cmds) = m.step(&MachineState::new(Some(0)), &global(&[ABC[0]]), t(0));
    assert!(cmds.is_empty());
    let blocked = s.blocked().unwrap();
    assert!(blocked.to_string().contains("at least 3 mons"), "{blocked}");
}

#[test]
fn ids_never_wrap_or_grow_past_six_letters() {
    let m = machine();
    let last = "zzzzzz".parse::<MonId>().unwrap().index();
    let (s, cmds) = m.step(&MachineState::new(Some(last)), &global(&ABC), t(0));
    assert!(cmds.is_empty());
    assert_eq!(
        s.blocked(),
        Some(&Blocker::IdsExhausted { max_mon_id: last })
    );
}

#[test]
fn unknown_placement_is_left_alone() {
    let m = machine();
    let rows = [
        ("a", "10.0.0.1", true, Placement::Unknown),
        ("b", "10.0.0.2", true, Misplaced),
        ("c", "10.0.0.3", true, Placed),
    ];
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&rows), t(0));
    assert_eq!(s.migration().unwrap().old(), &id("b"));
}

#[test]
fn a_restart_without_outcomes_reissues_the_pending_command() {
    let m = machine();
    let s = a_to_d_until_removal(&m);
    let joined = [ABC[0], ABC[1], ABC[2], ("d", "242.0.0.4", true, Placed)];
    // The driver died before executing `remove a`: the stored state re-issues it ...
    let (s2, cmds) = m.step(&s, &global(&joined), t(6));
    assert_eq!(cmds, [remove("a")]);
    // ... and if it had run, the monmap shows it and nothing is removed twice.
    let after = [ABC[1], ABC[2], ("d", "242.0.0.4", true, Placed)];
    let (_, cmds) = m.step(&s2, &global(&after), t(7));
    assert_eq!(cmds, [delete("a")]);
}

#[test]
fn a_steady_cluster_changes_nothing() {
    let m = machine();
    let rows = [
        ("d", "242.0.0.4", true, Placed),
        ("e", "242.0.0.5", true, Placed),
        ("f", "242.0.0.6", true, Placed),
    ];
    let state = MachineState::new(Some(5));
    let (next, cmds) = m.step(&state, &global(&rows), t(0));
    assert!(cmds.is_empty());
    assert_eq!(next, state, "no state change, so no write");
}

#[test]
fn failed_commands_are_reported_in_the_state_and_retried() {
    let m = machine();
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    let failed = CommandOutcome::Failed {
        command: provision("d"),
        error: "export forbidden".into(),
    };
    let (s, cmds) = m.step(&s, &global(&ABC).with_outcomes(vec![failed]), t(1));
    assert_eq!(cmds, [provision("d")]);
    assert!(s.last_error().unwrap().contains("export forbidden"));
}

#[test]
fn every_phase_round_trips_through_json() {
    // Walk a full migration, a rollback and a failover and check each state.
    let m = machine();
    let mut states = vec![a_to_d_until_removal(&m)];
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&ABC), t(0));
    states.push(s.clone());
    let (s, _) = m.step(&s, &global(&ABC), t(61));
    states.push(s);
    let rows = [
        ("a", "10.0.0.1", false, Placed),
        ("b", "10.0.0.2", true, Placed),
        ("c", "10.0.0.3", true, Placed),
    ];
    let (s, _) = m.step(&MachineState::new(Some(2)), &global(&rows), t(0));
    let (s, _) = m.step(&s, &global(&rows), t(600));
    states.push(s);
    for state in states {
        let json = serde_json::to_string(&state).unwrap();
        assert_eq!(
            serde_json::from_str::<MachineState>(&json).unwrap(),
            state,
            "{json}"
        );
    }
}

#[test]
fn invalid_configurations_are_rejected_with_the_field_name() {
    let err = Machine::new(Config {
        removal_wait_timeout: Duration::ZERO,
        ..config()
    })
    .unwrap_err();
    assert!(err.to_string().contains("removal_wait_timeout"), "{err}");
    let err = Machine::new(Config {
        mon_out_timeout: Some(Duration::ZERO),
        ..config()
    })
    .unwrap_err();
    assert!(err.to_string().contains("mon_out_timeout"), "{err}");
    let err = Machine::new(Config {
        max_retry_backoff: Duration::from_secs(1),
        ..config()
    })
    .unwrap_err();
    assert!(err.to_string().contains("max_retry_backoff"), "{err}");
}

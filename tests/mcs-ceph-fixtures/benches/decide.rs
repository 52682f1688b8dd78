//! CPU time of the operator's decision for one cluster of 1,000 OSDs (three mons), without IO:
//! the first enable (plan, 2,000 objects to apply) and the steady state (everything compared,
//! nothing to do). `cargo bench -p mcs-ceph-fixtures --bench decide`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]

use std::hint::black_box;

use ceph_address_plan::Daemon;
use criterion::{Criterion, criterion_group, criterion_main};
use mcs_ceph_core::{Config, Snapshot, prepare};
use mcs_ceph_fixtures::*;

const OSDS: u32 = 1000;

fn converged() -> Snapshot {
    let config = Config::default();
    let mut snapshot = rook_cluster(OSDS);
    for (second, ready) in [(0, false), (1, true)] {
        if ready {
            set_export_conditions(&mut snapshot, &exported_conditions());
        }
        let prepared = prepare(&snapshot, &config, at(second));
        apply(&mut snapshot, prepared.writes().to_vec());
        let results = prepared
            .lookups()
            .iter()
            .map(|l| match l.daemon {
                Daemon::Osd(id) => (l.daemon.clone(), Ok(vec![osd_global_ip(id)])),
                Daemon::Mon(_) => (l.daemon.clone(), Err("no mon lookups".to_owned())),
            })
            .collect();
        apply(&mut snapshot, prepared.complete(results).status);
    }
    // The status now lists every global IP; the OSD Deployments get their address arguments
    // one failure domain per decision. Then one more decision must be silent.
    let mut second = 2;
    loop {
        let prepared = prepare(&snapshot, &config, at(second));
        let writes = prepared.writes().to_vec();
        assert!(prepared.lookups().is_empty());
        let status = prepared.complete(Vec::new()).status;
        if writes.is_empty() && status.is_none() {
            break;
        }
        apply(&mut snapshot, writes);
        apply(&mut snapshot, status);
        second += 1;
        assert!(second < 2 + 2 * i64::from(OSDS), "no convergence");
    }
    let prepared = prepare(&snapshot, &config, at(second + 1));
    assert!(prepared.writes().is_empty() && prepared.lookups().is_empty());
    assert!(prepared.complete(Vec::new()).status.is_none());
    snapshot
}

fn decide(c: &mut Criterion) {
    let config = Config::default();
    let fresh = rook_cluster(OSDS);
    c.bench_function("first enable, 1000 OSDs", |b| {
        b.iter(|| {
            let prepared = prepare(black_box(&fresh), &config, at(0));
            assert_eq!(prepared.writes().len(), 2000);
            black_box(prepared.complete(Vec::new()))
        });
    });
    let steady = converged();
    c.bench_function("steady state, 1000 OSDs", |b| {
        b.iter(|| {
            let prepared = prepare(black_box(&steady), &config, at(10));
            black_box(prepared.complete(Vec::new()))
        });
    });
}

criterion_group!(benches, decide);
criterion_main!(benches);

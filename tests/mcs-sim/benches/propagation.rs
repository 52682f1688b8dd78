//! Propagation benchmark: N simulated clusters, each driven by the agent's real core, with
//! in-memory API servers and broker (`clusterset_sim`).
//!
//! ```text
//! cargo bench -p clusterset-sim --bench propagation -- --clusters 10 --services 10000 --changes 200
//! ```
//!
//! Measures (single thread, the clusters processed one after another, zero API latency):
//! - the cold start: every cluster's agent starting against a clusterset of S exported services
//!   until every cluster imports every service;
//! - per change (a Service's ports edited in its exporting cluster): time until the first and
//!   until every cluster's stored ServiceImport shows it, and the CPU time the whole clusterset
//!   spent on it (all agents together), with the reconciles and writes it caused;
//! - per new export: the same for a new ServiceExport.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // a benchmark harness, not a library

use std::time::{Duration, Instant};

use clusterset_sim::{self as sim, Simulation};
use k8s_openapi::jiff::Timestamp;
use mcs_controller::core::Input;
use mcs_controller::watch::Event;
use mcs_types::ServiceKey;

/// CPU time of this thread, from the kernel's scheduler statistics (nanosecond resolution).
fn thread_cpu() -> Duration {
    let text = std::fs::read_to_string("/proc/thread-self/schedstat").unwrap_or_else(|e| {
        panic!("cannot read /proc/thread-self/schedstat ({e}): this benchmark needs Linux procfs")
    });
    let ns: u64 = text
        .split_whitespace()
        .next()
        .and_then(|v| v.parse().ok())
        .expect("schedstat starts with the CPU time in ns");
    Duration::from_nanos(ns)
}

fn arg(name: &str, default: usize) -> usize {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1))
        .map(|v| {
            v.parse()
                .unwrap_or_else(|_| panic!("{name} takes a number"))
        })
        .unwrap_or(default)
}

fn key(j: usize) -> ServiceKey {
    ServiceKey::new(&format!("ns-{}", j % 100), &format!("svc-{j}"))
}

fn ports_of(sim: &Simulation, i: usize, key: &ServiceKey) -> Option<Vec<i32>> {
    sim.import(i, key)
        .map(|imp| imp.spec.ports.iter().map(|p| p.port).collect())
}

struct Sample {
    first: Duration,
    all: Duration,
    reconciled: usize,
    writes: usize,
}

/// Steps the simulation one round at a time until every cluster satisfies `done`.
fn propagate(sim: &mut Simulation, mut done: impl FnMut(&Simulation, usize) -> bool) -> Sample {
    let clusters = sim.clusters.len();
    let started = Instant::now();
    let mut first = None;
    let mut reconciled = 0;
    let mut writes = 0;
    for _ in 0..100 {
        let stats = sim.settle(1);
        reconciled += stats.reconciled;
        writes += stats.writes;
        let arrived = (0..clusters).filter(|i| done(sim, *i)).count();
        if arrived > 0 && first.is_none() {
            first = Some(started.elapsed());
        }
        if arrived == clusters {
            let all = started.elapsed();
            // Drain the tail (status echoes) so the next sample starts from rest.
            let tail = sim.settle(1000);
            return Sample {
                first: first.unwrap_or(all),
                all,
                reconciled: reconciled + tail.reconciled,
                writes: writes + tail.writes,
            };
        }
    }
    panic!("the change did not reach every cluster in 100 rounds");
}

fn percentile(mut values: Vec<Duration>, p: f64) -> Duration {
    values.sort();
    let index = ((values.len() as f64 - 1.0) * p).round() as usize;
    values[index.min(values.len() - 1)]
}

/// `cpu` is the thread's CPU time over all samples (the kernel's counter moves in scheduler
/// ticks, too coarse for one change, fine for hundreds).
fn report(what: &str, samples: &[Sample], cpu: Duration) {
    let n = samples.len() as u32;
    let firsts: Vec<Duration> = samples.iter().map(|s| s.first).collect();
    let alls: Vec<Duration> = samples.iter().map(|s| s.all).collect();
    let cpu = cpu / n;
    let reconciled = samples.iter().map(|s| s.reconciled).sum::<usize>() as f64 / f64::from(n);
    let writes = samples.iter().map(|s| s.writes).sum::<usize>() as f64 / f64::from(n);
    println!(
        "{what} ({n} samples): first cluster p50 {:?}, every cluster p50 {:?} p90 {:?} max {:?}; CPU per change (all agents) {:?}; {reconciled:.1} reconciles and {writes:.1} writes per change",
        percentile(firsts, 0.5),
        percentile(alls.clone(), 0.5),
        percentile(alls.clone(), 0.9),
        percentile(alls, 1.0),
        cpu,
    );
}

fn main() {
    let clusters = arg("--clusters", 10);
    let services = arg("--services", 10_000);
    let changes = arg("--changes", 200);
    let namespaces: Vec<String> = (0..100).map(|n| format!("ns-{n}")).collect();
    let namespace_refs: Vec<&str> = namespaces.iter().map(String::as_str).collect();
    let start = Timestamp::from_second(1_800_000_000).unwrap();
    let mut sim = Simulation::new(clusters, &namespace_refs, start, None).unwrap();
    // The benchmark measures the agents: the simulated API servers' checks of every write
    // (Kubernetes' rules, as the tests run them) would be counted as the agents' CPU time and
    // multiply it several times over.
    sim.strict = false;

    // The clusterset's exports exist before the agents start (the cold start below is what a
    // fresh install of the agent, or a restart of every agent at once, costs).
    for j in 0..services {
        sim.export(j % clusters, &key(j), &[80]);
    }
    let wall = Instant::now();
    let cpu = thread_cpu();
    sim.start_all();
    let stats = sim.settle(10_000);
    let cold_wall = wall.elapsed();
    let cold_cpu = thread_cpu() - cpu;
    for i in 0..clusters {
        for j in [0, services / 2, services - 1] {
            assert!(
                sim.import(i, &key(j)).is_some(),
                "cluster {i} lacks service {j}"
            );
        }
    }
    println!(
        "cold start: {clusters} clusters x {services} services: every cluster imports every service after {cold_wall:?} wall, {cold_cpu:?} CPU ({} reconciles, {} writes, {} events)",
        stats.reconciled, stats.writes, stats.events
    );

    // Per change: add a port to one Service in its exporting cluster.
    let mut samples = Vec::with_capacity(changes);
    let cpu = thread_cpu();
    let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
    for c in 0..changes {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let j = (seed >> 33) as usize % services;
        let k = key(j);
        let port = 1000 + i32::try_from(c).unwrap();
        let exporter = j % clusters;
        sim.local_apply(
            exporter,
            Input::Service(Event::Apply(sim::service(&k, "10.96.0.1", &[80, port]))),
        );
        samples.push(propagate(&mut sim, |sim, i| {
            ports_of(sim, i, &k).is_some_and(|p| p.contains(&port))
        }));
    }
    report("port change", &samples, thread_cpu() - cpu);

    // Per new export.
    let mut samples = Vec::with_capacity(changes);
    let cpu = thread_cpu();
    for c in 0..changes {
        let k = ServiceKey::new("ns-0", &format!("new-{c}"));
        sim.export(c % clusters, &k, &[80]);
        samples.push(propagate(&mut sim, |sim, i| sim.import(i, &k).is_some()));
    }
    report("new export", &samples, thread_cpu() - cpu);
}

//! Zone update and query-path costs, in process (no sockets):
//! - one service changing in a 10,000-service zone (`apply` of one change, snapshot published);
//! - all 10,000 services changing in one batch;
//! - loading a 10,000-service zone from scratch (`replace_all`);
//! - `respond` for a hit and for an NXDOMAIN;
//! - the first query of a service that just changed: its names and the answer are computed and
//!   encoded then (the cost that updates no longer pay).
//!
//! `cargo bench -p clusterset-dns --bench zone_updates`
#![allow(clippy::panic)] // a benchmark whose set-up fails must stop loudly

#[path = "common/synthetic.rs"]
mod synthetic;

use std::hint::black_box;

use clusterset_dns::wire::{Transport, respond};
use clusterset_dns::{ZoneChange, ZoneConfig, ZoneObject, ZoneStore};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use synthetic::{service_import, zone_objects};

/// The allocator our binaries use (`bench_server`, `clusterset-agent`, `mcsctl`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SERVICES: usize = 10_000;

fn loaded_store() -> ZoneStore {
    let store = ZoneStore::new(ZoneConfig::default());
    if let Err(errors) = store.replace_all(zone_objects(SERVICES)) {
        panic!("synthetic zone rejected: {errors:?}");
    }
    store
}

fn change(i: usize, generation: u8) -> ZoneChange {
    ZoneChange::Upsert(ZoneObject::ServiceImport(Box::new(service_import(
        i, generation,
    ))))
}

fn updates(c: &mut Criterion) {
    let store = loaded_store();
    let mut generation = 0u8;
    let mut i = 0usize;
    c.bench_function("update one service in a 10k-service zone", |b| {
        b.iter_batched(
            || {
                i = (i + 7919) % SERVICES;
                generation = generation.wrapping_add(1);
                change(i, generation)
            },
            |change| black_box(store.apply([change])),
            BatchSize::SmallInput,
        );
    });

    let mut group = c.benchmark_group("batch");
    group.sample_size(10);
    group.bench_function("update all 10k services in one batch", |b| {
        b.iter_batched(
            || {
                generation = generation.wrapping_add(1);
                (0..SERVICES)
                    .map(|i| change(i, generation))
                    .collect::<Vec<_>>()
            },
            |changes| black_box(store.apply(changes)),
            BatchSize::LargeInput,
        );
    });
    group.bench_function("load a 10k-service zone from scratch", |b| {
        b.iter_batched(
            || zone_objects(SERVICES),
            |objects| {
                let fresh = ZoneStore::new(ZoneConfig::default());
                black_box(fresh.replace_all(objects).is_ok())
            },
            BatchSize::LargeInput,
        );
    });
    group.finish();
}

fn queries(c: &mut Criterion) {
    let store = loaded_store();
    let snapshot = store.snapshot();
    let query = |name: &str| {
        let mut q = Message::query();
        match Name::from_ascii(name) {
            Ok(n) => q.add_query(Query::query(n, RecordType::A)),
            Err(e) => panic!("{name}: {e}"),
        };
        q.to_vec().unwrap_or_default()
    };
    let hit = query("svc-4242.bench.svc.clusterset.local.");
    let miss = query("nope.bench.svc.clusterset.local.");
    let mut out = Vec::with_capacity(512);
    c.bench_function("respond A hit", |b| {
        b.iter(|| respond(&snapshot, black_box(&hit), Transport::Udp, &mut out));
    });
    c.bench_function("respond NXDOMAIN", |b| {
        b.iter(|| respond(&snapshot, black_box(&miss), Transport::Udp, &mut out));
    });

    let mut generation = 0u8;
    let mut i = 0usize;
    c.bench_function("respond A, first query after the service changed", |b| {
        b.iter_batched(
            || {
                i = (i + 7919) % SERVICES;
                generation = generation.wrapping_add(1);
                store.apply([change(i, generation)]);
                let name = format!("svc-{i}.bench.svc.clusterset.local.");
                (store.snapshot(), query(&name))
            },
            |(snapshot, hit)| respond(&snapshot, black_box(&hit), Transport::Udp, &mut out),
            BatchSize::SmallInput,
        );
    });
}

criterion_group!(benches, updates, queries);
criterion_main!(benches);

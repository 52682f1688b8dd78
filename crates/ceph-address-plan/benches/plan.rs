//! Planning cost: a full plan for 5 mons and 10,000 OSDs (budget 5 ms) and a one-OSD re-plan
//! against a previous plan (budget 100 µs). Run: `cargo bench -p ceph-address-plan --bench plan`.
#![allow(missing_docs, clippy::unwrap_used, clippy::expect_used)] // benchmark harness

use std::hint::black_box;
use std::net::{IpAddr, Ipv4Addr};

use ceph_address_plan::{
    CephVersion, ClusterSettings, Daemon, Inventory, MonId, MonInput, NodeInfo, OsdInput, Plan,
    PlanInput,
};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};

const OSDS: u32 = 10_000;

fn global_ip(n: u32) -> IpAddr {
    IpAddr::V4(Ipv4Addr::from(0xF201_0000 + n)) // 242.1.x.y
}

/// 5 mons and 10,000 OSDs with Rook-like properties; `resolved` says whether every global IP
/// is known and already advertised (steady state) or none is (first enable).
fn input(resolved: bool) -> PlanInput {
    let mut cluster = ClusterSettings::new("my-cluster", "rook-ceph");
    cluster.multi_cluster_service.enabled = true;
    cluster.multi_cluster_service.cluster_id = "east".into();
    cluster.ceph_version = Some(CephVersion::new(18, 2, 4));
    let mut inventory = Inventory {
        max_mon_id: Some(4),
        ..Inventory::default()
    };
    for index in 0..5 {
        let id = MonId::from_index(index);
        let mut mon = MonInput::new(id.clone());
        mon.cluster_ip = Some(IpAddr::V4(Ipv4Addr::new(10, 96, 0, 10 + index as u8)));
        mon.node = Some(NodeInfo {
            name: format!("node-{index}"),
            hostname: format!("node-{index}"),
            address: Some(IpAddr::V4(Ipv4Addr::new(192, 168, 0, 10 + index as u8))),
        });
        if resolved {
            mon.advertised = Some(std::net::SocketAddr::new(global_ip(index), 6789));
            inventory
                .global_ips
                .insert(Daemon::Mon(id), global_ip(index));
        }
        inventory.mons.push(mon);
    }
    for id in 0..OSDS {
        let host = format!("node-{}", id % 100);
        let mut osd = OsdInput::new(id, host.clone());
        osd.device_class = "ssd".into();
        osd.location = format!("root=default host={host}");
        if resolved {
            let ip = global_ip(100 + id);
            osd.advertised = Some(ip);
            inventory.global_ips.insert(Daemon::Osd(id), ip);
        }
        inventory.osds.push(osd);
    }
    PlanInput { cluster, inventory }
}

fn full_plan(c: &mut Criterion) {
    let mut group = c.benchmark_group("full_plan");
    for (name, resolved) in [
        ("5_mons_10000_osds_converged", true),
        ("5_mons_10000_osds_all_waiting", false),
    ] {
        let input = input(resolved);
        group.bench_function(name, |b| {
            b.iter_batched(
                || input.clone(),
                |input| black_box(Plan::new(input).unwrap()),
                BatchSize::LargeInput,
            );
        });
    }
    group.finish();
}

fn replan_one_osd(c: &mut Criterion) {
    let mut group = c.benchmark_group("replan_one_osd");
    let mut plan = Plan::new(input(true)).unwrap();
    let osd = Daemon::Osd(5_000);
    let mut flip = false;
    group.bench_function("global_ip_changed", |b| {
        b.iter(|| {
            flip = !flip;
            let ip = if flip {
                global_ip(90_000)
            } else {
                global_ip(100 + 5_000)
            };
            black_box(plan.set_global_ip(&osd, Some(ip)).unwrap())
        });
    });
    let original = plan.osd(5_000).unwrap().input().clone();
    let mut changed = original.clone();
    changed.device_class = "nvme".into();
    group.bench_function("osd_properties_changed", |b| {
        b.iter(|| {
            flip = !flip;
            let osd = if flip {
                changed.clone()
            } else {
                original.clone()
            };
            black_box(plan.upsert_osd(osd).unwrap())
        });
    });
    group.bench_function("osd_added_then_removed", |b| {
        b.iter(|| {
            black_box(
                plan.upsert_osd(OsdInput::new(OSDS + 1, "node-new"))
                    .unwrap(),
            );
            black_box(plan.remove_osd(OSDS + 1))
        });
    });
    group.finish();
}

fn render(c: &mut Criterion) {
    let mut group = c.benchmark_group("render");
    let plan = Plan::new(input(true)).unwrap();
    group.sample_size(20);
    group.bench_function("service_manifests_10000_osds", |b| {
        b.iter(|| black_box(plan.service_manifests()));
    });
    group.bench_function("readiness_10000_osds", |b| {
        b.iter(|| black_box(plan.readiness()));
    });
    group.finish();
}

criterion_group!(benches, full_plan, replan_one_osd, render);
criterion_main!(benches);

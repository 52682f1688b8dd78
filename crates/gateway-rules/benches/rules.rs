//! The rule set of a gateway with 10,000 exports computed and rendered (goal: under 10 ms), and
//! the delta of a change of one export computed and rendered (the compute part of the 20 ms
//! goal to apply it; the kernel part is measured by `clusterset-gateway`'s bench `apply`, with
//! the same state: docs/benchmarks.md).

use std::hint::black_box;
use std::net::Ipv4Addr;

use criterion::{Criterion, criterion_group, criterion_main};
use gateway_rules::{Backend, Export, GatewayState, Peer, RuleSet};

/// A cluster with `exports` exports: one pod each, and every tenth with three pods.
fn state(exports: u32) -> GatewayState {
    GatewayState {
        cluster_id: "east".into(),
        global_cidr: "242.1.0.0/16".parse().unwrap_or_default(),
        pod_cidr: "10.128.0.0/10".parse().unwrap_or_default(),
        service_cidr: "10.96.0.0/16".parse().unwrap_or_default(),
        egress_ips: (0..8)
            .map(|i| Ipv4Addr::new(242, 1, 255, 254 - i))
            .collect(),
        exports: (1..=exports)
            .map(|i| {
                let pod =
                    |n: u32| Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 0)) + i * 4 + n);
                Export {
                    namespace: "rook-ceph".into(),
                    name: format!("svc-{i}"),
                    global_ip: Ipv4Addr::from(u32::from(Ipv4Addr::new(242, 1, 0, 0)) + i),
                    backend: Backend::Endpoints(if i % 10 == 0 {
                        vec![pod(0), pod(1), pod(2)]
                    } else {
                        vec![pod(0)]
                    }),
                }
            })
            .collect(),
        peers: (2..=9)
            .map(|p| Peer {
                cluster_id: format!("peer-{p}"),
                global_cidr: format!("242.{p}.0.0/16").parse().unwrap_or_default(),
                gateway: Ipv4Addr::new(172, 31, 255, p),
            })
            .collect(),
    }
}

fn rules(c: &mut Criterion) {
    let big = state(10_000);
    c.bench_function("desired + to_nft_script, 10,000 exports", |b| {
        b.iter(|| {
            let rules = RuleSet::desired(black_box(&big)).ok();
            rules.map(|r| r.to_nft_script().len())
        })
    });
    // Its parts.
    c.bench_function("validate, 10,000 exports", |b| {
        b.iter(|| black_box(&big).validate().is_ok())
    });
    c.bench_function("desired, 10,000 exports", |b| {
        b.iter(|| RuleSet::desired(black_box(&big)).ok())
    });
    let before = RuleSet::desired(&big).ok();
    c.bench_function("to_nft_script, 10,000 exports", |b| {
        b.iter(|| black_box(&before).as_ref().map(|r| r.to_nft_script().len()))
    });
    let mut changed = big.clone();
    if let Some(export) = changed.exports.get_mut(4_321) {
        export.backend = Backend::Endpoints(vec![Ipv4Addr::new(10, 128, 200, 1)]);
    }
    c.bench_function(
        "one export changed: desired + delta_to + script, 10,000 exports",
        |b| {
            b.iter(|| {
                let after = RuleSet::desired(black_box(&changed)).ok();
                match (&before, after) {
                    (Some(before), Some(after)) => {
                        before.delta_to(&after).map(|d| d.to_nft_script().len())
                    }
                    _ => None,
                }
            })
        },
    );
}

criterion_group!(benches, rules);
criterion_main!(benches);

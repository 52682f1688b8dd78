//! The end-to-end lab (issue 9): two clusters with the same pod CIDR in network namespaces,
//! each behind its own gateway with 1:1 global<->pod NAT, real Ceph mons, our clusterset DNS.
//! Needs root, iproute2, nftables, ceph-mon, ceph-common and bind9-dnsutils (`.ci/run`
//! installs them) and fails, never skips, without them.
//!
//! The tests share the lab's namespace names and addresses, so they run one at a time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ceph_address_plan::{ClusterSettings, Inventory, MonId, MonInput, Plan, PlanInput};
use clusterset_lab::{
    GlobalnetEndpoints, LabDns, Side, Topology, lab_namespaces, mon_service, require_host,
};
use mon_failover::{
    Addressing, CephCli, CephMonAdmin, Command, CommandLine, Config, Driver, FileStateStore,
    LocalCluster, LocalMonRuntime, Machine, MonRuntime, Phase, QuorumWatch, RunOptions, Tick,
    Timestamp,
};

/// One lab at a time: the tests share namespaces, addresses and ports.
static ONE_LAB_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn id(s: &str) -> MonId {
    s.parse().unwrap()
}

fn pod(host: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 244, 0, host)
}

/// The DNS server's pod IP in cluster A (and its global IP, mapped 1:1).
const DNS_HOST: u8 = 53;

/// Polls `check` every 250 ms until it returns `Some`, or fails after `within`.
async fn wait_for<T, F, Fut>(what: &str, within: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let deadline = Instant::now() + within;
    loop {
        if let Some(value) = check().await {
            return value;
        }
        assert!(
            Instant::now() < deadline,
            "timed out after {within:?} waiting for {what}"
        );
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
}

/// `dig +short` for `name` against `server`, from inside `side`'s pods namespace.
async fn dig(
    topology: &Topology,
    side: Side,
    server: Ipv4Addr,
    name: &str,
) -> Result<String, String> {
    let at = format!("@{server}");
    topology
        .exec(
            side,
            &["dig", &at, "+short", "+time=1", "+tries=2", name, "A"],
        )
        .await
        .map(|out| out.trim().to_owned())
        .map_err(|e| e.to_string())
}

/// Who listens on TCP port 3300 in a namespace (`ss -ltnH`): the local addresses.
async fn listeners_3300(topology: &Topology, side: Side) -> BTreeSet<String> {
    topology
        .exec(side, &["ss", "-ltnH", "sport", "= :3300"])
        .await
        .unwrap()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(3).map(str::to_owned))
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_overlapping_pod_cidrs_behind_gateways_with_hairpin_nat() {
    require_host().unwrap();
    let _serial = ONE_LAB_AT_A_TIME.lock().await;
    let topology = Topology::create().await.unwrap();
    assert_eq!(lab_namespaces().len(), 4, "{:?}", lab_namespaces());
    let (a, b) = (
        topology.cluster(Side::A).clone(),
        topology.cluster(Side::B).clone(),
    );
    assert_eq!(a.pod_cidr, b.pod_cidr, "the pod CIDRs overlap");

    // A DNS server at the same pod IP in both clusters, each with its own cluster's records.
    let mut servers = Vec::new();
    for (side, global) in [(Side::A, "242.1.0.53"), (Side::B, "242.2.0.53")] {
        let net = topology.cluster(side).clone();
        topology.add_pod_ip(side, pod(DNS_HOST)).await.unwrap();
        topology
            .map_global(side, global.parse().unwrap(), pod(DNS_HOST))
            .await
            .unwrap();
        let dns = LabDns::start(&net.netns, (pod(DNS_HOST), 53).into())
            .await
            .unwrap();
        let own = match side {
            Side::A => "242.1.0.77",
            Side::B => "242.2.0.77",
        };
        dns.publish(net.cluster_id, "probe", own.parse().unwrap())
            .unwrap();
        servers.push(dns);
    }
    let probe = "probe.rook-ceph.svc.clusterset.local";
    // The same pod IP answers differently in each cluster: the networks overlap.
    assert_eq!(
        dig(&topology, Side::A, pod(DNS_HOST), probe).await.unwrap(),
        "242.1.0.77"
    );
    assert_eq!(
        dig(&topology, Side::B, pod(DNS_HOST), probe).await.unwrap(),
        "242.2.0.77"
    );
    // Across the tunnel by global IPs, both ways (DNAT in, SNAT out; dig rejects an answer
    // from another address than the one it asked, so the return path is checked too).
    let a_dns: Ipv4Addr = "242.1.0.53".parse().unwrap();
    let b_dns: Ipv4Addr = "242.2.0.53".parse().unwrap();
    assert_eq!(
        dig(&topology, Side::B, a_dns, probe).await.unwrap(),
        "242.1.0.77"
    );
    assert_eq!(
        dig(&topology, Side::A, b_dns, probe).await.unwrap(),
        "242.2.0.77"
    );
    // Hairpin: a pod reaches a pod of its own cluster by its global IP.
    assert_eq!(
        dig(&topology, Side::A, a_dns, probe).await.unwrap(),
        "242.1.0.77"
    );
    assert_eq!(
        dig(&topology, Side::B, b_dns, probe).await.unwrap(),
        "242.2.0.77"
    );
    // The Lighthouse name of the export.
    assert_eq!(
        dig(
            &topology,
            Side::B,
            a_dns,
            "east.probe.rook-ceph.svc.clusterset.local"
        )
        .await
        .unwrap(),
        "242.1.0.77"
    );

    // Without A's gateway NAT, A's global IPs are unreachable; restored, they answer again.
    topology.remove_nat(Side::A).await.unwrap();
    assert!(!topology.nat_present(Side::A).await);
    let err = dig(&topology, Side::B, a_dns, probe).await.unwrap_err();
    assert!(
        err.contains("exit status: 9"),
        "dig got no reply (exit 9): {err}"
    );
    topology.restore_nat(Side::A).await.unwrap();
    assert_eq!(
        dig(&topology, Side::B, a_dns, probe).await.unwrap(),
        "242.1.0.77"
    );
    // Idempotent: restoring again changes nothing.
    topology.restore_nat(Side::A).await.unwrap();
    assert_eq!(
        dig(&topology, Side::A, a_dns, probe).await.unwrap(),
        "242.1.0.77"
    );

    for dns in servers {
        dns.shutdown().await;
    }
    drop(topology);
    assert!(
        lab_namespaces().is_empty(),
        "torn down: {:?}",
        lab_namespaces()
    );
}

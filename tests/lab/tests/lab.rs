//! The end-to-end lab (issue 9): two clusters with the same pod CIDR in network namespaces,
//! each behind its own gateway (a `clusterset-gateway` process: 1:1 global<->pod NAT), real
//! Ceph mons, our clusterset DNS.
//! Needs root, iproute2, nftables, bind9-dnsutils and the Ceph Reef root filesystem
//! (`tests/lab/ceph-reef-root.sh`; `.ci/run` installs and builds them) and fails, never skips,
//! without them.
//!
//! The tests share the lab's namespace names and addresses, so they run one at a time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ceph_address_plan::{
    CephVersion, ClusterSettings, Inventory, MonId, MonInput, Plan, PlanInput,
};
use ceph_local::{LocalCluster, LocalMonRuntime};
use clusterset_lab::mirror::{DNS_NAMESPACE, DNS_SERVICE, dns_export};
use clusterset_lab::{
    GlobalnetEndpoints, LabDns, PodExport, Side, Topology, ceph_version, lab_namespaces,
    mon_service, print_log_tails, require_ceph_root, require_host,
};
use mon_failover::{Addressing, CephMonAdmin, Command, Config, Machine, MonRuntime, Timestamp};
use mon_failover_io::{
    CephCli, CephInstall, CommandLine, Driver, FileStateStore, MON_ELECTION_TIMEOUT, QuorumWatch,
    RunOptions, Tick,
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
            .export(
                side,
                PodExport {
                    namespace: DNS_NAMESPACE.into(),
                    service: DNS_SERVICE.into(),
                    global: global.parse().unwrap(),
                    pod: pod(DNS_HOST),
                },
            )
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

    // A's gateway stopped (SIGTERM) leaves its rules: A still answers. Started again, it
    // programs the same table.
    let table = || async {
        topology
            .exec_in_gateway(Side::A, &["nft", "list", "table", "ip", "clusterset_gw"])
            .await
            .unwrap()
    };
    let before = table().await;
    topology.stop_gateway(Side::A).await.unwrap();
    assert!(!topology.gateway_running(Side::A).await);
    assert_eq!(
        dig(&topology, Side::B, a_dns, probe).await.unwrap(),
        "242.1.0.77"
    );
    topology.start_gateway(Side::A).await.unwrap();
    assert_eq!(table().await, before, "the restarted gateway's table");

    // A gateway outage (stopped, its table gone): A's global IPs are unreachable; the gateway
    // started again reprograms them from its state file, and they answer again.
    topology.gateway_outage(Side::A).await.unwrap();
    assert!(!topology.gateway_table_present(Side::A).await);
    let err = dig(&topology, Side::B, a_dns, probe).await.unwrap_err();
    assert!(
        err.contains("exit status: 9"),
        "dig got no reply (exit 9): {err}"
    );
    topology.start_gateway(Side::A).await.unwrap();
    assert_eq!(table().await, before, "the table after the outage");
    assert_eq!(
        dig(&topology, Side::B, a_dns, probe).await.unwrap(),
        "242.1.0.77"
    );
    // Idempotent: starting a running gateway changes nothing.
    topology.start_gateway(Side::A).await.unwrap();
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

/// Cluster A ("east"): three mons a, b, c on pod IPs 10.244.0.11-13 (MCS off), new mons on pod
/// IPs from 10.244.0.21, and the clusterset DNS server at 10.244.0.53 (global 242.1.0.53).
/// Fields drop in order: daemons first, the network last.
struct Lab {
    /// The Ceph Reef root filesystem, sharing the lab's directory.
    install: CephInstall,
    /// The version of its Ceph, what the plan is told.
    version: CephVersion,
    runtime: Arc<LocalMonRuntime>,
    endpoints: Arc<GlobalnetEndpoints>,
    admin: Arc<CephCli>,
    cluster: LocalCluster,
    store: Arc<FileStateStore>,
    dns: Arc<LabDns>,
    topology: Arc<Topology>,
    dir: tempfile::TempDir,
    /// When the mons a, b, c formed their quorum, counted from the start of the lab.
    formed_quorum: Duration,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

/// When a lab test fails, the mons' own account goes with the failure: the election, lease,
/// probing and sync lines of every mon's log (the temporary directory is gone afterwards).
impl Drop for Lab {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            return;
        }
        print_log_tails(
            &self.cluster.dir().join("log"),
            60,
            "lines on elections, leases and syncs",
            mon_state_line,
        );
    }
}

/// A mon log line about elections, leases, probing, syncing or the quorum (its cluster log
/// lines, the elector's, the lease's, and its bootstraps).
fn mon_state_line(line: &str) -> bool {
    let cluster_log = line.contains("log_channel(cluster)") && !line.contains("[DBG]");
    cluster_log
        || [
            "electionLogic",
            "lease",
            "bootstrap",
            "sync_",
            "probe_timeout",
            "my rank",
        ]
        .iter()
        .any(|word| line.contains(word))
}

const FSID_A: &str = "9b0c5a43-1a5e-4c1e-8f0e-00000000000a";
const FSID_B: &str = "9b0c5a43-1a5e-4c1e-8f0e-00000000000b";

impl Lab {
    async fn start() -> Lab {
        require_host().unwrap();
        let reef = require_ceph_root().unwrap();
        let version = ceph_version(&reef).await.unwrap();
        let serial = ONE_LAB_AT_A_TIME.lock().await;
        let started = Instant::now();
        let topology = Arc::new(Topology::create().await.unwrap());
        let a = topology.cluster(Side::A).clone();
        topology.add_pod_ip(Side::A, pod(DNS_HOST)).await.unwrap();
        topology
            .export(Side::A, dns_export(pod(DNS_HOST)))
            .await
            .unwrap();
        let dns = Arc::new(
            LabDns::start(&a.netns, (pod(DNS_HOST), 53).into())
                .await
                .unwrap(),
        );
        let abc: Vec<(MonId, Ipv4Addr)> =
            vec![(id("a"), pod(11)), (id("b"), pod(12)), (id("c"), pod(13))];
        for (_, ip) in &abc {
            topology.add_pod_ip(Side::A, *ip).await.unwrap();
        }
        let dir = tempfile::tempdir().unwrap();
        let install = reef.sharing(dir.path());
        let mons: Vec<(MonId, IpAddr)> = abc
            .iter()
            .map(|(m, ip)| (m.clone(), IpAddr::V4(*ip)))
            .collect();
        let cluster = LocalCluster::open(dir.path().join("east"), FSID_A)
            .with_install(install.clone())
            .init(&mons)
            .await
            .unwrap();
        let endpoints = Arc::new(GlobalnetEndpoints::new(
            topology.clone(),
            Side::A,
            dns.clone(),
            &abc,
            (21..30).map(pod),
        ));
        let admin = Arc::new(
            cluster
                .admin(Some(&a.netns))
                .timeout(Duration::from_secs(10)),
        );
        let runtime = Arc::new(LocalMonRuntime::new(
            cluster.clone(),
            endpoints.clone(),
            cluster
                .admin(Some(&a.netns))
                .timeout(Duration::from_secs(10)),
        ));
        for (mon, ip) in &mons {
            runtime.start(mon, *ip).await.unwrap();
        }
        if let Err(error) = runtime
            .wait_for_quorum(admin.as_ref(), 3, Duration::from_secs(90))
            .await
        {
            panic!("mons a, b, c formed no quorum: {error}");
        }
        let store = Arc::new(FileStateStore::new(dir.path().join("failover.json")));
        Lab {
            install,
            version,
            runtime,
            endpoints,
            admin,
            cluster,
            store,
            dns,
            topology,
            dir,
            formed_quorum: started.elapsed(),
            _serial: serial,
        }
    }

    fn netns(&self) -> String {
        self.topology.cluster(Side::A).netns.clone()
    }

    /// A quorum watch on the mons' admin sockets, every second.
    fn watch(&self) -> QuorumWatch {
        self.cluster.quorum_watch(Duration::from_secs(1))
    }

    /// A quorum watch like [`Lab::watch`] that lets an election last `rounds` rounds of Ceph's
    /// `mon_election_timeout` (5 s) before it counts as a loss.
    fn watch_allowing_election_rounds(&self, rounds: u32) -> QuorumWatch {
        self.cluster
            .quorum_watch_allowing(Duration::from_secs(1), MON_ELECTION_TIMEOUT * rounds)
    }

    async fn driver(&self) -> Driver {
        let config = Config {
            address_timeout: Duration::from_secs(120),
            join_timeout: Duration::from_secs(120),
            removal_wait_timeout: Duration::from_secs(300),
            mon_out_timeout: None,
            retry_backoff: Duration::from_secs(1),
            max_retry_backoff: Duration::from_secs(5),
        };
        Driver::resume(
            Machine::new(config).unwrap(),
            self.admin.clone(),
            self.runtime.clone(),
            self.store.clone(),
            Some(2),
        )
        .await
        .unwrap()
    }

    /// The monmap as (name, ip), and the mons in quorum.
    async fn monmap(&self) -> (Vec<(String, IpAddr)>, Vec<String>) {
        let status = self.admin.quorum_status().await.unwrap();
        let mons = status
            .monmap
            .mons
            .iter()
            .map(|m| (m.name.clone(), m.ip().unwrap()))
            .collect();
        (mons, status.quorum_names)
    }

    /// After the migration: d, e, f advertise 242.1.0.1-3, bind pod IPs 10.244.0.21-23, all in
    /// quorum; a, b, c are gone (process and data).
    async fn assert_migrated(&self) {
        let (mons, quorum) = self.monmap().await;
        let expected: Vec<(String, IpAddr)> = [("d", 1), ("e", 2), ("f", 3)]
            .iter()
            .map(|(m, h)| ((*m).to_owned(), IpAddr::from([242, 1, 0, *h])))
            .collect();
        let mut sorted = mons.clone();
        sorted.sort();
        assert_eq!(sorted, expected, "the monmap holds the global IPs only");
        let mut quorum = quorum;
        quorum.sort();
        assert_eq!(quorum, ["d", "e", "f"]);
        for (i, mon) in ["d", "e", "f"].iter().enumerate() {
            let pid = self.runtime.pid(&id(mon)).await.expect("the new mon runs");
            let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                .unwrap()
                .replace('\0', " ");
            let host = 21 + i as u8;
            assert!(
                cmdline.contains(&format!("--public-addr 242.1.0.{}", i + 1))
                    && cmdline.contains(&format!("--public-bind-addr 10.244.0.{host}")),
                "mon {mon} advertises its global IP and binds its pod IP: {cmdline}"
            );
            assert_eq!(self.endpoints.pod_ip(&id(mon)).await, Some(pod(host)));
        }
        for old in ["a", "b", "c"] {
            assert!(
                self.runtime.pid(&id(old)).await.is_none(),
                "old mon {old} stopped"
            );
            assert!(
                !self.cluster.mon_data(&id(old)).exists(),
                "old mon {old}'s data deleted"
            );
        }
        let listening = listeners_3300(&self.topology, Side::A).await;
        let bound: BTreeSet<String> = (21..24).map(|h| format!("10.244.0.{h}:3300")).collect();
        assert_eq!(listening, bound, "the mons listen on their pod IPs only");
        let dnat = self.topology.gateway_dnat(Side::A).await.unwrap();
        let want: BTreeMap<Ipv4Addr, Ipv4Addr> = [(1, 21), (2, 22), (3, 23), (53, 53)]
            .into_iter()
            .map(|(global, host)| (Ipv4Addr::new(242, 1, 0, global), pod(host)))
            .collect();
        assert_eq!(
            dnat, want,
            "the gateway's table DNATs exactly the live exports (and DNS) to their pods"
        );
    }
}

/// The plan of cluster A with MCS enabled, from a monmap.
fn plan_of(mons: &[(String, IpAddr)], version: CephVersion) -> Plan {
    let mut cluster = ClusterSettings::new("east-ceph", clusterset_lab::NAMESPACE);
    cluster.multi_cluster_service.enabled = true;
    cluster.multi_cluster_service.cluster_id = "east".into();
    // The lab runs Reef (18.2): Rook's guard (Ceph >= 17.2.6, for OSDs binding their pod IP,
    // ceph#49990) sees the version that really runs.
    cluster.ceph_version = Some(version);
    let mut inventory = Inventory::default();
    for (name, ip) in mons {
        let mut mon = MonInput::new(id(name));
        mon.advertised = Some((*ip, 6789).into());
        if matches!(ip, IpAddr::V4(v4) if v4.octets()[0] != 242) {
            // MCS off, the lab's mons advertise the address Rook gives a mon Service's cluster
            // IP: reachable in the cluster only.
            mon.cluster_ip = Some(*ip);
        } else {
            inventory
                .global_ips
                .insert(format!("mon.{name}").parse().unwrap(), *ip);
        }
        inventory.mons.push(mon);
    }
    Plan::new(PlanInput { cluster, inventory }).unwrap()
}

fn removals(tick: &Tick, into: &mut Vec<String>) {
    for command in &tick.commands {
        if let Command::RemoveFromMonmap { mon } = command {
            into.push(mon.to_string());
        }
    }
}

fn options() -> RunOptions {
    RunOptions {
        poll: Duration::from_millis(500),
        deadline: Duration::from_secs(240),
    }
}

/// Runs `ceph ARGS -f json` of `install` inside `netns` with this conf, client name and keyring.
async fn ceph_json(
    install: &CephInstall,
    netns: &str,
    conf: &std::path::Path,
    name: &str,
    keyring: &std::path::Path,
    args: &[&str],
) -> serde_json::Value {
    let out = install
        .command("ceph", Some(netns))
        .arg("-c")
        .arg(conf)
        .args(["-n", name, "-k"])
        .arg(keyring)
        .args(["--connect-timeout", "15"])
        .args(args.iter().copied())
        .args(["-f", "json"])
        .output(Duration::from_secs(30))
        .await
        .unwrap();
    serde_json::from_slice(&out).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mons_move_to_global_ips_and_a_client_in_the_overlapping_cluster_reaches_them() {
    let lab = Lab::start().await;
    let netns = lab.netns();
    let b = lab.topology.cluster(Side::B).clone();

    // MCS off: the mons advertise their pod IPs. MCS on: the plan wants all three replaced,
    // and resolves each new mon's global IP from the Lighthouse name our DNS answers.
    let (before, _) = lab.monmap().await;
    let plan = plan_of(&before, lab.version);
    let replace: Vec<String> = plan
        .mon_replacements()
        .iter()
        .map(|r| r.mon.to_string())
        .collect();
    assert_eq!(replace, ["a", "b", "c"]);
    assert_eq!(plan.next_mon_id().as_str(), "d");

    let watch = lab.watch();
    let mut driver = lab.driver().await;
    let mut removed = Vec::new();
    let report = driver
        .run_until_settled(Addressing::Clusterset, options(), |tick| {
            removals(tick, &mut removed)
        })
        .await
        .unwrap();
    let record = watch.stop().await;
    assert!(record.never_lost(), "quorum was lost: {:?}", record.losses);
    assert_eq!(removed, ["a", "b", "c"], "one at a time, in id order");
    assert_eq!(driver.state().history().completed, 3);
    assert_eq!(driver.state().history().rolled_back, 0);
    lab.assert_migrated().await;

    // The plan agrees: every mon on its global IP, resolved from the names our DNS serves.
    let (after, _) = lab.monmap().await;
    let plan = plan_of(&after, lab.version);
    assert!(plan.readiness().ready, "{:?}", plan.readiness());
    assert!(plan.mon_replacements().is_empty());
    let d = ceph_address_plan::Daemon::Mon(id("d"));
    let name = plan.lookup_name(&d).unwrap();
    assert_eq!(
        name,
        LabDns::cluster_name("east", &mon_service(&id("d"))).unwrap()
    );
    assert_eq!(
        lab.dns.resolve(&name).await.unwrap(),
        Some(vec!["242.1.0.1".parse().unwrap()])
    );
    let args = plan.daemon_args(&d).unwrap();
    assert_eq!(args.public_addr, "242.1.0.1".parse::<IpAddr>().unwrap());
    // ... also from cluster B, through both gateways.
    assert_eq!(
        dig(
            &lab.topology,
            Side::B,
            "242.1.0.53".parse().unwrap(),
            &name.to_string()
        )
        .await
        .unwrap(),
        "242.1.0.1"
    );
    let peer_mon_host = plan.peer_token_mon_host().to_owned();
    assert_eq!(
        peer_mon_host,
        "242.1.0.1:6789,242.1.0.2:6789,242.1.0.3:6789"
    );

    // Cluster B: its own one-mon Ceph cluster, MCS on, bound to pod IP 10.244.0.21, the very
    // pod IP of A's mon d, advertising its global IP from B's CIDR.
    let endpoints_b = Arc::new(GlobalnetEndpoints::new(
        lab.topology.clone(),
        Side::B,
        lab.dns.clone(),
        &[],
        (21..30).map(pod),
    ));
    use ceph_local::EndpointSource;
    let b_mon = id("a");
    let b_endpoint = endpoints_b
        .provision(&b_mon, Addressing::Clusterset)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(b_endpoint.public, "242.2.0.1".parse::<IpAddr>().unwrap());
    assert_eq!(b_endpoint.bind, Some(IpAddr::V4(pod(21))));
    let cluster_b = LocalCluster::open(lab.dir.path().join("west"), FSID_B)
        .with_install(lab.install.clone())
        .init(&[(b_mon.clone(), b_endpoint.public)])
        .await
        .unwrap();
    let runtime_b = LocalMonRuntime::new(
        cluster_b.clone(),
        endpoints_b.clone(),
        cluster_b.admin(Some(&b.netns)),
    );
    runtime_b.start(&b_mon, b_endpoint.public).await.unwrap();
    let admin_b = cluster_b
        .admin(Some(&b.netns))
        .timeout(Duration::from_secs(10));
    let status_b = wait_for(
        "cluster B's mon in quorum",
        Duration::from_secs(60),
        || async {
            admin_b
                .quorum_status()
                .await
                .ok()
                .filter(|s| s.quorum_names == ["a"])
        },
    )
    .await;
    assert_eq!(status_b.monmap.fsid, FSID_B);
    assert_eq!(
        listeners_3300(&lab.topology, Side::B).await,
        BTreeSet::from(["10.244.0.21:3300".to_owned()])
    );
    assert!(
        listeners_3300(&lab.topology, Side::A)
            .await
            .contains("10.244.0.21:3300"),
        "the same pod IP in A"
    );

    // A peer client in B: only the peer token's mon_host (global IPs) and a keyring with a
    // read-only key of cluster A.
    let peer_dir = lab.dir.path().join("peer-in-west");
    std::fs::create_dir_all(&peer_dir).unwrap();
    let peer_keyring = peer_dir.join("keyring");
    lab.install
        .command("ceph", Some(&netns))
        .arg("-c")
        .arg(lab.cluster.conf())
        .arg("-k")
        .arg(lab.cluster.keyring())
        .args([
            "auth",
            "get-or-create",
            "client.east-peer",
            "mon",
            "allow r",
            "-o",
        ])
        .arg(&peer_keyring)
        .output(Duration::from_secs(30))
        .await
        .unwrap();
    let peer_conf = peer_dir.join("ceph.conf");
    std::fs::write(
        &peer_conf,
        format!("[global]\nmon_host = {peer_mon_host}\n"),
    )
    .unwrap();
    let client_started = Instant::now();
    let status = ceph_json(
        &lab.install,
        &b.netns,
        &peer_conf,
        "client.east-peer",
        &peer_keyring,
        &["-s"],
    )
    .await;
    let status_time = client_started.elapsed();
    assert_eq!(
        status["fsid"], FSID_A,
        "`ceph -s` from B answered by cluster A: {status}"
    );
    let mut quorum: Vec<String> = serde_json::from_value(status["quorum_names"].clone()).unwrap();
    quorum.sort();
    assert_eq!(quorum, ["d", "e", "f"]);
    let dump = ceph_json(
        &lab.install,
        &b.netns,
        &peer_conf,
        "client.east-peer",
        &peer_keyring,
        &["mon", "dump"],
    )
    .await;
    assert_eq!(dump["fsid"], FSID_A);
    let addrs: BTreeSet<String> = dump["mons"]
        .as_array()
        .unwrap()
        .iter()
        .map(|m| {
            m["public_addr"]
                .as_str()
                .unwrap()
                .split('/')
                .next()
                .unwrap()
                .to_owned()
        })
        .collect();
    assert_eq!(
        addrs,
        BTreeSet::from([
            "242.1.0.1:6789".to_owned(),
            "242.1.0.2:6789".into(),
            "242.1.0.3:6789".into()
        ])
    );
    // Meanwhile B's own cluster answers on B's side, from the same pod IP as A's mon d.
    let own = admin_b.quorum_status().await.unwrap();
    assert_eq!(own.monmap.fsid, FSID_B);
    runtime_b.stop_all().await;

    eprintln!(
        "lab scenario: a,b,c quorum {:.1?} after start; 3 mons migrated in {:.1?} over {} ticks (waiting on Ceph {:.1?}: answers {:.1?}, monmap changes {:.1?}, polls while joining {:.1?}; runtime commands {:.1?}); quorum polls {} never lost; quorums {:?}; `ceph -s` from B over global IPs {:.2?}",
        lab.formed_quorum,
        report.elapsed,
        report.ticks,
        report.waiting_on_ceph(),
        report.observing,
        report.monmap_changes,
        report.polling,
        report.runtime_commands,
        record.polls,
        record.quorums,
        status_time,
    );
    lab.runtime.stop_all().await;
}

/// The name of the phase of the migration in flight ("Idle" without one).
fn phase_name(state: &mon_failover::MachineState) -> String {
    state.migration().map_or("Idle".to_owned(), |m| {
        format!("{:?}", m.phase())
            .split([' ', '{', '('])
            .next()
            .unwrap_or_default()
            .to_owned()
    })
}

/// Plans and executes ticks (polling while the machine waits on Ceph) until `stop` holds for
/// a freshly planned tick; returns that tick's commands, not executed yet.
async fn drive_until(
    driver: &mut Driver,
    what: &str,
    mut stop: impl FnMut(&mon_failover::MachineState, &[Command]) -> bool,
) -> Vec<Command> {
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        let planned = driver
            .plan(Addressing::Clusterset, Timestamp::now())
            .await
            .unwrap();
        if stop(driver.state(), &planned.commands) {
            return planned.commands;
        }
        assert!(
            Instant::now() < deadline,
            "timed out driving until {what}: {}",
            driver.state()
        );
        if planned.commands.is_empty() {
            tokio::time::sleep(Duration::from_millis(500)).await;
        } else {
            driver.execute(&planned.commands).await;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_nat_removed_mid_migration_pauses_it_until_restored_and_quorum_holds() {
    let lab = Lab::start().await;
    let watch = lab.watch();
    let mut driver = lab.driver().await;
    // The first mon has moved (d on 242.1.0.1); the second migration is about to provision
    // mon e's global IP when A's gateway loses its NAT.
    let next = drive_until(&mut driver, "the second migration", |state, commands| {
        state.history().completed == 1
            && commands
                .iter()
                .any(|c| matches!(c, Command::ProvisionAddress { .. }))
    })
    .await;
    lab.topology.gateway_outage(Side::A).await.unwrap();
    let outage = Instant::now();
    // New connections to A's global IPs fail now: from B, A's DNS by its global IP is gone.
    let err = dig(
        &lab.topology,
        Side::B,
        "242.1.0.53".parse().unwrap(),
        "x.rook-ceph.svc.clusterset.local",
    )
    .await
    .unwrap_err();
    assert!(err.contains("exit status: 9"), "{err}");
    driver.execute(&next).await;
    // Paused: the export cannot become valid without the gateway, so mon e's address stays
    // pending; nothing is started or removed.
    let mut paused_ticks = 0;
    while paused_ticks < 12 {
        let tick = driver
            .tick(Addressing::Clusterset, Timestamp::now())
            .await
            .unwrap();
        assert!(
            !tick.commands.iter().any(|c| matches!(
                c,
                Command::StartMon { .. }
                    | Command::RemoveFromMonmap { .. }
                    | Command::DeleteMon { .. }
            )),
            "the migration went on without the gateway NAT: {:?}",
            tick.commands
        );
        assert!(
            tick.outcomes
                .iter()
                .all(|o| matches!(o, mon_failover::CommandOutcome::AddressPending { .. })),
            "{:?}",
            tick.outcomes
        );
        assert_eq!(
            phase_name(&tick.state),
            "ProvisioningAddress",
            "{}",
            tick.state
        );
        paused_ticks += 1;
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    let paused_for = outage.elapsed();
    assert_eq!(driver.state().history().completed, 1);
    // The gateway comes back: the migration resumes and finishes.
    lab.topology.start_gateway(Side::A).await.unwrap();
    let mut removed = Vec::new();
    let report = driver
        .run_until_settled(Addressing::Clusterset, options(), |tick| {
            removals(tick, &mut removed)
        })
        .await
        .unwrap();
    let record = watch.stop().await;
    assert!(record.never_lost(), "quorum was lost: {:?}", record.losses);
    assert_eq!(removed, ["b", "c"]);
    let history = driver.state().history();
    assert_eq!(history.completed, 3);
    assert_eq!(history.rolled_back, 0, "the pause rolled nothing back");
    lab.assert_migrated().await;
    eprintln!(
        "lab NAT outage: paused {paused_ticks} ticks over {paused_for:.1?}; resumed and finished the last two mons in {:.1?}; quorum polls {} never lost",
        report.elapsed, record.polls
    );
    lab.runtime.stop_all().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_old_mon_killed_during_its_failover_is_removed_and_quorum_holds() {
    let lab = Lab::start().await;
    // While a dead mon is in the monmap, an election cannot end before its timeout: the leader
    // waits the whole round for a's acknowledgement. d joining takes two such rounds (the first
    // while d still probes, the second with d; b's log on an idle machine: "calling monitor
    // election" at :51.44, "mid-election, bumping" at :56.44, "is new leader, mons b,c,d" at
    // :01.45; the same with both CPUs kept busy), and d may miss the second round too on a
    // slower machine. Four rounds (20 s) without a quorum count as a loss. A real loss (fewer
    // than a majority of the monmap alive) never re-forms, so it is still caught.
    let watch = lab.watch_allowing_election_rounds(4);
    let mut driver = lab.driver().await;
    // Mon a is being replaced: d's address is ready and d is about to start when a's process
    // is killed (SIGKILL, as a crash).
    let start_d = drive_until(&mut driver, "mon d's start", |_, commands| {
        commands
            .iter()
            .any(|c| matches!(c, Command::StartMon { mon, .. } if mon.as_str() == "d"))
    })
    .await;
    let pid = lab.runtime.pid(&id("a")).await.unwrap();
    let killed = Instant::now();
    CommandLine::new("kill", None)
        .args(["-9", &pid.to_string()])
        .output(Duration::from_secs(5))
        .await
        .unwrap();
    wait_for(
        "mon a's process to exit",
        Duration::from_secs(10),
        || async { lab.runtime.pid(&id("a")).await.is_none().then_some(()) },
    )
    .await;
    driver.execute(&start_d).await;
    let mut removed = Vec::new();
    let report = driver
        .run_until_settled(Addressing::Clusterset, options(), |tick| {
            removals(tick, &mut removed)
        })
        .await
        .unwrap();
    let record = watch.stop().await;
    assert!(record.never_lost(), "quorum was lost: {:?}", record.losses);
    assert_eq!(removed, ["a", "b", "c"]);
    let history = driver.state().history();
    assert_eq!(history.completed, 3);
    assert_eq!(history.rolled_back, 0);
    lab.assert_migrated().await;
    eprintln!(
        "lab killed mon: a killed, migration finished {:.1?} later ({:.1?} in the driver); quorum polls {} never lost; quorums {:?}",
        killed.elapsed(),
        report.elapsed,
        record.polls,
        record.quorums
    );
    lab.runtime.stop_all().await;
}

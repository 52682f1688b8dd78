//! The mission end to end (issue 19): two real Ceph Reef clusters whose pod networks overlap,
//! every mon and OSD bound to its pod IP and advertising its global IP with the arguments the
//! plan computes, RBD images mirrored between them through the global IPs only, a disaster
//! (every daemon of A killed) that loses nothing, and the failback.
//!
//! Needs root, iproute2, nftables, bind9-dnsutils and the Ceph Reef root filesystem
//! (`tests/lab/ceph-reef-root.sh`; `.ci/run` builds it) and fails, never skips, without them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clusterset_error_chain::ErrorChain;
use clusterset_lab::mirror::{
    IMAGE_MIB, MirrorLab, connections_of, listeners_of, run_mirror_scenario, wait_for_content,
};
use clusterset_lab::{
    CephSite, MGR_POD, POOL, Side, back_ip, front_ip, poll_until, print_log_tails,
    require_ceph_root, require_host,
};

/// One lab at a time: the tests share namespaces, addresses and ports.
static ONE_LAB_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A [`MirrorLab`] for one test: its temporary directory, the daemons' logs printed when the
/// test fails. Fields drop in order: the lab (daemons, then the network) before the directory.
struct TestLab {
    lab: MirrorLab,
    /// How long the clusters took to start (after the previous test's lab was gone).
    started_in: Duration,
    dir: tempfile::TempDir,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

impl std::ops::Deref for TestLab {
    type Target = MirrorLab;
    fn deref(&self) -> &MirrorLab {
        &self.lab
    }
}

/// The last lines of every daemon's log of both sites under `dir`.
fn print_logs(dir: &Path) {
    for site in ["east", "west"] {
        print_log_tails(&dir.join(site).join("log"), 25, "lines", |_| true);
    }
}

/// When a test fails, the last lines of every daemon's log go with the failure.
impl Drop for TestLab {
    fn drop(&mut self) {
        if std::thread::panicking() {
            print_logs(self.dir.path());
        }
    }
}

impl TestLab {
    /// Clusters A (MCS on if `a_mcs`) and B (MCS on), not yet peered.
    async fn start(a_mcs: bool) -> TestLab {
        require_host().unwrap();
        let install = require_ceph_root().unwrap();
        let serial = ONE_LAB_AT_A_TIME.lock().await;
        let dir = tempfile::tempdir().unwrap();
        let started = Instant::now();
        match MirrorLab::start(install, dir.path(), a_mcs).await {
            Ok(lab) => TestLab {
                lab,
                started_in: started.elapsed(),
                dir,
                _serial: serial,
            },
            Err(error) => {
                print_logs(dir.path());
                panic!("the clusters did not start: {}", ErrorChain(&error));
            }
        }
    }

    /// Peers the clusters and checks that B reaches A by the plan's peer-token `mon_host`.
    async fn peer(&self) {
        let peering = self.lab.peer().await.unwrap();
        assert_eq!(
            peering.plan_mon_host,
            "242.1.0.1:6789,242.1.0.2:6789,242.1.0.3:6789"
        );
        let info = &peering.pool_info_in_b;
        let peers = info["peers"].as_array().unwrap();
        assert_eq!(peers.len(), 1, "B has one peer: {info}");
        assert_eq!(peers[0]["site_name"], "east");
        assert_eq!(
            peers[0]["mon_host"], peering.plan_mon_host,
            "B reaches A by the plan's peer-token mon_host: {info}"
        );
    }
}

/// Every mon and OSD of `site` advertises its global IP and binds its pod IP.
async fn assert_bound_to_pods_advertising_globals(lab: &MirrorLab, site: &CephSite) {
    let net = site.net();
    let dump = site.ceph_json(&["osd", "dump"]).await.unwrap();
    let osds = site.osds().await;
    for slot in &osds {
        let entry = dump["osds"]
            .as_array()
            .unwrap()
            .iter()
            .find(|o| o["osd"] == slot.id)
            .unwrap();
        let global = slot.global.expect("the OSD is exported");
        assert!(net.global_cidr.contains(&match global {
            IpAddr::V4(v4) => v4,
            IpAddr::V6(_) => panic!("IPv4 lab"),
        }));
        assert_eq!(
            front_ip(entry),
            Some(global),
            "osd.{} front: {entry}",
            slot.id
        );
        assert_eq!(
            back_ip(entry),
            Some(IpAddr::V4(slot.pod)),
            "osd.{} back: {entry}",
            slot.id
        );
        let args = site.osd_args(slot.id).await.unwrap();
        let pid = site.pid(&format!("osd.{}", slot.id)).await.unwrap();
        let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
            .unwrap()
            .split('\0')
            .map(str::to_owned)
            .collect::<Vec<_>>();
        for arg in &args {
            assert!(
                cmdline.contains(arg),
                "osd.{} runs with the plan's {arg}: {cmdline:?}",
                slot.id
            );
        }
    }
    let pods: BTreeSet<IpAddr> = osds.iter().map(|s| IpAddr::V4(s.pod)).collect();
    let listening = listeners_of(lab.topology(), site.spec().side, "ceph-osd")
        .await
        .unwrap();
    assert_eq!(
        listening, pods,
        "{}'s OSDs listen on their pod IPs only",
        net.cluster_id
    );
    let plan = site.plan().await.unwrap();
    assert!(plan.readiness().ready, "{:?}", plan.readiness());
    let mon_listeners = listeners_of(lab.topology(), site.spec().side, "ceph-mon")
        .await
        .unwrap();
    let mut mon_pods = BTreeSet::new();
    for mon in plan.mons() {
        let pod = site.endpoints().pod_ip(mon.id()).await;
        mon_pods.insert(IpAddr::V4(pod.expect("every mon has a pod IP")));
    }
    assert_eq!(mon_pods.len(), 3, "three mons");
    assert_eq!(
        mon_listeners, mon_pods,
        "{}'s mons listen on their pod IPs only",
        net.cluster_id
    );
    let conf = std::fs::read_to_string(site.cluster().conf()).unwrap();
    assert!(
        conf.contains(&format!("mon_host = {}", plan.mon_host_config().mon_host)),
        "{}'s clients use the plan's mon_host:\n{conf}",
        net.cluster_id
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn rbd_images_mirror_through_global_ips_and_survive_the_loss_of_a_cluster() {
    let lab = TestLab::start(true).await;
    let clusters_up = lab.started_in;
    assert_bound_to_pods_advertising_globals(&lab.lab, &lab.a).await;
    assert_bound_to_pods_advertising_globals(&lab.lab, &lab.b).await;
    lab.peer().await;
    lab.a.start_rbd_mirror().await.unwrap();
    lab.b.start_rbd_mirror().await.unwrap();

    let report = run_mirror_scenario(&lab, |stage| {
        eprintln!(
            "stage: {} ({:.1?}): {}",
            stage.name, stage.took, stage.detail
        );
    })
    .await
    .unwrap();

    // 64 MiB of random data into both images in A; B's copies read the same (the scenario
    // waited for it) as the data sha256sum computed.
    assert_eq!(report.journal_written_sha, report.data_sha);
    assert_eq!(
        report.journal_in_a_sha, report.data_sha,
        "A's journal image reads back the data"
    );
    assert_eq!(report.snapshot_written_sha, report.data_sha);

    // rbd-mirror in B reached A only through A's global IPs. The pod CIDR is the same in both
    // clusters, so a pod IP seen from B is one of B's own pods (packets to it never leave B's
    // namespace): only B's mgr, which Rook does not export, may be one; everything else is a
    // global IP, of A (the peer's mons and OSDs) or of B (its own mons and OSDs, by hairpin).
    let peers = &report.rbd_mirror_peers_in_b;
    let a_net = lab.topology().cluster(Side::A).clone();
    let b_net = lab.topology().cluster(Side::B).clone();
    let in_a = |ip: &IpAddr| matches!(ip, IpAddr::V4(v4) if a_net.global_cidr.contains(v4));
    let in_b = |ip: &IpAddr| matches!(ip, IpAddr::V4(v4) if b_net.global_cidr.contains(v4));
    assert!(
        peers
            .iter()
            .all(|ip| in_a(ip) || in_b(ip) || *ip == IpAddr::V4(MGR_POD)),
        "rbd-mirror in B talks to global IPs (and its own mgr) only: {peers:?}"
    );
    let a_osds: BTreeSet<IpAddr> = lab.a.osds().await.iter().filter_map(|s| s.global).collect();
    assert!(
        peers.iter().any(|ip| a_osds.contains(ip)),
        "rbd-mirror in B read A's OSDs through their global IPs {a_osds:?}: {peers:?}"
    );
    let a_mons: BTreeSet<IpAddr> = ["242.1.0.1", "242.1.0.2", "242.1.0.3"]
        .iter()
        .map(|ip| ip.parse().unwrap())
        .collect();
    assert!(
        peers.iter().any(|ip| a_mons.contains(ip)),
        "rbd-mirror in B holds a session with one of A's mons at its global IP: {peers:?}"
    );

    // The disaster lost nothing A had acknowledged, and B took writes after it.
    assert_eq!(
        report.promoted_snapshot_sha, report.data_sha,
        "the promoted snapshot image holds what A acknowledged"
    );
    assert_eq!(
        report.b_after_write_sha, report.expected_after_write_sha,
        "B accepted a write on top of everything A had acknowledged"
    );
    // The failback: A's images are B's copies again (the scenario waited for their content),
    // non-primary in A, primary in B.
    assert_eq!(report.a_snapshot_after_failback_sha, report.data_sha);
    assert_eq!(report.a_primary_after_failback, (false, false));
    assert_eq!(report.b_primary_after_failback, (true, true));

    eprintln!(
        "mirror scenario: two Reef clusters up {clusters_up:.1?}; first image in B {:.1?} after enabling; {IMAGE_MIB} MiB journal replay {:.1?}; snapshot sync {:.1?}; failover (kill A to a write acknowledged in B) {:.1?}; failback {:.1?} (resync {:.1?})",
        report.first_mirrored,
        report.journal_replay,
        report.snapshot_sync,
        report.failover,
        report.failback,
        report.failback_resync,
    );
}

/// Latency percentiles (milliseconds) of the acknowledged writes of a load log whose start
/// falls in `[from, to)` (seconds since the epoch): (count, p50, p99, max).
fn latencies(log: &str, from: f64, to: f64) -> (usize, f64, f64, f64) {
    let mut millis: Vec<f64> = log
        .lines()
        .filter_map(|line| {
            let fields: Vec<&str> = line.split_whitespace().collect();
            let ["ok", _, _, start, end] = fields.as_slice() else {
                return None;
            };
            let (start, end): (f64, f64) = (start.parse().ok()?, end.parse().ok()?);
            (start >= from && start < to).then_some((end - start) * 1000.0)
        })
        .collect();
    millis.sort_by(f64::total_cmp);
    let at = |q: f64| {
        millis
            .get(((millis.len() as f64 - 1.0) * q).round() as usize)
            .copied()
            .unwrap_or(f64::NAN)
    };
    (millis.len(), at(0.5), at(0.99), at(1.0))
}

fn epoch_seconds() -> f64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs_f64()
}

/// The acknowledged writes in a load log so far.
fn acknowledged(log: &Path) -> usize {
    std::fs::read_to_string(log)
        .unwrap_or_default()
        .lines()
        .filter(|l| l.starts_with("ok "))
        .count()
}

/// How many acknowledged writes each phase of the upgrade waits for before it moves on.
const WRITES_PER_PHASE: usize = 300;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn mcs_turned_on_under_a_writing_client_loses_no_write_and_mirroring_resumes_on_global_ips() {
    use mon_failover::{Addressing, Config, Machine};
    use mon_failover_io::{Driver, FileStateStore, RunOptions};

    // A without MCS: mons and OSDs on pod IPs, nothing of it reachable from B.
    let lab = TestLab::start(false).await;
    let plan = lab.a.plan().await.unwrap();
    assert!(!plan.settings().mcs_enabled());
    for slot in lab.a.osds().await {
        assert_eq!(slot.advertised, IpAddr::V4(slot.pod));
    }
    let image = "live-img";
    let name = format!("{POOL}/{image}");
    lab.a
        .rbd(&[
            "create",
            &name,
            "--size",
            "64M",
            "--image-feature",
            // Snapshot-mode mirroring: with journaling, one run in seven saw this client's
            // writes hang for good after an OSD restart (docs/lab.md, "Deviations and limits").
            "layering,exclusive-lock",
        ])
        .await
        .unwrap();
    lab.a
        .rbd(&["mirror", "image", "enable", &name, "snapshot"])
        .await
        .unwrap();

    // A client writes 4 KiB blocks over 8 MiB of the image, without pause, for the whole upgrade.
    let site_dir = lab.a.cluster().dir().to_owned();
    let log = site_dir.join("load.log");
    let stop = site_dir.join("load.stop");
    let load = lab
        .a
        .rbd_io_line(
            "load",
            &[
                "--image",
                image,
                "--blocks",
                "2048",
                "--log",
                &log.to_string_lossy(),
                "--stop-file",
                &stop.to_string_lossy(),
            ],
        )
        .command()
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let load_started = epoch_seconds();
    let client_asok = site_dir.join("run").join("ceph-client.admin.asok");
    let phase = |writes: usize, what: &'static str| {
        let log = log.clone();
        let client_asok = client_asok.clone();
        let lab = &lab;
        async move {
            let waited = poll_until(what, Duration::from_secs(120), || {
                let log = log.clone();
                async move {
                    let count = acknowledged(&log);
                    Ok(((count >= writes).then_some(()), format!("{count} writes")))
                }
            })
            .await;
            if let Err(error) = waited {
                // What the client and the cluster say, for the failure report.
                let text = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = text.lines().rev().take(5).collect();
                let in_flight = lab
                    .a
                    .ceph(&[
                        "--admin-daemon",
                        &client_asok.to_string_lossy(),
                        "objecter_requests",
                    ])
                    .await
                    .map(|out| String::from_utf8_lossy(&out).into_owned());
                let status = lab
                    .a
                    .ceph(&["-s"])
                    .await
                    .map(|out| String::from_utf8_lossy(&out).into_owned());
                let osds = lab.a.osd_states().await;
                let error = ErrorChain(&error);
                panic!(
                    "{error}\nthe client's last log lines (newest first): {tail:#?}\nits requests in flight: {in_flight:?}\nceph -s: {status:?}\nosds: {osds:?}"
                );
            }
        }
    };
    phase(WRITES_PER_PHASE, "the client writing before the upgrade").await;

    // MCS on: the plan wants every mon replaced and every OSD on its global IP.
    let upgrade_started = epoch_seconds();
    lab.a.enable_mcs();
    let plan = lab.a.plan().await.unwrap();
    let replace: Vec<String> = plan
        .mon_replacements()
        .iter()
        .map(|r| r.mon.to_string())
        .collect();
    assert_eq!(replace, ["a", "b", "c"]);
    let watch = lab.a.cluster().quorum_watch(Duration::from_secs(1));
    let config = Config {
        address_timeout: Duration::from_secs(120),
        join_timeout: Duration::from_secs(120),
        removal_wait_timeout: Duration::from_secs(300),
        mon_out_timeout: None,
        retry_backoff: Duration::from_secs(1),
        max_retry_backoff: Duration::from_secs(5),
    };
    let mut driver = Driver::resume(
        Machine::new(config).unwrap(),
        lab.a.admin(),
        lab.a.runtime(),
        Arc::new(FileStateStore::new(site_dir.join("failover.json"))),
        Some(2),
    )
    .await
    .unwrap();
    let mon_report = driver
        .run_until_settled(
            Addressing::Clusterset,
            RunOptions {
                poll: Duration::from_millis(500),
                deadline: Duration::from_secs(300),
            },
            |_| {},
        )
        .await
        .unwrap();
    let record = watch.stop().await;
    assert!(record.never_lost(), "quorum was lost: {:?}", record.losses);
    lab.a.move_osds_to_global_ips().await.unwrap();
    let upgrade_done = epoch_seconds();

    let plan = lab.a.plan().await.unwrap();
    assert!(plan.readiness().ready, "{:?}", plan.readiness());
    assert_bound_to_pods_advertising_globals(&lab.lab, &lab.a).await;
    let writes_after_upgrade = acknowledged(&log);
    phase(
        writes_after_upgrade + WRITES_PER_PHASE,
        "the client writing after the upgrade",
    )
    .await;

    // Mirroring on the global IPs: A's token with the plan's mon_host, rbd-mirror in B.
    lab.peer().await;
    lab.b.start_rbd_mirror().await.unwrap();
    let resumed = Instant::now();
    std::fs::write(&stop, "").unwrap();
    let output = tokio::time::timeout(Duration::from_secs(120), load.wait_with_output())
        .await
        .expect("the client stops within 2 minutes of its stop file")
        .unwrap();
    let load_done = epoch_seconds();
    assert!(
        output.status.success(),
        "the client saw an IO error: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["errors"], 0, "no client IO error: {summary}");
    let log_path = log.to_string_lossy().into_owned();
    let verified = lab
        .a
        .rbd_io("verify", &["--image", image, "--log", &log_path])
        .await
        .unwrap();
    assert_eq!(
        verified["mismatches"],
        serde_json::json!([]),
        "every acknowledged write is in A: {verified}"
    );
    // The client has stopped: a mirror snapshot carries everything it wrote to B.
    lab.a
        .rbd(&["mirror", "image", "snapshot", &name])
        .await
        .unwrap();
    let sum_a = lab.a.image_checksum(image).await.unwrap();
    wait_for_content(&lab.b, image, &sum_a).await.unwrap();
    let caught_up = resumed.elapsed();
    // B holds every acknowledged write too (its copy is read where it is: non-primary).
    let log_in_b = lab.b.cluster().dir().join("load.log");
    std::fs::copy(&log, &log_in_b).unwrap();
    let verified_b = lab
        .b
        .rbd_io(
            "verify",
            &["--image", image, "--log", &log_in_b.to_string_lossy()],
        )
        .await
        .unwrap();
    assert_eq!(
        verified_b["mismatches"],
        serde_json::json!([]),
        "{verified_b}"
    );
    let peers = connections_of(lab.topology(), Side::B, "rbd-mirror")
        .await
        .unwrap();
    let a_osds: BTreeSet<IpAddr> = lab.a.osds().await.iter().filter_map(|s| s.global).collect();
    assert!(
        peers.iter().any(|ip| a_osds.contains(ip)),
        "rbd-mirror in B reads A's OSDs at their global IPs {a_osds:?}: {peers:?}"
    );

    let text = std::fs::read_to_string(&log).unwrap();
    let before = latencies(&text, load_started, upgrade_started);
    let during = latencies(&text, upgrade_started, upgrade_done);
    let after = latencies(&text, upgrade_done, load_done);
    assert!(
        during.0 > 0,
        "the client's writes were acknowledged while the daemons moved: {during:?}"
    );
    eprintln!(
        "upgrade scenario: {} acknowledged writes, {} verified blocks, 0 errors; mons moved in {:.1?}, mons and OSDs in {:.1}s; 4 KiB write latency ms (count, p50, p99, max) before {before:.1?}, during {during:.1?}, after {after:.1?}; B caught up {:.1?} after peering",
        summary["writes"],
        verified["blocks"],
        mon_report.elapsed,
        upgrade_done - upgrade_started,
        caught_up,
    );
}

//! The mission end to end (issue 19): two real Ceph Reef clusters whose pod networks overlap,
//! every mon and OSD bound to its pod IP and advertising its global IP with the arguments the
//! plan computes, RBD images mirrored between them through the global IPs only, a disaster
//! (every daemon of A killed) that loses nothing, the failback (resync, then the planned switch
//! back to A) and a planned failover that loses nothing (RPO 0).
//!
//! Needs root, iproute2, nftables, bind9-dnsutils and the Ceph Reef root filesystem
//! (`tests/lab/ceph-reef-root.sh`; `.ci/run` builds it) and fails, never skips, without them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use clusterset_error_chain::ErrorChain;
use clusterset_lab::mirror::{
    IMAGE_MIB, MIRROR_WITHIN, MirrorLab, connections_of, create_mirrored_image, listeners_of,
    run_mirror_scenario, take_mirror_snapshot, wait_for_content,
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
    // The resync: A's images are B's copies again (the scenario waited for their content),
    // non-primary in A, primary in B.
    assert_eq!(report.a_snapshot_after_failback_sha, report.data_sha);
    assert_eq!(report.a_primary_after_resync, (false, false));
    assert_eq!(report.b_primary_after_resync, (true, true));
    // The planned switch back: A primary without --force, B not; A's write reached B, and both
    // sides hold every byte written in A and in B.
    assert_eq!(report.a_primary_after_switch_back, (true, true));
    assert_eq!(report.b_primary_after_switch_back, (false, false));
    assert_eq!(
        report.a_after_switch_back,
        report.expected_after_switch_back
    );
    assert_eq!(
        report.b_after_switch_back,
        report.expected_after_switch_back
    );
    assert_ne!(
        report.expected_after_switch_back.0, report.expected_after_write_sha,
        "A's write after the switch back changed the journal image"
    );
    assert_ne!(
        report.expected_after_switch_back.1, report.data_sha,
        "A's write after the switch back changed the snapshot image"
    );
    // The planned failover right after a write in A: B promoted without --force reads what
    // A's client acknowledged (RPO 0); back in A, A is primary and B not, both reading the same.
    assert_eq!(report.b_primary_after_planned_failover, (true, true));
    assert_eq!(
        report.b_after_planned_failover, report.acknowledged_before_planned_failover,
        "RPO 0: no write acknowledged in A before the demotion is missing in B"
    );
    assert_ne!(
        report.acknowledged_before_planned_failover, report.expected_after_switch_back,
        "A wrote just before the planned failover"
    );
    assert_eq!(report.at_end.0, report.acknowledged_before_planned_failover);
    assert_eq!(report.at_end.1, report.acknowledged_before_planned_failover);
    assert_eq!(report.a_primary_at_end, (true, true));
    assert_eq!(report.b_primary_at_end, (false, false));

    eprintln!(
        "mirror scenario: two Reef clusters up {clusters_up:.1?}; first image in B {:.1?} after enabling; {IMAGE_MIB} MiB journal replay {:.1?}; snapshot sync {:.1?}; failover (kill A to a write acknowledged in B) {:.1?}; failback {:.1?} (resync {:.1?}); switch back (demote B to A promoted, journal and snapshot image) {:.1?}, A's 4 MiB write in B {:.1?} later; planned failover (demote A to B promoted, RPO 0) {:.1?}, back to A {:.1?}",
        report.first_mirrored,
        report.journal_replay,
        report.snapshot_sync,
        report.failover,
        report.failback,
        report.failback_resync,
        report.switch_back,
        report.switch_back_write_replicated,
        report.planned_failover,
        report.planned_return,
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
    take_mirror_snapshot(&lab.a, image).await.unwrap();
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

/// The pod IP osd.0 of A gets when its pod is restarted (A's OSDs start on .31 and .32).
const MOVED_OSD_POD: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 36);
/// Issue 32: an endpoint that moves is followed within 1 s.
const FOLLOWED_WITHIN: Duration = Duration::from_secs(1);
/// Issue 32: a gateway stopped for 60 s.
const GATEWAY_STOPPED_FOR: Duration = Duration::from_secs(60);

/// Starts `rbd_io.py load` in `site` on `image` (4 KiB blocks over 8 MiB, without pause, every
/// acknowledged write logged to `<name>.log` in the site's directory, until `<name>.stop`
/// exists); the client, its log and its stop file.
fn start_load(
    site: &CephSite,
    image: &str,
    name: &str,
) -> (tokio::process::Child, PathBuf, PathBuf) {
    let dir = site.cluster().dir().to_owned();
    let (log, stop) = (
        dir.join(format!("{name}.log")),
        dir.join(format!("{name}.stop")),
    );
    let client = site
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
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    (client, log, stop)
}

/// Waits (2 minutes at most) until the client's log `log` holds `writes` acknowledged writes;
/// on failure, the end of the log, `ceph -s` and the osdmap of `site`.
async fn wait_for_writes(site: &CephSite, log: &Path, writes: usize, what: &str) {
    let waited = poll_until(what, Duration::from_secs(120), || async {
        let count = acknowledged(log);
        Ok(((count >= writes).then_some(()), format!("{count} writes")))
    })
    .await;
    if let Err(error) = waited {
        let text = std::fs::read_to_string(log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(5).collect();
        let status = site
            .ceph(&["-s"])
            .await
            .map(|out| String::from_utf8_lossy(&out).into_owned());
        let osds = site.osd_states().await;
        panic!(
            "{}\nthe client's last log lines (newest first): {tail:#?}\nceph -s: {status:?}\nosds: {osds:?}",
            ErrorChain(&error)
        );
    }
}

/// Stops a load client (its stop file) and checks it saw no IO error; its number of writes.
async fn stop_load(client: tokio::process::Child, stop: &Path) -> serde_json::Value {
    std::fs::write(stop, "").unwrap();
    let output = tokio::time::timeout(Duration::from_secs(120), client.wait_with_output())
        .await
        .expect("the client stops within 2 minutes of its stop file")
        .unwrap();
    assert!(
        output.status.success(),
        "the client failed: {}{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    let summary: serde_json::Value = serde_json::from_slice(&output.stdout).unwrap();
    assert_eq!(summary["errors"], 0, "no client IO error: {summary}");
    summary
}

/// Every block of the load log `log` holds its last acknowledged write in `image` of `site`
/// (the log is copied into the site's directory first); how many blocks were checked.
async fn verify_load(site: &CephSite, image: &str, log: &Path) -> u64 {
    let copy = site.cluster().dir().join(format!(
        "verify-{}",
        log.file_name().unwrap().to_string_lossy()
    ));
    if copy != log {
        std::fs::copy(log, &copy).unwrap();
    }
    let verified = site
        .rbd_io(
            "verify",
            &["--image", image, "--log", &copy.to_string_lossy()],
        )
        .await
        .unwrap();
    assert_eq!(
        verified["mismatches"],
        serde_json::json!([]),
        "every acknowledged write is in {}'s {image}: {verified}",
        site.net().cluster_id
    );
    verified["blocks"].as_u64().unwrap()
}

/// Waits until B lists `image` (its mirrored copy exists).
async fn wait_for_copy_in_b(lab: &MirrorLab, image: &str) {
    poll_until(
        &format!("B has a copy of {image}"),
        MIRROR_WITHIN,
        || async {
            let listed = lab.b.rbd(&["ls", POOL]).await?;
            let names = String::from_utf8_lossy(&listed).into_owned();
            Ok((names.lines().any(|l| l == image).then_some(()), names))
        },
    )
    .await
    .unwrap();
}

/// `rbd mirror image status` of `image` in B: its state (`up+replaying`, ...) and description.
async fn status_in_b(lab: &MirrorLab, image: &str) -> (String, String) {
    let out = lab
        .b
        .rbd(&[
            "mirror",
            "image",
            "status",
            &format!("{POOL}/{image}"),
            "--format",
            "json",
        ])
        .await
        .unwrap();
    let status: serde_json::Value = serde_json::from_slice(&out).unwrap();
    (
        status["state"].as_str().unwrap_or_default().to_owned(),
        status["description"]
            .as_str()
            .unwrap_or_default()
            .to_owned(),
    )
}

/// The journal entry B's copy has replayed up to, from the description of `rbd mirror image
/// status` (`replaying, {..."non_primary_position":{"entry_tid":N,...}...}`); 0 before the
/// first.
fn replayed_entry(description: &str) -> u64 {
    let json = description
        .find('{')
        .and_then(|at| serde_json::from_str::<serde_json::Value>(&description[at..]).ok());
    json.and_then(|json| json["non_primary_position"]["entry_tid"].as_u64())
        .unwrap_or(0)
}

/// Issue 32's faults under mirroring, on one mirroring lab (both clusters with MCS, peered,
/// `rbd-mirror` in B replaying A's images through A's global IPs):
///
/// 1. "an endpoint that moves (pod restarted with a new IP) is followed within 1 s, under
///    mirroring I/O, without breaking the mirror": while a client writes to a snapshot-mode
///    image in A and mirror snapshots are taken one after another (each makes `rbd-mirror` in B
///    read what changed from A's OSDs), osd.0 of A is restarted in a new pod (a namespace of its
///    own) with a new pod IP, and its export's endpoint is changed in the gateway's state.
/// 2. "a gateway stopped for 60 s then started: mirroring resumes with nothing lost": while a
///    client writes to a journal-mode image in A, A's gateway process is stopped (SIGTERM) for
///    60 s and started again.
///
/// The endpoint move uses a snapshot-mode image: a journal-mode client once hung for good at an
/// OSD restart (docs/lab.md, "Deviations and limits"); the gateway stop restarts no OSD and uses
/// a journal-mode image, which `rbd-mirror` replays by itself as it is written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_osd_moved_to_a_new_pod_ip_and_a_gateway_stopped_for_a_minute_lose_no_mirrored_write() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let lab = TestLab::start(true).await;
    lab.peer().await;
    // B replays A's images; nothing mirrors from B to A here.
    lab.b.start_rbd_mirror().await.unwrap();

    // 1. The endpoint moves under mirroring I/O.
    let image = "moving-img";
    let name = format!("{POOL}/{image}");
    create_mirrored_image(&lab.a, image, "snapshot")
        .await
        .unwrap();
    wait_for_copy_in_b(&lab, image).await;
    let (client, log, stop) = start_load(&lab.a, image, "moving");
    wait_for_writes(
        &lab.a,
        &log,
        WRITES_PER_PHASE,
        "the client writing before the move",
    )
    .await;
    let old_export = lab.a.osd_export(0).await.unwrap();
    let global = old_export.global;
    assert_eq!(
        lab.topology()
            .gateway_dnat(Side::A)
            .await
            .unwrap()
            .get(&global),
        Some(&old_export.pod),
        "before the move {global} is DNATed to osd.0's pod"
    );
    let snapshots_done = AtomicBool::new(false);
    let snapshotting = async {
        let (mut taken, mut failed) = (0, Vec::new());
        while !snapshots_done.load(Ordering::SeqCst) {
            match lab.a.rbd(&["mirror", "image", "snapshot", &name]).await {
                Ok(_) => taken += 1,
                Err(error) => failed.push(ErrorChain(&error).to_string()),
            }
            // One after another, with a pause: the mirror is busy, the machine not swamped.
            tokio::time::sleep(Duration::from_secs(1)).await;
        }
        (taken, failed)
    };
    let moving = async {
        let move_began = Instant::now();
        let moved = lab.a.move_osd_to_new_pod(0, MOVED_OSD_POD).await.unwrap();
        let restarted_in = move_began.elapsed();
        // The lab's MCS implementation publishes the new endpoint: the gateway's state file
        // names the new pod IP, and `export` returns once the table maps the global IP to it.
        let export = lab.a.osd_export(0).await.unwrap();
        assert_eq!((export.global, export.pod), (global, MOVED_OSD_POD));
        let changed = Instant::now();
        lab.topology().export(Side::A, export).await.unwrap();
        let followed = changed.elapsed();
        assert_eq!(
            lab.topology()
                .gateway_dnat(Side::A)
                .await
                .unwrap()
                .get(&global),
            Some(&MOVED_OSD_POD),
            "after the move {global} is DNATed to osd.0's new pod"
        );
        lab.a
            .wait_for_osds_up(&BTreeMap::from([(0, moved.old_up_from)]))
            .await
            .unwrap();
        let osd = lab.a.osd_states().await.unwrap()[&0];
        assert_eq!(
            osd.front,
            Some(IpAddr::V4(global)),
            "osd.0 still advertises {global}"
        );
        assert_eq!(
            osd.back,
            Some(IpAddr::V4(MOVED_OSD_POD)),
            "osd.0's cluster address is its new pod IP"
        );
        lab.a
            .wait_for_clean_pgs(Duration::from_secs(180))
            .await
            .unwrap();
        let up_in = move_began.elapsed();
        let writes = acknowledged(&log);
        wait_for_writes(
            &lab.a,
            &log,
            writes + WRITES_PER_PHASE,
            "the client writing after the move",
        )
        .await;
        snapshots_done.store(true, Ordering::SeqCst);
        (moved, restarted_in, followed, up_in)
    };
    let ((snapshots, failed_snapshots), (moved, restarted_in, followed, up_in)) =
        tokio::join!(snapshotting, moving);
    assert!(
        failed_snapshots.is_empty(),
        "every mirror snapshot during the move was taken: {failed_snapshots:?}"
    );
    assert!(snapshots > 0, "mirror snapshots were taken during the move");
    assert!(
        !lab.topology()
            .exec(Side::A, &["ip", "-o", "addr", "show", "dev", "eth0"])
            .await
            .unwrap()
            .contains(&format!(" {}/", moved.old_pod)),
        "the old pod IP {} is gone",
        moved.old_pod
    );
    let summary = stop_load(client, &stop).await;
    let blocks = verify_load(&lab.a, image, &log).await;
    // A write after the move reaches B: the last mirror snapshot carries everything the client
    // wrote, and B's copy then reads as A's, every acknowledged block in it.
    let synced = Instant::now();
    take_mirror_snapshot(&lab.a, image).await.unwrap();
    let sum_a = lab.a.image_checksum(image).await.unwrap();
    wait_for_content(&lab.b, image, &sum_a).await.unwrap();
    let synced_in = synced.elapsed();
    assert_eq!(verify_load(&lab.b, image, &log).await, blocks);
    let peers = connections_of(lab.topology(), Side::B, "rbd-mirror")
        .await
        .unwrap();
    eprintln!(
        "endpoint move: osd.0 restarted in pod {} (netns {}) instead of {} in {restarted_in:.1?}; the DNAT of {global} followed the state file in {followed:.3?}; osd.0 up and PGs clean {up_in:.1?} after the move began; client {} writes, 0 errors, {blocks} blocks verified in A and B; {snapshots} mirror snapshots taken during the move; B read the same as A {synced_in:.1?} after the last snapshot (sha256 {}); rbd-mirror in B connected to {peers:?}",
        moved.new_pod,
        moved.netns,
        moved.old_pod,
        summary["writes"],
        &sum_a[..12],
    );
    assert!(
        followed < FOLLOWED_WITHIN,
        "the DNAT of {global} followed the move in {followed:?}, not within {FOLLOWED_WITHIN:?}"
    );

    // 2. A's gateway stopped for 60 s under mirroring. Stopped as clusterset-gateway stops
    // (SIGTERM): the process exits and leaves its table, so the established connections (the
    // client's, B's rbd-mirror's) carry on; nothing follows its state file meanwhile.
    let image = "stopped-gw-img";
    create_mirrored_image(&lab.a, image, "journal")
        .await
        .unwrap();
    wait_for_copy_in_b(&lab, image).await;
    let (client, log, stop) = start_load(&lab.a, image, "stopped-gw");
    wait_for_writes(
        &lab.a,
        &log,
        WRITES_PER_PHASE,
        "the client writing before the stop",
    )
    .await;
    let table_before = lab
        .topology()
        .gateway_table(Side::A)
        .await
        .unwrap()
        .unwrap();
    lab.topology().stop_gateway(Side::A).await.unwrap();
    let writes_at_stop = acknowledged(&log);
    assert!(
        !lab.topology().gateway_running(Side::A).await,
        "A's gateway process has exited"
    );
    assert!(
        lab.topology()
            .gateway_table(Side::A)
            .await
            .unwrap()
            .unwrap()
            .same_rules_as(&table_before),
        "the stopped gateway left its table"
    );
    let (state_at_stop, description_at_stop) = status_in_b(&lab, image).await;
    // The fault lasts its full length: this is its duration, not a wait for a condition.
    tokio::time::sleep(GATEWAY_STOPPED_FOR).await;
    assert!(
        !lab.topology().gateway_running(Side::A).await,
        "A's gateway stayed stopped"
    );
    let written_while_stopped = acknowledged(&log) - writes_at_stop;
    let (state_at_end, description_at_end) = status_in_b(&lab, image).await;
    let started_in = lab.topology().start_gateway(Side::A).await.unwrap();
    assert!(
        lab.topology()
            .gateway_table(Side::A)
            .await
            .unwrap()
            .unwrap()
            .same_rules_as(&table_before),
        "the started gateway programmed the same table"
    );
    let writes = acknowledged(&log);
    wait_for_writes(
        &lab.a,
        &log,
        writes + WRITES_PER_PHASE,
        "the client writing after the start",
    )
    .await;
    let summary = stop_load(client, &stop).await;
    let client_stopped = Instant::now();
    let blocks = verify_load(&lab.a, image, &log).await;
    let sum_a = lab.a.image_checksum(image).await.unwrap();
    wait_for_content(&lab.b, image, &sum_a).await.unwrap();
    let caught_up = client_stopped.elapsed();
    assert_eq!(verify_load(&lab.b, image, &log).await, blocks);
    let (state_after, _) = status_in_b(&lab, image).await;
    eprintln!(
        "gateway stopped {GATEWAY_STOPPED_FOR:?}: A's gateway process stopped (table left in place), {written_while_stopped} writes acknowledged meanwhile; B's copy {state_at_stop} at the stop ({description_at_stop}), {state_at_end} at its end ({description_at_end}); started again in {started_in:.3?}; client {} writes, 0 errors, {blocks} blocks verified in A and B; B read the same as A {caught_up:.1?} after the client stopped (sha256 {}), {state_after}",
        summary["writes"],
        &sum_a[..12],
    );
    assert!(
        written_while_stopped > 0,
        "the client wrote while the gateway was stopped"
    );
    assert_eq!(
        state_at_end, "up+replaying",
        "B's copy was replaying at the end of the stop: {description_at_end}"
    );
    // rbd-mirror reports the status periodically (tens of seconds apart, as seen here): within
    // the 60 s it reported progress.
    assert!(
        replayed_entry(&description_at_end) > replayed_entry(&description_at_stop),
        "B replayed A's journal through the stopped gateway's rules: at the stop {description_at_stop}, at its end {description_at_end}"
    );
}

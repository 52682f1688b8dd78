//! The mission end to end (issue 19): two real Ceph Reef clusters whose pod networks overlap,
//! every mon and OSD bound to its pod IP and advertising its global IP with the arguments the
//! plan computes, RBD images mirrored between them through the global IPs only, a disaster
//! (every daemon of A killed) that loses nothing, and the failback.
//!
//! Needs root, iproute2, nftables, bind9-dnsutils and the Ceph Reef root filesystem
//! (`tests/lab/ceph-reef-root.sh`; `.ci/run` builds it) and fails, never skips, without them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeSet;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr};
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clusterset_lab::{
    CephSite, LabDns, MGR_POD, POOL, Side, SiteSpec, Topology, back_ip, front_ip, poll_until,
    require_ceph_root, require_host,
};

/// One lab at a time: the tests share namespaces, addresses and ports.
static ONE_LAB_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const MIB: usize = 1 << 20;
/// The size of each mirrored image and of the random data written to it.
const IMAGE_MIB: usize = 64;
const JOURNAL_IMAGE: &str = "journal-img";
const SNAPSHOT_IMAGE: &str = "snapshot-img";
/// How long mirroring, a resync or a restart may take on a busy 2-CPU machine.
const MIRROR_WITHIN: Duration = Duration::from_secs(300);

/// Fields drop in order: daemons first, the network last.
struct MirrorLab {
    a: CephSite,
    b: CephSite,
    _dns: Arc<LabDns>,
    topology: Arc<Topology>,
    dir: tempfile::TempDir,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

/// The last lines of every daemon's log of both sites under `dir`.
fn print_logs(dir: &Path) {
    for site in ["east", "west"] {
        let Ok(logs) = std::fs::read_dir(dir.join(site).join("log")) else {
            continue;
        };
        let mut paths: Vec<_> = logs.flatten().map(|e| e.path()).collect();
        paths.sort();
        for path in paths {
            let text =
                String::from_utf8_lossy(&std::fs::read(&path).unwrap_or_default()).into_owned();
            let lines: Vec<&str> = text.lines().collect();
            eprintln!("--- {} (last 25 of {} lines)", path.display(), lines.len());
            for line in &lines[lines.len().saturating_sub(25)..] {
                eprintln!("{line}");
            }
        }
    }
}

/// When a test fails, the last lines of every daemon's log go with the failure.
impl Drop for MirrorLab {
    fn drop(&mut self) {
        if std::thread::panicking() {
            print_logs(self.dir.path());
        }
    }
}

impl MirrorLab {
    /// Both clusters with MCS on from the start, mirroring configured both ways from A's peer
    /// bootstrap token, `rbd-mirror` running in both.
    async fn start() -> (MirrorLab, Timings) {
        let started = Instant::now();
        let lab = MirrorLab::start_clusters(true).await;
        let clusters_up = started.elapsed();
        lab.peer().await;
        lab.a.start_rbd_mirror().await.unwrap();
        lab.b.start_rbd_mirror().await.unwrap();
        let timings = Timings {
            clusters_up,
            ..Timings::default()
        };
        (lab, timings)
    }

    /// Clusters A (MCS on if `a_mcs`) and B (MCS on), not yet peered.
    async fn start_clusters(a_mcs: bool) -> MirrorLab {
        require_host().unwrap();
        let install = require_ceph_root().unwrap();
        let serial = ONE_LAB_AT_A_TIME.lock().await;
        let topology = Arc::new(Topology::create().await.unwrap());
        let a = topology.cluster(Side::A).clone();
        let dns_pod = Ipv4Addr::new(10, 244, 0, 53);
        topology.add_pod_ip(Side::A, dns_pod).await.unwrap();
        topology
            .map_global(Side::A, "242.1.0.53".parse().unwrap(), dns_pod)
            .await
            .unwrap();
        let dns = Arc::new(LabDns::start(&a.netns, (dns_pod, 53).into()).await.unwrap());
        let dir = tempfile::tempdir().unwrap();
        let spec = |side, fsid: &str, site: &str| SiteSpec {
            side,
            fsid: fsid.into(),
            site_name: site.into(),
            mcs: side == Side::B || a_mcs,
            osds: 2,
        };
        let (site_a, site_b) = tokio::join!(
            CephSite::start(
                spec(Side::A, "5d1c3c4e-0a1b-4c2d-8e3f-00000000000a", "east"),
                topology.clone(),
                dns.clone(),
                install.clone(),
                dir.path().join("east"),
            ),
            CephSite::start(
                spec(Side::B, "5d1c3c4e-0a1b-4c2d-8e3f-00000000000b", "west"),
                topology.clone(),
                dns.clone(),
                install.clone(),
                dir.path().join("west"),
            ),
        );
        let (site_a, site_b) = match (site_a, site_b) {
            (Ok(a), Ok(b)) => (a, b),
            (a, b) => {
                print_logs(dir.path());
                panic!(
                    "the clusters did not start: east {:?}; west {:?}",
                    a.err(),
                    b.err()
                );
            }
        };
        MirrorLab {
            a: site_a,
            b: site_b,
            _dns: dns,
            topology,
            dir,
            _serial: serial,
        }
    }

    /// A's peer bootstrap token, its `mon_host` set to the plan's peer-token `mon_host` (A's
    /// global IPs, as the operator does), imported in B for both directions.
    async fn peer(&self) {
        let created = self
            .a
            .rbd(&[
                "mirror",
                "pool",
                "peer",
                "bootstrap",
                "create",
                "--site-name",
                "east",
                POOL,
            ])
            .await
            .unwrap();
        let token_file = self.dir.path().join("east").join("token");
        std::fs::write(&token_file, &created).unwrap();
        let plan = self.a.plan().await.unwrap();
        assert!(
            plan.readiness().ready,
            "A's plan is ready: {:?}",
            plan.readiness()
        );
        let peer_mon_host = plan.peer_token_mon_host().to_owned();
        assert_eq!(
            peer_mon_host,
            "242.1.0.1:6789,242.1.0.2:6789,242.1.0.3:6789"
        );
        let rewritten = self
            .a
            .rbd_io(
                "token",
                &[
                    "--file",
                    &token_file.to_string_lossy(),
                    "--mon-host",
                    &peer_mon_host,
                ],
            )
            .await
            .unwrap();
        assert_eq!(rewritten["fsid"], "5d1c3c4e-0a1b-4c2d-8e3f-00000000000a");
        let for_b = self.dir.path().join("west").join("token-from-east");
        std::fs::write(&for_b, rewritten["token"].as_str().unwrap()).unwrap();
        self.b
            .rbd(&[
                "mirror",
                "pool",
                "peer",
                "bootstrap",
                "import",
                "--site-name",
                "west",
                "--direction",
                "rx-tx",
                POOL,
                &for_b.to_string_lossy(),
            ])
            .await
            .unwrap();
        let info = self
            .b
            .rbd(&["mirror", "pool", "info", POOL, "--all", "--format", "json"])
            .await
            .unwrap();
        let info: serde_json::Value = serde_json::from_slice(&info).unwrap();
        let peers = info["peers"].as_array().unwrap();
        assert_eq!(peers.len(), 1, "B has one peer: {info}");
        assert_eq!(peers[0]["site_name"], "east");
        assert_eq!(
            peers[0]["mon_host"], peer_mon_host,
            "B reaches A by the plan's peer-token mon_host: {info}"
        );
    }
}

#[derive(Debug, Default)]
struct Timings {
    clusters_up: Duration,
    first_mirrored: Duration,
    journal_replay: Duration,
    snapshot_sync: Duration,
    failover: Duration,
    failback_resync: Duration,
}

/// `bytes` random bytes from the kernel.
fn random_bytes(bytes: usize) -> Vec<u8> {
    let mut data = vec![0; bytes];
    std::fs::File::open("/dev/urandom")
        .unwrap()
        .read_exact(&mut data)
        .unwrap();
    data
}

/// The sha256 of a file, by coreutils' `sha256sum` (an outside judge of what librbd read).
fn sha256_file(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    assert!(out.status.success(), "sha256sum {}", path.display());
    String::from_utf8(out.stdout)
        .unwrap()
        .split_whitespace()
        .next()
        .unwrap()
        .to_owned()
}

/// Creates `image` in `site` with mirroring in `mode`, and writes `data` to it; returns the
/// sha256 the client read back from its own write path.
async fn create_and_fill(site: &CephSite, image: &str, mode: &str, data_file: &Path) -> String {
    let features = if mode == "journal" {
        "layering,exclusive-lock,journaling"
    } else {
        "layering,exclusive-lock"
    };
    let size = format!("{IMAGE_MIB}M");
    let name = format!("{POOL}/{image}");
    site.rbd(&[
        "create",
        &name,
        "--size",
        &size,
        "--image-feature",
        features,
    ])
    .await
    .unwrap();
    site.rbd(&["mirror", "image", "enable", &name, mode])
        .await
        .unwrap();
    let filled = site
        .rbd_io(
            "fill",
            &["--image", image, "--file", &data_file.to_string_lossy()],
        )
        .await
        .unwrap();
    assert_eq!(filled["bytes"], IMAGE_MIB * MIB);
    filled["sha256"].as_str().unwrap().to_owned()
}

/// Waits until `image` in `site` reads as `want`; how long that took.
async fn wait_for_content(site: &CephSite, image: &str, want: &str, what: &str) -> Duration {
    let started = Instant::now();
    poll_until(what, MIRROR_WITHIN, || async {
        let sum = site.image_checksum(image).await?;
        Ok(((sum == want).then_some(()), format!("sha256 {sum}")))
    })
    .await
    .unwrap();
    started.elapsed()
}

/// The remote addresses of every TCP connection `program` has in `side`'s namespace.
async fn peers_of(topology: &Topology, side: Side, program: &str) -> BTreeSet<IpAddr> {
    let out = topology
        .exec(side, &["ss", "-tnpH", "state", "established"])
        .await
        .unwrap();
    out.lines()
        .filter(|line| line.contains(&format!("\"{program}\"")))
        // With a state filter ss leaves out the State column: Recv-Q, Send-Q, Local, Peer, ...
        .filter_map(|line| line.split_whitespace().nth(3))
        .filter_map(|peer| peer.rsplit_once(':')?.0.parse().ok())
        .collect()
}

/// The local addresses `program` listens on in `side`'s namespace.
async fn listeners_of(topology: &Topology, side: Side, program: &str) -> BTreeSet<IpAddr> {
    let out = topology.exec(side, &["ss", "-tlnpH"]).await.unwrap();
    out.lines()
        .filter(|line| line.contains(&format!("\"{program}\"")))
        // State, Recv-Q, Send-Q, Local Address:Port, ...
        .filter_map(|line| line.split_whitespace().nth(3))
        .filter_map(|local| local.rsplit_once(':')?.0.parse().ok())
        .collect()
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
    let listening = listeners_of(&lab.topology, site.spec().side, "ceph-osd").await;
    assert_eq!(
        listening, pods,
        "{}'s OSDs listen on their pod IPs only",
        net.cluster_id
    );
    let plan = site.plan().await.unwrap();
    assert!(plan.readiness().ready, "{:?}", plan.readiness());
    let mon_listeners = listeners_of(&lab.topology, site.spec().side, "ceph-mon").await;
    assert!(
        mon_listeners
            .iter()
            .all(|ip| matches!(ip, IpAddr::V4(v4) if net.pod_cidr.contains(v4))),
        "{}'s mons listen on pod IPs only: {mon_listeners:?}",
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
    let (lab, mut timings) = MirrorLab::start().await;
    assert_bound_to_pods_advertising_globals(&lab, &lab.a).await;
    assert_bound_to_pods_advertising_globals(&lab, &lab.b).await;

    // 64 MiB of random data into a journal-mode and a snapshot-mode image in A.
    let data = random_bytes(IMAGE_MIB * MIB);
    let data_file = lab.dir.path().join("east").join("data");
    std::fs::write(&data_file, &data).unwrap();
    let sha_a = sha256_file(&data_file);
    let mirror_started = Instant::now();
    let journal_sum = create_and_fill(&lab.a, JOURNAL_IMAGE, "journal", &data_file).await;
    let written = Instant::now();
    assert_eq!(journal_sum, sha_a, "the client wrote what it was given");
    timings.first_mirrored = poll_until("B has the journal image", MIRROR_WITHIN, || async {
        let listed = lab.b.rbd(&["ls", POOL]).await?;
        let names = String::from_utf8_lossy(&listed).into_owned();
        Ok((
            names
                .lines()
                .any(|l| l == JOURNAL_IMAGE)
                .then(|| mirror_started.elapsed()),
            names,
        ))
    })
    .await
    .unwrap();
    wait_for_content(
        &lab.b,
        JOURNAL_IMAGE,
        &sha_a,
        "B's journal image equals A's",
    )
    .await;
    timings.journal_replay = written.elapsed();
    let snapshot_sum = create_and_fill(&lab.a, SNAPSHOT_IMAGE, "snapshot", &data_file).await;
    assert_eq!(snapshot_sum, sha_a);
    lab.a
        .rbd(&[
            "mirror",
            "image",
            "snapshot",
            &format!("{POOL}/{SNAPSHOT_IMAGE}"),
        ])
        .await
        .unwrap();
    timings.snapshot_sync = wait_for_content(
        &lab.b,
        SNAPSHOT_IMAGE,
        &sha_a,
        "B's snapshot image equals A's",
    )
    .await;

    // rbd-mirror in B reached A only through A's global IPs. The pod CIDR is the same in both
    // clusters, so a pod IP seen from B is one of B's own pods (packets to it never leave B's
    // namespace): only B's mgr, which Rook does not export, may be one; everything else is a
    // global IP, of A (the peer's mons and OSDs) or of B (its own mons and OSDs, by hairpin).
    let peers = peers_of(&lab.topology, Side::B, "rbd-mirror").await;
    let a_net = lab.topology.cluster(Side::A).clone();
    let b_net = lab.topology.cluster(Side::B).clone();
    let in_a = |ip: &IpAddr| matches!(ip, IpAddr::V4(v4) if a_net.global_cidr.contains(v4));
    let in_b = |ip: &IpAddr| matches!(ip, IpAddr::V4(v4) if b_net.global_cidr.contains(v4));
    let b_mgr = IpAddr::V4(MGR_POD);
    assert!(
        peers.iter().all(|ip| in_a(ip) || in_b(ip) || *ip == b_mgr),
        "rbd-mirror in B talks to global IPs (and its own mgr) only: {peers:?}"
    );
    let a_osds: BTreeSet<IpAddr> = lab.a.osds().await.iter().filter_map(|s| s.global).collect();
    assert!(
        peers.iter().any(|ip| a_osds.contains(ip)),
        "rbd-mirror in B read A's OSDs through their global IPs {a_osds:?}: {peers:?}"
    );

    // Disaster: every daemon of A dies at once. B takes over with what A had acknowledged.
    let disaster = Instant::now();
    lab.a.kill_all().await;
    for image in [JOURNAL_IMAGE, SNAPSHOT_IMAGE] {
        lab.b
            .rbd(&[
                "mirror",
                "image",
                "promote",
                "--force",
                &format!("{POOL}/{image}"),
            ])
            .await
            .unwrap();
    }
    let new_head = random_bytes(4 * MIB);
    let head_file = lab.dir.path().join("west").join("head");
    std::fs::write(&head_file, &new_head).unwrap();
    lab.b
        .rbd_io(
            "fill",
            &[
                "--image",
                JOURNAL_IMAGE,
                "--file",
                &head_file.to_string_lossy(),
            ],
        )
        .await
        .unwrap();
    timings.failover = disaster.elapsed();
    assert_eq!(
        lab.b.image_checksum(SNAPSHOT_IMAGE).await.unwrap(),
        sha_a,
        "the promoted snapshot image holds what A acknowledged"
    );
    let mut expected = data.clone();
    expected[..4 * MIB].copy_from_slice(&new_head);
    let expected_file = lab.dir.path().join("west").join("expected");
    std::fs::write(&expected_file, &expected).unwrap();
    let sha_b = sha256_file(&expected_file);
    assert_eq!(
        lab.b.image_checksum(JOURNAL_IMAGE).await.unwrap(),
        sha_b,
        "B accepted the write on top of everything A had acknowledged"
    );

    // Failback: A comes back, its stale primary is demoted and resynced from B.
    lab.a.restart().await.unwrap();
    lab.a.start_rbd_mirror().await.unwrap();
    let name = format!("{POOL}/{JOURNAL_IMAGE}");
    lab.a
        .rbd(&["mirror", "image", "demote", &name])
        .await
        .unwrap();
    let resync = Instant::now();
    lab.a
        .rbd(&["mirror", "image", "resync", &name])
        .await
        .unwrap();
    wait_for_content(
        &lab.a,
        JOURNAL_IMAGE,
        &sha_b,
        "A's resynced image equals B's",
    )
    .await;
    timings.failback_resync = resync.elapsed();

    eprintln!(
        "mirror scenario: two Reef clusters up {:.1?}; first image in B {:.1?} after enabling; {IMAGE_MIB} MiB journal replay {:.1?}; snapshot sync {:.1?}; failover (kill A to a write acknowledged in B) {:.1?}; failback resync {:.1?}",
        timings.clusters_up,
        timings.first_mirrored,
        timings.journal_replay,
        timings.snapshot_sync,
        timings.failover,
        timings.failback_resync,
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
    use mon_failover::{Addressing, Config, Driver, FileStateStore, Machine, RunOptions};

    // A without MCS: mons and OSDs on pod IPs, nothing of it reachable from B.
    let lab = MirrorLab::start_clusters(false).await;
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
            "layering,exclusive-lock,journaling",
        ])
        .await
        .unwrap();
    lab.a
        .rbd(&["mirror", "image", "enable", &name, "journal"])
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
    let phase = |writes: usize, what: &'static str| {
        let log = log.clone();
        async move {
            poll_until(what, Duration::from_secs(120), || {
                let log = log.clone();
                async move {
                    let count = acknowledged(&log);
                    Ok(((count >= writes).then_some(()), format!("{count} writes")))
                }
            })
            .await
            .unwrap();
        }
    };
    phase(WRITES_PER_PHASE, "the client writing before the upgrade").await;

    // MCS on: the plan wants every mon replaced and every OSD on its global IP.
    let upgrade_started = epoch_seconds();
    let writes_before = acknowledged(&log);
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
    let writes_during = acknowledged(&log) - writes_before;
    assert!(
        writes_during > 0,
        "the client kept writing while the daemons moved"
    );
    let plan = lab.a.plan().await.unwrap();
    assert!(plan.readiness().ready, "{:?}", plan.readiness());
    assert_bound_to_pods_advertising_globals(&lab, &lab.a).await;
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
    let output = load.wait_with_output().await.unwrap();
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
    let sum_a = lab.a.image_checksum(image).await.unwrap();
    wait_for_content(
        &lab.b,
        image,
        &sum_a,
        "B's copy of the live image equals A's",
    )
    .await;
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
    let peers = peers_of(&lab.topology, Side::B, "rbd-mirror").await;
    let a_osds: BTreeSet<IpAddr> = lab.a.osds().await.iter().filter_map(|s| s.global).collect();
    assert!(
        peers.iter().any(|ip| a_osds.contains(ip)),
        "rbd-mirror in B reads A's OSDs at their global IPs {a_osds:?}: {peers:?}"
    );

    let text = std::fs::read_to_string(&log).unwrap();
    let before = latencies(&text, load_started, upgrade_started);
    let during = latencies(&text, upgrade_started, upgrade_done);
    let after = latencies(&text, upgrade_done, load_done);
    eprintln!(
        "upgrade scenario: {} acknowledged writes, {} verified blocks, 0 errors; mons moved in {:.1?}, mons and OSDs in {:.1}s; 4 KiB write latency ms (count, p50, p99, max) before {before:.1?}, during {during:.1?}, after {after:.1?}; B caught up {:.1?} after peering",
        summary["writes"],
        verified["blocks"],
        mon_report.elapsed,
        upgrade_done - upgrade_started,
        caught_up,
    );
}

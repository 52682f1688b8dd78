//! The mission end to end: two Ceph clusters whose pod networks overlap, RBD images mirrored
//! between them through global IPs, the loss of one cluster, and the failback. Each stage is a
//! function here, used by the lab's tests (which check what each stage reports) and by the
//! `clusterset-lab mirror` demo (which prints it).

use std::collections::BTreeSet;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mon_failover_io::CephInstall;

use crate::ceph::step;
use crate::{CephSite, LabDns, LabError, POOL, PodExport, Side, SiteSpec, Topology, poll_until};

/// One MiB.
pub const MIB: usize = 1 << 20;
/// The size of each mirrored image and of the random data written to it.
pub const IMAGE_MIB: usize = 64;
/// The journal-mode image of the scenario.
pub const JOURNAL_IMAGE: &str = "journal-img";
/// The snapshot-mode image of the scenario.
pub const SNAPSHOT_IMAGE: &str = "snapshot-img";
/// How long mirroring, a resync or a restart may take on a busy 2-CPU machine.
pub const MIRROR_WITHIN: Duration = Duration::from_secs(300);
/// The fsid of cluster A ("east").
pub const FSID_EAST: &str = "5d1c3c4e-0a1b-4c2d-8e3f-00000000000a";
/// The fsid of cluster B ("west").
pub const FSID_WEST: &str = "5d1c3c4e-0a1b-4c2d-8e3f-00000000000b";

/// Two Ceph clusters on the lab's network, with the clusterset DNS server in A. Fields drop in
/// order: daemons first, the network last.
pub struct MirrorLab {
    /// Cluster A, "east": the primary.
    pub a: CephSite,
    /// Cluster B, "west": the peer, with the same pod CIDR.
    pub b: CephSite,
    dns: Arc<LabDns>,
    topology: Arc<Topology>,
    dir: PathBuf,
}

impl std::fmt::Debug for MirrorLab {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MirrorLab")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

/// The export of the clusterset DNS server in cluster A: its pod IP at global IP 242.1.0.53.
pub fn dns_export(pod: Ipv4Addr) -> PodExport {
    PodExport {
        namespace: DNS_NAMESPACE.to_owned(),
        service: DNS_SERVICE.to_owned(),
        global: Ipv4Addr::new(242, 1, 0, 53),
        pod,
    }
}

/// The namespace of the clusterset DNS server's Service in the gateways' state.
pub const DNS_NAMESPACE: &str = "clusterset-system";
/// The clusterset DNS server's Service in the gateways' state.
pub const DNS_SERVICE: &str = "clusterset-dns";

/// What peering the two clusters produced.
#[derive(Debug, Clone)]
pub struct Peering {
    /// The `mon_host` the plan of A gives its peer token (A's global IPs).
    pub plan_mon_host: String,
    /// The `mon_host` A's own token carried before it was replaced.
    pub token_mon_host: String,
    /// `rbd mirror pool info --all` in B, after the import.
    pub pool_info_in_b: serde_json::Value,
}

impl MirrorLab {
    /// Creates the lab's network, the DNS server in A, and both clusters (A with MCS on if
    /// `a_mcs`, B always with MCS), their files under `dir`, their programs from `install`.
    pub async fn start(install: CephInstall, dir: &Path, a_mcs: bool) -> Result<Self, LabError> {
        let topology = Arc::new(Topology::create().await?);
        let a = topology.cluster(Side::A).clone();
        let dns_pod = Ipv4Addr::new(10, 244, 0, 53);
        topology.add_pod_ip(Side::A, dns_pod).await?;
        topology.export(Side::A, dns_export(dns_pod)).await?;
        let dns = Arc::new(LabDns::start(&a.netns, (dns_pod, 53).into()).await?);
        let spec = |side, fsid: &str, site: &str| SiteSpec {
            side,
            fsid: fsid.into(),
            site_name: site.into(),
            mcs: side == Side::B || a_mcs,
            osds: 2,
        };
        let (site_a, site_b) = tokio::join!(
            CephSite::start(
                spec(Side::A, FSID_EAST, "east"),
                topology.clone(),
                dns.clone(),
                install.clone(),
                dir.join("east"),
            ),
            CephSite::start(
                spec(Side::B, FSID_WEST, "west"),
                topology.clone(),
                dns.clone(),
                install,
                dir.join("west"),
            ),
        );
        Ok(MirrorLab {
            a: site_a?,
            b: site_b?,
            dns,
            topology,
            dir: dir.to_owned(),
        })
    }

    /// The lab's network.
    pub fn topology(&self) -> &Topology {
        &self.topology
    }

    /// The clusterset DNS server.
    pub fn dns(&self) -> &LabDns {
        &self.dns
    }

    /// The directory of both clusters' files.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Peers the clusters as the operator does: A's peer bootstrap token, its `mon_host`
    /// replaced by the plan's peer-token `mon_host` (A's global IPs), imported in B for both
    /// directions. Fails if A's plan is not ready (its mons not on global IPs).
    pub async fn peer(&self) -> Result<Peering, LabError> {
        let created = self
            .a
            .rbd(&[
                "mirror",
                "pool",
                "peer",
                "bootstrap",
                "create",
                "--site-name",
                &self.a.spec().site_name,
                POOL,
            ])
            .await?;
        let token_file = self.a.cluster().dir().join("token");
        std::fs::write(&token_file, &created).map_err(step("writing A's token"))?;
        let plan = self.a.plan().await?;
        if !plan.readiness().ready {
            return Err(LabError::Step {
                step: "peering".into(),
                source: format!("A's plan is not ready: {:?}", plan.readiness()).into(),
            });
        }
        let plan_mon_host = plan.peer_token_mon_host().to_owned();
        let rewritten = self
            .a
            .rbd_io(
                "token",
                &[
                    "--file",
                    &token_file.to_string_lossy(),
                    "--mon-host",
                    &plan_mon_host,
                ],
            )
            .await?;
        let token = rewritten["token"].as_str().ok_or_else(|| LabError::Step {
            step: "rewriting A's peer token".into(),
            source: format!("rbd_io.py token answered no token: {rewritten}").into(),
        })?;
        let for_b = self.b.cluster().dir().join("token-from-a");
        std::fs::write(&for_b, token).map_err(step("writing the token for B"))?;
        self.b
            .rbd(&[
                "mirror",
                "pool",
                "peer",
                "bootstrap",
                "import",
                "--site-name",
                &self.b.spec().site_name,
                "--direction",
                "rx-tx",
                POOL,
                &for_b.to_string_lossy(),
            ])
            .await?;
        let info = self
            .b
            .rbd(&["mirror", "pool", "info", POOL, "--all", "--format", "json"])
            .await?;
        Ok(Peering {
            plan_mon_host,
            token_mon_host: rewritten["was"].as_str().unwrap_or_default().to_owned(),
            pool_info_in_b: serde_json::from_slice(&info)
                .map_err(step("parsing `rbd mirror pool info`"))?,
        })
    }
}

/// Writes `bytes` random bytes (from the kernel) to `path`; returns them.
pub fn random_file(path: &Path, bytes: usize) -> Result<Vec<u8>, LabError> {
    let mut data = vec![0; bytes];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut random| random.read_exact(&mut data))
        .map_err(step("reading /dev/urandom"))?;
    std::fs::write(path, &data).map_err(step(format!("writing {}", path.display())))?;
    Ok(data)
}

/// The sha256 of a file, by coreutils' `sha256sum`: an outside judge of what librbd read.
pub fn sha256_file(path: &Path) -> Result<String, LabError> {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .map_err(step("running sha256sum"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    match text.split_whitespace().next() {
        Some(sum) if out.status.success() => Ok(sum.to_owned()),
        _ => Err(LabError::Step {
            step: format!("sha256sum {}", path.display()),
            source: String::from_utf8_lossy(&out.stderr).into_owned().into(),
        }),
    }
}

/// Creates `image` (`IMAGE_MIB` MiB) in `site` with mirroring enabled in `mode` (`journal` or
/// `snapshot`).
pub async fn create_mirrored_image(
    site: &CephSite,
    image: &str,
    mode: &str,
) -> Result<(), LabError> {
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
    .await?;
    site.rbd(&["mirror", "image", "enable", &name, mode])
        .await?;
    Ok(())
}

/// Writes `data_file` to `image` in `site` from offset 0; returns the sha256 of what the client
/// wrote.
pub async fn fill_image(
    site: &CephSite,
    image: &str,
    data_file: &Path,
) -> Result<String, LabError> {
    let filled = site
        .rbd_io(
            "fill",
            &["--image", image, "--file", &data_file.to_string_lossy()],
        )
        .await?;
    filled["sha256"]
        .as_str()
        .map(str::to_owned)
        .ok_or_else(|| LabError::Step {
            step: format!("filling {image}"),
            source: format!("rbd_io.py fill answered no sha256: {filled}").into(),
        })
}

/// Whether `image` in `site` is its primary (`rbd info`'s `mirroring.primary`).
pub async fn is_primary(site: &CephSite, image: &str) -> Result<bool, LabError> {
    let info = site
        .rbd(&["info", &format!("{POOL}/{image}"), "--format", "json"])
        .await?;
    let info: serde_json::Value =
        serde_json::from_slice(&info).map_err(step("parsing `rbd info`"))?;
    info["mirroring"]["primary"]
        .as_bool()
        .ok_or_else(|| LabError::Step {
            step: format!("reading whether {image} is primary"),
            source: format!("`rbd info` has no mirroring.primary: {info}").into(),
        })
}

/// Waits until `image` in `site` reads as `want` (sha256); how long that took.
pub async fn wait_for_content(
    site: &CephSite,
    image: &str,
    want: &str,
) -> Result<Duration, LabError> {
    let started = Instant::now();
    let what = format!("{image} in {} with sha256 {want}", site.net().cluster_id);
    poll_until(&what, MIRROR_WITHIN, || async {
        let sum = site.image_checksum(image).await?;
        Ok(((sum == want).then_some(()), format!("sha256 {sum}")))
    })
    .await?;
    Ok(started.elapsed())
}

/// The IP of `ip:port` or `[ip]:port` as `ss` prints it.
fn ss_ip(address: &str) -> Result<IpAddr, LabError> {
    address
        .rsplit_once(':')
        .map(|(ip, _)| ip.trim_start_matches('[').trim_end_matches(']'))
        .and_then(|ip| ip.parse().ok())
        .ok_or_else(|| LabError::Step {
            step: "reading ss".into(),
            source: format!("{address:?} is no ip:port (a wildcard listener?)").into(),
        })
}

/// The `column`-th field (from 0) of every line of `ss` output that names `program`, as IPs.
async fn ss_column(
    topology: &Topology,
    side: Side,
    args: &[&str],
    program: &str,
    column: usize,
) -> Result<BTreeSet<IpAddr>, LabError> {
    let out = topology.exec(side, args).await?;
    out.lines()
        .filter(|line| line.contains(&format!("\"{program}\"")))
        .map(|line| {
            line.split_whitespace()
                .nth(column)
                .ok_or_else(|| LabError::Step {
                    step: "reading ss".into(),
                    source: format!("no column {column} in {line:?}").into(),
                })
                .and_then(ss_ip)
        })
        .collect()
}

/// The remote addresses of every established TCP connection of `program` in `side`'s pods
/// namespace (`ss -tnp`).
pub async fn connections_of(
    topology: &Topology,
    side: Side,
    program: &str,
) -> Result<BTreeSet<IpAddr>, LabError> {
    // With a state filter ss leaves out the State column: Recv-Q, Send-Q, Local, Peer, ...
    let args = ["ss", "-tnpH", "state", "established"];
    ss_column(topology, side, &args, program, 3).await
}

/// The local addresses `program` listens on in `side`'s pods namespace (`ss -tlnp`); a
/// wildcard listener (`*:port`, `0.0.0.0` is an IP) is an error.
pub async fn listeners_of(
    topology: &Topology,
    side: Side,
    program: &str,
) -> Result<BTreeSet<IpAddr>, LabError> {
    // State, Recv-Q, Send-Q, Local Address:Port, ...
    ss_column(topology, side, &["ss", "-tlnpH"], program, 3).await
}

/// What the mirroring and disaster scenario saw, stage by stage.
#[derive(Debug, Clone, Default)]
pub struct MirrorReport {
    /// The sha256 of the random data written in A.
    pub data_sha: String,
    /// The sha256 of the journal image as A's client wrote it.
    pub journal_written_sha: String,
    /// The sha256 of the journal image read back in A after the write.
    pub journal_in_a_sha: String,
    /// The sha256 of the snapshot image as A's client wrote it.
    pub snapshot_written_sha: String,
    /// From enabling mirroring on the journal image to its copy existing in B.
    pub first_mirrored: Duration,
    /// From the end of the 64 MiB write in A to B's journal image reading the same.
    pub journal_replay: Duration,
    /// From the mirror snapshot in A to B's snapshot image reading the same.
    pub snapshot_sync: Duration,
    /// Where `rbd-mirror` in B was connected while it replayed.
    pub rbd_mirror_peers_in_b: BTreeSet<IpAddr>,
    /// From the kill of every daemon of A to a write acknowledged in B's promoted image.
    pub failover: Duration,
    /// The sha256 of B's promoted snapshot image.
    pub promoted_snapshot_sha: String,
    /// The sha256 B's journal image must have after its write (computed from the data).
    pub expected_after_write_sha: String,
    /// The sha256 B's journal image has after its write.
    pub b_after_write_sha: String,
    /// From A's restart to A's resynced image reading as B's.
    pub failback: Duration,
    /// Of it, from `rbd mirror image resync` in A to both images reading as B's.
    pub failback_resync: Duration,
    /// The sha256 of A's snapshot image after the failback.
    pub a_snapshot_after_failback_sha: String,
    /// Whether A's journal and snapshot images are primary after the failback.
    pub a_primary_after_failback: (bool, bool),
    /// Whether B's journal and snapshot images are primary after the failback.
    pub b_primary_after_failback: (bool, bool),
}

/// A stage of the scenario, as it finishes: its name, how long it took, what it saw.
#[derive(Debug, Clone)]
pub struct Stage {
    /// What the stage did.
    pub name: &'static str,
    /// How long it took.
    pub took: Duration,
    /// What it saw, in a line.
    pub detail: String,
}

/// Runs the mirroring and disaster scenario on a peered lab with `rbd-mirror` running in both
/// clusters, calling `on_stage` after each stage.
///
/// 64 MiB of random data into a journal-mode and a snapshot-mode image in A, both replicated
/// to B; every daemon of A killed; both images force-promoted in B, which takes a write; A
/// restarted, both its stale primaries demoted and resynced from B.
pub async fn run_mirror_scenario(
    lab: &MirrorLab,
    mut on_stage: impl FnMut(&Stage),
) -> Result<MirrorReport, LabError> {
    let mut report = MirrorReport::default();
    let mut stage = |name, took, detail: String| on_stage(&Stage { name, took, detail });

    let data_file = lab.a.cluster().dir().join("data");
    let data = random_file(&data_file, IMAGE_MIB * MIB)?;
    report.data_sha = sha256_file(&data_file)?;
    create_mirrored_image(&lab.a, JOURNAL_IMAGE, "journal").await?;
    let enabled = Instant::now();
    // B's copy appears while A's client writes: watch for it during the write.
    let appears = poll_until("B has the journal image", MIRROR_WITHIN, || async {
        let listed = lab.b.rbd(&["ls", POOL]).await?;
        let names = String::from_utf8_lossy(&listed).into_owned();
        let there = names.lines().any(|l| l == JOURNAL_IMAGE);
        Ok((there.then(|| enabled.elapsed()), names))
    });
    let (written, appeared) = tokio::join!(
        async {
            let sha = fill_image(&lab.a, JOURNAL_IMAGE, &data_file).await;
            (sha, Instant::now())
        },
        appears
    );
    let (journal_sha, written) = written;
    report.journal_written_sha = journal_sha?;
    report.first_mirrored = appeared?;
    report.journal_in_a_sha = lab.a.image_checksum(JOURNAL_IMAGE).await?;
    wait_for_content(&lab.b, JOURNAL_IMAGE, &report.journal_written_sha).await?;
    report.journal_replay = written.elapsed();
    stage(
        "journal-mode image mirrored",
        enabled.elapsed(),
        format!(
            "{IMAGE_MIB} MiB written in A; the image existed in B {:.1?} after mirroring was enabled, and read the same {:.1?} after the write ended (sha256 {})",
            report.first_mirrored,
            report.journal_replay,
            &report.data_sha[..12]
        ),
    );

    let started = Instant::now();
    create_mirrored_image(&lab.a, SNAPSHOT_IMAGE, "snapshot").await?;
    report.snapshot_written_sha = fill_image(&lab.a, SNAPSHOT_IMAGE, &data_file).await?;
    let snapshot = Instant::now();
    lab.a
        .rbd(&[
            "mirror",
            "image",
            "snapshot",
            &format!("{POOL}/{SNAPSHOT_IMAGE}"),
        ])
        .await?;
    wait_for_content(&lab.b, SNAPSHOT_IMAGE, &report.snapshot_written_sha).await?;
    report.snapshot_sync = snapshot.elapsed();
    report.rbd_mirror_peers_in_b = connections_of(lab.topology(), Side::B, "rbd-mirror").await?;
    stage(
        "snapshot-mode image mirrored",
        started.elapsed(),
        format!(
            "mirror snapshot synced in {:.1?}; rbd-mirror in B connected to {:?}",
            report.snapshot_sync, report.rbd_mirror_peers_in_b
        ),
    );

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
            .await?;
    }
    let head_file = lab.b.cluster().dir().join("head");
    let head = random_file(&head_file, 4 * MIB)?;
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
        .await?;
    report.failover = disaster.elapsed();
    report.promoted_snapshot_sha = lab.b.image_checksum(SNAPSHOT_IMAGE).await?;
    let mut expected = data;
    expected[..head.len()].copy_from_slice(&head);
    let expected_file = lab.b.cluster().dir().join("expected");
    std::fs::write(&expected_file, &expected).map_err(step("writing the expected image"))?;
    report.expected_after_write_sha = sha256_file(&expected_file)?;
    report.b_after_write_sha = lab.b.image_checksum(JOURNAL_IMAGE).await?;
    stage(
        "disaster: A lost, B promoted",
        report.failover,
        format!(
            "every daemon of A killed; images force-promoted in B and 4 MiB written there {:.1?} after the kill",
            report.failover
        ),
    );

    let back = Instant::now();
    lab.a.restart().await?;
    lab.a.start_rbd_mirror().await?;
    // Both images were primary in A when it died: demote them there and resync from B.
    for image in [JOURNAL_IMAGE, SNAPSHOT_IMAGE] {
        let name = format!("{POOL}/{image}");
        lab.a.rbd(&["mirror", "image", "demote", &name]).await?;
    }
    let resync = Instant::now();
    for image in [JOURNAL_IMAGE, SNAPSHOT_IMAGE] {
        let name = format!("{POOL}/{image}");
        lab.a.rbd(&["mirror", "image", "resync", &name]).await?;
    }
    wait_for_content(&lab.a, JOURNAL_IMAGE, &report.b_after_write_sha).await?;
    wait_for_content(&lab.a, SNAPSHOT_IMAGE, &report.promoted_snapshot_sha).await?;
    report.failback_resync = resync.elapsed();
    report.failback = back.elapsed();
    report.a_snapshot_after_failback_sha = lab.a.image_checksum(SNAPSHOT_IMAGE).await?;
    report.a_primary_after_failback = (
        is_primary(&lab.a, JOURNAL_IMAGE).await?,
        is_primary(&lab.a, SNAPSHOT_IMAGE).await?,
    );
    report.b_primary_after_failback = (
        is_primary(&lab.b, JOURNAL_IMAGE).await?,
        is_primary(&lab.b, SNAPSHOT_IMAGE).await?,
    );
    stage(
        "failback: A resynced from B",
        report.failback,
        format!(
            "A restarted, both images demoted there and resynced from B in {:.1?}",
            report.failback_resync
        ),
    );
    Ok(report)
}

//! The mission end to end: two Ceph clusters whose pod networks overlap, RBD images mirrored
//! between them through global IPs, the loss of one cluster, the failback (resync, then the
//! planned switch back) and a planned failover. Each stage is a function here, checks what it
//! claims, and is used by the lab's tests (which check what each stage reports) and by the
//! `clusterset-lab mirror` demo (which prints it).

use std::collections::BTreeSet;
use std::io::Read;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use mon_failover_io::CephInstall;

use crate::ceph::step;
use crate::{
    CephSite, LabDns, LabError, LockOwner, MGR_POD, POOL, PodExport, Side, SiteSpec, Topology,
    poll_until,
};

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
    fill_image_at(site, image, data_file, 0).await
}

/// Writes `data_file` to `image` in `site` from byte `offset`; returns the sha256 of what the
/// client wrote (once `rbd_io.py` returns, librbd has acknowledged and flushed it).
pub async fn fill_image_at(
    site: &CephSite,
    image: &str,
    data_file: &Path,
    offset: usize,
) -> Result<String, LabError> {
    let offset = offset.to_string();
    let filled = site
        .rbd_io(
            "fill",
            &[
                "--image",
                image,
                "--file",
                &data_file.to_string_lossy(),
                "--offset",
                &offset,
            ],
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

/// Whether the journal-mode and the snapshot-mode image of the scenario are primary in `site`.
pub async fn primaries(site: &CephSite) -> Result<Primaries, LabError> {
    Ok((
        is_primary(site, JOURNAL_IMAGE).await?,
        is_primary(site, SNAPSHOT_IMAGE).await?,
    ))
}

/// A planned switch of the primary side for the scenario's journal-mode and snapshot-mode
/// images: both demoted in `from`, then promoted in `to` **without** `--force`. Ceph refuses
/// that promotion until `to`'s `rbd-mirror` has caught up with the demotion (journal mode:
/// replayed the journal up to it; snapshot mode: synced the demotion snapshot), so each is
/// retried until it succeeds, within [`MIRROR_WITHIN`], both images at once. Returns how long
/// after the first demotion each (journal, snapshot) was promoted.
pub async fn planned_switch(
    from: &CephSite,
    to: &CephSite,
) -> Result<(Duration, Duration), LabError> {
    let started = Instant::now();
    for image in IMAGES {
        let name = format!("{POOL}/{image}");
        from.rbd(&["mirror", "image", "demote", &name]).await?;
    }
    let promote = |image: &'static str| async move {
        let name = format!("{POOL}/{image}");
        let what = format!(
            "{name} promoted in {} without --force after its demotion in {}",
            to.net().cluster_id,
            from.net().cluster_id
        );
        poll_until(&what, MIRROR_WITHIN, || async {
            // A promotion that succeeded after its command timed out is not repeated.
            if !is_primary(to, image).await? {
                to.rbd(&["mirror", "image", "promote", &name]).await?;
            }
            Ok((Some(started.elapsed()), String::new()))
        })
        .await
    };
    tokio::try_join!(promote(JOURNAL_IMAGE), promote(SNAPSHOT_IMAGE))
}

/// A time per image, for a line: `journal 1.2s, snapshot 3.4s`.
fn per_image((journal, snapshot): (Duration, Duration)) -> String {
    format!("journal {journal:.1?}, snapshot {snapshot:.1?}")
}

/// Fails `stage` with `claim` unless the claim `holds`; `seen` is what was seen.
pub fn claim(
    stage: &str,
    claim: &str,
    holds: bool,
    seen: impl FnOnce() -> String,
) -> Result<(), LabError> {
    if holds {
        Ok(())
    } else {
        Err(LabError::Claim {
            stage: stage.to_owned(),
            claim: claim.to_owned(),
            seen: seen(),
        })
    }
}

/// Whether the journal-mode and the snapshot-mode image are primary, in that order.
pub type Primaries = (bool, bool);

/// Fails `stage` with `claim_text` unless each side's (journal, snapshot) images are primary
/// as wanted; `sides` lists each side's name, what was seen and what is wanted.
pub fn claim_primaries(
    stage: &str,
    claim_text: &str,
    sides: &[(&str, Primaries, Primaries)],
) -> Result<(), LabError> {
    claim(
        stage,
        claim_text,
        sides.iter().all(|(_, seen, want)| seen == want),
        || {
            let seen: Vec<String> = sides
                .iter()
                .map(|(name, seen, _)| format!("{name} {seen:?}"))
                .collect();
            format!("primary (journal, snapshot): {}", seen.join(", "))
        },
    )
}

/// Writes `content` to `path`; its sha256 (by [`sha256_file`]), which an image holding exactly
/// `content` reads as.
pub fn content_sha(path: &Path, content: &[u8]) -> Result<String, LabError> {
    std::fs::write(path, content).map_err(step(format!("writing {}", path.display())))?;
    sha256_file(path)
}

/// Takes a mirror snapshot of the snapshot-mode `image` in `site` (`rbd mirror image
/// snapshot`): what the peer's `rbd-mirror` syncs next.
pub async fn take_mirror_snapshot(site: &CephSite, image: &str) -> Result<(), LabError> {
    site.rbd(&["mirror", "image", "snapshot", &format!("{POOL}/{image}")])
        .await
        .map(drop)
}

/// Waits until the scenario's journal and snapshot image in `site` read as `want` (their
/// sha256s), both at once; how long after `since` each did.
async fn both_read_as(
    site: &CephSite,
    (journal, snapshot): (&str, &str),
    since: Instant,
) -> Result<(Duration, Duration), LabError> {
    let reads = |image, want| async move {
        wait_for_content(site, image, want).await?;
        Ok::<_, LabError>(since.elapsed())
    };
    tokio::try_join!(
        reads(JOURNAL_IMAGE, journal),
        reads(SNAPSHOT_IMAGE, snapshot)
    )
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
    /// Of it, restarting A's mons, mgr and OSDs (quorum, every OSD up again, PGs clean).
    pub failback_restart: Duration,
    /// The dead `rbd-mirror` of A that held the leader lock, blocklisted before its successor
    /// started.
    pub dead_rbd_mirror: Option<LockOwner>,
    /// The new `rbd-mirror` of A holding the leader lock.
    pub rbd_mirror_leader: Option<LockOwner>,
    /// From the start of A's new `rbd-mirror` to it holding the leader lock (`rados lock info`,
    /// polled every 500 ms; it runs while the images are demoted and resynced).
    pub failback_leader: Duration,
    /// From `rbd mirror image resync` in A to both images reading as B's.
    pub failback_resync: Duration,
    /// Of it, from `rbd mirror image resync` in A to the journal and the snapshot image reading
    /// as B's (each polled on its own, both at once). B wrote only to the journal image after
    /// the disaster, so A's stale snapshot image reads as B's before its resync too: its time
    /// does not tell its copy done.
    pub failback_resync_images: (Duration, Duration),
    /// The sha256 of A's snapshot image after the resync.
    pub a_snapshot_after_failback_sha: String,
    /// Whether A's journal and snapshot images are primary after the resync.
    pub a_primary_after_resync: (bool, bool),
    /// Whether B's journal and snapshot images are primary after the resync.
    pub b_primary_after_resync: (bool, bool),
    /// The planned switch back: from the demotion of B's images to the journal and the snapshot
    /// image promoted in A without `--force`.
    pub switch_back: (Duration, Duration),
    /// From the end of the 4 MiB write in A after the switch back (and, for the snapshot image,
    /// its mirror snapshot) to B's journal and snapshot copies reading it.
    pub switch_back_write_replicated: (Duration, Duration),
    /// The sha256 (computed from the data files) the journal and the snapshot image must have
    /// after that write: every byte written in A and in B.
    pub expected_after_switch_back: (String, String),
    /// The sha256 of the journal and the snapshot image in A after that write.
    pub a_after_switch_back: (String, String),
    /// The sha256 of the journal and the snapshot image in B after that write replicated.
    pub b_after_switch_back: (String, String),
    /// Whether A's journal and snapshot images are primary after the switch back.
    pub a_primary_after_switch_back: (bool, bool),
    /// Whether B's journal and snapshot images are primary after the switch back.
    pub b_primary_after_switch_back: (bool, bool),
    /// The sha256 of the journal and the snapshot image as A's client acknowledged them just
    /// before the planned failover (computed from the data files).
    pub acknowledged_before_planned_failover: (String, String),
    /// The planned failover: from the demotion of A's images (right after A's write) to the
    /// journal and the snapshot image promoted in B without `--force`.
    pub planned_failover: (Duration, Duration),
    /// The sha256 of the journal and the snapshot image in B after the planned failover: equal
    /// to what A acknowledged when no acknowledged write was lost (RPO 0).
    pub b_after_planned_failover: (String, String),
    /// Whether B's journal and snapshot images were primary after the planned failover.
    pub b_primary_after_planned_failover: (bool, bool),
    /// The planned return to A: from the demotion of B's images to the journal and the snapshot
    /// image promoted in A.
    pub planned_return: (Duration, Duration),
    /// The sha256 of the journal and the snapshot image in A and in B at the end.
    pub at_end: ((String, String), (String, String)),
    /// Whether A's journal and snapshot images are primary at the end.
    pub a_primary_at_end: (bool, bool),
    /// Whether B's journal and snapshot images are primary at the end.
    pub b_primary_at_end: (bool, bool),
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

/// The journal-mode and the snapshot-mode image of the scenario.
pub const IMAGES: [&str; 2] = [JOURNAL_IMAGE, SNAPSHOT_IMAGE];
/// Stage: the journal-mode image mirrored from A to B.
pub const STAGE_JOURNAL: &str = "journal-mode image mirrored";
/// Stage: the snapshot-mode image mirrored from A to B.
pub const STAGE_SNAPSHOT: &str = "snapshot-mode image mirrored";
/// Stage: A lost, B's images force-promoted and written.
pub const STAGE_DISASTER: &str = "disaster: A lost, B promoted";
/// Stage: A back, its stale primaries demoted and resynced from B.
pub const STAGE_RESYNC: &str = "failback: A resynced from B";
/// Stage: B demoted, A promoted without force, a write in A replicated to B.
pub const STAGE_SWITCH_BACK: &str = "failback: planned switch back to A";
/// Stage: A demoted right after a write, B promoted without force, nothing lost; and back.
pub const STAGE_PLANNED: &str = "planned failover: A to B and back, RPO 0";

/// Where A's client writes after the switch back, and how much.
const SWITCH_BACK_WRITE: (usize, usize) = (40 * MIB, 4 * MIB);
/// Where A's client writes just before the planned failover, and how much.
const PLANNED_WRITE: (usize, usize) = (20 * MIB, 4 * MIB);

/// The first 12 hex digits of a sha256, for a line.
fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// The sha256 of the journal and the snapshot image in `site`.
async fn checksums(site: &CephSite) -> Result<(String, String), LabError> {
    Ok((
        site.image_checksum(JOURNAL_IMAGE).await?,
        site.image_checksum(SNAPSHOT_IMAGE).await?,
    ))
}

/// The images' contents as the scenario wrote them, and the directory their files are computed
/// in.
struct Contents {
    journal: Vec<u8>,
    snapshot: Vec<u8>,
    dir: PathBuf,
}

impl Contents {
    /// Writes `bytes` random bytes at `offset` of both images in `site` (a mirror snapshot is
    /// not taken); both images' sha256 as the client acknowledged them, computed from the data.
    async fn write_both(
        &mut self,
        site: &CephSite,
        (offset, bytes): (usize, usize),
        name: &str,
    ) -> Result<(String, String), LabError> {
        // The client runs in `site`'s root, which sees `site`'s directory.
        let file = site.cluster().dir().join(name);
        let data = random_file(&file, bytes)?;
        for image in IMAGES {
            fill_image_at(site, image, &file, offset).await?;
        }
        let end = offset + bytes;
        self.journal[offset..end].copy_from_slice(&data);
        self.snapshot[offset..end].copy_from_slice(&data);
        Ok((
            content_sha(&self.dir.join(format!("{name}-journal")), &self.journal)?,
            content_sha(&self.dir.join(format!("{name}-snapshot")), &self.snapshot)?,
        ))
    }
}

/// Runs the mirroring and disaster scenario on a peered lab with `rbd-mirror` running in both
/// clusters, calling `on_stage` after each stage. Each stage checks what it claims (checksums
/// equal, which side is primary) and fails with [`LabError::Claim`] when a claim does not hold.
///
/// 64 MiB of random data into a journal-mode and a snapshot-mode image in A, both replicated
/// to B; every daemon of A killed; both images force-promoted in B, which takes a write; A
/// restarted, both its stale primaries demoted and resynced from B; the planned switch back
/// (B demoted, A promoted without `--force`) and a write in A replicated to B; a planned
/// failover right after a write in A (A demoted, B promoted without `--force`, nothing lost)
/// and the planned return to A, which is primary at the end.
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
    claim(
        STAGE_JOURNAL,
        "A's client wrote the data and A's journal image reads it back",
        report.journal_written_sha == report.data_sha && report.journal_in_a_sha == report.data_sha,
        || {
            format!(
                "data {}, written {}, read in A {}",
                report.data_sha, report.journal_written_sha, report.journal_in_a_sha
            )
        },
    )?;
    wait_for_content(&lab.b, JOURNAL_IMAGE, &report.journal_written_sha).await?;
    report.journal_replay = written.elapsed();
    stage(
        STAGE_JOURNAL,
        enabled.elapsed(),
        format!(
            "{IMAGE_MIB} MiB written in A; the image existed in B {:.1?} after mirroring was enabled, and read the same {:.1?} after the write ended (sha256 {})",
            report.first_mirrored,
            report.journal_replay,
            short(&report.data_sha)
        ),
    );

    let started = Instant::now();
    create_mirrored_image(&lab.a, SNAPSHOT_IMAGE, "snapshot").await?;
    report.snapshot_written_sha = fill_image(&lab.a, SNAPSHOT_IMAGE, &data_file).await?;
    claim(
        STAGE_SNAPSHOT,
        "A's client wrote the data",
        report.snapshot_written_sha == report.data_sha,
        || {
            format!(
                "data {}, written {}",
                report.data_sha, report.snapshot_written_sha
            )
        },
    )?;
    let snapshot = Instant::now();
    take_mirror_snapshot(&lab.a, SNAPSHOT_IMAGE).await?;
    wait_for_content(&lab.b, SNAPSHOT_IMAGE, &report.snapshot_written_sha).await?;
    report.snapshot_sync = snapshot.elapsed();
    report.rbd_mirror_peers_in_b = connections_of(lab.topology(), Side::B, "rbd-mirror").await?;
    // The pod CIDR is the same in both clusters, so a pod IP seen from B is one of B's own
    // pods: only B's mgr, which Rook does not export, may be one.
    let a_global = lab.topology().cluster(Side::A).global_cidr;
    let b_global = lab.topology().cluster(Side::B).global_cidr;
    let in_a = |ip: &IpAddr| matches!(ip, IpAddr::V4(v4) if a_global.contains(v4));
    let in_b = |ip: &IpAddr| matches!(ip, IpAddr::V4(v4) if b_global.contains(v4));
    let peers = &report.rbd_mirror_peers_in_b;
    claim(
        STAGE_SNAPSHOT,
        "rbd-mirror in B is connected to A by A's global IPs and to nothing else but global IPs and its own mgr",
        peers.iter().any(in_a)
            && peers
                .iter()
                .all(|ip| in_a(ip) || in_b(ip) || *ip == IpAddr::V4(MGR_POD)),
        || format!("{peers:?}"),
    )?;
    stage(
        STAGE_SNAPSHOT,
        started.elapsed(),
        format!(
            "mirror snapshot synced in {:.1?}; rbd-mirror in B connected to {:?}",
            report.snapshot_sync, report.rbd_mirror_peers_in_b
        ),
    );

    let disaster = Instant::now();
    lab.a.kill_all().await;
    for image in IMAGES {
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
    fill_image(&lab.b, JOURNAL_IMAGE, &head_file).await?;
    report.failover = disaster.elapsed();
    report.promoted_snapshot_sha = lab.b.image_checksum(SNAPSHOT_IMAGE).await?;
    let mut contents = Contents {
        journal: data.clone(),
        snapshot: data,
        dir: lab.b.cluster().dir().to_owned(),
    };
    contents.journal[..head.len()].copy_from_slice(&head);
    report.expected_after_write_sha =
        content_sha(&contents.dir.join("expected"), &contents.journal)?;
    report.b_after_write_sha = lab.b.image_checksum(JOURNAL_IMAGE).await?;
    claim(
        STAGE_DISASTER,
        "B's promoted snapshot image holds what A acknowledged",
        report.promoted_snapshot_sha == report.data_sha,
        || {
            format!(
                "data {}, B {}",
                report.data_sha, report.promoted_snapshot_sha
            )
        },
    )?;
    claim(
        STAGE_DISASTER,
        "B's journal image holds what A acknowledged with B's 4 MiB head write",
        report.b_after_write_sha == report.expected_after_write_sha,
        || {
            format!(
                "expected {}, B {}",
                report.expected_after_write_sha, report.b_after_write_sha
            )
        },
    )?;
    let b_primary = primaries(&lab.b).await?;
    claim_primaries(
        STAGE_DISASTER,
        "both images are primary in B",
        &[("B", b_primary, (true, true))],
    )?;
    stage(
        STAGE_DISASTER,
        report.failover,
        format!(
            "every daemon of A killed; images force-promoted in B and 4 MiB written there {:.1?} after the kill",
            report.failover
        ),
    );

    let back = Instant::now();
    lab.a.restart().await?;
    report.failback_restart = back.elapsed();
    // The dead rbd-mirror still holds the leader lock: fence it before its successor starts
    // (see `CephSite::fence_dead_rbd_mirror` and `RBD_MIRROR_HEARTBEAT_SECS` for what it cost).
    let dead = lab.a.fence_dead_rbd_mirror().await?;
    report.dead_rbd_mirror = dead.clone();
    lab.a.start_rbd_mirror().await?;
    let mirror_started = Instant::now();
    let leader = poll_until(
        "a new rbd-mirror in A holds the leader lock",
        MIRROR_WITHIN,
        || async {
            let owner = lab.a.rbd_mirror_leader().await?;
            let seen = format!("{owner:?}");
            let new = owner.filter(|owner| Some(owner) != dead.as_ref());
            Ok((new.map(|owner| (owner, mirror_started.elapsed())), seen))
        },
    );
    let resynced = async {
        // Both images were primary in A when it died: demote them there and resync from B.
        for image in IMAGES {
            let name = format!("{POOL}/{image}");
            lab.a.rbd(&["mirror", "image", "demote", &name]).await?;
        }
        let resync = Instant::now();
        for image in IMAGES {
            let name = format!("{POOL}/{image}");
            lab.a.rbd(&["mirror", "image", "resync", &name]).await?;
        }
        both_read_as(
            &lab.a,
            (&report.b_after_write_sha, &report.promoted_snapshot_sha),
            resync,
        )
        .await
    };
    let (leader, resynced) = tokio::join!(leader, resynced);
    let (new_leader, leader_after) = leader?;
    report.failback_resync_images = resynced?;
    report.failback_resync = report
        .failback_resync_images
        .0
        .max(report.failback_resync_images.1);
    report.rbd_mirror_leader = Some(new_leader);
    report.failback_leader = leader_after;
    report.failback = back.elapsed();
    report.a_snapshot_after_failback_sha = lab.a.image_checksum(SNAPSHOT_IMAGE).await?;
    report.a_primary_after_resync = primaries(&lab.a).await?;
    report.b_primary_after_resync = primaries(&lab.b).await?;
    claim(
        STAGE_RESYNC,
        "A's snapshot image holds the data again",
        report.a_snapshot_after_failback_sha == report.data_sha,
        || {
            format!(
                "data {}, A {}",
                report.data_sha, report.a_snapshot_after_failback_sha
            )
        },
    )?;
    claim_primaries(
        STAGE_RESYNC,
        "A's images are non-primary, B's primary",
        &[
            ("A", report.a_primary_after_resync, (false, false)),
            ("B", report.b_primary_after_resync, (true, true)),
        ],
    )?;
    let fenced = match &report.dead_rbd_mirror {
        Some(dead) => format!(
            "its dead rbd-mirror ({} at {}) blocklisted",
            dead.client, dead.addr
        ),
        None => "no rbd-mirror held the leader lock".to_owned(),
    };
    let leader = report
        .rbd_mirror_leader
        .as_ref()
        .map_or("?", |owner| owner.client.as_str());
    stage(
        STAGE_RESYNC,
        report.failback,
        format!(
            "A restarted in {:.1?}, {fenced}; the new rbd-mirror ({leader}) held the leader lock {:.1?} after it started; both images demoted and resynced from B in {:.1?} (the journal image read as B's {:.1?} after the resync; the snapshot image, which B did not write after the disaster, read as B's after {:.1?}, which does not tell its copy done)",
            report.failback_restart,
            report.failback_leader,
            report.failback_resync,
            report.failback_resync_images.0,
            report.failback_resync_images.1
        ),
    );

    let started = Instant::now();
    report.switch_back = planned_switch(&lab.b, &lab.a).await?;
    report.a_primary_after_switch_back = primaries(&lab.a).await?;
    report.b_primary_after_switch_back = primaries(&lab.b).await?;
    claim_primaries(
        STAGE_SWITCH_BACK,
        "A's images are primary, B's non-primary",
        &[
            ("A", report.a_primary_after_switch_back, (true, true)),
            ("B", report.b_primary_after_switch_back, (false, false)),
        ],
    )?;
    report.expected_after_switch_back = contents
        .write_both(&lab.a, SWITCH_BACK_WRITE, "after-switch-back")
        .await?;
    let written = Instant::now();
    take_mirror_snapshot(&lab.a, SNAPSHOT_IMAGE).await?;
    let (journal_want, snapshot_want) = &report.expected_after_switch_back;
    report.switch_back_write_replicated =
        both_read_as(&lab.b, (journal_want, snapshot_want), written).await?;
    report.a_after_switch_back = checksums(&lab.a).await?;
    report.b_after_switch_back = checksums(&lab.b).await?;
    claim(
        STAGE_SWITCH_BACK,
        "both images read the same in A and B, with every byte written in A and in B",
        report.a_after_switch_back == report.expected_after_switch_back
            && report.b_after_switch_back == report.expected_after_switch_back,
        || {
            format!(
                "(journal, snapshot) expected {:?}, A {:?}, B {:?}",
                report.expected_after_switch_back,
                report.a_after_switch_back,
                report.b_after_switch_back
            )
        },
    )?;
    stage(
        STAGE_SWITCH_BACK,
        started.elapsed(),
        format!(
            "B demoted, A promoted without --force after ({}); 4 MiB written in A at 40 MiB, read in B after ({}; a mirror snapshot taken); sha256 in A = in B (journal {}, snapshot {}); A primary, B not",
            per_image(report.switch_back),
            per_image(report.switch_back_write_replicated),
            short(journal_want),
            short(snapshot_want)
        ),
    );

    let started = Instant::now();
    report.acknowledged_before_planned_failover = contents
        .write_both(&lab.a, PLANNED_WRITE, "before-planned-failover")
        .await?;
    // Demoted at once: the write may not have reached B yet (no mirror snapshot was taken);
    // the demotion carries it.
    report.planned_failover = planned_switch(&lab.a, &lab.b).await?;
    report.b_after_planned_failover = checksums(&lab.b).await?;
    report.b_primary_after_planned_failover = primaries(&lab.b).await?;
    claim(
        STAGE_PLANNED,
        "RPO 0: B's images read as A's client acknowledged them before the demotion",
        report.b_after_planned_failover == report.acknowledged_before_planned_failover,
        || {
            format!(
                "(journal, snapshot) acknowledged in A {:?}, B {:?}",
                report.acknowledged_before_planned_failover, report.b_after_planned_failover
            )
        },
    )?;
    claim_primaries(
        STAGE_PLANNED,
        "B's images are primary after the planned failover",
        &[("B", report.b_primary_after_planned_failover, (true, true))],
    )?;
    report.planned_return = planned_switch(&lab.b, &lab.a).await?;
    report.at_end = (checksums(&lab.a).await?, checksums(&lab.b).await?);
    report.a_primary_at_end = primaries(&lab.a).await?;
    report.b_primary_at_end = primaries(&lab.b).await?;
    claim(
        STAGE_PLANNED,
        "back in A, both sides read what A acknowledged",
        report.at_end.0 == report.acknowledged_before_planned_failover
            && report.at_end.1 == report.acknowledged_before_planned_failover,
        || {
            format!(
                "(journal, snapshot) A {:?}, B {:?}",
                report.at_end.0, report.at_end.1
            )
        },
    )?;
    claim_primaries(
        STAGE_PLANNED,
        "at the end A's images are primary, B's non-primary",
        &[
            ("A", report.a_primary_at_end, (true, true)),
            ("B", report.b_primary_at_end, (false, false)),
        ],
    )?;
    stage(
        STAGE_PLANNED,
        started.elapsed(),
        format!(
            "4 MiB written in A at 20 MiB and A demoted at once; B promoted without --force after ({}), reading what A acknowledged (RPO 0: journal {}, snapshot {}); back to A after ({}); at the end A primary, B not",
            per_image(report.planned_failover),
            short(&report.acknowledged_before_planned_failover.0),
            short(&report.acknowledged_before_planned_failover.1),
            per_image(report.planned_return)
        ),
    );
    Ok(report)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use super::{LabError, STAGE_PLANNED, claim, claim_primaries};

    #[test]
    fn a_claim_that_holds_passes_and_one_that_does_not_names_the_stage_the_claim_and_what_was_seen()
    {
        claim(STAGE_PLANNED, "RPO 0", true, || unreachable!("not asked")).unwrap();
        let error = claim(STAGE_PLANNED, "RPO 0", false, || "B abc, A def".to_owned()).unwrap_err();
        match &error {
            LabError::Claim { stage, claim, seen } => {
                assert_eq!(stage, STAGE_PLANNED);
                assert_eq!(claim, "RPO 0");
                assert_eq!(seen, "B abc, A def");
            }
            other => panic!("not a claim: {other:?}"),
        }
        assert_eq!(
            error.to_string(),
            format!("{STAGE_PLANNED}: the claim \"RPO 0\" does not hold: B abc, A def")
        );
    }

    #[test]
    fn a_primaries_claim_names_every_side_as_seen() {
        let wanted = [
            ("A", (true, true), (true, true)),
            ("B", (false, false), (false, false)),
        ];
        claim_primaries(STAGE_PLANNED, "A primary", &wanted).unwrap();
        let seen = [
            ("A", (true, false), (true, true)),
            ("B", (false, false), (false, false)),
        ];
        let error = claim_primaries(STAGE_PLANNED, "A primary", &seen).unwrap_err();
        match error {
            LabError::Claim { seen, .. } => assert_eq!(
                seen,
                "primary (journal, snapshot): A (true, false), B (false, false)"
            ),
            other => panic!("not a claim: {other:?}"),
        }
    }
}

//! A whole Ceph cluster of the lab, run from the Ceph Reef root filesystem inside one cluster's
//! pods namespace: mons (through [`LocalMonRuntime`] and [`GlobalnetEndpoints`]), a mgr, OSDs on
//! bluestore files, an `rbd` pool with mirroring, an `rbd-mirror` daemon, and the lab's RBD
//! client (`rbd_io.py`, librbd through python3-rbd).
//!
//! With MCS the mons and OSDs are exported the way an MCS implementation with Globalnet does it
//! (a pod IP, a global IP, an export in the state of the cluster's gateway, the DNS record), and
//! every address argument a daemon gets comes from the [`Plan`] of `ceph-address-plan`, as the
//! operator would give it: `$(ROOK_POD_IP)` stands for the daemon's pod IP. Without MCS the mons advertise their pod
//! IPs, and an OSD gets `--public-addr <pod IP>`: in a real pod, its only address; in the lab,
//! where a cluster's pods share one namespace, the one it must pick.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use ceph_address_plan::{
    CephVersion, ClusterSettings, Daemon, Inventory, MonId, MonInput, OsdInput, Plan, PlanInput,
};
use ceph_local::{EndpointSource, LocalCluster, LocalMonRuntime};
use clusterset_error_chain::ErrorChain;
use mon_failover::{Addressing, CephMonAdmin, MonRuntime};
use mon_failover_io::{CephCli, CephInstall, CommandLine};
use tokio::process::Child;
use tokio::sync::Mutex;

use crate::{
    ClusterNet, GlobalnetEndpoints, LabDns, LabError, NAMESPACE, PodExport, Side, Topology,
};

/// The pool the lab mirrors.
pub const POOL: &str = "rbd";
/// The lab's RBD client, written into each site's directory.
const RBD_IO: &str = include_str!("../rbd_io.py");
/// How long one `ceph`/`rbd` command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(60);
/// How long reading or writing a whole image may take.
const IMAGE_TIMEOUT: Duration = Duration::from_secs(300);

/// `rbd_mirror_leader_heartbeat_interval` of the lab's `rbd-mirror` daemons, in seconds (Ceph's
/// default is 5). Measured in the failback (2026-11-29, debug_rbd_mirror 15): after a crash, the
/// new daemon's leader, once it holds the leader lock, still finds the dead instance in the pool's
/// instance list, and the persisted image map keeps every image assigned to it (each `ACQUIRE`
/// sent to it fails, once a second) until the leader removes it for missing heartbeats, which it
/// does `interval * (1 + rbd_mirror_leader_max_missed_heartbeats (2) +
/// rbd_mirror_leader_max_acquire_attempts_before_break (3))` after it became leader: 30.0 s
/// with the default, 6 s with 1 s. The same interval also spaces the attempts to take the leader
/// lock (`interval * max_missed_heartbeats`, 10 s by default). The cost is one watch-notify of
/// the leader object a second per pool, nothing for a lab; an operator who wants a faster
/// takeover after a crash tunes the same option.
pub const RBD_MIRROR_HEARTBEAT_SECS: u64 = 1;

/// `rbd_mirror_image_state_check_interval` of the lab's `rbd-mirror` daemons, in seconds (Ceph's
/// default is 30). Measured in the failback (2026-11-29): a resync stops the image replayer,
/// moves the local image to the trash and deletes it (2 s), and the replayer that creates the
/// new image and copies it is started again only by the next periodic image state check of the
/// instance: 5.4 s and 19.2 s after the replayer stopped for the resync in two runs with the
/// default, where the copy itself took 1.7 s. The check only starts replayers that are stopped.
pub const RBD_MIRROR_STATE_CHECK_SECS: u64 = 5;

/// Options of a cluster of the lab that the base configuration does not have: bluestore OSDs on
/// sparse files beside their directories, two replicas that tolerate one OSD down, one host.
/// And two for a healthy cluster ([`CephSite::wait_for_health_ok`]):
/// - `mgr_initial_modules` without `restful` (Reef's default is `restful iostat nfs`): restful
///   does not load on the Reef root (`MGR_MODULE_DEPENDENCY`: "PyO3 modules compiled for
///   CPython 3.8 or older may only be initialized once per interpreter process", a PyO3 module
///   it imports refusing the mgr's second sub-interpreter), and nothing of the lab uses the
///   mgr's REST API (Rook does not enable it either);
/// - `mon_data_avail_warn = 1`: the mons' stores (a few MB) live on the machine's shared disk,
///   and `MON_DISK_LOW` warned at the default 30% on a 252 GB disk with 13 GB available (4%).
fn site_conf(dir: &Path) -> String {
    let dir = dir.display();
    format!(
        "osd_objectstore = bluestore\n\
         osd_data = {dir}/osd/$cluster-$id\n\
         bluestore_block_path = {dir}/osd/$cluster-$id.block\n\
         bluestore_block_size = 4294967296\n\
         bluestore_cache_autotune = false\n\
         bluestore_cache_size = 134217728\n\
         osd_memory_target = 939524096\n\
         osd_pool_default_size = 2\n\
         osd_pool_default_min_size = 1\n\
         osd_pool_default_pg_num = 8\n\
         osd_pool_default_pgp_num = 8\n\
         osd_pool_default_pg_autoscale_mode = off\n\
         osd_crush_chooseleaf_type = 0\n\
         mon_warn_on_pool_no_redundancy = false\n\
         mon_data_avail_warn = 1\n\
         mgr_initial_modules = iostat nfs\n\
         mgr_data = {dir}/mgr/$cluster-$id\n\
         [osd]\n\
         keyring = {dir}/osd/$cluster-$id/keyring\n\
         [mgr]\n\
         keyring = {dir}/mgr/$cluster-$id/keyring\n\
         [client.rbd-mirror]\n\
         keyring = {dir}/rbd-mirror.keyring\n\
         rbd_mirror_leader_heartbeat_interval = {RBD_MIRROR_HEARTBEAT_SECS}\n\
         rbd_mirror_image_state_check_interval = {RBD_MIRROR_STATE_CHECK_SECS}\n"
    )
}

/// The mgr's pod IP.
pub const MGR_POD: Ipv4Addr = Ipv4Addr::new(10, 244, 0, 40);

/// The pod IP of host number `host` in the lab's pod CIDR.
fn pod(host: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 244, 0, host)
}

/// What a site is made of.
#[derive(Debug, Clone)]
pub struct SiteSpec {
    /// Which cluster of the topology.
    pub side: Side,
    /// The cluster's fsid.
    pub fsid: String,
    /// The RBD mirroring site name (`rbd mirror pool peer bootstrap --site-name`).
    pub site_name: String,
    /// With MCS: mons and OSDs advertise global IPs from the start.
    pub mcs: bool,
    /// How many OSDs.
    pub osds: u32,
}

/// An OSD as the osdmap has it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsdState {
    /// Marked up.
    pub up: bool,
    /// Marked in.
    pub is_in: bool,
    /// The osdmap epoch it came up in.
    pub up_from: u64,
    /// Its front (public) address's IP.
    pub front: Option<IpAddr>,
    /// Its back (cluster) address's IP.
    pub back: Option<IpAddr>,
}

/// An OSD of a site: its id, its pod IP, and its global IP once exported.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OsdSlot {
    /// The OSD id.
    pub id: u32,
    /// The pod IP it binds.
    pub pod: Ipv4Addr,
    /// The IP it advertises now (`--public-addr`).
    pub advertised: IpAddr,
    /// Its global IP, once exported.
    pub global: Option<IpAddr>,
}

/// One Ceph cluster of the lab. Its daemons are killed when it is dropped.
pub struct CephSite {
    spec: SiteSpec,
    net: ClusterNet,
    topology: Arc<Topology>,
    install: CephInstall,
    cluster: LocalCluster,
    runtime: Arc<LocalMonRuntime>,
    endpoints: Arc<GlobalnetEndpoints>,
    admin: Arc<CephCli>,
    version: CephVersion,
    mcs: std::sync::atomic::AtomicBool,
    osds: Mutex<BTreeMap<u32, OsdSlot>>,
    /// The OSDs that run in a pod namespace of their own ([`CephSite::move_osd_to_new_pod`]),
    /// by id; the others run in the cluster's pods namespace.
    osd_netns: Mutex<BTreeMap<u32, String>>,
    daemons: Mutex<BTreeMap<String, Child>>,
}

/// The object that holds the `rbd-mirror` leader lock of a pool.
const RBD_MIRROR_LEADER_OBJECT: &str = "rbd_mirror_leader";

/// The holder of a RADOS lock.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockOwner {
    /// Its entity, `client.<global id>` (for `rbd-mirror`, the instance id).
    pub client: String,
    /// Its address, with the process's nonce (`10.244.0.2:0/123456`).
    pub addr: String,
}

/// An OSD restarted in a new pod ([`CephSite::move_osd_to_new_pod`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsdPodMove {
    /// The OSD id.
    pub id: u32,
    /// Its global IP (its export's), unchanged.
    pub global: Ipv4Addr,
    /// The pod IP it had.
    pub old_pod: Ipv4Addr,
    /// The pod IP it has now.
    pub new_pod: Ipv4Addr,
    /// The new pod's network namespace.
    pub netns: String,
    /// The osdmap epoch the old instance had come up in.
    pub old_up_from: u64,
}

impl std::fmt::Debug for CephSite {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CephSite")
            .field("spec", &self.spec)
            .finish_non_exhaustive()
    }
}

pub(crate) fn step<E: std::error::Error + Send + Sync + 'static>(
    what: impl Into<String>,
) -> impl FnOnce(E) -> LabError {
    let step = what.into();
    move |source| LabError::Step {
        step,
        source: Box::new(source),
    }
}

/// The version `ceph-mon --version` of `install` reports.
pub async fn ceph_version(install: &CephInstall) -> Result<CephVersion, LabError> {
    let out = install
        .command("ceph-mon", None)
        .arg("--version")
        .output(COMMAND_TIMEOUT)
        .await
        .map_err(step("ceph-mon --version"))?;
    let text = String::from_utf8_lossy(&out);
    text.split_whitespace()
        .nth(2)
        .and_then(|v| v.parse().ok())
        .ok_or_else(|| LabError::Step {
            step: "reading the Ceph version".into(),
            source: format!("unexpected `ceph-mon --version` output: {text}").into(),
        })
}

impl CephSite {
    /// Creates and starts a cluster in `dir` (mons a, b, c, a mgr, `spec.osds` OSDs, the
    /// pool with image-mode mirroring), its programs from `install`.
    pub async fn start(
        spec: SiteSpec,
        topology: Arc<Topology>,
        dns: Arc<LabDns>,
        install: CephInstall,
        dir: PathBuf,
    ) -> Result<CephSite, LabError> {
        let net = topology.cluster(spec.side).clone();
        let version = ceph_version(&install).await?;
        let mons: Vec<(MonId, Ipv4Addr)> = ["a", "b", "c"]
            .iter()
            .zip(11..)
            .map(|(m, host)| (m.parse().map_err(step("mon id")), pod(host)))
            .map(|(m, ip)| m.map(|m| (m, ip)))
            .collect::<Result<_, _>>()?;
        let (local, pool): (Vec<(MonId, Ipv4Addr)>, Vec<Ipv4Addr>) = if spec.mcs {
            (Vec::new(), (11..20).map(pod).collect())
        } else {
            (mons.clone(), (21..30).map(pod).collect())
        };
        if !spec.mcs {
            for (_, ip) in &mons {
                topology.add_pod_ip(spec.side, *ip).await?;
            }
        }
        let endpoints = Arc::new(GlobalnetEndpoints::new(
            topology.clone(),
            spec.side,
            dns,
            &local,
            pool,
        ));
        let addressing = if spec.mcs {
            Addressing::Clusterset
        } else {
            Addressing::ClusterLocal
        };
        let mut initial = Vec::new();
        for (mon, _) in &mons {
            let endpoint = endpoints
                .provision(mon, addressing)
                .await
                .map_err(step(format!("provisioning mon {mon}")))?
                .ok_or_else(|| LabError::Alloc(format!("mon {mon}'s address is pending")))?;
            initial.push((mon.clone(), endpoint.public));
        }
        std::fs::create_dir_all(&dir).map_err(step(format!("creating {}", dir.display())))?;
        for sub in ["osd", "mgr"] {
            std::fs::create_dir_all(dir.join(sub)).map_err(step("creating the site's dirs"))?;
        }
        std::fs::write(dir.join("rbd_io.py"), RBD_IO).map_err(step("writing rbd_io.py"))?;
        let cluster = LocalCluster::open(dir.clone(), spec.fsid.clone())
            .with_install(install.clone())
            .with_conf(site_conf(&dir))
            .init(&initial)
            .await
            .map_err(step("creating the mons"))?;
        let install = cluster.install().clone();
        let admin = Arc::new(
            cluster
                .admin(Some(&net.netns))
                .timeout(Duration::from_secs(15)),
        );
        let runtime = Arc::new(LocalMonRuntime::new(
            cluster.clone(),
            endpoints.clone(),
            cluster
                .admin(Some(&net.netns))
                .timeout(Duration::from_secs(15)),
        ));
        let mcs = spec.mcs;
        let site = CephSite {
            spec,
            net,
            topology: topology.clone(),
            install,
            cluster,
            runtime,
            endpoints,
            admin,
            version,
            mcs: std::sync::atomic::AtomicBool::new(mcs),
            osds: Mutex::new(BTreeMap::new()),
            osd_netns: Mutex::new(BTreeMap::new()),
            daemons: Mutex::new(BTreeMap::new()),
        };
        site.start_mons(&initial).await?;
        site.start_mgr().await?;
        for id in 0..site.spec.osds {
            site.create_osd(id).await?;
        }
        site.wait_for_osds_up(&BTreeMap::new()).await?;
        site.ceph(&["osd", "pool", "create", POOL, "8", "8"])
            .await?;
        site.rbd(&["pool", "init", POOL]).await?;
        site.rbd(&[
            "mirror",
            "pool",
            "enable",
            POOL,
            "image",
            "--site-name",
            &site.spec.site_name,
        ])
        .await?;
        site.wait_for_clean_pgs(Duration::from_secs(120)).await?;
        site.wait_for_rbd_support().await?;
        site.wait_for_health_ok(Duration::from_secs(60)).await?;
        Ok(site)
    }

    /// The cluster's network.
    pub fn net(&self) -> &ClusterNet {
        &self.net
    }

    /// The spec it was started with.
    pub fn spec(&self) -> &SiteSpec {
        &self.spec
    }

    /// The files of the cluster.
    pub fn cluster(&self) -> &LocalCluster {
        &self.cluster
    }

    /// The mons' runtime (for the failover driver).
    pub fn runtime(&self) -> Arc<LocalMonRuntime> {
        self.runtime.clone()
    }

    /// The mons' endpoints.
    pub fn endpoints(&self) -> Arc<GlobalnetEndpoints> {
        self.endpoints.clone()
    }

    /// The admin port (the `ceph` CLI as `client.admin`, in the cluster's namespace).
    pub fn admin(&self) -> Arc<CephCli> {
        self.admin.clone()
    }

    /// The OSDs and their addresses.
    pub async fn osds(&self) -> Vec<OsdSlot> {
        self.osds.lock().await.values().copied().collect()
    }

    /// Whether the site's settings have MCS on.
    pub fn mcs(&self) -> bool {
        self.mcs.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Turns MCS on in the settings (what a user does in the CephCluster); the daemons move
    /// when the plan says so.
    pub fn enable_mcs(&self) {
        self.mcs.store(true, std::sync::atomic::Ordering::SeqCst);
    }

    /// The plan of this cluster from what runs now: the mons of the monmap with the address
    /// each advertises, the OSDs with theirs, and the global IPs exported so far.
    pub async fn plan(&self) -> Result<Plan, LabError> {
        let mut cluster = ClusterSettings::new(format!("{}-ceph", self.net.cluster_id), NAMESPACE);
        cluster.multi_cluster_service.enabled = self.mcs();
        cluster.multi_cluster_service.cluster_id = self.net.cluster_id.into();
        cluster.ceph_version = Some(self.version);
        let mut inventory = Inventory::default();
        let status = self
            .admin
            .quorum_status()
            .await
            .map_err(step("reading the monmap"))?;
        for entry in &status.monmap.mons {
            let mon_id: MonId = entry.name.parse().map_err(step("a monmap name"))?;
            let ip = entry.ip().map_err(step("a monmap address"))?;
            let mut mon = MonInput::new(mon_id.clone());
            mon.advertised = Some((ip, 6789).into());
            if let Some(endpoint) = self
                .endpoints
                .lookup(&mon_id, Addressing::Clusterset)
                .await
                .map_err(step("looking up a mon's export"))?
            {
                inventory
                    .global_ips
                    .insert(Daemon::Mon(mon_id.clone()), endpoint.public);
            }
            let global = matches!(ip, IpAddr::V4(v4) if self.net.global_cidr.contains(&v4));
            if !self.mcs() || !global {
                // The address Rook gives a mon Service's cluster IP: reachable in the cluster.
                mon.cluster_ip = Some(ip);
            }
            inventory.mons.push(mon);
        }
        for osd in self.osds.lock().await.values() {
            let mut input = OsdInput::new(osd.id, format!("{}-node", self.net.cluster_id));
            input.advertised = osd.global.filter(|g| *g == osd.advertised);
            if let Some(global) = osd.global {
                inventory.global_ips.insert(Daemon::Osd(osd.id), global);
            }
            inventory.osds.push(input);
        }
        Plan::new(PlanInput { cluster, inventory }).map_err(|rejections| LabError::Step {
            step: "planning".into(),
            source: rejections.to_string().into(),
        })
    }

    /// Runs `ceph ARGS -f json` as `client.admin` in the cluster's namespace.
    pub async fn ceph_json(&self, args: &[&str]) -> Result<serde_json::Value, LabError> {
        let mut all: Vec<&str> = args.to_vec();
        all.extend(["-f", "json"]);
        let out = self.ceph(&all).await?;
        serde_json::from_slice(&out).map_err(step(format!("parsing `ceph {}`", args.join(" "))))
    }

    /// Runs `ceph ARGS` as `client.admin` in the cluster's namespace; its stdout.
    pub async fn ceph(&self, args: &[&str]) -> Result<Vec<u8>, LabError> {
        self.tool("ceph", args, COMMAND_TIMEOUT).await
    }

    /// Runs `rbd ARGS` as `client.admin` in the cluster's namespace; its stdout.
    pub async fn rbd(&self, args: &[&str]) -> Result<Vec<u8>, LabError> {
        self.tool("rbd", args, COMMAND_TIMEOUT).await
    }

    async fn tool(
        &self,
        program: &str,
        args: &[&str],
        timeout: Duration,
    ) -> Result<Vec<u8>, LabError> {
        let line = self
            .install
            .command(program, Some(&self.net.netns))
            .arg("-c")
            .arg(self.cluster.conf())
            .args(["-n", "client.admin", "-k"])
            .arg(self.cluster.keyring())
            .args(args.iter().copied());
        line.output(timeout)
            .await
            .map_err(step(format!("{program} on {}", self.net.cluster_id)))
    }

    /// Runs the lab's RBD client (`rbd_io.py COMMAND --conf ... ARGS`); its JSON answer.
    pub async fn rbd_io(
        &self,
        command: &str,
        args: &[&str],
    ) -> Result<serde_json::Value, LabError> {
        let out = self
            .rbd_io_line(command, args)
            .output(IMAGE_TIMEOUT)
            .await
            .map_err(step(format!(
                "rbd_io.py {command} on {}",
                self.net.cluster_id
            )))?;
        serde_json::from_slice(&out).map_err(step(format!("parsing rbd_io.py {command}")))
    }

    /// The command line of the lab's RBD client: `rbd_io.py COMMAND --conf CONF --pool rbd
    /// ARGS` in the cluster's namespace (`token`, which touches no cluster, without `--conf` and
    /// `--pool`).
    pub fn rbd_io_line(&self, command: &str, args: &[&str]) -> CommandLine {
        let line = self
            .install
            .command("python3", Some(&self.net.netns))
            .arg(self.cluster.dir().join("rbd_io.py"))
            .arg(command);
        if command == "token" {
            line.args(args.iter().copied())
        } else {
            line.arg("--conf")
                .arg(self.cluster.conf())
                .args(["--pool", POOL])
                .args(args.iter().copied())
        }
    }

    /// The sha256 of a whole image, read in this cluster.
    pub async fn image_checksum(&self, image: &str) -> Result<String, LabError> {
        let answer = self.rbd_io("checksum", &["--image", image]).await?;
        Ok(answer["sha256"].as_str().unwrap_or_default().to_owned())
    }

    async fn start_mgr(&self) -> Result<(), LabError> {
        let dir = self.cluster.dir().join("mgr").join("ceph-x");
        std::fs::create_dir_all(&dir).map_err(step("creating the mgr's dir"))?;
        let keyring = dir.join("keyring");
        let keyring_arg = keyring.to_string_lossy().into_owned();
        self.ceph(&[
            "auth",
            "get-or-create",
            "mgr.x",
            "mon",
            "allow profile mgr",
            "osd",
            "allow *",
            "mds",
            "allow *",
            "-o",
            &keyring_arg,
        ])
        .await?;
        self.topology.add_pod_ip(self.spec.side, MGR_POD).await?;
        self.run_mgr().await
    }

    /// Starts the mgr on its pod IP. Rook exports mons and OSDs only: the mgr is reached inside
    /// its cluster. Given no address it would advertise the address its mons saw it come from,
    /// the cluster's egress IP, where nothing answers.
    async fn run_mgr(&self) -> Result<(), LabError> {
        let public = format!("--public-addr={MGR_POD}");
        self.spawn("mgr.x", "ceph-mgr", &["-f", "-i", "x", &public], &[])
            .await
    }

    /// Starts `program ARGS` (with `-c CONF`) in the cluster's namespace as the daemon `name`,
    /// its output in `log/<name>.out`.
    async fn spawn(
        &self,
        name: &str,
        program: &str,
        args: &[&str],
        env: &[(&str, &Path)],
    ) -> Result<(), LabError> {
        self.spawn_in(&self.net.netns, name, program, args, env)
            .await
    }

    /// [`CephSite::spawn`] in the network namespace `netns`.
    async fn spawn_in(
        &self,
        netns: &str,
        name: &str,
        program: &str,
        args: &[&str],
        env: &[(&str, &Path)],
    ) -> Result<(), LabError> {
        let log_path = self.cluster.dir().join("log").join(format!("{name}.out"));
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(step(format!("opening {}", log_path.display())))?;
        let err = log.try_clone().map_err(step("cloning a log handle"))?;
        let line = self
            .install
            .command(program, Some(netns))
            .arg("-c")
            .arg(self.cluster.conf())
            .args(args.iter().copied());
        let mut command = line.command();
        command.stdout(log).stderr(err);
        for (key, value) in env {
            command.env(key, value);
        }
        let child = command.spawn().map_err(step(format!("starting {line}")))?;
        tracing::info!(site = %self.net.cluster_id, %name, "started {program}");
        self.daemons.lock().await.insert(name.to_owned(), child);
        Ok(())
    }

    /// Stops the daemon `name`: SIGTERM and a wait (an OSD marks itself down and flushes),
    /// SIGKILL after `grace`.
    pub async fn stop_daemon(&self, name: &str, grace: Duration) -> Result<(), LabError> {
        let Some(mut child) = self.daemons.lock().await.remove(name) else {
            return Ok(());
        };
        if let Some(pid) = child.id() {
            let _ = CommandLine::new("kill", None)
                .args(["-TERM", &pid.to_string()])
                .output(COMMAND_TIMEOUT)
                .await;
        }
        if tokio::time::timeout(grace, child.wait()).await.is_err() {
            let _ = child.kill().await;
        }
        Ok(())
    }

    /// Kills every daemon of the site at once (SIGKILL): mons, mgr, OSDs, `rbd-mirror`.
    pub async fn kill_all(&self) {
        let mut daemons = self.daemons.lock().await;
        for (_, mut child) in std::mem::take(&mut *daemons) {
            let _ = child.start_kill();
            let _ = child.wait().await;
        }
        self.runtime.stop_all().await;
    }

    /// Whether the daemon `name` runs.
    pub async fn running(&self, name: &str) -> bool {
        let mut daemons = self.daemons.lock().await;
        daemons
            .get_mut(name)
            .is_some_and(|child| matches!(child.try_wait(), Ok(None)))
    }

    /// The process id of the daemon `name`.
    pub async fn pid(&self, name: &str) -> Option<u32> {
        let mut daemons = self.daemons.lock().await;
        let child = daemons.get_mut(name)?;
        match child.try_wait() {
            Ok(None) => child.id(),
            _ => None,
        }
    }

    async fn create_osd(&self, id: u32) -> Result<(), LabError> {
        let uuid = format!(
            "{:08x}-0000-4000-8000-{:012x}",
            self.spec.side as u32 + 1,
            id
        );
        let created = self.ceph(&["osd", "new", &uuid]).await?;
        let got = String::from_utf8_lossy(&created).trim().to_owned();
        if got != id.to_string() {
            return Err(LabError::Step {
                step: format!("creating osd.{id}"),
                source: format!("`ceph osd new` gave id {got}").into(),
            });
        }
        let dir = self.cluster.dir().join("osd").join(format!("ceph-{id}"));
        std::fs::create_dir_all(&dir).map_err(step("creating an OSD's dir"))?;
        let keyring = dir.join("keyring").to_string_lossy().into_owned();
        let name = format!("osd.{id}");
        self.ceph(&[
            "auth",
            "get-or-create",
            &name,
            "mon",
            "allow profile osd",
            "mgr",
            "allow profile osd",
            "osd",
            "allow *",
            "-o",
            &keyring,
        ])
        .await?;
        self.install
            // In the cluster's namespace: ceph-osd fetches its configuration from the mons.
            .command("ceph-osd", Some(&self.net.netns))
            .arg("-c")
            .arg(self.cluster.conf())
            .args(["-i", &id.to_string(), "--mkfs", "--osd-uuid", &uuid])
            .output(COMMAND_TIMEOUT)
            .await
            .map_err(step(format!("ceph-osd --mkfs for osd.{id}")))?;
        // 10.244.0.31-39; .40 is the mgr's.
        let host = u8::try_from(31 + id)
            .ok()
            .filter(|host| *host < 40)
            .ok_or_else(|| {
                LabError::Alloc(format!(
                    "osd.{id} has no pod IP: the lab gives its OSDs 10.244.0.31 to .39, so at most 9"
                ))
            })?;
        let pod_ip = pod(host);
        self.net_add_pod(pod_ip).await?;
        let global = if self.mcs() {
            self.export_osd(id, pod_ip).await?
        } else {
            None
        };
        let slot = OsdSlot {
            id,
            pod: pod_ip,
            advertised: IpAddr::V4(pod_ip),
            global,
        };
        self.osds.lock().await.insert(id, slot);
        self.start_osd(id).await
    }

    async fn net_add_pod(&self, ip: Ipv4Addr) -> Result<(), LabError> {
        self.topology.add_pod_ip(self.spec.side, ip).await
    }

    async fn export_osd(&self, id: u32, pod_ip: Ipv4Addr) -> Result<Option<IpAddr>, LabError> {
        self.endpoints
            .export(&Daemon::Osd(id).service_name(), pod_ip)
            .await
    }

    /// The slot of `osd.ID` (its pod and global addresses), or the error naming it.
    async fn osd_slot(&self, id: u32) -> Result<OsdSlot, LabError> {
        self.osds
            .lock()
            .await
            .get(&id)
            .copied()
            .ok_or_else(|| LabError::Step {
                step: format!("osd.{id}"),
                source: "no such OSD in the site".into(),
            })
    }

    /// The arguments the plan gives `osd.ID`, `$(ROOK_POD_IP)` replaced by its pod IP; without
    /// MCS (the plan gives none) `--public-addr <pod IP>`.
    pub async fn osd_args(&self, id: u32) -> Result<Vec<String>, LabError> {
        let slot = self.osd_slot(id).await?;
        let plan = self.plan().await?;
        Ok(match plan.daemon_args(&Daemon::Osd(id)) {
            Some(args) => args
                .to_args()
                .into_iter()
                .map(|arg| arg.replace(ceph_address_plan::rook::POD_IP, &slot.pod.to_string()))
                .collect(),
            None => vec![format!("--public-addr={}", slot.pod)],
        })
    }

    /// Starts `osd.ID` with the plan's arguments.
    pub async fn start_osd(&self, id: u32) -> Result<(), LabError> {
        let args = self.osd_args(id).await?;
        let public = ceph_address_plan::args::public_addr(&args)
            .and_then(|a| a.parse::<IpAddr>().ok())
            .ok_or_else(|| LabError::Step {
                step: format!("osd.{id}'s arguments"),
                source: format!("no --public-addr in {args:?}").into(),
            })?;
        let mut all: Vec<&str> = vec!["-f", "-i"];
        let id_text = id.to_string();
        all.push(&id_text);
        all.extend(args.iter().map(String::as_str));
        let netns = self
            .osd_netns
            .lock()
            .await
            .get(&id)
            .cloned()
            .unwrap_or_else(|| self.net.netns.clone());
        self.spawn_in(&netns, &format!("osd.{id}"), "ceph-osd", &all, &[])
            .await?;
        if let Some(slot) = self.osds.lock().await.get_mut(&id) {
            slot.advertised = public;
        }
        Ok(())
    }

    /// Restarts `osd.ID` in a new pod, as Kubernetes restarts an OSD's pod: the daemon stopped
    /// (SIGTERM: it marks itself down), its old pod gone (its pod IP removed from the cluster's
    /// pods namespace, or its own namespace deleted), a pod namespace of its own with the pod IP
    /// `new_pod` ([`Topology::add_pod_netns`]), and the daemon started there with the plan's
    /// arguments for that pod IP (`--public-bind-addr` and `--cluster-addr` the new pod IP,
    /// `--public-addr` its global IP, unchanged). The export is **not** changed: the gateway's
    /// state still names the old pod until the caller moves it ([`CephSite::osd_export`],
    /// [`Topology::export`]). Does not wait for the OSD to come up.
    pub async fn move_osd_to_new_pod(
        &self,
        id: u32,
        new_pod: Ipv4Addr,
    ) -> Result<OsdPodMove, LabError> {
        let slot = self.osd_slot(id).await?;
        let Some(IpAddr::V4(global)) = slot.global else {
            return Err(LabError::Step {
                step: format!("moving osd.{id} to a new pod"),
                source: "it is not exported (MCS off?): there is no endpoint to move".into(),
            });
        };
        let old_up_from = self
            .osd_states()
            .await?
            .get(&id)
            .map(|osd| osd.up_from)
            .unwrap_or(0);
        self.stop_daemon(&format!("osd.{id}"), Duration::from_secs(30))
            .await?;
        let old_netns = self.osd_netns.lock().await.remove(&id);
        match old_netns {
            Some(ns) => self.topology.remove_pod_netns(&ns),
            None => {
                self.topology
                    .remove_pod_ip(self.spec.side, slot.pod)
                    .await?
            }
        }
        let netns = self.topology.add_pod_netns(self.spec.side, new_pod).await?;
        self.osd_netns.lock().await.insert(id, netns.clone());
        if let Some(slot) = self.osds.lock().await.get_mut(&id) {
            slot.pod = new_pod;
        }
        self.start_osd(id).await?;
        Ok(OsdPodMove {
            id,
            global,
            old_pod: slot.pod,
            new_pod,
            netns,
            old_up_from,
        })
    }

    /// The export of `osd.ID` as the cluster's MCS implementation publishes it now: its
    /// Service `rook-ceph-osd-<id>`, its global IP and the pod IP it runs on; `None` when it is
    /// not exported.
    pub async fn osd_export(&self, id: u32) -> Option<PodExport> {
        let slot = self.osds.lock().await.get(&id).copied()?;
        let Some(IpAddr::V4(global)) = slot.global else {
            return None;
        };
        Some(PodExport {
            namespace: NAMESPACE.to_owned(),
            service: Daemon::Osd(id).service_name(),
            global,
            pod: slot.pod,
        })
    }

    /// Exports every OSD (MCS on) and restarts each, one at a time, with the plan's arguments,
    /// waiting for the placement groups to be clean again after each.
    pub async fn move_osds_to_global_ips(&self) -> Result<(), LabError> {
        let ids: Vec<(u32, Ipv4Addr)> = self
            .osds
            .lock()
            .await
            .values()
            .map(|slot| (slot.id, slot.pod))
            .collect();
        for (id, pod_ip) in ids {
            let global = self.export_osd(id, pod_ip).await?;
            if let Some(slot) = self.osds.lock().await.get_mut(&id) {
                slot.global = global;
            }
            self.stop_daemon(&format!("osd.{id}"), Duration::from_secs(30))
                .await?;
            self.start_osd(id).await?;
            self.wait_for_osds_up(&BTreeMap::new()).await?;
            self.wait_for_clean_pgs(Duration::from_secs(180)).await?;
        }
        Ok(())
    }

    /// Waits until every OSD of the site is up and in, each at the address it was started with
    /// and up since a later osdmap epoch than the one in `since` (its `up_from` before a
    /// restart: after a whole cluster was killed its mons still hold the old OSDs as up).
    pub async fn wait_for_osds_up(&self, since: &BTreeMap<u32, u64>) -> Result<(), LabError> {
        let want: BTreeMap<u32, IpAddr> = self
            .osds
            .lock()
            .await
            .values()
            .map(|slot| (slot.id, slot.advertised))
            .collect();
        poll_until(
            "every OSD up and in at its address",
            Duration::from_secs(120),
            || async {
                let seen = self.osd_states().await?;
                let ok = want.iter().all(|(id, ip)| {
                    seen.get(id).is_some_and(|osd| {
                        osd.up
                            && osd.is_in
                            && osd.front == Some(*ip)
                            && since.get(id).is_none_or(|epoch| osd.up_from > *epoch)
                    })
                });
                Ok((ok.then_some(()), format!("{seen:?}")))
            },
        )
        .await
    }

    /// Every OSD of the osdmap (`ceph osd dump`), by id.
    pub async fn osd_states(&self) -> Result<BTreeMap<u32, OsdState>, LabError> {
        let dump = self.ceph_json(&["osd", "dump"]).await?;
        let mut states = BTreeMap::new();
        for osd in dump["osds"].as_array().into_iter().flatten() {
            let Some(id) = osd["osd"].as_u64().and_then(|id| u32::try_from(id).ok()) else {
                continue;
            };
            states.insert(
                id,
                OsdState {
                    up: osd["up"].as_u64() == Some(1),
                    is_in: osd["in"].as_u64() == Some(1),
                    up_from: osd["up_from"].as_u64().unwrap_or(0),
                    front: front_ip(osd),
                    back: back_ip(osd),
                },
            );
        }
        Ok(states)
    }

    /// Waits until the mgr's `rbd_support` module answers `ceph rbd task list` (a command the
    /// module registers: without it the mons answer "no valid command found"). The module loads
    /// only with the root filesystem's `mgr_util.py` fix (see `tests/lab/ceph-reef-root.sh`).
    pub async fn wait_for_rbd_support(&self) -> Result<(), LabError> {
        poll_until(
            "the mgr's rbd_support module",
            Duration::from_secs(120),
            || async {
                self.ceph(&["rbd", "task", "list"])
                    .await
                    .map(|_| (Some(()), String::new()))
            },
        )
        .await
    }

    /// Waits until `ceph health` says `HEALTH_OK`; else fails with the last `ceph health
    /// detail`. A newly started cluster is healthy (see [`site_conf`]).
    pub async fn wait_for_health_ok(&self, within: Duration) -> Result<(), LabError> {
        poll_until("HEALTH_OK", within, || async {
            let detail = self.ceph(&["health", "detail"]).await?;
            let detail = String::from_utf8_lossy(&detail).trim().to_owned();
            Ok((detail.starts_with("HEALTH_OK").then_some(()), detail))
        })
        .await
    }

    /// Waits until every placement group is `active+clean`.
    pub async fn wait_for_clean_pgs(&self, within: Duration) -> Result<(), LabError> {
        poll_until("every placement group active+clean", within, || async {
            let status = self.ceph_json(&["pg", "stat"]).await?;
            let summary = &status["pg_summary"];
            let total = summary["num_pgs"].as_u64().unwrap_or(0);
            let states = summary["num_pg_by_state"]
                .as_array()
                .cloned()
                .unwrap_or_default();
            let clean = states
                .iter()
                .filter(|s| s["name"] == "active+clean")
                .filter_map(|s| s["num"].as_u64())
                .sum::<u64>();
            Ok((
                (total > 0 && clean == total).then_some(()),
                summary.to_string(),
            ))
        })
        .await
    }

    /// Creates the `rbd-mirror` user and starts the daemon.
    pub async fn start_rbd_mirror(&self) -> Result<(), LabError> {
        let keyring = self.cluster.dir().join("rbd-mirror.keyring");
        if !keyring.exists() {
            let keyring_arg = keyring.to_string_lossy().into_owned();
            self.ceph(&[
                "auth",
                "get-or-create",
                "client.rbd-mirror",
                "mon",
                "profile rbd-mirror",
                "osd",
                "profile rbd",
                "-o",
                &keyring_arg,
            ])
            .await?;
        }
        let conf = self.cluster.conf();
        self.spawn(
            "rbd-mirror",
            "rbd-mirror",
            &["-f", "--id", "rbd-mirror"],
            &[("CEPH_CONF", conf.as_path())],
        )
        .await
    }

    /// Who holds the `rbd-mirror` leader lock of the pool (the lock `rbd_lock` on the object
    /// `rbd_mirror_leader`, read with `rados lock info`), or `None` when nobody does. The object
    /// exists once an `rbd-mirror` has run in the pool.
    pub async fn rbd_mirror_leader(&self) -> Result<Option<LockOwner>, LabError> {
        let out = self
            .tool(
                "rados",
                &[
                    "-p",
                    POOL,
                    "lock",
                    "info",
                    RBD_MIRROR_LEADER_OBJECT,
                    "rbd_lock",
                    "--format",
                    "json",
                ],
                COMMAND_TIMEOUT,
            )
            .await?;
        let info: serde_json::Value =
            serde_json::from_slice(&out).map_err(step("parsing `rados lock info`"))?;
        let Some(locker) = info["lockers"].as_array().and_then(|l| l.first()) else {
            return Ok(None);
        };
        match (locker["name"].as_str(), locker["addr"].as_str()) {
            (Some(client), Some(addr)) => Ok(Some(LockOwner {
                client: client.to_owned(),
                addr: addr.to_owned(),
            })),
            _ => Err(LabError::Step {
                step: "reading the rbd-mirror leader lock".into(),
                source: format!("a locker without name or addr: {info}").into(),
            }),
        }
    }

    /// Fences the site's dead `rbd-mirror` before a new one starts, as an operator fences a
    /// crashed client: the holder of the leader lock, which must not be a daemon of this site
    /// that runs, is blocklisted (`ceph osd blocklist add <its address>`; the address carries
    /// the dead process's nonce, so no other client is hit). The OSDs then drop its watches,
    /// and the new daemon breaks its lock at its first attempt (`librbd`'s lock breaker breaks
    /// the lock of an owner that no longer watches the object) instead of after three (measured
    /// 2026-11-29: "lock owner is still alive" at 0, 10 and 20 s, the dead owner's watch having
    /// come back with the restarted OSDs, and "breaking leader lock after 3 failed attempts"
    /// 20.4 s after the start). Returns the fenced owner, or `None` if nobody held the lock.
    pub async fn fence_dead_rbd_mirror(&self) -> Result<Option<LockOwner>, LabError> {
        if self.running("rbd-mirror").await {
            return Err(LabError::Step {
                step: "fencing the dead rbd-mirror".into(),
                source: "this site's rbd-mirror runs: the lock holder may be alive".into(),
            });
        }
        let Some(owner) = self.rbd_mirror_leader().await? else {
            return Ok(None);
        };
        self.ceph(&["osd", "blocklist", "add", &owner.addr]).await?;
        Ok(Some(owner))
    }

    /// Starts `mons` at these addresses and waits until all of them are in quorum.
    async fn start_mons(&self, mons: &[(MonId, IpAddr)]) -> Result<(), LabError> {
        for (mon, ip) in mons {
            self.runtime
                .start(mon, *ip)
                .await
                .map_err(step(format!("starting mon {mon}")))?;
        }
        self.runtime
            .wait_for_quorum(self.admin.as_ref(), mons.len(), Duration::from_secs(120))
            .await
            .map_err(step(format!("a quorum of {} mons", mons.len())))?;
        Ok(())
    }

    /// Restarts the mons, the mgr and the OSDs after [`CephSite::kill_all`], at the addresses
    /// they had, and waits for the quorum and the OSDs.
    pub async fn restart(&self) -> Result<(), LabError> {
        let status_mons: Vec<(MonId, IpAddr)> = {
            // Every mon with a data directory (Rook's `ceph-<id>` under the cluster's `mon/`).
            let mut mons = Vec::new();
            let names: Vec<String> = std::fs::read_dir(self.cluster.dir().join("mon"))
                .map_err(step("listing the mons' data"))?
                .flatten()
                .filter_map(|entry| {
                    let name = entry.file_name().to_string_lossy().into_owned();
                    name.strip_prefix("ceph-").map(str::to_owned)
                })
                .collect();
            for mon in names {
                let mon_id: MonId = mon.parse().map_err(step("a mon's data directory"))?;
                for addressing in [Addressing::Clusterset, Addressing::ClusterLocal] {
                    if let Some(endpoint) = self
                        .endpoints
                        .lookup(&mon_id, addressing)
                        .await
                        .map_err(step("looking up a mon"))?
                    {
                        mons.push((mon_id.clone(), endpoint.public));
                        break;
                    }
                }
            }
            mons
        };
        self.start_mons(&status_mons).await?;
        self.run_mgr().await?;
        let before: BTreeMap<u32, u64> = self
            .osd_states()
            .await?
            .into_iter()
            .map(|(id, osd)| (id, osd.up_from))
            .collect();
        let ids: Vec<u32> = self.osds.lock().await.keys().copied().collect();
        for id in ids {
            self.start_osd(id).await?;
        }
        self.wait_for_osds_up(&before).await?;
        self.wait_for_clean_pgs(Duration::from_secs(180)).await
    }
}

impl Drop for CephSite {
    fn drop(&mut self) {
        if let Ok(mut daemons) = self.daemons.try_lock() {
            for child in daemons.values_mut() {
                let _ = child.start_kill();
            }
        }
    }
}

/// The IP of an OSD's front (public) address in `ceph osd dump`.
pub fn front_ip(osd: &serde_json::Value) -> Option<IpAddr> {
    address_ip(&osd["public_addrs"])
}

/// The IP of an OSD's back (cluster) address in `ceph osd dump`.
pub fn back_ip(osd: &serde_json::Value) -> Option<IpAddr> {
    address_ip(&osd["cluster_addrs"])
}

fn address_ip(addrs: &serde_json::Value) -> Option<IpAddr> {
    let addr = addrs["addrvec"].as_array()?.first()?["addr"].as_str()?;
    addr.rsplit_once(':')?.0.parse().ok()
}

/// Polls `check` every half second until it returns a value, for at most `within`; `check`
/// returns the value (or `None`) and a description of what it saw for the error.
pub async fn poll_until<T, F, Fut>(
    what: &str,
    within: Duration,
    mut check: F,
) -> Result<T, LabError>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<(Option<T>, String), LabError>>,
{
    let started = Instant::now();
    loop {
        let last = match check().await {
            Ok((Some(value), _)) => return Ok(value),
            Ok((None, seen)) => seen,
            Err(error) => ErrorChain(&error).to_string(),
        };
        if started.elapsed() >= within {
            return Err(LabError::NotReached {
                what: what.to_owned(),
                within,
                last,
            });
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

//! A [`MonRuntime`] of local `ceph-mon` processes, and the bootstrap of a local Ceph cluster.
//!
//! Used by the integration tests against real Ceph, `mcsctl demo` and the overlapping-network
//! lab. Each mon has an [`MonEndpoint`]: the address it advertises (`--public-addr`), the one it
//! binds (`--public-bind-addr`, its "pod IP"), and optionally the network namespace it runs in.
//! Which endpoint a mon gets comes from an [`EndpointSource`]; [`EndpointTable`] is the plain one
//! (fixed endpoints per mon plus pools for new mons).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ceph_address_plan::MonId;
use tokio::process::Child;
use tokio::sync::Mutex;

use crate::admin::CephMonAdmin;
use crate::cli::CephCli;
use crate::install::CephInstall;
use crate::runtime::{MonRuntime, RuntimeError, judge_placement};
use crate::{Addressing, Placement};

/// The programs a [`LocalCluster`] runs, each with the Debian package that has it.
pub const CEPH_TOOLS: [(&str, &str); 4] = [
    ("ceph-mon", "ceph-mon"),
    ("ceph", "ceph-common"),
    ("monmaptool", "ceph-common"),
    ("ceph-authtool", "ceph-common"),
];

/// The `(program, package)` pairs of `tools` whose program is not on the `PATH`.
///
/// ```
/// use mon_failover::missing_tools;
/// assert!(missing_tools(&[("sh", "dash")]).is_empty());
/// assert_eq!(missing_tools(&[("no-such-program-here", "nothing")]).len(), 1);
/// ```
pub fn missing_tools(tools: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let on_path = |tool: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
    };
    tools
        .iter()
        .copied()
        .filter(|(tool, _)| !on_path(tool))
        .collect()
}

/// Where a mon lives on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MonEndpoint {
    /// The address the mon advertises (`--public-addr`): what the monmap holds.
    pub public: IpAddr,
    /// The address it binds (`--public-bind-addr`) when that differs, as a pod IP behind a
    /// clusterset-global IP does.
    pub bind: Option<IpAddr>,
    /// The network namespace the daemon runs in (`ip netns exec`), if any.
    pub netns: Option<String>,
}

impl MonEndpoint {
    /// A mon that advertises and binds `public`, in this network namespace.
    pub fn at(public: IpAddr) -> Self {
        MonEndpoint {
            public,
            bind: None,
            netns: None,
        }
    }

    /// The same endpoint, bound to `bind` inside `netns`.
    pub fn behind(mut self, bind: IpAddr, netns: Option<String>) -> Self {
        self.bind = Some(bind);
        self.netns = netns;
        self
    }
}

/// Gives mons their endpoints: the local counterpart of Rook's per-mon Service and export.
#[async_trait]
pub trait EndpointSource: Send + Sync {
    /// Gives `mon` an endpoint of this kind if it has none, and returns it once its address is
    /// known (`None` while pending).
    async fn provision(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError>;

    /// The endpoint `mon` has of this kind, if any, without creating one.
    async fn lookup(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError>;

    /// Forgets every endpoint of `mon` (its addresses may be given to later mons).
    async fn release(&self, mon: &MonId) -> Result<(), RuntimeError>;
}

/// Fixed endpoints per mon and kind, plus a pool per kind from which new mons take the first
/// free endpoint when they are provisioned.
///
/// ```
/// use mon_failover::{Addressing, EndpointSource, EndpointTable, MonEndpoint};
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
/// let table = EndpointTable::new()
///     .with_fixed("a".parse()?, Addressing::ClusterLocal, MonEndpoint::at(ip("127.0.0.11")))
///     .with_pool(Addressing::Clusterset, [MonEndpoint::at(ip("127.0.0.21"))]);
/// let d = table.provision(&"d".parse()?, Addressing::Clusterset).await?;
/// assert_eq!(d.map(|e| e.public), Some(ip("127.0.0.21")));
/// // Stable: provisioning again returns the same endpoint.
/// let again = table.provision(&"d".parse()?, Addressing::Clusterset).await?;
/// assert_eq!(again.map(|e| e.public), Some(ip("127.0.0.21")));
/// // The pool is used up.
/// assert!(table.provision(&"e".parse()?, Addressing::Clusterset).await.is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default)]
pub struct EndpointTable {
    inner: std::sync::Mutex<TableInner>,
}

#[derive(Debug, Default)]
struct TableInner {
    assigned: BTreeMap<(MonId, Addressing), MonEndpoint>,
    pools: BTreeMap<Addressing, Vec<MonEndpoint>>,
}

impl EndpointTable {
    /// An empty table.
    pub fn new() -> Self {
        EndpointTable::default()
    }

    /// With a fixed endpoint for `mon`.
    pub fn with_fixed(self, mon: MonId, addressing: Addressing, endpoint: MonEndpoint) -> Self {
        self.lock().assigned.insert((mon, addressing), endpoint);
        self
    }

    /// With fixed endpoints of this kind for mons that advertise and bind their address (for
    /// example the mons a cluster starts with).
    pub fn with_mons_at(self, addressing: Addressing, mons: &[(MonId, IpAddr)]) -> Self {
        mons.iter().fold(self, |table, (mon, address)| {
            table.with_fixed(mon.clone(), addressing, MonEndpoint::at(*address))
        })
    }

    /// With a pool of endpoints of this kind for new mons.
    pub fn with_pool(
        self,
        addressing: Addressing,
        endpoints: impl IntoIterator<Item = MonEndpoint>,
    ) -> Self {
        self.lock()
            .pools
            .entry(addressing)
            .or_default()
            .extend(endpoints);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TableInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl EndpointSource for EndpointTable {
    async fn provision(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError> {
        let mut inner = self.lock();
        let key = (mon.clone(), addressing);
        if let Some(endpoint) = inner.assigned.get(&key) {
            return Ok(Some(endpoint.clone()));
        }
        let in_use: Vec<IpAddr> = inner.assigned.values().map(|e| e.public).collect();
        let free = inner
            .pools
            .get(&addressing)
            .and_then(|pool| pool.iter().find(|e| !in_use.contains(&e.public)))
            .cloned();
        let Some(endpoint) = free else {
            return Err(RuntimeError::NoAddress {
                mon: mon.clone(),
                addressing,
                fix: format!("the {addressing} pool is empty or used up: add endpoints to it"),
            });
        };
        inner.assigned.insert(key, endpoint.clone());
        Ok(Some(endpoint))
    }

    async fn lookup(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError> {
        Ok(self
            .lock()
            .assigned
            .get(&(mon.clone(), addressing))
            .cloned())
    }

    async fn release(&self, mon: &MonId) -> Result<(), RuntimeError> {
        self.lock().assigned.retain(|(m, _), _| m != mon);
        Ok(())
    }
}

/// The files of a local Ceph cluster: `ceph.conf`, the keyring (mon. and client.admin keys),
/// and one data directory per mon under `mon/`.
#[derive(Debug, Clone)]
pub struct LocalCluster {
    dir: PathBuf,
    fsid: String,
    install: CephInstall,
    extra_conf: String,
}

/// How long one Ceph tool may take (mkfs, monmaptool, authtool).
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

impl LocalCluster {
    /// The cluster whose files are in `dir` (created by [`LocalCluster::create`]), run with the
    /// host's Ceph programs.
    pub fn open(dir: impl Into<PathBuf>, fsid: impl Into<String>) -> Self {
        LocalCluster {
            dir: dir.into(),
            fsid: fsid.into(),
            install: CephInstall::Host,
            extra_conf: String::new(),
        }
    }

    /// The same cluster, its programs run from `install` (the cluster's directory, made
    /// absolute, is shared with a root filesystem at the same path).
    pub fn with_install(mut self, install: CephInstall) -> Self {
        if install.root_dir().is_some() {
            // Inside a root `chroot` starts at `/`: the cluster's paths must be absolute.
            self.dir = std::path::absolute(&self.dir).unwrap_or(self.dir);
        }
        self.install = install.sharing(self.dir.clone());
        self
    }

    /// Where the cluster's Ceph programs come from.
    pub fn install(&self) -> &CephInstall {
        &self.install
    }

    /// The same cluster with these lines added to its `ceph.conf` after the `[global]` options
    /// it always has (more options, or sections such as `[osd]`).
    pub fn with_conf(mut self, lines: impl Into<String>) -> Self {
        self.extra_conf = lines.into();
        self
    }

    /// Creates a new cluster in `dir`: keyring, initial monmap with `mons` (each advertising its
    /// endpoint's public address, msgr2 on 3300 and msgr1 on 6789), `ceph.conf`, and each mon's
    /// store (`ceph-mon --mkfs`). The mons are not started; start them with
    /// [`LocalMonRuntime::start`].
    pub async fn create(
        dir: impl Into<PathBuf>,
        fsid: impl Into<String>,
        mons: &[(MonId, IpAddr)],
    ) -> Result<Self, RuntimeError> {
        LocalCluster::open(dir, fsid).init(mons).await
    }

    /// Creates the files of the cluster this value describes (see [`LocalCluster::create`]),
    /// with its install and configuration.
    pub async fn init(self, mons: &[(MonId, IpAddr)]) -> Result<Self, RuntimeError> {
        let cluster = self;
        for sub in ["mon", "run", "log"] {
            create_dir(&cluster.dir.join(sub))?;
        }
        let keyring = cluster.keyring();
        cluster
            .install
            .command("ceph-authtool", None)
            .args(["--create-keyring"])
            .arg(keyring.as_os_str())
            .args(["--gen-key", "-n", "mon.", "--cap", "mon", "allow *"])
            .output(TOOL_TIMEOUT)
            .await?;
        cluster
            .install
            .command("ceph-authtool", None)
            .arg(keyring.as_os_str())
            .args(["--gen-key", "-n", "client.admin"])
            .args(["--cap", "mon", "allow *", "--cap", "osd", "allow *"])
            .args(["--cap", "mgr", "allow *", "--cap", "mds", "allow *"])
            .output(TOOL_TIMEOUT)
            .await?;
        let monmap = cluster.dir.join("monmap");
        let mut line = cluster.install.command("monmaptool", None).args([
            "--create",
            "--clobber",
            "--fsid",
            &cluster.fsid,
        ]);
        for (id, ip) in mons {
            line = line.args(["--addv", id.as_str(), &addrvec(*ip)]);
        }
        line.arg(monmap.as_os_str()).output(TOOL_TIMEOUT).await?;
        let mon_host: Vec<String> = mons.iter().map(|(_, ip)| addrvec(*ip)).collect();
        cluster.write_conf(&mon_host.join(","))?;
        for (id, _) in mons {
            cluster.mkfs(id, &monmap).await?;
        }
        Ok(cluster)
    }

    /// The cluster's directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The cluster's fsid.
    pub fn fsid(&self) -> &str {
        &self.fsid
    }

    /// `ceph.conf`.
    pub fn conf(&self) -> PathBuf {
        self.dir.join("ceph.conf")
    }

    /// The keyring with the `mon.` and `client.admin` keys.
    pub fn keyring(&self) -> PathBuf {
        self.dir.join("keyring")
    }

    /// A mon's data directory.
    pub fn mon_data(&self, mon: &MonId) -> PathBuf {
        self.dir.join("mon").join(format!("ceph-{mon}"))
    }

    /// A mon's log file.
    pub fn mon_log(&self, mon: &MonId) -> PathBuf {
        self.dir.join("log").join(format!("ceph-mon.{mon}.log"))
    }

    /// The directory of the daemons' admin sockets and pid files.
    pub fn run_dir(&self) -> PathBuf {
        self.dir.join("run")
    }

    /// The quorum as the mons report it on their admin sockets (no network, an answer even
    /// without a quorum), for a [`QuorumWatch`](crate::QuorumWatch).
    pub fn quorum_probe(&self) -> crate::AdminSocketQuorum {
        crate::AdminSocketQuorum::new(self.run_dir())
    }

    /// A [`QuorumWatch`](crate::QuorumWatch) polling [`Self::quorum_probe`] every `every`:
    /// what the mons themselves say, with no client that could wait on a mon that just left (a
    /// `ceph quorum_status` probe can time out hunting for a mon while the quorum holds). An
    /// election that re-forms a quorum within
    /// [`DEFAULT_ELECTION_ALLOWANCE`](crate::DEFAULT_ELECTION_ALLOWANCE) (every monmap change
    /// makes one) is not a loss. Must be called within a tokio runtime.
    pub fn quorum_watch(&self, every: std::time::Duration) -> crate::QuorumWatch {
        crate::QuorumWatch::start(std::sync::Arc::new(self.quorum_probe()), every)
    }

    /// [`Self::quorum_watch`] letting an election last `election_allowance` instead of the default:
    /// while a mon of the monmap is down, every election lasts Ceph's whole
    /// `mon_election_timeout` and a joining mon takes two of them
    /// ([`AdminSocketQuorum`](crate::AdminSocketQuorum)).
    pub fn quorum_watch_allowing(
        &self,
        every: std::time::Duration,
        election_allowance: std::time::Duration,
    ) -> crate::QuorumWatch {
        let probe = self.quorum_probe().election_allowance(election_allowance);
        crate::QuorumWatch::start(std::sync::Arc::new(probe), every)
    }

    /// The admin port for this cluster as `client.admin` (inside `netns` if given).
    pub fn admin(&self, netns: Option<&str>) -> CephCli {
        let cli = CephCli::new(self.conf())
            .keyring(self.keyring())
            .install(self.install.clone());
        match netns {
            Some(ns) => cli.netns(ns),
            None => cli,
        }
    }

    /// Rewrites `ceph.conf` with this `mon_host` (what Rook does to its mon endpoints
    /// ConfigMap and config Secret when mons change), so that clients started later reach the
    /// current mons.
    pub fn set_mon_host(&self, mons: impl IntoIterator<Item = IpAddr>) -> Result<(), RuntimeError> {
        let hosts: Vec<String> = mons.into_iter().map(addrvec).collect();
        self.write_conf(&hosts.join(","))
    }

    fn write_conf(&self, mon_host: &str) -> Result<(), RuntimeError> {
        let dir = self.dir.display();
        // A ceph-mon that refuses to start queues the reason for its log thread and exits at
        // once; `log_flush_on_exit` makes the exit write the queue, so the reason is never lost
        // (without it CI once saw a mon exit with an empty log).
        let conf = format!(
            "[global]\n\
             fsid = {fsid}\n\
             mon_host = {mon_host}\n\
             auth_cluster_required = cephx\n\
             auth_service_required = cephx\n\
             auth_client_required = cephx\n\
             keyring = {dir}/keyring\n\
             run_dir = {dir}/run\n\
             admin_socket = {dir}/run/$cluster-$name.asok\n\
             pid_file = {dir}/run/$cluster-$name.pid\n\
             log_file = {dir}/log/$cluster-$name.log\n\
             log_flush_on_exit = true\n\
             mon_data = {dir}/mon/$cluster-$id\n\
             mon_allow_pool_delete = true\n\
             mon_data_avail_crit = 0\n\
             mon_warn_on_insecure_global_id_reclaim_allowed = false\n\
             {extra}",
            fsid = self.fsid,
            extra = self.extra_conf,
        );
        let path = self.conf();
        let tmp = self.dir.join("ceph.conf.tmp");
        std::fs::write(&tmp, conf)
            .and_then(|()| std::fs::rename(&tmp, &path))
            .map_err(|source| RuntimeError::Io {
                context: format!("writing {}", path.display()),
                source,
            })
    }

    async fn mkfs(&self, mon: &MonId, monmap: &Path) -> Result<(), RuntimeError> {
        self.install
            .command("ceph-mon", None)
            .arg("-c")
            .arg(self.conf().as_os_str())
            .args(["--mkfs", "-i", mon.as_str(), "--monmap"])
            .arg(monmap.as_os_str())
            .arg("--keyring")
            .arg(self.keyring().as_os_str())
            .output(TOOL_TIMEOUT)
            .await?;
        Ok(())
    }
}

/// Ceph's address vector for a mon on the default ports.
fn addrvec(ip: IpAddr) -> String {
    let host = match ip {
        IpAddr::V4(v4) => v4.to_string(),
        IpAddr::V6(v6) => format!("[{v6}]"),
    };
    format!("[v2:{host}:3300,v1:{host}:6789]")
}

fn create_dir(path: &Path) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(path).map_err(|source| RuntimeError::Io {
        context: format!("creating {}", path.display()),
        source,
    })
}

/// A mon daemon whose process has ended, and why, from its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitedMon {
    /// The mon.
    pub mon: MonId,
    /// How its process ended.
    pub status: std::process::ExitStatus,
    /// Its log file.
    pub log: PathBuf,
    /// The last errors in its log (see [`ceph_log_errors`]), oldest first.
    pub errors: Vec<String>,
}

impl std::fmt::Display for ExitedMon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ceph-mon {} exited ({}", self.mon, self.status)?;
        // ceph-mon ends with an errno as its exit code when it refuses to start (28 for
        // ENOSPC), and may exit before its log thread has written why.
        if let Some(code) = self.status.code().filter(|code| *code > 1) {
            let errno = std::io::Error::from_raw_os_error(code).to_string();
            let name = errno.split(" (os error").next().unwrap_or(&errno);
            write!(f, ", as an errno: {name}")?;
        }
        write!(f, ")")?;
        if self.errors.is_empty() {
            write!(
                f,
                "; its log {} records no error (ceph-mon can exit before writing it)",
                self.log.display()
            )
        } else {
            write!(
                f,
                "; its log {} ends with: {}",
                self.log.display(),
                self.errors.join(" | ")
            )
        }
    }
}

/// Why local mons formed no quorum.
#[derive(Debug, thiserror::Error)]
pub enum QuorumWaitError {
    /// A mon's process ended (for example `ceph-mon` refused to start).
    #[error("{}", .exited.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    MonExited {
        /// The mons that ended.
        exited: Vec<ExitedMon>,
    },
    /// The mons run, but fewer than wanted agreed on a quorum in time.
    #[error(
        "no quorum of {wanted} mons within {within:?} (last answer: {last}); the mons' logs are in {}",
        logs.display()
    )]
    Timeout {
        /// How many mons were wanted in quorum.
        wanted: usize,
        /// How long was waited.
        within: Duration,
        /// The last answer of `ceph quorum_status`, or its error.
        last: String,
        /// The directory of the mons' logs.
        logs: PathBuf,
    },
}

/// The last `max` distinct errors (log level -1) of a Ceph daemon's log, without timestamp
/// and thread id, oldest first.
///
/// ```
/// let log = "2026-11-23T18:59:02.153+0000 7f70 0 ceph version 16.2.15\n\
///            2026-11-23T18:59:02.153+0000 7f70 -1 error: monitor data filesystem reached concerning levels\n";
/// assert_eq!(
///     mon_failover::ceph_log_errors(log, 3),
///     ["error: monitor data filesystem reached concerning levels"]
/// );
/// ```
pub fn ceph_log_errors(log: &str, max: usize) -> Vec<String> {
    let mut errors: Vec<String> = Vec::new();
    for line in log.lines() {
        let mut fields = line.trim_start().splitn(4, ' ');
        let (Some(_time), Some(_thread), Some("-1"), Some(message)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let message = message.trim().to_owned();
        errors.retain(|seen| *seen != message);
        errors.push(message);
    }
    let skip = errors.len().saturating_sub(max);
    errors.split_off(skip)
}

/// A running daemon.
#[derive(Debug)]
struct Daemon {
    child: Child,
    public: IpAddr,
}

/// [`MonRuntime`] with local `ceph-mon` processes (`ceph-mon -f`, children of this process,
/// killed when the runtime is dropped).
pub struct LocalMonRuntime {
    cluster: LocalCluster,
    endpoints: Arc<dyn EndpointSource>,
    admin: CephCli,
    daemons: Mutex<BTreeMap<MonId, Daemon>>,
}

impl std::fmt::Debug for LocalMonRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalMonRuntime")
            .field("cluster", &self.cluster)
            .finish_non_exhaustive()
    }
}

impl LocalMonRuntime {
    /// A runtime for `cluster`, with mon endpoints from `endpoints`; `admin` fetches the monmap
    /// for new mons.
    pub fn new(cluster: LocalCluster, endpoints: Arc<dyn EndpointSource>, admin: CephCli) -> Self {
        LocalMonRuntime {
            cluster,
            endpoints,
            admin,
            daemons: Mutex::new(BTreeMap::new()),
        }
    }

    /// The cluster.
    pub fn cluster(&self) -> &LocalCluster {
        &self.cluster
    }

    /// The process id of a running mon daemon.
    pub async fn pid(&self, mon: &MonId) -> Option<u32> {
        let mut daemons = self.daemons.lock().await;
        let daemon = daemons.get_mut(mon)?;
        match daemon.child.try_wait() {
            Ok(None) => daemon.child.id(),
            _ => None,
        }
    }

    /// The mons this runtime started whose process has ended, each with the errors its log
    /// ends with: a mon that exits at start-up says why only there.
    pub async fn exited(&self) -> Vec<ExitedMon> {
        let mut daemons = self.daemons.lock().await;
        let mut exited = Vec::new();
        for (mon, daemon) in daemons.iter_mut() {
            let Ok(Some(status)) = daemon.child.try_wait() else {
                continue;
            };
            let log = self.cluster.mon_log(mon);
            // Ceph logs are not always valid UTF-8 (RocksDB's statistics, binary keys).
            let errors = std::fs::read(&log)
                .map(|bytes| ceph_log_errors(&String::from_utf8_lossy(&bytes), 3))
                .unwrap_or_default();
            exited.push(ExitedMon {
                mon: mon.clone(),
                status,
                log,
                errors,
            });
        }
        exited
    }

    /// Waits until at least `wanted` mons are in quorum (asking `admin` every 500 ms) and
    /// returns how long that took. Fails at once, with the reason from its log, when a mon this
    /// runtime started has exited, and after `within` with the last answer.
    pub async fn wait_for_quorum(
        &self,
        admin: &dyn CephMonAdmin,
        wanted: usize,
        within: Duration,
    ) -> Result<Duration, QuorumWaitError> {
        let started = Instant::now();
        loop {
            let exited = self.exited().await;
            if !exited.is_empty() {
                return Err(QuorumWaitError::MonExited { exited });
            }
            let last = match admin.quorum_status().await {
                Ok(status) if status.quorum_names.len() >= wanted => return Ok(started.elapsed()),
                Ok(status) => format!("in quorum: [{}]", status.quorum_names.join(", ")),
                Err(error) => error.to_string(),
            };
            if started.elapsed() >= within {
                return Err(QuorumWaitError::Timeout {
                    wanted,
                    within,
                    last,
                    logs: self.cluster.dir.join("log"),
                });
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
        }
    }

    /// Stops every daemon (also done when the runtime is dropped).
    pub async fn stop_all(&self) {
        let mut daemons = self.daemons.lock().await;
        for (_, mut daemon) in std::mem::take(&mut *daemons) {
            // Already exited is fine: the goal is that no daemon is left.
            let _ = daemon.child.kill().await;
        }
    }

    /// The endpoint of `mon` that advertises `address`.
    async fn endpoint_at(&self, mon: &MonId, address: IpAddr) -> Result<MonEndpoint, RuntimeError> {
        for addressing in [Addressing::Clusterset, Addressing::ClusterLocal] {
            if let Some(endpoint) = self.endpoints.lookup(mon, addressing).await?
                && endpoint.public == address
            {
                return Ok(endpoint);
            }
        }
        Err(RuntimeError::NoAddress {
            mon: mon.clone(),
            addressing: Addressing::Clusterset,
            fix: format!(
                "mon {mon} has no provisioned endpoint advertising {address}: provision its address first"
            ),
        })
    }

    async fn ensure_store(&self, mon: &MonId) -> Result<(), RuntimeError> {
        if self.cluster.mon_data(mon).join("store.db").exists() {
            return Ok(());
        }
        let monmap = self.cluster.dir.join("run").join(format!("monmap.{mon}"));
        self.admin.get_monmap(&monmap).await?;
        self.cluster.mkfs(mon, &monmap).await?;
        // The monmap copy has done its job; a leftover one would only mislead.
        let _ = std::fs::remove_file(&monmap);
        Ok(())
    }
}

#[async_trait]
impl MonRuntime for LocalMonRuntime {
    async fn provision_address(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<IpAddr>, RuntimeError> {
        Ok(self
            .endpoints
            .provision(mon, addressing)
            .await?
            .map(|e| e.public))
    }

    async fn placement(
        &self,
        mon: &MonId,
        advertised: IpAddr,
        addressing: Addressing,
    ) -> Result<Placement, RuntimeError> {
        let other = match addressing {
            Addressing::ClusterLocal => Addressing::Clusterset,
            Addressing::Clusterset => Addressing::ClusterLocal,
        };
        let desired = self
            .endpoints
            .lookup(mon, addressing)
            .await?
            .map(|e| e.public);
        let has_other = self.endpoints.lookup(mon, other).await?.is_some();
        Ok(judge_placement(advertised, desired, has_other))
    }

    async fn start(&self, mon: &MonId, address: IpAddr) -> Result<(), RuntimeError> {
        let endpoint = self.endpoint_at(mon, address).await?;
        let mut daemons = self.daemons.lock().await;
        if let Some(daemon) = daemons.get_mut(mon) {
            let running = matches!(daemon.child.try_wait(), Ok(None));
            if running && daemon.public == address {
                return Ok(());
            }
            let _ = daemon.child.kill().await;
            daemons.remove(mon);
        }
        self.ensure_store(mon).await?;
        let mut line = (self.cluster.install)
            .command("ceph-mon", endpoint.netns.as_deref())
            .args(["-f", "-c"])
            .arg(self.cluster.conf().as_os_str())
            .args([
                "-i",
                mon.as_str(),
                "--public-addr",
                &endpoint.public.to_string(),
            ]);
        if let Some(bind) = endpoint.bind {
            line = line.args(["--public-bind-addr", &bind.to_string()]);
        }
        let log = self.cluster.mon_log(mon);
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|source| RuntimeError::Io {
                context: format!("opening {}", log.display()),
                source,
            })?;
        let child = line
            .command()
            .stdout(std::process::Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|source| {
                RuntimeError::Command(crate::CommandError::Spawn {
                    command: line.to_string(),
                    source,
                })
            })?;
        tracing::info!(%mon, %address, bind = ?endpoint.bind, netns = ?endpoint.netns, "started ceph-mon");
        daemons.insert(
            mon.clone(),
            Daemon {
                child,
                public: address,
            },
        );
        self.cluster
            .set_mon_host(daemons.values().map(|d| d.public))
    }

    async fn stop(&self, mon: &MonId) -> Result<(), RuntimeError> {
        if let Some(mut daemon) = self.daemons.lock().await.remove(mon) {
            let _ = daemon.child.kill().await;
            tracing::info!(%mon, "stopped ceph-mon");
        }
        Ok(())
    }

    async fn delete(&self, mon: &MonId) -> Result<(), RuntimeError> {
        self.stop(mon).await?;
        {
            let daemons = self.daemons.lock().await;
            if !daemons.is_empty() {
                self.cluster
                    .set_mon_host(daemons.values().map(|d| d.public))?;
            }
        }
        let data = self.cluster.mon_data(mon);
        match std::fs::remove_dir_all(&data) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(source) => {
                return Err(RuntimeError::Io {
                    context: format!("deleting {}", data.display()),
                    source,
                });
            }
        }
        self.endpoints.release(mon).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFUSED_TO_START: &str = "\
2026-11-23T18:59:02.033+0000 7f4b282d6640  0 ceph-mon: created monfs at /tmp/x/mon/ceph-a for mon.a
2026-11-23T18:59:02.153+0000 7f7071897640 -1 error: monitor data filesystem reached concerning levels of available storage space (available: 5% 15 GiB)
you may adjust 'mon data avail crit' to a lower value to make this go away (default: 5%)

2026-11-23T18:59:02.153+0000 7f7071897640  0 ceph version 16.2.15 pacific (stable), process ceph-mon, pid 25048
2026-11-23T18:59:02.153+0000 7f7071897640 -1 error: monitor data filesystem reached concerning levels of available storage space (available: 5% 15 GiB)
";

    #[test]
    fn the_errors_of_a_mon_that_refused_to_start_are_its_reason_once() {
        assert_eq!(
            ceph_log_errors(REFUSED_TO_START, 3),
            [
                "error: monitor data filesystem reached concerning levels of available storage space (available: 5% 15 GiB)"
            ]
        );
    }

    #[test]
    fn only_the_last_errors_are_kept_oldest_first() {
        let log = "t 1 -1 first\nt 1 -1 second\nt 1 0 info -1 not an error\nt 1 -1 third\nt 1 -1 second\n";
        assert_eq!(ceph_log_errors(log, 2), ["third", "second"]);
        assert_eq!(ceph_log_errors(log, 0), Vec::<String>::new());
        assert_eq!(ceph_log_errors("", 3), Vec::<String>::new());
    }

    #[test]
    fn an_exited_mon_names_its_status_log_and_reason() {
        use std::os::unix::process::ExitStatusExt;
        let exited = ExitedMon {
            mon: "a".parse().unwrap(),
            status: std::process::ExitStatus::from_raw(1 << 8),
            log: PathBuf::from("/tmp/x/log/ceph-mon.a.log"),
            errors: vec!["error: no space".into()],
        };
        assert_eq!(
            exited.to_string(),
            "ceph-mon a exited (exit status: 1); its log /tmp/x/log/ceph-mon.a.log ends with: error: no space"
        );
        let silent = ExitedMon {
            status: std::process::ExitStatus::from_raw(28 << 8),
            errors: Vec::new(),
            ..exited
        };
        assert_eq!(
            silent.to_string(),
            "ceph-mon a exited (exit status: 28, as an errno: No space left on device); its log /tmp/x/log/ceph-mon.a.log records no error (ceph-mon can exit before writing it)"
        );
    }
}

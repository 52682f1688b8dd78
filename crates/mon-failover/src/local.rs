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
use std::time::Duration;

use async_trait::async_trait;
use ceph_address_plan::MonId;
use tokio::process::Child;
use tokio::sync::Mutex;

use crate::cli::CephCli;
use crate::process::CommandLine;
use crate::runtime::{MonRuntime, RuntimeError, judge_placement};
use crate::{Addressing, Placement};

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
}

/// How long one Ceph tool may take (mkfs, monmaptool, authtool).
const TOOL_TIMEOUT: Duration = Duration::from_secs(60);

impl LocalCluster {
    /// The cluster whose files are in `dir` (created by [`LocalCluster::create`]).
    pub fn open(dir: impl Into<PathBuf>, fsid: impl Into<String>) -> Self {
        LocalCluster {
            dir: dir.into(),
            fsid: fsid.into(),
        }
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
        let cluster = LocalCluster::open(dir, fsid);
        for sub in ["mon", "run", "log"] {
            create_dir(&cluster.dir.join(sub))?;
        }
        let keyring = cluster.keyring();
        CommandLine::new("ceph-authtool", None)
            .args(["--create-keyring"])
            .arg(keyring.as_os_str())
            .args(["--gen-key", "-n", "mon.", "--cap", "mon", "allow *"])
            .output(TOOL_TIMEOUT)
            .await?;
        CommandLine::new("ceph-authtool", None)
            .arg(keyring.as_os_str())
            .args(["--gen-key", "-n", "client.admin"])
            .args(["--cap", "mon", "allow *", "--cap", "osd", "allow *"])
            .args(["--cap", "mgr", "allow *", "--cap", "mds", "allow *"])
            .output(TOOL_TIMEOUT)
            .await?;
        let monmap = cluster.dir.join("monmap");
        let mut line = CommandLine::new("monmaptool", None).args([
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

    /// The admin port for this cluster as `client.admin` (inside `netns` if given).
    pub fn admin(&self, netns: Option<&str>) -> CephCli {
        let cli = CephCli::new(self.conf()).keyring(self.keyring());
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
             mon_data = {dir}/mon/$cluster-$id\n\
             mon_allow_pool_delete = true\n\
             mon_warn_on_insecure_global_id_reclaim_allowed = false\n",
            fsid = self.fsid,
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
        CommandLine::new("ceph-mon", None)
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
        let mut line = CommandLine::new("ceph-mon", endpoint.netns.as_deref())
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

//! The files of a local Ceph cluster and their bootstrap: keyring, monmap, `ceph.conf`, mon
//! stores.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::time::Duration;

use ceph_address_plan::MonId;
use mon_failover::RuntimeError;
use mon_failover_io::{AdminSocketQuorum, CephCli, CephInstall, QuorumWatch};

/// The programs a [`LocalCluster`] runs, each with the Debian package that has it.
pub const CEPH_TOOLS: [(&str, &str); 4] = [
    ("ceph-mon", "ceph-mon"),
    ("ceph", "ceph-common"),
    ("monmaptool", "ceph-common"),
    ("ceph-authtool", "ceph-common"),
];

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
    /// store (`ceph-mon --mkfs`). The mons are not started; start them with a
    /// [`LocalMonRuntime`](crate::LocalMonRuntime)'s
    /// [`MonRuntime::start`](mon_failover::MonRuntime::start).
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
    /// without a quorum), for a [`QuorumWatch`].
    pub fn quorum_probe(&self) -> AdminSocketQuorum {
        AdminSocketQuorum::new(self.run_dir())
    }

    /// A [`QuorumWatch`] polling [`Self::quorum_probe`] every `every`:
    /// what the mons themselves say, with no client that could wait on a mon that just left (a
    /// `ceph quorum_status` probe can time out hunting for a mon while the quorum holds). An
    /// election that re-forms a quorum within
    /// [`DEFAULT_ELECTION_ALLOWANCE`](mon_failover_io::DEFAULT_ELECTION_ALLOWANCE) (every monmap change
    /// makes one) is not a loss. Must be called within a tokio runtime.
    pub fn quorum_watch(&self, every: std::time::Duration) -> QuorumWatch {
        QuorumWatch::start(std::sync::Arc::new(self.quorum_probe()), every)
    }

    /// [`Self::quorum_watch`] letting an election last `election_allowance` instead of the default:
    /// while a mon of the monmap is down, every election lasts Ceph's whole
    /// `mon_election_timeout` and a joining mon takes two of them
    /// ([`AdminSocketQuorum`]).
    pub fn quorum_watch_allowing(
        &self,
        every: std::time::Duration,
        election_allowance: std::time::Duration,
    ) -> QuorumWatch {
        let probe = self.quorum_probe().election_allowance(election_allowance);
        QuorumWatch::start(std::sync::Arc::new(probe), every)
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

    pub(crate) async fn mkfs(&self, mon: &MonId, monmap: &Path) -> Result<(), RuntimeError> {
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

/// Ceph's address vector for a mon at `ip` on the default ports (msgr2 3300, msgr1 6789), as
/// Rook writes it in `mon_host`.
fn addrvec(ip: IpAddr) -> String {
    ceph_address_plan::format::mon_host_entry(SocketAddr::new(
        ip,
        ceph_address_plan::rook::MON_MSGR1_PORT,
    ))
}

fn create_dir(path: &Path) -> Result<(), RuntimeError> {
    std::fs::create_dir_all(path).map_err(|source| RuntimeError::Io {
        context: format!("creating {}", path.display()),
        source,
    })
}

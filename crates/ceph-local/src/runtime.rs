//! [`LocalMonRuntime`]: the [`MonRuntime`] of local `ceph-mon` processes (children of this
//! process, each in its endpoint's network namespace if it has one).

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ceph_address_plan::MonId;
use clusterset_error_chain::ErrorChain;
use mon_failover::{
    Addressing, CephMonAdmin, CommandError, MonRuntime, Placement, RuntimeError, judge_placement,
};
use mon_failover_io::CephCli;
use tokio::process::Child;
use tokio::sync::Mutex;

use crate::cluster::LocalCluster;
use crate::endpoint::{EndpointSource, MonEndpoint};
use crate::exited::{ExitedMon, QuorumWaitError, ceph_log_errors};

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
                Err(error) => ErrorChain(&error).to_string(),
            };
            if started.elapsed() >= within {
                return Err(QuorumWaitError::Timeout {
                    wanted,
                    within,
                    last,
                    logs: self.cluster.dir().join("log"),
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
        let monmap = self.cluster.run_dir().join(format!("monmap.{mon}"));
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
        let mut line = self
            .cluster
            .install()
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
                RuntimeError::Command(CommandError::Spawn {
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

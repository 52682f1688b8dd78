//! The guided run behind `mcsctl demo`, without Kubernetes: three real `ceph-mon` daemons start
//! on loopback "cluster IPs"; MCS is enabled; `mon-failover-io`'s driver replaces each mon with
//! one whose global IP is published in our clusterset DNS server and resolved through it, one
//! at a time, while a watch polls the quorum; a summary ends the run.
//!
//! The run tells what happens through a [`Narrator`] (lines as they happen, and what it waits
//! for), so that how it is shown (a terminal's spinner, a log) is the caller's.

use std::net::{IpAddr, SocketAddr};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use ceph_address_plan::MonId;
use ceph_address_plan::rook::MON_NAME_PREFIX;
use clusterset_dns::resolver::ResolverSetupError;
use clusterset_dns::{
    ClustersetResolver, DnsServer, HickoryClustersetResolver, ResolverSettings, ServerConfig,
    ServerError, ZoneConfig, ZoneStore,
};
use mcs_types::names::{ClustersetName, NameError};
use mon_failover::{
    Addressing, AdminError, CephMonAdmin, Command, CommandOutcome, Config, ConfigError, Machine,
    MonRuntime, RuntimeError,
};
use mon_failover_io::{
    CephCli, Driver, DriverError, FileStateStore, QuorumRecord, RunOptions, RunReport, Tick,
};

use crate::{
    CEPH_TOOLS, EndpointSource, EndpointTable, LocalCluster, LocalMonRuntime, MonEndpoint,
    QuorumWaitError,
};

/// The namespace the demo's Services live in, as in Rook.
const NAMESPACE: &str = "rook-ceph";

/// What the run is asked to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DemoSettings {
    /// The loopback /24: mons at 127.0.NET.11-13 (cluster IPs), new mons at 127.0.NET.21-29
    /// (global IPs).
    pub net: u8,
    /// Where to keep the cluster's files (empty or absent; `None`: a temporary directory,
    /// removed at the end).
    pub dir: Option<PathBuf>,
    /// How long the migration may take.
    pub timeout: Duration,
}

/// How the run tells a person what happens.
pub trait Narrator {
    /// A line of the story, told as it happens.
    fn say(&self, line: &str);
    /// What the run waits for now (until the next such message).
    fn waiting(&self, what: &str);
}

/// How the run ended, once every mon was moved.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DemoReport {
    /// Whether every poll of the quorum was answered by a majority.
    pub quorum_kept: bool,
}

/// Why the run stopped.
#[derive(Debug, thiserror::Error)]
pub enum DemoError {
    /// Ceph's programs are not installed (their names).
    #[error(
        "the demo runs real Ceph mons, and {} not installed.\n  install them with: sudo apt-get install ceph-mon ceph-common",
        missing(.0)
    )]
    MissingTools(Vec<&'static str>),
    /// The temporary directory could not be made.
    #[error("creating a temporary directory")]
    TempDir(#[source] std::io::Error),
    /// The cluster's files could not be made.
    #[error("creating the cluster (ceph-authtool, monmaptool, ceph-mon --mkfs)")]
    Create(#[source] RuntimeError),
    /// The DNS server did not start.
    #[error("starting the clusterset DNS server on 127.0.0.1")]
    Dns(#[source] ServerError),
    /// The resolver could not be set up.
    #[error(transparent)]
    Resolver(#[from] ResolverSetupError),
    /// A first mon did not start.
    #[error(transparent)]
    Mon(#[from] RuntimeError),
    /// The first mons formed no quorum.
    #[error("mons a, b and c formed no quorum")]
    Quorum(#[source] QuorumWaitError),
    /// The failover machine's settings are invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// The driver could not start.
    #[error(transparent)]
    Driver(DriverError),
    /// The migration failed; the mons and the DNS server are stopped.
    #[error(transparent)]
    Migration(DriverError),
    /// The summary's quorum could not be read.
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// A mon's clusterset name is invalid.
    #[error(transparent)]
    Name(#[from] NameError),
}

/// "ceph-mon is" or "ceph-mon, ceph are".
fn missing(tools: &[&str]) -> String {
    let verb = if tools.len() == 1 { "is" } else { "are" };
    format!("{} {verb}", tools.join(", "))
}

/// Checks that Ceph's programs are installed ([`DemoError::MissingTools`] names those missing).
pub fn check_tools() -> Result<(), DemoError> {
    let missing: Vec<&'static str> = mon_failover_io::missing_tools(&CEPH_TOOLS)
        .into_iter()
        .map(|(tool, _)| tool)
        .collect();
    if missing.is_empty() {
        Ok(())
    } else {
        Err(DemoError::MissingTools(missing))
    }
}

fn ip(net: u8, host: u8) -> IpAddr {
    IpAddr::from([127, 0, net, host])
}

/// Runs the demo, telling `narrator` what happens; the mons and the DNS server are stopped at
/// the end (and after a failed migration).
pub async fn run(
    settings: &DemoSettings,
    narrator: &dyn Narrator,
) -> Result<DemoReport, DemoError> {
    let started = Instant::now();
    let (_temp, dir) = working_dir(settings)?;
    let abc = first_mons(settings.net);

    narrator.say("Step 1/4: a Ceph cluster with three mons on cluster IPs (MCS off)");
    let cluster = LocalCluster::create(
        dir.join("ceph"),
        "5e1f7c2a-6d0e-4c3b-9a8f-d3e0c0de0001",
        &abc,
    )
    .await
    .map_err(DemoError::Create)?;

    narrator.say("Step 2/4: the clusterset DNS server");
    let (store, server, resolver) = start_dns(narrator)?;
    let endpoints = Arc::new(DnsEndpoints {
        table: endpoint_table(settings.net, &abc),
        store,
        resolver,
    });
    let admin = Arc::new(cluster.admin(None).timeout(Duration::from_secs(10)));
    let mon_runtime = Arc::new(LocalMonRuntime::new(
        cluster.clone(),
        endpoints,
        cluster.admin(None).timeout(Duration::from_secs(10)),
    ));
    start_first_mons(&mon_runtime, &admin, &abc, narrator).await?;

    let Migrated {
        driver,
        result,
        record,
    } = migrate(settings, &dir, &cluster, &admin, &mon_runtime, narrator).await?;
    let report = match result {
        Ok(report) => report,
        Err(error) => {
            narrator.waiting("stopping the mons");
            mon_runtime.stop_all().await;
            server.shutdown().await;
            return Err(DemoError::Migration(error));
        }
    };

    let quorum_kept = summarize(&admin, &record, &report, &driver, started, narrator).await?;
    mon_runtime.stop_all().await;
    server.shutdown().await;
    if settings.dir.is_some() {
        narrator.say(&format!("  the cluster's files are in {}", dir.display()));
    }
    Ok(DemoReport { quorum_kept })
}

/// The directory of the cluster's files: the one asked for, or a temporary one (removed when
/// the returned [`tempfile::TempDir`] is dropped).
fn working_dir(settings: &DemoSettings) -> Result<(Option<tempfile::TempDir>, PathBuf), DemoError> {
    Ok(match &settings.dir {
        Some(dir) => (None, dir.clone()),
        None => {
            let temp = tempfile::tempdir().map_err(DemoError::TempDir)?;
            let dir = temp.path().to_path_buf();
            (Some(temp), dir)
        }
    })
}

/// Mons a, b and c at their cluster IPs, 127.0.NET.11-13.
fn first_mons(net: u8) -> Vec<(MonId, IpAddr)> {
    (0..3)
        .zip(11..)
        .map(|(index, host)| (MonId::from_index(index), ip(net, host)))
        .collect()
}

/// Where mons are: the first mons (`abc`) at their cluster IPs, and a pool of global IPs,
/// 127.0.NET.21-29, for the mons that replace them.
fn endpoint_table(net: u8, abc: &[(MonId, IpAddr)]) -> EndpointTable {
    EndpointTable::new()
        .with_mons_at(Addressing::ClusterLocal, abc)
        .with_pool(
            Addressing::Clusterset,
            (21..30).map(|h| MonEndpoint::at(ip(net, h))),
        )
}

/// Starts the clusterset DNS server on 127.0.0.1 with an empty zone: its store, the server,
/// and a resolver that asks it.
fn start_dns(
    narrator: &dyn Narrator,
) -> Result<(Arc<ZoneStore>, DnsServer, HickoryClustersetResolver), DemoError> {
    narrator.waiting("starting the clusterset DNS server");
    let store = Arc::new(ZoneStore::new(ZoneConfig::default()));
    store.mark_synced();
    let server = DnsServer::start(
        &ServerConfig::new(SocketAddr::from(([127, 0, 0, 1], 0))),
        Arc::clone(&store),
    )
    .map_err(DemoError::Dns)?;
    let resolver = HickoryClustersetResolver::new(ResolverSettings {
        nameserver: Some(server.local_addr()),
        timeout: Duration::from_millis(500),
        attempts: 2,
        ..ResolverSettings::default()
    })?;
    narrator.say(&format!(
        "  serving clusterset.local on {} (UDP and TCP)",
        server.local_addr()
    ));
    Ok((store, server, resolver))
}

/// Starts the first mons (`abc`) and waits for them to form a quorum.
async fn start_first_mons(
    mon_runtime: &LocalMonRuntime,
    admin: &CephCli,
    abc: &[(MonId, IpAddr)],
    narrator: &dyn Narrator,
) -> Result<(), DemoError> {
    narrator.waiting("starting mons a, b and c");
    for (mon, address) in abc {
        mon_runtime.start(mon, *address).await?;
        narrator.say(&format!("  started mon {mon} at {address}"));
    }
    narrator.waiting("waiting for mons a, b and c to form a quorum");
    let formed = mon_runtime
        .wait_for_quorum(admin, 3, Duration::from_secs(120))
        .await
        .map_err(DemoError::Quorum)?;
    narrator.say(&format!(
        "  quorum a,b,c formed in {:.1} s",
        formed.as_secs_f64()
    ));
    Ok(())
}

/// How the migration went: the driver, the result of its run, and the quorum polled meanwhile.
struct Migrated {
    driver: Driver,
    result: Result<RunReport, DriverError>,
    record: QuorumRecord,
}

/// Enables MCS: a driver replaces each mon by one advertising its global IP, one at a time,
/// while the quorum is polled every second.
async fn migrate(
    settings: &DemoSettings,
    dir: &Path,
    cluster: &LocalCluster,
    admin: &Arc<CephCli>,
    mon_runtime: &Arc<LocalMonRuntime>,
    narrator: &dyn Narrator,
) -> Result<Migrated, DemoError> {
    narrator.say("Step 3/4: MCS enabled: each mon is replaced by one advertising its global IP");
    narrator
        .say("  (one at a time, only with every mon in quorum; the quorum is polled every second)");
    let watch = cluster.quorum_watch(Duration::from_secs(1));
    let mut driver = Driver::resume(
        Machine::new(Config {
            mon_out_timeout: None,
            ..Config::default()
        })?,
        admin.clone(),
        mon_runtime.clone(),
        Arc::new(FileStateStore::new(dir.join("failover.json"))),
        Some(2),
    )
    .await
    .map_err(DemoError::Driver)?;
    let options = RunOptions {
        poll: Duration::from_millis(500),
        deadline: settings.timeout,
    };
    let migration_started = Instant::now();
    narrator.waiting("moving the mons to their global IPs");
    let result = driver
        .run_until_settled(Addressing::Clusterset, options, |tick| {
            narrate(tick, migration_started, narrator);
        })
        .await;
    narrator.waiting("summing up");
    let record = watch.stop().await;
    Ok(Migrated {
        driver,
        result,
        record,
    })
}

/// Tells the summary: the mons and their clusterset names, the quorum, whether it was kept
/// throughout (the answer), and how long it all took.
async fn summarize(
    admin: &CephCli,
    record: &QuorumRecord,
    report: &RunReport,
    driver: &Driver,
    started: Instant,
    narrator: &dyn Narrator,
) -> Result<bool, DemoError> {
    let say = |line: String| narrator.say(&line);
    say("Step 4/4: summary".to_owned());
    let status = admin.quorum_status().await?;
    for mon in &status.monmap.mons {
        let name = ClustersetName::service(NAMESPACE, &format!("{MON_NAME_PREFIX}{}", mon.name))?;
        say(format!(
            "  mon {} at {} ({name})",
            mon.name,
            mon.ip().map_or_else(|e| e.to_string(), |ip| ip.to_string())
        ));
    }
    say(format!(
        "  in quorum: {} of {}",
        status.quorum_names.join(","),
        status.monmap.mons.len()
    ));
    say(format!("  peer mon_host: {}", status.monmap.mon_host()));
    let quorum_kept = record.never_lost();
    if quorum_kept {
        say(format!(
            "  quorum kept throughout: {} polls, every one answered by a majority",
            record.polls
        ));
    } else {
        say(format!(
            "  quorum LOST during the migration: {:?}",
            record.losses
        ));
    }
    let history = driver.state().history();
    say(format!(
        "  {} mons migrated in {:.1} s ({:.1} s of it waiting on Ceph); whole demo {:.1} s",
        history.completed,
        report.elapsed.as_secs_f64(),
        report.waiting_on_ceph().as_secs_f64(),
        started.elapsed().as_secs_f64()
    ));
    Ok(quorum_kept)
}

/// Tells what a tick did, as steps a person can follow, and what is awaited next.
fn narrate(tick: &Tick, since: Instant, narrator: &dyn Narrator) {
    let at = since.elapsed().as_secs_f64();
    for (command, outcome) in tick.commands.iter().zip(&tick.outcomes) {
        let line = match (command, outcome) {
            (
                Command::ProvisionAddress { mon, .. },
                CommandOutcome::AddressReady { address, .. },
            ) => {
                format!(
                    "{MON_NAME_PREFIX}{mon}.{NAMESPACE}.svc.clusterset.local resolves to {address}"
                )
            }
            (Command::ProvisionAddress { mon, .. }, CommandOutcome::AddressPending { .. }) => {
                format!("waiting for the global name of mon {mon} to resolve")
            }
            (Command::StartMon { mon, address }, CommandOutcome::Done(_)) => {
                format!("started mon {mon} advertising {address}; waiting for it to join")
            }
            (Command::RemoveFromMonmap { mon }, CommandOutcome::Done(_)) => {
                let joined = tick
                    .state
                    .migration()
                    .filter(|m| m.old() == mon)
                    .map(|m| format!("mon {} is in quorum; ", m.new_mon()))
                    .unwrap_or_default();
                format!("{joined}removed mon {mon} from the monmap")
            }
            (Command::DeleteMon { mon }, CommandOutcome::Done(_)) => {
                format!("deleted mon {mon} (daemon and data)")
            }
            (command, CommandOutcome::Failed { error, .. }) => {
                format!("{command} failed, will retry: {error}")
            }
            (command, _) => format!("{command}"),
        };
        narrator.say(&format!("  [{at:6.1}s] {line}"));
    }
    let done = tick.state.history().completed;
    narrator.waiting(&match tick.state.migration() {
        Some(m) => format!(
            "moving mon {} to mon {} ({done} of 3 mons moved)",
            m.old(),
            m.new_mon()
        ),
        None => format!("moving the mons to their global IPs ({done} of 3 moved)"),
    });
}

/// Mon endpoints whose global IPs are published in the clusterset DNS server (as a
/// ServiceImport `rook-ceph-mon-<id>`, what the MCS agent does for an export) and known only
/// once the name resolves through it.
struct DnsEndpoints {
    table: EndpointTable,
    store: Arc<ZoneStore>,
    resolver: HickoryClustersetResolver,
}

impl DnsEndpoints {
    fn service(mon: &MonId) -> String {
        format!("{MON_NAME_PREFIX}{mon}")
    }
}

/// The ServiceImport an MCS agent makes of mon `mon`'s export: ClusterSetIP at `global_ip`,
/// with the ports of a mon's Service on the default port (ceph-address-plan's, as Rook makes
/// them).
fn mon_import(mon: &MonId, global_ip: IpAddr) -> mcs_types::v1beta1::ServiceImport {
    let ports = ceph_address_plan::mon_ports(ceph_address_plan::rook::MON_MSGR1_PORT)
        .into_iter()
        .map(|p| mcs_types::ServicePort::tcp(p.name, i32::from(p.port)))
        .collect();
    let mut spec =
        mcs_types::ServiceImportSpec::new(mcs_types::ServiceImportType::ClusterSetIP, ports);
    spec.ips = vec![global_ip.to_string()];
    let mut import = mcs_types::v1beta1::ServiceImport::new(&DnsEndpoints::service(mon), spec);
    import.metadata.namespace = Some(NAMESPACE.to_owned());
    import
}

fn runtime_error(error: impl std::error::Error + Send + Sync + 'static) -> RuntimeError {
    RuntimeError::Other(Box::new(error))
}

#[async_trait]
impl EndpointSource for DnsEndpoints {
    async fn provision(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError> {
        let Some(endpoint) = self.table.provision(mon, addressing).await? else {
            return Ok(None);
        };
        if addressing == Addressing::ClusterLocal {
            return Ok(Some(endpoint));
        }
        let import = mon_import(mon, endpoint.public);
        self.store
            .upsert_service_import(&import)
            .map_err(runtime_error)?;
        let name =
            ClustersetName::service(NAMESPACE, &Self::service(mon)).map_err(runtime_error)?;
        match self.resolver.resolve(&name).await {
            Ok(resolution) => Ok(resolution.addresses.first().map(|ip| MonEndpoint {
                public: *ip,
                ..endpoint
            })),
            Err(error) if error.is_transient() => Ok(None),
            Err(error) => Err(runtime_error(error)),
        }
    }

    async fn lookup(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError> {
        self.table.lookup(mon, addressing).await
    }

    async fn release(&self, mon: &MonId) -> Result<(), RuntimeError> {
        self.store
            .delete_service_import(NAMESPACE, &Self::service(mon));
        self.table.release(mon).await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_tools_are_named_with_the_packages_to_install() {
        assert_eq!(
            DemoError::MissingTools(vec!["ceph-mon"]).to_string(),
            "the demo runs real Ceph mons, and ceph-mon is not installed.\n  install them with: sudo apt-get install ceph-mon ceph-common"
        );
        assert!(
            DemoError::MissingTools(vec!["ceph-mon", "ceph"])
                .to_string()
                .contains("and ceph-mon, ceph are not installed.")
        );
    }

    #[test]
    fn the_first_mons_are_a_b_and_c_on_cluster_ips() {
        let ids: Vec<String> = (0..3).map(|i| MonId::from_index(i).to_string()).collect();
        assert_eq!(ids, ["a", "b", "c"]);
        assert_eq!(ip(77, 11).to_string(), "127.0.77.11");
    }
}

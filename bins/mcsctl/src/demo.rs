//! `mcsctl demo`: a guided run on this machine, without Kubernetes. Three real `ceph-mon`
//! daemons start on loopback "cluster IPs"; MCS is enabled; the failover driver replaces each
//! mon with one whose global IP is published in our clusterset DNS server and resolved through
//! it, one at a time, while a watch polls the quorum; a summary ends the run.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::progress::Spinner;
use anyhow::Context;
use async_trait::async_trait;
use ceph_address_plan::MonId;
use ceph_local::{EndpointSource, EndpointTable, LocalCluster, LocalMonRuntime, MonEndpoint};
use clap::Args;
use clusterset_dns::{
    ClustersetResolver, DnsServer, HickoryClustersetResolver, ResolverSettings, ServerConfig,
    ZoneConfig, ZoneStore,
};
use mcs_types::names::ClustersetName;
use mon_failover::{
    Addressing, CephMonAdmin, Command, CommandOutcome, Config, Machine, MonRuntime, RuntimeError,
};
use mon_failover_io::{Driver, FileStateStore, RunOptions, Tick};

/// Options of `mcsctl demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The loopback /24 to use: mons at 127.0.NET.11-13 (cluster IPs), new mons at
    /// 127.0.NET.21-29 (global IPs).
    #[arg(long, default_value_t = 77, value_name = "NET")]
    net: u8,
    /// Where to keep the cluster's files (default: a temporary directory, removed at the end).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Give up after this many seconds.
    #[arg(long, default_value_t = 600)]
    timeout_secs: u64,
}

/// The namespace the demo's Services live in, as in Rook.
const NAMESPACE: &str = "rook-ceph";

/// Runs the demo.
pub fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let missing: Vec<&str> = mon_failover_io::missing_tools(&ceph_local::CEPH_TOOLS)
        .into_iter()
        .map(|(tool, _)| tool)
        .collect();
    if !missing.is_empty() {
        eprintln!(
            "error: the demo runs real Ceph mons, and {} {} not installed.\n  install them with: sudo apt-get install ceph-mon ceph-common",
            missing.join(", "),
            if missing.len() == 1 { "is" } else { "are" }
        );
        return Ok(ExitCode::from(1));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(demo(args))
}

fn ip(net: u8, host: u8) -> IpAddr {
    IpAddr::from([127, 0, net, host])
}

async fn demo(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    let started = Instant::now();
    // Lines show as they happen (also on a pipe); the spinner shows what is being waited for.
    let spinner = Spinner::start("creating the cluster");
    let say = |line: String| spinner.say(&line);
    let (_temp, dir) = match &args.dir {
        Some(dir) => (None, dir.clone()),
        None => {
            let temp = tempfile::tempdir().context("creating a temporary directory")?;
            let dir = temp.path().to_path_buf();
            (Some(temp), dir)
        }
    };
    let net = args.net;
    let abc: Vec<(MonId, IpAddr)> = ["a", "b", "c"]
        .iter()
        .zip(11..)
        .map(|(m, host)| Ok((m.parse()?, ip(net, host))))
        .collect::<anyhow::Result<_>>()?;

    say("Step 1/4: a Ceph cluster with three mons on cluster IPs (MCS off)".to_owned());
    let cluster = LocalCluster::create(
        dir.join("ceph"),
        "5e1f7c2a-6d0e-4c3b-9a8f-d3e0c0de0001",
        &abc,
    )
    .await
    .context("creating the cluster (ceph-authtool, monmaptool, ceph-mon --mkfs)")?;

    say("Step 2/4: the clusterset DNS server".to_owned());
    spinner.set_message("starting the clusterset DNS server");
    let store = Arc::new(ZoneStore::new(ZoneConfig::default()));
    store.mark_synced();
    let server = DnsServer::start(
        &ServerConfig::new("127.0.0.1:0".parse()?),
        Arc::clone(&store),
    )
    .context("starting the clusterset DNS server on 127.0.0.1")?;
    let resolver = HickoryClustersetResolver::new(ResolverSettings {
        nameserver: Some(server.local_addr()),
        timeout: Duration::from_millis(500),
        attempts: 2,
        ..ResolverSettings::default()
    })?;
    say(format!(
        "  serving clusterset.local on {} (UDP and TCP)",
        server.local_addr()
    ));

    let table = EndpointTable::new()
        .with_mons_at(Addressing::ClusterLocal, &abc)
        .with_pool(
            Addressing::Clusterset,
            (21..30).map(|h| MonEndpoint::at(ip(net, h))),
        );
    let endpoints = Arc::new(DnsEndpoints {
        table,
        store: Arc::clone(&store),
        resolver,
    });
    let admin = Arc::new(cluster.admin(None).timeout(Duration::from_secs(10)));
    let mon_runtime = Arc::new(LocalMonRuntime::new(
        cluster.clone(),
        endpoints,
        cluster.admin(None).timeout(Duration::from_secs(10)),
    ));
    spinner.set_message("starting mons a, b and c");
    for (mon, address) in &abc {
        mon_runtime.start(mon, *address).await?;
        say(format!("  started mon {mon} at {address}"));
    }
    spinner.set_message("waiting for mons a, b and c to form a quorum");
    let formed = mon_runtime
        .wait_for_quorum(admin.as_ref(), 3, Duration::from_secs(120))
        .await
        .context("mons a, b and c formed no quorum")?;
    say(format!(
        "  quorum a,b,c formed in {:.1} s",
        formed.as_secs_f64()
    ));

    say("Step 3/4: MCS enabled: each mon is replaced by one advertising its global IP".to_owned());
    say(
        "  (one at a time, only with every mon in quorum; the quorum is polled every second)"
            .to_owned(),
    );
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
    .await?;
    let options = RunOptions {
        poll: Duration::from_millis(500),
        deadline: Duration::from_secs(args.timeout_secs),
    };
    let migration_started = Instant::now();
    spinner.set_message("moving the mons to their global IPs");
    let result = driver
        .run_until_settled(Addressing::Clusterset, options, |tick| {
            narrate(tick, migration_started, &spinner);
        })
        .await;
    spinner.set_message("summing up");
    let record = watch.stop().await;
    let report = match result {
        Ok(report) => report,
        Err(error) => {
            spinner.set_message("stopping the mons");
            mon_runtime.stop_all().await;
            server.shutdown().await;
            spinner.finish();
            eprintln!("error: {error}");
            return Ok(ExitCode::from(1));
        }
    };

    say("Step 4/4: summary".to_owned());
    let status = admin.quorum_status().await?;
    for mon in &status.monmap.mons {
        let name = ClustersetName::service(NAMESPACE, &format!("rook-ceph-mon-{}", mon.name))?;
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
    let lost = !record.never_lost();
    if lost {
        say(format!(
            "  quorum LOST during the migration: {:?}",
            record.losses
        ));
    } else {
        say(format!(
            "  quorum kept throughout: {} polls, every one answered by a majority",
            record.polls
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
    mon_runtime.stop_all().await;
    server.shutdown().await;
    if args.dir.is_some() {
        say(format!("  the cluster's files are in {}", dir.display()));
    }
    Ok(if lost {
        ExitCode::from(1)
    } else {
        ExitCode::SUCCESS
    })
}

/// Prints what a tick did, as steps a person can follow, and what is awaited next.
fn narrate(tick: &Tick, since: Instant, spinner: &Spinner) {
    let at = since.elapsed().as_secs_f64();
    for (command, outcome) in tick.commands.iter().zip(&tick.outcomes) {
        let line = match (command, outcome) {
            (
                Command::ProvisionAddress { mon, .. },
                CommandOutcome::AddressReady { address, .. },
            ) => {
                format!(
                    "rook-ceph-mon-{mon}.{NAMESPACE}.svc.clusterset.local resolves to {address}"
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
        spinner.say(&format!("  [{at:6.1}s] {line}"));
    }
    let done = tick.state.history().completed;
    spinner.set_message(match tick.state.migration() {
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
        format!("rook-ceph-mon-{mon}")
    }
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
        let import: mcs_types::v1beta1::ServiceImport = serde_json::from_value(serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1",
            "kind": "ServiceImport",
            "metadata": {"name": Self::service(mon), "namespace": NAMESPACE},
            "spec": {
                "type": "ClusterSetIP",
                "ips": [endpoint.public.to_string()],
                "ports": [{"name": "tcp-msgr2", "port": 3300, "protocol": "TCP"},
                          {"name": "tcp-msgr1", "port": 6789, "protocol": "TCP"}]
            }
        }))
        .map_err(runtime_error)?;
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

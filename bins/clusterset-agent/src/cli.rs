//! Command-line flags (each also read from an environment variable, but `--kubeconfig` and
//! `--context`, which are kubectl's and read `$KUBECONFIG` themselves) and the agent's wiring:
//! clients, watches, DNS server, HTTP server, runtime.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use anyhow::Context;
use clap::{Args, Parser, Subcommand, ValueEnum};
use clusterset_daemon::Endpoints;
use clusterset_daemon::kubeconfig::{self, FlagNames, KubeconfigArgs};
use clusterset_daemon::lease::{
    ElectionAliases, ElectionEnv, Elector, LeaderElectionArgs, LeaderElectionDefaults, Leadership,
};
use clusterset_dns::{DnsServer, ServerConfig, ZoneConfig, ZoneStore};
use ipnet::IpNet;
use mcs_controller::EndpointMode;
use mcs_types::ClusterId;
use mcs_types::names::Zone;

use clusterset_agent_runtime::kube_io::{KubeWriter, broker_watches, local_watches};
use clusterset_agent_runtime::metrics::Metrics;
use clusterset_agent_runtime::readiness::Readiness;
use clusterset_agent_runtime::runtime::{Election, Runtime};
use mcs_controller::broker::SharedRecords;
use mcs_controller::config::AgentConfig;
use mcs_controller::core::AgentCore;

/// The clusterset agent: the Multi-Cluster Services control plane of one member cluster.
#[derive(Debug, Parser)]
#[command(name = "clusterset-agent", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the agent.
    Run(Box<RunArgs>),
    /// Print the broker's ExportRecord CRD (install it on the hub cluster).
    Crd,
    /// Print the hub cluster's manifests for these member clusters: the broker namespace, one
    /// records namespace per cluster, ServiceAccounts, RBAC with which each cluster can write
    /// only its own records and heartbeat Lease, and the Leases.
    HubManifests(HubManifestsArgs),
}

/// Flags of `clusterset-agent hub-manifests`.
#[derive(Debug, Args)]
pub struct HubManifestsArgs {
    /// A member cluster's id (repeat for each: --cluster east --cluster west).
    #[arg(long = "cluster", required = true)]
    pub clusters: Vec<String>,
    /// The broker namespace on the hub cluster.
    #[arg(long, default_value = "clusterset-broker")]
    pub broker_namespace: String,
    /// Also let every member write records in the shared broker namespace, as before each
    /// cluster had its own: only while upgrading (docs/clusterset-agent.md).
    #[arg(long)]
    pub legacy_shared_records: bool,
}

impl HubManifestsArgs {
    /// The manifests as YAML.
    pub fn yaml(&self) -> anyhow::Result<String> {
        let clusters = self
            .clusters
            .iter()
            .map(|c| ClusterId::new(c).with_context(|| format!("--cluster {c:?}")))
            .collect::<anyhow::Result<Vec<_>>>()?;
        let layout = mcs_controller::hub::HubLayout::new(&self.broker_namespace, clusters)?
            .legacy_shared_records(self.legacy_shared_records);
        let mut command = String::from("clusterset-agent hub-manifests");
        for cluster in &self.clusters {
            command.push_str(&format!(" --cluster {cluster}"));
        }
        if self.broker_namespace != "clusterset-broker" {
            command.push_str(&format!(" --broker-namespace {}", self.broker_namespace));
        }
        if self.legacy_shared_records {
            command.push_str(" --legacy-shared-records");
        }
        Ok(layout.to_yaml(&command)?)
    }
}

/// How records in the shared broker namespace are treated (`--shared-records`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SharedRecordsArg {
    /// Ignored and counted: any member may have written them (after the upgrade).
    Ignore,
    /// Read; this agent publishes into its own records namespace and withdraws its shared
    /// copies (upgrade step 2).
    Read,
    /// Read; this agent still publishes into the shared namespace (upgrade step 1).
    Write,
}

/// How exported endpoints are published.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum EndpointModeArg {
    /// One endpoint per service: its global IP (overlapping networks, Globalnet style).
    GlobalIngress,
    /// The pods' addresses (flat networks).
    PodAddresses,
}

/// Log output format (shared by every clusterset daemon).
pub use clusterset_daemon::LogFormat;

/// The agent's own side of the leader-election flags every daemon shares: the Lease
/// `clusterset-agent` and the `CLUSTERSET_LEADER_*` variables.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentElection;

impl LeaderElectionDefaults for AgentElection {
    const LEASE_NAME: &'static str = "clusterset-agent";
    const ENV: ElectionEnv = ElectionEnv {
        leader_election: "CLUSTERSET_LEADER_ELECTION",
        lease_name: "CLUSTERSET_LEADER_LEASE_NAME",
        lease_duration: "CLUSTERSET_LEADER_LEASE_DURATION_SECONDS",
        renew_deadline: "CLUSTERSET_LEADER_LEASE_RENEW_DEADLINE_SECONDS",
        retry_period: "CLUSTERSET_LEADER_LEASE_RETRY_SECONDS",
    };
    // The agent's flags had these names already.
    const ALIASES: ElectionAliases = ElectionAliases::NONE;
}

/// Flags of `clusterset-agent run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// This cluster's id: a DNS label unique in the clusterset (source-cluster label, DNS names).
    #[arg(long, env = "CLUSTERSET_CLUSTER_ID")]
    pub cluster_id: String,
    /// The member cluster: `--kubeconfig FILE` and `--context NAME` (default: `$KUBECONFIG`,
    /// then `~/.kube/config`, then the pod's service account), as kubectl takes them.
    #[command(flatten)]
    pub cluster: KubeconfigArgs,
    /// Kubeconfig of the hub cluster that holds the broker namespace.
    #[arg(long, env = "CLUSTERSET_BROKER_KUBECONFIG")]
    pub broker_kubeconfig: PathBuf,
    /// Context in the hub kubeconfig (default: its current context).
    #[arg(long, env = "CLUSTERSET_BROKER_CONTEXT")]
    pub broker_context: Option<String>,
    /// The broker namespace on the hub cluster (heartbeat Leases; this cluster's records go to
    /// `<broker namespace>-<cluster id>`).
    #[arg(
        long,
        env = "CLUSTERSET_BROKER_NAMESPACE",
        default_value = "clusterset-broker"
    )]
    pub broker_namespace: String,
    /// Records in the shared broker namespace, from before each cluster had its own records
    /// namespace: ignored (the default), read, or read and still written by this agent. Only
    /// for the upgrade (docs/clusterset-agent.md).
    #[arg(
        long,
        env = "CLUSTERSET_SHARED_RECORDS",
        value_enum,
        default_value = "ignore"
    )]
    pub shared_records: SharedRecordsArg,
    /// This cluster's global CIDR (one per family, unique to the cluster): one address per
    /// exported service.
    #[arg(
        long = "global-cidr",
        env = "CLUSTERSET_GLOBAL_CIDRS",
        value_delimiter = ','
    )]
    pub global_cidrs: Vec<IpNet>,
    /// This cluster's clusterset CIDR (one per family): one address per ServiceImport.
    #[arg(
        long = "clusterset-cidr",
        env = "CLUSTERSET_CLUSTERSET_CIDRS",
        value_delimiter = ','
    )]
    pub clusterset_cidrs: Vec<IpNet>,
    /// How exported endpoints are published.
    #[arg(
        long,
        env = "CLUSTERSET_ENDPOINT_MODE",
        value_enum,
        default_value = "global-ingress"
    )]
    pub endpoint_mode: EndpointModeArg,
    /// Heartbeat Lease duration in seconds; a cluster whose Lease is older is marked stale.
    #[arg(long, env = "CLUSTERSET_LEASE_SECONDS", default_value_t = 30)]
    pub lease_seconds: u64,
    /// Seconds a stale cluster's exports stay imported (marked) before they are left out;
    /// 0 keeps them until the cluster returns.
    #[arg(
        long,
        env = "CLUSTERSET_STALE_DROP_AFTER_SECONDS",
        default_value_t = 600
    )]
    pub stale_drop_after_seconds: u64,
    /// Services written at once.
    #[arg(long, env = "CLUSTERSET_WRITE_CONCURRENCY", default_value_t = 16)]
    pub write_concurrency: usize,
    /// Address of the clusterset DNS server (UDP and TCP).
    #[arg(long, env = "CLUSTERSET_DNS_LISTEN", default_value = "0.0.0.0:5353")]
    pub dns_listen: SocketAddr,
    /// Do not serve DNS.
    #[arg(long, env = "CLUSTERSET_DNS_DISABLED")]
    pub no_dns: bool,
    /// The clusterset DNS zone.
    #[arg(long, env = "CLUSTERSET_DNS_ZONE", default_value = "clusterset.local")]
    pub dns_zone: String,
    /// TTL of the clusterset DNS records, seconds.
    #[arg(long, env = "CLUSTERSET_DNS_TTL", default_value_t = 5)]
    pub dns_ttl: u32,
    /// Also answer `<clusterid>.<svc>.<ns>.svc.<zone>` (Submariner Lighthouse's form, which
    /// Rook queries; the MCS DNS specification says the name must not exist).
    #[arg(long, env = "CLUSTERSET_DNS_LIGHTHOUSE_NAMES")]
    pub lighthouse_names: bool,
    /// Address of the HTTP server for /metrics, /healthz and /readyz.
    #[arg(long, env = "CLUSTERSET_HTTP_LISTEN", default_value = "0.0.0.0:9090")]
    pub http_listen: SocketAddr,
    /// Leader election in the member cluster (every replica watches and serves DNS from its own
    /// zone, only the holder of the leader Lease decides and writes), and this replica's
    /// identity, which also holds the cluster's heartbeat Lease on the hub.
    #[command(flatten)]
    pub election: LeaderElectionArgs<AgentElection>,
    /// Log format (the level comes from RUST_LOG, default info).
    #[arg(
        long,
        env = "CLUSTERSET_LOG_FORMAT",
        value_enum,
        default_value = "text"
    )]
    pub log_format: LogFormat,
}

impl RunArgs {
    /// The validated agent settings.
    pub fn agent_config(&self) -> anyhow::Result<AgentConfig> {
        let config = AgentConfig {
            cluster_id: ClusterId::new(&self.cluster_id)?,
            identity: self.election.identity(),
            broker_namespace: self.broker_namespace.clone(),
            shared_records: match self.shared_records {
                SharedRecordsArg::Ignore => SharedRecords::Ignore,
                SharedRecordsArg::Read => SharedRecords::Read,
                SharedRecordsArg::Write => SharedRecords::Write,
            },
            global_cidrs: self.global_cidrs.clone(),
            clusterset_cidrs: self.clusterset_cidrs.clone(),
            endpoint_mode: match self.endpoint_mode {
                EndpointModeArg::GlobalIngress => EndpointMode::GlobalIngress,
                EndpointModeArg::PodAddresses => EndpointMode::PodAddresses,
            },
            lease_duration: Duration::from_secs(self.lease_seconds),
            stale_drop_after: (self.stale_drop_after_seconds > 0)
                .then(|| Duration::from_secs(self.stale_drop_after_seconds)),
            first_status_wait: AgentConfig::DEFAULT_FIRST_STATUS_WAIT,
        };
        config.validate()?;
        Ok(config)
    }

    /// The DNS zone settings.
    pub fn zone_config(&self) -> anyhow::Result<ZoneConfig> {
        Ok(ZoneConfig {
            zone: Zone::new(&self.dns_zone)
                .with_context(|| format!("--dns-zone {:?}", self.dns_zone))?,
            ttl: self.dns_ttl,
            lighthouse_cluster_names: self.lighthouse_names,
            ..ZoneConfig::default()
        })
    }
}

/// The hub's CRDs as one multi-document YAML stream (generated from
/// `mcs_controller::ExportRecord` and `mcs_controller::broker::GatewaySpec`).
pub fn crd_yaml() -> anyhow::Result<String> {
    let mut out = String::new();
    for crd in mcs_controller::crd::broker_crds()? {
        out.push_str("---\n");
        out.push_str(&serde_saphyr::to_string(&crd)?);
    }
    Ok(out)
}

/// Clients of the member cluster (`--kubeconfig`, `--context`) and of the hub
/// (`--broker-kubeconfig`, `--broker-context`), both by kubectl's rules.
async fn clients(args: &RunArgs) -> anyhow::Result<(kube::Client, kube::Client)> {
    let local = args
        .cluster
        .connect()
        .await
        .context("cannot reach the member cluster")?;
    let broker = kubeconfig::connect(
        Some(&args.broker_kubeconfig),
        args.broker_context.as_deref(),
        &FlagNames::BROKER,
    )
    .await
    .context("cannot reach the hub cluster")?;
    Ok((local.client, broker.client))
}

/// Runs the agent until SIGTERM or Ctrl-C.
pub async fn run(args: RunArgs) -> anyhow::Result<()> {
    let config = args.agent_config()?;
    let zone_config = args.zone_config()?;
    let (local, broker) = clients(&args).await?;
    let metrics = Arc::new(Metrics::new());
    let readiness = Arc::new(Readiness::default());

    let (_, http) = Endpoints::new(Arc::clone(&metrics), Arc::clone(&readiness))
        .listen(args.http_listen)
        .await
        .with_context(|| format!("cannot listen on --http-listen {}", args.http_listen))?;

    let (zone, dns) = if args.no_dns {
        (None, None)
    } else {
        let store = Arc::new(ZoneStore::new(zone_config));
        let server = DnsServer::start(&ServerConfig::new(args.dns_listen), Arc::clone(&store))
            .context("cannot start the clusterset DNS server")?;
        let queries = server.query_counter();
        metrics.set_dns_query_source(move || queries.snapshot());
        (Some(store), Some(server))
    };

    let mut watches = local_watches(&local);
    watches.extend(broker_watches(&broker, &config.broker_namespace));
    let feeds = futures::stream::select_all(watches);
    let heartbeat_every = config.lease_duration / 3;
    tracing::info!(
        cluster = %config.cluster_id,
        broker_namespace = %config.broker_namespace,
        publish_namespace = %config.publish_namespace(),
        shared_records = ?config.shared_records,
        "clusterset agent starting"
    );
    let (core, election) = match args.election.settings(local.default_namespace())? {
        Some(settings) => {
            tracing::info!(
                lease = %settings.claim.name,
                namespace = %settings.claim.namespace,
                identity = %settings.claim.identity,
                "leader election: serving DNS at once, deciding and writing once this replica holds the leader Lease"
            );
            let (client, leader) = (local.clone(), metrics.leader.clone());
            let campaign = move || {
                let elector = Elector::new(
                    client.clone(),
                    settings.clone(),
                    clusterset_daemon::Clock::system(),
                );
                Leadership::spawn(elector, leader.clone())
            };
            (
                AgentCore::follower(config.clone()),
                Election::Lease(Box::new(campaign)),
            )
        }
        None => (AgentCore::new(config.clone()), Election::None),
    };
    let runtime = Runtime {
        core,
        writer: Arc::new(KubeWriter::new(local, broker, &config.broker_namespace)),
        metrics,
        readiness,
        zone,
        write_concurrency: args.write_concurrency,
        heartbeat_every,
        clock: clusterset_daemon::Clock::system(),
        election,
    };
    runtime
        .run(feeds, clusterset_daemon::shutdown_signal())
        .await;
    tracing::info!("clusterset agent stopping");
    http.abort();
    if let Some(dns) = dns {
        dns.shutdown().await;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::panic)]
    use clap::CommandFactory;

    use super::*;

    fn run_args(extra: &[&str]) -> RunArgs {
        let base = [
            "clusterset-agent",
            "run",
            "--cluster-id",
            "east",
            "--broker-kubeconfig",
            "/nonexistent/hub.kubeconfig",
        ];
        let cli = Cli::try_parse_from(base.iter().chain(extra)).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("run expected");
        };
        *args
    }

    #[test]
    fn the_member_cluster_is_chosen_like_kubectl() {
        assert_eq!(run_args(&[]).cluster, KubeconfigArgs::default());
        let args = run_args(&[
            "--kubeconfig",
            "/etc/member.kubeconfig",
            "--context",
            "east",
        ]);
        assert_eq!(
            args.cluster,
            KubeconfigArgs {
                kubeconfig: Some("/etc/member.kubeconfig".into()),
                context: Some("east".to_owned()),
            }
        );
    }

    #[test]
    fn leader_election_is_on_by_default_with_the_pods_namespace_and_client_gos_timing() {
        let settings = run_args(&["--identity", "clusterset-agent-5d8f-abcde"])
            .election
            .settings("clusterset-system")
            .unwrap()
            .unwrap();
        assert_eq!(settings.claim.name, "clusterset-agent");
        assert_eq!(settings.claim.namespace, "clusterset-system");
        assert_eq!(settings.claim.identity, "clusterset-agent-5d8f-abcde");
        assert_eq!(settings.claim.duration, Duration::from_secs(15));
        assert_eq!(settings.renew_deadline, Duration::from_secs(10));
        assert_eq!(settings.retry_period, Duration::from_secs(2));

        let settings = run_args(&[
            "--leader-lease-name",
            "agent-east",
            "--leader-lease-namespace",
            "mcs",
            "--leader-lease-duration-seconds",
            "30",
        ])
        .election
        .settings("clusterset-system")
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                settings.claim.name.as_str(),
                settings.claim.namespace.as_str()
            ),
            ("agent-east", "mcs")
        );
        assert_eq!(settings.claim.duration, Duration::from_secs(30));

        assert!(
            run_args(&["--leader-election", "false"])
                .election
                .settings("clusterset-system")
                .unwrap()
                .is_none()
        );
    }

    #[test]
    fn one_identity_holds_the_leader_lease_and_the_heartbeat_lease() {
        let args = run_args(&[
            "--identity",
            "clusterset-agent-5d8f-abcde",
            "--endpoint-mode",
            "pod-addresses",
        ]);
        let settings = args
            .election
            .settings("clusterset-system")
            .unwrap()
            .unwrap();
        let config = args.agent_config().unwrap();
        assert_eq!(config.identity, "clusterset-agent-5d8f-abcde");
        assert_eq!(settings.claim.identity, config.identity);
        // Without --identity (and POD_NAME): the host name, never the fixed name of every
        // replica.
        let args = run_args(&["--endpoint-mode", "pod-addresses"]);
        assert_eq!(
            args.agent_config().unwrap().identity,
            args.election.identity()
        );
        if args.election.identity.is_none() {
            assert_ne!(args.election.identity(), "clusterset-agent");
        }
    }

    #[test]
    fn the_leader_election_variables_are_the_agent_s() {
        let command = Cli::command();
        let run = command.find_subcommand("run").unwrap();
        let env = |long: &str| {
            run.get_arguments()
                .find(|a| a.get_long() == Some(long))
                .and_then(|a| a.get_env())
                .map(|e| e.to_string_lossy().into_owned())
        };
        for (flag, variable) in [
            ("leader-election", "CLUSTERSET_LEADER_ELECTION"),
            ("identity", "POD_NAME"),
            ("leader-lease-name", "CLUSTERSET_LEADER_LEASE_NAME"),
            ("leader-lease-namespace", "POD_NAMESPACE"),
            (
                "leader-lease-duration-seconds",
                "CLUSTERSET_LEADER_LEASE_DURATION_SECONDS",
            ),
            (
                "leader-lease-renew-deadline-seconds",
                "CLUSTERSET_LEADER_LEASE_RENEW_DEADLINE_SECONDS",
            ),
            (
                "leader-lease-retry-seconds",
                "CLUSTERSET_LEADER_LEASE_RETRY_SECONDS",
            ),
        ] {
            assert_eq!(env(flag).as_deref(), Some(variable), "--{flag}");
        }
    }

    #[test]
    fn leader_election_flags_that_cannot_work_are_refused_with_the_fix() {
        // As `run` reports it (anyhow, with its source).
        let error = anyhow::Error::from(
            run_args(&["--leader-lease-renew-deadline-seconds", "20"])
                .election
                .settings("clusterset-system")
                .unwrap_err(),
        );
        assert_eq!(
            format!("{error:#}"),
            "set 0 < --leader-lease-retry-seconds < --leader-lease-renew-deadline-seconds < --leader-lease-duration-seconds: leader election needs retry period < renew deadline < Lease duration, all above zero; got retry period 2s, renew deadline 20s, duration 15s"
        );
        let Err(error) = Cli::try_parse_from([
            "clusterset-agent",
            "run",
            "--cluster-id",
            "east",
            "--broker-kubeconfig",
            "/hub",
            "--leader-lease-namespace",
            "Clusterset_System",
        ]) else {
            panic!("an invalid namespace is accepted");
        };
        assert!(
            error
                .to_string()
                .contains("\"Clusterset_System\" is not a namespace name"),
            "{error}"
        );
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_is_named_with_its_flag() {
        let args = run_args(&["--kubeconfig", "/nonexistent/member.kubeconfig"]);
        let Err(error) = clients(&args).await else {
            panic!("a missing kubeconfig connects");
        };
        assert_eq!(
            format!("{error:#}"),
            "cannot reach the member cluster: the kubeconfig /nonexistent/member.kubeconfig does not exist: pass an existing file with --kubeconfig"
        );
        // The member cluster reachable, the hub's file missing: its own flag is named.
        let dir = std::env::temp_dir().join(format!("clusterset-agent-cli-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let member = dir.join("member.kubeconfig");
        std::fs::write(
            &member,
            "apiVersion: v1\nkind: Config\ncurrent-context: east\n\
             clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]\n\
             users: [{name: u, user: {}}]\n\
             contexts: [{name: east, context: {cluster: c, user: u}}]\n",
        )
        .unwrap();
        let args = run_args(&["--kubeconfig", member.to_str().unwrap()]);
        let Err(error) = clients(&args).await else {
            panic!("a missing kubeconfig connects");
        };
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            format!("{error:#}"),
            "cannot reach the hub cluster: the kubeconfig /nonexistent/hub.kubeconfig does not exist: pass an existing file with --broker-kubeconfig"
        );
    }
}

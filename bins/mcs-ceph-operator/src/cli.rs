//! Command-line flags (each also read from an environment variable, but `--kubeconfig` and
//! `--context`, which are kubectl's and read `$KUBECONFIG` themselves) and their wiring into
//! [`runtime::run`](mcs_ceph_runtime::runtime::run).

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use ceph_address_plan::DnsNameForm;
use clap::{Args, Parser, Subcommand, ValueEnum};
use clusterset_dns::{HickoryClustersetResolver, ResolverSettings};

use clusterset_daemon::kubeconfig::{ConnectError, KubeconfigArgs};
use clusterset_daemon::lease::{
    ElectionAliases, ElectionEnv, ElectionFlagsError, LeaderElectionArgs, LeaderElectionDefaults,
};
use mcs_ceph_core::config::{Config, GlobalIpSource, RetryPolicy};
use mcs_ceph_runtime::kube_io::KubeApi;
use mcs_ceph_runtime::runtime::{self, RunOptions};

/// The operator that brings Rook-layout Ceph clusters onto clusterset addresses.
#[derive(Debug, Parser)]
#[command(name = "mcs-ceph-operator", version, about, long_about = None)]
pub struct Cli {
    /// What to do.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the operator.
    Run(Box<RunArgs>),
    /// Print the CephClusterAddressing CRD (install it before the operator).
    Crd,
}

/// Which clusterset name a daemon's global IP is resolved from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NameFormArg {
    /// `<clusterID>.<svc>.<ns>.svc.<zone>` (Rook, Submariner Lighthouse).
    ClusterIdPrefix,
    /// `<clusterID>-<svc>.<ns>.svc.<zone>`, exporting extra cluster-unique Services.
    UniqueServiceName,
}

/// Where global IPs come from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SourceArg {
    /// Resolve the export's clusterset name.
    Dns,
    /// Read `spec.ips` of the ServiceImport of the same name.
    ServiceImport,
}

/// Log output format (shared by every clusterset daemon).
pub use clusterset_daemon::LogFormat;

/// The operator's own side of the leader-election flags every daemon shares: the Lease
/// `mcs-ceph-operator`, its `MCS_CEPH_*` variables (today's names, so that deployments that set
/// them keep working), and the names its flags had before as hidden aliases.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OperatorElection;

impl LeaderElectionDefaults for OperatorElection {
    const LEASE_NAME: &'static str = "mcs-ceph-operator";
    const ENV: ElectionEnv = ElectionEnv {
        leader_election: "MCS_CEPH_LEADER_ELECTION",
        lease_name: "MCS_CEPH_LEASE_NAME",
        lease_duration: "MCS_CEPH_LEASE_DURATION_SECONDS",
        renew_deadline: "MCS_CEPH_LEASE_RENEW_DEADLINE_SECONDS",
        retry_period: "MCS_CEPH_LEASE_RETRY_SECONDS",
    };
    const ALIASES: ElectionAliases = ElectionAliases {
        identity: &["instance"],
        lease_name: &["lease-name"],
        lease_namespace: &["lease-namespace"],
        lease_duration: &["lease-duration-seconds"],
        renew_deadline: &["lease-renew-deadline-seconds"],
        retry_period: &["lease-retry-seconds"],
    };
}

/// Flags of `mcs-ceph-operator run`.
#[derive(Debug, Args)]
pub struct RunArgs {
    /// The cluster: `--kubeconfig FILE` and `--context NAME` (default: `$KUBECONFIG`, then
    /// `~/.kube/config`, then the pod's service account), as kubectl takes them.
    #[command(flatten)]
    pub cluster: KubeconfigArgs,
    /// Which clusterset name to resolve.
    #[arg(
        long,
        env = "MCS_CEPH_DNS_NAME_FORM",
        value_enum,
        default_value = "cluster-id-prefix"
    )]
    pub dns_name_form: NameFormArg,
    /// The clusterset DNS zone.
    #[arg(long, env = "MCS_CEPH_CLUSTERSET_ZONE", default_value = mcs_types::names::DEFAULT_ZONE)]
    pub clusterset_zone: String,
    /// Where global IPs come from.
    #[arg(
        long,
        env = "MCS_CEPH_GLOBAL_IP_SOURCE",
        value_enum,
        default_value = "dns"
    )]
    pub global_ip_source: SourceArg,
    /// The nameserver to ask (ip:port); the pod's resolv.conf when unset.
    #[arg(long, env = "MCS_CEPH_NAMESERVER")]
    pub nameserver: Option<SocketAddr>,
    /// Milliseconds per DNS attempt.
    #[arg(long, env = "MCS_CEPH_DNS_TIMEOUT_MS", default_value_t = 1000)]
    pub dns_timeout_ms: u64,
    /// DNS attempts per lookup (timeouts and SERVFAIL are retried within one lookup).
    #[arg(long, env = "MCS_CEPH_DNS_ATTEMPTS", default_value_t = 3)]
    pub dns_attempts: u32,
    /// Seconds before a failed lookup is tried again (doubling per failure).
    #[arg(long, env = "MCS_CEPH_LOOKUP_RETRY_SECONDS", default_value_t = 1)]
    pub lookup_retry_seconds: u64,
    /// Longest wait between retries of a failed lookup, in seconds.
    #[arg(long, env = "MCS_CEPH_LOOKUP_RETRY_MAX_SECONDS", default_value_t = 60)]
    pub lookup_retry_max_seconds: u64,
    /// Seconds an OSD's Deployment must have been gone before the Service and ServiceExport
    /// the operator made for that OSD are deleted.
    #[arg(
        long,
        env = "MCS_CEPH_REMOVED_OSD_GRACE_SECONDS",
        default_value_t = 600
    )]
    pub removed_osd_grace_seconds: u64,
    /// Lookups in flight at once.
    #[arg(long, env = "MCS_CEPH_LOOKUP_CONCURRENCY", default_value_t = 16)]
    pub lookup_concurrency: usize,
    /// CephClusters reconciled at once.
    #[arg(long, env = "MCS_CEPH_RECONCILE_CONCURRENCY", default_value_t = 4)]
    pub reconcile_concurrency: u16,
    /// Milliseconds a queued reconcile waits for further changes of its cluster (the wait
    /// starts again with each); 0: reconcile at once.
    #[arg(long, env = "MCS_CEPH_DEBOUNCE_MS", default_value_t = 0)]
    pub debounce_ms: u64,
    /// Seconds between checks of which MCS API is served (the operator exits to be restarted
    /// when it changes); 0: never.
    #[arg(long, env = "MCS_CEPH_REDISCOVER_SECONDS", default_value_t = 300)]
    pub rediscover_seconds: u64,
    /// Namespace of Rook's operator (the `rook.io/operator-namespace` label of daemons: a
    /// namespace name, so a valid label value).
    #[arg(long, env = "MCS_CEPH_ROOK_OPERATOR_NAMESPACE", value_parser = mcs_types::names::namespace_name)]
    pub rook_operator_namespace: Option<String>,
    /// Address of `/metrics`, `/healthz` and `/readyz`.
    #[arg(long, env = "MCS_CEPH_LISTEN", default_value = "0.0.0.0:8080")]
    pub listen: SocketAddr,
    /// Leader election (every replica watches, only the holder of the Lease writes), and this
    /// replica's identity, which is also the reporting instance of its Events.
    #[command(flatten)]
    pub election: LeaderElectionArgs<OperatorElection>,
    /// Replace mons that advertise cluster IPs with mons on their global IPs, one at a time
    /// with full quorum, for the CephClusters annotated `clusterset.io/mon-migration=enabled`
    /// (once Rook's mon health check is off). Needs read access to Rook's `rook-ceph-mon`
    /// Secret (the admin key). Off by default: mons are never replaced.
    #[arg(long, env = "MCS_CEPH_MON_MIGRATION", default_value_t = false, action = clap::ArgAction::Set, num_args = 0..=1, default_missing_value = "true")]
    pub mon_migration: bool,
    /// Watch only this namespace (the CephClusters there and their objects), so that a Role in
    /// it grants everything the operator needs; every namespace when unset (ClusterRole).
    #[arg(long, env = "MCS_CEPH_WATCH_NAMESPACE", value_parser = mcs_types::names::namespace_name)]
    pub watch_namespace: Option<String>,
    /// Log format.
    #[arg(long, env = "MCS_CEPH_LOG_FORMAT", value_enum, default_value = "text")]
    pub log_format: LogFormat,
}

impl RunArgs {
    /// The operator configuration these flags describe.
    pub fn config(&self) -> Config {
        Config {
            dns_name_form: match self.dns_name_form {
                NameFormArg::ClusterIdPrefix => DnsNameForm::ClusterIdPrefix,
                NameFormArg::UniqueServiceName => DnsNameForm::UniqueServiceName,
            },
            clusterset_zone: self.clusterset_zone.clone(),
            rook_operator_namespace: self.rook_operator_namespace.clone(),
            global_ip_source: match self.global_ip_source {
                SourceArg::Dns => GlobalIpSource::Dns,
                SourceArg::ServiceImport => GlobalIpSource::ServiceImport,
            },
            retry: RetryPolicy {
                first: Duration::from_secs(self.lookup_retry_seconds.max(1)),
                max: Duration::from_secs(self.lookup_retry_max_seconds.max(1)),
            },
            removed_osd_grace: Duration::from_secs(self.removed_osd_grace_seconds),
        }
    }

    /// The resolver settings these flags describe.
    pub fn resolver_settings(&self) -> ResolverSettings {
        ResolverSettings {
            nameserver: self.nameserver,
            timeout: Duration::from_millis(self.dns_timeout_ms.max(1)),
            attempts: self.dns_attempts.max(1),
            ..ResolverSettings::default()
        }
    }
}

/// Why `run` could not start or stopped.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// No usable kubeconfig or in-cluster configuration; the source says which and the fix.
    #[error("cannot reach the cluster")]
    Connect(#[source] ConnectError),
    /// The resolver could not be built.
    #[error(transparent)]
    Resolver(#[from] clusterset_dns::resolver::ResolverSetupError),
    /// The runtime failed.
    #[error(transparent)]
    Run(#[from] runtime::RunError),
    /// The leader election timings do not nest (the message names the fix).
    #[error(transparent)]
    LeaseTiming(#[from] ElectionFlagsError),
    /// The CRD could not be generated from the status types.
    #[error(transparent)]
    Crd(#[from] mcs_types::crd::CrdError),
    /// The CRD could not be rendered.
    #[error("cannot render the CRD as YAML: {0}")]
    Yaml(String),
}

/// The CRD as YAML.
pub fn crd_yaml() -> Result<String, CliError> {
    serde_saphyr::to_string(&mcs_ceph_api::crd()?).map_err(|e| CliError::Yaml(e.to_string()))
}

/// Runs the operator until SIGTERM or Ctrl-C.
pub async fn run(args: RunArgs) -> Result<(), CliError> {
    let client = args
        .cluster
        .connect()
        .await
        .map_err(CliError::Connect)?
        .client;
    let resolver = HickoryClustersetResolver::new(args.resolver_settings())?;
    let election = args.election.settings(client.default_namespace())?;
    let options = RunOptions {
        config: args.config(),
        api: Arc::new(KubeApi::new(client.clone(), Some(args.election.identity()))),
        resolver: Arc::new(resolver),
        listen: args.listen,
        lookup_concurrency: args.lookup_concurrency.max(1),
        reconcile_concurrency: args.reconcile_concurrency.max(1),
        debounce: Duration::from_millis(args.debounce_ms),
        rediscover_every: (args.rediscover_seconds > 0)
            .then(|| Duration::from_secs(args.rediscover_seconds)),
        mon_migration: args.mon_migration,
        watch_namespace: args.watch_namespace.clone(),
    };
    runtime::run_with_election(
        client,
        options,
        election,
        clusterset_daemon::shutdown_signal(),
    )
    .await?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use clap::CommandFactory;
    use clusterset_daemon::ErrorChain;
    use clusterset_daemon::lease::LeaseSettings;

    use super::*;

    /// The flags of `mcs-ceph-operator run` followed by `extra`.
    fn run_args(extra: &[&str]) -> RunArgs {
        let cli = Cli::try_parse_from(["mcs-ceph-operator", "run"].iter().chain(extra)).unwrap();
        let Command::Run(args) = cli.command else {
            panic!("run expected");
        };
        *args
    }

    #[test]
    fn flags_become_the_configuration() {
        let cli = Cli::try_parse_from([
            "mcs-ceph-operator",
            "run",
            "--dns-name-form",
            "unique-service-name",
            "--global-ip-source",
            "service-import",
            "--nameserver",
            "10.96.0.10:53",
            "--lookup-retry-seconds",
            "2",
        ])
        .unwrap();
        let Command::Run(args) = cli.command else {
            panic!("run expected");
        };
        let config = args.config();
        assert_eq!(config.dns_name_form, DnsNameForm::UniqueServiceName);
        assert_eq!(config.global_ip_source, GlobalIpSource::ServiceImport);
        assert_eq!(config.retry.first, Duration::from_secs(2));
        assert_eq!(config.clusterset_zone, "clusterset.local");
        let settings = args.resolver_settings();
        assert_eq!(settings.nameserver, Some("10.96.0.10:53".parse().unwrap()));
        assert_eq!(settings.attempts, 3);
    }

    #[test]
    fn mon_migration_is_off_unless_asked_for() {
        let parse = |extra: &[&str]| run_args(extra).mon_migration;
        assert!(!parse(&[]));
        assert!(parse(&["--mon-migration"]));
        assert!(parse(&["--mon-migration=true"]));
        assert!(!parse(&["--mon-migration=false"]));
    }

    #[test]
    fn leader_election_is_on_by_default_in_the_pod_namespace() {
        let parse = |extra: &[&str]| run_args(&[&["--identity", "op-0"], extra].concat());
        let settings = parse(&[]).election.settings("ops").unwrap().unwrap();
        assert_eq!(
            settings,
            LeaseSettings::new("mcs-ceph-operator", "ops", "op-0")
        );
        let settings = parse(&[
            "--leader-lease-name",
            "l",
            "--leader-lease-namespace",
            "other",
        ])
        .election
        .settings("ops")
        .unwrap()
        .unwrap();
        assert_eq!(
            (
                settings.claim.name.as_str(),
                settings.claim.namespace.as_str()
            ),
            ("l", "other")
        );
        assert_eq!(
            parse(&["--leader-election=false"])
                .election
                .settings("ops")
                .unwrap(),
            None
        );
        let error = parse(&["--leader-lease-renew-deadline-seconds", "20"])
            .election
            .settings("ops")
            .unwrap_err();
        assert!(
            ErrorChain(&CliError::from(error))
                .to_string()
                .starts_with("set 0 < --leader-lease-retry-seconds < "),
        );
    }

    #[test]
    fn the_flags_of_earlier_releases_still_work() {
        let old = run_args(&[
            "--instance=op-1",
            "--lease-name=l",
            "--lease-namespace=other",
            "--lease-duration-seconds=30",
            "--lease-renew-deadline-seconds=20",
            "--lease-retry-seconds=5",
        ]);
        let new = run_args(&[
            "--identity=op-1",
            "--leader-lease-name=l",
            "--leader-lease-namespace=other",
            "--leader-lease-duration-seconds=30",
            "--leader-lease-renew-deadline-seconds=20",
            "--leader-lease-retry-seconds=5",
        ]);
        assert_eq!(old.election, new.election);
        assert_eq!(old.election.identity(), "op-1");
        // Hidden: the help names each flag once.
        let help = Cli::command()
            .find_subcommand_mut("run")
            .unwrap()
            .render_long_help()
            .to_string();
        assert!(!help.contains("--instance"), "{help}");
        assert!(!help.contains("--lease-name"), "{help}");
    }

    #[test]
    fn the_leader_election_variables_are_the_operator_s() {
        let command = Cli::command();
        let run = command.find_subcommand("run").unwrap();
        let env = |long: &str| {
            run.get_arguments()
                .find(|a| a.get_long() == Some(long))
                .and_then(|a| a.get_env())
                .map(|e| e.to_string_lossy().into_owned())
        };
        for (flag, variable) in [
            ("leader-election", "MCS_CEPH_LEADER_ELECTION"),
            ("identity", "POD_NAME"),
            ("leader-lease-name", "MCS_CEPH_LEASE_NAME"),
            ("leader-lease-namespace", "POD_NAMESPACE"),
            (
                "leader-lease-duration-seconds",
                "MCS_CEPH_LEASE_DURATION_SECONDS",
            ),
            (
                "leader-lease-renew-deadline-seconds",
                "MCS_CEPH_LEASE_RENEW_DEADLINE_SECONDS",
            ),
            ("leader-lease-retry-seconds", "MCS_CEPH_LEASE_RETRY_SECONDS"),
        ] {
            assert_eq!(env(flag).as_deref(), Some(variable), "--{flag}");
        }
    }

    #[test]
    fn the_rook_operator_namespace_is_a_namespace_name() {
        let parse = |value: &str| {
            Cli::try_parse_from([
                "mcs-ceph-operator",
                "run",
                "--rook-operator-namespace",
                value,
            ])
        };
        assert!(parse("rook-system").is_ok());
        // It becomes a label value of every OSD Service: a `/` would have each apply refused.
        let error = parse("rook/ceph").unwrap_err().to_string();
        assert!(error.contains("is not a namespace name"), "{error}");
    }

    #[test]
    fn the_cluster_is_chosen_like_kubectl() {
        let parse = |extra: &[&str]| run_args(extra).cluster;
        assert_eq!(parse(&[]), KubeconfigArgs::default());
        assert_eq!(
            parse(&["--kubeconfig", "/etc/ops.kubeconfig", "--context", "east"]),
            KubeconfigArgs {
                kubeconfig: Some("/etc/ops.kubeconfig".into()),
                context: Some("east".to_owned()),
            }
        );
    }

    #[tokio::test]
    async fn a_missing_kubeconfig_stops_the_operator_with_the_fix() {
        let args = run_args(&["--kubeconfig", "/nonexistent/ops.kubeconfig"]);
        let error = run(args).await.unwrap_err();
        assert_eq!(
            clusterset_daemon::ErrorChain(&error).to_string(),
            "cannot reach the cluster: the kubeconfig /nonexistent/ops.kubeconfig does not exist: pass an existing file with --kubeconfig"
        );
    }

    #[test]
    fn the_crd_renders_as_yaml() {
        let yaml = crd_yaml().unwrap();
        assert!(
            yaml.contains("name: cephclusteraddressings.clusterset.io"),
            "{yaml}"
        );
    }
}

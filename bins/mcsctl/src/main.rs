//! `mcsctl`: the clusterset command line.
//!
//! Each subcommand lives in its own module with an `Args` struct (its flags) and a `run`
//! function that wires the libraries: clusterset-report computes what to print (pure),
//! clusterset-inspect reads the cluster and DNS, ceph-local runs the demo, clusterset-dns
//! serves; `run` prints and chooses the exit status. `main` only parses and dispatches. Exit
//! codes: 0 success, 1 failure or problems found, 2 usage error.
#![forbid(unsafe_code)]

/// mimalloc, as in `clusterset-agent`: `mcsctl dns serve` and `demo` run the DNS zone store, whose
/// updates allocate many small objects.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod complete;
mod crds;
mod demo;
mod diagnose;
mod dns;
mod output;
mod plan;
mod progress;
mod resolve;
mod status;
mod timeout;
mod version;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, CommandFactory, FromArgMatches, Parser, Subcommand};
use clap_complete::engine::ArgValueCandidates;
use clusterset_daemon::ErrorChain;
use clusterset_daemon::kubeconfig::{KubeconfigArgs, NamespaceArgs};
use clusterset_dns::{HickoryClustersetResolver, ResolverSettings};
use clusterset_inspect::KubeReader;

/// An error in how the command was called: reported like clap's usage errors, exit status 2.
#[derive(Debug)]
pub struct UsageError(pub String);

impl UsageError {
    /// A library's refusal of an argument, with its causes (each once).
    pub fn of(error: &(dyn std::error::Error + 'static)) -> Self {
        Self(ErrorChain(error).to_string())
    }
}

impl std::fmt::Display for UsageError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for UsageError {}

/// The clusterset command line: Multi-Cluster Services for Ceph on Kubernetes.
#[derive(Debug, Parser)]
#[command(
    name = "mcsctl",
    version,
    about,
    long_about = None,
    after_help = "\
Examples:
  mcsctl plan --cluster examples/cephcluster.yaml --inventory examples/inventory.yaml
  mcsctl status -n rook-ceph
  mcsctl --context east status -o wide
  mcsctl diagnose rook-ceph-mon-a -n rook-ceph --nameserver 10.96.0.53:53
  mcsctl version
  mcsctl crds | kubectl apply --server-side -f -
  source <(COMPLETE=bash mcsctl)

Global flags (--kubeconfig, --context, -n, -o, --no-headers) go anywhere on the line.
Exit status: 0 ok, 1 problems found or the command failed, 2 usage error.
Colours only on a terminal, never with NO_COLOR set."
)]
struct Cli {
    #[command(flatten)]
    global: Global,
    #[command(subcommand)]
    command: Command,
}

/// The flags every command takes, anywhere on the line, as kubectl's: the cluster
/// (`--kubeconfig`, `--context`: `clusterset_daemon::kubeconfig`'s, the daemons' too), the
/// namespace (`-n`) and the output (`-o`, `--no-headers`). Commands that do not read a cluster
/// ignore the first three, as kubectl's do; commands that print no report refuse the last two.
#[derive(Debug, Args)]
pub struct Global {
    #[command(flatten)]
    cluster: KubeconfigArgs,
    #[command(flatten)]
    namespace: NamespaceArgs,
    #[command(flatten)]
    output: output::OutputArgs,
}

/// A reader of the cluster `cluster` names (kubectl's rules), and the namespace to work in:
/// `namespace` (`-n`), else the context's.
async fn connect(
    cluster: &KubeconfigArgs,
    namespace: &NamespaceArgs,
) -> anyhow::Result<(KubeReader, String)> {
    let connection = cluster.connect().await?;
    let namespace = namespace.or_default(&connection);
    Ok((
        KubeReader::new(connection.client, connection.origin),
        namespace,
    ))
}

/// The resolver of `resolve` and `diagnose`: `nameserver` (else the system's), `timeout` per
/// attempt, `attempts` per name.
fn resolver(
    nameserver: Option<SocketAddr>,
    timeout: Duration,
    attempts: u32,
) -> anyhow::Result<HickoryClustersetResolver> {
    Ok(HickoryClustersetResolver::new(ResolverSettings {
        nameserver,
        timeout,
        attempts,
        ..ResolverSettings::default()
    })?)
}

/// The command line: [`Cli`]'s, with the kubeconfig and namespace flags made global (they are
/// `clusterset_daemon::kubeconfig`'s, which the daemons flatten as they are) and completing
/// contexts and namespaces dynamically.
fn command() -> clap::Command {
    Cli::command()
        .mut_arg("kubeconfig", |a| a.global(true))
        .mut_arg("context", |a| {
            a.global(true)
                .add(ArgValueCandidates::new(complete::contexts))
        })
        .mut_arg("namespace", |a| {
            a.global(true)
                .add(ArgValueCandidates::new(complete::namespaces))
        })
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print CustomResourceDefinitions generated from the mcs-types crate.
    ///
    /// By default prints the ServiceExport and ServiceImport CRDs (multicluster.x-k8s.io,
    /// mcs-api v0.5.0, versions v1alpha1 and v1beta1) as multi-document YAML; `-o table`
    /// lists them.
    #[command(after_help = "\
Examples:
  mcsctl crds | kubectl apply --server-side -f -
  mcsctl crds --about | kubectl apply --server-side -f -
  mcsctl crds -o table")]
    Crds(crds::CrdsArgs),
    /// Show what the address planner would do for a CephCluster, before anything runs.
    ///
    /// Reads a Rook CephCluster manifest and an inventory (mons, OSDs, global IPs resolved so
    /// far, export conditions) and prints the plan: readiness and reasons, mons to replace,
    /// names to resolve, every daemon's address and arguments, the rook-ceph-mon-endpoints
    /// data, mon_host, the peer-token mon_host, and the Services and ServiceExports to apply.
    /// Invalid input (bad clusterID, MCS with host networking, Ceph older than 17.2.6,
    /// duplicate ids) exits with status 1 and says what to change.
    #[command(after_help = "\
Examples:
  mcsctl plan --cluster examples/cephcluster.yaml --inventory examples/inventory.yaml
  mcsctl plan --cluster cluster.yaml -o json | jq .reasons
  mcsctl plan --cluster cluster.yaml --inventory inventory.yaml -o table")]
    Plan(plan::PlanArgs),
    /// The clusterset DNS server (`mcsctl dns serve --help`).
    #[command(after_help = "\
Examples:
  mcsctl dns serve --listen 127.0.0.1:5353 --from-file zone.yaml")]
    Dns(dns::DnsArgs),
    /// Resolve clusterset names to addresses (A and AAAA), with timeouts and retries.
    ///
    /// Names that do not resolve are reported on stderr and make the exit status 1.
    #[command(after_help = "\
Examples:
  mcsctl resolve web.shop.svc.clusterset.local --nameserver 127.0.0.1:5353
  mcsctl resolve rook-ceph-mon-a.rook-ceph.svc.clusterset.local --cluster-id east
  mcsctl resolve web.shop.svc.clusterset.local -o json")]
    Resolve(resolve::ResolveArgs),
    /// Show the MCS state of the CephClusters and services in a namespace.
    ///
    /// Every CephCluster (ceph.rook.io/v1) with its multiClusterService settings; per mon and
    /// OSD Service its cluster IP, ServiceExport conditions (Valid, Ready, Conflict), global IP
    /// (this cluster's EndpointSlice address of the export), the address the daemon advertises
    /// (rook-ceph-mon-endpoints for mons, --public-addr for OSDs) and whether that is the
    /// global IP; the migration progress; and every ServiceExport/ServiceImport pair with its
    /// conditions, IPs, ports and clusters. Exit status 1 when problems are listed.
    #[command(after_help = "\
Examples:
  mcsctl status -n rook-ceph
  mcsctl status -A -o json | jq .problems
  mcsctl --context east status -o wide
  mcsctl status -n rook-ceph --watch
  mcsctl status -A -o name
  mcsctl status --context east --kubeconfig ~/.kube/clusterset")]
    Status(status::StatusArgs),
    /// Follow one service through every hop and say where it breaks.
    ///
    /// Hops: the Service exists and is exportable; its ServiceExport is Valid, Ready and
    /// without Conflict; the ServiceImport exists with IPs and ports; the clusterset DNS
    /// answer equals the import; and for Rook mon and OSD Services, the global IP exists,
    /// Rook's per-cluster name resolves to it, and the mon endpoints ConfigMap (mons) or the
    /// --public-addr argument (OSDs) carries it. Every failed check says the likely cause and
    /// the fix. Exit status 1 when a check failed.
    #[command(after_help = "\
Examples:
  mcsctl diagnose web -n shop --nameserver 127.0.0.1:5353
  mcsctl diagnose rook-ceph-mon-a -n rook-ceph --nameserver 10.96.0.53:53
  mcsctl diagnose rook-ceph-osd-0 -n rook-ceph -o json | jq .breaksAt")]
    Diagnose(diagnose::DiagnoseArgs),
    /// A guided run on this machine, without Kubernetes: three real ceph-mon daemons move to
    /// global IPs published in our clusterset DNS server, one at a time, with quorum kept.
    ///
    /// Needs Debian's ceph-mon and ceph-common (`sudo apt-get install ceph-mon ceph-common`).
    /// Mons start at 127.0.NET.11-13 ("cluster IPs") and move to 127.0.NET.21-23 ("global
    /// IPs"), each published as rook-ceph-mon-<id>.rook-ceph.svc.clusterset.local and
    /// resolved through the DNS server before its mon starts. Exit status 1 if anything fails
    /// or the quorum was ever lost.
    #[command(after_help = "\
Examples:
  mcsctl demo
  mcsctl demo --net 78 --dir /tmp/demo     (keep the cluster's files)")]
    Demo(demo::DemoArgs),
    /// Print the client's version, the Kubernetes server's, and the clusterset components'.
    ///
    /// The components are the Pods labelled app.kubernetes.io/part-of=clusterset (in every
    /// namespace, or -n), by app.kubernetes.io/name (mcs-ceph-operator, clusterset-agent):
    /// namespace, Pod, app.kubernetes.io/version, image, ready. --client prints only the
    /// client's version, without a cluster. When the cluster cannot be reached the client's
    /// version is printed, then the error (exit status 1), as kubectl does.
    #[command(after_help = "\
Examples:
  mcsctl version
  mcsctl version --client
  mcsctl version -n clusterset-system -o yaml")]
    Version(version::VersionArgs),
    /// Print a static shell completion script (dynamic completion: source <(COMPLETE=bash mcsctl)).
    ///
    /// The static script completes commands and flags. Dynamic completion, which also offers
    /// the kubeconfig's contexts and the cluster's namespaces and Services, is mcsctl itself
    /// answering the shell: source <(COMPLETE=bash mcsctl) (zsh, fish, elvish, powershell
    /// likewise).
    #[command(after_help = "\
Examples:
  mcsctl completions bash > ~/.local/share/bash-completion/completions/mcsctl
  mcsctl completions zsh > \"${fpath[1]}/_mcsctl\"
  mcsctl completions fish > ~/.config/fish/completions/mcsctl.fish
  source <(COMPLETE=bash mcsctl)      (dynamic: contexts, namespaces, Services too)")]
    Completions(CompletionsArgs),
}

/// Options of `mcsctl completions`.
#[derive(Debug, Args)]
struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

fn completions(args: &CompletionsArgs, global: &Global) -> anyhow::Result<ExitCode> {
    global.output.refuse("completions")?;
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut command(), "mcsctl", &mut script);
    output::print(&String::from_utf8_lossy(&script))
}

fn main() -> ExitCode {
    // `COMPLETE=bash mcsctl` prints the shell's registration; the shell then runs mcsctl with
    // COMPLETE set to complete a line. Otherwise this returns at once.
    clap_complete::CompleteEnv::with_factory(command).complete();
    let cli = match Cli::from_arg_matches(&command().get_matches()) {
        Ok(cli) => cli,
        Err(e) => e.exit(),
    };
    let global = &cli.global;
    let result = match cli.command {
        Command::Crds(args) => crds::run(&args, global),
        Command::Dns(args) => global
            .output
            .refuse("dns")
            .map_err(anyhow::Error::from)
            .and_then(|()| dns::run(&args)),
        Command::Resolve(args) => resolve::run(&args, global),
        Command::Plan(args) => plan::run(&args, global),
        Command::Status(args) => status::run(&args, global),
        Command::Diagnose(args) => diagnose::run(&args, global),
        Command::Demo(args) => global
            .output
            .refuse("demo")
            .map_err(anyhow::Error::from)
            .and_then(|()| demo::run(&args)),
        Command::Version(args) => version::run(&args, global),
        Command::Completions(args) => completions(&args, global),
    };
    match result {
        Ok(code) => code,
        Err(e) if e.chain().any(|c| c.is::<UsageError>()) => {
            eprintln!("error: {e:#}\n\nFor more information, try '--help'.");
            ExitCode::from(2)
        }
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_command_line_is_consistent() {
        super::command().debug_assert();
    }
}

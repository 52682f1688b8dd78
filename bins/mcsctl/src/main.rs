//! `mcsctl`: the clusterset command line.
//!
//! Each subcommand lives in its own module with an `Args` struct and a `run` function; `main`
//! only parses and dispatches. Exit codes: 0 success, 1 failure or problems found, 2 usage error.
#![forbid(unsafe_code)]

/// mimalloc, as in `clusterset-agent`: `mcsctl dns serve` and `demo` run the DNS zone store, whose
/// updates allocate many small objects.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod crds;
mod demo;
mod diagnose;
mod dns;
mod output;
mod plan;
mod progress;
mod resolve;
mod status;

use std::process::ExitCode;

use clap::{Args, CommandFactory, Parser, Subcommand};

/// An error in how the command was called: reported like clap's usage errors, exit status 2.
#[derive(Debug)]
pub struct UsageError(pub String);

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
  mcsctl diagnose rook-ceph-mon-a -n rook-ceph --nameserver 10.96.0.53:53
  mcsctl crds | kubectl apply --server-side -f -
  mcsctl completions bash > /etc/bash_completion.d/mcsctl

Exit status: 0 ok, 1 problems found or the command failed, 2 usage error.
Colours only on a terminal, never with NO_COLOR set."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
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
    /// Print a shell completion script.
    #[command(after_help = "\
Examples:
  mcsctl completions bash > ~/.local/share/bash-completion/completions/mcsctl
  mcsctl completions zsh > \"${fpath[1]}/_mcsctl\"
  mcsctl completions fish > ~/.config/fish/completions/mcsctl.fish")]
    Completions(CompletionsArgs),
}

/// Options of `mcsctl completions`.
#[derive(Debug, Args)]
struct CompletionsArgs {
    /// The shell.
    #[arg(value_enum)]
    shell: clap_complete::Shell,
}

fn completions(args: &CompletionsArgs) -> anyhow::Result<ExitCode> {
    let mut script = Vec::new();
    clap_complete::generate(args.shell, &mut Cli::command(), "mcsctl", &mut script);
    output::print(&String::from_utf8_lossy(&script))
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crds(args) => crds::run(&args),
        Command::Dns(args) => dns::run(&args),
        Command::Resolve(args) => resolve::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Status(args) => status::run(&args),
        Command::Diagnose(args) => diagnose::run(&args),
        Command::Demo(args) => demo::run(&args),
        Command::Completions(args) => completions(&args),
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

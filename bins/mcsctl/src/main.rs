//! `mcsctl`: the clusterset command line.
//!
//! Each subcommand lives in its own module with an `Args` struct and a `run` function; `main`
//! only parses and dispatches. Exit codes: 0 success, 1 failure or problems found, 2 usage error.
#![forbid(unsafe_code)]

mod crds;
mod demo;
mod dns;
mod output;
mod plan;
mod resolve;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The clusterset command line: Multi-Cluster Services for Ceph on Kubernetes.
#[derive(Debug, Parser)]
#[command(name = "mcsctl", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Print CustomResourceDefinitions generated from the mcs-types crate.
    ///
    /// By default prints the ServiceExport and ServiceImport CRDs (multicluster.x-k8s.io,
    /// mcs-api v0.5.0, versions v1alpha1 and v1beta1) as multi-document YAML.
    ///
    /// Examples:
    ///   mcsctl crds | kubectl apply --server-side -f -
    ///   mcsctl crds --about | kubectl apply --server-side -f -
    #[command(verbatim_doc_comment)]
    Crds(crds::CrdsArgs),
    /// Show what the address planner would do for a CephCluster, before anything runs.
    ///
    /// Reads a Rook CephCluster manifest and an inventory (mons, OSDs, global IPs resolved so
    /// far, export conditions) and prints the plan: readiness and reasons, mons to replace,
    /// names to resolve, every daemon's address and arguments, the rook-ceph-mon-endpoints
    /// data, mon_host, the peer-token mon_host, and the Services and ServiceExports to apply.
    /// Invalid input (bad clusterID, MCS with host networking, Ceph older than 17.2.6,
    /// duplicate ids) exits with status 1 and says what to change.
    ///
    /// Examples:
    ///   mcsctl plan --cluster examples/cephcluster.yaml --inventory examples/inventory.yaml
    ///   mcsctl plan --cluster cluster.yaml -o json | jq .reasons
    #[command(verbatim_doc_comment)]
    Plan(plan::PlanArgs),
    /// The clusterset DNS server (`mcsctl dns serve --help`).
    Dns(dns::DnsArgs),
    /// Resolve clusterset names to addresses (A and AAAA), with timeouts and retries.
    ///
    /// Examples:
    ///   mcsctl resolve web.shop.svc.clusterset.local --nameserver 127.0.0.1:5353
    ///   mcsctl resolve rook-ceph-mon-a.rook-ceph.svc.clusterset.local --cluster-id east
    #[command(verbatim_doc_comment)]
    Resolve(resolve::ResolveArgs),
    /// A guided run on this machine, without Kubernetes: three real ceph-mon daemons move to
    /// global IPs published in our clusterset DNS server, one at a time, with quorum kept.
    ///
    /// Needs Debian's ceph-mon and ceph-common (`sudo apt-get install ceph-mon ceph-common`).
    /// Mons start at 127.0.NET.11-13 ("cluster IPs") and move to 127.0.NET.21-23 ("global
    /// IPs"), each published as rook-ceph-mon-<id>.rook-ceph.svc.clusterset.local and
    /// resolved through the DNS server before its mon starts. Exit status 1 if anything fails
    /// or the quorum was ever lost.
    ///
    /// Examples:
    ///   mcsctl demo
    ///   mcsctl demo --net 78 --dir /tmp/demo     (keep the cluster's files)
    #[command(verbatim_doc_comment)]
    Demo(demo::DemoArgs),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Crds(args) => crds::run(&args),
        Command::Dns(args) => dns::run(&args),
        Command::Resolve(args) => resolve::run(&args),
        Command::Plan(args) => plan::run(&args),
        Command::Demo(args) => demo::run(&args),
    };
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}

//! `clusterset-lab mirror`: watch the mission on one machine. Two Ceph Reef clusters whose pod
//! networks overlap mirror RBD images through global IPs; then every daemon of the first is
//! killed, the second takes over, and the first fails back; then a planned failover and back.
//! Each stage prints as it finishes, with its timing, and checks what it claims (checksums equal,
//! which side is primary): the command exits non-zero when a claim does not hold. A table of the
//! stages and their times ends the output. The gateways are `clusterset-gateway` processes
//! (built by cargo when run through `cargo run`, else found next to this binary or in
//! `CLUSTERSET_LAB_BIN_DIR`). Needs root, iproute2, nftables, bind9-dnsutils and the Ceph Reef
//! root filesystem (`sudo bash tests/lab/ceph-reef-root.sh`); see docs/lab.md.
#![forbid(unsafe_code)]

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use ceph_address_plan::{MonId, args};
use clap::{Parser, Subcommand};
use clusterset_error_chain::ErrorChain;
use clusterset_lab::mirror::{MirrorLab, listeners_of, run_mirror_scenario};
use clusterset_lab::{CephSite, LabError, Topology, require_ceph_root, require_host};
use mon_failover::CephMonAdmin;

/// The clusterset lab: two clusters with overlapping pod networks on this machine.
#[derive(Debug, Parser)]
#[command(name = "clusterset-lab", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Mirror RBD images between two Ceph clusters with the same pod CIDR through global IPs,
    /// lose the first cluster, fail over to the second and back, printing each stage.
    Mirror {
        /// Keep the clusters' files (conf, keyrings, logs) in this directory instead of a
        /// temporary one removed at the end.
        #[arg(long, value_name = "DIR")]
        keep: Option<PathBuf>,
    },
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() -> Result<()> {
    match Cli::parse().command {
        Command::Mirror { keep } => mirror(keep).await,
    }
}

async fn mirror(keep: Option<PathBuf>) -> Result<()> {
    require_host()?;
    let install = require_ceph_root()?;
    let temporary;
    let dir = match keep {
        Some(dir) => {
            std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
            // Daemons run from a root filesystem, where `chroot` starts at `/`.
            std::path::absolute(&dir).with_context(|| format!("resolving {}", dir.display()))?
        }
        None => {
            temporary = tempfile::tempdir().context("creating a temporary directory")?;
            temporary.path().to_owned()
        }
    };
    let started = Instant::now();
    println!(
        "==> two clusters, pod CIDR 10.244.0.0/24 in both, each behind a clusterset-gateway process (Globalnet-style NAT)"
    );
    let lab = MirrorLab::start(install, &dir, true)
        .await
        .context("starting the clusters")?;
    println!("==> Ceph Reef clusters up ({:.1?})", started.elapsed());
    for site in [&lab.a, &lab.b] {
        print_addresses(lab.topology(), site).await?;
    }
    let peered = Instant::now();
    let peering = lab.peer().await.context("peering the clusters")?;
    lab.a.start_rbd_mirror().await?;
    lab.b.start_rbd_mirror().await?;
    println!(
        "==> peered ({:.1?}): A's bootstrap token carries the plan's mon_host {} (it had {}); rbd-mirror runs in both",
        peered.elapsed(),
        peering.plan_mon_host,
        peering.token_mon_host
    );
    let mut stages = Vec::new();
    let outcome = run_mirror_scenario(&lab, |stage| {
        println!(
            "==> {} ({:.1?})\n    {}",
            stage.name, stage.took, stage.detail
        );
        stages.push((stage.name, stage.took));
    })
    .await;
    print_summary(&stages, outcome.as_ref().err());
    outcome.context("the mirroring scenario")?;
    println!("==> done in {:.1?}", started.elapsed());
    Ok(())
}

/// The table of the stages that passed with their times, and the one that failed if one did.
fn print_summary(stages: &[(&str, Duration)], failed: Option<&LabError>) {
    let width = stages.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
    println!("==> stages");
    for (name, took) in stages {
        println!("    {name:<width$}  {:>8.1?}  ok", took);
    }
    if let Some(error) = failed {
        println!("    FAILED after the stages above: {}", ErrorChain(error));
    }
}

/// A cluster's mons and OSDs as they run: what each advertises (the monmap, the osdmap's
/// front address) and what it binds (a mon's `--public-bind-addr` in its command line, an OSD's
/// back address), and the addresses the cluster's daemons listen on (`ss`).
async fn print_addresses(topology: &Topology, site: &CephSite) -> Result<()> {
    let net = site.net();
    println!(
        "    cluster {} (global {}, pods in netns {}):",
        net.cluster_id, net.global_cidr, net.netns
    );
    let status = site.admin().quorum_status().await?;
    for mon in &status.monmap.mons {
        let id: MonId = mon.name.parse()?;
        let bind = match site.runtime().pid(&id).await {
            Some(pid) => {
                let cmdline = std::fs::read_to_string(format!("/proc/{pid}/cmdline"))
                    .with_context(|| format!("reading mon {id}'s command line"))?;
                let line: Vec<String> = cmdline.split('\0').map(str::to_owned).collect();
                args::flag_value(&line, args::PUBLIC_BIND_ADDR)
                    .unwrap_or("-")
                    .to_owned()
            }
            None => "(not running)".to_owned(),
        };
        let name = format!("mon.{id}");
        println!("      {name:<7} binds {bind:<13} advertises {}", mon.ip()?);
    }
    let show = |ip: Option<IpAddr>| ip.map_or_else(|| "-".to_owned(), |ip| ip.to_string());
    for (id, osd) in site.osd_states().await? {
        let name = format!("osd.{id}");
        println!(
            "      {name:<7} binds {:<13} advertises {} (osdmap: back, front)",
            show(osd.back),
            show(osd.front)
        );
    }
    let mut listening = BTreeSet::new();
    for program in ["ceph-mon", "ceph-osd", "ceph-mgr"] {
        listening.extend(listeners_of(topology, site.spec().side, program).await?);
    }
    let listening: Vec<String> = listening.iter().map(ToString::to_string).collect();
    println!("      its daemons listen on (ss): {}", listening.join(", "));
    let dnat: Vec<String> = topology
        .gateway_dnat(site.spec().side)
        .await?
        .iter()
        .map(|(global, pod)| format!("{global} -> {pod}"))
        .collect();
    println!(
        "      its gateway (clusterset-gateway in netns {}, table ip clusterset_gw) DNATs: {}",
        net.gateway,
        dnat.join(", ")
    );
    Ok(())
}

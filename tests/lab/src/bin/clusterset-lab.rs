//! `clusterset-lab mirror`: watch the mission on one machine. Two Ceph Reef clusters whose pod
//! networks overlap mirror RBD images through global IPs; then every daemon of the first is
//! killed, the second takes over, and the first fails back. Each stage prints as it finishes,
//! with its timing. Needs root, iproute2, nftables, bind9-dnsutils and the Ceph Reef root
//! filesystem (`sudo bash tests/lab/ceph-reef-root.sh`); see docs/lab.md.
#![forbid(unsafe_code)]

use std::path::PathBuf;
use std::time::Instant;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use clusterset_lab::mirror::{MirrorLab, run_mirror_scenario};
use clusterset_lab::{CephSite, require_ceph_root, require_host};

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
            dir
        }
        None => {
            temporary = tempfile::tempdir().context("creating a temporary directory")?;
            temporary.path().to_owned()
        }
    };
    let started = Instant::now();
    println!("==> two clusters, pod CIDR 10.244.0.0/24 in both, behind Globalnet-style gateways");
    let lab = MirrorLab::start(install, &dir, true)
        .await
        .context("starting the clusters")?;
    println!("==> Ceph Reef clusters up ({:.1?})", started.elapsed());
    for site in [&lab.a, &lab.b] {
        print_addresses(site).await?;
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
    run_mirror_scenario(&lab, |stage| {
        println!(
            "==> {} ({:.1?})\n    {}",
            stage.name, stage.took, stage.detail
        );
    })
    .await
    .context("the mirroring scenario")?;
    println!("==> done in {:.1?}", started.elapsed());
    Ok(())
}

/// A cluster's mons and OSDs: the pod IP each binds and the global IP it advertises.
async fn print_addresses(site: &CephSite) -> Result<()> {
    let net = site.net();
    println!(
        "    cluster {} (global {}, pods in netns {}):",
        net.cluster_id, net.global_cidr, net.netns
    );
    let plan = site.plan().await?;
    for mon in plan.mons() {
        let bind = site
            .endpoints()
            .pod_ip(mon.id())
            .await
            .map_or_else(|| "-".to_owned(), |ip| ip.to_string());
        let advertised = mon
            .endpoint()
            .map_or_else(|| "-".to_owned(), |e| e.to_string());
        println!(
            "      mon.{:<3} binds {bind:<13} advertises {advertised}",
            mon.id()
        );
    }
    for osd in site.osds().await {
        let advertised = osd.global.unwrap_or(osd.advertised);
        let name = format!("osd.{}", osd.id);
        println!(
            "      {name:<7} binds {:<13} advertises {advertised}",
            osd.pod
        );
    }
    Ok(())
}

//! The scale benchmark on real API servers: the operator on Rook layouts of 100, 300 and 1,000
//! OSDs (10 per failure domain) and the agents on 2,000 exports created at once and 200 one at
//! a time, in the suite's own clusters (or `CLUSTERSET_E2E_EAST_CONTEXT` /
//! `CLUSTERSET_E2E_WEST_CONTEXT`). Run by hand, as root, with release builds:
//!
//! ```text
//! cargo run --release -p clusterset-e2e --bin scale -- --osds 100,300,1000 --exports 2000
//! ```
//!
//! What it prints and why: `clusterset_e2e::scale` and docs/benchmarks.md.
#![forbid(unsafe_code)]

use std::time::Duration;

use anyhow::Context;
use clap::Parser;
use clusterset_e2e::scale::{exports_run, operator_run, print_exports, print_operator};
use clusterset_e2e::{Target, World};

/// The scale benchmark (docs/benchmarks.md).
#[derive(Debug, Parser)]
struct Args {
    /// OSD counts of the operator runs, one run each (0 or empty: no operator run).
    #[arg(long, value_delimiter = ',', default_value = "100,300,1000")]
    osds: Vec<u32>,
    /// OSDs per failure domain.
    #[arg(long, default_value_t = 10)]
    per_domain: u32,
    /// Exports created at once in the exports run (0: no exports run).
    #[arg(long, default_value_t = 2000)]
    exports: u32,
    /// Exports made one at a time after them (p50 and p99).
    #[arg(long, default_value_t = 200)]
    singles: u32,
    /// The idle window after each run in which writes are counted.
    #[arg(long, default_value_t = 60)]
    idle_seconds: u64,
    /// How long each stage may take.
    #[arg(long, default_value_t = 600)]
    limit_seconds: u64,
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let args = Args::parse();
    let idle = Duration::from_secs(args.idle_seconds);
    let limit = Duration::from_secs(args.limit_seconds);
    let target = Target::all()?
        .into_iter()
        .next()
        .context("no target: set CLUSTERSET_E2E_RELEASES or the two contexts")?;
    println!("scale bench on {target}");
    for osds in args.osds.iter().copied().filter(|n| *n > 0) {
        let mut world = World::start(&target).await?;
        let report = operator_run(&mut world, osds, args.per_domain, idle, limit).await;
        world.stop().await?;
        print_operator(&report?);
    }
    if args.exports > 0 {
        let mut world = World::start(&target).await?;
        let report = exports_run(&mut world, args.exports, args.singles, idle, limit).await;
        world.stop().await?;
        print_exports(&report?);
    }
    Ok(())
}

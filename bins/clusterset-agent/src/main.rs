//! `clusterset-agent`: the Multi-Cluster Services control plane of one member cluster.
#![forbid(unsafe_code)]

use clap::Parser;
use clusterset_agent::cli::{Cli, Command};

/// mimalloc: zone and index updates allocate many small objects, and glibc's allocator spends
/// a third of an update consolidating and unlinking them (docs/benchmarks.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let cli = Cli::parse();
    match cli.command {
        Command::Crd => {
            print!("{}", clusterset_agent::cli::crd_yaml()?);
            Ok(())
        }
        Command::HubManifests(args) => {
            print!("{}", args.yaml()?);
            Ok(())
        }
        Command::Run(args) => {
            clusterset_daemon::init_logging(args.log_format);
            clusterset_agent::cli::run(*args).await
        }
    }
}

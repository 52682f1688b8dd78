//! `clusterset-agent`: the Multi-Cluster Services control plane of one member cluster.
#![forbid(unsafe_code)]

use clap::Parser;
use clusterset_agent::cli::{Cli, Command};

/// mimalloc: zone and index updates allocate many small objects, and glibc's allocator spends
/// a third of an update consolidating and unlinking them (docs/benchmarks.md). Without
/// transparent huge pages ([`clusterset_agent::memory`]).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // First: the memory touched from here on is not backed by transparent huge pages.
    let thp = clusterset_agent::memory::disable_thp();
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
            if let Err(error) = thp {
                tracing::warn!(%error, "cannot turn transparent huge pages off; the agent's resident memory may be larger");
            }
            clusterset_agent::cli::run(*args).await
        }
    }
}

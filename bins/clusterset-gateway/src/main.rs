//! `clusterset-gateway`: the clusterset data plane on a member cluster's gateway node
//! (docs/data-plane.md). It programs `gateway-rules`' table `ip clusterset_gw` as one atomic
//! nftables transaction and the routes to the peers' global CIDRs.
//!
//! The state comes from the API servers (`run` with the cluster flags: the agent's export
//! records and the peers' gateway records on the hub, the Services' EndpointSlices in this
//! cluster; module `follow`) or, offline, from a file (`--state`,
//! `examples/gateway-state.yaml`).

mod apply;
mod follow;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use gateway_rules::RuleSet;

/// The clusterset gateway: Globalnet-style NAT and routes to the peers' global CIDRs.
#[derive(Debug, Parser)]
#[command(version, about)]
struct Cli {
    #[command(subcommand)]
    command: Commands,
}

#[derive(Debug, Subcommand)]
enum Commands {
    /// Validate the state and print the nft transaction; apply nothing.
    Check {
        /// The state file (YAML or JSON).
        #[arg(long)]
        state: PathBuf,
    },
    /// Validate the state and apply it: the table in one nft transaction, then the routes.
    Apply {
        /// The state file (YAML or JSON).
        #[arg(long)]
        state: PathBuf,
    },
    /// Program the rules and keep them current until SIGTERM, which leaves them in place: from
    /// the API servers (the cluster flags), or from a state file (`--state`, checked every
    /// 200 ms). An invalid state keeps the last good rules.
    Run {
        /// Offline mode: the state file (YAML or JSON), instead of the cluster flags.
        #[arg(long, conflicts_with_all = ["cluster_id", "broker_kubeconfig", "gateway_ip"])]
        state: Option<PathBuf>,
        /// The cluster flags (without `--state`).
        #[command(flatten)]
        cluster: Box<follow::ClusterArgs>,
    },
    /// Print `nft list table ip clusterset_gw`.
    Show,
}

/// How often `run` looks at the state file.
const POLL: Duration = Duration::from_millis(200);

fn main() -> Result<()> {
    let cli = Cli::parse();
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info")),
        )
        .init();
    match cli.command {
        Commands::Check { state } => {
            let rules = apply::load(&state)?;
            print!("{}", rules.to_nft_script());
            for route in rules.routes() {
                println!("# route {route}");
            }
            Ok(())
        }
        Commands::Apply { state } => {
            let rules = apply::load(&state)?;
            apply::apply(&rules, None).context("applying the rules")?;
            Ok(())
        }
        Commands::Run { state, cluster } => {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .context("starting the runtime")?;
            match state {
                Some(state) => runtime.block_on(run(&state)),
                None => runtime.block_on(follow::run(&cluster)),
            }
        }
        Commands::Show => {
            print!("{}", apply::show()?);
            Ok(())
        }
    }
}

/// `run`: apply, then follow the file; the last good rule set stays on any failure.
async fn run(path: &Path) -> Result<()> {
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
        .context("listening for SIGTERM")?;
    let mut tick = tokio::time::interval(POLL);
    let mut routes_tick = tokio::time::interval(apply::ROUTES_RESYNC);
    let mut seen: Option<String> = None;
    let mut applied: Option<RuleSet> = None;
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
            _ = routes_tick.tick() => {
                apply::resync_routes(applied.as_ref());
                continue;
            }
            _ = tick.tick() => {}
        }
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(error) => {
                if seen.is_some() {
                    tracing::warn!(file = %path.display(), %error, "cannot read the state file; keeping the rules in place");
                    seen = None;
                }
                continue;
            }
        };
        if seen.as_ref() == Some(&text) {
            continue;
        }
        seen = Some(text.clone());
        match apply::rules_from_text(&text) {
            Err(error) => tracing::error!(
                file = %path.display(),
                error = format!("{error:#}"),
                "the state is invalid; keeping the last good rules"
            ),
            Ok(rules) => match apply::apply(&rules, applied.as_ref()) {
                Ok(how) => {
                    tracing::info!(
                        ?how,
                        exports = rules.ingress().len(),
                        rules = rules.rule_count(),
                        elements = rules.element_count(),
                        "applied"
                    );
                    applied = Some(rules);
                }
                Err(error) => tracing::error!(
                    error = format!("{error:#}"),
                    "applying failed; keeping the last good rules"
                ),
            },
        }
    }
    tracing::info!(
        "stopping; the rules stay in place so established connections survive a restart"
    );
    Ok(())
}

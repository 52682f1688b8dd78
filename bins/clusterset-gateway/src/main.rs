//! `clusterset-gateway`: the clusterset data plane on a member cluster's gateway node
//! (docs/data-plane.md). It programs `gateway-rules`' table `ip clusterset_gw` as one atomic
//! nftables transaction and the routes to the peers' global CIDRs.
//!
//! Offline mode: the state comes from a file (`examples/gateway-state.yaml`); this is how the
//! gateway is fed until it reads the clusterset's state from the API servers.

mod apply;

use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use gateway_rules::RuleSet;

/// The clusterset gateway: Globalnet-style NAT and routes from a state file.
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
    /// Apply the state, then again whenever the file changes (checked every 200 ms); an invalid
    /// file keeps the last good rules. SIGTERM exits and leaves the rules in place.
    Run {
        /// The state file (YAML or JSON).
        #[arg(long)]
        state: PathBuf,
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
        Commands::Run { state } => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .context("starting the runtime")?
            .block_on(run(&state)),
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
    let mut seen: Option<String> = None;
    let mut applied: Option<RuleSet> = None;
    loop {
        tokio::select! {
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
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

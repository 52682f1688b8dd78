//! `mcsctl resolve`: clusterset names to addresses, with clusterset-dns's resolver.

use std::fmt::Write as _;
use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use clusterset_dns::{HickoryClustersetResolver, ResolverSettings, resolve_all};
use mcs_types::names::{ClustersetName, NameForm, Zone};

/// Options of `mcsctl resolve`.
#[derive(Debug, Args)]
pub struct ResolveArgs {
    /// Names to resolve: <svc>.<ns>.svc.<zone> or any other clusterset name form.
    #[arg(required = true, value_name = "NAME")]
    names: Vec<String>,
    /// The nameserver to ask (default: the system's, from /etc/resolv.conf).
    #[arg(long, value_name = "IP:PORT")]
    nameserver: Option<SocketAddr>,
    /// Ask for <ID>.<svc>.<ns>.svc.<zone> (the Lighthouse per-cluster form Rook uses) instead of
    /// each service name.
    #[arg(long, value_name = "ID")]
    cluster_id: Option<String>,
    /// The clusterset zone.
    #[arg(long, default_value = mcs_types::names::DEFAULT_ZONE)]
    zone: Zone,
    /// Time for one attempt, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// Attempts per name.
    #[arg(long, default_value_t = 4)]
    attempts: u32,
}

/// The names to ask for: parsed in the zone, turned into the per-cluster form with a cluster id.
pub fn names_to_ask(args: &ResolveArgs) -> anyhow::Result<Vec<ClustersetName>> {
    args.names
        .iter()
        .map(|text| {
            let name = ClustersetName::parse(text, &args.zone)
                .with_context(|| format!("cannot resolve {text:?}"))?;
            match &args.cluster_id {
                None => Ok(name),
                Some(id) if name.form() == &NameForm::Service => name
                    .cluster_service(id)
                    .with_context(|| format!("--cluster-id {id:?} with {text:?}")),
                Some(_) => anyhow::bail!(
                    "--cluster-id needs service names (<svc>.<ns>.svc.{}), not {text:?}",
                    args.zone
                ),
            }
        })
        .collect()
}

/// Resolves the names and prints `NAME ADDRESS...` per line; failures go to stderr and make
/// the exit status 1.
pub fn run(args: &ResolveArgs) -> anyhow::Result<ExitCode> {
    let names = names_to_ask(args)?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let results = runtime.block_on(async {
        let resolver = HickoryClustersetResolver::new(ResolverSettings {
            nameserver: args.nameserver,
            timeout: Duration::from_millis(args.timeout_ms),
            attempts: args.attempts,
            ..ResolverSettings::default()
        })?;
        anyhow::Ok(resolve_all(&resolver, &names, 16).await)
    })?;
    let mut out = String::new();
    let mut failed = 0;
    for result in results {
        match result {
            Ok(resolution) => {
                let addresses: Vec<String> = resolution
                    .addresses
                    .iter()
                    .map(ToString::to_string)
                    .collect();
                let _ = writeln!(out, "{} {}", resolution.name, addresses.join(" "));
            }
            Err(e) => {
                failed += 1;
                eprintln!("error: {e}");
            }
        }
    }
    crate::output::print(&out)?;
    Ok(if failed == 0 {
        ExitCode::SUCCESS
    } else {
        ExitCode::FAILURE
    })
}

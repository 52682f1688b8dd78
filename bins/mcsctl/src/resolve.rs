//! `mcsctl resolve`: clusterset names to addresses, with clusterset-dns's resolver.

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use clusterset_dns::{HickoryClustersetResolver, ResolverSettings, resolve_all};
use clusterset_report::resolve::{NameResult, render_table_in};
use mcs_types::names::{ClustersetName, NameForm, Zone};

use crate::output::{self, Format};
use crate::progress::Spinner;
use crate::{Global, UsageError, timeout};

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
    /// Time for one attempt: 300ms, 1s, 2s.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = timeout::parse)]
    timeout: Duration,
    /// Deprecated: --timeout=<N>ms.
    #[arg(long, hide = true, value_name = "MS", conflicts_with = "timeout")]
    timeout_ms: Option<u64>,
    /// Attempts per name.
    #[arg(long, default_value_t = 4)]
    attempts: u32,
}

impl ResolveArgs {
    /// `--timeout`, or the deprecated `--timeout-ms`.
    fn timeout(&self) -> Duration {
        timeout::with_deprecated(
            self.timeout,
            self.timeout_ms
                .map(|ms| ("--timeout-ms", Duration::from_millis(ms))),
            "--timeout",
        )
    }
}

/// The names to ask for: parsed in the zone, turned into the per-cluster form with a cluster id.
pub fn names_to_ask(args: &ResolveArgs) -> anyhow::Result<Vec<ClustersetName>> {
    args.names
        .iter()
        .map(|text| {
            let name = ClustersetName::parse(text, &args.zone)
                .map_err(|e| UsageError(format!("cannot resolve {text:?}: {e}")))?;
            match &args.cluster_id {
                None => Ok(name),
                Some(id) if name.form() == &NameForm::Service => {
                    name.cluster_service(id).map_err(|e| {
                        UsageError(format!("--cluster-id {id:?} with {text:?}: {e}")).into()
                    })
                }
                Some(_) => Err(UsageError(format!(
                    "--cluster-id needs service names (<svc>.<ns>.svc.{}), not {text:?}",
                    args.zone
                ))
                .into()),
            }
        })
        .collect()
}

/// Resolves the names and prints them in the chosen format; failures also go to stderr and
/// make the exit status 1.
pub fn run(args: &ResolveArgs, global: &Global) -> anyhow::Result<ExitCode> {
    let shape = global
        .output
        .shape("resolve", Format::Table, output::REPORT)?;
    let names = names_to_ask(args)?;
    let timeout = args.timeout();
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let results = runtime.block_on(async {
        let resolver = HickoryClustersetResolver::new(ResolverSettings {
            nameserver: args.nameserver,
            timeout,
            attempts: args.attempts,
            ..ResolverSettings::default()
        })?;
        let spinner = Spinner::start(format!(
            "resolving {} name(s), up to {} attempts of {} ms each",
            names.len(),
            args.attempts,
            timeout.as_millis()
        ));
        let results = resolve_all(&resolver, &names, 16).await;
        spinner.finish();
        anyhow::Ok(results)
    })?;
    let results: Vec<NameResult> = results
        .iter()
        .zip(&names)
        .map(|(result, name)| NameResult::new(name, result.as_ref().map(|r| &r.addresses[..])))
        .collect();
    for error in results.iter().filter_map(|r| r.error.as_ref()) {
        eprintln!("error: {error}");
    }
    let failed = results.iter().any(|r| r.error.is_some());
    output::print_verdict(
        &output::render(
            &results,
            &shape,
            |r, layout| render_table_in(r, layout),
            output::no_names,
        )?,
        failed,
    )
}

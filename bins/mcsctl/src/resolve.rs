//! `mcsctl resolve`: clusterset names to addresses (clusterset-report's `names_to_ask`,
//! clusterset-inspect's `resolve` with clusterset-dns's resolver).

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use clusterset_inspect::resolve::resolve;
use clusterset_report::output::{Format, no_names, render};
use clusterset_report::resolve::{any_failed, names_to_ask, render_table_in};
use mcs_types::names::Zone;

use crate::progress::Spinner;
use crate::{Global, UsageError, output, timeout};

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
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = clusterset_report::duration::parse)]
    timeout: Duration,
    /// Deprecated: --timeout=<N>ms.
    #[arg(long, hide = true, value_name = "MS", conflicts_with = "timeout")]
    timeout_ms: Option<u64>,
    /// Attempts per name.
    #[arg(long, default_value_t = 4)]
    attempts: u32,
}

/// Resolves the names and prints them in the chosen format; failures also go to stderr and
/// make the exit status 1.
pub fn run(args: &ResolveArgs, global: &Global) -> anyhow::Result<ExitCode> {
    let shape = global
        .output
        .shape("resolve", Format::Table, Format::REPORT)?;
    let names = names_to_ask(&args.names, &args.zone, args.cluster_id.as_deref())
        .map_err(|e| UsageError::of(&e))?;
    let timeout = timeout::with_deprecated(
        args.timeout,
        args.timeout_ms
            .map(|ms| ("--timeout-ms", Duration::from_millis(ms))),
        "--timeout",
    );
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let results = runtime.block_on(async {
        let resolver = crate::resolver(args.nameserver, timeout, args.attempts)?;
        let spinner = Spinner::start(format!(
            "resolving {} name(s), up to {} attempts of {} ms each",
            names.len(),
            args.attempts,
            timeout.as_millis()
        ));
        let results = resolve(&resolver, &names).await;
        spinner.finish();
        anyhow::Ok(results)
    })?;
    for error in results.iter().filter_map(|r| r.error.as_ref()) {
        eprintln!("error: {error}");
    }
    output::print_verdict(
        &render(
            &results,
            &shape,
            |r, layout| render_table_in(r, layout),
            no_names,
        )?,
        any_failed(&results),
    )
}

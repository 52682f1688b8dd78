//! `mcsctl diagnose SERVICE`: its flags, and the wiring of clusterset-inspect's reading and DNS
//! asking into clusterset-report's diagnosis.

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use clap_complete::engine::ArgValueCandidates;
use clusterset_inspect::diagnose::{ask, gather, load_monmap};
use clusterset_report::diagnose::{check_service_name, diagnose, questions, render_table_in};
use clusterset_report::output::{Format, no_names, render};
use mcs_types::names::Zone;

use crate::progress::Spinner;
use crate::{Global, UsageError, complete, output, timeout};

/// Options of `mcsctl diagnose`.
#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// The Service to follow (its name; the namespace comes from -n or the context).
    #[arg(value_name = "SERVICE", add = ArgValueCandidates::new(complete::services))]
    service: String,
    /// The clusterset DNS server to ask (default: the system's, from /etc/resolv.conf).
    #[arg(long, value_name = "IP:PORT")]
    nameserver: Option<SocketAddr>,
    /// The clusterset zone.
    #[arg(long, default_value = mcs_types::names::DEFAULT_ZONE)]
    zone: Zone,
    /// Time for one DNS attempt: 300ms, 1s, 2s.
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = clusterset_report::duration::parse)]
    timeout: Duration,
    /// Deprecated: --timeout=<N>ms.
    #[arg(long, hide = true, value_name = "MS", conflicts_with = "timeout")]
    timeout_ms: Option<u64>,
    /// DNS attempts per name.
    #[arg(long, default_value_t = 2)]
    attempts: u32,
    /// The monmap to compare a mon with: the output of `ceph mon dump -f json` or `ceph
    /// quorum_status -f json` (`-` reads stdin).
    #[arg(long, value_name = "FILE")]
    monmap: Option<PathBuf>,
}

/// Runs `mcsctl diagnose`: exit status 1 when a check failed.
pub fn run(args: &DiagnoseArgs, global: &Global) -> anyhow::Result<ExitCode> {
    let shape = global
        .output
        .shape("diagnose", Format::Table, Format::REPORT)?;
    let timeout = timeout::with_deprecated(
        args.timeout,
        args.timeout_ms
            .map(|ms| ("--timeout-ms", Duration::from_millis(ms))),
        "--timeout",
    );
    check_service_name(&args.service).map_err(|e| UsageError::of(&e))?;
    let monmap = args.monmap.as_deref().map(load_monmap).transpose()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let diagnosis = runtime.block_on(async {
        let (reader, namespace) = crate::connect(&global.cluster, &global.namespace).await?;
        let spinner = Spinner::start(format!("reading {namespace}/{}", args.service));
        let mut facts = gather(&reader, &namespace, &args.service).await?;
        if let Some(ceph) = facts.ceph.as_mut() {
            ceph.monmap = monmap;
        }
        let names = questions(&facts, &args.zone)?;
        spinner.set_message(format!(
            "asking DNS for {} (up to {} attempts)",
            names
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            args.attempts
        ));
        let resolver = crate::resolver(args.nameserver, timeout, args.attempts)?;
        let answers = ask(&resolver, &names).await;
        spinner.finish();
        anyhow::Ok(diagnose(&facts, &answers))
    })?;
    let text = render(&diagnosis, &shape, render_table_in, no_names)?;
    output::print_verdict(&text, diagnosis.failed > 0)
}

//! `mcsctl status`: its flags, and the wiring of clusterset-inspect's reading into
//! clusterset-report's status report; with `--watch`, clusterset-inspect's `StatusWatch` reads
//! again after each change and the report is printed again when it changed.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use clusterset_daemon::ErrorChain;
use clusterset_inspect::KubeReader;
use clusterset_inspect::status::fetch;
use clusterset_inspect::watch::StatusWatch;
use clusterset_report::Scope;
use clusterset_report::output::{Format, RenderError, Shape, render};
use clusterset_report::status::{Fetched, StatusReport, names, render_table_in, report};

use crate::progress::Spinner;
use crate::{Global, UsageError, output};

/// Options of `mcsctl status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    /// Every namespace instead of one.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    all_namespaces: bool,
    /// After the report, watch what it is made of and print it again whenever it changes
    /// (a blank line between tables), until Ctrl-C (exit status 0).
    #[arg(short, long)]
    watch: bool,
}

fn render_report(report: &StatusReport, shape: &Shape) -> Result<String, RenderError> {
    render(report, shape, render_table_in, names)
}

/// Runs `mcsctl status`: exit status 1 when the report lists problems; with `--watch`, 0 at
/// Ctrl-C.
pub fn run(args: &StatusArgs, global: &Global) -> anyhow::Result<ExitCode> {
    let shape = global.output.shape("status", Format::Table, Format::ALL)?;
    // clap checks the conflict when both flags follow `status`; -n is global, so also before.
    if args.all_namespaces && global.namespace.namespace.is_some() {
        return Err(UsageError(
            "the argument '--all-namespaces' cannot be used with '--namespace <NS>'".to_owned(),
        )
        .into());
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(async {
        let (reader, namespace) = crate::connect(&global.cluster, &global.namespace).await?;
        let scope = if args.all_namespaces {
            Scope::All
        } else {
            Scope::Namespace(namespace)
        };
        let spinner = Spinner::start(format!("reading {scope}"));
        let fetched = fetch(&reader, &scope).await;
        spinner.finish();
        let fetched = fetched?;
        let first = report(&fetched);
        let text = render_report(&first, &shape)?;
        if !args.watch {
            return output::print_verdict(&text, !first.problems.is_empty());
        }
        if !output::write(&text)? {
            return Ok(ExitCode::SUCCESS);
        }
        watch(&reader, &fetched, text, &shape).await
    })
}

/// Prints the report again whenever what it is made of changes (and it changed), until
/// Ctrl-C (or the reader of a pipe goes away).
async fn watch(
    reader: &KubeReader,
    fetched: &Fetched,
    mut last: String,
    shape: &Shape,
) -> anyhow::Result<ExitCode> {
    let mut interrupted = std::pin::pin!(tokio::signal::ctrl_c());
    let mut watch = StatusWatch::start(reader, fetched).await;
    loop {
        let change = tokio::select! {
            _ = &mut interrupted => return Ok(ExitCode::SUCCESS),
            change = watch.changed() => change,
        };
        match change {
            None => return Ok(ExitCode::SUCCESS),
            Some(Err(error)) => {
                eprintln!("warning: {} (retrying)", ErrorChain(&error));
                continue;
            }
            Some(Ok(())) => {}
        }
        let fetched = match watch.reread().await {
            Ok(fetched) => fetched,
            Err(error) => {
                eprintln!(
                    "warning: {} (the next change reads again)",
                    ErrorChain(&error)
                );
                continue;
            }
        };
        let text = render_report(&report(&fetched), shape)?;
        if text != last {
            let separator = shape.format.watch_separator();
            if !output::write(&format!("{separator}{text}"))? {
                return Ok(ExitCode::SUCCESS);
            }
            last = text;
        }
        // A CephCluster in another namespace brings that namespace's objects to watch.
        watch.follow(&fetched).await;
    }
}

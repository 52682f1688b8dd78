//! `mcsctl status`: its flags, and the wiring of clusterset-inspect's reading into
//! clusterset-report's status report; with `--watch`, clusterset-inspect's watches of the same
//! objects trigger a new reading and a new report.

use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use clap::Args;
use clusterset_daemon::ErrorChain;
use clusterset_inspect::KubeReader;
use clusterset_inspect::status::fetch;
use clusterset_inspect::watch::{changes, watched};
use clusterset_report::Scope;
use clusterset_report::status::{StatusReport, names, render_table_in, report};
use futures::{FutureExt, StreamExt};

use crate::output::{self, Format, Shape};
use crate::progress::Spinner;
use crate::{Global, UsageError};

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

/// How long a burst of changes may take before the report is read again.
const SETTLE: Duration = Duration::from_millis(200);

fn render(report: &StatusReport, shape: &Shape) -> anyhow::Result<String> {
    output::render(report, shape, render_table_in, names)
}

/// Runs `mcsctl status`: exit status 1 when the report lists problems; with `--watch`, 0 at
/// Ctrl-C.
pub fn run(args: &StatusArgs, global: &Global) -> anyhow::Result<ExitCode> {
    let shape = global.output.shape("status", Format::Table, output::ALL)?;
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
        let connection = global.cluster.connect().await?;
        let scope = if args.all_namespaces {
            Scope::All
        } else {
            Scope::Namespace(global.namespace.or_default(&connection))
        };
        let reader = KubeReader::new(connection.client, connection.origin);
        let spinner = Spinner::start(format!("reading {scope}"));
        let fetched = fetch(&reader, &scope).await;
        spinner.finish();
        let fetched = fetched?;
        let first = report(&fetched);
        let text = render(&first, &shape)?;
        if !args.watch {
            return output::print_verdict(&text, !first.problems.is_empty());
        }
        if !output::write(&text)? {
            return Ok(ExitCode::SUCCESS);
        }
        watch(&reader, &scope, fetched, text, &shape).await
    })
}

/// Prints the report again whenever what it is made of changes (and it changed), until
/// Ctrl-C (or the reader of a pipe goes away).
async fn watch(
    reader: &KubeReader,
    scope: &Scope,
    fetched: clusterset_report::status::Fetched,
    mut last: String,
    shape: &Shape,
) -> anyhow::Result<ExitCode> {
    let mut interrupted = std::pin::pin!(tokio::signal::ctrl_c());
    let mut kinds = watched(reader, &fetched).await;
    let mut stream = changes(reader, &kinds);
    loop {
        let change = tokio::select! {
            _ = &mut interrupted => return Ok(ExitCode::SUCCESS),
            change = stream.next() => change,
        };
        match change {
            None => return Ok(ExitCode::SUCCESS),
            Some(Err(error)) => {
                eprintln!("warning: {} (retrying)", ErrorChain(&error));
                continue;
            }
            Some(Ok(())) => {}
        }
        // Let a burst of changes (a controller writing several objects) settle, then read once.
        tokio::time::sleep(SETTLE).await;
        while let Some(Some(_)) = stream.next().now_or_never() {}
        let fetched = match fetch(reader, scope).await {
            Ok(fetched) => fetched,
            Err(error) => {
                eprintln!(
                    "warning: {} (the next change reads again)",
                    ErrorChain(&error)
                );
                continue;
            }
        };
        let text = render(&report(&fetched), shape)?;
        if text != last {
            let separator = output::watch_separator(shape.format);
            if !output::write(&format!("{separator}{text}"))? {
                return Ok(ExitCode::SUCCESS);
            }
            last = text;
        }
        // A CephCluster in another namespace brings that namespace's objects to watch.
        let now = watched(reader, &fetched).await;
        if now != kinds {
            stream = changes(reader, &now);
            kinds = now;
        }
    }
}

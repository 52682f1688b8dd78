//! `mcsctl status`: its flags, and the wiring of clusterset-inspect's reading into
//! clusterset-report's status report.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use clusterset_daemon::kubeconfig::{KubeconfigArgs, NamespaceArgs};
use clusterset_inspect::KubeReader;
use clusterset_inspect::status::fetch;
use clusterset_report::Scope;
use clusterset_report::status::{render_table, report};

use crate::output::{self, Format};
use crate::progress::Spinner;

/// Options of `mcsctl status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    cluster: KubeconfigArgs,
    #[command(flatten)]
    namespace: NamespaceArgs,
    /// Every namespace instead of one.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    all_namespaces: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// Runs `mcsctl status`: exit status 1 when the report lists problems.
pub fn run(args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let report = runtime.block_on(async {
        let connection = args.cluster.connect().await?;
        let scope = if args.all_namespaces {
            Scope::All
        } else {
            Scope::Namespace(args.namespace.or_default(&connection))
        };
        let reader = KubeReader::new(connection.client, connection.origin);
        let spinner = Spinner::start(format!("reading {scope}"));
        let fetched = fetch(&reader, &scope).await;
        spinner.finish();
        anyhow::Ok(report(&fetched?))
    })?;
    let text = output::render(&report, args.output, render_table)?;
    output::print_verdict(&text, !report.problems.is_empty())
}

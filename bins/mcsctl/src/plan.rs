//! `mcsctl plan`: what the address planner would make of a CephCluster and its inventory
//! (clusterset-report's `plan::plan_document` of the files' text).

use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::Args;
use clusterset_report::output::{Format, render};
use clusterset_report::plan::{default_format, names, plan_document, render_table_in};

use crate::Global;
use crate::output;

/// Options of `mcsctl plan`.
#[derive(Debug, Args)]
pub struct PlanArgs {
    /// A Rook CephCluster manifest (YAML or JSON). Other documents in the file are skipped and
    /// fields the planner does not read are ignored.
    #[arg(long, value_name = "FILE")]
    cluster: PathBuf,
    /// An inventory: mons (ids, Service cluster IPs, nodes, advertised addresses), OSDs, global
    /// IPs resolved so far, export conditions, optional settings. Without it the cluster is
    /// planned as new: spec.mon.count mons with nothing known, no OSDs.
    #[arg(long, value_name = "FILE")]
    inventory: Option<PathBuf>,
}

/// Prints the plan: the table on a terminal, YAML otherwise, unless `-o` says.
pub fn run(args: &PlanArgs, global: &Global) -> anyhow::Result<ExitCode> {
    let default = default_format(std::io::stdout().is_terminal(), global.output.format());
    let shape = global.output.shape("plan", default, Format::ALL)?;
    let document = plan_document(&args.cluster, args.inventory.as_deref(), |path| {
        std::fs::read_to_string(path)
    })?;
    output::print(&render(&document, &shape, render_table_in, names)?)
}

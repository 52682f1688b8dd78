//! `mcsctl crds`: CRDs generated from the types.

use anyhow::Context;
use clap::Args;
use clusterset_report::crds::render_table;

use crate::output::{self, Format};

/// Options of `mcsctl crds`.
#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Print the ClusterProperty CRD (about.k8s.io) instead of the MCS CRDs.
    #[arg(long)]
    about: bool,
    /// Output format: multi-document YAML (for kubectl apply), a JSON array, or a table.
    #[arg(short, long, value_enum, default_value_t = Format::Yaml)]
    output: Format,
}

/// Prints the CRDs selected by `args`.
pub fn run(args: &CrdsArgs) -> anyhow::Result<std::process::ExitCode> {
    output::print(&render(args)?)
}

/// The CRDs selected by `args`, rendered.
pub fn render(args: &CrdsArgs) -> anyhow::Result<String> {
    let crds = if args.about {
        mcs_types::crd::about_crds()
    } else {
        mcs_types::crd::mcs_crds()
    }
    .context("generating the CRDs")?;
    output::render_list(&crds, args.output, render_table)
}

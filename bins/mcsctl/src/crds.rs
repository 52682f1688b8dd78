//! `mcsctl crds`: CRDs generated from the types.

use anyhow::Context;
use clap::Args;
use clusterset_report::crds::{names, render_table_in};

use crate::Global;
use crate::output::{self, Format};

/// Options of `mcsctl crds`.
#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Print the ClusterProperty CRD (about.k8s.io) instead of the MCS CRDs.
    #[arg(long)]
    about: bool,
}

/// Prints the CRDs selected by `args`.
pub fn run(args: &CrdsArgs, global: &Global) -> anyhow::Result<std::process::ExitCode> {
    output::print(&render(args, global)?)
}

/// The CRDs selected by `args`, rendered: multi-document YAML by default (for kubectl apply).
pub fn render(args: &CrdsArgs, global: &Global) -> anyhow::Result<String> {
    let shape = global.output.shape("crds", Format::Yaml, output::ALL)?;
    let crds = if args.about {
        mcs_types::crd::about_crds()
    } else {
        mcs_types::crd::mcs_crds()
    }
    .context("generating the CRDs")?;
    output::render_list(&crds, &shape, render_table_in, names)
}

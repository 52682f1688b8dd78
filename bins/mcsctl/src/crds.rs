//! `mcsctl crds`: CRDs generated from the types.

use std::process::ExitCode;

use anyhow::Context;
use clap::Args;
use clusterset_report::crds::{names, render_table_in};
use clusterset_report::output::{Format, render_list};

use crate::Global;
use crate::output;

/// Options of `mcsctl crds`.
#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Print the ClusterProperty CRD (about.k8s.io) instead of the MCS CRDs.
    #[arg(long)]
    about: bool,
}

/// Prints the CRDs selected by `args`: multi-document YAML by default (for kubectl apply).
pub fn run(args: &CrdsArgs, global: &Global) -> anyhow::Result<ExitCode> {
    let shape = global.output.shape("crds", Format::Yaml, Format::ALL)?;
    let crds = if args.about {
        mcs_types::crd::about_crds()
    } else {
        mcs_types::crd::mcs_crds()
    }
    .context("generating the CRDs")?;
    output::print(&render_list(&crds, &shape, render_table_in, names)?)
}

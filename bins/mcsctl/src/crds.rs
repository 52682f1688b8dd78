//! `mcsctl crds`: CRDs generated from the types.

use anyhow::Context;
use clap::{Args, ValueEnum};

/// Options of `mcsctl crds`.
#[derive(Debug, Args)]
pub struct CrdsArgs {
    /// Print the ClusterProperty CRD (about.k8s.io) instead of the MCS CRDs.
    #[arg(long)]
    about: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Yaml)]
    output: Format,
}

/// Output formats of `mcsctl crds`.
#[derive(Debug, Clone, Copy, ValueEnum)]
enum Format {
    /// Multi-document YAML.
    Yaml,
    /// A JSON array of CRDs.
    Json,
}

/// Prints the CRDs selected by `args`.
pub fn run(args: &CrdsArgs) -> anyhow::Result<std::process::ExitCode> {
    crate::output::print(&render(args)?)
}

/// The CRDs selected by `args`, rendered.
pub fn render(args: &CrdsArgs) -> anyhow::Result<String> {
    let crds = if args.about {
        mcs_types::crd::about_crds()
    } else {
        mcs_types::crd::mcs_crds()
    }
    .context("generating the CRDs")?;
    match args.output {
        Format::Yaml => {
            serde_saphyr::to_string_multiple(&crds).context("rendering the CRDs as YAML")
        }
        Format::Json => serde_json::to_string_pretty(&crds)
            .map(|json| json + "\n")
            .context("rendering the CRDs as JSON"),
    }
}

//! `mcsctl crds`: CRDs generated from the types.

use anyhow::Context;
use clap::Args;
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::output::{self, Cell, Format, Table};

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

/// One line per CRD: name, group, kind, versions (storage version marked), scope.
fn table(crds: &[CustomResourceDefinition]) -> String {
    let mut table = Table::new(&["NAME", "GROUP", "KIND", "VERSIONS", "SCOPE"]);
    for crd in crds {
        let versions: Vec<String> = crd
            .spec
            .versions
            .iter()
            .map(|v| {
                if v.storage {
                    format!("{} (storage)", v.name)
                } else {
                    v.name.clone()
                }
            })
            .collect();
        table.row([
            Cell::from(crd.metadata.name.clone().unwrap_or_default()),
            Cell::from(crd.spec.group.as_str()),
            Cell::from(crd.spec.names.kind.as_str()),
            Cell::from(versions.join(", ")),
            Cell::from(crd.spec.scope.as_str()),
        ]);
    }
    table.render()
}

/// The CRDs selected by `args`, rendered.
pub fn render(args: &CrdsArgs) -> anyhow::Result<String> {
    let crds = if args.about {
        mcs_types::crd::about_crds()
    } else {
        mcs_types::crd::mcs_crds()
    }
    .context("generating the CRDs")?;
    output::render_list(&crds, args.output, table)
}

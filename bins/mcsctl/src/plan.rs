//! `mcsctl plan`: what the address planner would make of a CephCluster and its inventory.

use std::io::IsTerminal;
use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use ceph_address_plan::manifest::{CephClusterManifest, InventoryFile};
use ceph_address_plan::{Inventory, Plan, PlanInput};
use clap::Args;

use clusterset_report::plan::{names, render_table_in};

use crate::Global;
use crate::output::{self, Format};

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

/// The format `plan` prints in without `-o`: the summary table for a person at a terminal,
/// the whole plan document as YAML for a script (stdout not a terminal: pipes and files keep
/// what they always got). `-o` always wins.
pub fn default_format(stdout_is_terminal: bool, flag: Option<Format>) -> Format {
    match (flag, stdout_is_terminal) {
        (Some(format), _) => format,
        (None, true) => Format::Table,
        (None, false) => Format::Yaml,
    }
}

/// Prints the plan.
pub fn run(args: &PlanArgs, global: &Global) -> anyhow::Result<std::process::ExitCode> {
    output::print(&render(args, global)?)
}

fn read(path: &Path) -> anyhow::Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))
}

/// The one CephCluster document of a (possibly multi-document) manifest file.
fn ceph_cluster(path: &Path) -> anyhow::Result<CephClusterManifest> {
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&read(path)?)
        .with_context(|| format!("parsing {} as YAML", path.display()))?;
    CephClusterManifest::from_documents(&documents)
        .with_context(|| format!("reading the CephCluster in {}", path.display()))
}

/// The plan, rendered.
pub fn render(args: &PlanArgs, global: &Global) -> anyhow::Result<String> {
    let default = default_format(std::io::stdout().is_terminal(), global.output.format());
    let shape = global.output.shape("plan", default, output::ALL)?;
    let manifest = ceph_cluster(&args.cluster)?;
    let mut settings = manifest
        .settings()
        .with_context(|| format!("reading the CephCluster in {}", args.cluster.display()))?;
    let inventory = match &args.inventory {
        Some(path) => {
            let file: InventoryFile = serde_saphyr::from_str(&read(path)?)
                .with_context(|| format!("parsing the inventory {}", path.display()))?;
            let (overrides, inventory) = file.into_parts();
            overrides.apply(&mut settings);
            inventory
        }
        None => Inventory::new_cluster(manifest.mon_count()),
    };
    let plan = Plan::new(PlanInput {
        cluster: settings,
        inventory,
    })
    .map_err(|rejections| anyhow!(rejections))?;
    let document = plan.document().context("building the plan document")?;
    output::render(&document, &shape, render_table_in, names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_terminal_gets_the_table_a_pipe_yaml_and_o_always_wins() {
        assert_eq!(default_format(true, None), Format::Table);
        assert_eq!(default_format(false, None), Format::Yaml);
        assert_eq!(default_format(true, Some(Format::Yaml)), Format::Yaml);
        assert_eq!(default_format(false, Some(Format::Table)), Format::Table);
        assert_eq!(default_format(true, Some(Format::Json)), Format::Json);
    }
}

//! `mcsctl plan`: what the address planner would make of a CephCluster and its inventory.

use std::path::{Path, PathBuf};

use anyhow::{Context, anyhow};
use ceph_address_plan::manifest::{CephClusterManifest, InventoryFile};
use ceph_address_plan::{Inventory, Plan, PlanInput};
use clap::Args;

use clusterset_report::plan::render_table;

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
    /// Output format: the whole plan document as YAML or JSON, or a summary table.
    #[arg(short, long, value_enum, default_value_t = Format::Yaml)]
    output: Format,
}

/// Prints the plan.
pub fn run(args: &PlanArgs) -> anyhow::Result<std::process::ExitCode> {
    output::print(&render(args)?)
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
pub fn render(args: &PlanArgs) -> anyhow::Result<String> {
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
    output::render(&document, args.output, render_table)
}

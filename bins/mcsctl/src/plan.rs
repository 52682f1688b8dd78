//! `mcsctl plan`: what the address planner would make of a CephCluster and its inventory.

use std::path::{Path, PathBuf};

use std::fmt::Write as _;

use anyhow::{Context, anyhow, bail};
use ceph_address_plan::document::PlanDocument;
use ceph_address_plan::manifest::{CephClusterManifest, InventoryFile};
use ceph_address_plan::{Inventory, Plan, PlanInput, rook};
use clap::Args;

use crate::output::{self, Cell, Format, Table, style, styled};

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
    let text = read(path)?;
    let documents: Vec<serde_json::Value> = serde_saphyr::from_multiple(&text)
        .with_context(|| format!("parsing {} as YAML", path.display()))?;
    let kinds: Vec<&str> = documents
        .iter()
        .map(|d| {
            d.get("kind")
                .and_then(|k| k.as_str())
                .unwrap_or("<no kind>")
        })
        .collect();
    let mut clusters = documents
        .iter()
        .filter(|d| d.get("kind").and_then(|k| k.as_str()) == Some("CephCluster"));
    let (Some(cluster), None) = (clusters.next(), clusters.next()) else {
        bail!(
            "{} must hold exactly one CephCluster document; it holds: {}",
            path.display(),
            if kinds.is_empty() {
                "nothing".to_owned()
            } else {
                kinds.join(", ")
            }
        );
    };
    serde_json::from_value(cluster.clone())
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
    output::render(&document, args.output, table)
}

/// The plan for people: verdict, reasons, mons to replace, names to resolve, every daemon,
/// the mon endpoints and how many objects to apply (`-o yaml` shows them).
fn table(plan: &PlanDocument) -> String {
    let mut out = String::new();
    let cluster = &plan.cluster;
    let mcs = &cluster.multi_cluster_service;
    let _ = writeln!(
        out,
        "{} {}/{}: MCS {}; {}",
        styled("CephCluster", style::HEADER),
        cluster.namespace,
        cluster.name,
        if mcs.enabled {
            format!("enabled, clusterID {}", mcs.cluster_id)
        } else {
            "disabled".to_owned()
        },
        if plan.ready {
            styled(
                "ready: every daemon advertises its planned address",
                style::GOOD,
            )
        } else {
            styled("not ready", style::WARN)
        }
    );
    for reason in &plan.reasons {
        let _ = writeln!(out, "  - {reason}");
    }
    for warning in &plan.warnings {
        let _ = writeln!(out, "  {} {warning}", styled("warning:", style::WARN));
    }
    let _ = writeln!(out, "next mon id: {}", plan.next_mon_id);
    if !plan.mon_replacements.is_empty() {
        out.push('\n');
        let mut replacements = Table::new(&["REPLACE", "ADVERTISED", "EXPECTED"]);
        for r in &plan.mon_replacements {
            replacements.row([
                Cell::from(format!("mon.{}", r.mon)),
                Cell::from(r.advertised.as_str()),
                Cell::from(r.expected.clone().unwrap_or_else(|| "-".to_owned())),
            ]);
        }
        out.push_str(&replacements.render());
    }
    if !plan.lookups.is_empty() {
        out.push('\n');
        let mut lookups = Table::new(&["RESOLVE", "SERVICE", "FOR"]);
        for l in &plan.lookups {
            lookups.row([
                Cell::from(l.name.as_str()),
                Cell::from(l.service.as_str()),
                Cell::from(l.daemon.as_str()),
            ]);
        }
        out.push_str(&lookups.render());
    }
    out.push('\n');
    let mut daemons = Table::new(&[
        "DAEMON",
        "SOURCE",
        "ADDRESS",
        "ADVERTISED",
        "STATUS",
        "ARGS",
    ]);
    for d in &plan.daemons {
        let status_style = if d.status == "upToDate" {
            style::GOOD
        } else {
            style::WARN
        };
        daemons.row([
            Cell::from(d.daemon.as_str()),
            Cell::from(d.source),
            Cell::from(d.address.clone().unwrap_or_else(|| "-".to_owned())),
            Cell::from(d.advertised.clone().unwrap_or_else(|| "-".to_owned())),
            Cell::new(d.status, status_style),
            Cell::from(d.args.join(" ")),
        ]);
    }
    out.push_str(&daemons.render());
    out.push('\n');
    if let Some(data) = plan.mon_endpoints.get(rook::KEY_DATA) {
        let _ = writeln!(out, "{} data: {data}", rook::MON_ENDPOINTS_CONFIG_MAP);
    }
    if let Some(mon_host) = plan.rook_ceph_config.get(rook::KEY_MON_HOST) {
        let _ = writeln!(out, "mon_host: {mon_host}");
    }
    let _ = writeln!(out, "peer token mon_host: {}", plan.peer_token_mon_host);
    let _ = writeln!(
        out,
        "to apply: {} Services, {} ServiceExports (-o yaml shows them)",
        plan.services.len(),
        plan.service_exports.len()
    );
    out
}

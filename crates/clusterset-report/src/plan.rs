//! `mcsctl plan`: the plan document of a CephCluster manifest and an inventory
//! ([`plan_document`], given each file's text), the format it prints in without `-o`
//! ([`default_format`]), and its summary for `-o table` ([`render_table`]).

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

use ceph_address_plan::document::PlanDocument;
use ceph_address_plan::manifest::{
    CephClusterManifest, DocumentsError, InventoryFile, ManifestError,
};
use ceph_address_plan::{Inventory, Plan, PlanInput, Rejection, Rejections, rook};

use crate::output::Format;
use crate::table::{Cell, Layout, Table, style, styled};

/// The objects the plan applies as `kubectl get -o name` prints them: `service/NAME` and
/// `serviceexport.multicluster.x-k8s.io/NAME`.
pub fn names(plan: &PlanDocument) -> Vec<String> {
    let services = plan
        .services
        .iter()
        .map(|s| format!("service/{}", s.metadata.name.as_deref().unwrap_or_default()));
    let exports = plan.service_exports.iter().map(|e| {
        format!(
            "{}/{}",
            crate::status::SERVICE_EXPORT_RESOURCE,
            e.metadata.name.as_deref().unwrap_or_default()
        )
    });
    services.chain(exports).collect()
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

/// Why `mcsctl plan` has no plan to show: each names the file and what is wrong with it.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// A file cannot be read.
    #[error("reading {}", .path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// The CephCluster manifest is not YAML.
    #[error("parsing {} as YAML", .path.display())]
    ManifestYaml {
        /// The file.
        path: PathBuf,
        /// Why (boxed: YAML errors carry their location and snippet).
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// The manifest holds no single CephCluster.
    #[error("reading the CephCluster in {}", .path.display())]
    NoCephCluster {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: DocumentsError,
    },
    /// The CephCluster's settings cannot be planned with.
    #[error("reading the CephCluster in {}", .path.display())]
    Settings {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: ManifestError,
    },
    /// The inventory is not one.
    #[error("parsing the inventory {}", .path.display())]
    Inventory {
        /// The file.
        path: PathBuf,
        /// Why (boxed: YAML errors carry their location and snippet).
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// The planner refuses the input: every reason, with what to change.
    #[error(transparent)]
    Rejected(#[from] Rejections),
    /// The plan cannot be written out as its document.
    #[error("building the plan document")]
    Document(#[source] Rejection),
}

/// The plan document of the CephCluster in the manifest `cluster` (YAML or JSON; other
/// documents skipped) and the inventory `inventory` (without one the cluster is planned as
/// new: `spec.mon.count` mons with nothing known, no OSDs), each file's text given by `read`
/// when it is needed (the inventory after the CephCluster is read).
///
/// ```
/// use std::path::Path;
/// use clusterset_report::plan::{PlanError, plan_document};
/// let read = |_: &Path| Ok::<_, std::io::Error>("kind: ConfigMap\n".to_owned());
/// let error = plan_document(Path::new("cluster.yaml"), None, read).err();
/// assert!(matches!(error, Some(PlanError::NoCephCluster { .. })));
/// ```
pub fn plan_document(
    cluster: &Path,
    inventory: Option<&Path>,
    read: impl Fn(&Path) -> std::io::Result<String>,
) -> Result<PlanDocument, PlanError> {
    let read = |path: &Path| {
        read(path).map_err(|source| PlanError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    let documents: Vec<serde_json::Value> =
        serde_saphyr::from_multiple(&read(cluster)?).map_err(|source| PlanError::ManifestYaml {
            path: cluster.to_path_buf(),
            source: Box::new(source),
        })?;
    let manifest = CephClusterManifest::from_documents(&documents).map_err(|source| {
        PlanError::NoCephCluster {
            path: cluster.to_path_buf(),
            source,
        }
    })?;
    let mut settings = manifest.settings().map_err(|source| PlanError::Settings {
        path: cluster.to_path_buf(),
        source,
    })?;
    let inventory = match inventory {
        Some(path) => {
            let file: InventoryFile =
                serde_saphyr::from_str(&read(path)?).map_err(|source| PlanError::Inventory {
                    path: path.to_path_buf(),
                    source: Box::new(source),
                })?;
            let (overrides, inventory) = file.into_parts();
            overrides.apply(&mut settings);
            inventory
        }
        None => Inventory::new_cluster(manifest.mon_count()),
    };
    let plan = Plan::new(PlanInput {
        cluster: settings,
        inventory,
    })?;
    plan.document().map_err(PlanError::Document)
}

/// The plan for people: verdict, reasons, mons to replace, names to resolve, every daemon,
/// the mon endpoints and how many objects to apply (`-o yaml` shows them).
pub fn render_table(plan: &PlanDocument) -> String {
    render_table_in(plan, Layout::default())
}

/// [`render_table`] in `layout`: `--no-headers` drops the column headers of its tables; `-o
/// wide` is the same summary (every daemon column is already there).
pub fn render_table_in(plan: &PlanDocument, layout: Layout) -> String {
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
        out.push_str(&replacements.render_in(layout));
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
        out.push_str(&lookups.render_in(layout));
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
    out.push_str(&daemons.render_in(layout));
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

#[cfg(test)]
mod tests {
    use super::*;

    const CLUSTER: &str = include_str!("../../../examples/cephcluster.yaml");
    const INVENTORY: &str = include_str!("../../../examples/inventory.yaml");

    /// Reads the examples by name; any other file does not exist.
    fn examples(path: &Path) -> std::io::Result<String> {
        match path.to_str() {
            Some("cluster.yaml") => Ok(CLUSTER.to_owned()),
            Some("inventory.yaml") => Ok(INVENTORY.to_owned()),
            Some("notes.txt") => Ok("just: text: here\n".to_owned()),
            _ => Err(std::io::ErrorKind::NotFound.into()),
        }
    }

    fn message(error: &PlanError) -> String {
        let mut text = error.to_string();
        let mut source = std::error::Error::source(error);
        while let Some(cause) = source {
            text = format!("{text}: {cause}");
            source = cause.source();
        }
        text
    }

    #[test]
    fn a_terminal_gets_the_table_a_pipe_yaml_and_o_always_wins() {
        assert_eq!(default_format(true, None), Format::Table);
        assert_eq!(default_format(false, None), Format::Yaml);
        assert_eq!(default_format(true, Some(Format::Yaml)), Format::Yaml);
        assert_eq!(default_format(false, Some(Format::Table)), Format::Table);
        assert_eq!(default_format(true, Some(Format::Json)), Format::Json);
    }

    #[test]
    fn the_examples_plan_and_without_an_inventory_the_cluster_is_new() {
        let with = plan_document(
            Path::new("cluster.yaml"),
            Some(Path::new("inventory.yaml")),
            examples,
        );
        let new = plan_document(Path::new("cluster.yaml"), None, examples);
        let (Ok(with), Ok(new)) = (with, new) else {
            panic!("the examples plan");
        };
        assert!(!with.services.is_empty());
        assert_ne!(with, new);
    }

    #[test]
    fn each_failure_names_its_file_and_the_cluster_is_read_before_the_inventory() {
        let fails = |cluster: &str, inventory: Option<&str>| {
            plan_document(Path::new(cluster), inventory.map(Path::new), examples)
                .err()
                .map(|e| message(&e))
                .unwrap_or_default()
        };
        assert_eq!(
            fails("missing.yaml", Some("missing.yaml")),
            "reading missing.yaml: entity not found"
        );
        // The CephCluster's problem first, though the inventory is missing too.
        assert!(
            fails("inventory.yaml", Some("missing.yaml"))
                .starts_with("reading the CephCluster in inventory.yaml: "),
            "{}",
            fails("inventory.yaml", Some("missing.yaml"))
        );
        assert_eq!(
            fails("cluster.yaml", Some("missing.yaml")),
            "reading missing.yaml: entity not found"
        );
        assert!(
            fails("cluster.yaml", Some("notes.txt"))
                .starts_with("parsing the inventory notes.txt: "),
            "{}",
            fails("cluster.yaml", Some("notes.txt"))
        );
    }
}

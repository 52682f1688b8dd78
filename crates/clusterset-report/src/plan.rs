//! `mcsctl plan -o table`: a summary of ceph-address-plan's plan document.

use std::fmt::Write as _;

use ceph_address_plan::document::PlanDocument;
use ceph_address_plan::rook;

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

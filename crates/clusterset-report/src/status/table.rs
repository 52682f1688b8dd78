//! The status report as text for people.

use std::fmt::Write as _;

use super::{CephClusterStatus, DaemonStatus, Migration, NOT_REPORTED, ServicePair, StatusReport};
use crate::table::{Cell, Layout, Table, style, styled};
use crate::view::ExportView;

fn dash(text: Option<&str>) -> Cell {
    match text {
        Some(t) if !t.is_empty() => Cell::from(t),
        _ => Cell::new("-", style::DIM),
    }
}

fn export_cells(export: Option<&ExportView>, missing_is_bad: bool) -> [Cell; 3] {
    match export {
        Some(e) => [
            e.valid.cell(true),
            e.ready.cell(true),
            e.conflict.cell(false),
        ],
        None => {
            let style = if missing_is_bad {
                style::BAD
            } else {
                style::DIM
            };
            [
                Cell::new("-", style),
                Cell::new("-", style),
                Cell::new("-", style),
            ]
        }
    }
}

/// `-o wide`'s extra cells of an export: the `Ready` condition's reason and message.
fn wide_cells(export: Option<&ExportView>) -> [Cell; 2] {
    match export {
        Some(e) => [
            dash(Some(e.ready.reason.as_str())),
            dash(Some(e.ready.message.as_str())),
        ],
        None => [dash(None), dash(None)],
    }
}

/// The columns of a table: `wide` adds the `Ready` condition's reason and message.
fn columns(normal: &[&'static str], wide: bool) -> Vec<&'static str> {
    let mut columns = normal.to_vec();
    if wide {
        columns.extend(["REASON", "MESSAGE"]);
    }
    columns
}

/// The report as text for people (`-o table`).
pub fn render_table(report: &StatusReport) -> String {
    render_table_in(report, Layout::default())
}

/// The report as text for people in `layout`: `-o wide` adds the `Ready` condition's reason
/// and message to every daemon and ServiceExport row; `--no-headers` drops the column headers
/// (the section lines stay).
pub fn render_table_in(report: &StatusReport, layout: Layout) -> String {
    let mut out = String::new();
    for cluster in &report.ceph_clusters {
        write_ceph_cluster(&mut out, cluster, layout);
    }
    write_services(&mut out, report, layout);
    for note in &report.notes {
        let _ = writeln!(out, "{} {note}", styled("note:", style::DIM));
    }
    out.push('\n');
    write_problems(&mut out, &report.problems);
    out
}

/// Writes `table` drawn in `layout` to `out`, each line indented by two spaces.
fn write_indented(out: &mut String, table: &Table, layout: Layout) {
    for line in table.render_in(layout).lines() {
        let _ = writeln!(out, "  {line}");
    }
}

/// Writes a CephCluster's section: its MCS settings, its migration and its daemons' table.
fn write_ceph_cluster(out: &mut String, cluster: &CephClusterStatus, layout: Layout) {
    let mcs = match (cluster.multi_cluster_service, &cluster.cluster_id) {
        (true, Some(id)) => format!("MCS enabled, clusterID {id}"),
        (true, None) => "MCS enabled, no clusterID".to_owned(),
        (false, _) => "MCS disabled".to_owned(),
    };
    let _ = writeln!(
        out,
        "{} {}/{}: {mcs}",
        styled("CephCluster", style::HEADER),
        cluster.namespace,
        cluster.name
    );
    write_migration(out, &cluster.migration);
    if cluster.daemons.is_empty() {
        let _ = writeln!(out, "  no mon or OSD Services");
    } else {
        let mut table = Table::new(&columns(
            &[
                "DAEMON",
                "SERVICE",
                "CLUSTER-IP",
                "EXPORT",
                "VALID",
                "READY",
                "CONFLICT",
                "GLOBAL-IP",
                "ADVERTISED",
                "ON-GLOBAL",
            ],
            layout.wide,
        ));
        for d in &cluster.daemons {
            table.row(daemon_row(d, cluster.multi_cluster_service, layout.wide));
        }
        write_indented(out, &table, layout);
    }
    out.push('\n');
}

/// Writes a CephCluster's migration line: its daemons on global IPs and the operator's
/// progress.
fn write_migration(out: &mut String, m: &Migration) {
    let operator = match (&m.operator, &m.operator_not_reported) {
        (Some(p), _) => format!(
            "{}, {}/{} daemons on their planned address{}",
            p.phase,
            p.ready_daemons,
            p.daemon_count,
            if p.message.is_empty() {
                String::new()
            } else {
                format!(": {}", p.message)
            }
        ),
        (None, Some(why)) => why.clone(),
        (None, None) => NOT_REPORTED.to_owned(),
    };
    let _ = writeln!(
        out,
        "  migration: mons on global IPs {}/{}, OSDs on global IPs {}/{}; operator: {operator}",
        m.mons_on_global_ips, m.mons, m.osds_on_global_ips, m.osds
    );
}

/// The cells of a daemon's row (`wide`: with the `Ready` reason and message); a missing export
/// is bad when the cluster has `multi_cluster_service` on.
fn daemon_row(
    d: &DaemonStatus,
    multi_cluster_service: bool,
    wide: bool,
) -> impl Iterator<Item = Cell> {
    let [valid, ready, conflict] = export_cells(d.export.as_ref(), multi_cluster_service);
    let export = match (&d.export, multi_cluster_service) {
        (Some(_), _) => Cell::from(d.export_service.as_str()),
        (None, true) => Cell::new("none", style::BAD),
        (None, false) => Cell::new("-", style::DIM),
    };
    let on_global = match d.on_global_ip {
        Some(true) => Cell::new("yes", style::GOOD),
        Some(false) => Cell::new("no", style::WARN),
        None => Cell::new("-", style::DIM),
    };
    let wide = wide.then(|| wide_cells(d.export.as_ref()));
    [
        Cell::from(d.daemon.as_str()),
        Cell::from(d.service.as_str()),
        dash(d.cluster_ip.as_deref()),
        export,
        valid,
        ready,
        conflict,
        dash(Some(&d.global_ips.join(","))),
        dash(d.advertised.as_deref()),
        on_global,
    ]
    .into_iter()
    .chain(wide.into_iter().flatten())
}

/// Writes the section of ServiceExports and ServiceImports: a table of the pairs, or `none`.
fn write_services(out: &mut String, report: &StatusReport, layout: Layout) {
    let _ = writeln!(
        out,
        "{} in {}",
        styled("ServiceExports and ServiceImports", style::HEADER),
        report.scope
    );
    if report.services.is_empty() {
        let _ = writeln!(out, "  none");
    } else {
        let mut table = Table::new(&columns(
            &[
                "NAMESPACE",
                "NAME",
                "VALID",
                "READY",
                "CONFLICT",
                "IMPORT",
                "IPS",
                "PORTS",
                "CLUSTERS",
            ],
            layout.wide,
        ));
        for pair in &report.services {
            table.row(service_row(pair, layout.wide));
        }
        write_indented(out, &table, layout);
    }
}

/// The cells of a ServiceExport/ServiceImport pair's row (`wide`: with the `Ready` reason and
/// message).
fn service_row(pair: &ServicePair, wide: bool) -> impl Iterator<Item = Cell> {
    let [valid, ready, conflict] = export_cells(pair.export.as_ref(), false);
    let (import, ips, ports, clusters) = match &pair.import {
        Some(i) => (
            Cell::from(i.type_.as_str()),
            dash(Some(&i.ips.join(","))),
            dash(Some(&i.ports.join(","))),
            dash(Some(&i.clusters.join(","))),
        ),
        None => (
            Cell::new("none", style::WARN),
            dash(None),
            dash(None),
            dash(None),
        ),
    };
    let wide = wide.then(|| wide_cells(pair.export.as_ref()));
    [
        Cell::from(pair.namespace.as_str()),
        Cell::from(pair.name.as_str()),
        valid,
        ready,
        conflict,
        import,
        ips,
        ports,
        clusters,
    ]
    .into_iter()
    .chain(wide.into_iter().flatten())
}

/// Writes the problems, or that there are none.
fn write_problems(out: &mut String, problems: &[String]) {
    if problems.is_empty() {
        let _ = writeln!(out, "{}", styled("No problems found.", style::GOOD));
    } else {
        let _ = writeln!(
            out,
            "{}",
            styled(&format!("Problems ({}):", problems.len()), style::BAD)
        );
        for problem in problems {
            let _ = writeln!(out, "  - {problem}");
        }
    }
}

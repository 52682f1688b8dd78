//! The status report as text for people.

use std::fmt::Write as _;

use super::{NOT_REPORTED, StatusReport};
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
        let m = &cluster.migration;
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
                let [valid, ready, conflict] =
                    export_cells(d.export.as_ref(), cluster.multi_cluster_service);
                let export = match (&d.export, cluster.multi_cluster_service) {
                    (Some(_), _) => Cell::from(d.export_service.as_str()),
                    (None, true) => Cell::new("none", style::BAD),
                    (None, false) => Cell::new("-", style::DIM),
                };
                let on_global = match d.on_global_ip {
                    Some(true) => Cell::new("yes", style::GOOD),
                    Some(false) => Cell::new("no", style::WARN),
                    None => Cell::new("-", style::DIM),
                };
                let wide = layout.wide.then(|| wide_cells(d.export.as_ref()));
                table.row(
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
                    .chain(wide.into_iter().flatten()),
                );
            }
            for line in table.render_in(layout).lines() {
                let _ = writeln!(out, "  {line}");
            }
        }
        out.push('\n');
    }
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
            let wide = layout.wide.then(|| wide_cells(pair.export.as_ref()));
            table.row(
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
                .chain(wide.into_iter().flatten()),
            );
        }
        for line in table.render_in(layout).lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    for note in &report.notes {
        let _ = writeln!(out, "{} {note}", styled("note:", style::DIM));
    }
    out.push('\n');
    if report.problems.is_empty() {
        let _ = writeln!(out, "{}", styled("No problems found.", style::GOOD));
    } else {
        let _ = writeln!(
            out,
            "{}",
            styled(
                &format!("Problems ({}):", report.problems.len()),
                style::BAD
            )
        );
        for problem in &report.problems {
            let _ = writeln!(out, "  - {problem}");
        }
    }
    out
}

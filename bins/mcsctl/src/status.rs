//! `mcsctl status`: every CephCluster with its MCS settings, per daemon Service the export
//! conditions, global IP and advertised IP, the migration progress; and every
//! ServiceExport/ServiceImport pair with its conditions.
//!
//! [`fetch`] reads the objects through a [`ClusterReader`]; [`report`] is a pure function from
//! them to a [`StatusReport`]; [`render_table`] draws it.

use mcs_ceph_api::{CephClusterAddressing, Phase};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;

use anyhow::Context;
use ceph_address_plan::{Daemon, args, rook};
use clap::Args;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use mcs_types::labels::SERVICE_NAME_LABEL;
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use serde::Serialize;

use crate::cluster::{ClusterReader, KubeReader, MaybeServed, Scope};
use crate::kubeconfig::KubeArgs;
use crate::output::{self, Cell, Format, Table, style, styled};
use crate::progress::Spinner;
use crate::view::{CephClusterView, ExportView, ImportView, mon_endpoints, slice_addresses};

/// Options of `mcsctl status`.
#[derive(Debug, Args)]
pub struct StatusArgs {
    #[command(flatten)]
    kube: KubeArgs,
    /// Every namespace instead of one.
    #[arg(short = 'A', long, conflicts_with = "namespace")]
    all_namespaces: bool,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

/// The label selector of the mon and OSD Services (Rook's, and the unique-name export
/// Services that stand in for them).
pub const DAEMON_SERVICES: &str = "ceph_daemon_type in (mon,osd)";
/// The label selector of the OSD Deployments.
pub const OSD_DEPLOYMENTS: &str = "app=rook-ceph-osd";

/// What `status` reads in a namespace that holds a CephCluster.
#[derive(Debug, Clone, Default)]
pub struct CephNamespace {
    /// The mon and OSD Services.
    pub services: Vec<Service>,
    /// `rook-ceph-mon-endpoints`.
    pub mon_endpoints: Option<ConfigMap>,
    /// The OSD Deployments.
    pub osd_deployments: Vec<Deployment>,
}

/// Everything `status` reads.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// The namespaces read.
    pub scope: Scope,
    /// CephClusters; `None` when Rook's CRD is not installed.
    pub ceph_clusters: MaybeServed<serde_json::Value>,
    /// mcs-ceph-operator's CephClusterAddressings; `None` when their CRD is not installed.
    pub addressings: MaybeServed<serde_json::Value>,
    /// ServiceExports; `None` when the MCS CRDs are not installed.
    pub exports: MaybeServed<ServiceExport>,
    /// ServiceImports; `None` when the MCS CRDs are not installed.
    pub imports: MaybeServed<ServiceImport>,
    /// The EndpointSlices of imported services (labelled with a service name).
    pub slices: Vec<EndpointSlice>,
    /// Per namespace with a CephCluster, its daemons' objects.
    pub ceph_namespaces: BTreeMap<String, CephNamespace>,
}

/// Reads what `status` needs in `scope`.
pub async fn fetch(reader: &dyn ClusterReader, scope: &Scope) -> anyhow::Result<Fetched> {
    let (ceph_clusters, addressings, exports, imports, slices) = tokio::try_join!(
        reader.ceph_clusters(scope),
        reader.addressings(scope),
        reader.service_exports(scope, None),
        reader.service_imports(scope, None),
        reader.endpoint_slices(scope, SERVICE_NAME_LABEL),
    )?;
    let namespaces: BTreeSet<String> = ceph_clusters
        .iter()
        .flatten()
        .map(|c| CephClusterView::of(c).namespace)
        .collect();
    let mut ceph_namespaces = BTreeMap::new();
    for namespace in namespaces {
        let (services, mon_endpoints, osd_deployments) = tokio::try_join!(
            reader.services(&namespace, DAEMON_SERVICES),
            reader.config_map(&namespace, rook::MON_ENDPOINTS_CONFIG_MAP),
            reader.deployments(&namespace, OSD_DEPLOYMENTS),
        )?;
        ceph_namespaces.insert(
            namespace,
            CephNamespace {
                services,
                mon_endpoints,
                osd_deployments,
            },
        );
    }
    Ok(Fetched {
        scope: scope.clone(),
        ceph_clusters,
        addressings,
        exports,
        imports,
        slices,
        ceph_namespaces,
    })
}

/// The status of everything read.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StatusReport {
    /// `namespace NS` or `all namespaces`.
    pub scope: String,
    /// Every CephCluster.
    pub ceph_clusters: Vec<CephClusterStatus>,
    /// Every ServiceExport/ServiceImport pair, by namespace and name.
    pub services: Vec<ServicePair>,
    /// Things worth knowing that are not problems.
    pub notes: Vec<String>,
    /// What is not as it should be; the exit status is 1 when there is any.
    pub problems: Vec<String>,
}

/// One CephCluster.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct CephClusterStatus {
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
    /// `spec.network.multiClusterService.enabled`.
    pub multi_cluster_service: bool,
    /// `spec.network.multiClusterService.clusterID`, when set.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_id: Option<String>,
    /// Why the settings cannot be read, if they cannot.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub settings_error: Option<String>,
    /// The mon and OSD Services.
    pub daemons: Vec<DaemonStatus>,
    /// How far the daemons are on their global IPs.
    pub migration: Migration,
}

/// One mon or OSD.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonStatus {
    /// `mon.a`, `osd.0`.
    pub daemon: String,
    /// Rook's Service.
    pub service: String,
    /// Its cluster IP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cluster_ip: Option<String>,
    /// The exported Service (Rook's, or the unique-name Service standing in for it).
    pub export_service: String,
    /// The ServiceExport's conditions; `None` when there is no ServiceExport.
    pub export: Option<ExportView>,
    /// The global IPs: this cluster's EndpointSlice addresses of the exported Service.
    pub global_ips: Vec<String>,
    /// What the daemon advertises (mons: `rook-ceph-mon-endpoints`; OSDs: `--public-addr`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertised: Option<String>,
    /// Whether it advertises its global IP; `None` when either is unknown.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub on_global_ip: Option<bool>,
}

/// How far the move to global IPs is.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Migration {
    /// Mons that advertise their global IP.
    pub mons_on_global_ips: usize,
    /// Mons.
    pub mons: usize,
    /// OSDs that advertise their global IP.
    pub osds_on_global_ips: usize,
    /// OSDs.
    pub osds: usize,
    /// What mcs-ceph-operator reports (its CephClusterAddressing of the same name), when it does.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator: Option<OperatorProgress>,
    /// Why there is no operator report, when there is none.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub operator_not_reported: Option<String>,
}

/// mcs-ceph-operator's report on one CephCluster (`status` of its CephClusterAddressing).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct OperatorProgress {
    /// `Disabled`, `Blocked`, `Exporting`, `Resolving`, `Migrating` or `Ready`.
    pub phase: String,
    /// Why, and what happens next.
    pub message: String,
    /// Daemons that advertise their planned address.
    pub ready_daemons: u64,
    /// Daemons in the plan.
    pub daemon_count: u64,
}

impl OperatorProgress {
    /// Reads the `status` of a CephClusterAddressing document with the operator's own types;
    /// `Ok(None)` without a status, `Err` when the document is not a CephClusterAddressing this
    /// version can read.
    pub fn of(document: &serde_json::Value) -> Result<Option<Self>, String> {
        let addressing: CephClusterAddressing =
            serde_json::from_value(document.clone()).map_err(|e| e.to_string())?;
        Ok(addressing.status.map(|status| Self {
            phase: phase_name(status.phase),
            message: status.message,
            ready_daemons: u64::from(status.ready_daemons),
            daemon_count: u64::from(status.daemon_count),
        }))
    }
}

/// The name the operator writes for `phase` (its serde form).
fn phase_name(phase: Phase) -> String {
    match serde_json::to_value(phase) {
        Ok(serde_json::Value::String(name)) => name,
        _ => format!("{phase:?}"),
    }
}

/// A ServiceExport and/or ServiceImport of one name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ServicePair {
    /// The namespace.
    pub namespace: String,
    /// The name.
    pub name: String,
    /// The export's conditions, when this cluster exports the service.
    pub export: Option<ExportView>,
    /// The import, when there is one.
    pub import: Option<ImportView>,
}

/// What `status` says when the operator reports no progress of its own.
pub const NOT_REPORTED: &str = "not reported";

/// The operator's report on `view`, or why there is none.
fn operator_progress(
    view: &CephClusterView,
    addressings: &MaybeServed<serde_json::Value>,
) -> Result<OperatorProgress, String> {
    let Some(addressings) = addressings else {
        return Err(format!(
            "{NOT_REPORTED} (no CephClusterAddressing resource type: mcs-ceph-operator is not installed)"
        ));
    };
    let mine = addressings.iter().find(|a| {
        a.pointer("/metadata/namespace").and_then(|v| v.as_str()) == Some(view.namespace.as_str())
            && a.pointer("/metadata/name").and_then(|v| v.as_str()) == Some(view.name.as_str())
    });
    match mine {
        None => Err(format!(
            "{NOT_REPORTED} (no CephClusterAddressing {}/{}: is mcs-ceph-operator running?)",
            view.namespace, view.name
        )),
        Some(document) => match OperatorProgress::of(document) {
            Ok(Some(progress)) => Ok(progress),
            Ok(None) => Err(format!(
                "{NOT_REPORTED} (CephClusterAddressing {}/{} has no status yet)",
                view.namespace, view.name
            )),
            Err(e) => Err(format!(
                "{NOT_REPORTED} (CephClusterAddressing {}/{} is unreadable: {e}; is mcsctl older than the operator?)",
                view.namespace, view.name
            )),
        },
    }
}

fn key_of(meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta) -> (String, String) {
    (
        meta.namespace.clone().unwrap_or_default(),
        meta.name.clone().unwrap_or_default(),
    )
}

/// The status report of `fetched`: pure.
pub fn report(fetched: &Fetched) -> StatusReport {
    let mut notes = Vec::new();
    let mut problems = Vec::new();
    let exports: BTreeMap<(String, String), &ServiceExport> = fetched
        .exports
        .iter()
        .flatten()
        .map(|e| (key_of(&e.metadata), e))
        .collect();
    let imports: BTreeMap<(String, String), &ServiceImport> = fetched
        .imports
        .iter()
        .flatten()
        .map(|i| (key_of(&i.metadata), i))
        .collect();

    let mut clusters = Vec::new();
    match &fetched.ceph_clusters {
        None => notes.push(
            "no CephCluster resource type (ceph.rook.io/v1) on this cluster: Rook is not installed"
                .to_owned(),
        ),
        Some(documents) if documents.is_empty() => {
            notes.push(format!("no CephCluster in {}", fetched.scope));
        }
        Some(documents) => {
            for document in documents {
                let view = CephClusterView::of(document);
                let objects = fetched
                    .ceph_namespaces
                    .get(&view.namespace)
                    .cloned()
                    .unwrap_or_default();
                let mut status =
                    cluster_status(&view, &objects, &exports, &fetched.slices, &mut problems);
                match operator_progress(&view, &fetched.addressings) {
                    Ok(progress) => status.migration.operator = Some(progress),
                    Err(why) => status.migration.operator_not_reported = Some(why),
                }
                clusters.push(status);
            }
        }
    }
    let any_mcs = clusters.iter().any(|c| c.multi_cluster_service);
    if fetched.exports.is_none() || fetched.imports.is_none() {
        let text = "the MCS CRDs (serviceexports/serviceimports.multicluster.x-k8s.io) are not installed: mcsctl crds | kubectl apply --server-side -f -".to_owned();
        if any_mcs {
            problems.push(text);
        } else {
            notes.push(text);
        }
    }

    let names: BTreeSet<&(String, String)> = exports.keys().chain(imports.keys()).collect();
    let mut services = Vec::new();
    for key in names {
        let export = exports.get(key).map(|e| ExportView::of(e));
        let import = imports.get(key).map(|i| ImportView::of(i));
        let (namespace, name) = key;
        if let Some(view) = &export {
            for problem in view.problems() {
                problems.push(format!("ServiceExport {namespace}/{name}: {problem}"));
            }
            if import.is_none() && view.valid.is_true() {
                problems.push(format!(
                    "ServiceExport {namespace}/{name}: no ServiceImport {namespace}/{name} yet: the MCS controller has not imported it (is clusterset-agent running, and is the export Ready?)"
                ));
            }
        }
        services.push(ServicePair {
            namespace: namespace.clone(),
            name: name.clone(),
            export,
            import,
        });
    }
    StatusReport {
        scope: fetched.scope.to_string(),
        ceph_clusters: clusters,
        services,
        notes,
        problems,
    }
}

fn ip_of(text: &str) -> Option<IpAddr> {
    text.parse::<IpAddr>()
        .ok()
        .or_else(|| text.parse::<SocketAddr>().ok().map(|a| a.ip()))
}

fn cluster_status(
    view: &CephClusterView,
    objects: &CephNamespace,
    exports: &BTreeMap<(String, String), &ServiceExport>,
    slices: &[EndpointSlice],
    problems: &mut Vec<String>,
) -> CephClusterStatus {
    let namespace = &view.namespace;
    let who = format!("CephCluster {namespace}/{}", view.name);
    let mcs = view.mcs_enabled();
    let cluster_id = view.cluster_id().map(str::to_owned);
    let settings_error = view.settings.as_ref().err().cloned();
    if let Some(error) = &settings_error {
        problems.push(format!("{who}: {error}"));
    }
    if mcs && cluster_id.is_none() {
        problems.push(format!(
            "{who}: multiClusterService is enabled without a clusterID: set spec.network.multiClusterService.clusterID to this cluster's id in the clusterset"
        ));
    }

    // Rook's Services by daemon, and the unique-name export Services standing in for them.
    let mut rook_services: BTreeMap<Daemon, &Service> = BTreeMap::new();
    let mut stand_ins: BTreeMap<String, String> = BTreeMap::new();
    for service in &objects.services {
        let name = service.metadata.name.clone().unwrap_or_default();
        let labels = service.metadata.labels.clone().unwrap_or_default();
        if let Some(rook_service) = labels.get(rook::export_label::ROOK_SERVICE) {
            stand_ins.insert(rook_service.clone(), name);
        } else if let Ok(daemon) = name.parse::<Daemon>() {
            rook_services.insert(daemon, service);
        }
    }
    let advertised_mons = objects
        .mon_endpoints
        .as_ref()
        .map(mon_endpoints)
        .unwrap_or_default();
    let osd_args: BTreeMap<String, Option<String>> = objects
        .osd_deployments
        .iter()
        .map(|d| {
            (
                d.metadata.name.clone().unwrap_or_default(),
                args::osd_public_addr(d).map(str::to_owned),
            )
        })
        .collect();

    let mut daemons = Vec::new();
    for (daemon, service) in rook_services {
        let service_name = daemon.service_name();
        let export_service = stand_ins
            .get(&service_name)
            .cloned()
            .unwrap_or_else(|| service_name.clone());
        let export = exports
            .get(&(namespace.clone(), export_service.clone()))
            .map(|e| ExportView::of(e));
        if mcs && export.is_none() {
            problems.push(format!(
                "{who}: {daemon} has no ServiceExport {namespace}/{export_service}: the operator exports every mon and OSD Service when MCS is enabled"
            ));
        }
        let global_ips = cluster_id
            .as_deref()
            .map(|id| slice_addresses(slices, namespace, &export_service, Some(id)))
            .unwrap_or_default();
        let advertised = match &daemon {
            Daemon::Mon(id) => advertised_mons.get(id.as_str()).map(|a| match a {
                Ok(address) => address.to_string(),
                Err(text) => text.clone(),
            }),
            Daemon::Osd(_) => osd_args.get(&service_name).cloned().flatten(),
        };
        let on_global_ip = match (advertised.as_deref().and_then(ip_of), global_ips.is_empty()) {
            (Some(ip), false) => Some(global_ips.contains(&ip)),
            _ => None,
        };
        daemons.push(DaemonStatus {
            daemon: daemon.to_string(),
            service: service_name,
            cluster_ip: service.spec.as_ref().and_then(|s| s.cluster_ip.clone()),
            export_service,
            export,
            global_ips: global_ips.iter().map(ToString::to_string).collect(),
            advertised,
            on_global_ip,
        });
    }
    let count = |prefix: &str, on: bool| {
        daemons
            .iter()
            .filter(|d| d.daemon.starts_with(prefix) && (!on || d.on_global_ip == Some(true)))
            .count()
    };
    let migration = Migration {
        mons_on_global_ips: count("mon.", true),
        mons: count("mon.", false),
        osds_on_global_ips: count("osd.", true),
        osds: count("osd.", false),
        operator: None,
        operator_not_reported: None,
    };
    CephClusterStatus {
        namespace: namespace.clone(),
        name: view.name.clone(),
        multi_cluster_service: mcs,
        cluster_id,
        settings_error,
        daemons,
        migration,
    }
}

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

/// The report as text for people.
pub fn render_table(report: &StatusReport) -> String {
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
            let mut table = Table::new(&[
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
            ]);
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
                table.row([
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
                ]);
            }
            for line in table.render().lines() {
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
        let mut table = Table::new(&[
            "NAMESPACE",
            "NAME",
            "VALID",
            "READY",
            "CONFLICT",
            "IMPORT",
            "IPS",
            "PORTS",
            "CLUSTERS",
        ]);
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
            table.row([
                Cell::from(pair.namespace.as_str()),
                Cell::from(pair.name.as_str()),
                valid,
                ready,
                conflict,
                import,
                ips,
                ports,
                clusters,
            ]);
        }
        for line in table.render().lines() {
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

/// Runs `mcsctl status`: exit status 1 when the report lists problems.
pub fn run(args: &StatusArgs) -> anyhow::Result<ExitCode> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let report = runtime.block_on(async {
        let connection = crate::kubeconfig::connect(&args.kube).await?;
        let scope = if args.all_namespaces {
            Scope::All
        } else {
            Scope::Namespace(connection.namespace.clone())
        };
        let reader = KubeReader::new(connection.client, connection.origin);
        let spinner = Spinner::start(format!("reading {scope}"));
        let fetched = fetch(&reader, &scope).await;
        spinner.finish();
        anyhow::Ok(report(&fetched?))
    })?;
    let text = output::render(&report, args.output, render_table)?;
    output::print_verdict(&text, !report.problems.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{fixture, objects};

    #[test]
    fn operator_progress_is_read_with_the_operator_types() {
        // Written by the operator's own types, read back by status.
        let written = CephClusterAddressing::new(
            "my-cluster",
            "rook-ceph",
            mcs_ceph_api::AddressingStatus {
                phase: Phase::Migrating,
                message: "2 OSDs restart with their global IPs".to_owned(),
                ready_daemons: 4,
                daemon_count: 6,
                ..Default::default()
            },
        );
        let document = serde_json::to_value(&written).unwrap();
        let progress = OperatorProgress::of(&document).unwrap().unwrap();
        assert_eq!(progress.phase, "Migrating");
        assert_eq!(progress.message, "2 OSDs restart with their global IPs");
        assert_eq!((progress.ready_daemons, progress.daemon_count), (4, 6));

        let mut no_status = document.clone();
        no_status.as_object_mut().unwrap().remove("status");
        assert_eq!(OperatorProgress::of(&no_status).unwrap(), None);

        let mut newer = document.clone();
        newer["status"]["phase"] = "Rebalancing".into();
        assert_eq!(
            OperatorProgress::of(&newer).unwrap().unwrap().phase,
            "Unknown"
        );

        let mut broken = document;
        broken["status"]["readyDaemons"] = "four".into();
        let error = OperatorProgress::of(&broken).unwrap_err();
        assert!(error.contains("invalid type"), "{error}");
    }

    /// What `fetch` returns for `namespace` of the recorded cluster, built without IO.
    fn fetched(namespace: &str) -> Fetched {
        let in_ns = |kind: &str| -> Vec<serde_json::Value> {
            fixture()
                .into_iter()
                .filter(|o| o["kind"] == kind && o["metadata"]["namespace"] == namespace)
                .collect()
        };
        let ceph_clusters = in_ns("CephCluster");
        let mut ceph_namespaces = BTreeMap::new();
        if !ceph_clusters.is_empty() {
            ceph_namespaces.insert(
                namespace.to_owned(),
                CephNamespace {
                    services: objects::<Service>("Service", Some(namespace))
                        .into_iter()
                        .filter(|s| {
                            s.metadata.labels.as_ref().is_some_and(|l| {
                                l.get("ceph_daemon_type")
                                    .is_some_and(|t| t == "mon" || t == "osd")
                            })
                        })
                        .collect(),
                    mon_endpoints: objects::<ConfigMap>("ConfigMap", Some(namespace))
                        .into_iter()
                        .next(),
                    osd_deployments: objects("Deployment", Some(namespace)),
                },
            );
        }
        Fetched {
            scope: Scope::Namespace(namespace.to_owned()),
            ceph_clusters: Some(ceph_clusters),
            addressings: Some(in_ns("CephClusterAddressing")),
            exports: Some(objects("ServiceExport", Some(namespace))),
            imports: Some(objects("ServiceImport", Some(namespace))),
            slices: objects("EndpointSlice", Some(namespace)),
            ceph_namespaces,
        }
    }

    #[test]
    fn a_half_migrated_cluster_shows_per_daemon_addresses_progress_and_problems() {
        let report = report(&fetched("rook-ceph"));
        assert_eq!(report.ceph_clusters.len(), 1);
        let cluster = &report.ceph_clusters[0];
        assert_eq!(
            (
                cluster.name.as_str(),
                cluster.multi_cluster_service,
                cluster.cluster_id.as_deref()
            ),
            ("my-cluster", true, Some("east"))
        );
        /// daemon, cluster IP, global IPs, advertised, on its global IP, export Ready.
        type Row<'a> = (
            &'a str,
            Option<&'a str>,
            String,
            Option<&'a str>,
            Option<bool>,
            bool,
        );
        let rows: Vec<Row> = cluster
            .daemons
            .iter()
            .map(|d| {
                (
                    d.daemon.as_str(),
                    d.cluster_ip.as_deref(),
                    d.global_ips.join(","),
                    d.advertised.as_deref(),
                    d.on_global_ip,
                    d.export.as_ref().is_some_and(|e| e.ready.is_true()),
                )
            })
            .collect();
        assert_eq!(
            rows,
            [
                (
                    "mon.a",
                    Some("10.96.12.10"),
                    "242.1.0.10".to_owned(),
                    Some("242.1.0.10:6789"),
                    Some(true),
                    true
                ),
                (
                    "mon.b",
                    Some("10.96.12.11"),
                    String::new(),
                    Some("10.96.12.11:6789"),
                    None,
                    false
                ),
                (
                    "osd.0",
                    Some("10.96.13.10"),
                    "242.1.0.20".to_owned(),
                    Some("242.1.0.20"),
                    Some(true),
                    true
                ),
            ]
        );
        let migration = &cluster.migration;
        assert_eq!(
            (
                migration.mons_on_global_ips,
                migration.mons,
                migration.osds_on_global_ips,
                migration.osds
            ),
            (1, 2, 1, 1)
        );
        let operator = migration.operator.as_ref().unwrap();
        assert_eq!(
            (
                operator.phase.as_str(),
                operator.ready_daemons,
                operator.daemon_count
            ),
            ("Migrating", 2, 3)
        );
        assert_eq!(
            report.problems,
            [
                "ServiceExport rook-ceph/rook-ceph-mon-b: Ready=False (Failed): No global IP for this export: this cluster has no free address in a global CIDR of the Service's IP families (IPv4); add or enlarge --global-cidr",
                "ServiceExport rook-ceph/rook-ceph-mon-b: no ServiceImport rook-ceph/rook-ceph-mon-b yet: the MCS controller has not imported it (is clusterset-agent running, and is the export Ready?)",
            ]
        );
        let pairs: Vec<(&str, bool, bool)> = report
            .services
            .iter()
            .map(|p| (p.name.as_str(), p.export.is_some(), p.import.is_some()))
            .collect();
        assert_eq!(
            pairs,
            [
                ("rook-ceph-mon-a", true, true),
                ("rook-ceph-mon-b", true, false),
                ("rook-ceph-osd-0", true, true)
            ]
        );
    }

    #[test]
    fn the_table_has_a_row_per_daemon_and_per_pair_and_lists_the_problems() {
        let text = render_table(&report(&fetched("rook-ceph")));
        let plain = strip(&text);
        let lines: Vec<&str> = plain.lines().collect();
        assert_eq!(
            lines[0],
            "CephCluster rook-ceph/my-cluster: MCS enabled, clusterID east"
        );
        assert_eq!(
            lines[1],
            "  migration: mons on global IPs 1/2, OSDs on global IPs 1/1; operator: Migrating, 2/3 daemons on their planned address: mon.b is replaced next (new mon c at 242.1.0.12)"
        );
        let words = |line: &str| {
            line.split_whitespace()
                .map(str::to_owned)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            words(lines[2]),
            [
                "DAEMON",
                "SERVICE",
                "CLUSTER-IP",
                "EXPORT",
                "VALID",
                "READY",
                "CONFLICT",
                "GLOBAL-IP",
                "ADVERTISED",
                "ON-GLOBAL"
            ]
        );
        assert_eq!(
            words(lines[3]),
            [
                "mon.a",
                "rook-ceph-mon-a",
                "10.96.12.10",
                "rook-ceph-mon-a",
                "True",
                "True",
                "False",
                "242.1.0.10",
                "242.1.0.10:6789",
                "yes"
            ]
        );
        assert_eq!(
            words(lines[4]),
            [
                "mon.b",
                "rook-ceph-mon-b",
                "10.96.12.11",
                "rook-ceph-mon-b",
                "True",
                "False",
                "False",
                "-",
                "10.96.12.11:6789",
                "-"
            ]
        );
        assert!(
            plain.contains("\nServiceExports and ServiceImports in namespace rook-ceph\n"),
            "{plain}"
        );
        assert!(
            plain.contains("rook-ceph-mon-b   True    False   False      none"),
            "{plain}"
        );
        assert!(
            plain.contains(
                "\nProblems (2):\n  - ServiceExport rook-ceph/rook-ceph-mon-b: Ready=False (Failed)"
            ),
            "{plain}"
        );
        // Styles are there for a terminal (anstream drops them elsewhere).
        assert!(
            text.contains("\u{1b}[1m\u{1b}[31mFalse\u{1b}[0m"),
            "{text:?}"
        );
    }

    fn strip(text: &str) -> String {
        use std::io::Write as _;
        let mut out = Vec::new();
        anstream::StripStream::new(&mut out)
            .write_all(text.as_bytes())
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_healthy_namespace_has_no_problems_and_imported_only_services_are_listed() {
        let report = report(&fetched("shop"));
        assert_eq!(report.problems, Vec::<String>::new());
        assert_eq!(report.notes, ["no CephCluster in namespace shop"]);
        let pairs: Vec<(&str, bool, Option<Vec<String>>)> = report
            .services
            .iter()
            .map(|p| {
                (
                    p.name.as_str(),
                    p.export.is_some(),
                    p.import.as_ref().map(|i| i.clusters.clone()),
                )
            })
            .collect();
        assert_eq!(
            pairs,
            [
                ("api", false, Some(vec!["west".to_owned()])),
                ("db", true, Some(vec!["east".to_owned()])),
                (
                    "web",
                    true,
                    Some(vec!["east".to_owned(), "west".to_owned()])
                ),
            ]
        );
        assert!(strip(&render_table(&report)).ends_with("\nNo problems found.\n"));
    }

    #[test]
    fn missing_exports_crds_and_operators_are_reported() {
        // MCS on, but nothing exported, no MCS CRDs, no operator.
        let mut input = fetched("rook-ceph");
        input.exports = None;
        input.imports = None;
        input.addressings = None;
        input.slices.clear();
        let report = report(&input);
        assert_eq!(
            report.problems,
            [
                "CephCluster rook-ceph/my-cluster: mon.a has no ServiceExport rook-ceph/rook-ceph-mon-a: the operator exports every mon and OSD Service when MCS is enabled",
                "CephCluster rook-ceph/my-cluster: mon.b has no ServiceExport rook-ceph/rook-ceph-mon-b: the operator exports every mon and OSD Service when MCS is enabled",
                "CephCluster rook-ceph/my-cluster: osd.0 has no ServiceExport rook-ceph/rook-ceph-osd-0: the operator exports every mon and OSD Service when MCS is enabled",
                "the MCS CRDs (serviceexports/serviceimports.multicluster.x-k8s.io) are not installed: mcsctl crds | kubectl apply --server-side -f -",
            ]
        );
        let migration = &report.ceph_clusters[0].migration;
        assert_eq!(migration.operator, None);
        assert_eq!(
            migration.operator_not_reported.as_deref(),
            Some(
                "not reported (no CephClusterAddressing resource type: mcs-ceph-operator is not installed)"
            )
        );
        assert!(
            report.ceph_clusters[0]
                .daemons
                .iter()
                .all(|d| d.on_global_ip.is_none())
        );

        // MCS off: the same objects are no problem; no Rook at all is a note.
        let mut off = fetched("rook-ceph");
        off.ceph_clusters.as_mut().unwrap()[0]["spec"]["network"]["multiClusterService"]["enabled"] =
            false.into();
        off.exports = Some(Vec::new());
        let report = super::report(&off);
        assert!(report.problems.is_empty(), "{:?}", report.problems);
        assert!(!report.ceph_clusters[0].multi_cluster_service);
        let mut no_rook = fetched("shop");
        no_rook.ceph_clusters = None;
        assert_eq!(
            super::report(&no_rook).notes,
            [
                "no CephCluster resource type (ceph.rook.io/v1) on this cluster: Rook is not installed"
            ]
        );
    }

    #[test]
    fn an_mcs_cluster_without_a_cluster_id_is_a_problem() {
        let mut input = fetched("rook-ceph");
        input.ceph_clusters.as_mut().unwrap()[0]["spec"]["network"]["multiClusterService"]
            .as_object_mut()
            .unwrap()
            .remove("clusterID");
        let report = report(&input);
        assert!(
            report.problems.iter().any(|p| p == "CephCluster rook-ceph/my-cluster: multiClusterService is enabled without a clusterID: set spec.network.multiClusterService.clusterID to this cluster's id in the clusterset"),
            "{:?}",
            report.problems
        );
        // Without an id there is no telling which EndpointSlice holds the global IP.
        assert!(
            report.ceph_clusters[0]
                .daemons
                .iter()
                .all(|d| d.global_ips.is_empty())
        );
    }
}

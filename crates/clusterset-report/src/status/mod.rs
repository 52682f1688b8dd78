//! `mcsctl status`: every CephCluster with its MCS settings, per daemon Service the export
//! conditions, global IP and advertised IP, the migration progress; and every
//! ServiceExport/ServiceImport pair with its conditions.
//!
//! [`Fetched`] is what is read (the reading is the IO crate's); [`report`] is a pure function
//! from it to a [`StatusReport`]; [`render_table`] draws it.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, SocketAddr};

use ceph_address_plan::{Daemon, args, rook};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use mcs_ceph_api::{CephClusterAddressing, Phase};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use serde::Serialize;

use crate::view::{CephClusterView, ExportView, ImportView, mon_endpoints, slice_addresses};
use crate::{MaybeServed, Scope};

mod table;
#[cfg(test)]
mod tests;

pub use table::{render_table, render_table_in};

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

/// The objects of the report as `kubectl get -o name` prints them (`resource.group/name`):
/// every CephCluster, then per ServiceExport/ServiceImport pair its export and its import.
///
/// ```
/// # use clusterset_report::status::{StatusReport, names};
/// let report = StatusReport {
///     scope: "namespace rook-ceph".to_owned(),
///     ceph_clusters: vec![],
///     services: vec![],
///     notes: vec![],
///     problems: vec![],
/// };
/// assert!(names(&report).is_empty());
/// ```
pub fn names(report: &StatusReport) -> Vec<String> {
    let clusters = report
        .ceph_clusters
        .iter()
        .map(|c| format!("{CEPH_CLUSTER_RESOURCE}/{}", c.name));
    let services = report.services.iter().flat_map(|pair| {
        let export = pair
            .export
            .as_ref()
            .map(|_| format!("{SERVICE_EXPORT_RESOURCE}/{}", pair.name));
        let import = pair
            .import
            .as_ref()
            .map(|_| format!("{SERVICE_IMPORT_RESOURCE}/{}", pair.name));
        export.into_iter().chain(import)
    });
    clusters.chain(services).collect()
}

/// Rook's CephCluster as `kubectl get -o name` names its type.
pub const CEPH_CLUSTER_RESOURCE: &str = "cephcluster.ceph.rook.io";
/// The ServiceExport type as `kubectl get -o name` names it.
pub const SERVICE_EXPORT_RESOURCE: &str = "serviceexport.multicluster.x-k8s.io";
/// The ServiceImport type as `kubectl get -o name` names it.
pub const SERVICE_IMPORT_RESOURCE: &str = "serviceimport.multicluster.x-k8s.io";

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
    let (rook_services, stand_ins) = daemon_services(objects);
    let addresses = Advertised::of(objects);
    let context = DaemonContext {
        who: &who,
        namespace,
        mcs,
        cluster_id: cluster_id.as_deref(),
        exports,
        slices,
        stand_ins: &stand_ins,
        addresses: &addresses,
    };
    let daemons: Vec<DaemonStatus> = rook_services
        .into_iter()
        .map(|(daemon, service)| context.daemon_status(daemon, service, problems))
        .collect();
    let migration = migration_counts(&daemons);
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

/// Rook's Services by daemon, and the unique-name export Services standing in for them (by
/// the name of the Rook Service they stand in for).
fn daemon_services(
    objects: &CephNamespace,
) -> (BTreeMap<Daemon, &Service>, BTreeMap<String, String>) {
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
    (rook_services, stand_ins)
}

/// The addresses the daemons advertise: the mons' in `rook-ceph-mon-endpoints` (or the text
/// that is no address), the OSDs' `--public-addr` by Deployment name.
struct Advertised {
    mons: BTreeMap<String, Result<SocketAddr, String>>,
    osds: BTreeMap<String, Option<String>>,
}

impl Advertised {
    fn of(objects: &CephNamespace) -> Self {
        let mons = objects
            .mon_endpoints
            .as_ref()
            .map(mon_endpoints)
            .unwrap_or_default();
        let osds = objects
            .osd_deployments
            .iter()
            .map(|d| {
                (
                    d.metadata.name.clone().unwrap_or_default(),
                    args::osd_public_addr(d).map(str::to_owned),
                )
            })
            .collect();
        Self { mons, osds }
    }

    fn of_daemon(&self, daemon: &Daemon, service_name: &str) -> Option<String> {
        match daemon {
            Daemon::Mon(id) => self.mons.get(id.as_str()).map(|a| match a {
                Ok(address) => address.to_string(),
                Err(text) => text.clone(),
            }),
            Daemon::Osd(_) => self.osds.get(service_name).cloned().flatten(),
        }
    }
}

/// What every daemon's status of one CephCluster is computed from.
struct DaemonContext<'a> {
    who: &'a str,
    namespace: &'a String,
    mcs: bool,
    cluster_id: Option<&'a str>,
    exports: &'a BTreeMap<(String, String), &'a ServiceExport>,
    slices: &'a [EndpointSlice],
    stand_ins: &'a BTreeMap<String, String>,
    addresses: &'a Advertised,
}

impl DaemonContext<'_> {
    /// One daemon's Service, export, global IPs and advertised address; a missing export
    /// under MCS is a problem.
    fn daemon_status(
        &self,
        daemon: Daemon,
        service: &Service,
        problems: &mut Vec<String>,
    ) -> DaemonStatus {
        let (who, namespace) = (self.who, self.namespace);
        let service_name = daemon.service_name();
        let export_service = self
            .stand_ins
            .get(&service_name)
            .cloned()
            .unwrap_or_else(|| service_name.clone());
        let export = self
            .exports
            .get(&(namespace.clone(), export_service.clone()))
            .map(|e| ExportView::of(e));
        if self.mcs && export.is_none() {
            problems.push(format!(
                "{who}: {daemon} has no ServiceExport {namespace}/{export_service}: the operator exports every mon and OSD Service when MCS is enabled"
            ));
        }
        let global_ips = self
            .cluster_id
            .map(|id| slice_addresses(self.slices, namespace, &export_service, Some(id)))
            .unwrap_or_default();
        let advertised = self.addresses.of_daemon(&daemon, &service_name);
        let on_global_ip = match (advertised.as_deref().and_then(ip_of), global_ips.is_empty()) {
            (Some(ip), false) => Some(global_ips.contains(&ip)),
            _ => None,
        };
        DaemonStatus {
            daemon: daemon.to_string(),
            service: service_name,
            cluster_ip: service.spec.as_ref().and_then(|s| s.cluster_ip.clone()),
            export_service,
            export,
            global_ips: global_ips.iter().map(ToString::to_string).collect(),
            advertised,
            on_global_ip,
        }
    }
}

/// How many mons and OSDs there are, and how many advertise a global IP.
fn migration_counts(daemons: &[DaemonStatus]) -> Migration {
    let count = |prefix: &str, on: bool| {
        daemons
            .iter()
            .filter(|d| d.daemon.starts_with(prefix) && (!on || d.on_global_ip == Some(true)))
            .count()
    };
    Migration {
        mons_on_global_ips: count("mon.", true),
        mons: count("mon.", false),
        osds_on_global_ips: count("osd.", true),
        osds: count("osd.", false),
        operator: None,
        operator_not_reported: None,
    }
}

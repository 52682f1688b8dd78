//! Pure readings of fetched objects that `status` and `diagnose` share: export and import
//! conditions, the addresses of MCS EndpointSlices, what a Rook daemon advertises, and the
//! MCS settings of a CephCluster (through ceph-address-plan's typed view).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use ceph_address_plan::manifest::CephClusterManifest;
use ceph_address_plan::{ClusterSettings, rook};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use mcs_types::conditions::{
    ServiceExportConditionType, ServiceImportConditionType, find_condition,
};
use mcs_types::labels::{SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use serde::Serialize;

use crate::output::{Cell, style};

/// One condition as found: `status` is `True`, `False`, `Unknown`, or `-` when absent (shown
/// so in tables; YAML and JSON have `null` instead).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ConditionView {
    /// The condition's status, `-` when the object has no such condition.
    pub status: String,
    /// Its reason.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Its message.
    #[serde(skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl ConditionView {
    /// The condition `type_` of `conditions`.
    pub fn of(conditions: &[Condition], type_: &str) -> Self {
        match find_condition(conditions, type_) {
            Some(c) => Self {
                status: c.status.clone(),
                reason: c.reason.clone(),
                message: c.message.clone(),
            },
            None => Self {
                status: "-".to_owned(),
                reason: String::new(),
                message: String::new(),
            },
        }
    }

    /// Whether the status is `True`.
    pub fn is_true(&self) -> bool {
        self.status == "True"
    }

    /// Whether the object has the condition.
    pub fn is_present(&self) -> bool {
        self.status != "-"
    }

    /// `Status (Reason): message`, or just the status.
    pub fn describe(&self) -> String {
        let mut text = self.status.clone();
        if !self.reason.is_empty() {
            text = format!("{text} ({})", self.reason);
        }
        if !self.message.is_empty() {
            text = format!("{text}: {}", self.message);
        }
        text
    }

    /// A table cell: green when the status is `good`, red when it is the opposite, yellow when
    /// unknown or absent.
    pub fn cell(&self, good: bool) -> Cell {
        let style = match (self.status.as_str(), good) {
            ("True", true) | ("False", false) => style::GOOD,
            ("True", false) | ("False", true) => style::BAD,
            _ => style::WARN,
        };
        Cell::new(self.status.clone(), style)
    }
}

/// Serializes a condition the object does not have as `null`.
fn absent_as_null<S: serde::Serializer>(
    condition: &ConditionView,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    if condition.is_present() {
        condition.serialize(serializer)
    } else {
        serializer.serialize_none()
    }
}

/// The three conditions of a ServiceExport (`null` in YAML and JSON when absent).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportView {
    /// `Valid`.
    #[serde(serialize_with = "absent_as_null")]
    pub valid: ConditionView,
    /// `Ready`.
    #[serde(serialize_with = "absent_as_null")]
    pub ready: ConditionView,
    /// `Conflict`.
    #[serde(serialize_with = "absent_as_null")]
    pub conflict: ConditionView,
}

impl ExportView {
    /// The conditions of `export`.
    pub fn of(export: &ServiceExport) -> Self {
        let conditions = export
            .status
            .as_ref()
            .map_or(&[][..], |s| s.conditions.as_slice());
        let view = |t: ServiceExportConditionType| ConditionView::of(conditions, t.as_str());
        Self {
            valid: view(ServiceExportConditionType::Valid),
            ready: view(ServiceExportConditionType::Ready),
            conflict: view(ServiceExportConditionType::Conflict),
        }
    }

    /// What is wrong with the export, one line each; empty when it is valid, ready and
    /// without conflict.
    pub fn problems(&self) -> Vec<String> {
        let mut problems = Vec::new();
        let mut not = |name: &str, condition: &ConditionView| {
            problems.push(if condition.is_present() {
                format!("{name}={}", condition.describe())
            } else {
                format!("no {name} condition (no MCS controller has processed the export)")
            });
        };
        if !self.valid.is_true() {
            not("Valid", &self.valid);
        }
        if self.conflict.is_true() {
            not("Conflict", &self.conflict);
        }
        if !self.ready.is_true() {
            not("Ready", &self.ready);
        }
        problems
    }
}

/// What a ServiceImport says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ImportView {
    /// `ClusterSetIP` or `Headless`.
    #[serde(rename = "type")]
    pub type_: String,
    /// The clusterset IPs.
    pub ips: Vec<String>,
    /// The ports, `name:port/PROTOCOL`.
    pub ports: Vec<String>,
    /// The exporting clusters.
    pub clusters: Vec<String>,
    /// `Ready` (`null` in YAML and JSON when absent).
    #[serde(serialize_with = "absent_as_null")]
    pub ready: ConditionView,
}

impl ImportView {
    /// The view of `import`.
    pub fn of(import: &ServiceImport) -> Self {
        let status = import.status.as_ref();
        Self {
            type_: import.spec.type_.to_string(),
            ips: import.spec.ips.clone(),
            ports: import
                .spec
                .ports
                .iter()
                .map(|p| port_text(p.name.as_deref(), p.port, p.protocol_or_default()))
                .collect(),
            clusters: status
                .map(|s| s.cluster_ids().map(str::to_owned).collect())
                .unwrap_or_default(),
            ready: ConditionView::of(
                status.map_or(&[][..], |s| s.conditions.as_slice()),
                ServiceImportConditionType::Ready.as_str(),
            ),
        }
    }
}

/// A port as `name:port/PROTOCOL` (`port/PROTOCOL` without a name).
pub fn port_text(name: Option<&str>, port: i32, protocol: &str) -> String {
    match name.filter(|n| !n.is_empty()) {
        Some(name) => format!("{name}:{port}/{protocol}"),
        None => format!("{port}/{protocol}"),
    }
}

/// The ready addresses of the MCS EndpointSlices of `service` in `namespace`, from
/// `source_cluster` only when given, in order without repeats.
pub fn slice_addresses(
    slices: &[EndpointSlice],
    namespace: &str,
    service: &str,
    source_cluster: Option<&str>,
) -> Vec<IpAddr> {
    let mut out = Vec::new();
    for slice in slices {
        let labels = slice.metadata.labels.as_ref();
        let label = |key: &str| labels.and_then(|l| l.get(key)).map(String::as_str);
        if slice.metadata.namespace.as_deref() != Some(namespace)
            || label(SERVICE_NAME_LABEL) != Some(service)
            || source_cluster.is_some_and(|c| label(SOURCE_CLUSTER_LABEL) != Some(c))
        {
            continue;
        }
        for endpoint in &slice.endpoints {
            let ready = endpoint
                .conditions
                .as_ref()
                .and_then(|c| c.ready)
                .unwrap_or(true);
            if !ready {
                continue;
            }
            for address in &endpoint.addresses {
                if let Ok(ip) = address.parse::<IpAddr>()
                    && !out.contains(&ip)
                {
                    out.push(ip);
                }
            }
        }
    }
    out
}

/// The clusters whose MCS EndpointSlices of `service` exist.
pub fn slice_clusters(slices: &[EndpointSlice], namespace: &str, service: &str) -> Vec<String> {
    let mut out: Vec<String> = slices
        .iter()
        .filter(|s| s.metadata.namespace.as_deref() == Some(namespace))
        .filter_map(|s| s.metadata.labels.as_ref())
        .filter(|l| l.get(SERVICE_NAME_LABEL).map(String::as_str) == Some(service))
        .filter_map(|l| l.get(SOURCE_CLUSTER_LABEL).cloned())
        .collect();
    out.sort();
    out.dedup();
    out
}

/// The mons of `rook-ceph-mon-endpoints` (`data`: `a=10.0.0.1:6789,b=[fd00::1]:6789`) with what
/// each advertises; entries that do not parse keep their text.
pub fn mon_endpoints(config_map: &ConfigMap) -> BTreeMap<String, Result<SocketAddr, String>> {
    config_map
        .data
        .as_ref()
        .and_then(|d| d.get(rook::KEY_DATA))
        .map(|data| {
            data.split(',')
                .filter(|e| !e.is_empty())
                .map(|entry| match entry.split_once('=') {
                    Some((id, address)) => (
                        id.to_owned(),
                        address.parse().map_err(|_| address.to_owned()),
                    ),
                    None => (entry.to_owned(), Err(entry.to_owned())),
                })
                .collect()
        })
        .unwrap_or_default()
}

/// The `--public-addr` of an OSD Deployment's `osd` container (either `--public-addr=IP` or
/// `--public-addr IP`).
pub fn osd_public_addr(deployment: &Deployment) -> Option<String> {
    let containers = &deployment.spec.as_ref()?.template.spec.as_ref()?.containers;
    let container = containers
        .iter()
        .find(|c| c.name == "osd")
        .or_else(|| containers.first())?;
    let args = container
        .args
        .iter()
        .flatten()
        .chain(container.command.iter().flatten());
    let mut args = args.peekable();
    while let Some(arg) = args.next() {
        if let Some(value) = arg.strip_prefix("--public-addr=") {
            return Some(value.to_owned());
        }
        if arg == "--public-addr" {
            return args.next().cloned();
        }
    }
    None
}

/// A CephCluster read from the API: its name and what its settings say.
#[derive(Debug, Clone, PartialEq)]
pub struct CephClusterView {
    /// `metadata.namespace`.
    pub namespace: String,
    /// `metadata.name`.
    pub name: String,
    /// The settings, or why they cannot be read.
    pub settings: Result<ClusterSettings, String>,
    /// `status` as found (Rook's, and the operator's if it writes one).
    pub status: Option<serde_json::Value>,
}

impl CephClusterView {
    /// Reads a CephCluster document through ceph-address-plan's partial typed view.
    pub fn of(document: &serde_json::Value) -> Self {
        let text = |pointer: &str| {
            document
                .pointer(pointer)
                .and_then(|v| v.as_str())
                .unwrap_or_default()
                .to_owned()
        };
        let settings = serde_json::from_value::<CephClusterManifest>(document.clone())
            .map_err(|e| format!("cannot read the CephCluster: {e}"))
            .and_then(|m| m.settings().map_err(|e| e.to_string()));
        Self {
            namespace: text("/metadata/namespace"),
            name: text("/metadata/name"),
            settings,
            status: document.get("status").cloned(),
        }
    }

    /// `spec.network.multiClusterService.enabled`.
    pub fn mcs_enabled(&self) -> bool {
        self.settings
            .as_ref()
            .is_ok_and(|s| s.multi_cluster_service.enabled)
    }

    /// The MCS cluster id when MCS is enabled and the id is set.
    pub fn cluster_id(&self) -> Option<&str> {
        self.settings
            .as_ref()
            .ok()
            .filter(|s| s.multi_cluster_service.enabled)
            .map(|s| s.multi_cluster_service.cluster_id.as_str())
            .filter(|id| !id.is_empty())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(
        ns: &str,
        service: &str,
        cluster: &str,
        endpoints: serde_json::Value,
    ) -> EndpointSlice {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": format!("{service}-{cluster}"), "namespace": ns, "labels": {
                SERVICE_NAME_LABEL: service, SOURCE_CLUSTER_LABEL: cluster}},
            "addressType": "IPv4",
            "endpoints": endpoints,
        }))
        .unwrap()
    }

    #[test]
    fn slice_addresses_are_per_service_and_cluster_and_only_ready() {
        let slices = [
            slice(
                "ns",
                "a",
                "east",
                serde_json::json!([
                    {"addresses": ["242.1.0.1"]},
                    {"addresses": ["242.1.0.9"], "conditions": {"ready": false}},
                ]),
            ),
            slice(
                "ns",
                "a",
                "west",
                serde_json::json!([{"addresses": ["242.2.0.1"]}]),
            ),
            slice(
                "ns",
                "b",
                "east",
                serde_json::json!([{"addresses": ["242.1.0.2"]}]),
            ),
            slice(
                "other",
                "a",
                "east",
                serde_json::json!([{"addresses": ["242.1.0.3"]}]),
            ),
        ];
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        assert_eq!(
            slice_addresses(&slices, "ns", "a", Some("east")),
            [ip("242.1.0.1")]
        );
        assert_eq!(
            slice_addresses(&slices, "ns", "a", None),
            [ip("242.1.0.1"), ip("242.2.0.1")]
        );
        assert_eq!(slice_clusters(&slices, "ns", "a"), ["east", "west"]);
    }

    #[test]
    fn mon_endpoints_and_osd_args_are_read_as_rook_writes_them() {
        let config_map: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "rook-ceph-mon-endpoints"},
            "data": {"data": "a=10.96.0.1:6789,b=[fd00::1]:3300,c=junk"}
        }))
        .unwrap();
        let mons = mon_endpoints(&config_map);
        assert_eq!(mons["a"], Ok("10.96.0.1:6789".parse().unwrap()));
        assert_eq!(mons["b"], Ok("[fd00::1]:3300".parse().unwrap()));
        assert_eq!(mons["c"], Err("junk".to_owned()));
        let deployment = |args: serde_json::Value| -> Deployment {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "rook-ceph-osd-0"},
                "spec": {"selector": {}, "template": {"spec": {"containers": [
                    {"name": "log-collector"},
                    {"name": "osd", "args": args}]}}}
            }))
            .unwrap()
        };
        assert_eq!(
            osd_public_addr(&deployment(serde_json::json!([
                "--foreground",
                "--public-addr=242.1.0.20"
            ]))),
            Some("242.1.0.20".to_owned())
        );
        assert_eq!(
            osd_public_addr(&deployment(serde_json::json!([
                "--public-addr",
                "242.1.0.21"
            ]))),
            Some("242.1.0.21".to_owned())
        );
        assert_eq!(
            osd_public_addr(&deployment(serde_json::json!(["--foreground"]))),
            None
        );
    }

    #[test]
    fn export_problems_name_each_condition_that_is_not_as_it_should_be() {
        let export: ServiceExport = serde_json::from_value(serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
            "metadata": {"name": "web", "namespace": "shop"},
            "status": {"conditions": [
                {"type": "Valid", "status": "True", "reason": "Valid", "message": "",
                 "lastTransitionTime": "2024-01-01T00:00:00Z"},
                {"type": "Conflict", "status": "True", "reason": "PortConflict",
                 "message": "Conflicting ports.", "lastTransitionTime": "2024-01-01T00:00:00Z"}
            ]}
        }))
        .unwrap();
        let view = ExportView::of(&export);
        assert_eq!(
            view.problems(),
            [
                "Conflict=True (PortConflict): Conflicting ports.",
                "no Ready condition (no MCS controller has processed the export)"
            ]
        );
        assert!(!view.ready.is_present());
    }
}

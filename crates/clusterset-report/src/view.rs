//! Pure readings of fetched objects that `status` and `diagnose` share: export and import
//! conditions, the addresses of MCS EndpointSlices, what a Rook mon advertises (through
//! ceph-address-plan's reader of the mon endpoints; an OSD's `--public-addr` is read with
//! `ceph_address_plan::args::osd_public_addr`), and the MCS settings of a CephCluster (through
//! ceph-address-plan's typed view).

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use ceph_address_plan::ClusterSettings;
use ceph_address_plan::format::read_mon_endpoints;
use ceph_address_plan::manifest::CephClusterManifest;
use k8s_openapi::api::core::v1::ConfigMap;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use mcs_types::conditions::{
    ServiceExportConditionType, ServiceImportConditionType, find_condition,
};
use mcs_types::labels::{SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use serde::Serialize;

use crate::table::{Cell, style};

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

/// The mons of `rook-ceph-mon-endpoints` with what each advertises, read as the operator and
/// Rook read it (ceph-address-plan's [`read_mon_endpoints`]): by mon id, the endpoint, or the
/// text of an endpoint that is not `ip:port` (`:6789` while a mon is being placed). Entries
/// Rook skips (not `<id>=<endpoint>`, names that are not mon ids) are not listed.
pub fn mon_endpoints(config_map: &ConfigMap) -> BTreeMap<String, Result<SocketAddr, String>> {
    let Some(data) = config_map.data.as_ref() else {
        return BTreeMap::new();
    };
    let mut read = read_mon_endpoints(data);
    read.mons
        .into_iter()
        .map(|mon| {
            let advertised = match mon.advertised {
                Some(endpoint) => Ok(endpoint),
                None => Err(read
                    .unreadable_endpoints
                    .remove(&mon.id)
                    .unwrap_or_default()),
            };
            (mon.id.to_string(), advertised)
        })
        .collect()
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
    fn mon_endpoints_are_read_as_rook_reads_them() {
        let config_map: ConfigMap = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "rook-ceph-mon-endpoints"},
            "data": {"data": "a=10.96.0.1:6789,b=[fd00::1]:3300,c=junk,d=:6789,peer-1=10.0.0.9:6789"}
        }))
        .unwrap();
        let mons = mon_endpoints(&config_map);
        assert_eq!(mons["a"], Ok("10.96.0.1:6789".parse().unwrap()));
        assert_eq!(mons["b"], Ok("[fd00::1]:3300".parse().unwrap()));
        assert_eq!(mons["c"], Err("junk".to_owned()));
        assert_eq!(mons["d"], Err(":6789".to_owned()), "a mon being placed");
        assert!(
            !mons.contains_key("peer-1"),
            "not a mon id, as Rook reads it"
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

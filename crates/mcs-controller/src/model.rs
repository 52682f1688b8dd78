//! What one cluster publishes about one exported service: the [`ExportRecord`].
//!
//! Every cluster's agent turns its local ServiceExport + Service + EndpointSlices into a record
//! ([`ExportRecord::from_local`]) and publishes it; every cluster then computes the same imports
//! from the same set of records ([`crate::merge_exports`]).

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Service, SessionAffinityConfig};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use mcs_types::conditions::DesiredCondition;
use mcs_types::{ClusterId, ServiceKey};
use mcs_types::{IPV4, IPV6, ServiceExportSpec, ServicePort};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The properties of an exported Service that the clusterset merges (KEP-1645 "global
/// properties"), normalised so that equal meaning compares equal (an unset protocol is `TCP`, an
/// unset session affinity `None`, an unset internal traffic policy `Cluster`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportedService {
    /// `clusterIP: None`.
    pub headless: bool,
    /// The ports, as the ServiceImport carries them (no target ports).
    pub ports: Vec<ServicePort>,
    /// `None` or `ClientIP`.
    pub session_affinity: String,
    /// The ClientIP affinity configuration (only with `ClientIP`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity_config: Option<SessionAffinityConfig>,
    /// `IPv4` and/or `IPv6`, in the Service's order.
    pub ip_families: Vec<String>,
    /// `Cluster` or `Local`.
    pub internal_traffic_policy: String,
    /// For example `PreferClose`; unset when the Service has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_distribution: Option<String>,
}

/// Why a local ServiceExport cannot be exported; becomes its `Valid=False` condition.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum InvalidExport {
    /// No Service with the export's name and namespace.
    #[error(
        "Service {0} not found: create a Service with the same name and namespace as the ServiceExport"
    )]
    NoService(ServiceKey),
    /// The Service type cannot be exported.
    #[error(
        "Service {key} has type {service_type}, which cannot be exported: export a ClusterIP or headless Service"
    )]
    InvalidServiceType {
        /// The Service.
        key: ServiceKey,
        /// Its type.
        service_type: String,
    },
}

impl InvalidExport {
    /// The `Valid=False` condition for this problem.
    pub fn condition(&self) -> DesiredCondition {
        match self {
            Self::NoService(key) => DesiredCondition::export_no_service(&key.namespace, &key.name),
            Self::InvalidServiceType { service_type, .. } => {
                DesiredCondition::export_invalid_service_type(service_type)
            }
        }
    }
}

const DEFAULT_CLIENT_IP_TIMEOUT: i32 = 10_800;

impl ExportedService {
    /// The exported properties of `service`, or why it cannot be exported (no Service, or an
    /// ExternalName Service).
    pub fn from_service(
        key: &ServiceKey,
        service: Option<&Service>,
    ) -> Result<Self, InvalidExport> {
        let spec = service
            .and_then(|s| s.spec.as_ref())
            .ok_or_else(|| InvalidExport::NoService(key.clone()))?;
        let service_type = spec.type_.as_deref().unwrap_or("ClusterIP");
        if service_type == "ExternalName" {
            return Err(InvalidExport::InvalidServiceType {
                key: key.clone(),
                service_type: service_type.to_owned(),
            });
        }
        let headless = spec.cluster_ip.as_deref() == Some("None");
        let ports = spec
            .ports
            .iter()
            .flatten()
            .map(|p| ServicePort {
                name: p.name.clone().filter(|n| !n.is_empty()),
                protocol: Some(p.protocol.clone().unwrap_or_else(|| "TCP".to_owned())),
                app_protocol: p.app_protocol.clone(),
                port: p.port,
            })
            .collect();
        let session_affinity = spec
            .session_affinity
            .clone()
            .unwrap_or_else(|| "None".to_owned());
        let session_affinity_config = (session_affinity == "ClientIP").then(|| {
            let mut config = spec.session_affinity_config.clone().unwrap_or_default();
            let client_ip = config.client_ip.get_or_insert_with(Default::default);
            client_ip
                .timeout_seconds
                .get_or_insert(DEFAULT_CLIENT_IP_TIMEOUT);
            config
        });
        Ok(Self {
            headless,
            ports,
            session_affinity,
            session_affinity_config,
            ip_families: ip_families_of(spec),
            internal_traffic_policy: spec
                .internal_traffic_policy
                .clone()
                .unwrap_or_else(|| "Cluster".to_owned()),
            traffic_distribution: spec.traffic_distribution.clone(),
        })
    }

    /// The ports as comparable tuples (name, protocol, port, appProtocol).
    pub(crate) fn port_set(&self) -> std::collections::BTreeSet<PortIdentity> {
        self.ports.iter().map(PortIdentity::of).collect()
    }
}

/// A port as the conflict rules compare it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PortIdentity {
    pub name: String,
    pub protocol: String,
    pub port: i32,
    pub app_protocol: Option<String>,
}

impl PortIdentity {
    pub(crate) fn of(port: &ServicePort) -> Self {
        Self {
            name: port.name.clone().unwrap_or_default(),
            protocol: port.protocol_or_default().to_owned(),
            port: port.port,
            app_protocol: port.app_protocol.clone(),
        }
    }
}

/// The IP families of a Service: `spec.ipFamilies`, else inferred from its cluster IPs, else
/// IPv4 (the Kubernetes default for a single-stack cluster).
fn ip_families_of(spec: &k8s_openapi::api::core::v1::ServiceSpec) -> Vec<String> {
    if let Some(families) = spec.ip_families.as_ref().filter(|f| !f.is_empty()) {
        return families.clone();
    }
    let inferred: Vec<String> = spec
        .cluster_ips
        .iter()
        .flatten()
        .filter_map(|ip| ip.parse::<IpAddr>().ok())
        .map(|ip| family_of(ip).to_owned())
        .collect();
    if inferred.is_empty() {
        vec![IPV4.to_owned()]
    } else {
        inferred
    }
}

/// `IPv4` or `IPv6`.
pub fn family_of(ip: IpAddr) -> &'static str {
    match ip {
        IpAddr::V4(_) => IPV4,
        IpAddr::V6(_) => IPV6,
    }
}

/// The endpoints one cluster publishes for one address family: the addresses other clusters
/// reach, with their conditions (ready, serving, terminating), hostnames and zones kept.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportedEndpoints {
    /// `IPv4` or `IPv6`.
    pub address_type: String,
    /// The endpoints.
    pub endpoints: Vec<Endpoint>,
    /// The ports the endpoints serve (named as the Service ports).
    pub ports: Vec<EndpointPort>,
}

/// How a cluster publishes the endpoints of an exported service.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum EndpointMode {
    /// Publish the pods' addresses (flat networks, where pod IPs are unique and routable
    /// across clusters).
    PodAddresses,
    /// Publish one endpoint per family: the service's global IP, which the cluster's gateway
    /// maps to the Service (Globalnet style, for overlapping networks). Headless services still
    /// publish pods.
    GlobalIngress,
}

/// What one cluster publishes about one exported service: the `spec` of the broker's
/// `ExportRecord` objects ([`crate::crd`]).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    description = "What one cluster publishes about one exported service.",
    extend("x-kubernetes-preserve-unknown-fields" = true)
)]
pub struct ExportRecord {
    /// The exporting cluster.
    pub cluster_id: ClusterId,
    /// The exported service.
    pub service_key: ServiceKey,
    /// `creationTimestamp` of the ServiceExport: the oldest export wins conflicts.
    pub export_created: Time,
    /// The merged properties of the Service.
    #[schemars(schema_with = "crate::crd::open_object_schema")]
    pub service: ExportedService,
    /// `spec.exportedLabels` of the ServiceExport.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_labels: BTreeMap<String, String>,
    /// `spec.exportedAnnotations` of the ServiceExport.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_annotations: BTreeMap<String, String>,
    /// The global IPs allocated to this export by its cluster (one per family), if any.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(with = "Vec<String>")]
    pub global_ips: Vec<IpAddr>,
    /// The endpoints, per address family.
    #[serde(default)]
    #[schemars(schema_with = "crate::crd::open_object_list_schema")]
    pub endpoints: Vec<ExportedEndpoints>,
}

/// The local objects a cluster builds its record from.
#[derive(Debug, Clone, Copy)]
pub struct LocalExport<'a> {
    /// This cluster's id.
    pub cluster_id: &'a ClusterId,
    /// The exported service.
    pub key: &'a ServiceKey,
    /// `creationTimestamp` of the ServiceExport.
    pub export_created: &'a Time,
    /// The ServiceExport's spec.
    pub export_spec: &'a ServiceExportSpec,
    /// The Service, if it exists.
    pub service: Option<&'a Service>,
    /// The Service's local EndpointSlices (label `kubernetes.io/service-name`).
    pub endpoint_slices: &'a [EndpointSlice],
    /// The global IPs allocated to this export (see [`crate::IpPool`]).
    pub global_ips: &'a [IpAddr],
    /// How to publish endpoints.
    pub mode: EndpointMode,
}

impl ExportRecord {
    /// The record a cluster publishes for one local export, or why the export is invalid.
    pub fn from_local(local: LocalExport<'_>) -> Result<Self, InvalidExport> {
        let service = ExportedService::from_service(local.key, local.service)?;
        let endpoints = match local.mode {
            EndpointMode::GlobalIngress if !service.headless => {
                global_ingress_endpoints(&service, local.endpoint_slices, local.global_ips)
            }
            _ => pod_endpoints(local.endpoint_slices),
        };
        Ok(Self {
            cluster_id: local.cluster_id.clone(),
            service_key: local.key.clone(),
            export_created: local.export_created.clone(),
            service,
            exported_labels: local.export_spec.exported_labels.clone(),
            exported_annotations: local.export_spec.exported_annotations.clone(),
            global_ips: local.global_ips.to_vec(),
            endpoints,
        })
    }
}

/// Whether an endpoint of an EndpointSlice takes new connections: its `ready` condition, which
/// an absent value means true (the EndpointSlice API's rule, and kube-proxy's).
///
/// ```
/// use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions};
/// let endpoint = |ready| Endpoint {
///     conditions: Some(EndpointConditions { ready, ..Default::default() }),
///     ..Default::default()
/// };
/// assert!(mcs_controller::endpoint_ready(&endpoint(None)));
/// assert!(!mcs_controller::endpoint_ready(&endpoint(Some(false))));
/// ```
pub fn endpoint_ready(endpoint: &Endpoint) -> bool {
    endpoint
        .conditions
        .as_ref()
        .and_then(|c| c.ready)
        .unwrap_or(true)
}

/// The local slices' endpoints, grouped by address family, in a stable order.
fn pod_endpoints(slices: &[EndpointSlice]) -> Vec<ExportedEndpoints> {
    let mut by_family: BTreeMap<String, ExportedEndpoints> = BTreeMap::new();
    for slice in slices {
        let family = by_family
            .entry(slice.address_type.clone())
            .or_insert_with(|| ExportedEndpoints {
                address_type: slice.address_type.clone(),
                endpoints: Vec::new(),
                ports: Vec::new(),
            });
        family.endpoints.extend(slice.endpoints.iter().cloned());
        for port in slice.ports.iter().flatten() {
            if !family.ports.contains(port) {
                family.ports.push(port.clone());
            }
        }
    }
    for family in by_family.values_mut() {
        family
            .endpoints
            .sort_by(|a, b| a.addresses.cmp(&b.addresses));
        family
            .ports
            .sort_by(|a, b| (&a.name, a.port).cmp(&(&b.name, b.port)));
    }
    by_family.into_values().collect()
}

/// One endpoint per global IP: the service as a whole. Ready if any backend is ready, serving
/// if any serves, terminating only if every backend terminates; ports are the Service ports
/// (the gateway maps the global IP to the Service, which maps to target ports).
fn global_ingress_endpoints(
    service: &ExportedService,
    slices: &[EndpointSlice],
    global_ips: &[IpAddr],
) -> Vec<ExportedEndpoints> {
    let backends: Vec<&Endpoint> = slices.iter().flat_map(|s| s.endpoints.iter()).collect();
    let ready = backends.iter().any(|e| endpoint_ready(e));
    let serving = backends.iter().any(|e| {
        e.conditions
            .as_ref()
            .and_then(|c| c.serving.or(c.ready))
            .unwrap_or(true)
    });
    let terminating = !backends.is_empty()
        && backends.iter().all(|e| {
            e.conditions
                .as_ref()
                .and_then(|c| c.terminating)
                .unwrap_or(false)
        });
    let ports: Vec<EndpointPort> = service
        .ports
        .iter()
        .map(|p| EndpointPort {
            name: p.name.clone(),
            protocol: p.protocol.clone(),
            port: Some(p.port),
            app_protocol: p.app_protocol.clone(),
        })
        .collect();
    global_ips
        .iter()
        .map(|ip| ExportedEndpoints {
            address_type: family_of(*ip).to_owned(),
            endpoints: vec![Endpoint {
                addresses: vec![ip.to_string()],
                conditions: Some(k8s_openapi::api::discovery::v1::EndpointConditions {
                    ready: Some(ready),
                    serving: Some(serving),
                    terminating: Some(terminating),
                }),
                ..Default::default()
            }],
            ports: ports.clone(),
        })
        .collect()
}

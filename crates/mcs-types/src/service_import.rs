//! `ServiceImport` spec and status, shared by the `v1alpha1` and `v1beta1` versions (their schemas
//! are identical).

use std::fmt;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::SessionAffinityConfig;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::{ServiceImportConditionType, StatusConditions};
use crate::service_export::UnknownFields;

/// `IPv4`, the value of an `ipFamilies` entry.
pub const IPV4: &str = "IPv4";
/// `IPv6`, the value of an `ipFamilies` entry.
pub const IPV6: &str = "IPv6";

/// The type of a ServiceImport.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ServiceImportType {
    /// The service is reached through clusterset IP(s).
    ClusterSetIP,
    /// The service has no clusterset IP; clients reach its endpoints through DNS.
    Headless,
}

impl ServiceImportType {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::ClusterSetIP => "ClusterSetIP",
            Self::Headless => "Headless",
        }
    }
}

impl JsonSchema for ServiceImportType {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "ServiceImportType".into()
    }

    // A plain string enum, as controller-gen writes it (the derive would emit `oneOf` because
    // the variants are documented).
    fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
        schemars::json_schema!({
            "description": "type defines the type of this service. Must be ClusterSetIP or Headless.",
            "type": "string",
            "enum": [Self::ClusterSetIP.as_str(), Self::Headless.as_str()]
        })
    }
}

impl fmt::Display for ServiceImportType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A port of an imported service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServicePort {
    /// The name of this port within the service. This must be a DNS_LABEL. All ports within a
    /// ServiceSpec must have unique names. Optional if only one ServicePort is defined on this
    /// service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    /// The IP protocol for this port. Supports "TCP", "UDP", and "SCTP". Default is TCP.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol: Option<String>,
    /// The application protocol for this port, as a hint for implementations (standard
    /// Kubernetes label syntax: IANA service names, `kubernetes.io/h2c`, or prefixed custom
    /// names).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub app_protocol: Option<String>,
    /// The port that will be exposed by this service.
    pub port: i32,
}

impl ServicePort {
    /// A named TCP port.
    pub fn tcp(name: &str, port: i32) -> Self {
        Self {
            name: Some(name.to_owned()),
            protocol: Some("TCP".to_owned()),
            app_protocol: None,
            port,
        }
    }

    /// The protocol, with the documented default `TCP` when unset.
    pub fn protocol_or_default(&self) -> &str {
        self.protocol.as_deref().unwrap_or("TCP")
    }
}

/// The behaviour of a ServiceImport.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceImportSpec {
    /// The ports of the imported service.
    #[schemars(extend("x-kubernetes-list-type" = "atomic"))]
    pub ports: Vec<ServicePort>,
    /// ip will be used as the VIP for this service when type is ClusterSetIP.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2))]
    pub ips: Vec<String>,
    /// type defines the type of this service. Must be ClusterSetIP or Headless.
    #[serde(rename = "type")]
    pub type_: ServiceImportType,
    /// Supports "ClientIP" and "None". Used to maintain session affinity. Defaults to None.
    /// Ignored when type is Headless.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity: Option<String>,
    /// sessionAffinityConfig contains session affinity configuration.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session_affinity_config: Option<SessionAffinityConfig>,
    /// IPFamilies identifies all the IPFamilies assigned for this ServiceImport
    /// (`IPv4`, `IPv6`), in the order of `ips`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(length(max = 2))]
    pub ip_families: Vec<String>,
    /// InternalTrafficPolicy describes how nodes distribute service traffic they receive on the
    /// ClusterIP (`Cluster` or `Local`), as on a Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub internal_traffic_policy: Option<String>,
    /// TrafficDistribution offers a way to express preferences for how traffic is distributed
    /// to Service endpoints (for example `PreferClose`), as on a Service.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub traffic_distribution: Option<String>,
    /// Fields this version of the types does not know.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown_fields: UnknownFields,
}

impl ServiceImportSpec {
    /// A spec of the given type with the given ports and nothing else.
    pub fn new(type_: ServiceImportType, ports: Vec<ServicePort>) -> Self {
        Self {
            ports,
            ips: Vec::new(),
            type_,
            session_affinity: None,
            session_affinity_config: None,
            ip_families: Vec::new(),
            internal_traffic_policy: None,
            traffic_distribution: None,
            unknown_fields: UnknownFields::new(),
        }
    }

    /// The clusterset IPs parsed as addresses, in order.
    ///
    /// The CRD does not validate `ips`, so an entry may be malformed; the error names it.
    pub fn parsed_ips(&self) -> Result<Vec<IpAddr>, InvalidIp> {
        self.ips
            .iter()
            .map(|ip| ip.parse().map_err(|_| InvalidIp { value: ip.clone() }))
            .collect()
    }
}

/// A ServiceImport `ips` entry that is not an IP address.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "ServiceImport ips entry {value:?} is not an IP address: the MCS controller must write IPv4 or IPv6 addresses"
)]
pub struct InvalidIp {
    /// The entry as found.
    pub value: String,
}

/// One exporting cluster of an imported service.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterStatus {
    /// cluster is the name of the exporting cluster. Must be a valid RFC-1123 DNS label.
    pub cluster: String,
    /// Fields this version of the types does not know.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown_fields: UnknownFields,
}

impl ClusterStatus {
    /// The status entry of one cluster.
    pub fn new(cluster: &str) -> Self {
        Self {
            cluster: cluster.to_owned(),
            unknown_fields: UnknownFields::new(),
        }
    }
}

/// Information about the exported services that form the multi-cluster service.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceImportStatus {
    /// clusters is the list of exporting clusters from which this service was derived.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(extend(
        "x-kubernetes-list-type" = "map",
        "x-kubernetes-list-map-keys" = ["cluster"]
    ))]
    pub clusters: Vec<ClusterStatus>,
    /// Conditions of the import: `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::crd::condition_list_schema")]
    pub conditions: Vec<Condition>,
    /// Fields this version of the types does not know (for example `endpointSliceObjects`, which
    /// KEP-1645 added after mcs-api v0.5.0).
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown_fields: UnknownFields,
}

crate::conditions::impl_status_conditions!(ServiceImportStatus);

impl ServiceImportStatus {
    /// Whether `Ready` is `True`.
    pub fn is_ready(&self) -> bool {
        self.condition_is_true(ServiceImportConditionType::Ready.as_str())
    }

    /// The ids of the exporting clusters.
    pub fn cluster_ids(&self) -> impl Iterator<Item = &str> {
        self.clusters.iter().map(|c| c.cluster.as_str())
    }
}

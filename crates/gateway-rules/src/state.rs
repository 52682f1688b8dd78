//! What the gateway of one member cluster is told: the cluster's own networks, its exports with
//! their global IPs and backends, and its peers. The state file of `clusterset-gateway`'s offline
//! mode is this type in YAML (or JSON).

use std::net::Ipv4Addr;

use ipnet::Ipv4Net;
use serde::{Deserialize, Serialize};

/// The state one gateway programs: this cluster, its exports and its peers.
///
/// Field names are camelCase and unknown fields are refused, so a misspelt field fails the
/// parse instead of being ignored. [`GatewayState::validate`] checks the values.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct GatewayState {
    /// This cluster's id (MCS `source-cluster`).
    pub cluster_id: String,
    /// This cluster's global CIDR: the export global IPs and the egress IPs come from it.
    pub global_cidr: Ipv4Net,
    /// This cluster's pod CIDR (it may overlap the peers' pod CIDRs: that is why there is a
    /// gateway).
    pub pod_cidr: Ipv4Net,
    /// This cluster's service CIDR (cluster IPs).
    pub service_cidr: Ipv4Net,
    /// Global IPs of this cluster that pods without a global IP of their own leave with when they
    /// reach a global CIDR (Globalnet's cluster egress IPs). A pod always leaves with the same
    /// one (chosen by a hash of its IP).
    pub egress_ips: Vec<Ipv4Addr>,
    /// This cluster's exports, each reachable at its global IP (none if absent or empty).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub exports: Vec<Export>,
    /// The other clusters of the clusterset (none if absent or empty).
    #[serde(default, deserialize_with = "null_as_empty")]
    pub peers: Vec<Peer>,
}

/// A list that YAML may leave empty (`peers:` with nothing after it is null).
fn null_as_empty<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: Deserialize<'de>,
{
    Ok(Option::<Vec<T>>::deserialize(deserializer)?.unwrap_or_default())
}

/// One exported service of this cluster, reachable from the clusterset at its global IP.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(try_from = "ExportFields", into = "ExportFields")]
pub struct Export {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub name: String,
    /// The global IP allocated to the export, from this cluster's global CIDR.
    pub global_ip: Ipv4Addr,
    /// Where traffic to the global IP goes.
    pub backend: Backend,
}

impl Export {
    /// `namespace/name`, how errors and logs name the export.
    pub fn key(&self) -> String {
        format!("{}/{}", self.namespace, self.name)
    }
}

/// Where the traffic to an export's global IP is sent (DNAT).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Backend {
    /// To the endpoints' pod IPs themselves, one chosen at random per connection: what a cluster
    /// without kube-proxy needs (and the lab). Each of these pods also leaves with the export's
    /// global IP when it reaches a global CIDR, so a Ceph daemon is seen at the address it
    /// advertises. An empty list is valid (every pod of the service is gone): the global IP
    /// then has no DNAT and connections to it are rejected (ICMP host unreachable).
    Endpoints(Vec<Ipv4Addr>),
    /// To the Service's cluster IP, which kube-proxy then balances over the endpoints:
    /// Globalnet's way. The pods keep leaving with the cluster's egress IPs.
    ClusterIp(Ipv4Addr),
}

/// The serialized form of [`Export`]: exactly one of `endpoints` and `clusterIp`.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
struct ExportFields {
    namespace: String,
    name: String,
    global_ip: Ipv4Addr,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    endpoints: Option<Vec<Ipv4Addr>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    cluster_ip: Option<Ipv4Addr>,
}

/// An export that names both backends or neither.
#[derive(Debug, thiserror::Error)]
#[error(
    "export {namespace}/{name} ({global_ip}) must have exactly one of `endpoints` (pod IPs) and `clusterIp`, it has {found}"
)]
pub struct BackendChoiceError {
    namespace: String,
    name: String,
    global_ip: Ipv4Addr,
    found: &'static str,
}

impl TryFrom<ExportFields> for Export {
    type Error = BackendChoiceError;

    fn try_from(fields: ExportFields) -> Result<Self, Self::Error> {
        let backend = match (fields.endpoints, fields.cluster_ip) {
            (Some(endpoints), None) => Backend::Endpoints(endpoints),
            (None, Some(cluster_ip)) => Backend::ClusterIp(cluster_ip),
            (endpoints, _) => {
                return Err(BackendChoiceError {
                    namespace: fields.namespace,
                    name: fields.name,
                    global_ip: fields.global_ip,
                    found: if endpoints.is_some() {
                        "both"
                    } else {
                        "neither"
                    },
                });
            }
        };
        Ok(Export {
            namespace: fields.namespace,
            name: fields.name,
            global_ip: fields.global_ip,
            backend,
        })
    }
}

impl From<Export> for ExportFields {
    fn from(export: Export) -> Self {
        let (endpoints, cluster_ip) = match export.backend {
            Backend::Endpoints(endpoints) => (Some(endpoints), None),
            Backend::ClusterIp(ip) => (None, Some(ip)),
        };
        ExportFields {
            namespace: export.namespace,
            name: export.name,
            global_ip: export.global_ip,
            endpoints,
            cluster_ip,
        }
    }
}

/// Another cluster of the clusterset, reached through its gateway.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Peer {
    /// The peer's cluster id.
    pub cluster_id: String,
    /// The peer's global CIDR, routed to its gateway.
    pub global_cidr: Ipv4Net,
    /// The peer gateway's address on the underlay (or tunnel) between the gateways: the next hop
    /// of the route to the peer's global CIDR. It must be on a network this gateway reaches
    /// directly.
    pub gateway: Ipv4Addr,
}

/// A state file that is not a [`GatewayState`].
#[derive(Debug, thiserror::Error)]
#[error("the gateway state is not valid YAML/JSON of the documented form")]
pub struct ParseError {
    #[source]
    source: serde_saphyr::Error,
}

impl GatewayState {
    /// Reads a state from its YAML (or JSON) text. The values are not checked: call
    /// [`GatewayState::validate`] (or [`crate::RuleSet::desired`], which does).
    pub fn parse(text: &str) -> Result<GatewayState, ParseError> {
        serde_saphyr::from_str(text).map_err(|source| ParseError { source })
    }
}

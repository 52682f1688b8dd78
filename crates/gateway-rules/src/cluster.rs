//! A gateway's [`GatewayState`] from the clusterset's objects, as `clusterset-gateway run
//! --broker-kubeconfig ...` reads them from the API servers:
//!
//! - this cluster's exports and their global IPs: the agent's `ExportRecord`s in this cluster's
//!   records namespace on the hub (the agent allocates the global IPs and publishes them there);
//! - each export's backends: the ready IPv4 endpoints of the Service's own EndpointSlices in
//!   this cluster (label `kubernetes.io/service-name`, not the slices the agent imported);
//! - the peers: the other clusters' `GatewayRecord`s on the hub (their global CIDR and gateway
//!   address), each taken only where only its cluster could have written it;
//! - this cluster's networks and egress IPs: the gateway's flags ([`ClusterNetworks`]).
//!
//! One bad object does not take the others' rules away: an export whose global IP is outside
//! this cluster's global CIDR, an endpoint outside the pod CIDR (a host-network pod), a record
//! or gateway record that cannot be read or was written by another cluster's credentials are
//! left out and reported ([`Skipped`]). So are peers a member could use to steer this node's
//! traffic: a global CIDR outside the clusterset's global range, or one that overlaps this
//! cluster's networks or an older peer's (the newer record is left out, the others routed).
//! What remains is checked by [`GatewayState::validate`] as a state file is.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use ipnet::{IpNet, Ipv4Net};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use mcs_controller::broker::{
    BrokerRecord, ForeignWriter, GatewayRecord, GatewayRecordError, GatewaySpec, SharedRecords,
    record_writer_check,
};
use mcs_types::labels::{
    CLUSTERSET_ENDPOINTSLICE_CONTROLLER, ENDPOINTSLICE_MANAGED_BY_LABEL,
    KUBERNETES_SERVICE_NAME_LABEL,
};
use mcs_types::{ClusterId, ServiceKey};

use crate::{Backend, Export, GatewayState, Peer};

/// This cluster's side of the gateway, from its flags: what no object of the clusterset says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNetworks {
    /// This cluster's id (the agent's `--cluster-id`).
    pub cluster_id: ClusterId,
    /// The clusterset's global range: every cluster's global CIDR is inside it (Globalnet's
    /// `globalnetCIDRRange`, 242.0.0.0/8 by default). A peer that publishes a global CIDR
    /// outside it is not routed: a member cannot steer this node's traffic to other addresses.
    pub global_range: Ipv4Net,
    /// This cluster's IPv4 global CIDR (the agent's `--global-cidr`).
    pub global_cidr: Ipv4Net,
    /// This cluster's pod CIDR.
    pub pod_cidr: Ipv4Net,
    /// This cluster's service CIDR.
    pub service_cidr: Ipv4Net,
    /// The cluster's egress IPs, from its global CIDR.
    pub egress_ips: Vec<Ipv4Addr>,
    /// This gateway's address on the network between the gateways, published for the peers.
    pub gateway_ip: Ipv4Addr,
}

impl ClusterNetworks {
    /// What this gateway publishes on the hub (its `GatewayRecord`'s spec).
    pub fn gateway_spec(&self) -> GatewaySpec {
        GatewaySpec {
            cluster_id: self.cluster_id.clone(),
            global_cidr: IpNet::V4(self.global_cidr),
            gateway_ip: IpAddr::V4(self.gateway_ip),
        }
    }
}

/// The objects a gateway's state is made of, as its watches hold them.
#[derive(Debug, Clone, Copy)]
pub struct ClusterObjects<'a> {
    /// The broker namespace on the hub (records go to `<broker>-<cluster>`).
    pub broker_namespace: &'a str,
    /// The `ExportRecord`s of this cluster's records namespace.
    pub own_records: &'a [&'a BrokerRecord],
    /// This cluster's EndpointSlices of Services (any namespace).
    pub local_slices: &'a [&'a EndpointSlice],
    /// Every cluster's `GatewayRecord` (this cluster's own is left out).
    pub gateways: &'a [&'a GatewayRecord],
}

/// An object left out of the state, and why: logged by the gateway, never fatal.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Skipped {
    /// An export record that cannot be read, or is not this cluster's.
    #[error("export record {name}: {reason}; its export gets no rules")]
    Record {
        /// The record's name.
        name: String,
        /// Why.
        reason: String,
    },
    /// An export without an IPv4 global IP in this cluster's global CIDR.
    #[error(
        "export {export} has no global IP in this cluster's global CIDR {global_cidr} (its record lists {listed}): it gets no rules; the gateway's --global-cidr must be the agent's"
    )]
    NoGlobalIp {
        /// `namespace/name`.
        export: String,
        /// The gateway's global CIDR.
        global_cidr: Ipv4Net,
        /// The global IPs of the record.
        listed: String,
    },
    /// An endpoint outside the pod CIDR (a host-network pod, or a wrong `--pod-cidr`).
    #[error(
        "export {export}: endpoint {endpoint} is outside the pod CIDR {pod_cidr} (a host-network pod, or the gateway's --pod-cidr is not the cluster's): left out of its backends"
    )]
    EndpointOutsidePodCidr {
        /// `namespace/name`.
        export: String,
        /// The endpoint's address.
        endpoint: Ipv4Addr,
        /// The gateway's pod CIDR.
        pod_cidr: Ipv4Net,
    },
    /// A gateway record that cannot be read or was written by another cluster's credentials.
    #[error("{0}")]
    Gateway(GatewayRecordError),
    /// A peer whose global CIDR is outside the clusterset's global range.
    #[error(
        "the gateway record of cluster {cluster} publishes global CIDR {global_cidr}, outside the clusterset's global range {global_range}: it is not routed; fix: give that cluster a global CIDR inside {global_range}, or set --global-range (the same on every gateway)"
    )]
    OutsideGlobalRange {
        /// The peer.
        cluster: ClusterId,
        /// Its global CIDR.
        global_cidr: Ipv4Net,
        /// The clusterset's global range.
        global_range: Ipv4Net,
    },
    /// A peer whose global CIDR overlaps this cluster's or an older peer's, or whose gateway
    /// address is inside a global CIDR or this cluster's pod or service CIDR.
    #[error(
        "the gateway record of cluster {cluster} ({global_cidr} via {gateway}) conflicts with {other}: it is not routed, the others are; fix: give each cluster its own global CIDR, and its gateway an address outside every global, pod and service CIDR"
    )]
    ConflictingPeer {
        /// The peer left out.
        cluster: ClusterId,
        /// Its global CIDR.
        global_cidr: Ipv4Net,
        /// Its gateway.
        gateway: Ipv4Addr,
        /// What it conflicts with, with the value (`this cluster's global CIDR 242.1.0.0/16`,
        /// `cluster north's global CIDR 242.3.0.0/16`, `the pod CIDR 10.244.0.0/16`).
        other: String,
    },
    /// A peer whose global CIDR or gateway is IPv6: the gateway programs IPv4 only.
    #[error(
        "the gateway of cluster {cluster} publishes {global_cidr} via {gateway_ip}: not IPv4, which is all this gateway routes; the peer is left out"
    )]
    NotIpv4 {
        /// The peer.
        cluster: ClusterId,
        /// Its global CIDR.
        global_cidr: IpNet,
        /// Its gateway.
        gateway_ip: IpAddr,
    },
}

/// The state computed from the objects, and what was left out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Assembled {
    /// The state to validate and program.
    pub state: GatewayState,
    /// The objects left out, each with its reason.
    pub skipped: Vec<Skipped>,
}

/// This cluster's gateway state from the clusterset's objects (see the module's text).
///
/// Exports are ordered by namespace and name, their endpoints by address, the peers by cluster
/// id: the same objects always give the same state, whatever order the watches delivered them
/// in.
pub fn gateway_state(networks: &ClusterNetworks, objects: ClusterObjects<'_>) -> Assembled {
    let mut skipped = Vec::new();
    let exports = exports(networks, objects, &mut skipped);
    let peers = peers(networks, objects, &mut skipped);
    Assembled {
        state: GatewayState {
            cluster_id: networks.cluster_id.to_string(),
            global_cidr: networks.global_cidr,
            pod_cidr: networks.pod_cidr,
            service_cidr: networks.service_cidr,
            egress_ips: networks.egress_ips.clone(),
            exports,
            peers,
        },
        skipped,
    }
}

/// This cluster's exports, from its records and its Services' slices, by namespace and name.
fn exports(
    networks: &ClusterNetworks,
    objects: ClusterObjects<'_>,
    skipped: &mut Vec<Skipped>,
) -> Vec<Export> {
    let backends = ready_endpoints(objects.local_slices);
    let mut exports = BTreeMap::new();
    for broker_record in objects.own_records {
        let name = broker_record.metadata.name.clone().unwrap_or_default();
        let record = match own_record(networks, objects.broker_namespace, broker_record) {
            Ok(record) => record,
            Err(reason) => {
                skipped.push(Skipped::Record { name, reason });
                continue;
            }
        };
        let key = &record.service_key;
        let export = format!("{}/{}", key.namespace, key.name);
        let global_ip = record.global_ips.iter().find_map(|ip| match ip {
            IpAddr::V4(v4) if networks.global_cidr.contains(v4) => Some(*v4),
            _ => None,
        });
        let Some(global_ip) = global_ip else {
            skipped.push(Skipped::NoGlobalIp {
                export,
                global_cidr: networks.global_cidr,
                listed: format!("{:?}", record.global_ips),
            });
            continue;
        };
        let mut endpoints = Vec::new();
        for endpoint in backends.get(key).into_iter().flatten() {
            if networks.pod_cidr.contains(endpoint) {
                endpoints.push(*endpoint);
            } else {
                skipped.push(Skipped::EndpointOutsidePodCidr {
                    export: export.clone(),
                    endpoint: *endpoint,
                    pod_cidr: networks.pod_cidr,
                });
            }
        }
        exports.insert(
            (key.namespace.clone(), key.name.clone()),
            Export {
                namespace: key.namespace.clone(),
                name: key.name.clone(),
                global_ip,
                backend: Backend::Endpoints(endpoints),
            },
        );
    }
    exports.into_values().collect()
}

/// The peers to route, from every cluster's gateway record, by cluster id.
fn peers(
    networks: &ClusterNetworks,
    objects: ClusterObjects<'_>,
    skipped: &mut Vec<Skipped>,
) -> Vec<Peer> {
    // Older records first (then by cluster id): when two conflict, the newer one is left out.
    let mut gateways: Vec<&&GatewayRecord> = objects.gateways.iter().collect();
    gateways.sort_by(|a, b| {
        (&a.metadata.creation_timestamp, &a.metadata.name)
            .cmp(&(&b.metadata.creation_timestamp, &b.metadata.name))
    });
    let mut peers: BTreeMap<String, Peer> = BTreeMap::new();
    for gateway in gateways {
        let spec = match gateway.checked_spec(objects.broker_namespace) {
            Ok(spec) => spec,
            Err(error) => {
                skipped.push(Skipped::Gateway(error));
                continue;
            }
        };
        if spec.cluster_id == networks.cluster_id {
            continue;
        }
        match (spec.global_cidr, spec.gateway_ip) {
            (IpNet::V4(global_cidr), IpAddr::V4(gateway)) => {
                let peer = Peer {
                    cluster_id: spec.cluster_id.to_string(),
                    global_cidr,
                    gateway,
                };
                match peer_problem(networks, &peer, peers.values()) {
                    Some(problem) => skipped.push(problem),
                    None => {
                        peers.insert(peer.cluster_id.clone(), peer);
                    }
                }
            }
            (global_cidr, gateway_ip) => skipped.push(Skipped::NotIpv4 {
                cluster: spec.cluster_id,
                global_cidr,
                gateway_ip,
            }),
        }
    }
    peers.into_values().collect()
}

/// Why `peer` must not be routed, if it must not: its global CIDR outside the clusterset's
/// global range, overlapping this cluster's global, pod or service CIDR or an accepted peer's,
/// or its gateway inside one of those.
fn peer_problem<'a>(
    networks: &ClusterNetworks,
    peer: &Peer,
    accepted: impl Iterator<Item = &'a Peer>,
) -> Option<Skipped> {
    let cluster = ClusterId::new(&peer.cluster_id).ok()?;
    if !networks.global_range.contains(&peer.global_cidr) {
        return Some(Skipped::OutsideGlobalRange {
            cluster,
            global_cidr: peer.global_cidr,
            global_range: networks.global_range,
        });
    }
    let conflict = |other: String| Skipped::ConflictingPeer {
        cluster: cluster.clone(),
        global_cidr: peer.global_cidr,
        gateway: peer.gateway,
        other,
    };
    let overlaps = |a: &Ipv4Net, b: &Ipv4Net| a.contains(&b.network()) || b.contains(&a.network());
    let mut ours = vec![
        (
            format!("this cluster's global CIDR {}", networks.global_cidr),
            networks.global_cidr,
        ),
        (
            format!("the pod CIDR {}", networks.pod_cidr),
            networks.pod_cidr,
        ),
        (
            format!("the service CIDR {}", networks.service_cidr),
            networks.service_cidr,
        ),
    ];
    ours.extend(accepted.map(|p| {
        (
            format!("cluster {}'s global CIDR {}", p.cluster_id, p.global_cidr),
            p.global_cidr,
        )
    }));
    for (what, cidr) in &ours {
        if overlaps(cidr, &peer.global_cidr) {
            return Some(conflict(what.clone()));
        }
        if cidr.contains(&peer.gateway) {
            return Some(conflict(format!("{what} (its gateway is inside it)")));
        }
    }
    if peer.global_cidr.contains(&peer.gateway) {
        return Some(conflict(
            "its own global CIDR (its gateway is inside it)".to_owned(),
        ));
    }
    None
}

/// The record, if it is readable, this cluster's, and stored in this cluster's records
/// namespace.
fn own_record<'a>(
    networks: &ClusterNetworks,
    broker_namespace: &str,
    broker_record: &'a BrokerRecord,
) -> Result<&'a mcs_controller::ExportRecord, String> {
    let record = broker_record.checked_record()?;
    if record.cluster_id != networks.cluster_id {
        return Err(format!(
            "it is cluster {}'s, not this gateway's cluster {}",
            record.cluster_id, networks.cluster_id
        ));
    }
    let namespace = broker_record.metadata.namespace.as_deref().unwrap_or("");
    record_writer_check(
        broker_namespace,
        SharedRecords::Ignore,
        namespace,
        &record.cluster_id,
    )
    .map_err(|error: ForeignWriter| error.to_string())?;
    Ok(record)
}

/// The ready IPv4 addresses of each Service's own EndpointSlices (not those the agent
/// imported), sorted and without duplicates.
fn ready_endpoints(slices: &[&EndpointSlice]) -> BTreeMap<ServiceKey, BTreeSet<Ipv4Addr>> {
    let mut by_service: BTreeMap<ServiceKey, BTreeSet<Ipv4Addr>> = BTreeMap::new();
    for slice in slices {
        let labels = slice.metadata.labels.as_ref();
        let label = |name: &str| labels.and_then(|labels| labels.get(name));
        let (Some(namespace), Some(service)) = (
            slice.metadata.namespace.as_deref(),
            label(KUBERNETES_SERVICE_NAME_LABEL),
        ) else {
            continue;
        };
        if label(ENDPOINTSLICE_MANAGED_BY_LABEL).map(String::as_str)
            == Some(CLUSTERSET_ENDPOINTSLICE_CONTROLLER)
            || slice.address_type != "IPv4"
        {
            continue;
        }
        let addresses = by_service
            .entry(ServiceKey::new(namespace, service))
            .or_default();
        for endpoint in slice
            .endpoints
            .iter()
            .filter(|e| mcs_controller::endpoint_ready(e))
        {
            addresses.extend(
                endpoint
                    .addresses
                    .iter()
                    .filter_map(|a| a.parse::<Ipv4Addr>().ok()),
            );
        }
    }
    by_service
}

#[cfg(test)]
mod tests;

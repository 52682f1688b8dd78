//! The checks of a [`GatewayState`]: every problem found, each naming the conflicting values and
//! the fix. A state with a problem is never programmed.

use std::collections::BTreeSet;
use std::fmt;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::state::{Backend, Export, GatewayState};

/// One thing wrong in a [`GatewayState`].
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// A cluster id is empty.
    #[error("the cluster id of {which} is empty; fix: give every cluster its MCS cluster id")]
    EmptyClusterId {
        /// `this cluster`, or `peer N` (N counting from 1 in `peers`) with its global CIDR.
        which: String,
    },
    /// Two clusters have the same id.
    #[error(
        "cluster id {cluster_id} is used twice (global CIDRs {first_cidr} and {second_cidr}); fix: each cluster of the clusterset has its own id: remove the duplicate peer or correct its id"
    )]
    DuplicateClusterId {
        /// The id.
        cluster_id: String,
        /// The global CIDR of the first cluster with it.
        first_cidr: Ipv4Net,
        /// The global CIDR of the second.
        second_cidr: Ipv4Net,
    },
    /// The global CIDRs of two clusters overlap.
    #[error(
        "the global CIDRs of clusters {first} ({first_cidr}) and {second} ({second_cidr}) overlap; fix: give every cluster a disjoint global CIDR (for example one /16 of 242.0.0.0/8 each)"
    )]
    GlobalCidrsOverlap {
        /// The first cluster's id.
        first: String,
        /// Its global CIDR.
        first_cidr: Ipv4Net,
        /// The second cluster's id.
        second: String,
        /// Its global CIDR.
        second_cidr: Ipv4Net,
    },
    /// A global CIDR overlaps this cluster's pod or service CIDR.
    #[error(
        "the global CIDR {global_cidr} of cluster {cluster} overlaps this cluster's {network} CIDR {local_cidr}; fix: choose global CIDRs outside the pod and service networks (242.0.0.0/8 is Globalnet's default)"
    )]
    GlobalCidrOverlapsLocal {
        /// The cluster whose global CIDR it is (this one or a peer).
        cluster: String,
        /// The global CIDR.
        global_cidr: Ipv4Net,
        /// `pod` or `service`.
        network: &'static str,
        /// The pod or service CIDR.
        local_cidr: Ipv4Net,
    },
    /// There is no egress IP.
    #[error(
        "egressIps is empty, so pods without a global IP of their own could not reach the peers; fix: list at least one address of the global CIDR {global_cidr}"
    )]
    NoEgressIp {
        /// This cluster's global CIDR.
        global_cidr: Ipv4Net,
    },
    /// An egress IP is listed twice.
    #[error("egress IP {ip} is listed twice; fix: list each egress IP once")]
    DuplicateEgressIp {
        /// The address.
        ip: Ipv4Addr,
    },
    /// An egress IP is outside this cluster's global CIDR.
    #[error(
        "egress IP {ip} is outside this cluster's global CIDR {global_cidr}; fix: take egress IPs from {global_cidr}"
    )]
    EgressIpOutsideGlobalCidr {
        /// The address.
        ip: Ipv4Addr,
        /// This cluster's global CIDR.
        global_cidr: Ipv4Net,
    },
    /// An egress IP is also an export's global IP.
    #[error(
        "egress IP {ip} is also the global IP of export {export}; fix: give the export another global IP or drop {ip} from egressIps"
    )]
    EgressIpIsExported {
        /// The address.
        ip: Ipv4Addr,
        /// The export (`namespace/name`).
        export: String,
    },
    /// Two exports have the same namespace and name.
    #[error(
        "export {export} is listed twice (global IPs {first_ip} and {second_ip}); fix: list each export once"
    )]
    DuplicateExport {
        /// The export (`namespace/name`).
        export: String,
        /// The first entry's global IP.
        first_ip: Ipv4Addr,
        /// The second entry's global IP.
        second_ip: Ipv4Addr,
    },
    /// An export's global IP is outside this cluster's global CIDR.
    #[error(
        "the global IP {ip} of export {export} is outside this cluster's global CIDR {global_cidr}; fix: allocate it from {global_cidr}"
    )]
    GlobalIpOutsideGlobalCidr {
        /// The export (`namespace/name`).
        export: String,
        /// Its global IP.
        ip: Ipv4Addr,
        /// This cluster's global CIDR.
        global_cidr: Ipv4Net,
    },
    /// Two exports have the same global IP.
    #[error(
        "exports {first} and {second} have the same global IP {ip}; fix: give each export its own global IP"
    )]
    DuplicateGlobalIp {
        /// The address.
        ip: Ipv4Addr,
        /// The first export (`namespace/name`).
        first: String,
        /// The second.
        second: String,
    },
    /// An endpoint is outside this cluster's pod CIDR.
    #[error(
        "endpoint {endpoint} of export {export} is outside this cluster's pod CIDR {pod_cidr}; fix: list the pods' IPs (from {pod_cidr}), or use `clusterIp` for a Service"
    )]
    EndpointOutsidePodCidr {
        /// The export (`namespace/name`).
        export: String,
        /// The endpoint.
        endpoint: Ipv4Addr,
        /// This cluster's pod CIDR.
        pod_cidr: Ipv4Net,
    },
    /// An endpoint is listed twice in one export.
    #[error(
        "endpoint {endpoint} is listed twice in export {export}; fix: list each pod IP once (a duplicate would get twice the share of connections)"
    )]
    DuplicateEndpoint {
        /// The export (`namespace/name`).
        export: String,
        /// The endpoint.
        endpoint: Ipv4Addr,
    },
    /// A cluster IP is outside this cluster's service CIDR.
    #[error(
        "cluster IP {cluster_ip} of export {export} is outside this cluster's service CIDR {service_cidr}; fix: use the Service's cluster IP (from {service_cidr}), or `endpoints` for pod IPs"
    )]
    ClusterIpOutsideServiceCidr {
        /// The export (`namespace/name`).
        export: String,
        /// The cluster IP.
        cluster_ip: Ipv4Addr,
        /// This cluster's service CIDR.
        service_cidr: Ipv4Net,
    },
    /// A peer's gateway address is inside a global CIDR or this cluster's pod or service CIDR,
    /// where the routes and the NAT would capture it.
    #[error(
        "the gateway {gateway} of peer {peer} is inside {what} {cidr}; fix: use the peer gateway's underlay or tunnel address, outside every global CIDR and this cluster's pod and service CIDRs"
    )]
    PeerGatewayInsideCidr {
        /// The peer's id.
        peer: String,
        /// Its gateway address.
        gateway: Ipv4Addr,
        /// Which network: `the global CIDR of cluster X`, `this cluster's pod CIDR`, ...
        what: String,
        /// That network.
        cidr: Ipv4Net,
    },
}

/// A state that must not be programmed: every problem found in it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InvalidState {
    /// The problems, in the order the checks found them.
    pub problems: Vec<Problem>,
}

impl fmt::Display for InvalidState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "the gateway state is invalid ({} problem",
            self.problems.len()
        )?;
        if self.problems.len() != 1 {
            f.write_str("s")?;
        }
        f.write_str(")")?;
        for problem in &self.problems {
            write!(f, "\n- {problem}")?;
        }
        Ok(())
    }
}

impl std::error::Error for InvalidState {}

impl GatewayState {
    /// Checks the state; `Err` lists every problem, each naming the conflicting values and the
    /// fix.
    ///
    /// An export with an empty endpoint list is valid: its global IP gets no DNAT and
    /// connections to it are rejected, like those to any address of the global CIDR that no
    /// export serves.
    pub fn validate(&self) -> Result<(), InvalidState> {
        let mut problems = Vec::new();
        self.check_clusters(&mut problems);
        self.check_egress(&mut problems);
        self.check_exports(&mut problems);
        self.check_peer_gateways(&mut problems);
        if problems.is_empty() {
            Ok(())
        } else {
            Err(InvalidState { problems })
        }
    }

    /// Every cluster of the state, this one first: id and global CIDR.
    fn clusters(&self) -> impl Iterator<Item = (&str, Ipv4Net)> {
        std::iter::once((self.cluster_id.as_str(), self.global_cidr)).chain(
            self.peers
                .iter()
                .map(|p| (p.cluster_id.as_str(), p.global_cidr)),
        )
    }

    fn check_clusters(&self, problems: &mut Vec<Problem>) {
        if self.cluster_id.is_empty() {
            problems.push(Problem::EmptyClusterId {
                which: "this cluster".to_owned(),
            });
        }
        for (index, peer) in self.peers.iter().enumerate() {
            if peer.cluster_id.is_empty() {
                problems.push(Problem::EmptyClusterId {
                    which: format!("peer {} (global CIDR {})", index + 1, peer.global_cidr),
                });
            }
        }
        let clusters: Vec<(&str, Ipv4Net)> = self.clusters().collect();
        for (i, (first, first_cidr)) in clusters.iter().enumerate() {
            for (second, second_cidr) in &clusters[i + 1..] {
                if !first.is_empty() && first == second {
                    problems.push(Problem::DuplicateClusterId {
                        cluster_id: (*first).to_owned(),
                        first_cidr: *first_cidr,
                        second_cidr: *second_cidr,
                    });
                }
                if overlap(*first_cidr, *second_cidr) {
                    problems.push(Problem::GlobalCidrsOverlap {
                        first: (*first).to_owned(),
                        first_cidr: *first_cidr,
                        second: (*second).to_owned(),
                        second_cidr: *second_cidr,
                    });
                }
            }
        }
        for (cluster, global_cidr) in clusters {
            for (network, local_cidr) in [("pod", self.pod_cidr), ("service", self.service_cidr)] {
                if overlap(global_cidr, local_cidr) {
                    problems.push(Problem::GlobalCidrOverlapsLocal {
                        cluster: cluster.to_owned(),
                        global_cidr,
                        network,
                        local_cidr,
                    });
                }
            }
        }
    }

    fn check_egress(&self, problems: &mut Vec<Problem>) {
        if self.egress_ips.is_empty() {
            problems.push(Problem::NoEgressIp {
                global_cidr: self.global_cidr,
            });
        }
        let mut seen = BTreeSet::new();
        for ip in &self.egress_ips {
            if !seen.insert(*ip) {
                problems.push(Problem::DuplicateEgressIp { ip: *ip });
            }
            if !self.global_cidr.contains(ip) {
                problems.push(Problem::EgressIpOutsideGlobalCidr {
                    ip: *ip,
                    global_cidr: self.global_cidr,
                });
            }
        }
    }

    fn check_exports(&self, problems: &mut Vec<Problem>) {
        // Duplicates are found by sorting (stable, so "first" is the first in the file).
        let mut by_key: Vec<&Export> = self.exports.iter().collect();
        by_key.sort_by(|a, b| (&a.namespace, &a.name).cmp(&(&b.namespace, &b.name)));
        for pair in by_key.windows(2) {
            if let [first, second] = pair
                && (&first.namespace, &first.name) == (&second.namespace, &second.name)
            {
                problems.push(Problem::DuplicateExport {
                    export: second.key(),
                    first_ip: first.global_ip,
                    second_ip: second.global_ip,
                });
            }
        }
        let mut by_ip: Vec<&Export> = self.exports.iter().collect();
        by_ip.sort_by_key(|export| export.global_ip);
        for pair in by_ip.windows(2) {
            if let [first, second] = pair
                && first.global_ip == second.global_ip
            {
                problems.push(Problem::DuplicateGlobalIp {
                    ip: second.global_ip,
                    first: first.key(),
                    second: second.key(),
                });
            }
        }
        for export in &self.exports {
            if !self.global_cidr.contains(&export.global_ip) {
                problems.push(Problem::GlobalIpOutsideGlobalCidr {
                    export: export.key(),
                    ip: export.global_ip,
                    global_cidr: self.global_cidr,
                });
            }
            if self.egress_ips.contains(&export.global_ip) {
                problems.push(Problem::EgressIpIsExported {
                    ip: export.global_ip,
                    export: export.key(),
                });
            }
            self.check_backend(export, problems);
        }
    }

    fn check_backend(&self, export: &Export, problems: &mut Vec<Problem>) {
        match &export.backend {
            Backend::Endpoints(endpoints) => {
                let mut sorted = endpoints.clone();
                sorted.sort_unstable();
                for pair in sorted.windows(2) {
                    if let [first, second] = pair
                        && first == second
                    {
                        problems.push(Problem::DuplicateEndpoint {
                            export: export.key(),
                            endpoint: *second,
                        });
                    }
                }
                for endpoint in endpoints {
                    if !self.pod_cidr.contains(endpoint) {
                        problems.push(Problem::EndpointOutsidePodCidr {
                            export: export.key(),
                            endpoint: *endpoint,
                            pod_cidr: self.pod_cidr,
                        });
                    }
                }
            }
            Backend::ClusterIp(cluster_ip) => {
                if !self.service_cidr.contains(cluster_ip) {
                    problems.push(Problem::ClusterIpOutsideServiceCidr {
                        export: export.key(),
                        cluster_ip: *cluster_ip,
                        service_cidr: self.service_cidr,
                    });
                }
            }
        }
    }

    fn check_peer_gateways(&self, problems: &mut Vec<Problem>) {
        for peer in &self.peers {
            let mut networks: Vec<(String, Ipv4Net)> = self
                .clusters()
                .map(|(id, cidr)| (format!("the global CIDR of cluster {id}"), cidr))
                .collect();
            networks.push(("this cluster's pod CIDR".to_owned(), self.pod_cidr));
            networks.push(("this cluster's service CIDR".to_owned(), self.service_cidr));
            for (what, cidr) in networks {
                if cidr.contains(&peer.gateway) {
                    problems.push(Problem::PeerGatewayInsideCidr {
                        peer: peer.cluster_id.clone(),
                        gateway: peer.gateway,
                        what,
                        cidr,
                    });
                }
            }
        }
    }
}

/// Whether two networks share an address (one contains the other, since both are prefixes).
pub(crate) fn overlap(a: Ipv4Net, b: Ipv4Net) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

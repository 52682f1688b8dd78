//! The desired rule set of one gateway: the contents of the nftables table `ip clusterset_gw`
//! (its sets, maps and chains) and the routes to the peers, as a typed value computed from a
//! [`GatewayState`].

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::Ipv4Addr;

use ipnet::Ipv4Net;

use crate::state::{Backend, GatewayState};
use crate::validate::InvalidState;

/// The nftables table the gateway owns (family `ip`); no other table is ever touched.
pub const TABLE: &str = "clusterset_gw";

/// A route the gateway needs: a peer's global CIDR through the peer's gateway.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Route {
    /// The peer's global CIDR.
    pub destination: Ipv4Net,
    /// The peer gateway's address (the next hop).
    pub via: Ipv4Addr,
}

/// The named sets and maps of the table: every lookup of the data plane is one of these, a
/// hash (or interval tree) lookup whatever the number of exports.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Collection {
    /// `set global_cidrs`: every global CIDR of the clusterset, ours included (hairpin).
    /// Only connections to these are source-translated.
    GlobalCidrs,
    /// `map global_to_backend`: an export's global IP to its one backend (pod IP).
    GlobalToBackend,
    /// `map multi_endpoint_exports`: the global IP of an export with N endpoints (N > 1) to
    /// the chain `one_of_<N>`, which picks one of them per connection (a verdict map).
    MultiEndpointExports,
    /// `map export_endpoints`: `global IP . i` to the i-th endpoint (sorted, from 0) of an
    /// export with several endpoints; `one_of_<N>` looks up `ip daddr . numgen random mod N`.
    ExportEndpoints,
    /// `map pod_to_global`: the pod IP of an export's endpoint to the export's global IP, the
    /// source it leaves with.
    PodToGlobal,
}

impl Collection {
    /// Every collection, in the order the script declares them.
    pub const ALL: [Collection; 5] = [
        Collection::GlobalCidrs,
        Collection::GlobalToBackend,
        Collection::MultiEndpointExports,
        Collection::ExportEndpoints,
        Collection::PodToGlobal,
    ];

    /// Its name in the table.
    pub fn name(self) -> &'static str {
        match self {
            Collection::GlobalCidrs => "global_cidrs",
            Collection::GlobalToBackend => "global_to_backend",
            Collection::MultiEndpointExports => "multi_endpoint_exports",
            Collection::ExportEndpoints => "export_endpoints",
            Collection::PodToGlobal => "pod_to_global",
        }
    }

    /// `set` or `map` and its type, as declared.
    fn declaration(self) -> &'static str {
        match self {
            Collection::GlobalCidrs => "set global_cidrs {\n\t\ttype ipv4_addr\n\t\tflags interval",
            Collection::GlobalToBackend => {
                "map global_to_backend {\n\t\ttype ipv4_addr : ipv4_addr"
            }
            Collection::MultiEndpointExports => {
                "map multi_endpoint_exports {\n\t\ttype ipv4_addr : verdict"
            }
            // A key of an IPv4 address and a 32-bit number, as `numgen` gives it: `typeof`
            // takes an expression for its type only (its `mod 1` is not used; the chains
            // `one_of_<N>` choose N).
            Collection::ExportEndpoints => {
                "map export_endpoints {\n\t\ttypeof ip daddr . numgen random mod 1 : ip daddr"
            }
            Collection::PodToGlobal => "map pod_to_global {\n\t\ttype ipv4_addr : ipv4_addr",
        }
    }
}

/// One element of a [`Collection`].
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Element {
    /// A prefix of `global_cidrs`.
    Prefix(Ipv4Net),
    /// `key : value` of `global_to_backend` or `pod_to_global`.
    Mapping(Ipv4Addr, Ipv4Addr),
    /// `global : goto one_of_<endpoints>` of `multi_endpoint_exports`.
    GotoOneOf(Ipv4Addr, usize),
    /// `global . index : endpoint` of `export_endpoints`.
    Endpoint {
        /// The export's global IP.
        global: Ipv4Addr,
        /// The endpoint's place among the export's endpoints (sorted), from 0.
        index: u32,
        /// The endpoint (pod IP).
        endpoint: Ipv4Addr,
    },
}

impl Element {
    /// The element's key (what `delete element` names).
    pub fn key(&self) -> ElementKey {
        match self {
            Element::Prefix(net) => ElementKey::Prefix(*net),
            Element::Mapping(key, _) | Element::GotoOneOf(key, _) => ElementKey::Address(*key),
            Element::Endpoint { global, index, .. } => ElementKey::Endpoint(*global, *index),
        }
    }
}

/// The key of an [`Element`]: within one collection, every key is of the same kind.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ElementKey {
    /// A prefix of `global_cidrs`.
    Prefix(Ipv4Net),
    /// An address: a global IP or a pod IP.
    Address(Ipv4Addr),
    /// `global . index` of `export_endpoints`.
    Endpoint(Ipv4Addr, u32),
}

impl fmt::Display for ElementKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ElementKey::Prefix(net) => write!(f, "{net}"),
            ElementKey::Address(ip) => write!(f, "{ip}"),
            ElementKey::Endpoint(global, index) => write!(f, "{global} . {index}"),
        }
    }
}

impl fmt::Display for Element {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Element::Prefix(net) => write!(f, "{net}"),
            Element::Mapping(key, value) => write!(f, "{key} : {value}"),
            Element::GotoOneOf(global, endpoints) => {
                write!(f, "{global} : goto {}", ChainName::OneOf(*endpoints))
            }
            Element::Endpoint {
                global,
                index,
                endpoint,
            } => write!(f, "{global} . {index} : {endpoint}"),
        }
    }
}

/// A chain of the table.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ChainName {
    /// `one_of_<N>`: the DNAT of the exports with N endpoints (N > 1) to one of them, for every
    /// export with that many.
    OneOf(usize),
    /// `prerouting` (nat, dstnat): ingress DNAT.
    Prerouting,
    /// `postrouting` (nat, srcnat): egress SNAT.
    Postrouting,
    /// `forward` (filter): rejects what reaches our global CIDR untranslated.
    Forward,
}

impl fmt::Display for ChainName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ChainName::OneOf(endpoints) => write!(f, "one_of_{endpoints}"),
            ChainName::Prerouting => f.write_str("prerouting"),
            ChainName::Postrouting => f.write_str("postrouting"),
            ChainName::Forward => f.write_str("forward"),
        }
    }
}

/// One rule of a chain.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum Rule {
    /// `ip daddr vmap @multi_endpoint_exports`: an export with several endpoints goes to its
    /// chain.
    GotoMultiEndpointExport,
    /// `dnat ip to ip daddr map @global_to_backend`: an export with one backend; a global IP
    /// that is not in the map ends the rule (no match).
    DnatToSingleBackend,
    /// `dnat ip to ip daddr . numgen random mod N map @export_endpoints`: one of the N
    /// endpoints of the export addressed, at random, per connection.
    DnatToOneOf(usize),
    /// `ct original ip daddr != @global_cidrs return`: only connections first addressed to a
    /// global CIDR are source-translated (so hairpin traffic, DNATed to a local pod, still is).
    ReturnUnlessToGlobalCidr,
    /// `snat ip to ip saddr map @pod_to_global`: an export's pod leaves with its global IP.
    SnatExportedPod,
    /// `ip saddr <pod CIDR> snat ip to <egress>` (or `jhash ip saddr mod N map {...}` for
    /// several egress IPs, so a pod always gets the same one): the other pods.
    SnatPodToEgress {
        /// This cluster's pod CIDR.
        pod_cidr: Ipv4Net,
        /// The egress IPs, sorted.
        egress_ips: Vec<Ipv4Addr>,
    },
    /// `ip daddr <global CIDR> reject with icmp type host-unreachable`: a connection to an
    /// address of our global CIDR that nothing translated (no export, no endpoint) fails at
    /// once instead of leaving the gateway.
    RejectUntranslated {
        /// This cluster's global CIDR.
        global_cidr: Ipv4Net,
    },
}

impl Rule {
    /// The addresses and networks the rule names.
    pub fn addresses(&self) -> Vec<Ipv4Net> {
        match self {
            Rule::SnatPodToEgress {
                pod_cidr,
                egress_ips,
            } => std::iter::once(*pod_cidr)
                .chain(egress_ips.iter().map(|ip| host(*ip)))
                .collect(),
            Rule::RejectUntranslated { global_cidr } => vec![*global_cidr],
            Rule::GotoMultiEndpointExport
            | Rule::DnatToOneOf(_)
            | Rule::DnatToSingleBackend
            | Rule::ReturnUnlessToGlobalCidr
            | Rule::SnatExportedPod => Vec::new(),
        }
    }
}

/// `0 : a, 1 : b, ...`: the anonymous map of a `numgen` or `jhash` choice.
fn numbered(addresses: &[Ipv4Addr]) -> String {
    addresses
        .iter()
        .enumerate()
        .map(|(i, ip)| format!("{i} : {ip}"))
        .collect::<Vec<_>>()
        .join(", ")
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Rule::GotoMultiEndpointExport => write!(
                f,
                "ip daddr vmap @{}",
                Collection::MultiEndpointExports.name()
            ),
            Rule::DnatToSingleBackend => write!(
                f,
                "dnat ip to ip daddr map @{}",
                Collection::GlobalToBackend.name()
            ),
            Rule::DnatToOneOf(endpoints) => write!(
                f,
                "dnat ip to ip daddr . numgen random mod {endpoints} map @{}",
                Collection::ExportEndpoints.name()
            ),
            Rule::ReturnUnlessToGlobalCidr => write!(
                f,
                "ct original ip daddr != @{} return",
                Collection::GlobalCidrs.name()
            ),
            Rule::SnatExportedPod => write!(
                f,
                "snat ip to ip saddr map @{}",
                Collection::PodToGlobal.name()
            ),
            Rule::SnatPodToEgress {
                pod_cidr,
                egress_ips,
            } => match egress_ips.as_slice() {
                [one] => write!(f, "ip saddr {pod_cidr} snat ip to {one}"),
                many => write!(
                    f,
                    "ip saddr {pod_cidr} snat ip to jhash ip saddr mod {} seed 0x0 map {{ {} }}",
                    many.len(),
                    numbered(many)
                ),
            },
            Rule::RejectUntranslated { global_cidr } => write!(
                f,
                "ip daddr {global_cidr} reject with icmp type host-unreachable"
            ),
        }
    }
}

/// The hook of a base chain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Hook {
    /// `type nat hook prerouting priority dstnat`.
    NatPrerouting,
    /// `type nat hook postrouting priority srcnat`.
    NatPostrouting,
    /// `type filter hook forward priority filter`.
    FilterForward,
}

impl fmt::Display for Hook {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Hook::NatPrerouting => "type nat hook prerouting priority dstnat; policy accept;",
            Hook::NatPostrouting => "type nat hook postrouting priority srcnat; policy accept;",
            Hook::FilterForward => "type filter hook forward priority filter; policy accept;",
        })
    }
}

/// A chain: its name, its hook if it is a base chain, its rules in order.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct Chain {
    /// The name.
    pub name: ChainName,
    /// The hook of a base chain; `None` for a chain reached by `goto`.
    pub hook: Option<Hook>,
    /// The rules, in order.
    pub rules: Vec<Rule>,
}

/// What the gateway does with one export's global IP.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Ingress {
    /// DNAT to this one address (a pod IP).
    Single(Ipv4Addr),
    /// DNAT to one of these pod IPs per connection (sorted).
    OneOf(Vec<Ipv4Addr>),
    /// No DNAT of ours: kube-proxy serves the global IP, which is an `externalIPs` entry of the
    /// Service with this cluster IP.
    KubeProxy(Ipv4Addr),
    /// No endpoint: no DNAT, connections are rejected.
    Rejected,
}

/// The desired table `ip clusterset_gw` and routes of one gateway: a pure value, ordered
/// deterministically (every collection sorted), so the same state always gives the same script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RuleSet {
    global_cidr: Ipv4Net,
    pod_cidr: Ipv4Net,
    egress_ips: Vec<Ipv4Addr>,
    global_cidrs: BTreeSet<Ipv4Net>,
    global_to_backend: BTreeMap<Ipv4Addr, Ipv4Addr>,
    multi_endpoint_exports: BTreeMap<Ipv4Addr, Vec<Ipv4Addr>>,
    pod_to_global: BTreeMap<Ipv4Addr, Ipv4Addr>,
    ingress: BTreeMap<Ipv4Addr, Ingress>,
    routes: Vec<Route>,
}

impl RuleSet {
    /// The rule set that programs `state`, after [`GatewayState::validate`]: an invalid state
    /// gives no rule set at all.
    ///
    /// ```
    /// use gateway_rules::{GatewayState, RuleSet};
    ///
    /// let state = GatewayState::parse(
    ///     "
    /// clusterId: east
    /// globalCidr: 242.1.0.0/16
    /// podCidr: 10.244.0.0/24
    /// serviceCidr: 10.96.0.0/16
    /// egressIps: [242.1.255.254]
    /// exports:
    ///   - { namespace: rook-ceph, name: rook-ceph-mon-a, globalIp: 242.1.0.1, endpoints: [10.244.0.10] }
    /// peers:
    ///   - { clusterId: west, globalCidr: 242.2.0.0/16, gateway: 172.31.255.2 }
    /// ",
    /// )?;
    /// let rules = RuleSet::desired(&state)?;
    /// let script = rules.to_nft_script();
    /// assert!(script.contains("242.1.0.1 : 10.244.0.10")); // ingress: global IP -> pod
    /// assert!(script.contains("10.244.0.10 : 242.1.0.1")); // egress: the pod leaves with it
    /// assert_eq!(rules.routes()[0].to_string(), "242.2.0.0/16 via 172.31.255.2");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn desired(state: &GatewayState) -> Result<RuleSet, InvalidState> {
        state.validate()?;
        let mut exports: Vec<_> = state.exports.iter().collect();
        exports.sort_by_key(|export| export.global_ip);
        let mut rules = RuleSet {
            global_cidr: state.global_cidr,
            pod_cidr: state.pod_cidr,
            egress_ips: sorted(state.egress_ips.clone()),
            global_cidrs: std::iter::once(state.global_cidr)
                .chain(state.peers.iter().map(|peer| peer.global_cidr))
                .collect(),
            global_to_backend: BTreeMap::new(),
            multi_endpoint_exports: BTreeMap::new(),
            pod_to_global: BTreeMap::new(),
            ingress: BTreeMap::new(),
            routes: sorted(
                state
                    .peers
                    .iter()
                    .map(|peer| Route {
                        destination: peer.global_cidr,
                        via: peer.gateway,
                    })
                    .collect(),
            ),
        };
        for export in exports {
            let global = export.global_ip;
            let ingress = match &export.backend {
                Backend::ClusterIp(cluster_ip) => Ingress::KubeProxy(*cluster_ip),
                Backend::Endpoints(endpoints) => {
                    let endpoints = sorted(endpoints.clone());
                    for endpoint in &endpoints {
                        // Exports are visited by global IP: a pod behind several exports
                        // leaves with the lowest of their global IPs.
                        rules.pod_to_global.entry(*endpoint).or_insert(global);
                    }
                    match endpoints.as_slice() {
                        [] => Ingress::Rejected,
                        [one] => {
                            rules.global_to_backend.insert(global, *one);
                            Ingress::Single(*one)
                        }
                        _ => {
                            rules
                                .multi_endpoint_exports
                                .insert(global, endpoints.clone());
                            Ingress::OneOf(endpoints)
                        }
                    }
                }
            };
            rules.ingress.insert(global, ingress);
        }
        Ok(rules)
    }

    /// What happens to each export's global IP, by global IP: exactly one entry per export.
    pub fn ingress(&self) -> &BTreeMap<Ipv4Addr, Ingress> {
        &self.ingress
    }

    /// The routes to the peers' global CIDRs, sorted.
    pub fn routes(&self) -> &[Route] {
        &self.routes
    }

    /// The elements of one collection, sorted.
    pub fn elements(&self, collection: Collection) -> Vec<Element> {
        match collection {
            Collection::GlobalCidrs => self
                .global_cidrs
                .iter()
                .map(|net| Element::Prefix(*net))
                .collect(),
            Collection::GlobalToBackend => self
                .global_to_backend
                .iter()
                .map(|(k, v)| Element::Mapping(*k, *v))
                .collect(),
            Collection::MultiEndpointExports => self
                .multi_endpoint_exports
                .iter()
                .map(|(k, endpoints)| Element::GotoOneOf(*k, endpoints.len()))
                .collect(),
            Collection::ExportEndpoints => self
                .multi_endpoint_exports
                .iter()
                .flat_map(|(global, endpoints)| {
                    (0u32..)
                        .zip(endpoints)
                        .map(|(index, endpoint)| Element::Endpoint {
                            global: *global,
                            index,
                            endpoint: *endpoint,
                        })
                })
                .collect(),
            Collection::PodToGlobal => self
                .pod_to_global
                .iter()
                .map(|(k, v)| Element::Mapping(*k, *v))
                .collect(),
        }
    }

    /// The base chains (`prerouting`, `postrouting`, `forward`): the same for every set of
    /// exports and peers, they change only with the pod CIDR, the global CIDR or the egress IPs.
    pub fn base_chains(&self) -> Vec<Chain> {
        vec![
            Chain {
                name: ChainName::Prerouting,
                hook: Some(Hook::NatPrerouting),
                rules: vec![Rule::GotoMultiEndpointExport, Rule::DnatToSingleBackend],
            },
            Chain {
                name: ChainName::Postrouting,
                hook: Some(Hook::NatPostrouting),
                rules: vec![
                    Rule::ReturnUnlessToGlobalCidr,
                    Rule::SnatExportedPod,
                    Rule::SnatPodToEgress {
                        pod_cidr: self.pod_cidr,
                        egress_ips: self.egress_ips.clone(),
                    },
                ],
            },
            Chain {
                name: ChainName::Forward,
                hook: Some(Hook::FilterForward),
                rules: vec![Rule::RejectUntranslated {
                    global_cidr: self.global_cidr,
                }],
            },
        ]
    }

    /// The chains `one_of_<N>`, one for each number N of endpoints that an export with several
    /// has, by N.
    pub fn export_chains(&self) -> Vec<Chain> {
        self.endpoint_counts()
            .into_iter()
            .map(one_of_chain)
            .collect()
    }

    /// Every chain: the `one_of_<N>` chains, then the base chains.
    pub fn chains(&self) -> Vec<Chain> {
        let mut chains = self.export_chains();
        chains.extend(self.base_chains());
        chains
    }

    /// How many rules the table has: six, plus one for each number of endpoints that an export
    /// with several has (one for any number of exports with three).
    pub fn rule_count(&self) -> usize {
        self.chains().iter().map(|chain| chain.rules.len()).sum()
    }

    /// How many set and map elements the table has.
    pub fn element_count(&self) -> usize {
        Collection::ALL
            .iter()
            .map(|c| self.elements(*c).len())
            .sum()
    }

    /// Every address and network that a rule or an element names (routes aside).
    pub fn addresses(&self) -> Vec<Ipv4Net> {
        let mut out: Vec<Ipv4Net> = self
            .chains()
            .iter()
            .flat_map(|chain| chain.rules.iter().flat_map(Rule::addresses))
            .collect();
        for collection in Collection::ALL {
            for element in self.elements(collection) {
                match element {
                    Element::Prefix(net) => out.push(net),
                    Element::Mapping(k, v)
                    | Element::Endpoint {
                        global: k,
                        endpoint: v,
                        ..
                    } => out.extend([host(k), host(v)]),
                    Element::GotoOneOf(k, _) => out.push(host(k)),
                }
            }
        }
        out
    }

    /// The numbers of endpoints of the exports with several, each once, sorted.
    pub(crate) fn endpoint_counts(&self) -> BTreeSet<usize> {
        self.multi_endpoint_exports.values().map(Vec::len).collect()
    }
}

/// The chain that sends a connection to one of the N endpoints of the export addressed.
pub(crate) fn one_of_chain(endpoints: usize) -> Chain {
    Chain {
        name: ChainName::OneOf(endpoints),
        hook: None,
        rules: vec![Rule::DnatToOneOf(endpoints)],
    }
}

impl fmt::Display for Route {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} via {}", self.destination, self.via)
    }
}

fn sorted<T: Ord>(mut items: Vec<T>) -> Vec<T> {
    items.sort();
    items
}

/// `ip` as a /32 network.
pub(crate) fn host(ip: Ipv4Addr) -> Ipv4Net {
    Ipv4Net::from(ip)
}

/// The declaration line of a collection, for the script.
pub(crate) fn declaration(collection: Collection) -> &'static str {
    collection.declaration()
}

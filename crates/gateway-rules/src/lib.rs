//! The clusterset gateway's data plane as a pure value.
//!
//! A member cluster's [`GatewayState`] (its global, pod and service CIDRs, its egress IPs, its
//! exports with their global IPs and backends, its peers' global CIDRs and gateways) is checked
//! by [`GatewayState::validate`] and turned by [`RuleSet::desired`] into the one nftables table
//! the gateway owns, `ip clusterset_gw`, and the routes to the peers, Globalnet style:
//!
//! - ingress: an export's global IP is DNATed to its pod (map `global_to_backend`) or, with N
//!   endpoints, to one of them per connection (verdict map `multi_endpoint_exports` to the chain
//!   `one_of_<N>`, which looks up `ip daddr . numgen random mod N` in map `export_endpoints`;
//!   one such chain for all exports with N endpoints); an export served by kube-proxy
//!   (`clusterIp`) is left to kube-proxy, which DNATs it as an `externalIPs` entry of its
//!   Service;
//! - egress: a connection from a pod to a global CIDR (a peer's, or ours: hairpin) leaves with
//!   the pod's export's global IP (map `pod_to_global`) or else one of the cluster's egress IPs;
//!   nothing else is translated;
//! - an address of our global CIDR that nothing DNATed is rejected at once;
//! - routes: each peer's global CIDR via its gateway.
//!
//! Every lookup is a set or map lookup, so the cost per packet does not grow with the number of
//! exports. [`RuleSet::to_nft_script`] renders one atomic transaction that replaces the table
//! (no other table is touched); [`RuleSet::delta_to`] the element changes between two rule
//! sets, also one transaction. No IO: `clusterset-gateway` applies them.
//!
//! [`cluster::gateway_state`] builds the state from the clusterset's objects (the agent's
//! export records, the Services' EndpointSlices, the other gateways' records), as the gateway
//! reads them from the API servers.

#![forbid(unsafe_code)]

pub mod cluster;
mod rules;
mod script;
mod state;
mod validate;

pub use rules::{
    Chain, ChainName, Collection, Element, ElementKey, Hook, Ingress, Route, Rule, RuleSet, TABLE,
};
pub use script::Delta;
pub use state::{Backend, BackendChoiceError, Export, GatewayState, ParseError, Peer};
pub use validate::{InvalidState, Problem};

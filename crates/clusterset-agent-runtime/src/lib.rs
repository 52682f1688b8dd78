//! The kube shell of the clusterset agent, the Multi-Cluster Services control plane of one
//! member cluster.
//!
//! The agent watches the cluster's Services, ServiceExports and EndpointSlices, publishes one record
//! per export into a broker namespace on a hub cluster, merges every cluster's records with
//! [`mcs_controller`], writes ServiceImports, EndpointSlices and ServiceExport conditions, and
//! serves the clusterset DNS zone with [`clusterset_dns`].
//!
//! Layout (linkerd's policy-controller shape): the decisions are in the pure crate
//! [`mcs_controller`] ([`AgentCore`](mcs_controller::AgentCore), a sans-IO index fed by watch
//! events and producing [`Write`](mcs_controller::Write)s); this crate is its kube shell:
//! [`kube_io`] (watches in, converted to the core's events, and server-side-apply writes out;
//! the watches retry with [`clusterset_daemon::watch::WatchBackoff`]), [`runtime`] (drives the
//! core with them, keeps the DNS zone current), [`metrics`] and [`readiness`], which
//! `/metrics` and `/readyz` serve ([`clusterset_daemon::Endpoints`], both daemons' HTTP
//! endpoints). The binary `bins/clusterset-agent` parses the flags and wires these together.
//! The broker CRD is generated from its type ([`mcs_controller::crd::export_record_crd`]).
#![forbid(unsafe_code)]
#![recursion_limit = "256"]

pub mod kube_io;
pub mod metrics;
pub mod readiness;
pub mod runtime;

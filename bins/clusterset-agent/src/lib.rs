//! `clusterset-agent`: the Multi-Cluster Services control plane of one member cluster.
//!
//! This package is the binary's flags and their wiring ([`cli`]); the decisions are in the pure
//! crate [`mcs_controller`], the kube shell (watches, writes, the runtime loop, metrics and HTTP)
//! in [`clusterset_agent_runtime`], the DNS server in [`clusterset_dns`].
#![forbid(unsafe_code)]

pub mod cli;
pub mod memory;

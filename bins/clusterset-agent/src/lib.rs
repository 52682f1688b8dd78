//! The clusterset agent: the Multi-Cluster Services control plane of one member cluster.
//!
//! It watches the cluster's Services, ServiceExports and EndpointSlices, publishes one record
//! per export into a broker namespace on a hub cluster, merges every cluster's records with
//! [`mcs_controller`], writes ServiceImports, EndpointSlices and ServiceExport conditions, and
//! serves the clusterset DNS zone with [`clusterset_dns`].
//!
//! Layout (linkerd's policy-controller shape): [`core::AgentCore`] is a sans-IO index fed by
//! watch events and producing [`write::Write`]s; [`kube_io`] is the thin kube shell (watches
//! in, server-side-apply writes out); [`runtime`] drives the core with either; [`sim`] drives N
//! cores against in-memory clusters for tests and measurements.
#![forbid(unsafe_code)]
#![recursion_limit = "256"]

pub mod broker;
pub mod cache;
pub mod cli;
pub mod config;
pub mod core;
pub mod http;
pub mod hub;
pub mod kube_io;
pub mod metrics;
pub mod runtime;
pub mod sim;
pub mod write;

pub use config::{AgentConfig, ConfigError};
pub use core::{AgentCore, Input, Output};
pub use write::{Target, Write};

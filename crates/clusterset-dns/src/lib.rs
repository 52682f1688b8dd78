//! Multi-Cluster Services DNS for the clusterset zone (`clusterset.local`): the records that
//! ServiceImports and MCS EndpointSlices make, an authoritative server fed by a live store, and a
//! resolver for the clients (operators) that look those names up.
//!
//! - [`records`]: the pure zone model. [`ClustersetZone`] turns ServiceImports and EndpointSlices
//!   (labelled `multicluster.kubernetes.io/service-name` and `.../source-cluster`) into answers
//!   per (name, type) exactly as the MCS DNS specification and CoreDNS's multicluster plugin
//!   give them, plus PTR records and an opt-in Lighthouse mode for `<clusterid>.<svc>...`.
//!   Updates replace one service's facts; its names are computed on first use.
//! - [`store`]: [`ZoneStore`], the live store a controller feeds from its watches (per-object
//!   upserts and deletes, a "synced" mark). Every change publishes an immutable [`wire::Snapshot`]
//!   with an atomic swap, so queries never wait for updates.
//! - [`wire`]: the query hot path: parse the header and question, look the name up (by service,
//!   namespace, reverse address or zone name), splice the answer (encoded on first use per name
//!   and type with hickory-proto) behind the client's question.
//! - [`server`]: [`DnsServer`], UDP (batched `recvmmsg`/`sendmmsg`, one `SO_REUSEPORT` socket per
//!   worker) and TCP; SERVFAIL until the store has synced; zone transfers and recursion refused;
//!   answers counted by transport and response code ([`stats`], [`DnsServer::query_counter`]).
//! - [`resolver`]: the [`ClustersetResolver`] trait (a mockall mock with the `mock` feature) and
//!   [`HickoryClustersetResolver`]: timeouts, bounded retries with backoff, a TTL cache, many
//!   names at once ([`resolve_all`]), and errors that tell NXDOMAIN, NODATA and timeouts apart.
//!
//! Serving a zone and resolving from it:
//!
//! ```
//! use std::sync::Arc;
//! use clusterset_dns::{ClustersetResolver, DnsServer, HickoryClustersetResolver, ResolverSettings,
//!     ServerConfig, ZoneConfig, ZoneStore};
//! use mcs_types::names::ClustersetName;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let store = Arc::new(ZoneStore::new(ZoneConfig::default()));
//! let import = serde_json::from_value(serde_json::json!({
//!     "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
//!     "metadata": {"name": "rook-ceph-mon-a", "namespace": "rook-ceph"},
//!     "spec": {"type": "ClusterSetIP", "ips": ["242.1.0.11"], "ports": [{"port": 3300}]}
//! }))?;
//! store.upsert_service_import(&import)?;
//! store.mark_synced(); // the watches have listed everything once
//!
//! let server = DnsServer::start(&ServerConfig::new("127.0.0.1:0".parse()?), Arc::clone(&store))?;
//! let resolver = HickoryClustersetResolver::new(ResolverSettings {
//!     nameserver: Some(server.local_addr()),
//!     ..ResolverSettings::default()
//! })?;
//! let name = ClustersetName::service("rook-ceph", "rook-ceph-mon-a")?;
//! let resolved = resolver.resolve(&name).await?;
//! assert_eq!(resolved.addresses, vec!["242.1.0.11".parse::<std::net::IpAddr>()?]);
//! server.shutdown().await;
//! # Ok(())
//! # }
//! ```
#![forbid(unsafe_code)]

mod index;
pub mod objects;
pub mod records;
pub mod resolver;
pub mod server;
pub mod stats;
pub mod store;
pub mod synthetic;
pub mod wire;
mod zonefile;

pub use objects::{ObjectError, ObjectKind, ServiceKey, SliceKey, ZoneObject};
pub use records::{Answer, ClustersetZone, NameRecords, SrvData, ZoneConfig};
pub use resolver::{
    ClustersetResolver, HickoryClustersetResolver, Resolution, ResolveError, ResolverSettings,
    resolve_all,
};
pub use server::{DnsServer, ServerConfig, ServerError};
pub use stats::{QueryCounter, QueryCounts, Rcode};
pub use store::{ApplyReport, ZoneChange, ZoneStore};

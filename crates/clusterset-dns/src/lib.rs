//! Multi-Cluster Services DNS for the clusterset zone (`clusterset.local`): the records that
//! ServiceImports and MCS EndpointSlices make, an authoritative server fed by a live store, and a
//! resolver for the clients (operators) that look those names up.
//!
//! The modules are layers, each using only those below it (`tests/layers.rs` checks it):
//!
//! - [`name`]: DNS names in wire form ([`name::wire_name`]), reverse names, the zone's hash.
//! - `cow_map`: the copy-on-write map in 64 x 64 shards that the zone index keeps its maps in
//!   and that every snapshot clones.
//! - [`objects`]: ServiceImports and MCS EndpointSlices (labelled
//!   `multicluster.kubernetes.io/service-name` and `.../source-cluster`) validated into facts.
//! - [`objects_file`]: a YAML file of them (documents or `kind: List`), read whole or refused
//!   with every problem named ([`ZoneStore::replace_from_file`] serves it).
//! - [`records`]: the pure record model: what a service's facts make, per (name, type), exactly
//!   as the MCS DNS specification and CoreDNS's multicluster plugin give them, plus PTR records
//!   and an opt-in Lighthouse mode for `<clusterid>.<svc>...`.
//! - [`prepared`]: a name's answers, each (name, type) encoded once, on first use.
//! - `index`: the zone's indexes (services, namespaces, reverse names), shared by the model and
//!   the server's snapshots.
//! - [`zone`]: [`ClustersetZone`], the zone model: updates replace one service's facts; its
//!   names are computed on first use.
//! - `zonefile`: the zone as an RFC 1035 master file.
//! - [`wire`]: the query hot path: parse the header and question, look the name up in a
//!   [`wire::Snapshot`] (by service, namespace, reverse address or zone name), splice the
//!   prepared answer behind the client's question; the response code ([`Rcode`]).
//! - [`stats`]: query counts by transport and response code ([`DnsServer::query_counter`]).
//! - [`store`]: [`ZoneStore`], the live store a controller feeds from its watches (per-object
//!   upserts and deletes, a "synced" mark). Every change publishes an immutable
//!   [`wire::Snapshot`] with an atomic swap, so queries never wait for updates.
//! - [`server`]: [`DnsServer`], UDP (batched `recvmmsg`/`sendmmsg`, one `SO_REUSEPORT` socket per
//!   worker) and TCP; SERVFAIL until the store has synced; zone transfers and recursion refused.
//!
//! Apart from the layers, on its own (it uses no other module, and none uses it):
//!
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

// The layers, bottom first (the order `tests/layers.rs` keeps).
mod cow_map;
mod index;
pub mod name;
pub mod objects;
pub mod objects_file;
pub mod prepared;
pub mod records;
#[cfg(feature = "server")]
pub mod server;
#[cfg(feature = "server")]
pub mod stats;
pub mod store;
pub mod wire;
pub mod zone;
mod zonefile;
// On its own.
#[cfg(feature = "resolver")]
pub mod resolver;

// The benchmarks' synthetic zones, which some unit tests build on too. The file names this
// crate `clusterset_dns`, as its other users (benches, examples, the fuzz target) do; the unit
// tests use only some of it.
#[cfg(test)]
extern crate self as clusterset_dns;
#[cfg(test)]
#[allow(dead_code)]
#[path = "../benches/common/synthetic.rs"]
mod synthetic;

pub use objects::{ObjectError, ObjectKind, ServiceKey, SliceKey, ZoneObject};
pub use records::{Answer, NameRecords, SrvData, ZoneConfig};
#[cfg(feature = "resolver")]
pub use resolver::{
    ClustersetResolver, HickoryClustersetResolver, Resolution, ResolveError, ResolverSettings,
    resolve_all,
};
#[cfg(feature = "server")]
pub use server::{DnsServer, ServerConfig, ServerError};
#[cfg(feature = "server")]
pub use stats::{QueryCounter, QueryCounts};
pub use store::{ApplyReport, ZoneChange, ZoneStore};
pub use wire::Rcode;
pub use zone::ClustersetZone;

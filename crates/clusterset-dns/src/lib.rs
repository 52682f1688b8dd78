//! wip
#![forbid(unsafe_code)]

pub mod objects;
pub mod records;
pub mod resolver;
pub mod server;
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
pub use store::{ApplyReport, ZoneChange, ZoneStore};

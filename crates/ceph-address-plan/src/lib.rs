//! Pure planning of Ceph daemon addresses for Kubernetes Multi-Cluster Services, in Rook's
//! layout: given a cluster's identity, network settings and daemon inventory, and the global IPs
//! known so far, what must exist and how must every daemon be addressed.
//!
//! No Kubernetes client, no IO, no async: embed it in any controller.
#![forbid(unsafe_code)]

pub mod mon_id;

pub use mon_id::{InvalidMonId, MonId};

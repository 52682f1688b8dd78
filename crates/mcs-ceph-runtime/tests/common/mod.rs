//! Fixtures shared by the operator's test binaries: the fake API servers ([`api_server`],
//! [`strict`]) and, re-exported, the decision's fixtures of the `mcs-ceph-fixtures` crate (a
//! Rook cluster's objects and an in-memory cluster that carries out the decision's writes).
#![allow(
    dead_code,
    unused_imports,
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic
)]

pub mod api_server;
pub mod strict;

pub use mcs_ceph_fixtures::*;

//! The agent's mock API servers check every request with [`kube_fake::strict`] on the resource
//! types a real API server with clusterset installed serves (the built-in types plus the MCS,
//! About and broker CRDs: [`clusterset_sim::api_catalog`], the same catalog the simulation's
//! API servers use). A request a real kube-apiserver refuses is answered as it would answer it
//! (400 BadRequest for a selector it cannot parse, 422 Invalid with the causes for an invalid
//! object), and the mock makes the test fail.

use std::sync::LazyLock;

use kube_syntax::object::Catalog;

#[allow(unused_imports)] // not every test file that uses the catalog answers by hand
pub use kube_fake::strict::{Received, answer};

/// The resource types of the mock API servers.
pub fn catalog() -> &'static Catalog {
    static CATALOG: LazyLock<Catalog> = LazyLock::new(|| {
        clusterset_sim::api_catalog().expect("the mock API server's resource types")
    });
    &CATALOG
}

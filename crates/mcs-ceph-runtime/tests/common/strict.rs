//! The operator's mock API servers are [`kube_fake::strict`]'s, serving the operator's types:
//! the built-in ones, the MCS CRDs (ServiceExport, ServiceImport, both versions) and
//! `CephClusterAddressing`; `CephCluster` (no CRD here) gets the rules every kind shares.

use std::sync::OnceLock;

use kube_syntax::object::Catalog;
use kube_syntax::status::Refusal;
use serde_json::Value;

pub use kube_fake::strict::{
    APPLY, ApiHandle, Received, RefusalLog, Refusals, StrictHandle, parse_query, respond,
    respond_bytes,
};

/// The types the operator's API server serves.
pub fn catalog() -> &'static Catalog {
    static CATALOG: OnceLock<Catalog> = OnceLock::new();
    CATALOG.get_or_init(|| {
        let crds = mcs_types::crd::mcs_crds().expect("the MCS CRDs build");
        crds.iter()
            .map(|crd| serde_json::to_value(crd).unwrap())
            .chain([serde_json::to_value(mcs_ceph_api::crd().unwrap()).unwrap()])
            .fold(Catalog::builtin(), |catalog, crd| catalog.with_crd(&crd))
    })
}

/// A kube client on a tower-test mock, and the strict end of it, serving [`catalog`].
pub fn pair() -> (kube::Client, StrictHandle) {
    kube_fake::strict::pair(catalog())
}

/// The refusal a real API server gives an object it would store, if any.
pub fn check_stored(object: &Value) -> Result<(), Refusal> {
    kube_fake::strict::check_stored(catalog(), object)
}

//! The recorded member cluster east (`tests/fixtures/cluster-east.yaml`): a half-migrated
//! CephCluster in `rook-ceph` and a `shop` namespace with exported and imported services.

use serde_json::Value;

use crate::api::objects_of;

/// The recorded objects of member cluster east.
pub fn cluster_east() -> Vec<Value> {
    objects_of(include_str!("../../fixtures/cluster-east.yaml"))
}

/// The objects of `kind` (and `namespace`, when given) of cluster east, deserialized.
pub fn objects<T: serde::de::DeserializeOwned>(kind: &str, namespace: Option<&str>) -> Vec<T> {
    cluster_east()
        .into_iter()
        .filter(|o| o["kind"] == kind)
        .filter(|o| namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns))
        .map(|o| serde_json::from_value(o).unwrap())
        .collect()
}

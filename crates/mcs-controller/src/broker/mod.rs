//! What the agents keep on the hub cluster: one [`BrokerRecord`] per export of every cluster,
//! each in its cluster's own records namespace ([`records_namespace`], `<broker>-<cluster>`),
//! one [`GatewayRecord`] per cluster (its gateway's address and global CIDR, written by
//! `clusterset-gateway`) in the same namespace, and one heartbeat `Lease` per cluster in the
//! broker namespace. The hub's RBAC lets a
//! cluster's credentials write only in its own records namespace and only its own Lease
//! ([`crate::hub`]), so where a record is stored says who could have written it
//! ([`record_writer_check`]).
//!
//! The record is a small custom resource of our own API group (`clusterset.io/v1alpha1`,
//! kind `ExportRecord`) whose `spec` is exactly [`ExportRecord`]. A CRD rather
//! than a ConfigMap: the API server validates the shape, RBAC can grant exactly this resource,
//! `kubectl get exportrecords` shows cluster, service and export time as columns, and the
//! object is named `<cluster>.<namespace>.<service>` so that it is readable and unique (all
//! three parts are DNS labels, so the name is a valid DNS subdomain of at most 191 characters).
//! Its CRD is built by the agent ([`crate::crd::export_record_crd`], printed by `clusterset-agent crd`).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use mcs_types::{ClusterId, ServiceKey};
use serde::{Deserialize, Serialize};

use crate::model::ExportRecord;

mod gateway;
mod lease;

pub use gateway::{GATEWAY_KIND, GATEWAY_PLURAL, GatewayRecord, GatewayRecordError, GatewaySpec};
pub use lease::{
    Heartbeat, heartbeat, heartbeat_claim, lease_cluster, lease_name, lease_writer_check, release,
};

/// API group of the broker resources.
pub const GROUP: &str = mcs_types::CLUSTERSET_GROUP;
/// API version of [`BrokerRecord`].
pub const VERSION: &str = "v1alpha1";
/// Kind of [`BrokerRecord`].
pub const KIND: &str = "ExportRecord";
/// Plural (resource) name of [`BrokerRecord`].
pub const PLURAL: &str = "exportrecords";

/// Label on records and Leases: the cluster id they belong to.
pub const CLUSTER_ID_LABEL: &str = "clusterset.io/cluster-id";
/// Label on records: the exported service's namespace.
pub const SERVICE_NAMESPACE_LABEL: &str = "clusterset.io/service-namespace";
/// Label on records: the exported service's name.
pub const SERVICE_NAME_LABEL: &str = "clusterset.io/service-name";
/// Annotation on records: when the exporting agent published this version (RFC 3339), for the
/// propagation-lag metric of the importing agents.
pub const PUBLISHED_AT_ANNOTATION: &str = "clusterset.io/published-at";

/// The spec of a record as read from the broker: an [`ExportRecord`], or a document that is not
/// one (written by something else, or by a newer agent). An unreadable record never stops the
/// watch; it is reported and left out of the merge.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(untagged)]
pub enum RecordSpec {
    /// A valid record.
    Record(Box<ExportRecord>),
    /// Anything else, kept as JSON for the error report.
    Unreadable(serde_json::Value),
}

impl RecordSpec {
    /// The record, or why the document is not one (the serde error names the field).
    pub fn record(&self) -> Result<&ExportRecord, String> {
        match self {
            Self::Record(record) => Ok(record),
            Self::Unreadable(value) => {
                match serde_json::from_value::<ExportRecord>(value.clone()) {
                    Ok(_) => Err("record parsed only on a second attempt".to_owned()),
                    Err(e) => Err(e.to_string()),
                }
            }
        }
    }
}

/// One cluster's export of one service, as stored in the broker namespace.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct BrokerRecord {
    /// `clusterset.io/v1alpha1`.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// `ExportRecord`.
    #[serde(default = "kind")]
    pub kind: String,
    /// Name `<cluster>.<namespace>.<service>`, labels and the publication annotation.
    pub metadata: ObjectMeta,
    /// The record.
    pub spec: RecordSpec,
}

fn api_version() -> String {
    format!("{GROUP}/{VERSION}")
}

fn kind() -> String {
    KIND.to_owned()
}

/// The object name of `cluster`'s record of `key`.
///
/// ```
/// use mcs_controller::broker::record_name;
/// use mcs_types::{ClusterId, ServiceKey};
/// let east = ClusterId::new("east")?;
/// assert_eq!(record_name(&east, &ServiceKey::new("rook-ceph", "mon-a")), "east.rook-ceph.mon-a");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn record_name(cluster: &ClusterId, key: &ServiceKey) -> String {
    format!("{cluster}.{}.{}", key.namespace, key.name)
}

/// The namespace on the hub that holds `cluster`'s records: `<broker namespace>-<cluster>`.
/// Only that cluster's hub credentials may write there. A namespace name has at most 63
/// characters; a longer one is cut to 52 and ends with `-` and 10 hex digits of a hash of the
/// whole name (FNV-1a), so every cluster id of up to 63 characters has a namespace, the same
/// for every agent, and two ids that share a long prefix still get different ones.
///
/// ```
/// use mcs_controller::broker::records_namespace;
/// use mcs_types::ClusterId;
/// assert_eq!(records_namespace("clusterset-broker", &ClusterId::new("east")?), "clusterset-broker-east");
/// let long = records_namespace("clusterset-broker", &ClusterId::new(&"e".repeat(63))?);
/// assert_eq!(long.len(), 63);
/// assert!(long.starts_with("clusterset-broker-eeee"));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn records_namespace(broker_namespace: &str, cluster: &ClusterId) -> String {
    const MAX: usize = 63;
    const HASH_HEX: usize = 10;
    let full = format!("{broker_namespace}-{cluster}");
    if full.len() <= MAX {
        return full;
    }
    let hash = full.bytes().fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
        (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
    });
    let hex = format!("{hash:016x}");
    // Every character of a valid namespace and cluster id is ASCII, so any cut is a boundary.
    let kept = full.get(..MAX - HASH_HEX - 1).unwrap_or(&full);
    format!("{kept}-{}", hex.get(..HASH_HEX).unwrap_or(&hex))
}

/// How an agent treats records in the shared broker namespace, where every member could write
/// before each cluster had its own records namespace (the upgrade path of
/// docs/clusterset-agent.md).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum SharedRecords {
    /// Ignored (and counted): any member may have written them. After the upgrade.
    #[default]
    Ignore,
    /// Read as their cluster's, as long as that cluster has no copy in its own namespace; this
    /// agent publishes into its own namespace and withdraws its shared copies once the new ones
    /// are stored. Step 2 of the upgrade.
    Read,
    /// Read as above; this agent still publishes into the shared namespace (and withdraws any
    /// copy in its own namespace). Step 1 of the upgrade: every agent reads both places before
    /// any record moves.
    Write,
}

/// Where a record that passed [`record_writer_check`] is stored.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RecordHome {
    /// Its cluster's records namespace: only that cluster could have written it.
    Own,
    /// The shared broker namespace (read only while [`SharedRecords`] says so).
    Shared,
}

/// Why a record or Lease on the hub is not taken as its cluster's: its writer could not have
/// been that cluster (or, for shared records, may not have been).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ForeignWriter {
    /// A record stored outside its cluster's records namespace.
    #[error(
        "record of cluster {cluster} stored in namespace {namespace}, where cluster {cluster} cannot write (its records live in {expected}): another member's credentials wrote it; ignored"
    )]
    RecordNamespace {
        /// The cluster the record names.
        cluster: ClusterId,
        /// Where it is stored.
        namespace: String,
        /// Where that cluster's records live.
        expected: String,
    },
    /// A record in the shared broker namespace while those are ignored.
    #[error(
        "record of cluster {cluster} stored in the shared broker namespace {namespace}, where every member may write; ignored (run the agents with --shared-records=read while the upgrade moves records, see docs/clusterset-agent.md)"
    )]
    SharedRecord {
        /// The cluster the record names.
        cluster: ClusterId,
        /// The shared broker namespace.
        namespace: String,
    },
    /// A heartbeat Lease whose name is not its cluster label's Lease name.
    #[error(
        "Lease {namespace}/{name} says it is cluster {cluster}'s heartbeat, whose Lease is {expected}: another member's credentials wrote it; ignored"
    )]
    LeaseName {
        /// The cluster the Lease's label names.
        cluster: ClusterId,
        /// Its namespace.
        namespace: String,
        /// Its name.
        name: String,
        /// The name of that cluster's Lease.
        expected: String,
    },
}

impl ForeignWriter {
    /// A short reason, for the `reason` label of the agent's metric.
    pub fn reason(&self) -> &'static str {
        match self {
            Self::RecordNamespace { .. } => "record_namespace",
            Self::SharedRecord { .. } => "shared_namespace",
            Self::LeaseName { .. } => "lease_name",
        }
    }
}

/// Whether the record of `cluster` stored in `namespace` can have been written by `cluster`:
/// in its own records namespace always; in the shared broker namespace only while `shared`
/// reads those.
///
/// ```
/// use mcs_controller::broker::{record_writer_check, RecordHome, SharedRecords};
/// use mcs_types::ClusterId;
/// let east = ClusterId::new("east")?;
/// let check = |ns| record_writer_check("broker", SharedRecords::Ignore, ns, &east);
/// assert_eq!(check("broker-east"), Ok(RecordHome::Own));
/// assert!(check("broker-west").is_err()); // west's credentials wrote it
/// assert!(check("broker").is_err()); // anyone's
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn record_writer_check(
    broker_namespace: &str,
    shared: SharedRecords,
    namespace: &str,
    cluster: &ClusterId,
) -> Result<RecordHome, ForeignWriter> {
    let expected = records_namespace(broker_namespace, cluster);
    if namespace == expected {
        Ok(RecordHome::Own)
    } else if namespace == broker_namespace {
        match shared {
            SharedRecords::Ignore => Err(ForeignWriter::SharedRecord {
                cluster: cluster.clone(),
                namespace: namespace.to_owned(),
            }),
            SharedRecords::Read | SharedRecords::Write => Ok(RecordHome::Shared),
        }
    } else {
        Err(ForeignWriter::RecordNamespace {
            cluster: cluster.clone(),
            namespace: namespace.to_owned(),
            expected,
        })
    }
}

impl BrokerRecord {
    /// The broker object for `record`, stamped with its publication time.
    pub fn new(record: ExportRecord, namespace: &str, published_at: Timestamp) -> Self {
        let labels = BTreeMap::from([
            (CLUSTER_ID_LABEL.to_owned(), record.cluster_id.to_string()),
            (
                SERVICE_NAMESPACE_LABEL.to_owned(),
                record.service_key.namespace.clone(),
            ),
            (
                SERVICE_NAME_LABEL.to_owned(),
                record.service_key.name.clone(),
            ),
        ]);
        Self {
            api_version: api_version(),
            kind: kind(),
            metadata: ObjectMeta {
                name: Some(record_name(&record.cluster_id, &record.service_key)),
                namespace: Some(namespace.to_owned()),
                labels: Some(labels),
                annotations: Some(BTreeMap::from([(
                    PUBLISHED_AT_ANNOTATION.to_owned(),
                    published_at.to_string(),
                )])),
                ..Default::default()
            },
            spec: RecordSpec::Record(Box::new(record)),
        }
    }

    /// When the exporting agent published this version, if it said so.
    pub fn published_at(&self) -> Option<Timestamp> {
        self.metadata
            .annotations
            .as_ref()?
            .get(PUBLISHED_AT_ANNOTATION)?
            .parse()
            .ok()
    }

    /// The record, checked against the object's name (a record stored under another cluster's
    /// or service's name is refused: it would let one cluster speak for another).
    pub fn checked_record(&self) -> Result<&ExportRecord, String> {
        let record = self.spec.record()?;
        let expected = record_name(&record.cluster_id, &record.service_key);
        let name = self.metadata.name.as_deref().unwrap_or("");
        if name != expected {
            return Err(format!(
                "the object is named {name:?} but its spec is cluster {}'s export of {}, which must be named {expected:?}",
                record.cluster_id, record.service_key
            ));
        }
        Ok(record)
    }
}

mcs_types::impl_resource!(BrokerRecord {
    group: GROUP,
    version: VERSION,
    kind: KIND,
    plural: PLURAL,
    scope: k8s_openapi::NamespaceResourceScope,
});

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_record_names_its_api_for_kube() {
        use kube_core::Resource;
        let url = BrokerRecord::url_path(&(), Some("broker-east"));
        let api = (BrokerRecord::api_version(&()), BrokerRecord::kind(&()));
        assert_eq!(
            format!("{} {} {url}", api.0, api.1),
            "clusterset.io/v1alpha1 ExportRecord /apis/clusterset.io/v1alpha1/namespaces/broker-east/exportrecords"
        );
    }

    #[test]
    fn record_under_a_wrong_name_is_refused() {
        let json = serde_json::json!({
            "apiVersion": "clusterset.io/v1alpha1", "kind": "ExportRecord",
            "metadata": {"name": "west.shop.web", "namespace": "broker"},
            "spec": {
                "clusterId": "east", "serviceKey": {"namespace": "shop", "name": "web"},
                "exportCreated": "2026-01-01T00:00:00Z",
                "service": {"headless": false, "ports": [], "sessionAffinity": "None",
                            "ipFamilies": ["IPv4"], "internalTrafficPolicy": "Cluster"}
            }
        });
        let record: BrokerRecord = serde_json::from_value(json).unwrap();
        let err = record.checked_record().unwrap_err();
        assert!(err.contains("must be named \"east.shop.web\""), "{err}");
    }

    #[test]
    fn unreadable_spec_is_kept_and_explained() {
        let json = serde_json::json!({
            "apiVersion": "clusterset.io/v1alpha1", "kind": "ExportRecord",
            "metadata": {"name": "east.shop.web"},
            "spec": {"clusterId": "East!", "serviceKey": {"namespace": "shop", "name": "web"}}
        });
        let record: BrokerRecord = serde_json::from_value(json).unwrap();
        assert!(matches!(record.spec, RecordSpec::Unreadable(_)));
        let err = record.checked_record().unwrap_err();
        assert!(err.contains("East!"), "{err}");
    }
}

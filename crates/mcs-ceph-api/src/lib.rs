//! The API of `mcs-ceph-operator`: the two custom resources it works with — Rook's
//! `CephCluster` (read, as a partial typed view that keeps every field) and its own status
//! object, `CephClusterAddressing` (written, one per CephCluster, same name and namespace) —
//! and the CRD of the latter ([`crd`]).
//!
//! Types only, with no Kubernetes client and no async runtime, so that readers of the status
//! (`mcsctl`) depend on them and not on the operator. Both resources implement
//! [`kube_core::Resource`], so they work with `kube::Api`.
//!
//! ```
//! use mcs_ceph_api::{AddressingStatus, CephClusterAddressing, Phase};
//! let status = AddressingStatus { phase: Phase::Ready, ..AddressingStatus::default() };
//! let object = CephClusterAddressing::new("my-cluster", "rook-ceph", status);
//! let json = serde_json::to_value(&object)?;
//! assert_eq!(json["apiVersion"], "clusterset.io/v1alpha1");
//! assert_eq!(json["status"]["phase"], "Ready");
//! # Ok::<(), serde_json::Error>(())
//! ```
#![forbid(unsafe_code)]

use std::collections::BTreeMap;

use ceph_address_plan::CephVersion;
use ceph_address_plan::manifest::{CephClusterManifest, CephClusterSpec, ManifestMetadata};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, ObjectMeta, Time};
use kube_core::NamespaceResourceScope;
use mcs_types::crd::{CrdError, CrdShape, build_crd, printer_column, resource_schema, schema_for};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use serde_json::Value;

mod daemon_state;
pub use daemon_state::{DaemonState, EXPORT_VALID_READY, UnknownDaemonState};

/// Fields a document has that these types do not know; kept and written back unchanged.
pub type UnknownFields = BTreeMap<String, Value>;

/// API group of [`CephClusterAddressing`].
pub const GROUP: &str = mcs_types::CLUSTERSET_GROUP;
/// API version of [`CephClusterAddressing`].
pub const VERSION: &str = "v1alpha1";
/// Kind of [`CephClusterAddressing`].
pub const KIND: &str = "CephClusterAddressing";
/// Plural (resource) name of [`CephClusterAddressing`].
pub const PLURAL: &str = "cephclusteraddressings";
/// At most this many entries in [`AddressingStatus::daemons`]: with every mon listed and the
/// OSDs that are not settled, a status stays under 64 KB whatever the number of daemons.
pub const LISTED_DAEMONS: usize = 100;

const CEPH_GROUP: &str = "ceph.rook.io";
const CEPH_VERSION: &str = "v1";
const CEPH_API_VERSION: &str = "ceph.rook.io/v1";
const CEPH_KIND: &str = "CephCluster";

fn ceph_api_version() -> String {
    CEPH_API_VERSION.to_owned()
}

fn ceph_kind() -> String {
    CEPH_KIND.to_owned()
}

/// A Rook `CephCluster` (`ceph.rook.io/v1`), kept whole: `spec` and `status` are JSON, so no
/// field is lost or refused, and [`CephCluster::manifest`] gives the typed view the planner
/// reads ([`ceph_address_plan::manifest`]). The operator never writes this object.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CephCluster {
    /// `ceph.rook.io/v1`.
    #[serde(default = "ceph_api_version")]
    pub api_version: String,
    /// `CephCluster`.
    #[serde(default = "ceph_kind")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// The spec, as the API server sent it.
    #[serde(default, skip_serializing_if = "Value::is_null")]
    pub spec: Value,
    /// Rook's status, as the API server sent it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<Value>,
    /// Any other top-level field.
    #[serde(flatten)]
    pub unknown_fields: UnknownFields,
}

impl CephCluster {
    /// A CephCluster `name` in `namespace` with `spec`.
    pub fn new(name: &str, namespace: &str, spec: Value) -> Self {
        Self {
            api_version: ceph_api_version(),
            kind: ceph_kind(),
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            spec,
            status: None,
            unknown_fields: UnknownFields::new(),
        }
    }

    /// Whether `spec.network.multiClusterService.enabled` is `true`, read from the raw spec so
    /// that a spec the typed view cannot read still says whether MCS was asked for.
    pub fn mcs_requested(&self) -> bool {
        self.spec
            .pointer("/network/multiClusterService/enabled")
            .and_then(Value::as_bool)
            == Some(true)
    }

    /// The typed view of the fields the planner reads; an error names the field that does not
    /// have the expected shape.
    pub fn manifest(&self) -> Result<CephClusterManifest, serde_json::Error> {
        let spec: Option<CephClusterSpec> = if self.spec.is_null() {
            None
        } else {
            Some(serde_json::from_value(self.spec.clone())?)
        };
        Ok(CephClusterManifest {
            api_version: Some(self.api_version.clone()),
            kind: Some(self.kind.clone()),
            metadata: ManifestMetadata {
                name: self.metadata.name.clone(),
                namespace: self.metadata.namespace.clone(),
                uid: self.metadata.uid.clone(),
            },
            spec,
        })
    }

    /// The Ceph version Rook found running (`status.version.version`, e.g. `18.2.4-0`), which
    /// is more precise than the image tag.
    pub fn running_ceph_version(&self) -> Option<CephVersion> {
        let text = self
            .status
            .as_ref()?
            .pointer("/version/version")?
            .as_str()?;
        let version = text.split('-').next().unwrap_or(text);
        version.parse().ok()
    }
}

mcs_types::impl_resource!(CephCluster {
    group: CEPH_GROUP,
    version: CEPH_VERSION,
    kind: CEPH_KIND,
    plural: "cephclusters",
    scope: NamespaceResourceScope,
    api_version: CEPH_API_VERSION,
});

fn api_version() -> String {
    format!("{GROUP}/{VERSION}")
}

fn kind() -> String {
    KIND.to_owned()
}

/// The operator's status object for one CephCluster: same name and namespace, owned (controller
/// reference) by the CephCluster, so it goes when the cluster goes. Everything is in `status`;
/// `kubectl get cephclusteraddressings` shows phase, ready daemons and the summary.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CephClusterAddressing {
    /// `clusterset.io/v1alpha1`.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// `CephClusterAddressing`.
    #[serde(default = "kind")]
    pub kind: String,
    /// Standard object metadata.
    #[serde(default)]
    pub metadata: ObjectMeta,
    /// What the operator found and did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<AddressingStatus>,
    /// Any other top-level field.
    #[serde(flatten)]
    pub unknown_fields: UnknownFields,
}

impl CephClusterAddressing {
    /// An object `name` in `namespace` with `status`.
    pub fn new(name: &str, namespace: &str, status: AddressingStatus) -> Self {
        Self {
            api_version: api_version(),
            kind: kind(),
            metadata: ObjectMeta {
                name: Some(name.to_owned()),
                namespace: Some(namespace.to_owned()),
                ..ObjectMeta::default()
            },
            status: Some(status),
            unknown_fields: UnknownFields::new(),
        }
    }
}

mcs_types::impl_resource!(CephClusterAddressing {
    group: GROUP,
    version: VERSION,
    kind: KIND,
    plural: PLURAL,
    scope: NamespaceResourceScope,
});

/// Where a CephCluster stands, most blocking first.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Phase {
    /// `spec.network.multiClusterService.enabled` is not true.
    Disabled,
    /// A guard failed (see the `Accepted` condition); nothing is written.
    Blocked,
    /// Services and ServiceExports are applied; some exports are not Valid and Ready yet.
    Exporting,
    /// Some daemons' global IPs are not known yet.
    Resolving,
    /// Every global IP is known; some daemons do not advertise theirs yet.
    Migrating,
    /// Every daemon advertises its planned address.
    Ready,
    /// A phase this version does not know (written by a newer operator).
    #[default]
    #[serde(other)]
    Unknown,
}

/// The status of a [`CephClusterAddressing`]. Its schema keeps the fields it does not declare
/// (`x-kubernetes-preserve-unknown-fields`), as the type does.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(
    description = "What mcs-ceph-operator found and did.",
    extend("x-kubernetes-preserve-unknown-fields" = true)
)]
pub struct AddressingStatus {
    /// The CephCluster `metadata.generation` this status describes.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Summary of where the cluster stands.
    ///
    /// A plain string in the schema, not an enum: a newer operator's phase is stored, and this
    /// version reads it as [`Phase::Unknown`].
    #[serde(default)]
    #[schemars(with = "String", description = "Summary of where the cluster stands.")]
    pub phase: Phase,
    /// One line saying why the phase is what it is, and what happens next.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
    /// Daemons that advertise their planned address.
    #[serde(default)]
    pub ready_daemons: u32,
    /// Daemons (mons and OSDs) in the plan.
    #[serde(default)]
    pub daemon_count: u32,
    /// `Accepted` (guards), `Exported`, `Resolved`, `Ready`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "mcs_types::crd::condition_list_schema")]
    pub conditions: Vec<Condition>,
    /// How many daemons are in each state (`UpToDate`, `Start`, `UpdateArgs`, `Replace`,
    /// `Waiting`).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub daemon_states: BTreeMap<String, u32>,
    /// The daemons worth reading one by one, mons by id, then OSDs by id: every mon (there are
    /// few, and the mon migration reads them), and every other daemon that is not settled
    /// (not up to date, its export not Valid and Ready, its global IP unknown, or a message),
    /// at most 100 in all (`LISTED_DAEMONS`). A settled OSD is only counted (in `daemonStates` and
    /// `unlistedDaemons`), so that the status stays small whatever the number of OSDs:
    /// `mcsctl status` shows every daemon from the cluster's own objects.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub daemons: Vec<DaemonEntry>,
    /// Daemons of the plan not listed in `daemons` (settled OSDs, and those beyond the first
    /// 100).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub unlisted_daemons: u32,
    /// OSDs whose Deployment is gone while a Service or ServiceExport the operator made for
    /// them remains: those are deleted once the grace period (`--removed-osd-grace-seconds`)
    /// after `since` has passed, and the entry goes with them (or when the OSD comes back).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub removed_osds: Vec<RemovedOsd>,
    /// The `mon_host` the operator last wrote to the `rook-ceph-config` Secret (it does not
    /// read Secrets: this is how it knows not to write the same again).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mon_host: Option<String>,
    /// The mon-failover machine's state (`mon_failover::MachineState` as JSON), written only
    /// by the operator's mon migration under its own field manager
    /// (`mcs_ceph_runtime::mon_migration::MON_FAILOVER_FIELD_MANAGER`) and read back from
    /// the API server, never from the cache, before the machine acts. The decision never
    /// writes it.
    ///
    /// Not in the schema: the status keeps it as an unknown field, whatever its shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(skip)]
    pub mon_failover: Option<Value>,
    /// Fields this version does not know.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown_fields: UnknownFields,
}

/// An OSD whose Deployment is gone while objects the operator made for it remain.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct RemovedOsd {
    /// `osd.7`.
    pub name: String,
    /// When the operator first saw it without a Deployment.
    pub since: Time,
}

/// What the operator knows about one daemon.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct DaemonEntry {
    /// `mon.a`, `osd.7`.
    pub name: String,
    /// The Service its address comes from (the exported one with MCS).
    pub service: String,
    /// Whether its Service is exported.
    #[serde(default)]
    pub exported: bool,
    /// The export's state in words ([`EXPORT_VALID_READY`], or what is wrong), when exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    #[schemars(
        description = "The export's state in words (`Valid, Ready`, or what is wrong), when exported."
    )]
    pub export: Option<String>,
    /// The global IP, once known.
    #[serde(default, rename = "globalIP", skip_serializing_if = "Option::is_none")]
    pub global_ip: Option<String>,
    /// What the daemon advertises now, when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertised: Option<String>,
    /// `UpToDate`, `Start`, `UpdateArgs`, `Replace` or `Waiting` ([`DaemonState`]; read it with
    /// [`DaemonEntry::daemon_state`]).
    #[serde(default)]
    #[schemars(description = "`UpToDate`, `Start`, `UpdateArgs`, `Replace` or `Waiting`.")]
    pub state: String,
    /// What is still to happen, when not up to date.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// The last lookup of its global IP (its name, and why it failed and when it is tried
    /// again, if it did). The operator keeps every daemon's in memory, so that a lookup is
    /// repeated only when its inputs change (or, after a failure, when its retry time has
    /// come); after a restart it reads those it finds here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lookup: Option<LookupRecord>,
}

/// The last lookup of one daemon's global IP and the inputs it was made for.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(extend("x-kubernetes-preserve-unknown-fields" = true))]
pub struct LookupRecord {
    /// The clusterset name looked up (or the ServiceImport read, `<namespace>/<name>`).
    pub name: String,
    /// `metadata.uid` of the ServiceExport when the lookup was made: a new export is a new
    /// global IP.
    #[serde(default, rename = "exportUID", skip_serializing_if = "Option::is_none")]
    pub export_uid: Option<String>,
    /// `spec.ips` of the ServiceImport of the same name when the lookup was made.
    #[serde(default, rename = "importIPs", skip_serializing_if = "Vec::is_empty")]
    pub import_ips: Vec<String>,
    /// Why the last attempt failed, if it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Failed attempts in a row for these inputs.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub failures: u32,
    /// When a failed lookup is tried again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_at: Option<Time>,
}

#[allow(clippy::trivially_copy_pass_by_ref)] // serde's skip_serializing_if passes a reference
fn is_zero(n: &u32) -> bool {
    *n == 0
}

impl LookupRecord {
    /// Whether this record was made for the same inputs.
    pub fn same_inputs(&self, other: &Self) -> bool {
        self.name == other.name
            && self.export_uid == other.export_uid
            && self.import_ips == other.import_ips
    }
}

/// The CRD of [`CephClusterAddressing`], generated from [`AddressingStatus`] (its schemars
/// schema) and assembled by `mcs_types::crd`: one namespaced version (`v1alpha1`), no spec, a
/// status that keeps fields it does not declare (a newer operator's), printer columns for
/// phase, ready daemons, daemon count and (wide) the message. The status is written with the
/// object (no status subresource).
///
/// The error cannot happen with this crate's types (a test builds the CRD); it is returned
/// rather than hidden so that a schema change that breaks the conversion is seen.
///
/// ```
/// let crd = mcs_ceph_api::crd()?;
/// assert_eq!(crd.metadata.name.as_deref(), Some("cephclusteraddressings.clusterset.io"));
/// # Ok::<(), mcs_types::crd::CrdError>(())
/// ```
pub fn crd() -> Result<CustomResourceDefinition, CrdError> {
    let schema = resource_schema(
        "How mcs-ceph-operator addresses the daemons of the CephCluster of the same name: \
         guards, exports, global IPs and what each daemon still needs. Written by the operator \
         only.",
        None,
        Some(schema_for::<AddressingStatus>()?),
    );
    let column = |name: &str, type_: &str, json_path: &str| -> CustomResourceColumnDefinition {
        printer_column(name, type_, json_path, None)
    };
    Ok(build_crd(CrdShape {
        group: GROUP,
        kind: KIND,
        plural: PLURAL,
        scope: "Namespaced",
        short_names: &["cephaddr"],
        categories: &[],
        labels: &[],
        versions: &[VERSION],
        storage_version: VERSION,
        status_subresource: false,
        columns: vec![
            column("Phase", "string", ".status.phase"),
            column("Ready", "integer", ".status.readyDaemons"),
            column("Daemons", "integer", ".status.daemonCount"),
            CustomResourceColumnDefinition {
                priority: Some(1),
                ..column("Message", "string", ".status.message")
            },
            column("Age", "date", ".metadata.creationTimestamp"),
        ],
        schema,
    }))
}

/// The CRDs of a member cluster where the operator runs: the MCS API's (ServiceExport,
/// ServiceImport), the About API's (ClusterProperty) and [`crd`] (CephClusterAddressing).
/// Rook's CephCluster is not among them: Rook installs its own.
///
/// ```
/// let names: Vec<String> = mcs_ceph_api::member_crds()?
///     .into_iter()
///     .filter_map(|crd| crd.metadata.name)
///     .collect();
/// assert!(names.contains(&"serviceexports.multicluster.x-k8s.io".to_owned()));
/// assert!(names.contains(&"cephclusteraddressings.clusterset.io".to_owned()));
/// # Ok::<(), mcs_types::crd::CrdError>(())
/// ```
pub fn member_crds() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    let mut crds = mcs_types::crd::mcs_crds()?;
    crds.extend(mcs_types::crd::about_crds()?);
    crds.push(crd()?);
    Ok(crds)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn both_resources_name_their_api_for_kube() {
        use kube_core::Resource;
        let ns = Some("rook-ceph");
        let names = [
            (
                CephCluster::api_version(&()),
                CephCluster::kind(&()),
                CephCluster::url_path(&(), ns),
            ),
            (
                CephClusterAddressing::api_version(&()),
                CephClusterAddressing::kind(&()),
                CephClusterAddressing::url_path(&(), ns),
            ),
        ];
        assert_eq!(
            names.map(|(api, kind, url)| format!("{api} {kind} {url}")),
            [
                "ceph.rook.io/v1 CephCluster /apis/ceph.rook.io/v1/namespaces/rook-ceph/cephclusters",
                "clusterset.io/v1alpha1 CephClusterAddressing /apis/clusterset.io/v1alpha1/namespaces/rook-ceph/cephclusteraddressings",
            ]
        );
        let mut object = CephClusterAddressing::new("c", "rook-ceph", AddressingStatus::default());
        object.meta_mut().uid = Some("u-1".into());
        assert_eq!(object.metadata.uid.as_deref(), Some("u-1"));
        assert_eq!(object.meta().name.as_deref(), Some("c"));
    }

    #[test]
    fn a_ceph_cluster_round_trips_every_field() {
        let text = r#"{"apiVersion":"ceph.rook.io/v1","kind":"CephCluster",
            "metadata":{"name":"my-cluster","namespace":"rook-ceph","uid":"u-1"},
            "spec":{"cephVersion":{"image":"quay.io/ceph/ceph:v18.2.4"},
                    "dataDirHostPath":"/var/lib/rook",
                    "network":{"multiClusterService":{"enabled":true,"clusterID":"east"},
                               "someFutureField":{"x":1}}},
            "status":{"phase":"Ready","version":{"version":"18.2.4-0","image":"quay.io/ceph/ceph:v18.2.4"}},
            "extra":"kept"}"#;
        let cluster: CephCluster = serde_json::from_str(text).unwrap();
        let back = serde_json::to_value(&cluster).unwrap();
        assert_eq!(back, serde_json::from_str::<Value>(text).unwrap());
        assert!(cluster.mcs_requested());
        assert_eq!(
            cluster.running_ceph_version(),
            Some(CephVersion::new(18, 2, 4))
        );
        let settings = cluster.manifest().unwrap().settings().unwrap();
        assert_eq!(settings.multi_cluster_service.cluster_id, "east");
        assert_eq!(settings.uid.as_deref(), Some("u-1"));
    }

    #[test]
    fn a_spec_of_the_wrong_shape_is_an_error_naming_the_field() {
        let cluster = CephCluster::new(
            "c",
            "ns",
            serde_json::json!({"mon": {"count": "three"},
                               "network": {"multiClusterService": {"enabled": true}}}),
        );
        assert!(cluster.mcs_requested());
        let err = cluster.manifest().unwrap_err().to_string();
        assert!(err.contains("invalid type"), "{err}");
    }

    #[test]
    fn the_status_object_reads_what_it_writes_and_survives_unknown_phases() {
        let mut status = AddressingStatus {
            phase: Phase::Exporting,
            ..AddressingStatus::default()
        };
        status.daemons.push(DaemonEntry {
            name: "osd.0".into(),
            service: "rook-ceph-osd-0".into(),
            global_ip: Some("242.1.0.20".into()),
            ..DaemonEntry::default()
        });
        let object = CephClusterAddressing::new("c", "ns", status);
        let json = serde_json::to_value(&object).unwrap();
        assert_eq!(json["apiVersion"], "clusterset.io/v1alpha1");
        assert_eq!(json["status"]["daemons"][0]["globalIP"], "242.1.0.20");
        let back: CephClusterAddressing = serde_json::from_value(json).unwrap();
        assert_eq!(back, object);
        let newer: AddressingStatus =
            serde_json::from_value(serde_json::json!({"phase": "Teleporting", "x": 1})).unwrap();
        assert_eq!(newer.phase, Phase::Unknown);
        assert_eq!(newer.unknown_fields["x"], 1);
    }

    #[test]
    fn the_crd_parses_and_shows_the_phase() {
        let crd = crd().unwrap();
        assert_eq!(crd.spec.names.kind, KIND);
        let version = &crd.spec.versions[0];
        let columns = version.additional_printer_columns.as_ref().unwrap();
        assert_eq!(columns[0].json_path, ".status.phase");
        assert!(version.schema.is_some());
    }
}

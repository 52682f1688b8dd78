//! Reading the planner's input from files users have: a Rook `CephCluster` manifest (a partial
//! view; unknown fields are ignored) and an inventory file.

use std::collections::BTreeMap;
use std::net::IpAddr;

use serde::{Deserialize, Serialize};

use crate::CephVersion;
use crate::input::{
    ClusterSettings, Daemon, DnsNameForm, ExportStatus, ExternalMon, Inventory, IpFamily,
    McsSettings, MonInput, OsdInput,
};
use crate::rook;

/// A problem with a CephCluster manifest.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ManifestError {
    /// The document is not a CephCluster.
    #[error(
        "the document is {found:?}, not a ceph.rook.io/v1 CephCluster: pass a CephCluster manifest"
    )]
    NotACephCluster {
        /// `apiVersion/kind` of the document.
        found: String,
    },
    /// A required metadata field is missing.
    #[error(
        "the CephCluster has no metadata.{0}: set it (Rook's examples use name rook-ceph in namespace rook-ceph)"
    )]
    MissingMetadata(&'static str),
    /// `spec.network.ipFamily` has a value Rook does not know.
    #[error(
        "spec.network.ipFamily {0:?} is not IPv4 or IPv6: use one of those (dualStack: true for both)"
    )]
    InvalidIpFamily(String),
}

/// A manifest's documents that are not one CephCluster ([`CephClusterManifest::from_documents`]).
#[derive(Debug, thiserror::Error)]
pub enum DocumentsError {
    /// No CephCluster document, or more than one.
    #[error(
        "the manifest must hold exactly one CephCluster document; it holds: {}",
        if .kinds.is_empty() { "nothing".to_owned() } else { .kinds.join(", ") }
    )]
    NotOneCephCluster {
        /// The kind of every document, in order (`<no kind>` for a document without one).
        kinds: Vec<String>,
    },
    /// The CephCluster document has a field of the wrong shape.
    #[error(transparent)]
    Invalid(#[from] serde_json::Error),
}

/// The parts of a Rook `CephCluster` the planner reads. Everything else is ignored.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CephClusterManifest {
    /// `apiVersion`.
    #[serde(default)]
    pub api_version: Option<String>,
    /// `kind`.
    #[serde(default)]
    pub kind: Option<String>,
    /// `metadata`.
    #[serde(default)]
    pub metadata: ManifestMetadata,
    /// `spec`.
    #[serde(default)]
    pub spec: Option<CephClusterSpec>,
}

/// `metadata` of a CephCluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ManifestMetadata {
    /// `metadata.name`.
    #[serde(default)]
    pub name: Option<String>,
    /// `metadata.namespace`.
    #[serde(default)]
    pub namespace: Option<String>,
    /// `metadata.uid` (present on objects read from a cluster).
    #[serde(default)]
    pub uid: Option<String>,
}

/// `spec` of a CephCluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CephClusterSpec {
    /// `spec.cephVersion`.
    #[serde(default)]
    pub ceph_version: Option<CephVersionSpec>,
    /// `spec.mon`.
    #[serde(default)]
    pub mon: Option<MonSpec>,
    /// `spec.network`.
    #[serde(default)]
    pub network: Option<NetworkSpec>,
}

/// `spec.cephVersion`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CephVersionSpec {
    /// The Ceph image.
    #[serde(default)]
    pub image: Option<String>,
}

/// `spec.mon`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonSpec {
    /// The number of mons.
    #[serde(default)]
    pub count: Option<u32>,
}

/// `spec.network`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    /// `provider`: empty, `host` or `multus`.
    #[serde(default)]
    pub provider: Option<String>,
    /// Deprecated `hostNetwork: true`.
    #[serde(default)]
    pub host_network: Option<bool>,
    /// `IPv4` or `IPv6`.
    #[serde(default)]
    pub ip_family: Option<String>,
    /// Dual stack.
    #[serde(default)]
    pub dual_stack: Option<bool>,
    /// `connections`.
    #[serde(default)]
    pub connections: Option<ConnectionsSpec>,
    /// `multiClusterService`.
    #[serde(default)]
    pub multi_cluster_service: Option<McsSettings>,
}

/// `spec.network.connections`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ConnectionsSpec {
    /// `requireMsgr2`.
    #[serde(default)]
    pub require_msgr2: Option<bool>,
    /// `encryption.enabled`.
    #[serde(default)]
    pub encryption: Option<Toggle>,
    /// `compression.enabled`.
    #[serde(default)]
    pub compression: Option<Toggle>,
}

/// A `{enabled: bool}` block.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Toggle {
    /// `enabled`.
    #[serde(default)]
    pub enabled: Option<bool>,
}

impl CephClusterManifest {
    /// The one CephCluster among a manifest file's `documents` (parsed from YAML or JSON);
    /// documents of other kinds (a CephBlockPool, say) are skipped.
    ///
    /// ```
    /// use ceph_address_plan::manifest::CephClusterManifest;
    /// let pool = serde_json::json!({"apiVersion": "ceph.rook.io/v1", "kind": "CephBlockPool"});
    /// let cluster = serde_json::json!({"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster",
    ///     "metadata": {"name": "rook-ceph", "namespace": "rook-ceph"}});
    /// let manifest = CephClusterManifest::from_documents(&[pool.clone(), cluster])?;
    /// assert_eq!(manifest.metadata.name.as_deref(), Some("rook-ceph"));
    /// let refused = CephClusterManifest::from_documents(&[pool]).unwrap_err();
    /// assert_eq!(
    ///     refused.to_string(),
    ///     "the manifest must hold exactly one CephCluster document; it holds: CephBlockPool"
    /// );
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn from_documents(documents: &[serde_json::Value]) -> Result<Self, DocumentsError> {
        let kind = |document: &serde_json::Value| {
            document
                .get("kind")
                .and_then(|k| k.as_str())
                .map(str::to_owned)
        };
        let mut clusters = documents
            .iter()
            .filter(|d| kind(d).as_deref() == Some(rook::CEPH_CLUSTER_KIND));
        let (Some(cluster), None) = (clusters.next(), clusters.next()) else {
            return Err(DocumentsError::NotOneCephCluster {
                kinds: documents
                    .iter()
                    .map(|d| kind(d).unwrap_or_else(|| "<no kind>".to_owned()))
                    .collect(),
            });
        };
        Ok(Self::deserialize(cluster)?)
    }

    /// The planner settings the manifest describes (Rook's defaults where it is silent; the
    /// Ceph version from the image tag).
    ///
    /// ```
    /// use ceph_address_plan::manifest::CephClusterManifest;
    /// let manifest: CephClusterManifest = serde_json::from_str(r#"{
    ///   "apiVersion": "ceph.rook.io/v1", "kind": "CephCluster",
    ///   "metadata": {"name": "rook-ceph", "namespace": "rook-ceph"},
    ///   "spec": {"cephVersion": {"image": "quay.io/ceph/ceph:v18.2.4"},
    ///            "network": {"connections": {"encryption": {"enabled": true}},
    ///                        "multiClusterService": {"enabled": true, "clusterID": "east"}}}
    /// }"#)?;
    /// let settings = manifest.settings()?;
    /// assert!(settings.mcs_enabled() && settings.require_msgr2);
    /// assert_eq!(settings.ceph_version.unwrap().to_string(), "18.2.4");
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn settings(&self) -> Result<ClusterSettings, ManifestError> {
        let api_version = self.api_version.as_deref().unwrap_or("");
        let kind = self.kind.as_deref().unwrap_or("");
        if kind != rook::CEPH_CLUSTER_KIND || !api_version.starts_with("ceph.rook.io/") {
            return Err(ManifestError::NotACephCluster {
                found: format!("{api_version}/{kind}"),
            });
        }
        let name = self
            .metadata
            .name
            .clone()
            .ok_or(ManifestError::MissingMetadata("name"))?;
        let namespace = self
            .metadata
            .namespace
            .clone()
            .ok_or(ManifestError::MissingMetadata("namespace"))?;
        let mut settings = ClusterSettings::new(name, namespace);
        settings.uid = self.metadata.uid.clone();
        let spec = self.spec.clone().unwrap_or_default();
        settings.ceph_version = spec
            .ceph_version
            .and_then(|v| v.image)
            .and_then(|image| CephVersion::from_image(&image));
        let network = spec.network.unwrap_or_default();
        settings.host_network =
            network.provider.as_deref() == Some("host") || network.host_network == Some(true);
        let dual_stack = network.dual_stack == Some(true);
        settings.ip_family = match (network.ip_family.as_deref(), dual_stack) {
            (_, true) => IpFamily::DualStack,
            (None | Some("" | "IPv4"), false) => IpFamily::IPv4,
            (Some("IPv6"), false) => IpFamily::IPv6,
            (Some(other), false) => return Err(ManifestError::InvalidIpFamily(other.to_owned())),
        };
        let connections = network.connections.unwrap_or_default();
        let on = |t: Option<Toggle>| t.and_then(|t| t.enabled) == Some(true);
        settings.require_msgr2 = connections.require_msgr2 == Some(true)
            || on(connections.encryption)
            || on(connections.compression);
        settings.multi_cluster_service = network.multi_cluster_service.unwrap_or_default();
        Ok(settings)
    }

    /// `spec.mon.count`, Rook's default 3 when absent.
    pub fn mon_count(&self) -> u32 {
        self.spec
            .as_ref()
            .and_then(|s| s.mon.as_ref())
            .and_then(|m| m.count)
            .unwrap_or(3)
    }
}

/// Settings an inventory file may add to (or correct in) what the CephCluster manifest says.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct SettingsOverrides {
    /// The Ceph version actually running (Rook detects it from the image).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceph_version: Option<CephVersion>,
    /// Namespace of Rook's operator.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub operator_namespace: Option<String>,
    /// The clusterset name form to resolve.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_name_form: Option<DnsNameForm>,
    /// The clusterset zone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clusterset_zone: Option<String>,
    /// The CephCluster's uid (for owner references).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
}

impl SettingsOverrides {
    /// Applies the overrides that are set.
    pub fn apply(&self, settings: &mut ClusterSettings) {
        if let Some(v) = self.ceph_version {
            settings.ceph_version = Some(v);
        }
        if let Some(ns) = &self.operator_namespace {
            settings.operator_namespace.clone_from(ns);
        }
        if let Some(form) = self.dns_name_form {
            settings.dns_name_form = form;
        }
        if let Some(zone) = &self.clusterset_zone {
            settings.clusterset_zone.clone_from(zone);
        }
        if let Some(uid) = &self.uid {
            settings.uid = Some(uid.clone());
        }
    }
}

/// The inventory file of `mcsctl plan --inventory`: an [`Inventory`] plus optional `settings`.
/// Unknown keys are rejected, so a typo does not silently drop data.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct InventoryFile {
    /// Settings overrides.
    #[serde(default)]
    pub settings: SettingsOverrides,
    /// See [`Inventory::max_mon_id`].
    #[serde(
        default,
        deserialize_with = "crate::input::max_mon_id::deserialize",
        serialize_with = "crate::input::max_mon_id::serialize"
    )]
    pub max_mon_id: Option<u32>,
    /// See [`Inventory::mons`].
    #[serde(default)]
    pub mons: Vec<MonInput>,
    /// See [`Inventory::external_mons`].
    #[serde(default)]
    pub external_mons: Vec<ExternalMon>,
    /// See [`Inventory::osds`].
    #[serde(default)]
    pub osds: Vec<OsdInput>,
    /// See [`Inventory::global_ips`].
    #[serde(default, rename = "globalIPs")]
    pub global_ips: BTreeMap<Daemon, IpAddr>,
    /// See [`Inventory::exports`].
    #[serde(default)]
    pub exports: BTreeMap<Daemon, ExportStatus>,
}

impl InventoryFile {
    /// The settings overrides and the inventory.
    pub fn into_parts(self) -> (SettingsOverrides, Inventory) {
        (
            self.settings,
            Inventory {
                max_mon_id: self.max_mon_id,
                mons: self.mons,
                external_mons: self.external_mons,
                osds: self.osds,
                global_ips: self.global_ips,
                exports: self.exports,
            },
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(json: &str) -> CephClusterManifest {
        serde_json::from_str(json).unwrap()
    }

    #[test]
    fn defaults_are_rooks() {
        let m = manifest(
            r#"{"apiVersion":"ceph.rook.io/v1","kind":"CephCluster","metadata":{"name":"c","namespace":"ns"}}"#,
        );
        let s = m.settings().unwrap();
        assert_eq!(s, ClusterSettings::new("c", "ns"));
        assert_eq!(m.mon_count(), 3);
    }

    #[test]
    fn network_settings_are_read() {
        let m = manifest(
            r#"{"apiVersion":"ceph.rook.io/v1","kind":"CephCluster","metadata":{"name":"c","namespace":"ns","uid":"u-1"},
                "spec":{"mon":{"count":5},"network":{"provider":"host","ipFamily":"IPv6","connections":{"compression":{"enabled":true}}}}}"#,
        );
        let s = m.settings().unwrap();
        assert!(s.host_network && s.require_msgr2);
        assert_eq!(s.ip_family, IpFamily::IPv6);
        assert_eq!(s.uid.as_deref(), Some("u-1"));
        assert_eq!(m.mon_count(), 5);
        let dual = manifest(
            r#"{"apiVersion":"ceph.rook.io/v1","kind":"CephCluster","metadata":{"name":"c","namespace":"ns"},
                "spec":{"network":{"hostNetwork":true,"dualStack":true}}}"#,
        );
        let s = dual.settings().unwrap();
        assert!(s.host_network);
        assert_eq!(s.ip_family, IpFamily::DualStack);
    }

    #[test]
    fn wrong_documents_say_what_they_are() {
        let pool = manifest(
            r#"{"apiVersion":"ceph.rook.io/v1","kind":"CephBlockPool","metadata":{"name":"p"}}"#,
        );
        assert_eq!(
            pool.settings().unwrap_err().to_string(),
            "the document is \"ceph.rook.io/v1/CephBlockPool\", not a ceph.rook.io/v1 CephCluster: pass a CephCluster manifest"
        );
        let no_ns = manifest(
            r#"{"apiVersion":"ceph.rook.io/v1","kind":"CephCluster","metadata":{"name":"c"}}"#,
        );
        assert!(
            no_ns
                .settings()
                .unwrap_err()
                .to_string()
                .contains("metadata.namespace")
        );
        let bad_family = manifest(
            r#"{"apiVersion":"ceph.rook.io/v1","kind":"CephCluster","metadata":{"name":"c","namespace":"n"},"spec":{"network":{"ipFamily":"ipv6"}}}"#,
        );
        assert!(
            matches!(bad_family.settings(), Err(ManifestError::InvalidIpFamily(f)) if f == "ipv6")
        );
    }

    #[test]
    fn a_manifest_holds_exactly_one_cephcluster() {
        let doc = |kind: &str| serde_json::json!({"apiVersion": "ceph.rook.io/v1", "kind": kind});
        let no_kind = serde_json::json!({"metadata": {}});
        let err =
            CephClusterManifest::from_documents(&[doc("CephCluster"), no_kind, doc("CephCluster")])
                .unwrap_err();
        assert_eq!(
            err.to_string(),
            "the manifest must hold exactly one CephCluster document; it holds: CephCluster, <no kind>, CephCluster"
        );
        let err = CephClusterManifest::from_documents(&[]).unwrap_err();
        assert!(err.to_string().ends_with("it holds: nothing"), "{err}");
        let mut bad = doc("CephCluster");
        bad["spec"] = serde_json::json!({"mon": {"count": "three"}});
        let err = CephClusterManifest::from_documents(&[bad]).unwrap_err();
        assert!(matches!(err, DocumentsError::Invalid(_)), "{err}");
    }

    #[test]
    fn yaml_inventories_read_mon_ids_that_look_like_booleans_and_ipv6_endpoints() {
        let yaml = r#"
maxMonId: "-1"
mons:
  - id: y
    advertised: "[fd00::1]:3300"
  - id: n
    clusterIP: fd00:10::5
  - id: "on"
globalIPs:
  rook-ceph-mon-n: fd00:242::5
"#;
        let (_, inventory) = serde_saphyr::from_str::<InventoryFile>(yaml)
            .unwrap()
            .into_parts();
        let ids: Vec<&str> = inventory.mons.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["y", "n", "on"]);
        assert_eq!(
            inventory.mons[0].advertised,
            Some("[fd00::1]:3300".parse().unwrap())
        );
        assert_eq!(inventory.max_mon_id, None);
        assert_eq!(inventory.global_ips.len(), 1);
    }

    #[test]
    fn inventory_files_reject_typos() {
        let err = serde_json::from_str::<InventoryFile>(r#"{"globalIps": {}}"#).unwrap_err();
        assert!(
            err.to_string().contains("unknown field `globalIps`"),
            "{err}"
        );
        let err = serde_json::from_str::<InventoryFile>(r#"{"osds": [{"id": 1, "hots": "x"}]}"#)
            .unwrap_err();
        assert!(err.to_string().contains("unknown field `hots`"), "{err}");
    }
}

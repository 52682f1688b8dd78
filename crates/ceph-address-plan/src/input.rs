//! What the planner reads: the cluster's identity and network settings, and its inventory of
//! daemons, global IPs and export conditions. Plain serde types, independent of kube.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, SocketAddr};
use std::str::FromStr;

use serde::{Deserialize, Deserializer, Serialize, Serializer};

use crate::rook;
use crate::{CephVersion, MonId};

/// Everything a plan is made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanInput {
    /// The cluster's identity and network settings.
    pub cluster: ClusterSettings,
    /// The daemons and what is known about their addresses.
    #[serde(default)]
    pub inventory: Inventory,
}

/// A Ceph daemon that gets an address: a mon (by Rook letter) or an OSD (by number).
///
/// Displays as Ceph names it (`mon.a`, `osd.7`). Parses from that form or from the daemon's Rook
/// Service name (`rook-ceph-mon-a`, `rook-ceph-osd-7`), so inventory maps can use either; it
/// serializes as the Rook Service name.
///
/// ```
/// use ceph_address_plan::Daemon;
///
/// let osd: Daemon = "rook-ceph-osd-7".parse()?;
/// assert_eq!(osd, "osd.7".parse()?);
/// assert_eq!(osd.to_string(), "osd.7");
/// assert_eq!(osd.service_name(), "rook-ceph-osd-7");
/// # Ok::<(), ceph_address_plan::InvalidDaemon>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Daemon {
    /// A mon.
    Mon(MonId),
    /// An OSD.
    Osd(u32),
}

/// Text that names no mon or OSD.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{0:?} names no mon or OSD: use mon.<id> / rook-ceph-mon-<id> (id a, b, ..., aa, ...) or osd.<n> / rook-ceph-osd-<n>"
)]
pub struct InvalidDaemon(pub String);

impl Daemon {
    /// The Rook Service (and Deployment) name of the daemon: `rook-ceph-mon-<id>` or
    /// `rook-ceph-osd-<n>`.
    pub fn service_name(&self) -> String {
        match self {
            Self::Mon(id) => format!("{}{id}", rook::MON_NAME_PREFIX),
            Self::Osd(id) => format!("{}{id}", rook::OSD_NAME_PREFIX),
        }
    }

    /// `mon` or `osd`.
    pub fn daemon_type(&self) -> &'static str {
        match self {
            Self::Mon(_) => "mon",
            Self::Osd(_) => "osd",
        }
    }

    /// The id part: the mon letters or the OSD number.
    pub fn id_string(&self) -> String {
        match self {
            Self::Mon(id) => id.to_string(),
            Self::Osd(id) => id.to_string(),
        }
    }
}

impl fmt::Display for Daemon {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Mon(id) => write!(f, "mon.{id}"),
            Self::Osd(id) => write!(f, "osd.{id}"),
        }
    }
}

impl FromStr for Daemon {
    type Err = InvalidDaemon;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let invalid = || InvalidDaemon(s.to_owned());
        let mon = s
            .strip_prefix("mon.")
            .or_else(|| s.strip_prefix(rook::MON_NAME_PREFIX));
        if let Some(id) = mon {
            return id.parse().map(Self::Mon).map_err(|_| invalid());
        }
        let osd = s
            .strip_prefix("osd.")
            .or_else(|| s.strip_prefix(rook::OSD_NAME_PREFIX));
        match osd {
            // Digits only, and no leading zeros: "rook-ceph-osd-07" is not a Rook name.
            Some(n) if !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()) => {
                if n.len() > 1 && n.starts_with('0') {
                    return Err(invalid());
                }
                n.parse().map(Self::Osd).map_err(|_| invalid())
            }
            _ => Err(invalid()),
        }
    }
}

impl Serialize for Daemon {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&format_args!("{}", self.service_name()))
    }
}

impl<'de> Deserialize<'de> for Daemon {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        text.parse().map_err(serde::de::Error::custom)
    }
}

/// `spec.network.multiClusterService` of a CephCluster.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct McsSettings {
    /// Export mon and OSD Services and address daemons by their global IPs.
    #[serde(default)]
    pub enabled: bool,
    /// This cluster's id in the clusterset (a DNS label). Rook/Lighthouse prefix clusterset names
    /// with it; the unique-name form puts it in front of the exported Service names.
    #[serde(default, rename = "clusterID")]
    pub cluster_id: String,
}

/// Which clusterset DNS name a daemon's global IP is resolved from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DnsNameForm {
    /// Rook's and Submariner Lighthouse's `<clusterID>.<svc>.<ns>.svc.<zone>`, for Rook's Service
    /// names (`rook-ceph-mon-a`). The MCS DNS specification does not define this name.
    #[default]
    ClusterIdPrefix,
    /// The spec-defined `<svc>.<ns>.svc.<zone>`, for extra exported Services with cluster-unique
    /// names `<clusterID>-rook-ceph-mon-a` (same selector and ports as Rook's Service), so that
    /// identically named Rook Services of two clusters never merge into one ServiceImport
    /// (rook/rook#12065).
    UniqueServiceName,
}

/// The IP family of the cluster network (`spec.network.ipFamily` and `dualStack`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum IpFamily {
    /// IPv4 only (Rook's default).
    #[default]
    IPv4,
    /// IPv6 only.
    IPv6,
    /// Dual stack: addresses of either family.
    DualStack,
}

impl IpFamily {
    /// Whether `ip` belongs to this family.
    pub fn admits(self, ip: IpAddr) -> bool {
        match self {
            Self::IPv4 => ip.is_ipv4(),
            Self::IPv6 => ip.is_ipv6(),
            Self::DualStack => true,
        }
    }
}

impl fmt::Display for IpFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::IPv4 => "IPv4",
            Self::IPv6 => "IPv6",
            Self::DualStack => "dual-stack",
        })
    }
}

/// The cluster's identity and network settings: what a CephCluster (and the operator's
/// configuration) says.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ClusterSettings {
    /// `metadata.name` of the CephCluster (the `app.kubernetes.io/part-of` label).
    pub name: String,
    /// The cluster namespace.
    pub namespace: String,
    /// `metadata.uid` of the CephCluster; owner references are set only when it is known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uid: Option<String>,
    /// Namespace of Rook's operator (the `rook.io/operator-namespace` label).
    #[serde(default = "default_operator_namespace")]
    pub operator_namespace: String,
    /// `spec.network.multiClusterService`.
    #[serde(default)]
    pub multi_cluster_service: McsSettings,
    /// Which clusterset name to resolve.
    #[serde(default)]
    pub dns_name_form: DnsNameForm,
    /// The clusterset DNS zone.
    #[serde(default = "default_zone")]
    pub clusterset_zone: String,
    /// msgr2 is required: `spec.network.connections.requireMsgr2`, or on-wire encryption or
    /// compression enabled.
    #[serde(default)]
    pub require_msgr2: bool,
    /// The IP family of the cluster network.
    #[serde(default)]
    pub ip_family: IpFamily,
    /// The Ceph version, if known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ceph_version: Option<CephVersion>,
    /// Host networking (`spec.network.provider: host` or `hostNetwork: true`).
    #[serde(default)]
    pub host_network: bool,
}

fn default_operator_namespace() -> String {
    rook::DEFAULT_OPERATOR_NAMESPACE.to_owned()
}

fn default_zone() -> String {
    mcs_types::names::DEFAULT_ZONE.to_owned()
}

impl ClusterSettings {
    /// Settings with Rook's defaults for a cluster `name` in `namespace`: MCS off, msgr1
    /// allowed, IPv4, pod networking, Ceph version unknown.
    pub fn new(name: impl Into<String>, namespace: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            namespace: namespace.into(),
            uid: None,
            operator_namespace: default_operator_namespace(),
            multi_cluster_service: McsSettings::default(),
            dns_name_form: DnsNameForm::default(),
            clusterset_zone: default_zone(),
            require_msgr2: false,
            ip_family: IpFamily::default(),
            ceph_version: None,
            host_network: false,
        }
    }

    /// Whether MCS is enabled.
    pub fn mcs_enabled(&self) -> bool {
        self.multi_cluster_service.enabled
    }

    /// The port a new mon listens on: 3300 when msgr2 is required, else 6789 (Rook's
    /// `newMonConfig`).
    pub fn new_mon_port(&self) -> u16 {
        if self.require_msgr2 {
            rook::MON_MSGR2_PORT
        } else {
            rook::MON_MSGR1_PORT
        }
    }
}

/// The daemons of a cluster and what is known about their addresses so far.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Inventory {
    /// `maxMonId` as stored in `rook-ceph-mon-endpoints`: the index of the highest mon id ever
    /// allocated (`-1` or absent for none). Accepts a number or Rook's decimal string.
    #[serde(
        default,
        deserialize_with = "max_mon_id::deserialize",
        serialize_with = "max_mon_id::serialize"
    )]
    pub max_mon_id: Option<u32>,
    /// The mons Rook knows (`rook-ceph-mon-endpoints`), existing or being created.
    #[serde(default)]
    pub mons: Vec<MonInput>,
    /// Mons of an external cluster that clients also use (`externalMons`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub external_mons: Vec<ExternalMon>,
    /// The OSDs.
    #[serde(default)]
    pub osds: Vec<OsdInput>,
    /// Global IPs resolved so far, per daemon (keys: `rook-ceph-mon-a`, `rook-ceph-osd-7`, or
    /// `mon.a`, `osd.7`).
    #[serde(default, rename = "globalIPs")]
    pub global_ips: BTreeMap<Daemon, IpAddr>,
    /// Status of the ServiceExports, per daemon (same keys as `globalIPs`).
    #[serde(default)]
    pub exports: BTreeMap<Daemon, ExportStatus>,
}

impl Inventory {
    /// The inventory of a cluster about to be created: mons `a`, `b`, ... (`count` of them) with
    /// nothing known yet, no OSDs.
    ///
    /// ```
    /// let inventory = ceph_address_plan::Inventory::new_cluster(3);
    /// let ids: Vec<String> = inventory.mons.iter().map(|m| m.id.to_string()).collect();
    /// assert_eq!(ids, ["a", "b", "c"]);
    /// ```
    pub fn new_cluster(mon_count: u32) -> Self {
        Self {
            mons: (0..mon_count)
                .map(|index| MonInput::new(MonId::from_index(index)))
                .collect(),
            ..Self::default()
        }
    }
}

/// One mon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct MonInput {
    /// The mon id.
    pub id: MonId,
    /// `spec.clusterIP` of its Service `rook-ceph-mon-<id>`, once Kubernetes assigned one.
    #[serde(default, rename = "clusterIP", skip_serializing_if = "Option::is_none")]
    pub cluster_ip: Option<IpAddr>,
    /// The node the mon is scheduled to (its `mapping` entry).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<NodeInfo>,
    /// The mon's zone (stretch clusters, `mon.zones`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub zone: Option<String>,
    /// Storage request of the mon's PVC, for PVC-backed mons (e.g. `10Gi`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pvc_size: Option<String>,
    /// The address the mon advertises now (its monmap entry, `ip:port`), if it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertised: Option<SocketAddr>,
    /// The mon is out of quorum (Rook's `outOfQuorum`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub out_of_quorum: bool,
}

impl MonInput {
    /// A mon with nothing known but its id.
    pub fn new(id: MonId) -> Self {
        Self {
            id,
            cluster_ip: None,
            node: None,
            zone: None,
            pvc_size: None,
            advertised: None,
            out_of_quorum: false,
        }
    }
}

/// Where a mon is scheduled (Rook's `MonScheduleInfo`).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct NodeInfo {
    /// Node name.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub name: String,
    /// The node's hostname label.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub hostname: String,
    /// The node's IP (the mon's address with host networking).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub address: Option<IpAddr>,
}

/// A mon of another (external) cluster listed in `rook-ceph-mon-endpoints`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct ExternalMon {
    /// Its name as in `data` (no `=` or `,`).
    pub name: String,
    /// Its endpoint, `ip:port` (`[ip]:port` for IPv6).
    pub endpoint: SocketAddr,
}

/// One OSD and the properties Rook puts in its labels.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct OsdInput {
    /// The OSD id.
    pub id: u32,
    /// The CRUSH host (or PVC name for portable OSDs): the `failure-domain` label.
    #[serde(default)]
    pub host: String,
    /// The OSD may move between nodes (PVC-backed).
    #[serde(default)]
    pub portable: bool,
    /// CRUSH device class (`hdd`, `ssd`, `nvme`, or empty).
    #[serde(default)]
    pub device_class: String,
    /// Device type, when Rook recorded one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device_type: Option<String>,
    /// OSD store (`bluestore`, `bluestore-rdr`).
    #[serde(default = "default_store")]
    pub store: String,
    /// The OSD is encrypted.
    #[serde(default)]
    pub encrypted: bool,
    /// CRUSH location as in the Deployment's `--crush-location` (`root=default host=node-1`);
    /// each `key=value` becomes a `topology-location-<key>` label.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub location: String,
    /// The `--public-addr` the OSD Deployment has now, if any (none: it advertises its pod IP).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub advertised: Option<IpAddr>,
}

fn default_store() -> String {
    "bluestore".to_owned()
}

impl OsdInput {
    /// An OSD on `host` with Rook's defaults (bluestore, not portable, not encrypted).
    pub fn new(id: u32, host: impl Into<String>) -> Self {
        Self {
            id,
            host: host.into(),
            portable: false,
            device_class: String::new(),
            device_type: None,
            store: default_store(),
            encrypted: false,
            location: String::new(),
            advertised: None,
        }
    }
}

/// The status of a ServiceExport as far as the planner reads it: its conditions. Fields other
/// than `conditions` (and condition fields other than type, status, reason, message) are
/// ignored, so `kubectl get serviceexport -o yaml` status blocks can be pasted in.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportStatus {
    /// The export's conditions (`Valid`, `Ready`, `Conflict`).
    #[serde(default)]
    pub conditions: Vec<ExportCondition>,
}

/// One condition of a ServiceExport.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ExportCondition {
    /// `Valid`, `Ready` or `Conflict`.
    #[serde(rename = "type")]
    pub type_: String,
    /// `True`, `False` or `Unknown`.
    pub status: String,
    /// Machine-readable reason.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub reason: String,
    /// Human-readable message.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub message: String,
}

impl From<&mcs_types::ServiceExportStatus> for ExportStatus {
    fn from(status: &mcs_types::ServiceExportStatus) -> Self {
        Self {
            conditions: status
                .conditions
                .iter()
                .map(|c| ExportCondition {
                    type_: c.type_.clone(),
                    status: c.status.clone(),
                    reason: c.reason.clone(),
                    message: c.message.clone(),
                })
                .collect(),
        }
    }
}

/// `maxMonId` comes as a number or as Rook's decimal string; `-1` means none.
pub(crate) mod max_mon_id {
    use serde::{Deserialize, Deserializer, Serializer};

    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Raw {
        Number(i64),
        Text(String),
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<u32>, D::Error> {
        let raw: Option<Raw> = Option::deserialize(d)?;
        let number = match raw {
            None => return Ok(None),
            Some(Raw::Number(n)) => n,
            Some(Raw::Text(t)) => t.trim().parse::<i64>().map_err(|_| {
                serde::de::Error::custom(format!(
                    "maxMonId {t:?} is not a number: use the decimal index Rook stores, or -1 for none"
                ))
            })?,
        };
        if number == -1 {
            return Ok(None);
        }
        u32::try_from(number).map(Some).map_err(|_| {
            serde::de::Error::custom(format!(
                "maxMonId {number} is out of range: use -1 (no mon yet) or a mon index from 0"
            ))
        })
    }

    // Serde's `serialize_with` passes the field by reference.
    #[allow(clippy::ref_option, clippy::trivially_copy_pass_by_ref)]
    pub fn serialize<S: Serializer>(value: &Option<u32>, s: S) -> Result<S::Ok, S::Error> {
        match value {
            Some(v) => s.serialize_i64(i64::from(*v)),
            None => s.serialize_i64(-1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn daemons_parse_from_both_forms_and_order_mons_first() {
        let mut daemons: Vec<Daemon> = ["osd.10", "rook-ceph-osd-2", "mon.aa", "rook-ceph-mon-b"]
            .iter()
            .map(|s| s.parse().unwrap())
            .collect();
        daemons.sort();
        let names: Vec<String> = daemons.iter().map(ToString::to_string).collect();
        assert_eq!(names, ["mon.b", "mon.aa", "osd.2", "osd.10"]);
        for bad in [
            "mon.A",
            "osd.-1",
            "osd.07",
            "osd.",
            "rook-ceph-mgr-a",
            "osd.99999999999",
        ] {
            let err = bad.parse::<Daemon>().unwrap_err();
            assert!(err.to_string().contains("names no mon or OSD"), "{bad}");
        }
    }

    #[test]
    fn max_mon_id_reads_numbers_strings_and_minus_one() {
        let read = |yaml: &str| serde_json::from_str::<Inventory>(yaml).map(|i| i.max_mon_id);
        assert_eq!(read(r#"{"maxMonId": 2}"#).unwrap(), Some(2));
        assert_eq!(read(r#"{"maxMonId": "25"}"#).unwrap(), Some(25));
        assert_eq!(read(r#"{"maxMonId": "-1"}"#).unwrap(), None);
        assert_eq!(read(r"{}").unwrap(), None);
        let err = read(r#"{"maxMonId": "two"}"#).unwrap_err().to_string();
        assert!(err.contains("maxMonId \"two\" is not a number"), "{err}");
        let err = read(r#"{"maxMonId": -5}"#).unwrap_err().to_string();
        assert!(err.contains("out of range"), "{err}");
        let json = serde_json::to_value(Inventory::default()).unwrap();
        assert_eq!(json["maxMonId"], -1);
    }

    #[test]
    fn export_status_reads_kubectl_output_and_mcs_types() {
        let status: ExportStatus = serde_json::from_str(
            r#"{"conditions":[{"type":"Valid","status":"False","reason":"NoService",
                "message":"Service not found","lastTransitionTime":"2024-01-01T00:00:00Z",
                "observedGeneration":1}]}"#,
        )
        .unwrap();
        assert_eq!(status.conditions[0].reason, "NoService");
        let typed: mcs_types::ServiceExportStatus = serde_json::from_str(
            r#"{"conditions":[{"type":"Ready","status":"True","reason":"Exported",
                "message":"","lastTransitionTime":"2024-01-01T00:00:00Z"}]}"#,
        )
        .unwrap();
        let converted = ExportStatus::from(&typed);
        assert_eq!(converted.conditions[0].type_, "Ready");
        assert_eq!(converted.conditions[0].status, "True");
    }
}

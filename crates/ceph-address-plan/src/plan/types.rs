//! What a plan is made of: each daemon's plan and address, the Services, exports and lookups
//! that must exist, the mon endpoints and `mon_host`, and the plan's readiness.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use mcs_types::names::ClustersetName;

use crate::MonId;
use crate::format;
use crate::input::{ClusterSettings, Daemon, MonInput, OsdInput};
use crate::rook;

/// What a daemon's address is still waiting for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum WaitFor {
    /// MCS: the clusterset name of the daemon's export has not resolved yet.
    GlobalIp,
    /// No MCS: the mon's Service has no cluster IP yet.
    ClusterIp,
}

/// The one address the plan gives a daemon.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Address {
    /// MCS: the global IP of the daemon's export.
    Global(IpAddr),
    /// No MCS: the cluster IP of the mon's Service.
    ClusterIp(IpAddr),
    /// Host networking: the IP of the mon's node.
    Node(IpAddr),
    /// An OSD without MCS advertises its pod IP (Rook's default; no address arguments).
    PodIp,
    /// Not known yet.
    Waiting(WaitFor),
    /// A running mon whose address is wrong for the settings keeps this one until a new mon
    /// replaces it: a mon's identity is its address, so it cannot move (see
    /// [`Plan::mon_replacements`](crate::Plan::mon_replacements)).
    Retiring(IpAddr),
}

impl Address {
    /// The IP, where there is one.
    pub fn ip(&self) -> Option<IpAddr> {
        match *self {
            Self::Global(ip) | Self::ClusterIp(ip) | Self::Node(ip) | Self::Retiring(ip) => {
                Some(ip)
            }
            Self::PodIp | Self::Waiting(_) => None,
        }
    }
}

/// What has to happen to a daemon for it to match the plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DaemonStatus {
    /// It advertises its planned address.
    UpToDate,
    /// A mon that does not run yet: start it with the planned arguments.
    Start,
    /// An OSD whose Deployment advertises another address (`advertised`, none for the pod IP):
    /// update its arguments.
    UpdateArgs {
        /// The `--public-addr` it has now, if any.
        advertised: Option<IpAddr>,
    },
    /// A running mon on a wrong address: replace it with a new mon (mon-failover).
    Replace {
        /// What it advertises.
        advertised: SocketAddr,
        /// The IP a mon of this cluster should advertise, when known (none: an MCS mon on its
        /// cluster IP, whose replacement gets its own global IP).
        expected: Option<IpAddr>,
    },
    /// Its address is not known yet.
    Waiting,
}

impl DaemonStatus {
    /// Whether nothing has to happen.
    pub fn is_up_to_date(&self) -> bool {
        matches!(self, Self::UpToDate)
    }
}

/// The plan for one mon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonPlan {
    pub(super) input: MonInput,
    pub(super) port: u16,
    pub(super) address: Address,
    pub(super) status: DaemonStatus,
}

impl MonPlan {
    /// The mon id.
    pub fn id(&self) -> &MonId {
        &self.input.id
    }

    /// What the inventory said about the mon.
    pub fn input(&self) -> &MonInput {
        &self.input
    }

    /// The mon's port: the advertised one, or 6789 / 3300 (msgr2 required) for a new mon.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The planned address.
    pub fn address(&self) -> Address {
        self.address
    }

    /// What has to happen.
    pub fn status(&self) -> DaemonStatus {
        self.status
    }

    /// The endpoint clients use for this mon (`data`, `mon_host`, CSI, peer token): what it
    /// advertises if it runs, else its planned address; `None` while that is unknown.
    pub fn endpoint(&self) -> Option<SocketAddr> {
        self.input
            .advertised
            .or_else(|| self.address.ip().map(|ip| SocketAddr::new(ip, self.port)))
    }

    /// Whether MCS exports this mon's Service (every mon except one being replaced).
    pub(super) fn exported(&self, settings: &ClusterSettings) -> bool {
        settings.mcs_enabled() && !matches!(self.address, Address::Retiring(_))
    }
}

/// The plan for one OSD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsdPlan {
    pub(super) input: OsdInput,
    pub(super) address: Address,
    pub(super) status: DaemonStatus,
}

impl OsdPlan {
    /// The OSD id.
    pub fn id(&self) -> u32 {
        self.input.id
    }

    /// What the inventory said about the OSD.
    pub fn input(&self) -> &OsdInput {
        &self.input
    }

    /// The planned address.
    pub fn address(&self) -> Address {
        self.address
    }

    /// What has to happen.
    pub fn status(&self) -> DaemonStatus {
        self.status
    }
}

/// A named TCP port of a Service or container (target port = port, as Rook sets them).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct NamedPort {
    /// Port name.
    pub name: &'static str,
    /// Port number.
    pub port: u16,
}

/// Ports of a mon on `mon_port` (Rook's `createService`): `tcp-msgr1` on the mon port unless it
/// is 3300, then `tcp-msgr2` on 3300.
pub fn mon_ports(mon_port: u16) -> Vec<NamedPort> {
    let mut ports = Vec::with_capacity(2);
    if mon_port != rook::MON_MSGR2_PORT {
        ports.push(NamedPort {
            name: rook::MON_MSGR1_PORT_NAME,
            port: mon_port,
        });
    }
    ports.push(NamedPort {
        name: rook::MON_MSGR2_PORT_NAME,
        port: rook::MON_MSGR2_PORT,
    });
    ports
}

/// Ports of an exported OSD (Rook's `getOSDServicePorts`): `osd-port-v2` 6800, and
/// `osd-port-v1` 6801 unless msgr2 is required.
pub fn osd_ports(require_msgr2: bool) -> Vec<NamedPort> {
    let mut ports = vec![NamedPort {
        name: rook::OSD_MSGR2_PORT_NAME,
        port: rook::OSD_MSGR2_PORT,
    }];
    if !require_msgr2 {
        ports.push(NamedPort {
            name: rook::OSD_MSGR1_PORT_NAME,
            port: rook::OSD_MSGR1_PORT,
        });
    }
    ports
}

/// Whether a Service is Rook's own or the cluster-unique one this crate exports instead.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ServiceRole {
    /// Rook's `rook-ceph-mon-<id>` / `rook-ceph-osd-<id>`.
    Rook,
    /// `<clusterID>-rook-ceph-...`, exported in the [`DnsNameForm::UniqueServiceName`](crate::DnsNameForm::UniqueServiceName) form.
    Export,
}

/// A Service the plan wants to exist.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredService {
    /// Service name.
    pub name: String,
    /// The daemon it selects.
    pub daemon: Daemon,
    /// Rook's Service or an export Service.
    pub role: ServiceRole,
    /// Its ports.
    pub ports: Vec<NamedPort>,
}

/// A ServiceExport the plan wants to exist (same name and namespace as its Service).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredExport {
    /// Name of the ServiceExport and of the Service it exports.
    pub name: String,
    /// The daemon behind it.
    pub daemon: Daemon,
}

/// A clusterset name still to resolve, and the daemon waiting for it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Lookup {
    /// The name to resolve (A or AAAA, per the cluster's IP family).
    pub name: ClustersetName,
    /// The exported Service behind the name.
    pub service: String,
    /// The daemon whose address waits for it.
    pub daemon: Daemon,
}

/// A running mon that must be replaced by a new mon (the input of mon-failover).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonReplacement {
    /// The mon to replace.
    pub mon: MonId,
    /// What it advertises.
    pub advertised: SocketAddr,
    /// The IP a mon should advertise, when known.
    pub expected: Option<IpAddr>,
    /// Why, in words.
    pub reason: String,
}

/// The data of the `rook-ceph-mon-endpoints` ConfigMap, key by key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonEndpoints {
    /// `data`: `<id>=<ip:port>` joined by `,`, mons by index, then external mons by name.
    pub data: String,
    /// `mapping`: the placement JSON.
    pub mapping: String,
    /// `maxMonId`: decimal index or `-1`.
    pub max_mon_id: String,
    /// `outOfQuorum`: ids joined by `,`.
    pub out_of_quorum: String,
    /// `csi-cluster-config-json`.
    pub csi_cluster_config_json: String,
    /// `externalMons`: names joined by `,`.
    pub external_mons: String,
}

impl MonEndpoints {
    /// The ConfigMap data map.
    pub fn to_data(&self) -> BTreeMap<String, String> {
        [
            (rook::KEY_DATA, &self.data),
            (rook::KEY_MAPPING, &self.mapping),
            (rook::KEY_MAX_MON_ID, &self.max_mon_id),
            (rook::KEY_OUT_OF_QUORUM, &self.out_of_quorum),
            (rook::KEY_CSI_CLUSTER_CONFIG, &self.csi_cluster_config_json),
            (rook::KEY_EXTERNAL_MONS, &self.external_mons),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.clone()))
        .collect()
    }
}

/// The mon keys of the `rook-ceph-config` Secret.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MonHostConfig {
    /// `mon_host`: `[v2:ip:3300,v1:ip:port]` per mon in quorum, joined by `,`.
    pub mon_host: String,
    /// `mon_initial_members`: the ids of the mons in quorum, joined by `,`.
    pub mon_initial_members: String,
}

impl MonHostConfig {
    /// The keys for these mons in quorum, each `(id, advertised endpoint)`, in this order.
    ///
    /// ```
    /// use ceph_address_plan::MonHostConfig;
    /// let config = MonHostConfig::of([("d", "242.1.0.4:6789".parse()?), ("e", "242.1.0.5:3300".parse()?)]);
    /// assert_eq!(config.mon_host, "[v2:242.1.0.4:3300,v1:242.1.0.4:6789],[v2:242.1.0.5:3300]");
    /// assert_eq!(config.mon_initial_members, "d,e");
    /// # Ok::<(), std::net::AddrParseError>(())
    /// ```
    pub fn of<'a>(mons: impl IntoIterator<Item = (&'a str, SocketAddr)>) -> Self {
        let (mut hosts, mut members) = (Vec::new(), Vec::new());
        for (id, endpoint) in mons {
            hosts.push(format::mon_host_entry(endpoint));
            members.push(id);
        }
        Self {
            mon_host: hosts.join(","),
            mon_initial_members: members.join(","),
        }
    }
}

/// What changed for one daemon in an incremental re-plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Change {
    /// Nothing.
    Unchanged,
    /// The daemon is new.
    Added,
    /// The daemon is gone.
    Removed,
    /// Its input, address or status changed.
    Changed,
}

/// Whether everything is in place, and if not, why not.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Readiness {
    /// Every daemon advertises its planned address.
    pub ready: bool,
    /// One line per daemon that is not up to date, mons first.
    pub reasons: Vec<String>,
    /// The daemon each line of `reasons` is about, in the same order ([`Readiness::by_daemon`]
    /// pairs them).
    pub pending: Vec<Daemon>,
    /// Things worth knowing that do not block readiness.
    pub warnings: Vec<String>,
}

impl Readiness {
    /// Each daemon that is not up to date with its reason, mons first: the typed form of
    /// `reasons`, so that no caller parses the daemon back out of a line.
    pub fn by_daemon(&self) -> impl Iterator<Item = (&Daemon, &String)> {
        self.pending.iter().zip(&self.reasons)
    }
}

//! The planner: from [`PlanInput`] to a [`Plan`], in full or one daemon at a time.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use mcs_types::names::{ClustersetName, Zone, dns_label_problem};

use crate::args::DaemonArgs;
use crate::format;
use crate::input::{
    ClusterSettings, Daemon, DnsNameForm, ExportStatus, ExternalMon, Inventory, MonInput, OsdInput,
    PlanInput,
};
use crate::reject::{Rejection, Rejections};
use crate::rook;
use crate::{MonId, rook::MIN_MCS_CEPH_VERSION};

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
    /// [`Plan::mon_replacements`]).
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
    input: MonInput,
    port: u16,
    address: Address,
    status: DaemonStatus,
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
    fn exported(&self, settings: &ClusterSettings) -> bool {
        settings.mcs_enabled() && !matches!(self.address, Address::Retiring(_))
    }
}

/// The plan for one OSD.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OsdPlan {
    input: OsdInput,
    address: Address,
    status: DaemonStatus,
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
    /// `<clusterID>-rook-ceph-...`, exported in the [`DnsNameForm::UniqueServiceName`] form.
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

#[derive(Debug, Clone, PartialEq, Eq)]
struct MonOutputs {
    endpoints: MonEndpoints,
    config: MonHostConfig,
    peer_mon_host: String,
    max_mon_id: Option<u32>,
    next_mon_id: MonId,
}

/// A complete plan: what must exist and how every daemon is addressed.
///
/// ```
/// use ceph_address_plan::{ClusterSettings, CephVersion, Inventory, OsdInput, Plan, PlanInput};
///
/// let mut cluster = ClusterSettings::new("my-cluster", "rook-ceph");
/// cluster.multi_cluster_service.enabled = true;
/// cluster.multi_cluster_service.cluster_id = "east".into();
/// cluster.ceph_version = Some(CephVersion::new(18, 2, 4));
/// let mut inventory = Inventory::new_cluster(3);
/// inventory.osds.push(OsdInput::new(0, "node-1"));
/// inventory.global_ips.insert("rook-ceph-osd-0".parse()?, "242.1.0.20".parse()?);
///
/// let plan = Plan::new(PlanInput { cluster, inventory })?;
/// assert_eq!(plan.daemon_args(&"osd.0".parse()?).unwrap().to_args(), [
///     "--public-addr=242.1.0.20",
///     "--public-bind-addr=$(ROOK_POD_IP)",
///     "--cluster-addr=$(ROOK_POD_IP)",
/// ]);
/// // The mons wait for their exports to resolve:
/// let lookups = plan.lookups()?;
/// assert_eq!(lookups[0].name.to_string(), "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local");
/// assert!(!plan.readiness().ready);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Plan {
    settings: ClusterSettings,
    zone: Zone,
    stored_max_mon_id: Option<u32>,
    mons: Vec<MonPlan>,
    external_mons: Vec<ExternalMon>,
    osds: BTreeMap<u32, OsdPlan>,
    global_ips: BTreeMap<Daemon, IpAddr>,
    exports: BTreeMap<Daemon, ExportStatus>,
    mon_outputs: MonOutputs,
}

/// Checks the cluster-wide settings; the zone when it is valid, and whether clusterset names
/// can be built (MCS on with a valid cluster id).
fn check_settings(
    settings: &ClusterSettings,
    rejections: &mut Vec<Rejection>,
) -> (Option<Zone>, bool) {
    if let Some(problem) = dns_label_problem(&settings.namespace, false) {
        rejections.push(Rejection::InvalidNamespace {
            namespace: settings.namespace.clone(),
            problem,
        });
    }
    let zone = Zone::new(&settings.clusterset_zone)
        .map_err(|e| rejections.push(Rejection::InvalidZone(e)))
        .ok();
    if !settings.mcs_enabled() {
        return (zone, false);
    }
    let cluster_id = &settings.multi_cluster_service.cluster_id;
    let mut names_buildable = zone.is_some();
    if cluster_id.is_empty() {
        rejections.push(Rejection::MissingClusterId);
        names_buildable = false;
    } else if let Some(problem) = dns_label_problem(cluster_id, false) {
        rejections.push(Rejection::InvalidClusterId {
            cluster_id: cluster_id.clone(),
            problem,
        });
        names_buildable = false;
    }
    if settings.host_network {
        rejections.push(Rejection::McsWithHostNetwork);
    }
    let (major, minor, patch) = MIN_MCS_CEPH_VERSION;
    match settings.ceph_version {
        None => rejections.push(Rejection::CephVersionUnknown),
        Some(version) => match version.is_at_least(major, minor, patch) {
            Some(true) => {}
            Some(false) => rejections.push(Rejection::CephTooOld { version }),
            None => rejections.push(Rejection::CephVersionAmbiguous { version }),
        },
    }
    (zone, names_buildable)
}

/// The name of the Service a daemon's export exports.
fn exported_service_name(settings: &ClusterSettings, daemon: &Daemon) -> String {
    match settings.dns_name_form {
        DnsNameForm::ClusterIdPrefix => daemon.service_name(),
        DnsNameForm::UniqueServiceName => format!(
            "{}-{}",
            settings.multi_cluster_service.cluster_id,
            daemon.service_name()
        ),
    }
}

/// The clusterset name a daemon's global IP is resolved from.
fn lookup_name(
    settings: &ClusterSettings,
    zone: &Zone,
    daemon: &Daemon,
) -> Result<ClustersetName, Rejection> {
    let invalid = |error| Rejection::InvalidClustersetName {
        daemon: daemon.clone(),
        error,
    };
    let service = exported_service_name(settings, daemon);
    let name = ClustersetName::service(&settings.namespace, &service)
        .and_then(|n| n.in_zone(zone.clone()))
        .map_err(invalid)?;
    match settings.dns_name_form {
        DnsNameForm::ClusterIdPrefix => name
            .cluster_service(&settings.multi_cluster_service.cluster_id)
            .map_err(invalid),
        DnsNameForm::UniqueServiceName => Ok(name),
    }
}

/// Checks that an MCS daemon's export Service and clusterset names can be built.
fn check_names(settings: &ClusterSettings, zone: &Zone, daemon: &Daemon) -> Result<(), Rejection> {
    if settings.dns_name_form == DnsNameForm::UniqueServiceName {
        let name = exported_service_name(settings, daemon);
        if name.len() > mcs_types::names::MAX_LABEL_LEN {
            return Err(Rejection::ServiceNameTooLong {
                daemon: daemon.clone(),
                len: name.len(),
                name,
            });
        }
    }
    lookup_name(settings, zone, daemon).map(|_| ())
}

fn check_family(
    settings: &ClusterSettings,
    what: impl FnOnce() -> String,
    ip: IpAddr,
) -> Option<Rejection> {
    (!settings.ip_family.admits(ip)).then(|| Rejection::WrongIpFamily {
        what: what(),
        ip,
        family: settings.ip_family,
    })
}

/// Plans one mon (pure).
fn plan_mon(settings: &ClusterSettings, mon: MonInput, global_ip: Option<IpAddr>) -> MonPlan {
    let port = mon
        .advertised
        .map_or_else(|| settings.new_mon_port(), |a| a.port());
    let node_ip = mon.node.as_ref().and_then(|n| n.address);
    // The address a mon of this id should advertise, or what it waits for.
    let expected: Result<Address, WaitFor> = if settings.host_network {
        node_ip.map(Address::Node).ok_or(WaitFor::ClusterIp)
    } else if settings.mcs_enabled() {
        global_ip.map(Address::Global).ok_or(WaitFor::GlobalIp)
    } else {
        mon.cluster_ip
            .map(Address::ClusterIp)
            .ok_or(WaitFor::ClusterIp)
    };
    let (address, status) = match (mon.advertised, expected) {
        (None, Ok(address)) => (address, DaemonStatus::Start),
        (None, Err(wait)) => (Address::Waiting(wait), DaemonStatus::Waiting),
        (Some(advertised), Ok(address)) if address.ip() == Some(advertised.ip()) => {
            (address, DaemonStatus::UpToDate)
        }
        (Some(advertised), Ok(address)) => (
            Address::Retiring(advertised.ip()),
            DaemonStatus::Replace {
                advertised,
                expected: address.ip(),
            },
        ),
        // An MCS mon on its cluster IP is known to be wrong before any lookup: replace it
        // (its replacement is exported instead; exporting this one would waste a global IP).
        (Some(advertised), Err(WaitFor::GlobalIp)) if Some(advertised.ip()) == mon.cluster_ip => (
            Address::Retiring(advertised.ip()),
            DaemonStatus::Replace {
                advertised,
                expected: None,
            },
        ),
        (Some(_), Err(wait)) => (Address::Waiting(wait), DaemonStatus::Waiting),
    };
    MonPlan {
        input: mon,
        port,
        address,
        status,
    }
}

/// Plans one OSD (pure).
fn plan_osd(settings: &ClusterSettings, osd: OsdInput, global_ip: Option<IpAddr>) -> OsdPlan {
    let (address, status) = if settings.mcs_enabled() {
        match global_ip {
            Some(ip) if osd.advertised == Some(ip) => (Address::Global(ip), DaemonStatus::UpToDate),
            Some(ip) => (
                Address::Global(ip),
                DaemonStatus::UpdateArgs {
                    advertised: osd.advertised,
                },
            ),
            None => (Address::Waiting(WaitFor::GlobalIp), DaemonStatus::Waiting),
        }
    } else if osd.advertised.is_some() {
        (
            Address::PodIp,
            DaemonStatus::UpdateArgs {
                advertised: osd.advertised,
            },
        )
    } else {
        (Address::PodIp, DaemonStatus::UpToDate)
    };
    OsdPlan {
        input: osd,
        address,
        status,
    }
}

/// The ConfigMap, Secret and peer-token outputs, from the mons (pure).
fn mon_outputs(
    settings: &ClusterSettings,
    stored_max_mon_id: Option<u32>,
    mons: &[MonPlan],
    external_mons: &[ExternalMon],
) -> MonOutputs {
    let max_mon_id = mons
        .iter()
        .map(|m| m.id().index())
        .chain(stored_max_mon_id)
        .max();
    // (name, endpoint, in quorum) of every mon clients can reach: Rook's AllMonitors().
    let mut reachable: Vec<(&str, SocketAddr, bool)> =
        Vec::with_capacity(mons.len() + external_mons.len());
    for mon in mons {
        if let Some(endpoint) = mon.endpoint() {
            reachable.push((mon.id().as_str(), endpoint, !mon.input.out_of_quorum));
        }
    }
    for external in external_mons {
        reachable.push((&external.name, external.endpoint, true));
    }
    let endpoint_texts: Vec<String> = reachable.iter().map(|(_, e, _)| e.to_string()).collect();
    let data = reachable
        .iter()
        .zip(&endpoint_texts)
        .map(|((name, _, _), endpoint)| format!("{name}={endpoint}"))
        .collect::<Vec<_>>()
        .join(",");
    let config = MonHostConfig::of(
        reachable
            .iter()
            .filter(|(_, _, in_quorum)| *in_quorum)
            .map(|(name, endpoint, _)| (*name, *endpoint)),
    );
    let out_of_quorum = mons
        .iter()
        .filter(|m| m.input.out_of_quorum)
        .map(|m| m.id().as_str())
        .collect::<Vec<_>>()
        .join(",");
    let endpoints = MonEndpoints {
        data,
        mapping: format::mapping_json(mons.iter().map(|m| {
            (
                m.id().as_str(),
                m.input.node.as_ref(),
                m.input.zone.as_deref(),
            )
        })),
        max_mon_id: max_mon_id.map_or_else(|| "-1".to_owned(), |m| m.to_string()),
        out_of_quorum,
        csi_cluster_config_json: format::csi_cluster_config_json(
            &settings.namespace,
            endpoint_texts.iter().map(String::as_str),
        ),
        external_mons: external_mons
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>()
            .join(","),
    };
    MonOutputs {
        peer_mon_host: format::peer_token_mon_host(endpoint_texts.iter().map(String::as_str)),
        endpoints,
        config,
        max_mon_id,
        next_mon_id: MonId::next_after(max_mon_id),
    }
}

/// Sorts `items` by `key` and reports each key that occurs more than once.
fn sort_and_find_duplicates<T, K: Ord + Clone>(items: &mut [T], key: impl Fn(&T) -> K) -> Vec<K> {
    items.sort_by_key(|item| key(item));
    let mut duplicates: Vec<K> = items
        .windows(2)
        .filter(|pair| key(&pair[0]) == key(&pair[1]))
        .map(|pair| key(&pair[0]))
        .collect();
    duplicates.dedup();
    duplicates
}

impl Plan {
    /// Plans everything from scratch. Every problem of the input is reported at once.
    pub fn new(input: PlanInput) -> Result<Self, Rejections> {
        let PlanInput {
            cluster: settings,
            inventory,
        } = input;
        let Inventory {
            max_mon_id: stored_max_mon_id,
            mut mons,
            mut external_mons,
            mut osds,
            global_ips,
            exports,
        } = inventory;
        let mut rejections = Vec::new();
        let (zone, names_buildable) = check_settings(&settings, &mut rejections);

        for id in sort_and_find_duplicates(&mut mons, |m| m.id.clone()) {
            rejections.push(Rejection::DuplicateMon(id));
        }
        // OSD ids are plain numbers: sort without the clone-per-comparison of the generic helper.
        osds.sort_unstable_by_key(|o| o.id);
        let mut last_duplicate = None;
        for pair in osds.windows(2) {
            if pair[0].id == pair[1].id && last_duplicate != Some(pair[0].id) {
                last_duplicate = Some(pair[0].id);
                rejections.push(Rejection::DuplicateOsd(pair[0].id));
            }
        }
        let mut external_duplicates =
            sort_and_find_duplicates(&mut external_mons, |e| e.name.clone());
        for external in &external_mons {
            if external.name.is_empty() || external.name.contains(['=', ',']) {
                rejections.push(Rejection::InvalidExternalMonName(external.name.clone()));
            }
            if mons.iter().any(|m| m.id.as_str() == external.name) {
                external_duplicates.push(external.name.clone());
            }
            rejections.extend(check_family(
                &settings,
                || format!("endpoint of external mon {}", external.name),
                external.endpoint.ip(),
            ));
        }
        external_duplicates.sort();
        external_duplicates.dedup();
        rejections.extend(
            external_duplicates
                .into_iter()
                .map(Rejection::DuplicateExternalMon),
        );

        // Mons are sorted: check each id once even when it is listed twice.
        let distinct_mons = mons
            .iter()
            .enumerate()
            .filter(|(i, m)| *i == 0 || mons[i - 1].id != m.id)
            .map(|(_, m)| m);
        for mon in distinct_mons {
            if let Some(ip) = mon.cluster_ip {
                rejections.extend(check_family(
                    &settings,
                    || format!("cluster IP of mon.{}", mon.id),
                    ip,
                ));
            }
            let node_ip = mon.node.as_ref().and_then(|n| n.address);
            match node_ip {
                Some(ip) if settings.host_network => rejections.extend(check_family(
                    &settings,
                    || format!("node address of mon.{}", mon.id),
                    ip,
                )),
                None if settings.host_network => {
                    rejections.push(Rejection::HostNetworkMonWithoutNodeAddress(mon.id.clone()));
                }
                _ => {}
            }
        }
        for (daemon, ip) in &global_ips {
            rejections.extend(check_family(
                &settings,
                || format!("global IP of {daemon}"),
                *ip,
            ));
        }
        if let Some(zone) = zone.as_ref().filter(|_| names_buildable) {
            // The longest names are those of the highest OSD id; every mon is checked.
            let daemons = mons
                .iter()
                .map(|m| Daemon::Mon(m.id.clone()))
                .chain(osds.last().map(|o| Daemon::Osd(o.id)));
            for daemon in daemons {
                if let Err(rejection) = check_names(&settings, zone, &daemon) {
                    rejections.push(rejection);
                }
            }
        }
        let Some(zone) = zone.filter(|_| rejections.is_empty()) else {
            return Err(Rejections(rejections));
        };

        external_mons.sort_by(|a, b| a.name.cmp(&b.name));
        let mons: Vec<MonPlan> = mons
            .into_iter()
            .map(|m| {
                let global_ip = global_ips.get(&Daemon::Mon(m.id.clone())).copied();
                plan_mon(&settings, m, global_ip)
            })
            .collect();
        // Both are sorted by OSD id: walk them together instead of a map lookup per OSD.
        let mut osd_ips = global_ips
            .range(Daemon::Osd(0)..)
            .filter_map(|(d, ip)| match d {
                Daemon::Osd(id) => Some((*id, *ip)),
                Daemon::Mon(_) => None,
            })
            .peekable();
        let osds: BTreeMap<u32, OsdPlan> = osds
            .into_iter()
            .map(|o| {
                while osd_ips.next_if(|(id, _)| *id < o.id).is_some() {}
                let global_ip = osd_ips.next_if(|(id, _)| *id == o.id).map(|(_, ip)| ip);
                (o.id, plan_osd(&settings, o, global_ip))
            })
            .collect();
        let mon_outputs = mon_outputs(&settings, stored_max_mon_id, &mons, &external_mons);
        Ok(Self {
            settings,
            zone,
            stored_max_mon_id,
            mons,
            external_mons,
            osds,
            global_ips,
            exports,
            mon_outputs,
        })
    }

    /// Adds or replaces one OSD and re-plans only it. Mon outputs do not depend on OSDs.
    pub fn upsert_osd(&mut self, osd: OsdInput) -> Result<Change, Rejections> {
        let daemon = Daemon::Osd(osd.id);
        if self.settings.mcs_enabled() {
            check_names(&self.settings, &self.zone, &daemon)?;
        }
        let global_ip = self.global_ips.get(&daemon).copied();
        let planned = plan_osd(&self.settings, osd, global_ip);
        Ok(match self.osds.insert(planned.input.id, planned) {
            None => Change::Added,
            Some(old) if Some(&old) == self.osds.get(&old.input.id) => Change::Unchanged,
            Some(_) => Change::Changed,
        })
    }

    /// Removes one OSD from the plan.
    pub fn remove_osd(&mut self, id: u32) -> Change {
        match self.osds.remove(&id) {
            Some(_) => Change::Removed,
            None => Change::Unchanged,
        }
    }

    /// Records (or forgets, with `None`) the resolved global IP of a daemon's export and re-plans
    /// that daemon (an OSD alone; for a mon, the mons and their outputs).
    pub fn set_global_ip(
        &mut self,
        daemon: &Daemon,
        ip: Option<IpAddr>,
    ) -> Result<Change, Rejections> {
        if let Some(ip) = ip
            && let Some(rejection) =
                check_family(&self.settings, || format!("global IP of {daemon}"), ip)
        {
            return Err(rejection.into());
        }
        let previous = match ip {
            Some(ip) => self.global_ips.insert(daemon.clone(), ip),
            None => self.global_ips.remove(daemon),
        };
        if previous == ip {
            return Ok(Change::Unchanged);
        }
        match daemon {
            Daemon::Osd(id) => match self.osds.get(id) {
                Some(osd) => self.upsert_osd(osd.input.clone()),
                None => Ok(Change::Unchanged),
            },
            Daemon::Mon(id) => {
                if !self.mons.iter().any(|m| m.id() == id) {
                    return Ok(Change::Unchanged);
                }
                let inputs = self.mons.iter().map(|m| m.input.clone()).collect();
                self.replace_mons(inputs, self.stored_max_mon_id)
            }
        }
    }

    /// Records (or forgets) the status of a daemon's ServiceExport. It feeds the readiness
    /// reasons only; addresses come from resolved names.
    pub fn set_export_status(&mut self, daemon: &Daemon, status: Option<ExportStatus>) -> Change {
        let previous = match status {
            Some(status) => self.exports.insert(daemon.clone(), status),
            None => self.exports.remove(daemon),
        };
        if previous.as_ref() == self.exports.get(daemon) {
            Change::Unchanged
        } else {
            Change::Changed
        }
    }

    /// Replaces the mons (and the stored `maxMonId`) and re-plans the mons and their outputs,
    /// leaving the OSDs alone. This is what a mon failover step changes.
    pub fn replace_mons(
        &mut self,
        mons: Vec<MonInput>,
        stored_max_mon_id: Option<u32>,
    ) -> Result<Change, Rejections> {
        let input = PlanInput {
            cluster: self.settings.clone(),
            inventory: Inventory {
                max_mon_id: stored_max_mon_id,
                mons,
                external_mons: self.external_mons.clone(),
                osds: Vec::new(),
                global_ips: self
                    .global_ips
                    .iter()
                    .filter(|(d, _)| matches!(d, Daemon::Mon(_)))
                    .map(|(d, ip)| (d.clone(), *ip))
                    .collect(),
                exports: BTreeMap::new(),
            },
        };
        // Validate and plan the mons alone, then graft them onto this plan.
        let mons_only = Self::new(input)?;
        let changed =
            mons_only.mons != self.mons || mons_only.stored_max_mon_id != self.stored_max_mon_id;
        self.mons = mons_only.mons;
        self.stored_max_mon_id = mons_only.stored_max_mon_id;
        self.mon_outputs = mons_only.mon_outputs;
        Ok(if changed {
            Change::Changed
        } else {
            Change::Unchanged
        })
    }

    /// The settings the plan was made for.
    pub fn settings(&self) -> &ClusterSettings {
        &self.settings
    }

    /// The clusterset zone.
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// The mons, by index.
    pub fn mons(&self) -> &[MonPlan] {
        &self.mons
    }

    /// The OSDs, by id.
    pub fn osds(&self) -> impl ExactSizeIterator<Item = &OsdPlan> {
        self.osds.values()
    }

    /// One OSD.
    pub fn osd(&self, id: u32) -> Option<&OsdPlan> {
        self.osds.get(&id)
    }

    /// One mon.
    pub fn mon(&self, id: &MonId) -> Option<&MonPlan> {
        self.mons.iter().find(|m| m.id() == id)
    }

    /// The external mons, by name.
    pub fn external_mons(&self) -> &[ExternalMon] {
        &self.external_mons
    }

    /// Every daemon with its address and status: mons by index, then OSDs by id.
    pub fn daemons(&self) -> impl Iterator<Item = (Daemon, Address, DaemonStatus)> + '_ {
        let mons = self
            .mons
            .iter()
            .map(|m| (Daemon::Mon(m.id().clone()), m.address, m.status));
        let osds = self
            .osds
            .values()
            .map(|o| (Daemon::Osd(o.id()), o.address, o.status));
        mons.chain(osds)
    }

    /// The address and status of one daemon.
    pub fn daemon(&self, daemon: &Daemon) -> Option<(Address, DaemonStatus)> {
        match daemon {
            Daemon::Mon(id) => self.mon(id).map(|m| (m.address, m.status)),
            Daemon::Osd(id) => self.osd(*id).map(|o| (o.address, o.status)),
        }
    }

    /// The global IPs known.
    pub fn global_ips(&self) -> &BTreeMap<Daemon, IpAddr> {
        &self.global_ips
    }

    /// The export statuses known.
    pub fn export_statuses(&self) -> &BTreeMap<Daemon, ExportStatus> {
        &self.exports
    }

    /// The address arguments a daemon's container gets, or `None` when it gets none (an OSD
    /// without MCS), has no address yet, or is being replaced.
    pub fn daemon_args(&self, daemon: &Daemon) -> Option<DaemonArgs> {
        match daemon {
            Daemon::Mon(id) => {
                let mon = self.mon(id)?;
                let public_addr = match mon.address {
                    Address::Global(ip) | Address::ClusterIp(ip) | Address::Node(ip) => ip,
                    Address::PodIp | Address::Waiting(_) | Address::Retiring(_) => return None,
                };
                let msgr2_only = mon.port == rook::MON_MSGR2_PORT;
                Some(DaemonArgs {
                    public_addr,
                    msgr1_off: msgr2_only,
                    public_bind_addr: (!self.settings.host_network)
                        .then(|| format::mon_bind_addr(mon.port, self.settings.ip_family)),
                    cluster_addr: None,
                })
            }
            Daemon::Osd(id) => match self.osd(*id)?.address {
                Address::Global(ip) => Some(DaemonArgs {
                    public_addr: ip,
                    msgr1_off: false,
                    public_bind_addr: Some(rook::POD_IP.to_owned()),
                    cluster_addr: Some(rook::POD_IP.to_owned()),
                }),
                _ => None,
            },
        }
    }

    /// The container ports of a daemon: a mon's `tcp-msgr1`/`tcp-msgr2`; an OSD's
    /// `osd-port-v2`/`osd-port-v1` only with MCS (Rook's fix for rook/rook#11792).
    pub fn container_ports(&self, daemon: &Daemon) -> Vec<NamedPort> {
        match daemon {
            Daemon::Mon(id) => self.mon(id).map(|m| mon_ports(m.port)).unwrap_or_default(),
            Daemon::Osd(id) if self.settings.mcs_enabled() && self.osds.contains_key(id) => {
                osd_ports(self.settings.require_msgr2)
            }
            Daemon::Osd(_) => Vec::new(),
        }
    }

    /// Whether a daemon's Service is exported.
    fn is_exported(&self, daemon: &Daemon) -> bool {
        match daemon {
            Daemon::Mon(id) => self.mon(id).is_some_and(|m| m.exported(&self.settings)),
            Daemon::Osd(id) => self.settings.mcs_enabled() && self.osds.contains_key(id),
        }
    }

    /// The daemons whose Services are exported: mons by index, then OSDs by id.
    fn exported_daemons(&self) -> impl Iterator<Item = Daemon> + '_ {
        let mons = self
            .mons
            .iter()
            .filter(|m| m.exported(&self.settings))
            .map(|m| Daemon::Mon(m.id().clone()));
        let osds = self
            .osds
            .keys()
            .filter(|_| self.settings.mcs_enabled())
            .map(|id| Daemon::Osd(*id));
        mons.chain(osds)
    }

    /// The Services that must exist: Rook's mon Services (unless host networking), with MCS
    /// Rook's OSD Services, and in the unique-name form one export Service per exported daemon.
    pub fn services(&self) -> Vec<DesiredService> {
        let mut services = Vec::new();
        if !self.settings.host_network {
            for mon in &self.mons {
                services.push(DesiredService {
                    name: Daemon::Mon(mon.id().clone()).service_name(),
                    daemon: Daemon::Mon(mon.id().clone()),
                    role: ServiceRole::Rook,
                    ports: mon_ports(mon.port),
                });
            }
        }
        if self.settings.mcs_enabled() {
            for id in self.osds.keys() {
                services.push(DesiredService {
                    name: Daemon::Osd(*id).service_name(),
                    daemon: Daemon::Osd(*id),
                    role: ServiceRole::Rook,
                    ports: osd_ports(self.settings.require_msgr2),
                });
            }
        }
        if self.settings.mcs_enabled()
            && self.settings.dns_name_form == DnsNameForm::UniqueServiceName
        {
            for daemon in self.exported_daemons() {
                let ports = self.service_ports(&daemon);
                services.push(DesiredService {
                    name: exported_service_name(&self.settings, &daemon),
                    daemon,
                    role: ServiceRole::Export,
                    ports,
                });
            }
        }
        services
    }

    fn service_ports(&self, daemon: &Daemon) -> Vec<NamedPort> {
        match daemon {
            Daemon::Mon(id) => self.mon(id).map(|m| mon_ports(m.port)).unwrap_or_default(),
            Daemon::Osd(_) => osd_ports(self.settings.require_msgr2),
        }
    }

    /// The name of the Service a daemon is exported through, which is also its ServiceExport's
    /// name: Rook's Service (`rook-ceph-osd-7`), or in the unique-name form the cluster-unique
    /// export Service (`<clusterID>-rook-ceph-osd-7`). Defined for any daemon, planned or not
    /// (the operator names the objects of removed OSDs with it).
    pub fn exported_service_name(&self, daemon: &Daemon) -> String {
        exported_service_name(&self.settings, daemon)
    }

    /// The ServiceExports that must exist (with MCS): one per exported daemon.
    pub fn service_exports(&self) -> Vec<DesiredExport> {
        self.exported_daemons()
            .map(|daemon| DesiredExport {
                name: exported_service_name(&self.settings, &daemon),
                daemon,
            })
            .collect()
    }

    /// The clusterset name of a daemon's export.
    pub fn lookup_name(&self, daemon: &Daemon) -> Result<ClustersetName, Rejection> {
        lookup_name(&self.settings, &self.zone, daemon)
    }

    /// The names still to resolve, one per daemon waiting for its global IP.
    pub fn lookups(&self) -> Result<Vec<Lookup>, Rejection> {
        self.daemons()
            .filter(|(_, address, _)| *address == Address::Waiting(WaitFor::GlobalIp))
            .map(|(daemon, _, _)| {
                Ok(Lookup {
                    name: self.lookup_name(&daemon)?,
                    service: exported_service_name(&self.settings, &daemon),
                    daemon,
                })
            })
            .collect()
    }

    /// The running mons that must be replaced by new mons, by index: mon-failover's input.
    pub fn mon_replacements(&self) -> Vec<MonReplacement> {
        self.mons
            .iter()
            .filter_map(|mon| match mon.status {
                DaemonStatus::Replace {
                    advertised,
                    expected,
                } => Some(MonReplacement {
                    mon: mon.id().clone(),
                    advertised,
                    expected,
                    reason: self.replacement_reason(mon, advertised, expected),
                }),
                _ => None,
            })
            .collect()
    }

    fn replacement_reason(
        &self,
        mon: &MonPlan,
        advertised: SocketAddr,
        expected: Option<IpAddr>,
    ) -> String {
        let wanted = if self.settings.host_network {
            "its node's IP"
        } else if self.settings.mcs_enabled() {
            "its global IP"
        } else {
            "its Service's cluster IP"
        };
        let expected = match expected {
            Some(ip) => format!(" {ip}"),
            None if Some(advertised.ip()) == mon.input.cluster_ip => {
                " (it advertises its cluster IP, which other clusters cannot reach)".to_owned()
            }
            None => String::new(),
        };
        format!(
            "mon.{} advertises {advertised} but must advertise {wanted}{expected}; a mon cannot change its address, so a new mon replaces it (next free id: {})",
            mon.id(),
            self.next_mon_id()
        )
    }

    /// The data of the `rook-ceph-mon-endpoints` ConfigMap.
    pub fn mon_endpoints(&self) -> &MonEndpoints {
        &self.mon_outputs.endpoints
    }

    /// `mon_host` and `mon_initial_members` of the `rook-ceph-config` Secret.
    pub fn mon_host_config(&self) -> &MonHostConfig {
        &self.mon_outputs.config
    }

    /// The `mon_host` of the RBD mirror bootstrap peer token: with MCS, global IPs the peer
    /// cluster can reach.
    pub fn peer_token_mon_host(&self) -> &str {
        &self.mon_outputs.peer_mon_host
    }

    /// `maxMonId`: the highest mon index allocated (stored value or the highest mon listed).
    pub fn max_mon_id(&self) -> Option<u32> {
        self.mon_outputs.max_mon_id
    }

    /// The id the next new mon gets (`maxMonId + 1` in Rook letters).
    pub fn next_mon_id(&self) -> &MonId {
        &self.mon_outputs.next_mon_id
    }

    /// Whether every daemon advertises its planned address.
    pub fn is_ready(&self) -> bool {
        self.daemons().all(|(_, _, status)| status.is_up_to_date())
    }

    /// The readiness verdict, with one reason per daemon that is not up to date.
    pub fn readiness(&self) -> Readiness {
        let mut reasons = Vec::new();
        let mut pending = Vec::new();
        for mon in &self.mons {
            let daemon = Daemon::Mon(mon.id().clone());
            if let Some(reason) = self.reason(
                &daemon,
                mon.address,
                mon.status,
                mon.input.advertised.map(|a| a.ip()),
            ) {
                reasons.push(reason);
                pending.push(daemon);
            }
        }
        for osd in self.osds.values() {
            let daemon = Daemon::Osd(osd.id());
            if let Some(reason) =
                self.reason(&daemon, osd.address, osd.status, osd.input.advertised)
            {
                reasons.push(reason);
                pending.push(daemon);
            }
        }
        Readiness {
            ready: reasons.is_empty(),
            reasons,
            pending,
            warnings: self.warnings(),
        }
    }

    fn reason(
        &self,
        daemon: &Daemon,
        address: Address,
        status: DaemonStatus,
        advertised: Option<IpAddr>,
    ) -> Option<String> {
        match status {
            DaemonStatus::UpToDate => None,
            DaemonStatus::Start => Some(match daemon {
                Daemon::Mon(id) => format!(
                    "{daemon} does not run yet: start it on {}",
                    self.mon(id)
                        .and_then(MonPlan::endpoint)
                        .map_or_else(String::new, |e| e.to_string())
                ),
                Daemon::Osd(_) => format!("{daemon} does not run yet"),
            }),
            DaemonStatus::UpdateArgs { advertised } => Some(match (address, advertised) {
                (Address::Global(ip), None) => format!(
                    "{daemon} advertises its pod IP: update its Deployment to advertise {ip}"
                ),
                (Address::Global(ip), Some(old)) => {
                    format!("{daemon} advertises {old}: update its Deployment to advertise {ip}")
                }
                (_, old) => format!(
                    "{daemon} still advertises {} from MCS: update its Deployment to advertise its pod IP",
                    old.map_or_else(String::new, |ip| ip.to_string())
                ),
            }),
            DaemonStatus::Replace {
                advertised,
                expected,
            } => match daemon {
                Daemon::Mon(id) => self
                    .mon(id)
                    .map(|mon| self.replacement_reason(mon, advertised, expected)),
                Daemon::Osd(_) => None,
            },
            DaemonStatus::Waiting => Some(match address {
                Address::Waiting(WaitFor::ClusterIp) if self.settings.host_network => {
                    format!("{daemon} has no node address yet")
                }
                Address::Waiting(WaitFor::ClusterIp) => format!(
                    "{daemon} waits for Service {} to get a cluster IP",
                    daemon.service_name()
                ),
                _ => self.global_ip_wait_reason(daemon, advertised),
            }),
        }
    }

    fn global_ip_wait_reason(&self, daemon: &Daemon, advertised: Option<IpAddr>) -> String {
        let export = exported_service_name(&self.settings, daemon);
        let name = self
            .lookup_name(daemon)
            .map_or_else(|e| e.to_string(), |n| n.to_string());
        let still =
            advertised.map_or_else(String::new, |ip| format!(" (it advertises {ip} meanwhile)"));
        match self.exports.get(daemon).map(export_problem) {
            Some(Some(problem)) => format!("{daemon} waits for export {export}: {problem}{still}"),
            Some(None) => format!(
                "{daemon} waits for {name} to resolve (export {export} is Valid and Ready){still}"
            ),
            None => format!("{daemon} waits for {name} to resolve{still}"),
        }
    }

    fn warnings(&self) -> Vec<String> {
        let mut warnings = Vec::new();
        for mon in &self.mons {
            if mon.input.out_of_quorum {
                warnings.push(format!(
                    "mon.{} is out of quorum: it is left out of mon_host and mon_initial_members",
                    mon.id()
                ));
            }
        }
        for (daemon, status) in &self.exports {
            let known = self
                .daemon(daemon)
                .is_some_and(|(a, _)| matches!(a, Address::Global(_)));
            if known && let Some(conflict) = conflict_of(status) {
                warnings.push(format!(
                    "export {} reports {conflict}",
                    exported_service_name(&self.settings, daemon)
                ));
            }
            if !self.is_exported(daemon) {
                warnings.push(format!(
                    "exports lists {daemon}, whose Service is not exported by this plan (ignored)"
                ));
            }
        }
        for daemon in self.global_ips.keys() {
            if !self.is_exported(daemon) {
                warnings.push(format!(
                    "globalIPs lists {daemon}, whose Service is not exported by this plan (ignored)"
                ));
            }
        }
        warnings
    }

    /// The input this plan stands for (mons, external mons and OSDs sorted).
    pub fn to_input(&self) -> PlanInput {
        PlanInput {
            cluster: self.settings.clone(),
            inventory: Inventory {
                max_mon_id: self.stored_max_mon_id,
                mons: self.mons.iter().map(|m| m.input.clone()).collect(),
                external_mons: self.external_mons.clone(),
                osds: self.osds.values().map(|o| o.input.clone()).collect(),
                global_ips: self.global_ips.clone(),
                exports: self.exports.clone(),
            },
        }
    }
}

/// The condition of an export that keeps its name from resolving, in words; `None` when it is
/// Valid and Ready (without Conflict).
pub fn export_problem(status: &ExportStatus) -> Option<String> {
    use mcs_types::conditions::{ConditionStatus, ServiceExportConditionType as Type};
    if status.conditions.is_empty() {
        return Some(
            "no conditions yet (is the MCS controller running in this cluster?)".to_owned(),
        );
    }
    let find = |wanted: Type| {
        status
            .conditions
            .iter()
            .find(|c| c.type_.parse::<Type>().ok() == Some(wanted))
    };
    let describe = |c: &crate::input::ExportCondition| {
        let mut text = format!("{}={}", c.type_, c.status);
        if !c.reason.is_empty() {
            text.push_str(&format!(" ({})", c.reason));
        }
        if !c.message.is_empty() {
            text.push_str(&format!(": {}", c.message));
        }
        text
    };
    let status_of = |c: &crate::input::ExportCondition| ConditionStatus::parse(&c.status);
    if let Some(valid) = find(Type::Valid).filter(|c| status_of(c) != Some(ConditionStatus::True)) {
        return Some(describe(valid));
    }
    if let Some(conflict) = conflict_of(status) {
        return Some(conflict);
    }
    match find(Type::Ready) {
        Some(ready) if status_of(ready) == Some(ConditionStatus::True) => None,
        Some(ready) => Some(describe(ready)),
        None if find(Type::Valid).is_some() => None,
        None => Some("no Valid or Ready condition yet".to_owned()),
    }
}

/// A `Conflict=True` condition, in words.
fn conflict_of(status: &ExportStatus) -> Option<String> {
    use mcs_types::conditions::{
        ConditionStatus, ConflictReasons, ServiceExportConditionType as Type,
    };
    let conflict = status.conditions.iter().find(|c| {
        c.type_.parse::<Type>().ok() == Some(Type::Conflict)
            && ConditionStatus::parse(&c.status) == Some(ConditionStatus::True)
    })?;
    let reasons = ConflictReasons::parse(&conflict.reason).join();
    let mut text = format!("Conflict=True ({reasons})");
    if !conflict.message.is_empty() {
        text.push_str(&format!(": {}", conflict.message));
    }
    Some(text)
}

//! The planner: from [`PlanInput`] to a [`Plan`], in full or one daemon at a time.
//!
//! `types` holds what a plan is made of (daemon plans, Services, exports, lookups, mon
//! endpoints, readiness), `build` the checks and the plan of each daemon, `exports` the words
//! for an export that keeps a name from resolving; this module the [`Plan`] and its queries.

mod build;
mod exports;
mod types;

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use mcs_types::names::{ClustersetName, Zone};

use crate::MonId;
use crate::args::DaemonArgs;
use crate::format;
use crate::input::{
    ClusterSettings, Daemon, DnsNameForm, ExportStatus, ExternalMon, Inventory, MonInput, OsdInput,
    PlanInput,
};
use crate::reject::{Rejection, Rejections};
use crate::rook;

use build::{
    check_family, check_inventory, check_longest_names, check_names, check_settings,
    exported_service_name, lookup_name, mon_outputs, plan_mon, plan_osd, plan_osds,
};
use exports::conflict_of;
pub use exports::export_problem;
pub use types::{
    Address, Change, DaemonStatus, DesiredExport, DesiredService, Lookup, MonEndpoints,
    MonHostConfig, MonPlan, MonReplacement, NamedPort, OsdPlan, Readiness, ServiceRole, WaitFor,
    mon_ports, osd_ports,
};

#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct MonOutputs {
    pub(super) endpoints: MonEndpoints,
    pub(super) config: MonHostConfig,
    pub(super) peer_mon_host: String,
    pub(super) max_mon_id: Option<u32>,
    pub(super) next_mon_id: MonId,
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
        check_inventory(
            &settings,
            &mut mons,
            &mut external_mons,
            &mut osds,
            &global_ips,
            &mut rejections,
        );
        if let Some(zone) = zone.as_ref().filter(|_| names_buildable) {
            check_longest_names(&settings, zone, &mons, &osds, &mut rejections);
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
        let osds = plan_osds(&settings, osds, &global_ips);
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

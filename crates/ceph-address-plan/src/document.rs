//! The whole plan as one serializable document (what `mcsctl plan` prints): the verdict first,
//! then what has to happen, then the desired objects.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use mcs_types::v1beta1::ServiceExport;
use serde::Serialize;

use crate::input::ClusterSettings;
use crate::plan::{Address, DaemonStatus, Plan, WaitFor};
use crate::reject::Rejection;

/// The plan, for people and scripts.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct PlanDocument {
    /// The settings planned for.
    pub cluster: ClusterSettings,
    /// Every daemon advertises its planned address.
    pub ready: bool,
    /// Why not, one line per daemon.
    pub reasons: Vec<String>,
    /// Things worth knowing.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub warnings: Vec<String>,
    /// The id the next new mon gets.
    pub next_mon_id: String,
    /// Running mons to replace with new mons (mon-failover's input).
    pub mon_replacements: Vec<ReplacementEntry>,
    /// Clusterset names still to resolve.
    pub lookups: Vec<LookupEntry>,
    /// Every daemon's address, status and address arguments.
    pub daemons: Vec<DaemonEntry>,
    /// Data of the `rook-ceph-mon-endpoints` ConfigMap.
    pub mon_endpoints: BTreeMap<String, String>,
    /// Mon keys of the `rook-ceph-config` Secret.
    pub rook_ceph_config: BTreeMap<String, String>,
    /// `mon_host` of the RBD mirror bootstrap peer token.
    pub peer_token_mon_host: String,
    /// The Services that must exist.
    pub services: Vec<Service>,
    /// The ServiceExports that must exist.
    pub service_exports: Vec<ServiceExport>,
}

/// A mon to replace.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ReplacementEntry {
    /// Its id.
    pub mon: String,
    /// What it advertises.
    pub advertised: String,
    /// What a mon should advertise, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub expected: Option<String>,
    /// Why.
    pub reason: String,
}

/// A name to resolve.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct LookupEntry {
    /// The clusterset name.
    pub name: String,
    /// The exported Service.
    pub service: String,
    /// The daemon waiting for it.
    pub daemon: String,
}

/// One daemon.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct DaemonEntry {
    /// `mon.a`, `osd.7`.
    pub daemon: String,
    /// Where the address comes from: `global`, `clusterIP`, `node`, `podIP`, `waitingForGlobalIP`,
    /// `waitingForClusterIP`, `retiring`.
    pub source: &'static str,
    /// The planned IP, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<String>,
    /// What it advertises now, when known.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub advertised: Option<String>,
    /// `upToDate`, `start`, `updateArgs`, `replace` or `waiting`.
    pub status: &'static str,
    /// The address arguments of its container.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
}

fn source(address: Address) -> &'static str {
    match address {
        Address::Global(_) => "global",
        Address::ClusterIp(_) => "clusterIP",
        Address::Node(_) => "node",
        Address::PodIp => "podIP",
        Address::Waiting(WaitFor::GlobalIp) => "waitingForGlobalIP",
        Address::Waiting(WaitFor::ClusterIp) => "waitingForClusterIP",
        Address::Retiring(_) => "retiring",
    }
}

fn status(status: DaemonStatus) -> &'static str {
    match status {
        DaemonStatus::UpToDate => "upToDate",
        DaemonStatus::Start => "start",
        DaemonStatus::UpdateArgs { .. } => "updateArgs",
        DaemonStatus::Replace { .. } => "replace",
        DaemonStatus::Waiting => "waiting",
    }
}

impl Plan {
    /// The plan as one document.
    pub fn document(&self) -> Result<PlanDocument, Rejection> {
        let readiness = self.readiness();
        let daemons = self
            .daemons()
            .map(|(daemon, address, daemon_status)| {
                let advertised = match &daemon {
                    crate::Daemon::Mon(id) => self
                        .mon(id)
                        .and_then(|m| m.input().advertised)
                        .map(|a| a.to_string()),
                    crate::Daemon::Osd(id) => self
                        .osd(*id)
                        .and_then(|o| o.input().advertised)
                        .map(|a| a.to_string()),
                };
                DaemonEntry {
                    source: source(address),
                    address: address.ip().map(|ip| ip.to_string()),
                    advertised,
                    status: status(daemon_status),
                    args: self
                        .daemon_args(&daemon)
                        .map(|a| a.to_args())
                        .unwrap_or_default(),
                    daemon: daemon.to_string(),
                }
            })
            .collect();
        let config = self.mon_host_config();
        Ok(PlanDocument {
            cluster: self.settings().clone(),
            ready: readiness.ready,
            reasons: readiness.reasons,
            warnings: readiness.warnings,
            next_mon_id: self.next_mon_id().to_string(),
            mon_replacements: self
                .mon_replacements()
                .into_iter()
                .map(|r| ReplacementEntry {
                    mon: r.mon.to_string(),
                    advertised: r.advertised.to_string(),
                    expected: r.expected.map(|ip| ip.to_string()),
                    reason: r.reason,
                })
                .collect(),
            lookups: self
                .lookups()?
                .into_iter()
                .map(|l| LookupEntry {
                    name: l.name.to_string(),
                    service: l.service,
                    daemon: l.daemon.to_string(),
                })
                .collect(),
            daemons,
            mon_endpoints: self.mon_endpoints().to_data(),
            rook_ceph_config: BTreeMap::from([
                (
                    crate::rook::KEY_MON_HOST.to_owned(),
                    config.mon_host.clone(),
                ),
                (
                    crate::rook::KEY_MON_INITIAL_MEMBERS.to_owned(),
                    config.mon_initial_members.clone(),
                ),
            ]),
            peer_token_mon_host: self.peer_token_mon_host().to_owned(),
            services: self.service_manifests(),
            service_exports: self.service_export_manifests(),
        })
    }
}

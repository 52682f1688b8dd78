//! `mcsctl diagnose SERVICE`: walks one service through every hop (the Service, its
//! ServiceExport, the ServiceImport, the clusterset DNS answer, and for Ceph daemons the global
//! IP and what the daemon advertises) and says where it breaks, with the likely cause and fix.
//!
//! [`Facts`] is what is read from the cluster (the reading is the IO crate's); [`questions`]
//! says which names to ask DNS, and the answers come back as [`DnsAnswer`]s (data: the asking
//! is the IO crate's too); [`diagnose`] is a pure function from the facts and the answers to
//! the checks; [`render_table`] draws them.

use std::collections::BTreeSet;
use std::net::IpAddr;

use ceph_address_plan::{Daemon, rook};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use mcs_types::names::{ClustersetName, NameError, Zone};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use mon_failover::MonMap;
use serde::Serialize;

use crate::MaybeServed;
use crate::view::CephClusterView;

mod ceph;
mod hops;
mod table;
#[cfg(test)]
mod tests;

pub use table::{render_table, render_table_in};

/// A Rook daemon's objects.
#[derive(Debug, Clone)]
pub struct CephFacts {
    /// The daemon the Service belongs to.
    pub daemon: Daemon,
    /// Whether the Service is Rook's own (`rook-ceph-mon-a`), not a unique-name stand-in.
    pub rook_service: bool,
    /// The CephClusters in the namespace.
    pub clusters: Vec<serde_json::Value>,
    /// `rook-ceph-mon-endpoints` (mons).
    pub mon_endpoints: Option<ConfigMap>,
    /// The OSD's Deployment (OSDs).
    pub osd_deployment: Option<Deployment>,
    /// The monmap, when given (`--monmap`: `ceph mon dump -f json`, or the monmap of `ceph
    /// quorum_status -f json`); not read from Kubernetes.
    pub monmap: Option<MonMap>,
}

/// Everything `diagnose` reads from the cluster about one service.
#[derive(Debug, Clone)]
pub struct Facts {
    /// The namespace.
    pub namespace: String,
    /// The service name.
    pub name: String,
    /// The Service.
    pub service: Option<Service>,
    /// ServiceExports of that name; `None` when the MCS CRDs are not installed.
    pub exports: MaybeServed<ServiceExport>,
    /// ServiceImports of that name; `None` when the MCS CRDs are not installed.
    pub imports: MaybeServed<ServiceImport>,
    /// The MCS EndpointSlices of the service.
    pub slices: Vec<EndpointSlice>,
    /// For a Rook mon or OSD Service, its Ceph objects.
    pub ceph: Option<CephFacts>,
}

impl Facts {
    pub(crate) fn export(&self) -> Option<&ServiceExport> {
        self.exports.iter().flatten().next()
    }

    pub(crate) fn import(&self) -> Option<&ServiceImport> {
        self.imports.iter().flatten().next()
    }

    /// The MCS cluster id of the namespace's CephCluster with MCS enabled.
    pub fn cluster_id(&self) -> Option<String> {
        self.ceph.as_ref().and_then(|c| {
            c.clusters
                .iter()
                .map(CephClusterView::of)
                .find_map(|v| v.cluster_id().map(str::to_owned))
        })
    }
}

/// The Rook daemon a Service stands for: by its `app` label and name, or by the
/// `clusterset.io/rook-service` label of a unique-name export Service.
pub fn daemon_of(service: &Service) -> Option<(Daemon, bool)> {
    let labels = service.metadata.labels.as_ref()?;
    if let Some(rook_service) = labels.get(rook::export_label::ROOK_SERVICE) {
        return rook_service.parse().ok().map(|d| (d, false));
    }
    let app = labels.get(rook::label::APP)?;
    if app != rook::MON_APP && app != rook::OSD_APP {
        return None;
    }
    service
        .metadata
        .name
        .as_deref()?
        .parse()
        .ok()
        .map(|d| (d, true))
}

/// The names to ask DNS: the service's clusterset name, and for a Rook daemon Service in an
/// MCS-enabled CephCluster the per-cluster name Rook resolves (`<clusterID>.<svc>...`).
pub fn questions(facts: &Facts, zone: &Zone) -> Result<Vec<ClustersetName>, QuestionError> {
    let name = ClustersetName::service(&facts.namespace, &facts.name)
        .and_then(|n| n.in_zone(zone.clone()))
        .map_err(|source| QuestionError {
            namespace: facts.namespace.clone(),
            name: facts.name.clone(),
            source,
        })?;
    let mut names = vec![name.clone()];
    if facts.ceph.as_ref().is_some_and(|c| c.rook_service)
        && let Some(id) = facts.cluster_id()
        && let Ok(per_cluster) = name.cluster_service(&id)
    {
        names.push(per_cluster);
    }
    Ok(names)
}

/// The answer to one DNS question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsAnswer {
    /// The name asked.
    pub name: ClustersetName,
    /// The addresses, or why there are none.
    pub answer: Result<Vec<IpAddr>, DnsFailure>,
}

/// Why a DNS question has no addresses, as the resolver said: what kind of failure (the checks'
/// causes and fixes depend on it) and its message (shown as the check's detail).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DnsFailure {
    /// What kind of failure.
    pub kind: DnsFailureKind,
    /// The resolver's message.
    pub message: String,
}

impl std::fmt::Display for DnsFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// The kinds of DNS failure the checks tell apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DnsFailureKind {
    /// The name does not exist (NXDOMAIN).
    NxDomain,
    /// The name exists without addresses (NODATA).
    NoData,
    /// The server refused to answer (REFUSED): it does not serve the zone.
    Refused,
    /// No usable answer: a timeout, another error code, a failed lookup.
    NoAnswer,
}

/// The names of the service are not clusterset names.
#[derive(Debug, thiserror::Error)]
#[error("{namespace}/{name}")]
pub struct QuestionError {
    /// The namespace.
    pub namespace: String,
    /// The service.
    pub name: String,
    /// Why.
    #[source]
    pub source: NameError,
}

/// The SERVICE of `mcsctl diagnose` is not a Service's name (a usage error). The message
/// quotes why, so that the fix follows it; an error chain prints that cause once.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "{name:?} is not a Service name ({source}): pass the Service's name, and its namespace with -n"
)]
pub struct NotAServiceName {
    /// The argument.
    pub name: String,
    /// Why.
    #[source]
    pub source: NameError,
}

/// Checks that `name` can be a Service's name (any namespace's), before anything is read.
///
/// ```
/// use clusterset_report::diagnose::check_service_name;
/// assert!(check_service_name("rook-ceph-mon-a").is_ok());
/// assert!(check_service_name("web.shop").is_err());
/// ```
pub fn check_service_name(name: &str) -> Result<(), NotAServiceName> {
    ClustersetName::service("default", name)
        .map(|_| ())
        .map_err(|source| NotAServiceName {
            name: name.to_owned(),
            source,
        })
}

/// Which hop a check belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Hop {
    /// The Service in this cluster.
    Service,
    /// Its ServiceExport.
    Export,
    /// The ServiceImport.
    Import,
    /// The clusterset DNS answer.
    Dns,
    /// The Ceph daemon behind the Service.
    Ceph,
}

impl Hop {
    /// The hop's name: `service`, `export`, `import`, `dns`, `ceph`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Service => "service",
            Self::Export => "export",
            Self::Import => "import",
            Self::Dns => "dns",
            Self::Ceph => "ceph",
        }
    }
}

/// How a check came out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub enum Outcome {
    /// As it should be.
    Pass,
    /// Broken: the check says the likely cause and the fix.
    Fail,
    /// Not applicable, or cannot be checked because of an earlier failure.
    Skip,
}

/// One check.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Check {
    /// The hop.
    pub hop: Hop,
    /// What is checked.
    pub check: String,
    /// How it came out.
    pub result: Outcome,
    /// What was found.
    pub detail: String,
    /// The likely cause of a failure.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cause: Option<String>,
    /// How to fix it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub fix: Option<String>,
}

impl Check {
    pub(crate) fn pass(hop: Hop, check: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            hop,
            check: check.into(),
            result: Outcome::Pass,
            detail: detail.into(),
            cause: None,
            fix: None,
        }
    }

    pub(crate) fn skip(hop: Hop, check: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            result: Outcome::Skip,
            ..Self::pass(hop, check, detail)
        }
    }

    pub(crate) fn fail(
        hop: Hop,
        check: impl Into<String>,
        detail: impl Into<String>,
        cause: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            result: Outcome::Fail,
            cause: Some(cause.into()),
            fix: Some(fix.into()),
            ..Self::pass(hop, check, detail)
        }
    }
}

/// The diagnosis of one service.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Diagnosis {
    /// The namespace.
    pub namespace: String,
    /// The service.
    pub service: String,
    /// Every check, hop by hop.
    pub checks: Vec<Check>,
    /// Failed checks; the exit status is 1 when there is any.
    pub failed: usize,
    /// The first failed check, `hop: check`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub breaks_at: Option<String>,
}

pub(crate) fn ips_text(ips: &[IpAddr]) -> String {
    if ips.is_empty() {
        "no addresses".to_owned()
    } else {
        ips.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

pub(crate) fn same_set(a: &[IpAddr], b: &[IpAddr]) -> bool {
    a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>()
}

pub(crate) const AGENT_HINT: &str = "check that the MCS controller (clusterset-agent) runs in this cluster and can read ServiceExports; its logs say why not";

/// The checks of `facts` and the DNS `answers`: pure.
pub fn diagnose(facts: &Facts, answers: &[DnsAnswer]) -> Diagnosis {
    let mut checks = Vec::new();
    let exported_here = hops::service_checks(facts, &mut checks);
    hops::export_checks(facts, exported_here, &mut checks);
    hops::import_checks(facts, &mut checks);
    ceph::dns_check(facts, answers.first(), &mut checks);
    ceph::ceph_checks(facts, answers.get(1), &mut checks);
    let failed = checks.iter().filter(|c| c.result == Outcome::Fail).count();
    let breaks_at = checks
        .iter()
        .find(|c| c.result == Outcome::Fail)
        .map(|c| format!("{}: {}", c.hop.as_str(), c.check));
    Diagnosis {
        namespace: facts.namespace.clone(),
        service: facts.name.clone(),
        checks,
        failed,
        breaks_at,
    }
}

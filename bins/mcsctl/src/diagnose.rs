//! `mcsctl diagnose SERVICE`: walks one service through every hop (the Service, its
//! ServiceExport, the ServiceImport, the clusterset DNS answer, and for Ceph daemons the global
//! IP and what the daemon advertises) and says where it breaks, with the likely cause and fix.
//!
//! [`gather`] reads the objects through a [`ClusterReader`]; [`questions`] says which names to
//! ask DNS; [`diagnose`] is a pure function from the objects and the DNS answers to the checks.

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use ceph_address_plan::{Daemon, args, rook};
use clap::Args;
use clusterset_dns::{
    ClustersetResolver, HickoryClustersetResolver, ResolveError, ResolverSettings, resolve_all,
};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use mcs_types::ServiceImportType;
use mcs_types::labels::SERVICE_NAME_LABEL;
use mcs_types::names::{ClustersetName, Zone};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use mon_failover::{MonMap, QuorumStatus};
use serde::Serialize;

use crate::UsageError;
use crate::cluster::{ClusterReader, KubeReader, MaybeServed, Scope};
use crate::kubeconfig::KubeArgs;
use crate::output::{self, Format, style, styled};
use crate::progress::Spinner;
use crate::view::{
    CephClusterView, ExportView, ImportView, mon_endpoints, port_text, slice_addresses,
    slice_clusters,
};

/// Options of `mcsctl diagnose`.
#[derive(Debug, Args)]
pub struct DiagnoseArgs {
    /// The Service to follow (its name; the namespace comes from -n or the context).
    #[arg(value_name = "SERVICE")]
    service: String,
    #[command(flatten)]
    kube: KubeArgs,
    /// The clusterset DNS server to ask (default: the system's, from /etc/resolv.conf).
    #[arg(long, value_name = "IP:PORT")]
    nameserver: Option<SocketAddr>,
    /// The clusterset zone.
    #[arg(long, default_value = mcs_types::names::DEFAULT_ZONE)]
    zone: Zone,
    /// Time for one DNS attempt, in milliseconds.
    #[arg(long, default_value_t = 1000)]
    timeout_ms: u64,
    /// DNS attempts per name.
    #[arg(long, default_value_t = 2)]
    attempts: u32,
    /// The monmap to compare a mon with: the output of `ceph mon dump -f json` or `ceph
    /// quorum_status -f json` (`-` reads stdin).
    #[arg(long, value_name = "FILE")]
    monmap: Option<std::path::PathBuf>,
    /// Output format.
    #[arg(short, long, value_enum, default_value_t = Format::Table)]
    output: Format,
}

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
    /// The monmap, when given (`--monmap`); not read from Kubernetes.
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
    fn export(&self) -> Option<&ServiceExport> {
        self.exports.iter().flatten().next()
    }

    fn import(&self) -> Option<&ServiceImport> {
        self.imports.iter().flatten().next()
    }

    /// The MCS cluster id of the namespace's CephCluster with MCS enabled.
    fn cluster_id(&self) -> Option<String> {
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

/// Reads what `diagnose` needs about `name` in `namespace`.
pub async fn gather(
    reader: &dyn ClusterReader,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Facts> {
    let scope = Scope::Namespace(namespace.to_owned());
    let selector = format!("{SERVICE_NAME_LABEL}={name}");
    let (service, exports, imports, slices) = tokio::try_join!(
        reader.service(namespace, name),
        reader.service_exports(&scope, Some(name)),
        reader.service_imports(&scope, Some(name)),
        reader.endpoint_slices(&scope, &selector),
    )?;
    let ceph = match service.as_ref().and_then(daemon_of) {
        None => None,
        Some((daemon, rook_service)) => {
            let clusters = reader.ceph_clusters(&scope).await?.unwrap_or_default();
            let (mon_endpoints, osd_deployment) = match &daemon {
                Daemon::Mon(_) => (
                    reader
                        .config_map(namespace, rook::MON_ENDPOINTS_CONFIG_MAP)
                        .await?,
                    None,
                ),
                Daemon::Osd(id) => {
                    let selector = format!(
                        "{}={},{}={id}",
                        rook::label::APP,
                        rook::OSD_APP,
                        rook::label::OSD_ID
                    );
                    (
                        None,
                        reader
                            .deployments(namespace, &selector)
                            .await?
                            .into_iter()
                            .next(),
                    )
                }
            };
            Some(CephFacts {
                daemon,
                rook_service,
                clusters,
                mon_endpoints,
                osd_deployment,
                monmap: None,
            })
        }
    };
    Ok(Facts {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        service,
        exports,
        imports,
        slices,
        ceph,
    })
}

/// The names to ask DNS: the service's clusterset name, and for a Rook daemon Service in an
/// MCS-enabled CephCluster the per-cluster name Rook resolves (`<clusterID>.<svc>...`).
pub fn questions(facts: &Facts, zone: &Zone) -> anyhow::Result<Vec<ClustersetName>> {
    let name = ClustersetName::service(&facts.namespace, &facts.name)
        .and_then(|n| n.in_zone(zone.clone()))
        .with_context(|| format!("{}/{}", facts.namespace, facts.name))?;
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
    pub answer: Result<Vec<IpAddr>, ResolveError>,
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
    fn as_str(self) -> &'static str {
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
    fn pass(hop: Hop, check: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            hop,
            check: check.into(),
            result: Outcome::Pass,
            detail: detail.into(),
            cause: None,
            fix: None,
        }
    }

    fn skip(hop: Hop, check: impl Into<String>, detail: impl Into<String>) -> Self {
        Self {
            result: Outcome::Skip,
            ..Self::pass(hop, check, detail)
        }
    }

    fn fail(
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

fn ips_text(ips: &[IpAddr]) -> String {
    if ips.is_empty() {
        "no addresses".to_owned()
    } else {
        ips.iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>()
            .join(", ")
    }
}

fn same_set(a: &[IpAddr], b: &[IpAddr]) -> bool {
    a.iter().collect::<BTreeSet<_>>() == b.iter().collect::<BTreeSet<_>>()
}

const AGENT_HINT: &str = "check that the MCS controller (clusterset-agent) runs in this cluster and can read ServiceExports; its logs say why not";

/// The checks of `facts` and the DNS `answers`: pure.
pub fn diagnose(facts: &Facts, answers: &[DnsAnswer]) -> Diagnosis {
    let mut checks = Vec::new();
    let exported_here = service_checks(facts, &mut checks);
    export_checks(facts, exported_here, &mut checks);
    import_checks(facts, &mut checks);
    dns_check(facts, answers.first(), &mut checks);
    ceph_checks(facts, answers.get(1), &mut checks);
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

/// The Service checks; whether the service is exported from this cluster at all.
fn service_checks(facts: &Facts, checks: &mut Vec<Check>) -> bool {
    let (ns, name) = (&facts.namespace, &facts.name);
    let exists = "Service exists";
    let exportable = "Service is exportable";
    let Some(service) = &facts.service else {
        if facts.export().is_some() {
            checks.push(Check::fail(
                Hop::Service,
                exists,
                format!("no Service {ns}/{name}, but a ServiceExport of that name"),
                "the ServiceExport exports a Service that does not exist (its Valid condition says NoService)",
                format!("create the Service {ns}/{name}, or delete the ServiceExport"),
            ));
            checks.push(Check::skip(Hop::Service, exportable, "no Service"));
            return true;
        }
        if let Some(import) = facts.import() {
            let clusters = ImportView::of(import).clusters;
            let detail = format!(
                "no Service or ServiceExport {ns}/{name} here: the service is imported from {}",
                if clusters.is_empty() {
                    "other clusters".to_owned()
                } else {
                    format!("cluster(s) {}", clusters.join(", "))
                }
            );
            checks.push(Check::skip(Hop::Service, exists, detail));
            checks.push(Check::skip(
                Hop::Service,
                exportable,
                "not exported from this cluster",
            ));
            return false;
        }
        checks.push(Check::fail(
            Hop::Service,
            exists,
            format!("no Service {ns}/{name}, and no ServiceExport or ServiceImport of that name"),
            "the name or the namespace is wrong, or the Service was never created",
            format!(
                "check the name and namespace (kubectl get services -A | grep {name}) and pass -n NAMESPACE"
            ),
        ));
        checks.push(Check::skip(Hop::Service, exportable, "no Service"));
        return true;
    };
    let spec = service.spec.clone().unwrap_or_default();
    let type_ = spec.type_.clone().unwrap_or_else(|| "ClusterIP".to_owned());
    let headless = spec.cluster_ip.as_deref() == Some("None");
    let ports: Vec<String> = spec
        .ports
        .iter()
        .flatten()
        .map(|p| {
            port_text(
                p.name.as_deref(),
                p.port,
                p.protocol.as_deref().unwrap_or("TCP"),
            )
        })
        .collect();
    checks.push(Check::pass(
        Hop::Service,
        exists,
        format!(
            "{type_}{}, ports {}",
            if headless {
                " (headless)".to_owned()
            } else {
                spec.cluster_ip
                    .as_deref()
                    .map(|ip| format!(" {ip}"))
                    .unwrap_or_default()
            },
            if ports.is_empty() {
                "none".to_owned()
            } else {
                ports.join(", ")
            }
        ),
    ));
    if type_ == "ExternalName" {
        checks.push(Check::fail(
            Hop::Service,
            exportable,
            "type ExternalName",
            "ExternalName Services cannot be exported (KEP-1645)",
            "export a ClusterIP or headless Service instead",
        ));
    } else {
        checks.push(Check::pass(
            Hop::Service,
            exportable,
            if headless {
                "headless: imported as Headless"
            } else {
                "imported as ClusterSetIP"
            },
        ));
    }
    true
}

fn export_checks(facts: &Facts, exported_here: bool, checks: &mut Vec<Check>) {
    let (ns, name) = (&facts.namespace, &facts.name);
    let exists = "ServiceExport exists";
    let titles = [
        "ServiceExport is Valid",
        "ServiceExport has no Conflict",
        "ServiceExport is Ready",
    ];
    let skip_rest = |checks: &mut Vec<Check>, why: &str| {
        for title in titles {
            checks.push(Check::skip(Hop::Export, title, why));
        }
    };
    if !exported_here {
        checks.push(Check::skip(
            Hop::Export,
            exists,
            "not exported from this cluster",
        ));
        skip_rest(checks, "not exported from this cluster");
        return;
    }
    let Some(exports) = &facts.exports else {
        checks.push(Check::fail(
            Hop::Export,
            exists,
            "the API server does not serve serviceexports.multicluster.x-k8s.io",
            "the MCS CRDs are not installed in this cluster",
            "mcsctl crds | kubectl apply --server-side -f -",
        ));
        skip_rest(checks, "no MCS CRDs");
        return;
    };
    let Some(export) = exports.first() else {
        let fix = if facts.ceph.is_some() {
            "enable spec.network.multiClusterService in the CephCluster: the operator exports every mon and OSD Service".to_owned()
        } else {
            format!(
                "printf 'apiVersion: multicluster.x-k8s.io/v1beta1\\nkind: ServiceExport\\nmetadata: {{name: {name}, namespace: {ns}}}\\n' | kubectl apply -f -"
            )
        };
        checks.push(Check::fail(
            Hop::Export,
            exists,
            format!("no ServiceExport {ns}/{name}"),
            "the Service is not exported, so no other cluster sees it",
            fix,
        ));
        skip_rest(checks, "no ServiceExport");
        return;
    };
    checks.push(Check::pass(Hop::Export, exists, format!("{ns}/{name}")));
    let view = ExportView::of(export);
    let absent = |title: &str, condition: &str| {
        Check::fail(
            Hop::Export,
            title,
            format!("no {condition} condition"),
            "no MCS controller has processed the export",
            AGENT_HINT,
        )
    };
    let [valid, conflict, ready] = titles;
    checks.push(match (view.valid.status.as_str(), view.valid.reason.as_str()) {
        ("True", _) => Check::pass(Hop::Export, valid, view.valid.describe()),
        ("-", _) => absent(valid, "Valid"),
        (_, "NoService") => Check::fail(
            Hop::Export,
            valid,
            view.valid.describe(),
            "the export names a Service that does not exist",
            format!("create the Service {ns}/{name} (same name and namespace as the export)"),
        ),
        (_, "InvalidServiceType") => Check::fail(
            Hop::Export,
            valid,
            view.valid.describe(),
            "the Service's type cannot be exported (ExternalName)",
            "export a ClusterIP or headless Service instead",
        ),
        _ => Check::fail(
            Hop::Export,
            valid,
            view.valid.describe(),
            "the MCS controller finds the export invalid (the message says why)",
            "fix what the message names, then watch the condition: kubectl get serviceexport -n NAMESPACE NAME -o yaml",
        ),
    });
    checks.push(if view.conflict.is_true() {
        Check::fail(
            Hop::Export,
            conflict,
            view.conflict.describe(),
            "another cluster exports a service of this name with different properties; the oldest export's properties win",
            "make the properties the reason names (ports, type, session affinity, ...) the same in every exporting cluster",
        )
    } else {
        Check::pass(
            Hop::Export,
            conflict,
            if view.conflict.is_present() {
                view.conflict.describe()
            } else {
                "no Conflict condition".to_owned()
            },
        )
    });
    checks.push(
        match (view.ready.status.as_str(), view.ready.reason.as_str()) {
            ("True", _) => Check::pass(Hop::Export, ready, view.ready.describe()),
            ("-", _) => absent(ready, "Ready"),
            (_, "Pending") => Check::fail(
                Hop::Export,
                ready,
                view.ready.describe(),
                "the export has not reached the other clusters yet (the broker)",
                "wait a few seconds; if it stays Pending, check the agent's connection to the hub (its logs, --broker-kubeconfig)",
            ),
            _ => Check::fail(
                Hop::Export,
                ready,
                view.ready.describe(),
                "exporting failed; the message says why",
                "fix what the message names (for example a free address in --global-cidr of clusterset-agent)",
            ),
        },
    );
}

fn import_checks(facts: &Facts, checks: &mut Vec<Check>) {
    let (ns, name) = (&facts.namespace, &facts.name);
    let exists = "ServiceImport exists";
    let addresses = "ServiceImport has IPs and ports";
    let ready = "ServiceImport is Ready";
    let Some(imports) = &facts.imports else {
        checks.push(Check::fail(
            Hop::Import,
            exists,
            "the API server does not serve serviceimports.multicluster.x-k8s.io",
            "the MCS CRDs are not installed in this cluster",
            "mcsctl crds | kubectl apply --server-side -f -",
        ));
        checks.push(Check::skip(Hop::Import, addresses, "no MCS CRDs"));
        checks.push(Check::skip(Hop::Import, ready, "no MCS CRDs"));
        return;
    };
    let Some(import) = imports.first() else {
        let export_ready = facts
            .export()
            .is_some_and(|e| ExportView::of(e).ready.is_true());
        let cause = if facts.export().is_some() && !export_ready {
            "the export is not Ready (see above), so no cluster has imported it yet"
        } else {
            "no MCS controller has imported the service into this cluster"
        };
        checks.push(Check::fail(
            Hop::Import,
            exists,
            format!("no ServiceImport {ns}/{name}"),
            cause,
            AGENT_HINT,
        ));
        checks.push(Check::skip(Hop::Import, addresses, "no ServiceImport"));
        checks.push(Check::skip(Hop::Import, ready, "no ServiceImport"));
        return;
    };
    let view = ImportView::of(import);
    checks.push(Check::pass(
        Hop::Import,
        exists,
        format!(
            "{}, from cluster(s) {}",
            view.type_,
            if view.clusters.is_empty() {
                "-".to_owned()
            } else {
                view.clusters.join(", ")
            }
        ),
    ));
    let detail = format!(
        "IPs {}, ports {}",
        if view.ips.is_empty() {
            "none".to_owned()
        } else {
            view.ips.join(", ")
        },
        if view.ports.is_empty() {
            "none".to_owned()
        } else {
            view.ports.join(", ")
        }
    );
    let service_ports: Vec<String> = facts
        .service
        .as_ref()
        .and_then(|s| s.spec.as_ref())
        .and_then(|s| s.ports.as_ref())
        .map(|ports| {
            ports
                .iter()
                .map(|p| {
                    port_text(
                        p.name.as_deref(),
                        p.port,
                        p.protocol.as_deref().unwrap_or("TCP"),
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    let missing: Vec<&String> = service_ports
        .iter()
        .filter(|p| !view.ports.contains(p))
        .collect();
    let clusterset_ip = import.spec.type_ == ServiceImportType::ClusterSetIP;
    checks.push(if let Err(e) = import.spec.parsed_ips() {
        Check::fail(
            Hop::Import,
            addresses,
            detail,
            e.to_string(),
            "fix the MCS controller that wrote it",
        )
    } else if clusterset_ip && import.spec.ips.is_empty() {
        Check::fail(
            Hop::Import,
            addresses,
            detail,
            "no clusterset IP allocated: the MCS controller has not written one, or has no free address",
            "check clusterset-agent's --clusterset-cidr and its logs",
        )
    } else if view.ports.is_empty() {
        Check::fail(
            Hop::Import,
            addresses,
            detail,
            "the import has no ports",
            "give the Service ports, the same in every exporting cluster",
        )
    } else if !missing.is_empty() {
        Check::fail(
            Hop::Import,
            addresses,
            format!(
                "{detail}; the Service's {} missing",
                missing
                    .iter()
                    .map(|p| p.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
                    + if missing.len() == 1 { " is" } else { " are" }
            ),
            "another exporting cluster has different ports (PortConflict) and its ports won, or the import is not updated yet",
            "make the Service's ports the same in every exporting cluster",
        )
    } else {
        Check::pass(Hop::Import, addresses, detail)
    });
    checks.push(if view.ready.is_true() || !view.ready.is_present() {
        Check::pass(
            Hop::Import,
            ready,
            if view.ready.is_present() {
                view.ready.describe()
            } else {
                "no Ready condition (not every MCS implementation writes one)".to_owned()
            },
        )
    } else {
        Check::fail(
            Hop::Import,
            ready,
            view.ready.describe(),
            "the MCS controller says the import is not usable in this cluster",
            "fix what the message names (for example an IP family this cluster does not have)",
        )
    });
}

/// A failed lookup's likely cause and fix.
fn dns_failure(error: &ResolveError, have_import: bool) -> (String, String) {
    match error {
        ResolveError::NxDomain { .. } if have_import => (
            "the DNS server does not have the name although the ServiceImport exists: it is not the clusterset DNS server of this cluster, or it is not fed from this cluster's imports".to_owned(),
            "ask the clusterset DNS server (--nameserver IP:PORT, clusterset-agent's --dns-listen), and make the cluster DNS forward clusterset.local to it (a CoreDNS stub zone)".to_owned(),
        ),
        ResolveError::NxDomain { .. } => (
            "there is no ServiceImport, so there is no record".to_owned(),
            "fix the import first (above)".to_owned(),
        ),
        ResolveError::NoData { .. } => (
            "the name exists without addresses: a ClusterSetIP import without IPs, or a headless service without ready endpoints".to_owned(),
            "fix the import's IPs or the endpoints (above)".to_owned(),
        ),
        ResolveError::ServerError { code, .. } if code == "REFUSED" => (
            "the server does not serve the clusterset zone".to_owned(),
            "ask the clusterset DNS server instead (--nameserver IP:PORT)".to_owned(),
        ),
        _ => (
            "the nameserver did not answer".to_owned(),
            "check --nameserver and that the clusterset DNS server runs (clusterset-agent, or mcsctl dns serve)".to_owned(),
        ),
    }
}

fn dns_check(facts: &Facts, answer: Option<&DnsAnswer>, checks: &mut Vec<Check>) {
    let Some(answer) = answer else {
        checks.push(Check::skip(Hop::Dns, "DNS answers the import", "not asked"));
        return;
    };
    let check = format!("{} answers the import", answer.name);
    let import = facts.import();
    let expected: Option<Vec<IpAddr>> = import.map(|i| match i.spec.type_ {
        ServiceImportType::ClusterSetIP => i.spec.parsed_ips().unwrap_or_default(),
        ServiceImportType::Headless => {
            slice_addresses(&facts.slices, &facts.namespace, &facts.name, None)
        }
    });
    checks.push(match (&answer.answer, expected) {
        (Err(error), _) => {
            let (cause, fix) = dns_failure(error, import.is_some());
            Check::fail(Hop::Dns, check, error.to_string(), cause, fix)
        }
        (Ok(found), None) => Check::skip(
            Hop::Dns,
            check,
            format!("answers {}, but there is no ServiceImport to compare", ips_text(found)),
        ),
        (Ok(found), Some(expected)) if same_set(found, &expected) => {
            Check::pass(Hop::Dns, check, ips_text(found))
        }
        (Ok(found), Some(expected)) => Check::fail(
            Hop::Dns,
            check,
            format!("answers {}, the import has {}", ips_text(found), ips_text(&expected)),
            "the DNS data differ from this cluster's ServiceImport: a stale answer, or a server fed from another cluster",
            "make sure --nameserver is this cluster's clusterset DNS server, and ask again after the records' TTL",
        ),
    });
}

fn ceph_checks(facts: &Facts, per_cluster: Option<&DnsAnswer>, checks: &mut Vec<Check>) {
    let Some(ceph) = &facts.ceph else {
        return;
    };
    let daemon = &ceph.daemon;
    let ns = &facts.namespace;
    let global = format!("{daemon} has a global IP");
    let Some(cluster_id) = facts.cluster_id() else {
        checks.push(Check::skip(
            Hop::Ceph,
            global,
            format!(
                "no CephCluster in {ns} with spec.network.multiClusterService enabled and a clusterID: {daemon} uses its cluster IP"
            ),
        ));
        return;
    };
    let global_ips = slice_addresses(&facts.slices, ns, &facts.name, Some(&cluster_id));
    if global_ips.is_empty() {
        let seen = slice_clusters(&facts.slices, ns, &facts.name);
        checks.push(Check::fail(
            Hop::Ceph,
            global,
            format!(
                "no ready address in an EndpointSlice of {} from cluster {cluster_id} (slices from: {})",
                facts.name,
                if seen.is_empty() { "none".to_owned() } else { seen.join(", ") }
            ),
            "the MCS agent has not published this cluster's endpoint: no global IP allocated yet, or the export is not Ready",
            "check the ServiceExport's Ready message and clusterset-agent's --global-cidr",
        ));
        return;
    }
    checks.push(Check::pass(
        Hop::Ceph,
        global,
        format!(
            "{} (EndpointSlice from cluster {cluster_id})",
            ips_text(&global_ips)
        ),
    ));
    if let Some(answer) = per_cluster {
        let check = format!("{} answers the global IP", answer.name);
        checks.push(match &answer.answer {
            Ok(found) if same_set(found, &global_ips) => {
                Check::pass(Hop::Ceph, check, ips_text(found))
            }
            Ok(found) => Check::fail(
                Hop::Ceph,
                check,
                format!("answers {}, the global IP is {}", ips_text(found), ips_text(&global_ips)),
                "the DNS data differ from this cluster's EndpointSlice: a stale answer, or a server fed from another cluster",
                "make sure --nameserver is this cluster's clusterset DNS server, and ask again after the records' TTL",
            ),
            Err(ResolveError::NxDomain { .. }) => Check::fail(
                Hop::Ceph,
                check,
                answer.answer.as_ref().err().map(ToString::to_string).unwrap_or_default(),
                "the DNS server does not answer per-cluster names (Rook resolves them; the MCS DNS specification leaves them out)",
                "run the clusterset DNS server with Lighthouse names: clusterset-agent --lighthouse-names (or mcsctl dns serve --lighthouse)",
            ),
            Err(error) => {
                let (cause, fix) = dns_failure(error, true);
                Check::fail(Hop::Ceph, check, error.to_string(), cause, fix)
            }
        });
    }
    match daemon {
        Daemon::Mon(id) => {
            let check = format!(
                "{} has mon {id} at the global IP",
                rook::MON_ENDPOINTS_CONFIG_MAP
            );
            let entry = ceph
                .mon_endpoints
                .as_ref()
                .map(|config_map| mon_endpoints(config_map).remove(id.as_str()));
            checks.push(match entry {
                None => Check::fail(
                    Hop::Ceph,
                    check,
                    format!("no ConfigMap {ns}/{}", rook::MON_ENDPOINTS_CONFIG_MAP),
                    "Rook has not created the cluster's mons in this namespace",
                    "check the CephCluster's status and the Rook operator's logs",
                ),
                Some(entry) => mon_endpoints_check(check, id.as_str(), entry, &global_ips, ns),
            });
            checks.push(monmap_check(
                ceph.monmap.as_ref(),
                id.as_str(),
                &global_ips,
                ns,
            ));
        }
        Daemon::Osd(id) => {
            let check = format!("osd.{id} advertises the global IP (--public-addr)");
            let Some(deployment) = &ceph.osd_deployment else {
                checks.push(Check::fail(
                    Hop::Ceph,
                    check,
                    format!("no Deployment {}{id} in {ns}", rook::OSD_NAME_PREFIX),
                    "Rook has not created the OSD",
                    "check the CephCluster's status and the Rook operator's logs",
                ));
                return;
            };
            checks.push(match args::osd_public_addr(deployment) {
                Some(address) if address.parse().is_ok_and(|ip| global_ips.contains(&ip)) => {
                    Check::pass(Hop::Ceph, check, format!("--public-addr={address}"))
                }
                Some(address) => Check::fail(
                    Hop::Ceph,
                    check,
                    format!("--public-addr={address}, the global IP is {}", ips_text(&global_ips)),
                    "the OSD's arguments are not updated to its global IP yet",
                    format!("the operator updates the OSD Deployments; follow it with mcsctl status -n {ns}"),
                ),
                None => Check::fail(
                    Hop::Ceph,
                    check,
                    "no --public-addr: it advertises its pod IP",
                    "the OSD's arguments are not updated to its global IP yet; its pod IP is not reachable from other clusters",
                    format!("the operator updates the OSD Deployments; follow it with mcsctl status -n {ns}"),
                ),
            });
        }
    }
}

/// What `rook-ceph-mon-endpoints` says of mon `id` (`entry`: its address, `None` when absent).
fn mon_endpoints_check(
    check: String,
    id: &str,
    entry: Option<Result<SocketAddr, String>>,
    global_ips: &[IpAddr],
    ns: &str,
) -> Check {
    match entry {
        None => Check::fail(
            Hop::Ceph,
            check,
            format!("mon {id} is not in its data"),
            "the mon was removed from the cluster, or is not added yet",
            format!("mcsctl status -n {ns} shows the mons the cluster has"),
        ),
        Some(Ok(address)) if global_ips.contains(&address.ip()) => {
            Check::pass(Hop::Ceph, check, format!("{id}={address}"))
        }
        Some(Ok(address)) => Check::fail(
            Hop::Ceph,
            check,
            format!("{id}={address}, the global IP is {}", ips_text(global_ips)),
            "the mon still advertises another address: the move to global IPs has not reached it yet",
            format!(
                "the operator moves the mons one at a time while the quorum holds; follow it with mcsctl status -n {ns}, and if it does not move, read the operator's logs"
            ),
        ),
        Some(Err(text)) => Check::fail(
            Hop::Ceph,
            check,
            format!("{id}={text}"),
            "the entry is not IP:port",
            "the entry is written by Rook or the operator; read their logs",
        ),
    }
}

/// What the monmap (`--monmap`) says of mon `id`.
fn monmap_check(monmap: Option<&MonMap>, id: &str, global_ips: &[IpAddr], ns: &str) -> Check {
    let check = format!("the monmap has mon {id} at the global IP");
    let Some(monmap) = monmap else {
        return Check::skip(
            Hop::Ceph,
            check,
            format!(
                "pass --monmap FILE with the output of `ceph mon dump -f json` (for example kubectl -n {ns} exec deploy/rook-ceph-tools -- ceph mon dump -f json) to compare the monmap"
            ),
        );
    };
    match monmap.mons.iter().find(|m| m.name == id) {
        None => Check::fail(
            Hop::Ceph,
            check,
            format!(
                "mon {id} is not in monmap epoch {} (it has {})",
                monmap.epoch,
                monmap
                    .mons
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "the mon was removed from Ceph (a failover replaced it), or has not joined yet",
            format!(
                "compare with mcsctl status -n {ns}; a mon that never joins is rolled back by the operator"
            ),
        ),
        Some(mon) => match mon.ip() {
            Ok(ip) if global_ips.contains(&ip) => Check::pass(
                Hop::Ceph,
                check,
                format!("{id} at {} (epoch {})", mon.public_addrs, monmap.epoch),
            ),
            Ok(_) => Check::fail(
                Hop::Ceph,
                check,
                format!(
                    "{id} at {}, the global IP is {}",
                    mon.public_addrs,
                    ips_text(global_ips)
                ),
                "Ceph still knows the mon by another address: a mon cannot change its address, so it must be replaced by a new mon on the global IP",
                format!(
                    "the operator replaces the mons one at a time while the quorum holds; follow it with mcsctl status -n {ns}"
                ),
            ),
            Err(error) => Check::fail(
                Hop::Ceph,
                check,
                error.to_string(),
                "the monmap entry has no usable address",
                "check the monmap with ceph mon dump",
            ),
        },
    }
}

/// The diagnosis as text for people.
pub fn render_table(diagnosis: &Diagnosis) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{} {}/{}",
        styled("Diagnosing service", style::HEADER),
        diagnosis.namespace,
        diagnosis.service
    );
    let width = diagnosis
        .checks
        .iter()
        .map(|c| c.hop.as_str().len())
        .max()
        .unwrap_or(0);
    for check in &diagnosis.checks {
        let (word, word_style) = match check.result {
            Outcome::Pass => ("PASS", style::GOOD),
            Outcome::Fail => ("FAIL", style::BAD),
            Outcome::Skip => ("SKIP", style::DIM),
        };
        let _ = writeln!(
            out,
            "{}  {:width$}  {}: {}",
            styled(word, word_style),
            check.hop.as_str(),
            check.check,
            check.detail
        );
        let indent = " ".repeat(width + 8);
        if let Some(cause) = &check.cause {
            let _ = writeln!(out, "{indent}{} {cause}", styled("cause:", style::WARN));
        }
        if let Some(fix) = &check.fix {
            let _ = writeln!(out, "{indent}{}   {fix}", styled("fix:", style::WARN));
        }
    }
    out.push('\n');
    match &diagnosis.breaks_at {
        None => {
            let _ = writeln!(
                out,
                "{}",
                styled(
                    &format!("No problems found ({} checks).", diagnosis.checks.len()),
                    style::GOOD
                )
            );
        }
        Some(at) => {
            let _ = writeln!(
                out,
                "{}",
                styled(
                    &format!(
                        "{} of {} checks failed; the service breaks at {at}.",
                        diagnosis.failed,
                        diagnosis.checks.len()
                    ),
                    style::BAD
                )
            );
        }
    }
    out
}

/// Reads a monmap from `ceph mon dump -f json` or `ceph quorum_status -f json` output.
pub fn read_monmap(text: &str) -> Result<MonMap, String> {
    match serde_json::from_str::<QuorumStatus>(text) {
        Ok(status) => Ok(status.monmap),
        Err(_) => serde_json::from_str::<MonMap>(text).map_err(|e| e.to_string()),
    }
}

fn load_monmap(path: &std::path::Path) -> anyhow::Result<MonMap> {
    let text = if path == std::path::Path::new("-") {
        std::io::read_to_string(std::io::stdin()).context("reading the monmap from stdin")?
    } else {
        std::fs::read_to_string(path)
            .with_context(|| format!("reading the monmap {}", path.display()))?
    };
    read_monmap(&text).map_err(|e| {
        anyhow::anyhow!(
            "{} is not the JSON of `ceph mon dump -f json` or `ceph quorum_status -f json`: {e}",
            path.display()
        )
    })
}

/// Asks DNS the `names` with `resolver`.
pub async fn ask(resolver: &dyn ClustersetResolver, names: &[ClustersetName]) -> Vec<DnsAnswer> {
    resolve_all(resolver, names, 4)
        .await
        .into_iter()
        .zip(names)
        .map(|(result, name)| DnsAnswer {
            name: name.clone(),
            answer: result.map(|r| r.addresses),
        })
        .collect()
}

/// Runs `mcsctl diagnose`: exit status 1 when a check failed.
pub fn run(args: &DiagnoseArgs) -> anyhow::Result<ExitCode> {
    ClustersetName::service("default", &args.service).map_err(|e| {
        UsageError(format!(
            "{:?} is not a Service name ({e}): pass the Service's name, and its namespace with -n",
            args.service
        ))
    })?;
    let monmap = args.monmap.as_deref().map(load_monmap).transpose()?;
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    let diagnosis = runtime.block_on(async {
        let connection = crate::kubeconfig::connect(&args.kube).await?;
        let namespace = connection.namespace.clone();
        let reader = KubeReader::new(connection.client, connection.origin);
        let spinner = Spinner::start(format!("reading {namespace}/{}", args.service));
        let mut facts = gather(&reader, &namespace, &args.service).await?;
        if let Some(ceph) = facts.ceph.as_mut() {
            ceph.monmap = monmap;
        }
        let names = questions(&facts, &args.zone)?;
        spinner.set_message(format!(
            "asking DNS for {} (up to {} attempts)",
            names
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(", "),
            args.attempts
        ));
        let resolver = HickoryClustersetResolver::new(ResolverSettings {
            nameserver: args.nameserver,
            timeout: Duration::from_millis(args.timeout_ms),
            attempts: args.attempts,
            ..ResolverSettings::default()
        })?;
        let answers = ask(&resolver, &names).await;
        spinner.finish();
        anyhow::Ok(diagnose(&facts, &answers))
    })?;
    let text = output::render(&diagnosis, args.output, render_table)?;
    output::print_verdict(&text, diagnosis.failed > 0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fake_api::FakeApi;
    use crate::test_support::{fixture, lines, mock_client, objects};

    fn of<T: serde::de::DeserializeOwned>(values: Vec<serde_json::Value>) -> Vec<T> {
        values
            .into_iter()
            .map(|v| serde_json::from_value(v).unwrap())
            .collect()
    }

    /// What `gather` returns for `namespace`/`name` of the recorded cluster, built without IO.
    fn facts(namespace: &str, name: &str) -> Facts {
        let named = |kind: &str| -> Vec<serde_json::Value> {
            fixture()
                .into_iter()
                .filter(|o| {
                    o["kind"] == kind
                        && o["metadata"]["namespace"] == namespace
                        && o["metadata"]["name"] == name
                })
                .collect()
        };
        let service: Option<Service> = of(named("Service")).into_iter().next();
        let slices: Vec<EndpointSlice> = objects::<EndpointSlice>("EndpointSlice", Some(namespace))
            .into_iter()
            .filter(|s| {
                s.metadata
                    .labels
                    .as_ref()
                    .and_then(|l| l.get(SERVICE_NAME_LABEL))
                    == Some(&name.to_owned())
            })
            .collect();
        let ceph = service
            .as_ref()
            .and_then(daemon_of)
            .map(|(daemon, rook_service)| {
                let osd_deployment = match &daemon {
                    Daemon::Osd(_) => objects::<Deployment>("Deployment", Some(namespace))
                        .into_iter()
                        .find(|d| d.metadata.name.as_deref() == Some(name)),
                    Daemon::Mon(_) => None,
                };
                CephFacts {
                    daemon,
                    rook_service,
                    clusters: fixture()
                        .into_iter()
                        .filter(|o| {
                            o["kind"] == "CephCluster" && o["metadata"]["namespace"] == namespace
                        })
                        .collect(),
                    mon_endpoints: objects::<ConfigMap>("ConfigMap", Some(namespace))
                        .into_iter()
                        .next(),
                    osd_deployment,
                    monmap: None,
                }
            });
        Facts {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            service,
            exports: Some(of(named("ServiceExport"))),
            imports: Some(of(named("ServiceImport"))),
            slices,
            ceph,
        }
    }

    fn zone() -> Zone {
        Zone::default()
    }

    /// The answers a DNS server gives: `found` for each question, in order.
    fn answers(facts: &Facts, found: &[Result<&[&str], ResolveError>]) -> Vec<DnsAnswer> {
        let names = questions(facts, &zone()).unwrap();
        assert_eq!(names.len(), found.len(), "questions: {names:?}");
        names
            .into_iter()
            .zip(found)
            .map(|(name, answer)| DnsAnswer {
                name,
                answer: answer
                    .clone()
                    .map(|ips| ips.iter().map(|ip| ip.parse().unwrap()).collect()),
            })
            .collect()
    }

    fn nxdomain(name: &str) -> ResolveError {
        ResolveError::NxDomain {
            name: name.to_owned(),
        }
    }

    /// `(hop, check, result)` of every check.
    fn outcomes(diagnosis: &Diagnosis) -> Vec<(&'static str, String, Outcome)> {
        diagnosis
            .checks
            .iter()
            .map(|c| (c.hop.as_str(), c.check.clone(), c.result))
            .collect()
    }

    fn check<'a>(diagnosis: &'a Diagnosis, title: &str) -> &'a Check {
        diagnosis
            .checks
            .iter()
            .find(|c| c.check == title)
            .unwrap_or_else(|| panic!("no check {title:?} in {diagnosis:#?}"))
    }

    use Outcome::{Fail, Pass, Skip};

    fn owned(list: &[(&'static str, &str, Outcome)]) -> Vec<(&'static str, String, Outcome)> {
        list.iter()
            .map(|(h, c, o)| (*h, (*c).to_owned(), *o))
            .collect()
    }

    #[test]
    fn a_healthy_service_passes_every_hop() {
        let facts = facts("shop", "web");
        let diagnosis = diagnose(&facts, &answers(&facts, &[Ok(&["243.0.1.1"])]));
        assert_eq!(
            outcomes(&diagnosis),
            owned(&[
                ("service", "Service exists", Pass),
                ("service", "Service is exportable", Pass),
                ("export", "ServiceExport exists", Pass),
                ("export", "ServiceExport is Valid", Pass),
                ("export", "ServiceExport has no Conflict", Pass),
                ("export", "ServiceExport is Ready", Pass),
                ("import", "ServiceImport exists", Pass),
                ("import", "ServiceImport has IPs and ports", Pass),
                ("import", "ServiceImport is Ready", Pass),
                (
                    "dns",
                    "web.shop.svc.clusterset.local answers the import",
                    Pass
                ),
            ])
        );
        assert_eq!(
            (diagnosis.failed, diagnosis.breaks_at.as_deref()),
            (0, None)
        );
        assert_eq!(
            check(&diagnosis, "Service exists").detail,
            "ClusterIP 10.96.20.1, ports http:80/TCP"
        );
        assert_eq!(
            check(&diagnosis, "ServiceImport has IPs and ports").detail,
            "IPs 243.0.1.1, ports http:80/TCP"
        );
        assert!(strip(&render_table(&diagnosis)).ends_with("\nNo problems found (10 checks).\n"));
    }

    fn strip(text: &str) -> String {
        use std::io::Write as _;
        let mut out = Vec::new();
        anstream::StripStream::new(&mut out)
            .write_all(text.as_bytes())
            .unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn a_migrated_mon_passes_the_ceph_hops_too() {
        let facts = facts("rook-ceph", "rook-ceph-mon-a");
        let names: Vec<String> = questions(&facts, &zone())
            .unwrap()
            .iter()
            .map(ToString::to_string)
            .collect();
        assert_eq!(
            names,
            [
                "rook-ceph-mon-a.rook-ceph.svc.clusterset.local",
                "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local"
            ]
        );
        let diagnosis = diagnose(
            &facts,
            &answers(&facts, &[Ok(&["243.0.0.10"]), Ok(&["242.1.0.10"])]),
        );
        assert_eq!(diagnosis.failed, 0, "{diagnosis:#?}");
        let ceph: Vec<(String, Outcome, String)> = diagnosis
            .checks
            .iter()
            .filter(|c| c.hop == Hop::Ceph)
            .map(|c| (c.check.clone(), c.result, c.detail.clone()))
            .collect();
        assert_eq!(
            ceph,
            [
                (
                    "mon.a has a global IP".to_owned(),
                    Pass,
                    "242.1.0.10 (EndpointSlice from cluster east)".to_owned()
                ),
                (
                    "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local answers the global IP"
                        .to_owned(),
                    Pass,
                    "242.1.0.10".to_owned()
                ),
                (
                    "rook-ceph-mon-endpoints has mon a at the global IP".to_owned(),
                    Pass,
                    "a=242.1.0.10:6789".to_owned()
                ),
                (
                    "the monmap has mon a at the global IP".to_owned(),
                    Skip,
                    "pass --monmap FILE with the output of `ceph mon dump -f json` (for example kubectl -n rook-ceph exec deploy/rook-ceph-tools -- ceph mon dump -f json) to compare the monmap".to_owned()
                ),
            ]
        );
    }

    fn mon_dump() -> MonMap {
        read_monmap(include_str!("../tests/fixtures/mon-dump.json")).unwrap()
    }

    #[test]
    fn the_monmap_of_ceph_mon_dump_or_quorum_status_is_compared_with_the_global_ip() {
        let monmap = mon_dump();
        assert_eq!(monmap.epoch, 4);
        // `ceph quorum_status -f json` carries the same monmap.
        let status = serde_json::json!({
            "election_epoch": 12, "quorum": [0, 1], "quorum_names": ["a", "b"],
            "quorum_leader_name": "a", "monmap": serde_json::to_value(&monmap).unwrap()
        });
        assert_eq!(read_monmap(&status.to_string()).unwrap(), monmap);
        assert!(read_monmap("{\"epoch\": 1}").is_err());

        let mut facts = facts("rook-ceph", "rook-ceph-mon-a");
        facts.ceph.as_mut().unwrap().monmap = Some(monmap.clone());
        let found = [Ok(&["243.0.0.10"][..]), Ok(&["242.1.0.10"][..])];
        let diagnosis = diagnose(&facts, &answers(&facts, &found));
        let check_ = check(&diagnosis, "the monmap has mon a at the global IP");
        assert_eq!(
            (check_.result, check_.detail.as_str()),
            (
                Pass,
                "a at [v2:242.1.0.10:3300/0,v1:242.1.0.10:6789/0] (epoch 4)"
            )
        );

        // Ceph still has the mon at its cluster IP.
        let mut old = monmap.clone();
        for a in &mut old.mons[0].public_addrs.addrvec {
            a.addr = a.addr.replace("242.1.0.10", "10.96.12.10");
        }
        facts.ceph.as_mut().unwrap().monmap = Some(old);
        let diagnosis = diagnose(&facts, &answers(&facts, &found));
        let check_ = check(&diagnosis, "the monmap has mon a at the global IP");
        assert_eq!(check_.result, Fail);
        assert_eq!(
            check_.detail,
            "a at [v2:10.96.12.10:3300/0,v1:10.96.12.10:6789/0], the global IP is 242.1.0.10"
        );
        assert!(
            check_
                .cause
                .as_deref()
                .unwrap()
                .contains("a mon cannot change its address")
        );

        // The mon is gone from Ceph.
        let mut gone = monmap;
        gone.mons.remove(0);
        facts.ceph.as_mut().unwrap().monmap = Some(gone);
        let diagnosis = diagnose(&facts, &answers(&facts, &found));
        assert_eq!(
            check(&diagnosis, "the monmap has mon a at the global IP").detail,
            "mon a is not in monmap epoch 4 (it has b)"
        );
    }

    #[test]
    fn a_mon_whose_export_failed_breaks_at_the_export_and_says_why_downstream() {
        let facts = facts("rook-ceph", "rook-ceph-mon-b");
        let diagnosis = diagnose(
            &facts,
            &answers(
                &facts,
                &[
                    Err(nxdomain("rook-ceph-mon-b.rook-ceph.svc.clusterset.local")),
                    Err(nxdomain(
                        "east.rook-ceph-mon-b.rook-ceph.svc.clusterset.local",
                    )),
                ],
            ),
        );
        assert_eq!(
            outcomes(&diagnosis),
            owned(&[
                ("service", "Service exists", Pass),
                ("service", "Service is exportable", Pass),
                ("export", "ServiceExport exists", Pass),
                ("export", "ServiceExport is Valid", Pass),
                ("export", "ServiceExport has no Conflict", Pass),
                ("export", "ServiceExport is Ready", Fail),
                ("import", "ServiceImport exists", Fail),
                ("import", "ServiceImport has IPs and ports", Skip),
                ("import", "ServiceImport is Ready", Skip),
                (
                    "dns",
                    "rook-ceph-mon-b.rook-ceph.svc.clusterset.local answers the import",
                    Fail
                ),
                ("ceph", "mon.b has a global IP", Fail),
            ])
        );
        assert_eq!(diagnosis.failed, 4);
        assert_eq!(
            diagnosis.breaks_at.as_deref(),
            Some("export: ServiceExport is Ready")
        );
        let ready = check(&diagnosis, "ServiceExport is Ready");
        assert!(
            ready
                .detail
                .starts_with("False (Failed): No global IP for this export"),
            "{ready:?}"
        );
        assert_eq!(
            ready.cause.as_deref(),
            Some("exporting failed; the message says why")
        );
        assert_eq!(
            check(&diagnosis, "ServiceImport exists").cause.as_deref(),
            Some("the export is not Ready (see above), so no cluster has imported it yet")
        );
        let dns = check(
            &diagnosis,
            "rook-ceph-mon-b.rook-ceph.svc.clusterset.local answers the import",
        );
        assert_eq!(dns.fix.as_deref(), Some("fix the import first (above)"));
        let table = strip(&render_table(&diagnosis));
        assert!(
            table.contains("\nFAIL  export   ServiceExport is Ready: False (Failed): No global IP"),
            "{table}"
        );
        assert!(
            table.contains("\n               cause: exporting failed; the message says why\n"),
            "{table}"
        );
        assert!(
            table.ends_with(
                "4 of 11 checks failed; the service breaks at export: ServiceExport is Ready.\n"
            ),
            "{table}"
        );
    }

    #[test]
    fn an_imported_only_service_skips_the_local_hops() {
        let facts = facts("shop", "api");
        let diagnosis = diagnose(&facts, &answers(&facts, &[Ok(&["243.0.1.2"])]));
        assert_eq!(diagnosis.failed, 0);
        assert_eq!(
            check(&diagnosis, "Service exists").detail,
            "no Service or ServiceExport shop/api here: the service is imported from cluster(s) west"
        );
        let skipped = diagnosis.checks.iter().filter(|c| c.result == Skip).count();
        assert_eq!(skipped, 6);
        assert_eq!(
            check(&diagnosis, "ServiceImport is Ready").detail,
            "no Ready condition (not every MCS implementation writes one)"
        );
    }

    #[test]
    fn a_headless_service_is_compared_with_its_ready_endpoints() {
        let facts = facts("shop", "db");
        let good = diagnose(
            &facts,
            &answers(&facts, &[Ok(&["10.244.2.7", "10.244.1.5"])]),
        );
        assert_eq!(good.failed, 0, "{good:#?}");
        assert_eq!(
            check(&good, "Service exists").detail,
            "ClusterIP (headless), ports pg:5432/TCP"
        );
        // The endpoint that is not ready must not be answered.
        let bad = diagnose(
            &facts,
            &answers(&facts, &[Ok(&["10.244.1.5", "10.244.2.7", "10.244.3.9"])]),
        );
        assert_eq!(
            bad.breaks_at.as_deref(),
            Some("dns: db.shop.svc.clusterset.local answers the import")
        );
    }

    #[test]
    fn a_stale_dns_answer_is_told_apart_from_a_missing_name_and_a_dead_server() {
        let facts = facts("shop", "web");
        let stale = diagnose(&facts, &answers(&facts, &[Ok(&["243.0.9.9"])]));
        let dns = check(&stale, "web.shop.svc.clusterset.local answers the import");
        assert_eq!(dns.result, Fail);
        assert_eq!(dns.detail, "answers 243.0.9.9, the import has 243.0.1.1");
        assert!(
            dns.cause
                .as_deref()
                .unwrap()
                .starts_with("the DNS data differ")
        );
        let missing = diagnose(
            &facts,
            &answers(&facts, &[Err(nxdomain("web.shop.svc.clusterset.local"))]),
        );
        let dns = check(&missing, "web.shop.svc.clusterset.local answers the import");
        assert!(dns.cause.as_deref().unwrap().starts_with(
            "the DNS server does not have the name although the ServiceImport exists"
        ));
        let timeout = ResolveError::Timeout {
            name: "web.shop.svc.clusterset.local".to_owned(),
            attempts: 2,
            timeout: Duration::from_millis(300),
        };
        let dead = diagnose(&facts, &answers(&facts, &[Err(timeout)]));
        let dns = check(&dead, "web.shop.svc.clusterset.local answers the import");
        assert_eq!(dns.cause.as_deref(), Some("the nameserver did not answer"));
    }

    #[test]
    fn conflicts_invalid_exports_and_external_names_each_say_their_fix() {
        let mut facts = facts("shop", "web");
        let export = &mut facts.exports.as_mut().unwrap()[0];
        let conditions = &mut export.status.as_mut().unwrap().conditions;
        conditions[1].status = "True".to_owned();
        conditions[1].reason = "PortConflict".to_owned();
        conditions[1].message = "Conflicting ports.".to_owned();
        let diagnosis = diagnose(&facts, &answers(&facts, &[Ok(&["243.0.1.1"])]));
        let conflict = check(&diagnosis, "ServiceExport has no Conflict");
        assert_eq!(
            (conflict.result, conflict.detail.as_str()),
            (Fail, "True (PortConflict): Conflicting ports.")
        );
        assert!(
            conflict
                .fix
                .as_deref()
                .unwrap()
                .starts_with("make the properties the reason names")
        );

        let mut external = facts.clone();
        external
            .service
            .as_mut()
            .unwrap()
            .spec
            .as_mut()
            .unwrap()
            .type_ = Some("ExternalName".to_owned());
        let diagnosis = diagnose(&external, &answers(&external, &[Ok(&["243.0.1.1"])]));
        assert_eq!(
            diagnosis.breaks_at.as_deref(),
            Some("service: Service is exportable")
        );

        // A ServiceExport no controller has looked at.
        let mut unprocessed = facts.clone();
        unprocessed.exports.as_mut().unwrap()[0].status = None;
        let diagnosis = diagnose(&unprocessed, &answers(&unprocessed, &[Ok(&["243.0.1.1"])]));
        let valid = check(&diagnosis, "ServiceExport is Valid");
        assert_eq!(
            (valid.result, valid.detail.as_str()),
            (Fail, "no Valid condition")
        );
        assert_eq!(valid.fix.as_deref(), Some(AGENT_HINT));

        // No MCS CRDs at all.
        let mut no_crds = facts.clone();
        no_crds.exports = None;
        no_crds.imports = None;
        let diagnosis = diagnose(
            &no_crds,
            &answers(&no_crds, &[Err(nxdomain("web.shop.svc.clusterset.local"))]),
        );
        let exists = check(&diagnosis, "ServiceExport exists");
        assert_eq!(
            exists.fix.as_deref(),
            Some("mcsctl crds | kubectl apply --server-side -f -")
        );

        // A name nothing knows.
        let nothing = super::tests::facts("shop", "nope");
        let diagnosis = diagnose(
            &nothing,
            &answers(&nothing, &[Err(nxdomain("nope.shop.svc.clusterset.local"))]),
        );
        assert_eq!(
            diagnosis.breaks_at.as_deref(),
            Some("service: Service exists")
        );
        assert!(
            check(&diagnosis, "Service exists")
                .fix
                .as_deref()
                .unwrap()
                .contains("kubectl get services -A | grep nope")
        );
    }

    #[test]
    fn ceph_hops_catch_lighthouse_names_stale_mon_endpoints_and_osd_args() {
        // The DNS server does not answer Rook's per-cluster name.
        let facts = facts("rook-ceph", "rook-ceph-mon-a");
        let diagnosis = diagnose(
            &facts,
            &answers(
                &facts,
                &[
                    Ok(&["243.0.0.10"]),
                    Err(nxdomain(
                        "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local",
                    )),
                ],
            ),
        );
        let per_cluster = check(
            &diagnosis,
            "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local answers the global IP",
        );
        assert_eq!(per_cluster.result, Fail);
        assert!(
            per_cluster
                .fix
                .as_deref()
                .unwrap()
                .contains("--lighthouse-names")
        );

        // rook-ceph-mon-endpoints still has the mon at its cluster IP.
        let mut stale = facts.clone();
        let ceph = stale.ceph.as_mut().unwrap();
        ceph.mon_endpoints
            .as_mut()
            .unwrap()
            .data
            .as_mut()
            .unwrap()
            .insert(
                "data".to_owned(),
                "a=10.96.12.10:6789,b=10.96.12.11:6789".to_owned(),
            );
        let diagnosis = diagnose(
            &stale,
            &answers(&stale, &[Ok(&["243.0.0.10"]), Ok(&["242.1.0.10"])]),
        );
        let endpoints = check(
            &diagnosis,
            "rook-ceph-mon-endpoints has mon a at the global IP",
        );
        assert_eq!(
            (endpoints.result, endpoints.detail.as_str()),
            (Fail, "a=10.96.12.10:6789, the global IP is 242.1.0.10")
        );
        assert!(
            endpoints
                .fix
                .as_deref()
                .unwrap()
                .contains("mcsctl status -n rook-ceph")
        );

        // An OSD: passes with --public-addr at its global IP, fails without.
        let osd = super::tests::facts("rook-ceph", "rook-ceph-osd-0");
        let diagnosis = diagnose(
            &osd,
            &answers(&osd, &[Ok(&["243.0.0.20"]), Ok(&["242.1.0.20"])]),
        );
        assert_eq!(diagnosis.failed, 0, "{diagnosis:#?}");
        assert_eq!(
            check(&diagnosis, "osd.0 advertises the global IP (--public-addr)").detail,
            "--public-addr=242.1.0.20"
        );
        let mut pod_ip = osd.clone();
        let deployment = pod_ip
            .ceph
            .as_mut()
            .unwrap()
            .osd_deployment
            .as_mut()
            .unwrap();
        let container = &mut deployment
            .spec
            .as_mut()
            .unwrap()
            .template
            .spec
            .as_mut()
            .unwrap()
            .containers[0];
        container.args = Some(vec!["--foreground".to_owned()]);
        let diagnosis = diagnose(
            &pod_ip,
            &answers(&pod_ip, &[Ok(&["243.0.0.20"]), Ok(&["242.1.0.20"])]),
        );
        assert_eq!(
            diagnosis.breaks_at.as_deref(),
            Some("ceph: osd.0 advertises the global IP (--public-addr)")
        );

        // MCS off in the CephCluster: no Ceph hop beyond saying so, and no per-cluster name.
        let mut off = facts.clone();
        off.ceph.as_mut().unwrap().clusters[0]["spec"]["network"]["multiClusterService"]["enabled"] =
            false.into();
        assert_eq!(questions(&off, &zone()).unwrap().len(), 1);
        let diagnosis = diagnose(&off, &answers(&off, &[Ok(&["243.0.0.10"])]));
        assert_eq!(check(&diagnosis, "mon.a has a global IP").result, Skip);
    }

    #[tokio::test]
    async fn gather_reads_the_service_its_mcs_objects_and_its_daemon() {
        let (client, requests) = mock_client(FakeApi::new(fixture()));
        let reader = KubeReader::new(client, "test");
        let mon = gather(&reader, "rook-ceph", "rook-ceph-mon-a")
            .await
            .unwrap();
        assert_eq!(
            lines(&requests),
            [
                "GET /api/v1/namespaces/rook-ceph/configmaps/rook-ceph-mon-endpoints",
                "GET /api/v1/namespaces/rook-ceph/services/rook-ceph-mon-a",
                "GET /apis/ceph.rook.io/v1/namespaces/rook-ceph/cephclusters",
                "GET /apis/discovery.k8s.io/v1/namespaces/rook-ceph/endpointslices?labelSelector=multicluster.kubernetes.io/service-name=rook-ceph-mon-a",
                "GET /apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceexports?fieldSelector=metadata.name=rook-ceph-mon-a",
                "GET /apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceimports?fieldSelector=metadata.name=rook-ceph-mon-a",
            ]
        );
        // The same facts as the fixture holds.
        let expected = facts("rook-ceph", "rook-ceph-mon-a");
        assert_eq!(mon.service, expected.service);
        assert_eq!(mon.exports, expected.exports);
        assert_eq!(mon.slices, expected.slices);
        assert_eq!(mon.cluster_id().as_deref(), Some("east"));
        requests.lock().unwrap().clear();
        let osd = gather(&reader, "rook-ceph", "rook-ceph-osd-0")
            .await
            .unwrap();
        assert!(
            lines(&requests).contains(&"GET /apis/apps/v1/namespaces/rook-ceph/deployments?labelSelector=app=rook-ceph-osd,ceph-osd-id=0".to_owned()),
            "{:#?}",
            lines(&requests)
        );
        assert!(osd.ceph.unwrap().osd_deployment.is_some());
        // A plain service reads no Ceph objects.
        requests.lock().unwrap().clear();
        gather(&reader, "shop", "web").await.unwrap();
        assert_eq!(lines(&requests).len(), 4);
    }
}

//! The checks of the hops in this cluster's API: the Service, its ServiceExport, the
//! ServiceImport.

use k8s_openapi::api::core::v1::ServicePort;
use mcs_types::ServiceImportType;
use mcs_types::v1beta1::{ServiceExport, ServiceImport};

use super::{AGENT_HINT, Check, Facts, Hop};
use crate::view::{ExportView, ImportView, port_text};

const SERVICE_EXISTS: &str = "Service exists";
const SERVICE_EXPORTABLE: &str = "Service is exportable";
const EXPORT_EXISTS: &str = "ServiceExport exists";
const EXPORT_VALID: &str = "ServiceExport is Valid";
const EXPORT_NO_CONFLICT: &str = "ServiceExport has no Conflict";
const EXPORT_READY: &str = "ServiceExport is Ready";
const IMPORT_EXISTS: &str = "ServiceImport exists";
const IMPORT_ADDRESSES: &str = "ServiceImport has IPs and ports";
const IMPORT_READY: &str = "ServiceImport is Ready";

/// A Service's ports as [`port_text`] shows them (`name:port/protocol`).
fn port_texts(ports: Option<&[ServicePort]>) -> Vec<String> {
    ports
        .into_iter()
        .flatten()
        .map(|p| {
            port_text(
                p.name.as_deref(),
                p.port,
                p.protocol.as_deref().unwrap_or("TCP"),
            )
        })
        .collect()
}

/// The Service checks; whether the service is exported from this cluster at all.
pub(super) fn service_checks(facts: &Facts, checks: &mut Vec<Check>) -> bool {
    let Some(service) = &facts.service else {
        return missing_service_checks(facts, checks);
    };
    let spec = service.spec.clone().unwrap_or_default();
    let type_ = spec.type_.clone().unwrap_or_else(|| "ClusterIP".to_owned());
    let headless = spec.cluster_ip.as_deref() == Some("None");
    let ports = port_texts(spec.ports.as_deref());
    checks.push(Check::pass(
        Hop::Service,
        SERVICE_EXISTS,
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
            SERVICE_EXPORTABLE,
            "type ExternalName",
            "ExternalName Services cannot be exported (KEP-1645)",
            "export a ClusterIP or headless Service instead",
        ));
    } else {
        checks.push(Check::pass(
            Hop::Service,
            SERVICE_EXPORTABLE,
            if headless {
                "headless: imported as Headless"
            } else {
                "imported as ClusterSetIP"
            },
        ));
    }
    true
}

/// The Service checks when there is no Service: a ServiceExport without one, a service only
/// imported here, or nothing of that name; whether the service is exported from this cluster.
fn missing_service_checks(facts: &Facts, checks: &mut Vec<Check>) -> bool {
    let (ns, name) = (&facts.namespace, &facts.name);
    if facts.export().is_some() {
        checks.push(Check::fail(
            Hop::Service,
            SERVICE_EXISTS,
            format!("no Service {ns}/{name}, but a ServiceExport of that name"),
            "the ServiceExport exports a Service that does not exist (its Valid condition says NoService)",
            format!("create the Service {ns}/{name}, or delete the ServiceExport"),
        ));
        checks.push(Check::skip(Hop::Service, SERVICE_EXPORTABLE, "no Service"));
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
        checks.push(Check::skip(Hop::Service, SERVICE_EXISTS, detail));
        checks.push(Check::skip(
            Hop::Service,
            SERVICE_EXPORTABLE,
            "not exported from this cluster",
        ));
        return false;
    }
    checks.push(Check::fail(
        Hop::Service,
        SERVICE_EXISTS,
        format!("no Service {ns}/{name}, and no ServiceExport or ServiceImport of that name"),
        "the name or the namespace is wrong, or the Service was never created",
        format!(
            "check the name and namespace (kubectl get services -A | grep {name}) and pass -n NAMESPACE"
        ),
    ));
    checks.push(Check::skip(Hop::Service, SERVICE_EXPORTABLE, "no Service"));
    true
}

/// The ServiceExport checks: it exists, is Valid, has no Conflict and is Ready.
pub(super) fn export_checks(facts: &Facts, exported_here: bool, checks: &mut Vec<Check>) {
    let Some(export) = found_export(facts, exported_here, checks) else {
        return;
    };
    let view = ExportView::of(export);
    checks.push(export_valid_check(facts, &view));
    checks.push(export_conflict_check(&view));
    checks.push(export_ready_check(&view));
}

/// The ServiceExport, its existence checked: `None` when there is none (or no MCS CRDs, or the
/// service is not exported from here), the checks of its conditions skipped.
fn found_export<'a>(
    facts: &'a Facts,
    exported_here: bool,
    checks: &mut Vec<Check>,
) -> Option<&'a ServiceExport> {
    let (ns, name) = (&facts.namespace, &facts.name);
    let skip_rest = |checks: &mut Vec<Check>, why: &str| {
        for title in [EXPORT_VALID, EXPORT_NO_CONFLICT, EXPORT_READY] {
            checks.push(Check::skip(Hop::Export, title, why));
        }
    };
    if !exported_here {
        checks.push(Check::skip(
            Hop::Export,
            EXPORT_EXISTS,
            "not exported from this cluster",
        ));
        skip_rest(checks, "not exported from this cluster");
        return None;
    }
    let Some(exports) = &facts.exports else {
        checks.push(Check::fail(
            Hop::Export,
            EXPORT_EXISTS,
            "the API server does not serve serviceexports.multicluster.x-k8s.io",
            "the MCS CRDs are not installed in this cluster",
            "mcsctl crds | kubectl apply --server-side -f -",
        ));
        skip_rest(checks, "no MCS CRDs");
        return None;
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
            EXPORT_EXISTS,
            format!("no ServiceExport {ns}/{name}"),
            "the Service is not exported, so no other cluster sees it",
            fix,
        ));
        skip_rest(checks, "no ServiceExport");
        return None;
    };
    checks.push(Check::pass(
        Hop::Export,
        EXPORT_EXISTS,
        format!("{ns}/{name}"),
    ));
    Some(export)
}

/// The failed check `title` of an export without the `condition` no MCS controller wrote.
fn no_export_condition(title: &str, condition: &str) -> Check {
    Check::fail(
        Hop::Export,
        title,
        format!("no {condition} condition"),
        "no MCS controller has processed the export",
        AGENT_HINT,
    )
}

/// Whether the ServiceExport is Valid, and if not, why by its reason.
fn export_valid_check(facts: &Facts, view: &ExportView) -> Check {
    let (ns, name) = (&facts.namespace, &facts.name);
    match (view.valid.status.as_str(), view.valid.reason.as_str()) {
        ("True", _) => Check::pass(Hop::Export, EXPORT_VALID, view.valid.describe()),
        ("-", _) => no_export_condition(EXPORT_VALID, "Valid"),
        (_, "NoService") => Check::fail(
            Hop::Export,
            EXPORT_VALID,
            view.valid.describe(),
            "the export names a Service that does not exist",
            format!("create the Service {ns}/{name} (same name and namespace as the export)"),
        ),
        (_, "InvalidServiceType") => Check::fail(
            Hop::Export,
            EXPORT_VALID,
            view.valid.describe(),
            "the Service's type cannot be exported (ExternalName)",
            "export a ClusterIP or headless Service instead",
        ),
        _ => Check::fail(
            Hop::Export,
            EXPORT_VALID,
            view.valid.describe(),
            "the MCS controller finds the export invalid (the message says why)",
            "fix what the message names, then watch the condition: kubectl get serviceexport -n NAMESPACE NAME -o yaml",
        ),
    }
}

/// Whether the ServiceExport has no Conflict condition that is true.
fn export_conflict_check(view: &ExportView) -> Check {
    if view.conflict.is_true() {
        Check::fail(
            Hop::Export,
            EXPORT_NO_CONFLICT,
            view.conflict.describe(),
            "another cluster exports a service of this name with different properties; the oldest export's properties win",
            "make the properties the reason names (ports, type, session affinity, ...) the same in every exporting cluster",
        )
    } else {
        Check::pass(
            Hop::Export,
            EXPORT_NO_CONFLICT,
            if view.conflict.is_present() {
                view.conflict.describe()
            } else {
                "no Conflict condition".to_owned()
            },
        )
    }
}

/// Whether the ServiceExport is Ready, and if not, why by its reason.
fn export_ready_check(view: &ExportView) -> Check {
    match (view.ready.status.as_str(), view.ready.reason.as_str()) {
        ("True", _) => Check::pass(Hop::Export, EXPORT_READY, view.ready.describe()),
        ("-", _) => no_export_condition(EXPORT_READY, "Ready"),
        (_, "Pending") => Check::fail(
            Hop::Export,
            EXPORT_READY,
            view.ready.describe(),
            "the export has not reached the other clusters yet (the broker)",
            "wait a few seconds; if it stays Pending, check the agent's connection to the hub (its logs, --broker-kubeconfig)",
        ),
        _ => Check::fail(
            Hop::Export,
            EXPORT_READY,
            view.ready.describe(),
            "exporting failed; the message says why",
            "fix what the message names (for example a free address in --global-cidr of clusterset-agent)",
        ),
    }
}

/// The ServiceImport checks: it exists, has IPs and ports, and is Ready.
pub(super) fn import_checks(facts: &Facts, checks: &mut Vec<Check>) {
    let Some(import) = found_import(facts, checks) else {
        return;
    };
    let view = ImportView::of(import);
    checks.push(Check::pass(
        Hop::Import,
        IMPORT_EXISTS,
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
    checks.push(import_addresses_check(facts, import, &view));
    checks.push(import_ready_check(&view));
}

/// The ServiceImport: `None` when there is none (or no MCS CRDs), its existence check failed and
/// the others skipped.
fn found_import<'a>(facts: &'a Facts, checks: &mut Vec<Check>) -> Option<&'a ServiceImport> {
    let (ns, name) = (&facts.namespace, &facts.name);
    let Some(imports) = &facts.imports else {
        checks.push(Check::fail(
            Hop::Import,
            IMPORT_EXISTS,
            "the API server does not serve serviceimports.multicluster.x-k8s.io",
            "the MCS CRDs are not installed in this cluster",
            "mcsctl crds | kubectl apply --server-side -f -",
        ));
        checks.push(Check::skip(Hop::Import, IMPORT_ADDRESSES, "no MCS CRDs"));
        checks.push(Check::skip(Hop::Import, IMPORT_READY, "no MCS CRDs"));
        return None;
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
            IMPORT_EXISTS,
            format!("no ServiceImport {ns}/{name}"),
            cause,
            AGENT_HINT,
        ));
        checks.push(Check::skip(
            Hop::Import,
            IMPORT_ADDRESSES,
            "no ServiceImport",
        ));
        checks.push(Check::skip(Hop::Import, IMPORT_READY, "no ServiceImport"));
        return None;
    };
    Some(import)
}

/// Whether the ServiceImport has valid IPs (a clusterset IP for a ClusterSetIP import) and
/// ports, among them every port of the Service.
fn import_addresses_check(facts: &Facts, import: &ServiceImport, view: &ImportView) -> Check {
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
    let service_ports = port_texts(
        facts
            .service
            .as_ref()
            .and_then(|s| s.spec.as_ref())
            .and_then(|s| s.ports.as_deref()),
    );
    let missing: Vec<&String> = service_ports
        .iter()
        .filter(|p| !view.ports.contains(p))
        .collect();
    let clusterset_ip = import.spec.type_ == ServiceImportType::ClusterSetIP;
    if let Err(e) = import.spec.parsed_ips() {
        Check::fail(
            Hop::Import,
            IMPORT_ADDRESSES,
            detail,
            e.to_string(),
            "fix the MCS controller that wrote it",
        )
    } else if clusterset_ip && import.spec.ips.is_empty() {
        Check::fail(
            Hop::Import,
            IMPORT_ADDRESSES,
            detail,
            "no clusterset IP allocated: the MCS controller has not written one, or has no free address",
            "check clusterset-agent's --clusterset-cidr and its logs",
        )
    } else if view.ports.is_empty() {
        Check::fail(
            Hop::Import,
            IMPORT_ADDRESSES,
            detail,
            "the import has no ports",
            "give the Service ports, the same in every exporting cluster",
        )
    } else if !missing.is_empty() {
        Check::fail(
            Hop::Import,
            IMPORT_ADDRESSES,
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
        Check::pass(Hop::Import, IMPORT_ADDRESSES, detail)
    }
}

/// Whether the ServiceImport is Ready (or has no Ready condition, which not every MCS
/// implementation writes).
fn import_ready_check(view: &ImportView) -> Check {
    if view.ready.is_true() || !view.ready.is_present() {
        Check::pass(
            Hop::Import,
            IMPORT_READY,
            if view.ready.is_present() {
                view.ready.describe()
            } else {
                "no Ready condition (not every MCS implementation writes one)".to_owned()
            },
        )
    } else {
        Check::fail(
            Hop::Import,
            IMPORT_READY,
            view.ready.describe(),
            "the MCS controller says the import is not usable in this cluster",
            "fix what the message names (for example an IP family this cluster does not have)",
        )
    }
}

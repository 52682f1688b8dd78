//! The checks of the hops in this cluster's API: the Service, its ServiceExport, the
//! ServiceImport.

use mcs_types::ServiceImportType;

use super::{AGENT_HINT, Check, Facts, Hop};
use crate::view::{ExportView, ImportView, port_text};

/// The Service checks; whether the service is exported from this cluster at all.
pub(super) fn service_checks(facts: &Facts, checks: &mut Vec<Check>) -> bool {
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

pub(super) fn export_checks(facts: &Facts, exported_here: bool, checks: &mut Vec<Check>) {
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

pub(super) fn import_checks(facts: &Facts, checks: &mut Vec<Check>) {
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

//! Merging the exports of one service from every cluster (KEP-1645 "Constraints and Conflict
//! Resolution"): the oldest export wins, ties broken by cluster id; ports are a union merged by
//! name, then by (protocol, port); every difference raises its standard conflict reason, and
//! every exporter gets the same verdict.

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::api::core::v1::SessionAffinityConfig;
use mcs_types::conditions::{ConflictReason, ConflictReasons};
use mcs_types::{ServiceImportType, ServicePort};

use mcs_types::{ClusterId, ServiceKey};

use crate::model::{ExportRecord, PortIdentity};

/// Input that cannot be merged.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MergeError {
    /// A record for another service was passed in.
    #[error(
        "record from cluster {cluster} is for service {found}, not {expected}: pass the records of one service at a time"
    )]
    MixedServices {
        /// The service of the first record.
        expected: ServiceKey,
        /// The service of the odd record.
        found: ServiceKey,
        /// The cluster that published the odd record.
        cluster: ClusterId,
    },
    /// One cluster published two records for the same service.
    #[error(
        "cluster {cluster} published two records for {service}: a cluster exports a service once; remove the duplicate record from the broker"
    )]
    DuplicateCluster {
        /// The service.
        service: ServiceKey,
        /// The cluster.
        cluster: ClusterId,
    },
}

/// The result of merging every cluster's export of one service: what every importing cluster
/// imports (apart from its own clusterset IPs) and the conflict verdict for every exporter.
#[derive(Debug, Clone, PartialEq)]
pub struct MergedService {
    /// The service.
    pub key: ServiceKey,
    /// The cluster whose export is oldest; its values win every conflict.
    pub winner: ClusterId,
    /// `ClusterSetIP` or `Headless`, from the oldest export.
    pub service_type: ServiceImportType,
    /// The union of ports, merged by name then (protocol, port), older exports first.
    pub ports: Vec<ServicePort>,
    /// From the oldest export.
    pub session_affinity: String,
    /// From the oldest export.
    pub session_affinity_config: Option<SessionAffinityConfig>,
    /// From the oldest export.
    pub ip_families: Vec<String>,
    /// From the oldest export.
    pub internal_traffic_policy: String,
    /// From the oldest export.
    pub traffic_distribution: Option<String>,
    /// The oldest export's exported labels (whole map: no per-key merging).
    pub exported_labels: BTreeMap<String, String>,
    /// The oldest export's exported annotations (whole map).
    pub exported_annotations: BTreeMap<String, String>,
    /// The conflicts found; the same for every exporter.
    pub conflicts: ConflictReasons,
    /// The `Conflict` condition message (empty without conflicts).
    pub conflict_message: String,
    /// Every record, in precedence order (oldest first).
    pub records: Vec<ExportRecord>,
}

impl MergedService {
    /// The exporting clusters, sorted by id.
    pub fn cluster_ids(&self) -> Vec<&ClusterId> {
        let mut ids: Vec<&ClusterId> = self.records.iter().map(|r| &r.cluster_id).collect();
        ids.sort();
        ids
    }

    /// The ports of `cluster`'s own Service that are part of the merged ports (matched by
    /// name): traffic to a port goes only to clusters that expose it.
    pub fn ports_served_by(&self, record: &ExportRecord) -> Vec<&ServicePort> {
        let own: BTreeSet<PortIdentity> = record.service.port_set();
        self.ports
            .iter()
            .filter(|p| own.contains(&PortIdentity::of(p)))
            .collect()
    }
}

/// Merges the records of one service. `Ok(None)` when no cluster exports it any more (the
/// import must then be deleted everywhere).
pub fn merge_exports(records: &[ExportRecord]) -> Result<Option<MergedService>, MergeError> {
    let Some(first) = records.first() else {
        return Ok(None);
    };
    check_one_service_once_per_cluster(first, records)?;
    let ordered = in_precedence_order(records);
    let winner = &ordered[0];
    let ports = merge_ports(&ordered);
    let (conflicts, conflict_message) = conflict_verdict(winner, &ordered, &ports);
    let w = &winner.service;
    Ok(Some(MergedService {
        key: winner.service_key.clone(),
        winner: winner.cluster_id.clone(),
        service_type: import_type(w.headless),
        ports,
        session_affinity: w.session_affinity.clone(),
        session_affinity_config: w.session_affinity_config.clone(),
        ip_families: w.ip_families.clone(),
        internal_traffic_policy: w.internal_traffic_policy.clone(),
        traffic_distribution: w.traffic_distribution.clone(),
        exported_labels: winner.exported_labels.clone(),
        exported_annotations: winner.exported_annotations.clone(),
        conflicts,
        conflict_message,
        records: ordered,
    }))
}

/// Checks that every record is of `first`'s service and that no cluster published two.
fn check_one_service_once_per_cluster(
    first: &ExportRecord,
    records: &[ExportRecord],
) -> Result<(), MergeError> {
    let mut seen = BTreeSet::new();
    for record in records {
        if record.service_key != first.service_key {
            return Err(MergeError::MixedServices {
                expected: first.service_key.clone(),
                found: record.service_key.clone(),
                cluster: record.cluster_id.clone(),
            });
        }
        if !seen.insert(&record.cluster_id) {
            return Err(MergeError::DuplicateCluster {
                service: first.service_key.clone(),
                cluster: record.cluster_id.clone(),
            });
        }
    }
    Ok(())
}

/// The records oldest export first; creationTimestamp has one-second granularity, so ties are
/// common and are broken by cluster id, the same way in every cluster.
fn in_precedence_order(records: &[ExportRecord]) -> Vec<ExportRecord> {
    let mut ordered = records.to_vec();
    ordered.sort_by(|a, b| {
        (&a.export_created, &a.cluster_id).cmp(&(&b.export_created, &b.cluster_id))
    });
    ordered
}

/// The import type of a (non-)headless export.
fn import_type(headless: bool) -> ServiceImportType {
    if headless {
        ServiceImportType::Headless
    } else {
        ServiceImportType::ClusterSetIP
    }
}

/// The verdict every exporter gets: the conflict reasons raised by some export that differs
/// from the `winner`'s (the oldest of `ordered`) or from the merged `ports`, and the `Conflict`
/// condition's message, a sentence per reason in the spec's order.
fn conflict_verdict(
    winner: &ExportRecord,
    ordered: &[ExportRecord],
    ports: &[ServicePort],
) -> (ConflictReasons, String) {
    let total = ordered.len();
    let mut conflicts = ConflictReasons::new();
    let mut messages = Vec::new();
    for (reason, count, text) in conflict_checks(winner, ordered, ports) {
        if count > 0 {
            conflicts.insert(reason);
            messages.push(format!("{text} {count}/{total} clusters disagree."));
        }
    }
    (conflicts, messages.join("\n"))
}

/// Every conflict reason in the spec's order, with how many of the `ordered` exports differ
/// from the `winner` (or, for ports, from the merged `ports`) and the message's sentence naming
/// the value that wins.
fn conflict_checks(
    winner: &ExportRecord,
    ordered: &[ExportRecord],
    ports: &[ServicePort],
) -> [(ConflictReason, usize, String); 9] {
    let merged_ports: BTreeSet<PortIdentity> = ports.iter().map(PortIdentity::of).collect();
    let w = &winner.service;
    let disagree =
        |differs: &dyn Fn(&ExportRecord) -> bool| ordered.iter().filter(|r| differs(r)).count();
    let from_oldest = |what: &str, winning: String| {
        format!(
            "Conflicting {what}. Using {winning} from oldest service export in \"{}\".",
            winner.cluster_id
        )
    };
    [
        (
            ConflictReason::Type,
            disagree(&|r| r.service.headless != w.headless),
            from_oldest("type", format!("\"{}\"", import_type(w.headless))),
        ),
        (
            ConflictReason::Port,
            disagree(&|r| r.service.port_set() != merged_ports),
            format!(
                "Conflicting ports. Using the union of all clusters' ports; on a name or protocol/port clash the oldest service export (in \"{}\") wins.",
                winner.cluster_id
            ),
        ),
        (
            ConflictReason::SessionAffinity,
            disagree(&|r| r.service.session_affinity != w.session_affinity),
            from_oldest("sessionAffinity", format!("\"{}\"", w.session_affinity)),
        ),
        (
            ConflictReason::SessionAffinityConfig,
            disagree(&|r| r.service.session_affinity_config != w.session_affinity_config),
            from_oldest(
                "sessionAffinityConfig",
                format!(
                    "timeoutSeconds {:?}",
                    timeout_of(w.session_affinity_config.as_ref())
                ),
            ),
        ),
        (
            ConflictReason::Labels,
            disagree(&|r| r.exported_labels != winner.exported_labels),
            from_oldest("exportedLabels", format!("{:?}", winner.exported_labels)),
        ),
        (
            ConflictReason::Annotations,
            disagree(&|r| r.exported_annotations != winner.exported_annotations),
            from_oldest(
                "exportedAnnotations",
                format!("{:?}", winner.exported_annotations),
            ),
        ),
        (
            ConflictReason::InternalTrafficPolicy,
            disagree(&|r| r.service.internal_traffic_policy != w.internal_traffic_policy),
            from_oldest(
                "internalTrafficPolicy",
                format!("\"{}\"", w.internal_traffic_policy),
            ),
        ),
        (
            ConflictReason::TrafficDistribution,
            disagree(&|r| r.service.traffic_distribution != w.traffic_distribution),
            from_oldest(
                "trafficDistribution",
                format!("\"{}\"", w.traffic_distribution.as_deref().unwrap_or("")),
            ),
        ),
        (
            ConflictReason::IpFamily,
            disagree(&|r| r.service.ip_families != w.ip_families),
            from_oldest("ipFamilies", format!("{:?}", w.ip_families)),
        ),
    ]
}

fn timeout_of(config: Option<&SessionAffinityConfig>) -> Option<i32> {
    config
        .and_then(|c| c.client_ip.as_ref())
        .and_then(|c| c.timeout_seconds)
}

/// Folds the ports of the exports in precedence order: a port joins unless one with the same
/// name, or the same (protocol, port), is already there.
fn merge_ports(ordered: &[ExportRecord]) -> Vec<ServicePort> {
    let mut merged: Vec<ServicePort> = Vec::new();
    for record in ordered {
        for port in &record.service.ports {
            let identity = PortIdentity::of(port);
            let clashes = merged.iter().any(|m| {
                let existing = PortIdentity::of(m);
                existing.name == identity.name
                    || (existing.protocol == identity.protocol && existing.port == identity.port)
            });
            if !clashes {
                merged.push(port.clone());
            }
        }
    }
    merged
}

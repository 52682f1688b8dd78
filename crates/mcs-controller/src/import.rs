//! The objects an importing cluster writes for a merged service (ServiceImport and
//! EndpointSlices), and the conditions every exporter writes on its ServiceExport.

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{Service, ServicePort as CorePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use mcs_types::conditions::{
    ConditionStatus, DesiredCondition, ServiceExportConditionType, ServiceImportConditionReason,
};
use mcs_types::labels::{
    CLUSTERSET_ENDPOINTSLICE_CONTROLLER, ENDPOINTSLICE_MANAGED_BY_LABEL,
    KUBERNETES_SERVICE_NAME_LABEL, SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL,
};
use mcs_types::v1beta1::ServiceImport;
use mcs_types::{
    ClusterStatus, ServiceImportSpec, ServiceImportStatus, ServiceImportType, ServiceKey,
};

use crate::merge::MergedService;
use crate::model::{ExportRecord, InvalidExport, family_of};

/// The most endpoints Kubernetes puts in one EndpointSlice; larger sets are split.
pub const MAX_ENDPOINTS_PER_SLICE: usize = 1000;

/// The prefix of the name of the Service derived from a ServiceImport ([`derived_service_name`]).
pub const DERIVED_SERVICE_PREFIX: &str = "clusterset-";
/// The label (`app.kubernetes.io/managed-by`) and value that mark a Service as derived by the
/// agent from a ServiceImport; the import is named by its `multicluster.kubernetes.io/service-name`.
pub const DERIVED_SERVICE_MANAGED_BY: (&str, &str) = (
    "app.kubernetes.io/managed-by",
    CLUSTERSET_ENDPOINTSLICE_CONTROLLER,
);

/// The name of the Service the agent derives from the ServiceImport `import_name`:
/// `clusterset-<name>`, or, when that is longer than a DNS label (63), its first 43 characters
/// after the prefix, `-`, and 8 hex digits of a hash of the whole name.
///
/// ```
/// use mcs_controller::derived_service_name;
/// assert_eq!(derived_service_name("rook-ceph-mon-a"), "clusterset-rook-ceph-mon-a");
/// let long = derived_service_name(&"m".repeat(63));
/// assert_eq!(long.len(), 63);
/// assert_ne!(long, derived_service_name(&format!("{}n", "m".repeat(62))));
/// ```
pub fn derived_service_name(import_name: &str) -> String {
    const MAX: usize = 63;
    let name = format!("{DERIVED_SERVICE_PREFIX}{import_name}");
    if name.len() <= MAX {
        return name;
    }
    let kept: String = import_name
        .chars()
        .take(MAX - DERIVED_SERVICE_PREFIX.len() - 9)
        .collect();
    format!(
        "{DERIVED_SERVICE_PREFIX}{kept}-{:08x}",
        fnv1a(import_name.as_bytes())
    )
}

/// The import a Service was derived from, if the agent derived it (its managed-by label
/// [`DERIVED_SERVICE_MANAGED_BY`] and its `multicluster.kubernetes.io/service-name`).
pub fn derived_from(service: &Service) -> Option<ServiceKey> {
    let labels = service.metadata.labels.as_ref()?;
    if labels.get(DERIVED_SERVICE_MANAGED_BY.0).map(String::as_str)
        != Some(DERIVED_SERVICE_MANAGED_BY.1)
    {
        return None;
    }
    let name = labels.get(SERVICE_NAME_LABEL)?;
    Some(ServiceKey::new(
        service.metadata.namespace.as_deref().unwrap_or_default(),
        name,
    ))
}

/// The Service an importing cluster derives from a `ClusterSetIP` import so that the node's
/// kube-proxy serves its clusterset IPs (GKE's model, with the clusterset IPs as the Service's
/// `externalIPs`): no selector, the import's ports, `externalIPs` = the clusterset IPs; its
/// endpoints are the imported EndpointSlices, which carry `kubernetes.io/service-name` = this
/// Service's name ([`desired_endpoint_slices`]). kube-proxy on every node then DNATs a pod's
/// connection to a clusterset IP to one of the exporting clusters' endpoints (their global IPs,
/// routed to the gateway). `None` for a headless import or one without clusterset IPs.
pub fn desired_derived_service(
    merged: &MergedService,
    clusterset_ips: &[IpAddr],
) -> Option<Service> {
    if merged.service_type != ServiceImportType::ClusterSetIP || clusterset_ips.is_empty() {
        return None;
    }
    let ports = merged
        .ports
        .iter()
        .map(|p| CorePort {
            name: p.name.clone(),
            protocol: p.protocol.clone(),
            app_protocol: p.app_protocol.clone(),
            port: p.port,
            target_port: Some(IntOrString::Int(p.port)),
            ..Default::default()
        })
        .collect();
    Some(Service {
        metadata: ObjectMeta {
            name: Some(derived_service_name(&merged.key.name)),
            namespace: Some(merged.key.namespace.clone()),
            labels: Some(BTreeMap::from([
                (SERVICE_NAME_LABEL.to_owned(), merged.key.name.clone()),
                (
                    DERIVED_SERVICE_MANAGED_BY.0.to_owned(),
                    DERIVED_SERVICE_MANAGED_BY.1.to_owned(),
                ),
            ])),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            type_: Some("ClusterIP".to_owned()),
            ports: Some(ports),
            external_ips: Some(
                ordered_ips(&merged.ip_families, clusterset_ips)
                    .into_iter()
                    .map(|ip| ip.to_string())
                    .collect(),
            ),
            session_affinity: Some(merged.session_affinity.clone()),
            session_affinity_config: merged.session_affinity_config.clone(),
            ..Default::default()
        }),
        status: None,
    })
}

/// The ServiceImport an importing cluster writes: the merged spec with this cluster's clusterset
/// IPs (one per family of the import, in `ipFamilies` order; none for headless), the exporting
/// clusters in `status.clusters`, and the exported labels and annotations as its metadata.
///
/// Conditions are left to [`import_ready_condition`], which the caller sets with Kubernetes
/// semantics on the stored object.
pub fn desired_import(merged: &MergedService, clusterset_ips: &[IpAddr]) -> ServiceImport {
    let mut spec = ServiceImportSpec::new(merged.service_type, merged.ports.clone());
    if merged.service_type == ServiceImportType::ClusterSetIP {
        spec.ips = ordered_ips(&merged.ip_families, clusterset_ips)
            .into_iter()
            .map(|ip| ip.to_string())
            .collect();
        spec.session_affinity = Some(merged.session_affinity.clone());
        spec.session_affinity_config = merged.session_affinity_config.clone();
    }
    spec.ip_families = merged.ip_families.clone();
    spec.internal_traffic_policy = Some(merged.internal_traffic_policy.clone());
    spec.traffic_distribution = merged.traffic_distribution.clone();
    let mut import = ServiceImport::new(&merged.key.name, spec);
    import.metadata.namespace = Some(merged.key.namespace.clone());
    import.metadata.labels =
        (!merged.exported_labels.is_empty()).then(|| merged.exported_labels.clone());
    import.metadata.annotations =
        (!merged.exported_annotations.is_empty()).then(|| merged.exported_annotations.clone());
    import.status = Some(ServiceImportStatus {
        clusters: merged
            .cluster_ids()
            .into_iter()
            .map(|id| ClusterStatus::new(id.as_str()))
            .collect(),
        ..Default::default()
    });
    import
}

/// `clusterset_ips` arranged in the order of `families`, one per family, skipping families
/// without an address.
fn ordered_ips(families: &[String], clusterset_ips: &[IpAddr]) -> Vec<IpAddr> {
    families
        .iter()
        .filter_map(|family| {
            clusterset_ips
                .iter()
                .copied()
                .find(|ip| family_of(*ip) == family)
        })
        .collect()
}

/// The ServiceImport `Ready` condition: `True`, or `False`/`IPFamilyNotSupported` naming the
/// families this cluster could not give a clusterset IP.
pub fn import_ready_condition(
    merged: &MergedService,
    clusterset_ips: &[IpAddr],
) -> DesiredCondition {
    if merged.service_type == ServiceImportType::ClusterSetIP {
        let missing: Vec<&str> = merged
            .ip_families
            .iter()
            .filter(|family| {
                !clusterset_ips
                    .iter()
                    .any(|ip| family_of(*ip) == family.as_str())
            })
            .map(String::as_str)
            .collect();
        if !missing.is_empty() {
            return DesiredCondition::import_ready(
                ConditionStatus::False,
                ServiceImportConditionReason::IPFamilyNotSupported,
                format!(
                    "This cluster has no clusterset IP range for {}: configure one, or export the service with IP families this cluster supports",
                    missing.join(" and ")
                ),
            );
        }
    }
    DesiredCondition::import_ready(
        ConditionStatus::True,
        ServiceImportConditionReason::Ready,
        "",
    )
}

/// The EndpointSlices every importing cluster writes: per source cluster and address family,
/// split at [`MAX_ENDPOINTS_PER_SLICE`], labelled with the MCS service-name and source-cluster
/// labels and our managed-by value, with endpoint conditions as published and only the ports
/// that cluster serves.
pub fn desired_endpoint_slices(merged: &MergedService) -> Vec<EndpointSlice> {
    // A ClusterSetIP import's slices are also its derived Service's, for kube-proxy.
    let derived = (merged.service_type == ServiceImportType::ClusterSetIP)
        .then(|| derived_service_name(&merged.key.name));
    let mut slices = Vec::new();
    for record in &merged.records {
        let served: Vec<_> = merged.ports_served_by(record);
        for family in &record.endpoints {
            let ports: Vec<EndpointPort> = family
                .ports
                .iter()
                .filter(|p| served.iter().any(|s| s.name == p.name))
                .cloned()
                .collect();
            let chunks: Vec<_> = family.endpoints.chunks(MAX_ENDPOINTS_PER_SLICE).collect();
            for (index, endpoints) in chunks.iter().enumerate() {
                slices.push(EndpointSlice {
                    metadata: ObjectMeta {
                        name: Some(endpoint_slice_name(record, &family.address_type, index)),
                        namespace: Some(merged.key.namespace.clone()),
                        labels: Some(
                            BTreeMap::from([
                                (SERVICE_NAME_LABEL.to_owned(), merged.key.name.clone()),
                                (
                                    SOURCE_CLUSTER_LABEL.to_owned(),
                                    record.cluster_id.to_string(),
                                ),
                                (
                                    ENDPOINTSLICE_MANAGED_BY_LABEL.to_owned(),
                                    CLUSTERSET_ENDPOINTSLICE_CONTROLLER.to_owned(),
                                ),
                            ])
                            .into_iter()
                            .chain(
                                derived
                                    .clone()
                                    .map(|name| (KUBERNETES_SERVICE_NAME_LABEL.to_owned(), name)),
                            )
                            .collect(),
                        ),
                        ..Default::default()
                    },
                    address_type: family.address_type.clone(),
                    endpoints: endpoints.to_vec(),
                    ports: Some(ports.clone()),
                });
            }
        }
    }
    slices
}

/// A stable, unique, valid object name for one slice: readable parts plus a hash of all of them
/// (so that `a-b` from `c` and `a` from `b-c` never collide).
fn endpoint_slice_name(record: &ExportRecord, address_type: &str, index: usize) -> String {
    let family = address_type.to_ascii_lowercase();
    let identity = format!(
        "{}/{}/{}/{}/{}",
        record.service_key.namespace, record.service_key.name, record.cluster_id, family, index
    );
    let hash = fnv1a(identity.as_bytes());
    // Object names are DNS subdomains (253 chars); keep well under with short readable parts.
    let name: String = record.service_key.name.chars().take(63).collect();
    let cluster: String = record.cluster_id.as_str().chars().take(63).collect();
    format!("{name}-{cluster}-{family}-{hash:08x}")
}

/// 32-bit FNV-1a: a small stable hash (not for security).
fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5_u32, |hash, b| {
        (hash ^ u32::from(*b)).wrapping_mul(0x0100_0193)
    })
}

/// Whether this cluster's export has been published to the clusterset.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Publication {
    /// Not yet published (or the broker has not confirmed it).
    Pending,
    /// Published and visible in the merged service.
    Published,
    /// Publishing failed; the message says why.
    Failed(String),
}

/// The conditions an exporting cluster sets on its ServiceExport, and the condition types it
/// removes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExportConditions {
    /// Conditions to set (with [`mcs_types::conditions::set_condition`]).
    pub set: Vec<DesiredCondition>,
    /// Condition types to remove.
    pub remove: Vec<ServiceExportConditionType>,
}

/// The ServiceExport conditions of one exporter: `Valid` from the local check, `Conflict` from
/// the merged service (the same verdict on every exporter), `Ready` from the publication state.
pub fn export_conditions(
    local: Result<(), &InvalidExport>,
    merged: Option<&MergedService>,
    publication: &Publication,
) -> ExportConditions {
    if let Err(invalid) = local {
        return ExportConditions {
            set: vec![
                invalid.condition(),
                DesiredCondition::new(
                    ServiceExportConditionType::Ready.as_str(),
                    ConditionStatus::False,
                    mcs_types::conditions::ServiceExportConditionReason::Pending.as_str(),
                    "Not exported until the ServiceExport is valid",
                ),
            ],
            remove: vec![ServiceExportConditionType::Conflict],
        };
    }
    let mut set = vec![DesiredCondition::export_valid()];
    let mut remove = Vec::new();
    match merged {
        Some(m) => set.push(DesiredCondition::export_conflict(
            &m.conflicts,
            m.conflict_message.clone(),
        )),
        None => remove.push(ServiceExportConditionType::Conflict),
    }
    set.push(match publication {
        Publication::Published => DesiredCondition::export_exported(),
        Publication::Pending => {
            DesiredCondition::export_pending("Waiting for the clusterset to accept the export")
        }
        Publication::Failed(message) => DesiredCondition::export_failed(message.clone()),
    });
    ExportConditions { set, remove }
}

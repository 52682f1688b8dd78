//! The writes of a decision: what each is ([`Write`]), whether a desired object must be
//! applied (missing, or ours and different: [`covers`] with a typed fast path), the OSD
//! Deployments' address arguments and their hand-back paced one failure domain at a time.
//! The deletes of removed OSDs' objects are `removed`'s.

use std::collections::BTreeMap;

use ceph_address_plan::rook_objects;
use ceph_address_plan::{Daemon, Plan};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mcs_ceph_api::CephClusterAddressing;
use mcs_types::v1beta1::ServiceExport;
use serde_json::Value;

use super::exports::ExportView;
use crate::config::FIELD_MANAGER;
use crate::snapshot::{McsVersion, Snapshot};

/// A write the decision asks for. Every write is a server-side apply under
/// [`FIELD_MANAGER`](crate::config::FIELD_MANAGER).
#[derive(Debug, Clone, PartialEq)]
pub enum Write {
    /// An OSD Service or a cluster-unique export Service.
    ApplyService(Box<Service>),
    /// A ServiceExport, built as v1beta1 and written in the version the cluster serves.
    ApplyServiceExport {
        /// The export.
        export: Box<ServiceExport>,
        /// The MCS API version to write it in.
        version: McsVersion,
    },
    /// The operator's status object.
    ApplyStatus(Box<CephClusterAddressing>),
    /// The address arguments, label, env entry and ports of an OSD Deployment: a partial
    /// Deployment ([`rook_objects::osd_args_body`] says what it holds and why).
    ApplyOsdArgs {
        /// Namespace of the Deployment.
        namespace: String,
        /// Name of the Deployment.
        name: String,
        /// The apply body.
        body: Box<Value>,
    },
    /// The keys of `rook-ceph-mon-endpoints` the plan writes.
    ApplyMonEndpoints(Box<ConfigMap>),
    /// `mon_host` and `mon_initial_members` of `rook-ceph-config`.
    ApplyMonConfig(Box<Secret>),
    /// Deletes a Service the operator made for an OSD that is gone: only the object with this
    /// uid (a Service of the same name made since is left alone).
    DeleteService {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The uid the decision saw.
        uid: String,
    },
    /// Deletes a ServiceExport the operator made for an OSD that is gone, by uid as above.
    DeleteServiceExport {
        /// Namespace.
        namespace: String,
        /// Name.
        name: String,
        /// The uid the decision saw.
        uid: String,
        /// The MCS API version the cluster serves.
        version: McsVersion,
    },
}

impl Write {
    /// A short name of the kind of write, for metrics and logs.
    pub fn kind(&self) -> &'static str {
        match self {
            Self::ApplyService(_) => "apply_service",
            Self::ApplyServiceExport { .. } => "apply_service_export",
            Self::ApplyStatus(_) => "apply_status",
            Self::ApplyOsdArgs { .. } => "apply_osd_args",
            Self::ApplyMonEndpoints(_) => "apply_mon_endpoints",
            Self::ApplyMonConfig(_) => "apply_mon_config",
            Self::DeleteService { .. } => "delete_service",
            Self::DeleteServiceExport { .. } => "delete_service_export",
        }
    }

    /// The namespace and name of the object written.
    pub fn target(&self) -> (&str, &str) {
        let meta = match self {
            Self::ApplyService(s) => &s.metadata,
            Self::ApplyServiceExport { export, .. } => &export.metadata,
            Self::ApplyStatus(a) => &a.metadata,
            Self::ApplyMonEndpoints(c) => &c.metadata,
            Self::ApplyMonConfig(s) => &s.metadata,
            Self::ApplyOsdArgs {
                namespace, name, ..
            }
            | Self::DeleteService {
                namespace, name, ..
            }
            | Self::DeleteServiceExport {
                namespace, name, ..
            } => return (namespace, name),
        };
        (
            meta.namespace.as_deref().unwrap_or_default(),
            meta.name.as_deref().unwrap_or_default(),
        )
    }
}

/// Whether `observed` already says everything `desired` says (maps: every key, recursively;
/// arrays: every desired element matches some observed element; anything else: equal).
/// Fields others add are fine; nothing is removed by this check.
pub fn covers(observed: &Value, desired: &Value) -> bool {
    match (observed, desired) {
        (Value::Object(have), Value::Object(want)) => {
            want.iter().all(|(key, value)| match have.get(key) {
                Some(found) => covers(found, value),
                None => {
                    value.as_object().is_some_and(serde_json::Map::is_empty)
                        || value.as_array().is_some_and(Vec::is_empty)
                }
            })
        }
        (Value::Array(have), Value::Array(want)) => {
            want.iter().all(|w| have.iter().any(|h| covers(h, w)))
        }
        (have, want) => have == want,
    }
}

pub(super) fn managed_by_us(meta: &ObjectMeta) -> bool {
    meta.managed_fields
        .iter()
        .flatten()
        .any(|entry| entry.manager.as_deref() == Some(FIELD_MANAGER))
}

pub(super) fn labels_cover(
    have: Option<&BTreeMap<String, String>>,
    want: Option<&BTreeMap<String, String>>,
) -> bool {
    want.into_iter()
        .flatten()
        .all(|(k, v)| have.and_then(|h| h.get(k)) == Some(v))
}

pub(super) fn owners_cover(have: &ObjectMeta, want: &ObjectMeta) -> bool {
    want.owner_references.iter().flatten().all(|w| {
        have.owner_references.iter().flatten().any(|h| {
            h.api_version == w.api_version
                && h.kind == w.kind
                && h.name == w.name
                && h.uid == w.uid
                && (w.controller.is_none() || h.controller == w.controller)
                && (w.block_owner_deletion.is_none()
                    || h.block_owner_deletion == w.block_owner_deletion)
        })
    })
}

/// A typed fast path of [`covers`] for the objects the decision applies: it looks at exactly
/// the fields the planner sets (a test checks that list against the planner's manifests), so
/// when it says "covered" the JSON comparison would too. When it says "not covered", the JSON
/// comparison decides.
pub(super) trait FastCover {
    fn fast_covers(&self, desired: &Self) -> bool;
}

impl FastCover for Service {
    fn fast_covers(&self, desired: &Self) -> bool {
        let (have, want) = (&self.metadata, &desired.metadata);
        let meta = have.name == want.name
            && have.namespace == want.namespace
            && labels_cover(have.labels.as_ref(), want.labels.as_ref())
            && owners_cover(have, want);
        let spec = match (&self.spec, &desired.spec) {
            (_, None) => true,
            (None, Some(_)) => false,
            (Some(have), Some(want)) => {
                labels_cover(have.selector.as_ref(), want.selector.as_ref())
                    && want.ports.iter().flatten().all(|w| {
                        have.ports.iter().flatten().any(|h| {
                            h.name == w.name
                                && h.port == w.port
                                && (w.protocol.is_none() || h.protocol == w.protocol)
                                && (w.target_port.is_none() || h.target_port == w.target_port)
                        })
                    })
            }
        };
        meta && spec
    }
}

impl FastCover for ServiceExport {
    fn fast_covers(&self, desired: &Self) -> bool {
        let (have, want) = (&self.metadata, &desired.metadata);
        have.name == want.name
            && have.namespace == want.namespace
            && labels_cover(have.labels.as_ref(), want.labels.as_ref())
            && owners_cover(have, want)
            && desired.spec == mcs_types::ServiceExportSpec::default()
    }
}

/// Whether a desired object must be applied: it is missing, or it is ours and differs. An
/// object someone else made (Rook, a user) is left alone.
pub(super) fn needs_apply<T: serde::Serialize + FastCover>(
    desired: &T,
    observed: Option<(&ObjectMeta, &T)>,
) -> bool {
    let Some((meta, observed)) = observed else {
        return true;
    };
    if !managed_by_us(meta) {
        return false;
    }
    if observed.fast_covers(desired) {
        return false;
    }
    let strip = |value: Value| {
        let mut value = value;
        if let Some(object) = value.as_object_mut() {
            object.remove("apiVersion");
            object.remove("kind");
            object.remove("status");
        }
        value
    };
    match (
        serde_json::to_value(desired),
        serde_json::to_value(observed),
    ) {
        (Ok(want), Ok(have)) => !covers(&strip(have), &strip(want)),
        _ => true,
    }
}

pub(super) fn by_name<T>(items: &[T], meta: impl Fn(&T) -> &ObjectMeta) -> BTreeMap<&str, &T> {
    items
        .iter()
        .filter_map(|item| meta(item).name.as_deref().map(|name| (name, item)))
        .collect()
}

/// The OSD Deployments of a snapshot: by OSD id (the first Deployment of an id is the OSD, as
/// observe reads it), and the names of those still rolling out.
pub(super) struct OsdDeployments<'a> {
    by_id: BTreeMap<u32, &'a Deployment>,
    rolling: Vec<String>,
}

pub(super) fn osd_deployments(snapshot: &Snapshot) -> OsdDeployments<'_> {
    let mut found = OsdDeployments {
        by_id: BTreeMap::new(),
        rolling: Vec::new(),
    };
    let osd_deployments = snapshot.deployments.iter().filter(|d| {
        d.metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ceph_address_plan::rook::label::APP))
            .is_some_and(|app| app == ceph_address_plan::rook::OSD_APP)
    });
    for deployment in osd_deployments {
        if rook_objects::rollout_in_progress(deployment) {
            found
                .rolling
                .push(deployment.metadata.name.clone().unwrap_or_default());
        }
        let id = deployment
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(ceph_address_plan::rook::label::OSD_ID))
            .and_then(|id| id.parse::<u32>().ok());
        if let Some(id) = id {
            found.by_id.entry(id).or_insert(deployment);
        }
    }
    found
}

/// How [`paced_osd_writes`] went: how many OSD Deployments were written now, how many wait,
/// and why they wait.
#[derive(Debug, Default)]
pub(super) struct Paced {
    pub(super) written: usize,
    pub(super) deferred: usize,
    pub(super) why: String,
}

/// Writes OSD Deployment apply `bodies` (in OSD id order) one failure domain at a time, and
/// none while an OSD Deployment is still rolling out: each write restarts its OSD, and Ceph
/// must never see OSDs of two failure domains restart at once.
pub(super) fn paced_osd_writes<'a>(
    bodies: impl IntoIterator<Item = (&'a Deployment, Value)>,
    rolling: &[String],
    writes: &mut Vec<Write>,
) -> Paced {
    let mut domain: Option<&str> = None;
    let mut paced = Paced::default();
    for (deployment, body) in bodies {
        let this_domain = rook_objects::failure_domain(deployment);
        if !rolling.is_empty() || domain.is_some_and(|d| d != this_domain) {
            paced.deferred += 1;
            continue;
        }
        domain = Some(this_domain);
        paced.written += 1;
        writes.push(Write::ApplyOsdArgs {
            namespace: deployment.metadata.namespace.clone().unwrap_or_default(),
            name: deployment.metadata.name.clone().unwrap_or_default(),
            body: Box::new(body),
        });
    }
    if paced.deferred > 0 {
        paced.why = if rolling.is_empty() {
            format!(
                "one failure domain at a time ({})",
                domain.unwrap_or_default()
            )
        } else {
            format!("OSD Deployments still rolling out: {}", rolling.join(", "))
        };
    }
    paced
}

/// The OSD Deployments to give the plan's address arguments: OSDs whose global IP is known and
/// whose export is Ready, whose Deployment does not say it yet, paced by [`paced_osd_writes`].
pub(super) fn osd_args_writes(
    snapshot: &Snapshot,
    plan: &Plan,
    exports: &BTreeMap<Daemon, ExportView>,
    writes: &mut Vec<Write>,
    notes: &mut Vec<String>,
) {
    let found = osd_deployments(snapshot);
    let bodies = plan.osds().filter_map(|osd| {
        let daemon = Daemon::Osd(osd.id());
        let args = plan.daemon_args(&daemon)?;
        let deployment = *found.by_id.get(&osd.id())?;
        if !exports.get(&daemon).is_some_and(ExportView::taken) {
            return None;
        }
        let ports = plan.container_ports(&daemon);
        let body = rook_objects::osd_args_body(deployment, &args.to_args(), &ports)?;
        Some((deployment, body))
    });
    let paced = paced_osd_writes(bodies, &found.rolling, writes);
    if paced.deferred > 0 {
        notes.push(format!(
            "{} OSD Deployments wait for their address arguments: {}",
            paced.deferred, paced.why
        ));
    }
}

/// What a disabled cluster's reconcile does: hand the OSD Deployments the operator labelled
/// back to Rook ([`rook_objects::osd_handback_body`]), paced like the address arguments.
#[derive(Debug)]
pub(super) struct Handback {
    pub(super) writes: Vec<Write>,
    pub(super) paced: Paced,
}

pub(super) fn handback(snapshot: &Snapshot) -> Handback {
    let found = osd_deployments(snapshot);
    let bodies = found.by_id.values().filter_map(|deployment| {
        rook_objects::osd_handback_body(deployment, FIELD_MANAGER).map(|body| (*deployment, body))
    });
    let mut writes = Vec::new();
    let paced = paced_osd_writes(bodies, &found.rolling, &mut writes);
    Handback { writes, paced }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use ceph_address_plan::{CephVersion, ClusterSettings, Inventory, OsdInput, PlanInput};
    use std::collections::BTreeSet;

    /// Every leaf path of a JSON document, array indexes dropped.
    fn leaves(value: &Value, prefix: &str, out: &mut BTreeSet<String>) {
        match value {
            Value::Object(map) if !map.is_empty() => {
                for (k, v) in map {
                    // Label and selector keys are data, not fields.
                    let key = if prefix.ends_with("labels") || prefix.ends_with("selector") {
                        "*"
                    } else {
                        k.as_str()
                    };
                    leaves(v, &format!("{prefix}.{key}"), out);
                }
            }
            Value::Array(items) => {
                for item in items {
                    leaves(item, &format!("{prefix}[]"), out);
                }
            }
            _ => {
                out.insert(prefix.to_owned());
            }
        }
    }

    fn plan() -> Plan {
        let mut cluster = ClusterSettings::new("c", "rook-ceph");
        cluster.uid = Some("u".into());
        cluster.multi_cluster_service.enabled = true;
        cluster.multi_cluster_service.cluster_id = "east".into();
        cluster.ceph_version = Some(CephVersion::new(18, 2, 4));
        cluster.dns_name_form = ceph_address_plan::DnsNameForm::UniqueServiceName;
        let mut inventory = Inventory::new_cluster(1);
        inventory.osds.push(OsdInput::new(0, "node-0"));
        Plan::new(PlanInput { cluster, inventory }).unwrap()
    }

    #[test]
    fn the_fast_path_looks_at_every_field_the_planner_sets() {
        let plan = plan();
        let mut fields = BTreeSet::new();
        for service in plan.services() {
            let manifest = serde_json::to_value(plan.service_manifest(&service)).unwrap();
            leaves(&manifest, "", &mut fields);
        }
        let expected: BTreeSet<String> = [
            ".apiVersion",
            ".kind",
            ".metadata.name",
            ".metadata.namespace",
            ".metadata.labels.*",
            ".metadata.ownerReferences[].apiVersion",
            ".metadata.ownerReferences[].kind",
            ".metadata.ownerReferences[].name",
            ".metadata.ownerReferences[].uid",
            ".spec.selector.*",
            ".spec.ports[].name",
            ".spec.ports[].port",
            ".spec.ports[].protocol",
            ".spec.ports[].targetPort",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(
            fields, expected,
            "the planner sets new Service fields: teach FastCover for Service"
        );
        let mut fields = BTreeSet::new();
        for export in plan.service_exports() {
            let manifest = serde_json::to_value(plan.service_export_manifest(&export)).unwrap();
            leaves(&manifest, "", &mut fields);
        }
        let expected: BTreeSet<String> = [
            ".apiVersion",
            ".kind",
            ".metadata.name",
            ".metadata.namespace",
            ".metadata.ownerReferences[].apiVersion",
            ".metadata.ownerReferences[].kind",
            ".metadata.ownerReferences[].name",
            ".metadata.ownerReferences[].uid",
            ".spec",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        assert_eq!(
            fields, expected,
            "the planner sets new ServiceExport fields: teach FastCover for ServiceExport"
        );
    }

    #[test]
    fn the_fast_path_and_the_json_comparison_agree() {
        let plan = plan();
        for service in plan.services() {
            let desired = plan.service_manifest(&service);
            let mut observed = desired.clone();
            observed.metadata.uid = Some("x".into());
            if let Some(spec) = observed.spec.as_mut() {
                spec.cluster_ip = Some("10.96.0.1".into());
            }
            let json = |s: &Service| serde_json::to_value(s).unwrap();
            assert!(observed.fast_covers(&desired));
            assert!(covers(&json(&observed), &json(&desired)));
            let changes: [fn(&mut Service); 4] = [
                |s| {
                    let labels = s.metadata.labels.as_mut().unwrap();
                    let key = labels.keys().next().unwrap().clone();
                    labels.insert(key, "changed".into());
                },
                |s| s.metadata.owner_references = None,
                |s| s.spec.as_mut().unwrap().selector.as_mut().unwrap().clear(),
                |s| s.spec.as_mut().unwrap().ports.as_mut().unwrap()[0].port = 1,
            ];
            for change in changes {
                let mut changed = observed.clone();
                change(&mut changed);
                assert!(!changed.fast_covers(&desired));
                assert!(!covers(&json(&changed), &json(&desired)));
            }
        }
    }
}

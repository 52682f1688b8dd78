//! Test fixtures of mcs-ceph-operator's decision (not published; a dev-dependency of
//! `mcs-ceph-core` and `mcs-ceph-operator`): a Rook cluster's objects (CephCluster, mon
//! endpoints, mon Services, OSD Deployments), and an in-memory cluster that carries out the
//! decision's writes the way the API server would (so a test or benchmark can walk a cluster
//! from first enable to steady state).
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Container, PodSpec, PodTemplateSpec, Service, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{
    Condition, FieldsV1, LabelSelector, ManagedFieldsEntry, ObjectMeta, Time,
};
use k8s_openapi::jiff::Timestamp;
use mcs_ceph_api::CephCluster;
use mcs_ceph_core::decide::Write;
use mcs_ceph_core::{FIELD_MANAGER, McsApi, McsVersion, Snapshot};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};

/// The namespace of the cluster.
pub const NAMESPACE: &str = "rook-ceph";
/// The CephCluster's name.
pub const CLUSTER: &str = "my-cluster";
/// The CephCluster's uid.
pub const CLUSTER_UID: &str = "0a1b2c3d-cluster";

/// The time `second` seconds after the tests' epoch.
pub fn at(second: i64) -> Timestamp {
    Timestamp::from_second(1_800_000_000 + second).unwrap()
}

/// The CephCluster with MCS enabled (clusterID east, Ceph 18.2.4); `network` is merged into
/// `spec.network`.
pub fn cluster_with(network: serde_json::Value) -> CephCluster {
    let mut spec = serde_json::json!({
        "cephVersion": {"image": "quay.io/ceph/ceph:v18.2.4"},
        "dataDirHostPath": "/var/lib/rook",
        "mon": {"count": 3},
        "network": {"multiClusterService": {"enabled": true, "clusterID": "east"}}
    });
    if let (Some(base), Some(extra)) = (spec["network"].as_object_mut(), network.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    let mut cluster = CephCluster::new(CLUSTER, NAMESPACE, spec);
    cluster.metadata.uid = Some(CLUSTER_UID.to_owned());
    cluster.metadata.generation = Some(3);
    cluster
}

/// The CephCluster with MCS enabled ([`cluster_with`] without network changes).
pub fn cluster() -> CephCluster {
    cluster_with(serde_json::json!({}))
}

/// A managed-fields list with one entry of `manager` (`Apply` for the operator, else `Update`).
pub fn managed_by(manager: &str) -> Option<Vec<ManagedFieldsEntry>> {
    Some(vec![ManagedFieldsEntry {
        manager: Some(manager.to_owned()),
        operation: Some(
            if manager == FIELD_MANAGER {
                "Apply"
            } else {
                "Update"
            }
            .to_owned(),
        ),
        ..ManagedFieldsEntry::default()
    }])
}

/// `rook-ceph-mon-endpoints` with mons a, b, c on cluster IPs 10.96.0.10-12.
pub fn mon_endpoints() -> ConfigMap {
    let data: BTreeMap<String, String> = [
        (
            "data",
            "a=10.96.0.10:6789,b=10.96.0.11:6789,c=10.96.0.12:6789",
        ),
        ("maxMonId", "2"),
        ("mapping", r#"{"node":{}}"#),
        ("outOfQuorum", ""),
        ("csi-cluster-config-json", "[]"),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v.to_owned()))
    .collect();
    ConfigMap {
        metadata: ObjectMeta {
            name: Some("rook-ceph-mon-endpoints".into()),
            namespace: Some(NAMESPACE.into()),
            ..ObjectMeta::default()
        },
        data: Some(data),
        ..ConfigMap::default()
    }
}

/// Rook's mon Service `rook-ceph-mon-<id>` in `namespace` on cluster IP `10.96.0.<10 + i>`
/// (made by Rook, not by the operator).
pub fn mon_service(namespace: &str, id: &str, i: usize) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(format!("rook-ceph-mon-{id}")),
            namespace: Some(namespace.into()),
            uid: Some(format!("svc-mon-{id}")),
            labels: Some(
                [
                    ("app", "rook-ceph-mon"),
                    ("rook_cluster", namespace),
                    ("mon", id),
                ]
                .iter()
                .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                .collect(),
            ),
            managed_fields: managed_by("rook"),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some(format!("10.96.0.{}", 10 + i)),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// Rook's mon Services a, b, c.
pub fn mon_services() -> Vec<Service> {
    ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(i, id)| mon_service(NAMESPACE, id, i))
        .collect()
}

/// Rook's OSD Deployment `rook-ceph-osd-<id>` on `node-<id>`, advertising `public_addr` (none:
/// its pod IP).
pub fn osd_deployment(id: u32, public_addr: Option<&str>) -> Deployment {
    osd_deployment_in(NAMESPACE, id, &format!("node-{id}"), public_addr)
}

/// Rook's OSD Deployment `rook-ceph-osd-<id>` in `namespace` on the host `host`, advertising
/// `public_addr` (none: its pod IP).
pub fn osd_deployment_in(
    namespace: &str,
    id: u32,
    host: &str,
    public_addr: Option<&str>,
) -> Deployment {
    let labels: BTreeMap<String, String> = [
        ("app", "rook-ceph-osd".to_owned()),
        ("rook_cluster", namespace.to_owned()),
        ("ceph-osd-id", id.to_string()),
        ("osd", id.to_string()),
        ("failure-domain", host.to_owned()),
        ("portable", "false".to_owned()),
        ("device-class", "ssd".to_owned()),
        ("osd-store", "bluestore".to_owned()),
        ("encrypted", "false".to_owned()),
        ("topology-location-host", host.to_owned()),
        ("topology-location-root", "default".to_owned()),
    ]
    .into_iter()
    .map(|(k, v)| (k.to_owned(), v))
    .collect();
    let mut args = vec!["--foreground".to_owned(), format!("--id={id}")];
    if let Some(ip) = public_addr {
        args.push(format!("--public-addr={ip}"));
        args.push("--public-bind-addr=$(ROOK_POD_IP)".to_owned());
        args.push("--cluster-addr=$(ROOK_POD_IP)".to_owned());
    }
    // Rook's selector of an OSD Deployment; its pods carry the Deployment's labels.
    let selector: BTreeMap<String, String> = ["app", "rook_cluster", "ceph-osd-id"]
        .into_iter()
        .map(|k| (k.to_owned(), labels[k].clone()))
        .collect();
    Deployment {
        metadata: ObjectMeta {
            name: Some(format!("rook-ceph-osd-{id}")),
            namespace: Some(namespace.into()),
            labels: Some(labels.clone()),
            managed_fields: managed_by("rook"),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            selector: LabelSelector {
                match_labels: Some(selector),
                match_expressions: None,
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "osd".into(),
                        command: Some(vec!["ceph-osd".into()]),
                        args: Some(args),
                        ..Container::default()
                    }],
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// The global IP the fixtures' MCS implementation gives `osd.<id>`.
pub fn osd_global_ip(id: u32) -> std::net::IpAddr {
    let n = 20 + id;
    format!("242.1.{}.{}", n / 256, n % 256).parse().unwrap()
}

/// A Rook cluster with three mons on cluster IPs and `osds` OSDs on their pod IPs.
pub fn rook_cluster(osds: u32) -> Snapshot {
    Snapshot {
        cluster: cluster(),
        mcs_api: McsApi::Served(McsVersion::V1Beta1),
        services: mon_services(),
        exports: Vec::new(),
        imports: Vec::new(),
        deployments: (0..osds).map(|id| osd_deployment(id, None)).collect(),
        mon_endpoints: Some(mon_endpoints()),
        prior: None,
        lookups: Default::default(),
    }
}

/// A condition as an MCS implementation sets it on a ServiceExport.
pub fn condition(type_: &str, status: &str, reason: &str, message: &str) -> Condition {
    Condition {
        type_: type_.to_owned(),
        status: status.to_owned(),
        reason: reason.to_owned(),
        message: message.to_owned(),
        observed_generation: None,
        last_transition_time: Time(at(0)),
    }
}

/// Valid=True, Ready=True, Conflict=False.
pub fn exported_conditions() -> Vec<Condition> {
    vec![
        condition("Valid", "True", "Valid", "Service is valid for export"),
        condition("Ready", "True", "Exported", "The service has been exported"),
        condition("Conflict", "False", "NoConflicts", ""),
    ]
}

/// Carries out `writes` on the snapshot as the API server would: the object appears (or is
/// replaced) with a uid and the operator's managed-fields entry; a status write becomes the
/// prior status. Returns how many objects were written.
pub fn apply(snapshot: &mut Snapshot, writes: impl IntoIterator<Item = Write>) -> usize {
    let mut count = 0;
    for write in writes {
        count += 1;
        match write {
            Write::ApplyService(service) => {
                let mut service = *service;
                let name = service.metadata.name.clone().unwrap();
                service.metadata.uid = Some(format!("svc-{name}"));
                service.metadata.managed_fields = managed_by(FIELD_MANAGER);
                if let Some(spec) = service.spec.as_mut() {
                    spec.cluster_ip = Some("10.96.1.1".into());
                }
                snapshot
                    .services
                    .retain(|s| s.metadata.name.as_deref() != Some(&name));
                snapshot.services.push(service);
            }
            Write::ApplyServiceExport { export, .. } => {
                let mut export = *export;
                let name = export.metadata.name.clone().unwrap();
                let existing = snapshot
                    .exports
                    .iter()
                    .find(|e| e.metadata.name.as_deref() == Some(&name))
                    .cloned();
                export.metadata.uid = Some(format!("export-{name}"));
                export.metadata.managed_fields = managed_by(FIELD_MANAGER);
                export.status = existing.and_then(|e| e.status);
                snapshot
                    .exports
                    .retain(|e| e.metadata.name.as_deref() != Some(&name));
                snapshot.exports.push(export);
            }
            Write::ApplyStatus(object) => {
                let mut object = *object;
                object.metadata.managed_fields = managed_by(FIELD_MANAGER);
                snapshot.prior = Some(object);
            }
            Write::ApplyOsdArgs { name, body, .. } => {
                apply_osd_args(snapshot, &name, &body);
            }
            Write::ApplyMonEndpoints(config_map) => {
                let target = snapshot
                    .mon_endpoints
                    .as_mut()
                    .expect("only Rook creates it");
                let data = target.data.get_or_insert_with(BTreeMap::new);
                data.extend(config_map.data.unwrap_or_default());
            }
            Write::ApplyMonConfig(_) => {}
            Write::DeleteService { name, uid, .. } => {
                snapshot.services.retain(|s| {
                    s.metadata.name.as_deref() != Some(&name)
                        || s.metadata.uid.as_deref() != Some(&uid)
                });
            }
            Write::DeleteServiceExport { name, uid, .. } => {
                snapshot.exports.retain(|e| {
                    e.metadata.name.as_deref() != Some(&name)
                        || e.metadata.uid.as_deref() != Some(&uid)
                });
            }
        }
    }
    count
}

/// The operator's managed fields of an OSD apply body, in the API server's `fieldsV1` form
/// as far as these tests read it: the labels, and the container's env names and ports.
fn osd_apply_fields(body: &serde_json::Value) -> serde_json::Value {
    let mut labels = serde_json::Map::new();
    for key in body["metadata"]["labels"].as_object().into_iter().flatten() {
        labels.insert(format!("f:{}", key.0), serde_json::json!({}));
    }
    let container = &body["spec"]["template"]["spec"]["containers"][0];
    let mut fields = serde_json::Map::new();
    if container.get("args").is_some() {
        fields.insert("f:args".into(), serde_json::json!({}));
    }
    // A list map's entries are keyed `k:{"<key>":<value as JSON>}`.
    let keyed = |list: &str, key: &str| -> serde_json::Map<String, serde_json::Value> {
        container[list]
            .as_array()
            .into_iter()
            .flatten()
            .map(|item| {
                (
                    format!("k:{{\"{key}\":{}}}", item[key]),
                    serde_json::json!({}),
                )
            })
            .collect()
    };
    let env = keyed("env", "name");
    let ports = keyed("ports", "containerPort");
    fields.insert("f:env".into(), env.into());
    fields.insert("f:ports".into(), ports.into());
    serde_json::json!({
        "f:metadata": {"f:labels": labels},
        "f:spec": {"f:template": {"f:spec": {"f:containers": {"k:{\"name\":\"osd\"}": fields}}}}
    })
}

/// The `f:` or `k:` keys under `path` of a `fieldsV1` document.
fn field_keys(fields: Option<&serde_json::Value>, path: &[&str]) -> Vec<String> {
    let mut node = fields;
    for step in path {
        node = node.and_then(|n| n.get(*step));
    }
    node.and_then(serde_json::Value::as_object)
        .map(|m| m.keys().cloned().collect())
        .unwrap_or_default()
}

/// Merges an OSD apply body into the Deployment `name` as the API server's server-side apply
/// would: the label, the container's `args` (atomic: replaced), its `env` and `ports` (list
/// maps: merged); a label, env entry or port the operator's previous apply set and this one
/// omits is removed (Rook's fixtures own none of those); the operator's managed-fields entry
/// then lists what this body sets.
pub fn apply_osd_args(snapshot: &mut Snapshot, name: &str, body: &serde_json::Value) {
    let deployment = snapshot
        .deployments
        .iter_mut()
        .find(|d| d.metadata.name.as_deref() == Some(name))
        .unwrap_or_else(|| panic!("no Deployment {name}"));
    let entries = deployment
        .metadata
        .managed_fields
        .get_or_insert_with(Vec::new);
    let previous = entries
        .iter()
        .find(|e| e.manager.as_deref() == Some(FIELD_MANAGER))
        .and_then(|e| e.fields_v1.clone())
        .map(|f| f.0);
    entries.retain(|e| e.manager.as_deref() != Some(FIELD_MANAGER));
    entries.push(ManagedFieldsEntry {
        manager: Some(FIELD_MANAGER.to_owned()),
        operation: Some("Apply".to_owned()),
        fields_v1: Some(FieldsV1(osd_apply_fields(body))),
        ..ManagedFieldsEntry::default()
    });
    let now = osd_apply_fields(body);
    let dropped = |path: &[&str]| -> Vec<String> {
        let kept = field_keys(Some(&now), path);
        field_keys(previous.as_ref(), path)
            .into_iter()
            .filter(|k| !kept.contains(k))
            .collect()
    };
    let container_path = [
        "f:spec",
        "f:template",
        "f:spec",
        "f:containers",
        "k:{\"name\":\"osd\"}",
    ];
    let dropped_labels = dropped(&["f:metadata", "f:labels"]);
    let dropped_env = dropped(&[&container_path[..], &["f:env"]].concat());
    let dropped_ports = dropped(&[&container_path[..], &["f:ports"]].concat());
    let labels = deployment.metadata.labels.get_or_insert_with(BTreeMap::new);
    for key in dropped_labels {
        labels.remove(key.trim_start_matches("f:"));
    }
    for (k, v) in body["metadata"]["labels"].as_object().into_iter().flatten() {
        labels.insert(k.clone(), v.as_str().unwrap().to_owned());
    }
    let applied = &body["spec"]["template"]["spec"]["containers"][0];
    let container: Container = serde_json::from_value(applied.clone()).unwrap();
    let spec = deployment.spec.as_mut().unwrap();
    let target = spec
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers
        .iter_mut()
        .find(|c| c.name == container.name)
        .unwrap();
    target.args = container.args;
    if let Some(list) = target.env.as_mut() {
        list.retain(|e| !dropped_env.contains(&format!("k:{{\"name\":\"{}\"}}", e.name)));
    }
    for env in container.env.unwrap_or_default() {
        let list = target.env.get_or_insert_with(Vec::new);
        list.retain(|e| e.name != env.name);
        list.push(env);
    }
    if let Some(list) = target.ports.as_mut() {
        list.retain(|p| {
            !dropped_ports.contains(&format!("k:{{\"containerPort\":{}}}", p.container_port))
        });
    }
    for port in container.ports.unwrap_or_default() {
        let list = target.ports.get_or_insert_with(Vec::new);
        list.retain(|p| p.container_port != port.container_port);
        list.push(port);
    }
    deployment.metadata.generation = Some(deployment.metadata.generation.unwrap_or(1) + 1);
}

/// Sets the conditions of every export, as the MCS implementation would.
pub fn set_export_conditions(snapshot: &mut Snapshot, conditions: &[Condition]) {
    for export in &mut snapshot.exports {
        export.status = Some(mcs_types::ServiceExportStatus {
            conditions: conditions.to_vec(),
            ..Default::default()
        });
    }
}

/// The export named `name`.
pub fn export_mut<'a>(snapshot: &'a mut Snapshot, name: &str) -> &'a mut ServiceExport {
    snapshot
        .exports
        .iter_mut()
        .find(|e| e.metadata.name.as_deref() == Some(name))
        .unwrap()
}

/// A ServiceImport `name` with `ips`.
pub fn import(name: &str, ips: &[&str]) -> ServiceImport {
    let mut spec = mcs_types::ServiceImportSpec::new(
        mcs_types::ServiceImportType::ClusterSetIP,
        vec![mcs_types::ServicePort::tcp("osd-port-v2", 6800)],
    );
    spec.ips = ips.iter().map(|ip| (*ip).to_owned()).collect();
    let mut object = ServiceImport::new(name, spec);
    object.metadata.namespace = Some(NAMESPACE.into());
    object
}

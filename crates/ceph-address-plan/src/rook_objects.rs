//! The Rook objects mcs-ceph-operator changes, pure: the address arguments of OSD Deployments, the
//! `rook-ceph-mon-endpoints` ConfigMap and the `mon_host` of the `rook-ceph-config` Secret.
//! Every value comes from the [`Plan`]; this module decides only whether
//! the object already says it, and builds the server-side apply body when it does not.
//!
//! # OSD Deployments and server-side apply
//!
//! Rook creates OSD Deployments with an `Update` (its field manager owns every field). The
//! operator applies, under its own field manager and with `force`, a *partial* Deployment
//! ([`osd_args_body`]) that names only what it must own:
//!
//! - `metadata.labels["ceph.rook.io/do-not-reconcile"]`, so that a running Rook operator
//!   leaves the Deployment alone (otherwise Rook's next OSD update writes its own args back);
//! - in `spec.template.spec.containers` (a list map keyed by `name`), the entry of the OSD
//!   container, by name, with
//!   - `args`: an **atomic** list, so the body carries the *whole* list — Rook's arguments
//!     unchanged and in order, with any earlier `--public-addr`, `--public-bind-addr` and
//!     `--cluster-addr` removed (as `--flag=value` or as `--flag value`:
//!     [`args::replace_address_args`]) and the plan's arguments appended
//!     (where Rook appends them with its own MCS support). `force` moves ownership of `args` from Rook's manager to the
//!     operator; sending only the three flags would replace Rook's arguments;
//!   - `env` (a list map keyed by `name`): `ROOK_POD_IP` from `status.podIP`, which the
//!     `$(ROOK_POD_IP)` in the arguments expands from (co-owned where Rook already sets it the
//!     same way);
//!   - `ports` (a list map keyed by `containerPort` and `protocol`): the OSD ports the plan
//!     says (Rook adds them only with its MCS support on).
//!
//! Everything else — image, command, other env entries, volumes, probes, resources, the
//! selector, the other containers — stays Rook's: fields a manager does not apply are not
//! touched by its apply. The body is the same function of the plan and of Rook's other
//! arguments every time, so a field the operator once applied is never dropped by a later
//! apply (which would delete it). Changing the pod template restarts the OSD; see
//! [`rollout_in_progress`] for how restarts are paced.

use std::collections::{BTreeMap, BTreeSet};
use std::net::SocketAddr;

use crate::args;
use crate::format::{mon_host_entry, read_mon_endpoints};
use crate::input::{ExternalMon, MonInput};
use crate::plan::{MonHostConfig, NamedPort, Plan};
use crate::rook::{self, label};
use k8s_openapi::ByteString;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Container, ContainerPort, Secret};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use serde_json::{Value, json};

/// The label that makes Rook's operator skip a daemon's Deployment.
pub const DO_NOT_RECONCILE_LABEL: &str = "ceph.rook.io/do-not-reconcile";
/// Its value.
pub const DO_NOT_RECONCILE_VALUE: &str = "true";
/// The environment variable `$(ROOK_POD_IP)` refers to.
pub const POD_IP_ENV: &str = "ROOK_POD_IP";

/// Rook's arguments without the OSD's address arguments (in either form), then `planned`:
/// ceph-address-plan's editor of daemon arguments.
fn desired_args(current: &[String], planned: &[String]) -> Vec<String> {
    args::replace_address_args(current, &args::OSD_ADDRESS_FLAGS, planned)
}

fn has_pod_ip_env(container: &Container) -> bool {
    container.env.iter().flatten().any(|env| {
        env.name == POD_IP_ENV
            && env.value.is_none()
            && env
                .value_from
                .as_ref()
                .and_then(|v| v.field_ref.as_ref())
                .is_some_and(|f| f.field_path == "status.podIP")
    })
}

fn has_ports(container: &Container, ports: &[NamedPort]) -> bool {
    ports.iter().all(|want| {
        container.ports.iter().flatten().any(|have| {
            have.container_port == i32::from(want.port)
                && have.name.as_deref() == Some(want.name)
                && have.protocol.as_deref().unwrap_or("TCP") == "TCP"
        })
    })
}

/// The server-side apply body for an OSD Deployment (see the module documentation), or `None`
/// when the Deployment already carries the label, the arguments, the env entry and the ports.
/// `None` too when it has no container or no namespace and name.
pub fn osd_args_body(
    deployment: &Deployment,
    planned: &[String],
    ports: &[NamedPort],
) -> Option<Value> {
    let container = args::osd_container(deployment)?;
    let current = container.args.clone().unwrap_or_default();
    let args = desired_args(&current, planned);
    let labelled = deployment
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(DO_NOT_RECONCILE_LABEL))
        .is_some_and(|v| v == DO_NOT_RECONCILE_VALUE);
    if labelled && args == current && has_pod_ip_env(container) && has_ports(container, ports) {
        return None;
    }
    let ports: Vec<ContainerPort> = ports.iter().map(NamedPort::container_port).collect();
    partial_osd_deployment(
        deployment,
        Some(json!({DO_NOT_RECONCILE_LABEL: DO_NOT_RECONCILE_VALUE})),
        json!({
            "name": container.name,
            "args": args,
            "env": [{"name": POD_IP_ENV, "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
            "ports": ports
        }),
    )
}

/// A partial Deployment naming `deployment` (`None` without namespace or name), with `labels`
/// when given and the one OSD `container` entry: what both OSD apply bodies send.
fn partial_osd_deployment(
    deployment: &Deployment,
    labels: Option<Value>,
    container: Value,
) -> Option<Value> {
    let mut metadata = json!({
        "name": deployment.metadata.name.as_deref()?,
        "namespace": deployment.metadata.namespace.as_deref()?,
    });
    if let (Some(labels), Some(map)) = (labels, metadata.as_object_mut()) {
        map.insert("labels".to_owned(), labels);
    }
    Some(json!({
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {"template": {"spec": {"containers": [container]}}}
    }))
}

/// Whether `manager`'s managed-fields entry of `meta` lists the label `key`: whether that
/// manager's last apply set the label (a label set by hand, `kubectl label`, is another
/// manager's).
pub fn owns_label(meta: &ObjectMeta, manager: &str, key: &str) -> bool {
    let field = format!("f:{key}");
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|entry| entry.manager.as_deref() == Some(manager))
        .filter_map(|entry| entry.fields_v1.as_ref())
        .any(|fields| {
            fields
                .0
                .get("f:metadata")
                .and_then(|m| m.get("f:labels"))
                .and_then(|l| l.get(&field))
                .is_some()
        })
}

/// Trims `meta.managedFields` to what an operator whose field manager is `manager` reads of
/// them: whether it manages the object at all, and which labels its applies set
/// ([`owns_label`]). `manager`'s entries are kept, each with only its label keys; the others'
/// go. Every field of a server-side applied object is listed again in its managedFields, once
/// per manager (a Deployment's whole pod template by its owner, its status by the controller
/// manager), so a watch cache of Deployments holds about half as much once trimmed.
///
/// ```
/// use ceph_address_plan::rook_objects::{owns_label, trim_managed_fields};
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry, ObjectMeta};
/// use serde_json::json;
///
/// let entry = |manager: &str, fields| ManagedFieldsEntry {
///     manager: Some(manager.into()),
///     operation: Some("Apply".into()),
///     fields_v1: Some(FieldsV1(fields)),
///     ..Default::default()
/// };
/// let mut meta = ObjectMeta {
///     managed_fields: Some(vec![
///         entry("rook", json!({"f:spec": {"f:replicas": {}}})),
///         entry("mcs-ceph-operator", json!({
///             "f:metadata": {"f:labels": {"f:ceph.rook.io/do-not-reconcile": {}}},
///             "f:spec": {"f:template": {}},
///         })),
///     ]),
///     ..Default::default()
/// };
/// trim_managed_fields(&mut meta, "mcs-ceph-operator");
/// let kept = meta.managed_fields.as_deref().unwrap_or_default();
/// assert_eq!(kept.len(), 1);
/// assert_eq!(
///     kept[0].fields_v1.as_ref().map(|f| &f.0),
///     Some(&json!({"f:metadata": {"f:labels": {"f:ceph.rook.io/do-not-reconcile": {}}}}))
/// );
/// assert!(owns_label(&meta, "mcs-ceph-operator", "ceph.rook.io/do-not-reconcile"));
/// ```
pub fn trim_managed_fields(meta: &mut ObjectMeta, manager: &str) {
    let Some(entries) = meta.managed_fields.take() else {
        return;
    };
    let kept: Vec<_> = entries
        .into_iter()
        .filter(|entry| entry.manager.as_deref() == Some(manager))
        .map(|mut entry| {
            let labels = entry
                .fields_v1
                .as_ref()
                .and_then(|fields| fields.0.get("f:metadata")?.get("f:labels").cloned());
            entry.fields_v1 = labels.map(|labels| {
                k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                    json!({"f:metadata": {"f:labels": labels}}),
                )
            });
            entry
        })
        .collect();
    meta.managed_fields = (!kept.is_empty()).then_some(kept);
}

/// The server-side apply body that hands an OSD Deployment back to Rook when MCS is turned
/// off, or `None` when the operator's field manager (`manager`) does not own its
/// `do-not-reconcile` label (never labelled by the operator, already handed back, or the label
/// was removed by hand, which hands it back too).
///
/// The body carries the OSD container's `args` without the address arguments (an OSD without
/// MCS advertises its pod IP, as Rook runs it) and nothing else the operator applied before:
/// under server-side apply, a field a manager stops applying is removed when no other manager
/// owns it, so the label goes (Rook then reconciles the Deployment again), and so do the
/// `ROOK_POD_IP` env entry and the OSD ports where only the operator had set them. `args`
/// stays owned by the operator until Rook next updates the Deployment.
pub fn osd_handback_body(deployment: &Deployment, manager: &str) -> Option<Value> {
    if !owns_label(&deployment.metadata, manager, DO_NOT_RECONCILE_LABEL) {
        return None;
    }
    let container = args::osd_container(deployment)?;
    let current = container.args.clone().unwrap_or_default();
    partial_osd_deployment(
        deployment,
        None,
        json!({"name": container.name, "args": desired_args(&current, &[])}),
    )
}

/// Whether a Deployment's rollout has not finished (`kubectl rollout status`'s test: the
/// controller has seen the latest generation and every replica is updated and available). A
/// Deployment without status (not seen by the controller yet) counts as finished. OSD updates
/// wait while any OSD Deployment is rolling out, so that Ceph never sees OSDs of two failure
/// domains restart at once.
pub fn rollout_in_progress(deployment: &Deployment) -> bool {
    let Some(status) = deployment.status.as_ref() else {
        return false;
    };
    let wanted = deployment
        .spec
        .as_ref()
        .and_then(|s| s.replicas)
        .unwrap_or(1);
    let seen = match (status.observed_generation, deployment.metadata.generation) {
        (Some(observed), Some(generation)) => observed >= generation,
        _ => true,
    };
    !seen
        || status.updated_replicas.unwrap_or(0) < wanted
        || status.available_replicas.unwrap_or(0) < wanted
        || status.replicas.unwrap_or(0) > wanted
}

/// The failure domain of an OSD Deployment (its `failure-domain` label, the CRUSH host).
pub fn failure_domain(deployment: &Deployment) -> &str {
    deployment
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(label::FAILURE_DOMAIN))
        .map_or("", String::as_str)
}

/// Why the mon endpoints cannot be written yet, or `Ok` when they can.
fn mons_advertise(plan: &Plan) -> Result<(), String> {
    if plan.mons().is_empty() {
        return Err("no mons are listed".to_owned());
    }
    let pending: Vec<String> = plan
        .mons()
        .iter()
        .filter(|m| !m.status().is_up_to_date())
        .map(|m| format!("mon.{}", m.id()))
        .collect();
    if pending.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{} do not advertise their planned addresses yet",
            pending.join(", ")
        ))
    }
}

/// The ConfigMap keys the operator writes: Rook's four mon keys always, the CSI config and the
/// external mons only where the ConfigMap has them (newer Rook versions keep the CSI config
/// elsewhere). The same set every time for the same ConfigMap, so nothing applied is dropped.
fn written_keys(observed: &BTreeMap<String, String>) -> Vec<&'static str> {
    let mut keys = vec![
        rook::KEY_DATA,
        rook::KEY_MAPPING,
        rook::KEY_MAX_MON_ID,
        rook::KEY_OUT_OF_QUORUM,
    ];
    for optional in [rook::KEY_CSI_CLUSTER_CONFIG, rook::KEY_EXTERNAL_MONS] {
        if observed.contains_key(optional) {
            keys.push(optional);
        }
    }
    keys
}

/// The monitors of a `csi-cluster-config-json` value, as a set (`None`: not Rook's shape).
fn csi_monitors(text: &str) -> Option<BTreeSet<String>> {
    let value: Value = serde_json::from_str(text).ok()?;
    let mut monitors = BTreeSet::new();
    for entry in value.as_array()? {
        for monitor in entry.get("monitors")?.as_array()? {
            monitors.insert(monitor.as_str()?.to_owned());
        }
    }
    Some(monitors)
}

/// Whether the observed ConfigMap data says what `desired` says, read as Rook reads it: the
/// same mons with the same endpoints, quorum, placement, `maxMonId` and external mons, and the
/// same CSI monitors — not the same bytes (Rook writes `data` in Go's random map order, and its
/// CSI JSON differs by version).
pub fn mon_endpoints_agree(
    observed: &BTreeMap<String, String>,
    desired: &BTreeMap<String, String>,
) -> bool {
    let (have, want) = (read_mon_endpoints(observed), read_mon_endpoints(desired));
    let sorted = |mut mons: Vec<MonInput>| {
        mons.sort_by(|a, b| a.id.cmp(&b.id));
        mons
    };
    let external = |mut mons: Vec<ExternalMon>| {
        mons.sort_by(|a, b| a.name.cmp(&b.name));
        mons
    };
    let get = |data: &BTreeMap<String, String>, key: &str| {
        data.get(key).map(String::as_str).unwrap_or("").to_owned()
    };
    let csi_agrees = !desired.contains_key(rook::KEY_CSI_CLUSTER_CONFIG)
        || csi_monitors(&get(observed, rook::KEY_CSI_CLUSTER_CONFIG))
            == csi_monitors(&get(desired, rook::KEY_CSI_CLUSTER_CONFIG));
    have.max_mon_id == want.max_mon_id
        && sorted(have.mons) == sorted(want.mons)
        && external(have.external_mons) == external(want.external_mons)
        && csi_agrees
}

/// The mons that are in quorum by the observed ConfigMap (listed with an endpoint, not in
/// `outOfQuorum`) and that `mon_host` would leave out or move. Never written: it would cut
/// daemons off a working mon.
pub fn quorum_mons_dropped(observed: &BTreeMap<String, String>, mon_host: &str) -> Vec<String> {
    let read = read_mon_endpoints(observed);
    let entries: BTreeSet<&str> = mon_host
        .split("],")
        .map(|e| e.trim_end_matches(']'))
        .collect();
    read.mons
        .iter()
        .filter(|m| !m.out_of_quorum)
        .filter_map(|m| m.advertised.map(|a| (m, a)))
        .filter(|(_, advertised): &(_, SocketAddr)| {
            !entries.contains(mon_host_entry(*advertised).trim_end_matches(']'))
        })
        .map(|(m, a)| format!("mon.{} ({a})", m.id))
        .collect()
}

/// `rook-ceph-config`'s mon keys for the mons a `rook-ceph-mon-endpoints` `data` lists with an
/// endpoint and not out of quorum, in its order (a mon being placed, `d=:6789`, is left out).
///
/// ```
/// use ceph_address_plan::rook_objects::mon_host_of_endpoints;
/// let data = [("data".to_owned(), "b=10.96.0.11:6789,d=242.1.0.4:6789,e=:6789".to_owned())].into();
/// let config = mon_host_of_endpoints(&data);
/// assert_eq!(config.mon_host, "[v2:10.96.0.11:3300,v1:10.96.0.11:6789],[v2:242.1.0.4:3300,v1:242.1.0.4:6789]");
/// assert_eq!(config.mon_initial_members, "b,d");
/// ```
pub fn mon_host_of_endpoints(data: &BTreeMap<String, String>) -> MonHostConfig {
    let read = read_mon_endpoints(data);
    MonHostConfig::of(
        read.mons
            .iter()
            .filter(|mon| !mon.out_of_quorum)
            .filter_map(|mon| Some((mon.id.as_str(), mon.advertised?))),
    )
}

/// What a `rook-ceph-mon-endpoints` `data` says about reaching the cluster's mons.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MonEndpointsReach {
    /// `maxMonId` (raised to the highest mon listed).
    pub max_mon_id: Option<u32>,
    /// A `mon_host` for an admin's `ceph.conf`: the endpoints of the mons (in or out of
    /// quorum) and of the external mons, joined by `,`; a mon without an endpoint (being
    /// placed) is left out. Empty when no mon has an endpoint.
    pub mon_host: String,
}

/// `maxMonId` and the `mon_host` to reach the mons at, from `rook-ceph-mon-endpoints`'s `data`
/// as [`read_mon_endpoints`] reads it.
///
/// ```
/// use ceph_address_plan::rook_objects::mon_endpoints_reach;
/// let data = [
///     ("data".to_owned(), "b=10.96.0.11:6789,d=242.1.0.4:3300,e=:6789".to_owned()),
///     ("maxMonId".to_owned(), "4".to_owned()),
/// ]
/// .into();
/// let reach = mon_endpoints_reach(&data);
/// assert_eq!(reach.max_mon_id, Some(4));
/// assert_eq!(reach.mon_host, "10.96.0.11:6789,242.1.0.4:3300");
/// ```
pub fn mon_endpoints_reach(data: &BTreeMap<String, String>) -> MonEndpointsReach {
    let read = read_mon_endpoints(data);
    let hosts: Vec<String> = read
        .mons
        .iter()
        .filter_map(|mon| mon.advertised)
        .chain(read.external_mons.iter().map(|mon| mon.endpoint))
        .map(|endpoint| endpoint.to_string())
        .collect();
    MonEndpointsReach {
        max_mon_id: read.max_mon_id,
        mon_host: hosts.join(","),
    }
}

/// What to write of the mon configuration, and why not when nothing.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct MonConfigWrites {
    /// The `rook-ceph-mon-endpoints` apply, when the ConfigMap disagrees with the plan.
    pub config_map: Option<ConfigMap>,
    /// The `rook-ceph-config` apply, when `mon_host` is not what was last written.
    pub secret: Option<Secret>,
    /// The `mon_host` the Secret has (or gets) from the operator, for the status.
    pub mon_host: Option<String>,
    /// Why nothing is written yet (for logs), when the plan is not there yet.
    pub waiting: Option<String>,
}

/// The apply body of `rook-ceph-config`'s mon keys (`mon_host`, `mon_initial_members`), type
/// `kubernetes.io/rook` as Rook makes it.
pub fn config_secret(namespace: &str, config: &MonHostConfig) -> Secret {
    let bytes = |text: &str| ByteString(text.as_bytes().to_vec());
    Secret {
        metadata: ObjectMeta {
            name: Some(rook::CONFIG_SECRET.to_owned()),
            namespace: Some(namespace.to_owned()),
            ..ObjectMeta::default()
        },
        type_: Some(rook::ROOK_SECRET_TYPE.to_owned()),
        data: Some(
            [
                (rook::KEY_MON_HOST.to_owned(), bytes(&config.mon_host)),
                (
                    rook::KEY_MON_INITIAL_MEMBERS.to_owned(),
                    bytes(&config.mon_initial_members),
                ),
            ]
            .into(),
        ),
        ..Secret::default()
    }
}

/// The mon configuration writes: only once every mon advertises its planned address (with MCS,
/// its global IP), only when `rook-ceph-mon-endpoints` exists (Rook made the cluster), never a
/// `mon_host` that drops a mon in quorum, and only what differs — the ConfigMap when it
/// disagrees with the plan, the Secret when its `mon_host` is not the one `last_mon_host`
/// (recorded in the status) says the operator wrote. The operator does not read Secrets: it
/// would need to cache every Secret of the cluster to watch one.
pub fn mon_config_writes(
    plan: &Plan,
    observed: Option<&ConfigMap>,
    last_mon_host: Option<&str>,
) -> MonConfigWrites {
    let mut out = MonConfigWrites {
        mon_host: last_mon_host.map(str::to_owned),
        ..MonConfigWrites::default()
    };
    let Some(observed) = observed else {
        out.waiting = Some(format!(
            "{} does not exist yet",
            rook::MON_ENDPOINTS_CONFIG_MAP
        ));
        return out;
    };
    if let Err(why) = mons_advertise(plan) {
        out.waiting = Some(why);
        return out;
    }
    let empty = BTreeMap::new();
    let have = observed.data.as_ref().unwrap_or(&empty);
    let all = plan.mon_endpoints().to_data();
    let desired: BTreeMap<String, String> = written_keys(have)
        .into_iter()
        .filter_map(|k| all.get(k).map(|v| (k.to_owned(), v.clone())))
        .collect();
    let config = plan.mon_host_config();
    let dropped = quorum_mons_dropped(have, &config.mon_host);
    if !dropped.is_empty() {
        out.waiting = Some(format!(
            "mon_host {:?} would leave out {} in quorum: not written",
            config.mon_host,
            dropped.join(", ")
        ));
        return out;
    }
    let namespace = plan.settings().namespace.clone();
    let meta = |name: &str| ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(namespace.clone()),
        ..ObjectMeta::default()
    };
    let config_map_differs = !mon_endpoints_agree(have, &desired);
    if config_map_differs {
        out.config_map = Some(ConfigMap {
            metadata: meta(rook::MON_ENDPOINTS_CONFIG_MAP),
            data: Some(desired),
            ..ConfigMap::default()
        });
    }
    if config_map_differs || last_mon_host != Some(config.mon_host.as_str()) {
        out.secret = Some(config_secret(&namespace, config));
        out.mon_host = Some(config.mon_host.clone());
    }
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn data(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect()
    }

    #[test]
    fn an_osd_with_a_two_argument_public_addr_gets_only_the_planned_one() {
        let deployment: Deployment = serde_json::from_value(json!({
            "metadata": {"name": "rook-ceph-osd-3", "namespace": "rook-ceph",
                         "labels": {DO_NOT_RECONCILE_LABEL: DO_NOT_RECONCILE_VALUE}},
            "spec": {"selector": {}, "template": {"spec": {"containers": [{"name": "osd",
                "args": ["--foreground", "--public-addr", "10.244.0.7", "--id=3"]}]}}}
        }))
        .unwrap();
        let planned = ["--public-addr=242.1.0.23".to_owned()];
        let body = osd_args_body(&deployment, &planned, &[]).unwrap();
        let container = &body["spec"]["template"]["spec"]["containers"][0];
        assert_eq!(
            container["args"],
            json!(["--foreground", "--id=3", "--public-addr=242.1.0.23"])
        );
    }

    #[test]
    fn the_data_order_and_csi_shape_do_not_count_but_endpoints_do() {
        let rook = data(&[
            ("data", "b=242.1.0.12:6789,a=242.1.0.11:6789"),
            ("maxMonId", "1"),
            ("mapping", r#"{"node":{}}"#),
            ("outOfQuorum", ""),
            (
                "csi-cluster-config-json",
                r#"[{"clusterID":"rook-ceph","monitors":["242.1.0.12:6789","242.1.0.11:6789"]}]"#,
            ),
        ]);
        let mut ours = rook.clone();
        ours.insert("data".into(), "a=242.1.0.11:6789,b=242.1.0.12:6789".into());
        ours.insert(
            "csi-cluster-config-json".into(),
            r#"[{"clusterID":"rook-ceph","monitors":["242.1.0.11:6789","242.1.0.12:6789"],"namespace":""}]"#.into(),
        );
        assert!(mon_endpoints_agree(&rook, &ours));
        ours.insert("data".into(), "a=242.1.0.11:6789,b=242.1.0.99:6789".into());
        assert!(!mon_endpoints_agree(&rook, &ours));
        let mut stale_csi = rook.clone();
        stale_csi.insert(
            "csi-cluster-config-json".into(),
            r#"[{"clusterID":"rook-ceph","monitors":["10.96.0.1:6789"]}]"#.into(),
        );
        assert!(!mon_endpoints_agree(&stale_csi, &rook));
    }

    #[test]
    fn a_mon_host_without_a_mon_in_quorum_is_caught() {
        let observed = data(&[
            (
                "data",
                "a=242.1.0.11:6789,b=242.1.0.12:3300,c=242.1.0.13:6789",
            ),
            ("outOfQuorum", "c"),
        ]);
        let full = "[v2:242.1.0.11:3300,v1:242.1.0.11:6789],[v2:242.1.0.12:3300]";
        assert!(quorum_mons_dropped(&observed, full).is_empty());
        let without_b = "[v2:242.1.0.11:3300,v1:242.1.0.11:6789]";
        assert_eq!(
            quorum_mons_dropped(&observed, without_b),
            ["mon.b (242.1.0.12:3300)"]
        );
        let moved_a = "[v2:242.9.0.11:3300,v1:242.9.0.11:6789],[v2:242.1.0.12:3300]";
        assert_eq!(
            quorum_mons_dropped(&observed, moved_a),
            ["mon.a (242.1.0.11:6789)"]
        );
    }

    #[test]
    fn rollouts_are_judged_as_kubectl_does() {
        use k8s_openapi::api::apps::v1::{DeploymentSpec, DeploymentStatus};
        let mut deployment = Deployment {
            metadata: ObjectMeta {
                generation: Some(4),
                ..ObjectMeta::default()
            },
            spec: Some(DeploymentSpec::default()),
            status: None,
        };
        assert!(!rollout_in_progress(&deployment));
        let done = DeploymentStatus {
            observed_generation: Some(4),
            replicas: Some(1),
            updated_replicas: Some(1),
            available_replicas: Some(1),
            ..DeploymentStatus::default()
        };
        deployment.status = Some(done.clone());
        assert!(!rollout_in_progress(&deployment));
        for unfinished in [
            DeploymentStatus {
                observed_generation: Some(3),
                ..done.clone()
            },
            DeploymentStatus {
                updated_replicas: Some(0),
                ..done.clone()
            },
            DeploymentStatus {
                available_replicas: None,
                ..done.clone()
            },
            DeploymentStatus {
                replicas: Some(2),
                ..done.clone()
            },
        ] {
            deployment.status = Some(unfinished);
            assert!(rollout_in_progress(&deployment));
        }
    }
}

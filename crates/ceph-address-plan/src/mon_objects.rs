//! Typed builders of a new mon's Rook objects, as Rook makes them when it places a mon: the
//! canary Deployment ([`mon_canary`]), the mon Deployment derived from the Deployment of the
//! mon it replaces ([`mon_deployment`]) and a PVC-backed mon's claim ([`mon_claim`]). The
//! mon's Service is [`mon_service`](crate::mon_service). Pure: k8s-openapi objects out, ready
//! for server-side apply; mcs-ceph-operator's mon migration writes them.

use std::net::IpAddr;

use k8s_openapi::api::apps::v1::{Deployment, DeploymentSpec};
use k8s_openapi::api::core::v1::{
    Container, PersistentVolumeClaim, PersistentVolumeClaimSpec, PodSpec, PodTemplateSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{LabelSelector, ObjectMeta, OwnerReference};

use crate::args::{self, DaemonArgs};
use crate::format;
use crate::input::{ClusterSettings, MonInput};
use crate::labels::{mon_labels, mon_selector};
use crate::mon_id::MonId;
use crate::plan::{NamedPort, mon_ports};
use crate::rook::{self, label};
use crate::rook_objects::{DO_NOT_RECONCILE_LABEL, DO_NOT_RECONCILE_VALUE};

/// A template object that does not have the shape of Rook's mon objects: what is missing or
/// wrong.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct ShapeError(pub String);

/// The name of a mon's Deployment (and Service): `rook-ceph-mon-<id>`.
pub fn mon_deployment_name(mon: &MonId) -> String {
    format!("{}{mon}", rook::MON_NAME_PREFIX)
}

/// The name of a mon's canary Deployment: `rook-ceph-mon-<id>-canary`.
pub fn mon_canary_name(mon: &MonId) -> String {
    format!("{}{mon}-canary", rook::MON_NAME_PREFIX)
}

/// The PersistentVolumeClaim of a PVC-backed mon, as Rook names it: `rook-ceph-mon-<id>`.
pub fn mon_claim_name(mon: &str) -> String {
    format!("{}{mon}", rook::MON_NAME_PREFIX)
}

/// Whether a Deployment's pod mounts a PersistentVolumeClaim (a PVC-backed mon's does).
pub fn uses_claim(deployment: &Deployment) -> bool {
    deployment
        .spec
        .as_ref()
        .and_then(|s| s.template.spec.as_ref())
        .is_some_and(|pod| {
            pod.volumes
                .iter()
                .flatten()
                .any(|v| v.persistent_volume_claim.is_some())
        })
}

/// The canary Deployment of a new mon: the mon's labels without `mon_daemon`, plus
/// `mon_canary=true` (on the Deployment, its selector and its pods), one replica of `image`
/// sleeping, with the mon ports of `port`: a ready endpoint for the new mon's Service, so that
/// its export resolves before the mon exists. Owned by `owner` when given.
///
/// ```
/// use ceph_address_plan::ClusterSettings;
/// use ceph_address_plan::mon_objects::mon_canary;
/// let settings = ClusterSettings::new("my-cluster", "rook-ceph");
/// let canary = mon_canary(&settings, &"d".parse()?, "quay.io/ceph/ceph:v18", 6789, None);
/// assert_eq!(canary.metadata.name.as_deref(), Some("rook-ceph-mon-d-canary"));
/// let labels = canary.metadata.labels.unwrap();
/// assert_eq!((labels["mon"].as_str(), labels["mon_canary"].as_str()), ("d", "true"));
/// # Ok::<(), ceph_address_plan::InvalidMonId>(())
/// ```
pub fn mon_canary(
    settings: &ClusterSettings,
    mon: &MonId,
    image: &str,
    port: u16,
    owner: Option<OwnerReference>,
) -> Deployment {
    let input = MonInput::new(mon.clone());
    let mut labels = mon_labels(settings, &input);
    labels.remove(label::MON_DAEMON);
    labels.insert(label::MON_CANARY.to_owned(), "true".to_owned());
    let mut selector = mon_selector(settings, &input);
    selector.insert(label::MON_CANARY.to_owned(), "true".to_owned());
    Deployment {
        metadata: ObjectMeta {
            name: Some(mon_canary_name(mon)),
            namespace: Some(settings.namespace.clone()),
            labels: Some(labels.clone()),
            owner_references: owner.map(|o| vec![o]),
            ..ObjectMeta::default()
        },
        spec: Some(DeploymentSpec {
            replicas: Some(1),
            selector: LabelSelector {
                match_labels: Some(selector),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    ..ObjectMeta::default()
                }),
                spec: Some(PodSpec {
                    containers: vec![Container {
                        name: "mon".to_owned(),
                        image: Some(image.to_owned()),
                        command: Some(vec!["sleep".to_owned()]),
                        args: Some(vec!["3600".to_owned()]),
                        ports: Some(
                            mon_ports(port)
                                .iter()
                                .map(NamedPort::container_port)
                                .collect(),
                        ),
                        ..Container::default()
                    }],
                    termination_grace_period_seconds: Some(0),
                    ..PodSpec::default()
                }),
            },
            ..DeploymentSpec::default()
        }),
        status: None,
    }
}

/// The mon Deployment of `mon` advertising `address` on `port`, derived from `template` (the
/// Deployment of the mon it replaces, Rook's): the same pod (image, volumes, security,
/// placement) with the new id in the arguments, the mon's data paths and host paths renamed,
/// the address arguments of the containers that advertise one replaced by the plan's
/// (`--public-addr=<address>`, `--public-bind-addr`, msgr1 off on port 3300), a PVC-backed
/// mon's claim replaced by the new mon's ([`mon_claim_name`]), Rook's mon labels and selector,
/// one replica, and the label `ceph.rook.io/do-not-reconcile`.
///
/// Refused when the template has no `mon` label, no spec or pod spec, or mounts a claim that
/// is not Rook's own mon claim (sharing it would give two mons one store).
pub fn mon_deployment(
    settings: &ClusterSettings,
    template: &Deployment,
    mon: &MonId,
    address: IpAddr,
    port: u16,
) -> Result<Deployment, ShapeError> {
    let old = template_mon_id(template)?;
    let mut spec = template
        .spec
        .clone()
        .ok_or_else(|| ShapeError("the template mon Deployment has no spec".to_owned()))?;
    let pod = spec
        .template
        .spec
        .as_mut()
        .ok_or_else(|| ShapeError("the template mon Deployment has no pod spec".to_owned()))?;
    replace_claim(pod, &old, mon)?;
    let input = MonInput::new(mon.clone());
    let labels = mon_labels(settings, &input);
    let new_args = DaemonArgs {
        public_addr: address,
        msgr1_off: port == rook::MON_MSGR2_PORT,
        public_bind_addr: Some(format::mon_bind_addr(port, settings.ip_family)),
        cluster_addr: None,
    }
    .to_args();
    rename_container_args(pod, &old, mon, &new_args);
    rename_host_paths(pod, &old, mon);
    spec.replicas = Some(1);
    spec.selector.match_labels = Some(mon_selector(settings, &input));
    let pod_meta = spec.template.metadata.get_or_insert_with(Default::default);
    pod_meta.labels = Some(labels.clone());
    let mut deployment_labels = labels;
    deployment_labels.insert(
        DO_NOT_RECONCILE_LABEL.to_owned(),
        DO_NOT_RECONCILE_VALUE.to_owned(),
    );
    Ok(Deployment {
        metadata: ObjectMeta {
            name: Some(mon_deployment_name(mon)),
            namespace: Some(settings.namespace.clone()),
            labels: Some(deployment_labels),
            owner_references: template.metadata.owner_references.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(spec),
        status: None,
    })
}

/// The id of the mon whose Deployment `template` is: its `mon` label.
fn template_mon_id(template: &Deployment) -> Result<String, ShapeError> {
    template
        .metadata
        .labels
        .as_ref()
        .and_then(|l| l.get(label::MON))
        .cloned()
        .ok_or_else(|| {
            ShapeError(format!(
                "the template mon Deployment {} has no {:?} label",
                template.metadata.name.as_deref().unwrap_or_default(),
                label::MON
            ))
        })
}

/// Replaces the claim of mon `old` the pod mounts by the claim of `mon`; refuses any other
/// claim.
fn replace_claim(pod: &mut PodSpec, old: &str, mon: &MonId) -> Result<(), ShapeError> {
    // A PVC-backed mon (Rook's `spec.mon.volumeClaimTemplate`) keeps its store on the claim
    // `rook-ceph-mon-<id>`: the new mon gets its own ([`mon_claim`]). Any other claim in a
    // mon's pod is not Rook's layout, and sharing it would give two mons one store.
    let old_claim = mon_claim_name(old);
    for volume in pod.volumes.iter_mut().flatten() {
        if let Some(claim) = volume.persistent_volume_claim.as_mut() {
            if claim.claim_name != old_claim {
                return Err(ShapeError(format!(
                    "the template mon Deployment mounts the claim {} (volume {}), not {old_claim}: only Rook's own mon claim is replaced by the new mon's",
                    claim.claim_name, volume.name
                )));
            }
            claim.claim_name = mon_claim_name(mon.as_str());
        }
    }
    Ok(())
}

/// Gives the arguments of every container (and init container) of the pod the new id and
/// the new mon's data paths in place of mon `old`'s, and `new_args` in place of the address
/// arguments of those that advertise one.
fn rename_container_args(pod: &mut PodSpec, old: &str, mon: &MonId, new_args: &[String]) {
    let rename = |text: &str| {
        text.replace(&format!("ceph-{old}/"), &format!("ceph-{mon}/"))
            .replace(&format!("mon-{old}/"), &format!("mon-{mon}/"))
            .replace(&format!("ceph-{old}"), &format!("ceph-{mon}"))
    };
    for container in pod
        .containers
        .iter_mut()
        .chain(pod.init_containers.iter_mut().flatten())
    {
        let Some(current) = container.args.take() else {
            continue;
        };
        let renamed: Vec<String> = current
            .iter()
            .map(|a| {
                if a == &format!("--id={old}") {
                    format!("--id={mon}")
                } else {
                    rename(a)
                }
            })
            .collect();
        // The containers that advertise an address (the mon and `init-mon-fs`) get the plan's
        // address arguments in place of the old mon's, in either form.
        let planned: &[String] = if args::public_addr(&current).is_some() {
            new_args
        } else {
            &[]
        };
        container.args = Some(args::replace_address_args(
            &renamed,
            &args::MON_ADDRESS_FLAGS,
            planned,
        ));
    }
}

/// Renames mon `old`'s host paths of the pod's volumes to `mon`'s.
fn rename_host_paths(pod: &mut PodSpec, old: &str, mon: &MonId) {
    for volume in pod.volumes.iter_mut().flatten() {
        if let Some(host_path) = volume.host_path.as_mut() {
            host_path.path = host_path
                .path
                .replace(&format!("/mon-{old}/"), &format!("/mon-{mon}/"))
                .replace(&format!("/mon-{old}"), &format!("/mon-{mon}"));
        }
    }
}

/// The new mon's PersistentVolumeClaim in `namespace`, derived from the claim of the mon it
/// replaces (`template`, of mon `old`) as Rook makes one from `spec.mon.volumeClaimTemplate`:
/// the same storage class, access modes, volume mode and requested size, a fresh volume (no
/// `volumeName`, no data source), the template's labels with the old mon's id replaced, and
/// its owner.
pub fn mon_claim(
    namespace: &str,
    template: &PersistentVolumeClaim,
    old: &str,
    mon: &MonId,
) -> Result<PersistentVolumeClaim, ShapeError> {
    let spec = template.spec.as_ref().ok_or_else(|| {
        ShapeError(format!(
            "the claim {} of mon {old} has no spec",
            mon_claim_name(old)
        ))
    })?;
    let labels = template.metadata.labels.as_ref().map(|labels| {
        labels
            .iter()
            .map(|(k, v)| {
                let value = if v == old { mon.as_str() } else { v };
                (k.clone(), value.to_owned())
            })
            .collect()
    });
    Ok(PersistentVolumeClaim {
        metadata: ObjectMeta {
            name: Some(mon_claim_name(mon.as_str())),
            namespace: Some(namespace.to_owned()),
            labels,
            owner_references: template.metadata.owner_references.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(PersistentVolumeClaimSpec {
            access_modes: spec.access_modes.clone(),
            resources: spec.resources.clone(),
            storage_class_name: spec.storage_class_name.clone(),
            volume_mode: spec.volume_mode.clone(),
            ..PersistentVolumeClaimSpec::default()
        }),
        status: None,
    })
}

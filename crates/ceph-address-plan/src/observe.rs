//! The planner's [`Inventory`] read from Rook's objects: the mons from
//! `rook-ceph-mon-endpoints` and the mon Services, the OSDs from their Deployments (labels and
//! `--public-addr`, through [`args::osd_public_addr`]). Pure: objects in, inventory and notes
//! out. The operator feeds it the objects of its caches; any tool holding Rook's objects reads
//! them the same way.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use mcs_types::v1beta1::ServiceExport;

use crate::args;
use crate::format::read_mon_endpoints;
use crate::input::{Daemon, ExportStatus, Inventory, OsdInput};
use crate::rook::{self, label};

/// The inventory and what could not be read (each note says which object and why).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct ObservedInventory {
    /// The planner's inventory (no global IPs; the decision adds those it knows).
    pub inventory: Inventory,
    /// Objects or values that were skipped.
    pub notes: Vec<String>,
}

fn labels_of(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> BTreeMap<String, String> {
    meta.labels.clone().unwrap_or_default()
}

/// Reads the mons from `rook-ceph-mon-endpoints` (with ceph-address-plan's reader, the
/// reverse of what the planner writes) and adds what their Services say (cluster IP,
/// `pvc_size` label).
fn read_mons(
    config_map: &ConfigMap,
    services: &BTreeMap<&str, &Service>,
    out: &mut ObservedInventory,
) {
    let empty = BTreeMap::new();
    let read = read_mon_endpoints(config_map.data.as_ref().unwrap_or(&empty));
    out.inventory.max_mon_id = read.max_mon_id;
    out.inventory.external_mons.extend(read.external_mons);
    out.notes.extend(read.notes);
    for mut mon in read.mons {
        if let Some(service) = services.get(Daemon::Mon(mon.id.clone()).service_name().as_str()) {
            mon.cluster_ip = service
                .spec
                .as_ref()
                .and_then(|s| s.cluster_ip.as_deref())
                .and_then(|ip| ip.parse::<IpAddr>().ok());
            mon.pvc_size = labels_of(&service.metadata).get(label::PVC_SIZE).cloned();
        }
        out.inventory.mons.push(mon);
    }
}

/// Reads one OSD from its Deployment's labels (Rook's `getOSDLabels`) and arguments.
fn read_osd(deployment: &Deployment, out: &mut ObservedInventory) {
    let labels = labels_of(&deployment.metadata);
    let name = deployment.metadata.name.as_deref().unwrap_or("");
    let Some(id) = labels
        .get(label::OSD_ID)
        .and_then(|id| id.parse::<u32>().ok())
    else {
        out.notes.push(format!(
            "Deployment {name} has app={} but no numeric {} label; skipped",
            rook::OSD_APP,
            label::OSD_ID
        ));
        return;
    };
    let get = |key: &str| labels.get(key).cloned().unwrap_or_default();
    let mut osd = OsdInput::new(id, get(label::FAILURE_DOMAIN));
    osd.portable = get(label::PORTABLE) == "true";
    osd.device_class = get(label::DEVICE_CLASS);
    osd.device_type = labels.get(label::DEVICE_TYPE).cloned();
    if let Some(store) = labels.get(label::OSD_STORE) {
        osd.store.clone_from(store);
    }
    osd.encrypted = get(label::ENCRYPTED) == "true";
    osd.location = labels
        .iter()
        .filter_map(|(key, value)| {
            key.strip_prefix(label::TOPOLOGY_LOCATION_PREFIX)
                .map(|k| format!("{k}={value}"))
        })
        .collect::<Vec<_>>()
        .join(" ");
    // ceph-address-plan's reader, as mcsctl reads it: `--public-addr=IP` or `--public-addr IP`.
    osd.advertised = args::osd_public_addr(deployment).and_then(|addr| addr.parse().ok());
    out.inventory.osds.push(osd);
}

/// The inventory of a namespace's Rook objects: the mons of `mon_endpoints`
/// (`rook-ceph-mon-endpoints`) with what their `services` say, the external mons, and the OSDs
/// of the `deployments` labelled `app=rook-ceph-osd` (other Deployments are ignored). Global
/// IPs and export statuses are left empty: they are the caller's business.
pub fn inventory(
    services: &[Service],
    deployments: &[Deployment],
    mon_endpoints: Option<&ConfigMap>,
) -> ObservedInventory {
    let mut out = ObservedInventory::default();
    let services: BTreeMap<&str, &Service> = services
        .iter()
        .filter_map(|s| s.metadata.name.as_deref().map(|n| (n, s)))
        .collect();
    if let Some(config_map) = mon_endpoints {
        read_mons(config_map, &services, &mut out);
    }
    let mut seen = BTreeSet::new();
    for deployment in deployments {
        if labels_of(&deployment.metadata)
            .get(label::APP)
            .map(String::as_str)
            == Some(rook::OSD_APP)
        {
            read_osd(deployment, &mut out);
        }
    }
    // Two Deployments claiming one OSD id: keep the first, say so.
    out.inventory.osds.retain(|osd| {
        let first = seen.insert(osd.id);
        if !first {
            out.notes.push(format!(
                "two OSD Deployments are labelled {}={}; the second is ignored",
                label::OSD_ID,
                osd.id
            ));
        }
        first
    });
    out
}

/// The export status the planner reads, from a ServiceExport.
pub fn export_status(export: &ServiceExport) -> ExportStatus {
    export
        .status
        .as_ref()
        .map(ExportStatus::from)
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::api::apps::v1::DeploymentSpec;
    use k8s_openapi::api::core::v1::{Container, PodSpec, PodTemplateSpec, ServiceSpec};
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

    fn config_map(data: &[(&str, &str)]) -> ConfigMap {
        ConfigMap {
            data: Some(
                data.iter()
                    .map(|(k, v)| ((*k).into(), (*v).into()))
                    .collect(),
            ),
            ..ConfigMap::default()
        }
    }

    /// The objects [`inventory`] reads.
    #[derive(Default)]
    struct Snapshot {
        services: Vec<Service>,
        deployments: Vec<Deployment>,
        mon_endpoints: Option<ConfigMap>,
    }

    fn snapshot() -> Snapshot {
        Snapshot::default()
    }

    fn inventory(snap: &Snapshot) -> ObservedInventory {
        super::inventory(
            &snap.services,
            &snap.deployments,
            snap.mon_endpoints.as_ref(),
        )
    }

    fn osd_deployment(labels: &[(&str, &str)], args: &[&str]) -> Deployment {
        Deployment {
            metadata: ObjectMeta {
                name: Some("rook-ceph-osd-x".into()),
                labels: Some(
                    labels
                        .iter()
                        .map(|(k, v)| ((*k).into(), (*v).into()))
                        .collect(),
                ),
                ..ObjectMeta::default()
            },
            spec: Some(DeploymentSpec {
                template: PodTemplateSpec {
                    spec: Some(PodSpec {
                        containers: vec![Container {
                            name: "osd".into(),
                            args: Some(args.iter().map(|a| (*a).to_owned()).collect()),
                            ..Container::default()
                        }],
                        ..PodSpec::default()
                    }),
                    ..PodTemplateSpec::default()
                },
                ..DeploymentSpec::default()
            }),
            status: None,
        }
    }

    #[test]
    fn mons_come_from_rooks_config_map_and_services() {
        let mut snap = snapshot();
        snap.mon_endpoints = Some(config_map(&[
            (
                "data",
                "a=10.96.0.1:6789,b=[fd00::2]:3300,ext=192.168.1.1:6789,Q=1.2.3.4:6789",
            ),
            ("maxMonId", "4"),
            ("outOfQuorum", "b"),
            ("externalMons", "ext"),
            (
                "mapping",
                r#"{"node":{"a":{"Name":"n0","Hostname":"h0","Address":"10.0.0.1","zone":"z1"},"b":null}}"#,
            ),
        ]));
        snap.services.push(Service {
            metadata: ObjectMeta {
                name: Some("rook-ceph-mon-a".into()),
                labels: Some([("pvc_size".to_owned(), "10Gi".to_owned())].into()),
                ..ObjectMeta::default()
            },
            spec: Some(ServiceSpec {
                cluster_ip: Some("10.96.0.1".into()),
                ..ServiceSpec::default()
            }),
            status: None,
        });
        let observed = inventory(&snap);
        let inv = &observed.inventory;
        assert_eq!(inv.max_mon_id, Some(4));
        assert_eq!(inv.mons.len(), 2);
        let a = &inv.mons[0];
        assert_eq!(a.advertised, Some("10.96.0.1:6789".parse().unwrap()));
        assert_eq!(a.cluster_ip, Some("10.96.0.1".parse().unwrap()));
        assert_eq!(a.pvc_size.as_deref(), Some("10Gi"));
        assert_eq!(a.zone.as_deref(), Some("z1"));
        assert_eq!(a.node.as_ref().unwrap().hostname, "h0");
        assert!(inv.mons[1].out_of_quorum && inv.mons[1].node.is_none());
        assert_eq!(inv.external_mons[0].name, "ext");
        assert_eq!(observed.notes.len(), 1, "{:?}", observed.notes);
        assert!(observed.notes[0].contains("\"Q\" is not a Rook mon id"));
    }

    #[test]
    fn osds_come_from_their_deployments() {
        let mut snap = snapshot();
        snap.deployments.push(osd_deployment(
            &[
                ("app", "rook-ceph-osd"),
                ("ceph-osd-id", "7"),
                ("failure-domain", "node-1"),
                ("portable", "true"),
                ("device-class", "ssd"),
                ("encrypted", "false"),
                ("topology-location-host", "node-1"),
                ("topology-location-root", "default"),
            ],
            &[
                "--foreground",
                "--public-addr=242.1.0.27",
                "--public-bind-addr=$(ROOK_POD_IP)",
            ],
        ));
        snap.deployments.push(osd_deployment(
            &[("app", "rook-ceph-osd"), ("ceph-osd-id", "7")],
            &[],
        ));
        snap.deployments
            .push(osd_deployment(&[("app", "rook-ceph-osd")], &[]));
        snap.deployments
            .push(osd_deployment(&[("app", "rook-ceph-mgr")], &[]));
        let observed = inventory(&snap);
        assert_eq!(observed.inventory.osds.len(), 1);
        let osd = &observed.inventory.osds[0];
        assert_eq!(osd.id, 7);
        assert_eq!(osd.host, "node-1");
        assert!(osd.portable);
        assert_eq!(osd.location, "host=node-1 root=default");
        assert_eq!(osd.advertised, Some("242.1.0.27".parse().unwrap()));
        assert_eq!(observed.notes.len(), 2, "{:?}", observed.notes);
    }

    #[test]
    fn an_osd_passing_public_addr_as_two_arguments_is_observed_advertising_it() {
        let mut snap = snapshot();
        snap.deployments.push(osd_deployment(
            &[("app", "rook-ceph-osd"), ("ceph-osd-id", "3")],
            &[
                "--foreground",
                "--public-addr",
                "242.1.0.23",
                "--public-bind-addr",
                "$(ROOK_POD_IP)",
            ],
        ));
        snap.deployments.push(osd_deployment(
            &[("app", "rook-ceph-osd"), ("ceph-osd-id", "4")],
            &["--foreground", "--public-addr", "$(ROOK_POD_IP)"],
        ));
        let observed = inventory(&snap);
        let advertised: Vec<_> = observed
            .inventory
            .osds
            .iter()
            .map(|o| (o.id, o.advertised))
            .collect();
        assert_eq!(
            advertised,
            [(3, Some("242.1.0.23".parse().unwrap())), (4, None)],
            "an address that is not an IP is not advertised"
        );
    }
}

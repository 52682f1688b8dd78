//! Golden tests: every output format, byte for byte, for IPv4 and IPv6, msgr2 required or not,
//! MCS on and off. The expected strings are Rook's formats written out by hand (and, where Rook
//! has them, the values of Rook's own tests), not computed by the code under test.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use ceph_address_plan::{
    Address, CephVersion, ClusterSettings, Daemon, DaemonStatus, DnsNameForm, ExportCondition,
    ExportStatus, ExternalMon, Inventory, IpFamily, MonInput, NodeInfo, OsdInput, Plan, PlanInput,
    Rejection,
};
use serde_json::json;

fn ip(text: &str) -> IpAddr {
    text.parse().unwrap()
}

fn sock(text: &str) -> SocketAddr {
    text.parse().unwrap()
}

fn daemon(text: &str) -> Daemon {
    text.parse().unwrap()
}

/// One scenario of the format matrix.
struct Scenario {
    family: IpFamily,
    msgr2: bool,
    mcs: bool,
}

impl Scenario {
    /// Cluster IP, global IP of mon `n` (1-based) / OSD.
    fn cluster_ip(&self, n: u8) -> IpAddr {
        match self.family {
            IpFamily::IPv6 => ip(&format!("fd00:10:96::{n}")),
            _ => ip(&format!("10.96.0.{n}")),
        }
    }

    fn global_ip(&self, n: u8) -> IpAddr {
        match self.family {
            IpFamily::IPv6 => ip(&format!("fd00:242::{n}")),
            _ => ip(&format!("242.1.0.{n}")),
        }
    }

    /// Three mons a, b, c advertising their planned addresses; OSDs 0 and 1 converged.
    fn plan(&self) -> Plan {
        let mut cluster = ClusterSettings::new("my-cluster", "rook-ceph");
        cluster.ip_family = self.family;
        cluster.require_msgr2 = self.msgr2;
        cluster.ceph_version = Some(CephVersion::new(18, 2, 4));
        cluster.uid = Some("c0ffee00-0000-4000-8000-000000000001".into());
        if self.mcs {
            cluster.multi_cluster_service.enabled = true;
            cluster.multi_cluster_service.cluster_id = "east".into();
        }
        let port = if self.msgr2 { 3300 } else { 6789 };
        let mut inventory = Inventory {
            max_mon_id: Some(2),
            ..Inventory::default()
        };
        for (n, id) in [(1u8, "a"), (2, "b"), (3, "c")] {
            let mut mon = MonInput::new(id.parse().unwrap());
            mon.cluster_ip = Some(self.cluster_ip(n));
            mon.node = Some(NodeInfo {
                name: format!("node-{n}"),
                hostname: format!("node-{n}"),
                address: Some(ip(&format!("192.168.0.{n}"))),
            });
            let advertised = if self.mcs {
                inventory
                    .global_ips
                    .insert(Daemon::Mon(mon.id.clone()), self.global_ip(n));
                self.global_ip(n)
            } else {
                self.cluster_ip(n)
            };
            mon.advertised = Some(SocketAddr::new(advertised, port));
            inventory.mons.push(mon);
        }
        for id in 0..2u8 {
            let mut osd = OsdInput::new(u32::from(id), "node-1");
            osd.location = "root=default host=node-1".into();
            if self.mcs {
                let global = self.global_ip(20 + id);
                inventory
                    .global_ips
                    .insert(Daemon::Osd(u32::from(id)), global);
                osd.advertised = Some(global);
            }
            inventory.osds.push(osd);
        }
        Plan::new(PlanInput { cluster, inventory }).unwrap()
    }
}

/// What one scenario must produce.
struct Expected {
    data: &'static str,
    mon_host: &'static str,
    peer: &'static str,
    csi_monitors: &'static str,
    mon_args: &'static [&'static str],
    osd_args: &'static [&'static str],
    mon_ports: &'static [(&'static str, u16)],
    osd_service_ports: &'static [(&'static str, u16)],
}

fn check(scenario: &Scenario, expected: &Expected) {
    let plan = scenario.plan();
    let what = format!(
        "{} msgr2={} mcs={}",
        scenario.family, scenario.msgr2, scenario.mcs
    );
    assert!(plan.readiness().ready, "{what}: {:?}", plan.readiness());
    let endpoints = plan.mon_endpoints();
    assert_eq!(endpoints.data, expected.data, "{what}");
    assert_eq!(endpoints.max_mon_id, "2", "{what}");
    assert_eq!(endpoints.out_of_quorum, "", "{what}");
    assert_eq!(endpoints.external_mons, "", "{what}");
    assert_eq!(
        endpoints.mapping,
        r#"{"node":{"a":{"Name":"node-1","Hostname":"node-1","Address":"192.168.0.1"},"b":{"Name":"node-2","Hostname":"node-2","Address":"192.168.0.2"},"c":{"Name":"node-3","Hostname":"node-3","Address":"192.168.0.3"}}}"#,
        "{what}"
    );
    assert_eq!(
        endpoints.csi_cluster_config_json,
        format!(
            r#"[{{"clusterID":"rook-ceph","monitors":[{}],"cephFS":{{"netNamespaceFilePath":"","subvolumeGroup":"","radosNamespace":"","kernelMountOptions":"","fuseMountOptions":""}},"rbd":{{"netNamespaceFilePath":"","radosNamespace":"","mirrorDaemonCount":0}},"nfs":{{"netNamespaceFilePath":""}},"readAffinity":{{"enabled":false,"crushLocationLabels":null}},"namespace":""}}]"#,
            expected.csi_monitors
        ),
        "{what}"
    );
    assert_eq!(plan.mon_host_config().mon_host, expected.mon_host, "{what}");
    assert_eq!(
        plan.mon_host_config().mon_initial_members,
        "a,b,c",
        "{what}"
    );
    assert_eq!(plan.peer_token_mon_host(), expected.peer, "{what}");
    assert_eq!(plan.next_mon_id().as_str(), "d", "{what}");
    assert_eq!(
        plan.daemon_args(&daemon("mon.a")).unwrap().to_args(),
        expected.mon_args,
        "{what}"
    );
    let osd_args = plan
        .daemon_args(&daemon("osd.0"))
        .map(|a| a.to_args())
        .unwrap_or_default();
    assert_eq!(osd_args, expected.osd_args, "{what}");
    let ports = |ports: Vec<ceph_address_plan::NamedPort>| {
        ports.iter().map(|p| (p.name, p.port)).collect::<Vec<_>>()
    };
    assert_eq!(
        ports(plan.container_ports(&daemon("mon.a"))),
        expected.mon_ports,
        "{what}"
    );
    assert_eq!(
        ports(plan.container_ports(&daemon("osd.0"))),
        expected.osd_service_ports,
        "{what}"
    );
    let services: Vec<(String, Vec<(&str, u16)>)> = plan
        .services()
        .into_iter()
        .map(|s| (s.name, ports(s.ports)))
        .collect();
    let mut wanted = vec![
        ("rook-ceph-mon-a".to_owned(), expected.mon_ports.to_vec()),
        ("rook-ceph-mon-b".to_owned(), expected.mon_ports.to_vec()),
        ("rook-ceph-mon-c".to_owned(), expected.mon_ports.to_vec()),
    ];
    if scenario.mcs {
        wanted.push((
            "rook-ceph-osd-0".into(),
            expected.osd_service_ports.to_vec(),
        ));
        wanted.push((
            "rook-ceph-osd-1".into(),
            expected.osd_service_ports.to_vec(),
        ));
    }
    assert_eq!(services, wanted, "{what}");
    let exports: Vec<String> = plan.service_exports().into_iter().map(|e| e.name).collect();
    let wanted_exports: Vec<&str> = if scenario.mcs {
        vec![
            "rook-ceph-mon-a",
            "rook-ceph-mon-b",
            "rook-ceph-mon-c",
            "rook-ceph-osd-0",
            "rook-ceph-osd-1",
        ]
    } else {
        vec![]
    };
    assert_eq!(exports, wanted_exports, "{what}");
}

const MON_PORTS_V1: &[(&str, u16)] = &[("tcp-msgr1", 6789), ("tcp-msgr2", 3300)];
const MON_PORTS_V2: &[(&str, u16)] = &[("tcp-msgr2", 3300)];
const OSD_PORTS_V1: &[(&str, u16)] = &[("osd-port-v2", 6800), ("osd-port-v1", 6801)];
const OSD_PORTS_V2: &[(&str, u16)] = &[("osd-port-v2", 6800)];
const OSD_MCS_ARGS_V4: &[&str] = &[
    "--public-addr=242.1.0.20",
    "--public-bind-addr=$(ROOK_POD_IP)",
    "--cluster-addr=$(ROOK_POD_IP)",
];
const OSD_MCS_ARGS_V6: &[&str] = &[
    "--public-addr=fd00:242::20",
    "--public-bind-addr=$(ROOK_POD_IP)",
    "--cluster-addr=$(ROOK_POD_IP)",
];

#[test]
fn ipv4_msgr1_without_mcs() {
    check(
        &Scenario {
            family: IpFamily::IPv4,
            msgr2: false,
            mcs: false,
        },
        &Expected {
            data: "a=10.96.0.1:6789,b=10.96.0.2:6789,c=10.96.0.3:6789",
            mon_host: "[v2:10.96.0.1:3300,v1:10.96.0.1:6789],[v2:10.96.0.2:3300,v1:10.96.0.2:6789],[v2:10.96.0.3:3300,v1:10.96.0.3:6789]",
            peer: "10.96.0.1:6789,10.96.0.2:6789,10.96.0.3:6789",
            csi_monitors: r#""10.96.0.1:6789","10.96.0.2:6789","10.96.0.3:6789""#,
            mon_args: &[
                "--public-addr=10.96.0.1",
                "--public-bind-addr=$(ROOK_POD_IP)",
            ],
            osd_args: &[],
            mon_ports: MON_PORTS_V1,
            osd_service_ports: &[],
        },
    );
}

#[test]
fn ipv4_msgr2_without_mcs() {
    check(
        &Scenario {
            family: IpFamily::IPv4,
            msgr2: true,
            mcs: false,
        },
        &Expected {
            data: "a=10.96.0.1:3300,b=10.96.0.2:3300,c=10.96.0.3:3300",
            mon_host: "[v2:10.96.0.1:3300],[v2:10.96.0.2:3300],[v2:10.96.0.3:3300]",
            peer: "10.96.0.1:3300,10.96.0.2:3300,10.96.0.3:3300",
            csi_monitors: r#""10.96.0.1:3300","10.96.0.2:3300","10.96.0.3:3300""#,
            mon_args: &[
                "--public-addr=10.96.0.1",
                "--ms-bind-msgr1=false",
                "--public-bind-addr=$(ROOK_POD_IP):3300",
            ],
            osd_args: &[],
            mon_ports: MON_PORTS_V2,
            osd_service_ports: &[],
        },
    );
}

#[test]
fn ipv4_msgr1_with_mcs() {
    check(
        &Scenario {
            family: IpFamily::IPv4,
            msgr2: false,
            mcs: true,
        },
        &Expected {
            data: "a=242.1.0.1:6789,b=242.1.0.2:6789,c=242.1.0.3:6789",
            mon_host: "[v2:242.1.0.1:3300,v1:242.1.0.1:6789],[v2:242.1.0.2:3300,v1:242.1.0.2:6789],[v2:242.1.0.3:3300,v1:242.1.0.3:6789]",
            peer: "242.1.0.1:6789,242.1.0.2:6789,242.1.0.3:6789",
            csi_monitors: r#""242.1.0.1:6789","242.1.0.2:6789","242.1.0.3:6789""#,
            mon_args: &[
                "--public-addr=242.1.0.1",
                "--public-bind-addr=$(ROOK_POD_IP)",
            ],
            osd_args: OSD_MCS_ARGS_V4,
            mon_ports: MON_PORTS_V1,
            osd_service_ports: OSD_PORTS_V1,
        },
    );
}

#[test]
fn ipv4_msgr2_with_mcs() {
    check(
        &Scenario {
            family: IpFamily::IPv4,
            msgr2: true,
            mcs: true,
        },
        &Expected {
            data: "a=242.1.0.1:3300,b=242.1.0.2:3300,c=242.1.0.3:3300",
            mon_host: "[v2:242.1.0.1:3300],[v2:242.1.0.2:3300],[v2:242.1.0.3:3300]",
            peer: "242.1.0.1:3300,242.1.0.2:3300,242.1.0.3:3300",
            csi_monitors: r#""242.1.0.1:3300","242.1.0.2:3300","242.1.0.3:3300""#,
            mon_args: &[
                "--public-addr=242.1.0.1",
                "--ms-bind-msgr1=false",
                "--public-bind-addr=$(ROOK_POD_IP):3300",
            ],
            osd_args: OSD_MCS_ARGS_V4,
            mon_ports: MON_PORTS_V2,
            osd_service_ports: OSD_PORTS_V2,
        },
    );
}

#[test]
fn ipv6_msgr1_without_mcs() {
    check(
        &Scenario {
            family: IpFamily::IPv6,
            msgr2: false,
            mcs: false,
        },
        &Expected {
            data: "a=[fd00:10:96::1]:6789,b=[fd00:10:96::2]:6789,c=[fd00:10:96::3]:6789",
            mon_host: "[v2:[fd00:10:96::1]:3300,v1:[fd00:10:96::1]:6789],[v2:[fd00:10:96::2]:3300,v1:[fd00:10:96::2]:6789],[v2:[fd00:10:96::3]:3300,v1:[fd00:10:96::3]:6789]",
            peer: "[fd00:10:96::1]:6789,[fd00:10:96::2]:6789,[fd00:10:96::3]:6789",
            csi_monitors: r#""[fd00:10:96::1]:6789","[fd00:10:96::2]:6789","[fd00:10:96::3]:6789""#,
            mon_args: &[
                "--public-addr=fd00:10:96::1",
                "--public-bind-addr=$(ROOK_POD_IP)",
            ],
            osd_args: &[],
            mon_ports: MON_PORTS_V1,
            osd_service_ports: &[],
        },
    );
}

#[test]
fn ipv6_msgr2_without_mcs() {
    check(
        &Scenario {
            family: IpFamily::IPv6,
            msgr2: true,
            mcs: false,
        },
        &Expected {
            data: "a=[fd00:10:96::1]:3300,b=[fd00:10:96::2]:3300,c=[fd00:10:96::3]:3300",
            mon_host: "[v2:[fd00:10:96::1]:3300],[v2:[fd00:10:96::2]:3300],[v2:[fd00:10:96::3]:3300]",
            peer: "[fd00:10:96::1]:3300,[fd00:10:96::2]:3300,[fd00:10:96::3]:3300",
            csi_monitors: r#""[fd00:10:96::1]:3300","[fd00:10:96::2]:3300","[fd00:10:96::3]:3300""#,
            mon_args: &[
                "--public-addr=fd00:10:96::1",
                "--ms-bind-msgr1=false",
                "--public-bind-addr=[$(ROOK_POD_IP)]:3300",
            ],
            osd_args: &[],
            mon_ports: MON_PORTS_V2,
            osd_service_ports: &[],
        },
    );
}

#[test]
fn ipv6_msgr1_with_mcs() {
    check(
        &Scenario {
            family: IpFamily::IPv6,
            msgr2: false,
            mcs: true,
        },
        &Expected {
            data: "a=[fd00:242::1]:6789,b=[fd00:242::2]:6789,c=[fd00:242::3]:6789",
            mon_host: "[v2:[fd00:242::1]:3300,v1:[fd00:242::1]:6789],[v2:[fd00:242::2]:3300,v1:[fd00:242::2]:6789],[v2:[fd00:242::3]:3300,v1:[fd00:242::3]:6789]",
            peer: "[fd00:242::1]:6789,[fd00:242::2]:6789,[fd00:242::3]:6789",
            csi_monitors: r#""[fd00:242::1]:6789","[fd00:242::2]:6789","[fd00:242::3]:6789""#,
            mon_args: &[
                "--public-addr=fd00:242::1",
                "--public-bind-addr=$(ROOK_POD_IP)",
            ],
            osd_args: OSD_MCS_ARGS_V6,
            mon_ports: MON_PORTS_V1,
            osd_service_ports: OSD_PORTS_V1,
        },
    );
}

#[test]
fn ipv6_msgr2_with_mcs() {
    check(
        &Scenario {
            family: IpFamily::IPv6,
            msgr2: true,
            mcs: true,
        },
        &Expected {
            data: "a=[fd00:242::1]:3300,b=[fd00:242::2]:3300,c=[fd00:242::3]:3300",
            mon_host: "[v2:[fd00:242::1]:3300],[v2:[fd00:242::2]:3300],[v2:[fd00:242::3]:3300]",
            peer: "[fd00:242::1]:3300,[fd00:242::2]:3300,[fd00:242::3]:3300",
            csi_monitors: r#""[fd00:242::1]:3300","[fd00:242::2]:3300","[fd00:242::3]:3300""#,
            mon_args: &[
                "--public-addr=fd00:242::1",
                "--ms-bind-msgr1=false",
                "--public-bind-addr=[$(ROOK_POD_IP)]:3300",
            ],
            osd_args: OSD_MCS_ARGS_V6,
            mon_ports: MON_PORTS_V2,
            osd_service_ports: OSD_PORTS_V2,
        },
    );
}

#[test]
fn dual_stack_msgr2_binds_the_pod_ip_without_a_port() {
    let plan = Scenario {
        family: IpFamily::DualStack,
        msgr2: true,
        mcs: false,
    }
    .plan();
    assert_eq!(
        plan.daemon_args(&daemon("mon.b")).unwrap().to_args(),
        [
            "--public-addr=10.96.0.2",
            "--ms-bind-msgr1=false",
            "--public-bind-addr=$(ROOK_POD_IP)"
        ]
    );
}

fn mcs_settings() -> ClusterSettings {
    let mut cluster = ClusterSettings::new("my-cluster", "rook-ceph");
    cluster.multi_cluster_service.enabled = true;
    cluster.multi_cluster_service.cluster_id = "east".into();
    cluster.ceph_version = Some(CephVersion::new(17, 2, 6));
    cluster.uid = Some("c0ffee00-0000-4000-8000-000000000001".into());
    cluster
}

#[test]
fn rooks_own_test_values_come_out_unchanged() {
    // TestSaveMonEndpoints: msgr2 mon a at 1.2.3.1, mapping entry from node0.
    let mut cluster = ClusterSettings::new("test", "ns");
    cluster.require_msgr2 = true;
    let mut mon = MonInput::new("a".parse().unwrap());
    mon.cluster_ip = Some(ip("1.2.3.1"));
    mon.node = Some(NodeInfo {
        name: "node0".into(),
        hostname: "myhost".into(),
        address: Some(ip("1.1.1.1")),
    });
    let mut inventory = Inventory::default();
    inventory.mons.push(mon);
    let plan = Plan::new(PlanInput {
        cluster: cluster.clone(),
        inventory: inventory.clone(),
    })
    .unwrap();
    assert_eq!(plan.mon_endpoints().data, "a=1.2.3.1:3300");
    assert_eq!(
        plan.mon_endpoints().mapping,
        r#"{"node":{"a":{"Name":"node0","Hostname":"myhost","Address":"1.1.1.1"}}}"#
    );
    // A manually raised maxMonId (23) is preserved; the next mon continues from it.
    inventory.max_mon_id = Some(23);
    let plan = Plan::new(PlanInput { cluster, inventory }).unwrap();
    assert_eq!(plan.mon_endpoints().max_mon_id, "23");
    assert_eq!(plan.next_mon_id().as_str(), "y");
    // No mons at all: Rook's empty mapping and -1.
    let empty = Plan::new(PlanInput {
        cluster: ClusterSettings::new("test", "ns"),
        inventory: Inventory::default(),
    })
    .unwrap();
    assert_eq!(empty.mon_endpoints().mapping, r#"{"node":{}}"#);
    assert_eq!(empty.mon_endpoints().max_mon_id, "-1");
    assert_eq!(empty.next_mon_id().as_str(), "a");
}

#[test]
fn out_of_quorum_and_external_mons() {
    let mut inventory = Inventory::default();
    for (id, addr, out) in [("a", "10.0.0.1:6789", false), ("b", "10.0.0.2:6789", true)] {
        let mut mon = MonInput::new(id.parse().unwrap());
        mon.cluster_ip = Some(sock(addr).ip());
        mon.advertised = Some(sock(addr));
        mon.out_of_quorum = out;
        inventory.mons.push(mon);
    }
    inventory.external_mons.push(ExternalMon {
        name: "ext1".into(),
        endpoint: sock("172.16.0.9:6789"),
    });
    let plan = Plan::new(PlanInput {
        cluster: ClusterSettings::new("c", "rook-ceph"),
        inventory,
    })
    .unwrap();
    let endpoints = plan.mon_endpoints();
    assert_eq!(
        endpoints.data,
        "a=10.0.0.1:6789,b=10.0.0.2:6789,ext1=172.16.0.9:6789"
    );
    assert_eq!(endpoints.out_of_quorum, "b");
    assert_eq!(endpoints.external_mons, "ext1");
    assert_eq!(endpoints.mapping, r#"{"node":{"a":null,"b":null}}"#);
    // Rook's PopulateMonHostMembers: out-of-quorum mons are left out, external mons are in.
    assert_eq!(
        plan.mon_host_config().mon_host,
        "[v2:10.0.0.1:3300,v1:10.0.0.1:6789],[v2:172.16.0.9:3300,v1:172.16.0.9:6789]"
    );
    assert_eq!(plan.mon_host_config().mon_initial_members, "a,ext1");
    // The peer token lists every mon, sorted as strings.
    assert_eq!(
        plan.peer_token_mon_host(),
        "10.0.0.1:6789,10.0.0.2:6789,172.16.0.9:6789"
    );
    assert!(plan.readiness().warnings.contains(
        &"mon.b is out of quorum: it is left out of mon_host and mon_initial_members".to_owned()
    ));
}

#[test]
fn mon_and_osd_service_manifests_are_rooks() {
    let mut inventory = Inventory::default();
    let mut mon = MonInput::new("a".parse().unwrap());
    mon.zone = Some("zone-a".into());
    mon.pvc_size = Some("10Gi".into());
    inventory.mons.push(mon);
    let mut osd = OsdInput::new(7, "node-3");
    osd.device_class = "ssd".into();
    osd.device_type = Some("ssd".into());
    osd.encrypted = true;
    osd.location = "root=default host=node-3 zone=z1".into();
    inventory.osds.push(osd);
    let mut cluster = mcs_settings();
    cluster.operator_namespace = "rook-operator".into();
    let plan = Plan::new(PlanInput { cluster, inventory }).unwrap();
    let services = plan.services();
    let owner = json!([{
        "apiVersion": "ceph.rook.io/v1", "kind": "CephCluster", "name": "my-cluster",
        "uid": "c0ffee00-0000-4000-8000-000000000001"
    }]);
    assert_eq!(
        serde_json::to_value(plan.service_manifest(&services[0])).unwrap(),
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {
                "name": "rook-ceph-mon-a", "namespace": "rook-ceph", "ownerReferences": owner,
                "labels": {
                    "app": "rook-ceph-mon", "rook_cluster": "rook-ceph", "ceph_daemon_type": "mon",
                    "ceph_daemon_id": "a", "mon": "a", "mon_cluster": "rook-ceph", "mon_daemon": "true",
                    "pvc_name": "rook-ceph-mon-a", "pvc_size": "10Gi", "zone": "zone-a",
                    "app.kubernetes.io/name": "ceph-mon", "app.kubernetes.io/instance": "a",
                    "app.kubernetes.io/component": "cephclusters.ceph.rook.io",
                    "app.kubernetes.io/part-of": "my-cluster",
                    "app.kubernetes.io/managed-by": "rook-ceph-operator",
                    "app.kubernetes.io/created-by": "rook-ceph-operator",
                    "rook.io/operator-namespace": "rook-operator"
                }
            },
            "spec": {
                "selector": {"app": "rook-ceph-mon", "rook_cluster": "rook-ceph", "ceph_daemon_id": "a",
                             "mon": "a", "mon_cluster": "rook-ceph"},
                "ports": [
                    {"name": "tcp-msgr1", "port": 6789, "protocol": "TCP", "targetPort": 6789},
                    {"name": "tcp-msgr2", "port": 3300, "protocol": "TCP", "targetPort": 3300}
                ]
            }
        })
    );
    assert_eq!(
        serde_json::to_value(plan.service_manifest(&services[1])).unwrap(),
        json!({
            "apiVersion": "v1", "kind": "Service",
            "metadata": {
                "name": "rook-ceph-osd-7", "namespace": "rook-ceph", "ownerReferences": owner,
                "labels": {
                    "app": "rook-ceph-osd", "rook_cluster": "rook-ceph", "ceph_daemon_type": "osd",
                    "ceph_daemon_id": "7", "osd": "7", "ceph-osd-id": "7",
                    "failure-domain": "node-3", "portable": "false", "device-class": "ssd",
                    "device-type": "ssd", "osd-store": "bluestore", "encrypted": "true",
                    "topology-location-root": "default", "topology-location-host": "node-3",
                    "topology-location-zone": "z1",
                    "app.kubernetes.io/name": "ceph-osd", "app.kubernetes.io/instance": "7",
                    "app.kubernetes.io/component": "cephclusters.ceph.rook.io",
                    "app.kubernetes.io/part-of": "my-cluster",
                    "app.kubernetes.io/managed-by": "rook-ceph-operator",
                    "app.kubernetes.io/created-by": "rook-ceph-operator",
                    "rook.io/operator-namespace": "rook-operator"
                }
            },
            "spec": {
                "selector": {"app": "rook-ceph-osd", "ceph-osd-id": "7"},
                "ports": [
                    {"name": "osd-port-v2", "port": 6800, "protocol": "TCP", "targetPort": 6800},
                    {"name": "osd-port-v1", "port": 6801, "protocol": "TCP", "targetPort": 6801}
                ]
            }
        })
    );
    let exports = plan.service_exports();
    assert_eq!(
        serde_json::to_value(plan.service_export_manifest(&exports[1])).unwrap(),
        json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
            "metadata": {"name": "rook-ceph-osd-7", "namespace": "rook-ceph", "ownerReferences": owner},
            "spec": {}
        })
    );
}

#[test]
fn config_map_and_secret_objects() {
    let plan = Scenario {
        family: IpFamily::IPv4,
        msgr2: false,
        mcs: true,
    }
    .plan();
    let config_map = serde_json::to_value(plan.mon_endpoints_config_map()).unwrap();
    let controller = json!([{
        "apiVersion": "ceph.rook.io/v1", "kind": "CephCluster", "name": "my-cluster",
        "uid": "c0ffee00-0000-4000-8000-000000000001", "controller": true, "blockOwnerDeletion": true
    }]);
    assert_eq!(config_map["metadata"]["name"], "rook-ceph-mon-endpoints");
    assert_eq!(
        config_map["metadata"]["finalizers"],
        json!(["ceph.rook.io/disaster-protection"])
    );
    assert_eq!(config_map["metadata"]["ownerReferences"], controller);
    let keys: Vec<&String> = config_map["data"].as_object().unwrap().keys().collect();
    assert_eq!(
        keys,
        [
            "csi-cluster-config-json",
            "data",
            "externalMons",
            "mapping",
            "maxMonId",
            "outOfQuorum"
        ]
    );
    let secret = serde_json::to_value(plan.config_secret()).unwrap();
    assert_eq!(
        secret,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "rook-ceph-config", "namespace": "rook-ceph", "ownerReferences": controller},
            "type": "kubernetes.io/rook",
            "stringData": {
                "mon_host": "[v2:242.1.0.1:3300,v1:242.1.0.1:6789],[v2:242.1.0.2:3300,v1:242.1.0.2:6789],[v2:242.1.0.3:3300,v1:242.1.0.3:6789]",
                "mon_initial_members": "a,b,c"
            }
        })
    );
}

#[test]
fn names_to_resolve_in_both_forms() {
    let mut inventory = Inventory::new_cluster(1);
    inventory.osds.push(OsdInput::new(12, "node-1"));
    let input = PlanInput {
        cluster: mcs_settings(),
        inventory,
    };
    let plan = Plan::new(input.clone()).unwrap();
    let lookups: Vec<(String, String, String)> = plan
        .lookups()
        .unwrap()
        .into_iter()
        .map(|l| (l.name.to_string(), l.service, l.daemon.to_string()))
        .collect();
    assert_eq!(
        lookups,
        [
            (
                "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local".to_owned(),
                "rook-ceph-mon-a".to_owned(),
                "mon.a".to_owned()
            ),
            (
                "east.rook-ceph-osd-12.rook-ceph.svc.clusterset.local".to_owned(),
                "rook-ceph-osd-12".to_owned(),
                "osd.12".to_owned()
            ),
        ]
    );

    let mut unique = input;
    unique.cluster.dns_name_form = DnsNameForm::UniqueServiceName;
    unique.cluster.clusterset_zone = "mesh.example".into();
    let plan = Plan::new(unique).unwrap();
    let names: Vec<String> = plan
        .lookups()
        .unwrap()
        .iter()
        .map(|l| l.name.to_string())
        .collect();
    assert_eq!(
        names,
        [
            "east-rook-ceph-mon-a.rook-ceph.svc.mesh.example",
            "east-rook-ceph-osd-12.rook-ceph.svc.mesh.example"
        ]
    );
    // Rook's Services stay; the exports are of extra, cluster-unique Services.
    let services: Vec<String> = plan.services().into_iter().map(|s| s.name).collect();
    assert_eq!(
        services,
        [
            "rook-ceph-mon-a",
            "rook-ceph-osd-12",
            "east-rook-ceph-mon-a",
            "east-rook-ceph-osd-12"
        ]
    );
    let exports: Vec<String> = plan.service_exports().into_iter().map(|e| e.name).collect();
    assert_eq!(exports, ["east-rook-ceph-mon-a", "east-rook-ceph-osd-12"]);
    let export_service = &plan.services()[3];
    let manifest = serde_json::to_value(plan.service_manifest(export_service)).unwrap();
    assert_eq!(
        manifest["spec"]["selector"],
        json!({"app": "rook-ceph-osd", "ceph-osd-id": "12"})
    );
    assert_eq!(
        manifest["metadata"]["labels"],
        json!({
            "rook_cluster": "rook-ceph", "ceph_daemon_type": "osd", "ceph_daemon_id": "12",
            "app.kubernetes.io/part-of": "my-cluster", "app.kubernetes.io/managed-by": "clusterset",
            "clusterset.io/rook-service": "rook-ceph-osd-12"
        })
    );
}

fn condition(type_: &str, status: &str, reason: &str, message: &str) -> ExportCondition {
    ExportCondition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: message.into(),
    }
}

#[test]
fn readiness_reasons_name_the_daemon_the_export_and_the_condition() {
    let mut inventory = Inventory::default();
    for (id, ip_text) in [("a", "242.1.0.1"), ("b", "242.1.0.2"), ("c", "242.1.0.3")] {
        let mut mon = MonInput::new(id.parse().unwrap());
        mon.cluster_ip = Some(ip(&format!("10.96.0.{}", &ip_text[8..])));
        mon.advertised = Some(SocketAddr::new(ip(ip_text), 6789));
        inventory
            .global_ips
            .insert(daemon(&format!("mon.{id}")), ip(ip_text));
        inventory.mons.push(mon);
    }
    for id in 3..=8 {
        inventory.osds.push(OsdInput::new(id, "node-1"));
    }
    inventory
        .global_ips
        .insert(daemon("osd.3"), ip("242.1.0.23"));
    inventory.exports.insert(
        daemon("osd.4"),
        ExportStatus {
            conditions: vec![condition("Valid", "False", "NoService", "")],
        },
    );
    inventory.exports.insert(
        daemon("osd.5"),
        ExportStatus {
            conditions: vec![
                condition("Valid", "True", "Valid", ""),
                condition(
                    "Conflict",
                    "True",
                    "TypeConflict,PortConflict",
                    "Ports differ",
                ),
            ],
        },
    );
    inventory.exports.insert(
        daemon("osd.6"),
        ExportStatus {
            conditions: vec![
                condition("Valid", "True", "Valid", ""),
                condition(
                    "Ready",
                    "False",
                    "Pending",
                    "Awaiting sync of the ServiceImport to the broker",
                ),
            ],
        },
    );
    inventory
        .exports
        .insert(daemon("osd.7"), ExportStatus::default());
    inventory.exports.insert(
        daemon("osd.8"),
        ExportStatus {
            conditions: vec![
                condition("Valid", "True", "Valid", ""),
                condition("Ready", "True", "Exported", ""),
            ],
        },
    );
    let plan = Plan::new(PlanInput {
        cluster: mcs_settings(),
        inventory,
    })
    .unwrap();
    let readiness = plan.readiness();
    assert!(!readiness.ready);
    assert!(!plan.is_ready());
    assert_eq!(
        readiness.reasons,
        [
            "osd.3 advertises its pod IP: update its Deployment to advertise 242.1.0.23",
            "osd.4 waits for export rook-ceph-osd-4: Valid=False (NoService)",
            "osd.5 waits for export rook-ceph-osd-5: Conflict=True (PortConflict,TypeConflict): Ports differ",
            "osd.6 waits for export rook-ceph-osd-6: Ready=False (Pending): Awaiting sync of the ServiceImport to the broker",
            "osd.7 waits for export rook-ceph-osd-7: no conditions yet (is the MCS controller running in this cluster?)",
            "osd.8 waits for east.rook-ceph-osd-8.rook-ceph.svc.clusterset.local to resolve (export rook-ceph-osd-8 is Valid and Ready)",
        ]
    );
}

#[test]
fn migrating_mons_are_replaced_not_moved() {
    // Mons a and b run on their cluster IPs; MCS was just enabled. Mon c runs on an old global
    // IP that no longer matches its export. Mon d is the first replacement, not started yet.
    let mut inventory = Inventory {
        max_mon_id: Some(3),
        ..Inventory::default()
    };
    for (id, cluster_ip, advertised) in [
        ("a", "10.96.0.1", Some("10.96.0.1:6789")),
        ("b", "10.96.0.2", Some("10.96.0.2:6789")),
        ("c", "10.96.0.3", Some("242.1.0.99:6789")),
        ("d", "10.96.0.4", None),
    ] {
        let mut mon = MonInput::new(id.parse().unwrap());
        mon.cluster_ip = Some(ip(cluster_ip));
        mon.advertised = advertised.map(sock);
        inventory.mons.push(mon);
    }
    inventory
        .global_ips
        .insert(daemon("mon.c"), ip("242.1.0.3"));
    inventory
        .global_ips
        .insert(daemon("mon.d"), ip("242.1.0.4"));
    let plan = Plan::new(PlanInput {
        cluster: mcs_settings(),
        inventory,
    })
    .unwrap();
    let statuses: Vec<(String, Address, DaemonStatus)> = plan
        .daemons()
        .map(|(d, a, s)| (d.to_string(), a, s))
        .collect();
    assert_eq!(
        statuses,
        [
            (
                "mon.a".to_owned(),
                Address::Retiring(ip("10.96.0.1")),
                DaemonStatus::Replace {
                    advertised: sock("10.96.0.1:6789"),
                    expected: None
                }
            ),
            (
                "mon.b".to_owned(),
                Address::Retiring(ip("10.96.0.2")),
                DaemonStatus::Replace {
                    advertised: sock("10.96.0.2:6789"),
                    expected: None
                }
            ),
            (
                "mon.c".to_owned(),
                Address::Retiring(ip("242.1.0.99")),
                DaemonStatus::Replace {
                    advertised: sock("242.1.0.99:6789"),
                    expected: Some(ip("242.1.0.3"))
                }
            ),
            (
                "mon.d".to_owned(),
                Address::Global(ip("242.1.0.4")),
                DaemonStatus::Start
            ),
        ]
    );
    let replacements: Vec<String> = plan
        .mon_replacements()
        .iter()
        .map(|r| r.reason.clone())
        .collect();
    assert_eq!(
        replacements[0],
        "mon.a advertises 10.96.0.1:6789 but must advertise its global IP (it advertises its cluster IP, which other clusters cannot reach); a mon cannot change its address, so a new mon replaces it (next free id: e)"
    );
    assert_eq!(
        replacements[2],
        "mon.c advertises 242.1.0.99:6789 but must advertise its global IP 242.1.0.3; a mon cannot change its address, so a new mon replaces it (next free id: e)"
    );
    // Clients keep reaching the old mons where they are; the new one is listed where it starts.
    assert_eq!(
        plan.mon_endpoints().data,
        "a=10.96.0.1:6789,b=10.96.0.2:6789,c=242.1.0.99:6789,d=242.1.0.4:6789"
    );
    assert_eq!(
        plan.daemon_args(&daemon("mon.d")).unwrap().to_args(),
        [
            "--public-addr=242.1.0.4",
            "--public-bind-addr=$(ROOK_POD_IP)"
        ]
    );
    assert_eq!(plan.daemon_args(&daemon("mon.a")), None);
    // Mons being replaced are not exported (a global IP for them would be wasted).
    let exports: Vec<String> = plan.service_exports().into_iter().map(|e| e.name).collect();
    assert_eq!(exports, ["rook-ceph-mon-d"]);
    assert_eq!(plan.next_mon_id().as_str(), "e");
}

#[test]
fn disabling_mcs_moves_osds_back_to_pod_ips_and_replaces_global_mons() {
    let mut inventory = Inventory::default();
    let mut mon = MonInput::new("d".parse().unwrap());
    mon.cluster_ip = Some(ip("10.96.0.4"));
    mon.advertised = Some(sock("242.1.0.4:6789"));
    inventory.mons.push(mon);
    let mut osd = OsdInput::new(0, "node-1");
    osd.advertised = Some(ip("242.1.0.20"));
    inventory.osds.push(osd);
    let plan = Plan::new(PlanInput {
        cluster: ClusterSettings::new("my-cluster", "rook-ceph"),
        inventory,
    })
    .unwrap();
    assert_eq!(
        plan.readiness().reasons,
        [
            "mon.d advertises 242.1.0.4:6789 but must advertise its Service's cluster IP 10.96.0.4; a mon cannot change its address, so a new mon replaces it (next free id: e)",
            "osd.0 still advertises 242.1.0.20 from MCS: update its Deployment to advertise its pod IP"
        ]
    );
    assert_eq!(plan.daemon_args(&daemon("osd.0")), None);
    assert!(plan.service_exports().is_empty());
}

#[test]
fn host_networking_uses_node_ips_and_no_services() {
    let mut cluster = ClusterSettings::new("c", "rook-ceph");
    cluster.host_network = true;
    let mut inventory = Inventory::default();
    let mut mon = MonInput::new("a".parse().unwrap());
    mon.node = Some(NodeInfo {
        name: "n1".into(),
        hostname: "n1".into(),
        address: Some(ip("192.168.1.10")),
    });
    inventory.mons.push(mon);
    let plan = Plan::new(PlanInput { cluster, inventory }).unwrap();
    assert_eq!(
        plan.daemon_args(&daemon("mon.a")).unwrap().to_args(),
        ["--public-addr=192.168.1.10"]
    );
    assert!(plan.services().is_empty());
    assert_eq!(plan.mon_endpoints().data, "a=192.168.1.10:6789");
}

fn rejections(input: PlanInput) -> Vec<String> {
    Plan::new(input)
        .unwrap_err()
        .iter()
        .map(ToString::to_string)
        .collect()
}

#[test]
fn rejections_say_what_to_change() {
    let mut cluster = mcs_settings();
    cluster.multi_cluster_service.cluster_id = "East_1".into();
    cluster.host_network = true;
    cluster.ceph_version = Some(CephVersion::new(17, 2, 5));
    let mut inventory = Inventory::new_cluster(2);
    inventory.mons.push(MonInput::new("b".parse().unwrap()));
    inventory.osds = vec![
        OsdInput::new(3, "n"),
        OsdInput::new(3, "m"),
        OsdInput::new(3, "o"),
    ];
    let messages = rejections(PlanInput { cluster, inventory });
    assert_eq!(
        messages,
        [
            "spec.network.multiClusterService.clusterID \"East_1\" must consist of lower case letters, digits or '-', start with a lower case letter or digit and end with a letter or digit (for example '1-web'): it is used as a DNS label, so use lower case letters, digits and '-' only",
            "multiClusterService is enabled together with host networking: host-networked daemons bind the node IP and have no Service to export; disable spec.network.multiClusterService or use pod networking (remove provider: host / hostNetwork: true)",
            "Ceph 17.2.5 is older than 17.2.6, the first release whose OSDs accept --public-bind-addr: upgrade Ceph (spec.cephVersion.image) to 17.2.6 or later, or disable multiClusterService",
            "mon id b is listed twice: every mon needs its own id, remove or rename one",
            "OSD id 3 is listed twice: every OSD needs its own id, remove one",
            "mon a has no node address in its mapping entry, and with host networking a mon advertises its node's IP: add node.address to the mon",
            "mon b has no node address in its mapping entry, and with host networking a mon advertises its node's IP: add node.address to the mon",
        ]
    );

    let mut cluster = mcs_settings();
    cluster.multi_cluster_service.cluster_id = String::new();
    cluster.ceph_version = None;
    let messages = rejections(PlanInput {
        cluster,
        inventory: Inventory::default(),
    });
    assert_eq!(messages.len(), 2);
    assert!(messages[0].starts_with("spec.network.multiClusterService.clusterID is empty"));
    assert!(messages[1].starts_with("the Ceph version is unknown"));

    let mut cluster = mcs_settings();
    cluster.ceph_version = Some("17".parse().unwrap());
    let mut inventory = Inventory::default();
    inventory.global_ips.insert(daemon("osd.1"), ip("fd00::1"));
    inventory.external_mons.push(ExternalMon {
        name: "a=b".into(),
        endpoint: sock("10.0.0.1:6789"),
    });
    let messages = rejections(PlanInput { cluster, inventory });
    assert_eq!(
        messages,
        [
            "Ceph version 17 does not say whether it is at least 17.2.6 (MCS needs 17.2.6): give the full version, for example an image tag v17.2.6 or cephVersion: 17.2.6 in the inventory",
            "external mon name \"a=b\" is empty or contains '=' or ',', which Rook's data format cannot hold: rename it",
            "global IP of osd.1 fd00::1 is not an IPv4 address but the cluster's ipFamily is IPv4: fix the address or set spec.network.ipFamily / dualStack",
        ]
    );

    let mut cluster = mcs_settings();
    cluster.dns_name_form = DnsNameForm::UniqueServiceName;
    cluster.multi_cluster_service.cluster_id =
        "a-very-long-cluster-identifier-of-fifty-characters".into();
    let mut inventory = Inventory::default();
    inventory.osds.push(OsdInput::new(1234, "n"));
    let messages = rejections(PlanInput { cluster, inventory });
    assert_eq!(
        messages,
        [
            "export Service name \"a-very-long-cluster-identifier-of-fifty-characters-rook-ceph-osd-1234\" of osd.1234 is 69 characters long; Service names have at most 63: shorten the clusterID or use dnsNameForm clusterIdPrefix"
        ]
    );
    assert!(matches!(
        Plan::new(PlanInput {
            cluster: ClusterSettings::new("c", "Rook"),
            inventory: Inventory::default()
        })
        .unwrap_err()
        .0[0],
        Rejection::InvalidNamespace { .. }
    ));
}

#[test]
fn the_rejections_display_lists_every_problem() {
    let mut cluster = mcs_settings();
    cluster.host_network = true;
    cluster.ceph_version = Some(CephVersion::new(16, 2, 15));
    let err = Plan::new(PlanInput {
        cluster,
        inventory: Inventory::default(),
    })
    .unwrap_err();
    let text = err.to_string();
    assert!(text.starts_with("the plan was rejected for 2 reasons:\n  - multiClusterService is enabled together with host networking"), "{text}");
    assert!(
        text.contains("\n  - Ceph 16.2.15 is older than 17.2.6"),
        "{text}"
    );
}

#[test]
fn plan_documents_serialize_with_the_verdict_first() {
    let plan = Scenario {
        family: IpFamily::IPv4,
        msgr2: false,
        mcs: true,
    }
    .plan();
    let document = serde_json::to_value(plan.document().unwrap()).unwrap();
    let keys: Vec<&String> = document.as_object().unwrap().keys().collect();
    // serde_json's map is sorted; check presence and a few values instead of order.
    for key in [
        "cluster",
        "ready",
        "reasons",
        "nextMonId",
        "monReplacements",
        "lookups",
        "daemons",
        "monEndpoints",
        "rookCephConfig",
        "peerTokenMonHost",
        "services",
        "serviceExports",
    ] {
        assert!(keys.iter().any(|k| k.as_str() == key), "{key} missing");
    }
    assert_eq!(document["ready"], true);
    assert_eq!(
        document["daemons"][3],
        json!({
            "daemon": "osd.0", "source": "global", "address": "242.1.0.20",
            "advertised": "242.1.0.20", "status": "upToDate",
            "args": ["--public-addr=242.1.0.20", "--public-bind-addr=$(ROOK_POD_IP)", "--cluster-addr=$(ROOK_POD_IP)"]
        })
    );
    let expected_config: BTreeMap<String, String> = BTreeMap::from([
        (
            "mon_host".to_owned(),
            plan.mon_host_config().mon_host.clone(),
        ),
        ("mon_initial_members".to_owned(), "a,b,c".to_owned()),
    ]);
    assert_eq!(
        serde_json::from_value::<BTreeMap<String, String>>(document["rookCephConfig"].clone())
            .unwrap(),
        expected_config
    );
}

//! Property tests: a plan is deterministic and independent of input order; applying a plan and
//! re-planning yields no further changes; every daemon gets exactly one address; an incremental
//! re-plan equals a full plan of the same input.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use ceph_address_plan::{
    CephVersion, ClusterSettings, Daemon, DaemonStatus, DnsNameForm, ExportCondition, ExportStatus,
    Inventory, IpFamily, MonId, MonInput, NodeInfo, OsdInput, Plan, PlanInput, WaitFor,
};
use proptest::prelude::*;

/// Address kinds, each from its own range so that they never collide by accident.
#[derive(Debug, Clone, Copy)]
enum Kind {
    Cluster,
    Global,
    Node,
    Other,
}

fn make_ip(kind: Kind, n: u16, v6: bool) -> IpAddr {
    let [hi, lo] = n.to_be_bytes();
    if v6 {
        let prefix = match kind {
            Kind::Cluster => 0x10,
            Kind::Global => 0x242,
            Kind::Node => 0x192,
            Kind::Other => 0x172,
        };
        IpAddr::V6(Ipv6Addr::new(0xfd00, prefix, 0, 0, 0, 0, 0, n))
    } else {
        let (a, b) = match kind {
            Kind::Cluster => (10, 96),
            Kind::Global => (242, 1),
            Kind::Node => (192, 168),
            Kind::Other => (172, 16),
        };
        IpAddr::V4(Ipv4Addr::new(a, b, hi, lo))
    }
}

fn export_status(choice: u8) -> Option<ExportStatus> {
    let condition = |type_: &str, status: &str, reason: &str| ExportCondition {
        type_: type_.into(),
        status: status.into(),
        reason: reason.into(),
        message: String::new(),
    };
    match choice {
        0 => None,
        1 => Some(ExportStatus::default()),
        2 => Some(ExportStatus {
            conditions: vec![condition("Valid", "False", "NoService")],
        }),
        3 => Some(ExportStatus {
            conditions: vec![
                condition("Valid", "True", "Valid"),
                condition("Ready", "True", "Exported"),
            ],
        }),
        _ => Some(ExportStatus {
            conditions: vec![
                condition("Valid", "True", "Valid"),
                condition("Conflict", "True", "PortConflict"),
            ],
        }),
    }
}

#[derive(Debug, Clone)]
struct MonGen {
    index: u32,
    cluster: Option<u16>,
    node: Option<u16>,
    /// 0 not running, 1 on its cluster IP, 2 on its global IP, 3 elsewhere.
    advertised: u8,
    msgr2_port: bool,
    out_of_quorum: bool,
    global: Option<u16>,
    export: u8,
    v6: bool,
}

#[derive(Debug, Clone)]
struct OsdGen {
    id: u32,
    /// 0 pod IP, 1 its global IP, 2 elsewhere.
    advertised: u8,
    global: Option<u16>,
    export: u8,
    class: u8,
    v6: bool,
}

#[derive(Debug, Clone)]
struct SettingsGen {
    mcs: bool,
    msgr2: bool,
    family: IpFamily,
    unique_names: bool,
    host_network: bool,
}

fn settings_gen() -> impl Strategy<Value = SettingsGen> {
    (
        any::<bool>(),
        any::<bool>(),
        prop_oneof![
            Just(IpFamily::IPv4),
            Just(IpFamily::IPv6),
            Just(IpFamily::DualStack)
        ],
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(
            |(mcs, msgr2, family, unique_names, host_network)| SettingsGen {
                mcs,
                msgr2,
                family,
                unique_names,
                host_network: host_network && !mcs,
            },
        )
}

fn v6_for(family: IpFamily) -> BoxedStrategy<bool> {
    match family {
        IpFamily::IPv4 => Just(false).boxed(),
        IpFamily::IPv6 => Just(true).boxed(),
        IpFamily::DualStack => any::<bool>().boxed(),
    }
}

fn mon_gen(index: u32, family: IpFamily) -> impl Strategy<Value = MonGen> {
    (
        proptest::option::weighted(0.8, 1u16..500),
        proptest::option::weighted(0.7, 1u16..500),
        0u8..4,
        any::<bool>(),
        proptest::bool::weighted(0.2),
        proptest::option::weighted(0.6, 1u16..500),
        0u8..5,
        v6_for(family),
    )
        .prop_map(
            move |(cluster, node, advertised, msgr2_port, out_of_quorum, global, export, v6)| {
                MonGen {
                    index,
                    cluster,
                    node,
                    advertised,
                    msgr2_port,
                    out_of_quorum,
                    global,
                    export,
                    v6,
                }
            },
        )
}

fn osd_gen(id: u32, family: IpFamily) -> impl Strategy<Value = OsdGen> {
    (
        0u8..3,
        proptest::option::weighted(0.6, 1u16..5000),
        0u8..5,
        0u8..3,
        v6_for(family),
    )
        .prop_map(move |(advertised, global, export, class, v6)| OsdGen {
            id,
            advertised,
            global,
            export,
            class,
            v6,
        })
}

fn build(
    settings: &SettingsGen,
    mons: &[MonGen],
    osds: &[OsdGen],
    max_mon_id: Option<u32>,
) -> PlanInput {
    let mut cluster = ClusterSettings::new("my-cluster", "rook-ceph");
    cluster.require_msgr2 = settings.msgr2;
    cluster.ip_family = settings.family;
    cluster.host_network = settings.host_network;
    cluster.uid = Some("u-1".into());
    if settings.mcs {
        cluster.multi_cluster_service.enabled = true;
        cluster.multi_cluster_service.cluster_id = "east".into();
        cluster.ceph_version = Some(CephVersion::new(18, 2, 4));
        if settings.unique_names {
            cluster.dns_name_form = DnsNameForm::UniqueServiceName;
        }
    }
    let mut inventory = Inventory {
        max_mon_id,
        ..Inventory::default()
    };
    for m in mons {
        let id = MonId::from_index(m.index);
        let mut mon = MonInput::new(id.clone());
        mon.cluster_ip = m.cluster.map(|n| make_ip(Kind::Cluster, n, m.v6));
        let node = if settings.host_network {
            Some(m.node.unwrap_or(1))
        } else {
            m.node
        };
        mon.node = node.map(|n| NodeInfo {
            name: format!("node-{n}"),
            hostname: String::new(),
            address: Some(make_ip(Kind::Node, n, m.v6)),
        });
        mon.zone = (m.index % 3 == 0).then(|| format!("zone-{}", m.index % 2));
        let global = m.global.map(|n| make_ip(Kind::Global, n, m.v6));
        if let Some(ip) = global {
            inventory.global_ips.insert(Daemon::Mon(id.clone()), ip);
        }
        let advertised_ip = match m.advertised {
            1 => mon.cluster_ip,
            2 => global.or_else(|| Some(make_ip(Kind::Other, 7, m.v6))),
            3 => Some(make_ip(
                Kind::Other,
                u16::try_from(m.index).unwrap() + 1,
                m.v6,
            )),
            _ => None,
        };
        let port = if m.msgr2_port { 3300 } else { 6789 };
        mon.advertised = advertised_ip.map(|ip| SocketAddr::new(ip, port));
        mon.out_of_quorum = m.out_of_quorum && mon.advertised.is_some();
        if let Some(status) = export_status(m.export) {
            inventory.exports.insert(Daemon::Mon(id), status);
        }
        inventory.mons.push(mon);
    }
    for o in osds {
        let mut osd = OsdInput::new(o.id, format!("node-{}", o.id % 7));
        osd.device_class = ["", "hdd", "ssd"][usize::from(o.class)].into();
        osd.location = format!("root=default host=node-{}", o.id % 7);
        let global = o.global.map(|n| make_ip(Kind::Global, 1000 + n, o.v6));
        if let Some(ip) = global {
            inventory.global_ips.insert(Daemon::Osd(o.id), ip);
        }
        osd.advertised = match o.advertised {
            1 => global,
            2 => Some(make_ip(
                Kind::Other,
                3000 + u16::try_from(o.id).unwrap(),
                o.v6,
            )),
            _ => None,
        };
        if let Some(status) = export_status(o.export) {
            inventory.exports.insert(Daemon::Osd(o.id), status);
        }
        inventory.osds.push(osd);
    }
    PlanInput { cluster, inventory }
}

/// A valid input, plus shuffled copies of its mon and OSD lists.
fn scenario() -> impl Strategy<Value = (PlanInput, Vec<MonInput>, Vec<OsdInput>)> {
    settings_gen()
        .prop_flat_map(|settings| {
            let family = settings.family;
            let mons = prop::collection::btree_set(0u32..40, 0..6).prop_flat_map(move |ids| {
                ids.into_iter()
                    .map(|i| mon_gen(i, family))
                    .collect::<Vec<_>>()
            });
            let osds = prop::collection::btree_set(0u32..300, 0..25).prop_flat_map(move |ids| {
                ids.into_iter()
                    .map(|i| osd_gen(i, family))
                    .collect::<Vec<_>>()
            });
            let max_mon_id = proptest::option::of(0u32..60);
            (Just(settings), mons, osds, max_mon_id)
        })
        .prop_map(|(settings, mons, osds, max)| build(&settings, &mons, &osds, max))
        .prop_flat_map(|input| {
            let mons = Just(input.inventory.mons.clone()).prop_shuffle();
            let osds = Just(input.inventory.osds.clone()).prop_shuffle();
            (Just(input), mons, osds)
        })
}

/// What an operator does with a plan: start new mons and update OSD Deployments with the
/// planned arguments, and store `maxMonId`. Replacing mons is mon-failover's job, not a write.
fn apply(plan: &Plan) -> PlanInput {
    let mut input = plan.to_input();
    input.inventory.max_mon_id = plan.max_mon_id();
    for mon in &mut input.inventory.mons {
        let planned = plan.mon(&mon.id).unwrap();
        if planned.status() == DaemonStatus::Start {
            let args = plan.daemon_args(&Daemon::Mon(mon.id.clone())).unwrap();
            mon.advertised = Some(SocketAddr::new(args.public_addr, planned.port()));
        }
    }
    for osd in &mut input.inventory.osds {
        if let DaemonStatus::UpdateArgs { .. } = plan.osd(osd.id).unwrap().status() {
            osd.advertised = plan
                .daemon_args(&Daemon::Osd(osd.id))
                .map(|a| a.public_addr);
        }
    }
    input
}

fn document_json(plan: &Plan) -> String {
    serde_json::to_string(&plan.document().unwrap()).unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn plans_are_deterministic_and_independent_of_input_order(
        (input, shuffled_mons, shuffled_osds) in scenario()
    ) {
        let plan = Plan::new(input.clone()).unwrap();
        let again = Plan::new(input.clone()).unwrap();
        prop_assert_eq!(&plan, &again);
        prop_assert_eq!(document_json(&plan), document_json(&again));

        let mut shuffled = input;
        shuffled.inventory.mons = shuffled_mons;
        shuffled.inventory.osds = shuffled_osds;
        let reordered = Plan::new(shuffled).unwrap();
        prop_assert_eq!(&plan, &reordered);
        prop_assert_eq!(document_json(&plan), document_json(&reordered));
    }

    #[test]
    fn applying_a_plan_then_replanning_changes_nothing((input, _, _) in scenario()) {
        let plan = Plan::new(input).unwrap();
        let applied = apply(&plan);
        let replan = Plan::new(applied.clone()).unwrap();
        for (daemon, _, status) in replan.daemons() {
            prop_assert!(
                !matches!(status, DaemonStatus::Start | DaemonStatus::UpdateArgs { .. }),
                "{} still needs {:?} after the plan was applied", daemon, status
            );
        }
        prop_assert_eq!(replan.services(), plan.services());
        prop_assert_eq!(replan.service_manifests(), plan.service_manifests());
        prop_assert_eq!(replan.service_exports(), plan.service_exports());
        prop_assert_eq!(replan.lookups().unwrap(), plan.lookups().unwrap());
        prop_assert_eq!(replan.mon_endpoints(), plan.mon_endpoints());
        prop_assert_eq!(replan.mon_host_config(), plan.mon_host_config());
        prop_assert_eq!(replan.peer_token_mon_host(), plan.peer_token_mon_host());
        prop_assert_eq!(replan.mon_replacements(), plan.mon_replacements());
        prop_assert_eq!(replan.next_mon_id(), plan.next_mon_id());
        let addresses = |p: &Plan| p.daemons().map(|(d, a, _)| (d, a)).collect::<Vec<_>>();
        prop_assert_eq!(addresses(&replan), addresses(&plan));
        // A fixed point: applying the re-plan writes nothing new.
        prop_assert_eq!(apply(&replan), applied);
    }

    #[test]
    fn every_daemon_gets_exactly_one_address((input, _, _) in scenario()) {
        let mut expected: Vec<Daemon> = input.inventory.mons.iter().map(|m| Daemon::Mon(m.id.clone()))
            .chain(input.inventory.osds.iter().map(|o| Daemon::Osd(o.id)))
            .collect();
        expected.sort();
        let plan = Plan::new(input).unwrap();
        let listed: Vec<Daemon> = plan.daemons().map(|(d, _, _)| d).collect();
        prop_assert_eq!(&listed, &expected);

        let data = plan.mon_endpoints().data.clone();
        let entries: Vec<(&str, &str)> = if data.is_empty() {
            Vec::new()
        } else {
            data.split(',').map(|e| e.split_once('=').unwrap()).collect()
        };
        let names: BTreeSet<&str> = entries.iter().map(|(n, _)| *n).collect();
        prop_assert_eq!(names.len(), entries.len(), "a mon is listed twice in {}", data);

        let lookups: Vec<Daemon> = plan.lookups().unwrap().into_iter().map(|l| l.daemon).collect();
        for (daemon, address, _) in plan.daemons() {
            if let Some(args) = plan.daemon_args(&daemon) {
                let rendered = args.to_args();
                let public: Vec<&String> = rendered.iter().filter(|a| a.starts_with("--public-addr=")).collect();
                prop_assert_eq!(public.len(), 1);
                prop_assert_eq!(Some(args.public_addr), address.ip());
            }
            let waits_for_name = address == ceph_address_plan::Address::Waiting(WaitFor::GlobalIp);
            prop_assert_eq!(lookups.iter().filter(|d| **d == daemon).count(), usize::from(waits_for_name));
            if let Daemon::Mon(id) = &daemon {
                let mon = plan.mon(id).unwrap();
                let listed: Vec<String> = entries
                    .iter()
                    .filter(|(n, _)| *n == id.as_str())
                    .map(|(_, e)| (*e).to_owned())
                    .collect();
                let planned: Vec<String> = mon.endpoint().map(|e| e.to_string()).into_iter().collect();
                prop_assert_eq!(listed, planned);
            }
        }
    }

    #[test]
    fn incremental_replans_equal_full_plans(
        (input, _, _) in scenario(),
        ops in prop::collection::vec((0u8..5, 0u32..320, proptest::option::of(1u16..5000), 0u8..5, 0u8..3), 1..12),
    ) {
        let mut plan = Plan::new(input).unwrap();
        let v6 = plan.settings().ip_family == IpFamily::IPv6;
        for (op, id, global, export, class) in ops {
            let change = match op {
                0 => {
                    let mut osd = OsdInput::new(id, format!("node-{}", id % 7));
                    osd.device_class = ["", "hdd", "ssd"][usize::from(class)].into();
                    osd.advertised = global.map(|n| make_ip(Kind::Global, n, v6));
                    plan.upsert_osd(osd).unwrap()
                }
                1 => plan.remove_osd(id),
                2 => plan
                    .set_global_ip(&Daemon::Osd(id), global.map(|n| make_ip(Kind::Global, n, v6)))
                    .unwrap(),
                3 => plan.set_export_status(&Daemon::Osd(id), export_status(export)),
                _ => match plan.mons().get(id as usize % plan.mons().len().max(1)) {
                    Some(mon) => {
                        let daemon = Daemon::Mon(mon.id().clone());
                        plan.set_global_ip(&daemon, global.map(|n| make_ip(Kind::Global, n, v6))).unwrap()
                    }
                    None => ceph_address_plan::Change::Unchanged,
                },
            };
            let full = Plan::new(plan.to_input()).unwrap();
            prop_assert_eq!(&plan, &full, "after op {} on {} ({:?})", op, id, change);
        }
    }
}

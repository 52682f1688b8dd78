//! Property tests: clusterset names round-trip between builder, text, wire and parser; a zone fed
//! one change at a time equals the zone built from the final objects; the precomputed wire
//! answers say exactly what the records model says; and the response code the server counts is
//! the one the client reads.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

mod common;

use std::collections::BTreeMap;

use clusterset_dns::wire::{Transport, answer, respond, wire_name};
use clusterset_dns::{Rcode, ServiceKey, SliceKey, ZoneChange, ZoneConfig, ZoneObject, ZoneStore};
use common::{coredns_fixture, import, slice, store_with};
use hickory_proto::op::{Message, Query};
use hickory_proto::rr::{Name, RecordType};
use mcs_types::names::{ClustersetName, NameForm, SrvProtocol, Zone};
use proptest::prelude::*;

fn label() -> impl Strategy<Value = String> {
    "[a-z0-9]([a-z0-9-]{0,20}[a-z0-9])?"
}

fn service_label() -> impl Strategy<Value = String> {
    "[a-z]([a-z0-9-]{0,20}[a-z0-9])?"
}

fn protocol() -> impl Strategy<Value = SrvProtocol> {
    prop_oneof![
        Just(SrvProtocol::Tcp),
        Just(SrvProtocol::Udp),
        Just(SrvProtocol::Sctp)
    ]
}

fn zone() -> impl Strategy<Value = Zone> {
    prop_oneof![
        Just(Zone::default()),
        (label(), label()).prop_map(|(a, b)| Zone::new(&format!("{a}.{b}")).unwrap()),
    ]
}

proptest! {
    #[test]
    fn names_round_trip_through_text_and_wire(
        zone in zone(),
        ns in label(),
        svc in service_label(),
        extra in label(),
        cluster in label(),
        proto in protocol(),
        form in 0..4u8,
        upper in any::<bool>(),
    ) {
        let base = ClustersetName::service(&ns, &svc).unwrap().in_zone(zone.clone()).unwrap();
        let built = match form {
            0 => Ok(base),
            1 => base.srv(&extra, proto),
            2 => base.endpoint(&extra, &cluster),
            _ => base.cluster_service(&cluster),
        };
        // Only over-long names may fail to build.
        let Ok(name) = built else { return Ok(()); };
        let text = if upper { name.to_fqdn().to_ascii_uppercase() } else { name.to_fqdn() };
        prop_assert_eq!(&ClustersetName::parse(&text, &zone).unwrap(), &name);
        // The wire form the server keys on is what hickory encodes for the same name.
        let hickory = Name::from_ascii(name.to_fqdn()).unwrap();
        let mut encoded = Vec::new();
        {
            use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};
            let mut encoder = BinEncoder::new(&mut encoded);
            hickory.emit(&mut encoder).unwrap();
        }
        prop_assert_eq!(wire_name(&name.to_string()), encoded);
        let is_service = matches!(name.form(), NameForm::Service);
        prop_assert_eq!(name.service_name() == name, is_service);
    }
}

/// A small universe of objects, so that random changes collide.
#[derive(Debug, Clone)]
enum Op {
    Import {
        svc: usize,
        headless: bool,
        ip: u8,
        v6: bool,
        port: u16,
        named: bool,
    },
    DeleteImport {
        svc: usize,
    },
    Slice {
        slice: usize,
        svc: usize,
        cluster: usize,
        addresses: Vec<(u8, bool, Option<usize>)>,
        port: u16,
    },
    DeleteSlice {
        slice: usize,
    },
}

const SERVICES: [&str; 3] = ["alpha", "beta", "gamma"];
const CLUSTERS: [&str; 2] = ["east", "west"];
const HOSTS: [&str; 2] = ["db-0", "db-1"];

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        (
            0..3usize,
            any::<bool>(),
            1..6u8,
            any::<bool>(),
            1..4u16,
            any::<bool>()
        )
            .prop_map(|(svc, headless, ip, v6, port, named)| Op::Import {
                svc,
                headless,
                ip,
                v6,
                port,
                named
            }),
        (0..3usize).prop_map(|svc| Op::DeleteImport { svc }),
        (
            0..4usize,
            0..3usize,
            0..2usize,
            proptest::collection::vec(
                (1..8u8, any::<bool>(), proptest::option::of(0..2usize)),
                0..4
            ),
            1..4u16,
        )
            .prop_map(|(slice, svc, cluster, addresses, port)| Op::Slice {
                slice,
                svc,
                cluster,
                addresses,
                port
            }),
        (0..4usize).prop_map(|slice| Op::DeleteSlice { slice }),
    ]
}

fn object_of(op: &Op) -> Option<(String, ZoneObject)> {
    match op {
        Op::Import {
            svc,
            headless,
            ip,
            v6,
            port,
            named,
        } => {
            let ip = if *v6 {
                format!("fd00::{ip}")
            } else {
                format!("242.0.0.{ip}")
            };
            let ips: Vec<&str> = if *headless { vec![] } else { vec![ip.as_str()] };
            let name = if *named { "tcp" } else { "" };
            let i = import(
                "shop",
                SERVICES[*svc],
                if *headless {
                    "Headless"
                } else {
                    "ClusterSetIP"
                },
                &ips,
                &[(name, "TCP", i32::from(*port))],
            );
            Some((
                format!("import/{svc}"),
                ZoneObject::ServiceImport(Box::new(i)),
            ))
        }
        Op::Slice {
            slice: n,
            svc,
            cluster,
            addresses,
            port,
        } => {
            let ips: Vec<String> = addresses
                .iter()
                .map(|(last, _, _)| format!("10.1.0.{last}"))
                .collect();
            let eps: Vec<(Vec<&str>, Option<&str>, Option<bool>)> = addresses
                .iter()
                .zip(&ips)
                .map(|((_, ready, host), ip)| {
                    (vec![ip.as_str()], host.map(|h| HOSTS[h]), Some(*ready))
                })
                .collect();
            let eps: Vec<common::Ep<'_>> =
                eps.iter().map(|(a, h, r)| (a.as_slice(), *h, *r)).collect();
            let s = slice(
                "shop",
                &format!("s{n}"),
                SERVICES[*svc],
                CLUSTERS[*cluster],
                "IPv4",
                &[("tcp", "TCP", i32::from(*port))],
                &eps,
            );
            Some((format!("slice/{n}"), ZoneObject::EndpointSlice(Box::new(s))))
        }
        _ => None,
    }
}

/// Every name the universe can produce, plus some that it never does.
fn candidate_names() -> Vec<String> {
    let mut names = vec![
        "clusterset.local".to_owned(),
        "shop.svc.clusterset.local".to_owned(),
    ];
    for svc in SERVICES {
        let base = format!("{svc}.shop.svc.clusterset.local");
        names.push(base.clone());
        names.push(format!("_tcp._tcp.{base}"));
        for cluster in CLUSTERS {
            names.push(format!("{cluster}.{base}"));
            for host in HOSTS {
                names.push(format!("{host}.{cluster}.{base}"));
            }
            for last in 1..8 {
                names.push(format!("10-1-0-{last}.{cluster}.{base}"));
            }
        }
    }
    for last in 1..8 {
        names.push(format!("{last}.0.1.10.in-addr.arpa"));
    }
    for last in 1..6 {
        names.push(format!("{last}.0.0.242.in-addr.arpa"));
    }
    names
}

const TYPES: [RecordType; 7] = [
    RecordType::A,
    RecordType::AAAA,
    RecordType::SRV,
    RecordType::PTR,
    RecordType::TXT,
    RecordType::NS,
    RecordType::MX,
];

fn lowercase_records(records: &[hickory_proto::rr::Record]) -> Vec<String> {
    let mut v: Vec<String> = records
        .iter()
        .map(|r| r.to_string().to_ascii_lowercase())
        .collect();
    v.sort();
    v
}

/// Every candidate name and type: the wire answer from the store's snapshot says exactly what
/// its records model says.
fn assert_wire_matches_model(store: &ZoneStore) -> Result<(), TestCaseError> {
    let snapshot = store.snapshot();
    let mut out = Vec::new();
    for name in candidate_names() {
        for qtype in TYPES {
            let model = store.answer(&name, qtype);
            let mut query = Message::query();
            query.add_query(Query::query(
                Name::from_ascii(format!("{name}.")).unwrap(),
                qtype,
            ));
            prop_assert!(respond(
                &snapshot,
                &query.to_vec().unwrap(),
                Transport::Tcp,
                &mut out
            ));
            let wire = Message::from_vec(&out).unwrap();
            prop_assert_eq!(
                wire.metadata.response_code,
                model.response_code,
                "{} {}",
                name,
                qtype
            );
            prop_assert_eq!(
                lowercase_records(&wire.answers),
                lowercase_records(&model.answers),
                "{} {}",
                name,
                qtype
            );
            prop_assert_eq!(
                lowercase_records(&wire.additionals),
                lowercase_records(&model.additionals),
                "{} {}",
                name,
                qtype
            );
            prop_assert_eq!(
                lowercase_records(&wire.authorities),
                lowercase_records(&model.authorities),
                "{} {}",
                name,
                qtype
            );
        }
    }
    Ok(())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]
    #[test]
    fn incremental_updates_equal_a_rebuild_and_the_wire_equals_the_model(
        ops in proptest::collection::vec(op(), 1..20),
        lighthouse in any::<bool>(),
    ) {
        let config = ZoneConfig { lighthouse_cluster_names: lighthouse, ..ZoneConfig::default() };
        let incremental = ZoneStore::new(config.clone());
        incremental.mark_synced();
        let mut live: BTreeMap<String, ZoneObject> = BTreeMap::new();
        for op in &ops {
            let change = match op {
                Op::DeleteImport { svc } => {
                    live.remove(&format!("import/{svc}"));
                    ZoneChange::DeleteServiceImport(ServiceKey::new("shop", SERVICES[*svc]))
                }
                Op::DeleteSlice { slice } => {
                    live.remove(&format!("slice/{slice}"));
                    ZoneChange::DeleteEndpointSlice(SliceKey::new("shop", &format!("s{slice}")))
                }
                other => {
                    let (key, object) = object_of(other).unwrap();
                    live.insert(key, object.clone());
                    ZoneChange::Upsert(object)
                }
            };
            let report = incremental.apply([change]);
            prop_assert!(report.rejected.is_empty(), "{:?}", report.rejected);
            // After every change, not only at the end: a stale answer must not hide behind a
            // later change that happens to refresh it.
            assert_wire_matches_model(&incremental)?;
        }
        let rebuilt = ZoneStore::new(config);
        rebuilt.replace_all(live.into_values().collect()).unwrap();
        for name in candidate_names() {
            for qtype in TYPES {
                let a = incremental.answer(&name, qtype);
                let b = rebuilt.answer(&name, qtype);
                prop_assert_eq!(a.response_code, b.response_code, "{} {}", name, qtype);
                prop_assert_eq!(lowercase_records(&a.answers), lowercase_records(&b.answers), "{} {}", name, qtype);
                prop_assert_eq!(lowercase_records(&a.additionals), lowercase_records(&b.additionals), "{} {}", name, qtype);
            }
        }
    }
}

/// The code a client reads from an answer (header and extended bits), as the server counts it.
fn client_code(answer: &[u8]) -> Rcode {
    let message = Message::from_vec(answer).unwrap();
    match u16::from(message.metadata.response_code) {
        code @ 0..=5 => Rcode::from_header(u8::try_from(code).unwrap()),
        _ => Rcode::Other,
    }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]
    #[test]
    fn the_counted_code_is_the_code_the_client_reads(
        name in prop::sample::select(vec![
            "svc1.testns.svc.clusterset.local.",
            "hdls1.testns.svc.clusterset.local.",
            "_http._tcp.hdls1.testns.svc.clusterset.local.",
            "nope.testns.svc.clusterset.local.",
            "clusterset.local.",
            "5.0.0.10.in-addr.arpa.",
            "example.com.",
        ]),
        qtype in prop::sample::select(vec![
            RecordType::A, RecordType::AAAA, RecordType::SRV, RecordType::TXT,
            RecordType::ANY, RecordType::AXFR, RecordType::IXFR,
        ]),
        edns in prop::option::of((0u8..3, 0u16..2000)),
        flip in prop::option::of((0usize..64, any::<u8>())),
        cut in prop::option::of(0usize..64),
        synced in any::<bool>(),
        udp in any::<bool>(),
    ) {
        let store = if synced {
            store_with(ZoneConfig::default(), coredns_fixture())
        } else {
            ZoneStore::new(ZoneConfig::default())
        };
        let mut query = Message::query();
        query.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
        if let Some((version, payload)) = edns {
            let mut e = hickory_proto::op::Edns::new();
            e.set_version(version);
            e.set_max_payload(payload);
            query.set_edns(e);
        }
        let mut bytes = query.to_vec().unwrap();
        if let Some((at, xor)) = flip {
            let at = at % bytes.len();
            bytes[at] ^= xor;
        }
        if let Some(len) = cut {
            bytes.truncate(len);
        }
        let transport = if udp { Transport::Udp } else { Transport::Tcp };
        let mut out = Vec::new();
        let counted = answer(&store.snapshot(), &bytes, transport, &mut out);
        let mut again = Vec::new();
        prop_assert_eq!(counted.is_some(), respond(&store.snapshot(), &bytes, transport, &mut again));
        prop_assert_eq!(&out, &again);
        if let Some(code) = counted {
            prop_assert_eq!(code, client_code(&out));
        }
    }
}

/// The PTR targets and the existence of `shop.svc.<zone>` that the live objects imply, worked
/// out from the operations alone (not from the zone).
#[derive(Debug, Default)]
struct Expected {
    /// service -> clusterset IP (ClusterSetIP imports only) or `None` (headless).
    imports: BTreeMap<usize, Option<String>>,
    /// slice -> (service, cluster, ready (ip, hostname) pairs).
    slices: BTreeMap<usize, ExpectedSlice>,
}

/// (service, cluster, ready (ip, hostname) pairs) of a slice.
type ExpectedSlice = (usize, usize, Vec<(String, String)>);

impl Expected {
    fn apply(&mut self, op: &Op) {
        match op {
            Op::Import {
                svc,
                headless,
                ip,
                v6,
                ..
            } => {
                let ip = if *v6 {
                    format!("fd00::{ip}")
                } else {
                    format!("242.0.0.{ip}")
                };
                self.imports.insert(*svc, (!headless).then_some(ip));
            }
            Op::DeleteImport { svc } => {
                self.imports.remove(svc);
            }
            Op::Slice {
                slice,
                svc,
                cluster,
                addresses,
                ..
            } => {
                let ready = addresses
                    .iter()
                    .filter(|(_, ready, _)| *ready)
                    .map(|(last, _, host)| {
                        let ip = format!("10.1.0.{last}");
                        let host =
                            host.map_or_else(|| format!("10-1-0-{last}"), |h| HOSTS[h].to_owned());
                        (ip, host)
                    })
                    .collect();
                self.slices.insert(*slice, (*svc, *cluster, ready));
            }
            Op::DeleteSlice { slice } => {
                self.slices.remove(slice);
            }
        }
    }

    /// The PTR targets (with the trailing dot) of `ip`.
    fn ptr(&self, ip: &str) -> Vec<String> {
        let mut targets = std::collections::BTreeSet::new();
        for (svc, clusterset_ip) in &self.imports {
            if clusterset_ip.as_deref() == Some(ip) {
                targets.insert(format!("{}.shop.svc.clusterset.local.", SERVICES[*svc]));
            }
        }
        for (svc, cluster, ready) in self.slices.values() {
            if !self.imports.contains_key(svc) {
                continue;
            }
            for (address, host) in ready {
                if address == ip {
                    targets.insert(format!(
                        "{host}.{}.{}.shop.svc.clusterset.local.",
                        CLUSTERS[*cluster], SERVICES[*svc]
                    ));
                }
            }
        }
        targets.into_iter().collect()
    }
}

fn reverse_of(ip: &str) -> String {
    let ip: std::net::IpAddr = ip.parse().unwrap();
    match ip {
        std::net::IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            format!("{d}.{c}.{b}.{a}.in-addr.arpa.")
        }
        std::net::IpAddr::V6(v6) => {
            let mut name = String::new();
            for byte in v6.octets().iter().rev() {
                name.push_str(&format!("{:x}.{:x}.", byte & 0xf, byte >> 4));
            }
            name + "ip6.arpa."
        }
    }
}

/// Asks the snapshot over the wire: (response code, answer rdata).
fn ask(
    store: &ZoneStore,
    name: &str,
    qtype: RecordType,
) -> (hickory_proto::op::ResponseCode, Vec<String>) {
    let mut query = Message::query();
    query.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    let mut out = Vec::new();
    assert!(respond(
        &store.snapshot(),
        &query.to_vec().unwrap(),
        Transport::Udp,
        &mut out
    ));
    let message = Message::from_vec(&out).unwrap();
    let mut data: Vec<String> = message.answers.iter().map(|r| r.data.to_string()).collect();
    data.sort();
    (message.metadata.response_code, data)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(128))]
    /// After every change, the namespace name and every PTR name exist exactly while the live
    /// objects say so, with exactly the targets they imply, on the wire and in the model; and a
    /// batch of all the changes at once ends in the same answers.
    #[test]
    fn namespace_and_ptr_names_appear_and_disappear_with_the_objects(
        ops in proptest::collection::vec(op(), 1..24),
    ) {
        use hickory_proto::op::ResponseCode;
        let store = ZoneStore::new(ZoneConfig::default());
        store.mark_synced();
        let batch = ZoneStore::new(ZoneConfig::default());
        batch.mark_synced();
        let mut changes = Vec::new();
        let mut expected = Expected::default();
        let addresses: Vec<String> = (1..8)
            .map(|i| format!("10.1.0.{i}"))
            .chain((1..6).map(|i| format!("242.0.0.{i}")))
            .chain((1..6).map(|i| format!("fd00::{i}")))
            .collect();
        for op in &ops {
            let change = match op {
                Op::DeleteImport { svc } => {
                    ZoneChange::DeleteServiceImport(ServiceKey::new("shop", SERVICES[*svc]))
                }
                Op::DeleteSlice { slice } => {
                    ZoneChange::DeleteEndpointSlice(SliceKey::new("shop", &format!("s{slice}")))
                }
                other => ZoneChange::Upsert(object_of(other).unwrap().1),
            };
            changes.push(change.clone());
            store.apply([change]);
            expected.apply(op);

            let namespace = ask(&store, "shop.svc.clusterset.local.", RecordType::A);
            let want = if expected.imports.is_empty() { ResponseCode::NXDomain } else { ResponseCode::NoError };
            prop_assert_eq!(namespace, (want, vec![]));
            for ip in &addresses {
                let name = reverse_of(ip);
                let targets = expected.ptr(ip);
                let want = if targets.is_empty() { ResponseCode::Refused } else { ResponseCode::NoError };
                prop_assert_eq!(ask(&store, &name, RecordType::PTR), (want, targets.clone()), "{}", name);
                let model = store.answer(&name, RecordType::PTR);
                let mut model_targets: Vec<String> = model.answers.iter().map(|r| r.data.to_string()).collect();
                model_targets.sort();
                prop_assert_eq!((model.response_code, model_targets), (want, targets), "{}", name);
            }
        }
        batch.apply(changes);
        for ip in &addresses {
            let name = reverse_of(ip);
            prop_assert_eq!(ask(&batch, &name, RecordType::PTR), ask(&store, &name, RecordType::PTR));
        }
        prop_assert_eq!(
            ask(&batch, "shop.svc.clusterset.local.", RecordType::A),
            ask(&store, "shop.svc.clusterset.local.", RecordType::A)
        );
    }
}

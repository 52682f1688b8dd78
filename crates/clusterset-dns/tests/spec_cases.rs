//! Table tests of the zone against the MCS DNS specification (KEP-1645 `specification.md`) and
//! the cases of CoreDNS's multicluster handler tests (`multicluster_handler_test.go` and the
//! in-tree `handler_test.go`), each asked twice: of the records model, and over the wire through
//! the precomputed hot path (the answer parsed back with hickory must be the same).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

mod common;

use std::collections::BTreeSet;

use clusterset_dns::wire::{Transport, respond};
use clusterset_dns::{ZoneConfig, ZoneStore};
use common::{coredns_fixture, store_with};
use hickory_proto::op::{Edns, Message, Query, ResponseCode};
use hickory_proto::rr::{Name, Record, RecordType};

const Z: &str = "svc.clusterset.local.";

/// What a case expects.
struct Case {
    qname: String,
    qtype: RecordType,
    rcode: ResponseCode,
    answers: &'static [&'static str],
    additionals: &'static [&'static str],
    /// Negative answers carry the SOA in the authority section.
    soa: bool,
}

fn case(
    qname: &str,
    qtype: RecordType,
    rcode: ResponseCode,
    answers: &'static [&'static str],
    additionals: &'static [&'static str],
    soa: bool,
) -> Case {
    Case {
        qname: qname.to_owned(),
        qtype,
        rcode,
        answers,
        additionals,
        soa,
    }
}

fn ok(qname: &str, qtype: RecordType, answers: &'static [&'static str]) -> Case {
    case(qname, qtype, ResponseCode::NoError, answers, &[], false)
}

fn nodata(qname: &str, qtype: RecordType) -> Case {
    case(qname, qtype, ResponseCode::NoError, &[], &[], true)
}

fn nxdomain(qname: &str, qtype: RecordType) -> Case {
    case(qname, qtype, ResponseCode::NXDomain, &[], &[], true)
}

/// Records in presentation form, lower-cased: over the wire, owner names point at the client's
/// question, so they keep the client's case (0x20-safe), which DNS compares case-insensitively.
fn strings(records: &[Record]) -> BTreeSet<String> {
    records
        .iter()
        .map(|r| r.to_string().to_ascii_lowercase())
        .collect()
}

fn expected(list: &[&str]) -> BTreeSet<String> {
    list.iter().map(|s| s.to_ascii_lowercase()).collect()
}

fn over_the_wire(
    store: &ZoneStore,
    qname: &str,
    qtype: RecordType,
    transport: Transport,
) -> Message {
    let mut query = Message::query();
    query.add_query(Query::query(Name::from_ascii(qname).unwrap(), qtype));
    query.metadata.recursion_desired = true;
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    query.set_edns(edns);
    let mut out = Vec::new();
    assert!(respond(
        &store.snapshot(),
        &query.to_vec().unwrap(),
        transport,
        &mut out
    ));
    let response = Message::from_vec(&out).unwrap();
    assert_eq!(response.metadata.id, query.metadata.id);
    assert!(response.metadata.recursion_desired, "RD is copied");
    assert!(
        !response.metadata.recursion_available,
        "no recursion offered"
    );
    assert!(response.edns.is_some(), "EDNS answered with EDNS");
    assert!(
        !response.metadata.truncation,
        "{qname} {qtype}: truncated ({} bytes)",
        out.len()
    );
    response
}

fn check(store: &ZoneStore, c: &Case) {
    let label = format!("{} {}", c.qname, c.qtype);
    let model = store.answer(&c.qname, c.qtype);
    assert_eq!(model.response_code, c.rcode, "{label}: rcode");
    assert_eq!(
        strings(&model.answers),
        expected(c.answers),
        "{label}: answers"
    );
    assert_eq!(
        strings(&model.additionals),
        expected(c.additionals),
        "{label}: additionals"
    );
    let soa_types: Vec<RecordType> = model.authorities.iter().map(Record::record_type).collect();
    assert_eq!(
        soa_types == [RecordType::SOA],
        c.soa,
        "{label}: SOA in authority"
    );

    for transport in [Transport::Udp, Transport::Tcp] {
        let wire = over_the_wire(store, &c.qname, c.qtype, transport);
        assert_eq!(wire.metadata.response_code, c.rcode, "{label} wire: rcode");
        assert!(wire.metadata.authoritative, "{label} wire: AA");
        assert_eq!(
            strings(&wire.answers),
            expected(c.answers),
            "{label} wire: answers"
        );
        assert_eq!(
            strings(&wire.additionals),
            expected(c.additionals),
            "{label} wire: additionals"
        );
        assert_eq!(
            strings(&wire.authorities),
            strings(&model.authorities),
            "{label} wire: authority"
        );
    }
}

fn coredns_store(lighthouse: bool) -> ZoneStore {
    let config = ZoneConfig {
        lighthouse_cluster_names: lighthouse,
        ..ZoneConfig::default()
    };
    store_with(config, coredns_fixture())
}

fn n(prefix: &str) -> String {
    format!("{prefix}.testns.{Z}")
}

#[test]
fn clustersetip_services_answer_their_clusterset_ips() {
    use RecordType::*;
    let store = coredns_store(false);
    let cases = [
        // A for a ClusterSetIP import.
        ok(
            &n("svc1"),
            A,
            &["svc1.testns.svc.clusterset.local. 5 IN A 10.0.0.5"],
        ),
        // A ClusterSetIP import without endpoints still answers its VIP.
        ok(
            &n("svcempty"),
            A,
            &["svcempty.testns.svc.clusterset.local. 5 IN A 10.0.0.8"],
        ),
        // AAAA on an IPv4-only service: NODATA with the SOA.
        nodata(&n("svc1"), AAAA),
        ok(
            &n("svc6"),
            AAAA,
            &["svc6.testns.svc.clusterset.local. 5 IN AAAA 1234:abcd::1"],
        ),
        nodata(&n("svc6"), A),
        // Dual stack: both families.
        ok(
            &n("svcdual"),
            A,
            &["svcdual.testns.svc.clusterset.local. 5 IN A 10.0.0.7"],
        ),
        ok(
            &n("svcdual"),
            AAAA,
            &["svcdual.testns.svc.clusterset.local. 5 IN AAAA 1234:abcd::7"],
        ),
        // An import that has ports but no clusterset IP yet exists, without addresses.
        nodata(&n("noips"), A),
        nxdomain(&format!("_http._tcp.{}", n("noips")), SRV),
        // Other types on an existing name: NODATA.
        nodata(&n("svc1"), TXT),
        nodata(&n("svc1"), MX),
        nodata(&n("svc1"), CNAME),
        // Case-insensitive.
        ok(
            "SVC1.TestNS.svc.ClusterSet.Local.",
            A,
            &["svc1.testns.svc.clusterset.local. 5 IN A 10.0.0.5"],
        ),
    ];
    for c in &cases {
        check(&store, c);
    }
}

#[test]
fn srv_records_follow_the_spec_and_coredns() {
    use RecordType::*;
    let store = coredns_store(false);
    let cases = [
        // Bare-name SRV: every port, target the service, glue in additional.
        case(
            &n("svc1"),
            SRV,
            ResponseCode::NoError,
            &[
                "svc1.testns.svc.clusterset.local. 5 IN SRV 0 100 80 svc1.testns.svc.clusterset.local.",
            ],
            &["svc1.testns.svc.clusterset.local. 5 IN A 10.0.0.5"],
            false,
        ),
        // IPv6 VIP: AAAA glue.
        case(
            &n("svc6"),
            SRV,
            ResponseCode::NoError,
            &[
                "svc6.testns.svc.clusterset.local. 5 IN SRV 0 100 80 svc6.testns.svc.clusterset.local.",
            ],
            &["svc6.testns.svc.clusterset.local. 5 IN AAAA 1234:abcd::1"],
            false,
        ),
        // Named port.
        case(
            &format!("_http._tcp.{}", n("svc1")),
            SRV,
            ResponseCode::NoError,
            &[
                "_http._tcp.svc1.testns.svc.clusterset.local. 5 IN SRV 0 100 80 svc1.testns.svc.clusterset.local.",
            ],
            &["svc1.testns.svc.clusterset.local. 5 IN A 10.0.0.5"],
            false,
        ),
        // Dual stack: one entry per IP before deduplication, so weight 50 (CoreDNS).
        case(
            &n("svcdual"),
            SRV,
            ResponseCode::NoError,
            &[
                "svcdual.testns.svc.clusterset.local. 5 IN SRV 0 50 80 svcdual.testns.svc.clusterset.local.",
            ],
            &[
                "svcdual.testns.svc.clusterset.local. 5 IN A 10.0.0.7",
                "svcdual.testns.svc.clusterset.local. 5 IN AAAA 1234:abcd::7",
            ],
            false,
        ),
        // tcp/42 and udp/42: exactly one bare SRV record (conformance test 18).
        case(
            &n("tcpudp"),
            SRV,
            ResponseCode::NoError,
            &[
                "tcpudp.testns.svc.clusterset.local. 5 IN SRV 0 50 42 tcpudp.testns.svc.clusterset.local.",
            ],
            &["tcpudp.testns.svc.clusterset.local. 5 IN A 10.0.0.9"],
            false,
        ),
        case(
            &format!("_udp._udp.{}", n("tcpudp")),
            SRV,
            ResponseCode::NoError,
            &[
                "_udp._udp.tcpudp.testns.svc.clusterset.local. 5 IN SRV 0 100 42 tcpudp.testns.svc.clusterset.local.",
            ],
            &["tcpudp.testns.svc.clusterset.local. 5 IN A 10.0.0.9"],
            false,
        ),
        // A port name with the wrong protocol, or no such port: NXDOMAIN.
        nxdomain(&format!("_http._udp.{}", n("svc1")), SRV),
        nxdomain(&format!("_nope._tcp.{}", n("svc1")), SRV),
        // The SRV name exists: A on it is NODATA.
        nodata(&format!("_http._tcp.{}", n("svc1")), A),
        // Headless: one record per ready endpoint (dedup by target and port), weight from the six
        // entries before dedup, A/AAAA glue.
        case(
            &format!("_http._tcp.{}", n("hdls1")),
            SRV,
            ResponseCode::NoError,
            &[
                "_http._tcp.hdls1.testns.svc.clusterset.local. 5 IN SRV 0 16 80 172-0-0-2.clusterid.hdls1.testns.svc.clusterset.local.",
                "_http._tcp.hdls1.testns.svc.clusterset.local. 5 IN SRV 0 16 80 ep3.clusterid.hdls1.testns.svc.clusterset.local.",
                "_http._tcp.hdls1.testns.svc.clusterset.local. 5 IN SRV 0 16 80 dup-name.clusterid.hdls1.testns.svc.clusterset.local.",
                "_http._tcp.hdls1.testns.svc.clusterset.local. 5 IN SRV 0 16 80 5678-abcd--1.clusterid.hdls1.testns.svc.clusterset.local.",
                "_http._tcp.hdls1.testns.svc.clusterset.local. 5 IN SRV 0 16 80 ep6.clusterid.hdls1.testns.svc.clusterset.local.",
            ],
            &[
                "172-0-0-2.clusterid.hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.2",
                "ep3.clusterid.hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.3",
                "dup-name.clusterid.hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.4",
                "dup-name.clusterid.hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.5",
                "5678-abcd--1.clusterid.hdls1.testns.svc.clusterset.local. 5 IN AAAA 5678:abcd::1",
                "ep6.clusterid.hdls1.testns.svc.clusterset.local. 5 IN AAAA 5678:abcd::2",
            ],
            false,
        ),
        // Headless without ports: addresses but no SRV.
        nodata(&n("hdlsportless"), SRV),
    ];
    for c in &cases {
        check(&store, c);
    }
}

#[test]
fn headless_services_answer_ready_endpoints_only() {
    use RecordType::*;
    let store = coredns_store(false);
    let cases = [
        ok(
            &n("hdls1"),
            A,
            &[
                "hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.2",
                "hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.3",
                "hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.4",
                "hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.5",
            ],
        ),
        ok(
            &n("hdls1"),
            AAAA,
            &[
                "hdls1.testns.svc.clusterset.local. 5 IN AAAA 5678:abcd::1",
                "hdls1.testns.svc.clusterset.local. 5 IN AAAA 5678:abcd::2",
            ],
        ),
        // Per-endpoint names: hostname, or the dashed IP.
        ok(
            &n("ep3.clusterid.hdls1"),
            A,
            &["ep3.clusterid.hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.3"],
        ),
        ok(
            &n("172-0-0-2.clusterid.hdls1"),
            A,
            &["172-0-0-2.clusterid.hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.2"],
        ),
        ok(
            &n("5678-abcd--1.clusterid.hdls1"),
            AAAA,
            &["5678-abcd--1.clusterid.hdls1.testns.svc.clusterset.local. 5 IN AAAA 5678:abcd::1"],
        ),
        nodata(&n("5678-abcd--1.clusterid.hdls1"), A),
        // Two endpoints with one hostname: both addresses.
        ok(
            &n("dup-name.clusterid.hdls1"),
            A,
            &[
                "dup-name.clusterid.hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.4",
                "dup-name.clusterid.hdls1.testns.svc.clusterset.local. 5 IN A 172.0.0.5",
            ],
        ),
        // Not ready: not served.
        nxdomain(&n("notready.clusterid.hdls1"), A),
        // No ready endpoints at all: NXDOMAIN (spec 4.3).
        nxdomain(&n("hdlsnoready"), A),
        nxdomain(&n("hdlsnoready"), SRV),
        // Portless headless: addresses.
        ok(
            &n("hdlsportless"),
            A,
            &["hdlsportless.testns.svc.clusterset.local. 5 IN A 172.0.1.1"],
        ),
        // Unknown endpoint, endpoint of a missing service, wrong cluster id.
        nxdomain(&n("bogusendpoint.clusterid.hdls1"), A),
        nxdomain(&n("ep3.clusterid.nosvc"), A),
        nxdomain(&n("ep3.othercluster.hdls1"), A),
        // Endpoint name without the cluster id is the forbidden <clusterid>.<svc> form.
        nxdomain(&n("5678-abcd--1.hdls1"), AAAA),
        // CoreDNS also answers endpoint names of ClusterSetIP imports from their slices.
        ok(
            &n("ep1a.clusterid.svc1"),
            A,
            &["ep1a.clusterid.svc1.testns.svc.clusterset.local. 5 IN A 172.0.0.1"],
        ),
    ];
    for c in &cases {
        check(&store, c);
    }
}

#[test]
fn forbidden_unknown_and_structural_names() {
    use RecordType::*;
    let store = coredns_store(false);
    let soa_answer: &'static [&'static str] = &[
        "clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. SERIAL 7200 1800 86400 5",
    ];
    let cases = [
        // <clusterid>.<svc> must not exist (spec 4.2, 4.3).
        nxdomain(&n("clusterid.hdls1"), A),
        nxdomain(&n("clusterid.svc1"), A),
        // Unknown service, unknown namespace.
        nxdomain(&n("svc0"), A),
        nxdomain(&format!("svc1.otherns.{Z}"), A),
        nxdomain(&format!("otherns.{Z}"), A),
        nxdomain(&n("svc0"), TXT),
        // More labels than any form has.
        nxdomain(&n("a.b.c.svc1"), A),
        nxdomain(&n("x._tcp.svc1"), A),
        // Structural names exist without data.
        nodata("svc.clusterset.local.", A),
        nodata("pod.clusterset.local.", A),
        nodata(&format!("testns.{Z}"), A),
        // dns-version TXT, with its own TTL.
        ok(
            "dns-version.clusterset.local.",
            TXT,
            &["dns-version.clusterset.local. 28800 IN TXT 1.0.0"],
        ),
        // SOA on a name other than the apex: NODATA with the SOA in authority.
        nodata(&n("svc1"), SOA),
        ok(
            "clusterset.local.",
            NS,
            &["clusterset.local. 5 IN NS ns.dns.clusterset.local."],
        ),
    ];
    for c in &cases {
        check(&store, c);
    }
    // The apex SOA carries the serial; compare with it filled in.
    let serial = store.answer("clusterset.local", SOA).answers[0].to_string();
    assert!(serial.starts_with(
        "clusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. "
    ));
    let filled = soa_answer[0].replace("SERIAL", serial.split(' ').nth(6).unwrap());
    assert_eq!(serial, filled);
}

#[test]
fn out_of_zone_and_zone_transfers_are_refused() {
    let store = coredns_store(false);
    for (name, qtype) in [
        ("svc1.testns.svc.cluster.local.", RecordType::A),
        ("example.com.", RecordType::A),
        ("1.1.1.1.in-addr.arpa.", RecordType::PTR),
        ("clusterset.local.", RecordType::AXFR),
        ("clusterset.local.", RecordType::IXFR),
    ] {
        let model = store.answer(name, qtype);
        assert_eq!(model.response_code, ResponseCode::Refused, "{name} {qtype}");
        assert!(!model.authoritative, "{name} {qtype}");
        for transport in [Transport::Udp, Transport::Tcp] {
            let wire = over_the_wire(&store, name, qtype, transport);
            assert_eq!(
                wire.metadata.response_code,
                ResponseCode::Refused,
                "{name} {qtype}"
            );
            assert!(wire.answers.is_empty() && wire.authorities.is_empty());
        }
    }
}

#[test]
fn ptr_records_name_clusterset_ips_and_endpoints() {
    use RecordType::*;
    let store = coredns_store(false);
    let cases = [
        ok(
            "5.0.0.10.in-addr.arpa.",
            PTR,
            &["5.0.0.10.in-addr.arpa. 5 IN PTR svc1.testns.svc.clusterset.local."],
        ),
        ok(
            "3.0.0.172.in-addr.arpa.",
            PTR,
            &["3.0.0.172.in-addr.arpa. 5 IN PTR ep3.clusterid.hdls1.testns.svc.clusterset.local."],
        ),
        ok(
            "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.c.b.a.4.3.2.1.ip6.arpa.",
            PTR,
            &[
                "1.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.0.d.c.b.a.4.3.2.1.ip6.arpa. 5 IN PTR svc6.testns.svc.clusterset.local.",
            ],
        ),
        // Not-ready endpoints have no PTR.
        case(
            "9.0.0.172.in-addr.arpa.",
            PTR,
            ResponseCode::Refused,
            &[],
            &[],
            false,
        ),
        // A reverse name we hold, asked for another type: NODATA (no SOA: not our zone).
        case(
            "5.0.0.10.in-addr.arpa.",
            A,
            ResponseCode::NoError,
            &[],
            &[],
            false,
        ),
    ];
    for c in &cases {
        if c.rcode == ResponseCode::Refused {
            assert_eq!(
                store.answer(&c.qname, c.qtype).response_code,
                ResponseCode::Refused
            );
            continue;
        }
        check(&store, c);
    }
}

#[test]
fn lighthouse_mode_answers_per_cluster_names() {
    use RecordType::*;
    let store = coredns_store(true);
    let cases = [
        ok(
            &n("clusterid.svc1"),
            A,
            &["clusterid.svc1.testns.svc.clusterset.local. 5 IN A 172.0.0.1"],
        ),
        ok(
            &n("clusterid.hdls1"),
            AAAA,
            &[
                "clusterid.hdls1.testns.svc.clusterset.local. 5 IN AAAA 5678:abcd::1",
                "clusterid.hdls1.testns.svc.clusterset.local. 5 IN AAAA 5678:abcd::2",
            ],
        ),
        nxdomain(&n("othercluster.svc1"), A),
        // The spec names keep working.
        ok(
            &n("svc1"),
            A,
            &["svc1.testns.svc.clusterset.local. 5 IN A 10.0.0.5"],
        ),
    ];
    for c in &cases {
        check(&store, c);
    }
}

#[test]
fn any_queries_get_one_rrset_of_the_name_as_rfc_8482_allows() {
    let store = coredns_store(false);
    check(
        &store,
        &ok(
            &n("svc1"),
            RecordType::ANY,
            &["svc1.testns.svc.clusterset.local. 5 IN A 10.0.0.5"],
        ),
    );
    check(
        &store,
        &case(
            &format!("_http._tcp.{}", n("svc1")),
            RecordType::ANY,
            ResponseCode::NoError,
            &[
                "_http._tcp.svc1.testns.svc.clusterset.local. 5 IN SRV 0 100 80 svc1.testns.svc.clusterset.local.",
            ],
            &["svc1.testns.svc.clusterset.local. 5 IN A 10.0.0.5"],
            false,
        ),
    );
    check(&store, &nodata(&format!("testns.{Z}"), RecordType::ANY));
}

#[test]
fn an_unsynced_store_answers_servfail_in_zone_and_refused_outside() {
    let store = ZoneStore::new(ZoneConfig::default());
    let a = RecordType::A;
    let wire = over_the_wire(
        &store,
        "svc1.testns.svc.clusterset.local.",
        a,
        Transport::Udp,
    );
    assert_eq!(wire.metadata.response_code, ResponseCode::ServFail);
    let wire = over_the_wire(&store, "example.com.", a, Transport::Udp);
    assert_eq!(wire.metadata.response_code, ResponseCode::Refused);
    store.mark_synced();
    let wire = over_the_wire(
        &store,
        "svc1.testns.svc.clusterset.local.",
        a,
        Transport::Udp,
    );
    assert_eq!(wire.metadata.response_code, ResponseCode::NXDomain);
}

#[test]
fn ttl_comes_from_the_configuration() {
    let config = ZoneConfig {
        ttl: 30,
        ..ZoneConfig::default()
    };
    let store = store_with(config, coredns_fixture());
    let wire = over_the_wire(&store, &n("svc1"), RecordType::A, Transport::Udp);
    assert_eq!(wire.answers[0].ttl, 30);
    let wire = over_the_wire(&store, &n("svc0"), RecordType::A, Transport::Udp);
    let soa = wire.authorities[0].to_string();
    assert!(soa.ends_with(" 7200 1800 86400 30"), "{soa}");
}

//! The server for real on 127.0.0.1, over UDP and TCP: our resolver against it, `dig` (an
//! outside client, from bind9-dnsutils) against it, and updates while it serves.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns

mod common;

use std::net::{IpAddr, SocketAddr};
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clusterset_dns::{
    ClustersetResolver, DnsServer, HickoryClustersetResolver, ResolveError, ResolverSettings,
    ServerConfig, ZoneConfig, ZoneStore, resolve_all,
};
use common::{coredns_fixture, import, store_with};
use mcs_types::names::ClustersetName;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

async fn serve(store: Arc<ZoneStore>) -> DnsServer {
    let mut config = ServerConfig::new("127.0.0.1:0".parse().unwrap());
    config.udp_workers = 2;
    DnsServer::start(&config, store).unwrap()
}

fn resolver(address: SocketAddr) -> HickoryClustersetResolver {
    HickoryClustersetResolver::new(ResolverSettings {
        nameserver: Some(address),
        timeout: Duration::from_millis(500),
        attempts: 3,
        backoff: Duration::from_millis(20),
        ..ResolverSettings::default()
    })
    .unwrap()
}

fn name(text: &str) -> ClustersetName {
    ClustersetName::parse(text, &mcs_types::names::Zone::default()).unwrap()
}

fn ips(list: &[&str]) -> Vec<IpAddr> {
    list.iter().map(|s| s.parse().unwrap()).collect()
}

#[tokio::test]
async fn our_resolver_against_our_server() {
    let store = Arc::new(store_with(ZoneConfig::default(), coredns_fixture()));
    let server = serve(Arc::clone(&store)).await;
    let resolver = resolver(server.local_addr());

    let got = resolver
        .resolve(&name("svc1.testns.svc.clusterset.local"))
        .await
        .unwrap();
    assert_eq!(got.addresses, ips(&["10.0.0.5"]));
    let got = resolver
        .resolve(&name("svcdual.testns.svc.clusterset.local"))
        .await
        .unwrap();
    assert_eq!(got.addresses, ips(&["10.0.0.7", "1234:abcd::7"]));
    let got = resolver
        .resolve(&name(
            "dup-name.clusterid.hdls1.testns.svc.clusterset.local",
        ))
        .await
        .unwrap();
    assert_eq!(got.addresses, ips(&["172.0.0.4", "172.0.0.5"]));

    let err = resolver
        .resolve(&name("nope.testns.svc.clusterset.local"))
        .await
        .unwrap_err();
    assert_eq!(
        err,
        ResolveError::NxDomain {
            name: "nope.testns.svc.clusterset.local".into()
        }
    );
    assert!(
        err.to_string()
            .starts_with("nope.testns.svc.clusterset.local: no such name (NXDOMAIN)")
    );
    let err = resolver
        .resolve(&name("noips.testns.svc.clusterset.local"))
        .await
        .unwrap_err();
    assert!(matches!(err, ResolveError::NoData { .. }), "{err}");
    assert!(!err.is_transient());

    // Many names at once, answers in order.
    let names: Vec<ClustersetName> = ["svc1", "svc6", "nope", "hdls1"]
        .iter()
        .map(|s| name(&format!("{s}.testns.svc.clusterset.local")))
        .collect();
    let results = resolve_all(&resolver, &names, 3).await;
    assert_eq!(results[0].as_ref().unwrap().addresses, ips(&["10.0.0.5"]));
    assert_eq!(
        results[1].as_ref().unwrap().addresses,
        ips(&["1234:abcd::1"])
    );
    assert!(matches!(results[2], Err(ResolveError::NxDomain { .. })));
    assert_eq!(results[3].as_ref().unwrap().addresses.len(), 6);
    server.shutdown().await;
}

#[tokio::test]
async fn lighthouse_names_resolve_in_lighthouse_mode() {
    let config = ZoneConfig {
        lighthouse_cluster_names: true,
        ..ZoneConfig::default()
    };
    let store = Arc::new(store_with(config, coredns_fixture()));
    let server = serve(store).await;
    let resolver = resolver(server.local_addr());
    let service = name("svc1.testns.svc.clusterset.local");
    let per_cluster = service.cluster_service("clusterid").unwrap();
    let got = resolver.resolve(&per_cluster).await.unwrap();
    assert_eq!(got.addresses, ips(&["172.0.0.1"]));
    server.shutdown().await;
}

#[tokio::test]
async fn an_unsynced_server_fails_lookups_with_servfail_then_answers() {
    let store = Arc::new(ZoneStore::new(ZoneConfig::default()));
    let server = serve(Arc::clone(&store)).await;
    let resolver = resolver(server.local_addr());
    let web = name("web.shop.svc.clusterset.local");
    let err = resolver.resolve(&web).await.unwrap_err();
    match &err {
        ResolveError::ServerError { code, attempts, .. } => {
            assert_eq!(code, "SERVFAIL");
            assert_eq!(*attempts, 3);
        }
        other => panic!("expected SERVFAIL, got {other}"),
    }
    assert!(err.is_transient());
    assert!(err.to_string().contains("until it has synced"), "{err}");

    store
        .upsert_service_import(&import(
            "shop",
            "web",
            "ClusterSetIP",
            &["242.1.0.1"],
            &[("http", "TCP", 80)],
        ))
        .unwrap();
    store.mark_synced();
    let got = resolver.resolve(&web).await.unwrap();
    assert_eq!(got.addresses, ips(&["242.1.0.1"]));
    server.shutdown().await;
}

#[tokio::test]
async fn updates_are_served_after_the_cached_answer_expires() {
    let config = ZoneConfig {
        ttl: 1,
        ..ZoneConfig::default()
    };
    let store = Arc::new(ZoneStore::new(config));
    let web = |ip: &str| import("shop", "web", "ClusterSetIP", &[ip], &[("http", "TCP", 80)]);
    store.upsert_service_import(&web("242.1.0.1")).unwrap();
    store.mark_synced();
    let server = serve(Arc::clone(&store)).await;
    let resolver = resolver(server.local_addr());
    let name = name("web.shop.svc.clusterset.local");
    let first = resolver.resolve(&name).await.unwrap();
    assert_eq!(first.addresses, ips(&["242.1.0.1"]));
    assert!(first.valid_until <= Instant::now() + Duration::from_secs(1));

    store.upsert_service_import(&web("242.1.0.2")).unwrap();
    // The cache honours the 1 s TTL: poll until the new address shows, with a deadline.
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let got = resolver.resolve(&name).await.unwrap();
        if got.addresses == ips(&["242.1.0.2"]) {
            break;
        }
        assert_eq!(
            got.addresses,
            ips(&["242.1.0.1"]),
            "only the old or the new address"
        );
        assert!(Instant::now() < deadline, "the new address never showed");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    server.shutdown().await;
}

#[tokio::test]
async fn answers_are_cached_for_their_ttl() {
    let config = ZoneConfig {
        ttl: 300,
        ..ZoneConfig::default()
    };
    let store = Arc::new(ZoneStore::new(config));
    let web = |ip: &str| import("shop", "web", "ClusterSetIP", &[ip], &[("http", "TCP", 80)]);
    store.upsert_service_import(&web("242.1.0.1")).unwrap();
    store.mark_synced();
    let server = serve(Arc::clone(&store)).await;
    let resolver = resolver(server.local_addr());
    let name = name("web.shop.svc.clusterset.local");
    let first = resolver.resolve(&name).await.unwrap();
    assert!(
        first.valid_until > Instant::now() + Duration::from_secs(250),
        "TTL 300 s kept"
    );
    // The server now says otherwise; within the TTL the resolver does not ask again.
    store.upsert_service_import(&web("242.1.0.2")).unwrap();
    assert_eq!(
        resolver.resolve(&name).await.unwrap().addresses,
        ips(&["242.1.0.1"])
    );
    resolver.clear_cache();
    assert_eq!(
        resolver.resolve(&name).await.unwrap().addresses,
        ips(&["242.1.0.2"])
    );
    server.shutdown().await;
}

/// A name that does not exist yet (an export not imported): by default the NXDOMAIN is not
/// cached, so the next lookup sees the name as soon as the server has it; with
/// `negative_cache_max: None` the answer is kept for the zone's SOA minimum (its TTL, 300 s).
#[tokio::test]
async fn negative_answers_are_not_cached_unless_asked() {
    let config = ZoneConfig {
        ttl: 300,
        ..ZoneConfig::default()
    };
    let store = Arc::new(ZoneStore::new(config));
    store.mark_synced();
    let server = serve(Arc::clone(&store)).await;
    let fresh = resolver(server.local_addr());
    let caching = HickoryClustersetResolver::new(ResolverSettings {
        nameserver: Some(server.local_addr()),
        timeout: Duration::from_millis(500),
        negative_cache_max: None,
        ..ResolverSettings::default()
    })
    .unwrap();
    let name = name("web.shop.svc.clusterset.local");
    let missing = ResolveError::NxDomain {
        name: "web.shop.svc.clusterset.local".into(),
    };
    assert_eq!(fresh.resolve(&name).await.unwrap_err(), missing);
    assert_eq!(caching.resolve(&name).await.unwrap_err(), missing);

    let web = import(
        "shop",
        "web",
        "ClusterSetIP",
        &["242.1.0.1"],
        &[("http", "TCP", 80)],
    );
    store.upsert_service_import(&web).unwrap();
    assert_eq!(
        fresh.resolve(&name).await.unwrap().addresses,
        ips(&["242.1.0.1"])
    );
    assert_eq!(
        caching.resolve(&name).await.unwrap_err(),
        missing,
        "the SOA minimum (300 s) keeps the NXDOMAIN"
    );
    server.shutdown().await;
}

#[tokio::test]
async fn a_silent_server_times_out_after_bounded_retries() {
    // A UDP socket that never answers (and no TCP listener behind it).
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let resolver = HickoryClustersetResolver::new(ResolverSettings {
        nameserver: Some(silent.local_addr().unwrap()),
        timeout: Duration::from_millis(100),
        attempts: 3,
        backoff: Duration::from_millis(10),
        ..ResolverSettings::default()
    })
    .unwrap();
    let started = Instant::now();
    let err = resolver
        .resolve(&name("web.shop.svc.clusterset.local"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ResolveError::Timeout { attempts: 3, .. }),
        "{err}"
    );
    assert!(
        err.to_string()
            .starts_with("web.shop.svc.clusterset.local: no answer after 3 attempts")
    );
    // Bounded: three attempts of 100 ms and two short waits, not more.
    assert!(
        started.elapsed() < Duration::from_secs(3),
        "{:?}",
        started.elapsed()
    );
}

#[tokio::test]
async fn tcp_serves_several_queries_on_one_connection_and_refuses_axfr() {
    use hickory_proto::op::{Message, Query, ResponseCode};
    use hickory_proto::rr::{Name, RecordType};
    let store = Arc::new(store_with(ZoneConfig::default(), coredns_fixture()));
    let server = serve(store).await;
    let mut stream = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    for (qname, qtype, rcode, count) in [
        (
            "_http._tcp.hdls1.testns.svc.clusterset.local.",
            RecordType::SRV,
            ResponseCode::NoError,
            5,
        ),
        (
            "svc1.testns.svc.clusterset.local.",
            RecordType::A,
            ResponseCode::NoError,
            1,
        ),
        (
            "clusterset.local.",
            RecordType::AXFR,
            ResponseCode::Refused,
            0,
        ),
    ] {
        let mut q = Message::query();
        q.add_query(Query::query(Name::from_ascii(qname).unwrap(), qtype));
        let bytes = q.to_vec().unwrap();
        stream
            .write_all(&u16::try_from(bytes.len()).unwrap().to_be_bytes())
            .await
            .unwrap();
        stream.write_all(&bytes).await.unwrap();
        let mut len = [0u8; 2];
        stream.read_exact(&mut len).await.unwrap();
        let mut body = vec![0u8; usize::from(u16::from_be_bytes(len))];
        stream.read_exact(&mut body).await.unwrap();
        let answer = Message::from_vec(&body).unwrap();
        assert_eq!(answer.metadata.response_code, rcode, "{qname}");
        assert_eq!(answer.answers.len(), count, "{qname}");
    }
    server.shutdown().await;
}

/// Runs dig and returns its short output lines; fails loudly when dig is missing.
fn dig(server: SocketAddr, args: &[&str]) -> String {
    let output = Command::new("dig")
        .arg(format!("@{}", server.ip()))
        .args(["-p", &server.port().to_string(), "+time=2", "+tries=1"])
        .args(args)
        .output()
        .unwrap_or_else(|e| panic!("cannot run dig ({e}): install it with `apt-get install bind9-dnsutils` (.ci/run does)"));
    assert!(
        output.status.success(),
        "dig {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).unwrap()
}

fn status(full: &str) -> &str {
    full.split("status: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or("<none>")
}

#[tokio::test]
async fn dig_against_our_server() {
    let store = Arc::new(store_with(ZoneConfig::default(), coredns_fixture()));
    let server = serve(store).await;
    let addr = server.local_addr();
    let z = "testns.svc.clusterset.local";

    tokio::task::spawn_blocking(move || {
        for transport in ["+notcp", "+tcp"] {
            let short = |args: &[&str]| {
                let mut all = vec![transport, "+short"];
                all.extend_from_slice(args);
                let mut lines: Vec<String> = dig(addr, &all).lines().map(str::to_owned).collect();
                lines.sort();
                lines
            };
            assert_eq!(short(&[&format!("svc1.{z}"), "A"]), ["10.0.0.5"]);
            assert_eq!(short(&[&format!("svc6.{z}"), "AAAA"]), ["1234:abcd::1"]);
            assert_eq!(
                short(&[&format!("_http._tcp.svc1.{z}"), "SRV"]),
                [format!("0 100 80 svc1.{z}.")]
            );
            assert_eq!(
                short(&["dns-version.clusterset.local", "TXT"]),
                ["\"1.0.0\""]
            );
            assert_eq!(short(&["-x", "10.0.0.5"]), [format!("svc1.{z}.")]);
            assert_eq!(
                short(&[&format!("hdls1.{z}"), "A"]),
                ["172.0.0.2", "172.0.0.3", "172.0.0.4", "172.0.0.5"]
            );

            let full = dig(addr, &[transport, &format!("nope.{z}"), "A"]);
            assert_eq!(status(&full), "NXDOMAIN", "{full}");
            assert!(
                full.contains("flags: qr aa rd;"),
                "authoritative, no recursion: {full}"
            );
            assert!(
                full.contains("AUTHORITY: 1"),
                "SOA for negative caching: {full}"
            );
            let full = dig(addr, &[transport, &format!("svc1.{z}"), "AAAA"]);
            assert_eq!(status(&full), "NOERROR", "{full}");
            assert!(
                full.contains("ANSWER: 0, AUTHORITY: 1"),
                "NODATA with the SOA: {full}"
            );
            let full = dig(addr, &[transport, "example.com", "A"]);
            assert_eq!(status(&full), "REFUSED", "no recursion: {full}");
        }
        let full = dig(addr, &["clusterset.local", "AXFR"]);
        assert!(full.contains("Transfer failed"), "AXFR refused: {full}");
    })
    .await
    .unwrap();
    server.shutdown().await;
}

/// One query for `qname`/`qtype` in wire form, with id `id`.
fn query_bytes(id: u16, qname: &str, qtype: hickory_proto::rr::RecordType) -> Vec<u8> {
    use hickory_proto::op::{Message, Query};
    let mut q = Message::query();
    q.metadata.id = id;
    q.add_query(Query::query(
        hickory_proto::rr::Name::from_ascii(qname).unwrap(),
        qtype,
    ));
    q.to_vec().unwrap()
}

/// Sends `request` over UDP and returns the answer's response code (header bits, plus the
/// extended bits when the answer carries an OPT record with them).
async fn udp_rcode(socket: &tokio::net::UdpSocket, request: &[u8]) -> u8 {
    socket.send(request).await.unwrap();
    let mut buffer = vec![0u8; 4096];
    let len = tokio::time::timeout(Duration::from_secs(5), socket.recv(&mut buffer))
        .await
        .expect("an answer within 5 s")
        .unwrap();
    let answer = &buffer[..len];
    assert_eq!(answer[..2], request[..2], "the answer to this query");
    answer[3] & 0x0f
}

async fn tcp_rcode(stream: &mut tokio::net::TcpStream, request: &[u8]) -> u8 {
    stream
        .write_all(&u16::try_from(request.len()).unwrap().to_be_bytes())
        .await
        .unwrap();
    stream.write_all(request).await.unwrap();
    let mut len = [0u8; 2];
    stream.read_exact(&mut len).await.unwrap();
    let mut body = vec![0u8; usize::from(u16::from_be_bytes(len))];
    stream.read_exact(&mut body).await.unwrap();
    body[3] & 0x0f
}

#[tokio::test]
async fn answered_queries_are_counted_by_transport_and_response_code() {
    use clusterset_dns::wire::Transport::{Tcp, Udp};
    use clusterset_dns::{QueryCounts, Rcode};
    use hickory_proto::rr::RecordType;

    // Not synced yet: the first query gets SERVFAIL.
    let store = Arc::new(ZoneStore::new(ZoneConfig::default()));
    let server = serve(Arc::clone(&store)).await;
    let counter = server.query_counter();
    assert_eq!(counter.snapshot(), QueryCounts::default());

    // One client socket: SO_REUSEPORT sends all its datagrams to the same worker, in order.
    let udp = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
    udp.connect(server.local_addr()).await.unwrap();
    let web = "web.shop.svc.clusterset.local.";
    assert_eq!(
        udp_rcode(&udp, &query_bytes(1, web, RecordType::A)).await,
        2
    );
    store
        .upsert_service_import(&import(
            "shop",
            "web",
            "ClusterSetIP",
            &["242.1.0.1"],
            &[("http", "TCP", 80)],
        ))
        .unwrap();
    store.mark_synced();

    for id in 10..13 {
        assert_eq!(
            udp_rcode(&udp, &query_bytes(id, web, RecordType::A)).await,
            0
        );
    }
    // NODATA is NOERROR too.
    assert_eq!(
        udp_rcode(&udp, &query_bytes(13, web, RecordType::TXT)).await,
        0
    );
    for id in 20..22 {
        let nope = query_bytes(id, "nope.shop.svc.clusterset.local.", RecordType::A);
        assert_eq!(udp_rcode(&udp, &nope).await, 3);
    }
    let outside = query_bytes(30, "example.com.", RecordType::A);
    assert_eq!(udp_rcode(&udp, &outside).await, 5);
    // No question at all: FORMERR.
    let empty = [0, 40, 0x01, 0, 0, 0, 0, 0, 0, 0, 0, 0];
    assert_eq!(udp_rcode(&udp, &empty).await, 1);
    // Opcode STATUS: NOTIMP.
    let mut status = query_bytes(50, web, RecordType::A);
    status[2] = (status[2] & 0x87) | (2 << 3);
    assert_eq!(udp_rcode(&udp, &status).await, 4);
    // EDNS version 1: BADVERS (0 in the header, counted as OTHER).
    let mut badvers = query_bytes(60, web, RecordType::A);
    badvers[11] = 1; // ARCOUNT
    badvers.extend_from_slice(&[0, 0, 41, 0x04, 0xd0, 0, 1, 0, 0, 0, 0]);
    assert_eq!(udp_rcode(&udp, &badvers).await, 0);
    // A response and a runt get no answer and are not counted; the query after them is
    // answered by the same worker, so they have been handled when its answer arrives.
    let mut response = query_bytes(70, web, RecordType::A);
    response[2] |= 0x80;
    udp.send(&response).await.unwrap();
    udp.send(&[0, 71, 0, 0]).await.unwrap();
    assert_eq!(
        udp_rcode(&udp, &query_bytes(72, web, RecordType::A)).await,
        0
    );

    let mut tcp = tokio::net::TcpStream::connect(server.local_addr())
        .await
        .unwrap();
    assert_eq!(
        tcp_rcode(&mut tcp, &query_bytes(80, web, RecordType::A)).await,
        0
    );
    let nope = query_bytes(81, "nope.shop.svc.clusterset.local.", RecordType::A);
    assert_eq!(tcp_rcode(&mut tcp, &nope).await, 3);
    let axfr = query_bytes(82, "clusterset.local.", RecordType::AXFR);
    assert_eq!(tcp_rcode(&mut tcp, &axfr).await, 5);

    let expected: QueryCounts = [
        (Udp, Rcode::ServFail, 1),
        (Udp, Rcode::NoError, 5),
        (Udp, Rcode::NxDomain, 2),
        (Udp, Rcode::Refused, 1),
        (Udp, Rcode::FormErr, 1),
        (Udp, Rcode::NotImp, 1),
        (Udp, Rcode::Other, 1),
        (Tcp, Rcode::NoError, 1),
        (Tcp, Rcode::NxDomain, 1),
        (Tcp, Rcode::Refused, 1),
    ]
    .into_iter()
    .collect();
    assert_eq!(server.query_counts(), expected);
    assert_eq!(expected.total(), 15);
    server.shutdown().await;
    // The handle outlives the server and keeps the last counts.
    assert_eq!(counter.snapshot(), expected);
}

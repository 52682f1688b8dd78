#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The agent's runtime keeps a real clusterset DNS server (clusterset-dns on loopback) current
//! from the stored ServiceImports and imported EndpointSlices; `dig` is the outside client.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clusterset_agent_runtime::kube_io::{AgentWriter, Feed, WriteError};
use clusterset_agent_runtime::metrics::Metrics;
use clusterset_agent_runtime::readiness::Readiness;
use clusterset_agent_runtime::runtime::Runtime;
use clusterset_dns::{DnsServer, ServerConfig, ZoneConfig, ZoneStore};
use clusterset_sim::Simulation;
use futures::channel::mpsc;
use k8s_openapi::jiff::Timestamp;
use mcs_controller::broker::Heartbeat;
use mcs_controller::core::{AgentCore, Input};
use mcs_controller::watch::Event;
use mcs_controller::write::Write;
use mcs_types::ServiceKey;

/// Accepts every write (this test is about DNS).
struct AcceptAll;

#[async_trait]
impl AgentWriter for AcceptAll {
    async fn write(&self, _: &Write) -> Result<(), WriteError> {
        Ok(())
    }
    async fn heartbeat(
        &self,
        _: &Heartbeat,
    ) -> Result<Option<k8s_openapi::api::coordination::v1::Lease>, WriteError> {
        Ok(None)
    }
}

fn dig(server: SocketAddr, name: &str) -> (String, String) {
    let output = Command::new("dig")
        .args([
            &format!("@{}", server.ip()),
            "-p",
            &server.port().to_string(),
            name,
            "A",
            "+tries=1",
            "+time=2",
        ])
        .output()
        .unwrap_or_else(|e| {
            panic!("cannot run dig ({e}): install it with `apt-get install bind9-dnsutils`")
        });
    let text = String::from_utf8_lossy(&output.stdout).into_owned();
    let status = text
        .split("status: ")
        .nth(1)
        .and_then(|s| s.split(',').next())
        .unwrap_or("")
        .to_owned();
    let answers = text
        .lines()
        .filter(|l| !l.starts_with(';') && l.contains("\tA\t"))
        .filter_map(|l| l.split_whitespace().last())
        .collect::<Vec<_>>()
        .join(" ");
    (status, answers)
}

async fn wait_for_dig(server: SocketAddr, name: &str, expected: (&str, &str)) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let got = tokio::task::spawn_blocking({
            let name = name.to_owned();
            move || dig(server, &name)
        })
        .await
        .unwrap();
        if (got.0.as_str(), got.1.as_str()) == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name}: expected {expected:?}, still {got:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_zone_follows_the_stored_imports_and_answers_servfail_until_synced() {
    // Two simulated clusters; c1 exports shop/web; c0's stored objects are what its agent's
    // DNS must serve.
    let mut sim = Simulation::new(
        2,
        &["shop"],
        Timestamp::from_second(1_800_000_000).unwrap(),
        None,
    )
    .unwrap();
    sim.start_all();
    sim.settle(1000);
    let web = ServiceKey::new("shop", "web");
    sim.export(1, &web, &[80]);
    sim.settle_accepted(1000)
        .unwrap_or_else(|refused| panic!("{refused}"));
    let import = sim.import(0, &web).unwrap().clone();
    assert_eq!(import.spec.ips, ["243.0.0.1"]);
    let slices: Vec<_> = sim.imported_slices(0, &web).into_iter().cloned().collect();

    let zone = Arc::new(ZoneStore::new(ZoneConfig {
        lighthouse_cluster_names: true,
        ..ZoneConfig::default()
    }));
    let server = DnsServer::start(
        &ServerConfig::new("127.0.0.1:0".parse().unwrap()),
        Arc::clone(&zone),
    )
    .unwrap();
    let address = server.local_addr();
    let runtime = Runtime {
        core: AgentCore::new(sim.clusters[0].core.config().clone()),
        writer: Arc::new(AcceptAll),
        metrics: Arc::new(Metrics::new()),
        readiness: Arc::new(Readiness::default()),
        zone: Some(Arc::clone(&zone)),
        write_concurrency: 4,
        heartbeat_every: Duration::from_secs(10),
        clock: clusterset_daemon::Clock::system(),
        election: clusterset_agent_runtime::runtime::Election::None,
    };
    let (events, feeds) = mpsc::unbounded::<Feed>();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runtime.run(feeds, async {
        let _ = stopped.await;
    }));
    let send = |input: Input| events.unbounded_send(Feed::Input(Box::new(input))).unwrap();

    // Nothing listed yet: a name that will exist must not be NXDOMAIN.
    wait_for_dig(address, "web.shop.svc.clusterset.local", ("SERVFAIL", "")).await;

    send(Input::ServiceImport(Event::Init));
    send(Input::ServiceImport(Event::InitApply(import.clone())));
    send(Input::ServiceImport(Event::InitDone));
    send(Input::ImportedEndpointSlice(Event::Init));
    for slice in &slices {
        send(Input::ImportedEndpointSlice(Event::InitApply(
            slice.clone(),
        )));
    }
    send(Input::ImportedEndpointSlice(Event::InitDone));
    wait_for_dig(
        address,
        "web.shop.svc.clusterset.local",
        ("NOERROR", "243.0.0.1"),
    )
    .await;
    // The Lighthouse form (--lighthouse-names): c1's endpoint, the service's global IP in c1.
    wait_for_dig(
        address,
        "c1.web.shop.svc.clusterset.local",
        ("NOERROR", "242.1.0.1"),
    )
    .await;

    // The import is deleted: the name goes.
    send(Input::ServiceImport(Event::Delete(import)));
    wait_for_dig(address, "web.shop.svc.clusterset.local", ("NXDOMAIN", "")).await;

    stop.send(()).unwrap();
    task.await.unwrap();
    server.shutdown().await;
}

/// The value of one series in the metrics text (0 when absent).
fn series(metrics: &Metrics, name_and_labels: &str) -> u64 {
    let text = metrics.encode();
    text.lines()
        .find_map(|l| l.strip_prefix(name_and_labels)?.strip_prefix(' '))
        .map_or(0, |v| v.trim().parse().unwrap())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_queries_over_udp_show_in_the_metrics_by_response_code() {
    let zone = Arc::new(ZoneStore::new(ZoneConfig::default()));
    let server = DnsServer::start(
        &ServerConfig::new("127.0.0.1:0".parse().unwrap()),
        Arc::clone(&zone),
    )
    .unwrap();
    let address = server.local_addr();
    // As the agent wires it (cli::run).
    let metrics = Metrics::new();
    let queries = server.query_counter();
    metrics.set_dns_query_source(move || queries.snapshot());
    let udp = |rcode: &str| {
        format!("clusterset_agent_dns_queries_total{{protocol=\"udp\",rcode=\"{rcode}\"}}")
    };
    for rcode in [
        "NOERROR", "NXDOMAIN", "SERVFAIL", "REFUSED", "FORMERR", "OTHER",
    ] {
        assert!(
            metrics.encode().contains(&format!("{} 0\n", udp(rcode))),
            "{rcode}"
        );
    }

    let ask = |name: &'static str| tokio::task::spawn_blocking(move || dig(address, name));
    // Not synced: SERVFAIL.
    assert_eq!(
        ask("web.shop.svc.clusterset.local").await.unwrap().0,
        "SERVFAIL"
    );
    assert_eq!(series(&metrics, &udp("SERVFAIL")), 1);

    let import = serde_json::from_value(serde_json::json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
        "metadata": {"name": "web", "namespace": "shop"},
        "spec": {"type": "ClusterSetIP", "ips": ["243.0.0.1"], "ports": [{"port": 80}]}
    }))
    .unwrap();
    zone.upsert_service_import(&import).unwrap();
    zone.mark_synced();
    for _ in 0..3 {
        let (status, answers) = ask("web.shop.svc.clusterset.local").await.unwrap();
        assert_eq!(
            (status.as_str(), answers.as_str()),
            ("NOERROR", "243.0.0.1")
        );
    }
    for _ in 0..2 {
        assert_eq!(
            ask("nope.shop.svc.clusterset.local").await.unwrap().0,
            "NXDOMAIN"
        );
    }
    assert_eq!(ask("example.com").await.unwrap().0, "REFUSED");

    assert_eq!(series(&metrics, &udp("NOERROR")), 3);
    assert_eq!(series(&metrics, &udp("NXDOMAIN")), 2);
    assert_eq!(series(&metrics, &udp("REFUSED")), 1);
    assert_eq!(series(&metrics, &udp("SERVFAIL")), 1);
    assert_eq!(series(&metrics, &udp("FORMERR")), 0);
    assert_eq!(
        series(
            &metrics,
            "clusterset_agent_dns_queries_total{protocol=\"tcp\",rcode=\"NOERROR\"}"
        ),
        0
    );
    server.shutdown().await;
}

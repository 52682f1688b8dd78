//! `mcsctl diagnose` as a process: the cluster is a fake API server on loopback holding a
//! recorded member cluster, DNS is our clusterset DNS server (clusterset-dns `DnsServer`) on
//! 127.0.0.1 fed with that cluster's imports, answering real queries. Each run must name the hop
//! where the service breaks, and exit 1 exactly when a check failed.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers too

mod common;

use std::sync::Arc;

use clusterset_dns::{DnsServer, ServerConfig, ZoneConfig, ZoneObject, ZoneStore};
use common::{kubeconfig, mcsctl, stderr, stdout};
use kube_fake::FakeApi;
use kube_fake::fixture::cluster_east as fixture;
use kube_fake::http::ApiServer;

/// A clusterset DNS server on 127.0.0.1 with the fixture's ServiceImports and EndpointSlices,
/// `edit` applied to them first. Runs on its own runtime while the value lives.
struct Dns {
    server: Option<DnsServer>,
    runtime: tokio::runtime::Runtime,
    address: String,
}

impl Dns {
    fn start(lighthouse: bool, edit: impl Fn(&mut serde_json::Value)) -> Self {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
            .unwrap();
        let store = Arc::new(ZoneStore::new(ZoneConfig {
            lighthouse_cluster_names: lighthouse,
            ..ZoneConfig::default()
        }));
        let objects: Vec<ZoneObject> = fixture()
            .into_iter()
            .filter(|o| o["kind"] == "ServiceImport" || o["kind"] == "EndpointSlice")
            .map(|mut o| {
                edit(&mut o);
                ZoneObject::from_document(o).unwrap()
            })
            .collect();
        store.replace_all(objects).unwrap();
        store.mark_synced();
        let server = runtime
            .block_on(async {
                DnsServer::start(
                    &ServerConfig::new("127.0.0.1:0".parse().unwrap()),
                    Arc::clone(&store),
                )
            })
            .unwrap();
        let address = server.local_addr().to_string();
        Self {
            server: Some(server),
            runtime,
            address,
        }
    }
}

impl Drop for Dns {
    fn drop(&mut self) {
        if let Some(server) = self.server.take() {
            self.runtime.block_on(server.shutdown());
        }
    }
}

struct Setup {
    _dir: tempfile::TempDir,
    api: ApiServer,
    config: String,
}

fn setup() -> Setup {
    let dir = tempfile::tempdir().unwrap();
    let api = ApiServer::start(FakeApi::with_crds(
        mcs_ceph_api::member_crds().unwrap(),
        fixture(),
    ));
    let config = kubeconfig(dir.path(), &api.url)
        .to_str()
        .unwrap()
        .to_owned();
    Setup {
        _dir: dir,
        api,
        config,
    }
}

fn diagnose(setup: &Setup, dns: &Dns, args: &[&str]) -> std::process::Output {
    let mut all = vec![
        "diagnose",
        "--kubeconfig",
        setup.config.as_str(),
        "--nameserver",
        dns.address.as_str(),
        "--timeout=500ms",
    ];
    all.extend_from_slice(args);
    mcsctl(&all)
}

/// `(result, hop, check)` per line of the table.
fn table_checks(text: &str) -> Vec<(String, String, String)> {
    text.lines()
        .filter(|l| l.starts_with("PASS") || l.starts_with("FAIL") || l.starts_with("SKIP"))
        .map(|l| {
            let (result, rest) = l.split_at(4);
            let result = result.to_owned();
            let rest = rest.trim_start();
            let (hop, check) = rest.split_once(char::is_whitespace).unwrap();
            let check = check.trim_start();
            let title = check.split_once(": ").map_or(check, |(t, _)| t);
            (result, hop.to_owned(), title.to_owned())
        })
        .collect()
}

#[test]
fn a_healthy_service_passes_every_hop_through_real_dns() {
    let setup = setup();
    let dns = Dns::start(false, |_| {});
    let out = diagnose(&setup, &dns, &["web", "-n", "shop"]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let text = stdout(&out);
    assert!(text.starts_with("Diagnosing service shop/web\n"), "{text}");
    let checks = table_checks(&text);
    assert_eq!(checks.len(), 10, "{text}");
    assert!(checks.iter().all(|(r, _, _)| r == "PASS"), "{text}");
    assert!(
        text.contains(
            "PASS  dns      web.shop.svc.clusterset.local answers the import: 243.0.1.1\n"
        ),
        "{text}"
    );
    assert!(text.ends_with("No problems found (10 checks).\n"), "{text}");
    assert_eq!(
        setup.api.lines(),
        [
            "GET /api/v1/namespaces/shop/services/web",
            "GET /apis/discovery.k8s.io/v1/namespaces/shop/endpointslices?labelSelector=multicluster.kubernetes.io/service-name=web",
            "GET /apis/multicluster.x-k8s.io/v1beta1/namespaces/shop/serviceexports?fieldSelector=metadata.name=web",
            "GET /apis/multicluster.x-k8s.io/v1beta1/namespaces/shop/serviceimports?fieldSelector=metadata.name=web",
        ]
    );
}

#[test]
fn a_migrated_mon_resolves_by_rooks_per_cluster_name_and_agrees_with_the_mon_endpoints() {
    let setup = setup();
    let dns = Dns::start(true, |_| {});
    // The namespace comes from the current context (east: rook-ceph).
    let monmap = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/mon-dump.json"
    );
    let out = diagnose(
        &setup,
        &dns,
        &["rook-ceph-mon-a", "-o", "json", "--monmap", monmap],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}{}",
        stdout(&out),
        stderr(&out)
    );
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["namespace"], "rook-ceph");
    assert_eq!(json["failed"], 0);
    assert_eq!(json.get("breaksAt"), None);
    let ceph: Vec<(&str, &str)> = json["checks"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c["hop"] == "ceph")
        .map(|c| (c["check"].as_str().unwrap(), c["result"].as_str().unwrap()))
        .collect();
    assert_eq!(
        ceph,
        [
            ("mon.a has a global IP", "pass"),
            (
                "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local answers the global IP",
                "pass"
            ),
            ("rook-ceph-mon-endpoints has mon a at the global IP", "pass"),
            ("the monmap has mon a at the global IP", "pass"),
        ]
    );
    // A monmap that is not one is refused before anything is read.
    let out = diagnose(
        &setup,
        &dns,
        &["rook-ceph-mon-a", "--monmap", &setup.config],
    );
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out)
            .contains("is not the JSON of `ceph mon dump -f json` or `ceph quorum_status -f json`"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn a_failed_export_breaks_at_the_export_and_the_real_dns_answer_is_nxdomain() {
    let setup = setup();
    let dns = Dns::start(true, |_| {});
    let out = diagnose(&setup, &dns, &["rook-ceph-mon-b", "-o", "yaml"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let yaml: serde_json::Value = serde_saphyr::from_str(&stdout(&out)).unwrap();
    assert_eq!(yaml["breaksAt"], "export: ServiceExport is Ready");
    assert_eq!(yaml["failed"], 4);
    let dns_check = yaml["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["hop"] == "dns")
        .unwrap();
    assert_eq!(dns_check["result"], "fail");
    assert!(
        dns_check["detail"]
            .as_str()
            .unwrap()
            .starts_with("rook-ceph-mon-b.rook-ceph.svc.clusterset.local: no such name (NXDOMAIN)"),
        "{dns_check}"
    );
    assert_eq!(dns_check["fix"], "fix the import first (above)");
}

#[test]
fn a_stale_dns_server_and_one_without_lighthouse_names_are_caught() {
    let setup = setup();
    // A server whose data are not this cluster's: another IP for shop/web.
    let stale = Dns::start(false, |o| {
        if o["kind"] == "ServiceImport" && o["metadata"]["name"] == "web" {
            o["spec"]["ips"] = serde_json::json!(["243.0.9.9"]);
        }
    });
    let out = diagnose(&setup, &stale, &["web", "-n", "shop"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    assert!(
        text.contains("FAIL  dns      web.shop.svc.clusterset.local answers the import: answers 243.0.9.9, the import has 243.0.1.1\n"),
        "{text}"
    );
    assert!(
        text.ends_with(
            "1 of 10 checks failed; the service breaks at dns: web.shop.svc.clusterset.local answers the import.\n"
        ),
        "{text}"
    );

    // Rook asks for east.rook-ceph-mon-a...; a server without Lighthouse names says NXDOMAIN.
    let spec_only = Dns::start(false, |_| {});
    let out = diagnose(&setup, &spec_only, &["rook-ceph-mon-a"]);
    assert_eq!(out.status.code(), Some(1));
    let text = stdout(&out);
    let failed: Vec<(String, String, String)> = table_checks(&text)
        .into_iter()
        .filter(|(r, _, _)| r == "FAIL")
        .collect();
    assert_eq!(
        failed,
        [(
            "FAIL".to_owned(),
            "ceph".to_owned(),
            "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local answers the global IP".to_owned()
        )],
        "{text}"
    );
    assert!(
        text.contains("fix:   run the clusterset DNS server with Lighthouse names: clusterset-agent --lighthouse-names (or mcsctl dns serve --lighthouse)"),
        "{text}"
    );
}

#[test]
fn bad_names_and_flags_are_usage_errors() {
    let out = mcsctl(&["diagnose", "Web_1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).starts_with("error: \"Web_1\" is not a Service name"),
        "{}",
        stderr(&out)
    );
    let out = mcsctl(&["diagnose"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("<SERVICE>"));
    let out = mcsctl(&["diagnose", "web", "--nameserver", "localhost"]);
    assert_eq!(out.status.code(), Some(2));
}

//! `mcsctl status` as a process against a fake API server on loopback holding a recorded member
//! cluster: the kubeconfig, `--context`, `-n`, `-A` and `$KUBECONFIG` select what is read (the
//! request paths say so), every output format carries the same report, and the exit status
//! says whether problems were found.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers too

mod common;

use common::{kubeconfig, mcsctl, mcsctl_with, stderr, stdout};
use kube_fake::FakeApi;
use kube_fake::fixture::cluster_east as fixture;
use kube_fake::http::ApiServer;

fn setup() -> (tempfile::TempDir, ApiServer, String) {
    let dir = tempfile::tempdir().unwrap();
    let server = ApiServer::start(FakeApi::with_crds(
        mcs_ceph_api::member_crds().unwrap(),
        fixture(),
    ));
    let config = kubeconfig(dir.path(), &server.url);
    (dir, server, config.to_str().unwrap().to_owned())
}

#[test]
fn the_current_context_namespace_is_read_and_its_problems_make_the_status_1() {
    let (_dir, server, config) = setup();
    let out = mcsctl(&["status", "--kubeconfig", &config]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with("CephCluster rook-ceph/my-cluster: MCS enabled, clusterID east\n  migration: mons on global IPs 1/2, OSDs on global IPs 1/1; operator: Migrating, 2/3 daemons on their planned address: mon.b is replaced next (new mon c at 242.1.0.12)\n"),
        "{text}"
    );
    let row = |daemon: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.trim_start().starts_with(daemon))
            .unwrap_or_else(|| panic!("no row {daemon} in\n{text}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        row("mon.a"),
        [
            "mon.a",
            "rook-ceph-mon-a",
            "10.96.12.10",
            "rook-ceph-mon-a",
            "True",
            "True",
            "False",
            "242.1.0.10",
            "242.1.0.10:6789",
            "yes"
        ]
    );
    assert_eq!(row("osd.0")[7..], ["242.1.0.20", "242.1.0.20", "yes"]);
    assert!(text.contains("\nProblems (2):\n"), "{text}");
    assert!(!text.contains('\u{1b}'), "no styles on a pipe");
    // Everything read is in the context's namespace.
    let lines = server.lines();
    assert_eq!(lines.len(), 8, "{lines:#?}");
    assert!(
        lines.iter().all(|l| l.contains("/namespaces/rook-ceph/")),
        "{lines:#?}"
    );
}

#[test]
fn another_context_or_namespace_reads_there_and_a_healthy_namespace_exits_0() {
    let (_dir, server, config) = setup();
    let out = mcsctl(&["status", "--kubeconfig", &config, "--context", "shop"]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.contains("ServiceExports and ServiceImports in namespace shop\n"),
        "{text}"
    );
    assert!(text.ends_with("No problems found.\n"), "{text}");
    assert!(
        text.contains("note: no CephCluster in namespace shop\n"),
        "{text}"
    );
    // -n wins over the context's namespace, and JSON carries the same report.
    let out = mcsctl(&[
        "status",
        "--kubeconfig",
        &config,
        "-n",
        "shop",
        "-o",
        "json",
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["scope"], "namespace shop");
    assert_eq!(json["problems"], serde_json::json!([]));
    let names: Vec<&str> = json["services"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["api", "db", "web"]);
    assert_eq!(json["services"][0]["export"], serde_json::Value::Null);
    // A condition the object does not have is null, not a made-up value.
    assert_eq!(
        json["services"][0]["import"]["ready"],
        serde_json::Value::Null
    );
    assert_eq!(json["services"][2]["import"]["ready"]["status"], "True");
    assert_eq!(
        json["services"][0]["import"]["clusters"],
        serde_json::json!(["west"])
    );
    assert!(
        server
            .lines()
            .iter()
            .all(|l| l.contains("/namespaces/shop/")),
        "{:#?}",
        server.lines()
    );
}

#[test]
fn all_namespaces_in_yaml_lists_everything_and_kubeconfig_comes_from_the_environment() {
    let (_dir, server, config) = setup();
    let out = mcsctl_with(&["status", "-A", "-o", "yaml"], &[("KUBECONFIG", &config)]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    let yaml: serde_json::Value = serde_saphyr::from_str(&stdout(&out)).unwrap();
    assert_eq!(yaml["scope"], "all namespaces");
    assert_eq!(yaml["cephClusters"].as_array().unwrap().len(), 1);
    assert_eq!(yaml["services"].as_array().unwrap().len(), 6);
    assert_eq!(yaml["problems"].as_array().unwrap().len(), 2);
    assert_eq!(
        yaml["cephClusters"][0]["daemons"][1]["export"]["ready"]["reason"],
        "Failed"
    );
    let lines = server.lines();
    assert!(
        lines.contains(&"GET /apis/multicluster.x-k8s.io/v1beta1/serviceexports".to_owned()),
        "{lines:#?}"
    );
    assert!(
        lines.contains(&"GET /apis/ceph.rook.io/v1/cephclusters".to_owned()),
        "{lines:#?}"
    );
}

#[test]
fn usage_errors_exit_2() {
    let out = mcsctl(&["status", "-A", "-n", "shop"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("'--all-namespaces' cannot be used with '--namespace <NS>'"),
        "{}",
        stderr(&out)
    );
    let out = mcsctl(&["status", "-o", "xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("[possible values: table, wide, yaml, json, name]"));
}

#[test]
fn kubeconfig_problems_name_the_file_and_the_fix() {
    let (dir, _server, config) = setup();
    let out = mcsctl(&["status", "--kubeconfig", &config, "--context", "west"]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "error: there is no context \"west\" in the kubeconfig {config} (it has: east, shop): pass one of them with --context\n"
        )
    );
    let broken = dir.path().join("broken");
    std::fs::write(&broken, "apiVersion: v1\nclusters: {oops").unwrap();
    let out = mcsctl(&["status", "--kubeconfig", broken.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).starts_with(&format!(
            "error: cannot read the kubeconfig {}: fix the file (kubectl config view shows what it holds) or pass another with --kubeconfig:",
            broken.display()
        )),
        "{}",
        stderr(&out)
    );
    // No kubeconfig anywhere (and not in a pod).
    let out = mcsctl_with(&["status"], &[("HOME", dir.path().to_str().unwrap())]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(
        stderr(&out),
        format!(
            "error: no kubeconfig at {}: pass --kubeconfig FILE, set KUBECONFIG, or copy your cluster's kubeconfig there\n",
            dir.path().join(".kube/config").display()
        )
    );
}

#[test]
fn an_api_server_that_is_down_is_named() {
    let dir = tempfile::tempdir().unwrap();
    // A port nothing listens on: bind one, then let it go.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let config = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"));
    let out = mcsctl(&["status", "--kubeconfig", config.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    let err = stderr(&out);
    assert!(
        err.contains(&format!(
            "cannot reach the API server at http://127.0.0.1:{port}/ (context east of {})",
            config.display()
        )) && err.contains("check that the cluster is up"),
        "{err}"
    );
}

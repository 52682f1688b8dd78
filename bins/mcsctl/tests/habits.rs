//! A kubectl user's habits, one test each, on the process: global flags anywhere on the line;
//! `-o table|wide|yaml|json|name` and `--no-headers`; durations as `30s`; `mcsctl version`;
//! `-o jsonpath=`; `status --watch`; dynamic completion of contexts, namespaces and Services;
//! `plan`'s table on a terminal.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers too

mod common;

use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::Duration;

use common::{kubeconfig, mcsctl, mcsctl_with, stderr, stdout};
use kube_fake::FakeApi;
use kube_fake::fixture::cluster_east as fixture;
use kube_fake::http::ApiServer;
use serde_json::json;

fn setup(api: FakeApi) -> (tempfile::TempDir, ApiServer, String) {
    let dir = tempfile::tempdir().unwrap();
    let server = ApiServer::start(api);
    let config = kubeconfig(dir.path(), &server.url);
    (dir, server, config.to_str().unwrap().to_owned())
}

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// The namespaces the requests of a run went to.
fn namespaces_read(server: &ApiServer) -> Vec<String> {
    let mut namespaces: Vec<String> = server
        .lines()
        .iter()
        .filter_map(|l| l.split("/namespaces/").nth(1))
        .filter_map(|rest| rest.split('/').next())
        .map(str::to_owned)
        .collect();
    namespaces.dedup();
    namespaces
}

#[test]
fn global_flags_go_anywhere_on_the_line() {
    for args in [
        &["--context", "shop", "status", "--kubeconfig", "K"][..],
        &["--kubeconfig", "K", "--context", "shop", "status"][..],
        &["status", "--context", "shop", "--kubeconfig", "K"][..],
        &["-n", "shop", "--kubeconfig", "K", "status"][..],
        &["--kubeconfig", "K", "-o", "json", "-n", "shop", "status"][..],
    ] {
        let (_dir, server, config) = setup(FakeApi::with_crds(
            mcs_ceph_api::member_crds().unwrap(),
            fixture(),
        ));
        let args: Vec<&str> = args
            .iter()
            .map(|a| if *a == "K" { config.as_str() } else { a })
            .collect();
        let out = mcsctl(&args);
        assert_eq!(out.status.code(), Some(0), "{args:?}: {}", stderr(&out));
        assert_eq!(namespaces_read(&server), ["shop"], "{args:?}");
        if args.contains(&"json") {
            let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
            assert_eq!(json["scope"], "namespace shop");
        } else {
            assert!(stdout(&out).ends_with("No problems found.\n"), "{args:?}");
        }
    }
    // -A still refuses -n, wherever -n is.
    let out = mcsctl(&["-n", "shop", "status", "-A"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn output_formats_wide_name_and_no_headers() {
    let (_dir, _server, config) = setup(FakeApi::with_crds(
        mcs_ceph_api::member_crds().unwrap(),
        fixture(),
    ));
    let status = |extra: &[&str]| {
        let out = mcsctl(&[&["status", "--kubeconfig", &config, "-A"][..], extra].concat());
        assert_eq!(out.status.code(), Some(1), "{extra:?}: {}", stderr(&out));
        stdout(&out)
    };
    // name: kubectl's resource.group/name lines.
    let names = status(&["-o", "name"]);
    let lines: Vec<&str> = names.lines().collect();
    assert_eq!(lines[0], "cephcluster.ceph.rook.io/my-cluster");
    assert!(
        lines.contains(&"serviceexport.multicluster.x-k8s.io/rook-ceph-mon-a"),
        "{names}"
    );
    assert!(
        lines.contains(&"serviceimport.multicluster.x-k8s.io/api"),
        "{names}"
    );
    assert!(lines.iter().all(|l| l.contains('/') && !l.contains(' ')));
    // wide: the Ready reason and message columns.
    let table = status(&[]);
    let wide = status(&["-o", "wide"]);
    assert!(!table.contains("MESSAGE"), "{table}");
    assert!(
        wide.contains("REASON") && wide.contains("MESSAGE"),
        "{wide}"
    );
    assert!(
        wide.lines()
            .any(|l| l.contains("rook-ceph-mon-b") && l.contains("No global IP")),
        "{wide}"
    );
    // --no-headers: no column header lines, the rows stay.
    let bare = status(&["--no-headers"]);
    assert!(
        !bare.contains("DAEMON") && !bare.contains("NAMESPACE"),
        "{bare}"
    );
    assert!(bare.contains("rook-ceph-mon-a"), "{bare}");

    // crds and plan list objects too.
    let crds = stdout(&mcsctl(&["crds", "-o", "name"]));
    assert_eq!(
        crds,
        "customresourcedefinition.apiextensions.k8s.io/serviceexports.multicluster.x-k8s.io\n\
         customresourcedefinition.apiextensions.k8s.io/serviceimports.multicluster.x-k8s.io\n"
    );
    let crds = stdout(&mcsctl(&["crds", "-o", "wide", "--no-headers"]));
    assert!(
        crds.starts_with("serviceexports.multicluster.x-k8s.io ")
            && crds.contains("serviceexports   "),
        "{crds}"
    );
    let cluster = repo("examples/cephcluster.yaml");
    let inventory = repo("examples/inventory.yaml");
    let plan = mcsctl(&[
        "plan",
        "--cluster",
        cluster.to_str().unwrap(),
        "--inventory",
        inventory.to_str().unwrap(),
        "-o",
        "name",
    ]);
    let plan = stdout(&plan);
    assert!(
        plan.lines()
            .any(|l| l.starts_with("service/rook-ceph-mon-"))
            && plan
                .lines()
                .any(|l| l.starts_with("serviceexport.multicluster.x-k8s.io/")),
        "{plan}"
    );

    // A bad value lists the choices; a format a command does not print names the ones it does.
    let out = mcsctl(&["crds", "-o", "xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("[possible values: table, wide, yaml, json, name]"),
        "{}",
        stderr(&out)
    );
    let out = mcsctl(&["diagnose", "web", "-o", "name"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out)
            .contains("mcsctl diagnose does not print -o name: it takes table, wide, yaml, json"),
        "{}",
        stderr(&out)
    );
    assert!(out.stdout.is_empty());
    let out = mcsctl(&["demo", "-o", "json"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
}

#[test]
fn jsonpath_templates_as_kubectls_and_a_clear_refusal_of_the_rest() {
    let (_dir, _server, config) = setup(FakeApi::with_crds(
        mcs_ceph_api::member_crds().unwrap(),
        fixture(),
    ));
    let out = mcsctl(&[
        "status",
        "--kubeconfig",
        &config,
        "-n",
        "shop",
        "-o",
        r#"jsonpath={range .services[*]}{.namespace}/{.name}{"\t"}{.import.ips[0]}{"\n"}{end}"#,
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    assert_eq!(
        stdout(&out),
        "shop/api\t243.0.1.2\nshop/db\t\nshop/web\t243.0.1.1\n"
    );
    let out = mcsctl(&["crds", "-o", "jsonpath={[*].spec.names.kind}"]);
    assert_eq!(stdout(&out), "ServiceExport ServiceImport");
    let out = mcsctl(&["status", "-o", "jsonpath={..name}"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("recursive descent (..) is not supported by mcsctl")
            && stderr(&out).contains("pipe -o json into jq instead"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn durations_are_go_durations_and_the_old_flags_still_work_with_a_warning() {
    // A nameserver that never answers: each attempt takes its whole timeout.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let address = silent.local_addr().unwrap().to_string();
    let resolve = |timeout: &[&str]| {
        let args = [
            &[
                "resolve",
                "web.shop.svc.clusterset.local",
                "--nameserver",
                &address,
                "--attempts",
                "1",
            ][..],
            timeout,
        ]
        .concat();
        mcsctl(&args)
    };
    let out = resolve(&["--timeout=300ms"]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stderr(&out).contains("no answer after 1 attempts of 300ms each")
            || stderr(&out).contains("no answer after 1 attempt"),
        "{}",
        stderr(&out)
    );
    assert!(!stderr(&out).contains("warning"), "{}", stderr(&out));
    let out = resolve(&["--timeout", "30"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains(
            "invalid value '30' for '--timeout <DURATION>': time: missing unit in duration \"30\" (a number needs a unit: 30s, 30ms, 30m)"
        ),
        "{}",
        stderr(&out)
    );
    let out = resolve(&["--timeout-ms", "300"]);
    assert_eq!(out.status.code(), Some(1), "{}", stderr(&out));
    assert!(
        stderr(&out).starts_with(
            "warning: --timeout-ms is deprecated and will be removed: use --timeout=300ms\n"
        ),
        "{}",
        stderr(&out)
    );
    let out = resolve(&["--timeout-ms", "300", "--timeout", "1s"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let out = mcsctl(&["demo", "--timeout", "ten minutes"]);
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    drop(silent);
}

fn clusterset_pod(name: &str, component: &str) -> serde_json::Value {
    json!({"apiVersion": "v1", "kind": "Pod", "metadata": {
        "name": name, "namespace": "clusterset-system", "labels": {
            "app.kubernetes.io/part-of": "clusterset",
            "app.kubernetes.io/name": component,
            "app.kubernetes.io/version": "0.1.0"}},
        "spec": {"containers": [{"name": component, "image": format!("registry.example/{component}:0.1.0")}]},
        "status": {"conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": component, "ready": true, "restartCount": 0,
                "image": format!("registry.example/{component}:0.1.0"), "imageID": ""}]}})
}

#[test]
fn version_shows_client_server_and_components() {
    let client = format!("Client Version: {}\n", env!("CARGO_PKG_VERSION"));
    let out = mcsctl(&["version", "--client"]);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(stdout(&out), client);

    let mut objects = fixture();
    objects.push(clusterset_pod(
        "clusterset-agent-7d9f-a",
        "clusterset-agent",
    ));
    objects.push(clusterset_pod(
        "mcs-ceph-operator-5c4b-x",
        "mcs-ceph-operator",
    ));
    let (_dir, server, config) = setup(FakeApi::with_crds(
        mcs_ceph_api::member_crds().unwrap(),
        objects,
    ));
    let out = mcsctl(&["version", "--kubeconfig", &config]);
    assert_eq!(out.status.code(), Some(0), "{}", stderr(&out));
    let text = stdout(&out);
    assert!(
        text.starts_with(&format!(
            "{client}Server Version: {}\nCOMPONENT ",
            kube_fake::api::SERVER_VERSION
        )),
        "{text}"
    );
    let row = |pod: &str| -> Vec<String> {
        text.lines()
            .find(|l| l.contains(pod))
            .unwrap_or_else(|| panic!("no {pod} in\n{text}"))
            .split_whitespace()
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        row("clusterset-agent-7d9f-a"),
        [
            "clusterset-agent",
            "clusterset-system",
            "clusterset-agent-7d9f-a",
            "0.1.0",
            "registry.example/clusterset-agent:0.1.0",
            "1/1"
        ]
    );
    assert_eq!(row("mcs-ceph-operator-5c4b-x")[0], "mcs-ceph-operator");
    assert!(
        server.lines().contains(
            &"GET /api/v1/pods?labelSelector=app.kubernetes.io/part-of=clusterset".to_owned()
        ),
        "{:#?}",
        server.lines()
    );
    let out = mcsctl(&["version", "--kubeconfig", &config, "-o", "json"]);
    let json: serde_json::Value = serde_json::from_str(&stdout(&out)).unwrap();
    assert_eq!(json["clientVersion"]["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(
        json["serverVersion"]["gitVersion"],
        kube_fake::api::SERVER_VERSION
    );
    assert_eq!(json["components"][1]["name"], "mcs-ceph-operator");
    assert_eq!(json["components"][1]["ready"], true);

    // No cluster: the client's version, then the error naming the kubeconfig.
    let dir = tempfile::tempdir().unwrap();
    let out = mcsctl_with(&["version"], &[("HOME", dir.path().to_str().unwrap())]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), client);
    assert!(
        stderr(&out).starts_with("error: no kubeconfig at "),
        "{}",
        stderr(&out)
    );
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let down = kubeconfig(dir.path(), &format!("http://127.0.0.1:{port}"));
    let out = mcsctl(&["version", "--kubeconfig", down.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(stdout(&out), client);
    assert!(
        stderr(&out).contains("cannot reach the API server")
            && stderr(&out).contains("(context east of"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn status_watch_prints_a_new_report_when_an_object_changes_and_ctrl_c_ends_it() {
    let (_dir, server, config) = setup(FakeApi::with_crds(
        mcs_ceph_api::member_crds().unwrap(),
        fixture(),
    ));
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcsctl"))
        .args(["status", "--watch", "--kubeconfig", &config, "-n", "shop"])
        .env_remove("KUBECONFIG")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (lines, received) = mpsc::channel();
    let stdout = child.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if lines.send(line).is_err() {
                break;
            }
        }
    });
    let next_report = || {
        let mut report = Vec::new();
        loop {
            let line = received
                .recv_timeout(Duration::from_secs(30))
                .unwrap_or_else(|_| panic!("no complete report; so far: {report:#?}"));
            let last = line == "No problems found." || line.starts_with("  - ");
            report.push(line);
            if last
                && report
                    .iter()
                    .any(|l| l.starts_with("Problems") || l.starts_with("No problems"))
            {
                // Problems are listed one per line: take them all.
                while let Ok(more) = received.recv_timeout(Duration::from_millis(500)) {
                    if more.is_empty() {
                        break;
                    }
                    report.push(more);
                }
                return report;
            }
        }
    };
    let first = next_report();
    assert_eq!(first.last().map(String::as_str), Some("No problems found."));
    // The export of web stops being Ready.
    server.put(json!({"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
        "metadata": {"name": "web", "namespace": "shop"},
        "status": {"conditions": [
            {"type": "Valid", "status": "True", "reason": "Valid", "message": "Service is valid for export", "lastTransitionTime": "2025-01-01T00:00:00Z"},
            {"type": "Conflict", "status": "False", "reason": "NoConflicts", "message": "", "lastTransitionTime": "2025-01-01T00:00:00Z"},
            {"type": "Ready", "status": "False", "reason": "Pending", "message": "not at the broker yet", "lastTransitionTime": "2025-01-02T00:00:00Z"}]}}));
    let second = next_report();
    assert!(second.iter().any(|l| l == "Problems (1):"), "{second:#?}");
    assert!(
        second
            .iter()
            .any(|l| l.contains("ServiceExport shop/web: Ready=False (Pending)")),
        "{second:#?}"
    );
    let watches: Vec<String> = server
        .lines()
        .into_iter()
        .filter(|l| l.contains("watch=true"))
        .collect();
    assert!(
        watches.iter().any(|l| l.starts_with(
            "GET /apis/multicluster.x-k8s.io/v1beta1/namespaces/shop/serviceexports?"
        )),
        "{watches:#?}"
    );
    let interrupt = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(interrupt.success());
    let status = child.wait().unwrap();
    assert_eq!(status.code(), Some(0));
}

#[test]
fn dynamic_completion_offers_contexts_namespaces_and_services() {
    let dir = tempfile::tempdir().unwrap();
    let config = kubeconfig(dir.path(), "http://127.0.0.1:9");
    let complete = |line: &[&str], env: &[(&str, &str)]| {
        let index = (line.len() - 1).to_string();
        let mut command = Command::new(env!("CARGO_BIN_EXE_mcsctl"));
        command
            .arg("--")
            .args(line)
            .env("COMPLETE", "bash")
            .env("_CLAP_COMPLETE_INDEX", index)
            .env_remove("KUBECONFIG")
            .envs(env.iter().copied());
        let out = command.output().unwrap();
        assert!(out.status.success(), "{}", stderr(&out));
        stdout(&out)
            .lines()
            .map(str::to_owned)
            .collect::<Vec<String>>()
    };
    let config = config.to_str().unwrap();
    assert_eq!(
        complete(&["mcsctl", "--context", ""], &[("KUBECONFIG", config)]),
        ["east", "shop"]
    );
    assert_eq!(
        complete(
            &["mcsctl", "status", "--context", "s"],
            &[("KUBECONFIG", config)]
        ),
        ["shop"]
    );
    // The kubeconfig on the line wins over the environment's.
    assert_eq!(
        complete(
            &["mcsctl", "--kubeconfig", config, "status", "--context", ""],
            &[("HOME", dir.path().to_str().unwrap())]
        ),
        ["east", "shop"]
    );
    // Namespaces and Services come from the cluster the line names.
    let mut objects = fixture();
    for name in ["rook-ceph", "shop"] {
        objects.push(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}));
    }
    let (_api_dir, _server, cluster) = setup(FakeApi::with_crds(
        mcs_ceph_api::member_crds().unwrap(),
        objects,
    ));
    assert_eq!(
        complete(
            &["mcsctl", "--kubeconfig", &cluster, "status", "-n", ""],
            &[]
        ),
        ["rook-ceph", "shop"]
    );
    let services = complete(
        &[
            "mcsctl",
            "--kubeconfig",
            &cluster,
            "-n",
            "shop",
            "diagnose",
            "",
        ],
        &[],
    );
    assert!(
        services.contains(&"web".to_owned())
            && !services.iter().any(|s| s.starts_with("rook-ceph")),
        "{services:?}"
    );
    // The registration script for bash.
    let out = Command::new(env!("CARGO_BIN_EXE_mcsctl"))
        .env("COMPLETE", "bash")
        .output()
        .unwrap();
    assert!(
        stdout(&out).contains("_clap_complete_mcsctl"),
        "{}",
        stdout(&out)
    );
}

#[test]
fn plan_prints_the_table_on_a_terminal_and_yaml_on_a_pipe() {
    let cluster = repo("examples/cephcluster.yaml");
    let inventory = repo("examples/inventory.yaml");
    let args = format!(
        "plan --cluster {} --inventory {}",
        cluster.display(),
        inventory.display()
    );
    let mcsctl_path = env!("CARGO_BIN_EXE_mcsctl");
    assert!(!args.contains(['\'', '"']) && !mcsctl_path.contains(' '));
    let on_terminal = |extra: &str| {
        let out = Command::new("script")
            .args([
                "-q",
                "-e",
                "-c",
                &format!("{mcsctl_path} {args} {extra}"),
                "/dev/null",
            ])
            .env("NO_COLOR", "1")
            .output()
            .expect("script (bsdutils) runs mcsctl on a terminal");
        String::from_utf8_lossy(&out.stdout).replace('\r', "")
    };
    let terminal = on_terminal("");
    assert!(
        terminal.starts_with("CephCluster rook-ceph/rook-ceph: MCS enabled, clusterID east"),
        "{terminal}"
    );
    assert!(terminal.contains("\nDAEMON "), "{terminal}");
    let yaml = on_terminal("-o yaml");
    assert!(yaml.starts_with("cluster:"), "{yaml}");
    let piped = mcsctl(&args.split(' ').collect::<Vec<_>>());
    assert_eq!(piped.status.code(), Some(0));
    let document: serde_json::Value = serde_saphyr::from_str(&stdout(&piped)).unwrap();
    assert_eq!(document["nextMonId"], "e");
}

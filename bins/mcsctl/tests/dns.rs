//! `mcsctl dns serve` and `mcsctl resolve` as processes: serving a YAML file, answering through
//! the resolver, reloading on SIGHUP, and keeping the last good zone when the file turns bad.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::{Duration, Instant};

const ZONE_V1: &str = r#"
apiVersion: multicluster.x-k8s.io/v1beta1
kind: ServiceImport
metadata: {name: rook-ceph-mon-a, namespace: rook-ceph}
spec:
  type: ClusterSetIP
  ips: ["242.1.0.11"]
  ports: [{name: tcp-msgr2, port: 3300}]
---
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: rook-ceph-mon-a-east
  namespace: rook-ceph
  labels:
    multicluster.kubernetes.io/service-name: rook-ceph-mon-a
    multicluster.kubernetes.io/source-cluster: east
addressType: IPv4
ports: [{name: tcp-msgr2, port: 3300, protocol: TCP}]
endpoints: [{addresses: ["10.96.0.11"]}]
"#;

const ZONE_V2_AS_LIST: &str = r#"
apiVersion: v1
kind: List
items:
- apiVersion: multicluster.x-k8s.io/v1alpha1
  kind: ServiceImport
  metadata: {name: rook-ceph-mon-a, namespace: rook-ceph}
  spec:
    type: ClusterSetIP
    ips: ["242.1.0.99"]
    ports: [{name: tcp-msgr2, port: 3300}]
"#;

const BAD: &str = r#"
apiVersion: discovery.k8s.io/v1
kind: EndpointSlice
metadata:
  name: web-east
  namespace: shop
  labels:
    multicluster.kubernetes.io/service-name: web
    multicluster.kubernetes.io/source-cluster: east
addressType: IPv4
endpoints: [{addresses: "10.0.0.1"}]
"#;

/// The server process; killed when dropped so no test leaves it behind.
struct Serve {
    child: Child,
    address: String,
    stderr: Receiver<String>,
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn serve(file: &Path, extra: &[&str]) -> Serve {
    let mut child = Command::new(env!("CARGO_BIN_EXE_mcsctl"))
        .args([
            "dns",
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--udp-workers",
            "1",
            "--from-file",
        ])
        .arg(file)
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let (tx, stderr) = channel();
    let err = child.stderr.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(err).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    // Only the first line is read, and stdout closed after it, as `| head -1` would: the
    // server must go on serving (and reloading) without a reader of its stdout.
    let mut first = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut first)
        .unwrap();
    // "serving clusterset.local on 127.0.0.1:PORT (UDP and TCP) from N objects in FILE"
    let address = first
        .split_whitespace()
        .nth(3)
        .unwrap_or_else(|| panic!("unexpected first line {first:?}"))
        .to_owned();
    assert!(
        first.contains("from 2 objects") || first.contains("objects"),
        "{first}"
    );
    Serve {
        child,
        address,
        stderr,
    }
}

fn mcsctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcsctl"))
        .args(args)
        .output()
        .unwrap()
}

fn resolve(server: &Serve, args: &[&str]) -> Output {
    let mut all = vec![
        "resolve",
        "--nameserver",
        server.address.as_str(),
        "--timeout=300ms",
    ];
    all.extend_from_slice(args);
    mcsctl(&all)
}

fn hangup(server: &Serve) {
    let status = Command::new("kill")
        .args(["-HUP", &server.child.id().to_string()])
        .status()
        .unwrap();
    assert!(status.success());
}

/// Polls `resolve` until its stdout equals `expected`, with a deadline.
fn wait_for_answer(server: &Serve, args: &[&str], expected: &str) {
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let out = resolve(server, args);
        if String::from_utf8_lossy(&out.stdout) == expected {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "never got {expected:?}; last: {:?} {:?}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

const MON: &str = "rook-ceph-mon-a.rook-ceph.svc.clusterset.local";

/// `mcsctl resolve`'s table for one name.
fn answer_table(name: &str, addresses: &str) -> String {
    format!(
        "{:width$}ADDRESSES\n{name}   {addresses}\n",
        "NAME",
        width = name.len() + 3
    )
}

#[test]
fn serve_resolve_reload_and_keep_the_last_good_zone() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zone.yaml");
    std::fs::write(&file, ZONE_V1).unwrap();
    let server = serve(&file, &["--lighthouse"]);

    let out = resolve(&server, &[MON]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        answer_table(MON, "242.1.0.11")
    );
    // Rook's per-cluster form, answered in Lighthouse mode.
    let out = resolve(&server, &[MON, "--cluster-id", "east"]);
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        answer_table(&format!("east.{MON}"), "10.96.0.11")
    );
    // The same as JSON and YAML.
    let out = resolve(&server, &[MON, "-o", "json"]);
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        json,
        serde_json::json!([{"name": MON, "addresses": ["242.1.0.11"]}])
    );
    let out = resolve(&server, &[MON, "-o", "yaml"]);
    let yaml: serde_json::Value =
        serde_saphyr::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(yaml, json);
    // A missing name: exit 1 and a message that names it.
    let out = resolve(&server, &["nope.rook-ceph.svc.clusterset.local"]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.starts_with("error: nope.rook-ceph.svc.clusterset.local: no such name (NXDOMAIN)"),
        "{stderr}"
    );
    // In JSON the failure is in the document too, and the status is still 1.
    let out = resolve(
        &server,
        &["nope.rook-ceph.svc.clusterset.local", MON, "-o", "json"],
    );
    assert_eq!(out.status.code(), Some(1));
    let json: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(json[0]["addresses"], serde_json::json!([]));
    assert!(
        json[0]["error"]
            .as_str()
            .unwrap()
            .contains("no such name (NXDOMAIN)"),
        "{json}"
    );
    assert_eq!(json[1]["addresses"], serde_json::json!(["242.1.0.11"]));

    // A bad file: rejected with object and field, the old zone keeps serving.
    std::fs::write(&file, BAD).unwrap();
    hangup(&server);
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut lines = Vec::new();
    while !lines
        .iter()
        .any(|l: &String| l.starts_with("reload rejected"))
    {
        let left = deadline.saturating_duration_since(Instant::now());
        assert!(
            !left.is_zero(),
            "no rejection reported; stderr so far: {lines:?}"
        );
        if let Ok(line) = server.stderr.recv_timeout(left) {
            lines.push(line);
        }
    }
    assert!(
        lines.iter().any(
            |l| l.contains("EndpointSlice shop/web-east: endpoints[0].addresses: invalid type")
        ),
        "{lines:?}"
    );
    wait_for_answer(&server, &[MON], &answer_table(MON, "242.1.0.11"));

    // A good file again (a `kind: List`, v1alpha1): served after SIGHUP.
    std::fs::write(&file, ZONE_V2_AS_LIST).unwrap();
    hangup(&server);
    wait_for_answer(&server, &[MON], &answer_table(MON, "242.1.0.99"));
}

#[test]
fn a_bad_file_at_start_is_reported_and_nothing_serves() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zone.yaml");
    std::fs::write(&file, format!("{ZONE_V1}\n---\n{BAD}")).unwrap();
    let out = mcsctl(&[
        "dns",
        "serve",
        "--listen",
        "127.0.0.1:0",
        "--from-file",
        file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("EndpointSlice shop/web-east: endpoints[0].addresses"),
        "{stderr}"
    );
    assert!(stderr.contains("1 problem(s)"), "{stderr}");
}

#[test]
fn print_zone_writes_a_master_file() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("zone.yaml");
    std::fs::write(&file, ZONE_V1).unwrap();
    let out = mcsctl(&[
        "dns",
        "serve",
        "--from-file",
        file.to_str().unwrap(),
        "--print-zone",
    ]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let zone = String::from_utf8(out.stdout).unwrap();
    assert!(zone.starts_with("$ORIGIN clusterset.local.\nclusterset.local. 5 IN SOA ns.dns.clusterset.local. hostmaster.clusterset.local. "), "{zone}");
    assert!(
        zone.contains(&format!("\n{MON}. 5 IN A 242.1.0.11\n")),
        "{zone}"
    );
    assert!(
        zone.contains(&format!(
            "\n_tcp-msgr2._tcp.{MON}. 5 IN SRV 0 100 3300 {MON}.\n"
        )),
        "{zone}"
    );
}

#[test]
fn resolve_rejects_names_outside_the_zone_and_cluster_ids_on_other_forms_as_usage_errors() {
    let out = mcsctl(&["resolve", "web.shop.svc.cluster.local"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(stderr.contains("not in the clusterset zone"), "{stderr}");
    let out = mcsctl(&[
        "resolve",
        "_http._tcp.web.shop.svc.clusterset.local",
        "--cluster-id",
        "east",
    ]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8(out.stderr).unwrap();
    assert!(
        stderr.contains("--cluster-id needs service names"),
        "{stderr}"
    );
}

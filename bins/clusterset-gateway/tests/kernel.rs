//! `clusterset-gateway` against the real kernel, each test in network namespaces of its own
//! (root required; the tests fail, never skip, without it): what `apply` programs, that no
//! other table is touched, that an invalid state changes nothing, that applying is idempotent,
//! and `run` following its file.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns

mod support;

use std::io::Write as _;
use std::path::Path;
use std::time::{Duration, Instant};

use support::{Netns, ok};

const BINARY: &str = "k";

/// A gateway namespace whose link 172.31.255.1/24 (one end of a veth pair whose other end
/// stays in the namespace, unaddressed: this kernel has no dummy links) reaches the peer
/// gateway 172.31.255.2 directly.
fn gateway_netns(name: &str) -> Netns {
    let ns = Netns::create(BINARY, name);
    ns.sh("ip link add tun0 type veth peer name tun1");
    ns.sh("ip addr add 172.31.255.1/24 dev tun0");
    ns.sh("ip link set tun1 up");
    ns.sh("ip link set tun0 up");
    ns
}

fn example() -> String {
    std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/gateway-state.yaml"
    ))
    .unwrap()
}

fn write(dir: &Path, name: &str, text: &str) -> String {
    let path = dir.join(name);
    std::fs::write(&path, text).unwrap();
    path.to_string_lossy().into_owned()
}

fn strings(items: &[&str]) -> Vec<String> {
    items.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn apply_programs_exactly_the_state_s_elements_and_routes() {
    let ns = gateway_netns("elements");
    let dir = tempfile::tempdir().unwrap();
    let state = write(dir.path(), "state.yaml", &example());
    ok(ns.gateway(&["apply", "--state", &state]), "apply");
    let elements = ns.elements();
    assert_eq!(
        elements["global_to_backend"],
        strings(&["242.1.0.1 : 10.244.0.10", "242.1.0.2 : 10.244.0.11"])
    );
    assert_eq!(
        elements["multi_endpoint_exports"],
        strings(&["242.1.0.3 : goto one_of_3"])
    );
    assert_eq!(
        elements["export_endpoints"],
        strings(&[
            "242.1.0.3 . 0 : 10.244.0.20",
            "242.1.0.3 . 1 : 10.244.0.21",
            "242.1.0.3 . 2 : 10.244.0.22",
        ])
    );
    assert_eq!(
        elements["pod_to_global"],
        strings(&[
            "10.244.0.10 : 242.1.0.1",
            "10.244.0.11 : 242.1.0.2",
            "10.244.0.20 : 242.1.0.3",
            "10.244.0.21 : 242.1.0.3",
            "10.244.0.22 : 242.1.0.3",
        ])
    );
    assert_eq!(
        elements["global_cidrs"],
        strings(&["242.1.0.0/16", "242.2.0.0/16"])
    );
    assert_eq!(elements.len(), 5, "{elements:?}");
    assert_eq!(ns.routes(), strings(&["242.2.0.0/16 via 172.31.255.2"]));
    // `show` prints the table.
    let shown = ok(ns.gateway(&["show"]), "show");
    assert_eq!(Some(shown.clone()), ns.table());
    assert!(shown.contains("chain one_of_3"), "{shown}");

    // A peer gone and an export's pod moved: its route goes, the maps follow.
    let changed = example()
        .replace("endpoints: [10.244.0.10]", "endpoints: [10.244.0.99]")
        .replace(
            "  - clusterId: west\n    globalCidr: 242.2.0.0/16\n    gateway: 172.31.255.2\n",
            "",
        );
    let state = write(dir.path(), "changed.yaml", &changed);
    ok(ns.gateway(&["apply", "--state", &state]), "apply changed");
    let elements = ns.elements();
    assert_eq!(
        elements["global_to_backend"],
        strings(&["242.1.0.1 : 10.244.0.99", "242.1.0.2 : 10.244.0.11"])
    );
    assert_eq!(elements["global_cidrs"], strings(&["242.1.0.0/16"]));
    assert_eq!(ns.routes(), Vec::<String>::new());
}

#[test]
fn another_table_is_left_untouched() {
    let ns = gateway_netns("other");
    let other = "table ip other {\n\tset keep { type ipv4_addr; elements = { 10.0.0.1, 242.1.0.1 } }\n\tchain prerouting {\n\t\ttype nat hook prerouting priority dstnat - 5; policy accept;\n\t\tip daddr 242.1.0.7 dnat ip to 10.244.0.7\n\t}\n}\n";
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name, "nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(other.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());
    let before = ns.sh("nft list table ip other");
    let dir = tempfile::tempdir().unwrap();
    let state = write(dir.path(), "state.yaml", &example());
    ok(ns.gateway(&["apply", "--state", &state]), "apply");
    assert_eq!(ns.sh("nft list table ip other"), before);
    let changed = write(
        dir.path(),
        "changed.yaml",
        &example().replace("[242.1.255.253, 242.1.255.254]", "[242.1.255.250]"),
    );
    ok(ns.gateway(&["apply", "--state", &changed]), "apply changed");
    assert_eq!(ns.sh("nft list table ip other"), before);
    assert!(ns.table().unwrap().contains("snat to 242.1.255.250"));
}

#[test]
fn an_invalid_state_or_an_unreachable_peer_gateway_changes_nothing() {
    let ns = gateway_netns("invalid");
    let dir = tempfile::tempdir().unwrap();
    let state = write(dir.path(), "state.yaml", &example());
    ok(ns.gateway(&["apply", "--state", &state]), "apply");
    let (table, routes) = (ns.table().unwrap(), ns.routes());

    // Overlapping global CIDRs and an export moved outside the pod CIDR.
    let invalid = example()
        .replace("globalCidr: 242.2.0.0/16", "globalCidr: 242.1.128.0/17")
        .replace("endpoints: [10.244.0.10]", "endpoints: [10.245.0.10]");
    let bad = write(dir.path(), "invalid.yaml", &invalid);
    let out = ns.gateway(&["apply", "--state", &bad]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    for named in [
        "242.1.0.0/16",
        "242.1.128.0/17",
        "10.245.0.10",
        "10.244.0.0/24",
        "fix:",
    ] {
        assert!(stderr.contains(named), "{stderr}");
    }
    assert_eq!(ns.table().unwrap(), table);
    assert_eq!(ns.routes(), routes);

    // `check` refuses it too.
    assert!(!ns.gateway(&["check", "--state", &bad]).status.success());

    // A peer gateway this node does not reach directly.
    let unreachable = write(
        dir.path(),
        "unreachable.yaml",
        &example()
            .replace("gateway: 172.31.255.2", "gateway: 192.0.2.1")
            .replace("endpoints: [10.244.0.10]", "endpoints: [10.244.0.12]"),
    );
    let out = ns.gateway(&["apply", "--state", &unreachable]);
    assert!(!out.status.success());
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("192.0.2.1") && stderr.contains("not reachable"),
        "{stderr}"
    );
    assert_eq!(ns.table().unwrap(), table);
    assert_eq!(ns.routes(), routes);

    // Not YAML of the form.
    let garbage = write(dir.path(), "garbage.yaml", "clusterId: [\n");
    assert!(!ns.gateway(&["apply", "--state", &garbage]).status.success());
    assert_eq!(ns.table().unwrap(), table);
}

#[test]
fn applying_the_same_state_twice_gives_the_same_ruleset() {
    let ns = gateway_netns("twice");
    let dir = tempfile::tempdir().unwrap();
    let state = write(dir.path(), "state.yaml", &example());
    ok(ns.gateway(&["apply", "--state", &state]), "apply");
    let first = ns.sh("nft list ruleset");
    let routes = ns.sh("ip route show");
    ok(ns.gateway(&["apply", "--state", &state]), "apply again");
    assert_eq!(ns.sh("nft list ruleset"), first);
    assert_eq!(ns.sh("ip route show"), routes);
    // What `check` prints is what was applied: the table listed back has the same elements.
    let script = ok(ns.gateway(&["check", "--state", &state]), "check");
    assert!(script.starts_with("table ip clusterset_gw {}\ndelete table ip clusterset_gw\n"));
}

/// Waits until `condition` holds, up to 10 s; panics with `what` otherwise.
fn wait_for(what: &str, condition: impl FnMut() -> bool) {
    wait_within(what, Duration::from_secs(10), condition);
}

/// Waits until `condition` holds, up to `limit`; panics with `what` otherwise.
fn wait_within(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn run_follows_the_file_keeps_the_last_good_rules_and_leaves_them_on_sigterm() {
    let ns = gateway_netns("run");
    let dir = tempfile::tempdir().unwrap();
    let state = write(dir.path(), "state.yaml", &example());
    let log_path = dir.path().join("log");
    let log = std::fs::File::create(&log_path).unwrap();
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name])
        .arg(env!("CARGO_BIN_EXE_clusterset-gateway"))
        .args(["run", "--state", &state])
        .stderr(log)
        .spawn()
        .unwrap();
    let read_log = || std::fs::read_to_string(&log_path).unwrap_or_default();
    wait_for("the first apply", || {
        ns.table()
            .is_some_and(|t| t.contains("242.1.0.1 : 10.244.0.10"))
    });

    // One export's pod moves: applied as a delta.
    std::fs::write(
        &state,
        example().replace("endpoints: [10.244.0.10]", "endpoints: [10.244.0.77]"),
    )
    .unwrap();
    wait_for("the moved endpoint", || {
        ns.elements()["global_to_backend"].contains(&"242.1.0.1 : 10.244.0.77".to_owned())
    });
    wait_for("the delta's log line", || read_log().contains("Delta"));
    let good = ns.table().unwrap();

    // A route someone else deleted: put back within the route check's period (10 s).
    let routes = ns.sh("ip route show proto 147");
    assert!(routes.contains("242.2.0.0/16"), "{routes}");
    ns.sh("ip route del 242.2.0.0/16 proto 147");
    assert!(!ns.sh("ip route show proto 147").contains("242.2.0.0/16"));
    wait_within(
        "the deleted route put back",
        Duration::from_secs(15),
        || ns.sh("ip route show proto 147") == routes,
    );
    wait_for("the route's log line", || read_log().contains("put back"));

    // An invalid file: logged, the rules stay.
    std::fs::write(&state, example().replace("242.2.0.0/16", "242.1.0.0/16")).unwrap();
    wait_for("the refusal's log line", || {
        read_log().contains("the state is invalid; keeping the last good rules")
    });
    assert!(read_log().contains("242.1.0.0/16"), "{}", read_log());
    assert_eq!(ns.table().unwrap(), good);

    // SIGTERM: it exits, the rules stay.
    ok(
        std::process::Command::new("kill")
            .args(["-TERM", &child.id().to_string()])
            .output()
            .unwrap(),
        "kill -TERM",
    );
    let status = child.wait().unwrap();
    assert!(status.success(), "{status}: {}", read_log());
    assert_eq!(ns.table().unwrap(), good);
}

/// Sends `count` UDP datagrams to `to`, each from a socket of its own (a new source port: a new
/// connection, so a new NAT decision), from a thread inside namespace `netns`.
fn send_udp_from(netns: &Netns, to: &str, count: usize) {
    let path = format!("/run/netns/{}", netns.name);
    let to: std::net::SocketAddr = to.parse().unwrap();
    std::thread::spawn(move || {
        let file = std::fs::File::open(&path).unwrap();
        nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET).unwrap();
        for _ in 0..count {
            let socket = std::net::UdpSocket::bind("0.0.0.0:0").unwrap();
            socket.send_to(b"probe", to).unwrap();
        }
    })
    .join()
    .unwrap();
}

/// The packets counted by each rule `ip daddr <address> ... counter` of table `ip probe`, by
/// address.
fn probe_counts(ns: &Netns) -> std::collections::BTreeMap<String, u64> {
    ns.sh("nft list table ip probe")
        .lines()
        .filter_map(|line| {
            let words: Vec<&str> = line.split_whitespace().collect();
            let after = |word: &str| {
                let at = words.iter().position(|w| *w == word)?;
                words.get(at + 1).copied()
            };
            Some((after("daddr")?.to_owned(), after("packets")?.parse().ok()?))
        })
        .collect()
}

#[test]
fn a_connection_to_a_global_ip_reaches_its_pod_or_one_of_its_pods() {
    // The pods are addresses of the gateway namespace itself: a DNATed datagram is delivered
    // there, and counted by destination at the input hook of a second table, `ip probe`.
    let ns = gateway_netns("packets");
    let pods = [
        "10.244.0.10",
        "10.244.0.11",
        "10.244.0.20",
        "10.244.0.21",
        "10.244.0.22",
    ];
    for pod in pods {
        ns.sh(&format!("ip addr add {pod}/32 dev lo"));
    }
    let client = Netns::create(BINARY, "packets-client");
    client.sh(&format!(
        "ip link add c0 type veth peer name g0 netns {}",
        ns.name
    ));
    client.sh("ip addr add 192.168.77.2/24 dev c0");
    client.sh("ip link set c0 up");
    client.sh("ip route add 242.1.0.0/16 via 192.168.77.1");
    ns.sh("ip addr add 192.168.77.1/24 dev g0");
    ns.sh("ip link set g0 up");
    let dir = tempfile::tempdir().unwrap();
    let state = write(dir.path(), "state.yaml", &example());
    ok(ns.gateway(&["apply", "--state", &state]), "apply");
    let probe = pods
        .iter()
        .map(|pod| format!("\t\tip daddr {pod} udp dport 9999 counter\n"))
        .collect::<String>();
    let probe = format!(
        "table ip probe {{\n\tchain input {{\n\t\ttype filter hook input priority filter; policy accept;\n{probe}\t}}\n}}\n"
    );
    let mut child = std::process::Command::new("ip")
        .args(["netns", "exec", &ns.name, "nft", "-f", "-"])
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(probe.as_bytes())
        .unwrap();
    assert!(child.wait().unwrap().success());

    // One pod: every connection reaches it.
    send_udp_from(&client, "242.1.0.1:9999", 20);
    // Three pods: each connection reaches one of them, and over 300 connections each of them
    // (the chance that a pod gets none of 300 random picks is 3 * (2/3)^300, about 10^-52).
    send_udp_from(&client, "242.1.0.3:9999", 300);
    let counts = probe_counts(&ns);
    assert_eq!(counts["10.244.0.10"], 20, "{counts:?}");
    assert_eq!(counts["10.244.0.11"], 0, "{counts:?}");
    let spread = ["10.244.0.20", "10.244.0.21", "10.244.0.22"].map(|pod| counts[pod]);
    assert_eq!(spread.iter().sum::<u64>(), 300, "{counts:?}");
    assert!(spread.iter().all(|n| *n > 0), "{counts:?}");
}

/// Our table as `nft -j` lists it, without handles, its sets and chains sorted (the kernel
/// lists them in the order they were created), every set's elements sorted, and the rules of
/// each chain in their order: two tables with the same sets, elements, chains and rules give the
/// same value, however they were built.
fn normalized_table(ns: &Netns) -> Vec<String> {
    let text = ns.sh("nft -j list table ip clusterset_gw");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let mut items: Vec<(String, String)> = Vec::new();
    for item in json["nftables"].as_array().unwrap() {
        let mut item = item.clone();
        let (kind, body) = item.as_object_mut().unwrap().iter_mut().next().unwrap();
        if kind == "metainfo" {
            continue;
        }
        let body = body.as_object_mut().unwrap();
        body.remove("handle");
        if let Some(elements) = body.get_mut("elem").and_then(|e| e.as_array_mut()) {
            elements.sort_by_key(|e| e.to_string());
        }
        // Rules by their chain only: a stable sort keeps their order within it.
        let key = match body.get("chain") {
            Some(chain) if kind == "rule" => format!("rule {chain}"),
            _ => format!("{kind} {}", serde_json::Value::Object(body.clone())),
        };
        items.push((key, item.to_string()));
    }
    items.sort_by(|a, b| a.0.cmp(&b.0));
    items.into_iter().map(|(_, item)| item).collect()
}

/// A child process killed when dropped (a failed test leaves no `run` behind).
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn run_applies_a_change_of_endpoint_counts_as_a_delta_that_gives_the_full_table() {
    let ns = gateway_netns("counts");
    let fresh = gateway_netns("counts-fresh");
    let dir = tempfile::tempdir().unwrap();
    let state = write(dir.path(), "state.yaml", &example());
    let log_path = dir.path().join("log");
    let _run = KillOnDrop(
        std::process::Command::new("ip")
            .args(["netns", "exec", &ns.name])
            .arg(env!("CARGO_BIN_EXE_clusterset-gateway"))
            .args(["run", "--state", &state])
            .stderr(std::fs::File::create(&log_path).unwrap())
            .spawn()
            .unwrap(),
    );
    let deltas = || {
        std::fs::read_to_string(&log_path)
            .unwrap_or_default()
            .matches("Delta")
            .count()
    };
    wait_for("the first apply", || {
        ns.table().is_some_and(|t| t.contains("one_of_3"))
    });
    // 242.1.0.2 gets a second pod and 242.1.0.3 loses its third: `one_of_2` comes, and
    // `one_of_3` goes (no export has three pods any more).
    let changed = example()
        .replace(
            "endpoints: [10.244.0.11]",
            "endpoints: [10.244.0.11, 10.244.0.12]",
        )
        .replace(
            "endpoints: [10.244.0.20, 10.244.0.21, 10.244.0.22]",
            "endpoints: [10.244.0.20, 10.244.0.21]",
        );
    // And back: `one_of_3` comes again, `one_of_2` goes.
    for (i, text) in [changed, example()].into_iter().enumerate() {
        // Written whole (renamed into place), so the gateway never reads half of it.
        let next = write(dir.path(), "next.yaml", &text);
        std::fs::rename(&next, &state).unwrap();
        wait_for("the delta's log line", || deltas() == i + 1);
        let full = write(dir.path(), &format!("full-{i}.yaml"), &text);
        ok(fresh.gateway(&["apply", "--state", &full]), "apply");
        assert_eq!(normalized_table(&ns), normalized_table(&fresh), "step {i}");
    }
    let table = ns.table().unwrap();
    assert!(
        table.contains("chain one_of_3") && !table.contains("one_of_2"),
        "{table}"
    );
}

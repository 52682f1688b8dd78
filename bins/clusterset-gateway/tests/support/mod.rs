//! Network namespaces of the gateway's kernel tests (named `csgw-t-...`, removed when dropped
//! and, left over by a crashed run, at the start of the next), and the readings of what the
//! gateway programmed in them.

#![allow(dead_code)] // each test binary uses part of it

use std::collections::BTreeMap;
use std::process::{Command, Output};
use std::sync::Once;

/// Every namespace of these tests starts with this.
pub const PREFIX: &str = "csgw-t-";

/// Fails the test loudly unless it runs as root (network namespaces and nftables need it).
pub fn require_root() {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let euid = status
        .lines()
        .find_map(|l| l.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .unwrap_or("unknown")
        .to_owned();
    assert_eq!(
        euid, "0",
        "the gateway's kernel tests create network namespaces and nftables tables and must run as root (effective uid {euid}); run them with sudo, as `sudo bash .ci/run` does"
    );
}

fn remove_leftovers(prefix: &str) {
    let list = Command::new("ip").args(["netns", "list"]).output().unwrap();
    for line in String::from_utf8_lossy(&list.stdout).lines() {
        if let Some(name) = line.split_whitespace().next()
            && name.starts_with(prefix)
        {
            let _ = Command::new("ip").args(["netns", "delete", name]).output();
        }
    }
}

/// A network namespace of ours, deleted when dropped.
#[derive(Debug)]
pub struct Netns {
    pub name: String,
}

impl Netns {
    /// Creates `csgw-t-<binary>-<name>` with loopback up. The first call of a test binary removes
    /// the namespaces a crashed run of the same binary left (`csgw-t-<binary>-*`).
    pub fn create(binary: &'static str, name: &str) -> Netns {
        require_root();
        static CLEANED: Once = Once::new();
        CLEANED.call_once(|| remove_leftovers(&format!("{PREFIX}{binary}-")));
        let name = format!("{PREFIX}{binary}-{name}");
        let _ = Command::new("ip").args(["netns", "delete", &name]).output();
        ok(
            Command::new("ip")
                .args(["netns", "add", &name])
                .output()
                .unwrap(),
            "ip netns add",
        );
        let netns = Netns { name };
        netns.sh("ip link set lo up");
        netns
    }

    /// Runs a program in the namespace.
    pub fn exec(&self, argv: &[&str]) -> Output {
        Command::new("ip")
            .args(["netns", "exec", &self.name])
            .args(argv)
            .output()
            .unwrap()
    }

    /// Runs a command line (split on spaces) in the namespace; its stdout; panics on failure.
    pub fn sh(&self, line: &str) -> String {
        let argv: Vec<&str> = line.split_whitespace().collect();
        ok(self.exec(&argv), line)
    }

    /// Runs `clusterset-gateway` in the namespace.
    pub fn gateway(&self, args: &[&str]) -> Output {
        let mut argv = vec![env!("CARGO_BIN_EXE_clusterset-gateway")];
        argv.extend(args);
        self.exec(&argv)
    }

    /// `nft list table ip clusterset_gw`, or `None` if it does not exist.
    pub fn table(&self) -> Option<String> {
        let out = self.exec(&["nft", "list", "table", "ip", "clusterset_gw"]);
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }

    /// The elements of every set and map of our table, read from `nft -j`, each as the script
    /// writes it (`k : v`, a prefix, `k : goto chain`, `k . i : v`), by set name.
    pub fn elements(&self) -> BTreeMap<String, Vec<String>> {
        let text = self.sh("nft -j list table ip clusterset_gw");
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        let mut out = BTreeMap::new();
        for item in json["nftables"].as_array().unwrap() {
            let Some(set) = item.get("map").or_else(|| item.get("set")) else {
                continue;
            };
            let elements = set["elem"]
                .as_array()
                .map(|elements| elements.iter().map(element_text).collect())
                .unwrap_or_default();
            out.insert(set["name"].as_str().unwrap().to_owned(), elements);
        }
        out
    }

    /// Our routes (`ip route show proto 147`), as `dst via gateway`.
    pub fn routes(&self) -> Vec<String> {
        let text = self.sh("ip -j route show proto 147");
        let json: serde_json::Value = serde_json::from_str(&text).unwrap();
        json.as_array()
            .unwrap()
            .iter()
            .map(|r| {
                format!(
                    "{} via {}",
                    r["dst"].as_str().unwrap(),
                    r["gateway"].as_str().unwrap()
                )
            })
            .collect()
    }
}

fn element_text(element: &serde_json::Value) -> String {
    fn value(v: &serde_json::Value) -> String {
        if let Some(s) = v.as_str() {
            return s.to_owned();
        }
        if let Some(prefix) = v.get("prefix") {
            return format!("{}/{}", prefix["addr"].as_str().unwrap(), prefix["len"]);
        }
        if let Some(goto) = v.get("goto") {
            return format!("goto {}", goto["target"].as_str().unwrap());
        }
        if let Some(parts) = v.get("concat").and_then(|c| c.as_array()) {
            return parts
                .iter()
                .map(|part| part.as_u64().map_or_else(|| value(part), |n| n.to_string()))
                .collect::<Vec<_>>()
                .join(" . ");
        }
        panic!("an element part this test does not read: {v}")
    }
    match element.as_array() {
        Some(pair) => format!("{} : {}", value(&pair[0]), value(&pair[1])),
        None => value(element),
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .output();
    }
}

/// The stdout of a successful command; panics with its stderr otherwise.
pub fn ok(output: Output, what: &str) -> String {
    assert!(
        output.status.success(),
        "`{what}` failed ({}): {}{}",
        output.status,
        String::from_utf8_lossy(&output.stderr),
        String::from_utf8_lossy(&output.stdout)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

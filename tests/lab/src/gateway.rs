//! The lab's gateways are the product: each is a `clusterset-gateway run --state FILE` process
//! inside its gateway namespace, fed the lab's state through that file (the gateway's offline
//! mode, docs/data-plane.md). This module finds the binary, writes the state files, starts and
//! stops the processes, and reads back what a gateway programmed (`nft -j list table ip
//! clusterset_gw`), so the lab waits on the table instead of a fixed time.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use gateway_rules::{Backend, Collection, Export, GatewayState, Peer, RuleSet, TABLE};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

use crate::topology::run;
use crate::{ClusterNet, LabError};

/// The environment variable naming the directory that holds the `clusterset-gateway` binary
/// (default: the target directory the lab's own executable runs from).
pub const GATEWAY_BIN_DIR_ENV: &str = "CLUSTERSET_LAB_BIN_DIR";
/// The gateway's binary.
pub const GATEWAY_BINARY: &str = "clusterset-gateway";
/// How long a gateway may take to program a state it was given: its `run` loop looks at the
/// file every 200 ms and applies a change as one `nft` transaction, so this is a deadline for a
/// busy machine, not an expected time.
pub const PROGRAMMED_WITHIN: Duration = Duration::from_secs(20);
/// How often the lab looks at a gateway's table while it waits for it.
const TABLE_POLL: Duration = Duration::from_millis(50);
/// How long a gateway may take to exit after SIGTERM.
const STOP_WITHIN: Duration = Duration::from_secs(10);

/// One export of a cluster in its gateway's state: a Service whose one pod is reachable at a
/// global IP (DNAT in), and leaves with it (SNAT out).
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct PodExport {
    /// The Service's namespace.
    pub namespace: String,
    /// The Service's name.
    pub service: String,
    /// The global IP, from the cluster's global CIDR.
    pub global: Ipv4Addr,
    /// The pod IP behind it.
    pub pod: Ipv4Addr,
}

/// The path of the `clusterset-gateway` binary: in [`GATEWAY_BIN_DIR_ENV`] if set, else next to
/// the running executable in the target directory (`target/<profile>`, the parent of `deps/`
/// for a test). Run by cargo (`cargo test`, `cargo run`), the lab first has cargo build it
/// (once per process, a no-op when it is current), so it never runs a gateway older than the
/// source; the error of a missing binary names the command that builds it.
pub fn gateway_binary() -> Result<PathBuf, LabError> {
    let bin_dir = match std::env::var_os(GATEWAY_BIN_DIR_ENV) {
        Some(dir) => PathBuf::from(dir),
        None => {
            let bin_dir = target_profile_dir()?;
            if let Some(cargo) = std::env::var_os("CARGO") {
                build_gateway(&cargo, &bin_dir)?;
            }
            bin_dir
        }
    };
    let path = bin_dir.join(GATEWAY_BINARY);
    if !path.is_file() {
        return Err(LabError::Host {
            problem: format!(
                "the gateway binary {} does not exist (the lab's gateways are clusterset-gateway processes)",
                path.display()
            ),
            fix: format!(
                "build it with `cargo build -p {GATEWAY_BINARY}` (the same profile and target directory as the lab), or set {GATEWAY_BIN_DIR_ENV} to the directory that holds it"
            ),
        });
    }
    Ok(path)
}

/// `target/<profile>`: the directory of the running executable, or its parent for a test
/// binary in `deps/`.
fn target_profile_dir() -> Result<PathBuf, LabError> {
    let unknown = |detail: String| LabError::Host {
        problem: format!("cannot find the target directory of this executable: {detail}"),
        fix: format!("set {GATEWAY_BIN_DIR_ENV} to the directory that holds {GATEWAY_BINARY}"),
    };
    let exe = std::env::current_exe().map_err(|e| unknown(e.to_string()))?;
    let dir = exe
        .parent()
        .ok_or_else(|| unknown(format!("{} has no parent", exe.display())))?;
    Ok(if dir.file_name().is_some_and(|name| name == "deps") {
        dir.parent().unwrap_or(dir).to_owned()
    } else {
        dir.to_owned()
    })
}

/// `cargo build --locked -p clusterset-gateway` into `bin_dir` (`target/<profile>`), once per
/// process.
fn build_gateway(cargo: &std::ffi::OsStr, bin_dir: &Path) -> Result<(), LabError> {
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let profile = bin_dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("debug");
            let target_dir = bin_dir.parent().unwrap_or(bin_dir);
            let workspace = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
            let output = std::process::Command::new(cargo)
                .current_dir(&workspace)
                .args(["build", "--locked", "-p", GATEWAY_BINARY, "--profile"])
                .arg(if profile == "debug" { "dev" } else { profile })
                .arg("--target-dir")
                .arg(target_dir)
                .output()
                .map_err(|e| format!("cannot run cargo: {e}"))?;
            if output.status.success() {
                Ok(())
            } else {
                Err(format!(
                    "{}: {}",
                    output.status,
                    String::from_utf8_lossy(&output.stderr).trim()
                ))
            }
        })
        .clone()
        .map_err(|detail| LabError::Host {
            problem: format!("building {GATEWAY_BINARY} failed: {detail}"),
            fix: format!(
                "build it with `cargo build -p {GATEWAY_BINARY}`, or set {GATEWAY_BIN_DIR_ENV} to the directory that holds it"
            ),
        })
}

/// The state a lab cluster's gateway is given: the cluster's networks and egress IP, its
/// exports (one pod each), and the other cluster as its peer.
pub fn gateway_state<'a>(
    cluster: &ClusterNet,
    peer: &ClusterNet,
    exports: impl IntoIterator<Item = &'a PodExport>,
) -> GatewayState {
    GatewayState {
        cluster_id: cluster.cluster_id.to_owned(),
        global_cidr: cluster.global_cidr,
        pod_cidr: cluster.pod_cidr,
        service_cidr: cluster.service_cidr,
        egress_ips: vec![cluster.egress_ip],
        exports: exports
            .into_iter()
            .map(|export| Export {
                namespace: export.namespace.clone(),
                name: export.service.clone(),
                global_ip: export.global,
                backend: Backend::Endpoints(vec![export.pod]),
            })
            .collect(),
        peers: vec![Peer {
            cluster_id: peer.cluster_id.to_owned(),
            global_cidr: peer.global_cidr,
            gateway: peer.tunnel_ip,
        }],
    }
}

/// Writes `state` to `path` atomically: a temporary file in the same directory, renamed over
/// it, so the gateway never reads half a file.
pub fn write_state(path: &Path, state: &GatewayState) -> Result<(), LabError> {
    let fail = |detail: String| LabError::Step {
        step: format!("writing the gateway state {}", path.display()),
        source: detail.into(),
    };
    let yaml = serde_saphyr::to_string(state).map_err(|e| fail(e.to_string()))?;
    let text = format!(
        "# The state of the lab's gateway of cluster {}, written by the lab (clusterset-gateway's offline mode).\n{yaml}",
        state.cluster_id
    );
    let temporary = path.with_extension("yaml.tmp");
    std::fs::write(&temporary, text).map_err(|e| fail(e.to_string()))?;
    std::fs::rename(&temporary, path).map_err(|e| fail(e.to_string()))
}

/// The elements of every set and map of the table `ip clusterset_gw` a rule set gives, by set
/// name, each as `nft` writes it (`key : value`, a prefix).
pub fn desired_elements(rules: &RuleSet) -> BTreeMap<String, Vec<String>> {
    Collection::ALL
        .iter()
        .map(|collection| {
            (
                collection.name().to_owned(),
                rules
                    .elements(*collection)
                    .iter()
                    .map(ToString::to_string)
                    .collect(),
            )
        })
        .collect()
}

/// `nft -j list table ip clusterset_gw` in `gateway_netns`; `None` when the table is gone (or
/// was never there), which is not an error. Anything else is.
async fn listed_table(gateway_netns: &str) -> Result<Option<String>, LabError> {
    match run(
        Some(gateway_netns),
        &["nft", "-j", "list", "table", "ip", TABLE],
    )
    .await
    {
        Ok(text) => Ok(Some(text)),
        Err(error) if table_missing(&error) => Ok(None),
        Err(error) => Err(error),
    }
}

/// What the gateway in namespace `gateway_netns` has programmed: the elements of every set and
/// map of its table, read from `nft -j`, sorted, by set name; `None` when the table does not
/// exist.
pub async fn programmed_elements(
    gateway_netns: &str,
) -> Result<Option<BTreeMap<String, Vec<String>>>, LabError> {
    let Some(text) = listed_table(gateway_netns).await? else {
        return Ok(None);
    };
    let unreadable = |detail: String| LabError::Step {
        step: format!("reading `nft -j list table ip {TABLE}` in {gateway_netns}"),
        source: detail.into(),
    };
    let json: serde_json::Value =
        serde_json::from_str(&text).map_err(|e| unreadable(e.to_string()))?;
    let items = json["nftables"]
        .as_array()
        .ok_or_else(|| unreadable(format!("no `nftables` array in {text}")))?;
    let mut sets = BTreeMap::new();
    for item in items {
        let Some(set) = item.get("map").or_else(|| item.get("set")) else {
            continue;
        };
        let name = set["name"]
            .as_str()
            .ok_or_else(|| unreadable(format!("a set without a name: {set}")))?;
        let mut elements = match set["elem"].as_array() {
            Some(elements) => elements
                .iter()
                .map(element_text)
                .collect::<Result<Vec<_>, _>>()
                .map_err(unreadable)?,
            None => Vec::new(),
        };
        elements.sort();
        sets.insert(name.to_owned(), elements);
    }
    Ok(Some(sets))
}

/// The table `ip clusterset_gw` of a gateway as the kernel has it (`nft -j list table`), in a
/// form two listings can be compared by: every object (the table, its chains, sets, maps and
/// rules, with their expressions, types, flags and elements) without the handles the kernel
/// numbers them with, sets' elements sorted, the objects sorted but each chain's rules in their
/// order. Two tables with equal
/// structures hold the same rules; `handle` is the table's own handle, which a replaced table
/// (deleted and created again) does not keep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TableStructure {
    /// The kernel's handle of the table.
    pub handle: u64,
    /// Every object of the table, handles removed, sorted.
    pub objects: Vec<serde_json::Value>,
}

impl TableStructure {
    /// Whether both tables hold the same objects (whatever their handles).
    pub fn same_rules_as(&self, other: &TableStructure) -> bool {
        self.objects == other.objects
    }

    /// The objects one table has and the other has not, both ways, as `nft -j` JSON lines.
    pub fn differences(&self, other: &TableStructure) -> (Vec<String>, Vec<String>) {
        let only = |a: &TableStructure, b: &TableStructure| {
            a.objects
                .iter()
                .filter(|o| !b.objects.contains(o))
                .map(ToString::to_string)
                .collect()
        };
        (only(self, other), only(other, self))
    }
}

/// The structure of the table `ip clusterset_gw` in `gateway_netns` ([`TableStructure`]);
/// `None` when the table does not exist.
pub async fn table_structure(gateway_netns: &str) -> Result<Option<TableStructure>, LabError> {
    let Some(text) = listed_table(gateway_netns).await? else {
        return Ok(None);
    };
    structure_of(&text)
        .map(Some)
        .map_err(|detail| LabError::Step {
            step: format!("reading `nft -j list table ip {TABLE}` in {gateway_netns}"),
            source: detail.into(),
        })
}

/// [`TableStructure`] of the text of `nft -j list table`.
fn structure_of(text: &str) -> Result<TableStructure, String> {
    fn strip(value: &mut serde_json::Value) {
        match value {
            serde_json::Value::Object(map) => {
                map.remove("handle");
                for (key, inner) in map.iter_mut() {
                    strip(inner);
                    if key == "elem"
                        && let serde_json::Value::Array(elements) = inner
                    {
                        elements.sort_by_key(ToString::to_string);
                    }
                }
            }
            serde_json::Value::Array(items) => items.iter_mut().for_each(strip),
            _ => {}
        }
    }
    let json: serde_json::Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
    let items = json["nftables"]
        .as_array()
        .ok_or_else(|| format!("no `nftables` array in {text}"))?;
    let handle = items
        .iter()
        .find_map(|item| item.get("table")?.get("handle")?.as_u64())
        .ok_or_else(|| format!("no table with a handle in {text}"))?;
    // Rules keep their order within their chain (it is their meaning); every other object is
    // sorted, as the order the kernel lists them in depends on how the table was built.
    let mut objects = Vec::new();
    let mut rules: BTreeMap<String, Vec<serde_json::Value>> = BTreeMap::new();
    for item in items.iter().filter(|item| item.get("metainfo").is_none()) {
        let mut item = item.clone();
        strip(&mut item);
        match item.get("rule") {
            Some(rule) => rules
                .entry(rule["chain"].as_str().unwrap_or_default().to_owned())
                .or_default()
                .push(item),
            None => objects.push(item),
        }
    }
    objects.sort_by_key(ToString::to_string);
    objects.extend(
        rules
            .into_iter()
            .map(|(chain, rules)| serde_json::json!({ "rules of chain": chain, "rules": rules })),
    );
    Ok(TableStructure { handle, objects })
}

/// Whether `nft list table` failed because the table does not exist (`nft` says "No such file
/// or directory"), rather than for another reason.
fn table_missing(error: &LabError) -> bool {
    matches!(error, LabError::Command { detail, .. } if detail.contains("No such file or directory"))
}

/// Whether the table `ip clusterset_gw` exists in `gateway_netns`.
pub async fn table_present(gateway_netns: &str) -> bool {
    run(Some(gateway_netns), &["nft", "list", "table", "ip", TABLE])
        .await
        .is_ok()
}

/// One element of `nft -j` as the script writes it: `key : value`, `key : goto chain`, a
/// prefix `addr/len` or an address.
fn element_text(element: &serde_json::Value) -> Result<String, String> {
    fn part(value: &serde_json::Value) -> Result<String, String> {
        if let Some(text) = value.as_str() {
            return Ok(text.to_owned());
        }
        if let Some(prefix) = value.get("prefix") {
            return Ok(format!("{}/{}", part(&prefix["addr"])?, prefix["len"]));
        }
        if let Some(target) = value.get("goto").and_then(|g| g["target"].as_str()) {
            return Ok(format!("goto {target}"));
        }
        Err(format!("an element the lab does not read: {value}"))
    }
    match element.as_array() {
        Some(pair) if pair.len() == 2 => Ok(format!("{} : {}", part(&pair[0])?, part(&pair[1])?)),
        _ => part(element),
    }
}

/// A running `clusterset-gateway run --state FILE` inside a gateway namespace.
#[derive(Debug)]
pub struct GatewayProcess {
    child: tokio::process::Child,
    log: PathBuf,
}

impl GatewayProcess {
    /// Starts `binary run --state state` in `gateway_netns`, its log (stderr) appended to `log`.
    pub fn start(
        binary: &Path,
        gateway_netns: &str,
        state: &Path,
        log: &Path,
    ) -> Result<Self, LabError> {
        let command = format!(
            "ip netns exec {gateway_netns} {} run --state {}",
            binary.display(),
            state.display()
        );
        let fail = |detail: String| LabError::Command {
            command: command.clone(),
            detail,
        };
        let stderr = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(log)
            .map_err(|e| fail(format!("opening its log {}: {e}", log.display())))?;
        let child = tokio::process::Command::new("ip")
            .args(["netns", "exec", gateway_netns])
            .arg(binary)
            .arg("run")
            .arg("--state")
            .arg(state)
            // A log file, not a terminal: no colour codes.
            .env("NO_COLOR", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true)
            .spawn()
            .map_err(|e| fail(e.to_string()))?;
        Ok(GatewayProcess {
            child,
            log: log.to_owned(),
        })
    }

    /// Whether it still runs; an error with the end of its log when it has exited.
    pub fn check_running(&mut self) -> Result<(), LabError> {
        match self.child.try_wait() {
            Ok(None) => Ok(()),
            Ok(Some(status)) => Err(LabError::Step {
                step: "running clusterset-gateway".into(),
                source: format!(
                    "it exited ({status}); its log ends with:\n{}",
                    self.log_tail()
                )
                .into(),
            }),
            Err(error) => Err(LabError::Step {
                step: "running clusterset-gateway".into(),
                source: Box::new(error),
            }),
        }
    }

    /// Stops it as an operator would (SIGTERM) and waits for it to exit: the gateway leaves its
    /// rules in place.
    pub async fn stop(mut self) -> Result<(), LabError> {
        let fail = |detail: String| LabError::Step {
            step: "stopping clusterset-gateway (SIGTERM)".into(),
            source: detail.into(),
        };
        if let Some(pid) = self.child.id() {
            let pid = i32::try_from(pid).map_err(|e| fail(e.to_string()))?;
            kill(Pid::from_raw(pid), Signal::SIGTERM).map_err(|e| fail(e.to_string()))?;
        }
        let status = tokio::time::timeout(STOP_WITHIN, self.child.wait())
            .await
            .map_err(|_| fail(format!("it did not exit within {STOP_WITHIN:?}")))?
            .map_err(|e| fail(e.to_string()))?;
        if status.success() {
            Ok(())
        } else {
            Err(fail(format!(
                "it exited with {status}; its log ends with:\n{}",
                self.log_tail()
            )))
        }
    }

    /// The last lines of its log.
    pub fn log_tail(&self) -> String {
        log_tail(&self.log)
    }
}

/// The last 20 lines of a gateway's log.
pub fn log_tail(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(20)..].join("\n")
}

/// Polls the table in `gateway_netns` until its sets and maps hold exactly `want` (what
/// `gateway-rules` computes for the state written), within [`PROGRAMMED_WITHIN`]; `alive`
/// fails the wait as soon as the gateway is known to have stopped. Returns how long it took.
pub async fn wait_programmed(
    gateway_netns: &str,
    want: &BTreeMap<String, Vec<String>>,
    mut alive: impl FnMut() -> Result<(), LabError>,
) -> Result<Duration, LabError> {
    let started = Instant::now();
    loop {
        alive()?;
        let seen = programmed_elements(gateway_netns).await?;
        if seen.as_ref() == Some(want) {
            return Ok(started.elapsed());
        }
        if started.elapsed() > PROGRAMMED_WITHIN {
            return Err(LabError::NotReached {
                what: format!("the gateway in {gateway_netns} programming {want:?}"),
                within: PROGRAMMED_WITHIN,
                last: format!("{seen:?}"),
            });
        }
        tokio::time::sleep(TABLE_POLL).await;
    }
}

/// Polls the table in `gateway_netns` until it is a new table (its handle is not
/// `old_handle`: a gateway replaced it) whose sets and maps hold exactly `want`, within
/// [`PROGRAMMED_WITHIN`]; `alive` fails the wait as soon as the gateway is known to have
/// stopped. Returns the new table's structure.
pub async fn wait_replaced(
    gateway_netns: &str,
    old_handle: u64,
    want: &BTreeMap<String, Vec<String>>,
    mut alive: impl FnMut() -> Result<(), LabError>,
) -> Result<TableStructure, LabError> {
    let started = Instant::now();
    loop {
        alive()?;
        let table = table_structure(gateway_netns).await?;
        let last = match table {
            Some(table) if table.handle != old_handle => {
                let seen = programmed_elements(gateway_netns).await?;
                if seen.as_ref() == Some(want) {
                    return Ok(table);
                }
                format!("a new table (handle {}) holding {seen:?}", table.handle)
            }
            Some(table) => format!("the old table still (handle {})", table.handle),
            None => "no table".to_owned(),
        };
        if started.elapsed() > PROGRAMMED_WITHIN {
            return Err(LabError::NotReached {
                what: format!(
                    "the gateway in {gateway_netns} replacing its table (handle {old_handle}) with one holding {want:?}"
                ),
                within: PROGRAMMED_WITHIN,
                last,
            });
        }
        tokio::time::sleep(TABLE_POLL).await;
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::structure_of;

    fn listing(table_handle: u64, elements: &str, rules: &str) -> String {
        format!(
            r#"{{"nftables": [{{"metainfo": {{"version": "1.1.3"}}}},
              {{"table": {{"family": "ip", "name": "clusterset_gw", "handle": {table_handle}}}}},
              {{"map": {{"family": "ip", "name": "global_to_backend", "table": "clusterset_gw", "type": "ipv4_addr", "handle": {}, "map": "ipv4_addr", "elem": {elements}}}}},
              {{"chain": {{"family": "ip", "table": "clusterset_gw", "name": "prerouting", "handle": 1}}}},
              {rules}]}}"#,
            table_handle + 1
        )
    }

    fn rule(handle: u64, comment: &str) -> String {
        format!(
            r#"{{"rule": {{"family": "ip", "table": "clusterset_gw", "chain": "prerouting", "handle": {handle}, "expr": [{{"accept": null}}], "comment": "{comment}"}}}}"#
        )
    }

    #[test]
    fn structures_ignore_handles_and_element_order_but_not_rule_order() {
        let a = structure_of(&listing(
            7,
            r#"[["242.1.0.1", "10.244.0.11"], ["242.1.0.2", "10.244.0.12"]]"#,
            &format!("{}, {}", rule(3, "first"), rule(4, "second")),
        ))
        .unwrap();
        let b = structure_of(&listing(
            42,
            r#"[["242.1.0.2", "10.244.0.12"], ["242.1.0.1", "10.244.0.11"]]"#,
            &format!("{}, {}", rule(90, "first"), rule(91, "second")),
        ))
        .unwrap();
        assert_eq!((a.handle, b.handle), (7, 42));
        assert!(a.same_rules_as(&b), "{:?}", a.differences(&b));
        let swapped = structure_of(&listing(
            7,
            r#"[["242.1.0.1", "10.244.0.11"], ["242.1.0.2", "10.244.0.12"]]"#,
            &format!("{}, {}", rule(3, "second"), rule(4, "first")),
        ))
        .unwrap();
        assert!(
            !a.same_rules_as(&swapped),
            "the rules' order is their meaning"
        );
        let other_pod = structure_of(&listing(
            7,
            r#"[["242.1.0.1", "10.244.0.36"], ["242.1.0.2", "10.244.0.12"]]"#,
            &format!("{}, {}", rule(3, "first"), rule(4, "second")),
        ))
        .unwrap();
        assert!(!a.same_rules_as(&other_pod));
        assert_eq!(a.differences(&other_pod).0.len(), 1, "the map differs");
    }
}

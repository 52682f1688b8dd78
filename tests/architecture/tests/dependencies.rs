//! The workspace's layout rules, checked on `cargo metadata` (the same data `cargo` builds from):
//!
//! - The pure crates that docs/architecture.md lists (its "Pure crates:" line) depend, directly
//!   or not, on none of `kube-client`, `tokio` or `hyper` (normal and build dependencies; a
//!   dev-dependency is the tests' business). A failure names the chain of crates that pulls the
//!   forbidden one in.
//! - docs/architecture.md's diagram names every package of the workspace by its directory, and
//!   names no directory that is not one; each of its `◄──` entries lists exactly the package's
//!   workspace dependencies (every normal one; dev-dependencies may be named).
//! - clusterset-dns's zone model builds without an async runtime, its resolver without its
//!   server, and its server without its resolver (`cargo tree` per feature set).
//! - mcsctl links no HTTP server and no metrics registry: it takes clusterset-daemon without
//!   its `server` and `lease` features (hyper only as kube's client, no prometheus-client).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::Path;

use clusterset_architecture::{architecture_doc, documented_list, metadata, workspace_root};

/// What a pure crate may not depend on.
const FORBIDDEN: [&str; 3] = ["kube-client", "tokio", "hyper"];

/// The resolved graph: package id -> (name, ids of its normal and build dependencies).
fn graph(metadata: &serde_json::Value) -> BTreeMap<String, (String, Vec<String>)> {
    let names: BTreeMap<&str, &str> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["id"].as_str().unwrap(), p["name"].as_str().unwrap()))
        .collect();
    metadata["resolve"]["nodes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|node| {
            let id = node["id"].as_str().unwrap();
            let deps = node["deps"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|dep| {
                    dep["dep_kinds"]
                        .as_array()
                        .unwrap()
                        .iter()
                        .any(|kind| kind["kind"].is_null() || kind["kind"] == "build")
                })
                .map(|dep| dep["pkg"].as_str().unwrap().to_owned())
                .collect();
            (id.to_owned(), (names[id].to_owned(), deps))
        })
        .collect()
}

/// The chain of package names from `from` to the first package named in `forbidden`, if any
/// (breadth first: the shortest chain).
fn forbidden_chain(
    graph: &BTreeMap<String, (String, Vec<String>)>,
    from: &str,
    forbidden: &[&str],
) -> Option<Vec<String>> {
    let mut parent: BTreeMap<&str, &str> = BTreeMap::new();
    let mut queue = VecDeque::from([from]);
    let mut seen = BTreeSet::from([from]);
    while let Some(id) = queue.pop_front() {
        let (name, deps) = &graph[id];
        if id != from && forbidden.contains(&name.as_str()) {
            let mut chain = vec![name.clone()];
            let mut at = id;
            while let Some(up) = parent.get(at) {
                chain.push(graph[*up].0.clone());
                at = up;
            }
            chain.reverse();
            return Some(chain);
        }
        for dep in deps {
            if seen.insert(dep.as_str()) {
                parent.insert(dep.as_str(), id);
                queue.push_back(dep.as_str());
            }
        }
    }
    None
}

#[test]
fn pure_crates_depend_on_no_kube_client_tokio_or_hyper() {
    let metadata = metadata();
    let graph = graph(&metadata);
    let pure = documented_list(&architecture_doc(), "Pure crates");
    assert!(pure.len() >= 5, "the doc lists the pure crates: {pure:?}");
    let members: BTreeMap<String, String> = metadata["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| {
            let id = id.as_str().unwrap().to_owned();
            (graph[&id].0.clone(), id)
        })
        .collect();
    let mut broken = Vec::new();
    for name in &pure {
        let id = members.get(name).unwrap_or_else(|| {
            panic!(
                "docs/architecture.md calls {name:?} pure, but it is no package of the workspace"
            )
        });
        if let Some(chain) = forbidden_chain(&graph, id, &FORBIDDEN) {
            broken.push(chain.join(" -> "));
        }
    }
    assert!(
        broken.is_empty(),
        "pure crates must not depend on {FORBIDDEN:?} (move the code that needs them to a runtime crate or binary): {broken:#?}"
    );
}

#[test]
fn the_check_finds_a_forbidden_crate_however_deep() {
    let node = |name: &str, deps: &[&str]| {
        (
            name.to_owned(),
            (
                name.to_owned(),
                deps.iter().map(|d| (*d).to_owned()).collect(),
            ),
        )
    };
    let graph: BTreeMap<String, (String, Vec<String>)> = [
        node("core", &["util"]),
        node("util", &["runtime-glue"]),
        node("runtime-glue", &["tokio"]),
        node("tokio", &[]),
        node("clean", &["util-free"]),
        node("util-free", &[]),
    ]
    .into_iter()
    .collect();
    assert_eq!(
        forbidden_chain(&graph, "core", &FORBIDDEN),
        Some(vec![
            "core".to_owned(),
            "util".into(),
            "runtime-glue".into(),
            "tokio".into()
        ])
    );
    assert_eq!(forbidden_chain(&graph, "clean", &FORBIDDEN), None);
}

#[test]
fn the_architecture_diagram_names_every_package_and_only_packages() {
    let metadata = metadata();
    let root = workspace_root();
    let dirs: BTreeSet<String> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"].is_null())
        .map(|p| {
            Path::new(p["manifest_path"].as_str().unwrap())
                .parent()
                .unwrap()
                .strip_prefix(&root)
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    let doc = architecture_doc();
    let named: BTreeSet<String> = diagram(&doc)
        .split(|c: char| c.is_whitespace() || c == ',' || c == '(' || c == ')')
        .filter(|word| {
            ["crates/", "bins/", "tests/"]
                .iter()
                .any(|p| word.starts_with(p))
        })
        .map(|word| word.trim_end_matches(['.', ':', ';']).to_owned())
        .collect();
    let missing: Vec<&String> = dirs.difference(&named).collect();
    let unknown: Vec<&String> = named.difference(&dirs).collect();
    assert!(
        missing.is_empty() && unknown.is_empty(),
        "docs/architecture.md's diagram must name every package by its directory: missing {missing:?}, naming what is no package {unknown:?}"
    );
}

/// The crates `cargo tree` shows `package` depending on (normal and build dependencies) when it
/// is built alone with `features` and no default features.
fn dependencies_with(package: &str, features: &str) -> BTreeSet<String> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let mut args = vec![
        "tree",
        "--locked",
        "--offline",
        "-p",
        package,
        "--no-default-features",
        "-e",
        "normal,build",
        "--prefix",
        "none",
        "--format",
        "{p}",
    ];
    if !features.is_empty() {
        args.extend(["--features", features]);
    }
    let out = std::process::Command::new(cargo)
        .args(&args)
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_dns_zone_model_needs_no_runtime_and_the_resolver_no_server() {
    // Without features: the zone model, index, wire format and store only.
    let model = dependencies_with("clusterset-dns", "");
    for runtime in ["tokio", "hickory-resolver", "socket2", "nix", "hyper"] {
        assert!(
            !model.contains(runtime),
            "clusterset-dns without features depends on {runtime}: the zone model must stay pure"
        );
    }
    // The resolver alone (what the operator uses) brings no server: no batched UDP IO (nix;
    // socket2 comes with tokio's networking either way).
    let resolver = dependencies_with("clusterset-dns", "resolver");
    assert!(resolver.contains("hickory-resolver"), "{resolver:?}");
    assert!(
        !resolver.contains("nix"),
        "clusterset-dns with only the resolver depends on nix, the server's"
    );
    // The server alone needs no resolver.
    let server = dependencies_with("clusterset-dns", "server");
    assert!(
        server.contains("tokio") && !server.contains("hickory-resolver"),
        "{server:?}"
    );
}

/// The features `package`'s build (normal dependencies, its default features) enables on
/// `dependency`, or `None` when it does not depend on it.
fn features_of(package: &str, dependency: &str) -> Option<BTreeSet<String>> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let args = [
        "tree",
        "--locked",
        "--offline",
        "-p",
        package,
        "-e",
        "normal",
        "--prefix",
        "none",
        "--format",
        "{p} {f}",
    ];
    let out = std::process::Command::new(cargo)
        .args(args)
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_once(' '))
        .filter(|(name, _)| *name == dependency)
        // `name vX.Y.Z [(path)] features`; features are the last word (none: nothing after).
        .map(|(_, rest)| {
            let features = rest
                .trim_end_matches(" (*)")
                .rsplit(' ')
                .next()
                .unwrap_or("");
            let features = if features.starts_with('v') || features.ends_with(')') {
                ""
            } else {
                features
            };
            features
                .split(',')
                .filter(|f| !f.is_empty())
                .map(str::to_owned)
                .collect::<BTreeSet<String>>()
        })
        .reduce(|mut all, more| {
            all.extend(more);
            all
        })
}

#[test]
fn the_command_line_links_no_http_server_and_no_metrics_registry() {
    // clusterset-daemon without its features (what mcsctl takes): the kubeconfig, no server,
    // no metrics, no elector.
    let daemon = dependencies_with("clusterset-daemon", "");
    for server in ["prometheus-client", "kube-lease"] {
        assert!(
            !daemon.contains(server),
            "clusterset-daemon without features depends on {server}"
        );
    }
    // mcsctl: hyper is kube's HTTP client, without its server half; no metrics registry.
    assert_eq!(
        features_of("mcsctl", "prometheus-client"),
        None,
        "mcsctl links prometheus-client"
    );
    let hyper = features_of("mcsctl", "hyper").unwrap_or_default();
    assert!(
        hyper.contains("client") && !hyper.contains("server"),
        "mcsctl links hyper with the features {hyper:?}: the server is the daemons'"
    );
}

/// The workspace packages that the `◄──` entries of docs/architecture.md's diagram list for each
/// package directory: an entry is a line `DIR ◄── ...` and the indented lines after it; every
/// word of it that is a workspace package's name counts (so `mcs-controller's` in a comment
/// does not).
fn diagram_entries(
    diagram: &str,
    packages: &BTreeSet<String>,
) -> BTreeMap<String, BTreeSet<String>> {
    let mut entries: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut current: Option<String> = None;
    for line in diagram.lines() {
        if !line.starts_with(char::is_whitespace) {
            current = line.split_once("◄──").map(|(dir, _)| dir.trim().to_owned());
        }
        let Some(dir) = &current else { continue };
        let listed = line.split_once("◄──").map_or(line, |(_, rest)| rest);
        let names = listed
            .split(|c: char| c.is_whitespace() || matches!(c, ',' | '(' | ')' | ';' | ':'))
            .filter(|word| packages.contains(*word))
            .map(str::to_owned);
        entries.entry(dir.clone()).or_default().extend(names);
    }
    entries
}

/// The diagram's section of docs/architecture.md.
fn diagram(doc: &str) -> &str {
    doc.split("## Crates and arrows")
        .nth(1)
        .and_then(|rest| rest.split("```").nth(1))
        .expect("docs/architecture.md has a diagram under \"## Crates and arrows\"")
}

#[test]
fn every_diagram_entry_lists_exactly_its_package_s_workspace_dependencies() {
    let metadata = metadata();
    let root = workspace_root();
    let workspace: Vec<&serde_json::Value> = metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| p["source"].is_null())
        .collect();
    let names: BTreeSet<String> = workspace
        .iter()
        .map(|p| p["name"].as_str().unwrap().to_owned())
        .collect();
    let doc = architecture_doc();
    let entries = diagram_entries(diagram(&doc), &names);
    assert!(
        entries.contains_key("bins/mcs-ceph-operator"),
        "the diagram has `◄──` entries: {entries:?}"
    );
    let mut wrong = Vec::new();
    for package in &workspace {
        let dir = Path::new(package["manifest_path"].as_str().unwrap())
            .parent()
            .unwrap()
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .into_owned();
        let Some(listed) = entries.get(&dir) else {
            continue;
        };
        let deps = |kinds: &[Option<&str>]| -> BTreeSet<String> {
            package["dependencies"]
                .as_array()
                .unwrap()
                .iter()
                .filter(|d| names.contains(d["name"].as_str().unwrap()))
                .filter(|d| kinds.contains(&d["kind"].as_str()))
                .map(|d| d["name"].as_str().unwrap().to_owned())
                .collect()
        };
        let normal = deps(&[None, Some("build")]);
        let any = deps(&[None, Some("build"), Some("dev")]);
        let missing: Vec<&String> = normal.difference(listed).collect();
        let not_dependencies: Vec<&String> = listed.difference(&any).collect();
        if !missing.is_empty() || !not_dependencies.is_empty() {
            wrong.push(format!(
                "{dir}: missing {missing:?}, listed but no dependency {not_dependencies:?}"
            ));
        }
    }
    assert!(
        wrong.is_empty(),
        "docs/architecture.md's `◄──` entries must list each package's workspace dependencies (its Cargo.toml's):\n{}",
        wrong.join("\n")
    );
}

#[test]
fn a_diagram_entry_is_read_with_its_indented_lines_and_only_package_names() {
    let packages: BTreeSet<String> = ["a", "b", "c", "d"].map(str::to_owned).into();
    let diagram = "crates/x ◄── a, b (what b does for d's sake)\n    c; tests: d\ncrates/y  (no arrow)\n    a\n";
    let entries = diagram_entries(diagram, &packages);
    assert_eq!(
        entries,
        BTreeMap::from([(
            "crates/x".to_owned(),
            ["a", "b", "c", "d"].map(str::to_owned).into()
        )])
    );
}

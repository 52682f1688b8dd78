//! Which packages are published, and how packages may depend on each other, checked on
//! `cargo metadata`:
//!
//! - The packages docs/architecture.md's "Published crates" paragraph lists, and only they, may
//!   be published (every other one says `publish = false`); each has a description, a README,
//!   keywords and categories, and its normal and build dependencies within the workspace are
//!   published ones.
//! - No dependency cycle among the workspace's packages, dev-dependencies included (Cargo
//!   allows a cycle through a dev-dependency; it stops a crate from being published and makes
//!   the layout hard to follow).
//! - No package depends on a binary's package (`bins/`).
//! - The generic test support (the fake API server, the syntax rules it applies) depends on no
//!   domain crate.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use clusterset_architecture::{architecture_doc, documented_list, metadata};
use serde_json::Value;

/// The workspace's packages by name.
fn members(metadata: &Value) -> BTreeMap<String, Value> {
    let ids: BTreeSet<&str> = metadata["workspace_members"]
        .as_array()
        .unwrap()
        .iter()
        .map(|id| id.as_str().unwrap())
        .collect();
    metadata["packages"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|p| ids.contains(p["id"].as_str().unwrap()))
        .map(|p| (p["name"].as_str().unwrap().to_owned(), p.clone()))
        .collect()
}

/// `package`'s dependencies on workspace packages: (name, kind: "normal", "dev" or "build").
fn workspace_dependencies<'a>(
    package: &'a Value,
    members: &'a BTreeMap<String, Value>,
) -> impl Iterator<Item = (&'a str, &'a str)> {
    package["dependencies"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|d| d["path"].is_string() && members.contains_key(d["name"].as_str().unwrap()))
        .map(|d| {
            (
                d["name"].as_str().unwrap(),
                d["kind"].as_str().unwrap_or("normal"),
            )
        })
}

/// Whether `package` may be published (`publish` absent, or a list of registries).
fn publishable(package: &Value) -> bool {
    !matches!(package["publish"].as_array(), Some(list) if list.is_empty())
}

#[test]
fn only_the_published_crates_are_publishable_and_they_are_complete() {
    let metadata = metadata();
    let members = members(&metadata);
    let documented: BTreeSet<String> = documented_list(&architecture_doc(), "Published crates")
        .into_iter()
        .collect();
    assert!(
        documented.len() >= 5,
        "the doc lists the published crates: {documented:?}"
    );
    let mut problems = Vec::new();
    for name in &documented {
        if !members.contains_key(name) {
            problems.push(format!(
                "{name}: listed as published, but no package of the workspace"
            ));
        }
    }
    for (name, package) in &members {
        let listed = documented.contains(name);
        match (listed, publishable(package)) {
            (true, false) => problems.push(format!("{name}: listed as published, but `publish = false`")),
            (false, true) => problems.push(format!(
                "{name}: publishable, but not listed as published: add `publish = false` to its Cargo.toml (or list it in docs/architecture.md's \"Published crates\")"
            )),
            _ => {}
        }
        if !listed {
            continue;
        }
        for field in ["description", "readme", "license", "repository"] {
            if !package[field].is_string() {
                problems.push(format!("{name}: no `{field}`"));
            }
        }
        for field in ["keywords", "categories"] {
            if package[field].as_array().is_none_or(Vec::is_empty) {
                problems.push(format!("{name}: no `{field}`"));
            }
        }
        for (dependency, kind) in workspace_dependencies(package, &members) {
            if kind != "dev" && !documented.contains(dependency) {
                problems.push(format!(
                    "{name}: depends ({kind}) on {dependency}, which is not published"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// A dependency cycle among `edges` (package -> its dependencies), as the chain of names that
/// closes it, if there is one.
fn cycle(edges: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        node: &str,
        edges: &BTreeMap<String, BTreeSet<String>>,
        path: &mut Vec<String>,
        done: &mut BTreeSet<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = path.iter().position(|p| p == node) {
            let mut chain = path[at..].to_vec();
            chain.push(node.to_owned());
            return Some(chain);
        }
        if done.contains(node) {
            return None;
        }
        path.push(node.to_owned());
        for next in edges.get(node).into_iter().flatten() {
            if let Some(chain) = visit(next, edges, path, done) {
                return Some(chain);
            }
        }
        path.pop();
        done.insert(node.to_owned());
        None
    }
    let mut done = BTreeSet::new();
    edges
        .keys()
        .find_map(|node| visit(node, edges, &mut Vec::new(), &mut done))
}

#[test]
fn no_dependency_cycle_goes_through_dev_dependencies() {
    let metadata = metadata();
    let members = members(&metadata);
    let edges: BTreeMap<String, BTreeSet<String>> = members
        .iter()
        .map(|(name, package)| {
            let deps = workspace_dependencies(package, &members)
                .map(|(d, _)| d.to_owned())
                .filter(|d| d != name)
                .collect();
            (name.clone(), deps)
        })
        .collect();
    if let Some(chain) = cycle(&edges) {
        panic!(
            "a dependency cycle (dev-dependencies included): {}; move the tests that need the other crate into it",
            chain.join(" -> ")
        );
    }
}

#[test]
fn the_cycle_check_finds_a_cycle_through_any_kind_of_dependency() {
    let edges = |pairs: &[(&str, &str)]| {
        let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
        for (from, to) in pairs {
            edges
                .entry((*from).to_owned())
                .or_default()
                .insert((*to).to_owned());
            edges.entry((*to).to_owned()).or_default();
        }
        edges
    };
    assert_eq!(cycle(&edges(&[("a", "b"), ("b", "c")])), None);
    assert_eq!(
        cycle(&edges(&[("lib", "types"), ("sim", "lib"), ("lib", "sim")])),
        Some(vec!["lib".to_owned(), "sim".to_owned(), "lib".to_owned()])
    );
}

#[test]
fn no_package_depends_on_a_binarys_package() {
    let metadata = metadata();
    let members = members(&metadata);
    let binaries: BTreeSet<&str> = members
        .iter()
        .filter(|(_, p)| p["manifest_path"].as_str().unwrap().contains("/bins/"))
        .map(|(name, _)| name.as_str())
        .collect();
    assert!(
        binaries.len() >= 3,
        "the binaries' packages are found: {binaries:?}"
    );
    let mut problems = Vec::new();
    for (name, package) in &members {
        for (dependency, kind) in workspace_dependencies(package, &members) {
            if binaries.contains(dependency) {
                problems.push(format!("{name} depends ({kind}) on the binary's package {dependency}: move what it needs into a library crate"));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The generic crates that every other may use in its tests, and the workspace crates each may
/// depend on: none of the domain's (MCS, Ceph, the daemons). The fake API server takes its
/// users' CRDs (`FakeApi::with_crds`) instead of depending on the crates that define them.
const GENERIC: [(&str, &[&str]); 2] = [("kube-fake", &["kube-syntax"]), ("kube-syntax", &[])];

#[test]
fn the_generic_test_support_depends_on_no_domain_crate() {
    let metadata = metadata();
    let members = members(&metadata);
    let mut problems = Vec::new();
    for (name, allowed) in GENERIC {
        let package = members
            .get(name)
            .unwrap_or_else(|| panic!("{name} is a package of the workspace"));
        for (dependency, kind) in workspace_dependencies(package, &members) {
            if kind != "dev" && !allowed.contains(&dependency) {
                problems.push(format!(
                    "{name} depends ({kind}) on {dependency}: a generic crate depends on no domain crate (take what it needs as an argument, as FakeApi::with_crds takes CRDs)"
                ));
            }
        }
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

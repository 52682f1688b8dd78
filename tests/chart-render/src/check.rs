//! Rendered objects checked as an install would meet them: each by the API server's rules
//! (kube-syntax's [`Catalog`], which also serves the CRDs the chart installs), each namespaced
//! object in a namespace it may go to and each cluster-scoped one in none, no two objects the
//! same.

use std::collections::BTreeSet;

use kube_syntax::object::{Catalog, Completeness, split_api_version};
use serde_json::Value;

use crate::chart::Rendered;

fn describe(object: &Value) -> String {
    format!(
        "{}/{}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// The built-in kinds plus the CRDs among `objects`.
pub fn catalog(objects: &[&Value]) -> Catalog {
    objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .fold(Catalog::builtin(), |catalog, crd| catalog.with_crd(crd))
}

/// Every problem of the rendered objects, one line each (`Kind/name: problem`): what the API
/// server refuses, a namespaced object outside `namespaces` or without a namespace (kinds the
/// catalog does not know, such as a ServiceMonitor, count as namespaced), a cluster-scoped one
/// with a namespace, and objects rendered twice.
pub fn problems(rendered: &Rendered, namespaces: &[&str]) -> Vec<String> {
    let objects = rendered.objects();
    let catalog = catalog(&objects);
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for object in &objects {
        let what = describe(object);
        for error in catalog.object_errors(object, Completeness::Whole) {
            problems.push(format!("{what}: {error}"));
        }
        let (group, _) = split_api_version(object["apiVersion"].as_str().unwrap_or(""));
        let kind = object["kind"].as_str().unwrap_or("");
        let namespaced = catalog.by_kind(group, kind).is_none_or(|r| r.namespaced);
        let namespace = object["metadata"]["namespace"].as_str();
        match (namespaced, namespace) {
            (true, Some(ns)) if namespaces.contains(&ns) => {}
            (true, Some(ns)) => problems.push(format!(
                "{what}: in namespace {ns}, not one of {namespaces:?}"
            )),
            (true, None) => {
                problems.push(format!("{what}: namespaced, but has no metadata.namespace"))
            }
            (false, Some(ns)) => {
                problems.push(format!("{what}: cluster-scoped, but in namespace {ns}"))
            }
            (false, None) => {}
        }
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        if !seen.insert((
            group.to_owned(),
            kind.to_owned(),
            namespace.unwrap_or("").to_owned(),
            name.to_owned(),
        )) {
            problems.push(format!("{what}: rendered twice"));
        }
    }
    problems
}

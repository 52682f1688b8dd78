//! A Kubernetes API server in miniature for tests, answering from recorded objects: GET of
//! one object and lists (one namespace or all) with label selectors (`k=v`, `k`, `k in (a,b)`)
//! and the `metadata.name` field selector. Resource types that no object has (and that were
//! not declared served) answer 404, as an API server does for a CRD that is not installed.
//! Shared by the unit tests (through a tower-test mock service) and the process tests (over
//! HTTP on loopback); it records every request.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

/// A request as the fake API server saw it, with its query decoded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Seen {
    /// `GET`, ...
    pub method: String,
    /// The path.
    pub path: String,
    /// The query, decoded.
    pub query: BTreeMap<String, String>,
}

impl Seen {
    /// `GET /path` plus `?k=v&...` in key order, for readable assertions.
    pub fn line(&self) -> String {
        let query: Vec<String> = self.query.iter().map(|(k, v)| format!("{k}={v}")).collect();
        if query.is_empty() {
            format!("{} {}", self.method, self.path)
        } else {
            format!("{} {}?{}", self.method, self.path, query.join("&"))
        }
    }
}

/// Decodes `application/x-www-form-urlencoded` text (`%XX` and `+`).
pub fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).unwrap();
                out.push(u8::from_str_radix(hex, 16).unwrap());
                i += 2;
            }
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8(out).unwrap()
}

/// The method and request target (`/path?query`) as seen.
pub fn seen(method: &str, target: &str) -> Seen {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Seen {
        method: method.to_owned(),
        path: path.to_owned(),
        query: query
            .split('&')
            .filter(|p| !p.is_empty())
            .filter_map(|p| p.split_once('='))
            .map(|(k, v)| (decode(k), decode(v)))
            .collect(),
    }
}

/// The objects of a recorded `kubectl get ... -o yaml` (a `kind: List`) or of several YAML
/// documents.
pub fn objects_of(yaml: &str) -> Vec<Value> {
    let documents: Vec<Value> = serde_saphyr::from_multiple(yaml).unwrap();
    documents
        .into_iter()
        .flat_map(|d| match d.get("items") {
            Some(Value::Array(items)) => items.clone(),
            _ => vec![d],
        })
        .collect()
}

/// `/api/v1/services`, `/apis/ceph.rook.io/v1/cephclusters`: the type's path prefix and plural.
fn type_path(object: &Value) -> String {
    let api_version = object["apiVersion"].as_str().unwrap();
    let kind = object["kind"].as_str().unwrap();
    let prefix = if api_version == "v1" {
        "/api/v1".to_owned()
    } else {
        format!("/apis/{api_version}")
    };
    format!("{prefix}/{}s", kind.to_lowercase())
}

/// Whether `labels` match a label selector (`k=v`, `k==v`, `k!=v`, `k`, `!k`,
/// `k in (a,b)`, `k notin (a,b)`, comma-joined).
pub fn selector_matches(selector: &str, labels: &BTreeMap<String, String>) -> bool {
    let mut terms = Vec::new();
    let mut depth = 0;
    let mut start = 0;
    for (i, c) in selector.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth -= 1,
            ',' if depth == 0 => {
                terms.push(&selector[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&selector[start..]);
    terms
        .into_iter()
        .map(str::trim)
        .filter(|t| !t.is_empty())
        .all(|term| {
            let set = |rest: &str| -> BTreeSet<String> {
                rest.trim()
                    .trim_start_matches('(')
                    .trim_end_matches(')')
                    .split(',')
                    .map(|v| v.trim().to_owned())
                    .collect()
            };
            if let Some((key, rest)) = term.split_once(" notin ") {
                !labels
                    .get(key.trim())
                    .is_some_and(|v| set(rest).contains(v))
            } else if let Some((key, rest)) = term.split_once(" in ") {
                labels
                    .get(key.trim())
                    .is_some_and(|v| set(rest).contains(v))
            } else if let Some((key, value)) = term.split_once("!=") {
                labels.get(key.trim()).map(String::as_str) != Some(value.trim())
            } else if let Some((key, value)) =
                term.split_once("==").or_else(|| term.split_once('='))
            {
                labels.get(key.trim()).map(String::as_str) == Some(value.trim())
            } else if let Some(key) = term.strip_prefix('!') {
                !labels.contains_key(key.trim())
            } else {
                labels.contains_key(term)
            }
        })
}

/// The fake API server's data and rules.
#[derive(Debug, Clone, Default)]
pub struct FakeApi {
    objects: Vec<Value>,
    served: BTreeSet<String>,
    forbidden: BTreeSet<String>,
}

fn status(code: u16, reason: &str, message: &str) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code
    }))
    .unwrap()
}

impl FakeApi {
    /// Serves `objects`; core types (Services, ConfigMaps, EndpointSlices, Deployments) are
    /// always served, custom types only when an object has them (or [`FakeApi::serve`]).
    pub fn new(objects: Vec<Value>) -> Self {
        let mut served: BTreeSet<String> = [
            "/api/v1/services",
            "/api/v1/configmaps",
            "/apis/discovery.k8s.io/v1/endpointslices",
            "/apis/apps/v1/deployments",
        ]
        .into_iter()
        .map(str::to_owned)
        .collect();
        served.extend(objects.iter().map(type_path));
        Self {
            objects,
            served,
            forbidden: BTreeSet::new(),
        }
    }

    /// Also serves the type at `type_path` (`/apis/group/version/plural`), even without objects.
    pub fn serve(mut self, type_path: &str) -> Self {
        self.served.insert(type_path.to_owned());
        self
    }

    /// Answers 403 for the type at `type_path`.
    pub fn forbid(mut self, type_path: &str) -> Self {
        self.forbidden.insert(type_path.to_owned());
        self
    }

    /// The answer to a request: status code and body.
    pub fn respond(&self, request: &Seen) -> (u16, Vec<u8>) {
        if request.method != "GET" {
            return (405, status(405, "MethodNotAllowed", "read-only fake"));
        }
        let path = request.path.as_str();
        let (prefix, rest) = if let Some(rest) = path.strip_prefix("/api/v1/") {
            ("/api/v1".to_owned(), rest)
        } else if let Some(rest) = path.strip_prefix("/apis/") {
            let mut parts = rest.splitn(3, '/');
            let (Some(group), Some(version), Some(rest)) =
                (parts.next(), parts.next(), parts.next())
            else {
                return (
                    404,
                    status(
                        404,
                        "NotFound",
                        "the server could not find the requested resource",
                    ),
                );
            };
            (format!("/apis/{group}/{version}"), rest)
        } else {
            return (
                404,
                status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                ),
            );
        };
        let parts: Vec<&str> = rest.split('/').collect();
        let (namespace, plural, name) = match parts.as_slice() {
            ["namespaces", ns, plural] => (Some(*ns), *plural, None),
            ["namespaces", ns, plural, name] => (Some(*ns), *plural, Some(*name)),
            [plural] => (None, *plural, None),
            _ => {
                return (
                    404,
                    status(
                        404,
                        "NotFound",
                        "the server could not find the requested resource",
                    ),
                );
            }
        };
        let wanted = format!("{prefix}/{plural}");
        if self.forbidden.contains(&wanted) {
            return (
                403,
                status(
                    403,
                    "Forbidden",
                    &format!(
                        "{plural} is forbidden: User \"me\" cannot list resource \"{plural}\" in the namespace \"{}\"",
                        namespace.unwrap_or("")
                    ),
                ),
            );
        }
        if !self.served.contains(&wanted) {
            return (
                404,
                status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                ),
            );
        }
        let label_selector = request
            .query
            .get("labelSelector")
            .cloned()
            .unwrap_or_default();
        let field_name = request
            .query
            .get("fieldSelector")
            .and_then(|f| f.strip_prefix("metadata.name="))
            .map(str::to_owned);
        let matching: Vec<Value> = self
            .objects
            .iter()
            .filter(|o| type_path(o) == wanted)
            .filter(|o| namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns))
            .filter(|o| name.is_none_or(|n| o["metadata"]["name"] == n))
            .filter(|o| {
                field_name
                    .as_deref()
                    .is_none_or(|n| o["metadata"]["name"] == n)
            })
            .filter(|o| {
                let labels: BTreeMap<String, String> =
                    serde_json::from_value(o["metadata"]["labels"].clone()).unwrap_or_default();
                selector_matches(&label_selector, &labels)
            })
            .cloned()
            .collect();
        match name {
            Some(name) => match matching.into_iter().next() {
                Some(object) => (200, serde_json::to_vec(&object).unwrap()),
                None => (
                    404,
                    status(404, "NotFound", &format!("{plural} \"{name}\" not found")),
                ),
            },
            None => (
                200,
                serde_json::to_vec(&json!({
                    "apiVersion": "v1", "kind": "List",
                    "metadata": {"resourceVersion": "1"},
                    "items": matching,
                }))
                .unwrap(),
            ),
        }
    }
}

#[cfg(test)]
mod selector_tests {
    use super::*;

    #[test]
    fn selectors_match_as_kubernetes_does() {
        let labels: BTreeMap<String, String> = [("app", "rook-ceph-mon"), ("mon", "a")]
            .into_iter()
            .map(|(k, v)| (k.to_owned(), v.to_owned()))
            .collect();
        assert!(selector_matches("", &labels));
        assert!(selector_matches("app=rook-ceph-mon,mon", &labels));
        assert!(selector_matches(
            "app in (rook-ceph-osd, rook-ceph-mon)",
            &labels
        ));
        assert!(!selector_matches("app in (rook-ceph-osd),mon", &labels));
        assert!(!selector_matches("osd", &labels));
        assert!(selector_matches("!osd,mon!=b", &labels));
    }
}

//! A Kubernetes API server in miniature for tests, answering from recorded objects: GET of
//! one object and lists (one namespace or all) with label and field selectors. It is strict as a
//! real server is: a selector the server cannot parse is answered 400 BadRequest with the
//! server's message (kube-syntax's rules), and it refuses to hold a recorded object that a real
//! server would have refused. Resource types that no object has (and that were
//! not declared served) answer 404, as an API server does for a CRD that is not installed.
//! Shared by the unit tests (through a tower-test mock service, [`crate::mock`]) and the process
//! tests (over HTTP on loopback, [`crate::http`]); they record every request.

use std::collections::{BTreeMap, BTreeSet};

use kube_syntax::object::{Catalog, Completeness};
use kube_syntax::selector::{FieldSelector, LabelSelector};
use kube_syntax::status::{Request, parse_path};
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

/// The method and request target (`/path?query`) as seen.
pub fn seen(method: &str, target: &str) -> Seen {
    let (path, query) = target.split_once('?').unwrap_or((target, ""));
    Seen {
        method: method.to_owned(),
        path: path.to_owned(),
        query: kube_syntax::status::parse_query(query),
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

/// The API server's rules for the types of a member cluster: the built-in types, the MCS and
/// About CRDs, and the operator's `CephClusterAddressing` (CephCluster has no CRD here: its
/// objects get the rules every kind shares).
pub fn catalog() -> Catalog {
    let crds = mcs_types::crd::mcs_crds()
        .unwrap()
        .into_iter()
        .chain(mcs_types::crd::about_crds().unwrap())
        .chain([mcs_ceph_api::crd().unwrap()]);
    crds.fold(Catalog::builtin(), |catalog, crd| {
        catalog.with_crd(&serde_json::to_value(crd).unwrap())
    })
}

/// The fake API server's data and rules.
#[derive(Debug, Clone, Default)]
pub struct FakeApi {
    objects: Vec<Value>,
    served: BTreeSet<String>,
    forbidden: BTreeSet<String>,
    catalog: Catalog,
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
    ///
    /// # Panics
    /// When an object breaks the API server's rules: a real server never stores one, so a
    /// fixture holding one would let the code under test see what no cluster can show it.
    pub fn new(objects: Vec<Value>) -> Self {
        let catalog = catalog();
        for object in &objects {
            let errors = catalog.object_errors(object, Completeness::Whole);
            assert!(
                errors.is_empty(),
                "a real API server would refuse the recorded {} {:?}: {}",
                object["kind"],
                object["metadata"]["name"],
                errors
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join("; ")
            );
        }
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
            catalog,
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
        let checked = Request {
            method: &request.method,
            path: &request.path,
            query: &request.query,
            content_type: "",
            body: None,
        };
        if let Err(refusal) = self.catalog.check_request(&checked) {
            return (refusal.code, serde_json::to_vec(&refusal.body).unwrap());
        }
        let not_found = || {
            (
                404,
                status(
                    404,
                    "NotFound",
                    "the server could not find the requested resource",
                ),
            )
        };
        // Lists (in a namespace or all) and GETs of one namespaced object; nothing else.
        let Some(parsed) = parse_path(&request.path) else {
            return not_found();
        };
        if parsed.subresource.is_some() || (parsed.namespace.is_none() && parsed.name.is_some()) {
            return not_found();
        }
        let prefix = if parsed.group.is_empty() {
            format!("/api/{}", parsed.version)
        } else {
            format!("/apis/{}/{}", parsed.group, parsed.version)
        };
        let (namespace, plural, name) = (
            parsed.namespace.as_deref(),
            parsed.plural.as_str(),
            parsed.name.as_deref(),
        );
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
        // Both parse: check_request refused the request otherwise.
        let label_selector = LabelSelector::parse(
            request
                .query
                .get("labelSelector")
                .map_or("", String::as_str),
        )
        .unwrap();
        let field_selector = FieldSelector::parse(
            request
                .query
                .get("fieldSelector")
                .map_or("", String::as_str),
        )
        .unwrap();
        let matching: Vec<Value> = self
            .objects
            .iter()
            .filter(|o| type_path(o) == wanted)
            .filter(|o| namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns))
            .filter(|o| name.is_none_or(|n| o["metadata"]["name"] == n))
            .filter(|o| {
                field_selector.matches(|field| {
                    let pointer = format!("/{}", field.replace('.', "/"));
                    o.pointer(&pointer)
                        .and_then(Value::as_str)
                        .map(str::to_owned)
                })
            })
            .filter(|o| {
                let labels: BTreeMap<String, String> =
                    serde_json::from_value(o["metadata"]["labels"].clone()).unwrap_or_default();
                label_selector.matches(&labels)
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
mod strict_tests {
    use super::*;

    fn get(target: &str) -> (u16, Value) {
        let (code, body) = FakeApi::new(Vec::new()).respond(&seen("GET", target));
        (code, serde_json::from_slice(&body).unwrap())
    }

    #[test]
    fn a_selector_a_real_server_cannot_parse_is_answered_400_with_its_message() {
        let (code, body) = get(
            "/apis/discovery.k8s.io/v1/endpointslices?labelSelector=endpointslice.kubernetes.io%2Fmanaged-by%3Dclusterset.io%2Fmcs-controller",
        );
        assert_eq!(code, 400);
        assert_eq!(body["reason"], "BadRequest");
        assert!(
            body["message"].as_str().unwrap().starts_with(
                "unable to parse requirement: values[0][endpointslice.kubernetes.io/managed-by]: Invalid value: \"clusterset.io/mcs-controller\""
            ),
            "{body}"
        );
        let (code, _) = get(
            "/apis/discovery.k8s.io/v1/endpointslices?labelSelector=endpointslice.kubernetes.io%2Fmanaged-by%3Dmcs-controller.clusterset.io",
        );
        assert_eq!(code, 200);
    }

    #[test]
    fn an_unsupported_field_selector_is_answered_400() {
        let (code, body) = get("/api/v1/services?fieldSelector=spec.type%3DClusterIP");
        assert_eq!(code, 400);
        // Services have no field-label conversion of their own in 1.28.
        assert_eq!(
            body["message"],
            "\"spec.type\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
    }

    #[test]
    fn selectors_match_as_kubernetes_does() {
        let mon = json!({"apiVersion": "v1", "kind": "Service", "metadata": {
            "name": "rook-ceph-mon-a", "namespace": "rook-ceph",
            "labels": {"app": "rook-ceph-mon", "mon": "a"}},
            "spec": {"ports": [{"port": 3300}]}});
        let api = FakeApi::new(vec![mon]);
        let count = |selector: &str| {
            let target = format!("/api/v1/services?labelSelector={selector}");
            let (code, body) = api.respond(&seen("GET", &target));
            assert_eq!(code, 200, "{selector}");
            let list: Value = serde_json::from_slice(&body).unwrap();
            list["items"].as_array().unwrap().len()
        };
        assert_eq!(count(""), 1);
        assert_eq!(count("app%3Drook-ceph-mon%2Cmon"), 1);
        assert_eq!(count("app+in+%28rook-ceph-osd%2C+rook-ceph-mon%29"), 1);
        assert_eq!(count("app+in+%28rook-ceph-osd%29%2Cmon"), 0);
        assert_eq!(count("osd"), 0);
        assert_eq!(count("%21osd%2Cmon%21%3Db"), 1);
    }

    #[test]
    #[should_panic(expected = "a real API server would refuse the recorded")]
    fn a_fixture_a_real_server_would_refuse_is_not_served() {
        let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
            "metadata": {"name": "web-east", "namespace": "demo", "labels": {
                "endpointslice.kubernetes.io/managed-by": "clusterset.io/mcs-controller"}},
            "addressType": "IPv4", "endpoints": []});
        let _ = FakeApi::new(vec![slice]);
    }
}

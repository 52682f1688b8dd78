//! A Kubernetes API server in miniature for tests, answering from recorded objects: GET of
//! one object and lists (one namespace or all) with label and field selectors. It is strict as a
//! real server is: a selector the server cannot parse is answered 400 BadRequest with the
//! server's message (kube-syntax's rules), and it refuses to hold a recorded object that a real
//! server would have refused. Resource types that no object has (and that were
//! not declared served) answer 404, as an API server does for a CRD that is not installed.
//! Shared by the unit tests (through a tower-test mock service, [`crate::mock`]) and the process
//! tests (over HTTP on loopback, [`crate::http`]); they record every request.
//!
//! It also answers `/version` (a Kubernetes 1.28 server's), and watches: a test changes an
//! object with [`FakeApi::put`], which stores it with the next resource version and records an
//! `ADDED` or `MODIFIED` event; [`FakeApi::watch_events`] gives the events after a resource
//! version that a watch request (`?watch=true&resourceVersion=N`, the same path, namespace and
//! selectors as its list) sees. Lists carry the current resource version, as a real server's
//! do, so that kube's watcher starts its watch where its list ended. [`crate::http::ApiServer`]
//! streams them on a watch's connection.

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
    /// The resource version of the last change (1 before any [`FakeApi::put`]).
    revision: u64,
    /// What [`FakeApi::put`] changed: resource version, event type, object.
    events: Vec<(u64, &'static str, Value)>,
}

/// A status code and body: the answer to a request.
pub type Answer = (u16, Vec<u8>);

/// The `/version` of the fake server: a Kubernetes 1.28 server's.
pub const SERVER_VERSION: &str = "v1.28.15";

/// What a request names: the type, the namespace, one object, the selectors.
struct Target {
    wanted: String,
    plural: String,
    namespace: Option<String>,
    name: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Target {
    fn matches(&self, o: &Value) -> bool {
        type_path(o) == self.wanted
            && self
                .namespace
                .as_deref()
                .is_none_or(|ns| o["metadata"]["namespace"] == ns)
            && self
                .name
                .as_deref()
                .is_none_or(|n| o["metadata"]["name"] == n)
            && self.fields.matches(|field| {
                let pointer = format!("/{}", field.replace('.', "/"));
                o.pointer(&pointer)
                    .and_then(Value::as_str)
                    .map(str::to_owned)
            })
            && {
                let labels: BTreeMap<String, String> =
                    serde_json::from_value(o["metadata"]["labels"].clone()).unwrap_or_default();
                self.labels.matches(&labels)
            }
    }
}

/// Whether `request` is a watch (`?watch=true` or `?watch=1`).
pub fn is_watch(request: &Seen) -> bool {
    matches!(
        request.query.get("watch").map(String::as_str),
        Some("true" | "1")
    )
}

fn same_object(a: &Value, b: &Value) -> bool {
    a["apiVersion"] == b["apiVersion"]
        && a["kind"] == b["kind"]
        && a["metadata"]["namespace"] == b["metadata"]["namespace"]
        && a["metadata"]["name"] == b["metadata"]["name"]
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
            revision: 1,
            events: Vec::new(),
        }
    }

    /// Stores `object` (replacing the one of the same type, namespace and name) with the next
    /// resource version, as a write to a real server does, and records the watch event
    /// (`ADDED` or `MODIFIED`) that watches of it see.
    ///
    /// # Panics
    /// When the object breaks the API server's rules (see [`FakeApi::new`]).
    pub fn put(&mut self, mut object: Value) {
        let errors = self.catalog.object_errors(&object, Completeness::Whole);
        assert!(errors.is_empty(), "a real API server would refuse {object}");
        self.revision += 1;
        object["metadata"]["resourceVersion"] = Value::String(self.revision.to_string());
        self.served.insert(type_path(&object));
        let event = match self.objects.iter_mut().find(|o| same_object(o, &object)) {
            Some(stored) => {
                *stored = object.clone();
                "MODIFIED"
            }
            None => {
                self.objects.push(object.clone());
                "ADDED"
            }
        };
        self.events.push((self.revision, event, object));
    }

    /// The resource version of the last change.
    pub fn revision(&self) -> u64 {
        self.revision
    }

    /// The watch events `request` (a watch) sees after resource version `after`, as the JSON
    /// lines a server streams (`{"type":"MODIFIED","object":{...}}`) with their resource
    /// versions; or the refusal (status code and body) a list of the same request would get.
    pub fn watch_events(&self, request: &Seen, after: u64) -> Result<Vec<(u64, Vec<u8>)>, Answer> {
        let target = self.target(request)?;
        Ok(self
            .events
            .iter()
            .filter(|(revision, _, object)| *revision > after && target.matches(object))
            .map(|(revision, event, object)| {
                let line = serde_json::to_vec(&json!({"type": event, "object": object})).unwrap();
                (*revision, line)
            })
            .collect())
    }

    /// What `request` names, or the refusal a real server answers it with.
    fn target(&self, request: &Seen) -> Result<Target, Answer> {
        if request.method != "GET" {
            return Err((405, status(405, "MethodNotAllowed", "read-only fake")));
        }
        let checked = Request {
            method: &request.method,
            path: &request.path,
            query: &request.query,
            content_type: "",
            body: None,
        };
        if let Err(refusal) = self.catalog.check_request(&checked) {
            return Err((refusal.code, serde_json::to_vec(&refusal.body).unwrap()));
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
            return Err(not_found());
        };
        if parsed.subresource.is_some() || (parsed.namespace.is_none() && parsed.name.is_some()) {
            return Err(not_found());
        }
        let prefix = if parsed.group.is_empty() {
            format!("/api/{}", parsed.version)
        } else {
            format!("/apis/{}/{}", parsed.group, parsed.version)
        };
        let wanted = format!("{prefix}/{}", parsed.plural);
        if self.forbidden.contains(&wanted) {
            let plural = &parsed.plural;
            return Err((
                403,
                status(
                    403,
                    "Forbidden",
                    &format!(
                        "{plural} is forbidden: User \"me\" cannot list resource \"{plural}\" in the namespace \"{}\"",
                        parsed.namespace.as_deref().unwrap_or("")
                    ),
                ),
            ));
        }
        if !self.served.contains(&wanted) {
            return Err(not_found());
        }
        // Both parse: check_request refused the request otherwise.
        let labels = LabelSelector::parse(
            request
                .query
                .get("labelSelector")
                .map_or("", String::as_str),
        )
        .unwrap();
        let fields = FieldSelector::parse(
            request
                .query
                .get("fieldSelector")
                .map_or("", String::as_str),
        )
        .unwrap();
        Ok(Target {
            wanted,
            plural: parsed.plural,
            namespace: parsed.namespace,
            name: parsed.name,
            labels,
            fields,
        })
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

    /// The answer to a request (not a watch: see [`FakeApi::watch_events`]): status code and
    /// body.
    pub fn respond(&self, request: &Seen) -> (u16, Vec<u8>) {
        if request.method == "GET" && request.path == "/version" {
            let (major, minor) = ("1", "28");
            return (
                200,
                serde_json::to_vec(&json!({
                    "major": major, "minor": minor, "gitVersion": SERVER_VERSION,
                    "gitCommit": "0000000000000000000000000000000000000000",
                    "gitTreeState": "clean", "buildDate": "2024-10-22T20:28:14Z",
                    "goVersion": "go1.22.8", "compiler": "gc", "platform": "linux/amd64"
                }))
                .unwrap(),
            );
        }
        let target = match self.target(request) {
            Ok(target) => target,
            Err(refusal) => return refusal,
        };
        let matching: Vec<Value> = self
            .objects
            .iter()
            .filter(|o| target.matches(o))
            .cloned()
            .collect();
        match target.name {
            Some(name) => match matching.into_iter().next() {
                Some(object) => (200, serde_json::to_vec(&object).unwrap()),
                None => (
                    404,
                    status(
                        404,
                        "NotFound",
                        &format!("{} \"{name}\" not found", target.plural),
                    ),
                ),
            },
            None => (
                200,
                serde_json::to_vec(&json!({
                    "apiVersion": "v1", "kind": "List",
                    "metadata": {"resourceVersion": self.revision.to_string()},
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
    fn a_put_is_an_event_for_the_watches_that_select_it_and_lists_carry_its_version() {
        let web = |port: u16| {
            json!({"apiVersion": "v1", "kind": "Service", "metadata": {
                "name": "web", "namespace": "shop", "labels": {"app": "web"}},
                "spec": {"ports": [{"port": port}]}})
        };
        let mut api = FakeApi::new(vec![web(80)]);
        let list = |api: &FakeApi| {
            let (code, body) = api.respond(&seen("GET", "/api/v1/namespaces/shop/services"));
            assert_eq!(code, 200);
            serde_json::from_slice::<Value>(&body).unwrap()
        };
        assert_eq!(list(&api)["metadata"]["resourceVersion"], "1");
        api.put(web(8080));
        api.put(json!({"apiVersion": "v1", "kind": "Service", "metadata": {
            "name": "db", "namespace": "shop"}, "spec": {"ports": [{"port": 5432}]}}));
        assert_eq!(list(&api)["metadata"]["resourceVersion"], "3");
        assert_eq!(list(&api)["items"][0]["spec"]["ports"][0]["port"], 8080);
        let watch = seen(
            "GET",
            "/api/v1/namespaces/shop/services?watch=true&resourceVersion=1&labelSelector=app%3Dweb",
        );
        assert!(is_watch(&watch));
        let events = api.watch_events(&watch, 1).unwrap();
        assert_eq!(events.len(), 1, "the selector leaves db out");
        let event: Value = serde_json::from_slice(&events[0].1).unwrap();
        assert_eq!(event["type"], "MODIFIED");
        assert_eq!(event["object"]["metadata"]["resourceVersion"], "2");
        assert!(api.watch_events(&watch, 2).unwrap().is_empty());
        let (code, body) = api.respond(&seen("GET", "/version"));
        assert_eq!(code, 200);
        assert_eq!(
            serde_json::from_slice::<Value>(&body).unwrap()["gitVersion"],
            SERVER_VERSION
        );
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

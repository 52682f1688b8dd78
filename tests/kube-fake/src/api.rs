//! A Kubernetes API server in miniature for tests, answering from recorded objects: GET of
//! one object and lists (one namespace or all) with label and field selectors. It is strict as a
//! real server is: a selector the server cannot parse is answered 400 BadRequest with the
//! server's message (kube-syntax's rules), and it refuses to hold a recorded object that a real
//! server would have refused. Resource types that no object has (and that were not declared
//! served) answer 404 as an API server does: a built-in group's with a `Status`, any other
//! group's (a CRD's that is not installed) with Go's plain-text `404 page not found`. Shared by
//! the unit tests (through a tower-test mock service, [`crate::mock`]) and the process tests
//! (over HTTP on loopback, [`crate::http`]); they record every request.
//!
//! Over HTTP it also takes writes ([`FakeApi::handle`]: create, replace, merge patch,
//! server-side apply, delete), refused as a real server refuses them and in its order (the
//! authorizer for [users without RBAC](FakeApi::user_without_rbac), the options, decoding the
//! body, the namespace, the stored object and its resource version, the object's rules, an
//! existing name); what passes is stored. The e2e test
//! `the_fake_api_server_refuses_as_real_ones_do` (`tests/e2e-kube`) sends a corpus of refused
//! requests to it and to real API servers of Kubernetes 1.35 and 1.37 and requires the same
//! answers: the fake gives 1.37's.
//!
//! It also answers `/version` (a Kubernetes 1.37 server's), and watches: a test changes an
//! object with [`FakeApi::put`] (or a write), which stores it with the next resource version and
//! records an `ADDED`, `MODIFIED` or `DELETED` event; [`FakeApi::watch_events`] gives the events
//! after a resource version that a watch request (`?watch=true&resourceVersion=N`, the same
//! path, namespace and selectors as its list) sees. Lists carry the current resource version,
//! as a real server's do, so that kube's watcher starts its watch where its list ended.
//! [`crate::http::ApiServer`] streams them on a watch's connection.

use std::collections::{BTreeMap, BTreeSet};

use kube_syntax::object::{Catalog, Completeness};
use kube_syntax::selector::{FieldSelector, LabelSelector};
use kube_syntax::status::{
    self as refusals, APPLY_PATCH, Denied, Refusal, Request, ResourcePath, parse_path,
};
use serde_json::{Value, json};

/// A request as the fake API server saw it, with its query decoded.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord)]
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

/// A whole request as [`crate::http::ApiServer`] receives it: what [`Seen`] records, the
/// headers the fake reads (`Content-Type`, the bearer token of `Authorization`) and the body.
#[derive(Debug, Clone, Default)]
pub struct Call {
    /// Method, path and query.
    pub seen: Seen,
    /// The `Content-Type` header (empty when absent).
    pub content_type: String,
    /// The token of `Authorization: Bearer <token>`, if any.
    pub token: Option<String>,
    /// The body as sent.
    pub body: Vec<u8>,
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

/// [`type_path`], with the plural the catalog knows for the object's kind (`endpoints`, not
/// `endpointss`).
fn type_path_in(catalog: &Catalog, object: &Value) -> String {
    let api_version = object["apiVersion"].as_str().unwrap_or("");
    let kind = object["kind"].as_str().unwrap_or("");
    let (group, _) = kube_syntax::object::split_api_version(api_version);
    match catalog.by_kind(group, kind) {
        Some(resource) if api_version == "v1" => format!("/api/v1/{}", resource.plural),
        Some(resource) => format!("/apis/{api_version}/{}", resource.plural),
        None => type_path(object),
    }
}

/// The path prefix of the type a request names (`/api/v1/services`).
fn wanted_path(parsed: &ResourcePath) -> String {
    if parsed.group.is_empty() {
        format!("/api/{}/{}", parsed.version, parsed.plural)
    } else {
        format!(
            "/apis/{}/{}/{}",
            parsed.group, parsed.version, parsed.plural
        )
    }
}

/// What a real API server answers a path it serves nothing at: a plain-text 404 (Go's
/// `http.NotFound`), not a `Status`.
pub const PAGE_NOT_FOUND: &str = "404 page not found\n";

/// The answer of a refusal: its code and `Status` body.
fn refused(refusal: &Refusal) -> Answer {
    (refusal.code, serde_json::to_vec(&refusal.body).unwrap())
}

/// RFC 7386 JSON merge patch: `patch` merged into `target` (`null` removes a field).
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(fields) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = json!({});
    }
    let map = target.as_object_mut().unwrap();
    for (key, value) in fields {
        if value.is_null() {
            map.remove(key);
        } else {
            merge_patch(map.entry(key.clone()).or_insert(Value::Null), value);
        }
    }
}

/// The API server's rules for its built-in types and for `crds` (CustomResourceDefinitions,
/// typed or as JSON), as if they were installed.
///
/// # Panics
/// When a CRD cannot be serialized (a test's bug).
pub fn catalog<C: serde::Serialize>(crds: impl IntoIterator<Item = C>) -> Catalog {
    crds.into_iter().fold(Catalog::builtin(), |catalog, crd| {
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
    /// What [`FakeApi::put`] and the writes changed: resource version, event type, object.
    events: Vec<(u64, &'static str, Value)>,
    /// Bearer tokens of users RBAC grants nothing ([`FakeApi::user_without_rbac`]).
    users: BTreeMap<String, String>,
}

/// A status code and body: the answer to a request.
pub type Answer = (u16, Vec<u8>);

/// The `/version` of the fake server: a Kubernetes 1.37 server's, the release whose answers it
/// gives (the e2e test `the_fake_api_server_refuses_as_real_ones_do` holds them to a real one's).
pub const SERVER_VERSION: &str = "v1.37.2";

/// What a request names: the type, the namespace, one object, the selectors.
struct Target {
    wanted: String,
    group: String,
    plural: String,
    namespace: Option<String>,
    name: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Target {
    fn matches(&self, catalog: &Catalog, o: &Value) -> bool {
        type_path_in(catalog, o) == self.wanted
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
    /// Serves `objects` of the built-in types; see [`FakeApi::with_crds`].
    ///
    /// # Panics
    /// As [`FakeApi::with_crds`].
    pub fn new(objects: Vec<Value>) -> Self {
        Self::with_crds(Vec::<Value>::new(), objects)
    }

    /// Serves `objects`, with `crds` installed (a member cluster's: `mcs_ceph_api::member_crds`);
    /// core types (Services, ConfigMaps, EndpointSlices, Deployments) are always served, custom
    /// types only when an object has them (or [`FakeApi::serve`]).
    ///
    /// # Panics
    /// When an object breaks the API server's rules: a real server never stores one, so a
    /// fixture holding one would let the code under test see what no cluster can show it.
    pub fn with_crds<C: serde::Serialize>(
        crds: impl IntoIterator<Item = C>,
        objects: Vec<Value>,
    ) -> Self {
        let catalog = catalog(crds);
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
        served.extend(objects.iter().map(|o| type_path_in(&catalog, o)));
        Self {
            objects,
            served,
            forbidden: BTreeSet::new(),
            catalog,
            revision: 1,
            events: Vec::new(),
            users: BTreeMap::new(),
        }
    }

    /// Also serves the custom resource of `crd` (a CustomResourceDefinition as JSON: its
    /// schemas' rules and its type), as a server does once the CRD is installed.
    pub fn with_crd(mut self, crd: &Value) -> Self {
        self.catalog = std::mem::take(&mut self.catalog).with_crd(crd);
        let group = crd["spec"]["group"].as_str().unwrap_or("");
        let plural = crd["spec"]["names"]["plural"].as_str().unwrap_or("");
        for version in crd["spec"]["versions"].as_array().into_iter().flatten() {
            if version["served"] != Value::Bool(false)
                && let Some(name) = version["name"].as_str()
            {
                self.served.insert(format!("/apis/{group}/{name}/{plural}"));
            }
        }
        self
    }

    /// Requests whose `Authorization` is `Bearer <token>` come from `user`, whom RBAC grants
    /// nothing (a ServiceAccount without bindings): every request on a resource is refused
    /// with the 403 of the authorizer, before anything else is looked at, as a real server
    /// does ([`kube_syntax::status::forbidden`]). Requests without a token, or with another,
    /// are allowed everything (the fake's admin).
    pub fn user_without_rbac(mut self, token: &str, user: &str) -> Self {
        self.users.insert(token.to_owned(), user.to_owned());
        self
    }

    /// The 403 a real server's authorizer gives `call` when it bears the token of a user RBAC
    /// grants nothing; the verb, resource, name and namespace as the request info reads them.
    pub fn authorize(&self, call: &Call) -> Result<(), Answer> {
        let Some(user) = call.token.as_ref().and_then(|t| self.users.get(t)) else {
            return Ok(());
        };
        let request = &call.seen;
        let Some(parsed) = parse_path(&request.path) else {
            return Ok(());
        };
        let verb = match (request.method.as_str(), parsed.name.is_some()) {
            ("GET", _) if is_watch(request) => "watch",
            ("GET", true) => "get",
            ("GET", false) => "list",
            ("POST", _) => "create",
            ("PUT", _) => "update",
            ("PATCH", _) => "patch",
            ("DELETE", true) => "delete",
            ("DELETE", false) => "deletecollection",
            _ => "",
        };
        // A namespace is its own namespace (`/api/v1/namespaces/x` is in the namespace "x").
        let namespace = match (
            &parsed.namespace,
            parsed.group.as_str(),
            parsed.plural.as_str(),
        ) {
            (Some(namespace), _, _) => namespace.clone(),
            (None, "", "namespaces") => parsed.name.clone().unwrap_or_default(),
            (None, _, _) => String::new(),
        };
        let resource = match &parsed.subresource {
            Some(sub) => format!("{}/{sub}", parsed.plural),
            None => parsed.plural.clone(),
        };
        let refusal = refusals::forbidden(&Denied {
            user,
            verb,
            group: &parsed.group,
            plural: &resource,
            name: parsed.name.as_deref().unwrap_or(""),
            namespace: &namespace,
        });
        Err(refused(&refusal))
    }

    /// The answer to any request (not a watch: see [`FakeApi::watch_events`]): reads as
    /// [`FakeApi::respond`] answers them, and writes (create, replace, merge patch, server-side
    /// apply, delete) refused as a real server refuses them, in its order: the authorizer
    /// (403), a path it serves nothing at (404), the query and options (400, 422), the body
    /// decoded against the URL (400; undeclared fields under `Strict`), the namespace of a
    /// create (404), the stored object (404 for a replace, patch or delete of a missing one;
    /// 409 for a stale `resourceVersion`), the object's rules (422), a create of an existing
    /// one (409 `AlreadyExists`). A write that passes is stored with a new resource version
    /// (custom objects pruned of undeclared fields), and watches see it.
    pub fn handle(&mut self, call: &Call) -> Answer {
        if let Err(refusal) = self.authorize(call) {
            return refusal;
        }
        let request = &call.seen;
        if request.method == "GET" {
            return self.respond(request);
        }
        let Some(parsed) = parse_path(&request.path) else {
            return (404, PAGE_NOT_FOUND.as_bytes().to_vec());
        };
        if !self.served.contains(&wanted_path(&parsed)) {
            return self.unserved(&parsed);
        }
        match request.method.as_str() {
            "POST" | "PUT" | "PATCH" => self.write(call, &parsed),
            "DELETE" => self.delete(&parsed),
            other => (
                405,
                status(
                    405,
                    "MethodNotAllowed",
                    &format!("{other} is not supported by the fake API server"),
                ),
            ),
        }
    }

    /// The 404 of a resource type that is not served: a built-in group's API (the core group,
    /// `apps`, ...) answers with a `Status`; a path of any other group (a CRD's, whose CRD may be
    /// installed, or one nobody serves) is Go's plain-text 404.
    fn unserved(&self, parsed: &ResourcePath) -> Answer {
        if parsed.group.is_empty()
            || self
                .catalog
                .by_group(&parsed.group)
                .any(|r| r.crd.is_none())
        {
            let body = json!({
                "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
                "message": "the server could not find the requested resource",
                "reason": "NotFound", "details": {}, "code": 404
            });
            return (404, serde_json::to_vec(&body).unwrap());
        }
        (404, PAGE_NOT_FOUND.as_bytes().to_vec())
    }

    /// Whether namespace `name` exists (a `Namespace` object is held).
    fn namespace_exists(&self, name: &str) -> bool {
        self.objects.iter().any(|o| {
            o["apiVersion"] == "v1" && o["kind"] == "Namespace" && o["metadata"]["name"] == name
        })
    }

    /// The index of the stored object of the type at `parsed`, in its namespace, named `name`.
    fn stored(&self, parsed: &ResourcePath, name: &str) -> Option<usize> {
        let wanted = wanted_path(parsed);
        self.objects.iter().position(|o| {
            type_path_in(&self.catalog, o) == wanted
                && o["metadata"]["name"] == name
                && match &parsed.namespace {
                    Some(namespace) => o["metadata"]["namespace"] == namespace.as_str(),
                    None => o["metadata"]["namespace"].as_str().unwrap_or("").is_empty(),
                }
        })
    }

    /// Stores `object` (new, or in place of the one at `index`) with the next resource version
    /// and records the watch event; the stored object.
    fn store(&mut self, mut object: Value, index: Option<usize>) -> Value {
        self.catalog.prune(&mut object);
        self.revision += 1;
        object["metadata"]["resourceVersion"] = Value::String(self.revision.to_string());
        let event = match index {
            Some(index) => {
                let uid = self.objects[index]["metadata"]["uid"].clone();
                if !uid.is_null() {
                    object["metadata"]["uid"] = uid;
                }
                self.objects[index] = object.clone();
                "MODIFIED"
            }
            None => {
                if object["metadata"]["uid"].is_null() {
                    object["metadata"]["uid"] =
                        Value::String(format!("00000000-0000-4000-8000-{:012x}", self.revision));
                }
                self.objects.push(object.clone());
                "ADDED"
            }
        };
        self.events.push((self.revision, event, object.clone()));
        object
    }

    /// A create, replace or patch.
    fn write(&mut self, call: &Call, parsed: &ResourcePath) -> Answer {
        let request = &call.seen;
        let apply = request.method == "PATCH" && call.content_type == APPLY_PATCH;
        let merge = request.method == "PATCH" && !apply;
        if merge
            && !matches!(
                call.content_type.as_str(),
                "application/merge-patch+json" | "application/strategic-merge-patch+json"
            )
        {
            return (
                415,
                status(
                    415,
                    "UnsupportedMediaType",
                    &format!(
                        "the body of the request was in an unknown format - accepted media types include: application/json-patch+json, application/merge-patch+json, application/apply-patch+yaml (the fake API server does not apply {:?})",
                        call.content_type
                    ),
                ),
            );
        }
        let body: Value = if call.body.is_empty() {
            Value::Null
        } else if apply {
            match serde_saphyr::from_slice(&call.body) {
                Ok(body) => body,
                Err(error) => {
                    return refused(&refusals::bad_request(&format!(
                        "error decoding YAML: {error}"
                    )));
                }
            }
        } else {
            match serde_json::from_slice(&call.body) {
                Ok(body) => body,
                Err(error) => {
                    return refused(&refusals::bad_request(&format!(
                        "error decoding JSON: {error}"
                    )));
                }
            }
        };
        let checked = |body: Option<&Value>| {
            self.catalog.decode_request(&Request {
                method: &request.method,
                path: &request.path,
                query: &request.query,
                content_type: &call.content_type,
                body,
            })
        };
        // A merge patch is applied to the stored object before it is decoded: the options
        // first, then the object must exist.
        if merge {
            if let Err(refusal) = checked(None) {
                return refused(&refusal);
            }
            let name = parsed.name.clone().unwrap_or_default();
            let Some(index) = self.stored(parsed, &name) else {
                return refused(&refusals::not_found(&parsed.group, &parsed.plural, &name));
            };
            if let Err(refusal) = checked(Some(&body)) {
                return refused(&refusal);
            }
            let mut object = self.objects[index].clone();
            merge_patch(&mut object, &body);
            return self.replace(parsed, object, index, false);
        }
        let object = match checked(Some(&body)) {
            Ok(Some(object)) => object,
            Ok(None) => return refused(&refusals::bad_request("the request has no body")),
            Err(refusal) => return refused(&refusal),
        };
        let mut object = object;
        if let Some(namespace) = &parsed.namespace {
            object["metadata"]["namespace"] = Value::String(namespace.clone());
        }
        match (request.method.as_str(), &parsed.name) {
            ("POST", None) => self.create(parsed, object),
            ("PUT", Some(name)) => match self.stored(parsed, name) {
                None => refused(&refusals::not_found(&parsed.group, &parsed.plural, name)),
                Some(index) => self.replace(parsed, object, index, true),
            },
            ("PATCH", Some(name)) => match self.stored(parsed, name) {
                None => self.create(parsed, object),
                Some(index) => {
                    let mut merged = self.objects[index].clone();
                    merge_patch(&mut merged, &object);
                    self.replace(parsed, merged, index, false)
                }
            },
            (method, _) => (
                405,
                status(
                    405,
                    "MethodNotAllowed",
                    &format!(
                        "the server does not allow this method on the requested resource ({method})"
                    ),
                ),
            ),
        }
    }

    /// A create (a POST, or an apply of a missing object): the namespace must exist, the object
    /// must pass the rules of its kind, and no object of its type and name may exist.
    fn create(&mut self, parsed: &ResourcePath, mut object: Value) -> Answer {
        if let Some(namespace) = &parsed.namespace
            && !self.namespace_exists(namespace)
        {
            return refused(&refusals::not_found("", "namespaces", namespace));
        }
        // The name is generated before the object is validated, as `BeforeCreate` does (the
        // generateName's first 58 bytes and five characters; a real server's are random).
        if object["metadata"]["name"].as_str().unwrap_or("").is_empty()
            && let Some(prefix) = object["metadata"]["generateName"].as_str()
            && !prefix.is_empty()
        {
            let base: String = prefix
                .chars()
                .scan(0, |bytes, c| {
                    *bytes += c.len_utf8();
                    (*bytes <= 58).then_some(c)
                })
                .collect();
            let suffix: String = format!("{:05}", self.revision + 1)
                .bytes()
                .rev()
                .take(5)
                .map(|d| char::from(b"bcdfghjklm"[usize::from(d - b'0')]))
                .collect();
            object["metadata"]["name"] = Value::String(format!("{base}{suffix}"));
        }
        if let Some(refusal) = self
            .catalog
            .endpoint_refusal(parsed, &object, Completeness::Whole)
        {
            return refused(&refusal);
        }
        let name = object["metadata"]["name"].as_str().unwrap_or("").to_owned();
        if self.stored(parsed, &name).is_some() {
            return refused(&refusals::already_exists(
                &parsed.group,
                &parsed.plural,
                &name,
            ));
        }
        (201, serde_json::to_vec(&self.store(object, None)).unwrap())
    }

    /// A replace (`check_version`: a PUT, whose `resourceVersion`, when it has one, must be
    /// the stored object's) or the result of a patch, at `index`; the whole object must pass
    /// the rules of its kind. The `status` subresource replaces the status only.
    fn replace(
        &mut self,
        parsed: &ResourcePath,
        object: Value,
        index: usize,
        check_version: bool,
    ) -> Answer {
        let stored = &self.objects[index];
        let name = stored["metadata"]["name"].as_str().unwrap_or("").to_owned();
        let version = object["metadata"]["resourceVersion"].as_str().unwrap_or("");
        if check_version {
            let unconditional = self
                .catalog
                .by_plural(&parsed.group, &parsed.plural)
                .is_none_or(kube_syntax::object::Resource::allows_unconditional_update);
            if version.is_empty() && !unconditional {
                return refused(&refusals::resource_version_required(
                    &parsed.group,
                    &parsed.plural,
                    &name,
                ));
            }
            if !version.is_empty() && stored["metadata"]["resourceVersion"] != version {
                return refused(&refusals::conflict(&parsed.group, &parsed.plural, &name));
            }
        }
        let object = match parsed.subresource.as_deref() {
            Some("status") => {
                let mut updated = stored.clone();
                updated["status"] = object["status"].clone();
                updated
            }
            _ => object,
        };
        if let Some(refusal) = self
            .catalog
            .endpoint_refusal(parsed, &object, Completeness::Whole)
        {
            return refused(&refusal);
        }
        (
            200,
            serde_json::to_vec(&self.store(object, Some(index))).unwrap(),
        )
    }

    /// A delete of one object (404 when it is not there); the answer is the deleted object.
    fn delete(&mut self, parsed: &ResourcePath) -> Answer {
        let Some(name) = &parsed.name else {
            return (
                405,
                status(
                    405,
                    "MethodNotAllowed",
                    "the fake API server does not delete collections",
                ),
            );
        };
        let Some(index) = self.stored(parsed, name) else {
            return refused(&refusals::not_found(&parsed.group, &parsed.plural, name));
        };
        let object = self.objects.remove(index);
        self.revision += 1;
        self.events.push((self.revision, "DELETED", object.clone()));
        (200, serde_json::to_vec(&object).unwrap())
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
        self.served.insert(type_path_in(&self.catalog, &object));
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
            .filter(|(revision, _, object)| {
                *revision > after && target.matches(&self.catalog, object)
            })
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
        let namespaced = self
            .catalog
            .by_plural(&parsed.group, &parsed.plural)
            .is_none_or(|r| r.namespaced);
        if parsed.subresource.is_some()
            || (parsed.namespace.is_none() && parsed.name.is_some() && namespaced)
        {
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
            return Err(self.unserved(&parsed));
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
            group: parsed.group,
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
            let (major, minor) = ("1", "37");
            return (
                200,
                serde_json::to_vec(&json!({
                    "major": major, "minor": minor, "gitVersion": SERVER_VERSION,
                    "gitCommit": "0000000000000000000000000000000000000000",
                    "gitTreeState": "clean", "buildDate": "2026-01-01T00:00:00Z",
                    "goVersion": "go1.26.8", "compiler": "gc", "platform": "linux/amd64"
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
            .filter(|o| target.matches(&self.catalog, o))
            .cloned()
            .collect();
        match target.name {
            Some(name) => match matching.into_iter().next() {
                Some(object) => (200, serde_json::to_vec(&object).unwrap()),
                None => refused(&refusals::not_found(&target.group, &target.plural, &name)),
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
        let (code, body) = get("/api/v1/configmaps?fieldSelector=data.a%3D1");
        assert_eq!(code, 400);
        // ConfigMaps have no field-label conversion of their own.
        assert_eq!(
            body["message"],
            "\"data.a\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
        // Services have theirs: their type and cluster IP, nothing else.
        assert_eq!(
            get("/api/v1/services?fieldSelector=spec.type%3DClusterIP").0,
            200
        );
        let (code, body) = get("/api/v1/services?fieldSelector=spec.ports%3D80");
        assert_eq!(code, 400);
        assert_eq!(body["message"], "field label not supported: spec.ports");
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

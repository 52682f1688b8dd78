//! What an API server answers when it refuses a request: the `Status` bodies (422 Invalid with
//! every cause and its field path, 400 BadRequest), and [`Catalog::check_request`], which finds
//! the refusal a real server would give a request: a selector it cannot parse, a bad field
//! manager, an object that breaks the rules of [`crate::object`], a body whose name, namespace
//! or type does not match its URL.
//!
//! ```
//! use std::collections::BTreeMap;
//! use kube_syntax::object::Catalog;
//! use kube_syntax::status::Request;
//! let query = BTreeMap::from([(
//!     "labelSelector".to_owned(),
//!     "endpointslice.kubernetes.io/managed-by=clusterset.io/mcs-controller".to_owned(),
//! )]);
//! let request = Request {
//!     method: "GET", path: "/apis/discovery.k8s.io/v1/endpointslices", query: &query,
//!     content_type: "", body: None,
//! };
//! let refusal = Catalog::builtin().check_request(&request).unwrap_err();
//! assert_eq!(refusal.code, 400);
//! assert_eq!(refusal.body["reason"], "BadRequest");
//! ```

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::error::{ErrorKind, FieldError, go_quote};
use crate::meta::field_manager_errors;
use crate::object::{Catalog, Completeness, split_api_version};
use crate::selector::{FieldLabels, FieldSelector, LabelSelector};

/// The content type of a server-side apply.
pub const APPLY_PATCH: &str = "application/apply-patch+yaml";

/// A refused request: the HTTP status code and the `Status` body.
#[derive(Debug, Clone, PartialEq)]
pub struct Refusal {
    /// 400, 404, 422, ...
    pub code: u16,
    /// The `Status` object.
    pub body: Value,
}

impl Refusal {
    /// The `message` of the body.
    pub fn message(&self) -> &str {
        self.body
            .get("message")
            .and_then(Value::as_str)
            .unwrap_or("")
    }
}

fn failure(code: u16, reason: &str, message: &str, details: Option<Value>) -> Refusal {
    let mut body = json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "code": code,
    });
    // `reason` is `omitempty`: an internal error has none.
    if !reason.is_empty() {
        body["reason"] = Value::from(reason);
    }
    if let Some(details) = details {
        body["details"] = details;
    }
    Refusal { code, body }
}

/// `400 BadRequest` with `message`.
pub fn bad_request(message: &str) -> Refusal {
    failure(400, "BadRequest", message, None)
}

/// A `StatusDetails` as Go writes it: `name` and `group` are `omitempty` (left out when empty:
/// a core-group resource has no `group`, a create refused before it has a name no `name`).
fn details(group: &str, kind: &str, name: &str) -> Value {
    let mut details = serde_json::Map::new();
    if !name.is_empty() {
        details.insert("name".to_owned(), Value::from(name));
    }
    if !group.is_empty() {
        details.insert("group".to_owned(), Value::from(group));
    }
    if !kind.is_empty() {
        details.insert("kind".to_owned(), Value::from(kind));
    }
    Value::Object(details)
}

/// `plural` or `plural.group`, as `schema.GroupResource.String()` prints a resource.
fn qualified(group: &str, plural: &str) -> String {
    if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    }
}

/// `404 NotFound` for `plural` `name` (`services "web" not found`).
pub fn not_found(group: &str, plural: &str, name: &str) -> Refusal {
    failure(
        404,
        "NotFound",
        &format!("{} {} not found", qualified(group, plural), go_quote(name)),
        Some(details(group, plural, name)),
    )
}

/// `409 AlreadyExists`: a create of `plural` `name` that exists (`services "web" already
/// exists`).
pub fn already_exists(group: &str, plural: &str, name: &str) -> Refusal {
    failure(
        409,
        "AlreadyExists",
        &format!(
            "{} {} already exists",
            qualified(group, plural),
            go_quote(name)
        ),
        Some(details(group, plural, name)),
    )
}

/// What storage says when a write names a `resourceVersion` that is no longer the object's.
pub const OPTIMISTIC_LOCK: &str =
    "the object has been modified; please apply your changes to the latest version and try again";

/// `409 Conflict`: an update of `plural` `name` with a stale `resourceVersion` (`Operation
/// cannot be fulfilled on services "web": the object has been modified; ...`).
pub fn conflict(group: &str, plural: &str, name: &str) -> Refusal {
    failure(
        409,
        "Conflict",
        &format!(
            "Operation cannot be fulfilled on {} {}: {OPTIMISTIC_LOCK}",
            qualified(group, plural),
            go_quote(name)
        ),
        Some(details(group, plural, name)),
    )
}

/// The request an authorizer refused, for [`forbidden`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Denied<'a> {
    /// The user (`system:serviceaccount:<namespace>:<name>` for a ServiceAccount).
    pub user: &'a str,
    /// The verb (`create`, `patch`, `update`, `delete`, ...).
    pub verb: &'a str,
    /// The API group (`""` for the core group).
    pub group: &'a str,
    /// The resource (plural).
    pub plural: &'a str,
    /// The object's name (`""` for a create or a list).
    pub name: &'a str,
    /// The namespace (`""` for cluster-scoped requests).
    pub namespace: &'a str,
}

/// `403 Forbidden` as the API server answers a request RBAC does not allow
/// (`leases.coordination.k8s.io "x" is forbidden: User "u" cannot update resource "leases" in
/// API group "coordination.k8s.io" in the namespace "ns"`).
///
/// ```
/// use kube_syntax::status::{Denied, forbidden};
/// let refusal = forbidden(&Denied {
///     user: "system:serviceaccount:broker:agent-west",
///     verb: "delete",
///     group: "clusterset.io",
///     plural: "exportrecords",
///     name: "east.shop.web",
///     namespace: "broker-east",
/// });
/// assert_eq!(refusal.code, 403);
/// assert_eq!(
///     refusal.message(),
///     "exportrecords.clusterset.io \"east.shop.web\" is forbidden: User \"system:serviceaccount:broker:agent-west\" cannot delete resource \"exportrecords\" in API group \"clusterset.io\" in the namespace \"broker-east\""
/// );
/// ```
///
/// A subresource is named in `plural` as RBAC names it (`serviceexports/status`): the refusal
/// is of the resource (`serviceexports.multicluster.x-k8s.io "web" is forbidden: ... cannot
/// update resource "serviceexports/status" ...`).
pub fn forbidden(denied: &Denied<'_>) -> Refusal {
    let plural = denied.plural.split('/').next().unwrap_or(denied.plural);
    let resource = qualified(denied.group, plural);
    let object = if denied.name.is_empty() {
        resource
    } else {
        format!("{resource} {}", go_quote(denied.name))
    };
    let scope = if denied.namespace.is_empty() {
        " at the cluster scope".to_owned()
    } else {
        format!(" in the namespace {}", go_quote(denied.namespace))
    };
    failure(
        403,
        "Forbidden",
        &format!(
            "{object} is forbidden: User {} cannot {} resource {} in API group {}{scope}",
            go_quote(denied.user),
            denied.verb,
            go_quote(denied.plural),
            go_quote(denied.group),
        ),
        Some(details(denied.group, plural, denied.name)),
    )
}

/// `422 Invalid` of an update without a `resourceVersion` of a resource whose updates must
/// name one (custom resources, Leases, PodDisruptionBudgets, CRDs: see
/// [`crate::object::Resource::allows_unconditional_update`]); the resource stands for the kind
/// (`serviceexports.multicluster.x-k8s.io "web" is invalid: metadata.resourceVersion: Invalid
/// value: 0: must be specified for an update`).
pub fn resource_version_required(group: &str, plural: &str, name: &str) -> Refusal {
    invalid(
        group,
        plural,
        name,
        &[FieldError::invalid_json(
            "metadata.resourceVersion",
            &Value::from(0),
            "must be specified for an update",
        )],
    )
}

/// `422 Invalid` for an object of `kind` in `group` named `name`, listing every error as the
/// message (`EndpointSlice.discovery.k8s.io "web" is invalid: metadata.labels: Invalid value:
/// ...`) and as the `causes` with their field paths.
pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Refusal {
    // `errors.ToAggregate()` prints each distinct message once, in brackets when several.
    let mut messages: Vec<String> = Vec::new();
    for error in errors {
        let message = error.to_string();
        if !messages.contains(&message) {
            messages.push(message);
        }
    }
    let listed = match messages.as_slice() {
        [] => String::new(),
        [one] => format!(": {one}"),
        many => format!(": [{}]", many.join(", ")),
    };
    let causes: Vec<Value> = errors
        .iter()
        .map(|e| json!({"reason": e.kind.cause_reason(), "message": e.message(), "field": e.field}))
        .collect();
    let mut details = details(group, kind, name);
    details["causes"] = Value::from(causes);
    failure(
        422,
        "Invalid",
        &format!(
            "{} {} is invalid{listed}",
            qualified(group, kind),
            go_quote(name)
        ),
        Some(details),
    )
}

/// A URL query taken apart and percent-decoded (`%2F` → `/`, `+` → space), as the API server
/// reads `?labelSelector=...&fieldManager=...`. A key without `=` has the empty value.
///
/// ```
/// let query = kube_syntax::status::parse_query("labelSelector=app%3Dweb%2Cmon+in+%28a%29&watch");
/// assert_eq!(query["labelSelector"], "app=web,mon in (a)");
/// assert_eq!(query["watch"], "");
/// ```
pub fn parse_query(query: &str) -> BTreeMap<String, String> {
    query
        .split('&')
        .filter(|p| !p.is_empty())
        .map(|p| p.split_once('=').unwrap_or((p, "")))
        .map(|(k, v)| (decode_query_part(k), decode_query_part(v)))
        .collect()
}

/// One key or value of a URL query, percent-decoded (`+` is a space; a `%` not followed by two
/// hex digits stays as it is).
pub fn decode_query_part(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        match bytes[i] {
            b'+' => out.push(b' '),
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(high), Some(low)) => {
                    out.push(u8::try_from(high * 16 + low).unwrap_or(b'%'));
                    i += 2;
                }
                _ => out.push(b'%'),
            },
            other => out.push(other),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// A request as a fake API server receives it.
#[derive(Debug, Clone, Copy)]
pub struct Request<'a> {
    /// `GET`, `POST`, `PUT`, `PATCH`, `DELETE`.
    pub method: &'a str,
    /// The URL path.
    pub path: &'a str,
    /// The decoded query.
    pub query: &'a BTreeMap<String, String>,
    /// The `Content-Type` header (empty without a body).
    pub content_type: &'a str,
    /// The JSON body, if any.
    pub body: Option<&'a Value>,
}

/// A request path taken apart.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResourcePath {
    /// API group (`""` for core).
    pub group: String,
    /// Version.
    pub version: String,
    /// Namespace, for namespaced requests.
    pub namespace: Option<String>,
    /// The resource's plural.
    pub plural: String,
    /// The object's name, for requests on one object.
    pub name: Option<String>,
    /// The subresource (`status`), if any.
    pub subresource: Option<String>,
}

/// Takes apart `/api/v1/namespaces/ns/services/web/status` and the like; `None` for paths that
/// name no resource (discovery, `/version`).
pub fn parse_path(path: &str) -> Option<ResourcePath> {
    let (group, version, rest) = if let Some(rest) = path.strip_prefix("/api/") {
        let (version, rest) = rest.split_once('/')?;
        ("", version, rest)
    } else {
        let rest = path.strip_prefix("/apis/")?;
        let mut parts = rest.splitn(3, '/');
        let (group, version, rest) = (parts.next()?, parts.next()?, parts.next()?);
        (group, version, rest)
    };
    let segments: Vec<&str> = rest.split('/').filter(|s| !s.is_empty()).collect();
    let (namespace, tail): (Option<&str>, &[&str]) = match segments.as_slice() {
        // `/namespaces/demo/status` and `/namespaces/demo/finalize` are the namespace's own
        // subresources, as the request info of the API server reads them.
        ["namespaces", namespace, tail @ ..]
            if !tail.is_empty() && !matches!(tail[0], "status" | "finalize") =>
        {
            (Some(*namespace), tail)
        }
        tail => (None, tail),
    };
    let (plural, name, subresource) = match tail {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return None,
    };
    Some(ResourcePath {
        group: group.to_owned(),
        version: version.to_owned(),
        namespace: namespace.map(str::to_owned),
        plural: plural.to_owned(),
        name: name.map(str::to_owned),
        subresource: subresource.map(str::to_owned),
    })
}

impl Catalog {
    /// The refusal a real API server gives `request`, if any. Requests on types the catalog does
    /// not know get the rules every kind shares (selectors, field manager, metadata). Patches
    /// are checked on what they send; a server that keeps objects should also check the patched
    /// result with [`Catalog::refusal`] and [`Completeness::Whole`].
    ///
    /// Fields a custom resource's schema does not declare follow the `fieldValidation` query
    /// parameter as in Kubernetes 1.28: absent, `Warn` or `Ignore`, the request passes (a real
    /// server prunes them: a fake one that stores objects can do the same with
    /// [`Catalog::prune`]); `Strict`, a create or update is a 400 (`strict decoding error:
    /// unknown field "spec.x"`) and a merge patch a 422 on `patch`; a server-side apply fails
    /// with a 500 whatever the parameter. A fake server that wants the code it serves never to
    /// send such fields can check as under `Strict`, or look at [`Catalog::unknown_fields`].
    pub fn check_request(&self, request: &Request<'_>) -> Result<(), Refusal> {
        let Some(object) = self.decode_request(request)? else {
            return Ok(());
        };
        let completeness = if request.method == "PATCH" {
            Completeness::Patch
        } else {
            Completeness::Whole
        };
        let Some(path) = parse_path(request.path) else {
            return Ok(());
        };
        match self.endpoint_refusal(&path, &object, completeness) {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
    }

    /// The checks of [`Catalog::check_request`] that a real server makes before admission and
    /// validation (the query, the options, decoding the body: its type, name and namespace
    /// against the URL, undeclared fields), in its order; `Ok` with the object the body of a
    /// write decodes to (its `apiVersion`, `kind` and name filled in from the URL when it has
    /// none), which the server then admits and validates ([`Catalog::refusal`]): a fake server
    /// that keeps objects checks the namespace, the stored object and the resource version in
    /// between, as a real one does.
    pub fn decode_request(&self, request: &Request<'_>) -> Result<Option<Value>, Refusal> {
        let Some(path) = parse_path(request.path) else {
            return Ok(None);
        };
        if let Some(selector) = request.query.get("labelSelector") {
            LabelSelector::parse(selector).map_err(|e| bad_request(&e.message))?;
        }
        // A type the catalog does not know: its kind is unknown, so only the rules every kind
        // shares apply (selectors above, the field manager and the metadata below).
        let unknown;
        let resource = match self.by_plural(&path.group, &path.plural) {
            Some(resource) => resource,
            None => {
                unknown = unknown_resource(&path, request.body);
                &unknown
            }
        };
        check_field_selector(request, resource)?;
        let apply = request.method == "PATCH" && request.content_type == APPLY_PATCH;
        let writes = matches!(request.method, "POST" | "PUT" | "PATCH");
        if writes {
            check_write_options(request, apply)?;
        }
        let Some(body) = request.body.filter(|_| writes) else {
            return Ok(None);
        };
        if !body.is_object() {
            return Err(bad_request("the body of the request is not a JSON object"));
        }
        let merge_patch = request.method == "PATCH" && !apply;
        let expected = if path.group.is_empty() {
            path.version.clone()
        } else {
            format!("{}/{}", path.group, path.version)
        };
        self.check_body_type(&path, resource, body, &expected, apply, merge_patch)?;
        let object = completed_object(body, resource, &expected, &path);
        self.check_unknown_fields(request, resource, body, &object, apply, merge_patch)?;
        check_body_names(&path, body)?;
        Ok(Some(object))
    }

    /// The refusal when the type a write's `body` names is not its URL's: for a server-side
    /// apply, the field manager's exact check; otherwise the decoder's ([`Catalog::decode_type`],
    /// for a known type, unless a merge patch names no type).
    fn check_body_type(
        &self,
        path: &ResourcePath,
        resource: &crate::object::Resource,
        body: &Value,
        expected: &str,
        apply: bool,
        merge_patch: bool,
    ) -> Result<(), Refusal> {
        let kind = body.get("kind").and_then(Value::as_str);
        let api_version = body.get("apiVersion").and_then(Value::as_str);
        if apply && !resource.kind.is_empty() {
            // The field manager's version check: the applied object's type is the URL's, exactly.
            let (group, version) = split_api_version(api_version.unwrap_or(""));
            let kind = kind.unwrap_or("");
            if (group, version, kind)
                != (
                    path.group.as_str(),
                    path.version.as_str(),
                    resource.kind.as_str(),
                )
            {
                return Err(bad_request(&format!(
                    "invalid object type: {group}/{version}, Kind={kind}"
                )));
            }
        } else if (!merge_patch || kind.is_some() || api_version.is_some())
            && self.by_plural(&path.group, &path.plural).is_some()
        {
            self.decode_type(resource, expected, api_version, kind)?;
        }
        Ok(())
    }

    /// The refusal of decoding `object` (the write's `body` completed) when it has fields the
    /// schema does not declare: a server-side apply's 500, or under `fieldValidation=Strict` a
    /// merge patch's 422 on `patch` or another write's 400; none under `Warn` and `Ignore`.
    fn check_unknown_fields(
        &self,
        request: &Request<'_>,
        resource: &crate::object::Resource,
        body: &Value,
        object: &Value,
        apply: bool,
        merge_patch: bool,
    ) -> Result<(), Refusal> {
        let unknown = self.unknown_fields(object);
        if !unknown.is_empty() {
            let directive = request
                .query
                .get("fieldValidation")
                .map_or("", String::as_str);
            if apply {
                return Err(typed_patch_refusal(object, &unknown));
            }
            if directive == "Strict" {
                let listed: Vec<String> = unknown
                    .iter()
                    .map(|e| format!("unknown field {}", go_quote(&e.field)))
                    .collect();
                let strict = format!("strict decoding error: {}", listed.join(", "));
                if merge_patch {
                    // A real server prints the patched object as the value; the patch stands
                    // for it here.
                    return Err(invalid(
                        "",
                        "",
                        "",
                        &[FieldError::invalid("patch", &body.to_string(), strict)],
                    ));
                }
                let (_, version) = split_api_version(
                    object
                        .get("apiVersion")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                );
                return Err(bad_request(&format!(
                    "{kind} in version {} cannot be handled as a {kind}: {strict}",
                    go_quote(version),
                    kind = resource.kind,
                )));
            }
            // Warn (the default) and Ignore: the server prunes them and goes on
            // (`Catalog::prune` does the same to what a fake server stores).
        }
        Ok(())
    }

    /// The refusal of the decoder when a create's or replace's body names another type than
    /// its URL (`apiVersion` and `kind` default to the URL's). A built-in endpoint decodes
    /// with the scheme of the built-in types: a type the scheme does not have is `no kind ...
    /// is registered`, another kind fails its conversion to the endpoint's internal type, the
    /// same kind of another group version is not accepted.
    fn decode_type(
        &self,
        resource: &crate::object::Resource,
        expected: &str,
        api_version: Option<&str>,
        kind: Option<&str>,
    ) -> Result<(), Refusal> {
        if resource.kind.is_empty() {
            return Ok(());
        }
        let api_version = api_version.unwrap_or(expected);
        let kind = kind.unwrap_or(&resource.kind);
        let (group, version) = split_api_version(api_version);
        let cannot = |why: String| {
            Err(bad_request(&format!(
                "{kind} in version {} cannot be handled as a {}: {why}",
                go_quote(version),
                resource.kind
            )))
        };
        if resource.crd.is_none() {
            if !crate::object::decodes_builtin(group, version, kind) {
                return cannot(format!(
                    "no kind {} is registered for version {} in scheme \"pkg/runtime/scheme.go:111\"",
                    go_quote(kind),
                    go_quote(api_version)
                ));
            }
            if kind != resource.kind {
                // The internal type's package: the group's first label (`core` for the core
                // group and `events.k8s.io`, whose Event is the core one).
                let internal = match resource.group.as_str() {
                    "" | "events.k8s.io" => "core",
                    other => other.split('.').next().unwrap_or(other),
                };
                return cannot(format!(
                    "converting ({version}.{kind}) to ({internal}.{}): unknown conversion",
                    resource.kind
                ));
            }
        }
        // A custom resource's endpoint decodes any kind: another kind is refused by its
        // validation (`Catalog::endpoint_refusal`).
        if api_version != expected {
            return Err(bad_request(&format!(
                "the API version in the data ({api_version}) does not match the expected API version ({expected})"
            )));
        }
        Ok(())
    }

    /// The `422 Invalid` a real server gives `object` sent to the endpoint at `path`: for a
    /// custom resource's endpoint, the object's `kind` and `apiVersion` must be the endpoint's
    /// (`ValidateTypeMeta`, whose errors are then the only ones: `ServiceImport.x "a" is invalid:
    /// kind: Invalid value: "ServiceImport": must be ServiceExport`); otherwise
    /// [`Catalog::refusal`].
    pub fn endpoint_refusal(
        &self,
        path: &ResourcePath,
        object: &Value,
        completeness: Completeness,
    ) -> Option<Refusal> {
        if let Some(resource) = self
            .by_plural(&path.group, &path.plural)
            .filter(|r| r.crd.is_some())
        {
            let text = |key: &str| object.pointer(key).and_then(Value::as_str).unwrap_or("");
            let expected = format!("{}/{}", path.group, path.version);
            let mut errors = Vec::new();
            if text("/kind") != resource.kind {
                errors.push(FieldError::invalid(
                    "kind",
                    text("/kind"),
                    format!("must be {}", resource.kind),
                ));
            }
            if text("/apiVersion") != expected {
                errors.push(FieldError::invalid(
                    "apiVersion",
                    text("/apiVersion"),
                    format!("must be {expected}"),
                ));
            }
            if !errors.is_empty() {
                let (group, _) = split_api_version(text("/apiVersion"));
                return Some(invalid(
                    group,
                    text("/kind"),
                    text("/metadata/name"),
                    &errors,
                ));
            }
        }
        self.refusal(object, completeness)
    }

    /// The `422 Invalid` a real server gives `object` (by its `apiVersion`, `kind` and name),
    /// built from [`Catalog::object_errors`] without the unknown fields (which a real server
    /// prunes or refuses before it validates: see [`Catalog::unknown_fields`]); `None` when it
    /// has no errors.
    pub fn refusal(&self, object: &Value, completeness: Completeness) -> Option<Refusal> {
        let errors: Vec<FieldError> = self
            .object_errors(object, completeness)
            .into_iter()
            .filter(|e| e.kind != ErrorKind::Unknown)
            .collect();
        if errors.is_empty() {
            return None;
        }
        let text = |key: &str| object.pointer(key).and_then(Value::as_str).unwrap_or("");
        let (group, _) = split_api_version(text("/apiVersion"));
        Some(invalid(
            group,
            text("/kind"),
            text("/metadata/name"),
            &errors,
        ))
    }
}

/// The resource at `path` for a type the catalog does not know, its kind the request body's
/// (empty without one).
fn unknown_resource(path: &ResourcePath, body: Option<&Value>) -> crate::object::Resource {
    crate::object::Resource {
        group: path.group.clone(),
        versions: vec![path.version.clone()],
        kind: body
            .and_then(|b| b.get("kind"))
            .and_then(Value::as_str)
            .unwrap_or("")
            .to_owned(),
        plural: path.plural.clone(),
        namespaced: path.namespace.is_some(),
        crd: None,
    }
}

/// The refusal of the request's `fieldSelector`, parsed with the field labels of `resource`.
fn check_field_selector(
    request: &Request<'_>,
    resource: &crate::object::Resource,
) -> Result<(), Refusal> {
    if let Some(selector) = request.query.get("fieldSelector") {
        let labels = if resource.crd.is_some() {
            FieldLabels::CustomResource {
                namespaced: resource.namespaced,
            }
        } else {
            FieldLabels::builtin(&resource.group, &resource.kind)
        };
        FieldSelector::parse_with(labels, selector).map_err(|e| bad_request(&e.message))?;
    }
    Ok(())
}

/// The refusal of a write's options (`fieldManager`, `fieldValidation`): a `422 Invalid` of
/// `CreateOptions`, `UpdateOptions` or `PatchOptions`.
fn check_write_options(request: &Request<'_>, apply: bool) -> Result<(), Refusal> {
    let manager = request.query.get("fieldManager").map_or("", String::as_str);
    let mut errors = field_manager_errors("fieldManager", manager, apply);
    // `ValidateFieldValidation`: empty (Warn), Ignore, Warn or Strict.
    let directive = request
        .query
        .get("fieldValidation")
        .map_or("", String::as_str);
    if !FIELD_VALIDATIONS.contains(&directive) {
        errors.push(FieldError::not_supported(
            "fieldValidation",
            directive,
            &FIELD_VALIDATIONS,
        ));
    }
    if !errors.is_empty() {
        let options = match request.method {
            "POST" => "CreateOptions",
            "PUT" => "UpdateOptions",
            _ => "PatchOptions",
        };
        return Err(invalid("meta.k8s.io", options, "", &errors));
    }
    // `force` is read as a boolean and anything but `true` is false: no refusal.
    Ok(())
}

/// The object a write's `body` decodes to: its `kind`, `apiVersion` (`expected`) and name
/// filled in from the URL at `path` when it has none.
fn completed_object(
    body: &Value,
    resource: &crate::object::Resource,
    expected: &str,
    path: &ResourcePath,
) -> Value {
    let mut object = body.clone();
    if object.get("kind").is_none() {
        object["kind"] = Value::from(resource.kind.clone());
    }
    if object.get("apiVersion").is_none() {
        object["apiVersion"] = Value::from(expected.to_owned());
    }
    if let Some(name) = &path.name
        && object.pointer("/metadata/name").is_none()
    {
        if !object.get("metadata").is_some_and(Value::is_object) {
            object["metadata"] = json!({});
        }
        object["metadata"]["name"] = Value::from(name.clone());
    }
    object
}

/// The refusal when the namespace or the name in a write's `body` is not the URL's.
fn check_body_names(path: &ResourcePath, body: &Value) -> Result<(), Refusal> {
    let body_namespace = body.pointer("/metadata/namespace").and_then(Value::as_str);
    if let (Some(have), Some(url)) = (body_namespace, path.namespace.as_deref())
        && !have.is_empty()
        && have != url
    {
        return Err(bad_request(
            "the namespace of the provided object does not match the namespace sent on the request",
        ));
    }
    let body_name = body.pointer("/metadata/name").and_then(Value::as_str);
    if let (Some(have), Some(url)) = (body_name, path.name.as_deref())
        && have != url
    {
        return Err(bad_request(&format!(
            "the name of the object ({have}) does not match the name on the URL ({url})"
        )));
    }
    Ok(())
}

/// The values `fieldValidation` may take, sorted as `allowedFieldValidationValues.List()`.
const FIELD_VALIDATIONS: [&str; 4] = ["", "Ignore", "Strict", "Warn"];

/// What a server-side apply with fields the schema does not declare gets, whatever the
/// `fieldValidation`: the typed conversion of the patch fails (structured-merge-diff stops at
/// the first undeclared field of each map) and the plain error becomes a 500. Fields inside
/// keyed lists are named by index here, by key (`[name="http"]`) on a real server.
fn typed_patch_refusal(object: &Value, unknown: &[FieldError]) -> Refusal {
    let mut parents = Vec::new();
    let messages: Vec<String> = unknown
        .iter()
        .filter(|e| {
            let parent = e.field.rsplit_once('.').map_or("", |(p, _)| p).to_owned();
            !parents.contains(&parent) && {
                parents.push(parent);
                true
            }
        })
        .map(|e| format!(".{}: field not declared in schema", e.field))
        .collect();
    let listed = match messages.as_slice() {
        [one] => one.clone(),
        many => format!("errors:\n  {}", many.join("\n  ")),
    };
    let text = |key: &str| object.pointer(key).and_then(Value::as_str).unwrap_or("");
    let (group, version) = split_api_version(text("/apiVersion"));
    failure(
        500,
        "",
        &format!(
            "failed to create typed patch object ({}/{}; {group}/{version}, Kind={}): {listed}",
            text("/metadata/namespace"),
            text("/metadata/name"),
            text("/kind"),
        ),
        None,
    )
}

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
        "status": "Failure", "message": message, "reason": reason, "code": code,
    });
    if let Some(details) = details {
        body["details"] = details;
    }
    Refusal { code, body }
}

/// `400 BadRequest` with `message`.
pub fn bad_request(message: &str) -> Refusal {
    failure(400, "BadRequest", message, None)
}

/// `404 NotFound` for `plural` `name` (`services "web" not found`).
pub fn not_found(group: &str, plural: &str, name: &str) -> Refusal {
    let resource = if group.is_empty() {
        plural.to_owned()
    } else {
        format!("{plural}.{group}")
    };
    failure(
        404,
        "NotFound",
        &format!("{resource} {} not found", go_quote(name)),
        Some(json!({"name": name, "group": group, "kind": plural})),
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
pub fn forbidden(denied: &Denied<'_>) -> Refusal {
    let resource = if denied.group.is_empty() {
        denied.plural.to_owned()
    } else {
        format!("{}.{}", denied.plural, denied.group)
    };
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
        Some(json!({"name": denied.name, "group": denied.group, "kind": denied.plural})),
    )
}

/// `422 Invalid` for an object of `kind` in `group` named `name`, listing every error as the
/// message (`EndpointSlice.discovery.k8s.io "web" is invalid: metadata.labels: Invalid value:
/// ...`) and as the `causes` with their field paths.
pub fn invalid(group: &str, kind: &str, name: &str, errors: &[FieldError]) -> Refusal {
    let qualified = if group.is_empty() {
        kind.to_owned()
    } else {
        format!("{kind}.{group}")
    };
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
    failure(
        422,
        "Invalid",
        &format!("{qualified} {} is invalid{listed}", go_quote(name)),
        Some(json!({"name": name, "group": group, "kind": kind, "causes": causes})),
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
        let Some(path) = parse_path(request.path) else {
            return Ok(());
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
                unknown = crate::object::Resource {
                    group: path.group.clone(),
                    versions: vec![path.version.clone()],
                    kind: request
                        .body
                        .and_then(|b| b.get("kind"))
                        .and_then(Value::as_str)
                        .unwrap_or("")
                        .to_owned(),
                    plural: path.plural.clone(),
                    namespaced: path.namespace.is_some(),
                    crd: None,
                };
                &unknown
            }
        };
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
        let apply = request.method == "PATCH" && request.content_type == APPLY_PATCH;
        let writes = matches!(request.method, "POST" | "PUT" | "PATCH");
        if writes {
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
            if apply
                && request
                    .query
                    .get("force")
                    .is_some_and(|f| f != "true" && f != "false")
            {
                return Err(bad_request("force: must be true or false"));
            }
        }
        let Some(body) = request.body.filter(|_| writes) else {
            return Ok(());
        };
        if !body.is_object() {
            return Err(bad_request("the body of the request is not a JSON object"));
        }
        let kind = body.get("kind").and_then(Value::as_str);
        let api_version = body.get("apiVersion").and_then(Value::as_str);
        let merge_patch = request.method == "PATCH" && !apply;
        if !merge_patch || kind.is_some() || api_version.is_some() {
            let expected = if path.group.is_empty() {
                path.version.clone()
            } else {
                format!("{}/{}", path.group, path.version)
            };
            match (api_version, kind) {
                (None, _) if apply => {
                    return Err(bad_request("apiVersion must be set in an apply patch"));
                }
                (_, None) if apply => {
                    return Err(bad_request("kind must be set in an apply patch"));
                }
                (Some(have), _) if have != expected => {
                    return Err(bad_request(&format!(
                        "the API version in the data ({have}) does not match the expected API version ({expected})"
                    )));
                }
                (_, Some(have)) if !resource.kind.is_empty() && have != resource.kind => {
                    return Err(bad_request(&format!(
                        "the kind in the data ({have}) does not match the expected kind ({})",
                        resource.kind
                    )));
                }
                _ => {}
            }
        }
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
        let mut object = body.clone();
        if object.get("kind").is_none() {
            object["kind"] = Value::from(resource.kind.clone());
        }
        if object.get("apiVersion").is_none() {
            let api_version = if path.group.is_empty() {
                path.version.clone()
            } else {
                format!("{}/{}", path.group, path.version)
            };
            object["apiVersion"] = Value::from(api_version);
        }
        if let Some(name) = &path.name
            && object.pointer("/metadata/name").is_none()
        {
            if !object.get("metadata").is_some_and(Value::is_object) {
                object["metadata"] = json!({});
            }
            object["metadata"]["name"] = Value::from(name.clone());
        }
        let completeness = if request.method == "PATCH" {
            Completeness::Patch
        } else {
            Completeness::Whole
        };
        let unknown = self.unknown_fields(&object);
        if !unknown.is_empty() {
            let directive = request
                .query
                .get("fieldValidation")
                .map_or("", String::as_str);
            if apply {
                return Err(typed_patch_refusal(&object, &unknown));
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
        match self.refusal(&object, completeness) {
            Some(refusal) => Err(refusal),
            None => Ok(()),
        }
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
        "Unknown",
        &format!(
            "failed to create typed patch object ({}/{}; {group}/{version}, Kind={}): {listed}",
            text("/metadata/namespace"),
            text("/metadata/name"),
            text("/kind"),
        ),
        None,
    )
}

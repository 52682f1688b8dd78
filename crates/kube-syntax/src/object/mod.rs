//! Whole objects checked as the API server checks them: metadata for every kind, the spec of
//! the built-in kinds clusterset writes (Service, EndpointSlice, Lease, Event, ConfigMap,
//! Secret, Deployment, PodDisruptionBudget), and custom objects against their CRD's schema.
//!
//! ```
//! use kube_syntax::object::{Catalog, Completeness};
//! let slice = serde_json::json!({
//!     "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
//!     "metadata": {"name": "web-east", "namespace": "demo", "labels": {
//!         "endpointslice.kubernetes.io/managed-by": "clusterset.io/mcs-controller"}},
//!     "addressType": "IPv4", "endpoints": [],
//! });
//! let errors = Catalog::builtin().object_errors(&slice, Completeness::Whole);
//! assert_eq!(errors[0].field, "metadata.labels");
//! ```

mod kinds;

use std::collections::BTreeMap;

use serde_json::Value;

use crate::crd::{schema_errors, version_schema};
use crate::error::FieldError;
use crate::labels::{annotations_errors, labels_errors};
use crate::names::{dns1123_label_problems, object_name_problems, qualified_name_problems};

use kinds::{
    core_event_errors, data_key_errors, deployment_errors, endpoint_slice_errors, event_errors,
    lease_errors, pod_disruption_budget_errors, service_errors,
};
pub use kinds::{non_special_ip_problems, parse_ip_sloppy};

/// Whether an object is all there is (a create, a replace, or a patch's result), or only the
/// fields a patch sends (then missing required fields are not errors).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Completeness {
    /// The whole object.
    Whole,
    /// A patch: only what is present is checked.
    Patch,
}

/// One resource type the API server serves.
#[derive(Debug, Clone, PartialEq)]
pub struct Resource {
    /// API group (`""` for core).
    pub group: String,
    /// The versions served.
    pub versions: Vec<String>,
    /// Kind.
    pub kind: String,
    /// Plural (the path segment).
    pub plural: String,
    /// Whether objects live in namespaces.
    pub namespaced: bool,
    /// For custom resources: the CRD (as JSON) whose schemas objects must follow.
    pub crd: Option<Value>,
}

/// The resource types an API server serves: the built-in ones clusterset touches, plus CRDs.
#[derive(Debug, Clone, Default)]
pub struct Catalog {
    resources: Vec<Resource>,
}

const BUILTIN: &[(&str, &str, &str, &str, bool)] = &[
    ("", "v1", "Service", "services", true),
    ("", "v1", "ConfigMap", "configmaps", true),
    ("", "v1", "Secret", "secrets", true),
    ("", "v1", "Pod", "pods", true),
    ("", "v1", "Event", "events", true),
    ("", "v1", "Endpoints", "endpoints", true),
    (
        "",
        "v1",
        "PersistentVolumeClaim",
        "persistentvolumeclaims",
        true,
    ),
    ("", "v1", "ServiceAccount", "serviceaccounts", true),
    ("", "v1", "Namespace", "namespaces", false),
    ("", "v1", "Node", "nodes", false),
    ("apps", "v1", "Deployment", "deployments", true),
    (
        "discovery.k8s.io",
        "v1",
        "EndpointSlice",
        "endpointslices",
        true,
    ),
    ("coordination.k8s.io", "v1", "Lease", "leases", true),
    // What the charts of deploy/helm install: RBAC and a PodDisruptionBudget.
    ("rbac.authorization.k8s.io", "v1", "Role", "roles", true),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "RoleBinding",
        "rolebindings",
        true,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRole",
        "clusterroles",
        false,
    ),
    (
        "rbac.authorization.k8s.io",
        "v1",
        "ClusterRoleBinding",
        "clusterrolebindings",
        false,
    ),
    (
        "policy",
        "v1",
        "PodDisruptionBudget",
        "poddisruptionbudgets",
        true,
    ),
    ("events.k8s.io", "v1", "Event", "events", true),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
];

/// The older versions of the built-in kinds above that the API server's scheme still decodes
/// (and converts) although it serves only the newest: a body of one of them gets past the
/// decoder, to be refused for its version (`the API version in the data (apps/v1beta1) does not
/// match the expected API version (apps/v1)`); a version the scheme lacks is `no kind ... is
/// registered`.
const DECODED_VERSIONS: &[(&str, &str, &[&str])] = &[
    ("apps", "v1beta1", &["Deployment"]),
    ("apps", "v1beta2", &["Deployment"]),
    ("discovery.k8s.io", "v1beta1", &["EndpointSlice"]),
    ("coordination.k8s.io", "v1beta1", &["Lease"]),
    (
        "rbac.authorization.k8s.io",
        "v1beta1",
        &["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"],
    ),
    (
        "rbac.authorization.k8s.io",
        "v1alpha1",
        &["Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"],
    ),
    ("policy", "v1beta1", &["PodDisruptionBudget"]),
    ("events.k8s.io", "v1beta1", &["Event"]),
    (
        "apiextensions.k8s.io",
        "v1beta1",
        &["CustomResourceDefinition"],
    ),
];

/// Whether the API server's scheme decodes `kind` of `group`/`version`: a built-in kind of
/// [`Catalog::builtin`] at its served version or one of the older ones it still knows.
pub fn decodes_builtin(group: &str, version: &str, kind: &str) -> bool {
    BUILTIN
        .iter()
        .any(|(g, v, k, _, _)| (*g, *v, *k) == (group, version, kind))
        || DECODED_VERSIONS
            .iter()
            .any(|(g, v, kinds)| (*g, *v) == (group, version) && kinds.contains(&kind))
}

/// `("apps", "v1")` from `"apps/v1"`, `("", "v1")` from `"v1"`.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
}

impl Resource {
    /// Whether an update may leave out `metadata.resourceVersion` (the registry's
    /// `AllowUnconditionalUpdate`): not for custom resources, CRDs, Leases and
    /// PodDisruptionBudgets, whose updates without one are refused with
    /// [`crate::status::resource_version_required`].
    pub fn allows_unconditional_update(&self) -> bool {
        self.crd.is_none()
            && !matches!(
                (self.group.as_str(), self.kind.as_str()),
                ("coordination.k8s.io", "Lease")
                    | ("policy", "PodDisruptionBudget")
                    | ("apiextensions.k8s.io", "CustomResourceDefinition")
            )
    }
}

impl Catalog {
    /// The built-in types clusterset reads and writes.
    pub fn builtin() -> Self {
        Self {
            resources: BUILTIN
                .iter()
                .map(|(group, version, kind, plural, namespaced)| Resource {
                    group: (*group).to_owned(),
                    versions: vec![(*version).to_owned()],
                    kind: (*kind).to_owned(),
                    plural: (*plural).to_owned(),
                    namespaced: *namespaced,
                    crd: None,
                })
                .collect(),
        }
    }

    /// Also serves the custom resource of `crd` (a CustomResourceDefinition as JSON).
    pub fn with_crd(mut self, crd: &Value) -> Self {
        let text = |p: &str| {
            crd.pointer(p)
                .and_then(Value::as_str)
                .unwrap_or("")
                .to_owned()
        };
        let versions = crd
            .pointer("/spec/versions")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter(|v| v.get("served").and_then(Value::as_bool) != Some(false))
            .filter_map(|v| v.get("name").and_then(Value::as_str).map(str::to_owned))
            .collect();
        self.resources.push(Resource {
            group: text("/spec/group"),
            versions,
            kind: text("/spec/names/kind"),
            plural: text("/spec/names/plural"),
            namespaced: text("/spec/scope") != "Cluster",
            crd: Some(crd.clone()),
        });
        self
    }

    /// The resource at `group`/`plural`.
    pub fn by_plural(&self, group: &str, plural: &str) -> Option<&Resource> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.plural == plural)
    }

    /// The resources of `group`.
    pub fn by_group<'a>(&'a self, group: &'a str) -> impl Iterator<Item = &'a Resource> + 'a {
        self.resources.iter().filter(move |r| r.group == group)
    }

    /// The resource of `kind` in `group`.
    pub fn by_kind(&self, group: &str, kind: &str) -> Option<&Resource> {
        self.resources
            .iter()
            .find(|r| r.group == group && r.kind == kind)
    }

    /// Every problem the API server finds in `object` (by its `apiVersion` and `kind`).
    /// Objects of a type the catalog does not know get their metadata checked only.
    pub fn object_errors(&self, object: &Value, completeness: Completeness) -> Vec<FieldError> {
        let api_version = object
            .get("apiVersion")
            .and_then(Value::as_str)
            .unwrap_or("");
        let kind = object.get("kind").and_then(Value::as_str).unwrap_or("");
        let (group, version) = split_api_version(api_version);
        let resource = self.by_kind(group, kind);
        // A kind the catalog does not know may be either; its namespace is checked as a name.
        let namespaced = resource.is_none_or(|r| r.namespaced);
        let mut errors = metadata_errors(group, kind, object, namespaced, completeness);
        let whole = completeness == Completeness::Whole;
        match (group, kind) {
            ("", "Service") => errors.extend(service_errors(object, whole)),
            ("discovery.k8s.io", "EndpointSlice") => {
                errors.extend(endpoint_slice_errors(object, whole));
            }
            ("coordination.k8s.io", "Lease") => errors.extend(lease_errors(object)),
            // `ValidateEventCreate` checks the Event before its metadata.
            ("events.k8s.io", "Event") => {
                errors.splice(0..0, event_errors(object, whole));
            }
            ("", "Event") => {
                errors.splice(0..0, core_event_errors(object, whole));
            }
            ("", "ConfigMap") | ("", "Secret") => errors.extend(data_key_errors(object)),
            ("apps", "Deployment") => errors.extend(deployment_errors(object, whole)),
            ("policy", "PodDisruptionBudget") => {
                errors.extend(pod_disruption_budget_errors(object));
            }
            ("apiextensions.k8s.io", "CustomResourceDefinition") => {
                errors.extend(crate::crd::crd_errors(object));
            }
            _ => {}
        }
        if let Some((resource, crd)) = resource.and_then(|r| r.crd.as_ref().map(|c| (r, c))) {
            // Only served versions have a schema to follow; others are not there.
            let served = resource.versions.iter().any(|v| v == version);
            match version_schema(crd, version).filter(|_| served) {
                Some(schema) => {
                    let mut found = schema_errors("", object, schema);
                    if !whole {
                        found.retain(|e| e.kind != crate::error::ErrorKind::Required);
                    }
                    // Only the schema applies to a custom resource: conditions it leaves
                    // free are not checked as `metav1.Condition`s (`ValidateConditions` runs
                    // for built-in kinds only).
                    errors.extend(found);
                }
                None => errors.push(FieldError::not_supported("apiVersion", api_version, &[])),
            }
        }
        errors
    }
}

impl Catalog {
    /// The schema a custom `object` follows (its CRD's, for a served version), if any.
    fn custom_schema(&self, object: &Value) -> Option<&Value> {
        let api_version = text(object, "/apiVersion").unwrap_or("");
        let (group, version) = split_api_version(api_version);
        let resource = self.by_kind(group, text(object, "/kind").unwrap_or(""))?;
        let crd = resource.crd.as_ref()?;
        resource
            .versions
            .iter()
            .any(|v| v == version)
            .then(|| version_schema(crd, version))
            .flatten()
    }

    /// Drops the fields of a custom `object` its CRD's schema does not declare, as the API
    /// server does to what it stores under `fieldValidation` `Warn` (the default) or `Ignore`.
    /// Objects of built-in kinds are left as they are.
    pub fn prune(&self, object: &mut Value) {
        if let Some(schema) = self.custom_schema(object).cloned() {
            crate::crd::prune(object, &schema);
        }
    }

    /// The fields of a custom `object` its CRD's schema does not declare
    /// ([`ErrorKind::Unknown`](crate::ErrorKind::Unknown) entries of
    /// [`Catalog::object_errors`]): a real server drops them (`Warn`, `Ignore`) or refuses the
    /// request (`Strict`); they never cause a 422.
    pub fn unknown_fields(&self, object: &Value) -> Vec<FieldError> {
        self.object_errors(object, Completeness::Patch)
            .into_iter()
            .filter(|e| e.kind == crate::error::ErrorKind::Unknown)
            .collect()
    }
}

fn text<'a>(value: &'a Value, pointer: &str) -> Option<&'a str> {
    value.pointer(pointer).and_then(Value::as_str)
}

fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .map(|(k, v)| {
                    (
                        k.clone(),
                        v.as_str().map_or_else(|| v.to_string(), str::to_owned),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

fn items<'a>(value: &'a Value, pointer: &str) -> &'a [Value] {
    value
        .pointer(pointer)
        .and_then(Value::as_array)
        .map_or(&[], Vec::as_slice)
}

/// One `Invalid` error per problem, as the API server lists them.
fn problems_error(field: &str, value: &str, problems: Vec<String>) -> Vec<FieldError> {
    problems
        .into_iter()
        .map(|problem| FieldError::invalid(field, value, problem))
        .collect()
}

/// `ValidateObjectMeta` for an object of `kind` in `group`.
pub fn metadata_errors(
    group: &str,
    kind: &str,
    object: &Value,
    namespaced: bool,
    completeness: Completeness,
) -> Vec<FieldError> {
    let mut errors = name_errors(group, kind, object, completeness);
    errors.extend(namespace_errors(object, namespaced));
    errors.extend(string_map_errors(
        "metadata.labels",
        object.pointer("/metadata/labels"),
        labels_errors,
    ));
    errors.extend(string_map_errors(
        "metadata.annotations",
        object.pointer("/metadata/annotations"),
        annotations_errors,
    ));
    errors.extend(finalizers_errors(object));
    errors.extend(owner_references_errors(object));
    errors
}

/// The problems of `metadata.generateName` and `metadata.name` of an object of `kind` in
/// `group` (`ValidateObjectMetaAccessor`): generateName when set (its trailing dash masked as
/// `maskTrailingDash` masks it: the last two bytes become `a`), then the name; a name the
/// server will generate from generateName is not required.
fn name_errors(
    group: &str,
    kind: &str,
    object: &Value,
    completeness: Completeness,
) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let name = text(object, "/metadata/name");
    let generate_name = text(object, "/metadata/generateName");
    let prefix = generate_name.filter(|p| !p.is_empty());
    if let Some(prefix) = prefix {
        let masked = match prefix.as_bytes() {
            [head @ .., _, b'-'] if prefix.len() > 1 => {
                format!("{}a", String::from_utf8_lossy(head))
            }
            _ => prefix.to_owned(),
        };
        errors.extend(problems_error(
            "metadata.generateName",
            prefix,
            object_name_problems(group, kind, &masked),
        ));
    }
    match name {
        Some(name) if !name.is_empty() => {
            errors.extend(problems_error(
                "metadata.name",
                name,
                object_name_problems(group, kind, name),
            ));
        }
        _ if prefix.is_none() && completeness == Completeness::Whole => errors.push(
            FieldError::required("metadata.name", "name or generateName is required"),
        ),
        _ => {}
    }
    errors
}

/// The problems of `metadata.namespace`: forbidden on a type that is not `namespaced`, a DNS
/// label on one that is.
fn namespace_errors(object: &Value, namespaced: bool) -> Vec<FieldError> {
    match text(object, "/metadata/namespace") {
        Some(namespace) if !namespace.is_empty() => {
            if !namespaced {
                vec![FieldError::forbidden(
                    "metadata.namespace",
                    "not allowed on this type",
                )]
            } else {
                problems_error(
                    "metadata.namespace",
                    namespace,
                    dns1123_label_problems(namespace),
                )
            }
        }
        _ => Vec::new(),
    }
}

/// The problems of the labels or annotations `value` at `field`: those `check` finds in a map
/// of strings, or `Invalid` when it is another value than null.
fn string_map_errors(
    field: &str,
    value: Option<&Value>,
    check: fn(&str, &BTreeMap<String, String>) -> Vec<FieldError>,
) -> Vec<FieldError> {
    let Some(map) = value else {
        return Vec::new();
    };
    if map
        .as_object()
        .is_some_and(|m| m.values().all(Value::is_string))
    {
        check(field, &string_map(Some(map)))
    } else if !map.is_null() {
        vec![FieldError::invalid_json(
            field,
            map,
            "must be a map of strings",
        )]
    } else {
        Vec::new()
    }
}

/// The problems of `metadata.finalizers`, each a qualified name.
fn finalizers_errors(object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for finalizer in items(object, "/metadata/finalizers") {
        // `ValidateFinalizers` reports at `metadata.finalizers`, without the index.
        let finalizer = finalizer.as_str().unwrap_or("");
        errors.extend(problems_error(
            "metadata.finalizers",
            finalizer,
            qualified_name_problems(finalizer),
        ));
    }
    errors
}

/// The problems of `metadata.ownerReferences`: each with a version, a kind, a name and a uid.
fn owner_references_errors(object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    // `validateOwnerReference` reports at `metadata.ownerReferences`, without the index. (Not
    // modelled: the banned owner `v1 Event` and the one-controller rule, whose messages print
    // Go structs.)
    for owner in items(object, "/metadata/ownerReferences") {
        let field = "metadata.ownerReferences";
        let api_version = text(owner, "/apiVersion").unwrap_or("");
        // `schema.FromAPIVersionAndKind`: `group/version` or `version`; anything else parses
        // to no version.
        let version = match api_version.split('/').collect::<Vec<_>>().as_slice() {
            [version] | [_, version] => *version,
            _ => "",
        };
        if version.is_empty() {
            errors.push(FieldError::invalid(
                &format!("{field}.apiVersion"),
                api_version,
                "version must not be empty",
            ));
        }
        for key in ["kind", "name", "uid"] {
            let value = text(owner, &format!("/{key}")).unwrap_or("");
            if value.is_empty() {
                errors.push(FieldError::invalid(
                    &format!("{field}.{key}"),
                    value,
                    format!("{key} must not be empty"),
                ));
            }
        }
    }
    errors
}

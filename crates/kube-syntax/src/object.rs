//! Whole objects checked as the API server checks them: metadata for every kind, the spec of
//! the built-in kinds clusterset writes (Service, EndpointSlice, Lease, Event, ConfigMap,
//! Secret, Deployment), and custom objects against their CRD's schema.
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

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr};

use serde_json::Value;

use crate::crd::{schema_errors, version_schema};
use crate::error::FieldError;
use crate::labels::{annotations_errors, labels_errors};
use crate::names::{
    dns1123_label_problems, dns1123_subdomain_problems, iana_service_name_problems,
    object_name_problems, qualified_name_problems,
};

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
    ("events.k8s.io", "v1", "Event", "events", true),
    (
        "apiextensions.k8s.io",
        "v1",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        false,
    ),
];

/// `("apps", "v1")` from `"apps/v1"`, `("", "v1")` from `"v1"`.
pub fn split_api_version(api_version: &str) -> (&str, &str) {
    api_version.split_once('/').unwrap_or(("", api_version))
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
    let mut errors = Vec::new();
    let name = text(object, "/metadata/name");
    let generate_name = text(object, "/metadata/generateName");
    match (name, generate_name) {
        (Some(name), _) if !name.is_empty() => {
            errors.extend(problems_error(
                "metadata.name",
                name,
                object_name_problems(group, kind, name),
            ));
        }
        (_, Some(prefix)) if !prefix.is_empty() => {
            let masked = prefix
                .strip_suffix('-')
                .map_or(prefix.to_owned(), |p| format!("{p}a"));
            errors.extend(problems_error(
                "metadata.generateName",
                prefix,
                object_name_problems(group, kind, &masked),
            ));
        }
        _ if completeness == Completeness::Whole => errors.push(FieldError::required(
            "metadata.name",
            "name or generateName is required",
        )),
        _ => {}
    }
    match text(object, "/metadata/namespace") {
        Some(namespace) if !namespace.is_empty() => {
            if !namespaced {
                errors.push(FieldError::forbidden(
                    "metadata.namespace",
                    "not allowed on this type",
                ));
            } else {
                errors.extend(problems_error(
                    "metadata.namespace",
                    namespace,
                    dns1123_label_problems(namespace),
                ));
            }
        }
        _ => {}
    }
    if let Some(labels) = object.pointer("/metadata/labels") {
        if labels
            .as_object()
            .is_some_and(|m| m.values().all(Value::is_string))
        {
            errors.extend(labels_errors("metadata.labels", &string_map(Some(labels))));
        } else if !labels.is_null() {
            errors.push(FieldError::invalid_json(
                "metadata.labels",
                labels,
                "must be a map of strings",
            ));
        }
    }
    if let Some(annotations) = object.pointer("/metadata/annotations") {
        if annotations
            .as_object()
            .is_some_and(|m| m.values().all(Value::is_string))
        {
            errors.extend(annotations_errors(
                "metadata.annotations",
                &string_map(Some(annotations)),
            ));
        } else if !annotations.is_null() {
            errors.push(FieldError::invalid_json(
                "metadata.annotations",
                annotations,
                "must be a map of strings",
            ));
        }
    }
    for finalizer in items(object, "/metadata/finalizers") {
        // `ValidateFinalizers` reports at `metadata.finalizers`, without the index.
        let finalizer = finalizer.as_str().unwrap_or("");
        errors.extend(problems_error(
            "metadata.finalizers",
            finalizer,
            qualified_name_problems(finalizer),
        ));
    }
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

/// Sorted, as `sets.List(supportedPortProtocols)` lists them in messages.
const PROTOCOLS: [&str; 3] = ["SCTP", "TCP", "UDP"];

fn port_number_error(field: &str, value: &Value, allow_zero: bool) -> Option<FieldError> {
    let low = if allow_zero { 0 } else { 1 };
    match value.as_i64() {
        Some(port) if (low..=65535).contains(&port) => None,
        _ => Some(FieldError::invalid_json(
            field,
            value,
            format!("must be between {low} and 65535, inclusive"),
        )),
    }
}

fn protocol_error(field: &str, port: &Value) -> Option<FieldError> {
    match text(port, "/protocol") {
        Some(protocol) if !PROTOCOLS.contains(&protocol) => {
            Some(FieldError::not_supported(field, protocol, &PROTOCOLS))
        }
        _ => None,
    }
}

fn service_errors(service: &Value, whole: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ports = items(service, "/spec/ports");
    let kind = text(service, "/spec/type").unwrap_or("ClusterIP");
    // Sorted, as `supportedServiceType.List()` lists them.
    const TYPES: [&str; 4] = ["ClusterIP", "ExternalName", "LoadBalancer", "NodePort"];
    if !TYPES.contains(&kind) {
        errors.push(FieldError::not_supported("spec.type", kind, &TYPES));
    }
    let headless = text(service, "/spec/clusterIP") == Some("None");
    if whole && ports.is_empty() && kind != "ExternalName" && !headless {
        errors.push(FieldError::required("spec.ports", ""));
    }
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let field = format!("spec.ports[{i}]");
        match text(port, "/name") {
            Some(name) if !name.is_empty() => {
                errors.extend(problems_error(
                    &format!("{field}.name"),
                    name,
                    dns1123_label_problems(name),
                ));
                if !names.insert(name.to_owned()) {
                    errors.push(FieldError::duplicate(&format!("{field}.name"), name));
                }
            }
            _ if ports.len() > 1 => errors.push(FieldError::required(&format!("{field}.name"), "")),
            _ => {}
        }
        match port.get("port") {
            Some(number) => {
                errors.extend(port_number_error(&format!("{field}.port"), number, false))
            }
            None => errors.push(FieldError::required(&format!("{field}.port"), "")),
        }
        errors.extend(protocol_error(&format!("{field}.protocol"), port));
        match port.get("targetPort") {
            Some(Value::String(name)) => errors.extend(problems_error(
                &format!("{field}.targetPort"),
                name,
                iana_service_name_problems(name),
            )),
            Some(number @ Value::Number(_)) => {
                errors.extend(port_number_error(
                    &format!("{field}.targetPort"),
                    number,
                    false,
                ));
            }
            _ => {}
        }
    }
    if let Some(selector) = service.pointer("/spec/selector") {
        errors.extend(labels_errors("spec.selector", &string_map(Some(selector))));
    }
    match text(service, "/spec/clusterIP") {
        None | Some("") | Some("None") => {}
        Some(ip) if ip.parse::<IpAddr>().is_ok() => {}
        Some(ip) => errors.push(FieldError::invalid(
            "spec.clusterIP",
            ip,
            "must be empty, 'None', or a valid IP address",
        )),
    }
    for (i, family) in items(service, "/spec/ipFamilies").iter().enumerate() {
        let family = family.as_str().unwrap_or("");
        if !["IPv4", "IPv6"].contains(&family) {
            errors.push(FieldError::not_supported(
                &format!("spec.ipFamilies[{i}]"),
                family,
                &["IPv4", "IPv6"],
            ));
        }
    }
    if let Some(affinity) = text(service, "/spec/sessionAffinity")
        && !["None", "ClientIP"].contains(&affinity)
    {
        errors.push(FieldError::not_supported(
            "spec.sessionAffinity",
            affinity,
            &["ClientIP", "None"],
        ));
    }
    errors
}

/// Sorted, as `supportedAddressTypes.List()` lists them.
const ADDRESS_TYPES: [&str; 3] = ["FQDN", "IPv4", "IPv6"];

/// `ValidateEndpointSlice` of Kubernetes 1.28 (`pkg/apis/discovery/validation`), without the
/// defaulting a real server does first (a port's protocol defaults to TCP, its name to "").
fn endpoint_slice_errors(slice: &Value, whole: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let address_type = text(slice, "/addressType");
    match address_type {
        None if whole => errors.push(FieldError::required("addressType", "")),
        None => {}
        Some(kind) if !ADDRESS_TYPES.contains(&kind) => {
            errors.push(FieldError::not_supported(
                "addressType",
                kind,
                &ADDRESS_TYPES,
            ));
        }
        Some(_) => {}
    }
    errors.extend(endpoints_errors(slice, address_type));
    errors.extend(endpoint_ports_errors(slice));
    errors
}

/// `validateEndpoints`: more than 1000 endpoints is the only error then.
fn endpoints_errors(slice: &Value, address_type: Option<&str>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let endpoints = items(slice, "/endpoints");
    if endpoints.len() > 1000 {
        errors.push(FieldError::too_many("endpoints", endpoints.len(), 1000));
        return errors;
    }
    for (i, endpoint) in endpoints.iter().enumerate() {
        let field = format!("endpoints[{i}]");
        let addresses = items(endpoint, "/addresses");
        if addresses.is_empty() {
            errors.push(FieldError::required(
                &format!("{field}.addresses"),
                "must contain at least 1 address",
            ));
        } else if addresses.len() > 100 {
            errors.push(FieldError::too_many(
                &format!("{field}.addresses"),
                addresses.len(),
                100,
            ));
        }
        for (j, address) in addresses.iter().enumerate() {
            let address = address.as_str().unwrap_or("");
            let path = format!("{field}.addresses[{j}]");
            match address_type {
                Some("IPv4") => {
                    if parse_ip_sloppy(address).and_then(to4).is_none() {
                        errors.push(FieldError::invalid(
                            &path,
                            address,
                            "must be a valid IPv4 address",
                        ));
                    }
                    errors.extend(problems_error(
                        &path,
                        address,
                        non_special_ip_problems(address),
                    ));
                }
                Some("IPv6") => {
                    if parse_ip_sloppy(address).is_none_or(|ip| to4(ip).is_some()) {
                        errors.push(FieldError::invalid(
                            &path,
                            address,
                            "must be a valid IPv6 address",
                        ));
                    }
                    errors.extend(problems_error(
                        &path,
                        address,
                        non_special_ip_problems(address),
                    ));
                }
                Some("FQDN") => errors.extend(fqdn_errors(&path, address)),
                _ => {}
            }
        }
        if let Some(node) = text(endpoint, "/nodeName") {
            errors.extend(problems_error(
                &format!("{field}.nodeName"),
                node,
                dns1123_subdomain_problems(node),
            ));
        }
        if let Some(hostname) = text(endpoint, "/hostname") {
            errors.extend(problems_error(
                &format!("{field}.hostname"),
                hostname,
                dns1123_label_problems(hostname),
            ));
        }
    }
    errors
}

/// `validatePorts`: more than 20000 ports is the only error then; port numbers are not
/// checked.
fn endpoint_ports_errors(slice: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let ports = items(slice, "/ports");
    if ports.len() > 20000 {
        errors.push(FieldError::too_many("ports", ports.len(), 20000));
        return errors;
    }
    let mut names = BTreeSet::new();
    for (i, port) in ports.iter().enumerate() {
        let field = format!("ports[{i}]");
        let name = text(port, "/name").unwrap_or("");
        if !name.is_empty() {
            errors.extend(problems_error(
                &format!("{field}.name"),
                name,
                dns1123_label_problems(name),
            ));
        }
        if !names.insert(name.to_owned()) {
            errors.push(FieldError::duplicate(&format!("{field}.name"), name));
        }
        errors.extend(protocol_error(&format!("{field}.protocol"), port));
        if let Some(app) = text(port, "/appProtocol") {
            errors.extend(problems_error(
                &format!("{field}.appProtocol"),
                app,
                qualified_name_problems(app),
            ));
        }
    }
    errors
}

/// `validation.IsFullyQualifiedDomainName`: a subdomain (a trailing dot aside) of at least two
/// labels; the first problem only.
fn fqdn_errors(field: &str, address: &str) -> Vec<FieldError> {
    if address.is_empty() {
        return vec![FieldError::required(field, "")];
    }
    let name = address.strip_suffix('.').unwrap_or(address);
    let problems = dns1123_subdomain_problems(name);
    if !problems.is_empty() {
        return vec![FieldError::invalid(field, name, problems.join(","))];
    }
    if name.split('.').count() < 2 {
        return vec![FieldError::invalid(
            field,
            name,
            "should be a domain with at least two segments separated by dots",
        )];
    }
    name.split('.')
        .find_map(|label| {
            let problems = dns1123_label_problems(label);
            (!problems.is_empty()).then(|| FieldError::invalid(field, label, problems.join(",")))
        })
        .into_iter()
        .collect()
}

/// `netutils.ParseIPSloppy`: an IP address, IPv4 octets with leading zeros read as decimal.
pub fn parse_ip_sloppy(text: &str) -> Option<IpAddr> {
    if let Ok(ip) = text.parse::<IpAddr>() {
        return Some(ip);
    }
    let octets: Vec<u8> = text
        .split('.')
        .map(|part| {
            (!part.is_empty() && part.bytes().all(|b| b.is_ascii_digit()))
                .then(|| part.parse::<u8>().ok())
                .flatten()
        })
        .collect::<Option<_>>()?;
    <[u8; 4]>::try_from(octets)
        .ok()
        .map(|o| IpAddr::V4(Ipv4Addr::from(o)))
}

/// Go's `ip.To4()`: the IPv4 address of an IPv4 or IPv4-mapped IPv6 address.
fn to4(ip: IpAddr) -> Option<Ipv4Addr> {
    match ip {
        IpAddr::V4(v4) => Some(v4),
        IpAddr::V6(v6) => v6.to_ipv4_mapped(),
    }
}

/// `ValidateNonSpecialIP` of Kubernetes 1.28 (`pkg/apis/core/validation`), which checks the
/// addresses of EndpointSlices and Endpoints: unspecified, loopback, link-local or link-local
/// multicast addresses never reach a pod. Go's `net.IP` methods read an IPv4-mapped IPv6
/// address as IPv4.
pub fn non_special_ip_problems(address: &str) -> Vec<String> {
    let Some(ip) = parse_ip_sloppy(address) else {
        return vec!["must be a valid IP address".to_owned()];
    };
    let (unspecified, loopback, link_local, link_local_multicast) = match to4(ip) {
        Some(v4) => (
            v4.is_unspecified(),
            v4.octets()[0] == 127,
            v4.octets()[..2] == [169, 254],
            v4.octets()[..3] == [224, 0, 0],
        ),
        None => match ip {
            IpAddr::V6(v6) => (
                v6.is_unspecified(),
                v6.is_loopback(),
                v6.segments()[0] & 0xffc0 == 0xfe80,
                v6.segments()[0] & 0xff0f == 0xff02,
            ),
            IpAddr::V4(_) => (false, false, false, false),
        },
    };
    let mut problems = Vec::new();
    if unspecified {
        problems.push(format!("may not be unspecified ({address})"));
    }
    if loopback {
        problems.push("may not be in the loopback range (127.0.0.0/8, ::1/128)".to_owned());
    }
    if link_local {
        problems.push("may not be in the link-local range (169.254.0.0/16, fe80::/10)".to_owned());
    }
    if link_local_multicast {
        problems.push(
            "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)".to_owned(),
        );
    }
    problems
}

fn lease_errors(lease: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if let Some(duration) = lease.pointer("/spec/leaseDurationSeconds")
        && duration.as_i64().is_none_or(|d| d <= 0)
    {
        errors.push(FieldError::invalid_json(
            "spec.leaseDurationSeconds",
            duration,
            "must be greater than 0",
        ));
    }
    if let Some(transitions) = lease.pointer("/spec/leaseTransitions")
        && transitions.as_i64().is_none_or(|t| t < 0)
    {
        errors.push(FieldError::invalid_json(
            "spec.leaseTransitions",
            transitions,
            "must be greater than or equal to 0",
        ));
    }
    errors
}

/// Where an Event's fields are in each API version: `events.k8s.io/v1` calls the core Event's
/// `involvedObject` `regarding`, its `message` `note`, and its `reportingComponent`
/// `reportingController` (`pkg/apis/events/v1/conversion.go`). Errors name the core fields,
/// as `ValidateEventCreate` checks the core Event either version is converted to.
struct EventShape {
    involved: &'static str,
    message: &'static str,
    controller: &'static str,
    /// The name `reportingController` errors carry (`reportingComponent` when created through
    /// the core API).
    controller_field: &'static str,
}

const EVENTS_V1: EventShape = EventShape {
    involved: "regarding",
    message: "note",
    controller: "reportingController",
    controller_field: "reportingController",
};

const CORE_V1: EventShape = EventShape {
    involved: "involvedObject",
    message: "message",
    controller: "reportingComponent",
    controller_field: "reportingComponent",
};

/// `legacyValidateEvent` (`pkg/apis/core/validation/events.go`), which every Event passes
/// whichever API version creates it. An Event without `eventTime` is an old one: the involved
/// object's namespace must be the Event's (or empty, for Events in `default` or no namespace).
/// With `eventTime` set, an involved object in another namespace is accepted, an empty
/// namespace only in `default` and `kube-system`, and the reporting fields are required.
/// A patch (`whole` false) is checked on what it sends.
fn legacy_event_errors(event: &Value, shape: &EventShape, whole: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let namespace = text(event, "/metadata/namespace").unwrap_or("");
    let involved_pointer = format!("/{}/namespace", shape.involved);
    let involved = text(event, &involved_pointer).unwrap_or("");
    let event_time_set = text(event, "/eventTime").is_some_and(|t| !t.is_empty());
    let mismatch = |value: &str| {
        FieldError::invalid(
            "involvedObject.namespace",
            value,
            "does not match event.namespace",
        )
    };
    let namespace_checked = whole || event.pointer(&involved_pointer).is_some();
    let present = |key: &str| whole || event.get(key).is_some();
    let length = |key: &str| text(event, &format!("/{key}")).map_or(0, str::len);
    if !event_time_set {
        if namespace_checked {
            if involved.is_empty() {
                if !namespace.is_empty() && namespace != "default" {
                    errors.push(mismatch(involved));
                }
            } else if namespace != involved {
                errors.push(mismatch(involved));
            }
        }
    } else {
        if namespace_checked
            && involved.is_empty()
            && namespace != "default"
            && namespace != "kube-system"
        {
            errors.push(mismatch(involved));
        }
        let controller = text(event, &format!("/{}", shape.controller)).unwrap_or("");
        if present(shape.controller) {
            if controller.is_empty() {
                errors.push(FieldError::required(shape.controller_field, ""));
            }
            errors.extend(problems_error(
                shape.controller_field,
                controller,
                qualified_name_problems(controller),
            ));
        }
        for (key, field, limit) in [
            ("reportingInstance", "reportingInstance", 128),
            ("action", "action", 128),
            ("reason", "reason", 128),
        ] {
            if !present(key) {
                continue;
            }
            if length(key) == 0 {
                errors.push(FieldError::required(field, ""));
            }
            if length(key) > limit {
                errors.push(FieldError::invalid(
                    field,
                    "",
                    format!("can have at most {limit} characters"),
                ));
            }
        }
        if length(shape.message) > 1024 {
            errors.push(FieldError::invalid(
                "message",
                "",
                "can have at most 1024 characters",
            ));
        }
    }
    if whole || event.pointer("/metadata/namespace").is_some() {
        errors.extend(problems_error(
            "namespace",
            namespace,
            dns1123_subdomain_problems(namespace),
        ));
    }
    errors
}

/// `ValidateEventCreate` for an Event created through `events.k8s.io/v1`: the legacy rules,
/// then the strict ones (a series of at least 2 with its last time, `eventTime` required, type
/// `Normal` or `Warning`, the deprecated fields unset). The object's metadata is checked by the
/// caller. Updates are checked as creates (the immutable fields are not compared).
fn event_errors(event: &Value, whole: bool) -> Vec<FieldError> {
    let mut errors = legacy_event_errors(event, &EVENTS_V1, whole);
    if let Some(series) = event.get("series").filter(|s| !s.is_null()) {
        if series.get("count").and_then(Value::as_i64).unwrap_or(0) < 2 {
            errors.push(FieldError::invalid(
                "series.count",
                "",
                "should be at least 2",
            ));
        }
        if text(series, "/lastObservedTime").is_none_or(str::is_empty) {
            errors.push(FieldError::required("series.lastObservedTime", ""));
        }
    }
    if whole && text(event, "/eventTime").is_none_or(str::is_empty) {
        errors.push(FieldError::required("eventTime", ""));
    }
    if whole || event.get("type").is_some() {
        let kind = text(event, "/type").unwrap_or("");
        if kind != "Normal" && kind != "Warning" {
            errors.push(FieldError::invalid(
                "type",
                "",
                format!("has invalid value: {kind}"),
            ));
        }
    }
    let set = |key: &str| text(event, &format!("/{key}")).is_some_and(|t| !t.is_empty());
    if set("deprecatedFirstTimestamp") {
        errors.push(FieldError::invalid(
            "firstTimestamp",
            "",
            "needs to be unset",
        ));
    }
    if set("deprecatedLastTimestamp") {
        errors.push(FieldError::invalid(
            "lastTimestamp",
            "",
            "needs to be unset",
        ));
    }
    if event
        .get("deprecatedCount")
        .and_then(Value::as_i64)
        .is_some_and(|c| c != 0)
    {
        errors.push(FieldError::invalid("count", "", "needs to be unset"));
    }
    if set("deprecatedSource/component") || set("deprecatedSource/host") {
        errors.push(FieldError::invalid("source", "", "needs to be unset"));
    }
    errors
}

/// `ValidateEventCreate` for an Event created through the core API: the legacy rules only.
fn core_event_errors(event: &Value, whole: bool) -> Vec<FieldError> {
    legacy_event_errors(event, &CORE_V1, whole)
}

/// `IsConfigMapKey`: at most 253 of `[-._a-zA-Z0-9]`, and not `.`, `..` or `..*`.
fn config_key_problems(key: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if key.len() > 253 {
        problems.push(crate::names::max_len_msg(253));
    }
    if key.is_empty()
        || !key
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
    {
        problems.push("a valid config key must consist of alphanumeric characters, '-', '_' or '.' (e.g. 'key.name',  or 'KEY_NAME',  or 'key-name', regex used for validation is '[-._a-zA-Z0-9]+')".to_owned());
    }
    if key == "." {
        problems.push("must not be '.'".to_owned());
    } else if key == ".." {
        problems.push("must not be '..'".to_owned());
    } else if key.starts_with("..") {
        problems.push("must not start with '..'".to_owned());
    }
    problems
}

fn data_key_errors(object: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for section in ["data", "binaryData", "stringData"] {
        for key in object
            .get(section)
            .and_then(Value::as_object)
            .into_iter()
            .flat_map(|m| m.keys())
        {
            errors.extend(problems_error(
                &format!("{section}[{key}]"),
                key,
                config_key_problems(key),
            ));
        }
    }
    errors
}

fn deployment_errors(deployment: &Value, whole: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let selector = string_map(deployment.pointer("/spec/selector/matchLabels"));
    errors.extend(labels_errors("spec.selector.matchLabels", &selector));
    let template = string_map(deployment.pointer("/spec/template/metadata/labels"));
    errors.extend(labels_errors("spec.template.metadata.labels", &template));
    if whole {
        let expressions = items(deployment, "/spec/selector/matchExpressions");
        if deployment.pointer("/spec/selector").is_none() {
            errors.push(FieldError::required("spec.selector", ""));
        } else if selector.is_empty() && expressions.is_empty() {
            errors.push(FieldError::invalid_json(
                "spec.selector",
                deployment.pointer("/spec/selector").unwrap_or(&Value::Null),
                "empty selector is invalid for deployment",
            ));
        } else if !selector.iter().all(|(k, v)| template.get(k) == Some(v)) {
            errors.push(FieldError::invalid_json(
                "spec.template.metadata.labels",
                &serde_json::json!(template),
                "`selector` does not match template `labels`",
            ));
        }
    }
    if whole && items(deployment, "/spec/template/spec/containers").is_empty() {
        errors.push(FieldError::required("spec.template.spec.containers", ""));
    }
    for (i, container) in items(deployment, "/spec/template/spec/containers")
        .iter()
        .enumerate()
    {
        let field = format!("spec.template.spec.containers[{i}]");
        match text(container, "/name") {
            Some(name) => errors.extend(problems_error(
                &format!("{field}.name"),
                name,
                dns1123_label_problems(name),
            )),
            None if whole => errors.push(FieldError::required(&format!("{field}.name"), "")),
            None => {}
        }
    }
    errors
}

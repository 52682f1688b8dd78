//! CustomResourceDefinitions as the API server validates them, and custom objects checked
//! against a CRD's `openAPIV3Schema`.
//!
//! - [`crd_errors`]: `metadata.name` is `<plural>.<group>`, the group a DNS subdomain with a dot,
//!   names DNS-1035 labels, one storage version, structural schemas, and for protected groups
//!   (`*.k8s.io`, `*.kubernetes.io`, KEP-2337) the [`APPROVAL_ANNOTATION`];
//! - [`schema_errors`]: an object against one version's schema (types, required, enum, lengths,
//!   items, bounds, patterns, formats, list types) and fields the schema does not declare.
//!
//! ```
//! use kube_syntax::crd::{approval_required, is_protected_group};
//! assert!(is_protected_group("about.k8s.io"));
//! assert!(!is_protected_group("multicluster.x-k8s.io"));
//! assert!(approval_required("about.k8s.io"));
//! ```

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::error::FieldError;
use crate::names::{dns1035_label_problems, dns1123_subdomain_problems};

/// The annotation a CRD of a protected group must carry: a URL of the approving API review
/// (or a value starting with `unapproved`, which the server accepts but reports as not
/// conformant).
pub const APPROVAL_ANNOTATION: &str = "api-approved.kubernetes.io";

/// Whether `group` is protected (KEP-2337): `k8s.io`, `kubernetes.io` or a subdomain of either.
pub fn is_protected_group(group: &str) -> bool {
    group == "k8s.io"
        || group == "kubernetes.io"
        || group.ends_with(".k8s.io")
        || group.ends_with(".kubernetes.io")
}

/// Whether a CRD of `group` needs the [`APPROVAL_ANNOTATION`] (the same as
/// [`is_protected_group`], named for the question callers ask).
pub fn approval_required(group: &str) -> bool {
    is_protected_group(group)
}

/// What `url.ParseRequestURI` accepts with a scheme and a host (`https://github.com/...`).
fn is_url(value: &str) -> bool {
    let Some((scheme, rest)) = value.split_once("://") else {
        return false;
    };
    let host = rest.split(['/', '?', '#']).next().unwrap_or("");
    scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
        && !host.is_empty()
        && !host.contains(|c: char| c.is_whitespace() || c.is_control())
        && !rest.contains(char::is_control)
}

/// The problems of a CRD's approval annotation for `group` (`validateAPIApproval` on create):
/// none for groups that are not protected, whatever the annotation says; for protected groups,
/// `Required` when missing or empty, `Invalid` unless a URL or a value starting with
/// `unapproved`.
pub fn approval_errors(group: &str, annotations: &BTreeMap<String, String>) -> Vec<FieldError> {
    if !is_protected_group(group) {
        return Vec::new();
    }
    let field = format!("metadata.annotations[{APPROVAL_ANNOTATION}]");
    match annotations.get(APPROVAL_ANNOTATION).map(String::as_str) {
        None | Some("") => vec![FieldError::required(
            &field,
            format!(
                "protected groups must have approval annotation {APPROVAL_ANNOTATION:?}, see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )],
        Some(value) if value.starts_with("unapproved") || is_url(value) => Vec::new(),
        Some(value) => vec![FieldError::invalid(
            &field,
            value,
            format!(
                "protected groups must have approval annotation {APPROVAL_ANNOTATION:?} with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
            ),
        )],
    }
}

fn string_map(value: Option<&Value>) -> BTreeMap<String, String> {
    value
        .and_then(Value::as_object)
        .map(|map| {
            map.iter()
                .filter_map(|(k, v)| v.as_str().map(|v| (k.clone(), v.to_owned())))
                .collect()
        })
        .unwrap_or_default()
}

fn text<'a>(value: &'a Value, pointer: &str) -> &'a str {
    value.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// Every problem the API server finds in a `CustomResourceDefinition` (as JSON).
pub fn crd_errors(crd: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let group = text(crd, "/spec/group");
    let plural = text(crd, "/spec/names/plural");
    let name = text(crd, "/metadata/name");
    if name != format!("{plural}.{group}") {
        errors.push(FieldError::invalid(
            "metadata.name",
            name,
            "must be spec.names.plural+\".\"+spec.group",
        ));
    }
    group_errors(group, &mut errors);
    errors.extend(approval_errors(
        group,
        &string_map(crd.pointer("/metadata/annotations")),
    ));
    names_errors(crd, plural, &mut errors);
    match text(crd, "/spec/scope") {
        "Cluster" | "Namespaced" => {}
        scope => errors.push(FieldError::not_supported(
            "spec.scope",
            scope,
            &["Cluster", "Namespaced"],
        )),
    }
    versions_errors(crd, &mut errors);
    errors
}

/// The problems of `spec.group`: required, a DNS subdomain, and with at least one dot.
fn group_errors(group: &str, errors: &mut Vec<FieldError>) {
    if group.is_empty() {
        errors.push(FieldError::required("spec.group", ""));
    } else {
        let problems = dns1123_subdomain_problems(group);
        if !problems.is_empty() {
            errors.push(FieldError::invalid("spec.group", group, problems.join(",")));
        } else if !group.contains('.') {
            errors.push(FieldError::invalid(
                "spec.group",
                group,
                "should be a domain with at least one dot",
            ));
        }
    }
}

/// `Invalid` at `field` when `value` is not a DNS-1035 label, its problems joined with ",".
fn dns1035_errors(field: &str, value: &str, errors: &mut Vec<FieldError>) {
    let problems = dns1035_label_problems(value);
    if !problems.is_empty() {
        errors.push(FieldError::invalid(field, value, problems.join(",")));
    }
}

/// The problems of `spec.names` (`ValidateCustomResourceDefinitionNames`): the plural, the
/// singular, the kind and list kind, then the short names and categories.
fn names_errors(crd: &Value, plural: &str, errors: &mut Vec<FieldError>) {
    if plural.is_empty() {
        errors.push(FieldError::required("spec.names.plural", ""));
    } else {
        dns1035_errors("spec.names.plural", plural, errors);
    }
    // Singular and listKind are defaulted from the kind when missing.
    let singular = text(crd, "/spec/names/singular");
    if !singular.is_empty() {
        dns1035_errors("spec.names.singular", singular, errors);
    }
    kind_errors(crd, errors);
    for key in ["shortNames", "categories"] {
        for (i, item) in crd
            .pointer(&format!("/spec/names/{key}"))
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            dns1035_errors(
                &format!("spec.names.{key}[{i}]"),
                item.as_str().unwrap_or(""),
                errors,
            );
        }
    }
}

/// The problems of `spec.names.kind` and `spec.names.listKind`: each a DNS-1035 label but for
/// its case, the kind required, and the two not the same.
fn kind_errors(crd: &Value, errors: &mut Vec<FieldError>) {
    for key in ["kind", "listKind"] {
        let value = text(crd, &format!("/spec/names/{key}"));
        if value.is_empty() {
            if key == "kind" {
                errors.push(FieldError::required("spec.names.kind", ""));
            }
        } else {
            let problems = dns1035_label_problems(&value.to_ascii_lowercase());
            if !problems.is_empty() {
                errors.push(FieldError::invalid(
                    &format!("spec.names.{key}"),
                    value,
                    format!(
                        "may have mixed case, but should otherwise match: {}",
                        problems.join(",")
                    ),
                ));
            }
        }
    }
    let kind = text(crd, "/spec/names/kind");
    if !kind.is_empty() && kind == text(crd, "/spec/names/listKind") {
        errors.push(FieldError::invalid(
            "spec.names.listKind",
            kind,
            "kind and listKind may not be the same",
        ));
    }
}

/// The problems of `spec.versions`: each version's name and schema, then unique names and
/// exactly one storage version.
fn versions_errors(crd: &Value, errors: &mut Vec<FieldError>) {
    let versions = crd
        .pointer("/spec/versions")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let mut seen = BTreeSet::new();
    let mut unique = true;
    let mut storage = 0;
    for (i, version) in versions.iter().enumerate() {
        let field = format!("spec.versions[{i}]");
        let name = text(version, "/name");
        let problems = dns1035_label_problems(name);
        if !problems.is_empty() {
            errors.push(FieldError::invalid(
                &format!("{field}.name"),
                name,
                problems.join(","),
            ));
        }
        unique &= seen.insert(name.to_owned());
        if version.get("storage").and_then(Value::as_bool) == Some(true) {
            storage += 1;
        }
        match version.pointer("/schema/openAPIV3Schema") {
            Some(schema) => errors.extend(structural_errors(
                &format!("{field}.schema.openAPIV3Schema"),
                schema,
            )),
            None => errors.push(FieldError::required(
                &format!("{field}.schema.openAPIV3Schema"),
                "schemas are required",
            )),
        }
    }
    // Both at `spec.versions`, the versions as the value, as upstream reports them.
    let all = Value::Array(versions.clone());
    if !unique {
        errors.push(FieldError::invalid_json(
            "spec.versions",
            &all,
            "must contain unique version names",
        ));
    }
    if storage != 1 {
        errors.push(FieldError::invalid_json(
            "spec.versions",
            &all,
            "must have exactly one version marked as storage version",
        ));
    }
}

/// Keys a CRD schema may not use anywhere.
const FORBIDDEN_KEYS: [&str; 7] = [
    "$ref",
    "$schema",
    "id",
    "definitions",
    "additionalItems",
    "patternProperties",
    "dependencies",
];

/// Keys that may not appear inside `allOf`, `anyOf`, `oneOf` or `not` (value validations only).
const NOT_IN_JUNCTORS: [&str; 8] = [
    "type",
    "description",
    "default",
    "additionalProperties",
    "nullable",
    "x-kubernetes-preserve-unknown-fields",
    "x-kubernetes-embedded-resource",
    "x-kubernetes-int-or-string",
];

/// Every way `schema` at `field` is not a structural schema (the rules of apiextensions'
/// `structuralschema` and `ValidateCustomResourceDefinitionOpenAPISchema`).
pub fn structural_errors(field: &str, schema: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if schema.get("type").and_then(Value::as_str) != Some("object") {
        errors.push(FieldError::invalid(
            &format!("{field}.type"),
            schema.get("type").and_then(Value::as_str).unwrap_or(""),
            "must be object at the root",
        ));
    }
    if let Some(metadata) = schema.pointer("/properties/metadata") {
        let allowed: BTreeSet<&str> = ["type", "properties", "description"].into();
        let extra = metadata
            .as_object()
            .into_iter()
            .flat_map(|m| m.keys())
            .any(|k| !allowed.contains(k.as_str()));
        let props_ok = metadata
            .get("properties")
            .and_then(Value::as_object)
            .is_none_or(|p| p.keys().all(|k| k == "name" || k == "generateName"));
        if extra || !props_ok {
            errors.push(FieldError::forbidden(
                &format!("{field}.properties[metadata]"),
                "must not specify anything other than name and generateName, but metadata is implicitly specified",
            ));
        }
        if metadata
            .get("type")
            .and_then(Value::as_str)
            .is_some_and(|t| t != "object")
        {
            errors.push(FieldError::invalid(
                &format!("{field}.properties[metadata].type"),
                metadata.get("type").and_then(Value::as_str).unwrap_or(""),
                "must be object",
            ));
        }
    }
    walk_structural(field, schema, false, &mut errors);
    errors
}

/// Every way `schema` at `field` and the schemas nested in it are not structural, `in_junctor`
/// when `schema` is inside `allOf`, `anyOf`, `oneOf` or `not`.
fn walk_structural(field: &str, schema: &Value, in_junctor: bool, errors: &mut Vec<FieldError>) {
    let Some(object) = schema.as_object() else {
        errors.push(FieldError::invalid_json(
            field,
            schema,
            "must be a schema object",
        ));
        return;
    };
    forbidden_key_errors(field, object, errors);
    if in_junctor {
        junctor_key_errors(field, object, errors);
    } else {
        type_errors(field, object, errors);
    }
    walk_nested(field, object, in_junctor, errors);
    walk_junctors(field, object, errors);
}

/// `Forbidden` for each of the [`FORBIDDEN_KEYS`] in `object`, then for `uniqueItems: true`.
fn forbidden_key_errors(
    field: &str,
    object: &serde_json::Map<String, Value>,
    errors: &mut Vec<FieldError>,
) {
    for key in FORBIDDEN_KEYS {
        if object.contains_key(key) {
            errors.push(FieldError::forbidden(
                &format!("{field}.{key}"),
                format!("{key} is not supported"),
            ));
        }
    }
    if object.get("uniqueItems").and_then(Value::as_bool) == Some(true) {
        errors.push(FieldError::forbidden(
            &format!("{field}.uniqueItems"),
            "uniqueItems cannot be set to true since the runtime complexity becomes quadratic",
        ));
    }
}

/// `Forbidden` for each of the [`NOT_IN_JUNCTORS`] in `object`, a schema inside a junctor.
fn junctor_key_errors(
    field: &str,
    object: &serde_json::Map<String, Value>,
    errors: &mut Vec<FieldError>,
) {
    for key in NOT_IN_JUNCTORS {
        if object.contains_key(key) {
            errors.push(FieldError::forbidden(
                &format!("{field}.{key}"),
                "must not be specified inside allOf, anyOf, oneOf or not",
            ));
        }
    }
}

/// The problems of `object`'s type outside a junctor: a type given (unless int-or-string or
/// preserving unknown fields) and supported, properties without a closed
/// `additionalProperties`, no type beside int-or-string, an array's items and a map list's
/// keys.
fn type_errors(field: &str, object: &serde_json::Map<String, Value>, errors: &mut Vec<FieldError>) {
    let flag = |key: &str| object.get(key).and_then(Value::as_bool) == Some(true);
    let typed = object
        .get("type")
        .and_then(Value::as_str)
        .is_some_and(|t| !t.is_empty());
    if !typed
        && !flag("x-kubernetes-int-or-string")
        && !flag("x-kubernetes-preserve-unknown-fields")
    {
        errors.push(FieldError::required(
            &format!("{field}.type"),
            "must not be empty for specified object fields",
        ));
    }
    if let Some(kind) = object.get("type").and_then(Value::as_str)
        && !["object", "array", "string", "integer", "number", "boolean"].contains(&kind)
    {
        errors.push(FieldError::not_supported(
            &format!("{field}.type"),
            kind,
            &["array", "boolean", "integer", "number", "object", "string"],
        ));
    }
    // `additionalProperties: true` beside properties is allowed; false or a schema is not.
    if object
        .get("properties")
        .and_then(Value::as_object)
        .is_some_and(|p| !p.is_empty())
        && object
            .get("additionalProperties")
            .is_some_and(|a| a.is_object() || *a == Value::Bool(false))
    {
        errors.push(FieldError::forbidden(
            &format!("{field}.additionalProperties"),
            "additionalProperties and properties are mutual exclusive",
        ));
    }
    if flag("x-kubernetes-int-or-string") && typed {
        errors.push(FieldError::forbidden(
            &format!("{field}.type"),
            "must be empty if x-kubernetes-int-or-string is true",
        ));
    }
    if object.get("type").and_then(Value::as_str) == Some("array") && !object.contains_key("items")
    {
        errors.push(FieldError::required(
            &format!("{field}.items"),
            "must be specified",
        ));
    }
    if object.get("x-kubernetes-list-type").and_then(Value::as_str) == Some("map")
        && object
            .get("x-kubernetes-list-map-keys")
            .and_then(Value::as_array)
            .is_none_or(Vec::is_empty)
    {
        errors.push(FieldError::required(
            &format!("{field}.x-kubernetes-list-map-keys"),
            "must not be empty if x-kubernetes-list-type is map",
        ));
    }
}

/// Walks the schemas of `object`'s properties, its `additionalProperties` (when a schema) and
/// its `items`.
fn walk_nested(
    field: &str,
    object: &serde_json::Map<String, Value>,
    in_junctor: bool,
    errors: &mut Vec<FieldError>,
) {
    if let Some(properties) = object.get("properties").and_then(Value::as_object) {
        for (name, child) in properties {
            walk_structural(
                &format!("{field}.properties[{name}]"),
                child,
                in_junctor,
                errors,
            );
        }
    }
    if let Some(child) = object.get("additionalProperties")
        && child.is_object()
    {
        walk_structural(
            &format!("{field}.additionalProperties"),
            child,
            in_junctor,
            errors,
        );
    }
    if let Some(child) = object.get("items") {
        walk_structural(&format!("{field}.items"), child, in_junctor, errors);
    }
}

/// Walks the schemas of `object`'s `allOf`, `anyOf`, `oneOf` and `not`, each inside a junctor.
fn walk_junctors(
    field: &str,
    object: &serde_json::Map<String, Value>,
    errors: &mut Vec<FieldError>,
) {
    // The int-or-string patterns are allowed: `anyOf: [{type: integer}, {type: string}]`, or
    // the same as the `anyOf` of the first `allOf`.
    let int_or_string = object
        .get("x-kubernetes-int-or-string")
        .and_then(Value::as_bool)
        == Some(true);
    for junctor in ["allOf", "anyOf", "oneOf"] {
        for (i, child) in object
            .get(junctor)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .enumerate()
        {
            let path = format!("{field}.{junctor}[{i}]");
            if int_or_string && junctor == "anyOf" && is_int_or_string_any_of(object.get("anyOf")) {
                continue;
            }
            if int_or_string
                && junctor == "allOf"
                && i == 0
                && is_int_or_string_any_of(child.get("anyOf"))
            {
                let mut rest = child.clone();
                if let Some(map) = rest.as_object_mut() {
                    map.remove("anyOf");
                }
                walk_structural(&path, &rest, true, errors);
                continue;
            }
            walk_structural(&path, child, true, errors);
        }
    }
    if let Some(child) = object.get("not") {
        walk_structural(&format!("{field}.not"), child, true, errors);
    }
}

/// Whether `any_of` is exactly `[{"type": "integer"}, {"type": "string"}]`.
fn is_int_or_string_any_of(any_of: Option<&Value>) -> bool {
    any_of == Some(&serde_json::json!([{"type": "integer"}, {"type": "string"}]))
}

/// The `openAPIV3Schema` of `version` in a CRD (as JSON), if it has one.
pub fn version_schema<'a>(crd: &'a Value, version: &str) -> Option<&'a Value> {
    crd.pointer("/spec/versions")?
        .as_array()?
        .iter()
        .find(|v| v.get("name").and_then(Value::as_str) == Some(version))?
        .pointer("/schema/openAPIV3Schema")
}

fn type_name(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "boolean",
        Value::Number(n) if n.is_i64() || n.is_u64() => "integer",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

fn is_rfc3339(text: &str) -> bool {
    let bytes = text.as_bytes();
    let digits = |range: std::ops::Range<usize>| {
        bytes
            .get(range)
            .is_some_and(|s| s.iter().all(u8::is_ascii_digit))
    };
    if bytes.len() < 20
        || !digits(0..4)
        || bytes[4] != b'-'
        || !digits(5..7)
        || bytes[7] != b'-'
        || !digits(8..10)
        || !matches!(bytes[10], b'T' | b't')
        || !digits(11..13)
        || bytes[13] != b':'
        || !digits(14..16)
        || bytes[16] != b':'
        || !digits(17..19)
    {
        return false;
    }
    let mut rest = &text[19..];
    if let Some(fraction) = rest.strip_prefix('.') {
        let n = fraction.bytes().take_while(u8::is_ascii_digit).count();
        if n == 0 {
            return false;
        }
        rest = &fraction[n..];
    }
    matches!(rest, "Z" | "z")
        || (rest.len() == 6
            && matches!(rest.as_bytes()[0], b'+' | b'-')
            && rest.as_bytes()[3] == b':'
            && rest[1..3].bytes().all(|b| b.is_ascii_digit())
            && rest[4..6].bytes().all(|b| b.is_ascii_digit()))
}

/// Every problem of `value` at `field` against a CRD schema, with `metadata` at the root left to
/// [`crate::object`] and fields the schema does not declare reported as unknown (what the API
/// server refuses under strict field validation and silently drops otherwise).
///
/// The errors come in the order of the API server's validator (kube-openapi's, then the
/// list-type invariants): per value its type (and its enum even when the type is wrong), the
/// first of `maxLength`, `minLength` and `pattern`, its format, the range of its integer
/// format and its bounds, the items of a list before `minItems` and `maxItems`, the enum, an
/// object's fields before its `required` ones; the duplicates of `x-kubernetes-list-type` lists
/// after all of these. The fields of one object are taken in their name order (a real server
/// takes them in Go's map order, which differs from run to run).
pub fn schema_errors(field: &str, value: &Value, schema: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut duplicates = Vec::new();
    check_schema(field, value, schema, true, &mut errors, &mut duplicates);
    errors.extend(duplicates);
    errors
}

/// `field: Duplicate value: <value>`, the value printed as Go prints it: a string quoted, an
/// object or a number as JSON.
fn duplicate(field: &str, value: &Value) -> FieldError {
    let shown = match value {
        Value::String(text) => crate::error::go_quote(text),
        other => other.to_string(),
    };
    FieldError {
        field: field.to_owned(),
        kind: crate::error::ErrorKind::Duplicate(shown),
        detail: String::new(),
    }
}

fn join(field: &str, key: &str) -> String {
    if field.is_empty() {
        key.to_owned()
    } else {
        format!("{field}.{key}")
    }
}

/// `Unsupported value` when `value` is not one of the schema's `enum`.
fn enum_error(shown: &str, value: &Value, schema: &Value) -> Option<FieldError> {
    let options = schema.get("enum").and_then(Value::as_array)?;
    if options.contains(value) {
        return None;
    }
    // Strings are listed quoted (`"True"`), other values as JSON.
    let supported: Vec<String> = options
        .iter()
        .map(|o| match o {
            Value::String(text) => crate::error::go_quote(text),
            other => crate::error::go_quote(&other.to_string()),
        })
        .collect();
    let shown_value = match value {
        Value::String(text) => crate::error::go_quote(text),
        other => other.to_string(),
    };
    Some(FieldError {
        field: shown.to_owned(),
        kind: crate::error::ErrorKind::NotSupported(shown_value, supported),
        detail: String::new(),
    })
}

/// Whether `value` is a JSON number with no fraction (`2.0`), which kube-openapi takes as an
/// integer.
fn is_integral(value: &Value) -> bool {
    value.is_i64() || value.is_u64() || value.as_f64().is_some_and(|f| f.fract() == 0.0)
}

/// Whether `schema` sets `key` to `true`.
fn schema_flag(schema: &Value, key: &str) -> bool {
    schema.get(key).and_then(Value::as_bool) == Some(true)
}

/// Every problem of `value` at `field` against `schema` and the schemas below it (`root` when
/// `value` is the whole object), in the order of [`schema_errors`]; the duplicates of
/// `x-kubernetes-list-type` lists go to `duplicates`.
fn check_schema(
    field: &str,
    value: &Value,
    schema: &Value,
    root: bool,
    errors: &mut Vec<FieldError>,
    duplicates: &mut Vec<FieldError>,
) {
    let shown = if field.is_empty() { "<root>" } else { field };
    if !check_type(shown, value, schema, errors) {
        return;
    }
    match value {
        Value::String(text) => check_string(shown, text, schema, errors),
        Value::Number(number) => {
            check_number(shown, value, number.as_f64().unwrap_or(0.0), schema, errors);
        }
        Value::Array(items) => {
            check_items(field, items, schema, errors, duplicates);
            item_count_errors(shown, value, items.len(), schema, errors);
            list_duplicates(field, items, schema, duplicates);
        }
        Value::Object(_) | Value::Bool(_) | Value::Null => {}
    }
    errors.extend(enum_error(shown, value, schema));
    if let Value::Object(map) = value {
        check_fields(field, map, schema, root, errors, duplicates);
    }
}

/// The problems of `value`'s type at `shown` against `schema`: null where not nullable, neither
/// integer nor string where int-or-string, or another type than the schema's (then with the
/// enum's problem). Returns whether the schema's other validators apply to `value`.
fn check_type(shown: &str, value: &Value, schema: &Value, errors: &mut Vec<FieldError>) -> bool {
    if value.is_null() {
        if !schema_flag(schema, "nullable") {
            errors.push(FieldError::type_invalid(
                shown,
                "null",
                format!(
                    "{shown} in body must be of type {}: \"null\"",
                    schema
                        .get("type")
                        .and_then(Value::as_str)
                        .unwrap_or("object")
                ),
            ));
        }
        return false;
    }
    if schema_flag(schema, "x-kubernetes-int-or-string") {
        if !(value.is_string() || value.is_i64() || value.is_u64()) {
            errors.push(FieldError::invalid(
                shown,
                type_name(value),
                format!(
                    "{shown} in body must be of type integer or string: {:?}",
                    type_name(value)
                ),
            ));
        }
        return false;
    }
    if let Some(expected) = schema.get("type").and_then(Value::as_str) {
        let actual = type_name(value);
        let fits = actual == expected
            || (expected == "number" && actual == "integer")
            || (expected == "integer" && actual == "number" && is_integral(value));
        if !fits {
            errors.push(FieldError::type_invalid(
                shown,
                actual,
                format!("{shown} in body must be of type {expected}: {actual:?}"),
            ));
            // The other validators of the value's schema do not apply to a value of another
            // type; the enum's does.
            errors.extend(enum_error(shown, value, schema));
            return false;
        }
    }
    true
}

/// The problems of the string `text` at `shown`: the first of its length and pattern, then its
/// format.
fn check_string(shown: &str, text: &str, schema: &Value, errors: &mut Vec<FieldError>) {
    let get = |key: &str| schema.get(key);
    // kube-openapi's string validator reports the first of these only.
    let length = text.chars().count();
    if let Some(max) = get("maxLength").and_then(Value::as_u64)
        && length as u64 > max
    {
        errors.push(FieldError::too_long_max_length(shown, max as usize));
    } else if let Some(min) = get("minLength").and_then(Value::as_u64)
        && (length as u64) < min
    {
        errors.push(FieldError::invalid(
            shown,
            text,
            format!("{shown} in body should be at least {min} chars long"),
        ));
    } else if let Some(pattern) = get("pattern").and_then(Value::as_str) {
        match regex::Regex::new(pattern) {
            Ok(re) if re.is_match(text) => {}
            Ok(_) => errors.push(FieldError::invalid(
                shown,
                text,
                format!("{shown} in body should match '{pattern}'"),
            )),
            Err(error) => errors.push(FieldError::invalid(
                shown,
                pattern,
                format!("the schema's pattern does not compile: {error}"),
            )),
        }
    }
    match get("format").and_then(Value::as_str) {
        Some("date-time") if !is_rfc3339(text) => errors.push(FieldError::type_invalid(
            shown,
            text,
            format!("{shown} in body must be of type date-time: {text:?}"),
        )),
        _ => {}
    }
}

/// The problems of the number `value` (`n`) at `shown`: the range of an `int32`, then its
/// maximum and minimum.
fn check_number(shown: &str, value: &Value, n: f64, schema: &Value, errors: &mut Vec<FieldError>) {
    let get = |key: &str| schema.get(key);
    // `IsValueValidAgainstRange`: a plain error, not a field's, which the API server
    // reports at the nil path with an empty value.
    let int32 = get("type").and_then(Value::as_str) == Some("integer")
        && get("format").and_then(Value::as_str) == Some("int32");
    if int32 && (n < f64::from(i32::MIN) || n > f64::from(i32::MAX)) {
        errors.push(FieldError::invalid(
            "<nil>",
            "",
            format!("Checked value must be of type integer with format int32 in {shown}"),
        ));
    }
    if let Some(max) = get("maximum").and_then(Value::as_f64) {
        let exclusive = schema_flag(schema, "exclusiveMaximum");
        if n > max || (exclusive && n >= max) {
            errors.push(FieldError::invalid_json(
                shown,
                value,
                format!(
                    "{shown} in body should be less than {}{max}",
                    if exclusive { "" } else { "or equal to " }
                ),
            ));
        }
    }
    if let Some(min) = get("minimum").and_then(Value::as_f64) {
        let exclusive = schema_flag(schema, "exclusiveMinimum");
        if n < min || (exclusive && n <= min) {
            errors.push(FieldError::invalid_json(
                shown,
                value,
                format!(
                    "{shown} in body should be greater than {}{min}",
                    if exclusive { "" } else { "or equal to " }
                ),
            ));
        }
    }
}

/// Checks each of the list `items` at `field` against the schema's `items`.
fn check_items(
    field: &str,
    items: &[Value],
    schema: &Value,
    errors: &mut Vec<FieldError>,
    duplicates: &mut Vec<FieldError>,
) {
    if let Some(item_schema) = schema.get("items") {
        for (i, item) in items.iter().enumerate() {
            check_schema(
                &format!("{field}[{i}]"),
                item,
                item_schema,
                false,
                errors,
                duplicates,
            );
        }
    }
}

/// The problems of the list `value` of `count` items at `shown`: `minItems`, then `maxItems`.
fn item_count_errors(
    shown: &str,
    value: &Value,
    count: usize,
    schema: &Value,
    errors: &mut Vec<FieldError>,
) {
    if let Some(min) = schema.get("minItems").and_then(Value::as_u64)
        && (count as u64) < min
    {
        errors.push(FieldError::invalid_json(
            shown,
            value,
            format!("{shown} in body should have at least {min} items"),
        ));
    }
    if let Some(max) = schema.get("maxItems").and_then(Value::as_u64)
        && count as u64 > max
    {
        errors.push(FieldError::too_many(shown, count, max as usize));
    }
}

/// The duplicates of the list `items` at `field` its `x-kubernetes-list-type` forbids (`set`
/// or `map`).
fn list_duplicates(field: &str, items: &[Value], schema: &Value, duplicates: &mut Vec<FieldError>) {
    match schema.get("x-kubernetes-list-type").and_then(Value::as_str) {
        Some("set") => set_duplicates(field, items, duplicates),
        Some("map") => map_duplicates(field, items, schema, duplicates),
        _ => {}
    }
}

/// The second appearance of each repeated item of a `set` list, once.
fn set_duplicates(field: &str, items: &[Value], duplicates: &mut Vec<FieldError>) {
    let mut seen = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let count = seen.entry(item.to_string()).or_insert(0);
        *count += 1;
        if *count == 2 {
            duplicates.push(duplicate(&format!("{field}[{i}]"), item));
        }
    }
}

/// The second appearance of each repeated key of a `map` list, once, shown as the keys' object
/// (`{"type":"Ready"}`).
fn map_duplicates(field: &str, items: &[Value], schema: &Value, duplicates: &mut Vec<FieldError>) {
    let keys: Vec<&str> = schema
        .get("x-kubernetes-list-map-keys")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .filter_map(Value::as_str)
        .collect();
    let mut seen = BTreeMap::new();
    for (i, item) in items.iter().enumerate() {
        let shown_key: serde_json::Map<String, Value> = keys
            .iter()
            .filter_map(|k| item.get(*k).map(|v| ((*k).to_owned(), v.clone())))
            .collect();
        let shown_key = Value::Object(shown_key);
        let count = seen.entry(shown_key.to_string()).or_insert(0);
        *count += 1;
        if *count == 2 {
            duplicates.push(duplicate(&format!("{field}[{i}]"), &shown_key));
        }
    }
}

/// Checks the fields of the object `map` at `field` against the schema's properties (or its
/// `additionalProperties`), reporting those it does not declare, then its `required` fields;
/// `apiVersion`, `kind` and `metadata` are skipped at the root and in embedded resources.
fn check_fields(
    field: &str,
    map: &serde_json::Map<String, Value>,
    schema: &Value,
    root: bool,
    errors: &mut Vec<FieldError>,
    duplicates: &mut Vec<FieldError>,
) {
    let properties = schema.get("properties").and_then(Value::as_object);
    let preserve = schema_flag(schema, "x-kubernetes-preserve-unknown-fields");
    let embedded = schema_flag(schema, "x-kubernetes-embedded-resource");
    for (key, child) in map {
        if (root || embedded) && matches!(key.as_str(), "apiVersion" | "kind" | "metadata") {
            continue;
        }
        let path = join(field, key);
        if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
            check_schema(&path, child, child_schema, false, errors, duplicates);
        } else if let Some(additional) = schema.get("additionalProperties") {
            match additional {
                Value::Bool(false) => errors.push(FieldError::unknown(&path)),
                Value::Bool(true) => {}
                additional => {
                    check_schema(&path, child, additional, false, errors, duplicates);
                }
            }
        } else if !preserve {
            errors.push(FieldError::unknown(&path));
        }
    }
    if let Some(required) = schema.get("required").and_then(Value::as_array) {
        for name in required.iter().filter_map(Value::as_str) {
            if !map.contains_key(name) {
                errors.push(FieldError::required(&join(field, name), ""));
            }
        }
    }
}

/// Drops from `value` every field `schema` does not declare, as the API server prunes a custom
/// object before it validates and stores it (`metadata`, `apiVersion` and `kind` at the root
/// and in embedded resources are kept; `x-kubernetes-preserve-unknown-fields` keeps
/// everything below it that is not declared).
pub fn prune(value: &mut Value, schema: &Value) {
    prune_at(value, schema, true);
}

fn prune_at(value: &mut Value, schema: &Value, root: bool) {
    let flag = |key: &str| schema.get(key).and_then(Value::as_bool) == Some(true);
    match value {
        Value::Array(items) => {
            if let Some(item_schema) = schema.get("items") {
                for item in items {
                    prune_at(item, item_schema, false);
                }
            }
        }
        Value::Object(map) => {
            let kept_meta = root || flag("x-kubernetes-embedded-resource");
            let preserve = flag("x-kubernetes-preserve-unknown-fields");
            let properties = schema.get("properties").and_then(Value::as_object);
            let additional = schema.get("additionalProperties");
            let is_meta =
                |key: &str| kept_meta && matches!(key, "apiVersion" | "kind" | "metadata");
            map.retain(|key, _| {
                is_meta(key)
                    || properties.is_some_and(|p| p.contains_key(key))
                    || additional.is_some_and(|a| a != &Value::Bool(false))
                    || preserve
            });
            for (key, child) in map.iter_mut() {
                if is_meta(key) {
                    continue;
                }
                if let Some(child_schema) = properties.and_then(|p| p.get(key)) {
                    prune_at(child, child_schema, false);
                } else if let Some(additional) = additional.filter(|a| a.is_object()) {
                    prune_at(child, additional, false);
                }
            }
        }
        _ => {}
    }
}

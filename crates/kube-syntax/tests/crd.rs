//! CustomResourceDefinitions as the apiextensions API server validates them (names, protected
//! groups and their approval, versions, structural schemas), and objects against a schema.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use kube_syntax::ErrorKind;
use kube_syntax::crd::{
    APPROVAL_ANNOTATION, approval_errors, approval_required, crd_errors, is_protected_group,
    schema_errors, structural_errors, version_schema,
};
use serde_json::{Value, json};

const MISSING: &str = "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111";

fn annotation(value: &str) -> BTreeMap<String, String> {
    BTreeMap::from([(APPROVAL_ANNOTATION.to_owned(), value.to_owned())])
}

fn shown(errors: &[kube_syntax::FieldError]) -> Vec<String> {
    errors.iter().map(ToString::to_string).collect()
}

/// A minimal good CRD: `widgets.example.com`, one served and stored version.
fn widget_crd() -> Value {
    json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {
            "group": "example.com",
            "scope": "Namespaced",
            "names": {
                "plural": "widgets", "singular": "widget", "kind": "Widget",
                "listKind": "WidgetList", "shortNames": ["wd"], "categories": ["all"],
            },
            "versions": [{
                "name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {
                    "type": "object",
                    "properties": {
                        "spec": {"type": "object", "properties": {
                            "size": {"type": "integer"},
                        }},
                    },
                }},
            }],
        },
    })
}

#[test]
fn protected_groups() {
    for group in [
        "k8s.io",
        "kubernetes.io",
        "about.k8s.io",
        "x.kubernetes.io",
        "a.b.k8s.io",
        "sigs.k8s.io",
        "networking.k8s.io",
    ] {
        assert!(is_protected_group(group), "{group}");
        assert!(approval_required(group), "{group}");
    }
    for group in [
        "multicluster.x-k8s.io",
        "notk8s.io",
        "k8s.io.example.com",
        "xkubernetes.io",
        "example.com",
        "kubernetes.io.evil",
        "",
    ] {
        assert!(!is_protected_group(group), "{group}");
        assert!(!approval_required(group), "{group}");
    }
}

#[test]
fn approval_of_protected_groups() {
    let missing = approval_errors("about.k8s.io", &BTreeMap::new());
    assert_eq!(shown(&missing), [MISSING]);
    assert_eq!(missing[0].kind, ErrorKind::Required);
    // An empty value is missing.
    assert_eq!(
        shown(&approval_errors("about.k8s.io", &annotation(""))),
        [MISSING]
    );

    for value in [
        "https://github.com/kubernetes/enhancements/pull/1111",
        "https://github.com/kubernetes/kubernetes/pull/79724",
        "http://example.com",
        "unapproved",
        "unapproved, testing",
        "unapproved, other reason",
        "unapproved-experimental",
    ] {
        assert!(
            approval_errors("sigs.k8s.io", &annotation(value)).is_empty(),
            "{value:?}"
        );
    }
    for value in [
        "invalid",
        "bad value",
        "approved",
        "https://",
        "github.com/kubernetes/enhancements/pull/1111",
        "UNAPPROVED",
        " unapproved",
    ] {
        let errors = approval_errors("sigs.k8s.io", &annotation(value));
        assert_eq!(
            shown(&errors),
            [format!(
                "metadata.annotations[api-approved.kubernetes.io]: Invalid value: {value:?}: protected groups must have approval annotation \"api-approved.kubernetes.io\" with either a URL or a reason starting with \"unapproved\", see https://github.com/kubernetes/enhancements/pull/1111"
            )],
            "{value:?}"
        );
    }
}

#[test]
fn approval_annotation_on_groups_that_are_not_protected_is_ignored() {
    // `validateAPIApproval` is a no-op for other groups: whatever the annotation says, a real
    // server accepts the CRD.
    assert!(approval_errors("multicluster.x-k8s.io", &BTreeMap::new()).is_empty());
    for value in ["https://example.com/review", "unapproved", "invalid", ""] {
        assert!(
            approval_errors("multicluster.x-k8s.io", &annotation(value)).is_empty(),
            "{value:?}"
        );
        assert!(approval_errors("other.io", &annotation(value)).is_empty());
    }
}

#[test]
fn a_minimal_crd_is_accepted() {
    assert_eq!(shown(&crd_errors(&widget_crd())), Vec::<String>::new());
    // Singular and listKind are defaulted by the server when missing.
    let mut crd = widget_crd();
    let names = crd["spec"]["names"].as_object_mut().unwrap();
    names.remove("singular");
    names.remove("listKind");
    names.remove("shortNames");
    names.remove("categories");
    assert!(crd_errors(&crd).is_empty());
    // A protected group with its approval.
    let mut crd = widget_crd();
    crd["metadata"] = json!({"name": "widgets.about.k8s.io", "annotations": {
        APPROVAL_ANNOTATION: "https://github.com/kubernetes/enhancements/pull/2149"}});
    crd["spec"]["group"] = json!("about.k8s.io");
    assert!(crd_errors(&crd).is_empty(), "{:#?}", crd_errors(&crd));
    // The same without: exactly the error a real server gave.
    crd["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    assert_eq!(shown(&crd_errors(&crd)), [MISSING]);
}

fn with(mut crd: Value, pointer: &str, value: Value) -> Value {
    *crd.pointer_mut(pointer).unwrap() = value;
    crd
}

fn fields(errors: &[kube_syntax::FieldError]) -> Vec<&str> {
    errors.iter().map(|e| e.field.as_str()).collect()
}

#[test]
fn bad_crds_are_refused() {
    // The name must be <plural>.<group>.
    let errors = crd_errors(&with(
        widget_crd(),
        "/metadata/name",
        json!("widget.example.com"),
    ));
    assert_eq!(
        shown(&errors),
        [
            "metadata.name: Invalid value: \"widget.example.com\": must be spec.names.plural+\".\"+spec.group"
        ]
    );

    // Two storage versions, and none.
    let mut two = widget_crd();
    let v2 = json!({"name": "v2", "served": true, "storage": true,
        "schema": {"openAPIV3Schema": {"type": "object"}}});
    two["spec"]["versions"].as_array_mut().unwrap().push(v2);
    let errors = crd_errors(&two);
    assert_eq!(fields(&errors), ["spec.versions"]);
    assert!(
        errors[0]
            .to_string()
            .ends_with(": must have exactly one version marked as storage version")
    );
    let none = with(widget_crd(), "/spec/versions/0/storage", json!(false));
    let errors = crd_errors(&none);
    assert_eq!(fields(&errors), ["spec.versions"]);
    assert_eq!(
        errors[0].detail,
        "must have exactly one version marked as storage version"
    );
    let empty = with(widget_crd(), "/spec/versions", json!([]));
    assert_eq!(
        crd_errors(&empty)[0].detail,
        "must have exactly one version marked as storage version"
    );

    // Repeated version names.
    let mut repeated = widget_crd();
    let again = repeated["spec"]["versions"][0].clone();
    let mut again = again;
    again["storage"] = json!(false);
    repeated["spec"]["versions"]
        .as_array_mut()
        .unwrap()
        .push(again);
    let errors = crd_errors(&repeated);
    assert_eq!(fields(&errors), ["spec.versions"]);
    assert_eq!(errors[0].detail, "must contain unique version names");

    // A group without a dot.
    let errors = crd_errors(&with(
        with(widget_crd(), "/spec/group", json!("example")),
        "/metadata/name",
        json!("widgets.example"),
    ));
    assert_eq!(
        shown(&errors),
        ["spec.group: Invalid value: \"example\": should be a domain with at least one dot"]
    );
    // A group that is no subdomain.
    let errors = crd_errors(&with(
        with(widget_crd(), "/spec/group", json!("Example.com")),
        "/metadata/name",
        json!("widgets.Example.com"),
    ));
    assert_eq!(fields(&errors), ["spec.group"]);

    // An upper-case plural (the name follows it, so only the plural is wrong).
    let errors = crd_errors(&with(
        with(widget_crd(), "/spec/names/plural", json!("Widgets")),
        "/metadata/name",
        json!("Widgets.example.com"),
    ));
    assert_eq!(fields(&errors), ["spec.names.plural"]);
    assert!(
        errors[0]
            .detail
            .starts_with("a DNS-1035 label must consist")
    );

    // Kinds may have mixed case, nothing else.
    let errors = crd_errors(&with(widget_crd(), "/spec/names/kind", json!("Wid_get")));
    assert_eq!(fields(&errors), ["spec.names.kind"]);
    assert!(
        errors[0]
            .detail
            .starts_with("may have mixed case, but should otherwise match: a DNS-1035 label")
    );
    let errors = crd_errors(&with(widget_crd(), "/spec/names/listKind", json!("Widget")));
    assert_eq!(
        shown(&errors),
        ["spec.names.listKind: Invalid value: \"Widget\": kind and listKind may not be the same"]
    );
    // Short names and categories are plain DNS-1035 labels: no upper case.
    let errors = crd_errors(&with(widget_crd(), "/spec/names/shortNames", json!(["Wd"])));
    assert_eq!(fields(&errors), ["spec.names.shortNames[0]"]);
    let errors = crd_errors(&with(
        widget_crd(),
        "/spec/names/categories",
        json!(["a", "1b"]),
    ));
    assert_eq!(fields(&errors), ["spec.names.categories[1]"]);

    // Scope.
    let errors = crd_errors(&with(widget_crd(), "/spec/scope", json!("Global")));
    assert_eq!(
        shown(&errors),
        [
            "spec.scope: Unsupported value: \"Global\": supported values: \"Cluster\", \"Namespaced\""
        ]
    );
    // A version name that is no DNS-1035 label, and a version without a schema.
    let errors = crd_errors(&with(widget_crd(), "/spec/versions/0/name", json!("1")));
    assert_eq!(fields(&errors), ["spec.versions[0].name"]);
    let mut no_schema = widget_crd();
    no_schema["spec"]["versions"][0]
        .as_object_mut()
        .unwrap()
        .remove("schema");
    assert_eq!(
        shown(&crd_errors(&no_schema)),
        ["spec.versions[0].schema.openAPIV3Schema: Required value: schemas are required"]
    );
    // Missing plural and kind.
    let mut nameless = widget_crd();
    nameless["spec"]["names"] = json!({});
    nameless["metadata"]["name"] = json!(".example.com");
    let errors = crd_errors(&nameless);
    assert_eq!(fields(&errors), ["spec.names.plural", "spec.names.kind"]);
}

const ROOT: &str = "spec.versions[0].schema.openAPIV3Schema";

fn structural(schema: Value) -> Vec<String> {
    shown(&structural_errors(ROOT, &schema))
}

#[test]
fn structural_schemas() {
    assert!(structural(json!({"type": "object"})).is_empty());
    assert!(
        structural(json!({"type": "object", "properties": {
            "metadata": {"type": "object", "properties": {"name": {"type": "string", "maxLength": 20}}},
            "spec": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
            "port": {"x-kubernetes-int-or-string": true, "anyOf": [{"type": "integer"}, {"type": "string"}]},
            "any": {"x-kubernetes-preserve-unknown-fields": true},
            "labels": {"type": "object", "additionalProperties": {"type": "string"}},
            "list": {"type": "array", "items": {"type": "string"}, "x-kubernetes-list-type": "set"},
            "both": {"type": "object", "properties": {"a": {"type": "string"}}, "additionalProperties": true},
        }}))
        .is_empty()
    );

    // The root must be an object.
    assert_eq!(
        structural(json!({"type": "string"})),
        [format!(
            "{ROOT}.type: Invalid value: \"string\": must be object at the root"
        )]
    );
    // A missing type.
    assert_eq!(
        structural(json!({"type": "object", "properties": {"spec": {"properties": {}}}})),
        [format!(
            "{ROOT}.properties[spec].type: Required value: must not be empty for specified object fields"
        )]
    );
    // properties and additionalProperties.
    assert_eq!(
        structural(json!({"type": "object", "properties": {"spec": {
            "type": "object",
            "properties": {"a": {"type": "string"}},
            "additionalProperties": {"type": "string"},
        }}})),
        [format!(
            "{ROOT}.properties[spec].additionalProperties: Forbidden: additionalProperties and properties are mutual exclusive"
        )]
    );
    // uniqueItems.
    assert_eq!(
        structural(json!({"type": "object", "properties": {"l": {
            "type": "array", "items": {"type": "string"}, "uniqueItems": true}}})),
        [format!(
            "{ROOT}.properties[l].uniqueItems: Forbidden: uniqueItems cannot be set to true since the runtime complexity becomes quadratic"
        )]
    );
    // $ref.
    assert_eq!(
        structural(json!({"type": "object", "properties": {"s": {"$ref": "#/definitions/x"}}})),
        [
            format!("{ROOT}.properties[s].$ref: Forbidden: $ref is not supported"),
            format!(
                "{ROOT}.properties[s].type: Required value: must not be empty for specified object fields"
            ),
        ]
    );
    // type inside anyOf.
    assert_eq!(
        structural(json!({"type": "object", "properties": {"p": {
            "type": "string",
            "anyOf": [{"type": "string"}, {"maxLength": 3}],
        }}})),
        [format!(
            "{ROOT}.properties[p].anyOf[0].type: Forbidden: must not be specified inside allOf, anyOf, oneOf or not"
        )]
    );
    // metadata with more than name and generateName.
    assert_eq!(
        structural(json!({"type": "object", "properties": {"metadata": {
            "type": "object", "properties": {"labels": {"type": "object"}}}}})),
        [format!(
            "{ROOT}.properties[metadata]: Forbidden: must not specify anything other than name and generateName, but metadata is implicitly specified"
        )]
    );
    assert_eq!(
        structural(json!({"type": "object", "properties": {"metadata": {
            "type": "object", "x-kubernetes-preserve-unknown-fields": true}}}))
        .len(),
        1
    );
    // An array without items, an unknown type, a list map without keys.
    assert_eq!(
        structural(json!({"type": "object", "properties": {"a": {"type": "array"}}})),
        [format!(
            "{ROOT}.properties[a].items: Required value: must be specified"
        )]
    );
    assert_eq!(
        structural(json!({"type": "object", "properties": {"a": {"type": "float"}}})),
        [format!(
            "{ROOT}.properties[a].type: Unsupported value: \"float\": supported values: \"array\", \"boolean\", \"integer\", \"number\", \"object\", \"string\""
        )]
    );
    assert_eq!(
        structural(json!({"type": "object", "properties": {"a": {
            "type": "array", "x-kubernetes-list-type": "map",
            "items": {"type": "object", "properties": {"k": {"type": "string"}}}}}})),
        [format!(
            "{ROOT}.properties[a].x-kubernetes-list-map-keys: Required value: must not be empty if x-kubernetes-list-type is map"
        )]
    );
    // int-or-string with a type.
    assert_eq!(
        structural(json!({"type": "object", "properties": {"p": {
            "type": "string", "x-kubernetes-int-or-string": true}}})),
        [format!(
            "{ROOT}.properties[p].type: Forbidden: must be empty if x-kubernetes-int-or-string is true"
        )]
    );
    // int-or-string: the canonical anyOf (what controller-gen and schemars emit), or the same
    // in the first allOf, is allowed; other types inside anyOf are not.
    assert!(
        structural(json!({"type": "object", "properties": {"p": {
            "x-kubernetes-int-or-string": true,
            "allOf": [{"anyOf": [{"type": "integer"}, {"type": "string"}]}, {"maxLength": 5}],
        }}}))
        .is_empty()
    );
    assert_eq!(
        structural(json!({"type": "object", "properties": {"p": {
            "x-kubernetes-int-or-string": true,
            "anyOf": [{"type": "string"}, {"type": "integer"}],
        }}}))
        .len(),
        2
    );
    // Structural errors surface in crd_errors at the version's path.
    let crd = with(
        widget_crd(),
        "/spec/versions/0/schema/openAPIV3Schema/properties/spec",
        json!({"properties": {}}),
    );
    assert_eq!(
        fields(&crd_errors(&crd)),
        [format!("{ROOT}.properties[spec].type")]
    );
}

/// A schema that exercises every check of `schema_errors`.
fn schema() -> Value {
    json!({
        "type": "object",
        "required": ["spec"],
        "properties": {
            "spec": {
                "type": "object",
                "required": ["name"],
                "properties": {
                    "name": {"type": "string", "minLength": 2, "maxLength": 5},
                    "mode": {"type": "string", "enum": ["a", "b"]},
                    "replicas": {"type": "integer", "minimum": 1, "maximum": 10},
                    "ratio": {"type": "number", "minimum": 0, "exclusiveMinimum": true},
                    "small": {"type": "integer", "format": "int32"},
                    "code": {"type": "string", "pattern": "^[a-z]+$"},
                    "at": {"type": "string", "format": "date-time"},
                    "tags": {"type": "array", "maxItems": 2, "minItems": 1,
                        "items": {"type": "string"}},
                    "set": {"type": "array", "x-kubernetes-list-type": "set",
                        "items": {"type": "string"}},
                    "ports": {"type": "array", "x-kubernetes-list-type": "map",
                        "x-kubernetes-list-map-keys": ["port", "protocol"],
                        "items": {"type": "object", "properties": {
                            "port": {"type": "integer"}, "protocol": {"type": "string"}}}},
                    "free": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                    "env": {"type": "object", "additionalProperties": {"type": "string", "maxLength": 3}},
                    "target": {"x-kubernetes-int-or-string": true},
                    "maybe": {"type": "string", "nullable": true},
                    "never": {"type": "string"},
                    "flag": {"type": "boolean"},
                },
            },
        },
    })
}

fn check(spec: Value) -> Vec<String> {
    let object = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w", "anything": "goes"}, "spec": spec});
    shown(&schema_errors("", &object, &schema()))
}

#[test]
fn schema_accepts_a_good_object() {
    assert_eq!(
        check(json!({
            "name": "abc", "mode": "a", "replicas": 10, "ratio": 0.5, "small": 2147483647,
            "code": "abc", "at": "2024-05-01T10:00:00Z", "tags": ["x", "y"], "set": ["a", "b"],
            "ports": [{"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "UDP"}],
            "free": {"anything": {"at": ["all"]}}, "env": {"A": "abc"},
            "target": 8080, "maybe": null, "flag": false,
        })),
        Vec::<String>::new()
    );
    assert!(
        check(json!({"name": "ab", "target": "http", "at": "2024-05-01T10:00:00.123+02:00"}))
            .is_empty()
    );
    // An integer is a number.
    assert!(check(json!({"name": "ab", "ratio": 3})).is_empty());
}

#[test]
fn schema_errors_in_the_api_server_words() {
    let cases: Vec<(Value, Vec<&str>)> = vec![
        (
            json!({"name": 5}),
            vec![
                "spec.name: Invalid value: \"integer\": spec.name in body must be of type string: \"integer\"",
            ],
        ),
        (
            json!({"name": "ab", "replicas": "3"}),
            vec![
                "spec.replicas: Invalid value: \"string\": spec.replicas in body must be of type integer: \"string\"",
            ],
        ),
        (json!({}), vec!["spec.name: Required value"]),
        (
            json!({"name": "ab", "mode": "c"}),
            vec!["spec.mode: Unsupported value: \"c\": supported values: \"a\", \"b\""],
        ),
        (
            json!({"name": "abcdef"}),
            vec!["spec.name: Too long: may not be more than 5 bytes"],
        ),
        (
            json!({"name": "a"}),
            vec![
                "spec.name: Invalid value: \"a\": spec.name in body should be at least 2 chars long",
            ],
        ),
        (
            json!({"name": "ab", "tags": ["a", "b", "c"]}),
            vec!["spec.tags: Too many: 3: must have at most 2 items"],
        ),
        (
            json!({"name": "ab", "tags": []}),
            vec!["spec.tags: Invalid value: []: spec.tags in body should have at least 1 items"],
        ),
        (
            json!({"name": "ab", "replicas": 0}),
            vec![
                "spec.replicas: Invalid value: 0: spec.replicas in body should be greater than or equal to 1",
            ],
        ),
        (
            json!({"name": "ab", "replicas": 11}),
            vec![
                "spec.replicas: Invalid value: 11: spec.replicas in body should be less than or equal to 10",
            ],
        ),
        (
            json!({"name": "ab", "ratio": 0}),
            vec!["spec.ratio: Invalid value: 0: spec.ratio in body should be greater than 0"],
        ),
        (
            json!({"name": "ab", "small": 2147483648_i64}),
            // kube-openapi's range check is a plain error, which the API server reports at the
            // nil path with an empty value.
            vec![
                "<nil>: Invalid value: \"\": Checked value must be of type integer with format int32 in spec.small",
            ],
        ),
        (
            json!({"name": "ab", "code": "ABC"}),
            vec!["spec.code: Invalid value: \"ABC\": spec.code in body should match '^[a-z]+$'"],
        ),
        (
            json!({"name": "ab", "at": "yesterday"}),
            vec![
                "spec.at: Invalid value: \"yesterday\": spec.at in body must be of type date-time: \"yesterday\"",
            ],
        ),
        (
            json!({"name": "ab", "at": "2024-05-01 10:00:00Z"}),
            vec![
                "spec.at: Invalid value: \"2024-05-01 10:00:00Z\": spec.at in body must be of type date-time: \"2024-05-01 10:00:00Z\"",
            ],
        ),
        (
            json!({"name": "ab", "set": ["a", "b", "a", "a"]}),
            vec!["spec.set[2]: Duplicate value: \"a\""],
        ),
        (
            json!({"name": "ab", "ports": [
                {"port": 80, "protocol": "TCP"}, {"port": 80, "protocol": "TCP"}]}),
            vec!["spec.ports[1]: Duplicate value: {\"port\":80,\"protocol\":\"TCP\"}"],
        ),
        (
            json!({"name": "ab", "unknown": 1}),
            vec!["spec.unknown: field not declared in schema"],
        ),
        (
            json!({"name": "ab", "env": {"A": "abcd", "B": 1}}),
            vec![
                "spec.env.A: Too long: may not be more than 3 bytes",
                "spec.env.B: Invalid value: \"integer\": spec.env.B in body must be of type string: \"integer\"",
            ],
        ),
        (
            json!({"name": "ab", "target": 1.5}),
            vec![
                "spec.target: Invalid value: \"number\": spec.target in body must be of type integer or string: \"number\"",
            ],
        ),
        (
            json!({"name": "ab", "never": null}),
            vec![
                "spec.never: Invalid value: \"null\": spec.never in body must be of type string: \"null\"",
            ],
        ),
        (
            json!({"name": "ab", "flag": "true"}),
            vec![
                "spec.flag: Invalid value: \"string\": spec.flag in body must be of type boolean: \"string\"",
            ],
        ),
    ];
    for (spec, expected) in cases {
        assert_eq!(check(spec.clone()), expected, "{spec}");
    }
    // The root: unknown top-level fields (with the object's fields), then the required spec;
    // metadata is left to object checks.
    let object =
        json!({"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {}, "extra": 1});
    assert_eq!(
        shown(&schema_errors("", &object, &schema())),
        [
            "extra: field not declared in schema",
            "spec: Required value"
        ]
    );
    // The kinds of errors.
    let errors = schema_errors("", &json!({"spec": {"unknown": 1}}), &schema());
    assert_eq!(errors[0].kind, ErrorKind::Unknown);
    assert_eq!(errors[0].kind.cause_reason(), "FieldValueInvalid");
    assert_eq!(errors[1].kind, ErrorKind::Required);
}

#[test]
fn preserve_unknown_fields_and_embedded_resources() {
    // Anything goes under preserve-unknown-fields, even nested.
    assert!(
        check(json!({"name": "ab", "free": {"a": 1, "b": [true, null], "c": {"d": "e"}}}))
            .is_empty()
    );
    // An embedded resource keeps its apiVersion, kind and metadata.
    let schema = json!({"type": "object", "properties": {"template": {
        "type": "object", "x-kubernetes-embedded-resource": true,
        "properties": {"spec": {"type": "object"}}}}});
    let object = json!({"template": {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"},
        "spec": {}}});
    assert!(schema_errors("", &object, &schema).is_empty());
    let object = json!({"template": {"other": 1}});
    assert_eq!(
        shown(&schema_errors("", &object, &schema)),
        ["template.other: field not declared in schema"]
    );
    // additionalProperties false refuses every key.
    let closed = json!({"type": "object", "additionalProperties": false});
    assert_eq!(
        shown(&schema_errors("", &json!({"a": 1}), &closed)),
        ["a: field not declared in schema"]
    );
}

#[test]
fn version_schema_finds_the_version() {
    let crd = widget_crd();
    assert_eq!(version_schema(&crd, "v1").unwrap()["type"], json!("object"));
    assert!(version_schema(&crd, "v2").is_none());
}

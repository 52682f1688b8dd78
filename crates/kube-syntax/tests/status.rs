//! The refusals of a real API server: request paths taken apart, `422 Invalid` and
//! `400 BadRequest` bodies, and which request gets which refusal.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use kube_syntax::FieldError;
use kube_syntax::object::{Catalog, Completeness};
use kube_syntax::status::{
    APPLY_PATCH, Refusal, Request, ResourcePath, bad_request, invalid, not_found, parse_path,
};
use serde_json::{Value, json};

fn path(
    group: &str,
    version: &str,
    namespace: Option<&str>,
    plural: &str,
    name: Option<&str>,
    subresource: Option<&str>,
) -> ResourcePath {
    ResourcePath {
        group: group.to_owned(),
        version: version.to_owned(),
        namespace: namespace.map(str::to_owned),
        plural: plural.to_owned(),
        name: name.map(str::to_owned),
        subresource: subresource.map(str::to_owned),
    }
}

#[test]
fn request_paths() {
    let cases = [
        (
            "/api/v1/services",
            path("", "v1", None, "services", None, None),
        ),
        (
            "/api/v1/namespaces/demo/services",
            path("", "v1", Some("demo"), "services", None, None),
        ),
        (
            "/api/v1/namespaces/demo/services/web",
            path("", "v1", Some("demo"), "services", Some("web"), None),
        ),
        (
            "/api/v1/namespaces/demo/services/web/status",
            path(
                "",
                "v1",
                Some("demo"),
                "services",
                Some("web"),
                Some("status"),
            ),
        ),
        (
            "/apis/discovery.k8s.io/v1/endpointslices",
            path("discovery.k8s.io", "v1", None, "endpointslices", None, None),
        ),
        (
            "/apis/discovery.k8s.io/v1/namespaces/demo/endpointslices/web-east",
            path(
                "discovery.k8s.io",
                "v1",
                Some("demo"),
                "endpointslices",
                Some("web-east"),
                None,
            ),
        ),
        (
            "/apis/about.k8s.io/v1alpha1/clusterproperties/id.k8s.io",
            path(
                "about.k8s.io",
                "v1alpha1",
                None,
                "clusterproperties",
                Some("id.k8s.io"),
                None,
            ),
        ),
        (
            "/apis/example.com/v1/namespaces/demo/widgets/w1/status",
            path(
                "example.com",
                "v1",
                Some("demo"),
                "widgets",
                Some("w1"),
                Some("status"),
            ),
        ),
        // The namespaces themselves are cluster-scoped.
        (
            "/api/v1/namespaces",
            path("", "v1", None, "namespaces", None, None),
        ),
        (
            "/api/v1/namespaces/demo",
            path("", "v1", None, "namespaces", Some("demo"), None),
        ),
        (
            "/api/v1/namespaces/demo/status",
            path("", "v1", None, "namespaces", Some("demo"), Some("status")),
        ),
        (
            "/api/v1/namespaces/demo/finalize",
            path("", "v1", None, "namespaces", Some("demo"), Some("finalize")),
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(parse_path(text), Some(expected), "{text}");
    }
    for text in [
        "/api",
        "/api/v1",
        "/apis",
        "/apis/discovery.k8s.io",
        "/apis/discovery.k8s.io/v1",
        "/version",
        "/healthz",
        "/openapi/v2",
        "/",
        "",
        "/api/v1/namespaces/demo/services/web/status/extra",
    ] {
        assert_eq!(parse_path(text), None, "{text}");
    }
}

#[test]
fn invalid_with_one_error() {
    let error = FieldError::invalid(
        "metadata.name",
        "0web",
        "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')",
    );
    let refusal = invalid("", "Service", "0web", std::slice::from_ref(&error));
    assert_eq!(refusal.code, 422);
    assert_eq!(
        refusal.message(),
        "Service \"0web\" is invalid: metadata.name: Invalid value: \"0web\": a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
    );
    assert_eq!(
        refusal.body,
        json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {},
            "status": "Failure", "message": refusal.message(), "reason": "Invalid", "code": 422,
            // `group` is `omitempty` in Go: the core group's refusals have none.
            "details": {"name": "0web", "kind": "Service", "causes": [{
                "reason": "FieldValueInvalid",
                "message": error.message(),
                "field": "metadata.name",
            }]},
        })
    );
}

#[test]
fn invalid_with_several_errors() {
    let errors = [
        FieldError::invalid("metadata.labels", "a/b", "bad"),
        FieldError::required("addressType", ""),
        FieldError::too_many("endpoints", 1001, 1000),
        FieldError::not_supported("spec.ports[0].protocol", "HTTP", &["SCTP", "TCP", "UDP"]),
        FieldError::duplicate("ports[1].name", "http"),
        FieldError::too_long("metadata.annotations", 262_144),
        FieldError::forbidden("metadata.namespace", "not allowed on this type"),
        FieldError::unknown("spec.shape"),
    ];
    let refusal = invalid("discovery.k8s.io", "EndpointSlice", "web", &errors);
    assert_eq!(
        refusal.message(),
        "EndpointSlice.discovery.k8s.io \"web\" is invalid: [\
         metadata.labels: Invalid value: \"a/b\": bad, \
         addressType: Required value, \
         endpoints: Too many: 1001: must have at most 1000 items, \
         spec.ports[0].protocol: Unsupported value: \"HTTP\": supported values: \"SCTP\", \"TCP\", \"UDP\", \
         ports[1].name: Duplicate value: \"http\", \
         metadata.annotations: Too long: may not be more than 262144 bytes, \
         metadata.namespace: Forbidden: not allowed on this type, \
         spec.shape: field not declared in schema]"
    );
    let causes = refusal.body["details"]["causes"].as_array().unwrap();
    let reasons: Vec<&str> = causes
        .iter()
        .map(|c| c["reason"].as_str().unwrap())
        .collect();
    assert_eq!(
        reasons,
        [
            "FieldValueInvalid",
            "FieldValueRequired",
            "FieldValueTooMany",
            "FieldValueNotSupported",
            "FieldValueDuplicate",
            "FieldValueTooLong",
            "FieldValueForbidden",
            "FieldValueInvalid",
        ]
    );
    let fields: Vec<&str> = causes
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields[0], "metadata.labels");
    assert_eq!(fields[7], "spec.shape");
    assert_eq!(causes[1]["message"], "Required value");
    assert_eq!(refusal.body["details"]["group"], "discovery.k8s.io");
    assert_eq!(refusal.body["details"]["kind"], "EndpointSlice");
    assert_eq!(refusal.body["code"], 422);
    assert_eq!(refusal.body["reason"], "Invalid");

    // Repeated messages are printed once, as the aggregate prints them; causes keep all.
    let twice = [
        FieldError::invalid("metadata.finalizers", "a/b/c", "bad"),
        FieldError::invalid("metadata.finalizers", "a/b/c", "bad"),
    ];
    let refusal = invalid("", "ConfigMap", "c", &twice);
    assert_eq!(
        refusal.message(),
        "ConfigMap \"c\" is invalid: metadata.finalizers: Invalid value: \"a/b/c\": bad"
    );
    assert_eq!(
        refusal.body["details"]["causes"].as_array().unwrap().len(),
        2
    );
}

#[test]
fn bad_request_and_not_found_bodies() {
    let refusal = bad_request("found 'a' expected: '('");
    assert_eq!(refusal.code, 400);
    assert_eq!(refusal.body["reason"], "BadRequest");
    assert_eq!(refusal.body["status"], "Failure");
    assert_eq!(refusal.message(), "found 'a' expected: '('");
    assert!(refusal.body.get("details").is_none());

    let missing = not_found("discovery.k8s.io", "endpointslices", "web");
    assert_eq!(missing.code, 404);
    assert_eq!(missing.body["reason"], "NotFound");
    assert_eq!(
        missing.message(),
        "endpointslices.discovery.k8s.io \"web\" not found"
    );
    assert_eq!(
        not_found("", "services", "web").message(),
        "services \"web\" not found"
    );
}

struct Call {
    method: &'static str,
    path: &'static str,
    query: BTreeMap<String, String>,
    content_type: &'static str,
    body: Option<Value>,
}

impl Call {
    fn new(method: &'static str, path: &'static str) -> Self {
        Self {
            method,
            path,
            query: BTreeMap::new(),
            content_type: "",
            body: None,
        }
    }

    fn query(mut self, key: &str, value: &str) -> Self {
        self.query.insert(key.to_owned(), value.to_owned());
        self
    }

    fn body(mut self, content_type: &'static str, body: Value) -> Self {
        self.content_type = content_type;
        self.body = Some(body);
        self
    }

    fn check_with(&self, catalog: &Catalog) -> Result<(), Refusal> {
        catalog.check_request(&Request {
            method: self.method,
            path: self.path,
            query: &self.query,
            content_type: self.content_type,
            body: self.body.as_ref(),
        })
    }

    fn check(&self) -> Result<(), Refusal> {
        self.check_with(&Catalog::builtin())
    }
}

const JSON: &str = "application/json";
const MERGE: &str = "application/merge-patch+json";

fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service",
        "metadata": {"name": name, "namespace": "demo"},
        "spec": {"ports": [{"port": 80}]}})
}

#[test]
fn reads_with_selectors() {
    let list = |key: &str, value: &str| {
        Call::new(
            "GET",
            "/apis/discovery.k8s.io/v1/namespaces/demo/endpointslices",
        )
        .query(key, value)
        .check()
    };
    assert!(list("labelSelector", "kubernetes.io/service-name=web,!skip").is_ok());
    assert!(list("fieldSelector", "metadata.name=web-east").is_ok());

    let refusal = list("labelSelector", "k in a").unwrap_err();
    assert_eq!(refusal.code, 400);
    assert_eq!(refusal.body["reason"], "BadRequest");
    assert_eq!(
        refusal.message(),
        "unable to parse requirement: found 'a' expected: '('"
    );
    let refusal = list(
        "labelSelector",
        "endpointslice.kubernetes.io/managed-by=clusterset.io/mcs-controller",
    )
    .unwrap_err();
    assert_eq!(refusal.code, 400);
    assert!(refusal.message().starts_with(
        "unable to parse requirement: values[0][endpointslice.kubernetes.io/managed-by]: Invalid value: \"clusterset.io/mcs-controller\""
    ));

    let refusal = list("fieldSelector", "spec.nodeName=n1").unwrap_err();
    assert_eq!(refusal.code, 400);
    assert_eq!(
        refusal.message(),
        "\"spec.nodeName\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
    );
    // Events have their involvedObject fields.
    assert!(
        Call::new("GET", "/api/v1/namespaces/demo/events")
            .query(
                "fieldSelector",
                "involvedObject.name=web,involvedObject.kind=Service"
            )
            .check()
            .is_ok()
    );
    // A watch is a read too.
    assert!(
        Call::new("GET", "/api/v1/services")
            .query("watch", "true")
            .query("labelSelector", "a,")
            .check()
            .is_err()
    );
}

#[test]
fn field_managers_of_writes() {
    let apply = |manager: Option<&str>| {
        let mut call = Call::new("PATCH", "/api/v1/namespaces/demo/services/web")
            .body(APPLY_PATCH, service("web"));
        if let Some(manager) = manager {
            call = call.query("fieldManager", manager);
        }
        call.check()
    };
    assert!(apply(Some("clusterset-agent")).is_ok());
    let refusal = apply(None).unwrap_err();
    assert_eq!(refusal.code, 422);
    assert_eq!(refusal.body["reason"], "Invalid");
    assert_eq!(refusal.body["details"]["kind"], "PatchOptions");
    assert_eq!(refusal.body["details"]["group"], "meta.k8s.io");
    assert_eq!(
        refusal.message(),
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Required value: is required for apply patch"
    );
    assert_eq!(
        refusal.body["details"]["causes"][0]["reason"],
        "FieldValueRequired"
    );
    assert!(apply(Some(&"m".repeat(128))).is_ok());
    let refusal = apply(Some(&"m".repeat(129))).unwrap_err();
    assert_eq!(
        refusal.message(),
        "PatchOptions.meta.k8s.io \"\" is invalid: fieldManager: Too long: may not be more than 128 bytes"
    );

    // Other writes need no manager, but a bad one is refused with their options' kind.
    assert!(
        Call::new("POST", "/api/v1/namespaces/demo/services")
            .body(JSON, service("web"))
            .check()
            .is_ok()
    );
    let refusal = Call::new("POST", "/api/v1/namespaces/demo/services")
        .query("fieldManager", "bad\u{7}")
        .body(JSON, service("web"))
        .check()
        .unwrap_err();
    assert_eq!(refusal.body["details"]["kind"], "CreateOptions");
    let refusal = Call::new("PUT", "/api/v1/namespaces/demo/services/web")
        .query("fieldManager", &"m".repeat(129))
        .body(JSON, service("web"))
        .check()
        .unwrap_err();
    assert_eq!(refusal.body["details"]["kind"], "UpdateOptions");
    // Reads ignore it.
    assert!(
        Call::new("GET", "/api/v1/namespaces/demo/services")
            .query("fieldManager", &"m".repeat(200))
            .check()
            .is_ok()
    );
}

#[test]
fn bodies_must_match_their_url() {
    let refusal = Call::new("PUT", "/api/v1/namespaces/demo/services/web")
        .body(JSON, service("db"))
        .check()
        .unwrap_err();
    assert_eq!(refusal.code, 400);
    assert_eq!(
        refusal.message(),
        "the name of the object (db) does not match the name on the URL (web)"
    );

    let refusal = Call::new("POST", "/api/v1/namespaces/other/services")
        .body(JSON, service("web"))
        .check()
        .unwrap_err();
    assert_eq!(refusal.code, 400);
    assert_eq!(
        refusal.message(),
        "the namespace of the provided object does not match the namespace sent on the request"
    );

    // Apply needs the URL's apiVersion and kind (the field manager's version check).
    let mut kindless = service("web");
    kindless.as_object_mut().unwrap().remove("kind");
    let refusal = Call::new("PATCH", "/api/v1/namespaces/demo/services/web")
        .query("fieldManager", "agent")
        .body(APPLY_PATCH, kindless)
        .check()
        .unwrap_err();
    assert_eq!(refusal.code, 400);
    assert_eq!(refusal.message(), "invalid object type: /v1, Kind=");
    let mut versionless = service("web");
    versionless.as_object_mut().unwrap().remove("apiVersion");
    let refusal = Call::new("PATCH", "/api/v1/namespaces/demo/services/web")
        .query("fieldManager", "agent")
        .body(APPLY_PATCH, versionless)
        .check()
        .unwrap_err();
    assert_eq!(refusal.message(), "invalid object type: /, Kind=Service");

    // The wrong kind or version for the URL.
    let refusal = Call::new("POST", "/api/v1/namespaces/demo/services")
        .body(
            JSON,
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "web"}}),
        )
        .check()
        .unwrap_err();
    assert_eq!(
        refusal.message(),
        "ConfigMap in version \"v1\" cannot be handled as a Service: converting (v1.ConfigMap) to (core.Service): unknown conversion"
    );
    let refusal = Call::new("POST", "/apis/apps/v1/namespaces/demo/deployments")
        .body(
            JSON,
            json!({"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {"name": "a"}}),
        )
        .check()
        .unwrap_err();
    assert_eq!(
        refusal.message(),
        "the API version in the data (apps/v1beta1) does not match the expected API version (apps/v1)"
    );
    // A body that is no object.
    assert_eq!(
        Call::new("POST", "/api/v1/namespaces/demo/services")
            .body(JSON, json!([1, 2]))
            .check()
            .unwrap_err()
            .code,
        400
    );
    // The apply's force is read as a boolean: anything but `true` is false, never refused.
    assert!(
        Call::new("PATCH", "/api/v1/namespaces/demo/services/web")
            .query("fieldManager", "agent")
            .query("force", "yes")
            .body(APPLY_PATCH, service("web"))
            .check()
            .is_ok()
    );
}

#[test]
fn invalid_objects_get_422_with_every_cause() {
    let refusal = Call::new("POST", "/api/v1/namespaces/demo/services")
        .body(JSON, service("web.v2"))
        .check()
        .unwrap_err();
    assert_eq!(refusal.code, 422);
    assert_eq!(refusal.body["reason"], "Invalid");
    assert!(
        refusal.message().starts_with(
            "Service \"web.v2\" is invalid: metadata.name: Invalid value: \"web.v2\": must not contain dots"
        ),
        "{}",
        refusal.message()
    );
    assert_eq!(
        refusal.body["details"]["causes"][0]["field"],
        "metadata.name"
    );

    let slice = json!({"apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
        "metadata": {"name": "web-east", "labels": {
            "endpointslice.kubernetes.io/managed-by": "clusterset.io/mcs-controller"}},
        "addressType": "IPv4", "endpoints": [{"addresses": ["300.1.1.1"]}]});
    let refusal = Call::new(
        "PUT",
        "/apis/discovery.k8s.io/v1/namespaces/demo/endpointslices/web-east",
    )
    .query("fieldManager", "agent")
    .body(JSON, slice)
    .check()
    .unwrap_err();
    assert_eq!(refusal.code, 422);
    assert!(
        refusal
            .message()
            .starts_with("EndpointSlice.discovery.k8s.io \"web-east\" is invalid: [metadata.labels: Invalid value: \"clusterset.io/mcs-controller\""),
        "{}",
        refusal.message()
    );
    let fields: Vec<&str> = refusal.body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    // The bad address twice: not IPv4, and not an IP address (ValidateNonSpecialIP).
    assert_eq!(
        fields,
        [
            "metadata.labels",
            "endpoints[0].addresses[0]",
            "endpoints[0].addresses[0]"
        ]
    );

    // A whole object without its name: the URL's name stands for it on PUT.
    let mut nameless = service("web");
    nameless["metadata"].as_object_mut().unwrap().remove("name");
    assert!(
        Call::new("PUT", "/api/v1/namespaces/demo/services/web")
            .body(JSON, nameless.clone())
            .check()
            .is_ok()
    );
    let refusal = Call::new("POST", "/api/v1/namespaces/demo/services")
        .body(JSON, nameless)
        .check()
        .unwrap_err();
    assert_eq!(
        refusal.message(),
        "Service \"\" is invalid: metadata.name: Required value: name or generateName is required"
    );
}

#[test]
fn merge_patches_are_checked_on_what_they_send() {
    let patch = |body: Value| {
        Call::new("PATCH", "/api/v1/namespaces/demo/services/web")
            .body(MERGE, body)
            .check()
    };
    // Just labels, just the status: nothing else is required.
    assert!(patch(json!({"metadata": {"labels": {"app": "web"}}})).is_ok());
    assert!(patch(json!({"status": {"loadBalancer": {}}})).is_ok());
    assert!(patch(json!({"spec": {"selector": {"app": "web"}}})).is_ok());
    // What they send is checked.
    let refusal = patch(json!({"metadata": {"labels": {"app": "a/b"}}})).unwrap_err();
    assert_eq!(refusal.code, 422);
    assert!(
        refusal
            .message()
            .starts_with("Service \"web\" is invalid: metadata.labels: Invalid value: \"a/b\""),
        "{}",
        refusal.message()
    );
    let refusal = patch(json!({"spec": {"ports": [{"port": 0}]}})).unwrap_err();
    assert_eq!(
        refusal.body["details"]["causes"][0]["field"],
        "spec.ports[0].port"
    );

    // The status subresource of an EndpointSlice-like patch.
    assert!(
        Call::new(
            "PATCH",
            "/apis/coordination.k8s.io/v1/namespaces/demo/leases/agent"
        )
        .body(
            MERGE,
            json!({"spec": {"renewTime": "2024-05-01T10:00:00.000000Z"}})
        )
        .check()
        .is_ok()
    );
}

#[test]
fn custom_resources_and_unknown_types() {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}}}}}}]},
    });
    let catalog = Catalog::builtin().with_crd(&crd);
    let widget = |size: Value| {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": "w1", "namespace": "demo"}, "spec": {"size": size}})
    };
    let post = |body: Value| {
        Call::new("POST", "/apis/example.com/v1/namespaces/demo/widgets")
            .body(JSON, body)
            .check_with(&catalog)
    };
    assert!(post(widget(json!(3))).is_ok());
    let refusal = post(widget(json!("three"))).unwrap_err();
    assert_eq!(refusal.code, 422);
    assert_eq!(
        refusal.message(),
        "Widget.example.com \"w1\" is invalid: spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""
    );
    // Without the CRD, the type is unknown and passes, whatever it holds.
    assert!(
        Call::new("POST", "/apis/example.com/v1/namespaces/demo/widgets")
            .body(JSON, widget(json!("three")))
            .check()
            .is_ok()
    );
    // ... but it gets the rules every kind shares: its metadata, selectors, field manager.
    let mut bad_name = widget(json!(3));
    bad_name["metadata"]["name"] = json!("W1");
    let refusal = Call::new("POST", "/apis/example.com/v1/namespaces/demo/widgets")
        .body(JSON, bad_name)
        .check()
        .unwrap_err();
    assert_eq!(refusal.code, 422);
    assert_eq!(
        refusal.body["details"]["causes"][0]["field"],
        "metadata.name"
    );
    assert_eq!(
        Call::new("GET", "/apis/example.com/v1/widgets")
            .query("labelSelector", "a in b")
            .check()
            .unwrap_err()
            .code,
        400
    );
    // Paths that name no resource pass.
    assert!(Call::new("GET", "/version").check().is_ok());
    assert!(Call::new("GET", "/apis").check().is_ok());
    // The CRD itself is checked when created.
    let mut bad_crd = crd.clone();
    bad_crd["metadata"]["name"] = json!("widget.example.com");
    let refusal = Call::new(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    )
    .body(JSON, bad_crd)
    .check()
    .unwrap_err();
    assert_eq!(
        refusal.message(),
        "CustomResourceDefinition.apiextensions.k8s.io \"widget.example.com\" is invalid: metadata.name: Invalid value: \"widget.example.com\": must be spec.names.plural+\".\"+spec.group"
    );
    let mut protected = crd;
    protected["metadata"]["name"] = json!("widgets.about.k8s.io");
    protected["spec"]["group"] = json!("about.k8s.io");
    let refusal = Call::new(
        "POST",
        "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
    )
    .body(JSON, protected)
    .check()
    .unwrap_err();
    assert_eq!(
        refusal.message(),
        "CustomResourceDefinition.apiextensions.k8s.io \"widgets.about.k8s.io\" is invalid: metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must have approval annotation \"api-approved.kubernetes.io\", see https://github.com/kubernetes/enhancements/pull/1111"
    );
}

#[test]
fn undeclared_fields_follow_the_field_validation() {
    let crd = json!({
        "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "widgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "names": {"plural": "widgets", "kind": "Widget"},
            "versions": [{"name": "v1", "served": true, "storage": true,
                "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                    "spec": {"type": "object", "properties": {"size": {"type": "integer"}}},
                    "status": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}}}]},
    });
    let catalog = Catalog::builtin().with_crd(&crd);
    let widget = json!({"apiVersion": "example.com/v1", "kind": "Widget",
        "metadata": {"name": "w1", "namespace": "demo"},
        "spec": {"size": 3, "x": 1}, "status": {"anything": true}});
    let call = |method: &'static str, path: &'static str, content_type, validation: &str| {
        let mut call = Call::new(method, path).body(content_type, widget.clone());
        if !validation.is_empty() {
            call = call.query("fieldValidation", validation);
        }
        if content_type == APPLY_PATCH {
            call = call.query("fieldManager", "agent");
        }
        call.check_with(&catalog)
    };
    const LIST: &str = "/apis/example.com/v1/namespaces/demo/widgets";
    const ONE: &str = "/apis/example.com/v1/namespaces/demo/widgets/w1";
    // Warn (the default) and Ignore: accepted; the server prunes the field.
    for validation in ["", "Warn", "Ignore"] {
        assert!(call("POST", LIST, JSON, validation).is_ok(), "{validation}");
        assert!(call("PUT", ONE, JSON, validation).is_ok(), "{validation}");
        assert!(
            call("PATCH", ONE, MERGE, validation).is_ok(),
            "{validation}"
        );
    }
    // Strict: a create or an update is a 400 from the decoder.
    for (method, path) in [("POST", LIST), ("PUT", ONE)] {
        let refusal = call(method, path, JSON, "Strict").unwrap_err();
        assert_eq!(refusal.code, 400);
        assert_eq!(
            refusal.message(),
            "Widget in version \"v1\" cannot be handled as a Widget: strict decoding error: unknown field \"spec.x\""
        );
    }
    // ... a merge patch a 422 on the field `patch`.
    let refusal = call("PATCH", ONE, MERGE, "Strict").unwrap_err();
    assert_eq!(refusal.code, 422);
    assert!(
        refusal
            .message()
            .starts_with(" \"\" is invalid: patch: Invalid value: \"{"),
        "{}",
        refusal.message()
    );
    assert!(
        refusal
            .message()
            .ends_with("\": strict decoding error: unknown field \"spec.x\""),
        "{}",
        refusal.message()
    );
    // A server-side apply fails its typed conversion whatever the field validation.
    let refusal = call("PATCH", ONE, APPLY_PATCH, "").unwrap_err();
    assert_eq!(refusal.code, 500);
    assert_eq!(
        refusal.message(),
        "failed to create typed patch object (demo/w1; example.com/v1, Kind=Widget): .spec.x: field not declared in schema"
    );
    // Other values of fieldValidation are refused.
    let refusal = call("POST", LIST, JSON, "Loud").unwrap_err();
    assert_eq!(
        refusal.message(),
        "CreateOptions.meta.k8s.io \"\" is invalid: fieldValidation: Unsupported value: \"Loud\": supported values: \"\", \"Ignore\", \"Strict\", \"Warn\""
    );
    // What the server stores: the undeclared field dropped, what is preserved kept.
    assert_eq!(catalog.unknown_fields(&widget).len(), 1);
    let mut stored = widget.clone();
    catalog.prune(&mut stored);
    assert_eq!(stored["spec"], json!({"size": 3}));
    assert_eq!(stored["status"], json!({"anything": true}));
    assert_eq!(stored["metadata"], widget["metadata"]);
    assert!(catalog.unknown_fields(&stored).is_empty());
    // The 422 of a stored object never lists unknown fields.
    assert!(catalog.refusal(&widget, Completeness::Whole).is_none());
    let mut bad = widget.clone();
    bad["spec"]["size"] = json!("three");
    let refusal = catalog.refusal(&bad, Completeness::Whole).unwrap();
    assert_eq!(refusal.code, 422);
    assert_eq!(
        refusal.message(),
        "Widget.example.com \"w1\" is invalid: spec.size: Invalid value: \"string\": spec.size in body must be of type integer: \"string\""
    );
}

//! The strict fake API server (`kube_fake`, on `kube_syntax`'s rules) against a real one: a
//! corpus of requests a real kube-apiserver refuses — invalid names, label keys and values,
//! label and field selectors, violations of our CRDs' schemas, writes RBAC does not allow,
//! conflicts, objects and types that are not there — each sent as the same HTTP request
//! (method, path, query, content type, body, bearer token) to a real API server and to a
//! [`kube_fake::http::ApiServer`] seeded with the same objects, read back from the real one.
//! The status code and the `Status`'s `reason` and `message` must be the same, and its
//! `details` where both give them; a body that is not a `Status` (the plain-text 404 of a path
//! nothing is served at) must be the same text.
//!
//! The fake answers as the newest supported release does ([`NEWEST`]). Where an older release
//! answers differently, [`older_answer`] gives that release's exact answer, which the test then
//! requires of it.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use anyhow::Context;
use http::header::CONTENT_TYPE;
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{Namespace, ServiceAccount};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use kube::config::{AuthInfo, KubeConfigOptions, Kubeconfig};
use serde_json::{Value, json};

use crate::{MANAGER, Target, local, wait_for};

/// The release whose answers the fake gives.
pub const NEWEST: local::Release = local::Release { minor: 37 };

/// The ServiceAccount RBAC grants nothing, whose token the forbidden requests bear.
pub const NOBODY: &str = "nobody";

/// Where a request of the corpus is sent from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum As {
    /// The admin (group `system:masters`; the fake's requests without a token).
    Admin,
    /// ServiceAccount [`NOBODY`] of the test namespace, with its token.
    Nobody,
}

/// One request of the corpus.
#[derive(Debug, Clone)]
pub struct Probe {
    /// What it is, for the output (unique in the corpus).
    pub name: String,
    /// `GET`, `POST`, ...
    pub method: &'static str,
    /// The URL path.
    pub path: String,
    /// The query, percent-encoded as sent.
    pub query: String,
    /// The `Content-Type` (empty without a body).
    pub content_type: &'static str,
    /// The body (JSON; an apply's JSON is YAML too).
    pub body: Option<Value>,
    /// Whose credentials.
    pub who: As,
}

impl Probe {
    /// `METHOD path?query`, as a line.
    pub fn line(&self) -> String {
        if self.query.is_empty() {
            format!("{} {}", self.method, self.path)
        } else {
            format!("{} {}?{}", self.method, self.path, self.query)
        }
    }
}

/// A query string from `pairs`, each key and value percent-encoded (everything but the
/// unreserved characters of RFC 3986).
pub fn query(pairs: &[(&str, &str)]) -> String {
    let encode = |text: &str| {
        let mut out = String::new();
        for byte in text.bytes() {
            if byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'_' | b'.' | b'~') {
                out.push(char::from(byte));
            } else {
                let _ = write!(out, "%{byte:02X}");
            }
        }
        out
    };
    pairs
        .iter()
        .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
        .collect::<Vec<_>>()
        .join("&")
}

/// The objects the corpus needs in the namespace before it runs (besides the namespace and
/// the ServiceAccount [`NOBODY`]), and what the corpus refers to.
#[derive(Debug, Clone)]
pub struct Seeded {
    /// The test namespace.
    pub namespace: String,
    /// A resource version of ConfigMap `settings` that is no longer its own.
    pub stale_config_map: String,
    /// A resource version of ServiceExport `web` that is no longer its own.
    pub stale_export: String,
    /// The resource version of ServiceExport `web`.
    pub export_version: String,
    /// The name of the ExportRecord that exists.
    pub record: String,
}

const SERVICE_EXPORTS: &str = "/apis/multicluster.x-k8s.io/v1beta1";
const SERVICE_IMPORTS: &str = "/apis/multicluster.x-k8s.io/v1beta1";
const RECORDS: &str = "/apis/clusterset.io/v1alpha1";

fn config_map(name: &str, labels: Value) -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
           "metadata": {"name": name, "labels": labels}, "data": {"a": "1"}})
}

fn service(name: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
           "spec": {"ports": [{"name": "http", "port": 80}]}})
}

fn service_export(name: &str) -> Value {
    json!({"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
           "metadata": {"name": name}})
}

fn service_import(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
           "metadata": {"name": name}, "spec": spec})
}

fn record(name: &str, namespace: &str, spec: Value) -> Value {
    json!({"apiVersion": "clusterset.io/v1alpha1", "kind": "ExportRecord",
           "metadata": {"name": name, "namespace": namespace}, "spec": spec})
}

fn lease(name: &str) -> Value {
    json!({"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": {"name": name},
           "spec": {"holderIdentity": "someone", "leaseDurationSeconds": 10}})
}

fn record_spec(namespace: &str) -> Value {
    json!({"clusterId": "east", "serviceKey": {"namespace": namespace, "name": "web"},
           "exportCreated": "2026-01-02T03:04:05Z", "service": {"type": "ClusterSetIP"}})
}

/// The corpus, in the namespace of `seeded`.
pub fn corpus(seeded: &Seeded) -> Vec<Probe> {
    let ns = seeded.namespace.as_str();
    let core = format!("/api/v1/namespaces/{ns}");
    let exports = format!("{SERVICE_EXPORTS}/namespaces/{ns}/serviceexports");
    let imports = format!("{SERVICE_IMPORTS}/namespaces/{ns}/serviceimports");
    let records = format!("{RECORDS}/namespaces/{ns}/exportrecords");
    let manager = query(&[("fieldManager", MANAGER)]);
    let mut probes = Vec::new();
    // `APPLY` is a PATCH with the content type of a server-side apply, `MERGE` one of a JSON
    // merge patch.
    let mut add = |name: &str,
                   method: &'static str,
                   path: String,
                   query: String,
                   body: Option<Value>,
                   who: As| {
        let (method, content_type) = match (method, &body) {
            ("APPLY", _) => ("PATCH", APPLY),
            ("MERGE", _) => ("PATCH", "application/merge-patch+json"),
            (method, None) => (method, ""),
            (method, Some(_)) => (method, "application/json"),
        };
        probes.push(Probe {
            name: name.to_owned(),
            method,
            path,
            query,
            content_type,
            body,
            who,
        });
    };
    let admin = As::Admin;
    let nobody = As::Nobody;
    let post = |path: &str, body: Value| (path.to_owned(), Some(body));

    // Object names.
    let (path, body) = post(
        &format!("{core}/configmaps"),
        config_map("Bad_Name", json!({})),
    );
    add(
        "ConfigMap name with _ and capitals",
        "POST",
        path,
        String::new(),
        body,
        admin,
    );
    let (path, body) = post(
        &format!("{core}/configmaps"),
        config_map(&"a".repeat(254), json!({})),
    );
    add(
        "ConfigMap name of 254 characters",
        "POST",
        path,
        String::new(),
        body,
        admin,
    );
    let (path, body) = post(&format!("{core}/services"), service("1web"));
    add(
        "Service name starting with a digit",
        "POST",
        path,
        String::new(),
        body,
        admin,
    );
    let (path, body) = post(&format!("{core}/services"), service("web.v2"));
    add(
        "Service name with a dot",
        "POST",
        path,
        String::new(),
        body,
        admin,
    );
    let (path, body) = post(
        "/api/v1/namespaces",
        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "Bad.NS"}}),
    );
    add(
        "Namespace name with capitals and a dot",
        "POST",
        path,
        String::new(),
        body,
        admin,
    );
    let (path, body) = post(&exports, service_export("Web"));
    add(
        "ServiceExport name with a capital",
        "POST",
        path,
        String::new(),
        body,
        admin,
    );
    let (path, body) = post(
        &records,
        json!({"apiVersion": "clusterset.io/v1alpha1",
        "kind": "ExportRecord", "metadata": {}, "spec": record_spec(ns)}),
    );
    add(
        "ExportRecord without a name",
        "POST",
        path,
        String::new(),
        body,
        admin,
    );
    // (A bad generateName is not in the corpus: the refusal names the generated name, which a
    // real server makes at random.)

    // Label keys and values, annotation keys.
    let labelled = |labels: Value| config_map("labelled", labels);
    for (name, labels) in [
        ("label key with a space", json!({"bad key": "x"})),
        ("label key with an empty name", json!({"example.com/": "x"})),
        (
            "label key with a capital in its prefix",
            json!({"Example.com/app": "x"}),
        ),
        (
            "label key prefix of 254 characters",
            json!({format!("{}/app", "a".repeat(254)): "x"}),
        ),
        (
            "label value with a /",
            json!({"endpointslice.kubernetes.io/managed-by": "clusterset.io/mcs-controller"}),
        ),
        (
            "label value of 64 characters",
            json!({"app": "a".repeat(64)}),
        ),
        ("label value starting with -", json!({"app": "-web"})),
    ] {
        add(
            name,
            "POST",
            format!("{core}/configmaps"),
            String::new(),
            Some(labelled(labels)),
            admin,
        );
    }
    let mut annotated = service_export("annotated");
    annotated["metadata"]["annotations"] = json!({"bad key": "x"});
    add(
        "ServiceExport annotation key with a space",
        "POST",
        exports.clone(),
        String::new(),
        Some(annotated),
        admin,
    );
    let mut labelled_import = service_import(
        "labelled",
        json!({"type": "ClusterSetIP", "ports": [{"port": 80}]}),
    );
    labelled_import["metadata"]["labels"] = json!({"app": "-web"});
    add(
        "ServiceImport label value starting with -",
        "POST",
        imports.clone(),
        String::new(),
        Some(labelled_import),
        admin,
    );

    // Label selectors and field selectors of lists.
    for (name, path, selector) in [
        (
            "label selector value with a /",
            format!("{core}/services"),
            "endpointslice.kubernetes.io/managed-by=clusterset.io/mcs-controller",
        ),
        (
            "label selector with an unclosed set",
            format!("{core}/configmaps"),
            "app in (a",
        ),
        (
            "label selector key with a space",
            format!("{core}/configmaps"),
            "bad key=x",
        ),
        (
            "label selector value starting with -",
            format!("{core}/services"),
            "app=-bad",
        ),
        (
            "label selector > with a word",
            format!("{core}/configmaps"),
            "replicas>a",
        ),
        (
            "label selector key with a capital in its prefix",
            exports.clone(),
            "Example.com/app=x",
        ),
        (
            "label selector of all namespaces with an empty key",
            "/api/v1/services".to_owned(),
            "=x",
        ),
        (
            "label selector set without values",
            format!("{core}/configmaps"),
            "app in ()",
        ),
    ] {
        add(
            name,
            "GET",
            path,
            query(&[("labelSelector", selector)]),
            None,
            admin,
        );
    }
    for (name, path, selector) in [
        (
            "field selector on a Service field",
            format!("{core}/services"),
            "spec.type=ClusterIP",
        ),
        (
            "field selector on a custom resource's spec",
            exports.clone(),
            "spec.x=y",
        ),
        (
            "field selector without an operator",
            format!("{core}/configmaps"),
            "metadata.name",
        ),
        (
            "field selector on a ConfigMap's data",
            format!("{core}/configmaps"),
            "data.a=1",
        ),
    ] {
        add(
            name,
            "GET",
            path,
            query(&[("fieldSelector", selector)]),
            None,
            admin,
        );
    }

    // Our CRDs' schemas.
    let ports = json!([{"port": 80}]);
    for (name, spec) in [
        (
            "ServiceImport type not in the enum",
            json!({"type": "Bogus", "ports": ports}),
        ),
        (
            "ServiceImport without the required ports",
            json!({"type": "ClusterSetIP"}),
        ),
        (
            "ServiceImport port as a string",
            json!({"type": "ClusterSetIP", "ports": [{"port": "eighty"}]}),
        ),
        (
            "ServiceImport with three IPs",
            json!({"type": "ClusterSetIP", "ports": ports,
            "ips": ["243.1.0.1", "243.1.0.2", "243.1.0.3"]}),
        ),
        (
            "ServiceImport int32 out of range",
            json!({"type": "ClusterSetIP", "ports": ports,
            "sessionAffinityConfig": {"clientIP": {"timeoutSeconds": 3_000_000_000_u64}}}),
        ),
        ("ServiceImport without type and ports", json!({})),
    ] {
        add(
            name,
            "POST",
            imports.clone(),
            String::new(),
            Some(service_import("schema", spec)),
            admin,
        );
    }
    let mut spec = record_spec(ns);
    spec["clusterId"] = json!("East!");
    add(
        "ExportRecord clusterId against its pattern",
        "POST",
        records.clone(),
        String::new(),
        Some(record("east.schema.a", ns, spec)),
        admin,
    );
    let mut spec = record_spec(ns);
    spec["clusterId"] = json!("a".repeat(64));
    add(
        "ExportRecord clusterId over its maxLength",
        "POST",
        records.clone(),
        String::new(),
        Some(record("east.schema.b", ns, spec)),
        admin,
    );
    let mut no_spec = record("east.schema.c", ns, json!({}));
    if let Some(object) = no_spec.as_object_mut() {
        object.remove("spec");
    }
    add(
        "ExportRecord without its spec",
        "POST",
        records.clone(),
        String::new(),
        Some(no_spec),
        admin,
    );
    let mut spec = record_spec(ns);
    spec["exportCreated"] = json!("yesterday");
    add(
        "ExportRecord exportCreated not a date-time",
        "POST",
        records.clone(),
        String::new(),
        Some(record("east.schema.d", ns, spec)),
        admin,
    );
    add(
        "ExportRecord spec missing service and serviceKey.name",
        "POST",
        records.clone(),
        String::new(),
        Some(record(
            "east.schema.e",
            ns,
            json!({"clusterId": "east",
            "serviceKey": {"namespace": ns}, "exportCreated": "2026-01-02T03:04:05Z"}),
        )),
        admin,
    );
    let mut spec = record_spec(ns);
    spec["exportedLabels"] = json!({"a": 1});
    add(
        "ExportRecord exportedLabels value not a string",
        "POST",
        records.clone(),
        String::new(),
        Some(record("east.schema.f", ns, spec)),
        admin,
    );
    let mut unknown = service_export("unknown");
    unknown["spec"] = json!({"x": 1});
    add(
        "ServiceExport undeclared field, fieldValidation=Strict",
        "POST",
        exports.clone(),
        query(&[("fieldValidation", "Strict")]),
        Some(unknown.clone()),
        admin,
    );
    add(
        "ServiceExport undeclared field, server-side apply",
        "APPLY",
        format!("{exports}/unknown"),
        manager.clone(),
        Some(unknown),
        admin,
    );
    let mut status = service_export("web");
    status["status"] = json!({"conditions": [{"type": "Valid", "status": "Maybe", "reason": "Exported",
        "message": "", "lastTransitionTime": "2026-01-02T03:04:05Z"}]});
    add(
        "ServiceExport status without a resourceVersion",
        "PUT",
        format!("{exports}/web/status"),
        String::new(),
        Some(status.clone()),
        admin,
    );
    let mut current = status.clone();
    current["metadata"]["resourceVersion"] = json!(seeded.export_version);
    add(
        "ServiceExport status condition status not in the enum",
        "PUT",
        format!("{exports}/web/status"),
        String::new(),
        Some(current),
        admin,
    );
    add(
        "ServiceImport type as a number",
        "POST",
        imports.clone(),
        String::new(),
        Some(service_import("schema", json!({"type": 5, "ports": ports}))),
        admin,
    );
    let mut spec = record_spec(ns);
    spec["clusterId"] = json!("A".repeat(64));
    add(
        "ExportRecord clusterId over its maxLength and against its pattern",
        "POST",
        records.clone(),
        String::new(),
        Some(record("east.schema.g", ns, spec)),
        admin,
    );

    // Writes RBAC does not allow, and reads.
    add(
        "list Services without RBAC",
        "GET",
        format!("{core}/services"),
        String::new(),
        None,
        nobody,
    );
    add(
        "watch Services without RBAC",
        "GET",
        format!("{core}/services"),
        query(&[("watch", "true")]),
        None,
        nobody,
    );
    add(
        "create a ConfigMap without RBAC",
        "POST",
        format!("{core}/configmaps"),
        String::new(),
        Some(config_map("denied", json!({}))),
        nobody,
    );
    add(
        "delete a Service without RBAC",
        "DELETE",
        format!("{core}/services/web"),
        String::new(),
        None,
        nobody,
    );
    add(
        "apply a ServiceExport without RBAC",
        "APPLY",
        format!("{exports}/web"),
        manager.clone(),
        Some(service_export("web")),
        nobody,
    );
    add(
        "get an ExportRecord without RBAC",
        "GET",
        format!("{records}/{}", seeded.record),
        String::new(),
        None,
        nobody,
    );
    add(
        "list Namespaces without RBAC",
        "GET",
        "/api/v1/namespaces".to_owned(),
        String::new(),
        None,
        nobody,
    );
    add(
        "get the Namespace without RBAC",
        "GET",
        core.clone(),
        String::new(),
        None,
        nobody,
    );
    add(
        "update a ServiceExport's status without RBAC",
        "PUT",
        format!("{exports}/web/status"),
        String::new(),
        Some(status),
        nobody,
    );

    // Conflicts.
    add(
        "create the Service that exists",
        "POST",
        format!("{core}/services"),
        String::new(),
        Some(service("web")),
        admin,
    );
    add(
        "create the ExportRecord that exists",
        "POST",
        records.clone(),
        String::new(),
        Some(record(&seeded.record, ns, record_spec(ns))),
        admin,
    );
    add(
        "create the Namespace that exists",
        "POST",
        "/api/v1/namespaces".to_owned(),
        String::new(),
        Some(json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}})),
        admin,
    );
    let mut stale = config_map("settings", json!({}));
    stale["metadata"]["resourceVersion"] = json!(seeded.stale_config_map);
    add(
        "update a ConfigMap with a stale resourceVersion",
        "PUT",
        format!("{core}/configmaps/settings"),
        String::new(),
        Some(stale.clone()),
        admin,
    );
    stale["metadata"]["labels"] = json!({"app": "-web"});
    add(
        "update a ConfigMap with a stale resourceVersion and a bad label",
        "PUT",
        format!("{core}/configmaps/settings"),
        String::new(),
        Some(stale),
        admin,
    );
    let mut stale = service_export("web");
    stale["metadata"]["resourceVersion"] = json!(seeded.stale_export);
    add(
        "update a ServiceExport with a stale resourceVersion",
        "PUT",
        format!("{exports}/web"),
        String::new(),
        Some(stale),
        admin,
    );
    add(
        "create the ConfigMap that exists with a bad label",
        "POST",
        format!("{core}/configmaps"),
        String::new(),
        Some(config_map("settings", json!({"app": "-web"}))),
        admin,
    );
    add(
        "update a ServiceExport without a resourceVersion",
        "PUT",
        format!("{exports}/web"),
        String::new(),
        Some(service_export("web")),
        admin,
    );
    add(
        "update a Lease without a resourceVersion",
        "PUT",
        format!("/apis/coordination.k8s.io/v1/namespaces/{ns}/leases/holder"),
        String::new(),
        Some(lease("holder")),
        admin,
    );
    add(
        "update a ConfigMap without a resourceVersion",
        "PUT",
        format!("{core}/configmaps/settings"),
        String::new(),
        Some(config_map("settings", json!({"app": "web"}))),
        admin,
    );

    // Not found.
    add(
        "get a Service that is not there",
        "GET",
        format!("{core}/services/missing"),
        String::new(),
        None,
        admin,
    );
    add(
        "get a ServiceExport that is not there",
        "GET",
        format!("{exports}/missing"),
        String::new(),
        None,
        admin,
    );
    add(
        "get an ExportRecord that is not there",
        "GET",
        format!("{records}/missing"),
        String::new(),
        None,
        admin,
    );
    add(
        "delete a ConfigMap that is not there",
        "DELETE",
        format!("{core}/configmaps/missing"),
        String::new(),
        None,
        admin,
    );
    add(
        "update a ConfigMap that is not there",
        "PUT",
        format!("{core}/configmaps/missing"),
        String::new(),
        Some(config_map("missing", json!({}))),
        admin,
    );
    add(
        "merge-patch a ConfigMap that is not there",
        "MERGE",
        format!("{core}/configmaps/missing"),
        String::new(),
        Some(json!({"data": {"a": "2"}})),
        admin,
    );
    add(
        "create a ConfigMap in a namespace that is not there",
        "POST",
        format!("/api/v1/namespaces/{ns}-missing/configmaps"),
        String::new(),
        Some(config_map("orphan", json!({}))),
        admin,
    );
    add(
        "get a Namespace that is not there",
        "GET",
        format!("/api/v1/namespaces/{ns}-missing"),
        String::new(),
        None,
        admin,
    );
    add(
        "list a type no server serves",
        "GET",
        format!("/apis/nothing.example.com/v1/namespaces/{ns}/things"),
        String::new(),
        None,
        admin,
    );
    add(
        "list a core type that does not exist",
        "GET",
        format!("{core}/things"),
        String::new(),
        None,
        admin,
    );
    add(
        "list a type of the apps group that does not exist",
        "GET",
        format!("/apis/apps/v1/namespaces/{ns}/things"),
        String::new(),
        None,
        admin,
    );
    add(
        "list a type of an installed group that does not exist",
        "GET",
        format!("{SERVICE_EXPORTS}/namespaces/{ns}/things"),
        String::new(),
        None,
        admin,
    );
    add(
        "create a type no server serves",
        "POST",
        format!("/apis/nothing.example.com/v1/namespaces/{ns}/things"),
        String::new(),
        Some(
            json!({"apiVersion": "nothing.example.com/v1", "kind": "Thing",
            "metadata": {"name": "thing"}}),
        ),
        admin,
    );

    // Bodies against their URL, and options.
    add(
        "update a ConfigMap with another name in the body",
        "PUT",
        format!("{core}/configmaps/settings"),
        String::new(),
        Some(config_map("other", json!({}))),
        admin,
    );
    let mut elsewhere = config_map("elsewhere", json!({}));
    elsewhere["metadata"]["namespace"] = json!("default");
    add(
        "create a ConfigMap with another namespace in the body",
        "POST",
        format!("{core}/configmaps"),
        String::new(),
        Some(elsewhere),
        admin,
    );
    add(
        "create a ConfigMap whose body is a Secret",
        "POST",
        format!("{core}/configmaps"),
        String::new(),
        Some(json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "secret"}})),
        admin,
    );
    add(
        "create a ConfigMap whose body is apps/v1",
        "POST",
        format!("{core}/configmaps"),
        String::new(),
        Some(json!({"apiVersion": "apps/v1", "kind": "ConfigMap", "metadata": {"name": "apps"}})),
        admin,
    );
    add(
        "create a ConfigMap whose body is of a kind no scheme has",
        "POST",
        format!("{core}/configmaps"),
        String::new(),
        Some(json!({"apiVersion": "v1", "kind": "Bogus", "metadata": {"name": "bogus"}})),
        admin,
    );
    add(
        "create a Deployment whose body is apps/v1beta1",
        "POST",
        format!("/apis/apps/v1/namespaces/{ns}/deployments"),
        String::new(),
        Some(
            json!({"apiVersion": "apps/v1beta1", "kind": "Deployment", "metadata": {"name": "old"}}),
        ),
        admin,
    );
    add(
        "create a ServiceExport whose body is a ServiceImport",
        "POST",
        exports.clone(),
        String::new(),
        Some(service_import(
            "imported",
            json!({"type": "ClusterSetIP", "ports": ports}),
        )),
        admin,
    );
    let mut other_group = service_export("elsewhere");
    other_group["apiVersion"] = json!("other.example.com/v1");
    add(
        "create a ServiceExport whose body is of another group",
        "POST",
        exports.clone(),
        String::new(),
        Some(other_group.clone()),
        admin,
    );
    let mut alpha = service_export("alpha");
    alpha["apiVersion"] = json!("multicluster.x-k8s.io/v1alpha1");
    add(
        "create a ServiceExport whose body is v1alpha1",
        "POST",
        exports.clone(),
        String::new(),
        Some(alpha),
        admin,
    );
    add(
        "apply a ServiceExport whose body is a ServiceImport",
        "APPLY",
        format!("{exports}/imported"),
        manager.clone(),
        Some(service_import(
            "imported",
            json!({"type": "ClusterSetIP", "ports": ports}),
        )),
        admin,
    );
    let mut versionless = service_export("web");
    if let Some(object) = versionless.as_object_mut() {
        object.remove("apiVersion");
    }
    add(
        "apply without an apiVersion",
        "APPLY",
        format!("{exports}/web"),
        manager.clone(),
        Some(versionless),
        admin,
    );
    add(
        "apply without a fieldManager",
        "APPLY",
        format!("{exports}/web"),
        query(&[("force", "true")]),
        Some(service_export("web")),
        admin,
    );
    add(
        "create with fieldValidation=Bogus",
        "POST",
        format!("{core}/configmaps"),
        query(&[("fieldValidation", "Bogus")]),
        Some(config_map("bogus", json!({}))),
        admin,
    );
    add(
        "create with a fieldManager of 129 characters",
        "POST",
        records.clone(),
        query(&[("fieldManager", &"m".repeat(129))]),
        Some(record("east.manager.a", ns, record_spec(ns))),
        admin,
    );
    let mut kindless = service_export("web");
    if let Some(object) = kindless.as_object_mut() {
        object.remove("kind");
    }
    add(
        "apply without a kind",
        "APPLY",
        format!("{exports}/web"),
        manager.clone(),
        Some(kindless),
        admin,
    );
    add(
        "apply with force=maybe",
        "APPLY",
        format!("{exports}/web"),
        query(&[("fieldManager", MANAGER), ("force", "maybe")]),
        Some(service_export("web")),
        admin,
    );
    probes
}

/// The content type of a server-side apply.
pub const APPLY: &str = "application/apply-patch+yaml";

/// What a server answered a request.
#[derive(Debug, Clone, PartialEq)]
pub struct Reply {
    /// The status code.
    pub code: u16,
    /// The body: a JSON value (a `Status`, an object, a list) or the text as a JSON string.
    pub body: Value,
}

impl Reply {
    fn status(&self) -> Option<&Value> {
        (self.body["kind"] == "Status").then_some(&self.body)
    }

    /// This answer with `namespace` written as `<namespace>` wherever it appears.
    pub fn without(&self, namespace: &str) -> Reply {
        let text = self.body.to_string().replace(namespace, "<namespace>");
        Reply {
            code: self.code,
            body: serde_json::from_str(&text).unwrap_or(Value::String(text)),
        }
    }

    /// `code reason: message` (or `code <body>`), as a line.
    pub fn line(&self) -> String {
        match self.status() {
            Some(status) => format!(
                "{} {}: {}",
                self.code,
                status["reason"].as_str().unwrap_or(""),
                status["message"].as_str().unwrap_or("")
            ),
            None => {
                let text = match &self.body {
                    Value::String(text) => text.trim_end().to_owned(),
                    other => {
                        let mut summary = other.to_string();
                        summary.truncate(160);
                        summary
                    }
                };
                format!("{} {text}", self.code)
            }
        }
    }

    /// The differences from `other` (empty when they answer alike): the code, and for two
    /// `Status` bodies their `status`, `reason`, `message` and `details` (one without `details`
    /// differs from one with); for other bodies the text (objects are not compared: an accepted
    /// write is a difference of code already).
    pub fn differences(&self, other: &Reply) -> Vec<String> {
        let mut found = Vec::new();
        if self.code != other.code {
            found.push(format!("code {} != {}", self.code, other.code));
        }
        match (self.status(), other.status()) {
            (Some(a), Some(b)) => {
                for key in ["status", "reason", "message", "details"] {
                    if a.get(key) != b.get(key) {
                        let shown =
                            |v: Option<&Value>| v.map_or("(none)".to_owned(), Value::to_string);
                        found.push(format!(
                            "{key}\n      {}\n   != {}",
                            shown(a.get(key)),
                            shown(b.get(key))
                        ));
                    }
                }
            }
            (None, None) if self.body.is_string() || other.body.is_string() => {
                if self.body != other.body {
                    found.push(format!("body {} != {}", self.body, other.body));
                }
            }
            (None, None) => {}
            _ => found.push(format!("body {} != {}", self.body, other.body)),
        }
        found
    }
}

/// Sends `probe` with `client` (its credentials), once; the answer whatever its code.
pub async fn send(client: &kube::Client, probe: &Probe) -> anyhow::Result<Reply> {
    let uri = if probe.query.is_empty() {
        probe.path.clone()
    } else {
        format!("{}?{}", probe.path, probe.query)
    };
    let mut request = http::Request::builder().method(probe.method).uri(uri);
    if !probe.content_type.is_empty() {
        request = request.header(CONTENT_TYPE, probe.content_type);
    }
    let body = match &probe.body {
        Some(body) => serde_json::to_vec(body)?,
        None => Vec::new(),
    };
    let response = client
        .send(request.body(kube::client::Body::from(body))?)
        .await
        .with_context(|| format!("cannot send {}", probe.line()))?;
    let code = response.status().as_u16();
    let bytes = response.into_body().collect_bytes().await?;
    let body = serde_json::from_slice(&bytes)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()));
    Ok(Reply { code, body })
}

/// What Kubernetes 1.35 answers where 1.37 (and the fake) answers otherwise.
const OLDER: [(u8, &str); 3] = [
    // RelaxedServiceNameValidation (beta and on in 1.36, GA in 1.37): 1.35 still holds Service
    // names to DNS-1035 labels.
    (35, "Service name starting with a digit"),
    (35, "Service name with a dot"),
    // 1.35's kube-openapi does not check that an integer fits its `int32` format: it stores
    // 3000000000.
    (35, "ServiceImport int32 out of range"),
];

/// An older release's own answer to request `probe` of the corpus where it differs from the
/// newest's (which the fake gives), or `None` where it answers as the newest does. A refusal is
/// the whole `Status`; an accepted write is its code (the object is not compared).
pub fn older_answer(release: local::Release, probe: &Probe) -> Option<Reply> {
    if !OLDER.contains(&(release.minor, probe.name.as_str())) {
        return None;
    }
    if probe.name == "ServiceImport int32 out of range" {
        return Some(Reply {
            code: 201,
            body: json!({}),
        });
    }
    let name = probe.body.as_ref()?.pointer("/metadata/name")?.as_str()?;
    let errors: Vec<kube_syntax::FieldError> = kube_syntax::names::dns1035_label_problems(name)
        .into_iter()
        .map(|problem| kube_syntax::FieldError::invalid("metadata.name", name, problem))
        .collect();
    let refusal = kube_syntax::status::invalid("", "Service", name, &errors);
    Some(Reply {
        code: refusal.code,
        body: refusal.body,
    })
}

/// A client of `config` (the probes' clients never retry: each request is sent once).
fn client(mut config: kube::Config, token: Option<&str>) -> anyhow::Result<kube::Client> {
    config.default_retry = false;
    if let Some(token) = token {
        config.auth_info = AuthInfo {
            token: Some(token.to_owned().into()),
            ..AuthInfo::default()
        };
    }
    Ok(kube::Client::try_from(config)?)
}

/// The admin's configuration for east of `target` (the suite's own cluster, started on first
/// use, or the user's context), and the release it runs (`None` for a user's cluster of a
/// release the suite does not pin).
async fn east_config(target: &Target) -> anyhow::Result<(kube::Config, Option<local::Release>)> {
    match target {
        Target::Local(release) => {
            let pair = local::clusters(*release).await?;
            let kubeconfig = Kubeconfig::read_from(&pair.east.kubeconfig)?;
            let config =
                kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default())
                    .await?;
            Ok((config, Some(*release)))
        }
        Target::Contexts { east, .. } => {
            // As `Cluster::connect` reaches it.
            let cluster = crate::Cluster::connect("east", east).await?;
            let options = KubeConfigOptions {
                context: Some(east.clone()),
                ..Default::default()
            };
            let config =
                kube::Config::from_custom_kubeconfig(Kubeconfig::read()?, &options).await?;
            let version = cluster.client.apiserver_version().await?;
            let release = version
                .minor
                .trim_end_matches('+')
                .parse()
                .ok()
                .map(|minor| local::Release { minor })
                .filter(|r| local::Release::SUPPORTED.contains(r));
            Ok((config, release))
        }
    }
}

/// Installs the CRDs the corpus needs (server-side apply, forced, as the harness installs
/// them) and waits until they are served.
async fn install_crds(client: &kube::Client) -> anyhow::Result<Vec<Value>> {
    let crds: Vec<CustomResourceDefinition> = mcs_types::crd::mcs_crds()?
        .into_iter()
        .chain(mcs_controller::crd::broker_crds()?)
        .collect();
    let api: Api<CustomResourceDefinition> = Api::all(client.clone());
    let mut installed = Vec::new();
    for crd in crds {
        let name = crd.metadata.name.clone().context("a CRD without a name")?;
        api.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&crd),
        )
        .await
        .with_context(|| format!("cannot apply the CRD {name}"))?;
        installed.push(serde_json::to_value(&crd)?);
    }
    for path in [
        format!("{SERVICE_EXPORTS}/serviceexports"),
        format!("{SERVICE_IMPORTS}/serviceimports"),
        format!("{RECORDS}/exportrecords"),
    ] {
        wait_for(
            &format!("{path} to be served"),
            std::time::Duration::from_secs(60),
            || {
                let (client, path) = (client.clone(), path.clone());
                async move {
                    let request = http::Request::get(format!("{path}?limit=1")).body(Vec::new())?;
                    Ok(client.request_text(request).await.ok().map(|_| ()))
                }
            },
        )
        .await?;
    }
    Ok(installed)
}

/// `POST` (or `PUT` with `name`) of `object` at `path` by the admin; the stored object.
async fn write(
    client: &kube::Client,
    method: &str,
    path: &str,
    object: &Value,
) -> anyhow::Result<Value> {
    let request = http::Request::builder()
        .method(method)
        .uri(format!("{path}?fieldManager={MANAGER}"))
        .header(CONTENT_TYPE, "application/json")
        .body(serde_json::to_vec(object)?)?;
    let text = client
        .request_text(request)
        .await
        .with_context(|| format!("cannot {method} {path}"))?;
    Ok(serde_json::from_str(&text)?)
}

/// `GET path` by the admin.
async fn read(client: &kube::Client, path: &str) -> anyhow::Result<Value> {
    let request = http::Request::get(path).body(Vec::new())?;
    Ok(serde_json::from_str(&client.request_text(request).await?)?)
}

/// The namespace, the ServiceAccount [`NOBODY`] (and a token of it), and the objects the corpus
/// refers to, made in the real server; the objects as it stores them, for the fake.
async fn seed(
    client: &kube::Client,
    namespace: &str,
) -> anyhow::Result<(Seeded, String, Vec<Value>)> {
    let core = format!("/api/v1/namespaces/{namespace}");
    let mut objects = vec![
        write(
            client,
            "POST",
            "/api/v1/namespaces",
            &json!({"apiVersion": "v1", "kind": "Namespace",
            "metadata": {"name": namespace}}),
        )
        .await?,
    ];
    let account = write(
        client,
        "POST",
        &format!("{core}/serviceaccounts"),
        &json!({
        "apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": NOBODY}}),
    )
    .await?;
    objects.push(account);
    let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), namespace);
    let issued = accounts
        .create_token_request(
            NOBODY,
            &PostParams::default(),
            &TokenRequest {
                spec: TokenRequestSpec {
                    audiences: Vec::new(),
                    expiration_seconds: Some(3600),
                    ..Default::default()
                },
                ..Default::default()
            },
        )
        .await
        .context("cannot get a token of ServiceAccount nobody")?;
    let token = issued
        .status
        .context("a TokenRequest without a token")?
        .token;
    objects.push(write(client, "POST", &format!("{core}/services"), &service("web")).await?);
    // ConfigMap settings and ServiceExport web are changed once after their creation: the
    // resource versions they were created with are stale.
    let created = write(
        client,
        "POST",
        &format!("{core}/configmaps"),
        &config_map("settings", json!({})),
    )
    .await?;
    let stale_config_map = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let mut changed = created.clone();
    changed["data"] = json!({"a": "2"});
    objects.push(
        write(
            client,
            "PUT",
            &format!("{core}/configmaps/settings"),
            &changed,
        )
        .await?,
    );
    let exports = format!("{SERVICE_EXPORTS}/namespaces/{namespace}/serviceexports");
    let created = write(client, "POST", &exports, &service_export("web")).await?;
    let stale_export = created["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    let mut changed = created.clone();
    changed["metadata"]["labels"] = json!({"app": "web"});
    let export = write(client, "PUT", &format!("{exports}/web"), &changed).await?;
    let export_version = export["metadata"]["resourceVersion"]
        .as_str()
        .unwrap_or("")
        .to_owned();
    objects.push(export);
    let leases = format!("/apis/coordination.k8s.io/v1/namespaces/{namespace}/leases");
    objects.push(write(client, "POST", &leases, &lease("holder")).await?);
    let name = format!("east.{namespace}.web");
    let records = format!("{RECORDS}/namespaces/{namespace}/exportrecords");
    objects.push(
        write(
            client,
            "POST",
            &records,
            &record(&name, namespace, record_spec(namespace)),
        )
        .await?,
    );
    // The namespace as it is now (its status, after the ServiceAccount controller's work).
    objects[0] = read(client, &core).await?;
    Ok((
        Seeded {
            namespace: namespace.to_owned(),
            stale_config_map,
            stale_export,
            export_version,
            record: name,
        },
        token,
        objects,
    ))
}

/// One request's answers from both servers.
#[derive(Debug, Clone)]
pub struct Compared {
    /// The request.
    pub probe: Probe,
    /// The real server's answer.
    pub real: Reply,
    /// The fake's answer.
    pub fake: Reply,
    /// The test namespace the request was sent in.
    pub namespace: String,
}

/// Runs the corpus on east of `target` and on a fake seeded alike; prints a line per request
/// (both answers); the answers, and the release east runs.
pub async fn compare(target: &Target) -> anyhow::Result<(Vec<Compared>, Option<local::Release>)> {
    let (config, release) = east_config(target).await?;
    let admin = client(config.clone(), None)?;
    let crds = install_crds(&admin).await?;
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    let namespace = format!("e2e-strictness-{seconds}");
    let outcome = compare_in(&admin, config, &crds, &namespace).await;
    let namespaces: Api<Namespace> = Api::all(admin.clone());
    if std::env::var("CLUSTERSET_E2E_KEEP_NAMESPACES").is_ok_and(|v| v == "true") {
        println!("kept the namespace {namespace}");
    } else if let Err(error) = namespaces
        .delete(&namespace, &DeleteParams::default())
        .await
    {
        eprintln!("cannot delete the namespace {namespace}: {error}");
    }
    Ok((outcome?, release))
}

async fn compare_in(
    admin: &kube::Client,
    config: kube::Config,
    crds: &[Value],
    namespace: &str,
) -> anyhow::Result<Vec<Compared>> {
    let (seeded, token, objects) = seed(admin, namespace).await?;
    let nobody = client(config, Some(&token))?;
    let user = format!("system:serviceaccount:{namespace}:{NOBODY}");
    let mut api = kube_fake::FakeApi::with_crds(mcs_ceph_api::member_crds()?, objects)
        .user_without_rbac(&token, &user);
    for crd in crds {
        api = api.with_crd(crd);
    }
    let fake = kube_fake::http::ApiServer::start(api);
    let fake_config = kube::Config::new(fake.url.parse()?);
    let (fake_admin, fake_nobody) = (
        client(fake_config.clone(), None)?,
        client(fake_config, Some(&token))?,
    );
    let mut compared = Vec::new();
    for probe in corpus(&seeded) {
        let (real, fake) = match probe.who {
            As::Admin => (send(admin, &probe).await?, send(&fake_admin, &probe).await?),
            As::Nobody => (
                send(&nobody, &probe).await?,
                send(&fake_nobody, &probe).await?,
            ),
        };
        compared.push(Compared {
            probe,
            real,
            fake,
            namespace: namespace.to_owned(),
        });
    }
    Ok(compared)
}

/// The mismatches of one target's answers, as a report naming each request (empty when the fake
/// answered every request as the real server did). On a release older than [`NEWEST`], a
/// request [`older_answer`] knows must get that release's answer instead.
pub fn mismatches(compared: &[Compared], release: Option<local::Release>) -> String {
    let mut report = String::new();
    for c in compared {
        let older = release
            .filter(|r| *r < NEWEST)
            .and_then(|r| older_answer(r, &c.probe).map(|answer| (r, answer)));
        let differences = match &older {
            Some((release, answer)) => {
                let mut found = c.real.differences(answer);
                if !found.is_empty() {
                    found.insert(
                        0,
                        format!("{release} no longer answers as `older_answer` says it does"),
                    );
                }
                found
            }
            None => c.real.differences(&c.fake),
        };
        if !differences.is_empty() {
            let _ = writeln!(
                report,
                "{} ({}{}):\n   real {}\n   fake {}\n   {}",
                c.probe.name,
                c.probe.line(),
                if c.probe.who == As::Nobody {
                    ", without RBAC"
                } else {
                    ""
                },
                c.real.line(),
                c.fake.line(),
                differences.join("\n   ")
            );
        }
    }
    report
}

/// Prints a line per request with both answers and the verdict: `same`, `DIFF`, or the release
/// (`1.35`) where an older release answered as [`older_answer`] says it does (and the fake as
/// the newest); with `CLUSTERSET_E2E_STRICTNESS_BODIES=true`, both bodies as they came.
pub fn print(target: &Target, release: Option<local::Release>, compared: &[Compared]) {
    let bodies = std::env::var("CLUSTERSET_E2E_STRICTNESS_BODIES").is_ok_and(|v| v == "true");
    for c in compared {
        if bodies {
            println!("  real body: {}\n  fake body: {}", c.real.body, c.fake.body);
        }
        let older = release
            .filter(|r| *r < NEWEST)
            .and_then(|r| older_answer(r, &c.probe).map(|answer| (r, answer)));
        let verdict = match &older {
            Some((release, answer)) if c.real.differences(answer).is_empty() => release.to_string(),
            Some(_) => "DIFF".to_owned(),
            None if c.real.differences(&c.fake).is_empty() => "same".to_owned(),
            None => "DIFF".to_owned(),
        };
        println!(
            "{target}: {verdict} [{}] {}{}: real {} | fake {}",
            c.probe.line(),
            c.probe.name,
            if c.probe.who == As::Nobody {
                " (without RBAC)"
            } else {
                ""
            },
            c.real.line(),
            c.fake.line()
        );
    }
}

/// Where the real answers of two targets differ (the test namespaces, named after the time,
/// left out), as lines: the differences between releases, which [`older_answer`] must know.
pub fn release_differences(runs: &BTreeMap<String, Vec<Compared>>) -> Vec<String> {
    let mut lines = Vec::new();
    let mut runs = runs.iter();
    let Some((first_target, first)) = runs.next() else {
        return lines;
    };
    for (target, run) in runs {
        for (a, b) in first.iter().zip(run) {
            if !a
                .real
                .without(&a.namespace)
                .differences(&b.real.without(&b.namespace))
                .is_empty()
            {
                lines.push(format!(
                    "{}: {first_target} {} | {target} {}",
                    a.probe.name,
                    a.real.line(),
                    b.real.line()
                ));
            }
        }
    }
    lines
}

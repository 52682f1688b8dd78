//! The fake API server's writes, refused as a real server refuses them, in its order (the e2e
//! test `the_fake_api_server_refuses_as_real_ones_do` holds these answers to a real server's).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns

use kube_fake::api::{Call, FakeApi, seen};
use serde_json::{Value, json};

fn namespace() -> Value {
    json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}})
}

fn config_map(name: &str, version: Option<&str>) -> Value {
    let mut map = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": "shop"}, "data": {"a": "1"}});
    if let Some(version) = version {
        map["metadata"]["resourceVersion"] = json!(version);
    }
    map
}

fn export(name: &str) -> Value {
    json!({"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
        "metadata": {"name": name, "namespace": "shop"}})
}

fn call(method: &str, target: &str, content_type: &str, body: &Value) -> Call {
    Call {
        seen: seen(method, target),
        content_type: content_type.to_owned(),
        token: None,
        body: serde_json::to_vec(body).unwrap(),
    }
}

fn answer(api: &mut FakeApi, call: &Call) -> (u16, Value) {
    let (code, body) = api.handle(call);
    let body = serde_json::from_slice(&body)
        .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&body).into_owned()));
    (code, body)
}

/// The upstream ServiceExport CRD (sigs.k8s.io/mcs-api), installed as a user would.
fn service_export_crd() -> Value {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../fixtures/upstream/mcs-api/multicluster.x-k8s.io_serviceexports.yaml"
    );
    serde_saphyr::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn api() -> FakeApi {
    FakeApi::with_crds(
        [service_export_crd()],
        vec![
            namespace(),
            config_map("settings", Some("7")),
            export("web"),
        ],
    )
}

#[test]
fn creates_are_refused_for_a_missing_namespace_an_invalid_object_then_an_existing_one() {
    let mut api = api();
    let post = |namespace: &str, body: Value| {
        call(
            "POST",
            &format!("/api/v1/namespaces/{namespace}/configmaps"),
            "application/json",
            &body,
        )
    };
    let mut orphan = config_map("x", None);
    orphan["metadata"]["namespace"] = json!("gone");
    let (code, body) = answer(&mut api, &post("gone", orphan));
    assert_eq!(
        (code, body["message"].as_str().unwrap()),
        (404, "namespaces \"gone\" not found")
    );
    assert_eq!(
        body["details"],
        json!({"name": "gone", "kind": "namespaces"})
    );
    // Validation comes before the existing object: the 422, not the 409.
    let mut bad = config_map("settings", None);
    bad["metadata"]["labels"] = json!({"app": "-web"});
    assert_eq!(answer(&mut api, &post("shop", bad)).0, 422);
    let (code, body) = answer(&mut api, &post("shop", config_map("settings", None)));
    assert_eq!(
        (code, body["reason"].as_str().unwrap()),
        (409, "AlreadyExists")
    );
    assert_eq!(body["message"], "configmaps \"settings\" already exists");
    // A new one is stored with a resource version, and can be read.
    assert_eq!(
        answer(&mut api, &post("shop", config_map("new", None))).0,
        201
    );
    assert_eq!(
        answer(
            &mut api,
            &call(
                "GET",
                "/api/v1/namespaces/shop/configmaps/new",
                "",
                &Value::Null
            )
        )
        .0,
        200
    );
}

#[test]
fn a_generated_name_is_validated_with_its_generate_name() {
    let mut api = api();
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"generateName": "Bad_", "namespace": "shop"}});
    let (code, body) = answer(
        &mut api,
        &call(
            "POST",
            "/api/v1/namespaces/shop/configmaps",
            "application/json",
            &body,
        ),
    );
    assert_eq!(code, 422);
    let fields: Vec<&str> = body["details"]["causes"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["field"].as_str().unwrap())
        .collect();
    assert_eq!(fields, ["metadata.generateName", "metadata.name"]);
    assert!(
        body["details"]["name"]
            .as_str()
            .unwrap()
            .starts_with("Bad_")
    );
}

#[test]
fn updates_are_refused_when_missing_unversioned_or_stale() {
    let mut api = api();
    let put = |path: &str, body: Value| call("PUT", path, "application/json", &body);
    let (code, body) = answer(
        &mut api,
        &put(
            "/api/v1/namespaces/shop/configmaps/missing",
            config_map("missing", None),
        ),
    );
    assert_eq!(
        (code, body["message"].as_str().unwrap()),
        (404, "configmaps \"missing\" not found")
    );
    let (code, body) = answer(
        &mut api,
        &put(
            "/api/v1/namespaces/shop/configmaps/settings",
            config_map("settings", Some("3")),
        ),
    );
    assert_eq!(code, 409);
    assert_eq!(
        body["message"],
        "Operation cannot be fulfilled on configmaps \"settings\": the object has been modified; please apply your changes to the latest version and try again"
    );
    // A custom resource's update must name its resource version; a ConfigMap's need not.
    let exports = "/apis/multicluster.x-k8s.io/v1beta1/namespaces/shop/serviceexports";
    let (code, body) = answer(&mut api, &put(&format!("{exports}/web"), export("web")));
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "serviceexports.multicluster.x-k8s.io \"web\" is invalid: metadata.resourceVersion: Invalid value: 0: must be specified for an update"
    );
    assert_eq!(
        answer(
            &mut api,
            &put(
                "/api/v1/namespaces/shop/configmaps/settings",
                config_map("settings", None)
            )
        )
        .0,
        200
    );
}

#[test]
fn a_custom_resource_endpoint_refuses_another_kind_by_validation() {
    let mut api = api();
    let body = json!({"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
        "metadata": {"name": "imp"}, "spec": {"type": "ClusterSetIP", "ports": [{"port": 80}]}});
    let (code, body) = answer(
        &mut api,
        &call(
            "POST",
            "/apis/multicluster.x-k8s.io/v1beta1/namespaces/shop/serviceexports",
            "application/json",
            &body,
        ),
    );
    assert_eq!(code, 422);
    assert_eq!(
        body["message"],
        "ServiceImport.multicluster.x-k8s.io \"imp\" is invalid: kind: Invalid value: \"ServiceImport\": must be ServiceExport"
    );
}

#[test]
fn a_user_without_rbac_is_refused_before_anything_else() {
    let mut api = api().user_without_rbac("t0ken", "system:serviceaccount:shop:nobody");
    let mut denied = call(
        "DELETE",
        "/apis/multicluster.x-k8s.io/v1beta1/namespaces/shop/serviceexports/missing/status",
        "",
        &Value::Null,
    );
    denied.body.clear();
    denied.token = Some("t0ken".to_owned());
    let (code, body) = answer(&mut api, &denied);
    assert_eq!(code, 403);
    assert_eq!(
        body["message"],
        "serviceexports.multicluster.x-k8s.io \"missing\" is forbidden: User \"system:serviceaccount:shop:nobody\" cannot delete resource \"serviceexports/status\" in API group \"multicluster.x-k8s.io\" in the namespace \"shop\""
    );
    assert_eq!(
        body["details"],
        json!({"name": "missing", "group": "multicluster.x-k8s.io", "kind": "serviceexports"})
    );
    let mut list = call("GET", "/api/v1/namespaces", "", &Value::Null);
    list.body.clear();
    list.token = Some("t0ken".to_owned());
    assert_eq!(
        answer(&mut api, &list).1["message"],
        "namespaces is forbidden: User \"system:serviceaccount:shop:nobody\" cannot list resource \"namespaces\" in API group \"\" at the cluster scope"
    );
}

#[test]
fn paths_nothing_is_served_at() {
    let mut api = api();
    let get = |path: &str| {
        let mut call = call("GET", path, "", &Value::Null);
        call.body.clear();
        call
    };
    // A built-in group's API answers with a Status; any other group with Go's plain 404.
    let (code, body) = answer(&mut api, &get("/api/v1/namespaces/shop/things"));
    assert_eq!((code, &body["details"]), (404, &json!({})));
    let (code, body) = answer(&mut api, &get("/apis/nothing.example.com/v1/things"));
    assert_eq!(
        (code, body),
        (404, Value::String("404 page not found\n".to_owned()))
    );
}

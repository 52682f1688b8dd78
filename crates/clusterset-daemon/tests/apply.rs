//! The shared writes on a tower-test mock API server: the exact request each sends, and which
//! answers count as done.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use clusterset_daemon::ApiError;
use clusterset_daemon::apply::{self, Ownership, Precondition};
use http::{Request, Response};
use k8s_openapi::api::core::v1::Service;
use kube::client::Body;
use serde_json::{Value, json};
use tower_test::mock;

type Handle = mock::Handle<Request<Body>, Response<Body>>;

fn client() -> (kube::Client, Handle) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (kube::Client::new(service, "default"), handle)
}

/// Answers the next request with `code` and `body`; returns its method, URI and JSON body.
async fn answer(handle: &mut Handle, code: u16, body: Value) -> (String, String, Value) {
    let (request, send) = handle.next_request().await.expect("a request");
    let method = request.method().to_string();
    let uri = request.uri().to_string();
    let bytes = http_body_util::BodyExt::collect(request.into_body())
        .await
        .unwrap()
        .to_bytes();
    let sent = if bytes.is_empty() {
        Value::Null
    } else {
        serde_json::from_slice(&bytes).unwrap()
    };
    send.send_response(
        Response::builder()
            .status(code)
            .body(Body::from(serde_json::to_vec(&body).unwrap()))
            .unwrap(),
    );
    (method, uri, sent)
}

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": reason, "reason": reason, "code": code})
}

fn service() -> Service {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": "ns"},
        "spec": {"ports": [{"port": 80}]},
    }))
    .unwrap()
}

#[tokio::test]
async fn an_apply_is_a_server_side_apply_of_the_object_by_its_own_name_forced_only_when_asked() {
    let (client, mut handle) = client();
    let object = service();
    let sent = tokio::spawn({
        let client = client.clone();
        async move {
            apply::apply(&client, "op", Ownership::Force, &object, "test").await?;
            apply::apply(&client, "op", Ownership::Shared, &object, "test").await
        }
    });
    let stored = serde_json::to_value(service()).unwrap();
    let (method, uri, body) = answer(&mut handle, 200, stored.clone()).await;
    assert_eq!(method, "PATCH");
    assert_eq!(
        uri,
        "/api/v1/namespaces/ns/services/web?&force=true&fieldManager=op"
    );
    assert_eq!(body, stored);
    let (_, uri, _) = answer(&mut handle, 200, stored).await;
    assert_eq!(uri, "/api/v1/namespaces/ns/services/web?&fieldManager=op");
    assert!(sent.await.unwrap().is_ok());
}

#[tokio::test]
async fn an_object_without_a_namespace_is_not_sent_and_the_error_names_its_builder() {
    let (client, _handle) = client();
    let mut object = service();
    object.metadata.namespace = None;
    let error = apply::apply(&client, "op", Ownership::Force, &object, "the planner")
        .await
        .unwrap_err();
    assert!(
        matches!(&error, ApiError::NotSent(message) if message.contains("the planner")),
        "{error}"
    );
}

#[tokio::test]
async fn a_status_apply_sends_the_identity_and_the_status_only() {
    let (client, mut handle) = client();
    let sent = tokio::spawn(async move {
        apply::apply_status::<Service>(
            &client,
            "op",
            Ownership::Force,
            "ns",
            "web",
            &json!({"loadBalancer": {}}),
        )
        .await
    });
    let (method, uri, body) =
        answer(&mut handle, 200, serde_json::to_value(service()).unwrap()).await;
    assert_eq!(method, "PATCH");
    assert_eq!(
        uri,
        "/api/v1/namespaces/ns/services/web/status?&force=true&fieldManager=op"
    );
    assert_eq!(
        body,
        json!({"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web", "namespace": "ns"}, "status": {"loadBalancer": {}}})
    );
    assert!(sent.await.unwrap().is_ok());
}

#[tokio::test]
async fn a_delete_of_what_is_gone_is_done_and_a_uid_precondition_that_fails_is_done_too() {
    let (client, mut handle) = client();
    let deletes = tokio::spawn(async move {
        let gone = apply::delete::<Service>(&client, "ns", "web", Precondition::None).await;
        let replaced =
            apply::delete::<Service>(&client, "ns", "web", Precondition::Uid("uid-1")).await;
        let conflict = apply::delete::<Service>(&client, "ns", "web", Precondition::None).await;
        let forbidden =
            apply::delete::<Service>(&client, "ns", "web", Precondition::Uid("uid-1")).await;
        (gone, replaced, conflict, forbidden)
    });
    let (method, uri, body) = answer(&mut handle, 404, status(404, "NotFound")).await;
    assert_eq!(
        (method.as_str(), uri.as_str()),
        ("DELETE", "/api/v1/namespaces/ns/services/web?")
    );
    assert_eq!(body["preconditions"], Value::Null);
    let (_, _, body) = answer(&mut handle, 409, status(409, "Conflict")).await;
    assert_eq!(body["preconditions"], json!({"uid": "uid-1"}));
    answer(&mut handle, 409, status(409, "Conflict")).await;
    answer(&mut handle, 403, status(403, "Forbidden")).await;
    let (gone, replaced, conflict, forbidden) = deletes.await.unwrap();
    assert!(gone.is_ok(), "{gone:?}");
    assert!(replaced.is_ok(), "{replaced:?}");
    assert!(
        matches!(conflict, Err(ApiError::Conflict(_))),
        "{conflict:?}"
    );
    assert!(
        matches!(forbidden, Err(ApiError::Refused { code: 403, .. })),
        "{forbidden:?}"
    );
}

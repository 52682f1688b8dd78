#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The kube layer against a tower-test mock API server: the exact requests (method, path,
//! query, content type, body) every write makes, and how API answers (404 on delete, 409 on
//! apply and replace) come back.
//!
//! The mock is strict (`common::strict`): a request a real kube-apiserver refuses (an invalid
//! object, a bad field manager) is answered with the same 400 or 422 and fails the test.

use std::collections::BTreeMap;

use clusterset_agent_runtime::kube_io::{AgentWriter, FIELD_MANAGER, KubeWriter, WriteError};
use clusterset_sim as sim;
use http::{Method, Request, Response, StatusCode};
use k8s_openapi::jiff::Timestamp;
use kube::client::Body;
use kube_syntax::status::Refusal;
use mcs_controller::broker::{BrokerRecord, Heartbeat};
use mcs_controller::write::Write;
use mcs_controller::{EndpointMode, ExportRecord, LocalExport};
use mcs_types::ServiceExportStatus;
use mcs_types::conditions::{DesiredCondition, set_condition};
use mcs_types::{ClusterId, ServiceKey};
use tokio::task::JoinHandle;
use tower_test::mock::{self, Handle};

mod common;
use common::strict::{self, Received};

type ApiHandle = Handle<Request<Body>, Response<Body>>;

const BROKER: &str = "clusterset-broker";

fn mock_writer() -> (KubeWriter, ApiHandle, ApiHandle) {
    let (local_service, local) = mock::pair::<Request<Body>, Response<Body>>();
    let (broker_service, broker) = mock::pair::<Request<Body>, Response<Body>>();
    let writer = KubeWriter::new(
        kube::Client::new(local_service, "default"),
        kube::Client::new(broker_service, "default"),
        BROKER,
    );
    (writer, local, broker)
}

/// What the mock API server expects of the next request, and what it answers.
struct Expect {
    method: Method,
    path: &'static str,
    query: &'static [(&'static str, &'static str)],
    content_type: Option<&'static str>,
    check_body: fn(&serde_json::Value),
    status: StatusCode,
    answer: fn(serde_json::Value) -> serde_json::Value,
}

/// Serves one request strictly: a request a real API server refuses is answered with that
/// refusal (400, 422) and the task panics with it (the test's `server.await.unwrap()` fails);
/// any other request must be the expected one and gets the expected answer.
fn serve(mut handle: ApiHandle, expect: Expect) -> JoinHandle<()> {
    tokio::spawn(async move {
        let (request, send) = handle.next_request().await.expect("a request");
        let request = Received::read(request).await;
        if let Err(refusal) = request.check(strict::catalog()) {
            send.send_response(strict::answer(&refusal));
            panic!("{}", request.describe(&refusal));
        }
        assert_eq!(request.method, expect.method.as_str());
        assert_eq!(request.path, expect.path);
        let expected: BTreeMap<String, String> = expect
            .query
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        assert_eq!(
            request.query, expected,
            "query of {} {}",
            expect.method, expect.path
        );
        if let Some(content_type) = expect.content_type {
            assert_eq!(request.content_type, content_type);
        }
        let body = request.body;
        (expect.check_body)(&body);
        let answer = (expect.answer)(body);
        let response = Response::builder()
            .status(expect.status)
            .body(Body::from(serde_json::to_vec(&answer).unwrap()))
            .unwrap();
        send.send_response(response);
    })
}

/// Serves one request that a real API server refuses: answers it with the refusal and returns
/// it (panics if the request is valid).
fn serve_refused(mut handle: ApiHandle) -> JoinHandle<Refusal> {
    tokio::spawn(async move {
        let (request, send) = handle.next_request().await.expect("a request");
        let request = Received::read(request).await;
        let refusal = request
            .check(strict::catalog())
            .expect_err("a request that a real API server refuses");
        send.send_response(strict::answer(&refusal));
        refusal
    })
}

fn echo(body: serde_json::Value) -> serde_json::Value {
    body
}

fn status_answer(code: u16, reason: &str, message: &str) -> serde_json::Value {
    serde_json::json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code
    })
}

const APPLY: &str = "application/apply-patch+yaml";
const FORCE: &[(&str, &str)] = &[("fieldManager", FIELD_MANAGER), ("force", "true")];

fn web() -> ServiceKey {
    ServiceKey::new("shop", "web")
}

fn merged_import() -> (mcs_controller::MergedService, ExportRecord) {
    let east = ClusterId::new("c0").unwrap();
    let created = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::from_second(1_800_000_000).unwrap(),
    );
    let service = sim::service(&web(), "10.96.0.1", &[80]);
    let slice = sim::endpoint_slice(&web(), &["10.244.0.5"], &[80]);
    let record = ExportRecord::from_local(LocalExport {
        cluster_id: &east,
        key: &web(),
        export_created: &created,
        export_spec: &Default::default(),
        service: Some(&service),
        endpoint_slices: &[slice],
        global_ips: &["242.0.0.1".parse().unwrap()],
        mode: EndpointMode::GlobalIngress,
    })
    .unwrap();
    let merged = mcs_controller::merge_exports(std::slice::from_ref(&record))
        .unwrap()
        .unwrap();
    (merged, record)
}

#[tokio::test]
async fn service_import_spec_is_server_side_applied_with_force_under_our_manager() {
    let (writer, local, _broker) = mock_writer();
    let (merged, _) = merged_import();
    let mut import = mcs_controller::desired_import(&merged, &["243.0.0.1".parse().unwrap()]);
    import.status = None;
    let server = serve(
        local,
        Expect {
            method: Method::PATCH,
            path: "/apis/multicluster.x-k8s.io/v1beta1/namespaces/shop/serviceimports/web",
            query: FORCE,
            content_type: Some(APPLY),
            check_body: |body| {
                assert_eq!(body["apiVersion"], "multicluster.x-k8s.io/v1beta1");
                assert_eq!(body["kind"], "ServiceImport");
                assert_eq!(body["spec"]["ips"], serde_json::json!(["243.0.0.1"]));
                assert_eq!(body["spec"]["type"], "ClusterSetIP");
                assert!(
                    body.get("status").is_none(),
                    "spec apply must not claim status: {body}"
                );
            },
            status: StatusCode::OK,
            answer: echo,
        },
    );
    writer
        .write(&Write::ApplyServiceImport(Box::new(import)))
        .await
        .unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn service_import_status_goes_through_the_status_subresource() {
    let (writer, local, _broker) = mock_writer();
    let (merged, _) = merged_import();
    let import = mcs_controller::desired_import(&merged, &["243.0.0.1".parse().unwrap()]);
    let server = serve(
        local,
        Expect {
            method: Method::PATCH,
            path: "/apis/multicluster.x-k8s.io/v1beta1/namespaces/shop/serviceimports/web/status",
            query: FORCE,
            content_type: Some(APPLY),
            check_body: |body| {
                assert_eq!(
                    body["status"]["clusters"],
                    serde_json::json!([{"cluster": "c0"}])
                );
                assert!(
                    body.get("spec").is_none(),
                    "status apply must not claim spec: {body}"
                );
                assert_eq!(body["metadata"]["name"], "web");
            },
            status: StatusCode::OK,
            answer: |mut body| {
                body["spec"] = serde_json::json!({"type": "ClusterSetIP", "ports": []});
                body
            },
        },
    );
    writer
        .write(&Write::ApplyServiceImportStatus(Box::new(import)))
        .await
        .unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn service_export_conditions_go_through_the_status_subresource() {
    let (writer, local, _broker) = mock_writer();
    let mut conditions = Vec::new();
    set_condition(
        &mut conditions,
        DesiredCondition::export_valid(),
        Some(1),
        k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Timestamp::from_second(1_800_000_000).unwrap(),
        ),
    );
    let server = serve(
        local,
        Expect {
            method: Method::PATCH,
            path: "/apis/multicluster.x-k8s.io/v1beta1/namespaces/shop/serviceexports/web/status",
            query: FORCE,
            content_type: Some(APPLY),
            check_body: |body| {
                assert_eq!(body["kind"], "ServiceExport");
                assert_eq!(body["status"]["conditions"][0]["type"], "Valid");
                assert_eq!(body["status"]["conditions"][0]["observedGeneration"], 1);
            },
            status: StatusCode::OK,
            answer: echo,
        },
    );
    writer
        .write(&Write::ApplyServiceExportStatus {
            key: web(),
            status: ServiceExportStatus {
                conditions,
                ..Default::default()
            },
        })
        .await
        .unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn imported_endpoint_slices_are_applied_and_deleted_in_the_service_namespace() {
    let (writer, local, _broker) = mock_writer();
    let (merged, _) = merged_import();
    let slice = mcs_controller::desired_endpoint_slices(&merged).remove(0);
    let name = slice.metadata.name.clone().unwrap();
    assert!(name.starts_with("web-c0-ipv4-"), "{name}");
    let path: &'static str = Box::leak(
        format!("/apis/discovery.k8s.io/v1/namespaces/shop/endpointslices/{name}").into_boxed_str(),
    );
    let server = serve(
        local,
        Expect {
            method: Method::PATCH,
            path,
            query: FORCE,
            content_type: Some(APPLY),
            check_body: |body| {
                assert_eq!(body["kind"], "EndpointSlice");
                assert_eq!(
                    body["metadata"]["labels"]["endpointslice.kubernetes.io/managed-by"],
                    "mcs-controller.clusterset.io"
                );
                assert_eq!(
                    body["endpoints"][0]["addresses"],
                    serde_json::json!(["242.0.0.1"])
                );
            },
            status: StatusCode::OK,
            answer: echo,
        },
    );
    writer
        .write(&Write::ApplyEndpointSlice(Box::new(slice)))
        .await
        .unwrap();
    server.await.unwrap();

    // Deleting a slice that is already gone (404) is done, not an error.
    let (writer, local, _broker) = mock_writer();
    let server = serve(
        local,
        Expect {
            method: Method::DELETE,
            path,
            query: &[],
            content_type: None,
            check_body: |_| {},
            status: StatusCode::NOT_FOUND,
            answer: |_| status_answer(404, "NotFound", "endpointslices \"x\" not found"),
        },
    );
    writer
        .write(&Write::DeleteEndpointSlice { key: web(), name })
        .await
        .unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn records_are_applied_without_force_and_a_409_is_a_conflict() {
    let (writer, _local, broker) = mock_writer();
    let (_, record) = merged_import();
    let object = BrokerRecord::new(
        record,
        BROKER,
        Timestamp::from_second(1_800_000_100).unwrap(),
    );
    let server = serve(
        broker,
        Expect {
            method: Method::PATCH,
            path: "/apis/clusterset.io/v1alpha1/namespaces/clusterset-broker/exportrecords/c0.shop.web",
            // No force: a record another manager claims is reported, not overwritten.
            query: &[("fieldManager", FIELD_MANAGER)],
            content_type: Some(APPLY),
            check_body: |body| {
                assert_eq!(body["kind"], "ExportRecord");
                assert_eq!(body["spec"]["clusterId"], "c0");
                assert_eq!(body["spec"]["globalIps"], serde_json::json!(["242.0.0.1"]));
                assert_eq!(
                    body["metadata"]["annotations"]["clusterset.io/published-at"],
                    "2027-01-15T08:01:40Z"
                );
            },
            status: StatusCode::CONFLICT,
            answer: |_| {
                status_answer(
                    409,
                    "Conflict",
                    "Apply failed with 1 conflict: conflict with \"kubectl\" using clusterset.io/v1alpha1: .spec.globalIps",
                )
            },
        },
    );
    let err = writer
        .write(&Write::PublishRecord(Box::new(object)))
        .await
        .unwrap_err();
    server.await.unwrap();
    match err {
        WriteError::Conflict(message) => assert!(message.contains("kubectl"), "{message}"),
        other => panic!("expected a conflict, got {other:?}"),
    }
}

#[tokio::test]
async fn withdrawing_a_record_deletes_it_from_the_broker_namespace() {
    let (writer, _local, broker) = mock_writer();
    let server = serve(
        broker,
        Expect {
            method: Method::DELETE,
            path: "/apis/clusterset.io/v1alpha1/namespaces/clusterset-broker-c0/exportrecords/c0.shop.web",
            query: &[],
            content_type: None,
            check_body: |_| {},
            status: StatusCode::OK,
            answer: |_| status_answer(200, "", ""),
        },
    );
    writer
        .write(&Write::WithdrawRecord {
            key: web(),
            namespace: "clusterset-broker-c0".into(),
            name: "c0.shop.web".into(),
        })
        .await
        .unwrap();
    server.await.unwrap();
}

#[tokio::test]
async fn heartbeat_creates_then_replaces_with_the_resource_version_and_reports_409() {
    let c0 = ClusterId::new("c0").unwrap();
    let now = Timestamp::from_second(1_800_000_000).unwrap();
    let claim = mcs_controller::broker::heartbeat_claim(
        &c0,
        "agent-0",
        BROKER,
        std::time::Duration::from_secs(30),
    );
    let Heartbeat::Create(lease) = mcs_controller::broker::heartbeat(None, &claim, now) else {
        panic!()
    };
    let (writer, _local, broker) = mock_writer();
    let server = serve(
        broker,
        Expect {
            method: Method::POST,
            path: "/apis/coordination.k8s.io/v1/namespaces/clusterset-broker/leases",
            query: &[("fieldManager", FIELD_MANAGER)],
            content_type: Some("application/json"),
            check_body: |body| {
                assert_eq!(body["metadata"]["name"], "clusterset-agent-c0");
                assert_eq!(body["metadata"]["labels"]["clusterset.io/cluster-id"], "c0");
                assert_eq!(body["spec"]["holderIdentity"], "agent-0");
                assert_eq!(body["spec"]["leaseDurationSeconds"], 30);
            },
            status: StatusCode::CREATED,
            answer: |mut body| {
                body["metadata"]["resourceVersion"] = "41".into();
                body
            },
        },
    );
    let created = writer
        .heartbeat(&Heartbeat::Create(lease.clone()))
        .await
        .unwrap()
        .expect("the Lease as stored");
    server.await.unwrap();
    assert_eq!(
        created.metadata.resource_version.as_deref(),
        Some("41"),
        "the heartbeat returns the Lease as the hub stored it"
    );

    let mut stored = *lease;
    stored.metadata.resource_version = Some("41".into());
    let seen = kube_lease::Observed::seen_change(stored, now);
    let renew = mcs_controller::broker::heartbeat(Some(&seen), &claim, now);
    let (writer, _local, broker) = mock_writer();
    let server = serve(
        broker,
        Expect {
            method: Method::PUT,
            path: "/apis/coordination.k8s.io/v1/namespaces/clusterset-broker/leases/clusterset-agent-c0",
            query: &[("fieldManager", FIELD_MANAGER)],
            content_type: Some("application/json"),
            check_body: |body| {
                assert_eq!(
                    body["metadata"]["resourceVersion"], "41",
                    "optimistic concurrency"
                );
            },
            status: StatusCode::CONFLICT,
            answer: |_| {
                status_answer(
                    409,
                    "Conflict",
                    "Operation cannot be fulfilled on leases.coordination.k8s.io \"clusterset-agent-c0\": the object has been modified",
                )
            },
        },
    );
    let err = writer.heartbeat(&renew).await.unwrap_err();
    server.await.unwrap();
    assert!(matches!(err, WriteError::Conflict(_)), "{err:?}");
}

#[tokio::test]
async fn an_endpoint_slice_labelled_with_the_old_managed_by_value_is_refused_with_422() {
    let (writer, local, _broker) = mock_writer();
    let (merged, _) = merged_import();
    let mut slice = mcs_controller::desired_endpoint_slices(&merged).remove(0);
    let name = slice.metadata.name.clone().unwrap();
    // The label value the agent wrote before a real API server refused it.
    slice.metadata.labels.as_mut().unwrap().insert(
        mcs_types::labels::ENDPOINTSLICE_MANAGED_BY_LABEL.into(),
        "clusterset.io/mcs-controller".into(),
    );
    let server = serve_refused(local);
    let error = writer
        .write(&Write::ApplyEndpointSlice(Box::new(slice)))
        .await
        .unwrap_err();
    let refusal = server.await.unwrap();
    assert_eq!(refusal.code, 422);
    assert_eq!(refusal.body["reason"], "Invalid");
    assert_eq!(
        refusal.body["details"]["causes"][0]["field"],
        "metadata.labels"
    );
    let expected = format!(
        "EndpointSlice.discovery.k8s.io {name:?} is invalid: metadata.labels: Invalid value: \"clusterset.io/mcs-controller\""
    );
    assert!(
        refusal.message().starts_with(&expected),
        "{}",
        refusal.message()
    );
    // The writer reports the API server's message (the core shows it and retries), as a
    // refusal: the API server answered.
    assert!(error.answered());
    match error {
        WriteError::Refused { code, message } => {
            assert_eq!(code, 422);
            assert!(message.contains(&expected), "{message}");
        }
        other => panic!("expected a refused write, got {other:?}"),
    }
}

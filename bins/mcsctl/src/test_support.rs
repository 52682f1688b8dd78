//! Test helpers: the recorded objects of `tests/fixtures/cluster-east.yaml` and a kube client
//! on a tower-test mock service answered by the fake API server of `tests/common/fake_api.rs`.

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;
use serde_json::Value;
use tower_test::mock;

use crate::fake_api::{FakeApi, Seen, objects_of, seen};

/// The recorded objects of member cluster east.
pub fn fixture() -> Vec<Value> {
    objects_of(include_str!("../tests/fixtures/cluster-east.yaml"))
}

/// The fixture objects of `kind` (and `namespace`, when given), deserialized.
pub fn objects<T: serde::de::DeserializeOwned>(kind: &str, namespace: Option<&str>) -> Vec<T> {
    fixture()
        .into_iter()
        .filter(|o| o["kind"] == kind)
        .filter(|o| namespace.is_none_or(|ns| o["metadata"]["namespace"] == ns))
        .map(|o| serde_json::from_value(o).unwrap())
        .collect()
}

/// A client whose requests `api` answers; the requests are recorded in the returned list.
/// Must be called in a tokio runtime.
pub fn mock_client(api: FakeApi) -> (kube::Client, Arc<Mutex<Vec<Seen>>>) {
    let (service, mut handle) = mock::pair::<Request<Body>, Response<Body>>();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let record = Arc::clone(&requests);
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let target = request
                .uri()
                .path_and_query()
                .map_or_else(|| request.uri().path().to_owned(), ToString::to_string);
            let request = seen(request.method().as_str(), &target);
            let (code, body) = api.respond(&request);
            record.lock().unwrap().push(request);
            send.send_response(
                Response::builder()
                    .status(code)
                    .header("content-type", "application/json")
                    .body(Body::from(body))
                    .unwrap(),
            );
        }
    });
    (kube::Client::new(service, "default"), requests)
}

/// The requests made so far, as `GET /path?query` lines, sorted (concurrent requests come in
/// any order).
pub fn lines(requests: &Arc<Mutex<Vec<Seen>>>) -> Vec<String> {
    let mut lines: Vec<String> = requests.lock().unwrap().iter().map(Seen::line).collect();
    lines.sort();
    lines
}

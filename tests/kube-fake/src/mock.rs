//! A `kube::Client` whose requests a [`FakeApi`] answers through a tower-test mock service,
//! with the requests recorded.

use std::sync::{Arc, Mutex};

use http::{Request, Response};
use kube::client::Body;
use tower_test::mock;

use crate::api::{FakeApi, Seen, seen};

/// The requests a client made, in the order they came.
pub type Requests = Arc<Mutex<Vec<Seen>>>;

/// A client whose requests `api` answers; the requests are recorded in the returned list.
/// Must be called in a tokio runtime.
pub fn client(api: FakeApi) -> (kube::Client, Requests) {
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
pub fn lines(requests: &Requests) -> Vec<String> {
    let mut lines: Vec<String> = requests.lock().unwrap().iter().map(Seen::line).collect();
    lines.sort();
    lines
}

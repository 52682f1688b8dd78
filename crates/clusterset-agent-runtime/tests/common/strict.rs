//! The strict part of the mock API servers: every request the agent sends a mock is checked
//! with Kubernetes' own rules ([`kube_syntax`]) before the mock answers it, on the resource
//! types a real API server with clusterset installed serves (the built-in types plus the MCS,
//! About and broker CRDs: [`clusterset_sim::api_catalog`], the same catalog the
//! simulation's API servers use). A request a real kube-apiserver refuses is answered as it
//! would answer it (400 BadRequest for a selector it cannot parse, 422 Invalid with the causes
//! for an invalid object), and the mock makes the test fail.

use std::collections::BTreeMap;
use std::sync::LazyLock;

use http::{Response, StatusCode};
use kube::client::Body;
use kube_syntax::object::Catalog;
use kube_syntax::status::{Refusal, Request};
use serde_json::Value;

/// The resource types of the mock API servers.
static CATALOG: LazyLock<Catalog> =
    LazyLock::new(|| clusterset_sim::api_catalog().expect("the mock API server's resource types"));

/// A request as a mock API server received it: method, path, decoded query, content type and
/// JSON body.
#[derive(Debug, Clone)]
pub struct Received {
    /// `GET`, `PATCH`, ...
    pub method: String,
    /// The URL path.
    pub path: String,
    /// The decoded query.
    pub query: BTreeMap<String, String>,
    /// The `Content-Type` header (empty without one).
    pub content_type: String,
    /// The body: `None` when empty, the text as a JSON string when it is not JSON (a real
    /// server refuses that as not a JSON object).
    pub body: Option<Value>,
}

/// Takes a request apart (reads its body).
pub async fn receive(request: http::Request<Body>) -> Received {
    let method = request.method().to_string();
    let path = request.uri().path().to_owned();
    let query = kube_syntax::status::parse_query(request.uri().query().unwrap_or(""));
    let content_type = request
        .headers()
        .get(http::header::CONTENT_TYPE)
        .map(|v| v.to_str().unwrap().to_owned())
        .unwrap_or_default();
    let bytes = request.into_body().collect_bytes().await.unwrap();
    let body = (!bytes.is_empty()).then(|| {
        serde_json::from_slice(&bytes)
            .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
    });
    Received {
        method,
        path,
        query,
        content_type,
        body,
    }
}

impl Received {
    /// The refusal a real kube-apiserver gives this request, if any.
    ///
    /// Checked as under `fieldValidation=Strict` when the request names none: a real server
    /// would drop a field the CRD does not declare (with a warning), and the agent sending one
    /// is a bug the tests should see.
    pub fn check(&self) -> Result<(), Refusal> {
        let mut query = self.query.clone();
        query
            .entry("fieldValidation".to_owned())
            .or_insert_with(|| "Strict".to_owned());
        CATALOG.check_request(&Request {
            method: &self.method,
            path: &self.path,
            query: &query,
            content_type: &self.content_type,
            body: self.body.as_ref(),
        })
    }

    /// The refusal, as a line for a test failure.
    pub fn describe(&self, refusal: &Refusal) -> String {
        format!(
            "a real API server refuses {} {} ({:?}) with {}: {}",
            self.method,
            self.path,
            self.query,
            refusal.code,
            refusal.message()
        )
    }
}

/// The HTTP answer of a refusal: its status code and `Status` body.
pub fn answer(refusal: &Refusal) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(refusal.code).unwrap())
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(&refusal.body).unwrap()))
        .unwrap()
}

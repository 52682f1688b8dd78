//! The strict half of every tower-test mock API server: each request is checked as a real
//! kube-apiserver checks it (`kube_syntax`: selectors, field managers, the object against the
//! rules of its kind or its CRD, name and namespace against the URL) on the resource types the
//! test's [`Catalog`] serves, before a mock answers it; a request a real server refuses is
//! refused the same way (400 BadRequest, 422 Invalid with its causes).
//!
//! A refusal is never swallowed: it is printed when it happens and kept, and the owner of the
//! log ([`Refusals`], held by [`StrictHandle`] or by the test once detached) panics when it is
//! dropped with refusals no test has [taken](Refusals::take). So every test that talks to a
//! mock API server fails when the code under test sends anything a real server would refuse.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use kube::client::Body;
use kube_syntax::object::{Catalog, Completeness};
use kube_syntax::status::{self, Refusal};
use serde_json::Value;
use tower_test::mock::{self, Handle, SendResponse};

/// The test end of a tower-test mock client.
pub type ApiHandle = Handle<Request<Body>, Response<Body>>;

/// The content type of a server-side apply.
pub const APPLY: &str = status::APPLY_PATCH;

pub use kube_syntax::status::parse_query;

/// One request as a mock API server receives it.
#[derive(Debug, Clone)]
pub struct Received {
    /// GET, PATCH, POST, PUT, DELETE.
    pub method: String,
    /// The URL path.
    pub path: String,
    /// The query, decoded.
    pub query: BTreeMap<String, String>,
    /// The Content-Type header (empty when absent).
    pub content_type: String,
    /// The JSON body: null when empty, the text as a JSON string when it is not JSON (a real
    /// server refuses that as not a JSON object, and so does [`Received::check`]).
    pub body: Value,
}

impl Received {
    /// Reads a request, body and all.
    pub async fn read(request: Request<Body>) -> Self {
        let (parts, body) = request.into_parts();
        let bytes = body.collect_bytes().await.unwrap();
        let body = if bytes.is_empty() {
            Value::Null
        } else {
            serde_json::from_slice(&bytes)
                .unwrap_or_else(|_| Value::String(String::from_utf8_lossy(&bytes).into_owned()))
        };
        Self {
            method: parts.method.to_string(),
            path: parts.uri.path().to_owned(),
            query: parse_query(parts.uri.query().unwrap_or("")),
            content_type: parts
                .headers
                .get(http::header::CONTENT_TYPE)
                .map(|v| v.to_str().unwrap().to_owned())
                .unwrap_or_default(),
            body,
        }
    }

    /// The refusal a real API server serving `catalog` gives this request, if any. Checked as
    /// under `fieldValidation=Strict` when the request names none: a real server would drop a
    /// field the CRD does not declare (with a warning), and code sending one is a bug the
    /// tests should see.
    pub fn check(&self, catalog: &Catalog) -> Result<(), Refusal> {
        let mut query = self.query.clone();
        query
            .entry("fieldValidation".to_owned())
            .or_insert_with(|| "Strict".to_owned());
        let request = status::Request {
            method: &self.method,
            path: &self.path,
            query: &query,
            content_type: &self.content_type,
            body: (!self.body.is_null()).then_some(&self.body),
        };
        catalog.check_request(&request)
    }

    /// A server-side apply.
    pub fn is_apply(&self) -> bool {
        self.method == "PATCH" && self.content_type == APPLY
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

/// The refusal a real API server serving `catalog` gives an object it would store (the whole
/// result of an apply, or a created object), if any: 422 Invalid with every cause.
pub fn check_stored(catalog: &Catalog, object: &Value) -> Result<(), Refusal> {
    catalog
        .refusal(object, Completeness::Whole)
        .map_or(Ok(()), Err)
}

/// The HTTP answer of a refusal: its status code and `Status` body.
pub fn answer(refusal: &Refusal) -> Response<Body> {
    Response::builder()
        .status(StatusCode::from_u16(refusal.code).unwrap())
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Body::from(serde_json::to_vec(&refusal.body).unwrap()))
        .unwrap()
}

/// Answers with `status` and the JSON `body`.
pub fn respond(send: SendResponse<Response<Body>>, status: u16, body: &Value) {
    respond_bytes(send, status, serde_json::to_vec(body).unwrap());
}

/// Answers with `status` and `body` as it is.
pub fn respond_bytes(send: SendResponse<Response<Body>>, status: u16, body: Vec<u8>) {
    send.send_response(
        Response::builder()
            .status(StatusCode::from_u16(status).unwrap())
            .body(Body::from(body))
            .unwrap(),
    );
}

/// The refusals given so far, shared by a mock API server and the test's [`Refusals`].
#[derive(Debug, Clone, Default)]
pub struct RefusalLog(Arc<Mutex<Vec<String>>>);

impl RefusalLog {
    /// Answers `received` with `refusal`, and records and prints it.
    pub fn refuse(
        &self,
        received: &Received,
        send: SendResponse<Response<Body>>,
        refusal: &Refusal,
    ) {
        let line = format!(
            "{} {} -> {} {}: {}",
            received.method,
            received.path,
            refusal.code,
            refusal.body["reason"].as_str().unwrap_or(""),
            refusal.message()
        );
        eprintln!("mock API server refused: {line}");
        self.0.lock().unwrap().push(line);
        respond(send, refusal.code, &refusal.body);
    }

    /// The refusals given so far, without taking them.
    pub fn peek(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }
}

/// The owner of a [`RefusalLog`]: dropped with refusals no test has taken, it panics, so a
/// test whose requests a real API server would refuse fails.
#[must_use = "the refusals are checked when this is dropped: keep it for the whole test"]
#[derive(Debug)]
pub struct Refusals {
    log: RefusalLog,
}

impl Refusals {
    /// A new log and its owner.
    pub fn new() -> (Self, RefusalLog) {
        let log = RefusalLog::default();
        (Self { log: log.clone() }, log)
    }

    /// The refusals given so far, taken: a test that expects them says so by taking them.
    pub fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.0.lock().unwrap())
    }

    /// The refusals given so far, without taking them (for messages).
    pub fn peek(&self) -> Vec<String> {
        self.log.peek()
    }
}

impl Drop for Refusals {
    fn drop(&mut self) {
        let refused = self.log.peek();
        if refused.is_empty() {
            return;
        }
        let message = format!(
            "the mock API server refused {} requests, as a real kube-apiserver would:\n  {}",
            refused.len(),
            refused.join("\n  ")
        );
        if std::thread::panicking() {
            eprintln!("{message}");
        } else {
            panic!("{message}");
        }
    }
}

/// A tower-test handle that refuses what a real API server refuses: [`StrictHandle::next_request`]
/// answers every refused request itself and yields only those a real server accepts. It owns
/// its [`Refusals`] (checked when it is dropped) unless [detached](StrictHandle::detach).
#[must_use = "the handle checks its refusals when it is dropped"]
pub struct StrictHandle {
    handle: ApiHandle,
    catalog: &'static Catalog,
    log: RefusalLog,
    owner: Option<Refusals>,
}

impl StrictHandle {
    /// A strict handle over a tower-test handle, serving `catalog`, owning its refusals.
    pub fn new(handle: ApiHandle, catalog: &'static Catalog) -> Self {
        let (owner, log) = Refusals::new();
        Self {
            handle,
            catalog,
            log,
            owner: Some(owner),
        }
    }

    /// The handle without the owner of its refusals, and the owner: for a handle moved into a
    /// task (a panic there would be swallowed), the test keeps the owner.
    pub fn detach(mut self) -> (Self, Refusals) {
        let owner = self.owner.take().expect("not detached yet");
        (self, owner)
    }

    /// The log the refusals go to.
    pub fn log(&self) -> &RefusalLog {
        &self.log
    }

    /// The refusals so far, taken (see [`Refusals::take`]).
    pub fn take_refusals(&self) -> Vec<String> {
        std::mem::take(&mut *self.log.0.lock().unwrap())
    }

    /// The next request a real API server accepts; those it refuses are answered on the way.
    /// `None` once the client is gone.
    pub async fn next_request(&mut self) -> Option<(Received, SendResponse<Response<Body>>)> {
        self.next_request_seeing(|_, _| {}).await
    }

    /// [`StrictHandle::next_request`], telling `refused` of each request refused on the way.
    pub async fn next_request_seeing(
        &mut self,
        mut refused: impl FnMut(&Received, &Refusal),
    ) -> Option<(Received, SendResponse<Response<Body>>)> {
        loop {
            let (request, send) = self.handle.next_request().await?;
            let received = Received::read(request).await;
            match received.check(self.catalog) {
                Ok(()) => return Some((received, send)),
                Err(refusal) => {
                    refused(&received, &refusal);
                    self.log.refuse(&received, send, &refusal);
                }
            }
        }
    }
}

/// A kube client on a tower-test mock, and the strict end of it, serving `catalog`.
pub fn pair(catalog: &'static Catalog) -> (kube::Client, StrictHandle) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    (
        kube::Client::new(service, "default"),
        StrictHandle::new(handle, catalog),
    )
}

//! A tower-test mock API server shared by the test binaries that check the operator's requests
//! (the reconciler's and the mon migration's): it answers every request, keeps the objects
//! applied (merged as server-side apply merges maps) and reports each request as [`Seen`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use http::{Request, Response, StatusCode};
use kube::client::Body;
use mcs_ceph_operator::FIELD_MANAGER;
use mcs_ceph_operator::mon_migration::MON_FAILOVER_FIELD_MANAGER;
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tower_test::mock::Handle;

/// The test end of a tower-test mock client.
pub type ApiHandle = Handle<Request<Body>, Response<Body>>;

/// The content type of a server-side apply.
pub const APPLY: &str = "application/apply-patch+yaml";

/// One request as the mock API server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// GET, PATCH, POST, DELETE, ...
    pub method: String,
    /// The URL path.
    pub path: String,
    /// The query parameters.
    pub query: BTreeMap<String, String>,
    /// The Content-Type header.
    pub content_type: String,
    /// The JSON body (null when empty).
    pub body: Value,
}

impl Seen {
    /// A forced server-side apply under the field manager `manager`.
    pub fn applied_by(&self, manager: &str) -> bool {
        self.method == "PATCH"
            && self.content_type == APPLY
            && self.query.get("fieldManager").map(String::as_str) == Some(manager)
            && self.query.get("force").map(String::as_str) == Some("true")
    }

    /// A forced apply under the operator's field manager.
    pub fn is_apply(&self) -> bool {
        self.applied_by(FIELD_MANAGER)
    }

    /// A forced apply under the mon migration's own field manager.
    pub fn is_migration_apply(&self) -> bool {
        self.applied_by(MON_FAILOVER_FIELD_MANAGER)
    }
}

/// Server-side apply, as far as these tests need it: maps merge key by key, anything else
/// (lists included) is replaced by what was applied.
pub fn merge(stored: &mut Value, applied: &Value) {
    match (stored, applied) {
        (Value::Object(stored), Value::Object(applied)) => {
            for (key, value) in applied {
                merge(stored.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
        (stored, applied) => *stored = applied.clone(),
    }
}

/// What happened, in order, across the mock API server and the mocks of Ceph and DNS (one
/// line per request, lookup or monmap change).
pub type Journal = Arc<Mutex<Vec<String>>>;

/// A mock API server that answers every request: applies echo their body (200) and are
/// merged into `objects`, Event creations echo theirs (201), GETs and DELETEs answer from
/// `objects` by path (404 otherwise; a DELETE removes the object); `fail_first` requests get a
/// 500 instead. Each request is also written to the `journal`, when given, as `METHOD path` at
/// the moment it arrives.
pub struct ApiServer {
    seen: mpsc::UnboundedReceiver<Seen>,
}

impl ApiServer {
    /// A server with no objects.
    pub fn start(handle: ApiHandle) -> Self {
        Self::start_with(handle, 0, BTreeMap::new(), None)
    }

    /// A server holding `objects` (by path).
    pub fn with_objects(handle: ApiHandle, objects: BTreeMap<String, Value>) -> Self {
        Self::start_with(handle, 0, objects, None)
    }

    /// A server holding `objects` whose first `fail_first` answers are 500s, journaling every
    /// request to `journal` when given.
    pub fn start_with(
        mut handle: ApiHandle,
        fail_first: usize,
        objects: BTreeMap<String, Value>,
        journal: Option<Journal>,
    ) -> Self {
        let (report, seen) = mpsc::unbounded_channel();
        tokio::spawn(async move {
            let mut failures = fail_first;
            let mut objects = objects;
            while let Some((request, send)) = handle.next_request().await {
                let (parts, body) = request.into_parts();
                let bytes = body.collect_bytes().await.unwrap();
                let body: Value = if bytes.is_empty() {
                    Value::Null
                } else {
                    serde_json::from_slice(&bytes).unwrap()
                };
                let query = parts
                    .uri
                    .query()
                    .unwrap_or("")
                    .split('&')
                    .filter_map(|p| p.split_once('='))
                    .map(|(k, v)| (k.to_owned(), v.to_owned()))
                    .collect();
                let seen = Seen {
                    method: parts.method.to_string(),
                    path: parts.uri.path().to_owned(),
                    query,
                    content_type: parts
                        .headers
                        .get(http::header::CONTENT_TYPE)
                        .map(|v| v.to_str().unwrap().to_owned())
                        .unwrap_or_default(),
                    body: body.clone(),
                };
                if let Some(journal) = &journal {
                    journal
                        .lock()
                        .unwrap()
                        .push(format!("{} {}", seen.method, seen.path));
                }
                let _ = report.send(seen.clone());
                let (status, answer) = if failures > 0 {
                    failures -= 1;
                    (
                        StatusCode::INTERNAL_SERVER_ERROR,
                        json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Failure", "message": "etcd is unhappy",
                               "reason": "InternalError", "code": 500}),
                    )
                } else if seen.method == "POST" {
                    (StatusCode::CREATED, body)
                } else if seen.method == "GET" || seen.method == "DELETE" {
                    let found = if seen.method == "GET" {
                        objects.get(&seen.path).cloned()
                    } else {
                        objects.remove(&seen.path)
                    };
                    match found {
                        Some(object) => (StatusCode::OK, object),
                        None => (
                            StatusCode::NOT_FOUND,
                            json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                   "status": "Failure", "message": "not found",
                                   "reason": "NotFound", "code": 404}),
                        ),
                    }
                } else {
                    if seen.content_type == APPLY {
                        merge(
                            objects.entry(seen.path.clone()).or_insert(Value::Null),
                            &body,
                        );
                    }
                    (StatusCode::OK, body)
                };
                send.send_response(
                    Response::builder()
                        .status(status)
                        .body(Body::from(serde_json::to_vec(&answer).unwrap()))
                        .unwrap(),
                );
            }
        });
        Self { seen }
    }

    /// Every request made so far (a reconcile has returned, so all its requests are in).
    pub fn requests(&mut self) -> Vec<Seen> {
        let mut all = Vec::new();
        while let Ok(seen) = self.seen.try_recv() {
            all.push(seen);
        }
        all
    }
}

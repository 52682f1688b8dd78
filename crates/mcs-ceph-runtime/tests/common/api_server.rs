//! A tower-test mock API server shared by the test binaries that check the operator's requests
//! (the reconciler's and the mon migration's): it refuses what a real kube-apiserver refuses
//! ([`super::strict`]), answers every other request, keeps the objects applied (merged as
//! server-side apply merges maps) and reports each request as [`Seen`].

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use mcs_ceph_core::config::FIELD_MANAGER;
use mcs_ceph_runtime::mon_migration::MON_FAILOVER_FIELD_MANAGER;
use serde_json::{Value, json};
use tokio::sync::mpsc;

pub use super::strict::{APPLY, ApiHandle};
use super::strict::{Received, Refusals, StrictHandle, check_stored, respond};

/// One request as the mock API server saw it.
#[derive(Debug, Clone)]
pub struct Seen {
    /// GET, PATCH, POST, DELETE, ...
    pub method: String,
    /// The URL path.
    pub path: String,
    /// The query parameters, decoded.
    pub query: BTreeMap<String, String>,
    /// The Content-Type header.
    pub content_type: String,
    /// The JSON body (null when empty).
    pub body: Value,
    /// The status code of the refusal, when the server refused it as a real one would.
    pub refused: Option<u16>,
}

impl From<&Received> for Seen {
    fn from(received: &Received) -> Self {
        Self {
            method: received.method.clone(),
            path: received.path.clone(),
            query: received.query.clone(),
            content_type: received.content_type.clone(),
            body: received.body.clone(),
            refused: None,
        }
    }
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

/// A mock API server that answers every request a real one accepts (see [`super::strict`]:
/// the others get the real server's 400 or 422, and fail the test unless it
/// [takes](ApiServer::take_refusals) them): applies are merged into `objects` and answer the
/// merged object (200) — refused with 422, and not stored, when the merged object is invalid,
/// as a real server validates the result of an apply — Event creations echo theirs (201), GETs
/// and DELETEs answer from `objects` by path (404 otherwise; a DELETE removes the object);
/// `fail_first` accepted requests get a 500 instead. Each request is also written to the
/// `journal`, when given, as `METHOD path` at the moment it arrives.
#[must_use = "the server checks its refusals when it is dropped: keep it for the whole test"]
pub struct ApiServer {
    seen: mpsc::UnboundedReceiver<Seen>,
    refusals: Refusals,
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
        handle: ApiHandle,
        fail_first: usize,
        objects: BTreeMap<String, Value>,
        journal: Option<Journal>,
    ) -> Self {
        let (report, seen) = mpsc::unbounded_channel();
        let (mut handle, refusals) = StrictHandle::new(handle, super::strict::catalog()).detach();
        tokio::spawn(async move {
            let mut failures = fail_first;
            let mut objects = objects;
            let journal_line = |received: &Received| {
                if let Some(journal) = &journal {
                    journal
                        .lock()
                        .unwrap()
                        .push(format!("{} {}", received.method, received.path));
                }
            };
            loop {
                let next = handle.next_request_seeing(|received, refusal| {
                    journal_line(received);
                    let mut seen = Seen::from(received);
                    seen.refused = Some(refusal.code);
                    let _ = report.send(seen);
                });
                let Some((received, send)) = next.await else {
                    break;
                };
                journal_line(&received);
                let mut seen = Seen::from(&received);
                let (status, answer) = if failures > 0 {
                    failures -= 1;
                    (
                        500,
                        json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                               "status": "Failure", "message": "etcd is unhappy",
                               "reason": "InternalError", "code": 500}),
                    )
                } else if received.method == "POST" {
                    (201, received.body.clone())
                } else if received.method == "GET" || received.method == "DELETE" {
                    let found = if received.method == "GET" {
                        objects.get(&received.path).cloned()
                    } else {
                        objects.remove(&received.path)
                    };
                    match found {
                        Some(object) => (200, object),
                        None => (
                            404,
                            json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
                                   "status": "Failure", "message": "not found",
                                   "reason": "NotFound", "code": 404}),
                        ),
                    }
                } else if received.is_apply() {
                    let mut merged = objects.get(&received.path).cloned().unwrap_or(Value::Null);
                    merge(&mut merged, &received.body);
                    if let Err(refusal) = check_stored(&merged) {
                        seen.refused = Some(refusal.code);
                        let _ = report.send(seen);
                        handle.log().refuse(&received, send, &refusal);
                        continue;
                    }
                    objects.insert(received.path.clone(), merged.clone());
                    (200, merged)
                } else {
                    (200, received.body.clone())
                };
                let _ = report.send(seen);
                respond(send, status, &answer);
            }
        });
        Self { seen, refusals }
    }

    /// Every request made so far (a reconcile has returned, so all its requests are in),
    /// refused ones included.
    pub fn requests(&mut self) -> Vec<Seen> {
        let mut all = Vec::new();
        while let Ok(seen) = self.seen.try_recv() {
            all.push(seen);
        }
        all
    }

    /// The refusals given so far, taken: only a test that expects refusals calls this; any
    /// refusal left when the server is dropped fails the test.
    pub fn take_refusals(&self) -> Vec<String> {
        self.refusals.take()
    }
}

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! Leader election (`clusterset_daemon::lease`, whose rules are `kube-lease`'s and tested
//! there) as the operator runs it: the Lease requests of the elector against a tower-test mock API server that refuses what a real one refuses
//! (`common::strict`; paths, methods, bodies, `resourceVersion`, what a 404 or a 409 leads
//! to), and the election loop under paused time.

mod common;

use std::time::Duration;

use clusterset_daemon::Clock;
use clusterset_daemon::lease::{Elector, Leadership, LeaseError, LeaseSettings, Standing};
use common::strict::{self, Received as Seen, StrictHandle, respond};
use http::StatusCode;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube_lease::release;
use mcs_ceph_runtime::metrics::Metrics;
use serde_json::{Value, json};

const PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/ops/leases";

fn settings(identity: &str) -> LeaseSettings {
    LeaseSettings::new("mcs-ceph-operator", "ops", identity)
}

fn t0() -> Timestamp {
    "2026-05-01T12:00:00Z".parse().unwrap()
}

fn at(seconds: i64) -> Timestamp {
    t0().checked_add(SignedDuration::from_secs(seconds))
        .unwrap()
}

/// A Lease held by `holder`, renewed at `renewed`, with the given transitions and version.
fn lease(holder: Option<&str>, renewed: Timestamp, transitions: i32, version: &str) -> Lease {
    Lease {
        metadata: ObjectMeta {
            name: Some("mcs-ceph-operator".into()),
            namespace: Some("ops".into()),
            resource_version: Some(version.into()),
            ..ObjectMeta::default()
        },
        spec: Some(LeaseSpec {
            holder_identity: holder.map(str::to_owned),
            lease_duration_seconds: Some(15),
            acquire_time: Some(MicroTime(t0())),
            renew_time: Some(MicroTime(renewed)),
            lease_transitions: Some(transitions),
            ..LeaseSpec::default()
        }),
    }
}

// ---- the elector against a mock API server ----

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": reason, "reason": reason, "code": code})
}

/// An elector whose clock starts at `t0` and follows tokio's paused time. Must be called in a
/// runtime started paused.
fn elector(identity: &str) -> (Elector, StrictHandle) {
    let (client, handle) = strict::pair();
    let clock = Clock::following_tokio(t0());
    (Elector::new(client, settings(identity), clock), handle)
}

/// Answers one request a real API server accepts with `answer`, recording it (one it refuses
/// is refused, and fails the test when the handle is dropped).
async fn serve_one(
    handle: &mut StrictHandle,
    seen: &mut Vec<Seen>,
    answer: &mut impl FnMut(&Seen) -> (StatusCode, Value),
) {
    let (request, send) = handle.next_request().await.unwrap();
    let (code, body) = answer(&request);
    seen.push(request);
    respond(send, code.as_u16(), &body);
}

/// One attempt, with `answer` serving every request it makes; the requests in order.
async fn attempt(
    elector: &mut Elector,
    handle: &mut StrictHandle,
    mut answer: impl FnMut(&Seen) -> (StatusCode, Value),
) -> (Result<Standing, LeaseError>, Vec<Seen>) {
    let mut seen = Vec::new();
    let attempt = elector.attempt();
    let mut attempt = std::pin::pin!(attempt);
    loop {
        tokio::select! {
            result = &mut attempt => return (result, seen),
            () = serve_one(handle, &mut seen, &mut answer) => {}
        }
    }
}

fn methods(seen: &[Seen]) -> Vec<(String, String)> {
    seen.iter()
        .map(|s| (s.method.clone(), s.path.clone()))
        .collect()
}

fn get() -> (String, String) {
    ("GET".into(), format!("{PATH}/mcs-ceph-operator"))
}

/// Echoes a written Lease back with a new resourceVersion.
fn stored(body: &Value, version: &str) -> Value {
    let mut body = body.clone();
    body["metadata"]["resourceVersion"] = json!(version);
    body
}

#[tokio::test(start_paused = true)]
async fn a_missing_lease_is_created_with_a_post() {
    let (mut elector, mut handle) = elector("a");
    let (result, seen) = attempt(&mut elector, &mut handle, |s| match s.method.as_str() {
        "GET" => (StatusCode::NOT_FOUND, status(404, "NotFound")),
        _ => (StatusCode::CREATED, stored(&s.body, "1")),
    })
    .await;
    assert_eq!(result.unwrap(), Standing::Leader);
    assert!(elector.is_leading());
    assert_eq!(methods(&seen), vec![get(), ("POST".into(), PATH.into())]);
    let body = &seen[1].body;
    assert_eq!(body["kind"], "Lease");
    assert_eq!(body["metadata"]["name"], "mcs-ceph-operator");
    assert_eq!(body["spec"]["holderIdentity"], "a");
    assert_eq!(body["spec"]["leaseDurationSeconds"], 15);
    assert_eq!(body["spec"]["leaseTransitions"], 0);
    assert!(body["metadata"].get("resourceVersion").is_none());

    // The next attempt renews with the version the create returned.
    let (result, seen) = attempt(&mut elector, &mut handle, |s| match s.method.as_str() {
        "GET" => (StatusCode::OK, to_value(&lease(Some("a"), t0(), 0, "1"))),
        _ => (StatusCode::OK, stored(&s.body, "2")),
    })
    .await;
    assert_eq!(result.unwrap(), Standing::Leader);
    assert_eq!(
        methods(&seen),
        vec![get(), ("PUT".into(), format!("{PATH}/mcs-ceph-operator"))]
    );
    assert_eq!(seen[1].body["metadata"]["resourceVersion"], "1");
}

fn to_value(lease: &Lease) -> Value {
    let mut value = serde_json::to_value(lease).unwrap();
    value["apiVersion"] = json!("coordination.k8s.io/v1");
    value["kind"] = json!("Lease");
    value
}

#[tokio::test(start_paused = true)]
async fn a_lease_held_by_another_is_not_written_until_it_expires_then_replaced_with_its_version() {
    let (mut elector, mut handle) = elector("a");
    let held = to_value(&lease(Some("b"), at(-3600), 4, "42"));
    let answer = |s: &Seen| match s.method.as_str() {
        "GET" => (StatusCode::OK, held.clone()),
        _ => (StatusCode::OK, stored(&s.body, "43")),
    };
    // Renewed an hour ago by b's clock: that says nothing about when a may take it; a waits
    // the whole duration of seeing it unchanged (client-go's rule).
    let start = tokio::time::Instant::now();
    for seconds in [0, 5, 14] {
        tokio::time::advance((start + Duration::from_secs(seconds)) - tokio::time::Instant::now())
            .await;
        let (result, seen) = attempt(&mut elector, &mut handle, answer).await;
        assert_eq!(
            result.unwrap(),
            Standing::Follower {
                holder: Some("b".into())
            }
        );
        assert_eq!(methods(&seen), vec![get()], "no write at {seconds} s");
    }
    tokio::time::advance((start + Duration::from_secs(15)) - tokio::time::Instant::now()).await;
    let (result, seen) = attempt(&mut elector, &mut handle, answer).await;
    assert_eq!(result.unwrap(), Standing::Leader);
    assert_eq!(
        methods(&seen),
        vec![get(), ("PUT".into(), format!("{PATH}/mcs-ceph-operator"))]
    );
    let body = &seen[1].body;
    assert_eq!(body["metadata"]["resourceVersion"], "42");
    assert_eq!(body["spec"]["holderIdentity"], "a");
    assert_eq!(body["spec"]["leaseTransitions"], 5);
}

#[tokio::test(start_paused = true)]
async fn a_conflict_means_someone_else_won() {
    // Two replicas create at once: the POST gets 409.
    let (mut elector, mut handle) = elector("a");
    let (result, seen) = attempt(&mut elector, &mut handle, |s| match s.method.as_str() {
        "GET" => (StatusCode::NOT_FOUND, status(404, "NotFound")),
        _ => (StatusCode::CONFLICT, status(409, "AlreadyExists")),
    })
    .await;
    assert_eq!(result.unwrap(), Standing::Follower { holder: None });
    assert!(!elector.is_leading());
    assert_eq!(seen.len(), 2);

    // The leader's renewal meets a changed Lease: it is no longer the leader.
    let (result, _) = attempt(&mut elector, &mut handle, |s| match s.method.as_str() {
        "GET" => (StatusCode::NOT_FOUND, status(404, "NotFound")),
        _ => (StatusCode::CREATED, stored(&s.body, "1")),
    })
    .await;
    assert_eq!(result.unwrap(), Standing::Leader);
    let (result, seen) = attempt(&mut elector, &mut handle, |s| match s.method.as_str() {
        "GET" => (StatusCode::OK, to_value(&lease(Some("a"), t0(), 0, "1"))),
        _ => (StatusCode::CONFLICT, status(409, "Conflict")),
    })
    .await;
    assert_eq!(result.unwrap(), Standing::Follower { holder: None });
    assert!(!elector.is_leading());
    assert_eq!(seen[1].method, "PUT");
}

#[tokio::test(start_paused = true)]
async fn a_server_error_is_an_error_and_writes_nothing() {
    let (mut elector, mut handle) = elector("a");
    let (result, seen) = attempt(&mut elector, &mut handle, |_| {
        (StatusCode::FORBIDDEN, status(403, "Forbidden"))
    })
    .await;
    let error = result.unwrap_err();
    assert!(error.to_string().contains("leases"), "{error}");
    assert_eq!(methods(&seen), vec![get()]);
}

// ---- the election loop ----

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_stops_before_the_lease_expires() {
    let (elector, mut handle) = elector("a");
    let metrics = Metrics::new();
    let mut leadership = Leadership::spawn(elector, metrics.leader.clone());
    assert!(!leadership.is_leading());
    let mut seen = Vec::new();
    let mut create = |s: &Seen| match s.method.as_str() {
        "GET" => (StatusCode::NOT_FOUND, status(404, "NotFound")),
        _ => (StatusCode::CREATED, stored(&s.body, "1")),
    };
    serve_one(&mut handle, &mut seen, &mut create).await;
    serve_one(&mut handle, &mut seen, &mut create).await;
    leadership.acquired().await;
    let led_at = tokio::time::Instant::now();
    assert!(leadership.is_leading());
    assert!(metrics.encode().contains("mcs_ceph_operator_leader 1"));

    // From now on the API server fails every request; the leader retries every 2 s and gives
    // up at its 10 s renew deadline, before the 15 s others wait. The test keeps the refusals
    // of the handle that moves into the task.
    let (mut handle, _refusals) = handle.detach();
    let serving = tokio::spawn(async move {
        let mut seen = Vec::new();
        let mut fail = |_: &Seen| {
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                status(500, "InternalError"),
            )
        };
        loop {
            serve_one(&mut handle, &mut seen, &mut fail).await;
        }
    });
    let reason = leadership.lost().await;
    let held = led_at.elapsed();
    assert!(reason.contains("could not be renewed"), "{reason}");
    assert!(
        held >= Duration::from_secs(10) && held < Duration::from_secs(15),
        "gave up after {held:?}"
    );
    assert!(metrics.encode().contains("mcs_ceph_operator_leader 0"));
    serving.abort();
}

#[tokio::test(start_paused = true)]
async fn a_follower_waits_and_a_stopped_leader_hands_the_lease_back() {
    let (elector, mut handle) = elector("a");
    let metrics = Metrics::new();
    let mut leadership = Leadership::spawn(elector, metrics.leader.clone());
    let mut seen = Vec::new();
    // Held by b, renewed every time a looks: a follows.
    let mut version = 0;
    let mut held_by_b = |_: &Seen| {
        version += 1;
        (
            StatusCode::OK,
            to_value(&lease(Some("b"), at(version), 0, &version.to_string())),
        )
    };
    for _ in 0..10 {
        serve_one(&mut handle, &mut seen, &mut held_by_b).await;
    }
    assert!(seen.iter().all(|s| s.method == "GET"), "{seen:?}");
    assert!(!leadership.is_leading());
    assert!(metrics.encode().contains("mcs_ceph_operator_leader 0"));

    // b released it: a takes it at once.
    let released = release(&lease(Some("b"), at(20), 0, "20"), "b", at(20)).unwrap();
    let mut free = |s: &Seen| match s.method.as_str() {
        "GET" => (StatusCode::OK, to_value(&released)),
        _ => (StatusCode::OK, stored(&s.body, "21")),
    };
    serve_one(&mut handle, &mut seen, &mut free).await;
    serve_one(&mut handle, &mut seen, &mut free).await;
    leadership.acquired().await;
    assert_eq!(seen.last().unwrap().body["spec"]["leaseTransitions"], 1);

    // Stopping hands it back: a PUT with no holder.
    let stopping = tokio::spawn(leadership.stop());
    let mut echo = |s: &Seen| (StatusCode::OK, stored(&s.body, "22"));
    serve_one(&mut handle, &mut seen, &mut echo).await;
    stopping.await.unwrap();
    let last = seen.last().unwrap();
    assert_eq!(last.method, "PUT");
    assert_eq!(last.body["metadata"]["resourceVersion"], "21");
    assert!(last.body["spec"].get("holderIdentity").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_release_refused_as_stale_is_decided_again_on_the_lease_as_it_is_now() {
    // a leads with version 1; a renewal it sent was stored (version 2) but its answer never
    // read (a stop cut the attempt short), so its release carries version 1 and gets 409.
    let (mut elector, mut handle) = elector("a");
    let (result, _) = attempt(&mut elector, &mut handle, |s| match s.method.as_str() {
        "GET" => (StatusCode::NOT_FOUND, status(404, "NotFound")),
        _ => (StatusCode::CREATED, stored(&s.body, "1")),
    })
    .await;
    assert_eq!(result.unwrap(), Standing::Leader);
    let mut seen = Vec::new();
    let mut versions = ["409", "2", "3"].into_iter();
    let mut answer = |s: &Seen| match (s.method.as_str(), versions.next().unwrap()) {
        ("PUT", "409") => (StatusCode::CONFLICT, status(409, "Conflict")),
        ("GET", version) => (
            StatusCode::OK,
            to_value(&lease(Some("a"), at(2), 0, version)),
        ),
        (_, version) => (StatusCode::OK, stored(&s.body, version)),
    };
    let release = elector.release();
    let mut release = std::pin::pin!(release);
    let result = loop {
        tokio::select! {
            result = &mut release => break result,
            () = serve_one(&mut handle, &mut seen, &mut answer) => {}
        }
    };
    result.unwrap();
    let named = format!("{PATH}/mcs-ceph-operator");
    assert_eq!(
        methods(&seen),
        vec![("PUT".into(), named.clone()), get(), ("PUT".into(), named)]
    );
    assert_eq!(seen[0].body["metadata"]["resourceVersion"], "1");
    // The second hand-back carries the version read, and no holder.
    assert_eq!(seen[2].body["metadata"]["resourceVersion"], "2");
    assert!(seen[2].body["spec"].get("holderIdentity").is_none());
}

#[tokio::test(start_paused = true)]
async fn a_release_refused_as_stale_hands_back_nothing_once_another_holds_the_lease() {
    let (mut elector, mut handle) = elector("a");
    let (result, _) = attempt(&mut elector, &mut handle, |s| match s.method.as_str() {
        "GET" => (StatusCode::NOT_FOUND, status(404, "NotFound")),
        _ => (StatusCode::CREATED, stored(&s.body, "1")),
    })
    .await;
    assert_eq!(result.unwrap(), Standing::Leader);
    let mut seen = Vec::new();
    let mut answer = |s: &Seen| match s.method.as_str() {
        "PUT" => (StatusCode::CONFLICT, status(409, "Conflict")),
        _ => (StatusCode::OK, to_value(&lease(Some("b"), at(20), 1, "5"))),
    };
    let release = elector.release();
    let mut release = std::pin::pin!(release);
    let result = loop {
        tokio::select! {
            result = &mut release => break result,
            () = serve_one(&mut handle, &mut seen, &mut answer) => {}
        }
    };
    result.unwrap();
    assert_eq!(
        methods(&seen),
        vec![("PUT".into(), format!("{PATH}/mcs-ceph-operator")), get()]
    );
}

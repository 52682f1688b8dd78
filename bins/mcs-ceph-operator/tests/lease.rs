#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! Leader election: the pure decision over Kubernetes Lease semantics, and the Lease requests
//! of the elector against a tower-test mock API server that refuses what a real one refuses
//! (`common::strict`; paths, methods, bodies, `resourceVersion`, what a 404 or a 409 leads
//! to), and the election loop under paused time.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::strict::{self, Received as Seen, StrictHandle, respond};
use http::StatusCode;
use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use mcs_ceph_operator::lease::{
    Decision, Elector, Leadership, LeaseError, LeaseSettings, Observed, Standing, decide, holder,
    release,
};
use mcs_ceph_operator::metrics::Metrics;
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

fn observed(lease: Lease, since: Timestamp) -> Observed {
    Observed { lease, since }
}

fn spec(lease: &Lease) -> &LeaseSpec {
    lease.spec.as_ref().unwrap()
}

// ---- the pure decision ----

#[test]
fn a_missing_lease_is_created_held_by_me() {
    let Decision::Create(lease) = decide(None, &settings("a"), false, t0()) else {
        panic!("create expected");
    };
    let spec = spec(&lease);
    assert_eq!(holder(&lease), Some("a"));
    assert_eq!(spec.lease_duration_seconds, Some(15));
    assert_eq!(spec.acquire_time, Some(MicroTime(t0())));
    assert_eq!(spec.renew_time, Some(MicroTime(t0())));
    assert_eq!(spec.lease_transitions, Some(0));
    assert_eq!(lease.metadata.resource_version, None);
    assert_eq!(lease.metadata.namespace.as_deref(), Some("ops"));
}

#[test]
fn a_free_lease_is_acquired_at_once_with_its_version() {
    let released = release(&lease(Some("b"), at(0), 3, "7"), "b", at(1)).unwrap();
    assert_eq!(holder(&released), None);
    assert_eq!(spec(&released).lease_duration_seconds, Some(1));
    let seen = observed(released, at(2));
    let Decision::Acquire(lease) = decide(Some(&seen), &settings("a"), false, at(2)) else {
        panic!("acquire expected");
    };
    assert_eq!(holder(&lease), Some("a"));
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("7"));
    assert_eq!(spec(&lease).lease_transitions, Some(4));
    assert_eq!(spec(&lease).acquire_time, Some(MicroTime(at(2))));
}

#[test]
fn a_lease_held_by_another_is_taken_only_after_its_duration_unrenewed() {
    let seen = observed(lease(Some("b"), at(0), 2, "9"), at(0));
    assert_eq!(
        decide(Some(&seen), &settings("a"), false, at(14)),
        Decision::Wait {
            holder: "b".into(),
            until: at(15)
        }
    );
    let Decision::Acquire(lease) = decide(Some(&seen), &settings("a"), false, at(15)) else {
        panic!("acquire expected once expired");
    };
    assert_eq!(holder(&lease), Some("a"));
    assert_eq!(lease.metadata.resource_version.as_deref(), Some("9"));
    assert_eq!(spec(&lease).lease_transitions, Some(3));
    assert_eq!(spec(&lease).acquire_time, Some(MicroTime(at(15))));
    assert_eq!(spec(&lease).renew_time, Some(MicroTime(at(15))));
}

#[test]
fn the_holder_renews_keeping_acquire_time_and_transitions() {
    let seen = observed(lease(Some("a"), at(0), 5, "11"), at(0));
    // Also after a restart of the same pod (not leading yet).
    for leading in [true, false] {
        let Decision::Renew(lease) = decide(Some(&seen), &settings("a"), leading, at(2)) else {
            panic!("renew expected");
        };
        assert_eq!(spec(&lease).acquire_time, Some(MicroTime(t0())));
        assert_eq!(spec(&lease).renew_time, Some(MicroTime(at(2))));
        assert_eq!(spec(&lease).lease_transitions, Some(5));
        assert_eq!(lease.metadata.resource_version.as_deref(), Some("11"));
    }
}

#[test]
fn the_holders_clock_is_never_compared_with_mine() {
    // The holder's clock is an hour behind mine, or 10 s ahead: its renewTime says nothing
    // about expiry. Only how long I have seen the same record counts.
    for renewed in [at(-3600), at(10)] {
        let seen = observed(lease(Some("b"), renewed, 0, "1"), at(0));
        assert!(
            matches!(
                decide(Some(&seen), &settings("a"), false, at(1)),
                Decision::Wait { until, .. } if until == at(15)
            ),
            "renewed at {renewed}"
        );
        assert!(matches!(
            decide(Some(&seen), &settings("a"), false, at(15)),
            Decision::Acquire(_)
        ));
    }
}

#[test]
fn a_renewal_seen_restarts_the_wait() {
    let first = Observed::update(None, lease(Some("b"), at(0), 0, "1"), at(0));
    let same = Observed::update(Some(&first), lease(Some("b"), at(0), 0, "1"), at(10));
    assert_eq!(
        same.since,
        at(0),
        "unchanged record: still observed since t0"
    );
    let renewed = Observed::update(Some(&same), lease(Some("b"), at(12), 0, "2"), at(14));
    assert_eq!(renewed.since, at(14));
    assert!(matches!(
        decide(Some(&renewed), &settings("a"), false, at(20)),
        Decision::Wait { until, .. } if until == at(29)
    ));
}

#[test]
fn a_leader_that_sees_another_holder_has_lost() {
    let seen = observed(lease(Some("b"), at(0), 1, "3"), at(0));
    assert_eq!(
        decide(Some(&seen), &settings("a"), true, at(100)),
        Decision::Lost {
            holder: Some("b".into())
        }
    );
    let free = observed(lease(None, at(0), 1, "3"), at(0));
    assert_eq!(
        decide(Some(&free), &settings("a"), true, at(1)),
        Decision::Lost { holder: None }
    );
}

#[test]
fn transitions_count_changes_of_holder() {
    let write = |decision: Decision, version: &str| -> Lease {
        let (Decision::Create(mut lease)
        | Decision::Acquire(mut lease)
        | Decision::Renew(mut lease)) = decision
        else {
            panic!("a write expected, got {decision:?}");
        };
        lease.metadata.resource_version = Some(version.into());
        *lease
    };
    let a = write(decide(None, &settings("a"), false, at(0)), "1");
    let b = write(
        decide(Some(&observed(a, at(0))), &settings("b"), false, at(20)),
        "2",
    );
    assert_eq!(spec(&b).lease_transitions, Some(1));
    let b = write(
        decide(Some(&observed(b, at(20))), &settings("b"), true, at(22)),
        "3",
    );
    assert_eq!(
        spec(&b).lease_transitions,
        Some(1),
        "a renewal is no transition"
    );
    let a = write(
        decide(Some(&observed(b, at(22))), &settings("a"), false, at(40)),
        "4",
    );
    assert_eq!(spec(&a).lease_transitions, Some(2));
    assert_eq!(holder(&a), Some("a"));
}

#[test]
fn only_the_holder_releases() {
    let held = lease(Some("a"), at(0), 0, "1");
    assert_eq!(release(&held, "b", at(1)), None);
    let released = release(&held, "a", at(1)).unwrap();
    assert_eq!(holder(&released), None);
    assert_eq!(released.metadata.resource_version.as_deref(), Some("1"));
}

// ---- the elector against a mock API server ----

fn status(code: u16, reason: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": reason, "reason": reason, "code": code})
}

fn manual_clock() -> (Arc<Mutex<Timestamp>>, mcs_ceph_operator::lease::Clock) {
    let now = Arc::new(Mutex::new(t0()));
    let read = Arc::clone(&now);
    (now, Arc::new(move || *read.lock().unwrap()))
}

fn elector(identity: &str, clock: mcs_ceph_operator::lease::Clock) -> (Elector, StrictHandle) {
    let (client, handle) = strict::pair();
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

#[tokio::test]
async fn a_missing_lease_is_created_with_a_post() {
    let (_, clock) = manual_clock();
    let (mut elector, mut handle) = elector("a", clock);
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

#[tokio::test]
async fn a_lease_held_by_another_is_not_written_until_it_expires_then_replaced_with_its_version() {
    let (now, clock) = manual_clock();
    let (mut elector, mut handle) = elector("a", clock);
    let held = to_value(&lease(Some("b"), at(-3600), 4, "42"));
    let answer = |s: &Seen| match s.method.as_str() {
        "GET" => (StatusCode::OK, held.clone()),
        _ => (StatusCode::OK, stored(&s.body, "43")),
    };
    for seconds in [0, 5, 14] {
        *now.lock().unwrap() = at(seconds);
        let (result, seen) = attempt(&mut elector, &mut handle, answer).await;
        assert_eq!(
            result.unwrap(),
            Standing::Follower {
                holder: Some("b".into())
            }
        );
        assert_eq!(methods(&seen), vec![get()], "no write at {seconds} s");
    }
    *now.lock().unwrap() = at(15);
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

#[tokio::test]
async fn a_conflict_means_someone_else_won() {
    // Two replicas create at once: the POST gets 409.
    let (_, clock) = manual_clock();
    let (mut elector, mut handle) = elector("a", clock);
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

#[tokio::test]
async fn a_server_error_is_an_error_and_writes_nothing() {
    let (_, clock) = manual_clock();
    let (mut elector, mut handle) = elector("a", clock);
    let (result, seen) = attempt(&mut elector, &mut handle, |_| {
        (StatusCode::FORBIDDEN, status(403, "Forbidden"))
    })
    .await;
    let error = result.unwrap_err();
    assert!(error.to_string().contains("leases"), "{error}");
    assert_eq!(methods(&seen), vec![get()]);
}

// ---- the election loop ----

/// A clock that follows tokio's (paused) time.
fn tokio_clock() -> mcs_ceph_operator::lease::Clock {
    let start = tokio::time::Instant::now();
    Arc::new(move || {
        let elapsed = SignedDuration::try_from(start.elapsed()).unwrap();
        t0().checked_add(elapsed).unwrap()
    })
}

#[tokio::test(start_paused = true)]
async fn a_leader_that_cannot_renew_stops_before_the_lease_expires() {
    let (elector, mut handle) = elector("a", tokio_clock());
    let metrics = Arc::new(Metrics::new());
    let mut leadership = Leadership::spawn(elector, Arc::clone(&metrics));
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
    let (elector, mut handle) = elector("a", tokio_clock());
    let metrics = Arc::new(Metrics::new());
    let mut leadership = Leadership::spawn(elector, Arc::clone(&metrics));
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
    assert_eq!(last.body["spec"]["leaseDurationSeconds"], 1);
}

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! Several replicas of the agent: every replica feeds its own core and serves DNS from its own
//! zone, only the holder of the leader Lease writes and heartbeats; a stopped leader hands the
//! Lease over at once, and a leader that cannot renew steps down, still serving DNS, and leads
//! again once it can. The replicas elect through
//! `clusterset_daemon::lease` against one Lease kept by a mock API server with a real one's
//! rules (`common::strict`; create refused with 409 when the Lease exists, replace refused with
//! 409 unless it carries the stored `resourceVersion`).

mod common;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clusterset_agent_runtime::kube_io::{AgentWriter, Feed, WriteError};
use clusterset_agent_runtime::metrics::Metrics;
use clusterset_agent_runtime::readiness::Readiness;
use clusterset_agent_runtime::runtime::{Election, Runtime, Stopped};
use clusterset_daemon::Clock;
use clusterset_daemon::lease::{Elector, Leadership, LeaseSettings};
use clusterset_dns::{ZoneConfig, ZoneStore};
use clusterset_sim as sim;
use futures::channel::mpsc;
use hickory_proto::op::ResponseCode;
use hickory_proto::rr::RecordType;
use k8s_openapi::api::coordination::v1::Lease;
use kube_fake::strict::{StrictHandle, respond};
use mcs_controller::broker::Heartbeat;
use mcs_controller::core::{AgentCore, Input};
use mcs_controller::watch::Event;
use mcs_controller::write::Write;
use mcs_types::ServiceKey;
use serde_json::{Value, json};

const LEASES: &str = "/apis/coordination.k8s.io/v1/namespaces/clusterset-system/leases";

/// The one leader Lease, as the mock API server stores it.
#[derive(Default)]
struct LeaseStore {
    stored: Mutex<Option<Value>>,
    version: Mutex<u64>,
}

fn status(code: u16, reason: &str, message: &str) -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
           "message": message, "reason": reason, "code": code})
}

impl LeaseStore {
    /// Answers one request about the Lease as a real API server would.
    fn answer(&self, method: &str, path: &str, body: &Value) -> (u16, Value) {
        let mut stored = self.stored.lock().unwrap();
        let mut version = self.version.lock().unwrap();
        let store = |stored: &mut Option<Value>, version: &mut u64, mut lease: Value| {
            *version += 1;
            lease["metadata"]["resourceVersion"] = json!(version.to_string());
            *stored = Some(lease.clone());
            lease
        };
        let named = path == format!("{LEASES}/clusterset-agent");
        match (method, named) {
            ("GET", true) => match stored.clone() {
                Some(lease) => (200, lease),
                None => (
                    404,
                    status(404, "NotFound", "leases \"clusterset-agent\" not found"),
                ),
            },
            ("POST", false) if path == LEASES => match *stored {
                Some(_) => (
                    409,
                    status(
                        409,
                        "AlreadyExists",
                        "leases \"clusterset-agent\" already exists",
                    ),
                ),
                None => (201, store(&mut stored, &mut version, body.clone())),
            },
            ("PUT", true) => {
                let current = stored
                    .as_ref()
                    .map(|l| l["metadata"]["resourceVersion"].clone());
                if current.as_ref() != Some(&body["metadata"]["resourceVersion"]) {
                    return (
                        409,
                        status(
                            409,
                            "Conflict",
                            "the object has been modified; please apply your changes to the latest version and try again",
                        ),
                    );
                }
                (200, store(&mut stored, &mut version, body.clone()))
            }
            other => panic!("unexpected request {other:?} {path}"),
        }
    }

    fn holder(&self) -> Option<String> {
        let stored = self.stored.lock().unwrap();
        stored.as_ref()?["spec"]["holderIdentity"]
            .as_str()
            .map(str::to_owned)
    }
}

/// Serves `handle` from `store` until its client is gone; while `failing` is set, every request
/// gets 500 (the API server is in trouble), counted in `refused`.
fn serve(
    mut handle: StrictHandle,
    store: Arc<LeaseStore>,
    failing: Arc<AtomicBool>,
    refused: Arc<AtomicUsize>,
) {
    tokio::spawn(async move {
        while let Some((request, send)) = handle.next_request().await {
            let (code, body) = if failing.load(Ordering::SeqCst) {
                refused.fetch_add(1, Ordering::SeqCst);
                (
                    500,
                    status(500, "InternalError", "etcdserver: request timed out"),
                )
            } else {
                store.answer(&request.method, &request.path, &request.body)
            };
            respond(send, code, &body);
        }
    });
}

/// Records what one replica writes.
#[derive(Default)]
struct Recorder {
    writes: Mutex<Vec<Write>>,
    heartbeats: Mutex<Vec<Heartbeat>>,
}

#[async_trait]
impl AgentWriter for Recorder {
    async fn write(&self, write: &Write) -> Result<(), WriteError> {
        self.writes.lock().unwrap().push(write.clone());
        Ok(())
    }
    async fn heartbeat(&self, heartbeat: &Heartbeat) -> Result<Option<Lease>, WriteError> {
        self.heartbeats.lock().unwrap().push(heartbeat.clone());
        Ok(None)
    }
}

impl Recorder {
    fn wrote(&self) -> usize {
        self.writes.lock().unwrap().len()
    }
    fn heartbeated(&self) -> usize {
        self.heartbeats.lock().unwrap().len()
    }
}

/// One running replica.
struct Replica {
    identity: &'static str,
    writer: Arc<Recorder>,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
    zone: Arc<ZoneStore>,
    failing: Arc<AtomicBool>,
    /// Requests of its election refused while `failing`.
    refused: Arc<AtomicUsize>,
    /// Kept open: the run ends when its feeds end.
    _events: mpsc::UnboundedSender<Feed>,
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<Stopped>,
}

impl Replica {
    fn leads(&self) -> bool {
        self.metrics
            .encode()
            .contains("clusterset_agent_leader 1\n")
    }

    async fn stop(mut self) -> Stopped {
        self.stop.take().unwrap().send(()).unwrap();
        self.task.await.unwrap()
    }
}

fn listed<T>(items: Vec<T>, wrap: fn(Event<T>) -> Input) -> Vec<Input> {
    let mut inputs = vec![wrap(Event::Init)];
    inputs.extend(items.into_iter().map(|i| wrap(Event::InitApply(i))));
    inputs.push(wrap(Event::InitDone));
    inputs
}

/// What every replica's watches list: `shop/web` exported here, `shop/db` imported (from
/// another cluster) with its clusterset IP, nothing on the hub yet.
fn listings() -> Vec<Input> {
    let web = ServiceKey::new("shop", "web");
    let db: mcs_types::v1beta1::ServiceImport = serde_json::from_value(json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
        "metadata": {"name": "db", "namespace": "shop"},
        "spec": {"type": "ClusterSetIP", "ips": ["243.0.0.5"], "ports": [{"port": 5432, "protocol": "TCP"}]}
    }))
    .unwrap();
    let mut inputs = listed(vec![sim::namespace("shop")], Input::Namespace);
    inputs.extend(listed(
        vec![sim::service(&web, "10.96.0.1", &[80])],
        Input::Service,
    ));
    inputs.extend(listed(
        vec![sim::service_export(
            &web,
            k8s_openapi::jiff::Timestamp::now(),
        )],
        Input::ServiceExport,
    ));
    inputs.extend(listed(Vec::new(), Input::LocalEndpointSlice));
    inputs.extend(listed(vec![db], Input::ServiceImport));
    inputs.extend(listed(Vec::new(), Input::ImportedEndpointSlice));
    inputs.extend(listed(Vec::new(), Input::Record));
    inputs.extend(listed(Vec::new(), Input::Lease));
    inputs
}

/// The leader Lease's duration: a follower would wait that long after the last renewal it saw.
const LEASE_DURATION: Duration = Duration::from_secs(4);

/// Starts a replica `identity` electing through `store` ([`LEASE_DURATION`], 3 s renew
/// deadline, 100 ms retry period), fed [`listings`].
fn start(identity: &'static str, store: &Arc<LeaseStore>) -> Replica {
    let (client, handle) = kube_fake::strict::pair(common::strict::catalog());
    let failing = Arc::new(AtomicBool::new(false));
    let refused = Arc::new(AtomicUsize::new(0));
    serve(
        handle,
        Arc::clone(store),
        Arc::clone(&failing),
        Arc::clone(&refused),
    );
    let settings = LeaseSettings::new("clusterset-agent", "clusterset-system", identity)
        .with_timing(
            LEASE_DURATION,
            Duration::from_secs(3),
            Duration::from_millis(100),
        )
        .unwrap();
    let metrics = Arc::new(Metrics::new());
    let leader = metrics.leader.clone();
    let campaign = move || {
        Leadership::spawn(
            Elector::new(client.clone(), settings.clone(), Clock::system()),
            leader.clone(),
        )
    };
    let mut config = sim::cluster_config(0, None).unwrap();
    config.identity = identity.to_owned();
    let writer = Arc::new(Recorder::default());
    let readiness = Arc::new(Readiness::default());
    let zone = Arc::new(ZoneStore::new(ZoneConfig::default()));
    let runtime = Runtime {
        core: AgentCore::follower(config),
        writer: Arc::clone(&writer) as Arc<dyn AgentWriter>,
        metrics: Arc::clone(&metrics),
        readiness: Arc::clone(&readiness),
        zone: Some(Arc::clone(&zone)),
        write_concurrency: 4,
        heartbeat_every: Duration::from_millis(200),
        clock: Clock::system(),
        election: Election::Lease(Box::new(campaign)),
    };
    let (events, feeds) = mpsc::unbounded::<Feed>();
    for input in listings() {
        events.unbounded_send(Feed::Input(Box::new(input))).unwrap();
    }
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runtime.run(feeds, async {
        let _ = stopped.await;
    }));
    Replica {
        identity,
        writer,
        metrics,
        readiness,
        zone,
        failing,
        refused,
        _events: events,
        stop: Some(stop),
        task,
    }
}

/// Waits for `condition` (10 s at most; [`wait_for_longer`]: 20 s, for what may take the renew
/// deadline).
async fn wait_for(what: &str, condition: impl FnMut() -> bool) {
    wait_until(what, Duration::from_secs(10), condition).await;
}

async fn wait_for_longer(what: &str, condition: impl FnMut() -> bool) {
    wait_until(what, Duration::from_secs(20), condition).await;
}

async fn wait_until(what: &str, limit: Duration, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + limit;
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Whether `replica`'s own DNS zone answers `db.shop.svc.clusterset.local` with its clusterset
/// IP.
fn serves_db(replica: &Replica) -> bool {
    let answer = replica
        .zone
        .answer("db.shop.svc.clusterset.local", RecordType::A);
    answer.response_code == ResponseCode::NoError
        && answer
            .answers
            .iter()
            .any(|record| record.to_string().contains("243.0.0.5"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn one_replica_leads_every_replica_serves_dns_and_a_stopped_leader_hands_over_at_once() {
    let store = Arc::new(LeaseStore::default());
    let replicas = [start("agent-a", &store), start("agent-b", &store)];
    wait_for("a leader", || replicas.iter().any(Replica::leads)).await;
    let [a, b] = replicas;
    let (leader, follower) = if a.leads() { (a, b) } else { (b, a) };
    assert_eq!(store.holder().as_deref(), Some(leader.identity));

    // The leader decides and writes (the export's status at least) and heartbeats.
    wait_for("the leader's writes", || leader.writer.wrote() > 0).await;
    wait_for("the leader's heartbeat", || leader.writer.heartbeated() > 0).await;
    // Every replica serves DNS from its own zone, and is ready.
    wait_for("the leader's zone", || serves_db(&leader)).await;
    wait_for("the follower's zone", || serves_db(&follower)).await;
    wait_for("both ready", || {
        leader.readiness.check().is_ok() && follower.readiness.check().is_ok()
    })
    .await;
    // The follower, its caches as warm as the leader's, wrote nothing and sent no heartbeat
    // while the leader sent two more heartbeats.
    let beats = leader.writer.heartbeated();
    wait_for("two more heartbeats of the leader", || {
        leader.writer.heartbeated() >= beats + 2
    })
    .await;
    assert!(!follower.leads());
    assert_eq!(follower.writer.wrote(), 0);
    assert_eq!(follower.writer.heartbeated(), 0);

    // The leader stops (a rolling update): it hands the Lease back on its way out, and the
    // follower takes it at its next check rather than after the Lease's duration.
    let stopped = leader.stop().await;
    assert_eq!(stopped.stepped_down, 0);
    let handed_over = Instant::now();
    wait_for("the follower to lead", || follower.leads()).await;
    assert!(
        handed_over.elapsed() < LEASE_DURATION,
        "took {:?}, the Lease's duration: it was not handed back",
        handed_over.elapsed()
    );
    assert_eq!(store.holder().as_deref(), Some(follower.identity));
    wait_for("the new leader's writes", || follower.writer.wrote() > 0).await;
    wait_for("the new leader's heartbeat", || {
        follower.writer.heartbeated() > 0
    })
    .await;
    assert!(serves_db(&follower));
    let stopped = follower.stop().await;
    assert_eq!(stopped.stepped_down, 0);
    assert_eq!(
        store.holder(),
        None,
        "the last leader handed the Lease back"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_leader_that_cannot_renew_steps_down_keeps_serving_dns_and_leads_again() {
    let store = Arc::new(LeaseStore::default());
    let replica = start("agent-a", &store);
    wait_for("leading", || replica.leads()).await;
    wait_for("a heartbeat", || replica.writer.heartbeated() > 0).await;
    wait_for("the zone", || serves_db(&replica)).await;

    // The API server fails every request: within the renew deadline the replica stops leading;
    // it keeps serving DNS from its zone and writes nothing, not even a heartbeat.
    replica.failing.store(true, Ordering::SeqCst);
    wait_for_longer("stepping down", || !replica.leads()).await;
    let (writes, heartbeats) = (replica.writer.wrote(), replica.writer.heartbeated());
    // It campaigns on while it follows (every attempt refused).
    let refused = replica.refused.load(Ordering::SeqCst);
    wait_for("three more attempts of its campaign", || {
        replica.refused.load(Ordering::SeqCst) >= refused + 3
    })
    .await;
    assert!(serves_db(&replica), "the zone is still served");
    assert!(replica.readiness.check().is_ok());
    assert_eq!(replica.writer.wrote(), writes, "a follower wrote");
    assert_eq!(
        replica.writer.heartbeated(),
        heartbeats,
        "a follower heartbeated"
    );

    // The API server is back: the Lease still names this replica, which leads again and,
    // starting afresh, reconciles and heartbeats again.
    replica.failing.store(false, Ordering::SeqCst);
    wait_for_longer("leading again", || replica.leads()).await;
    wait_for("writes again", || replica.writer.wrote() > writes).await;
    wait_for("heartbeats again", || {
        replica.writer.heartbeated() > heartbeats
    })
    .await;
    assert_eq!(store.holder().as_deref(), Some("agent-a"));
    let stopped = replica.stop().await;
    assert_eq!(stopped.stepped_down, 1);
    assert!(stopped.core.is_leading());
}

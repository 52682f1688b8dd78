#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The watch side of the kube layer against a tower-test mock API server: the list and watch
//! requests every watch makes (path, namespace, label selector, resumption from the listed
//! version), how a list (page by page) becomes `Init` / `InitApply` / `InitDone` inputs and a
//! watch stream `Apply` / `Delete`, and how a failed watch comes out as a `WatchError` feed that
//! the runtime counts while it keeps serving the last listed view.
//!
//! The mock is strict (`common::strict`): a request a real kube-apiserver refuses (a label
//! selector it cannot parse, an invalid object) is answered with the same 400 or 422 and fails
//! the test.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clusterset_agent_runtime::kube_io::{
    AgentWriter, Feed, WriteError, broker_watches, local_watches,
};
use clusterset_agent_runtime::metrics::Metrics;
use clusterset_agent_runtime::readiness::Readiness;
use clusterset_agent_runtime::runtime::Runtime;
use clusterset_dns::wire::{Transport, answer};
use clusterset_dns::{Rcode, ZoneConfig, ZoneStore};
use clusterset_sim as sim;
use futures::StreamExt;
use futures::stream::BoxStream;
use http::{Request, Response, StatusCode};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::client::Body;
use mcs_controller::broker::{self, BrokerRecord, Heartbeat};
use mcs_controller::core::{AgentCore, Input};
use mcs_controller::watch::Event;
use mcs_controller::write::Write;
use mcs_controller::{EndpointMode, ExportRecord, LocalExport};
use mcs_types::{ClusterId, ServiceKey};
use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;
use tower_test::mock::{self, Handle, SendResponse};

mod common;
use common::strict::{self, Received};

type ApiHandle = Handle<Request<Body>, Response<Body>>;

const BROKER: &str = "clusterset-broker";

/// A request as the mock API server saw it, with its query decoded.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
struct Seen {
    method: String,
    path: String,
    query: BTreeMap<String, String>,
}

impl Seen {
    fn is_watch(&self) -> bool {
        self.query.get("watch").map(String::as_str) == Some("true")
    }

    fn label_selector(&self) -> &str {
        self.query.get("labelSelector").map_or("", String::as_str)
    }
}

fn seen(request: &Received) -> Seen {
    Seen {
        method: request.method.clone(),
        path: request.path.clone(),
        query: request.query.clone(),
    }
}

/// What the mock API server does with a request.
enum Reply {
    /// Answer at once.
    Now(StatusCode, Vec<u8>),
    /// Keep the request open (a watch with nothing to say), for the test to answer later.
    Hold,
}

type Held = Arc<Mutex<Vec<(Seen, SendResponse<Response<Body>>)>>>;

/// A strict mock API server: every request is checked with Kubernetes' rules
/// (`common::strict`), reported on `seen`, and answered by `reply`, or, when a real API server
/// would refuse it, answered with that refusal (400, 422) and kept in `refused`. A refusal fails
/// the test: the next [`ApiServer::next`] panics with it, and so does dropping the server,
/// unless the test takes it with [`ApiServer::take_refused`].
struct ApiServer {
    seen: mpsc::UnboundedReceiver<Seen>,
    held: Held,
    refused: Arc<Mutex<Vec<String>>>,
    task: JoinHandle<()>,
}

impl ApiServer {
    fn start(mut handle: ApiHandle, reply: impl Fn(&Seen) -> Reply + Send + 'static) -> Self {
        let (report, reports) = mpsc::unbounded_channel();
        let held: Held = Arc::default();
        let keep = Arc::clone(&held);
        let refused: Arc<Mutex<Vec<String>>> = Arc::default();
        let refusals = Arc::clone(&refused);
        let task = tokio::spawn(async move {
            while let Some((request, send)) = handle.next_request().await {
                let received = Received::read(request).await;
                let request = seen(&received);
                if let Err(refusal) = received.check(strict::catalog()) {
                    refusals.lock().unwrap().push(received.describe(&refusal));
                    let _ = report.send(request);
                    send.send_response(strict::answer(&refusal));
                    continue;
                }
                let _ = report.send(request.clone());
                match reply(&request) {
                    Reply::Now(status, body) => send.send_response(
                        Response::builder()
                            .status(status)
                            .body(Body::from(body))
                            .unwrap(),
                    ),
                    Reply::Hold => keep.lock().unwrap().push((request, send)),
                }
            }
        });
        Self {
            seen: reports,
            held,
            refused,
            task,
        }
    }

    /// The next `n` requests (failing after 10 s).
    async fn next(&mut self, n: usize) -> Vec<Seen> {
        let mut out = Vec::with_capacity(n);
        while out.len() < n {
            let request = tokio::time::timeout(Duration::from_secs(10), self.seen.recv())
                .await
                .unwrap_or_else(|_| panic!("only {} of {n} requests arrived: {out:#?}", out.len()))
                .unwrap();
            self.assert_nothing_refused();
            out.push(request);
        }
        out
    }

    /// Panics with every refused request.
    fn assert_nothing_refused(&self) {
        let refused = self.refused.lock().unwrap();
        assert!(
            refused.is_empty(),
            "the mock API server refused requests of the agent:\n{}",
            refused.join("\n")
        );
    }

    /// The refused requests so far (for tests that expect a refusal); forgets them.
    fn take_refused(&self) -> Vec<String> {
        std::mem::take(&mut *self.refused.lock().unwrap())
    }

    /// Answers the held request that `pick` chooses.
    fn answer_held(&self, pick: impl Fn(&Seen) -> bool, status: StatusCode, body: Vec<u8>) {
        let mut held = self.held.lock().unwrap();
        let index = held
            .iter()
            .position(|(s, _)| pick(s))
            .expect("a held request to answer");
        let (_, send) = held.remove(index);
        send.send_response(
            Response::builder()
                .status(status)
                .body(Body::from(body))
                .unwrap(),
        );
    }
}

impl Drop for ApiServer {
    fn drop(&mut self) {
        self.task.abort();
        if !std::thread::panicking() {
            self.assert_nothing_refused();
        }
    }
}

/// A list answer.
fn list(items: Vec<Value>, resource_version: &str, continue_token: Option<&str>) -> Vec<u8> {
    let mut metadata = json!({"resourceVersion": resource_version});
    if let Some(token) = continue_token {
        metadata["continue"] = json!(token);
    }
    serde_json::to_vec(
        &json!({"apiVersion": "v1", "kind": "List", "metadata": metadata, "items": items}),
    )
    .unwrap()
}

fn status_body(code: u16, reason: &str, message: &str) -> Value {
    json!({
        "kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": message, "reason": reason, "code": code
    })
}

/// A watch answer: one JSON event per line.
fn watch_events(events: &[(&str, Value)]) -> Vec<u8> {
    let mut out = Vec::new();
    for (kind, object) in events {
        out.extend(serde_json::to_vec(&json!({"type": kind, "object": object})).unwrap());
        out.push(b'\n');
    }
    out
}

/// Polls the streams (as the agent does, merged) and hands every feed over.
fn drive(
    streams: Vec<BoxStream<'static, Feed>>,
) -> (mpsc::UnboundedReceiver<Feed>, JoinHandle<()>) {
    let (tx, rx) = mpsc::unbounded_channel();
    let task = tokio::spawn(async move {
        let mut feeds = futures::stream::select_all(streams);
        while let Some(feed) = feeds.next().await {
            if tx.send(feed).is_err() {
                return;
            }
        }
    });
    (rx, task)
}

async fn next_feeds(rx: &mut mpsc::UnboundedReceiver<Feed>, n: usize) -> Vec<String> {
    let mut out = Vec::with_capacity(n);
    while out.len() < n {
        let feed = tokio::time::timeout(Duration::from_secs(10), rx.recv())
            .await
            .unwrap_or_else(|_| panic!("only {} of {n} feeds arrived: {out:#?}", out.len()))
            .unwrap();
        out.push(describe(&feed));
    }
    out
}

fn event<K: kube::Resource>(e: &Event<K>) -> String {
    let id = |k: &K| format!("{}/{}", k.namespace().unwrap_or_default(), k.name_any());
    match e {
        Event::Init => "Init".to_owned(),
        Event::InitApply(k) => format!("InitApply {}", id(k)),
        Event::InitDone => "InitDone".to_owned(),
        Event::Apply(k) => format!("Apply {}", id(k)),
        Event::Delete(k) => format!("Delete {}", id(k)),
    }
}

/// A feed as `<watch> <event>` (the watch named as in the metrics).
fn describe(feed: &Feed) -> String {
    match feed {
        Feed::WatchError {
            source,
            broker,
            unreachable,
            error,
        } => format!("{source} WatchError broker={broker} unreachable={unreachable}: {error}"),
        Feed::Input(input) => match input.as_ref() {
            Input::Service(e) => format!("services {}", event(e)),
            Input::ServiceExport(e) => format!("serviceexports {}", event(e)),
            Input::LocalEndpointSlice(e) => format!("endpointslices {}", event(e)),
            Input::Namespace(e) => format!("namespaces {}", event(e)),
            Input::ServiceImport(e) => format!("serviceimports {}", event(e)),
            Input::ImportedEndpointSlice(e) => format!("imported-endpointslices {}", event(e)),
            Input::Record(e) => format!("exportrecords {}", event(e)),
            Input::Lease(e) => format!("leases {}", event(e)),
        },
    }
}

/// The feeds of one watch, in order.
fn of(feeds: &[String], watch: &str) -> Vec<String> {
    let prefix = format!("{watch} ");
    feeds
        .iter()
        .filter_map(|f| f.strip_prefix(&prefix).map(str::to_owned))
        .collect()
}

fn query(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn list_query(selector: &str) -> BTreeMap<String, String> {
    let mut q = query(&[("limit", "500")]);
    if !selector.is_empty() {
        q.insert("labelSelector".into(), selector.into());
    }
    q
}

fn watch_query(selector: &str, resource_version: &str) -> BTreeMap<String, String> {
    let mut q = query(&[
        ("watch", "true"),
        ("timeoutSeconds", "290"),
        ("allowWatchBookmarks", "true"),
        ("resourceVersion", resource_version),
    ]);
    if !selector.is_empty() {
        q.insert("labelSelector".into(), selector.into());
    }
    q
}

/// The member cluster's watches: (metrics name, path, label selector, listed resourceVersion).
const LOCAL: [(&str, &str, &str, &str); 6] = [
    ("services", "/api/v1/services", "", "101"),
    (
        "serviceexports",
        "/apis/multicluster.x-k8s.io/v1beta1/serviceexports",
        "",
        "102",
    ),
    (
        "endpointslices",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "kubernetes.io/service-name,endpointslice.kubernetes.io/managed-by!=mcs-controller.clusterset.io",
        "103",
    ),
    ("namespaces", "/api/v1/namespaces", "", "104"),
    (
        "serviceimports",
        "/apis/multicluster.x-k8s.io/v1beta1/serviceimports",
        "",
        "105",
    ),
    (
        "imported-endpointslices",
        "/apis/discovery.k8s.io/v1/endpointslices",
        "endpointslice.kubernetes.io/managed-by=mcs-controller.clusterset.io",
        "106",
    ),
];

fn local_row(request: &Seen) -> Option<(&'static str, &'static str, &'static str, &'static str)> {
    LOCAL.iter().copied().find(|(_, path, selector, _)| {
        *path == request.path && *selector == request.label_selector()
    })
}

#[tokio::test]
async fn local_watches_list_then_watch_each_kind_in_all_namespaces_with_their_selectors() {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let mut server = ApiServer::start(handle, |request| match local_row(request) {
        Some(_) if request.is_watch() => Reply::Hold,
        Some((_, _, _, rv)) => Reply::Now(StatusCode::OK, list(vec![], rv, None)),
        None => Reply::Now(
            StatusCode::NOT_FOUND,
            serde_json::to_vec(&status_body(404, "NotFound", "unexpected request")).unwrap(),
        ),
    });
    let (mut feeds, driver) = drive(local_watches(&client));

    // Every watch lists first (all namespaces, its label selector, no field selector, pages of
    // 500), then watches from the listed version. The queries are compared whole, so any other
    // parameter fails the test.
    let requests = server.next(12).await;
    let mut lists: Vec<_> = requests.iter().filter(|r| !r.is_watch()).cloned().collect();
    let mut watches: Vec<_> = requests.iter().filter(|r| r.is_watch()).cloned().collect();
    let get = |path: &str, query| Seen {
        method: "GET".into(),
        path: path.into(),
        query,
    };
    let mut expected_lists: Vec<_> = LOCAL
        .iter()
        .map(|(_, path, selector, _)| get(path, list_query(selector)))
        .collect();
    let mut expected_watches: Vec<_> = LOCAL
        .iter()
        .map(|(_, path, selector, rv)| get(path, watch_query(selector, rv)))
        .collect();
    for v in [
        &mut lists,
        &mut watches,
        &mut expected_lists,
        &mut expected_watches,
    ] {
        v.sort();
    }
    assert_eq!(lists, expected_lists);
    assert_eq!(watches, expected_watches);

    // Each empty list is Init then InitDone for its watch.
    let got = next_feeds(&mut feeds, 12).await;
    for (watch, ..) in LOCAL {
        assert_eq!(of(&got, watch), ["Init", "InitDone"], "{watch}: {got:#?}");
    }
    // The watches are open and quiet: no other request was made.
    assert!(server.seen.try_recv().is_err());
    driver.abort();
}

fn broker_record(cluster: &str, resource_version: Option<&str>) -> Value {
    let key = ServiceKey::new("shop", "web");
    let id = ClusterId::new(cluster).unwrap();
    let created = k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
        Timestamp::from_second(1_800_000_000).unwrap(),
    );
    let service = sim::service(&key, "10.96.0.1", &[80]);
    let record = ExportRecord::from_local(LocalExport {
        cluster_id: &id,
        key: &key,
        export_created: &created,
        export_spec: &Default::default(),
        service: Some(&service),
        endpoint_slices: &[],
        global_ips: &["242.0.0.1".parse().unwrap()],
        mode: EndpointMode::GlobalIngress,
    })
    .unwrap();
    let mut object = BrokerRecord::new(
        record,
        &broker::records_namespace(BROKER, &id),
        Timestamp::from_second(1_800_000_001).unwrap(),
    );
    object.metadata.resource_version = resource_version.map(str::to_owned);
    serde_json::to_value(object).unwrap()
}

fn lease(cluster: &str) -> Value {
    let id = ClusterId::new(cluster).unwrap();
    let lease = Lease {
        metadata: kube::api::ObjectMeta {
            name: Some(broker::lease_name(&id)),
            namespace: Some(BROKER.into()),
            labels: Some(BTreeMap::from([(
                broker::CLUSTER_ID_LABEL.to_owned(),
                cluster.to_owned(),
            )])),
            ..Default::default()
        },
        spec: None,
    };
    serde_json::to_value(lease).unwrap()
}

/// Records are watched in every namespace: each cluster's live in its own.
const RECORDS_PATH: &str = "/apis/clusterset.io/v1alpha1/exportrecords";
const LEASES_PATH: &str = "/apis/coordination.k8s.io/v1/namespaces/clusterset-broker/leases";

#[tokio::test]
async fn broker_watches_list_records_in_every_namespace_and_leases_in_the_broker_namespace() {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let mut server = ApiServer::start(handle, |request| {
        let q = |pairs: &[(&str, &str)]| query(pairs);
        match (request.path.as_str(), &request.query) {
            (RECORDS_PATH, query) if *query == q(&[("limit", "500")]) => Reply::Now(
                StatusCode::OK,
                list(vec![broker_record("c0", None)], "", Some("page-2")),
            ),
            (RECORDS_PATH, query) if *query == q(&[("limit", "500"), ("continue", "page-2")]) => {
                Reply::Now(
                    StatusCode::OK,
                    list(vec![broker_record("c1", None)], "41", None),
                )
            }
            (RECORDS_PATH, query) if *query == watch_query("", "41") => Reply::Now(
                StatusCode::OK,
                watch_events(&[
                    ("ADDED", broker_record("c2", Some("43"))),
                    ("DELETED", broker_record("c0", Some("44"))),
                ]),
            ),
            (LEASES_PATH, query) if *query == list_query("clusterset.io/cluster-id") => {
                Reply::Now(StatusCode::OK, list(vec![lease("c0")], "42", None))
            }
            // Open watches with nothing to say, until the test answers them.
            (LEASES_PATH, _) | (RECORDS_PATH, _) if request.is_watch() => Reply::Hold,
            _ => Reply::Now(
                StatusCode::NOT_FOUND,
                serde_json::to_vec(&status_body(404, "NotFound", "unexpected request")).unwrap(),
            ),
        }
    });
    let (mut feeds, driver) = drive(broker_watches(&client, BROKER));

    // Records in every namespace, Leases in the broker namespace only: records listed in two pages, then watched from the
    // last page's version (and, after that watch ended with two events, from the last event's
    // version); Leases with the cluster-id label selector.
    let requests = server.next(6).await;
    assert!(requests.iter().all(|r| r.method == "GET"), "{requests:#?}");
    let queries_of = |path: &str| -> Vec<BTreeMap<String, String>> {
        requests
            .iter()
            .filter(|r| r.path == path)
            .map(|r| r.query.clone())
            .collect()
    };
    assert_eq!(
        queries_of(RECORDS_PATH),
        [
            query(&[("limit", "500")]),
            query(&[("limit", "500"), ("continue", "page-2")]),
            watch_query("", "41"),
            watch_query("", "44"),
        ]
    );
    assert_eq!(
        queries_of(LEASES_PATH),
        [
            list_query("clusterset.io/cluster-id"),
            watch_query("clusterset.io/cluster-id", "42")
        ]
    );

    let got = next_feeds(&mut feeds, 9).await;
    assert_eq!(
        of(&got, "exportrecords"),
        [
            "Init",
            "InitApply clusterset-broker-c0/c0.shop.web",
            "InitApply clusterset-broker-c1/c1.shop.web",
            "InitDone",
            "Apply clusterset-broker-c2/c2.shop.web",
            "Delete clusterset-broker-c0/c0.shop.web",
        ]
    );
    assert_eq!(
        of(&got, "leases"),
        [
            "Init",
            "InitApply clusterset-broker/clusterset-agent-c0",
            "InitDone"
        ]
    );

    // The Leases watch is answered with a 500: a WatchError feed for the broker's "leases"
    // watch, and after the backoff the watch is retried from the same version (no new list).
    server.answer_held(
        |s| s.path == LEASES_PATH,
        StatusCode::INTERNAL_SERVER_ERROR,
        serde_json::to_vec(&status_body(500, "InternalError", "etcd is overloaded")).unwrap(),
    );
    let error = next_feeds(&mut feeds, 1).await;
    assert_eq!(error.len(), 1);
    assert!(
        error[0].starts_with("leases WatchError broker=true unreachable=true: ")
            && error[0].contains("etcd is overloaded"),
        "{error:?}"
    );
    let retried = server.next(1).await;
    assert_eq!(retried[0].path, LEASES_PATH);
    assert_eq!(
        retried[0].query,
        watch_query("clusterset.io/cluster-id", "42")
    );

    // The retried watch is refused with a 403: the hub answered, so the feed does not say it
    // is unreachable (the agent does not treat the refusal as an outage).
    server.answer_held(
        |s| s.path == LEASES_PATH,
        StatusCode::FORBIDDEN,
        serde_json::to_vec(&status_body(403, "Forbidden", "leases is forbidden")).unwrap(),
    );
    let error = next_feeds(&mut feeds, 1).await;
    assert!(
        error[0].starts_with("leases WatchError broker=true unreachable=false: ")
            && error[0].contains("leases is forbidden"),
        "{error:?}"
    );
    driver.abort();
}

/// Accepts every write (the test is about the watches).
struct AcceptAll;

#[async_trait]
impl AgentWriter for AcceptAll {
    async fn write(&self, _: &Write) -> Result<(), WriteError> {
        Ok(())
    }
    async fn heartbeat(
        &self,
        _: &Heartbeat,
    ) -> Result<Option<k8s_openapi::api::coordination::v1::Lease>, WriteError> {
        Ok(None)
    }
}

/// An A query for `name` in wire form.
fn a_query(name: &str) -> Vec<u8> {
    let mut bytes = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in name.split('.') {
        bytes.push(u8::try_from(label.len()).unwrap());
        bytes.extend_from_slice(label.as_bytes());
    }
    bytes.extend_from_slice(&[0, 0, 1, 0, 1]);
    bytes
}

fn dns_code(zone: &ZoneStore, name: &str) -> Option<Rcode> {
    let mut out = Vec::new();
    answer(&zone.snapshot(), &a_query(name), Transport::Udp, &mut out)
}

async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test]
async fn a_failed_watch_is_counted_and_the_last_listed_view_stays_in_use() {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let import = json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
        "metadata": {"name": "web", "namespace": "shop", "resourceVersion": "5"},
        "spec": {"type": "ClusterSetIP", "ips": ["243.0.0.1"], "ports": [{"port": 80}]}
    });
    let namespace = serde_json::to_value(sim::namespace("shop")).unwrap();
    let mut server = ApiServer::start(handle, move |request| match local_row(request) {
        Some(_) if request.is_watch() => Reply::Hold,
        Some(("serviceimports", _, _, rv)) => {
            Reply::Now(StatusCode::OK, list(vec![import.clone()], rv, None))
        }
        Some(("namespaces", _, _, rv)) => {
            Reply::Now(StatusCode::OK, list(vec![namespace.clone()], rv, None))
        }
        Some((_, _, _, rv)) => Reply::Now(StatusCode::OK, list(vec![], rv, None)),
        None => Reply::Now(
            StatusCode::NOT_FOUND,
            serde_json::to_vec(&status_body(404, "NotFound", "unexpected request")).unwrap(),
        ),
    });

    let zone = Arc::new(ZoneStore::new(ZoneConfig::default()));
    let metrics = Arc::new(Metrics::new());
    let runtime = Runtime {
        core: AgentCore::new(sim::cluster_config(0, None).unwrap()),
        writer: Arc::new(AcceptAll),
        metrics: Arc::clone(&metrics),
        readiness: Arc::new(Readiness::default()),
        zone: Some(Arc::clone(&zone)),
        write_concurrency: 4,
        heartbeat_every: Duration::from_secs(10),
        clock: clusterset_daemon::Clock::system(),
        election: clusterset_agent_runtime::runtime::Election::None,
    };
    let feeds = futures::stream::select_all(local_watches(&client));
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runtime.run(feeds, async {
        let _ = stopped.await;
    }));

    // The lists are in (the imports watch is open): the zone answers the listed import.
    let web = "web.shop.svc.clusterset.local";
    server.next(12).await;
    wait_for("the listed import in DNS", || {
        dns_code(&zone, web) == Some(Rcode::NoError)
    })
    .await;
    assert!(metrics.encode().contains("clusterset_agent_imports 1\n"));

    // The ServiceImport watch reports an error event and ends.
    server.answer_held(
        |s| s.path == "/apis/multicluster.x-k8s.io/v1beta1/serviceimports",
        StatusCode::OK,
        watch_events(&[(
            "ERROR",
            status_body(500, "InternalError", "etcd leader changed"),
        )]),
    );
    let counted = "clusterset_agent_local_errors_total{operation=\"serviceimports\"} 1\n";
    wait_for("the watch error counted", || {
        metrics.encode().contains(counted)
    })
    .await;
    // The watch resumes from the listed version: no new list, nothing forgotten.
    let resumed = server.next(1).await;
    assert_eq!(
        resumed[0].path,
        "/apis/multicluster.x-k8s.io/v1beta1/serviceimports"
    );
    assert_eq!(resumed[0].query, watch_query("", "105"));
    assert_eq!(dns_code(&zone, web), Some(Rcode::NoError));
    assert!(zone.snapshot().is_synced());
    assert!(metrics.encode().contains("clusterset_agent_imports 1\n"));

    stop.send(()).unwrap();
    let core = task.await.unwrap().core;
    assert_eq!(core.stats().imports, 1);
}

/// The `managed-by` value the agent used before a real API server refused it: a label value
/// may not contain `/`.
const OLD_MANAGED_BY_SELECTOR: &str =
    "endpointslice.kubernetes.io/managed-by=clusterset.io/mcs-controller";

#[tokio::test]
async fn the_old_managed_by_selector_is_refused_with_400_bad_request_as_a_real_api_server_does() {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let client = kube::Client::new(service, "default");
    let mut server = ApiServer::start(handle, |_| {
        Reply::Now(StatusCode::OK, list(vec![], "7", None))
    });
    let slices = kube::Api::<k8s_openapi::api::discovery::v1::EndpointSlice>::all(client);

    // What the agent's imported-slices watch listed with before the fix: every list was a 400.
    let params = kube::api::ListParams::default().labels(OLD_MANAGED_BY_SELECTOR);
    let error = slices.list(&params).await.unwrap_err();
    let kube::Error::Api(status) = error else {
        panic!("expected the API server's answer, got {error:?}")
    };
    assert_eq!(status.code, 400, "{status:?}");
    assert_eq!(status.reason, "BadRequest", "{status:?}");
    assert!(
        status.message.starts_with(
            "unable to parse requirement: values[0][endpointslice.kubernetes.io/managed-by]: Invalid value: \"clusterset.io/mcs-controller\""
        ),
        "{}",
        status.message
    );
    let refused = server.take_refused();
    assert_eq!(refused.len(), 1, "{refused:#?}");
    assert!(refused[0].contains(OLD_MANAGED_BY_SELECTOR), "{refused:?}");

    // The selectors the agent sends now are accepted by the same mock.
    for selector in [
        mcs_controller::watch::imported_slices_selector(),
        mcs_controller::watch::local_slices_selector(),
    ] {
        let params = kube::api::ListParams::default().labels(&selector);
        slices.list(&params).await.unwrap();
    }
    // Three requests seen: the refused one (already taken) and the two accepted lists.
    assert_eq!(server.next(3).await.len(), 3);
}

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The reconciler against a tower-test mock API server that refuses what a real one refuses
//! (`common::strict`; as kube-rs' controller-rs tests do): every request a reconcile makes —
//! method, path, query (fieldManager, force), content type and body — for a guard failure, a
//! first enable, exports pending / invalid / conflicting, a DNS failure and its recovery
//! (mockall resolver), the steady state, MCS disabled, unsynced caches, a failed write and a
//! write refused with 422. The caches are real kube reflector stores filled from a
//! snapshot; the objects the operator applies are read back from the request bodies into the
//! next snapshot, so each test walks a cluster through the real HTTP layer. With the mon
//! migration on, one test walks a whole replacement of mons a, b, c by d, e, f on global IPs,
//! reconcile by reconcile, against a model of Ceph's monmap and quorum.

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use clusterset_dns::resolver::MockClustersetResolver;
use clusterset_dns::{Resolution, ResolveError};
use common::api_server::*;
use common::*;
use http::{Request, Response};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube::client::Body;
use kube::runtime::controller::Action;
use kube::runtime::reflector::{self, Store};
use kube::runtime::watcher::Event;
use mcs_ceph_api::{CephCluster, CephClusterAddressing};
use mcs_ceph_core::config::{Config, FIELD_MANAGER};
use mcs_ceph_core::decide::Write;
use mcs_ceph_core::snapshot::{McsApi, McsVersion, Snapshot};
use mcs_ceph_runtime::kube_io::{Caches, KubeApi, McsStores};
use mcs_ceph_runtime::metrics::Metrics;
use mcs_ceph_runtime::mon_migration::{
    AdminSource, MIGRATION_ANNOTATION, MIGRATION_ENABLED, MIGRATION_REQUEUE,
    MON_FAILOVER_FIELD_MANAGER, MonMigration, stored_state,
};
use mcs_ceph_runtime::reconciler::{
    Context, LookupMemories, ReconcileError, error_policy, reconcile,
};
use mcs_types::v1alpha1;
use mon_failover::{MockCephMonAdmin, QuorumStatus};
use serde_json::{Value, json};
use tower_test::mock;

fn store<K>(objects: impl IntoIterator<Item = K>) -> Store<K>
where
    K: kube::Resource<DynamicType = ()> + Clone + 'static,
{
    let (reader, mut writer) = reflector::store();
    writer.apply_watcher_event(&Event::Init);
    for object in objects {
        writer.apply_watcher_event(&Event::InitApply(object));
    }
    writer.apply_watcher_event(&Event::InitDone);
    reader
}

/// Reflector caches holding the snapshot's objects (and nothing of other namespaces but a
/// decoy, which must not leak into the snapshot), its cluster among them.
async fn caches(snapshot: &Snapshot, synced: bool) -> Arc<Caches> {
    caches_holding(snapshot, synced, true).await
}

/// [`caches`], with the snapshot's cluster in the CephCluster cache or (deleted meanwhile) not.
async fn caches_holding(snapshot: &Snapshot, synced: bool, cluster_cached: bool) -> Arc<Caches> {
    let mut decoy = osd_deployment(99, None);
    decoy.metadata.namespace = Some("other-namespace".into());
    let mcs = match snapshot.mcs_api {
        McsApi::Served(McsVersion::V1Beta1) => McsStores::V1Beta1 {
            exports: store(snapshot.exports.clone()),
            imports: store(snapshot.imports.clone()),
        },
        McsApi::Served(McsVersion::V1Alpha1) => McsStores::V1Alpha1 {
            exports: store(
                snapshot
                    .exports
                    .iter()
                    .cloned()
                    .map(v1alpha1::ServiceExport::from),
            ),
            imports: store(
                snapshot
                    .imports
                    .iter()
                    .cloned()
                    .map(v1alpha1::ServiceImport::from),
            ),
        },
        McsApi::Missing(_) => McsStores::None,
    };
    let clusters = cluster_cached.then(|| snapshot.cluster.clone());
    let caches = Caches::new(
        store::<CephCluster>(clusters),
        store::<Service>(snapshot.services.clone()),
        store::<Deployment>(snapshot.deployments.iter().cloned().chain([decoy])),
        store::<ConfigMap>(snapshot.mon_endpoints.clone()),
        store::<CephClusterAddressing>(snapshot.prior.clone()),
        mcs,
        snapshot.mcs_api.clone(),
    );
    if synced {
        caches.wait_synced().await.unwrap();
    }
    Arc::new(caches)
}

/// One reconcile of the snapshot's cluster at `now` against a fresh mock API server.
async fn run(
    snapshot: &Snapshot,
    now: Timestamp,
    resolver: MockClustersetResolver,
    fail_first: usize,
) -> (Result<Action, ReconcileError>, Vec<Seen>) {
    let (result, requests, _) =
        run_with(snapshot, now, resolver, fail_first, None, BTreeMap::new()).await;
    (result, requests)
}

/// [`run`] with the mon migration (`--mon-migration`) on when `admin` is given, and GETs
/// answered from `objects`; also returns the metrics.
async fn run_with(
    snapshot: &Snapshot,
    now: Timestamp,
    resolver: MockClustersetResolver,
    fail_first: usize,
    admin: Option<MockCephMonAdmin>,
    objects: BTreeMap<String, Value>,
) -> (Result<Action, ReconcileError>, Vec<Seen>, Arc<Metrics>) {
    run_journaled(snapshot, now, resolver, fail_first, admin, objects, None).await
}

/// [`run_with`], writing every request to `journal` as it arrives.
async fn run_journaled(
    snapshot: &Snapshot,
    now: Timestamp,
    resolver: MockClustersetResolver,
    fail_first: usize,
    admin: Option<MockCephMonAdmin>,
    objects: BTreeMap<String, Value>,
    journal: Option<Journal>,
) -> (Result<Action, ReconcileError>, Vec<Seen>, Arc<Metrics>) {
    let server = Server {
        fail_first,
        objects,
        journal,
    };
    let (result, mut server, metrics) =
        reconcile_on(snapshot, now, resolver, admin, server, Config::default()).await;
    // Dropping the server fails the test if it refused any request.
    (result, server.requests(), metrics)
}

/// How the mock API server of a reconcile starts: its first `fail_first` answers are 500s,
/// it holds `objects` (by path) and journals every request to `journal` when given.
struct Server {
    fail_first: usize,
    objects: BTreeMap<String, Value>,
    journal: Option<Journal>,
}

/// One reconcile of the snapshot's cluster at `now` with `config` against a fresh mock API
/// server, returned with the result (a test that expects refusals takes them from it).
async fn reconcile_on(
    snapshot: &Snapshot,
    now: Timestamp,
    resolver: MockClustersetResolver,
    admin: Option<MockCephMonAdmin>,
    server: Server,
    config: Config,
) -> (Result<Action, ReconcileError>, ApiServer, Arc<Metrics>) {
    let operator = Operator {
        metrics: Arc::new(Metrics::new()),
        cluster_cached: true,
    };
    reconcile_in(snapshot, now, resolver, admin, server, config, operator).await
}

thread_local! {
    /// The lookups the operator remembers from one reconcile to the next: one operator
    /// process per test (each test runs on its own thread), as the runtime keeps them.
    static OPERATOR_LOOKUPS: Arc<LookupMemories> = Arc::new(LookupMemories::default());
}

/// What a reconcile shares with the operator around it: the metrics (kept from one reconcile
/// to the next) and whether the CephCluster cache still holds the cluster.
struct Operator {
    metrics: Arc<Metrics>,
    cluster_cached: bool,
}

/// [`reconcile_on`] in `operator`.
async fn reconcile_in(
    snapshot: &Snapshot,
    now: Timestamp,
    resolver: MockClustersetResolver,
    admin: Option<MockCephMonAdmin>,
    server: Server,
    config: Config,
    operator: Operator,
) -> (Result<Action, ReconcileError>, ApiServer, Arc<Metrics>) {
    // The API server also holds the Deployments the caches hold: an apply to one is checked
    // on its merged result, as a real server checks it.
    let mut objects = server.objects;
    for deployment in &snapshot.deployments {
        let meta = &deployment.metadata;
        objects
            .entry(format!(
                "/apis/apps/v1/namespaces/{}/deployments/{}",
                meta.namespace.as_deref().unwrap(),
                meta.name.as_deref().unwrap()
            ))
            .or_insert_with(|| serde_json::to_value(deployment).unwrap());
    }
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let api_server = ApiServer::start_with(handle, server.fail_first, objects, server.journal);
    let client = kube::Client::new(service, "default");
    let metrics = operator.metrics;
    let context = Arc::new(Context {
        api: Arc::new(KubeApi::new(
            client.clone(),
            Some("mcs-ceph-operator-0".into()),
        )),
        resolver: Arc::new(resolver),
        caches: caches_holding(snapshot, true, operator.cluster_cached).await,
        config,
        clock: clusterset_daemon::Clock::from_fn(move || now),
        metrics: Arc::clone(&metrics),
        lookup_concurrency: 4,
        lookups: OPERATOR_LOOKUPS.with(Arc::clone),
        mon_migration: admin.map(|admin| {
            Arc::new(MonMigration::new(
                client,
                AdminSource::Fixed(Arc::new(admin)),
            ))
        }),
    });
    let result = reconcile(Arc::new(snapshot.cluster.clone()), context).await;
    (result, api_server, metrics)
}

fn no_lookups() -> MockClustersetResolver {
    let mut resolver = MockClustersetResolver::new();
    resolver.expect_resolve().never();
    resolver
}

/// A resolver that answers each OSD name with its global IP, except `failing` (SERVFAIL),
/// and expects exactly `expected` lookups.
fn resolver(expected: usize, failing: Option<u32>) -> MockClustersetResolver {
    let mut resolver = MockClustersetResolver::new();
    resolver
        .expect_resolve()
        .times(expected)
        .returning(move |name| {
            let text = name.to_string();
            let id: u32 = text
                .strip_prefix("east.rook-ceph-osd-")
                .and_then(|rest| rest.split('.').next())
                .and_then(|id| id.parse().ok())
                .unwrap_or_else(|| panic!("unexpected lookup {text}"));
            if Some(id) == failing {
                return Err(ResolveError::ServerError {
                    name: text,
                    code: "SERVFAIL".into(),
                    attempts: 4,
                    hint: ": a clusterset DNS server answers SERVFAIL until it has synced its data",
                });
            }
            Ok(Resolution {
                name: name.clone(),
                addresses: vec![osd_global_ip(id)],
                valid_until: Instant::now() + Duration::from_secs(30),
            })
        });
    resolver
}

/// Reads the writes back from the requests into the snapshot (what the API server, and so the
/// watch caches, would now hold) and returns the number of applies under the operator's field
/// manager. The mon migration's own applies (its state in the status object, its keys of
/// `rook-ceph-mon-endpoints`) are merged in too, deleted Services and ServiceExports leave the
/// snapshot, and a status apply keeps `status.monFailover` (another manager's field); mon and
/// canary Deployments are not in the snapshot (the caches hold OSD Deployments only).
fn take_back(snapshot: &mut Snapshot, requests: &[Seen]) -> usize {
    let mut count = 0;
    for seen in requests {
        let name = seen.path.rsplit('/').next().unwrap().to_owned();
        let other = |meta: &ObjectMeta| meta.name.as_deref() != Some(name.as_str());
        if seen.method == "DELETE" {
            if seen.path.contains("/services/") {
                snapshot.services.retain(|s| other(&s.metadata));
            } else if seen.path.contains("/serviceexports/") {
                snapshot.exports.retain(|e| other(&e.metadata));
            }
            continue;
        }
        if seen.is_migration_apply() {
            if seen.path == STATUS_PATH {
                let state = seen.body["status"]["monFailover"].clone();
                match snapshot.prior.as_mut() {
                    Some(prior) => {
                        prior
                            .status
                            .get_or_insert_with(Default::default)
                            .mon_failover = Some(state);
                    }
                    None => {
                        snapshot.prior = Some(serde_json::from_value(seen.body.clone()).unwrap())
                    }
                }
            } else if seen.path.contains("/configmaps/") {
                apply(
                    snapshot,
                    [Write::ApplyMonEndpoints(Box::new(
                        serde_json::from_value(seen.body.clone()).unwrap(),
                    ))],
                );
            }
            continue;
        }
        if !seen.is_apply() {
            continue;
        }
        let write = if seen.path.contains("/services/") {
            Write::ApplyService(Box::new(serde_json::from_value(seen.body.clone()).unwrap()))
        } else if seen.path.contains("/serviceexports/") {
            Write::ApplyServiceExport {
                export: Box::new(serde_json::from_value(seen.body.clone()).unwrap()),
                version: McsVersion::V1Beta1,
            }
        } else if seen.path.contains("/cephclusteraddressings/") {
            let mut object: CephClusterAddressing =
                serde_json::from_value(seen.body.clone()).unwrap();
            let state = snapshot
                .prior
                .as_ref()
                .and_then(|p| p.status.as_ref())
                .and_then(|s| s.mon_failover.clone());
            if let Some(status) = object.status.as_mut() {
                status.mon_failover = state;
            }
            Write::ApplyStatus(Box::new(object))
        } else if seen.path.contains("/deployments/") {
            if !name.starts_with("rook-ceph-osd-") {
                // A mon or canary Deployment: not watched.
                continue;
            }
            Write::ApplyOsdArgs {
                namespace: NAMESPACE.into(),
                name,
                body: Box::new(seen.body.clone()),
            }
        } else if seen.path.contains("/configmaps/") {
            Write::ApplyMonEndpoints(Box::new(serde_json::from_value(seen.body.clone()).unwrap()))
        } else if seen.path.contains("/secrets/") {
            Write::ApplyMonConfig(Box::new(serde_json::from_value(seen.body.clone()).unwrap()))
        } else {
            panic!("unexpected apply {}", seen.path);
        };
        count += apply(snapshot, [write]);
    }
    count
}

/// A reconcile at `second` that writes only the status (the cluster caught up with the last
/// writes), then one a second later that asks and writes nothing.
async fn writes_the_status_then_nothing(snapshot: &mut Snapshot, second: i64) {
    let (_, requests) = run(snapshot, at(second), no_lookups(), 0).await;
    assert_eq!(paths(&requests), [format!("PATCH {STATUS_PATH}")]);
    take_back(snapshot, &requests);
    let (_, requests) = run(snapshot, at(second + 1), no_lookups(), 0).await;
    assert!(requests.is_empty(), "{:?}", paths(&requests));
}

fn paths(requests: &[Seen]) -> Vec<String> {
    requests
        .iter()
        .map(|s| format!("{} {}", s.method, s.path))
        .collect()
}

const STATUS_PATH: &str =
    "/apis/clusterset.io/v1alpha1/namespaces/rook-ceph/cephclusteraddressings/my-cluster";
const EVENTS_PATH: &str = "/apis/events.k8s.io/v1/namespaces/rook-ceph/events";
const DEPLOYMENTS_PATH: &str = "/apis/apps/v1/namespaces/rook-ceph/deployments";
const SERVICES_PATH: &str = "/api/v1/namespaces/rook-ceph/services";
const EXPORTS_PATH: &str =
    "/apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceexports";

fn status_body(requests: &[Seen]) -> &Value {
    &requests
        .iter()
        .find(|s| s.path == STATUS_PATH)
        .expect("a status write")
        .body
}

fn condition<'a>(status_object: &'a Value, type_: &str) -> &'a Value {
    status_object["status"]["conditions"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["type"] == type_)
        .unwrap_or_else(|| panic!("no {type_} in {status_object}"))
}

#[tokio::test]
async fn a_failed_guard_writes_the_status_and_an_event_and_nothing_else() {
    let mut snapshot = rook_cluster(3);
    snapshot.cluster.spec["cephVersion"]["image"] = "quay.io/ceph/ceph:v17.2.5".into();
    let (result, requests) = run(&snapshot, at(0), no_lookups(), 0).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(
        paths(&requests),
        [
            format!("PATCH {STATUS_PATH}"),
            format!("POST {EVENTS_PATH}")
        ]
    );

    let status = &requests[0];
    assert!(status.is_apply(), "{status:?}");
    let body = &status.body;
    assert_eq!(body["apiVersion"], "clusterset.io/v1alpha1");
    assert_eq!(body["kind"], "CephClusterAddressing");
    assert_eq!(
        body["metadata"]["ownerReferences"],
        json!([{"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster", "name": CLUSTER,
                "uid": CLUSTER_UID, "controller": true, "blockOwnerDeletion": true}])
    );
    assert_eq!(body["status"]["phase"], "Blocked");
    assert_eq!(body["status"]["observedGeneration"], 3);
    let accepted = condition(body, "Accepted");
    assert_eq!(accepted["status"], "False");
    assert_eq!(accepted["reason"], "CephTooOld");
    assert_eq!(accepted["observedGeneration"], 3);
    assert!(
        accepted["message"]
            .as_str()
            .unwrap()
            .contains("upgrade Ceph (spec.cephVersion.image) to 17.2.6 or later"),
        "{accepted}"
    );

    let event = &requests[1].body;
    assert_eq!(requests[1].content_type, "application/json");
    assert_eq!(event["type"], "Warning");
    assert_eq!(event["reason"], "CephTooOld");
    assert_eq!(event["action"], "CheckGuards");
    assert_eq!(event["reportingController"], FIELD_MANAGER);
    assert_eq!(event["reportingInstance"], "mcs-ceph-operator-0");
    assert_eq!(event["regarding"]["kind"], "CephCluster");
    assert_eq!(event["regarding"]["name"], CLUSTER);
    assert_eq!(event["regarding"]["uid"], CLUSTER_UID);
    assert!(
        event["note"].as_str().unwrap().contains("upgrade Ceph"),
        "{event}"
    );

    // The next reconcile of the same cluster says nothing new.
    take_back(&mut snapshot, &requests);
    let (result, requests) = run(&snapshot, at(60), no_lookups(), 0).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert!(requests.is_empty(), "{:?}", paths(&requests));
}

#[tokio::test]
async fn first_enable_server_side_applies_each_osd_service_and_export() {
    let mut snapshot = rook_cluster(3);
    let (result, requests) = run(&snapshot, at(0), no_lookups(), 0).await;
    assert_eq!(result.unwrap(), Action::await_change());
    let mut expected = Vec::new();
    for id in 0..3 {
        expected.push(format!(
            "PATCH /api/v1/namespaces/rook-ceph/services/rook-ceph-osd-{id}"
        ));
    }
    for id in 0..3 {
        expected.push(format!(
            "PATCH /apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceexports/rook-ceph-osd-{id}"
        ));
    }
    expected.push(format!("PATCH {STATUS_PATH}"));
    assert_eq!(
        paths(&requests),
        expected,
        "no mon is touched, no Event for pending exports"
    );
    for seen in &requests {
        assert!(
            seen.is_apply(),
            "not a forced apply under our manager: {seen:?}"
        );
    }
    let owner = json!([{"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster",
                        "name": CLUSTER, "uid": CLUSTER_UID}]);

    let service = &requests[1].body;
    assert_eq!(service["apiVersion"], "v1");
    assert_eq!(service["kind"], "Service");
    assert_eq!(service["metadata"]["name"], "rook-ceph-osd-1");
    assert_eq!(service["metadata"]["namespace"], NAMESPACE);
    assert_eq!(service["metadata"]["ownerReferences"], owner);
    let labels = &service["metadata"]["labels"];
    assert_eq!(labels["app"], "rook-ceph-osd");
    assert_eq!(labels["ceph-osd-id"], "1");
    assert_eq!(labels["failure-domain"], "node-1");
    assert_eq!(labels["topology-location-root"], "default");
    assert_eq!(labels["app.kubernetes.io/part-of"], CLUSTER);
    assert_eq!(
        service["spec"],
        json!({
            "selector": {"app": "rook-ceph-osd", "ceph-osd-id": "1"},
            "ports": [
                {"name": "osd-port-v2", "port": 6800, "protocol": "TCP", "targetPort": 6800},
                {"name": "osd-port-v1", "port": 6801, "protocol": "TCP", "targetPort": 6801}
            ]
        })
    );

    let export = &requests[4].body;
    assert_eq!(
        export,
        &json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1",
            "kind": "ServiceExport",
            "metadata": {"name": "rook-ceph-osd-1", "namespace": NAMESPACE, "ownerReferences": owner},
            "spec": {}
        })
    );

    let status = status_body(&requests);
    assert_eq!(status["status"]["phase"], "Exporting");
    assert_eq!(status["status"]["daemonCount"], 6);
    assert_eq!(condition(status, "Accepted")["status"], "True");
    assert_eq!(condition(status, "Exported")["reason"], "ExportsPending");
    assert_eq!(condition(status, "Resolved")["reason"], "WaitingForExports");
    assert_eq!(condition(status, "Ready")["status"], "False");
    let daemons = status["status"]["daemons"].as_array().unwrap();
    assert_eq!(daemons[0]["name"], "mon.a");
    assert_eq!(daemons[0]["state"], "Replace");
    assert_eq!(daemons[0]["advertised"], "10.96.0.10:6789");
    assert_eq!(daemons[3]["name"], "osd.0");
    assert_eq!(daemons[3]["exported"], true);
    assert_eq!(daemons[3]["export"], "not created yet");

    // The exports now exist (without conditions): only the status says so.
    take_back(&mut snapshot, &requests);
    let (_, requests) = run(&snapshot, at(1), no_lookups(), 0).await;
    assert_eq!(paths(&requests), [format!("PATCH {STATUS_PATH}")]);
    let daemons = &status_body(&requests)["status"]["daemons"];
    assert_eq!(
        daemons[3]["export"],
        "no conditions yet (is the MCS controller running in this cluster?)"
    );
    // And then nothing until the exports move.
    take_back(&mut snapshot, &requests);
    let (_, requests) = run(&snapshot, at(2), no_lookups(), 0).await;
    assert!(requests.is_empty(), "{:?}", paths(&requests));
}

#[tokio::test]
async fn a_v1alpha1_cluster_gets_v1alpha1_exports() {
    let mut snapshot = rook_cluster(1);
    snapshot.mcs_api = McsApi::Served(McsVersion::V1Alpha1);
    let (_, requests) = run(&snapshot, at(0), no_lookups(), 0).await;
    let export = requests
        .iter()
        .find(|s| s.path.contains("serviceexports"))
        .unwrap();
    assert_eq!(
        export.path,
        "/apis/multicluster.x-k8s.io/v1alpha1/namespaces/rook-ceph/serviceexports/rook-ceph-osd-0"
    );
    assert_eq!(export.body["apiVersion"], "multicluster.x-k8s.io/v1alpha1");
}

#[tokio::test]
async fn export_conditions_are_reflected_in_the_status() {
    let mut snapshot = rook_cluster(3);
    let (_, requests) = run(&snapshot, at(0), no_lookups(), 0).await;
    take_back(&mut snapshot, &requests);

    // osd.0 Valid=False, osd.1 Conflict=True, osd.2 exported: two lookups (a conflict does
    // not stop the name from resolving), one status write, one Warning.
    set_export_conditions(&mut snapshot, &exported_conditions());
    export_mut(&mut snapshot, "rook-ceph-osd-0")
        .status
        .as_mut()
        .unwrap()
        .conditions[0] = condition_of(
        "Valid",
        "False",
        "NoService",
        "Service rook-ceph/rook-ceph-osd-0 not found",
    );
    export_mut(&mut snapshot, "rook-ceph-osd-1")
        .status
        .as_mut()
        .unwrap()
        .conditions[2] = condition_of(
        "Conflict",
        "True",
        "PortConflict",
        "2/3 clusters disagree on ports",
    );
    let (result, requests) = run(&snapshot, at(5), resolver(2, None), 0).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert_eq!(
        paths(&requests),
        [
            format!("PATCH {STATUS_PATH}"),
            format!("POST {EVENTS_PATH}")
        ]
    );
    let status = status_body(&requests);
    let exported = condition(status, "Exported");
    assert_eq!(exported["status"], "False");
    assert_eq!(exported["reason"], "ExportInvalid");
    assert!(
        exported["message"]
            .as_str()
            .unwrap()
            .contains("Service rook-ceph/rook-ceph-osd-0 not found")
    );
    let daemons = status["status"]["daemons"].as_array().unwrap();
    assert!(
        daemons[3]["export"]
            .as_str()
            .unwrap()
            .starts_with("Valid=False (NoService)")
    );
    assert!(
        daemons[4]["export"]
            .as_str()
            .unwrap()
            .starts_with("Conflict=True (PortConflict)")
    );
    assert_eq!(daemons[4]["globalIP"], "242.1.0.21");
    assert_eq!(daemons[5]["export"], "Valid, Ready");
    assert_eq!(daemons[5]["globalIP"], "242.1.0.22");
    assert_eq!(
        daemons[5]["lookup"],
        json!({"name": "east.rook-ceph-osd-2.rook-ceph.svc.clusterset.local",
               "exportUID": "export-rook-ceph-osd-2"})
    );
    assert_eq!(requests[1].body["reason"], "ExportInvalid");
    take_back(&mut snapshot, &requests);

    // All valid: osd.0 is looked up, Exported and Resolved turn True; Exported was False, so
    // its recovery is a Normal Event (Resolved was only pending).
    set_export_conditions(&mut snapshot, &exported_conditions());
    let (_, requests) = run(&snapshot, at(6), resolver(1, None), 0).await;
    assert_eq!(
        paths(&requests),
        [
            // osd.1's global IP was known and its export Ready: it gets its arguments.
            format!("PATCH {DEPLOYMENTS_PATH}/rook-ceph-osd-1"),
            format!("PATCH {STATUS_PATH}"),
            format!("POST {EVENTS_PATH}")
        ]
    );
    let status = status_body(&requests);
    assert_eq!(condition(status, "Exported")["status"], "True");
    assert_eq!(condition(status, "Resolved")["status"], "True");
    assert_eq!(status["status"]["phase"], "Migrating");
    assert_eq!(requests[2].body["type"], "Normal");
    assert_eq!(requests[2].body["reason"], "Exported");
}

#[tokio::test]
async fn a_dns_failure_is_reported_retried_later_and_recovers() {
    let mut snapshot = rook_cluster(2);
    let (_, requests) = run(&snapshot, at(0), no_lookups(), 0).await;
    take_back(&mut snapshot, &requests);
    set_export_conditions(&mut snapshot, &exported_conditions());

    // The default retry policy: 1 s after the first failure.
    let (result, requests) = run(&snapshot, at(10), resolver(2, Some(1)), 0).await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(1)));
    assert_eq!(
        paths(&requests),
        [
            format!("PATCH {STATUS_PATH}"),
            format!("POST {EVENTS_PATH}")
        ]
    );
    let status = status_body(&requests);
    let resolved = condition(status, "Resolved");
    assert_eq!(resolved["status"], "False");
    assert_eq!(resolved["reason"], "LookupFailed");
    assert!(
        resolved["message"].as_str().unwrap().contains("SERVFAIL"),
        "{resolved}"
    );
    let osd_1 = &status["status"]["daemons"][4];
    assert!(osd_1.get("globalIP").is_none());
    assert_eq!(osd_1["lookup"]["failures"], 1);
    assert_eq!(osd_1["lookup"]["retryAt"], "2027-01-15T08:00:11Z");
    assert_eq!(requests[1].body["type"], "Warning");
    assert_eq!(requests[1].body["reason"], "LookupFailed");
    take_back(&mut snapshot, &requests);

    // Woken before the retry time (osd.0's new status, in the same second): no lookup; osd.0,
    // whose global IP is known, gets its arguments.
    let (result, requests) = run(&snapshot, at(10), no_lookups(), 0).await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(1)));
    assert_eq!(
        paths(&requests),
        [format!("PATCH {DEPLOYMENTS_PATH}/rook-ceph-osd-0")]
    );
    take_back(&mut snapshot, &requests);

    // At the retry time only osd.1 is asked, and answers.
    let (result, requests) = run(&snapshot, at(11), resolver(1, None), 0).await;
    assert_eq!(result.unwrap(), Action::await_change());
    let status = status_body(&requests);
    assert_eq!(condition(status, "Resolved")["status"], "True");
    let osd_1 = status["status"]["daemons"]
        .as_array()
        .unwrap()
        .iter()
        .find(|d| d["name"] == "osd.1")
        .unwrap();
    assert_eq!(osd_1["globalIP"], "242.1.0.21");
    assert_eq!(requests[1].body["type"], "Normal");
    assert_eq!(requests[1].body["reason"], "Resolved");
}

/// A cluster walked through the HTTP layer to where every export is Valid and Ready and every
/// global IP known.
async fn converged(osds: u32) -> Snapshot {
    let mut snapshot = rook_cluster(osds);
    let (_, requests) = run(&snapshot, at(0), no_lookups(), 0).await;
    take_back(&mut snapshot, &requests);
    set_export_conditions(&mut snapshot, &exported_conditions());
    let (_, requests) = run(&snapshot, at(1), resolver(osds as usize, None), 0).await;
    take_back(&mut snapshot, &requests);
    // One failure domain (one OSD in these fixtures) gets its arguments per reconcile.
    for round in 0..osds {
        let (_, requests) = run(&snapshot, at(2 + i64::from(round)), no_lookups(), 0).await;
        assert_eq!(
            requests
                .iter()
                .filter(|s| s.path.starts_with(DEPLOYMENTS_PATH))
                .count(),
            1
        );
        take_back(&mut snapshot, &requests);
    }
    let (_, requests) = run(&snapshot, at(2 + i64::from(osds)), no_lookups(), 0).await;
    take_back(&mut snapshot, &requests);
    snapshot
}

#[tokio::test]
async fn the_steady_state_makes_no_request_and_no_lookup() {
    let snapshot = converged(20).await;
    // The status lists the mons (waiting for the mon migration) and counts the 20 settled OSDs.
    let status = snapshot.prior.as_ref().unwrap().status.as_ref().unwrap();
    assert_eq!(
        (
            status.daemons.len(),
            status.unlisted_daemons,
            status.daemon_count
        ),
        (3, 20, 23)
    );
    for later in [2, 600, 86_400] {
        let (result, requests) = run(&snapshot, at(later), no_lookups(), 0).await;
        assert_eq!(result.unwrap(), Action::await_change());
        assert!(requests.is_empty(), "{:?}", paths(&requests));
    }
}

#[tokio::test]
async fn mcs_disabled_makes_no_request() {
    let mut snapshot = rook_cluster(3);
    snapshot.cluster =
        cluster_with(json!({"multiClusterService": {"enabled": false, "clusterID": "east"}}));
    let (result, requests) = run(&snapshot, at(0), no_lookups(), 0).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert!(requests.is_empty(), "{:?}", paths(&requests));
}

/// MCS turned off on a converged cluster: each OSD Deployment gets one forced apply under the
/// operator's field manager that carries Rook's arguments without the address arguments and
/// no label (server-side apply removes the fields the operator stops applying); then nothing.
#[tokio::test]
async fn turning_mcs_off_hands_each_osd_deployment_back_with_one_apply_then_nothing() {
    let mut snapshot = converged(2).await;
    snapshot.cluster =
        cluster_with(json!({"multiClusterService": {"enabled": false, "clusterID": "east"}}));
    for (second, id) in [(100, 0), (101, 1)] {
        let (result, requests) = run(&snapshot, at(second), no_lookups(), 0).await;
        assert_eq!(result.unwrap(), Action::await_change());
        assert_eq!(
            paths(&requests),
            [
                format!("PATCH {DEPLOYMENTS_PATH}/rook-ceph-osd-{id}"),
                format!("PATCH {STATUS_PATH}")
            ]
        );
        let seen = &requests[0];
        assert!(seen.is_apply(), "{seen:?}");
        assert_eq!(
            seen.body,
            json!({
                "apiVersion": "apps/v1",
                "kind": "Deployment",
                "metadata": {"name": format!("rook-ceph-osd-{id}"), "namespace": "rook-ceph"},
                "spec": {"template": {"spec": {"containers": [{
                    "name": "osd",
                    "args": ["--foreground", format!("--id={id}")]
                }]}}}
            })
        );
        assert_eq!(status_body(&requests)["status"]["phase"], "Disabled");
        take_back(&mut snapshot, &requests);
    }
    writes_the_status_then_nothing(&mut snapshot, 102).await;
}

/// An OSD removed for good: after the grace period, one DELETE of its ServiceExport and one of
/// its Service, each with the uid the cache held as precondition; a 404 (someone deleted it
/// first) is not an error; then nothing.
#[tokio::test]
async fn a_removed_osds_export_and_service_are_deleted_by_uid_after_the_grace_period() {
    let mut snapshot = converged(2).await;
    snapshot.deployments.truncate(1);
    let (result, requests) = run(&snapshot, at(100), no_lookups(), 0).await;
    assert_eq!(result.unwrap(), Action::requeue(Duration::from_secs(600)));
    assert_eq!(paths(&requests), [format!("PATCH {STATUS_PATH}")]);
    assert_eq!(
        status_body(&requests)["status"]["removedOsds"],
        json!([{"name": "osd.1", "since": at(100).to_string()}])
    );
    take_back(&mut snapshot, &requests);
    let (_, requests) = run(&snapshot, at(699), no_lookups(), 0).await;
    assert!(requests.is_empty(), "{:?}", paths(&requests));

    // The mock API server holds the Service but not the export (deleted by hand meanwhile).
    let objects = BTreeMap::from([(
        format!("{SERVICES_PATH}/rook-ceph-osd-1"),
        json!({"apiVersion": "v1", "kind": "Service",
               "metadata": {"name": "rook-ceph-osd-1", "namespace": "rook-ceph",
                            "uid": "svc-rook-ceph-osd-1"}}),
    )]);
    let (result, requests, _) = run_with(&snapshot, at(700), no_lookups(), 0, None, objects).await;
    result.unwrap();
    assert_eq!(
        paths(&requests),
        [
            format!("DELETE {EXPORTS_PATH}/rook-ceph-osd-1"),
            format!("DELETE {SERVICES_PATH}/rook-ceph-osd-1"),
            format!("PATCH {STATUS_PATH}"),
        ]
    );
    for (seen, uid) in requests
        .iter()
        .zip(["export-rook-ceph-osd-1", "svc-rook-ceph-osd-1"])
    {
        assert_eq!(seen.body["preconditions"], json!({"uid": uid}), "{seen:?}");
    }
    take_back(&mut snapshot, &requests);
    let (_, requests) = run(&snapshot, at(701), no_lookups(), 0).await;
    assert_eq!(paths(&requests), [format!("PATCH {STATUS_PATH}")]);
    assert!(
        status_body(&requests)["status"]
            .get("removedOsds")
            .is_none()
    );
    take_back(&mut snapshot, &requests);
    let (_, requests) = run(&snapshot, at(702), no_lookups(), 0).await;
    assert!(requests.is_empty(), "{:?}", paths(&requests));
}

#[tokio::test]
async fn nothing_is_done_before_the_caches_have_synced() {
    let snapshot = rook_cluster(3);
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let mut server = ApiServer::start(handle);
    let context = Arc::new(Context {
        api: Arc::new(KubeApi::new(kube::Client::new(service, "default"), None)),
        resolver: Arc::new(no_lookups()),
        caches: caches(&snapshot, false).await,
        config: Config::default(),
        clock: clusterset_daemon::Clock::from_fn(|| at(0)),
        metrics: Arc::new(Metrics::new()),
        lookup_concurrency: 4,
        lookups: OPERATOR_LOOKUPS.with(Arc::clone),
        mon_migration: None,
    });
    let cluster = Arc::new(snapshot.cluster.clone());
    let error = reconcile(Arc::clone(&cluster), Arc::clone(&context))
        .await
        .unwrap_err();
    assert!(matches!(error, ReconcileError::NotSynced(_)), "{error}");
    assert_eq!(
        error_policy(cluster, &error, Arc::clone(&context)),
        Action::requeue(Duration::from_secs(1))
    );
    assert!(server.requests().is_empty());
    assert!(
        context
            .metrics
            .encode()
            .contains("mcs_ceph_operator_reconciles_total{result=\"not_synced\"} 1")
    );
}

/// The configuration of the strictness tests: a `--rook-operator-namespace` that is no
/// namespace name (the CLI refuses it; a `Config` built by hand does not). Rook's
/// `rook.io/operator-namespace` label of every OSD Service carries it, so it is no valid
/// label value.
fn operator_namespace_with_a_slash() -> Config {
    Config {
        rook_operator_namespace: Some("rook/ceph".into()),
        ..Config::default()
    }
}

/// The mock API server refuses what a real one refuses: an OSD Service whose label value holds
/// a `/` is answered 422 Invalid, with the cause at `metadata.labels`, and not stored; the
/// reconcile stops there with the API server's message (nothing else is written, no status).
#[tokio::test]
async fn an_invalid_label_value_is_refused_with_422_and_the_reconcile_fails_with_its_message() {
    let snapshot = rook_cluster(1);
    let server = Server {
        fail_first: 0,
        objects: BTreeMap::new(),
        journal: None,
    };
    let (result, mut server, metrics) = reconcile_on(
        &snapshot,
        at(0),
        no_lookups(),
        None,
        server,
        operator_namespace_with_a_slash(),
    )
    .await;
    // The message with its cause, as the reconcile's log line prints it.
    let error = clusterset_daemon::ErrorChain(&result.unwrap_err()).to_string();
    assert!(
        error.starts_with("apply_service of rook-ceph/rook-ceph-osd-0 failed: ")
            && error.contains(r#"Service "rook-ceph-osd-0" is invalid: metadata.labels: Invalid value: "rook/ceph""#),
        "{error}"
    );
    let requests = server.requests();
    assert_eq!(
        paths(&requests),
        [format!("PATCH {SERVICES_PATH}/rook-ceph-osd-0")]
    );
    assert_eq!(requests[0].refused, Some(422));
    let refused = server.take_refusals();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].starts_with(&format!(
            "PATCH {SERVICES_PATH}/rook-ceph-osd-0 -> 422 Invalid: Service \"rook-ceph-osd-0\" is invalid: metadata.labels: Invalid value: \"rook/ceph\": a valid label must be an empty string or consist of alphanumeric characters"
        )),
        "{refused:?}"
    );
    assert!(
        metrics
            .encode()
            .contains("mcs_ceph_operator_write_errors_total{operation=\"apply_service\"} 1"),
        "{}",
        metrics.encode()
    );
}

/// A refusal no test takes fails the test: the server panics when it is dropped.
#[tokio::test]
#[should_panic(expected = "the mock API server refused 1 requests, as a real kube-apiserver would")]
async fn a_refusal_the_test_does_not_take_fails_it() {
    let server = Server {
        fail_first: 0,
        objects: BTreeMap::new(),
        journal: None,
    };
    let (result, _server, _) = reconcile_on(
        &rook_cluster(1),
        at(0),
        no_lookups(),
        None,
        server,
        operator_namespace_with_a_slash(),
    )
    .await;
    assert!(result.is_err());
}

#[tokio::test]
async fn a_failed_write_stops_the_reconcile_before_the_status() {
    let snapshot = rook_cluster(2);
    let (result, requests) = run(&snapshot, at(0), no_lookups(), 1).await;
    let error = result.unwrap_err();
    assert!(
        error
            .to_string()
            .starts_with("apply_service of rook-ceph/rook-ceph-osd-0 failed"),
        "{error}"
    );
    assert_eq!(requests.len(), 1, "{:?}", paths(&requests));
}

fn condition_of(
    type_: &str,
    status: &str,
    reason: &str,
    message: &str,
) -> k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
    common::condition(type_, status, reason, message)
}

/// The scale harness of issue 6 (counts only; timings are in benches/decide.rs): a cluster with
/// 1,000 OSDs converges in four reconciles with exactly one apply per OSD Service and per
/// ServiceExport, one lookup per OSD, three status writes — and then costs nothing.
#[tokio::test]
async fn a_thousand_osds_converge_with_one_apply_and_one_lookup_each_then_cost_nothing() {
    const OSDS: u32 = 1000;
    let mut snapshot = rook_cluster(OSDS);
    // Ten hosts of 100 OSDs: the OSD arguments go out one host at a time.
    for (id, deployment) in snapshot.deployments.iter_mut().enumerate() {
        let labels = deployment.metadata.labels.as_mut().unwrap();
        labels.insert("failure-domain".into(), format!("host-{}", id / 100));
    }
    let mut requests_total = 0;

    let (_, requests) = run(&snapshot, at(0), no_lookups(), 0).await;
    let services = requests
        .iter()
        .filter(|s| s.path.contains("/services/"))
        .count();
    let exports = requests
        .iter()
        .filter(|s| s.path.contains("/serviceexports/"))
        .count();
    assert_eq!((services, exports, requests.len()), (1000, 1000, 2001));
    requests_total += requests.len();
    take_back(&mut snapshot, &requests);

    // The exports exist: the status says so.
    let (_, requests) = run(&snapshot, at(1), no_lookups(), 0).await;
    assert_eq!(paths(&requests), [format!("PATCH {STATUS_PATH}")]);
    requests_total += requests.len();
    take_back(&mut snapshot, &requests);

    // The MCS implementation takes them: one lookup per OSD, one status write.
    set_export_conditions(&mut snapshot, &exported_conditions());
    let (_, requests) = run(&snapshot, at(2), resolver(OSDS as usize, None), 0).await;
    assert_eq!(paths(&requests), [format!("PATCH {STATUS_PATH}")]);
    requests_total += requests.len();
    take_back(&mut snapshot, &requests);
    let status = &snapshot.prior.as_ref().unwrap().status.as_ref().unwrap();
    let resolved = status
        .conditions
        .iter()
        .find(|c| c.type_ == "Resolved")
        .unwrap();
    assert_eq!(
        (resolved.status.as_str(), resolved.message.as_str()),
        ("True", "the global IPs of 1000 exported daemons are known")
    );
    // Every OSD waits for its arguments: the status lists the mons and the first 97 of them,
    // and counts the others.
    assert_eq!(status.daemons.len(), mcs_ceph_api::LISTED_DAEMONS);
    assert_eq!(status.unlisted_daemons, 903);
    assert!(status.daemons[3..].iter().all(|d| d.global_ip.is_some()));
    assert_eq!(requests_total, 2003);

    // The OSD arguments: one host (100 OSD Deployments) per reconcile, each OSD once; the
    // status follows the OSDs that took their arguments.
    for host in 0..10 {
        let (_, requests) = run(&snapshot, at(3 + host), no_lookups(), 0).await;
        let patched: Vec<_> = requests
            .iter()
            .filter(|s| s.path.starts_with(DEPLOYMENTS_PATH))
            .collect();
        assert_eq!(patched.len(), 100, "host {host}");
        assert!(patched.iter().all(|s| s.is_apply()));
        requests_total += requests.len();
        take_back(&mut snapshot, &requests);
    }
    let (_, requests) = run(&snapshot, at(13), no_lookups(), 0).await;
    assert_eq!(paths(&requests), [format!("PATCH {STATUS_PATH}")]);
    requests_total += requests.len();
    take_back(&mut snapshot, &requests);
    let status = &snapshot.prior.as_ref().unwrap().status.as_ref().unwrap();
    assert_eq!(status.ready_daemons, 1000);
    assert_eq!(requests_total, 2003 + 1000 + 10);

    // Steady state.
    let (result, requests) = run(&snapshot, at(14), no_lookups(), 0).await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert!(requests.is_empty(), "{:?}", paths(&requests));
}

/// The OSD Deployment apply, request by request: path, field manager, force, and the exact
/// partial Deployment (Rook's other arguments kept in order, the label, the env entry, the
/// ports); then nothing once the Deployment says it.
#[tokio::test]
async fn osd_arguments_are_one_server_side_apply_of_exactly_the_planned_fields() {
    let mut snapshot = rook_cluster(1);
    let (_, requests) = run(&snapshot, at(0), no_lookups(), 0).await;
    take_back(&mut snapshot, &requests);
    set_export_conditions(&mut snapshot, &exported_conditions());
    let (_, requests) = run(&snapshot, at(1), resolver(1, None), 0).await;
    assert!(
        requests
            .iter()
            .all(|s| !s.path.starts_with(DEPLOYMENTS_PATH))
    );
    take_back(&mut snapshot, &requests);

    let (_, requests) = run(&snapshot, at(2), no_lookups(), 0).await;
    assert_eq!(
        paths(&requests),
        [format!("PATCH {DEPLOYMENTS_PATH}/rook-ceph-osd-0")]
    );
    let seen = &requests[0];
    assert!(seen.is_apply(), "{seen:?}");
    assert_eq!(
        seen.body,
        json!({
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {
                "name": "rook-ceph-osd-0",
                "namespace": "rook-ceph",
                "labels": {"ceph.rook.io/do-not-reconcile": "true"}
            },
            "spec": {"template": {"spec": {"containers": [{
                "name": "osd",
                "args": [
                    "--foreground",
                    "--id=0",
                    "--public-addr=242.1.0.20",
                    "--public-bind-addr=$(ROOK_POD_IP)",
                    "--cluster-addr=$(ROOK_POD_IP)"
                ],
                "env": [{"name": "ROOK_POD_IP",
                         "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}],
                "ports": [
                    {"name": "osd-port-v2", "containerPort": 6800, "protocol": "TCP"},
                    {"name": "osd-port-v1", "containerPort": 6801, "protocol": "TCP"}
                ]
            }]}}}
        })
    );
    take_back(&mut snapshot, &requests);
    // The OSD is up to date: the status says so, and then nothing is written.
    writes_the_status_then_nothing(&mut snapshot, 3).await;
}

/// Mons on global IPs: the `rook-ceph-mon-endpoints` and `rook-ceph-config` applies, request
/// by request (force, field manager, exact bodies), once; then nothing.
#[tokio::test]
async fn mon_endpoints_and_mon_host_are_applied_once_the_mons_advertise_global_ips() {
    let mut snapshot = rook_cluster(0);
    let data = snapshot
        .mon_endpoints
        .as_mut()
        .unwrap()
        .data
        .as_mut()
        .unwrap();
    data.insert(
        "data".into(),
        "c=242.1.9.3:6789,a=242.1.9.1:6789,b=242.1.9.2:6789".into(),
    );
    let (_, requests) = run(&snapshot, at(0), no_lookups(), 0).await;
    take_back(&mut snapshot, &requests);
    set_export_conditions(&mut snapshot, &exported_conditions());
    let mut mons = MockClustersetResolver::new();
    mons.expect_resolve().times(3).returning(|name| {
        let text = name.to_string();
        let ip = match text.split('.').nth(1) {
            Some("rook-ceph-mon-a") => "242.1.9.1",
            Some("rook-ceph-mon-b") => "242.1.9.2",
            Some("rook-ceph-mon-c") => "242.1.9.3",
            _ => panic!("unexpected lookup {text}"),
        };
        Ok(Resolution {
            name: name.clone(),
            addresses: vec![ip.parse().unwrap()],
            valid_until: Instant::now() + Duration::from_secs(30),
        })
    });
    let (_, requests) = run(&snapshot, at(1), mons, 0).await;
    assert_eq!(paths(&requests), [format!("PATCH {STATUS_PATH}")]);
    take_back(&mut snapshot, &requests);

    let (_, requests) = run(&snapshot, at(2), no_lookups(), 0).await;
    assert_eq!(
        paths(&requests),
        [
            "PATCH /api/v1/namespaces/rook-ceph/configmaps/rook-ceph-mon-endpoints".to_owned(),
            "PATCH /api/v1/namespaces/rook-ceph/secrets/rook-ceph-config".to_owned(),
            format!("PATCH {STATUS_PATH}"),
        ]
    );
    assert!(requests.iter().all(Seen::is_apply));
    let csi = concat!(
        r#"[{"clusterID":"rook-ceph","monitors":["242.1.9.1:6789","242.1.9.2:6789","242.1.9.3:6789"],"#,
        r#""cephFS":{"netNamespaceFilePath":"","subvolumeGroup":"","radosNamespace":"","kernelMountOptions":"","fuseMountOptions":""},"#,
        r#""rbd":{"netNamespaceFilePath":"","radosNamespace":"","mirrorDaemonCount":0},"nfs":{"netNamespaceFilePath":""},"#,
        r#""readAffinity":{"enabled":false,"crushLocationLabels":null},"namespace":""}]"#
    );
    assert_eq!(
        requests[0].body,
        json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "rook-ceph-mon-endpoints", "namespace": "rook-ceph"},
            "data": {
                "data": "a=242.1.9.1:6789,b=242.1.9.2:6789,c=242.1.9.3:6789",
                // Rook's null entry for a mon without placement.
                "mapping": r#"{"node":{"a":null,"b":null,"c":null}}"#,
                "maxMonId": "2",
                "outOfQuorum": "",
                "csi-cluster-config-json": csi
            }
        })
    );
    let mon_host = "[v2:242.1.9.1:3300,v1:242.1.9.1:6789],[v2:242.1.9.2:3300,v1:242.1.9.2:6789],[v2:242.1.9.3:3300,v1:242.1.9.3:6789]";
    let b64 = |text: &str| {
        serde_json::to_value(k8s_openapi::ByteString(text.as_bytes().to_vec())).unwrap()
    };
    assert_eq!(
        requests[1].body,
        json!({
            "apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "rook-ceph-config", "namespace": "rook-ceph"},
            "type": "kubernetes.io/rook",
            "data": {"mon_host": b64(mon_host), "mon_initial_members": b64("a,b,c")}
        })
    );
    assert_eq!(requests[2].body["status"]["monHost"], mon_host);
    take_back(&mut snapshot, &requests);

    for later in [3, 3600] {
        let (_, requests) = run(&snapshot, at(later), no_lookups(), 0).await;
        assert!(requests.is_empty(), "{:?}", paths(&requests));
    }
}

/// Mons a, b, c on their cluster IPs, all in quorum.
fn quorum_on_cluster_ips() -> QuorumStatus {
    let mons: Vec<Value> = ["a", "b", "c"]
        .iter()
        .enumerate()
        .map(|(rank, name)| {
            json!({"rank": rank, "name": name, "public_addrs": {"addrvec": [
                {"type": "v1", "addr": format!("10.96.0.{}:6789", 10 + rank)}]}})
        })
        .collect();
    serde_json::from_value(json!({"election_epoch": 4, "quorum_names": ["a", "b", "c"],
        "monmap": {"epoch": 1, "fsid": "f", "mons": mons}}))
    .unwrap()
}

/// An admin that must never be asked anything.
fn silent_admin() -> MockCephMonAdmin {
    let mut admin = MockCephMonAdmin::new();
    admin.expect_quorum_status().never();
    admin.expect_remove_mon().never();
    admin
}

fn annotate(snapshot: &mut Snapshot) {
    snapshot.cluster.metadata.annotations = Some(
        [(
            MIGRATION_ANNOTATION.to_owned(),
            MIGRATION_ENABLED.to_owned(),
        )]
        .into(),
    );
}

const CM_PATH: &str = "/api/v1/namespaces/rook-ceph/configmaps/rook-ceph-mon-endpoints";

fn is_migration_request(seen: &Seen) -> bool {
    seen.path.starts_with(DEPLOYMENTS_PATH)
        || seen.path.contains("/configmaps/")
        || seen.path.contains("/secrets/")
        || seen.method == "GET"
        || seen.method == "DELETE"
        || seen.query.get("fieldManager").map(String::as_str) == Some(MON_FAILOVER_FIELD_MANAGER)
}

/// The mons of the converged fixture advertise cluster IPs: the plan wants them replaced.
#[tokio::test]
async fn the_converged_fixture_has_mons_to_replace() {
    let snapshot = converged(2).await;
    let status = snapshot.prior.as_ref().unwrap().status.as_ref().unwrap();
    let states: Vec<(&str, &str)> = status
        .daemons
        .iter()
        .filter(|d| d.name.starts_with("mon."))
        .map(|d| (d.name.as_str(), d.state.as_str()))
        .collect();
    assert_eq!(
        states,
        [
            ("mon.a", "Replace"),
            ("mon.b", "Replace"),
            ("mon.c", "Replace")
        ]
    );
}

/// Flag off (annotation or not), or flag on without the annotation: the reconcile makes no
/// migration request and asks Ceph nothing; without the annotation the status says how to
/// opt in, once.
#[tokio::test]
async fn no_migration_without_the_flag_or_the_annotation() {
    let converged = converged(2).await;
    let mut annotated = converged.clone();
    annotate(&mut annotated);
    for snapshot in [&converged, &annotated] {
        let (result, requests, metrics) =
            run_with(snapshot, at(100), no_lookups(), 0, None, BTreeMap::new()).await;
        assert_eq!(result.unwrap(), Action::await_change());
        assert!(requests.is_empty(), "{:?}", paths(&requests));
        assert!(!metrics.encode().contains("failover_steps_total{"));
    }

    let mut snapshot = converged.clone();
    let (result, requests, metrics) = run_with(
        &snapshot,
        at(100),
        no_lookups(),
        0,
        Some(silent_admin()),
        BTreeMap::new(),
    )
    .await;
    assert_eq!(result.unwrap(), Action::await_change(), "no short requeue");
    assert_eq!(paths(&requests), [format!("PATCH {STATUS_PATH}")]);
    assert!(requests[0].is_apply());
    let message = requests[0].body["status"]["message"].as_str().unwrap();
    assert!(
        message.contains(&format!(
            "mon migration: waiting: mon migration is not enabled for this cluster: annotate the CephCluster {MIGRATION_ANNOTATION}={MIGRATION_ENABLED}"
        )),
        "{message}"
    );
    assert!(requests[0].body["status"].get("monFailover").is_none());
    assert!(!requests.iter().any(is_migration_request));
    assert!(!metrics.encode().contains("failover_steps_total{"));
    take_back(&mut snapshot, &requests);
    let (result, requests, _) = run_with(
        &snapshot,
        at(200),
        no_lookups(),
        0,
        Some(silent_admin()),
        BTreeMap::new(),
    )
    .await;
    assert_eq!(result.unwrap(), Action::await_change());
    assert!(
        requests.is_empty(),
        "the line is published once: {:?}",
        paths(&requests)
    );
}

/// Flag on, annotation set, mons on cluster IPs: the reconcile runs the first step of the
/// migration — the state read from and saved to the status object, the Service and canary of
/// the new mon d applied, d listed without an endpoint in rook-ceph-mon-endpoints — publishes
/// the machine's line in the status message, counts the step and requeues soon.
#[tokio::test]
async fn with_the_flag_and_the_annotation_the_reconcile_starts_the_first_mon_migration() {
    let mut snapshot = converged(2).await;
    annotate(&mut snapshot);
    let mut admin = MockCephMonAdmin::new();
    admin
        .expect_quorum_status()
        .returning(|| Ok(quorum_on_cluster_ips()));
    admin.expect_remove_mon().never();
    let objects: BTreeMap<String, Value> = [(
        CM_PATH.to_owned(),
        serde_json::to_value(mon_endpoints()).unwrap(),
    )]
    .into();
    let (result, requests, metrics) =
        run_with(&snapshot, at(100), no_lookups(), 0, Some(admin), objects).await;
    assert_eq!(result.unwrap(), Action::requeue(MIGRATION_REQUEUE));
    let canary = format!("{DEPLOYMENTS_PATH}/rook-ceph-mon-d-canary");
    let seen = paths(&requests);
    let position = |wanted: &str| {
        seen.iter()
            .position(|p| p == wanted)
            .unwrap_or_else(|| panic!("no {wanted} in {seen:?}"))
    };
    // The state is read from the API server, saved before the command runs (write-ahead),
    // then the Service, the canary and the mon's entry; the plan's status last.
    let load = position(&format!("GET {STATUS_PATH}"));
    let save = seen
        .iter()
        .position(|p| p == &format!("PATCH {STATUS_PATH}"))
        .unwrap();
    let apply_service = position(&format!("PATCH {SERVICES_PATH}/rook-ceph-mon-d"));
    let apply_canary = position(&format!("PATCH {canary}"));
    let read_cm = position(&format!("GET {CM_PATH}"));
    let apply_cm = position(&format!("PATCH {CM_PATH}"));
    assert!(
        load < save
            && save < apply_service
            && apply_service < apply_canary
            && apply_canary < read_cm
            && read_cm < apply_cm
    );
    assert!(requests[apply_service].is_apply());
    assert_eq!(
        seen.iter()
            .filter(|p| **p == format!("PATCH {canary}"))
            .count(),
        1,
        "one canary apply: the address comes from the plan in a later reconcile: {seen:?}"
    );
    assert_eq!(
        requests[save].query.get("fieldManager").map(String::as_str),
        Some(MON_FAILOVER_FIELD_MANAGER)
    );
    let state = &requests[save].body["status"]["monFailover"];
    assert!(state.to_string().contains("\"d\""), "{state}");
    let canary_body = &requests[apply_canary].body;
    assert!(requests[apply_canary].is_apply());
    assert_eq!(
        canary_body["spec"]["template"]["metadata"]["labels"]["mon_canary"],
        "true"
    );
    assert_eq!(
        canary_body["spec"]["template"]["spec"]["containers"][0]["image"],
        "quay.io/ceph/ceph:v18.2.4"
    );
    assert_eq!(
        requests[apply_cm]
            .query
            .get("fieldManager")
            .map(String::as_str),
        Some(MON_FAILOVER_FIELD_MANAGER)
    );
    assert_eq!(
        requests[apply_cm].body["data"]["data"],
        "a=10.96.0.10:6789,b=10.96.0.11:6789,c=10.96.0.12:6789,d=:6789"
    );
    assert_eq!(requests[apply_cm].body["data"]["maxMonId"], "3");
    // Nothing is deleted or removed in the first step.
    assert!(!requests.iter().any(|r| r.method == "DELETE"), "{seen:?}");
    let status = requests
        .iter()
        .rev()
        .find(|r| r.path == STATUS_PATH && r.is_apply())
        .expect("the plan's status with the migration line");
    let message = status.body["status"]["message"].as_str().unwrap();
    assert!(
        message.ends_with(
            "; mon migration: mon a (10.96.0.10, misplaced) -> mon d: provisioning the new mon's address"
        ),
        "{message}"
    );
    assert!(
        status.body["status"].get("monFailover").is_none(),
        "not the decision's field"
    );
    let text = metrics.encode();
    assert!(
        text.contains(
            "mcs_ceph_operator_failover_steps_total{step=\"provision_address\",outcome=\"address_pending\"} 1"
        ),
        "{text}"
    );
}

/// A migration that fails is one Warning Event with the reason (and the status line says it);
/// the retry that fails the same way sends no second Event.
#[tokio::test]
async fn a_failed_migration_is_one_warning_event_not_one_per_retry() {
    let mut snapshot = converged(2).await;
    annotate(&mut snapshot);
    // The stored state is not a mon failover state (edited by hand, say): the migration stops
    // with an error rather than replace it.
    let mut stored = serde_json::to_value(snapshot.prior.as_ref().unwrap()).unwrap();
    stored["status"]["monFailover"] = json!(["not", "a", "state"]);
    let objects = || -> BTreeMap<String, Value> {
        [
            (
                CM_PATH.to_owned(),
                serde_json::to_value(mon_endpoints()).unwrap(),
            ),
            (STATUS_PATH.to_owned(), stored.clone()),
        ]
        .into()
    };
    // Ceph is asked for its quorum only: nothing changes in it.
    let admin = || {
        let mut admin = MockCephMonAdmin::new();
        admin
            .expect_quorum_status()
            .returning(|| Ok(quorum_on_cluster_ips()));
        admin.expect_remove_mon().never();
        admin
    };
    let (result, requests, metrics) = run_with(
        &snapshot,
        at(100),
        no_lookups(),
        0,
        Some(admin()),
        objects(),
    )
    .await;
    assert_eq!(result.unwrap(), Action::requeue(MIGRATION_REQUEUE));
    let events: Vec<&Seen> = requests.iter().filter(|r| r.path == EVENTS_PATH).collect();
    assert_eq!(events.len(), 1, "{:?}", paths(&requests));
    assert_eq!(events[0].body["type"], "Warning");
    assert_eq!(events[0].body["reason"], "MonMigrationFailed");
    assert_eq!(events[0].body["action"], "MigrateMons");
    let note = events[0].body["note"].as_str().unwrap();
    // The whole chain: the driver's step, the store's failure and the reason it gives.
    assert!(
        note.contains(
            "retried every 10s: mon failover: mon failover state: status.monFailover does not hold a mon failover state (invalid type: string \"not\", expected u32); it is left untouched;"
        ),
        "{note}"
    );
    let status = requests
        .iter()
        .find(|r| r.path == STATUS_PATH && r.is_apply())
        .expect("the status with the failure");
    let message = status.body["status"]["message"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(
        message.contains("; mon migration: failed, retrying: ")
            && message.contains("it is left untouched"),
        "{message}"
    );
    assert!(
        metrics
            .encode()
            .contains("mcs_ceph_operator_failover_steps_total{step=\"tick\",outcome=\"error\"} 1")
    );

    // The retry fails the same way: the status already says so, no write, no Event.
    take_back(&mut snapshot, &requests);
    let (result, requests, _) = run_with(
        &snapshot,
        at(110),
        no_lookups(),
        0,
        Some(admin()),
        objects(),
    )
    .await;
    assert_eq!(result.unwrap(), Action::requeue(MIGRATION_REQUEUE));
    assert!(
        !requests
            .iter()
            .any(|r| r.path == EVENTS_PATH || r.is_apply()),
        "{:?}",
        paths(&requests)
    );
}

/// The global IP the walk's MCS implementation gives the new mons d, e and f (the old mons
/// are never exported, so never looked up).
fn mon_global_ip(mon: &str) -> IpAddr {
    match mon {
        "d" => "242.1.9.4",
        "e" => "242.1.9.5",
        "f" => "242.1.9.6",
        _ => panic!("mon {mon} has no global IP in this walk: only the new mons are looked up"),
    }
    .parse()
    .unwrap()
}

/// The Ceph cluster of the walk, shared by the mock admins of every reconcile: the monmap (by
/// rank), the mon daemons that run (at the `--public-addr` of their Deployment) and, from the
/// two, the quorum.
#[derive(Debug)]
struct Ceph {
    monmap: Vec<(String, IpAddr)>,
    running: BTreeMap<String, IpAddr>,
    removed: BTreeSet<String>,
    epoch: u64,
    largest_monmap: usize,
}

impl Ceph {
    /// Mons a, b and c on their cluster IPs, running and in quorum.
    fn on_cluster_ips() -> Self {
        let monmap: Vec<(String, IpAddr)> = ["a", "b", "c"]
            .iter()
            .enumerate()
            .map(|(i, mon)| {
                (
                    (*mon).to_owned(),
                    format!("10.96.0.{}", 10 + i).parse().unwrap(),
                )
            })
            .collect();
        Ceph {
            running: monmap.iter().cloned().collect(),
            monmap,
            removed: BTreeSet::new(),
            epoch: 1,
            largest_monmap: 3,
        }
    }

    /// The mons of the monmap whose daemon runs at their monmap address.
    fn quorum(&self) -> Vec<String> {
        self.monmap
            .iter()
            .filter(|(name, ip)| self.running.get(name) == Some(ip))
            .map(|(name, _)| name.clone())
            .collect()
    }

    /// `ceph quorum_status`. A mon whose daemon was started and that is not in the monmap (and
    /// was never removed from it) has joined by now, at the address it advertises.
    fn quorum_status(&mut self, journal: &Journal) -> QuorumStatus {
        let joining: Vec<(String, IpAddr)> = self
            .running
            .iter()
            .filter(|(name, _)| {
                !self.removed.contains(*name) && !self.monmap.iter().any(|(m, _)| m == *name)
            })
            .map(|(name, ip)| (name.clone(), *ip))
            .collect();
        for (name, ip) in joining {
            journal.lock().unwrap().push(format!("join {name}"));
            self.monmap.push((name, ip));
            self.epoch += 1;
        }
        self.largest_monmap = self.largest_monmap.max(self.monmap.len());
        let mons: Vec<Value> = self
            .monmap
            .iter()
            .enumerate()
            .map(|(rank, (name, ip))| {
                json!({"rank": rank, "name": name, "public_addrs": {"addrvec": [
                    {"type": "v2", "addr": format!("{ip}:3300")},
                    {"type": "v1", "addr": format!("{ip}:6789")}]}})
            })
            .collect();
        serde_json::from_value(
            json!({"election_epoch": self.epoch, "quorum_names": self.quorum(),
            "monmap": {"epoch": self.epoch, "fsid": "f", "mons": mons}}),
        )
        .unwrap()
    }

    /// `ceph mon add`: in the monmap, in quorum once its daemon runs there.
    fn add(&mut self, mon: &str, ip: IpAddr, journal: &Journal) {
        if !self.monmap.iter().any(|(m, _)| m == mon) {
            journal.lock().unwrap().push(format!("add {mon}"));
            self.monmap.push((mon.to_owned(), ip));
            self.epoch += 1;
            self.largest_monmap = self.largest_monmap.max(self.monmap.len());
        }
    }

    /// `ceph mon remove`, asserting the safety property of a move: every other mon is in
    /// quorum. The removed mon's daemon shuts down and never rejoins.
    fn remove(&mut self, mon: &str, journal: &Journal) {
        let quorum = self.quorum();
        let out: Vec<&str> = self
            .monmap
            .iter()
            .map(|(name, _)| name.as_str())
            .filter(|name| *name != mon && !quorum.iter().any(|q| q == name))
            .collect();
        assert!(
            out.is_empty(),
            "mon {mon} removed while {out:?} are out of quorum (monmap {:?})",
            self.monmap
        );
        journal.lock().unwrap().push(format!("remove {mon}"));
        self.monmap.retain(|(name, _)| name != mon);
        self.running.remove(mon);
        self.removed.insert(mon.to_owned());
        self.epoch += 1;
    }
}

/// A mock admin of the shared Ceph (one per reconcile: `run_journaled` takes it).
fn ceph_admin(ceph: &Arc<Mutex<Ceph>>, journal: &Journal) -> MockCephMonAdmin {
    let mut admin = MockCephMonAdmin::new();
    let (c, j) = (Arc::clone(ceph), Arc::clone(journal));
    admin
        .expect_quorum_status()
        .returning(move || Ok(c.lock().unwrap().quorum_status(&j)));
    let (c, j) = (Arc::clone(ceph), Arc::clone(journal));
    admin.expect_add_mon().returning(move |mon, ip| {
        c.lock().unwrap().add(mon.as_str(), ip, &j);
        Ok(())
    });
    let (c, j) = (Arc::clone(ceph), Arc::clone(journal));
    admin.expect_remove_mon().returning(move |mon| {
        c.lock().unwrap().remove(mon.as_str(), &j);
        Ok(())
    });
    admin
}

/// Clusterset DNS: the new mons' names answer with their global IPs; any other lookup fails
/// the test (the OSDs' IPs are known from the converged fixture).
fn clusterset_dns(journal: &Journal) -> MockClustersetResolver {
    let journal = Arc::clone(journal);
    let mut resolver = MockClustersetResolver::new();
    resolver.expect_resolve().returning(move |name| {
        let text = name.to_string();
        let mon = text
            .strip_prefix("east.rook-ceph-mon-")
            .and_then(|rest| rest.strip_suffix(".rook-ceph.svc.clusterset.local"))
            .unwrap_or_else(|| panic!("unexpected lookup {text}"))
            .to_owned();
        journal.lock().unwrap().push(format!("lookup {mon}"));
        Ok(Resolution {
            name: name.clone(),
            addresses: vec![mon_global_ip(&mon)],
            valid_until: Instant::now() + Duration::from_secs(30),
        })
    });
    resolver
}

/// Rook's mon Deployment `rook-ceph-mon-<id>` advertising `ip`, cut down to what the new mon's
/// derivation reads.
fn rook_mon_deployment(id: &str, ip: &str) -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": format!("rook-ceph-mon-{id}"), "namespace": NAMESPACE,
        "labels": {"app": "rook-ceph-mon", "mon": id, "ceph_daemon_id": id},
        "ownerReferences": [{"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster",
            "name": CLUSTER, "uid": CLUSTER_UID, "controller": true}]},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "rook-ceph-mon", "mon": id}},
        "template": {
            "metadata": {"labels": {"app": "rook-ceph-mon", "mon": id}},
            "spec": {
                "initContainers": [{"name": "init-mon-fs", "image": "quay.io/ceph/ceph:v18.2.4",
                    "args": ["--fsid=f", format!("--id={id}"), format!("--public-addr={ip}"),
                             "--mkfs"]}],
                "containers": [{"name": "mon", "image": "quay.io/ceph/ceph:v18.2.4",
                    "args": ["--fsid=f", format!("--id={id}"), "--foreground",
                             format!("--public-addr={ip}"),
                             format!("--setuser-match-path=/var/lib/ceph/mon/ceph-{id}/store.db"),
                             "--public-bind-addr=$(ROOK_POD_IP)"]}],
                "volumes": [{"name": "ceph-daemon-data",
                             "hostPath": {"path": format!("/var/lib/rook/mon-{id}/data")}}]
            }
        }
    }})
}

/// The mons whose Deployment runs a pod (replicas not 0), at the `--public-addr` of its mon
/// container.
fn running_mons(deployments: &BTreeMap<String, Value>) -> BTreeMap<String, IpAddr> {
    deployments
        .iter()
        .filter_map(|(name, deployment)| {
            let id = name
                .strip_prefix("rook-ceph-mon-")
                .filter(|id| !id.ends_with("-canary"))?;
            if deployment["spec"]["replicas"] == 0 {
                return None;
            }
            let containers = deployment["spec"]["template"]["spec"]["containers"].as_array()?;
            let mon = containers.iter().find(|c| c["name"] == "mon")?;
            let ip = mon["args"]
                .as_array()?
                .iter()
                .filter_map(Value::as_str)
                .find_map(|arg| arg.strip_prefix("--public-addr="))?
                .parse()
                .ok()?;
            Some((id.to_owned(), ip))
        })
        .collect()
}

/// `data` of `rook-ceph-mon-endpoints` in the snapshot.
fn mon_data(snapshot: &Snapshot) -> String {
    snapshot
        .mon_endpoints
        .as_ref()
        .and_then(|c| c.data.as_ref())
        .and_then(|d| d.get("data"))
        .cloned()
        .unwrap_or_default()
}

/// A cluster walked through successive reconciles. The snapshot is both the watch caches and
/// what the API server holds (every request is folded back into it); the mon and canary
/// Deployments, which the caches do not hold but the migration reads and writes, are kept
/// beside it; Ceph's running mons follow their Deployments; the MCS implementation takes an
/// export once its Service exists. The journal records, in order, every request, lookup and
/// monmap change; the history one line per reconcile, for failure messages.
struct Walk {
    snapshot: Snapshot,
    deployments: BTreeMap<String, Value>,
    ceph: Arc<Mutex<Ceph>>,
    journal: Journal,
    history: Vec<String>,
}

impl Walk {
    /// What the mock API server answers GETs and DELETEs from.
    fn objects(&self) -> BTreeMap<String, Value> {
        let mut objects = BTreeMap::new();
        if let Some(prior) = &self.snapshot.prior {
            objects.insert(STATUS_PATH.to_owned(), serde_json::to_value(prior).unwrap());
        }
        if let Some(config_map) = &self.snapshot.mon_endpoints {
            objects.insert(
                CM_PATH.to_owned(),
                serde_json::to_value(config_map).unwrap(),
            );
        }
        for service in &self.snapshot.services {
            let name = service.metadata.name.as_deref().unwrap();
            objects.insert(
                format!("{SERVICES_PATH}/{name}"),
                serde_json::to_value(service).unwrap(),
            );
        }
        for export in &self.snapshot.exports {
            let name = export.metadata.name.as_deref().unwrap();
            objects.insert(
                format!("{EXPORTS_PATH}/{name}"),
                serde_json::to_value(export).unwrap(),
            );
        }
        for (name, deployment) in &self.deployments {
            objects.insert(format!("{DEPLOYMENTS_PATH}/{name}"), deployment.clone());
        }
        objects
    }

    /// One reconcile at `at(t)`, its requests folded back.
    async fn reconcile(&mut self, t: i64) -> (Action, Vec<Seen>) {
        let mark = self.journal.lock().unwrap().len();
        let (result, requests, _) = run_journaled(
            &self.snapshot,
            at(t),
            clusterset_dns(&self.journal),
            0,
            Some(ceph_admin(&self.ceph, &self.journal)),
            self.objects(),
            Some(Arc::clone(&self.journal)),
        )
        .await;
        let action = result.unwrap_or_else(|error| {
            panic!(
                "the reconcile at t={t} failed: {error}\n{}",
                self.history.join("\n")
            )
        });
        take_back(&mut self.snapshot, &requests);
        for seen in &requests {
            let Some(name) = seen
                .path
                .strip_prefix(&format!("{DEPLOYMENTS_PATH}/"))
                .filter(|name| name.starts_with("rook-ceph-mon-"))
            else {
                continue;
            };
            match seen.method.as_str() {
                "DELETE" => {
                    self.deployments.remove(name);
                }
                // A whole Deployment, or the migration's scale apply (`spec.replicas` only).
                "PATCH" => merge(
                    self.deployments
                        .entry(name.to_owned())
                        .or_insert(Value::Null),
                    &seen.body,
                ),
                _ => {}
            }
        }
        self.ceph.lock().unwrap().running = running_mons(&self.deployments);
        let services: BTreeSet<String> = self
            .snapshot
            .services
            .iter()
            .filter_map(|s| s.metadata.name.clone())
            .collect();
        for export in &mut self.snapshot.exports {
            let name = export.metadata.name.clone().unwrap();
            if export.status.is_none() && services.contains(&name) {
                export.status = Some(mcs_types::ServiceExportStatus {
                    conditions: exported_conditions(),
                    ..Default::default()
                });
            }
        }
        let message = self
            .snapshot
            .prior
            .as_ref()
            .and_then(|p| p.status.as_ref())
            .map(|s| s.message.clone())
            .unwrap_or_default();
        let journal = self.journal.lock().unwrap()[mark..].to_vec();
        self.history.push(format!(
            "t={t} -> {action:?}\n  {}\n  status: {message}",
            journal.join("\n  ")
        ));
        (action, requests)
    }

    /// The machine's state in the status object.
    fn machine_state(&self) -> Option<mon_failover::MachineState> {
        let status = self.snapshot.prior.as_ref()?.status.as_ref()?;
        stored_state(status).unwrap()
    }
}

/// A journal line as a milestone of the walk (`provision d`, `export d`, `lookup d`,
/// `start d`, `join d`, `remove a`, `delete a`, ...), or `None` for the other requests.
fn milestone(entry: &str) -> Option<String> {
    let (verb, rest) = entry.split_once(' ')?;
    if matches!(verb, "lookup" | "join" | "add" | "remove") {
        return Some(entry.to_owned());
    }
    if let Some(name) = rest.strip_prefix(&format!("{DEPLOYMENTS_PATH}/rook-ceph-mon-")) {
        return match (verb, name.strip_suffix("-canary")) {
            ("PATCH", Some(id)) => Some(format!("provision {id}")),
            ("PATCH", None) => Some(format!("start {name}")),
            ("DELETE", None) => Some(format!("delete {name}")),
            _ => None,
        };
    }
    if let Some(id) = rest.strip_prefix(&format!("{SERVICES_PATH}/rook-ceph-mon-")) {
        return (verb == "PATCH").then(|| format!("service {id}"));
    }
    if let Some(id) = rest.strip_prefix(&format!("{EXPORTS_PATH}/rook-ceph-mon-")) {
        return (verb == "PATCH").then(|| format!("export {id}"));
    }
    None
}

/// The whole migration through successive reconciles: mons a, b, c on cluster IPs are replaced
/// one at a time by d, e, f on their global IPs. For each: the new mon provisioned (its Service,
/// canary, and its entry without an endpoint in rook-ceph-mon-endpoints), its export applied by
/// the plan and its name resolved, the new mon started with --public-addr=<global>, joining the
/// quorum, the old mon removed from the monmap only then (the mock Ceph asserts every other mon
/// is in quorum at each removal) and its objects deleted. Then the mon endpoints and mon_host
/// are written, once, and nothing more.
#[tokio::test]
async fn the_reconcile_walks_a_whole_mon_migration_from_cluster_ips_to_global_ips() {
    let mut snapshot = converged(2).await;
    annotate(&mut snapshot);
    let mut walk = Walk {
        snapshot,
        deployments: [
            ("a", "10.96.0.10"),
            ("b", "10.96.0.11"),
            ("c", "10.96.0.12"),
        ]
        .into_iter()
        .map(|(id, ip)| (format!("rook-ceph-mon-{id}"), rook_mon_deployment(id, ip)))
        .collect(),
        ceph: Arc::new(Mutex::new(Ceph::on_cluster_ips())),
        journal: Journal::default(),
        history: Vec::new(),
    };

    let mut t = 100;
    let mut steady = false;
    // Reconciles that wrote the plan's mon endpoints or mon_host, and whether every mon
    // listed in rook-ceph-mon-endpoints advertised its global IP before.
    let mut mon_config_writes = Vec::new();
    let mut mon_host_body = Value::Null;
    // The migration's own rook-ceph-config applies: (mon_initial_members, mon_host).
    let mut followed: Vec<(String, String)> = Vec::new();
    for _ in 0..60 {
        let all_global = mon_data(&walk.snapshot).split(',').all(|entry| {
            entry
                .split_once('=')
                .is_some_and(|(_, e)| e.starts_with("242."))
        });
        let (action, requests) = walk.reconcile(t).await;
        if walk
            .machine_state()
            .is_some_and(|s| s.migration().is_some())
        {
            assert_eq!(
                action,
                Action::requeue(MIGRATION_REQUEUE),
                "{}",
                walk.history.join("\n")
            );
        }
        let config_writes: Vec<&Seen> = requests
            .iter()
            .filter(|r| r.is_apply() && (r.path == CM_PATH || r.path.contains("/secrets/")))
            .collect();
        if !config_writes.is_empty() {
            mon_config_writes.push((t, all_global));
        }
        if let Some(secret) = config_writes.iter().find(|r| r.path.contains("/secrets/")) {
            mon_host_body = secret.body.clone();
        }
        for seen in requests
            .iter()
            .filter(|r| r.is_migration_apply() && r.path.contains("/secrets/"))
        {
            let secret: k8s_openapi::api::core::v1::Secret =
                serde_json::from_value(seen.body.clone()).unwrap();
            let data = secret.data.unwrap();
            let text = |key: &str| String::from_utf8(data[key].0.clone()).unwrap();
            followed.push((text("mon_initial_members"), text("mon_host")));
        }
        if requests.is_empty() {
            assert_eq!(
                action,
                Action::await_change(),
                "{}",
                walk.history.join("\n")
            );
            steady = true;
            break;
        }
        t += 10;
    }
    let history = walk.history.join("\n");
    assert!(steady, "no steady state after 60 reconciles:\n{history}");

    // The order: a -> d, then b -> e, then c -> f, each step in turn.
    let journal = walk.journal.lock().unwrap().clone();
    let mut milestones: Vec<String> = Vec::new();
    for entry in journal.iter().filter_map(|e| milestone(e)) {
        if !milestones.contains(&entry) {
            milestones.push(entry);
        }
    }
    let pairs = [("a", "d"), ("b", "e"), ("c", "f")];
    let expected: Vec<String> = pairs
        .iter()
        .flat_map(|(old, new)| {
            [
                format!("service {new}"),
                format!("provision {new}"),
                format!("export {new}"),
                format!("lookup {new}"),
                format!("start {new}"),
                format!("join {new}"),
                format!("remove {old}"),
                format!("delete {old}"),
            ]
        })
        .collect();
    assert_eq!(milestones, expected, "{history}");
    // One at a time: nothing of a replacement happens before the previous one has ended.
    let concerns = |entry: &String, (old, new): (&str, &str)| {
        milestone(entry)
            .is_some_and(|m| m.ends_with(&format!(" {old}")) || m.ends_with(&format!(" {new}")))
    };
    for window in pairs.windows(2) {
        let last = journal
            .iter()
            .rposition(|e| concerns(e, window[0]))
            .unwrap();
        let first = journal.iter().position(|e| concerns(e, window[1])).unwrap();
        assert!(last < first, "{window:?} overlap:\n{history}");
    }
    let lookups: Vec<&String> = journal
        .iter()
        .filter(|e| e.starts_with("lookup "))
        .collect();
    assert_eq!(
        lookups,
        ["lookup d", "lookup e", "lookup f"],
        "each new mon resolved once"
    );
    assert!(
        !journal.iter().any(|e| e.starts_with("add ")),
        "a new mon joins by itself: {journal:?}"
    );

    // Each old mon's objects are deleted after its removal from the monmap; the new mons'
    // are kept (but for their canaries).
    for (old, new) in pairs {
        let removed = journal
            .iter()
            .position(|e| *e == format!("remove {old}"))
            .unwrap();
        for path in [
            format!("{DEPLOYMENTS_PATH}/rook-ceph-mon-{old}"),
            format!("{DEPLOYMENTS_PATH}/rook-ceph-mon-{old}-canary"),
            format!("{SERVICES_PATH}/rook-ceph-mon-{old}"),
            format!("{EXPORTS_PATH}/rook-ceph-mon-{old}"),
        ] {
            let deleted = journal
                .iter()
                .position(|e| *e == format!("DELETE {path}"))
                .unwrap_or_else(|| panic!("{path} was not deleted:\n{history}"));
            assert!(
                removed < deleted,
                "{path} deleted before mon {old} left the monmap"
            );
        }
        assert!(journal.contains(&format!(
            "DELETE {DEPLOYMENTS_PATH}/rook-ceph-mon-{new}-canary"
        )));
        for path in [
            format!("{DEPLOYMENTS_PATH}/rook-ceph-mon-{new}"),
            format!("{SERVICES_PATH}/rook-ceph-mon-{new}"),
            format!("{EXPORTS_PATH}/rook-ceph-mon-{new}"),
        ] {
            assert!(
                !journal.contains(&format!("DELETE {path}")),
                "{path} deleted"
            );
        }
        let deployment = &walk.deployments[&format!("rook-ceph-mon-{new}")];
        let args = deployment
            .pointer("/spec/template/spec/containers/0/args")
            .and_then(Value::as_array)
            .unwrap();
        for arg in [
            format!("--id={new}"),
            format!("--public-addr={}", mon_global_ip(new)),
            "--public-bind-addr=$(ROOK_POD_IP)".to_owned(),
        ] {
            assert!(args.contains(&json!(arg)), "{arg} not in {args:?}");
        }
    }
    assert_eq!(
        walk.deployments.keys().collect::<Vec<_>>(),
        ["rook-ceph-mon-d", "rook-ceph-mon-e", "rook-ceph-mon-f"]
    );

    // Ceph: d, e, f at their global IPs, all in quorum; never more than four mons.
    {
        let ceph = walk.ceph.lock().unwrap();
        let monmap: Vec<(&str, String)> = ceph
            .monmap
            .iter()
            .map(|(name, ip)| (name.as_str(), ip.to_string()))
            .collect();
        assert_eq!(
            monmap,
            [
                ("d", "242.1.9.4".to_owned()),
                ("e", "242.1.9.5".to_owned()),
                ("f", "242.1.9.6".to_owned())
            ]
        );
        assert_eq!(ceph.quorum(), ["d", "e", "f"]);
        assert_eq!(ceph.largest_monmap, 4, "one new mon at a time");
    }

    // The status: every mon up to date on its global IP, none to replace, the machine idle.
    let status = walk
        .snapshot
        .prior
        .as_ref()
        .unwrap()
        .status
        .as_ref()
        .unwrap();
    let mons: Vec<(&str, &str, Option<&str>)> = status
        .daemons
        .iter()
        .filter(|d| d.name.starts_with("mon."))
        .map(|d| (d.name.as_str(), d.state.as_str(), d.global_ip.as_deref()))
        .collect();
    assert_eq!(
        mons,
        [
            ("mon.d", "UpToDate", Some("242.1.9.4")),
            ("mon.e", "UpToDate", Some("242.1.9.5")),
            ("mon.f", "UpToDate", Some("242.1.9.6"))
        ],
        "{history}"
    );
    assert_eq!(
        status.phase,
        mcs_ceph_api::Phase::Ready,
        "{}",
        status.message
    );
    assert_eq!(status.ready_daemons, status.daemon_count);
    assert!(
        !status.message.contains("mon migration"),
        "{}",
        status.message
    );
    let state = walk.machine_state().expect("the machine's state");
    assert!(state.migration().is_none(), "{state}");
    assert_eq!(state.to_string(), "idle");
    assert_eq!(
        (state.history().completed, state.history().rolled_back),
        (3, 0)
    );
    assert!(
        history.contains("mon migration: mon b (10.96.0.11, misplaced) -> mon e"),
        "{history}"
    );

    // rook-ceph-mon-endpoints and mon_host: written once, after every mon advertised its
    // global IP.
    assert_eq!(
        mon_config_writes.len(),
        1,
        "{mon_config_writes:?}\n{history}"
    );
    assert!(
        mon_config_writes[0].1,
        "written before every mon advertised its global IP"
    );
    assert_eq!(
        mon_data(&walk.snapshot),
        "d=242.1.9.4:6789,e=242.1.9.5:6789,f=242.1.9.6:6789"
    );
    let mon_host = "[v2:242.1.9.4:3300,v1:242.1.9.4:6789],[v2:242.1.9.5:3300,v1:242.1.9.5:6789],[v2:242.1.9.6:3300,v1:242.1.9.6:6789]";
    assert_eq!(status.mon_host.as_deref(), Some(mon_host));
    assert_eq!(
        mon_host_body["data"]["mon_host"],
        serde_json::to_value(k8s_openapi::ByteString(mon_host.as_bytes().to_vec())).unwrap()
    );

    // During the migration, mon_host follows the mons that run: each start adds the new mon,
    // each delete drops the old one (a removed mon is never listed again), so a daemon that
    // starts mid-migration always finds running mons.
    let members: Vec<&str> = followed.iter().map(|(m, _)| m.as_str()).collect();
    assert_eq!(
        members,
        ["a,b,c,d", "b,c,d", "b,c,d,e", "c,d,e", "c,d,e,f", "d,e,f"],
        "{history}"
    );
    assert!(
        followed[0]
            .1
            .starts_with("[v2:10.96.0.10:3300,v1:10.96.0.10:6789],")
            && followed[0]
                .1
                .ends_with(",[v2:242.1.9.4:3300,v1:242.1.9.4:6789]"),
        "{:?}",
        followed[0]
    );
    assert_eq!(followed.last().unwrap().1, mon_host);

    // Steady state: a later reconcile asks nothing and writes nothing.
    let (action, requests) = walk.reconcile(t + 86_400).await;
    assert_eq!(action, Action::await_change());
    assert!(requests.is_empty(), "{:?}", paths(&requests));
}

/// The `daemon_up_to_date` series, sorted.
fn daemon_series(metrics: &Metrics) -> Vec<String> {
    let mut series: Vec<String> = metrics
        .encode()
        .lines()
        .filter(|l| l.starts_with("mcs_ceph_operator_daemon_up_to_date{"))
        .map(str::to_owned)
        .collect();
    series.sort();
    series
}

/// A reconcile of `snapshot` at `second` sharing `metrics`, with the cluster in the cache or
/// (deleted meanwhile) not.
async fn reconcile_sharing(
    snapshot: &Snapshot,
    second: i64,
    metrics: &Arc<Metrics>,
    cluster_cached: bool,
) -> Action {
    let server = Server {
        fail_first: 0,
        objects: BTreeMap::new(),
        journal: None,
    };
    let operator = Operator {
        metrics: Arc::clone(metrics),
        cluster_cached,
    };
    let (result, _server, _) = reconcile_in(
        snapshot,
        at(second),
        no_lookups(),
        None,
        server,
        Config::default(),
        operator,
    )
    .await;
    result.unwrap()
}

/// The per-daemon series follow the cluster: a reconcile exposes one per daemon, a reconcile
/// that ends after its cluster left the cache (deleted meanwhile) removes them instead of
/// leaving them behind, and MCS turned off removes them.
#[tokio::test]
async fn the_daemon_series_of_a_cluster_follow_the_cluster() {
    let mut snapshot = converged(2).await;
    let metrics = Arc::new(Metrics::new());
    // The OSDs advertise their global IPs; the mons are still on cluster IPs.
    let series = |(daemon, up_to_date): (&str, u8)| {
        format!(
            "mcs_ceph_operator_daemon_up_to_date{{namespace=\"{NAMESPACE}\",cluster=\"{CLUSTER}\",daemon=\"{daemon}\"}} {up_to_date}"
        )
    };
    let every_daemon: Vec<String> = [
        ("mon.a", 0),
        ("mon.b", 0),
        ("mon.c", 0),
        ("osd.0", 1),
        ("osd.1", 1),
    ]
    .map(series)
    .into();

    reconcile_sharing(&snapshot, 10, &metrics, true).await;
    assert_eq!(daemon_series(&metrics), every_daemon);

    reconcile_sharing(&snapshot, 11, &metrics, false).await;
    assert_eq!(daemon_series(&metrics), Vec::<String>::new());

    reconcile_sharing(&snapshot, 12, &metrics, true).await;
    assert_eq!(daemon_series(&metrics), every_daemon);
    snapshot.cluster =
        cluster_with(json!({"multiClusterService": {"enabled": false, "clusterID": "east"}}));
    reconcile_sharing(&snapshot, 100, &metrics, true).await;
    assert_eq!(daemon_series(&metrics), Vec::<String>::new());
}

/// Every line a reconcile logs is in one span `reconcile` with the cluster's namespace and
/// name (`cluster`), and an error is logged as the structured field `error` (with its causes), not in the
/// message: a failed lookup inside the reconcile, a failed write in the error policy.
#[tokio::test]
async fn a_reconcile_logs_in_its_span_and_errors_in_the_error_field() {
    let capture = clusterset_trace_capture::Capture::new();
    let _default = capture.set_default();

    let mut snapshot = rook_cluster(2);
    let (_, requests) = run(&snapshot, at(0), no_lookups(), 0).await;
    take_back(&mut snapshot, &requests);
    set_export_conditions(&mut snapshot, &exported_conditions());
    run(&snapshot, at(10), resolver(2, Some(1)), 0)
        .await
        .0
        .unwrap();

    let reconciles: Vec<_> = capture
        .spans()
        .into_iter()
        .filter(|s| s.name == "reconcile")
        .collect();
    assert_eq!(
        reconciles.len(),
        2,
        "one span per reconcile: {reconciles:?}"
    );
    for span in &reconciles {
        assert_eq!(span.field("namespace"), Some(NAMESPACE));
        assert_eq!(span.field("cluster"), Some(CLUSTER));
    }
    let reconciled = capture.event("reconciled").unwrap();
    assert!(reconciled.span("reconcile").is_some(), "{reconciled:?}");
    let lookup = capture.event("lookup failed").unwrap();
    assert_eq!(lookup.span("reconcile"), Some(&reconciles[1]));
    assert!(
        lookup
            .field("error")
            .is_some_and(|e| e.contains("SERVFAIL")),
        "{lookup:?}"
    );

    let (result, _) = run(&rook_cluster(2), at(0), no_lookups(), 1).await;
    let cluster = Arc::new(cluster());
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let _server = ApiServer::start(handle);
    let context = Arc::new(Context {
        api: Arc::new(KubeApi::new(kube::Client::new(service, "default"), None)),
        resolver: Arc::new(no_lookups()),
        caches: caches(&rook_cluster(2), true).await,
        config: Config::default(),
        clock: clusterset_daemon::Clock::from_fn(|| at(0)),
        metrics: Arc::new(Metrics::new()),
        lookup_concurrency: 4,
        lookups: OPERATOR_LOOKUPS.with(Arc::clone),
        mon_migration: None,
    });
    error_policy(cluster, &result.unwrap_err(), context);
    let failed = capture.event("reconcile failed").unwrap();
    assert_eq!(failed.level, tracing::Level::WARN);
    let error = failed.field("error").unwrap();
    assert!(
        error.starts_with("apply_service of rook-ceph/rook-ceph-osd-0 failed: "),
        "{error}"
    );
    assert!(!failed.message.contains("failed:"), "{failed:?}");
}

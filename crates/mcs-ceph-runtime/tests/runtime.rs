#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The whole runtime against a tower-test mock API server that refuses what a real one refuses
//! (`common::strict`): MCS discovery, one list per watch (paths, label and field selectors,
//! each parsed as the API server parses it), and the first reconcile's server-side applies,
//! made only after every list has been answered.

mod common;

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use clusterset_dns::resolver::MockClustersetResolver;
use common::strict::{self, Received as Seen, respond, respond_bytes};
use common::*;
use mcs_ceph_core::config::Config;
use mcs_ceph_runtime::kube_io::KubeApi;
use mcs_ceph_runtime::runtime::{RunOptions, run};
use serde_json::{Value, json};
use tokio::sync::oneshot;

fn list(kind: &str, items: Vec<Value>) -> Vec<u8> {
    serde_json::to_vec(&json!({
        "apiVersion": "v1", "kind": format!("{kind}List"),
        "metadata": {"resourceVersion": "100"}, "items": items
    }))
    .unwrap()
}

/// The answer to a list request, by path (all namespaces, or `rook-ceph`'s); `None` for
/// anything else.
fn list_answer(path: &str) -> Option<Vec<u8>> {
    let snapshot = rook_cluster(1);
    let path = path.replace("/namespaces/rook-ceph/", "/");
    let answer = match path.as_str() {
        "/apis/ceph.rook.io/v1/cephclusters" => {
            list("CephCluster", vec![to_json(&snapshot.cluster)])
        }
        "/api/v1/services" => list("Service", snapshot.services.iter().map(to_json).collect()),
        "/apis/apps/v1/deployments" => list(
            "Deployment",
            snapshot.deployments.iter().map(to_json).collect(),
        ),
        "/api/v1/configmaps" => list(
            "ConfigMap",
            snapshot.mon_endpoints.iter().map(to_json).collect(),
        ),
        "/apis/clusterset.io/v1alpha1/cephclusteraddressings" => {
            list("CephClusterAddressing", Vec::new())
        }
        "/apis/multicluster.x-k8s.io/v1beta1/serviceexports" => list("ServiceExport", Vec::new()),
        "/apis/multicluster.x-k8s.io/v1beta1/serviceimports" => list("ServiceImport", Vec::new()),
        _ => return None,
    };
    Some(answer)
}

fn to_json<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object).unwrap()
}

/// Runs the operator (watching `watch_namespace`, or every namespace) against a mock API
/// server until its first three applies, and returns every request until then.
async fn first_applies(watch_namespace: Option<&str>) -> Vec<Seen> {
    first_applies_debounced(watch_namespace, Duration::ZERO)
        .await
        .requests
}

/// What [`first_applies_debounced`] saw.
struct FirstApplies {
    /// Every request until the third apply.
    requests: Vec<Seen>,
    /// From the last list answered (the last watch event before the first reconcile) to the
    /// first apply.
    list_to_apply: Duration,
}

/// [`first_applies`], with the operator's `debounce`.
async fn first_applies_debounced(
    watch_namespace: Option<&str>,
    debounce: Duration,
) -> FirstApplies {
    let (client, mut handle) = strict::pair();
    let mut resolver = MockClustersetResolver::new();
    resolver.expect_resolve().never();
    let options = RunOptions {
        config: Config::default(),
        api: Arc::new(KubeApi::new(client.clone(), None)),
        resolver: Arc::new(resolver),
        listen: "127.0.0.1:0".parse().unwrap(),
        lookup_concurrency: 4,
        reconcile_concurrency: 1,
        debounce,
        rediscover_every: None,
        mon_migration: false,
        watch_namespace: watch_namespace.map(str::to_owned),
    };
    let (stop, stopped) = oneshot::channel::<()>();
    let operator = tokio::spawn(run(client, options, async {
        let _ = stopped.await;
    }));

    let mut seen: Vec<Seen> = Vec::new();
    let mut held_watches = Vec::new();
    let mut applies = 0;
    let mut last_list = None;
    let mut first_apply = None;
    while applies < 3 {
        let (request, send) = tokio::time::timeout(Duration::from_secs(20), handle.next_request())
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "the operator stopped asking after {seen:#?}; refused: {:#?}",
                    handle.log().peek()
                )
            })
            .unwrap();
        seen.push(request.clone());
        let Seen {
            method,
            path,
            query,
            body,
            ..
        } = request;
        if path == "/apis/multicluster.x-k8s.io/v1beta1" {
            let resources = json!({
                "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "multicluster.x-k8s.io/v1beta1",
                "resources": [
                    {"name": "serviceexports", "singularName": "serviceexport", "namespaced": true, "kind": "ServiceExport", "verbs": ["get", "list", "watch", "patch"]},
                    {"name": "serviceimports", "singularName": "serviceimport", "namespaced": true, "kind": "ServiceImport", "verbs": ["get", "list", "watch"]}
                ]
            });
            respond(send, 200, &resources);
        } else if query.get("watch").map(String::as_str) == Some("true") {
            held_watches.push(send);
        } else if method == "GET" {
            let answer = list_answer(&path).unwrap_or_else(|| panic!("unexpected list {path}"));
            respond_bytes(send, 200, answer);
            last_list = Some(std::time::Instant::now());
        } else if method == "PATCH" {
            first_apply.get_or_insert_with(std::time::Instant::now);
            applies += 1;
            respond(send, 200, &body);
        } else {
            panic!("unexpected {method} {path}");
        }
    }
    let _ = stop.send(());
    operator.await.unwrap().unwrap();
    drop(held_watches);
    FirstApplies {
        requests: seen,
        list_to_apply: first_apply.unwrap() - last_list.unwrap(),
    }
}

/// The GET requests that pass `keep`, by path, with their label or field selector.
fn selectors_by_path(seen: &[Seen], keep: impl Fn(&Seen) -> bool) -> BTreeMap<&str, Option<&str>> {
    seen.iter()
        .filter(|s| s.method == "GET" && keep(s))
        .map(|s| {
            let selector = s
                .query
                .get("labelSelector")
                .or_else(|| s.query.get("fieldSelector"))
                .map(String::as_str);
            (s.path.as_str(), selector)
        })
        .collect()
}

#[tokio::test]
async fn every_watch_lists_before_the_first_apply() {
    let seen = first_applies(None).await;
    assert_eq!(
        seen[0].path, "/apis/multicluster.x-k8s.io/v1beta1",
        "discovery first"
    );
    let first_patch = seen.iter().position(|s| s.method == "PATCH").unwrap();
    let lists = selectors_by_path(&seen[..first_patch], |s| {
        !s.query.contains_key("watch") && s.query.contains_key("limit")
    });
    assert_eq!(
        lists,
        BTreeMap::from([
            (
                "/api/v1/configmaps",
                Some("metadata.name=rook-ceph-mon-endpoints")
            ),
            ("/api/v1/services", Some("rook_cluster")),
            ("/apis/apps/v1/deployments", Some("app=rook-ceph-osd")),
            ("/apis/ceph.rook.io/v1/cephclusters", None),
            ("/apis/clusterset.io/v1alpha1/cephclusteraddressings", None),
            ("/apis/multicluster.x-k8s.io/v1beta1/serviceexports", None),
            ("/apis/multicluster.x-k8s.io/v1beta1/serviceimports", None),
        ]),
        "every watch listed before the first write"
    );
    let patches: Vec<&str> = seen[first_patch..]
        .iter()
        .filter(|s| s.method == "PATCH")
        .map(|s| s.path.as_str())
        .collect();
    assert_eq!(
        patches,
        [
            "/api/v1/namespaces/rook-ceph/services/rook-ceph-osd-0",
            "/apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceexports/rook-ceph-osd-0",
            "/apis/clusterset.io/v1alpha1/namespaces/rook-ceph/cephclusteraddressings/my-cluster",
        ]
    );
}

/// `--watch-namespace rook-ceph`: every list and watch is of that namespace (what a Role there
/// grants), with the same selectors; the reconcile is the same.
/// `--debounce-ms`: a cluster's reconcile waits that long after the last change it heard of
/// (here the last list), so the first apply comes no sooner.
#[tokio::test]
async fn a_debounce_holds_the_reconcile_back_after_the_last_change() {
    let debounce = Duration::from_millis(1500);
    let seen = first_applies_debounced(None, debounce).await;
    assert!(
        seen.list_to_apply >= debounce,
        "first apply {:?} after the last list, with a debounce of {debounce:?}",
        seen.list_to_apply
    );
}

#[tokio::test]
async fn watching_one_namespace_lists_and_watches_only_that_namespace() {
    let seen = first_applies(Some("rook-ceph")).await;
    let first_patch = seen.iter().position(|s| s.method == "PATCH").unwrap();
    // Lists and watches alike (discovery aside).
    let lists = selectors_by_path(&seen[..first_patch], |s| {
        s.path != "/apis/multicluster.x-k8s.io/v1beta1"
    });
    assert_eq!(
        lists,
        BTreeMap::from([
            (
                "/api/v1/namespaces/rook-ceph/configmaps",
                Some("metadata.name=rook-ceph-mon-endpoints")
            ),
            (
                "/api/v1/namespaces/rook-ceph/services",
                Some("rook_cluster")
            ),
            (
                "/apis/apps/v1/namespaces/rook-ceph/deployments",
                Some("app=rook-ceph-osd")
            ),
            (
                "/apis/ceph.rook.io/v1/namespaces/rook-ceph/cephclusters",
                None
            ),
            (
                "/apis/clusterset.io/v1alpha1/namespaces/rook-ceph/cephclusteraddressings",
                None
            ),
            (
                "/apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceexports",
                None
            ),
            (
                "/apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceimports",
                None
            ),
        ]),
        "every list and watch in the namespace"
    );
    let patches = seen[first_patch..]
        .iter()
        .filter(|s| s.method == "PATCH")
        .count();
    assert_eq!(patches, 3);
}

/// The mock API server refuses what a real one refuses: a label selector a real API server
/// cannot parse (the value `clusterset.io/mcs-controller` holds a `/`, as the agent's once
/// did) is answered 400 BadRequest with the parser's message, and never reaches the test.
#[tokio::test]
async fn a_selector_a_real_server_cannot_parse_is_answered_400() {
    use k8s_openapi::api::core::v1::Service;
    use kube::api::{Api, ListParams};
    let (client, mut handle) = strict::pair();
    let services: Api<Service> = Api::namespaced(client, "rook-ceph");
    let params =
        ListParams::default().labels("app.kubernetes.io/managed-by=clusterset.io/mcs-controller");
    let listing = tokio::spawn(async move { services.list(&params).await });
    // The list ends (and drops the client) once answered: its result comes first.
    let error = tokio::select! {
        biased;
        result = listing => result.unwrap().unwrap_err(),
        Some((request, _)) = handle.next_request() => panic!("a request reached the test: {request:?}"),
    };
    let kube::Error::Api(status) = &error else {
        panic!("an API error expected: {error}");
    };
    assert_eq!(
        (status.code, status.reason.as_str()),
        (400, "BadRequest"),
        "{status:?}"
    );
    assert!(
        status.message.contains("clusterset.io/mcs-controller"),
        "{status:?}"
    );
    let refused = handle.take_refusals();
    assert_eq!(refused.len(), 1, "{refused:?}");
    assert!(
        refused[0].starts_with("GET /api/v1/namespaces/rook-ceph/services -> 400 BadRequest: "),
        "{refused:?}"
    );
}

fn not_found() -> Value {
    json!({"kind": "Status", "apiVersion": "v1", "metadata": {},
        "status": "Failure", "message": "the server could not find the requested resource",
        "reason": "NotFound", "code": 404})
}

#[tokio::test]
async fn a_newly_served_mcs_api_is_noticed_by_rediscovery() {
    use mcs_ceph_core::snapshot::{McsApi, McsVersion};
    use mcs_ceph_runtime::runtime::watch_mcs_api;
    let (client, mut handle) = strict::pair();
    let known = McsApi::Missing(
        "multicluster.x-k8s.io/v1beta1 is not served, multicluster.x-k8s.io/v1alpha1 is not served"
            .into(),
    );
    let watching = tokio::spawn(watch_mcs_api(client, known, Duration::from_millis(1)));
    // First round: still not served (both versions asked), so the watch goes on.
    for version in ["v1beta1", "v1alpha1"] {
        let (request, send) = handle.next_request().await.unwrap();
        assert_eq!(
            request.path,
            format!("/apis/multicluster.x-k8s.io/{version}")
        );
        respond(send, 404, &not_found());
    }
    // Second round: v1beta1 is served now.
    let (request, send) = handle.next_request().await.unwrap();
    assert_eq!(request.path, "/apis/multicluster.x-k8s.io/v1beta1");
    let resources = json!({
        "kind": "APIResourceList", "apiVersion": "v1", "groupVersion": "multicluster.x-k8s.io/v1beta1",
        "resources": [
            {"name": "serviceexports", "singularName": "", "namespaced": true, "kind": "ServiceExport", "verbs": ["list"]},
            {"name": "serviceimports", "singularName": "", "namespaced": true, "kind": "ServiceImport", "verbs": ["list"]}
        ]
    });
    respond(send, 200, &resources);
    assert_eq!(watching.await.unwrap(), McsApi::Served(McsVersion::V1Beta1));
}

#[test]
fn failing_watches_say_what_to_install_or_grant() {
    use kube::core::Status;
    use kube::runtime::watcher;
    use mcs_ceph_runtime::runtime::hint;
    let status = |code: u16| Status {
        code,
        ..Status::default()
    };
    let list_failed =
        |code| watcher::Error::InitialListFailed(kube::Error::Api(Box::new(status(code))));
    assert!(
        hint("cephclusteraddressings", &list_failed(404))
            .contains("deploy/mcs-ceph-operator/crd.yaml")
    );
    assert!(hint("cephclusters", &list_failed(404)).contains("CephCluster CRD"));
    assert!(hint("services", &list_failed(403)).contains("ClusterRole"));
    assert_eq!(hint("services", &list_failed(500)), "");
    assert_eq!(hint("services", &watcher::Error::NoResourceVersion), "");
}

/// The series of a CephCluster go when its watch says it was deleted, and those of a cluster
/// deleted while the watch was away go when the relist that no longer holds it completes; the
/// other clusters' stay.
#[test]
fn a_deleted_clusters_series_go_with_its_watch_event_or_the_relist() {
    use kube::runtime::reflector;
    use kube::runtime::watcher::Event;
    use mcs_ceph_api::CephCluster;
    use mcs_ceph_runtime::metrics::Metrics;
    use mcs_ceph_runtime::runtime::forget_deleted_clusters;

    let named = |name: &str| {
        let mut cluster = cluster();
        cluster.metadata.name = Some(name.to_owned());
        cluster
    };
    let (store, mut writer) = reflector::store::<CephCluster>();
    let metrics = Metrics::new();
    let mut deliver = |event: Event<CephCluster>| {
        writer.apply_watcher_event(&event);
        forget_deleted_clusters(&metrics, &store, &event);
    };
    let series = |metrics: &Metrics| {
        let mut clusters: Vec<String> = metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("mcs_ceph_operator_daemon_up_to_date{"))
            .filter_map(|l| Some(l.split("cluster=\"").nth(1)?.split('"').next()?.to_owned()))
            .collect();
        clusters.sort();
        clusters
    };

    deliver(Event::Init);
    for name in ["east", "west", "north"] {
        deliver(Event::InitApply(named(name)));
    }
    deliver(Event::InitDone);
    for name in ["east", "west", "north"] {
        metrics.set_daemons(NAMESPACE, name, &[("osd.0".into(), true)], || true);
    }
    assert_eq!(series(&metrics), ["east", "north", "west"]);

    deliver(Event::Delete(named("east")));
    assert_eq!(series(&metrics), ["north", "west"]);

    // The watch was away while north was deleted: the relist lists west only.
    deliver(Event::Init);
    deliver(Event::InitApply(named("west")));
    assert_eq!(
        series(&metrics),
        ["north", "west"],
        "not before the list is complete"
    );
    deliver(Event::InitDone);
    assert_eq!(series(&metrics), ["west"]);
}

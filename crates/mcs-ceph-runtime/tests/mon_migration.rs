#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The operator's mon-failover ports against a tower-test mock API server that refuses what a
//! real one refuses (`common::strict`): the Kubernetes mon runtime's requests (paths, field
//! managers, bodies), the driver replacing the first mon with a mock `CephMonAdmin` while the
//! quorum holds, a restart mid-migration resuming from the state in the status object without
//! a second new mon, and the admin read from Rook's Secret reaching a real `ceph-mon`. The
//! gate's tests are mcs-ceph-core's (`tests/migration_gate.rs`).

mod common;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use ceph_address_plan::{ClusterSettings, MonId};
use common::api_server::{ApiServer, Seen};
use http::{Request, Response};
use kube::client::Body;
use mcs_ceph_core::config::FIELD_MANAGER;
use mcs_ceph_runtime::mon_migration::{
    KubeMonRuntime, MON_FAILOVER_FIELD_MANAGER, MonAddress, StatusStateStore, admin_key, run_ticks,
};
use mon_failover::{
    Command, Config, Machine, MockCephMonAdmin, MonRuntime, Phase as MigrationPhase, QuorumStatus,
    Timestamp,
};
use mon_failover_io::Driver;
use serde_json::{Value, json};
use tower_test::mock;

const NS: &str = "rook-ceph";
const STATUS_PATH: &str =
    "/apis/clusterset.io/v1alpha1/namespaces/rook-ceph/cephclusteraddressings/rook-ceph";
const CM_PATH: &str = "/api/v1/namespaces/rook-ceph/configmaps/rook-ceph-mon-endpoints";
const CONFIG_SECRET_PATH: &str = "/api/v1/namespaces/rook-ceph/secrets/rook-ceph-config";
const DEPLOYMENTS: &str = "/apis/apps/v1/namespaces/rook-ceph/deployments/";
const CLAIMS: &str = "/api/v1/namespaces/rook-ceph/persistentvolumeclaims/";

fn id(text: &str) -> MonId {
    text.parse().unwrap()
}

fn settings() -> ClusterSettings {
    let mut settings = ClusterSettings::new("rook-ceph", NS);
    settings.uid = Some("cluster-uid".into());
    settings.multi_cluster_service.enabled = true;
    settings.multi_cluster_service.cluster_id = "east".into();
    settings
}

fn mon_endpoints() -> Value {
    json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "rook-ceph-mon-endpoints", "namespace": NS},
        "data": {"data": "a=10.96.0.10:6789,b=10.96.0.11:6789,c=10.96.0.12:6789",
                 "maxMonId": "2",
                 "mapping": r#"{"node":{"a":null,"b":null,"c":null}}"#,
                 "outOfQuorum": ""}})
}

/// Rook's mon Deployment `rook-ceph-mon-a`, cut down to what the derivation touches.
fn rook_mon_a() -> Value {
    json!({"apiVersion": "apps/v1", "kind": "Deployment",
    "metadata": {"name": "rook-ceph-mon-a", "namespace": NS,
        "labels": {"app": "rook-ceph-mon", "mon": "a", "ceph_daemon_id": "a"},
        "ownerReferences": [{"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster",
            "name": "rook-ceph", "uid": "cluster-uid", "controller": true}]},
    "spec": {
        "replicas": 1,
        "selector": {"matchLabels": {"app": "rook-ceph-mon", "mon": "a"}},
        "template": {
            "metadata": {"labels": {"app": "rook-ceph-mon", "mon": "a"}},
            "spec": {
                "initContainers": [{"name": "init-mon-fs", "image": "quay.io/ceph/ceph:v18.2.4",
                    "args": ["--fsid=f", "--id=a", "--public-addr=10.96.0.10", "--mkfs"]}],
                "containers": [{"name": "mon", "image": "quay.io/ceph/ceph:v18.2.4",
                    "args": ["--fsid=f", "--id=a", "--foreground", "--public-addr=10.96.0.10",
                             "--setuser-match-path=/var/lib/ceph/mon/ceph-a/store.db",
                             "--public-bind-addr=$(ROOK_POD_IP)"]}],
                "volumes": [{"name": "ceph-daemon-data",
                             "hostPath": {"path": "/var/lib/rook/mon-a/data"}}]
            }
        }
    }})
}

fn base_objects(stored_state: Option<Value>) -> BTreeMap<String, Value> {
    let mut status = json!({"phase": "Migrating"});
    if let Some(state) = stored_state {
        status["monFailover"] = state;
    }
    [
        (CM_PATH.to_owned(), mon_endpoints()),
        (format!("{DEPLOYMENTS}rook-ceph-mon-a"), rook_mon_a()),
        (
            STATUS_PATH.to_owned(),
            json!({"apiVersion": "clusterset.io/v1alpha1", "kind": "CephClusterAddressing",
                   "metadata": {"name": "rook-ceph", "namespace": NS}, "status": status}),
        ),
    ]
    .into()
}

fn api_client(objects: BTreeMap<String, Value>) -> (kube::Client, ApiServer) {
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let server = ApiServer::with_objects(handle, objects);
    (kube::Client::new(service, "default"), server)
}

/// Mons a, b, c on cluster IPs (to replace), plus `d` when its global IP is known.
fn table(d_global: Option<&str>) -> BTreeMap<MonId, MonAddress> {
    let replace = MonAddress {
        global_ip: None,
        replace: true,
    };
    let mut mons: BTreeMap<MonId, MonAddress> = ["a", "b", "c"]
        .into_iter()
        .map(|m| (id(m), replace.clone()))
        .collect();
    if let Some(ip) = d_global {
        mons.insert(
            id("d"),
            MonAddress {
                global_ip: Some(ip.parse().unwrap()),
                replace: false,
            },
        );
    }
    mons
}

fn runtime(client: &kube::Client, d_global: Option<&str>) -> KubeMonRuntime {
    KubeMonRuntime::new(
        client.clone(),
        settings(),
        table(d_global),
        Some(id("a")),
        "quay.io/ceph/ceph:v18.2.4".into(),
    )
}

fn quorum(mons: &[(&str, &str)], in_quorum: &[&str]) -> QuorumStatus {
    let mons: Vec<Value> = mons
        .iter()
        .enumerate()
        .map(|(rank, (name, ip))| {
            json!({"rank": rank, "name": name,
                   "public_addrs": {"addrvec": [{"type": "v1", "addr": format!("{ip}:6789")}]}})
        })
        .collect();
    serde_json::from_value(json!({"election_epoch": 4, "quorum_names": in_quorum,
        "monmap": {"epoch": 1, "fsid": "f", "mons": mons}}))
    .unwrap()
}

/// A mock admin over a shared monmap; `remove_mon` takes the mon out of it and is recorded.
fn admin(
    monmap: Arc<Mutex<Vec<(String, String, bool)>>>,
    removed: Arc<Mutex<Vec<String>>>,
) -> MockCephMonAdmin {
    let mut admin = MockCephMonAdmin::new();
    let view = Arc::clone(&monmap);
    admin.expect_quorum_status().returning(move || {
        let mons = view.lock().unwrap().clone();
        let pairs: Vec<(&str, &str)> = mons
            .iter()
            .map(|(n, ip, _)| (n.as_str(), ip.as_str()))
            .collect();
        let in_quorum: Vec<&str> = mons.iter().filter(|m| m.2).map(|m| m.0.as_str()).collect();
        Ok(quorum(&pairs, &in_quorum))
    });
    admin.expect_remove_mon().returning(move |mon| {
        let mut mons = monmap.lock().unwrap();
        // The quorum must hold without the removed mon: every other mon is in quorum.
        assert!(
            mons.iter().filter(|m| m.0 != mon.as_str()).all(|m| m.2),
            "removal without quorum"
        );
        mons.retain(|m| m.0 != mon.as_str());
        removed.lock().unwrap().push(mon.to_string());
        Ok(())
    });
    admin
}

fn abc() -> Vec<(String, String, bool)> {
    [
        ("a", "10.96.0.10"),
        ("b", "10.96.0.11"),
        ("c", "10.96.0.12"),
    ]
    .into_iter()
    .map(|(n, ip)| (n.to_owned(), ip.to_owned(), true))
    .collect()
}

async fn driver(client: &kube::Client, admin: MockCephMonAdmin, d_global: Option<&str>) -> Driver {
    Driver::resume(
        Machine::new(Config::default()).unwrap(),
        Arc::new(admin),
        Arc::new(runtime(client, d_global)),
        Arc::new(StatusStateStore::new(client.clone(), NS, "rook-ceph")),
        Some(2),
    )
    .await
    .unwrap()
}

/// The state the last save wrote into the status object, as the next GET returns it.
fn saved_state(requests: &[Seen]) -> Value {
    requests
        .iter()
        .rev()
        .find(|r| r.path == STATUS_PATH && r.method == "PATCH")
        .map(|r| {
            assert!(r.applied_by(MON_FAILOVER_FIELD_MANAGER), "{r:?}");
            assert_eq!(
                r.body["status"].as_object().unwrap().len(),
                1,
                "only monFailover"
            );
            r.body["status"]["monFailover"].clone()
        })
        .expect("the state was saved")
}

#[tokio::test]
async fn provisioning_applies_the_service_and_canary_and_lists_the_new_mon_without_an_endpoint() {
    let (client, mut server) = api_client(base_objects(None));
    let address = runtime(&client, None)
        .provision_address(&id("d"), mon_failover::Addressing::Clusterset)
        .await
        .unwrap();
    assert_eq!(address, None, "the global IP is not known yet");
    let requests = server.requests();
    // The mon's Service, as Rook makes one: without it the plan's export of it would never be
    // valid (NoService), and the new mon's global IP never known.
    let service = &requests[0];
    assert_eq!(
        service.path,
        "/api/v1/namespaces/rook-ceph/services/rook-ceph-mon-d"
    );
    assert!(service.applied_by(FIELD_MANAGER), "{service:?}");
    assert_eq!(service.body["kind"], "Service");
    let labels = &service.body["metadata"]["labels"];
    assert_eq!(labels["app"], "rook-ceph-mon");
    assert_eq!(labels["mon"], "d");
    assert_eq!(labels["mon_daemon"], "true");
    assert_eq!(
        service.body["spec"],
        json!({
            "selector": {"app": "rook-ceph-mon", "ceph_daemon_id": "d", "mon": "d",
                         "mon_cluster": NS, "rook_cluster": NS},
            "ports": [
                {"name": "tcp-msgr1", "port": 6789, "protocol": "TCP", "targetPort": 6789},
                {"name": "tcp-msgr2", "port": 3300, "protocol": "TCP", "targetPort": 3300}
            ]
        })
    );
    assert_eq!(
        service.body["metadata"]["ownerReferences"],
        json!([{"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster", "name": "rook-ceph",
                "uid": "cluster-uid", "blockOwnerDeletion": true}])
    );
    // The object is ceph-address-plan's typed mon Service, the one the plan builds for its
    // mons, with this owner reference.
    let mut owner = ceph_address_plan::cluster_owner_reference(&settings(), false).unwrap();
    owner.block_owner_deletion = Some(true);
    let typed = ceph_address_plan::mon_service(
        &settings(),
        &ceph_address_plan::MonInput::new(id("d")),
        6789,
        Some(owner),
    );
    assert_eq!(service.body, serde_json::to_value(&typed).unwrap());
    let canary = &requests[1];
    assert_eq!(canary.path, format!("{DEPLOYMENTS}rook-ceph-mon-d-canary"));
    assert!(canary.applied_by(FIELD_MANAGER), "{canary:?}");
    let selector = &service.body["spec"]["selector"];
    let labels = &canary.body["spec"]["template"]["metadata"]["labels"];
    for (key, value) in selector.as_object().unwrap() {
        assert_eq!(&labels[key], value, "the Service selects the canary's pod");
    }
    assert_eq!(labels["mon_canary"], "true");
    assert_eq!(labels["mon"], "d");
    assert_eq!(labels["app"], "rook-ceph-mon");
    assert!(labels.get("mon_daemon").is_none(), "a canary is not a mon");
    assert_eq!(
        canary.body["metadata"]["ownerReferences"][0]["uid"],
        "cluster-uid"
    );
    assert_eq!(
        canary.body["spec"]["template"]["spec"]["containers"][0]["image"],
        "quay.io/ceph/ceph:v18.2.4"
    );
    assert_eq!(
        (requests[2].method.as_str(), requests[2].path.as_str()),
        ("GET", CM_PATH)
    );
    let cm = &requests[3];
    assert_eq!(cm.path, CM_PATH);
    assert!(cm.applied_by(MON_FAILOVER_FIELD_MANAGER), "{cm:?}");
    assert_eq!(
        cm.body["data"]["data"],
        "a=10.96.0.10:6789,b=10.96.0.11:6789,c=10.96.0.12:6789,d=:6789"
    );
    assert_eq!(cm.body["data"]["maxMonId"], "3");
    assert_eq!(requests.len(), 4);
}

/// mon d's global IP in these tests.
const D_ADDRESS: &str = "242.1.0.4";

/// Starts mon d (global IP known) against a mock API server holding `objects`; its requests.
async fn start_d(objects: BTreeMap<String, Value>) -> Vec<Seen> {
    let (client, mut server) = api_client(objects);
    runtime(&client, Some(D_ADDRESS))
        .start(&id("d"), D_ADDRESS.parse().unwrap())
        .await
        .unwrap();
    server.requests()
}

#[tokio::test]
async fn start_derives_the_mon_deployment_from_the_replaced_mon() {
    let mut objects = base_objects(None);
    // Mon a's data lives on node n1 (Rook's `mapping`, for host-path mons).
    objects.get_mut(CM_PATH).unwrap()["data"]["mapping"] = json!(
        r#"{"node":{"a":{"Name":"n1","Hostname":"n1","Address":"10.0.0.1"},"b":null,"c":null}}"#
    );
    let requests = start_d(objects).await;
    let paths: Vec<(&str, &str)> = requests
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str()))
        .collect();
    let d = format!("{DEPLOYMENTS}rook-ceph-mon-d");
    let a = format!("{DEPLOYMENTS}rook-ceph-mon-a");
    let canary = format!("{DEPLOYMENTS}rook-ceph-mon-d-canary");
    assert_eq!(
        paths,
        [
            ("GET", d.as_str()),
            ("GET", a.as_str()),
            ("PATCH", d.as_str()),
            ("GET", CM_PATH),
            ("PATCH", CM_PATH),
            ("PATCH", CONFIG_SECRET_PATH),
            ("DELETE", canary.as_str()),
        ]
    );
    // d runs with a's pod spec, so on a's node: the mapping says so.
    let mapping: Value =
        serde_json::from_str(requests[4].body["data"]["mapping"].as_str().unwrap()).unwrap();
    assert_eq!(mapping["node"]["d"], mapping["node"]["a"]);
    assert_eq!(mapping["node"]["d"]["Hostname"], "n1");
    // rook-ceph-config's mon_host follows the mons listed with an endpoint: now d too.
    let config = &requests[5];
    assert!(config.applied_by(MON_FAILOVER_FIELD_MANAGER), "{config:?}");
    let secret: k8s_openapi::api::core::v1::Secret =
        serde_json::from_value(config.body.clone()).unwrap();
    let data = secret.data.unwrap();
    assert_eq!(
        String::from_utf8(data["mon_host"].0.clone()).unwrap(),
        "[v2:10.96.0.10:3300,v1:10.96.0.10:6789],[v2:10.96.0.11:3300,v1:10.96.0.11:6789],[v2:10.96.0.12:3300,v1:10.96.0.12:6789],[v2:242.1.0.4:3300,v1:242.1.0.4:6789]"
    );
    assert_eq!(
        String::from_utf8(data["mon_initial_members"].0.clone()).unwrap(),
        "a,b,c,d"
    );
    let apply = &requests[2];
    assert!(apply.applied_by(FIELD_MANAGER));
    let body = &apply.body;
    assert_eq!(body["metadata"]["name"], "rook-ceph-mon-d");
    assert_eq!(
        body["metadata"]["labels"]["ceph.rook.io/do-not-reconcile"],
        "true"
    );
    assert_eq!(body["metadata"]["labels"]["mon_daemon"], "true");
    assert_eq!(body["spec"]["selector"]["matchLabels"]["mon"], "d");
    assert_eq!(
        body["spec"]["template"]["metadata"]["labels"]["ceph_daemon_id"],
        "d"
    );
    let pod = &body["spec"]["template"]["spec"];
    assert_eq!(
        pod["containers"][0]["args"],
        json!([
            "--fsid=f",
            "--id=d",
            "--foreground",
            "--setuser-match-path=/var/lib/ceph/mon/ceph-d/store.db",
            "--public-addr=242.1.0.4",
            "--public-bind-addr=$(ROOK_POD_IP)"
        ])
    );
    assert_eq!(
        pod["initContainers"][0]["args"],
        json!([
            "--fsid=f",
            "--id=d",
            "--mkfs",
            "--public-addr=242.1.0.4",
            "--public-bind-addr=$(ROOK_POD_IP)"
        ])
    );
    assert_eq!(
        pod["volumes"][0]["hostPath"]["path"],
        "/var/lib/rook/mon-d/data"
    );
    assert_eq!(
        requests[4].body["data"]["data"],
        "a=10.96.0.10:6789,b=10.96.0.11:6789,c=10.96.0.12:6789,d=242.1.0.4:6789"
    );
}

#[tokio::test]
async fn a_template_passing_public_addr_as_two_arguments_gives_only_the_new_address() {
    let mut objects = base_objects(None);
    let template = objects
        .get_mut(&format!("{DEPLOYMENTS}rook-ceph-mon-a"))
        .unwrap();
    template["spec"]["template"]["spec"]["containers"][0]["args"] = json!([
        "--fsid=f",
        "--id=a",
        "--public-addr",
        "10.96.0.10",
        "--public-bind-addr",
        "$(ROOK_POD_IP)"
    ]);
    let requests = start_d(objects).await;
    let apply = requests
        .iter()
        .find(|r| r.method == "PATCH" && r.path == format!("{DEPLOYMENTS}rook-ceph-mon-d"))
        .unwrap();
    assert_eq!(
        apply.body["spec"]["template"]["spec"]["containers"][0]["args"],
        json!([
            "--fsid=f",
            "--id=d",
            "--public-addr=242.1.0.4",
            "--public-bind-addr=$(ROOK_POD_IP)"
        ])
    );
}

#[tokio::test]
async fn the_driver_replaces_the_first_mon_keeping_quorum_and_resumes_after_a_restart() {
    let monmap = Arc::new(Mutex::new(abc()));
    let removed = Arc::new(Mutex::new(Vec::new()));
    let now = Timestamp::from_millis(1_000);

    // Reconcile 1: mon d is allocated and provisioned; its global IP is not known yet.
    let (client, mut server) = api_client(base_objects(None));
    let mut first = driver(
        &client,
        admin(Arc::clone(&monmap), Arc::clone(&removed)),
        None,
    )
    .await;
    let ticks = run_ticks(&mut first, now, 6).await.unwrap();
    assert!(matches!(
        &ticks[0].commands[..],
        [Command::ProvisionAddress { mon, .. }] if mon.as_str() == "d"
    ));
    let migration = first.state().migration().unwrap();
    assert_eq!(migration.old().as_str(), "a");
    assert_eq!(migration.new_mon().as_str(), "d");
    let requests = server.requests();
    let state = saved_state(&requests);
    drop(first);

    // Restart: a new driver reads the state back from the status object and continues with
    // mon d (no second new mon), now that the plan resolved d's global IP.
    let (client, mut server) = api_client(base_objects(Some(state)));
    let mut second = driver(
        &client,
        admin(Arc::clone(&monmap), Arc::clone(&removed)),
        Some("242.1.0.4"),
    )
    .await;
    assert_eq!(second.state().migration().unwrap().new_mon().as_str(), "d");
    let ticks = run_ticks(&mut second, now, 6).await.unwrap();
    let commands: Vec<&Command> = ticks.iter().flat_map(|t| &t.commands).collect();
    assert!(
        commands
            .iter()
            .any(|c| matches!(c, Command::StartMon { mon, address }
            if mon.as_str() == "d" && address.to_string() == "242.1.0.4")),
        "{commands:?}"
    );
    assert!(
        commands.iter().all(|c| c.mon().as_str() == "d"),
        "only mon d is worked on: {commands:?}"
    );
    assert!(matches!(
        second.state().migration().unwrap().phase(),
        MigrationPhase::Joining { .. }
    ));
    let requests = server.requests();
    assert_eq!(
        requests[0].path, STATUS_PATH,
        "the state is read from the API server first"
    );
    assert!(
        requests
            .iter()
            .all(|r| !r.path.ends_with("rook-ceph-mon-e-canary")
                && !r.path.ends_with("rook-ceph-mon-e")),
        "no second new mon"
    );
    assert!(
        removed.lock().unwrap().is_empty(),
        "nothing removed while d joins"
    );
    let state = saved_state(&requests);

    // Mon d joins the quorum at its global IP; the next reconcile removes mon a from the
    // monmap and deletes its objects.
    monmap
        .lock()
        .unwrap()
        .push(("d".into(), "242.1.0.4".into(), true));
    let (client, mut server) = api_client(base_objects(Some(state)));
    let mut third = driver(
        &client,
        admin(Arc::clone(&monmap), Arc::clone(&removed)),
        Some("242.1.0.4"),
    )
    .await;
    run_ticks(&mut third, now, 3).await.unwrap();
    assert_eq!(*removed.lock().unwrap(), ["a"]);
    let names: Vec<String> = monmap.lock().unwrap().iter().map(|m| m.0.clone()).collect();
    assert_eq!(
        names,
        ["b", "c", "d"],
        "three mons, all in quorum, throughout"
    );
    let requests = server.requests();
    let deletes: Vec<&str> = requests
        .iter()
        .filter(|r| r.method == "DELETE")
        .map(|r| r.path.as_str())
        .collect();
    assert!(
        deletes.contains(&format!("{DEPLOYMENTS}rook-ceph-mon-a").as_str()),
        "{deletes:?}"
    );
    assert!(
        deletes.contains(&"/api/v1/namespaces/rook-ceph/services/rook-ceph-mon-a"),
        "{deletes:?}"
    );
    let cm = requests
        .iter()
        .rev()
        .find(|r| r.path == CM_PATH && r.method == "PATCH")
        .unwrap();
    assert!(
        !cm.body["data"]["data"].as_str().unwrap().contains("a="),
        "mon a left the mon endpoints: {}",
        cm.body["data"]["data"]
    );
}

/// Deleting a replaced mon removes its ServiceExport in the MCS version the cluster serves:
/// v1alpha1 for Submariner, v1beta1 otherwise.
/// Mon a with its store on Rook's claim `rook-ceph-mon-a` (`spec.mon.volumeClaimTemplate`),
/// and that claim, bound to a volume.
fn pvc_backed_mon_a(objects: &mut BTreeMap<String, Value>) {
    let deployment = objects
        .get_mut(&format!("{DEPLOYMENTS}rook-ceph-mon-a"))
        .unwrap();
    deployment["spec"]["template"]["spec"]["volumes"] = json!([{"name": "ceph-daemon-data",
        "persistentVolumeClaim": {"claimName": "rook-ceph-mon-a"}}]);
    objects.insert(
        format!("{CLAIMS}rook-ceph-mon-a"),
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "rook-ceph-mon-a", "namespace": NS, "uid": "claim-a-uid",
                "labels": {"app": "rook-ceph-mon", "mon": "a", "ceph_daemon_id": "a",
                           "pvc_size": "10Gi"},
                "ownerReferences": [{"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster",
                    "name": "rook-ceph", "uid": "cluster-uid", "controller": true}]},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3",
                "volumeMode": "Filesystem", "volumeName": "pv-of-a",
                "resources": {"requests": {"storage": "10Gi"}}},
            "status": {"phase": "Bound"}}),
    );
}

#[tokio::test]
async fn a_pvc_backed_mon_gets_its_own_claim_made_like_the_replaced_mons() {
    let mut objects = base_objects(None);
    pvc_backed_mon_a(&mut objects);
    let requests = start_d(objects).await;
    let paths: Vec<(&str, &str)> = requests
        .iter()
        .map(|r| (r.method.as_str(), r.path.as_str()))
        .take(6)
        .collect();
    let d = format!("{DEPLOYMENTS}rook-ceph-mon-d");
    let a = format!("{DEPLOYMENTS}rook-ceph-mon-a");
    let (claim_d, claim_a) = (
        format!("{CLAIMS}rook-ceph-mon-d"),
        format!("{CLAIMS}rook-ceph-mon-a"),
    );
    // The claim exists before the Deployment that mounts it.
    assert_eq!(
        paths,
        [
            ("GET", d.as_str()),
            ("GET", a.as_str()),
            ("GET", claim_d.as_str()),
            ("GET", claim_a.as_str()),
            ("PATCH", claim_d.as_str()),
            ("PATCH", d.as_str()),
        ]
    );
    let claim = &requests[4];
    assert!(claim.applied_by(FIELD_MANAGER), "{claim:?}");
    // A fresh volume of the same kind: no volumeName, the template's labels for mon d.
    assert_eq!(
        claim.body,
        json!({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
            "metadata": {"name": "rook-ceph-mon-d", "namespace": NS,
                "labels": {"app": "rook-ceph-mon", "mon": "d", "ceph_daemon_id": "d",
                           "pvc_size": "10Gi"},
                "ownerReferences": [{"apiVersion": "ceph.rook.io/v1", "kind": "CephCluster",
                    "name": "rook-ceph", "uid": "cluster-uid", "controller": true}]},
            "spec": {"accessModes": ["ReadWriteOnce"], "storageClassName": "gp3",
                "volumeMode": "Filesystem",
                "resources": {"requests": {"storage": "10Gi"}}}})
    );
    assert_eq!(
        requests[5].body["spec"]["template"]["spec"]["volumes"],
        json!([{"name": "ceph-daemon-data",
                "persistentVolumeClaim": {"claimName": "rook-ceph-mon-d"}}])
    );
}

#[tokio::test]
async fn a_mon_mounting_a_claim_that_is_not_its_own_is_refused_before_any_write() {
    let mut objects = base_objects(None);
    pvc_backed_mon_a(&mut objects);
    objects
        .get_mut(&format!("{DEPLOYMENTS}rook-ceph-mon-a"))
        .unwrap()["spec"]["template"]["spec"]["volumes"] = json!([{"name": "shared",
        "persistentVolumeClaim": {"claimName": "shared-data"}}]);
    let (client, mut server) = api_client(objects);
    let error = runtime(&client, Some(D_ADDRESS))
        .start(&id("d"), D_ADDRESS.parse().unwrap())
        .await
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("mounts the claim shared-data (volume shared), not rook-ceph-mon-a"),
        "{error}"
    );
    assert!(server.requests().iter().all(|r| r.method == "GET"));
}

#[tokio::test]
async fn a_failed_request_says_what_was_done_and_keeps_kubes_error_as_its_cause() {
    let mut objects = base_objects(None);
    objects.remove(&format!("{DEPLOYMENTS}rook-ceph-mon-a"));
    let (client, _server) = api_client(objects);
    let error = runtime(&client, Some(D_ADDRESS))
        .start(&id("d"), D_ADDRESS.parse().unwrap())
        .await
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "reading the template mon Deployment rook-ceph/rook-ceph-mon-a"
    );
    let chain = clusterset_daemon::ErrorChain(&error).to_string();
    assert!(
        chain.starts_with("reading the template mon Deployment rook-ceph/rook-ceph-mon-a: ")
            && chain.contains("not found"),
        "{chain}"
    );
}

#[tokio::test]
async fn delete_removes_the_export_in_the_served_mcs_version() {
    use mcs_ceph_core::snapshot::McsVersion;
    for (version, path) in [
        (
            McsVersion::V1Beta1,
            "/apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceexports/rook-ceph-mon-a",
        ),
        (
            McsVersion::V1Alpha1,
            "/apis/multicluster.x-k8s.io/v1alpha1/namespaces/rook-ceph/serviceexports/rook-ceph-mon-a",
        ),
    ] {
        let (client, mut server) = api_client(base_objects(None));
        runtime(&client, None)
            .with_mcs_version(version)
            .delete(&id("a"))
            .await
            .unwrap();
        let deletes: Vec<String> = server
            .requests()
            .into_iter()
            .filter(|r| r.method == "DELETE")
            .map(|r| r.path)
            .collect();
        assert_eq!(
            deletes,
            [
                format!("{DEPLOYMENTS}rook-ceph-mon-a"),
                format!("{DEPLOYMENTS}rook-ceph-mon-a-canary"),
                "/api/v1/namespaces/rook-ceph/services/rook-ceph-mon-a".to_owned(),
                path.to_owned(),
                format!("{CLAIMS}rook-ceph-mon-a"),
            ],
            "{version:?}"
        );
    }
}

#[test]
fn the_admin_key_comes_from_rooks_secret() {
    use k8s_openapi::ByteString;
    use k8s_openapi::api::core::v1::Secret;
    let secret = |pairs: &[(&str, &str)]| Secret {
        data: Some(
            pairs
                .iter()
                .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                .collect(),
        ),
        ..Secret::default()
    };
    assert_eq!(
        admin_key(&secret(&[
            ("ceph-username", "client.admin"),
            ("ceph-secret", "AQB==")
        ]))
        .unwrap(),
        ("client.admin".to_owned(), "AQB==".to_owned())
    );
    assert_eq!(
        admin_key(&secret(&[("admin-secret", "AQC==\n"), ("fsid", "f")])).unwrap(),
        ("client.admin".to_owned(), "AQC==".to_owned())
    );
    assert!(admin_key(&secret(&[("fsid", "f")])).is_err());
}

/// The admin the operator uses in a cluster (`AdminSource::RookSecret`): the key read from
/// Rook's `rook-ceph-mon` Secret through the API, written as a private keyring, and the `ceph`
/// CLI reaching a real `ceph-mon` (Debian's, on 127.0.81.11) at the `mon_host` taken from
/// `rook-ceph-mon-endpoints`. A wrong key is refused by Ceph, and the keyring is gone once the
/// files are dropped. Needs `ceph-mon` and `ceph-common` (`.ci/run` installs them); fails, never
/// skips, without them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_rook_secret_admin_reaches_a_real_ceph_mon() {
    use ceph_local::{EndpointTable, LocalCluster, LocalMonRuntime};
    use mcs_ceph_runtime::mon_migration::{MON_SECRET, ceph_cli_from_secret};
    use mon_failover::{Addressing, CephMonAdmin};
    use std::time::Duration;

    let missing = mon_failover_io::missing_tools(&ceph_local::CEPH_TOOLS);
    assert!(
        missing.is_empty(),
        "{missing:?} not installed: this test runs a real Ceph mon; install them with `apt-get install ceph-mon ceph-common` (as .ci/run does)"
    );
    let dir = tempfile::tempdir().unwrap();
    let a = (id("a"), "127.0.81.11".parse().unwrap());
    let cluster = LocalCluster::create(
        dir.path().join("ceph"),
        "6d2f3e1a-0000-4000-8000-000000000081",
        std::slice::from_ref(&a),
    )
    .await
    .unwrap();
    let runtime = LocalMonRuntime::new(
        cluster.clone(),
        Arc::new(
            EndpointTable::new().with_mons_at(Addressing::ClusterLocal, std::slice::from_ref(&a)),
        ),
        cluster.admin(None).timeout(Duration::from_secs(10)),
    );
    runtime.start(&a.0, a.1).await.unwrap();
    let local_admin = cluster.admin(None).timeout(Duration::from_secs(10));
    if let Err(error) = runtime
        .wait_for_quorum(&local_admin, 1, Duration::from_secs(60))
        .await
    {
        panic!("the mon formed no quorum: {error}");
    }
    // The admin key, as Rook stores it in the Secret.
    let keyring = std::fs::read_to_string(cluster.keyring()).unwrap();
    let admin_key = keyring
        .split("[client.admin]")
        .nth(1)
        .and_then(|section| {
            section
                .lines()
                .find_map(|l| l.trim().strip_prefix("key = "))
        })
        .expect("the local cluster's keyring holds client.admin's key")
        .to_owned();
    let secret_path = format!("/api/v1/namespaces/{NS}/secrets/{MON_SECRET}");
    // k8s-openapi writes Secret data in base64, as the API server serves it.
    let secret = |key: &str| {
        use k8s_openapi::ByteString;
        let mut value = serde_json::to_value(k8s_openapi::api::core::v1::Secret {
            data: Some(
                [("ceph-username", "client.admin"), ("ceph-secret", key)]
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), ByteString(v.as_bytes().to_vec())))
                    .collect(),
            ),
            ..Default::default()
        })
        .unwrap();
        value["metadata"] = json!({"name": MON_SECRET, "namespace": NS});
        value["apiVersion"] = json!("v1");
        value["kind"] = json!("Secret");
        value
    };
    // rook-ceph-mon-endpoints' form of the mon's endpoint: `<ip>:6789`.
    let mon_host = "127.0.81.11:6789";

    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let mut server =
        ApiServer::with_objects(handle, [(secret_path.clone(), secret(&admin_key))].into());
    let client = kube::Client::new(service, "default");
    let (cli, files) = ceph_cli_from_secret(client, NS, mon_host).await.unwrap();
    let seen = server.requests();
    assert_eq!(seen.len(), 1, "one Secret read: {seen:?}");
    assert_eq!(
        (seen[0].method.as_str(), seen[0].path.as_str()),
        ("GET", secret_path.as_str())
    );
    {
        use std::os::unix::fs::PermissionsExt as _;
        let mode = std::fs::metadata(files.keyring())
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600, "the keyring is private");
    }
    let status = cli
        .timeout(Duration::from_secs(20))
        .quorum_status()
        .await
        .unwrap();
    assert_eq!(status.quorum_names, ["a"]);
    assert_eq!(status.monmap.mons.len(), 1);
    let keyring_path = files.keyring();
    drop(files);
    assert!(
        !keyring_path.exists(),
        "the keyring is removed with the files"
    );

    // A key Ceph does not know is refused, with Ceph's reason in the error (errno 13).
    let (service, handle) = mock::pair::<Request<Body>, Response<Body>>();
    let _server = ApiServer::with_objects(
        handle,
        [(
            secret_path,
            secret("AQBm3yFnAAAAABAAwrongwrongwrongwrongwrongwg=="),
        )]
        .into(),
    );
    let client = kube::Client::new(service, "default");
    let (cli, _files) = ceph_cli_from_secret(client, NS, mon_host).await.unwrap();
    let error = cli
        .timeout(Duration::from_secs(20))
        .quorum_status()
        .await
        .unwrap_err();
    assert!(
        error.to_string().contains("permission denied"),
        "Ceph refuses the key: {error}"
    );
    runtime.stop_all().await;
}

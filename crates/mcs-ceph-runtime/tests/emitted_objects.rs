#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! Property tests: for arbitrary valid inputs — namespaces and cluster ids up to 63 characters,
//! CephCluster names, OSD ids in the thousands, mon ids past `z`, any global IPs, either DNS
//! name form and MCS version — every object the operator sends passes Kubernetes' own rules
//! (`kube_syntax`, as the API server checks them): each write of the pure decision walked from
//! first enable through exports, lookups (failing ones too), OSD arguments, mons on global
//! IPs, a removed OSD and disabling (Services, ServiceExports, the CephClusterAddressing
//! status with its conditions, OSD Deployment and mon ConfigMap apply bodies as patches and
//! as the object they leave on the server, the `rook-ceph-config` Secret, deletes), each Event
//! as kube-runtime's recorder publishes it, and the mon migration's objects (the new mon's
//! Service, canary and Deployment, its claim, the mon ConfigMap data and `mon_host` Secret).
//! Every label the operator sends, and every selector, parses as a label selector.

mod common;

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::time::Duration;

use ceph_address_plan::rook_objects::config_secret;
use ceph_address_plan::{ClusterSettings, Daemon, MonId};
use common::api_server::merge;
use common::strict::{APPLY, Received, check_stored};
use common::*;
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use k8s_openapi::jiff::Timestamp;
use kube_syntax::object::Completeness;
use kube_syntax::selector::LabelSelector;
use mcs_ceph_api::CephCluster;
use mcs_ceph_core::config::{Config, FIELD_MANAGER};
use mcs_ceph_core::decide::{EventNote, Outcome, Write, prepare};
use mcs_ceph_core::snapshot::{McsApi, McsVersion, Snapshot};
use mcs_ceph_runtime::kube_io::{cluster_reference, event_object};
use mcs_ceph_runtime::mon_migration::{KubeMonRuntime, mon_claim_name, mon_host_of_endpoints};
use proptest::prelude::*;
use serde_json::{Value, json};

// ---- inputs ----

/// A DNS-1123 label of 1 to `max` characters, the longest ones often.
fn dns_label(max: usize) -> impl Strategy<Value = String> {
    let inner = max - 2;
    prop_oneof![
        2 => proptest::string::string_regex(&format!("[a-z0-9]([-a-z0-9]{{0,{inner}}}[a-z0-9])?"))
            .unwrap(),
        1 => proptest::string::string_regex(&format!("[a-z0-9][-a-z0-9]{{{inner}}}[a-z0-9]"))
            .unwrap(),
    ]
}

/// A DNS-1123 subdomain (dotted labels) of `min` to `max` characters: a CephCluster name.
fn subdomain(min: usize, max: usize) -> impl Strategy<Value = String> {
    proptest::collection::vec(dns_label(63), 1..6)
        .prop_map(|labels| labels.join("."))
        .prop_filter_map("length", move |name| {
            let name = name[..name.len().min(max)].trim_end_matches(['.', '-']);
            // Cut at a label end or inside one: a cut label ending in '-' or '.' is trimmed.
            (name.len() >= min).then(|| name.to_owned())
        })
}

fn global_ip() -> impl Strategy<Value = IpAddr> {
    prop_oneof![
        9 => any::<Ipv4Addr>().prop_map(IpAddr::V4),
        1 => any::<Ipv6Addr>().prop_map(IpAddr::V6),
    ]
}

/// One cluster of the walk.
#[derive(Debug, Clone)]
struct World {
    namespace: String,
    cluster_name: String,
    cluster_id: String,
    unique_names: bool,
    mcs_version: McsVersion,
    /// OSD id → its host (failure domain).
    osds: BTreeMap<u32, String>,
    /// Mon indexes (`a` = 0, `aa` = 26).
    mons: Vec<u32>,
    /// The global IP the MCS implementation gives each daemon.
    ips: BTreeMap<String, IpAddr>,
    /// An OSD whose first lookup fails.
    failing: Option<u32>,
    instance: String,
}

fn world_with(names: BoxedStrategy<String>) -> impl Strategy<Value = World> {
    let hosts = proptest::collection::vec(dns_label(63), 1..4);
    (
        dns_label(63),
        names,
        dns_label(63),
        any::<bool>(),
        any::<bool>(),
        proptest::collection::btree_map(0u32..10_000, 0usize..8, 1..5),
        hosts,
        proptest::collection::btree_set(0u32..20_000, 1..4),
        proptest::collection::vec(global_ip(), 12),
        any::<prop::sample::Index>(),
        any::<bool>(),
        dns_label(63),
    )
        .prop_map(
            |(
                namespace,
                cluster_name,
                cluster_id,
                unique_names,
                alpha,
                osd_hosts,
                hosts,
                mons,
                ips,
                pick,
                fail,
                instance,
            )| {
                let osds: BTreeMap<u32, String> = osd_hosts
                    .into_iter()
                    .map(|(id, h)| (id, hosts[h % hosts.len()].clone()))
                    .collect();
                let mons: Vec<u32> = mons.into_iter().collect();
                let mut names: Vec<String> = osds.keys().map(|id| format!("osd.{id}")).collect();
                names.extend(
                    mons.iter()
                        .map(|m| format!("mon.{}", MonId::from_index(*m))),
                );
                let ips = names
                    .into_iter()
                    .zip(ips.into_iter().cycle())
                    .collect::<BTreeMap<_, _>>();
                let ids: Vec<u32> = osds.keys().copied().collect();
                World {
                    namespace,
                    cluster_name,
                    cluster_id,
                    unique_names,
                    mcs_version: if alpha {
                        McsVersion::V1Alpha1
                    } else {
                        McsVersion::V1Beta1
                    },
                    failing: fail.then(|| *pick.get(&ids)),
                    osds,
                    mons,
                    ips,
                    instance,
                }
            },
        )
}

/// Worlds whose CephCluster names are valid label values (at most 63 characters): the names
/// Rook can run a cluster under (it labels every daemon with it).
fn world() -> impl Strategy<Value = World> {
    world_with(subdomain(1, 63).boxed())
}

// ---- the cluster of a world ----

fn mon_id(index: u32) -> MonId {
    MonId::from_index(index)
}

fn cluster_of(world: &World, enabled: bool) -> CephCluster {
    let spec = json!({
        "cephVersion": {"image": "quay.io/ceph/ceph:v18.2.4"},
        "dataDirHostPath": "/var/lib/rook",
        "mon": {"count": world.mons.len()},
        "network": {"multiClusterService": {"enabled": enabled, "clusterID": world.cluster_id}}
    });
    let mut cluster = CephCluster::new(&world.cluster_name, &world.namespace, spec);
    cluster.metadata.uid = Some("6d2f3e1a-0000-4000-8000-000000000001".to_owned());
    cluster.metadata.generation = Some(1);
    cluster
}

fn mon_endpoints_data(world: &World, endpoint: impl Fn(&MonId, usize) -> String) -> String {
    world
        .mons
        .iter()
        .enumerate()
        .map(|(i, m)| format!("{}={}", mon_id(*m), endpoint(&mon_id(*m), i)))
        .collect::<Vec<_>>()
        .join(",")
}

fn snapshot_of(world: &World) -> Snapshot {
    let namespace = &world.namespace;
    let services = world
        .mons
        .iter()
        .enumerate()
        .map(|(i, m)| mon_service(namespace, mon_id(*m).as_str(), i))
        .collect();
    let data: BTreeMap<String, String> = [
        (
            "data".to_owned(),
            mon_endpoints_data(world, |_, i| format!("10.96.0.{}:6789", 10 + i)),
        ),
        (
            "maxMonId".to_owned(),
            world.mons.iter().max().unwrap().to_string(),
        ),
        ("mapping".to_owned(), r#"{"node":{}}"#.to_owned()),
        ("outOfQuorum".to_owned(), String::new()),
        ("csi-cluster-config-json".to_owned(), "[]".to_owned()),
    ]
    .into();
    Snapshot {
        cluster: cluster_of(world, true),
        mcs_api: McsApi::Served(world.mcs_version),
        services,
        exports: Vec::new(),
        imports: Vec::new(),
        deployments: world
            .osds
            .iter()
            .map(|(id, host)| osd_deployment_in(namespace, *id, host, None))
            .collect(),
        mon_endpoints: Some(ConfigMap {
            metadata: ObjectMeta {
                name: Some("rook-ceph-mon-endpoints".into()),
                namespace: Some(namespace.clone()),
                ..ObjectMeta::default()
            },
            data: Some(data),
            ..ConfigMap::default()
        }),
        prior: None,
        lookups: Default::default(),
    }
}

// ---- what the operator sends ----

fn to_json<T: serde::Serialize>(object: &T) -> Value {
    serde_json::to_value(object).unwrap()
}

fn apply_request(path: String, body: Value) -> Received {
    Received {
        method: "PATCH".into(),
        path,
        query: [
            ("fieldManager".to_owned(), FIELD_MANAGER.to_owned()),
            ("force".to_owned(), "true".to_owned()),
        ]
        .into(),
        content_type: APPLY.into(),
        body,
    }
}

fn mcs_path(version: McsVersion, namespace: &str, name: &str) -> String {
    format!(
        "/apis/multicluster.x-k8s.io/{}/namespaces/{namespace}/serviceexports/{name}",
        version.as_str()
    )
}

/// The request `KubeApi` makes for a write.
fn request_of(write: &Write) -> Received {
    let (namespace, name) = write.target();
    match write {
        Write::ApplyService(service) => apply_request(
            format!("/api/v1/namespaces/{namespace}/services/{name}"),
            to_json(service.as_ref()),
        ),
        Write::ApplyServiceExport { export, version } => {
            let body = match version {
                McsVersion::V1Beta1 => to_json(export.as_ref()),
                McsVersion::V1Alpha1 => to_json(&mcs_types::v1alpha1::ServiceExport::from(
                    export.as_ref().clone(),
                )),
            };
            apply_request(mcs_path(*version, namespace, name), body)
        }
        Write::ApplyStatus(object) => apply_request(
            format!(
                "/apis/clusterset.io/v1alpha1/namespaces/{namespace}/cephclusteraddressings/{name}"
            ),
            to_json(object.as_ref()),
        ),
        Write::ApplyOsdArgs { body, .. } => apply_request(
            format!("/apis/apps/v1/namespaces/{namespace}/deployments/{name}"),
            body.as_ref().clone(),
        ),
        Write::ApplyMonEndpoints(config_map) => apply_request(
            format!("/api/v1/namespaces/{namespace}/configmaps/{name}"),
            to_json(config_map.as_ref()),
        ),
        Write::ApplyMonConfig(secret) => apply_request(
            format!("/api/v1/namespaces/{namespace}/secrets/{name}"),
            to_json(secret.as_ref()),
        ),
        Write::DeleteService { uid, .. } | Write::DeleteServiceExport { uid, .. } => {
            let path = match write {
                Write::DeleteServiceExport { version, .. } => mcs_path(*version, namespace, name),
                _ => format!("/api/v1/namespaces/{namespace}/services/{name}"),
            };
            Received {
                method: "DELETE".into(),
                path,
                query: BTreeMap::new(),
                content_type: "application/json".into(),
                body: json!({"preconditions": {"uid": uid}}),
            }
        }
    }
}

/// The Event `KubeApi` creates for `note` about `cluster` at `now`.
fn event_of(cluster: &CephCluster, note: &EventNote, now: Timestamp, instance: &str) -> Value {
    to_json(&event_object(
        &cluster_reference(cluster),
        note,
        Some(instance),
        now,
    ))
}

/// Every label map of an object parses as a label selector, one requirement and all at once;
/// so does every selector it carries (a Service's, a Deployment's).
fn assert_labels_parse(object: &Value) {
    for pointer in [
        "/metadata/labels",
        "/spec/selector",
        "/spec/selector/matchLabels",
        "/spec/template/metadata/labels",
    ] {
        let Some(map) = object.pointer(pointer).and_then(Value::as_object) else {
            continue;
        };
        if pointer == "/spec/selector" && map.contains_key("matchLabels") {
            continue;
        }
        let pairs: Vec<String> = map
            .iter()
            .map(|(k, v)| format!("{k}={}", v.as_str().unwrap()))
            .collect();
        for pair in &pairs {
            LabelSelector::parse(pair)
                .unwrap_or_else(|e| panic!("{pointer} {pair:?} is no selector: {e:?}\n{object}"));
        }
        if !pairs.is_empty() {
            LabelSelector::parse(&pairs.join(","))
                .unwrap_or_else(|e| panic!("{pointer} is no selector: {e:?}\n{object}"));
        }
    }
}

/// What a real API server does with `request`: accepts it (its checks of the request), and for
/// an apply accepts the object it leaves after merging into `stored`.
fn assert_accepted(request: &Received, stored: &mut BTreeMap<String, Value>) {
    if let Err(refusal) = request.check(strict::catalog()) {
        panic!(
            "{} {} refused: {} {}\n{}",
            request.method,
            request.path,
            refusal.code,
            refusal.message(),
            serde_json::to_string_pretty(&request.body).unwrap()
        );
    }
    assert_labels_parse(&request.body);
    match request.method.as_str() {
        "DELETE" => {
            stored.remove(&request.path);
        }
        "PATCH" => {
            let mut merged = stored.get(&request.path).cloned().unwrap_or(Value::Null);
            merge(&mut merged, &request.body);
            if let Err(refusal) = check_stored(&merged) {
                panic!(
                    "{} leaves an invalid object: {}\n{}",
                    request.path,
                    refusal.message(),
                    serde_json::to_string_pretty(&merged).unwrap()
                );
            }
            assert_labels_parse(&merged);
            stored.insert(request.path.clone(), merged);
        }
        _ => {}
    }
}

fn assert_created(object: &Value, path: String) {
    let request = Received {
        method: "POST".into(),
        path,
        query: BTreeMap::new(),
        content_type: "application/json".into(),
        body: object.clone(),
    };
    request.check(strict::catalog()).unwrap_or_else(|refusal| {
        panic!(
            "{} refused: {}\n{}",
            request.path,
            refusal.message(),
            serde_json::to_string_pretty(object).unwrap()
        )
    });
    let errors = common::strict::catalog().object_errors(object, Completeness::Whole);
    assert!(errors.is_empty(), "{errors:?}\n{object}");
}

// ---- the walk ----

struct Walk {
    world: World,
    snapshot: Snapshot,
    config: Config,
    /// What the API server holds, by path (seeded with the snapshot's objects).
    stored: BTreeMap<String, Value>,
    writes: usize,
    events: usize,
}

impl Walk {
    fn new(world: World) -> Self {
        let snapshot = snapshot_of(&world);
        let namespace = world.namespace.clone();
        let mut stored = BTreeMap::new();
        for deployment in &snapshot.deployments {
            stored.insert(
                format!(
                    "/apis/apps/v1/namespaces/{namespace}/deployments/{}",
                    deployment.metadata.name.as_deref().unwrap()
                ),
                to_json(deployment),
            );
        }
        stored.insert(
            format!("/api/v1/namespaces/{namespace}/configmaps/rook-ceph-mon-endpoints"),
            to_json(snapshot.mon_endpoints.as_ref().unwrap()),
        );
        let config = Config {
            dns_name_form: if world.unique_names {
                ceph_address_plan::DnsNameForm::UniqueServiceName
            } else {
                ceph_address_plan::DnsNameForm::ClusterIdPrefix
            },
            removed_osd_grace: Duration::from_secs(60),
            ..Config::default()
        };
        Self {
            world,
            snapshot,
            config,
            stored,
            writes: 0,
            events: 0,
        }
    }

    /// The DNS of the world: each daemon's global IP, except the failing OSD's first time.
    fn answer(&self, daemon: &Daemon, first: bool) -> Result<Vec<IpAddr>, String> {
        if first && matches!(daemon, Daemon::Osd(id) if Some(*id) == self.world.failing) {
            return Err("SERVFAIL".into());
        }
        self.world
            .ips
            .get(&daemon.to_string())
            .map(|ip| vec![*ip])
            .ok_or_else(|| "NXDOMAIN".to_owned())
    }

    /// One reconcile at `at(t)`: every request it makes is checked, then carried out.
    fn step(&mut self, t: i64, first: bool) -> Outcome {
        let now = at(t);
        let prepared = prepare(&self.snapshot, &self.config, now);
        let writes = prepared.writes().to_vec();
        let results = prepared
            .lookups()
            .iter()
            .map(|l| (l.daemon.clone(), self.answer(&l.daemon, first)))
            .collect();
        let outcome = prepared.complete(results);
        for write in writes.iter().chain(&outcome.status) {
            assert_accepted(&request_of(write), &mut self.stored);
            self.writes += 1;
        }
        for note in &outcome.events {
            let event = event_of(&self.snapshot.cluster, note, now, &self.world.instance);
            assert_created(
                &event,
                format!(
                    "/apis/events.k8s.io/v1/namespaces/{}/events",
                    self.world.namespace
                ),
            );
            self.events += 1;
        }
        apply(&mut self.snapshot, writes);
        apply(&mut self.snapshot, outcome.status.clone());
        outcome
    }

    /// Reconciles until nothing is written (at most `rounds` times) from `at(t)` on.
    fn settle(&mut self, t: i64, rounds: i64) -> i64 {
        for round in 0..rounds {
            let before = self.writes;
            self.step(t + round, false);
            if self.writes == before {
                return t + round + 1;
            }
        }
        t + rounds
    }
}

/// The whole life of a world's cluster, every request checked.
fn walk(world: World) -> Walk {
    let mut walk = Walk::new(world);
    let osds = i64::try_from(walk.world.osds.len()).unwrap();
    walk.step(0, true);
    set_export_conditions(&mut walk.snapshot, &exported_conditions());
    walk.step(10, true);
    // The failing lookup is retried once its backoff has passed.
    let t = walk.settle(100, osds + 3);

    // The mons now advertise their global IPs (as the mon migration leaves them): exported,
    // resolved, then the mon endpoints and mon_host are written.
    let data = mon_endpoints_data(&walk.world, |id, _| {
        let ip = walk.world.ips[&format!("mon.{id}")];
        ceph_address_plan::format::endpoint(ip, 6789)
    });
    let config_map = walk.snapshot.mon_endpoints.as_mut().unwrap();
    config_map
        .data
        .as_mut()
        .unwrap()
        .insert("data".into(), data);
    let t = walk.settle(t, 3);
    set_export_conditions(&mut walk.snapshot, &exported_conditions());
    let t = walk.settle(t + 100, osds + 4);

    // An OSD removed for good: its export and Services are deleted after the grace period.
    if walk.snapshot.deployments.len() > 1 {
        walk.snapshot.deployments.pop();
        walk.step(t, false);
        walk.settle(t + 61, 3);
    }

    // MCS turned off: the OSD Deployments go back to Rook one failure domain at a time.
    walk.snapshot.cluster = cluster_of(&walk.world, false);
    walk.settle(t + 200, osds + 3);
    walk
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 48, ..ProptestConfig::default() })]

    /// Every object the decision writes, every Event, every label and selector of a cluster's
    /// whole life is accepted by the API server's rules.
    #[test]
    fn every_object_the_decision_sends_is_accepted(world in world()) {
        let walk = walk(world);
        prop_assert!(walk.writes > 0);
    }

    /// A CephCluster name longer than a label value (64 to 253 characters, still a valid
    /// object name) blocks the cluster with a guard: only the status and an Event are sent,
    /// and both are accepted.
    #[test]
    fn a_cluster_name_too_long_for_a_label_blocks_with_valid_objects(
        world in world_with(subdomain(64, 253).boxed())
    ) {
        let mut walk = Walk::new(world);
        let outcome = walk.step(0, true);
        prop_assert_eq!(walk.writes, 1, "only the status");
        let status = walk.snapshot.prior.as_ref().unwrap().status.as_ref().unwrap();
        prop_assert_eq!(status.phase, mcs_ceph_api::Phase::Blocked);
        prop_assert_eq!(&status.conditions[0].reason, "InvalidName");
        prop_assert_eq!(outcome.events.len(), 1);
    }
}

// ---- the mon migration's objects ----

/// Rook's mon Deployment of `old`, cut down to what the derivation reads.
fn rook_mon(namespace: &str, old: &MonId) -> Deployment {
    serde_json::from_value(json!({
        "apiVersion": "apps/v1", "kind": "Deployment",
        "metadata": {"name": format!("rook-ceph-mon-{old}"), "namespace": namespace,
            "labels": {"app": "rook-ceph-mon", "mon": old.as_str(), "ceph_daemon_id": old.as_str()}},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": {"app": "rook-ceph-mon", "mon": old.as_str()}},
            "template": {
                "metadata": {"labels": {"app": "rook-ceph-mon", "mon": old.as_str()}},
                "spec": {
                    "containers": [{"name": "mon", "image": "quay.io/ceph/ceph:v18.2.4",
                        "args": ["--fsid=f", format!("--id={old}"), "--foreground",
                                 "--public-addr=10.96.0.10",
                                 format!("--setuser-match-path=/var/lib/ceph/mon/ceph-{old}/store.db")]}],
                    "volumes": [
                        {"name": "ceph-daemon-data",
                         "persistentVolumeClaim": {"claimName": mon_claim_name(old.as_str())}}]
                }
            }
        }
    }))
    .unwrap()
}

fn rook_mon_claim(namespace: &str, old: &MonId) -> PersistentVolumeClaim {
    serde_json::from_value(json!({
        "apiVersion": "v1", "kind": "PersistentVolumeClaim",
        "metadata": {"name": mon_claim_name(old.as_str()), "namespace": namespace,
            "labels": {"app": "rook-ceph-mon", "mon": old.as_str()}},
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}}}
    }))
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    /// The new mon's Service, canary, Deployment and claim, its entry in the mon ConfigMap and
    /// the `mon_host` it leads to, for mon ids past `z`, are accepted by the API server's rules.
    #[test]
    fn every_object_of_the_mon_migration_is_accepted(
        namespace in dns_label(63),
        name in subdomain(1, 63),
        cluster_id in dns_label(63),
        old in 0u32..20_000,
        new in 0u32..20_000,
        ip in global_ip(),
        others in proptest::collection::btree_map(0u32..20_000, any::<Ipv4Addr>(), 0..4),
    ) {
        let runtime = tokio::runtime::Builder::new_current_thread().build().unwrap();
        let _entered = runtime.enter();
        let (client, _handle) = common::strict::pair();
        let mut settings = ClusterSettings::new(&name, &namespace);
        settings.uid = Some("6d2f3e1a-0000-4000-8000-000000000001".into());
        settings.multi_cluster_service.enabled = true;
        settings.multi_cluster_service.cluster_id = cluster_id;
        let (old, new) = (mon_id(old), mon_id(new));
        let mon_runtime = KubeMonRuntime::new(
            client,
            settings,
            BTreeMap::new(),
            Some(old.clone()),
            "quay.io/ceph/ceph:v18.2.4".into(),
        );
        let mut stored = BTreeMap::new();
        let deployments = format!("/apis/apps/v1/namespaces/{namespace}/deployments");
        let service = mon_runtime.service(&new);
        assert_accepted(
            &apply_request(format!("/api/v1/namespaces/{namespace}/services/rook-ceph-mon-{new}"), to_json(&service)),
            &mut stored,
        );
        let canary = mon_runtime.canary(&new);
        assert_accepted(
            &apply_request(format!("{deployments}/rook-ceph-mon-{new}-canary"), to_json(&canary)),
            &mut stored,
        );
        let deployment = mon_runtime.mon_deployment(&rook_mon(&namespace, &old), &new, ip).unwrap();
        assert_accepted(
            &apply_request(format!("{deployments}/rook-ceph-mon-{new}"), to_json(&deployment)),
            &mut stored,
        );
        let claim = mon_runtime.mon_claim(&rook_mon_claim(&namespace, &old), old.as_str(), &new).unwrap();
        assert_accepted(
            &apply_request(
                format!("/api/v1/namespaces/{namespace}/persistentvolumeclaims/{}", mon_claim_name(new.as_str())),
                to_json(&claim),
            ),
            &mut stored,
        );
        // The scale applies of stop and start, on the Deployment the server holds.
        for replicas in [0, 1] {
            let scale = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": format!("rook-ceph-mon-{new}"), "namespace": namespace},
                "spec": {"replicas": replicas}});
            assert_accepted(&apply_request(format!("{deployments}/rook-ceph-mon-{new}"), scale), &mut stored);
        }
        // Its entry in rook-ceph-mon-endpoints, and the mon_host that follows.
        let listed: String = others
            .iter()
            .map(|(m, ip)| format!("{}={ip}:6789", mon_id(*m)))
            .collect::<Vec<_>>()
            .join(",");
        let endpoint = ceph_address_plan::format::endpoint(ip, 6789);
        let before: BTreeMap<String, String> = [
            ("data".to_owned(), listed),
            ("mapping".to_owned(), json!({"node": {old.as_str(): null}}).to_string()),
        ]
        .into();
        let written = ceph_address_plan::format::edit_mon_endpoints(&before, &new, Some(&endpoint), Some(&old));
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "rook-ceph-mon-endpoints", "namespace": namespace},
            "data": written});
        assert_accepted(
            &apply_request(format!("/api/v1/namespaces/{namespace}/configmaps/rook-ceph-mon-endpoints"), config_map),
            &mut stored,
        );
        let secret = config_secret(&namespace, &mon_host_of_endpoints(&written));
        assert_accepted(
            &apply_request(format!("/api/v1/namespaces/{namespace}/secrets/rook-ceph-config"), to_json(&secret)),
            &mut stored,
        );
    }
}

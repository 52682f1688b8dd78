//! The scenarios of the end-to-end tests, each on a [`World`] of two real clusters with an
//! agent in each: what `tests/e2e.rs` runs. They are tests: a failed assertion (a panic) is
//! their result, so the workspace's no-panic lints do not apply here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use anyhow::Context;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use serde_json::json;

use crate::{Agent, Cluster, World, wait_for};

const LONG: Duration = Duration::from_secs(60);

/// Service `web` with one TCP port `http` on `port`.
pub fn service(namespace: &str, port: i32) -> serde_json::Value {
    json!({
        "apiVersion": "v1", "kind": "Service",
        "metadata": {"name": "web", "namespace": namespace},
        "spec": {"selector": {"app": "web"}, "ports": [{"name": "http", "port": port, "protocol": "TCP"}]},
    })
}

/// ServiceExport `web`.
pub fn export(namespace: &str) -> serde_json::Value {
    json!({
        "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
        "metadata": {"name": "web", "namespace": namespace},
    })
}

/// A pod behind the Service, scheduled to a node whose kubelet (kwok's, in the suite's own
/// clusters) reports it Running and Ready with an IP.
pub(crate) async fn backend(cluster: &Cluster, namespace: &str) -> anyhow::Result<()> {
    cluster
        .apply(&json!({
            "apiVersion": "v1", "kind": "Pod",
            "metadata": {"name": "web-0", "namespace": namespace, "labels": {"app": "web"}},
            "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.9"}]},
        }))
        .await
}

fn condition(export: &ServiceExport, kind: &str) -> Option<String> {
    export
        .status
        .as_ref()?
        .conditions
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| format!("{} {}", c.status, c.reason))
}

/// The UID of every ServiceImport and EndpointSlice in `namespace` of `cluster`, by kind and
/// name: an object deleted (even if made again) has another UID or none afterwards, whatever
/// a watch would have missed during an outage.
async fn uids(cluster: &Cluster, namespace: &str) -> anyhow::Result<BTreeMap<String, String>> {
    let mut all = BTreeMap::new();
    let lp = ListParams::default();
    let imports: Api<ServiceImport> = Api::namespaced(cluster.client.clone(), namespace);
    for import in imports.list(&lp).await? {
        let meta = &import.metadata;
        all.insert(
            format!(
                "{}: ServiceImport {}",
                cluster.id,
                meta.name.clone().unwrap_or_default()
            ),
            meta.uid.clone().unwrap_or_default(),
        );
    }
    let slices: Api<EndpointSlice> = Api::namespaced(cluster.client.clone(), namespace);
    for slice in slices.list(&lp).await? {
        let meta = &slice.metadata;
        all.insert(
            format!(
                "{}: EndpointSlice {}",
                cluster.id,
                meta.name.clone().unwrap_or_default()
            ),
            meta.uid.clone().unwrap_or_default(),
        );
    }
    Ok(all)
}

/// The objects of `before` that are gone or were made again in `after`.
fn deleted(before: &BTreeMap<String, String>, after: &BTreeMap<String, String>) -> Vec<String> {
    before
        .iter()
        .filter(|(name, uid)| after.get(*name) != Some(*uid))
        .map(|(name, _)| name.clone())
        .collect()
}

/// An import as stored: its IPs, and its imported slices' addresses by source cluster.
type StoredImport = (Vec<String>, BTreeMap<String, Vec<String>>);

/// `cluster`'s ServiceImport `name` as stored, if it exists.
async fn read_import(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
) -> anyhow::Result<Option<StoredImport>> {
    let imports: Api<ServiceImport> = Api::namespaced(cluster.client.clone(), namespace);
    let Some(import) = imports.get_opt(name).await? else {
        return Ok(None);
    };
    let slices: Api<EndpointSlice> = Api::namespaced(cluster.client.clone(), namespace);
    let selector = format!("multicluster.kubernetes.io/service-name={name}");
    let mut by_source = BTreeMap::new();
    for slice in slices
        .list(&ListParams::default().labels(&selector))
        .await?
    {
        let source = slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get("multicluster.kubernetes.io/source-cluster"))
            .cloned()
            .unwrap_or_default();
        let addresses: Vec<String> = slice
            .endpoints
            .iter()
            .flat_map(|e| e.addresses.clone())
            .collect();
        by_source.insert(source, addresses);
    }
    Ok(Some((import.spec.ips, by_source)))
}

/// The stored import of `web` (which must exist).
async fn addresses(cluster: &Cluster, namespace: &str) -> anyhow::Result<StoredImport> {
    read_import(cluster, namespace, "web")
        .await?
        .with_context(|| format!("{} has no import of web", cluster.id))
}

/// Export in east -> import in west (timed) -> DNS answer -> a port conflict on both exports ->
/// east's agent killed and restarted (every IP kept, nothing deleted) -> unexport removes the
/// imports in both clusters.
pub async fn export_import_conflict_restart_unexport(world: &mut World) -> anyhow::Result<()> {
    let namespace = world.namespace("e2e-mcs").await?;
    let (east, west) = (world.east.clone(), world.west.clone());
    scenario(&east, &west, &mut world.agents, &namespace).await
}

async fn scenario(
    east: &Cluster,
    west: &Cluster,
    agents: &mut [Agent],
    namespace: &str,
) -> anyhow::Result<()> {
    // 1. Export in east -> ServiceImport in west (and in east), timed.
    east.apply(&service(namespace, 80)).await?;
    backend(east, namespace).await?;
    let exported = Instant::now();
    east.apply(&export(namespace)).await?;
    let west_imports: Api<ServiceImport> = Api::namespaced(west.client.clone(), namespace);
    let import = wait_for("the ServiceImport in west", LONG, || {
        let api = west_imports.clone();
        async move { Ok(api.get_opt("web").await?.filter(|i| !i.spec.ips.is_empty())) }
    })
    .await?;
    println!(
        "export in east -> import in west: {:?} (ips {:?}, ports {:?})",
        exported.elapsed(),
        import.spec.ips,
        import.spec.ports.iter().map(|p| p.port).collect::<Vec<_>>()
    );
    // The backend pod is ready (a kubelet, or the stand-in): east's endpoint is ready in west.
    let west_slices: Api<EndpointSlice> = Api::namespaced(west.client.clone(), namespace);
    wait_for("a ready endpoint from east in west", LONG, || {
        let slices = west_slices.clone();
        async move {
            let ready = slices
                .list(
                    &ListParams::default().labels("multicluster.kubernetes.io/source-cluster=east"),
                )
                .await?
                .items
                .iter()
                .flat_map(|s| &s.endpoints)
                .any(|e| e.conditions.as_ref().and_then(|c| c.ready) == Some(true));
            Ok(ready.then_some(()))
        }
    })
    .await?;
    assert_eq!(import.spec.ports.len(), 1);
    assert_eq!(import.spec.ports[0].port, 80);
    let east_exports: Api<ServiceExport> = Api::namespaced(east.client.clone(), namespace);
    let valid = wait_for("east's export to be Valid", LONG, || {
        let api = east_exports.clone();
        async move {
            let export = api.get("web").await?;
            Ok(condition(&export, "Valid").filter(|c| c.starts_with("True")))
        }
    })
    .await?;
    println!("east's ServiceExport: Valid = {valid}");

    // 2. DNS: west's agent answers the clusterset name with west's clusterset IP.
    let name = format!("web.{namespace}.svc.clusterset.local");
    let dns = agents[1].dns;
    let answers = wait_for("west's DNS answer", LONG, || {
        let name = name.clone();
        let want = import.spec.ips.clone();
        async move {
            let answers = crate::dig(dns, &name, "A").await?;
            Ok((answers == want).then_some(answers))
        }
    })
    .await?;
    println!("dig @{dns} {name} A -> {answers:?}");

    // 3. A port conflict: west exports `web` with port http on 8080; both exports say so.
    west.apply(&service(namespace, 8080)).await?;
    west.apply(&export(namespace)).await?;
    let west_exports: Api<ServiceExport> = Api::namespaced(west.client.clone(), namespace);
    for (cluster, api) in [("east", &east_exports), ("west", &west_exports)] {
        let conflict = wait_for(
            &format!("{cluster}'s export to show the conflict"),
            LONG,
            || {
                let api = api.clone();
                async move {
                    let export = api.get("web").await?;
                    Ok(condition(&export, "Conflict").filter(|c| c.starts_with("True")))
                }
            },
        )
        .await?;
        println!("{cluster}'s ServiceExport: Conflict = {conflict}");
    }

    // 4. An agent killed (SIGKILL) and restarted: every IP stays, nothing is deleted.
    let before_east = addresses(east, namespace).await?;
    let before_west = addresses(west, namespace).await?;
    let before_uids = [uids(east, namespace).await?, uids(west, namespace).await?];
    agents[0].daemon.kill().await?;
    let restarted = Instant::now();
    agents[0].start().await?;
    println!(
        "east's agent killed and ready again in {:?}",
        restarted.elapsed()
    );
    // The restarted agent has listed everything (ready) and made its first pass once its
    // gauges count its own record, both clusters' records and the import: a deletion or a new
    // IP would have been written by then.
    let restarted_agent = &agents[0].daemon;
    wait_for("the restarted agent's first pass", LONG, || async move {
        let published = restarted_agent
            .metric("clusterset_agent_published_records")
            .await?;
        let records = restarted_agent
            .metric("clusterset_agent_broker_records")
            .await?;
        let imports = restarted_agent.metric("clusterset_agent_imports").await?;
        Ok((published >= 1.0 && records >= 2.0 && imports >= 1.0).then_some(()))
    })
    .await?;
    let after_east = addresses(east, namespace).await?;
    let after_west = addresses(west, namespace).await?;
    assert_eq!(
        before_east, after_east,
        "east's import IPs and global IPs changed"
    );
    assert_eq!(
        before_west, after_west,
        "west's import IPs and global IPs changed"
    );
    let after_uids = [uids(east, namespace).await?, uids(west, namespace).await?];
    let gone: Vec<String> = before_uids
        .iter()
        .zip(&after_uids)
        .flat_map(|(before, after)| deleted(before, after))
        .collect();
    assert!(gone.is_empty(), "deleted during the restart: {gone:?}");
    println!(
        "after the restart: same IPs {:?} / {:?}, nothing deleted",
        after_east, after_west
    );

    // 5. Unexport: both exports deleted -> the imports and their slices go in both clusters.
    let unexported = Instant::now();
    for api in [&east_exports, &west_exports] {
        api.delete("web", &DeleteParams::default()).await?;
    }
    for cluster in [east, west] {
        let imports: Api<ServiceImport> = Api::namespaced(cluster.client.clone(), namespace);
        let slices: Api<EndpointSlice> = Api::namespaced(cluster.client.clone(), namespace);
        wait_for(
            &format!("{}'s import and slices to go", cluster.id),
            LONG,
            || {
                let (imports, slices) = (imports.clone(), slices.clone());
                async move {
                    let import = imports.get_opt("web").await?;
                    let left = slices
                        .list(
                            &ListParams::default()
                                .labels("multicluster.kubernetes.io/service-name=web"),
                        )
                        .await?;
                    Ok((import.is_none() && left.items.is_empty()).then_some(()))
                }
            },
        )
        .await
        .context("unexporting did not remove the import")?;
    }
    println!(
        "unexport -> imports and slices gone in both clusters in {:?}",
        unexported.elapsed()
    );
    let services: Api<Service> = Api::namespaced(east.client.clone(), namespace);
    assert!(
        services.get_opt("web").await?.is_some(),
        "the exported Service itself stays"
    );

    Ok(())
}

/// A stand-in for Rook's CephCluster CRD (Rook's own is large; the operator reads only a few
/// fields): applied only where no CephCluster CRD exists, so a cluster with Rook keeps Rook's.
pub(crate) async fn ensure_ceph_cluster_crd(cluster: &Cluster) -> anyhow::Result<()> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
    let crds: Api<CustomResourceDefinition> = Api::all(cluster.client.clone());
    if crds.get_opt("cephclusters.ceph.rook.io").await?.is_none() {
        let open = json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true});
        cluster
            .apply(&json!({
                "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
                "metadata": {"name": "cephclusters.ceph.rook.io"},
                "spec": {"group": "ceph.rook.io", "scope": "Namespaced",
                    "names": {"kind": "CephCluster", "listKind": "CephClusterList",
                        "plural": "cephclusters", "singular": "cephcluster"},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                        "subresources": {"status": {}},
                        "schema": {"openAPIV3Schema": {"type": "object",
                            "properties": {"spec": open, "status": open}}}}]},
            }))
            .await?;
    }
    wait_for("the CephCluster CRD to be served", LONG, || async move {
        let api: Api<kube::api::DynamicObject> = Api::all_with(
            cluster.client.clone(),
            &kube::api::ApiResource::from_gvk_with_plural(
                &kube::core::GroupVersionKind::gvk("ceph.rook.io", "v1", "CephCluster"),
                "cephclusters",
            ),
        );
        Ok(api
            .list(&ListParams::default().limit(1))
            .await
            .ok()
            .map(|_| ()))
    })
    .await
}

/// Rook's objects of a CephCluster `my-cluster` in `namespace`: three mons on cluster IPs
/// (Services and `rook-ceph-mon-endpoints`) and `osds` OSD Deployments on their pod IPs,
/// labelled as Rook labels them. The OSD container runs `pause` (no Ceph is needed for the
/// addresses; `/pause` ignores Ceph's arguments). Returns once every OSD Deployment is
/// available.
pub(crate) async fn rook_layout(
    cluster: &Cluster,
    namespace: &str,
    osds: u32,
) -> anyhow::Result<()> {
    rook_layout_in_domains(cluster, namespace, osds, 1, LONG).await
}

/// [`rook_layout`] with `per_domain` OSDs in each failure domain (`node-<id / per_domain>`),
/// the OSD Deployments applied 16 at a time, waiting up to `limit` for them to be available.
pub(crate) async fn rook_layout_in_domains(
    cluster: &Cluster,
    namespace: &str,
    osds: u32,
    per_domain: u32,
    limit: Duration,
) -> anyhow::Result<()> {
    use futures::{StreamExt, TryStreamExt};
    cluster
        .apply(&json!({
            "apiVersion": "ceph.rook.io/v1", "kind": "CephCluster",
            "metadata": {"name": "my-cluster", "namespace": namespace},
            "spec": {"cephVersion": {"image": "quay.io/ceph/ceph:v18.2.4"},
                "dataDirHostPath": "/var/lib/rook", "mon": {"count": 3},
                "network": {"multiClusterService": {"enabled": true, "clusterID": cluster.id}}},
        }))
        .await?;
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), namespace);
    let mut endpoints = Vec::new();
    for id in ["a", "b", "c"] {
        let name = format!("rook-ceph-mon-{id}");
        cluster
            .apply(&json!({
                "apiVersion": "v1", "kind": "Service",
                "metadata": {"name": name, "namespace": namespace, "labels": {
                    "app": "rook-ceph-mon", "rook_cluster": namespace, "mon": id,
                    "ceph_daemon_type": "mon", "ceph_daemon_id": id}},
                "spec": {"selector": {"app": "rook-ceph-mon", "mon": id, "rook_cluster": namespace},
                    "ports": [{"name": "tcp-msgr1", "port": 6789, "protocol": "TCP"},
                              {"name": "tcp-msgr2", "port": 3300, "protocol": "TCP"}]},
            }))
            .await?;
        let ip = services
            .get(&name)
            .await?
            .spec
            .and_then(|s| s.cluster_ip)
            .context("a mon Service without a cluster IP")?;
        endpoints.push(format!("{id}={ip}:6789"));
    }
    cluster
        .apply(&json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "rook-ceph-mon-endpoints", "namespace": namespace},
            "data": {"data": endpoints.join(","), "maxMonId": "2", "mapping": "{\"node\":{}}",
                "outOfQuorum": "", "csi-cluster-config-json": "[]"},
        }))
        .await?;
    let per_domain = per_domain.max(1);
    futures::stream::iter(0..osds)
        .map(|id| async move {
        let host = format!("node-{}", id / per_domain);
        let labels = json!({"app": "rook-ceph-osd", "rook_cluster": namespace,
            "ceph-osd-id": id.to_string(), "osd": id.to_string(),
            "failure-domain": host, "portable": "false",
            "topology-location-host": host, "topology-location-root": "default"});
        cluster
            .apply(&json!({
                "apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": format!("rook-ceph-osd-{id}"), "namespace": namespace,
                    "labels": labels},
                "spec": {"replicas": 1, "strategy": {"type": "Recreate"},
                    "selector": {"matchLabels": {"app": "rook-ceph-osd", "ceph-osd-id": id.to_string()}},
                    "template": {"metadata": {"labels": labels},
                        "spec": {"containers": [{"name": "osd", "image": "registry.k8s.io/pause:3.9",
                            "command": ["/pause"], "args": ["--foreground", format!("--id={id}")]}]}}},
            }))
            .await
        })
        .buffer_unordered(16)
        .try_collect::<Vec<()>>()
        .await?;
    // Running, as Rook leaves them before the operator comes: every OSD pod Ready (so that
    // the Services the operator creates have ready endpoints at once).
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(cluster.client.clone(), namespace);
    wait_for(
        &format!("the {osds} OSD Deployments of the Rook layout to be available"),
        limit,
        || {
            let deployments = deployments.clone();
            async move {
                let list = deployments.list(&ListParams::default()).await?;
                let available = list
                    .items
                    .iter()
                    .filter(|d| d.status.as_ref().and_then(|s| s.available_replicas) == Some(1))
                    .count();
                Ok((available == usize::try_from(osds)?).then_some(()))
            }
        },
    )
    .await
}

/// The `--public-addr=` of an OSD Deployment's container, if it has one.
pub(crate) fn public_addr(deployment: &k8s_openapi::api::apps::v1::Deployment) -> Option<String> {
    deployment
        .spec
        .as_ref()?
        .template
        .spec
        .as_ref()?
        .containers
        .iter()
        .flat_map(|c| c.args.iter().flatten())
        .find_map(|a| a.strip_prefix("--public-addr=").map(str::to_owned))
}

/// The status of the CephClusterAddressing `my-cluster` in `namespace` (null while none).
pub(crate) async fn addressing_status(
    cluster: &Cluster,
    namespace: &str,
) -> anyhow::Result<serde_json::Value> {
    let addressing = kube::api::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("clusterset.io", "v1alpha1", "CephClusterAddressing"),
        "cephclusteraddressings",
    );
    let api: Api<kube::api::DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), namespace, &addressing);
    Ok(api
        .get_opt("my-cluster")
        .await?
        .map(|o| o.data["status"].clone())
        .unwrap_or_default())
}

/// Every object's `resourceVersion` in `namespace` of the kinds the operator writes (for
/// Deployments, whose status the Deployment controller writes, the `generation`).
async fn versions(cluster: &Cluster, namespace: &str) -> anyhow::Result<BTreeMap<String, String>> {
    use k8s_openapi::api::apps::v1::Deployment;
    use k8s_openapi::api::core::v1::ConfigMap;
    let mut all = BTreeMap::new();
    let client = cluster.client.clone();
    let lp = ListParams::default();
    let mut put = |kind: &str, meta: &kube::api::ObjectMeta| {
        all.insert(
            format!("{kind}/{}", meta.name.clone().unwrap_or_default()),
            meta.resource_version.clone().unwrap_or_default(),
        );
    };
    for o in Api::<Deployment>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await?
    {
        // The Deployment controller writes its status; the operator writes its spec.
        let mut meta = o.metadata.clone();
        meta.resource_version = meta.generation.map(|g| {
            format!(
                "generation {g}: {}",
                serde_json::to_string(&o.spec).unwrap_or_default()
            )
        });
        put("Deployment", &meta);
    }
    for o in Api::<Service>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await?
    {
        put("Service", &o.metadata);
    }
    for o in Api::<ConfigMap>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await?
    {
        put("ConfigMap", &o.metadata);
    }
    for o in Api::<ServiceExport>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await?
    {
        put("ServiceExport", &o.metadata);
    }
    let addressing = kube::api::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("clusterset.io", "v1alpha1", "CephClusterAddressing"),
        "cephclusteraddressings",
    );
    for o in Api::<kube::api::DynamicObject>::namespaced_with(client, namespace, &addressing)
        .list(&lp)
        .await?
    {
        put("CephClusterAddressing", &o.metadata);
    }
    Ok(all)
}

/// Waits until each of the `osds` OSD Deployments of [`rook_layout`] in `namespace` of `east`
/// advertises a global IP of east (`--public-addr=242.1.…`, the operator's work with both
/// agents'), then until west's agent (DNS on `west_dns`) answers
/// `east.rook-ceph-osd-<id>.<ns>.svc.clusterset.local` with that IP; prints the time since
/// `started` and every answer; the IPs by OSD id.
pub(crate) async fn osds_at_global_ips(
    east: &Cluster,
    namespace: &str,
    osds: u32,
    west_dns: std::net::SocketAddr,
    started: Instant,
) -> anyhow::Result<BTreeMap<u32, String>> {
    let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
        Api::namespaced(east.client.clone(), namespace);
    let addresses = wait_for(
        "every OSD Deployment to advertise a global IP",
        Duration::from_secs(180),
        || {
            let deployments = deployments.clone();
            async move {
                let mut found = BTreeMap::new();
                for id in 0..osds {
                    let deployment = deployments.get(&format!("rook-ceph-osd-{id}")).await?;
                    match public_addr(&deployment) {
                        Some(ip) if ip.starts_with("242.1.") => {
                            found.insert(id, ip);
                        }
                        _ => return Ok(None),
                    }
                }
                Ok(Some(found))
            }
        },
    )
    .await?;
    println!(
        "operator + agents: {osds} OSD Deployments at their global IPs in {:?}: {addresses:?}",
        started.elapsed()
    );
    for (id, ip) in &addresses {
        let name = format!("east.rook-ceph-osd-{id}.{namespace}.svc.clusterset.local");
        let want = vec![ip.clone()];
        let answers = wait_for(&format!("{name} in west"), LONG, || {
            let (name, want) = (name.clone(), want.clone());
            async move {
                let answers = crate::dig(west_dns, &name, "A").await?;
                Ok((answers == want).then_some(answers))
            }
        })
        .await?;
        println!("dig @{west_dns} (west) {name} -> {answers:?}");
    }
    Ok(addresses)
}

/// The operator of east, not started: deploy/'s ServiceAccount and RBAC, leader election on
/// with `identity`, watching `namespace` only, resolving through east's agent, with `extra`
/// flags.
pub(crate) async fn operator_in_east(
    world: &World,
    namespace: &str,
    identity: &str,
    extra: &[&str],
) -> anyhow::Result<crate::Daemon> {
    let kubeconfig = world
        .east
        .service_account_kubeconfig(
            crate::OPERATOR_NAMESPACE,
            "mcs-ceph-operator",
            world.dir.path(),
        )
        .await?;
    let mut args = vec![
        "run".to_owned(),
        format!("--nameserver={}", world.agents[0].dns),
        format!("--identity={identity}"),
        format!("--leader-lease-namespace={}", crate::OPERATOR_NAMESPACE),
        format!("--watch-namespace={namespace}"),
    ];
    args.extend(extra.iter().map(|a| (*a).to_owned()));
    Ok(crate::Daemon::new(
        "operator east",
        &world.settings.binary("mcs-ceph-operator")?,
        args,
        &kubeconfig,
        "--listen",
        &world.logs,
    ))
}

/// The operator (with deploy/'s ServiceAccount and RBAC, leader election on) on a Rook-layout
/// namespace in east, with both agents running: every OSD Deployment comes to
/// `--public-addr=<its global IP>`, the name `east.rook-ceph-osd-<id>.<ns>.svc.clusterset.local`
/// resolves to that IP in west, and a second pass changes nothing.
pub async fn operator_brings_osds_to_global_ips(world: &mut World) -> anyhow::Result<()> {
    const OSDS: u32 = 3;
    let namespace = world.namespace("e2e-rook").await?;
    let east = world.east.clone();
    ensure_ceph_cluster_crd(&east).await?;
    rook_layout(&east, &namespace, OSDS).await?;
    let mut operator =
        operator_in_east(world, &namespace, "e2e-operator", &["--debounce-ms=200"]).await?;
    let started = Instant::now();
    operator.start().await?;
    let result = async {
        let deployments: Api<k8s_openapi::api::apps::v1::Deployment> =
            Api::namespaced(east.client.clone(), &namespace);
        osds_at_global_ips(&east, &namespace, OSDS, world.agents[1].dns, started).await?;
        // Converged: every OSD rolled out with its new arguments and counted ready.
        wait_for("the OSD rollouts and the status to converge", LONG, || {
            let (deployments, east, namespace) =
                (deployments.clone(), east.clone(), namespace.clone());
            async move {
                for d in deployments.list(&ListParams::default()).await? {
                    let status = d.status.clone().unwrap_or_default();
                    let want = d.spec.as_ref().and_then(|s| s.replicas).unwrap_or(1);
                    let done = status.observed_generation == d.metadata.generation
                        && status.updated_replicas == Some(want)
                        && status.available_replicas == Some(want)
                        && status.replicas == Some(want);
                    if !done {
                        return Ok(None);
                    }
                }
                let addressing = addressing_status(&east, &namespace).await?;
                let ready = addressing["readyDaemons"].as_u64().unwrap_or(0);
                Ok((ready >= u64::from(OSDS)).then_some(()))
            }
        })
        .await?;
        println!(
            "every OSD rolled out and counted ready {:?} after the operator started",
            started.elapsed()
        );
        // A second pass: poke the CephCluster and wait for the operator to reconcile it (once
        // to see the converged state, once more to compare); nothing it writes may change.
        let operator_ref = &operator;
        let poke = |n: u32| {
            let (east, namespace) = (east.clone(), namespace.clone());
            async move {
                let reconciles = operator_ref
                    .metric("mcs_ceph_operator_reconciles_total")
                    .await?;
                // A merge patch of one annotation (an apply of only the annotation would take
                // the spec this harness applied away from the CephCluster).
                let clusters: Api<kube::api::DynamicObject> = Api::namespaced_with(
                    east.client.clone(),
                    &namespace,
                    &kube::api::ApiResource::from_gvk_with_plural(
                        &kube::core::GroupVersionKind::gvk("ceph.rook.io", "v1", "CephCluster"),
                        "cephclusters",
                    ),
                );
                let poke =
                    json!({"metadata": {"annotations": {"e2e.clusterset.io/poke": n.to_string()}}});
                clusters
                    .patch("my-cluster", &PatchParams::default(), &Patch::Merge(&poke))
                    .await?;
                wait_for("a reconcile after the poke", LONG, || async move {
                    let now = operator_ref
                        .metric("mcs_ceph_operator_reconciles_total")
                        .await?;
                    Ok((now > reconciles).then_some(()))
                })
                .await
            }
        };
        poke(1).await?;
        let before = versions(&east, &namespace).await?;
        poke(2).await?;
        println!(
            "two pokes reconciled {:?} after the operator started",
            started.elapsed()
        );
        let after = versions(&east, &namespace).await?;
        let changed: Vec<&String> = before
            .iter()
            .filter(|(k, v)| after.get(*k) != Some(*v))
            .map(|(k, _)| k)
            .collect();
        for name in &changed {
            eprintln!(
                "{name}\n  before: {:?}\n  after:  {:?}",
                before.get(*name),
                after.get(*name)
            );
        }
        assert!(changed.is_empty(), "the second pass changed {changed:?}");
        println!("second pass: {} objects, none changed", after.len());
        anyhow::Ok(())
    }
    .await;
    if result.is_err() {
        eprintln!("{}", operator.failure_report());
    }
    operator.kill().await?;
    result
}

/// Waits until `cluster`'s API server answers again (after a stop or restart).
async fn api_back(cluster: &Cluster) -> anyhow::Result<()> {
    wait_for(
        &format!("{}'s API server to answer", cluster.id),
        Duration::from_secs(180),
        || async move {
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
                Api::all(cluster.client.clone());
            Ok(namespaces
                .list(&ListParams::default().limit(1))
                .await
                .ok()
                .map(|_| ()))
        },
    )
    .await
}

/// A Service `name` with port `port` exported from `cluster`.
async fn export_service(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    port: i32,
) -> anyhow::Result<()> {
    let mut service = service(namespace, port);
    service["metadata"]["name"] = json!(name);
    cluster.apply(&service).await?;
    let mut export = export(namespace);
    export["metadata"]["name"] = json!(name);
    cluster.apply(&export).await
}

/// Waits for `cluster`'s ServiceImport `name` with an IP and its imported slices from every
/// cluster of `sources`; its IPs and its slices' addresses by source cluster.
pub(crate) async fn imported(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    sources: &[&str],
) -> anyhow::Result<StoredImport> {
    let sources: Vec<String> = sources.iter().map(|s| (*s).to_owned()).collect();
    wait_for(
        &format!("{}'s import of {name} from {sources:?}", cluster.id),
        Duration::from_secs(120),
        || {
            let sources = sources.clone();
            async move {
                Ok(read_import(cluster, namespace, name)
                    .await?
                    .filter(|(ips, by_source)| {
                        !ips.is_empty() && sources.iter().all(|s| by_source.contains_key(s))
                    }))
            }
        },
    )
    .await
}

/// Faults, with nothing lost: the hub's API server stopped for a minute (imports and DNS
/// answers stay in the other cluster, nothing is deleted, a change made meanwhile arrives when
/// the hub returns), a member's API server restarted (the agent's watches resume, and it makes
/// no more writes than an undisturbed agent), an agent killed in the middle of a propagation
/// (it resumes; every IP stays the same).
///
/// The API servers are stopped and started by [`World::faults`] (the suite's own clusters, or
/// shell commands for the user's); `CLUSTERSET_E2E_OUTAGE_SECONDS` (default 60) is how long
/// the hub stays down.
pub async fn faults_lose_nothing(world: &mut World) -> anyhow::Result<()> {
    world.faults.ensure_possible()?;
    let outage = Duration::from_secs(
        std::env::var("CLUSTERSET_E2E_OUTAGE_SECONDS")
            .ok()
            .and_then(|s| s.parse().ok())
            .unwrap_or(60),
    );
    let namespace = world.namespace("e2e-faults").await?;
    let (east, west) = (world.east.clone(), world.west.clone());
    export_service(&east, &namespace, "web", 80).await?;
    let web_west = imported(&west, &namespace, "web", &["east"]).await?;
    let web_east = imported(&east, &namespace, "web", &["east"]).await?;
    let west_uids = uids(&west, &namespace).await?;

    // 1. The hub (east's API server) down for `outage`.
    let west_dns = world.agents[1].dns;
    let name = format!("web.{namespace}.svc.clusterset.local");
    let east_uids = uids(&east, &namespace).await?;
    world.faults.hub_stop().await?;
    let stopped = Instant::now();
    println!("hub stopped; for {outage:?}: west keeps its import and DNS answers");
    // A change made in west while the hub is down: it reaches east when the hub returns.
    export_service(&west, &namespace, "api", 8080).await?;
    let west_imports: Api<ServiceImport> = Api::namespaced(west.client.clone(), &namespace);
    let mut checks = 0;
    while stopped.elapsed() < outage {
        let answers = crate::dig(west_dns, &name, "A").await?;
        assert_eq!(
            answers, web_west.0,
            "west's DNS answer changed while the hub was down"
        );
        let import = west_imports.get("web").await?;
        assert_eq!(
            import.spec.ips, web_west.0,
            "west's import changed while the hub was down"
        );
        checks += 1;
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
    world.faults.hub_start().await?;
    api_back(&east).await?;
    let gone = deleted(&east_uids, &uids(&east, &namespace).await?);
    assert!(
        gone.is_empty(),
        "deleted in east during the hub's outage: {gone:?}"
    );
    println!(
        "hub back after {:?}; {checks} checks of west's DNS answer and import during the outage all equal",
        stopped.elapsed()
    );
    let caught_up = Instant::now();
    let api_east = imported(&east, &namespace, "api", &["west"]).await?;
    println!(
        "the export made in west during the outage reached east {:?} after the hub returned: {api_east:?}",
        caught_up.elapsed()
    );
    assert_eq!(
        imported(&west, &namespace, "web", &["east"]).await?,
        web_west
    );
    assert_eq!(
        imported(&east, &namespace, "web", &["east"]).await?,
        web_east
    );

    // 2. West's API server restarted: the agent's watches resume, and it writes no more than
    //    an undisturbed agent does for the same change.
    let writes = |i: usize| {
        world.agents[i]
            .daemon
            .metric("clusterset_agent_writes_total")
    };
    // The outage's after-effects settle first: while the hub was down east's heartbeat went
    // stale in west's eyes, and west rewrites every import's `StaleClusters` condition once it
    // sees east heartbeat again. Counted from here they would be charged to the restart.
    settled_after_outage(world, &namespace).await?;
    let before = writes(1).await?;
    let lines = |i: usize| {
        world.agents[i]
            .daemon
            .metric_lines("clusterset_agent_writes_total")
    };
    println!(
        "west's writes before the control export: {:?}",
        lines(1).await?
    );
    export_service(&east, &namespace, "control", 81).await?;
    imported(&west, &namespace, "control", &["east"]).await?;
    let undisturbed = writes(1).await? - before;
    println!(
        "west's writes after the control import: {:?}",
        lines(1).await?
    );
    let before = writes(1).await?;
    world.faults.member_restart().await?;
    api_back(&west).await?;
    export_service(&east, &namespace, "db", 82).await?;
    let db = imported(&west, &namespace, "db", &["east"]).await?;
    let after_restart = writes(1).await? - before;
    println!(
        "west's API server restarted: the agent's watches resumed (db imported: {db:?}); its writes: {after_restart} for the import made after the restart, {undisturbed} for the same import undisturbed"
    );
    assert!(
        after_restart <= undisturbed,
        "west's agent wrote more after its API server restarted ({after_restart}) than for the same change undisturbed ({undisturbed})"
    );

    // 3. Agents killed in the middle of a propagation: `late` is exported in east and east's
    //    agent (the exporter) is killed at once, before or while it publishes; then `later` is
    //    exported and west's agent (the importer) is killed as soon as east's record of it is on
    //    the hub. Each resumes after its restart, and every IP stays the same.
    let records = kube::api::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("clusterset.io", "v1alpha1", "ExportRecord"),
        "exportrecords",
    );
    let hub_records: Api<kube::api::DynamicObject> = Api::namespaced_with(
        east.client.clone(),
        &crate::records_namespace(&east.id)?,
        &records,
    );
    export_service(&east, &namespace, "late", 83).await?;
    world.agents[0].daemon.kill().await?;
    let published_at_kill = hub_records
        .get_opt(&format!("east.{namespace}.late"))
        .await?
        .is_some();
    world.agents[0].start().await?;
    let late = imported(&west, &namespace, "late", &["east"]).await?;
    println!(
        "east's agent killed right after the export of late (its record on the hub then: {published_at_kill}); after its restart late is imported in west: {late:?}"
    );
    let record_name = format!("east.{namespace}.later");
    export_service(&east, &namespace, "later", 84).await?;
    wait_for("east's record of later on the hub", LONG, || {
        let (api, record_name) = (hub_records.clone(), record_name.clone());
        async move { Ok(api.get_opt(&record_name).await?.map(|_| ())) }
    })
    .await?;
    world.agents[1].daemon.kill().await?;
    let imported_at_kill = west_imports.get_opt("later").await?.is_some();
    world.agents[1].start().await?;
    let later = imported(&west, &namespace, "later", &["east"]).await?;
    println!(
        "west's agent killed once east's record of later was on the hub (import written then: {imported_at_kill}); after its restart later is imported: {later:?}"
    );
    assert_eq!(
        imported(&west, &namespace, "late", &["east"]).await?,
        late,
        "late's IPs changed when west's agent restarted"
    );
    for (service, sources, want) in [
        ("web", &["east"][..], &web_west),
        ("db", &["east"][..], &db),
    ] {
        assert_eq!(
            &imported(&west, &namespace, service, sources).await?,
            want,
            "{service}'s IPs changed"
        );
    }
    let gone = deleted(&west_uids, &uids(&west, &namespace).await?);
    assert!(
        gone.is_empty(),
        "deleted in west during the faults: {gone:?}"
    );
    println!("every IP unchanged and nothing deleted in west through all three faults");
    Ok(())
}

/// What a request refused by RBAC must look like: the 403 of [`kube_syntax::status::forbidden`]
/// for `denied`, which the agent's simulated hub answers, equal to the real API server's in
/// code, reason, message and details.
fn assert_forbidden<T: std::fmt::Debug>(
    what: &str,
    result: Result<T, kube::Error>,
    denied: &kube_syntax::status::Denied<'_>,
) {
    let want = kube_syntax::status::forbidden(denied);
    let status = match result {
        Ok(allowed) => panic!("{what}: west's hub credentials were allowed it: {allowed:?}"),
        Err(kube::Error::Api(status)) => status,
        Err(other) => panic!("{what}: not an API server's refusal: {other}"),
    };
    assert_eq!(status.code, want.code, "{what}: {status:?}");
    assert_eq!(status.reason, want.body["reason"], "{what}: {status:?}");
    assert_eq!(
        status.message,
        want.message(),
        "{what}: the API server's message differs from kube_syntax::status::forbidden's"
    );
    let details = status
        .details
        .as_ref()
        .map(|d| {
            // As the API server writes them: `omitempty` (kube's typed details read a missing
            // name as "").
            let mut details = json!({"group": d.group, "kind": d.kind});
            if !d.name.is_empty() {
                details["name"] = json!(d.name);
            }
            details
        })
        .unwrap_or_default();
    assert_eq!(
        details, want.body["details"],
        "{what}: the API server's details differ from kube_syntax::status::forbidden's"
    );
    println!("refused: {what}: {}", status.message);
}

/// An agent's `clusterset_agent_foreign_writer_objects{reason="record_namespace"}`.
const FOREIGN_RECORDS: &str =
    r#"clusterset_agent_foreign_writer_objects{reason="record_namespace"}"#;

/// Waits until every agent counts `want` records stored outside their cluster's namespace.
async fn foreign_records(agents: &[Agent], want: f64) -> anyhow::Result<()> {
    for agent in agents {
        let daemon = &agent.daemon;
        wait_for(
            &format!("{} to count {want} {FOREIGN_RECORDS}", daemon.name),
            LONG,
            || async move {
                let counted = daemon.metric_series(FOREIGN_RECORDS).await?;
                Ok((counted == want).then_some(()))
            },
        )
        .await?;
    }
    Ok(())
}

/// `cluster`'s ServiceImport `name`: its IPs and ports, and its slices' addresses by source.
async fn import_and_ports(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
) -> anyhow::Result<(StoredImport, Vec<i32>)> {
    let imports: Api<ServiceImport> = Api::namespaced(cluster.client.clone(), namespace);
    let ports = imports
        .get(name)
        .await?
        .spec
        .ports
        .iter()
        .map(|p| p.port)
        .collect();
    let stored = read_import(cluster, namespace, name)
        .await?
        .with_context(|| format!("{} has no import of {name}", cluster.id))?;
    Ok((stored, ports))
}

/// What of east's heartbeat Lease a takeover or a reset would change: its UID, holder, acquire
/// time and transitions (the renew time and resourceVersion move with every heartbeat).
fn lease_identity(lease: &k8s_openapi::api::coordination::v1::Lease) -> serde_json::Value {
    let spec = lease.spec.clone().unwrap_or_default();
    json!({
        "uid": lease.metadata.uid, "holder": spec.holder_identity,
        "acquireTime": spec.acquire_time, "transitions": spec.lease_transitions,
    })
}

/// Broker write isolation on the real hub, with the agents running: west's hub credentials
/// (ServiceAccount `agent-west`, as west's agent uses them) are refused, with the 403 that
/// `kube_syntax::status::forbidden` builds, every write to east's record and east's Lease and
/// every new Lease; what they may write, a record claiming to be east's in west's own records
/// namespace, both agents ignore and count, and the imports do not change; east's record and
/// Lease are the same objects afterwards, and re-applying hub.yaml keeps the Lease's holder.
pub async fn a_member_can_speak_only_for_itself(world: &mut World) -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    use kube::api::PostParams;
    use kube_syntax::status::Denied;
    use mcs_controller::broker::{BrokerRecord, lease_name};

    let namespace = world.namespace("e2e-isolation").await?;
    let (east, west) = (world.east.clone(), world.west.clone());
    let (broker, east_records_ns, west_records_ns) = (
        crate::BROKER_NAMESPACE,
        crate::records_namespace(&east.id)?,
        crate::records_namespace(&west.id)?,
    );

    // 1. East exports web: its record is in east's records namespace, west imports it.
    export_service(&east, &namespace, "web", 80).await?;
    imported(&west, &namespace, "web", &["east"]).await?;
    let web_west = import_and_ports(&west, &namespace, "web").await?;
    let web_east = imported(&east, &namespace, "web", &["east"]).await?;
    let record_name = format!("east.{namespace}.web");
    let hub_records: Api<BrokerRecord> = Api::namespaced(east.client.clone(), &east_records_ns);
    let record = wait_for(
        &format!("east's record {record_name} in {east_records_ns}"),
        LONG,
        || {
            let (api, name) = (hub_records.clone(), record_name.clone());
            async move { Ok(api.get_opt(&name).await?) }
        },
    )
    .await?;
    let hub_leases: Api<Lease> = Api::namespaced(east.client.clone(), broker);
    let east_lease = lease_name(&mcs_types::ClusterId::new(&east.id)?);
    let lease_before = hub_leases.get(&east_lease).await?;
    assert!(
        lease_before
            .spec
            .as_ref()
            .and_then(|s| s.holder_identity.as_ref())
            .is_some_and(|h| h.starts_with("e2e-agent-east-")),
        "east's agent does not hold its Lease: {:?}",
        lease_before.spec
    );
    println!(
        "east's record {east_records_ns}/{record_name} imported in west: {:?}, ports {:?}",
        web_west.0.0, web_west.1
    );

    // 2. As west on the hub: every write to east's record or Lease, and any new Lease, is
    //    refused with RBAC's 403.
    let west_hub = crate::kubeconfig_client(&world.agents[1].broker_kubeconfig).await?;
    let user = mcs_controller::hub::service_account_user(
        broker,
        &mcs_types::ClusterId::new(&world.west.id)?,
    );
    let records = |verb, name, namespace| Denied {
        user: &user,
        verb,
        group: "clusterset.io",
        plural: "exportrecords",
        name,
        namespace,
    };
    let leases = |verb, name| Denied {
        user: &user,
        verb,
        group: "coordination.k8s.io",
        plural: "leases",
        name,
        namespace: broker,
    };
    let east_record = record.checked_record().map_err(anyhow::Error::msg)?.clone();
    let mut lying = east_record.clone();
    lying.global_ips = vec!["242.2.254.254".parse()?];
    for port in &mut lying.service.ports {
        port.port = 9090;
    }
    let now = k8s_openapi::jiff::Timestamp::now();
    let in_east = BrokerRecord::new(lying.clone(), &east_records_ns, now);
    let as_west_in_east: Api<BrokerRecord> = Api::namespaced(west_hub.clone(), &east_records_ns);
    let as_west_shared: Api<BrokerRecord> = Api::namespaced(west_hub.clone(), broker);
    let as_west_leases: Api<Lease> = Api::namespaced(west_hub.clone(), broker);
    let forger = PatchParams::apply("e2e-west-forger").force();
    assert_forbidden(
        "server-side apply of east's record",
        as_west_in_east
            .patch(&record_name, &forger, &Patch::Apply(&in_east))
            .await,
        &records("patch", &record_name, &east_records_ns),
    );
    assert_forbidden(
        "delete east's record",
        as_west_in_east
            .delete(&record_name, &DeleteParams::default())
            .await,
        &records("delete", &record_name, &east_records_ns),
    );
    assert_forbidden(
        "create a record named as east's in east's namespace",
        as_west_in_east
            .create(&PostParams::default(), &in_east)
            .await,
        &records("create", "", &east_records_ns),
    );
    assert_forbidden(
        "create east's record in the shared broker namespace",
        as_west_shared
            .create(
                &PostParams::default(),
                &BrokerRecord::new(lying.clone(), broker, now),
            )
            .await,
        &records("create", "", broker),
    );
    // West may read every Lease (to see who is alive), so it can try to write what it read.
    let mut taken = as_west_leases.get(&east_lease).await?;
    if let Some(spec) = taken.spec.as_mut() {
        spec.holder_identity = Some("agent-west".to_owned());
    }
    assert_forbidden(
        "update east's Lease",
        as_west_leases
            .replace(&east_lease, &PostParams::default(), &taken)
            .await,
        &leases("update", &east_lease),
    );
    let takeover = json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": east_lease, "namespace": broker},
        "spec": {"holderIdentity": "agent-west"},
    });
    assert_forbidden(
        "server-side apply of east's Lease",
        as_west_leases
            .patch(&east_lease, &forger, &Patch::Apply(&takeover))
            .await,
        &leases("patch", &east_lease),
    );
    assert_forbidden(
        "delete east's Lease",
        as_west_leases
            .delete(&east_lease, &DeleteParams::default())
            .await,
        &leases("delete", &east_lease),
    );
    let new_lease: Lease = serde_json::from_value(json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": "clusterset-agent-north", "namespace": broker,
            "labels": {mcs_controller::broker::CLUSTER_ID_LABEL: "east"}},
        "spec": {"holderIdentity": "agent-west"},
    }))?;
    assert_forbidden(
        "create a new Lease in the broker namespace",
        as_west_leases
            .create(&PostParams::default(), &new_lease)
            .await,
        &leases("create", ""),
    );

    // 3. What RBAC allows west: records claiming to be east's, in west's own namespace (east's
    //    web with other IPs and ports, and a service east does not export). Both agents ignore
    //    and count them, and nothing changes in the imports.
    let as_west_own: Api<BrokerRecord> = Api::namespaced(west_hub.clone(), &west_records_ns);
    let mut other = east_record.clone();
    other.service_key.name = "forged".to_owned();
    let forged = [
        BrokerRecord::new(lying, &west_records_ns, now),
        BrokerRecord::new(other, &west_records_ns, now),
    ];
    for record in &forged {
        let name = record.metadata.name.clone().unwrap_or_default();
        as_west_own
            .patch(&name, &forger, &Patch::Apply(record))
            .await
            .with_context(|| format!("west cannot write {name} into its own {west_records_ns}"))?;
        println!("written with west's credentials: {west_records_ns}/{name}");
    }
    foreign_records(&world.agents, 2.0).await?;
    println!(
        "both agents ignore and count the 2 records west wrote as east's ({FOREIGN_RECORDS} 2)"
    );
    // A change exported after the forgeries reaches west: the agents' passes since then had the
    // forged records in view, and any import they would have changed is written by now.
    export_service(&east, &namespace, "after", 81).await?;
    imported(&west, &namespace, "after", &["east"]).await?;
    assert_eq!(
        import_and_ports(&west, &namespace, "web").await?,
        web_west,
        "west's import of east's web changed after the forged records"
    );
    assert_eq!(
        imported(&east, &namespace, "web", &["east"]).await?,
        web_east,
        "east's import of web changed after the forged records"
    );
    for cluster in [&east, &west] {
        let imports: Api<ServiceImport> = Api::namespaced(cluster.client.clone(), &namespace);
        assert!(
            imports.get_opt("forged").await?.is_none(),
            "{} imported the service only a forged record names",
            cluster.id
        );
    }
    for agent in &world.agents {
        let log = agent.daemon.log();
        assert!(
            log.contains(&format!("stored in namespace {west_records_ns}")),
            "{} did not log the forged records",
            agent.daemon.name
        );
    }
    println!(
        "imports unchanged (web in west: {:?}), no import of forged",
        web_west.0
    );
    for record in &forged {
        let name = record.metadata.name.clone().unwrap_or_default();
        as_west_own.delete(&name, &DeleteParams::default()).await?;
    }
    foreign_records(&world.agents, 0.0).await?;
    println!("forged records deleted: {FOREIGN_RECORDS} 0 in both agents");

    // 4. Re-applying the hub's manifests (as an admin would) keeps the Lease an agent holds.
    crate::apply_hub(&east).await?;
    let record_after = hub_records.get(&record_name).await?;
    assert_eq!(
        (
            &record_after.metadata.uid,
            &record_after.metadata.resource_version
        ),
        (&record.metadata.uid, &record.metadata.resource_version),
        "east's record was changed or made again"
    );
    let lease_after = hub_leases.get(&east_lease).await?;
    assert_eq!(
        lease_identity(&lease_after),
        lease_identity(&lease_before),
        "east's Lease was taken over, reset or made again"
    );
    assert!(
        hub_leases
            .get_opt("clusterset-agent-north")
            .await?
            .is_none(),
        "a Lease west tried to create exists"
    );
    println!(
        "east's record (resourceVersion {}) and Lease ({}) unchanged, also after hub.yaml was applied again",
        record_after.metadata.resource_version.unwrap_or_default(),
        lease_identity(&lease_after)
    );
    Ok(())
}

/// Waits until west's agent sees every cluster heartbeat (`clusterset_agent_stale_clusters 0`)
/// and every import of `namespace` in west says so (`clusterset.io/StaleClusters=False`), with
/// its write count steady over two reads a second apart.
async fn settled_after_outage(world: &World, namespace: &str) -> anyhow::Result<()> {
    let agent = &world.agents[1].daemon;
    let imports: Api<ServiceImport> = Api::namespaced(world.west.client.clone(), namespace);
    crate::wait_for(
        "west's agent to see every cluster heartbeat again after the outage",
        Duration::from_secs(120),
        || async {
            if agent.metric("clusterset_agent_stale_clusters").await? != 0.0 {
                return Ok(None);
            }
            let all_fresh = imports
                .list(&Default::default())
                .await?
                .items
                .iter()
                .all(|i| {
                    i.status.as_ref().is_some_and(|s| {
                        s.conditions.iter().any(|c| {
                            c.type_ == "clusterset.io/StaleClusters" && c.status == "False"
                        })
                    })
                });
            let first = agent.metric("clusterset_agent_writes_total").await?;
            tokio::time::sleep(Duration::from_secs(1)).await;
            let second = agent.metric("clusterset_agent_writes_total").await?;
            Ok((all_fresh && first == second).then_some(()))
        },
    )
    .await
}

/// The holder of the agents' leader Lease in `cluster` (`clusterset-system/clusterset-agent`).
async fn agent_leader(cluster: &Cluster) -> anyhow::Result<Option<String>> {
    let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
        Api::namespaced(cluster.client.clone(), crate::AGENT_NAMESPACE);
    Ok(leases
        .get_opt("clusterset-agent")
        .await?
        .and_then(|l| l.spec?.holder_identity)
        .filter(|h| !h.is_empty()))
}

/// Waits until `agent`'s own DNS server answers `name` with exactly `ips`.
async fn answers(agent: &Agent, name: &str, ips: &[String]) -> anyhow::Result<()> {
    let (dns, agent_name) = (agent.dns, agent.daemon.name.clone());
    wait_for(
        &format!("{agent_name} to answer {name} with {ips:?}"),
        LONG,
        || {
            let name = name.to_owned();
            async move {
                let mut got = crate::dig(dns, &name, "A").await?;
                got.sort();
                Ok((got == ips).then_some(()))
            }
        },
    )
    .await
}

/// Two replicas of east's agent, as the chart runs them: one holds the leader Lease and writes,
/// both serve DNS from their own watches; the leader stopped (a rolling update), the other
/// leads within moments (the Lease is handed back, not left to expire) and writes what comes
/// next; the stopped replica started again follows.
pub async fn agent_replicas_one_leads_all_serve_dns(world: &mut World) -> anyhow::Result<()> {
    let namespace = world.namespace("e2e-replicas").await?;
    let (east, west) = (world.east.clone(), world.west.clone());
    let local = east
        .service_account_kubeconfig(crate::AGENT_NAMESPACE, "clusterset-agent", world.dir.path())
        .await?;
    let broker = east
        .service_account_kubeconfig(
            crate::BROKER_NAMESPACE,
            &format!("agent-{}", east.id),
            world.dir.path(),
        )
        .await?;
    let mut second = Agent::replica(
        &world.settings,
        &east,
        1,
        &local,
        &broker,
        &world.logs,
        "-b",
    )?;
    second.start().await?;
    let result = replicas(world, &east, &west, &namespace, &mut second).await;
    second.daemon.terminate().await?;
    if result.is_err() {
        eprintln!("{}", second.daemon.failure_report());
    }
    result
}

async fn replicas(
    world: &mut World,
    east: &Cluster,
    west: &Cluster,
    namespace: &str,
    second: &mut Agent,
) -> anyhow::Result<()> {
    let first = &mut world.agents[0];
    // 1. The first replica, started alone, leads; the second follows.
    let leader = agent_leader(east).await?;
    assert!(
        leader
            .as_deref()
            .is_some_and(|h| h.starts_with("e2e-agent-east-") && !h.ends_with("-b")),
        "the first replica leads: {leader:?}"
    );
    assert_eq!(first.daemon.metric("clusterset_agent_leader").await?, 1.0);
    assert_eq!(second.daemon.metric("clusterset_agent_leader").await?, 0.0);

    // 2. West exports web: east's leader imports it, and both of east's replicas answer for it.
    export_service(west, namespace, "web", 80).await?;
    let (web_ips, _) = imported(east, namespace, "web", &["west"]).await?;
    let web = format!("web.{namespace}.svc.clusterset.local");
    answers(first, &web, &web_ips).await?;
    answers(second, &web, &web_ips).await?;
    let writes_of_follower = second
        .daemon
        .metric("clusterset_agent_writes_total")
        .await?;
    assert_eq!(writes_of_follower, 0.0, "the follower wrote");
    println!("two replicas of east's agent: one leads, both answer {web} with {web_ips:?}");

    // 3. The leader is stopped as a rollout stops it: the other replica leads at once.
    let stopped = Instant::now();
    first.daemon.terminate().await?;
    wait_for("the second replica to lead", LONG, || async {
        Ok((second.daemon.metric("clusterset_agent_leader").await? == 1.0).then_some(()))
    })
    .await?;
    let took = stopped.elapsed();
    assert!(
        took < Duration::from_secs(15),
        "the handover took {took:?}, the leader Lease's duration: it was not handed back"
    );
    let leader = agent_leader(east).await?;
    assert!(
        leader.as_deref().is_some_and(|h| h.ends_with("-b")),
        "{leader:?}"
    );
    println!("leader stopped: the second replica led after {took:?}");

    // 4. The new leader writes what comes next; its DNS answers it; the old one's import kept
    //    its IPs.
    export_service(west, namespace, "api", 8080).await?;
    let (api_ips, _) = imported(east, namespace, "api", &["west"]).await?;
    answers(
        second,
        &format!("api.{namespace}.svc.clusterset.local"),
        &api_ips,
    )
    .await?;
    let (web_again, _) = imported(east, namespace, "web", &["west"]).await?;
    assert_eq!(
        web_again, web_ips,
        "the new leader kept web's clusterset IP"
    );
    assert!(
        second
            .daemon
            .metric("clusterset_agent_writes_total")
            .await?
            > 0.0
    );

    // 5. The first replica started again follows, and serves both names.
    first.start().await?;
    assert_eq!(first.daemon.metric("clusterset_agent_leader").await?, 0.0);
    answers(first, &web, &web_ips).await?;
    answers(
        first,
        &format!("api.{namespace}.svc.clusterset.local"),
        &api_ips,
    )
    .await?;
    Ok(())
}

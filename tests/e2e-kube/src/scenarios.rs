//! The scenarios of the end-to-end tests, each on a [`World`] of two real clusters with an
//! agent in each: what `tests/e2e.rs` runs. They are tests: a failed assertion (a panic) is
//! their result, so the workspace's no-panic lints do not apply here.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::Context;
use futures::StreamExt;
use k8s_openapi::api::core::v1::{Pod, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::watcher;
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use serde_json::json;

use crate::{Agent, Cluster, Settings, World, wait_for};

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

/// A pod behind the Service; on API servers without nodes it is marked Running and Ready as a
/// kubelet would (`CLUSTERSET_E2E_MARK_PODS_READY`).
async fn backend(cluster: &Cluster, namespace: &str, settings: &Settings) -> anyhow::Result<()> {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "web-0", "namespace": namespace, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.9"}]},
    });
    if settings.mark_pods_ready {
        pod["spec"]["nodeName"] = json!("e2e-no-node");
    }
    cluster.apply(&pod).await?;
    if settings.mark_pods_ready {
        let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), namespace);
        let now = "2026-01-01T00:00:00Z";
        let status = json!({
            "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "web-0", "namespace": namespace},
            "status": {"phase": "Running", "podIP": "10.0.0.10", "podIPs": [{"ip": "10.0.0.10"}],
                "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now}]},
        });
        pods.patch_status(
            "web-0",
            &PatchParams::apply("e2e-kubelet").force(),
            &Patch::Apply(&status),
        )
        .await?;
    }
    Ok(())
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

/// Everything deleted in `namespace` of `cluster` while the recorder runs.
fn record_deletions(cluster: &Cluster, namespace: &str) -> Arc<Mutex<Vec<String>>> {
    let deleted = Arc::new(Mutex::new(Vec::new()));
    let imports: Api<ServiceImport> = Api::namespaced(cluster.client.clone(), namespace);
    let slices: Api<EndpointSlice> = Api::namespaced(cluster.client.clone(), namespace);
    let (a, b) = (Arc::clone(&deleted), Arc::clone(&deleted));
    let id = cluster.id.clone();
    let id2 = id.clone();
    tokio::spawn(async move {
        let mut events = watcher(imports, watcher::Config::default()).boxed();
        while let Some(Ok(event)) = events.next().await {
            if let watcher::Event::Delete(import) = event {
                a.lock()
                    .unwrap()
                    .push(format!("{id}: ServiceImport {:?}", import.metadata.name));
            }
        }
    });
    tokio::spawn(async move {
        let mut events = watcher(slices, watcher::Config::default()).boxed();
        while let Some(Ok(event)) = events.next().await {
            if let watcher::Event::Delete(slice) = event {
                b.lock()
                    .unwrap()
                    .push(format!("{id2}: EndpointSlice {:?}", slice.metadata.name));
            }
        }
    });
    deleted
}

/// The addresses of the imported EndpointSlices of `web` (by source cluster) and the import's IPs.
async fn addresses(
    cluster: &Cluster,
    namespace: &str,
) -> anyhow::Result<(Vec<String>, BTreeMap<String, Vec<String>>)> {
    let imports: Api<ServiceImport> = Api::namespaced(cluster.client.clone(), namespace);
    let ips = imports.get("web").await?.spec.ips;
    let slices: Api<EndpointSlice> = Api::namespaced(cluster.client.clone(), namespace);
    let mut by_source = BTreeMap::new();
    for slice in slices
        .list(&ListParams::default().labels("multicluster.kubernetes.io/service-name=web"))
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
    Ok((ips, by_source))
}

/// Export in east -> import in west (timed) -> DNS answer -> a port conflict on both exports ->
/// east's agent killed and restarted (every IP kept, nothing deleted) -> unexport removes the
/// imports in both clusters.
pub async fn export_import_conflict_restart_unexport(world: &mut World) -> anyhow::Result<()> {
    let namespace = world.namespace("e2e-mcs").await?;
    let (east, west) = (world.east.clone(), world.west.clone());
    scenario(&world.settings, &east, &west, &mut world.agents, &namespace).await
}

async fn scenario(
    settings: &Settings,
    east: &Cluster,
    west: &Cluster,
    agents: &mut [Agent],
    namespace: &str,
) -> anyhow::Result<()> {
    // 1. Export in east -> ServiceImport in west (and in east), timed.
    east.apply(&service(namespace, 80)).await?;
    backend(east, namespace, settings).await?;
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
    let deleted_east = record_deletions(east, namespace);
    let deleted_west = record_deletions(west, namespace);
    agents[0].daemon.kill().await?;
    let restarted = Instant::now();
    agents[0].daemon.start().await?;
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
    let deleted: Vec<String> = deleted_east
        .lock()
        .unwrap()
        .iter()
        .chain(deleted_west.lock().unwrap().iter())
        .cloned()
        .collect();
    assert!(
        deleted.is_empty(),
        "deleted during the restart: {deleted:?}"
    );
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

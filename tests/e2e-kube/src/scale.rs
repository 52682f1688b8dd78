//! The scale benchmark on real API servers (`cargo run --release -p clusterset-e2e --bin
//! scale`, docs/benchmarks.md), and the counts its small run checks in CI
//! (`scale_counts_at_small_size` in `tests/e2e.rs`).
//!
//! Two runs, each in a [`World`] (two clusters, an agent in each):
//! - [`operator_run`]: a Rook layout of N OSD Deployments (`per_domain` per failure domain, all
//!   available, as Rook leaves them), then the operator starts: the time until every OSD
//!   Deployment advertises its global IP and has rolled out, until every OSD export is imported
//!   in west and until every export is Valid and Ready; per failure domain the gap between the
//!   previous domain's rollout finished and the domain's first write; the status object's size;
//!   every daemon's writes (its own `writes_total` by operation) and the API servers' requests
//!   by verb and resource with their server-side time (`apiserver_request_*` on `/metrics`: the
//!   API server does not say which client made them); peak RSS and CPU of each daemon; writes in
//!   an idle window after convergence.
//! - [`exports_run`]: N Services with their ServiceExports created at once (32 in flight) in
//!   east until all are imported in west, then `singles` exports one at a time (p50 and p99 from
//!   the create to the import in west); the agents' writes per export; writes when idle.
//!
//! Times come from watches (kube-runtime's watcher, each event stamped when it arrives), not
//! from polling lists.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use futures::{StreamExt, TryStreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use kube::api::{Api, DynamicObject, PostParams};
use kube::runtime::watcher;
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use serde_json::json;

use crate::scenarios::{
    ensure_ceph_cluster_crd, operator_in_east, public_addr, rook_layout_in_domains,
};
use crate::{Cluster, Daemon, Resources, World};

/// What one operator run measured.
#[derive(Debug, Clone)]
pub struct OperatorReport {
    /// OSDs in the layout.
    pub osds: u32,
    /// Failure domains.
    pub domains: u32,
    /// Operator start → every OSD Deployment has `--public-addr=<global IP>` and has rolled out.
    pub to_global_ips: Duration,
    /// Operator start → every OSD export imported in west.
    pub to_imported: Duration,
    /// Operator start → every OSD export Valid and Ready.
    pub to_valid_ready: Duration,
    /// Per failure domain after the first: from the previous domain's rollout finished to this
    /// domain's first write (negative gaps, a write before the previous rollout finished, are
    /// counted as such in `overlapping_domains`).
    pub domain_gaps: Vec<Duration>,
    /// Domains written before the previous one had rolled out (must be 0: one at a time).
    pub overlapping_domains: usize,
    /// The CephClusterAddressing as stored (with managedFields), bytes.
    pub status_bytes: usize,
    /// The same without managedFields.
    pub status_bytes_without_managed_fields: usize,
    /// The operator's writes by operation.
    pub operator_writes: BTreeMap<String, f64>,
    /// Each agent's writes by operation (east, west), during the run.
    pub agent_writes: [BTreeMap<String, f64>; 2],
    /// Each API server's requests (east, west) by `VERB resource`: count and seconds.
    pub api_requests: [BTreeMap<String, (f64, f64)>; 2],
    /// The operator's resources at the end.
    pub operator: Resources,
    /// The agents' resources at the end (east, west).
    pub agents: [Resources; 2],
    /// Writes of the operator and both agents in the idle window.
    pub idle_writes: f64,
    /// The idle window.
    pub idle: Duration,
}

/// What one exports run measured.
#[derive(Debug, Clone)]
pub struct ExportsReport {
    /// Exports created at once.
    pub exports: u32,
    /// From the first create to every export imported in west.
    pub to_all_imported: Duration,
    /// Each agent's writes by operation (east, west) for those exports.
    pub agent_writes: [BTreeMap<String, f64>; 2],
    /// The exports made one at a time, each from its create to its import in west, sorted.
    pub singles: Vec<Duration>,
    /// Writes of both agents in the idle window.
    pub idle_writes: f64,
    /// The idle window.
    pub idle: Duration,
    /// The agents' resources at the end (east, west).
    pub agents: [Resources; 2],
    /// What a watch on east's ServiceExports saw of the bulk's statuses, up to when the
    /// agents' writes were counted.
    pub export_statuses: StatusHistory,
}

/// What a watch saw of the statuses of a set of ServiceExports: how often each one's status
/// changed, and how often a condition got a new `lastTransitionTime` while its status stayed
/// (the Kubernetes condition convention forbids that: a rewrite of the same status).
#[derive(Debug, Default, Clone)]
pub struct StatusHistory {
    /// Conditions seen with a new `lastTransitionTime` and the same status, per export.
    pub transition_rewrites: BTreeMap<String, u32>,
    /// Per export, the statuses it went through (one per event that changed its status, the
    /// first status included), each as `type=status/reason` of its conditions.
    pub sequences: BTreeMap<String, Vec<String>>,
}

impl StatusHistory {
    /// Status changes of all the exports.
    pub fn total_changes(&self) -> usize {
        self.sequences.values().map(Vec::len).sum()
    }

    /// Conditions rewritten with a new `lastTransitionTime` and the same status, in all.
    pub fn total_transition_rewrites(&self) -> u32 {
        self.transition_rewrites.values().sum()
    }

    /// How many exports went through each sequence of statuses, the commonest first.
    pub fn sequence_counts(&self) -> Vec<(String, u32)> {
        let mut counts: BTreeMap<String, u32> = BTreeMap::new();
        for sequence in self.sequences.values() {
            *counts.entry(sequence.join(" -> ")).or_insert(0) += 1;
        }
        let mut counts: Vec<(String, u32)> = counts.into_iter().collect();
        counts.sort_by(|a, b| b.1.cmp(&a.1).then_with(|| a.0.cmp(&b.0)));
        counts
    }

    /// How many exports had each number of status changes (`{1: 3, 2: 197}`).
    pub fn distribution(&self) -> BTreeMap<usize, u32> {
        let mut counts = BTreeMap::new();
        for sequence in self.sequences.values() {
            *counts.entry(sequence.len()).or_insert(0) += 1;
        }
        counts
    }

    /// Takes in one observed object's status conditions, after `previous` (the export's
    /// conditions seen last, if any).
    fn observe(&mut self, name: &str, previous: Option<&[Condition]>, now: &[Condition]) {
        if previous.is_none_or(|p| p != now) && !(previous.is_none() && now.is_empty()) {
            let summary: Vec<String> = now
                .iter()
                .map(|c| format!("{}={}/{}", c.type_, c.status, c.reason))
                .collect();
            self.sequences
                .entry(name.to_owned())
                .or_default()
                .push(summary.join(","));
        }
        let Some(previous) = previous else { return };
        for condition in now {
            let rewritten = previous.iter().any(|p| {
                p.type_ == condition.type_
                    && p.status == condition.status
                    && p.last_transition_time != condition.last_transition_time
            });
            if rewritten {
                *self.transition_rewrites.entry(name.to_owned()).or_insert(0) += 1;
            }
        }
    }
}

/// Watches the ServiceExports of `api` and records their status history until aborted.
fn watch_statuses(
    api: Api<ServiceExport>,
) -> (Arc<Mutex<StatusHistory>>, tokio::task::JoinHandle<()>) {
    let history: Arc<Mutex<StatusHistory>> = Arc::default();
    let shared = Arc::clone(&history);
    let task = tokio::spawn(async move {
        let mut last: BTreeMap<String, Vec<Condition>> = BTreeMap::new();
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let export = match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                _ => continue,
            };
            let Some(name) = export.metadata.name.clone() else {
                continue;
            };
            let conditions = export.status.map(|s| s.conditions).unwrap_or_default();
            shared
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .observe(&name, last.get(&name).map(Vec::as_slice), &conditions);
            last.insert(name, conditions);
        }
    });
    (history, task)
}

/// When each watched object was first seen meeting a condition: `Apply` events of a watcher,
/// stamped on arrival.
#[derive(Debug, Default)]
struct Stamps {
    first_seen: BTreeMap<String, Instant>,
}

type SharedStamps = Arc<Mutex<Stamps>>;

fn lock(stamps: &SharedStamps) -> std::sync::MutexGuard<'_, Stamps> {
    stamps
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Watches `api` and stamps, per object name, the first event whose object `holds`; runs until
/// the returned handle is aborted.
fn stamp_when<K>(
    api: Api<K>,
    holds: impl Fn(&K) -> Option<String> + Send + 'static,
) -> (SharedStamps, tokio::task::JoinHandle<()>)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let (mut stamps, task) = stamp_each(api, vec![Box::new(holds)]);
    (stamps.remove(0), task)
}

/// A condition of [`stamp_each`]: the key to stamp when the object meets it.
type Holds<K> = Box<dyn Fn(&K) -> Option<String> + Send>;

/// [`stamp_when`] for several conditions on one watch (their stamps are ordered exactly as the
/// events arrived); one set of stamps per condition.
fn stamp_each<K>(
    api: Api<K>,
    conditions: Vec<Holds<K>>,
) -> (Vec<SharedStamps>, tokio::task::JoinHandle<()>)
where
    K: kube::Resource + Clone + std::fmt::Debug + serde::de::DeserializeOwned + Send + 'static,
{
    let stamps: Vec<SharedStamps> = conditions.iter().map(|_| Arc::default()).collect();
    let shared = stamps.clone();
    let task = tokio::spawn(async move {
        let mut events = std::pin::pin!(watcher(api, watcher::Config::default()));
        while let Some(event) = events.next().await {
            let now = Instant::now();
            let object = match event {
                Ok(watcher::Event::Apply(o) | watcher::Event::InitApply(o)) => o,
                _ => continue,
            };
            for (holds, stamps) in conditions.iter().zip(&shared) {
                if let Some(key) = holds(&object) {
                    lock(stamps).first_seen.entry(key).or_insert(now);
                }
            }
        }
    });
    (stamps, task)
}

/// Waits (up to `limit`) until `stamps` holds `count` keys; the instant the last arrived.
async fn all_stamped(
    stamps: &SharedStamps,
    count: usize,
    what: &str,
    limit: Duration,
) -> anyhow::Result<Instant> {
    let deadline = Instant::now() + limit;
    loop {
        {
            let stamps = lock(stamps);
            if stamps.first_seen.len() >= count {
                return stamps
                    .first_seen
                    .values()
                    .max()
                    .copied()
                    .context("no stamp");
            }
            if Instant::now() > deadline {
                bail!(
                    "gave up after {limit:?} waiting for {what}: {} of {count}",
                    stamps.first_seen.len()
                );
            }
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The counter family `writes_total` of a daemon (`clusterset_agent_writes_total`,
/// `mcs_ceph_operator_writes_total`) by its `operation` label.
async fn writes_by_operation(
    daemon: &Daemon,
    family: &str,
) -> anyhow::Result<BTreeMap<String, f64>> {
    let mut out = BTreeMap::new();
    for line in daemon.metric_lines(family).await? {
        let operation = label(&line, "operation").unwrap_or_default();
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        *out.entry(operation).or_insert(0.0) += value;
    }
    Ok(out)
}

/// The value of label `name` in a Prometheus text line.
fn label(line: &str, name: &str) -> Option<String> {
    let start = line.find(&format!("{name}=\""))? + name.len() + 2;
    let rest = &line[start..];
    Some(rest[..rest.find('"')?].to_owned())
}

/// `after - before`, per key, dropping zeros.
fn delta(after: &BTreeMap<String, f64>, before: &BTreeMap<String, f64>) -> BTreeMap<String, f64> {
    after
        .iter()
        .map(|(k, v)| (k.clone(), v - before.get(k).copied().unwrap_or(0.0)))
        .filter(|(_, v)| *v != 0.0)
        .collect()
}

/// The API server's requests so far by `VERB resource[/subresource]` (WATCH excluded: a watch
/// lasts as long as its client): count and seconds, from `apiserver_request_total` and
/// `apiserver_request_duration_seconds_sum` on its `/metrics`.
async fn api_requests(cluster: &Cluster) -> anyhow::Result<BTreeMap<String, (f64, f64)>> {
    let request = http::Request::get("/metrics").body(Vec::new())?;
    let text = cluster.client.request_text(request).await?;
    let mut out: BTreeMap<String, (f64, f64)> = BTreeMap::new();
    for line in text.lines().filter(|l| !l.starts_with('#')) {
        let (is_count, is_sum) = (
            line.starts_with("apiserver_request_total{"),
            line.starts_with("apiserver_request_duration_seconds_sum{"),
        );
        if !is_count && !is_sum {
            continue;
        }
        let verb = label(line, "verb").unwrap_or_default();
        if verb == "WATCH" || verb == "CONNECT" {
            continue;
        }
        let mut resource = label(line, "resource").unwrap_or_default();
        if resource.is_empty() {
            continue;
        }
        if let Some(sub) = label(line, "subresource").filter(|s| !s.is_empty()) {
            resource = format!("{resource}/{sub}");
        }
        let value: f64 = line
            .rsplit(' ')
            .next()
            .and_then(|v| v.parse().ok())
            .unwrap_or(0.0);
        let entry = out.entry(format!("{verb} {resource}")).or_default();
        if is_count {
            entry.0 += value;
        } else {
            entry.1 += value;
        }
    }
    Ok(out)
}

fn api_delta(
    after: &BTreeMap<String, (f64, f64)>,
    before: &BTreeMap<String, (f64, f64)>,
) -> BTreeMap<String, (f64, f64)> {
    after
        .iter()
        .map(|(k, (n, s))| {
            let (n0, s0) = before.get(k).copied().unwrap_or_default();
            (k.clone(), (n - n0, s - s0))
        })
        .filter(|(_, (n, _))| *n > 0.0)
        .collect()
}

/// Waits (up to `limit`) until no namespace of an earlier run (`e2e-scale...`, not one of
/// this world's own) is left in either cluster, then until the agents are quiet: the deletion
/// of an earlier run's exports would otherwise be counted in this run's writes.
async fn earlier_runs_gone(world: &World, limit: Duration) -> anyhow::Result<()> {
    use k8s_openapi::api::core::v1::Namespace;
    let started = Instant::now();
    let own: Vec<String> = world.namespaces().to_vec();
    for cluster in [&world.east, &world.west] {
        let namespaces: Api<Namespace> = Api::all(cluster.client.clone());
        crate::wait_for(
            &format!(
                "the namespaces of earlier scale runs to be gone from {}",
                cluster.id
            ),
            limit,
            || {
                let (namespaces, own) = (namespaces.clone(), own.clone());
                async move {
                    let list = namespaces.list(&Default::default()).await?;
                    let left = list.items.iter().any(|n| {
                        n.metadata.name.as_deref().is_some_and(|name| {
                            name.starts_with("e2e-scale") && !own.iter().any(|o| o == name)
                        })
                    });
                    Ok((!left).then_some(()))
                }
            },
        )
        .await?;
    }
    settle(world, Duration::from_secs(3), limit).await?;
    let took = started.elapsed();
    if took > Duration::from_secs(4) {
        println!("earlier runs cleaned up and the agents quiet after {took:.1?}");
    }
    Ok(())
}

const AGENT_WRITES: &str = "clusterset_agent_writes_total";

/// Each agent's writes so far by operation (east, west).
async fn agents_writes(world: &World) -> anyhow::Result<[BTreeMap<String, f64>; 2]> {
    Ok([
        writes_by_operation(&world.agents[0].daemon, AGENT_WRITES).await?,
        writes_by_operation(&world.agents[1].daemon, AGENT_WRITES).await?,
    ])
}

/// Each agent's writes by operation (east, west) since `before` ([`agents_writes`]).
async fn agents_writes_since(
    world: &World,
    before: &[BTreeMap<String, f64>; 2],
) -> anyhow::Result<[BTreeMap<String, f64>; 2]> {
    let now = agents_writes(world).await?;
    Ok([delta(&now[0], &before[0]), delta(&now[1], &before[1])])
}
const OPERATOR_WRITES: &str = "mcs_ceph_operator_writes_total";

/// The operator run: `osds` OSDs, `per_domain` per failure domain, `idle` of idle writes
/// counted after convergence; waits up to `limit` for each stage.
pub async fn operator_run(
    world: &mut World,
    osds: u32,
    per_domain: u32,
    idle: Duration,
    limit: Duration,
) -> anyhow::Result<OperatorReport> {
    earlier_runs_gone(world, limit).await?;
    let namespace = world.namespace("e2e-scale").await?;
    let (east, west) = (world.east.clone(), world.west.clone());
    ensure_ceph_cluster_crd(&east).await?;
    let laid_out = Instant::now();
    rook_layout_in_domains(&east, &namespace, osds, per_domain, limit).await?;
    println!(
        "Rook layout: {osds} OSD Deployments available in {:.1?}",
        laid_out.elapsed()
    );

    // One watch for both stamps of a Deployment: the order of a domain's write and the previous
    // domain's rollout is the order their events arrived in.
    let deployments: Api<Deployment> = Api::namespaced(east.client.clone(), &namespace);
    let written_on_global_ip: Holds<Deployment> = Box::new(|d: &Deployment| {
        public_addr(d)
            .filter(|ip| ip.starts_with("242."))
            .and(d.metadata.name.clone())
    });
    let rolled_out_on_global_ip: Holds<Deployment> = Box::new(|d: &Deployment| {
        let status = d.status.as_ref()?;
        let done = public_addr(d).is_some_and(|ip| ip.starts_with("242."))
            && status.observed_generation == d.metadata.generation
            && status.updated_replicas == Some(1)
            && status.available_replicas == Some(1)
            && status.replicas == Some(1);
        done.then(|| d.metadata.name.clone()).flatten()
    });
    let (stamps, deployments_task) = stamp_each(
        deployments,
        vec![written_on_global_ip, rolled_out_on_global_ip],
    );
    let (written, rolled) = (stamps[0].clone(), stamps[1].clone());
    let imports: Api<ServiceImport> = Api::namespaced(west.client.clone(), &namespace);
    let (imported, imported_task) = stamp_when(imports, |i: &ServiceImport| {
        i.metadata
            .name
            .clone()
            .filter(|n| n.starts_with("rook-ceph-osd-"))
    });
    let exports: Api<ServiceExport> = Api::namespaced(east.client.clone(), &namespace);
    let (valid, valid_task) = stamp_when(exports, |e: &ServiceExport| {
        let conditions = &e.status.as_ref()?.conditions;
        let is_true = |t: &str| {
            conditions
                .iter()
                .any(|c| c.type_ == t && c.status == "True")
        };
        (is_true("Valid") && is_true("Ready"))
            .then(|| e.metadata.name.clone())
            .flatten()
            .filter(|n| n.starts_with("rook-ceph-osd-"))
    });

    let agents_before = agents_writes(world).await?;
    let api_before = [api_requests(&east).await?, api_requests(&west).await?];
    let mut operator = operator_in_east(world, &namespace, "e2e-scale-operator", &[]).await?;
    let started = Instant::now();
    operator.start().await?;
    let count = usize::try_from(osds)?;
    let result = async {
        let all_rolled = all_stamped(
            &rolled,
            count,
            "every OSD rolled out on its global IP",
            limit,
        )
        .await?;
        let all_imported =
            all_stamped(&imported, count, "every OSD export imported in west", limit).await?;
        let all_valid =
            all_stamped(&valid, count, "every OSD export Valid and Ready", limit).await?;
        anyhow::Ok((all_rolled, all_imported, all_valid))
    }
    .await;
    for task in [deployments_task, imported_task, valid_task] {
        task.abort();
    }
    let (all_rolled, all_imported, all_valid) = match result {
        Ok(times) => times,
        Err(error) => {
            eprintln!("{}", operator.failure_report());
            operator.kill().await?;
            return Err(error);
        }
    };
    let (domain_gaps, overlapping_domains) = domain_gaps(
        &lock(&written).first_seen,
        &lock(&rolled).first_seen,
        per_domain,
    );

    // The status once converged (the operator writes the last rollout's outcome once more).
    let (status_bytes, status_bytes_without_managed_fields) =
        status_sizes(&east, &namespace).await?;
    let operator_writes = writes_by_operation(&operator, OPERATOR_WRITES).await?;
    let agent_writes = agents_writes_since(world, &agents_before).await?;
    let api_requests = [
        api_delta(&api_requests(&east).await?, &api_before[0]),
        api_delta(&api_requests(&west).await?, &api_before[1]),
    ];
    let idle_writes = idle_writes(world, Some(&operator), idle).await?;
    let report = OperatorReport {
        osds,
        domains: osds.div_ceil(per_domain.max(1)),
        to_global_ips: all_rolled - started,
        to_imported: all_imported - started,
        to_valid_ready: all_valid - started,
        domain_gaps,
        overlapping_domains,
        status_bytes,
        status_bytes_without_managed_fields,
        operator_writes,
        agent_writes,
        api_requests,
        operator: operator.resources()?,
        agents: [
            world.agents[0].daemon.resources()?,
            world.agents[1].daemon.resources()?,
        ],
        idle_writes,
        idle,
    };
    operator.terminate().await?;
    Ok(report)
}

/// Per failure domain after the first (in the order they were written): the gap from the
/// previous domain's last rollout finished to the domain's first write, and how many domains
/// were written before the previous one had finished.
fn domain_gaps(
    written: &BTreeMap<String, Instant>,
    rolled: &BTreeMap<String, Instant>,
    per_domain: u32,
) -> (Vec<Duration>, usize) {
    let domain_of = |name: &str| -> Option<u32> {
        let id: u32 = name.strip_prefix("rook-ceph-osd-")?.parse().ok()?;
        Some(id / per_domain.max(1))
    };
    let mut domains: BTreeMap<u32, (Instant, Instant)> = BTreeMap::new();
    for (name, at) in written {
        let (Some(domain), Some(done)) = (domain_of(name), rolled.get(name)) else {
            continue;
        };
        let entry = domains.entry(domain).or_insert((*at, *done));
        entry.0 = entry.0.min(*at);
        entry.1 = entry.1.max(*done);
    }
    let mut by_write: Vec<(Instant, Instant)> = domains.into_values().collect();
    by_write.sort();
    let mut gaps = Vec::new();
    let mut overlapping = 0;
    for pair in by_write.windows(2) {
        let (previous, next) = (pair[0], pair[1]);
        match next.0.checked_duration_since(previous.1) {
            Some(gap) => gaps.push(gap),
            None => overlapping += 1,
        }
    }
    (gaps, overlapping)
}

/// The CephClusterAddressing `my-cluster` as stored, and without managedFields, in bytes.
async fn status_sizes(cluster: &Cluster, namespace: &str) -> anyhow::Result<(usize, usize)> {
    let resource = kube::api::ApiResource::from_gvk_with_plural(
        &kube::core::GroupVersionKind::gvk("clusterset.io", "v1alpha1", "CephClusterAddressing"),
        "cephclusteraddressings",
    );
    let api: Api<DynamicObject> =
        Api::namespaced_with(cluster.client.clone(), namespace, &resource);
    let mut object = api.get("my-cluster").await?;
    let stored = serde_json::to_vec(&object)?.len();
    object.metadata.managed_fields = None;
    Ok((stored, serde_json::to_vec(&object)?.len()))
}

/// The writes of both agents (and the operator, when given) during `idle`.
async fn idle_writes(
    world: &World,
    operator: Option<&Daemon>,
    idle: Duration,
) -> anyhow::Result<f64> {
    let before = all_writes(world, operator).await?;
    // The idle window itself is what is measured: nothing changes during it.
    tokio::time::sleep(idle).await;
    Ok(all_writes(world, operator).await? - before)
}

/// The writes of both agents (and the operator, when given) so far.
async fn all_writes(world: &World, operator: Option<&Daemon>) -> anyhow::Result<f64> {
    let mut sum = world.agents[0].daemon.metric(AGENT_WRITES).await?
        + world.agents[1].daemon.metric(AGENT_WRITES).await?;
    if let Some(operator) = operator {
        sum += operator.metric(OPERATOR_WRITES).await?;
    }
    Ok(sum)
}

/// A Service `name` (ClusterIP, port 80, selecting `app=<name>`) and its ServiceExport.
async fn export(cluster: &Cluster, namespace: &str, name: &str) -> anyhow::Result<()> {
    let services: Api<Service> = Api::namespaced(cluster.client.clone(), namespace);
    let service: Service = serde_json::from_value(json!({
        "metadata": {"name": name},
        "spec": {"selector": {"app": name}, "ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    }))?;
    services
        .create(&PostParams::default(), &service)
        .await
        .with_context(|| format!("cannot create Service {namespace}/{name}"))?;
    let exports: Api<ServiceExport> = Api::namespaced(cluster.client.clone(), namespace);
    let export: ServiceExport = serde_json::from_value(json!({"metadata": {"name": name}}))?;
    exports
        .create(&PostParams::default(), &export)
        .await
        .with_context(|| format!("cannot create ServiceExport {namespace}/{name}"))?;
    Ok(())
}

/// The exports run: `exports` created at once (32 in flight) until all are imported in west,
/// then `singles` one at a time; `idle` of idle writes counted after.
pub async fn exports_run(
    world: &mut World,
    exports: u32,
    singles: u32,
    idle: Duration,
    limit: Duration,
) -> anyhow::Result<ExportsReport> {
    earlier_runs_gone(world, limit).await?;
    let namespace = world.namespace("e2e-scale-exports").await?;
    let (east, west) = (world.east.clone(), world.west.clone());
    let imports: Api<ServiceImport> = Api::namespaced(west.client.clone(), &namespace);
    let (imported, imported_task) =
        stamp_when(imports, |i: &ServiceImport| i.metadata.name.clone());
    let (statuses, statuses_task) =
        watch_statuses(Api::namespaced(east.client.clone(), &namespace));
    let before = agents_writes(world).await?;
    let started = Instant::now();
    futures::stream::iter((0..exports).map(|i| format!("bulk-{i}")))
        .map(|name| {
            let (east, namespace) = (east.clone(), namespace.clone());
            async move { export(&east, &namespace, &name).await }
        })
        .buffer_unordered(32)
        .try_collect::<Vec<()>>()
        .await?;
    let created = started.elapsed();
    let all = all_stamped(
        &imported,
        usize::try_from(exports)?,
        "every bulk export imported in west",
        limit,
    )
    .await?;
    let to_all_imported = all - started;
    println!(
        "{exports} exports created in {created:.1?} (32 in flight), all imported in west {to_all_imported:.1?} after the first create"
    );
    // Settled: the last status writes of the bulk go out before the counts are read.
    let quiet = settle(world, Duration::from_secs(3), limit).await?;
    println!("the agents were quiet again {quiet:.1?} later");
    let agent_writes = agents_writes_since(world, &before).await?;
    // The statuses the watch saw up to now (it has caught up: the agents were quiet for 3 s).
    statuses_task.abort();
    let export_statuses = statuses
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone();

    let mut single_times = Vec::new();
    for i in 0..singles {
        let name = format!("single-{i}");
        let start = Instant::now();
        export(&east, &namespace, &name).await?;
        let deadline = start + limit;
        loop {
            if let Some(at) = lock(&imported).first_seen.get(&name) {
                single_times.push(at.saturating_duration_since(start));
                break;
            }
            if Instant::now() > deadline {
                bail!("{name} was not imported in west within {limit:?}");
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }
    imported_task.abort();
    single_times.sort();
    settle(world, Duration::from_secs(3), limit).await?;
    let idle_writes = idle_writes(world, None, idle).await?;
    Ok(ExportsReport {
        exports,
        to_all_imported,
        agent_writes,
        singles: single_times,
        idle_writes,
        idle,
        agents: [
            world.agents[0].daemon.resources()?,
            world.agents[1].daemon.resources()?,
        ],
        export_statuses,
    })
}

/// Waits until neither agent has written for `quiet` (up to `limit`); how long that took.
async fn settle(world: &World, quiet: Duration, limit: Duration) -> anyhow::Result<Duration> {
    let started = Instant::now();
    let mut last = all_writes(world, None).await?;
    let mut since = Instant::now();
    loop {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = all_writes(world, None).await?;
        if now != last {
            last = now;
            since = Instant::now();
        } else if since.elapsed() >= quiet {
            return Ok(started.elapsed() - quiet);
        }
        if started.elapsed() > limit {
            bail!("the agents kept writing for {limit:?}");
        }
    }
}

/// The `q` quantile (0..=1) of sorted durations.
pub fn quantile(sorted: &[Duration], q: f64) -> Duration {
    if sorted.is_empty() {
        return Duration::ZERO;
    }
    let last = sorted.len() - 1;
    // Nearest rank.
    let rank = (q * last as f64).round();
    sorted[(rank as usize).min(last)]
}

/// Writes per export: `writes` (by operation) divided by `exports`, one line.
pub fn per_export(writes: &BTreeMap<String, f64>, exports: u32) -> String {
    let n = f64::from(exports.max(1));
    let total: f64 = writes.values().sum();
    let parts: Vec<String> = writes
        .iter()
        .map(|(op, v)| format!("{op} {:.2}", v / n))
        .collect();
    format!("{:.2} in all ({})", total / n, parts.join(", "))
}

/// The operator report, as the bench prints it.
pub fn print_operator(report: &OperatorReport) {
    let r = report;
    println!("== {} OSDs in {} failure domains", r.osds, r.domains);
    println!(
        "operator start -> every OSD Deployment on its global IP and rolled out: {:.1?}",
        r.to_global_ips
    );
    println!(
        "operator start -> every OSD export imported in west: {:.1?}",
        r.to_imported
    );
    println!(
        "operator start -> every OSD export Valid and Ready: {:.1?}",
        r.to_valid_ready
    );
    let mut gaps = r.domain_gaps.clone();
    gaps.sort();
    println!(
        "next failure domain written after the previous one rolled out: p50 {:.0?}, p99 {:.0?}, max {:.0?} ({} gaps; {} domains written before the previous one had rolled out)",
        quantile(&gaps, 0.5),
        quantile(&gaps, 0.99),
        gaps.last().copied().unwrap_or_default(),
        gaps.len(),
        r.overlapping_domains
    );
    println!(
        "CephClusterAddressing: {} bytes stored, {} without managedFields",
        r.status_bytes, r.status_bytes_without_managed_fields
    );
    println!("operator writes: {:?}", r.operator_writes);
    println!("agent east writes: {:?}", r.agent_writes[0]);
    println!("agent west writes: {:?}", r.agent_writes[1]);
    for (i, side) in ["east", "west"].iter().enumerate() {
        let lines: Vec<String> = r.api_requests[i]
            .iter()
            .filter(|(_, (n, _))| *n >= 1.0)
            .map(|(k, (n, s))| format!("{k} {n:.0} ({:.1} ms each)", 1000.0 * s / n))
            .collect();
        println!("{side} API server requests: {}", lines.join("; "));
    }
    println!(
        "operator: peak RSS {} MiB, CPU {:.1} s; agents: east {} MiB / {:.1} s, west {} MiB / {:.1} s",
        r.operator.peak_rss_kib / 1024,
        r.operator.cpu_seconds,
        r.agents[0].peak_rss_kib / 1024,
        r.agents[0].cpu_seconds,
        r.agents[1].peak_rss_kib / 1024,
        r.agents[1].cpu_seconds
    );
    println!(
        "writes in {:?} idle (operator and agents): {}",
        r.idle, r.idle_writes
    );
}

/// The exports report, as the bench prints it.
pub fn print_exports(report: &ExportsReport) {
    let r = report;
    println!("== {} exports created at once", r.exports);
    println!(
        "first create -> every export imported in west: {:.1?}",
        r.to_all_imported
    );
    println!(
        "agent east writes per export: {}",
        per_export(&r.agent_writes[0], r.exports)
    );
    println!(
        "agent west writes per export: {}",
        per_export(&r.agent_writes[1], r.exports)
    );
    println!(
        "export statuses seen by a watch: {} changes ({:?} exports by number of changes), {} conditions rewritten with a new lastTransitionTime and the same status",
        r.export_statuses.total_changes(),
        r.export_statuses.distribution(),
        r.export_statuses.total_transition_rewrites()
    );
    for (sequence, exports) in r.export_statuses.sequence_counts() {
        println!("  {exports} exports: {sequence}");
    }
    println!(
        "{} single exports, create -> imported in west: p50 {:.1?}, p99 {:.1?}",
        r.singles.len(),
        quantile(&r.singles, 0.5),
        quantile(&r.singles, 0.99)
    );
    println!(
        "agents: east {} MiB / {:.1} s CPU, west {} MiB / {:.1} s CPU",
        r.agents[0].peak_rss_kib / 1024,
        r.agents[0].cpu_seconds,
        r.agents[1].peak_rss_kib / 1024,
        r.agents[1].cpu_seconds
    );
    println!(
        "writes in {:?} idle (both agents): {}",
        r.idle, r.idle_writes
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
    use k8s_openapi::jiff::Timestamp;

    fn condition(type_: &str, status: &str, at: i64) -> Condition {
        Condition {
            type_: type_.into(),
            status: status.into(),
            reason: String::new(),
            message: String::new(),
            observed_generation: None,
            last_transition_time: Time(Timestamp::from_second(at).unwrap()),
        }
    }

    #[test]
    fn status_history_counts_changes_and_rewrites_of_the_same_status() {
        let mut history = StatusHistory::default();
        let pending = [
            condition("Valid", "True", 1),
            condition("Ready", "False", 1),
        ];
        let ready = [condition("Valid", "True", 1), condition("Ready", "True", 2)];
        // Ready rewritten with a new time and the same status.
        let rewritten = [condition("Valid", "True", 1), condition("Ready", "True", 3)];
        history.observe("web", None, &[]);
        history.observe("web", Some(&[]), &pending);
        history.observe("web", Some(&pending), &ready);
        history.observe("web", Some(&ready), &ready);
        assert_eq!(history.total_changes(), 2);
        assert_eq!(history.total_transition_rewrites(), 0);
        history.observe("web", Some(&ready), &rewritten);
        assert_eq!(history.total_changes(), 3);
        assert_eq!(history.transition_rewrites.get("web"), Some(&1));
        history.observe("api", None, &ready);
        assert_eq!(history.distribution(), BTreeMap::from([(1, 1), (3, 1)]));
        assert_eq!(
            history.sequence_counts()[1],
            ("Valid=True/,Ready=True/".to_owned(), 1)
        );
        assert_eq!(
            history.sequences["web"],
            [
                "Valid=True/,Ready=False/",
                "Valid=True/,Ready=True/",
                "Valid=True/,Ready=True/"
            ]
        );
    }
}

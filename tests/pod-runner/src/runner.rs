//! The runtime: watches the pods of a namespace bound to the node and labelled for this
//! runner, their ConfigMaps and Secrets; plans each pod ([`crate::plan`]), runs it (one task
//! per pod, one process per container), keeps its volumes' files current, writes its status
//! ([`crate::status`]), and when it is deleted stops its processes and confirms the deletion.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::api::authentication::v1::{BoundObjectReference, TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::{
    ConfigMap, Node, Pod, PodStatus, Secret, Service, ServiceAccount,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::reflector::{self, Store};
use kube::runtime::{WatchStreamExt, watcher};
use mon_failover_io::{CephInstall, CommandLine};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::MARKER;
use crate::events::{self, Events, PodEvent, pod_reference};
use crate::plan::{
    ClusterDns, ContainerPlan, PlanError, PlanInputs, PodPlan, ProbeKind, ProbePlan, VolumeFile,
    VolumeSource, plan_pod, token_audiences,
};
use crate::rootfs::Rootfs;
use crate::status::{
    ContainerRun, Exit, PodRun, State, UNSUPPORTED_REASON, pending_status, pod_status,
};
use crate::{process, volumes};

/// How often the runner looks at its pods again (new pods, changed objects, process states).
const TICK: Duration = Duration::from_millis(100);

/// Where the pods' IPs come from and where their processes run.
#[derive(Debug, Clone)]
pub struct PodNetwork {
    /// The network namespace the processes run in (`ip netns` name); the host's when `None`.
    pub netns: Option<String>,
    /// The device each pod's IP is added to (in `netns`), if the runner adds them.
    pub device: Option<String>,
    /// The prefix length the IPs are added with.
    pub prefix_len: u8,
    /// The pod IPs, given out in this order and taken back when a pod goes.
    pub ips: Vec<IpAddr>,
}

/// The restart back-off: the first delay, doubled at each restart up to `max`.
#[derive(Debug, Clone, Copy)]
pub struct Backoff {
    /// The first delay.
    pub initial: Duration,
    /// The longest.
    pub max: Duration,
}

/// What a runner serves and how.
#[derive(Debug, Clone)]
pub struct RunnerConfig {
    /// The runner's name: it runs the pods labelled [`MARKER`]`=<name>`.
    pub name: String,
    /// The node whose pods it runs (`spec.nodeName`).
    pub node: String,
    /// The namespace whose pods it runs.
    pub namespace: String,
    /// Its directory (pods' volumes, logs and containers' writable layers under `pods/`, the
    /// node's `hostPath`s under `node/`).
    pub dir: PathBuf,
    /// The root filesystem the processes come from (a root, not the host's programs).
    pub install: CephInstall,
    /// The pods' network.
    pub network: PodNetwork,
    /// The restart back-off.
    pub backoff: Backoff,
    /// The cluster's DNS, for `dnsPolicy: ClusterFirst` (without it such pods keep the root's
    /// `resolv.conf`, as on a kubelet without `--cluster-dns`).
    pub cluster_dns: Option<ClusterDns>,
}

/// Why a runner cannot start.
#[derive(Debug, thiserror::Error)]
pub enum RunnerError {
    /// Its install is the host's programs: containers run from a root filesystem.
    #[error(
        "the pod runner runs containers from a root filesystem (CephInstall::root_from_env), not from the host"
    )]
    NoRoot,
    /// Its directory cannot be made.
    #[error("cannot make the runner's directory {dir}: {source}")]
    Dir {
        /// The directory.
        dir: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The node cannot be read.
    #[error("cannot read node {node}: {source}")]
    Node {
        /// The node.
        node: String,
        /// Why.
        source: Box<kube::Error>,
    },
    /// A watch ended before it listed its objects.
    #[error("the watch of {0} ended before its first list")]
    Watch(&'static str),
}

/// A running pod runner; [`PodRunner::shutdown`] stops it and its processes.
#[derive(Debug)]
pub struct PodRunner {
    stop: watch::Sender<bool>,
    task: JoinHandle<()>,
    groups: Groups,
    watches: Vec<JoinHandle<()>>,
}

impl PodRunner {
    /// Starts serving `config`'s pods through `client`; returns once its watches listed.
    pub async fn start(client: kube::Client, config: RunnerConfig) -> Result<Self, RunnerError> {
        let Some(lower) = config.install.root_dir().map(Path::to_path_buf) else {
            return Err(RunnerError::NoRoot);
        };
        std::fs::create_dir_all(&config.dir).map_err(|source| RunnerError::Dir {
            dir: config.dir.clone(),
            source,
        })?;
        let ns = &config.namespace;
        let pods = watcher::Config::default()
            .fields(&format!("spec.nodeName={}", config.node))
            .labels(&format!("{MARKER}={}", config.name));
        let (pods, pod_watch) = watch_store(Api::<Pod>::namespaced(client.clone(), ns), pods);
        let (maps, map_watch) = watch_store(
            Api::<ConfigMap>::namespaced(client.clone(), ns),
            watcher::Config::default(),
        );
        let (secrets, secret_watch) = watch_store(
            Api::<Secret>::namespaced(client.clone(), ns),
            watcher::Config::default(),
        );
        let (services, service_watch) = watch_store(
            Api::<Service>::namespaced(client.clone(), ns),
            watcher::Config::default(),
        );
        // The API server's own Service, whose variables every container gets.
        let (master, master_watch) = watch_store(
            Api::<Service>::namespaced(client.clone(), "default"),
            watcher::Config::default().fields("metadata.name=kubernetes"),
        );
        pods.wait_until_ready()
            .await
            .map_err(|_| RunnerError::Watch("pods"))?;
        maps.wait_until_ready()
            .await
            .map_err(|_| RunnerError::Watch("ConfigMaps"))?;
        secrets
            .wait_until_ready()
            .await
            .map_err(|_| RunnerError::Watch("Secrets"))?;
        for store in [&services, &master] {
            store
                .wait_until_ready()
                .await
                .map_err(|_| RunnerError::Watch("Services"))?;
        }
        let (stop, stopped) = watch::channel(false);

        let groups = Groups::default();
        let node = Api::<Node>::all(client.clone())
            .get(&config.node)
            .await
            .map_err(|source| RunnerError::Node {
                node: config.node.clone(),
                source: Box::new(source),
            })?;
        let (events, event_task) = events::publisher(client.clone(), &config.node);
        let runner = Runner {
            events,
            node_resolv_conf: std::fs::read_to_string(lower.join("etc/resolv.conf"))
                .unwrap_or_default(),
            allocatable: node.status.and_then(|s| s.allocatable).unwrap_or_default(),
            api: Api::namespaced(client.clone(), ns),
            client,
            tokens: BTreeMap::new(),
            groups: Arc::clone(&groups),
            config,
            lower,
            pods: BTreeMap::new(),
        };
        let stores = Stores {
            pods,
            maps,
            secrets,
            services,
            master,
        };
        let task = tokio::spawn(runner.run(stores, stopped));
        Ok(PodRunner {
            stop,
            task,
            groups,
            watches: vec![
                event_task,
                pod_watch,
                map_watch,
                secret_watch,
                service_watch,
                master_watch,
            ],
        })
    }

    /// Stops the runner: every process killed (the pods are left as they are in the API), the
    /// pod IPs removed.
    pub async fn shutdown(mut self) {
        let _ = self.stop.send(true);
        let _ = (&mut self.task).await;
        for watch in &self.watches {
            watch.abort();
        }
    }
}

impl Drop for PodRunner {
    /// A runner dropped without [`PodRunner::shutdown`] (a failed test) kills every
    /// container's process group at once (SIGKILL); its pod IPs and files stay.
    fn drop(&mut self) {
        self.task.abort();
        for watch in &self.watches {
            watch.abort();
        }
        let groups =
            std::mem::take(&mut *self.groups.lock().unwrap_or_else(PoisonError::into_inner));
        for pgid in groups {
            process::kill_leftovers(Some(pgid));
        }
    }
}

/// A reflector's store of `api`'s objects, fed by a task.
fn watch_store<K>(api: Api<K>, config: watcher::Config) -> (Store<K>, JoinHandle<()>)
where
    K: kube::Resource<DynamicType = ()>
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
{
    let (reader, writer) = reflector::store();
    let stream = reflector::reflector(writer, watcher(api, config).default_backoff());
    let task = tokio::spawn(stream.for_each(|event| {
        if let Err(error) = event {
            tracing::warn!(%error, "pod runner watch");
        }
        futures::future::ready(())
    }));
    (reader, task)
}

/// The watches' stores.
struct Stores {
    pods: Store<Pod>,
    maps: Store<ConfigMap>,
    secrets: Store<Secret>,
    /// The Services of the namespace.
    services: Store<Service>,
    /// `default/kubernetes`.
    master: Store<Service>,
}

/// What the pods of one pass are planned with.
struct Objects {
    maps: BTreeMap<String, ConfigMap>,
    secrets: BTreeMap<String, Secret>,
    services: Vec<Service>,
}

/// The objects of `store` by name.
fn by_name<K: kube::Resource + Clone>(store: &Store<K>) -> BTreeMap<String, K>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    store
        .state()
        .iter()
        .map(|o| (o.meta().name.clone().unwrap_or_default(), (**o).clone()))
        .collect()
}

/// What the runner keeps of one pod (by UID).
#[derive(Debug)]
struct Entry {
    name: String,
    ip: Option<IpAddr>,
    /// Whether its IP was added to the device.
    ip_added: bool,
    worker: Option<Worker>,
    /// The status last written.
    written: Option<PodStatus>,
    /// The files last written, by volume.
    files: BTreeMap<String, Vec<VolumeFile>>,
    dir: PathBuf,
}

/// A ServiceAccount token the runner got for a pod.
#[derive(Debug)]
struct Token {
    value: String,
    obtained: std::time::Instant,
    lifetime: Duration,
}

impl Token {
    /// Whether to get a new one: as the kubelet, after 80% of its lifetime.
    fn stale(&self) -> bool {
        self.obtained.elapsed() > self.lifetime.mul_f64(0.8)
    }
}

/// The task running one pod's containers.
#[derive(Debug)]
struct Worker {
    run: Arc<Mutex<PodRun>>,
    /// `Some(grace)`: stop every container with that grace period.
    stop: watch::Sender<Option<Duration>>,
    task: JoinHandle<()>,
}

struct Runner {
    client: kube::Client,
    /// Where Events go.
    events: Events,
    /// The root's `/etc/resolv.conf`, the node's.
    node_resolv_conf: String,
    /// The node's allocatable resources, read when the runner starts.
    allocatable: BTreeMap<String, Quantity>,
    api: Api<Pod>,
    /// The ServiceAccount tokens of each pod (by UID), by audience.
    tokens: BTreeMap<String, BTreeMap<String, Token>>,
    groups: Groups,
    config: RunnerConfig,
    /// The root filesystem, the lower layer of every container's own.
    lower: PathBuf,
    pods: BTreeMap<String, Entry>,
}

impl Runner {
    async fn run(mut self, stores: Stores, mut stopped: watch::Receiver<bool>) {
        loop {
            tokio::select! {
                _ = stopped.wait_for(|s| *s) => break,
                () = tokio::time::sleep(TICK) => {}
            }
            let objects = Objects {
                maps: by_name(&stores.maps),
                secrets: by_name(&stores.secrets),
                services: stores
                    .services
                    .state()
                    .into_iter()
                    .chain(stores.master.state())
                    .map(|s| (*s).clone())
                    .collect(),
            };
            let pods = stores.pods.state();
            let present: BTreeSet<String> =
                pods.iter().filter_map(|p| p.metadata.uid.clone()).collect();
            for pod in &pods {
                self.sync(pod, &objects).await;
            }
            let gone: Vec<String> = self
                .pods
                .keys()
                .filter(|uid| !present.contains(*uid))
                .cloned()
                .collect();
            for uid in gone {
                self.forget(&uid, Duration::ZERO).await;
            }
        }
        let all: Vec<String> = self.pods.keys().cloned().collect();
        for uid in all {
            self.forget(&uid, Duration::ZERO).await;
        }
    }

    /// Brings one pod a step further: started, files updated, status written; or, deleted,
    /// stopped and its deletion confirmed.
    async fn sync(&mut self, pod: &Pod, objects: &Objects) {
        let (Some(uid), Some(name)) = (pod.metadata.uid.clone(), pod.metadata.name.clone()) else {
            return;
        };
        if pod.metadata.deletion_timestamp.is_some() {
            return self.delete(pod, &uid, &name).await;
        }
        self.refresh_tokens(pod, &uid, &name).await;
        let tokens: BTreeMap<String, String> = self
            .tokens
            .get(&uid)
            .into_iter()
            .flatten()
            .map(|(audience, token)| (audience.clone(), token.value.clone()))
            .collect();
        let dir = self.config.dir.join("pods").join(format!("{name}_{uid}"));
        // A pod holds an IP of the pool once it starts; until then the plan uses the one it
        // would get (for `fieldRef: status.podIP`).
        let ip = match self.pods.get(&uid).and_then(|e| e.ip) {
            Some(ip) => Some(ip),
            None => self.free_ip(),
        };
        let entry = self.pods.entry(uid.clone()).or_insert_with(|| Entry {
            name: name.clone(),
            ip: None,
            ip_added: false,
            worker: None,
            written: None,
            files: BTreeMap::new(),
            dir: dir.clone(),
        });
        let Some(ip) = ip else {
            let status = pending_status(
                "NoPodIP",
                "the runner has no free pod IP",
                entry.written.as_ref(),
                Timestamp::now(),
            );
            return self.write_status(&uid, status).await;
        };
        let inputs = PlanInputs {
            pod_ip: ip,
            config_maps: &objects.maps,
            secrets: &objects.secrets,
            services: &objects.services,
            pod_dir: dir,
            node_dir: self.config.dir.join("node"),
            node_allocatable: &self.allocatable,
            cluster_dns: self.config.cluster_dns.as_ref(),
            node_resolv_conf: &self.node_resolv_conf,
            tokens: &tokens,
        };
        let has_worker = entry.worker.is_some();
        let written = entry.written.clone();
        let now = Timestamp::now();
        let status = match plan_pod(pod, &inputs) {
            Err(refused @ PlanError::Refused(_)) if !has_worker => pending_status(
                UNSUPPORTED_REASON,
                &refused.to_string(),
                written.as_ref(),
                now,
            ),
            Err(PlanError::Waiting { reason, message }) if !has_worker => {
                pending_status(reason, &message, written.as_ref(), now)
            }
            // A running pod whose objects went keeps its files, as on a kubelet.
            Err(_) => return self.write_current(&uid).await,
            Ok(plan) => match self.start_or_update(&uid, plan, ip).await {
                Ok(()) => return self.write_current(&uid).await,
                Err(message) => pending_status("FailedMount", &message, written.as_ref(), now),
            },
        };
        self.write_status(&uid, status).await;
    }

    /// Starts the pod's worker, or writes its volumes' files again where they changed.
    async fn start_or_update(
        &mut self,
        uid: &str,
        plan: PodPlan,
        ip: IpAddr,
    ) -> Result<(), String> {
        let stamp = Timestamp::now().as_nanosecond().to_string();
        let Some(entry) = self.pods.get_mut(uid) else {
            return Ok(());
        };
        for volume in &plan.volumes {
            let VolumeSource::Files(files) = &volume.source else {
                if entry.worker.is_none() {
                    volumes::prepare(volume, &stamp)
                        .map_err(|e| format!("volume {:?}: {e}", volume.name))?;
                }
                continue;
            };
            if entry.files.get(&volume.name) != Some(files) {
                volumes::prepare(volume, &stamp)
                    .map_err(|e| format!("volume {:?}: {e}", volume.name))?;
                entry.files.insert(volume.name.clone(), files.clone());
            }
        }
        if entry.worker.is_some() {
            return Ok(());
        }
        entry.ip = Some(ip);
        if let Some(resolv) = &plan.resolv_conf {
            let path = &plan.resolv_conf_path;
            if let Some(dir) = path.parent() {
                std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            }
            std::fs::write(path, resolv).map_err(|e| format!("{}: {e}", path.display()))?;
        }
        if let (Some(ip), Some(device), false) =
            (entry.ip, &self.config.network.device, entry.ip_added)
        {
            let address = format!("{ip}/{}", self.config.network.prefix_len);
            let added = CommandLine::new("ip", self.config.network.netns.as_deref())
                .args(["addr", "add", &address, "dev", device])
                .output(Duration::from_secs(10))
                .await;
            match added {
                Ok(_) => entry.ip_added = true,
                Err(e) if e.to_string().contains("File exists") => entry.ip_added = true,
                Err(e) => return Err(format!("cannot add the pod IP {address}: {e}")),
            }
        }
        let worker = spawn_worker(
            plan,
            ip,
            entry.dir.clone(),
            Arc::new(Shared {
                lower: self.lower.clone(),
                runner_dir: self.config.dir.clone(),
                events: self.events.clone(),
                netns: self.config.network.netns.clone(),
                backoff: self.config.backoff,
                groups: Arc::clone(&self.groups),
            }),
        );
        entry.worker = Some(worker);
        Ok(())
    }

    /// Gets the ServiceAccount tokens `pod` mounts that it has not got, or whose time is up,
    /// bound to the pod as the kubelet binds them (TokenRequest); a failure is logged and the
    /// pod waits.
    async fn refresh_tokens(&mut self, pod: &Pod, uid: &str, name: &str) {
        let account = pod
            .spec
            .as_ref()
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_else(|| "default".to_owned());
        let accounts: Api<ServiceAccount> =
            Api::namespaced(self.client.clone(), &self.config.namespace);
        for (audience, expiration) in token_audiences(pod) {
            let held = self.tokens.get(uid).and_then(|t| t.get(&audience));
            if held.is_some_and(|t| !t.stale()) {
                continue;
            }
            let request = TokenRequest {
                spec: TokenRequestSpec {
                    audiences: if audience.is_empty() {
                        Vec::new()
                    } else {
                        vec![audience.clone()]
                    },
                    expiration_seconds: expiration,
                    bound_object_ref: Some(BoundObjectReference {
                        api_version: Some("v1".to_owned()),
                        kind: Some("Pod".to_owned()),
                        name: Some(name.to_owned()),
                        uid: Some(uid.to_owned()),
                    }),
                },
                ..TokenRequest::default()
            };
            let issued = accounts
                .create_token_request(&account, &PostParams::default(), &request)
                .await;
            let Some(status) = issued.ok().and_then(|t| t.status) else {
                tracing::warn!(pod = name, account, "pod runner: no ServiceAccount token");
                continue;
            };
            let lifetime = status
                .expiration_timestamp
                .0
                .duration_since(Timestamp::now())
                .unsigned_abs();
            self.tokens.entry(uid.to_owned()).or_default().insert(
                audience,
                Token {
                    value: status.token,
                    obtained: std::time::Instant::now(),
                    lifetime,
                },
            );
        }
    }

    /// The lowest pod IP no pod has.
    fn free_ip(&self) -> Option<IpAddr> {
        let taken: BTreeSet<IpAddr> = self.pods.values().filter_map(|e| e.ip).collect();
        self.config
            .network
            .ips
            .iter()
            .copied()
            .find(|ip| !taken.contains(ip))
    }

    /// A deleted pod: its processes stopped (the grace period the deletion gives), then the
    /// deletion confirmed and the pod forgotten.
    async fn delete(&mut self, pod: &Pod, uid: &str, name: &str) {
        let grace = Duration::from_secs(
            pod.metadata
                .deletion_grace_period_seconds
                .unwrap_or(0)
                .max(0)
                .unsigned_abs(),
        );
        if let Some(worker) = self.pods.get(uid).and_then(|e| e.worker.as_ref()) {
            if worker.stop.borrow().is_none() {
                let _ = worker.stop.send(Some(grace));
            }
            if !worker.task.is_finished() {
                return;
            }
        }
        let params = DeleteParams {
            grace_period_seconds: Some(0),
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        };
        match self.api.delete(name, &params).await {
            Ok(_) => {}
            Err(kube::Error::Api(status)) if status.code == 404 || status.code == 409 => {}
            Err(error) => {
                tracing::warn!(%error, pod = name, "pod runner: cannot confirm the deletion");
                return;
            }
        }
        self.forget(uid, grace).await;
    }

    /// Stops the pod's processes (if any still run), removes its IP and its directory.
    async fn forget(&mut self, uid: &str, grace: Duration) {
        self.tokens.remove(uid);
        let Some(entry) = self.pods.remove(uid) else {
            return;
        };
        if let Some(worker) = entry.worker {
            if worker.stop.borrow().is_none() {
                let _ = worker.stop.send(Some(grace));
            }
            let _ = worker.task.await;
        }
        if let (Some(ip), Some(device), true) =
            (entry.ip, &self.config.network.device, entry.ip_added)
        {
            let address = format!("{ip}/{}", self.config.network.prefix_len);
            let removed = CommandLine::new("ip", self.config.network.netns.as_deref())
                .args(["addr", "del", &address, "dev", device])
                .output(Duration::from_secs(10))
                .await;
            if let Err(error) = removed {
                tracing::warn!(%error, pod = entry.name, "pod runner: cannot remove the pod IP");
            }
        }
        let _ = std::fs::remove_dir_all(&entry.dir);
    }

    /// Writes the status of a running pod from its worker's view.
    async fn write_current(&mut self, uid: &str) {
        let Some(entry) = self.pods.get(uid) else {
            return;
        };
        let Some(worker) = &entry.worker else {
            return;
        };
        let run = worker
            .run
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        let status = pod_status(&run, entry.written.as_ref(), Timestamp::now());
        self.write_status(uid, status).await;
    }

    /// Writes `status` when it differs from the one written last.
    async fn write_status(&mut self, uid: &str, status: PodStatus) {
        let Some(entry) = self.pods.get_mut(uid) else {
            return;
        };
        if entry.written.as_ref() == Some(&status) {
            return;
        }
        let said = |s: &PodStatus| (s.reason.clone(), s.message.clone());
        if let (Some(reason), Some(message)) = (&status.reason, &status.message)
            && entry.written.as_ref().map(said) != Some(said(&status))
        {
            let _ = self.events.send(PodEvent {
                pod: pod_reference(&self.config.namespace, &entry.name, uid),
                warning: true,
                reason: reason.clone(),
                note: message.clone(),
            });
        }
        let mut body = serde_json::to_value(&status).unwrap_or_default();
        // A merge patch keeps what it does not name: name every field, absent ones as null.
        for key in [
            "phase",
            "conditions",
            "podIP",
            "podIPs",
            "startTime",
            "reason",
            "message",
            "initContainerStatuses",
            "containerStatuses",
        ] {
            if body.get(key).is_none() {
                body[key] = serde_json::Value::Null;
            }
        }
        let patch = serde_json::json!({"status": body});
        match self
            .api
            .patch_status(&entry.name, &PatchParams::default(), &Patch::Merge(&patch))
            .await
        {
            Ok(_) => entry.written = Some(status),
            Err(error) => tracing::warn!(%error, pod = entry.name, "pod runner: status write"),
        }
    }
}

/// Starts the task that runs `plan`: its init containers in order, then its containers.
fn spawn_worker(plan: PodPlan, ip: IpAddr, dir: PathBuf, shared: Arc<Shared>) -> Worker {
    let waiting = |c: &crate::plan::ContainerPlan, reason: &str| ContainerRun {
        name: c.name.clone(),
        image: c.image.clone(),
        state: State::Waiting {
            reason: reason.to_owned(),
            message: None,
        },
        last: None,
        restart_count: 0,
        started: false,
        probe_ready: false,
    };
    let run = Arc::new(Mutex::new(PodRun {
        restart_policy: plan.restart_policy,
        pod_ip: ip,
        start_time: Timestamp::now(),
        init: plan
            .init_containers
            .iter()
            .map(|c| waiting(c, "PodInitializing"))
            .collect(),
        containers: plan
            .containers
            .iter()
            .map(|c| waiting(c, "PodInitializing"))
            .collect(),
    }));
    let (stop, stopped) = watch::channel(None);
    let context = Arc::new(PodContext {
        plan,
        run: Arc::clone(&run),
        dir,
        shared,
    });
    let task = tokio::spawn(run_pod(context, stopped));
    Worker { run, stop, task }
}

/// What every pod's containers share.
struct Shared {
    /// Where Events go.
    events: Events,
    /// The root filesystem.
    lower: PathBuf,
    /// Shared into each container's root (its pods' volumes are under it).
    runner_dir: PathBuf,
    netns: Option<String>,
    backoff: Backoff,
    groups: Groups,
}

/// What a pod's containers share.
struct PodContext {
    plan: PodPlan,
    run: Arc<Mutex<PodRun>>,
    dir: PathBuf,
    shared: Arc<Shared>,
}

/// The process groups of the containers running now (killed when the runner is dropped).
type Groups = Arc<Mutex<BTreeSet<u32>>>;

#[derive(Clone, Copy)]
enum Which {
    Init(usize),
    Main(usize),
}

async fn run_pod(context: Arc<PodContext>, stopped: watch::Receiver<Option<Duration>>) {
    for index in 0..context.plan.init_containers.len() {
        if !run_container(&context, Which::Init(index), stopped.clone()).await {
            return;
        }
    }
    let containers = (0..context.plan.containers.len())
        .map(|index| run_container(&context, Which::Main(index), stopped.clone()));
    futures::future::join_all(containers).await;
}

/// Records an Event about the pod of `context`.
fn event(context: &PodContext, warning: bool, reason: &str, note: String) {
    let plan = &context.plan;
    let _ = context.shared.events.send(PodEvent {
        pod: pod_reference(&plan.namespace, &plan.name, &plan.uid),
        warning,
        reason: reason.to_owned(),
        note,
    });
}

/// Changes what the runner knows of one container.
fn update(context: &PodContext, which: Which, change: impl FnOnce(&mut ContainerRun)) {
    let mut run = context.run.lock().unwrap_or_else(PoisonError::into_inner);
    let slot = match which {
        Which::Init(i) => run.init.get_mut(i),
        Which::Main(i) => run.containers.get_mut(i),
    };
    if let Some(slot) = slot {
        change(slot);
    }
}

fn container_plan(context: &PodContext, which: Which) -> &ContainerPlan {
    match which {
        Which::Init(i) => &context.plan.init_containers[i],
        Which::Main(i) => &context.plan.containers[i],
    }
}

/// How one run of a container ended.
enum Outcome {
    /// Its process exited with this code (or a probe failed and it was stopped).
    Exited(i32),
    /// The pod is being stopped: the container was, and is not started again.
    Stopped,
}

/// Runs one container, restarting it by the policy; `true` when it ended with 0 (what the next
/// init container waits for).
async fn run_container(
    context: &PodContext,
    which: Which,
    mut stopped: watch::Receiver<Option<Duration>>,
) -> bool {
    let shared = &context.shared;
    let mut delay = shared.backoff.initial;
    loop {
        if stopped.borrow().is_some() {
            return false;
        }
        let started_at = Timestamp::now();
        let Outcome::Exited(code) = run_once(context, which, &mut stopped, started_at).await else {
            return false;
        };
        let exit = Exit {
            exit_code: code,
            started_at,
            finished_at: Timestamp::now(),
        };
        let policy = context.plan.restart_policy;
        let again = match which {
            Which::Init(_) => code != 0 && policy.retries_init(),
            Which::Main(_) => policy.restarts(code),
        };
        if !again {
            update(context, which, |c| c.state = State::Terminated(exit));
            return code == 0;
        }
        let waiting = State::Waiting {
            reason: "CrashLoopBackOff".to_owned(),
            message: Some(format!("back-off {delay:?} restarting the container")),
        };
        update(context, which, |c| {
            c.last = Some(exit.clone());
            c.state = waiting;
        });
        let name = &container_plan(context, which).name;
        event(
            context,
            true,
            "BackOff",
            format!("Back-off restarting failed container {name} (exit code {code})"),
        );
        tokio::select! {
            () = tokio::time::sleep(delay) => {}
            _ = stopped.wait_for(Option::is_some) => return false,
        }
        update(context, which, |c| c.restart_count += 1);
        // As the kubelet: the back-off doubles, and starts again after a long enough run.
        let ran = exit
            .finished_at
            .duration_since(exit.started_at)
            .unsigned_abs();
        delay = if ran > shared.backoff.max * 2 {
            shared.backoff.initial
        } else {
            (delay * 2).min(shared.backoff.max)
        };
    }
}

/// Starts the container once and waits until its process exits, a startup or liveness probe
/// fails (the container is then stopped, with the pod's grace period), or the pod is stopped.
async fn run_once(
    context: &PodContext,
    which: Which,
    stopped: &mut watch::Receiver<Option<Duration>>,
    started_at: Timestamp,
) -> Outcome {
    let shared = &context.shared;
    let container = container_plan(context, which);
    let log = context
        .dir
        .join("logs")
        .join(format!("{}.log", container.name));
    // A root filesystem of its own for this run, as a container runtime makes a new
    // container for each start; unmounted and removed when the run ends.
    let layer = context.dir.join("containers").join(format!(
        "{}-{}",
        container.name,
        started_at.as_nanosecond()
    ));
    for mount in container.mounts.iter().filter(|m| m.make_dir) {
        if let Err(error) = std::fs::create_dir_all(&mount.host) {
            tracing::warn!(%error, container = container.name, "pod runner: subPath");
        }
    }
    let started = Rootfs::mount(&shared.lower, &layer).and_then(|rootfs| {
        let install = CephInstall::root(rootfs.path()).sharing(&shared.runner_dir);
        let child = process::start(
            &install,
            shared.netns.as_deref(),
            &context.plan.hostname,
            container,
            &log,
        )?;
        Ok((rootfs, install, child))
    });
    let (_rootfs, install, mut child) = match started {
        Ok(started) => started,
        Err(error) => {
            tracing::warn!(%error, container = container.name, "pod runner: cannot start");
            return Outcome::Exited(128);
        }
    };
    let has = |kind| container.probes.iter().any(|p| p.kind == kind);
    let (started, probe_ready) = (!has(ProbeKind::Startup), !has(ProbeKind::Readiness));
    update(context, which, |c| {
        c.state = State::Running { started_at };
        c.started = started;
        c.probe_ready = probe_ready;
    });
    event(
        context,
        false,
        "Started",
        format!("Started container {}", container.name),
    );
    let pgid = child.id();
    let groups = &shared.groups;
    if let Some(pgid) = pgid {
        groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(pgid);
    }
    enum Ended {
        Exited(i32),
        Stop(Duration),
        ProbeFailed(ProbeKind),
    }
    let ended = tokio::select! {
        status = child.wait() => Ended::Exited(status.map_or(-1, process::exit_code)),
        grace = stopped.wait_for(Option::is_some) => {
            Ended::Stop(grace.map_or(Duration::ZERO, |g| g.unwrap_or_default()))
        }
        kind = probe_until_failure(context, which, &install) => Ended::ProbeFailed(kind),
    };
    let outcome = match ended {
        Ended::Exited(code) => {
            process::kill_leftovers(pgid);
            Outcome::Exited(code)
        }
        Ended::Stop(grace) => {
            event(
                context,
                false,
                "Killing",
                format!("Stopping container {}", container.name),
            );
            let code = process::stop(&mut child, grace.min(context.plan.grace_period)).await;
            let exit = Exit {
                exit_code: code,
                started_at,
                finished_at: Timestamp::now(),
            };
            update(context, which, |c| c.state = State::Terminated(exit));
            Outcome::Stopped
        }
        Ended::ProbeFailed(kind) => {
            let note = format!(
                "Container {} failed its {kind:?} probe, will be restarted",
                container.name
            );
            event(context, false, "Killing", note);
            Outcome::Exited(process::stop(&mut child, context.plan.grace_period).await)
        }
    };
    if let Some(pgid) = pgid {
        groups
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&pgid);
    }
    outcome
}

/// Runs the container's probes as the kubelet does: the startup probe until it succeeds (the
/// others wait), then the liveness and readiness probes, each at its period; returns the kind
/// of the first probe to fail for good (startup or liveness; a readiness probe only marks the
/// container unready). Pending forever when no such probe fails.
async fn probe_until_failure(
    context: &PodContext,
    which: Which,
    install: &CephInstall,
) -> ProbeKind {
    let container = container_plan(context, which);
    let probe = |kind| container.probes.iter().find(|p| p.kind == kind);
    if let Some(startup) = probe(ProbeKind::Startup) {
        if !probe_loop(context, which, install, startup).await {
            return ProbeKind::Startup;
        }
        update(context, which, |c| c.started = true);
    }
    let liveness = async {
        match probe(ProbeKind::Liveness) {
            Some(liveness) => {
                probe_loop(context, which, install, liveness).await;
                ProbeKind::Liveness
            }
            None => std::future::pending().await,
        }
    };
    let readiness = async {
        match probe(ProbeKind::Readiness) {
            Some(readiness) => probe_loop(context, which, install, readiness).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        kind = liveness => kind,
        _ = readiness => ProbeKind::Readiness,
    }
}

/// Runs `probe` at its period. A startup probe returns `true` once it succeeds and `false`
/// once it failed `failure_threshold` times in a row; a liveness probe returns on that failure;
/// a readiness probe never returns, and sets the container's readiness at each threshold.
async fn probe_loop(
    context: &PodContext,
    which: Which,
    install: &CephInstall,
    probe: &ProbePlan,
) -> bool {
    let container = container_plan(context, which);
    let shared = &context.shared;
    let log = context
        .dir
        .join("logs")
        .join(format!("{}.probes.log", container.name));
    let probing = ContainerPlan {
        argv: probe.argv.clone(),
        ..container.clone()
    };
    tokio::time::sleep(probe.initial_delay).await;
    let (mut successes, mut failures) = (0, 0);
    loop {
        let passed = match process::start(
            install,
            shared.netns.as_deref(),
            &context.plan.hostname,
            &probing,
            &log,
        ) {
            Ok(mut child) => {
                let pgid = child.id();
                let result = tokio::time::timeout(probe.timeout, child.wait()).await;
                process::kill_leftovers(pgid);
                matches!(result, Ok(Ok(status)) if status.success())
            }
            Err(_) => false,
        };
        if passed {
            (successes, failures) = (successes + 1, 0);
        } else {
            (successes, failures) = (0, failures + 1);
            let note = format!(
                "{:?} probe of container {} failed",
                probe.kind, container.name
            );
            event(context, true, "Unhealthy", note);
        }
        match probe.kind {
            ProbeKind::Startup if successes >= probe.success_threshold => return true,
            ProbeKind::Startup | ProbeKind::Liveness if failures >= probe.failure_threshold => {
                return false;
            }
            ProbeKind::Readiness if successes >= probe.success_threshold => {
                update(context, which, |c| c.probe_ready = true);
            }
            ProbeKind::Readiness if failures >= probe.failure_threshold => {
                update(context, which, |c| c.probe_ready = false);
            }
            _ => {}
        }
        tokio::time::sleep(probe.period).await;
    }
}

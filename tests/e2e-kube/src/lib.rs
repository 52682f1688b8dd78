//! The harness of the end-to-end tests against real Kubernetes API servers (`tests/e2e.rs`):
//! two clusters named by kubeconfig contexts from the environment, the CRDs and the RBAC of
//! `deploy/` installed on them, the agents run as processes with ServiceAccount tokens (never
//! an admin's credentials), and waits on conditions with a deadline.
//!
//! Settings (environment):
//! - `CLUSTERSET_E2E_EAST_CONTEXT`, `CLUSTERSET_E2E_WEST_CONTEXT`: the two clusters' contexts in
//!   the kubeconfig (`KUBECONFIG` or `~/.kube/config`); east is also the hub (the broker).
//! - `CLUSTERSET_E2E_MARK_PODS_READY=true`: for API servers without nodes (no kubelet), the
//!   tests mark their own pods Running and Ready, as a kubelet would.
//! - `CLUSTERSET_E2E_BIN_DIR`: where `clusterset-agent` is (default: the target directory this
//!   test runs from; build it first with `cargo build -p clusterset-agent`).
#![forbid(unsafe_code)]

pub mod scenarios;

use std::collections::BTreeMap;
use std::future::Future;
use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail};
use k8s_openapi::api::authentication::v1::{TokenRequest, TokenRequestSpec};
use k8s_openapi::api::core::v1::ServiceAccount;
use kube::api::{Api, DynamicObject, Patch, PatchParams, PostParams};
use kube::config::{KubeConfigOptions, Kubeconfig};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::process::{Child, Command};

/// The field manager of the harness's own writes.
pub const MANAGER: &str = "clusterset-e2e";

/// The repository root (for `deploy/`).
pub fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The test settings, read from the environment.
#[derive(Debug, Clone)]
pub struct Settings {
    /// Context of cluster east (also the hub).
    pub east_context: String,
    /// Context of cluster west.
    pub west_context: String,
    /// Mark the tests' pods Running and Ready (API servers without nodes).
    pub mark_pods_ready: bool,
    /// Where the daemons' binaries are.
    pub bin_dir: PathBuf,
}

impl Settings {
    /// Reads the settings; a missing context is an error that says how to set it.
    pub fn from_env() -> anyhow::Result<Self> {
        let context = |name: &str| {
            std::env::var(name).map_err(|_| {
                anyhow!(
                    "{name} is not set: the e2e tests need two clusters, named by kubeconfig \
                     contexts, e.g. `kind create cluster --name east && kind create cluster --name \
                     west`, then {name}=kind-east (see docs/e2e.md)"
                )
            })
        };
        let bin_dir = match std::env::var_os("CLUSTERSET_E2E_BIN_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => {
                // target/debug/deps/e2e-<hash> -> target/debug
                let exe = std::env::current_exe()?;
                exe.parent()
                    .and_then(Path::parent)
                    .map(Path::to_path_buf)
                    .context("cannot find the target directory of this test")?
            }
        };
        Ok(Self {
            east_context: context("CLUSTERSET_E2E_EAST_CONTEXT")?,
            west_context: context("CLUSTERSET_E2E_WEST_CONTEXT")?,
            mark_pods_ready: std::env::var("CLUSTERSET_E2E_MARK_PODS_READY")
                .is_ok_and(|v| v == "true" || v == "1"),
            bin_dir,
        })
    }

    /// The path of binary `name`, which must have been built.
    pub fn binary(&self, name: &str) -> anyhow::Result<PathBuf> {
        let path = self.bin_dir.join(name);
        if !path.exists() {
            bail!(
                "{} does not exist: build it first (`cargo build -p {name}`) or set CLUSTERSET_E2E_BIN_DIR",
                path.display()
            );
        }
        Ok(path)
    }
}

/// One cluster: its admin client (for set-up and observation only) and how to reach it.
#[derive(Clone)]
pub struct Cluster {
    /// The cluster id used in the clusterset (`east`, `west`).
    pub id: String,
    /// The kubeconfig context.
    pub context: String,
    /// A client with the context's (admin) credentials.
    pub client: kube::Client,
    kubeconfig: Kubeconfig,
}

impl std::fmt::Debug for Cluster {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Cluster")
            .field("id", &self.id)
            .field("context", &self.context)
            .finish_non_exhaustive()
    }
}

impl Cluster {
    /// Connects to `context` of the user's kubeconfig.
    pub async fn connect(id: &str, context: &str) -> anyhow::Result<Self> {
        let kubeconfig = Kubeconfig::read().context("cannot read the kubeconfig")?;
        let options = KubeConfigOptions {
            context: Some(context.to_owned()),
            ..Default::default()
        };
        let config = kube::Config::from_custom_kubeconfig(kubeconfig.clone(), &options)
            .await
            .with_context(|| format!("cannot use context {context}"))?;
        let client = kube::Client::try_from(config)?;
        client
            .apiserver_version()
            .await
            .with_context(|| format!("cannot reach the API server of context {context}"))?;
        Ok(Self {
            id: id.to_owned(),
            context: context.to_owned(),
            client,
            kubeconfig,
        })
    }

    /// Server-side applies one object (as JSON), forced, under [`MANAGER`].
    pub async fn apply(&self, object: &serde_json::Value) -> anyhow::Result<()> {
        let object: DynamicObject = serde_json::from_value(object.clone())?;
        let types = object
            .types
            .clone()
            .context("an object without apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(&types)?;
        let (resource, capabilities) = pinned_kind(&self.client, &gvk)
            .await
            .with_context(|| format!("{} {} is not served", types.api_version, types.kind))?;
        let name = object
            .metadata
            .name
            .clone()
            .context("an object without a name")?;
        let api: Api<DynamicObject> = match &object.metadata.namespace {
            Some(ns) if capabilities.scope == kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(self.client.clone(), ns, &resource)
            }
            _ => Api::all_with(self.client.clone(), &resource),
        };
        api.patch(
            &name,
            &PatchParams::apply(MANAGER).force(),
            &Patch::Apply(&object),
        )
        .await
        .with_context(|| format!("cannot apply {} {name} to {}", types.kind, self.id))?;
        Ok(())
    }

    /// A kubeconfig file in `dir` for ServiceAccount `namespace/name` of this cluster, with a
    /// fresh token (TokenRequest), the cluster's server and CA.
    pub async fn service_account_kubeconfig(
        &self,
        namespace: &str,
        name: &str,
        dir: &Path,
    ) -> anyhow::Result<PathBuf> {
        let accounts: Api<ServiceAccount> = Api::namespaced(self.client.clone(), namespace);
        let request = TokenRequest {
            spec: TokenRequestSpec {
                audiences: Vec::new(),
                expiration_seconds: Some(24 * 3600),
                ..Default::default()
            },
            ..Default::default()
        };
        let issued: TokenRequest = accounts
            .create_token_request(name, &PostParams::default(), &request)
            .await
            .with_context(|| format!("cannot get a token of ServiceAccount {namespace}/{name}"))?;
        let token = issued
            .status
            .context("the TokenRequest came back without a token")?
            .token;
        let context = self
            .kubeconfig
            .contexts
            .iter()
            .find(|c| c.name == self.context)
            .and_then(|c| c.context.as_ref())
            .context("the context is not in the kubeconfig")?;
        let cluster = self
            .kubeconfig
            .clusters
            .iter()
            .find(|c| c.name == context.cluster)
            .and_then(|c| c.cluster.clone())
            .context("the context's cluster is not in the kubeconfig")?;
        let mut cluster_entry = serde_json::json!({"server": cluster.server});
        if let Some(data) = cluster.certificate_authority_data {
            cluster_entry["certificate-authority-data"] = data.into();
        }
        if let Some(file) = cluster.certificate_authority {
            cluster_entry["certificate-authority"] = file.into();
        }
        if cluster.insecure_skip_tls_verify == Some(true) {
            cluster_entry["insecure-skip-tls-verify"] = true.into();
        }
        let kubeconfig = serde_json::json!({
            "apiVersion": "v1", "kind": "Config",
            "clusters": [{"name": self.id, "cluster": cluster_entry}],
            "users": [{"name": name, "user": {"token": token}}],
            "contexts": [{"name": self.id, "context": {"cluster": self.id, "user": name}}],
            "current-context": self.id,
        });
        let path = dir.join(format!("{}-{namespace}-{name}.kubeconfig", self.id));
        std::fs::write(&path, serde_json::to_vec_pretty(&kubeconfig)?)?;
        Ok(path)
    }
}

/// Waits until `check` returns `Some`, trying every 100 ms, for at most `limit`; the error names
/// `what` and the last state `check` saw.
pub async fn wait_for<T, F, Fut>(what: &str, limit: Duration, mut check: F) -> anyhow::Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<Option<T>>>,
{
    let deadline = Instant::now() + limit;
    let mut last_error = None;
    loop {
        match check().await {
            Ok(Some(value)) => return Ok(value),
            Ok(None) => {}
            Err(error) => last_error = Some(error),
        }
        if Instant::now() >= deadline {
            return Err(match last_error {
                Some(error) => error.context(format!("gave up after {limit:?} waiting for {what}")),
                None => anyhow!("gave up after {limit:?} waiting for {what}"),
            });
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A free TCP port on 127.0.0.1 (also free for UDP in practice: the agent binds both).
pub fn free_port() -> anyhow::Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

/// `GET path` on `address` over plain HTTP/1.0; the status code and body.
pub async fn http_get(address: SocketAddr, path: &str) -> anyhow::Result<(u16, String)> {
    let mut stream = tokio::net::TcpStream::connect(address).await?;
    stream
        .write_all(format!("GET {path} HTTP/1.0\r\nHost: {address}\r\n\r\n").as_bytes())
        .await?;
    let mut response = String::new();
    stream.read_to_string(&mut response).await?;
    let code = response
        .split_whitespace()
        .nth(1)
        .and_then(|c| c.parse().ok())
        .context("not an HTTP response")?;
    let body = response
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_owned())
        .unwrap_or_default();
    Ok((code, body))
}

/// Asks `server` for `name`'s `record` records with `dig` (an outside DNS client); the answers.
pub async fn dig(server: SocketAddr, name: &str, record: &str) -> anyhow::Result<Vec<String>> {
    let output = Command::new("dig")
        .args([
            &format!("@{}", server.ip()),
            "-p",
            &server.port().to_string(),
            "+short",
            "+tries=1",
            "+time=1",
            name,
            record,
        ])
        .output()
        .await
        .context("cannot run dig (Debian package bind9-dnsutils)")?;
    let text = String::from_utf8(output.stdout)?;
    Ok(text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with(';'))
        .map(str::to_owned)
        .collect())
}

/// A daemon of ours run as a process (an agent or the operator): started, killed with SIGKILL,
/// started again with the same flags; ready when its `/readyz` answers 200.
#[derive(Debug)]
pub struct Daemon {
    /// What it is (`agent east`), for messages.
    pub name: String,
    /// Its HTTP address (`/metrics`, `/healthz`, `/readyz`).
    pub http: SocketAddr,
    command: Vec<String>,
    env: BTreeMap<String, String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Daemon {
    /// A daemon running `binary` with `args`, `KUBECONFIG=kubeconfig`, logging to
    /// `<log_dir>/<file name of name>.log`.
    pub fn new(
        name: &str,
        binary: &Path,
        args: Vec<String>,
        kubeconfig: &Path,
        http: SocketAddr,
        log_dir: &Path,
    ) -> Self {
        let mut command = vec![binary.display().to_string()];
        command.extend(args);
        let env = BTreeMap::from([
            ("KUBECONFIG".to_owned(), kubeconfig.display().to_string()),
            ("RUST_LOG".to_owned(), "info".to_owned()),
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ]);
        Self {
            name: name.to_owned(),
            http,
            command,
            env,
            log: log_dir.join(format!("{}.log", name.replace(' ', "-"))),
            child: None,
        }
    }

    /// Starts the process (output appended to its log) and waits until `/readyz` is 200.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&self.command[0])
            .args(&self.command[1..])
            .env_clear()
            .envs(&self.env)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", self.command[0]))?;
        self.child = Some(child);
        let http = self.http;
        wait_for(
            &format!("{} to be ready", self.name),
            Duration::from_secs(60),
            || async move {
                match http_get(http, "/readyz").await {
                    Ok((200, _)) => Ok(Some(())),
                    Ok((code, body)) => Err(anyhow!("/readyz {code}: {body}")),
                    Err(error) => Err(error),
                }
            },
        )
        .await
        .with_context(|| format!("see the log {}", self.log.display()))
    }

    /// Stops the process as Kubernetes stops a pod: SIGTERM (a clean shutdown: the agent hands
    /// its heartbeat Lease back), then SIGKILL if it has not exited within 10 s; reaps it.
    pub async fn terminate(&mut self) -> anyhow::Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        if let Some(pid) = child.id() {
            let status = tokio::process::Command::new("kill")
                .args(["-TERM", &pid.to_string()])
                .status()
                .await
                .context("cannot run kill -TERM")?;
            if status.success()
                && tokio::time::timeout(Duration::from_secs(10), child.wait())
                    .await
                    .is_ok()
            {
                return Ok(());
            }
        }
        child.kill().await?;
        Ok(())
    }

    /// Kills the process (SIGKILL: no clean shutdown) and reaps it.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill().await?;
        }
        Ok(())
    }

    /// The sum of every series of the counter or gauge `family` on `/metrics`.
    pub async fn metric(&self, family: &str) -> anyhow::Result<f64> {
        let (code, body) = http_get(self.http, "/metrics").await?;
        if code != 200 {
            bail!("/metrics of {} answered {code}", self.name);
        }
        Ok(body
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter(|l| {
                l.strip_prefix(family)
                    .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum())
    }

    /// The series of `family` on `/metrics`, as lines (`family{labels} value`).
    pub async fn metric_lines(&self, family: &str) -> anyhow::Result<Vec<String>> {
        let (_, body) = http_get(self.http, "/metrics").await?;
        Ok(body
            .lines()
            .filter(|l| {
                l.strip_prefix(family)
                    .is_some_and(|rest| rest.starts_with(' ') || rest.starts_with('{'))
            })
            .map(str::to_owned)
            .collect())
    }

    /// The value of one series (`family{labels}`, exactly as `/metrics` prints it), 0 while
    /// `/metrics` has no such series.
    pub async fn metric_series(&self, series: &str) -> anyhow::Result<f64> {
        let (code, body) = http_get(self.http, "/metrics").await?;
        if code != 200 {
            bail!("/metrics of {} answered {code}", self.name);
        }
        for line in body.lines() {
            if let Some(value) = line.strip_prefix(series).and_then(|r| r.strip_prefix(' ')) {
                return value
                    .trim()
                    .parse()
                    .with_context(|| format!("{series} of {} is {value:?}", self.name));
            }
        }
        Ok(0.0)
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

/// One `clusterset-agent run` of a member cluster, with ServiceAccount credentials.
#[derive(Debug)]
pub struct Agent {
    /// The cluster id.
    pub cluster_id: String,
    /// DNS address (UDP and TCP).
    pub dns: SocketAddr,
    /// The kubeconfig of its hub credentials (ServiceAccount `agent-<id>` of the broker
    /// namespace), for tests that act as this member on the hub.
    pub broker_kubeconfig: PathBuf,
    /// The process.
    pub daemon: Daemon,
}

impl Agent {
    /// The agent of `member` with `broker_kubeconfig` (the hub, as `agent-<id>`) and
    /// `local_kubeconfig` (the member, as `clusterset-system/clusterset-agent`); global CIDR
    /// `242.<n>.0.0/16`, clusterset CIDR `243.<n>.0.0/16`, Lighthouse-style names served too
    /// (`<cluster>.<svc>.<ns>.svc.clusterset.local`, which the operator resolves).
    pub fn new(
        settings: &Settings,
        member: &Cluster,
        n: u8,
        local_kubeconfig: &Path,
        broker_kubeconfig: &Path,
        log_dir: &Path,
    ) -> anyhow::Result<Self> {
        Self::replica(
            settings,
            member,
            n,
            local_kubeconfig,
            broker_kubeconfig,
            log_dir,
            "",
        )
    }

    /// Another replica of [`Agent::new`]'s agent (`replica` is appended to its name and
    /// identity): both elect a leader through the Lease `clusterset-agent` of the agent's
    /// namespace, as the chart's replicas do.
    pub fn replica(
        settings: &Settings,
        member: &Cluster,
        n: u8,
        local_kubeconfig: &Path,
        broker_kubeconfig: &Path,
        log_dir: &Path,
        replica: &str,
    ) -> anyhow::Result<Self> {
        let dns = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let http = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let args = vec![
            "run".to_owned(),
            format!("--cluster-id={}", member.id),
            // A fresh identity per run: an agent left running by an earlier run (a killed test
            // leaves its children behind) holds the Lease under another identity, which the
            // harness and the agent both notice, instead of two agents writing as one.
            format!(
                "--identity=e2e-agent-{}-{}{replica}",
                member.id,
                std::process::id()
            ),
            // As POD_NAMESPACE sets it in the pod.
            format!("--leader-lease-namespace={AGENT_NAMESPACE}"),
            format!("--broker-kubeconfig={}", broker_kubeconfig.display()),
            format!("--global-cidr=242.{n}.0.0/16"),
            format!("--clusterset-cidr=243.{n}.0.0/16"),
            format!("--dns-listen={dns}"),
            format!("--http-listen={http}"),
            "--lease-seconds=10".to_owned(),
            "--lighthouse-names".to_owned(),
        ];
        let daemon = Daemon::new(
            &format!("agent {}{replica}", member.id),
            &settings.binary("clusterset-agent")?,
            args,
            local_kubeconfig,
            http,
            log_dir,
        );
        Ok(Self {
            cluster_id: member.id.clone(),
            dns,
            broker_kubeconfig: broker_kubeconfig.to_path_buf(),
            daemon,
        })
    }
}

/// The tests share two clusters and one agent per cluster id: they run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The namespace of the hub's broker (deploy/clusterset-agent/hub.yaml).
pub const BROKER_NAMESPACE: &str = "clusterset-broker";
/// The agent's namespace on a member (deploy/clusterset-agent/member.yaml).
pub const AGENT_NAMESPACE: &str = "clusterset-system";
/// The operator's namespace (deploy/mcs-ceph-operator/operator.yaml).
pub const OPERATOR_NAMESPACE: &str = "mcs-ceph-operator";

fn documents(file: &str) -> anyhow::Result<Vec<serde_json::Value>> {
    let text = std::fs::read_to_string(repo_root().join(file))
        .with_context(|| format!("cannot read {file}"))?;
    Ok(serde_saphyr::from_multiple(&text)?)
}

/// The hub's namespace of cluster `id`'s ExportRecords (`clusterset-broker-<id>`), where only
/// `agent-<id>` may write.
pub fn records_namespace(id: &str) -> anyhow::Result<String> {
    let cluster = mcs_types::ClusterId::new(id)?;
    Ok(mcs_controller::broker::records_namespace(
        BROKER_NAMESPACE,
        &cluster,
    ))
}

/// A client with the credentials of the kubeconfig file `path` (its current context): for
/// acting as an agent's ServiceAccount ([`Agent::broker_kubeconfig`]).
pub async fn kubeconfig_client(path: &Path) -> anyhow::Result<kube::Client> {
    let kubeconfig = Kubeconfig::read_from(path)
        .with_context(|| format!("cannot read the kubeconfig {}", path.display()))?;
    let config =
        kube::Config::from_custom_kubeconfig(kubeconfig, &KubeConfigOptions::default()).await?;
    Ok(kube::Client::try_from(config)?)
}

/// Applies `deploy/clusterset-agent/hub.yaml` to `hub` as it is (the output of
/// `clusterset-agent hub-manifests --cluster east --cluster west`): the namespaces, the
/// ServiceAccounts `agent-east` and `agent-west`, their RBAC and their heartbeat Leases. A
/// server-side apply sets only the fields the document has, and the Leases' documents have no
/// `spec`: applying them again leaves the holder and renew time an agent wrote as they are.
pub async fn apply_hub(hub: &Cluster) -> anyhow::Result<()> {
    for document in documents("deploy/clusterset-agent/hub.yaml")? {
        hub.apply(&document).await?;
    }
    Ok(())
}

/// Removes what the hub kept from before the per-cluster records namespaces (step 3 of the
/// upgrade in docs/clusterset-agent.md), so that the hub is exactly hub.yaml's: the old Role
/// `clusterset-agent` of the broker namespace, which let every member write every record and
/// Lease there, the RoleBindings `agent-<id>` to it (left alone, RBAC would name the missing
/// Role in every refusal), the upgrade's `clusterset-agent-shared-records-writer`, and the
/// records still stored in the shared namespace, which the agents now ignore.
async fn remove_shared_layout(hub: &Cluster, members: &[&Cluster]) -> anyhow::Result<()> {
    use k8s_openapi::api::rbac::v1::{Role, RoleBinding};
    const OLD_ROLE: &str = "clusterset-agent";
    let writer = mcs_controller::hub::SHARED_RECORDS_WRITER;
    let roles: Api<Role> = Api::namespaced(hub.client.clone(), BROKER_NAMESPACE);
    let bindings: Api<RoleBinding> = Api::namespaced(hub.client.clone(), BROKER_NAMESPACE);
    let mut removed = Vec::new();
    for member in members {
        let name = format!("agent-{}", member.id);
        let old = bindings
            .get_opt(&name)
            .await?
            .is_some_and(|b| b.role_ref.kind == "Role" && b.role_ref.name == OLD_ROLE);
        if old {
            bindings.delete(&name, &Default::default()).await?;
            removed.push(format!("RoleBinding {name}"));
        }
    }
    if bindings.get_opt(writer).await?.is_some() {
        bindings.delete(writer, &Default::default()).await?;
        removed.push(format!("RoleBinding {writer}"));
    }
    for role in [OLD_ROLE, writer] {
        if roles.get_opt(role).await?.is_some() {
            roles.delete(role, &Default::default()).await?;
            removed.push(format!("Role {role}"));
        }
    }
    let records: Api<mcs_controller::broker::BrokerRecord> =
        Api::namespaced(hub.client.clone(), BROKER_NAMESPACE);
    let shared = records.list(&kube::api::ListParams::default()).await?;
    for record in &shared {
        if let Some(name) = &record.metadata.name {
            records.delete(name, &Default::default()).await?;
            removed.push(format!("ExportRecord {name}"));
        }
    }
    if !removed.is_empty() {
        println!(
            "removed the shared broker layout of an earlier version from the hub's {BROKER_NAMESPACE}: {}",
            removed.join(", ")
        );
    }
    Ok(())
}

/// Two clusters with the CRDs and deploy/'s RBAC installed and an agent running in each (east
/// is also the hub), for one test at a time.
pub struct World {
    /// The settings.
    pub settings: Settings,
    /// Cluster east (member and hub).
    pub east: Cluster,
    /// Cluster west.
    pub west: Cluster,
    /// The agents: east's, then west's.
    pub agents: Vec<Agent>,
    /// Kubeconfigs and logs.
    pub dir: tempfile::TempDir,
    /// Where the daemons log (`CLUSTERSET_E2E_LOG_DIR`, default inside `dir`).
    pub logs: PathBuf,
    namespaces: Vec<String>,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

impl World {
    /// Installs everything and starts both agents (with ServiceAccount tokens).
    pub async fn start() -> anyhow::Result<Self> {
        let serial = SERIAL.lock().await;
        let settings = Settings::from_env()?;
        let east = Cluster::connect("east", &settings.east_context).await?;
        let west = Cluster::connect("west", &settings.west_context).await?;
        let started = Instant::now();
        install(&east, &west).await?;
        println!(
            "installed the CRDs and deploy/'s RBAC on both clusters in {:?}",
            started.elapsed()
        );
        let dir = tempfile::tempdir()?;
        let logs = std::env::var_os("CLUSTERSET_E2E_LOG_DIR")
            .map_or_else(|| dir.path().to_path_buf(), PathBuf::from);
        std::fs::create_dir_all(&logs)?;
        for member in [&east, &west] {
            no_other_agent(&east, &member.id).await?;
        }
        let mut agents = Vec::new();
        for (n, member) in [(1u8, &east), (2u8, &west)] {
            let local = member
                .service_account_kubeconfig(AGENT_NAMESPACE, "clusterset-agent", dir.path())
                .await?;
            let broker = east
                .service_account_kubeconfig(
                    BROKER_NAMESPACE,
                    &format!("agent-{}", member.id),
                    dir.path(),
                )
                .await?;
            let mut agent = Agent::new(&settings, member, n, &local, &broker, &logs)?;
            agent.daemon.start().await?;
            println!(
                "agent {} ready with ServiceAccount credentials, DNS on {}",
                member.id, agent.dns
            );
            agents.push(agent);
        }
        Ok(Self {
            settings,
            east,
            west,
            agents,
            dir,
            logs,
            namespaces: Vec::new(),
            _serial: serial,
        })
    }

    /// A new namespace `<prefix>-<seconds>` in both clusters (MCS namespace sameness), deleted
    /// by [`World::stop`].
    pub async fn namespace(&mut self, prefix: &str) -> anyhow::Result<String> {
        let seconds = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)?
            .as_secs();
        let name = format!("{prefix}-{seconds}");
        for cluster in [&self.east, &self.west] {
            cluster
                .apply(&serde_json::json!({
                    "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}
                }))
                .await?;
        }
        self.namespaces.push(name.clone());
        // Pods (ours, and a Deployment's) are refused until the controller manager has made the
        // namespace's `default` ServiceAccount; after an API server restart that can take a
        // while.
        for cluster in [&self.east, &self.west] {
            let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), &name);
            wait_for(
                &format!("the default ServiceAccount of {name} in {}", cluster.id),
                Duration::from_secs(120),
                || {
                    let accounts = accounts.clone();
                    async move { Ok(accounts.get_opt("default").await?.map(|_| ())) }
                },
            )
            .await?;
        }
        Ok(name)
    }

    /// Prints every daemon's log (after a failure).
    pub fn print_logs(&self) {
        for agent in &self.agents {
            eprintln!(
                "---- log of {} ----\n{}",
                agent.daemon.name,
                agent.daemon.log()
            );
        }
    }

    /// Stops the agents cleanly (SIGTERM, as a rollout does: they hand their Leases back, so
    /// the next test's agents take them at once) and deletes the test namespaces (kept with
    /// `CLUSTERSET_E2E_KEEP_NAMESPACES=true`, to look at after a failure).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        for agent in &mut self.agents {
            agent.daemon.terminate().await?;
        }
        if std::env::var("CLUSTERSET_E2E_KEEP_NAMESPACES").is_ok_and(|v| v == "true") {
            println!("kept the namespaces {:?}", self.namespaces);
            return Ok(());
        }
        for cluster in [&self.east, &self.west] {
            let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
                Api::all(cluster.client.clone());
            for name in &self.namespaces {
                let _ = namespaces
                    .delete(name, &kube::api::DeleteParams::default())
                    .await;
                if self.settings.mark_pods_ready {
                    // Without a kubelet nothing confirms the deletion of a pod bound to a node
                    // (the stand-in stopped with its scenario): the namespace would stay
                    // Terminating. A grace period of 0 is that confirmation.
                    let pods: Api<k8s_openapi::api::core::v1::Pod> =
                        Api::namespaced(cluster.client.clone(), name);
                    let _ = pods
                        .delete_collection(
                            &kube::api::DeleteParams {
                                grace_period_seconds: Some(0),
                                ..Default::default()
                            },
                            &kube::api::ListParams::default(),
                        )
                        .await;
                }
            }
        }
        Ok(())
    }
}

/// Waits until no other agent of cluster `id` renews its heartbeat Lease on the hub: a Lease
/// left by a stopped agent runs out within its duration; one still renewed after twice that
/// belongs to an agent that is still running (an earlier run's, killed with its test), and two
/// agents of one cluster id would fight over every object.
async fn no_other_agent(hub: &Cluster, id: &str) -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    let leases: Api<Lease> = Api::namespaced(hub.client.clone(), BROKER_NAMESPACE);
    let name = format!("clusterset-agent-{id}");
    wait_for(
        &format!("the heartbeat Lease {name} to run out"),
        Duration::from_secs(35),
        || {
            let (leases, name) = (leases.clone(), name.clone());
            async move {
                let Some(lease) = leases.get_opt(&name).await? else {
                    return Ok(Some(()));
                };
                let spec = lease.spec.unwrap_or_default();
                let holder = spec.holder_identity.clone().unwrap_or_default();
                let expiry = spec.renew_time.map(|t| {
                    t.0 + k8s_openapi::jiff::SignedDuration::from_secs(i64::from(
                        spec.lease_duration_seconds.unwrap_or(0),
                    ))
                });
                if holder.is_empty()
                    || expiry.is_none_or(|e| e < k8s_openapi::jiff::Timestamp::now())
                {
                    return Ok(Some(()));
                }
                Err(anyhow!(
                    "another clusterset-agent of cluster {id} still renews its Lease on the hub \
                     (holder {holder:?}): stop it first (an e2e run that was killed leaves its \
                     agents running: pkill -f 'identity=e2e-agent-')"
                ))
            }
        },
    )
    .await
}

/// Installs the CRDs and deploy/'s RBAC: the hub on east (hub.yaml: a records namespace,
/// ServiceAccount, RBAC and heartbeat Lease per member), the agent's ClusterRole and
/// ServiceAccount on each member, the operator's on east.
async fn install(east: &Cluster, west: &Cluster) -> anyhow::Result<()> {
    for cluster in [east, west] {
        for crd in mcs_types::crd::mcs_crds()?
            .into_iter()
            .chain(mcs_types::crd::about_crds()?)
        {
            cluster.apply(&serde_json::to_value(crd)?).await?;
        }
    }
    east.apply(&serde_json::to_value(
        mcs_controller::crd::export_record_crd()?,
    )?)
    .await?;
    for document in documents("deploy/mcs-ceph-operator/crd.yaml")? {
        east.apply(&document).await?;
    }
    for cluster in [east, west] {
        wait_for(
            "the MCS CRDs to be served",
            Duration::from_secs(60),
            || async move {
                let api: Api<mcs_types::v1beta1::ServiceExport> = Api::all(cluster.client.clone());
                Ok(api
                    .list(&kube::api::ListParams::default().limit(1))
                    .await
                    .ok()
                    .map(|_| ()))
            },
        )
        .await?;
    }
    // hub.yaml is `clusterset-agent hub-manifests --cluster east --cluster west`: both members'
    // namespaces, ServiceAccounts, RBAC and Leases, applied as they are.
    apply_hub(east).await?;
    remove_shared_layout(east, &[east, west]).await?;
    // The daemons run here as processes: their Deployments and Services are not applied.
    let rbac = |document: &serde_json::Value| {
        matches!(
            document["kind"].as_str().unwrap_or(""),
            "Namespace"
                | "ServiceAccount"
                | "ClusterRole"
                | "ClusterRoleBinding"
                | "Role"
                | "RoleBinding"
        )
    };
    for document in documents("deploy/clusterset-agent/member.yaml")? {
        if rbac(&document) {
            east.apply(&document).await?;
            west.apply(&document).await?;
        }
    }
    for document in documents("deploy/mcs-ceph-operator/operator.yaml")? {
        if rbac(&document) {
            east.apply(&document).await?;
        }
    }
    Ok(())
}

/// A stand-in for the kubelet on API servers without nodes: every pod of `namespace` is bound
/// to a node that does not exist and marked Running and Ready with a pod IP, as a kubelet
/// would report it, and a pod being deleted is removed at once (the kubelet's confirmation).
/// Stops when the returned [`Kubelet`] is dropped.
pub fn kubelet(cluster: &Cluster, namespace: &str) -> Kubelet {
    use futures::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), namespace);
    let client = cluster.client.clone();
    // The node the pods are bound to: it must exist and stay Ready, or the EndpointSlice
    // controller leaves its pods out and the pod garbage collector deletes them.
    let heartbeat = tokio::spawn(async move {
        loop {
            let _ = node_heartbeat(&client).await;
            tokio::time::sleep(Duration::from_secs(5)).await;
        }
    });
    Kubelet(
        heartbeat,
        tokio::spawn(async move {
            let mut next_ip = 10u32;
            let mut events =
                kube::runtime::watcher(pods.clone(), kube::runtime::watcher::Config::default())
                    .boxed();
            while let Some(event) = events.next().await {
                let pod = match event {
                    Ok(kube::runtime::watcher::Event::Apply(pod))
                    | Ok(kube::runtime::watcher::Event::InitApply(pod)) => pod,
                    _ => continue,
                };
                let ready = pod
                    .status
                    .as_ref()
                    .and_then(|s| s.conditions.as_ref())
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"));
                let Some(name) = pod.metadata.name.clone() else {
                    continue;
                };
                if pod.metadata.deletion_timestamp.is_some() {
                    // The kubelet confirms a deletion once the containers stopped: here at once.
                    let _ = pods
                        .delete(
                            &name,
                            &kube::api::DeleteParams {
                                grace_period_seconds: Some(0),
                                ..Default::default()
                            },
                        )
                        .await;
                    continue;
                }
                if ready {
                    continue;
                }
                if pod
                    .spec
                    .as_ref()
                    .and_then(|s| s.node_name.as_ref())
                    .is_none()
                {
                    let binding = serde_json::json!({
                        "apiVersion": "v1", "kind": "Binding", "metadata": {"name": name},
                        "target": {"apiVersion": "v1", "kind": "Node", "name": STAND_IN_NODE},
                    });
                    let _ = pods
                        .create_subresource::<_, serde_json::Value>(
                            "binding",
                            &name,
                            &PostParams::default(),
                            &binding,
                        )
                        .await;
                }
                next_ip += 1;
                let ip = format!("10.244.{}.{}", next_ip / 250, next_ip % 250 + 1);
                let now = k8s_openapi::jiff::Timestamp::now().to_string();
                let status = serde_json::json!({
                    "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name},
                    "status": {
                        "phase": "Running", "podIP": ip, "podIPs": [{"ip": ip}],
                        "conditions": [
                            {"type": "Ready", "status": "True", "lastTransitionTime": now},
                            {"type": "ContainersReady", "status": "True", "lastTransitionTime": now},
                        ],
                    },
                });
                let _ = pods
                    .patch_status(
                        &name,
                        &PatchParams::apply("e2e-kubelet").force(),
                        &Patch::Apply(&status),
                    )
                    .await;
            }
        }),
    )
}

/// The node of the kubelet stand-in.
pub const STAND_IN_NODE: &str = "e2e-node";

/// The stand-in node's heartbeat: the Node (created once) reports Ready, and its Lease in
/// `kube-node-lease` is renewed, so that the node lifecycle controller keeps it Ready.
async fn node_heartbeat(client: &kube::Client) -> anyhow::Result<()> {
    use k8s_openapi::api::coordination::v1::Lease;
    use k8s_openapi::api::core::v1::Node;
    let now = k8s_openapi::jiff::Timestamp::now().to_string();
    let nodes: Api<Node> = Api::all(client.clone());
    let node = serde_json::json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": STAND_IN_NODE},
    });
    let apply = PatchParams::apply("e2e-kubelet").force();
    nodes
        .patch(STAND_IN_NODE, &apply, &Patch::Apply(&node))
        .await?;
    let status = serde_json::json!({
        "apiVersion": "v1", "kind": "Node", "metadata": {"name": STAND_IN_NODE},
        "status": {"conditions": [{"type": "Ready", "status": "True", "reason": "KubeletReady",
            "message": "the e2e tests' kubelet stand-in", "lastHeartbeatTime": now,
            "lastTransitionTime": now}]},
    });
    nodes
        .patch_status(STAND_IN_NODE, &apply, &Patch::Apply(&status))
        .await?;
    let leases: Api<Lease> = Api::namespaced(client.clone(), "kube-node-lease");
    let now_micro = k8s_openapi::jiff::Timestamp::now()
        .strftime("%Y-%m-%dT%H:%M:%S%.6fZ")
        .to_string();
    let lease = serde_json::json!({
        "apiVersion": "coordination.k8s.io/v1", "kind": "Lease",
        "metadata": {"name": STAND_IN_NODE, "namespace": "kube-node-lease"},
        "spec": {"holderIdentity": STAND_IN_NODE, "leaseDurationSeconds": 40, "renewTime": now_micro},
    });
    leases
        .patch(STAND_IN_NODE, &apply, &Patch::Apply(&lease))
        .await?;
    Ok(())
}

/// The running kubelet stand-in (node heartbeat, pods); stops when dropped.
#[derive(Debug)]
pub struct Kubelet(tokio::task::JoinHandle<()>, tokio::task::JoinHandle<()>);

impl Drop for Kubelet {
    fn drop(&mut self) {
        self.0.abort();
        self.1.abort();
    }
}

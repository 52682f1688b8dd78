//! The harness of the end-to-end tests against real Kubernetes API servers (`tests/e2e.rs`):
//! by default two clusters of each supported release that the suite starts itself
//! ([`local`]: etcd, kube-apiserver, kube-controller-manager, kube-scheduler and kwok from
//! `tests/k8s-tools`), or two clusters named by kubeconfig contexts (kind, k3d, your own); the
//! CRDs and the RBAC of `deploy/` installed on them, the agents run as processes with
//! ServiceAccount tokens (never an admin's credentials), and waits on conditions with a
//! deadline.
//!
//! Settings (environment, all optional):
//! - `CLUSTERSET_E2E_RELEASES`: the releases of the suite's own clusters (`1.35,1.37`, the
//!   default: every release pinned in tests/k8s-tools).
//! - `CLUSTERSET_E2E_EAST_CONTEXT`, `CLUSTERSET_E2E_WEST_CONTEXT`: run on these two clusters of
//!   the kubeconfig (`KUBECONFIG` or `~/.kube/config`) instead; east is also the hub (the broker).
//! - `CLUSTERSET_E2E_BIN_DIR`: where `clusterset-agent` is (default: the target directory this
//!   test runs from; build it first with `cargo build -p clusterset-agent`).
//! - `CLUSTERSET_E2E_LOG_DIR`: where the daemons log (default: each world's temporary
//!   directory, removed with it).
//! - `CLUSTERSET_E2E_DAEMON_LOG`: the daemons' `RUST_LOG` (default `info`; e.g.
//!   `info,mcs_controller=debug`).
#![forbid(unsafe_code)]

pub mod charts;
pub mod conformance;
pub mod gateway;
pub mod local;
pub mod scale;
pub mod scenarios;
pub mod strictness;

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
use std::io::Seek;

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
    /// Where the daemons' binaries are.
    pub bin_dir: PathBuf,
}

impl Settings {
    /// Reads the settings.
    pub fn from_env() -> anyhow::Result<Self> {
        let bin_dir = match std::env::var_os("CLUSTERSET_E2E_BIN_DIR") {
            Some(dir) => PathBuf::from(dir),
            None => {
                // target/debug/deps/e2e-<hash> (a test) or target/release/scale (the bench)
                // -> target/debug, target/release
                let exe = std::env::current_exe()?;
                let dir = exe
                    .parent()
                    .context("cannot find the directory of this program")?;
                let bin_dir = if dir.file_name().is_some_and(|n| n == "deps") {
                    dir.parent()
                        .map(Path::to_path_buf)
                        .context("cannot find the target directory of this test")?
                } else {
                    dir.to_path_buf()
                };
                build_daemons(&bin_dir)?;
                bin_dir
            }
        };
        Ok(Self { bin_dir })
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

/// The daemons the scenarios run, built (or found current) by cargo into `bin_dir`
/// (`target/<profile>`), once per test process: `cargo test -p clusterset-e2e` needs no build
/// step of its own, and never runs a binary older than the source.
fn build_daemons(bin_dir: &Path) -> anyhow::Result<()> {
    static BUILT: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    BUILT
        .get_or_init(|| {
            let profile = bin_dir
                .file_name()
                .and_then(|n| n.to_str())
                .unwrap_or("debug");
            let target_dir = bin_dir.parent().unwrap_or(bin_dir);
            let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
            let started = Instant::now();
            let output = std::process::Command::new(&cargo)
                .current_dir(repo_root())
                .args([
                    "build",
                    "--locked",
                    "-p",
                    "clusterset-agent",
                    "-p",
                    "mcs-ceph-operator",
                    "-p",
                    "clusterset-gateway",
                ])
                .args([
                    "--profile",
                    if profile == "debug" { "dev" } else { profile },
                ])
                .arg("--target-dir")
                .arg(target_dir)
                .output()
                .map_err(|e| format!("cannot run {cargo} build: {e}"))?;
            if !output.status.success() {
                return Err(format!(
                    "cargo build -p clusterset-agent -p mcs-ceph-operator -p clusterset-gateway failed:\n{}",
                    String::from_utf8_lossy(&output.stderr)
                ));
            }
            println!("the daemons are built ({:.1?})", started.elapsed());
            Ok(())
        })
        .clone()
        .map_err(|e| anyhow!(e))
}

/// Where a scenario runs.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// Two clusters of this release that the suite starts itself.
    Local(local::Release),
    /// The user's two clusters, by kubeconfig contexts.
    Contexts {
        /// Cluster east (also the hub).
        east: String,
        /// Cluster west.
        west: String,
    },
}

impl Target {
    /// Where every scenario runs: the contexts of `CLUSTERSET_E2E_EAST_CONTEXT` and
    /// `CLUSTERSET_E2E_WEST_CONTEXT` when set (both or neither), else the suite's own clusters
    /// of every selected release.
    pub fn all() -> anyhow::Result<Vec<Target>> {
        let east = std::env::var("CLUSTERSET_E2E_EAST_CONTEXT").ok();
        let west = std::env::var("CLUSTERSET_E2E_WEST_CONTEXT").ok();
        match (east, west) {
            (Some(east), Some(west)) => Ok(vec![Target::Contexts { east, west }]),
            (None, None) => Ok(local::Release::selected()?
                .into_iter()
                .map(Target::Local)
                .collect()),
            (Some(_), None) | (None, Some(_)) => bail!(
                "set both CLUSTERSET_E2E_EAST_CONTEXT and CLUSTERSET_E2E_WEST_CONTEXT (two \
                 clusters of your kubeconfig, e.g. kind-east and kind-west), or neither (the \
                 suite then starts its own clusters; see docs/e2e.md)"
            ),
        }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Target::Local(release) => write!(f, "Kubernetes {release}"),
            Target::Contexts { east, west } => write!(f, "contexts {east} and {west}"),
        }
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
        Self::connect_with(id, kubeconfig, context).await
    }

    /// The kubeconfig it was reached through (its context is [`Cluster::context`]).
    pub fn kubeconfig(&self) -> &Kubeconfig {
        &self.kubeconfig
    }

    /// Connects to `context` of `kubeconfig`.
    pub async fn connect_with(
        id: &str,
        kubeconfig: Kubeconfig,
        context: &str,
    ) -> anyhow::Result<Self> {
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

impl Cluster {
    /// A kubeconfig file in `dir` with this cluster's admin credentials (the user's context, or
    /// the suite's admin token), for tools that act as an administrator would (`helm install`);
    /// its current context is [`Cluster::context`].
    pub fn admin_kubeconfig(&self, dir: &Path) -> anyhow::Result<PathBuf> {
        let mut kubeconfig = self.kubeconfig.clone();
        kubeconfig.current_context = Some(self.context.clone());
        let path = dir.join(format!("{}-admin.kubeconfig", self.id));
        std::fs::write(&path, serde_json::to_vec_pretty(&kubeconfig)?)
            .with_context(|| format!("cannot write {}", path.display()))?;
        Ok(path)
    }
}

/// Connects to `target`'s clusters (starting the suite's own on first use): east (also the
/// hub), west, and how to stop and start their API servers.
pub async fn connect(target: &Target) -> anyhow::Result<(Cluster, Cluster, Faults)> {
    Ok(match target {
        Target::Local(release) => {
            let pair = local::clusters(*release).await?;
            let connect = |cluster: &local::LocalCluster| {
                let kubeconfig = Kubeconfig::read_from(&cluster.kubeconfig);
                let name = cluster.name.clone();
                async move { Cluster::connect_with(&name, kubeconfig?, &name).await }
            };
            let (east, west) = (connect(&pair.east).await?, connect(&pair.west).await?);
            (east, west, Faults::Local(pair))
        }
        Target::Contexts { east, west } => (
            Cluster::connect("east", east).await?,
            Cluster::connect("west", west).await?,
            Faults::Hooks,
        ),
    })
}

/// Where the daemons log: `CLUSTERSET_E2E_LOG_DIR`, else `dir`; created.
pub fn log_dir(dir: &Path) -> anyhow::Result<PathBuf> {
    let logs =
        std::env::var_os("CLUSTERSET_E2E_LOG_DIR").map_or_else(|| dir.to_path_buf(), PathBuf::from);
    std::fs::create_dir_all(&logs)
        .with_context(|| format!("cannot create the log directory {}", logs.display()))?;
    Ok(logs)
}

/// Creates namespace `name` in each of `clusters` and waits until its `default` ServiceAccount
/// exists there: pods (ours, and a Deployment's) are refused until the controller manager has
/// made it, and after an API server restart that can take a while.
pub async fn create_namespace(clusters: &[&Cluster], name: &str) -> anyhow::Result<()> {
    for cluster in clusters {
        cluster
            .apply(&serde_json::json!({
                "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}
            }))
            .await?;
    }
    for cluster in clusters {
        let accounts: Api<ServiceAccount> = Api::namespaced(cluster.client.clone(), name);
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
    Ok(())
}

/// `<prefix>-<seconds since the epoch>`: a namespace name of this run.
pub fn run_name(prefix: &str) -> anyhow::Result<String> {
    let seconds = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_secs();
    Ok(format!("{prefix}-{seconds}"))
}

/// Deletes `names` in each of `clusters` (not waiting for them to go); kept with
/// `CLUSTERSET_E2E_KEEP_NAMESPACES=true`, to look at after a failure.
pub async fn delete_namespaces(clusters: &[&Cluster], names: &[String]) {
    if std::env::var("CLUSTERSET_E2E_KEEP_NAMESPACES").is_ok_and(|v| v == "true") {
        println!("kept the namespaces {names:?}");
        return;
    }
    for cluster in clusters {
        let namespaces: Api<k8s_openapi::api::core::v1::Namespace> =
            Api::all(cluster.client.clone());
        for name in names {
            let _ = namespaces
                .delete(name, &kube::api::DeleteParams::default())
                .await;
        }
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
///
/// Its listening flags (`--http-listen`, `--dns-listen`, `--listen`) are given port 0: the
/// daemon binds a port itself and logs it (no port picked by the harness can be taken by another
/// socket before the daemon binds it); the first start reads the ports from the log, and later
/// starts reuse them, as a pod keeps its ports across restarts.
#[derive(Debug)]
pub struct Daemon {
    /// What it is (`agent east`), for messages.
    pub name: String,
    /// Its HTTP address (`/metrics`, `/healthz`, `/readyz`); known once started.
    pub http: SocketAddr,
    command: Vec<String>,
    env: BTreeMap<String, String>,
    log: PathBuf,
    child: Option<Child>,
    /// (flag, the message of the log line that reports the address it bound); the first is
    /// the HTTP endpoints'.
    listeners: Vec<(String, String)>,
}

/// The log message of a daemon's HTTP endpoints, with its `address` field.
pub const HTTP_LISTENING: &str = "HTTP endpoints listening";
/// The log message of the agent's DNS server, with its `address` field.
pub const DNS_LISTENING: &str = "clusterset DNS server listening";

impl Daemon {
    /// A daemon running `binary` with `args`, `KUBECONFIG=kubeconfig`, logging to
    /// `<log_dir>/<file name of name>.log`; `http_flag` (`--http-listen`) is set to
    /// `127.0.0.1:0`.
    pub fn new(
        name: &str,
        binary: &Path,
        args: Vec<String>,
        kubeconfig: &Path,
        http_flag: &str,
        log_dir: &Path,
    ) -> Self {
        let mut command = vec![binary.display().to_string()];
        command.extend(args);
        command.push(format!("{http_flag}=127.0.0.1:0"));
        let env = BTreeMap::from([
            ("KUBECONFIG".to_owned(), kubeconfig.display().to_string()),
            (
                "RUST_LOG".to_owned(),
                std::env::var("CLUSTERSET_E2E_DAEMON_LOG").unwrap_or_else(|_| "info".to_owned()),
            ),
            ("NO_COLOR".to_owned(), "1".to_owned()),
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
        ]);
        Self {
            name: name.to_owned(),
            http: SocketAddr::from(([127, 0, 0, 1], 0)),
            command,
            env,
            log: log_dir.join(format!("{}.log", name.replace(' ', "-"))),
            child: None,
            listeners: vec![(http_flag.to_owned(), HTTP_LISTENING.to_owned())],
        }
    }

    /// Also listens with `flag` on `127.0.0.1:0`, reporting the address in a log line with
    /// `message`.
    pub fn listening(mut self, flag: &str, message: &str) -> Self {
        self.command.push(format!("{flag}=127.0.0.1:0"));
        self.listeners.push((flag.to_owned(), message.to_owned()));
        self
    }

    /// Also sets the environment variable `name` to `value`, as a pod's `env` does (a flag
    /// the command line has wins over it, as the daemons read flags first).
    pub fn env(mut self, name: &str, value: &str) -> Self {
        self.env.insert(name.to_owned(), value.to_owned());
        self
    }

    /// The daemon's log file.
    pub fn log_path(&self) -> &Path {
        &self.log
    }

    /// The address of listening flag `flag`, as the command line has it now (port 0 until the
    /// first start).
    pub fn address(&self, flag: &str) -> anyhow::Result<SocketAddr> {
        local::flag(&self.command, flag.trim_start_matches("--"))
            .with_context(|| format!("{} has no {flag}", self.name))?
            .parse()
            .with_context(|| format!("{flag} of {}", self.name))
    }

    /// Starts the process (output appended to its log), learns the ports it bound on its first
    /// start, and waits until `/readyz` is 200; a process that exits before fails at once, with
    /// its log.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        let mut log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let log_start = log.seek(std::io::SeekFrom::End(0))?;
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
        for (flag, message) in self.listeners.clone() {
            if self.address(&flag)?.port() != 0 {
                continue;
            }
            let address = self
                .wait_for_log(&format!("{flag}'s address in the log"), log_start, |line| {
                    line.contains(&message)
                        .then(|| field(line, "address"))
                        .flatten()
                })
                .await?;
            local::set_flag(&mut self.command, flag.trim_start_matches("--"), &address);
        }
        self.http = self.address(&self.listeners[0].0)?;
        let http = self.http;
        let ready = self
            .wait_running(&format!("{} to be ready", self.name), || async move {
                match http_get(http, "/readyz").await {
                    Ok((200, _)) => Ok(Some(())),
                    Ok((code, body)) => Err(anyhow!("/readyz {code}: {body}")),
                    Err(error) => Err(error),
                }
            })
            .await;
        ready.with_context(|| format!("see the log {}", self.log.display()))
    }

    /// Waits up to 60 s for `check`, failing at once, with the log, when the process exits.
    async fn wait_running<T, F, Fut>(&mut self, what: &str, mut check: F) -> anyhow::Result<T>
    where
        F: FnMut() -> Fut,
        Fut: Future<Output = anyhow::Result<Option<T>>>,
    {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                bail!(
                    "{} exited ({status}) while the test waited for {what}; its log ({}):\n{}",
                    self.name,
                    self.log.display(),
                    self.log()
                );
            }
            match check().await {
                Ok(Some(value)) => return Ok(value),
                Ok(None) | Err(_) if Instant::now() < deadline => {}
                Ok(None) => bail!("gave up after 60 s waiting for {what}"),
                Err(error) => {
                    return Err(error.context(format!("gave up after 60 s waiting for {what}")));
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Waits for a line of the log written since `from` for which `find` gives a value.
    async fn wait_for_log<T>(
        &mut self,
        what: &str,
        from: u64,
        find: impl Fn(&str) -> Option<T>,
    ) -> anyhow::Result<T> {
        let path = self.log.clone();
        self.wait_running(what, || {
            let found = read_from(&path, from)
                .lines()
                .find_map(|line| find(&strip_ansi(line)));
            async move { Ok(found) }
        })
        .await
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

    /// The process's peak resident memory (`VmHWM`, KiB) and CPU time (user + system, s)
    /// so far, from `/proc`; fails when it is not running.
    pub fn resources(&self) -> anyhow::Result<Resources> {
        let pid = self
            .child
            .as_ref()
            .and_then(Child::id)
            .with_context(|| format!("{} is not running", self.name))?;
        let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
        let peak_rss_kib = status
            .lines()
            .find_map(|l| l.strip_prefix("VmHWM:"))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .with_context(|| format!("no VmHWM in /proc/{pid}/status"))?;
        // The fields after the command's closing parenthesis: utime and stime are the 12th
        // and 13th (fields 14 and 15 of proc(5)), in clock ticks (100 per second on Linux).
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
        let after = stat.rsplit_once(')').map_or("", |(_, rest)| rest);
        let fields: Vec<&str> = after.split_whitespace().collect();
        let ticks = |i: usize| -> anyhow::Result<f64> {
            Ok(fields
                .get(i)
                .with_context(|| format!("/proc/{pid}/stat is short: {stat}"))?
                .parse::<f64>()?)
        };
        Ok(Resources {
            peak_rss_kib,
            cpu_seconds: (ticks(11)? + ticks(12)?) / 100.0,
        })
    }

    /// The daemon's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// What a failed test prints of this daemon: its last 60 log lines, and where the whole
    /// log was kept (copied to `<temp dir>/clusterset-e2e-failed/<test process id>/`, which
    /// outlives the test's temporary directories; the whole logs of every daemon in the
    /// output would hide the failure's own message).
    pub fn failure_report(&self) -> String {
        let text = self.log();
        let lines: Vec<&str> = text.lines().collect();
        let tail = lines[lines.len().saturating_sub(60)..].join("\n");
        let kept = std::env::temp_dir()
            .join("clusterset-e2e-failed")
            .join(std::process::id().to_string());
        let copy = kept.join(self.log.file_name().unwrap_or_default());
        let whole =
            match std::fs::create_dir_all(&kept).and_then(|()| std::fs::copy(&self.log, &copy)) {
                Ok(_) => format!("the whole log: {}", copy.display()),
                Err(error) => format!(
                    "the whole log could not be kept ({error}): {}",
                    self.log.display()
                ),
            };
        format!(
            "---- log of {} (last {} of {} lines; {whole}) ----\n{tail}",
            self.name,
            lines.len().min(60),
            lines.len()
        )
    }
}

/// What a process used: its peak resident memory and its CPU time.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Resources {
    /// Peak resident set size (`VmHWM`), KiB.
    pub peak_rss_kib: u64,
    /// User and system CPU time, seconds.
    pub cpu_seconds: f64,
}

/// The log file `path` from byte `from` on (empty if it cannot be read).
pub(crate) fn read_from(path: &Path, from: u64) -> String {
    use std::io::Read;
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(path) {
        let _ = file.seek(std::io::SeekFrom::Start(from));
        let _ = file.read_to_string(&mut text);
    }
    text
}

/// `line` without ANSI colour sequences (`ESC [ ... m`).
fn strip_ansi(line: &str) -> String {
    let mut out = String::with_capacity(line.len());
    let mut chars = line.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            for c in chars.by_ref() {
                if c.is_ascii_alphabetic() {
                    break;
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The value of field `name` of a log line, in the text format (`name=value`) or JSON
/// (`"name":"value"`).
fn field(line: &str, name: &str) -> Option<String> {
    if let Ok(json) = serde_json::from_str::<serde_json::Value>(line) {
        let fields = json.get("fields").unwrap_or(&json);
        return fields.get(name)?.as_str().map(str::to_owned);
    }
    let start = line.find(&format!(" {name}="))? + name.len() + 2;
    let value = line[start..].split_whitespace().next()?;
    Some(value.trim_matches('"').to_owned())
}

/// One `clusterset-agent run` of a member cluster, with ServiceAccount credentials.
#[derive(Debug)]
pub struct Agent {
    /// The cluster id.
    pub cluster_id: String,
    /// DNS address (UDP and TCP); known once started.
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
            "--lease-seconds=10".to_owned(),
            "--lighthouse-names".to_owned(),
        ];
        let daemon = Daemon::new(
            &format!("agent {}{replica}", member.id),
            &settings.binary("clusterset-agent")?,
            args,
            local_kubeconfig,
            "--http-listen",
            log_dir,
        )
        .listening("--dns-listen", DNS_LISTENING);
        Ok(Self {
            cluster_id: member.id.clone(),
            dns: SocketAddr::from(([127, 0, 0, 1], 0)),
            broker_kubeconfig: broker_kubeconfig.to_path_buf(),
            daemon,
        })
    }
}

impl Agent {
    /// Starts the agent (again, on the same ports) and waits until it is ready.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        self.daemon.start().await?;
        self.dns = self.daemon.address("--dns-listen")?;
        Ok(())
    }
}

/// The tests share two clusters and one agent per cluster id: they run one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The suite's serial lock: while the guard lives no other scenario runs (no [`World`] starts
/// its agents: two agents of one cluster id would fight over every object).
pub async fn exclusive() -> tokio::sync::MutexGuard<'static, ()> {
    SERIAL.lock().await
}

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
    /// Where it runs.
    pub target: Target,
    /// The settings.
    pub settings: Settings,
    /// How the fault scenario stops and starts API servers.
    pub faults: Faults,
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
    /// Connects to `target`'s clusters (starting the suite's own on first use), installs
    /// everything and starts both agents (with ServiceAccount tokens).
    pub async fn start(target: &Target) -> anyhow::Result<Self> {
        let serial = exclusive().await;
        let settings = Settings::from_env()?;
        let (east, west, faults) = connect(target).await?;
        let started = Instant::now();
        install(&east, &west).await?;
        println!(
            "installed the CRDs and deploy/'s RBAC on both clusters in {:?}",
            started.elapsed()
        );
        let dir = tempfile::tempdir()?;
        let logs = log_dir(dir.path())?;
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
            agent.start().await?;
            println!(
                "agent {} ready with ServiceAccount credentials, DNS on {}",
                member.id, agent.dns
            );
            agents.push(agent);
        }
        Ok(Self {
            target: target.clone(),
            settings,
            faults,
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
        let name = run_name(prefix)?;
        self.namespaces.push(name.clone());
        create_namespace(&[&self.east, &self.west], &name).await?;
        Ok(name)
    }

    /// The namespaces this world made (deleted when it stops).
    pub fn namespaces(&self) -> &[String] {
        &self.namespaces
    }

    /// Prints the end of every daemon's log and keeps the whole logs (after a failure; see
    /// [`Daemon::failure_report`]).
    pub fn print_logs(&self) {
        for agent in &self.agents {
            eprintln!("{}", agent.daemon.failure_report());
        }
    }

    /// Stops the agents cleanly (SIGTERM, as a rollout does: they hand their Leases back, so
    /// the next test's agents take them at once) and deletes the test namespaces (kept with
    /// `CLUSTERSET_E2E_KEEP_NAMESPACES=true`, to look at after a failure).
    pub async fn stop(mut self) -> anyhow::Result<()> {
        for agent in &mut self.agents {
            agent.daemon.terminate().await?;
        }
        delete_namespaces(&[&self.east, &self.west], &self.namespaces).await;
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
pub async fn install(east: &Cluster, west: &Cluster) -> anyhow::Result<()> {
    for cluster in [east, west] {
        for crd in mcs_types::crd::mcs_crds()?
            .into_iter()
            .chain(mcs_types::crd::about_crds()?)
        {
            cluster.apply(&serde_json::to_value(crd)?).await?;
        }
    }
    for crd in mcs_controller::crd::broker_crds()? {
        east.apply(&serde_json::to_value(crd)?).await?;
    }
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

/// How the fault scenario stops and starts the API servers.
#[derive(Debug, Clone)]
pub enum Faults {
    /// The suite's own clusters: their API server processes.
    Local(std::sync::Arc<local::LocalPair>),
    /// The user's clusters: shell commands from `CLUSTERSET_E2E_HUB_STOP`,
    /// `CLUSTERSET_E2E_HUB_START` (east's API server) and `CLUSTERSET_E2E_MEMBER_RESTART`
    /// (west's).
    Hooks,
}

const HOOKS: [&str; 3] = [
    "CLUSTERSET_E2E_HUB_STOP",
    "CLUSTERSET_E2E_HUB_START",
    "CLUSTERSET_E2E_MEMBER_RESTART",
];

impl Faults {
    /// Fails, saying what to set, when the API servers cannot be stopped and started.
    pub fn ensure_possible(&self) -> anyhow::Result<()> {
        if let Faults::Hooks = self {
            for name in HOOKS {
                hook(name)?;
            }
        }
        Ok(())
    }

    /// Stops the hub's (east's) API server.
    pub async fn hub_stop(&self) -> anyhow::Result<()> {
        match self {
            Faults::Local(pair) => pair.east.stop_apiserver().await,
            Faults::Hooks => run_hook(HOOKS[0]).await,
        }
    }

    /// Starts the hub's API server again.
    pub async fn hub_start(&self) -> anyhow::Result<()> {
        match self {
            Faults::Local(pair) => pair.east.start_apiserver().await,
            Faults::Hooks => run_hook(HOOKS[1]).await,
        }
    }

    /// Restarts west's API server.
    pub async fn member_restart(&self) -> anyhow::Result<()> {
        match self {
            Faults::Local(pair) => pair.west.restart_apiserver().await,
            Faults::Hooks => run_hook(HOOKS[2]).await,
        }
    }
}

/// A shell command from the environment variable `name` (how the tests stop and start the API
/// servers of the user's clusters: `docker stop east-control-plane` for kind).
fn hook(name: &str) -> anyhow::Result<String> {
    std::env::var(name).map_err(|_| {
        anyhow!(
            "{name} is not set: on your own clusters the fault scenario needs a shell command \
             for it (for kind: CLUSTERSET_E2E_HUB_STOP='docker stop east-control-plane', \
             CLUSTERSET_E2E_HUB_START='docker start east-control-plane', \
             CLUSTERSET_E2E_MEMBER_RESTART='docker restart west-control-plane'; see docs/e2e.md)"
        )
    })
}

/// Runs the shell command of hook `name`.
async fn run_hook(name: &str) -> anyhow::Result<()> {
    let command = hook(name)?;
    let status = Command::new("sh")
        .args(["-c", &command])
        .status()
        .await
        .with_context(|| format!("cannot run {name}: {command}"))?;
    anyhow::ensure!(status.success(), "{name} ({command}) failed: {status}");
    Ok(())
}

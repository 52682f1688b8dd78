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
use kube::discovery::pinned_kind;
use kube::core::GroupVersionKind;
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

    /// Server-side applies every document of `yaml` (any kind the server serves).
    pub async fn apply_yaml(&self, yaml: &str) -> anyhow::Result<()> {
        let documents: Vec<serde_json::Value> =
            serde_saphyr::from_multiple(yaml).context("cannot parse the manifests")?;
        for document in documents.into_iter().filter(|d| !d.is_null()) {
            self.apply(&document).await?;
        }
        Ok(())
    }

    /// Server-side applies one object (as JSON), forced, under [`MANAGER`].
    pub async fn apply(&self, object: &serde_json::Value) -> anyhow::Result<()> {
        let object: DynamicObject = serde_json::from_value(object.clone())?;
        let types = object.types.clone().context("an object without apiVersion/kind")?;
        let gvk = GroupVersionKind::try_from(&types)?;
        let (resource, capabilities) = pinned_kind(&self.client, &gvk)
            .await
            .with_context(|| format!("{} {} is not served", types.api_version, types.kind))?;
        let name = object.metadata.name.clone().context("an object without a name")?;
        let api: Api<DynamicObject> = match &object.metadata.namespace {
            Some(ns) if capabilities.scope == kube::discovery::Scope::Namespaced => {
                Api::namespaced_with(self.client.clone(), ns, &resource)
            }
            _ => Api::all_with(self.client.clone(), &resource),
        };
        api.patch(&name, &PatchParams::apply(MANAGER).force(), &Patch::Apply(&object))
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

/// One `clusterset-agent run` process of a member cluster, with ServiceAccount credentials.
#[derive(Debug)]
pub struct Agent {
    /// The cluster id.
    pub cluster_id: String,
    /// DNS address (UDP and TCP).
    pub dns: SocketAddr,
    /// HTTP address (`/metrics`, `/readyz`).
    pub http: SocketAddr,
    command: Vec<String>,
    env: BTreeMap<String, String>,
    log: PathBuf,
    child: Option<Child>,
}

impl Agent {
    /// Prepares the agent of `member` with `broker_kubeconfig` (the hub, as `agent-<id>`) and
    /// `local_kubeconfig` (the member, as `clusterset-system/clusterset-agent`); global CIDR
    /// `242.<n>.0.0/16`, clusterset CIDR `243.<n>.0.0/16`.
    pub fn new(
        settings: &Settings,
        member: &Cluster,
        n: u8,
        local_kubeconfig: &Path,
        broker_kubeconfig: &Path,
        log_dir: &Path,
    ) -> anyhow::Result<Self> {
        let dns = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let http = SocketAddr::from(([127, 0, 0, 1], free_port()?));
        let binary = settings.binary("clusterset-agent")?;
        let command = vec![
            binary.display().to_string(),
            "run".to_owned(),
            format!("--cluster-id={}", member.id),
            format!("--identity=e2e-agent-{}", member.id),
            format!("--broker-kubeconfig={}", broker_kubeconfig.display()),
            format!("--global-cidr=242.{n}.0.0/16"),
            format!("--clusterset-cidr=243.{n}.0.0/16"),
            format!("--dns-listen={dns}"),
            format!("--http-listen={http}"),
            "--lease-seconds=10".to_owned(),
        ];
        let env = BTreeMap::from([
            ("KUBECONFIG".to_owned(), local_kubeconfig.display().to_string()),
            ("RUST_LOG".to_owned(), "info".to_owned()),
        ]);
        Ok(Self {
            cluster_id: member.id.clone(),
            dns,
            http,
            command,
            env,
            log: log_dir.join(format!("agent-{}.log", member.id)),
            child: None,
        })
    }

    /// Starts the process (its output appended to its log) and waits until `/readyz` is 200.
    pub async fn start(&mut self) -> anyhow::Result<()> {
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)?;
        let child = Command::new(&self.command[0])
            .args(&self.command[1..])
            .env_clear()
            .envs(&self.env)
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", self.command[0]))?;
        self.child = Some(child);
        let http = self.http;
        let log = self.log.clone();
        wait_for(
            &format!("agent {} to be ready", self.cluster_id),
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
        .with_context(|| format!("see the agent's log {}", log.display()))
    }

    /// Kills the process (SIGKILL: no clean shutdown) and reaps it.
    pub async fn kill(&mut self) -> anyhow::Result<()> {
        if let Some(mut child) = self.child.take() {
            child.kill().await?;
        }
        Ok(())
    }

    /// The agent's log so far.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }
}

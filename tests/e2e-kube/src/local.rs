//! Clusters the suite starts itself, the envtest way: per cluster an etcd, a kube-apiserver, a
//! kube-controller-manager, a kube-scheduler and kwok (the cluster's nodes: heartbeats, pods
//! Running and Ready with IPs, deletions confirmed), from the binaries that
//! `tests/k8s-tools/build.sh` builds from the Go modules beside it, on loopback ports, with
//! generated certificates, ServiceAccount keys and an admin kubeconfig.
//!
//! Every process runs under a small shell supervisor whose standard input is a pipe from this
//! test process: when the pipe closes (the test process exits, however it exits, even killed),
//! the supervisor stops its process. Nothing is left running after a run.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, anyhow, bail};
use kube::api::{Api, Patch, PatchParams};

use crate::{free_port, http_get, repo_root};

/// Where `tests/k8s-tools/build.sh` puts the tools unless `CLUSTERSET_K8S_TOOLS` says otherwise.
pub const DEFAULT_TOOLS_DIR: &str = "/var/cache/clusterset/k8s-tools";

/// The Kubernetes test tools that `tests/k8s-tools/build.sh` built.
#[derive(Debug, Clone)]
pub struct Tools {
    root: PathBuf,
    /// kwok's stages when not the built ones ([`Tools::with_kwok_stages`]).
    kwok_stages: Option<PathBuf>,
}

impl Tools {
    /// The tools of `modules` (the build script's module names: `k8s-1.37`, `etcd`, `kwok`,
    /// `helm`, ...), checked current by the build script itself (`--check`): missing or stale
    /// tools are an error that gives the one command that builds them.
    pub fn find(modules: &[&str]) -> anyhow::Result<Self> {
        let root = std::env::var_os("CLUSTERSET_K8S_TOOLS")
            .map_or_else(|| PathBuf::from(DEFAULT_TOOLS_DIR), PathBuf::from);
        let script = repo_root().join("tests/k8s-tools/build.sh");
        let output = Command::new("bash")
            .arg(&script)
            .arg("--check")
            .args(modules)
            .env("CLUSTERSET_K8S_TOOLS", &root)
            .output()
            .with_context(|| format!("cannot run bash {}", script.display()))?;
        if !output.status.success() {
            bail!(
                "the Kubernetes test tools are not ready: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            );
        }
        Ok(Self {
            root,
            kwok_stages: None,
        })
    }

    /// The path of `binary` of `module`.
    pub fn binary(&self, module: &str, binary: &str) -> PathBuf {
        self.root.join(module).join("bin").join(binary)
    }

    /// kwok's stages (nodes Ready with Leases; pods Ready with IPs, completed, deleted): the
    /// built ones, or those [`Tools::with_kwok_stages`] gave.
    pub fn kwok_stages(&self) -> PathBuf {
        self.kwok_stages
            .clone()
            .unwrap_or_else(|| self.root.join("kwok/stages.yaml"))
    }

    /// The same tools, with kwok given the stages of file `stages` instead of the built ones
    /// (the pod runner's tests: kwok's pod stages that leave the runner's pods alone).
    pub fn with_kwok_stages(mut self, stages: impl Into<PathBuf>) -> Self {
        self.kwok_stages = Some(stages.into());
        self
    }
}

/// A Kubernetes release the suite runs on: the build script's module `k8s-1.<minor>`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Release {
    /// The minor version (`35` for 1.35).
    pub minor: u8,
}

impl Release {
    /// The oldest release upstream supports and the newest, both pinned in tests/k8s-tools.
    pub const SUPPORTED: [Release; 2] = [Release { minor: 35 }, Release { minor: 37 }];

    /// The build script's module of this release.
    pub fn module(self) -> String {
        format!("k8s-1.{}", self.minor)
    }

    /// The releases of `CLUSTERSET_E2E_RELEASES` (`1.35,1.37`), or every supported one.
    pub fn selected() -> anyhow::Result<Vec<Release>> {
        let Ok(text) = std::env::var("CLUSTERSET_E2E_RELEASES") else {
            return Ok(Self::SUPPORTED.to_vec());
        };
        text.split(',')
            .map(str::trim)
            .filter(|s| !s.is_empty())
            .map(|s| {
                s.strip_prefix("1.")
                    .and_then(|m| m.parse().ok())
                    .map(|minor| Release { minor })
                    .filter(|r| Self::SUPPORTED.contains(r))
                    .ok_or_else(|| {
                        anyhow!(
                            "CLUSTERSET_E2E_RELEASES names {s:?}: the releases pinned in \
                             tests/k8s-tools are {}",
                            Self::SUPPORTED.map(|r| r.to_string()).join(", ")
                        )
                    })
            })
            .collect()
    }
}

impl std::fmt::Display for Release {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "1.{}", self.minor)
    }
}

/// The supervisor: runs its arguments as a child, and stops the child with SIGTERM (SIGKILL 10 s
/// later) when its own standard input closes; exits with the child's status when the child
/// exits by itself.
/// (A background command's standard input is /dev/null unless redirected: the watcher reads the
/// pipe through fd 3.)
const SUPERVISOR: &str = r#"
exec 3<&0
"$@" </dev/null 3<&- &
child=$!
( read -r _ <&3; kill -TERM "$child" 2>/dev/null; sleep 10; kill -KILL "$child" 2>/dev/null ) &
watcher=$!
wait "$child"
status=$?
kill "$watcher" 2>/dev/null
exit "$status"
"#;

/// One process of a cluster, run under [`SUPERVISOR`]; its output goes to its log.
#[derive(Debug)]
struct Supervised {
    name: String,
    program: PathBuf,
    args: Vec<String>,
    log: PathBuf,
    /// Where the log of the current start begins.
    log_start: u64,
    running: Option<(Child, ChildStdin)>,
}

impl Supervised {
    fn new(name: &str, program: PathBuf, args: Vec<String>, log_dir: &Path) -> Self {
        Self {
            name: name.to_owned(),
            program,
            args,
            log: log_dir.join(format!("{}.log", name.replace(' ', "-"))),
            log_start: 0,
            running: None,
        }
    }

    fn start(&mut self) -> anyhow::Result<()> {
        if !self.program.exists() {
            bail!(
                "{} does not exist: build the tools with `bash tests/k8s-tools/build.sh`",
                self.program.display()
            );
        }
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&self.log)
            .with_context(|| format!("cannot open {}", self.log.display()))?;
        self.log_start = log.metadata()?.len();
        let mut child = Command::new("bash")
            .arg("-c")
            .arg(SUPERVISOR)
            .arg("supervisor")
            .arg(&self.program)
            .args(&self.args)
            .stdin(Stdio::piped())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .with_context(|| format!("cannot start {}", self.name))?;
        let stdin = child.stdin.take().context("the supervisor has no stdin")?;
        self.running = Some((child, stdin));
        Ok(())
    }

    /// Whether this is one of a cluster's control loops (the controller manager, the
    /// scheduler), which stop and start with the API server; kwok, the cluster's kubelet, is not.
    fn is_control_loop(&self) -> bool {
        !self.name.ends_with(" kwok")
    }

    /// The exit status, if the process exited.
    fn exited(&mut self) -> Option<std::process::ExitStatus> {
        let (child, _) = self.running.as_mut()?;
        child.try_wait().ok().flatten()
    }

    /// The log since the current start, shortened: its error lines (klog's `E` and `F`
    /// levels, or lines that say error; the first 20), then its last 30 lines.
    fn log_tail(&self) -> String {
        let text = crate::read_from(&self.log, self.log_start);
        let lines: Vec<&str> = text.lines().collect();
        let is_error = |line: &&&str| {
            let klog = line.len() > 5
                && matches!(line.as_bytes()[0], b'E' | b'F')
                && line.as_bytes()[1..5].iter().all(u8::is_ascii_digit);
            klog || line.to_lowercase().contains("error")
        };
        let errors: Vec<&str> = lines.iter().filter(is_error).take(20).copied().collect();
        let tail = lines[lines.len().saturating_sub(30)..].join("\n");
        if errors.is_empty() {
            tail
        } else {
            format!("errors:\n{}\nlast lines:\n{tail}", errors.join("\n"))
        }
    }

    /// Fails with the log when the process exited.
    fn ensure_running(&mut self) -> anyhow::Result<()> {
        match self.exited() {
            Some(status) => Err(anyhow!(
                "{} exited ({status}); its log ({}):\n{}",
                self.name,
                self.log.display(),
                self.log_tail()
            )),
            None => Ok(()),
        }
    }

    /// Stops the process (its supervisor sends SIGTERM, then SIGKILL after 10 s) and waits.
    async fn stop(&mut self) -> anyhow::Result<()> {
        let Some((mut child, stdin)) = self.running.take() else {
            return Ok(());
        };
        drop(stdin);
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while child.try_wait()?.is_none() {
            if std::time::Instant::now() > deadline {
                child.kill()?;
                child.wait()?;
                bail!("{} did not stop within 20 s; killed", self.name);
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        Ok(())
    }
}

/// Starts `process` and waits for `ready`; when the process exits because a port was taken in
/// the meantime (another socket took the free port between the pick and the bind), `repick`
/// picks new ports and it starts again (five tries); any other exit fails with the log.
async fn start_until_ready<R, Fut>(
    process: &mut Supervised,
    mut repick: impl FnMut(&mut Supervised) -> anyhow::Result<()>,
    what: &str,
    limit: Duration,
    mut ready: R,
) -> anyhow::Result<()>
where
    R: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<Option<()>>>,
{
    for attempt in 1..=5 {
        process.start()?;
        let deadline = std::time::Instant::now() + limit;
        loop {
            if let Some(status) = process.exited() {
                let log = process.log_tail();
                if attempt < 5 && log.to_lowercase().contains("address already in use") {
                    println!(
                        "{}: a port was taken ({status}); trying other ports",
                        process.name
                    );
                    process.running = None;
                    repick(process)?;
                    break;
                }
                bail!(
                    "{} exited during start-up ({status}); its log ({}):\n{log}",
                    process.name,
                    process.log.display()
                );
            }
            match ready().await {
                Ok(Some(())) => return Ok(()),
                Ok(None) | Err(_) if std::time::Instant::now() < deadline => {}
                outcome => {
                    let last = match outcome {
                        Err(error) => format!(": {error:#}"),
                        _ => String::new(),
                    };
                    let _ = process.stop().await;
                    bail!(
                        "gave up after {limit:?} waiting for {what}{last}; the log of {} ({}):\n{}",
                        process.name,
                        process.log.display(),
                        process.log_tail()
                    );
                }
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    bail!("{} could not get free ports in five tries", process.name)
}

/// Replaces the value of flag `--name=` in `args`.
pub(crate) fn set_flag(args: &mut [String], name: &str, value: &str) {
    let prefix = format!("--{name}=");
    for arg in args.iter_mut() {
        if arg.starts_with(&prefix) {
            *arg = format!("{prefix}{value}");
        }
    }
}

/// The value of flag `--name=` in `args`.
pub(crate) fn flag<'a>(args: &'a [String], name: &str) -> Option<&'a str> {
    let prefix = format!("--{name}=");
    args.iter().find_map(|a| a.strip_prefix(&prefix))
}

/// The certificates and keys of one cluster, as PEM files in its directory.
struct Pki {
    ca: PathBuf,
    serving_cert: PathBuf,
    serving_key: PathBuf,
    sa_private: PathBuf,
    sa_public: PathBuf,
}

impl Pki {
    fn generate(dir: &Path) -> anyhow::Result<Self> {
        use rcgen::{
            BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
            KeyUsagePurpose,
        };
        let ca_key = KeyPair::generate()?;
        let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "clusterset-e2e-ca");
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        let ca_cert = ca_params.self_signed(&ca_key)?;
        let issuer = rcgen::Issuer::new(ca_params, ca_key);

        let serving_key = KeyPair::generate()?;
        let mut serving_params = CertificateParams::new(vec![
            "localhost".to_owned(),
            "127.0.0.1".to_owned(),
            "10.96.0.1".to_owned(),
            "kubernetes".to_owned(),
            "kubernetes.default".to_owned(),
            "kubernetes.default.svc".to_owned(),
        ])?;
        serving_params
            .distinguished_name
            .push(DnType::CommonName, "kube-apiserver");
        serving_params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let serving_cert = serving_params.signed_by(&serving_key, &issuer)?;

        let sa_key = KeyPair::generate()?;
        let write = |name: &str, text: &str| -> anyhow::Result<PathBuf> {
            let path = dir.join(name);
            std::fs::write(&path, text)?;
            Ok(path)
        };
        Ok(Self {
            ca: write("ca.crt", &ca_cert.pem())?,
            serving_cert: write("apiserver.crt", &serving_cert.pem())?,
            serving_key: write("apiserver.key", &serving_key.serialize_pem())?,
            sa_private: write("sa.key", &sa_key.serialize_pem())?,
            sa_public: write("sa.pub", &sa_key.public_key_pem())?,
        })
    }
}

/// One cluster the suite started: etcd, kube-apiserver, kube-controller-manager,
/// kube-scheduler and kwok, with an admin kubeconfig whose context is the cluster's name.
#[derive(Debug)]
pub struct LocalCluster {
    /// The cluster's name (`east`), also its kubeconfig context.
    pub name: String,
    /// The release it runs.
    pub release: Release,
    /// The admin kubeconfig (a token of group `system:masters`).
    pub kubeconfig: PathBuf,
    /// The API server's URL.
    pub server: String,
    etcd: Supervised,
    apiserver: tokio::sync::Mutex<Supervised>,
    /// The controller manager, the scheduler and kwok.
    controllers: tokio::sync::Mutex<Vec<Supervised>>,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki")
            .field("ca", &self.ca)
            .finish_non_exhaustive()
    }
}

/// The node kwok runs in every cluster.
pub const NODE: &str = "kwok-node-0";

impl LocalCluster {
    /// Starts cluster `name` of `release` in `dir` (which must exist and be empty).
    pub async fn start(
        tools: &Tools,
        release: Release,
        name: &str,
        dir: &Path,
    ) -> anyhow::Result<Self> {
        let started = std::time::Instant::now();
        let pki = Pki::generate(dir)?;
        let module = release.module();

        // etcd, on two loopback ports.
        let (client, peer) = (free_port()?, free_port()?);
        let etcd_args = |client: u16, peer: u16| {
            vec![
                format!("--name={name}"),
                format!("--data-dir={}", dir.join("etcd").display()),
                format!("--listen-client-urls=http://127.0.0.1:{client}"),
                format!("--advertise-client-urls=http://127.0.0.1:{client}"),
                format!("--listen-peer-urls=http://127.0.0.1:{peer}"),
                format!("--initial-advertise-peer-urls=http://127.0.0.1:{peer}"),
                format!("--initial-cluster={name}=http://127.0.0.1:{peer}"),
                "--listen-metrics-urls=".to_owned(),
                "--unsafe-no-fsync=true".to_owned(),
                "--log-level=warn".to_owned(),
            ]
        };
        let mut etcd = Supervised::new(
            &format!("{name} etcd"),
            tools.binary("etcd", "etcd"),
            etcd_args(client, peer),
            dir,
        );
        let etcd_health = |etcd: &Supervised| -> anyhow::Result<std::net::SocketAddr> {
            let url = flag(&etcd.args, "listen-client-urls").context("no client URL")?;
            Ok(url.trim_start_matches("http://").parse()?)
        };
        let health = std::cell::Cell::new(etcd_health(&etcd)?);
        start_until_ready(
            &mut etcd,
            |etcd| {
                let (client, peer) = (free_port()?, free_port()?);
                etcd.args = etcd_args(client, peer);
                health.set(etcd_health(etcd)?);
                let _ = std::fs::remove_dir_all(dir.join("etcd"));
                Ok(())
            },
            &format!("{name}'s etcd to be healthy"),
            Duration::from_secs(60),
            || async {
                let (code, body) = http_get(health.get(), "/health").await?;
                Ok((code == 200 && body.contains("true")).then_some(()))
            },
        )
        .await?;
        let etcd_url = format!("http://{}", health.get());

        // kube-apiserver, with a static admin token (group system:masters).
        let token = format!("e2e-admin-{}-{}", name, std::process::id());
        std::fs::write(
            dir.join("tokens.csv"),
            format!("{token},e2e-admin,e2e-admin,\"system:masters\"\n"),
        )?;
        let port = free_port()?;
        let apiserver_args = vec![
            format!("--etcd-servers={etcd_url}"),
            "--bind-address=127.0.0.1".to_owned(),
            "--advertise-address=127.0.0.1".to_owned(),
            // The `kubernetes` Service's endpoints would be 127.0.0.1, which the reconciler
            // refuses (loopback): the Service keeps none, as nothing here needs them.
            "--endpoint-reconciler-type=none".to_owned(),
            format!("--secure-port={port}"),
            format!("--tls-cert-file={}", pki.serving_cert.display()),
            format!("--tls-private-key-file={}", pki.serving_key.display()),
            format!("--client-ca-file={}", pki.ca.display()),
            format!("--token-auth-file={}", dir.join("tokens.csv").display()),
            "--authorization-mode=Node,RBAC".to_owned(),
            format!("--service-account-issuer=https://kubernetes.default.svc"),
            format!("--service-account-key-file={}", pki.sa_public.display()),
            format!(
                "--service-account-signing-key-file={}",
                pki.sa_private.display()
            ),
            "--service-cluster-ip-range=10.96.0.0/16".to_owned(),
            "--allow-privileged=true".to_owned(),
            format!("--cert-dir={}", dir.join("certs").display()),
            "--profiling=false".to_owned(),
        ];
        let mut apiserver = Supervised::new(
            &format!("{name} kube-apiserver"),
            tools.binary(&module, "kube-apiserver"),
            apiserver_args,
            dir,
        );
        let kubeconfig = dir.join("admin.kubeconfig");
        let write_kubeconfig = |port: u16| -> anyhow::Result<String> {
            let server = format!("https://127.0.0.1:{port}");
            let config = serde_json::json!({
                "apiVersion": "v1", "kind": "Config",
                "clusters": [{"name": name, "cluster": {
                    "server": server,
                    "certificate-authority": pki.ca.display().to_string(),
                }}],
                "users": [{"name": format!("{name}-admin"), "user": {"token": token}}],
                "contexts": [{"name": name,
                              "context": {"cluster": name, "user": format!("{name}-admin")}}],
                "current-context": name,
            });
            std::fs::write(&kubeconfig, serde_json::to_vec_pretty(&config)?)?;
            Ok(server)
        };
        let server = std::cell::RefCell::new(write_kubeconfig(port)?);
        let client = std::cell::RefCell::new(crate::kubeconfig_client(&kubeconfig).await?);
        // The clients of one attempt, re-made when the port changes.
        let repicked = std::cell::Cell::new(false);
        start_until_ready(
            &mut apiserver,
            |apiserver| {
                let port = free_port()?;
                set_flag(&mut apiserver.args, "secure-port", &port.to_string());
                *server.borrow_mut() = write_kubeconfig(port)?;
                repicked.set(true);
                Ok(())
            },
            &format!("{name}'s kube-apiserver to be ready (/readyz)"),
            Duration::from_secs(120),
            || async {
                if repicked.replace(false) {
                    let fresh = crate::kubeconfig_client(&kubeconfig).await?;
                    *client.borrow_mut() = fresh;
                }
                let current = client.borrow().clone();
                readyz(&current).await
            },
        )
        .await?;
        let client = client.into_inner();
        let server = server.into_inner();

        // The controller manager, the scheduler and kwok, all with the admin kubeconfig.
        let kubeconfig_flag = format!("--kubeconfig={}", kubeconfig.display());
        let mut controllers = vec![
            Supervised::new(
                &format!("{name} kube-controller-manager"),
                tools.binary(&module, "kube-controller-manager"),
                vec![
                    kubeconfig_flag.clone(),
                    "--secure-port=0".to_owned(),
                    "--leader-elect=false".to_owned(),
                    format!(
                        "--service-account-private-key-file={}",
                        pki.sa_private.display()
                    ),
                    format!("--root-ca-file={}", pki.ca.display()),
                    "--service-cluster-ip-range=10.96.0.0/16".to_owned(),
                    "--use-service-account-credentials=true".to_owned(),
                    // kwok renews the node's Lease from its informer's copy, and after an API
                    // server restart that copy can be a minute old (its watch reconnects with
                    // client-go's backoff, up to 60 s): every renewal until then conflicts.
                    // A kubelet reads the Lease again on a conflict. With the default 50 s the
                    // node lifecycle controller marked the node NotReady in that minute, and
                    // kwok reports it Ready again only in its 10-minute heartbeat (CI at
                    // 2cc12a7, 2026-11-29: no pod started on 1.37's east for 9 minutes).
                    "--node-monitor-grace-period=5m".to_owned(),
                    // Rollouts finish at once, as the scale bench needs (its OSD rollouts of
                    // 10 pods each waited 4 s for the default 20 requests per second).
                    "--kube-api-qps=500".to_owned(),
                    "--kube-api-burst=1000".to_owned(),
                ],
                dir,
            ),
            Supervised::new(
                &format!("{name} kube-scheduler"),
                tools.binary(&module, "kube-scheduler"),
                vec![
                    kubeconfig_flag.clone(),
                    "--secure-port=0".to_owned(),
                    "--leader-elect=false".to_owned(),
                    "--kube-api-qps=500".to_owned(),
                    "--kube-api-burst=1000".to_owned(),
                ],
                dir,
            ),
            Supervised::new(
                &format!("{name} kwok"),
                tools.binary("kwok", "kwok"),
                vec![
                    kubeconfig_flag,
                    format!("--config={}", tools.kwok_stages().display()),
                    "--manage-all-nodes=false".to_owned(),
                    "--manage-nodes-with-annotation-selector=kwok.x-k8s.io/node=fake".to_owned(),
                    "--cidr=10.244.0.0/16".to_owned(),
                    "--node-ip=10.250.0.1".to_owned(),
                    // The node's Lease, renewed every quarter of it as a kubelet does. Without
                    // this flag kwok renews none, the node's only heartbeat is its 10-minute
                    // status stage, and the node lifecycle controller marks it NotReady every
                    // 50 s (and its pods NotReady, which kwok's stages never turn back).
                    "--node-lease-duration-seconds=40".to_owned(),
                ],
                dir,
            ),
        ];
        for process in &mut controllers {
            process.start()?;
        }
        let cluster = Self {
            name: name.to_owned(),
            release,
            kubeconfig,
            server,
            etcd,
            apiserver: tokio::sync::Mutex::new(apiserver),
            controllers: tokio::sync::Mutex::new(controllers),
        };
        cluster.node(&client).await?;
        cluster.settled(&client).await?;
        println!(
            "cluster {name}: Kubernetes {} at {} ready in {:.1?} (logs in {})",
            cluster.version(&client).await?,
            cluster.server,
            started.elapsed(),
            dir.display()
        );
        Ok(cluster)
    }

    /// Waits (2 minutes at most) until the cluster is ready for a scenario: the node is Ready
    /// and its Lease renewed (kwok), and the `default` ServiceAccount exists (the controller
    /// manager's ServiceAccount and token controllers run). Fails at once, with the log, when
    /// one of the controllers exited.
    async fn settled(&self, client: &kube::Client) -> anyhow::Result<()> {
        self.settled_since(client, None).await
    }

    /// [`Self::settled`], with the node's Lease renewed twice after `started` (when the API
    /// server came back), so that the check proves kwok serves the node again: the renewal from
    /// before the outage no longer counts (a kwok that never took the node over went unnoticed,
    /// no pod of the cluster started or went, and every later scenario failed), and the first
    /// one after it is made from kwok's copy of the Lease from before the outage, so only a
    /// second one shows that kwok's watches are back (until then its renewals conflict).
    async fn settled_since(
        &self,
        client: &kube::Client,
        started: Option<k8s_openapi::jiff::Timestamp>,
    ) -> anyhow::Result<()> {
        let name = &self.name;
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        let accounts: Api<k8s_openapi::api::core::v1::ServiceAccount> =
            Api::namespaced(client.clone(), "default");
        let leases: Api<k8s_openapi::api::coordination::v1::Lease> =
            Api::namespaced(client.clone(), "kube-node-lease");
        let deadline = std::time::Instant::now() + Duration::from_secs(120);
        // The first renewal after `started`, once seen.
        let mut first_renewal = None;
        loop {
            for process in self.controllers.lock().await.iter_mut() {
                process.ensure_running()?;
            }
            let node_ready = nodes.get_opt(NODE).await.ok().flatten().is_some_and(|n| {
                n.status
                    .and_then(|s| s.conditions)
                    .is_some_and(|c| c.iter().any(|c| c.type_ == "Ready" && c.status == "True"))
            });
            let account = accounts.get_opt("default").await.ok().flatten().is_some();
            let renewed = leases
                .get_opt(NODE)
                .await
                .ok()
                .flatten()
                .and_then(|l| l.spec.and_then(|s| s.renew_time))
                .map(|renewed| renewed.0);
            let lease = match (started, renewed) {
                (_, None) => false,
                (None, Some(_)) => true,
                (Some(since), Some(renewed)) if renewed > since => match first_renewal {
                    None => {
                        first_renewal = Some(renewed);
                        false
                    }
                    Some(first) => renewed > first,
                },
                (Some(_), Some(_)) => false,
            };
            if node_ready && account && lease {
                return Ok(());
            }
            if std::time::Instant::now() > deadline {
                let logs: Vec<String> = self
                    .controllers
                    .lock()
                    .await
                    .iter()
                    .map(|p| {
                        format!(
                            "---- {} ({}) ----\n{}",
                            p.name,
                            p.log.display(),
                            p.log_tail()
                        )
                    })
                    .collect();
                bail!(
                    "{name} did not become ready in 120 s (node {NODE} Ready: {node_ready}, \
                     its Lease renewed{}: {lease}, ServiceAccount default/default: {account}):\n{}",
                    if started.is_some() {
                        " twice since the restart"
                    } else {
                        ""
                    },
                    logs.join("\n")
                );
            }
            tokio::time::sleep(Duration::from_millis(200)).await;
        }
    }

    /// The node of this cluster, as kwokctl makes one: kwok manages it (its annotation) and
    /// reports it Ready; its allocatable resources are what the scheduler places pods by (room for
    /// the scale bench's 1,000 OSD pods and more).
    async fn node(&self, client: &kube::Client) -> anyhow::Result<()> {
        let nodes: Api<k8s_openapi::api::core::v1::Node> = Api::all(client.clone());
        let resources = serde_json::json!({"cpu": "1000", "memory": "4Ti", "pods": "10000"});
        let node = serde_json::json!({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {
                "name": NODE,
                "annotations": {"kwok.x-k8s.io/node": "fake"},
                "labels": {"kubernetes.io/hostname": NODE, "kubernetes.io/os": "linux",
                           "type": "kwok"},
            },
            "status": {"allocatable": resources, "capacity": resources},
        });
        nodes
            .patch(
                NODE,
                &PatchParams::apply(crate::MANAGER).force(),
                &Patch::Apply(&node),
            )
            .await
            .with_context(|| format!("cannot create node {NODE} in {}", self.name))?;
        Ok(())
    }

    /// The API server's version (`v1.37.2`).
    async fn version(&self, client: &kube::Client) -> anyhow::Result<String> {
        Ok(client.apiserver_version().await?.git_version)
    }

    /// Stops the API server (SIGTERM, as a control-plane node going down), and with it the
    /// controller manager and the scheduler: in a real control plane they run with leader
    /// election, cannot renew their Lease while the API server is away, and exit (the kubelet
    /// starts them again, and they crash until it is back). Left running, the controller
    /// manager acted on its stale view in the second after the API server returned: it marked
    /// the node `Unknown` (its Lease had not been renewed during the outage) and tainted it, and
    /// kwok, which reports a node Ready again only in its 10-minute heartbeat, left it so for 8
    /// minutes (no pod was scheduled or started; seen in CI after the hub's 60 s outage). kwok
    /// goes on, retrying, as a kubelet does.
    pub async fn stop_apiserver(&self) -> anyhow::Result<()> {
        self.apiserver.lock().await.stop().await?;
        self.stop_control_loops().await
    }

    /// Starts the API server again, with the same flags and port, and waits for `/readyz`;
    /// then starts the controller manager and the scheduler (stopped with the API server) and
    /// waits until the cluster is settled again, as a real control plane comes back from an
    /// outage: there the kubelet starts them again with fresh informers. (Left running through
    /// the outage they also came back with stale caches: ReplicaSets scaled 20-40 s late,
    /// EndpointSlices left "informer cache is out of date".)
    pub async fn start_apiserver(&self) -> anyhow::Result<()> {
        let client = crate::kubeconfig_client(&self.kubeconfig).await?;
        let mut apiserver = self.apiserver.lock().await;
        start_until_ready(
            &mut apiserver,
            |_| {
                Err(anyhow!(
                    "the API server's port was taken while it was stopped: its clients \
                     cannot follow it to another"
                ))
            },
            &format!("{}'s kube-apiserver to be ready again (/readyz)", self.name),
            Duration::from_secs(120),
            || readyz(&client),
        )
        .await?;
        drop(apiserver);
        // kwok renews the node's Lease after this (the same machine's clock).
        let restarted = k8s_openapi::jiff::Timestamp::now();
        self.start_control_loops().await?;
        self.settled_since(&client, Some(restarted)).await
    }

    /// Starts the controller manager and the scheduler (stopped with the API server). kwok
    /// keeps running: its watches and its Lease renewals resume by themselves once the API
    /// server answers, whereas a new kwok process (another holder identity for the node's
    /// Lease) sometimes never took the node over (its log ended at `Watch nodes`, no pod started
    /// or went, every later scenario failed).
    async fn start_control_loops(&self) -> anyhow::Result<()> {
        let mut controllers = self.controllers.lock().await;
        for process in controllers.iter_mut().filter(|p| p.is_control_loop()) {
            process.start()?;
        }
        Ok(())
    }

    /// Stops the controller manager and the scheduler (not kwok, the cluster's kubelet).
    async fn stop_control_loops(&self) -> anyhow::Result<()> {
        let mut controllers = self.controllers.lock().await;
        for process in controllers.iter_mut().filter(|p| p.is_control_loop()) {
            process.stop().await?;
        }
        Ok(())
    }

    /// Restarts the API server.
    pub async fn restart_apiserver(&self) -> anyhow::Result<()> {
        self.stop_apiserver().await?;
        self.start_apiserver().await
    }

    /// Fails, with the logs, when a process of the cluster exited.
    pub async fn ensure_running(&mut self) -> anyhow::Result<()> {
        self.etcd.ensure_running()?;
        self.apiserver.lock().await.ensure_running()?;
        for process in self.controllers.get_mut() {
            process.ensure_running()?;
        }
        Ok(())
    }
}

/// `Some` when the API server's `/readyz` answers `ok`.
async fn readyz(client: &kube::Client) -> anyhow::Result<Option<()>> {
    let request = http::Request::get("/readyz").body(Vec::new())?;
    let body = client.request_text(request).await?;
    Ok((body.trim() == "ok").then_some(()))
}

/// The two clusters (east, the hub too, and west) of one release.
#[derive(Debug)]
pub struct LocalPair {
    /// Cluster east (also the hub).
    pub east: LocalCluster,
    /// Cluster west.
    pub west: LocalCluster,
}

/// The clusters started so far in this test process, by release: started once, on first use,
/// shared by the scenarios (which run one at a time), stopped when the process exits. The lock
/// is held while a release's clusters start, so two tests asking at once get the same ones.
static STARTED: tokio::sync::Mutex<BTreeMap<Release, Arc<LocalPair>>> =
    tokio::sync::Mutex::const_new(BTreeMap::new());

/// The clusters of `release`, started on first use.
pub async fn clusters(release: Release) -> anyhow::Result<Arc<LocalPair>> {
    let mut started = STARTED.lock().await;
    if let Some(pair) = started.get(&release) {
        return Ok(Arc::clone(pair));
    }
    let tools = Tools::find(&["etcd", "kwok", &release.module()])?;
    let root = runs_dir()?.join(format!("{}", std::process::id()));
    let start = |name: &'static str| {
        let dir = root.join(format!("{release}-{name}"));
        let tools = tools.clone();
        async move {
            std::fs::create_dir_all(&dir)?;
            LocalCluster::start(&tools, release, name, &dir).await
        }
    };
    let east = start("east").await?;
    let west = start("west").await?;
    let pair = Arc::new(LocalPair { east, west });
    started.insert(release, Arc::clone(&pair));
    Ok(pair)
}

/// The directory of the clusters' files (`<temp>/clusterset-e2e/<pid>/`); the directories of
/// earlier runs whose process is gone are removed.
fn runs_dir() -> anyhow::Result<PathBuf> {
    let dir = std::env::temp_dir().join("clusterset-e2e");
    std::fs::create_dir_all(&dir)?;
    for entry in std::fs::read_dir(&dir)?.flatten() {
        let alive = entry
            .file_name()
            .to_str()
            .and_then(|pid| pid.parse::<u32>().ok())
            .is_some_and(|pid| Path::new(&format!("/proc/{pid}")).exists());
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
    Ok(dir)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn flags_are_read_and_replaced_by_name() {
        let mut args = vec!["--secure-port=1".to_owned(), "--port-x=2".to_owned()];
        set_flag(&mut args, "secure-port", "3");
        assert_eq!(flag(&args, "secure-port"), Some("3"));
        assert_eq!(flag(&args, "port-x"), Some("2"));
        assert_eq!(flag(&args, "port"), None);
    }
}

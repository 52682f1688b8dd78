//! Helm 4 for the charts' tests: the `helm` that `bash tests/k8s-tools/build.sh helm` builds
//! from the repository's Go module `tests/k8s-tools/helm` (helm.sh/helm/v4), found in
//! `$CLUSTERSET_K8S_TOOLS/helm/bin` (default `/var/cache/clusterset/k8s-tools`) once
//! `build.sh --check helm` says it is current. [`helm`] finds it once per test process and
//! panics, naming the build command, when it is missing or stale: the tests that need it fail,
//! never skip.
//!
//! Every run is hermetic: no environment but `PATH`, a fresh home with Helm's configuration,
//! cache and data directories in it, and no kubeconfig: rendering and linting talk to no
//! cluster. The commands that do ([`Helm::install`], [`Helm::uninstall`], [`Helm::status`],
//! [`Helm::manifest`]: the end-to-end tests' installs into real API servers) are given the
//! cluster as a [`Kube`], a kubeconfig file and its context, and see nothing else. Values are
//! written to a file in that home and given with `-f`, as a user gives a values file.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use serde_json::Value;

use crate::chart::Rendered;

/// What builds Helm, or builds it again when its module changed.
pub const BUILD_COMMAND: &str = "bash tests/k8s-tools/build.sh helm";

/// [`BUILD_COMMAND`] for the tools directory the tests use: with `CLUSTERSET_K8S_TOOLS` in
/// front when it is set.
pub fn build_command() -> String {
    match std::env::var_os("CLUSTERSET_K8S_TOOLS").filter(|dir| !dir.is_empty()) {
        Some(dir) => format!(
            "CLUSTERSET_K8S_TOOLS={} {BUILD_COMMAND}",
            dir.to_string_lossy()
        ),
        None => BUILD_COMMAND.to_owned(),
    }
}

/// What says whether the built Helm is current (exit 1, naming what to run, when it is not).
const CHECK_COMMAND: &str = "bash tests/k8s-tools/build.sh --check helm";

/// Where the k8s tools are built when `CLUSTERSET_K8S_TOOLS` does not say.
pub const DEFAULT_TOOLS: &str = "/var/cache/clusterset/k8s-tools";

/// The workspace's root directory (the charts' paths in the docs are relative to it).
pub fn workspace_root() -> PathBuf {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    root.canonicalize().unwrap_or(root)
}

/// The directory the k8s tools are built in: `CLUSTERSET_K8S_TOOLS`, or [`DEFAULT_TOOLS`].
pub fn tools_dir() -> PathBuf {
    std::env::var_os("CLUSTERSET_K8S_TOOLS")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from(DEFAULT_TOOLS), PathBuf::from)
}

/// The Helm binary of the k8s tools, found current once per process; panics with what to run
/// when it is missing or stale.
pub fn helm() -> &'static Helm {
    static HELM: OnceLock<Result<Helm, String>> = OnceLock::new();
    match HELM.get_or_init(Helm::find) {
        Ok(helm) => helm,
        Err(message) => panic!("{message}"),
    }
}

/// A Helm run that failed: the command line and what Helm said (or why its output could not
/// be read).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Failure {
    /// `helm template ...`, as run.
    pub command: String,
    /// Helm's standard error (its `Error: ...` line), or the reason its output is unreadable.
    pub message: String,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "`{}` failed: {}", self.command, self.message.trim_end())
    }
}

impl std::error::Error for Failure {}

/// The Helm binary.
#[derive(Debug, Clone)]
pub struct Helm {
    binary: PathBuf,
}

/// A cluster Helm talks to: a kubeconfig file (`KUBECONFIG` of the run) and the context in it
/// (`--kube-context`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Kube {
    /// The kubeconfig file.
    pub kubeconfig: PathBuf,
    /// The context.
    pub context: String,
}

impl Helm {
    /// The Helm of the k8s tools, if `build.sh --check helm` says it is current; otherwise what
    /// it said and the command that builds it.
    pub fn find() -> Result<Self, String> {
        let root = workspace_root();
        let check = Command::new("bash")
            .args(["tests/k8s-tools/build.sh", "--check", "helm"])
            .current_dir(&root)
            .output()
            .map_err(|error| {
                format!(
                    "the charts' tests need Helm 4: `{CHECK_COMMAND}` could not run in {} ({error}); build Helm with: {}",
                    root.display(),
                    build_command()
                )
            })?;
        if !check.status.success() {
            return Err(format!(
                "the charts' tests need Helm 4 and it is missing or stale (`{CHECK_COMMAND}`: {}); build it with: {}",
                String::from_utf8_lossy(&check.stderr).trim(),
                build_command()
            ));
        }
        let binary = tools_dir().join("helm/bin/helm");
        if !binary.is_file() {
            return Err(format!(
                "the charts' tests need Helm 4, and {} is missing although `{CHECK_COMMAND}` passed; build it with: {}",
                binary.display(),
                build_command()
            ));
        }
        Ok(Self { binary })
    }

    /// The binary's path.
    pub fn path(&self) -> &Path {
        &self.binary
    }

    /// Runs `helm args...` in the workspace's root, hermetically (see the module's docs), with
    /// `values` (if any) written to a file and given last with `-f`; Helm's standard output,
    /// or its failure.
    pub fn run(&self, args: &[&str], values: Option<&Value>) -> Result<String, Failure> {
        self.run_on(None, args, values)
    }

    /// [`Helm::run`] against the cluster `kube` (when given): `KUBECONFIG` is its kubeconfig
    /// and `--kube-context` its context, given after `args`.
    pub fn run_on(
        &self,
        kube: Option<&Kube>,
        args: &[&str],
        values: Option<&Value>,
    ) -> Result<String, Failure> {
        let mut command_line: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        if let Some(kube) = kube {
            command_line.extend(["--kube-context".to_owned(), kube.context.clone()]);
        }
        let setup = |message: String| Failure {
            command: format!("helm {}", command_line.join(" ")),
            message,
        };
        let home = tempfile::tempdir()
            .map_err(|error| setup(format!("cannot make Helm's home directory: {error}")))?;
        if let Some(values) = values {
            let file = home.path().join("values.json");
            serde_json::to_vec_pretty(values)
                .map_err(|error| error.to_string())
                .and_then(|json| std::fs::write(&file, json).map_err(|error| error.to_string()))
                .map_err(|error| {
                    setup(format!(
                        "cannot write the values file {}: {error}",
                        file.display()
                    ))
                })?;
            command_line.extend(["-f".to_owned(), file.to_string_lossy().into_owned()]);
        }
        let shown = format!("helm {}", command_line.join(" "));
        let mut homes = Vec::new();
        for name in ["config", "cache", "data"] {
            let dir = home.path().join(name);
            std::fs::create_dir_all(&dir).map_err(|error| Failure {
                command: shown.clone(),
                message: format!("cannot make {}: {error}", dir.display()),
            })?;
            homes.push(dir);
        }
        let kubeconfig = kube.map_or_else(
            || home.path().join("no-kubeconfig"),
            |kube| kube.kubeconfig.clone(),
        );
        let output = Command::new(&self.binary)
            .args(&command_line)
            .current_dir(workspace_root())
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", home.path())
            .env("HELM_CONFIG_HOME", &homes[0])
            .env("HELM_CACHE_HOME", &homes[1])
            .env("HELM_DATA_HOME", &homes[2])
            .env("KUBECONFIG", kubeconfig)
            .output()
            .map_err(|error| Failure {
                command: shown.clone(),
                message: format!("{} could not run: {error}", self.binary.display()),
            })?;
        if !output.status.success() {
            return Err(Failure {
                command: shown,
                message: format!(
                    "{}{}",
                    String::from_utf8_lossy(&output.stderr),
                    String::from_utf8_lossy(&output.stdout)
                ),
            });
        }
        String::from_utf8(output.stdout).map_err(|error| Failure {
            command: shown,
            message: format!("its output is not UTF-8: {error}"),
        })
    }

    /// `helm template RELEASE CHART --namespace NAMESPACE -f VALUES`: the chart rendered as it
    /// would be installed as `release` in `namespace`, `values` over its values.yaml (maps
    /// merged key by key, other values replaced, `null` deleting a key), read into its objects.
    pub fn template(
        &self,
        chart: &Path,
        release: &str,
        namespace: &str,
        values: &Value,
    ) -> Result<Rendered, Failure> {
        self.render(chart, release, namespace, &[], Some(values))
    }

    /// `helm template RELEASE CHART --namespace NAMESPACE ARGS...`, with value options as a
    /// user writes them (`--set k=v`, `-f file`; paths relative to the workspace's root).
    pub fn template_with(
        &self,
        chart: &Path,
        release: &str,
        namespace: &str,
        args: &[String],
    ) -> Result<Rendered, Failure> {
        self.render(chart, release, namespace, args, None)
    }

    fn render(
        &self,
        chart: &Path,
        release: &str,
        namespace: &str,
        args: &[String],
        values: Option<&Value>,
    ) -> Result<Rendered, Failure> {
        let chart = chart.to_string_lossy();
        let mut command = vec!["template", release, &chart, "--namespace", namespace];
        command.extend(args.iter().map(String::as_str));
        let manifest = self.run(&command, values)?;
        Rendered::parse(&manifest).map_err(|message| Failure {
            command: format!("helm {}", command.join(" ")),
            message,
        })
    }

    /// The chart's NOTES.txt as Helm renders it for an install (`helm template` does not print
    /// them): `helm install RELEASE CHART --namespace NAMESPACE -f VALUES --dry-run=client -o
    /// json`, which renders without a cluster, and the release's `info.notes`.
    pub fn notes(
        &self,
        chart: &Path,
        release: &str,
        namespace: &str,
        values: &Value,
    ) -> Result<String, Failure> {
        let chart = chart.to_string_lossy();
        let args = [
            "install",
            release,
            &chart,
            "--namespace",
            namespace,
            "--dry-run=client",
            "-o",
            "json",
        ];
        let printed = self.run(&args, Some(values))?;
        let unreadable = |message: String| Failure {
            command: format!("helm {}", args.join(" ")),
            message,
        };
        let release: Value = serde_json::from_str(&printed)
            .map_err(|error| unreadable(format!("its output is no release JSON: {error}")))?;
        release["info"]["notes"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| unreadable(format!("the release has no info.notes: {printed}")))
    }

    /// `helm lint --strict CHART --namespace NAMESPACE ARGS...` (`args`: value options such as
    /// `--set k=v` or `-f file`, paths relative to the workspace's root): Helm's report, or the
    /// failure with it (a warning fails too).
    pub fn lint(&self, chart: &Path, namespace: &str, args: &[String]) -> Result<String, Failure> {
        let chart = chart.to_string_lossy();
        let mut command = vec!["lint", "--strict", &chart, "--namespace", namespace];
        command.extend(args.iter().map(String::as_str));
        self.run(&command, None)
    }

    /// `helm show chart CHART`: the chart's Chart.yaml as Helm reads it.
    pub fn show_chart(&self, chart: &Path) -> Result<Value, Failure> {
        let chart = chart.to_string_lossy();
        let args = ["show", "chart", &chart];
        let printed = self.run(&args, None)?;
        serde_saphyr::from_str(&printed).map_err(|error| Failure {
            command: format!("helm {}", args.join(" ")),
            message: format!("its output is no YAML: {error}"),
        })
    }

    /// `helm install RELEASE CHART --namespace NAMESPACE OPTIONS... -o json -f VALUES` into the
    /// cluster `kube` (`options`: `--create-namespace`, `--wait`, `--take-ownership`...): the
    /// release Helm printed (its `info.status`, `manifest`...), or the failure.
    pub fn install(
        &self,
        kube: &Kube,
        chart: &Path,
        release: &str,
        namespace: &str,
        options: &[&str],
        values: &Value,
    ) -> Result<Value, Failure> {
        let chart = chart.to_string_lossy();
        let mut args = vec!["install", release, &chart, "--namespace", namespace];
        args.extend(options);
        args.extend(["-o", "json"]);
        let printed = self.run_on(Some(kube), &args, Some(values))?;
        serde_json::from_str(&printed).map_err(|error| Failure {
            command: format!("helm {}", args.join(" ")),
            message: format!("its output is no release JSON ({error}): {printed}"),
        })
    }

    /// `helm uninstall RELEASE --namespace NAMESPACE OPTIONS...` in the cluster `kube`: what
    /// Helm printed (`release "NAME" uninstalled`, and the resources it kept), or the failure.
    pub fn uninstall(
        &self,
        kube: &Kube,
        release: &str,
        namespace: &str,
        options: &[&str],
    ) -> Result<String, Failure> {
        let mut args = vec!["uninstall", release, "--namespace", namespace];
        args.extend(options);
        self.run_on(Some(kube), &args, None)
    }

    /// `helm status RELEASE --namespace NAMESPACE -o json` in the cluster `kube`: the release
    /// (`info.status` is `deployed` once installed), or the failure (`release: not found`).
    pub fn status(&self, kube: &Kube, release: &str, namespace: &str) -> Result<Value, Failure> {
        let args = ["status", release, "--namespace", namespace, "-o", "json"];
        let printed = self.run_on(Some(kube), &args, None)?;
        serde_json::from_str(&printed).map_err(|error| Failure {
            command: format!("helm {}", args.join(" ")),
            message: format!("its output is no release JSON ({error}): {printed}"),
        })
    }

    /// `helm get manifest RELEASE --namespace NAMESPACE` in the cluster `kube`: the objects
    /// the release installed, as Helm stored them.
    pub fn manifest(
        &self,
        kube: &Kube,
        release: &str,
        namespace: &str,
    ) -> Result<Rendered, Failure> {
        let args = ["get", "manifest", release, "--namespace", namespace];
        let printed = self.run_on(Some(kube), &args, None)?;
        Rendered::parse(&printed).map_err(|message| Failure {
            command: format!("helm {}", args.join(" ")),
            message,
        })
    }

    /// `helm version --template {{.Version}}`: such as `v4.3.2`.
    pub fn version(&self) -> Result<String, Failure> {
        Ok(self
            .run(&["version", "--template", "{{.Version}}"], None)?
            .trim()
            .to_owned())
    }
}

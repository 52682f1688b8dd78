//! Reaching a cluster, for `mcsctl` and both daemons alike, by kubectl's rules: `--kubeconfig`,
//! else `$KUBECONFIG` (a list of files, merged), else `~/.kube/config`, else the pod's service
//! account; `--context`, else the kubeconfig's current-context; `-n`, else the context's
//! namespace, else `default`. Every failure names the file and the flag that fixes it.
//!
//! [`KubeconfigArgs`] (`--kubeconfig`, `--context`) and [`NamespaceArgs`] (`-n`) are the clap
//! flags every binary flattens; [`connect`] takes other flag names for a second cluster (the
//! agent's hub: `--broker-kubeconfig`, `--broker-context`), so that its errors name those.
//!
//! ```
//! use clap::Parser;
//! use clusterset_daemon::kubeconfig::KubeconfigArgs;
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     cluster: KubeconfigArgs,
//! }
//!
//! let cli = Cli::parse_from(["daemon", "--kubeconfig", "/nonexistent/member", "--context", "east"]);
//! let runtime = tokio::runtime::Builder::new_current_thread().build()?;
//! let error = runtime.block_on(cli.cluster.connect()).err().ok_or("a missing file connects")?;
//! assert_eq!(
//!     error.to_string(),
//!     "the kubeconfig /nonexistent/member does not exist: pass an existing file with --kubeconfig"
//! );
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kube::config::{InClusterError, KubeConfigOptions, Kubeconfig, KubeconfigError};

/// `--kubeconfig FILE` and `--context NAME`: the cluster to reach, as kubectl (and
/// controller-runtime's managers) take them. Flatten it into a command's flags.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct KubeconfigArgs {
    /// The kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the pod's service
    /// account when run in a cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current-context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
}

impl KubeconfigArgs {
    /// A client for the cluster these flags name ([`connect`] with [`FlagNames::KUBECTL`]).
    pub async fn connect(&self) -> Result<Connection, ConnectError> {
        connect(
            self.kubeconfig.as_deref(),
            self.context.as_deref(),
            &FlagNames::KUBECTL,
        )
        .await
    }

    /// The kubeconfig these flags select ([`Source::from_env`], merged by [`load`]); `None`
    /// when there is none (a pod would use its service account). What shell completion offers
    /// the contexts of.
    pub fn load(&self) -> Result<Option<Kubeconfig>, ConnectError> {
        load(
            &Source::from_env(self.kubeconfig.as_deref()),
            &FlagNames::KUBECTL,
        )
    }
}

/// `-n NS` / `--namespace NS`: the namespace to work in, as kubectl takes it.
#[derive(Debug, Clone, Default, PartialEq, Eq, clap::Args)]
pub struct NamespaceArgs {
    /// The namespace (default: the context's namespace, else "default").
    #[arg(short, long, value_name = "NS")]
    pub namespace: Option<String>,
}

impl NamespaceArgs {
    /// `-n`, else the namespace of the context `connection` was made from.
    pub fn or_default(&self, connection: &Connection) -> String {
        self.namespace
            .clone()
            .unwrap_or_else(|| connection.namespace.clone())
    }
}

/// The flags that choose the kubeconfig and its context, named in the fixes of [`ConnectError`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FlagNames {
    /// The flag of the kubeconfig file (`--kubeconfig`).
    pub kubeconfig: &'static str,
    /// The flag of the context (`--context`).
    pub context: &'static str,
}

impl FlagNames {
    /// `--kubeconfig` and `--context`: the flags of [`KubeconfigArgs`].
    pub const KUBECTL: Self = Self {
        kubeconfig: "--kubeconfig",
        context: "--context",
    };

    /// `--broker-kubeconfig` and `--broker-context`: the hub cluster's flags of the agent and
    /// the gateway.
    pub const BROKER: Self = Self {
        kubeconfig: "--broker-kubeconfig",
        context: "--broker-context",
    };
}

/// Why the cluster cannot be reached: each says which file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// The kubeconfig flag names a file that does not exist.
    #[error("the kubeconfig {} does not exist: pass an existing file with {}", .path.display(), .flags.kubeconfig)]
    Missing {
        /// The file.
        path: PathBuf,
        /// The flags, for the fix.
        flags: &'static FlagNames,
    },
    /// None of the files of `$KUBECONFIG` exists.
    #[error(
        "none of the kubeconfig files in $KUBECONFIG exist ({files}): set KUBECONFIG to an existing file or pass {}", .flags.kubeconfig
    )]
    NoneInEnv {
        /// The files, `:`-separated.
        files: String,
        /// The flags, for the fix.
        flags: &'static FlagNames,
    },
    /// A kubeconfig file cannot be read.
    #[error(
        "cannot read the kubeconfig {}: fix the file (kubectl config view shows what it holds) or pass another with {}",
        .path.display(), .flags.kubeconfig
    )]
    Read {
        /// The file.
        path: PathBuf,
        /// The flags, for the fix.
        flags: &'static FlagNames,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// The files of `$KUBECONFIG` cannot be merged.
    #[error("cannot merge the kubeconfig files in $KUBECONFIG ({files})")]
    Merge {
        /// The files.
        files: String,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// The context to use is not there; the message says which there are.
    #[error("{0}")]
    Context(String),
    /// The context's cluster or user entries cannot be used.
    #[error(
        "cannot use the context {context:?} of the kubeconfig {file}: fix its cluster and user entries, or pass another {}", .flags.context
    )]
    UseContext {
        /// The context.
        context: String,
        /// The kubeconfig.
        file: String,
        /// The flags, for the fix.
        flags: &'static FlagNames,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// A context flag without a kubeconfig.
    #[error(
        "{} {context} needs a kubeconfig, and there is none at {file}: pass {}", .flags.context, .flags.kubeconfig
    )]
    ContextWithoutKubeconfig {
        /// The context.
        context: String,
        /// Where the kubeconfig was looked for.
        file: String,
        /// The flags, for the fix.
        flags: &'static FlagNames,
    },
    /// No kubeconfig, and the pod's service account cannot be used.
    #[error("no kubeconfig, and the pod's service account cannot be used: pass {}", .flags.kubeconfig)]
    InCluster {
        /// The flags, for the fix.
        flags: &'static FlagNames,
        /// Why.
        #[source]
        source: InClusterError,
    },
    /// No kubeconfig, and not in a pod.
    #[error(
        "no kubeconfig at {file}: pass {} FILE, set KUBECONFIG, or copy your cluster's kubeconfig there", .flags.kubeconfig
    )]
    NoKubeconfig {
        /// Where the kubeconfig was looked for.
        file: String,
        /// The flags, for the fix.
        flags: &'static FlagNames,
    },
    /// The client cannot be built.
    #[error("cannot build a client for {origin}")]
    Client {
        /// Where it points.
        origin: String,
        /// Why.
        #[source]
        source: kube::Error,
    },
}

/// Where the kubeconfig comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Source {
    /// The kubeconfig flag: the file must exist.
    Flag(PathBuf),
    /// `$KUBECONFIG`: the files that exist are merged (kubectl's rule), at least one must.
    Env(Vec<PathBuf>),
    /// `~/.kube/config`; when it does not exist, the pod's service account is tried.
    Default(Option<PathBuf>),
}

impl Source {
    /// The source that `flag`, `$KUBECONFIG` (`env`) and `$HOME` (`home`) select.
    pub fn select(flag: Option<&Path>, env: Option<OsString>, home: Option<OsString>) -> Self {
        if let Some(path) = flag {
            return Self::Flag(path.to_path_buf());
        }
        let listed: Vec<PathBuf> = env
            .map(|value| {
                std::env::split_paths(&value)
                    .filter(|p| !p.as_os_str().is_empty())
                    .collect()
            })
            .unwrap_or_default();
        if !listed.is_empty() {
            return Self::Env(listed);
        }
        Self::Default(
            home.filter(|h| !h.is_empty())
                .map(|h| PathBuf::from(h).join(".kube").join("config")),
        )
    }

    /// The source that `flag` selects, else this process's `$KUBECONFIG` and `$HOME`.
    pub fn from_env(flag: Option<&Path>) -> Self {
        Self::select(
            flag,
            std::env::var_os("KUBECONFIG"),
            std::env::var_os("HOME"),
        )
    }

    /// Describes the files for messages.
    fn describe(&self) -> String {
        match self {
            Self::Flag(path) => path.display().to_string(),
            Self::Env(paths) => format!("$KUBECONFIG ({})", join_paths(paths)),
            Self::Default(Some(path)) => path.display().to_string(),
            Self::Default(None) => "~/.kube/config ($HOME is not set)".to_owned(),
        }
    }
}

fn join_paths(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(":")
}

/// A client and where it points.
pub struct Connection {
    /// The API client.
    pub client: kube::Client,
    /// The context's namespace (the pod's with its service account), else `default`.
    pub namespace: String,
    /// Where the settings came from, for messages: `context east of /home/me/.kube/config`.
    pub origin: String,
}

impl std::fmt::Debug for Connection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Connection")
            .field("namespace", &self.namespace)
            .field("origin", &self.origin)
            .finish_non_exhaustive()
    }
}

/// Reads and merges the kubeconfig files of `source`; `None` when there is none and the
/// service account should be tried. `flags` name the fix in the errors.
pub fn load(
    source: &Source,
    flags: &'static FlagNames,
) -> Result<Option<Kubeconfig>, ConnectError> {
    let read = |path: &Path| {
        Kubeconfig::read_from(path).map_err(|source| ConnectError::Read {
            path: path.to_path_buf(),
            flags,
            source,
        })
    };
    match source {
        Source::Flag(path) => {
            if !path.exists() {
                return Err(ConnectError::Missing {
                    path: path.clone(),
                    flags,
                });
            }
            read(path).map(Some)
        }
        Source::Env(paths) => {
            let existing: Vec<&PathBuf> = paths.iter().filter(|p| p.exists()).collect();
            if existing.is_empty() {
                return Err(ConnectError::NoneInEnv {
                    files: join_paths(paths),
                    flags,
                });
            }
            let mut merged = Kubeconfig::default();
            for path in existing {
                merged = merged
                    .merge(read(path)?)
                    .map_err(|source| ConnectError::Merge {
                        files: join_paths(paths),
                        source,
                    })?;
            }
            Ok(Some(merged))
        }
        Source::Default(Some(path)) if path.exists() => read(path).map(Some),
        Source::Default(_) => Ok(None),
    }
}

/// Checks that the context to use exists in `kubeconfig` (the file `file`); its name. `flags`
/// name the fix in the errors.
pub fn pick_context(
    kubeconfig: &Kubeconfig,
    wanted: Option<&str>,
    file: &str,
    flags: &'static FlagNames,
) -> Result<String, ConnectError> {
    let names: Vec<&str> = kubeconfig
        .contexts
        .iter()
        .map(|c| c.name.as_str())
        .collect();
    let known = if names.is_empty() {
        "it has none".to_owned()
    } else {
        format!("it has: {}", names.join(", "))
    };
    let FlagNames {
        kubeconfig: kubeconfig_flag,
        context: context_flag,
    } = flags;
    let refuse = |text: String| Err(ConnectError::Context(text));
    match wanted {
        Some(name) if names.contains(&name) => Ok(name.to_owned()),
        Some(name) => refuse(format!(
            "there is no context {name:?} in the kubeconfig {file} ({known}): pass one of them with {context_flag}"
        )),
        None => match kubeconfig.current_context.as_deref() {
            Some(name) if names.contains(&name) => Ok(name.to_owned()),
            Some(name) => refuse(format!(
                "the current-context {name:?} of the kubeconfig {file} is not one of its contexts ({known}): pass {context_flag}, or run kubectl config use-context NAME"
            )),
            None if names.is_empty() => refuse(format!(
                "the kubeconfig {file} has no contexts: add one (kubectl config set-context) or pass another file with {kubeconfig_flag}"
            )),
            None => refuse(format!(
                "the kubeconfig {file} has no current-context ({known}): pass {context_flag} NAME, or run kubectl config use-context NAME"
            )),
        },
    }
}

/// A client for the cluster that the kubeconfig flag `kubeconfig` and the context flag
/// `context` name, by kubectl's rules (see the module); `flags` are those flags' names, for the
/// fixes the errors give. No request is sent: an unreachable cluster shows at the first one.
pub async fn connect(
    kubeconfig: Option<&Path>,
    context: Option<&str>,
    flags: &'static FlagNames,
) -> Result<Connection, ConnectError> {
    let source = Source::from_env(kubeconfig);
    let file = source.describe();
    let (config, origin) = match load(&source, flags)? {
        Some(kubeconfig) => {
            let context = pick_context(&kubeconfig, context, &file, flags)?;
            let options = KubeConfigOptions {
                context: Some(context.clone()),
                ..KubeConfigOptions::default()
            };
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|source| ConnectError::UseContext {
                    context: context.clone(),
                    file: file.clone(),
                    flags,
                    source,
                })?;
            (config, format!("context {context} of {file}"))
        }
        None if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => {
            if let Some(context) = context {
                return Err(ConnectError::ContextWithoutKubeconfig {
                    context: context.to_owned(),
                    file,
                    flags,
                });
            }
            let config = kube::Config::incluster()
                .map_err(|source| ConnectError::InCluster { flags, source })?;
            (config, "the pod's service account".to_owned())
        }
        None => return Err(ConnectError::NoKubeconfig { file, flags }),
    };
    let namespace = config.default_namespace.clone();
    let origin = format!("{} ({})", config.cluster_url, origin);
    let client = kube::Client::try_from(config).map_err(|source| ConnectError::Client {
        origin: origin.clone(),
        source,
    })?;
    Ok(Connection {
        client,
        namespace,
        origin,
    })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    const FLAGS: &FlagNames = &FlagNames::KUBECTL;

    #[test]
    fn the_flag_wins_then_kubeconfig_then_home() {
        let flag = PathBuf::from("/tmp/a");
        assert_eq!(
            Source::select(Some(&flag), Some("/b".into()), Some("/home/me".into())),
            Source::Flag(flag)
        );
        assert_eq!(
            Source::select(None, Some("/b::/c".into()), Some("/home/me".into())),
            Source::Env(vec!["/b".into(), "/c".into()])
        );
        assert_eq!(
            Source::select(None, Some("".into()), Some("/home/me".into())),
            Source::Default(Some("/home/me/.kube/config".into()))
        );
        assert_eq!(Source::select(None, None, None), Source::Default(None));
    }

    fn kubeconfig(yaml: &str) -> Kubeconfig {
        Kubeconfig::from_yaml(yaml).unwrap()
    }

    const TWO: &str = "
apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: 'http://127.0.0.1:1'}}]
users: [{name: u, user: {}}]
contexts:
- {name: east, context: {cluster: c, user: u}}
- {name: west, context: {cluster: c, user: u, namespace: shop}}
";

    #[test]
    fn contexts_must_exist_and_the_error_lists_them() {
        let config = kubeconfig(&format!("{TWO}current-context: east\n"));
        assert_eq!(pick_context(&config, None, "f", FLAGS).unwrap(), "east");
        assert_eq!(
            pick_context(&config, Some("west"), "f", FLAGS).unwrap(),
            "west"
        );
        let err = pick_context(&config, Some("north"), "/k", FLAGS).unwrap_err();
        assert_eq!(
            err.to_string(),
            "there is no context \"north\" in the kubeconfig /k (it has: east, west): pass one of them with --context"
        );
        let err = pick_context(&kubeconfig(TWO), None, "/k", FLAGS).unwrap_err();
        assert!(
            err.to_string()
                .contains("/k has no current-context (it has: east, west): pass --context NAME"),
            "{err}"
        );
        let err = pick_context(&Kubeconfig::default(), None, "/k", FLAGS).unwrap_err();
        assert!(err.to_string().contains("/k has no contexts"), "{err}");
    }

    #[test]
    fn missing_and_broken_files_are_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = load(&Source::Flag(missing.clone()), FLAGS).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the kubeconfig {} does not exist: pass an existing file with --kubeconfig",
                missing.display()
            )
        );
        assert!(
            load(&Source::Default(Some(missing.clone())), FLAGS)
                .unwrap()
                .is_none()
        );
        let err = load(&Source::Env(vec![missing.clone()]), FLAGS).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("none of the kubeconfig files in $KUBECONFIG exist"),
            "{err}"
        );
        let broken = dir.path().join("broken");
        std::fs::write(&broken, "clusters: [oops").unwrap();
        let err = load(&Source::Flag(broken.clone()), FLAGS).unwrap_err();
        assert!(
            crate::ErrorChain(&err).to_string().starts_with(&format!(
                "cannot read the kubeconfig {}: fix the file",
                broken.display()
            )),
            "{err}"
        );
        let good = dir.path().join("good");
        std::fs::write(&good, TWO).unwrap();
        let merged = load(&Source::Env(vec![missing, good]), FLAGS)
            .unwrap()
            .unwrap();
        assert_eq!(merged.contexts.len(), 2);
    }

    /// The flags of a second cluster (the agent's hub) are the ones every fix names.
    #[tokio::test]
    async fn other_flag_names_are_the_ones_the_fixes_name() {
        let hub = &FlagNames {
            kubeconfig: "--broker-kubeconfig",
            context: "--broker-context",
        };
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("hub");
        let err = connect(Some(&missing), None, hub).await.unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the kubeconfig {} does not exist: pass an existing file with --broker-kubeconfig",
                missing.display()
            )
        );
        let file = dir.path().join("hub.kubeconfig");
        std::fs::write(&file, format!("{TWO}current-context: east\n")).unwrap();
        let err = connect(Some(&file), Some("north"), hub).await.unwrap_err();
        assert!(
            err.to_string()
                .ends_with("(it has: east, west): pass one of them with --broker-context"),
            "{err}"
        );
        let connection = connect(Some(&file), Some("west"), hub).await.unwrap();
        assert_eq!(connection.namespace, "shop");
        assert_eq!(
            connection.origin,
            format!("http://127.0.0.1:1/ (context west of {})", file.display())
        );
    }
}

//! Reaching a cluster like kubectl does: `--kubeconfig`, else `$KUBECONFIG` (a list of files,
//! merged), else `~/.kube/config`, else the pod's service account; `--context`, else the
//! kubeconfig's current-context; `-n`, else the context's namespace, else `default`. Every
//! failure names the file and says what to do.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use kube::config::{InClusterError, KubeConfigOptions, Kubeconfig, KubeconfigError};

/// The cluster and namespace to read, as kubectl takes them (`--kubeconfig`, `--context`, `-n`).
#[derive(Debug, Clone, Default)]
pub struct Target {
    /// The kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the pod's service
    /// account when run in a cluster).
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current-context).
    pub context: Option<String>,
    /// The namespace (default: the context's namespace, else "default").
    pub namespace: Option<String>,
}

/// Why the cluster cannot be reached: each says which file and what to do.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    /// `--kubeconfig FILE` does not exist.
    #[error("the kubeconfig {} does not exist: pass an existing file with --kubeconfig", .0.display())]
    Missing(PathBuf),
    /// None of the files of `$KUBECONFIG` exists.
    #[error(
        "none of the kubeconfig files in $KUBECONFIG exist ({0}): set KUBECONFIG to an existing file or pass --kubeconfig"
    )]
    NoneInEnv(String),
    /// A kubeconfig file cannot be read.
    #[error(
        "cannot read the kubeconfig {}: fix the file (kubectl config view shows what it holds) or pass another with --kubeconfig",
        .path.display()
    )]
    Read {
        /// The file.
        path: PathBuf,
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
        "cannot use the context {context:?} of the kubeconfig {file}: fix its cluster and user entries, or pass another --context"
    )]
    UseContext {
        /// The context.
        context: String,
        /// The kubeconfig.
        file: String,
        /// Why.
        #[source]
        source: KubeconfigError,
    },
    /// `--context` without a kubeconfig.
    #[error(
        "--context {context} needs a kubeconfig, and there is none at {file}: pass --kubeconfig"
    )]
    ContextWithoutKubeconfig {
        /// The context.
        context: String,
        /// Where the kubeconfig was looked for.
        file: String,
    },
    /// No kubeconfig, and the pod's service account cannot be used.
    #[error("no kubeconfig, and the pod's service account cannot be used: pass --kubeconfig")]
    InCluster(#[source] InClusterError),
    /// No kubeconfig, and not in a pod.
    #[error(
        "no kubeconfig at {0}: pass --kubeconfig FILE, set KUBECONFIG, or copy your cluster's kubeconfig there"
    )]
    NoKubeconfig(String),
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
    /// `--kubeconfig FILE`: the file must exist.
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
    /// The namespace to read (`-n`, else the context's).
    pub namespace: String,
    /// Where the settings came from, for messages: `context east of /home/me/.kube/config`.
    pub origin: String,
}

/// Reads and merges the kubeconfig files of `source`; `None` when there is none and the
/// service account should be tried.
pub fn load(source: &Source) -> Result<Option<Kubeconfig>, ConnectError> {
    let read = |path: &Path| {
        Kubeconfig::read_from(path).map_err(|source| ConnectError::Read {
            path: path.to_path_buf(),
            source,
        })
    };
    match source {
        Source::Flag(path) => {
            if !path.exists() {
                return Err(ConnectError::Missing(path.clone()));
            }
            read(path).map(Some)
        }
        Source::Env(paths) => {
            let existing: Vec<&PathBuf> = paths.iter().filter(|p| p.exists()).collect();
            if existing.is_empty() {
                return Err(ConnectError::NoneInEnv(join_paths(paths)));
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

/// Checks that the context to use exists in `kubeconfig`; its name.
pub fn pick_context(
    kubeconfig: &Kubeconfig,
    wanted: Option<&str>,
    file: &str,
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
    let refuse = |text: String| Err(ConnectError::Context(text));
    match wanted {
        Some(name) if names.contains(&name) => Ok(name.to_owned()),
        Some(name) => refuse(format!(
            "there is no context {name:?} in the kubeconfig {file} ({known}): pass one of them with --context"
        )),
        None => match kubeconfig.current_context.as_deref() {
            Some(name) if names.contains(&name) => Ok(name.to_owned()),
            Some(name) => refuse(format!(
                "the current-context {name:?} of the kubeconfig {file} is not one of its contexts ({known}): pass --context, or run kubectl config use-context NAME"
            )),
            None if names.is_empty() => refuse(format!(
                "the kubeconfig {file} has no contexts: add one (kubectl config set-context) or pass another file with --kubeconfig"
            )),
            None => refuse(format!(
                "the kubeconfig {file} has no current-context ({known}): pass --context NAME, or run kubectl config use-context NAME"
            )),
        },
    }
}

/// A client for the cluster `args` name.
pub async fn connect(args: &Target) -> Result<Connection, ConnectError> {
    let source = Source::select(
        args.kubeconfig.as_deref(),
        std::env::var_os("KUBECONFIG"),
        std::env::var_os("HOME"),
    );
    let file = source.describe();
    let (config, origin) = match load(&source)? {
        Some(kubeconfig) => {
            let context = pick_context(&kubeconfig, args.context.as_deref(), &file)?;
            let options = KubeConfigOptions {
                context: Some(context.clone()),
                ..KubeConfigOptions::default()
            };
            let config = kube::Config::from_custom_kubeconfig(kubeconfig, &options)
                .await
                .map_err(|source| ConnectError::UseContext {
                    context: context.clone(),
                    file: file.clone(),
                    source,
                })?;
            (config, format!("context {context} of {file}"))
        }
        None if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => {
            if let Some(context) = &args.context {
                return Err(ConnectError::ContextWithoutKubeconfig {
                    context: context.clone(),
                    file,
                });
            }
            let config = kube::Config::incluster().map_err(ConnectError::InCluster)?;
            (config, "the pod's service account".to_owned())
        }
        None => return Err(ConnectError::NoKubeconfig(file)),
    };
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
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
    use super::*;

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
        assert_eq!(pick_context(&config, None, "f").unwrap(), "east");
        assert_eq!(pick_context(&config, Some("west"), "f").unwrap(), "west");
        let err = pick_context(&config, Some("north"), "/k").unwrap_err();
        assert_eq!(
            err.to_string(),
            "there is no context \"north\" in the kubeconfig /k (it has: east, west): pass one of them with --context"
        );
        let err = pick_context(&kubeconfig(TWO), None, "/k").unwrap_err();
        assert!(
            err.to_string()
                .contains("/k has no current-context (it has: east, west): pass --context NAME"),
            "{err}"
        );
        let err = pick_context(&Kubeconfig::default(), None, "/k").unwrap_err();
        assert!(err.to_string().contains("/k has no contexts"), "{err}");
    }

    #[test]
    fn missing_and_broken_files_are_named_with_the_fix() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope");
        let err = load(&Source::Flag(missing.clone())).unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "the kubeconfig {} does not exist: pass an existing file with --kubeconfig",
                missing.display()
            )
        );
        assert!(
            load(&Source::Default(Some(missing.clone())))
                .unwrap()
                .is_none()
        );
        let err = load(&Source::Env(vec![missing.clone()])).unwrap_err();
        assert!(
            err.to_string()
                .starts_with("none of the kubeconfig files in $KUBECONFIG exist"),
            "{err}"
        );
        let broken = dir.path().join("broken");
        std::fs::write(&broken, "clusters: [oops").unwrap();
        let err = load(&Source::Flag(broken.clone())).unwrap_err();
        assert!(
            format!("{err:#}").starts_with(&format!(
                "cannot read the kubeconfig {}: fix the file",
                broken.display()
            )),
            "{err:#}"
        );
        let good = dir.path().join("good");
        std::fs::write(&good, TWO).unwrap();
        let merged = load(&Source::Env(vec![missing, good])).unwrap().unwrap();
        assert_eq!(merged.contexts.len(), 2);
    }
}

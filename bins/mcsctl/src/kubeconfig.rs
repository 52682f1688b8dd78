//! Reaching a cluster like kubectl does: `--kubeconfig`, else `$KUBECONFIG` (a list of files,
//! merged), else `~/.kube/config`, else the pod's service account; `--context`, else the
//! kubeconfig's current-context; `-n`, else the context's namespace, else `default`. Every
//! failure names the file and says what to do.

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};
use clap::Args;
use kube::config::{KubeConfigOptions, Kubeconfig};

/// The cluster and namespace to read, as kubectl takes them.
#[derive(Debug, Clone, Default, Args)]
pub struct KubeArgs {
    /// The kubeconfig file (default: $KUBECONFIG, then ~/.kube/config, then the pod's service
    /// account when run in a cluster).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
    /// The kubeconfig context (default: its current-context).
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// The namespace (default: the context's namespace, else "default").
    #[arg(short, long, value_name = "NS")]
    pub namespace: Option<String>,
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
pub fn load(source: &Source) -> anyhow::Result<Option<Kubeconfig>> {
    let read = |path: &Path| {
        Kubeconfig::read_from(path).with_context(|| {
            format!(
                "cannot read the kubeconfig {}: fix the file (kubectl config view shows what it holds) or pass another with --kubeconfig",
                path.display()
            )
        })
    };
    match source {
        Source::Flag(path) => {
            if !path.exists() {
                bail!(
                    "the kubeconfig {} does not exist: pass an existing file with --kubeconfig",
                    path.display()
                );
            }
            read(path).map(Some)
        }
        Source::Env(paths) => {
            let existing: Vec<&PathBuf> = paths.iter().filter(|p| p.exists()).collect();
            if existing.is_empty() {
                bail!(
                    "none of the kubeconfig files in $KUBECONFIG exist ({}): set KUBECONFIG to an existing file or pass --kubeconfig",
                    join_paths(paths)
                );
            }
            let mut merged = Kubeconfig::default();
            for path in existing {
                merged = merged.merge(read(path)?).with_context(|| {
                    format!(
                        "cannot merge the kubeconfig files in $KUBECONFIG ({})",
                        join_paths(paths)
                    )
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
) -> anyhow::Result<String> {
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
    match wanted {
        Some(name) if names.contains(&name) => Ok(name.to_owned()),
        Some(name) => bail!(
            "there is no context {name:?} in the kubeconfig {file} ({known}): pass one of them with --context"
        ),
        None => match kubeconfig.current_context.as_deref() {
            Some(name) if names.contains(&name) => Ok(name.to_owned()),
            Some(name) => bail!(
                "the current-context {name:?} of the kubeconfig {file} is not one of its contexts ({known}): pass --context, or run kubectl config use-context NAME"
            ),
            None if names.is_empty() => bail!(
                "the kubeconfig {file} has no contexts: add one (kubectl config set-context) or pass another file with --kubeconfig"
            ),
            None => bail!(
                "the kubeconfig {file} has no current-context ({known}): pass --context NAME, or run kubectl config use-context NAME"
            ),
        },
    }
}

/// A client for the cluster `args` name.
pub async fn connect(args: &KubeArgs) -> anyhow::Result<Connection> {
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
                .with_context(|| {
                    format!(
                        "cannot use the context {context:?} of the kubeconfig {file}: fix its cluster and user entries, or pass another --context"
                    )
                })?;
            (config, format!("context {context} of {file}"))
        }
        None if std::env::var_os("KUBERNETES_SERVICE_HOST").is_some() => {
            if let Some(context) = &args.context {
                bail!(
                    "--context {context} needs a kubeconfig, and there is none at {file}: pass --kubeconfig"
                );
            }
            let config = kube::Config::incluster().context(
                "no kubeconfig, and the pod's service account cannot be used: pass --kubeconfig",
            )?;
            (config, "the pod's service account".to_owned())
        }
        None => bail!(
            "no kubeconfig at {file}: pass --kubeconfig FILE, set KUBECONFIG, or copy your cluster's kubeconfig there"
        ),
    };
    let namespace = args
        .namespace
        .clone()
        .unwrap_or_else(|| config.default_namespace.clone());
    let origin = format!("{} ({})", config.cluster_url, origin);
    let client = kube::Client::try_from(config)
        .with_context(|| format!("cannot build a client for {origin}"))?;
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

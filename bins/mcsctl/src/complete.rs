//! Dynamic shell completion (clap_complete's `CompleteEnv`: `source <(COMPLETE=bash mcsctl)`)
//! of what only a kubeconfig or a cluster knows: `--context` (the kubeconfig's contexts), `-n`
//! (the cluster's namespaces) and `diagnose SERVICE` (the namespace's Services). The
//! kubeconfig, context and namespace already on the line being completed are used, else
//! kubectl's defaults; a cluster that does not answer within [`CLUSTER_TIMEOUT`] offers nothing.

use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use clap_complete::engine::CompletionCandidate;
use clusterset_daemon::kubeconfig::{KubeconfigArgs, NamespaceArgs};
use clusterset_inspect::KubeReader;

/// How long completion waits for the cluster.
pub const CLUSTER_TIMEOUT: Duration = Duration::from_secs(2);

/// The value of a flag (`--flag V`, `--flag=V`, `-n V`, `-nV`) among `words`, the last one.
fn flag_value(words: &[String], long: &str, short: Option<char>) -> Option<String> {
    let mut found = None;
    let mut words = words.iter();
    while let Some(word) = words.next() {
        let short_form = short.map(|c| format!("-{c}"));
        if word == long || short_form.as_deref() == Some(word.as_str()) {
            found = words.next().cloned().or(found);
        } else if let Some(value) = word.strip_prefix(&format!("{long}=")) {
            found = Some(value.to_owned());
        } else if let Some(value) = short_form.as_deref().and_then(|s| word.strip_prefix(s)) {
            found = Some(value.trim_start_matches('=').to_owned());
        }
    }
    found.filter(|v| !v.is_empty())
}

/// The words of the line being completed: what the shell passed after `--`.
fn line() -> Vec<String> {
    std::env::args().skip_while(|a| a != "--").skip(1).collect()
}

/// The kubeconfig and context flags on the line.
fn cluster_flags(words: &[String]) -> KubeconfigArgs {
    KubeconfigArgs {
        kubeconfig: flag_value(words, "--kubeconfig", None).map(PathBuf::from),
        context: flag_value(words, "--context", None),
    }
}

/// The contexts of the kubeconfig (`--kubeconfig` on the line, else `$KUBECONFIG`, else
/// `~/.kube/config`).
pub fn contexts() -> Vec<CompletionCandidate> {
    let Ok(Some(config)) = cluster_flags(&line()).load() else {
        return Vec::new();
    };
    config
        .contexts
        .into_iter()
        .map(|c| {
            let help = c
                .context
                .map(|c| format!("cluster {}", c.cluster))
                .unwrap_or_default();
            CompletionCandidate::new(OsString::from(c.name)).help(Some(help.into()))
        })
        .collect()
}

/// Asks the cluster the line names, within [`CLUSTER_TIMEOUT`]; nothing on any failure.
fn ask_cluster<F>(ask: F) -> Vec<CompletionCandidate>
where
    F: AsyncFnOnce(&KubeReader, String) -> Vec<String>,
{
    let words = line();
    let cluster = cluster_flags(&words);
    let namespace = NamespaceArgs {
        namespace: flag_value(&words, "--namespace", Some('n')),
    };
    let Ok(runtime) = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    else {
        return Vec::new();
    };
    let names = runtime.block_on(async {
        let (reader, namespace) = crate::connect(&cluster, &namespace).await.ok()?;
        tokio::time::timeout(CLUSTER_TIMEOUT, ask(&reader, namespace))
            .await
            .ok()
    });
    names
        .unwrap_or_default()
        .into_iter()
        .map(|n| CompletionCandidate::new(OsString::from(n)))
        .collect()
}

/// The cluster's namespaces.
pub fn namespaces() -> Vec<CompletionCandidate> {
    ask_cluster(async |reader, _| reader.namespace_names().await.unwrap_or_default())
}

/// The Services of the namespace (`-n` on the line, else the context's).
pub fn services() -> Vec<CompletionCandidate> {
    ask_cluster(async |reader, namespace| {
        reader.service_names(&namespace).await.unwrap_or_default()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(line: &str) -> Vec<String> {
        line.split(' ').map(str::to_owned).collect()
    }

    #[test]
    fn flags_on_the_line_are_found_in_every_spelling() {
        let line = words("mcsctl -n shop diagnose --context=east --kubeconfig /k ");
        assert_eq!(
            flag_value(&line, "--namespace", Some('n')).as_deref(),
            Some("shop")
        );
        assert_eq!(
            flag_value(&line, "--context", None).as_deref(),
            Some("east")
        );
        assert_eq!(
            flag_value(&line, "--kubeconfig", None).as_deref(),
            Some("/k")
        );
        assert_eq!(
            flag_value(&words("mcsctl -nshop status"), "--namespace", Some('n')).as_deref(),
            Some("shop")
        );
        assert_eq!(
            flag_value(&words("mcsctl --context "), "--context", None),
            None
        );
    }
}

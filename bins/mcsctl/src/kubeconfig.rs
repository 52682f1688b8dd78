//! The flags that say which cluster to read, as kubectl takes them; reaching it is
//! clusterset-inspect's ([`clusterset_inspect::kubeconfig`]): `--kubeconfig`, else `$KUBECONFIG`
//! (a list of files, merged), else `~/.kube/config`, else the pod's service account;
//! `--context`, else the kubeconfig's current-context; `-n`, else the context's namespace, else
//! `default`.

use std::path::PathBuf;

use clap::Args;
use clusterset_inspect::kubeconfig::{Connection, Target};

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

/// A client for the cluster `args` name.
pub async fn connect(args: &KubeArgs) -> anyhow::Result<Connection> {
    let target = Target {
        kubeconfig: args.kubeconfig.clone(),
        context: args.context.clone(),
        namespace: args.namespace.clone(),
    };
    Ok(clusterset_inspect::kubeconfig::connect(&target).await?)
}

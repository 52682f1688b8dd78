//! Helpers of the process tests: a kubeconfig that points at the fake API server (kube-fake)
//! and running `mcsctl`.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// Writes a kubeconfig with contexts `east` (namespace rook-ceph, current) and `shop`
/// (namespace shop), both on `server`.
pub fn kubeconfig(dir: &Path, server: &str) -> PathBuf {
    let path = dir.join("kubeconfig");
    std::fs::write(
        &path,
        format!(
            "apiVersion: v1
kind: Config
clusters:
- name: east
  cluster: {{server: '{server}'}}
users:
- name: me
  user: {{token: not-a-secret}}
contexts:
- name: east
  context: {{cluster: east, user: me, namespace: rook-ceph}}
- name: shop
  context: {{cluster: east, user: me, namespace: shop}}
current-context: east
"
        ),
    )
    .unwrap();
    path
}

/// Runs mcsctl with `args`, without the caller's KUBECONFIG, colour or CI settings.
pub fn mcsctl(args: &[&str]) -> Output {
    mcsctl_with(args, &[])
}

/// Runs mcsctl with `args` and extra environment variables.
pub fn mcsctl_with(args: &[&str], env: &[(&str, &str)]) -> Output {
    let mut command = Command::new(env!("CARGO_BIN_EXE_mcsctl"));
    command.args(args);
    for variable in [
        "KUBECONFIG",
        "KUBERNETES_SERVICE_HOST",
        "NO_COLOR",
        "CLICOLOR",
        "CLICOLOR_FORCE",
    ] {
        command.env_remove(variable);
    }
    command.envs(env.iter().copied());
    command.output().unwrap()
}

/// stdout of a run, as text.
pub fn stdout(output: &Output) -> String {
    String::from_utf8(output.stdout.clone()).unwrap()
}

/// stderr of a run, as text.
pub fn stderr(output: &Output) -> String {
    String::from_utf8(output.stderr.clone()).unwrap()
}

//! One container's process: started from the Ceph root through [`CephInstall`] in the pod's
//! network namespace, with its volumes bind-mounted and its environment; stopped as the
//! kubelet stops it (SIGTERM to its process group, SIGKILL after the grace period).

use std::path::Path;
use std::time::Duration;

use mon_failover_io::CephInstall;
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::process::Child;

use crate::plan::ContainerPlan;

/// The environment every container gets before its own (a container image's usual `PATH`).
const BASE_ENV: &[(&str, &str)] = &[
    (
        "PATH",
        "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    ),
    ("HOME", "/root"),
];

/// Run inside the root, in the process's own mount namespace:
/// `sh -ec SCRIPT container WORKDIR CAPS HOSTNAME [HOST TARGET]... -- [READ-ONLY TARGET]... --
/// COMMAND ARGS...`:
/// each volume bind-mounted at its target (a file onto a file; parents before the volumes
/// inside them, as the plan orders them), then the read-only ones made read-only (after every
/// mount point was made, so a volume inside a read-only one still gets its mount point), then
/// the command, in a UTS namespace of its own whose hostname is `HOSTNAME`, with the
/// capability bounding set `CAPS` (`,+chown,+kill...`; `all`: unchanged) through the root's
/// `setpriv`.
const CONTAINER_SCRIPT: &str = r#"workdir=$1; caps=$2; host=$3; shift 3
while [ "$1" != -- ]; do
  if [ -d "$1" ]; then mkdir -p "$2"; else mkdir -p "$(dirname "$2")"; [ -e "$2" ] || : > "$2"; fi
  mount --bind "$1" "$2"
  shift 2
done; shift
while [ "$1" != -- ]; do mount -o remount,bind,ro "$1"; shift; done; shift
if [ -n "$workdir" ]; then mkdir -p "$workdir"; cd "$workdir"; fi
if [ "$caps" != all ]; then set -- setpriv --inh-caps=-all --bounding-set="-all$caps" -- "$@"; fi
exec unshare --uts -- sh -c 'hostname "$0" && exec "$@"' "$host" "$@""#;

/// Starts `container` of pod `pod_name`: from `install` (its `shared` directories must hold
/// the volumes' host paths), in `netns` when given, its output appended to `log`, as the leader
/// of a process group of its own.
pub fn start(
    install: &CephInstall,
    netns: Option<&str>,
    hostname: &str,
    container: &ContainerPlan,
    log: &Path,
) -> std::io::Result<Child> {
    let mut line = install
        .command("/bin/sh", netns)
        .args(["-ec", CONTAINER_SCRIPT, "container"])
        .arg(container.working_dir.clone().unwrap_or_default())
        .arg(match &container.capabilities {
            None => "all".to_owned(),
            Some(caps) => caps.iter().map(|c| format!(",+{c}")).collect(),
        })
        .arg(hostname);
    for mount in &container.mounts {
        line = line.arg(mount.host.as_os_str()).arg(&mount.container);
    }
    line = line.arg("--");
    for mount in container.mounts.iter().filter(|m| m.read_only) {
        line = line.arg(&mount.container);
    }
    let line = line.arg("--").args(&container.argv);
    if let Some(dir) = log.parent() {
        std::fs::create_dir_all(dir)?;
    }
    let output = std::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)?;
    let mut command = line.command();
    command
        .env_clear()
        .envs(BASE_ENV.iter().copied())
        .env("HOSTNAME", hostname)
        .envs(container.env.iter().map(|(k, v)| (k, v)))
        .stdout(output.try_clone()?)
        .stderr(output)
        .process_group(0);
    command.spawn()
}

/// The exit code a kubelet reports: the process's, or 128 + the signal that killed it.
pub fn exit_code(status: std::process::ExitStatus) -> i32 {
    use std::os::unix::process::ExitStatusExt;
    status
        .code()
        .or_else(|| status.signal().map(|s| 128 + s))
        .unwrap_or(-1)
}

/// Sends `signal` to the process group led by `child` (its container's processes).
pub fn signal_group(child: &Child, signal: Signal) {
    if let Some(pid) = child.id().and_then(|id| i32::try_from(id).ok()) {
        // ESRCH: the group is already gone.
        let _ = killpg(Pid::from_raw(pid), signal);
    }
}

/// Stops the container as the kubelet does: SIGTERM to its process group, SIGKILL once `grace`
/// has passed; its exit code.
pub async fn stop(child: &mut Child, grace: Duration) -> i32 {
    let pgid = child.id();
    signal_group(child, Signal::SIGTERM);
    let status = match tokio::time::timeout(grace, child.wait()).await {
        Ok(Ok(status)) => exit_code(status),
        _ => {
            signal_group(child, Signal::SIGKILL);
            child.wait().await.map_or(137, exit_code)
        }
    };
    kill_leftovers(pgid);
    status
}

/// SIGKILL to what is left of a container's process group once its main process ended (the
/// kubelet removes the whole container).
pub fn kill_leftovers(pgid: Option<u32>) {
    if let Some(pid) = pgid.and_then(|id| i32::try_from(id).ok()) {
        let _ = killpg(Pid::from_raw(pid), Signal::SIGKILL);
    }
}

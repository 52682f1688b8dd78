//! Where the Ceph programs come from: the host's `PATH`, or a root filesystem holding another
//! Ceph release, run through `chroot`.
//!
//! Debian bookworm ships Ceph 16.2 (Pacific), whose OSDs cannot bind a pod IP while they
//! advertise a global IP; Debian trixie's Ceph 18 (Reef) can. The lab therefore runs its daemons
//! from a trixie root filesystem (`tests/lab/ceph-reef-root.sh` builds it). A program run from a
//! root gets, in a mount namespace of its own that ends with it, `/proc`, `/dev` and `/sys`, a
//! private `/tmp`, and each shared directory bind-mounted at the same path, so the paths of a
//! cluster's files (conf, keyrings, data, admin sockets) mean the same inside and outside the
//! root. (The mount points of shared directories under `/tmp` are made in that private `/tmp`,
//! so they leave nothing behind in the root.)

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::process::CommandLine;

/// The environment variable naming the Ceph root filesystem the lab and the tests use.
pub const CEPH_ROOT_ENV: &str = "CLUSTERSET_CEPH_ROOT";
/// Where `tests/lab/ceph-reef-root.sh` builds the root when [`CEPH_ROOT_ENV`] is not set.
pub const DEFAULT_CEPH_ROOT: &str = "/var/cache/clusterset/ceph-reef";
/// The file the build script writes last into a finished root (its recipe and Ceph version).
pub const CEPH_ROOT_STAMP: &str = ".clusterset-ceph-root";

/// The shell that prepares the mount namespace and enters the root:
/// `sh -ec SCRIPT ceph-root ROOT SHARED... -- PROGRAM ARGS...`.
const ENTER_ROOT: &str = r#"root=$1; shift
mount -t tmpfs tmpfs "$root/tmp"
while [ "$1" != -- ]; do mkdir -p "$root$1"; mount --bind "$1" "$root$1"; shift; done; shift
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount --rbind /sys "$root/sys"
exec chroot "$root" "$@""#;

/// Where the Ceph programs (`ceph`, `ceph-mon`, `ceph-osd`, `rbd`, ...) are run from.
///
/// ```
/// use mon_failover_io::CephInstall;
/// let host = CephInstall::Host.command("ceph", Some("csl-a"));
/// assert_eq!(host.to_string(), "ip netns exec csl-a ceph");
/// let reef = CephInstall::root("/srv/reef").sharing("/tmp/lab");
/// let line = reef.command("ceph-mon", None).arg("--version").to_string();
/// assert!(line.starts_with("unshare --mount --propagation private sh -ec"), "{line}");
/// assert!(line.ends_with("ceph-root /srv/reef /tmp/lab -- ceph-mon --version"), "{line}");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum CephInstall {
    /// The programs on the host's `PATH` (Debian's `ceph-mon`, `ceph-common`).
    #[default]
    Host,
    /// The programs of a root filesystem, run through `chroot`.
    Root {
        /// The root filesystem.
        root: PathBuf,
        /// Directories of the host visible at the same path inside the root.
        shared: Vec<PathBuf>,
    },
}

/// Why a Ceph root filesystem cannot be used.
#[derive(Debug, thiserror::Error)]
#[error(
    "no finished Ceph root filesystem at {root} ({reason}); build it with `sudo bash tests/lab/ceph-reef-root.sh` (set {CEPH_ROOT_ENV} to use another path)"
)]
pub struct MissingCephRoot {
    /// The root that was looked for.
    pub root: PathBuf,
    /// What is missing.
    pub reason: String,
}

impl CephInstall {
    /// The programs of the root filesystem at `root`.
    pub fn root(root: impl Into<PathBuf>) -> Self {
        CephInstall::Root {
            root: root.into(),
            shared: Vec::new(),
        }
    }

    /// The root filesystem named by [`CEPH_ROOT_ENV`] (default [`DEFAULT_CEPH_ROOT`]), once the
    /// build script has finished it ([`CephInstall::finished_root`]).
    pub fn root_from_env() -> Result<Self, MissingCephRoot> {
        let root = std::env::var_os(CEPH_ROOT_ENV)
            .filter(|value| !value.is_empty())
            .map_or_else(|| PathBuf::from(DEFAULT_CEPH_ROOT), PathBuf::from);
        CephInstall::finished_root(root)
    }

    /// The root filesystem at `root` if the build script finished it (its last step writes
    /// [`CEPH_ROOT_STAMP`]): a half-built root is refused.
    pub fn finished_root(root: impl Into<PathBuf>) -> Result<Self, MissingCephRoot> {
        let root = root.into();
        let stamp = root.join(CEPH_ROOT_STAMP);
        if !stamp.is_file() {
            return Err(MissingCephRoot {
                reason: format!("{} is missing", stamp.display()),
                root,
            });
        }
        Ok(CephInstall::root(root))
    }

    /// The same install, with `dir` (and everything under it) visible at the same path inside
    /// a root. A relative `dir` is taken from the current directory (inside the root, `chroot`
    /// starts at `/`). No effect on [`CephInstall::Host`].
    pub fn sharing(mut self, dir: impl Into<PathBuf>) -> Self {
        if let CephInstall::Root { shared, .. } = &mut self {
            let dir = dir.into();
            let dir = std::path::absolute(&dir).unwrap_or(dir);
            if !shared.contains(&dir) {
                shared.push(dir);
            }
        }
        self
    }

    /// The root filesystem, if the programs come from one.
    pub fn root_dir(&self) -> Option<&Path> {
        match self {
            CephInstall::Host => None,
            CephInstall::Root { root, .. } => Some(root),
        }
    }

    /// The command line that runs `program` from this install, inside `netns` if given.
    pub fn command(&self, program: impl Into<OsString>, netns: Option<&str>) -> CommandLine {
        match self {
            CephInstall::Host => CommandLine::new(program, netns),
            CephInstall::Root { root, shared } => CommandLine::new("unshare", netns)
                .args([
                    "--mount",
                    "--propagation",
                    "private",
                    "sh",
                    "-ec",
                    ENTER_ROOT,
                ])
                .arg("ceph-root")
                .arg(root.as_os_str())
                .args(shared.iter().map(|dir| dir.as_os_str().to_owned()))
                .arg("--")
                .arg(program),
        }
    }

    /// The `(program, package)` pairs of `tools` this install does not have.
    pub fn missing_tools(
        &self,
        tools: &[(&'static str, &'static str)],
    ) -> Vec<(&'static str, &'static str)> {
        match self {
            CephInstall::Host => missing_tools(tools),
            CephInstall::Root { root, .. } => tools
                .iter()
                .copied()
                .filter(|(tool, _)| {
                    !["usr/bin", "usr/sbin", "bin", "sbin"]
                        .iter()
                        .any(|dir| root.join(dir).join(tool).is_file())
                })
                .collect(),
        }
    }
}

/// The `(program, package)` pairs of `tools` whose program is not on the `PATH` (what
/// [`CephInstall::Host`] lacks).
///
/// ```
/// use mon_failover_io::missing_tools;
/// assert!(missing_tools(&[("sh", "dash")]).is_empty());
/// assert_eq!(missing_tools(&[("no-such-program-here", "nothing")]).len(), 1);
/// ```
pub fn missing_tools(tools: &[(&'static str, &'static str)]) -> Vec<(&'static str, &'static str)> {
    let on_path = |tool: &str| {
        std::env::var_os("PATH")
            .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
    };
    tools
        .iter()
        .copied()
        .filter(|(tool, _)| !on_path(tool))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_root_shares_each_directory_once_and_the_host_ignores_sharing() {
        let reef = CephInstall::root("/r").sharing("/tmp/a").sharing("/tmp/a");
        let relative = CephInstall::root("/r").sharing("lab");
        let here = std::env::current_dir().unwrap().join("lab");
        assert_eq!(
            relative,
            CephInstall::Root {
                root: "/r".into(),
                shared: vec![here]
            },
            "a relative directory is shared at its absolute path"
        );
        assert_eq!(
            reef,
            CephInstall::Root {
                root: "/r".into(),
                shared: vec!["/tmp/a".into()]
            }
        );
        assert_eq!(CephInstall::Host.sharing("/tmp/a"), CephInstall::Host);
    }

    #[test]
    fn a_root_without_its_stamp_is_refused_with_the_build_command() {
        let dir = tempfile::tempdir().unwrap();
        let missing = CephInstall::finished_root(dir.path()).unwrap_err();
        assert!(
            missing
                .to_string()
                .contains("sudo bash tests/lab/ceph-reef-root.sh"),
            "{missing}"
        );
        std::fs::write(dir.path().join(CEPH_ROOT_STAMP), "ceph=18.2.7\n").unwrap();
        let root = CephInstall::finished_root(dir.path()).unwrap();
        assert_eq!(root.root_dir(), Some(dir.path()));
        assert_eq!(
            root.missing_tools(&[("ceph-osd", "ceph-osd")]),
            [("ceph-osd", "ceph-osd")]
        );
        std::fs::create_dir_all(dir.path().join("usr/bin")).unwrap();
        std::fs::write(dir.path().join("usr/bin/ceph-osd"), "").unwrap();
        assert!(root.missing_tools(&[("ceph-osd", "ceph-osd")]).is_empty());
    }
}

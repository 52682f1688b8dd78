//! What the lab needs from the machine, checked up front so that a missing piece is a clear
//! failure (never a skip).

use std::path::Path;

use crate::LabError;

/// The programs the lab runs on the host, with the Debian package that has each. Its Ceph
/// programs come from the Ceph root filesystem ([`require_ceph_root`]).
pub const REQUIRED_TOOLS: [(&str, &str); 7] = [
    ("ip", "iproute2"),
    ("ss", "iproute2"),
    ("nft", "nftables"),
    ("dig", "bind9-dnsutils"),
    ("unshare", "util-linux"),
    ("chroot", "coreutils"),
    ("sha256sum", "coreutils"),
];

/// Checks that the lab can run: root (network namespaces and nftables need it) and every
/// program of [`REQUIRED_TOOLS`] on the `PATH`. The error names the `apt-get` command.
pub fn require_host() -> Result<(), LabError> {
    let uid = std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("Uid:"))
                .and_then(|ids| ids.split_whitespace().nth(1).map(str::to_owned))
        });
    if uid.as_deref() != Some("0") {
        return Err(LabError::Host {
            problem: format!(
                "it creates network namespaces and nftables rules and must run as root (effective uid {})",
                uid.as_deref().unwrap_or("unknown")
            ),
            fix: "run the tests as root, as `sudo bash .ci/run` does".into(),
        });
    }
    let missing = mon_failover_io::missing_tools(&REQUIRED_TOOLS);
    if !missing.is_empty() {
        let mut packages: Vec<&str> = missing.iter().map(|(_, p)| *p).collect();
        packages.dedup();
        return Err(LabError::Host {
            problem: format!(
                "{} not installed",
                missing
                    .iter()
                    .map(|(t, _)| *t)
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            fix: format!("install with `apt-get install {}`", packages.join(" ")),
        });
    }
    Ok(())
}

/// The programs the lab runs from the Ceph root filesystem besides
/// [`ceph_local::CEPH_TOOLS`], with the package that has each.
pub const CEPH_ROOT_TOOLS: [(&str, &str); 6] = [
    ("ceph-osd", "ceph-osd"),
    ("ceph-mgr", "ceph-mgr"),
    ("rbd-mirror", "rbd-mirror"),
    ("rbd", "ceph-common"),
    ("rados", "ceph-common"),
    ("python3", "python3"),
];

/// Where python3-rbd (the lab's RBD client needs it) puts its module inside the root.
const PYTHON_RBD_DIR: &str = "usr/lib/python3/dist-packages";

/// The Ceph Reef root filesystem the lab runs its Ceph daemons from
/// ([`mon_failover_io::CEPH_ROOT_ENV`], built by `tests/lab/ceph-reef-root.sh`), checked to hold
/// every program of [`ceph_local::CEPH_TOOLS`] and [`CEPH_ROOT_TOOLS`] and the python3-rbd
/// module. The error names the command that builds it.
pub fn require_ceph_root() -> Result<mon_failover_io::CephInstall, LabError> {
    let install =
        mon_failover_io::CephInstall::root_from_env().map_err(|missing| LabError::Host {
            problem: missing.to_string(),
            fix: "`.ci/run` builds it before the tests".into(),
        })?;
    let root = install.root_dir().map(Path::to_owned).unwrap_or_default();
    let mut missing: Vec<&str> = install
        .missing_tools(&ceph_local::CEPH_TOOLS)
        .into_iter()
        .chain(install.missing_tools(&CEPH_ROOT_TOOLS))
        .map(|(tool, _)| tool)
        .collect();
    let has_python_rbd = std::fs::read_dir(root.join(PYTHON_RBD_DIR))
        .map(|entries| {
            entries
                .flatten()
                .any(|e| e.file_name().to_string_lossy().starts_with("rbd.cpython"))
        })
        .unwrap_or(false);
    if !has_python_rbd {
        missing.push("the python3-rbd module");
    }
    if !missing.is_empty() {
        return Err(LabError::Host {
            problem: format!(
                "the Ceph root filesystem at {} lacks {}",
                root.display(),
                missing.join(", ")
            ),
            fix: "build it again with `sudo bash tests/lab/ceph-reef-root.sh`".into(),
        });
    }
    Ok(install)
}

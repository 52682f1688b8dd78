//! What the lab needs from the machine, checked up front so that a missing piece is a clear
//! failure (never a skip).

use crate::LabError;

/// The programs the lab runs, with the Debian package that has each.
pub const REQUIRED_TOOLS: [(&str, &str); 7] = [
    ("ip", "iproute2"),
    ("nft", "nftables"),
    ("ceph-mon", "ceph-mon"),
    ("ceph", "ceph-common"),
    ("monmaptool", "ceph-common"),
    ("ceph-authtool", "ceph-common"),
    ("dig", "bind9-dnsutils"),
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
    let missing = mon_failover::missing_tools(&REQUIRED_TOOLS);
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

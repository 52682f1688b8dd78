//! The Ceph admin port: what the driver asks of the mons (quorum status, monmap, monmap
//! changes), with the JSON of Ceph 16+ parsed into typed structs.
//!
//! The port is the [`CephMonAdmin`] trait; `mon-failover-io`'s `CephCli` implements it with the
//! `ceph` command line, as Rook's operator does. [`observed_mons`] turns one quorum status into
//! the machine's view of the mons.

use async_trait::async_trait;
use ceph_address_plan::MonId;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use crate::{CommandError, ObservedMon, Placement};

/// The answer of `ceph quorum_status -f json`: the quorum and the monmap it agreed on, from one
/// consistent answer of the quorum leader.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QuorumStatus {
    /// The election epoch of the quorum.
    pub election_epoch: u64,
    /// Ranks of the mons in quorum.
    #[serde(default)]
    pub quorum: Vec<u32>,
    /// Names of the mons in quorum.
    #[serde(default)]
    pub quorum_names: Vec<String>,
    /// The leader's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub quorum_leader_name: Option<String>,
    /// The monmap.
    pub monmap: MonMap,
}

impl QuorumStatus {
    /// The `mon_host` value of the mons in quorum only: the ones that answer a client at once
    /// (a mon that is synchronizing accepts connections but keeps a client waiting).
    pub fn quorum_mon_host(&self) -> String {
        MonMap {
            mons: self
                .monmap
                .mons
                .iter()
                .filter(|m| self.quorum_names.contains(&m.name))
                .cloned()
                .collect(),
            ..self.monmap.clone()
        }
        .mon_host()
    }
}

/// The monmap (`ceph mon dump -f json`, or `monmap` inside the quorum status).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonMap {
    /// The monmap epoch; every change increments it.
    pub epoch: u64,
    /// The cluster's fsid.
    pub fsid: String,
    /// The mons, by rank.
    pub mons: Vec<MonMapEntry>,
}

/// One mon of the monmap.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct MonMapEntry {
    /// Its rank.
    pub rank: i64,
    /// Its name (Rook's mon id: `a`, `b`, ...).
    pub name: String,
    /// Its public addresses (msgr2 and msgr1).
    pub public_addrs: AddrVec,
}

/// An address vector (`[v2:IP:3300,v1:IP:6789]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct AddrVec {
    /// The entries, msgr2 first as Ceph prints them.
    pub addrvec: Vec<EntityAddr>,
}

/// One address of an address vector.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntityAddr {
    /// `v2` or `v1`.
    #[serde(rename = "type")]
    pub kind: String,
    /// `IP:port`, IPv6 in brackets.
    pub addr: String,
    /// The nonce (0 for mons).
    #[serde(default)]
    pub nonce: u64,
}

/// Why a monmap entry cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum MonMapError {
    /// The mon's name is not a Rook mon id.
    #[error(
        "the monmap holds mon '{name}', which is not a Rook mon id (a..z, aa, ...): remove it with `ceph mon remove {name}` or rename it before running the failover"
    )]
    ForeignName {
        /// The name.
        name: String,
    },
    /// The mon has no parsable public address.
    #[error("mon {name} has no usable public address in the monmap ({addrs})")]
    NoAddress {
        /// The name.
        name: String,
        /// What the monmap holds.
        addrs: String,
    },
}

impl MonMapEntry {
    /// The mon's public IP: the IP of its first address that parses.
    ///
    /// ```
    /// use mon_failover::{AddrVec, EntityAddr, MonMapEntry};
    ///
    /// let addr = |kind: &str, addr: &str| EntityAddr { kind: kind.into(), addr: addr.into(), nonce: 0 };
    /// let mon = MonMapEntry {
    ///     rank: 0,
    ///     name: "a".into(),
    ///     public_addrs: AddrVec { addrvec: vec![addr("v2", "[fd00::1]:3300"), addr("v1", "[fd00::1]:6789")] },
    /// };
    /// assert_eq!(mon.ip()?, "fd00::1".parse::<std::net::IpAddr>()?);
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn ip(&self) -> Result<IpAddr, MonMapError> {
        self.public_addrs
            .addrvec
            .iter()
            .find_map(|a| a.addr.parse::<SocketAddr>().ok().map(|s| s.ip()))
            .ok_or_else(|| MonMapError::NoAddress {
                name: self.name.clone(),
                addrs: self.public_addrs.to_string(),
            })
    }

    /// The mon's id, if its name is a Rook mon id.
    pub fn id(&self) -> Result<MonId, MonMapError> {
        self.name.parse().map_err(|_| MonMapError::ForeignName {
            name: self.name.clone(),
        })
    }
}

impl std::fmt::Display for AddrVec {
    /// Ceph's form: `[v2:127.0.0.1:3300/0,v1:127.0.0.1:6789/0]`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("[")?;
        for (i, a) in self.addrvec.iter().enumerate() {
            if i > 0 {
                f.write_str(",")?;
            }
            write!(f, "{}:{}/{}", a.kind, a.addr, a.nonce)?;
        }
        f.write_str("]")
    }
}

impl MonMap {
    /// The `mon_host` value that reaches every mon of this monmap (`[v2:..,v1:..],[...]`), for
    /// a client's configuration or `ceph -m`.
    pub fn mon_host(&self) -> String {
        let hosts: Vec<String> = self
            .mons
            .iter()
            .map(|m| {
                let addrs: Vec<String> = m
                    .public_addrs
                    .addrvec
                    .iter()
                    .map(|a| format!("{}:{}", a.kind, a.addr))
                    .collect();
                format!("[{}]", addrs.join(","))
            })
            .collect();
        hosts.join(",")
    }
}

/// The machine's view of the mons from one quorum status: every mon of the monmap with its
/// address, whether it is in quorum, and where it should be (`placement`, the runtime's
/// judgement of the advertised address).
///
/// ```
/// use mon_failover::{observed_mons, Placement, QuorumStatus};
///
/// let status: QuorumStatus = serde_json::from_str(r#"{
///   "election_epoch": 6, "quorum": [0, 1], "quorum_names": ["a", "b"],
///   "monmap": {"epoch": 2, "fsid": "f", "mons": [
///     {"rank": 0, "name": "a", "public_addrs": {"addrvec": [{"type": "v2", "addr": "10.0.0.1:3300", "nonce": 0}]}},
///     {"rank": 1, "name": "b", "public_addrs": {"addrvec": [{"type": "v2", "addr": "10.0.0.2:3300", "nonce": 0}]}},
///     {"rank": 2, "name": "c", "public_addrs": {"addrvec": [{"type": "v2", "addr": "10.0.0.3:3300", "nonce": 0}]}}
///   ]}}"#)?;
/// let mons = observed_mons(&status, |_, _| Placement::Placed)?;
/// assert!(mons[&"a".parse()?].in_quorum);
/// assert!(!mons[&"c".parse()?].in_quorum);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn observed_mons(
    status: &QuorumStatus,
    mut placement: impl FnMut(&MonId, IpAddr) -> Placement,
) -> Result<BTreeMap<MonId, ObservedMon>, MonMapError> {
    let mut mons = BTreeMap::new();
    for entry in &status.monmap.mons {
        let id = entry.id()?;
        let address = entry.ip()?;
        let in_quorum = status.quorum_names.contains(&entry.name);
        let placement = placement(&id, address);
        mons.insert(
            id,
            ObservedMon {
                address,
                in_quorum,
                placement,
            },
        );
    }
    Ok(mons)
}

/// What went wrong talking to Ceph.
#[derive(Debug, thiserror::Error)]
pub enum AdminError {
    /// The `ceph` command could not run, timed out (no quorum answered) or failed; failures
    /// carry Ceph's stderr.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// The command printed JSON of another shape than expected.
    #[error("`{command}` printed unexpected JSON")]
    Parse {
        /// The command line.
        command: String,
        /// The parse error.
        source: serde_json::Error,
    },
    /// Asking the mons on their admin sockets gave no quorum (`mon-failover-io`'s
    /// `AdminSocketQuorum`).
    #[error("mon admin sockets in {run_dir}: {problem}")]
    AdminSocket {
        /// The directory of the sockets.
        run_dir: String,
        /// What they said, per mon.
        problem: String,
    },
}

/// The Ceph admin port: what the failover driver needs from the mons. Implemented by
/// `mon-failover-io`'s `CephCli`; with the `mock` feature, `MockCephMonAdmin` is a mockall mock.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait CephMonAdmin: Send + Sync {
    /// The quorum and the monmap, in one consistent answer (`ceph quorum_status`).
    async fn quorum_status(&self) -> Result<QuorumStatus, AdminError>;
    /// The monmap (`ceph mon dump`).
    async fn mon_dump(&self) -> Result<MonMap, AdminError>;
    /// Add a mon to the monmap (`ceph mon add ID IP`). Idempotent. A mon started from the
    /// current monmap joins by itself; this is for runtimes that prefer to add it first.
    async fn add_mon(&self, mon: &MonId, address: IpAddr) -> Result<(), AdminError>;
    /// Remove a mon from the monmap (`ceph mon remove ID`); the removed daemon shuts down.
    /// Idempotent: removing a mon that is not there succeeds.
    async fn remove_mon(&self, mon: &MonId) -> Result<(), AdminError>;
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `ceph quorum_status -f json` of Debian's ceph-mon 16.2.15 (three mons, c down), trimmed
    /// of nothing: every field Ceph prints is here, and unknown ones are ignored.
    const QUORUM_STATUS_16: &str = r#"{"election_epoch":8,"quorum":[0,1],"quorum_names":["a","b"],"quorum_leader_name":"a","quorum_age":12,"features":{"quorum_con":"4540138314316775423","quorum_mon":["kraken","luminous","mimic","osdmap-prune","nautilus","octopus","pacific","elector-pinging"]},"monmap":{"epoch":1,"fsid":"6d2f3e1a-1111-4222-8333-944455556666","modified":"2026-11-23T14:28:10.385695Z","created":"2026-11-23T14:28:10.385695Z","min_mon_release":16,"min_mon_release_name":"pacific","election_strategy":1,"disallowed_leaders: ":"","stretch_mode":false,"tiebreaker_mon":"","removed_ranks: ":"","features":{"persistent":["kraken","luminous"],"optional":[]},"mons":[{"rank":0,"name":"a","public_addrs":{"addrvec":[{"type":"v2","addr":"127.0.0.11:3300","nonce":0},{"type":"v1","addr":"127.0.0.11:6789","nonce":0}]},"addr":"127.0.0.11:6789/0","public_addr":"127.0.0.11:6789/0","priority":0,"weight":0,"crush_location":"{}"},{"rank":1,"name":"b","public_addrs":{"addrvec":[{"type":"v2","addr":"127.0.0.12:3300","nonce":0},{"type":"v1","addr":"127.0.0.12:6789","nonce":0}]},"addr":"127.0.0.12:6789/0","public_addr":"127.0.0.12:6789/0","priority":0,"weight":0,"crush_location":"{}"},{"rank":2,"name":"c","public_addrs":{"addrvec":[{"type":"v2","addr":"127.0.0.13:3300","nonce":0},{"type":"v1","addr":"127.0.0.13:6789","nonce":0}]},"addr":"127.0.0.13:6789/0","public_addr":"127.0.0.13:6789/0","priority":0,"weight":0,"crush_location":"{}"}]}}"#;

    fn id(s: &str) -> MonId {
        s.parse().unwrap()
    }

    #[test]
    fn parses_ceph_16_quorum_status() {
        let status: QuorumStatus = serde_json::from_str(QUORUM_STATUS_16).unwrap();
        assert_eq!(status.quorum_names, ["a", "b"]);
        assert_eq!(status.quorum_leader_name.as_deref(), Some("a"));
        assert_eq!(status.monmap.mons.len(), 3);
        let mons = observed_mons(&status, |id, ip| {
            if id.as_str() == "a" && ip.to_string() == "127.0.0.11" {
                Placement::Misplaced
            } else {
                Placement::Placed
            }
        })
        .unwrap();
        assert_eq!(mons[&id("a")].placement, Placement::Misplaced);
        assert_eq!(mons[&id("b")].placement, Placement::Placed);
        assert!(!mons[&id("c")].in_quorum);
        assert_eq!(mons[&id("c")].address.to_string(), "127.0.0.13");
    }

    #[test]
    fn mon_host_lists_every_mon_with_both_protocols() {
        let status: QuorumStatus = serde_json::from_str(QUORUM_STATUS_16).unwrap();
        assert_eq!(
            status.monmap.mon_host(),
            "[v2:127.0.0.11:3300,v1:127.0.0.11:6789],[v2:127.0.0.12:3300,v1:127.0.0.12:6789],[v2:127.0.0.13:3300,v1:127.0.0.13:6789]"
        );
    }

    #[test]
    fn the_quorum_mon_host_leaves_out_mons_outside_the_quorum() {
        let status: QuorumStatus = serde_json::from_str(QUORUM_STATUS_16).unwrap();
        assert_eq!(
            status.quorum_mon_host(),
            "[v2:127.0.0.11:3300,v1:127.0.0.11:6789],[v2:127.0.0.12:3300,v1:127.0.0.12:6789]"
        );
    }

    #[test]
    fn a_foreign_mon_name_is_an_error_that_names_the_fix() {
        let json = QUORUM_STATUS_16.replace("\"name\":\"c\"", "\"name\":\"mon-3\"");
        let status: QuorumStatus = serde_json::from_str(&json).unwrap();
        let err = observed_mons(&status, |_, _| Placement::Placed).unwrap_err();
        assert_eq!(
            err,
            MonMapError::ForeignName {
                name: "mon-3".into()
            }
        );
        assert!(err.to_string().contains("ceph mon remove mon-3"));
    }

    #[test]
    fn a_mon_without_an_address_is_an_error() {
        let json = QUORUM_STATUS_16
            .replace("\"127.0.0.12:3300\"", "\"-\"")
            .replace("\"127.0.0.12:6789\"", "\"-\"");
        let status: QuorumStatus = serde_json::from_str(&json).unwrap();
        let err = observed_mons(&status, |_, _| Placement::Placed).unwrap_err();
        assert!(
            matches!(err, MonMapError::NoAddress { ref name, .. } if name == "b"),
            "{err}"
        );
    }
}

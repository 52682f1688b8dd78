//! The IO around `mon-failover`'s pure machine: the driver that observes, steps, persists and
//! executes, and the Ceph side of the ports.
//!
//! - [`Driver`]: one [`Driver::tick`] observes Ceph through a
//!   [`CephMonAdmin`](mon_failover::CephMonAdmin) and each mon's placement through a
//!   [`MonRuntime`](mon_failover::MonRuntime), steps the
//!   [`Machine`](mon_failover::Machine), persists the new state in a
//!   [`StateStore`](mon_failover::StateStore) before anything runs (write-ahead), and executes
//!   the commands; [`Driver::run_until_settled`] loops (with tokio sleeps while Ceph works)
//!   until [`is_settled`](mon_failover::is_settled).
//! - [`CephCli`]: the admin port with the `ceph` command line, a `ceph.conf` and a keyring, with
//!   timeouts and errors that carry Ceph's stderr; it follows the monmap as mons move.
//! - [`CommandLine`]: how every Ceph program runs (bounded in time, inside a network namespace
//!   if asked); [`CephInstall`]: which Ceph programs (the host's, or a root filesystem's
//!   through `chroot`), and [`missing_tools`] for the host's `PATH`.
//! - [`QuorumWatch`]: polls the quorum in the background and records any answer without one,
//!   through a [`QuorumProbe`]: any `CephMonAdmin`, or [`AdminSocketQuorum`] (the mons' own
//!   state on their admin sockets, for local clusters).
//! - [`FileStateStore`]: the state in a JSON file, replaced atomically.
//!
//! Local `ceph-mon` clusters (the runtime of the tests, `mcsctl demo` and the lab) are in
//! `ceph-local`; the operator's Kubernetes ports in `mcs-ceph-runtime`.
#![forbid(unsafe_code)]

mod asok;
mod cli;
mod driver;
mod install;
mod process;
mod store;
mod watch;

pub use asok::{AdminSocketQuorum, DEFAULT_ELECTION_ALLOWANCE, MON_ELECTION_TIMEOUT};
pub use cli::CephCli;
pub use driver::{Driver, DriverError, Planned, RunOptions, RunReport, Tick};
pub use install::{
    CEPH_ROOT_ENV, CEPH_ROOT_STAMP, CephInstall, DEFAULT_CEPH_ROOT, MissingCephRoot, missing_tools,
};
pub use process::CommandLine;
pub use store::FileStateStore;
pub use watch::{QuorumProbe, QuorumRecord, QuorumWatch};

/// Test data shared by the unit tests of the driver and the watch.
#[cfg(test)]
mod test_support {
    use mon_failover::{AddrVec, EntityAddr, MonMap, MonMapEntry, QuorumStatus};

    /// A quorum status for tests: `mons` as `(name, ip)` (empty ip: no address), `quorum` by name.
    pub(crate) fn quorum_status(mons: &[(&str, &str)], quorum: &[&str]) -> QuorumStatus {
        let addrvec = |ip: &str| {
            if ip.is_empty() {
                Vec::new()
            } else {
                vec![EntityAddr {
                    kind: "v2".into(),
                    addr: format!("{ip}:3300"),
                    nonce: 0,
                }]
            }
        };
        QuorumStatus {
            election_epoch: 1,
            quorum: Vec::new(),
            quorum_names: quorum.iter().map(|q| (*q).to_string()).collect(),
            quorum_leader_name: None,
            monmap: MonMap {
                epoch: 3,
                fsid: "f".into(),
                mons: mons
                    .iter()
                    .zip(0..)
                    .map(|((name, ip), rank)| MonMapEntry {
                        rank,
                        name: (*name).to_string(),
                        public_addrs: AddrVec {
                            addrvec: addrvec(ip),
                        },
                    })
                    .collect(),
            },
        }
    }
}

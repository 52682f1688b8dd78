//! The error of running a Ceph program (`ceph`, `ceph-mon`, `monmaptool`, `ceph-authtool`):
//! the ports' errors ([`AdminError`](crate::AdminError), [`RuntimeError`](crate::RuntimeError))
//! carry it, with the command line and the program's stderr. The runner itself (`CommandLine`)
//! is IO and lives in `mon-failover-io`.

use std::time::Duration;

/// A Ceph program that could not run, timed out or failed.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    /// The program could not be started.
    #[error(
        "cannot run `{command}` (are ceph-mon and ceph-common installed? `apt-get install ceph-mon ceph-common`)"
    )]
    Spawn {
        /// The command line.
        command: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The program did not finish in time (for `ceph`: no quorum answered).
    #[error("`{command}` did not finish within {after:?}")]
    Timeout {
        /// The command line.
        command: String,
        /// The timeout.
        after: Duration,
    },
    /// The program exited with an error.
    #[error("`{command}` failed ({status}): {stderr}")]
    Failed {
        /// The command line.
        command: String,
        /// The exit status.
        status: String,
        /// The program's stderr (or stdout if stderr was empty), trimmed.
        stderr: String,
    },
}

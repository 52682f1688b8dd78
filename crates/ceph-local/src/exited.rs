//! Why local mons formed no quorum: a mon whose process ended ([`ExitedMon`], with the errors
//! its log ends with, [`ceph_log_errors`]) or a wait that ran out ([`QuorumWaitError`]).

use std::path::PathBuf;
use std::time::Duration;

use ceph_address_plan::MonId;

/// A mon daemon whose process has ended, and why, from its log.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ExitedMon {
    /// The mon.
    pub mon: MonId,
    /// How its process ended.
    pub status: std::process::ExitStatus,
    /// Its log file.
    pub log: PathBuf,
    /// The last errors in its log (see [`ceph_log_errors`]), oldest first.
    pub errors: Vec<String>,
}

impl std::fmt::Display for ExitedMon {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "ceph-mon {} exited ({}", self.mon, self.status)?;
        // ceph-mon ends with an errno as its exit code when it refuses to start (28 for
        // ENOSPC), and may exit before its log thread has written why.
        if let Some(code) = self.status.code().filter(|code| *code > 1) {
            let errno = std::io::Error::from_raw_os_error(code).to_string();
            let name = errno.split(" (os error").next().unwrap_or(&errno);
            write!(f, ", as an errno: {name}")?;
        }
        write!(f, ")")?;
        if self.errors.is_empty() {
            write!(
                f,
                "; its log {} records no error (ceph-mon can exit before writing it)",
                self.log.display()
            )
        } else {
            write!(
                f,
                "; its log {} ends with: {}",
                self.log.display(),
                self.errors.join(" | ")
            )
        }
    }
}

/// Why local mons formed no quorum.
#[derive(Debug, thiserror::Error)]
pub enum QuorumWaitError {
    /// A mon's process ended (for example `ceph-mon` refused to start).
    #[error("{}", .exited.iter().map(ToString::to_string).collect::<Vec<_>>().join("; "))]
    MonExited {
        /// The mons that ended.
        exited: Vec<ExitedMon>,
    },
    /// The mons run, but fewer than wanted agreed on a quorum in time.
    #[error(
        "no quorum of {wanted} mons within {within:?} (last answer: {last}); the mons' logs are in {}",
        logs.display()
    )]
    Timeout {
        /// How many mons were wanted in quorum.
        wanted: usize,
        /// How long was waited.
        within: Duration,
        /// The last answer of `ceph quorum_status`, or its error.
        last: String,
        /// The directory of the mons' logs.
        logs: PathBuf,
    },
}

/// The last `max` distinct errors (log level -1) of a Ceph daemon's log, without timestamp
/// and thread id, oldest first.
///
/// ```
/// let log = "2026-11-23T18:59:02.153+0000 7f70 0 ceph version 16.2.15\n\
///            2026-11-23T18:59:02.153+0000 7f70 -1 error: monitor data filesystem reached concerning levels\n";
/// assert_eq!(
///     ceph_local::ceph_log_errors(log, 3),
///     ["error: monitor data filesystem reached concerning levels"]
/// );
/// ```
pub fn ceph_log_errors(log: &str, max: usize) -> Vec<String> {
    let mut errors: Vec<String> = Vec::new();
    for line in log.lines() {
        let mut fields = line.trim_start().splitn(4, ' ');
        let (Some(_time), Some(_thread), Some("-1"), Some(message)) =
            (fields.next(), fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        let message = message.trim().to_owned();
        errors.retain(|seen| *seen != message);
        errors.push(message);
    }
    let skip = errors.len().saturating_sub(max);
    errors.split_off(skip)
}

#[cfg(test)]
mod tests {
    use super::*;

    const REFUSED_TO_START: &str = "\
2026-11-23T18:59:02.033+0000 7f4b282d6640  0 ceph-mon: created monfs at /tmp/x/mon/ceph-a for mon.a
2026-11-23T18:59:02.153+0000 7f7071897640 -1 error: monitor data filesystem reached concerning levels of available storage space (available: 5% 15 GiB)
you may adjust 'mon data avail crit' to a lower value to make this go away (default: 5%)

2026-11-23T18:59:02.153+0000 7f7071897640  0 ceph version 16.2.15 pacific (stable), process ceph-mon, pid 25048
2026-11-23T18:59:02.153+0000 7f7071897640 -1 error: monitor data filesystem reached concerning levels of available storage space (available: 5% 15 GiB)
";

    #[test]
    fn the_errors_of_a_mon_that_refused_to_start_are_its_reason_once() {
        assert_eq!(
            ceph_log_errors(REFUSED_TO_START, 3),
            [
                "error: monitor data filesystem reached concerning levels of available storage space (available: 5% 15 GiB)"
            ]
        );
    }

    #[test]
    fn only_the_last_errors_are_kept_oldest_first() {
        let log = "t 1 -1 first\nt 1 -1 second\nt 1 0 info -1 not an error\nt 1 -1 third\nt 1 -1 second\n";
        assert_eq!(ceph_log_errors(log, 2), ["third", "second"]);
        assert_eq!(ceph_log_errors(log, 0), Vec::<String>::new());
        assert_eq!(ceph_log_errors("", 3), Vec::<String>::new());
    }

    #[test]
    fn an_exited_mon_names_its_status_log_and_reason() {
        use std::os::unix::process::ExitStatusExt;
        let exited = ExitedMon {
            mon: "a".parse().unwrap(),
            status: std::process::ExitStatus::from_raw(1 << 8),
            log: PathBuf::from("/tmp/x/log/ceph-mon.a.log"),
            errors: vec!["error: no space".into()],
        };
        assert_eq!(
            exited.to_string(),
            "ceph-mon a exited (exit status: 1); its log /tmp/x/log/ceph-mon.a.log ends with: error: no space"
        );
        let silent = ExitedMon {
            status: std::process::ExitStatus::from_raw(28 << 8),
            errors: Vec::new(),
            ..exited
        };
        assert_eq!(
            silent.to_string(),
            "ceph-mon a exited (exit status: 28, as an errno: No space left on device); its log /tmp/x/log/ceph-mon.a.log records no error (ceph-mon can exit before writing it)"
        );
    }
}

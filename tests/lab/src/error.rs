//! The lab's errors.

use std::time::Duration;

/// Why the lab could not be set up or could not run a step.
#[derive(Debug, thiserror::Error)]
pub enum LabError {
    /// This machine cannot run the lab (not root, a tool missing); says how to fix it.
    #[error("the lab cannot run here: {problem}; {fix}")]
    Host {
        /// What is wrong.
        problem: String,
        /// What to do about it.
        fix: String,
    },
    /// A command (`ip`, `nft`, `sysctl`, ...) could not run or failed.
    #[error("`{command}` failed: {detail}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status and stderr, or why it could not start.
        detail: String,
    },
    /// A command did not finish in time.
    #[error("`{command}` did not finish within {after:?}")]
    Timeout {
        /// The command line.
        command: String,
        /// The time allowed.
        after: Duration,
    },
    /// A thread inside a network namespace could not start or went away.
    #[error("network namespace thread {netns}: {detail}")]
    Netns {
        /// The namespace.
        netns: String,
        /// What went wrong.
        detail: String,
    },
    /// The clusterset DNS server or resolver failed.
    #[error("clusterset DNS: {0}")]
    Dns(String),
    /// An address pool ran out or refused an address.
    #[error("address allocation: {0}")]
    Alloc(String),
    /// A step of a Ceph site (a daemon, a pool, mirroring) failed.
    #[error("{step}: {source}")]
    Step {
        /// What was being done.
        step: String,
        /// Why it failed.
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    },
    /// A stage of a scenario saw something other than what it claims.
    #[error("{stage}: the claim \"{claim}\" does not hold: {seen}")]
    Claim {
        /// The stage.
        stage: String,
        /// What the stage claims.
        claim: String,
        /// What it saw instead.
        seen: String,
    },
    /// A condition was not reached in time.
    #[error("{what} not reached within {within:?}; last seen: {last}")]
    NotReached {
        /// The condition.
        what: String,
        /// How long was waited.
        within: Duration,
        /// The last observation.
        last: String,
    },
}

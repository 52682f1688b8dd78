//! The leader-election flags of every daemon: one set of names, one identity rule and one check
//! of the timing, flattened into each daemon's `run` command.
//!
//! What differs between the daemons is only what each has of its own
//! ([`LeaderElectionDefaults`]): the Lease's default name (the daemon's), the environment
//! variables of the flags (each daemon's prefix, so that its deployments keep working) and the
//! names its flags had before (hidden aliases).
//!
//! ```
//! use clap::Parser;
//! use clusterset_daemon::lease::{
//!     ElectionAliases, ElectionEnv, LeaderElectionArgs, LeaderElectionDefaults,
//! };
//!
//! #[derive(Debug, Clone, PartialEq, Eq)]
//! struct Example;
//! impl LeaderElectionDefaults for Example {
//!     const LEASE_NAME: &'static str = "example";
//!     const ENV: ElectionEnv = ElectionEnv {
//!         leader_election: "EXAMPLE_LEADER_ELECTION",
//!         lease_name: "EXAMPLE_LEADER_LEASE_NAME",
//!         lease_duration: "EXAMPLE_LEADER_LEASE_DURATION_SECONDS",
//!         renew_deadline: "EXAMPLE_LEADER_LEASE_RENEW_DEADLINE_SECONDS",
//!         retry_period: "EXAMPLE_LEADER_LEASE_RETRY_SECONDS",
//!     };
//!     const ALIASES: ElectionAliases = ElectionAliases::NONE;
//! }
//!
//! #[derive(Parser)]
//! struct Cli {
//!     #[command(flatten)]
//!     election: LeaderElectionArgs<Example>,
//! }
//!
//! let cli = Cli::try_parse_from(["example", "--identity", "example-7c9f-x2k4p"]).unwrap();
//! let settings = cli.election.settings("example-system").unwrap().unwrap();
//! assert_eq!(settings.claim.name, "example");
//! assert_eq!(settings.claim.namespace, "example-system");
//! assert_eq!(settings.claim.identity, "example-7c9f-x2k4p");
//! ```

use std::fmt::Debug;
use std::marker::PhantomData;
use std::time::Duration;

use super::{LeaseSettings, LeaseTimingError};

/// What one daemon's leader-election flags have of their own. Implemented by a marker type of
/// each daemon, the type parameter of its [`LeaderElectionArgs`].
pub trait LeaderElectionDefaults: Debug + Clone + PartialEq + Eq + Send + Sync + 'static {
    /// The default of `--leader-lease-name`: the daemon's name.
    const LEASE_NAME: &'static str;
    /// The environment variables of the flags (`--identity` reads `POD_NAME` and
    /// `--leader-lease-namespace` `POD_NAMESPACE`, the same for every daemon).
    const ENV: ElectionEnv;
    /// The names the daemon's flags had before these, still accepted (hidden).
    const ALIASES: ElectionAliases;
}

/// The environment variables a daemon's leader-election flags read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionEnv {
    /// Of `--leader-election`.
    pub leader_election: &'static str,
    /// Of `--leader-lease-name`.
    pub lease_name: &'static str,
    /// Of `--leader-lease-duration-seconds`.
    pub lease_duration: &'static str,
    /// Of `--leader-lease-renew-deadline-seconds`.
    pub renew_deadline: &'static str,
    /// Of `--leader-lease-retry-seconds`.
    pub retry_period: &'static str,
}

/// Earlier names of a daemon's leader-election flags (without the leading `--`), accepted as
/// hidden aliases so that existing deployments keep working.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ElectionAliases {
    /// Of `--identity`.
    pub identity: &'static [&'static str],
    /// Of `--leader-lease-name`.
    pub lease_name: &'static [&'static str],
    /// Of `--leader-lease-namespace`.
    pub lease_namespace: &'static [&'static str],
    /// Of `--leader-lease-duration-seconds`.
    pub lease_duration: &'static [&'static str],
    /// Of `--leader-lease-renew-deadline-seconds`.
    pub renew_deadline: &'static [&'static str],
    /// Of `--leader-lease-retry-seconds`.
    pub retry_period: &'static [&'static str],
}

impl ElectionAliases {
    /// No earlier names.
    pub const NONE: Self = Self {
        identity: &[],
        lease_name: &[],
        lease_namespace: &[],
        lease_duration: &[],
        renew_deadline: &[],
        retry_period: &[],
    };
}

/// The leader-election flags of a daemon's `run` command (flatten them); `D` says what the
/// daemon has of its own.
#[derive(Debug, Clone, PartialEq, Eq, clap::Args)]
pub struct LeaderElectionArgs<D: LeaderElectionDefaults> {
    /// Leader election: every replica watches, only the holder of the leader Lease writes. Turn
    /// it off only for a single replica.
    #[arg(
        long,
        env = D::ENV.leader_election,
        default_value_t = true,
        action = clap::ArgAction::Set
    )]
    pub leader_election: bool,
    /// This replica's identity, the holder it writes into the Leases it holds (default: the
    /// pod's name, else the host name, which in a pod is the pod's name too: two pods never
    /// share one; give two processes on one machine their own).
    #[arg(long, env = "POD_NAME", aliases = D::ALIASES.identity)]
    pub identity: Option<String>,
    /// Name of the leader Lease.
    #[arg(
        long,
        env = D::ENV.lease_name,
        default_value = D::LEASE_NAME,
        aliases = D::ALIASES.lease_name
    )]
    pub leader_lease_name: String,
    /// Namespace of the leader Lease (default: the pod's namespace, else the kubeconfig's).
    #[arg(
        long,
        env = "POD_NAMESPACE",
        value_parser = mcs_types::names::namespace_name,
        aliases = D::ALIASES.lease_namespace
    )]
    pub leader_lease_namespace: Option<String>,
    /// Seconds the followers wait after the last renewal they saw before taking the leader
    /// Lease.
    #[arg(
        long,
        env = D::ENV.lease_duration,
        default_value_t = LeaseSettings::DEFAULT_DURATION.as_secs(),
        aliases = D::ALIASES.lease_duration
    )]
    pub leader_lease_duration_seconds: u64,
    /// Seconds the leader keeps trying to renew before it stops (less than the duration).
    #[arg(
        long,
        env = D::ENV.renew_deadline,
        default_value_t = LeaseSettings::DEFAULT_RENEW_DEADLINE.as_secs(),
        aliases = D::ALIASES.renew_deadline
    )]
    pub leader_lease_renew_deadline_seconds: u64,
    /// Seconds between renewals (and between the followers' checks; less than the renew
    /// deadline).
    #[arg(
        long,
        env = D::ENV.retry_period,
        default_value_t = LeaseSettings::DEFAULT_RETRY_PERIOD.as_secs(),
        aliases = D::ALIASES.retry_period
    )]
    pub leader_lease_retry_seconds: u64,
    #[arg(skip)]
    daemon: PhantomData<D>,
}

/// Leader-election timing flags that cannot work; the message names the fix and the source
/// what was given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "set 0 < --leader-lease-retry-seconds < --leader-lease-renew-deadline-seconds < --leader-lease-duration-seconds"
)]
pub struct ElectionFlagsError(#[from] pub LeaseTimingError);

impl<D: LeaderElectionDefaults> LeaderElectionArgs<D> {
    /// This replica's identity: `--identity` (`POD_NAME`, the pod's name), else the host name
    /// (in a pod, the pod's name too), else the Lease's default name and the process id.
    pub fn identity(&self) -> String {
        identity_or(self.identity.as_deref(), || host_name(D::LEASE_NAME))
    }

    /// The leader election these flags describe: `None` without election, else the Lease
    /// `--leader-lease-name` in `--leader-lease-namespace` (or `default_namespace`, the
    /// client's) held as [`identity`](Self::identity), with the timing checked
    /// ([`LeaseSettings::with_timing`]).
    pub fn settings(
        &self,
        default_namespace: &str,
    ) -> Result<Option<LeaseSettings>, ElectionFlagsError> {
        if !self.leader_election {
            return Ok(None);
        }
        let namespace = self
            .leader_lease_namespace
            .as_deref()
            .unwrap_or(default_namespace);
        let settings = LeaseSettings::new(&self.leader_lease_name, namespace, &self.identity())
            .with_timing(
                Duration::from_secs(self.leader_lease_duration_seconds),
                Duration::from_secs(self.leader_lease_renew_deadline_seconds),
                Duration::from_secs(self.leader_lease_retry_seconds),
            )?;
        Ok(Some(settings))
    }
}

/// `flag` unless it is missing or empty, else `fallback()`.
fn identity_or(flag: Option<&str>, fallback: impl FnOnce() -> String) -> String {
    match flag.map(str::trim) {
        Some(identity) if !identity.is_empty() => identity.to_owned(),
        _ => fallback(),
    }
}

/// The host name (`HOSTNAME`, else the kernel's), else `daemon` and the process id.
fn host_name(daemon: &str) -> String {
    std::env::var("HOSTNAME")
        .ok()
        .or_else(|| std::fs::read_to_string("/proc/sys/kernel/hostname").ok())
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| format!("{daemon}-{}", std::process::id()))
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn the_identity_is_the_flag_else_the_fallback() {
        assert_eq!(
            identity_or(Some("agent-7c9f"), || "host".into()),
            "agent-7c9f"
        );
        assert_eq!(identity_or(Some(" "), || "host".into()), "host");
        assert_eq!(identity_or(None, || "host".into()), "host");
        let host = host_name("daemon");
        assert!(!host.is_empty() && host.trim() == host, "{host:?}");
    }
}

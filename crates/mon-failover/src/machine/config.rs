//! Timeouts and backoff of the machine.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Timeouts and backoff. Every timeout counts from the moment the machine entered the phase it
/// guards, using the `now` passed to [`Machine::step`](crate::Machine::step); a step where Ceph is
/// unreachable acts on none of them.
///
/// ```
/// use mon_failover::Config;
/// use std::time::Duration;
///
/// let config = Config {
///     join_timeout: Duration::from_secs(120),
///     ..Config::default()
/// };
/// assert!(config.validate().is_ok());
///
/// let broken = Config { join_timeout: Duration::ZERO, ..Config::default() };
/// assert!(broken.validate().unwrap_err().to_string().contains("join_timeout"));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", default)]
pub struct Config {
    /// How long to wait for the new mon's address (Rook waits up to about 95 s for the
    /// clusterset DNS name). Then the migration is rolled back.
    pub address_timeout: Duration,
    /// How long to wait for the started new mon to be in the quorum (Rook: 5 min). Then the
    /// migration is rolled back.
    pub join_timeout: Duration,
    /// How long a migration whose new mon is in quorum waits for the guard that allows removing
    /// the old mon (every other mon in quorum, for a mon that moves address). Then the
    /// migration is rolled back, which lets the failover of a mon that stays down go first.
    pub removal_wait_timeout: Duration,
    /// A mon out of quorum this long is failed over (Rook's `ROOK_MON_OUT_TIMEOUT`, default 10
    /// min). `None` disables that failover (Rook's timeout 0); address migrations still happen.
    pub mon_out_timeout: Option<Duration>,
    /// Wait after the first rolled-back attempt before the next one; doubles with every further
    /// failure in a row.
    pub retry_backoff: Duration,
    /// The longest wait between attempts.
    pub max_retry_backoff: Duration,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            address_timeout: Duration::from_secs(5 * 60),
            join_timeout: Duration::from_secs(5 * 60),
            removal_wait_timeout: Duration::from_secs(10 * 60),
            mon_out_timeout: Some(Duration::from_secs(10 * 60)),
            retry_backoff: Duration::from_secs(30),
            max_retry_backoff: Duration::from_secs(10 * 60),
        }
    }
}

/// A configuration that cannot work.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// A timeout is zero, so its phase would fail before anything could happen.
    #[error(
        "{field} is zero, so every migration would be rolled back at once: give it a duration longer than the step (for example 5 minutes)"
    )]
    ZeroTimeout {
        /// The field.
        field: &'static str,
    },
    /// The backoff cap is below the first backoff.
    #[error(
        "max_retry_backoff ({max:?}) is shorter than retry_backoff ({first:?}): make it at least as long"
    )]
    BackoffCap {
        /// `retry_backoff`.
        first: Duration,
        /// `max_retry_backoff`.
        max: Duration,
    },
}

impl Config {
    /// Checks that every timeout can be met.
    pub fn validate(&self) -> Result<(), ConfigError> {
        let timeouts = [
            ("address_timeout", Some(self.address_timeout)),
            ("join_timeout", Some(self.join_timeout)),
            ("removal_wait_timeout", Some(self.removal_wait_timeout)),
            ("mon_out_timeout", self.mon_out_timeout),
        ];
        for (field, timeout) in timeouts {
            if timeout == Some(Duration::ZERO) {
                return Err(ConfigError::ZeroTimeout { field });
            }
        }
        if self.max_retry_backoff < self.retry_backoff {
            return Err(ConfigError::BackoffCap {
                first: self.retry_backoff,
                max: self.max_retry_backoff,
            });
        }
        Ok(())
    }

    /// The wait before the next attempt after `failures` rolled-back attempts in a row.
    ///
    /// ```
    /// use mon_failover::Config;
    /// use std::time::Duration;
    ///
    /// let c = Config::default(); // 30 s, doubling, at most 10 min
    /// assert_eq!(c.backoff(1), Duration::from_secs(30));
    /// assert_eq!(c.backoff(3), Duration::from_secs(120));
    /// assert_eq!(c.backoff(40), Duration::from_secs(600));
    /// ```
    pub fn backoff(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.retry_backoff
            .checked_mul(1u32 << doublings)
            .map_or(self.max_retry_backoff, |wait| {
                wait.min(self.max_retry_backoff)
            })
    }
}

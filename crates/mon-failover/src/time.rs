//! Wall-clock instants as the machine sees them: milliseconds since the Unix epoch, passed in by
//! the caller so that the machine itself never reads a clock.

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::{Deserialize, Serialize};

/// An instant in milliseconds since the Unix epoch. Serialized as a plain integer, so a persisted
/// state stays readable (`"phaseSince": 1795316139050`).
///
/// ```
/// use mon_failover::Timestamp;
/// use std::time::Duration;
///
/// let start = Timestamp::from_millis(1_000);
/// let later = start + Duration::from_secs(2);
/// assert_eq!(later.as_millis(), 3_000);
/// assert_eq!(later.duration_since(start), Duration::from_secs(2));
/// assert_eq!(start.duration_since(later), Duration::ZERO);
/// ```
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
#[serde(transparent)]
pub struct Timestamp(u64);

impl Timestamp {
    /// The instant `millis` milliseconds after the Unix epoch.
    pub const fn from_millis(millis: u64) -> Self {
        Self(millis)
    }

    /// Milliseconds since the Unix epoch.
    pub const fn as_millis(self) -> u64 {
        self.0
    }

    /// The given system time; times before the epoch become the epoch, times beyond `u64`
    /// milliseconds saturate.
    pub fn from_system_time(time: SystemTime) -> Self {
        let millis = time.duration_since(UNIX_EPOCH).map_or(0, |since| {
            u64::try_from(since.as_millis()).unwrap_or(u64::MAX)
        });
        Self(millis)
    }

    /// The current wall-clock time. Only drivers call this; the machine takes time as input.
    pub fn now() -> Self {
        Self::from_system_time(SystemTime::now())
    }

    /// How long after `earlier` this instant is (zero if it is not later).
    pub fn duration_since(self, earlier: Timestamp) -> Duration {
        Duration::from_millis(self.0.saturating_sub(earlier.0))
    }

    /// Whether at least `timeout` has passed from `self` to `now`.
    pub fn has_elapsed(self, timeout: Duration, now: Timestamp) -> bool {
        now >= self + timeout
    }
}

impl std::ops::Add<Duration> for Timestamp {
    type Output = Timestamp;
    /// Saturating: a timeout too large to represent never expires.
    fn add(self, rhs: Duration) -> Timestamp {
        let millis = u64::try_from(rhs.as_millis()).unwrap_or(u64::MAX);
        Timestamp(self.0.saturating_add(millis))
    }
}

impl fmt::Display for Timestamp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:03}s", self.0 / 1000, self.0 % 1000)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn huge_timeouts_saturate_instead_of_wrapping() {
        let t = Timestamp::from_millis(u64::MAX - 5);
        assert_eq!(t + Duration::from_secs(1), Timestamp::from_millis(u64::MAX));
        assert!(
            !Timestamp::from_millis(10)
                .has_elapsed(Duration::MAX, Timestamp::from_millis(u64::MAX - 1))
        );
    }

    #[test]
    fn elapsed_is_inclusive_of_the_deadline() {
        let t = Timestamp::from_millis(1_000);
        assert!(!t.has_elapsed(Duration::from_millis(500), Timestamp::from_millis(1_499)));
        assert!(t.has_elapsed(Duration::from_millis(500), Timestamp::from_millis(1_500)));
    }

    #[test]
    fn system_time_before_the_epoch_is_the_epoch() {
        let before = UNIX_EPOCH - Duration::from_secs(1);
        assert_eq!(
            Timestamp::from_system_time(before),
            Timestamp::from_millis(0)
        );
        let after = UNIX_EPOCH + Duration::from_millis(1234);
        assert_eq!(Timestamp::from_system_time(after).as_millis(), 1234);
    }
}

//! The clock both daemons read: wall-clock time for what they write (Lease renewals, condition
//! times, Events) and a monotonic instant for what they measure (how long a Lease has been seen
//! unchanged).

use std::sync::Arc;

use k8s_openapi::jiff::{SignedDuration, Timestamp};

/// A source of the current time. The monotonic side is tokio's clock, so it stands still and
/// advances with tokio's paused time in tests; the wall side is the system clock, or any
/// function (a fixed time, or [`Clock::following_tokio`] in tests).
#[derive(Clone)]
pub struct Clock {
    wall: Arc<dyn Fn() -> Timestamp + Send + Sync>,
}

impl std::fmt::Debug for Clock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Clock").field("now", &self.now()).finish()
    }
}

impl Default for Clock {
    fn default() -> Self {
        Self::system()
    }
}

impl Clock {
    /// The system's clock.
    pub fn system() -> Self {
        Self::from_fn(Timestamp::now)
    }

    /// A clock whose wall time `wall` gives.
    ///
    /// ```
    /// use k8s_openapi::jiff::Timestamp;
    /// let t = Timestamp::constant(1_777_636_800, 0);
    /// assert_eq!(clusterset_daemon::Clock::from_fn(move || t).now(), t);
    /// ```
    pub fn from_fn(wall: impl Fn() -> Timestamp + Send + Sync + 'static) -> Self {
        Self {
            wall: Arc::new(wall),
        }
    }

    /// A clock whose wall time starts at `start` now and moves with tokio's clock (for tests
    /// under paused time). Must be called in a tokio runtime.
    pub fn following_tokio(start: Timestamp) -> Self {
        let origin = tokio::time::Instant::now();
        Self::from_fn(move || {
            let elapsed = SignedDuration::try_from(origin.elapsed()).unwrap_or(SignedDuration::MAX);
            start.checked_add(elapsed).unwrap_or(Timestamp::MAX)
        })
    }

    /// The wall-clock time.
    pub fn now(&self) -> Timestamp {
        (self.wall)()
    }

    /// The monotonic instant (tokio's clock).
    pub fn monotonic(&self) -> std::time::Instant {
        tokio::time::Instant::now().into_std()
    }
}

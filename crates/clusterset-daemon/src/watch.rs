//! How the daemons' watches retry: [`WatchBackoff`], kube-runtime's `Backoff` of every watch of
//! both daemons.

/// How long a failed watch waits before it tries again: 500 ms, doubling with every further
/// failure, at most [`WatchBackoff::MAX`]; back to 500 ms once the watch delivers again. Each
/// wait is made up to [`WatchBackoff::JITTER_PERCENT`] longer or shorter at random, so that
/// the watches of many daemons (an agent has eight) that failed together when their API server
/// went away do not all try again in the same instant when it returns.
///
/// kube's default backoff grows to 30 s, so after an API server came back a watch could wait
/// that long, twice (its first attempt usually fails with "too old resource version" and is
/// followed by a list), before the daemon saw any change made meanwhile. Capped at 5 s (6.25 s
/// with its jitter), a daemon catches up within seconds of the API server's return; eight
/// watches then try about 1.6 times a second while it is down. Both daemons' watches use it.
///
/// ```
/// use clusterset_daemon::watch::WatchBackoff;
/// use std::time::Duration;
/// let waits: Vec<Duration> = WatchBackoff::with_seed(7).take(6).collect();
/// let bases = [500, 1000, 2000, 4000, 5000, 5000].map(Duration::from_millis);
/// for (wait, base) in waits.iter().zip(bases) {
///     assert!(*wait >= base * 3 / 4 && *wait <= base * 5 / 4, "{wait:?} {base:?}");
/// }
/// // The same seed, the same waits.
/// assert_eq!(waits, WatchBackoff::with_seed(7).take(6).collect::<Vec<_>>());
/// ```
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: std::time::Duration,
    /// xorshift64 state (never zero).
    state: u64,
}

impl WatchBackoff {
    /// The first wait (before its jitter).
    pub const MIN: std::time::Duration = std::time::Duration::from_millis(500);
    /// The longest wait (before its jitter).
    pub const MAX: std::time::Duration = std::time::Duration::from_secs(5);
    /// How much longer or shorter than its base a wait may be, in percent.
    pub const JITTER_PERCENT: u64 = 25;

    /// A backoff whose jitter follows from `seed` (the same seed gives the same waits).
    pub fn with_seed(seed: u64) -> Self {
        Self {
            next: Self::MIN,
            state: splitmix64(seed) | 1,
        }
    }

    /// The next pseudo-random number (xorshift64).
    fn random(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }
}

/// One step of splitmix64: spreads a seed's bits (nearby seeds give unrelated states).
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Default for WatchBackoff {
    /// Seeded from the process id, the time and a count of the backoffs made, so that every
    /// watch of every daemon has its own jitter.
    fn default() -> Self {
        static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let seed = (u64::from(std::process::id()) << 32)
            ^ u64::from(nanos)
            ^ made.wrapping_mul(0x2545_F491_4F6C_DD1D);
        Self::with_seed(seed)
    }
}

impl Iterator for WatchBackoff {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<std::time::Duration> {
        let base = self.next;
        self.next = base.saturating_mul(2).min(Self::MAX);
        // A factor of (100 - J)% to (100 + J)% of the base, in steps of 0.1%.
        let spread = Self::JITTER_PERCENT * 20 + 1;
        let permille = 1000 - Self::JITTER_PERCENT * 10 + self.random() % spread;
        let nanos = base.as_nanos().saturating_mul(u128::from(permille)) / 1000;
        Some(std::time::Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::MIN;
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::WatchBackoff;

    #[test]
    fn watches_do_not_retry_in_lockstep_and_each_wait_stays_within_a_quarter_of_its_base() {
        // An agent's eight watches fail together when the hub goes away.
        let waits: Vec<Vec<Duration>> = (0..8)
            .map(|_| WatchBackoff::default().take(8).collect())
            .collect();
        let bases = [500, 1000, 2000, 4000, 5000, 5000, 5000, 5000].map(Duration::from_millis);
        for (step, base) in bases.iter().enumerate() {
            let at_step: Vec<Duration> = waits.iter().map(|w| w[step]).collect();
            for wait in &at_step {
                assert!(
                    *wait >= base.mul_f64(0.75) && *wait <= base.mul_f64(1.25),
                    "wait {step}: {wait:?} is not within 25% of {base:?}"
                );
            }
            let first = at_step[0];
            assert!(
                at_step.iter().any(|w| *w != first),
                "the eight watches all wait {first:?} before attempt {step}: lockstep"
            );
        }
    }

    #[test]
    fn the_jitter_spreads_over_the_whole_quarter_and_a_reset_starts_from_the_first_wait() {
        let base = WatchBackoff::MIN;
        let firsts: Vec<Duration> = (0..500)
            .filter_map(|seed| WatchBackoff::with_seed(seed).next())
            .collect();
        let (min, max) = (
            firsts.iter().min().copied().unwrap_or_default(),
            firsts.iter().max().copied().unwrap_or_default(),
        );
        assert!(min >= base * 3 / 4 && min < base.mul_f64(0.78), "{min:?}");
        assert!(max <= base * 5 / 4 && max > base.mul_f64(1.22), "{max:?}");

        let mut backoff = WatchBackoff::with_seed(1);
        let grown = backoff.by_ref().take(5).last().unwrap_or_default();
        assert!(grown >= WatchBackoff::MAX * 3 / 4, "{grown:?}");
        kube::runtime::utils::Backoff::reset(&mut backoff);
        let again = backoff.next().unwrap_or_default();
        assert!(again <= base * 5 / 4, "{again:?}");
    }
}

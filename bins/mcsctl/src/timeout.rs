//! Duration flags as kubectl's (`--timeout=30s`): parsed with clusterset-report's Go duration
//! parser, and the old flags in milliseconds or seconds (`--timeout-ms 400`,
//! `--timeout-secs 600`) kept, hidden, for scripts: they still work and say on stderr what
//! to write instead.

use std::time::Duration;

use clusterset_report::duration::{self, DurationError};

/// clap's value parser of a duration flag: `300ms`, `30s`, `2m`, `1m30s`.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    duration::parse(text)
}

/// The duration to use: the deprecated flag `old` (its value already a duration) when it was
/// given, with a warning on stderr naming `new` in its new form; else `current`.
pub fn with_deprecated(current: Duration, old: Option<(&str, Duration)>, new: &str) -> Duration {
    match old {
        Some((flag, value)) => {
            eprintln!(
                "warning: {flag} is deprecated and will be removed: use {new}={}",
                duration::format(value)
            );
            value
        }
        None => current,
    }
}

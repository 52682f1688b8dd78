//! The deprecated duration flags in milliseconds or seconds (`--timeout-ms 400`,
//! `--timeout-secs 600`), kept, hidden, for scripts: they still work and say on stderr what to
//! write instead (clusterset-report's [`duration::with_deprecated`] chooses and words it). The
//! duration flags themselves are parsed by [`duration::parse`], as kubectl's (`--timeout=30s`).

use std::time::Duration;

use clusterset_report::duration;

/// The duration to use: the deprecated flag `old` when it was given (its warning printed on
/// stderr), else `current`.
pub fn with_deprecated(current: Duration, old: Option<(&str, Duration)>, new: &str) -> Duration {
    let chosen = duration::with_deprecated(current, old, new);
    if let Some(warning) = &chosen.warning {
        eprintln!("warning: {warning}");
    }
    chosen.value
}

//! Durations as kubectl takes them (`--timeout=30s`, `--interval=2m`): Go's
//! `time.ParseDuration` syntax, the one home of it for the command line's flags.
//!
//! A duration is one or more numbers (an optional fraction) each followed by a unit: `ns`,
//! `us` (or `µs`), `ms`, `s`, `m`, `h` — `300ms`, `30s`, `2m`, `1h`, `1m30s`, `1.5s`. `0` alone
//! is zero, as in Go. A bare number is refused as Go refuses it (`time: missing unit in
//! duration "30"`), with the unit it probably meant. Negative durations are refused: no flag
//! of ours means anything by one. The flags' older forms in milliseconds or seconds
//! (`--timeout-ms 400`) still work and warn ([`with_deprecated`]).
//!
//! ```
//! use clusterset_report::duration::{parse, format};
//! use std::time::Duration;
//!
//! assert_eq!(parse("1m30s")?, Duration::from_secs(90));
//! assert_eq!(parse("300ms")?, Duration::from_millis(300));
//! assert_eq!(
//!     parse("30").unwrap_err().to_string(),
//!     "time: missing unit in duration \"30\" (a number needs a unit: 30s, 30ms, 30m)"
//! );
//! assert_eq!(format(Duration::from_secs(90)), "1m30s");
//! # Ok::<(), clusterset_report::duration::DurationError>(())
//! ```

use std::time::Duration;

/// Why a text is not a duration; the messages are Go's (kubectl prints those), with a hint.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// Not Go's duration syntax.
    #[error(
        "time: invalid duration {text:?} (write a number and a unit: 300ms, 30s, 2m, 1h, 1m30s)"
    )]
    Invalid {
        /// The text.
        text: String,
    },
    /// A number without a unit.
    #[error(
        "time: missing unit in duration {text:?} (a number needs a unit: {number}s, {number}ms, {number}m)"
    )]
    MissingUnit {
        /// The text.
        text: String,
        /// The number it ends with, for the hint.
        number: String,
    },
    /// A unit Go does not know.
    #[error("time: unknown unit {unit:?} in duration {text:?} (units: ns, us, ms, s, m, h)")]
    UnknownUnit {
        /// The text.
        text: String,
        /// The unit.
        unit: String,
    },
    /// Negative.
    #[error("{text:?} is negative: a duration here must be 0 or more")]
    Negative {
        /// The text.
        text: String,
    },
    /// Too large.
    #[error("time: invalid duration {text:?} (too large)")]
    Overflow {
        /// The text.
        text: String,
    },
}

/// Nanoseconds per unit.
fn unit_nanos(unit: &str) -> Option<u128> {
    Some(match unit {
        "ns" => 1,
        "us" | "µs" | "μs" => 1_000,
        "ms" => 1_000_000,
        "s" => 1_000_000_000,
        "m" => 60 * 1_000_000_000,
        "h" => 3_600 * 1_000_000_000,
        _ => return None,
    })
}

/// Parses `text` as Go's `time.ParseDuration` does (see the module).
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let invalid = || DurationError::Invalid {
        text: text.to_owned(),
    };
    let overflow = || DurationError::Overflow {
        text: text.to_owned(),
    };
    let mut rest = text;
    if let Some(after) = rest.strip_prefix('-') {
        if after == "0" || after.is_empty() {
            return if after.is_empty() {
                Err(invalid())
            } else {
                Ok(Duration::ZERO)
            };
        }
        return Err(DurationError::Negative {
            text: text.to_owned(),
        });
    }
    rest = rest.strip_prefix('+').unwrap_or(rest);
    if rest == "0" {
        return Ok(Duration::ZERO);
    }
    if rest.is_empty() {
        return Err(invalid());
    }
    let mut total: u128 = 0;
    while !rest.is_empty() {
        let digits = rest
            .find(|c: char| !c.is_ascii_digit() && c != '.')
            .unwrap_or(rest.len());
        let (number, after) = rest.split_at(digits);
        let (whole, fraction) = number.split_once('.').unwrap_or((number, ""));
        if (whole.is_empty() && fraction.is_empty()) || fraction.contains('.') {
            return Err(invalid());
        }
        let unit_len = after
            .find(|c: char| c.is_ascii_digit() || c == '.')
            .unwrap_or(after.len());
        let (unit, next) = after.split_at(unit_len);
        if unit.is_empty() {
            return Err(DurationError::MissingUnit {
                text: text.to_owned(),
                number: number.to_owned(),
            });
        }
        let nanos = unit_nanos(unit).ok_or_else(|| DurationError::UnknownUnit {
            text: text.to_owned(),
            unit: unit.to_owned(),
        })?;
        let whole: u128 = if whole.is_empty() {
            0
        } else {
            whole.parse().map_err(|_| overflow())?
        };
        let mut part = whole.checked_mul(nanos).ok_or_else(overflow)?;
        // The fraction, digit by digit, as Go does (digits past nanosecond precision drop).
        let mut scale = nanos;
        for digit in fraction.chars().filter_map(|c| c.to_digit(10)) {
            scale /= 10;
            part += u128::from(digit) * scale;
        }
        total = total.checked_add(part).ok_or_else(overflow)?;
        rest = next;
    }
    let secs = u64::try_from(total / 1_000_000_000).map_err(|_| overflow())?;
    let nanos = u32::try_from(total % 1_000_000_000).map_err(|_| overflow())?;
    Ok(Duration::new(secs, nanos))
}

/// `duration` as Go prints one (`time.Duration.String`): `1h2m3s`, `1m30s`, `300ms`, `1.5s`,
/// `0s`.
pub fn format(duration: Duration) -> String {
    let nanos = duration.as_nanos();
    if nanos == 0 {
        return "0s".to_owned();
    }
    if nanos < 1_000_000_000 {
        let (unit, per) = if nanos < 1_000 {
            ("ns", 1)
        } else if nanos < 1_000_000 {
            ("µs", 1_000)
        } else {
            ("ms", 1_000_000)
        };
        return format!("{}{unit}", decimal(nanos, per));
    }
    let seconds = nanos % 60_000_000_000;
    let minutes = (nanos / 60_000_000_000) % 60;
    let hours = nanos / 3_600_000_000_000;
    let seconds = format!("{}s", decimal(seconds, 1_000_000_000));
    match (hours, minutes) {
        (0, 0) => seconds,
        (0, m) => format!("{m}m{seconds}"),
        (h, m) => format!("{h}h{m}m{seconds}"),
    }
}

/// The value of a duration flag that has a deprecated older form (`--timeout-ms 400` for
/// `--timeout=400ms`), and the warning to show when the old form was used.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Chosen {
    /// The duration to use.
    pub value: Duration,
    /// What to tell the user when the deprecated flag was given: that it will go, and what to
    /// write instead.
    pub warning: Option<String>,
}

/// The duration to use: the deprecated flag `old` (its name and its value, already a
/// duration) when it was given, with a warning naming `new` in its new form; else `current`.
///
/// ```
/// use std::time::Duration;
/// use clusterset_report::duration::with_deprecated;
/// let old = with_deprecated(Duration::from_secs(1), Some(("--timeout-ms", Duration::from_millis(400))), "--timeout");
/// assert_eq!(old.value, Duration::from_millis(400));
/// assert_eq!(old.warning.as_deref(), Some("--timeout-ms is deprecated and will be removed: use --timeout=400ms"));
/// let current = with_deprecated(Duration::from_secs(1), None, "--timeout");
/// assert_eq!((current.value, current.warning), (Duration::from_secs(1), None));
/// ```
pub fn with_deprecated(current: Duration, old: Option<(&str, Duration)>, new: &str) -> Chosen {
    match old {
        Some((flag, value)) => Chosen {
            value,
            warning: Some(format!(
                "{flag} is deprecated and will be removed: use {new}={}",
                format(value)
            )),
        },
        None => Chosen {
            value: current,
            warning: None,
        },
    }
}

/// `value / per` with the fraction's significant digits.
fn decimal(value: u128, per: u128) -> String {
    let (whole, fraction) = (value / per, value % per);
    if fraction == 0 {
        return whole.to_string();
    }
    let width = per.to_string().len() - 1;
    let digits = format!("{fraction:0width$}");
    format!("{whole}.{}", digits.trim_end_matches('0'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_syntax_parses() {
        for (text, expected) in [
            ("300ms", Duration::from_millis(300)),
            ("30s", Duration::from_secs(30)),
            ("2m", Duration::from_secs(120)),
            ("1h", Duration::from_secs(3600)),
            ("1m30s", Duration::from_secs(90)),
            ("1h2m3s4ms", Duration::new(3723, 4_000_000)),
            ("1.5s", Duration::from_millis(1500)),
            (".5s", Duration::from_millis(500)),
            ("2us", Duration::from_micros(2)),
            ("2µs", Duration::from_micros(2)),
            ("7ns", Duration::from_nanos(7)),
            ("0", Duration::ZERO),
            ("+10s", Duration::from_secs(10)),
            ("0s", Duration::ZERO),
        ] {
            assert_eq!(parse(text), Ok(expected), "{text}");
        }
    }

    #[test]
    fn go_refusals_with_a_hint() {
        let message = |text: &str| parse(text).map_err(|e| e.to_string()).err();
        assert_eq!(
            message("30").as_deref(),
            Some("time: missing unit in duration \"30\" (a number needs a unit: 30s, 30ms, 30m)")
        );
        assert_eq!(
            message("1m30").as_deref(),
            Some("time: missing unit in duration \"1m30\" (a number needs a unit: 30s, 30ms, 30m)")
        );
        assert!(
            message("3d")
                .is_some_and(|m| m.starts_with("time: unknown unit \"d\" in duration \"3d\"")),
            "{:?}",
            message("3d")
        );
        for text in ["", "s", "abc", "1..5s", ".s", "-", "1 s"] {
            assert!(
                matches!(
                    parse(text),
                    Err(DurationError::Invalid { .. } | DurationError::UnknownUnit { .. })
                ),
                "{text:?}: {:?}",
                parse(text)
            );
        }
        assert!(matches!(parse("-5s"), Err(DurationError::Negative { .. })));
        assert!(matches!(
            parse("99999999999999999999999h"),
            Err(DurationError::Overflow { .. })
        ));
    }

    #[test]
    fn formats_as_go_does_and_round_trips() {
        for (duration, text) in [
            (Duration::ZERO, "0s"),
            (Duration::from_millis(300), "300ms"),
            (Duration::from_millis(1500), "1.5s"),
            (Duration::from_secs(90), "1m30s"),
            (Duration::from_secs(3600), "1h0m0s"),
            (Duration::from_secs(600), "10m0s"),
            (Duration::from_micros(2), "2µs"),
        ] {
            assert_eq!(format(duration), text);
            assert_eq!(parse(text), Ok(duration), "{text}");
        }
    }
}

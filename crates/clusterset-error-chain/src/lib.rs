//! [`ErrorChain`]: an error and its sources, each once, on one line. Errors of the workspace
//! keep their cause as their `source()` and do not repeat its text in their own message, so
//! whatever prints an error for a person (a log field, a status field, an Event, a command's
//! output) prints the chain, or the cause is lost. This crate is the one formatter of that
//! chain, with no dependencies, so that pure crates and the IO crates below the daemons
//! (`mon-failover-io`, `ceph-local`) use the same one as the daemons (`clusterset-daemon`
//! re-exports it).
#![forbid(unsafe_code)]

use std::error::Error;
use std::fmt;

/// An error and its sources, each once, joined by `: ` — what a log line or a status field
/// prints so that the cause of a failure is not lost
/// (`tracing::warn!(error = %ErrorChain(&error), ...)`).
///
/// ```
/// #[derive(Debug, thiserror::Error)]
/// #[error("cannot read the Lease")]
/// struct Outer(#[source] std::io::Error);
/// let error = Outer(std::io::Error::other("connection reset"));
/// assert_eq!(
///     clusterset_error_chain::ErrorChain(&error).to_string(),
///     "cannot read the Lease: connection reset"
/// );
/// ```
#[derive(Debug, Clone, Copy)]
pub struct ErrorChain<'a>(pub &'a (dyn Error + 'static));

impl fmt::Display for ErrorChain<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut printed = self.0.to_string();
        f.write_str(&printed)?;
        let mut source = self.0.source();
        while let Some(error) = source {
            let text = error.to_string();
            // An error that already quotes its source's text: print that text once.
            if !printed.contains(&text) {
                write!(f, ": {text}")?;
                printed = text;
            }
            source = error.source();
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::ErrorChain;

    #[derive(Debug, thiserror::Error)]
    #[error("{context}")]
    struct Context {
        context: &'static str,
        #[source]
        source: Box<dyn std::error::Error + Send + Sync>,
    }

    #[derive(Debug, thiserror::Error)]
    #[error("{context}: {source}")]
    struct Quoting {
        context: &'static str,
        source: std::io::Error,
    }

    /// The failover's state store failing to write its file because of `cause`.
    fn saving(cause: Box<dyn std::error::Error + Send + Sync>) -> Context {
        Context {
            context: "mon failover state",
            source: cause,
        }
    }

    #[test]
    fn every_cause_is_printed_once_in_order() {
        let error = saving(Box::new(Context {
            context: "writing /var/lib/state.json",
            source: Box::new(std::io::Error::other("disk full")),
        }));
        assert_eq!(
            ErrorChain(&error).to_string(),
            "mon failover state: writing /var/lib/state.json: disk full"
        );
        let alone = std::io::Error::other("disk full");
        assert_eq!(ErrorChain(&alone).to_string(), "disk full");
    }

    #[test]
    fn a_cause_the_message_already_quotes_is_not_repeated() {
        let error = saving(Box::new(Quoting {
            context: "writing /var/lib/state.json",
            source: std::io::Error::other("disk full"),
        }));
        assert_eq!(
            ErrorChain(&error).to_string(),
            "mon failover state: writing /var/lib/state.json: disk full"
        );
    }
}

//! Logs: `RUST_LOG` filters (default `info`), `--log-format` picks text or JSON lines.

use clap::ValueEnum;

/// Log output format (the `--log-format` flag of the daemons).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

/// Installs the global subscriber: the `RUST_LOG` filter (default `info`) in `format`. Call it
/// once, at the start of `main`; a second call leaves the first subscriber in place.
pub fn init_logging(format: LogFormat) {
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    // `try_init` fails only when a subscriber is already installed: keep that one.
    let _ = match format {
        LogFormat::Json => builder.json().try_init(),
        LogFormat::Text => builder.try_init(),
    };
}

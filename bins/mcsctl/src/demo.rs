//! `mcsctl demo`: its flags, and `ceph_local::demo`'s guided run told on the terminal (lines on
//! stdout, what it waits for in a spinner).

use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::Context;
use ceph_local::demo::{DemoError, DemoSettings, Narrator};
use clap::Args;

use crate::progress::Spinner;

/// Options of `mcsctl demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The loopback /24 to use: mons at 127.0.NET.11-13 (cluster IPs), new mons at
    /// 127.0.NET.21-29 (global IPs).
    #[arg(long, default_value_t = 77, value_name = "NET")]
    net: u8,
    /// Where to keep the cluster's files (default: a temporary directory, removed at the end).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Give up after this long: 10m, 1h.
    #[arg(long, value_name = "DURATION", default_value = "10m", value_parser = clusterset_report::duration::parse)]
    timeout: Duration,
    /// Deprecated: --timeout=<N>s.
    #[arg(long, hide = true, value_name = "SECONDS", conflicts_with = "timeout")]
    timeout_secs: Option<u64>,
}

impl Narrator for Spinner {
    fn say(&self, line: &str) {
        Spinner::say(self, line);
    }

    fn waiting(&self, what: &str) {
        self.set_message(what);
    }
}

/// Runs the demo: exit status 1 when Ceph is not installed, the migration failed or the quorum
/// was lost.
pub fn run(args: &DemoArgs) -> anyhow::Result<ExitCode> {
    if let Err(missing) = ceph_local::demo::check_tools() {
        eprintln!("error: {missing}");
        return Ok(ExitCode::from(1));
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    // Lines show as they happen (also on a pipe); the spinner shows what is being waited for.
    let spinner = Spinner::start("creating the cluster");
    let settings = DemoSettings {
        net: args.net,
        dir: args.dir.clone(),
        timeout: crate::timeout::with_deprecated(
            args.timeout,
            args.timeout_secs
                .map(|s| ("--timeout-secs", Duration::from_secs(s))),
            "--timeout",
        ),
    };
    let report = match runtime.block_on(ceph_local::demo::run(&settings, &spinner)) {
        Ok(report) => report,
        Err(DemoError::Migration(error)) => {
            spinner.finish();
            // With its causes, as main prints every other error.
            eprintln!("error: {:#}", anyhow::Error::from(error));
            return Ok(ExitCode::from(1));
        }
        Err(error) => return Err(error.into()),
    };
    Ok(if report.quorum_kept {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    })
}

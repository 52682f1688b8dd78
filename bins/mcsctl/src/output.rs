//! Writing command output to stdout.

use std::io::Write;
use std::process::ExitCode;

/// Writes `text` to stdout. A closed pipe (`mcsctl crds | head`) ends the command quietly.
pub fn print(text: &str) -> anyhow::Result<ExitCode> {
    let mut stdout = std::io::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(anyhow::Error::new(e).context("writing the output")),
    }
}

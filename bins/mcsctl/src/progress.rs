//! A progress spinner (indicatif) on stderr for anything that waits: lookups with retries, API
//! requests, the demo's waits on Ceph. It draws only when stderr is a terminal, so pipes, files
//! and scripts see nothing of it; lines printed while it spins go through [`Spinner::say`] so
//! they are never cut by a spinner frame.

use std::io::{IsTerminal, Write as _};
use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// A spinner with a message and the time spent so far; removed when dropped.
#[derive(Debug)]
pub struct Spinner {
    bar: ProgressBar,
}

impl Spinner {
    /// Starts a spinner showing `message`; hidden unless stderr is a terminal.
    pub fn start(message: impl Into<String>) -> Self {
        let target = if std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(None, target);
        if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} ({elapsed})") {
            bar.set_style(style);
        }
        bar.set_message(message.into());
        bar.enable_steady_tick(Duration::from_millis(100));
        Self { bar }
    }

    /// Replaces the message.
    pub fn set_message(&self, message: impl Into<String>) {
        self.bar.set_message(message.into());
    }

    /// Prints `line` on stdout (flushed, so it shows at once also on a pipe), with the spinner
    /// out of the way.
    pub fn say(&self, line: &str) {
        self.bar.suspend(|| {
            let mut stdout = anstream::stdout().lock();
            let _ = writeln!(stdout, "{line}");
            let _ = stdout.flush();
        });
    }

    /// Removes the spinner.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        self.bar.finish_and_clear();
    }
}

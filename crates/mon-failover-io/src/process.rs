//! Running the Ceph programs (`ceph`, `ceph-mon`, `monmaptool`, `ceph-authtool`): one place
//! that spawns, bounds the time, and turns a failure into an error with the command line and
//! the program's stderr.

use std::ffi::OsString;
use std::fmt;
use std::time::Duration;

use mon_failover::CommandError;
use tokio::process::Command;

/// A command line, possibly run inside a network namespace (`ip netns exec NS ...`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    argv: Vec<OsString>,
}

impl CommandLine {
    /// `program`, run directly or, with `netns`, through `ip netns exec NETNS`.
    pub fn new(program: impl Into<OsString>, netns: Option<&str>) -> Self {
        let mut argv = Vec::new();
        if let Some(ns) = netns {
            argv.extend(["ip", "netns", "exec", ns].map(OsString::from));
        }
        argv.push(program.into());
        CommandLine { argv }
    }

    /// Appends an argument.
    pub fn arg(mut self, arg: impl Into<OsString>) -> Self {
        self.argv.push(arg.into());
        self
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Self
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.argv.extend(args.into_iter().map(Into::into));
        self
    }

    /// A tokio command for this line (stdin closed, killed when dropped), for a caller that
    /// spawns a long-running daemon with its own output and environment.
    pub fn command(&self) -> Command {
        let (program, args) = match self.argv.split_first() {
            Some((program, args)) => (program.clone(), args),
            None => (OsString::new(), &[][..]),
        };
        let mut command = Command::new(program);
        command
            .args(args)
            .stdin(std::process::Stdio::null())
            .kill_on_drop(true);
        command
    }

    /// Runs the command to completion within `timeout`; its stdout when it exits with 0.
    pub async fn output(&self, timeout: Duration) -> Result<Vec<u8>, CommandError> {
        let mut command = self.command();
        command
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped());
        let child = command.spawn().map_err(|source| CommandError::Spawn {
            command: self.to_string(),
            source,
        })?;
        let output = match tokio::time::timeout(timeout, child.wait_with_output()).await {
            Err(_) => {
                return Err(CommandError::Timeout {
                    command: self.to_string(),
                    after: timeout,
                });
            }
            Ok(Err(source)) => {
                return Err(CommandError::Spawn {
                    command: self.to_string(),
                    source,
                });
            }
            Ok(Ok(output)) => output,
        };
        if output.status.success() {
            return Ok(output.stdout);
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        let stdout = String::from_utf8_lossy(&output.stdout);
        let said = if stderr.trim().is_empty() {
            stdout.trim()
        } else {
            stderr.trim()
        };
        Err(CommandError::Failed {
            command: self.to_string(),
            status: output.status.to_string(),
            stderr: said.chars().take(2_000).collect(),
        })
    }
}

impl fmt::Display for CommandLine {
    /// The command line as a shell would show it (arguments with spaces quoted).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (i, arg) in self.argv.iter().enumerate() {
            if i > 0 {
                f.write_str(" ")?;
            }
            let arg = arg.to_string_lossy();
            if arg.is_empty() || arg.contains([' ', '\'', '"', '*']) {
                write!(f, "'{}'", arg.replace('\'', r"'\''"))?;
            } else {
                f.write_str(&arg)?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_failure_carries_the_command_and_stderr() {
        let line =
            CommandLine::new("sh", None).args(["-c", "echo 'mon.x does not exist' >&2; exit 22"]);
        let err = line.output(Duration::from_secs(10)).await.unwrap_err();
        let text = err.to_string();
        assert!(text.contains("mon.x does not exist"), "{text}");
        assert!(text.contains("exit status: 22"), "{text}");
        assert!(text.contains("sh -c"), "{text}");
    }

    #[tokio::test]
    async fn a_missing_program_says_what_to_install() {
        let err = CommandLine::new("/nonexistent/ceph", None)
            .output(Duration::from_secs(10))
            .await
            .unwrap_err();
        assert!(matches!(err, CommandError::Spawn { .. }));
        assert_eq!(
            clusterset_error_chain::ErrorChain(&err).to_string(),
            "cannot run `/nonexistent/ceph` (are ceph-mon and ceph-common installed? `apt-get install ceph-mon ceph-common`): No such file or directory (os error 2)"
        );
    }

    #[tokio::test]
    async fn a_command_that_hangs_times_out() {
        let err = CommandLine::new("sleep", None)
            .arg("30")
            .output(Duration::from_millis(200))
            .await
            .unwrap_err();
        assert!(matches!(err, CommandError::Timeout { .. }), "{err}");
    }

    #[test]
    fn netns_commands_go_through_ip_netns_exec() {
        let line = CommandLine::new("ceph", Some("cluster-a")).args(["mon", "dump"]);
        assert_eq!(line.to_string(), "ip netns exec cluster-a ceph mon dump");
        let quoted = CommandLine::new("ceph-authtool", None).args(["--cap", "mon", "allow *"]);
        assert_eq!(quoted.to_string(), "ceph-authtool --cap mon 'allow *'");
    }
}

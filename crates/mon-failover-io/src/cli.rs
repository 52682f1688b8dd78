//! [`CephMonAdmin`](mon_failover::CephMonAdmin) with the `ceph` command line and a given
//! `ceph.conf` and keyring, as Rook's operator does.

use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};
use std::time::Duration;

use async_trait::async_trait;
use ceph_address_plan::MonId;
use serde::de::DeserializeOwned;

use mon_failover::{AdminError, CephMonAdmin, CommandError, MonMap, QuorumStatus};

use crate::install::CephInstall;
use crate::process::CommandLine;

/// The `ceph` CLI as the admin port.
///
/// Every call runs `ceph -c CONF -n NAME [-k KEYRING] [-m MON_HOST] --connect-timeout T ...
/// -f json` (inside a network namespace if one is given), bounded by the timeout. The adapter
/// follows the monmap: after each quorum status it passes the mons it saw in quorum with `-m`,
/// so it keeps reaching the cluster when every mon of the original `mon_host` has moved.
///
/// ```no_run
/// use mon_failover::CephMonAdmin;
/// use mon_failover_io::CephCli;
/// use std::time::Duration;
///
/// # async fn demo() -> Result<(), Box<dyn std::error::Error>> {
/// let ceph = CephCli::new("/etc/ceph/ceph.conf")
///     .keyring("/etc/ceph/keyring")
///     .timeout(Duration::from_secs(15));
/// let status = ceph.quorum_status().await?;
/// println!("in quorum: {:?}", status.quorum_names);
/// # Ok(()) }
/// ```
#[derive(Debug)]
pub struct CephCli {
    program: PathBuf,
    conf: PathBuf,
    keyring: Option<PathBuf>,
    name: String,
    netns: Option<String>,
    install: CephInstall,
    timeout: Duration,
    mon_host: Mutex<Option<String>>,
}

impl CephCli {
    /// The `ceph` program with this configuration file, as `client.admin`, with a 15 s timeout.
    pub fn new(conf: impl Into<PathBuf>) -> Self {
        CephCli {
            program: PathBuf::from("ceph"),
            conf: conf.into(),
            keyring: None,
            name: "client.admin".into(),
            netns: None,
            install: CephInstall::Host,
            timeout: Duration::from_secs(15),
            mon_host: Mutex::new(None),
        }
    }

    /// The keyring holding the client's key (otherwise the configuration's).
    pub fn keyring(mut self, keyring: impl Into<PathBuf>) -> Self {
        self.keyring = Some(keyring.into());
        self
    }

    /// The client name (default `client.admin`).
    pub fn client_name(mut self, name: impl Into<String>) -> Self {
        self.name = name.into();
        self
    }

    /// Run inside this network namespace (`ip netns exec`).
    pub fn netns(mut self, netns: impl Into<String>) -> Self {
        self.netns = Some(netns.into());
        self
    }

    /// Run `ceph` from this install (default: the host's).
    pub fn install(mut self, install: CephInstall) -> Self {
        self.install = install;
        self
    }

    /// The bound on every call (default 15 s). `--connect-timeout` is set to the same value.
    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// The `ceph` program (default `ceph` on the `PATH`).
    pub fn program(mut self, program: impl Into<PathBuf>) -> Self {
        self.program = program.into();
        self
    }

    /// The mons the adapter reaches now: the last monmap it saw, or the configuration's.
    pub fn mon_host(&self) -> Option<String> {
        self.mon_host
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn line<I, S>(&self, args: I) -> CommandLine
    where
        I: IntoIterator<Item = S>,
        S: Into<std::ffi::OsString>,
    {
        let mut line = (self.install)
            .command(self.program.as_os_str(), self.netns.as_deref())
            .arg("-c")
            .arg(self.conf.as_os_str())
            .arg("-n")
            .arg(&self.name)
            .arg("--connect-timeout")
            .arg(self.timeout.as_secs().max(1).to_string());
        if let Some(keyring) = &self.keyring {
            line = line.arg("-k").arg(keyring.as_os_str());
        }
        if let Some(mon_host) = self.mon_host() {
            line = line.arg("-m").arg(mon_host);
        }
        line.args(args)
    }

    /// Runs `ceph ARGS`. When the mons learned from the last monmap do not answer (all of them
    /// moved since), forgets them and tries once more with the configuration's `mon_host`.
    async fn output(&self, args: &[&str]) -> Result<(CommandLine, Vec<u8>), CommandError> {
        // A little more than the connect timeout, so Ceph's own message wins when it has one.
        let bound = self.timeout + Duration::from_secs(5);
        let line = self.line(args.iter().copied());
        match line.output(bound).await {
            Err(error) if unreachable(&error) && self.mon_host().is_some() => {
                self.set_mon_host(None);
                let line = self.line(args.iter().copied());
                let stdout = line.output(bound).await?;
                Ok((line, stdout))
            }
            result => result.map(|stdout| (line, stdout)),
        }
    }

    async fn json<T: DeserializeOwned>(&self, args: &[&str]) -> Result<T, AdminError> {
        let args: Vec<&str> = args.iter().copied().chain(["-f", "json"]).collect();
        let (line, stdout) = self.output(&args).await?;
        serde_json::from_slice(&stdout).map_err(|source| AdminError::Parse {
            command: line.to_string(),
            source,
        })
    }

    async fn run(&self, args: &[&str]) -> Result<(), CommandError> {
        self.output(args).await.map(drop)
    }

    /// Sets (or with `None` forgets) the mons to reach, overriding the configuration's
    /// `mon_host` (`ceph -m`).
    pub fn set_mon_host(&self, mon_host: Option<String>) {
        *self.mon_host.lock().unwrap_or_else(PoisonError::into_inner) = mon_host;
    }

    /// Writes the current monmap to `path` (`ceph mon getmap -o PATH`), for a new mon's
    /// `ceph-mon --mkfs --monmap`.
    pub async fn get_monmap(&self, path: &std::path::Path) -> Result<(), AdminError> {
        let path = path.to_string_lossy();
        Ok(self.run(&["mon", "getmap", "-o", &path]).await?)
    }
}

/// Whether a failure means that no mon answered (as opposed to Ceph refusing the command).
fn unreachable(error: &CommandError) -> bool {
    match error {
        CommandError::Timeout { .. } => true,
        CommandError::Failed { stderr, .. } => stderr.contains("timed out"),
        CommandError::Spawn { .. } => false,
    }
}

#[async_trait]
impl CephMonAdmin for CephCli {
    async fn quorum_status(&self) -> Result<QuorumStatus, AdminError> {
        let status: QuorumStatus = self.json(&["quorum_status"]).await?;
        if !status.quorum_names.is_empty() {
            self.set_mon_host(Some(status.quorum_mon_host()));
        }
        Ok(status)
    }

    async fn mon_dump(&self) -> Result<MonMap, AdminError> {
        self.json(&["mon", "dump"]).await
    }

    async fn add_mon(&self, mon: &MonId, address: IpAddr) -> Result<(), AdminError> {
        let address = match address {
            IpAddr::V4(v4) => v4.to_string(),
            IpAddr::V6(v6) => format!("[{v6}]"),
        };
        Ok(self.run(&["mon", "add", mon.as_str(), &address]).await?)
    }

    async fn remove_mon(&self, mon: &MonId) -> Result<(), AdminError> {
        Ok(self.run(&["mon", "remove", mon.as_str()]).await?)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A stand-in `ceph` that records its arguments and prints a canned answer, so the
    /// adapter's command lines and parsing are tested without a cluster (the real cluster is in
    /// `tests/real_ceph.rs`).
    fn fake_ceph(dir: &std::path::Path, stdout: &str, exit: i32) -> PathBuf {
        let script = dir.join("ceph");
        let args = dir.join("args");
        let body = format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\ncat <<'JSON'\n{stdout}\nJSON\necho 'Error ENOENT: something' >&2\nexit {exit}\n",
            args.display()
        );
        std::fs::write(&script, body).unwrap();
        std::process::Command::new("chmod")
            .args(["+x"])
            .arg(&script)
            .status()
            .unwrap();
        script
    }

    const STATUS: &str = r#"{"election_epoch":4,"quorum":[0],"quorum_names":["d"],"monmap":{"epoch":5,"fsid":"f","mons":[{"rank":0,"name":"d","public_addrs":{"addrvec":[{"type":"v2","addr":"127.0.0.21:3300","nonce":0},{"type":"v1","addr":"127.0.0.21:6789","nonce":0}]}}]}}"#;

    #[tokio::test]
    async fn follows_the_monmap_it_saw() {
        let dir = tempfile::tempdir().unwrap();
        let ceph = CephCli::new("/etc/ceph/x.conf")
            .keyring("/k")
            .program(fake_ceph(dir.path(), STATUS, 0));
        assert_eq!(ceph.mon_host(), None);
        let status = ceph.quorum_status().await.unwrap();
        assert_eq!(status.quorum_names, ["d"]);
        ceph.remove_mon(&"a".parse().unwrap()).await.unwrap();
        let args = std::fs::read_to_string(dir.path().join("args")).unwrap();
        let lines: Vec<&str> = args.lines().collect();
        assert_eq!(
            lines[0],
            "-c /etc/ceph/x.conf -n client.admin --connect-timeout 15 -k /k quorum_status -f json"
        );
        assert_eq!(
            lines[1],
            "-c /etc/ceph/x.conf -n client.admin --connect-timeout 15 -k /k -m [v2:127.0.0.21:3300,v1:127.0.0.21:6789] mon remove a"
        );
    }

    #[tokio::test]
    async fn falls_back_to_the_configuration_when_the_learned_mons_are_gone() {
        let dir = tempfile::tempdir().unwrap();
        let script = dir.path().join("ceph");
        let body = format!(
            "#!/bin/sh\necho \"$@\" >> '{}'\ncase \"$*\" in *' -m '*) echo '[errno 110] RADOS timed out (error connecting to the cluster)' >&2; exit 1;; esac\ncat <<'JSON'\n{STATUS}\nJSON\n",
            dir.path().join("args").display()
        );
        std::fs::write(&script, body).unwrap();
        std::process::Command::new("chmod")
            .arg("+x")
            .arg(&script)
            .status()
            .unwrap();
        let ceph = CephCli::new("c").program(&script);
        ceph.set_mon_host(Some("[v2:127.0.0.99:3300]".into()));
        let status = ceph.quorum_status().await.unwrap();
        assert_eq!(status.quorum_names, ["d"]);
        let args = std::fs::read_to_string(dir.path().join("args")).unwrap();
        assert_eq!(
            args.lines().count(),
            2,
            "one try with -m, one without: {args}"
        );
        assert!(!args.lines().nth(1).unwrap().contains(" -m "));
        // It learned the monmap again.
        assert_eq!(
            ceph.mon_host().as_deref(),
            Some("[v2:127.0.0.21:3300,v1:127.0.0.21:6789]")
        );
    }

    #[tokio::test]
    async fn errors_include_cephs_stderr() {
        let dir = tempfile::tempdir().unwrap();
        let ceph = CephCli::new("c").program(fake_ceph(dir.path(), "", 2));
        let err = ceph.remove_mon(&"a".parse().unwrap()).await.unwrap_err();
        assert!(err.to_string().contains("Error ENOENT: something"), "{err}");
    }

    #[tokio::test]
    async fn unexpected_json_is_a_parse_error_naming_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let ceph = CephCli::new("c").program(fake_ceph(dir.path(), "{\"nope\":1}", 0));
        let err = ceph.quorum_status().await.unwrap_err();
        assert!(matches!(err, AdminError::Parse { .. }), "{err}");
        let chain = clusterset_error_chain::ErrorChain(&err).to_string();
        assert!(
            chain.contains("quorum_status")
                && chain.ends_with(
                    "printed unexpected JSON: missing field `election_epoch` at line 1 column 10"
                ),
            "{chain}"
        );
    }

    #[tokio::test]
    async fn ipv6_mons_are_added_in_brackets() {
        let dir = tempfile::tempdir().unwrap();
        let ceph = CephCli::new("c").program(fake_ceph(dir.path(), "", 0));
        ceph.add_mon(&"e".parse().unwrap(), "fd00::5".parse().unwrap())
            .await
            .unwrap();
        let args = std::fs::read_to_string(dir.path().join("args")).unwrap();
        assert!(args.trim_end().ends_with("mon add e [fd00::5]"), "{args}");
    }
}

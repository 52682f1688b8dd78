//! The quorum as the mons themselves report it on their admin sockets (`mon_status`), for
//! watching a local cluster: no network, no client that hunts for a mon to talk to, and an
//! answer even while the mons have no quorum.
//!
//! The admin socket protocol: a client connects to the daemon's Unix socket, writes the
//! command as JSON followed by a NUL byte, and reads a 32-bit big-endian length followed by
//! that many bytes of JSON.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde::Deserialize;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

use mon_failover::{AdminError, MonMap, QuorumStatus};

use crate::watch::QuorumProbe;

/// The largest `mon_status` answer read (a monmap of hundreds of mons fits many times).
const MAX_ANSWER: u32 = 16 << 20;
/// How long one mon's admin socket may take to answer.
const SOCKET_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the sockets are asked again while the mons elect.
const ELECTION_POLL: Duration = Duration::from_millis(100);

/// Ceph's default `mon_election_timeout`: how long an election round waits for every mon of the
/// monmap before a majority may win without the rest.
pub const MON_ELECTION_TIMEOUT: Duration = Duration::from_secs(5);

/// How long an [`AdminSocketQuorum`] lets the mons elect before it reports the quorum lost,
/// unless told otherwise: three rounds of [`MON_ELECTION_TIMEOUT`]. A mon joining takes two
/// (its addition to the monmap starts a round it cannot answer while it synchronizes, so the
/// others win at the timeout; it then calls its own), and a loaded machine can push the second
/// past the 10 s of two rounds: CI once saw `mon.c electing, mon.d electing, mon.e electing`
/// for 10.0 s while mon f joined. A real loss (no majority of the monmap alive) never re-forms,
/// so it is still caught.
pub const DEFAULT_ELECTION_ALLOWANCE: Duration =
    Duration::from_secs(3 * MON_ELECTION_TIMEOUT.as_secs());

/// The part of `mon_status` this probe reads.
#[derive(Debug, Deserialize)]
struct MonStatus {
    name: String,
    /// `leader`, `peon`, `electing`, `probing`, `synchronizing`.
    state: String,
    election_epoch: u64,
    #[serde(default)]
    quorum: Vec<u32>,
    monmap: MonMap,
}

/// Asks every mon of a local cluster for its state on its admin socket (the
/// `{run_dir}/<cluster>-mon.<id>.asok` files `ceph-local`'s `LocalCluster` configures),
/// and answers the quorum the leader (or, without one, a peon) reports. While no mon is in a
/// quorum it asks again every 100 ms, up to the election allowance
/// ([`DEFAULT_ELECTION_ALLOWANCE`], 15 s), because every monmap change makes the mons elect: a
/// quorum that re-forms within the allowance was not lost; one that does not is reported with
/// every mon's state. Like any client, it learns
/// that peons died when the leader does (when their lease acknowledgements time out, 10 s by
/// default): until then the leader still reports its quorum. While a mon of the monmap is down,
/// no election ends before Ceph's `mon_election_timeout` (5 s by default), and a mon joining
/// then takes two such rounds: give a probe that watches a cluster with a dead mon a longer
/// allowance ([`AdminSocketQuorum::election_allowance`]).
///
/// ```no_run
/// use std::sync::Arc;
/// use std::time::Duration;
/// use mon_failover_io::{AdminSocketQuorum, QuorumWatch};
/// # async fn watch() {
/// let watch = QuorumWatch::start(
///     Arc::new(AdminSocketQuorum::new("/tmp/cluster/run")),
///     Duration::from_secs(1),
/// );
/// let record = watch.stop().await;
/// assert!(record.never_lost(), "{:?}", record.losses);
/// # }
/// ```
#[derive(Debug, Clone)]
pub struct AdminSocketQuorum {
    run_dir: PathBuf,
    election_allowance: Duration,
}

impl AdminSocketQuorum {
    /// Reads the admin sockets of the mons in `run_dir`.
    pub fn new(run_dir: impl Into<PathBuf>) -> Self {
        Self {
            run_dir: run_dir.into(),
            election_allowance: DEFAULT_ELECTION_ALLOWANCE,
        }
    }

    /// How long the mons may be without a quorum (electing) before a probe reports it lost.
    pub fn election_allowance(mut self, allowance: Duration) -> Self {
        self.election_allowance = allowance;
        self
    }

    /// One round: every mon's state, or why its socket did not answer.
    async fn states(&self) -> Result<Vec<Result<MonStatus, String>>, AdminError> {
        let unlisted =
            |e: std::io::Error| self.error(format!("cannot list {}: {e}", self.run_dir.display()));
        let mut entries = tokio::fs::read_dir(&self.run_dir).await.map_err(unlisted)?;
        let mut sockets = Vec::new();
        while let Some(entry) = entries.next_entry().await.map_err(unlisted)? {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.contains("-mon.") && name.ends_with(".asok") {
                sockets.push(entry.path());
            }
        }
        sockets.sort();
        let mut states = Vec::with_capacity(sockets.len());
        for socket in sockets {
            states.push(
                mon_status(&socket)
                    .await
                    .map_err(|e| format!("{}: {e}", socket.display())),
            );
        }
        Ok(states)
    }

    fn error(&self, problem: String) -> AdminError {
        AdminError::AdminSocket {
            run_dir: self.run_dir.display().to_string(),
            problem,
        }
    }
}

/// The quorum a set of mon states says: the leader's view, else a peon's.
fn quorum_of(states: &[Result<MonStatus, String>]) -> Option<QuorumStatus> {
    let in_quorum = |role: &str| {
        states
            .iter()
            .flatten()
            .find(|s| s.state == role && !s.quorum.is_empty())
    };
    let (status, leader) = match in_quorum("leader") {
        Some(leader) => (leader, Some(leader.name.clone())),
        None => (in_quorum("peon")?, None),
    };
    let quorum_names = status
        .quorum
        .iter()
        .filter_map(|rank| {
            status
                .monmap
                .mons
                .iter()
                .find(|m| m.rank == i64::from(*rank))
                .map(|m| m.name.clone())
        })
        .collect();
    Some(QuorumStatus {
        election_epoch: status.election_epoch,
        quorum: status.quorum.clone(),
        quorum_names,
        quorum_leader_name: leader,
        monmap: status.monmap.clone(),
    })
}

/// `mon.a electing, mon.b: <why its socket did not answer>`.
fn describe(states: &[Result<MonStatus, String>]) -> String {
    if states.is_empty() {
        return "no mon admin socket".to_owned();
    }
    states
        .iter()
        .map(|s| match s {
            Ok(s) => format!("mon.{} {}", s.name, s.state),
            Err(e) => e.clone(),
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[async_trait]
impl QuorumProbe for AdminSocketQuorum {
    async fn quorum_status(&self) -> Result<QuorumStatus, AdminError> {
        let started = Instant::now();
        loop {
            let states = self.states().await?;
            if let Some(status) = quorum_of(&states) {
                return Ok(status);
            }
            if started.elapsed() >= self.election_allowance {
                return Err(self.error(format!(
                    "no mon in a quorum for {:.1} s: {}",
                    started.elapsed().as_secs_f64(),
                    describe(&states)
                )));
            }
            tokio::time::sleep(ELECTION_POLL).await;
        }
    }
}

/// Asks one daemon's admin socket for `mon_status`.
async fn mon_status(socket: &Path) -> Result<MonStatus, String> {
    let exchange = async {
        let mut stream = UnixStream::connect(socket)
            .await
            .map_err(|e| format!("connect: {e}"))?;
        stream
            .write_all(b"{\"prefix\": \"mon_status\"}\0")
            .await
            .map_err(|e| format!("write: {e}"))?;
        let length = stream.read_u32().await.map_err(|e| format!("read: {e}"))?;
        if length > MAX_ANSWER {
            return Err(format!("an answer of {length} bytes"));
        }
        let mut answer = vec![0; usize::try_from(length).map_err(|e| e.to_string())?];
        stream
            .read_exact(&mut answer)
            .await
            .map_err(|e| format!("read: {e}"))?;
        serde_json::from_slice::<MonStatus>(&answer)
            .map_err(|e| format!("unexpected mon_status JSON: {e}"))
    };
    tokio::time::timeout(SOCKET_TIMEOUT, exchange)
        .await
        .map_err(|_| format!("no answer within {SOCKET_TIMEOUT:?}"))?
}

#[cfg(test)]
mod tests {
    use super::*;

    fn status(name: &str, state: &str, quorum: &[u32]) -> Result<MonStatus, String> {
        let json = format!(
            r#"{{"name":"{name}","rank":0,"state":"{state}","election_epoch":8,"quorum":{quorum:?},
               "monmap":{{"epoch":3,"fsid":"f","mons":[
                 {{"rank":0,"name":"a","public_addrs":{{"addrvec":[]}}}},
                 {{"rank":1,"name":"b","public_addrs":{{"addrvec":[]}}}},
                 {{"rank":2,"name":"c","public_addrs":{{"addrvec":[]}}}}]}}}}"#
        );
        Ok(serde_json::from_str(&json).unwrap())
    }

    #[test]
    fn the_leaders_view_names_the_quorum() {
        let states = [
            status("b", "peon", &[0, 1]),
            status("a", "leader", &[0, 1, 2]),
            Err("c: connect: refused".to_owned()),
        ];
        let quorum = quorum_of(&states).unwrap();
        assert_eq!(quorum.quorum_names, ["a", "b", "c"]);
        assert_eq!(quorum.quorum_leader_name.as_deref(), Some("a"));
        assert_eq!(quorum.monmap.mons.len(), 3);
    }

    #[test]
    fn a_peon_answers_when_the_leaders_socket_does_not() {
        let states = [Err("a: no answer".to_owned()), status("b", "peon", &[0, 1])];
        let quorum = quorum_of(&states).unwrap();
        assert_eq!(quorum.quorum_names, ["a", "b"]);
        assert_eq!(quorum.quorum_leader_name, None);
    }

    #[test]
    fn electing_mons_have_no_quorum_and_say_so() {
        let states = [
            status("a", "electing", &[]),
            status("b", "probing", &[]),
            Err("mon.c: connect: refused".to_owned()),
        ];
        assert!(quorum_of(&states).is_none());
        assert_eq!(
            describe(&states),
            "mon.a electing, mon.b probing, mon.c: connect: refused"
        );
    }

    #[tokio::test]
    async fn an_empty_run_directory_is_reported_after_the_allowance() {
        let dir = tempfile::tempdir().unwrap();
        let probe = AdminSocketQuorum::new(dir.path()).election_allowance(Duration::ZERO);
        let error = probe.quorum_status().await.unwrap_err().to_string();
        assert!(error.contains("no mon admin socket"), "{error}");
    }

    /// A fake daemon speaking the admin socket protocol.
    #[tokio::test]
    async fn reads_mon_status_over_the_admin_socket_protocol() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("ceph-mon.a.asok");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let server = tokio::spawn(async move {
            let (mut stream, _) = listener.accept().await.unwrap();
            let mut request = Vec::new();
            loop {
                let byte = stream.read_u8().await.unwrap();
                if byte == 0 {
                    break;
                }
                request.push(byte);
            }
            let answer = br#"{"name":"a","rank":0,"state":"leader","election_epoch":4,"quorum":[0],
                "monmap":{"epoch":1,"fsid":"f","mons":[{"rank":0,"name":"a","public_addrs":{"addrvec":[]}}]}}"#;
            stream
                .write_u32(u32::try_from(answer.len()).unwrap())
                .await
                .unwrap();
            stream.write_all(answer).await.unwrap();
            String::from_utf8(request).unwrap()
        });
        let quorum = AdminSocketQuorum::new(dir.path())
            .quorum_status()
            .await
            .unwrap();
        assert_eq!(quorum.quorum_names, ["a"]);
        assert_eq!(quorum.election_epoch, 4);
        assert_eq!(server.await.unwrap(), r#"{"prefix": "mon_status"}"#);
    }
}

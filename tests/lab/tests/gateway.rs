//! The lab's gateways carry real packets: TCP connections between the two clusters, whose pod
//! networks overlap, through `clusterset-gateway` processes fed the lab's state files. Needs root,
//! iproute2 and nftables (no Ceph) and fails, never skips, without them.
//!
//! The tests share the lab's namespace names and addresses, so they run one at a time.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::net::{Ipv4Addr, SocketAddr};
use std::time::{Duration, Instant};

use clusterset_lab::{NetnsThread, PodExport, Side, Topology, require_host};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpSocket};
use tokio::sync::mpsc;

/// One lab at a time: the tests share namespaces, addresses and ports.
static ONE_LAB_AT_A_TIME: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// The port the probe listeners of cluster east listen on.
const PORT: u16 = 7000;
/// How long a connection may take to open and answer.
const CONNECT_WITHIN: Duration = Duration::from_secs(10);
/// Issue 32: an export removed from the state takes its DNAT away within 1 s. The gateway's
/// `run` loop looks at its state file every 200 ms and applies a removal as one `nft` delta.
const FOLLOWS_THE_FILE_WITHIN: Duration = Duration::from_secs(1);

fn pod(host: u8) -> Ipv4Addr {
    Ipv4Addr::new(10, 244, 0, host)
}

fn probe(name: &str, global: Ipv4Addr, pod: Ipv4Addr) -> PodExport {
    PodExport {
        namespace: "lab-probe".into(),
        service: name.into(),
        global,
        pod,
    }
}

/// A connection a probe listener accepted: the pod address it was accepted on, and the peer
/// address the pod saw.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Accepted {
    pod: SocketAddr,
    peer: SocketAddr,
}

/// Listeners on `pods` (port [`PORT`]) inside `thread`'s namespace, each answering every
/// connection with the line `<its local address> <the peer address it sees>` and reporting it.
async fn listen(thread: &NetnsThread, pods: &[Ipv4Addr]) -> mpsc::UnboundedReceiver<Accepted> {
    let (accepted, reports) = mpsc::unbounded_channel();
    for pod in pods {
        let (pod, accepted) = (*pod, accepted.clone());
        thread
            .run(move || async move {
                let listener = TcpListener::bind((pod, PORT)).await?;
                tokio::task::spawn_local(async move {
                    while let Ok((mut stream, peer)) = listener.accept().await {
                        let Ok(local) = stream.local_addr() else {
                            continue;
                        };
                        let _ = stream
                            .write_all(format!("{local} {peer}\n").as_bytes())
                            .await;
                        let _ = accepted.send(Accepted { pod: local, peer });
                    }
                });
                Ok::<(), std::io::Error>(())
            })
            .await
            .unwrap()
            .unwrap();
    }
    reports
}

/// Opens a TCP connection from `from` (a pod IP of `thread`'s namespace) to `to`:[`PORT`] and
/// reads the listener's line; the connection's local address and that line.
async fn connect(
    thread: &NetnsThread,
    from: Ipv4Addr,
    to: Ipv4Addr,
) -> std::io::Result<(SocketAddr, String)> {
    thread
        .run(move || async move {
            let socket = TcpSocket::new_v4()?;
            socket.bind((from, 0).into())?;
            let stream = tokio::time::timeout(CONNECT_WITHIN, socket.connect((to, PORT).into()))
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
            let local = stream.local_addr()?;
            let mut line = String::new();
            tokio::time::timeout(CONNECT_WITHIN, BufReader::new(stream).read_line(&mut line))
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
            Ok((local, line.trim_end().to_owned()))
        })
        .await
        .unwrap()
}

/// The probes of the packet tests: the lab's network with, in east, two pods behind global IPs
/// (10.244.0.61 at 242.1.0.61, .62 at 242.1.0.62) listening on [`PORT`], and in west the same
/// two pod IPs (the networks overlap), the first exported at 242.2.0.61, the second not.
struct Probes {
    topology: Topology,
    in_east: NetnsThread,
    in_west: NetnsThread,
    accepted: mpsc::UnboundedReceiver<Accepted>,
    _serial: tokio::sync::MutexGuard<'static, ()>,
}

const EAST_ONE: Ipv4Addr = Ipv4Addr::new(242, 1, 0, 61);
const EAST_TWO: Ipv4Addr = Ipv4Addr::new(242, 1, 0, 62);
const WEST_ONE: Ipv4Addr = Ipv4Addr::new(242, 2, 0, 61);

impl Probes {
    async fn start() -> Probes {
        require_host().unwrap();
        let serial = ONE_LAB_AT_A_TIME.lock().await;
        let topology = Topology::create().await.unwrap();
        for (side, name, global, host) in [
            (Side::A, "east-one", EAST_ONE, 61),
            (Side::A, "east-two", EAST_TWO, 62),
            (Side::B, "west-one", WEST_ONE, 61),
        ] {
            topology.add_pod_ip(side, pod(host)).await.unwrap();
            topology
                .export(side, probe(name, global, pod(host)))
                .await
                .unwrap();
        }
        topology.add_pod_ip(Side::B, pod(62)).await.unwrap();
        let in_east = NetnsThread::spawn(&topology.cluster(Side::A).netns).unwrap();
        let in_west = NetnsThread::spawn(&topology.cluster(Side::B).netns).unwrap();
        let accepted = listen(&in_east, &[pod(61), pod(62)]).await;
        Probes {
            topology,
            in_east,
            in_west,
            accepted,
            _serial: serial,
        }
    }

    /// Connects from `from` in `side`'s pods namespace to `to`; the connection east accepted
    /// (after checking that the client read the same addresses back and left from `from`).
    async fn connect(&mut self, side: Side, from: Ipv4Addr, to: Ipv4Addr) -> Accepted {
        let thread = match side {
            Side::A => &self.in_east,
            Side::B => &self.in_west,
        };
        let (local, line) = connect(thread, from, to).await.unwrap();
        assert_eq!(local.ip(), from, "the client's own address");
        let seen = self.accepted.recv().await.unwrap();
        assert_eq!(
            line,
            format!("{} {}", seen.pod, seen.peer),
            "the listener's answer"
        );
        seen
    }
}

/// Issue 32's packet test: west's pods reach east's by global IP through both gateways, and
/// east sees west's global addresses (an exported pod's own global IP, else the egress IP).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_from_a_west_pod_reaches_the_right_east_pod_by_global_ip_seen_from_west_s_global_address()
 {
    let mut probes = Probes::start().await;
    let west = probes.topology.cluster(Side::B).clone();

    // A west pod without an export reaches east-one's pod, which sees west's egress IP.
    let seen = probes.connect(Side::B, pod(62), EAST_ONE).await;
    assert_eq!(seen.pod.ip(), pod(61), "east-one's pod accepted it");
    assert_eq!(seen.peer.ip(), west.egress_ip, "seen from west's egress IP");

    // A west pod with an export (at the very pod IP of east-one) reaches east-two's pod, which
    // sees that export's global IP.
    let seen = probes.connect(Side::B, pod(61), EAST_TWO).await;
    assert_eq!(seen.pod.ip(), pod(62), "east-two's pod accepted it");
    assert_eq!(
        seen.peer.ip(),
        WEST_ONE,
        "seen from the west pod's own global IP"
    );
    eprintln!(
        "gateway packets: west {} -> {EAST_ONE} reached {} seen as {}; west {} -> {EAST_TWO} reached {} seen as {WEST_ONE}",
        pod(62),
        pod(61),
        west.egress_ip,
        pod(61),
        pod(62),
    );
}

/// The hairpin the lab's own NAT made before the gateways replaced it: a pod of east reaches
/// another by its global IP through east's gateway and back out the pods link, and is seen
/// from its own global IP if it has an export, else from east's egress IP.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tcp_between_east_pods_by_global_ip_hairpins_through_the_gateway_seen_from_global_addresses()
 {
    let mut probes = Probes::start().await;
    let east = probes.topology.cluster(Side::A).clone();

    let seen = probes.connect(Side::A, pod(61), EAST_TWO).await;
    assert_eq!(seen.pod.ip(), pod(62), "east-two's pod accepted it");
    assert_eq!(seen.peer.ip(), EAST_ONE, "seen from east-one's global IP");

    let seen = probes.connect(Side::A, east.node_ip, EAST_ONE).await;
    assert_eq!(seen.pod.ip(), pod(61), "east-one's pod accepted it");
    assert_eq!(seen.peer.ip(), east.egress_ip, "seen from east's egress IP");
    eprintln!(
        "gateway hairpin: east {} -> {EAST_TWO} seen as {EAST_ONE}; east {} -> {EAST_ONE} seen as {}",
        pod(61),
        east.node_ip,
        east.egress_ip,
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_removed_from_the_state_file_loses_its_dnat_within_a_second() {
    require_host().unwrap();
    let _serial = ONE_LAB_AT_A_TIME.lock().await;
    let topology = Topology::create().await.unwrap();
    let (east, west) = (
        topology.cluster(Side::A).clone(),
        topology.cluster(Side::B).clone(),
    );
    let global = Ipv4Addr::new(242, 1, 0, 63);
    topology.add_pod_ip(Side::A, pod(63)).await.unwrap();
    topology
        .export(Side::A, probe("east-three", global, pod(63)))
        .await
        .unwrap();
    let in_east = NetnsThread::spawn(&east.netns).unwrap();
    let in_west = NetnsThread::spawn(&west.netns).unwrap();
    let mut accepted = listen(&in_east, &[pod(63)]).await;
    connect(&in_west, west.node_ip, global).await.unwrap();
    assert_eq!(accepted.recv().await.unwrap().pod.ip(), pod(63));

    // The export leaves the state file: `unexport` writes the file and returns once the
    // gateway's table no longer holds the global IP.
    let removed = Instant::now();
    topology.unexport(Side::A, global).await.unwrap();
    let gone_after = removed.elapsed();
    assert!(
        !topology
            .gateway_dnat(Side::A)
            .await
            .unwrap()
            .contains_key(&global),
        "the DNAT of {global} is gone"
    );
    assert!(
        !std::fs::read_to_string(topology.gateway_state_file(Side::A))
            .unwrap()
            .contains(&global.to_string()),
        "the state file no longer names {global}"
    );
    // The listener still runs, but a new connection to the global IP fails at once at east's
    // gateway with an ICMP unreachable: untranslated, the address has no route there (the lab's
    // gateways have no default route; on a node with one, the table's `forward` chain rejects it
    // with host-unreachable).
    let refused = connect(&in_west, west.node_ip, global).await.unwrap_err();
    assert!(
        matches!(
            refused.kind(),
            std::io::ErrorKind::NetworkUnreachable | std::io::ErrorKind::HostUnreachable
        ),
        "{refused}"
    );
    assert!(accepted.try_recv().is_err(), "nothing reached the pod");
    eprintln!(
        "gateway follows its file: the DNAT of {global} was gone {gone_after:.3?} after its export left the state file"
    );
    assert!(
        gone_after < FOLLOWS_THE_FILE_WITHIN,
        "the DNAT of {global} went {gone_after:?} after the file changed, not within {FOLLOWS_THE_FILE_WITHIN:?}"
    );
}

/// The port of the echo listener the restart test streams through.
const STREAM_PORT: u16 = 7001;
/// How many bytes the streaming client writes every [`STREAM_PACE`] (3.2 MB/s).
const STREAM_CHUNK: usize = 16 * 1024;
/// How often the streaming client writes a chunk.
const STREAM_PACE: Duration = Duration::from_millis(5);
/// How long the restart test lets each kind of traffic show progress before and after a restart.
const PROGRESS_WITHIN: Duration = Duration::from_secs(10);

/// The byte at offset `i` of the restart test's stream (a period of 251 never lines up with a
/// chunk, so a lost, repeated or reordered chunk changes what is read).
fn stream_byte(i: u64) -> u8 {
    (i % 251) as u8
}

/// What the streaming client saw.
#[derive(Debug, Default, Clone, Copy)]
struct StreamReport {
    written: u64,
    echoed: u64,
    longest_silence: Duration,
}

/// One TCP connection from `from` to `to`:[`STREAM_PORT`] that writes [`STREAM_CHUNK`] bytes
/// every [`STREAM_PACE`] until `stop` turns true, then shuts its side down, and checks that every
/// byte comes back in order (the echo listener returns them). `echoed` follows the bytes read
/// back so far.
async fn stream(
    from: Ipv4Addr,
    to: Ipv4Addr,
    mut stop: tokio::sync::watch::Receiver<bool>,
    echoed: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> std::io::Result<StreamReport> {
    use std::sync::atomic::Ordering;
    use tokio::io::AsyncReadExt;
    let socket = TcpSocket::new_v4()?;
    socket.bind((from, 0).into())?;
    let connection = tokio::time::timeout(CONNECT_WITHIN, socket.connect((to, STREAM_PORT).into()))
        .await
        .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
    let (mut reader, mut writer) = connection.into_split();
    let write = async move {
        let mut written = 0u64;
        let mut chunk = vec![0u8; STREAM_CHUNK];
        let mut pace = tokio::time::interval(STREAM_PACE);
        while !*stop.borrow() {
            tokio::select! {
                _ = stop.changed() => continue,
                _ = pace.tick() => {}
            }
            for (offset, byte) in chunk.iter_mut().enumerate() {
                *byte = stream_byte(written + offset as u64);
            }
            writer.write_all(&chunk).await?;
            written += chunk.len() as u64;
        }
        writer.shutdown().await?;
        Ok::<u64, std::io::Error>(written)
    };
    let read = async move {
        let mut total = 0u64;
        let mut buffer = vec![0u8; 64 * 1024];
        let mut last = Instant::now();
        let mut longest_silence = Duration::ZERO;
        loop {
            let n = reader.read(&mut buffer).await?;
            longest_silence = longest_silence.max(last.elapsed());
            last = Instant::now();
            if n == 0 {
                return Ok::<_, std::io::Error>((total, longest_silence));
            }
            for (offset, byte) in buffer[..n].iter().enumerate() {
                let at = total + offset as u64;
                if *byte != stream_byte(at) {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::InvalidData,
                        format!(
                            "byte {at} of the stream came back as {byte}, not {}",
                            stream_byte(at)
                        ),
                    ));
                }
            }
            total += n as u64;
            echoed.store(total, Ordering::SeqCst);
        }
    };
    let (written, read) = tokio::join!(write, read);
    let (echoed, longest_silence) = read?;
    Ok(StreamReport {
        written: written?,
        echoed,
        longest_silence,
    })
}

/// One attempt of the new-connections client: when it started and ended, and its error.
#[derive(Debug)]
struct Attempt {
    started: Instant,
    ended: Instant,
    connect: Duration,
    error: Option<String>,
}

/// Opens connections from `from` to `to`:[`PORT`] one after the other (each reads the
/// listener's line) until `stop` turns true; every attempt with its outcome. `succeeded` counts
/// the successful ones so far.
async fn open_connections(
    from: Ipv4Addr,
    to: Ipv4Addr,
    stop: tokio::sync::watch::Receiver<bool>,
    succeeded: std::sync::Arc<std::sync::atomic::AtomicU64>,
) -> Vec<Attempt> {
    let mut attempts = Vec::new();
    while !*stop.borrow() {
        let started = Instant::now();
        let mut connect = Duration::ZERO;
        let outcome = async {
            let socket = TcpSocket::new_v4()?;
            socket.bind((from, 0).into())?;
            let stream = tokio::time::timeout(CONNECT_WITHIN, socket.connect((to, PORT).into()))
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
            connect = started.elapsed();
            let mut line = String::new();
            tokio::time::timeout(CONNECT_WITHIN, BufReader::new(stream).read_line(&mut line))
                .await
                .map_err(|_| std::io::Error::from(std::io::ErrorKind::TimedOut))??;
            if line.ends_with('\n') {
                Ok(())
            } else {
                Err(std::io::Error::new(
                    std::io::ErrorKind::UnexpectedEof,
                    format!("the listener's line was cut: {line:?}"),
                ))
            }
        }
        .await;
        if outcome.is_ok() {
            succeeded.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        attempts.push(Attempt {
            started,
            ended: Instant::now(),
            connect,
            error: outcome.err().map(|e| e.to_string()),
        });
        // About 200 connections a second: a gap of a few milliseconds cannot fall between two.
        tokio::time::sleep(Duration::from_millis(3)).await;
    }
    attempts
}

/// A counter of `/proc/net/netstat` or `/proc/net/snmp` (`TcpExt: TCPSynRetrans`, `Tcp:
/// RetransSegs`) in a cluster's pods namespace.
async fn tcp_counter(topology: &Topology, side: Side, file: &str, name: &str) -> u64 {
    let text = topology.exec(side, &["cat", file]).await.unwrap();
    let lines: Vec<&str> = text.lines().collect();
    for pair in lines.chunks(2) {
        let [names, values] = pair else { continue };
        let names: Vec<&str> = names.split_whitespace().collect();
        let values: Vec<&str> = values.split_whitespace().collect();
        if let Some(at) = names.iter().position(|n| *n == name) {
            return values[at].parse().unwrap();
        }
    }
    panic!("no counter {name} in {file}: {text}")
}

/// Waits until `counter` exceeds `above`, within [`PROGRESS_WITHIN`]; panics with `what`.
async fn wait_beyond(counter: &std::sync::atomic::AtomicU64, above: u64, what: &str) {
    let started = Instant::now();
    while counter.load(std::sync::atomic::Ordering::SeqCst) <= above {
        assert!(
            started.elapsed() < PROGRESS_WITHIN,
            "{what}: still {} after {PROGRESS_WITHIN:?}",
            counter.load(std::sync::atomic::Ordering::SeqCst)
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Issue 32: "a gateway restarted reprograms exactly the same rule set (the established Ceph
/// connections survive a restart: no rule is ever missing between the old and the new set —
/// test it with traffic flowing)". While one connection streams through both gateways (a west
/// pod without an export to east-one, echoed back) and another west pod (with an export) opens
/// new connections to east-two without pause, east's gateway and then west's are restarted
/// (SIGTERM, the process waited for, started again, its table waited for).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gateway_restarted_under_traffic_reprograms_the_same_table_and_no_connection_fails() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicU64, Ordering};
    let probes = Probes::start().await;
    let topology = &probes.topology;
    // An echo listener on east-one's pod.
    probes
        .in_east
        .run(|| async {
            let listener = TcpListener::bind((pod(61), STREAM_PORT)).await?;
            tokio::task::spawn_local(async move {
                while let Ok((connection, _)) = listener.accept().await {
                    tokio::task::spawn_local(async move {
                        let (mut reader, mut writer) = connection.into_split();
                        let _ = tokio::io::copy(&mut reader, &mut writer).await;
                        let _ = writer.shutdown().await;
                    });
                }
            });
            Ok::<(), std::io::Error>(())
        })
        .await
        .unwrap()
        .unwrap();
    let counters = |side| async move {
        (
            tcp_counter(topology, side, "/proc/net/netstat", "TCPSynRetrans").await,
            tcp_counter(topology, side, "/proc/net/snmp", "RetransSegs").await,
        )
    };
    let (west_before, east_before) = (counters(Side::B).await, counters(Side::A).await);

    let (stop, stopped) = tokio::sync::watch::channel(false);
    let echoed = Arc::new(AtomicU64::new(0));
    let succeeded = Arc::new(AtomicU64::new(0));
    let streaming = {
        let (stopped, echoed) = (stopped.clone(), echoed.clone());
        probes
            .in_west
            .run(move || stream(pod(62), EAST_ONE, stopped, echoed))
    };
    let opening = {
        let (stopped, succeeded) = (stopped.clone(), succeeded.clone());
        probes
            .in_west
            .run(move || open_connections(pod(61), EAST_TWO, stopped, succeeded))
    };
    let restarting = async {
        wait_beyond(&echoed, 1 << 20, "the stream before the restarts").await;
        wait_beyond(&succeeded, 50, "new connections before the restarts").await;
        let mut windows = Vec::new();
        for side in [Side::A, Side::B] {
            let id = topology.cluster(side).cluster_id;
            let began = Instant::now();
            let restart = topology.restart_gateway(side).await.unwrap();
            let ended = Instant::now();
            windows.push((id, began, ended, restart.clone()));
            assert!(
                restart.while_stopped.same_rules_as(&restart.before),
                "{id}'s stopped gateway left its table as it was: {:?}",
                restart.before.differences(&restart.while_stopped)
            );
            assert_ne!(
                restart.after.handle, restart.before.handle,
                "{id}'s new gateway replaced the table"
            );
            assert!(
                restart.after.same_rules_as(&restart.before),
                "{id}'s restarted gateway programmed the same table (only before, only after): {:?}",
                restart.before.differences(&restart.after)
            );
            // Both kinds of traffic carry on after the restart.
            let (bytes, opened) = (
                echoed.load(Ordering::SeqCst),
                succeeded.load(Ordering::SeqCst),
            );
            wait_beyond(&echoed, bytes + (1 << 20), "the stream after the restart").await;
            wait_beyond(&succeeded, opened + 50, "new connections after the restart").await;
        }
        stop.send(true).unwrap();
        windows
    };
    let (streamed, attempts, windows) = tokio::join!(streaming, opening, restarting);
    let streamed = streamed
        .unwrap()
        .expect("the stream carried on: no reset, no lost byte");
    let attempts = attempts.unwrap();
    let (west_after, east_after) = (counters(Side::B).await, counters(Side::A).await);

    assert_eq!(
        streamed.echoed, streamed.written,
        "every byte written came back, in order"
    );
    let began = attempts
        .first()
        .map(|a| a.started)
        .unwrap_or_else(Instant::now);
    let failed: Vec<String> = attempts
        .iter()
        .filter_map(|a| {
            let error = a.error.as_ref()?;
            Some(format!(
                "{:.3?} to {:.3?} after the first: {error}",
                a.started - began,
                a.ended - began
            ))
        })
        .collect();
    assert!(
        failed.is_empty(),
        "{} of {} new connections failed: {failed:?}",
        failed.len(),
        attempts.len()
    );
    let mut during = Vec::new();
    for (id, began, ended, restart) in &windows {
        let overlapping = attempts
            .iter()
            .filter(|a| a.started < *ended && a.ended > *began)
            .count();
        assert!(
            overlapping > 0,
            "new connections were opened while {id}'s gateway restarted"
        );
        during.push(format!(
            "{id}: SIGTERM to exit {:.3?}, start to table replaced {:.3?}, {overlapping} connections opened meanwhile",
            restart.stopped_in, restart.replaced_in
        ));
    }
    // A SYN (or SYN-ACK) lost to a moment without a rule would have been sent again after 1 s.
    let syn_retransmits = (west_after.0 - west_before.0) + (east_after.0 - east_before.0);
    assert_eq!(syn_retransmits, 0, "no SYN or SYN-ACK was sent twice");
    let retransmitted = (west_after.1 - west_before.1) + (east_after.1 - east_before.1);
    let slowest = attempts.iter().map(|a| a.connect).max().unwrap_or_default();
    eprintln!(
        "gateway restart under traffic: {}; stream {} bytes echoed intact, longest silence {:.3?}; {} new connections, 0 failed, slowest connect {:.3?}; TCP segments retransmitted in the pods namespaces {retransmitted}, SYN retransmits 0; tables after = before",
        during.join("; "),
        streamed.echoed,
        streamed.longest_silence,
        attempts.len(),
        slowest,
    );
}

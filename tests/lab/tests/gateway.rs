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

//! The authoritative server: UDP on one blocking thread per worker (one `SO_REUSEPORT` socket
//! each, so the kernel spreads queries), TCP on tokio. Both answer with [`wire::answer`] from
//! the store's current snapshot, and count their answers by response code
//! ([`DnsServer::query_counter`]).

use std::io::{self, ErrorKind, IoSlice, IoSliceMut};
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use nix::errno::Errno;
use nix::sys::socket::{
    ControlMessage, MsgFlags, MultiHeaders, SockaddrStorage, recvmmsg, sendmmsg,
};
use socket2::{Domain, Protocol, Socket, Type};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{Semaphore, watch};

use crate::stats::{LocalCounts, QueryCounter, QueryCounts, WorkerCounter};
use crate::store::ZoneStore;
use crate::wire::{self, Rcode, Transport};

/// How the server listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerConfig {
    /// UDP and TCP address (port 0 picks a free port, the same for both).
    pub listen: SocketAddr,
    /// UDP worker threads, each with its own socket (default: one per CPU).
    pub udp_workers: usize,
    /// TCP connections served at once; more wait in the kernel's backlog.
    pub max_tcp_connections: usize,
    /// A TCP connection idle this long is closed.
    pub tcp_idle_timeout: Duration,
}

impl ServerConfig {
    /// Defaults for `listen`: one UDP worker per CPU, 256 TCP connections, 10 s idle timeout.
    pub fn new(listen: SocketAddr) -> Self {
        Self {
            listen,
            udp_workers: std::thread::available_parallelism().map_or(1, usize::from),
            max_tcp_connections: 256,
            tcp_idle_timeout: Duration::from_secs(10),
        }
    }
}

/// The server could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    /// A socket could not be set up.
    #[error(
        "cannot listen on {protocol} {address}: {source} (is the port in use, or below 1024 without privileges?)"
    )]
    Listen {
        /// `udp` or `tcp`.
        protocol: &'static str,
        /// The address.
        address: SocketAddr,
        /// The cause.
        source: io::Error,
    },
    /// A UDP worker thread could not be started.
    #[error("cannot start a UDP worker thread: {0}")]
    Thread(io::Error),
}

/// How often blocked UDP workers look at the stop flag.
const STOP_POLL: Duration = Duration::from_millis(100);

fn udp_socket(address: SocketAddr) -> io::Result<UdpSocket> {
    let socket = Socket::new(
        Domain::for_address(address),
        Type::DGRAM,
        Some(Protocol::UDP),
    )?;
    socket.set_reuse_port(true)?;
    socket.set_read_timeout(Some(STOP_POLL))?;
    // Room for bursts while the worker is busy.
    let _ = socket.set_recv_buffer_size(4 << 20);
    socket.bind(&address.into())?;
    Ok(socket.into())
}

fn tcp_listener(address: SocketAddr) -> io::Result<std::net::TcpListener> {
    let socket = Socket::new(
        Domain::for_address(address),
        Type::STREAM,
        Some(Protocol::TCP),
    )?;
    socket.set_reuse_address(true)?;
    socket.bind(&address.into())?;
    socket.listen(1024)?;
    socket.set_nonblocking(true)?;
    Ok(socket.into())
}

/// A running server. Stop it with [`shutdown`](Self::shutdown); dropping it stops the UDP
/// workers too (without waiting for them).
#[derive(Debug)]
pub struct DnsServer {
    address: SocketAddr,
    stop: Arc<AtomicBool>,
    workers: Vec<JoinHandle<()>>,
    tcp_stop: watch::Sender<bool>,
    tcp_task: Option<tokio::task::JoinHandle<()>>,
    queries: QueryCounter,
}

impl DnsServer {
    /// Binds UDP and TCP on `config.listen` and starts answering from `store`. Must be called
    /// inside a tokio runtime (TCP runs on it).
    pub fn start(config: &ServerConfig, store: Arc<ZoneStore>) -> Result<Self, ServerError> {
        let listen_err = |protocol, address| {
            move |source| ServerError::Listen {
                protocol,
                address,
                source,
            }
        };
        // With port 0 the UDP port is picked first and TCP must get the same one; another
        // process may hold it for TCP, so pick again a few times.
        let tries = if config.listen.port() == 0 { 16 } else { 1 };
        let mut attempt = 0;
        let (address, sockets, tcp) = loop {
            attempt += 1;
            let first = udp_socket(config.listen).map_err(listen_err("udp", config.listen))?;
            let address = first
                .local_addr()
                .map_err(listen_err("udp", config.listen))?;
            let mut sockets = vec![first];
            for _ in 1..config.udp_workers.max(1) {
                sockets.push(udp_socket(address).map_err(listen_err("udp", address))?);
            }
            match tcp_listener(address) {
                Ok(tcp) => break (address, sockets, tcp),
                Err(e) if attempt < tries && e.kind() == ErrorKind::AddrInUse => continue,
                Err(e) => return Err(listen_err("tcp", address)(e)),
            }
        };
        let tcp = TcpListener::from_std(tcp).map_err(listen_err("tcp", address))?;

        let stop = Arc::new(AtomicBool::new(false));
        let queries = QueryCounter::new(sockets.len());
        let mut workers = Vec::with_capacity(sockets.len());
        for (i, socket) in sockets.into_iter().enumerate() {
            let store = Arc::clone(&store);
            let worker_stop = Arc::clone(&stop);
            let counter = queries.udp_worker(i);
            let worker = std::thread::Builder::new()
                .name(format!("dns-udp-{i}"))
                .spawn(move || udp_loop(&socket, &store, &worker_stop, &counter))
                .map_err(ServerError::Thread);
            match worker {
                Ok(handle) => workers.push(handle),
                Err(e) => {
                    stop.store(true, Ordering::Relaxed);
                    return Err(e);
                }
            }
        }
        let (tcp_stop, stop_rx) = watch::channel(false);
        let tcp_task = tokio::spawn(tcp_accept_loop(
            tcp,
            store,
            stop_rx,
            Arc::new(Semaphore::new(config.max_tcp_connections.max(1))),
            config.tcp_idle_timeout,
            queries.clone(),
        ));
        tracing::info!(%address, workers = workers.len(), "clusterset DNS server listening");
        Ok(Self {
            address,
            stop,
            workers,
            tcp_stop,
            tcp_task: Some(tcp_task),
            queries,
        })
    }

    /// The address UDP and TCP listen on.
    pub fn local_addr(&self) -> SocketAddr {
        self.address
    }

    /// A handle on the server's query counters, to read them (for example at every metrics
    /// scrape) without holding the server. Cheap to clone; reading it sums a few atomics.
    ///
    /// Every query answered is counted once, by transport and the response code of its answer
    /// (an answer the kernel then fails to send is still counted); datagrams that get no answer
    /// (shorter than a DNS header, or themselves responses) are not. UDP workers publish
    /// their counts after each batch of up to 32 queries, so a query shows in the counts once
    /// the batch it came in has been answered.
    pub fn query_counter(&self) -> QueryCounter {
        self.queries.clone()
    }

    /// The queries answered so far: `self.query_counter().snapshot()`.
    pub fn query_counts(&self) -> QueryCounts {
        self.queries.snapshot()
    }

    /// Stops accepting queries and waits for the workers to finish.
    pub async fn shutdown(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.tcp_stop.send(true);
        if let Some(task) = self.tcp_task.take() {
            let _ = task.await;
        }
        let workers = std::mem::take(&mut self.workers);
        let _ = tokio::task::spawn_blocking(move || {
            for worker in workers {
                let _ = worker.join();
            }
        })
        .await;
    }
}

impl Drop for DnsServer {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.tcp_stop.send(true);
    }
}

/// Datagrams received (and answers sent) per system call.
const BATCH: usize = 32;

/// Room per received datagram; longer queries (no real client sends them) arrive cut and get
/// FORMERR.
const MAX_REQUEST: usize = 4096;

/// Receives up to [`BATCH`] queries with one `recvmmsg`, answers them from one snapshot, and
/// sends the answers with one `sendmmsg`: on this machine each system call costs more than
/// answering a query, so batching is what makes the loop fast.
///
/// Answers are counted per batch in a local array and added to the worker's own counters once
/// the batch is answered: a few relaxed atomic adds per batch, no lock, no allocation.
fn udp_loop(socket: &UdpSocket, store: &ZoneStore, stop: &AtomicBool, counter: &WorkerCounter) {
    let fd = socket.as_raw_fd();
    let cell = store.snapshot_cell();
    let mut area = vec![0u8; BATCH * MAX_REQUEST];
    let mut receive_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut send_headers = MultiHeaders::<SockaddrStorage>::preallocate(BATCH, None);
    let mut answers: Vec<Vec<u8>> = (0..BATCH).map(|_| Vec::with_capacity(1232)).collect();
    let mut received: Vec<(usize, Option<SockaddrStorage>)> = Vec::with_capacity(BATCH);
    let mut peers: Vec<Option<SockaddrStorage>> = Vec::with_capacity(BATCH);
    let no_control: [ControlMessage<'_>; 0] = [];
    while !stop.load(Ordering::Relaxed) {
        received.clear();
        {
            let mut buffers: Vec<[IoSliceMut<'_>; 1]> = area
                .chunks_exact_mut(MAX_REQUEST)
                .map(|chunk| [IoSliceMut::new(chunk)])
                .collect();
            // Blocks until one datagram arrives (or the read timeout lets us look at `stop`),
            // then takes whatever else is queued.
            match recvmmsg(
                fd,
                &mut receive_headers,
                buffers.iter_mut(),
                MsgFlags::MSG_WAITFORONE,
                None,
            ) {
                Ok(results) => {
                    received.extend(results.map(|r| (r.bytes, r.address)));
                }
                Err(Errno::EAGAIN | Errno::EINTR) => continue,
                Err(e) => {
                    tracing::warn!(error = %e, "UDP receive failed");
                    continue;
                }
            }
        }
        let snapshot = cell.load();
        peers.clear();
        let mut counts: LocalCounts = [0; Rcode::COUNT];
        for (i, (len, peer)) in received.iter().enumerate() {
            let Some(peer) = peer else { continue };
            let start = i * MAX_REQUEST;
            let Some(datagram) = area.get(start..start + (*len).min(MAX_REQUEST)) else {
                continue;
            };
            let Some(out) = answers.get_mut(peers.len()) else {
                break;
            };
            if let Some(rcode) = wire::answer(&snapshot, datagram, Transport::Udp, out) {
                peers.push(Some(*peer));
                if let Some(count) = counts.get_mut(rcode.index()) {
                    *count += 1;
                }
            }
        }
        if !peers.is_empty() {
            counter.add_all(&counts);
        }
        let mut sent = 0;
        while sent < peers.len() {
            let slices: Vec<[IoSlice<'_>; 1]> = answers
                .get(sent..peers.len())
                .unwrap_or_default()
                .iter()
                .map(|answer| [IoSlice::new(answer)])
                .collect();
            let addresses = peers.get(sent..).unwrap_or_default();
            match sendmmsg(
                fd,
                &mut send_headers,
                &slices,
                addresses,
                no_control,
                MsgFlags::empty(),
            ) {
                Ok(results) => {
                    let count = results.count();
                    if count == 0 {
                        break;
                    }
                    sent += count;
                }
                Err(Errno::EINTR) => {}
                Err(e) => {
                    // A full socket buffer or an unreachable peer: drop this answer, go on.
                    tracing::debug!(error = %e, "UDP send failed");
                    sent += 1;
                }
            }
        }
    }
}

async fn tcp_accept_loop(
    listener: TcpListener,
    store: Arc<ZoneStore>,
    mut stop: watch::Receiver<bool>,
    slots: Arc<Semaphore>,
    idle: Duration,
    queries: QueryCounter,
) {
    let mut connections: usize = 0;
    loop {
        let permit = tokio::select! {
            _ = stop.changed() => return,
            permit = Arc::clone(&slots).acquire_owned() => match permit {
                Ok(permit) => permit,
                Err(_) => return,
            },
        };
        let accepted = tokio::select! {
            _ = stop.changed() => return,
            accepted = listener.accept() => accepted,
        };
        match accepted {
            Ok((stream, peer)) => {
                let store = Arc::clone(&store);
                let stop = stop.clone();
                let counter = queries.tcp_connection(connections);
                connections = connections.wrapping_add(1);
                tokio::spawn(async move {
                    if let Err(e) = tcp_connection(stream, &store, stop, idle, &counter).await {
                        tracing::debug!(error = %e, %peer, "TCP connection ended");
                    }
                    drop(permit);
                });
            }
            Err(e) => tracing::warn!(error = %e, "TCP accept failed"),
        }
    }
}

async fn tcp_connection(
    mut stream: TcpStream,
    store: &ZoneStore,
    mut stop: watch::Receiver<bool>,
    idle: Duration,
    counter: &WorkerCounter,
) -> io::Result<()> {
    let mut request = vec![0u8; 65535];
    let mut response = Vec::with_capacity(4096);
    loop {
        let mut prefix = [0u8; 2];
        tokio::select! {
            _ = stop.changed() => return Ok(()),
            read = tokio::time::timeout(idle, stream.read_exact(&mut prefix)) => match read {
                Ok(Ok(_)) => {}
                Ok(Err(e)) if e.kind() == ErrorKind::UnexpectedEof => return Ok(()),
                Ok(Err(e)) => return Err(e),
                Err(_) => return Ok(()), // idle
            },
        }
        let len = usize::from(u16::from_be_bytes(prefix));
        let Some(buffer) = request.get_mut(..len) else {
            return Ok(());
        };
        match tokio::time::timeout(idle, stream.read_exact(buffer)).await {
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(e),
            Err(_) => return Ok(()),
        }
        let snapshot = store.snapshot();
        let Some(datagram) = request.get(..len) else {
            return Ok(());
        };
        let Some(rcode) = wire::answer(&snapshot, datagram, Transport::Tcp, &mut response) else {
            return Ok(());
        };
        counter.add(rcode);
        let out_len = u16::try_from(response.len()).unwrap_or(u16::MAX);
        stream.write_all(&out_len.to_be_bytes()).await?;
        stream.write_all(&response).await?;
    }
}

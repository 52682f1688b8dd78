//! Open-loop DNS latency harness: sends queries over UDP at a fixed rate, whatever the server
//! does, and reports latency percentiles of the answers.
//!
//! `dnsperf` 2.10 (Debian's) reports per-query latencies only with `-v`, which prints a line per
//! query; at tens of thousands of queries per second that printing competes with the sending on
//! the client's core and shows up as tail latency of the server. This harness keeps every
//! latency in memory and sorts them at the end, so the client spends its time sending and
//! receiving. It is the same tool for every server measured, so the comparison stays fair.
//!
//! ```text
//! cargo run --release -p clusterset-dns --example dns_latency -- \
//!     --server 127.0.0.1:15353 --queries queries.txt --rate 50000 --duration 10
//! ```
//!
//! The query file has one `NAME TYPE` per line (dnsperf's format; types A, AAAA, SRV, TXT, PTR,
//! SOA, NS). Output: one line of `key=value` pairs (sent, answered, lost, rate, p50, p90, p99,
//! p99.9, max in milliseconds).
#![allow(clippy::print_stdout, clippy::print_stderr)] // a command-line tool

use std::io::ErrorKind;
use std::net::{SocketAddr, UdpSocket};
use std::process::ExitCode;
use std::str::FromStr;
use std::time::{Duration, Instant};

use hickory_proto::op::{Message, MessageType, OpCode, Query};
use hickory_proto::rr::{Name, RecordType};

struct Options {
    server: SocketAddr,
    queries: String,
    rate: u64,
    duration: Duration,
    clients: usize,
    timeout: Duration,
}

fn parse_options() -> Result<Options, String> {
    let mut server = None;
    let mut queries = None;
    let mut rate = None;
    let mut duration = Duration::from_secs(10);
    let mut clients = 16usize;
    let mut timeout = Duration::from_secs(2);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--server" => {
                let v = value()?;
                server = Some(v.parse().map_err(|e| format!("--server {v}: {e}"))?);
            }
            "--queries" => queries = Some(value()?),
            "--rate" => {
                let v = value()?;
                rate = Some(v.parse().map_err(|e| format!("--rate {v}: {e}"))?);
            }
            "--duration" => {
                let v = value()?;
                let secs: f64 = v.parse().map_err(|e| format!("--duration {v}: {e}"))?;
                duration = Duration::try_from_secs_f64(secs)
                    .map_err(|e| format!("--duration {v}: {e}"))?;
            }
            "--clients" => {
                let v = value()?;
                clients = v.parse().map_err(|e| format!("--clients {v}: {e}"))?;
            }
            "--timeout-ms" => {
                let v = value()?;
                timeout =
                    Duration::from_millis(v.parse().map_err(|e| format!("--timeout-ms {v}: {e}"))?);
            }
            other => return Err(format!("unknown flag {other}")),
        }
    }
    let usage = "usage: dns_latency --server ADDR --queries FILE --rate QPS [--duration SECS] \
                 [--clients N] [--timeout-ms MS]";
    Ok(Options {
        server: server.ok_or(usage)?,
        queries: queries.ok_or(usage)?,
        rate: rate.filter(|r| *r > 0).ok_or(usage)?,
        duration,
        clients: clients.max(1),
        timeout,
    })
}

/// Encodes every query of the file once; the ID (first two bytes) is patched per send.
fn encoded_queries(path: &str) -> Result<Vec<Vec<u8>>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{path}: {e}"))?;
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let mut fields = line.split_whitespace();
        let (Some(name), Some(kind)) = (fields.next(), fields.next()) else {
            continue;
        };
        let name = Name::from_str(name).map_err(|e| format!("{path}:{}: {e}", n + 1))?;
        let kind = RecordType::from_str(kind).map_err(|e| format!("{path}:{}: {e}", n + 1))?;
        let mut message = Message::new(0, MessageType::Query, OpCode::Query);
        message.add_query(Query::query(name, kind));
        let bytes = message
            .to_vec()
            .map_err(|e| format!("{path}:{}: {e}", n + 1))?;
        out.push(bytes);
    }
    if out.is_empty() {
        return Err(format!(
            "{path}: no queries (expected lines of `NAME TYPE`)"
        ));
    }
    Ok(out)
}

struct Client {
    socket: UdpSocket,
    next_id: u16,
    /// Send time (nanoseconds since the start, plus one; 0 = no query outstanding) per ID.
    outstanding: Vec<u64>,
}

fn percentile(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    // Nearest rank.
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    let index = rank.clamp(1, sorted.len()) - 1;
    sorted.get(index).map_or(f64::NAN, |ns| *ns as f64 / 1e6)
}

fn run(options: &Options) -> Result<(), String> {
    let queries = encoded_queries(&options.queries)?;
    let mut clients = Vec::with_capacity(options.clients);
    for _ in 0..options.clients {
        let socket = UdpSocket::bind("127.0.0.1:0").map_err(|e| format!("bind: {e}"))?;
        socket
            .connect(options.server)
            .map_err(|e| format!("connect {}: {e}", options.server))?;
        socket
            .set_nonblocking(true)
            .map_err(|e| format!("nonblocking: {e}"))?;
        clients.push(Client {
            socket,
            next_id: 0,
            outstanding: vec![0; 1 << 16],
        });
    }
    let total = u64::try_from(options.duration.as_nanos())
        .unwrap_or(u64::MAX)
        .saturating_mul(options.rate)
        / 1_000_000_000;
    let mut latencies: Vec<u64> = Vec::with_capacity(usize::try_from(total).unwrap_or(0));
    let mut buffer = [0u8; 4096];
    let mut sent = 0u64;
    let mut send_errors = 0u64;
    let start = Instant::now();
    let mut last_send = start;
    loop {
        let now_ns = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
        // Open loop: everything due by now goes out, answered or not.
        let due =
            (u128::from(now_ns) * u128::from(options.rate) / 1_000_000_000).min(u128::from(total));
        while u128::from(sent) < due {
            let index = usize::try_from(sent).unwrap_or(0);
            let Some(client) = clients.get_mut(index % options.clients) else {
                break;
            };
            let Some(template) = queries.get(index % queries.len()) else {
                break;
            };
            let id = client.next_id;
            client.next_id = client.next_id.wrapping_add(1);
            let mut query = template.clone();
            if let Some(head) = query.get_mut(0..2) {
                head.copy_from_slice(&id.to_be_bytes());
            }
            let sent_at = u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
            match client.socket.send(&query) {
                Ok(_) => {
                    if let Some(slot) = client.outstanding.get_mut(usize::from(id)) {
                        *slot = sent_at + 1;
                    }
                }
                Err(_) => send_errors += 1,
            }
            sent += 1;
            last_send = Instant::now();
        }
        for client in &mut clients {
            loop {
                match client.socket.recv(&mut buffer) {
                    Ok(len) if len >= 2 => {
                        let received_at =
                            u64::try_from(start.elapsed().as_nanos()).unwrap_or(u64::MAX);
                        let id = u16::from_be_bytes([buffer[0], buffer[1]]); // len >= 2
                        if let Some(slot) = client.outstanding.get_mut(usize::from(id))
                            && *slot != 0
                        {
                            latencies.push(received_at.saturating_sub(*slot - 1));
                            *slot = 0;
                        }
                    }
                    Ok(_) => {}
                    Err(e) if e.kind() == ErrorKind::WouldBlock => break,
                    Err(_) => break,
                }
            }
        }
        let all_sent = sent >= total;
        let all_answered = latencies.len() as u64 + send_errors >= sent;
        if all_sent && (all_answered || last_send.elapsed() > options.timeout) {
            break;
        }
    }
    let sending = last_send.duration_since(start);
    latencies.sort_unstable();
    let answered = latencies.len() as u64;
    println!(
        "sent={sent} answered={answered} lost={} rate={:.0} p50_ms={:.3} p90_ms={:.3} \
         p99_ms={:.3} p99.9_ms={:.3} max_ms={:.3}",
        sent - answered,
        sent as f64 / sending.as_secs_f64().max(1e-9),
        percentile(&latencies, 50.0),
        percentile(&latencies, 90.0),
        percentile(&latencies, 99.0),
        percentile(&latencies, 99.9),
        latencies.last().map_or(f64::NAN, |ns| *ns as f64 / 1e6),
    );
    Ok(())
}

fn main() -> ExitCode {
    match parse_options().and_then(|options| run(&options)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("dns_latency: {e}");
            ExitCode::from(2)
        }
    }
}

//! The server the dnsperf benchmark runs (`benches/dnsperf.sh`): a synthetic zone of
//! `--services N` services on `--listen ADDR` with `--workers W` UDP threads.
//!
//! `--writer-nice N` runs every thread but the UDP workers (the churn writer on the main thread,
//! the store's reaper; the store's flush threads inherit the writer's) at nice N, as a
//! deployment that gives the query threads priority would.
//!
//! `--print-zone` prints the zone as a master file (for the peer servers) and exits.
//! `--churn-ms MS` changes every service's clusterset IP in one batch every MS milliseconds
//! while serving, and prints each batch's apply time, so the benchmark can show that updates do
//! not stall queries.
//!
//! ```text
//! cargo run --release -p clusterset-dns --example bench_server -- --services 1000 --listen 127.0.0.1:15353
//! ```
#![allow(clippy::print_stdout)] // a benchmark tool reports on stdout

#[path = "../benches/common/synthetic.rs"]
mod synthetic;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::{Duration, Instant};

use clusterset_dns::{DnsServer, ServerConfig, ZoneChange, ZoneConfig, ZoneObject, ZoneStore};
use synthetic::{service_import, zone_objects};

/// The allocator of our binaries (`clusterset-agent`, `mcsctl`).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

struct Options {
    services: usize,
    listen: SocketAddr,
    workers: usize,
    print_zone: bool,
    churn: Option<Duration>,
    writer_nice: Option<i32>,
}

fn options() -> Result<Options, String> {
    let mut o = Options {
        services: 1000,
        listen: SocketAddr::from(([127, 0, 0, 1], 15353)),
        workers: 1,
        print_zone: false,
        churn: None,
        writer_nice: None,
    };
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{flag} needs a value"));
        match flag.as_str() {
            "--services" => {
                o.services = value()?.parse().map_err(|e| format!("--services: {e}"))?
            }
            "--listen" => o.listen = value()?.parse().map_err(|e| format!("--listen: {e}"))?,
            "--workers" => o.workers = value()?.parse().map_err(|e| format!("--workers: {e}"))?,
            "--churn-ms" => {
                let ms: u64 = value()?.parse().map_err(|e| format!("--churn-ms: {e}"))?;
                o.churn = Some(Duration::from_millis(ms));
            }
            "--writer-nice" => {
                o.writer_nice = Some(
                    value()?
                        .parse()
                        .map_err(|e| format!("--writer-nice: {e}"))?,
                )
            }
            "--print-zone" => o.print_zone = true,
            other => return Err(format!("unknown option {other}")),
        }
    }
    Ok(o)
}

fn main() -> ExitCode {
    let o = match options() {
        Ok(o) => o,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    let config = ZoneConfig {
        nameserver_addresses: vec![o.listen.ip()],
        ..ZoneConfig::default()
    };
    let store = Arc::new(ZoneStore::new(config));
    let started = Instant::now();
    if let Err(errors) = store.replace_all(zone_objects(o.services)) {
        eprintln!("error: synthetic zone rejected: {errors:?}");
        return ExitCode::FAILURE;
    }
    let loaded_in = started.elapsed();
    if o.print_zone {
        print!("{}", store.zone_file());
        return ExitCode::SUCCESS;
    }
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::FAILURE;
        }
    };
    runtime.block_on(async move {
        let mut server_config = ServerConfig::new(o.listen);
        server_config.udp_workers = o.workers;
        let server = match DnsServer::start(&server_config, Arc::clone(&store)) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: {e}");
                return ExitCode::FAILURE;
            }
        };
        if let Some(nice) = o.writer_nice
            && let Err(e) = renice_all_but_udp_workers(nice)
        {
            eprintln!("error: --writer-nice: {e}");
            return ExitCode::FAILURE;
        }
        println!(
            "serving {} services ({} names, loaded in {loaded_in:?}) on {}",
            o.services,
            store.snapshot().name_count(),
            server.local_addr()
        );
        let mut generation = 0u8;
        let mut ticker = o.churn.map(tokio::time::interval);
        loop {
            let tick = async {
                match ticker.as_mut() {
                    Some(t) => {
                        t.tick().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            };
            tokio::select! {
                () = tick => {
                    generation = generation.wrapping_add(1);
                    let changes: Vec<ZoneChange> = (0..o.services)
                        .map(|i| ZoneChange::Upsert(ZoneObject::ServiceImport(Box::new(service_import(i, generation)))))
                        .collect();
                    let start = Instant::now();
                    let report = store.apply(changes);
                    println!(
                        "churn: {} services updated ({} names recomputed) in {:?}",
                        report.applied,
                        report.names_recomputed,
                        start.elapsed()
                    );
                }
                _ = tokio::signal::ctrl_c() => break,
            }
        }
        server.shutdown().await;
        ExitCode::SUCCESS
    })
}

/// Sets nice `nice` on every thread of this process except the UDP workers (`dns-udp-*`), with
/// util-linux `renice` (per-thread on Linux), so that the zone writer and the reaper never
/// delay a query thread that shares their core.
fn renice_all_but_udp_workers(nice: i32) -> Result<(), String> {
    let tasks =
        std::fs::read_dir("/proc/self/task").map_err(|e| format!("/proc/self/task: {e}"))?;
    for task in tasks {
        let task = task.map_err(|e| format!("/proc/self/task: {e}"))?;
        let comm = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if comm.starts_with("dns-udp") {
            continue;
        }
        let tid = task.file_name().to_string_lossy().into_owned();
        let status = std::process::Command::new("renice")
            .args(["-n", &nice.to_string(), "-p", &tid])
            .stdout(std::process::Stdio::null())
            .status()
            .map_err(|e| format!("renice: {e}"))?;
        if !status.success() {
            // A thread that ended since the listing (the store's flush threads come and go).
            if !task.path().exists() {
                continue;
            }
            return Err(format!("renice -n {nice} -p {tid} failed ({status})"));
        }
        println!("thread {tid} ({}) at nice {nice}", comm.trim());
    }
    Ok(())
}

//! `mcsctl dns serve`: the clusterset DNS server on a zone loaded from a YAML file.

use std::io::Write as _;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Args, Subcommand};
use clusterset_daemon::ErrorChain;
use clusterset_dns::{DnsServer, ServerConfig, ZoneConfig, ZoneStore};
use mcs_types::names::Zone;

/// Options of `mcsctl dns`.
#[derive(Debug, Args)]
pub struct DnsArgs {
    #[command(subcommand)]
    command: DnsCommand,
}

#[derive(Debug, Subcommand)]
enum DnsCommand {
    /// Serve the clusterset zone built from ServiceImports and EndpointSlices in a file.
    ///
    /// The file holds YAML documents (separated by `---`) of ServiceImport
    /// (multicluster.x-k8s.io/v1beta1 or v1alpha1) and EndpointSlice (discovery.k8s.io/v1, with
    /// the multicluster.kubernetes.io/service-name and source-cluster labels), or a `kind: List`
    /// of them (as `kubectl get serviceimports,endpointslices -A -o yaml` prints).
    ///
    /// SIGHUP reloads the file. A file with a bad object is rejected whole: the problems are
    /// printed (object, field, fix) and the last good zone keeps serving.
    #[command(after_help = "\
Examples:
  mcsctl dns serve --listen 127.0.0.1:5353 --from-file zone.yaml
  dig @127.0.0.1 -p 5353 web.shop.svc.clusterset.local
  kill -HUP <pid>    # reload zone.yaml
  mcsctl dns serve --from-file zone.yaml --print-zone")]
    Serve(ServeArgs),
}

/// Options of `mcsctl dns serve`.
#[derive(Debug, Args)]
pub struct ServeArgs {
    /// UDP and TCP address to answer on (port 0: any free port, printed at start).
    #[arg(long, default_value = "127.0.0.1:5353")]
    listen: SocketAddr,
    /// The YAML file of ServiceImports and EndpointSlices.
    #[arg(long, value_name = "FILE")]
    from_file: PathBuf,
    /// TTL of the records, in seconds (dns-version keeps 28800).
    #[arg(long, default_value_t = clusterset_dns::records::DEFAULT_TTL)]
    ttl: u32,
    /// The clusterset zone.
    #[arg(long, default_value = mcs_types::names::DEFAULT_ZONE)]
    zone: Zone,
    /// Also answer <clusterid>.<svc>.<ns>.svc.<zone> with that cluster's addresses (Submariner
    /// Lighthouse compatibility, the form Rook queries). The MCS spec says this name must not
    /// exist, so it is off by default.
    #[arg(long)]
    lighthouse: bool,
    /// UDP worker threads (default: one per CPU).
    #[arg(long)]
    udp_workers: Option<usize>,
    /// Print the zone in master-file format and exit instead of serving.
    #[arg(long)]
    print_zone: bool,
}

/// Runs `mcsctl dns ...`.
pub fn run(args: &DnsArgs) -> anyhow::Result<ExitCode> {
    match &args.command {
        DnsCommand::Serve(serve) => run_serve(serve),
    }
}

/// Loads the file into the store; on any problem the store is left as it was, and each
/// problem is printed (file, object, field, fix).
fn load_into(store: &ZoneStore, path: &Path) -> Result<usize, usize> {
    store.replace_from_file(path).map_err(|problems| {
        for problem in &problems {
            eprintln!("error: {}", ErrorChain(problem));
        }
        problems.len()
    })
}

fn run_serve(args: &ServeArgs) -> anyhow::Result<ExitCode> {
    let filter = tracing_subscriber::EnvFilter::try_from_env("MCSCTL_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn"));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
    let mut nameservers = Vec::new();
    if !args.listen.ip().is_unspecified() {
        nameservers.push(args.listen.ip());
    }
    let config = ZoneConfig {
        zone: args.zone.clone(),
        ttl: args.ttl,
        lighthouse_cluster_names: args.lighthouse,
        nameserver_addresses: nameservers,
    };
    let store = Arc::new(ZoneStore::new(config));
    let loaded = match load_into(&store, &args.from_file) {
        Ok(count) => count,
        Err(problems) => anyhow::bail!(
            "{problems} problem(s) in {}: fix them and start again",
            args.from_file.display()
        ),
    };
    if args.print_zone {
        return crate::output::print(&store.zone_file());
    }
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .context("starting the async runtime")?;
    runtime.block_on(serve(args, store, loaded))
}

async fn serve(args: &ServeArgs, store: Arc<ZoneStore>, loaded: usize) -> anyhow::Result<ExitCode> {
    use tokio::signal::unix::{SignalKind, signal};
    let mut server_config = ServerConfig::new(args.listen);
    if let Some(workers) = args.udp_workers {
        server_config.udp_workers = workers;
    }
    let mut hangup = signal(SignalKind::hangup()).context("installing the SIGHUP handler")?;
    let mut terminate =
        signal(SignalKind::terminate()).context("installing the SIGTERM handler")?;
    let server = DnsServer::start(&server_config, Arc::clone(&store))?;
    println!(
        "serving {} on {} (UDP and TCP) from {} objects in {}",
        args.zone,
        server.local_addr(),
        loaded,
        args.from_file.display()
    );
    loop {
        tokio::select! {
            _ = hangup.recv() => match load_into(&store, &args.from_file) {
                // Not println!: a reader of the first line that went away (`| head -1`)
                // must not take the server down with a broken pipe.
                Ok(count) => {
                    let _ = writeln!(
                        std::io::stdout().lock(),
                        "reloaded {count} objects from {}",
                        args.from_file.display()
                    );
                }
                Err(problems) => {
                    let _ = writeln!(
                        std::io::stderr().lock(),
                        "reload rejected ({problems} problem(s)): still serving the previous zone"
                    );
                }
            },
            _ = terminate.recv() => break,
            _ = tokio::signal::ctrl_c() => break,
        }
    }
    server.shutdown().await;
    Ok(ExitCode::SUCCESS)
}

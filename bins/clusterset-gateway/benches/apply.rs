//! The gateway's table applied to the real kernel: 10,000 exports (every tenth with three pods,
//! 8 egress IPs, 8 peers: the state of `crates/gateway-rules/benches/rules.rs`), in network
//! namespaces this bench creates (`csgw-bench-<pid>-<n>`) and deletes.
//!
//! `sudo cargo bench -p clusterset-gateway --bench apply` (options after `--`: `--exports N`,
//! default 10,000; `--runs N`, default 10). Root is required, and `nft` and `ip`: without them it
//! fails at once and says so. It reports, over the runs, the minimum, median and maximum of:
//!
//! - the table's transaction (`nft -f -`, as `clusterset-gateway` runs it) into a namespace
//!   that has no table yet, and replacing the same table;
//! - one export's change applied as a delta (`RuleSet::delta_to`), and back;
//! - what `clusterset-gateway apply` does after reading the state: the whole table and the
//!   routes (the peer gateways checked, 8 routes replaced), and what `run` does for one
//!   export's change (the delta and the routes);
//!
//! and the table's rules, chains and elements as the kernel lists them (`nft -j`), checked
//! against what `gateway-rules` computes. Each time is wall time, and beside it the CPU time
//! (user and system) of the programs it ran (`nft`, `ip`): on a busy machine the first grows with
//! the load, the second much less.

use std::net::Ipv4Addr;
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use gateway_rules::{Backend, Export, GatewayState, Peer, RuleSet};

// The code `clusterset-gateway` applies with (`nft_transaction`, `apply`), compiled in here.
#[allow(dead_code)] // the bench uses part of it
#[path = "../src/apply.rs"]
mod apply;

/// Every namespace of this bench starts with this.
const PREFIX: &str = "csgw-bench-";

fn main() -> Result<()> {
    let options = Options::parse()?;
    require_root_nft_and_ip()?;
    remove_leftovers()?;

    let state = bench_state(options.exports);
    let rules = RuleSet::desired(&state).context("the bench's state")?;
    let mut changed = state.clone();
    let one = changed
        .exports
        .get_mut(options.exports as usize * 4_321 / 10_000)
        .context("the state has no export to change")?;
    one.backend = Backend::Endpoints(vec![Ipv4Addr::new(10, 128, 200, 1)]);
    let changed_rules = RuleSet::desired(&changed).context("the changed state")?;
    let script = rules.to_nft_script();
    let (forward, back) = match (
        rules.delta_to(&changed_rules),
        changed_rules.delta_to(&rules),
    ) {
        (Some(forward), Some(back)) => (forward.to_nft_script(), back.to_nft_script()),
        _ => bail!("a change of one export's endpoints gave no delta"),
    };
    println!(
        "state: {} exports (every tenth with three pods), {} egress IPs, {} peers; the script: {} lines, {} bytes; the delta: {} lines",
        state.exports.len(),
        state.egress_ips.len(),
        state.peers.len(),
        script.lines().count(),
        script.len(),
        forward.lines().count()
    );

    let mut times = Times::default();
    let mut counts = None;
    for run in 0..options.runs {
        let netns = Netns::create(run)?;
        let step = netns.inside(|| -> Result<Option<Counts>> {
            times.first.push(timed(|| apply::nft_transaction(&script))?);
            times
                .replace
                .push(timed(|| apply::nft_transaction(&script))?);
            times
                .delta
                .push(timed(|| apply::nft_transaction(&forward))?);
            times
                .delta_back
                .push(timed(|| apply::nft_transaction(&back))?);
            times.apply_full.push(timed(|| apply::apply(&rules, None))?);
            times
                .apply_delta
                .push(timed(|| apply::apply(&changed_rules, Some(&rules)))?);
            // Back to the state's table, to count it.
            apply::apply(&rules, Some(&changed_rules))?;
            Ok(if run == 0 {
                Some(Counts::listed()?)
            } else {
                None
            })
        })?;
        if let Some(step) = step {
            counts = Some(step);
        }
    }

    let counts = counts.context("no run")?;
    println!(
        "table listed by the kernel: {} rules, {} chains, {} set and map elements",
        counts.rules, counts.chains, counts.elements
    );
    if (counts.rules, counts.elements) != (rules.rule_count(), rules.element_count()) {
        bail!(
            "the kernel lists {} rules and {} elements; gateway-rules computes {} and {}",
            counts.rules,
            counts.elements,
            rules.rule_count(),
            rules.element_count()
        );
    }
    println!(
        "{} runs; wall time min / median / max, median CPU time of nft and ip (every run's wall time, in order)",
        options.runs
    );
    for (what, samples) in [
        ("full table, first apply (nft -f)", &times.first),
        ("full table, replacing it (nft -f)", &times.replace),
        ("one export's delta (nft -f)", &times.delta),
        ("the same delta back (nft -f)", &times.delta_back),
        ("apply: full table + routes", &times.apply_full),
        ("run: one export's delta + routes", &times.apply_delta),
    ] {
        println!("{what:<36} {}", summary(samples));
    }
    Ok(())
}

/// The command line: `--exports N`, `--runs N`; `--bench` (given by `cargo bench`) ignored.
struct Options {
    exports: u32,
    runs: usize,
}

impl Options {
    fn parse() -> Result<Options> {
        let mut options = Options {
            exports: 10_000,
            runs: 10,
        };
        let mut args = std::env::args().skip(1);
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--exports" => {
                    options.exports = args
                        .next()
                        .context("--exports needs a number")?
                        .parse()
                        .context("--exports")?;
                }
                "--runs" => {
                    options.runs = args
                        .next()
                        .context("--runs needs a number")?
                        .parse()
                        .context("--runs")?;
                }
                "--bench" => {}
                other => bail!("unknown argument {other}; the options are --exports N, --runs N"),
            }
        }
        if options.exports < 100 || options.runs == 0 {
            bail!("--exports must be at least 100 and --runs at least 1");
        }
        Ok(options)
    }
}

/// The state of `crates/gateway-rules/benches/rules.rs`: `exports` exports, one pod each and
/// every tenth three, 8 egress IPs, 8 peers whose gateways are on 172.31.255.0/24.
fn bench_state(exports: u32) -> GatewayState {
    let net = |text: &str| text.parse().unwrap_or_default();
    GatewayState {
        cluster_id: "east".into(),
        global_cidr: net("242.1.0.0/16"),
        pod_cidr: net("10.128.0.0/10"),
        service_cidr: net("10.96.0.0/16"),
        egress_ips: (0..8)
            .map(|i| Ipv4Addr::new(242, 1, 255, 254 - i))
            .collect(),
        exports: (1..=exports)
            .map(|i| {
                let pod =
                    |n: u32| Ipv4Addr::from(u32::from(Ipv4Addr::new(10, 128, 0, 0)) + i * 4 + n);
                Export {
                    namespace: "rook-ceph".into(),
                    name: format!("svc-{i}"),
                    global_ip: Ipv4Addr::from(u32::from(Ipv4Addr::new(242, 1, 0, 0)) + i),
                    backend: Backend::Endpoints(if i % 10 == 0 {
                        vec![pod(0), pod(1), pod(2)]
                    } else {
                        vec![pod(0)]
                    }),
                }
            })
            .collect(),
        peers: (2..=9)
            .map(|p| Peer {
                cluster_id: format!("peer-{p}"),
                global_cidr: net(&format!("242.{p}.0.0/16")),
                gateway: Ipv4Addr::new(172, 31, 255, p),
            })
            .collect(),
    }
}

/// Fails unless this runs as root with `nft` and `ip` installed.
fn require_root_nft_and_ip() -> Result<()> {
    let status =
        std::fs::read_to_string("/proc/self/status").context("reading /proc/self/status")?;
    let euid = status
        .lines()
        .find_map(|line| line.strip_prefix("Uid:"))
        .and_then(|ids| ids.split_whitespace().nth(1))
        .unwrap_or("unknown");
    if euid != "0" {
        bail!(
            "this bench creates network namespaces and nftables tables and must run as root (effective uid {euid}): sudo cargo bench -p clusterset-gateway --bench apply"
        );
    }
    for (program, version) in [("nft", "--version"), ("ip", "-V")] {
        let found = Command::new(program)
            .arg(version)
            .output()
            .is_ok_and(|output| output.status.success());
        if !found {
            bail!("`{program}` is missing (this bench needs nftables' `nft` and iproute2's `ip`)");
        }
    }
    Ok(())
}

/// Runs a program to completion; its stdout, or an error with its stderr.
fn run(argv: &[&str]) -> Result<String> {
    let (program, args) = argv.split_first().context("an empty command")?;
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running {program}"))?;
    if !output.status.success() {
        bail!(
            "`{}` failed ({}): {}",
            argv.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Deletes the namespaces an interrupted run of this bench left.
fn remove_leftovers() -> Result<()> {
    for line in run(&["ip", "netns", "list"])?.lines() {
        if let Some(name) = line.split_whitespace().next()
            && name.starts_with(PREFIX)
        {
            run(&["ip", "netns", "delete", name])?;
        }
    }
    Ok(())
}

/// A network namespace of this bench, deleted when dropped: loopback up, and a link
/// 172.31.255.1/24 on which the peer gateways are directly reachable (one end of a veth pair
/// whose other end stays in the namespace).
struct Netns {
    name: String,
}

impl Netns {
    fn create(run_index: usize) -> Result<Netns> {
        let name = format!("{PREFIX}{}-{run_index}", std::process::id());
        run(&["ip", "netns", "add", &name])?;
        let netns = Netns { name };
        for line in [
            "link set lo up",
            "link add tun0 type veth peer name tun1",
            "addr add 172.31.255.1/24 dev tun0",
            "link set tun1 up",
            "link set tun0 up",
        ] {
            let mut argv = vec!["ip", "-n", &netns.name];
            argv.extend(line.split_whitespace());
            run(&argv)?;
        }
        Ok(netns)
    }

    /// Runs `work` on a thread inside the namespace (`setns(2)` changes the calling thread
    /// only; the programs it starts are in the namespace too).
    fn inside<T: Send>(&self, work: impl FnOnce() -> Result<T> + Send) -> Result<T> {
        let path = format!("/run/netns/{}", self.name);
        std::thread::scope(|scope| {
            scope
                .spawn(|| {
                    let file =
                        std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
                    nix::sched::setns(&file, nix::sched::CloneFlags::CLONE_NEWNET)
                        .with_context(|| format!("setns({path})"))?;
                    work()
                })
                .join()
                .map_err(|_| anyhow::anyhow!("the bench's thread in {path} panicked"))?
        })
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip")
            .args(["netns", "delete", &self.name])
            .output();
    }
}

/// One measurement: wall time, and the CPU time of the programs run meanwhile.
#[derive(Clone, Copy)]
struct Sample {
    wall: Duration,
    cpu: Duration,
}

/// The user and system time of this process's children that have ended.
fn children_cpu() -> Result<Duration> {
    let usage = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_CHILDREN)
        .context("getrusage")?;
    let time = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec().unsigned_abs())
            + Duration::from_micros(t.tv_usec().unsigned_abs())
    };
    Ok(time(usage.user_time()) + time(usage.system_time()))
}

/// How long `work` took; its error if it failed.
fn timed<T>(work: impl FnOnce() -> Result<T>) -> Result<Sample> {
    let cpu = children_cpu()?;
    let start = Instant::now();
    work()?;
    let wall = start.elapsed();
    Ok(Sample {
        wall,
        cpu: children_cpu()?.saturating_sub(cpu),
    })
}

#[derive(Default)]
struct Times {
    first: Vec<Sample>,
    replace: Vec<Sample>,
    delta: Vec<Sample>,
    delta_back: Vec<Sample>,
    apply_full: Vec<Sample>,
    apply_delta: Vec<Sample>,
}

/// `min / median / max ms of wall time (every sample) | median CPU time`.
fn summary(samples: &[Sample]) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let sorted = |pick: fn(&Sample) -> Duration| {
        let mut values: Vec<f64> = samples.iter().map(|s| ms(pick(s))).collect();
        values.sort_by(f64::total_cmp);
        values
    };
    let (wall, cpu) = (sorted(|s| s.wall), sorted(|s| s.cpu));
    let at = |values: &[f64], i: usize| values.get(i).copied().unwrap_or(f64::NAN);
    let every: Vec<String> = samples
        .iter()
        .map(|s| format!("{:.0}", ms(s.wall)))
        .collect();
    format!(
        "{:6.1} / {:6.1} / {:6.1} ms  CPU {:6.1} ms  ({})",
        at(&wall, 0),
        at(&wall, wall.len() / 2),
        at(&wall, wall.len().saturating_sub(1)),
        at(&cpu, cpu.len() / 2),
        every.join(", ")
    )
}

/// What the kernel lists of our table (`nft -j list table ip clusterset_gw`), in the calling
/// thread's namespace.
struct Counts {
    rules: usize,
    chains: usize,
    elements: usize,
}

impl Counts {
    fn listed() -> Result<Counts> {
        let text = run(&["nft", "-j", "list", "table", "ip", gateway_rules::TABLE])?;
        let json: serde_json::Value = serde_json::from_str(&text).context("reading nft -j")?;
        let items = json["nftables"]
            .as_array()
            .context("no `nftables` array in nft -j")?;
        let kind = |name: &str| items.iter().filter(|item| item.get(name).is_some()).count();
        let elements = items
            .iter()
            .filter_map(|item| item.get("map").or_else(|| item.get("set")))
            .filter_map(|set| set["elem"].as_array())
            .map(Vec::len)
            .sum();
        Ok(Counts {
            rules: kind("rule"),
            chains: kind("chain"),
            elements,
        })
    }
}

//! `clusterset-gateway` fed by real API servers: each member's gateway runs in a network
//! namespace of the test's own (its "gateway node"; the two joined by a veth pair, the
//! underlay), reaches its API servers through a port forwarded into that namespace, reads the
//! agents' export records and the peers' gateway records from the hub and the Services'
//! EndpointSlices from its cluster, and programs its table and routes there. Needs root (network
//! namespaces); fails, never skips, without it.

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use k8s_openapi::api::core::v1::Pod;
use kube::Api;
use kube::api::DeleteParams;
use mcs_controller::broker::{BrokerRecord, GatewayRecord};
use serde_json::{Value, json};

use crate::scenarios::{export, service};
use crate::{AGENT_NAMESPACE, Cluster, World, records_namespace, wait_for};

const LONG: Duration = Duration::from_secs(60);

/// Runs `ip` with `args`; its stdout, or an error with its stderr.
fn ip(args: &[&str]) -> anyhow::Result<String> {
    command("ip", args)
}

fn command(program: &str, args: &[&str]) -> anyhow::Result<String> {
    let output = std::process::Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("cannot run {program} (is it installed?)"))?;
    if !output.status.success() {
        bail!(
            "`{program} {}` failed: {}",
            args.join(" "),
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// A network namespace of the test, deleted when dropped.
#[derive(Debug)]
pub(crate) struct Netns {
    pub(crate) name: String,
}

impl Netns {
    pub(crate) fn create(name: &str) -> anyhow::Result<Self> {
        // A namespace left by a killed run of the same name.
        let _ = ip(&["netns", "del", name]);
        ip(&["netns", "add", name]).context(
            "creating a network namespace needs root: run the e2e suite as root (CI does)",
        )?;
        let netns = Self {
            name: name.to_owned(),
        };
        netns.exec("ip", &["link", "set", "lo", "up"])?;
        Ok(netns)
    }

    pub(crate) fn exec(&self, program: &str, args: &[&str]) -> anyhow::Result<String> {
        let mut full = vec!["netns", "exec", &self.name, program];
        full.extend_from_slice(args);
        ip(&full)
    }

    /// Forwards `127.0.0.1:<port>` inside the namespace to `to` (outside it); the port.
    /// The listener's thread enters the namespace (setns) before it binds, so its socket lives
    /// there; each accepted connection is carried by threads of this (host) namespace.
    fn forward(&self, to: SocketAddr) -> anyhow::Result<u16> {
        let path = format!("/run/netns/{}", self.name);
        let (port_tx, port_rx) = std::sync::mpsc::channel::<anyhow::Result<u16>>();
        let (conn_tx, conn_rx) = std::sync::mpsc::channel::<TcpStream>();
        std::thread::spawn(move || {
            let listener = (|| -> anyhow::Result<TcpListener> {
                let file = std::fs::File::open(&path).with_context(|| format!("opening {path}"))?;
                nix::sched::setns(file, nix::sched::CloneFlags::CLONE_NEWNET)
                    .context("setns into the gateway's namespace")?;
                Ok(TcpListener::bind("127.0.0.1:0")?)
            })();
            let listener = match listener {
                Ok(listener) => listener,
                Err(error) => {
                    let _ = port_tx.send(Err(error));
                    return;
                }
            };
            let _ = port_tx.send(listener.local_addr().map(|a| a.port()).map_err(Into::into));
            for stream in listener.incoming().flatten() {
                if conn_tx.send(stream).is_err() {
                    return;
                }
            }
        });
        std::thread::spawn(move || {
            for inside in conn_rx {
                let Ok(outside) = TcpStream::connect(to) else {
                    continue;
                };
                let pipe = |mut from: TcpStream, mut into: TcpStream| {
                    std::thread::spawn(move || {
                        let mut buffer = [0u8; 16 * 1024];
                        while let Ok(n) = from.read(&mut buffer) {
                            if n == 0 || into.write_all(&buffer[..n]).is_err() {
                                break;
                            }
                        }
                        let _ = into.shutdown(std::net::Shutdown::Write);
                    });
                };
                if let (Ok(inside2), Ok(outside2)) = (inside.try_clone(), outside.try_clone()) {
                    pipe(inside, outside2);
                    pipe(outside, inside2);
                }
            }
        });
        port_rx
            .recv_timeout(Duration::from_secs(10))
            .context("the forwarder did not start")?
    }

    /// `kubeconfig` (JSON, as the harness writes them) with its server reached through a port
    /// forwarded into this namespace, written next to it.
    pub(crate) fn forwarded_kubeconfig(&self, kubeconfig: &Path) -> anyhow::Result<PathBuf> {
        let mut config: Value = serde_saphyr::from_str(&std::fs::read_to_string(kubeconfig)?)?;
        let server = config["clusters"][0]["cluster"]["server"]
            .as_str()
            .context("a kubeconfig without a server")?
            .to_owned();
        let address: SocketAddr = server
            .trim_start_matches("https://")
            .trim_end_matches('/')
            .parse()
            .with_context(|| format!("the server {server} is not https://<ip>:<port>"))?;
        let port = self.forward(address)?;
        config["clusters"][0]["cluster"]["server"] = json!(format!("https://127.0.0.1:{port}"));
        let path = kubeconfig.with_extension(format!("{}.kubeconfig", self.name));
        std::fs::write(&path, serde_json::to_vec_pretty(&config)?)?;
        Ok(path)
    }

    /// The gateway's table map `name` as (key, value) pairs.
    pub(crate) fn map(&self, name: &str) -> anyhow::Result<Vec<(String, String)>> {
        let text = self.exec("nft", &["-j", "list", "map", "ip", "clusterset_gw", name])?;
        let json: Value = serde_json::from_str(&text)?;
        let mut pairs = Vec::new();
        for item in json["nftables"].as_array().into_iter().flatten() {
            for element in item["map"]["elem"].as_array().into_iter().flatten() {
                if let (Some(key), Some(value)) = (element[0].as_str(), element[1].as_str()) {
                    pairs.push((key.to_owned(), value.to_owned()));
                }
            }
        }
        Ok(pairs)
    }

    /// Our routes: (destination, next hop).
    pub(crate) fn routes(&self) -> anyhow::Result<Vec<(String, String)>> {
        let text = self.exec("ip", &["-j", "route", "show", "proto", "147"])?;
        let json: Value = serde_json::from_str(if text.trim().is_empty() { "[]" } else { &text })?;
        Ok(json
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                (
                    r["dst"].as_str().unwrap_or_default().to_owned(),
                    r["gateway"].as_str().unwrap_or_default().to_owned(),
                )
            })
            .collect())
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// One member's `clusterset-gateway run` in its namespace.
pub(crate) struct Gateway {
    pub(crate) netns: Netns,
    child: tokio::process::Child,
    log: PathBuf,
}

impl Gateway {
    /// Runs `binary` with `args` and `env` (and nothing else of this process's environment but
    /// `PATH`) in `netns`, logging to `log`.
    pub(crate) fn spawn(
        netns: Netns,
        binary: &Path,
        args: &[String],
        env: &[(String, String)],
        log: PathBuf,
    ) -> anyhow::Result<Self> {
        let file = std::fs::File::create(&log)?;
        let child = tokio::process::Command::new("ip")
            .args(["netns", "exec", &netns.name])
            .arg(binary)
            .args(args)
            .env_clear()
            .env("PATH", std::env::var("PATH").unwrap_or_default())
            .env("RUST_LOG", "info")
            .env("NO_COLOR", "1")
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdout(Stdio::from(file.try_clone()?))
            .stderr(Stdio::from(file))
            .kill_on_drop(true)
            .spawn()
            .context("starting clusterset-gateway")?;
        Ok(Self { netns, child, log })
    }

    pub(crate) fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// `nft list table ip clusterset_gw` in the gateway's network namespace.
    pub(crate) fn table(&self) -> anyhow::Result<String> {
        self.netns
            .exec("nft", &["list", "table", "ip", "clusterset_gw"])
    }

    /// SIGTERM, and the exit.
    pub(crate) async fn terminate(&mut self) -> anyhow::Result<()> {
        if let Some(pid) = self.child.id() {
            command("kill", &["-TERM", &pid.to_string()])?;
        }
        tokio::time::timeout(Duration::from_secs(10), self.child.wait())
            .await
            .context("the gateway did not exit within 10 s of SIGTERM")??;
        Ok(())
    }
}

/// Starts `member`'s gateway (agent `n`'s CIDRs: global 242.n.0.0/16, its egress IP the top of
/// it) in `netns`, with the agent's credentials (the member's ServiceAccount
/// `clusterset-agent`, the hub's `agent-<id>`), both reached through ports forwarded into the
/// namespace.
async fn start_gateway(
    world: &World,
    member: &Cluster,
    n: u8,
    netns: Netns,
    gateway_ip: Ipv4Addr,
) -> anyhow::Result<Gateway> {
    let local = member
        .service_account_kubeconfig(AGENT_NAMESPACE, "clusterset-agent", world.dir.path())
        .await?;
    let local = netns.forwarded_kubeconfig(&local)?;
    let agent = world
        .agents
        .iter()
        .find(|a| a.cluster_id == member.id)
        .context("no agent of the member")?;
    let broker = netns.forwarded_kubeconfig(&agent.broker_kubeconfig)?;
    let binary = world.settings.binary("clusterset-gateway")?;
    let log = world.logs.join(format!("gateway-{}.log", member.id));
    let args: Vec<String> = [
        "run".to_owned(),
        format!("--kubeconfig={}", local.display()),
        format!("--broker-kubeconfig={}", broker.display()),
        format!("--cluster-id={}", member.id),
        format!("--global-cidr=242.{n}.0.0/16"),
        // kwok's pod addresses in the suite's clusters, and kind's.
        "--pod-cidr=10.244.0.0/16".to_owned(),
        "--service-cidr=10.96.0.0/12".to_owned(),
        format!("--egress-ip=242.{n}.255.254"),
        format!("--gateway-ip={gateway_ip}"),
        "--http-listen=127.0.0.1:0".to_owned(),
    ]
    .into();
    Gateway::spawn(netns, &binary, &args, &[], log)
}

/// Two gateway namespaces of the test joined by a veth pair (the underlay), `east` at
/// 172.31.255.1/30 and `west` at .2; their names end with `tag`.
pub(crate) fn gateway_nodes(tag: &str) -> anyhow::Result<((Netns, Ipv4Addr), (Netns, Ipv4Addr))> {
    let pid = std::process::id();
    let (east_ns, west_ns) = (
        Netns::create(&format!("cse2e-{tag}e-{pid}"))?,
        Netns::create(&format!("cse2e-{tag}w-{pid}"))?,
    );
    let (east_if, west_if) = (format!("{tag}e{pid}"), format!("{tag}w{pid}"));
    ip(&[
        "link",
        "add",
        &east_if,
        "netns",
        &east_ns.name,
        "type",
        "veth",
        "peer",
        "name",
        &west_if,
        "netns",
        &west_ns.name,
    ])?;
    let (east_ip, west_ip): (Ipv4Addr, Ipv4Addr) =
        ("172.31.255.1".parse()?, "172.31.255.2".parse()?);
    for (netns, link, address) in [(&east_ns, &east_if, east_ip), (&west_ns, &west_if, west_ip)] {
        netns.exec(
            "ip",
            &["addr", "add", &format!("{address}/30"), "dev", link],
        )?;
        netns.exec("ip", &["link", "set", link, "up"])?;
    }
    Ok(((east_ns, east_ip), (west_ns, west_ip)))
}

/// Both gateways' records are on the hub (east's at 172.31.255.1 for 242.1.0.0/16, west's at
/// .2 for 242.2.0.0/16) and each routes the other's global CIDR to it.
pub(crate) async fn gateways_meet(
    hub: &Cluster,
    east_gw: &Gateway,
    west_gw: &Gateway,
) -> anyhow::Result<()> {
    let records: Api<GatewayRecord> = Api::all(hub.client.clone());
    wait_for("both gateway records on the hub", LONG, || {
        let records = records.clone();
        async move {
            let list = records.list(&Default::default()).await?;
            let mut published: Vec<String> = list
                .items
                .iter()
                .filter_map(|r| r.checked_spec(crate::BROKER_NAMESPACE).ok())
                .map(|s| format!("{} {} {}", s.cluster_id, s.global_cidr, s.gateway_ip))
                .collect();
            published.sort();
            Ok((published
                == [
                    "east 242.1.0.0/16 172.31.255.1".to_owned(),
                    "west 242.2.0.0/16 172.31.255.2".to_owned(),
                ])
            .then_some(()))
        }
    })
    .await
    .map_err(|e| {
        e.context(format!(
            "east's gateway log:\n{}\nwest's gateway log:\n{}",
            east_gw.log(),
            west_gw.log()
        ))
    })?;
    for (gateway, want) in [
        (east_gw, ("242.2.0.0/16", "172.31.255.2")),
        (west_gw, ("242.1.0.0/16", "172.31.255.1")),
    ] {
        wait_for("the route to the peer's global CIDR", LONG, || async {
            let routes = gateway.netns.routes().unwrap_or_default();
            Ok((routes == [(want.0.to_owned(), want.1.to_owned())]).then_some(()))
        })
        .await
        .map_err(|e| e.context(format!("gateway log:\n{}", gateway.log())))?;
    }
    Ok(())
}

/// The global IP east's agent published for its export of `web` in `namespace`.
pub(crate) async fn global_ip(east: &Cluster, namespace: &str) -> anyhow::Result<String> {
    let hub_records: Api<BrokerRecord> =
        Api::namespaced(east.client.clone(), &records_namespace("east")?);
    let name = format!("east.{namespace}.web");
    Ok(
        wait_for("east's record of web with its global IP", LONG, || {
            let (hub_records, name) = (hub_records.clone(), name.clone());
            async move {
                Ok(hub_records
                    .get_opt(&name)
                    .await?
                    .and_then(|r| r.checked_record().ok()?.global_ips.first().copied()))
            }
        })
        .await?
        .to_string(),
    )
}

/// West's import of `web` has its derived Service `clusterset-web`, accepted by the real API
/// server: a cluster IP allocated, the clusterset IP as its `externalIPs` (what kube-proxy
/// serves), and the imported EndpointSlices labelled as its own.
async fn derived_service_accepted(west: &Cluster, namespace: &str) -> anyhow::Result<()> {
    let (ips, _) = crate::scenarios::imported(west, namespace, "web", &["east"]).await?;
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(west.client.clone(), namespace);
    let name = mcs_controller::derived_service_name("web");
    let spec = wait_for("west's derived Service", LONG, || {
        let (services, name) = (services.clone(), name.clone());
        async move { Ok(services.get_opt(&name).await?.and_then(|s| s.spec)) }
    })
    .await?;
    anyhow::ensure!(
        spec.external_ips.as_ref() == Some(&ips),
        "the derived Service's externalIPs {:?} are not the import's IPs {ips:?}",
        spec.external_ips
    );
    anyhow::ensure!(
        spec.cluster_ip
            .as_deref()
            .is_some_and(|ip| ip.starts_with("10.96.")),
        "no cluster IP allocated: {:?}",
        spec.cluster_ip
    );
    let slices: Api<k8s_openapi::api::discovery::v1::EndpointSlice> =
        Api::namespaced(west.client.clone(), namespace);
    let labelled = slices
        .list(
            &kube::api::ListParams::default().labels(&format!("kubernetes.io/service-name={name}")),
        )
        .await?;
    anyhow::ensure!(
        labelled.items.len() == 1,
        "{} EndpointSlices of {name}, not the one imported from east",
        labelled.items.len()
    );
    println!(
        "west's derived Service {name}: cluster IP {}, externalIPs {ips:?} (the import's), 1 imported EndpointSlice",
        spec.cluster_ip.unwrap_or_default()
    );
    Ok(())
}

/// The pod's IP once it has one.
pub(crate) async fn pod_ip(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
) -> anyhow::Result<String> {
    let pods: Api<Pod> = Api::namespaced(cluster.client.clone(), namespace);
    wait_for(&format!("pod {name} to get an IP"), LONG, || {
        let pods = pods.clone();
        async move {
            Ok(pods
                .get_opt(name)
                .await?
                .and_then(|p| p.status?.pod_ip)
                .filter(|ip| !ip.is_empty()))
        }
    })
    .await
}

fn pod(namespace: &str, name: &str) -> Value {
    json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "labels": {"app": "web"}},
        "spec": {"containers": [{"name": "web", "image": "registry.k8s.io/pause:3.9"}]},
    })
}

/// Waits until `gateway`'s map `global_to_backend` maps `global` as `want` says (to `Some`
/// pod, or not at all); how long it took.
pub(crate) async fn dnat_becomes(
    gateway: &Gateway,
    global: &str,
    want: Option<&str>,
) -> anyhow::Result<Duration> {
    let started = Instant::now();
    wait_for(
        &format!("the gateway to map {global} to {want:?}"),
        LONG,
        || async {
            let map = gateway.netns.map("global_to_backend").unwrap_or_default();
            let now = map
                .iter()
                .find(|(k, _)| k == global)
                .map(|(_, v)| v.as_str());
            Ok((now == want).then_some(()))
        },
    )
    .await
    .map_err(|e| e.context(format!("gateway log:\n{}", gateway.log())))?;
    Ok(started.elapsed())
}

/// Stops the hub's API server until east's gateway has logged a failed watch, checks that its
/// table is unchanged and it still runs, and starts the API server again.
async fn hub_outage_keeps_the_rules(world: &World, east_gw: &mut Gateway) -> anyhow::Result<()> {
    const FAILED: &str = "watch failed; the rules stay as they are";
    world.faults.ensure_possible()?;
    let failures = |gw: &Gateway| gw.log().lines().filter(|l| l.contains(FAILED)).count();
    let before = east_gw.table()?;
    let failed_before = failures(east_gw);
    let stopped = Instant::now();
    world.faults.hub_stop().await?;
    wait_for("east's gateway to log a failed watch", LONG, || async {
        Ok((failures(east_gw) > failed_before).then_some(()))
    })
    .await?;
    let seen = stopped.elapsed();
    if let Some(status) = east_gw.child.try_wait()? {
        bail!("east's gateway exited ({status}) while the hub was down");
    }
    assert_eq!(east_gw.table()?, before, "the table while the hub is down");
    world.faults.hub_start().await?;
    println!(
        "hub stopped: east's gateway logged a failed watch {seen:.1?} later and kept its table; hub back after {:.1?}",
        stopped.elapsed()
    );
    Ok(())
}

/// The scenario: both members' gateways follow the clusterset from the API servers.
pub async fn gateway_follows_the_api_servers(world: &mut World) -> anyhow::Result<()> {
    let namespace = world.namespace("e2e-gateway").await?;
    let ((east_ns, east_ip), (west_ns, west_ip)) = gateway_nodes("gw")?;
    let (east, west) = (&world.east, &world.west);
    let mut east_gw = start_gateway(world, east, 1, east_ns, east_ip).await?;
    let mut west_gw = start_gateway(world, west, 2, west_ns, west_ip).await?;

    gateways_meet(east, &east_gw, &west_gw).await?;
    println!("gateway records published and routed both ways");

    // An export of east: its global IP (allocated by the agent) is DNATed to its pod.
    east.apply(&service(&namespace, 80)).await?;
    east.apply(&pod(&namespace, "web-0")).await?;
    east.apply(&export(&namespace)).await?;
    let first = pod_ip(east, &namespace, "web-0").await?;
    let global = global_ip(east, &namespace).await?;
    derived_service_accepted(west, &namespace).await?;
    let took = dnat_becomes(&east_gw, &global, Some(&first)).await?;
    println!(
        "east's gateway maps {global} to web-0 ({first}), {took:.1?} after the record was read"
    );
    assert!(
        west_gw.netns.map("global_to_backend")?.is_empty(),
        "west's gateway has no export of its own"
    );

    // The pod is replaced (its successor started first, so it has another IP): the DNAT
    // follows the EndpointSlice.
    east.apply(&pod(&namespace, "web-1")).await?;
    let second = pod_ip(east, &namespace, "web-1").await?;
    assert_ne!(first, second, "two pods with one IP");
    let pods: Api<Pod> = Api::namespaced(east.client.clone(), &namespace);
    pods.delete("web-0", &DeleteParams::default().grace_period(0))
        .await?;
    wait_for("web-0 to be gone", LONG, || {
        let pods = pods.clone();
        async move { Ok(pods.get_opt("web-0").await?.is_none().then_some(())) }
    })
    .await?;
    let followed = dnat_becomes(&east_gw, &global, Some(&second)).await?;
    println!(
        "web-1 ({second}) replaced web-0: the DNAT followed {followed:.2?} after web-0 was gone from the API"
    );

    // A peer whose gateway east cannot reach: left out, named in the log; the rest stays.
    let north_namespace = records_namespace("north")?;
    east.apply(&json!({
        "apiVersion": "v1", "kind": "Namespace", "metadata": {"name": north_namespace},
    }))
    .await?;
    let north = GatewayRecord::new(
        &mcs_controller::broker::GatewaySpec {
            cluster_id: mcs_types::ClusterId::new("north")?,
            global_cidr: "242.3.0.0/16".parse()?,
            gateway_ip: "198.51.100.7".parse()?,
        },
        crate::BROKER_NAMESPACE,
    );
    east.apply(&serde_json::to_value(&north)?).await?;
    wait_for(
        "east's gateway to name the unreachable peer",
        LONG,
        || async {
            Ok(east_gw
                .log()
                .lines()
                .any(|l| l.contains("peer left out") && l.contains("198.51.100.7"))
                .then_some(()))
        },
    )
    .await?;
    assert_eq!(
        east_gw.netns.routes()?,
        [("242.2.0.0/16".to_owned(), "172.31.255.2".to_owned())],
        "the unreachable peer gets no route, west keeps its own"
    );
    assert_eq!(
        east_gw.netns.map("global_to_backend")?,
        [(global.clone(), second.clone())]
    );
    let namespaces: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(east.client.clone());
    namespaces
        .delete(&north_namespace, &DeleteParams::default())
        .await?;

    // The hub's API server (east's, also its member cluster's) goes away: east's gateway sees
    // its watches fail and keeps its rules as they are; once the API server is back it follows
    // again (the unexport below is seen only after the outage).
    hub_outage_keeps_the_rules(world, &mut east_gw).await?;

    // Unexported: the record is withdrawn and the DNAT goes.
    let exports: Api<mcs_types::v1beta1::ServiceExport> =
        Api::namespaced(east.client.clone(), &namespace);
    exports.delete("web", &DeleteParams::default()).await?;
    let gone = dnat_becomes(&east_gw, &global, None).await?;
    println!("unexported: the DNAT of {global} went {gone:.2?} after the delete");
    let services: Api<k8s_openapi::api::core::v1::Service> =
        Api::namespaced(west.client.clone(), &namespace);
    wait_for("west's derived Service to go with the import", LONG, || {
        let services = services.clone();
        async move {
            Ok(services
                .get_opt(&mcs_controller::derived_service_name("web"))
                .await?
                .is_none()
                .then_some(()))
        }
    })
    .await?;

    // SIGTERM leaves the rules in place (established connections survive a restart).
    let before = east_gw.table()?;
    east_gw.terminate().await?;
    west_gw.terminate().await?;
    let after = east_gw.table()?;
    assert_eq!(before, after, "the table after SIGTERM");
    // The records stay too (the next start publishes the same); the test removes them.
    for cluster in ["east", "west"] {
        let api: Api<GatewayRecord> =
            Api::namespaced(east.client.clone(), &records_namespace(cluster)?);
        api.delete(cluster, &DeleteParams::default()).await?;
    }
    Ok(())
}

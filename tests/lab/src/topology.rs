//! The lab's network: per cluster a "pods" namespace and a gateway namespace, the two gateways
//! joined by a veth pair (the tunnel), and on each gateway nftables NAT that maps the cluster's
//! global IPs 1:1 to pod IPs, Globalnet style.
//!
//! ```text
//!  csl-a (pods 10.244.0.0/24)      csl-gw-a              csl-gw-b        csl-b (pods 10.244.0.0/24)
//!  eth0 10.244.0.2 + pod IPs ---- pods 10.244.0.1       pods 10.244.0.1 ---- eth0 10.244.0.2 + pod IPs
//!  default via 10.244.0.1         tun0 172.31.255.1 ---- tun0 172.31.255.2   default via 10.244.0.1
//!                                 242.2/16 via .2        242.1/16 via .1
//! ```
//!
//! NAT on each gateway (table `ip csl_nat`): prerouting DNATs a global IP to its pod IP (map
//! `g2p`); postrouting SNATs a pod IP to its global IP (map `p2g`) or, for pods without one, to
//! the cluster's egress IP. Both rules also apply to traffic that comes back out the pods link
//! (hairpin), so pods of one cluster reach each other through their global IPs.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::sync::Mutex;
use std::time::Duration;

use ipnet::Ipv4Net;

use crate::LabError;

/// Every namespace of the lab starts with this; leftovers with it are removed at start.
const PREFIX: &str = "csl-";
/// The nftables table on each gateway.
const NAT_TABLE: &str = "csl_nat";
/// How long one `ip`/`nft` command may take.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(20);

/// One of the two clusters.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Side {
    /// Cluster A ("east"): the cluster whose mons move to global IPs.
    A,
    /// Cluster B ("west"): the peer, with the same pod CIDR.
    B,
}

/// The addresses of one cluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterNet {
    /// The cluster id (MCS `source-cluster`, Rook's `multiClusterService.clusterID`).
    pub cluster_id: &'static str,
    /// The namespace of the cluster's pods.
    pub netns: String,
    /// The namespace of its gateway.
    pub gateway: String,
    /// The pod CIDR (the same for both clusters).
    pub pod_cidr: Ipv4Net,
    /// The global CIDR (Globalnet's 242.0.0.0/8 split per cluster).
    pub global_cidr: Ipv4Net,
    /// The "node" address of the pods namespace: its primary address, the source of
    /// connections that do not bind one.
    pub node_ip: Ipv4Addr,
    /// The gateway's address on the pods link (the pods' default route).
    pub gateway_ip: Ipv4Addr,
    /// The gateway's address on the tunnel.
    pub tunnel_ip: Ipv4Addr,
    /// The global IP that pods without their own global IP leave with (Globalnet's cluster
    /// egress IP).
    pub egress_ip: Ipv4Addr,
}

/// The lab's network, torn down when dropped.
#[derive(Debug)]
pub struct Topology {
    a: ClusterNet,
    b: ClusterNet,
    /// Global -> pod mappings per side, to restore the NAT after [`Topology::remove_nat`].
    maps: Mutex<BTreeMap<Side, BTreeMap<Ipv4Addr, Ipv4Addr>>>,
}

fn net(cidr: &str) -> Ipv4Net {
    // The lab's own constants, checked by the topology test.
    cidr.parse().unwrap_or_else(|_| Ipv4Net::default())
}

impl Topology {
    /// The lab's addresses, without creating anything.
    pub fn plan() -> (ClusterNet, ClusterNet) {
        let cluster = |side: &str, id, global: &str, egress, tunnel| ClusterNet {
            cluster_id: id,
            netns: format!("{PREFIX}{side}"),
            gateway: format!("{PREFIX}gw-{side}"),
            pod_cidr: net("10.244.0.0/24"),
            global_cidr: net(global),
            node_ip: Ipv4Addr::new(10, 244, 0, 2),
            gateway_ip: Ipv4Addr::new(10, 244, 0, 1),
            tunnel_ip: tunnel,
            egress_ip: egress,
        };
        (
            cluster(
                "a",
                "east",
                "242.1.0.0/16",
                Ipv4Addr::new(242, 1, 255, 254),
                Ipv4Addr::new(172, 31, 255, 1),
            ),
            cluster(
                "b",
                "west",
                "242.2.0.0/16",
                Ipv4Addr::new(242, 2, 255, 254),
                Ipv4Addr::new(172, 31, 255, 2),
            ),
        )
    }

    /// Creates the network, after removing whatever a previous (crashed) run left. On failure
    /// everything created so far is removed.
    pub async fn create() -> Result<Topology, LabError> {
        remove_leftovers();
        let (a, b) = Topology::plan();
        let topology = Topology {
            a,
            b,
            maps: Mutex::new(BTreeMap::new()),
        };
        // On error, `topology` is dropped here and tears down what exists.
        topology.build().await?;
        Ok(topology)
    }

    async fn build(&self) -> Result<(), LabError> {
        for c in [&self.a, &self.b] {
            for ns in [&c.netns, &c.gateway] {
                run(None, &["ip", "netns", "add", ns]).await?;
                run(Some(ns), &["ip", "link", "set", "lo", "up"]).await?;
            }
            run(
                Some(&c.netns),
                &[
                    "ip", "link", "add", "eth0", "type", "veth", "peer", "name", "pods", "netns",
                    &c.gateway,
                ],
            )
            .await?;
            let node = format!("{}/{}", c.node_ip, c.pod_cidr.prefix_len());
            run(Some(&c.netns), &["ip", "addr", "add", &node, "dev", "eth0"]).await?;
            run(Some(&c.netns), &["ip", "link", "set", "eth0", "up"]).await?;
            let gw = format!("{}/{}", c.gateway_ip, c.pod_cidr.prefix_len());
            run(Some(&c.gateway), &["ip", "addr", "add", &gw, "dev", "pods"]).await?;
            run(Some(&c.gateway), &["ip", "link", "set", "pods", "up"]).await?;
            let via = c.gateway_ip.to_string();
            run(
                Some(&c.netns),
                &["ip", "route", "add", "default", "via", &via],
            )
            .await?;
            for sysctl in [
                "net.ipv4.ip_forward=1",
                "net.ipv4.conf.all.send_redirects=0",
                "net.ipv4.conf.default.send_redirects=0",
                "net.ipv4.conf.pods.send_redirects=0",
                "net.ipv4.conf.all.rp_filter=0",
                "net.ipv4.conf.pods.rp_filter=0",
            ] {
                run(Some(&c.gateway), &["sysctl", "-q", "-w", sysctl]).await?;
            }
        }
        // The tunnel between the gateways.
        run(
            Some(&self.a.gateway),
            &[
                "ip",
                "link",
                "add",
                "tun0",
                "type",
                "veth",
                "peer",
                "name",
                "tun0",
                "netns",
                &self.b.gateway,
            ],
        )
        .await?;
        for (c, peer) in [(&self.a, &self.b), (&self.b, &self.a)] {
            let addr = format!("{}/30", c.tunnel_ip);
            run(
                Some(&c.gateway),
                &["ip", "addr", "add", &addr, "dev", "tun0"],
            )
            .await?;
            run(Some(&c.gateway), &["ip", "link", "set", "tun0", "up"]).await?;
            let route = peer.global_cidr.to_string();
            let via = peer.tunnel_ip.to_string();
            run(
                Some(&c.gateway),
                &["ip", "route", "add", &route, "via", &via],
            )
            .await?;
        }
        for side in [Side::A, Side::B] {
            self.restore_nat(side).await?;
        }
        Ok(())
    }

    /// The addresses of one cluster.
    pub fn cluster(&self, side: Side) -> &ClusterNet {
        match side {
            Side::A => &self.a,
            Side::B => &self.b,
        }
    }

    /// Gives the cluster's pods namespace another pod IP (idempotent).
    pub async fn add_pod_ip(&self, side: Side, pod: Ipv4Addr) -> Result<(), LabError> {
        let c = self.cluster(side);
        let addr = format!("{pod}/{}", c.pod_cidr.prefix_len());
        let shown = run(Some(&c.netns), &["ip", "-o", "addr", "show", "dev", "eth0"]).await?;
        if shown.contains(&format!(" {addr} ")) {
            return Ok(());
        }
        run(Some(&c.netns), &["ip", "addr", "add", &addr, "dev", "eth0"]).await?;
        Ok(())
    }

    /// Maps `global` 1:1 to `pod` on the cluster's gateway (DNAT in, SNAT out, hairpin).
    pub async fn map_global(
        &self,
        side: Side,
        global: Ipv4Addr,
        pod: Ipv4Addr,
    ) -> Result<(), LabError> {
        let c = self.cluster(side);
        run(
            Some(&c.gateway),
            &[
                "nft",
                &format!(
                    "add element ip {NAT_TABLE} g2p {{ {global} : {pod} }}; add element ip {NAT_TABLE} p2g {{ {pod} : {global} }}"
                ),
            ],
        )
        .await?;
        self.lock().entry(side).or_default().insert(global, pod);
        Ok(())
    }

    /// Removes the mapping of `global` (no-op when there is none or the NAT is removed).
    pub async fn unmap_global(&self, side: Side, global: Ipv4Addr) -> Result<(), LabError> {
        let Some(pod) = self.lock().entry(side).or_default().remove(&global) else {
            return Ok(());
        };
        if !self.nat_present(side).await {
            return Ok(());
        }
        let c = self.cluster(side);
        run(
            Some(&c.gateway),
            &[
                "nft",
                &format!(
                    "delete element ip {NAT_TABLE} g2p {{ {global} }}; delete element ip {NAT_TABLE} p2g {{ {pod} }}"
                ),
            ],
        )
        .await?;
        Ok(())
    }

    /// The global -> pod mappings of a side.
    pub fn mappings(&self, side: Side) -> BTreeMap<Ipv4Addr, Ipv4Addr> {
        self.lock().get(&side).cloned().unwrap_or_default()
    }

    /// Whether the cluster's gateway has its NAT table.
    pub async fn nat_present(&self, side: Side) -> bool {
        let c = self.cluster(side);
        run(Some(&c.gateway), &["nft", "list", "table", "ip", NAT_TABLE])
            .await
            .is_ok()
    }

    /// Removes the gateway's NAT (the whole table), as a gateway failure would. Connections
    /// already translated keep their conntrack entries; new ones to global IPs fail.
    pub async fn remove_nat(&self, side: Side) -> Result<(), LabError> {
        let c = self.cluster(side);
        run(
            Some(&c.gateway),
            &["nft", "delete", "table", "ip", NAT_TABLE],
        )
        .await?;
        Ok(())
    }

    /// (Re)creates the gateway's NAT with every mapping made so far (idempotent).
    pub async fn restore_nat(&self, side: Side) -> Result<(), LabError> {
        let c = self.cluster(side);
        let elements = |pairs: Vec<(Ipv4Addr, Ipv4Addr)>| {
            if pairs.is_empty() {
                String::new()
            } else {
                let list: Vec<String> = pairs.iter().map(|(k, v)| format!("{k} : {v}")).collect();
                format!("elements = {{ {} }}", list.join(", "))
            }
        };
        let maps = self.mappings(side);
        let g2p = elements(maps.iter().map(|(g, p)| (*g, *p)).collect());
        let p2g = elements(maps.iter().map(|(g, p)| (*p, *g)).collect());
        let ruleset = format!(
            "table ip {NAT_TABLE} {{
  map g2p {{ type ipv4_addr : ipv4_addr; {g2p} }}
  map p2g {{ type ipv4_addr : ipv4_addr; {p2g} }}
  chain prerouting {{
    type nat hook prerouting priority dstnat; policy accept;
    ip daddr {global} dnat ip to ip daddr map @g2p
  }}
  chain postrouting {{
    type nat hook postrouting priority srcnat; policy accept;
    ip saddr {pods} snat ip to ip saddr map @p2g
    ip saddr {pods} snat ip to {egress}
  }}
}}",
            global = c.global_cidr,
            pods = c.pod_cidr,
            egress = c.egress_ip,
        );
        if self.nat_present(side).await {
            run(
                Some(&c.gateway),
                &["nft", "delete", "table", "ip", NAT_TABLE],
            )
            .await?;
        }
        run(Some(&c.gateway), &["nft", &ruleset]).await?;
        Ok(())
    }

    /// Runs a program inside the pods namespace of a cluster; its stdout.
    pub async fn exec(&self, side: Side, argv: &[&str]) -> Result<String, LabError> {
        run(Some(&self.cluster(side).netns), argv).await
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, BTreeMap<Side, BTreeMap<Ipv4Addr, Ipv4Addr>>> {
        self.maps
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        for ns in [
            &self.a.netns,
            &self.a.gateway,
            &self.b.netns,
            &self.b.gateway,
        ] {
            remove_netns(ns);
        }
    }
}

/// The lab's namespaces that exist now (also those of a crashed run).
pub fn lab_namespaces() -> Vec<String> {
    std::process::Command::new("ip")
        .args(["netns", "list"])
        .output()
        .map(|o| {
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .filter_map(|l| l.split_whitespace().next())
                .filter(|n| n.starts_with(PREFIX))
                .map(str::to_owned)
                .collect()
        })
        .unwrap_or_default()
}

fn remove_leftovers() {
    for ns in lab_namespaces() {
        tracing::warn!(%ns, "removing a namespace left by a previous lab run");
        remove_netns(&ns);
    }
}

/// Kills every process in `ns` (only the lab runs processes in its namespaces) and deletes it.
fn remove_netns(ns: &str) {
    for _ in 0..50 {
        let pids = std::process::Command::new("ip")
            .args(["netns", "pids", ns])
            .output()
            .map(|o| {
                String::from_utf8_lossy(&o.stdout)
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect::<Vec<_>>()
            })
            .unwrap_or_default();
        if pids.is_empty() {
            break;
        }
        let _ = std::process::Command::new("kill")
            .arg("-9")
            .args(&pids)
            .output();
        std::thread::sleep(Duration::from_millis(100));
    }
    let _ = std::process::Command::new("ip")
        .args(["netns", "delete", ns])
        .output();
}

/// Runs `argv` (in `netns` through `ip netns exec`), bounded by a timeout; its stdout.
pub(crate) async fn run(netns: Option<&str>, argv: &[&str]) -> Result<String, LabError> {
    let mut full: Vec<&str> = Vec::new();
    if let Some(ns) = netns {
        full.extend(["ip", "netns", "exec", ns]);
    }
    full.extend(argv);
    let command = full.join(" ");
    let (program, args) = full.split_first().ok_or_else(|| LabError::Command {
        command: command.clone(),
        detail: "empty command".into(),
    })?;
    let child = tokio::process::Command::new(program)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| LabError::Command {
            command: command.clone(),
            detail: e.to_string(),
        })?;
    let output = tokio::time::timeout(COMMAND_TIMEOUT, child.wait_with_output())
        .await
        .map_err(|_| LabError::Timeout {
            command: command.clone(),
            after: COMMAND_TIMEOUT,
        })?
        .map_err(|e| LabError::Command {
            command: command.clone(),
            detail: e.to_string(),
        })?;
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).into_owned())
    } else {
        Err(LabError::Command {
            command,
            detail: format!(
                "{}: {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ),
        })
    }
}

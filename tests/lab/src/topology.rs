//! The lab's network: per cluster a "pods" namespace and a gateway namespace, the two gateways
//! joined by a veth pair (the tunnel), and on each gateway the product's data plane: a
//! `clusterset-gateway run --state FILE` process that maps the cluster's global IPs 1:1 to pod
//! IPs, Globalnet style, and routes the peer's global CIDR through the tunnel.
//!
//! ```text
//!  csl-a (pods 10.244.0.0/24)      csl-gw-a              csl-gw-b        csl-b (pods 10.244.0.0/24)
//!  eth0 10.244.0.2 + pod IPs ---- pods 10.244.0.1       pods 10.244.0.1 ---- eth0 10.244.0.2 + pod IPs
//!  default via 10.244.0.1         tun0 172.31.255.1 ---- tun0 172.31.255.2   default via 10.244.0.1
//!                                 242.2/16 via .2        242.1/16 via .1     (routes: proto 147)
//! ```
//!
//! The lab writes each gateway's state file (this cluster's CIDRs and egress IP, every export's
//! global IP and pod, the peer's global CIDR and tunnel address; `gateway-rules`'
//! [`GatewayState`](gateway_rules::GatewayState)) and waits until the gateway's table `ip
//! clusterset_gw` holds what `gateway-rules` computes for it. That table DNATs an export's
//! global IP to its pod (map `global_to_backend`) and SNATs a connection opened to any global
//! CIDR, ours included, to the pod's export's global IP (map `pod_to_global`) or else the egress
//! IP. Both also apply to traffic that comes back out the pods link (hairpin), so pods of one
//! cluster reach each other through their global IPs. A gateway outage is the process stopped
//! and its table deleted; starting it again reprograms the table from the state file.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::time::{Duration, Instant};

use gateway_rules::{Collection, RuleSet, TABLE};
use ipnet::Ipv4Net;
use tokio::sync::Mutex;

use crate::LabError;
use crate::gateway::{
    GatewayProcess, PodExport, TableStructure, desired_elements, gateway_binary, gateway_state,
    programmed_elements, table_present, table_structure, wait_programmed, wait_replaced,
    write_state,
};

/// Every namespace of the lab starts with this; leftovers with it are removed at start.
const PREFIX: &str = "csl-";
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
    /// The service CIDR (cluster IPs; the same for both clusters, disjoint from the pod and
    /// global CIDRs). No Service runs in the lab: the gateway's state needs it.
    pub service_cidr: Ipv4Net,
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

/// The lab's network, torn down when dropped (the gateways with it).
#[derive(Debug)]
pub struct Topology {
    a: ClusterNet,
    b: ClusterNet,
    /// The `clusterset-gateway` binary the gateways run.
    gateway_binary: PathBuf,
    /// The gateways' state files and logs.
    files: tempfile::TempDir,
    gateway_a: Mutex<Gateway>,
    gateway_b: Mutex<Gateway>,
    /// The pods' own namespaces ([`Topology::add_pod_netns`]), removed before the others.
    pod_namespaces: std::sync::Mutex<Vec<String>>,
}

/// What a gateway restart ([`Topology::restart_gateway`]) saw.
#[derive(Debug, Clone)]
pub struct GatewayRestart {
    /// From SIGTERM to the old process's exit.
    pub stopped_in: Duration,
    /// From the new process's start to its table in place: replaced (a new table handle) and
    /// holding its state file's elements.
    pub replaced_in: Duration,
    /// The table before the restart.
    pub before: TableStructure,
    /// The table while no gateway process ran (the stopped one leaves it in place).
    pub while_stopped: TableStructure,
    /// The table the new process programmed.
    pub after: TableStructure,
}

/// One cluster's gateway: the exports the lab gave it (its state file's), and its process
/// while it runs. Its lock is held while a change is written and waited for, so the changes of
/// one cluster are programmed one at a time.
#[derive(Debug, Default)]
struct Gateway {
    exports: BTreeMap<Ipv4Addr, PodExport>,
    process: Option<GatewayProcess>,
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
            service_cidr: net("10.96.0.0/16"),
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
        let gateway_binary = gateway_binary()?;
        let files = tempfile::Builder::new()
            .prefix("clusterset-lab-gateways.")
            .tempdir()
            .map_err(|e| LabError::Step {
                step: "creating the gateways' directory".into(),
                source: Box::new(e),
            })?;
        let (a, b) = Topology::plan();
        let topology = Topology {
            a,
            b,
            gateway_binary,
            files,
            gateway_a: Mutex::default(),
            gateway_b: Mutex::default(),
            pod_namespaces: std::sync::Mutex::default(),
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
        for c in [&self.a, &self.b] {
            let addr = format!("{}/30", c.tunnel_ip);
            run(
                Some(&c.gateway),
                &["ip", "addr", "add", &addr, "dev", "tun0"],
            )
            .await?;
            run(Some(&c.gateway), &["ip", "link", "set", "tun0", "up"]).await?;
        }
        // The gateways route each other's global CIDR through the tunnel themselves.
        for side in [Side::A, Side::B] {
            self.start_gateway(side).await?;
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

    /// Removes a pod IP from the cluster's pods namespace (the pod that had it is gone).
    pub async fn remove_pod_ip(&self, side: Side, pod: Ipv4Addr) -> Result<(), LabError> {
        let c = self.cluster(side);
        let addr = format!("{pod}/{}", c.pod_cidr.prefix_len());
        run(Some(&c.netns), &["ip", "addr", "del", &addr, "dev", "eth0"]).await?;
        Ok(())
    }

    /// Gives a pod of the cluster a network namespace of its own with the pod IP `pod`, as a
    /// CNI plugin does for a new pod, and returns its name (`csl-a-pod-36` for 10.244.0.36 in
    /// A). The cluster's pods namespace is the node: a veth pair (`pod36` there, `eth0` in the
    /// pod) carries the pod's traffic, the node routes `pod/32` to it and answers ARP for it on
    /// the pods link (proxy ARP, as Calico does), so the gateway reaches the pod as any other
    /// pod IP; the pod's default route goes through the node. Removed with the topology.
    pub async fn add_pod_netns(&self, side: Side, pod: Ipv4Addr) -> Result<String, LabError> {
        let c = self.cluster(side);
        if !c.pod_cidr.contains(&pod) {
            return Err(LabError::Alloc(format!(
                "{pod} is not in {}'s pod CIDR {}",
                c.cluster_id, c.pod_cidr
            )));
        }
        let host = pod.octets()[3];
        let ns = format!("{}-pod-{host}", c.netns);
        let node_end = format!("pod{host}");
        run(None, &["ip", "netns", "add", &ns]).await?;
        if let Ok(mut namespaces) = self.pod_namespaces.lock() {
            namespaces.push(ns.clone());
        }
        run(Some(&ns), &["ip", "link", "set", "lo", "up"]).await?;
        run(
            Some(&c.netns),
            &[
                "ip", "link", "add", &node_end, "type", "veth", "peer", "name", "eth0", "netns",
                &ns,
            ],
        )
        .await?;
        // The node forwards between the pods link and the pod, answers ARP for the pod on the
        // pods link and for everything else on the pod's link, at once (proxy_delay 0: by
        // default proxy ARP answers up to 0.8 s late).
        for sysctl in [
            "net.ipv4.ip_forward=1".to_owned(),
            "net.ipv4.conf.all.send_redirects=0".to_owned(),
            "net.ipv4.conf.all.rp_filter=0".to_owned(),
            "net.ipv4.conf.eth0.send_redirects=0".to_owned(),
            "net.ipv4.conf.eth0.rp_filter=0".to_owned(),
            "net.ipv4.conf.eth0.proxy_arp=1".to_owned(),
            "net.ipv4.neigh.eth0.proxy_delay=0".to_owned(),
            format!("net.ipv4.conf.{node_end}.rp_filter=0"),
            format!("net.ipv4.conf.{node_end}.proxy_arp=1"),
            format!("net.ipv4.neigh.{node_end}.proxy_delay=0"),
        ] {
            run(Some(&c.netns), &["sysctl", "-q", "-w", &sysctl]).await?;
        }
        run(Some(&c.netns), &["ip", "link", "set", &node_end, "up"]).await?;
        let host_route = format!("{pod}/32");
        run(
            Some(&c.netns),
            &["ip", "route", "add", &host_route, "dev", &node_end],
        )
        .await?;
        run(
            Some(&ns),
            &["ip", "addr", "add", &host_route, "dev", "eth0"],
        )
        .await?;
        run(Some(&ns), &["ip", "link", "set", "eth0", "up"]).await?;
        run(Some(&ns), &["ip", "route", "add", "default", "dev", "eth0"]).await?;
        Ok(ns)
    }

    /// Deletes a pod's namespace made by [`Topology::add_pod_netns`] (killing what runs in it):
    /// the pod is gone.
    pub fn remove_pod_netns(&self, ns: &str) {
        if let Ok(mut namespaces) = self.pod_namespaces.lock() {
            namespaces.retain(|n| n != ns);
        }
        remove_netns(ns);
    }

    /// The other cluster.
    fn peer(&self, side: Side) -> &ClusterNet {
        match side {
            Side::A => &self.b,
            Side::B => &self.a,
        }
    }

    fn gateway(&self, side: Side) -> &Mutex<Gateway> {
        match side {
            Side::A => &self.gateway_a,
            Side::B => &self.gateway_b,
        }
    }

    /// The state file of the cluster's gateway.
    pub fn gateway_state_file(&self, side: Side) -> PathBuf {
        self.files
            .path()
            .join(format!("{}.yaml", self.cluster(side).cluster_id))
    }

    /// The log of the cluster's gateway.
    pub fn gateway_log(&self, side: Side) -> PathBuf {
        self.files
            .path()
            .join(format!("gateway-{}.log", self.cluster(side).cluster_id))
    }

    /// Writes the gateway's state file with `exports`; the elements its table must then hold.
    fn write_gateway_state(
        &self,
        side: Side,
        exports: &BTreeMap<Ipv4Addr, PodExport>,
    ) -> Result<BTreeMap<String, Vec<String>>, LabError> {
        let state = gateway_state(self.cluster(side), self.peer(side), exports.values());
        let want = self.elements_for(side, exports)?;
        write_state(&self.gateway_state_file(side), &state)?;
        Ok(want)
    }

    /// The elements the gateway's table must hold for `exports`.
    fn elements_for(
        &self,
        side: Side,
        exports: &BTreeMap<Ipv4Addr, PodExport>,
    ) -> Result<BTreeMap<String, Vec<String>>, LabError> {
        let state = gateway_state(self.cluster(side), self.peer(side), exports.values());
        let rules = RuleSet::desired(&state).map_err(|e| LabError::Step {
            step: format!("the state of {}'s gateway", self.cluster(side).cluster_id),
            source: Box::new(e),
        })?;
        Ok(desired_elements(&rules))
    }

    /// Writes the state file and, while the gateway runs, waits until its table holds it.
    async fn program(&self, side: Side, gateway: &mut Gateway) -> Result<(), LabError> {
        let want = self.write_gateway_state(side, &gateway.exports)?;
        let Some(process) = gateway.process.as_mut() else {
            return Ok(());
        };
        wait_programmed(&self.cluster(side).gateway, &want, || {
            process.check_running()
        })
        .await?;
        Ok(())
    }

    /// Exports a pod at a global IP through the cluster's gateway (DNAT in, SNAT out, hairpin):
    /// the export is added to the gateway's state file and, while the gateway runs, this
    /// returns once its table holds it. Exporting the same global IP again replaces it.
    pub async fn export(&self, side: Side, export: PodExport) -> Result<(), LabError> {
        let mut gateway = self.gateway(side).lock().await;
        gateway.exports.insert(export.global, export);
        self.program(side, &mut gateway).await
    }

    /// Removes the export of `global` from the gateway's state file (no-op when there is none)
    /// and, while the gateway runs, waits until its table no longer holds it.
    pub async fn unexport(&self, side: Side, global: Ipv4Addr) -> Result<(), LabError> {
        let mut gateway = self.gateway(side).lock().await;
        if gateway.exports.remove(&global).is_none() {
            return Ok(());
        }
        self.program(side, &mut gateway).await
    }

    /// What the gateway's table DNATs now: global IP to pod IP (its map `global_to_backend`,
    /// read from the kernel); empty when the table does not exist.
    pub async fn gateway_dnat(&self, side: Side) -> Result<BTreeMap<Ipv4Addr, Ipv4Addr>, LabError> {
        let sets = programmed_elements(&self.cluster(side).gateway).await?;
        let pairs = sets
            .and_then(|mut sets| sets.remove(Collection::GlobalToBackend.name()))
            .unwrap_or_default();
        pairs
            .iter()
            .map(|pair| {
                pair.split_once(" : ")
                    .and_then(|(global, pod)| Some((global.parse().ok()?, pod.parse().ok()?)))
                    .ok_or_else(|| LabError::Step {
                        step: "reading the gateway's global_to_backend map".into(),
                        source: format!("{pair:?} is no `global : pod` pair").into(),
                    })
            })
            .collect()
    }

    /// Whether the cluster's gateway process runs.
    pub async fn gateway_running(&self, side: Side) -> bool {
        self.gateway(side)
            .lock()
            .await
            .process
            .as_mut()
            .is_some_and(|process| process.check_running().is_ok())
    }

    /// Whether the cluster's gateway namespace has the table `ip clusterset_gw`.
    pub async fn gateway_table_present(&self, side: Side) -> bool {
        table_present(&self.cluster(side).gateway).await
    }

    /// Starts the cluster's gateway (`clusterset-gateway run --state FILE` in its namespace)
    /// with the state file of every export made so far, and waits until its table holds it;
    /// how long that took. If a stopped gateway left a table, the wait is for the new process
    /// to have replaced it (a new table handle), as it does when it starts. A gateway already
    /// running is left as it is.
    pub async fn start_gateway(&self, side: Side) -> Result<Duration, LabError> {
        let started = std::time::Instant::now();
        let mut gateway = self.gateway(side).lock().await;
        if let Some(process) = gateway.process.as_mut()
            && process.check_running().is_ok()
        {
            return Ok(started.elapsed());
        }
        let want = self.write_gateway_state(side, &gateway.exports)?;
        let c = self.cluster(side);
        let left = table_structure(&c.gateway).await?.map(|table| table.handle);
        let process = gateway.process.insert(GatewayProcess::start(
            &self.gateway_binary,
            &c.gateway,
            &self.gateway_state_file(side),
            &self.gateway_log(side),
        )?);
        match left {
            Some(handle) => {
                wait_replaced(&c.gateway, handle, &want, || process.check_running()).await?;
            }
            None => {
                wait_programmed(&c.gateway, &want, || process.check_running()).await?;
            }
        }
        Ok(started.elapsed())
    }

    /// Stops the cluster's gateway (SIGTERM) and waits for it to exit. Its table and routes
    /// stay in place, as the gateway leaves them: connections keep working, but changes of the
    /// state file are not followed until it starts again.
    pub async fn stop_gateway(&self, side: Side) -> Result<(), LabError> {
        let process = self.gateway(side).lock().await.process.take();
        match process {
            Some(process) => process.stop().await,
            None => Ok(()),
        }
    }

    /// Restarts the cluster's gateway as an operator would: SIGTERM, a wait for the process to
    /// exit (the table must then still be there: the gateway leaves its rules in place), and a
    /// new `clusterset-gateway run` on the same state file, waited for until it has replaced the
    /// table (a new table handle) with one holding the file's elements. Returns the three
    /// tables (before, while stopped, after) for the caller to compare. Fails if no gateway
    /// runs, if the stopped one left no table, or if the new one does not program it within
    /// [`crate::PROGRAMMED_WITHIN`].
    pub async fn restart_gateway(&self, side: Side) -> Result<GatewayRestart, LabError> {
        let c = self.cluster(side);
        let missing = |when: &str| LabError::Step {
            step: format!("restarting {}'s gateway", c.cluster_id),
            source: format!("no table ip {TABLE} in {} {when}", c.gateway).into(),
        };
        let mut gateway = self.gateway(side).lock().await;
        let old = gateway
            .process
            .take()
            .ok_or_else(|| missing("and no gateway running"))?;
        let before = table_structure(&c.gateway)
            .await?
            .ok_or_else(|| missing("before the restart"))?;
        let stopping = Instant::now();
        old.stop().await?;
        let stopped_in = stopping.elapsed();
        let while_stopped = table_structure(&c.gateway)
            .await?
            .ok_or_else(|| missing("once the gateway had stopped (it must leave its rules)"))?;
        let want = self.elements_for(side, &gateway.exports)?;
        let starting = Instant::now();
        let process = gateway.process.insert(GatewayProcess::start(
            &self.gateway_binary,
            &c.gateway,
            &self.gateway_state_file(side),
            &self.gateway_log(side),
        )?);
        let after =
            wait_replaced(&c.gateway, before.handle, &want, || process.check_running()).await?;
        Ok(GatewayRestart {
            stopped_in,
            replaced_in: starting.elapsed(),
            before,
            while_stopped,
            after,
        })
    }

    /// The structure of the cluster's gateway table (`nft -j list table ip clusterset_gw`,
    /// handles removed); `None` when it does not exist.
    pub async fn gateway_table(&self, side: Side) -> Result<Option<TableStructure>, LabError> {
        table_structure(&self.cluster(side).gateway).await
    }

    /// A gateway outage: the gateway stopped and its table `ip clusterset_gw` deleted, as the
    /// loss of the gateway node's NAT would leave it (its routes stay). Connections already
    /// translated keep their conntrack entries; new ones to the cluster's global IPs fail.
    pub async fn gateway_outage(&self, side: Side) -> Result<(), LabError> {
        self.stop_gateway(side).await?;
        run(
            Some(&self.cluster(side).gateway),
            &["nft", "delete", "table", "ip", TABLE],
        )
        .await?;
        Ok(())
    }

    /// Runs a program inside the pods namespace of a cluster; its stdout.
    pub async fn exec(&self, side: Side, argv: &[&str]) -> Result<String, LabError> {
        run(Some(&self.cluster(side).netns), argv).await
    }

    /// Runs a program inside the gateway namespace of a cluster; its stdout.
    pub async fn exec_in_gateway(&self, side: Side, argv: &[&str]) -> Result<String, LabError> {
        run(Some(&self.cluster(side).gateway), argv).await
    }
}

impl Drop for Topology {
    fn drop(&mut self) {
        let pods = self
            .pod_namespaces
            .lock()
            .map(|mut namespaces| std::mem::take(&mut *namespaces))
            .unwrap_or_default();
        for ns in &pods {
            remove_netns(ns);
        }
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

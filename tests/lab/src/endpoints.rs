//! Mon endpoints with Globalnet-style addressing, the local stand-in for what Rook, an MCS
//! implementation and its gateway do for a mon Service and its ServiceExport.

use std::collections::BTreeMap;
use std::net::{IpAddr, Ipv4Addr};
use std::sync::Arc;

use async_trait::async_trait;
use ceph_address_plan::MonId;
use ceph_local::{EndpointSource, EndpointTable, MonEndpoint};
use ipnet::IpNet;
use mcs_controller::IpPool;
use mon_failover::{Addressing, RuntimeError};
use tokio::sync::Mutex;

use crate::{LabDns, LabError, NAMESPACE, PodExport, Side, Topology};

/// The endpoints of one cluster's mons.
///
/// Cluster-local endpoints are fixed (the mons a cluster starts with, on their pod IPs). A
/// mon that must advertise a clusterset address is provisioned the way an MCS implementation
/// with Globalnet would do it: a pod IP from the cluster's free pod IPs, a global IP from the
/// cluster's global CIDR ([`IpPool`], keyed by the Service `rook-ceph-mon-<id>`), the export in
/// the state of the cluster's gateway (`clusterset-gateway`: 1:1 DNAT in, SNAT out, waited for
/// until its table holds it), and the export published in the clusterset DNS server. The
/// address is known once the Lighthouse name
/// `<clusterid>.rook-ceph-mon-<id>.rook-ceph.svc.clusterset.local` resolves through that
/// server. While the gateway is down the address stays pending: the export cannot become
/// valid.
pub struct GlobalnetEndpoints {
    topology: Arc<Topology>,
    side: Side,
    dns: Arc<LabDns>,
    local: EndpointTable,
    state: Mutex<State>,
}

impl std::fmt::Debug for GlobalnetEndpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("GlobalnetEndpoints")
            .field("side", &self.side)
            .finish_non_exhaustive()
    }
}

#[derive(Debug)]
struct State {
    globals: IpPool<String>,
    free_pods: Vec<Ipv4Addr>,
    pods: BTreeMap<MonId, Ipv4Addr>,
    assigned: BTreeMap<MonId, MonEndpoint>,
}

/// The Service of a mon, as in Rook.
pub fn mon_service(mon: &MonId) -> String {
    format!("rook-ceph-mon-{mon}")
}

fn runtime_error(error: LabError) -> RuntimeError {
    RuntimeError::Other(Box::new(error))
}

impl GlobalnetEndpoints {
    /// Endpoints for the mons of cluster `side`: `local_mons` on their pod IPs (cluster-local,
    /// run in the cluster's namespace), new clusterset mons on pod IPs taken from `pod_pool`.
    pub fn new(
        topology: Arc<Topology>,
        side: Side,
        dns: Arc<LabDns>,
        local_mons: &[(MonId, Ipv4Addr)],
        pod_pool: impl IntoIterator<Item = Ipv4Addr>,
    ) -> Self {
        let net = topology.cluster(side).clone();
        let local = local_mons
            .iter()
            .fold(EndpointTable::new(), |table, (mon, pod)| {
                table.with_fixed(
                    mon.clone(),
                    Addressing::ClusterLocal,
                    MonEndpoint {
                        public: IpAddr::V4(*pod),
                        bind: None,
                        netns: Some(net.netns.clone()),
                    },
                )
            });
        GlobalnetEndpoints {
            topology,
            side,
            dns,
            local,
            state: Mutex::new(State {
                globals: IpPool::new(IpNet::V4(net.global_cidr)),
                free_pods: pod_pool.into_iter().collect(),
                pods: BTreeMap::new(),
                assigned: BTreeMap::new(),
            }),
        }
    }

    /// The pod IP a clusterset mon binds, once provisioned.
    pub async fn pod_ip(&self, mon: &MonId) -> Option<Ipv4Addr> {
        self.state.lock().await.pods.get(mon).copied()
    }

    /// Exports the Service `service` (an OSD's `rook-ceph-osd-<id>`, say) whose pod binds `pod`:
    /// a global IP from this cluster's pool, the pod IP added, the export programmed by the
    /// gateway and the DNS record. Returns the global IP once its Lighthouse name resolves
    /// (`None` while the gateway is down). Exporting again returns the same global IP.
    pub async fn export(&self, service: &str, pod: Ipv4Addr) -> Result<Option<IpAddr>, LabError> {
        let mut state = self.state.lock().await;
        self.export_in(&mut state, service, pod).await
    }

    async fn export_in(
        &self,
        state: &mut State,
        service: &str,
        pod: Ipv4Addr,
    ) -> Result<Option<IpAddr>, LabError> {
        let net = self.topology.cluster(self.side).clone();
        let global = state
            .globals
            .assign(&service.to_owned())
            .map_err(|e| LabError::Alloc(e.to_string()))?;
        let IpAddr::V4(global_v4) = global else {
            return Err(LabError::Alloc(format!("{global} is not IPv4")));
        };
        if !self.topology.gateway_running(self.side).await {
            tracing::warn!(%service, gateway = %net.gateway, "the gateway is down: the global IP cannot be programmed, the export stays pending");
            return Ok(None);
        }
        self.topology.add_pod_ip(self.side, pod).await?;
        self.topology
            .export(
                self.side,
                PodExport {
                    namespace: NAMESPACE.to_owned(),
                    service: service.to_owned(),
                    global: global_v4,
                    pod,
                },
            )
            .await?;
        self.dns.publish(net.cluster_id, service, global)?;
        let name = LabDns::cluster_name(net.cluster_id, service)?;
        let Some(addresses) = self.dns.resolve(&name).await? else {
            return Ok(None);
        };
        Ok(addresses.first().copied())
    }

    async fn provision_clusterset(&self, mon: &MonId) -> Result<Option<MonEndpoint>, LabError> {
        let mut state = self.state.lock().await;
        if let Some(endpoint) = state.assigned.get(mon) {
            return Ok(Some(endpoint.clone()));
        }
        let net = self.topology.cluster(self.side).clone();
        let pod = match state.pods.get(mon) {
            Some(pod) => *pod,
            None => {
                if state.free_pods.is_empty() {
                    return Err(LabError::Alloc(format!(
                        "no free pod IP left for mon {mon} in {}",
                        net.netns
                    )));
                }
                let pod = state.free_pods.remove(0);
                state.pods.insert(mon.clone(), pod);
                pod
            }
        };
        let Some(public) = self.export_in(&mut state, &mon_service(mon), pod).await? else {
            return Ok(None);
        };
        let endpoint = MonEndpoint {
            public,
            bind: Some(IpAddr::V4(pod)),
            netns: Some(net.netns.clone()),
        };
        state.assigned.insert(mon.clone(), endpoint.clone());
        Ok(Some(endpoint))
    }
}

#[async_trait]
impl EndpointSource for GlobalnetEndpoints {
    async fn provision(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError> {
        match addressing {
            Addressing::ClusterLocal => self.local.provision(mon, addressing).await,
            Addressing::Clusterset => self.provision_clusterset(mon).await.map_err(runtime_error),
        }
    }

    async fn lookup(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError> {
        match addressing {
            Addressing::ClusterLocal => self.local.lookup(mon, addressing).await,
            Addressing::Clusterset => Ok(self.state.lock().await.assigned.get(mon).cloned()),
        }
    }

    async fn release(&self, mon: &MonId) -> Result<(), RuntimeError> {
        self.local.release(mon).await?;
        let mut state = self.state.lock().await;
        state.assigned.remove(mon);
        let service = mon_service(mon);
        if let Some(IpAddr::V4(global)) = state.globals.release(&service) {
            self.topology
                .unexport(self.side, global)
                .await
                .map_err(runtime_error)?;
            self.dns
                .withdraw(self.topology.cluster(self.side).cluster_id, &service);
        }
        if let Some(pod) = state.pods.remove(mon) {
            state.free_pods.push(pod);
        }
        Ok(())
    }
}

//! Our clusterset DNS server inside the lab: one [`DnsServer`] in a cluster's pods namespace,
//! fed with the ServiceImports and MCS EndpointSlices of every cluster's exports (what the MCS
//! agents would write), answering the spec names (`<svc>.<ns>.svc.clusterset.local`) and Rook's
//! Lighthouse names (`<clusterid>.<svc>.<ns>.svc.clusterset.local`) with global IPs.

use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use clusterset_dns::{
    ClustersetResolver, DnsServer, HickoryClustersetResolver, ResolverSettings, ServerConfig,
    ZoneConfig, ZoneStore,
};
use mcs_types::labels::{SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL};
use mcs_types::names::ClustersetName;
use tokio::sync::oneshot;

use crate::{LabError, NetnsThread};

/// The Kubernetes namespace of the Ceph clusters' Services, as in Rook.
pub const NAMESPACE: &str = "rook-ceph";

/// The clusterset DNS server of the lab and a resolver that asks it from inside its cluster.
#[derive(Debug)]
pub struct LabDns {
    store: Arc<ZoneStore>,
    address: SocketAddr,
    stop: Option<oneshot::Sender<oneshot::Sender<()>>>,
    thread: NetnsThread,
}

fn dns_error(error: impl std::fmt::Display) -> LabError {
    LabError::Dns(error.to_string())
}

impl LabDns {
    /// Starts the server on `listen` inside `netns` (the address must exist there).
    pub async fn start(netns: &str, listen: SocketAddr) -> Result<Self, LabError> {
        let thread = NetnsThread::spawn(netns)?;
        let store = Arc::new(ZoneStore::new(ZoneConfig {
            lighthouse_cluster_names: true,
            ..ZoneConfig::default()
        }));
        store.mark_synced();
        let (stop, stopped) = oneshot::channel::<oneshot::Sender<()>>();
        let served = Arc::clone(&store);
        let address = thread
            .run(move || async move {
                let server = DnsServer::start(&ServerConfig::new(listen), served)
                    .map_err(|e| e.to_string())?;
                let address = server.local_addr();
                tokio::task::spawn_local(async move {
                    let done = stopped.await;
                    server.shutdown().await;
                    if let Ok(done) = done {
                        let _ = done.send(());
                    }
                });
                Ok::<_, String>(address)
            })
            .await?
            .map_err(LabError::Dns)?;
        Ok(LabDns {
            store,
            address,
            stop: Some(stop),
            thread,
        })
    }

    /// Where the server listens (inside its namespace).
    pub fn address(&self) -> SocketAddr {
        self.address
    }

    /// The Lighthouse-form name of `service` exported by `cluster_id`, as Rook resolves it.
    pub fn cluster_name(cluster_id: &str, service: &str) -> Result<ClustersetName, LabError> {
        ClustersetName::service(NAMESPACE, service)
            .and_then(|name| name.cluster_service(cluster_id))
            .map_err(dns_error)
    }

    /// Publishes `service` of `cluster_id` at `global`: a ServiceImport with that clusterset IP
    /// and an EndpointSlice from that cluster with the global IP as its ready endpoint.
    pub fn publish(&self, cluster_id: &str, service: &str, global: IpAddr) -> Result<(), LabError> {
        let ports = serde_json::json!([
            {"name": "tcp-msgr2", "port": 3300, "protocol": "TCP"},
            {"name": "tcp-msgr1", "port": 6789, "protocol": "TCP"}
        ]);
        let import: mcs_types::v1beta1::ServiceImport = serde_json::from_value(serde_json::json!({
            "apiVersion": "multicluster.x-k8s.io/v1beta1",
            "kind": "ServiceImport",
            "metadata": {"name": service, "namespace": NAMESPACE},
            "spec": {"type": "ClusterSetIP", "ips": [global.to_string()], "ports": ports}
        }))
        .map_err(dns_error)?;
        let slice: k8s_openapi::api::discovery::v1::EndpointSlice =
            serde_json::from_value(serde_json::json!({
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": format!("{service}-{cluster_id}"),
                    "namespace": NAMESPACE,
                    "labels": {SERVICE_NAME_LABEL: service, SOURCE_CLUSTER_LABEL: cluster_id}
                },
                "addressType": "IPv4",
                "endpoints": [{"addresses": [global.to_string()], "conditions": {"ready": true}}],
                "ports": ports
            }))
            .map_err(dns_error)?;
        self.store
            .upsert_service_import(&import)
            .map_err(dns_error)?;
        self.store.upsert_endpoint_slice(&slice).map_err(dns_error)
    }

    /// Withdraws what [`LabDns::publish`] published.
    pub fn withdraw(&self, cluster_id: &str, service: &str) {
        self.store
            .delete_endpoint_slice(NAMESPACE, &format!("{service}-{cluster_id}"));
        self.store.delete_service_import(NAMESPACE, service);
    }

    /// Resolves `name` through the server, from inside its namespace. `None` while the name
    /// does not resolve (NXDOMAIN, NODATA, no answer).
    pub async fn resolve(&self, name: &ClustersetName) -> Result<Option<Vec<IpAddr>>, LabError> {
        let nameserver = self.address;
        let name = name.clone();
        self.thread
            .run(move || async move {
                let resolver = HickoryClustersetResolver::new(ResolverSettings {
                    nameserver: Some(nameserver),
                    timeout: Duration::from_millis(500),
                    attempts: 2,
                    ..ResolverSettings::default()
                })
                .map_err(dns_error)?;
                match resolver.resolve(&name).await {
                    Ok(resolution) => Ok(Some(resolution.addresses)),
                    Err(error) => {
                        tracing::info!(%error, "clusterset name does not resolve (yet)");
                        Ok(None)
                    }
                }
            })
            .await?
    }

    /// Stops the server and waits for it.
    pub async fn shutdown(mut self) {
        if let Some(stop) = self.stop.take() {
            let (done, finished) = oneshot::channel();
            if stop.send(done).is_ok() {
                let _ = finished.await;
            }
        }
    }
}

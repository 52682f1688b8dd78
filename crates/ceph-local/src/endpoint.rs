//! Where local mons live: [`MonEndpoint`] (the address a mon advertises, the one it binds and
//! its network namespace), given out by an [`EndpointSource`], the local counterpart of Rook's
//! per-mon Service and export; [`EndpointTable`] is the plain one (fixed endpoints per mon plus
//! pools for new mons).

use std::collections::BTreeMap;
use std::net::IpAddr;

use async_trait::async_trait;
use ceph_address_plan::MonId;
use mon_failover::{Addressing, RuntimeError};

/// Where a mon lives on this machine.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct MonEndpoint {
    /// The address the mon advertises (`--public-addr`): what the monmap holds.
    pub public: IpAddr,
    /// The address it binds (`--public-bind-addr`) when that differs, as a pod IP behind a
    /// clusterset-global IP does.
    pub bind: Option<IpAddr>,
    /// The network namespace the daemon runs in (`ip netns exec`), if any.
    pub netns: Option<String>,
}

impl MonEndpoint {
    /// A mon that advertises and binds `public`, in this network namespace.
    pub fn at(public: IpAddr) -> Self {
        MonEndpoint {
            public,
            bind: None,
            netns: None,
        }
    }

    /// The same endpoint, bound to `bind` inside `netns`.
    pub fn behind(mut self, bind: IpAddr, netns: Option<String>) -> Self {
        self.bind = Some(bind);
        self.netns = netns;
        self
    }
}

/// Gives mons their endpoints: the local counterpart of Rook's per-mon Service and export.
#[async_trait]
pub trait EndpointSource: Send + Sync {
    /// Gives `mon` an endpoint of this kind if it has none, and returns it once its address is
    /// known (`None` while pending).
    async fn provision(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError>;

    /// The endpoint `mon` has of this kind, if any, without creating one.
    async fn lookup(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError>;

    /// Forgets every endpoint of `mon` (its addresses may be given to later mons).
    async fn release(&self, mon: &MonId) -> Result<(), RuntimeError>;
}

/// Fixed endpoints per mon and kind, plus a pool per kind from which new mons take the first
/// free endpoint when they are provisioned.
///
/// ```
/// use ceph_local::{EndpointSource, EndpointTable, MonEndpoint};
/// use mon_failover::Addressing;
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
/// let table = EndpointTable::new()
///     .with_fixed("a".parse()?, Addressing::ClusterLocal, MonEndpoint::at(ip("127.0.0.11")))
///     .with_pool(Addressing::Clusterset, [MonEndpoint::at(ip("127.0.0.21"))]);
/// let d = table.provision(&"d".parse()?, Addressing::Clusterset).await?;
/// assert_eq!(d.map(|e| e.public), Some(ip("127.0.0.21")));
/// // Stable: provisioning again returns the same endpoint.
/// let again = table.provision(&"d".parse()?, Addressing::Clusterset).await?;
/// assert_eq!(again.map(|e| e.public), Some(ip("127.0.0.21")));
/// // The pool is used up.
/// assert!(table.provision(&"e".parse()?, Addressing::Clusterset).await.is_err());
/// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Default)]
pub struct EndpointTable {
    inner: std::sync::Mutex<TableInner>,
}

#[derive(Debug, Default)]
struct TableInner {
    assigned: BTreeMap<(MonId, Addressing), MonEndpoint>,
    pools: BTreeMap<Addressing, Vec<MonEndpoint>>,
}

impl EndpointTable {
    /// An empty table.
    pub fn new() -> Self {
        EndpointTable::default()
    }

    /// With a fixed endpoint for `mon`.
    pub fn with_fixed(self, mon: MonId, addressing: Addressing, endpoint: MonEndpoint) -> Self {
        self.lock().assigned.insert((mon, addressing), endpoint);
        self
    }

    /// With fixed endpoints of this kind for mons that advertise and bind their address (for
    /// example the mons a cluster starts with).
    pub fn with_mons_at(self, addressing: Addressing, mons: &[(MonId, IpAddr)]) -> Self {
        mons.iter().fold(self, |table, (mon, address)| {
            table.with_fixed(mon.clone(), addressing, MonEndpoint::at(*address))
        })
    }

    /// With a pool of endpoints of this kind for new mons.
    pub fn with_pool(
        self,
        addressing: Addressing,
        endpoints: impl IntoIterator<Item = MonEndpoint>,
    ) -> Self {
        self.lock()
            .pools
            .entry(addressing)
            .or_default()
            .extend(endpoints);
        self
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, TableInner> {
        self.inner
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

#[async_trait]
impl EndpointSource for EndpointTable {
    async fn provision(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError> {
        let mut inner = self.lock();
        let key = (mon.clone(), addressing);
        if let Some(endpoint) = inner.assigned.get(&key) {
            return Ok(Some(endpoint.clone()));
        }
        let in_use: Vec<IpAddr> = inner.assigned.values().map(|e| e.public).collect();
        let free = inner
            .pools
            .get(&addressing)
            .and_then(|pool| pool.iter().find(|e| !in_use.contains(&e.public)))
            .cloned();
        let Some(endpoint) = free else {
            return Err(RuntimeError::NoAddress {
                mon: mon.clone(),
                addressing,
                fix: format!("the {addressing} pool is empty or used up: add endpoints to it"),
            });
        };
        inner.assigned.insert(key, endpoint.clone());
        Ok(Some(endpoint))
    }

    async fn lookup(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<MonEndpoint>, RuntimeError> {
        Ok(self
            .lock()
            .assigned
            .get(&(mon.clone(), addressing))
            .cloned())
    }

    async fn release(&self, mon: &MonId) -> Result<(), RuntimeError> {
        self.lock().assigned.retain(|(m, _), _| m != mon);
        Ok(())
    }
}

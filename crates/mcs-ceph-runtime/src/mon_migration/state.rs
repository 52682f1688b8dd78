//! The machine's state in `status.monFailover` of the operator's status object: reading it
//! ([`stored_state`], and the [`gate`] that needs it) and the [`StatusStateStore`] port that
//! loads and saves it.

use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;
use clusterset_daemon::ErrorChain;
use clusterset_daemon::apply::Ownership;
use kube::Client;
use kube::api::{Api, Patch};
use mcs_ceph_api::{AddressingStatus, CephCluster, CephClusterAddressing};
use mcs_ceph_core::migration::Gate;
use mon_failover::{MachineState, StateStore, StoreError};
use serde_json::json;

use super::MON_FAILOVER_FIELD_MANAGER;
use super::error::api_error;

/// The machine state stored in a status, if any (an unreadable one is an error, never
/// silently replaced).
pub fn stored_state(status: &AddressingStatus) -> Result<Option<MachineState>, StoreError> {
    status
        .mon_failover
        .clone()
        .map(serde_json::from_value)
        .transpose()
        .map_err(|e| {
            StoreError::Other(
                format!(
                    "status.monFailover does not hold a mon failover state ({e}); it is left untouched"
                )
                .into(),
            )
        })
}

/// The gate of [`mcs_ceph_core::migration::gate`] with the migration in flight read from the
/// machine's state stored in `status` ([`stored_state`]; an unreadable one makes the gate wait).
pub fn gate(cluster: &CephCluster, status: &AddressingStatus) -> Gate {
    let in_flight = stored_state(status)
        .map(|state| state.and_then(|s| s.migration().map(|m| m.new_mon().clone())))
        .map_err(|error| ErrorChain(&error).to_string());
    mcs_ceph_core::migration::gate(cluster, status, in_flight)
}

/// The machine's state in `status.monFailover` of the operator's `CephClusterAddressing`.
///
/// `load` reads the object from the API server (not the watch cache, which may lag behind the
/// last save) once, and then answers from what it read or last saved; `save` is a server-side
/// apply of `status.monFailover` alone under [`MON_FAILOVER_FIELD_MANAGER`].
pub struct StatusStateStore {
    api: Api<CephClusterAddressing>,
    namespace: String,
    name: String,
    known: Mutex<Option<Option<MachineState>>>,
}

impl std::fmt::Debug for StatusStateStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StatusStateStore")
            .field("namespace", &self.namespace)
            .field("name", &self.name)
            .finish_non_exhaustive()
    }
}

impl StatusStateStore {
    /// The store of the status object `name` in `namespace`.
    pub fn new(client: Client, namespace: &str, name: &str) -> Self {
        Self {
            api: Api::namespaced(client, namespace),
            namespace: namespace.to_owned(),
            name: name.to_owned(),
            known: Mutex::new(None),
        }
    }

    fn known(&self) -> Option<Option<MachineState>> {
        self.known
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    fn remember(&self, state: Option<MachineState>) {
        *self.known.lock().unwrap_or_else(PoisonError::into_inner) = Some(state);
    }
}

#[async_trait]
impl StateStore for StatusStateStore {
    async fn load(&self) -> Result<Option<MachineState>, StoreError> {
        if let Some(known) = self.known() {
            return Ok(known);
        }
        let object = self
            .api
            .get_opt(&self.name)
            .await
            .map_err(api_error(format!(
                "reading CephClusterAddressing {}/{}",
                self.namespace, self.name
            )))?;
        let state = match object.and_then(|o| o.status) {
            Some(status) => stored_state(&status)?,
            None => None,
        };
        self.remember(state.clone());
        Ok(state)
    }

    async fn save(&self, state: &MachineState) -> Result<(), StoreError> {
        let value = serde_json::to_value(state).map_err(|e| StoreError::Other(Box::new(e)))?;
        let body = json!({
            "apiVersion": format!("{}/{}", mcs_ceph_api::GROUP, mcs_ceph_api::VERSION),
            "kind": mcs_ceph_api::KIND,
            "metadata": {"name": self.name, "namespace": self.namespace},
            "status": {"monFailover": value},
        });
        let params = Ownership::Force.params(MON_FAILOVER_FIELD_MANAGER);
        self.api
            .patch(&self.name, &params, &Patch::Apply(&body))
            .await
            .map_err(api_error(format!(
                "saving the mon failover state in CephClusterAddressing {}/{}",
                self.namespace, self.name
            )))?;
        self.remember(Some(state.clone()));
        Ok(())
    }
}

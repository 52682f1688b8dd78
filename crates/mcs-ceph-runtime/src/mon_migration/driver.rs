//! The mon migration as the reconcile runs it ([`MonMigration`]): the gate, then a few ticks
//! of a [`Driver`] over the Kubernetes runtime, the status store and the admin, each
//! command's outcome observed in the same reconcile ([`run_ticks`]).

use std::collections::BTreeMap;
use std::sync::Arc;

use ceph_address_plan::{ClusterSettings, MonId, rook_objects};
use clusterset_daemon::ErrorChain;
use k8s_openapi::api::core::v1::ConfigMap;
use kube::Client;
use mcs_ceph_api::{AddressingStatus, CephCluster};
use mcs_ceph_core::migration::{Gate, MonAddress, mon_addresses};
use mcs_ceph_core::snapshot::McsVersion;
use mon_failover::Addressing;
use mon_failover_io::Driver;
use serde_json::Value;

use super::admin::AdminSource;
use super::error::MigrationError;
use super::mon_runtime::KubeMonRuntime;
use super::report::MigrationReport;
use super::state::{StatusStateStore, gate, stored_state};

/// Runs driver ticks until one executes no command (the machine waits on Ceph or is done),
/// one only waits for a new mon's address (the plan resolves it, in a later reconcile), or
/// one repeats the previous tick's commands from the same state (nothing changes within this
/// reconcile) — at most `max_ticks`: the outcome of a command is observed in the same
/// reconcile, as [`mon_failover_io::Driver::run_until_settled`] does, without waiting between
/// ticks.
pub async fn run_ticks(
    driver: &mut mon_failover_io::Driver,
    now: mon_failover::Timestamp,
    max_ticks: usize,
) -> Result<Vec<mon_failover_io::Tick>, mon_failover_io::DriverError> {
    let mut ticks: Vec<mon_failover_io::Tick> = Vec::new();
    for _ in 0..max_ticks {
        let tick = driver.tick(Addressing::Clusterset, now).await?;
        let idle = tick.commands.is_empty();
        let address_pending = !tick.outcomes.is_empty()
            && tick
                .outcomes
                .iter()
                .all(|o| matches!(o, mon_failover::CommandOutcome::AddressPending { .. }));
        let repeated = ticks
            .last()
            .is_some_and(|last| last.state == tick.state && last.commands == tick.commands);
        ticks.push(tick);
        if idle || address_pending || repeated {
            break;
        }
    }
    Ok(ticks)
}

/// How soon a cluster is reconciled again while its mon migration is in flight (instead of
/// waiting for a watch event or the long steady-state interval).
pub const MIGRATION_REQUEUE: std::time::Duration = std::time::Duration::from_secs(10);

/// Driver ticks per reconcile at most (each tick that executes commands is followed by one
/// that observes their outcome).
pub const MAX_TICKS_PER_RECONCILE: usize = 6;

/// What one reconcile hands the mon migration.
#[derive(Debug)]
pub struct MigrationInput<'a> {
    /// The CephCluster (its opt-in annotation and Ceph image).
    pub cluster: &'a CephCluster,
    /// The cluster's settings, as the plan read them.
    pub settings: ClusterSettings,
    /// The status this reconcile decided, with `monFailover` as last observed.
    pub status: &'a AddressingStatus,
    /// `rook-ceph-mon-endpoints` as observed (its `maxMonId` and the mons' endpoints).
    pub mon_endpoints: Option<&'a ConfigMap>,
    /// The MCS API version the cluster serves (the replaced mon's export is deleted in it).
    pub mcs_version: McsVersion,
    /// The time.
    pub now: mon_failover::Timestamp,
}

/// The mon migration as the reconcile runs it: the [`gate`], then at most
/// [`MAX_TICKS_PER_RECONCILE`] ticks of a [`mon_failover_io::Driver`] over [`KubeMonRuntime`],
/// [`StatusStateStore`] and the admin of [`AdminSource`]. Runs inside the reconcile, which only
/// the holder of the leader Lease runs.
#[derive(Clone)]
pub struct MonMigration {
    client: Client,
    admin: AdminSource,
    machine: mon_failover::Config,
}

impl std::fmt::Debug for MonMigration {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("MonMigration")
            .field("admin", &self.admin)
            .field("machine", &self.machine)
            .finish_non_exhaustive()
    }
}

impl MonMigration {
    /// The migration writing through `client`, asking Ceph through `admin`, with the
    /// machine's default configuration.
    pub fn new(client: Client, admin: AdminSource) -> Self {
        Self {
            client,
            admin,
            machine: mon_failover::Config::default(),
        }
    }

    /// One reconcile's share of the migration: `None` when there is nothing to say (no mon to
    /// replace, nothing in flight), else the state line, whether a migration is in flight and
    /// the steps executed.
    pub async fn run(
        &self,
        input: MigrationInput<'_>,
    ) -> Result<Option<MigrationReport>, MigrationError> {
        let stored = stored_state(input.status).ok().flatten();
        let in_flight = stored.as_ref().and_then(|s| s.migration());
        match gate(input.cluster, input.status) {
            Gate::Idle => return Ok(None),
            Gate::Wait(reason) => {
                return Ok(MigrationReport::waiting(
                    input.status,
                    in_flight.is_some(),
                    &reason,
                ));
            }
            Gate::Go => {}
        }
        let mons = mon_addresses(input.status);
        let template = in_flight
            .map(|m| m.old().clone())
            .or_else(|| first_mon_to_replace(&mons));
        let canary_image = canary_image(input.cluster)?;
        let empty = BTreeMap::new();
        let reach = rook_objects::mon_endpoints_reach(
            input
                .mon_endpoints
                .and_then(|c| c.data.as_ref())
                .unwrap_or(&empty),
        );
        let namespace = input.settings.namespace.clone();
        let name = input.settings.name.clone();
        let (admin, files) = self
            .admin
            .admin(&self.client, &namespace, &reach.mon_host)
            .await?;
        let machine =
            mon_failover::Machine::new(self.machine.clone()).map_err(|e| failover_error(&e))?;
        let runtime = KubeMonRuntime::new(
            self.client.clone(),
            input.settings,
            mons,
            template,
            canary_image,
        )
        .with_mcs_version(input.mcs_version);
        let store = StatusStateStore::new(self.client.clone(), &namespace, &name);
        let mut driver = Driver::resume(
            machine,
            admin,
            Arc::new(runtime),
            Arc::new(store),
            reach.max_mon_id,
        )
        .await
        .map_err(|e| failover_error(&e))?;
        let ticks = run_ticks(&mut driver, input.now, MAX_TICKS_PER_RECONCILE)
            .await
            .map_err(|e| failover_error(&e))?;
        drop(files);
        Ok(Some(MigrationReport::after_ticks(driver.state(), &ticks)))
    }
}

/// The first mon the status marks to be replaced: the template of a new migration's mon.
fn first_mon_to_replace(mons: &BTreeMap<MonId, MonAddress>) -> Option<MonId> {
    mons.iter()
        .find(|(_, address)| address.replace)
        .map(|(id, _)| id.clone())
}

/// The image of the new mon's canary: the cluster's Ceph image.
fn canary_image(cluster: &CephCluster) -> Result<String, MigrationError> {
    Ok(cluster
        .spec
        .pointer("/cephVersion/image")
        .and_then(Value::as_str)
        .ok_or_else(|| {
            MigrationError::Shape(
                "spec.cephVersion.image is not set: no image for the mon canary".to_owned(),
            )
        })?
        .to_owned())
}

/// A failure of the mon-failover machine or its driver, as the migration reports it.
fn failover_error(error: &(dyn std::error::Error + 'static)) -> MigrationError {
    MigrationError::Shape(format!("mon failover: {}", ErrorChain(error)))
}

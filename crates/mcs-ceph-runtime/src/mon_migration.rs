//! Mon migration: the operator's ports for [`mon_failover`] — a Kubernetes [`MonRuntime`]
//! ([`KubeMonRuntime`]: a new mon's Rook-layout Service, canary and mon Deployments, its entry
//! in `rook-ceph-mon-endpoints`), a [`StateStore`] in the operator's own status object
//! ([`StatusStateStore`]), the `ceph` CLI with the admin keyring from the cluster's Secret
//! ([`ceph_cli_from_secret`]) — and the [`gate`] that says when the machine may act (the pure
//! gate is [`mcs_ceph_core::migration`]'s; this one reads the machine's stored state for it).
//! The new mon's objects are ceph-address-plan's typed builders ([`mon_service`],
//! [`ceph_address_plan::mon_objects`]).
//!
//! The mon-failover machine decides every step (one mon at a time, only with full quorum);
//! nothing here re-implements its rules. The runtime makes the new mon's Service (as Rook
//! does for the mons it places); its ServiceExport is the plan's: once the runtime lists the
//! new mon in `rook-ceph-mon-endpoints` (without an endpoint, as Rook does while a mon is
//! being placed), the decision exports its Service and resolves its global IP on the same
//! path as every OSD's, and the runtime reads that IP back from the status.
//!
//! Rook reads the same `multiClusterService` field; the operator migrates mons only for a
//! CephCluster that opts in with the annotation [`MIGRATION_ANNOTATION`]` = "enabled"`, set
//! once Rook's own mon health check (and with it Rook's MCS failover) is off.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, PoisonError};

use async_trait::async_trait;
use ceph_address_plan::mon_objects::{self, ShapeError, uses_claim};
use ceph_address_plan::{
    ClusterSettings, MonId, MonInput, cluster_owner_reference, format, mon_service, rook,
};
use clusterset_daemon::ErrorChain;
use clusterset_daemon::apply::{Ownership, delete_with};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, Resource};
use mcs_ceph_core::snapshot::McsVersion;
use mcs_types::v1beta1::ServiceExport;
use mon_failover::{
    Addressing, CephMonAdmin, MachineState, MonRuntime, Placement, RuntimeError, StateStore,
    StoreError, judge_placement,
};
use mon_failover_io::CephCli;
use serde_json::{Value, json};

use crate::kube_io::not_found;
use mcs_ceph_api::{AddressingStatus, CephCluster, CephClusterAddressing};
use mcs_ceph_core::config::FIELD_MANAGER;

pub use ceph_address_plan::mon_objects::mon_claim_name;
pub use ceph_address_plan::rook::label::MON_CANARY as MON_CANARY_LABEL;
use ceph_address_plan::rook_objects;
pub use ceph_address_plan::rook_objects::mon_host_of_endpoints;
pub use mcs_ceph_core::migration::{
    Gate, MIGRATION_ANNOTATION, MIGRATION_ENABLED, MonAddress, mon_addresses, opted_in,
};
/// The field manager of the writes that belong to the mon migration alone: the machine's state
/// in the status object and the mon keys of `rook-ceph-mon-endpoints` it changes between two
/// plans. Distinct from [`FIELD_MANAGER`], so that neither's apply drops the other's fields.
pub const MON_FAILOVER_FIELD_MANAGER: &str = "mcs-ceph-operator-mon-failover";
/// The Secret with the cluster's admin key.
pub const MON_SECRET: &str = "rook-ceph-mon";

/// A failure of the operator's mon-migration ports.
#[derive(Debug, thiserror::Error)]
pub enum MigrationError {
    /// A Kubernetes request failed.
    #[error("{action}")]
    Api {
        /// What was being done.
        action: String,
        /// The kube error.
        source: Box<kube::Error>,
    },
    /// An object does not have the shape the migration needs.
    #[error("{0}")]
    Shape(String),
    /// Writing the admin keyring or configuration failed.
    #[error("{context}")]
    Io {
        /// What was being done.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
}

impl From<ShapeError> for MigrationError {
    fn from(error: ShapeError) -> Self {
        Self::Shape(error.0)
    }
}

impl From<MigrationError> for RuntimeError {
    fn from(error: MigrationError) -> Self {
        RuntimeError::Other(Box::new(error))
    }
}

impl From<MigrationError> for StoreError {
    fn from(error: MigrationError) -> Self {
        StoreError::Other(Box::new(error))
    }
}

fn api(action: impl Into<String>) -> impl FnOnce(kube::Error) -> MigrationError {
    let action = action.into();
    move |source| MigrationError::Api {
        action,
        source: Box::new(source),
    }
}

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
        let object = self.api.get_opt(&self.name).await.map_err(api(format!(
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
            .map_err(api(format!(
                "saving the mon failover state in CephClusterAddressing {}/{}",
                self.namespace, self.name
            )))?;
        self.remember(Some(state.clone()));
        Ok(())
    }
}

/// [`MonRuntime`] on Kubernetes, the Rook way, for one CephCluster and one reconcile:
///
/// - `provision_address`: the mon's Service `rook-ceph-mon-<id>` (Rook's labels, selector and
///   ports), the canary Deployment `rook-ceph-mon-<id>-canary` (the mon's labels plus
///   `mon_canary=true`, a sleep loop: a ready endpoint for the new mon's Service, so its
///   export resolves before the mon exists) and the mon's entry in `rook-ceph-mon-endpoints`
///   (`<id>=:<port>`, `maxMonId` raised); the plan then exports the mon's Service and the
///   operator resolves its global IP, which this answers from the status once known;
/// - `start`: the mon Deployment `rook-ceph-mon-<id>`, derived from the Deployment of the mon
///   it replaces (same image, volumes, security) with the new id, Rook's mon labels and
///   selector, `--public-addr=<global>` and `--public-bind-addr=$(ROOK_POD_IP)`, labelled
///   `ceph.rook.io/do-not-reconcile`; its endpoint in `rook-ceph-mon-endpoints`; the canary
///   deleted;
/// - `stop`: the mon Deployment scaled to 0;
/// - `delete`: the mon Deployment, canary, Service and ServiceExport deleted (absent is fine),
///   the mon's entry removed from `rook-ceph-mon-endpoints`.
///
/// Every write is a server-side apply (force) or a delete; every method is idempotent.
pub struct KubeMonRuntime {
    client: Client,
    settings: ClusterSettings,
    mons: BTreeMap<MonId, MonAddress>,
    template: Option<MonId>,
    canary_image: String,
    mcs_version: McsVersion,
}

impl std::fmt::Debug for KubeMonRuntime {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeMonRuntime")
            .field("namespace", &self.settings.namespace)
            .field("mons", &self.mons)
            .field("template", &self.template)
            .finish_non_exhaustive()
    }
}

impl KubeMonRuntime {
    /// A runtime for the cluster of `settings`, knowing the mons of this reconcile's status
    /// (`mons`), deriving new mon Deployments from `template`'s (the mon being replaced) and
    /// running canaries on `canary_image` (the cluster's Ceph image).
    pub fn new(
        client: Client,
        settings: ClusterSettings,
        mons: BTreeMap<MonId, MonAddress>,
        template: Option<MonId>,
        canary_image: String,
    ) -> Self {
        Self {
            client,
            settings,
            mons,
            template,
            canary_image,
            mcs_version: McsVersion::V1Beta1,
        }
    }

    /// The same runtime for a cluster whose MCS API is served in `version` (the replaced mon's
    /// ServiceExport is deleted in that version; v1beta1 unless told).
    pub fn with_mcs_version(mut self, version: McsVersion) -> Self {
        self.mcs_version = version;
        self
    }

    fn namespace(&self) -> &str {
        &self.settings.namespace
    }

    fn deployments(&self) -> Api<Deployment> {
        Api::namespaced(self.client.clone(), self.namespace())
    }

    fn apply_params() -> PatchParams {
        Ownership::Force.params(FIELD_MANAGER)
    }

    /// The owner reference of the new mon's Service and canary: the CephCluster, not as
    /// controller, blocking its deletion.
    fn owner(&self) -> Option<OwnerReference> {
        let mut owner = cluster_owner_reference(&self.settings, false)?;
        owner.block_owner_deletion = Some(true);
        Some(owner)
    }

    fn port(&self) -> u16 {
        self.settings.new_mon_port()
    }

    /// The Service of a new mon, as Rook makes a mon's (`createService`): the mon's labels, the
    /// selector its canary and its pods match, the mon ports (target port = port), owned by the
    /// CephCluster. The plan exports it; the canary's endpoint lets the export resolve before the
    /// mon runs.
    pub fn service(&self, mon: &MonId) -> Service {
        mon_service(
            &self.settings,
            &MonInput::new(mon.clone()),
            self.port(),
            self.owner(),
        )
    }

    /// The canary Deployment of a new mon ([`mon_objects::mon_canary`] on the cluster's Ceph
    /// image).
    pub fn canary(&self, mon: &MonId) -> Deployment {
        mon_objects::mon_canary(
            &self.settings,
            mon,
            &self.canary_image,
            self.port(),
            self.owner(),
        )
    }

    /// The mon Deployment of `mon` advertising `address`, derived from `template` (the
    /// Deployment of the mon it replaces): [`mon_objects::mon_deployment`].
    pub fn mon_deployment(
        &self,
        template: &Deployment,
        mon: &MonId,
        address: IpAddr,
    ) -> Result<Deployment, MigrationError> {
        Ok(mon_objects::mon_deployment(
            &self.settings,
            template,
            mon,
            address,
            self.port(),
        )?)
    }

    /// The new mon's PersistentVolumeClaim, derived from the claim of the mon it replaces
    /// (`template`, of mon `old`): [`mon_objects::mon_claim`].
    pub fn mon_claim(
        &self,
        template: &PersistentVolumeClaim,
        old: &str,
        mon: &MonId,
    ) -> Result<PersistentVolumeClaim, MigrationError> {
        Ok(mon_objects::mon_claim(
            self.namespace(),
            template,
            old,
            mon,
        )?)
    }

    /// Makes `mon`'s claim from the claim of the mon `old`, unless it exists already.
    async fn ensure_claim(&self, old: &str, mon: &MonId) -> Result<(), MigrationError> {
        let claims: Api<PersistentVolumeClaim> =
            Api::namespaced(self.client.clone(), self.namespace());
        let name = mon_claim_name(mon.as_str());
        let existing = claims.get_opt(&name).await.map_err(api_err(format!(
            "reading claim {}/{name}",
            self.namespace()
        )))?;
        if existing.is_some() {
            return Ok(());
        }
        let template_name = mon_claim_name(old);
        let template = claims.get(&template_name).await.map_err(api_err(format!(
            "reading the claim {}/{template_name} of mon {old}",
            self.namespace()
        )))?;
        let claim = self.mon_claim(&template, old, mon)?;
        claims
            .patch(&name, &Self::apply_params(), &Patch::Apply(&claim))
            .await
            .map_err(api_err(format!(
                "applying claim {}/{name}",
                self.namespace()
            )))?;
        Ok(())
    }

    /// Sets (or with `None` removes, with its placement) `mon`'s entry in
    /// `rook-ceph-mon-endpoints`, raising `maxMonId` to the mon's index, and records it in
    /// `mapping` on the node of `placed_like` (the mon whose pod spec it got) when that one has
    /// a node there: read from the API server, applied under [`MON_FAILOVER_FIELD_MANAGER`] with
    /// the same keys every time. Returns the ConfigMap's new `data`.
    async fn set_endpoint(
        &self,
        mon: &MonId,
        endpoint: Option<&str>,
        placed_like: Option<&MonId>,
    ) -> Result<BTreeMap<String, String>, MigrationError> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), self.namespace());
        let name = rook::MON_ENDPOINTS_CONFIG_MAP;
        let current = api
            .get(name)
            .await
            .map_err(api_err(format!("reading {}/{name}", self.namespace())))?;
        let data = current.data.unwrap_or_default();
        let written = format::edit_mon_endpoints(&data, mon, endpoint, placed_like);
        let body = json!({
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": self.namespace()},
            "data": written,
        });
        let params = Ownership::Force.params(MON_FAILOVER_FIELD_MANAGER);
        api.patch(name, &params, &Patch::Apply(&body))
            .await
            .map_err(api_err(format!("applying {}/{name}", self.namespace())))?;
        let mut data = data;
        data.extend(written);
        Ok(data)
    }

    /// Points `rook-ceph-config`'s `mon_host` (and `mon_initial_members`) at the mons that
    /// `rook-ceph-mon-endpoints` lists with an endpoint, as Rook does when its mons change: a
    /// daemon or client that starts in the middle of a migration finds the mons that run now,
    /// not only the ones that ran before it.
    async fn follow_mon_endpoints(
        &self,
        data: &BTreeMap<String, String>,
    ) -> Result<(), MigrationError> {
        let config = mon_host_of_endpoints(data);
        let secret = ceph_address_plan::rook_objects::config_secret(self.namespace(), &config);
        let name = rook::CONFIG_SECRET;
        Api::<Secret>::namespaced(self.client.clone(), self.namespace())
            .patch(
                name,
                &Ownership::Force.params(MON_FAILOVER_FIELD_MANAGER),
                &Patch::Apply(&secret),
            )
            .await
            .map_err(api_err(format!("applying {}/{name}", self.namespace())))?;
        Ok(())
    }

    async fn delete_if_present<K>(&self, name: &str) -> Result<(), MigrationError>
    where
        K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
            + Clone
            + std::fmt::Debug
            + serde::de::DeserializeOwned,
    {
        delete_with::<K>(
            &self.client,
            self.namespace(),
            name,
            &DeleteParams::foreground(),
        )
        .await
        .map_err(api_err(format!(
            "deleting {} {}/{name}",
            K::kind(&()),
            self.namespace()
        )))
    }
}

fn api_err(action: String) -> impl FnOnce(kube::Error) -> MigrationError {
    api(action)
}

#[async_trait]
impl MonRuntime for KubeMonRuntime {
    async fn provision_address(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<IpAddr>, RuntimeError> {
        if addressing != Addressing::Clusterset {
            return Err(RuntimeError::NoAddress {
                mon: mon.clone(),
                addressing,
                fix: "moving mons back to cluster IPs is not automated by this operator yet"
                    .to_owned(),
            });
        }
        // The mon's Service first: Rook makes mon Services, but not for a mon it did not place,
        // and an export without its Service never becomes valid (MCS: `Valid=False`,
        // `NoService`), so the new mon's address would never be known.
        let service = self.service(mon);
        let service_name = format!("{}{mon}", rook::MON_NAME_PREFIX);
        Api::<Service>::namespaced(self.client.clone(), self.namespace())
            .patch(
                &service_name,
                &Self::apply_params(),
                &Patch::Apply(&service),
            )
            .await
            .map_err(api_err(format!(
                "applying Service {}/{service_name}",
                self.namespace()
            )))?;
        let canary = self.canary(mon);
        let name = format!("{}{mon}-canary", rook::MON_NAME_PREFIX);
        self.deployments()
            .patch(&name, &Self::apply_params(), &Patch::Apply(&canary))
            .await
            .map_err(api_err(format!("applying {}/{name}", self.namespace())))?;
        let known = self.mons.get(mon).and_then(|m| m.global_ip);
        if known.is_none() {
            // Listed without an endpoint, the plan exports the mon's Service and resolves it.
            self.set_endpoint(mon, Some(&format!(":{}", self.port())), None)
                .await?;
        }
        Ok(known)
    }

    async fn placement(
        &self,
        mon: &MonId,
        advertised: IpAddr,
        addressing: Addressing,
    ) -> Result<Placement, RuntimeError> {
        if addressing != Addressing::Clusterset {
            return Ok(Placement::Unknown);
        }
        Ok(match self.mons.get(mon) {
            Some(known) => judge_placement(advertised, known.global_ip, known.replace),
            None => Placement::Unknown,
        })
    }

    async fn start(&self, mon: &MonId, address: IpAddr) -> Result<(), RuntimeError> {
        let template_id = self.template.as_ref().ok_or_else(|| {
            MigrationError::Shape(format!(
                "no mon Deployment to derive mon {mon}'s from: no mon is being replaced"
            ))
        })?;
        let template_name = format!("{}{template_id}", rook::MON_NAME_PREFIX);
        let name = format!("{}{mon}", rook::MON_NAME_PREFIX);
        let deployments = self.deployments();
        let existing = deployments
            .get_opt(&name)
            .await
            .map_err(api_err(format!("reading {}/{name}", self.namespace())))?;
        if existing.is_none() {
            let template = deployments
                .get(&template_name)
                .await
                .map_err(api_err(format!(
                    "reading the template mon Deployment {}/{template_name}",
                    self.namespace()
                )))?;
            let deployment = self.mon_deployment(&template, mon, address)?;
            if uses_claim(&deployment) {
                self.ensure_claim(template_id.as_str(), mon).await?;
            }
            deployments
                .patch(&name, &Self::apply_params(), &Patch::Apply(&deployment))
                .await
                .map_err(api_err(format!("applying {}/{name}", self.namespace())))?;
        } else {
            let scale = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": self.namespace()},
                "spec": {"replicas": 1}});
            let params = Ownership::Force.params(MON_FAILOVER_FIELD_MANAGER);
            deployments
                .patch(&name, &params, &Patch::Apply(&scale))
                .await
                .map_err(api_err(format!("scaling {}/{name} to 1", self.namespace())))?;
        }
        let endpoint = format::endpoint(address, self.port());
        // The new mon's pod spec (node selector, affinity) is the template's: so is its place.
        let data = self
            .set_endpoint(mon, Some(&endpoint), self.template.as_ref())
            .await?;
        self.follow_mon_endpoints(&data).await?;
        self.delete_if_present::<Deployment>(&format!("{name}-canary"))
            .await?;
        Ok(())
    }

    async fn stop(&self, mon: &MonId) -> Result<(), RuntimeError> {
        let name = format!("{}{mon}", rook::MON_NAME_PREFIX);
        let scale = json!({"apiVersion": "apps/v1", "kind": "Deployment",
            "metadata": {"name": name, "namespace": self.namespace()},
            "spec": {"replicas": 0}});
        let params = Ownership::Force.params(MON_FAILOVER_FIELD_MANAGER);
        match self
            .deployments()
            .patch(&name, &params, &Patch::Apply(&scale))
            .await
        {
            Ok(_) => Ok(()),
            Err(error) if not_found(&error) => Ok(()),
            Err(error) => {
                Err(api_err(format!("scaling {}/{name} to 0", self.namespace()))(error).into())
            }
        }
    }

    async fn delete(&self, mon: &MonId) -> Result<(), RuntimeError> {
        let name = format!("{}{mon}", rook::MON_NAME_PREFIX);
        self.delete_if_present::<Deployment>(&name).await?;
        self.delete_if_present::<Deployment>(&format!("{name}-canary"))
            .await?;
        self.delete_if_present::<Service>(&name).await?;
        match self.mcs_version {
            McsVersion::V1Beta1 => self.delete_if_present::<ServiceExport>(&name).await?,
            McsVersion::V1Alpha1 => {
                self.delete_if_present::<mcs_types::v1alpha1::ServiceExport>(&name)
                    .await?;
            }
        }
        // A PVC-backed mon's store (Rook deletes it too when it removes a mon); the claim
        // stays until the mon's pod is gone (Kubernetes' pvc-protection).
        self.delete_if_present::<PersistentVolumeClaim>(&mon_claim_name(mon.as_str()))
            .await?;
        let data = self.set_endpoint(mon, None, None).await?;
        self.follow_mon_endpoints(&data).await?;
        Ok(())
    }
}

/// A private directory holding the admin keyring and a `ceph.conf`, removed when dropped.
#[derive(Debug)]
pub struct AdminFiles {
    dir: tempfile::TempDir,
}

impl AdminFiles {
    /// The `ceph.conf`.
    pub fn conf(&self) -> PathBuf {
        self.dir.path().join("ceph.conf")
    }

    /// The keyring.
    pub fn keyring(&self) -> PathBuf {
        self.dir.path().join("keyring")
    }
}

fn secret_value(secret: &Secret, key: &str) -> Option<String> {
    let bytes = secret.data.as_ref()?.get(key)?;
    String::from_utf8(bytes.0.clone())
        .ok()
        .map(|s| s.trim().to_owned())
        .filter(|s| !s.is_empty())
}

/// The client name and key of the cluster's admin in Rook's `rook-ceph-mon` Secret:
/// `ceph-username`/`ceph-secret` when present (Rook's current keys), else `client.admin` with
/// `admin-secret` (older Rook).
pub fn admin_key(secret: &Secret) -> Result<(String, String), MigrationError> {
    if let Some(key) = secret_value(secret, "ceph-secret") {
        let name =
            secret_value(secret, "ceph-username").unwrap_or_else(|| "client.admin".to_owned());
        return Ok((name, key));
    }
    if let Some(key) = secret_value(secret, "admin-secret") {
        return Ok(("client.admin".to_owned(), key));
    }
    Err(MigrationError::Shape(format!(
        "the Secret {MON_SECRET} has neither ceph-secret nor admin-secret"
    )))
}

fn write_private(path: &std::path::Path, text: &str) -> Result<(), MigrationError> {
    use std::io::Write as _;
    use std::os::unix::fs::OpenOptionsExt as _;
    let io = |source| MigrationError::Io {
        context: format!("writing {}", path.display()),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
        .map_err(io)?;
    file.write_all(text.as_bytes()).map_err(io)
}

/// The `ceph` CLI as the cluster's admin: reads the key from the `rook-ceph-mon` Secret of
/// `namespace`, writes it as a keyring (mode 0600, in a private temporary directory, with a
/// `ceph.conf` naming `mon_host`) and returns the adapter with the files, which live as long
/// as the returned [`AdminFiles`].
pub async fn ceph_cli_from_secret(
    client: Client,
    namespace: &str,
    mon_host: &str,
) -> Result<(CephCli, AdminFiles), MigrationError> {
    let secrets: Api<Secret> = Api::namespaced(client, namespace);
    let secret = secrets
        .get(MON_SECRET)
        .await
        .map_err(api_err(format!("reading Secret {namespace}/{MON_SECRET}")))?;
    let (name, key) = admin_key(&secret)?;
    let dir = tempfile::Builder::new()
        .prefix("mcs-ceph-admin-")
        .tempdir()
        .map_err(|source| MigrationError::Io {
            context: "creating a private directory for the admin keyring".to_owned(),
            source,
        })?;
    let files = AdminFiles { dir };
    write_private(&files.keyring(), &format!("[{name}]\n\tkey = {key}\n"))?;
    write_private(
        &files.conf(),
        &format!("[global]\n\tmon_host = {mon_host}\n"),
    )?;
    let cli = CephCli::new(files.conf())
        .keyring(files.keyring())
        .client_name(name);
    Ok((cli, files))
}

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

/// Where the migration's mon admin (`ceph quorum_status`, `ceph mon remove`) comes from.
#[derive(Clone)]
pub enum AdminSource {
    /// The `ceph` CLI as the cluster's admin, with the key of Rook's `rook-ceph-mon` Secret
    /// ([`ceph_cli_from_secret`]), reaching the mons listed in `rook-ceph-mon-endpoints`.
    RookSecret,
    /// This admin for every cluster (tests, or a caller that brings its own).
    Fixed(Arc<dyn CephMonAdmin>),
}

impl std::fmt::Debug for AdminSource {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RookSecret => f.write_str("RookSecret"),
            Self::Fixed(_) => f.write_str("Fixed(..)"),
        }
    }
}

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

/// One executed failover step and what became of it (the `step`/`outcome` labels of the
/// failover step metric).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StepOutcome {
    /// `provision_address`, `start_mon`, `remove_from_monmap` or `delete_mon`.
    pub step: &'static str,
    /// `done`, `address_ready`, `address_pending` or `failed`.
    pub outcome: &'static str,
}

/// What the mon migration did in one reconcile.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MigrationReport {
    /// The machine's state (or why it waits) in one line, for the status message.
    pub line: String,
    /// A migration is in flight: reconcile again soon.
    pub in_progress: bool,
    /// The steps executed.
    pub steps: Vec<StepOutcome>,
    /// Why the migration failed in this reconcile (an error, or the machine's last failed
    /// step, which it retries); the line says it too.
    pub failure: Option<String>,
}

fn step_name(command: &mon_failover::Command) -> &'static str {
    use mon_failover::Command;
    match command {
        Command::ProvisionAddress { .. } => "provision_address",
        Command::StartMon { .. } => "start_mon",
        Command::RemoveFromMonmap { .. } => "remove_from_monmap",
        Command::DeleteMon { .. } => "delete_mon",
    }
}

fn step_outcome(outcome: &mon_failover::CommandOutcome) -> StepOutcome {
    use mon_failover::CommandOutcome;
    match outcome {
        CommandOutcome::Done(command) => StepOutcome {
            step: step_name(command),
            outcome: "done",
        },
        CommandOutcome::AddressReady { .. } => StepOutcome {
            step: "provision_address",
            outcome: "address_ready",
        },
        CommandOutcome::AddressPending { .. } => StepOutcome {
            step: "provision_address",
            outcome: "address_pending",
        },
        CommandOutcome::Failed { command, .. } => StepOutcome {
            step: step_name(command),
            outcome: "failed",
        },
    }
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
                let to_replace = mcs_ceph_core::migration::mon_to_replace(input.status);
                if in_flight.is_none() && !to_replace {
                    return Ok(None);
                }
                return Ok(Some(MigrationReport {
                    line: format!("waiting: {reason}"),
                    in_progress: in_flight.is_some(),
                    steps: Vec::new(),
                    failure: None,
                }));
            }
            Gate::Go => {}
        }
        let mons = mon_addresses(input.status);
        let template = in_flight.map(|m| m.old().clone()).or_else(|| {
            mons.iter()
                .find(|(_, address)| address.replace)
                .map(|(id, _)| id.clone())
        });
        let canary_image = input
            .cluster
            .spec
            .pointer("/cephVersion/image")
            .and_then(Value::as_str)
            .ok_or_else(|| {
                MigrationError::Shape(
                    "spec.cephVersion.image is not set: no image for the mon canary".to_owned(),
                )
            })?
            .to_owned();
        let empty = BTreeMap::new();
        let reach = rook_objects::mon_endpoints_reach(
            input
                .mon_endpoints
                .and_then(|c| c.data.as_ref())
                .unwrap_or(&empty),
        );
        let (max_mon_id, mon_host) = (reach.max_mon_id, reach.mon_host);
        let namespace = input.settings.namespace.clone();
        let name = input.settings.name.clone();
        let (admin, files): (Arc<dyn CephMonAdmin>, Option<AdminFiles>) = match &self.admin {
            AdminSource::Fixed(admin) => (Arc::clone(admin), None),
            AdminSource::RookSecret => {
                if mon_host.is_empty() {
                    return Err(MigrationError::Shape(format!(
                        "{} lists no mon endpoint to reach Ceph at",
                        rook::MON_ENDPOINTS_CONFIG_MAP
                    )));
                }
                let (cli, files) =
                    ceph_cli_from_secret(self.client.clone(), &namespace, &mon_host).await?;
                (Arc::new(cli), Some(files))
            }
        };
        let failover = |e: &(dyn std::error::Error + 'static)| {
            MigrationError::Shape(format!("mon failover: {}", ErrorChain(e)))
        };
        let machine = mon_failover::Machine::new(self.machine.clone()).map_err(|e| failover(&e))?;
        let runtime = KubeMonRuntime::new(
            self.client.clone(),
            input.settings,
            mons,
            template,
            canary_image,
        )
        .with_mcs_version(input.mcs_version);
        let store = StatusStateStore::new(self.client.clone(), &namespace, &name);
        let mut driver = mon_failover_io::Driver::resume(
            machine,
            admin,
            Arc::new(runtime),
            Arc::new(store),
            max_mon_id,
        )
        .await
        .map_err(|e| failover(&e))?;
        let ticks = run_ticks(&mut driver, input.now, MAX_TICKS_PER_RECONCILE)
            .await
            .map_err(|e| failover(&e))?;
        drop(files);
        let state = driver.state();
        let failure = state.last_error().map(str::to_owned);
        let line = match &failure {
            Some(error) => format!("{state}; last step failed, retrying: {error}"),
            None => state.to_string(),
        };
        Ok(Some(MigrationReport {
            line,
            failure,
            in_progress: state.migration().is_some(),
            steps: ticks
                .iter()
                .flat_map(|t| t.outcomes.iter().map(step_outcome))
                .collect(),
        }))
    }
}

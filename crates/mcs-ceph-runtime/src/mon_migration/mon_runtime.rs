//! [`KubeMonRuntime`]: the mon-failover machine's [`MonRuntime`] port on Kubernetes, the Rook
//! way — a new mon's Service, canary and mon Deployments, claim, and its entry in
//! `rook-ceph-mon-endpoints`.

use std::collections::BTreeMap;
use std::net::IpAddr;

use async_trait::async_trait;
use ceph_address_plan::mon_objects::{self, uses_claim};
use ceph_address_plan::{
    ClusterSettings, MonId, MonInput, cluster_owner_reference, format, mon_service, rook,
};
use clusterset_daemon::apply::{Ownership, delete_with};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, PersistentVolumeClaim, Secret, Service};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::OwnerReference;
use kube::api::{Api, DeleteParams, Patch, PatchParams};
use kube::{Client, Resource};
use mcs_ceph_core::config::FIELD_MANAGER;
use mcs_ceph_core::migration::MonAddress;
use mcs_ceph_core::snapshot::McsVersion;
use mcs_types::v1beta1::ServiceExport;
use mon_failover::{Addressing, MonRuntime, Placement, RuntimeError, judge_placement};
use serde_json::json;

use super::MON_FAILOVER_FIELD_MANAGER;
use super::error::{MigrationError, api_error};
use ceph_address_plan::mon_objects::mon_claim_name;
use ceph_address_plan::rook_objects::mon_host_of_endpoints;
use clusterset_daemon::apply::is_not_found;

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
        let existing = claims.get_opt(&name).await.map_err(api_error(format!(
            "reading claim {}/{name}",
            self.namespace()
        )))?;
        if existing.is_some() {
            return Ok(());
        }
        let template_name = mon_claim_name(old);
        let template = claims.get(&template_name).await.map_err(api_error(format!(
            "reading the claim {}/{template_name} of mon {old}",
            self.namespace()
        )))?;
        let claim = self.mon_claim(&template, old, mon)?;
        claims
            .patch(&name, &Self::apply_params(), &Patch::Apply(&claim))
            .await
            .map_err(api_error(format!(
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
            .map_err(api_error(format!("reading {}/{name}", self.namespace())))?;
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
            .map_err(api_error(format!("applying {}/{name}", self.namespace())))?;
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
            .map_err(api_error(format!("applying {}/{name}", self.namespace())))?;
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
        .map_err(api_error(format!(
            "deleting {} {}/{name}",
            K::kind(&()),
            self.namespace()
        )))
    }
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
            .map_err(api_error(format!(
                "applying Service {}/{service_name}",
                self.namespace()
            )))?;
        let canary = self.canary(mon);
        let name = format!("{}{mon}-canary", rook::MON_NAME_PREFIX);
        self.deployments()
            .patch(&name, &Self::apply_params(), &Patch::Apply(&canary))
            .await
            .map_err(api_error(format!("applying {}/{name}", self.namespace())))?;
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
            .map_err(api_error(format!("reading {}/{name}", self.namespace())))?;
        if existing.is_none() {
            let template = deployments
                .get(&template_name)
                .await
                .map_err(api_error(format!(
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
                .map_err(api_error(format!("applying {}/{name}", self.namespace())))?;
        } else {
            let scale = json!({"apiVersion": "apps/v1", "kind": "Deployment",
                "metadata": {"name": name, "namespace": self.namespace()},
                "spec": {"replicas": 1}});
            let params = Ownership::Force.params(MON_FAILOVER_FIELD_MANAGER);
            deployments
                .patch(&name, &params, &Patch::Apply(&scale))
                .await
                .map_err(api_error(format!(
                    "scaling {}/{name} to 1",
                    self.namespace()
                )))?;
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
            Err(error) if is_not_found(&error) => Ok(()),
            Err(error) => {
                Err(api_error(format!("scaling {}/{name} to 0", self.namespace()))(error).into())
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

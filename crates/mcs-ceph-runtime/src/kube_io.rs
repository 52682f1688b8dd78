//! The thin kube shell: the [`ClusterApi`] port the reconciler writes through, its kube
//! implementation ([`KubeApi`]: server-side apply under [`FIELD_MANAGER`], `events.k8s.io`
//! Events built by [`event_object`]), discovery of the MCS API, and the watch caches a snapshot is read
//! from ([`Caches`]), which refuse to answer before every watch has listed once.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use clusterset_daemon::apply::{self, Ownership, Precondition};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, ObjectReference, Service};
use k8s_openapi::api::events::v1::Event as KubeEvent;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, ObjectMeta};
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, PostParams};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::{Client, Resource, ResourceExt};
use mcs_types::{v1alpha1, v1beta1};

use mcs_ceph_api::{CephCluster, CephClusterAddressing};
use mcs_ceph_core::config::FIELD_MANAGER;
use mcs_ceph_core::decide::{EventNote, EventType, Write};
use mcs_ceph_core::snapshot::{McsApi, McsVersion, Snapshot};

/// The MCS API group.
pub const MCS_GROUP: &str = "multicluster.x-k8s.io";

/// A failed API call: 409 conflict or anything else (shared with the agent).
pub use clusterset_daemon::ApiError;

/// What the reconciler does to the cluster: writes and Events.
#[async_trait]
pub trait ClusterApi: Send + Sync {
    /// Carries out one write.
    async fn apply(&self, write: &Write) -> Result<(), ApiError>;
    /// Publishes an Event about the object `regarding` (the CephCluster).
    async fn event(&self, regarding: &ObjectReference, event: &EventNote) -> Result<(), ApiError>;
}

/// [`ClusterApi`] on a kube client.
#[derive(Clone)]
pub struct KubeApi {
    client: Client,
    instance: Option<String>,
}

impl std::fmt::Debug for KubeApi {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeApi").finish_non_exhaustive()
    }
}

impl KubeApi {
    /// Writes through `client`; Events name `instance` (the pod name) as reporting instance.
    pub fn new(client: Client, instance: Option<String>) -> Self {
        Self { client, instance }
    }
}

/// Object names hold at most this many characters.
const MAX_NAME_LEN: usize = 253;

/// The Event the operator publishes for `note` about `regarding` at `now`, reported by
/// [`FIELD_MANAGER`] from `instance` (the pod; the controller's name without one): what
/// kube-runtime's recorder (and client-go's) makes, named `<regarding>.<nanoseconds in hex>`,
/// except that the regarding name is cut where that would be longer than an object name may be
/// (a CephCluster's name may have 253 characters itself; the API server refuses longer names).
///
/// ```
/// use k8s_openapi::api::core::v1::ObjectReference;
/// use mcs_ceph_core::decide::EventNote;
/// use mcs_ceph_runtime::kube_io::event_object;
/// let regarding = ObjectReference {
///     name: Some("c".repeat(253)), namespace: Some("rook-ceph".into()), ..Default::default()
/// };
/// let note = EventNote::warning("InvalidName", "too long".into(), "CheckGuards");
/// let event = event_object(&regarding, &note, None, "2026-05-01T12:00:00Z".parse().unwrap());
/// let name = event.metadata.name.unwrap();
/// assert_eq!(name.len(), 253);
/// assert!(name.ends_with(".18ab6f4053a98000"), "{name}");
/// ```
pub fn event_object(
    regarding: &ObjectReference,
    note: &EventNote,
    instance: Option<&str>,
    now: Timestamp,
) -> KubeEvent {
    let suffix = format!(".{:x}", now.as_nanosecond());
    let regarding_name = regarding.name.as_deref().unwrap_or(FIELD_MANAGER);
    let keep = MAX_NAME_LEN.saturating_sub(suffix.len());
    let prefix = regarding_name
        .get(..keep.min(regarding_name.len()))
        .unwrap_or(regarding_name)
        .trim_end_matches(['.', '-']);
    KubeEvent {
        action: Some(note.action.to_owned()),
        reason: Some(note.reason.clone()),
        event_time: Some(MicroTime(now)),
        note: Some(note.note.clone()),
        metadata: ObjectMeta {
            name: Some(format!("{prefix}{suffix}")),
            namespace: regarding.namespace.clone(),
            ..ObjectMeta::default()
        },
        regarding: Some(regarding.clone()),
        reporting_controller: Some(FIELD_MANAGER.to_owned()),
        reporting_instance: Some(instance.unwrap_or(FIELD_MANAGER).to_owned()),
        type_: Some(
            match note.type_ {
                EventType::Normal => "Normal",
                EventType::Warning => "Warning",
            }
            .to_owned(),
        ),
        ..KubeEvent::default()
    }
}

/// Server-side applies an object the decision built, as the operator. Force: the operator's own
/// objects, and the fields of Rook's objects the plan decides (mon endpoint keys, mon_host),
/// which Rook's manager set before; the decision applies only those fields, so nothing else of
/// Rook's changes hands.
async fn apply_object<K>(client: &Client, object: &K) -> Result<(), ApiError>
where
    K: Resource<DynamicType = (), Scope = kube::core::NamespaceResourceScope>
        + serde::Serialize
        + serde::de::DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    apply::apply(
        client,
        FIELD_MANAGER,
        Ownership::Force,
        object,
        "the decision",
    )
    .await?;
    Ok(())
}

#[async_trait]
impl ClusterApi for KubeApi {
    async fn apply(&self, write: &Write) -> Result<(), ApiError> {
        match write {
            Write::ApplyService(service) => apply_object(&self.client, service.as_ref()).await,
            Write::ApplyServiceExport { export, version } => match version {
                McsVersion::V1Beta1 => apply_object(&self.client, export.as_ref()).await,
                McsVersion::V1Alpha1 => {
                    let alpha = v1alpha1::ServiceExport::from(export.as_ref().clone());
                    apply_object(&self.client, &alpha).await
                }
            },
            Write::ApplyStatus(object) => apply_object(&self.client, object.as_ref()).await,
            Write::ApplyMonEndpoints(object) => apply_object(&self.client, object.as_ref()).await,
            Write::ApplyMonConfig(object) => apply_object(&self.client, object.as_ref()).await,
            Write::ApplyOsdArgs {
                namespace,
                name,
                body,
            } => {
                // A partial Deployment (see rook_objects): sent as built, not through the
                // typed Deployment, whose required fields would claim the selector.
                apply::apply_document::<Deployment>(
                    &self.client,
                    FIELD_MANAGER,
                    Ownership::Force,
                    namespace,
                    name,
                    body.as_ref(),
                )
                .await?;
                Ok(())
            }
            Write::DeleteService {
                namespace,
                name,
                uid,
            } => {
                apply::delete::<Service>(&self.client, namespace, name, Precondition::Uid(uid))
                    .await
            }
            Write::DeleteServiceExport {
                namespace,
                name,
                uid,
                version,
            } => match version {
                McsVersion::V1Beta1 => {
                    apply::delete::<v1beta1::ServiceExport>(
                        &self.client,
                        namespace,
                        name,
                        Precondition::Uid(uid),
                    )
                    .await
                }
                McsVersion::V1Alpha1 => {
                    apply::delete::<v1alpha1::ServiceExport>(
                        &self.client,
                        namespace,
                        name,
                        Precondition::Uid(uid),
                    )
                    .await
                }
            },
        }
    }

    async fn event(&self, regarding: &ObjectReference, event: &EventNote) -> Result<(), ApiError> {
        let object = event_object(regarding, event, self.instance.as_deref(), Timestamp::now());
        let namespace = regarding.namespace.as_deref().unwrap_or("default");
        Api::<KubeEvent>::namespaced(self.client.clone(), namespace)
            .create(&PostParams::default(), &object)
            .await?;
        Ok(())
    }
}

/// Asks the API server which MCS API version it serves with both ServiceExport and
/// ServiceImport, v1beta1 first. Transport and server errors other than 404 are errors.
pub async fn discover_mcs_api(client: &Client) -> Result<McsApi, kube::Error> {
    let mut found = Vec::new();
    for version in [McsVersion::V1Beta1, McsVersion::V1Alpha1] {
        let group_version = format!("{MCS_GROUP}/{}", version.as_str());
        match client.list_api_group_resources(&group_version).await {
            Ok(list) => {
                let has = |name: &str| list.resources.iter().any(|r| r.name == name);
                if has("serviceexports") && has("serviceimports") {
                    return Ok(McsApi::Served(version));
                }
                found.push(format!(
                    "{group_version} lacks serviceexports or serviceimports"
                ));
            }
            Err(error) if apply::is_not_found(&error) => {
                found.push(format!("{group_version} is not served"));
            }
            Err(error) => return Err(error),
        }
    }
    Ok(McsApi::Missing(found.join(", ")))
}

/// The caches of the MCS resources, in the version the cluster serves.
#[derive(Clone)]
pub enum McsStores {
    /// The MCS API is not served: nothing is watched.
    None,
    /// `v1beta1`.
    V1Beta1 {
        /// ServiceExports.
        exports: Store<v1beta1::ServiceExport>,
        /// ServiceImports.
        imports: Store<v1beta1::ServiceImport>,
    },
    /// `v1alpha1` (converted to v1beta1 for the decision).
    V1Alpha1 {
        /// ServiceExports.
        exports: Store<v1alpha1::ServiceExport>,
        /// ServiceImports.
        imports: Store<v1alpha1::ServiceImport>,
    },
}

/// The reflector caches a [`Snapshot`] is read from, and the CephClusters'.
pub struct Caches {
    /// The CephClusters (whether one still exists: [`Caches::has_cluster`]).
    pub clusters: Store<CephCluster>,
    /// Services (label `rook_cluster`).
    pub services: Store<Service>,
    /// OSD Deployments (label `app=rook-ceph-osd`).
    pub deployments: Store<Deployment>,
    /// `rook-ceph-mon-endpoints` ConfigMaps.
    pub config_maps: Store<ConfigMap>,
    /// The operator's status objects.
    pub addressings: Store<CephClusterAddressing>,
    /// ServiceExports and ServiceImports.
    pub mcs: McsStores,
    /// What discovery said about the MCS API.
    pub mcs_api: McsApi,
    synced: AtomicBool,
}

impl std::fmt::Debug for Caches {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Caches")
            .field("mcs_api", &self.mcs_api)
            .field("synced", &self.is_synced())
            .finish_non_exhaustive()
    }
}

/// A cache has not listed its objects yet (or its watch was dropped).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("the watch caches have not synced yet: nothing is decided on a partial view")]
pub struct NotSynced;

fn in_namespace<K: Resource + Clone>(store: &Store<K>, namespace: &str) -> Vec<K>
where
    K::DynamicType: std::hash::Hash + Eq + Clone,
{
    store
        .state()
        .into_iter()
        .filter(|o| o.namespace().as_deref() == Some(namespace))
        .map(|o| o.as_ref().clone())
        .collect()
}

impl Caches {
    /// Caches over these stores; not synced until [`Caches::wait_synced`] returns.
    pub fn new(
        clusters: Store<CephCluster>,
        services: Store<Service>,
        deployments: Store<Deployment>,
        config_maps: Store<ConfigMap>,
        addressings: Store<CephClusterAddressing>,
        mcs: McsStores,
        mcs_api: McsApi,
    ) -> Self {
        Self {
            clusters,
            services,
            deployments,
            config_maps,
            addressings,
            mcs,
            mcs_api,
            synced: AtomicBool::new(false),
        }
    }

    /// Waits until every store has completed its first list, then marks the caches synced.
    /// Fails when a store's writer is gone (its watch will never deliver).
    pub async fn wait_synced(&self) -> Result<(), NotSynced> {
        let ready = async {
            self.clusters.wait_until_ready().await?;
            self.services.wait_until_ready().await?;
            self.deployments.wait_until_ready().await?;
            self.config_maps.wait_until_ready().await?;
            self.addressings.wait_until_ready().await?;
            match &self.mcs {
                McsStores::None => {}
                McsStores::V1Beta1 { exports, imports } => {
                    exports.wait_until_ready().await?;
                    imports.wait_until_ready().await?;
                }
                McsStores::V1Alpha1 { exports, imports } => {
                    exports.wait_until_ready().await?;
                    imports.wait_until_ready().await?;
                }
            }
            Ok::<(), kube::runtime::reflector::store::WriterDropped>(())
        };
        ready.await.map_err(|_| NotSynced)?;
        self.synced.store(true, Ordering::Release);
        Ok(())
    }

    /// Whether every store has listed once.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Acquire)
    }

    /// Whether the CephCluster `namespace/name` is in the cache (a deleted one leaves it
    /// before its watch event is handed on).
    pub fn has_cluster(&self, namespace: &str, name: &str) -> bool {
        self.clusters
            .get(&ObjectRef::new(name).within(namespace))
            .is_some()
    }

    /// What the operator sees of `cluster`: the objects of its namespace.
    pub fn snapshot(&self, cluster: &CephCluster) -> Result<Snapshot, NotSynced> {
        if !self.is_synced() {
            return Err(NotSynced);
        }
        let namespace = cluster.metadata.namespace.clone().unwrap_or_default();
        let name = cluster.metadata.name.clone().unwrap_or_default();
        let (exports, imports) = match &self.mcs {
            McsStores::None => (Vec::new(), Vec::new()),
            McsStores::V1Beta1 { exports, imports } => (
                in_namespace(exports, &namespace),
                in_namespace(imports, &namespace),
            ),
            McsStores::V1Alpha1 { exports, imports } => (
                in_namespace(exports, &namespace)
                    .into_iter()
                    .map(v1beta1::ServiceExport::from)
                    .collect(),
                in_namespace(imports, &namespace)
                    .into_iter()
                    .map(v1beta1::ServiceImport::from)
                    .collect(),
            ),
        };
        let mon_endpoints = in_namespace(&self.config_maps, &namespace)
            .into_iter()
            .find(|c| {
                c.metadata.name.as_deref()
                    == Some(ceph_address_plan::rook::MON_ENDPOINTS_CONFIG_MAP)
            });
        let prior = in_namespace(&self.addressings, &namespace)
            .into_iter()
            .find(|a| a.metadata.name.as_deref() == Some(name.as_str()));
        Ok(Snapshot {
            cluster: cluster.clone(),
            mcs_api: self.mcs_api.clone(),
            services: in_namespace(&self.services, &namespace),
            exports,
            imports,
            deployments: in_namespace(&self.deployments, &namespace),
            mon_endpoints,
            prior,
            // The reconciler's memory, not the caches'.
            lookups: mcs_ceph_core::decide::LookupMemory::new(),
        })
    }
}

/// The Event reference of a CephCluster.
pub fn cluster_reference(cluster: &CephCluster) -> ObjectReference {
    cluster.object_ref(&())
}

/// Shared caches.
pub type SharedCaches = Arc<Caches>;

//! The thin kube shell: watch streams that feed the core, and the writer that carries out its
//! writes with server-side apply under our field manager.

use async_trait::async_trait;
use clusterset_daemon::apply::{self, Ownership, Precondition};
use clusterset_daemon::watch::WatchBackoff;
use futures::stream::{BoxStream, StreamExt};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, PostParams};
use kube::runtime::{WatchStreamExt, watcher};
use kube::{Client, Resource};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use serde::de::DeserializeOwned;

use mcs_controller::broker::{BrokerRecord, Heartbeat};
use mcs_controller::core::Input;
use mcs_controller::watch::{
    Event, LEASES_SELECTOR, imported_slices_selector, local_slices_selector,
};
use mcs_controller::write::Write;

pub use mcs_controller::write::FIELD_MANAGER;

/// What the watches deliver: an input for the core, or a watch failure (retried with backoff
/// by the watcher; counted, logged, and otherwise harmless because the caches keep their last
/// complete view).
#[derive(Debug)]
pub enum Feed {
    /// A watch event.
    Input(Box<Input>),
    /// A watch failed.
    WatchError {
        /// Which watch.
        source: &'static str,
        /// Whether it watches the broker (hub) rather than the member cluster.
        broker: bool,
        /// Whether the API server did not answer ([`watch_no_answer`]): a connection error, a
        /// timeout or a 5xx. False when it answered with a refusal (403, 404, the routine 410
        /// "too old resource version"), which shows that it is up.
        unreachable: bool,
        /// What went wrong.
        error: String,
    },
}

impl Feed {
    /// The feed of a failed watch: `source` names it, `broker` says which API server it
    /// watches.
    pub fn watch_error(source: &'static str, broker: bool, error: &watcher::Error) -> Self {
        Self::WatchError {
            source,
            broker,
            unreachable: watch_no_answer(error),
            error: clusterset_daemon::ErrorChain(error).to_string(),
        }
    }
}

/// Whether a watch failed because its API server did not answer: a connection error, a
/// timeout, a 5xx ([`clusterset_daemon::no_answer`]). An API status below 500 is an answer: 403
/// (not allowed), 404 (not served), 410 Gone (the resource version is too old, routine after a
/// watch was away for a while).
///
/// ```
/// use kube::runtime::watcher::Error;
/// use clusterset_agent_runtime::kube_io::watch_no_answer;
/// let status = |code| Box::new(kube::core::Status::failure("no", "Reason").with_code(code));
/// assert!(!watch_no_answer(&Error::WatchError(status(410))));
/// assert!(!watch_no_answer(&Error::InitialListFailed(kube::Error::Api(status(403)))));
/// assert!(watch_no_answer(&Error::WatchFailed(kube::Error::Api(status(503)))));
/// ```
pub fn watch_no_answer(error: &watcher::Error) -> bool {
    match error {
        watcher::Error::InitialListFailed(e)
        | watcher::Error::WatchStartFailed(e)
        | watcher::Error::WatchFailed(e) => clusterset_daemon::no_answer(e),
        watcher::Error::WatchError(status) => status.code >= 500,
        watcher::Error::NoResourceVersion => false,
    }
}

/// A kube-runtime watch event as the core takes it: the same five cases, one to one.
pub fn core_event<K>(event: watcher::Event<K>) -> Event<K> {
    match event {
        watcher::Event::Apply(object) => Event::Apply(object),
        watcher::Event::Delete(object) => Event::Delete(object),
        watcher::Event::Init => Event::Init,
        watcher::Event::InitApply(object) => Event::InitApply(object),
        watcher::Event::InitDone => Event::InitDone,
    }
}

fn watch<K>(
    api: Api<K>,
    config: watcher::Config,
    source: &'static str,
    broker: bool,
    wrap: fn(Event<K>) -> Input,
) -> BoxStream<'static, Feed>
where
    K: Resource + Clone + DeserializeOwned + std::fmt::Debug + Send + 'static,
    K::DynamicType: Default,
{
    watcher(api, config)
        .backoff(WatchBackoff::default())
        .map(move |result| match result {
            Ok(event) => Feed::Input(Box::new(wrap(core_event(event)))),
            Err(error) => Feed::watch_error(source, broker, &error),
        })
        .boxed()
}

/// The member cluster's watches: Services, ServiceExports, Services' EndpointSlices, Namespaces,
/// ServiceImports and our imported EndpointSlices, all namespaces.
pub fn local_watches(client: &Client) -> Vec<BoxStream<'static, Feed>> {
    let all = watcher::Config::default();
    vec![
        watch(
            Api::<Service>::all(client.clone()),
            all.clone(),
            "services",
            false,
            Input::Service,
        ),
        watch(
            Api::<ServiceExport>::all(client.clone()),
            all.clone(),
            "serviceexports",
            false,
            Input::ServiceExport,
        ),
        watch(
            Api::<EndpointSlice>::all(client.clone()),
            all.clone().labels(&local_slices_selector()),
            "endpointslices",
            false,
            Input::LocalEndpointSlice,
        ),
        watch(
            Api::<Namespace>::all(client.clone()),
            all.clone(),
            "namespaces",
            false,
            Input::Namespace,
        ),
        watch(
            Api::<ServiceImport>::all(client.clone()),
            all.clone(),
            "serviceimports",
            false,
            Input::ServiceImport,
        ),
        watch(
            Api::<EndpointSlice>::all(client.clone()),
            all.labels(&imported_slices_selector()),
            "imported-endpointslices",
            false,
            Input::ImportedEndpointSlice,
        ),
    ]
}

/// The broker's watches: every cluster's records (in every namespace) and the heartbeat Leases
/// in the broker namespace.
pub fn broker_watches(client: &Client, namespace: &str) -> Vec<BoxStream<'static, Feed>> {
    vec![
        watch(
            // Every namespace: each cluster's records live in its own (and, during the upgrade,
            // in the shared broker namespace); the core tells which could be that cluster's.
            Api::<BrokerRecord>::all(client.clone()),
            watcher::Config::default(),
            "exportrecords",
            true,
            Input::Record,
        ),
        watch(
            Api::<Lease>::namespaced(client.clone(), namespace),
            watcher::Config::default().labels(LEASES_SELECTOR),
            "leases",
            true,
            Input::Lease,
        ),
    ]
}

/// A failed write: 409 conflict or anything else (shared with the operator).
pub type WriteError = clusterset_daemon::ApiError;

/// Carries out the core's writes.
#[cfg_attr(test, mockall::automock)]
#[async_trait]
pub trait AgentWriter: Send + Sync {
    /// One write to the member cluster or the broker.
    async fn write(&self, write: &Write) -> Result<(), WriteError>;
    /// Creates or renews this cluster's heartbeat Lease; returns the Lease as stored (`None`
    /// for `Blocked`, which writes nothing).
    async fn heartbeat(&self, heartbeat: &Heartbeat) -> Result<Option<Lease>, WriteError>;
}

/// [`AgentWriter`] on two kube clients: the member cluster's and the hub's.
#[derive(Clone)]
pub struct KubeWriter {
    local: Client,
    broker: Client,
    broker_namespace: String,
}

impl std::fmt::Debug for KubeWriter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KubeWriter")
            .field("broker_namespace", &self.broker_namespace)
            .finish_non_exhaustive()
    }
}

impl KubeWriter {
    /// A writer on the member cluster's client and the hub's client.
    pub fn new(local: Client, broker: Client, broker_namespace: &str) -> Self {
        Self {
            local,
            broker,
            broker_namespace: broker_namespace.to_owned(),
        }
    }
}

#[async_trait]
impl AgentWriter for KubeWriter {
    async fn write(&self, write: &Write) -> Result<(), WriteError> {
        // Local objects are ours: force takes over fields another manager set. Broker records
        // are applied without force, so a record some other manager claims is a 409 that the
        // ServiceExport reports instead of silently overwriting.
        let local = &self.local;
        match write {
            Write::ApplyServiceImport(import) => {
                apply::apply(
                    local,
                    FIELD_MANAGER,
                    Ownership::Force,
                    import.as_ref(),
                    CORE,
                )
                .await?;
            }
            Write::ApplyServiceImportStatus(import) => {
                let (namespace, name) = object_key(&import.metadata)?;
                apply::apply_status::<ServiceImport>(
                    local,
                    FIELD_MANAGER,
                    Ownership::Force,
                    namespace,
                    name,
                    &import.status,
                )
                .await?;
            }
            Write::DeleteServiceImport(key) => {
                apply::delete::<ServiceImport>(
                    local,
                    &key.namespace,
                    &key.name,
                    Precondition::None,
                )
                .await?;
            }
            Write::ApplyEndpointSlice(slice) => {
                apply::apply(local, FIELD_MANAGER, Ownership::Force, slice.as_ref(), CORE).await?;
            }
            Write::DeleteEndpointSlice { key, name } => {
                apply::delete::<EndpointSlice>(local, &key.namespace, name, Precondition::None)
                    .await?;
            }
            // Not forced: a Service of that name that someone else made since the decision read
            // the cache keeps its fields (a 409 conflict), and is never taken over.
            Write::ApplyDerivedService(service) => {
                apply::apply(
                    local,
                    FIELD_MANAGER,
                    Ownership::Shared,
                    service.as_ref(),
                    CORE,
                )
                .await?;
            }
            Write::DeleteDerivedService { key, name, uid } => {
                let precondition = if uid.is_empty() {
                    Precondition::None
                } else {
                    Precondition::Uid(uid)
                };
                apply::delete::<Service>(local, &key.namespace, name, precondition).await?;
            }
            Write::ApplyServiceExportStatus { key, status } => {
                apply::apply_status::<ServiceExport>(
                    local,
                    FIELD_MANAGER,
                    Ownership::Force,
                    &key.namespace,
                    &key.name,
                    status,
                )
                .await?;
            }
            Write::PublishRecord(record) => {
                apply::apply(
                    &self.broker,
                    FIELD_MANAGER,
                    Ownership::Shared,
                    record.as_ref(),
                    CORE,
                )
                .await?;
            }
            Write::WithdrawRecord {
                namespace, name, ..
            } => {
                apply::delete::<BrokerRecord>(&self.broker, namespace, name, Precondition::None)
                    .await?;
            }
        }
        Ok(())
    }

    async fn heartbeat(&self, heartbeat: &Heartbeat) -> Result<Option<Lease>, WriteError> {
        let api = Api::<Lease>::namespaced(self.broker.clone(), &self.broker_namespace);
        let params = PostParams {
            field_manager: Some(FIELD_MANAGER.to_owned()),
            ..Default::default()
        };
        Ok(match heartbeat {
            Heartbeat::Create(lease) => Some(api.create(&params, lease).await?),
            Heartbeat::Replace(lease) => {
                let (_, name) = object_key(&lease.metadata)?;
                Some(api.replace(name, &params, lease).await?)
            }
            Heartbeat::Blocked { .. } => None,
        })
    }
}

/// Who builds the objects the writer sends, for the error when one lacks a namespace or name.
const CORE: &str = "the core";

/// The namespace and name of an object the core built.
fn object_key(
    meta: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) -> Result<(&str, &str), WriteError> {
    clusterset_daemon::object_key(meta, CORE)
}

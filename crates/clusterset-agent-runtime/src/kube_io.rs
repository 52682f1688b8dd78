//! The thin kube shell: watch streams that feed the core, and the writer that carries out its
//! writes with server-side apply under our field manager.

use async_trait::async_trait;
use clusterset_daemon::apply::{self, Ownership, Precondition};
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

/// How long a failed watch waits before it tries again: 500 ms, doubling with every further
/// failure, at most [`WatchBackoff::MAX`]; back to 500 ms once the watch delivers again. Each
/// wait is made up to [`WatchBackoff::JITTER_PERCENT`] longer or shorter at random, so that
/// the watches of many agents (eight each) that failed together when the hub went away do not
/// all try again in the same instant when it returns.
///
/// kube's default backoff grows to 30 s, so after an API server came back a watch could wait
/// that long, twice (its first attempt usually fails with "too old resource version" and is
/// followed by a list), before the agent saw any change made meanwhile. Capped at 5 s (6.25 s
/// with its jitter), an agent catches up within seconds of the API server's return; eight
/// watches per agent then try about 1.6 times a second while it is down.
///
/// ```
/// use clusterset_agent_runtime::kube_io::WatchBackoff;
/// use std::time::Duration;
/// let waits: Vec<Duration> = WatchBackoff::with_seed(7).take(6).collect();
/// let bases = [500, 1000, 2000, 4000, 5000, 5000].map(Duration::from_millis);
/// for (wait, base) in waits.iter().zip(bases) {
///     assert!(*wait >= base * 3 / 4 && *wait <= base * 5 / 4, "{wait:?} {base:?}");
/// }
/// // The same seed, the same waits.
/// assert_eq!(waits, WatchBackoff::with_seed(7).take(6).collect::<Vec<_>>());
/// ```
#[derive(Debug, Clone)]
pub struct WatchBackoff {
    next: std::time::Duration,
    /// xorshift64 state (never zero).
    state: u64,
}

impl WatchBackoff {
    /// The first wait (before its jitter).
    pub const MIN: std::time::Duration = std::time::Duration::from_millis(500);
    /// The longest wait (before its jitter).
    pub const MAX: std::time::Duration = std::time::Duration::from_secs(5);
    /// How much longer or shorter than its base a wait may be, in percent.
    pub const JITTER_PERCENT: u64 = 25;

    /// A backoff whose jitter follows from `seed` (the same seed gives the same waits).
    pub fn with_seed(seed: u64) -> Self {
        Self {
            next: Self::MIN,
            state: splitmix64(seed) | 1,
        }
    }

    /// The next pseudo-random number (xorshift64).
    fn random(&mut self) -> u64 {
        let mut x = self.state;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.state = x;
        x
    }
}

/// One step of splitmix64: spreads a seed's bits (nearby seeds give unrelated states).
fn splitmix64(seed: u64) -> u64 {
    let mut z = seed.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

impl Default for WatchBackoff {
    /// Seeded from the process id, the time and a count of the backoffs made, so that every
    /// watch of every agent has its own jitter.
    fn default() -> Self {
        static MADE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        let made = MADE.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let seed = (u64::from(std::process::id()) << 32)
            ^ u64::from(nanos)
            ^ made.wrapping_mul(0x2545_F491_4F6C_DD1D);
        Self::with_seed(seed)
    }
}

impl Iterator for WatchBackoff {
    type Item = std::time::Duration;

    fn next(&mut self) -> Option<std::time::Duration> {
        let base = self.next;
        self.next = base.saturating_mul(2).min(Self::MAX);
        // A factor of (100 - J)% to (100 + J)% of the base, in steps of 0.1%.
        let spread = Self::JITTER_PERCENT * 20 + 1;
        let permille = 1000 - Self::JITTER_PERCENT * 10 + self.random() % spread;
        let nanos = base.as_nanos().saturating_mul(u128::from(permille)) / 1000;
        Some(std::time::Duration::from_nanos(
            u64::try_from(nanos).unwrap_or(u64::MAX),
        ))
    }
}

impl kube::runtime::utils::Backoff for WatchBackoff {
    fn reset(&mut self) {
        self.next = Self::MIN;
    }
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

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::WatchBackoff;

    #[test]
    fn watches_do_not_retry_in_lockstep_and_each_wait_stays_within_a_quarter_of_its_base() {
        // An agent's eight watches fail together when the hub goes away.
        let waits: Vec<Vec<Duration>> = (0..8)
            .map(|_| WatchBackoff::default().take(8).collect())
            .collect();
        let bases = [500, 1000, 2000, 4000, 5000, 5000, 5000, 5000].map(Duration::from_millis);
        for (step, base) in bases.iter().enumerate() {
            let at_step: Vec<Duration> = waits.iter().map(|w| w[step]).collect();
            for wait in &at_step {
                assert!(
                    *wait >= base.mul_f64(0.75) && *wait <= base.mul_f64(1.25),
                    "wait {step}: {wait:?} is not within 25% of {base:?}"
                );
            }
            let first = at_step[0];
            assert!(
                at_step.iter().any(|w| *w != first),
                "the eight watches all wait {first:?} before attempt {step}: lockstep"
            );
        }
    }

    #[test]
    fn the_jitter_spreads_over_the_whole_quarter_and_a_reset_starts_from_the_first_wait() {
        let base = WatchBackoff::MIN;
        let firsts: Vec<Duration> = (0..500)
            .filter_map(|seed| WatchBackoff::with_seed(seed).next())
            .collect();
        let (min, max) = (
            firsts.iter().min().copied().unwrap_or_default(),
            firsts.iter().max().copied().unwrap_or_default(),
        );
        assert!(min >= base * 3 / 4 && min < base.mul_f64(0.78), "{min:?}");
        assert!(max <= base * 5 / 4 && max > base.mul_f64(1.22), "{max:?}");

        let mut backoff = WatchBackoff::with_seed(1);
        let grown = backoff.by_ref().take(5).last().unwrap_or_default();
        assert!(grown >= WatchBackoff::MAX * 3 / 4, "{grown:?}");
        kube::runtime::utils::Backoff::reset(&mut backoff);
        let again = backoff.next().unwrap_or_default();
        assert!(again <= base * 5 / 4, "{again:?}");
    }
}

//! What every clusterset daemon (`clusterset-agent`, `mcs-ceph-operator`) shares, so that both
//! reach their clusters, answer probes, expose metrics and log the same way (`mcsctl` reaches a
//! cluster through it too, without its `server`, `lease` and `watch` features):
//! - [`apply`]: server-side apply under a field manager, and deletes that treat "already gone"
//!   as done (the pure cores decide what to prune);
//! - `http` (feature `server`): `/metrics`, `/healthz` and `/readyz` over HTTP/1.1, the one
//!   `Endpoints` type both daemons serve (each supplies its metrics text and its readiness),
//!   and the OpenMetrics encoding of a prometheus-client registry;
//! - [`logging`]: the `--log-format text|json` flag and the subscriber set-up (`RUST_LOG`);
//! - [`ApiError`]: a failed Kubernetes API call as both daemons tell them apart (a 409 conflict,
//!   another refusal the API server answered with, or no answer, keeping kube's error as its
//!   source), [`ErrorChain`] (an error with its causes for a log line), [`object_key`];
//! - [`shutdown_signal`]: SIGTERM or Ctrl-C, the end of a daemon's run;
//! - [`Clock`]: the wall clock and tokio's monotonic clock, replaceable in tests;
//! - `lease` (feature `lease`): holding a Lease (leader election) with kube-lease's rules, and
//!   the leader-election flags both daemons flatten (`LeaderElectionArgs`: one set of names,
//!   one identity rule, one check of the timing);
//! - `watch` (feature `watch`): `WatchBackoff`, how both daemons' watches retry;
//! - [`kubeconfig`]: reaching a cluster by kubectl's rules, and the `--kubeconfig`, `--context`
//!   and `-n` flags that `mcsctl` and the daemons flatten.
//!
//! Features (all default; the workspace takes the crate without them, so each user names the
//! ones it uses): `server` (the HTTP server and the metrics encoding: hyper's server and
//! prometheus-client), `lease` (the elector, whose leader gauge is a prometheus-client metric,
//! and its flags) and `watch` (the watch backoff: kube-runtime). The command line takes none,
//! so it links no HTTP server and no metrics registry.
#![forbid(unsafe_code)]

pub mod apply;
pub mod clock;
#[cfg(feature = "server")]
pub mod http;
pub mod kubeconfig;
#[cfg(feature = "lease")]
pub mod lease;
pub mod logging;
pub mod shutdown;
#[cfg(feature = "watch")]
pub mod watch;

use std::sync::Arc;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// A failed Kubernetes API call.
///
/// ```
/// use clusterset_daemon::ApiError;
/// let api = |code| kube::Error::Api(Box::new(kube::core::Status::failure("no", "Reason").with_code(code)));
/// assert!(matches!(ApiError::from(api(409)), ApiError::Conflict(_)));
/// assert!(matches!(ApiError::from(api(422)), ApiError::Refused { code: 422, .. }));
/// assert!(matches!(ApiError::from(api(503)), ApiError::Failed(_)));
/// assert!(ApiError::from(api(403)).answered() && !ApiError::from(api(500)).answered());
/// // A failure keeps kube's error as its source, for logs that print the whole chain.
/// let failed = ApiError::from(api(503));
/// assert!(std::error::Error::source(&failed).is_some());
/// let logged = clusterset_daemon::ErrorChain(&failed).to_string();
/// assert!(logged.starts_with("the API server did not answer: ApiError: no: Reason"), "{logged}");
/// ```
#[derive(Debug, Clone, thiserror::Error)]
pub enum ApiError {
    /// 409: another field manager owns the fields (apply without force), the object changed
    /// since it was read (replace with `resourceVersion`), or it already exists (create).
    #[error("conflict (409): {0}")]
    Conflict(String),
    /// Any other refusal below 500 (400, 403, 404, 422, 429...): the API server answered.
    #[error("{message}")]
    Refused {
        /// The HTTP status code.
        code: u16,
        /// The error as kube reports it.
        message: String,
    },
    /// No answer, or a server error: a connection error, a timeout, a 5xx. kube's error is the
    /// source (shared, so that the error can be cloned into several outcomes).
    #[error("the API server did not answer")]
    Failed(#[source] Arc<kube::Error>),
    /// The request was not sent: the object to write lacks what the request needs (a bug of
    /// the caller, named in the message).
    #[error("request not sent: {0}")]
    NotSent(String),
}

impl ApiError {
    /// Whether the API server answered (a 4xx: it is up, and refused this call) rather than
    /// failing to answer ([`ApiError::Failed`]) or not being asked ([`ApiError::NotSent`]).
    pub fn answered(&self) -> bool {
        matches!(self, Self::Conflict(_) | Self::Refused { .. })
    }

    /// A failure to reach the API server: a connection refused with `detail` (what a real
    /// client reports when the server is down; for simulations of an outage).
    pub fn unreachable(detail: &str) -> Self {
        Self::Failed(Arc::new(kube::Error::Service(Box::new(
            std::io::Error::new(std::io::ErrorKind::ConnectionRefused, detail.to_owned()),
        ))))
    }
}

/// Whether a failed call shows that the API server did not answer: a connection error, a
/// timeout, a 5xx. An API status below 500 (403, 404, 410 Gone, 422, ...) is an answer.
///
/// ```
/// let api = |code| kube::Error::Api(Box::new(kube::core::Status::failure("no", "Reason").with_code(code)));
/// assert!(!clusterset_daemon::no_answer(&api(410)));
/// assert!(clusterset_daemon::no_answer(&api(503)));
/// ```
pub fn no_answer(error: &kube::Error) -> bool {
    match error {
        kube::Error::Api(status) => status.code >= 500,
        _ => true,
    }
}

impl From<kube::Error> for ApiError {
    fn from(error: kube::Error) -> Self {
        match &error {
            kube::Error::Api(status) if status.code == 409 => {
                Self::Conflict(status.message.clone())
            }
            kube::Error::Api(status) if !no_answer(&error) => Self::Refused {
                code: status.code,
                message: error.to_string(),
            },
            _ => Self::Failed(Arc::new(error)),
        }
    }
}

/// The namespace and name of an object to write, or [`ApiError::NotSent`] naming what is
/// missing (`builder` says who built the object, for the message).
pub fn object_key<'a>(meta: &'a ObjectMeta, builder: &str) -> Result<(&'a str, &'a str), ApiError> {
    match (meta.namespace.as_deref(), meta.name.as_deref()) {
        (Some(namespace), Some(name)) => Ok((namespace, name)),
        _ => Err(ApiError::NotSent(format!(
            "object without namespace or name: {builder} builds every object with both"
        ))),
    }
}

/// An error and its sources, each once, for a log line: the workspace's one formatter of error
/// chains, from [`clusterset_error_chain`].
pub use clusterset_error_chain::ErrorChain;

pub use clock::Clock;
#[cfg(feature = "server")]
pub use http::{Endpoints, MetricsText, ReadinessCheck, encode_metrics};
pub use logging::{LogFormat, init_logging};
pub use shutdown::shutdown_signal;

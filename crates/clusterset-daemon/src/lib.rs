//! What every clusterset daemon (`clusterset-agent`, `mcs-ceph-operator`) shares, so that both
//! answer probes, expose metrics and log the same way:
//! - [`http`]: `/metrics`, `/healthz` and `/readyz` over HTTP/1.1 for any [`Endpoints`];
//! - [`logging`]: the `--log-format text|json` flag and the subscriber set-up (`RUST_LOG`);
//! - [`ApiError`]: a failed Kubernetes API call as both daemons tell them apart (a 409 conflict,
//!   another refusal the API server answered with, or no answer).
#![forbid(unsafe_code)]

pub mod http;
pub mod logging;

/// A failed Kubernetes API call.
///
/// ```
/// use clusterset_daemon::ApiError;
/// let api = |code| kube::Error::Api(Box::new(kube::core::Status::failure("no", "Reason").with_code(code)));
/// assert!(matches!(ApiError::from(api(409)), ApiError::Conflict(_)));
/// assert!(matches!(ApiError::from(api(422)), ApiError::Refused { code: 422, .. }));
/// assert!(matches!(ApiError::from(api(503)), ApiError::Failed(_)));
/// assert!(ApiError::from(api(403)).answered() && !ApiError::from(api(500)).answered());
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
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
    /// No answer, or a server error: a connection error, a timeout, a 5xx, or a failure
    /// before the request was sent.
    #[error("{0}")]
    Failed(String),
}

impl ApiError {
    /// Whether the API server answered (a 4xx: it is up, and refused this call) rather than
    /// failing to answer ([`ApiError::Failed`]).
    pub fn answered(&self) -> bool {
        matches!(self, Self::Conflict(_) | Self::Refused { .. })
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
            _ => Self::Failed(error.to_string()),
        }
    }
}

pub use http::{Endpoints, encode_metrics, respond, serve};
pub use logging::{LogFormat, init_logging};

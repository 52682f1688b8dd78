//! What every clusterset daemon (`clusterset-agent`, `mcs-ceph-operator`) shares, so that both
//! answer probes, expose metrics and log the same way:
//! - [`http`]: `/metrics`, `/healthz` and `/readyz` over HTTP/1.1 for any [`Endpoints`];
//! - [`logging`]: the `--log-format text|json` flag and the subscriber set-up (`RUST_LOG`);
//! - [`ApiError`]: a failed Kubernetes API call as both daemons tell them apart (a 409 conflict
//!   or anything else).
#![forbid(unsafe_code)]

pub mod http;
pub mod logging;

/// A failed Kubernetes API call.
///
/// ```
/// use clusterset_daemon::ApiError;
/// let status = kube::core::Status::failure("fields owned by rook-operator", "Conflict").with_code(409);
/// assert!(matches!(ApiError::from(kube::Error::Api(Box::new(status))), ApiError::Conflict(_)));
/// ```
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ApiError {
    /// 409: another field manager owns the fields (apply without force), the object changed
    /// since it was read (replace with `resourceVersion`), or it already exists (create).
    #[error("conflict (409): {0}")]
    Conflict(String),
    /// Any other API error or transport failure.
    #[error("{0}")]
    Failed(String),
}

impl From<kube::Error> for ApiError {
    fn from(error: kube::Error) -> Self {
        match &error {
            kube::Error::Api(status) if status.code == 409 => {
                Self::Conflict(status.message.clone())
            }
            _ => Self::Failed(error.to_string()),
        }
    }
}

pub use http::{Endpoints, encode_metrics, respond, serve};
pub use logging::{LogFormat, init_logging};

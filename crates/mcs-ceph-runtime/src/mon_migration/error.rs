//! What fails in the mon migration's ports ([`MigrationError`]), as the errors of the
//! [`mon_failover`] ports it becomes.

use ceph_address_plan::mon_objects::ShapeError;
use mon_failover::{RuntimeError, StoreError};

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

/// A failed Kubernetes request, as [`MigrationError::Api`] of `action` (for `map_err`).
pub(super) fn api_error(action: impl Into<String>) -> impl FnOnce(kube::Error) -> MigrationError {
    let action = action.into();
    move |source| MigrationError::Api {
        action,
        source: Box::new(source),
    }
}

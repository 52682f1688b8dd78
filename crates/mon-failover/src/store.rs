//! Where the driver persists the machine's state between steps (write-ahead: before the step's
//! commands run). The operator stores it in its status object; `mon-failover-io`'s
//! `FileStateStore` keeps it in a JSON file, [`MemoryStateStore`] in memory.

use std::sync::{Mutex, PoisonError};

use async_trait::async_trait;

use crate::MachineState;

/// A state store failure. Nothing stored is overwritten by a failed load.
#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    /// Reading or writing failed.
    #[error("{context}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The stored state does not parse. It is left as it is.
    #[error(
        "{path} does not hold a mon failover state; it is left untouched: restore it from a backup, or move it away to start from the monmap"
    )]
    Corrupt {
        /// The file.
        path: String,
        /// The parse error.
        source: serde_json::Error,
    },
    /// Another store's error (for example a Kubernetes API error): its message, and its causes
    /// as this error's.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// Persists the machine's state. With the `mock` feature, `MockStateStore` is a mockall mock.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait StateStore: Send + Sync {
    /// The stored state, `None` if nothing was stored yet.
    async fn load(&self) -> Result<Option<MachineState>, StoreError>;
    /// Stores `state`, durably, replacing the previous one atomically.
    async fn save(&self, state: &MachineState) -> Result<(), StoreError>;
}

/// In memory, for tests and embedders that persist elsewhere.
#[derive(Debug, Default)]
pub struct MemoryStateStore {
    state: Mutex<Option<MachineState>>,
}

impl MemoryStateStore {
    /// An empty store.
    pub fn new() -> Self {
        MemoryStateStore::default()
    }
}

#[async_trait]
impl StateStore for MemoryStateStore {
    async fn load(&self) -> Result<Option<MachineState>, StoreError> {
        Ok(self
            .state
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone())
    }

    async fn save(&self, state: &MachineState) -> Result<(), StoreError> {
        *self.state.lock().unwrap_or_else(PoisonError::into_inner) = Some(state.clone());
        Ok(())
    }
}

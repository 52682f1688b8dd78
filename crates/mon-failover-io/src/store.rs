//! [`FileStateStore`]: the machine's state in a JSON file, replaced atomically, for drivers
//! that run outside Kubernetes (the demo, the lab, the real-Ceph tests).

use std::path::{Path, PathBuf};

use async_trait::async_trait;
use mon_failover::{MachineState, StateStore, StoreError};

/// A JSON file, replaced atomically (write to a temporary file, fsync, rename).
///
/// ```
/// use mon_failover::{MachineState, StateStore};
/// use mon_failover_io::FileStateStore;
/// # tokio::runtime::Builder::new_current_thread().build()?.block_on(async {
/// let dir = tempfile::tempdir()?;
/// let store = FileStateStore::new(dir.path().join("failover.json"));
/// assert_eq!(store.load().await?, None);
/// store.save(&MachineState::new(Some(2))).await?;
/// assert_eq!(store.load().await?, Some(MachineState::new(Some(2))));
/// # Ok::<(), Box<dyn std::error::Error>>(()) })?;
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct FileStateStore {
    path: PathBuf,
}

impl FileStateStore {
    /// A store in this file (created on the first save).
    pub fn new(path: impl Into<PathBuf>) -> Self {
        FileStateStore { path: path.into() }
    }

    /// The file.
    pub fn path(&self) -> &Path {
        &self.path
    }
}

fn io(context: String) -> impl FnOnce(std::io::Error) -> StoreError {
    move |source| StoreError::Io { context, source }
}

#[async_trait]
impl StateStore for FileStateStore {
    async fn load(&self) -> Result<Option<MachineState>, StoreError> {
        let bytes = match tokio::fs::read(&self.path).await {
            Ok(bytes) => bytes,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io(format!("reading {}", self.path.display()))(e)),
        };
        serde_json::from_slice(&bytes)
            .map(Some)
            .map_err(|source| StoreError::Corrupt {
                path: self.path.display().to_string(),
                source,
            })
    }

    async fn save(&self, state: &MachineState) -> Result<(), StoreError> {
        let json = serde_json::to_vec_pretty(state).map_err(|e| StoreError::Other(Box::new(e)))?;
        let mut tmp = self.path.clone().into_os_string();
        tmp.push(".tmp");
        let tmp = PathBuf::from(tmp);
        let path = self.path.display();
        let write = async {
            use tokio::io::AsyncWriteExt;
            let mut file = tokio::fs::File::create(&tmp).await?;
            file.write_all(&json).await?;
            file.sync_all().await?;
            tokio::fs::rename(&tmp, &self.path).await
        };
        write.await.map_err(io(format!("saving {path}")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clusterset_error_chain::ErrorChain;

    #[tokio::test]
    async fn a_corrupt_file_is_reported_and_left_untouched() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("state.json");
        std::fs::write(&path, b"{ not json").unwrap();
        let store = FileStateStore::new(&path);
        let err = store.load().await.unwrap_err();
        assert!(matches!(err, StoreError::Corrupt { .. }), "{err}");
        // What to do, then why: the parse error is the source, printed by the chain.
        assert_eq!(
            ErrorChain(&err).to_string(),
            format!(
                "{} does not hold a mon failover state; it is left untouched: restore it from a backup, or move it away to start from the monmap: key must be a string at line 1 column 3",
                path.display()
            )
        );
        assert_eq!(std::fs::read(&path).unwrap(), b"{ not json");
    }

    #[tokio::test]
    async fn save_replaces_the_previous_state() {
        let dir = tempfile::tempdir().unwrap();
        let store = FileStateStore::new(dir.path().join("state.json"));
        store.save(&MachineState::new(Some(2))).await.unwrap();
        store.save(&MachineState::new(Some(5))).await.unwrap();
        assert_eq!(
            store.load().await.unwrap(),
            Some(MachineState::new(Some(5)))
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).unwrap().collect();
        assert_eq!(leftovers.len(), 1, "no temporary file left");
    }

    #[tokio::test]
    async fn a_missing_directory_is_an_error_naming_the_path() {
        let store = FileStateStore::new("/nonexistent-dir/state.json");
        let err = store.save(&MachineState::new(None)).await.unwrap_err();
        let chain = ErrorChain(&err).to_string();
        assert!(
            err.to_string().contains("/nonexistent-dir/state.json")
                && chain.ends_with(": No such file or directory (os error 2)")
                && !err.to_string().contains("os error"),
            "{chain}"
        );
    }
}

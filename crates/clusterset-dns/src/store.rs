//! The live store: the zone behind a lock for writers, and an atomically swapped [`Snapshot`]
//! for the server, so queries never wait for an update.

use std::path::Path;
use std::sync::{Arc, Mutex, MutexGuard, mpsc};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use arc_swap::ArcSwap;
use hickory_proto::rr::RecordType;
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::objects::{ObjectError, ServiceKey, SliceKey, ZoneObject};
use crate::objects_file::{self, FileProblem};
use crate::records::{Answer, ZoneConfig};
use crate::wire::Snapshot;
use crate::zone::ClustersetZone;

/// How long a writer waits for queries to let go of the snapshot it replaced.
const RETIRE_WAIT: Duration = Duration::from_millis(100);

/// One change to the zone, as a watch event delivers it.
#[derive(Debug, Clone, PartialEq)]
pub enum ZoneChange {
    /// A ServiceImport or EndpointSlice was added or modified.
    Upsert(ZoneObject),
    /// A ServiceImport was deleted.
    DeleteServiceImport(ServiceKey),
    /// An EndpointSlice was deleted.
    DeleteEndpointSlice(SliceKey),
}

/// What [`ZoneStore::apply`] did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ApplyReport {
    /// Changes applied.
    pub applied: usize,
    /// Objects rejected; for each, the last good version (if any) keeps serving.
    pub rejected: Vec<ObjectError>,
    /// Services whose facts changed (counted once per change). Their names are not computed
    /// here: each service's answers are computed the first time a query asks for one of them.
    pub names_recomputed: usize,
}

struct Inner {
    zone: ClustersetZone,
    synced: bool,
}

/// The live clusterset zone: writers apply per-service changes, the server reads snapshots.
///
/// The store answers SERVFAIL until [`mark_synced`](Self::mark_synced) (or
/// [`replace_all`](Self::replace_all)) says its data is complete: a half-filled cache must not
/// give NXDOMAIN for names that exist.
///
/// ```
/// use clusterset_dns::{ZoneStore, ZoneConfig};
/// let store = ZoneStore::new(ZoneConfig::default());
/// assert!(!store.snapshot().is_synced());
/// store.mark_synced();
/// assert!(store.snapshot().is_synced());
/// ```
pub struct ZoneStore {
    inner: Mutex<Inner>,
    snapshot: ArcSwap<Snapshot>,
    /// Where replaced snapshots and zones go to be freed (a thread started on first use).
    reaper: Mutex<Option<mpsc::Sender<Retired>>>,
}

/// Data a change replaced, freed off the writer's and the queries' paths.
enum Retired {
    Snapshot(Arc<Snapshot>),
    /// Held only to be dropped on the reaper.
    #[allow(dead_code)]
    Zone(Box<ClustersetZone>),
    /// Applied changes (their objects), held only to be dropped on the reaper.
    #[allow(dead_code)]
    Changes(Vec<ZoneChange>),
}

impl Retired {
    fn free(self) {
        if let Self::Snapshot(old) = &self {
            let deadline = Instant::now() + RETIRE_WAIT;
            while Arc::strong_count(old) > 1 && Instant::now() < deadline {
                std::thread::sleep(Duration::from_micros(100));
            }
        }
        drop(self);
    }
}

impl std::fmt::Debug for ZoneStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let snapshot = self.snapshot.load();
        f.debug_struct("ZoneStore")
            .field("synced", &snapshot.is_synced())
            .field("names", &snapshot.name_count())
            .finish()
    }
}

fn unix_seconds() -> u32 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| u32::try_from(d.as_secs() % (1 << 32)).unwrap_or(0))
        .unwrap_or(0)
}

impl ZoneStore {
    /// An empty, unsynced store.
    pub fn new(config: ZoneConfig) -> Self {
        let zone = ClustersetZone::new(config);
        let snapshot = Snapshot::new(&zone, false, None);
        Self {
            inner: Mutex::new(Inner {
                zone,
                synced: false,
            }),
            snapshot: ArcSwap::from_pointee(snapshot),
            reaper: Mutex::new(None),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A writer that panicked (nothing in it panics on input) may have left its batch
        // partly applied; the zone is still whole, and the next change publishes it.
        self.inner
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The current snapshot: what queries are answered from.
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.snapshot.load_full()
    }

    /// The snapshot cell itself, for loops that load it per query.
    #[cfg(feature = "server")]
    pub(crate) fn snapshot_cell(&self) -> &ArcSwap<Snapshot> {
        &self.snapshot
    }

    /// Applies changes in order and publishes one new snapshot. Bad objects are skipped and
    /// reported; the rest apply.
    pub fn apply(&self, changes: impl IntoIterator<Item = ZoneChange>) -> ApplyReport {
        let mut inner = self.lock();
        let mut report = ApplyReport::default();
        let mut changed = 0;
        // A vector of changes is kept as it is (no copy), to be freed by the reaper below.
        let changes: Vec<ZoneChange> = changes.into_iter().collect();
        for change in &changes {
            let zone = &mut inner.zone;
            let result = match change {
                ZoneChange::Upsert(ZoneObject::ServiceImport(import)) => {
                    zone.apply_import(import, None)
                }
                ZoneChange::Upsert(ZoneObject::EndpointSlice(slice)) => {
                    zone.apply_slice(slice, None)
                }
                ZoneChange::DeleteServiceImport(key) => Ok(zone.apply_delete_import(key, None)),
                ZoneChange::DeleteEndpointSlice(key) => Ok(zone.apply_delete_slice(key, None)),
            };
            match result {
                Ok(services) => {
                    report.applied += 1;
                    changed += services;
                }
                Err(e) => report.rejected.push(e),
            }
        }
        report.names_recomputed = changed;
        inner.zone.flush();
        if changed > 0 {
            self.publish(&mut inner);
        }
        drop(inner);
        // The objects are done with; freeing a big batch's is the reaper's work too.
        self.retire(Retired::Changes(changes));
        report
    }

    /// Adds or replaces a ServiceImport.
    pub fn upsert_service_import(
        &self,
        import: &mcs_types::v1beta1::ServiceImport,
    ) -> Result<(), ObjectError> {
        let change = ZoneChange::Upsert(ZoneObject::ServiceImport(Box::new(import.clone())));
        self.apply_one(change)
    }

    /// Removes a ServiceImport.
    pub fn delete_service_import(&self, namespace: &str, name: &str) {
        self.apply([ZoneChange::DeleteServiceImport(ServiceKey::new(
            namespace, name,
        ))]);
    }

    /// Adds or replaces an MCS EndpointSlice.
    pub fn upsert_endpoint_slice(&self, slice: &EndpointSlice) -> Result<(), ObjectError> {
        let change = ZoneChange::Upsert(ZoneObject::EndpointSlice(Box::new(slice.clone())));
        self.apply_one(change)
    }

    /// Removes an EndpointSlice.
    pub fn delete_endpoint_slice(&self, namespace: &str, name: &str) {
        self.apply([ZoneChange::DeleteEndpointSlice(SliceKey::new(
            namespace, name,
        ))]);
    }

    fn apply_one(&self, change: ZoneChange) -> Result<(), ObjectError> {
        match self.apply([change]).rejected.pop() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }

    /// Says the store holds a complete view (the watches have listed everything once). From now
    /// on unknown names get NXDOMAIN instead of SERVFAIL.
    pub fn mark_synced(&self) {
        let mut inner = self.lock();
        if !inner.synced {
            inner.synced = true;
            inner.zone.flush();
            let snapshot = Snapshot::new(&inner.zone, true, Some(&self.snapshot.load()));
            self.swap_in(snapshot);
        }
    }

    /// Replaces the whole zone with `objects` if every one of them is valid, and marks the store
    /// synced; otherwise changes nothing and returns every problem (the last good zone keeps
    /// serving). Returns the number of objects loaded.
    pub fn replace_all(&self, objects: Vec<ZoneObject>) -> Result<usize, Vec<ObjectError>> {
        let config = self.lock().zone.config().clone();
        let mut zone = ClustersetZone::new(config);
        let mut errors = Vec::new();
        let count = objects.len();
        for object in objects {
            let result = match object {
                ZoneObject::ServiceImport(import) => zone.apply_import(&import, None),
                ZoneObject::EndpointSlice(slice) => zone.apply_slice(&slice, None),
            };
            if let Err(e) = result {
                errors.push(e);
            }
        }
        if !errors.is_empty() {
            return Err(errors);
        }
        zone.flush();
        let mut inner = self.lock();
        zone.set_serial(next_serial(inner.zone.serial()));
        inner.synced = true;
        let snapshot = Snapshot::new(&zone, true, Some(&self.snapshot.load()));
        let old = std::mem::replace(&mut inner.zone, zone);
        self.swap_in(snapshot);
        self.retire(Retired::Zone(Box::new(old)));
        Ok(count)
    }

    /// Replaces the whole zone with the objects of the file at `path` ([`objects_file::read`])
    /// if the file and every object in it are valid, like [`ZoneStore::replace_all`]; otherwise
    /// changes nothing and returns every problem.
    pub fn replace_from_file(&self, path: &Path) -> Result<usize, Vec<FileProblem>> {
        self.replace_all(objects_file::read(path)?)
            .map_err(|errors| {
                errors
                    .into_iter()
                    .map(|e| FileProblem::object(path, e))
                    .collect()
            })
    }

    fn publish(&self, inner: &mut Inner) {
        let serial = next_serial(inner.zone.serial());
        inner.zone.set_serial(serial);
        let snapshot = Snapshot::new(&inner.zone, inner.synced, Some(&self.snapshot.load()));
        self.swap_in(snapshot);
    }

    /// Publishes `snapshot` and hands the previous one to the store's reaper thread, which
    /// waits for the queries still holding it to let go (at most [`RETIRE_WAIT`]) and frees it
    /// there: a query thread would otherwise free it (a whole batch's worth of replaced entries)
    /// in the middle of answering, and the writer would pay for it before the next update.
    fn swap_in(&self, snapshot: Snapshot) {
        let old = self.snapshot.swap(Arc::new(snapshot));
        self.retire(Retired::Snapshot(old));
    }

    fn retire(&self, retired: Retired) {
        let mut reaper = self
            .reaper
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        if reaper.is_none() {
            let (sender, receiver) = mpsc::channel::<Retired>();
            let spawned = std::thread::Builder::new()
                .name("dns-zone-reaper".to_owned())
                .spawn(move || {
                    while let Ok(retired) = receiver.recv() {
                        retired.free();
                    }
                });
            if spawned.is_ok() {
                *reaper = Some(sender);
            }
        }
        match reaper.as_ref() {
            Some(sender) => {
                if let Err(mpsc::SendError(retired)) = sender.send(retired) {
                    retired.free();
                }
            }
            // No thread (the system refused one): free it here, as the reaper would.
            None => retired.free(),
        }
    }

    /// The answer the records model gives (the server's answers are encoded from the same
    /// lazily computed names), for diagnostics and tests.
    pub fn answer(&self, name: &str, qtype: RecordType) -> Answer {
        self.lock().zone.answer(name, qtype)
    }

    /// The zone in master-file format (RFC 1035), for diagnostics and for loading the same
    /// records into other DNS servers.
    pub fn zone_file(&self) -> String {
        crate::zonefile::render(&self.lock().zone)
    }
}

/// The serial after `previous`: the current Unix time, or `previous + 1` when that is not later
/// (several changes in one second must still raise it).
fn next_serial(previous: u32) -> u32 {
    let now = unix_seconds();
    if now > previous {
        now
    } else {
        previous.wrapping_add(1)
    }
}

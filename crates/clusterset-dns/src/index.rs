//! The zone's indexes, shared by the records model ([`crate::ClustersetZone`]) and the
//! server's snapshots ([`crate::wire::Snapshot`]): the same maps, the same entries, the same
//! lazily computed answers.
//!
//! - Services: a copy-on-write sharded map from the wire form of `<svc>.<ns>` to the service's
//!   facts (import and slices) and, computed the first time one of its names is asked for, every
//!   name below `<svc>.<ns>.svc.<zone>` with its answers. A change replaces one entry; nothing is
//!   computed until a query (or the model) asks.
//! - Namespaces: `<ns>.svc.<zone>` exists while a service of the namespace has an import.
//! - Reverse names: address -> the services that may hold a PTR record for it, maintained from
//!   the facts when they change; the PTR answer is computed from the owners on first use.
//!
//! Names of the zone itself (apex, `svc`, `pod`, `dns`, `ns.dns`, `dns-version`) are matched
//! here and answered from a small table per configuration (see [`crate::records`]).

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hash, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use mcs_types::ServiceImportType;

use crate::objects::{ImportFact, IpList, ServiceKey, ServiceRef, SliceFact};
use crate::records::{Replaced, ZoneConfig, ptr_name, service_names};
use crate::wire::{NameHasher, PreparedName, wire_name};

/// Hash maps keyed by the zone's own names and keys: FxHash (see [`NameHasher`]).
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<NameHasher>>;

/// A hash set of the same kind.
pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<NameHasher>>;

const GROUPS: usize = 64;
const SHARDS_PER_GROUP: usize = 64;

/// One entry of a shard: the key's hash (which also chose the shard), the key and the value.
#[derive(Debug, Clone)]
pub(crate) struct Slot<K, V> {
    hash: u64,
    key: K,
    value: V,
}

/// A shard: its entries sorted by hash, in one allocation with its reference count (a handful
/// of entries in a zone of 10,000 services: one or two cache lines to scan). A shard is never
/// changed while a clone shares it: a change builds it anew ([`CowMap::rebuild_shards`]).
type Shard<K, V> = Arc<[Slot<K, V>]>;
/// A group of shards: the shard pointers inline behind the group's reference count.
type Group<K, V> = Arc<[Shard<K, V>]>;

/// A hash map in 64 x 64 shards, copied on write: a clone costs 64 reference counts. Snapshots
/// are clones; the writer keeps changing its own copy, a batch of changes at a time: each shard
/// a batch touches is built once, straight into its allocation, and each group it touches is
/// copied once (or changed in place when no clone shares it).
///
/// A key is hashed once per operation (callers that keep the hash of [`CowMap::hash`] pass it to
/// [`CowMap::get_key_value_hashed`] and to the shards they build): the top bits of the hash pick
/// the group and the shard, and the full hash orders the shard's entries, so a lookup compares
/// hashes in one small array and reads a key only when its hash matches.
#[derive(Debug)]
pub(crate) struct CowMap<K, V> {
    groups: Box<[Group<K, V>]>,
    len: usize,
}

impl<K, V> Clone for CowMap<K, V> {
    fn clone(&self) -> Self {
        Self {
            groups: self.groups.clone(),
            len: self.len,
        }
    }
}

/// The number of shards of a [`CowMap`].
pub(crate) const SHARDS: usize = GROUPS * SHARDS_PER_GROUP;

/// The shard of a hash, counted over all groups: its top 12 bits (the best mixed of a
/// multiplicative hash).
pub(crate) fn shard_index(hash: u64) -> usize {
    usize::try_from(hash >> 52).unwrap_or(0) % SHARDS
}

/// Group and shard of a hash.
fn slot_of(hash: u64) -> (usize, usize) {
    let bits = shard_index(hash);
    (bits / SHARDS_PER_GROUP, bits % SHARDS_PER_GROUP)
}

/// Where `key` is in `shard` (`Ok`), or where it would go (`Err`).
#[inline]
fn find<K, V, Q>(shard: &[Slot<K, V>], hash: u64, key: &Q) -> Result<usize, usize>
where
    K: Borrow<Q>,
    Q: Eq + ?Sized,
{
    // Shards are small (a handful of entries in a zone of 10,000 services): a scan is quicker
    // than a binary search there.
    let start = if shard.len() <= 16 {
        shard
            .iter()
            .position(|slot| slot.hash >= hash)
            .unwrap_or(shard.len())
    } else {
        shard.partition_point(|slot| slot.hash < hash)
    };
    let mut at = start;
    while let Some(slot) = shard.get(at) {
        if slot.hash != hash {
            break;
        }
        if slot.key.borrow() == key {
            return Ok(at);
        }
        at += 1;
    }
    Err(start)
}

impl<K: Hash + Eq + Clone, V: Clone> CowMap<K, V> {
    pub(crate) fn new() -> Self {
        let empty: Shard<K, V> = Arc::from(Vec::new());
        Self {
            groups: (0..GROUPS)
                .map(|_| {
                    (0..SHARDS_PER_GROUP)
                        .map(|_| Arc::clone(&empty))
                        .collect::<Group<K, V>>()
                })
                .collect(),
            len: 0,
        }
    }

    /// The hash of a key, for the `_hashed` methods.
    #[inline]
    pub(crate) fn hash<Q: Hash + ?Sized>(key: &Q) -> u64 {
        let mut hasher = NameHasher::default();
        key.hash(&mut hasher);
        hasher.finish()
    }

    #[inline]
    fn shard(&self, hash: u64) -> Option<&[Slot<K, V>]> {
        let (group, shard) = slot_of(hash);
        self.groups.get(group)?.get(shard).map(|shard| &**shard)
    }

    #[inline]
    pub(crate) fn get<Q>(&self, key: &Q) -> Option<&V>
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.get_key_value_hashed(Self::hash(key), key)
            .map(|(_, v)| v)
    }

    #[inline]
    pub(crate) fn get_key_value_hashed<Q>(&self, hash: u64, key: &Q) -> Option<(&K, &V)>
    where
        K: Borrow<Q>,
        Q: Eq + ?Sized,
    {
        let shard = self.shard(hash)?;
        let slot = shard.get(find(shard, hash, key).ok()?)?;
        Some((&slot.key, &slot.value))
    }

    /// Rebuilds the shards `shards` (indexes below [`SHARDS`], ascending; an index not above
    /// the one before it is ignored): `build` gets a shard's index and its entries and pushes the shard's new
    /// entries, sorted by hash, into the empty vector it is given (`scratch`, kept by the
    /// caller from batch to batch). Each group is copied once for all of its shards, or changed
    /// in place when no clone shares it, and each shard is built straight into its allocation.
    pub(crate) fn rebuild_shards(
        &mut self,
        shards: impl IntoIterator<Item = usize>,
        scratch: &mut Vec<Slot<K, V>>,
        mut build: impl FnMut(usize, &[Slot<K, V>], &mut Vec<Slot<K, V>>),
    ) {
        let mut shards = ascending(shards).peekable();
        self.rebuild_in_parts(|mut parts| {
            // Ascending: an index past the last group ends it, and so would every later one.
            while let Some(part) = shards
                .peek()
                .and_then(|&first| parts.group(first / SHARDS_PER_GROUP))
            {
                let mine = part.shards();
                let in_group = std::iter::from_fn(|| shards.next_if(|index| mine.contains(index)));
                part.rebuild_shards(in_group, scratch, &mut build);
            }
        });
    }

    /// Hands `work` the map's groups, one [`GroupPart`] each, to be rebuilt independently (on
    /// several threads, say). The parts count the entries of each shard they replace, and the
    /// map's length follows them when `work` returns, or unwinds.
    pub(crate) fn rebuild_in_parts<R>(
        &mut self,
        work: impl FnOnce(GroupParts<'_, K, V>) -> R,
    ) -> R {
        let Self { groups, len } = self;
        let counts = LengthChange {
            len,
            added: AtomicUsize::new(0),
            removed: AtomicUsize::new(0),
        };
        work(GroupParts {
            groups: groups.iter_mut().enumerate(),
            next: 0,
            added: &counts.added,
            removed: &counts.removed,
        })
    }

    /// Inserts or replaces one entry (its shard is built anew, unless no clone shares it and
    /// the key is there: a new value then goes in place).
    pub(crate) fn insert(&mut self, key: K, value: V) {
        let hash = Self::hash(&key);
        let (group, shard) = slot_of(hash);
        if let Some(slots) = self
            .groups
            .get_mut(group)
            .and_then(Arc::get_mut)
            .and_then(|group| group.get_mut(shard))
            .and_then(Arc::get_mut)
            && let Ok(at) = find(slots, hash, &key)
            && let Some(slot) = slots.get_mut(at)
        {
            slot.value = value;
            return;
        }
        let mut slot = Some(Slot { hash, key, value });
        self.rebuild_shards([shard_index(hash)], &mut Vec::new(), |_, current, out| {
            out.extend_from_slice(current);
            if let Some(slot) = slot.take() {
                match find(out, slot.hash, &slot.key) {
                    Ok(at) => {
                        if let Some(existing) = out.get_mut(at) {
                            *existing = slot;
                        }
                    }
                    Err(at) => out.insert(at, slot),
                }
            }
        });
    }

    /// Removes one entry (its shard is built anew; a key that is not there changes nothing).
    pub(crate) fn remove<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        let hash = Self::hash(key);
        if self.get_key_value_hashed(hash, key).is_none() {
            return;
        }
        self.rebuild_shards([shard_index(hash)], &mut Vec::new(), |_, current, out| {
            out.extend(
                current
                    .iter()
                    .filter(|slot| slot.hash != hash || slot.key.borrow() != key)
                    .cloned(),
            );
        });
    }

    pub(crate) fn len(&self) -> usize {
        self.len
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&K, &V)> {
        self.groups.iter().flat_map(|group| {
            group
                .iter()
                .flat_map(|shard| shard.iter().map(|slot| (&slot.key, &slot.value)))
        })
    }
}

/// The entries the parts of a [`CowMap`] added and removed, applied to its length when dropped.
struct LengthChange<'a> {
    len: &'a mut usize,
    added: AtomicUsize,
    removed: AtomicUsize,
}

impl Drop for LengthChange<'_> {
    fn drop(&mut self) {
        *self.len = (*self.len + *self.added.get_mut()).saturating_sub(*self.removed.get_mut());
    }
}

/// One group of a [`CowMap`] (see [`CowMap::rebuild_in_parts`]): its shards are rebuilt
/// without the rest of the map, so that different groups can be rebuilt on different threads.
pub(crate) struct GroupPart<'a, K, V> {
    index: usize,
    group: &'a mut Group<K, V>,
    /// Entries of the replaced shards after (`added`) and before (`removed`), summed over all
    /// the map's parts when each part is dropped.
    added: &'a AtomicUsize,
    removed: &'a AtomicUsize,
    /// This part's own counts (so that two threads do not share a counter's cache line per
    /// shard); taken there, even when a builder panics, since each is counted as its shard is
    /// replaced.
    added_here: usize,
    removed_here: usize,
}

impl<K, V> Drop for GroupPart<'_, K, V> {
    fn drop(&mut self) {
        self.added.fetch_add(self.added_here, Ordering::Relaxed);
        self.removed.fetch_add(self.removed_here, Ordering::Relaxed);
    }
}

/// The groups of a [`CowMap`], in order, a [`GroupPart`] each (see
/// [`CowMap::rebuild_in_parts`]).
pub(crate) struct GroupParts<'a, K, V> {
    groups: std::iter::Enumerate<std::slice::IterMut<'a, Group<K, V>>>,
    /// The index of the group the next part is of.
    next: usize,
    added: &'a AtomicUsize,
    removed: &'a AtomicUsize,
}

impl<'a, K, V> GroupParts<'a, K, V> {
    /// The part of group `index`, skipping the groups before it that were not handed out
    /// (`None`: a group already passed, or past the last).
    pub(crate) fn group(&mut self, index: usize) -> Option<GroupPart<'a, K, V>> {
        let skip = index.checked_sub(self.next)?;
        self.nth(skip)
    }
}

impl<'a, K, V> Iterator for GroupParts<'a, K, V> {
    type Item = GroupPart<'a, K, V>;

    fn next(&mut self) -> Option<Self::Item> {
        self.nth(0)
    }

    /// Skips `n` groups without visiting them.
    fn nth(&mut self, n: usize) -> Option<Self::Item> {
        let (index, group) = self.groups.nth(n)?;
        self.next = index + 1;
        Some(GroupPart {
            index,
            group,
            added: self.added,
            removed: self.removed,
            added_here: 0,
            removed_here: 0,
        })
    }
}

impl<K: Clone, V: Clone> GroupPart<'_, K, V> {
    /// The shards of this group, as indexes over all groups (those [`shard_index`] gives).
    pub(crate) fn shards(&self) -> std::ops::Range<usize> {
        let base = self.index * SHARDS_PER_GROUP;
        base..base + SHARDS_PER_GROUP
    }

    /// Rebuilds the shards `shards` of this group as [`CowMap::rebuild_shards`] does (indexes
    /// of other groups, and any not above the one before, are ignored).
    pub(crate) fn rebuild_shards(
        mut self,
        shards: impl IntoIterator<Item = usize>,
        scratch: &mut Vec<Slot<K, V>>,
        mut build: impl FnMut(usize, &[Slot<K, V>], &mut Vec<Slot<K, V>>),
    ) {
        let mine = self.shards();
        let base = mine.start;
        // The group's shards to rebuild, a bit each.
        const { assert!(SHARDS_PER_GROUP <= 64) };
        let chosen = ascending(shards)
            .filter(|index| mine.contains(index))
            .fold(0u64, |chosen, index| chosen | 1 << (index - base));
        let is_chosen = |i: usize| chosen >> i & 1 == 1;
        let mut rebuild = |index: usize, current: &[Slot<K, V>]| -> Shard<K, V> {
            scratch.clear();
            build(index, current, scratch);
            // Counted as the shard is replaced (right after this returns).
            self.added_here += scratch.len();
            self.removed_here += current.len();
            // A draining iterator knows its length: the shard is allocated once, exactly.
            scratch.drain(..).collect()
        };
        if let Some(unique) = Arc::get_mut(self.group) {
            for (i, shard) in unique.iter_mut().enumerate().filter(|(i, _)| is_chosen(*i)) {
                *shard = rebuild(base + i, shard);
            }
        } else {
            // Shared with a clone: a copy that shares the shards it does not rebuild.
            let copy: Group<K, V> = self
                .group
                .iter()
                .enumerate()
                .map(|(i, shard)| {
                    if is_chosen(i) {
                        rebuild(base + i, shard)
                    } else {
                        Arc::clone(shard)
                    }
                })
                .collect();
            *self.group = copy;
        }
    }
}

/// `shards` without any index that is not above the one before it.
fn ascending(shards: impl IntoIterator<Item = usize>) -> impl Iterator<Item = usize> {
    let mut last: Option<usize> = None;
    shards.into_iter().filter(move |&index| {
        let ascending = last.is_none_or(|last| index > last);
        if ascending {
            last = Some(index);
        }
        ascending
    })
}

/// One service: its facts and its names, computed on first use.
///
/// Small (three cache lines): a batch that changes every service's import writes a new entry
/// for each and reads the old one.
#[derive(Debug)]
pub(crate) struct ServiceEntry {
    /// What a change of the import keeps, shared by the entries of the service's imports.
    core: Arc<ServiceCore>,
    /// Inline: an [`ImportFact`] is cheap to clone, and a change of the import (the usual
    /// change) then allocates the entry only.
    pub(crate) import: Option<ImportFact>,
    names: OnceLock<ServiceNames>,
}

/// The part of a service that a change of its import keeps: its key, its EndpointSlices and
/// their ready addresses.
#[derive(Debug)]
struct ServiceCore {
    key: Arc<ServiceKey>,
    /// Slices by name.
    slices: BTreeMap<String, Arc<SliceFact>>,
    /// The ready addresses of the slices, sorted, without duplicates.
    slice_ips: IpList,
}

/// Every name of one service with its answers.
#[derive(Debug, Default)]
pub(crate) struct ServiceNames {
    /// (the wire labels in front of `<svc>.<ns>.svc.<zone>`, the name); sorted by the labels.
    /// The service name itself has no labels in front.
    pub(crate) names: Vec<(Box<[u8]>, PreparedName)>,
    /// The PTR name of each address the service has PTR targets for, sorted by address:
    /// the answer of an address only this service holds.
    pub(crate) reverse: Vec<(IpAddr, PreparedName)>,
}

impl ServiceEntry {
    pub(crate) fn new(
        key: Arc<ServiceKey>,
        import: Option<ImportFact>,
        slices: BTreeMap<String, Arc<SliceFact>>,
    ) -> Self {
        let mut slice_ips: IpList = slices
            .values()
            .flat_map(|slice| slice.ready.iter().map(|a| a.ip))
            .collect();
        slice_ips.sort_dedup();
        Self {
            core: Arc::new(ServiceCore {
                key,
                slices,
                slice_ips,
            }),
            import,
            names: OnceLock::new(),
        }
    }

    /// `current` with another import (or none).
    pub(crate) fn with_import(current: &Self, import: Option<ImportFact>) -> Self {
        Self {
            core: Arc::clone(&current.core),
            import,
            names: OnceLock::new(),
        }
    }

    /// The service's namespace and name.
    pub(crate) fn key(&self) -> &Arc<ServiceKey> {
        &self.core.key
    }

    /// The service's EndpointSlices by name.
    pub(crate) fn slices(&self) -> &BTreeMap<String, Arc<SliceFact>> {
        &self.core.slices
    }

    /// The addresses the service may hold PTR records for, sorted, without duplicates: its
    /// slices' ready addresses and its [`Self::import_ptr_ips`]; none without an import.
    fn ptr_ips(&self) -> IpList {
        if self.import.is_none() {
            return IpList::new();
        }
        let mut ips = self.core.slice_ips.clone();
        let import_ips = self.import_ptr_ips();
        if !import_ips.is_empty() {
            for ip in import_ips {
                ips.push(*ip);
            }
            ips.sort_dedup();
        }
        ips
    }

    /// The addresses the import gives PTR records: a ClusterSetIP service's clusterset IPs
    /// (in the order of the import, duplicates kept).
    fn import_ptr_ips(&self) -> &[IpAddr] {
        match &self.import {
            Some(import) if import.type_ == ServiceImportType::ClusterSetIP => &import.ips,
            _ => &[],
        }
    }

    /// The service's names, computed now if no one asked before.
    pub(crate) fn names(&self, config: &ZoneConfig) -> &ServiceNames {
        self.names.get_or_init(|| match &self.import {
            Some(import) => service_names(config, &self.core.key, import, &self.core.slices),
            None => ServiceNames::default(),
        })
    }

    /// Computes the names and encodes every answer now.
    fn warm(&self, config: &ZoneConfig) {
        for (_, name) in &self.names(config).names {
            name.encode_all();
        }
    }

    /// Whether the names were computed (someone asked, or the entry was warmed).
    #[cfg(test)]
    pub(crate) fn is_prepared(&self) -> bool {
        self.names.get().is_some()
    }

    fn has_import(entry: Option<&Arc<Self>>) -> bool {
        entry.is_some_and(|e| e.import.is_some())
    }
}

/// How many bytes of a service key a [`WireKey`] holds inline.
const INLINE_KEY: usize = 30;

/// The key of a service in the services map and in the reverse index: the wire form of
/// `<svc>.<ns>` (two labels, no terminator), inline when it is short (most are), shared
/// otherwise. Inline keys make copies of shards plain memory copies (no reference counts to
/// update in other services' memory, which would serialise the copy on cache misses), and let a
/// lookup compare the key in the shard itself.
#[derive(Clone)]
pub(crate) enum WireKey {
    /// The first `len` bytes of the array.
    Inline(u8, [u8; INLINE_KEY]),
    /// Longer keys.
    Shared(Arc<[u8]>),
}

impl From<&[u8]> for WireKey {
    fn from(bytes: &[u8]) -> Self {
        let mut inline = [0; INLINE_KEY];
        match (inline.get_mut(..bytes.len()), u8::try_from(bytes.len())) {
            (Some(prefix), Ok(len)) => {
                prefix.copy_from_slice(bytes);
                Self::Inline(len, inline)
            }
            _ => Self::Shared(bytes.into()),
        }
    }
}

impl std::ops::Deref for WireKey {
    type Target = [u8];

    #[inline]
    fn deref(&self) -> &[u8] {
        match self {
            Self::Inline(len, bytes) => bytes.get(..usize::from(*len)).unwrap_or_default(),
            Self::Shared(bytes) => bytes,
        }
    }
}

impl Borrow<[u8]> for WireKey {
    #[inline]
    fn borrow(&self) -> &[u8] {
        self
    }
}

/// Hashes as its bytes do (the maps look keys up by `&[u8]`).
impl Hash for WireKey {
    fn hash<H: Hasher>(&self, state: &mut H) {
        (**self).hash(state);
    }
}

impl PartialEq for WireKey {
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Shared(a), Self::Shared(b)) if Arc::ptr_eq(a, b) => true,
            _ => **self == **other,
        }
    }
}

impl Eq for WireKey {}

impl PartialOrd for WireKey {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for WireKey {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (**self).cmp(&**other)
    }
}

impl std::fmt::Debug for WireKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{:?}", String::from_utf8_lossy(self))
    }
}

/// The services that may hold PTR records for one address.
///
/// With one owner (the usual case) the answer is the owner's own (its [`ServiceNames`]): the
/// entry is the owner's key, and a change of the owner that keeps the address leaves it alone.
/// With several, the merged answer is computed on first use; it depends on the owners' entries,
/// not only on their keys, so such an entry is replaced (sharing the owner list, with an empty
/// answer) whenever an owner changes: an entry is shared by the snapshots that hold it, and its
/// answer must be that of every one of them.
#[derive(Debug, Clone)]
pub(crate) enum ReverseEntry {
    /// The key of the one service that holds the address.
    One(WireKey),
    /// Several services hold it.
    Many(Arc<SharedReverse>),
}

/// Whether two service keys are the same: short keys compare inline; the reverse index holds
/// the services map's own shared keys, so pointer equality decides for long ones without
/// reading the bytes, which are compared only when the pointers differ.
fn same_key(a: &WireKey, b: &WireKey) -> bool {
    a == b
}

/// An address several services hold: their keys (sorted) and the merged PTR answer.
#[derive(Debug)]
pub(crate) struct SharedReverse {
    owners: Arc<[WireKey]>,
    prepared: OnceLock<Option<PreparedName>>,
}

impl ReverseEntry {
    fn of(mut owners: Vec<WireKey>) -> Option<Self> {
        match owners.len() {
            0 => None,
            1 => owners.pop().map(Self::One),
            _ => {
                owners.sort_unstable();
                Some(Self::many(owners.into()))
            }
        }
    }

    fn many(owners: Arc<[WireKey]>) -> Self {
        Self::Many(SharedReverse::unprepared(owners))
    }
}

impl SharedReverse {
    /// The entry of `owners`, its merged answer not computed yet.
    fn unprepared(owners: Arc<[WireKey]>) -> Arc<Self> {
        Arc::new(Self {
            owners,
            prepared: OnceLock::new(),
        })
    }
}

/// A namespace with at least one imported service.
#[derive(Debug, Clone)]
pub(crate) struct NamespaceEntry {
    count: usize,
    /// `<ns>.svc.<zone>`.
    pub(crate) name: Arc<str>,
}

/// What a name is.
#[derive(Debug)]
pub(crate) enum Found<'a> {
    /// A name of the zone itself: its position in [`crate::records::zone_names`].
    Zone(usize),
    /// `<ns>.svc.<zone>` of a namespace with an imported service.
    Namespace(&'a NamespaceEntry),
    /// A service's name or a reverse name.
    Name(&'a PreparedName),
}

/// The wire form of `<svc>.<ns>` (two labels, no terminator), the key of a service, built on
/// the stack: looking a service up allocates nothing.
#[derive(Debug, Clone, Copy)]
pub(crate) struct ServiceWireKey {
    bytes: [u8; 128],
    len: usize,
}

impl ServiceWireKey {
    pub(crate) fn as_slice(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
}

/// The key of a service. `None` when a part is not a DNS label's length (such a service never
/// has names).
pub(crate) fn service_wire_key(key: ServiceRef<'_>) -> Option<ServiceWireKey> {
    let mut wire = ServiceWireKey {
        bytes: [0; 128],
        len: 0,
    };
    for label in [key.name, key.namespace] {
        let len = u8::try_from(label.len())
            .ok()
            .filter(|l| (1..=63).contains(l))?;
        let end = wire.len + 1 + label.len();
        *wire.bytes.get_mut(wire.len)? = len;
        wire.bytes
            .get_mut(wire.len + 1..end)?
            .copy_from_slice(label.as_bytes());
        wire.len = end;
    }
    Some(wire)
}

/// Where a service is in the index ([`ZoneIndex::locate`]): what [`ZoneIndex::replace`]
/// needs to replace its entry without looking it up again.
#[derive(Debug)]
pub(crate) struct ServicePlace {
    key: WireKey,
    hash: u64,
    /// Its record among the changes since the last flush, if one staged it.
    staged: Option<usize>,
    /// Its entry as the changes so far leave it.
    pub(crate) entry: Option<Arc<ServiceEntry>>,
}

/// The services by the wire form of `<svc>.<ns>`.
pub(crate) type ServiceMap = CowMap<WireKey, Arc<ServiceEntry>>;

/// The services that may hold a PTR record for an address.
pub(crate) type ReverseMap = CowMap<IpAddr, ReverseEntry>;

/// The services, namespaces and reverse names of a zone (see the module docs).
#[derive(Debug, Clone)]
pub(crate) struct ZoneIndex {
    pub(crate) config: Arc<ZoneConfig>,
    zone_wire: Arc<[u8]>,
    /// Wire forms of the zone's own names, in [`crate::records::zone_names`] order.
    zone_names: Arc<[Box<[u8]>]>,
    pub(crate) services: ServiceMap,
    pub(crate) reverse: ReverseMap,
    pub(crate) namespaces: CowMap<Arc<[u8]>, NamespaceEntry>,
    imports: usize,
    /// The addresses with a [`ReverseEntry::Many`] entry (usually none): an address that is
    /// not one of them and that a changed service keeps needs no reverse update, since its
    /// entry is the service's own key.
    shared: Arc<FastSet<IpAddr>>,
    /// The service changes since the last [`Self::flush`], which builds each shard they touch
    /// once.
    staged: WriterOnly<StagedServices>,
    /// The reverse-index updates of the changes since the last [`Self::flush`], and the order
    /// to apply them in: buffers kept from batch to batch, since a big batch's would otherwise
    /// cost fresh pages (and their faults) every time.
    pending: Vec<ReverseOp>,
    order: WriterOnly<Vec<u32>>,
    /// Where shards are built (kept from batch to batch, like the buffers above).
    service_slots: WriterOnly<Vec<Slot<WireKey, Arc<ServiceEntry>>>>,
    reverse_slots: WriterOnly<Vec<Slot<IpAddr, ReverseEntry>>>,
    /// The same for the second thread of a big batch's flush.
    helper_slots: WriterOnly<Vec<Slot<IpAddr, ReverseEntry>>>,
}

/// A buffer of the writer's, kept from batch to batch: a clone of the index (a snapshot) gets
/// an empty one, and never copies it.
#[derive(Debug, Default)]
struct WriterOnly<T>(T);

impl<T: Default> Clone for WriterOnly<T> {
    fn clone(&self) -> Self {
        Self::default()
    }
}

/// No record: the end of a chain of [`StagedServices`].
const NO_RECORD: u32 = u32::MAX;

/// The service changes of a batch, until [`ZoneIndex::flush`]: the latest entry of each
/// changed service, chained per shard, so that a later change of the same batch finds it and
/// the flush builds each touched shard once.
#[derive(Debug, Default)]
struct StagedServices {
    records: Vec<StagedService>,
    /// Per shard, the last record staged in it (empty until the first change).
    heads: Vec<u32>,
    /// The shards with a record, a bit each.
    touched: Vec<u64>,
}

/// A service's entry as the changes staged so far leave it (`None`: removed).
#[derive(Debug)]
struct StagedService {
    hash: u64,
    key: WireKey,
    entry: Option<Arc<ServiceEntry>>,
    /// The record staged before it in the same shard.
    previous: u32,
}

impl StagedServices {
    fn is_empty(&self) -> bool {
        self.records.is_empty()
    }

    /// The first record of a shard's chain.
    fn head(&self, shard: usize) -> u32 {
        self.heads.get(shard).copied().unwrap_or(NO_RECORD)
    }

    /// The record of `key`, if a change of this batch staged one.
    fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
        self.in_shard(shard_index(hash))
            .find(|(_, record)| record.hash == hash && *record.key == *key)
            .map(|(at, _)| at)
    }

    /// The records of a shard with their indexes, the last staged first.
    fn in_shard(&self, shard: usize) -> impl Iterator<Item = (usize, &StagedService)> + '_ {
        let mut at = self.head(shard);
        std::iter::from_fn(move || {
            let index = usize::try_from(at).ok()?;
            let record = self.records.get(index)?;
            at = record.previous;
            Some((index, record))
        })
    }

    fn stage(&mut self, hash: u64, key: WireKey, entry: Option<Arc<ServiceEntry>>) {
        if self.heads.is_empty() {
            self.heads = vec![NO_RECORD; SHARDS];
            self.touched = vec![0; SHARDS.div_ceil(64)];
        }
        let shard = shard_index(hash);
        let Ok(at) = u32::try_from(self.records.len()) else {
            return;
        };
        let Some(head) = self.heads.get_mut(shard) else {
            return;
        };
        let previous = std::mem::replace(head, at);
        if let Some(bits) = self.touched.get_mut(shard / 64) {
            *bits |= 1 << (shard % 64);
        }
        self.records.push(StagedService {
            hash,
            key,
            entry,
            previous,
        });
    }

    /// The shards with a record, ascending.
    fn touched_shards(&self) -> Vec<usize> {
        let mut shards = Vec::new();
        for (word, bits) in self.touched.iter().enumerate() {
            let mut bits = *bits;
            while bits != 0 {
                shards.push(word * 64 + usize::try_from(bits.trailing_zeros()).unwrap_or(0));
                bits &= bits - 1;
            }
        }
        shards
    }

    /// Forgets every record (keeping the buffers).
    fn clear(&mut self) {
        for record in &self.records {
            if let Some(head) = self.heads.get_mut(shard_index(record.hash)) {
                *head = NO_RECORD;
            }
        }
        self.touched.fill(0);
        self.records.clear();
    }
}

/// One deferred reverse-index update: `owner` holds `ip` (or no longer does).
#[derive(Debug, Clone)]
struct ReverseOp {
    hash: u64,
    ip: IpAddr,
    owner: WireKey,
    present: bool,
}

impl ZoneIndex {
    pub(crate) fn new(config: ZoneConfig, zone_names: &[String]) -> Self {
        Self {
            zone_wire: wire_name(config.zone.as_str()).into(),
            zone_names: zone_names.iter().map(|n| wire_name(n).into()).collect(),
            config: Arc::new(config),
            services: CowMap::new(),
            reverse: CowMap::new(),
            namespaces: CowMap::new(),
            imports: 0,
            shared: Arc::default(),
            staged: WriterOnly::default(),
            pending: Vec::new(),
            order: WriterOnly::default(),
            service_slots: WriterOnly::default(),
            reverse_slots: WriterOnly::default(),
            helper_slots: WriterOnly::default(),
        }
    }

    /// The number of services with an import.
    pub(crate) fn imports(&self) -> usize {
        self.imports
    }

    /// Where the service `key` is: its key as the index holds it (the reverse index shares it
    /// as the owner) or a new one, and its entry as the changes so far leave it. `None` when
    /// the namespace or the name is not a DNS label (such a service never has names).
    pub(crate) fn locate(&self, key: ServiceRef<'_>) -> Option<ServicePlace> {
        let wire = service_wire_key(key)?;
        let hash = ServiceMap::hash(wire.as_slice());
        let staged = &self.staged.0;
        if let Some(at) = staged.find(hash, wire.as_slice())
            && let Some(record) = staged.records.get(at)
        {
            return Some(ServicePlace {
                key: record.key.clone(),
                hash,
                staged: Some(at),
                entry: record.entry.clone(),
            });
        }
        Some(
            match self.services.get_key_value_hashed(hash, wire.as_slice()) {
                Some((key, entry)) => ServicePlace {
                    key: key.clone(),
                    hash,
                    staged: None,
                    entry: Some(Arc::clone(entry)),
                },
                None => ServicePlace {
                    key: wire.as_slice().into(),
                    hash,
                    staged: None,
                    entry: None,
                },
            },
        )
    }

    /// Replaces the entry of the service at `place` (found by [`Self::locate`], nothing
    /// changed since) with `new` (`None`: removes it), keeping the namespaces in step. The
    /// services map and the reverse index follow at the next [`Self::flush`]. Returns the entry
    /// replaced and the new one.
    pub(crate) fn replace(
        &mut self,
        place: ServicePlace,
        new: Option<Arc<ServiceEntry>>,
    ) -> Replaced {
        let ServicePlace {
            key: wire_key,
            hash,
            staged,
            entry: replaced,
        } = place;
        let records = &mut self.staged.0;
        match staged.and_then(|at| records.records.get_mut(at)) {
            Some(record) => record.entry = new.clone(),
            None => records.stage(hash, wire_key.clone(), new.clone()),
        }
        let wire_key = &wire_key;
        let old = replaced.as_ref();
        // A service someone asked about gets its names and answers ready here, before the new
        // snapshot is published, so its queries do not pay for the change; services nobody
        // asked about stay lazy, which keeps big batches cheap.
        if let (Some(old), Some(new)) = (old, new.as_ref())
            && old.names.get().is_some()
        {
            new.warm(&self.config);
        }
        let (had, has) = (
            ServiceEntry::has_import(old),
            ServiceEntry::has_import(new.as_ref()),
        );
        if had != has {
            let key = old.or(new.as_ref()).map(|e| Arc::clone(e.key()));
            if let Some(key) = key {
                self.count_namespace(wire_key, &key, has);
            }
            if has {
                self.imports += 1;
            } else {
                self.imports = self.imports.saturating_sub(1);
            }
        }
        self.queue_reverse_updates(wire_key, old, new.as_ref());
        (replaced, new)
    }

    /// Queues the reverse-index updates of a service whose entry `old` became `new`: the
    /// addresses it gains and loses, and those it keeps that several services hold (their
    /// merged answer depends on its entry).
    fn queue_reverse_updates(
        &mut self,
        wire_key: &WireKey,
        old: Option<&Arc<ServiceEntry>>,
        new: Option<&Arc<ServiceEntry>>,
    ) {
        let mut queue = |ip: IpAddr, present: bool| {
            self.pending.push(ReverseOp {
                hash: ReverseMap::hash(&ip),
                ip,
                owner: wire_key.clone(),
                present,
            });
        };
        // The usual change, a new import of a service whose slices stay, when no address is
        // shared: only clusterset IPs that its slices do not also hold come and go.
        if let (Some(old), Some(new)) = (old, new)
            && Arc::ptr_eq(&old.core, &new.core)
            && old.import.is_some()
            && new.import.is_some()
            && self.shared.is_empty()
        {
            let slice_ips = &old.core.slice_ips;
            let (before, after) = (old.import_ptr_ips(), new.import_ptr_ips());
            for ip in before {
                if !after.contains(ip) && !sorted_contains(slice_ips, ip) {
                    queue(*ip, false);
                }
            }
            for ip in after {
                if !before.contains(ip) && !sorted_contains(slice_ips, ip) {
                    queue(*ip, true);
                }
            }
            return;
        }
        let empty = IpList::new();
        let old_ips = old.map_or_else(IpList::new, |e| e.ptr_ips());
        let new_ips = new.map_or(empty, |e| e.ptr_ips());
        let (mut i, mut j) = (0, 0);
        loop {
            let (ip, present) = match (old_ips.get(i), new_ips.get(j)) {
                (Some(a), Some(b)) if a == b => {
                    i += 1;
                    j += 1;
                    // Kept, and held by this service alone: its entry is this service's key,
                    // and the answer follows the entry.
                    if self.shared.is_empty() || !self.shared.contains(a) {
                        continue;
                    }
                    (*a, true)
                }
                (Some(a), Some(b)) if a < b => {
                    i += 1;
                    (*a, false)
                }
                (Some(a), None) => {
                    i += 1;
                    (*a, false)
                }
                (_, Some(b)) => {
                    j += 1;
                    (*b, true)
                }
                (None, None) => break,
            };
            queue(ip, present);
        }
    }

    fn count_namespace(&mut self, wire_key: &[u8], key: &ServiceKey, add: bool) {
        // The namespace label follows the service label.
        let Some(ns) = wire_key
            .first()
            .and_then(|len| wire_key.get(1 + usize::from(*len)..))
        else {
            return;
        };
        match (self.namespaces.get(ns).cloned(), add) {
            (Some(mut entry), true) => {
                entry.count += 1;
                self.namespaces.insert(ns.into(), entry);
            }
            (None, true) => {
                let name = format!("{}.svc.{}", key.namespace, self.config.zone);
                self.namespaces.insert(
                    ns.into(),
                    NamespaceEntry {
                        count: 1,
                        name: name.into(),
                    },
                );
            }
            (Some(mut entry), false) if entry.count > 1 => {
                entry.count -= 1;
                self.namespaces.insert(ns.into(), entry);
            }
            (Some(_), false) => self.namespaces.remove(ns),
            (None, false) => {}
        }
    }

    /// Applies the changes since the last flush to the services map and the reverse index:
    /// each shard they touch is built once for all of its changes; the updates of one address
    /// keep their order. Must run before the index is read or published.
    ///
    /// The two maps are independent: after a big batch, when the process may run on more than
    /// one CPU, this thread orders the reverse updates by shard, a second thread starts on the
    /// reverse index while this one builds the services map, and this one then takes its share
    /// of what is left of the reverse index (the services map is the smaller half). On one CPU
    /// a second thread would only take turns with this one, and with the query threads.
    pub(crate) fn flush(&mut self) {
        let big = self.pending.len() >= PARALLEL_FLUSH
            && self.staged.0.records.len() >= PARALLEL_FLUSH / 2
            && std::thread::available_parallelism().is_ok_and(|cpus| cpus.get() > 1);
        let reverse = ReverseFlush {
            map: &mut self.reverse,
            shared: &mut self.shared,
            pending: &mut self.pending,
            order: &mut self.order.0,
            slots: [&mut self.reverse_slots.0, &mut self.helper_slots.0],
        };
        let (services, staged) = (&mut self.services, &mut self.staged.0);
        let service_slots = &mut self.service_slots.0;
        let mut flush_services = || flush_services(services, staged, service_slots);
        if big {
            reverse.run(Some(flush_services));
        } else {
            flush_services();
            reverse.run(None::<fn()>);
        }
    }

    /// The addresses the index says several services hold, and those with an entry of several
    /// owners: the same set, unless a flush lost track of one.
    #[cfg(test)]
    pub(crate) fn shared_addresses(&self) -> (BTreeSet<IpAddr>, BTreeSet<IpAddr>) {
        (
            self.shared.iter().copied().collect(),
            many_owner_addresses(&self.reverse).into_iter().collect(),
        )
    }

    /// Whether every change was applied to the maps.
    pub(crate) fn is_flushed(&self) -> bool {
        self.pending.is_empty() && self.staged.0.is_empty()
    }

    /// Where the zone starts in a lower-case wire name (on a label boundary), if it is in the
    /// zone.
    pub(crate) fn zone_offset(&self, name: &[u8]) -> Option<usize> {
        let start = name.len().checked_sub(self.zone_wire.len())?;
        if name.get(start..)? != &*self.zone_wire {
            return None;
        }
        let mut pos = 0;
        while pos < start {
            pos += 1 + usize::from(*name.get(pos)?);
        }
        (pos == start).then_some(start)
    }

    /// What the lower-case wire name `key` is; `zone_offset` is [`Self::zone_offset`] of it.
    pub(crate) fn lookup(&self, key: &[u8], zone_offset: Option<usize>) -> Option<Found<'_>> {
        match zone_offset {
            Some(offset) => self.lookup_in_zone(key, offset),
            None => {
                let ip = parse_reverse(key)?;
                let entry = self.reverse.get(&ip)?;
                self.reverse_prepared(ip, entry).map(Found::Name)
            }
        }
    }

    fn lookup_in_zone(&self, key: &[u8], offset: usize) -> Option<Found<'_>> {
        // Count the labels in front of the zone and keep where the last three start.
        let (mut count, mut last) = (0usize, [0usize; 3]);
        let mut pos = 0;
        while pos < offset {
            last = [last[1], last[2], pos];
            count += 1;
            pos += 1 + usize::from(*key.get(pos)?);
        }
        if count <= 2
            && let Some(index) = self.zone_names.iter().position(|n| **n == *key)
        {
            return Some(Found::Zone(index));
        }
        let [svc_start, ns_start, last_start] = last;
        if count < 2 || key.get(last_start..offset)? != b"\x03svc" {
            return None;
        }
        if count == 2 {
            return self
                .namespaces
                .get(key.get(ns_start..last_start)?)
                .map(Found::Namespace);
        }
        let entry = self.services.get(key.get(svc_start..last_start)?)?;
        let names = &entry.names(&self.config).names;
        let prefix = key.get(..svc_start)?;
        let index = names
            .binary_search_by(|(labels, _)| (**labels).cmp(prefix))
            .ok()?;
        names.get(index).map(|(_, prepared)| Found::Name(prepared))
    }

    /// The PTR name of `ip`: its one owner's, or merged from its owners' names on first use.
    pub(crate) fn reverse_prepared<'a>(
        &'a self,
        ip: IpAddr,
        entry: &'a ReverseEntry,
    ) -> Option<&'a PreparedName> {
        let owner_names = |owner: &WireKey| {
            self.services
                .get(&**owner)
                .map(|service| &service.names(&self.config).reverse)
                .and_then(|reverse| {
                    let i = reverse.binary_search_by_key(&ip, |(a, _)| *a).ok()?;
                    reverse.get(i).map(|(_, prepared)| prepared)
                })
        };
        let shared = match entry {
            ReverseEntry::One(owner) => return owner_names(owner),
            ReverseEntry::Many(shared) => shared,
        };
        shared
            .prepared
            .get_or_init(|| {
                let mut ptr = BTreeSet::new();
                for prepared in shared.owners.iter().filter_map(owner_names) {
                    ptr.extend(prepared.view().records.ptr.iter().cloned());
                }
                (!ptr.is_empty()).then(|| ptr_name(&self.config, ip, ptr))
            })
            .as_ref()
    }
}

/// Reverse-index updates at least this many (and half as many changed services) are shared
/// with a second thread when there is a second CPU (see [`ZoneIndex::flush`]): a batch of
/// thousands of changes. Fewer are not worth the thread.
const PARALLEL_FLUSH: usize = 4096;

/// Builds the shards of the services map that `staged` changes touch, and forgets the changes.
fn flush_services(
    services: &mut ServiceMap,
    staged: &mut StagedServices,
    slots: &mut Vec<Slot<WireKey, Arc<ServiceEntry>>>,
) {
    if staged.is_empty() {
        return;
    }
    let mut in_shard: Vec<usize> = Vec::new();
    services.rebuild_shards(staged.touched_shards(), slots, |shard, current, out| {
        // The shard's records (one per key), ordered by hash like its entries.
        in_shard.clear();
        in_shard.extend(staged.in_shard(shard).map(|(at, _)| at));
        let records = &mut staged.records;
        in_shard.sort_unstable_by_key(|&at| records.get(at).map_or(0, |r| r.hash));
        merge_shard(current, &in_shard, records, out);
    });
    staged.clear();
}

/// The reverse index and the updates queued for it: what [`ReverseFlush::run`] needs, apart
/// from the rest of the index.
struct ReverseFlush<'a> {
    map: &'a mut ReverseMap,
    shared: &'a mut Arc<FastSet<IpAddr>>,
    pending: &'a mut Vec<ReverseOp>,
    /// Buffers kept from batch to batch: the order of the updates, and where each of the two
    /// threads builds shards.
    order: &'a mut Vec<u32>,
    slots: [&'a mut Vec<Slot<IpAddr, ReverseEntry>>; 2],
}

/// The groups of the reverse index a flush rebuilds, each with its updates (indexes of the
/// queued updates, in shard order): taken from the front by the second thread and from the
/// back by the writer (from the front when the writer flushes alone).
type GroupQueue<'a, 'm> = Mutex<VecDeque<(GroupPart<'m, IpAddr, ReverseEntry>, &'a [u32])>>;

impl ReverseFlush<'_> {
    /// Applies the queued updates, shard by shard, each address's in the order queued. With
    /// `beside`, a second thread starts on the reverse index while this one runs `beside`, and
    /// the two then share what is left of it, a group of shards at a time.
    fn run(self, beside: Option<impl FnOnce()>) {
        let Self {
            map,
            shared,
            pending,
            order,
            slots: [slots, helper_slots],
        } = self;
        if pending.is_empty() {
            if let Some(beside) = beside {
                beside();
            }
            return;
        }
        let group_bounds = sort_by_shard(pending, order);
        let (queued, in_order): (&[ReverseOp], &[u32]) = (pending, order);
        let mut became_shared = Vec::new();
        let rebuilt = std::panic::catch_unwind(AssertUnwindSafe(|| {
            map.rebuild_in_parts(|mut parts| {
                // The groups with updates (after a change of one service, one or two of the 64).
                let mut queue = VecDeque::new();
                for (group, bounds) in group_bounds.windows(2).enumerate() {
                    if let [start, end] = *bounds
                        && start < end
                        && let Some(updates) = in_order.get(start..end)
                        && let Some(part) = parts.group(group)
                    {
                        queue.push_back((part, updates));
                    }
                }
                let queue: GroupQueue<'_, '_> = Mutex::new(queue);
                let Some(beside) = beside else {
                    rebuild_groups(&queue, Take::Front, queued, slots, &mut became_shared);
                    return;
                };
                std::thread::scope(|scope| {
                    let queue = &queue;
                    // Not started (the system refused a thread): this thread does it all below.
                    let helper = std::thread::Builder::new()
                        .name("dns-zone-flush".to_owned())
                        .spawn_scoped(scope, move || {
                            let mut became_shared = Vec::new();
                            rebuild_groups(
                                queue,
                                Take::Front,
                                queued,
                                helper_slots,
                                &mut became_shared,
                            );
                            became_shared
                        });
                    beside();
                    rebuild_groups(queue, Take::Back, queued, slots, &mut became_shared);
                    if let Ok(helper) = helper {
                        match helper.join() {
                            Ok(theirs) => became_shared.extend(theirs),
                            Err(panic) => std::panic::resume_unwind(panic),
                        }
                    }
                });
            })
        }));
        if let Err(panic) = rebuilt {
            // A bug (nothing here panics on input) left some groups rebuilt and others not. The
            // updates stay queued: the next flush applies them again, which leaves each address
            // with the owners they say. The shared addresses are taken from the entries
            // themselves, so that the next changes' updates are decided right.
            *shared = Arc::new(many_owner_addresses(map));
            std::panic::resume_unwind(panic);
        }
        // Each address is in one group, rebuilt by one thread, which kept its changes in order.
        if !became_shared.is_empty() {
            let set = Arc::make_mut(shared);
            for (ip, is_shared) in became_shared {
                if is_shared {
                    set.insert(ip);
                } else {
                    set.remove(&ip);
                }
            }
        }
        pending.clear();
        order.clear();
    }
}

/// The addresses whose entry has several owners (what [`ZoneIndex`]'s `shared` set holds).
fn many_owner_addresses(map: &ReverseMap) -> FastSet<IpAddr> {
    map.iter()
        .filter(|(_, entry)| matches!(entry, ReverseEntry::Many(_)))
        .map(|(ip, _)| *ip)
        .collect()
}

/// Which end of a [`GroupQueue`] a thread takes its groups from.
#[derive(Clone, Copy)]
enum Take {
    Front,
    Back,
}

/// Rebuilds the groups of `queue`, taking them one at a time from its end `take` until it is
/// empty, each shard with its updates; `became_shared` gets, in order, each address whose entry
/// came to have several owners (`true`) or stopped having them (`false`).
fn rebuild_groups(
    queue: &GroupQueue<'_, '_>,
    take: Take,
    pending: &[ReverseOp],
    scratch: &mut Vec<Slot<IpAddr, ReverseEntry>>,
    became_shared: &mut Vec<(IpAddr, bool)>,
) {
    let op = |at: &u32| usize::try_from(*at).ok().and_then(|at| pending.get(at));
    loop {
        let next = {
            let mut queue = queue.lock().unwrap_or_else(PoisonError::into_inner);
            match take {
                Take::Front => queue.pop_front(),
                Take::Back => queue.pop_back(),
            }
        };
        let Some((part, updates)) = next else {
            return;
        };
        let shards = updates
            .iter()
            .filter_map(op)
            .map(|update| shard_index(update.hash));
        let mut next_update = 0;
        part.rebuild_shards(shards, scratch, |shard, current, out| {
            out.extend_from_slice(current);
            while let Some(update) = updates
                .get(next_update)
                .and_then(op)
                .filter(|update| shard_index(update.hash) == shard)
            {
                next_update += 1;
                update_reverse(out, became_shared, update);
            }
        });
    }
}

/// Whether the sorted `ips` hold `ip` (a scan of a short list: a few comparisons for
/// equality are cheaper than the ordering a binary search needs).
fn sorted_contains(ips: &[IpAddr], ip: &IpAddr) -> bool {
    if ips.len() <= 8 {
        ips.contains(ip)
    } else {
        ips.binary_search(ip).is_ok()
    }
}

/// Builds a shard of the services map into `out` from its entries `current` and this batch's
/// records of the shard (`in_shard`: indexes into `records`, sorted by hash, one per key): a
/// recorded key gets its record's entry (none: removed), the others keep theirs. Entries come
/// out sorted by hash. The records' entries are moved, not counted again.
fn merge_shard(
    current: &[Slot<WireKey, Arc<ServiceEntry>>],
    in_shard: &[usize],
    records: &mut [StagedService],
    out: &mut Vec<Slot<WireKey, Arc<ServiceEntry>>>,
) {
    let mut next = 0;
    let emit = |record: &mut StagedService, out: &mut Vec<_>| {
        if let Some(entry) = record.entry.take() {
            out.push(Slot {
                hash: record.hash,
                key: record.key.clone(),
                value: entry,
            });
        }
    };
    for slot in current {
        // Records ordered before this entry.
        while let Some(record) = in_shard
            .get(next)
            .and_then(|&at| records.get_mut(at))
            .filter(|record| record.hash < slot.hash)
        {
            emit(record, out);
            next += 1;
        }
        // Records of this entry's hash: is one of them this entry's key?
        let replaced = in_shard
            .get(next..)
            .unwrap_or_default()
            .iter()
            .filter_map(|&at| records.get(at))
            .take_while(|record| record.hash == slot.hash)
            .any(|record| record.key == slot.key);
        if !replaced {
            out.push(slot.clone());
        }
    }
    for &at in in_shard.get(next..).unwrap_or_default() {
        if let Some(record) = records.get_mut(at) {
            emit(record, out);
        }
    }
}

/// Orders `order` (indexes of `pending`) by the shard of each update, stably (so each
/// address's updates keep their order), and returns where each group's updates start in it
/// (`GROUPS + 1` bounds). A batch's thousands of updates are sorted in one counting pass.
fn sort_by_shard(pending: &[ReverseOp], order: &mut Vec<u32>) -> [usize; GROUPS + 1] {
    order.clear();
    let shard_of = |at: &u32| {
        usize::try_from(*at)
            .ok()
            .and_then(|at| pending.get(at))
            .map_or(0, |op| shard_index(op.hash))
    };
    if pending.len() <= 64 {
        // A change of one or two services: a few updates.
        order.extend((0..pending.len()).filter_map(|at| u32::try_from(at).ok()));
        order.sort_by_key(shard_of);
        let mut group_bounds = [0; GROUPS + 1];
        bucket_starts(pending, &mut group_bounds, |shard| shard / SHARDS_PER_GROUP);
        return group_bounds;
    }
    let mut starts = vec![0usize; SHARDS + 1];
    bucket_starts(pending, &mut starts, |shard| shard);
    let mut group_bounds = [0; GROUPS + 1];
    for (bound, start) in group_bounds
        .iter_mut()
        .zip(starts.iter().step_by(SHARDS_PER_GROUP))
    {
        *bound = *start;
    }
    order.resize(pending.len(), 0);
    for (at, op) in pending.iter().enumerate() {
        let Ok(at) = u32::try_from(at) else {
            continue;
        };
        if let Some(next) = starts.get_mut(shard_index(op.hash))
            && let Some(slot) = order.get_mut(*next)
        {
            *slot = at;
            *next += 1;
        }
    }
    group_bounds
}

/// Fills `starts` (zeroed, one more than the buckets) with where each bucket's updates start in
/// their order by bucket, the bucket of an update being `bucket` of its shard.
fn bucket_starts(pending: &[ReverseOp], starts: &mut [usize], bucket: impl Fn(usize) -> usize) {
    for op in pending {
        if let Some(count) = starts.get_mut(bucket(shard_index(op.hash)) + 1) {
            *count += 1;
        }
    }
    let mut total = 0;
    for start in starts {
        total += *start;
        *start = total;
    }
}

/// Applies one reverse-index update to `shard` (the entries of the shard being built); an
/// address whose entry comes to have several owners, or stops having them, is pushed onto
/// `became_shared` (with `true` or `false`).
fn update_reverse(
    shard: &mut Vec<Slot<IpAddr, ReverseEntry>>,
    became_shared: &mut Vec<(IpAddr, bool)>,
    op: &ReverseOp,
) {
    let &ReverseOp {
        hash,
        ip,
        ref owner,
        present,
    } = op;
    let found = find(shard, hash, &ip);
    let current = found.ok().and_then(|at| shard.get_mut(at));
    let (mut owners, was_shared): (Vec<WireKey>, bool) = match current.map(|slot| &mut slot.value) {
        Some(ReverseEntry::One(one)) if same_key(one, owner) => {
            // Still the one owner (its own answer follows its entry), or gone.
            if !present && let Ok(at) = found {
                shard.remove(at);
            }
            return;
        }
        None => {
            if present && let Err(at) = found {
                let value = ReverseEntry::One(owner.clone());
                shard.insert(
                    at,
                    Slot {
                        hash,
                        key: ip,
                        value,
                    },
                );
            }
            return;
        }
        Some(ReverseEntry::One(one)) => (vec![one.clone()], false),
        // Still one of several: the same owners, a fresh merged answer.
        Some(ReverseEntry::Many(many))
            if present && many.owners.iter().any(|o| same_key(o, owner)) =>
        {
            *many = SharedReverse::unprepared(Arc::clone(&many.owners));
            return;
        }
        Some(ReverseEntry::Many(many)) => (many.owners.to_vec(), true),
    };
    owners.retain(|o| !same_key(o, owner));
    if present {
        owners.push(owner.clone());
    }
    let entry = ReverseEntry::of(owners);
    let is_shared = matches!(entry, Some(ReverseEntry::Many(_)));
    if is_shared != was_shared {
        became_shared.push((ip, is_shared));
    }
    match (entry, found) {
        (Some(value), Ok(at)) => {
            if let Some(slot) = shard.get_mut(at) {
                slot.value = value;
            }
        }
        (None, Ok(at)) => {
            shard.remove(at);
        }
        // Not reached: an address without an entry returned above.
        (Some(_) | None, Err(_)) => {}
    }
}

/// The address of a canonical reverse name (as [`crate::records::reverse_name`] writes it), in
/// wire form.
fn parse_reverse(key: &[u8]) -> Option<IpAddr> {
    if let Some(body) = key.strip_suffix(b"\x07in-addr\x04arpa\x00") {
        let mut octets = [0u8; 4];
        let mut pos = 0;
        for i in 0..4 {
            let len = usize::from(*body.get(pos)?);
            let label = body.get(pos + 1..pos + 1 + len)?;
            *octets.get_mut(3 - i)? = parse_octet(label)?;
            pos += 1 + len;
        }
        return (pos == body.len()).then_some(IpAddr::V4(Ipv4Addr::from(octets)));
    }
    let body = key.strip_suffix(b"\x03ip6\x04arpa\x00")?;
    if body.len() != 64 {
        return None;
    }
    let mut octets = [0u8; 16];
    for (i, label) in body.chunks_exact(2).enumerate() {
        let [1, digit] = label else { return None };
        let nibble = match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            _ => return None,
        };
        let byte = octets.get_mut(15 - i / 2)?;
        *byte |= if i % 2 == 0 { nibble } else { nibble << 4 };
    }
    Some(IpAddr::V6(Ipv6Addr::from(octets)))
}

/// A decimal octet without leading zeros.
fn parse_octet(label: &[u8]) -> Option<u8> {
    if label.is_empty() || label.len() > 3 || (label.len() > 1 && label.first() == Some(&b'0')) {
        return None;
    }
    let mut value = 0u16;
    for digit in label {
        if !digit.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u16::from(digit - b'0');
    }
    u8::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_names_parse_back_to_their_address() {
        use crate::records::reverse_name;
        for ip in [
            "10.0.0.1",
            "255.0.10.100",
            "0.0.0.0",
            "fd00::1",
            "2001:db8::ab:cdef",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(parse_reverse(&wire_name(&reverse_name(ip))), Some(ip));
        }
        for bad in [
            "01.0.0.10.in-addr.arpa",
            "256.0.0.10.in-addr.arpa",
            "0.0.10.in-addr.arpa",
            "1.0.0.0.10.in-addr.arpa",
            "x.0.0.10.in-addr.arpa",
            "1.ip6.arpa",
        ] {
            assert_eq!(parse_reverse(&wire_name(bad)), None, "{bad}");
        }
    }

    #[test]
    fn a_changed_service_someone_asked_about_is_prepared_before_it_is_published() {
        use crate::records::ClustersetZone;
        use crate::synthetic::service_import;
        use hickory_proto::rr::RecordType;

        let mut zone = ClustersetZone::new(ZoneConfig::default());
        for i in 0..2 {
            zone.apply_import(&service_import(i, 0), None).unwrap();
        }
        zone.flush();
        // svc-0 is asked about; svc-1 is not.
        let answer = zone.answer("svc-0.bench.svc.clusterset.local", RecordType::A);
        assert_eq!(answer.answers.len(), 1);
        for i in 0..2 {
            zone.apply_import(&service_import(i, 1), None).unwrap();
        }
        zone.flush();
        let prepared = |i: usize| {
            let key = ServiceKey::new("bench", &crate::synthetic::service_name(i));
            let wire = service_wire_key(key.as_ref()).unwrap();
            zone.index()
                .services
                .get(wire.as_slice())
                .unwrap()
                .is_prepared()
        };
        assert!(
            prepared(0),
            "the queried service is ready before its first query"
        );
        assert!(!prepared(1), "a service nobody asked about stays lazy");
        // And the prepared answer is the new one.
        let answer = zone.answer("svc-0.bench.svc.clusterset.local", RecordType::A);
        assert_eq!(answer.answers[0].data.to_string(), "242.1.0.0");
    }

    #[test]
    fn wire_keys_inline_or_shared_hash_and_compare_as_their_bytes() {
        let short = service_wire_key(ServiceRef {
            namespace: "shop",
            name: "web",
        })
        .unwrap();
        let long_name = "a-rather-long-service-name-for-a-test";
        let long = service_wire_key(ServiceRef {
            namespace: "shop",
            name: long_name,
        })
        .unwrap();
        let (a, b) = (
            WireKey::from(short.as_slice()),
            WireKey::from(long.as_slice()),
        );
        assert!(matches!(a, WireKey::Inline(..)) && matches!(b, WireKey::Shared(_)));
        for (key, bytes) in [(&a, short.as_slice()), (&b, long.as_slice())] {
            assert_eq!(&**key, bytes);
            assert_eq!(ServiceMap::hash(key), ServiceMap::hash(bytes));
            assert_eq!(key, &WireKey::from(bytes));
        }
        assert_ne!(a, b);
        assert_eq!(a.cmp(&b), short.as_slice().cmp(long.as_slice()));

        // A service with a long key through the zone: its names and its PTR record follow it.
        use crate::records::ClustersetZone;
        use hickory_proto::rr::RecordType;
        let mut zone = ClustersetZone::new(ZoneConfig::default());
        for ip in ["242.9.0.1", "242.9.0.2"] {
            let mut import = crate::synthetic::service_import(0, 0);
            import.metadata.name = Some(long_name.to_owned());
            import.spec.ips = vec![ip.to_owned()];
            zone.upsert_service_import(&import).unwrap();
            let name = format!("{long_name}.bench.svc.clusterset.local");
            let answer = zone.answer(&name, RecordType::A);
            assert_eq!(answer.answers[0].data.to_string(), ip);
            let reverse = crate::records::reverse_name(ip.parse().unwrap());
            let ptr = zone.answer(&reverse, RecordType::PTR);
            assert_eq!(ptr.answers[0].data.to_string(), format!("{name}."));
        }
        let old = zone.answer("1.0.9.242.in-addr.arpa", RecordType::PTR);
        assert!(
            old.answers.is_empty(),
            "the old address lost its PTR record"
        );
    }

    #[test]
    fn ptr_ips_are_the_slices_ready_addresses_and_a_clusterset_services_ips_once_each() {
        use crate::objects::{ImportFact, ReadyAddress};
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let ready = |ips: &[&str]| SliceFact {
            service: "web".to_owned(),
            cluster_id: "east".to_owned(),
            ports: Vec::new(),
            ready: ips
                .iter()
                .map(|s| ReadyAddress {
                    hostname: String::new(),
                    ip: ip(s),
                })
                .collect(),
        };
        let slices: BTreeMap<String, Arc<SliceFact>> = [
            ("a".to_owned(), Arc::new(ready(&["10.0.0.4", "10.0.0.1"]))),
            ("b".to_owned(), Arc::new(ready(&["10.0.0.1", "fd00::1"]))),
        ]
        .into();
        let import = |type_, ips: &[&str]| ImportFact {
            type_,
            ips: ips.iter().map(|s| ip(s)).collect(),
            ports: Arc::from(Vec::new()),
        };
        let key = Arc::new(ServiceKey::new("shop", "web"));
        let entry = ServiceEntry::new(
            Arc::clone(&key),
            Some(import(
                ServiceImportType::ClusterSetIP,
                &["10.0.0.9", "10.0.0.4", "10.0.0.0", "10.0.0.9"],
            )),
            slices,
        );
        let ips = |entry: &ServiceEntry| {
            entry
                .ptr_ips()
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
        };
        assert_eq!(
            ips(&entry),
            ["10.0.0.0", "10.0.0.1", "10.0.0.4", "10.0.0.9", "fd00::1"]
        );
        let headless = ServiceEntry::with_import(
            &entry,
            Some(import(ServiceImportType::Headless, &["10.0.0.9"])),
        );
        assert_eq!(ips(&headless), ["10.0.0.1", "10.0.0.4", "fd00::1"]);
        let no_import = ServiceEntry::with_import(&entry, None);
        assert!(ips(&no_import).is_empty());
        let no_slices = ServiceEntry::new(
            key,
            Some(import(ServiceImportType::ClusterSetIP, &["10.0.0.2"])),
            BTreeMap::new(),
        );
        assert_eq!(ips(&no_slices), ["10.0.0.2"]);
    }

    #[test]
    fn a_service_entry_with_its_reference_counts_fits_three_cache_lines() {
        let counted = std::mem::size_of::<ServiceEntry>() + 2 * std::mem::size_of::<usize>();
        assert!(counted <= 3 * 64, "{counted} bytes");
    }

    #[test]
    fn rebuilt_shards_hold_what_their_builder_says_and_clones_keep_the_old_ones() {
        for shared in [false, true] {
            let mut map: CowMap<u32, u32> = CowMap::new();
            for i in 0..5000 {
                map.insert(i, i);
            }
            let before = shared.then(|| map.clone());
            // Every third shard: values doubled, odd keys dropped, a new key per shard.
            let touched: Vec<usize> = (0..SHARDS).step_by(3).collect();
            let mut added = BTreeMap::new();
            let mut scratch = Vec::new();
            map.rebuild_shards(
                touched.iter().copied(),
                &mut scratch,
                |shard, current, out| {
                    let key = 1_000_000 + u32::try_from(shard).unwrap();
                    let mut slots: Vec<Slot<u32, u32>> = current
                        .iter()
                        .filter(|slot| slot.key % 2 == 0)
                        .map(|slot| Slot {
                            value: slot.value * 2,
                            ..slot.clone()
                        })
                        .collect();
                    let hash = CowMap::<u32, u32>::hash(&key);
                    if shard_index(hash) == shard {
                        slots.push(Slot {
                            hash,
                            key,
                            value: 7,
                        });
                        added.insert(key, 7);
                    }
                    slots.sort_by_key(|slot| slot.hash);
                    out.extend(slots);
                },
            );
            let in_touched =
                |key: &u32| touched.contains(&shard_index(CowMap::<u32, u32>::hash(key)));
            let mut want: BTreeMap<u32, u32> = (0..5000)
                .filter_map(|i| match (in_touched(&i), i % 2) {
                    (false, _) => Some((i, i)),
                    (true, 0) => Some((i, 2 * i)),
                    (true, _) => None,
                })
                .collect();
            want.extend(added);
            let got: BTreeMap<u32, u32> = map.iter().map(|(k, v)| (*k, *v)).collect();
            assert_eq!(got, want, "shared: {shared}");
            assert_eq!(map.len(), want.len());
            for (key, value) in &want {
                assert_eq!(map.get(key), Some(value));
            }
            if let Some(before) = before {
                assert_eq!(before.len(), 5000);
                assert!((0..5000).all(|i| before.get(&i) == Some(&i)));
            }
            // An index not above the one before it is ignored, the group shared or not.
            let _clone = shared.then(|| map.clone());
            let mut built = Vec::new();
            map.rebuild_shards(
                [0, 0, 5, 3, 64, 70, 64],
                &mut scratch,
                |shard, current, out| {
                    built.push(shard);
                    out.extend_from_slice(current);
                },
            );
            assert_eq!(built, [0, 5, 64, 70], "shared: {shared}");
            assert_eq!(map.len(), want.len());
        }
    }

    /// Groups rebuilt in parts, on two threads, end where one rebuild of the same shards does,
    /// count the map's entries, and leave a clone's shards alone (groups shared with a clone are
    /// copied, the others changed in place).
    #[test]
    fn groups_rebuilt_in_parts_on_two_threads_end_as_one_rebuild_does() {
        // Shard by shard: odd keys dropped, a new key where its hash falls in the shard.
        let build = |shard: usize, current: &[Slot<u32, u32>], out: &mut Vec<Slot<u32, u32>>| {
            out.extend(current.iter().filter(|slot| slot.key % 2 == 0).cloned());
            let key = 1_000_000 + u32::try_from(shard).unwrap();
            let hash = CowMap::<u32, u32>::hash(&key);
            if shard_index(hash) == shard {
                let at = out.partition_point(|slot| slot.hash < hash);
                out.insert(
                    at,
                    Slot {
                        hash,
                        key,
                        value: 7,
                    },
                );
            }
        };
        let touched: Vec<usize> = (0..SHARDS).filter(|shard| shard % 5 != 1).collect();
        let entries = |map: &CowMap<u32, u32>| -> BTreeMap<u32, u32> {
            map.iter().map(|(k, v)| (*k, *v)).collect()
        };
        for shared in [false, true] {
            let mut whole: CowMap<u32, u32> = CowMap::new();
            for i in 0..5000 {
                whole.insert(i, i);
            }
            let mut in_parts = whole.clone();
            whole.rebuild_shards(touched.iter().copied(), &mut Vec::new(), build);
            let clone = shared.then(|| in_parts.clone());

            let threads = in_parts.rebuild_in_parts(|parts| {
                let queue = Mutex::new(parts.collect::<VecDeque<_>>());
                let work = || {
                    let mut scratch = Vec::new();
                    let mut ran = 0;
                    while let Some(part) = queue.lock().unwrap().pop_front() {
                        // Indexes of other groups, repeated or descending ones are ignored.
                        let mine = part.shards();
                        let extra = [mine.start + 64, mine.start, mine.start];
                        let shards = touched.iter().copied().filter(|s| mine.contains(s));
                        part.rebuild_shards(shards.chain(extra), &mut scratch, build);
                        ran += 1;
                    }
                    ran
                };
                std::thread::scope(|scope| {
                    let other = scope.spawn(work);
                    [work(), other.join().unwrap()]
                })
            });
            assert_eq!(threads.iter().sum::<usize>(), GROUPS);
            assert_eq!(entries(&in_parts), entries(&whole), "shared: {shared}");
            assert_eq!(in_parts.len(), entries(&whole).len(), "shared: {shared}");
            assert!(in_parts.len() < 5000);
            if let Some(clone) = clone {
                assert!((0..5000).all(|i| clone.get(&i) == Some(&i)));
                assert_eq!(clone.iter().count(), 5000);
            }
        }
    }

    /// A flush that panics half way (a bug; here the writer's own work panics after the second
    /// thread has started) leaves the map's length and its shared addresses true to its
    /// entries and its updates queued, and the next flush ends where an uninterrupted one does.
    #[test]
    #[allow(clippy::panic)]
    fn a_flush_that_panics_half_way_is_finished_by_the_next_one() {
        let owner = |name: String| WireKey::from(name.as_bytes());
        let ip = |i: u32| IpAddr::V4(Ipv4Addr::from(0x0a00_0000 + i));
        // Every address gets an owner; every tenth a second one, then loses its first.
        let mut updates = Vec::new();
        for i in 0..6000 {
            updates.push((ip(i), owner(format!("a{i}")), true));
        }
        for i in (0..6000).step_by(10) {
            updates.push((ip(i), owner(format!("b{i}")), true));
        }
        for i in (0..6000).step_by(20) {
            updates.push((ip(i), owner(format!("a{i}")), false));
        }
        let queue = |pending: &mut Vec<ReverseOp>| {
            pending.extend(updates.iter().map(|(ip, owner, present)| ReverseOp {
                hash: ReverseMap::hash(ip),
                ip: *ip,
                owner: owner.clone(),
                present: *present,
            }));
        };
        struct State {
            map: ReverseMap,
            shared: Arc<FastSet<IpAddr>>,
            pending: Vec<ReverseOp>,
            order: Vec<u32>,
            slots: [Vec<Slot<IpAddr, ReverseEntry>>; 2],
        }
        let run = |state: &mut State, beside: Option<fn()>| {
            let [slots, helper_slots] = &mut state.slots;
            ReverseFlush {
                map: &mut state.map,
                shared: &mut state.shared,
                pending: &mut state.pending,
                order: &mut state.order,
                slots: [slots, helper_slots],
            }
            .run(beside);
        };
        let entries = |map: &ReverseMap| -> Vec<(IpAddr, Vec<Vec<u8>>)> {
            let mut entries: Vec<_> = map
                .iter()
                .map(|(ip, entry)| {
                    let mut owners: Vec<Vec<u8>> = match entry {
                        ReverseEntry::One(one) => vec![one.to_vec()],
                        ReverseEntry::Many(many) => {
                            many.owners.iter().map(|o| o.to_vec()).collect()
                        }
                    };
                    owners.sort();
                    (*ip, owners)
                })
                .collect();
            entries.sort();
            entries
        };

        let fresh = || State {
            map: CowMap::new(),
            shared: Arc::default(),
            pending: Vec::new(),
            order: Vec::new(),
            slots: [Vec::new(), Vec::new()],
        };
        let mut whole = fresh();
        queue(&mut whole.pending);
        run(&mut whole, None);
        assert!(whole.pending.is_empty());
        assert_eq!(
            whole.shared.len(),
            300,
            "every twentieth address keeps two owners"
        );

        let mut broken = fresh();
        queue(&mut broken.pending);
        let panicked = std::panic::catch_unwind(AssertUnwindSafe(|| {
            run(&mut broken, Some(|| panic!("a bug in the writer's half")));
        }));
        assert!(panicked.is_err());
        assert_eq!(broken.map.len(), broken.map.iter().count());
        let shared: BTreeSet<IpAddr> = broken.shared.iter().copied().collect();
        let many: BTreeSet<IpAddr> = many_owner_addresses(&broken.map).into_iter().collect();
        assert_eq!(shared, many);
        assert_eq!(
            broken.pending.len(),
            updates.len(),
            "the updates stay queued"
        );

        run(&mut broken, None);
        assert!(broken.pending.is_empty());
        assert_eq!(entries(&broken.map), entries(&whole.map));
        assert_eq!(broken.map.len(), whole.map.len());
        assert_eq!(broken.shared, whole.shared);
    }

    /// A batch big enough for the two-thread flush (see [`PARALLEL_FLUSH`]), with addresses
    /// that move between services, come to be shared and stop being shared, deleted imports and
    /// relabelled slices, ends with the zone a rebuild from the final objects has.
    #[test]
    fn a_batch_flushed_on_two_threads_ends_where_a_rebuild_does() {
        use crate::synthetic::{endpoint_slice, service_import, service_ip};
        use crate::{ZoneChange, ZoneObject, ZoneStore};
        use hickory_proto::rr::RecordType;
        use mcs_types::labels::SERVICE_NAME_LABEL;

        const SERVICES: usize = 3000;
        assert!(
            std::thread::available_parallelism().is_ok_and(|cpus| cpus.get() > 1),
            "this test covers the flush on two threads, which needs two CPUs"
        );
        let import = |i: usize, generation: u8, ip: Option<String>| {
            let mut import = service_import(i, generation);
            if let Some(ip) = ip {
                import.spec.ips = vec![ip];
            }
            ZoneObject::ServiceImport(Box::new(import))
        };
        // Before: every service sixth in ten shares the address of the one before it.
        let before = |i: usize| import(i, 0, (i % 10 == 6).then(|| service_ip(i - 1, 0)));
        let mut slices: Vec<ZoneObject> = (0..SERVICES)
            .map(|i| ZoneObject::EndpointSlice(Box::new(endpoint_slice(i))))
            .collect();
        let incremental = ZoneStore::new(ZoneConfig::default());
        incremental
            .replace_all((0..SERVICES).map(before).chain(slices.clone()).collect())
            .unwrap();
        let mut imports: Vec<Option<ZoneObject>> = Vec::new();
        let mut changes = Vec::new();
        for (i, slice_now) in slices.iter_mut().enumerate() {
            let ip = match i % 10 {
                // Deleted.
                0 => {
                    imports.push(None);
                    changes.push(ZoneChange::DeleteServiceImport(ServiceKey::new(
                        "bench",
                        &crate::synthetic::service_name(i),
                    )));
                    continue;
                }
                // Takes the address of the one before it, which is deleted.
                1 => Some(service_ip(i - 1, 0)),
                // Its slice moves to the next service.
                3 => {
                    let mut slice = endpoint_slice(i);
                    let labels = slice.metadata.labels.get_or_insert_default();
                    labels.insert(
                        SERVICE_NAME_LABEL.to_owned(),
                        crate::synthetic::service_name(i + 1),
                    );
                    *slice_now = ZoneObject::EndpointSlice(Box::new(slice.clone()));
                    changes.push(ZoneChange::Upsert(ZoneObject::EndpointSlice(Box::new(
                        slice,
                    ))));
                    None
                }
                // Comes to share the new address of the one before it, and stops sharing its
                // old one with the next (which moves to an address of its own).
                5 => Some(service_ip(i - 1, 1)),
                _ => None,
            };
            // Changed twice in the batch, the second change the one that stays.
            if i % 7 == 0 {
                changes.push(ZoneChange::Upsert(import(i, 2, None)));
            }
            imports.push(Some(import(i, 1, ip.clone())));
            changes.push(ZoneChange::Upsert(import(i, 1, ip)));
        }
        // Every kept import changes its address: two reverse updates each, and a staged
        // service each, enough for the second thread.
        const { assert!(SERVICES * 9 / 10 * 2 >= PARALLEL_FLUSH && SERVICES >= PARALLEL_FLUSH / 2) };
        let report = incremental.apply(changes);
        assert!(report.rejected.is_empty(), "{:?}", report.rejected);
        // The two threads' changes of which addresses are shared all reached the index.
        let (said, held) = incremental.snapshot().index().shared_addresses();
        assert!(!held.is_empty());
        assert_eq!(said, held);

        let rebuilt = ZoneStore::new(ZoneConfig::default());
        let objects: Vec<ZoneObject> = imports.into_iter().flatten().chain(slices).collect();
        rebuilt.replace_all(objects).unwrap();
        let without_soa = |file: String| -> Vec<String> {
            file.lines()
                .filter(|line| !line.contains("SOA"))
                .map(str::to_owned)
                .collect()
        };
        assert_eq!(
            without_soa(incremental.zone_file()),
            without_soa(rebuilt.zone_file())
        );
        let ptr = |store: &ZoneStore, ip: &str| {
            let name = crate::records::reverse_name(ip.parse().unwrap());
            let mut targets: Vec<String> = store
                .answer(&name, RecordType::PTR)
                .answers
                .iter()
                .map(|r| r.data.to_string())
                .collect();
            targets.sort();
            targets
        };
        let service = |i: usize| format!("svc-{i}.bench.svc.clusterset.local.");
        let endpoint = |n: u8, i: usize| {
            let [_, _, hi, lo] = u32::try_from(i).unwrap().to_be_bytes();
            format!("10.{n}.{hi}.{lo}")
        };
        for base in (0..SERVICES).step_by(10) {
            let expected: [(String, Vec<String>); 8] = [
                // A deleted service's address, taken by the next.
                (service_ip(base, 0), vec![service(base + 1)]),
                (service_ip(base + 1, 0), vec![]),
                // A new address two services share.
                (
                    service_ip(base + 4, 1),
                    vec![service(base + 4), service(base + 5)],
                ),
                // An address two services shared, now nobody's.
                (service_ip(base + 5, 0), vec![]),
                (service_ip(base + 6, 1), vec![service(base + 6)]),
                // An address of a change that a later one in the batch replaced.
                (service_ip(base + 7, 2), vec![]),
                (service_ip(base + 7, 1), vec![service(base + 7)]),
                (service_ip(base + 9, 0), vec![]),
            ];
            for (ip, targets) in expected {
                assert_eq!(ptr(&incremental, &ip), targets, "{ip}");
            }
            // The endpoints of a relabelled slice belong to the service it moved to.
            for n in [1, 2] {
                let targets = ptr(&incremental, &endpoint(n, base + 3));
                assert!(!targets.is_empty(), "{}", endpoint(n, base + 3));
                let owner = format!(".{}", service(base + 4));
                assert!(targets.iter().all(|t| t.ends_with(&owner)), "{targets:?}");
            }
        }
        // And every address answers as in the rebuilt zone.
        for i in 0..SERVICES {
            for ip in [
                service_ip(i, 0),
                service_ip(i, 1),
                service_ip(i, 2),
                endpoint(1, i),
                endpoint(2, i),
            ] {
                assert_eq!(ptr(&incremental, &ip), ptr(&rebuilt, &ip), "{ip}");
            }
        }
    }

    #[test]
    fn cow_map_clones_do_not_see_later_changes() {
        let mut map: CowMap<u32, u32> = CowMap::new();
        for i in 0..1000 {
            map.insert(i, i);
        }
        let before = map.clone();
        map.insert(5, 50);
        map.remove(&6);
        map.remove(&6000);
        assert_eq!((map.len(), before.len()), (999, 1000));
        assert_eq!((map.get(&5), before.get(&5)), (Some(&50), Some(&5)));
        assert_eq!((map.get(&6), before.get(&6)), (None, Some(&6)));
        assert_eq!(map.iter().count(), 999);
    }
}

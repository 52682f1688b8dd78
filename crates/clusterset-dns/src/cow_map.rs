//! A hash map in 64 x 64 shards, copied on write ([`CowMap`]): the zone index's services,
//! namespaces and reverse names are kept in such maps, and every snapshot the server answers
//! from is a clone (64 reference counts). Generic over its keys and values; the zone index
//! builds on [`CowMap::rebuild_shards`] and [`CowMap::rebuild_in_parts`] to apply a batch of
//! changes shard by shard, on one thread or two.

use std::borrow::Borrow;
use std::hash::{Hash, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use crate::name::NameHasher;

/// The number of groups of shards of a [`CowMap`].
pub(crate) const GROUPS: usize = 64;
/// The number of shards in a group.
pub(crate) const SHARDS_PER_GROUP: usize = 64;

/// One entry of a shard: the key's hash (which also chose the shard), the key and the value.
#[derive(Debug, Clone)]
pub(crate) struct Slot<K, V> {
    pub(crate) hash: u64,
    pub(crate) key: K,
    pub(crate) value: V,
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
pub(crate) fn find<K, V, Q>(shard: &[Slot<K, V>], hash: u64, key: &Q) -> Result<usize, usize>
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::{BTreeMap, VecDeque};
    use std::sync::Mutex;

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

    /// The model a map must equal: its entries, read through `iter`, `get` and `len`.
    fn assert_holds(map: &CowMap<u32, u32>, want: &BTreeMap<u32, u32>) {
        let got: BTreeMap<u32, u32> = map.iter().map(|(k, v)| (*k, *v)).collect();
        assert_eq!(&got, want);
        assert_eq!(map.len(), want.len());
        assert_eq!(map.iter().count(), want.len(), "no key twice");
        for (key, value) in want {
            assert_eq!(map.get(key), Some(value), "{key}");
        }
    }

    #[test]
    fn inserts_add_or_replace_and_removals_forget_only_their_key() {
        let mut map: CowMap<u32, u32> = CowMap::new();
        assert_eq!((map.len(), map.iter().count(), map.get(&1)), (0, 0, None));
        let mut want = BTreeMap::new();
        for i in 0..300 {
            map.insert(i, i);
            want.insert(i, i);
        }
        assert_holds(&map, &want);
        // Replacing keeps the length.
        for i in (0..300).step_by(7) {
            map.insert(i, i + 1000);
            want.insert(i, i + 1000);
        }
        assert_holds(&map, &want);
        // Removing a key that is not there changes nothing.
        map.remove(&5000);
        assert_holds(&map, &want);
        for i in (0..300).step_by(3) {
            map.remove(&i);
            want.remove(&i);
        }
        assert_holds(&map, &want);
        assert_eq!(map.get(&3), None);
        // A removed key can come back.
        map.insert(3, 33);
        want.insert(3, 33);
        assert_holds(&map, &want);
    }

    #[test]
    fn keys_are_found_through_their_borrowed_form() {
        let mut map: CowMap<Arc<[u8]>, u32> = CowMap::new();
        for (i, key) in [&b"\x03web\x04shop"[..], b"\x02db\x04shop", b""]
            .into_iter()
            .enumerate()
        {
            map.insert(key.into(), u32::try_from(i).unwrap());
        }
        assert_eq!(map.get(&b"\x02db\x04shop"[..]), Some(&1));
        assert_eq!(map.get(&b""[..]), Some(&2));
        assert_eq!(map.get(&b"\x02db\x04shoq"[..]), None);
        let hash = CowMap::<Arc<[u8]>, u32>::hash(&b"\x03web\x04shop"[..]);
        let (key, value) = map
            .get_key_value_hashed(hash, &b"\x03web\x04shop"[..])
            .unwrap();
        assert_eq!((&**key, *value), (&b"\x03web\x04shop"[..], 0));
        map.remove(&b"\x03web\x04shop"[..]);
        assert_eq!((map.get(&b"\x03web\x04shop"[..]), map.len()), (None, 2));
    }

    /// A snapshot (a clone) keeps every entry it had, whatever the map it was cloned from does
    /// next, whether that map then changes a shard in place (no clone shares it any more) or
    /// copies it.
    #[test]
    fn a_snapshot_never_sees_a_later_write() {
        let mut map: CowMap<u32, u32> = CowMap::new();
        let mut want: BTreeMap<u32, u32> = BTreeMap::new();
        for i in 0..2000 {
            map.insert(i, i);
            want.insert(i, i);
        }
        let snapshot = map.clone();
        let snapshot_want = want.clone();
        for round in 0..3 {
            // Replaced values (in place once no clone shares the shard), new keys, removals,
            // and a rebuild of a third of the shards.
            for i in (0..2000).step_by(5) {
                map.insert(i, i + 10_000 * (round + 1));
                want.insert(i, i + 10_000 * (round + 1));
            }
            for i in 0..100 {
                map.insert(5000 + 100 * round + i, round);
                want.insert(5000 + 100 * round + i, round);
            }
            for i in (1..2000).step_by(11) {
                map.remove(&(i + round));
                want.remove(&(i + round));
            }
            map.rebuild_shards(
                (0..SHARDS).step_by(3),
                &mut Vec::new(),
                |_, current, out| out.extend(current.iter().filter(|s| s.key % 13 != 0).cloned()),
            );
            want.retain(|key, _| {
                key % 13 != 0
                    || !(0..SHARDS)
                        .step_by(3)
                        .any(|s| s == shard_index(CowMap::<u32, u32>::hash(key)))
            });
            assert_holds(&map, &want);
            assert_holds(&snapshot, &snapshot_want);
        }
        // A snapshot taken now sees the writes so far, and none after.
        let later = map.clone();
        map.insert(0, 7);
        map.remove(&1);
        assert_holds(&later, &want);
        assert_ne!(map.get(&0), later.get(&0));
    }

    /// A key whose hash equals other keys' hashes (a collision: here every key's) is still told
    /// apart by its value, past the 16 entries up to which a shard is scanned rather than
    /// binary-searched.
    #[test]
    fn keys_whose_hashes_collide_are_told_apart() {
        #[derive(Debug, Clone, PartialEq, Eq)]
        struct Colliding(u32);
        impl Hash for Colliding {
            fn hash<H: Hasher>(&self, state: &mut H) {
                state.write_u8(1);
            }
        }
        let mut map: CowMap<Colliding, u32> = CowMap::new();
        for i in 0..40 {
            map.insert(Colliding(i), i);
        }
        assert_eq!(map.len(), 40);
        for i in 0..40 {
            assert_eq!(map.get(&Colliding(i)), Some(&i));
        }
        map.insert(Colliding(17), 170);
        map.remove(&Colliding(3));
        map.remove(&Colliding(40));
        assert_eq!(map.len(), 39);
        assert_eq!(map.get(&Colliding(17)), Some(&170));
        assert_eq!(map.get(&Colliding(3)), None);
        assert_eq!(map.get(&Colliding(39)), Some(&39));
        let hash = CowMap::<Colliding, u32>::hash(&Colliding(0));
        assert!(
            map.iter()
                .all(|(key, _)| CowMap::<Colliding, u32>::hash(key) == hash)
        );
    }

    /// Shards grow well past the 16 entries up to which a lookup scans them, and every entry
    /// stays in the shard its hash picks, sorted by hash, where a lookup finds it.
    #[test]
    fn shards_grow_past_the_scan_limit_and_keep_their_entries_in_place() {
        const KEYS: u32 = 100_000;
        let mut map: CowMap<u32, u32> = CowMap::new();
        for i in 0..KEYS {
            map.insert(i, i);
        }
        assert_eq!(map.len(), usize::try_from(KEYS).unwrap());
        let mut largest = 0;
        for (g, group) in map.groups.iter().enumerate() {
            for (s, shard) in group.iter().enumerate() {
                largest = largest.max(shard.len());
                assert!(shard.windows(2).all(|w| w[0].hash <= w[1].hash));
                for slot in shard.iter() {
                    assert_eq!(slot.hash, CowMap::<u32, u32>::hash(&slot.key));
                    assert_eq!(shard_index(slot.hash), g * SHARDS_PER_GROUP + s);
                }
            }
        }
        assert!(largest > 16, "the largest shard holds {largest} entries");
        assert!((0..KEYS).all(|i| map.get(&i) == Some(&i)));
        assert_eq!(map.get(&KEYS), None);
    }

    /// A builder that panics (a bug) in a map that no clone shares leaves the shards built
    /// before it in the map, the others as they were, and the map's length true to its entries.
    #[test]
    #[allow(clippy::panic)]
    fn a_builder_that_panics_leaves_the_length_true_to_the_entries() {
        let mut map: CowMap<u32, u32> = CowMap::new();
        for i in 0..5000 {
            map.insert(i, i);
        }
        let mut built = 0;
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            map.rebuild_shards(0..SHARDS, &mut Vec::new(), |_, current, out| {
                if built == 100 {
                    panic!("a bug in a builder");
                }
                built += 1;
                // Odd keys dropped.
                out.extend(current.iter().filter(|slot| slot.key % 2 == 0).cloned());
            });
        }));
        assert!(result.is_err());
        assert_eq!(map.len(), map.iter().count());
        assert!(map.len() < 5000 && map.len() > 2500, "{}", map.len());
    }

    #[test]
    fn parts_are_handed_out_once_each_in_group_order() {
        let mut map: CowMap<u32, u32> = CowMap::new();
        map.rebuild_in_parts(|mut parts| {
            let third = parts.group(3).unwrap();
            assert_eq!(third.shards(), 3 * SHARDS_PER_GROUP..4 * SHARDS_PER_GROUP);
            // Groups before the last one handed out, and that one, are gone.
            assert!(parts.group(2).is_none());
            assert!(parts.group(3).is_none());
            assert_eq!(parts.next().unwrap().shards().start, 4 * SHARDS_PER_GROUP);
            assert!(parts.group(GROUPS - 1).is_some());
            assert!(parts.group(GROUPS).is_none());
            assert!(parts.next().is_none());
        });
        assert_eq!(map.len(), 0);
    }
}

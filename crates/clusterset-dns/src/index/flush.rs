//! Applying a batch of staged changes to the zone index ([`ZoneIndex::flush`]): each shard of
//! the services map the batch touches is built once from its entries and the batch's records,
//! and the reverse-index updates are applied grouped by shard, on a second thread too after a
//! big batch.

#[cfg(test)]
use std::collections::BTreeSet;
use std::collections::VecDeque;
use std::net::IpAddr;
use std::panic::AssertUnwindSafe;
use std::sync::{Arc, Mutex, PoisonError};

use crate::cow_map::{GROUPS, GroupPart, SHARDS, SHARDS_PER_GROUP, Slot, find, shard_index};
use crate::name::FastSet;

use super::entry::{ReverseEntry, ServiceEntry, SharedReverse, WireKey, same_key};
use super::{ReverseMap, ServiceMap, ZoneIndex};

/// No record: the end of a chain of [`StagedServices`].
const NO_RECORD: u32 = u32::MAX;

/// The service changes of a batch, until [`ZoneIndex::flush`]: the latest entry of each
/// changed service, chained per shard, so that a later change of the same batch finds it and
/// the flush builds each touched shard once.
#[derive(Debug, Default)]
pub(super) struct StagedServices {
    pub(super) records: Vec<StagedService>,
    /// Per shard, the last record staged in it (empty until the first change).
    heads: Vec<u32>,
    /// The shards with a record, a bit each.
    touched: Vec<u64>,
}

/// A service's entry as the changes staged so far leave it (`None`: removed).
#[derive(Debug)]
pub(super) struct StagedService {
    hash: u64,
    pub(super) key: WireKey,
    pub(super) entry: Option<Arc<ServiceEntry>>,
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
    pub(super) fn find(&self, hash: u64, key: &[u8]) -> Option<usize> {
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

    pub(super) fn stage(&mut self, hash: u64, key: WireKey, entry: Option<Arc<ServiceEntry>>) {
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
pub(super) struct ReverseOp {
    pub(super) hash: u64,
    pub(super) ip: IpAddr,
    pub(super) owner: WireKey,
    pub(super) present: bool,
}

impl ZoneIndex {
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cow_map::CowMap;
    use crate::objects::ServiceKey;
    use crate::records::ZoneConfig;
    use std::net::Ipv4Addr;

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
            let name = crate::name::reverse_name(ip.parse().unwrap());
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
}

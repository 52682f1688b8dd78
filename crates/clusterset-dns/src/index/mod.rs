//! The zone's indexes, shared by the zone model ([`crate::zone::ClustersetZone`]) and the
//! server's snapshots (`wire::Snapshot`): the same maps, the same entries, the same lazily
//! computed answers.
//!
//! - Services: a copy-on-write sharded map ([`crate::cow_map`]) from the wire form of
//!   `<svc>.<ns>` to the service's facts (import and slices) and, computed the first time one of
//!   its names is asked for, every name below `<svc>.<ns>.svc.<zone>` with its answers
//!   ([`entry`]). A change replaces one entry; nothing is computed until a query (or the model)
//!   asks.
//! - Namespaces: `<ns>.svc.<zone>` exists while a service of the namespace has an import.
//! - Reverse names: address -> the services that may hold a PTR record for it, maintained from
//!   the facts when they change; the PTR answer is computed from the owners on first use.
//!
//! Changes are staged and applied to the maps in one go by [`ZoneIndex::flush`] ([`flush`]).
//! Names of the zone itself (apex, `svc`, `pod`, `dns`, `ns.dns`, `dns-version`) are matched
//! here and answered from a small table per configuration (see [`crate::records`]).

mod entry;
mod flush;

use std::collections::BTreeSet;
use std::net::IpAddr;
use std::sync::Arc;

use crate::cow_map::{CowMap, Slot};
use crate::name::{FastSet, parse_reverse, wire_name};
use crate::objects::{IpList, ServiceKey, ServiceRef};
use crate::prepared::{PreparedName, ptr_name};
use crate::records::ZoneConfig;

pub(crate) use entry::ServiceEntry;
use entry::{NamespaceEntry, ReverseEntry, WireKey, service_wire_key};
use flush::{ReverseOp, StagedServices};

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

/// One service replaced by a change: the entry before and after (`None`: absent).
pub(crate) type Replaced = (Option<Arc<ServiceEntry>>, Option<Arc<ServiceEntry>>);

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

/// Whether the sorted `ips` hold `ip` (a scan of a short list: a few comparisons for
/// equality are cheaper than the ordering a binary search needs).
fn sorted_contains(ips: &[IpAddr], ip: &IpAddr) -> bool {
    if ips.len() <= 8 {
        ips.contains(ip)
    } else {
        ips.binary_search(ip).is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_changed_service_someone_asked_about_is_prepared_before_it_is_published() {
        use crate::synthetic::service_import;
        use crate::zone::ClustersetZone;
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
            let wire = service_wire_key(crate::objects::service_ref(&key)).unwrap();
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
}

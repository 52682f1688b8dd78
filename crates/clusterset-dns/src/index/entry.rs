//! The entries of the zone index: a service's ([`ServiceEntry`]: its facts, and its names once
//! asked for), an address's in the reverse index ([`ReverseEntry`]), a namespace's
//! ([`NamespaceEntry`]), and the key services are found by ([`WireKey`], the wire form of
//! `<svc>.<ns>`).

use std::borrow::Borrow;
use std::collections::BTreeMap;
use std::hash::{Hash, Hasher};
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use mcs_types::ServiceImportType;

use crate::objects::{ImportFact, IpList, ServiceKey, ServiceRef, SliceFact};
use crate::prepared::{PreparedName, ServiceNames, service_names};
use crate::records::ZoneConfig;

/// One service: its facts and its names, computed on first use.
///
/// Small (three cache lines): a batch that changes every service's import writes a new entry
/// for each and reads the old one.
#[derive(Debug)]
pub(crate) struct ServiceEntry {
    /// What a change of the import keeps, shared by the entries of the service's imports.
    pub(super) core: Arc<ServiceCore>,
    /// Inline: an [`ImportFact`] is cheap to clone, and a change of the import (the usual
    /// change) then allocates the entry only.
    pub(crate) import: Option<ImportFact>,
    pub(super) names: OnceLock<ServiceNames>,
}

/// The part of a service that a change of its import keeps: its key, its EndpointSlices and
/// their ready addresses.
#[derive(Debug)]
pub(super) struct ServiceCore {
    key: Arc<ServiceKey>,
    /// Slices by name.
    slices: BTreeMap<String, Arc<SliceFact>>,
    /// The ready addresses of the slices, sorted, without duplicates.
    pub(super) slice_ips: IpList,
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
    pub(super) fn ptr_ips(&self) -> IpList {
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
    pub(super) fn import_ptr_ips(&self) -> &[IpAddr] {
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
    pub(super) fn warm(&self, config: &ZoneConfig) {
        for (_, name) in &self.names(config).names {
            name.encode_all();
        }
    }

    /// Whether the names were computed (someone asked, or the entry was warmed).
    #[cfg(test)]
    pub(crate) fn is_prepared(&self) -> bool {
        self.names.get().is_some()
    }

    pub(super) fn has_import(entry: Option<&Arc<Self>>) -> bool {
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
pub(super) fn same_key(a: &WireKey, b: &WireKey) -> bool {
    a == b
}

/// An address several services hold: their keys (sorted) and the merged PTR answer.
#[derive(Debug)]
pub(crate) struct SharedReverse {
    pub(super) owners: Arc<[WireKey]>,
    pub(super) prepared: OnceLock<Option<PreparedName>>,
}

impl ReverseEntry {
    pub(super) fn of(mut owners: Vec<WireKey>) -> Option<Self> {
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
    pub(super) fn unprepared(owners: Arc<[WireKey]>) -> Arc<Self> {
        Arc::new(Self {
            owners,
            prepared: OnceLock::new(),
        })
    }
}

/// A namespace with at least one imported service.
#[derive(Debug, Clone)]
pub(crate) struct NamespaceEntry {
    pub(super) count: usize,
    /// `<ns>.svc.<zone>`.
    pub(crate) name: Arc<str>,
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::index::ServiceMap;

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
        use crate::zone::ClustersetZone;
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
            let reverse = crate::name::reverse_name(ip.parse().unwrap());
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
}

//! The clusterset zone as records: ServiceImports and MCS EndpointSlices in, DNS answers out.
//!
//! Pure: no IO, no clock. [`ClustersetZone`] keeps, per service, the facts of its import and
//! slices; an update replaces one service's facts, and the service's names and records are
//! computed from them the first time one is asked for (the indexes are in `index.rs`).

use std::collections::{BTreeMap, BTreeSet, HashSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use mcs_types::ServiceImportType;
use mcs_types::names::{ClustersetName, Zone};

use crate::index::{FastMap, Found, ServiceEntry, ServiceNames, ServicePlace, ZoneIndex};
use crate::objects::{
    ImportFact, ObjectError, PortFact, ReadyAddress, ServiceKey, ServiceRef, SliceFact, SliceKey,
    import_fact, import_key, slice_fact,
};
use crate::wire::{PreparedName, wire_name};

/// The TTL of every record unless configured otherwise (as CoreDNS and Lighthouse).
pub const DEFAULT_TTL: u32 = 5;

/// The schema version in `dns-version.<zone>` TXT: the MCS DNS specification this zone follows.
pub const DNS_SCHEMA_VERSION: &str = "1.0.0";

/// The TTL of the `dns-version` TXT record (as in the specification's example).
pub const DNS_VERSION_TTL: u32 = 28800;

/// What the zone answers and how.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ZoneConfig {
    /// The clusterset zone (`clusterset.local`).
    pub zone: Zone,
    /// TTL of all records but `dns-version`, and the SOA minimum (negative-caching TTL).
    pub ttl: u32,
    /// Lighthouse compatibility: answer `<clusterid>.<svc>.<ns>.svc.<zone>` with the ready
    /// addresses that cluster's EndpointSlices hold. The MCS spec says the name must not exist
    /// (NXDOMAIN, the default); Submariner Lighthouse answers it and Rook queries it.
    pub lighthouse_cluster_names: bool,
    /// Addresses of this server, answered for the zone's name server `ns.dns.<zone>`.
    pub nameserver_addresses: Vec<IpAddr>,
}

impl Default for ZoneConfig {
    fn default() -> Self {
        Self {
            zone: Zone::default(),
            ttl: DEFAULT_TTL,
            lighthouse_cluster_names: false,
            nameserver_addresses: Vec::new(),
        }
    }
}

/// One SRV record's data; the target is a lower-case name without the trailing dot.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct SrvData {
    /// Priority (always 0).
    pub priority: u16,
    /// Weight, as CoreDNS computes it: `100 / n` for the `n` (port × address) entries before
    /// deduplication.
    pub weight: u16,
    /// The port number.
    pub port: u16,
    /// The target name.
    pub target: String,
}

/// The records one name holds (from one contributor, or merged from all).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NameRecords {
    /// IPv4 addresses.
    pub a: BTreeSet<Ipv4Addr>,
    /// IPv6 addresses.
    pub aaaa: BTreeSet<Ipv6Addr>,
    /// SRV records, deduplicated by (target, port).
    pub srv: Vec<SrvData>,
    /// PTR targets (names without the trailing dot).
    pub ptr: BTreeSet<String>,
    /// TXT strings (only `dns-version`).
    pub txt: Vec<String>,
    /// The zone apex (SOA and NS).
    pub apex: bool,
}

impl NameRecords {
    fn add_ip(&mut self, ip: IpAddr) {
        match ip {
            IpAddr::V4(v4) => {
                self.a.insert(v4);
            }
            IpAddr::V6(v6) => {
                self.aaaa.insert(v6);
            }
        }
    }

    /// The record types this name has data for.
    pub fn record_types(&self) -> Vec<RecordType> {
        let mut types = Vec::new();
        if self.apex {
            types.extend([RecordType::SOA, RecordType::NS]);
        }
        let present = [
            (!self.a.is_empty(), RecordType::A),
            (!self.aaaa.is_empty(), RecordType::AAAA),
            (!self.srv.is_empty(), RecordType::SRV),
            (!self.ptr.is_empty(), RecordType::PTR),
            (!self.txt.is_empty(), RecordType::TXT),
        ];
        types.extend(present.iter().filter(|(p, _)| *p).map(|(_, t)| *t));
        types
    }
}

/// The names an update touched (lower case, no trailing dot). Whoever caches answers
/// recomputes exactly these.
pub type ChangedNames = HashSet<String>;

/// The answer to one question, as records (the wire layer encodes it).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Answer {
    /// NOERROR, NXDOMAIN, REFUSED (not our zone, zone transfers).
    pub response_code: ResponseCode,
    /// Whether we are authoritative for the name (AA bit).
    pub authoritative: bool,
    /// The answer section.
    pub answers: Vec<Record>,
    /// The authority section (the SOA of a negative answer).
    pub authorities: Vec<Record>,
    /// The additional section (A/AAAA of SRV targets).
    pub additionals: Vec<Record>,
}

impl Answer {
    fn refused() -> Self {
        Self {
            response_code: ResponseCode::Refused,
            authoritative: false,
            answers: Vec::new(),
            authorities: Vec::new(),
            additionals: Vec::new(),
        }
    }

    /// NOERROR with no records for the question's type (the name exists).
    pub fn is_nodata(&self) -> bool {
        self.response_code == ResponseCode::NoError && self.answers.is_empty()
    }
}

/// The clusterset zone: ServiceImports and MCS EndpointSlices, and the records they make.
///
/// The zone keeps facts, not records: per service its import and slices, plus the namespaces
/// and the addresses (for PTR) its services hold. A service's names and records are computed
/// the first time one of them is asked for, and kept until the service changes; the server's
/// snapshots share the very same entries, so the model and the wire say the same.
///
/// ```
/// use clusterset_dns::{ClustersetZone, ZoneConfig};
/// use hickory_proto::rr::RecordType;
///
/// let mut zone = ClustersetZone::new(ZoneConfig::default());
/// let import = serde_json::from_value(serde_json::json!({
///     "apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceImport",
///     "metadata": {"name": "web", "namespace": "shop"},
///     "spec": {"type": "ClusterSetIP", "ips": ["242.0.0.10"], "ports": [{"name": "http", "port": 80}]}
/// }))?;
/// zone.upsert_service_import(&import)?;
/// let answer = zone.answer("web.shop.svc.clusterset.local.", RecordType::A);
/// assert_eq!(answer.answers[0].to_string(), "web.shop.svc.clusterset.local. 5 IN A 242.0.0.10");
/// let srv = zone.answer("_http._tcp.web.shop.svc.clusterset.local", RecordType::SRV);
/// assert_eq!(srv.answers[0].to_string(),
///     "_http._tcp.web.shop.svc.clusterset.local. 5 IN SRV 0 100 80 web.shop.svc.clusterset.local.");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug)]
pub struct ClustersetZone {
    serial: u32,
    index: ZoneIndex,
    /// The zone's own names (`zone_names` order), for [`Self::names`].
    zone_names: Vec<String>,
    slice_owner: FastMap<SliceKey, ServiceKey>,
    /// The names of the SOA record (apex, `ns.dns`, `hostmaster`), parsed once: every
    /// snapshot carries a new SOA (the serial).
    soa_names: [Name; 3],
}

/// One service replaced by a change: the entry before and after (`None`: absent).
pub(crate) type Replaced = (Option<Arc<ServiceEntry>>, Option<Arc<ServiceEntry>>);

impl ClustersetZone {
    /// An empty zone: the apex, `svc`, `pod`, `dns-version` and the name server only.
    pub fn new(config: ZoneConfig) -> Self {
        let zone_names: Vec<String> = zone_names(&config).into_iter().map(|(n, _)| n).collect();
        let apex = config.zone.as_str();
        let soa_names = [
            fqdn(apex),
            fqdn(&format!("ns.dns.{apex}")),
            fqdn(&format!("hostmaster.{apex}")),
        ];
        Self {
            soa_names,
            serial: 1,
            index: ZoneIndex::new(config, &zone_names),
            zone_names,
            slice_owner: FastMap::default(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ZoneConfig {
        &self.index.config
    }

    /// The SOA serial.
    pub fn serial(&self) -> u32 {
        self.serial
    }

    /// Sets the SOA serial (the store uses the time of the last change, as CoreDNS does).
    pub fn set_serial(&mut self, serial: u32) {
        self.serial = serial;
    }

    /// The number of services with a ServiceImport.
    pub fn service_count(&self) -> usize {
        self.index.imports()
    }

    /// The name of the zone apex (lower case, no trailing dot).
    pub fn apex(&self) -> &str {
        self.index.config.zone.as_str()
    }

    /// The indexes the server's snapshots share.
    pub(crate) fn index(&self) -> &ZoneIndex {
        &self.index
    }

    /// Applies the changes made (through the `apply_` methods) since the last flush to the
    /// services map and the reverse index: until then they are staged. The index must be
    /// flushed before it is read or published.
    pub(crate) fn flush(&mut self) {
        self.index.flush();
    }

    /// Adds or replaces a ServiceImport; returns the names whose records changed.
    pub fn upsert_service_import(
        &mut self,
        import: &mcs_types::v1beta1::ServiceImport,
    ) -> Result<ChangedNames, ObjectError> {
        let mut replaced = Vec::new();
        self.apply_import(import, Some(&mut replaced))?;
        self.flush();
        Ok(self.changed_names(&replaced))
    }

    /// Removes a ServiceImport (its EndpointSlices stay, waiting for it to come back).
    pub fn delete_service_import(&mut self, namespace: &str, name: &str) -> ChangedNames {
        let mut replaced = Vec::new();
        self.apply_delete_import(&ServiceKey::new(namespace, name), Some(&mut replaced));
        self.flush();
        self.changed_names(&replaced)
    }

    /// Adds or replaces an MCS EndpointSlice; returns the names whose records changed.
    pub fn upsert_endpoint_slice(
        &mut self,
        slice: &EndpointSlice,
    ) -> Result<ChangedNames, ObjectError> {
        let mut replaced = Vec::new();
        self.apply_slice(slice, Some(&mut replaced))?;
        self.flush();
        Ok(self.changed_names(&replaced))
    }

    /// Removes an EndpointSlice.
    pub fn delete_endpoint_slice(&mut self, namespace: &str, name: &str) -> ChangedNames {
        let mut replaced = Vec::new();
        self.apply_delete_slice(&SliceKey::new(namespace, name), Some(&mut replaced));
        self.flush();
        self.changed_names(&replaced)
    }

    /// Replaces one service's entry; `make` builds the new one from the current one (`None`
    /// from `make`: remove). Returns whether anything changed.
    fn replace_service(
        &mut self,
        key: ServiceRef<'_>,
        log: Option<&mut Vec<Replaced>>,
        make: impl FnOnce(Option<&ServiceEntry>) -> Option<Option<Arc<ServiceEntry>>>,
    ) -> bool {
        // A service whose namespace or name is not a label never gets names (its import is
        // rejected): its slices are not kept either.
        let Some(place) = self.index.locate(key) else {
            return false;
        };
        let Some(new) = make(place.entry.as_deref()) else {
            return false;
        };
        self.put(place, new, log);
        true
    }

    /// Replaces the entry of the service at `place` (see [`ZoneIndex::locate`]).
    fn put(
        &mut self,
        place: ServicePlace,
        new: Option<Arc<ServiceEntry>>,
        log: Option<&mut Vec<Replaced>>,
    ) {
        let replaced = self.index.replace(place, new);
        if let Some(log) = log {
            log.push(replaced);
        }
    }

    /// Adds or replaces a ServiceImport; returns the number of services changed (0 or 1).
    pub(crate) fn apply_import(
        &mut self,
        import: &mcs_types::v1beta1::ServiceImport,
        log: Option<&mut Vec<Replaced>>,
    ) -> Result<usize, ObjectError> {
        let key = import_key(import)?;
        let Some(place) = self.index.locate(key) else {
            // Not a label: the name check says why.
            import_fact(import, None)?;
            return Ok(0);
        };
        let current = place.entry.as_deref();
        // The checks an import of this service passed are not made again.
        let current_import = current.and_then(|c| c.import.as_ref());
        let (key, draft) = import_fact(import, current_import)?;
        let ports_equal = draft.same_ports();
        if ports_equal && current_import.is_some_and(|fact| draft.equals_apart_from_ports(fact)) {
            return Ok(0);
        }
        let fact = Some(draft.into_fact(current_import.filter(|_| ports_equal)));
        let new = Arc::new(match current {
            Some(c) => ServiceEntry::with_import(c, fact),
            None => ServiceEntry::new(Arc::new(key.to_key()), fact, BTreeMap::new()),
        });
        self.put(place, Some(new), log);
        Ok(1)
    }

    /// Removes a ServiceImport; returns the number of services changed.
    pub(crate) fn apply_delete_import(
        &mut self,
        key: &ServiceKey,
        log: Option<&mut Vec<Replaced>>,
    ) -> usize {
        usize::from(self.replace_service(key.as_ref(), log, |current| {
            let current = current.filter(|c| c.import.is_some())?;
            Some(
                (!current.slices().is_empty())
                    .then(|| Arc::new(ServiceEntry::with_import(current, None))),
            )
        }))
    }

    /// Adds or replaces an MCS EndpointSlice; returns the number of services changed.
    pub(crate) fn apply_slice(
        &mut self,
        slice: &EndpointSlice,
        mut log: Option<&mut Vec<Replaced>>,
    ) -> Result<usize, ObjectError> {
        let (slice_key, fact) = slice_fact(slice)?;
        let service_key = ServiceKey::new(&slice_key.namespace, &fact.service);
        let mut changed = 0;
        // A slice relabelled to another service leaves its old one.
        if let Some(previous) = self.slice_owner.get(&slice_key).cloned()
            && previous != service_key
        {
            changed += self.remove_slice(&slice_key, &previous, log.as_deref_mut());
        }
        let name = slice_key.name.clone();
        let updated = self.replace_service(service_key.as_ref(), log, |current| {
            if current.and_then(|c| c.slices().get(&name)).map(|s| &**s) == Some(&fact) {
                return None;
            }
            let (key, import, mut slices) = match current {
                Some(c) => (
                    Arc::clone(c.key()),
                    c.import.clone(),
                    BTreeMap::clone(c.slices()),
                ),
                None => (Arc::new(service_key.clone()), None, BTreeMap::new()),
            };
            slices.insert(name, Arc::new(fact));
            Some(Some(Arc::new(ServiceEntry::new(key, import, slices))))
        });
        if updated {
            self.slice_owner.insert(slice_key, service_key);
            changed += 1;
        }
        Ok(changed)
    }

    /// Removes an EndpointSlice; returns the number of services changed.
    pub(crate) fn apply_delete_slice(
        &mut self,
        key: &SliceKey,
        log: Option<&mut Vec<Replaced>>,
    ) -> usize {
        match self.slice_owner.get(key).cloned() {
            Some(service_key) => self.remove_slice(key, &service_key, log),
            None => 0,
        }
    }

    fn remove_slice(
        &mut self,
        slice_key: &SliceKey,
        service_key: &ServiceKey,
        log: Option<&mut Vec<Replaced>>,
    ) -> usize {
        self.slice_owner.remove(slice_key);
        usize::from(self.replace_service(service_key.as_ref(), log, |current| {
            let current = current.filter(|c| c.slices().contains_key(&slice_key.name))?;
            let mut slices = BTreeMap::clone(current.slices());
            slices.remove(&slice_key.name);
            Some((current.import.is_some() || !slices.is_empty()).then(|| {
                Arc::new(ServiceEntry::new(
                    Arc::clone(current.key()),
                    current.import.clone(),
                    slices,
                ))
            }))
        }))
    }

    /// The names whose records differ between the entries before and after some changes (the
    /// answer of the public update methods; the store does not need it).
    fn changed_names(&self, replaced: &[Replaced]) -> ChangedNames {
        let config = self.config();
        let mut changed = ChangedNames::new();
        for (old, new) in replaced {
            let records = |entry: &Option<Arc<ServiceEntry>>| -> BTreeMap<String, NameRecords> {
                entry.as_ref().map_or_else(BTreeMap::new, |e| {
                    let names = e.names(config);
                    let mut map: BTreeMap<String, NameRecords> = names
                        .names
                        .iter()
                        .map(|(_, p)| (p.view().name.clone(), p.view().records.clone()))
                        .collect();
                    for (_, ptr) in &names.reverse {
                        map.insert(ptr.view().name.clone(), ptr.view().records.clone());
                    }
                    map
                })
            };
            let (before, after) = (records(old), records(new));
            let mut touched = ChangedNames::new();
            for (name, r) in &before {
                if after.get(name) != Some(r) {
                    touched.insert(name.clone());
                }
            }
            for (name, r) in &after {
                if before.get(name) != Some(r) {
                    touched.insert(name.clone());
                }
            }
            // SRV answers carry their targets' addresses (glue): they change with them.
            if !touched.is_empty() {
                touched.extend(
                    after
                        .iter()
                        .filter(|(_, r)| !r.srv.is_empty())
                        .map(|(n, _)| n.clone()),
                );
            }
            let had = old.as_ref().is_some_and(|e| e.import.is_some());
            let has = new.as_ref().is_some_and(|e| e.import.is_some());
            if had != has
                && let Some(entry) = old.as_ref().or(new.as_ref())
            {
                let namespace = format!("{}.svc.{}", entry.key().namespace, self.apex());
                let exists = self.view(&namespace, false).is_some();
                // The namespace appeared (first import) or disappeared (last one gone).
                let first = has && self.namespace_count(entry.key()) == 1;
                if first || !exists {
                    touched.insert(namespace);
                }
            }
            changed.extend(touched);
        }
        changed
    }

    fn namespace_count(&self, key: &ServiceKey) -> usize {
        self.index
            .services
            .iter()
            .filter(|(_, e)| e.import.is_some() && e.key().namespace == key.namespace)
            .count()
    }

    /// Every name in the zone (lower case, no trailing dot), in no particular order, reverse
    /// names included. Computes the names of every service that no one asked for yet.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        let index = &self.index;
        let zone = self.zone_names.iter().map(String::as_str);
        let namespaces = index.namespaces.iter().map(|(_, e)| &*e.name);
        let services = index.services.iter().flat_map(move |(_, e)| {
            e.names(&index.config)
                .names
                .iter()
                .map(|(_, p)| p.view().name.as_str())
        });
        let reverse = index
            .reverse
            .iter()
            .filter_map(move |(ip, e)| index.reverse_prepared(*ip, e))
            .map(|p| p.view().name.as_str());
        zone.chain(namespaces).chain(services).chain(reverse)
    }

    /// The merged records of a name, or `None` if the name does not exist.
    pub fn records(&self, name: &str) -> Option<NameRecords> {
        self.view(name, false).map(|v| v.records)
    }

    /// Whether `name` (lower case, no trailing dot) is the apex or below it.
    pub fn in_zone(&self, name: &str) -> bool {
        in_zone(self.apex(), name)
    }

    /// The SOA record of the zone.
    pub fn soa_record(&self) -> Record {
        let [apex, ns, hostmaster] = self.soa_names.clone();
        let ttl = self.config().ttl;
        let soa = SOA::new(ns, hostmaster, self.serial, 7200, 1800, 86400, ttl);
        Record::from_rdata(apex, ttl, RData::SOA(soa))
    }

    /// The answer to `qname` (any case, trailing dot optional) and `qtype`, as the MCS DNS
    /// specification and CoreDNS's multicluster plugin give it (see the crate docs for the
    /// table).
    pub fn answer(&self, qname: &str, qtype: RecordType) -> Answer {
        let name = qname.trim_end_matches('.').to_ascii_lowercase();
        if matches!(qtype, RecordType::AXFR | RecordType::IXFR) {
            return Answer::refused();
        }
        match self.view(&name, true) {
            Some(view) => view.answer(qtype),
            None if self.in_zone(&name) => Answer {
                response_code: ResponseCode::NXDomain,
                authoritative: true,
                answers: Vec::new(),
                authorities: vec![self.soa_record()],
                additionals: Vec::new(),
            },
            None => Answer::refused(),
        }
    }

    /// The view of the zone's own name number `index` (in `zone_names` order).
    pub(crate) fn zone_view(&self, index: usize, with_soa: bool) -> Option<NameView> {
        let (name, records) = zone_names(self.config()).into_iter().nth(index)?;
        Some(NameView {
            soa: (with_soa || records.apex).then(|| self.soa_record()),
            in_zone: self.in_zone(&name),
            name,
            records,
            targets: Vec::new(),
            ttl: self.config().ttl,
            apex: self.apex().to_owned(),
        })
    }

    /// Everything needed to answer about an existing name (lower case, no trailing dot), or
    /// `None` if it does not exist. With `with_soa` the view carries the zone's SOA, which
    /// negative answers and the apex need.
    pub fn view(&self, name: &str, with_soa: bool) -> Option<NameView> {
        // Only names made of DNS labels can exist (and have a wire form).
        if name.len() > 253 || name.split('.').any(|l| l.is_empty() || l.len() > 63) {
            return None;
        }
        let key = wire_name(name);
        let found = self.index.lookup(&key, self.index.zone_offset(&key))?;
        let soa = || with_soa.then(|| self.soa_record());
        match found {
            Found::Zone(index) => self.zone_view(index, with_soa),
            Found::Namespace(entry) => Some(NameView {
                name: entry.name.to_string(),
                records: NameRecords::default(),
                targets: Vec::new(),
                ttl: self.config().ttl,
                apex: self.apex().to_owned(),
                soa: soa(),
                in_zone: true,
            }),
            Found::Name(prepared) => {
                let mut view = prepared.view().clone();
                view.soa = soa();
                Some(view)
            }
        }
    }
}

/// Whether `name` is `apex` or below it (both lower case, no trailing dot).
pub(crate) fn in_zone(apex: &str, name: &str) -> bool {
    name == apex
        || name
            .strip_suffix(apex)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// A service's names with their answers, and its PTR targets per address: what
/// [`service_records`] says, arranged for lookups.
pub(crate) fn service_names(
    config: &ZoneConfig,
    key: &ServiceKey,
    import: &ImportFact,
    slices: &BTreeMap<String, Arc<SliceFact>>,
) -> ServiceNames {
    let (names, reverse) = service_records(config, key, import, slices);
    let Ok(service) = ClustersetName::service(&key.namespace, &key.name)
        .and_then(|n| n.in_zone(config.zone.clone()))
    else {
        return ServiceNames::default();
    };
    let suffix = wire_name(&service.to_string()).len();
    let apex = config.zone.as_str();
    let mut out: Vec<(Box<[u8]>, PreparedName)> = names
        .iter()
        .filter_map(|(name, records)| {
            let wire = wire_name(name);
            let labels = wire.get(..wire.len().checked_sub(suffix)?)?;
            let mut targets: Vec<(String, NameRecords)> = Vec::new();
            for srv in &records.srv {
                if srv.target == *name || targets.iter().any(|(t, _)| *t == srv.target) {
                    continue;
                }
                if let Some(target) = names.get(&srv.target) {
                    targets.push((srv.target.clone(), target.clone()));
                }
            }
            let view = NameView {
                name: name.clone(),
                records: records.clone(),
                targets,
                ttl: config.ttl,
                apex: apex.to_owned(),
                soa: None,
                in_zone: in_zone(apex, name),
            };
            Some((labels.into(), PreparedName::new(view)))
        })
        .collect();
    out.sort_by(|a, b| a.0.cmp(&b.0));
    ServiceNames {
        names: out,
        reverse: reverse
            .into_iter()
            .filter(|(_, targets)| !targets.is_empty())
            .map(|(ip, targets)| (ip, ptr_name(config, ip, targets)))
            .collect(),
    }
}

/// The PTR name of `ip` with these targets (at least one).
pub(crate) fn ptr_name(config: &ZoneConfig, ip: IpAddr, ptr: BTreeSet<String>) -> PreparedName {
    let name = reverse_name(ip);
    let apex = config.zone.as_str();
    PreparedName::new(NameView {
        in_zone: in_zone(apex, &name),
        name,
        records: NameRecords {
            ptr,
            ..NameRecords::default()
        },
        targets: Vec::new(),
        ttl: config.ttl,
        apex: apex.to_owned(),
        soa: None,
    })
}

/// One existing name with everything its answers need: its records, the records of its SRV
/// targets (for glue) and the zone facts. The records model answers through it, and the server
/// encodes its answers from it, so both say the same.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NameView {
    /// The name, lower case, without the trailing dot.
    pub name: String,
    /// Its merged records.
    pub records: NameRecords,
    /// The records of its SRV targets other than itself.
    pub targets: Vec<(String, NameRecords)>,
    /// The TTL of the zone.
    pub ttl: u32,
    /// The zone apex.
    pub apex: String,
    /// The zone's SOA record, for negative answers and the apex (`None`: negative answers
    /// carry no SOA; the server adds the current one itself).
    pub soa: Option<Record>,
    /// Whether the name is in the zone (reverse names are not).
    pub in_zone: bool,
}

impl NameView {
    /// The answer to a question of type `qtype` about this name.
    pub fn answer(&self, qtype: RecordType) -> Answer {
        if matches!(qtype, RecordType::AXFR | RecordType::IXFR) {
            return Answer::refused();
        }
        // RFC 8482: ANY is answered with one RRset of the name (the first of SOA, NS, A, AAAA,
        // SRV, PTR, TXT that it has), exactly as a query for that type.
        let qtype = match qtype {
            RecordType::ANY => self
                .records
                .record_types()
                .first()
                .copied()
                .unwrap_or(qtype),
            other => other,
        };
        let answers = self.records_of_type(&self.name, &self.records, qtype);
        let additionals = if qtype == RecordType::SRV {
            self.glue()
        } else {
            Vec::new()
        };
        let authorities = match (&self.soa, answers.is_empty() && self.in_zone) {
            (Some(soa), true) => vec![soa.clone()],
            _ => Vec::new(),
        };
        Answer {
            response_code: ResponseCode::NoError,
            authoritative: true,
            answers,
            authorities,
            additionals,
        }
    }

    fn records_of_type(&self, name: &str, records: &NameRecords, qtype: RecordType) -> Vec<Record> {
        let ttl = self.ttl;
        let owner = fqdn(name);
        let record = |rdata: RData, ttl: u32| Record::from_rdata(owner.clone(), ttl, rdata);
        match qtype {
            RecordType::A => records
                .a
                .iter()
                .map(|ip| record(RData::A(A(*ip)), ttl))
                .collect(),
            RecordType::AAAA => records
                .aaaa
                .iter()
                .map(|ip| record(RData::AAAA(AAAA(*ip)), ttl))
                .collect(),
            RecordType::SRV => records
                .srv
                .iter()
                .map(|s| {
                    record(
                        RData::SRV(SRV::new(s.priority, s.weight, s.port, fqdn(&s.target))),
                        ttl,
                    )
                })
                .collect(),
            RecordType::PTR => records
                .ptr
                .iter()
                .map(|t| record(RData::PTR(PTR(fqdn(t))), ttl))
                .collect(),
            RecordType::TXT => records
                .txt
                .iter()
                .map(|t| record(RData::TXT(TXT::new(vec![t.clone()])), DNS_VERSION_TTL))
                .collect(),
            RecordType::SOA if records.apex => self.soa.iter().cloned().collect(),
            RecordType::NS if records.apex => vec![record(
                RData::NS(NS(fqdn(&format!("ns.dns.{}", self.apex)))),
                ttl,
            )],
            _ => Vec::new(),
        }
    }

    /// A/AAAA of the SRV targets, deduplicated by (target, address).
    fn glue(&self) -> Vec<Record> {
        let mut seen = BTreeSet::new();
        let mut glue = Vec::new();
        for s in &self.records.srv {
            if !seen.insert(s.target.as_str()) {
                continue;
            }
            let target = if s.target == self.name {
                Some(&self.records)
            } else {
                self.targets
                    .iter()
                    .find(|(t, _)| *t == s.target)
                    .map(|(_, r)| r)
            };
            if let Some(target) = target {
                glue.extend(self.records_of_type(&s.target, target, RecordType::A));
                glue.extend(self.records_of_type(&s.target, target, RecordType::AAAA));
            }
        }
        glue
    }
}

/// A lower-case name without the trailing dot as a fully qualified hickory name. Names come
/// from validated labels, so they always parse; the root is the fallback that never happens.
pub(crate) fn fqdn(name: &str) -> Name {
    let mut parsed = Name::from_ascii(name).unwrap_or_else(|_| Name::root());
    parsed.set_fqdn(true);
    parsed
}

/// The names every zone has.
fn zone_names(config: &ZoneConfig) -> Vec<(String, NameRecords)> {
    let apex = config.zone.as_str();
    let mut ns = NameRecords::default();
    for ip in &config.nameserver_addresses {
        ns.add_ip(*ip);
    }
    vec![
        (
            apex.to_owned(),
            NameRecords {
                apex: true,
                ..NameRecords::default()
            },
        ),
        (format!("svc.{apex}"), NameRecords::default()),
        (format!("pod.{apex}"), NameRecords::default()),
        (format!("dns.{apex}"), NameRecords::default()),
        (format!("ns.dns.{apex}"), ns),
        (
            format!("dns-version.{apex}"),
            NameRecords {
                txt: vec![DNS_SCHEMA_VERSION.to_owned()],
                ..NameRecords::default()
            },
        ),
    ]
}

/// The reverse-lookup name of an address (`4.3.2.1.in-addr.arpa`, nibbles for IPv6).
pub fn reverse_name(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            format!("{d}.{c}.{b}.{a}.in-addr.arpa")
        }
        IpAddr::V6(v6) => {
            let mut name = String::with_capacity(72);
            for byte in v6.octets().iter().rev() {
                name.push_str(&format!("{:x}.{:x}.", byte & 0xf, byte >> 4));
            }
            name.push_str("ip6.arpa");
            name
        }
    }
}

/// The records of a service's names (all below `<svc>.<ns>.svc.<zone>`), and its PTR targets
/// per address: the pure heart of the zone. (`<ns>.svc.<zone>` exists while the service does;
/// the zone index keeps it.)
fn service_records(
    config: &ZoneConfig,
    key: &ServiceKey,
    import: &ImportFact,
    slices: &BTreeMap<String, Arc<SliceFact>>,
) -> (
    BTreeMap<String, NameRecords>,
    BTreeMap<IpAddr, BTreeSet<String>>,
) {
    let mut out: BTreeMap<String, NameRecords> = BTreeMap::new();
    let mut reverse: BTreeMap<IpAddr, BTreeSet<String>> = BTreeMap::new();
    // Validated on the way in; a failure here would be a bug, and then the service has no names.
    let Ok(service) = ClustersetName::service(&key.namespace, &key.name)
        .and_then(|n| n.in_zone(config.zone.clone()))
    else {
        return (out, reverse);
    };
    let service_name = service.to_string();
    let ready: Vec<(&SliceFact, &ReadyAddress)> = slices
        .values()
        .flat_map(|s| s.ready.iter().map(move |a| (&**s, a)))
        .collect();

    // Endpoint names <hostname>.<clusterid>.<svc>... (spec for headless; CoreDNS for both).
    let mut endpoint_names: BTreeMap<(String, String), String> = BTreeMap::new();
    for (slice, address) in &ready {
        let Ok(name) = service
            .clone()
            .endpoint(&address.hostname, &slice.cluster_id)
        else {
            continue; // too long a name: DNS cannot hold it
        };
        let name = name.to_string();
        out.entry(name.clone()).or_default().add_ip(address.ip);
        reverse.entry(address.ip).or_default().insert(name.clone());
        endpoint_names.insert((slice.cluster_id.clone(), address.hostname.clone()), name);
    }
    if config.lighthouse_cluster_names {
        for (slice, address) in &ready {
            if let Ok(name) = service.clone().cluster_service(&slice.cluster_id) {
                out.entry(name.to_string()).or_default().add_ip(address.ip);
            }
        }
    }

    // (port filter name, entries) for the bare service name and each named port.
    let mut srv_sets: BTreeMap<String, Vec<SrvData>> = BTreeMap::new();
    match import.type_ {
        ServiceImportType::ClusterSetIP => {
            out.entry(service_name.clone()).or_default();
            for ip in &import.ips {
                out.entry(service_name.clone()).or_default().add_ip(*ip);
                reverse.entry(*ip).or_default().insert(service_name.clone());
            }
            if !import.ips.is_empty() {
                let entries = |ports: &mut dyn Iterator<Item = &PortFact>| {
                    let mut list = Vec::new();
                    for port in ports {
                        for _ in &import.ips {
                            list.push((service_name.clone(), port.port));
                        }
                    }
                    list
                };
                srv_sets.insert(
                    service_name.clone(),
                    srv_records(&entries(&mut import.ports.iter())),
                );
                for (port_name, protocol) in named_ports(import.ports.iter()) {
                    let Ok(name) = service.clone().srv(&port_name, protocol) else {
                        continue;
                    };
                    let mut matching = import.ports.iter().filter(|p| {
                        p.name.as_deref() == Some(&port_name) && p.protocol == protocol
                    });
                    srv_sets.insert(name.to_string(), srv_records(&entries(&mut matching)));
                }
            }
        }
        ServiceImportType::Headless => {
            if !ready.is_empty() {
                let records = out.entry(service_name.clone()).or_default();
                for (_, address) in &ready {
                    records.add_ip(address.ip);
                }
            }
            let entries = |filter: &dyn Fn(&PortFact) -> bool| {
                let mut list = Vec::new();
                for (slice, address) in &ready {
                    let Some(target) =
                        endpoint_names.get(&(slice.cluster_id.clone(), address.hostname.clone()))
                    else {
                        continue;
                    };
                    for port in slice.ports.iter().filter(|p| filter(p)) {
                        list.push((target.clone(), port.port));
                    }
                }
                list
            };
            let bare = srv_records(&entries(&|_| true));
            if !bare.is_empty() {
                srv_sets.insert(service_name.clone(), bare);
            }
            let all_ports = slices.values().flat_map(|s| s.ports.iter());
            for (port_name, protocol) in named_ports(all_ports) {
                let Ok(name) = service.clone().srv(&port_name, protocol) else {
                    continue;
                };
                let list = srv_records(&entries(&|p: &PortFact| {
                    p.name.as_deref() == Some(&port_name) && p.protocol == protocol
                }));
                if !list.is_empty() {
                    srv_sets.insert(name.to_string(), list);
                }
            }
        }
    }
    for (name, srv) in srv_sets {
        if !srv.is_empty() {
            out.entry(name).or_default().srv = srv;
        }
    }
    (out, reverse)
}

/// Distinct (name, protocol) of the named ports.
fn named_ports<'a>(
    ports: impl Iterator<Item = &'a PortFact>,
) -> BTreeSet<(String, mcs_types::names::SrvProtocol)> {
    ports
        .filter_map(|p| p.name.clone().map(|n| (n, p.protocol)))
        .collect()
}

/// SRV records from (target, port) entries: weight `100 / entries` as CoreDNS computes it before
/// deduplicating by (target, port).
fn srv_records(entries: &[(String, u16)]) -> Vec<SrvData> {
    if entries.is_empty() {
        return Vec::new();
    }
    let weight = u16::try_from(100 / entries.len()).unwrap_or(0);
    let mut seen = BTreeSet::new();
    let mut out = Vec::new();
    for (target, port) in entries {
        if seen.insert((target.clone(), *port)) {
            out.push(SrvData {
                priority: 0,
                weight,
                port: *port,
                target: target.clone(),
            });
        }
    }
    out.sort();
    out
}

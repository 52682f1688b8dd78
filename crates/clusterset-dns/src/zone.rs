//! The clusterset zone: ServiceImports and MCS EndpointSlices in, DNS answers out.
//!
//! Pure: no IO, no clock. [`ClustersetZone`] keeps, per service, the facts of its import and
//! slices in the zone index; an update replaces one service's facts, and the service's names and
//! records are computed from them (by [`crate::records`]) the first time one is asked for.

use std::collections::{BTreeMap, HashSet};
use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::SOA;
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::discovery::v1::EndpointSlice;

use crate::index::{Found, Replaced, ServiceEntry, ServicePlace, ZoneIndex};
use crate::name::{FastMap, fqdn, in_zone, wire_name};
use crate::objects::{
    ObjectError, ServiceKey, ServiceRef, SliceKey, import_fact, import_key, service_ref, slice_fact,
};
use crate::records::{Answer, NameRecords, NameView, ZoneConfig, zone_names};

/// The names an update touched (lower case, no trailing dot). Whoever caches answers
/// recomputes exactly these.
pub type ChangedNames = HashSet<String>;

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
        usize::from(self.replace_service(service_ref(key), log, |current| {
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
        let updated = self.replace_service(service_ref(&service_key), log, |current| {
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
        usize::from(
            self.replace_service(service_ref(service_key), log, |current| {
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
            }),
        )
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

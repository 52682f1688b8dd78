//! The clusterset zone as records: ServiceImports and MCS EndpointSlices in, DNS answers out.
//!
//! Pure: no IO, no clock. [`ClustersetZone`] keeps, per service, the records that service
//! contributes to each name, so an update recomputes one service and reports the names it
//! touched ([`ChangedNames`]) instead of rebuilding the zone.

use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::hash::BuildHasherDefault;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, NS, PTR, SOA, SRV, TXT};
use hickory_proto::rr::{Name, RData, Record, RecordType};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use mcs_types::ServiceImportType;
use mcs_types::names::{ClustersetName, Zone};

use crate::objects::{
    ImportFact, ObjectError, PortFact, ReadyAddress, ServiceKey, SliceFact, SliceKey, import_fact,
    slice_fact,
};
use crate::wire::NameHasher;

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

    fn merge(&mut self, other: &Self) {
        self.a.extend(other.a.iter().copied());
        self.aaaa.extend(other.aaaa.iter().copied());
        for srv in &other.srv {
            if !self
                .srv
                .iter()
                .any(|s| s.target == srv.target && s.port == srv.port)
            {
                self.srv.push(srv.clone());
            }
        }
        self.ptr.extend(other.ptr.iter().cloned());
        self.txt.extend(other.txt.iter().cloned());
        self.apex |= other.apex;
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

/// Who contributes records to a name.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
enum Owner {
    Zone,
    Service(ServiceKey),
}

#[derive(Debug, Default)]
struct ServiceState {
    import: Option<ImportFact>,
    slices: BTreeMap<String, SliceFact>,
    names: Vec<String>,
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
    config: ZoneConfig,
    serial: u32,
    services: FastMap<ServiceKey, ServiceState>,
    slice_owner: FastMap<SliceKey, ServiceKey>,
    names: FastMap<String, BTreeMap<Owner, NameRecords>>,
}

/// Hash maps keyed by the zone's own names and keys: FxHash, as the server's table.
type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<NameHasher>>;

impl ClustersetZone {
    /// An empty zone: the apex, `svc`, `pod`, `dns-version` and the name server only.
    pub fn new(config: ZoneConfig) -> Self {
        let mut zone = Self {
            config,
            serial: 1,
            services: FastMap::default(),
            slice_owner: FastMap::default(),
            names: FastMap::default(),
        };
        for (name, records) in zone_names(&zone.config) {
            zone.names
                .entry(name)
                .or_default()
                .insert(Owner::Zone, records);
        }
        zone
    }

    /// The configuration.
    pub fn config(&self) -> &ZoneConfig {
        &self.config
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
        self.services
            .values()
            .filter(|s| s.import.is_some())
            .count()
    }

    /// The name of the zone apex (lower case, no trailing dot).
    pub fn apex(&self) -> &str {
        self.config.zone.as_str()
    }

    /// Adds or replaces a ServiceImport; returns the names whose records changed.
    pub fn upsert_service_import(
        &mut self,
        import: &mcs_types::v1beta1::ServiceImport,
    ) -> Result<ChangedNames, ObjectError> {
        let (key, fact) = import_fact(import)?;
        let state = self.services.entry(key.clone()).or_default();
        if state.import.as_ref() == Some(&fact) {
            return Ok(ChangedNames::new());
        }
        state.import = Some(fact);
        Ok(self.refresh(&key))
    }

    /// Removes a ServiceImport (its EndpointSlices stay, waiting for it to come back).
    pub fn delete_service_import(&mut self, namespace: &str, name: &str) -> ChangedNames {
        let key = ServiceKey::new(namespace, name);
        match self.services.get_mut(&key) {
            Some(state) if state.import.is_some() => {
                state.import = None;
                self.refresh(&key)
            }
            _ => ChangedNames::new(),
        }
    }

    /// Adds or replaces an MCS EndpointSlice; returns the names whose records changed.
    pub fn upsert_endpoint_slice(
        &mut self,
        slice: &EndpointSlice,
    ) -> Result<ChangedNames, ObjectError> {
        let (slice_key, fact) = slice_fact(slice)?;
        let service_key = ServiceKey::new(&slice_key.namespace, &fact.service);
        let mut changed = ChangedNames::new();
        // A slice relabelled to another service leaves its old one.
        if let Some(previous) = self.slice_owner.get(&slice_key).cloned()
            && previous != service_key
        {
            changed.extend(self.remove_slice(&slice_key, &previous));
        }
        let state = self.services.entry(service_key.clone()).or_default();
        if state.slices.get(&slice_key.name) == Some(&fact) {
            return Ok(changed);
        }
        state.slices.insert(slice_key.name.clone(), fact);
        self.slice_owner.insert(slice_key, service_key.clone());
        changed.extend(self.refresh(&service_key));
        Ok(changed)
    }

    /// Removes an EndpointSlice.
    pub fn delete_endpoint_slice(&mut self, namespace: &str, name: &str) -> ChangedNames {
        let slice_key = SliceKey::new(namespace, name);
        match self.slice_owner.get(&slice_key).cloned() {
            Some(service_key) => self.remove_slice(&slice_key, &service_key),
            None => ChangedNames::new(),
        }
    }

    fn remove_slice(&mut self, slice_key: &SliceKey, service_key: &ServiceKey) -> ChangedNames {
        self.slice_owner.remove(slice_key);
        let removed = self
            .services
            .get_mut(service_key)
            .is_some_and(|state| state.slices.remove(&slice_key.name).is_some());
        if removed {
            self.refresh(service_key)
        } else {
            ChangedNames::new()
        }
    }

    /// Recomputes one service's records and swaps them in; returns old ∪ new names.
    fn refresh(&mut self, key: &ServiceKey) -> ChangedNames {
        let owner = Owner::Service(key.clone());
        let Some(state) = self.services.get_mut(key) else {
            return ChangedNames::new();
        };
        let new_records = match &state.import {
            Some(import) => service_records(&self.config, key, import, &state.slices),
            None => BTreeMap::new(),
        };
        let old_names = std::mem::take(&mut state.names);
        state.names = new_records.keys().cloned().collect();
        let remove_state = state.import.is_none() && state.slices.is_empty();
        if remove_state {
            self.services.remove(key);
        }
        let mut changed = ChangedNames::new();
        for name in old_names {
            if new_records.contains_key(&name) {
                continue;
            }
            if let Some(contributors) = self.names.get_mut(&name) {
                contributors.remove(&owner);
                if contributors.is_empty() {
                    self.names.remove(&name);
                }
            }
            changed.insert(name);
        }
        let mut with_srv = Vec::new();
        for (name, records) in new_records {
            if !records.srv.is_empty() {
                with_srv.push(name.clone());
            }
            let contributors = self.names.entry(name.clone()).or_default();
            if contributors.get(&owner) != Some(&records) {
                contributors.insert(owner.clone(), records);
                changed.insert(name);
            }
        }
        // SRV answers carry their targets' addresses (glue), and the targets are this
        // service's names: when anything changed, its SRV names are recomputed too.
        if !changed.is_empty() {
            changed.extend(with_srv);
        }
        changed
    }

    /// Every name in the zone (lower case, no trailing dot), in no particular order.
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.names.keys().map(String::as_str)
    }

    /// The merged records of a name, or `None` if the name does not exist.
    pub fn records(&self, name: &str) -> Option<NameRecords> {
        let contributors = self.names.get(name)?;
        if contributors.len() == 1 {
            return contributors.values().next().cloned();
        }
        let mut merged = NameRecords::default();
        for records in contributors.values() {
            merged.merge(records);
        }
        Some(merged)
    }

    /// Whether `name` (lower case, no trailing dot) is the apex or below it.
    pub fn in_zone(&self, name: &str) -> bool {
        let apex = self.apex();
        name == apex
            || name
                .strip_suffix(apex)
                .is_some_and(|rest| rest.ends_with('.'))
    }

    /// The SOA record of the zone.
    pub fn soa_record(&self) -> Record {
        let apex = fqdn(self.apex());
        let soa = SOA::new(
            fqdn(&format!("ns.dns.{}", self.apex())),
            fqdn(&format!("hostmaster.{}", self.apex())),
            self.serial,
            7200,
            1800,
            86400,
            self.config.ttl,
        );
        Record::from_rdata(apex, self.config.ttl, RData::SOA(soa))
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

    /// Everything needed to answer about an existing name (lower case, no trailing dot), or
    /// `None` if it does not exist. With `with_soa` the view carries the zone's SOA, which
    /// negative answers and the apex need.
    pub fn view(&self, name: &str, with_soa: bool) -> Option<NameView> {
        let records = self.records(name)?;
        let mut targets: Vec<(String, NameRecords)> = Vec::new();
        for srv in &records.srv {
            if srv.target == name || targets.iter().any(|(t, _)| *t == srv.target) {
                continue;
            }
            if let Some(target) = self.records(&srv.target) {
                targets.push((srv.target.clone(), target));
            }
        }
        Some(NameView {
            name: name.to_owned(),
            soa: (with_soa || records.apex).then(|| self.soa_record()),
            records,
            targets,
            ttl: self.config.ttl,
            apex: self.apex().to_owned(),
            in_zone: self.in_zone(name),
        })
    }
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

/// All records one service contributes, by name: the pure heart of the zone.
fn service_records(
    config: &ZoneConfig,
    key: &ServiceKey,
    import: &ImportFact,
    slices: &BTreeMap<String, SliceFact>,
) -> BTreeMap<String, NameRecords> {
    let mut out: BTreeMap<String, NameRecords> = BTreeMap::new();
    // Validated on the way in; a failure here would be a bug, and then the service has no names.
    let Ok(service) = ClustersetName::service(&key.namespace, &key.name)
        .and_then(|n| n.in_zone(config.zone.clone()))
    else {
        return out;
    };
    let service_name = service.to_string();
    out.insert(
        format!("{}.svc.{}", key.namespace, config.zone),
        NameRecords::default(),
    );
    let ready: Vec<(&SliceFact, &ReadyAddress)> = slices
        .values()
        .flat_map(|s| s.ready.iter().map(move |a| (s, a)))
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
        out.entry(reverse_name(address.ip))
            .or_default()
            .ptr
            .insert(name.clone());
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
                out.entry(reverse_name(*ip))
                    .or_default()
                    .ptr
                    .insert(service_name.clone());
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
    out
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

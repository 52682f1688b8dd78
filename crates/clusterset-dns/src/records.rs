//! The records of the clusterset zone, as pure values: what a name holds ([`NameRecords`]),
//! everything its answers need ([`NameView`]), the answer to a question ([`Answer`]), and the
//! records a service's import and slices make (`service_records`, the pure heart of the zone).
//!
//! Pure: no IO, no clock, no state. The zone that keeps these per service and looks names up is
//! [`crate::zone::ClustersetZone`], above the index.

use std::collections::{BTreeMap, BTreeSet};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};
use std::sync::Arc;

use hickory_proto::op::ResponseCode;
use hickory_proto::rr::rdata::{A, AAAA, NS, PTR, SRV, TXT};
use hickory_proto::rr::{RData, Record, RecordType};
use mcs_types::ServiceImportType;
use mcs_types::names::{ClustersetName, Zone};

use crate::name::fqdn;
use crate::objects::{ImportFact, PortFact, ReadyAddress, ServiceKey, SliceFact};

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
    pub(crate) fn refused() -> Self {
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

/// The names every zone has.
pub(crate) fn zone_names(config: &ZoneConfig) -> Vec<(String, NameRecords)> {
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

/// A service's names with their records.
type ServiceNames = BTreeMap<String, NameRecords>;

/// The PTR targets of a service's addresses, per address.
type ServicePtrs = BTreeMap<IpAddr, BTreeSet<String>>;

/// A service's SRV records per name they belong to (the bare service name and each named
/// port's), possibly empty.
type SrvSets = BTreeMap<String, Vec<SrvData>>;

/// The records of a service's names (all below `<svc>.<ns>.svc.<zone>`), and its PTR targets
/// per address: the pure heart of the zone. (`<ns>.svc.<zone>` exists while the service does;
/// the zone index keeps it.)
pub(crate) fn service_records(
    config: &ZoneConfig,
    key: &ServiceKey,
    import: &ImportFact,
    slices: &BTreeMap<String, Arc<SliceFact>>,
) -> (ServiceNames, ServicePtrs) {
    let mut out: ServiceNames = BTreeMap::new();
    let mut reverse: ServicePtrs = BTreeMap::new();
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
    let endpoint_names = endpoint_records(&service, &ready, &mut out, &mut reverse);
    if config.lighthouse_cluster_names {
        lighthouse_records(&service, &ready, &mut out);
    }
    let srv_sets = match import.type_ {
        ServiceImportType::ClusterSetIP => {
            clusterset_ip_records(&service, &service_name, import, &mut out, &mut reverse)
        }
        ServiceImportType::Headless => headless_records(
            &service,
            &service_name,
            &ready,
            &endpoint_names,
            slices,
            &mut out,
        ),
    };
    for (name, srv) in srv_sets {
        if !srv.is_empty() {
            out.entry(name).or_default().srv = srv;
        }
    }
    (out, reverse)
}

/// The endpoint names `<hostname>.<clusterid>.<svc>...` of the `ready` addresses (the spec's
/// for headless services; CoreDNS has them for both types) with their addresses and PTR
/// targets; returns each endpoint's name by (cluster id, hostname).
fn endpoint_records(
    service: &ClustersetName,
    ready: &[(&SliceFact, &ReadyAddress)],
    out: &mut ServiceNames,
    reverse: &mut ServicePtrs,
) -> BTreeMap<(String, String), String> {
    let mut endpoint_names: BTreeMap<(String, String), String> = BTreeMap::new();
    for (slice, address) in ready {
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
    endpoint_names
}

/// Lighthouse's per-cluster names `<clusterid>.<svc>...` with the `ready` addresses of each
/// cluster.
fn lighthouse_records(
    service: &ClustersetName,
    ready: &[(&SliceFact, &ReadyAddress)],
    out: &mut ServiceNames,
) {
    for (slice, address) in ready {
        if let Ok(name) = service.clone().cluster_service(&slice.cluster_id) {
            out.entry(name.to_string()).or_default().add_ip(address.ip);
        }
    }
}

/// A ClusterSetIP service's name with the import's IPs and their PTR targets; returns its SRV
/// records (the service name as the target, one entry per port and IP), none without IPs.
fn clusterset_ip_records(
    service: &ClustersetName,
    service_name: &str,
    import: &ImportFact,
    out: &mut ServiceNames,
    reverse: &mut ServicePtrs,
) -> SrvSets {
    let mut srv_sets: SrvSets = BTreeMap::new();
    out.entry(service_name.to_owned()).or_default();
    for ip in &import.ips {
        out.entry(service_name.to_owned()).or_default().add_ip(*ip);
        reverse
            .entry(*ip)
            .or_default()
            .insert(service_name.to_owned());
    }
    if !import.ips.is_empty() {
        let entries = |ports: &mut dyn Iterator<Item = &PortFact>| {
            let mut list = Vec::new();
            for port in ports {
                for _ in &import.ips {
                    list.push((service_name.to_owned(), port.port));
                }
            }
            list
        };
        srv_sets.insert(
            service_name.to_owned(),
            srv_records(&entries(&mut import.ports.iter())),
        );
        for (port_name, protocol) in named_ports(import.ports.iter()) {
            let Ok(name) = service.clone().srv(&port_name, protocol) else {
                continue;
            };
            let mut matching = import
                .ports
                .iter()
                .filter(|p| p.name.as_deref() == Some(&port_name) && p.protocol == protocol);
            srv_sets.insert(name.to_string(), srv_records(&entries(&mut matching)));
        }
    }
    srv_sets
}

/// A headless service's name with the `ready` addresses; returns its SRV records (the
/// endpoint names as the targets, one entry per ready address and port of its slice).
fn headless_records(
    service: &ClustersetName,
    service_name: &str,
    ready: &[(&SliceFact, &ReadyAddress)],
    endpoint_names: &BTreeMap<(String, String), String>,
    slices: &BTreeMap<String, Arc<SliceFact>>,
    out: &mut ServiceNames,
) -> SrvSets {
    let mut srv_sets: SrvSets = BTreeMap::new();
    if !ready.is_empty() {
        let records = out.entry(service_name.to_owned()).or_default();
        for (_, address) in ready {
            records.add_ip(address.ip);
        }
    }
    let entries = |filter: &dyn Fn(&PortFact) -> bool| {
        let mut list = Vec::new();
        for (slice, address) in ready {
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
        srv_sets.insert(service_name.to_owned(), bare);
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
    srv_sets
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

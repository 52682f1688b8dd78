//! The Kubernetes objects a clusterset zone is built from, validated into the small facts DNS
//! needs. Every rejection names the object and the field at fault.

use std::fmt::{self, Display};
use std::net::{IpAddr, Ipv4Addr};
use std::ops::Deref;
use std::sync::Arc;

use k8s_openapi::api::discovery::v1::{EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mcs_types::labels::{SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL};
use mcs_types::names::{SrvProtocol, dashed_ip, dns_label_problem};
use mcs_types::{ServiceImportType, ServicePort};
use serde::de::DeserializeOwned;

/// The namespace and name of a ServiceImport (and of the service it imports): the one
/// [`mcs_types::ServiceKey`].
pub use mcs_types::ServiceKey;

/// The kinds of object a clusterset zone is built from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ObjectKind {
    /// `multicluster.x-k8s.io` ServiceImport (v1beta1 or v1alpha1).
    ServiceImport,
    /// `discovery.k8s.io/v1` EndpointSlice carrying the MCS labels.
    EndpointSlice,
    /// A document whose kind is missing or not one of the above.
    Unknown,
}

impl fmt::Display for ObjectKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::ServiceImport => "ServiceImport",
            Self::EndpointSlice => "EndpointSlice",
            Self::Unknown => "object",
        })
    }
}

/// An object the zone cannot use: which object, which field, what is wrong and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {object}: {field}: {problem}")]
pub struct ObjectError {
    /// The kind of the object.
    pub kind: ObjectKind,
    /// `namespace/name` of the object (`<unnamed>` parts when the metadata lacks them).
    pub object: String,
    /// The field at fault, as a path (`spec.ports[0].port`).
    pub field: String,
    /// What is wrong, and how to fix it.
    pub problem: String,
}

/// The key, borrowed.
pub(crate) fn service_ref(key: &ServiceKey) -> ServiceRef<'_> {
    ServiceRef {
        namespace: &key.namespace,
        name: &key.name,
    }
}

/// A service's namespace and name, borrowed: how a change finds its service (the owned
/// [`ServiceKey`] is made only for a service that is new).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct ServiceRef<'a> {
    /// The namespace.
    pub(crate) namespace: &'a str,
    /// The ServiceImport name.
    pub(crate) name: &'a str,
}

impl ServiceRef<'_> {
    /// The owned key.
    pub(crate) fn to_key(self) -> ServiceKey {
        ServiceKey::new(self.namespace, self.name)
    }
}

/// The namespace and name of an EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SliceKey {
    /// The namespace.
    pub namespace: String,
    /// The EndpointSlice name.
    pub name: String,
}

impl SliceKey {
    /// The key of `namespace/name`.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for SliceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A port as DNS needs it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct PortFact {
    pub name: Option<String>,
    pub protocol: SrvProtocol,
    pub port: u16,
}

/// What DNS needs from a ServiceImport. Cheap to clone: the addresses are inline (up to
/// [`INLINE_IPS`]) and the ports shared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct ImportFact {
    pub type_: ServiceImportType,
    pub ips: IpList,
    pub ports: Arc<[PortFact]>,
}

/// How many addresses an [`IpList`] holds without allocating.
pub(crate) const INLINE_IPS: usize = 4;

/// A list of addresses, inline up to [`INLINE_IPS`] (a service's clusterset IPs, or the
/// addresses it has PTR records for: a few, as a rule), on the heap beyond.
#[derive(Clone)]
pub(crate) enum IpList {
    /// The first `len` addresses of the array.
    Inline(u8, [IpAddr; INLINE_IPS]),
    /// More than fit inline.
    Heap(Vec<IpAddr>),
}

impl IpList {
    /// An empty list.
    pub(crate) const fn new() -> Self {
        Self::Inline(0, [IpAddr::V4(Ipv4Addr::UNSPECIFIED); INLINE_IPS])
    }

    /// Appends an address.
    pub(crate) fn push(&mut self, ip: IpAddr) {
        match self {
            Self::Inline(len, ips) => match ips.get_mut(usize::from(*len)) {
                Some(slot) => {
                    *slot = ip;
                    *len += 1;
                }
                None => {
                    let mut heap = Vec::with_capacity(INLINE_IPS * 2);
                    heap.extend_from_slice(ips);
                    heap.push(ip);
                    *self = Self::Heap(heap);
                }
            },
            Self::Heap(ips) => ips.push(ip),
        }
    }

    fn as_mut_slice(&mut self) -> &mut [IpAddr] {
        match self {
            Self::Inline(len, ips) => ips.get_mut(..usize::from(*len)).unwrap_or_default(),
            Self::Heap(ips) => ips,
        }
    }

    fn truncate(&mut self, new_len: usize) {
        match self {
            Self::Inline(len, _) => {
                *len = (*len).min(u8::try_from(new_len).unwrap_or(u8::MAX));
            }
            Self::Heap(ips) => ips.truncate(new_len),
        }
    }

    /// Sorts the addresses and drops duplicates.
    pub(crate) fn sort_dedup(&mut self) {
        let ips = self.as_mut_slice();
        ips.sort_unstable();
        let mut kept: usize = 0;
        for i in 0..ips.len() {
            let (Some(&ip), previous) = (ips.get(i), kept.checked_sub(1).and_then(|p| ips.get(p)))
            else {
                continue;
            };
            if previous != Some(&ip) {
                if let Some(slot) = ips.get_mut(kept) {
                    *slot = ip;
                }
                kept += 1;
            }
        }
        self.truncate(kept);
    }
}

impl Default for IpList {
    fn default() -> Self {
        Self::new()
    }
}

impl Deref for IpList {
    type Target = [IpAddr];

    fn deref(&self) -> &[IpAddr] {
        match self {
            Self::Inline(len, ips) => ips.get(..usize::from(*len)).unwrap_or_default(),
            Self::Heap(ips) => ips,
        }
    }
}

impl PartialEq for IpList {
    fn eq(&self, other: &Self) -> bool {
        **self == **other
    }
}

impl Eq for IpList {}

impl fmt::Debug for IpList {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_list().entries(self.iter()).finish()
    }
}

impl FromIterator<IpAddr> for IpList {
    fn from_iter<I: IntoIterator<Item = IpAddr>>(iter: I) -> Self {
        let mut list = Self::new();
        for ip in iter {
            list.push(ip);
        }
        list
    }
}

impl<'a> IntoIterator for &'a IpList {
    type Item = &'a IpAddr;
    type IntoIter = std::slice::Iter<'a, IpAddr>;

    fn into_iter(self) -> Self::IntoIter {
        self.iter()
    }
}

impl Extend<IpAddr> for IpList {
    fn extend<I: IntoIterator<Item = IpAddr>>(&mut self, iter: I) {
        for ip in iter {
            self.push(ip);
        }
    }
}

/// One ready address of an endpoint, with the hostname DNS gives it.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub(crate) struct ReadyAddress {
    pub hostname: String,
    pub ip: IpAddr,
}

/// What DNS needs from an MCS EndpointSlice.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SliceFact {
    /// The ServiceImport the slice belongs to (`multicluster.kubernetes.io/service-name`).
    pub service: String,
    /// The source cluster (`multicluster.kubernetes.io/source-cluster`).
    pub cluster_id: String,
    /// Ports with a number (slices may list a port without one, meaning "all ports").
    pub ports: Vec<PortFact>,
    /// Ready addresses only (an endpoint without `conditions.ready` counts as ready).
    pub ready: Vec<ReadyAddress>,
}

/// A ServiceImport or an EndpointSlice, typed.
#[derive(Debug, Clone, PartialEq)]
pub enum ZoneObject {
    /// A ServiceImport (v1alpha1 documents are converted to v1beta1).
    ServiceImport(Box<mcs_types::v1beta1::ServiceImport>),
    /// An EndpointSlice.
    EndpointSlice(Box<EndpointSlice>),
}

impl ZoneObject {
    /// Types a document (already parsed from YAML or JSON) by its `apiVersion` and `kind`; a
    /// field of the wrong shape is reported with its path.
    ///
    /// ```
    /// use clusterset_dns::ZoneObject;
    /// let doc = serde_json::json!({
    ///     "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
    ///     "metadata": {"name": "web-east", "namespace": "shop"},
    ///     "addressType": "IPv4", "endpoints": [{"addresses": "10.0.0.1"}]
    /// });
    /// let err = ZoneObject::from_document(doc).unwrap_err();
    /// assert_eq!(err.object, "shop/web-east");
    /// assert_eq!(err.field, "endpoints[0].addresses");
    /// ```
    pub fn from_document(document: serde_json::Value) -> Result<Self, ObjectError> {
        let api_version = document
            .get("apiVersion")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned();
        let kind = document
            .get("kind")
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_owned();
        let object = object_name(&document);
        match (api_version.as_str(), kind.as_str()) {
            ("multicluster.x-k8s.io/v1beta1", "ServiceImport") => {
                let import: mcs_types::v1beta1::ServiceImport =
                    typed(document, ObjectKind::ServiceImport, &object)?;
                Ok(Self::ServiceImport(Box::new(import)))
            }
            ("multicluster.x-k8s.io/v1alpha1", "ServiceImport") => {
                let import: mcs_types::v1alpha1::ServiceImport =
                    typed(document, ObjectKind::ServiceImport, &object)?;
                Ok(Self::ServiceImport(Box::new(import.into())))
            }
            ("discovery.k8s.io/v1", "EndpointSlice") => {
                let slice: EndpointSlice = typed(document, ObjectKind::EndpointSlice, &object)?;
                Ok(Self::EndpointSlice(Box::new(slice)))
            }
            _ => Err(ObjectError {
                kind: ObjectKind::Unknown,
                object,
                field: "apiVersion/kind".to_owned(),
                problem: format!(
                    "{api_version:?}/{kind:?} is not served in clusterset DNS: use ServiceImport (multicluster.x-k8s.io/v1beta1 or v1alpha1) or EndpointSlice (discovery.k8s.io/v1)"
                ),
            }),
        }
    }
}

fn object_name(document: &serde_json::Value) -> String {
    let meta = |key: &str| {
        document
            .get("metadata")
            .and_then(|m| m.get(key))
            .and_then(|v| v.as_str())
            .unwrap_or("<unnamed>")
            .to_owned()
    };
    format!("{}/{}", meta("namespace"), meta("name"))
}

fn typed<T: DeserializeOwned>(
    document: serde_json::Value,
    kind: ObjectKind,
    object: &str,
) -> Result<T, ObjectError> {
    serde_path_to_error::deserialize(document).map_err(|e| {
        let path = e.path().to_string();
        ObjectError {
            kind,
            object: object.to_owned(),
            field: if path == "." {
                "(document)".to_owned()
            } else {
                path
            },
            problem: e.into_inner().to_string(),
        }
    })
}

/// The object being validated; its error is built (and its strings formatted) only when a
/// field is at fault, so a valid object costs no formatting.
struct Fault<'a> {
    kind: ObjectKind,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
}

impl<'a> Fault<'a> {
    fn new(kind: ObjectKind, meta: &'a ObjectMeta) -> Self {
        Fault {
            kind,
            namespace: meta.namespace.as_deref(),
            name: meta.name.as_deref(),
        }
    }

    fn at(&self, field: impl ToString, problem: impl Into<String>) -> ObjectError {
        ObjectError {
            kind: self.kind,
            object: format!(
                "{}/{}",
                self.namespace.unwrap_or("<unnamed>"),
                self.name.unwrap_or("<unnamed>")
            ),
            field: field.to_string(),
            problem: problem.into(),
        }
    }
}

fn metadata_key<'a>(
    fault: &Fault<'_>,
    namespace: Option<&'a str>,
    name: Option<&'a str>,
) -> Result<(&'a str, &'a str), ObjectError> {
    let namespace = namespace.filter(|n| !n.is_empty()).ok_or_else(|| {
        fault.at(
            "metadata.namespace",
            "is missing: clusterset names are <svc>.<ns>.svc.<zone>, so every object needs its namespace",
        )
    })?;
    let name = name
        .filter(|n| !n.is_empty())
        .ok_or_else(|| fault.at("metadata.name", "is missing"))?;
    Ok((namespace, name))
}

fn port_number(fault: &Fault<'_>, field: &dyn Display, port: i32) -> Result<u16, ObjectError> {
    u16::try_from(port)
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| fault.at(field, format!("{port} is not a port number (1-65535)")))
}

/// The protocol Kubernetes spells `value`, on a short path for its own spellings (`TCP`, `UDP`,
/// `SCTP`), which `SrvProtocol`'s parser accepts as the same protocols.
fn kubernetes_protocol(value: &str) -> Result<SrvProtocol, mcs_types::names::UnknownProtocol> {
    match value {
        "TCP" => Ok(SrvProtocol::Tcp),
        "UDP" => Ok(SrvProtocol::Udp),
        "SCTP" => Ok(SrvProtocol::Sctp),
        other => other.parse(),
    }
}

fn protocol(
    fault: &Fault<'_>,
    field: &dyn Display,
    value: Option<&str>,
) -> Result<SrvProtocol, ObjectError> {
    port_protocol(value).map_err(|e| {
        fault.at(
            field,
            format!("{e} (Kubernetes spells them TCP, UDP, SCTP)"),
        )
    })
}

/// The protocol of a port as Kubernetes spells it; absent means TCP.
fn port_protocol(value: Option<&str>) -> Result<SrvProtocol, mcs_types::names::UnknownProtocol> {
    value.map_or(Ok(SrvProtocol::Tcp), kubernetes_protocol)
}

fn port_name<'a>(
    fault: &Fault<'_>,
    field: &dyn Display,
    name: Option<&'a str>,
) -> Result<Option<&'a str>, ObjectError> {
    match name.filter(|n| !n.is_empty()) {
        None => Ok(None),
        Some(n) => match dns_label_problem(n, false) {
            None => Ok(Some(n)),
            Some(problem) => Err(fault.at(field, format!("port name {n:?} {problem}"))),
        },
    }
}

/// A validated ServiceImport, before it becomes an [`ImportFact`]: its ports are built only
/// if they differ from the ports of the import it replaces (which are shared otherwise).
#[derive(Debug)]
pub(crate) struct ImportDraft<'a> {
    type_: ServiceImportType,
    ips: IpList,
    /// Validated, or equal to the validated ports of the import it replaces.
    ports: &'a [ServicePort],
    /// Whether the ports are those of the import it replaces.
    same_ports: bool,
}

/// A validated port as DNS needs it (the rules of [`port_name`], [`protocol`] and
/// [`port_number`], which accepted it).
fn valid_port(p: &ServicePort) -> (Option<&str>, SrvProtocol, u16) {
    (
        p.name.as_deref().filter(|n| !n.is_empty()),
        port_protocol(p.protocol.as_deref()).unwrap_or(SrvProtocol::Tcp),
        u16::try_from(p.port).unwrap_or(0),
    )
}

impl ImportDraft<'_> {
    /// Whether the ports are those of the import it replaces (the `current` import of
    /// [`import_fact`]).
    pub(crate) fn same_ports(&self) -> bool {
        self.same_ports
    }

    /// Whether `fact` says the same but for the ports ([`Self::same_ports`] compares them).
    pub(crate) fn equals_apart_from_ports(&self, fact: &ImportFact) -> bool {
        self.type_ == fact.type_ && self.ips == fact.ips
    }

    /// The fact; with `same_ports` (an import whose ports are equal, see
    /// [`Self::same_ports`]) it shares their ports.
    pub(crate) fn into_fact(self, same_ports: Option<&ImportFact>) -> ImportFact {
        let ports = match same_ports {
            Some(same) => Arc::clone(&same.ports),
            None => self
                .ports
                .iter()
                .map(|p| {
                    let (name, protocol, port) = valid_port(p);
                    PortFact {
                        name: name.map(str::to_owned),
                        protocol,
                        port,
                    }
                })
                .collect(),
        };
        ImportFact {
            type_: self.type_,
            ips: self.ips,
            ports,
        }
    }
}

/// An address as `IpAddr`'s `FromStr` parses it: dotted-quad IPv4 addresses (the usual ones) on
/// a short path that accepts only what the standard parser accepts (four decimal groups of one
/// to three digits, no leading zeros, each at most 255), everything else by the standard parser.
fn parse_ip(text: &str) -> Result<IpAddr, std::net::AddrParseError> {
    fn dotted_quad(text: &[u8]) -> Option<Ipv4Addr> {
        let mut octets = [0u8; 4];
        let mut group = 0usize;
        // The value and the digits of the group being read.
        let (mut value, mut digits, mut leading_zero) = (0u16, 0usize, false);
        for &byte in text {
            if byte == b'.' {
                if digits == 0 {
                    return None;
                }
                *octets.get_mut(group)? = u8::try_from(value).ok()?;
                group += 1;
                (value, digits, leading_zero) = (0, 0, false);
            } else if byte.is_ascii_digit() {
                if leading_zero || digits == 3 {
                    return None;
                }
                leading_zero = digits == 0 && byte == b'0';
                value = value * 10 + u16::from(byte - b'0');
                digits += 1;
            } else {
                return None;
            }
        }
        if group != 3 || digits == 0 {
            return None;
        }
        *octets.get_mut(3)? = u8::try_from(value).ok()?;
        Some(Ipv4Addr::from(octets))
    }
    match dotted_quad(text.as_bytes()) {
        Some(v4) => Ok(IpAddr::V4(v4)),
        None => text.parse(),
    }
}

/// The namespace and name of a ServiceImport (both present), not checked further.
pub(crate) fn import_key(
    import: &mcs_types::v1beta1::ServiceImport,
) -> Result<ServiceRef<'_>, ObjectError> {
    let fault = Fault::new(ObjectKind::ServiceImport, &import.metadata);
    let (namespace, name) = metadata_key(
        &fault,
        import.metadata.namespace.as_deref(),
        import.metadata.name.as_deref(),
    )?;
    Ok(ServiceRef { namespace, name })
}

/// Validates a ServiceImport into what DNS serves. `current`: the import the service has now,
/// if any (one with the same namespace and name). It passed the same checks: the namespace and
/// the name are not checked again, and ports that say exactly what its ports say are valid.
pub(crate) fn import_fact<'a>(
    import: &'a mcs_types::v1beta1::ServiceImport,
    current: Option<&ImportFact>,
) -> Result<(ServiceRef<'a>, ImportDraft<'a>), ObjectError> {
    let ServiceRef { namespace, name } = import_key(import)?;
    let fault = Fault::new(ObjectKind::ServiceImport, &import.metadata);
    // The name must make a valid clusterset name.
    if current.is_none() {
        mcs_types::names::ClustersetName::check_service(namespace, name)
            .map_err(|e| fault.at("metadata", e.to_string()))?;
    }
    let spec = &import.spec;
    let mut ips = IpList::new();
    for (i, ip) in spec.ips.iter().enumerate() {
        let parsed: IpAddr = parse_ip(ip).map_err(|_| {
            fault.at(
                format!("spec.ips[{i}]"),
                format!("{ip:?} is not an IPv4 or IPv6 address"),
            )
        })?;
        ips.push(parsed);
    }
    let same_ports = current.is_some_and(|current| same_ports(&spec.ports, &current.ports));
    for (i, p) in spec.ports.iter().enumerate().filter(|_| !same_ports) {
        port_name(
            &fault,
            &format_args!("spec.ports[{i}].name"),
            p.name.as_deref(),
        )?;
        protocol(
            &fault,
            &format_args!("spec.ports[{i}].protocol"),
            p.protocol.as_deref(),
        )?;
        port_number(&fault, &format_args!("spec.ports[{i}].port"), p.port)?;
    }
    Ok((
        ServiceRef { namespace, name },
        ImportDraft {
            type_: spec.type_,
            ips,
            ports: &spec.ports,
            same_ports,
        },
    ))
}

/// Whether `ports` say exactly what the validated `facts` say: the same names, protocols
/// (absent: TCP) and numbers, so that they are valid too.
fn same_ports(ports: &[ServicePort], facts: &[PortFact]) -> bool {
    ports.len() == facts.len()
        && ports.iter().zip(facts).all(|(port, fact)| {
            let protocol = port_protocol(port.protocol.as_deref()).ok();
            port.name.as_deref().filter(|n| !n.is_empty()) == fact.name.as_deref()
                && protocol == Some(fact.protocol)
                && u16::try_from(port.port).ok() == Some(fact.port)
        })
}

/// Validates an MCS EndpointSlice into what DNS serves.
pub(crate) fn slice_fact(slice: &EndpointSlice) -> Result<(SliceKey, SliceFact), ObjectError> {
    let fault = Fault::new(ObjectKind::EndpointSlice, &slice.metadata);
    let (namespace, name) = metadata_key(
        &fault,
        slice.metadata.namespace.as_deref(),
        slice.metadata.name.as_deref(),
    )?;
    let (service, cluster_id) = slice_labels(&fault, slice)?;
    let family_v6 = address_family_v6(&fault, slice)?;
    let ports = slice_ports(&fault, slice)?;
    let ready = ready_addresses(&fault, slice, family_v6)?;
    Ok((
        SliceKey::new(namespace, name),
        SliceFact {
            service: service.to_owned(),
            cluster_id: cluster_id.to_owned(),
            ports,
            ready,
        },
    ))
}

/// The service name and the source cluster id an MCS EndpointSlice's labels give, both
/// present and DNS labels.
fn slice_labels<'a>(
    fault: &Fault<'_>,
    slice: &'a EndpointSlice,
) -> Result<(&'a str, &'a str), ObjectError> {
    let label = |key: &str| {
        slice
            .metadata
            .labels
            .as_ref()
            .and_then(|l| l.get(key))
            .map(String::as_str)
            .filter(|v| !v.is_empty())
    };
    let service = label(SERVICE_NAME_LABEL).ok_or_else(|| {
        fault.at(
            format!("metadata.labels[{SERVICE_NAME_LABEL}]"),
            "is missing: an MCS EndpointSlice names its ServiceImport in this label",
        )
    })?;
    if let Some(problem) = dns_label_problem(service, true) {
        return Err(fault.at(
            format!("metadata.labels[{SERVICE_NAME_LABEL}]"),
            format!("service name {service:?} {problem}"),
        ));
    }
    let cluster_id = label(SOURCE_CLUSTER_LABEL).ok_or_else(|| {
        fault.at(
            format!("metadata.labels[{SOURCE_CLUSTER_LABEL}]"),
            "is missing: an MCS EndpointSlice names the cluster its endpoints come from in this label",
        )
    })?;
    if let Some(problem) = dns_label_problem(cluster_id, false) {
        return Err(fault.at(
            format!("metadata.labels[{SOURCE_CLUSTER_LABEL}]"),
            format!("cluster id {cluster_id:?} {problem}"),
        ));
    }
    Ok((service, cluster_id))
}

/// Whether the slice holds IPv6 addresses (`addressType` IPv6) rather than IPv4 ones; other
/// address types are not served.
fn address_family_v6(fault: &Fault<'_>, slice: &EndpointSlice) -> Result<bool, ObjectError> {
    match slice.address_type.as_str() {
        "IPv4" => Ok(false),
        "IPv6" => Ok(true),
        other => Err(fault.at(
            "addressType",
            format!("{other:?} is not served in clusterset DNS: use IPv4 or IPv6"),
        )),
    }
}

/// The slice's ports with a number, validated.
fn slice_ports(fault: &Fault<'_>, slice: &EndpointSlice) -> Result<Vec<PortFact>, ObjectError> {
    let mut ports = Vec::new();
    for (i, p) in slice.ports.iter().flatten().enumerate() {
        let EndpointPort {
            name,
            port,
            protocol: proto,
            ..
        } = p;
        // A port without a number means "all ports": nothing for SRV.
        let Some(port) = port else { continue };
        ports.push(PortFact {
            name: port_name(fault, &format_args!("ports[{i}].name"), name.as_deref())?
                .map(str::to_owned),
            protocol: protocol(
                fault,
                &format_args!("ports[{i}].protocol"),
                proto.as_deref(),
            )?,
            port: port_number(fault, &format_args!("ports[{i}].port"), *port)?,
        });
    }
    Ok(ports)
}

/// The addresses of the slice's ready endpoints (an endpoint without a `ready` condition is
/// ready), each with its hostname or its dashed IP; every endpoint's hostname and addresses
/// are validated, the addresses of the slice's family (`family_v6`).
fn ready_addresses(
    fault: &Fault<'_>,
    slice: &EndpointSlice,
    family_v6: bool,
) -> Result<Vec<ReadyAddress>, ObjectError> {
    let mut ready = Vec::new();
    for (i, endpoint) in slice.endpoints.iter().enumerate() {
        let is_ready = endpoint
            .conditions
            .as_ref()
            .and_then(|c| c.ready)
            .unwrap_or(true);
        if let Some(hostname) = endpoint.hostname.as_deref()
            && let Some(problem) = dns_label_problem(hostname, false)
        {
            return Err(fault.at(
                format!("endpoints[{i}].hostname"),
                format!("{hostname:?} {problem}"),
            ));
        }
        for (j, address) in endpoint.addresses.iter().enumerate() {
            let ip: IpAddr = parse_ip(address).map_err(|_| {
                fault.at(
                    format!("endpoints[{i}].addresses[{j}]"),
                    format!("{address:?} is not an IP address"),
                )
            })?;
            if ip.is_ipv6() != family_v6 {
                return Err(fault.at(
                    format!("endpoints[{i}].addresses[{j}]"),
                    format!(
                        "{address} does not match addressType {}: one slice holds one address family",
                        slice.address_type
                    ),
                ));
            }
            if is_ready {
                let hostname = endpoint.hostname.clone().unwrap_or_else(|| dashed_ip(ip));
                ready.push(ReadyAddress { hostname, ip });
            }
        }
    }
    Ok(ready)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_ipv4_path_parses_what_the_standard_parser_does() {
        for text in [
            "10.0.0.1",
            "0.0.0.0",
            "255.255.255.255",
            "242.1.0.11",
            "256.0.0.1",
            "01.0.0.1",
            "1.0.0.00",
            "1.2.3",
            "1.2.3.4.5",
            "1..3.4",
            ".1.2.3",
            "1.2.3.",
            "1.2.3.4 ",
            "+1.2.3.4",
            "1.2.3.-4",
            "1000.2.3.4",
            "fd00::1",
            "::ffff:10.0.0.1",
            "",
            "a.b.c.d",
        ] {
            assert_eq!(parse_ip(text), text.parse::<IpAddr>(), "{text:?}");
        }
    }

    #[test]
    fn ip_lists_sort_dedup_and_compare_by_their_addresses_inline_or_not() {
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        for count in [0, 1, 3, INLINE_IPS, INLINE_IPS + 1, 3 * INLINE_IPS] {
            let addresses: Vec<IpAddr> = (0..count)
                .rev()
                .flat_map(|i| [ip(&format!("10.0.0.{i}")), ip(&format!("10.0.0.{i}"))])
                .collect();
            let mut list: IpList = addresses.iter().copied().collect();
            assert_eq!(list.len(), addresses.len());
            list.sort_dedup();
            let mut want = addresses.clone();
            want.sort_unstable();
            want.dedup();
            assert_eq!(&*list, &want[..], "{count} addresses");
            let mut heap = IpList::Heap(want.clone());
            assert_eq!(heap, list);
            heap.sort_dedup();
            assert_eq!(heap, list);
        }
        let mut one = IpList::new();
        one.push(ip("fd00::1"));
        assert_ne!(one, IpList::new());
        assert_eq!(format!("{one:?}"), "[fd00::1]");
    }
}

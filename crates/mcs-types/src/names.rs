//! Clusterset DNS names: `<svc>.<ns>.svc.clusterset.local` and its relatives.
//!
//! The [MCS DNS specification] defines four name forms under the clusterset zone, and Submariner
//! Lighthouse (which Rook queries) adds a fifth:
//!
//! | form | example | [`NameForm`] |
//! |---|---|---|
//! | service | `web.shop.svc.clusterset.local` | [`NameForm::Service`] |
//! | named port (SRV) | `_http._tcp.web.shop.svc.clusterset.local` | [`NameForm::Srv`] |
//! | headless endpoint | `web-0.east.web.shop.svc.clusterset.local` | [`NameForm::Endpoint`] |
//! | Lighthouse per-cluster | `east.web.shop.svc.clusterset.local` | [`NameForm::ClusterService`] |
//!
//! The spec forbids the per-cluster form (`<clusterid>.<svc>...` must not resolve); it is parsed
//! here so that a server can decide, per its configuration, whether to answer it (Lighthouse
//! compatibility) or to return NXDOMAIN.
//!
//! Names compare case-insensitively (DNS spec): parsing lower-cases, building rejects upper case.
//!
//! ```
//! use mcs_types::names::{ClustersetName, NameForm, SrvProtocol, Zone};
//!
//! let name = ClustersetName::service("shop", "web")?;
//! assert_eq!(name.to_string(), "web.shop.svc.clusterset.local");
//! assert_eq!(name.to_fqdn(), "web.shop.svc.clusterset.local.");
//!
//! let srv = name.clone().srv("http", SrvProtocol::Tcp)?;
//! assert_eq!(srv.to_string(), "_http._tcp.web.shop.svc.clusterset.local");
//!
//! let parsed = ClustersetName::parse("Web-0.EAST.web.shop.svc.clusterset.local.", &Zone::default())?;
//! assert_eq!(
//!     parsed.form(),
//!     &NameForm::Endpoint { hostname: "web-0".into(), cluster_id: "east".into() }
//! );
//! # Ok::<(), mcs_types::names::NameError>(())
//! ```
//!
//! [MCS DNS specification]: https://github.com/kubernetes/enhancements/blob/master/keps/sig-multicluster/1645-multi-cluster-services-api/specification.md

use std::fmt;
use std::net::IpAddr;
use std::str::FromStr;

/// The zone every clusterset name lives in unless configured otherwise.
pub const DEFAULT_ZONE: &str = "clusterset.local";

/// The longest DNS name, in presentation form without the trailing dot (RFC 1035).
pub const MAX_NAME_LEN: usize = 253;

/// The longest DNS label (RFC 1035).
pub const MAX_LABEL_LEN: usize = 63;

/// What went wrong with a clusterset name. Every message names the offending part and how to fix it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// One label of the name is not acceptable for its part.
    #[error("invalid {part} {value:?}: {problem}")]
    InvalidLabel {
        /// Which part of the name the label is.
        part: NamePart,
        /// The label as given.
        value: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// The zone is not a valid DNS name.
    #[error("invalid clusterset zone {zone:?}: {problem}")]
    InvalidZone {
        /// The zone as given.
        zone: String,
        /// What is wrong and how to fix it.
        problem: String,
    },
    /// The whole name is longer than DNS allows.
    #[error(
        "name {name:?} is {len} characters long; DNS allows at most {MAX_NAME_LEN}: use shorter service, namespace or cluster names"
    )]
    TooLong {
        /// The name that is too long.
        name: String,
        /// Its length.
        len: usize,
    },
    /// The name is not inside the expected zone.
    #[error("name {name:?} is not in the clusterset zone {zone:?}")]
    OutsideZone {
        /// The name as given.
        name: String,
        /// The zone it was expected in.
        zone: String,
    },
    /// The name is in the zone but does not have one of the clusterset name forms.
    #[error(
        "name {name:?} is not a clusterset service name: expected <svc>.<ns>.svc.{zone}, _<port>._<proto>.<svc>.<ns>.svc.{zone}, <hostname>.<clusterid>.<svc>.<ns>.svc.{zone} or <clusterid>.<svc>.<ns>.svc.{zone}"
    )]
    UnknownForm {
        /// The name as given.
        name: String,
        /// The zone.
        zone: String,
    },
}

/// The parts of a clusterset name, used to say which one is wrong.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NamePart {
    /// The Service (and ServiceImport) name.
    Service,
    /// The namespace.
    Namespace,
    /// A cluster id, as used in `multicluster.kubernetes.io/source-cluster`.
    ClusterId,
    /// An endpoint hostname.
    Hostname,
    /// A named Service port.
    PortName,
    /// The SRV protocol label.
    Protocol,
}

impl fmt::Display for NamePart {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Service => "service name",
            Self::Namespace => "namespace",
            Self::ClusterId => "cluster id",
            Self::Hostname => "endpoint hostname",
            Self::PortName => "port name",
            Self::Protocol => "SRV protocol",
        })
    }
}

/// `text` if it is a namespace name (an RFC 1123 label), else why not: the shape of clap's
/// `value_parser`, for the command-line flags that name a namespace.
///
/// ```
/// use mcs_types::names::namespace_name;
/// assert_eq!(namespace_name("rook-ceph"), Ok("rook-ceph".to_owned()));
/// assert!(namespace_name("Rook_Ceph").unwrap_err().starts_with("\"Rook_Ceph\" is not a namespace name: "));
/// ```
pub fn namespace_name(text: &str) -> Result<String, String> {
    match dns_label_problem(text, false) {
        None => Ok(text.to_owned()),
        Some(problem) => Err(format!("{text:?} is not a namespace name: {problem}")),
    }
}

/// Why `label` is not an RFC 1123 DNS label, or `None` if it is one.
///
/// A DNS label here is 1 to 63 characters of `a-z`, `0-9` and `-`, starting and ending with a
/// letter or digit. With `must_start_with_letter` it must also start with a letter (RFC 1035, the
/// rule for Kubernetes Service names).
pub fn dns_label_problem(label: &str, must_start_with_letter: bool) -> Option<String> {
    // Whether the label is valid is kube-syntax's decision alone; only the wording is ours
    // (shorter than the API server's, with an example).
    if is_dns_label(label.as_bytes(), must_start_with_letter) {
        return None;
    }
    let problems = if must_start_with_letter {
        kube_syntax::names::dns1035_label_problems(label)
    } else {
        kube_syntax::names::dns1123_label_problems(label)
    };
    if problems.is_empty() {
        return None;
    }
    if label.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if label.len() > MAX_LABEL_LEN {
        return Some(format!(
            "is {} characters long; at most {MAX_LABEL_LEN} are allowed",
            label.len()
        ));
    }
    let (start, example) = if must_start_with_letter {
        ("start with a lower case letter", "'web-1'")
    } else {
        ("start with a lower case letter or digit", "'1-web'")
    };
    Some(format!(
        "must consist of lower case letters, digits or '-', {start} and end with a letter or digit (for example {example})"
    ))
}

/// Whether `label` is a valid label (the short path of [`dns_label_problem`], which says why
/// not): Kubernetes' DNS-1123 label, or with `must_start_with_letter` its DNS-1035 label, as
/// `kube-syntax` defines them.
fn is_dns_label(label: &[u8], must_start_with_letter: bool) -> bool {
    if must_start_with_letter {
        kube_syntax::names::is_dns1035_label(label)
    } else {
        kube_syntax::names::is_dns1123_label(label)
    }
}

fn check_label(part: NamePart, value: &str) -> Result<(), NameError> {
    let problem = match part {
        NamePart::Service => dns_label_problem(value, true),
        NamePart::Protocol => SrvProtocol::from_str(value).err().map(|e| e.to_string()),
        _ => dns_label_problem(value, false),
    };
    match problem {
        None => Ok(()),
        Some(problem) => Err(NameError::InvalidLabel {
            part,
            value: value.to_owned(),
            problem,
        }),
    }
}

/// The hostname the DNS spec gives an endpoint that has none: its IP with `.` and `:` replaced by
/// `-` (`10.0.0.1` → `10-0-0-1`, `fd00::1` → `fd00--1`).
///
/// ```
/// # use std::net::IpAddr;
/// assert_eq!(mcs_types::names::dashed_ip("10.0.0.1".parse::<IpAddr>()?), "10-0-0-1");
/// assert_eq!(mcs_types::names::dashed_ip("fd00::1".parse::<IpAddr>()?), "fd00--1");
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
pub fn dashed_ip(ip: IpAddr) -> String {
    ip.to_string().replace(['.', ':'], "-")
}

/// A DNS zone that clusterset names live in (`clusterset.local` by default), lower case and
/// without the trailing dot.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Zone(String);

impl Zone {
    /// Validates and normalises a zone: case is folded and one trailing dot is dropped.
    pub fn new(zone: &str) -> Result<Self, NameError> {
        let lowered = zone.trim_end_matches('.').to_ascii_lowercase();
        let invalid = |problem: String| NameError::InvalidZone {
            zone: zone.to_owned(),
            problem,
        };
        if lowered.is_empty() {
            return Err(invalid(
                "must not be empty; the MCS default is \"clusterset.local\"".to_owned(),
            ));
        }
        if lowered.len() > MAX_NAME_LEN {
            return Err(invalid(format!("is longer than {MAX_NAME_LEN} characters")));
        }
        for label in lowered.split('.') {
            if let Some(problem) = dns_label_problem(label, false) {
                return Err(invalid(format!("label {label:?} {problem}")));
            }
        }
        Ok(Self(lowered))
    }

    /// The zone as text, without the trailing dot.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl Default for Zone {
    fn default() -> Self {
        Self(DEFAULT_ZONE.to_owned())
    }
}

impl fmt::Display for Zone {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl FromStr for Zone {
    type Err = NameError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

/// The protocol label of an SRV name (`_tcp`, `_udp`, `_sctp`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum SrvProtocol {
    /// `_tcp`
    Tcp,
    /// `_udp`
    Udp,
    /// `_sctp`
    Sctp,
}

impl SrvProtocol {
    /// The label without the leading underscore: `tcp`, `udp` or `sctp`.
    pub fn label(self) -> &'static str {
        match self {
            Self::Tcp => "tcp",
            Self::Udp => "udp",
            Self::Sctp => "sctp",
        }
    }

    /// The Kubernetes protocol name: `TCP`, `UDP` or `SCTP`.
    pub fn kubernetes_name(self) -> &'static str {
        match self {
            Self::Tcp => "TCP",
            Self::Udp => "UDP",
            Self::Sctp => "SCTP",
        }
    }
}

/// The error for an SRV protocol that is not TCP, UDP or SCTP.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown protocol {0:?}: use one of tcp, udp, sctp (any case)")]
pub struct UnknownProtocol(pub String);

impl FromStr for SrvProtocol {
    type Err = UnknownProtocol;
    /// Accepts `tcp`/`TCP`/`_tcp` and likewise for UDP and SCTP.
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let name = s.trim_start_matches('_');
        [("tcp", Self::Tcp), ("udp", Self::Udp), ("sctp", Self::Sctp)]
            .into_iter()
            .find(|(label, _)| name.eq_ignore_ascii_case(label))
            .map(|(_, protocol)| protocol)
            .ok_or_else(|| UnknownProtocol(s.to_owned()))
    }
}

/// Which clusterset name form a [`ClustersetName`] has, with the labels that form adds.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum NameForm {
    /// `<svc>.<ns>.svc.<zone>`: the ServiceImport itself.
    Service,
    /// `_<port>._<proto>.<svc>.<ns>.svc.<zone>`: a named port, for SRV queries.
    Srv {
        /// The Service port name.
        port_name: String,
        /// The port protocol.
        protocol: SrvProtocol,
    },
    /// `<hostname>.<clusterid>.<svc>.<ns>.svc.<zone>`: one endpoint of a headless service.
    Endpoint {
        /// The endpoint hostname (or its [`dashed_ip`]).
        hostname: String,
        /// The cluster id of the endpoint's source cluster.
        cluster_id: String,
    },
    /// `<clusterid>.<svc>.<ns>.svc.<zone>`: the Lighthouse per-cluster form. The MCS DNS spec
    /// says this name must not exist; Submariner Lighthouse answers it with that cluster's
    /// address, and Rook queries it.
    ClusterService {
        /// The cluster id.
        cluster_id: String,
    },
}

/// A validated clusterset DNS name in one of the [`NameForm`]s.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ClustersetName {
    zone: Zone,
    namespace: String,
    service: String,
    form: NameForm,
}

impl ClustersetName {
    /// Checks that `<service>.<namespace>.svc.clusterset.local` is a valid name, without
    /// building it: what [`ClustersetName::service`] checks. (Two valid labels always make a
    /// name short enough in the default zone.)
    ///
    /// ```
    /// use mcs_types::names::ClustersetName;
    /// assert!(ClustersetName::check_service("rook-ceph", "rook-ceph-mon-a").is_ok());
    /// assert!(ClustersetName::check_service("rook-ceph", "1-mon").is_err());
    /// ```
    pub fn check_service(namespace: &str, service: &str) -> Result<(), NameError> {
        check_label(NamePart::Namespace, namespace)?;
        check_label(NamePart::Service, service)
    }

    /// `<service>.<namespace>.svc.clusterset.local`, validating both labels.
    pub fn service(namespace: &str, service: &str) -> Result<Self, NameError> {
        Self::check_service(namespace, service)?;
        let name = Self {
            zone: Zone::default(),
            namespace: namespace.to_owned(),
            service: service.to_owned(),
            form: NameForm::Service,
        };
        name.check_length()
    }

    /// The same name in another zone.
    pub fn in_zone(mut self, zone: Zone) -> Result<Self, NameError> {
        self.zone = zone;
        self.check_length()
    }

    /// The SRV name of a named port of this service.
    pub fn srv(self, port_name: &str, protocol: SrvProtocol) -> Result<Self, NameError> {
        check_label(NamePart::PortName, port_name)?;
        self.with_form(NameForm::Srv {
            port_name: port_name.to_owned(),
            protocol,
        })
    }

    /// The name of one endpoint of this (headless) service in one cluster.
    pub fn endpoint(self, hostname: &str, cluster_id: &str) -> Result<Self, NameError> {
        check_label(NamePart::Hostname, hostname)?;
        check_label(NamePart::ClusterId, cluster_id)?;
        self.with_form(NameForm::Endpoint {
            hostname: hostname.to_owned(),
            cluster_id: cluster_id.to_owned(),
        })
    }

    /// The Lighthouse per-cluster name `<clusterid>.<svc>.<ns>.svc.<zone>` (see
    /// [`NameForm::ClusterService`]).
    pub fn cluster_service(self, cluster_id: &str) -> Result<Self, NameError> {
        check_label(NamePart::ClusterId, cluster_id)?;
        self.with_form(NameForm::ClusterService {
            cluster_id: cluster_id.to_owned(),
        })
    }

    /// The plain service name this name belongs to (`<svc>.<ns>.svc.<zone>`).
    pub fn service_name(&self) -> Self {
        Self {
            form: NameForm::Service,
            ..self.clone()
        }
    }

    fn with_form(mut self, form: NameForm) -> Result<Self, NameError> {
        self.form = form;
        self.check_length()
    }

    /// The length of the [`Display`](fmt::Display) text, computed without building it (the
    /// zone builds several names per service on every update).
    fn text_len(&self) -> usize {
        let prefix = match &self.form {
            NameForm::Service => 0,
            // `_<port>._<proto>.`
            NameForm::Srv {
                port_name,
                protocol,
            } => port_name.len() + protocol.label().len() + 4,
            // `<hostname>.<clusterid>.`
            NameForm::Endpoint {
                hostname,
                cluster_id,
            } => hostname.len() + cluster_id.len() + 2,
            // `<clusterid>.`
            NameForm::ClusterService { cluster_id } => cluster_id.len() + 1,
        };
        // `<svc>.<ns>.svc.<zone>`
        prefix + self.service.len() + self.namespace.len() + self.zone.as_str().len() + 6
    }

    fn check_length(self) -> Result<Self, NameError> {
        let len = self.text_len();
        if len > MAX_NAME_LEN {
            return Err(NameError::TooLong {
                len,
                name: self.to_string(),
            });
        }
        Ok(self)
    }

    /// Parses a name (case-insensitive, with or without the trailing dot) in `zone`.
    pub fn parse(name: &str, zone: &Zone) -> Result<Self, NameError> {
        let lowered = name.trim_end_matches('.').to_ascii_lowercase();
        let outside = || NameError::OutsideZone {
            name: name.to_owned(),
            zone: zone.to_string(),
        };
        let unknown = || NameError::UnknownForm {
            name: name.to_owned(),
            zone: zone.to_string(),
        };
        if lowered == zone.as_str() {
            return Err(unknown());
        }
        let relative = lowered
            .strip_suffix(zone.as_str())
            .and_then(|rest| rest.strip_suffix('.'))
            .ok_or_else(outside)?;
        // Labels right to left: "svc", namespace, service, then zero, one or two more.
        let mut labels = relative.rsplit('.');
        if labels.next() != Some("svc") {
            return Err(unknown());
        }
        let namespace = labels.next().ok_or_else(unknown)?;
        let service = labels.next().ok_or_else(unknown)?;
        let base = Self::service(namespace, service)?.in_zone(zone.clone())?;
        let extra: Vec<&str> = labels.collect();
        match extra.as_slice() {
            [] => Ok(base),
            [cluster_id] => base.cluster_service(cluster_id),
            [proto, port] if port.starts_with('_') && proto.starts_with('_') => {
                let protocol =
                    SrvProtocol::from_str(proto).map_err(|e| NameError::InvalidLabel {
                        part: NamePart::Protocol,
                        value: (*proto).to_owned(),
                        problem: e.to_string(),
                    })?;
                base.srv(&port[1..], protocol)
            }
            [cluster_id, hostname]
                if !hostname.starts_with('_') && !cluster_id.starts_with('_') =>
            {
                base.endpoint(hostname, cluster_id)
            }
            _ => Err(unknown()),
        }
    }

    /// The zone of this name.
    pub fn zone(&self) -> &Zone {
        &self.zone
    }

    /// The namespace label.
    pub fn namespace(&self) -> &str {
        &self.namespace
    }

    /// The service label.
    pub fn service_label(&self) -> &str {
        &self.service
    }

    /// The form of this name.
    pub fn form(&self) -> &NameForm {
        &self.form
    }

    /// The fully qualified name, with the trailing dot, as it appears in DNS messages.
    pub fn to_fqdn(&self) -> String {
        format!("{self}.")
    }
}

impl fmt::Display for ClustersetName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.form {
            NameForm::Service => {}
            NameForm::Srv {
                port_name,
                protocol,
            } => write!(f, "_{port_name}._{}.", protocol.label())?,
            NameForm::Endpoint {
                hostname,
                cluster_id,
            } => write!(f, "{hostname}.{cluster_id}.")?,
            NameForm::ClusterService { cluster_id } => write!(f, "{cluster_id}.")?,
        }
        write!(f, "{}.{}.svc.{}", self.service, self.namespace, self.zone)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_short_label_check_accepts_exactly_the_valid_labels() {
        let long = "a".repeat(MAX_LABEL_LEN);
        let too_long = "a".repeat(MAX_LABEL_LEN + 1);
        for label in [
            "", "a", "1", "-", "web", "web-1", "1-web", "web-", "-web", "Web", "wEb", "we_b",
            "we.b", "wé", "a--b", "0", "9z", &long, &too_long,
        ] {
            for letter in [true, false] {
                let bytes = label.as_bytes();
                let valid = !bytes.is_empty()
                    && bytes.len() <= MAX_LABEL_LEN
                    && bytes
                        .iter()
                        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-')
                    && bytes[0].is_ascii_alphanumeric()
                    && bytes[bytes.len() - 1].is_ascii_alphanumeric()
                    && (!letter || bytes[0].is_ascii_lowercase());
                assert_eq!(is_dns_label(bytes, letter), valid, "{label:?} {letter}");
                assert_eq!(
                    dns_label_problem(label, letter).is_none(),
                    valid,
                    "{label:?}"
                );
            }
        }
    }

    fn parse(name: &str) -> Result<ClustersetName, NameError> {
        ClustersetName::parse(name, &Zone::default())
    }

    #[test]
    fn computed_length_is_the_length_of_the_text() {
        let base = ClustersetName::service("shop", "web").unwrap();
        let names = [
            base.clone(),
            base.clone().srv("http", SrvProtocol::Tcp).unwrap(),
            base.clone().srv("sctp-port", SrvProtocol::Sctp).unwrap(),
            base.clone().endpoint("10-0-0-1", "east").unwrap(),
            base.clone().cluster_service("west").unwrap(),
            base.in_zone(Zone::new("example.org").unwrap()).unwrap(),
        ];
        for name in names {
            assert_eq!(name.text_len(), name.to_string().len(), "{name}");
        }
    }

    #[test]
    fn every_form_round_trips_through_text() {
        let base = ClustersetName::service("shop", "web").unwrap();
        let names = [
            base.clone(),
            base.clone().srv("http", SrvProtocol::Tcp).unwrap(),
            base.clone().srv("dns", SrvProtocol::Udp).unwrap(),
            base.clone().srv("sig", SrvProtocol::Sctp).unwrap(),
            base.clone().endpoint("web-0", "east").unwrap(),
            base.clone().endpoint("10-0-0-1", "west").unwrap(),
            base.clone().cluster_service("east").unwrap(),
        ];
        for name in names {
            assert_eq!(parse(&name.to_string()).unwrap(), name);
            assert_eq!(parse(&name.to_fqdn()).unwrap(), name);
        }
    }

    #[test]
    fn text_forms_match_the_spec() {
        let base = ClustersetName::service("rook-ceph", "rook-ceph-mon-a").unwrap();
        assert_eq!(
            base.clone().cluster_service("c1").unwrap().to_string(),
            "c1.rook-ceph-mon-a.rook-ceph.svc.clusterset.local"
        );
        assert_eq!(
            base.clone().endpoint("h", "c1").unwrap().to_fqdn(),
            "h.c1.rook-ceph-mon-a.rook-ceph.svc.clusterset.local."
        );
        let zone = Zone::new("Example.ORG.").unwrap();
        assert_eq!(
            base.in_zone(zone).unwrap().to_string(),
            "rook-ceph-mon-a.rook-ceph.svc.example.org"
        );
    }

    #[test]
    fn parsing_folds_case() {
        let name = parse("_HTTP._TCP.Web.Shop.SVC.ClusterSet.Local.").unwrap();
        assert_eq!(name.service_label(), "web");
        assert_eq!(name.namespace(), "shop");
        assert_eq!(
            name.form(),
            &NameForm::Srv {
                port_name: "http".into(),
                protocol: SrvProtocol::Tcp
            }
        );
    }

    #[test]
    fn names_outside_the_zone_or_of_other_shapes_are_rejected() {
        assert!(matches!(
            parse("web.shop.svc.cluster.local"),
            Err(NameError::OutsideZone { .. })
        ));
        assert!(matches!(
            parse("xclusterset.local"),
            Err(NameError::OutsideZone { .. })
        ));
        for bad in [
            "clusterset.local",
            "svc.clusterset.local",
            "shop.svc.clusterset.local",
            "web.shop.pod.clusterset.local",
            "a.b.c.web.shop.svc.clusterset.local",
            "_http.east.web.shop.svc.clusterset.local",
            "web-0._tcp.web.shop.svc.clusterset.local",
        ] {
            assert!(
                matches!(parse(bad), Err(NameError::UnknownForm { .. })),
                "{bad} parsed as {:?}",
                parse(bad)
            );
        }
    }

    #[test]
    fn invalid_labels_name_the_part_and_the_rule() {
        let err = ClustersetName::service("shop", "1web").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid service name \"1web\": must consist of lower case letters, digits or '-', start with a lower case letter and end with a letter or digit (for example 'web-1')"
        );
        let err = ClustersetName::service("Shop", "web").unwrap_err();
        assert!(matches!(
            err,
            NameError::InvalidLabel {
                part: NamePart::Namespace,
                ..
            }
        ));
        let err = ClustersetName::service("shop", "web")
            .unwrap()
            .endpoint("web_0", "east")
            .unwrap_err();
        assert!(
            err.to_string()
                .starts_with("invalid endpoint hostname \"web_0\"")
        );
        let err = parse("_http._quic.web.shop.svc.clusterset.local").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid SRV protocol \"_quic\": unknown protocol \"_quic\": use one of tcp, udp, sctp (any case)"
        );
        assert!(ClustersetName::service("shop", &"a".repeat(64)).is_err());
        assert!(ClustersetName::service("shop", "web-").is_err());
        assert!(ClustersetName::service("", "web").is_err());
    }

    #[test]
    fn overlong_names_are_rejected() {
        let long = "a".repeat(63);
        let base = ClustersetName::service(&long, &long).unwrap();
        let err = base.endpoint(&long, &long).unwrap_err();
        assert!(matches!(err, NameError::TooLong { len: 276, .. }), "{err}");
    }

    #[test]
    fn zones_are_validated() {
        assert_eq!(Zone::new("CLUSTERSET.local.").unwrap(), Zone::default());
        assert!(Zone::new("").is_err());
        assert!(Zone::new("bad..zone").is_err());
        assert!(Zone::new("under_score.local").is_err());
    }

    #[test]
    fn dashed_ips_are_valid_hostnames() {
        for ip in ["10.244.0.11", "fd00::1", "2001:db8::abcd:1"] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(dns_label_problem(&dashed_ip(ip), false), None, "{ip}");
        }
    }
}

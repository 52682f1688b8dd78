//! The answers of a name, encoded once: a [`PreparedName`] holds what the name holds (its
//! [`NameView`]) and encodes each (name, type) answer the first time it is asked for, to be
//! spliced behind a client's question; `ServiceNames` are all the prepared names of one
//! service, arranged for the zone index's lookups.

use std::collections::{BTreeMap, BTreeSet};
use std::net::IpAddr;
use std::sync::{Arc, OnceLock};

use hickory_proto::op::{Message, OpCode, Query};
use hickory_proto::rr::{Record, RecordType};
use mcs_types::names::ClustersetName;

use crate::name::{fqdn, in_zone, reverse_name, wire_name};
use crate::objects::{ImportFact, ServiceKey, SliceFact};
use crate::records::{NameRecords, NameView, ZoneConfig, service_records};

/// The largest DNS message (TCP's 16-bit length prefix).
pub const MAX_MESSAGE: usize = 65535;

const TYPE_ANY: u16 = 255;

/// One precomputed positive answer: everything after the question.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct PreparedAnswer {
    qtype: u16,
    pub(crate) answer_count: u16,
    pub(crate) additional_count: u16,
    pub(crate) tail: Box<[u8]>,
}

/// The answers of one name: what it holds (a [`NameView`]), and each (name, type) answer
/// encoded once, the first time it is asked for after the name changed. An update only swaps in
/// the new view, so large updates cost little; the hot path after the first query is a lookup
/// and a copy.
#[derive(Debug)]
pub struct PreparedName {
    pub(crate) view: NameView,
    /// The types the name has data for, in [`crate::NameRecords::record_types`] order.
    types: Vec<RecordType>,
    encoded: Vec<OnceLock<Option<PreparedAnswer>>>,
}

impl PreparedName {
    pub(crate) fn new(view: NameView) -> Self {
        let types = view.records.record_types();
        let encoded = types.iter().map(|_| OnceLock::new()).collect();
        Self {
            view,
            types,
            encoded,
        }
    }

    pub(crate) fn answer(&self, qtype: u16) -> Option<&PreparedAnswer> {
        // RFC 8482: the first RRset answers ANY (the records model says the same).
        let index = if qtype == TYPE_ANY {
            0
        } else {
            self.types.iter().position(|t| u16::from(*t) == qtype)?
        };
        let qtype = *self.types.get(index)?;
        self.encoded
            .get(index)?
            .get_or_init(|| {
                let answer = self.view.answer(qtype);
                encode_answer(&self.view.name, qtype, answer.answers, answer.additionals)
            })
            .as_ref()
    }

    /// What the name holds.
    pub fn view(&self) -> &NameView {
        &self.view
    }

    /// Encodes every answer now (the first query of each then costs nothing extra).
    pub fn encode_all(&self) {
        for t in &self.types {
            let _ = self.answer(u16::from(*t));
        }
    }
}

fn encode_answer(
    name: &str,
    qtype: RecordType,
    mut answers: Vec<Record>,
    mut additionals: Vec<Record>,
) -> Option<PreparedAnswer> {
    let question_end = 12 + wire_name(name).len() + 4;
    loop {
        let mut message = Message::response(0, OpCode::Query);
        message.add_query(Query::query(fqdn(name), qtype));
        message.add_answers(answers.iter().cloned());
        message.add_additionals(additionals.iter().cloned());
        let bytes = message.to_vec().ok()?;
        if bytes.len() <= MAX_MESSAGE {
            return Some(PreparedAnswer {
                qtype: u16::from(qtype),
                answer_count: u16::try_from(answers.len()).ok()?,
                additional_count: u16::try_from(additionals.len()).ok()?,
                tail: bytes.get(question_end..)?.into(),
            });
        }
        // Too big even for TCP: serve a subset (the spec allows it for headless services).
        additionals.clear();
        if answers.len() <= 1 {
            return None;
        }
        answers.truncate(answers.len() / 2);
    }
}

/// Every name of one service with its answers.
#[derive(Debug, Default)]
pub(crate) struct ServiceNames {
    /// (the wire labels in front of `<svc>.<ns>.svc.<zone>`, the name); sorted by the labels.
    /// The service name itself has no labels in front.
    pub(crate) names: Vec<(Box<[u8]>, PreparedName)>,
    /// The PTR name of each address the service has PTR targets for, sorted by address:
    /// the answer of an address only this service holds.
    pub(crate) reverse: Vec<(IpAddr, PreparedName)>,
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

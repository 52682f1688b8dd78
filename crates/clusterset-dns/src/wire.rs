//! The query hot path: the [`Snapshot`] of the zone that queries are answered from, and a
//! request handler that only parses the header and question, looks the name up in the
//! snapshot's indexes, and splices the name's encoded answer ([`crate::prepared`], encoded once
//! per (name, type) on the first query after the name's service changed) behind the client's
//! own question.
//!
//! Pure and allocation-free per query once the output buffer has grown: [`answer`] is what the
//! UDP and TCP loops call (it also tells the response code, [`Rcode`], which they count),
//! [`respond`] what the fuzz target calls.

use hickory_proto::serialize::binary::{BinEncodable, BinEncoder};

use crate::index::{Found, ZoneIndex};
use crate::prepared::{PreparedAnswer, PreparedName};
use crate::zone::ClustersetZone;

/// The wire form of a name: defined with the other name functions, and named here too, where
/// the property tests and the users of [`respond`] look for it.
pub use crate::name::wire_name;
/// The largest DNS message (defined with the encoded answers, which never exceed it).
pub use crate::prepared::MAX_MESSAGE;

/// The largest UDP answer we send to an EDNS client (the DNS flag day 2020 value, which avoids
/// IP fragmentation).
pub const MAX_UDP_PAYLOAD: u16 = 1232;

/// The UDP size a client without EDNS accepts.
pub const CLASSIC_UDP_PAYLOAD: u16 = 512;

const TYPE_OPT: u16 = 41;
const TYPE_IXFR: u16 = 251;
const TYPE_AXFR: u16 = 252;
const CLASS_IN: u16 = 1;

const RCODE_NOERROR: u8 = 0;
const RCODE_FORMERR: u8 = 1;
const RCODE_SERVFAIL: u8 = 2;
const RCODE_NXDOMAIN: u8 = 3;
const RCODE_NOTIMP: u8 = 4;
const RCODE_REFUSED: u8 = 5;
/// BADVERS is extended RCODE 16: 0 in the header, 1 in the OPT record.
const EXTENDED_BADVERS: u8 = 1;

/// The answers of one name (lower case, no trailing dot), or `None` if it does not exist.
pub fn prepare_name(zone: &ClustersetZone, name: &str) -> Option<PreparedName> {
    zone.view(name, false).map(PreparedName::new)
}

/// The SOA record without its owner name, in wire form (no compression), to append behind a
/// pointer to the zone in the question.
fn soa_without_owner(zone: &ClustersetZone) -> Vec<u8> {
    let record = zone.soa_record();
    let mut bytes = Vec::with_capacity(96);
    let mut encoder = BinEncoder::new(&mut bytes);
    encoder.set_canonical_form(true);
    if record.emit(&mut encoder).is_err() {
        return Vec::new();
    }
    let owner_len = wire_name(zone.apex()).len();
    bytes
        .get(owner_len..)
        .map(<[u8]>::to_vec)
        .unwrap_or_default()
}

/// An immutable view of the zone that the server answers from. The store publishes a new one
/// on every change; a query holds one for its whole handling, so updates never block queries.
///
/// It shares the zone's indexes (copy-on-write maps of services, namespaces and reverse
/// names): a service's answers are computed and encoded the first time a query asks for one of
/// its names, and kept by every later snapshot until the service changes.
#[derive(Debug, Clone)]
pub struct Snapshot {
    synced: bool,
    soa: Box<[u8]>,
    index: ZoneIndex,
    /// The zone apex, the first of the zone's own names: its SOA carries the serial, so each
    /// snapshot has its own.
    apex: Option<std::sync::Arc<PreparedName>>,
    /// The zone's other own names, in `zone_names` order: they depend on the configuration
    /// only, so a snapshot shares them (and their encoded answers) with the one it follows.
    zone_names: std::sync::Arc<[PreparedName]>,
}

impl Snapshot {
    /// The snapshot of `zone`; `previous` (the snapshot it replaces, if any) lends it the
    /// zone's own names when the configuration is the same.
    pub(crate) fn new(zone: &ClustersetZone, synced: bool, previous: Option<&Self>) -> Self {
        debug_assert!(
            zone.index().is_flushed(),
            "a snapshot of a zone not flushed"
        );
        let index = zone.index().clone();
        let zone_names = match previous {
            Some(previous)
                if std::sync::Arc::ptr_eq(&previous.index.config, &index.config)
                    || previous.index.config == index.config =>
            {
                std::sync::Arc::clone(&previous.zone_names)
            }
            _ => (1..)
                .map_while(|i| zone.zone_view(i, false))
                .map(PreparedName::new)
                .collect(),
        };
        Self {
            synced,
            soa: soa_without_owner(zone).into(),
            apex: zone
                .zone_view(0, false)
                .map(|view| std::sync::Arc::new(PreparedName::new(view))),
            index,
            zone_names,
        }
    }

    /// The indexes this snapshot answers from.
    #[cfg(test)]
    pub(crate) fn index(&self) -> &ZoneIndex {
        &self.index
    }

    /// Whether the store had synced when this snapshot was taken (until then: SERVFAIL).
    pub fn is_synced(&self) -> bool {
        self.synced
    }

    /// The number of services (with or without an import) the snapshot holds; their names are
    /// computed when first asked for.
    pub fn name_count(&self) -> usize {
        self.index.services.len()
    }

    /// The answers of a lower-case wire name: `Ok(name)` for an existing name with data,
    /// `Err(in_zone)` for an existing name without any (a namespace), `None` if it does not
    /// exist.
    fn find(&self, key: &[u8], zone_offset: Option<usize>) -> Option<Result<&PreparedName, bool>> {
        Some(match self.index.lookup(key, zone_offset)? {
            Found::Zone(0) => Ok(self.apex.as_deref()?),
            Found::Zone(index) => Ok(self.zone_names.get(index - 1)?),
            Found::Namespace(_) => Err(true),
            Found::Name(prepared) => Ok(prepared),
        })
    }
}

fn is_reverse(name: &[u8]) -> bool {
    name.ends_with(b"\x07in-addr\x04arpa\x00") || name.ends_with(b"\x03ip6\x04arpa\x00")
}

/// How the answer travels: UDP answers are truncated to what the client accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transport {
    /// UDP: at most 512 bytes, or the client's EDNS size up to [`MAX_UDP_PAYLOAD`].
    Udp,
    /// TCP: up to [`MAX_MESSAGE`].
    Tcp,
}

/// The response code of an answer, as [`answer`] tells it and the server counts it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Rcode {
    /// `NOERROR`: an answer, or a name that exists without data of the asked type (NODATA);
    /// also UDP answers cut short with TC set.
    NoError,
    /// `FORMERR`: a malformed query.
    FormErr,
    /// `SERVFAIL`: a name in the zone asked before the store synced.
    ServFail,
    /// `NXDOMAIN`: a name in the zone that does not exist.
    NxDomain,
    /// `NOTIMP`: an opcode other than QUERY.
    NotImp,
    /// `REFUSED`: a name outside the zone, another class, or a zone transfer.
    Refused,
    /// Any other code; today only `BADVERS` (an EDNS version other than 0).
    Other,
}

impl Rcode {
    /// The number of codes counted.
    pub const COUNT: usize = 7;

    /// Every code, in the order of their DNS values (`Other` last).
    pub const ALL: [Self; Self::COUNT] = [
        Self::NoError,
        Self::FormErr,
        Self::ServFail,
        Self::NxDomain,
        Self::NotImp,
        Self::Refused,
        Self::Other,
    ];

    /// The code's mnemonic (`NOERROR`, `NXDOMAIN`, ...; `OTHER` for [`Rcode::Other`]).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::NoError => "NOERROR",
            Self::FormErr => "FORMERR",
            Self::ServFail => "SERVFAIL",
            Self::NxDomain => "NXDOMAIN",
            Self::NotImp => "NOTIMP",
            Self::Refused => "REFUSED",
            Self::Other => "OTHER",
        }
    }

    /// The code of a 4-bit header RCODE (without an extended RCODE in an OPT record).
    pub fn from_header(rcode: u8) -> Self {
        match rcode & 0x0f {
            0 => Self::NoError,
            1 => Self::FormErr,
            2 => Self::ServFail,
            3 => Self::NxDomain,
            4 => Self::NotImp,
            5 => Self::Refused,
            _ => Self::Other,
        }
    }

    /// The position of the code in [`Rcode::ALL`].
    pub fn index(self) -> usize {
        self as usize
    }
}

impl std::fmt::Display for Rcode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The EDNS facts of a request.
#[derive(Debug, Clone, Copy)]
struct Edns {
    payload: u16,
    version: u8,
}

/// A parsed request: everything the answer depends on.
struct Request {
    /// End of the question in the request (the question is `12..question_end`).
    question_end: usize,
    qtype: u16,
    qclass: u16,
    edns: Option<Edns>,
}

enum Parsed {
    Ok(Request),
    /// Answer with this RCODE; echo the question if it parsed (its end), EDNS if it parsed.
    Error(u8, Option<usize>, Option<Edns>),
}

/// The lower-cased question name, on the stack (a name is at most 255 bytes).
struct Key {
    bytes: [u8; 256],
    len: usize,
}

impl Key {
    fn push(&mut self, byte: u8) -> bool {
        match self.bytes.get_mut(self.len) {
            Some(slot) => {
                *slot = byte;
                self.len += 1;
                true
            }
            None => false,
        }
    }

    fn as_slice(&self) -> &[u8] {
        self.bytes.get(..self.len).unwrap_or_default()
    }
}

/// Parses header, question and an optional OPT record; lower-cases the name into `key`.
fn parse(request: &[u8], key: &mut Key) -> Parsed {
    let count = |at: usize| u16::from_be_bytes([request[at], request[at + 1]]);
    let opcode = (request[2] >> 3) & 0x0f;
    let (questions, answers, authorities, additionals) = (count(4), count(6), count(8), count(10));
    if opcode != 0 {
        return Parsed::Error(RCODE_NOTIMP, None, None);
    }
    if questions != 1 || answers != 0 || authorities != 0 || additionals > 1 {
        return Parsed::Error(RCODE_FORMERR, None, None);
    }
    key.len = 0;
    let mut pos = 12;
    loop {
        let Some(&len) = request.get(pos) else {
            return Parsed::Error(RCODE_FORMERR, None, None);
        };
        let len = usize::from(len);
        if len == 0 {
            if !key.push(0) {
                return Parsed::Error(RCODE_FORMERR, None, None);
            }
            pos += 1;
            break;
        }
        // A compression pointer (or a reserved label type) in the question: not from a sane client.
        if len > 63 {
            return Parsed::Error(RCODE_FORMERR, None, None);
        }
        let Some(label) = request.get(pos + 1..pos + 1 + len) else {
            return Parsed::Error(RCODE_FORMERR, None, None);
        };
        // A name is at most 255 bytes including the final zero: leave room for it.
        if key.len + 1 + len > 254 {
            return Parsed::Error(RCODE_FORMERR, None, None);
        }
        key.push(len as u8);
        for byte in label {
            key.push(byte.to_ascii_lowercase());
        }
        pos += 1 + len;
    }
    let Some(fixed) = request.get(pos..pos + 4) else {
        return Parsed::Error(RCODE_FORMERR, None, None);
    };
    let qtype = u16::from_be_bytes([fixed[0], fixed[1]]);
    let qclass = u16::from_be_bytes([fixed[2], fixed[3]]);
    let question_end = pos + 4;
    let mut edns = None;
    if additionals == 1 {
        // Only an OPT record is accepted (no TSIG keys are configured).
        let Some(opt) = request.get(question_end..question_end + 11) else {
            return Parsed::Error(RCODE_FORMERR, Some(question_end), None);
        };
        let rr_type = u16::from_be_bytes([opt[1], opt[2]]);
        let rdlen = usize::from(u16::from_be_bytes([opt[9], opt[10]]));
        if opt[0] != 0 || rr_type != TYPE_OPT || request.len() < question_end + 11 + rdlen {
            return Parsed::Error(RCODE_FORMERR, Some(question_end), None);
        }
        let parsed = Edns {
            payload: u16::from_be_bytes([opt[3], opt[4]]),
            version: opt[6],
        };
        if parsed.version != 0 {
            return Parsed::Error(RCODE_NOERROR, Some(question_end), Some(parsed));
        }
        edns = Some(parsed);
    }
    Parsed::Ok(Request {
        question_end,
        qtype,
        qclass,
        edns,
    })
}

struct Header {
    rcode: u8,
    authoritative: bool,
    truncated: bool,
    questions: u16,
    answers: u16,
    authorities: u16,
    additionals: u16,
}

fn write_header(out: &mut Vec<u8>, request: &[u8], h: &Header) {
    let opcode_and_rd = request[2] & 0x79; // opcode bits and RD, copied
    let mut flags = 0x80 | opcode_and_rd;
    if h.authoritative {
        flags |= 0x04;
    }
    if h.truncated {
        flags |= 0x02;
    }
    let cd = request[3] & 0x10; // checking disabled, copied
    out.extend_from_slice(&request[0..2]);
    out.push(flags);
    out.push(cd | (h.rcode & 0x0f));
    for count in [h.questions, h.answers, h.authorities, h.additionals] {
        out.extend_from_slice(&count.to_be_bytes());
    }
}

fn write_opt(out: &mut Vec<u8>, extended_rcode: u8) {
    out.push(0);
    out.extend_from_slice(&TYPE_OPT.to_be_bytes());
    out.extend_from_slice(&MAX_UDP_PAYLOAD.to_be_bytes());
    out.extend_from_slice(&[extended_rcode, 0, 0, 0]);
    out.extend_from_slice(&0u16.to_be_bytes());
}

/// Answers one request into `out` (cleared first). Returns `false` when nothing must be sent:
/// the datagram is shorter than a DNS header, or it is itself a response (answering responses
/// invites loops). Every other input gets a well-formed message: the answer, or FORMERR,
/// NOTIMP, REFUSED, SERVFAIL or BADVERS.
///
/// ```
/// use clusterset_dns::{ZoneStore, ZoneConfig, wire::{respond, Transport}};
/// use hickory_proto::op::{Message, Query, ResponseCode};
/// use hickory_proto::rr::{Name, RecordType};
///
/// let store = ZoneStore::new(ZoneConfig::default());
/// store.mark_synced();
/// let mut query = Message::query();
/// query.add_query(Query::query(Name::from_ascii("nope.shop.svc.clusterset.local.")?, RecordType::A));
/// let mut out = Vec::new();
/// assert!(respond(&store.snapshot(), &query.to_vec()?, Transport::Udp, &mut out));
/// let answer = Message::from_vec(&out)?;
/// assert_eq!(answer.metadata.response_code, ResponseCode::NXDomain);
/// assert_eq!(answer.authorities.len(), 1); // the SOA, for negative caching
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn respond(
    snapshot: &Snapshot,
    request: &[u8],
    transport: Transport,
    out: &mut Vec<u8>,
) -> bool {
    answer(snapshot, request, transport, out).is_some()
}

/// [`respond`], telling the response code of the answer written into `out` (`None`: nothing to
/// send). The code is the one the client sees: a UDP answer cut short with TC set is `NOERROR`,
/// and BADVERS (an extended code) is [`Rcode::Other`]. The server counts queries with it.
///
/// ```
/// use clusterset_dns::{ZoneStore, ZoneConfig, wire::{answer, Rcode, Transport}};
/// use hickory_proto::op::{Message, Query};
/// use hickory_proto::rr::{Name, RecordType};
///
/// let store = ZoneStore::new(ZoneConfig::default());
/// let mut query = Message::query();
/// query.add_query(Query::query(Name::from_ascii("web.shop.svc.clusterset.local.")?, RecordType::A));
/// let mut out = Vec::new();
/// // Not synced yet: SERVFAIL.
/// assert_eq!(answer(&store.snapshot(), &query.to_vec()?, Transport::Udp, &mut out), Some(Rcode::ServFail));
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn answer(
    snapshot: &Snapshot,
    request: &[u8],
    transport: Transport,
    out: &mut Vec<u8>,
) -> Option<Rcode> {
    out.clear();
    if request.len() < 12 || request[2] & 0x80 != 0 {
        return None;
    }
    let mut key = Key {
        bytes: [0; 256],
        len: 0,
    };
    let req = match parse(request, &mut key) {
        Parsed::Ok(req) => req,
        Parsed::Error(rcode, question_end, edns) => {
            return Some(write_unparsed(out, request, rcode, question_end, edns));
        }
    };
    let limit = match transport {
        Transport::Tcp => MAX_MESSAGE,
        Transport::Udp => usize::from(req.edns.map_or(CLASSIC_UDP_PAYLOAD, |e| {
            e.payload.clamp(CLASSIC_UDP_PAYLOAD, MAX_UDP_PAYLOAD)
        })),
    };
    let reply = Reply {
        request,
        question: &request[12..req.question_end],
        edns: req.edns.is_some(),
    };
    let key = key.as_slice();
    let zone_offset = snapshot.index.zone_offset(key);
    let in_zone = zone_offset.is_some();

    if req.qclass != CLASS_IN || req.qtype == TYPE_AXFR || req.qtype == TYPE_IXFR {
        reply.write_simple(out, RCODE_REFUSED);
        return Some(Rcode::Refused);
    }
    if !snapshot.synced {
        let rcode = if in_zone || is_reverse(key) {
            RCODE_SERVFAIL
        } else {
            RCODE_REFUSED
        };
        reply.write_simple(out, rcode);
        return Some(Rcode::from_header(rcode));
    }
    let entry = snapshot.find(key, zone_offset);
    let positive = entry.and_then(|e| e.ok()).and_then(|e| e.answer(req.qtype));
    let entry_in_zone = entry.map(|e| e.map_or_else(|in_zone| in_zone, |p| p.view.in_zone));
    let opt_count = u16::from(reply.edns);
    match (entry_in_zone, positive) {
        (_, Some(prepared)) => reply.write_prepared(out, prepared),
        (Some(entry_in_zone), None) => {
            negative(
                out,
                request,
                reply.question,
                snapshot,
                RCODE_NOERROR,
                entry_in_zone.then_some(zone_offset).flatten(),
                opt_count,
            );
        }
        (None, None) if in_zone => {
            negative(
                out,
                request,
                reply.question,
                snapshot,
                RCODE_NXDOMAIN,
                zone_offset,
                opt_count,
            );
        }
        (None, None) => {
            reply.write_simple(out, RCODE_REFUSED);
            return Some(Rcode::Refused);
        }
    }
    if reply.edns {
        write_opt(out, 0);
    }
    if out.len() > limit {
        reply.write_truncated(out);
    }
    // What was written: NOERROR or NXDOMAIN (TC answers are NOERROR).
    Some(Rcode::from_header(out.get(3).copied().unwrap_or(0)))
}

/// The answer to a request that did not parse: `rcode` (or BADVERS for an EDNS version other
/// than 0), the question echoed when it was read whole, an OPT record when the request had one.
fn write_unparsed(
    out: &mut Vec<u8>,
    request: &[u8],
    rcode: u8,
    question_end: Option<usize>,
    edns: Option<Edns>,
) -> Rcode {
    let badvers = edns.is_some_and(|e| e.version != 0);
    write_header(
        out,
        request,
        &Header {
            rcode,
            authoritative: false,
            truncated: false,
            questions: u16::from(question_end.is_some()),
            answers: 0,
            authorities: 0,
            additionals: u16::from(edns.is_some()),
        },
    );
    if let Some(end) = question_end {
        out.extend_from_slice(&request[12..end]);
    }
    if edns.is_some() {
        write_opt(out, if badvers { EXTENDED_BADVERS } else { 0 });
    }
    if badvers {
        Rcode::Other
    } else {
        Rcode::from_header(rcode)
    }
}

/// What every answer to a parsed request repeats: the request (its id and flags), its
/// question, and whether it carried EDNS (then so does the answer).
struct Reply<'a> {
    request: &'a [u8],
    question: &'a [u8],
    edns: bool,
}

impl Reply<'_> {
    /// An answer with no records: `rcode`, not authoritative.
    #[inline]
    fn write_simple(&self, out: &mut Vec<u8>, rcode: u8) {
        self.write_empty(out, rcode, false, false);
    }

    /// An authoritative NOERROR with TC set and no records: the answer did not fit.
    #[inline]
    fn write_truncated(&self, out: &mut Vec<u8>) {
        out.clear();
        self.write_empty(out, RCODE_NOERROR, true, true);
    }

    #[inline]
    fn write_empty(&self, out: &mut Vec<u8>, rcode: u8, authoritative: bool, truncated: bool) {
        write_header(
            out,
            self.request,
            &Header {
                rcode,
                authoritative,
                truncated,
                questions: 1,
                answers: 0,
                authorities: 0,
                additionals: u16::from(self.edns),
            },
        );
        out.extend_from_slice(self.question);
        if self.edns {
            write_opt(out, 0);
        }
    }

    /// A positive answer: the header, the question and the prepared records (without the
    /// OPT record, which the caller adds).
    #[inline]
    fn write_prepared(&self, out: &mut Vec<u8>, prepared: &PreparedAnswer) {
        write_header(
            out,
            self.request,
            &Header {
                rcode: RCODE_NOERROR,
                authoritative: true,
                truncated: false,
                questions: 1,
                answers: prepared.answer_count,
                authorities: 0,
                additionals: prepared.additional_count + u16::from(self.edns),
            },
        );
        out.extend_from_slice(self.question);
        out.extend_from_slice(&prepared.tail);
    }
}

/// NODATA or NXDOMAIN, with the SOA (owner: a pointer to the zone inside the question) when the
/// name is in the zone.
fn negative(
    out: &mut Vec<u8>,
    request: &[u8],
    question: &[u8],
    snapshot: &Snapshot,
    rcode: u8,
    zone_offset: Option<usize>,
    opt_count: u16,
) {
    let with_soa = zone_offset.is_some() && !snapshot.soa.is_empty();
    write_header(
        out,
        request,
        &Header {
            rcode,
            authoritative: true,
            truncated: false,
            questions: 1,
            answers: 0,
            authorities: u16::from(with_soa),
            additionals: opt_count,
        },
    );
    out.extend_from_slice(question);
    if let (true, Some(offset)) = (with_soa, zone_offset) {
        // The question starts at 12; names are at most 255 bytes, so the pointer fits 14 bits.
        let pointer = 0xc000 | u16::try_from(12 + offset).unwrap_or(12);
        out.extend_from_slice(&pointer.to_be_bytes());
        out.extend_from_slice(&snapshot.soa);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn header_codes_map_to_their_names_and_the_rest_to_other() {
        let names: Vec<_> = (0..16u8).map(|c| Rcode::from_header(c).as_str()).collect();
        assert_eq!(
            names[..6],
            [
                "NOERROR", "FORMERR", "SERVFAIL", "NXDOMAIN", "NOTIMP", "REFUSED"
            ]
        );
        assert!(names[6..].iter().all(|n| *n == "OTHER"), "{names:?}");
        for (i, rcode) in Rcode::ALL.into_iter().enumerate() {
            assert_eq!(rcode.index(), i);
        }
    }
}

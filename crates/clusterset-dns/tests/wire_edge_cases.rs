//! The request handler on malformed, unusual and oversized traffic.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

mod common;

use clusterset_dns::wire::{Transport, respond};
use clusterset_dns::{ZoneConfig, ZoneStore};
use common::{coredns_fixture, store_with};
use hickory_proto::op::{Edns, Message, OpCode, Query, ResponseCode};
use hickory_proto::rr::{DNSClass, Name, RecordType};

fn store() -> ZoneStore {
    store_with(ZoneConfig::default(), coredns_fixture())
}

fn query(name: &str, qtype: RecordType) -> Message {
    let mut q = Message::query();
    q.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    q
}

fn ask(store: &ZoneStore, bytes: &[u8], transport: Transport) -> Option<Message> {
    let mut out = Vec::new();
    respond(&store.snapshot(), bytes, transport, &mut out).then(|| Message::from_vec(&out).unwrap())
}

const HDLS_SRV: &str = "_http._tcp.hdls1.testns.svc.clusterset.local.";

#[test]
fn short_datagrams_and_responses_get_no_answer() {
    let store = store();
    for len in 0..12 {
        assert!(
            ask(&store, &vec![0u8; len], Transport::Udp).is_none(),
            "{len} bytes"
        );
    }
    let mut response = query("svc1.testns.svc.clusterset.local.", RecordType::A)
        .to_vec()
        .unwrap();
    response[2] |= 0x80; // QR: this is a response
    assert!(ask(&store, &response, Transport::Udp).is_none());
}

#[test]
fn malformed_questions_get_formerr_with_the_same_id() {
    let store = store();
    let good = query("svc1.testns.svc.clusterset.local.", RecordType::A)
        .to_vec()
        .unwrap();
    let id = u16::from_be_bytes([good[0], good[1]]);

    let mut two_questions = good.clone();
    two_questions[5] = 2;
    let mut cut = good.clone();
    cut.truncate(good.len() - 3);
    let mut pointer = good[..12].to_vec();
    pointer.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1]);
    let mut label_past_end = good[..12].to_vec();
    label_past_end.extend_from_slice(&[40, b'a']);
    let mut zero_questions = good.clone();
    zero_questions[5] = 0;
    let mut answer_in_query = good.clone();
    answer_in_query[7] = 1;

    for (what, bytes) in [
        ("two questions", two_questions),
        ("cut short", cut),
        ("compression pointer", pointer),
        ("label past the end", label_past_end),
        ("no question", zero_questions),
        ("answer count", answer_in_query),
    ] {
        let answer = ask(&store, &bytes, Transport::Udp).unwrap();
        assert_eq!(
            answer.metadata.response_code,
            ResponseCode::FormErr,
            "{what}"
        );
        assert_eq!(answer.metadata.id, id, "{what}");
        assert!(answer.answers.is_empty(), "{what}");
    }
}

#[test]
fn other_opcodes_are_not_implemented() {
    let store = store();
    let mut notify = query("clusterset.local.", RecordType::SOA);
    notify.metadata.op_code = OpCode::Notify;
    let answer = ask(&store, &notify.to_vec().unwrap(), Transport::Udp).unwrap();
    assert_eq!(answer.metadata.response_code, ResponseCode::NotImp);
    assert_eq!(answer.metadata.op_code, OpCode::Notify);
}

#[test]
fn edns_version_above_zero_gets_badvers() {
    let store = store();
    let mut q = query("svc1.testns.svc.clusterset.local.", RecordType::A);
    let mut edns = Edns::new();
    edns.set_version(1);
    q.set_edns(edns);
    let answer = ask(&store, &q.to_vec().unwrap(), Transport::Udp).unwrap();
    // Extended RCODE 16 (BADVERS; hickory reads 16 as its alias BADSIG).
    assert_eq!(u16::from(answer.metadata.response_code), 16);
    assert_eq!(answer.edns.as_ref().map(Edns::version), Some(0));
    assert!(answer.answers.is_empty());
}

#[test]
fn classes_other_than_in_are_refused() {
    let store = store();
    let mut q = Message::query();
    let mut question = Query::query(
        Name::from_ascii("svc1.testns.svc.clusterset.local.").unwrap(),
        RecordType::A,
    );
    question.set_query_class(DNSClass::CH);
    q.add_query(question);
    let answer = ask(&store, &q.to_vec().unwrap(), Transport::Udp).unwrap();
    assert_eq!(answer.metadata.response_code, ResponseCode::Refused);
}

#[test]
fn big_answers_are_truncated_over_udp_and_complete_over_tcp() {
    let store = store();
    // Without EDNS a UDP answer stays within 512 bytes.
    let plain = query(HDLS_SRV, RecordType::SRV).to_vec().unwrap();
    let udp = ask(&store, &plain, Transport::Udp).unwrap();
    let tcp = ask(&store, &plain, Transport::Tcp).unwrap();
    assert_eq!(tcp.answers.len(), 5);
    assert_eq!(tcp.additionals.len(), 6);
    let mut out = Vec::new();
    respond(&store.snapshot(), &plain, Transport::Tcp, &mut out);
    assert!(
        out.len() > 512,
        "the fixture answer is {} bytes: make it bigger",
        out.len()
    );
    assert!(udp.metadata.truncation, "TC set");
    assert!(udp.answers.is_empty() && udp.additionals.is_empty());
    assert_eq!(udp.queries, tcp.queries);

    // With EDNS and a 1232-byte buffer it fits.
    let mut q = query(HDLS_SRV, RecordType::SRV);
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    q.set_edns(edns);
    let udp = ask(&store, &q.to_vec().unwrap(), Transport::Udp).unwrap();
    assert!(!udp.metadata.truncation);
    assert_eq!(udp.answers.len(), 5);
}

#[test]
fn the_client_question_is_echoed_with_its_case() {
    let store = store();
    let q = query("SvC1.TESTNS.svc.clusterset.local.", RecordType::A);
    let answer = ask(&store, &q.to_vec().unwrap(), Transport::Udp).unwrap();
    assert_eq!(
        answer.queries[0].name().to_ascii(),
        "SvC1.TESTNS.svc.clusterset.local."
    );
    assert_eq!(answer.answers.len(), 1);
    assert_eq!(
        answer.answers[0].name.to_ascii(),
        "SvC1.TESTNS.svc.clusterset.local."
    );
}

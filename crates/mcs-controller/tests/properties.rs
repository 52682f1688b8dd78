//! Properties of the merge: the order of input never changes the output; every exporter gets
//! the same Conflict verdict; the merged ports are a valid Service port list containing the
//! oldest export's ports; the winner is the oldest export (ties by cluster id).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::collections::{BTreeMap, BTreeSet};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use mcs_controller::{
    ExportRecord, ExportedService, Publication, desired_endpoint_slices, desired_import,
    export_conditions, merge_exports,
};
use mcs_types::ServicePort;
use mcs_types::{ClusterId, ServiceKey};
use proptest::prelude::*;

fn arb_port() -> impl Strategy<Value = ServicePort> {
    (
        prop::sample::select(vec!["tcp", "udp", "http", "grpc", "metrics"]),
        prop::sample::select(vec!["TCP", "UDP", "SCTP"]),
        prop::sample::select(vec![42, 43, 80, 142]),
    )
        .prop_map(|(name, protocol, port)| ServicePort {
            name: Some(name.to_owned()),
            protocol: Some(protocol.to_owned()),
            app_protocol: None,
            port,
        })
}

/// A valid Service port list: unique names, unique (protocol, port).
fn arb_ports() -> impl Strategy<Value = Vec<ServicePort>> {
    prop::collection::vec(arb_port(), 1..4).prop_map(|ports| {
        let mut names = BTreeSet::new();
        let mut numbers = BTreeSet::new();
        ports
            .into_iter()
            .filter(|p| {
                names.insert(p.name.clone()) && numbers.insert((p.protocol.clone(), p.port))
            })
            .collect()
    })
}

fn arb_record(cluster: usize) -> impl Strategy<Value = ExportRecord> {
    (
        0i64..3,
        any::<bool>(),
        arb_ports(),
        prop::sample::select(vec!["None", "ClientIP"]),
        prop::sample::select(vec!["Cluster", "Local"]),
        prop::option::of(Just("PreferClose".to_owned())),
        prop::sample::select(vec![vec!["IPv4"], vec!["IPv6"], vec!["IPv4", "IPv6"]]),
        prop::option::of(Just(("team".to_owned(), "a".to_owned()))),
    )
        .prop_map(
            move |(created, headless, ports, affinity, itp, td, families, label)| ExportRecord {
                cluster_id: ClusterId::new(&format!("c{cluster}")).unwrap(),
                service_key: ServiceKey::new("ns", "svc"),
                export_created: Time(Timestamp::from_second(1_800_000_000 + created).unwrap()),
                service: ExportedService {
                    headless,
                    ports,
                    session_affinity: affinity.to_owned(),
                    session_affinity_config: None,
                    ip_families: families.iter().map(|f| (*f).to_owned()).collect(),
                    internal_traffic_policy: itp.to_owned(),
                    traffic_distribution: td,
                },
                exported_labels: label.into_iter().collect(),
                exported_annotations: Default::default(),
                global_ips: vec![],
                endpoints: vec![],
            },
        )
}

fn arb_records() -> impl Strategy<Value = Vec<ExportRecord>> {
    (1usize..6)
        .prop_flat_map(|n| (0..n).map(arb_record).collect::<Vec<_>>())
        .prop_shuffle()
}

proptest! {
    #[test]
    fn order_of_input_never_changes_output(records in arb_records(), seed in any::<u64>()) {
        let merged = merge_exports(&records).unwrap().unwrap();
        let mut reordered = records.clone();
        // A deterministic permutation from the seed.
        let n = reordered.len();
        for i in 0..n {
            let j = (seed as usize).wrapping_add(i * 7) % n;
            reordered.swap(i, j);
        }
        let again = merge_exports(&reordered).unwrap().unwrap();
        prop_assert_eq!(&merged, &again);
        prop_assert_eq!(desired_import(&merged, &[]), desired_import(&again, &[]));
        prop_assert_eq!(desired_endpoint_slices(&merged), desired_endpoint_slices(&again));
    }

    #[test]
    fn every_exporter_gets_the_same_conflict_verdict(
        records in arb_records(),
        seeds in prop::collection::vec(any::<u64>(), 6),
    ) {
        // Every exporter's agent merges the same records, each in an order of its own, and
        // writes the Conflict condition of its own export.
        let verdicts = verdicts_per_exporter(&records, |cluster, all| {
            let index = all.iter().position(|r| &r.cluster_id == cluster).unwrap();
            shuffled(all, seeds[index % seeds.len()])
        });
        prop_assert_eq!(verdicts.len(), records.len());
        if let Err(disagreement) = all_agree(&verdicts) {
            return Err(TestCaseError::fail(disagreement));
        }
        // The shared verdict is the merge's: True with its reasons and message, or
        // False/NoConflicts.
        let merged = merge_exports(&records).unwrap().unwrap();
        let (_, verdict) = verdicts.iter().next().unwrap();
        let expected = if merged.conflicts.is_empty() {
            ("False".to_owned(), "NoConflicts".to_owned(), String::new())
        } else {
            ("True".to_owned(), merged.conflicts.join(), merged.conflict_message.clone())
        };
        prop_assert_eq!(verdict.as_ref(), Some(&expected));
        // Conflict is True exactly when some export differs from the others.
        let port_set = |r: &ExportRecord| -> BTreeSet<(Option<String>, String, i32)> {
            r.service
                .ports
                .iter()
                .map(|p| (p.name.clone(), p.protocol_or_default().to_owned(), p.port))
                .collect()
        };
        let first = &records[0];
        let identical = records.iter().all(|r| {
            let (a, b) = (&r.service, &first.service);
            a.headless == b.headless
                && port_set(r) == port_set(first)
                && a.session_affinity == b.session_affinity
                && a.session_affinity_config == b.session_affinity_config
                && a.ip_families == b.ip_families
                && a.internal_traffic_policy == b.internal_traffic_policy
                && a.traffic_distribution == b.traffic_distribution
                && r.exported_labels == first.exported_labels
                && r.exported_annotations == first.exported_annotations
        });
        prop_assert_eq!(expected.0 == "False", identical);
    }

    #[test]
    fn merged_ports_are_a_valid_service_port_list(records in arb_records()) {
        let merged = merge_exports(&records).unwrap().unwrap();
        let names: BTreeSet<_> = merged.ports.iter().map(|p| p.name.clone()).collect();
        let numbers: BTreeSet<_> = merged
            .ports
            .iter()
            .map(|p| (p.protocol_or_default().to_owned(), p.port))
            .collect();
        prop_assert_eq!(names.len(), merged.ports.len());
        prop_assert_eq!(numbers.len(), merged.ports.len());
        // The oldest export's ports are all there.
        let winner = records.iter().find(|r| r.cluster_id == merged.winner).unwrap();
        for port in &winner.service.ports {
            prop_assert!(merged.ports.contains(port));
        }
    }

    #[test]
    fn the_winner_is_the_oldest_export_with_ties_by_cluster_id(records in arb_records()) {
        let merged = merge_exports(&records).unwrap().unwrap();
        let expected = records
            .iter()
            .min_by(|a, b| (&a.export_created, &a.cluster_id).cmp(&(&b.export_created, &b.cluster_id)))
            .unwrap();
        prop_assert_eq!(&merged.winner, &expected.cluster_id);
        prop_assert_eq!(merged.service_type == mcs_types::ServiceImportType::Headless, expected.service.headless);
    }
}

/// One exporter's `Conflict` condition: (status, reason, message), or `None` if it wrote none.
type Verdict = Option<(String, String, String)>;

/// The `Conflict` condition every exporter writes, each computed as its agent does: it merges
/// the records `seen_by` gives it and, if its own record is in the merge, sets the conditions
/// of its export from that merge.
fn verdicts_per_exporter(
    records: &[ExportRecord],
    seen_by: impl Fn(&ClusterId, &[ExportRecord]) -> Vec<ExportRecord>,
) -> BTreeMap<ClusterId, Verdict> {
    records
        .iter()
        .map(|own| {
            let me = &own.cluster_id;
            let merged = merge_exports(&seen_by(me, records)).unwrap();
            let in_merge = merged
                .as_ref()
                .filter(|m| m.records.iter().any(|r| &r.cluster_id == me));
            let conditions = export_conditions(Ok(()), in_merge, &Publication::Published);
            let verdict = conditions
                .set
                .into_iter()
                .find(|c| c.type_ == "Conflict")
                .map(|c| (c.status.as_str().to_owned(), c.reason, c.message));
            (me.clone(), verdict)
        })
        .collect()
}

/// `Ok` when every exporter has the same verdict; otherwise the exporters that differ from the
/// first one.
fn all_agree(verdicts: &BTreeMap<ClusterId, Verdict>) -> Result<(), String> {
    let Some((first_cluster, first)) = verdicts.iter().next() else {
        return Ok(());
    };
    let differing: Vec<String> = verdicts
        .iter()
        .filter(|(_, v)| *v != first)
        .map(|(cluster, v)| format!("{cluster}: {v:?}"))
        .collect();
    if differing.is_empty() {
        Ok(())
    } else {
        Err(format!(
            "{first_cluster} got {first:?}, but {}",
            differing.join("; ")
        ))
    }
}

/// `records` in an order drawn from `seed` (Fisher-Yates with xorshift).
fn shuffled(records: &[ExportRecord], seed: u64) -> Vec<ExportRecord> {
    let mut out = records.to_vec();
    let mut state = seed | 1;
    for i in (1..out.len()).rev() {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let j = usize::try_from(state % (i as u64 + 1)).unwrap();
        out.swap(i, j);
    }
    out
}

fn record(cluster: &str, created: i64, internal_traffic_policy: &str) -> ExportRecord {
    ExportRecord {
        cluster_id: ClusterId::new(cluster).unwrap(),
        service_key: ServiceKey::new("ns", "svc"),
        export_created: Time(Timestamp::from_second(1_800_000_000 + created).unwrap()),
        service: ExportedService {
            headless: false,
            ports: vec![ServicePort {
                name: Some("tcp".into()),
                protocol: Some("TCP".into()),
                app_protocol: None,
                port: 42,
            }],
            session_affinity: "None".into(),
            session_affinity_config: None,
            ip_families: vec!["IPv4".into()],
            internal_traffic_policy: internal_traffic_policy.into(),
            traffic_distribution: None,
        },
        exported_labels: Default::default(),
        exported_annotations: Default::default(),
        global_ips: vec![],
        endpoints: vec![],
    }
}

#[test]
fn the_verdict_check_fails_when_one_exporter_sees_a_different_verdict() {
    // c2 disagrees with c0 and c1 on internalTrafficPolicy.
    let records = vec![
        record("c0", 0, "Cluster"),
        record("c1", 1, "Cluster"),
        record("c2", 2, "Local"),
    ];
    let everyone_sees_all = verdicts_per_exporter(&records, |_, all| all.to_vec());
    assert_eq!(all_agree(&everyone_sees_all), Ok(()));
    assert_eq!(
        everyone_sees_all[&ClusterId::new("c0").unwrap()]
            .as_ref()
            .map(|v| v.1.as_str()),
        Some("InternalTrafficPolicyConflict")
    );

    // The peers' bug: the conflict shows only where the conflicting data is merged. If c0
    // merged only its own record, it would say NoConflicts while c1 and c2 say Conflict.
    let c0_sees_only_itself = verdicts_per_exporter(&records, |me, all| {
        all.iter()
            .filter(|r| me.as_str() != "c0" || &r.cluster_id == me)
            .cloned()
            .collect()
    });
    let err = all_agree(&c0_sees_only_itself).unwrap_err();
    assert!(
        err.starts_with("c0 got Some((\"False\", \"NoConflicts\""),
        "{err}"
    );
    assert!(err.contains("c1: ") && err.contains("c2: "), "{err}");

    // An exporter left out of the merge writes no Conflict condition at all: also a difference.
    let c1_left_out = verdicts_per_exporter(&records, |me, all| {
        all.iter()
            .filter(|r| me.as_str() != "c1" || r.cluster_id.as_str() != "c1")
            .cloned()
            .collect()
    });
    let err = all_agree(&c1_left_out).unwrap_err();
    assert!(err.contains("c1: None"), "{err}");

    // Same status and reason, another message: still a difference.
    let mut verdicts = everyone_sees_all.clone();
    if let Some(Some(v)) = verdicts.get_mut(&ClusterId::new("c2").unwrap()) {
        v.2.push_str(" (seen from c2)");
    }
    assert!(all_agree(&verdicts).unwrap_err().contains("c2: "));
}

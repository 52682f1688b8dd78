//! Properties of the merge: the order of input never changes the output; every exporter gets
//! the same Conflict verdict; the merged ports are a valid Service port list containing the
//! oldest export's ports; the winner is the oldest export (ties by cluster id).
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::collections::BTreeSet;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use mcs_controller::{
    ClusterId, ExportRecord, ExportedService, Publication, ServiceKey, desired_endpoint_slices,
    desired_import, export_conditions, merge_exports,
};
use mcs_types::ServicePort;
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
    fn every_exporter_gets_the_same_conflict_verdict(records in arb_records()) {
        let merged = merge_exports(&records).unwrap().unwrap();
        let verdicts: BTreeSet<_> = records
            .iter()
            .map(|_| {
                let c = export_conditions(Ok(()), Some(&merged), &Publication::Published);
                let conflict = c.set.into_iter().find(|c| c.type_ == "Conflict").unwrap();
                (conflict.status.as_str(), conflict.reason, conflict.message)
            })
            .collect();
        prop_assert_eq!(verdicts.len(), 1);
        // Conflict is True exactly when some export differs from the merged result.
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
        prop_assert_eq!(merged.conflicts.is_empty(), identical);
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

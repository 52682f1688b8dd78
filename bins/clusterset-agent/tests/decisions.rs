#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! Table tests of the core's own decisions, fed directly with watch events.

use std::time::Duration;

use clusterset_agent::broker::{self, BrokerRecord, Heartbeat};
use clusterset_agent::core::{AgentCore, Input, LeaseState};
use clusterset_agent::sim;
use clusterset_agent::write::Write;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::runtime::watcher::Event;
use mcs_controller::{ClusterId, EndpointMode, ExportRecord, LocalExport, ServiceKey};

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn record_of(cluster: &str, key: &ServiceKey) -> BrokerRecord {
    let id = ClusterId::new(cluster).unwrap();
    let service = sim::service(key, "10.96.0.7", &[80]);
    let record = ExportRecord::from_local(LocalExport {
        cluster_id: &id,
        key,
        export_created: &Time(now()),
        export_spec: &Default::default(),
        service: Some(&service),
        endpoint_slices: &[],
        global_ips: &["242.1.0.9".parse().unwrap()],
        mode: EndpointMode::GlobalIngress,
    })
    .unwrap();
    BrokerRecord::new(record, sim::BROKER_NAMESPACE, now())
}

fn lease_of(cluster: &str, identity: &str) -> k8s_openapi::api::coordination::v1::Lease {
    match broker::heartbeat(
        None,
        &ClusterId::new(cluster).unwrap(),
        identity,
        sim::BROKER_NAMESPACE,
        30,
        now(),
    ) {
        Heartbeat::Create(lease) => *lease,
        other => panic!("{other:?}"),
    }
}

/// The eight watches, each with what it lists: a local export of `shop/web`, an import of
/// `shop/orphan` that no cluster exports any more (to be deleted once everything is known), a
/// record of c1's `shop/api`, and both clusters' Leases.
fn listings() -> Vec<(&'static str, Vec<Input>)> {
    let web = ServiceKey::new("shop", "web");
    let api = ServiceKey::new("shop", "api");
    let orphan = ServiceKey::new("shop", "orphan");
    let mut orphan_import = mcs_types::v1beta1::ServiceImport::new(
        "orphan",
        mcs_types::ServiceImportSpec::new(mcs_types::ServiceImportType::ClusterSetIP, Vec::new()),
    );
    orphan_import.metadata.namespace = Some(orphan.namespace.clone());
    vec![
        (
            "namespaces",
            vec![Input::Namespace(Event::InitApply(sim::namespace("shop")))],
        ),
        (
            "services",
            vec![Input::Service(Event::InitApply(sim::service(
                &web,
                "10.96.0.1",
                &[80],
            )))],
        ),
        (
            "serviceexports",
            vec![Input::ServiceExport(Event::InitApply(sim::service_export(
                &web,
                now(),
            )))],
        ),
        (
            "endpointslices",
            vec![Input::LocalEndpointSlice(Event::InitApply(
                sim::endpoint_slice(&web, &["10.244.0.1"], &[80]),
            ))],
        ),
        (
            "serviceimports",
            vec![Input::ServiceImport(Event::InitApply(orphan_import))],
        ),
        ("imported-endpointslices", vec![]),
        (
            "exportrecords",
            vec![Input::Record(Event::InitApply(record_of("c1", &api)))],
        ),
        (
            "leases",
            vec![
                Input::Lease(Event::InitApply(lease_of("c0", "agent-c0"))),
                Input::Lease(Event::InitApply(lease_of("c1", "agent-c1"))),
            ],
        ),
    ]
}

fn event<T>(done: bool) -> Event<T> {
    if done { Event::InitDone } else { Event::Init }
}

fn marker(kind: &str, done: bool) -> Input {
    match kind {
        "namespaces" => Input::Namespace(event(done)),
        "services" => Input::Service(event(done)),
        "serviceexports" => Input::ServiceExport(event(done)),
        "endpointslices" => Input::LocalEndpointSlice(event(done)),
        "serviceimports" => Input::ServiceImport(event(done)),
        "imported-endpointslices" => Input::ImportedEndpointSlice(event(done)),
        "exportrecords" => Input::Record(event(done)),
        "leases" => Input::Lease(event(done)),
        other => panic!("{other}"),
    }
}

#[test]
fn nothing_is_written_until_every_watch_has_listed_once() {
    let listings = listings();
    for mask in 0u32..(1 << listings.len()) {
        let mut core = AgentCore::new(sim::cluster_config(0, None).unwrap());
        for (bit, (kind, inputs)) in listings.iter().enumerate() {
            core.handle(marker(kind, false));
            for input in inputs {
                core.handle(input.clone());
            }
            // A set bit: the list completed. A clear bit: still listing (the partial list must
            // not count, however empty it looks).
            if mask & (1 << bit) != 0 {
                core.handle(marker(kind, true));
            }
        }
        let out = core.process(now());
        let synced: Vec<&str> = listings
            .iter()
            .enumerate()
            .filter(|(bit, _)| mask & (1 << bit) != 0)
            .map(|(_, (k, _))| *k)
            .collect();
        if mask == (1 << listings.len()) - 1 {
            assert!(core.is_started());
            let kinds: Vec<&str> = out.writes.iter().map(Write::kind).collect();
            assert!(kinds.contains(&"publish_record"), "{kinds:?}");
            assert!(kinds.contains(&"delete_service_import"), "{kinds:?}");
            assert!(
                kinds.contains(&"apply_service_import"),
                "c1's api is imported: {kinds:?}"
            );
        } else {
            assert!(
                out.writes.is_empty(),
                "synced only {synced:?}, yet wrote {:?}",
                out.writes
            );
            assert!(!core.is_started());
        }
    }
}

#[test]
fn lease_states_decide_who_publishes() {
    // (holder of c0's Lease, seconds after its renewal, expected state, publishes?)
    let cases: [(&str, i64, &str, bool); 4] = [
        ("agent-c0", 10, "held", true),
        ("agent-c0", 31, "not held", false),
        ("other-pod", 10, "blocked", false),
        ("other-pod", 31, "not held", false),
    ];
    for (holder, after, expected, publishes) in cases {
        let mut core = AgentCore::new(sim::cluster_config(0, None).unwrap());
        let web = ServiceKey::new("shop", "web");
        for (kind, inputs) in listings() {
            core.handle(marker(kind, false));
            for input in inputs {
                let input = match input {
                    Input::Lease(Event::InitApply(l))
                        if l.metadata.name.as_deref() == Some("clusterset-agent-c0") =>
                    {
                        Input::Lease(Event::InitApply(lease_of("c0", holder)))
                    }
                    other => other,
                };
                core.handle(input);
            }
            core.handle(marker(kind, true));
        }
        let at = now()
            .checked_add(Duration::from_secs(u64::try_from(after).unwrap()))
            .unwrap();
        let out = core.process(at);
        let state = match core.lease_state() {
            LeaseState::Held => "held",
            LeaseState::NotHeld => "not held",
            LeaseState::Blocked { .. } => "blocked",
        };
        assert_eq!(state, expected, "{holder} +{after}s");
        let published = out
            .writes
            .iter()
            .any(|w| matches!(w, Write::PublishRecord(_)));
        assert_eq!(published, publishes, "{holder} +{after}s");
        let export_status = out.writes.iter().find_map(|w| match w {
            Write::ApplyServiceExportStatus { key, status } if *key == web => Some(status.clone()),
            _ => None,
        });
        let ready = export_status
            .unwrap()
            .conditions
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        let expected_reason = match expected {
            "blocked" => "Failed",
            _ => "Pending",
        };
        if !publishes {
            assert_eq!(
                ready.reason, expected_reason,
                "{holder} +{after}s: {ready:?}"
            );
        }
    }
}

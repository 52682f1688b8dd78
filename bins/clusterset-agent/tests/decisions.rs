#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! Table tests of the core's own decisions, fed directly with watch events.

use std::time::Duration;

use clusterset_agent::broker::{self, BrokerRecord, Heartbeat};
use clusterset_agent::core::{AgentCore, Input, LeaseState, Side};
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
    let namespace = broker::records_namespace(sim::BROKER_NAMESPACE, &id);
    BrokerRecord::new(record, &namespace, now())
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

/// A core that has listed everything of [`listings`] (c0's Lease held by this agent until 30 s
/// after [`now`]), and the writes of its first pass.
fn started() -> (AgentCore, Vec<Write>) {
    let mut core = AgentCore::new(sim::cluster_config(0, None).unwrap());
    for (kind, inputs) in listings() {
        core.handle(marker(kind, false));
        for input in inputs {
            core.handle(input);
        }
        core.handle(marker(kind, true));
    }
    let out = core.process(now());
    assert!(core.is_started());
    (core, out.writes)
}

fn after(millis: u64) -> Timestamp {
    now().checked_add(Duration::from_millis(millis)).unwrap()
}

fn find(writes: &[Write], kind: &str, key: &ServiceKey) -> Option<Write> {
    writes
        .iter()
        .find(|w| w.kind() == kind && w.service() == *key)
        .cloned()
}

fn kinds(writes: &[Write], key: &ServiceKey) -> Vec<&'static str> {
    writes
        .iter()
        .filter(|w| w.service() == *key)
        .map(Write::kind)
        .collect()
}

#[test]
fn a_members_return_does_not_restart_the_backoff_of_a_failed_broker_write() {
    let web = ServiceKey::new("shop", "web");
    let (mut core, writes) = started();
    let publish = find(&writes, "publish_record", &web).unwrap();
    let status = find(&writes, "apply_service_export_status", &web).unwrap();
    // The hub is down: the publication fails three times (its next retry 4 s later). The
    // member's API server goes away too, and the export's status fails.
    for _ in 0..3 {
        core.write_failed(&publish, sim::UNREACHABLE, now());
    }
    core.unreachable(Side::Member);
    core.write_failed(&status, sim::UNREACHABLE, now());

    // The member's API server answers again after 0.5 s: the export's status is retried at
    // once; the publication waits out its own backoff (the hub has not answered).
    core.handle(Input::Namespace(Event::Apply(sim::namespace("shop"))));
    let out = core.process(after(500));
    assert_eq!(
        kinds(&out.writes, &web),
        ["apply_service_export_status"],
        "{:?}",
        out.writes
    );
    // (The status goes out again whenever the service is reconciled: this test delivers no
    // echo of it.)
    let out = core.process(after(3900));
    assert!(!kinds(&out.writes, &web).contains(&"publish_record"));
    let out = core.process(after(4000));
    assert!(kinds(&out.writes, &web).contains(&"publish_record"));
}

#[test]
fn a_refused_write_keeps_its_backoff_when_its_api_server_returns_from_an_outage() {
    let (web, api) = (
        ServiceKey::new("shop", "web"),
        ServiceKey::new("shop", "api"),
    );
    let (mut core, writes) = started();
    let import = find(&writes, "apply_service_import", &api).unwrap();
    let status = find(&writes, "apply_service_export_status", &web).unwrap();
    // The member's API server refuses the import of `api` (an admission webhook's 422) six
    // times: its backoff has grown to 32 s.
    for _ in 0..6 {
        core.write_refused(&import, "denied by the webhook", now());
    }
    // Then it goes away (a watch times out), and the status of `web` fails meanwhile.
    core.unreachable(Side::Member);
    core.write_failed(&status, sim::UNREACHABLE, now());

    // It answers again: the write that failed without an answer goes out at once, the refused
    // one waits out its backoff (it would be refused again).
    core.handle(Input::Namespace(Event::Apply(sim::namespace("shop"))));
    let out = core.process(after(500));
    assert_eq!(kinds(&out.writes, &web), ["apply_service_export_status"]);
    assert!(kinds(&out.writes, &api).is_empty(), "{:?}", out.writes);
    let out = core.process(after(31_900));
    assert!(kinds(&out.writes, &api).is_empty(), "{:?}", out.writes);
    let out = core.process(after(32_000));
    assert!(kinds(&out.writes, &api).contains(&"apply_service_import"));
}

#[test]
fn a_refused_write_shows_that_its_api_server_answers() {
    let (web, api) = (
        ServiceKey::new("shop", "web"),
        ServiceKey::new("shop", "api"),
    );
    let (mut core, writes) = started();
    let import = find(&writes, "apply_service_import", &api).unwrap();
    let status = find(&writes, "apply_service_export_status", &web).unwrap();
    // The member's API server did not answer (a watch failed, then the status of `web`).
    core.unreachable(Side::Member);
    core.write_failed(&status, sim::UNREACHABLE, now());
    // Now it refuses the import of `api` with a 422: it answers, so the status of `web` is
    // retried at once rather than after its 1 s backoff.
    core.write_refused(&import, "denied by the webhook", now());
    let out = core.process(now());
    assert_eq!(kinds(&out.writes, &web), ["apply_service_export_status"]);
    assert!(kinds(&out.writes, &api).is_empty(), "{:?}", out.writes);
}

#[test]
fn an_older_lease_from_the_watch_does_not_replace_the_one_the_heartbeat_stored() {
    // (resourceVersion of the Lease listed first, how the watch delivers it again)
    let cases = [
        (Some("5"), "relist"),
        (Some("5"), "late event"),
        // Without comparable versions, the renewal times decide.
        (None, "relist"),
    ];
    for (version, delivery) in cases {
        let web = ServiceKey::new("shop", "web");
        let (mut core, _) = started();
        let mut listed = lease_of("c0", "agent-c0");
        listed.metadata.resource_version = version.map(str::to_owned);
        core.handle(Input::Lease(Event::Apply(listed.clone())));
        // After a 40 s outage the Lease (renewed at `now`, for 30 s) has run out; the first
        // heartbeat takes it again and the runtime feeds the Lease the hub stored to the core.
        let back = after(40_000);
        let Some(Heartbeat::Replace(renewed)) = core.heartbeat(back) else {
            panic!("the expired Lease is taken again");
        };
        let mut stored = *renewed;
        stored.metadata.resource_version = Some("12".into());
        core.handle(Input::Lease(Event::Apply(stored)));
        core.process(back);
        assert_eq!(*core.lease_state(), LeaseState::Held);

        // The Lease watch delivers the older Lease again: it is ignored.
        match delivery {
            "relist" => {
                core.handle(Input::Lease(Event::Init));
                core.handle(Input::Lease(Event::InitApply(listed)));
                core.handle(Input::Lease(Event::InitApply(lease_of("c1", "agent-c1"))));
                core.handle(Input::Lease(Event::InitDone));
            }
            _ => core.handle(Input::Lease(Event::Apply(listed))),
        }
        let out = core.process(after(40_100));
        assert_eq!(
            *core.lease_state(),
            LeaseState::Held,
            "{version:?} {delivery}"
        );
        let ready_false = out.writes.iter().any(|w| {
            matches!(w, Write::ApplyServiceExportStatus { key, status } if *key == web
                && status.conditions.iter().any(|c| c.type_ == "Ready" && c.status == "False"))
        });
        assert!(!ready_false, "{version:?} {delivery}: {:?}", out.writes);
    }
}

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! Table tests of the core's own decisions, fed directly with watch events.

use std::time::Duration;

use clusterset_sim as sim;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use mcs_controller::AgentConfig;
use mcs_controller::broker::{self, BrokerRecord, Heartbeat, SharedRecords};
use mcs_controller::core::{AgentCore, ClusterHealth, Input, LeaseState, Side};
use mcs_controller::watch::Event;
use mcs_controller::write::Write;
use mcs_controller::{EndpointMode, ExportRecord, LocalExport};
use mcs_types::{ClusterId, ServiceKey};

fn now() -> Timestamp {
    Timestamp::from_second(1_800_000_000).unwrap()
}

fn record_of(cluster: &str, key: &ServiceKey) -> BrokerRecord {
    let id = ClusterId::new(cluster).unwrap();
    let namespace = broker::records_namespace(sim::BROKER_NAMESPACE, &id);
    record_in(cluster, key, &namespace, &[80])
}

/// `cluster`'s record of `key` with `ports`, stored in the hub namespace `namespace`.
fn record_in(cluster: &str, key: &ServiceKey, namespace: &str, ports: &[i32]) -> BrokerRecord {
    let id = ClusterId::new(cluster).unwrap();
    let service = sim::service(key, "10.96.0.7", ports);
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
    BrokerRecord::new(record, namespace, now())
}

fn lease_of(cluster: &str, identity: &str) -> k8s_openapi::api::coordination::v1::Lease {
    let claim = broker::heartbeat_claim(
        &ClusterId::new(cluster).unwrap(),
        identity,
        sim::BROKER_NAMESPACE,
        std::time::Duration::from_secs(30),
    );
    match broker::heartbeat(None, &claim, now()) {
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
    // (holder of c0's Lease (30 s), seconds after its renewal at first sight, expected state,
    // publishes?). This agent's own Lease is judged by its times, with kube-lease's 5 s skew
    // allowance; another instance's only by how long this agent has seen it unchanged, so it
    // blocks on first sight however old its renewal says it is.
    let cases: [(&str, i64, &str, bool); 5] = [
        ("agent-c0", 10, "held", true),
        ("agent-c0", 34, "held", true),
        ("agent-c0", 40, "not held", false),
        ("other-pod", 10, "blocked", false),
        ("other-pod", 40, "blocked", false),
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
        let expected_reason = match expected {
            "blocked" => "Failed",
            _ => "Pending",
        };
        if publishes {
            // The record is on its way: the export's first status waits for the hub's answer.
            assert_eq!(export_status, None, "{holder} +{after}s");
        } else {
            // Nothing is published: the status says why at once.
            let ready = export_status
                .unwrap()
                .conditions
                .into_iter()
                .find(|c| c.type_ == "Ready")
                .unwrap();
            assert_eq!(
                ready.reason, expected_reason,
                "{holder} +{after}s: {ready:?}"
            );
        }
        if expected == "blocked" {
            // Seen unchanged for the Lease's whole duration: free to take.
            let later = at.checked_add(Duration::from_secs(30)).unwrap();
            core.process(later);
            assert_eq!(
                core.lease_state(),
                &LeaseState::NotHeld,
                "{holder} +{after}s"
            );
            let Some(Heartbeat::Replace(taken)) = core.heartbeat(later) else {
                panic!("{holder} +{after}s: the Lease is taken over")
            };
            assert_eq!(kube_lease::holder(&taken), Some("agent-c0"));
        }
    }
}

/// A core that has listed everything of [`listings`] (c0's Lease held by this agent until 30 s
/// after [`now`]), and the writes of its first pass.
fn started() -> (AgentCore, Vec<Write>) {
    started_with(pending_at_once(sim::cluster_config(0, None).unwrap()), &[])
}

/// `config` with no wait for an export's first status: `Ready=Unknown/Pending` is written in
/// the same pass as the record (the tests of what follows a status write want one at once).
fn pending_at_once(mut config: AgentConfig) -> AgentConfig {
    config.first_status_wait = Duration::ZERO;
    config
}

/// As [`started`], for `config` and with `records` listed besides those of [`listings`].
fn started_with(config: AgentConfig, records: &[BrokerRecord]) -> (AgentCore, Vec<Write>) {
    let mut core = AgentCore::new(config);
    for (kind, mut inputs) in listings() {
        if kind == "exportrecords" {
            inputs.extend(
                records
                    .iter()
                    .map(|r| Input::Record(Event::InitApply(r.clone()))),
            );
        }
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

/// The reasons of [`mcs_controller::core::Stats::foreign_writers`], with these counts.
fn foreign(
    record_namespace: usize,
    shared_namespace: usize,
    lease_name: usize,
) -> [(&'static str, usize); 3] {
    [
        ("record_namespace", record_namespace),
        ("shared_namespace", shared_namespace),
        ("lease_name", lease_name),
    ]
}

/// The ports of the ServiceImport of `key` that `writes` apply, if they apply one.
fn import_ports(writes: &[Write], key: &ServiceKey) -> Option<Vec<i32>> {
    match find(writes, "apply_service_import", key)? {
        Write::ApplyServiceImport(import) => {
            Some(import.spec.ports.iter().map(|p| p.port).collect())
        }
        other => panic!("{other:?}"),
    }
}

fn shared_records(mode: SharedRecords) -> AgentConfig {
    let mut config = sim::cluster_config(0, None).unwrap();
    config.shared_records = mode;
    config
}

#[test]
fn a_record_stored_in_another_clusters_namespace_is_ignored_counted_and_forgotten_when_deleted() {
    let (db, api) = (
        ServiceKey::new("shop", "db"),
        ServiceKey::new("shop", "api"),
    );
    let (mut core, _) = started();
    assert_eq!(core.stats().foreign_writers, foreign(0, 0, 0));
    let records_before = core.stats().broker_records;
    // c2's credentials write records that say they are c1's: a new service, and another
    // version of c1's `api` (a port c1 does not export).
    let forged_db = record_in("c1", &db, "clusterset-broker-c2", &[80]);
    let forged_api = record_in("c1", &api, "clusterset-broker-c2", &[9999]);
    core.handle(Input::Record(Event::Apply(forged_db.clone())));
    core.handle(Input::Record(Event::Apply(forged_api.clone())));
    let out = core.process(after(100));
    assert!(kinds(&out.writes, &db).is_empty(), "{:?}", out.writes);
    assert!(kinds(&out.writes, &api).is_empty(), "{:?}", out.writes);
    assert_eq!(core.stats().foreign_writers, foreign(2, 0, 0));
    assert_eq!(
        core.stats().broker_records,
        records_before,
        "ignored records are not counted as the clusters' records"
    );
    for name in ["c1.shop.db", "c1.shop.api"] {
        let line = format!(
            "broker record clusterset-broker-c2/{name} is ignored: record of cluster c1 stored in namespace clusterset-broker-c2, where cluster c1 cannot write (its records live in clusterset-broker-c1)"
        );
        assert!(
            out.problems.iter().any(|p| p.starts_with(&line)),
            "{line}\n{:#?}",
            out.problems
        );
    }

    core.handle(Input::Record(Event::Delete(forged_db)));
    core.handle(Input::Record(Event::Delete(forged_api)));
    let out = core.process(after(200));
    assert!(out.writes.is_empty(), "{:?}", out.writes);
    assert_eq!(core.stats().foreign_writers, foreign(0, 0, 0));
}

#[test]
fn a_record_in_the_shared_namespace_is_ignored_unless_the_agent_reads_shared_records() {
    let db = ServiceKey::new("shop", "db");
    // (mode, imported?, counted as shared_namespace)
    let cases = [
        (SharedRecords::Ignore, false, 1),
        (SharedRecords::Read, true, 0),
        (SharedRecords::Write, true, 0),
    ];
    for (mode, imported, counted) in cases {
        let (mut core, _) = started_with(shared_records(mode), &[]);
        let shared = record_in("c1", &db, sim::BROKER_NAMESPACE, &[80]);
        core.handle(Input::Record(Event::Apply(shared.clone())));
        let out = core.process(after(100));
        assert_eq!(
            import_ports(&out.writes, &db),
            imported.then(|| vec![80]),
            "{mode:?}: {:?}",
            out.writes
        );
        assert_eq!(
            core.stats().foreign_writers,
            foreign(0, counted, 0),
            "{mode:?}"
        );
        let line = "broker record clusterset-broker/c1.shop.db is ignored: record of cluster c1 stored in the shared broker namespace clusterset-broker, where every member may write";
        assert_eq!(
            out.problems.iter().any(|p| p.starts_with(line)),
            !imported,
            "{mode:?}: {:#?}",
            out.problems
        );

        core.handle(Input::Record(Event::Delete(shared)));
        core.process(after(200));
        assert_eq!(core.stats().foreign_writers, foreign(0, 0, 0), "{mode:?}");
    }
}

#[test]
fn a_lease_named_for_another_cluster_does_not_make_its_label_cluster_look_fresh() {
    let api = ServiceKey::new("shop", "api");
    let (mut core, _) = started();
    // 40 s on, c1's Lease (renewed at `now` for 30 s) has run out. c2's credentials renew a
    // Lease labelled c1 under c2's Lease name.
    let at = after(40_000);
    let c1 = ClusterId::new("c1").unwrap();
    let renewed_at = |name: &str| {
        let claim = broker::heartbeat_claim(
            &c1,
            "agent-c1",
            sim::BROKER_NAMESPACE,
            std::time::Duration::from_secs(30),
        );
        let Heartbeat::Create(lease) = broker::heartbeat(None, &claim, at) else {
            panic!("a new Lease")
        };
        let mut lease = *lease;
        lease.metadata.name = Some(name.to_owned());
        lease
    };
    let forged = renewed_at("clusterset-agent-c2");
    core.handle(Input::Lease(Event::Apply(forged.clone())));
    let out = core.process(at);
    assert!(
        matches!(core.cluster_health(&c1), Some(ClusterHealth::Stale { .. })),
        "{:?}",
        core.cluster_health(&c1)
    );
    assert_eq!(core.stats().foreign_writers, foreign(0, 0, 1));
    let line = "Lease clusterset-broker/clusterset-agent-c2 says it is cluster c1's heartbeat, whose Lease is clusterset-agent-c1: another member's credentials wrote it; ignored";
    assert!(
        out.problems.iter().any(|p| p == line),
        "{:#?}",
        out.problems
    );
    // c1's import is marked: c1 stopped heartbeating.
    let stale_marked = out.writes.iter().any(|w| {
        matches!(w, Write::ApplyServiceImportStatus(i) if w.service() == api
            && i.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c|
                c.type_ == mcs_controller::core::STALE_CLUSTERS_CONDITION && c.status == "True")))
    });
    assert!(stale_marked, "{:?}", out.writes);

    // The same renewal under c1's own Lease name does make it fresh.
    core.handle(Input::Lease(Event::Apply(renewed_at(
        "clusterset-agent-c1",
    ))));
    core.process(after(40_100));
    assert_eq!(core.cluster_health(&c1), Some(ClusterHealth::Fresh));
    core.handle(Input::Lease(Event::Delete(forged)));
    core.process(after(40_200));
    assert_eq!(core.stats().foreign_writers, foreign(0, 0, 0));
}

#[test]
fn of_a_clusters_two_copies_the_one_in_its_own_namespace_is_merged() {
    let db = ServiceKey::new("shop", "db");
    let (mut core, _) = started_with(shared_records(SharedRecords::Read), &[]);
    // c1's old agent wrote its record into the shared namespace (port 81)...
    let shared = record_in("c1", &db, sim::BROKER_NAMESPACE, &[81]);
    core.handle(Input::Record(Event::Apply(shared)));
    let out = core.process(after(100));
    assert_eq!(import_ports(&out.writes, &db), Some(vec![81]));
    // ...its new one into its own (port 80): that copy counts.
    let own = record_in("c1", &db, "clusterset-broker-c1", &[80]);
    core.handle(Input::Record(Event::Apply(own.clone())));
    let out = core.process(after(200));
    assert_eq!(import_ports(&out.writes, &db), Some(vec![80]));
    // A change of the shared copy changes nothing while the own copy is there.
    let shared = record_in("c1", &db, sim::BROKER_NAMESPACE, &[82]);
    core.handle(Input::Record(Event::Apply(shared)));
    let out = core.process(after(300));
    assert_eq!(import_ports(&out.writes, &db), None, "{:?}", out.writes);
    // Without the own copy, the shared one is merged again.
    core.handle(Input::Record(Event::Delete(own)));
    let out = core.process(after(400));
    assert_eq!(import_ports(&out.writes, &db), Some(vec![82]));
    assert_eq!(core.stats().foreign_writers, foreign(0, 0, 0));
}

/// The record of `shop/web` that c0's agent publishes on its first pass, stored in `namespace`
/// (where an agent of another `--shared-records` mode wrote it).
fn c0_web_record_in(namespace: &str) -> BrokerRecord {
    let web = ServiceKey::new("shop", "web");
    let (_, writes) = started();
    let Some(Write::PublishRecord(record)) = find(&writes, "publish_record", &web) else {
        panic!("{writes:?}")
    };
    let mut record = *record;
    record.metadata.namespace = Some(namespace.to_owned());
    record
}

#[test]
fn an_agent_moves_its_record_and_withdraws_the_old_copy_only_once_the_new_one_is_stored() {
    let web = ServiceKey::new("shop", "web");
    // (mode, where the old copy is, where the agent publishes)
    let cases = [
        (
            SharedRecords::Read,
            sim::BROKER_NAMESPACE,
            "clusterset-broker-c0",
        ),
        (
            SharedRecords::Write,
            "clusterset-broker-c0",
            sim::BROKER_NAMESPACE,
        ),
    ];
    for (mode, old_home, new_home) in cases {
        let old = c0_web_record_in(old_home);
        let (mut core, writes) = started_with(shared_records(mode), std::slice::from_ref(&old));
        let Some(Write::PublishRecord(published)) = find(&writes, "publish_record", &web) else {
            panic!("{mode:?}: {writes:?}")
        };
        assert_eq!(
            published.metadata.namespace.as_deref(),
            Some(new_home),
            "{mode:?}"
        );
        assert!(
            !kinds(&writes, &web).contains(&"withdraw_record"),
            "{mode:?}: {writes:?}"
        );

        // A copy in the new place that is not the desired one (an older version): the old
        // copy stays, the record is published again.
        let mut outdated = record_in("c0", &web, new_home, &[81]);
        outdated.metadata.resource_version = Some("20".into());
        core.handle(Input::Record(Event::Apply(outdated)));
        let out = core.process(after(100));
        assert_eq!(
            kinds(&out.writes, &web)
                .into_iter()
                .filter(|k| k.ends_with("_record"))
                .collect::<Vec<_>>(),
            ["publish_record"],
            "{mode:?}: {:?}",
            out.writes
        );

        // The publication is stored: now the old copy is withdrawn, and only it.
        let mut stored = *published;
        stored.metadata.resource_version = Some("21".into());
        core.handle(Input::Record(Event::Apply(stored)));
        let out = core.process(after(200));
        let broker: Vec<&Write> = out.writes.iter().filter(|w| w.is_broker()).collect();
        assert_eq!(
            broker,
            [&Write::WithdrawRecord {
                key: web.clone(),
                namespace: old_home.to_owned(),
                name: "c0.shop.web".to_owned(),
            }],
            "{mode:?}"
        );

        // Withdrawn: nothing left to do on the hub.
        core.handle(Input::Record(Event::Delete(old)));
        let out = core.process(after(300));
        assert!(
            out.writes.iter().all(|w| !w.is_broker()),
            "{mode:?}: {:?}",
            out.writes
        );
        assert_eq!(core.stats().published_records, 1, "{mode:?}");
        assert_eq!(core.stats().foreign_writers, foreign(0, 0, 0), "{mode:?}");
    }
}

#[test]
fn after_a_restart_a_cluster_whose_lease_ran_out_long_ago_is_dropped_at_once() {
    // The agent starts an hour after c1's last renewal (30 s Lease, drop after 10 min): judged
    // by the Lease's own times (less kube-lease's 5 s skew allowance) c1 went away about an hour
    // ago, so its exports are left out at once instead of after another Lease duration and
    // another drop delay. A c1 renewed 10 s before the start is fresh.
    let c1 = ClusterId::new("c1").unwrap();
    let start = after(3_600_000);
    for (renewed, expected) in [(now(), "dropped"), (after(3_590_000), "fresh")] {
        let config = sim::cluster_config(0, Some(Duration::from_secs(600))).unwrap();
        let mut core = AgentCore::new(config);
        for (kind, inputs) in listings() {
            core.handle(marker(kind, false));
            for input in inputs {
                let input = match input {
                    Input::Lease(Event::InitApply(l))
                        if l.metadata.name.as_deref() == Some("clusterset-agent-c1") =>
                    {
                        let claim = broker::heartbeat_claim(
                            &c1,
                            "agent-c1",
                            sim::BROKER_NAMESPACE,
                            Duration::from_secs(30),
                        );
                        let Heartbeat::Create(lease) = broker::heartbeat(None, &claim, renewed)
                        else {
                            panic!("a new Lease")
                        };
                        Input::Lease(Event::InitApply(*lease))
                    }
                    // This agent's own Lease, renewed as it starts.
                    Input::Lease(Event::InitApply(l))
                        if l.metadata.name.as_deref() == Some("clusterset-agent-c0") =>
                    {
                        let claim = broker::heartbeat_claim(
                            &ClusterId::new("c0").unwrap(),
                            "agent-c0",
                            sim::BROKER_NAMESPACE,
                            Duration::from_secs(30),
                        );
                        let Heartbeat::Create(lease) = broker::heartbeat(None, &claim, start)
                        else {
                            panic!("a new Lease")
                        };
                        Input::Lease(Event::InitApply(*lease))
                    }
                    other => other,
                };
                core.handle(input);
            }
            core.handle(marker(kind, true));
        }
        core.process(start);
        let health = core.cluster_health(&c1);
        match expected {
            "dropped" => assert!(
                matches!(health, Some(ClusterHealth::Dropped { since }) if since < after(60_000)),
                "{health:?}"
            ),
            _ => assert_eq!(health, Some(ClusterHealth::Fresh)),
        }
    }
}

#[test]
fn the_first_heartbeat_replaces_the_listed_lease_even_before_the_first_pass() {
    // The hub manifests create each cluster's Lease and RBAC lets the agent only update it: a
    // heartbeat that comes right after the Leases are listed, before any pass, must replace it.
    let mut core = AgentCore::new(sim::cluster_config(0, None).unwrap());
    for (kind, inputs) in listings() {
        core.handle(marker(kind, false));
        for input in inputs {
            core.handle(input);
        }
        core.handle(marker(kind, true));
    }
    match core.heartbeat(now()) {
        Some(Heartbeat::Replace(lease)) => {
            assert_eq!(kube_lease::holder(&lease), Some("agent-c0"));
        }
        other => panic!("a replace of the listed Lease expected, got {other:?}"),
    }
}

/// A core of `config` that has listed everything of [`listings`], with c0's Lease held by
/// `holder`.
fn listed_with_c0_lease_held_by(mut core: AgentCore, holder: &str) -> AgentCore {
    for (kind, inputs) in listings() {
        core.handle(marker(kind, false));
        for input in inputs {
            core.handle(match input {
                Input::Lease(Event::InitApply(l))
                    if l.metadata.name.as_deref() == Some("clusterset-agent-c0") =>
                {
                    Input::Lease(Event::InitApply(lease_of("c0", holder)))
                }
                other => other,
            });
        }
        core.handle(marker(kind, true));
    }
    core
}

#[test]
fn a_follower_keeps_the_dns_zone_current_but_decides_and_writes_nothing_until_it_leads() {
    let config = sim::cluster_config(0, None).unwrap();
    let mut follower = listed_with_c0_lease_held_by(AgentCore::follower(config), "agent-c0");
    let out = follower.process(now());
    // The DNS zone's sources: the listed import is served.
    assert!(out.zone_synced);
    assert!(
        out.zone_changes.iter().any(|c| matches!(
            c,
            mcs_controller::core::ZoneChange::ServiceImport(i)
                if i.metadata.name.as_deref() == Some("orphan")
        )),
        "{:?}",
        out.zone_changes
    );
    // Nothing decided, nothing written, no heartbeat.
    assert!(out.writes.is_empty(), "{:?}", out.writes);
    assert!(!follower.is_started());
    assert_eq!(follower.heartbeat(now()), None);
    assert_eq!(follower.next_wakeup(), None);
    // A deleted import leaves the zone.
    let orphan = out
        .zone_changes
        .iter()
        .find_map(|c| match c {
            mcs_controller::core::ZoneChange::ServiceImport(i) => Some((**i).clone()),
            _ => None,
        })
        .unwrap();
    follower.handle(Input::ServiceImport(Event::Delete(orphan)));
    let gone = follower.process(after(1_000));
    assert!(
        matches!(
            gone.zone_changes.as_slice(),
            [mcs_controller::core::ZoneChange::ServiceImportDeleted(key)]
                if *key == ServiceKey::new("shop", "orphan")
        ),
        "{:?}",
        gone.zone_changes
    );
    assert!(gone.writes.is_empty());

    // Once it leads, the same pass that a single replica makes: IPs restored, every service
    // reconciled, the record published (its own Lease is held: it is this identity's).
    follower.lead();
    let out = follower.process(after(2_000));
    assert!(follower.is_started());
    let kinds: Vec<&str> = out.writes.iter().map(Write::kind).collect();
    assert!(kinds.contains(&"publish_record"), "{kinds:?}");
    assert!(matches!(
        follower.heartbeat(after(2_000)),
        Some(Heartbeat::Replace(_))
    ));
}

#[test]
fn a_follower_that_observed_a_dead_leaders_lease_takes_it_over_once_the_duration_has_passed() {
    // The leader pod died right after renewing c0's heartbeat Lease (30 s) at `now`. A follower
    // that has watched the Lease since then takes it 30 s after it last changed; a replica
    // that sees it for the first time only when it starts leading must wait a whole duration
    // from then (the holder's own times never count).
    let config = sim::cluster_config(0, None).unwrap();
    let mut watched = listed_with_c0_lease_held_by(AgentCore::follower(config.clone()), "dead-pod");
    watched.process(now());
    watched.process(after(20_000));
    watched.lead();
    watched.process(after(31_000));
    assert_eq!(watched.lease_state(), &LeaseState::NotHeld);
    let Some(Heartbeat::Replace(taken)) = watched.heartbeat(after(31_000)) else {
        panic!("the dead leader's Lease is taken over")
    };
    assert_eq!(kube_lease::holder(&taken), Some("agent-c0"));

    let mut unwatched = listed_with_c0_lease_held_by(AgentCore::follower(config), "dead-pod");
    unwatched.lead();
    unwatched.process(after(31_000));
    assert!(matches!(
        unwatched.lease_state(),
        LeaseState::Blocked { holder, .. } if holder == "dead-pod"
    ));
    assert!(matches!(
        unwatched.heartbeat(after(31_000)),
        Some(Heartbeat::Blocked { .. })
    ));
}

#[test]
fn a_leader_that_steps_down_keeps_serving_the_zone_writes_nothing_and_leads_again_afresh() {
    let config = sim::cluster_config(0, None).unwrap();
    let mut core = listed_with_c0_lease_held_by(AgentCore::follower(config), "agent-c0");
    core.lead();
    let first = core.process(now());
    assert!(core.is_started());
    let publish = first
        .writes
        .iter()
        .find(|w| matches!(w, Write::PublishRecord(_)))
        .cloned()
        .expect("published");
    // The hub stored the record (the watch brings it back), then the replica loses the
    // leader Lease (the runtime steps down between passes: no write is in flight).
    let Write::PublishRecord(stored) = &publish else {
        unreachable!()
    };
    core.handle(Input::Record(Event::Apply((**stored).clone())));
    core.process(after(500));
    let mut core = core.step_down();
    assert!(!core.is_leading());
    assert!(!core.is_started());
    assert_eq!(core.heartbeat(after(1_000)), None);
    let out = core.process(after(1_000));
    assert!(out.writes.is_empty(), "{:?}", out.writes);
    // The zone is still synced and current: a deleted import leaves it.
    let orphan = mcs_types::v1beta1::ServiceImport::new(
        "orphan",
        mcs_types::ServiceImportSpec::new(mcs_types::ServiceImportType::ClusterSetIP, Vec::new()),
    );
    let mut orphan = orphan;
    orphan.metadata.namespace = Some("shop".into());
    core.handle(Input::ServiceImport(Event::Delete(orphan)));
    let out = core.process(after(2_000));
    assert!(
        matches!(
            out.zone_changes.as_slice(),
            [mcs_controller::core::ZoneChange::ServiceImportDeleted(_)]
        ),
        "{:?}",
        out.zone_changes
    );

    // Leading again: it starts afresh, its global IP restored from the stored record, and
    // writes nothing it need not write (the stored record is current).
    core.lead();
    let again = core.process(after(3_000));
    assert!(core.is_started());
    assert!(
        !again
            .writes
            .iter()
            .any(|w| matches!(w, Write::PublishRecord(_))),
        "{:?}",
        again.writes
    );
    assert!(again.problems.is_empty(), "{:?}", again.problems);
    assert_eq!(core.stats().published_records, 1);
}

/// The `Ready` condition of the export status write of `key` among `writes`, if there is one.
fn written_ready(
    writes: &[Write],
    key: &ServiceKey,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    written_condition(writes, key, "Ready")
}

fn written_valid(
    writes: &[Write],
    key: &ServiceKey,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    written_condition(writes, key, "Valid")
}

/// The condition `type_` of the first status written for `key`'s export in `writes`.
fn written_condition(
    writes: &[Write],
    key: &ServiceKey,
    type_: &str,
) -> Option<k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition> {
    writes.iter().find_map(|w| match w {
        Write::ApplyServiceExportStatus { key: k, status } if k == key => {
            status.conditions.iter().find(|c| c.type_ == type_).cloned()
        }
        _ => None,
    })
}

/// Under load the watch of the ServiceExports runs behind the agent's own status writes: the
/// echo of an older write arrives after a newer one went out. The agent must not rebuild the
/// conditions from that older status and stamp `Ready` with a new `lastTransitionTime` when
/// its status has not changed (Kubernetes' condition convention), nor send the newer status
/// again: the older echo is its own write coming back, the newer one is still on its way. One
/// status write per change.
#[test]
fn a_lagging_export_cache_does_not_restamp_the_ready_condition() {
    let web = ServiceKey::new("shop", "web");
    let (mut core, writes) = started();
    let Some(Write::PublishRecord(published)) = find(&writes, "publish_record", &web) else {
        panic!("{writes:?}")
    };
    let Some(Write::ApplyServiceExportStatus {
        status: pending, ..
    }) = find(&writes, "apply_service_export_status", &web)
    else {
        panic!("{writes:?}")
    };
    let ready = written_ready(&writes, &web).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("Unknown", "Pending")
    );

    // The record is stored on the hub: the export turns Ready, stamped at that moment.
    let mut stored = *published;
    stored.metadata.resource_version = Some("21".into());
    core.handle(Input::Record(Event::Apply(stored)));
    let out = core.process(after(100));
    let Some(Write::ApplyServiceExportStatus {
        status: exported, ..
    }) = find(&out.writes, "apply_service_export_status", &web)
    else {
        panic!("{:?}", out.writes)
    };
    let ready = written_ready(&out.writes, &web).unwrap();
    assert_eq!(ready.status, "True");
    assert_eq!(ready.last_transition_time, Time(after(100)));

    // Seconds later the watch delivers the echo of the first write only (Ready=Unknown).
    let mut lagging = sim::service_export(&web, now());
    lagging.metadata.resource_version = Some("30".into());
    lagging.status = Some(pending);
    core.handle(Input::ServiceExport(Event::Apply(lagging)));
    let out = core.process(after(5000));
    assert_eq!(
        find(&out.writes, "apply_service_export_status", &web),
        None,
        "the echo of the first write is ours; the second write is still in flight: {:?}",
        out.writes
    );

    // Then the echo of the newest write: nothing to write.
    let mut current = sim::service_export(&web, now());
    current.metadata.resource_version = Some("31".into());
    current.status = Some(exported);
    core.handle(Input::ServiceExport(Event::Apply(current)));
    let out = core.process(after(6000));
    assert_eq!(
        find(&out.writes, "apply_service_export_status", &web),
        None,
        "{:?}",
        out.writes
    );
}

/// The agent's own first-status wait: a valid export whose record the hub accepts within
/// it gets one status write, `Ready=True`, instead of `Ready=Unknown/Pending` and then
/// `Ready=True`.
#[test]
fn an_export_the_hub_accepts_within_the_first_status_wait_gets_one_status_write() {
    let web = ServiceKey::new("shop", "web");
    let (mut core, writes) = started_with(sim::cluster_config(0, None).unwrap(), &[]);
    let Some(Write::PublishRecord(published)) = find(&writes, "publish_record", &web) else {
        panic!("{writes:?}")
    };
    assert!(
        find(&writes, "apply_service_export_status", &web).is_none(),
        "the first status waits for the record: {writes:?}"
    );
    // The core wakes up when the wait is over, not before.
    let wait_over = now()
        .checked_add(AgentConfig::DEFAULT_FIRST_STATUS_WAIT)
        .unwrap();
    assert!(core.next_wakeup().is_some_and(|at| at <= wait_over));

    // The hub stores the record 1 s later: the first status is Ready=True, and the only one.
    let mut stored = *published;
    stored.metadata.resource_version = Some("21".into());
    core.handle(Input::Record(Event::Apply(stored)));
    let out = core.process(after(1_000));
    let ready = written_ready(&out.writes, &web).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Exported")
    );
    let out = core.process(after(6_000));
    assert!(
        find(&out.writes, "apply_service_export_status", &web).is_none(),
        "{:?}",
        out.writes
    );
}

/// A record the hub has not accepted when the wait is over: the export says
/// `Ready=Unknown/Pending` then, once, and `Ready=True` when the record is stored.
#[test]
fn an_export_whose_record_waits_longer_says_pending_when_the_first_status_wait_is_over() {
    let web = ServiceKey::new("shop", "web");
    let (mut core, writes) = started_with(sim::cluster_config(0, None).unwrap(), &[]);
    let Some(Write::PublishRecord(published)) = find(&writes, "publish_record", &web) else {
        panic!("{writes:?}")
    };
    let wait = u64::try_from(AgentConfig::DEFAULT_FIRST_STATUS_WAIT.as_millis()).unwrap();
    let out = core.process(after(wait - 1));
    assert!(find(&out.writes, "apply_service_export_status", &web).is_none());
    let out = core.process(after(wait));
    let ready = written_ready(&out.writes, &web).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("Unknown", "Pending")
    );
    // Said once: later passes write nothing more until something changes.
    let out = core.process(after(wait + 1_000));
    assert!(find(&out.writes, "apply_service_export_status", &web).is_none());
    let mut stored = *published;
    stored.metadata.resource_version = Some("21".into());
    core.handle(Input::Record(Event::Apply(stored)));
    let out = core.process(after(wait + 2_000));
    let ready = written_ready(&out.writes, &web).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Exported")
    );
}

/// An export seen before its Service (the agent's watches deliver them in their own order):
/// its first status waits for the Service, then for the record, and is `Ready=True` at once:
/// one status write in all, not three.
#[test]
fn an_export_seen_before_its_service_waits_for_it_and_gets_one_status_write() {
    let late = ServiceKey::new("shop", "late");
    let (mut core, _) = started_with(sim::cluster_config(0, None).unwrap(), &[]);
    core.handle(Input::ServiceExport(Event::Apply(sim::service_export(
        &late,
        now(),
    ))));
    let out = core.process(after(100));
    assert!(
        find(&out.writes, "apply_service_export_status", &late).is_none(),
        "the first status waits for the Service: {:?}",
        out.writes
    );

    core.handle(Input::Service(Event::Apply(sim::service(
        &late,
        "10.96.0.9",
        &[80],
    ))));
    let out = core.process(after(200));
    let Some(Write::PublishRecord(published)) = find(&out.writes, "publish_record", &late) else {
        panic!("{:?}", out.writes)
    };
    assert!(find(&out.writes, "apply_service_export_status", &late).is_none());
    let mut stored = *published;
    stored.metadata.resource_version = Some("31".into());
    core.handle(Input::Record(Event::Apply(stored)));
    let out = core.process(after(1_200));
    let statuses: Vec<_> = out
        .writes
        .iter()
        .filter(|w| matches!(w, Write::ApplyServiceExportStatus { key, .. } if *key == late))
        .collect();
    assert_eq!(statuses.len(), 1, "{:?}", out.writes);
    assert_eq!(written_valid(&out.writes, &late).unwrap().status, "True");
    let ready = written_ready(&out.writes, &late).unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Exported")
    );
}

/// A new export whose Service does not come within the first-status wait says
/// `Valid=False/NoService` when the wait is over, once; its Service coming later is published
/// and the export turns `Ready=True`.
#[test]
fn an_export_whose_service_does_not_come_says_no_service_when_the_wait_is_over() {
    let lonely = ServiceKey::new("shop", "lonely");
    let (mut core, _) = started_with(sim::cluster_config(0, None).unwrap(), &[]);
    core.handle(Input::ServiceExport(Event::Apply(sim::service_export(
        &lonely,
        now(),
    ))));
    let out = core.process(now());
    assert!(find(&out.writes, "apply_service_export_status", &lonely).is_none());
    let wait = u64::try_from(AgentConfig::DEFAULT_FIRST_STATUS_WAIT.as_millis()).unwrap();
    let out = core.process(after(wait - 1));
    assert!(find(&out.writes, "apply_service_export_status", &lonely).is_none());
    let wait_over = now()
        .checked_add(AgentConfig::DEFAULT_FIRST_STATUS_WAIT)
        .unwrap();
    assert!(core.next_wakeup().is_some_and(|at| at <= wait_over));
    let out = core.process(after(wait));
    let valid = written_valid(&out.writes, &lonely).unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "NoService")
    );
    let out = core.process(after(wait + 1_000));
    assert!(find(&out.writes, "apply_service_export_status", &lonely).is_none());

    core.handle(Input::Service(Event::Apply(sim::service(
        &lonely,
        "10.96.0.7",
        &[80],
    ))));
    let out = core.process(after(wait + 2_000));
    let Some(Write::PublishRecord(published)) = find(&out.writes, "publish_record", &lonely) else {
        panic!("{:?}", out.writes)
    };
    let mut stored = *published;
    stored.metadata.resource_version = Some("41".into());
    core.handle(Input::Record(Event::Apply(stored)));
    let out = core.process(after(wait + 2_500));
    assert_eq!(written_valid(&out.writes, &lonely).unwrap().status, "True");
    assert_eq!(written_ready(&out.writes, &lonely).unwrap().status, "True");
}

/// The Service of a published export deleted: `Valid=False/NoService` at once (the wait is
/// for new exports only).
#[test]
fn a_published_export_whose_service_goes_says_no_service_at_once() {
    let web = ServiceKey::new("shop", "web");
    let (mut core, writes) = started_with(sim::cluster_config(0, None).unwrap(), &[]);
    let Some(Write::PublishRecord(published)) = find(&writes, "publish_record", &web) else {
        panic!("{writes:?}")
    };
    let mut stored = *published;
    stored.metadata.resource_version = Some("21".into());
    core.handle(Input::Record(Event::Apply(stored)));
    let out = core.process(after(1_000));
    assert_eq!(written_ready(&out.writes, &web).unwrap().status, "True");

    core.handle(Input::Service(Event::Delete(sim::service(
        &web,
        "10.96.0.1",
        &[80],
    ))));
    let out = core.process(after(1_100));
    let valid = written_valid(&out.writes, &web).unwrap();
    assert_eq!(
        (valid.status.as_str(), valid.reason.as_str()),
        ("False", "NoService")
    );
}

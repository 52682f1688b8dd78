//! The diagnosis of services of the recorded member cluster east and of edits of it.

use super::*;
use kube_fake::fixture::{cluster_east as fixture, objects};
use mcs_types::labels::SERVICE_NAME_LABEL;
use mon_failover::MonMapEntry;

fn of<T: serde::de::DeserializeOwned>(values: Vec<serde_json::Value>) -> Vec<T> {
    values
        .into_iter()
        .map(|v| serde_json::from_value(v).unwrap())
        .collect()
}

/// What `gather` returns for `namespace`/`name` of the recorded cluster, built without IO.
fn facts(namespace: &str, name: &str) -> Facts {
    let named = |kind: &str| -> Vec<serde_json::Value> {
        fixture()
            .into_iter()
            .filter(|o| {
                o["kind"] == kind
                    && o["metadata"]["namespace"] == namespace
                    && o["metadata"]["name"] == name
            })
            .collect()
    };
    let service: Option<Service> = of(named("Service")).into_iter().next();
    let slices: Vec<EndpointSlice> = objects::<EndpointSlice>("EndpointSlice", Some(namespace))
        .into_iter()
        .filter(|s| {
            s.metadata
                .labels
                .as_ref()
                .and_then(|l| l.get(SERVICE_NAME_LABEL))
                == Some(&name.to_owned())
        })
        .collect();
    let ceph = service
        .as_ref()
        .and_then(daemon_of)
        .map(|(daemon, rook_service)| {
            let osd_deployment = match &daemon {
                Daemon::Osd(_) => objects::<Deployment>("Deployment", Some(namespace))
                    .into_iter()
                    .find(|d| d.metadata.name.as_deref() == Some(name)),
                Daemon::Mon(_) => None,
            };
            CephFacts {
                daemon,
                rook_service,
                clusters: fixture()
                    .into_iter()
                    .filter(|o| {
                        o["kind"] == "CephCluster" && o["metadata"]["namespace"] == namespace
                    })
                    .collect(),
                mon_endpoints: objects::<ConfigMap>("ConfigMap", Some(namespace))
                    .into_iter()
                    .next(),
                osd_deployment,
                monmap: None,
            }
        });
    Facts {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        service,
        exports: Some(of(named("ServiceExport"))),
        imports: Some(of(named("ServiceImport"))),
        slices,
        ceph,
    }
}

fn zone() -> Zone {
    Zone::default()
}

/// The answers a DNS server gives: `found` for each question, in order.
fn answers(facts: &Facts, found: &[Result<&[&str], DnsFailure>]) -> Vec<DnsAnswer> {
    let names = questions(facts, &zone()).unwrap();
    assert_eq!(names.len(), found.len(), "questions: {names:?}");
    names
        .into_iter()
        .zip(found)
        .map(|(name, answer)| DnsAnswer {
            name,
            answer: answer
                .clone()
                .map(|ips| ips.iter().map(|ip| ip.parse().unwrap()).collect()),
        })
        .collect()
}

/// NXDOMAIN for `name`, with the message of clusterset-dns's resolver.
fn nxdomain(name: &str) -> DnsFailure {
    DnsFailure {
        kind: DnsFailureKind::NxDomain,
        message: format!(
            "{name}: no such name (NXDOMAIN): check that the service is exported (a ServiceExport in its namespace), that the cluster id is right, and for a headless service that it has ready endpoints"
        ),
    }
}

/// `(hop, check, result)` of every check.
fn outcomes(diagnosis: &Diagnosis) -> Vec<(&'static str, String, Outcome)> {
    diagnosis
        .checks
        .iter()
        .map(|c| (c.hop.as_str(), c.check.clone(), c.result))
        .collect()
}

fn check<'a>(diagnosis: &'a Diagnosis, title: &str) -> &'a Check {
    diagnosis
        .checks
        .iter()
        .find(|c| c.check == title)
        .unwrap_or_else(|| panic!("no check {title:?} in {diagnosis:#?}"))
}

use Outcome::{Fail, Pass, Skip};

fn owned(list: &[(&'static str, &str, Outcome)]) -> Vec<(&'static str, String, Outcome)> {
    list.iter()
        .map(|(h, c, o)| (*h, (*c).to_owned(), *o))
        .collect()
}

#[test]
fn a_healthy_service_passes_every_hop() {
    let facts = facts("shop", "web");
    let diagnosis = diagnose(&facts, &answers(&facts, &[Ok(&["243.0.1.1"])]));
    assert_eq!(
        outcomes(&diagnosis),
        owned(&[
            ("service", "Service exists", Pass),
            ("service", "Service is exportable", Pass),
            ("export", "ServiceExport exists", Pass),
            ("export", "ServiceExport is Valid", Pass),
            ("export", "ServiceExport has no Conflict", Pass),
            ("export", "ServiceExport is Ready", Pass),
            ("import", "ServiceImport exists", Pass),
            ("import", "ServiceImport has IPs and ports", Pass),
            ("import", "ServiceImport is Ready", Pass),
            (
                "dns",
                "web.shop.svc.clusterset.local answers the import",
                Pass
            ),
        ])
    );
    assert_eq!(
        (diagnosis.failed, diagnosis.breaks_at.as_deref()),
        (0, None)
    );
    assert_eq!(
        check(&diagnosis, "Service exists").detail,
        "ClusterIP 10.96.20.1, ports http:80/TCP"
    );
    assert_eq!(
        check(&diagnosis, "ServiceImport has IPs and ports").detail,
        "IPs 243.0.1.1, ports http:80/TCP"
    );
    assert!(strip(&render_table(&diagnosis)).ends_with("\nNo problems found (10 checks).\n"));
}

fn strip(text: &str) -> String {
    use std::io::Write as _;
    let mut out = Vec::new();
    anstream::StripStream::new(&mut out)
        .write_all(text.as_bytes())
        .unwrap();
    String::from_utf8(out).unwrap()
}

#[test]
fn a_migrated_mon_passes_the_ceph_hops_too() {
    let facts = facts("rook-ceph", "rook-ceph-mon-a");
    let names: Vec<String> = questions(&facts, &zone())
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(
        names,
        [
            "rook-ceph-mon-a.rook-ceph.svc.clusterset.local",
            "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local"
        ]
    );
    let diagnosis = diagnose(
        &facts,
        &answers(&facts, &[Ok(&["243.0.0.10"]), Ok(&["242.1.0.10"])]),
    );
    assert_eq!(diagnosis.failed, 0, "{diagnosis:#?}");
    let ceph: Vec<(String, Outcome, String)> = diagnosis
        .checks
        .iter()
        .filter(|c| c.hop == Hop::Ceph)
        .map(|c| (c.check.clone(), c.result, c.detail.clone()))
        .collect();
    assert_eq!(
        ceph,
        [
            (
                "mon.a has a global IP".to_owned(),
                Pass,
                "242.1.0.10 (EndpointSlice from cluster east)".to_owned()
            ),
            (
                "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local answers the global IP"
                    .to_owned(),
                Pass,
                "242.1.0.10".to_owned()
            ),
            (
                "rook-ceph-mon-endpoints has mon a at the global IP".to_owned(),
                Pass,
                "a=242.1.0.10:6789".to_owned()
            ),
            (
                "the monmap has mon a at the global IP".to_owned(),
                Skip,
                "pass --monmap FILE with the output of `ceph mon dump -f json` (for example kubectl -n rook-ceph exec deploy/rook-ceph-tools -- ceph mon dump -f json) to compare the monmap".to_owned()
            ),
        ]
    );
}

/// `mon` moved to `ip` (msgr2 and msgr1).
fn at_ip(mut mon: MonMapEntry, ip: &str) -> MonMapEntry {
    for (addr, port) in mon.public_addrs.addrvec.iter_mut().zip([3300, 6789]) {
        addr.addr = format!("{ip}:{port}");
    }
    mon
}

/// The monmap of `tests/fixtures/mon-dump.json`: mon a at its global IP, b at its cluster IP.
fn mon_dump() -> MonMap {
    serde_json::from_str(include_str!("../../../../tests/fixtures/mon-dump.json")).unwrap()
}

#[test]
fn the_monmap_of_ceph_mon_dump_or_quorum_status_is_compared_with_the_global_ip() {
    let monmap = mon_dump();
    let mut facts = facts("rook-ceph", "rook-ceph-mon-a");
    facts.ceph.as_mut().unwrap().monmap = Some(monmap.clone());
    let found = [Ok(&["243.0.0.10"][..]), Ok(&["242.1.0.10"][..])];
    let diagnosis = diagnose(&facts, &answers(&facts, &found));
    let check_ = check(&diagnosis, "the monmap has mon a at the global IP");
    assert_eq!(
        (check_.result, check_.detail.as_str()),
        (
            Pass,
            "a at [v2:242.1.0.10:3300/0,v1:242.1.0.10:6789/0] (epoch 4)"
        )
    );

    // Ceph still has the mon at its cluster IP.
    let mut old = monmap.clone();
    old.mons[0] = at_ip(old.mons[0].clone(), "10.96.12.10");
    facts.ceph.as_mut().unwrap().monmap = Some(old);
    let diagnosis = diagnose(&facts, &answers(&facts, &found));
    let check_ = check(&diagnosis, "the monmap has mon a at the global IP");
    assert_eq!(check_.result, Fail);
    assert_eq!(
        check_.detail,
        "a at [v2:10.96.12.10:3300/0,v1:10.96.12.10:6789/0], the global IP is 242.1.0.10"
    );
    assert!(
        check_
            .cause
            .as_deref()
            .unwrap()
            .contains("a mon cannot change its address")
    );

    // The mon is gone from Ceph.
    let mut gone = monmap;
    gone.mons.remove(0);
    facts.ceph.as_mut().unwrap().monmap = Some(gone);
    let diagnosis = diagnose(&facts, &answers(&facts, &found));
    assert_eq!(
        check(&diagnosis, "the monmap has mon a at the global IP").detail,
        "mon a is not in monmap epoch 4 (it has b)"
    );
}

#[test]
fn a_monmap_entry_without_a_usable_address_fails_the_check_and_says_so() {
    let mut monmap = mon_dump();
    monmap.mons[0].public_addrs.addrvec.clear();
    let mut facts = facts("rook-ceph", "rook-ceph-mon-a");
    facts.ceph.as_mut().unwrap().monmap = Some(monmap);
    let found = [Ok(&["243.0.0.10"][..]), Ok(&["242.1.0.10"][..])];
    let diagnosis = diagnose(&facts, &answers(&facts, &found));
    let check_ = check(&diagnosis, "the monmap has mon a at the global IP");
    assert_eq!(
        (
            check_.result,
            check_.detail.as_str(),
            check_.cause.as_deref()
        ),
        (
            Fail,
            "mon a has no usable public address in the monmap ([])",
            Some("the monmap entry has no usable address")
        )
    );
}

#[test]
fn a_mon_whose_export_failed_breaks_at_the_export_and_says_why_downstream() {
    let facts = facts("rook-ceph", "rook-ceph-mon-b");
    let diagnosis = diagnose(
        &facts,
        &answers(
            &facts,
            &[
                Err(nxdomain("rook-ceph-mon-b.rook-ceph.svc.clusterset.local")),
                Err(nxdomain(
                    "east.rook-ceph-mon-b.rook-ceph.svc.clusterset.local",
                )),
            ],
        ),
    );
    assert_eq!(
        outcomes(&diagnosis),
        owned(&[
            ("service", "Service exists", Pass),
            ("service", "Service is exportable", Pass),
            ("export", "ServiceExport exists", Pass),
            ("export", "ServiceExport is Valid", Pass),
            ("export", "ServiceExport has no Conflict", Pass),
            ("export", "ServiceExport is Ready", Fail),
            ("import", "ServiceImport exists", Fail),
            ("import", "ServiceImport has IPs and ports", Skip),
            ("import", "ServiceImport is Ready", Skip),
            (
                "dns",
                "rook-ceph-mon-b.rook-ceph.svc.clusterset.local answers the import",
                Fail
            ),
            ("ceph", "mon.b has a global IP", Fail),
        ])
    );
    assert_eq!(diagnosis.failed, 4);
    assert_eq!(
        diagnosis.breaks_at.as_deref(),
        Some("export: ServiceExport is Ready")
    );
    let ready = check(&diagnosis, "ServiceExport is Ready");
    assert!(
        ready
            .detail
            .starts_with("False (Failed): No global IP for this export"),
        "{ready:?}"
    );
    assert_eq!(
        ready.cause.as_deref(),
        Some("exporting failed; the message says why")
    );
    assert_eq!(
        check(&diagnosis, "ServiceImport exists").cause.as_deref(),
        Some("the export is not Ready (see above), so no cluster has imported it yet")
    );
    let dns = check(
        &diagnosis,
        "rook-ceph-mon-b.rook-ceph.svc.clusterset.local answers the import",
    );
    assert_eq!(dns.fix.as_deref(), Some("fix the import first (above)"));
    let table = strip(&render_table(&diagnosis));
    assert!(
        table.contains("\nFAIL  export   ServiceExport is Ready: False (Failed): No global IP"),
        "{table}"
    );
    assert!(
        table.contains("\n               cause: exporting failed; the message says why\n"),
        "{table}"
    );
    assert!(
        table.ends_with(
            "4 of 11 checks failed; the service breaks at export: ServiceExport is Ready.\n"
        ),
        "{table}"
    );
}

#[test]
fn an_imported_only_service_skips_the_local_hops() {
    let facts = facts("shop", "api");
    let diagnosis = diagnose(&facts, &answers(&facts, &[Ok(&["243.0.1.2"])]));
    assert_eq!(diagnosis.failed, 0);
    assert_eq!(
        check(&diagnosis, "Service exists").detail,
        "no Service or ServiceExport shop/api here: the service is imported from cluster(s) west"
    );
    let skipped = diagnosis.checks.iter().filter(|c| c.result == Skip).count();
    assert_eq!(skipped, 6);
    assert_eq!(
        check(&diagnosis, "ServiceImport is Ready").detail,
        "no Ready condition (not every MCS implementation writes one)"
    );
}

#[test]
fn a_headless_service_is_compared_with_its_ready_endpoints() {
    let facts = facts("shop", "db");
    let good = diagnose(
        &facts,
        &answers(&facts, &[Ok(&["10.244.2.7", "10.244.1.5"])]),
    );
    assert_eq!(good.failed, 0, "{good:#?}");
    assert_eq!(
        check(&good, "Service exists").detail,
        "ClusterIP (headless), ports pg:5432/TCP"
    );
    // The endpoint that is not ready must not be answered.
    let bad = diagnose(
        &facts,
        &answers(&facts, &[Ok(&["10.244.1.5", "10.244.2.7", "10.244.3.9"])]),
    );
    assert_eq!(
        bad.breaks_at.as_deref(),
        Some("dns: db.shop.svc.clusterset.local answers the import")
    );
}

#[test]
fn a_stale_dns_answer_is_told_apart_from_a_missing_name_and_a_dead_server() {
    let facts = facts("shop", "web");
    let stale = diagnose(&facts, &answers(&facts, &[Ok(&["243.0.9.9"])]));
    let dns = check(&stale, "web.shop.svc.clusterset.local answers the import");
    assert_eq!(dns.result, Fail);
    assert_eq!(dns.detail, "answers 243.0.9.9, the import has 243.0.1.1");
    assert!(
        dns.cause
            .as_deref()
            .unwrap()
            .starts_with("the DNS data differ")
    );
    let missing = diagnose(
        &facts,
        &answers(&facts, &[Err(nxdomain("web.shop.svc.clusterset.local"))]),
    );
    let dns = check(&missing, "web.shop.svc.clusterset.local answers the import");
    assert!(
        dns.cause
            .as_deref()
            .unwrap()
            .starts_with("the DNS server does not have the name although the ServiceImport exists")
    );
    let timeout = DnsFailure {
        kind: DnsFailureKind::NoAnswer,
        message: "web.shop.svc.clusterset.local: no answer after 2 attempts of 300ms each: is the nameserver reachable?".to_owned(),
    };
    let dead = diagnose(&facts, &answers(&facts, &[Err(timeout)]));
    let dns = check(&dead, "web.shop.svc.clusterset.local answers the import");
    assert_eq!(dns.cause.as_deref(), Some("the nameserver did not answer"));
}

#[test]
fn conflicts_invalid_exports_and_external_names_each_say_their_fix() {
    let mut facts = facts("shop", "web");
    let export = &mut facts.exports.as_mut().unwrap()[0];
    let conditions = &mut export.status.as_mut().unwrap().conditions;
    conditions[1].status = "True".to_owned();
    conditions[1].reason = "PortConflict".to_owned();
    conditions[1].message = "Conflicting ports.".to_owned();
    let diagnosis = diagnose(&facts, &answers(&facts, &[Ok(&["243.0.1.1"])]));
    let conflict = check(&diagnosis, "ServiceExport has no Conflict");
    assert_eq!(
        (conflict.result, conflict.detail.as_str()),
        (Fail, "True (PortConflict): Conflicting ports.")
    );
    assert!(
        conflict
            .fix
            .as_deref()
            .unwrap()
            .starts_with("make the properties the reason names")
    );

    let mut external = facts.clone();
    external
        .service
        .as_mut()
        .unwrap()
        .spec
        .as_mut()
        .unwrap()
        .type_ = Some("ExternalName".to_owned());
    let diagnosis = diagnose(&external, &answers(&external, &[Ok(&["243.0.1.1"])]));
    assert_eq!(
        diagnosis.breaks_at.as_deref(),
        Some("service: Service is exportable")
    );

    // A ServiceExport no controller has looked at.
    let mut unprocessed = facts.clone();
    unprocessed.exports.as_mut().unwrap()[0].status = None;
    let diagnosis = diagnose(&unprocessed, &answers(&unprocessed, &[Ok(&["243.0.1.1"])]));
    let valid = check(&diagnosis, "ServiceExport is Valid");
    assert_eq!(
        (valid.result, valid.detail.as_str()),
        (Fail, "no Valid condition")
    );
    assert_eq!(valid.fix.as_deref(), Some(AGENT_HINT));

    // No MCS CRDs at all.
    let mut no_crds = facts.clone();
    no_crds.exports = None;
    no_crds.imports = None;
    let diagnosis = diagnose(
        &no_crds,
        &answers(&no_crds, &[Err(nxdomain("web.shop.svc.clusterset.local"))]),
    );
    let exists = check(&diagnosis, "ServiceExport exists");
    assert_eq!(
        exists.fix.as_deref(),
        Some("mcsctl crds | kubectl apply --server-side -f -")
    );

    // A name nothing knows.
    let nothing = super::tests::facts("shop", "nope");
    let diagnosis = diagnose(
        &nothing,
        &answers(&nothing, &[Err(nxdomain("nope.shop.svc.clusterset.local"))]),
    );
    assert_eq!(
        diagnosis.breaks_at.as_deref(),
        Some("service: Service exists")
    );
    assert!(
        check(&diagnosis, "Service exists")
            .fix
            .as_deref()
            .unwrap()
            .contains("kubectl get services -A | grep nope")
    );
}

#[test]
fn ceph_hops_catch_lighthouse_names_stale_mon_endpoints_and_osd_args() {
    // The DNS server does not answer Rook's per-cluster name.
    let facts = facts("rook-ceph", "rook-ceph-mon-a");
    let diagnosis = diagnose(
        &facts,
        &answers(
            &facts,
            &[
                Ok(&["243.0.0.10"]),
                Err(nxdomain(
                    "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local",
                )),
            ],
        ),
    );
    let per_cluster = check(
        &diagnosis,
        "east.rook-ceph-mon-a.rook-ceph.svc.clusterset.local answers the global IP",
    );
    assert_eq!(per_cluster.result, Fail);
    assert!(
        per_cluster
            .fix
            .as_deref()
            .unwrap()
            .contains("--lighthouse-names")
    );

    // rook-ceph-mon-endpoints still has the mon at its cluster IP.
    let mut stale = facts.clone();
    let ceph = stale.ceph.as_mut().unwrap();
    ceph.mon_endpoints
        .as_mut()
        .unwrap()
        .data
        .as_mut()
        .unwrap()
        .insert(
            "data".to_owned(),
            "a=10.96.12.10:6789,b=10.96.12.11:6789".to_owned(),
        );
    let diagnosis = diagnose(
        &stale,
        &answers(&stale, &[Ok(&["243.0.0.10"]), Ok(&["242.1.0.10"])]),
    );
    let endpoints = check(
        &diagnosis,
        "rook-ceph-mon-endpoints has mon a at the global IP",
    );
    assert_eq!(
        (endpoints.result, endpoints.detail.as_str()),
        (Fail, "a=10.96.12.10:6789, the global IP is 242.1.0.10")
    );
    assert!(
        endpoints
            .fix
            .as_deref()
            .unwrap()
            .contains("mcsctl status -n rook-ceph")
    );

    // An OSD: passes with --public-addr at its global IP, fails without.
    let osd = super::tests::facts("rook-ceph", "rook-ceph-osd-0");
    let diagnosis = diagnose(
        &osd,
        &answers(&osd, &[Ok(&["243.0.0.20"]), Ok(&["242.1.0.20"])]),
    );
    assert_eq!(diagnosis.failed, 0, "{diagnosis:#?}");
    assert_eq!(
        check(&diagnosis, "osd.0 advertises the global IP (--public-addr)").detail,
        "--public-addr=242.1.0.20"
    );
    let mut pod_ip = osd.clone();
    let deployment = pod_ip
        .ceph
        .as_mut()
        .unwrap()
        .osd_deployment
        .as_mut()
        .unwrap();
    let container = &mut deployment
        .spec
        .as_mut()
        .unwrap()
        .template
        .spec
        .as_mut()
        .unwrap()
        .containers[0];
    container.args = Some(vec!["--foreground".to_owned()]);
    let diagnosis = diagnose(
        &pod_ip,
        &answers(&pod_ip, &[Ok(&["243.0.0.20"]), Ok(&["242.1.0.20"])]),
    );
    assert_eq!(
        diagnosis.breaks_at.as_deref(),
        Some("ceph: osd.0 advertises the global IP (--public-addr)")
    );

    // MCS off in the CephCluster: no Ceph hop beyond saying so, and no per-cluster name.
    let mut off = facts.clone();
    off.ceph.as_mut().unwrap().clusters[0]["spec"]["network"]["multiClusterService"]["enabled"] =
        false.into();
    assert_eq!(questions(&off, &zone()).unwrap().len(), 1);
    let diagnosis = diagnose(&off, &answers(&off, &[Ok(&["243.0.0.10"])]));
    assert_eq!(check(&diagnosis, "mon.a has a global IP").result, Skip);
}

#[test]
fn a_service_argument_that_is_no_service_name_says_why_and_what_to_pass() {
    assert!(check_service_name("web").is_ok());
    let error = check_service_name("Bad_Name").unwrap_err();
    assert_eq!(
        error.to_string(),
        "\"Bad_Name\" is not a Service name (invalid service name \"Bad_Name\": must consist of lower case letters, digits or '-', start with a lower case letter and end with a letter or digit (for example 'web-1')): pass the Service's name, and its namespace with -n"
    );
    // The cause is kept, and quoted: a chain prints it once.
    let cause = std::error::Error::source(&error).map(ToString::to_string);
    assert!(cause.is_some_and(|c| error.to_string().contains(&c)));
}

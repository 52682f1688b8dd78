//! The status report on the recorded member cluster east and edits of it.

use super::*;
use kube_fake::fixture::{cluster_east as fixture, objects};

#[test]
fn operator_progress_is_read_with_the_operator_types() {
    // Written by the operator's own types, read back by status.
    let written = CephClusterAddressing::new(
        "my-cluster",
        "rook-ceph",
        mcs_ceph_api::AddressingStatus {
            phase: Phase::Migrating,
            message: "2 OSDs restart with their global IPs".to_owned(),
            ready_daemons: 4,
            daemon_count: 6,
            ..Default::default()
        },
    );
    let document = serde_json::to_value(&written).unwrap();
    let progress = OperatorProgress::of(&document).unwrap().unwrap();
    assert_eq!(progress.phase, "Migrating");
    assert_eq!(progress.message, "2 OSDs restart with their global IPs");
    assert_eq!((progress.ready_daemons, progress.daemon_count), (4, 6));

    let mut no_status = document.clone();
    no_status.as_object_mut().unwrap().remove("status");
    assert_eq!(OperatorProgress::of(&no_status).unwrap(), None);

    let mut newer = document.clone();
    newer["status"]["phase"] = "Rebalancing".into();
    assert_eq!(
        OperatorProgress::of(&newer).unwrap().unwrap().phase,
        "Unknown"
    );

    let mut broken = document;
    broken["status"]["readyDaemons"] = "four".into();
    let error = OperatorProgress::of(&broken).unwrap_err();
    assert!(error.contains("invalid type"), "{error}");
}

/// What `fetch` returns for `namespace` of the recorded cluster, built without IO.
fn fetched(namespace: &str) -> Fetched {
    let in_ns = |kind: &str| -> Vec<serde_json::Value> {
        fixture()
            .into_iter()
            .filter(|o| o["kind"] == kind && o["metadata"]["namespace"] == namespace)
            .collect()
    };
    let ceph_clusters = in_ns("CephCluster");
    let mut ceph_namespaces = BTreeMap::new();
    if !ceph_clusters.is_empty() {
        ceph_namespaces.insert(
            namespace.to_owned(),
            CephNamespace {
                services: objects::<Service>("Service", Some(namespace))
                    .into_iter()
                    .filter(|s| {
                        s.metadata.labels.as_ref().is_some_and(|l| {
                            l.get("ceph_daemon_type")
                                .is_some_and(|t| t == "mon" || t == "osd")
                        })
                    })
                    .collect(),
                mon_endpoints: objects::<ConfigMap>("ConfigMap", Some(namespace))
                    .into_iter()
                    .next(),
                osd_deployments: objects("Deployment", Some(namespace)),
            },
        );
    }
    Fetched {
        scope: Scope::Namespace(namespace.to_owned()),
        ceph_clusters: Some(ceph_clusters),
        addressings: Some(in_ns("CephClusterAddressing")),
        exports: Some(objects("ServiceExport", Some(namespace))),
        imports: Some(objects("ServiceImport", Some(namespace))),
        slices: objects("EndpointSlice", Some(namespace)),
        ceph_namespaces,
    }
}

#[test]
fn a_half_migrated_cluster_shows_per_daemon_addresses_progress_and_problems() {
    let report = report(&fetched("rook-ceph"));
    assert_eq!(report.ceph_clusters.len(), 1);
    let cluster = &report.ceph_clusters[0];
    assert_eq!(
        (
            cluster.name.as_str(),
            cluster.multi_cluster_service,
            cluster.cluster_id.as_deref()
        ),
        ("my-cluster", true, Some("east"))
    );
    /// daemon, cluster IP, global IPs, advertised, on its global IP, export Ready.
    type Row<'a> = (
        &'a str,
        Option<&'a str>,
        String,
        Option<&'a str>,
        Option<bool>,
        bool,
    );
    let rows: Vec<Row> = cluster
        .daemons
        .iter()
        .map(|d| {
            (
                d.daemon.as_str(),
                d.cluster_ip.as_deref(),
                d.global_ips.join(","),
                d.advertised.as_deref(),
                d.on_global_ip,
                d.export.as_ref().is_some_and(|e| e.ready.is_true()),
            )
        })
        .collect();
    assert_eq!(
        rows,
        [
            (
                "mon.a",
                Some("10.96.12.10"),
                "242.1.0.10".to_owned(),
                Some("242.1.0.10:6789"),
                Some(true),
                true
            ),
            (
                "mon.b",
                Some("10.96.12.11"),
                String::new(),
                Some("10.96.12.11:6789"),
                None,
                false
            ),
            (
                "osd.0",
                Some("10.96.13.10"),
                "242.1.0.20".to_owned(),
                Some("242.1.0.20"),
                Some(true),
                true
            ),
        ]
    );
    let migration = &cluster.migration;
    assert_eq!(
        (
            migration.mons_on_global_ips,
            migration.mons,
            migration.osds_on_global_ips,
            migration.osds
        ),
        (1, 2, 1, 1)
    );
    let operator = migration.operator.as_ref().unwrap();
    assert_eq!(
        (
            operator.phase.as_str(),
            operator.ready_daemons,
            operator.daemon_count
        ),
        ("Migrating", 2, 3)
    );
    assert_eq!(
        report.problems,
        [
            "ServiceExport rook-ceph/rook-ceph-mon-b: Ready=False (Failed): No global IP for this export: this cluster has no free address in a global CIDR of the Service's IP families (IPv4); add or enlarge --global-cidr",
            "ServiceExport rook-ceph/rook-ceph-mon-b: no ServiceImport rook-ceph/rook-ceph-mon-b yet: the MCS controller has not imported it (is clusterset-agent running, and is the export Ready?)",
        ]
    );
    let pairs: Vec<(&str, bool, bool)> = report
        .services
        .iter()
        .map(|p| (p.name.as_str(), p.export.is_some(), p.import.is_some()))
        .collect();
    assert_eq!(
        pairs,
        [
            ("rook-ceph-mon-a", true, true),
            ("rook-ceph-mon-b", true, false),
            ("rook-ceph-osd-0", true, true)
        ]
    );
}

#[test]
fn the_table_has_a_row_per_daemon_and_per_pair_and_lists_the_problems() {
    let text = render_table(&report(&fetched("rook-ceph")));
    let plain = strip(&text);
    let lines: Vec<&str> = plain.lines().collect();
    assert_eq!(
        lines[0],
        "CephCluster rook-ceph/my-cluster: MCS enabled, clusterID east"
    );
    assert_eq!(
        lines[1],
        "  migration: mons on global IPs 1/2, OSDs on global IPs 1/1; operator: Migrating, 2/3 daemons on their planned address: mon.b is replaced next (new mon c at 242.1.0.12)"
    );
    let words = |line: &str| {
        line.split_whitespace()
            .map(str::to_owned)
            .collect::<Vec<_>>()
    };
    assert_eq!(
        words(lines[2]),
        [
            "DAEMON",
            "SERVICE",
            "CLUSTER-IP",
            "EXPORT",
            "VALID",
            "READY",
            "CONFLICT",
            "GLOBAL-IP",
            "ADVERTISED",
            "ON-GLOBAL"
        ]
    );
    assert_eq!(
        words(lines[3]),
        [
            "mon.a",
            "rook-ceph-mon-a",
            "10.96.12.10",
            "rook-ceph-mon-a",
            "True",
            "True",
            "False",
            "242.1.0.10",
            "242.1.0.10:6789",
            "yes"
        ]
    );
    assert_eq!(
        words(lines[4]),
        [
            "mon.b",
            "rook-ceph-mon-b",
            "10.96.12.11",
            "rook-ceph-mon-b",
            "True",
            "False",
            "False",
            "-",
            "10.96.12.11:6789",
            "-"
        ]
    );
    assert!(
        plain.contains("\nServiceExports and ServiceImports in namespace rook-ceph\n"),
        "{plain}"
    );
    assert!(
        plain.contains("rook-ceph-mon-b   True    False   False      none"),
        "{plain}"
    );
    assert!(
        plain.contains(
            "\nProblems (2):\n  - ServiceExport rook-ceph/rook-ceph-mon-b: Ready=False (Failed)"
        ),
        "{plain}"
    );
    // Styles are there for a terminal (anstream drops them elsewhere).
    assert!(
        text.contains("\u{1b}[1m\u{1b}[31mFalse\u{1b}[0m"),
        "{text:?}"
    );
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
fn a_healthy_namespace_has_no_problems_and_imported_only_services_are_listed() {
    let report = report(&fetched("shop"));
    assert_eq!(report.problems, Vec::<String>::new());
    assert_eq!(report.notes, ["no CephCluster in namespace shop"]);
    let pairs: Vec<(&str, bool, Option<Vec<String>>)> = report
        .services
        .iter()
        .map(|p| {
            (
                p.name.as_str(),
                p.export.is_some(),
                p.import.as_ref().map(|i| i.clusters.clone()),
            )
        })
        .collect();
    assert_eq!(
        pairs,
        [
            ("api", false, Some(vec!["west".to_owned()])),
            ("db", true, Some(vec!["east".to_owned()])),
            (
                "web",
                true,
                Some(vec!["east".to_owned(), "west".to_owned()])
            ),
        ]
    );
    assert!(strip(&render_table(&report)).ends_with("\nNo problems found.\n"));
}

#[test]
fn missing_exports_crds_and_operators_are_reported() {
    // MCS on, but nothing exported, no MCS CRDs, no operator.
    let mut input = fetched("rook-ceph");
    input.exports = None;
    input.imports = None;
    input.addressings = None;
    input.slices.clear();
    let report = report(&input);
    assert_eq!(
        report.problems,
        [
            "CephCluster rook-ceph/my-cluster: mon.a has no ServiceExport rook-ceph/rook-ceph-mon-a: the operator exports every mon and OSD Service when MCS is enabled",
            "CephCluster rook-ceph/my-cluster: mon.b has no ServiceExport rook-ceph/rook-ceph-mon-b: the operator exports every mon and OSD Service when MCS is enabled",
            "CephCluster rook-ceph/my-cluster: osd.0 has no ServiceExport rook-ceph/rook-ceph-osd-0: the operator exports every mon and OSD Service when MCS is enabled",
            "the MCS CRDs (serviceexports/serviceimports.multicluster.x-k8s.io) are not installed: mcsctl crds | kubectl apply --server-side -f -",
        ]
    );
    let migration = &report.ceph_clusters[0].migration;
    assert_eq!(migration.operator, None);
    assert_eq!(
        migration.operator_not_reported.as_deref(),
        Some(
            "not reported (no CephClusterAddressing resource type: mcs-ceph-operator is not installed)"
        )
    );
    assert!(
        report.ceph_clusters[0]
            .daemons
            .iter()
            .all(|d| d.on_global_ip.is_none())
    );

    // MCS off: the same objects are no problem; no Rook at all is a note.
    let mut off = fetched("rook-ceph");
    off.ceph_clusters.as_mut().unwrap()[0]["spec"]["network"]["multiClusterService"]["enabled"] =
        false.into();
    off.exports = Some(Vec::new());
    let report = super::report(&off);
    assert!(report.problems.is_empty(), "{:?}", report.problems);
    assert!(!report.ceph_clusters[0].multi_cluster_service);
    let mut no_rook = fetched("shop");
    no_rook.ceph_clusters = None;
    assert_eq!(
        super::report(&no_rook).notes,
        ["no CephCluster resource type (ceph.rook.io/v1) on this cluster: Rook is not installed"]
    );
}

#[test]
fn an_mcs_cluster_without_a_cluster_id_is_a_problem() {
    let mut input = fetched("rook-ceph");
    input.ceph_clusters.as_mut().unwrap()[0]["spec"]["network"]["multiClusterService"]
        .as_object_mut()
        .unwrap()
        .remove("clusterID");
    let report = report(&input);
    assert!(
        report.problems.iter().any(|p| p == "CephCluster rook-ceph/my-cluster: multiClusterService is enabled without a clusterID: set spec.network.multiClusterService.clusterID to this cluster's id in the clusterset"),
        "{:?}",
        report.problems
    );
    // Without an id there is no telling which EndpointSlice holds the global IP.
    assert!(
        report.ceph_clusters[0]
            .daemons
            .iter()
            .all(|d| d.global_ips.is_empty())
    );
}

//! The mcs-api conformance checklist items that the control plane decides
//! (/work/shared/docs/reference/mcs-api-spec.md §6.3), as table tests of the pure functions.
//! The numbers in the test names are the checklist's.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::collections::BTreeMap;
use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    ClientIPConfig, Service, ServicePort as CorePort, ServiceSpec, SessionAffinityConfig,
};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointConditions, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use mcs_controller::{
    EndpointMode, ExportRecord, InvalidExport, LocalExport, MergeError, Publication,
    desired_endpoint_slices, desired_import, export_conditions, import_ready_condition,
    merge_exports,
};
use mcs_types::conditions::{ConflictReason, ServiceExportConditionType};
use mcs_types::labels::{
    ENDPOINTSLICE_MANAGED_BY_LABEL, KUBERNETES_ENDPOINTSLICE_CONTROLLER,
    KUBERNETES_SERVICE_NAME_LABEL, SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL,
};
use mcs_types::{ClusterId, ServiceKey};
use mcs_types::{ServiceExportSpec, ServiceImportType};

fn key() -> ServiceKey {
    ServiceKey::new("mcs-conformance-1", "hello")
}

fn port(name: &str, protocol: &str, number: i32) -> CorePort {
    CorePort {
        name: Some(name.into()),
        protocol: Some(protocol.into()),
        port: number,
        ..Default::default()
    }
}

/// The conformance fixture's Service: tcp/42, udp/42, ClientIP affinity 10 s, with labels and
/// annotations that must not leak into the import.
fn hello_service() -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some("hello".into()),
            labels: Some(BTreeMap::from([("dummy-svc".into(), "dummy".into())])),
            annotations: Some(BTreeMap::from([("dummy-svc".into(), "dummy".into())])),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some("10.96.0.10".into()),
            cluster_ips: Some(vec!["10.96.0.10".into()]),
            ip_families: Some(vec!["IPv4".into()]),
            ports: Some(vec![port("tcp", "TCP", 42), port("udp", "UDP", 42)]),
            session_affinity: Some("ClientIP".into()),
            session_affinity_config: Some(SessionAffinityConfig {
                client_ip: Some(ClientIPConfig {
                    timeout_seconds: Some(10),
                }),
            }),
            internal_traffic_policy: Some("Cluster".into()),
            traffic_distribution: Some("PreferClose".into()),
            selector: Some(BTreeMap::from([("app".into(), "hello".into())])),
            ..Default::default()
        }),
        status: None,
    }
}

fn slice(ips: &[&str]) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some("hello-abcde".into()),
            labels: Some(BTreeMap::from([(
                KUBERNETES_SERVICE_NAME_LABEL.into(),
                "hello".into(),
            )])),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: ips
            .iter()
            .map(|ip| Endpoint {
                addresses: vec![(*ip).into()],
                conditions: Some(EndpointConditions {
                    ready: Some(true),
                    serving: Some(true),
                    terminating: Some(false),
                }),
                ..Default::default()
            })
            .collect(),
        ports: Some(vec![
            EndpointPort {
                name: Some("tcp".into()),
                protocol: Some("TCP".into()),
                port: Some(42),
                app_protocol: None,
            },
            EndpointPort {
                name: Some("udp".into()),
                protocol: Some("UDP".into()),
                port: Some(42),
                app_protocol: None,
            },
        ]),
    }
}

struct Export {
    cluster: &'static str,
    created_s: i64,
    service: Option<Service>,
    spec: ServiceExportSpec,
    slices: Vec<EndpointSlice>,
    global_ips: Vec<IpAddr>,
    mode: EndpointMode,
}

impl Export {
    fn new(cluster: &'static str, created_s: i64) -> Self {
        Self {
            cluster,
            created_s,
            service: Some(hello_service()),
            spec: ServiceExportSpec::default(),
            slices: vec![slice(&["10.244.0.5"])],
            global_ips: vec![],
            mode: EndpointMode::PodAddresses,
        }
    }

    fn spec_mut(&mut self) -> &mut ServiceSpec {
        self.service.as_mut().unwrap().spec.as_mut().unwrap()
    }

    fn record(&self) -> Result<ExportRecord, InvalidExport> {
        ExportRecord::from_local(LocalExport {
            cluster_id: &ClusterId::new(self.cluster).unwrap(),
            key: &key(),
            export_created: &Time(Timestamp::from_second(1_800_000_000 + self.created_s).unwrap()),
            export_spec: &self.spec,
            service: self.service.as_ref(),
            endpoint_slices: &self.slices,
            global_ips: &self.global_ips,
            mode: self.mode,
        })
    }
}

fn merge(exports: &[&Export]) -> mcs_controller::MergedService {
    let records: Vec<_> = exports.iter().map(|e| e.record().unwrap()).collect();
    merge_exports(&records).unwrap().unwrap()
}

fn v4(ip: &str) -> IpAddr {
    ip.parse().unwrap()
}

#[test]
fn t01_import_persists_while_any_cluster_exports_and_goes_with_the_last() {
    let (a, b) = (Export::new("cluster-0", 0), Export::new("cluster-1", 2));
    let both = merge(&[&a, &b]);
    assert_eq!(both.cluster_ids().len(), 2);
    // Unexport on cluster 0: the import stays, now from cluster 1 only.
    let only_b = merge(&[&b]);
    assert_eq!(only_b.winner.as_str(), "cluster-1");
    let import = desired_import(&only_b, &[v4("243.0.0.1")]);
    assert_eq!(
        import.status.unwrap().cluster_ids().collect::<Vec<_>>(),
        ["cluster-1"]
    );
    // Unexport on cluster 1 too: nothing to import.
    assert_eq!(merge_exports(&[]).unwrap(), None);
}

#[test]
fn t02_import_carries_exactly_the_exported_labels_and_annotations() {
    let mut a = Export::new("cluster-0", 0);
    a.spec.exported_labels = BTreeMap::from([("dummy-label".into(), "x".into())]);
    a.spec.exported_annotations = BTreeMap::from([("dummy-annotation".into(), "y".into())]);
    let import = desired_import(&merge(&[&a]), &[v4("243.0.0.1")]);
    assert_eq!(import.metadata.labels, Some(a.spec.exported_labels.clone()));
    assert_eq!(
        import.metadata.annotations,
        Some(a.spec.exported_annotations.clone())
    );
}

#[test]
fn t03_different_exported_labels_conflict_on_both_and_the_oldest_wins() {
    let mut a = Export::new("cluster-0", 0);
    a.spec.exported_labels = BTreeMap::from([("owner".into(), "zero".into())]);
    a.spec.exported_annotations = BTreeMap::from([("note".into(), "zero".into())]);
    let mut b = Export::new("cluster-1", 2);
    b.spec.exported_labels =
        BTreeMap::from([("owner".into(), "one".into()), ("extra".into(), "1".into())]);
    b.spec.exported_annotations = BTreeMap::from([("note".into(), "one".into())]);
    let merged = merge(&[&b, &a]);
    assert!(merged.conflicts.contains(ConflictReason::Labels));
    assert!(merged.conflicts.contains(ConflictReason::Annotations));
    let import = desired_import(&merged, &[]);
    let labels = import.metadata.labels.unwrap();
    assert_eq!(labels.get("owner").map(String::as_str), Some("zero"));
    assert!(
        !labels.contains_key("extra"),
        "whole-map precedence, no per-key merge"
    );
    for cluster in ["cluster-0", "cluster-1"] {
        let conditions = export_conditions(Ok(()), Some(&merged), &Publication::Published);
        let conflict = conditions
            .set
            .iter()
            .find(|c| c.type_ == "Conflict")
            .unwrap();
        assert_eq!(conflict.status.as_str(), "True", "{cluster}");
        assert_eq!(conflict.reason, "LabelsConflict,AnnotationsConflict");
    }
}

#[test]
fn t04_a_clusterip_export_is_valid_and_imported_as_clustersetip() {
    let a = Export::new("cluster-0", 0);
    let merged = merge(&[&a]);
    let conditions = export_conditions(Ok(()), Some(&merged), &Publication::Published);
    let valid = &conditions.set[0];
    assert_eq!(
        (
            valid.type_.as_str(),
            valid.status.as_str(),
            valid.reason.as_str()
        ),
        ("Valid", "True", "Valid")
    );
    assert_eq!(
        desired_import(&merged, &[]).spec.type_,
        ServiceImportType::ClusterSetIP
    );
    let ready = conditions.set.iter().find(|c| c.type_ == "Ready").unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_str()),
        ("True", "Exported")
    );
}

#[test]
fn t05_to_t07_affinity_and_traffic_fields_equal_the_services() {
    let a = Export::new("cluster-0", 0);
    let spec = desired_import(&merge(&[&a]), &[v4("243.0.0.1")]).spec;
    assert_eq!(spec.session_affinity.as_deref(), Some("ClientIP"));
    assert_eq!(
        spec.session_affinity_config
            .unwrap()
            .client_ip
            .unwrap()
            .timeout_seconds,
        Some(10)
    );
    assert_eq!(spec.internal_traffic_policy.as_deref(), Some("Cluster"));
    assert_eq!(spec.traffic_distribution.as_deref(), Some("PreferClose"));
}

#[test]
fn t08_ips_match_ip_families_in_order() {
    let mut a = Export::new("cluster-0", 0);
    a.spec_mut().ip_families = Some(vec!["IPv6".into(), "IPv4".into()]);
    let merged = merge(&[&a]);
    // The allocator's order does not matter: ips follow ipFamilies.
    let import = desired_import(&merged, &[v4("243.0.0.1"), "fd00:243::1".parse().unwrap()]);
    assert_eq!(import.spec.ip_families, ["IPv6", "IPv4"]);
    assert_eq!(import.spec.ips, ["fd00:243::1", "243.0.0.1"]);
    let ips = import.spec.parsed_ips().unwrap();
    assert_eq!(ips.len(), import.spec.ip_families.len());
    assert_eq!(
        import_ready_condition(&merged, &[v4("243.0.0.1"), "fd00:243::1".parse().unwrap()]).reason,
        "Ready"
    );
    // A cluster without an IPv6 clusterset range says so.
    let missing = import_ready_condition(&merged, &[v4("243.0.0.1")]);
    assert_eq!(
        (missing.status.as_str(), missing.reason.as_str()),
        ("False", "IPFamilyNotSupported")
    );
    assert!(missing.message.contains("IPv6"), "{}", missing.message);
}

#[test]
fn t09_ports_equal_the_services() {
    let mut a = Export::new("cluster-0", 0);
    a.spec_mut().ports = Some(vec![
        CorePort {
            app_protocol: Some("kubernetes.io/h2c".into()),
            ..port("tcp", "TCP", 42)
        },
        CorePort {
            protocol: None, // defaults to TCP
            ..port("http", "TCP", 80)
        },
    ]);
    let ports = desired_import(&merge(&[&a]), &[]).spec.ports;
    let view: Vec<_> = ports
        .iter()
        .map(|p| {
            (
                p.name.as_deref(),
                p.protocol.as_deref(),
                p.port,
                p.app_protocol.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        view,
        [
            (Some("tcp"), Some("TCP"), 42, Some("kubernetes.io/h2c")),
            (Some("http"), Some("TCP"), 80, None)
        ]
    );
}

#[test]
fn t10_an_extra_port_is_a_union_with_port_conflict() {
    let a = Export::new("cluster-0", 0);
    let mut b = Export::new("cluster-1", 2);
    b.spec_mut()
        .ports
        .as_mut()
        .unwrap()
        .push(port("stcp", "SCTP", 142));
    let merged = merge(&[&a, &b]);
    assert!(merged.conflicts.contains(ConflictReason::Port));
    let names: Vec<_> = merged
        .ports
        .iter()
        .map(|p| p.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["tcp", "udp", "stcp"]);
    assert!(
        merged.conflict_message.contains("1/2 clusters disagree"),
        "{}",
        merged.conflict_message
    );
}

#[test]
fn t11_a_changed_port_number_keeps_the_oldest_ports() {
    let a = Export::new("cluster-0", 0);
    let mut b = Export::new("cluster-1", 2);
    b.spec_mut().ports = Some(vec![port("tcp", "TCP", 43), port("udp", "UDP", 42)]);
    let merged = merge(&[&b, &a]);
    assert!(merged.conflicts.contains(ConflictReason::Port));
    let view: Vec<_> = merged
        .ports
        .iter()
        .map(|p| (p.name.clone().unwrap(), p.port))
        .collect();
    assert_eq!(view, [("tcp".to_owned(), 42), ("udp".to_owned(), 42)]);
}

#[test]
fn t12_t13_headless_imports_are_headless_without_ips_but_with_families() {
    let mut a = Export::new("cluster-0", 0);
    a.spec_mut().cluster_ip = Some("None".into());
    a.spec_mut().cluster_ips = Some(vec!["None".into()]);
    let merged = merge(&[&a]);
    let import = desired_import(&merged, &[v4("243.0.0.1")]);
    assert_eq!(import.spec.type_, ServiceImportType::Headless);
    assert!(import.spec.ips.is_empty());
    assert_eq!(import.spec.ip_families, ["IPv4"]);
    assert_eq!(import_ready_condition(&merged, &[]).reason, "Ready");
}

#[test]
fn t14_externalname_is_invalid_and_not_published() {
    let mut a = Export::new("cluster-0", 0);
    a.spec_mut().type_ = Some("ExternalName".into());
    let err = a.record().unwrap_err();
    let conditions = export_conditions(Err(&err), None, &Publication::Pending);
    let valid = &conditions.set[0];
    assert_eq!(
        (
            valid.type_.as_str(),
            valid.status.as_str(),
            valid.reason.as_str()
        ),
        ("Valid", "False", "InvalidServiceType")
    );
    assert!(
        conditions
            .remove
            .contains(&ServiceExportConditionType::Conflict)
    );

    let mut missing = Export::new("cluster-0", 0);
    missing.service = None;
    let err = missing.record().unwrap_err();
    assert_eq!(err.condition().reason, "NoService");
    assert_eq!(
        err.to_string(),
        "Service mcs-conformance-1/hello not found: create a Service with the same name and namespace as the ServiceExport"
    );
}

#[test]
fn t15_clusterip_and_headless_conflict_and_the_oldest_type_wins() {
    let a = Export::new("cluster-0", 0);
    let mut b = Export::new("cluster-1", 2);
    b.spec_mut().cluster_ip = Some("None".into());
    let merged = merge(&[&b, &a]);
    assert!(merged.conflicts.contains(ConflictReason::Type));
    assert_eq!(merged.service_type, ServiceImportType::ClusterSetIP);
    assert!(
        merged
            .conflict_message
            .contains("Conflicting type. Using \"ClusterSetIP\" from oldest service export in \"cluster-0\". 1/2 clusters disagree."),
        "{}",
        merged.conflict_message
    );
}

/// The `Conflict` condition an exporter of `merged` writes: (status, reason, message).
fn conflict_condition(merged: &mcs_controller::MergedService) -> (String, String, String) {
    let conditions = export_conditions(Ok(()), Some(merged), &Publication::Published);
    let conflict = conditions
        .set
        .into_iter()
        .find(|c| c.type_ == "Conflict")
        .unwrap();
    (
        conflict.status.as_str().to_owned(),
        conflict.reason,
        conflict.message,
    )
}

fn reasons(merged: &mcs_controller::MergedService) -> Vec<ConflictReason> {
    merged.conflicts.iter().collect()
}

/// The port conflict message for two clusters with cluster-0 oldest (the other half of the
/// combined-conflict cases below).
const PORT_MESSAGE_1_OF_2: &str = "Conflicting ports. Using the union of all clusters' ports; on a name or protocol/port clash the oldest service export (in \"cluster-0\") wins. 1/2 clusters disagree.";

#[test]
fn t06_a_different_internal_traffic_policy_conflicts_and_the_oldest_wins() {
    let a = Export::new("cluster-0", 0);
    let mut b = Export::new("cluster-1", 2);
    b.spec_mut().internal_traffic_policy = Some("Local".into());
    let merged = merge(&[&b, &a]);
    assert_eq!(reasons(&merged), [ConflictReason::InternalTrafficPolicy]);
    assert_eq!(
        desired_import(&merged, &[])
            .spec
            .internal_traffic_policy
            .as_deref(),
        Some("Cluster")
    );
    let message = "Conflicting internalTrafficPolicy. Using \"Cluster\" from oldest service export in \"cluster-0\". 1/2 clusters disagree.";
    assert_eq!(
        conflict_condition(&merged),
        (
            "True".to_owned(),
            "InternalTrafficPolicyConflict".to_owned(),
            message.to_owned()
        )
    );

    // With a port conflict too: reasons in specification order (ports first) whatever the
    // input order, one message line per reason in the same order.
    b.spec_mut()
        .ports
        .as_mut()
        .unwrap()
        .push(port("stcp", "SCTP", 142));
    for merged in [merge(&[&a, &b]), merge(&[&b, &a])] {
        assert_eq!(
            conflict_condition(&merged),
            (
                "True".to_owned(),
                "PortConflict,InternalTrafficPolicyConflict".to_owned(),
                format!("{PORT_MESSAGE_1_OF_2}\n{message}")
            )
        );
    }
}

#[test]
fn t07_a_different_traffic_distribution_conflicts_and_the_oldest_wins() {
    let a = Export::new("cluster-0", 0);
    let mut b = Export::new("cluster-1", 2);
    b.spec_mut().traffic_distribution = None;
    let merged = merge(&[&b, &a]);
    assert_eq!(reasons(&merged), [ConflictReason::TrafficDistribution]);
    assert_eq!(
        desired_import(&merged, &[])
            .spec
            .traffic_distribution
            .as_deref(),
        Some("PreferClose")
    );
    let message = "Conflicting trafficDistribution. Using \"PreferClose\" from oldest service export in \"cluster-0\". 1/2 clusters disagree.";
    assert_eq!(
        conflict_condition(&merged),
        (
            "True".to_owned(),
            "TrafficDistributionConflict".to_owned(),
            message.to_owned()
        )
    );

    // With an exported-labels conflict too: LabelsConflict comes first.
    b.spec.exported_labels = BTreeMap::from([("team".into(), "one".into())]);
    for merged in [merge(&[&a, &b]), merge(&[&b, &a])] {
        assert_eq!(
            conflict_condition(&merged),
            (
                "True".to_owned(),
                "LabelsConflict,TrafficDistributionConflict".to_owned(),
                format!(
                    "Conflicting exportedLabels. Using {{}} from oldest service export in \"cluster-0\". 1/2 clusters disagree.\n{message}"
                )
            )
        );
    }
}

#[test]
fn t08_different_ip_families_conflict_and_the_oldest_wins() {
    let a = Export::new("cluster-0", 0);
    let mut b = Export::new("cluster-1", 2);
    b.spec_mut().ip_families = Some(vec!["IPv4".into(), "IPv6".into()]);
    let mut c = Export::new("cluster-2", 4);
    c.spec_mut().ip_families = Some(vec!["IPv6".into()]);
    let merged = merge(&[&c, &b, &a]);
    assert_eq!(reasons(&merged), [ConflictReason::IpFamily]);
    let import = desired_import(&merged, &[v4("243.0.0.1"), "fd00:243::1".parse().unwrap()]);
    assert_eq!(import.spec.ip_families, ["IPv4"]);
    assert_eq!(import.spec.ips, ["243.0.0.1"]);
    let message = "Conflicting ipFamilies. Using [\"IPv4\"] from oldest service export in \"cluster-0\". 2/3 clusters disagree.";
    assert_eq!(
        conflict_condition(&merged),
        (
            "True".to_owned(),
            "IPFamilyConflict".to_owned(),
            message.to_owned()
        )
    );

    // With an internalTrafficPolicy conflict too (on one of the three): IPFamilyConflict,
    // last in specification order, comes last.
    c.spec_mut().internal_traffic_policy = Some("Local".into());
    for merged in [merge(&[&a, &b, &c]), merge(&[&c, &a, &b])] {
        assert_eq!(
            conflict_condition(&merged),
            (
                "True".to_owned(),
                "InternalTrafficPolicyConflict,IPFamilyConflict".to_owned(),
                format!(
                    "Conflicting internalTrafficPolicy. Using \"Cluster\" from oldest service export in \"cluster-0\". 1/3 clusters disagree.\n{message}"
                )
            )
        );
    }
}

#[test]
fn t16_endpoint_slices_have_the_mcs_labels_and_one_source_cluster_each() {
    let a = Export::new("cluster-0", 0);
    let mut b = Export::new("cluster-1", 2);
    b.slices = vec![slice(&["10.244.0.5", "10.244.0.6"])];
    let slices = desired_endpoint_slices(&merge(&[&a, &b]));
    assert_eq!(slices.len(), 2);
    for s in &slices {
        let labels = s.metadata.labels.as_ref().unwrap();
        assert_eq!(labels[SERVICE_NAME_LABEL], "hello");
        assert!(labels.contains_key(SOURCE_CLUSTER_LABEL));
        assert_ne!(
            labels[ENDPOINTSLICE_MANAGED_BY_LABEL],
            KUBERNETES_ENDPOINTSLICE_CONTROLLER
        );
        // Never the exported Service's own name (conformance test 20 counts that Service's
        // endpoints by it); the derived Service's, so that kube-proxy serves the clusterset IP.
        assert_eq!(
            labels
                .get(KUBERNETES_SERVICE_NAME_LABEL)
                .map(String::as_str),
            Some("clusterset-hello")
        );
        assert_eq!(s.address_type, "IPv4");
        assert!(!s.endpoints.is_empty());
    }
    let from_b = slices
        .iter()
        .find(|s| s.metadata.labels.as_ref().unwrap()[SOURCE_CLUSTER_LABEL] == "cluster-1")
        .unwrap();
    assert_eq!(from_b.endpoints.len(), 2);
    // Endpoint conditions are kept as published.
    assert_eq!(
        from_b.endpoints[0].conditions.as_ref().unwrap().serving,
        Some(true)
    );
}

#[test]
fn ties_on_creation_time_are_broken_by_cluster_id() {
    let mut a = Export::new("zeta", 0);
    a.spec_mut().session_affinity = Some("None".into());
    let b = Export::new("alpha", 0);
    let merged = merge(&[&a, &b]);
    assert_eq!(merged.winner.as_str(), "alpha");
    assert_eq!(merged.session_affinity, "ClientIP");
    assert!(merged.conflicts.contains(ConflictReason::SessionAffinity));
    assert!(
        merged
            .conflicts
            .contains(ConflictReason::SessionAffinityConfig)
    );
}

#[test]
fn strict_port_conflict_traffic_only_reaches_clusters_with_the_port() {
    // Cluster 1 names its port tcp2/4242: port 42 must only reach cluster 0, 4242 only cluster 1.
    let a = Export::new("cluster-0", 0);
    let mut b = Export::new("cluster-1", 2);
    b.spec_mut().ports = Some(vec![port("tcp2", "TCP", 4242)]);
    b.slices[0].ports = Some(vec![EndpointPort {
        name: Some("tcp2".into()),
        protocol: Some("TCP".into()),
        port: Some(42),
        app_protocol: None,
    }]);
    let merged = merge(&[&a, &b]);
    let names: Vec<_> = merged
        .ports
        .iter()
        .map(|p| p.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["tcp", "udp", "tcp2"]);
    for s in desired_endpoint_slices(&merged) {
        let cluster = s.metadata.labels.as_ref().unwrap()[SOURCE_CLUSTER_LABEL].clone();
        let ports: Vec<_> = s
            .ports
            .unwrap()
            .into_iter()
            .map(|p| p.name.unwrap())
            .collect();
        match cluster.as_str() {
            "cluster-0" => assert_eq!(ports, ["tcp", "udp"]),
            "cluster-1" => assert_eq!(ports, ["tcp2"]),
            other => panic!("unexpected cluster {other}"),
        }
    }
}

#[test]
fn global_ingress_publishes_the_global_ip_with_aggregate_conditions() {
    let mut a = Export::new("east", 0);
    a.mode = EndpointMode::GlobalIngress;
    a.global_ips = vec![v4("242.1.0.11")];
    a.slices[0].endpoints[0].conditions = Some(EndpointConditions {
        ready: Some(false),
        serving: Some(true),
        terminating: Some(true),
    });
    let record = a.record().unwrap();
    assert_eq!(record.endpoints.len(), 1);
    let endpoint = &record.endpoints[0].endpoints[0];
    assert_eq!(endpoint.addresses, ["242.1.0.11"]);
    let conditions = endpoint.conditions.as_ref().unwrap();
    assert_eq!(
        (conditions.ready, conditions.serving, conditions.terminating),
        (Some(false), Some(true), Some(true))
    );
    // Ports are the Service ports: the gateway maps the global IP to the Service.
    let ports: Vec<_> = record.endpoints[0].ports.iter().map(|p| p.port).collect();
    assert_eq!(ports, [Some(42), Some(42)]);
}

#[test]
fn large_endpoint_sets_are_split_into_slices_with_unique_names() {
    let mut a = Export::new("cluster-0", 0);
    let ips: Vec<String> = (0..2500)
        .map(|i| format!("10.244.{}.{}", i / 250, i % 250 + 1))
        .collect();
    let refs: Vec<&str> = ips.iter().map(String::as_str).collect();
    a.slices = vec![slice(&refs)];
    let slices = desired_endpoint_slices(&merge(&[&a]));
    let sizes: Vec<_> = slices.iter().map(|s| s.endpoints.len()).collect();
    assert_eq!(sizes, [1000, 1000, 500]);
    let names: std::collections::BTreeSet<_> = slices
        .iter()
        .map(|s| s.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names.len(), 3);
}

#[test]
fn slice_names_do_not_collide_across_name_and_cluster_boundaries() {
    // "a-b" from cluster "c" and "a" from cluster "b-c" would both read "a-b-c".
    let mut one = Export::new("c", 0);
    one.slices = vec![slice(&["10.0.0.1"])];
    let r1 = ExportRecord {
        service_key: ServiceKey::new("ns", "a-b"),
        ..one.record().unwrap()
    };
    let two = Export::new("b-c", 0);
    let r2 = ExportRecord {
        service_key: ServiceKey::new("ns", "a"),
        ..two.record().unwrap()
    };
    let n1 = desired_endpoint_slices(&merge_exports(&[r1]).unwrap().unwrap())[0]
        .metadata
        .name
        .clone();
    let n2 = desired_endpoint_slices(&merge_exports(&[r2]).unwrap().unwrap())[0]
        .metadata
        .name
        .clone();
    assert_ne!(n1, n2);
}

#[test]
fn records_of_mixed_services_or_duplicate_clusters_are_rejected() {
    let a = Export::new("cluster-0", 0).record().unwrap();
    let other = ExportRecord {
        service_key: ServiceKey::new("other", "svc"),
        cluster_id: ClusterId::new("cluster-1").unwrap(),
        ..a.clone()
    };
    assert!(matches!(
        merge_exports(&[a.clone(), other]),
        Err(MergeError::MixedServices { .. })
    ));
    let err = merge_exports(&[a.clone(), a]).unwrap_err();
    assert!(err.to_string().contains("published two records"), "{err}");
}

#[test]
fn records_round_trip_through_json_for_the_broker() {
    let mut a = Export::new("east", 0);
    a.global_ips = vec![v4("242.1.0.11")];
    a.spec.exported_labels = BTreeMap::from([("k".into(), "v".into())]);
    let record = a.record().unwrap();
    let json = serde_json::to_string(&record).unwrap();
    assert_eq!(serde_json::from_str::<ExportRecord>(&json).unwrap(), record);
    let bad = json.replace("\"east\"", "\"East_1\"");
    let err = serde_json::from_str::<ExportRecord>(&bad).unwrap_err();
    assert!(
        err.to_string().contains("invalid cluster id \"East_1\""),
        "{err}"
    );
}

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The plain manifests in deploy/mcs-ceph-operator: the CRD is exactly what the binary prints,
//! the RBAC grants exactly what the operator reads and writes (no wildcards), and the
//! Deployment runs one non-root replica with a read-only root file system and probes on the
//! operator's HTTP endpoints.

use std::collections::BTreeSet;

use serde_json::Value;

const DIR: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/mcs-ceph-operator"
);

fn documents(file: &str) -> Vec<Value> {
    let text = std::fs::read_to_string(format!("{DIR}/{file}")).unwrap();
    serde_saphyr::from_multiple::<Value>(&text).unwrap()
}

fn of_kind<'a>(documents: &'a [Value], kind: &str) -> &'a Value {
    documents
        .iter()
        .find(|d| d["kind"] == kind)
        .unwrap_or_else(|| panic!("no {kind} in operator.yaml"))
}

#[test]
fn the_crd_file_is_what_the_binary_prints() {
    let file = std::fs::read_to_string(format!("{DIR}/crd.yaml")).unwrap();
    assert_eq!(
        file,
        mcs_ceph_operator::cli::crd_yaml().unwrap(),
        "regenerate with: cargo run -p mcs-ceph-operator -- crd > deploy/mcs-ceph-operator/crd.yaml"
    );
}

#[test]
fn rbac_grants_exactly_what_the_operator_uses_and_no_wildcard() {
    let docs = documents("operator.yaml");
    let role = of_kind(&docs, "ClusterRole");
    let mut granted = BTreeSet::new();
    for rule in role["rules"].as_array().unwrap() {
        for field in ["apiGroups", "resources", "verbs"] {
            for value in rule[field].as_array().unwrap() {
                assert!(!value.as_str().unwrap().contains('*'), "wildcard in {rule}");
            }
        }
        assert!(rule.get("nonResourceURLs").is_none());
        for group in rule["apiGroups"].as_array().unwrap() {
            for resource in rule["resources"].as_array().unwrap() {
                for verb in rule["verbs"].as_array().unwrap() {
                    granted.insert(format!(
                        "{}/{} {}",
                        group.as_str().unwrap(),
                        resource.as_str().unwrap(),
                        verb.as_str().unwrap()
                    ));
                }
            }
        }
    }
    // The watches of runtime.rs (get/list/watch), the server-side applies of kube_io.rs
    // (create/patch for the operator's own objects), and kube-runtime's Event recorder (create, patch for a series).
    let watch = ["get", "list", "watch"];
    let mut needed = BTreeSet::new();
    for resource in [
        "ceph.rook.io/cephclusters",
        "/configmaps",
        "apps/deployments",
        "multicluster.x-k8s.io/serviceimports",
        "/services",
        "multicluster.x-k8s.io/serviceexports",
        "clusterset.io/cephclusteraddressings",
    ] {
        for verb in watch {
            needed.insert(format!("{resource} {verb}"));
        }
    }
    for resource in [
        "/services",
        "multicluster.x-k8s.io/serviceexports",
        "clusterset.io/cephclusteraddressings",
        "events.k8s.io/events",
    ] {
        for verb in ["create", "patch"] {
            needed.insert(format!("{resource} {verb}"));
        }
    }
    // Server-side apply to objects Rook made (rook_objects.rs): patch, never create; the
    // Secret is never read.
    for resource in ["apps/deployments", "/configmaps", "/secrets"] {
        needed.insert(format!("{resource} patch"));
    }
    assert_eq!(granted, needed);
    let binding = of_kind(&docs, "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], "mcs-ceph-operator");
    assert_eq!(binding["subjects"][0]["name"], "mcs-ceph-operator");
}

#[test]
fn the_deployment_is_one_locked_down_replica_with_probes() {
    let docs = documents("operator.yaml");
    let deployment = of_kind(&docs, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 1, "no leader election yet");
    let pod = &deployment["spec"]["template"]["spec"];
    assert_eq!(pod["serviceAccountName"], "mcs-ceph-operator");
    assert_eq!(pod["securityContext"]["runAsNonRoot"], true);
    let container = &pod["containers"][0];
    let security = &container["securityContext"];
    assert_eq!(security["readOnlyRootFilesystem"], true);
    assert_eq!(security["allowPrivilegeEscalation"], false);
    assert_eq!(security["capabilities"]["drop"], serde_json::json!(["ALL"]));
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["ports"][0]["containerPort"], 8080);
    let listen = container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "MCS_CEPH_LISTEN")
        .unwrap();
    assert_eq!(listen["value"], "0.0.0.0:8080");
    // The arguments parse.
    let args: Vec<String> = std::iter::once("mcs-ceph-operator".to_owned())
        .chain(
            container["args"]
                .as_array()
                .unwrap()
                .iter()
                .map(|a| a.as_str().unwrap().to_owned()),
        )
        .collect();
    use clap::Parser;
    mcs_ceph_operator::cli::Cli::try_parse_from(args).unwrap();
}

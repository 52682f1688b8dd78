#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The plain manifests in deploy/mcs-ceph-operator: the CRD is exactly what the binary prints,
//! the RBAC grants exactly what the operator reads and writes (no wildcards), and the
//! Deployment runs two non-root replicas with leader election, a read-only root file system and
//! probes on the operator's HTTP endpoints. The Helm chart in deploy/helm/mcs-ceph-operator,
//! rendered and linted by the real Helm 4 (`kube_fake::helm`; these tests fail, naming `bash
//! tests/k8s-tools/build.sh helm`, without it), passes `helm lint --strict` with the defaults
//! and the values of the docs' examples, and renders, with its default values, exactly these
//! objects plus its CRD (the binary's, kept on `helm uninstall`); every object it renders, with
//! every option on, passes the API server's rules. The Dockerfile builds and runs this binary as
//! a non-root user.

use std::collections::BTreeSet;
use std::path::Path;

use kube_fake::chart::{self, Rendered};
use kube_fake::helm::helm;
use serde_json::{Value, json};

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

/// What regenerates a copy of the CRD.
const CRD_COMMAND: &str = "cargo run -p mcs-ceph-operator -- crd";

#[test]
fn the_crd_file_is_what_the_binary_prints() {
    kube_fake::crd::assert_committed(
        "deploy/mcs-ceph-operator/crd.yaml",
        &mcs_ceph_operator::cli::crd_yaml().unwrap(),
        CRD_COMMAND,
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
                    let grant = format!(
                        "{}/{} {}",
                        group.as_str().unwrap(),
                        resource.as_str().unwrap(),
                        verb.as_str().unwrap()
                    );
                    match rule["resourceNames"].as_array() {
                        Some(names) => {
                            for name in names {
                                granted.insert(format!("{grant} {}", name.as_str().unwrap()));
                            }
                        }
                        None => {
                            granted.insert(grant);
                        }
                    }
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
    // The mon migration (mon_migration.rs): mon and canary Deployments applied (create),
    // scaled and deleted; the replaced mon's Service and ServiceExport deleted; the admin key
    // read from the rook-ceph-mon Secret, by name only.
    needed.insert("apps/deployments create".to_owned());
    for resource in [
        "apps/deployments",
        "/services",
        "multicluster.x-k8s.io/serviceexports",
    ] {
        needed.insert(format!("{resource} delete"));
    }
    needed.insert("/secrets get rook-ceph-mon".to_owned());
    // PVC-backed mons: the replaced mon's claim read, the new mon's applied, the old deleted.
    for verb in ["get", "create", "patch", "delete"] {
        needed.insert(format!("/persistentvolumeclaims {verb}"));
    }
    assert_eq!(granted, needed);
    let binding = of_kind(&docs, "ClusterRoleBinding");
    assert_eq!(binding["roleRef"]["name"], "mcs-ceph-operator");
    assert_eq!(binding["subjects"][0]["name"], "mcs-ceph-operator");
}

#[test]
fn the_lease_role_grants_the_leader_lease_only() {
    let docs = documents("operator.yaml");
    let role = of_kind(&docs, "Role");
    assert_eq!(role["metadata"]["namespace"], "mcs-ceph-operator");
    assert_eq!(
        role["rules"],
        serde_json::json!([
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": ["mcs-ceph-operator"], "verbs": ["get", "update"]},
        ])
    );
    let binding = of_kind(&docs, "RoleBinding");
    assert_eq!(binding["roleRef"]["kind"], "Role");
    assert_eq!(binding["roleRef"]["name"], role["metadata"]["name"]);
    assert_eq!(binding["subjects"][0]["name"], "mcs-ceph-operator");
    assert_eq!(binding["subjects"][0]["namespace"], "mcs-ceph-operator");
}

fn env<'a>(container: &'a Value, name: &str) -> &'a Value {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {container}"))
}

#[test]
fn the_deployment_is_two_locked_down_replicas_with_leader_election_and_probes() {
    let docs = documents("operator.yaml");
    let deployment = of_kind(&docs, "Deployment");
    assert_eq!(deployment["spec"]["replicas"], 2);
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
    assert_eq!(env(container, "MCS_CEPH_LISTEN")["value"], "0.0.0.0:8080");
    assert_eq!(env(container, "MCS_CEPH_LEADER_ELECTION")["value"], "true");
    assert_eq!(
        env(container, "POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.name"
    );
    assert_eq!(
        env(container, "POD_NAMESPACE")["valueFrom"]["fieldRef"]["fieldPath"],
        "metadata.namespace"
    );
    // A writable /tmp beside the read-only root file system.
    assert_eq!(container["volumeMounts"][0]["mountPath"], "/tmp");
    assert!(pod["volumes"][0]["emptyDir"].is_object());
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
    let cli = mcs_ceph_operator::cli::Cli::try_parse_from(args).unwrap();
    let mcs_ceph_operator::cli::Command::Run(args) = cli.command else {
        panic!("the container runs the operator");
    };
    // The Lease namespace is the pod's (POD_NAMESPACE; the client's namespace stands in here).
    let lease = args
        .election
        .settings("mcs-ceph-operator")
        .unwrap()
        .unwrap();
    assert_eq!(
        lease.claim.name, "mcs-ceph-operator",
        "the name the Role grants"
    );
}

// ---- the Helm chart ----

/// The chart's directory, relative to the workspace's root (as the docs name it).
const CHART_DIR: &str = "deploy/helm/mcs-ceph-operator";
const CHART: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/helm/mcs-ceph-operator"
);
const RELEASE: &str = "mcs-ceph-operator";
const NAMESPACE: &str = "mcs-ceph-operator";

fn render_in(namespace: &str, overrides: Value) -> Rendered {
    helm()
        .template(Path::new(CHART), RELEASE, namespace, &overrides)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn render(overrides: Value) -> Rendered {
    render_in(NAMESPACE, overrides)
}

fn the(rendered: &Rendered, kind: &str) -> Value {
    let objects = rendered.of_kind(kind);
    assert_eq!(objects.len(), 1, "one {kind}: {objects:#?}");
    objects[0].clone()
}

/// Every option on.
fn all_options() -> Value {
    json!({
        "image": {"repository": "registry.example/mcs-ceph-operator", "tag": "0.1.0-rc1", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "registry"}],
        "replicas": 3,
        "monMigration": true,
        "logFormat": "text",
        "serviceAccount": {"name": "ceph-mcs", "annotations": {"example.com/role": "operator"}},
        "podAnnotations": {"example.com/scrape": "true"},
        "podLabels": {"team": "storage"},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "mcs-ceph-operator"}}}}]}},
        "priorityClassName": "system-cluster-critical",
        "podDisruptionBudget": {"maxUnavailable": "50%"},
        "serviceMonitor": {"enabled": true, "interval": "15s", "labels": {"release": "prometheus"}},
    })
}

/// Whether `labels` has every label of `selector` (a `matchLabels`).
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().unwrap();
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

/// The lines the chart's CRD adds to what the binary prints, under `metadata:`.
const KEEP: &str = "metadata:
  # Kept on helm uninstall: deleting the CRD would delete every CephClusterAddressing, and with
  # it status.monFailover, the resume state of a mon migration in flight.
  annotations:
    helm.sh/resource-policy: keep
";

#[test]
fn the_chart_s_crd_is_the_binary_s_kept_on_uninstall() {
    // The file: exactly what the binary prints, with the annotation and its comment.
    let printed = mcs_ceph_operator::cli::crd_yaml().unwrap();
    let expected = printed.replacen("metadata:\n", KEEP, 1);
    assert_ne!(expected, printed);
    let file = std::fs::read_to_string(format!("{CHART}/templates/crd.yaml")).unwrap();
    assert!(
        file == expected,
        "deploy/helm/mcs-ceph-operator/templates/crd.yaml is not `{CRD_COMMAND}` with helm.sh/resource-policy: keep; regenerate it and add the annotation"
    );
    // As Helm installs it: the binary's CRD plus that annotation, nothing else.
    let mut crd: Value = serde_saphyr::from_str(&printed).unwrap();
    crd["metadata"]["annotations"] = json!({"helm.sh/resource-policy": "keep"});
    assert_eq!(the(&render(json!({})), "CustomResourceDefinition"), crd);
}

#[test]
fn the_chart_with_default_values_renders_the_plain_manifests() {
    let meta = helm().show_chart(Path::new(CHART)).unwrap();
    assert_eq!(meta["apiVersion"], "v2");
    assert_eq!(meta["appVersion"], env!("CARGO_PKG_VERSION"));
    assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"));
    let rendered = render(json!({}));
    let objects: Vec<&Value> = rendered
        .objects()
        .into_iter()
        .filter(|o| o["kind"] != "CustomResourceDefinition")
        .collect();
    assert_eq!(
        chart::differences(&objects, &documents("operator.yaml")),
        Vec::<String>::new()
    );
}

#[test]
fn every_object_passes_the_api_server_s_rules_with_defaults_and_with_every_option() {
    for (what, values, namespaces) in [
        ("defaults", json!({}), vec![NAMESPACE]),
        ("every option", all_options(), vec![NAMESPACE]),
        (
            "one namespace watched",
            json!({"watchNamespace": "rook-ceph"}),
            vec![NAMESPACE, "rook-ceph"],
        ),
        (
            "one replica, no leader election, no budget, an existing ServiceAccount",
            json!({
            "replicas": 1, "leaderElection": false, "podDisruptionBudget": {"enabled": false},
            "serviceAccount": {"create": false, "name": "existing"}}),
            vec![NAMESPACE],
        ),
    ] {
        let rendered = render(values);
        assert_eq!(
            chart::problems(&rendered, &namespaces),
            Vec::<String>::new(),
            "{what}"
        );
    }
}

#[test]
fn the_chart_renders_its_values_where_they_belong() {
    let rendered = render_in(
        "ceph-ops",
        // Maps merge into values.yaml's as Helm merges them; null deletes a key.
        json!({"replicas": 1, "leaderElection": false, "image": {"tag": "v9"},
               "resources": {"requests": null, "limits": {"memory": "1Gi"}}}),
    );
    let deployment = the(&rendered, "Deployment");
    assert_eq!(deployment["metadata"]["namespace"], "ceph-ops");
    assert_eq!(deployment["spec"]["replicas"], 1);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "mcs-ceph-operator:v9");
    assert_eq!(env(container, "MCS_CEPH_LEADER_ELECTION")["value"], "false");
    assert_eq!(
        container["resources"],
        serde_json::json!({"limits": {"memory": "1Gi"}})
    );
    // No leader election, no Lease to grant.
    assert!(rendered.of_kind("Role").is_empty());

    let rendered = render(all_options());
    let deployment = the(&rendered, "Deployment");
    let template = &deployment["spec"]["template"];
    let pod = &template["spec"];
    let container = &pod["containers"][0];
    assert_eq!(
        container["image"],
        "registry.example/mcs-ceph-operator:0.1.0-rc1"
    );
    assert_eq!(container["imagePullPolicy"], "Always");
    assert_eq!(env(container, "MCS_CEPH_MON_MIGRATION")["value"], "true");
    assert_eq!(env(container, "MCS_CEPH_LOG_FORMAT")["value"], "text");
    assert_eq!(container["resources"], all_options()["resources"]);
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "registry"}]));
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["nodeSelector"], all_options()["nodeSelector"]);
    assert_eq!(pod["tolerations"], all_options()["tolerations"]);
    assert_eq!(pod["affinity"], all_options()["affinity"]);
    assert_eq!(pod["serviceAccountName"], "ceph-mcs");
    assert_eq!(
        template["metadata"]["annotations"],
        json!({"example.com/scrape": "true"})
    );
    assert_eq!(template["metadata"]["labels"]["team"], "storage");
    assert_eq!(
        the(&rendered, "ServiceAccount")["metadata"]["annotations"],
        json!({"example.com/role": "operator"})
    );
    for binding in rendered
        .of_kind("ClusterRoleBinding")
        .into_iter()
        .chain(rendered.of_kind("RoleBinding"))
    {
        assert_eq!(binding["subjects"][0]["name"], "ceph-mcs");
    }
}

#[test]
fn the_pods_carry_the_labels_mcsctl_version_reads_and_a_budget_selects_them() {
    for (values, version) in [(json!({}), "0.1.0"), (all_options(), "0.1.0-rc1")] {
        let rendered = render(values);
        let deployment = the(&rendered, "Deployment");
        let labels = &deployment["spec"]["template"]["metadata"]["labels"];
        assert_eq!(labels["app.kubernetes.io/name"], "mcs-ceph-operator");
        assert_eq!(labels["app.kubernetes.io/part-of"], "clusterset");
        assert_eq!(labels["app.kubernetes.io/version"], version);
        assert_eq!(labels["app.kubernetes.io/component"], "operator");
        assert!(selects(
            &deployment["spec"]["selector"]["matchLabels"],
            labels
        ));
        let budget = the(&rendered, "PodDisruptionBudget");
        assert!(selects(&budget["spec"]["selector"]["matchLabels"], labels));
        let service = rendered
            .object("Service", "mcs-ceph-operator-metrics")
            .unwrap();
        assert!(selects(&service["spec"]["selector"], labels));
        for object in rendered
            .objects()
            .into_iter()
            .filter(|o| o["kind"] != "CustomResourceDefinition")
        {
            for key in [
                "app.kubernetes.io/name",
                "app.kubernetes.io/instance",
                "app.kubernetes.io/version",
                "app.kubernetes.io/part-of",
                "app.kubernetes.io/managed-by",
                "helm.sh/chart",
            ] {
                assert!(
                    object["metadata"]["labels"].get(key).is_some(),
                    "{key} missing on {} {}",
                    object["kind"],
                    object["metadata"]["name"]
                );
            }
        }
    }
    let budget = the(&render(json!({})), "PodDisruptionBudget");
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
}

#[test]
fn the_service_monitor_comes_only_when_enabled_and_scrapes_the_metrics_service() {
    assert!(render(json!({})).of_kind("ServiceMonitor").is_empty());
    let rendered = render(all_options());
    let monitor = the(&rendered, "ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    let selected: Vec<&Value> = rendered
        .of_kind("Service")
        .into_iter()
        .filter(|s| {
            selects(
                &monitor["spec"]["selector"]["matchLabels"],
                &s["metadata"]["labels"],
            )
        })
        .collect();
    assert_eq!(selected.len(), 1);
    assert_eq!(selected[0]["metadata"]["name"], "mcs-ceph-operator-metrics");
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], selected[0]["spec"]["ports"][0]["name"]);
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["interval"], "15s");
}

#[test]
fn the_notes_say_how_to_check_it_and_that_the_crd_is_kept() {
    let notes = helm()
        .notes(Path::new(CHART), RELEASE, NAMESPACE, &json!({}))
        .unwrap_or_else(|e| panic!("{e}"));
    for line in [
        "kubectl -n mcs-ceph-operator rollout status deployment/mcs-ceph-operator",
        "kubectl -n mcs-ceph-operator get lease mcs-ceph-operator",
        "kept on helm uninstall (helm.sh/resource-policy: keep)",
        "kubectl delete crd cephclusteraddressings.clusterset.io",
    ] {
        assert!(notes.contains(line), "{line:?} not in the notes:\n{notes}");
    }
}

/// `watchNamespace`: a Role and RoleBinding in that namespace with exactly the ClusterRole's
/// rules, and the operator told to watch only it.
#[test]
fn the_chart_with_a_watch_namespace_grants_a_role_there_and_watches_only_it() {
    let rendered = render(json!({"watchNamespace": "rook-ceph"}));
    assert!(rendered.of_kind("ClusterRole").is_empty());
    assert!(rendered.of_kind("ClusterRoleBinding").is_empty());
    let role = rendered.object("Role", "mcs-ceph-operator").unwrap();
    assert_eq!(role["metadata"]["namespace"], "rook-ceph");
    let cluster_role = of_kind(&documents("operator.yaml"), "ClusterRole").clone();
    assert_eq!(role["rules"], cluster_role["rules"]);
    let binding = rendered.object("RoleBinding", "mcs-ceph-operator").unwrap();
    assert_eq!(binding["metadata"]["namespace"], "rook-ceph");
    assert_eq!(
        binding["roleRef"],
        serde_json::json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role",
                           "name": "mcs-ceph-operator"})
    );
    assert_eq!(
        binding["subjects"],
        serde_json::json!([{"kind": "ServiceAccount", "name": "mcs-ceph-operator",
                            "namespace": "mcs-ceph-operator"}])
    );
    let deployment = the(&rendered, "Deployment");
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        env(container, "MCS_CEPH_WATCH_NAMESPACE")["value"],
        "rook-ceph"
    );
}

#[test]
fn helm_lint_passes_with_the_defaults_and_the_docs_examples() {
    let cases = chart::documented_values(CHART_DIR);
    let names: Vec<&str> = cases.iter().map(|(what, _)| what.as_str()).collect();
    // The install and the upgrade that opts in to mon migration.
    assert!(
        names.contains(&"the defaults")
            && names.contains(&"docs/operator.md's example 1")
            && names.contains(&"docs/operator.md's example 2"),
        "{names:?}"
    );
    // helm lint --strict with each; the docs' examples also render, every object passing the
    // API server's rules.
    assert_eq!(
        chart::lint_documented(CHART_DIR, RELEASE, NAMESPACE),
        Vec::<String>::new()
    );
}

// ---- the Dockerfile ----

/// The Dockerfile's instructions (comments dropped, continuation lines joined), by stage.
fn dockerfile_stages() -> Vec<Vec<String>> {
    let text = std::fs::read_to_string(format!("{DIR}/Dockerfile")).unwrap();
    let mut instructions: Vec<String> = Vec::new();
    let mut continued = false;
    for line in text.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let (body, continues) = match line.strip_suffix('\\') {
            Some(body) => (body.trim(), true),
            None => (line, false),
        };
        match instructions.last_mut() {
            Some(last) if continued => {
                last.push(' ');
                last.push_str(body);
            }
            _ => instructions.push(body.to_owned()),
        }
        continued = continues;
    }
    let mut stages: Vec<Vec<String>> = Vec::new();
    for instruction in instructions {
        if instruction.starts_with("FROM ") {
            stages.push(Vec::new());
        }
        stages.last_mut().expect("FROM first").push(instruction);
    }
    stages
}

#[test]
fn the_dockerfile_builds_this_binary_and_runs_it_as_non_root() {
    let binary = std::path::Path::new(env!("CARGO_BIN_EXE_mcs-ceph-operator"))
        .file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .to_owned();
    let stages = dockerfile_stages();
    assert_eq!(stages.len(), 2, "{stages:#?}");
    let (builder, runtime) = (&stages[0], &stages[1]);

    let toolchain = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../rust-toolchain.toml"
    ))
    .unwrap();
    assert!(toolchain.contains("\"1.95"), "{toolchain}");
    assert!(builder[0].starts_with("FROM rust:1.95-") && builder[0].ends_with(" AS builder"));
    assert!(
        builder
            .iter()
            .any(|i| i == &format!("RUN cargo build --release --locked -p {binary}")),
        "{builder:#?}"
    );

    assert!(runtime[0].starts_with("FROM debian:") && runtime[0].ends_with("-slim"));
    let install = runtime
        .iter()
        .find(|i| i.contains("apt-get install"))
        .unwrap();
    assert!(install.contains(" ceph-common"), "{install}");
    assert!(runtime.contains(&format!(
        "COPY --from=builder /src/target/release/{binary} /usr/local/bin/{binary}"
    )));
    assert_eq!(
        runtime
            .iter()
            .find(|i| i.starts_with("ENTRYPOINT"))
            .unwrap(),
        &format!("ENTRYPOINT [\"/usr/local/bin/{binary}\"]")
    );
    let user = runtime.iter().rfind(|i| i.starts_with("USER ")).unwrap();
    let uid: u32 = user["USER ".len()..]
        .split(':')
        .next()
        .unwrap()
        .parse()
        .unwrap_or_else(|_| panic!("{user}: numeric, so that runAsNonRoot can check it"));
    assert_ne!(uid, 0);
    let docs = documents("operator.yaml");
    let pod = &of_kind(&docs, "Deployment")["spec"]["template"]["spec"];
    assert_eq!(pod["securityContext"]["runAsUser"], uid);
    assert_eq!(runtime.last().unwrap(), "CMD [\"run\"]");
}

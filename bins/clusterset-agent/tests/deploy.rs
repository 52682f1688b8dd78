#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The agent's Helm chart (deploy/helm/clusterset-agent) and plain manifests
//! (deploy/clusterset-agent/member.yaml), the chart rendered and linted by the real Helm 4
//! (`kube_fake::helm`; these tests fail, naming `bash tests/k8s-tools/build.sh helm`, without
//! it): `helm lint --strict` passes with the defaults, the ci/ values and the values of the
//! docs' examples; every object passes the API server's rules with the defaults and with every
//! option on; the agent runs two replicas or more with rolling updates and a
//! PodDisruptionBudget, every replica serving DNS; leader election is on, with a Role that
//! grants the named Lease only; the environment the chart sets is the agent's flags; the
//! ServiceMonitor comes only when asked and scrapes the metrics Service; NOTES.txt prints the
//! CoreDNS stanza; a missing clusterId is a render error (Helm's `required`) that names it; and
//! the chart with its documented example values renders exactly member.yaml.

use std::collections::BTreeSet;
use std::path::Path;

use clap::CommandFactory;
use kube_fake::chart::{self, Rendered};
use kube_fake::helm::helm;
use serde_json::{Value, json};

/// The chart's directory, relative to the workspace's root (as the docs name it).
const CHART_DIR: &str = "deploy/helm/clusterset-agent";
const CHART: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/helm/clusterset-agent"
);
const PLAIN: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/clusterset-agent/member.yaml"
);
const RELEASE: &str = "clusterset-agent";
const NAMESPACE: &str = "clusterset-system";

fn render(overrides: Value) -> Rendered {
    helm()
        .template(Path::new(CHART), RELEASE, NAMESPACE, &overrides)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn notes(overrides: Value) -> String {
    helm()
        .notes(Path::new(CHART), RELEASE, NAMESPACE, &overrides)
        .unwrap_or_else(|e| panic!("{e}"))
}

/// The documented example (ci/east-values.yaml).
fn example_values() -> Value {
    let text = std::fs::read_to_string(format!("{CHART}/ci/east-values.yaml")).unwrap();
    serde_saphyr::from_str(&text).unwrap()
}

/// Every option on (and a third replica, an IPv6 family, a fixed DNS ClusterIP).
fn all_options() -> Value {
    json!({
        "clusterId": "east",
        "globalCidrs": ["242.1.0.0/16", "fd00:242::/48"],
        "clustersetCidrs": ["243.1.0.0/16", "fd00:243::/48"],
        "endpointMode": "pod-addresses",
        "broker": {"kubeconfigSecret": "hub-east", "context": "hub", "namespace": "mcs-broker"},
        "dns": {"zone": "mcs.example", "ttl": 10, "lighthouseNames": true,
                "service": {"name": "mcs-dns", "clusterIP": "10.96.0.53"}},
        "leaseSeconds": 60,
        "leaderElection": {"leaseName": "agent-leader", "leaseDurationSeconds": 20,
                           "renewDeadlineSeconds": 12, "retryPeriodSeconds": 3},
        "logFormat": "text",
        "replicas": 3,
        "image": {"repository": "registry.example/clusterset-agent", "tag": "0.1.0-rc1", "pullPolicy": "Always"},
        "imagePullSecrets": [{"name": "registry"}],
        "serviceAccount": {"name": "agent", "annotations": {"example.com/role": "dns"}},
        "podAnnotations": {"example.com/scrape": "true"},
        "podLabels": {"team": "network"},
        "resources": {"requests": {"cpu": "100m", "memory": "128Mi"}, "limits": {"cpu": "1", "memory": "512Mi"}},
        "nodeSelector": {"kubernetes.io/os": "linux"},
        "tolerations": [{"key": "node-role.kubernetes.io/control-plane", "operator": "Exists", "effect": "NoSchedule"}],
        "affinity": {"podAntiAffinity": {"preferredDuringSchedulingIgnoredDuringExecution": [{
            "weight": 100,
            "podAffinityTerm": {"topologyKey": "kubernetes.io/hostname",
                                "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "clusterset-agent"}}}}]}},
        "topologySpreadConstraints": [{"maxSkew": 1, "topologyKey": "topology.kubernetes.io/zone",
            "whenUnsatisfiable": "ScheduleAnyway",
            "labelSelector": {"matchLabels": {"app.kubernetes.io/name": "clusterset-agent"}}}],
        "priorityClassName": "system-cluster-critical",
        "podDisruptionBudget": {"maxUnavailable": "50%"},
        "serviceMonitor": {"enabled": true, "interval": "15s", "labels": {"release": "prometheus"}},
    })
}

fn the(rendered: &Rendered, kind: &str) -> Value {
    let objects = rendered.of_kind(kind);
    assert_eq!(objects.len(), 1, "one {kind}: {objects:#?}");
    objects[0].clone()
}

fn container(rendered: &Rendered) -> Value {
    the(rendered, "Deployment")["spec"]["template"]["spec"]["containers"][0].clone()
}

fn env(container: &Value, name: &str) -> Value {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == name)
        .unwrap_or_else(|| panic!("no {name} in {container}"))
        .clone()
}

/// Whether `labels` has every label of `selector` (a `matchLabels`).
fn selects(selector: &Value, labels: &Value) -> bool {
    let selector = selector.as_object().unwrap();
    !selector.is_empty() && selector.iter().all(|(k, v)| labels.get(k) == Some(v))
}

#[test]
fn every_object_passes_the_api_server_s_rules_with_defaults_and_with_every_option() {
    for (what, values) in [
        ("defaults", json!({"clusterId": "east"})),
        ("the example", example_values()),
        ("every option", all_options()),
        (
            "leader election off, one replica, no budget, no spreading",
            json!({
            "clusterId": "east", "replicas": 1, "leaderElection": {"enabled": false},
            "podDisruptionBudget": {"enabled": false}, "spreadAcrossNodes": false,
            "serviceAccount": {"create": false, "name": "existing"}}),
        ),
    ] {
        let rendered = render(values);
        assert!(rendered.objects().len() >= 5, "{what}");
        assert_eq!(
            chart::problems(&rendered, &[NAMESPACE]),
            Vec::<String>::new(),
            "{what}"
        );
    }
}

#[test]
fn the_chart_with_the_example_values_renders_the_plain_manifests() {
    let meta = helm().show_chart(Path::new(CHART)).unwrap();
    assert_eq!(meta["apiVersion"], "v2");
    assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"));
    assert_eq!(meta["appVersion"], env!("CARGO_PKG_VERSION"));
    let rendered = render(example_values());
    let text = std::fs::read_to_string(PLAIN).unwrap();
    let plain: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    assert_eq!(
        chart::differences(&rendered.objects(), &plain),
        Vec::<String>::new()
    );
    assert_eq!(plain[0]["kind"], "Namespace");
    assert_eq!(plain[0]["metadata"]["name"], NAMESPACE);
}

#[test]
fn the_plain_manifests_run_two_replicas_with_rolling_updates_a_budget_and_the_lease_role() {
    let text = std::fs::read_to_string(PLAIN).unwrap();
    let plain: Vec<Value> = serde_saphyr::from_multiple(&text).unwrap();
    let of_kind = |kind: &str| {
        plain
            .iter()
            .find(|o| o["kind"] == kind)
            .unwrap_or_else(|| panic!("no {kind}"))
    };
    let deployment = of_kind("Deployment");
    assert!(deployment["spec"]["replicas"].as_u64().unwrap() >= 2);
    assert_eq!(deployment["spec"]["strategy"]["type"], "RollingUpdate");
    let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
    assert!(selects(
        &of_kind("PodDisruptionBudget")["spec"]["selector"]["matchLabels"],
        pod_labels
    ));
    assert_eq!(
        of_kind("Role")["rules"],
        json!([
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
            {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
             "resourceNames": ["clusterset-agent"], "verbs": ["get", "update"]},
        ])
    );
}

#[test]
fn the_agent_runs_replicated_with_rolling_updates_and_a_disruption_budget() {
    for values in [json!({"clusterId": "east"}), all_options()] {
        let rendered = render(values);
        let deployment = the(&rendered, "Deployment");
        assert!(deployment["spec"]["replicas"].as_u64().unwrap() >= 2);
        assert_eq!(
            deployment["spec"]["strategy"],
            json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 1}})
        );
        let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
        assert!(selects(
            &deployment["spec"]["selector"]["matchLabels"],
            pod_labels
        ));
        let budget = the(&rendered, "PodDisruptionBudget");
        assert!(
            selects(&budget["spec"]["selector"]["matchLabels"], pod_labels),
            "{budget}"
        );
        assert!(budget["spec"].get("minAvailable").is_none());
        // Spread across nodes by default, the extra constraints after it.
        let spread = &deployment["spec"]["template"]["spec"]["topologySpreadConstraints"];
        assert_eq!(spread[0]["topologyKey"], "kubernetes.io/hostname");
        assert_eq!(spread[0]["whenUnsatisfiable"], "ScheduleAnyway");
        assert!(selects(
            &spread[0]["labelSelector"]["matchLabels"],
            pod_labels
        ));
    }
    let budget = the(&render(json!({"clusterId": "east"})), "PodDisruptionBudget");
    assert_eq!(budget["spec"]["maxUnavailable"], 1);
}

#[test]
fn every_replica_serves_dns_behind_the_dns_service() {
    for values in [json!({"clusterId": "east"}), all_options()] {
        let rendered = render(values.clone());
        let deployment = the(&rendered, "Deployment");
        let pod_labels = &deployment["spec"]["template"]["metadata"]["labels"];
        let ports = &container(&rendered)["ports"];
        assert_eq!(
            ports,
            &json!([
                {"name": "dns-udp", "containerPort": 5353, "protocol": "UDP"},
                {"name": "dns-tcp", "containerPort": 5353, "protocol": "TCP"},
                {"name": "http", "containerPort": 9090, "protocol": "TCP"},
            ])
        );
        let name = values["dns"]["service"]["name"]
            .as_str()
            .unwrap_or("clusterset-dns");
        let service = rendered.object("Service", name).unwrap();
        assert!(selects(&service["spec"]["selector"], pod_labels));
        assert_eq!(
            service["spec"]["ports"],
            json!([
                {"name": "dns-udp", "port": 53, "targetPort": "dns-udp", "protocol": "UDP"},
                {"name": "dns-tcp", "port": 53, "targetPort": "dns-tcp", "protocol": "TCP"},
            ])
        );
        assert_eq!(
            service["spec"].get("clusterIP"),
            values["dns"]["service"].get("clusterIP")
        );
        // Ready once the replica's zone is synced.
        assert_eq!(
            container(&rendered)["readinessProbe"]["httpGet"]["path"],
            "/readyz"
        );
    }
}

#[test]
fn leader_election_is_on_with_a_role_for_the_named_lease_only() {
    for (values, lease) in [
        (json!({"clusterId": "east"}), "clusterset-agent"),
        (all_options(), "agent-leader"),
    ] {
        let rendered = render(values);
        let container = container(&rendered);
        assert_eq!(
            env(&container, "CLUSTERSET_LEADER_ELECTION")["value"],
            "true"
        );
        assert_eq!(
            env(&container, "CLUSTERSET_LEADER_LEASE_NAME")["value"],
            lease
        );
        assert_eq!(
            env(&container, "POD_NAMESPACE")["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.namespace"
        );
        assert_eq!(
            env(&container, "POD_NAME")["valueFrom"]["fieldRef"]["fieldPath"],
            "metadata.name"
        );
        let role = the(&rendered, "Role");
        assert_eq!(role["metadata"]["namespace"], NAMESPACE);
        assert_eq!(
            role["rules"],
            json!([
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
                {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"],
                 "resourceNames": [lease], "verbs": ["get", "update"]},
            ])
        );
        let binding = the(&rendered, "RoleBinding");
        assert_eq!(
            binding["roleRef"],
            json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": role["metadata"]["name"]})
        );
        let pod = &the(&rendered, "Deployment")["spec"]["template"]["spec"];
        assert_eq!(
            binding["subjects"],
            json!([{"kind": "ServiceAccount", "name": pod["serviceAccountName"], "namespace": NAMESPACE}])
        );
    }
    let defaults = render(json!({"clusterId": "east"}));
    let container = container(&defaults);
    for (name, value) in [
        ("CLUSTERSET_LEADER_LEASE_DURATION_SECONDS", "15"),
        ("CLUSTERSET_LEADER_LEASE_RENEW_DEADLINE_SECONDS", "10"),
        ("CLUSTERSET_LEADER_LEASE_RETRY_SECONDS", "2"),
    ] {
        assert_eq!(env(&container, name)["value"], value);
    }
    let off =
        render(json!({"clusterId": "east", "replicas": 1, "leaderElection": {"enabled": false}}));
    assert!(off.of_kind("Role").is_empty() && off.of_kind("RoleBinding").is_empty());
    assert_eq!(
        env(&crate::container(&off), "CLUSTERSET_LEADER_ELECTION")["value"],
        "false"
    );
}

/// The command line the agent reads from the container's args and environment (each variable
/// becomes the flag that reads it, as clap would; a downward-API value stands in for itself,
/// but for the pod's namespace, which is the release's), and the variables no flag reads.
fn command_line(container: &Value) -> (Vec<String>, BTreeSet<String>) {
    let cli = clusterset_agent::cli::Cli::command();
    let run = cli.find_subcommand("run").unwrap();
    let mut args = vec!["clusterset-agent".to_owned()];
    args.extend(
        container["args"]
            .as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_owned()),
    );
    let mut unknown = BTreeSet::new();
    for entry in container["env"].as_array().unwrap() {
        let name = entry["name"].as_str().unwrap();
        let value = match (
            entry["value"].as_str(),
            entry["valueFrom"]["fieldRef"]["fieldPath"].as_str(),
        ) {
            (Some(value), _) => value.to_owned(),
            (None, Some("metadata.namespace")) => NAMESPACE.to_owned(),
            (None, field) => format!("from-{}", field.unwrap()),
        };
        let Some(arg) = run
            .get_arguments()
            .find(|a| a.get_env().is_some_and(|e| e == name))
        else {
            unknown.insert(name.to_owned());
            continue;
        };
        let long = arg.get_long().unwrap();
        if arg.get_action().takes_values() {
            args.push(format!("--{long}={value}"));
        } else if !matches!(value.as_str(), "" | "false" | "no" | "off" | "n" | "0") {
            args.push(format!("--{long}"));
        }
    }
    (args, unknown)
}

#[test]
fn the_environment_the_chart_sets_is_the_agent_s_flags() {
    use clap::Parser;
    for values in [example_values(), all_options()] {
        let rendered = render(values.clone());
        let container = container(&rendered);
        let (args, unknown) = command_line(&container);
        assert!(
            unknown.is_empty(),
            "variables the agent does not read: {unknown:?}"
        );
        let cli = clusterset_agent::cli::Cli::try_parse_from(&args)
            .unwrap_or_else(|e| panic!("{args:?}: {e}"));
        let clusterset_agent::cli::Command::Run(run) = cli.command else {
            panic!("the container runs the agent: {args:?}");
        };
        let config = run.agent_config().unwrap();
        assert_eq!(
            config.cluster_id.as_str(),
            values["clusterId"].as_str().unwrap()
        );
        assert_eq!(
            config.global_cidrs.len(),
            values["globalCidrs"].as_array().unwrap().len()
        );
        assert_eq!(
            config.clusterset_cidrs.len(),
            values["clustersetCidrs"].as_array().unwrap().len()
        );
        let zone = run.zone_config().unwrap();
        assert_eq!(
            zone.lighthouse_cluster_names,
            values["dns"]["lighthouseNames"] == true
        );
        assert_eq!(
            run.broker_kubeconfig,
            std::path::Path::new("/etc/clusterset/broker/kubeconfig")
        );
        // The mounted Secret holds the kubeconfig under that key.
        let pod = &the(&rendered, "Deployment")["spec"]["template"]["spec"];
        assert_eq!(
            container["volumeMounts"][0]["mountPath"],
            "/etc/clusterset/broker"
        );
        assert_eq!(
            pod["volumes"][0]["secret"]["secretName"],
            values["broker"]["kubeconfigSecret"]
                .as_str()
                .unwrap_or("clusterset-broker")
        );
        assert_eq!(run.election.identity(), "from-metadata.name");
        // Leader election as the values say, on the Lease the Role grants, in the pod's
        // namespace.
        let election = &values["leaderElection"];
        let settings = run.election.settings("not-the-pods-namespace").unwrap();
        if election["enabled"] == false {
            assert!(settings.is_none());
            continue;
        }
        let settings = settings.unwrap();
        assert_eq!(settings.claim.namespace, NAMESPACE);
        assert_eq!(
            settings.claim.name,
            election["leaseName"].as_str().unwrap_or("clusterset-agent")
        );
        assert_eq!(settings.claim.identity, "from-metadata.name");
        let role = the(&rendered, "Role");
        assert!(
            role["rules"]
                .as_array()
                .unwrap()
                .iter()
                .any(|r| r["resourceNames"] == json!([settings.claim.name])),
            "{role}"
        );
    }
    let (args, _) = command_line(&container(&render(all_options())));
    for flag in [
        "--broker-context=hub",
        "--broker-namespace=mcs-broker",
        "--endpoint-mode=pod-addresses",
        "--lease-seconds=60",
        "--dns-zone=mcs.example",
        "--dns-ttl=10",
        "--lighthouse-names",
        "--log-format=text",
    ] {
        assert!(args.iter().any(|a| a == flag), "{flag} not in {args:?}");
    }
}

#[test]
fn the_pods_carry_the_labels_mcsctl_version_reads_and_run_locked_down() {
    let rendered = render(all_options());
    let deployment = the(&rendered, "Deployment");
    let template = &deployment["spec"]["template"];
    let labels = &template["metadata"]["labels"];
    assert_eq!(labels["app.kubernetes.io/name"], "clusterset-agent");
    assert_eq!(labels["app.kubernetes.io/part-of"], "clusterset");
    assert_eq!(labels["app.kubernetes.io/version"], "0.1.0-rc1");
    assert_eq!(labels["app.kubernetes.io/instance"], "clusterset-agent");
    assert_eq!(labels["app.kubernetes.io/managed-by"], "Helm");
    assert_eq!(labels["helm.sh/chart"], "clusterset-agent-0.1.0");
    assert_eq!(labels["team"], "network");
    assert_eq!(
        template["metadata"]["annotations"],
        json!({"example.com/scrape": "true"})
    );
    let defaults = render(json!({"clusterId": "east"}));
    assert_eq!(
        the(&defaults, "Deployment")["spec"]["template"]["metadata"]["labels"]["app.kubernetes.io/version"],
        "0.1.0"
    );
    // Every object carries the standard labels.
    for object in rendered.objects() {
        let labels = &object["metadata"]["labels"];
        for key in [
            "app.kubernetes.io/name",
            "app.kubernetes.io/instance",
            "app.kubernetes.io/version",
            "app.kubernetes.io/part-of",
            "app.kubernetes.io/component",
            "app.kubernetes.io/managed-by",
            "helm.sh/chart",
        ] {
            assert!(
                labels.get(key).is_some(),
                "{key} missing on {} {}",
                object["kind"],
                object["metadata"]["name"]
            );
        }
    }
    let pod = &template["spec"];
    assert_eq!(
        pod["securityContext"],
        json!({"runAsNonRoot": true, "runAsUser": 65532, "runAsGroup": 65532, "seccompProfile": {"type": "RuntimeDefault"}})
    );
    assert_eq!(
        container(&rendered)["securityContext"],
        json!({"allowPrivilegeEscalation": false, "readOnlyRootFilesystem": true, "capabilities": {"drop": ["ALL"]}})
    );
    assert_eq!(
        container(&rendered)["image"],
        "registry.example/clusterset-agent:0.1.0-rc1"
    );
    assert_eq!(container(&rendered)["imagePullPolicy"], "Always");
    assert_eq!(pod["imagePullSecrets"], json!([{"name": "registry"}]));
    assert_eq!(pod["priorityClassName"], "system-cluster-critical");
    assert_eq!(pod["nodeSelector"], json!({"kubernetes.io/os": "linux"}));
    assert_eq!(pod["tolerations"], all_options()["tolerations"]);
    assert_eq!(pod["affinity"], all_options()["affinity"]);
    assert_eq!(
        pod["topologySpreadConstraints"][1],
        all_options()["topologySpreadConstraints"][0]
    );
    assert_eq!(pod["serviceAccountName"], "agent");
    assert_eq!(
        the(&rendered, "ServiceAccount")["metadata"]["annotations"],
        json!({"example.com/role": "dns"})
    );
    assert_eq!(
        container(&rendered)["resources"],
        all_options()["resources"]
    );
}

#[test]
fn the_service_monitor_comes_only_when_enabled_and_scrapes_the_metrics_service() {
    assert!(
        render(json!({"clusterId": "east"}))
            .of_kind("ServiceMonitor")
            .is_empty()
    );
    let rendered = render(all_options());
    let monitor = the(&rendered, "ServiceMonitor");
    assert_eq!(monitor["apiVersion"], "monitoring.coreos.com/v1");
    assert_eq!(monitor["metadata"]["labels"]["release"], "prometheus");
    let selector = &monitor["spec"]["selector"]["matchLabels"];
    let selected: Vec<&Value> = rendered
        .of_kind("Service")
        .into_iter()
        .filter(|s| selects(selector, &s["metadata"]["labels"]))
        .collect();
    assert_eq!(selected.len(), 1, "{selected:#?}");
    let metrics = selected[0];
    assert_eq!(metrics["metadata"]["name"], "clusterset-agent-metrics");
    assert_eq!(
        monitor["spec"]["namespaceSelector"]["matchNames"],
        json!([NAMESPACE])
    );
    let endpoint = &monitor["spec"]["endpoints"][0];
    assert_eq!(endpoint["port"], metrics["spec"]["ports"][0]["name"]);
    assert_eq!(endpoint["path"], "/metrics");
    assert_eq!(endpoint["interval"], "15s");
}

const STANZA: &str = "clusterset.local:53 {\n    errors\n    cache 5\n    forward . <ClusterIP of the Service above>\n}\n";

#[test]
fn the_notes_say_how_to_check_it_and_give_the_coredns_stanza() {
    let notes = notes(example_values());
    for line in [
        "kubectl -n clusterset-system rollout status deployment/clusterset-agent",
        "kubectl -n clusterset-system get lease clusterset-agent",
        "kubectl -n clusterset-system get service clusterset-dns -o jsonpath='{.spec.clusterIP}'",
        "kubectl -n kube-system edit configmap coredns",
        "every replica serves the clusterset.local zone from its own watch-fed store",
        "only the holder of the Lease clusterset-agent runs the control loop and writes.",
    ] {
        assert!(notes.contains(line), "{line:?} not in the notes:\n{notes}");
    }
    assert!(notes.ends_with(STANZA), "{notes}");
    let notes = crate::notes(all_options());
    assert!(
        notes
            .ends_with("mcs.example:53 {\n    errors\n    cache 10\n    forward . 10.96.0.53\n}\n"),
        "{notes}"
    );
    assert!(notes.contains("Its ClusterIP is 10.96.0.53."), "{notes}");
}

#[test]
fn a_missing_cluster_id_is_a_render_error_that_names_it() {
    for values in [json!({}), json!({"clusterId": ""})] {
        let failures = [
            helm()
                .template(Path::new(CHART), RELEASE, NAMESPACE, &values)
                .map(|_| ())
                .unwrap_err(),
            helm()
                .notes(Path::new(CHART), RELEASE, NAMESPACE, &values)
                .map(|_| ())
                .unwrap_err(),
        ];
        for failure in failures {
            let message = &failure.message;
            assert!(
                message.contains("execution error at (clusterset-agent/templates/deployment.yaml:")
                    && message.contains(
                        "): clusterId is required: this cluster's id, a DNS label unique in the clusterset (--set clusterId=east)"
                    ),
                "{failure}"
            );
        }
    }
}

#[test]
fn helm_lint_passes_with_the_defaults_the_ci_values_and_the_docs_examples() {
    let cases = chart::documented_values(CHART_DIR);
    let names: Vec<&str> = cases.iter().map(|(what, _)| what.as_str()).collect();
    assert!(
        names.contains(&"deploy/helm/clusterset-agent/ci/east-values.yaml")
            && names.contains(&"docs/clusterset-agent.md's example 1"),
        "{names:?}"
    );
    // helm lint --strict with each; the docs' examples also render, every object passing the
    // API server's rules.
    assert_eq!(
        chart::lint_documented(CHART_DIR, RELEASE, NAMESPACE),
        Vec::<String>::new()
    );
}

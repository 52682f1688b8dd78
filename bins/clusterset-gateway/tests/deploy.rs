#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The Helm chart in deploy/helm/clusterset-gateway, rendered and linted by the real Helm 4
//! (`kube_fake::helm`; these tests fail, naming `bash tests/k8s-tools/build.sh helm`, without
//! it): every object passes the API server's rules with the required values and with every
//! option; the DaemonSet runs on the gateway node's network namespace with NET_ADMIN only; its
//! environment is the gateway's flags (the binary accepts it and gets as far as reaching the
//! cluster); the RBAC reads EndpointSlices and nothing else; a missing required value is a
//! render error that names it; `helm lint --strict` passes with the docs' examples.

use std::path::Path;
use std::process::Command;

use kube_fake::chart::{self, Rendered};
use kube_fake::helm::helm;
use serde_json::{Value, json};

const CHART_DIR: &str = "deploy/helm/clusterset-gateway";
const CHART: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/helm/clusterset-gateway"
);
const RELEASE: &str = "clusterset-gateway";
const NAMESPACE: &str = "clusterset-system";

fn required() -> Value {
    json!({
        "clusterId": "east",
        "globalCidr": "242.1.0.0/16",
        "podCidr": "10.244.0.0/16",
        "serviceCidr": "10.96.0.0/12",
        "egressIps": ["242.1.255.254"],
    })
}

fn with(mut values: Value, more: Value) -> Value {
    for (key, value) in more.as_object().unwrap() {
        values[key] = value.clone();
    }
    values
}

fn render(overrides: Value) -> Rendered {
    helm()
        .template(Path::new(CHART), RELEASE, NAMESPACE, &overrides)
        .unwrap_or_else(|e| panic!("{e}"))
}

fn the(rendered: &Rendered, kind: &str) -> Value {
    let objects = rendered.of_kind(kind);
    assert_eq!(objects.len(), 1, "one {kind}: {objects:#?}");
    objects[0].clone()
}

fn all_options() -> Value {
    with(
        required(),
        json!({
            "gatewayIP": "172.30.0.1",
            "globalRange": "242.0.0.0/9",
            "broker": {"kubeconfigSecret": "hub", "context": "hub-admin", "namespace": "mcs-broker"},
            "httpPort": 19092,
            "nodeSelector": {"node-role.example.com/gateway": ""},
            "tolerations": [{"key": "node-role.example.com/gateway", "operator": "Exists", "effect": "NoSchedule"}],
            "affinity": {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [
                {"matchExpressions": [{"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}]}]}}},
            "priorityClassName": "system-node-critical",
            "image": {"repository": "registry.example/clusterset-gateway", "tag": "0.1.0-rc1", "pullPolicy": "Always"},
            "imagePullSecrets": [{"name": "registry"}],
            "serviceAccount": {"name": "gw", "annotations": {"example.com/role": "gateway"}},
            "podAnnotations": {"example.com/scrape": "true"},
            "podLabels": {"team": "network"},
            "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        }),
    )
}

fn env(container: &Value) -> Vec<(String, Value)> {
    container["env"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| {
            let name = e["name"].as_str().unwrap().to_owned();
            let value = if e["value"].is_null() {
                e["valueFrom"].clone()
            } else {
                e["value"].clone()
            };
            (name, value)
        })
        .collect()
}

#[test]
fn every_object_passes_the_api_server_s_rules_with_the_required_values_and_every_option() {
    let meta = helm().show_chart(Path::new(CHART)).unwrap();
    assert_eq!(meta["appVersion"], env!("CARGO_PKG_VERSION"));
    assert_eq!(meta["version"], env!("CARGO_PKG_VERSION"));
    for (what, values) in [
        ("required values", required()),
        ("every option", all_options()),
        (
            "an existing ServiceAccount",
            with(
                required(),
                json!({"serviceAccount": {"create": false, "name": "existing"}}),
            ),
        ),
    ] {
        let rendered = render(values);
        assert_eq!(
            chart::problems(&rendered, &[NAMESPACE]),
            Vec::<String>::new(),
            "{what}"
        );
    }
    let kinds: Vec<String> = render(required())
        .objects()
        .iter()
        .map(|o| o["kind"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(
        kinds,
        [
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "DaemonSet"
        ]
    );
}

#[test]
fn the_gateway_runs_in_the_node_s_network_namespace_with_net_admin_only() {
    let daemonset = the(&render(required()), "DaemonSet");
    let pod = &daemonset["spec"]["template"]["spec"];
    assert_eq!(pod["hostNetwork"], true);
    assert_eq!(pod["dnsPolicy"], "ClusterFirstWithHostNet");
    assert_eq!(
        pod["nodeSelector"],
        json!({"clusterset.io/gateway": "true"})
    );
    let container = &pod["containers"][0];
    assert_eq!(
        container["securityContext"],
        json!({
            "runAsUser": 0, "runAsNonRoot": false, "allowPrivilegeEscalation": false,
            "readOnlyRootFilesystem": true,
            "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]},
        })
    );
    assert_eq!(
        container["image"],
        format!("clusterset-gateway:{}", env!("CARGO_PKG_VERSION"))
    );
    assert_eq!(container["args"], json!(["run"]));
    assert_eq!(container["readinessProbe"]["httpGet"]["path"], "/readyz");
    assert_eq!(container["livenessProbe"]["httpGet"]["path"], "/healthz");
    assert_eq!(container["ports"][0]["containerPort"], 9092);
    assert_eq!(
        daemonset["spec"]["updateStrategy"],
        json!({"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1}})
    );
    let template_labels = &daemonset["spec"]["template"]["metadata"]["labels"];
    assert_eq!(template_labels["app.kubernetes.io/part-of"], "clusterset");
    assert_eq!(template_labels["app.kubernetes.io/component"], "gateway");
    // The broker credentials: the Secret, mounted where the environment says.
    assert_eq!(
        pod["volumes"],
        json!([{"name": "broker", "secret": {"secretName": "clusterset-broker"}}])
    );
    assert_eq!(
        container["volumeMounts"],
        json!([{"name": "broker", "mountPath": "/etc/clusterset/broker", "readOnly": true}])
    );
}

#[test]
fn the_environment_is_the_gateway_s_flags_and_the_gateway_ip_defaults_to_the_node_s() {
    let daemonset = the(&render(required()), "DaemonSet");
    let container = &daemonset["spec"]["template"]["spec"]["containers"][0];
    let variables = env(container);
    assert!(variables.contains(&(
        "CLUSTERSET_GATEWAY_IP".to_owned(),
        json!({"fieldRef": {"fieldPath": "status.hostIP"}})
    )));
    let with_ip = the(
        &render(with(required(), json!({"gatewayIP": "172.30.0.1"}))),
        "DaemonSet",
    );
    assert!(
        env(&with_ip["spec"]["template"]["spec"]["containers"][0])
            .contains(&("CLUSTERSET_GATEWAY_IP".to_owned(), json!("172.30.0.1")))
    );

    // The binary, given this environment (status.hostIP as the kubelet gives it), accepts
    // every variable and gets as far as reaching the member cluster: no flag is misnamed and
    // no value is refused.
    let dir = tempfile::tempdir().unwrap();
    let mut command = Command::new(env!("CARGO_BIN_EXE_clusterset-gateway"));
    command.arg("run").env_clear();
    for (name, value) in variables {
        let value = match value {
            Value::String(value) if value.starts_with("/etc/clusterset/broker/") => {
                dir.path().join("broker.kubeconfig").display().to_string()
            }
            Value::String(value) => value,
            from => {
                assert_eq!(
                    from,
                    json!({"fieldRef": {"fieldPath": "status.hostIP"}}),
                    "{name}"
                );
                "192.0.2.10".to_owned()
            }
        };
        command.env(name, value);
    }
    command.env("KUBECONFIG", dir.path().join("member.kubeconfig"));
    let output = command.output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(!output.status.success());
    assert!(
        stderr.contains("cannot reach the member cluster") && stderr.contains("member.kubeconfig"),
        "{stderr}"
    );
}

#[test]
fn the_rbac_reads_endpoint_slices_and_nothing_else() {
    let rendered = render(required());
    let role = the(&rendered, "ClusterRole");
    assert_eq!(
        role["rules"],
        json!([{"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"], "verbs": ["get", "list", "watch"]}])
    );
    let binding = the(&rendered, "ClusterRoleBinding");
    assert_eq!(
        binding["subjects"],
        json!([{"kind": "ServiceAccount", "name": RELEASE, "namespace": NAMESPACE}])
    );
    assert!(rendered.of_kind("Role").is_empty());
}

#[test]
fn a_missing_required_value_is_a_render_error_that_names_it() {
    for (value, message) in [
        ("clusterId", "clusterId is required: the agent's cluster id"),
        (
            "globalCidr",
            "globalCidr is required: the agent's IPv4 global CIDR",
        ),
        ("podCidr", "podCidr is required"),
        ("serviceCidr", "serviceCidr is required"),
        (
            "egressIps",
            "egressIps is required: at least one address from the top of globalCidr",
        ),
    ] {
        let mut values = required();
        values.as_object_mut().unwrap().remove(value);
        let failure = helm()
            .template(Path::new(CHART), RELEASE, NAMESPACE, &values)
            .map(|_| ())
            .unwrap_err();
        assert!(
            failure
                .message
                .contains("(clusterset-gateway/templates/daemonset.yaml:")
                && failure.message.contains(message),
            "{value}: {failure}"
        );
    }
}

#[test]
fn helm_lint_passes_with_the_docs_examples() {
    let cases = chart::documented_values(CHART_DIR);
    let names: Vec<&str> = cases.iter().map(|(what, _)| what.as_str()).collect();
    assert!(
        names.contains(&"docs/data-plane.md's example 1"),
        "{names:?}"
    );
    assert_eq!(
        chart::lint_documented(CHART_DIR, RELEASE, NAMESPACE),
        Vec::<String>::new()
    );
}

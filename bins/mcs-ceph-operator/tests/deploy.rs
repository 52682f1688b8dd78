#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! The plain manifests in deploy/mcs-ceph-operator: the CRD is exactly what the binary prints,
//! the RBAC grants exactly what the operator reads and writes (no wildcards), and the
//! Deployment runs two non-root replicas with leader election, a read-only root file system and
//! probes on the operator's HTTP endpoints. The Helm chart in deploy/helm/mcs-ceph-operator
//! renders, with its default values, exactly these objects (Helm is not installed here: a
//! small renderer that knows only the template expressions the chart uses stands in for it).
//! The Dockerfile builds and runs this binary as a non-root user.

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
    let lease = args.lease_settings("mcs-ceph-operator").unwrap().unwrap();
    assert_eq!(
        lease.claim.name, "mcs-ceph-operator",
        "the name the Role grants"
    );
}

// ---- the Helm chart ----

const CHART: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../../deploy/helm/mcs-ceph-operator"
);

fn chart_file(path: &str) -> String {
    std::fs::read_to_string(format!("{CHART}/{path}")).unwrap()
}

fn lookup<'a>(values: &'a Value, path: &str) -> &'a Value {
    let keys = path
        .strip_prefix(".Values.")
        .unwrap_or_else(|| panic!("{path:?} is not a value"));
    let value = keys.split('.').fold(values, |value, key| &value[key]);
    assert!(!value.is_null(), "{path} is not in values.yaml");
    value
}

fn scalar(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Number(_) | Value::Bool(_) => value.to_string(),
        other => panic!("{other} is not a scalar"),
    }
}

/// One template expression, of the few forms the chart may use.
fn evaluate(expression: &str, values: &Value, namespace: &str, app_version: &str) -> String {
    let parts: Vec<&str> = expression.split('|').map(str::trim).collect();
    match parts.as_slice() {
        [".Release.Namespace"] => namespace.to_owned(),
        [path, "quote"] => Value::String(scalar(lookup(values, path))).to_string(),
        [path, "default .Chart.AppVersion"] => {
            let value = scalar(lookup(values, path));
            if value.is_empty() {
                app_version.to_owned()
            } else {
                value
            }
        }
        [to_yaml, nindent] if to_yaml.starts_with("toYaml ") && nindent.starts_with("nindent ") => {
            let value = lookup(values, &to_yaml["toYaml ".len()..]);
            let pad = " ".repeat(nindent["nindent ".len()..].parse().unwrap());
            serde_saphyr::to_string(value)
                .unwrap()
                .lines()
                .map(|line| format!("\n{pad}{line}"))
                .collect()
        }
        [path] if path.starts_with(".Values.") => scalar(lookup(values, path)),
        _ => panic!("template expression {{{{ {expression} }}}} is not one of the known forms"),
    }
}

/// Helm's truth of a value: false, 0, "", null and empty collections are false.
fn truthy(value: &Value) -> bool {
    match value {
        Value::Null => false,
        Value::Bool(b) => *b,
        Value::Number(n) => n.as_f64() != Some(0.0),
        Value::String(s) => !s.is_empty(),
        Value::Array(a) => !a.is_empty(),
        Value::Object(o) => !o.is_empty(),
    }
}

/// Renders a template as Helm would for the expressions [`evaluate`] knows and the actions
/// `if .Values.x`, `else` and `end` (nested), with `{{-`/`-}}` trimming; anything else fails
/// the test.
fn render(template: &str, values: &Value, namespace: &str, app_version: &str) -> String {
    let mut out = String::new();
    let mut rest = template;
    // Per open `if`: whether its enclosing text is emitted, and whether its condition held.
    let mut blocks: Vec<(bool, bool)> = Vec::new();
    let emitting =
        |blocks: &[(bool, bool)]| blocks.last().is_none_or(|(outer, held)| *outer && *held);
    while let Some(start) = rest.find("{{") {
        let (before, after) = rest.split_at(start);
        let end = after.find("}}").expect("unclosed template expression");
        let mut inner = &after[2..end];
        let before = if let Some(trimmed) = inner.strip_prefix('-') {
            inner = trimmed;
            before.trim_end()
        } else {
            before
        };
        if emitting(&blocks) {
            out.push_str(before);
        }
        rest = &after[end + 2..];
        if let Some(trimmed) = inner.strip_suffix('-') {
            inner = trimmed;
            rest = rest.trim_start();
        }
        let action = inner.trim();
        if let Some(path) = action.strip_prefix("if ") {
            let outer = emitting(&blocks);
            blocks.push((outer, truthy(&values_at(values, path.trim()))));
        } else if action == "else" {
            let (outer, held) = blocks.pop().expect("else without if");
            blocks.push((outer, !held));
        } else if action == "end" {
            blocks.pop().expect("end without if");
        } else if emitting(&blocks) {
            out.push_str(&evaluate(action, values, namespace, app_version));
        }
    }
    assert!(blocks.is_empty(), "if without end");
    out.push_str(rest);
    out
}

/// A value by its `.Values.` path (null when absent, as Helm has it).
fn values_at(values: &Value, path: &str) -> Value {
    let keys = path
        .strip_prefix(".Values.")
        .unwrap_or_else(|| panic!("{path:?} is not a value"));
    keys.split('.')
        .fold(values, |value, key| &value[key])
        .clone()
}

type Objects = std::collections::BTreeMap<(String, String), Value>;

fn by_kind_and_name(documents: Vec<Value>) -> Objects {
    documents
        .into_iter()
        .filter(|d| !d.is_null())
        .map(|d| {
            let key = (
                d["kind"].as_str().unwrap().to_owned(),
                d["metadata"]["name"].as_str().unwrap().to_owned(),
            );
            (key, d)
        })
        .collect()
}

#[test]
fn the_chart_with_default_values_renders_the_plain_manifests() {
    let chart: Value = serde_saphyr::from_str(&chart_file("Chart.yaml")).unwrap();
    let values: Value = serde_saphyr::from_str(&chart_file("values.yaml")).unwrap();
    let app_version = chart["appVersion"].as_str().unwrap();
    assert_eq!(app_version, env!("CARGO_PKG_VERSION"));
    assert_eq!(chart["version"], env!("CARGO_PKG_VERSION"));

    let mut rendered = Vec::new();
    let mut templates: Vec<_> = std::fs::read_dir(format!("{CHART}/templates"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().into_string().unwrap())
        .collect();
    templates.sort();
    for name in &templates {
        if name == "crd.yaml" {
            kube_fake::crd::assert_committed(
                "deploy/helm/mcs-ceph-operator/templates/crd.yaml",
                &mcs_ceph_operator::cli::crd_yaml().unwrap(),
                CRD_COMMAND,
            );
            continue;
        }
        let text = chart_file(&format!("templates/{name}"));
        let text = render(&text, &values, "mcs-ceph-operator", app_version);
        rendered.extend(serde_saphyr::from_multiple::<Value>(&text).unwrap());
    }
    let chart_objects = by_kind_and_name(rendered);
    let mut plain = by_kind_and_name(documents("operator.yaml"));
    // The chart leaves the namespace to `helm install --create-namespace`.
    plain.retain(|(kind, _), _| kind != "Namespace");
    assert_eq!(
        chart_objects.keys().collect::<Vec<_>>(),
        plain.keys().collect::<Vec<_>>()
    );
    for (key, object) in &plain {
        assert_eq!(&chart_objects[key], object, "{key:?} differs");
    }
}

#[test]
fn the_chart_renders_its_values_where_they_belong() {
    let mut values: Value = serde_saphyr::from_str(&chart_file("values.yaml")).unwrap();
    values["replicas"] = 1.into();
    values["leaderElection"] = false.into();
    values["image"]["tag"] = "v9".into();
    values["resources"] = serde_json::json!({"limits": {"memory": "1Gi"}});
    let text = render(
        &chart_file("templates/deployment.yaml"),
        &values,
        "ceph-ops",
        "0.1.0",
    );
    let deployment: Value = serde_saphyr::from_str(&text).unwrap();
    assert_eq!(deployment["metadata"]["namespace"], "ceph-ops");
    assert_eq!(deployment["spec"]["replicas"], 1);
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(container["image"], "mcs-ceph-operator:v9");
    assert_eq!(env(container, "MCS_CEPH_LEADER_ELECTION")["value"], "false");
    assert_eq!(
        container["resources"],
        serde_json::json!({"limits": {"memory": "1Gi"}})
    );
}

/// `watchNamespace`: a Role and RoleBinding in that namespace with exactly the ClusterRole's
/// rules, and the operator told to watch only it.
#[test]
fn the_chart_with_a_watch_namespace_grants_a_role_there_and_watches_only_it() {
    let mut values: Value = serde_saphyr::from_str(&chart_file("values.yaml")).unwrap();
    values["watchNamespace"] = "rook-ceph".into();
    let text = render(
        &chart_file("templates/rbac.yaml"),
        &values,
        "mcs-ceph-operator",
        "0.1.0",
    );
    let objects = by_kind_and_name(serde_saphyr::from_multiple::<Value>(&text).unwrap());
    let kinds: Vec<&str> = objects.keys().map(|(kind, _)| kind.as_str()).collect();
    assert_eq!(kinds, ["Role", "RoleBinding"]);
    let role = &objects[&("Role".to_owned(), "mcs-ceph-operator".to_owned())];
    assert_eq!(role["metadata"]["namespace"], "rook-ceph");
    let cluster_role = of_kind(&documents("operator.yaml"), "ClusterRole").clone();
    assert_eq!(role["rules"], cluster_role["rules"]);
    let binding = &objects[&("RoleBinding".to_owned(), "mcs-ceph-operator".to_owned())];
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
    let deployment: Value = serde_saphyr::from_str(&render(
        &chart_file("templates/deployment.yaml"),
        &values,
        "mcs-ceph-operator",
        "0.1.0",
    ))
    .unwrap();
    let container = &deployment["spec"]["template"]["spec"]["containers"][0];
    assert_eq!(
        env(container, "MCS_CEPH_WATCH_NAMESPACE")["value"],
        "rook-ceph"
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

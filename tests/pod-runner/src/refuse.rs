//! What the runner honours, and the refusal by name of everything else (pure).
//!
//! The pod spec is walked as the JSON the API server stores (its field names, so a refusal
//! names the field as `kubectl explain` does): every field present is either honoured, allowed
//! only at a value whose meaning the runner gives (`hostNetwork: false`), a scheduling
//! field the scheduler has already acted on when the pod is bound, or refused. A field this
//! module does not know (a newer API's) is refused too: nothing is ignored silently.

use serde_json::Value;

/// A field of the pod spec that the runner does not honour, so the pod stays Pending.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unsupported {
    /// The field's path in the pod (`spec.volumes[0].projected`).
    pub field: String,
    /// Why, and what value would be accepted when there is one.
    pub reason: String,
}

impl std::fmt::Display for Unsupported {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} ({})", self.field, self.reason)
    }
}

/// Fields the scheduler acts on before the pod is bound to the node, and the pod's identity
/// fields whose only effect is through a token volume (refused below when present): they
/// change nothing about how its processes run.
const SCHEDULING_OR_IDENTITY: &[&str] = &[
    "nodeName",
    "nodeSelector",
    "affinity",
    "tolerations",
    "topologySpreadConstraints",
    "schedulerName",
    "priority",
    "priorityClassName",
    "preemptionPolicy",
    "serviceAccountName",
    "serviceAccount",
    "automountServiceAccountToken",
];

/// The unsupported fields of `spec` (a pod's `spec` as JSON), each by its path; empty when
/// the runner honours the whole spec.
pub fn unsupported_fields(spec: &Value) -> Vec<Unsupported> {
    let mut out = Vec::new();
    let Some(spec) = spec.as_object() else {
        out.push(refusal("spec", "not an object"));
        return out;
    };
    for (key, value) in spec {
        let field = format!("spec.{key}");
        match key.as_str() {
            "containers" | "initContainers" => {
                for (i, container) in items(value).enumerate() {
                    container_fields(
                        &format!("{field}[{i}]"),
                        container,
                        key == "initContainers",
                        &mut out,
                    );
                }
            }
            "volumes" => {
                for (i, volume) in items(value).enumerate() {
                    volume_fields(&format!("{field}[{i}]"), volume, &mut out);
                }
            }
            "restartPolicy" => {
                if !matches!(value.as_str(), Some("Always" | "OnFailure" | "Never")) {
                    out.push(refusal(&field, "not Always, OnFailure or Never"));
                }
            }
            // The containers' hostname (`plan::PodPlan::hostname`).
            "terminationGracePeriodSeconds" | "hostname" => {}
            // The Services' environment variables are given (`plan::service_env`).
            "enableServiceLinks" => {}
            // The pod's resolv.conf, as the kubelet writes it (`plan::resolv_conf`).
            "dnsPolicy" | "dnsConfig" => {}
            "hostNetwork"
            | "hostPID"
            | "hostIPC"
            | "shareProcessNamespace"
            | "setHostnameAsFQDN" => {
                if value != &Value::Bool(false) {
                    out.push(refusal(&field, "only false is honoured"));
                }
            }
            "securityContext" => {
                if !is_empty(value) {
                    for key in value.as_object().into_iter().flat_map(|o| o.keys()) {
                        out.push(refusal(
                            &format!("{field}.{key}"),
                            "the processes run as root with the runner's privileges",
                        ));
                    }
                }
            }
            key if SCHEDULING_OR_IDENTITY.contains(&key) => {}
            _ => out.push(refusal(&field, "not honoured by the pod runner")),
        }
    }
    out
}

fn container_fields(path: &str, container: &Value, init: bool, out: &mut Vec<Unsupported>) {
    let Some(container) = container.as_object() else {
        out.push(refusal(path, "not an object"));
        return;
    };
    for (key, value) in container {
        let field = format!("{path}.{key}");
        match key.as_str() {
            // The image is the Ceph root filesystem whatever it names; nothing is pulled.
            "name" | "image" | "imagePullPolicy" | "command" | "args" | "workingDir" => {}
            // Declarations only (as on a kubelet); a host port would need the node's network.
            "ports" => {
                for (i, port) in items(value).enumerate() {
                    if port.get("hostPort").is_some() || port.get("hostIP").is_some() {
                        out.push(refusal(
                            &format!("{field}[{i}].hostPort"),
                            "host ports are not honoured",
                        ));
                    }
                }
            }
            "env" => {
                for (i, var) in items(value).enumerate() {
                    env_fields(&format!("{field}[{i}]"), var, out);
                }
            }
            "envFrom" => {
                for (i, source) in items(value).enumerate() {
                    for (key, _) in source.as_object().into_iter().flatten() {
                        if !matches!(key.as_str(), "configMapRef" | "secretRef" | "prefix") {
                            out.push(refusal(&format!("{field}[{i}].{key}"), "not honoured"));
                        }
                    }
                }
            }
            "volumeMounts" => {
                for (i, mount) in items(value).enumerate() {
                    for (key, value) in mount.as_object().into_iter().flatten() {
                        let ok = match key.as_str() {
                            "name" | "mountPath" | "readOnly" => true,
                            "mountPropagation" => value.as_str() == Some("None"),
                            // Checked when planned (a relative path inside the volume).
                            "subPath" | "subPathExpr" => value.is_string(),
                            _ => false,
                        };
                        if !ok {
                            out.push(refusal(&format!("{field}[{i}].{key}"), "not honoured"));
                        }
                    }
                }
            }
            "resources" => {
                for key in value.as_object().into_iter().flat_map(|o| o.keys()) {
                    if !is_empty(&value[key]) {
                        out.push(refusal(
                            &format!("{field}.{key}"),
                            "no cgroups: requests and limits are not enforced",
                        ));
                    }
                }
            }
            // The API server's defaults: no termination message is read.
            "terminationMessagePath" if value.as_str() == Some("/dev/termination-log") => {}
            "terminationMessagePolicy" if value.as_str() == Some("File") => {}
            "securityContext" => {
                for (key, value) in value.as_object().into_iter().flatten() {
                    if !is_empty(value) && !runs_as_it_says(key, value) {
                        out.push(refusal(
                            &format!("{field}.{key}"),
                            "the processes run as root, on a writable root, with the default \
                             capabilities (all if privileged) and the capabilities added or dropped",
                        ));
                    }
                }
            }
            "restartPolicy" if init => {
                out.push(refusal(&field, "sidecar containers are not honoured"))
            }
            "livenessProbe" | "readinessProbe" | "startupProbe" if !init => {
                for (key, _) in value.as_object().into_iter().flatten() {
                    let ok = matches!(
                        key.as_str(),
                        "exec"
                            | "tcpSocket"
                            | "httpGet"
                            | "initialDelaySeconds"
                            | "periodSeconds"
                            | "timeoutSeconds"
                            | "successThreshold"
                            | "failureThreshold"
                    );
                    if !ok {
                        out.push(refusal(
                            &format!("{field}.{key}"),
                            "only exec, tcpSocket and httpGet probes are honoured",
                        ));
                    }
                }
            }
            _ => out.push(refusal(&field, "not honoured by the pod runner")),
        }
    }
}

/// Whether the runner does what a container's `securityContext` field asks: its processes
/// run as root (user and group 0), with privilege escalation, on a writable root filesystem,
/// with the container runtimes' default capabilities, or all of them if `privileged`, and the
/// capabilities `add`ed or `drop`ped (Rook's daemons ask for `runAsUser: 0`,
/// `runAsNonRoot: false`, `readOnlyRootFilesystem: false`, `privileged` true or false).
fn runs_as_it_says(key: &str, value: &Value) -> bool {
    match key {
        "runAsUser" | "runAsGroup" => value.as_i64() == Some(0),
        "runAsNonRoot" | "readOnlyRootFilesystem" => value == &Value::Bool(false),
        "allowPrivilegeEscalation" => value == &Value::Bool(true),
        "privileged" => value.is_boolean(),
        "capabilities" => value
            .as_object()
            .is_some_and(|o| o.keys().all(|k| k == "add" || k == "drop")),
        _ => false,
    }
}

fn env_fields(path: &str, var: &Value, out: &mut Vec<Unsupported>) {
    let Some(from) = var.get("valueFrom") else {
        return;
    };
    for (key, value) in from.as_object().into_iter().flatten() {
        let field = format!("{path}.valueFrom.{key}");
        match key.as_str() {
            "configMapKeyRef" | "secretKeyRef" => {}
            "fieldRef" => {
                let path = value.get("fieldPath").and_then(Value::as_str).unwrap_or("");
                if crate::plan::field_ref_supported(path).is_none() {
                    out.push(refusal(
                        &format!("{field}.fieldPath"),
                        &format!(
                            "{path:?} is not one of {}",
                            crate::plan::FIELD_REFS.join(", ")
                        ),
                    ));
                }
            }
            "resourceFieldRef" => {
                let resource = value.get("resource").and_then(Value::as_str).unwrap_or("");
                if !crate::plan::RESOURCE_FIELDS.contains(&resource) {
                    out.push(refusal(
                        &format!("{field}.resource"),
                        &format!(
                            "{resource:?} is not one of {}",
                            crate::plan::RESOURCE_FIELDS.join(", ")
                        ),
                    ));
                }
            }
            _ => out.push(refusal(&field, "not honoured")),
        }
    }
}

fn volume_fields(path: &str, volume: &Value, out: &mut Vec<Unsupported>) {
    for (key, value) in volume.as_object().into_iter().flatten() {
        let field = format!("{path}.{key}");
        match key.as_str() {
            "name" | "configMap" | "secret" => {}
            "downwardAPI" => downward_items(&field, &value["items"], out),
            "projected" => {
                for (i, source) in items(&value["sources"]).enumerate() {
                    for (key, value) in source.as_object().into_iter().flatten() {
                        let source = format!("{field}.sources[{i}].{key}");
                        match key.as_str() {
                            "configMap" | "secret" | "serviceAccountToken" => {}
                            "downwardAPI" => downward_items(&source, &value["items"], out),
                            _ => out.push(refusal(&source, "this projection is not honoured")),
                        }
                    }
                }
            }
            "emptyDir" => {
                for (key, value) in value.as_object().into_iter().flatten() {
                    let ok = key == "medium" && value.as_str() == Some("");
                    if !ok {
                        out.push(refusal(&format!("{field}.{key}"), "not honoured"));
                    }
                }
            }
            "hostPath" => {
                let kind = value.get("type").and_then(Value::as_str).unwrap_or("");
                if !matches!(
                    kind,
                    "" | "Directory" | "DirectoryOrCreate" | "File" | "FileOrCreate"
                ) {
                    out.push(refusal(
                        &format!("{field}.type"),
                        "only Directory, DirectoryOrCreate, File, FileOrCreate or none",
                    ));
                }
            }
            _ => out.push(refusal(&field, "this volume type is not honoured")),
        }
    }
}

/// A downward API volume's (or projection's) items: the pod's metadata fields only.
fn downward_items(path: &str, list: &Value, out: &mut Vec<Unsupported>) {
    for (i, item) in items(list).enumerate() {
        if item.get("resourceFieldRef").is_some() {
            out.push(refusal(
                &format!("{path}.items[{i}].resourceFieldRef"),
                "no resources are known",
            ));
        }
        let field = item["fieldRef"]["fieldPath"].as_str().unwrap_or("");
        let metadata = field.starts_with("metadata.");
        if item.get("fieldRef").is_some()
            && !(matches!(field, "metadata.labels" | "metadata.annotations")
                || metadata && crate::plan::field_ref_supported(field).is_some())
        {
            out.push(refusal(
                &format!("{path}.items[{i}].fieldRef.fieldPath"),
                &format!("{field:?} is not a metadata field the runner resolves"),
            ));
        }
    }
}

fn items(value: &Value) -> impl Iterator<Item = &Value> {
    value.as_array().into_iter().flatten()
}

fn is_empty(value: &Value) -> bool {
    match value {
        Value::Null => true,
        Value::Object(o) => o.values().all(is_empty),
        Value::Array(a) => a.is_empty(),
        _ => false,
    }
}

fn refusal(field: &str, reason: &str) -> Unsupported {
    Unsupported {
        field: field.to_owned(),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn fields(spec: Value) -> Vec<String> {
        unsupported_fields(&spec)
            .into_iter()
            .map(|u| u.field)
            .collect()
    }

    /// A spec as the API server stores it after defaulting, with the pod author's choices the
    /// runner needs (no token volume, no Service links, the root's DNS).
    fn defaulted() -> Value {
        json!({
            "containers": [{
                "name": "c", "image": "ceph", "command": ["/bin/sh"], "args": ["-c", "true"],
                "imagePullPolicy": "IfNotPresent", "resources": {},
                "terminationMessagePath": "/dev/termination-log",
                "terminationMessagePolicy": "File",
                "env": [{"name": "IP", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "status.podIP"}}}],
                "volumeMounts": [{"name": "v", "mountPath": "/etc/x", "readOnly": true}],
            }],
            "volumes": [{"name": "v", "configMap": {"name": "x", "defaultMode": 420}}],
            "restartPolicy": "Always", "terminationGracePeriodSeconds": 30,
            "dnsPolicy": "Default", "securityContext": {}, "schedulerName": "default-scheduler",
            "enableServiceLinks": false, "automountServiceAccountToken": false,
            "serviceAccountName": "default", "serviceAccount": "default", "nodeName": "n",
            "priority": 0, "preemptionPolicy": "PreemptLowerPriority",
            "tolerations": [{"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}],
        })
    }

    #[test]
    fn a_defaulted_spec_of_honoured_fields_is_accepted() {
        assert_eq!(fields(defaulted()), Vec::<String>::new());
    }

    #[test]
    fn each_unsupported_field_is_named_by_its_path() {
        let mut spec = defaulted();
        spec["volumes"].as_array_mut().unwrap().push(json!({"name": "token", "projected": {"sources": [
            {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [
                {"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}},
                {"path": "mem", "resourceFieldRef": {"resource": "limits.memory"}},
            ]}},
            {"clusterTrustBundle": {"path": "bundle"}},
        ]}}));
        spec["volumes"].as_array_mut().unwrap().push(
            json!({"name": "labels", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "ip", "fieldRef": {"fieldPath": "status.podIP"}},
            ]}}),
        );
        spec["containers"][0]["livenessProbe"] = json!({"grpc": {"port": 80}, "periodSeconds": 1});
        spec["containers"][0]["startupProbe"] =
            json!({"exec": {"command": ["true"]}, "failureThreshold": 6});
        spec["containers"][0]["resources"] = json!({"limits": {"cpu": "1"}, "requests": {}});
        spec["containers"][0]["volumeMounts"][0]["mountPropagation"] = json!("Bidirectional");
        spec["containers"][0]["env"]
            .as_array_mut()
            .unwrap()
            .push(json!({"name": "H", "valueFrom": {"fieldRef": {"fieldPath": "status.hostIP"}}}));
        spec["containers"][0]["ports"] = json!([{"containerPort": 80, "hostPort": 80}]);
        spec["initContainers"] = json!([{"name": "s", "restartPolicy": "Always"}]);
        spec["hostNetwork"] = json!(true);
        spec["securityContext"] = json!({"runAsUser": 167});
        spec["readinessGates"] = json!([{"conditionType": "x"}]);
        spec["someFutureField"] = json!({});
        let mut got = fields(spec);
        got.sort();
        assert_eq!(
            got,
            [
                "spec.containers[0].env[1].valueFrom.fieldRef.fieldPath",
                "spec.containers[0].livenessProbe.grpc",
                "spec.containers[0].ports[0].hostPort",
                "spec.containers[0].resources.limits",
                "spec.containers[0].volumeMounts[0].mountPropagation",
                "spec.hostNetwork",
                "spec.initContainers[0].restartPolicy",
                "spec.readinessGates",
                "spec.securityContext.runAsUser",
                "spec.someFutureField",
                "spec.volumes[1].projected.sources[2].downwardAPI.items[1].resourceFieldRef",
                "spec.volumes[1].projected.sources[3].clusterTrustBundle",
                "spec.volumes[2].downwardAPI.items[1].fieldRef.fieldPath",
            ]
        );
    }

    #[test]
    fn every_dns_policy_and_a_dns_config_are_accepted() {
        for policy in ["ClusterFirst", "ClusterFirstWithHostNet", "Default", "None"] {
            let mut spec = defaulted();
            spec["dnsPolicy"] = json!(policy);
            spec["dnsConfig"] =
                json!({"nameservers": ["10.0.0.1"], "options": [{"name": "ndots", "value": "2"}]});
            assert_eq!(fields(spec), Vec::<String>::new(), "{policy}");
        }
    }

    #[test]
    fn a_containers_security_context_is_accepted_only_where_it_says_what_the_runner_does() {
        let mut spec = defaulted();
        spec["containers"][0]["securityContext"] = json!({
            "runAsUser": 0, "runAsNonRoot": false, "readOnlyRootFilesystem": false,
            "privileged": false, "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN"]},
        });
        assert_eq!(fields(spec.clone()), Vec::<String>::new());
        spec["containers"][0]["securityContext"] = json!({
            "runAsUser": 167, "seccompProfile": {"type": "RuntimeDefault"},
        });
        assert_eq!(
            fields(spec),
            [
                "spec.containers[0].securityContext.runAsUser",
                "spec.containers[0].securityContext.seccompProfile",
            ]
        );
    }

    #[test]
    fn empty_dir_and_host_path_are_honoured_in_their_plain_forms_only() {
        let mut spec = defaulted();
        spec["volumes"] = json!([
            {"name": "a", "emptyDir": {}},
            {"name": "b", "emptyDir": {"medium": "Memory"}},
            {"name": "c", "hostPath": {"path": "/var/lib/rook", "type": "DirectoryOrCreate"}},
            {"name": "d", "hostPath": {"path": "/dev", "type": "CharDevice"}},
        ]);
        assert_eq!(
            fields(spec),
            [
                "spec.volumes[1].emptyDir.medium",
                "spec.volumes[3].hostPath.type"
            ]
        );
    }
}

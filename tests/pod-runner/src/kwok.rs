//! kwok's stages with the runner's pods left out (pure): kwok stays the node, the runner
//! reports the status of the pods it runs and confirms their deletion.

use serde_json::{Value, json};

use crate::MARKER;

/// Why kwok's stages could not be rewritten.
#[derive(Debug, thiserror::Error)]
pub enum StagesError {
    /// The stages are not YAML documents.
    #[error("kwok's stages are not YAML: {0}")]
    Yaml(String),
    /// A Pod stage has no `spec.selector.matchExpressions` list to extend.
    #[error("kwok's Pod stage {0:?} has no spec.selector.matchExpressions list")]
    NoSelector(String),
}

/// kwok's stages (`stages.yaml` as `tests/k8s-tools/build.sh` writes it) with one requirement
/// added to every stage of `kind: Pod`: the pod has no label [`MARKER`]. Node stages are kept
/// as they are, so kwok keeps the node Ready and its Lease renewed.
pub fn kwok_stages_leaving_marked_pods(stages: &str) -> Result<String, StagesError> {
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(stages).map_err(|e| StagesError::Yaml(e.to_string()))?;
    let mut out = Vec::new();
    for mut stage in documents.into_iter().filter(|d| !d.is_null()) {
        if stage["spec"]["resourceRef"]["kind"] == "Pod" {
            let name = stage["metadata"]["name"].as_str().unwrap_or("").to_owned();
            let expressions = stage["spec"]["selector"]["matchExpressions"]
                .as_array_mut()
                .ok_or(StagesError::NoSelector(name))?;
            expressions.push(json!({
                "key": format!(".metadata.labels[\"{MARKER}\"]"),
                "operator": "DoesNotExist",
            }));
        }
        out.push(stage);
    }
    serde_saphyr::to_string_multiple(&out).map_err(|e| StagesError::Yaml(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const STAGES: &str = r#"---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: node-initialize
spec:
  resourceRef: {apiGroup: v1, kind: Node}
  selector:
    matchExpressions:
    - {key: '.status.phase', operator: 'NotIn', values: ['Running']}
  next: {statusTemplate: "phase: Running\n"}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata:
  name: pod-delete
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selector:
    matchExpressions:
    - {key: '.metadata.deletionTimestamp', operator: 'Exists'}
  next: {delete: true}
"#;

    #[test]
    fn pod_stages_skip_marked_pods_and_node_stages_are_kept() {
        let rewritten = kwok_stages_leaving_marked_pods(STAGES).unwrap();
        let documents: Vec<Value> = serde_saphyr::from_multiple(&rewritten).unwrap();
        assert_eq!(documents.len(), 2);
        let node = &documents[0]["spec"]["selector"]["matchExpressions"];
        assert_eq!(node.as_array().unwrap().len(), 1);
        assert_eq!(
            documents[0]["spec"]["next"]["statusTemplate"],
            "phase: Running\n"
        );
        let pod = documents[1]["spec"]["selector"]["matchExpressions"]
            .as_array()
            .unwrap();
        assert_eq!(
            pod[1],
            json!({"key": ".metadata.labels[\"clusterset.io/pod-runner\"]", "operator": "DoesNotExist"})
        );
        assert_eq!(documents[1]["spec"]["next"]["delete"], true);
    }

    #[test]
    fn the_stages_of_the_built_tools_are_rewritten() {
        // The stages the e2e harness gives kwok, as built (the test fails, with the command,
        // when they are not).
        let path = std::path::Path::new(
            &std::env::var("CLUSTERSET_K8S_TOOLS")
                .unwrap_or_else(|_| "/var/cache/clusterset/k8s-tools".to_owned()),
        )
        .join("kwok/stages.yaml");
        let stages = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: {e}; build it with `bash tests/k8s-tools/build.sh kwok`",
                path.display()
            )
        });
        let rewritten: Vec<Value> =
            serde_saphyr::from_multiple(&kwok_stages_leaving_marked_pods(&stages).unwrap())
                .unwrap();
        let pods: Vec<&str> = rewritten
            .iter()
            .filter(|s| s["spec"]["resourceRef"]["kind"] == "Pod")
            .filter(|s| {
                s["spec"]["selector"]["matchExpressions"]
                    .to_string()
                    .contains(MARKER)
            })
            .filter_map(|s| s["metadata"]["name"].as_str())
            .collect();
        assert_eq!(pods, ["pod-ready", "pod-complete", "pod-delete"]);
    }
}

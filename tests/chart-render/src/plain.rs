//! The plain manifests of `deploy/` beside a chart: the same objects as the chart renders,
//! without the labels only Helm's own install is entitled to (`helm.sh/chart`,
//! `app.kubernetes.io/managed-by: Helm`), keyed by kind and name for comparison.

use std::collections::BTreeMap;

use serde_json::Value;

/// The labels a chart sets that say Helm installed the object: a plain manifest applied with
/// kubectl leaves them out.
pub const HELM_ONLY_LABELS: &[&str] = &["helm.sh/chart", "app.kubernetes.io/managed-by"];

/// `object` without [`HELM_ONLY_LABELS`], in its metadata and in a pod template's.
pub fn without_helm_labels(object: &Value) -> Value {
    let mut object = object.clone();
    for pointer in ["/metadata/labels", "/spec/template/metadata/labels"] {
        if let Some(Value::Object(labels)) = object.pointer_mut(pointer) {
            for label in HELM_ONLY_LABELS {
                labels.remove(*label);
            }
        }
    }
    object
}

/// Objects by `(kind, name)`; documents without either are left out.
pub fn by_kind_and_name<'a>(
    objects: impl IntoIterator<Item = &'a Value>,
) -> BTreeMap<(String, String), Value> {
    objects
        .into_iter()
        .filter_map(|object| {
            let kind = object["kind"].as_str()?;
            let name = object["metadata"]["name"].as_str()?;
            Some(((kind.to_owned(), name.to_owned()), object.clone()))
        })
        .collect()
}

/// What differs between a chart's rendered `chart` objects (Helm-only labels dropped) and the
/// `plain` manifests (a Namespace among them left out: the chart leaves it to `helm install
/// --create-namespace`): one line per object missing on either side or different.
pub fn differences(chart: &[&Value], plain: &[Value]) -> Vec<String> {
    let chart = by_kind_and_name(chart.iter().copied())
        .into_iter()
        .map(|(key, object)| (key, without_helm_labels(&object)))
        .collect::<BTreeMap<_, _>>();
    let mut plain = by_kind_and_name(plain);
    plain.retain(|(kind, _), _| kind != "Namespace");
    let mut differences = Vec::new();
    for (key, object) in &chart {
        match plain.get(key) {
            None => differences.push(format!(
                "{key:?}: rendered by the chart, not in the plain manifests"
            )),
            Some(plain_object) if plain_object != object => differences.push(format!(
                "{key:?} differs:\n  chart: {object}\n  plain: {plain_object}"
            )),
            Some(_) => {}
        }
    }
    for key in plain.keys().filter(|key| !chart.contains_key(*key)) {
        differences.push(format!(
            "{key:?}: in the plain manifests, not rendered by the chart"
        ));
    }
    differences
}

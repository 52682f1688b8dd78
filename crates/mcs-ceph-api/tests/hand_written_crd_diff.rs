//! TEMPORARY: the generated CephClusterAddressing CRD against the hand-written one it replaces
//! (tests/fixtures/hand-written-crds), descriptions ignored; prints every difference.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, missing_docs)]
use serde_json::Value;
// Temporary structural comparison of a generated CRD with the hand-written one it replaces.
fn without_descriptions(schema: &Value) -> Value {
    match schema {
        Value::Object(node) => Value::Object(
            node.iter()
                .filter(|(k, _)| k.as_str() != "description")
                .map(|(k, v)| {
                    if k == "properties" {
                        let props = v
                            .as_object()
                            .unwrap()
                            .iter()
                            .map(|(n, p)| (n.clone(), without_descriptions(p)))
                            .collect();
                        (k.clone(), Value::Object(props))
                    } else {
                        (k.clone(), without_descriptions(v))
                    }
                })
                .collect(),
        ),
        Value::Array(items) => Value::Array(items.iter().map(without_descriptions).collect()),
        other => other.clone(),
    }
}

fn differences(path: &str, a: &Value, b: &Value, out: &mut Vec<String>) {
    match (a, b) {
        (Value::Object(x), Value::Object(y)) => {
            let keys: std::collections::BTreeSet<_> = x.keys().chain(y.keys()).collect();
            for key in keys {
                let here = format!("{path}.{key}");
                match (x.get(key), y.get(key)) {
                    (Some(p), Some(q)) => differences(&here, p, q, out),
                    (Some(p), None) => out.push(format!("{here}: only generated: {p}")),
                    (None, Some(q)) => out.push(format!("{here}: only hand-written: {q}")),
                    (None, None) => {}
                }
            }
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            for (i, (p, q)) in x.iter().zip(y).enumerate() {
                differences(&format!("{path}[{i}]"), p, q, out);
            }
        }
        _ if a != b => out.push(format!("{path}: generated {a} != hand-written {b}")),
        _ => {}
    }
}

fn compare(generated: &Value, hand_written: &Value) -> Vec<String> {
    let mut out = Vec::new();
    differences(
        "",
        &without_descriptions(generated),
        &without_descriptions(hand_written),
        &mut out,
    );
    out
}

#[test]
fn differences_from_the_hand_written_crd() {
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../tests/fixtures/hand-written-crds/cephclusteraddressings.clusterset.io.yaml"
    ))
    .unwrap();
    let hand_written: Value = serde_saphyr::from_str(&text).unwrap();
    let generated = serde_json::to_value(mcs_ceph_api::crd().unwrap()).unwrap();
    let diffs = compare(&generated, &hand_written);
    println!("{}", serde_json::to_string_pretty(&generated).unwrap());
    println!("DIFFERENCES ({}):\n{}", diffs.len(), diffs.join("\n"));
}

//! The checks every CRD of ours goes through, in one place for the CRD tests of its crate
//! (mcs-controller's `ExportRecord`, mcs-ceph-api's `CephClusterAddressing`) and the tests of
//! the binaries that print it: [`CrdCheck`] holds the generated CRD with an API server's
//! catalog that serves it (kube-syntax's rules) and asks whether objects are accepted, refused
//! or pruned; [`assert_committed`] holds a file under `deploy/` to what a command prints, and
//! names the command that regenerates it.

use kube_syntax::crd::crd_errors;
use kube_syntax::object::{Catalog, Completeness};
use serde::Serialize;
use serde_json::Value;

/// A CRD and an API server that serves it (the built-in kinds and this CRD).
#[derive(Debug)]
pub struct CrdCheck {
    crd: Value,
    catalog: Catalog,
}

impl CrdCheck {
    /// The check of `crd` (a `CustomResourceDefinition`, as generated).
    pub fn new(crd: &impl Serialize) -> Self {
        let crd = serde_json::to_value(crd).expect("a CRD serializes to JSON");
        let catalog = Catalog::builtin().with_crd(&crd);
        Self { crd, catalog }
    }

    /// The CRD as JSON.
    pub fn crd(&self) -> &Value {
        &self.crd
    }

    /// Fails unless the API server accepts the CRD itself (its names, its structural schema,
    /// the annotations its group needs).
    pub fn assert_crd_accepted(&self) {
        let errors = crd_errors(&self.crd);
        assert!(
            errors.is_empty(),
            "{} would be refused: {errors:#?}",
            self.crd["metadata"]["name"]
        );
    }

    /// What the API server refuses of `object` stored whole (field path, kind of error and
    /// detail, one line each), as it would answer a create.
    pub fn refused(&self, object: &Value) -> Vec<String> {
        self.catalog
            .object_errors(object, Completeness::Whole)
            .iter()
            .map(ToString::to_string)
            .collect()
    }

    /// `object` as the API server stores it: without the fields its schema does not keep.
    pub fn pruned(&self, object: &Value) -> Value {
        let mut pruned = object.clone();
        self.catalog.prune(&mut pruned);
        pruned
    }

    /// Fails unless `object` is accepted and stored whole (pruning drops nothing); `what`
    /// names it in the failure.
    pub fn assert_accepted_and_kept(&self, object: &Value, what: &str) {
        assert_eq!(self.refused(object), Vec::<String>::new(), "{what}");
        assert_eq!(
            &self.pruned(object),
            object,
            "{what}: pruning dropped fields"
        );
    }

    /// Fails unless one of the refusals of `object` starts with `expected` (a field path and
    /// the kind of error, like `spec.clusterId: Invalid value`); `what` names the case.
    pub fn assert_refused(&self, object: &Value, expected: &str, what: &str) {
        let errors = self.refused(object);
        assert!(
            errors.iter().any(|e| e.starts_with(expected)),
            "{what}: expected {expected:?}, got {errors:#?}"
        );
    }
}

/// Fails unless the workspace's `file` (a path from the workspace root, like
/// `deploy/clusterset-agent/broker-crd.yaml`) holds exactly `generated`, what `command` prints;
/// the failure says how to regenerate it (`command > file`).
pub fn assert_committed(file: &str, generated: &str, command: &str) {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../..");
    let committed = std::fs::read_to_string(format!("{path}/{file}"))
        .unwrap_or_else(|error| panic!("reading {file}: {error}"));
    assert!(
        committed == generated,
        "{file} is not what `{command}` prints; regenerate with: {command} > {file}"
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// A CRD of one namespaced kind whose spec has a required string `size` of at most 3
    /// characters and nothing else.
    fn widgets() -> CrdCheck {
        CrdCheck::new(&json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com"},
            "spec": {
                "group": "example.com", "scope": "Namespaced",
                "names": {"kind": "Widget", "plural": "widgets", "singular": "widget", "listKind": "WidgetList"},
                "versions": [{
                    "name": "v1", "served": true, "storage": true,
                    "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                        "spec": {"type": "object", "required": ["size"], "properties": {
                            "size": {"type": "string", "maxLength": 3}}}}}}
                }]
            }
        }))
    }

    fn widget(spec: Value) -> Value {
        json!({"apiVersion": "example.com/v1", "kind": "Widget",
               "metadata": {"name": "w", "namespace": "shop"}, "spec": spec})
    }

    #[test]
    fn objects_are_accepted_refused_and_pruned_as_the_crd_says() {
        let check = widgets();
        check.assert_crd_accepted();
        check.assert_accepted_and_kept(&widget(json!({"size": "S"})), "a small widget");
        check.assert_refused(
            &widget(json!({"size": "XXXL"})),
            "spec.size: Too long",
            "too long",
        );
        check.assert_refused(&widget(json!({})), "spec.size: Required value", "no size");
        assert_eq!(
            check.pruned(&widget(json!({"size": "S", "color": "red"}))),
            widget(json!({"size": "S"}))
        );
    }

    #[test]
    #[should_panic(expected = "spec.color: field not declared in schema")]
    fn an_object_with_a_field_the_schema_lacks_is_not_accepted_and_kept() {
        widgets().assert_accepted_and_kept(&widget(json!({"size": "S", "color": "red"})), "w");
    }

    #[test]
    #[should_panic(expected = "expected \"spec.size: Too long\"")]
    fn an_accepted_object_is_not_refused() {
        widgets().assert_refused(&widget(json!({"size": "S"})), "spec.size: Too long", "w");
    }

    #[test]
    #[should_panic(expected = "would be refused")]
    fn a_crd_without_a_schema_is_refused() {
        let mut crd = widgets().crd().clone();
        crd["spec"]["versions"][0]
            .as_object_mut()
            .unwrap()
            .remove("schema");
        CrdCheck::new(&crd).assert_crd_accepted();
    }

    #[test]
    fn a_committed_file_must_be_what_the_command_prints() {
        let file = "deploy/clusterset-agent/hub.yaml";
        let text = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../deploy/clusterset-agent/hub.yaml"
        ))
        .unwrap();
        assert_committed(file, &text, "cmd");
        let other = std::panic::catch_unwind(|| assert_committed(file, "other", "cmd"))
            .unwrap_err()
            .downcast::<String>()
            .unwrap();
        assert_eq!(
            *other,
            "deploy/clusterset-agent/hub.yaml is not what `cmd` prints; regenerate with: cmd > deploy/clusterset-agent/hub.yaml"
        );
    }
}

//! The Helm the charts' tests run is the Helm 4 the repository pins (tests/k8s-tools/helm), and
//! the helper runs it as a user would: values from a file merged over values.yaml (`null`
//! deleting a key), the manifest read into objects, NOTES.txt rendered as an install renders
//! it, `required`'s message and the command line in a failure, `--strict` lint warnings failing.
//! These tests fail, naming `bash tests/k8s-tools/build.sh helm`, when Helm is not built.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use kube_fake::helm::{helm, workspace_root};
use serde_json::json;

#[test]
fn the_helm_run_is_the_helm_4_the_repository_pins() {
    let go_mod =
        std::fs::read_to_string(workspace_root().join("tests/k8s-tools/helm/go.mod")).unwrap();
    let pinned = go_mod
        .lines()
        .find_map(|line| line.trim().strip_prefix("helm.sh/helm/v4 "))
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("no helm.sh/helm/v4 in tests/k8s-tools/helm/go.mod"));
    let version = helm().version().unwrap();
    assert!(version.starts_with("v4."), "{version}");
    assert_eq!(version, pinned);
}

fn write(dir: &Path, path: &str, text: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A small chart: a ConfigMap from a helper and values, NOTES, a partial.
fn chart() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "Chart.yaml",
        "apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: \"4.5\"\nicon: https://example.com/icon.png\n",
    );
    write(
        d,
        "values.yaml",
        "port: 80\nextra: {a: 1, b: 2}\nenabled: true\nname: web\n",
    );
    write(
        d,
        "templates/_helpers.tpl",
        "{{- define \"demo.labels\" -}}\napp.kubernetes.io/name: {{ .Chart.Name }}\n{{- end }}\n",
    );
    write(
        d,
        "templates/objects.yaml",
        "{{- if .Values.enabled }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ required \"name is required\" .Values.name }}-config\n  namespace: {{ .Release.Namespace }}\n  labels:\n    {{- include \"demo.labels\" . | nindent 4 }}\ndata:\n  extra: {{ toYaml .Values.extra | quote }}\n  port: {{ .Values.port | quote }}\n{{- end }}\n",
    );
    write(
        d,
        "templates/NOTES.txt",
        "{{ .Chart.Name }} {{ .Chart.AppVersion }} as {{ .Release.Name }} in {{ .Release.Namespace }}\n",
    );
    dir
}

#[test]
fn a_chart_renders_with_values_merged_and_its_notes_as_an_install_renders_them() {
    let dir = chart();
    let rendered = helm()
        .template(
            dir.path(),
            "web",
            "shop",
            &json!({"port": 8080, "extra": {"a": null, "c": 3}}),
        )
        .unwrap();
    assert_eq!(rendered.objects().len(), 1, "{}", rendered.manifest);
    let config = rendered.object("ConfigMap", "web-config").unwrap();
    assert_eq!(config["metadata"]["namespace"], "shop");
    assert_eq!(
        config["metadata"]["labels"],
        json!({"app.kubernetes.io/name": "demo"})
    );
    assert_eq!(
        config["data"],
        json!({"extra": "b: 2\nc: 3", "port": "8080"})
    );
    let off = helm()
        .template(dir.path(), "web", "shop", &json!({"enabled": false}))
        .unwrap();
    assert!(off.objects().is_empty());
    assert_eq!(
        helm()
            .notes(dir.path(), "web", "shop", &json!({}))
            .unwrap()
            .trim_end(),
        "demo 4.5 as web in shop"
    );
    assert_eq!(helm().show_chart(dir.path()).unwrap()["appVersion"], "4.5");
}

#[test]
fn a_failure_names_the_command_and_says_what_helm_said() {
    let dir = chart();
    let failure = helm()
        .template(dir.path(), "web", "shop", &json!({"name": ""}))
        .unwrap_err();
    assert!(
        failure
            .message
            .contains("execution error at (demo/templates/objects.yaml:5:")
            && failure.message.contains("): name is required"),
        "{failure}"
    );
    assert!(
        failure.command.starts_with(&format!(
            "helm template web {} --namespace shop -f ",
            dir.path().display()
        )),
        "{failure}"
    );
    // What Helm renders but is no object is refused when it is read.
    write(dir.path(), "templates/bad.yaml", "just: a map\n");
    let failure = helm()
        .template(dir.path(), "web", "shop", &json!({}))
        .unwrap_err();
    assert!(
        failure.message.contains("is not a Kubernetes object"),
        "{failure}"
    );
}

#[test]
fn lint_is_strict() {
    let dir = chart();
    let report = helm().lint(dir.path(), "shop", &[]).unwrap();
    assert!(
        report.contains("1 chart(s) linted, 0 chart(s) failed"),
        "{report}"
    );
    // A warning fails the strict lint: an API version removed from Kubernetes.
    write(
        dir.path(),
        "templates/pdb.yaml",
        "apiVersion: policy/v1beta1\nkind: PodDisruptionBudget\nmetadata:\n  name: web\n  namespace: {{ .Release.Namespace }}\nspec:\n  maxUnavailable: 1\n  selector: {matchLabels: {a: b}}\n",
    );
    let failure = helm().lint(dir.path(), "shop", &[]).unwrap_err();
    assert!(
        failure.command.starts_with("helm lint --strict"),
        "{failure}"
    );
    assert!(
        failure.message.contains(
            "[WARNING] templates/pdb.yaml: policy/v1beta1 PodDisruptionBudget is deprecated"
        ) && failure
            .message
            .contains("1 chart(s) linted, 1 chart(s) failed"),
        "{failure}"
    );
}

//! A chart directory rendered as `helm template` renders it: values merged, named templates
//! shared across files, partials (`_*.tpl`) not rendered, NOTES.txt apart, documents split;
//! what the renderer does not implement (subcharts, crds/, a values schema, numbers the two YAML
//! parsers read differently) refused; and the
//! check of rendered objects by kube-syntax's rules.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::Path;

use chart_render::{Chart, Release, RenderError, check, merge, plain};
use serde_json::{Value, json};

fn write(dir: &Path, path: &str, text: &str) {
    let path = dir.join(path);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A small chart: a ConfigMap and a Service from a helper, NOTES, a partial.
fn chart() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write(
        d,
        "Chart.yaml",
        "apiVersion: v2\nname: demo\nversion: 1.2.3\nappVersion: \"4.5\"\n",
    );
    write(
        d,
        "values.yaml",
        "port: 80\nextra: {a: 1, b: 2}\nenabled: true\n",
    );
    write(
        d,
        "templates/_helpers.tpl",
        "{{- define \"demo.labels\" -}}\napp.kubernetes.io/name: {{ .Chart.Name }}\n{{- end }}\n",
    );
    write(
        d,
        "templates/objects.yaml",
        "{{- if .Values.enabled }}\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}-config\n  namespace: {{ .Release.Namespace }}\n  labels:\n    {{- include \"demo.labels\" . | nindent 4 }}\ndata:\n  extra: {{ toYaml .Values.extra | quote }}\n{{- end }}\n---\n# a comment only\n---\napiVersion: v1\nkind: Service\nmetadata:\n  name: {{ .Release.Name }}\n  namespace: {{ .Release.Namespace }}\nspec:\n  selector:\n    {{- include \"demo.labels\" . | nindent 4 }}\n  ports:\n    - {port: {{ .Values.port }}}\n",
    );
    write(
        d,
        "templates/NOTES.txt",
        "{{ .Chart.Name }} {{ .Chart.AppVersion }} in {{ .Release.Namespace }}\n",
    );
    dir
}

#[test]
fn a_chart_renders_its_manifests_and_notes() {
    let dir = chart();
    let chart = Chart::load(dir.path()).unwrap();
    assert_eq!(
        (chart.name(), chart.version(), chart.app_version()),
        ("demo", "1.2.3", "4.5")
    );
    let rendered = chart
        .render(&Release::new("web", "shop"), &json!({"port": 8080}))
        .unwrap();
    assert_eq!(rendered.manifests.len(), 1, "the partial is not a manifest");
    assert_eq!(
        rendered.manifests[0].template,
        "demo/templates/objects.yaml"
    );
    assert_eq!(
        rendered.objects().len(),
        2,
        "the comment-only document is left out"
    );
    let config = rendered.object("ConfigMap", "web-config").unwrap();
    assert_eq!(
        config["metadata"]["labels"],
        json!({"app.kubernetes.io/name": "demo"})
    );
    assert_eq!(config["data"]["extra"], "a: 1\nb: 2");
    assert_eq!(
        rendered.object("Service", "web").unwrap()["spec"]["ports"][0]["port"],
        8080
    );
    assert_eq!(rendered.notes.as_deref(), Some("demo 4.5 in shop\n"));
    assert_eq!(check::problems(&rendered, &["shop"]), Vec::<String>::new());
    // Turned off by a value.
    let rendered = chart
        .render(&Release::new("web", "shop"), &json!({"enabled": false}))
        .unwrap();
    assert!(rendered.of_kind("ConfigMap").is_empty());
}

#[test]
fn overrides_merge_as_helm_merges_values() {
    let mut values = json!({"a": {"b": 1, "c": 2}, "l": [1, 2], "keep": true});
    merge(
        &mut values,
        &json!({"a": {"c": 3, "d": 4}, "l": [3], "keep": null}),
    );
    assert_eq!(values, json!({"a": {"b": 1, "c": 3, "d": 4}, "l": [3]}));
}

#[test]
fn the_check_finds_what_the_api_server_and_an_install_refuse() {
    let dir = chart();
    write(
        dir.path(),
        "templates/bad.yaml",
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: Web_1\n  namespace: {{ .Release.Namespace }}\n  labels: {\"a/b/c\": x}\nspec:\n  ports: [{port: 80}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: web\n  namespace: shop\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: loose\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: elsewhere\n  namespace: other\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\n  namespace: shop\n",
    );
    let rendered = Chart::load(dir.path())
        .unwrap()
        .render(&Release::new("web", "shop"), &json!({}))
        .unwrap();
    let problems = check::problems(&rendered, &["shop"]);
    let has = |needle: &str| problems.iter().any(|p| p.contains(needle));
    assert!(
        has("Service/Web_1: metadata.name: Invalid value: \"Web_1\""),
        "{problems:#?}"
    );
    assert!(
        has("Service/Web_1: metadata.labels: Invalid value: \"a/b/c\""),
        "{problems:#?}"
    );
    assert!(
        has("ClusterRole/web: metadata.namespace: Forbidden"),
        "{problems:#?}"
    );
    assert!(
        has("ClusterRole/web: cluster-scoped, but in namespace shop"),
        "{problems:#?}"
    );
    assert!(
        has("ConfigMap/loose: namespaced, but has no metadata.namespace"),
        "{problems:#?}"
    );
    assert!(
        has("ConfigMap/elsewhere: in namespace other"),
        "{problems:#?}"
    );
    assert!(has("ConfigMap/web-config: rendered twice"), "{problems:#?}");
}

#[test]
fn the_plain_manifests_are_compared_without_helm_s_own_labels() {
    let chart_object = json!({"kind": "Service", "metadata": {"name": "a", "labels": {"x": "y", "helm.sh/chart": "c-1", "app.kubernetes.io/managed-by": "Helm"}}});
    let plain_objects = vec![
        json!({"kind": "Namespace", "metadata": {"name": "ns"}}),
        json!({"kind": "Service", "metadata": {"name": "a", "labels": {"x": "y"}}}),
    ];
    assert_eq!(
        plain::differences(&[&chart_object], &plain_objects),
        Vec::<String>::new()
    );
    let other = json!({"kind": "Service", "metadata": {"name": "a", "labels": {"x": "z"}}});
    assert_eq!(plain::differences(&[&other], &plain_objects).len(), 1);
    let extra = json!({"kind": "ConfigMap", "metadata": {"name": "b"}});
    assert_eq!(
        plain::differences(&[&chart_object, &extra], &plain_objects).len(),
        1
    );
}

fn load_error(setup: impl Fn(&Path)) -> RenderError {
    let dir = chart();
    setup(dir.path());
    match Chart::load(dir.path()) {
        Ok(_) => panic!("loaded"),
        Err(e) => e,
    }
}

#[test]
fn what_the_renderer_does_not_implement_is_refused_when_the_chart_loads() {
    let subchart = load_error(|d| {
        write(
            d,
            "charts/sub/Chart.yaml",
            "apiVersion: v2\nname: sub\nversion: 1.0.0\n",
        )
    });
    assert!(subchart.to_string().contains("subcharts"), "{subchart}");
    let dependencies = load_error(|d| {
        write(
            d,
            "Chart.yaml",
            "apiVersion: v2\nname: demo\nversion: 1.0.0\ndependencies: [{name: redis, version: 1.0.0}]\n",
        )
    });
    assert!(
        dependencies.to_string().contains("subcharts"),
        "{dependencies}"
    );
    let crds = load_error(|d| write(d, "crds/x.yaml", "kind: CustomResourceDefinition\n"));
    assert_eq!(crds.to_string(), "crds: not implemented by chart-render");
    let schema = load_error(|d| write(d, "values.schema.json", "{}"));
    assert_eq!(
        schema.to_string(),
        "values.schema.json: not implemented by chart-render"
    );
    let v1 = load_error(|d| {
        write(
            d,
            "Chart.yaml",
            "apiVersion: v1\nname: demo\nversion: 1.0.0\n",
        )
    });
    assert_eq!(v1.to_string(), "Chart.yaml: apiVersion must be v2");
    let broken = load_error(|d| write(d, "values.yaml", "a: [\n"));
    assert!(matches!(broken, RenderError::Yaml { .. }), "{broken}");
}

fn render_error(template: &str) -> String {
    let dir = chart();
    write(dir.path(), "templates/extra.yaml", template);
    match Chart::load(dir.path())
        .unwrap()
        .render(&Release::new("web", "shop"), &Value::Null)
    {
        Ok(_) => panic!("rendered"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn rendered_documents_must_be_objects_that_both_yaml_parsers_read_alike() {
    assert_eq!(
        render_error("just: a map\n"),
        "demo/templates/extra.yaml: document 0 is not a Kubernetes object (no apiVersion or kind)"
    );
    assert_eq!(
        render_error(
            "apiVersion: v1\nkind: Secret\nmetadata: {name: x, namespace: shop}\nmode: 0644\n"
        ),
        "demo/templates/extra.yaml: rendered line 4: 0644 is octal for Helm (YAML 1.1) and decimal for this renderer's YAML parser; quote it or write it in decimal"
    );
    assert!(render_error("apiVersion: v1\nkind: [\n").contains("invalid YAML"));
    // Template errors name the chart's file and line.
    assert_eq!(
        render_error("a: 1\nb: {{ lookup \"v1\" \"Secret\" \"x\" \"y\" }}\n"),
        "demo/templates/extra.yaml:2: function \"lookup\" is not implemented by chart-render (it refuses what it cannot render as Helm does)"
    );
    assert_eq!(
        render_error("{{ required \"port is required\" .Values.missing }}"),
        "execution error at (demo/templates/extra.yaml:1): port is required"
    );
}

#[test]
fn quoted_and_other_numbers_pass_the_octal_check() {
    let dir = chart();
    write(
        dir.path(),
        "templates/extra.yaml",
        "apiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: shop}\ndata: {a: \"0644\", b: '0755', c: \"00:30\", d: \"10.0.0.1\", e: \"0\", f: \"0o17\"}\n",
    );
    let rendered = Chart::load(dir.path())
        .unwrap()
        .render(&Release::new("web", "shop"), &json!({}))
        .unwrap();
    assert_eq!(
        rendered.object("ConfigMap", "x").unwrap()["data"]["a"],
        "0644"
    );
}

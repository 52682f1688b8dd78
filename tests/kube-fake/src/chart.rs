//! The charts of `deploy/helm` once Helm has rendered them ([`crate::helm`]): the rendered
//! manifest read into objects ([`Rendered`]), each object checked as an install would meet it
//! ([`problems`]: kube-syntax's [`Catalog`], which also serves the CRDs the chart installs, the
//! namespaces, no object twice), compared with the plain manifests of `deploy/` beside the chart
//! ([`differences`]: the same objects without the labels only Helm's own install is entitled to),
//! and the values the docs' `helm install` examples give ([`documented_value_args`]).

use std::collections::{BTreeMap, BTreeSet};

use kube_syntax::object::{Catalog, Completeness, split_api_version};
use serde_json::Value;

/// A chart's rendered manifest (what `helm template` prints), read into its objects.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The manifest as Helm printed it.
    pub manifest: String,
    objects: Vec<Value>,
}

impl Rendered {
    /// Reads `manifest`, a stream of YAML documents; empty documents (Helm's `# Source:`
    /// comments alone, a template rendered to nothing) are left out, every other one must be a
    /// Kubernetes object. Refused too: a plain scalar that Kubernetes' YAML parser (go-yaml,
    /// YAML 1.1, as kubectl and Helm's install read a manifest) and the parser here
    /// (serde-saphyr) read as different numbers, such as `0644` (octal there, decimal here), so
    /// that what the tests assert is what a cluster gets.
    pub fn parse(manifest: &str) -> Result<Self, String> {
        if let Some((line, word)) = leading_zero_integer(manifest) {
            return Err(format!(
                "rendered line {line}: {word} is octal for Kubernetes' YAML parser (YAML 1.1) and decimal for the tests' (serde-saphyr); quote it or write it in decimal"
            ));
        }
        let documents: Vec<Value> = serde_saphyr::from_multiple(manifest)
            .map_err(|error| format!("the rendered manifest is no YAML stream: {error}"))?;
        let mut objects = Vec::new();
        for (i, document) in documents.into_iter().enumerate() {
            if document.is_null() {
                continue;
            }
            if !document["apiVersion"].is_string() || !document["kind"].is_string() {
                return Err(format!(
                    "document {i} is not a Kubernetes object (no apiVersion or kind): {document}"
                ));
            }
            objects.push(document);
        }
        Ok(Self {
            manifest: manifest.to_owned(),
            objects,
        })
    }

    /// Every object, in the manifest's order.
    pub fn objects(&self) -> Vec<&Value> {
        self.objects.iter().collect()
    }

    /// The objects of `kind`.
    pub fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.objects.iter().filter(|o| o["kind"] == kind).collect()
    }

    /// The object of `kind` named `name`.
    pub fn object(&self, kind: &str, name: &str) -> Option<&Value> {
        self.objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
    }
}

/// The first plain scalar of `text` (its line and itself) that go-yaml (YAML 1.1) and
/// serde-saphyr read as different numbers: an integer with a leading zero, octal for go-yaml
/// (`0644` is 420) and decimal for serde-saphyr. (Both read `yes`, `on`, `y` as booleans,
/// `0o17`, `0x1F` and `1_000` alike, and `1:20` and dates as strings.) A quoted string is not
/// plain; one that merely contains such a word may be refused too, which errs on the safe side.
fn leading_zero_integer(text: &str) -> Option<(usize, &str)> {
    for (i, line) in text.lines().enumerate() {
        let content = line.split(" #").next().unwrap_or(line);
        if content.trim_start().starts_with('#') {
            continue;
        }
        for piece in content.split([' ', '\t', ',', '[', ']', '{', '}']) {
            let piece = piece.strip_suffix(':').unwrap_or(piece);
            let digits = piece.strip_prefix(['-', '+']).unwrap_or(piece);
            if digits.len() >= 2
                && digits.starts_with('0')
                && digits
                    .bytes()
                    .all(|b| (b'0'..=b'7').contains(&b) || b == b'_')
            {
                return Some((i + 1, piece));
            }
        }
    }
    None
}

fn describe(object: &Value) -> String {
    format!(
        "{}/{}",
        object["kind"].as_str().unwrap_or("?"),
        object["metadata"]["name"].as_str().unwrap_or("?")
    )
}

/// The built-in kinds plus the CRDs among `objects`.
pub fn catalog(objects: &[&Value]) -> Catalog {
    objects
        .iter()
        .filter(|o| o["kind"] == "CustomResourceDefinition")
        .fold(Catalog::builtin(), |catalog, crd| catalog.with_crd(crd))
}

/// Every problem of the rendered objects, one line each (`Kind/name: problem`): what the API
/// server refuses, a namespaced object outside `namespaces` or without a namespace (kinds the
/// catalog does not know, such as a ServiceMonitor, count as namespaced), a cluster-scoped one
/// with a namespace, and objects rendered twice.
pub fn problems(rendered: &Rendered, namespaces: &[&str]) -> Vec<String> {
    let objects = rendered.objects();
    let catalog = catalog(&objects);
    let mut problems = Vec::new();
    let mut seen = BTreeSet::new();
    for object in &objects {
        let what = describe(object);
        for error in catalog.object_errors(object, Completeness::Whole) {
            problems.push(format!("{what}: {error}"));
        }
        let (group, _) = split_api_version(object["apiVersion"].as_str().unwrap_or(""));
        let kind = object["kind"].as_str().unwrap_or("");
        let namespaced = catalog.by_kind(group, kind).is_none_or(|r| r.namespaced);
        let namespace = object["metadata"]["namespace"].as_str();
        match (namespaced, namespace) {
            (true, Some(ns)) if namespaces.contains(&ns) => {}
            (true, Some(ns)) => problems.push(format!(
                "{what}: in namespace {ns}, not one of {namespaces:?}"
            )),
            (true, None) => {
                problems.push(format!("{what}: namespaced, but has no metadata.namespace"))
            }
            (false, Some(ns)) => {
                problems.push(format!("{what}: cluster-scoped, but in namespace {ns}"))
            }
            (false, None) => {}
        }
        let name = object["metadata"]["name"].as_str().unwrap_or("");
        if !seen.insert((
            group.to_owned(),
            kind.to_owned(),
            namespace.unwrap_or("").to_owned(),
            name.to_owned(),
        )) {
            problems.push(format!("{what}: rendered twice"));
        }
    }
    problems
}

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

/// The words of a shell command line as `sh` splits them: on blanks, with `'...'` and `"..."`
/// quoting (no escapes, no expansions: the docs' examples need none).
pub fn shell_words(line: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut word: Option<String> = None;
    let mut quote: Option<char> = None;
    for c in line.chars() {
        match (quote, c) {
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => word.get_or_insert_default().push(c),
            (None, '\'' | '"') => {
                quote = Some(c);
                word.get_or_insert_default();
            }
            (None, c) if c.is_whitespace() => words.extend(word.take()),
            (None, c) => word.get_or_insert_default().push(c),
        }
    }
    words.extend(word);
    words
}

/// The Helm options that give values.
const VALUE_OPTIONS: &[&str] = &[
    "--set",
    "--set-string",
    "--set-json",
    "--set-file",
    "--set-literal",
    "-f",
    "--values",
];

/// The values that the `helm install`, `helm upgrade` and `helm template` commands of
/// `markdown`'s fenced code blocks give the chart in directory `chart` (such as
/// `deploy/helm/clusterset-agent`): for each command naming it, its value options
/// (`--set k=v`, `-f file`, ...) in order, each as Helm takes it (`--set`, `k=v`). Continuation
/// lines (`\` at the end) are joined; `#` comments are left out.
pub fn documented_value_args(markdown: &str, chart: &str) -> Vec<Vec<String>> {
    let mut commands = Vec::new();
    let mut in_block = false;
    let mut line = String::new();
    for text in markdown.lines() {
        let trimmed = text.trim();
        if trimmed.starts_with("```") {
            in_block = !in_block;
            line.clear();
            continue;
        }
        if !in_block {
            continue;
        }
        let code = match trimmed.find(" #") {
            Some(at) => &trimmed[..at],
            None if trimmed.starts_with('#') => "",
            None => trimmed,
        };
        match code.strip_suffix('\\') {
            Some(head) => {
                line.push_str(head);
                line.push(' ');
            }
            None => {
                line.push_str(code);
                commands.push(shell_words(&line));
                line.clear();
            }
        }
    }
    let chart = chart.trim_end_matches('/');
    commands
        .into_iter()
        .filter(|words| {
            words.first().is_some_and(|w| w == "helm")
                && words
                    .get(1)
                    .is_some_and(|w| ["install", "upgrade", "template"].contains(&w.as_str()))
                && words.iter().any(|w| w.trim_end_matches('/') == chart)
        })
        .map(|words| {
            let mut args = Vec::new();
            let mut words = words.into_iter();
            while let Some(word) = words.next() {
                if VALUE_OPTIONS.contains(&word.as_str()) {
                    args.push(word);
                    args.extend(words.next());
                } else if let Some((option, value)) = word.split_once('=')
                    && VALUE_OPTIONS.contains(&option)
                {
                    args.extend([option.to_owned(), value.to_owned()]);
                }
            }
            args
        })
        .collect()
}

/// The values a chart is linted with, each with what it is: none (the chart's defaults), each
/// values file of the chart's `ci/` directory, and the value options of every `helm install`,
/// `upgrade` or `template` of the chart in the fenced code blocks of `docs/*.md` and README.md
/// ([`documented_value_args`]). `chart` is the chart's directory relative to the workspace's
/// root (`deploy/helm/clusterset-agent`); the options' paths are relative to it too.
pub fn documented_values(chart: &str) -> Vec<(String, Vec<String>)> {
    let root = crate::helm::workspace_root();
    let mut cases = vec![("the defaults".to_owned(), Vec::new())];
    let files_in = |dir: &str, extensions: &[&str]| -> Vec<String> {
        let mut files: Vec<String> = std::fs::read_dir(root.join(dir))
            .map(|entries| {
                entries
                    .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|name| extensions.iter().any(|e| name.ends_with(e)))
                    .map(|name| format!("{dir}/{name}"))
                    .collect()
            })
            .unwrap_or_default();
        files.sort();
        files
    };
    for file in files_in(&format!("{chart}/ci"), &[".yaml", ".yml"]) {
        cases.push((file.clone(), vec!["-f".to_owned(), file]));
    }
    let mut docs = files_in("docs", &[".md"]);
    docs.push("README.md".to_owned());
    for doc in docs {
        let text = std::fs::read_to_string(root.join(&doc))
            .unwrap_or_else(|error| panic!("reading {doc}: {error}"));
        for (i, args) in documented_value_args(&text, chart).into_iter().enumerate() {
            cases.push((format!("{doc}'s example {}", i + 1), args));
        }
    }
    cases
}

/// `helm lint --strict` of `chart` (a chart directory, relative to the workspace) with every set
/// of values of [`documented_values`], and the docs' examples rendered as release `release` in
/// `namespace` with every object checked ([`problems`]): each failure, named by its case (empty
/// when all pass).
pub fn lint_documented(chart: &str, release: &str, namespace: &str) -> Vec<String> {
    let helm = crate::helm::helm();
    let path = std::path::Path::new(chart);
    let mut failures = Vec::new();
    for (what, args) in documented_values(chart) {
        match helm.lint(path, namespace, &args) {
            Ok(report) if report.contains("1 chart(s) linted, 0 chart(s) failed") => {}
            Ok(report) => failures.push(format!("{what}: helm lint: {report}")),
            Err(error) => failures.push(format!("{what}: {error}")),
        }
        if what.starts_with("docs/") {
            match helm.template_with(path, release, namespace, &args) {
                Ok(rendered) => failures.extend(
                    problems(&rendered, &[namespace])
                        .into_iter()
                        .map(|problem| format!("{what}: {problem}")),
                ),
                Err(error) => failures.push(format!("{what}: {error}")),
            }
        }
    }
    failures
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_manifest_is_read_into_its_objects_leaving_out_empty_documents() {
        let rendered = Rendered::parse(
            "---\n# Source: demo/templates/a.yaml\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: a, namespace: shop}\ndata: {a: yes, n: \"0644\"}\n---\n# Source: demo/templates/empty.yaml\n---\napiVersion: v1\nkind: Service\nmetadata: {name: b, namespace: shop}\n",
        )
        .unwrap();
        assert_eq!(rendered.objects().len(), 2);
        assert_eq!(rendered.of_kind("Service").len(), 1);
        // YAML 1.1 as go-yaml reads it: `yes` is a boolean.
        assert_eq!(
            rendered.object("ConfigMap", "a").unwrap()["data"],
            json!({"a": true, "n": "0644"})
        );
        assert!(rendered.object("ConfigMap", "b").is_none());
    }

    #[test]
    fn a_document_that_is_no_object_or_a_number_the_parsers_disagree_on_is_refused() {
        assert_eq!(
            Rendered::parse("just: a map\n").unwrap_err(),
            "document 0 is not a Kubernetes object (no apiVersion or kind): {\"just\":\"a map\"}"
        );
        assert_eq!(
            Rendered::parse(
                "apiVersion: v1\nkind: Secret\nmetadata: {name: x, namespace: shop}\nmode: 0644\n"
            )
            .unwrap_err(),
            "rendered line 4: 0644 is octal for Kubernetes' YAML parser (YAML 1.1) and decimal for the tests' (serde-saphyr); quote it or write it in decimal"
        );
        assert!(
            Rendered::parse("apiVersion: v1\nkind: [\n")
                .unwrap_err()
                .starts_with("the rendered manifest is no YAML stream")
        );
        let quoted = Rendered::parse(
            "# Source: 0644\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x, namespace: shop}\ndata: {a: \"0644\", b: '0755', c: \"00:30\", d: \"10.0.0.1\", e: \"0\", f: \"0o17\"}\n",
        )
        .unwrap();
        assert_eq!(
            quoted.object("ConfigMap", "x").unwrap()["data"]["a"],
            "0644"
        );
    }

    #[test]
    fn the_check_finds_what_the_api_server_and_an_install_refuse() {
        let rendered = Rendered::parse(
            "apiVersion: v1\nkind: Service\nmetadata:\n  name: Web_1\n  namespace: shop\n  labels: {\"a/b/c\": x}\nspec:\n  ports: [{port: 80}]\n---\napiVersion: rbac.authorization.k8s.io/v1\nkind: ClusterRole\nmetadata:\n  name: web\n  namespace: shop\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: loose\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: elsewhere\n  namespace: other\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\n  namespace: shop\n---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: web-config\n  namespace: shop\n---\napiVersion: monitoring.coreos.com/v1\nkind: ServiceMonitor\nmetadata:\n  name: web\n  namespace: shop\n",
        )
        .unwrap();
        let problems = problems(&rendered, &["shop"]);
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
        assert!(!has("ServiceMonitor/web"), "{problems:#?}");
    }

    #[test]
    fn the_plain_manifests_are_compared_without_helm_s_own_labels() {
        let chart_object = json!({"kind": "Service", "metadata": {"name": "a", "labels": {"x": "y", "helm.sh/chart": "c-1", "app.kubernetes.io/managed-by": "Helm"}}});
        let plain_objects = vec![
            json!({"kind": "Namespace", "metadata": {"name": "ns"}}),
            json!({"kind": "Service", "metadata": {"name": "a", "labels": {"x": "y"}}}),
        ];
        assert_eq!(
            differences(&[&chart_object], &plain_objects),
            Vec::<String>::new()
        );
        let other = json!({"kind": "Service", "metadata": {"name": "a", "labels": {"x": "z"}}});
        assert_eq!(differences(&[&other], &plain_objects).len(), 1);
        let extra = json!({"kind": "ConfigMap", "metadata": {"name": "b"}});
        assert_eq!(
            differences(&[&chart_object, &extra], &plain_objects).len(),
            1
        );
    }

    #[test]
    fn shell_words_are_split_as_sh_splits_them() {
        assert_eq!(
            shell_words("helm  install x --set 'a={1.2.3.4/16}' --set \"b=c d\" -f v.yaml"),
            [
                "helm",
                "install",
                "x",
                "--set",
                "a={1.2.3.4/16}",
                "--set",
                "b=c d",
                "-f",
                "v.yaml"
            ]
        );
        assert_eq!(shell_words("a '' b"), ["a", "", "b"]);
    }

    #[test]
    fn the_docs_helm_commands_give_their_value_options() {
        let markdown = "Install:\n\n```sh\nhelm install demo deploy/helm/demo \\\n  --namespace shop --create-namespace \\\n  --set a=1 \\\n  --set 'l={x}' -f deploy/helm/demo/ci/v.yaml   # the example\n```\n\nNot in a block: `helm install demo deploy/helm/demo --set no=1`.\n\n```sh\n# helm install demo deploy/helm/demo --set commented=1\nhelm upgrade demo deploy/helm/demo --reuse-values --set=b=2 --values=w.yaml\nhelm install other deploy/helm/other --set c=3\nkubectl apply --set x\n```\n";
        assert_eq!(
            documented_value_args(markdown, "deploy/helm/demo"),
            [
                vec![
                    "--set",
                    "a=1",
                    "--set",
                    "l={x}",
                    "-f",
                    "deploy/helm/demo/ci/v.yaml"
                ],
                vec!["--set", "b=2", "--values", "w.yaml"],
            ]
        );
        assert_eq!(
            documented_value_args(markdown, "deploy/helm/other"),
            [vec!["--set", "c=3"]]
        );
    }
}

//! A chart directory rendered as `helm template` renders it: Chart.yaml, values.yaml merged
//! with overrides, every file under templates/ parsed together (named templates are shared),
//! the files not starting with `_` rendered as manifests and split into documents, NOTES.txt
//! rendered on its own.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::error::RenderError;
use crate::exec::Engine;
use crate::parse::parse;
use crate::value::Val;

/// The release a chart is installed as (`helm install NAME --namespace NAMESPACE`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Release {
    /// `.Release.Name`.
    pub name: String,
    /// `.Release.Namespace`.
    pub namespace: String,
}

impl Release {
    /// The release `name` in `namespace`.
    pub fn new(name: &str, namespace: &str) -> Self {
        Self {
            name: name.to_owned(),
            namespace: namespace.to_owned(),
        }
    }
}

/// A chart read from its directory.
#[derive(Debug, Clone)]
pub struct Chart {
    name: String,
    version: String,
    app_version: String,
    description: String,
    chart_type: String,
    values: Value,
    /// `(name, text)` of every file under templates/, by name (`chart/templates/x.yaml`).
    files: Vec<(String, String)>,
}

/// One rendered manifest template.
#[derive(Debug, Clone)]
pub struct Manifest {
    /// `chart/templates/x.yaml`.
    pub template: String,
    /// The rendered text.
    pub text: String,
    /// Its documents, empty ones left out.
    pub objects: Vec<Value>,
}

/// A rendered chart.
#[derive(Debug, Clone)]
pub struct Rendered {
    /// The manifests, by template name.
    pub manifests: Vec<Manifest>,
    /// templates/NOTES.txt, rendered.
    pub notes: Option<String>,
}

impl Rendered {
    /// Every object of every manifest.
    pub fn objects(&self) -> Vec<&Value> {
        self.manifests.iter().flat_map(|m| &m.objects).collect()
    }

    /// The objects of `kind`.
    pub fn of_kind(&self, kind: &str) -> Vec<&Value> {
        self.objects()
            .into_iter()
            .filter(|o| o["kind"] == kind)
            .collect()
    }

    /// The object of `kind` named `name`.
    pub fn object(&self, kind: &str, name: &str) -> Option<&Value> {
        self.objects()
            .into_iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
    }
}

fn read(path: &Path) -> Result<String, RenderError> {
    std::fs::read_to_string(path).map_err(|source| RenderError::Io {
        path: path.to_owned(),
        source,
    })
}

fn chart_error(file: &str, message: impl Into<String>) -> RenderError {
    RenderError::Chart {
        file: file.to_owned(),
        message: message.into(),
    }
}

/// The files under `dir`, recursively, as paths relative to `root`, sorted.
fn files_under(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) -> Result<(), RenderError> {
    let entries = std::fs::read_dir(dir).map_err(|source| RenderError::Io {
        path: dir.to_owned(),
        source,
    })?;
    for entry in entries {
        let entry = entry.map_err(|source| RenderError::Io {
            path: dir.to_owned(),
            source,
        })?;
        let path = entry.path();
        if path.is_dir() {
            files_under(root, &path, out)?;
        } else {
            out.push(path.strip_prefix(root).unwrap_or(&path).to_owned());
        }
    }
    out.sort();
    Ok(())
}

impl Chart {
    /// Reads the chart in `dir`. Refused: subcharts (`dependencies`, charts/), a crds/
    /// directory and values.schema.json, which the renderer does not implement.
    pub fn load(dir: impl AsRef<Path>) -> Result<Self, RenderError> {
        let dir = dir.as_ref();
        let meta_text = read(&dir.join("Chart.yaml"))?;
        let meta: Value =
            serde_saphyr::from_str(&meta_text).map_err(|source| RenderError::Yaml {
                file: "Chart.yaml".to_owned(),
                source: Box::new(source),
            })?;
        let text = |key: &str| meta[key].as_str().unwrap_or_default().to_owned();
        if meta["apiVersion"] != "v2" {
            return Err(chart_error("Chart.yaml", "apiVersion must be v2"));
        }
        let name = text("name");
        if name.is_empty() || text("version").is_empty() {
            return Err(chart_error("Chart.yaml", "name and version are required"));
        }
        if meta["dependencies"]
            .as_array()
            .is_some_and(|d| !d.is_empty())
            || dir.join("charts").exists()
        {
            return Err(chart_error(
                "Chart.yaml",
                "subcharts (dependencies, charts/) are not implemented by chart-render",
            ));
        }
        for unsupported in ["crds", "values.schema.json"] {
            if dir.join(unsupported).exists() {
                return Err(chart_error(unsupported, "not implemented by chart-render"));
            }
        }
        let values_path = dir.join("values.yaml");
        let values = if values_path.exists() {
            let values: Value = serde_saphyr::from_str(&read(&values_path)?).map_err(|source| {
                RenderError::Yaml {
                    file: "values.yaml".to_owned(),
                    source: Box::new(source),
                }
            })?;
            if values.is_null() {
                Value::Object(Default::default())
            } else {
                values
            }
        } else {
            Value::Object(Default::default())
        };
        if !values.is_object() {
            return Err(chart_error("values.yaml", "must be a map"));
        }
        let mut paths = Vec::new();
        files_under(dir, &dir.join("templates"), &mut paths)?;
        let mut files = Vec::new();
        for path in paths {
            let file_name = format!("{name}/{}", path.to_string_lossy());
            files.push((file_name, read(&dir.join(&path))?));
        }
        Ok(Self {
            version: text("version"),
            app_version: text("appVersion"),
            description: text("description"),
            chart_type: text("type"),
            name,
            values,
            files,
        })
    }

    /// The chart's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The chart's version.
    pub fn version(&self) -> &str {
        &self.version
    }

    /// The chart's appVersion (empty when it has none).
    pub fn app_version(&self) -> &str {
        &self.app_version
    }

    /// values.yaml.
    pub fn values(&self) -> &Value {
        &self.values
    }

    /// Renders the chart as `release`, with `overrides` merged over values.yaml as Helm
    /// merges `--set-json` (maps merged key by key, other values replaced, `null` deletes).
    /// Numbers of the values are `float64` in the templates, as in Helm.
    pub fn render(&self, release: &Release, overrides: &Value) -> Result<Rendered, RenderError> {
        let mut values = self.values.clone();
        merge(&mut values, overrides);
        let root = self.root(release, &values);
        let mut engine = Engine::default();
        for (name, text) in &self.files {
            engine.add(name, parse(name, text)?);
        }
        let mut manifests = Vec::new();
        let mut notes = None;
        for (name, _) in &self.files {
            let base = name.rsplit('/').next().unwrap_or(name);
            if base.starts_with('_') {
                continue;
            }
            let text = engine.execute(name, &root)?;
            if base == "NOTES.txt" {
                notes = Some(text);
                continue;
            }
            let objects = documents(name, &text)?;
            manifests.push(Manifest {
                template: name.clone(),
                text,
                objects,
            });
        }
        Ok(Rendered { manifests, notes })
    }

    fn root(&self, release: &Release, values: &Value) -> Val {
        let text = |s: &str| Val::Str(s.to_owned());
        let release = BTreeMap::from([
            ("Name".to_owned(), text(&release.name)),
            ("Namespace".to_owned(), text(&release.namespace)),
            ("Service".to_owned(), text("Helm")),
        ]);
        let chart = BTreeMap::from([
            ("Name".to_owned(), text(&self.name)),
            ("Version".to_owned(), text(&self.version)),
            ("AppVersion".to_owned(), text(&self.app_version)),
            ("Description".to_owned(), text(&self.description)),
            ("Type".to_owned(), text(&self.chart_type)),
        ]);
        Val::Struct(
            "the root context",
            BTreeMap::from([
                ("Values".to_owned(), Val::from_json(values)),
                ("Release".to_owned(), Val::Struct(".Release", release)),
                ("Chart".to_owned(), Val::Struct("*chart.Metadata", chart)),
            ]),
        )
    }
}

/// Renders one template `text` with `helpers` (a `_helpers.tpl`) and `values`, as the chart
/// `test` 0.1.0 (appVersion 1.16.0) released as `release-name` in `default` (what `helm
/// template` names a release by default): for tests of the template language.
pub fn render_template(helpers: &str, text: &str, values: &Value) -> Result<String, RenderError> {
    let chart = Chart {
        name: "test".to_owned(),
        version: "0.1.0".to_owned(),
        app_version: "1.16.0".to_owned(),
        description: String::new(),
        chart_type: "application".to_owned(),
        values: Value::Object(Default::default()),
        files: Vec::new(),
    };
    let mut merged = chart.values.clone();
    merge(&mut merged, values);
    let root = chart.root(&Release::new("release-name", "default"), &merged);
    let mut engine = Engine::default();
    engine.add(
        "test/templates/_helpers.tpl",
        parse("test/templates/_helpers.tpl", helpers)?,
    );
    engine.add(
        "test/templates/test.yaml",
        parse("test/templates/test.yaml", text)?,
    );
    engine.execute("test/templates/test.yaml", &root)
}

/// `overrides` merged into `values` as Helm coalesces user values over the chart's.
pub fn merge(values: &mut Value, overrides: &Value) {
    match (values, overrides) {
        (Value::Object(base), Value::Object(over)) => {
            for (key, value) in over {
                if value.is_null() {
                    base.remove(key);
                } else if let Some(existing) = base.get_mut(key) {
                    merge(existing, value);
                } else {
                    base.insert(key.clone(), value.clone());
                }
            }
        }
        // No overrides at all (`helm install` without `--set`).
        (_, Value::Null) => {}
        (slot, value) => *slot = value.clone(),
    }
}

/// The first plain scalar of `text` (its line and itself) that Helm's parser (go-yaml v2,
/// YAML 1.1) and this renderer's (serde-saphyr) read as different numbers: an integer with a
/// leading zero, octal for Helm (`0644` is 420) and decimal here. (Both read `yes`, `on`, `y`
/// as booleans, `0o17`, `0x1F` and `1_000` alike, and `1:20` and dates as strings.) A quoted
/// string is not plain; one that merely contains such a word may be refused too, which errs on
/// the safe side.
fn leading_zero_integer(text: &str) -> Option<(usize, &str)> {
    for (i, line) in text.lines().enumerate() {
        let content = line.split(" #").next().unwrap_or(line);
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

/// The documents of a rendered manifest; each must be a Kubernetes object.
fn documents(file: &str, text: &str) -> Result<Vec<Value>, RenderError> {
    if let Some((line, word)) = leading_zero_integer(text) {
        return Err(chart_error(
            file,
            format!(
                "rendered line {line}: {word} is octal for Helm (YAML 1.1) and decimal for this renderer's YAML parser; quote it or write it in decimal"
            ),
        ));
    }
    let documents: Vec<Value> =
        serde_saphyr::from_multiple(text).map_err(|source| RenderError::Yaml {
            file: file.to_owned(),
            source: Box::new(source),
        })?;
    let mut objects = Vec::new();
    for (i, document) in documents.into_iter().enumerate() {
        if document.is_null() {
            continue;
        }
        if !document["apiVersion"].is_string() || !document["kind"].is_string() {
            return Err(chart_error(
                file,
                format!("document {i} is not a Kubernetes object (no apiVersion or kind)"),
            ));
        }
        objects.push(document);
    }
    Ok(objects)
}

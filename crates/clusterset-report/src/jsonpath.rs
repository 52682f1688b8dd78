//! `-o jsonpath=TEMPLATE`: the part of kubectl's JSONPath templates that scripts use, applied
//! to a command's JSON document (what `-o json` prints). What it does not implement it refuses
//! when the template is parsed, naming the construct, rather than printing something else.
//!
//! Implemented: text outside braces, printed as it is; `{.a.b}` and `{$.a}`, `{@.a}`, `{@}`;
//! `[N]` (negative counts from the end) and `[*]`; field names with escaped dots
//! (`{.labels.app\.kubernetes\.io/name}`) or bracketed quotes (`{.labels['app.kubernetes.io/name']}`);
//! `{range .items[*]}…{end}`; quoted text `{"\n"}`, `{'\t'}`. Several results of one expression
//! are joined by a space, as kubectl joins them; a missing field prints nothing (kubectl's
//! default `--allow-missing-template-keys=true`); strings print bare, other values as JSON.
//!
//! Refused: recursive descent (`..`), filters (`[?(…)]`), slices (`[1:3]`), unions (`[0,1]`,
//! `['a','b']`), and functions.
//!
//! ```
//! use clusterset_report::jsonpath::Template;
//! let document = serde_json::json!({"problems": ["a", "b"], "services": [{"name": "web"}, {"name": "db"}]});
//! let template = Template::parse(r#"{range .services[*]}{.name}{"\n"}{end}"#)?;
//! assert_eq!(template.render(&document), "web\ndb\n");
//! assert_eq!(Template::parse("{.problems[*]}")?.render(&document), "a b");
//! assert!(Template::parse("{..name}").is_err());
//! # Ok::<(), clusterset_report::jsonpath::JsonPathError>(())
//! ```

use serde_json::Value;

/// Why a template cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum JsonPathError {
    /// A construct of kubectl's JSONPath this implementation does not have.
    #[error(
        "jsonpath {template:?}: {construct} is not supported by mcsctl (it takes .field, [N], [*], {{range …}}…{{end}} and quoted text): pipe -o json into jq instead"
    )]
    Unsupported {
        /// The template.
        template: String,
        /// What it uses.
        construct: String,
    },
    /// Not a template.
    #[error("jsonpath {template:?}: {problem}")]
    Syntax {
        /// The template.
        template: String,
        /// What is wrong.
        problem: String,
    },
}

/// One step of a path.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Step {
    Field(String),
    Index(i64),
    All,
}

/// A part of a template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Node {
    Text(String),
    Path(Vec<Step>),
    Range(Vec<Step>, Vec<Node>),
}

/// A parsed `-o jsonpath=` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Template {
    text: String,
    nodes: Vec<Node>,
}

impl Template {
    /// Parses `text`; refuses what is not implemented (see the module).
    pub fn parse(text: &str) -> Result<Self, JsonPathError> {
        let syntax = |problem: &str| JsonPathError::Syntax {
            template: text.to_owned(),
            problem: problem.to_owned(),
        };
        // The expressions and the text between them.
        let mut tokens: Vec<(bool, String)> = Vec::new();
        let mut rest = text;
        while let Some(open) = rest.find('{') {
            if open > 0 {
                tokens.push((false, rest[..open].to_owned()));
            }
            let after = &rest[open + 1..];
            let close = closing_brace(after).ok_or_else(|| syntax("unclosed {"))?;
            tokens.push((true, after[..close].trim().to_owned()));
            rest = &after[close + 1..];
        }
        if !rest.is_empty() {
            tokens.push((false, rest.to_owned()));
        }
        // Nested ranges: a stack of (path, nodes so far).
        let mut stack: Vec<(Vec<Step>, Vec<Node>)> = vec![(Vec::new(), Vec::new())];
        for (expression, token) in tokens {
            let node = if !expression {
                Node::Text(token)
            } else if let Some(path) = token.strip_prefix("range ") {
                stack.push((parse_path(text, path.trim())?, Vec::new()));
                continue;
            } else if token == "end" {
                let (path, nodes) = stack
                    .pop()
                    .filter(|_| !stack.is_empty())
                    .ok_or_else(|| syntax("{end} without {range}"))?;
                Node::Range(path, nodes)
            } else if let Some(quoted) = quoted_text(&token) {
                Node::Text(quoted)
            } else {
                Node::Path(parse_path(text, &token)?)
            };
            if let Some((_, nodes)) = stack.last_mut() {
                nodes.push(node);
            }
        }
        if stack.len() != 1 {
            return Err(syntax("{range} without {end}"));
        }
        let nodes = stack.pop().map(|(_, nodes)| nodes).unwrap_or_default();
        Ok(Self {
            text: text.to_owned(),
            nodes,
        })
    }

    /// The template as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The template applied to `document`.
    pub fn render(&self, document: &Value) -> String {
        let mut out = String::new();
        render_nodes(&self.nodes, document, &mut out);
        out
    }
}

/// Where the `}` closing an expression is (quotes may hold braces).
fn closing_brace(text: &str) -> Option<usize> {
    let mut quote: Option<char> = None;
    let mut escaped = false;
    for (i, c) in text.char_indices() {
        match (quote, c) {
            (Some(_), '\\') if !escaped => {
                escaped = true;
                continue;
            }
            (Some(q), c) if c == q && !escaped => quote = None,
            (None, '"' | '\'') => quote = Some(c),
            (None, '}') => return Some(i),
            _ => {}
        }
        escaped = false;
    }
    None
}

/// `"…"` or `'…'` with `\n`, `\t`, `\\` and escaped quotes, as text.
fn quoted_text(token: &str) -> Option<String> {
    let quote = token.chars().next().filter(|c| *c == '"' || *c == '\'')?;
    let inner = token.strip_prefix(quote)?.strip_suffix(quote)?;
    let mut out = String::new();
    let mut chars = inner.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('n') => out.push('\n'),
                Some('t') => out.push('\t'),
                Some('r') => out.push('\r'),
                Some(other) => out.push(other),
                None => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// `.a.b[0][*]`, `$.a`, `@.a`, `@`.
fn parse_path(template: &str, path: &str) -> Result<Vec<Step>, JsonPathError> {
    let unsupported = |construct: &str| JsonPathError::Unsupported {
        template: template.to_owned(),
        construct: construct.to_owned(),
    };
    let syntax = |problem: String| JsonPathError::Syntax {
        template: template.to_owned(),
        problem,
    };
    if path.contains("..") {
        return Err(unsupported("recursive descent (..)"));
    }
    let mut rest = path
        .strip_prefix('$')
        .or_else(|| path.strip_prefix('@'))
        .unwrap_or(path);
    let mut steps = Vec::new();
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix('.') {
            // A field name up to the next unescaped `.` or `[`.
            let mut name = String::new();
            let mut chars = after.char_indices().peekable();
            let mut end = after.len();
            while let Some((i, c)) = chars.next() {
                match c {
                    '\\' => {
                        if let Some((_, next)) = chars.next() {
                            name.push(next);
                        }
                    }
                    '.' | '[' => {
                        end = i;
                        break;
                    }
                    c if c.is_whitespace() || c == '(' || c == ')' => {
                        return Err(unsupported(&format!("{path:?} (functions and operators)")));
                    }
                    c => name.push(c),
                }
            }
            if name.is_empty() {
                return Err(syntax(format!("{path:?}: a field name is missing after .")));
            }
            steps.push(Step::Field(name));
            rest = &after[end..];
        } else if let Some(after) = rest.strip_prefix('[') {
            let close = after
                .find(']')
                .ok_or_else(|| syntax(format!("{path:?}: unclosed [")))?;
            let inside = after[..close].trim();
            rest = &after[close + 1..];
            if inside == "*" {
                steps.push(Step::All);
            } else if inside.starts_with('?') {
                return Err(unsupported("filters ([?(…)])"));
            } else if inside.contains(':') {
                return Err(unsupported("slices ([a:b])"));
            } else if inside.contains(',') {
                return Err(unsupported("unions ([a,b])"));
            } else if let Some(key) = quoted_text(inside) {
                steps.push(Step::Field(key));
            } else {
                let index = inside
                    .parse::<i64>()
                    .map_err(|_| syntax(format!("{path:?}: [{inside}] is not an index")))?;
                steps.push(Step::Index(index));
            }
        } else {
            return Err(syntax(format!(
                "{path:?}: a path starts with . (as {{.items[0].name}})"
            )));
        }
    }
    Ok(steps)
}

/// The values `steps` reach from `value`.
fn select<'a>(value: &'a Value, steps: &[Step]) -> Vec<&'a Value> {
    let mut current = vec![value];
    for step in steps {
        current = current
            .into_iter()
            .flat_map(|v| -> Vec<&Value> {
                match (step, v) {
                    (Step::Field(name), Value::Object(map)) => map.get(name).into_iter().collect(),
                    (Step::Index(i), Value::Array(items)) => {
                        let len = i64::try_from(items.len()).unwrap_or(i64::MAX);
                        let at = if *i < 0 { len + i } else { *i };
                        usize::try_from(at)
                            .ok()
                            .and_then(|at| items.get(at))
                            .into_iter()
                            .collect()
                    }
                    (Step::All, Value::Array(items)) => items.iter().collect(),
                    (Step::All, Value::Object(map)) => map.values().collect(),
                    _ => Vec::new(),
                }
            })
            .collect();
    }
    current
}

fn text_of(value: &Value) -> String {
    match value {
        Value::String(text) => text.clone(),
        Value::Null => String::new(),
        other => other.to_string(),
    }
}

fn render_nodes(nodes: &[Node], value: &Value, out: &mut String) {
    for node in nodes {
        match node {
            Node::Text(text) => out.push_str(text),
            Node::Path(steps) => {
                let found: Vec<String> = select(value, steps).into_iter().map(text_of).collect();
                out.push_str(&found.join(" "));
            }
            Node::Range(steps, body) => {
                for item in select(value, steps) {
                    render_nodes(body, item, out);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use serde_json::json;

    fn run(template: &str, document: &Value) -> String {
        Template::parse(template).unwrap().render(document)
    }

    #[test]
    fn kubectls_everyday_templates() {
        let status = json!({
            "scope": "namespace shop",
            "problems": [],
            "services": [
                {"namespace": "shop", "name": "web", "import": {"ips": ["243.0.1.1"]}},
                {"namespace": "shop", "name": "db", "import": null}
            ],
            "labels": {"app.kubernetes.io/name": "agent"}
        });
        assert_eq!(run("{.scope}", &status), "namespace shop");
        assert_eq!(run("{$.services[0].name}", &status), "web");
        assert_eq!(run("{.services[-1].name}", &status), "db");
        assert_eq!(run("{.services[*].name}", &status), "web db");
        assert_eq!(
            run(
                "{range .services[*]}{.namespace}/{.name}{'\\t'}{.import.ips[0]}{\"\\n\"}{end}",
                &status
            ),
            "shop/web\t243.0.1.1\nshop/db\t\n"
        );
        assert_eq!(run("{.problems}", &status), "[]");
        assert_eq!(run("{.missing.field}", &status), "");
        assert_eq!(run("scope: {.scope}!", &status), "scope: namespace shop!");
        assert_eq!(
            run("{.labels.app\\.kubernetes\\.io/name}", &status),
            "agent"
        );
        assert_eq!(run("{.labels['app.kubernetes.io/name']}", &status), "agent");
        assert_eq!(run("{@.scope}", &status), "namespace shop");
        assert_eq!(
            run("{range .services[*]}{@.name},{end}", &status),
            "web,db,"
        );
        assert_eq!(run("{\"{}\"}", &status), "{}");
    }

    #[test]
    fn what_is_not_implemented_is_refused_by_name() {
        for (template, construct) in [
            ("{..name}", "recursive descent"),
            ("{.items[?(@.ready)]}", "filters"),
            ("{.items[0:2]}", "slices"),
            ("{.items[0,1]}", "unions"),
            ("{.items[*].name.length()}", "functions"),
        ] {
            let error = Template::parse(template).unwrap_err();
            assert!(
                matches!(&error, JsonPathError::Unsupported { .. })
                    && error.to_string().contains(construct),
                "{template}: {error}"
            );
        }
        for template in ["{.a", "{end}", "{range .a}", "{a.b}", "{.items[x]}", "{.}"] {
            assert!(
                matches!(Template::parse(template), Err(JsonPathError::Syntax { .. })),
                "{template}"
            );
        }
    }
}

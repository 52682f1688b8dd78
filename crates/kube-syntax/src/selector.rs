//! Label selectors and field selectors, parsed, checked and matched as the API server does
//! (`k8s.io/apimachinery/pkg/labels.Parse` and `fields.ParseSelector`).
//!
//! A selector the server cannot parse is answered `400 BadRequest` with the message of
//! [`SelectorError`]; a key or value that breaks the label rules is such an error too:
//!
//! ```
//! use kube_syntax::selector::LabelSelector;
//! let ours = LabelSelector::parse(
//!     "kubernetes.io/service-name,endpointslice.kubernetes.io/managed-by!=mcs-controller.clusterset.io",
//! )?;
//! assert_eq!(ours.requirements().len(), 2);
//! let refused = LabelSelector::parse("endpointslice.kubernetes.io/managed-by=clusterset.io/mcs-controller")
//!     .unwrap_err();
//! assert!(refused.to_string().starts_with(
//!     "unable to parse requirement: values[0][endpointslice.kubernetes.io/managed-by]: Invalid value: \"clusterset.io/mcs-controller\""
//! ));
//! # Ok::<(), kube_syntax::selector::SelectorError>(())
//! ```

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::error::FieldError;
use crate::labels::{label_key, label_value};

/// A selector the API server refuses, with its message (the body of the 400 answer).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct SelectorError {
    /// The message, in the API server's words.
    pub message: String,
}

impl SelectorError {
    fn new(message: impl Into<String>) -> Self {
        Self {
            message: message.into(),
        }
    }
}

/// A requirement's operator.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Operator {
    /// `k=v` or `k==v`.
    Equals,
    /// `k!=v`: absent or different.
    NotEquals,
    /// `k in (a,b)`.
    In,
    /// `k notin (a,b)`: absent or none of them.
    NotIn,
    /// `k`: present.
    Exists,
    /// `!k`: absent.
    DoesNotExist,
    /// `k>5`: present and an integer greater than.
    GreaterThan,
    /// `k<5`: present and an integer less than.
    LessThan,
}

/// One requirement of a label selector.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Requirement {
    /// The label key.
    pub key: String,
    /// The operator.
    pub operator: Operator,
    /// The values, in order (none for exists and does-not-exist).
    pub values: Vec<String>,
}

impl Requirement {
    /// Builds a requirement with the checks of `labels.NewRequirement`.
    pub fn new(key: &str, operator: Operator, values: Vec<String>) -> Result<Self, FieldError> {
        if let Err(invalid) = label_key(key) {
            return Err(invalid.at("key"));
        }
        let count = values.len();
        match operator {
            Operator::In | Operator::NotIn if count == 0 => {
                return Err(FieldError::invalid_json(
                    "values",
                    &serde_json::json!(values),
                    "for 'in', 'notin' operators, values set can't be empty",
                ));
            }
            Operator::Equals | Operator::NotEquals if count != 1 => {
                return Err(FieldError::invalid_json(
                    "values",
                    &serde_json::json!(values),
                    "exact-match compatibility requires one single value",
                ));
            }
            Operator::Exists | Operator::DoesNotExist if count != 0 => {
                return Err(FieldError::invalid_json(
                    "values",
                    &serde_json::json!(values),
                    "values set must be empty for exists and does not exist",
                ));
            }
            Operator::GreaterThan | Operator::LessThan => {
                if count != 1 {
                    return Err(FieldError::invalid_json(
                        "values",
                        &serde_json::json!(values),
                        "for 'Gt', 'Lt' operators, exactly one value is required",
                    ));
                }
                if values[0].parse::<i64>().is_err() {
                    return Err(FieldError::invalid(
                        "values[0]",
                        &values[0],
                        "for 'Gt', 'Lt' operators, the value must be an integer",
                    ));
                }
            }
            _ => {}
        }
        for (i, value) in values.iter().enumerate() {
            if let Err(invalid) = label_value(value) {
                return Err(FieldError::invalid(
                    &format!("values[{i}][{key}]"),
                    value,
                    invalid.problems.join("; "),
                ));
            }
        }
        Ok(Self {
            key: key.to_owned(),
            operator,
            values,
        })
    }

    /// Whether labels satisfy this requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        let value = labels.get(&self.key);
        match self.operator {
            Operator::Equals | Operator::In => value.is_some_and(|v| self.values.contains(v)),
            Operator::NotEquals | Operator::NotIn => value.is_none_or(|v| !self.values.contains(v)),
            Operator::Exists => value.is_some(),
            Operator::DoesNotExist => value.is_none(),
            Operator::GreaterThan | Operator::LessThan => {
                let (Some(have), Some(bound)) = (
                    value.and_then(|v| v.parse::<i64>().ok()),
                    self.values.first().and_then(|v| v.parse::<i64>().ok()),
                ) else {
                    return false;
                };
                if self.operator == Operator::GreaterThan {
                    have > bound
                } else {
                    have < bound
                }
            }
        }
    }
}

impl fmt::Display for Requirement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let key = &self.key;
        let joined = self.values.join(",");
        match self.operator {
            Operator::Equals => write!(f, "{key}={joined}"),
            Operator::NotEquals => write!(f, "{key}!={joined}"),
            Operator::In => write!(f, "{key} in ({joined})"),
            Operator::NotIn => write!(f, "{key} notin ({joined})"),
            Operator::Exists => write!(f, "{key}"),
            Operator::DoesNotExist => write!(f, "!{key}"),
            Operator::GreaterThan => write!(f, "{key}>{joined}"),
            Operator::LessThan => write!(f, "{key}<{joined}"),
        }
    }
}

/// A parsed label selector: every requirement must hold (an empty selector matches all).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct LabelSelector {
    requirements: Vec<Requirement>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Identifier(String),
    Bang,
    Equals,
    DoubleEquals,
    NotEquals,
    In,
    NotIn,
    Open,
    Close,
    Comma,
    Greater,
    Less,
    End,
}

impl Token {
    fn text(&self) -> String {
        match self {
            Token::Identifier(s) => s.clone(),
            Token::Bang => "!".to_owned(),
            Token::Equals => "=".to_owned(),
            Token::DoubleEquals => "==".to_owned(),
            Token::NotEquals => "!=".to_owned(),
            Token::In => "in".to_owned(),
            Token::NotIn => "notin".to_owned(),
            Token::Open => "(".to_owned(),
            Token::Close => ")".to_owned(),
            Token::Comma => ",".to_owned(),
            Token::Greater => ">".to_owned(),
            Token::Less => "<".to_owned(),
            Token::End => "".to_owned(),
        }
    }
}

/// The lexer's white space: space, tab, carriage return and new line only.
fn is_blank(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_special(c: char) -> bool {
    matches!(c, '!' | '=' | ',' | '(' | ')' | '<' | '>')
}

fn lex(input: &str) -> Vec<Token> {
    let chars: Vec<char> = input.chars().collect();
    let mut tokens = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if is_blank(c) {
            i += 1;
            continue;
        }
        if is_special(c) {
            let next = chars.get(i + 1).copied();
            let (token, width) = match (c, next) {
                ('!', Some('=')) => (Token::NotEquals, 2),
                ('=', Some('=')) => (Token::DoubleEquals, 2),
                ('!', _) => (Token::Bang, 1),
                ('=', _) => (Token::Equals, 1),
                (',', _) => (Token::Comma, 1),
                ('(', _) => (Token::Open, 1),
                (')', _) => (Token::Close, 1),
                ('<', _) => (Token::Less, 1),
                _ => (Token::Greater, 1),
            };
            tokens.push(token);
            i += width;
            continue;
        }
        let start = i;
        while i < chars.len() && !is_blank(chars[i]) && !is_special(chars[i]) {
            i += 1;
        }
        let word: String = chars[start..i].iter().collect();
        tokens.push(match word.as_str() {
            "in" => Token::In,
            "notin" => Token::NotIn,
            _ => Token::Identifier(word),
        });
    }
    tokens.push(Token::End);
    tokens
}

struct Parser {
    tokens: Vec<Token>,
    position: usize,
}

impl Parser {
    fn peek(&self) -> &Token {
        self.tokens.get(self.position).unwrap_or(&Token::End)
    }

    /// The next token where a key or a value may stand: `in` and `notin` are identifiers there
    /// (`in=notin` is the key `in` equal to `notin`).
    fn peek_value(&self) -> Token {
        match self.peek() {
            Token::In => Token::Identifier("in".to_owned()),
            Token::NotIn => Token::Identifier("notin".to_owned()),
            other => other.clone(),
        }
    }

    fn next(&mut self) -> Token {
        let token = self.peek().clone();
        if self.position < self.tokens.len() {
            self.position += 1;
        }
        token
    }

    fn next_value(&mut self) -> Token {
        let token = self.peek_value();
        self.next();
        token
    }

    fn found(token: &Token, expected: &str) -> SelectorError {
        SelectorError::new(format!("found '{}', expected: {expected}", token.text()))
    }

    /// One requirement (`parseRequirement`); its errors are wrapped by the caller.
    fn requirement(&mut self) -> Result<Requirement, SelectorError> {
        let mut operator = None;
        let mut token = self.next_value();
        if token == Token::Bang {
            operator = Some(Operator::DoesNotExist);
            token = self.next_value();
        }
        let key = match token {
            Token::Identifier(key) => key,
            other => return Err(Self::found(&other, "identifier")),
        };
        if let Err(invalid) = label_key(&key) {
            // `labels.Parse` checks the key at a nil field path, printed `<nil>`.
            return Err(SelectorError::new(
                FieldError::invalid("<nil>", &key, invalid.problems.join("; ")).to_string(),
            ));
        }
        let build = |key: &str, operator, values| {
            Requirement::new(key, operator, values)
                .map_err(|error| SelectorError::new(error.to_string()))
        };
        if let Some(operator) = operator {
            return build(&key, operator, Vec::new());
        }
        if matches!(self.peek_value(), Token::End | Token::Comma) {
            return build(&key, Operator::Exists, Vec::new());
        }
        let operator = match self.next() {
            Token::Equals | Token::DoubleEquals => Operator::Equals,
            Token::NotEquals => Operator::NotEquals,
            Token::In => Operator::In,
            Token::NotIn => Operator::NotIn,
            Token::Greater => Operator::GreaterThan,
            Token::Less => Operator::LessThan,
            other => return Err(Self::found(&other, "in, notin, =, ==, !=, gt, lt")),
        };
        let values = match operator {
            Operator::In | Operator::NotIn => self.set_values()?,
            _ => self.exact_value()?,
        };
        build(&key, operator, values)
    }

    /// `parseExactValue`: one identifier, or nothing (the empty value).
    fn exact_value(&mut self) -> Result<Vec<String>, SelectorError> {
        match self.peek_value() {
            Token::End | Token::Comma => Ok(vec![String::new()]),
            Token::Identifier(value) => {
                self.next();
                Ok(vec![value])
            }
            other => Err(Self::found(&other, "identifier")),
        }
    }

    /// `parseValues`: `(a,b)`, sorted and without duplicates; empty items are the empty value.
    fn set_values(&mut self) -> Result<Vec<String>, SelectorError> {
        let open = self.next_value();
        if open != Token::Open {
            // Upstream's wording has no comma here.
            return Err(SelectorError::new(format!(
                "found '{}' expected: '('",
                open.text()
            )));
        }
        let mut values = BTreeSet::new();
        match self.peek_value() {
            Token::Close => {
                self.next();
                values.insert(String::new());
                return Ok(values.into_iter().collect());
            }
            Token::Identifier(_) | Token::Comma => {}
            other => return Err(Self::found(&other, "',', ')' or identifier")),
        }
        // `parseIdentifiersList`: returns with `)` ahead.
        loop {
            match self.next_value() {
                Token::Identifier(value) => {
                    values.insert(value);
                    match self.peek_value() {
                        Token::Comma => {}
                        Token::Close => break,
                        other => return Err(Self::found(&other, "',' or ')'")),
                    }
                }
                Token::Comma => {
                    if values.is_empty() {
                        values.insert(String::new());
                    }
                    match self.peek_value() {
                        Token::Close => {
                            values.insert(String::new());
                            break;
                        }
                        // `,,`: the second comma is consumed too, so what follows must be
                        // an identifier (`(a,,)` is refused).
                        Token::Comma => {
                            self.next();
                            values.insert(String::new());
                        }
                        _ => {}
                    }
                }
                other => return Err(Self::found(&other, "',', or identifier")),
            }
        }
        self.next();
        Ok(values.into_iter().collect())
    }
}

impl LabelSelector {
    /// Parses a label selector string as the API server does for `?labelSelector=`, with its
    /// messages: errors inside a requirement start with `unable to parse requirement: `.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut parser = Parser {
            tokens: lex(text),
            position: 0,
        };
        let mut requirements = Vec::new();
        loop {
            match parser.peek_value() {
                Token::Identifier(_) | Token::Bang => {}
                Token::End => break,
                other => {
                    return Err(Parser::found(&other, "!, identifier, or 'end of string'"));
                }
            }
            let requirement = parser.requirement().map_err(|error| {
                SelectorError::new(format!("unable to parse requirement: {error}"))
            })?;
            requirements.push(requirement);
            match parser.next_value() {
                Token::End => break,
                Token::Comma => match parser.peek_value() {
                    Token::Identifier(_) | Token::Bang => {}
                    other => {
                        return Err(Parser::found(&other, "identifier after ','"));
                    }
                },
                other => return Err(Parser::found(&other, "',' or 'end of string'")),
            }
        }
        Ok(Self { requirements })
    }

    /// The requirements, in order.
    pub fn requirements(&self) -> &[Requirement] {
        &self.requirements
    }

    /// Whether `labels` satisfy every requirement.
    pub fn matches(&self, labels: &BTreeMap<String, String>) -> bool {
        self.requirements.iter().all(|r| r.matches(labels))
    }
}

impl fmt::Display for LabelSelector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let parts: Vec<String> = self.requirements.iter().map(ToString::to_string).collect();
        f.write_str(&parts.join(","))
    }
}

/// One term of a field selector: `field=value`, `field==value` or `field!=value`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldRequirement {
    /// The field (`metadata.name`).
    pub field: String,
    /// Whether the field must differ from the value (`!=`).
    pub negated: bool,
    /// The value.
    pub value: String,
}

/// A parsed field selector.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct FieldSelector {
    requirements: Vec<FieldRequirement>,
}

/// The fields `DefaultMetaV1FieldSelectorConversion` accepts: the only ones for a built-in kind
/// without a field-label conversion of its own.
pub const COMMON_SELECTABLE_FIELDS: [&str; 2] = ["metadata.name", "metadata.namespace"];

/// How the API server converts the fields of a field selector for a kind (its
/// `ConvertFieldLabel`), which decides which fields it accepts and how it refuses the others.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FieldLabels {
    /// A built-in kind without a conversion of its own (ConfigMap, EndpointSlice,
    /// Deployment, Lease, ...): `DefaultMetaV1FieldSelectorConversion`, which accepts
    /// [`COMMON_SELECTABLE_FIELDS`] and refuses others with `"spec.type" is not a known field
    /// selector: only "metadata.name", "metadata.namespace"`.
    Default,
    /// A built-in kind's own conversion (`AddFieldLabelConversionFunc`): exactly these fields,
    /// others refused with `field label not supported: <field>`.
    Listed(&'static [&'static str]),
    /// batch/v1 Job, whose conversion words its refusal `field label "x" not supported for Job`.
    Job,
    /// A custom resource (the apiextensions server's `crConverter`): `metadata.name`, and
    /// `metadata.namespace` when namespaced; others `field label not supported: <field>`.
    CustomResource {
        /// Whether the resource is namespaced.
        namespaced: bool,
    },
}

impl FieldLabels {
    /// The conversion of the built-in `kind` of `group` (`""` for the core group), as
    /// Kubernetes 1.37 (and 1.35) registers them (`pkg/apis/*/v1/conversion.go`).
    pub fn builtin(group: &str, kind: &str) -> Self {
        match (group, kind) {
            ("", "Pod") => Self::Listed(&[
                "metadata.name",
                "metadata.namespace",
                "spec.nodeName",
                "spec.restartPolicy",
                "spec.schedulerName",
                "spec.serviceAccountName",
                "spec.hostNetwork",
                "status.phase",
                "status.podIP",
                "status.podIPs",
                "status.nominatedNodeName",
                // Old clients' name of spec.nodeName.
                "spec.host",
            ]),
            ("", "Node") => Self::Listed(&["metadata.name", "spec.unschedulable"]),
            ("", "ReplicationController") => {
                Self::Listed(&["metadata.name", "metadata.namespace", "status.replicas"])
            }
            ("", "Event") => Self::Listed(&[
                "involvedObject.kind",
                "involvedObject.namespace",
                "involvedObject.name",
                "involvedObject.uid",
                "involvedObject.apiVersion",
                "involvedObject.resourceVersion",
                "involvedObject.fieldPath",
                "reason",
                "reportingComponent",
                "source",
                "type",
                "metadata.namespace",
                "metadata.name",
            ]),
            ("", "Service") => Self::Listed(&[
                "metadata.namespace",
                "metadata.name",
                "spec.clusterIP",
                "spec.type",
            ]),
            ("", "Namespace") => Self::Listed(&["status.phase", "metadata.name"]),
            ("", "Secret") => Self::Listed(&["type", "metadata.namespace", "metadata.name"]),
            // pkg/apis/events/v1/conversion.go: the v1 names of the core Event's fields.
            ("events.k8s.io", "Event") => Self::Listed(&[
                "reason",
                "regarding.kind",
                "regarding.namespace",
                "regarding.name",
                "regarding.uid",
                "regarding.apiVersion",
                "regarding.resourceVersion",
                "regarding.fieldPath",
                "reportingController",
                "type",
                "metadata.namespace",
                "metadata.name",
            ]),
            ("certificates.k8s.io", "CertificateSigningRequest") => {
                Self::Listed(&["metadata.name", "spec.signerName"])
            }
            ("batch", "Job") => Self::Job,
            _ => Self::Default,
        }
    }

    /// The fields accepted.
    pub fn fields(self) -> &'static [&'static str] {
        match self {
            Self::Default | Self::CustomResource { namespaced: true } => &COMMON_SELECTABLE_FIELDS,
            Self::CustomResource { namespaced: false } => &["metadata.name"],
            Self::Listed(fields) => fields,
            Self::Job => &["metadata.name", "metadata.namespace", "status.successful"],
        }
    }

    /// `Ok` when `field` is accepted, else the server's message.
    pub fn check(self, field: &str) -> Result<(), SelectorError> {
        if self.fields().contains(&field) {
            return Ok(());
        }
        Err(SelectorError::new(match self {
            Self::Default => format!(
                "{} is not a known field selector: only \"metadata.name\", \"metadata.namespace\"",
                crate::error::go_quote(field)
            ),
            Self::Job => format!(
                "field label {} not supported for Job",
                crate::error::go_quote(field)
            ),
            Self::Listed(_) | Self::CustomResource { .. } => {
                format!("field label not supported: {field}")
            }
        }))
    }
}

/// Splits on an unescaped `sep` (`splitTerms`: a `\\` keeps the next character, escape and all).
fn split_unescaped(text: &str, sep: char) -> Vec<String> {
    let mut parts = Vec::new();
    let mut current = String::new();
    let mut escaped = false;
    for c in text.chars() {
        if escaped {
            current.push('\\');
            current.push(c);
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == sep {
            parts.push(std::mem::take(&mut current));
        } else {
            current.push(c);
        }
    }
    if escaped {
        current.push('\\');
    }
    parts.push(current);
    parts
}

/// `fields.UnescapeValue`: `\\`, `\,` and `\=` are the only escapes; `,` and `=` must be
/// escaped.
fn unescape(value: &str) -> Result<String, SelectorError> {
    let mut out = String::new();
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some(e @ ('\\' | ',' | '=')) => out.push(e),
                Some(other) => {
                    return Err(SelectorError::new(format!(
                        "invalid field selector: invalid escape sequence: \\{other}"
                    )));
                }
                None => {
                    return Err(SelectorError::new(
                        "invalid field selector: invalid escape sequence: \\",
                    ));
                }
            }
        } else if matches!(c, ',' | '=') {
            // Go prints the rune with %v: its code point.
            return Err(SelectorError::new(format!(
                "invalid field selector: unescaped character in value: {}",
                u32::from(c)
            )));
        } else {
            out.push(c);
        }
    }
    Ok(out)
}

/// `splitTerm`: the first `!=`, `==` or `=` from the left splits the term.
fn split_term(term: &str) -> Option<(&str, bool, &str)> {
    term.char_indices().find_map(|(i, _)| {
        let rest = &term[i..];
        ["!=", "==", "="].iter().find_map(|op| {
            rest.strip_prefix(op)
                .map(|value| (&term[..i], *op == "!=", value))
        })
    })
}

impl FieldSelector {
    /// Parses a field selector (`fields.ParseSelector`) without checking which fields the kind
    /// supports. Empty terms are skipped; nothing is trimmed.
    pub fn parse(text: &str) -> Result<Self, SelectorError> {
        let mut requirements = Vec::new();
        if text.is_empty() {
            return Ok(Self { requirements });
        }
        for term in split_unescaped(text, ',') {
            if term.is_empty() {
                continue;
            }
            let Some((field, negated, value)) = split_term(&term) else {
                return Err(SelectorError::new(format!(
                    "invalid selector: '{text}'; can't understand '{term}'"
                )));
            };
            requirements.push(FieldRequirement {
                field: field.to_owned(),
                negated,
                value: unescape(value)?,
            });
        }
        Ok(Self { requirements })
    }

    /// Parses a field selector and refuses the fields the conversion of the built-in `kind` of
    /// `group` does not accept ([`FieldLabels::builtin`]).
    pub fn parse_for(group: &str, kind: &str, text: &str) -> Result<Self, SelectorError> {
        Self::parse_with(FieldLabels::builtin(group, kind), text)
    }

    /// Parses a field selector and refuses the fields `labels` does not accept, with the
    /// message of the first one (`Transform` stops at the first error).
    pub fn parse_with(labels: FieldLabels, text: &str) -> Result<Self, SelectorError> {
        let selector = Self::parse(text)?;
        for requirement in &selector.requirements {
            labels.check(&requirement.field)?;
        }
        Ok(selector)
    }

    /// The requirements, in order.
    pub fn requirements(&self) -> &[FieldRequirement] {
        &self.requirements
    }

    /// Whether an object satisfies every requirement, reading each field with `field`.
    pub fn matches(&self, mut field: impl FnMut(&str) -> Option<String>) -> bool {
        self.requirements.iter().all(|r| {
            let have = field(&r.field).unwrap_or_default();
            (have == r.value) != r.negated
        })
    }
}

//! The errors of the rules: one value against one rule ([`Invalid`]), and one field of an object
//! ([`FieldError`], printed as the API server prints `field.Error`).

use std::fmt;

/// A syntax rule of Kubernetes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Rule {
    /// RFC 1123 label: 1-63 of `[a-z0-9-]`, alphanumeric at both ends (namespace names).
    Dns1123Label,
    /// RFC 1123 subdomain: 1-253 characters, dot-separated DNS-1123 labels (most object names).
    Dns1123Subdomain,
    /// RFC 1035 label: a DNS-1123 label that starts with a letter (Service names).
    Dns1035Label,
    /// Qualified name: an optional DNS-1123 subdomain prefix and `/`, then a 1-63 character name
    /// of `[A-Za-z0-9-_.]` (label and annotation keys, condition types, finalizers).
    QualifiedName,
    /// Label key (a qualified name).
    LabelKey,
    /// Label value: empty, or up to 63 of `[A-Za-z0-9-_.]`, alphanumeric at both ends.
    LabelValue,
    /// Annotation key (a qualified name, compared in lower case).
    AnnotationKey,
    /// The `fieldManager` of a write: up to 128 printable characters, required for apply.
    FieldManager,
    /// A condition's `type` (a qualified name of at most 316 characters).
    ConditionType,
    /// A condition's `reason`: `[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?`, at most 1024.
    ConditionReason,
    /// An IANA service name (a port's name where a number could stand): up to 15 characters.
    IanaServiceName,
    /// A label selector.
    LabelSelector,
    /// A field selector.
    FieldSelector,
}

impl Rule {
    /// What a value of this rule is called in messages.
    pub fn describe(self) -> &'static str {
        match self {
            Rule::Dns1123Label => "RFC 1123 label",
            Rule::Dns1123Subdomain => "RFC 1123 subdomain",
            Rule::Dns1035Label => "RFC 1035 label",
            Rule::QualifiedName => "qualified name",
            Rule::LabelKey => "label key",
            Rule::LabelValue => "label value",
            Rule::AnnotationKey => "annotation key",
            Rule::FieldManager => "field manager",
            Rule::ConditionType => "condition type",
            Rule::ConditionReason => "condition reason",
            Rule::IanaServiceName => "IANA service name",
            Rule::LabelSelector => "label selector",
            Rule::FieldSelector => "field selector",
        }
    }
}

impl fmt::Display for Rule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.describe())
    }
}

/// A value that breaks a rule, with every problem the API server would list.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a valid {rule}: {}", problems.join("; "))]
pub struct Invalid {
    /// The rule broken.
    pub rule: Rule,
    /// The value.
    pub value: String,
    /// What is wrong, in the API server's words (at least one).
    pub problems: Vec<String>,
}

impl Invalid {
    /// `Ok` when there are no problems.
    pub(crate) fn check(rule: Rule, value: &str, problems: Vec<String>) -> Result<(), Invalid> {
        if problems.is_empty() {
            Ok(())
        } else {
            Err(Invalid {
                rule,
                value: value.to_owned(),
                problems,
            })
        }
    }

    /// The problems as one detail string, as `field.Invalid` joins them.
    pub fn detail(&self) -> String {
        self.problems.join(", ")
    }

    /// This error as a field error at `field`.
    pub fn at(&self, field: &str) -> FieldError {
        FieldError::invalid(field, &self.value, self.detail())
    }

    /// This error as one field error at `field` per problem, as the API server lists them
    /// (`for _, msg := range IsQualifiedName(..) { field.Invalid(..., msg) }`).
    pub fn each_at(&self, field: &str) -> Vec<FieldError> {
        self.problems
            .iter()
            .map(|problem| FieldError::invalid(field, &self.value, problem.as_str()))
            .collect()
    }
}

/// Whether Go's `unicode.IsPrint` holds for `c` (near enough: control characters, white space
/// other than ' ' and the common format characters are not printable).
pub(crate) fn is_printable(c: char) -> bool {
    c == ' '
        || !(c.is_control()
            || c.is_whitespace()
            || matches!(
                c,
                '\u{ad}'
                    | '\u{200b}'..='\u{200f}'
                    | '\u{202a}'..='\u{202e}'
                    | '\u{2060}'..='\u{2064}'
                    | '\u{feff}'
            ))
}

/// `text` quoted as Go's `%q` (`strconv.Quote`) quotes it, as field errors print values.
pub(crate) fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if is_printable(c) => out.push(c),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if u32::from(c) < 0x20 || c == '\u{7f}' => {
                out.push_str(&format!("\\x{:02x}", u32::from(c)));
            }
            c if u32::from(c) < 0x10000 => out.push_str(&format!("\\u{:04x}", u32::from(c))),
            c => out.push_str(&format!("\\U{:08x}", u32::from(c))),
        }
    }
    out.push('"');
    out
}

/// The type of a field error, as `k8s.io/apimachinery/pkg/util/validation/field.ErrorType`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ErrorKind {
    /// `Required value`.
    Required,
    /// `Invalid value: <value>`.
    Invalid(String),
    /// `Invalid value: <value>` for a value of the wrong type (`field.TypeInvalid`: a CRD
    /// schema's `type` or `format`, with the cause reason `FieldValueTypeInvalid`).
    TypeInvalid(String),
    /// `Unsupported value: <value>: supported values: ...`.
    NotSupported(String, Vec<String>),
    /// `Duplicate value: <value>`.
    Duplicate(String),
    /// `Too long: may not be more than N bytes` (`field.TooLong`, the built-in kinds' limits).
    TooLong(usize),
    /// A CRD schema's `maxLength` (`field.TooLongMaxLength`, which now words it as
    /// [`ErrorKind::TooLong`] does: `Too long: may not be more than N bytes`).
    TooLongMaxLength(usize),
    /// `Too many: N: must have at most M items`.
    TooMany(usize, usize),
    /// `Forbidden`.
    Forbidden,
    /// `field not declared in schema` (strict field validation).
    Unknown,
}

impl ErrorKind {
    /// The `reason` of a `StatusCause` for this kind (`FieldValueInvalid`, ...).
    pub fn cause_reason(&self) -> &'static str {
        match self {
            ErrorKind::Required => "FieldValueRequired",
            ErrorKind::Invalid(_) => "FieldValueInvalid",
            ErrorKind::TypeInvalid(_) => "FieldValueTypeInvalid",
            ErrorKind::NotSupported(..) => "FieldValueNotSupported",
            ErrorKind::Duplicate(_) => "FieldValueDuplicate",
            ErrorKind::TooLong(_) | ErrorKind::TooLongMaxLength(_) => "FieldValueTooLong",
            ErrorKind::TooMany(..) => "FieldValueTooMany",
            ErrorKind::Forbidden => "FieldValueForbidden",
            ErrorKind::Unknown => "FieldValueInvalid",
        }
    }
}

/// One field of an object that the API server refuses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FieldError {
    /// The field path (`metadata.labels`, `spec.ports[0].name`).
    pub field: String,
    /// What kind of error.
    pub kind: ErrorKind,
    /// Why (may be empty).
    pub detail: String,
}

impl FieldError {
    /// `field: Required value[: detail]`.
    pub fn required(field: &str, detail: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::Required,
            detail: detail.into(),
        }
    }

    /// `field: Invalid value: "value": detail`.
    pub fn invalid(field: &str, value: &str, detail: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::Invalid(go_quote(value)),
            detail: detail.into(),
        }
    }

    /// `field: Invalid value: "value": detail` as a type error (`field.TypeInvalid`).
    pub fn type_invalid(field: &str, value: &str, detail: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::TypeInvalid(go_quote(value)),
            detail: detail.into(),
        }
    }

    /// `field: Invalid value: <json>: detail`, for values that are not strings.
    pub fn invalid_json(field: &str, value: &serde_json::Value, detail: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::Invalid(value.to_string()),
            detail: detail.into(),
        }
    }

    /// `field: Unsupported value: "value": supported values: "a", "b"`.
    pub fn not_supported(field: &str, value: &str, supported: &[&str]) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::NotSupported(
                go_quote(value),
                supported.iter().map(|s| go_quote(s)).collect(),
            ),
            detail: String::new(),
        }
    }

    /// `field: Duplicate value: "value"`.
    pub fn duplicate(field: &str, value: &str) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::Duplicate(go_quote(value)),
            detail: String::new(),
        }
    }

    /// `field: Too long: may not be more than max bytes`.
    pub fn too_long(field: &str, max: usize) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::TooLong(max),
            detail: String::new(),
        }
    }

    /// `field: Too long: may not be more than max bytes` (a CRD schema's `maxLength`).
    pub fn too_long_max_length(field: &str, max: usize) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::TooLongMaxLength(max),
            detail: String::new(),
        }
    }

    /// `field: Too many: actual: must have at most max items`.
    pub fn too_many(field: &str, actual: usize, max: usize) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::TooMany(actual, max),
            detail: String::new(),
        }
    }

    /// `field: Forbidden: detail`.
    pub fn forbidden(field: &str, detail: impl Into<String>) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::Forbidden,
            detail: detail.into(),
        }
    }

    /// `field: field not declared in schema`.
    pub fn unknown(field: &str) -> Self {
        Self {
            field: field.to_owned(),
            kind: ErrorKind::Unknown,
            detail: String::new(),
        }
    }

    /// The error without its field, as a `StatusCause`'s `message`.
    pub fn message(&self) -> String {
        let body = match &self.kind {
            ErrorKind::Required => "Required value".to_owned(),
            ErrorKind::Invalid(value) | ErrorKind::TypeInvalid(value) => {
                format!("Invalid value: {value}")
            }
            ErrorKind::NotSupported(value, supported) => format!(
                "Unsupported value: {value}: supported values: {}",
                supported.join(", ")
            ),
            ErrorKind::Duplicate(value) => format!("Duplicate value: {value}"),
            ErrorKind::TooLong(1) | ErrorKind::TooLongMaxLength(1) => {
                "Too long: may not be more than 1 byte".to_owned()
            }
            ErrorKind::TooLong(max) | ErrorKind::TooLongMaxLength(max) => {
                format!("Too long: may not be more than {max} bytes")
            }
            ErrorKind::TooMany(actual, 1) => {
                format!("Too many: {actual}: must have at most 1 item")
            }
            ErrorKind::TooMany(actual, max) => {
                format!("Too many: {actual}: must have at most {max} items")
            }
            ErrorKind::Forbidden => "Forbidden".to_owned(),
            ErrorKind::Unknown => "field not declared in schema".to_owned(),
        };
        if self.detail.is_empty() {
            body
        } else {
            format!("{body}: {}", self.detail)
        }
    }
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.message())
    }
}

impl std::error::Error for FieldError {}

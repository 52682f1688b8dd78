//! Label keys and values, annotation keys and the annotations' total size.
//!
//! ```
//! use kube_syntax::labels::{label_key, label_value};
//! assert!(label_key("endpointslice.kubernetes.io/managed-by").is_ok());
//! assert!(label_value("").is_ok());
//! assert!(label_value("a/b").is_err());
//! assert!(label_value(&"x".repeat(64)).is_err());
//! ```

use std::collections::BTreeMap;

use crate::error::{FieldError, Invalid, Rule};
use crate::names::{is_qualified_name_part, max_bytes_msg, qualified_name_problems};

/// The longest label value.
pub const MAX_LABEL_VALUE_LEN: usize = 63;

/// The most bytes all annotations of one object may hold together (keys plus values).
pub const MAX_ANNOTATIONS_SIZE: usize = 256 * 1024;

const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

/// A label key (`ValidateLabelName`): a qualified name.
pub fn label_key(key: &str) -> Result<(), Invalid> {
    Invalid::check(Rule::LabelKey, key, qualified_name_problems(key))
}

/// Problems of `value` as a label value (none when valid).
pub fn label_value_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > MAX_LABEL_VALUE_LEN {
        problems.push(max_bytes_msg(MAX_LABEL_VALUE_LEN));
    }
    if !value.is_empty() && !is_qualified_name_part(value) {
        problems.push(LABEL_VALUE_MSG.to_owned());
    }
    problems
}

/// A label value (`IsValidLabelValue`): empty, or at most 63 of `[A-Za-z0-9-_.]` starting and
/// ending with a letter or digit. No `/`: that is allowed in keys only.
pub fn label_value(value: &str) -> Result<(), Invalid> {
    Invalid::check(Rule::LabelValue, value, label_value_problems(value))
}

/// An annotation key (`ValidateAnnotations`): a qualified name, checked in lower case.
pub fn annotation_key(key: &str) -> Result<(), Invalid> {
    Invalid::check(
        Rule::AnnotationKey,
        key,
        qualified_name_problems(&key.to_ascii_lowercase()),
    )
}

/// Every problem of a label map at `field` (`metadata.labels`, `spec.selector`), as the API
/// server lists them (keys first, then the value, per label; one error per problem).
pub fn labels_errors(field: &str, labels: &BTreeMap<String, String>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    for (key, value) in labels {
        if let Err(invalid) = label_key(key) {
            errors.extend(invalid.each_at(field));
        }
        if let Err(invalid) = label_value(value) {
            errors.extend(invalid.each_at(field));
        }
    }
    errors
}

/// Every problem of an annotation map at `field` (`metadata.annotations`): bad keys, and a
/// total size over [`MAX_ANNOTATIONS_SIZE`].
pub fn annotations_errors(field: &str, annotations: &BTreeMap<String, String>) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let mut size = 0usize;
    for (key, value) in annotations {
        if let Err(invalid) = annotation_key(key) {
            errors.extend(invalid.each_at(field));
        }
        size += key.len() + value.len();
    }
    if size > MAX_ANNOTATIONS_SIZE {
        errors.push(FieldError::too_long(field, MAX_ANNOTATIONS_SIZE));
    }
    errors
}

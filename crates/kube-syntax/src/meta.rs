//! Field managers, and the fields of a `metav1.Condition`.
//!
//! ```
//! use kube_syntax::meta::{condition_reason, field_manager};
//! assert!(field_manager("clusterset-agent", true).is_ok());
//! assert!(field_manager("", true).is_err()); // apply needs a manager
//! assert!(condition_reason("ConflictingType,ConflictingPorts").is_ok());
//! assert!(condition_reason("Not Ready").is_err());
//! ```

use serde_json::Value;

use crate::error::{FieldError, Invalid, Rule, is_printable};
use crate::names::qualified_name_problems;

/// The longest field manager name.
pub const MAX_FIELD_MANAGER_LEN: usize = 128;
/// The longest condition type.
pub const MAX_CONDITION_TYPE_LEN: usize = 316;
/// The longest condition reason.
pub const MAX_CONDITION_REASON_LEN: usize = 1024;
/// The longest condition message.
pub const MAX_CONDITION_MESSAGE_LEN: usize = 32768;
/// The statuses a condition may have.
pub const CONDITION_STATUSES: [&str; 3] = ["True", "False", "Unknown"];

/// The problems of a field manager name (`ValidatePatchOptions` and `ValidateFieldManager`), in
/// their order: required for apply, at most 128 bytes, one problem per non-printable character.
fn field_manager_problems(manager: &str, apply: bool) -> Vec<String> {
    let mut problems = Vec::new();
    if manager.is_empty() && apply {
        problems.push("is required for apply patch".to_owned());
    }
    if manager.len() > MAX_FIELD_MANAGER_LEN {
        problems.push(format!(
            "may not be more than {MAX_FIELD_MANAGER_LEN} bytes"
        ));
    }
    for (i, c) in manager.char_indices() {
        if !is_printable(c) {
            problems.push(format!(
                "invalid character U+{:04X} (at position {i})",
                u32::from(c)
            ));
        }
    }
    problems
}

/// The `fieldManager` of a write (`ValidateFieldManager` and the patch handler): at most 128
/// bytes of printable characters; required for a server-side apply (`apply`).
pub fn field_manager(manager: &str, apply: bool) -> Result<(), Invalid> {
    Invalid::check(
        Rule::FieldManager,
        manager,
        field_manager_problems(manager, apply),
    )
}

/// The field errors of a field manager at `field` (`fieldManager`), as the API server lists
/// them: `Required value: is required for apply patch`, `Too long: may not be more than 128
/// bytes`, `Invalid value: "...": invalid character U+0007 (at position 3)`.
pub fn field_manager_errors(field: &str, manager: &str, apply: bool) -> Vec<FieldError> {
    let mut errors = Vec::new();
    if manager.is_empty() && apply {
        errors.push(FieldError::required(field, "is required for apply patch"));
    }
    if manager.len() > MAX_FIELD_MANAGER_LEN {
        errors.push(FieldError::too_long(field, MAX_FIELD_MANAGER_LEN));
    }
    for (i, c) in manager.char_indices() {
        if !is_printable(c) {
            errors.push(FieldError::invalid(
                field,
                manager,
                format!("invalid character U+{:04X} (at position {i})", u32::from(c)),
            ));
        }
    }
    errors
}

/// A condition's `type`: a qualified name of at most 316 characters.
pub fn condition_type(value: &str) -> Result<(), Invalid> {
    let mut problems = qualified_name_problems(value);
    if value.len() > MAX_CONDITION_TYPE_LEN {
        problems.push(format!(
            "must be no more than {MAX_CONDITION_TYPE_LEN} characters"
        ));
    }
    Invalid::check(Rule::ConditionType, value, problems)
}

/// A condition's `reason`: `[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?`, 1-1024 characters.
pub fn condition_reason(value: &str) -> Result<(), Invalid> {
    let mut problems = Vec::new();
    let bytes = value.as_bytes();
    let body_ok = bytes
        .iter()
        .all(|&b| b.is_ascii_alphanumeric() || b == b'_' || b == b',' || b == b':');
    let first_ok = bytes.first().is_some_and(u8::is_ascii_alphabetic);
    let last_ok = bytes
        .last()
        .is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_');
    if !(body_ok && first_ok && last_ok) {
        problems.push("a condition reason must start with alphabetic character, optionally followed by a string of alphanumeric characters or '_,:', and must end with an alphanumeric character or '_' (e.g. 'my_name',  or 'MY_NAME',  or 'MyName',  or 'ReasonA,ReasonB',  or 'ReasonA:ReasonB', regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')".to_owned());
    }
    if value.len() > MAX_CONDITION_REASON_LEN {
        problems.push(format!(
            "must be no more than {MAX_CONDITION_REASON_LEN} characters"
        ));
    }
    Invalid::check(Rule::ConditionReason, value, problems)
}

/// Every problem of one `metav1.Condition` (as JSON) at `field` (`status.conditions[0]`), as
/// `ValidateCondition` lists them (one error per problem of the type; the reason's pattern and
/// length apart).
pub fn condition_errors(field: &str, condition: &Value) -> Vec<FieldError> {
    let mut errors = Vec::new();
    let text = |key: &str| condition.get(key).and_then(Value::as_str);
    match text("type") {
        None | Some("") => errors.push(FieldError::required(
            &format!("{field}.type"),
            "is required",
        )),
        Some(kind) => {
            if let Err(invalid) = condition_type(kind) {
                errors.extend(invalid.each_at(&format!("{field}.type")));
            }
        }
    }
    match text("status") {
        None | Some("") => errors.push(FieldError::required(&format!("{field}.status"), "")),
        Some(status) if CONDITION_STATUSES.contains(&status) => {}
        // Sorted, as `validConditionStatuses.List()` lists them.
        Some(status) => errors.push(FieldError::not_supported(
            &format!("{field}.status"),
            status,
            &["False", "True", "Unknown"],
        )),
    }
    if let Some(generation) = condition.get("observedGeneration").and_then(Value::as_i64)
        && generation < 0
    {
        errors.push(FieldError::invalid_json(
            &format!("{field}.observedGeneration"),
            &Value::from(generation),
            "must be greater than or equal to zero",
        ));
    }
    if text("lastTransitionTime").is_none_or(str::is_empty) {
        errors.push(FieldError::required(
            &format!("{field}.lastTransitionTime"),
            "",
        ));
    }
    match text("reason") {
        None | Some("") => errors.push(FieldError::required(&format!("{field}.reason"), "")),
        Some(reason) => {
            if let Err(invalid) = condition_reason(reason) {
                for problem in &invalid.problems {
                    if problem.starts_with("a condition reason") {
                        errors.push(FieldError::invalid(
                            &format!("{field}.reason"),
                            reason,
                            problem.as_str(),
                        ));
                    }
                }
            }
            if reason.len() > MAX_CONDITION_REASON_LEN {
                errors.push(FieldError::too_long(
                    &format!("{field}.reason"),
                    MAX_CONDITION_REASON_LEN,
                ));
            }
        }
    }
    if text("message").is_some_and(|m| m.len() > MAX_CONDITION_MESSAGE_LEN) {
        errors.push(FieldError::too_long(
            &format!("{field}.message"),
            MAX_CONDITION_MESSAGE_LEN,
        ));
    }
    errors
}

//! An export's conditions in words, when they keep its name from resolving.

use crate::input::ExportStatus;

/// The condition of an export that keeps its name from resolving, in words; `None` when it is
/// Valid and Ready (without Conflict).
pub fn export_problem(status: &ExportStatus) -> Option<String> {
    use mcs_types::conditions::{ConditionStatus, ServiceExportConditionType as Type};
    if status.conditions.is_empty() {
        return Some(
            "no conditions yet (is the MCS controller running in this cluster?)".to_owned(),
        );
    }
    let find = |wanted: Type| {
        status
            .conditions
            .iter()
            .find(|c| c.type_.parse::<Type>().ok() == Some(wanted))
    };
    let describe = |c: &crate::input::ExportCondition| {
        let mut text = format!("{}={}", c.type_, c.status);
        if !c.reason.is_empty() {
            text.push_str(&format!(" ({})", c.reason));
        }
        if !c.message.is_empty() {
            text.push_str(&format!(": {}", c.message));
        }
        text
    };
    let status_of = |c: &crate::input::ExportCondition| ConditionStatus::parse(&c.status);
    if let Some(valid) = find(Type::Valid).filter(|c| status_of(c) != Some(ConditionStatus::True)) {
        return Some(describe(valid));
    }
    if let Some(conflict) = conflict_of(status) {
        return Some(conflict);
    }
    match find(Type::Ready) {
        Some(ready) if status_of(ready) == Some(ConditionStatus::True) => None,
        Some(ready) => Some(describe(ready)),
        None if find(Type::Valid).is_some() => None,
        None => Some("no Valid or Ready condition yet".to_owned()),
    }
}

/// A `Conflict=True` condition, in words.
pub(super) fn conflict_of(status: &ExportStatus) -> Option<String> {
    use mcs_types::conditions::{
        ConditionStatus, ConflictReasons, ServiceExportConditionType as Type,
    };
    let conflict = status.conditions.iter().find(|c| {
        c.type_.parse::<Type>().ok() == Some(Type::Conflict)
            && ConditionStatus::parse(&c.status) == Some(ConditionStatus::True)
    })?;
    let reasons = ConflictReasons::parse(&conflict.reason).join();
    let mut text = format!("Conflict=True ({reasons})");
    if !conflict.message.is_empty() {
        text.push_str(&format!(": {}", conflict.message));
    }
    Some(text)
}

//! `ServiceExport` spec and status, shared by the `v1alpha1` and `v1beta1` versions (their schemas
//! are identical).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::{
    ConflictReasons, DesiredCondition, ServiceExportConditionType, find_condition,
    is_condition_true, set_condition,
};

/// Fields a newer API server sends that these types do not know yet; kept so that a
/// read-modify-write cycle does not drop them.
pub type UnknownFields = BTreeMap<String, serde_json::Value>;

/// The behaviour of a ServiceExport.
///
/// A ServiceExport named X in namespace N exports the Service N/X; there is no reference field.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExportSpec {
    /// exportedLabels describes the labels exported. It is optional for implementation.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_labels: BTreeMap<String, String>,
    /// exportedAnnotations describes the annotations exported. It is optional for implementation.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub exported_annotations: BTreeMap<String, String>,
    /// Fields this version of the types does not know.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown_fields: UnknownFields,
}

/// The observed state of a ServiceExport, written by the MCS controller.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ServiceExportStatus {
    /// Conditions of the export: `Valid`, `Ready` and `Conflict`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    #[schemars(schema_with = "crate::crd::condition_list_schema")]
    pub conditions: Vec<Condition>,
    /// Fields this version of the types does not know.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown_fields: UnknownFields,
}

impl ServiceExportStatus {
    /// The condition of the given type, if present.
    pub fn condition(&self, type_: ServiceExportConditionType) -> Option<&Condition> {
        find_condition(&self.conditions, type_.as_str())
    }

    /// Whether `Valid` is `True`.
    pub fn is_valid(&self) -> bool {
        is_condition_true(&self.conditions, ServiceExportConditionType::Valid.as_str())
    }

    /// Whether `Ready` is `True`.
    pub fn is_ready(&self) -> bool {
        is_condition_true(&self.conditions, ServiceExportConditionType::Ready.as_str())
    }

    /// Whether `Conflict` is `True`.
    pub fn has_conflict(&self) -> bool {
        is_condition_true(
            &self.conditions,
            ServiceExportConditionType::Conflict.as_str(),
        )
    }

    /// The reasons of a `Conflict=True` condition; empty when there is no conflict.
    pub fn conflict_reasons(&self) -> ConflictReasons {
        match self.condition(ServiceExportConditionType::Conflict) {
            Some(c) if c.status == "True" => ConflictReasons::parse(&c.reason),
            _ => ConflictReasons::new(),
        }
    }

    /// Sets a condition (see [`set_condition`]); says whether anything changed.
    pub fn set_condition(
        &mut self,
        desired: DesiredCondition,
        observed_generation: Option<i64>,
        now: Time,
    ) -> bool {
        set_condition(&mut self.conditions, desired, observed_generation, now)
    }
}

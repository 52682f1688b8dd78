//! `ServiceExport` spec and status, shared by the `v1alpha1` and `v1beta1` versions (their schemas
//! are identical).

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::conditions::{ConflictReasons, ServiceExportConditionType, StatusConditions};

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

crate::conditions::impl_status_conditions!(ServiceExportStatus);

impl ServiceExportStatus {
    /// Whether `Valid` is `True`.
    pub fn is_valid(&self) -> bool {
        self.condition_is_true(ServiceExportConditionType::Valid.as_str())
    }

    /// Whether `Ready` is `True`.
    pub fn is_ready(&self) -> bool {
        self.condition_is_true(ServiceExportConditionType::Ready.as_str())
    }

    /// Whether `Conflict` is `True`.
    pub fn has_conflict(&self) -> bool {
        self.condition_is_true(ServiceExportConditionType::Conflict.as_str())
    }

    /// The reasons of a `Conflict=True` condition; empty when there is no conflict.
    pub fn conflict_reasons(&self) -> ConflictReasons {
        match self.condition_of_type(ServiceExportConditionType::Conflict.as_str()) {
            Some(c) if c.status == "True" => ConflictReasons::parse(&c.reason),
            _ => ConflictReasons::new(),
        }
    }
}

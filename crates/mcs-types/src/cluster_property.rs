//! `ClusterProperty` (`about.k8s.io`, KEP-2149) spec and status.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::service_export::UnknownFields;

/// ClusterPropertySpec defines the desired state of ClusterProperty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClusterPropertySpec {
    /// ClusterProperty value
    #[schemars(length(min = 1))]
    pub value: String,
    /// Fields this version of the types does not know.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown_fields: UnknownFields,
}

/// ClusterPropertyStatus defines the observed state of ClusterProperty.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
pub struct ClusterPropertyStatus {
    /// Fields this version of the types does not know.
    #[serde(flatten)]
    #[schemars(skip)]
    pub unknown_fields: UnknownFields,
}

//! The identities shared by every MCS component: a service's [`ServiceKey`] (namespace
//! sameness) and a member cluster's [`ClusterId`].

use std::borrow::Cow;
use std::fmt;

use schemars::{JsonSchema, Schema, SchemaGenerator};
use serde::{Deserialize, Serialize};

use crate::names::dns_label_problem;

/// The namespace and name of a service; the identity of an exported service across the
/// clusterset (namespace sameness).
#[derive(
    Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, JsonSchema,
)]
pub struct ServiceKey {
    /// The namespace.
    #[schemars(schema_with = "crate::crd::dns_label_schema")]
    pub namespace: String,
    /// The Service (and ServiceExport, ServiceImport) name.
    #[schemars(schema_with = "crate::crd::dns_label_schema")]
    pub name: String,
}

impl ServiceKey {
    /// The key of `namespace/name`.
    pub fn new(namespace: &str, name: &str) -> Self {
        Self {
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

impl fmt::Display for ServiceKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.namespace, self.name)
    }
}

/// A cluster id as used in DNS names and the `multicluster.kubernetes.io/source-cluster` label:
/// an RFC 1123 DNS label.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(try_from = "String", into = "String")]
pub struct ClusterId(String);

/// A cluster id that is not a DNS label.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "invalid cluster id {value:?}: {problem}; set the cluster id (ClusterProperty cluster.clusterset.k8s.io or --cluster-id) to a DNS label such as \"east-1\""
)]
pub struct InvalidClusterId {
    /// The value given.
    pub value: String,
    /// What is wrong.
    pub problem: String,
}

/// A DNS label in the schema (the API server checks what [`ClusterId::new`] checks).
impl JsonSchema for ClusterId {
    fn schema_name() -> Cow<'static, str> {
        "ClusterId".into()
    }

    fn inline_schema() -> bool {
        true
    }

    fn json_schema(generator: &mut SchemaGenerator) -> Schema {
        crate::crd::dns_label_schema(generator)
    }
}

impl ClusterId {
    /// Validates a cluster id.
    pub fn new(value: &str) -> Result<Self, InvalidClusterId> {
        match dns_label_problem(value, false) {
            None => Ok(Self(value.to_owned())),
            Some(problem) => Err(InvalidClusterId {
                value: value.to_owned(),
                problem,
            }),
        }
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl TryFrom<String> for ClusterId {
    type Error = InvalidClusterId;
    fn try_from(value: String) -> Result<Self, Self::Error> {
        Self::new(&value)
    }
}

impl From<ClusterId> for String {
    fn from(id: ClusterId) -> Self {
        id.0
    }
}

impl fmt::Display for ClusterId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

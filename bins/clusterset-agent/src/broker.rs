//! The CRD of the broker records ([`BrokerRecord`], kind `ExportRecord`), which the agent
//! prints (`clusterset-agent crd`) for the hub cluster. The record type, its names and the
//! writer checks are in [`mcs_controller::broker`].

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
#[cfg(doc)]
use mcs_controller::broker::BrokerRecord;
use mcs_controller::broker::{GROUP, KIND, PLURAL, VERSION};

/// The CRD of [`BrokerRecord`], to install on the hub cluster.
///
/// ```
/// let crd = clusterset_agent::broker::crd();
/// assert_eq!(crd.metadata.name.as_deref(), Some("exportrecords.clusterset.io"));
/// ```
pub fn crd() -> CustomResourceDefinition {
    let dns_label = serde_json::json!({
        "type": "string", "minLength": 1, "maxLength": 63,
        "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    });
    let document = serde_json::json!({
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": format!("{PLURAL}.{GROUP}")},
        "spec": {
            "group": GROUP,
            "scope": "Namespaced",
            "names": {
                "kind": KIND, "plural": PLURAL, "singular": "exportrecord",
                "listKind": "ExportRecordList", "shortNames": ["exrec"]
            },
            "versions": [{
                "name": VERSION, "served": true, "storage": true,
                "additionalPrinterColumns": [
                    {"name": "Cluster", "type": "string", "jsonPath": ".spec.clusterId"},
                    {"name": "Namespace", "type": "string", "jsonPath": ".spec.serviceKey.namespace"},
                    {"name": "Service", "type": "string", "jsonPath": ".spec.serviceKey.name"},
                    {"name": "Exported", "type": "date", "jsonPath": ".spec.exportCreated"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
                ],
                "schema": {"openAPIV3Schema": {
                    "description": "One member cluster's export of one service, published by its clusterset-agent. Every agent merges the records of a service into its ServiceImport.",
                    "type": "object",
                    "required": ["spec"],
                    "properties": {
                        "apiVersion": {"type": "string"},
                        "kind": {"type": "string"},
                        "metadata": {"type": "object"},
                        "spec": {
                            "type": "object",
                            "x-kubernetes-preserve-unknown-fields": true,
                            "required": ["clusterId", "serviceKey", "exportCreated", "service"],
                            "properties": {
                                "clusterId": dns_label,
                                "serviceKey": {
                                    "type": "object",
                                    "required": ["namespace", "name"],
                                    "properties": {"namespace": dns_label, "name": dns_label}
                                },
                                "exportCreated": {"type": "string", "format": "date-time"},
                                "service": {"type": "object", "x-kubernetes-preserve-unknown-fields": true},
                                "exportedLabels": {"type": "object", "additionalProperties": {"type": "string"}},
                                "exportedAnnotations": {"type": "object", "additionalProperties": {"type": "string"}},
                                "globalIps": {"type": "array", "items": {"type": "string"}},
                                "endpoints": {
                                    "type": "array",
                                    "items": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}
                                }
                            }
                        }
                    }
                }}
            }]
        }
    });
    // The document above is a literal of the right shape; a failure here is a programming error
    // that the crd() unit test catches, so fall back to an empty CRD rather than panicking.
    serde_json::from_value(document).unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crd_parses_and_names_the_resource() {
        let crd = crd();
        assert_eq!(crd.spec.group, GROUP);
        assert_eq!(crd.spec.names.kind, KIND);
        assert_eq!(crd.spec.versions.len(), 1);
        assert!(crd.spec.versions[0].schema.is_some());
    }
}

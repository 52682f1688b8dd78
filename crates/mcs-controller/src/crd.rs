//! The broker's CRDs: `exportrecords.clusterset.io`, one `ExportRecord` object per export of
//! every cluster, whose `spec` is an [`ExportRecord`]; and `gatewayrecords.clusterset.io`, one
//! `GatewayRecord` per cluster ([`gateway_record_crd`]). The schema is generated from that type
//! (its `JsonSchema`), and the CRD is assembled by `mcs_types::crd`, like the MCS CRDs.
//!
//! What the API server checks: the record's identity (cluster id, namespace and name are DNS
//! labels, all four identity fields are required, the export time is a date-time) and the
//! types of the maps and lists. The `service` and each `endpoints` entry are open objects: the
//! agents read them with serde and report a record they cannot read, and a newer agent's fields
//! are kept (`spec` and those objects preserve unknown fields).
//!
//! ```
//! let crd = mcs_controller::crd::export_record_crd()?;
//! assert_eq!(crd.metadata.name.as_deref(), Some("exportrecords.clusterset.io"));
//! # Ok::<(), mcs_types::crd::CrdError>(())
//! ```

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition,
};
use mcs_types::crd::{CrdError, CrdShape, build_crd, printer_column, resource_schema, schema_for};
use schemars::{Schema, SchemaGenerator, json_schema};

use crate::ExportRecord;
use crate::broker::{GATEWAY_KIND, GATEWAY_PLURAL, GROUP, GatewaySpec, KIND, PLURAL, VERSION};

/// An object the API server keeps whole without checking it (the agents read it with serde).
pub(crate) fn open_object_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": true
    })
}

/// A list of [`open_object_schema`] objects.
pub(crate) fn open_object_list_schema(generator: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": open_object_schema(generator)
    })
}

/// The `exportrecords.clusterset.io` CRD, to install on the hub cluster: one namespaced version
/// (`v1alpha1`), `spec` required, no status, printer columns for cluster, service and export
/// time.
///
/// The error cannot happen with this crate's types (a test builds the CRD); it is returned
/// rather than hidden so that a schema change that breaks the conversion is seen.
pub fn export_record_crd() -> Result<CustomResourceDefinition, CrdError> {
    let mut schema = resource_schema(
        "One member cluster's export of one service, published by its clusterset-agent. Every \
         agent merges the records of a service into its ServiceImport.",
        Some(schema_for::<ExportRecord>()?),
        None,
    );
    schema.required = Some(vec!["spec".to_owned()]);
    let column = |name: &str, type_: &str, json_path: &str| -> CustomResourceColumnDefinition {
        printer_column(name, type_, json_path, None)
    };
    Ok(build_crd(CrdShape {
        group: GROUP,
        kind: KIND,
        plural: PLURAL,
        scope: "Namespaced",
        short_names: &["exrec"],
        categories: &[],
        labels: &[],
        versions: &[VERSION],
        storage_version: VERSION,
        status_subresource: false,
        columns: vec![
            column("Cluster", "string", ".spec.clusterId"),
            column("Namespace", "string", ".spec.serviceKey.namespace"),
            column("Service", "string", ".spec.serviceKey.name"),
            column("Exported", "date", ".spec.exportCreated"),
            column("Age", "date", ".metadata.creationTimestamp"),
        ],
        schema,
    }))
}

/// The `gatewayrecords.clusterset.io` CRD, to install on the hub cluster beside
/// [`export_record_crd`]: one namespaced version (`v1alpha1`), whose `spec` is a
/// [`GatewaySpec`] (all three fields required), printer columns for cluster, global CIDR and
/// gateway address.
///
/// ```
/// let crd = mcs_controller::crd::gateway_record_crd()?;
/// assert_eq!(crd.metadata.name.as_deref(), Some("gatewayrecords.clusterset.io"));
/// # Ok::<(), mcs_types::crd::CrdError>(())
/// ```
pub fn gateway_record_crd() -> Result<CustomResourceDefinition, CrdError> {
    let mut schema = resource_schema(
        "Where one member cluster's global CIDR is reached: its clusterset-gateway's address. \
         Written by that cluster's gateway, read by the others' to route to it.",
        Some(schema_for::<GatewaySpec>()?),
        None,
    );
    schema.required = Some(vec!["spec".to_owned()]);
    let column = |name: &str, json_path: &str| -> CustomResourceColumnDefinition {
        printer_column(name, "string", json_path, None)
    };
    Ok(build_crd(CrdShape {
        group: GROUP,
        kind: GATEWAY_KIND,
        plural: GATEWAY_PLURAL,
        scope: "Namespaced",
        short_names: &["gwrec"],
        categories: &[],
        labels: &[],
        versions: &[VERSION],
        storage_version: VERSION,
        status_subresource: false,
        columns: vec![
            column("Cluster", ".spec.clusterId"),
            column("Global CIDR", ".spec.globalCidr"),
            column("Gateway", ".spec.gatewayIp"),
            printer_column("Age", "date", ".metadata.creationTimestamp", None),
        ],
        schema,
    }))
}

/// Every CRD of the hub cluster: [`export_record_crd`] and [`gateway_record_crd`], in the
/// order `clusterset-agent crd` prints them.
///
/// ```
/// let names: Vec<_> = mcs_controller::crd::broker_crds()?
///     .into_iter()
///     .filter_map(|crd| crd.metadata.name)
///     .collect();
/// assert_eq!(names, ["exportrecords.clusterset.io", "gatewayrecords.clusterset.io"]);
/// # Ok::<(), mcs_types::crd::CrdError>(())
/// ```
pub fn broker_crds() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![export_record_crd()?, gateway_record_crd()?])
}

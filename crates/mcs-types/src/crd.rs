//! CustomResourceDefinitions generated from the types.
//!
//! The output is schema-equivalent to the upstream CRDs of mcs-api v0.5.0 and about-api (a test
//! compares every version's `openAPIV3Schema` structurally), so installing it or the upstream
//! files gives the same API.
//!
//! This module is also the one home of CRD assembly for clusterset's own CRDs (the broker's
//! `ExportRecord` in `mcs-controller`, the operator's `CephClusterAddressing` in
//! `mcs-ceph-api`): [`schema_for`] turns a spec or status type into a structural schema without
//! nullability, [`resource_schema`] puts spec and status under the standard root, and
//! [`build_crd`] makes the CRD from a [`CrdShape`].
//!
//! ```
//! let crds = mcs_types::crd::mcs_crds()?;
//! assert_eq!(crds[0].metadata.name.as_deref(), Some("serviceexports.multicluster.x-k8s.io"));
//! assert_eq!(crds[1].metadata.name.as_deref(), Some("serviceimports.multicluster.x-k8s.io"));
//! # Ok::<(), mcs_types::crd::CrdError>(())
//! ```

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceColumnDefinition, CustomResourceDefinition, CustomResourceDefinitionNames,
    CustomResourceDefinitionSpec, CustomResourceDefinitionVersion, CustomResourceSubresourceStatus,
    CustomResourceSubresources, CustomResourceValidation, JSONSchemaProps,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use schemars::generate::SchemaSettings;
use schemars::transform::{Transform, transform_subschemas};
use schemars::{JsonSchema, Schema, SchemaGenerator, json_schema};

use crate::labels::{
    ABOUT_GROUP, CRD_SCHEMA_REVISION, CRD_SCHEMA_REVISION_LABEL, GROUP, MCS_API_RELEASE,
    RELEASE_VERSION_LABEL,
};
use crate::{
    ClusterPropertySpec, ClusterPropertyStatus, ServiceExportSpec, ServiceExportStatus,
    ServiceImportSpec, ServiceImportStatus,
};

/// The API versions every CRD here serves, with the storage version last.
pub const VERSIONS: [&str; 2] = ["v1alpha1", "v1beta1"];

/// The API review that approved the `about.k8s.io` group (KEP-2149, the About API), the value of
/// the `api-approved.kubernetes.io` annotation its CRD must carry.
pub const ABOUT_API_APPROVAL: &str = "https://github.com/kubernetes/enhancements/pull/3084";

/// The version the API server stores.
pub const STORAGE_VERSION: &str = "v1beta1";

/// A schema that could not be turned into a Kubernetes `JSONSchemaProps`.
#[derive(Debug, thiserror::Error)]
#[error("the generated schema of {type_name} is not a valid Kubernetes JSONSchemaProps")]
pub struct CrdError {
    /// The Rust type whose schema failed.
    pub type_name: &'static str,
    /// The conversion error.
    #[source]
    pub source: serde_json::Error,
}

/// Makes a schemars schema a Kubernetes one:
/// - removes `nullable` (every optional field here is omitted rather than sent as null, and the
///   upstream CRDs have no nullable fields);
/// - removes `default`: schemars turns `#[serde(default)]` into one, but serde's default says
///   how a reader fills a missing field, while a schema default makes the API server store the
///   value in every object, which none of our CRDs asks for;
/// - replaces the integer formats of Rust's unsigned and small types, which Kubernetes does not
///   know (schemars writes `uint32` and keeps the `minimum: 0`), by the Kubernetes format that
///   holds every value (`int32` or `int64`; none for `u64`).
#[derive(Debug, Clone, Copy)]
struct KubernetesSchema;

/// The Kubernetes integer format for a schemars one, `None` to drop the format.
fn kubernetes_integer_format(format: &str) -> Option<&'static str> {
    match format {
        "int8" | "int16" | "uint8" | "uint16" | "int32" => Some("int32"),
        "uint32" | "int64" => Some("int64"),
        _ => None,
    }
}

impl Transform for KubernetesSchema {
    fn transform(&mut self, schema: &mut Schema) {
        if let Some(object) = schema.as_object_mut() {
            object.remove("nullable");
            object.remove("default");
            let integer = object.get("type").and_then(|t| t.as_str()) == Some("integer");
            if let Some(format) = object
                .get("format")
                .and_then(|f| f.as_str())
                .filter(|_| integer)
            {
                match kubernetes_integer_format(format) {
                    Some(kubernetes) => {
                        object.insert("format".to_owned(), kubernetes.into());
                    }
                    None => {
                        object.remove("format");
                    }
                }
            }
            // `Option<Struct>` arrives as `anyOf: [<struct>, {type: null}]`: keep the struct.
            let single = object
                .get("anyOf")
                .and_then(|any_of| any_of.as_array())
                .map(|variants| {
                    variants
                        .iter()
                        .filter(|v| v.get("type").and_then(|t| t.as_str()) != Some("null"))
                        .cloned()
                        .collect::<Vec<_>>()
                })
                .filter(|kept| kept.len() == 1);
            if let Some(mut kept) = single {
                object.remove("anyOf");
                if let Some(serde_json::Value::Object(inner)) = kept.pop() {
                    for (key, value) in inner {
                        object.entry(key).or_insert(value);
                    }
                }
            }
        }
        transform_subschemas(self, schema);
    }
}

/// The structural `openAPIV3Schema` of a spec or status type: its schemars schema with every
/// subschema inlined, no `nullable` (an absent optional field is omitted, never null), no
/// `default` (nothing is defaulted by the API server), Rust's integer formats turned into
/// Kubernetes' ones, and no root `title`. Field and type doc comments
/// become descriptions; `#[schemars(...)]` attributes add the rest (`extend(...)` for the
/// `x-kubernetes-*` extensions, `schema_with` for a hand-made part).
///
/// ```
/// #[derive(schemars::JsonSchema)]
/// struct Spec {
///     /// How many.
///     count: u32,
///     note: Option<String>,
///     #[serde(default)]
///     shown: bool,
/// }
/// let schema = mcs_types::crd::schema_for::<Spec>()?;
/// assert_eq!(schema.required, Some(vec!["count".to_owned()]));
/// let properties = schema.properties.unwrap_or_default();
/// assert_eq!(properties["count"].format.as_deref(), Some("int64"));
/// assert_eq!(properties["count"].description.as_deref(), Some("How many."));
/// assert_eq!(properties["note"].nullable, None);
/// assert_eq!(properties["shown"].default, None);
/// # Ok::<(), mcs_types::crd::CrdError>(())
/// ```
pub fn schema_for<T: JsonSchema>() -> Result<JSONSchemaProps, CrdError> {
    let generator: SchemaGenerator = SchemaSettings::openapi3()
        .with(|settings| {
            settings.inline_subschemas = true;
            settings.meta_schema = None;
        })
        .with_transform(KubernetesSchema)
        .into_generator();
    let mut value = generator.into_root_schema_for::<T>().to_value();
    if let Some(object) = value.as_object_mut() {
        object.remove("title");
    }
    serde_json::from_value(value).map_err(|source| CrdError {
        type_name: std::any::type_name::<T>(),
        source,
    })
}

/// The schema of an RFC 1123 DNS label, as the API server checks it (a cluster id, a
/// namespace, a Service name): for `#[schemars(schema_with = ...)]`.
pub fn dns_label_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "string",
        "minLength": 1,
        "maxLength": 63,
        "pattern": "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    })
}

/// The schema of a `[]metav1.Condition` list as controller-gen writes it: a list map keyed by
/// `type`, with the apimachinery validation of every field. For a `Vec<Condition>` field:
/// `#[schemars(schema_with = "mcs_types::crd::condition_list_schema")]`.
pub fn condition_list_schema(_: &mut SchemaGenerator) -> Schema {
    json_schema!({
        "type": "array",
        "items": {
            "description": "Condition contains details for one aspect of the current state of this API Resource.",
            "type": "object",
            "required": ["lastTransitionTime", "message", "reason", "status", "type"],
            "properties": {
                "lastTransitionTime": {
                    "description": "lastTransitionTime is the last time the condition transitioned from one status to another.",
                    "type": "string",
                    "format": "date-time"
                },
                "message": {
                    "description": "message is a human readable message indicating details about the transition. This may be an empty string.",
                    "type": "string",
                    "maxLength": 32768
                },
                "observedGeneration": {
                    "description": "observedGeneration represents the .metadata.generation that the condition was set based upon.",
                    "type": "integer",
                    "format": "int64",
                    "minimum": 0
                },
                "reason": {
                    "description": "reason contains a programmatic identifier indicating the reason for the condition's last transition.",
                    "type": "string",
                    "maxLength": 1024,
                    "minLength": 1,
                    "pattern": "^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$"
                },
                "status": {
                    "description": "status of the condition, one of True, False, Unknown.",
                    "type": "string",
                    "enum": ["True", "False", "Unknown"]
                },
                "type": {
                    "description": "type of condition in CamelCase or in foo.example.com/CamelCase.",
                    "type": "string",
                    "maxLength": 316,
                    "pattern": "^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$"
                }
            }
        },
        "x-kubernetes-list-map-keys": ["type"],
        "x-kubernetes-list-type": "map"
    })
}

fn string_property(description: &str) -> JSONSchemaProps {
    JSONSchemaProps {
        description: Some(description.to_owned()),
        type_: Some("string".to_owned()),
        ..Default::default()
    }
}

/// The root schema of a resource: `apiVersion`, `kind`, `metadata`, and `spec` and `status`
/// when given (a resource may have only a status, or only a spec). Nothing is required; a
/// caller that requires `spec` sets `required` on the result.
pub fn resource_schema(
    description: &str,
    spec: Option<JSONSchemaProps>,
    status: Option<JSONSchemaProps>,
) -> JSONSchemaProps {
    let mut properties = BTreeMap::from([
        (
            "apiVersion".to_owned(),
            string_property(
                "APIVersion defines the versioned schema of this representation of an object. \
                 Servers should convert recognized schemas to the latest internal value, and may \
                 reject unrecognized values. More info: \
                 https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#resources",
            ),
        ),
        (
            "kind".to_owned(),
            string_property(
                "Kind is a string value representing the REST resource this object represents. \
                 Servers may infer this from the endpoint the client submits requests to. Cannot \
                 be updated. In CamelCase. More info: \
                 https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#types-kinds",
            ),
        ),
        (
            "metadata".to_owned(),
            JSONSchemaProps {
                type_: Some("object".to_owned()),
                ..Default::default()
            },
        ),
    ]);
    properties.extend(spec.map(|spec| ("spec".to_owned(), spec)));
    properties.extend(status.map(|status| ("status".to_owned(), status)));
    JSONSchemaProps {
        description: Some(description.to_owned()),
        type_: Some("object".to_owned()),
        properties: Some(properties),
        ..Default::default()
    }
}

fn described(mut schema: JSONSchemaProps, description: &str) -> JSONSchemaProps {
    schema.description = Some(description.to_owned());
    schema
}

/// An additional printer column (`priority` 0: shown by `kubectl get`; set `priority: Some(1)`
/// with struct update syntax for `-o wide` only).
pub fn printer_column(
    name: &str,
    type_: &str,
    json_path: &str,
    description: Option<&str>,
) -> CustomResourceColumnDefinition {
    CustomResourceColumnDefinition {
        name: name.to_owned(),
        type_: type_.to_owned(),
        json_path: json_path.to_owned(),
        description: description.map(str::to_owned),
        ..Default::default()
    }
}

/// Everything that differs between two CRDs, for [`build_crd`].
#[derive(Debug, Clone)]
pub struct CrdShape<'a> {
    /// The API group, for example `clusterset.io`.
    pub group: &'a str,
    /// The kind; the singular name is its lower case, the list kind `<kind>List`.
    pub kind: &'a str,
    /// The plural (resource) name; the CRD is named `<plural>.<group>`.
    pub plural: &'a str,
    /// `Namespaced` or `Cluster`.
    pub scope: &'a str,
    /// `kubectl` short names.
    pub short_names: &'a [&'a str],
    /// Categories (`kubectl get <category>`).
    pub categories: &'a [&'a str],
    /// Labels of the CRD object.
    pub labels: &'a [(&'a str, &'a str)],
    /// The served versions, all with the same schema.
    pub versions: &'a [&'a str],
    /// The one of `versions` the API server stores.
    pub storage_version: &'a str,
    /// Whether the versions have the `status` subresource.
    pub status_subresource: bool,
    /// Additional printer columns of every version.
    pub columns: Vec<CustomResourceColumnDefinition>,
    /// The `openAPIV3Schema` of every version ([`resource_schema`]).
    pub schema: JSONSchemaProps,
}

/// The CRD of `shape`. A group that needs the `api-approved.kubernetes.io` annotation
/// (`*.k8s.io`, KEP-2337) gets the About API's approval.
///
/// ```
/// use mcs_types::crd::{build_crd, resource_schema, CrdShape};
/// let crd = build_crd(CrdShape {
///     group: "example.com",
///     kind: "Widget",
///     plural: "widgets",
///     scope: "Namespaced",
///     short_names: &[],
///     categories: &[],
///     labels: &[],
///     versions: &["v1"],
///     storage_version: "v1",
///     status_subresource: false,
///     columns: Vec::new(),
///     schema: resource_schema("A widget.", None, None),
/// });
/// assert_eq!(crd.metadata.name.as_deref(), Some("widgets.example.com"));
/// assert_eq!(crd.spec.names.list_kind.as_deref(), Some("WidgetList"));
/// ```
pub fn build_crd(shape: CrdShape<'_>) -> CustomResourceDefinition {
    let strings = |items: &[&str]| -> Option<Vec<String>> {
        (!items.is_empty()).then(|| items.iter().map(|s| (*s).to_owned()).collect())
    };
    let labels: BTreeMap<String, String> = shape
        .labels
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect();
    let versions = shape
        .versions
        .iter()
        .map(|version| CustomResourceDefinitionVersion {
            name: (*version).to_owned(),
            served: true,
            storage: *version == shape.storage_version,
            additional_printer_columns: (!shape.columns.is_empty()).then(|| shape.columns.clone()),
            schema: Some(CustomResourceValidation {
                open_api_v3_schema: Some(shape.schema.clone()),
            }),
            subresources: shape
                .status_subresource
                .then(|| CustomResourceSubresources {
                    status: Some(CustomResourceSubresourceStatus(serde_json::json!({}))),
                    scale: None,
                }),
            ..Default::default()
        })
        .collect();
    let singular = shape.kind.to_ascii_lowercase();
    // A CRD of a protected group (`*.k8s.io`, KEP-2337) is refused without the approval
    // annotation; about-api's own overlay adds the same one.
    let annotations = kube_syntax::crd::approval_required(shape.group).then(|| {
        BTreeMap::from([(
            kube_syntax::crd::APPROVAL_ANNOTATION.to_owned(),
            ABOUT_API_APPROVAL.to_owned(),
        )])
    });
    CustomResourceDefinition {
        metadata: ObjectMeta {
            name: Some(format!("{}.{}", shape.plural, shape.group)),
            labels: (!labels.is_empty()).then_some(labels),
            annotations,
            ..Default::default()
        },
        spec: CustomResourceDefinitionSpec {
            group: shape.group.to_owned(),
            names: CustomResourceDefinitionNames {
                kind: shape.kind.to_owned(),
                list_kind: Some(format!("{}List", shape.kind)),
                plural: shape.plural.to_owned(),
                singular: Some(singular),
                short_names: strings(shape.short_names),
                categories: strings(shape.categories),
            },
            scope: shape.scope.to_owned(),
            versions,
            ..Default::default()
        },
        status: None,
    }
}

const MCS_LABELS: &[(&str, &str)] = &[
    (RELEASE_VERSION_LABEL, MCS_API_RELEASE),
    (CRD_SCHEMA_REVISION_LABEL, CRD_SCHEMA_REVISION),
];

fn age_column() -> CustomResourceColumnDefinition {
    printer_column("Age", "date", ".metadata.creationTimestamp", None)
}

/// The `serviceexports.multicluster.x-k8s.io` CRD (versions `v1alpha1` and `v1beta1`).
pub fn service_export_crd() -> Result<CustomResourceDefinition, CrdError> {
    let schema = resource_schema(
        "ServiceExport declares that the Service with the same name and namespace as this export \
         should be consumable from other clusters.",
        Some(described(
            schema_for::<ServiceExportSpec>()?,
            "spec defines the behavior of a ServiceExport.",
        )),
        Some(described(
            schema_for::<ServiceExportStatus>()?,
            "status describes the current state of an exported service. Service configuration \
             comes from the Service that had the same name and namespace as this ServiceExport. \
             Populated by the multi-cluster service implementation's controller.",
        )),
    );
    Ok(build_crd(CrdShape {
        group: GROUP,
        kind: "ServiceExport",
        plural: "serviceexports",
        scope: "Namespaced",
        short_names: &["svcex", "svcexport"],
        categories: &[],
        labels: MCS_LABELS,
        versions: &VERSIONS,
        storage_version: STORAGE_VERSION,
        status_subresource: true,
        columns: vec![age_column()],
        schema,
    }))
}

/// The `serviceimports.multicluster.x-k8s.io` CRD (versions `v1alpha1` and `v1beta1`).
pub fn service_import_crd() -> Result<CustomResourceDefinition, CrdError> {
    let schema = resource_schema(
        "ServiceImport describes a service imported from clusters in a ClusterSet.",
        Some(described(
            schema_for::<ServiceImportSpec>()?,
            "spec defines the behavior of a ServiceImport.",
        )),
        Some(described(
            schema_for::<ServiceImportStatus>()?,
            "status contains information about the exported services that form the \
             multi-cluster service referenced by this ServiceImport.",
        )),
    );
    Ok(build_crd(CrdShape {
        group: GROUP,
        kind: "ServiceImport",
        plural: "serviceimports",
        scope: "Namespaced",
        short_names: &["svcim", "svcimport"],
        categories: &[],
        labels: MCS_LABELS,
        versions: &VERSIONS,
        storage_version: STORAGE_VERSION,
        status_subresource: true,
        columns: vec![
            printer_column(
                "Type",
                "string",
                ".spec.type",
                Some("The type of this ServiceImport"),
            ),
            printer_column(
                "IP",
                "string",
                ".spec.ips",
                Some("The VIP for this ServiceImport"),
            ),
            age_column(),
        ],
        schema,
    }))
}

/// The `clusterproperties.about.k8s.io` CRD (versions `v1alpha1` and `v1beta1`, cluster-scoped).
pub fn cluster_property_crd() -> Result<CustomResourceDefinition, CrdError> {
    let schema = resource_schema(
        "ClusterProperty is a resource provides a way to store identification related, cluster \
         scoped information for multi-cluster tools while creating flexibility for \
         implementations.",
        Some(schema_for::<ClusterPropertySpec>()?),
        Some(schema_for::<ClusterPropertyStatus>()?),
    );
    Ok(build_crd(CrdShape {
        group: ABOUT_GROUP,
        kind: "ClusterProperty",
        plural: "clusterproperties",
        scope: "Cluster",
        short_names: &[],
        categories: &["multicluster"],
        labels: &[],
        versions: &VERSIONS,
        storage_version: STORAGE_VERSION,
        status_subresource: true,
        columns: vec![
            printer_column("value", "string", ".spec.value", None),
            printer_column("age", "date", ".metadata.creationTimestamp", None),
        ],
        schema,
    }))
}

/// The MCS CRDs: ServiceExport, then ServiceImport.
pub fn mcs_crds() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![service_export_crd()?, service_import_crd()?])
}

/// The About API CRD: ClusterProperty.
pub fn about_crds() -> Result<Vec<CustomResourceDefinition>, CrdError> {
    Ok(vec![cluster_property_crd()?])
}

//! The top-level resource types, one per API version.
//!
//! They are written out here rather than with `kube::CustomResource` because the MCS CRDs
//! differ from what that derive produces: a ServiceExport may have no `spec` at all (the common
//! case), `spec` is optional at the root of every schema, and both versions share one CRD.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

/// What a document must say about itself to deserialize into a resource type.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DocumentError {
    /// `apiVersion`/`kind` name another resource.
    #[error(
        "document is {found_api_version}/{found_kind}, expected {expected_kind} in API group {expected_group}: deserialize it into the matching type"
    )]
    WrongKind {
        /// The kind of the target type.
        expected_kind: &'static str,
        /// The group of the target type.
        expected_group: &'static str,
        /// The document's `apiVersion`.
        found_api_version: String,
        /// The document's `kind`.
        found_kind: String,
    },
    /// A required `spec` is missing.
    #[error("{kind} {name:?} has no spec: a {kind} must have a spec")]
    MissingSpec {
        /// The kind.
        kind: &'static str,
        /// The object's name.
        name: String,
    },
}

/// Checks that a document's `apiVersion` and `kind` (where present) name `group`/`kind`. Any
/// version of the group is accepted: the MCS versions share one schema.
pub(crate) fn check_document_kind(
    api_version: Option<&str>,
    kind: Option<&str>,
    expected_group: &'static str,
    expected_kind: &'static str,
) -> Result<(), DocumentError> {
    let group_matches = api_version.is_none_or(|v| v.split('/').next() == Some(expected_group));
    let kind_matches = kind.is_none_or(|k| k == expected_kind);
    if group_matches && kind_matches {
        return Ok(());
    }
    Err(DocumentError::WrongKind {
        expected_kind,
        expected_group,
        found_api_version: api_version.unwrap_or("<none>").to_owned(),
        found_kind: kind.unwrap_or("<none>").to_owned(),
    })
}

/// How a spec type behaves when a document has no `spec`.
pub(crate) trait SpecWhenMissing: Sized {
    /// The spec to use, or `None` when a spec is required.
    fn when_missing() -> Option<Self>;
}

impl SpecWhenMissing for crate::ServiceExportSpec {
    fn when_missing() -> Option<Self> {
        Some(Self::default())
    }
}

impl SpecWhenMissing for crate::ServiceImportSpec {
    fn when_missing() -> Option<Self> {
        None
    }
}

impl SpecWhenMissing for crate::ClusterPropertySpec {
    fn when_missing() -> Option<Self> {
        None
    }
}

pub(crate) fn name_of(metadata: &ObjectMeta) -> String {
    metadata.name.clone().unwrap_or_default()
}

/// Implements [`kube_core::Resource`] for a type with a `metadata` field (`ObjectMeta`) from its
/// API group, version, kind and plural (`&'static str`s) and its scope type: the one
/// implementation of the trait for every resource type of the workspace (the MCS types here,
/// the broker's `ExportRecord`, the operator's `CephClusterAddressing` and Rook's `CephCluster`),
/// whatever its fields and serialization. `api_version` names a constant holding
/// `group/version`; without it, kube-core's default builds it from the group and version.
///
/// ```
/// use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
/// use kube_core::Resource;
///
/// struct Widget {
///     metadata: ObjectMeta,
/// }
/// mcs_types::impl_resource!(Widget {
///     group: "example.com",
///     version: "v1",
///     kind: "Widget",
///     plural: "widgets",
///     scope: kube_core::NamespaceResourceScope,
/// });
///
/// assert_eq!(Widget::api_version(&()), "example.com/v1");
/// assert_eq!(Widget::url_path(&(), Some("ns")), "/apis/example.com/v1/namespaces/ns/widgets");
/// let widget = Widget { metadata: ObjectMeta { name: Some("w".into()), ..ObjectMeta::default() } };
/// assert_eq!(widget.meta().name.as_deref(), Some("w"));
/// ```
#[macro_export]
macro_rules! impl_resource {
    (
        $name:ty {
            group: $group:expr,
            version: $version:expr,
            kind: $kind:expr,
            plural: $plural:expr,
            scope: $scope:ty
            $(, api_version: $api_version:expr)?
            $(,)?
        }
    ) => {
        impl $crate::__private::kube_core::Resource for $name {
            type DynamicType = ();
            type Scope = $scope;

            fn kind(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($kind)
            }
            fn group(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($group)
            }
            fn version(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($version)
            }
            $(
                fn api_version(_: &()) -> ::std::borrow::Cow<'_, str> {
                    ::std::borrow::Cow::Borrowed($api_version)
                }
            )?
            fn plural(_: &()) -> ::std::borrow::Cow<'_, str> {
                ::std::borrow::Cow::Borrowed($plural)
            }
            fn meta(&self) -> &$crate::__private::kube_core::ObjectMeta {
                &self.metadata
            }
            fn meta_mut(&mut self) -> &mut $crate::__private::kube_core::ObjectMeta {
                &mut self.metadata
            }
        }
    };
}

/// Defines one top-level resource type of one API version: the struct, its (de)serialization
/// with `apiVersion`/`kind`, and the kube `Resource`, `HasSpec` and `HasStatus` traits.
macro_rules! resource {
    (
        $(#[$meta:meta])*
        $name:ident {
            group: $group:literal,
            version: $version:literal,
            kind: $kind:literal,
            plural: $plural:literal,
            scope: $scope:ty,
            spec: $spec:ty,
            status: $status:ty,
        }
    ) => {
        $(#[$meta])*
        #[derive(Debug, Clone, PartialEq)]
        pub struct $name {
            /// Standard object metadata.
            pub metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
            /// The desired state.
            pub spec: $spec,
            /// The observed state, written by the MCS implementation.
            pub status: Option<$status>,
        }

        impl $name {
            /// The `apiVersion` of this type.
            pub const API_VERSION: &'static str = concat!($group, "/", $version);
            /// The `kind` of this type.
            pub const KIND: &'static str = $kind;

            /// An object with the given name and spec and no status.
            pub fn new(name: &str, spec: $spec) -> Self {
                Self {
                    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                        name: Some(name.to_owned()),
                        ..Default::default()
                    },
                    spec,
                    status: None,
                }
            }
        }

        impl serde::Serialize for $name {
            fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeStruct;
                let fields = 4 + usize::from(self.status.is_some());
                let mut object = serializer.serialize_struct($kind, fields)?;
                object.serialize_field("apiVersion", Self::API_VERSION)?;
                object.serialize_field("kind", Self::KIND)?;
                object.serialize_field("metadata", &self.metadata)?;
                object.serialize_field("spec", &self.spec)?;
                if let Some(status) = &self.status {
                    object.serialize_field("status", status)?;
                }
                object.end()
            }
        }

        impl<'de> serde::Deserialize<'de> for $name {
            fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
                use serde::de::Error as _;
                #[derive(serde::Deserialize)]
                #[serde(rename_all = "camelCase")]
                struct Wire {
                    api_version: Option<String>,
                    kind: Option<String>,
                    #[serde(default)]
                    metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
                    spec: Option<$spec>,
                    status: Option<$status>,
                }
                let wire = Wire::deserialize(deserializer)?;
                $crate::resources::check_document_kind(
                    wire.api_version.as_deref(),
                    wire.kind.as_deref(),
                    $group,
                    $kind,
                )
                .map_err(D::Error::custom)?;
                let spec = match wire.spec {
                    Some(spec) => spec,
                    None => <$spec as $crate::resources::SpecWhenMissing>::when_missing()
                        .ok_or_else(|| {
                            D::Error::custom($crate::resources::DocumentError::MissingSpec {
                                kind: $kind,
                                name: $crate::resources::name_of(&wire.metadata),
                            })
                        })?,
                };
                Ok(Self {
                    metadata: wire.metadata,
                    spec,
                    status: wire.status,
                })
            }
        }

        $crate::impl_resource!($name {
            group: $group,
            version: $version,
            kind: $kind,
            plural: $plural,
            scope: $scope,
            api_version: Self::API_VERSION,
        });

        impl kube_core::object::HasSpec for $name {
            type Spec = $spec;
            fn spec(&self) -> &$spec {
                &self.spec
            }
            fn spec_mut(&mut self) -> &mut $spec {
                &mut self.spec
            }
        }

        impl kube_core::object::HasStatus for $name {
            type Status = $status;
            fn status(&self) -> Option<&$status> {
                self.status.as_ref()
            }
            fn status_mut(&mut self) -> &mut Option<$status> {
                &mut self.status
            }
        }
    };
}

/// Defines the MCS (`multicluster.x-k8s.io`) resources of one version, plus conversions from the
/// other version (the schemas are identical, so conversion moves fields).
macro_rules! mcs_version {
    ($version:literal, other: $other:ident) => {
        use $crate::{
            ServiceExportSpec, ServiceExportStatus, ServiceImportSpec, ServiceImportStatus,
        };

        $crate::resources::resource! {
            /// Declares that the Service with the same name and namespace as this export should
            /// be consumable from other clusters.
            ServiceExport {
                group: "multicluster.x-k8s.io",
                version: $version,
                kind: "ServiceExport",
                plural: "serviceexports",
                scope: kube_core::NamespaceResourceScope,
                spec: ServiceExportSpec,
                status: ServiceExportStatus,
            }
        }

        $crate::resources::resource! {
            /// Describes a service imported from clusters in a ClusterSet.
            ServiceImport {
                group: "multicluster.x-k8s.io",
                version: $version,
                kind: "ServiceImport",
                plural: "serviceimports",
                scope: kube_core::NamespaceResourceScope,
                spec: ServiceImportSpec,
                status: ServiceImportStatus,
            }
        }

        impl ServiceExport {
            /// Whether the `Valid` condition is `True`.
            pub fn is_valid(&self) -> bool {
                self.status
                    .as_ref()
                    .is_some_and(ServiceExportStatus::is_valid)
            }

            /// Whether the `Ready` condition is `True`.
            pub fn is_ready(&self) -> bool {
                self.status
                    .as_ref()
                    .is_some_and(ServiceExportStatus::is_ready)
            }

            /// Whether the `Conflict` condition is `True`.
            pub fn has_conflict(&self) -> bool {
                self.status
                    .as_ref()
                    .is_some_and(ServiceExportStatus::has_conflict)
            }

            /// The reasons of a `Conflict=True` condition; empty when there is no conflict.
            pub fn conflict_reasons(&self) -> $crate::conditions::ConflictReasons {
                self.status
                    .as_ref()
                    .map(ServiceExportStatus::conflict_reasons)
                    .unwrap_or_default()
            }
        }

        impl ServiceImport {
            /// Whether the `Ready` condition is `True`.
            pub fn is_ready(&self) -> bool {
                self.status
                    .as_ref()
                    .is_some_and(ServiceImportStatus::is_ready)
            }
        }

        impl From<super::$other::ServiceExport> for ServiceExport {
            fn from(other: super::$other::ServiceExport) -> Self {
                Self {
                    metadata: other.metadata,
                    spec: other.spec,
                    status: other.status,
                }
            }
        }

        impl From<super::$other::ServiceImport> for ServiceImport {
            fn from(other: super::$other::ServiceImport) -> Self {
                Self {
                    metadata: other.metadata,
                    spec: other.spec,
                    status: other.status,
                }
            }
        }
    };
}

/// Defines the About API (`about.k8s.io`) resources of one version.
macro_rules! about_version {
    ($version:literal, other: $other:ident) => {
        use $crate::{ClusterPropertySpec, ClusterPropertyStatus};

        $crate::resources::resource! {
            /// Cluster-scoped identification information for multi-cluster tools (KEP-2149).
            /// The well-known names are [`CLUSTER_ID_PROPERTY`](crate::labels::CLUSTER_ID_PROPERTY)
            /// and [`CLUSTERSET_ID_PROPERTY`](crate::labels::CLUSTERSET_ID_PROPERTY).
            ClusterProperty {
                group: "about.k8s.io",
                version: $version,
                kind: "ClusterProperty",
                plural: "clusterproperties",
                scope: kube_core::ClusterResourceScope,
                spec: ClusterPropertySpec,
                status: ClusterPropertyStatus,
            }
        }

        impl ClusterProperty {
            /// A property with the given name and value.
            pub fn with_value(name: &str, value: &str) -> Self {
                Self::new(
                    name,
                    ClusterPropertySpec {
                        value: value.to_owned(),
                        ..Default::default()
                    },
                )
            }
        }

        impl From<super::$other::ClusterProperty> for ClusterProperty {
            fn from(other: super::$other::ClusterProperty) -> Self {
                Self {
                    metadata: other.metadata,
                    spec: other.spec,
                    status: other.status,
                }
            }
        }
    };
}

pub(crate) use {about_version, mcs_version, resource};

//! Well-known label and annotation keys and values of the MCS API and its implementations.

/// API group of ServiceExport and ServiceImport.
pub const GROUP: &str = "multicluster.x-k8s.io";

/// API group of ClusterProperty (KEP-2149, "About API").
pub const ABOUT_GROUP: &str = "about.k8s.io";

/// The mcs-api release these types follow; upstream CRDs carry it as
/// [`RELEASE_VERSION_LABEL`].
pub const MCS_API_RELEASE: &str = "v0.5.0";

/// CRD label with the mcs-api release the CRD comes from.
pub const RELEASE_VERSION_LABEL: &str = "multicluster.x-k8s.io/release-version";

/// CRD label with the schema revision within a release (upstream uses it to prevent downgrades).
pub const CRD_SCHEMA_REVISION_LABEL: &str = "multicluster.x-k8s.io/crd-schema-revision";

/// The schema revision of the v0.5.0 CRDs.
pub const CRD_SCHEMA_REVISION: &str = "0";

/// On an imported EndpointSlice: the name of the ServiceImport it belongs to (the MCS analogue of
/// `kubernetes.io/service-name`).
pub const SERVICE_NAME_LABEL: &str = "multicluster.kubernetes.io/service-name";

/// On an imported EndpointSlice: the cluster id of the cluster its endpoints come from.
pub const SOURCE_CLUSTER_LABEL: &str = "multicluster.kubernetes.io/source-cluster";

/// On a ServiceImport: the name of the derived Service (mcs-api reference controller).
pub const DERIVED_SERVICE_ANNOTATION: &str = "multicluster.kubernetes.io/derived-service";

/// The standard EndpointSlice label naming the controller that manages the slice.
pub const ENDPOINTSLICE_MANAGED_BY_LABEL: &str = "endpointslice.kubernetes.io/managed-by";

/// The `managed-by` value of Kubernetes' own EndpointSlice controller; MCS slices must not use it.
pub const KUBERNETES_ENDPOINTSLICE_CONTROLLER: &str = "endpointslice-controller.k8s.io";

/// The `managed-by` value clusterset's controller puts on the EndpointSlices it writes (and
/// selects them by). A label *value*, so no `/`: a DNS-style name in the form of Kubernetes'
/// own `endpointslice-controller.k8s.io` and Lighthouse's `lighthouse-agent.submariner.io`.
///
/// ```
/// use mcs_types::labels::CLUSTERSET_ENDPOINTSLICE_CONTROLLER;
/// assert!(kube_syntax::labels::label_value(CLUSTERSET_ENDPOINTSLICE_CONTROLLER).is_ok());
/// ```
pub const CLUSTERSET_ENDPOINTSLICE_CONTROLLER: &str = "mcs-controller.clusterset.io";

/// The standard `app.kubernetes.io/managed-by` label key.
pub const APP_MANAGED_BY_LABEL: &str = "app.kubernetes.io/managed-by";
/// The standard `app.kubernetes.io/name` label key.
pub const APP_NAME_LABEL: &str = "app.kubernetes.io/name";
/// The standard `app.kubernetes.io/instance` label key.
pub const APP_INSTANCE_LABEL: &str = "app.kubernetes.io/instance";
/// The standard `app.kubernetes.io/component` label key.
pub const APP_COMPONENT_LABEL: &str = "app.kubernetes.io/component";
/// The standard `app.kubernetes.io/part-of` label key.
pub const APP_PART_OF_LABEL: &str = "app.kubernetes.io/part-of";
/// The standard `app.kubernetes.io/version` label key.
pub const APP_VERSION_LABEL: &str = "app.kubernetes.io/version";
/// The standard `app.kubernetes.io/created-by` label key.
pub const APP_CREATED_BY_LABEL: &str = "app.kubernetes.io/created-by";
/// The `app.kubernetes.io/part-of` value of every clusterset component (the charts' Pods,
/// the hub's objects).
pub const CLUSTERSET_PART_OF: &str = "clusterset";

/// The standard `kubernetes.io/service-name` EndpointSlice label. Imported slices must not set it
/// to the exported Service's name (it would double the local endpoints).
pub const KUBERNETES_SERVICE_NAME_LABEL: &str = "kubernetes.io/service-name";

/// Name of the ClusterProperty that holds this cluster's id (KEP-2149).
pub const CLUSTER_ID_PROPERTY: &str = "cluster.clusterset.k8s.io";

/// Name of the ClusterProperty that holds the id of the clusterset this cluster belongs to.
pub const CLUSTERSET_ID_PROPERTY: &str = "clusterset.k8s.io";

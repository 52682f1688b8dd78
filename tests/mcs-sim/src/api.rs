//! What the simulated API servers accept and how they answer: the resource types they serve
//! (with the committed broker CRD), the strict checks of a write, the hub's 403 message, the
//! merge of a server-side apply's maps, and the listing a watch starts with.

use std::collections::BTreeMap;

use kube_syntax::object::{Catalog, Completeness};
use mcs_controller::config::AgentConfig;
use mcs_controller::core::Input;
use mcs_controller::watch::Event;

use crate::{ClusterStore, SimError};

/// The broker's CRDs (ExportRecord, GatewayRecord) as deployed.
const BROKER_CRD: &str = include_str!("../../../deploy/clusterset-agent/broker-crd.yaml");

/// The resource types the simulated API servers serve, as a real one with clusterset installed
/// does: the built-in types, the MCS CRDs (ServiceExport, ServiceImport), the About API CRD
/// (ClusterProperty) and the broker's CRDs (the committed
/// `deploy/clusterset-agent/broker-crd.yaml`, which the agent's tests keep equal to the CRD it
/// prints).
pub fn api_catalog() -> Result<Catalog, SimError> {
    let mut crds = mcs_types::crd::mcs_crds()?;
    crds.extend(mcs_types::crd::about_crds()?);
    crds.extend(serde_saphyr::from_multiple::<
        k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition,
    >(BROKER_CRD)?);
    crds.iter().try_fold(Catalog::builtin(), |catalog, crd| {
        Ok(catalog.with_crd(&serde_json::to_value(crd)?))
    })
}

/// The message of the `422 Invalid` a real API server answers when `object` (a whole object:
/// a create, an apply's result, a replace) is written ([`Catalog::refusal`]), or of the
/// strict decoding error for a field its CRD does not declare, or `None` when it is accepted.
///
/// ```
/// use clusterset_sim::{api_catalog, refusal};
/// let catalog = api_catalog()?;
/// let slice = serde_json::json!({
///     "apiVersion": "discovery.k8s.io/v1", "kind": "EndpointSlice",
///     "metadata": {"name": "web-c0", "namespace": "shop", "labels": {
///         "endpointslice.kubernetes.io/managed-by": "clusterset.io/mcs-controller"}},
///     "addressType": "IPv4", "endpoints": [],
/// });
/// let message = refusal(&catalog, &slice).unwrap_or_default();
/// assert!(message.starts_with("EndpointSlice.discovery.k8s.io \"web-c0\" is invalid: metadata.labels"));
/// # Ok::<(), clusterset_sim::SimError>(())
/// ```
pub fn refusal(catalog: &Catalog, object: &impl serde::Serialize) -> Option<String> {
    let value = match serde_json::to_value(object) {
        Ok(value) => value,
        Err(e) => return Some(format!("the object is not JSON: {e}")),
    };
    if let Some(refused) = catalog.refusal(&value, Completeness::Whole) {
        return Some(refused.message().to_owned());
    }
    // Checked as under `fieldValidation=Strict`: the agent names no field validation, so a
    // real server would drop a field the CRD does not declare with a warning, but the agent
    // writing one is a bug the simulation should show.
    let unknown = catalog.unknown_fields(&value);
    (!unknown.is_empty()).then(|| {
        let listed: Vec<String> = unknown
            .iter()
            .map(|e| format!("unknown field {:?}", e.field))
            .collect();
        format!("strict decoding error: {}", listed.join(", "))
    })
}

/// `object`, or the 422 message that refuses it (never refused without a catalog).
pub(crate) fn accepted<T: serde::Serialize>(
    catalog: Option<&Catalog>,
    object: T,
) -> Result<T, String> {
    match catalog.and_then(|catalog| refusal(catalog, &object)) {
        None => Ok(object),
        Some(message) => Err(message),
    }
}

/// The hub's 403 message for a request of the agent of `config` (its ServiceAccount from the hub
/// manifests).
pub(crate) fn forbidden_message(
    config: &AgentConfig,
    verb: &str,
    (group, plural): (&str, &str),
    namespace: &str,
    name: &str,
) -> String {
    let user =
        mcs_controller::hub::service_account_user(&config.broker_namespace, &config.cluster_id);
    kube_syntax::status::forbidden(&kube_syntax::status::Denied {
        user: &user,
        verb,
        group,
        plural,
        name,
        namespace,
    })
    .message()
    .to_owned()
}

pub(crate) fn merge_maps(
    stored: &mut Option<BTreeMap<String, String>>,
    desired: Option<&BTreeMap<String, String>>,
) {
    if let Some(desired) = desired {
        stored
            .get_or_insert_with(BTreeMap::new)
            .extend(desired.iter().map(|(k, v)| (k.clone(), v.clone())));
    }
}

/// What a simulated API server answers to a local write.
pub(crate) enum Answer {
    /// Stored; the watch event it causes.
    Stored(Box<Input>),
    /// Accepted, but the stored object is as it was: no watch event.
    Unchanged,
    /// 404.
    NotFound,
    /// 422 with this message.
    Refused(String),
}

impl Answer {
    /// Stores an accepted object (`store` returns its watch event) or passes the refusal on.
    pub(crate) fn store<T>(accepted: Result<T, String>, store: impl FnOnce(T) -> Input) -> Self {
        match accepted {
            Ok(object) => Self::Stored(Box::new(store(object))),
            Err(message) => Self::Refused(message),
        }
    }
}

/// One watch listing `items`: `Init`, `InitApply` per item, `InitDone`.
pub(crate) fn listed<T>(
    items: impl Iterator<Item = T>,
    wrap: fn(Event<T>) -> Input,
    out: &mut Vec<Input>,
) {
    out.push(wrap(Event::Init));
    out.extend(items.map(|i| wrap(Event::InitApply(i))));
    out.push(wrap(Event::InitDone));
}

/// A member's six watches listing everything stored in it.
pub(crate) fn local_listing(s: &ClusterStore) -> Vec<Input> {
    let mut inputs = Vec::new();
    listed(
        s.namespaces.values().cloned(),
        Input::Namespace,
        &mut inputs,
    );
    listed(s.services.values().cloned(), Input::Service, &mut inputs);
    listed(
        s.exports.values().cloned(),
        Input::ServiceExport,
        &mut inputs,
    );
    listed(
        s.local_slices.values().cloned(),
        Input::LocalEndpointSlice,
        &mut inputs,
    );
    listed(
        s.imports.values().cloned(),
        Input::ServiceImport,
        &mut inputs,
    );
    listed(
        s.imported_slices.values().cloned(),
        Input::ImportedEndpointSlice,
        &mut inputs,
    );
    inputs
}

//! Writing objects as both daemons write them: server-side apply under the daemon's field
//! manager ([`apply`], [`apply_status`]) and deletes that treat "already gone" as done
//! ([`delete`]).
//!
//! Pruning (deleting what a daemon made and no longer wants) is decided by the pure cores, not
//! here: each selects its own objects by its labels in a watch cache that has synced, compares
//! them with what it wants, and asks for deletes, by uid where an object of the same name may
//! have been made again by someone else ([`Precondition::Uid`]). A prune that listed and
//! deleted by label selector here would act on a view the decision never saw.

use kube::Resource;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::core::NamespaceResourceScope;
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::{ApiError, object_key};

/// Who owns the fields an apply sets when another field manager set them before.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Ownership {
    /// The daemon's own objects and fields: the apply takes them over (`force=true`).
    Force,
    /// Shared objects: a field another manager owns is a 409 [`ApiError::Conflict`] for the
    /// caller to report, not a silent overwrite.
    Shared,
}

impl Ownership {
    /// The apply parameters of `manager` with this ownership.
    ///
    /// ```
    /// use clusterset_daemon::apply::Ownership;
    /// assert!(Ownership::Force.params("op").force);
    /// assert!(!Ownership::Shared.params("op").force);
    /// assert_eq!(Ownership::Shared.params("op").field_manager.as_deref(), Some("op"));
    /// ```
    pub fn params(self, manager: &str) -> PatchParams {
        let params = PatchParams::apply(manager);
        match self {
            Self::Force => params.force(),
            Self::Shared => params,
        }
    }
}

/// Server-side applies `object` (named by its own metadata) in its namespace as `manager`.
/// `builder` names who built the object, for the error when it lacks a namespace or name.
pub async fn apply<K>(
    client: &kube::Client,
    manager: &str,
    ownership: Ownership,
    object: &K,
    builder: &str,
) -> Result<K, ApiError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + Serialize
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let (namespace, name) = object_key(object.meta(), builder)?;
    apply_document(client, manager, ownership, namespace, name, object).await
}

/// Server-side applies `body` (a whole object, or an apply document already built: a partial
/// object) to the object `namespace/name` of kind `K`.
pub async fn apply_document<K>(
    client: &kube::Client,
    manager: &str,
    ownership: Ownership,
    namespace: &str,
    name: &str,
    body: &(impl Serialize + std::fmt::Debug),
) -> Result<K, ApiError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let api = Api::<K>::namespaced(client.clone(), namespace);
    Ok(api
        .patch(name, &ownership.params(manager), &Patch::Apply(body))
        .await?)
}

/// The apply document of a status: the object's identity and `status`, nothing else, so that
/// the apply claims only the status fields.
///
/// ```
/// use k8s_openapi::api::core::v1::Service;
/// let document = clusterset_daemon::apply::status_document::<Service>("ns", "web", &serde_json::json!({"x": 1}));
/// assert_eq!(document, serde_json::json!({
///     "apiVersion": "v1", "kind": "Service",
///     "metadata": {"name": "web", "namespace": "ns"}, "status": {"x": 1},
/// }));
/// ```
pub fn status_document<K: Resource<DynamicType = ()>>(
    namespace: &str,
    name: &str,
    status: &impl Serialize,
) -> serde_json::Value {
    serde_json::json!({
        "apiVersion": K::api_version(&()),
        "kind": K::kind(&()),
        "metadata": {"name": name, "namespace": namespace},
        "status": status,
    })
}

/// Server-side applies `status` to the status subresource of `namespace/name` (kind `K`).
pub async fn apply_status<K>(
    client: &kube::Client,
    manager: &str,
    ownership: Ownership,
    namespace: &str,
    name: &str,
    status: &impl Serialize,
) -> Result<K, ApiError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let api = Api::<K>::namespaced(client.clone(), namespace);
    let document = status_document::<K>(namespace, name, status);
    Ok(api
        .patch_status(name, &ownership.params(manager), &Patch::Apply(&document))
        .await?)
}

/// Which object a [`delete`] may delete.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Precondition<'a> {
    /// Whatever object has the name.
    None,
    /// Only the object with this uid: an object made again under the same name since the
    /// decision read it is left alone (the API server answers 409, which is done).
    Uid(&'a str),
}

/// Deletes `namespace/name` (kind `K`). Already gone (404), or, with [`Precondition::Uid`],
/// replaced by another object of the same name (409), is done, not an error.
pub async fn delete<K>(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    precondition: Precondition<'_>,
) -> Result<(), ApiError>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    let params = match precondition {
        Precondition::None => DeleteParams::default(),
        Precondition::Uid(uid) => DeleteParams {
            preconditions: Some(Preconditions {
                uid: Some(uid.to_owned()),
                resource_version: None,
            }),
            ..DeleteParams::default()
        },
    };
    match delete_with::<K>(client, namespace, name, &params).await {
        Ok(()) => Ok(()),
        Err(error)
            if matches!(precondition, Precondition::Uid(_)) && status_code(&error) == Some(409) =>
        {
            Ok(())
        }
        Err(error) => Err(error.into()),
    }
}

/// Deletes `namespace/name` (kind `K`) with `params` (a propagation policy, preconditions);
/// already gone (404) is done. Any other failure is kube's error, for callers that report it
/// in their own error type ([`delete`] is this with the daemons' [`ApiError`]).
pub async fn delete_with<K>(
    client: &kube::Client,
    namespace: &str,
    name: &str,
    params: &DeleteParams,
) -> Result<(), kube::Error>
where
    K: Resource<DynamicType = (), Scope = NamespaceResourceScope>
        + DeserializeOwned
        + Clone
        + std::fmt::Debug,
{
    match Api::<K>::namespaced(client.clone(), namespace)
        .delete(name, params)
        .await
    {
        Ok(_) => Ok(()),
        Err(error) if is_not_found(&error) => Ok(()),
        Err(error) => Err(error),
    }
}

/// The status code of an error the API server answered with.
///
/// ```
/// let error = kube::Error::Api(Box::new(kube::core::Status::failure("gone", "NotFound").with_code(404)));
/// assert_eq!(clusterset_daemon::apply::status_code(&error), Some(404));
/// ```
pub fn status_code(error: &kube::Error) -> Option<u16> {
    match error {
        kube::Error::Api(status) => Some(status.code),
        _ => None,
    }
}

/// Whether the API server answered 404 Not Found: the object (or its namespace) is not there,
/// or, for a list, its type is not served. The one test of it: a delete takes it as done, a
/// reader as "nothing there".
///
/// ```
/// let error = kube::Error::Api(Box::new(kube::core::Status::failure("gone", "NotFound").with_code(404)));
/// assert!(clusterset_daemon::apply::is_not_found(&error));
/// ```
pub fn is_not_found(error: &kube::Error) -> bool {
    status_code(error) == Some(404)
}

//! What `mcsctl status --watch` watches: every object type `status` reads ([`crate::status::fetch`]),
//! with kube's watcher (a list, then a watch from its resource version, again after the
//! watch ends), in the same namespaces with the same selectors. [`changes`] yields one item per
//! change of any of them; the command then reads again and reprints the report.

use std::pin::Pin;

use ceph_address_plan::rook;
use clusterset_report::Scope;
use clusterset_report::status::{DAEMON_SERVICES, Fetched, OSD_DEPLOYMENTS};
use futures::{Stream, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use mcs_types::labels::SERVICE_NAME_LABEL;

use crate::reader::{KubeReader, addressing_resource, ceph_cluster_resource};

/// A watch that failed (it is retried with backoff; the error says which and why).
#[derive(Debug, thiserror::Error)]
#[error("watching {what}")]
pub struct WatchError {
    /// What was watched, where.
    pub what: String,
    /// Why it failed.
    #[source]
    pub source: watcher::Error,
}

/// One object type to watch: where and with which selectors.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Watched {
    /// The type.
    pub resource: ApiResource,
    /// One namespace, or all.
    pub scope: Scope,
    /// A label selector.
    pub labels: Option<String>,
    /// A field selector.
    pub fields: Option<String>,
}

impl Watched {
    fn of(resource: ApiResource, scope: &Scope) -> Self {
        Self {
            resource,
            scope: scope.clone(),
            labels: None,
            fields: None,
        }
    }

    fn describe(&self) -> String {
        let group = if self.resource.group.is_empty() {
            String::new()
        } else {
            format!(".{}", self.resource.group)
        };
        format!("{}{group} in {}", self.resource.plural, self.scope)
    }
}

/// Whether the API server serves `resource` (a 404 on its list means its CRD is not
/// installed).
async fn served(reader: &KubeReader, resource: &ApiResource) -> bool {
    let api: Api<DynamicObject> = Api::all_with(reader.client().clone(), resource);
    !matches!(
        api.list(&ListParams::default().limit(1)).await,
        Err(kube::Error::Api(status)) if status.code == 404
    )
}

/// The MCS type `kind` in the version the server serves (`v1beta1`, else `v1alpha1`, as the
/// reader falls back), if any.
async fn mcs_resource(reader: &KubeReader, kind: &str, plural: &str) -> Option<ApiResource> {
    for version in ["v1beta1", "v1alpha1"] {
        let resource = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk("multicluster.x-k8s.io", version, kind),
            plural,
        );
        if served(reader, &resource).await {
            return Some(resource);
        }
    }
    None
}

/// What `status` read in `fetched` comes from: the types to watch for it, in its scope and
/// its CephClusters' namespaces. Types the server does not serve are left out (when their CRD
/// is installed later, the report does not change until something else does).
pub async fn watched(reader: &KubeReader, fetched: &Fetched) -> Vec<Watched> {
    let scope = &fetched.scope;
    let mut all = Vec::new();
    if fetched.ceph_clusters.is_some() {
        all.push(Watched::of(ceph_cluster_resource(), scope));
    }
    if fetched.addressings.is_some() {
        all.push(Watched::of(addressing_resource(), scope));
    }
    for (kind, plural, read) in [
        ("ServiceExport", "serviceexports", fetched.exports.is_some()),
        ("ServiceImport", "serviceimports", fetched.imports.is_some()),
    ] {
        if read && let Some(resource) = mcs_resource(reader, kind, plural).await {
            all.push(Watched::of(resource, scope));
        }
    }
    all.push(Watched {
        labels: Some(SERVICE_NAME_LABEL.to_owned()),
        ..Watched::of(ApiResource::erase::<EndpointSlice>(&()), scope)
    });
    for namespace in fetched.ceph_namespaces.keys() {
        let here = Scope::Namespace(namespace.clone());
        all.push(Watched {
            labels: Some(DAEMON_SERVICES.to_owned()),
            ..Watched::of(ApiResource::erase::<Service>(&()), &here)
        });
        all.push(Watched {
            fields: Some(format!("metadata.name={}", rook::MON_ENDPOINTS_CONFIG_MAP)),
            ..Watched::of(ApiResource::erase::<ConfigMap>(&()), &here)
        });
        all.push(Watched {
            labels: Some(OSD_DEPLOYMENTS.to_owned()),
            ..Watched::of(ApiResource::erase::<Deployment>(&()), &here)
        });
    }
    all
}

/// A stream of changes: one item per change.
pub type Changes = Pin<Box<dyn Stream<Item = Result<(), WatchError>> + Send>>;

/// Watches `watched` on `reader`'s client: an item for every object added, changed or removed
/// (and for every new listing after the first, which a watch does after it lost its place),
/// nothing for the first listing; a failed watch yields its error and is retried with kube's
/// default backoff.
pub fn changes(reader: &KubeReader, watched: &[Watched]) -> Changes {
    let streams = watched.iter().map(|w| {
        let api: Api<DynamicObject> = match &w.scope {
            Scope::Namespace(ns) => Api::namespaced_with(reader.client().clone(), ns, &w.resource),
            Scope::All => Api::all_with(reader.client().clone(), &w.resource),
        };
        let mut config = watcher::Config::default();
        if let Some(labels) = &w.labels {
            config = config.labels(labels);
        }
        if let Some(fields) = &w.fields {
            config = config.fields(fields);
        }
        let what = w.describe();
        watcher(api, config)
            .default_backoff()
            .scan(false, move |listed, event| {
                let item = match event {
                    Ok(watcher::Event::Apply(_) | watcher::Event::Delete(_)) => Some(Ok(())),
                    Ok(watcher::Event::InitDone) => {
                        let again = *listed;
                        *listed = true;
                        again.then_some(Ok(()))
                    }
                    Ok(watcher::Event::Init | watcher::Event::InitApply(_)) => None,
                    Err(source) => Some(Err(WatchError {
                        what: what.clone(),
                        source,
                    })),
                };
                std::future::ready(Some(item))
            })
            .filter_map(std::future::ready)
            .boxed()
    });
    futures::stream::select_all(streams).boxed()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use kube_fake::FakeApi;
    use kube_fake::fixture::cluster_east as fixture;
    use kube_fake::mock::client as mock_client;

    #[tokio::test]
    async fn status_watches_what_it_reads_in_the_versions_served() {
        let (client, _) = mock_client(FakeApi::with_crds(
            mcs_ceph_api::member_crds().unwrap(),
            fixture(),
        ));
        let reader = KubeReader::new(client, "test");
        let scope = Scope::Namespace("rook-ceph".to_owned());
        let fetched = crate::status::fetch(&reader, &scope).await.unwrap();
        let watched: Vec<String> = watched(&reader, &fetched)
            .await
            .iter()
            .map(|w| {
                format!(
                    "{}/{} {} {:?} {:?}",
                    w.resource.api_version, w.resource.plural, w.scope, w.labels, w.fields
                )
            })
            .collect();
        assert_eq!(
            watched,
            [
                "ceph.rook.io/v1/cephclusters namespace rook-ceph None None",
                "clusterset.io/v1alpha1/cephclusteraddressings namespace rook-ceph None None",
                "multicluster.x-k8s.io/v1beta1/serviceexports namespace rook-ceph None None",
                "multicluster.x-k8s.io/v1beta1/serviceimports namespace rook-ceph None None",
                "discovery.k8s.io/v1/endpointslices namespace rook-ceph Some(\"multicluster.kubernetes.io/service-name\") None",
                "v1/services namespace rook-ceph Some(\"ceph_daemon_type in (mon,osd)\") None",
                "v1/configmaps namespace rook-ceph None Some(\"metadata.name=rook-ceph-mon-endpoints\")",
                "apps/v1/deployments namespace rook-ceph Some(\"app=rook-ceph-osd\") None",
            ]
        );
    }
}

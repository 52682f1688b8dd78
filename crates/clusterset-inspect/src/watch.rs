//! What `mcsctl status --watch` watches: every object type `status` reads ([`crate::status::fetch`]),
//! with kube's watcher (a list, then a watch from its resource version, again after the
//! watch ends), in the same namespaces with the same selectors. [`changes`] yields one item per
//! change of any of them; [`StatusWatch`] waits for a change, lets a burst of them settle and
//! reads again, and follows what each reading brings to watch; the command reprints the report.

use std::pin::Pin;
use std::time::Duration;

use ceph_address_plan::rook;
use clusterset_report::Scope;
use clusterset_report::status::{DAEMON_SERVICES, Fetched, OSD_DEPLOYMENTS};
use futures::{FutureExt, Stream, StreamExt};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::runtime::{WatchStreamExt, watcher};
use mcs_types::labels::SERVICE_NAME_LABEL;

use crate::reader::{KubeReader, ReadError, addressing_resource, ceph_cluster_resource};
use crate::status::fetch;

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
        Err(error) if clusterset_daemon::apply::is_not_found(&error)
    )
}

/// The MCS type `kind` in the version the server serves (`v1beta1`, else `v1alpha1`, as the
/// reader falls back), if any.
async fn mcs_resource(reader: &KubeReader, kind: &str, plural: &str) -> Option<ApiResource> {
    for version in ["v1beta1", "v1alpha1"] {
        let resource = ApiResource::from_gvk_with_plural(
            &kube::api::GroupVersionKind::gvk(mcs_types::labels::GROUP, version, kind),
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

/// How long a burst of changes (a controller writing several objects) may take before the
/// objects are read again.
pub const SETTLE: Duration = Duration::from_millis(200);

/// `status --watch`'s watch: the changes of what a reading came from ([`watched`], [`changes`]),
/// each followed by a new reading once the burst it belongs to settled.
///
/// The command waits for [`StatusWatch::changed`] (a watch's failure is retried and reported
/// there), reads again with [`StatusWatch::reread`], shows the report, then
/// [`StatusWatch::follow`]s the new reading (a CephCluster in another namespace brings that
/// namespace's objects to watch).
pub struct StatusWatch<'a> {
    reader: &'a KubeReader,
    scope: Scope,
    watching: Vec<Watched>,
    changes: Changes,
}

impl<'a> StatusWatch<'a> {
    /// Starts watching what `fetched` (read by [`fetch`] on `reader`) came from.
    pub async fn start(reader: &'a KubeReader, fetched: &Fetched) -> Self {
        let watching = watched(reader, fetched).await;
        let changes = changes(reader, &watching);
        Self {
            reader,
            scope: fetched.scope.clone(),
            watching,
            changes,
        }
    }

    /// The next change (`Ok`), or a watch that failed and is retried (`Err`); `None` when
    /// nothing is watched any more. Cancel-safe: a change waited for and dropped is not lost.
    pub async fn changed(&mut self) -> Option<Result<(), WatchError>> {
        self.changes.next().await
    }

    /// After a change: waits [`SETTLE`], takes the changes that came meanwhile as the same one,
    /// and reads again.
    pub async fn reread(&mut self) -> Result<Fetched, ReadError> {
        tokio::time::sleep(SETTLE).await;
        while let Some(Some(_)) = self.changes.next().now_or_never() {}
        fetch(self.reader, &self.scope).await
    }

    /// Watches what `fetched` came from, when that is not what is watched already.
    pub async fn follow(&mut self, fetched: &Fetched) {
        let now = watched(self.reader, fetched).await;
        if now != self.watching {
            self.changes = changes(self.reader, &now);
            self.watching = now;
        }
    }
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

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_change_is_followed_by_a_new_reading_of_the_same_scope() {
        let server = kube_fake::http::ApiServer::start(FakeApi::with_crds(
            mcs_ceph_api::member_crds().unwrap(),
            fixture(),
        ));
        let config = kube::Config::new(server.url.parse().unwrap());
        let reader = KubeReader::new(kube::Client::try_from(config).unwrap(), "test");
        let scope = Scope::Namespace("shop".to_owned());
        let first = crate::status::fetch(&reader, &scope).await.unwrap();
        let mut watch = StatusWatch::start(&reader, &first).await;
        let ready = |fetched: &Fetched| {
            let exports = fetched.exports.clone().unwrap_or_default();
            let web = exports
                .iter()
                .find(|e| e.metadata.name.as_deref() == Some("web"))
                .and_then(|e| e.status.as_ref())
                .map(|s| s.conditions.clone())
                .unwrap_or_default();
            web.iter()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.status.clone())
        };
        assert_eq!(ready(&first).as_deref(), Some("True"));
        // The watches list, then watch from where their list ended: a change made before that
        // is part of the listing. Poll until the exports are watched (a change waited for and
        // dropped is not lost).
        let exports_watched = || {
            server
                .lines()
                .iter()
                .any(|l| l.contains("/serviceexports?") && l.contains("watch=true"))
        };
        for _ in 0..300 {
            if exports_watched() {
                break;
            }
            let _ = tokio::time::timeout(Duration::from_millis(100), watch.changed()).await;
        }
        assert!(exports_watched(), "{:#?}", server.lines());
        // The export of web stops being Ready.
        server.put(serde_json::json!({"apiVersion": "multicluster.x-k8s.io/v1beta1", "kind": "ServiceExport",
            "metadata": {"name": "web", "namespace": "shop"},
            "status": {"conditions": [
                {"type": "Valid", "status": "True", "reason": "Valid", "message": "Service is valid for export", "lastTransitionTime": "2025-01-01T00:00:00Z"},
                {"type": "Ready", "status": "False", "reason": "Pending", "message": "not at the broker yet", "lastTransitionTime": "2025-01-02T00:00:00Z"}]}}));
        let change = tokio::time::timeout(Duration::from_secs(30), watch.changed())
            .await
            .unwrap();
        assert!(matches!(change, Some(Ok(()))), "{change:?}");
        let second = watch.reread().await.unwrap();
        assert_eq!(second.scope, scope);
        assert_eq!(ready(&second).as_deref(), Some("False"));
        watch.follow(&second).await;
        assert_eq!(watch.watching, watched(&reader, &second).await);
    }
}

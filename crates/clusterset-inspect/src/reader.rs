//! The thin IO layer of the commands that read a cluster: [`ClusterReader`] fetches exactly the
//! objects `status` and `diagnose` look at; [`KubeReader`] implements it with kube. Everything
//! the commands conclude is computed from what it returns, by clusterset-report's pure
//! functions.

use async_trait::async_trait;
use clusterset_report::{MaybeServed, Scope};
use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::{ConfigMap, Service};
use k8s_openapi::api::discovery::v1::EndpointSlice;
use kube::api::{Api, ApiResource, DynamicObject, ListParams};
use kube::{Client, Resource};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use serde::de::DeserializeOwned;

/// A read that failed: what was read, where, and what to do, in one message.
#[derive(Debug, thiserror::Error)]
pub enum ReadError {
    /// The API server refused the request or could not be reached.
    #[error("{message}")]
    Api {
        /// What was read, where, why it failed and the likely fix (it names the API error).
        message: String,
        /// The client's error. Not the error's source: the message already says it (in words,
        /// or with its text), and a chain would print it twice.
        error: Box<kube::Error>,
    },
    /// An object read could not be turned into a JSON document.
    #[error(transparent)]
    Document(#[from] serde_json::Error),
}

/// The result of a read.
pub type Result<T> = std::result::Result<T, ReadError>;

/// Reads what `status` and `diagnose` need. Lists of custom resources are `None` when the API
/// server does not serve the type; `name` narrows a list to one object (a field selector).
#[async_trait]
pub trait ClusterReader: Send + Sync {
    /// Rook CephClusters (`ceph.rook.io/v1`), as JSON documents.
    async fn ceph_clusters(&self, scope: &Scope) -> Result<MaybeServed<serde_json::Value>>;
    /// mcs-ceph-operator's status objects (`clusterset.io/v1alpha1` CephClusterAddressing, one
    /// per CephCluster, same name), as JSON documents.
    async fn addressings(&self, scope: &Scope) -> Result<MaybeServed<serde_json::Value>>;
    /// ServiceExports (`v1beta1`, else `v1alpha1` converted).
    async fn service_exports(
        &self,
        scope: &Scope,
        name: Option<&str>,
    ) -> Result<MaybeServed<ServiceExport>>;
    /// ServiceImports (`v1beta1`, else `v1alpha1` converted).
    async fn service_imports(
        &self,
        scope: &Scope,
        name: Option<&str>,
    ) -> Result<MaybeServed<ServiceImport>>;
    /// Services matching a label selector.
    async fn services(&self, namespace: &str, selector: &str) -> Result<Vec<Service>>;
    /// One Service.
    async fn service(&self, namespace: &str, name: &str) -> Result<Option<Service>>;
    /// EndpointSlices matching a label selector.
    async fn endpoint_slices(&self, scope: &Scope, selector: &str) -> Result<Vec<EndpointSlice>>;
    /// One ConfigMap.
    async fn config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>>;
    /// Deployments matching a label selector.
    async fn deployments(&self, namespace: &str, selector: &str) -> Result<Vec<Deployment>>;
}

/// [`ClusterReader`] on a kube client; also what `mcsctl version` reads
/// ([`KubeReader::server_version`], [`KubeReader::pods`]), the names shell completion offers
/// ([`KubeReader::namespace_names`], [`KubeReader::service_names`]) and what `status --watch`
/// watches (`crate::watch`).
pub struct KubeReader {
    client: Client,
    origin: String,
}

impl KubeReader {
    /// A reader on `client`; `origin` says where it points, for error messages.
    pub fn new(client: Client, origin: impl Into<String>) -> Self {
        Self {
            client,
            origin: origin.into(),
        }
    }

    fn api<K>(&self, scope: &Scope) -> Api<K>
    where
        K: Resource<Scope = kube::core::NamespaceResourceScope>,
        <K as Resource>::DynamicType: Default,
    {
        match scope {
            Scope::Namespace(ns) => Api::namespaced(self.client.clone(), ns),
            Scope::All => Api::all(self.client.clone()),
        }
    }

    /// The client.
    pub fn client(&self) -> &Client {
        &self.client
    }

    /// The API server's `/version`.
    pub async fn server_version(&self) -> Result<k8s_openapi::apimachinery::pkg::version::Info> {
        self.client
            .apiserver_version()
            .await
            .map_err(|e| self.explain(e, "reading the server version (/version)"))
    }

    /// The Pods matching a label selector in `scope`.
    pub async fn pods(
        &self,
        scope: &Scope,
        selector: &str,
    ) -> Result<Vec<k8s_openapi::api::core::v1::Pod>> {
        self.api::<k8s_openapi::api::core::v1::Pod>(scope)
            .list(&ListParams::default().labels(selector))
            .await
            .map(|l| l.items)
            .map_err(|e| self.explain(e, &format!("listing pods in {scope}")))
    }

    /// The names of the namespaces.
    pub async fn namespace_names(&self) -> Result<Vec<String>> {
        let api: Api<k8s_openapi::api::core::v1::Namespace> = Api::all(self.client.clone());
        api.list(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .into_iter()
                    .filter_map(|n| n.metadata.name)
                    .collect()
            })
            .map_err(|e| self.explain(e, "listing namespaces"))
    }

    /// The names of the Services in `namespace`.
    pub async fn service_names(&self, namespace: &str) -> Result<Vec<String>> {
        let api: Api<Service> = Api::namespaced(self.client.clone(), namespace);
        api.list(&ListParams::default())
            .await
            .map(|l| {
                l.items
                    .into_iter()
                    .filter_map(|s| s.metadata.name)
                    .collect()
            })
            .map_err(|e| self.explain(e, &format!("listing services in namespace {namespace}")))
    }

    /// What went wrong, with the likely fix.
    fn explain(&self, error: kube::Error, what: &str) -> ReadError {
        let origin = &self.origin;
        let text = match &error {
            kube::Error::Api(status) if status.code == 401 => format!(
                "{what}: the API server at {origin} refused the credentials (401 Unauthorized): log in again or refresh the kubeconfig's token"
            ),
            kube::Error::Api(status) if status.code == 403 => format!(
                "{what}: forbidden (403) at {origin}: {}: your user needs get and list on it (kubectl auth can-i list ... shows what is allowed)",
                status.message
            ),
            kube::Error::Api(status) => format!(
                "{what}: the API server at {origin} answered {} {}: {}",
                status.code, status.reason, status.message
            ),
            kube::Error::HyperError(_) | kube::Error::Service(_) => format!(
                "{what}: cannot reach the API server at {origin}: {error}: check that the cluster is up and the kubeconfig's server address is right"
            ),
            _ => format!("{what} at {origin}: {error}"),
        };
        ReadError::Api {
            message: text,
            error: Box::new(error),
        }
    }

    /// A list that is `None` when the type is not served (404 on the list path).
    async fn list_served<K>(
        &self,
        api: Api<K>,
        params: &ListParams,
        what: &str,
    ) -> Result<MaybeServed<K>>
    where
        K: Clone + DeserializeOwned + std::fmt::Debug,
    {
        match api.list(params).await {
            Ok(list) => Ok(Some(list.items)),
            Err(error) if clusterset_daemon::apply::is_not_found(&error) => Ok(None),
            Err(error) => Err(self.explain(error, what)),
        }
    }

    async fn mcs_list<New, Old>(
        &self,
        scope: &Scope,
        name: Option<&str>,
        plural: &str,
    ) -> Result<MaybeServed<New>>
    where
        New: Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug,
        Old: Resource<Scope = kube::core::NamespaceResourceScope>
            + Clone
            + DeserializeOwned
            + std::fmt::Debug
            + Into<New>,
        <New as Resource>::DynamicType: Default,
        <Old as Resource>::DynamicType: Default,
    {
        let params = by_name(name);
        let what = format!("listing {plural}.multicluster.x-k8s.io in {scope}");
        if let Some(items) = self
            .list_served(self.api::<New>(scope), &params, &what)
            .await?
        {
            return Ok(Some(items));
        }
        Ok(self
            .list_served(self.api::<Old>(scope), &params, &what)
            .await?
            .map(|items| items.into_iter().map(Into::into).collect()))
    }
}

fn by_name(name: Option<&str>) -> ListParams {
    match name {
        Some(name) => ListParams::default().fields(&format!("metadata.name={name}")),
        None => ListParams::default(),
    }
}

/// The API resource of Rook's CephCluster (mcs-ceph-api's type names it).
pub fn ceph_cluster_resource() -> ApiResource {
    ApiResource::erase::<mcs_ceph_api::CephCluster>(&())
}

/// The API resource of mcs-ceph-operator's status object (mcs-ceph-api's type names it).
pub fn addressing_resource() -> ApiResource {
    ApiResource::erase::<mcs_ceph_api::CephClusterAddressing>(&())
}

impl KubeReader {
    /// Every object of a custom resource type in `scope` as JSON documents (with their
    /// `apiVersion` and `kind`); `None` when the type is not served.
    async fn dynamic_list(
        &self,
        resource: &ApiResource,
        scope: &Scope,
    ) -> Result<MaybeServed<serde_json::Value>> {
        let api: Api<DynamicObject> = match scope {
            Scope::Namespace(ns) => Api::namespaced_with(self.client.clone(), ns, resource),
            Scope::All => Api::all_with(self.client.clone(), resource),
        };
        let what = format!("listing {}.{} in {scope}", resource.plural, resource.group);
        let Some(items) = self.list_served(api, &ListParams::default(), &what).await? else {
            return Ok(None);
        };
        let mut documents = Vec::with_capacity(items.len());
        for item in items {
            let mut document = serde_json::to_value(item)?;
            // Items of a list may come without their type; the typed views need it.
            if let Some(object) = document.as_object_mut() {
                object
                    .entry("apiVersion")
                    .or_insert_with(|| resource.api_version.clone().into());
                object
                    .entry("kind")
                    .or_insert_with(|| resource.kind.clone().into());
            }
            documents.push(document);
        }
        Ok(Some(documents))
    }
}

#[async_trait]
impl ClusterReader for KubeReader {
    async fn ceph_clusters(&self, scope: &Scope) -> Result<MaybeServed<serde_json::Value>> {
        self.dynamic_list(&ceph_cluster_resource(), scope).await
    }

    async fn addressings(&self, scope: &Scope) -> Result<MaybeServed<serde_json::Value>> {
        self.dynamic_list(&addressing_resource(), scope).await
    }

    async fn service_exports(
        &self,
        scope: &Scope,
        name: Option<&str>,
    ) -> Result<MaybeServed<ServiceExport>> {
        self.mcs_list::<ServiceExport, mcs_types::v1alpha1::ServiceExport>(
            scope,
            name,
            "serviceexports",
        )
        .await
    }

    async fn service_imports(
        &self,
        scope: &Scope,
        name: Option<&str>,
    ) -> Result<MaybeServed<ServiceImport>> {
        self.mcs_list::<ServiceImport, mcs_types::v1alpha1::ServiceImport>(
            scope,
            name,
            "serviceimports",
        )
        .await
    }

    async fn services(&self, namespace: &str, selector: &str) -> Result<Vec<Service>> {
        let api: Api<Service> = Api::namespaced(self.client.clone(), namespace);
        api.list(&ListParams::default().labels(selector))
            .await
            .map(|l| l.items)
            .map_err(|e| self.explain(e, &format!("listing services in namespace {namespace}")))
    }

    async fn service(&self, namespace: &str, name: &str) -> Result<Option<Service>> {
        let api: Api<Service> = Api::namespaced(self.client.clone(), namespace);
        api.get_opt(name)
            .await
            .map_err(|e| self.explain(e, &format!("reading service {namespace}/{name}")))
    }

    async fn endpoint_slices(&self, scope: &Scope, selector: &str) -> Result<Vec<EndpointSlice>> {
        self.api::<EndpointSlice>(scope)
            .list(&ListParams::default().labels(selector))
            .await
            .map(|l| l.items)
            .map_err(|e| self.explain(e, &format!("listing endpointslices in {scope}")))
    }

    async fn config_map(&self, namespace: &str, name: &str) -> Result<Option<ConfigMap>> {
        let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), namespace);
        api.get_opt(name)
            .await
            .map_err(|e| self.explain(e, &format!("reading configmap {namespace}/{name}")))
    }

    async fn deployments(&self, namespace: &str, selector: &str) -> Result<Vec<Deployment>> {
        let api: Api<Deployment> = Api::namespaced(self.client.clone(), namespace);
        api.list(&ListParams::default().labels(selector))
            .await
            .map(|l| l.items)
            .map_err(|e| {
                self.explain(
                    e,
                    &format!("listing deployments.apps in namespace {namespace}"),
                )
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kube_fake::FakeApi;
    use kube_fake::fixture::cluster_east as fixture;
    use kube_fake::mock::{Requests, client as mock_client, lines};

    fn reader(api: FakeApi) -> (KubeReader, Requests) {
        let (client, requests) = mock_client(api);
        (
            KubeReader::new(client, "https://api.east:6443 (context east)"),
            requests,
        )
    }

    #[tokio::test]
    async fn status_reads_these_paths_in_one_namespace() {
        let (reader, requests) = reader(FakeApi::with_crds(
            mcs_ceph_api::member_crds().unwrap(),
            fixture(),
        ));
        let scope = Scope::Namespace("rook-ceph".to_owned());
        let fetched = crate::status::fetch(&reader, &scope).await.unwrap();
        assert_eq!(
            lines(&requests),
            [
                "GET /api/v1/namespaces/rook-ceph/configmaps/rook-ceph-mon-endpoints",
                "GET /api/v1/namespaces/rook-ceph/services?labelSelector=ceph_daemon_type in (mon,osd)",
                "GET /apis/apps/v1/namespaces/rook-ceph/deployments?labelSelector=app=rook-ceph-osd",
                "GET /apis/ceph.rook.io/v1/namespaces/rook-ceph/cephclusters",
                "GET /apis/clusterset.io/v1alpha1/namespaces/rook-ceph/cephclusteraddressings",
                "GET /apis/discovery.k8s.io/v1/namespaces/rook-ceph/endpointslices?labelSelector=multicluster.kubernetes.io/service-name",
                "GET /apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceexports",
                "GET /apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceimports",
            ]
        );
        let clusters = fetched.ceph_clusters.unwrap();
        assert_eq!(clusters.len(), 1);
        // The typed view needs apiVersion and kind, which list items may lack.
        assert_eq!(clusters[0]["kind"], "CephCluster");
        let names = |items: Vec<ServiceExport>| -> Vec<String> {
            items
                .into_iter()
                .map(|e| e.metadata.name.unwrap())
                .collect()
        };
        assert_eq!(
            names(fetched.exports.unwrap()),
            ["rook-ceph-mon-a", "rook-ceph-mon-b", "rook-ceph-osd-0"]
        );
        assert_eq!(fetched.slices.len(), 2);
        let ns = &fetched.ceph_namespaces["rook-ceph"];
        // Rook's mgr Service is not a mon or OSD.
        assert_eq!(ns.services.len(), 3);
        assert!(ns.mon_endpoints.is_some());
        assert_eq!(ns.osd_deployments.len(), 1);
    }

    #[tokio::test]
    async fn all_namespaces_lists_across_namespaces_then_reads_each_ceph_namespace() {
        let (reader, requests) = reader(FakeApi::with_crds(
            mcs_ceph_api::member_crds().unwrap(),
            fixture(),
        ));
        let fetched = crate::status::fetch(&reader, &Scope::All).await.unwrap();
        let seen = lines(&requests);
        for expected in [
            "GET /apis/ceph.rook.io/v1/cephclusters",
            "GET /apis/clusterset.io/v1alpha1/cephclusteraddressings",
            "GET /apis/multicluster.x-k8s.io/v1beta1/serviceexports",
            "GET /apis/multicluster.x-k8s.io/v1beta1/serviceimports",
            "GET /apis/discovery.k8s.io/v1/endpointslices?labelSelector=multicluster.kubernetes.io/service-name",
            "GET /api/v1/namespaces/rook-ceph/configmaps/rook-ceph-mon-endpoints",
        ] {
            assert!(
                seen.contains(&expected.to_owned()),
                "{expected} not in {seen:#?}"
            );
        }
        // Only the namespace with a CephCluster is read for daemons.
        assert!(
            !seen.iter().any(|l| l.contains("namespaces/shop")),
            "{seen:#?}"
        );
        assert_eq!(fetched.exports.unwrap().len(), 5);
        assert_eq!(fetched.imports.unwrap().len(), 5);
    }

    #[tokio::test]
    async fn a_type_that_is_not_served_reads_as_none_and_v1alpha1_is_the_fallback() {
        // No Rook, no operator; the MCS CRDs serve only v1alpha1.
        let objects: Vec<serde_json::Value> = fixture()
            .into_iter()
            .filter(|o| o["kind"] != "CephCluster" && o["kind"] != "CephClusterAddressing")
            .map(|mut o| {
                if o["apiVersion"] == "multicluster.x-k8s.io/v1beta1" {
                    o["apiVersion"] = "multicluster.x-k8s.io/v1alpha1".into();
                }
                o
            })
            .collect();
        let (reader, requests) = reader(FakeApi::with_crds(
            mcs_ceph_api::member_crds().unwrap(),
            objects,
        ));
        let scope = Scope::Namespace("shop".to_owned());
        assert_eq!(reader.ceph_clusters(&scope).await.unwrap(), None);
        assert_eq!(reader.addressings(&scope).await.unwrap(), None);
        let exports = reader
            .service_exports(&scope, Some("web"))
            .await
            .unwrap()
            .unwrap();
        assert_eq!(exports.len(), 1);
        assert!(exports[0].status.as_ref().unwrap().is_ready());
        assert_eq!(
            lines(&requests),
            [
                "GET /apis/ceph.rook.io/v1/namespaces/shop/cephclusters",
                "GET /apis/clusterset.io/v1alpha1/namespaces/shop/cephclusteraddressings",
                "GET /apis/multicluster.x-k8s.io/v1alpha1/namespaces/shop/serviceexports?fieldSelector=metadata.name=web",
                "GET /apis/multicluster.x-k8s.io/v1beta1/namespaces/shop/serviceexports?fieldSelector=metadata.name=web",
            ]
        );
        // Neither version served: None.
        let (reader, _) = reader_without_mcs();
        assert_eq!(reader.service_imports(&scope, None).await.unwrap(), None);
    }

    fn reader_without_mcs() -> (KubeReader, Requests) {
        reader(FakeApi::with_crds(
            mcs_ceph_api::member_crds().unwrap(),
            Vec::new(),
        ))
    }

    #[tokio::test]
    async fn refusals_say_what_was_read_where_and_what_to_do() {
        let (reader, _) = reader(
            FakeApi::with_crds(mcs_ceph_api::member_crds().unwrap(), fixture())
                .forbid("/apis/discovery.k8s.io/v1/endpointslices"),
        );
        let scope = Scope::Namespace("shop".to_owned());
        let error = reader
            .endpoint_slices(&scope, "multicluster.kubernetes.io/service-name=web")
            .await
            .unwrap_err();
        assert_eq!(
            error.to_string(),
            "listing endpointslices in namespace shop: forbidden (403) at https://api.east:6443 (context east): endpointslices is forbidden: User \"me\" cannot list resource \"endpointslices\" in the namespace \"shop\": your user needs get and list on it (kubectl auth can-i list ... shows what is allowed)"
        );
        // A missing object of a served type is None, not an error.
        assert!(reader.service("shop", "nope").await.unwrap().is_none());
        assert!(reader.config_map("shop", "nope").await.unwrap().is_none());
    }
}

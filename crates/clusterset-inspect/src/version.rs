//! What `mcsctl version` reads of a cluster: [`read`].

use clusterset_report::Scope;
use clusterset_report::version::part_of_selector;
use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::version::Info;

use crate::reader::{KubeReader, Result};

/// What the cluster says of itself and of the clusterset components it runs.
#[derive(Debug, Clone)]
pub struct ServerSide {
    /// The API server's `/version`.
    pub version: Info,
    /// The Pods of the clusterset components (clusterset-report's [`part_of_selector`]).
    pub pods: Vec<Pod>,
}

/// Reads the API server's `/version` and the clusterset components' Pods in `scope`, both at
/// once; the first failure is the error.
pub async fn read(reader: &KubeReader, scope: &Scope) -> Result<ServerSide> {
    let selector = part_of_selector();
    let (version, pods) = tokio::try_join!(reader.server_version(), reader.pods(scope, &selector))?;
    Ok(ServerSide { version, pods })
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use kube_fake::FakeApi;
    use kube_fake::fixture::cluster_east as fixture;
    use kube_fake::mock::{client as mock_client, lines};

    #[tokio::test]
    async fn the_server_version_and_the_components_pods_are_read_in_the_scope() {
        let mut objects = fixture();
        objects.push(serde_json::json!({"apiVersion": "v1", "kind": "Pod", "metadata": {
            "name": "clusterset-agent-7d9f-a", "namespace": "clusterset-system", "labels": {
                "app.kubernetes.io/part-of": "clusterset",
                "app.kubernetes.io/name": "clusterset-agent"}},
            "spec": {"containers": [{"name": "agent", "image": "registry.example/clusterset-agent:0.1.0"}]}}));
        let (client, requests) = mock_client(FakeApi::with_crds(
            mcs_ceph_api::member_crds().unwrap(),
            objects,
        ));
        let reader = KubeReader::new(client, "test");
        let scope = Scope::Namespace("clusterset-system".to_owned());
        let server = read(&reader, &scope).await.unwrap();
        assert!(!server.version.git_version.is_empty());
        let pods: Vec<Option<&str>> = server
            .pods
            .iter()
            .map(|p| p.metadata.name.as_deref())
            .collect();
        assert_eq!(pods, [Some("clusterset-agent-7d9f-a")]);
        assert_eq!(
            lines(&requests),
            [
                "GET /api/v1/namespaces/clusterset-system/pods?labelSelector=app.kubernetes.io/part-of=clusterset",
                "GET /version",
            ]
        );
    }
}

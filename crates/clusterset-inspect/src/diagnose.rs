//! What `mcsctl diagnose` reads and asks: the objects of one service ([`gather`]), the DNS
//! answers to clusterset-report's questions ([`ask`]), a monmap given as Ceph's JSON
//! ([`read_monmap`], from a file or standard input: [`load_monmap`]).

use std::path::{Path, PathBuf};

use ceph_address_plan::{Daemon, rook};
use clusterset_dns::{ClustersetResolver, ResolveError, resolve_all};
use clusterset_report::Scope;
use clusterset_report::diagnose::{
    CephFacts, DnsAnswer, DnsFailure, DnsFailureKind, Facts, daemon_of,
};
use mcs_types::labels::SERVICE_NAME_LABEL;
use mcs_types::names::ClustersetName;
use mon_failover::{MonMap, QuorumStatus};

use crate::reader::{ClusterReader, Result};

/// Reads what `diagnose` needs about `name` in `namespace`.
pub async fn gather(reader: &dyn ClusterReader, namespace: &str, name: &str) -> Result<Facts> {
    let scope = Scope::Namespace(namespace.to_owned());
    let selector = format!("{SERVICE_NAME_LABEL}={name}");
    let (service, exports, imports, slices) = tokio::try_join!(
        reader.service(namespace, name),
        reader.service_exports(&scope, Some(name)),
        reader.service_imports(&scope, Some(name)),
        reader.endpoint_slices(&scope, &selector),
    )?;
    let ceph = match service.as_ref().and_then(daemon_of) {
        None => None,
        Some((daemon, rook_service)) => {
            let clusters = reader.ceph_clusters(&scope).await?.unwrap_or_default();
            let (mon_endpoints, osd_deployment) = match &daemon {
                Daemon::Mon(_) => (
                    reader
                        .config_map(namespace, rook::MON_ENDPOINTS_CONFIG_MAP)
                        .await?,
                    None,
                ),
                Daemon::Osd(id) => {
                    let selector = format!(
                        "{}={},{}={id}",
                        rook::label::APP,
                        rook::OSD_APP,
                        rook::label::OSD_ID
                    );
                    (
                        None,
                        reader
                            .deployments(namespace, &selector)
                            .await?
                            .into_iter()
                            .next(),
                    )
                }
            };
            Some(CephFacts {
                daemon,
                rook_service,
                clusters,
                mon_endpoints,
                osd_deployment,
                monmap: None,
            })
        }
    };
    Ok(Facts {
        namespace: namespace.to_owned(),
        name: name.to_owned(),
        service,
        exports,
        imports,
        slices,
        ceph,
    })
}

/// Asks DNS the `names` with `resolver`.
pub async fn ask(resolver: &dyn ClustersetResolver, names: &[ClustersetName]) -> Vec<DnsAnswer> {
    resolve_all(resolver, names, 4)
        .await
        .into_iter()
        .zip(names)
        .map(|(result, name)| DnsAnswer {
            name: name.clone(),
            answer: result
                .map(|r| r.addresses)
                .map_err(|error| dns_failure(&error)),
        })
        .collect()
}

/// A resolver's error as the checks tell them apart.
pub fn dns_failure(error: &ResolveError) -> DnsFailure {
    let kind = match error {
        ResolveError::NxDomain { .. } => DnsFailureKind::NxDomain,
        ResolveError::NoData { .. } => DnsFailureKind::NoData,
        ResolveError::ServerError { code, .. } if code == "REFUSED" => DnsFailureKind::Refused,
        _ => DnsFailureKind::NoAnswer,
    };
    DnsFailure {
        kind,
        message: error.to_string(),
    }
}

/// Reads a monmap from `ceph mon dump -f json` or `ceph quorum_status -f json` output.
/// When it is neither, the error is the one of reading it as a monmap.
pub fn read_monmap(text: &str) -> std::result::Result<MonMap, serde_json::Error> {
    match serde_json::from_str::<QuorumStatus>(text) {
        Ok(status) => Ok(status.monmap),
        Err(_) => serde_json::from_str::<MonMap>(text),
    }
}

/// A monmap file (`mcsctl diagnose --monmap`) that cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum MonmapError {
    /// Standard input (`-`) cannot be read.
    #[error("reading the monmap from stdin")]
    Stdin(#[source] std::io::Error),
    /// The file cannot be read.
    #[error("reading the monmap {}", .path.display())]
    File {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// What it holds is no monmap.
    #[error(
        "{} is not the JSON of `ceph mon dump -f json` or `ceph quorum_status -f json`",
        .path.display()
    )]
    NotAMonmap {
        /// The file.
        path: PathBuf,
        /// Why, as reading it as a monmap says.
        #[source]
        source: serde_json::Error,
    },
}

/// The monmap in the file `path` (`-` reads standard input): [`read_monmap`] of its text.
pub fn load_monmap(path: &Path) -> std::result::Result<MonMap, MonmapError> {
    let text = if path == Path::new("-") {
        std::io::read_to_string(std::io::stdin()).map_err(MonmapError::Stdin)?
    } else {
        std::fs::read_to_string(path).map_err(|source| MonmapError::File {
            path: path.to_path_buf(),
            source,
        })?
    };
    read_monmap(&text).map_err(|source| MonmapError::NotAMonmap {
        path: path.to_path_buf(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    use crate::reader::KubeReader;
    use k8s_openapi::api::core::v1::Service;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    use kube_fake::FakeApi;
    use kube_fake::fixture::{cluster_east as fixture, objects};
    use kube_fake::mock::{client as mock_client, lines};
    use mcs_types::v1beta1::ServiceExport;

    #[tokio::test]
    async fn gather_reads_the_service_its_mcs_objects_and_its_daemon() {
        let (client, requests) = mock_client(FakeApi::with_crds(
            mcs_ceph_api::member_crds().unwrap(),
            fixture(),
        ));
        let reader = KubeReader::new(client, "test");
        let mon = gather(&reader, "rook-ceph", "rook-ceph-mon-a")
            .await
            .unwrap();
        assert_eq!(
            lines(&requests),
            [
                "GET /api/v1/namespaces/rook-ceph/configmaps/rook-ceph-mon-endpoints",
                "GET /api/v1/namespaces/rook-ceph/services/rook-ceph-mon-a",
                "GET /apis/ceph.rook.io/v1/namespaces/rook-ceph/cephclusters",
                "GET /apis/discovery.k8s.io/v1/namespaces/rook-ceph/endpointslices?labelSelector=multicluster.kubernetes.io/service-name=rook-ceph-mon-a",
                "GET /apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceexports?fieldSelector=metadata.name=rook-ceph-mon-a",
                "GET /apis/multicluster.x-k8s.io/v1beta1/namespaces/rook-ceph/serviceimports?fieldSelector=metadata.name=rook-ceph-mon-a",
            ]
        );
        // The same facts as the fixture holds.
        let named = |name: Option<&str>| name == Some("rook-ceph-mon-a");
        let expected_service = objects::<Service>("Service", Some("rook-ceph"))
            .into_iter()
            .find(|s| named(s.metadata.name.as_deref()));
        let expected_exports: Vec<ServiceExport> = objects("ServiceExport", Some("rook-ceph"))
            .into_iter()
            .filter(|e: &ServiceExport| named(e.metadata.name.as_deref()))
            .collect();
        let expected_slices: Vec<EndpointSlice> = objects("EndpointSlice", Some("rook-ceph"))
            .into_iter()
            .filter(|s: &EndpointSlice| {
                named(
                    s.metadata
                        .labels
                        .as_ref()
                        .and_then(|l| l.get(SERVICE_NAME_LABEL))
                        .map(String::as_str),
                )
            })
            .collect();
        assert!(expected_service.is_some() && !expected_slices.is_empty());
        assert_eq!(mon.service, expected_service);
        assert_eq!(mon.exports, Some(expected_exports));
        assert_eq!(mon.slices, expected_slices);
        assert_eq!(mon.cluster_id().as_deref(), Some("east"));
        requests.lock().unwrap().clear();
        let osd = gather(&reader, "rook-ceph", "rook-ceph-osd-0")
            .await
            .unwrap();
        assert!(
            lines(&requests).contains(&"GET /apis/apps/v1/namespaces/rook-ceph/deployments?labelSelector=app=rook-ceph-osd,ceph-osd-id=0".to_owned()),
            "{:#?}",
            lines(&requests)
        );
        assert!(osd.ceph.unwrap().osd_deployment.is_some());
        // A plain service reads no Ceph objects.
        requests.lock().unwrap().clear();
        gather(&reader, "shop", "web").await.unwrap();
        assert_eq!(lines(&requests).len(), 4);
    }

    fn mon_dump() -> MonMap {
        read_monmap(include_str!("../../../tests/fixtures/mon-dump.json")).unwrap()
    }

    #[test]
    fn a_monmap_is_read_from_ceph_mon_dump_or_quorum_status() {
        let monmap = mon_dump();
        assert_eq!(monmap.epoch, 4);
        // `ceph quorum_status -f json` carries the same monmap.
        let status = serde_json::json!({
            "election_epoch": 12, "quorum": [0, 1], "quorum_names": ["a", "b"],
            "quorum_leader_name": "a", "monmap": serde_json::to_value(&monmap).unwrap()
        });
        assert_eq!(read_monmap(&status.to_string()).unwrap(), monmap);
        assert!(read_monmap("{\"epoch\": 1}").is_err());
    }

    #[test]
    fn a_monmap_file_is_loaded_and_each_failure_names_the_file() {
        let fixture = Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/fixtures/mon-dump.json"
        ));
        assert_eq!(load_monmap(fixture).unwrap(), mon_dump());
        let missing = load_monmap(Path::new("/nonexistent/monmap.json")).unwrap_err();
        assert_eq!(
            missing.to_string(),
            "reading the monmap /nonexistent/monmap.json"
        );
        assert!(std::error::Error::source(&missing).is_some());
        let not_json = load_monmap(Path::new(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/Cargo.toml"
        )))
        .unwrap_err()
        .to_string();
        assert!(
            not_json.ends_with("Cargo.toml is not the JSON of `ceph mon dump -f json` or `ceph quorum_status -f json`"),
            "{not_json}"
        );
    }

    #[test]
    fn resolver_errors_keep_their_message_and_are_told_apart() {
        let name = "web.shop.svc.clusterset.local".to_owned();
        let cases = [
            (
                ResolveError::NxDomain { name: name.clone() },
                DnsFailureKind::NxDomain,
            ),
            (
                ResolveError::NoData { name: name.clone() },
                DnsFailureKind::NoData,
            ),
            (
                ResolveError::ServerError {
                    name: name.clone(),
                    code: "REFUSED".to_owned(),
                    attempts: 1,
                    hint: "",
                },
                DnsFailureKind::Refused,
            ),
            (
                ResolveError::ServerError {
                    name: name.clone(),
                    code: "SERVFAIL".to_owned(),
                    attempts: 2,
                    hint: "",
                },
                DnsFailureKind::NoAnswer,
            ),
            (
                ResolveError::Timeout {
                    name,
                    attempts: 2,
                    timeout: Duration::from_millis(300),
                },
                DnsFailureKind::NoAnswer,
            ),
        ];
        for (error, kind) in cases {
            let failure = dns_failure(&error);
            assert_eq!(failure.kind, kind, "{error}");
            assert_eq!(failure.message, error.to_string());
        }
    }
}

//! The objects the tests create in a member cluster: Namespaces, Services, ServiceExports and
//! EndpointSlices of the shape a real cluster stores.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Namespace, Service, ServicePort, ServiceSpec};
use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, Time};
use k8s_openapi::jiff::Timestamp;
use mcs_types::ServiceKey;
use mcs_types::labels::KUBERNETES_SERVICE_NAME_LABEL;
use mcs_types::v1beta1::ServiceExport;

/// A namespace object.
pub fn namespace(name: &str) -> Namespace {
    Namespace {
        metadata: ObjectMeta {
            name: Some(name.to_owned()),
            ..Default::default()
        },
        ..Default::default()
    }
}

/// A ClusterIP Service with one TCP port per entry of `ports` (named `p<port>`).
pub fn service(key: &ServiceKey, cluster_ip: &str, ports: &[i32]) -> Service {
    Service {
        metadata: ObjectMeta {
            name: Some(key.name.clone()),
            namespace: Some(key.namespace.clone()),
            ..Default::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: Some(cluster_ip.to_owned()),
            ports: Some(
                ports
                    .iter()
                    .map(|p| ServicePort {
                        name: Some(format!("p{p}")),
                        port: *p,
                        protocol: Some("TCP".into()),
                        ..Default::default()
                    })
                    .collect(),
            ),
            ..Default::default()
        }),
        ..Default::default()
    }
}

/// A ServiceExport created at `created`.
pub fn service_export(key: &ServiceKey, created: Timestamp) -> ServiceExport {
    let mut export = ServiceExport::new(&key.name, Default::default());
    export.metadata.namespace = Some(key.namespace.clone());
    export.metadata.creation_timestamp = Some(Time(created));
    export.metadata.generation = Some(1);
    export
}

/// The Service's EndpointSlice with one ready endpoint per address.
pub fn endpoint_slice(key: &ServiceKey, addresses: &[&str], ports: &[i32]) -> EndpointSlice {
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("{}-abcde", key.name)),
            namespace: Some(key.namespace.clone()),
            labels: Some(BTreeMap::from([(
                KUBERNETES_SERVICE_NAME_LABEL.to_owned(),
                key.name.clone(),
            )])),
            ..Default::default()
        },
        address_type: "IPv4".into(),
        endpoints: addresses
            .iter()
            .map(|a| Endpoint {
                addresses: vec![(*a).to_owned()],
                ..Default::default()
            })
            .collect(),
        ports: Some(
            ports
                .iter()
                .map(|p| EndpointPort {
                    name: Some(format!("p{p}")),
                    port: Some(*p),
                    protocol: Some("TCP".into()),
                    ..Default::default()
                })
                .collect(),
        ),
    }
}

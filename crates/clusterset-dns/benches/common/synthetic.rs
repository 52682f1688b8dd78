//! Synthetic zones for benchmarks and load tests: `count` ClusterSetIP services in namespace
//! `bench`, each with one clusterset IP, one named port and an EndpointSlice of two ready
//! endpoints, so every service makes the names a real one does (service, SRV, endpoints, PTR).
//!
//! Not part of the library: each user includes this file as a module of its own
//! (`#[path = ".../benches/common/synthetic.rs"] mod synthetic;`): the `zone_updates` bench,
//! the `bench_server` example, the fuzz target and the crate's unit tests.

use k8s_openapi::api::discovery::v1::{Endpoint, EndpointPort, EndpointSlice};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mcs_types::labels::{SERVICE_NAME_LABEL, SOURCE_CLUSTER_LABEL};
use mcs_types::{ServiceImportSpec, ServiceImportType, ServicePort};

use clusterset_dns::ZoneObject;

/// The name of synthetic service `i`: `svc-<i>`.
pub fn service_name(i: usize) -> String {
    format!("svc-{i}")
}

/// The clusterset IP of service `i` in generation `generation` (a different IP per generation,
/// so that each generation is a real change).
pub fn service_ip(i: usize, generation: u8) -> String {
    let [_, _, hi, lo] = u32::try_from(i).unwrap_or(0).to_be_bytes();
    format!("242.{generation}.{hi}.{lo}")
}

/// The ServiceImport of synthetic service `i`.
pub fn service_import(i: usize, generation: u8) -> mcs_types::v1beta1::ServiceImport {
    let mut spec = ServiceImportSpec::new(
        ServiceImportType::ClusterSetIP,
        vec![ServicePort::tcp("http", 80)],
    );
    spec.ips = vec![service_ip(i, generation)];
    let mut import = mcs_types::v1beta1::ServiceImport::new(&service_name(i), spec);
    import.metadata.namespace = Some("bench".to_owned());
    import
}

/// The EndpointSlice of synthetic service `i` (cluster `east`, two ready endpoints).
pub fn endpoint_slice(i: usize) -> EndpointSlice {
    let [_, _, hi, lo] = u32::try_from(i).unwrap_or(0).to_be_bytes();
    let endpoint = |n: u8| Endpoint {
        addresses: vec![format!("10.{n}.{hi}.{lo}")],
        ..Endpoint::default()
    };
    EndpointSlice {
        metadata: ObjectMeta {
            name: Some(format!("{}-east", service_name(i))),
            namespace: Some("bench".to_owned()),
            labels: Some(
                [
                    (SERVICE_NAME_LABEL.to_owned(), service_name(i)),
                    (SOURCE_CLUSTER_LABEL.to_owned(), "east".to_owned()),
                ]
                .into(),
            ),
            ..ObjectMeta::default()
        },
        address_type: "IPv4".to_owned(),
        endpoints: vec![endpoint(1), endpoint(2)],
        ports: Some(vec![EndpointPort {
            name: Some("http".to_owned()),
            port: Some(80),
            protocol: Some("TCP".to_owned()),
            ..EndpointPort::default()
        }]),
    }
}

/// All objects of a synthetic zone of `count` services.
pub fn zone_objects(count: usize) -> Vec<ZoneObject> {
    (0..count)
        .flat_map(|i| {
            [
                ZoneObject::ServiceImport(Box::new(service_import(i, 0))),
                ZoneObject::EndpointSlice(Box::new(endpoint_slice(i))),
            ]
        })
        .collect()
}

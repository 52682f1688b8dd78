//! The plan as Kubernetes objects (k8s-openapi types and mcs-types' ServiceExport), ready for
//! server-side apply. The plan itself keeps plain values and renders objects on request, so a
//! plan of 10,000 OSDs does not build 10,000 label maps until someone asks for them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret, Service, ServicePort, ServiceSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use mcs_types::v1beta1::ServiceExport;

use crate::input::Daemon;
use crate::labels::{self, Labels};
use crate::plan::{DesiredExport, DesiredService, NamedPort, Plan, ServiceRole};
use crate::rook;

impl Plan {
    /// The owner reference to the CephCluster, when its uid is known: non-controller for
    /// Services and ServiceExports (Rook's `SetOwnerReference`), controller with
    /// `blockOwnerDeletion` for the ConfigMap and Secret (`SetControllerReference`).
    pub fn owner_reference(&self, controller: bool) -> Option<OwnerReference> {
        let uid = self.settings().uid.clone()?;
        Some(OwnerReference {
            api_version: rook::CEPH_CLUSTER_API_VERSION.to_owned(),
            kind: rook::CEPH_CLUSTER_KIND.to_owned(),
            name: self.settings().name.clone(),
            uid,
            controller: controller.then_some(true),
            block_owner_deletion: controller.then_some(true),
        })
    }

    fn metadata(&self, name: &str, labels: Option<Labels>, controller: bool) -> ObjectMeta {
        ObjectMeta {
            name: Some(name.to_owned()),
            namespace: Some(self.settings().namespace.clone()),
            labels,
            owner_references: self.owner_reference(controller).map(|o| vec![o]),
            ..ObjectMeta::default()
        }
    }

    /// The labels and selector of a desired Service.
    pub fn service_labels(&self, service: &DesiredService) -> (Labels, Labels) {
        let settings = self.settings();
        let selector = match &service.daemon {
            Daemon::Mon(id) => self
                .mon(id)
                .map(|m| labels::mon_selector(settings, m.input()))
                .unwrap_or_default(),
            Daemon::Osd(id) => labels::osd_selector(*id),
        };
        let labels = match (service.role, &service.daemon) {
            (ServiceRole::Rook, Daemon::Mon(id)) => self
                .mon(id)
                .map(|m| labels::mon_labels(settings, m.input()))
                .unwrap_or_default(),
            (ServiceRole::Rook, Daemon::Osd(id)) => self
                .osd(*id)
                .map(|o| labels::osd_labels(settings, o.input()))
                .unwrap_or_default(),
            (ServiceRole::Export, daemon) => labels::export_service_labels(
                settings,
                daemon.daemon_type(),
                &daemon.id_string(),
                &daemon.service_name(),
            ),
        };
        (labels, selector)
    }

    /// A desired Service as a Kubernetes object: ClusterIP (the default type, left unset as
    /// Rook does), TCP ports with target port = port, owned by the CephCluster.
    pub fn service_manifest(&self, service: &DesiredService) -> Service {
        let (labels, selector) = self.service_labels(service);
        Service {
            metadata: self.metadata(&service.name, Some(labels), false),
            spec: Some(ServiceSpec {
                selector: Some(selector),
                ports: Some(service.ports.iter().map(service_port).collect()),
                ..ServiceSpec::default()
            }),
            status: None,
        }
    }

    /// Every desired Service as a Kubernetes object.
    pub fn service_manifests(&self) -> Vec<Service> {
        self.services()
            .iter()
            .map(|s| self.service_manifest(s))
            .collect()
    }

    /// A desired ServiceExport (`multicluster.x-k8s.io/v1beta1`; convert with `.into()` for an
    /// MCS implementation that serves only v1alpha1, as Rook writes): same name and namespace
    /// as its Service, the Service's owner reference, no spec.
    pub fn service_export_manifest(&self, export: &DesiredExport) -> ServiceExport {
        let mut object = ServiceExport::new(&export.name, Default::default());
        object.metadata = self.metadata(&export.name, None, false);
        object
    }

    /// Every desired ServiceExport.
    pub fn service_export_manifests(&self) -> Vec<ServiceExport> {
        self.service_exports()
            .iter()
            .map(|e| self.service_export_manifest(e))
            .collect()
    }

    /// `rook-ceph-mon-endpoints` with Rook's finalizer and controller owner reference.
    pub fn mon_endpoints_config_map(&self) -> ConfigMap {
        let mut metadata = self.metadata(rook::MON_ENDPOINTS_CONFIG_MAP, None, true);
        metadata.finalizers = Some(vec![rook::DISASTER_PROTECTION_FINALIZER.to_owned()]);
        ConfigMap {
            metadata,
            data: Some(self.mon_endpoints().to_data()),
            ..ConfigMap::default()
        }
    }

    /// The mon keys of `rook-ceph-config` (type `kubernetes.io/rook`), as `stringData`.
    pub fn config_secret(&self) -> Secret {
        let config = self.mon_host_config();
        Secret {
            metadata: self.metadata(rook::CONFIG_SECRET, None, true),
            string_data: Some(BTreeMap::from([
                (rook::KEY_MON_HOST.to_owned(), config.mon_host.clone()),
                (
                    rook::KEY_MON_INITIAL_MEMBERS.to_owned(),
                    config.mon_initial_members.clone(),
                ),
            ])),
            type_: Some(rook::ROOK_SECRET_TYPE.to_owned()),
            ..Secret::default()
        }
    }
}

fn service_port(port: &NamedPort) -> ServicePort {
    ServicePort {
        name: Some(port.name.to_owned()),
        port: i32::from(port.port),
        protocol: Some("TCP".to_owned()),
        target_port: Some(IntOrString::Int(i32::from(port.port))),
        ..ServicePort::default()
    }
}

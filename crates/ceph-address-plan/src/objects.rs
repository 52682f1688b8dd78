//! The plan as Kubernetes objects (k8s-openapi types and mcs-types' ServiceExport), ready for
//! server-side apply. The plan itself keeps plain values and renders objects on request, so a
//! plan of 10,000 OSDs does not build 10,000 label maps until someone asks for them.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{
    ConfigMap, ContainerPort, Secret, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;
use mcs_types::v1beta1::ServiceExport;

use crate::input::{ClusterSettings, Daemon, MonInput};
use crate::labels::{self, Labels};
use crate::plan::{DesiredExport, DesiredService, NamedPort, Plan, ServiceRole, mon_ports};
use crate::rook;

/// The owner reference to the CephCluster of `settings`, when its uid is known: non-controller
/// for Services and ServiceExports (Rook's `SetOwnerReference`), controller with
/// `blockOwnerDeletion` for the ConfigMap and Secret (`SetControllerReference`).
///
/// ```
/// use ceph_address_plan::{ClusterSettings, cluster_owner_reference};
/// let mut settings = ClusterSettings::new("my-cluster", "rook-ceph");
/// assert_eq!(cluster_owner_reference(&settings, false), None);
/// settings.uid = Some("u-1".into());
/// let owner = cluster_owner_reference(&settings, true).unwrap();
/// assert_eq!((owner.kind.as_str(), owner.name.as_str()), ("CephCluster", "my-cluster"));
/// assert_eq!(owner.controller, Some(true));
/// ```
pub fn cluster_owner_reference(
    settings: &ClusterSettings,
    controller: bool,
) -> Option<OwnerReference> {
    let uid = settings.uid.clone()?;
    Some(OwnerReference {
        api_version: rook::CEPH_CLUSTER_API_VERSION.to_owned(),
        kind: rook::CEPH_CLUSTER_KIND.to_owned(),
        name: settings.name.clone(),
        uid,
        controller: controller.then_some(true),
        block_owner_deletion: controller.then_some(true),
    })
}

fn metadata(
    settings: &ClusterSettings,
    name: &str,
    labels: Option<Labels>,
    owner: Option<OwnerReference>,
) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.to_owned()),
        namespace: Some(settings.namespace.clone()),
        labels,
        owner_references: owner.map(|o| vec![o]),
        ..ObjectMeta::default()
    }
}

/// A Service of a Ceph daemon as Rook makes them: ClusterIP (the default type, left unset as
/// Rook does), TCP ports with target port = port.
fn daemon_service(metadata: ObjectMeta, selector: Labels, ports: &[NamedPort]) -> Service {
    Service {
        metadata,
        spec: Some(ServiceSpec {
            selector: Some(selector),
            ports: Some(ports.iter().map(NamedPort::service_port).collect()),
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// A mon's Service `rook-ceph-mon-<id>` as Rook makes it (`createService`): the mon's labels,
/// the selector of its pods, the mon ports of `port` (`tcp-msgr1` unless it is 3300, then
/// `tcp-msgr2`), with `owner` as its only owner reference. [`Plan::service_manifest`] builds
/// the Services of the plan's mons with it (owner: [`cluster_owner_reference`], not
/// controller); the operator's mon migration builds the Service of a mon the plan does not
/// have yet.
///
/// ```
/// use ceph_address_plan::{ClusterSettings, MonInput, mon_service};
/// let settings = ClusterSettings::new("my-cluster", "rook-ceph");
/// let service = mon_service(&settings, &MonInput::new("d".parse()?), 6789, None);
/// assert_eq!(service.metadata.name.as_deref(), Some("rook-ceph-mon-d"));
/// let spec = service.spec.unwrap();
/// assert_eq!(spec.selector.unwrap()["mon"], "d");
/// let ports: Vec<_> = spec.ports.unwrap().iter().map(|p| p.port).collect();
/// assert_eq!(ports, [6789, 3300]);
/// # Ok::<(), ceph_address_plan::InvalidMonId>(())
/// ```
pub fn mon_service(
    settings: &ClusterSettings,
    mon: &MonInput,
    port: u16,
    owner: Option<OwnerReference>,
) -> Service {
    let name = Daemon::Mon(mon.id.clone()).service_name();
    daemon_service(
        metadata(
            settings,
            &name,
            Some(labels::mon_labels(settings, mon)),
            owner,
        ),
        labels::mon_selector(settings, mon),
        &mon_ports(port),
    )
}

impl NamedPort {
    /// The port of a Service: TCP, target port = port.
    pub fn service_port(&self) -> ServicePort {
        ServicePort {
            name: Some(self.name.to_owned()),
            port: i32::from(self.port),
            protocol: Some("TCP".to_owned()),
            target_port: Some(IntOrString::Int(i32::from(self.port))),
            ..ServicePort::default()
        }
    }

    /// The port of a container: TCP, named.
    ///
    /// ```
    /// let port = ceph_address_plan::osd_ports(true)[0].container_port();
    /// assert_eq!(
    ///     serde_json::to_value(port)?,
    ///     serde_json::json!({"name": "osd-port-v2", "containerPort": 6800, "protocol": "TCP"})
    /// );
    /// # Ok::<(), serde_json::Error>(())
    /// ```
    pub fn container_port(&self) -> ContainerPort {
        ContainerPort {
            name: Some(self.name.to_owned()),
            container_port: i32::from(self.port),
            protocol: Some("TCP".to_owned()),
            ..ContainerPort::default()
        }
    }
}

impl Plan {
    /// The owner reference to the CephCluster ([`cluster_owner_reference`] of the plan's
    /// settings).
    pub fn owner_reference(&self, controller: bool) -> Option<OwnerReference> {
        cluster_owner_reference(self.settings(), controller)
    }

    fn metadata(&self, name: &str, labels: Option<Labels>, controller: bool) -> ObjectMeta {
        metadata(
            self.settings(),
            name,
            labels,
            self.owner_reference(controller),
        )
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
    /// Rook does), TCP ports with target port = port, owned by the CephCluster. Rook's Service
    /// of a planned mon is [`mon_service`]'s.
    pub fn service_manifest(&self, service: &DesiredService) -> Service {
        if let (ServiceRole::Rook, Daemon::Mon(id)) = (service.role, &service.daemon)
            && let Some(mon) = self.mon(id)
        {
            return mon_service(
                self.settings(),
                mon.input(),
                mon.port(),
                self.owner_reference(false),
            );
        }
        let (labels, selector) = self.service_labels(service);
        daemon_service(
            self.metadata(&service.name, Some(labels), false),
            selector,
            &service.ports,
        )
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

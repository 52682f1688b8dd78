//! The labels and selectors Rook puts on mon and OSD Services (and their pods).

use std::collections::BTreeMap;

use crate::input::{ClusterSettings, MonInput, OsdInput};
use crate::rook::{self, export_label, label};

/// Labels as Kubernetes stores them.
pub type Labels = BTreeMap<String, String>;

fn put(labels: &mut Labels, key: &str, value: impl Into<String>) {
    labels.insert(key.to_owned(), value.into());
}

/// Rook's `CephDaemonAppLabels(app, ns, type, id, cluster, component, includeNewLabels=true)`.
fn daemon_app_labels(
    cluster: &ClusterSettings,
    app: &str,
    daemon_type: &str,
    daemon_id: &str,
) -> Labels {
    let mut labels = Labels::new();
    put(&mut labels, label::APP, app);
    put(&mut labels, label::ROOK_CLUSTER, &cluster.namespace);
    put(&mut labels, label::DAEMON_TYPE, daemon_type);
    put(&mut labels, label::K8S_NAME, format!("ceph-{daemon_type}"));
    put(&mut labels, label::K8S_INSTANCE, daemon_id);
    put(
        &mut labels,
        label::K8S_COMPONENT,
        rook::CEPH_CLUSTER_COMPONENT,
    );
    put(&mut labels, label::K8S_PART_OF, &cluster.name);
    put(&mut labels, label::K8S_MANAGED_BY, rook::ROOK_OPERATOR);
    put(&mut labels, label::K8S_CREATED_BY, rook::ROOK_OPERATOR);
    put(
        &mut labels,
        label::OPERATOR_NAMESPACE,
        &cluster.operator_namespace,
    );
    put(&mut labels, label::DAEMON_ID, daemon_id);
    put(&mut labels, daemon_type, daemon_id);
    labels
}

/// Labels of a mon's Service (Rook's `getLabels(mon, canary=false, includeNewLabels=true)`).
///
/// ```
/// use ceph_address_plan::{labels::mon_labels, ClusterSettings, MonInput};
/// let cluster = ClusterSettings::new("my-cluster", "rook-ceph");
/// let labels = mon_labels(&cluster, &MonInput::new("a".parse()?));
/// assert_eq!(labels["app"], "rook-ceph-mon");
/// assert_eq!(labels["mon_daemon"], "true");
/// assert_eq!(labels["app.kubernetes.io/part-of"], "my-cluster");
/// # Ok::<(), ceph_address_plan::InvalidMonId>(())
/// ```
pub fn mon_labels(cluster: &ClusterSettings, mon: &MonInput) -> Labels {
    let id = mon.id.as_str();
    let mut labels = daemon_app_labels(cluster, rook::MON_APP, "mon", id);
    put(&mut labels, label::MON_CLUSTER, &cluster.namespace);
    if let Some(size) = &mon.pvc_size {
        put(
            &mut labels,
            label::PVC_NAME,
            format!("{}{id}", rook::MON_NAME_PREFIX),
        );
        put(&mut labels, label::PVC_SIZE, size);
    }
    if let Some(zone) = mon.zone.as_deref().filter(|z| !z.is_empty()) {
        put(&mut labels, label::ZONE, zone);
    }
    put(&mut labels, label::MON_DAEMON, "true");
    labels
}

/// Selector of a mon's Service (`getLabels(mon, false, false)`): `app`, `rook_cluster`,
/// `ceph_daemon_id`, `mon`, `mon_cluster`. Mon canary pods match it too, which is what keeps a
/// new mon's export alive before the mon exists.
pub fn mon_selector(cluster: &ClusterSettings, mon: &MonInput) -> Labels {
    let id = mon.id.as_str();
    let mut labels = Labels::new();
    put(&mut labels, label::APP, rook::MON_APP);
    put(&mut labels, label::ROOK_CLUSTER, &cluster.namespace);
    put(&mut labels, label::DAEMON_ID, id);
    put(&mut labels, label::MON, id);
    put(&mut labels, label::MON_CLUSTER, &cluster.namespace);
    labels
}

/// Labels of an OSD's Service: the OSD pod labels of Rook's `getOSDLabels`.
///
/// ```
/// use ceph_address_plan::{labels::osd_labels, ClusterSettings, OsdInput};
/// let cluster = ClusterSettings::new("my-cluster", "rook-ceph");
/// let mut osd = OsdInput::new(7, "node-1");
/// osd.location = "root=default host=node-1".into();
/// let labels = osd_labels(&cluster, &osd);
/// assert_eq!(labels["ceph-osd-id"], "7");
/// assert_eq!(labels["failure-domain"], "node-1");
/// assert_eq!(labels["topology-location-host"], "node-1");
/// assert_eq!(labels["encrypted"], "false");
/// ```
pub fn osd_labels(cluster: &ClusterSettings, osd: &OsdInput) -> Labels {
    let id = osd.id.to_string();
    let mut labels = daemon_app_labels(cluster, rook::OSD_APP, "osd", &id);
    put(&mut labels, label::OSD_ID, id);
    put(&mut labels, label::FAILURE_DOMAIN, &osd.host);
    put(&mut labels, label::PORTABLE, osd.portable.to_string());
    put(&mut labels, label::DEVICE_CLASS, &osd.device_class);
    if let Some(device_type) = osd.device_type.as_deref().filter(|t| !t.is_empty()) {
        put(&mut labels, label::DEVICE_TYPE, device_type);
    }
    put(&mut labels, label::OSD_STORE, &osd.store);
    put(&mut labels, label::ENCRYPTED, osd.encrypted.to_string());
    for location in osd.location.split(' ') {
        let mut parts = location.split('=');
        if let (Some(key), Some(value), None) = (parts.next(), parts.next(), parts.next()) {
            put(
                &mut labels,
                &format!("{}{key}", label::TOPOLOGY_LOCATION_PREFIX),
                value,
            );
        }
    }
    labels
}

/// Selector of an OSD's Service: exactly `app=rook-ceph-osd` and `ceph-osd-id=<id>`.
pub fn osd_selector(osd_id: u32) -> Labels {
    let mut labels = Labels::new();
    put(&mut labels, label::APP, rook::OSD_APP);
    put(&mut labels, label::OSD_ID, osd_id.to_string());
    labels
}

/// Labels of the cluster-unique export Service that stands in for `rook_service` in the
/// unique-name form: few labels, and no Rook `app` label, so Rook's own selectors of mon and OSD
/// Services never match it.
pub fn export_service_labels(
    cluster: &ClusterSettings,
    daemon_type: &str,
    daemon_id: &str,
    rook_service: &str,
) -> Labels {
    let mut labels = Labels::new();
    put(&mut labels, label::ROOK_CLUSTER, &cluster.namespace);
    put(&mut labels, label::DAEMON_TYPE, daemon_type);
    put(&mut labels, label::DAEMON_ID, daemon_id);
    put(&mut labels, label::K8S_PART_OF, &cluster.name);
    put(&mut labels, label::K8S_MANAGED_BY, export_label::MANAGED_BY);
    put(&mut labels, export_label::ROOK_SERVICE, rook_service);
    labels
}

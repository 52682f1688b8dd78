//! Rook's names, ports, label keys and ConfigMap/Secret keys, byte for byte.
//!
//! Sources (Rook `master`): `pkg/operator/ceph/cluster/mon/{mon,service,spec,util}.go`,
//! `pkg/operator/ceph/cluster/osd/{osd,labels,spec}.go`, `pkg/operator/ceph/controller/spec.go`,
//! `pkg/operator/k8sutil/labels.go`, `pkg/operator/ceph/config/store.go`. Everything that must
//! match Rook lives here, so a reader can check it in one place.

/// `app` label of mon pods and Services.
pub const MON_APP: &str = "rook-ceph-mon";
/// `app` label of OSD pods and Services.
pub const OSD_APP: &str = "rook-ceph-osd";
/// Prefix of mon resource names: `rook-ceph-mon-<id>`.
pub const MON_NAME_PREFIX: &str = "rook-ceph-mon-";
/// Prefix of OSD resource names: `rook-ceph-osd-<id>`.
pub const OSD_NAME_PREFIX: &str = "rook-ceph-osd-";

/// The msgr1 (legacy) mon port.
pub const MON_MSGR1_PORT: u16 = 6789;
/// The msgr2 mon port.
pub const MON_MSGR2_PORT: u16 = 3300;
/// Name of the msgr1 mon port (Service and container).
pub const MON_MSGR1_PORT_NAME: &str = "tcp-msgr1";
/// Name of the msgr2 mon port (Service and container).
pub const MON_MSGR2_PORT_NAME: &str = "tcp-msgr2";
/// The OSD public messenger port Ceph picks first (msgr2).
pub const OSD_MSGR2_PORT: u16 = 6800;
/// The OSD port for msgr1 clients, omitted when msgr2 is required.
pub const OSD_MSGR1_PORT: u16 = 6801;
/// Name of the OSD msgr2 port.
pub const OSD_MSGR2_PORT_NAME: &str = "osd-port-v2";
/// Name of the OSD msgr1 port.
pub const OSD_MSGR1_PORT_NAME: &str = "osd-port-v1";

/// The environment variable reference every pod-IP bind address uses (`status.podIP`).
pub const POD_IP: &str = "$(ROOK_POD_IP)";

/// The ConfigMap with the mon endpoints.
pub const MON_ENDPOINTS_CONFIG_MAP: &str = "rook-ceph-mon-endpoints";
/// `rook-ceph-mon-endpoints` key: `<id>=<ip:port>` joined by `,`.
pub const KEY_DATA: &str = "data";
/// `rook-ceph-mon-endpoints` key: mon placement JSON.
pub const KEY_MAPPING: &str = "mapping";
/// `rook-ceph-mon-endpoints` key: index of the highest mon id ever allocated, `-1` for none.
pub const KEY_MAX_MON_ID: &str = "maxMonId";
/// `rook-ceph-mon-endpoints` key: ids of mons out of quorum, joined by `,`.
pub const KEY_OUT_OF_QUORUM: &str = "outOfQuorum";
/// `rook-ceph-mon-endpoints` key: the ceph-csi cluster config.
pub const KEY_CSI_CLUSTER_CONFIG: &str = "csi-cluster-config-json";
/// `rook-ceph-mon-endpoints` key: ids of external mons, joined by `,`.
pub const KEY_EXTERNAL_MONS: &str = "externalMons";
/// Finalizer Rook puts on `rook-ceph-mon-endpoints`.
pub const DISASTER_PROTECTION_FINALIZER: &str = "ceph.rook.io/disaster-protection";

/// The Secret daemons read `mon_host` from.
pub const CONFIG_SECRET: &str = "rook-ceph-config";
/// `rook-ceph-config` key with the messenger address vectors of the mons in quorum.
pub const KEY_MON_HOST: &str = "mon_host";
/// `rook-ceph-config` key with the ids of the mons in quorum.
pub const KEY_MON_INITIAL_MEMBERS: &str = "mon_initial_members";
/// Type of `rook-ceph-config`.
pub const ROOK_SECRET_TYPE: &str = "kubernetes.io/rook";

/// API version of the CephCluster owner.
pub const CEPH_CLUSTER_API_VERSION: &str = "ceph.rook.io/v1";
/// Kind of the CephCluster owner.
pub const CEPH_CLUSTER_KIND: &str = "CephCluster";
/// `app.kubernetes.io/component` of every CephCluster daemon.
pub const CEPH_CLUSTER_COMPONENT: &str = "cephclusters.ceph.rook.io";
/// `app.kubernetes.io/managed-by` and `app.kubernetes.io/created-by` of Rook daemons.
pub const ROOK_OPERATOR: &str = "rook-ceph-operator";
/// The namespace Rook's operator usually runs in (the `rook.io/operator-namespace` label).
pub const DEFAULT_OPERATOR_NAMESPACE: &str = "rook-ceph";

/// Label keys Rook puts on daemons.
pub mod label {
    /// `app`
    pub const APP: &str = "app";
    /// `rook_cluster`: the cluster namespace.
    pub const ROOK_CLUSTER: &str = "rook_cluster";
    /// `ceph_daemon_type`
    pub const DAEMON_TYPE: &str = "ceph_daemon_type";
    /// `ceph_daemon_id`
    pub const DAEMON_ID: &str = "ceph_daemon_id";
    /// `mon`: the mon id (the daemon id keyed by daemon type).
    pub const MON: &str = "mon";
    /// `osd`: the OSD id (the daemon id keyed by daemon type).
    pub const OSD: &str = "osd";
    /// `mon_cluster`: the cluster namespace (legacy).
    pub const MON_CLUSTER: &str = "mon_cluster";
    /// `mon_daemon`: `true` on real mons, absent on canaries.
    pub const MON_DAEMON: &str = "mon_daemon";
    /// Label of Rook's mon canary pods (`mon_canary=true`).
    pub const MON_CANARY: &str = "mon_canary";
    /// `pvc_name` of a PVC-backed mon.
    pub const PVC_NAME: &str = "pvc_name";
    /// `pvc_size` of a PVC-backed mon.
    pub const PVC_SIZE: &str = "pvc_size";
    /// `zone` of a mon in a zone.
    pub const ZONE: &str = "zone";
    /// `ceph-osd-id`
    pub const OSD_ID: &str = "ceph-osd-id";
    /// `failure-domain`: the CRUSH host (or PVC) of an OSD.
    pub const FAILURE_DOMAIN: &str = "failure-domain";
    /// `portable`
    pub const PORTABLE: &str = "portable";
    /// `device-class`
    pub const DEVICE_CLASS: &str = "device-class";
    /// `device-type`, only when known.
    pub const DEVICE_TYPE: &str = "device-type";
    /// `osd-store`
    pub const OSD_STORE: &str = "osd-store";
    /// `encrypted`
    pub const ENCRYPTED: &str = "encrypted";
    /// Prefix of the CRUSH location labels: `topology-location-<type>`.
    pub const TOPOLOGY_LOCATION_PREFIX: &str = "topology-location-";
    /// `app.kubernetes.io/name`
    pub const K8S_NAME: &str = mcs_types::labels::APP_NAME_LABEL;
    /// `app.kubernetes.io/instance`
    pub const K8S_INSTANCE: &str = mcs_types::labels::APP_INSTANCE_LABEL;
    /// `app.kubernetes.io/component`
    pub const K8S_COMPONENT: &str = mcs_types::labels::APP_COMPONENT_LABEL;
    /// `app.kubernetes.io/part-of`
    pub const K8S_PART_OF: &str = mcs_types::labels::APP_PART_OF_LABEL;
    /// `app.kubernetes.io/managed-by` (the same key as mcs-types' `APP_MANAGED_BY_LABEL`).
    pub const K8S_MANAGED_BY: &str = mcs_types::labels::APP_MANAGED_BY_LABEL;
    /// `app.kubernetes.io/created-by`
    pub const K8S_CREATED_BY: &str = mcs_types::labels::APP_CREATED_BY_LABEL;
    /// `rook.io/operator-namespace`
    pub const OPERATOR_NAMESPACE: &str = "rook.io/operator-namespace";
}

/// Labels of the cluster-unique export Services this crate adds in the
/// [`UniqueServiceName`](crate::DnsNameForm::UniqueServiceName) name form (not Rook's).
pub mod export_label {
    /// The Rook Service an export Service stands in for.
    pub const ROOK_SERVICE: &str = "clusterset.io/rook-service";
    /// `app.kubernetes.io/managed-by` value of export Services.
    pub const MANAGED_BY: &str = "clusterset";
}

/// The oldest Ceph release whose OSDs accept `--public-bind-addr` (ceph/ceph#49990, #50153).
pub const MIN_MCS_CEPH_VERSION: (u32, u32, u32) = (17, 2, 6);

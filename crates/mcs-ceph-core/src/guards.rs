//! The guards a CephCluster must pass before anything is written for it: a name that fits in a
//! label value, a spec the operator can read, a valid `clusterID`, Ceph 17.2.6 or later, pod networking, the MCS API served, and
//! an inventory the planner accepts. Each failure has a condition reason and a message that
//! names the fix.

use ceph_address_plan::{ClusterSettings, Rejection};

use crate::config::Config;
use crate::snapshot::McsApi;
use mcs_ceph_api::CephCluster;

/// One failed guard.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GuardFailure {
    /// The condition reason (CamelCase).
    pub reason: &'static str,
    /// What is wrong and how to fix it.
    pub message: String,
}

/// The condition reason of a planner rejection.
pub fn rejection_reason(rejection: &Rejection) -> &'static str {
    match rejection {
        Rejection::MissingClusterId => "MissingClusterID",
        Rejection::InvalidClusterId { .. } => "InvalidClusterID",
        Rejection::McsWithHostNetwork => "HostNetworking",
        Rejection::CephTooOld { .. } => "CephTooOld",
        Rejection::CephVersionAmbiguous { .. } => "CephVersionAmbiguous",
        Rejection::CephVersionUnknown => "CephVersionUnknown",
        Rejection::InvalidNamespace { .. }
        | Rejection::InvalidZone(_)
        | Rejection::InvalidClustersetName { .. }
        | Rejection::ServiceNameTooLong { .. } => "InvalidName",
        Rejection::DuplicateMon(_)
        | Rejection::DuplicateOsd(_)
        | Rejection::DuplicateExternalMon(_)
        | Rejection::InvalidExternalMonName(_)
        | Rejection::WrongIpFamily { .. }
        | Rejection::HostNetworkMonWithoutNodeAddress(_) => "InvalidInventory",
    }
}

/// The planner settings of a CephCluster with the operator's configuration applied, or why the
/// spec cannot be read.
pub fn settings(cluster: &CephCluster, config: &Config) -> Result<ClusterSettings, GuardFailure> {
    let unreadable = |problem: String| GuardFailure {
        reason: "UnreadableSpec",
        message: format!(
            "the spec of CephCluster {}/{} cannot be read: {problem}: fix that field (kubectl edit cephcluster)",
            cluster.metadata.namespace.as_deref().unwrap_or_default(),
            cluster.metadata.name.as_deref().unwrap_or_default()
        ),
    };
    let manifest = cluster.manifest().map_err(|e| unreadable(e.to_string()))?;
    let mut settings = manifest.settings().map_err(|e| unreadable(e.to_string()))?;
    settings.dns_name_form = config.dns_name_form;
    settings.clusterset_zone.clone_from(&config.clusterset_zone);
    if let Some(namespace) = &config.rook_operator_namespace {
        settings.operator_namespace.clone_from(namespace);
    }
    if let Some(running) = cluster.running_ceph_version() {
        settings.ceph_version = Some(running);
    }
    Ok(settings)
}

/// The guard on the CephCluster's name. Rook puts it in the `app.kubernetes.io/part-of` label
/// of every daemon and its Services, and so does the planner on the Services the operator
/// makes: a label value holds at most 63 characters, an object name up to 253. A longer name
/// would have every Service apply refused by the API server (422), so nothing is written.
pub fn cluster_name(cluster: &CephCluster) -> Option<GuardFailure> {
    let name = cluster.metadata.name.as_deref().unwrap_or_default();
    (name.len() > mcs_types::names::MAX_LABEL_LEN).then(|| GuardFailure {
        reason: "InvalidName",
        message: format!(
            "the CephCluster name {name:?} has {} characters: it is the value of the label app.kubernetes.io/part-of on every Service of the cluster, and a label value holds at most {}: use a CephCluster name of at most {} characters",
            name.len(),
            mcs_types::names::MAX_LABEL_LEN,
            mcs_types::names::MAX_LABEL_LEN
        ),
    })
}

/// The guard on the MCS API.
pub fn mcs_api(api: &McsApi) -> Option<GuardFailure> {
    match api {
        McsApi::Served(_) => None,
        McsApi::Missing(detail) => Some(GuardFailure {
            reason: "McsApiNotServed",
            message: format!(
                "the Multi-Cluster Services API (ServiceExport and ServiceImport in multicluster.x-k8s.io) is not served: {detail}: install the MCS CRDs and an MCS implementation (mcsctl crds | kubectl apply --server-side -f -, then clusterset-agent or Submariner); mcs-ceph-operator notices within its rediscovery interval (--rediscover-seconds) and restarts itself"
            ),
        }),
    }
}

/// The failures of a planner refusal, in the planner's order.
pub fn rejections(rejections: &ceph_address_plan::Rejections) -> Vec<GuardFailure> {
    rejections
        .iter()
        .map(|r| GuardFailure {
            reason: rejection_reason(r),
            message: r.to_string(),
        })
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use ceph_address_plan::CephVersion;

    #[test]
    fn the_running_version_and_the_configuration_win_over_the_spec() {
        let mut cluster = CephCluster::new(
            "c",
            "ns",
            serde_json::json!({"cephVersion": {"image": "quay.io/ceph/ceph:v17"}}),
        );
        cluster.status = Some(serde_json::json!({"version": {"version": "17.2.7-0"}}));
        let config = Config {
            rook_operator_namespace: Some("rook-system".into()),
            ..Config::default()
        };
        let settings = settings(&cluster, &config).unwrap();
        assert_eq!(settings.ceph_version, Some(CephVersion::new(17, 2, 7)));
        assert_eq!(settings.operator_namespace, "rook-system");
    }

    #[test]
    fn a_cluster_name_longer_than_a_label_value_is_refused() {
        let spec = serde_json::json!({});
        assert_eq!(
            cluster_name(&CephCluster::new(&"a".repeat(63), "ns", spec.clone())),
            None
        );
        let failure = cluster_name(&CephCluster::new(&"a".repeat(64), "ns", spec)).unwrap();
        assert_eq!(failure.reason, "InvalidName");
        assert!(
            failure.message.contains("has 64 characters"),
            "{}",
            failure.message
        );
    }

    #[test]
    fn an_unreadable_spec_says_which_cluster_and_field() {
        let cluster = CephCluster::new(
            "c",
            "ns",
            serde_json::json!({"network": {"ipFamily": "ipv5"}}),
        );
        let failure = settings(&cluster, &Config::default()).unwrap_err();
        assert_eq!(failure.reason, "UnreadableSpec");
        assert!(
            failure.message.contains("CephCluster ns/c"),
            "{}",
            failure.message
        );
        assert!(failure.message.contains("ipv5"), "{}", failure.message);
    }
}

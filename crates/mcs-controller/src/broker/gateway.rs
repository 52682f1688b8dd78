//! The gateway records on the hub: one [`GatewayRecord`] per member cluster (kind
//! `GatewayRecord`, named after the cluster, in the cluster's records namespace), written by
//! that cluster's `clusterset-gateway`. It says where the cluster's global CIDR is reached: the
//! gateway's address on the network between the gateways. Every gateway reads the others' to
//! route each peer's global CIDR to its gateway (docs/data-plane.md).
//!
//! Like an [`ExportRecord`](crate::ExportRecord), a gateway record is only taken as its
//! cluster's when it is stored where only that cluster's credentials can write
//! ([`GatewayRecord::checked_spec`]).

use std::collections::BTreeMap;
use std::net::IpAddr;

use ipnet::IpNet;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;
use mcs_types::ClusterId;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use super::{CLUSTER_ID_LABEL, GROUP, VERSION, records_namespace};

/// Kind of [`GatewayRecord`].
pub const GATEWAY_KIND: &str = "GatewayRecord";
/// Plural (resource) name of [`GatewayRecord`].
pub const GATEWAY_PLURAL: &str = "gatewayrecords";

/// What a cluster's gateway publishes: the `spec` of its [`GatewayRecord`].
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "camelCase")]
#[schemars(description = "Where one member cluster's global CIDR is reached.")]
pub struct GatewaySpec {
    /// The cluster (MCS `source-cluster`).
    pub cluster_id: ClusterId,
    /// The cluster's global CIDR: its exports' global IPs and its egress IPs.
    #[schemars(with = "String")]
    pub global_cidr: IpNet,
    /// The gateway's address on the network between the gateways (underlay or tunnel): the
    /// next hop of the other clusters' route to `globalCidr`.
    #[schemars(with = "String")]
    pub gateway_ip: IpAddr,
}

/// One member cluster's gateway, as stored on the hub. The spec is kept as JSON so that a
/// document that is not a [`GatewaySpec`] (written by something else, or a newer gateway)
/// never stops a watch: [`GatewayRecord::checked_spec`] says what is wrong with it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct GatewayRecord {
    /// `clusterset.io/v1alpha1`.
    #[serde(default = "api_version")]
    pub api_version: String,
    /// `GatewayRecord`.
    #[serde(default = "kind")]
    pub kind: String,
    /// Named after the cluster, labelled with its id.
    pub metadata: ObjectMeta,
    /// A [`GatewaySpec`], or anything else (reported by [`GatewayRecord::checked_spec`]).
    pub spec: serde_json::Value,
}

fn api_version() -> String {
    format!("{GROUP}/{VERSION}")
}

fn kind() -> String {
    GATEWAY_KIND.to_owned()
}

mcs_types::impl_resource!(GatewayRecord {
    group: GROUP,
    version: VERSION,
    kind: GATEWAY_KIND,
    plural: GATEWAY_PLURAL,
    scope: k8s_openapi::NamespaceResourceScope,
});

/// Why a gateway record is not taken as its cluster's.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum GatewayRecordError {
    /// The spec is not a [`GatewaySpec`].
    #[error("gateway record {namespace}/{name} is not readable: {reason}; ignored")]
    Unreadable {
        /// Where it is stored.
        namespace: String,
        /// Its name.
        name: String,
        /// The parse error, naming the field.
        reason: String,
    },
    /// Stored outside its cluster's records namespace, or under another name.
    #[error(
        "gateway record of cluster {cluster} stored as {namespace}/{name}, where cluster {cluster} cannot write (its gateway record is {expected_namespace}/{cluster}): another member's credentials wrote it; ignored"
    )]
    ForeignWriter {
        /// The cluster the record names.
        cluster: ClusterId,
        /// Where it is stored.
        namespace: String,
        /// Its name.
        name: String,
        /// That cluster's records namespace.
        expected_namespace: String,
    },
}

impl GatewayRecord {
    /// The record of `spec`'s cluster, in its records namespace under `broker_namespace`.
    ///
    /// ```
    /// use mcs_controller::broker::{GatewayRecord, GatewaySpec};
    /// use mcs_types::ClusterId;
    /// let spec = GatewaySpec {
    ///     cluster_id: ClusterId::new("east")?,
    ///     global_cidr: "242.1.0.0/16".parse()?,
    ///     gateway_ip: "172.30.0.1".parse()?,
    /// };
    /// let record = GatewayRecord::new(&spec, "clusterset-broker");
    /// assert_eq!(record.metadata.namespace.as_deref(), Some("clusterset-broker-east"));
    /// assert_eq!(record.metadata.name.as_deref(), Some("east"));
    /// assert_eq!(record.checked_spec("clusterset-broker"), Ok(spec));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new(spec: &GatewaySpec, broker_namespace: &str) -> Self {
        Self {
            api_version: api_version(),
            kind: kind(),
            metadata: ObjectMeta {
                name: Some(spec.cluster_id.to_string()),
                namespace: Some(records_namespace(broker_namespace, &spec.cluster_id)),
                labels: Some(BTreeMap::from([(
                    CLUSTER_ID_LABEL.to_owned(),
                    spec.cluster_id.to_string(),
                )])),
                ..ObjectMeta::default()
            },
            // A GatewaySpec is plain data: its JSON form cannot fail.
            spec: serde_json::to_value(spec).unwrap_or_default(),
        }
    }

    /// The spec, if it is readable and stored where only its cluster's credentials can write:
    /// in `<broker_namespace>-<cluster>`, named after the cluster.
    pub fn checked_spec(&self, broker_namespace: &str) -> Result<GatewaySpec, GatewayRecordError> {
        let namespace = self.metadata.namespace.clone().unwrap_or_default();
        let name = self.metadata.name.clone().unwrap_or_default();
        let spec: GatewaySpec = serde_json::from_value(self.spec.clone()).map_err(|error| {
            GatewayRecordError::Unreadable {
                namespace: namespace.clone(),
                name: name.clone(),
                reason: error.to_string(),
            }
        })?;
        let expected_namespace = records_namespace(broker_namespace, &spec.cluster_id);
        if namespace != expected_namespace || name != spec.cluster_id.as_str() {
            return Err(GatewayRecordError::ForeignWriter {
                cluster: spec.cluster_id,
                namespace,
                name,
                expected_namespace,
            });
        }
        Ok(spec)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(cluster: &str) -> GatewaySpec {
        GatewaySpec {
            cluster_id: ClusterId::new(cluster).unwrap(),
            global_cidr: "242.2.0.0/16".parse().unwrap(),
            gateway_ip: "172.30.0.2".parse().unwrap(),
        }
    }

    #[test]
    fn a_gateway_record_names_its_api_for_kube() {
        use kube_core::Resource;
        let url = GatewayRecord::url_path(&(), Some("broker-east"));
        assert_eq!(
            url,
            "/apis/clusterset.io/v1alpha1/namespaces/broker-east/gatewayrecords"
        );
        let json = serde_json::to_value(GatewayRecord::new(&spec("west"), "broker")).unwrap();
        assert_eq!(json["apiVersion"], "clusterset.io/v1alpha1");
        assert_eq!(json["kind"], "GatewayRecord");
        assert_eq!(json["spec"]["globalCidr"], "242.2.0.0/16");
        assert_eq!(json["spec"]["gatewayIp"], "172.30.0.2");
    }

    #[test]
    fn a_record_of_west_stored_in_east_s_namespace_is_not_west_s() {
        let mut record = GatewayRecord::new(&spec("west"), "broker");
        record.metadata.namespace = Some("broker-east".into());
        let error = record.checked_spec("broker").unwrap_err();
        assert!(
            error
                .to_string()
                .contains("stored as broker-east/west, where cluster west cannot write"),
            "{error}"
        );
        let mut renamed = GatewayRecord::new(&spec("west"), "broker");
        renamed.metadata.name = Some("east".into());
        assert!(matches!(
            renamed.checked_spec("broker"),
            Err(GatewayRecordError::ForeignWriter { .. })
        ));
    }

    #[test]
    fn an_unreadable_spec_names_the_field() {
        let mut record = GatewayRecord::new(&spec("west"), "broker");
        record.spec["globalCidr"] = serde_json::json!("242.2.0.0/33");
        let error = record.checked_spec("broker").unwrap_err();
        assert!(
            matches!(&error, GatewayRecordError::Unreadable { reason, .. } if reason.contains("invalid IP address")),
            "{error}"
        );
    }
}

//! The hub cluster's manifests for a clusterset: the namespaces, ServiceAccounts, RBAC and
//! heartbeat Leases with which each member cluster can speak only for itself
//! (`clusterset-agent hub-manifests --cluster east --cluster west`).
//!
//! Isolation is plain RBAC, so it holds on every Kubernetes version:
//!
//! - each cluster's records live in its own namespace, `<broker>-<cluster>`
//!   ([`records_namespace`]), where only its ServiceAccount may create, patch and delete;
//! - every cluster's heartbeat Lease is created here, in the broker namespace, and each
//!   ServiceAccount may update only its own (`resourceNames`; RBAC cannot limit `create` by
//!   name, which is why the Leases are created by these manifests and not by the agents);
//! - every ServiceAccount may read every cluster's records (a ClusterRole for
//!   `exportrecords` only) and the Leases of the broker namespace.
//!
//! Because only `east` can write in `<broker>-east`, a record's namespace tells the agents who
//! could have written it, and they ignore any record stored elsewhere
//! ([`record_writer_check`](crate::broker::record_writer_check)).
//!
//! ```
//! use mcs_controller::hub::HubLayout;
//! use mcs_types::ClusterId;
//! let layout = HubLayout::new("clusterset-broker", vec![ClusterId::new("east")?, ClusterId::new("west")?])?;
//! let documents = layout.manifests();
//! assert!(documents.iter().any(|d| d["kind"] == "Namespace" && d["metadata"]["name"] == "clusterset-broker-east"));
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeSet;

use mcs_types::ClusterId;
use serde_json::{Value, json};

use crate::broker::{
    CLUSTER_ID_LABEL, GATEWAY_PLURAL, GROUP, PLURAL, lease_name, records_namespace,
};

/// Label on everything these manifests create, so that `kubectl get ... -l` finds it.
pub const PART_OF: (&str, &str) = (
    mcs_types::labels::APP_PART_OF_LABEL,
    mcs_types::labels::CLUSTERSET_PART_OF,
);
/// The ClusterRole that lets every member read every cluster's records.
pub const RECORDS_READER: &str = "clusterset-agent-records-reader";
/// The Role in the broker namespace that lets every member read the heartbeat Leases.
pub const HEARTBEAT_READER: &str = "clusterset-agent-heartbeat-reader";
/// The prefix of the Role (and RoleBinding) in the broker namespace that lets one cluster update
/// its own heartbeat Lease: `clusterset-agent-lease-<cluster>`. No shared object's name starts
/// with it, so no cluster id can make the two collide.
pub const LEASE_WRITER_PREFIX: &str = "clusterset-agent-lease-";
/// The Role in each records namespace that lets its cluster publish and withdraw records.
pub const PUBLISHER: &str = "clusterset-agent-publisher";
/// The Role in the broker namespace that lets every member write records there: only with
/// [`HubLayout::legacy_shared_records`], during the upgrade from the shared namespace.
pub const SHARED_RECORDS_WRITER: &str = "clusterset-agent-shared-records-writer";

/// The ServiceAccount on the hub whose credentials `cluster`'s agent uses.
pub fn service_account(cluster: &ClusterId) -> String {
    format!("agent-{cluster}")
}

/// The user name with which the hub's API server authenticates `cluster`'s agent (its
/// ServiceAccount in the broker namespace), as RBAC refusals name it.
///
/// ```
/// use mcs_controller::hub::service_account_user;
/// use mcs_types::ClusterId;
/// assert_eq!(
///     service_account_user("clusterset-broker", &ClusterId::new("east")?),
///     "system:serviceaccount:clusterset-broker:agent-east"
/// );
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn service_account_user(broker_namespace: &str, cluster: &ClusterId) -> String {
    format!(
        "system:serviceaccount:{broker_namespace}:{}",
        service_account(cluster)
    )
}

/// The hub's layout could not hold these clusters.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HubLayoutError {
    /// No cluster was named.
    #[error(
        "no member cluster: name each one with --cluster (for example --cluster east --cluster west)"
    )]
    NoClusters,
    /// A cluster was named twice.
    #[error(
        "cluster {0} is named twice, or has the same records namespace as another: name each member cluster once"
    )]
    Duplicate(ClusterId),
    /// The broker namespace is not a valid namespace name.
    #[error("namespace {namespace:?} (for {purpose}) is not a valid namespace name: {problem}")]
    Namespace {
        /// The name.
        namespace: String,
        /// What it would hold.
        purpose: String,
        /// What is wrong.
        problem: String,
    },
}

/// The hub of a clusterset: the broker namespace and its member clusters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HubLayout {
    broker_namespace: String,
    clusters: Vec<ClusterId>,
    legacy_shared_records: bool,
}

fn check_namespace(namespace: &str, purpose: impl Into<String>) -> Result<(), HubLayoutError> {
    match mcs_types::names::dns_label_problem(namespace, false) {
        Some(problem) => Err(HubLayoutError::Namespace {
            namespace: namespace.to_owned(),
            purpose: purpose.into(),
            problem,
        }),
        None => Ok(()),
    }
}

impl HubLayout {
    /// The layout for `clusters` under `broker_namespace`; every namespace name it needs is
    /// checked.
    pub fn new(broker_namespace: &str, clusters: Vec<ClusterId>) -> Result<Self, HubLayoutError> {
        if clusters.is_empty() {
            return Err(HubLayoutError::NoClusters);
        }
        check_namespace(broker_namespace, "the broker's heartbeat Leases")?;
        let mut seen = BTreeSet::new();
        for cluster in &clusters {
            // Two ids with one records namespace (the same id twice, or a hash collision of
            // two long ids) would let each write the other's records.
            if !seen.insert(records_namespace(broker_namespace, cluster)) {
                return Err(HubLayoutError::Duplicate(cluster.clone()));
            }
        }
        Ok(Self {
            broker_namespace: broker_namespace.to_owned(),
            clusters,
            legacy_shared_records: false,
        })
    }

    /// Also let every member write records in the shared broker namespace, as before each
    /// cluster had its own: for the upgrade's first two steps only (docs/clusterset-agent.md).
    pub fn legacy_shared_records(mut self, allowed: bool) -> Self {
        self.legacy_shared_records = allowed;
        self
    }

    fn labels(&self, cluster: Option<&ClusterId>) -> Value {
        let mut labels = json!({ PART_OF.0: PART_OF.1 });
        if let Some(cluster) = cluster {
            labels[CLUSTER_ID_LABEL] = json!(cluster.to_string());
        }
        labels
    }

    fn subjects(&self) -> Value {
        Value::Array(
            self.clusters
                .iter()
                .map(|c| {
                    json!({
                        "kind": "ServiceAccount",
                        "name": service_account(c),
                        "namespace": self.broker_namespace,
                    })
                })
                .collect(),
        )
    }

    /// A Role in `namespace` (a ClusterRole without one) named `name` with `rules`, and the
    /// binding of the same name that grants it to `subjects`.
    fn role_and_binding(
        &self,
        namespace: Option<&str>,
        name: &str,
        rules: Value,
        subjects: Value,
        cluster: Option<&ClusterId>,
    ) -> [Value; 2] {
        let mut metadata = json!({"name": name, "labels": self.labels(cluster)});
        if let Some(namespace) = namespace {
            metadata["namespace"] = json!(namespace);
        }
        let (role, binding) = match namespace {
            Some(_) => ("Role", "RoleBinding"),
            None => ("ClusterRole", "ClusterRoleBinding"),
        };
        [
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": role,
                "metadata": metadata,
                "rules": rules,
            }),
            json!({
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": binding,
                "metadata": metadata,
                "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": role, "name": name},
                "subjects": subjects,
            }),
        ]
    }

    /// Every object, in the order to apply them (namespaces first).
    pub fn manifests(&self) -> Vec<Value> {
        let broker = self.broker_namespace.as_str();
        let mut documents = vec![json!({
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"name": broker, "labels": self.labels(None)},
        })];
        for cluster in &self.clusters {
            documents.push(json!({
                "apiVersion": "v1",
                "kind": "Namespace",
                "metadata": {
                    "name": records_namespace(broker, cluster),
                    "labels": self.labels(Some(cluster)),
                },
            }));
        }
        let read = json!(["get", "list", "watch"]);
        let write = json!(["get", "list", "watch", "create", "patch", "delete"]);
        let records = |verbs: &Value| json!([{"apiGroups": [GROUP], "resources": [PLURAL, GATEWAY_PLURAL], "verbs": verbs}]);
        documents.extend(self.role_and_binding(
            None,
            RECORDS_READER,
            records(&read),
            self.subjects(),
            None,
        ));
        documents.extend(self.role_and_binding(
            Some(broker),
            HEARTBEAT_READER,
            json!([{"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": read}]),
            self.subjects(),
            None,
        ));
        if self.legacy_shared_records {
            documents.extend(self.role_and_binding(
                Some(broker),
                SHARED_RECORDS_WRITER,
                records(&write),
                self.subjects(),
                None,
            ));
        }
        for cluster in &self.clusters {
            let account = service_account(cluster);
            let lease = lease_name(cluster);
            let own = records_namespace(broker, cluster);
            let me = json!([{"kind": "ServiceAccount", "name": account, "namespace": broker}]);
            documents.push(json!({
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": account, "namespace": broker, "labels": self.labels(Some(cluster))},
            }));
            documents.push(json!({
                "apiVersion": "coordination.k8s.io/v1",
                "kind": "Lease",
                "metadata": {"name": lease, "namespace": broker, "labels": self.labels(Some(cluster))},
            }));
            // Not `clusterset-agent-heartbeat-<cluster>`: a cluster named `reader` would be
            // the shared HEARTBEAT_READER and overwrite it. No shared name starts with this.
            documents.extend(self.role_and_binding(
                Some(broker),
                &format!("{LEASE_WRITER_PREFIX}{cluster}"),
                json!([{
                    "apiGroups": ["coordination.k8s.io"],
                    "resources": ["leases"],
                    "resourceNames": [lease],
                    "verbs": ["get", "update", "patch"],
                }]),
                me.clone(),
                Some(cluster),
            ));
            documents.extend(self.role_and_binding(
                Some(&own),
                PUBLISHER,
                records(&write),
                me,
                Some(cluster),
            ));
        }
        documents
    }

    /// [`Self::manifests`] as one multi-document YAML stream, with a header that says how it
    /// was made.
    pub fn to_yaml(&self, command: &str) -> Result<String, serde_saphyr::ser::Error> {
        let mut out = format!(
            "# Generated by `{command}`; regenerate instead of editing.\n# Hub cluster of a clusterset: apply after the ExportRecord CRD (clusterset-agent crd).\n"
        );
        for document in self.manifests() {
            out.push_str("---\n");
            out.push_str(&serde_saphyr::to_string(&document)?);
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cluster(id: &str) -> ClusterId {
        ClusterId::new(id).unwrap()
    }

    #[test]
    fn no_cluster_id_makes_a_per_cluster_object_collide_with_a_shared_one() {
        // Cluster ids equal to the tails of the shared names.
        let ids = [
            "reader",
            "records-reader",
            "heartbeat-reader",
            "shared-records-writer",
            "publisher",
        ];
        let layout = HubLayout::new("broker", ids.iter().map(|id| cluster(id)).collect())
            .unwrap()
            .legacy_shared_records(true);
        let mut seen = BTreeSet::new();
        for document in layout.manifests() {
            let key = (
                document["kind"].to_string(),
                document["metadata"]["namespace"].to_string(),
                document["metadata"]["name"].to_string(),
            );
            assert!(seen.insert(key.clone()), "{key:?} is generated twice");
        }
    }

    #[test]
    fn bad_layouts_are_refused_with_the_fix() {
        assert_eq!(
            HubLayout::new("broker", vec![]),
            Err(HubLayoutError::NoClusters)
        );
        assert_eq!(
            HubLayout::new("broker", vec![cluster("east"), cluster("east")]),
            Err(HubLayoutError::Duplicate(cluster("east")))
        );
        let error = HubLayout::new("Broker", vec![cluster("east")]).unwrap_err();
        assert!(error.to_string().contains("\"Broker\""), "{error}");
    }
}

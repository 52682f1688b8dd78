//! Whether a stored object already is what the core would write: the comparisons that keep
//! steady state free of writes and recognise the echo of a write in flight.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::Service;
use k8s_openapi::api::discovery::v1::EndpointSlice;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use mcs_types::{ServiceExportStatus, ServiceImportStatus};

use super::STALE_CLUSTERS_CONDITION;

pub(super) const IMPORT_CONDITIONS: [&str; 2] = ["Ready", STALE_CLUSTERS_CONDITION];

pub(super) const EXPORT_CONDITIONS: [&str; 3] = ["Valid", "Conflict", "Ready"];

pub(super) fn subset(
    desired: Option<&BTreeMap<String, String>>,
    observed: Option<&BTreeMap<String, String>>,
) -> bool {
    desired
        .into_iter()
        .flatten()
        .all(|(k, v)| observed.and_then(|o| o.get(k)) == Some(v))
}

pub(super) fn same_condition(a: &Condition, b: &Condition) -> bool {
    a.type_ == b.type_ && a.status == b.status && a.reason == b.reason && a.message == b.message
}

pub(super) fn conditions_match(
    desired: &[Condition],
    observed: &[Condition],
    owned: &[&str],
) -> bool {
    let ours: Vec<&Condition> = observed
        .iter()
        .filter(|c| owned.contains(&c.type_.as_str()))
        .collect();
    ours.len() == desired.len()
        && desired
            .iter()
            .all(|d| ours.iter().any(|o| same_condition(d, o)))
}

/// Whether a managedFields entry is our field manager's server-side apply of the main resource
/// (not of a subresource), the only entries [`applied_keys`] reads.
fn is_our_apply(
    entry: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry,
) -> bool {
    entry.manager.as_deref() == Some(crate::write::FIELD_MANAGER)
        && entry.operation.as_deref() == Some("Apply")
        && entry.subresource.as_deref().unwrap_or("").is_empty()
}

/// The label (`f:labels`) or annotation (`f:annotations`) keys that our field manager set by
/// server-side apply on the main resource, from `metadata.managedFields`.
pub(super) fn applied_keys<'a>(
    meta: &'a k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    field: &str,
) -> Vec<&'a str> {
    meta.managed_fields
        .iter()
        .flatten()
        .filter(|e| is_our_apply(e))
        .filter_map(|e| {
            e.fields_v1
                .as_ref()?
                .0
                .get("f:metadata")?
                .get(field)?
                .as_object()
        })
        .flat_map(|fields| fields.keys().filter_map(|k| k.strip_prefix("f:")))
        .collect()
}

/// Trims `meta.managedFields` to what [`applied_keys`] reads, before an object is cached: our
/// field manager's `Apply` entries on the main resource, each with only its label and
/// annotation keys. Every field of a server-side applied object is listed again in its
/// managedFields, once per manager, so they are about half of what a cached object holds, and
/// the agent caches every Service, ServiceExport, EndpointSlice and record it watches.
pub(super) fn trim_managed_fields(
    meta: &mut k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
) {
    let Some(entries) = meta.managed_fields.take() else {
        return;
    };
    let kept: Vec<_> = entries
        .into_iter()
        .filter(is_our_apply)
        .filter_map(|e| {
            let metadata = e.fields_v1.as_ref()?.0.get("f:metadata")?.as_object()?;
            let keys: serde_json::Map<String, serde_json::Value> = ["f:labels", "f:annotations"]
                .into_iter()
                .filter_map(|field| Some((field.to_owned(), metadata.get(field)?.clone())))
                .collect();
            if keys.is_empty() {
                return None;
            }
            Some(
                k8s_openapi::apimachinery::pkg::apis::meta::v1::ManagedFieldsEntry {
                    manager: e.manager,
                    operation: e.operation,
                    fields_v1: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::FieldsV1(
                        serde_json::json!({ "f:metadata": keys }),
                    )),
                    ..Default::default()
                },
            )
        })
        .collect();
    meta.managed_fields = (!kept.is_empty()).then_some(kept);
}

/// Whether every key we applied earlier is still wanted (else the apply must run again, and
/// server-side apply removes the keys we no longer send).
pub(super) fn no_stale_keys(
    desired: Option<&BTreeMap<String, String>>,
    observed: &k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta,
    field: &str,
) -> bool {
    applied_keys(observed, field)
        .into_iter()
        .all(|k| desired.is_some_and(|d| d.contains_key(k)))
}

/// Whether the stored ServiceImport carries the desired spec, labels and annotations, and no
/// label or annotation we applied before and no longer want (a removed exported label).
pub fn import_spec_matches(desired: &ServiceImport, observed: &ServiceImport) -> bool {
    let mut observed_spec = observed.spec.clone();
    observed_spec.unknown_fields = desired.spec.unknown_fields.clone();
    observed_spec == desired.spec
        && subset(
            desired.metadata.labels.as_ref(),
            observed.metadata.labels.as_ref(),
        )
        && subset(
            desired.metadata.annotations.as_ref(),
            observed.metadata.annotations.as_ref(),
        )
        && no_stale_keys(
            desired.metadata.labels.as_ref(),
            &observed.metadata,
            "f:labels",
        )
        && no_stale_keys(
            desired.metadata.annotations.as_ref(),
            &observed.metadata,
            "f:annotations",
        )
}

/// Whether the stored ServiceImport carries the desired status (clusters and our conditions).
pub fn import_status_matches(desired: &ServiceImport, observed: &ServiceImport) -> bool {
    let empty = ServiceImportStatus::default();
    let d = desired.status.as_ref().unwrap_or(&empty);
    let o = observed.status.as_ref().unwrap_or(&empty);
    d.cluster_ids().eq(o.cluster_ids())
        && conditions_match(&d.conditions, &o.conditions, &IMPORT_CONDITIONS)
}

/// Whether the stored EndpointSlice carries the desired endpoints, ports and labels.
pub fn slice_matches(desired: &EndpointSlice, observed: &EndpointSlice) -> bool {
    desired.address_type == observed.address_type
        && desired.endpoints == observed.endpoints
        && desired.ports == observed.ports
        && subset(
            desired.metadata.labels.as_ref(),
            observed.metadata.labels.as_ref(),
        )
}

/// Whether the stored Service is the desired derived Service: our labels, and the ports,
/// `externalIPs` and session affinity we set (the API server's defaults, such as the cluster IP,
/// are left out of the comparison).
pub fn derived_service_matches(desired: &Service, observed: &Service) -> bool {
    let (Some(d), Some(o)) = (desired.spec.as_ref(), observed.spec.as_ref()) else {
        return false;
    };
    let ports = |spec: &k8s_openapi::api::core::v1::ServiceSpec| -> Vec<(Option<String>, String, Option<String>, i32)> {
        spec.ports
            .iter()
            .flatten()
            .map(|p| {
                (
                    p.name.clone(),
                    p.protocol.clone().unwrap_or_else(|| "TCP".to_owned()),
                    p.app_protocol.clone(),
                    p.port,
                )
            })
            .collect()
    };
    subset(
        desired.metadata.labels.as_ref(),
        observed.metadata.labels.as_ref(),
    ) && ports(d) == ports(o)
        && d.external_ips == o.external_ips
        && o.selector.as_ref().is_none_or(BTreeMap::is_empty)
        && d.type_.as_deref().unwrap_or("ClusterIP") == o.type_.as_deref().unwrap_or("ClusterIP")
        && d.session_affinity.as_deref().unwrap_or("None")
            == o.session_affinity.as_deref().unwrap_or("None")
        // The API server fills in ClientIP's default timeout when none is sent.
        && (d.session_affinity_config.is_none()
            || d.session_affinity_config == o.session_affinity_config)
}

pub(super) fn export_status_matches(
    desired: &ServiceExportStatus,
    observed: &ServiceExport,
) -> bool {
    let empty = ServiceExportStatus::default();
    let o = observed.status.as_ref().unwrap_or(&empty);
    conditions_match(&desired.conditions, &o.conditions, &EXPORT_CONDITIONS)
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{FieldsV1, ManagedFieldsEntry};
    use mcs_types::ServiceImportType;

    fn import(labels: &[(&str, &str)]) -> ServiceImport {
        let mut import = ServiceImport::new(
            "web",
            mcs_types::ServiceImportSpec::new(ServiceImportType::ClusterSetIP, Vec::new()),
        );
        import.metadata.namespace = Some("shop".into());
        if !labels.is_empty() {
            import.metadata.labels = Some(
                labels
                    .iter()
                    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
                    .collect(),
            );
        }
        import
    }

    fn managed(manager: &str, label: &str) -> ManagedFieldsEntry {
        ManagedFieldsEntry {
            manager: Some(manager.into()),
            operation: Some("Apply".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1({
                let mut labels = serde_json::Map::new();
                labels.insert(format!("f:{label}"), serde_json::json!({}));
                serde_json::json!({"f:metadata": {"f:labels": labels}})
            })),
            ..Default::default()
        }
    }

    #[test]
    fn labels_match_as_a_subset_unless_we_applied_one_no_longer_wanted() {
        // (desired labels, stored labels, managers of stored labels, matches?)
        type Case<'a> = (
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
            &'a [(&'a str, &'a str)],
            bool,
        );
        let cases: [Case<'_>; 5] = [
            (
                &[("team", "a")],
                &[("team", "a")],
                &[("clusterset-agent", "team")],
                true,
            ),
            (
                &[("team", "a")],
                &[("team", "b")],
                &[("clusterset-agent", "team")],
                false,
            ),
            // Someone else's label on the import is not ours to remove.
            (&[], &[("owner", "x")], &[("kubectl", "owner")], true),
            // An exported label was removed: ours, so apply again (SSA then drops it).
            (
                &[],
                &[("team", "a")],
                &[("clusterset-agent", "team")],
                false,
            ),
            (
                &[("tier", "1")],
                &[("tier", "1"), ("team", "a")],
                &[("clusterset-agent", "team")],
                false,
            ),
        ];
        for (desired, stored, managers, expected) in cases {
            let desired = import(desired);
            let mut observed = import(stored);
            observed.metadata.managed_fields =
                Some(managers.iter().map(|(m, l)| managed(m, l)).collect());
            assert_eq!(
                import_spec_matches(&desired, &observed),
                expected,
                "desired {:?} stored {:?} managers {managers:?}",
                desired.metadata.labels,
                observed.metadata.labels
            );
        }
    }

    /// The trimmed managedFields keep what `applied_keys` reads, and nothing else: another
    /// manager's entries, our status (subresource) and Update entries, and the fields of ours
    /// that are not labels or annotations are dropped.
    #[test]
    fn trimming_managed_fields_keeps_our_applied_label_and_annotation_keys_only() {
        let ours = ManagedFieldsEntry {
            manager: Some(crate::write::FIELD_MANAGER.into()),
            operation: Some("Apply".into()),
            api_version: Some("multicluster.x-k8s.io/v1beta1".into()),
            fields_type: Some("FieldsV1".into()),
            fields_v1: Some(FieldsV1(serde_json::json!({
                "f:metadata": {
                    "f:labels": {"f:team": {}},
                    "f:annotations": {"f:note": {}},
                    "f:ownerReferences": {"k:{\"uid\":\"1\"}": {}},
                },
                "f:spec": {"f:ports": {}, "f:type": {}},
            }))),
            ..Default::default()
        };
        let our_status = ManagedFieldsEntry {
            subresource: Some("status".into()),
            fields_v1: Some(FieldsV1(
                serde_json::json!({"f:status": {"f:clusters": {}}}),
            )),
            ..ours.clone()
        };
        let our_update = ManagedFieldsEntry {
            operation: Some("Update".into()),
            ..ours.clone()
        };
        let mut observed = import(&[("team", "a"), ("tier", "1")]);
        observed.metadata.managed_fields = Some(vec![
            managed("kubectl", "tier"),
            ours,
            our_status,
            our_update,
        ]);
        let before: Vec<String> = applied_keys(&observed.metadata, "f:labels")
            .into_iter()
            .chain(applied_keys(&observed.metadata, "f:annotations"))
            .map(str::to_owned)
            .collect();

        trim_managed_fields(&mut observed.metadata);

        let kept = observed.metadata.managed_fields.clone().unwrap();
        assert_eq!(kept.len(), 1, "{kept:?}");
        assert_eq!(
            kept[0].fields_v1.as_ref().unwrap().0,
            serde_json::json!({"f:metadata": {
                "f:labels": {"f:team": {}},
                "f:annotations": {"f:note": {}},
            }})
        );
        let after: Vec<&str> = applied_keys(&observed.metadata, "f:labels")
            .into_iter()
            .chain(applied_keys(&observed.metadata, "f:annotations"))
            .collect();
        assert_eq!(before, ["team", "note"]);
        assert_eq!(after, before);

        // An object none of whose entries are ours keeps none.
        let mut foreign = import(&[("tier", "1")]);
        foreign.metadata.managed_fields = Some(vec![managed("kubectl", "tier")]);
        trim_managed_fields(&mut foreign.metadata);
        assert_eq!(foreign.metadata.managed_fields, None);
    }
}

//! OSDs gone whose objects remain: which they are, since when they are gone, and — once
//! [`Config::removed_osd_grace`](crate::config::Config::removed_osd_grace) has passed — the
//! deletes of their ServiceExport and Services.

use std::collections::{BTreeMap, BTreeSet};

use ceph_address_plan::rook::label;
use ceph_address_plan::{Daemon, Plan};
use k8s_openapi::api::core::v1::Service;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{ObjectMeta, OwnerReference, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use mcs_ceph_api::RemovedOsd;
use mcs_types::v1beta1::ServiceExport;

use super::Context;
use super::writes::{Write, managed_by_us};
use crate::snapshot::{McsVersion, Snapshot};

/// OSDs without a Deployment whose Service or ServiceExport the operator made (managed by its
/// field manager, owned by this CephCluster) remain. Each is recorded with the time it was
/// first seen gone, and once [`Config::removed_osd_grace`] has passed its ServiceExport, then
/// its Services, are deleted by uid. An OSD whose Deployment comes back, or whose objects are
/// all gone, leaves the list. The OSDs considered are those the operator knows of: its OSD
/// Services, the previous status's daemons and removed OSDs. Nothing is deleted for an OSD
/// that has any Deployment, parsed or not.
///
/// [`Config::removed_osd_grace`]: crate::config::Config::removed_osd_grace
pub(super) fn removed_osds(
    snapshot: &Snapshot,
    context: &Context,
    plan: &Plan,
    mcs_version: McsVersion,
    writes: &mut Vec<Write>,
) -> Vec<RemovedOsd> {
    let deployment_ids = osd_deployment_ids(snapshot);
    let since_before = removed_since(context);
    let mut removed = Vec::new();
    let (mut export_deletes, mut service_deletes) = (Vec::new(), Vec::new());
    for id in known_osds(snapshot, context) {
        if deployment_ids.contains(id.to_string().as_str()) {
            continue;
        }
        let Some(remaining) = RemainingObjects::of(snapshot, context, plan, id) else {
            continue;
        };
        let entry = RemovedOsd {
            name: Daemon::Osd(id).to_string(),
            since: since_before
                .get(&id)
                .map_or(Time(context.now), |t| (*t).clone()),
        };
        if removal_due(context, &entry).is_some_and(|at| at <= context.now) {
            export_deletes.extend(remaining.export_delete(context, mcs_version));
            service_deletes.extend(remaining.service_deletes(context));
        }
        removed.push(entry);
    }
    // The export goes first: an export without its Service is invalid, a Service without an
    // export is merely unexported.
    writes.extend(export_deletes);
    writes.extend(service_deletes);
    removed
}

/// When the objects of removed OSDs are deleted.
pub(super) fn removal_due(context: &Context, removed: &RemovedOsd) -> Option<Timestamp> {
    let grace = SignedDuration::try_from(context.config.removed_osd_grace).ok()?;
    removed.since.0.checked_add(grace).ok()
}

/// Whether the operator made this object for this CephCluster: managed by its field manager
/// and owned by the cluster.
fn ours(context: &Context, meta: &ObjectMeta) -> bool {
    managed_by_us(meta) && owned_by(meta, context.owner.as_ref())
}

fn owned_by(meta: &ObjectMeta, owner: Option<&OwnerReference>) -> bool {
    owner.is_some_and(|owner| {
        meta.owner_references
            .iter()
            .flatten()
            .any(|o| o.uid == owner.uid)
    })
}

/// The OSD id of a daemon name (`osd.7`).
fn osd_id(name: &str) -> Option<u32> {
    name.strip_prefix("osd.")
        .and_then(|id| id.parse::<u32>().ok())
}

/// The OSD ids (as labelled) of every Deployment of an OSD, parsed or not.
fn osd_deployment_ids(snapshot: &Snapshot) -> BTreeSet<&str> {
    snapshot
        .deployments
        .iter()
        .filter_map(|d| d.metadata.labels.as_ref()?.get(label::OSD_ID))
        .map(String::as_str)
        .collect()
}

/// The OSDs the operator knows of: those of its OSD Services, and the previous status's
/// daemons and removed OSDs.
fn known_osds(snapshot: &Snapshot, context: &Context) -> BTreeSet<u32> {
    let mut known: BTreeSet<u32> = snapshot
        .services
        .iter()
        .filter(|s| ours(context, &s.metadata))
        .filter_map(|s| {
            let labels = s.metadata.labels.as_ref()?;
            (labels.get(label::DAEMON_TYPE)? == "osd")
                .then(|| labels.get(label::DAEMON_ID)?.parse::<u32>().ok())
                .flatten()
        })
        .collect();
    let prior = context.prior.as_ref();
    known.extend(
        prior
            .iter()
            .flat_map(|p| p.daemons.iter().map(|d| d.name.as_str()))
            .chain(
                prior
                    .iter()
                    .flat_map(|p| p.removed_osds.iter().map(|r| r.name.as_str())),
            )
            .filter_map(osd_id),
    );
    known
}

/// Since when each OSD the previous status listed as removed is gone.
fn removed_since(context: &Context) -> BTreeMap<u32, &Time> {
    context
        .prior
        .iter()
        .flat_map(|p| p.removed_osds.iter())
        .filter_map(|r| Some((osd_id(&r.name)?, &r.since)))
        .collect()
}

/// The objects the operator made for an OSD that remain: its Services (the OSD's and the
/// export's) and its ServiceExport.
struct RemainingObjects<'a> {
    /// The name of the OSD's exported Service (and of its ServiceExport).
    exported: String,
    services: Vec<&'a Service>,
    export: Option<&'a ServiceExport>,
}

impl<'a> RemainingObjects<'a> {
    /// The objects of OSD `id` that remain; `None` when none do.
    fn of(snapshot: &'a Snapshot, context: &Context, plan: &Plan, id: u32) -> Option<Self> {
        let daemon = Daemon::Osd(id);
        let exported = plan.exported_service_name(&daemon);
        let service_names = [daemon.service_name(), exported.clone()];
        let services: Vec<&Service> = snapshot
            .services
            .iter()
            .filter(|s| {
                s.metadata
                    .name
                    .as_ref()
                    .is_some_and(|n| service_names.contains(n))
                    && ours(context, &s.metadata)
            })
            .collect();
        let export = snapshot.exports.iter().find(|e| {
            e.metadata.name.as_deref() == Some(exported.as_str()) && ours(context, &e.metadata)
        });
        if services.is_empty() && export.is_none() {
            return None;
        }
        Some(Self {
            exported,
            services,
            export,
        })
    }

    /// The delete of the ServiceExport, by uid.
    fn export_delete(&self, context: &Context, mcs_version: McsVersion) -> Option<Write> {
        self.export.and_then(|e| {
            Some(Write::DeleteServiceExport {
                namespace: context.namespace.clone(),
                name: self.exported.clone(),
                uid: e.metadata.uid.clone()?,
                version: mcs_version,
            })
        })
    }

    /// The deletes of the Services, by uid.
    fn service_deletes(&self, context: &Context) -> impl Iterator<Item = Write> + '_ {
        let namespace = context.namespace.clone();
        self.services.iter().filter_map(move |s| {
            Some(Write::DeleteService {
                namespace: namespace.clone(),
                name: s.metadata.name.clone()?,
                uid: s.metadata.uid.clone()?,
            })
        })
    }
}

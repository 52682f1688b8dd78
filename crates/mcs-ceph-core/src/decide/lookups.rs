//! The names to resolve, and what their answers make of the lookup records: a daemon is
//! looked up only when its lookup inputs (clusterset name, ServiceExport uid) changed since the
//! last successful lookup, or when its failed lookup is due for a retry; with
//! `--global-ip-source service-import` the ServiceImport's `spec.ips` are read instead.

use std::collections::BTreeMap;
use std::net::IpAddr;

use ceph_address_plan::{Daemon, IpFamily, Plan};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use mcs_ceph_api::LookupRecord;
use mcs_types::names::ClustersetName;
use mcs_types::v1beta1::{ServiceExport, ServiceImport};

use super::Context;
use super::exports::{ExportView, ObservedExport};
use crate::config::GlobalIpSource;

/// What the operator remembers of one daemon's global IP from one reconcile to the next: its
/// last lookup and the address it gave.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RememberedLookup {
    /// The last lookup (its inputs, and why it failed and when it is retried, if it did).
    pub record: LookupRecord,
    /// The global IP it gave, if it did.
    pub global_ip: Option<String>,
}

/// Per daemon (`osd.7`), what the operator remembers of its lookups: kept by the runtime
/// between reconciles ([`crate::Snapshot::lookups`] in, [`super::Outcome::lookups`] out), so
/// that the status need not carry every daemon's record.
pub type LookupMemory = BTreeMap<String, RememberedLookup>;

/// A clusterset name to resolve now, for one daemon.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LookupRequest {
    /// The daemon whose global IP it is.
    pub daemon: Daemon,
    /// The name.
    pub name: ClustersetName,
}

/// The answer to one [`LookupRequest`]: the addresses, or why there are none.
pub type LookupResult = (Daemon, Result<Vec<IpAddr>, String>);

/// What the exports of a plan say about lookups: each exported daemon's export as observed,
/// its lookup record, the lookups to make now and the global IPs already known.
#[derive(Debug, Default)]
pub(super) struct LookupPlan {
    pub(super) exports: BTreeMap<Daemon, ExportView>,
    pub(super) records: BTreeMap<Daemon, LookupRecord>,
    pub(super) lookups: Vec<LookupRequest>,
    pub(super) known_ips: Vec<(Daemon, IpAddr)>,
}

/// The lookups of `plan`'s exports: reuses the global IP of a daemon whose lookup inputs did
/// not change, keeps a failed lookup until its retry time, and asks for a lookup of every
/// other daemon whose export the MCS implementation has taken.
pub(super) fn plan_lookups(
    context: &Context,
    plan: &Plan,
    exports_by_name: &BTreeMap<&str, &ServiceExport>,
    imports_by_name: &BTreeMap<&str, &ServiceImport>,
    prior: &LookupMemory,
) -> LookupPlan {
    let family = plan.settings().ip_family;
    let mut exports = BTreeMap::new();
    let mut records = BTreeMap::new();
    let mut lookups = Vec::new();
    let mut known_ips = Vec::new();
    for desired in plan.service_exports() {
        let view = ExportView {
            observed: exports_by_name
                .get(desired.name.as_str())
                .map(|e| ObservedExport {
                    uid: e.metadata.uid.clone(),
                    status: e.status.clone(),
                }),
            name: desired.name.clone(),
        };
        let daemon = desired.daemon.clone();
        let export_uid = view.observed.as_ref().and_then(|e| e.uid.clone());
        let previous = prior.get(&daemon.to_string());
        match context.config.global_ip_source {
            GlobalIpSource::ServiceImport => {
                let ips = import_ips(imports_by_name.get(desired.name.as_str()), family);
                let record = LookupRecord {
                    name: format!("{}/{} (ServiceImport)", context.namespace, desired.name),
                    export_uid,
                    import_ips: ips.iter().map(ToString::to_string).collect(),
                    ..LookupRecord::default()
                };
                if view.observed.is_some()
                    && let Some(ip) = ips.first()
                {
                    known_ips.push((daemon.clone(), *ip));
                }
                records.insert(daemon.clone(), record);
            }
            GlobalIpSource::Dns => {
                // The planner validated every exported daemon's name.
                let Ok(name) = plan.lookup_name(&daemon) else {
                    continue;
                };
                let record = LookupRecord {
                    name: name.to_string(),
                    export_uid,
                    ..LookupRecord::default()
                };
                let same = previous.filter(|p| p.record.same_inputs(&record));
                let reused = same.and_then(|p| {
                    let ip = p.global_ip.as_deref()?.parse::<IpAddr>().ok()?;
                    (p.record.error.is_none() && family.admits(ip)).then_some(ip)
                });
                let retry_later = same.is_some_and(|p| {
                    let l = &p.record;
                    l.error.is_some() && l.retry_at.as_ref().is_some_and(|t| t.0 > context.now)
                });
                if let Some(ip) = reused {
                    known_ips.push((daemon.clone(), ip));
                    records.insert(daemon.clone(), record);
                } else if retry_later {
                    if let Some(p) = same {
                        records.insert(daemon.clone(), p.record.clone());
                    }
                } else if view.observed.is_some() && view.taken() {
                    lookups.push(LookupRequest {
                        daemon: daemon.clone(),
                        name,
                    });
                    // Keep the failure count across retries of the same inputs.
                    let mut pending = record;
                    if let Some(p) = same {
                        pending.failures = p.record.failures;
                    }
                    records.insert(daemon.clone(), pending);
                }
            }
        }
        exports.insert(daemon, view);
    }
    LookupPlan {
        exports,
        records,
        lookups,
        known_ips,
    }
}

pub(super) fn import_ips(import: Option<&&ServiceImport>, family: IpFamily) -> Vec<IpAddr> {
    import
        .and_then(|i| i.spec.parsed_ips().ok())
        .unwrap_or_default()
        .into_iter()
        .filter(|ip| family.admits(*ip))
        .collect()
}

pub(super) fn pick_address(addresses: &[IpAddr], family: IpFamily) -> Result<IpAddr, String> {
    addresses
        .iter()
        .copied()
        .find(|ip| family.admits(*ip))
        .ok_or_else(|| {
            format!(
                "the answer has no {family} address (got {})",
                addresses
                    .iter()
                    .map(ToString::to_string)
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        })
}

pub(super) fn retry_time(context: &Context, failures: u32) -> Time {
    let delay = context.config.retry.delay(failures);
    let delay = SignedDuration::try_from(delay).unwrap_or(SignedDuration::MAX);
    Time(context.now.checked_add(delay).unwrap_or(Timestamp::MAX))
}

/// Folds lookup `results` into the plan and the records: an admitted address becomes the
/// daemon's global IP; a failure (or an address the plan refuses) counts a failure and sets the
/// retry time.
pub(super) fn fold_results(
    context: &Context,
    plan: &mut Plan,
    records: &mut BTreeMap<Daemon, LookupRecord>,
    results: Vec<LookupResult>,
) {
    let family = plan.settings().ip_family;
    for (daemon, result) in results {
        let Some(record) = records.get_mut(&daemon) else {
            continue;
        };
        match result.and_then(|addresses| pick_address(&addresses, family)) {
            Ok(ip) => match plan.set_global_ip(&daemon, Some(ip)) {
                Ok(_) => {
                    record.error = None;
                    record.failures = 0;
                    record.retry_at = None;
                }
                Err(rejection) => {
                    record.failures += 1;
                    record.error = Some(rejection.to_string());
                    record.retry_at = Some(retry_time(context, record.failures));
                }
            },
            Err(error) => {
                record.failures += 1;
                record.error = Some(error);
                record.retry_at = Some(retry_time(context, record.failures));
            }
        }
    }
}

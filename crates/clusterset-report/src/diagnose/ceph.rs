//! The checks of the DNS answers and of the Ceph daemon behind a Rook Service: its global
//! IP, Rook's per-cluster name, the mon endpoints or the OSD's `--public-addr`, the monmap.

use std::net::{IpAddr, SocketAddr};

use ceph_address_plan::{Daemon, MonId, args, rook};
use mcs_types::ServiceImportType;
use mon_failover::MonMap;

use super::{
    CephFacts, Check, DnsAnswer, DnsFailure, DnsFailureKind, Facts, Hop, ips_text, same_set,
};
use crate::view::{mon_endpoints, slice_addresses, slice_clusters};

/// A failed lookup's likely cause and fix.
fn dns_failure(error: &DnsFailure, have_import: bool) -> (String, String) {
    match error.kind {
        DnsFailureKind::NxDomain if have_import => (
            "the DNS server does not have the name although the ServiceImport exists: it is not the clusterset DNS server of this cluster, or it is not fed from this cluster's imports".to_owned(),
            "ask the clusterset DNS server (--nameserver IP:PORT, clusterset-agent's --dns-listen), and make the cluster DNS forward clusterset.local to it (a CoreDNS stub zone)".to_owned(),
        ),
        DnsFailureKind::NxDomain => (
            "there is no ServiceImport, so there is no record".to_owned(),
            "fix the import first (above)".to_owned(),
        ),
        DnsFailureKind::NoData => (
            "the name exists without addresses: a ClusterSetIP import without IPs, or a headless service without ready endpoints".to_owned(),
            "fix the import's IPs or the endpoints (above)".to_owned(),
        ),
        DnsFailureKind::Refused => (
            "the server does not serve the clusterset zone".to_owned(),
            "ask the clusterset DNS server instead (--nameserver IP:PORT)".to_owned(),
        ),
        DnsFailureKind::NoAnswer => (
            "the nameserver did not answer".to_owned(),
            "check --nameserver and that the clusterset DNS server runs (clusterset-agent, or mcsctl dns serve)".to_owned(),
        ),
    }
}

pub(super) fn dns_check(facts: &Facts, answer: Option<&DnsAnswer>, checks: &mut Vec<Check>) {
    let Some(answer) = answer else {
        checks.push(Check::skip(Hop::Dns, "DNS answers the import", "not asked"));
        return;
    };
    let check = format!("{} answers the import", answer.name);
    let import = facts.import();
    let expected: Option<Vec<IpAddr>> = import.map(|i| match i.spec.type_ {
        ServiceImportType::ClusterSetIP => i.spec.parsed_ips().unwrap_or_default(),
        ServiceImportType::Headless => {
            slice_addresses(&facts.slices, &facts.namespace, &facts.name, None)
        }
    });
    checks.push(match (&answer.answer, expected) {
        (Err(error), _) => {
            let (cause, fix) = dns_failure(error, import.is_some());
            Check::fail(Hop::Dns, check, error.to_string(), cause, fix)
        }
        (Ok(found), None) => Check::skip(
            Hop::Dns,
            check,
            format!("answers {}, but there is no ServiceImport to compare", ips_text(found)),
        ),
        (Ok(found), Some(expected)) if same_set(found, &expected) => {
            Check::pass(Hop::Dns, check, ips_text(found))
        }
        (Ok(found), Some(expected)) => Check::fail(
            Hop::Dns,
            check,
            format!("answers {}, the import has {}", ips_text(found), ips_text(&expected)),
            "the DNS data differ from this cluster's ServiceImport: a stale answer, or a server fed from another cluster",
            "make sure --nameserver is this cluster's clusterset DNS server, and ask again after the records' TTL",
        ),
    });
}

/// The checks of the Ceph daemon behind a Rook Service: its global IP, the per-cluster name's
/// answer (`per_cluster`, when asked), and what the mon or the OSD advertises.
pub(super) fn ceph_checks(facts: &Facts, per_cluster: Option<&DnsAnswer>, checks: &mut Vec<Check>) {
    let Some(ceph) = &facts.ceph else {
        return;
    };
    let Some(global_ips) = global_ips_check(facts, &ceph.daemon, checks) else {
        return;
    };
    if let Some(answer) = per_cluster {
        checks.push(per_cluster_dns_check(answer, &global_ips));
    }
    let ns = &facts.namespace;
    match &ceph.daemon {
        Daemon::Mon(id) => {
            checks.push(mon_endpoints_entry_check(ceph, id, &global_ips, ns));
            checks.push(monmap_check(
                ceph.monmap.as_ref(),
                id.as_str(),
                &global_ips,
                ns,
            ));
        }
        Daemon::Osd(id) => checks.push(osd_public_addr_check(ceph, *id, &global_ips, ns)),
    }
}

/// Whether `daemon` has a global IP (an address in this cluster's EndpointSlice of the
/// service): its global IPs, or `None` (the check skipped or failed).
fn global_ips_check(
    facts: &Facts,
    daemon: &Daemon,
    checks: &mut Vec<Check>,
) -> Option<Vec<IpAddr>> {
    let ns = &facts.namespace;
    let global = format!("{daemon} has a global IP");
    let Some(cluster_id) = facts.cluster_id() else {
        checks.push(Check::skip(
            Hop::Ceph,
            global,
            format!(
                "no CephCluster in {ns} with spec.network.multiClusterService enabled and a clusterID: {daemon} uses its cluster IP"
            ),
        ));
        return None;
    };
    let global_ips = slice_addresses(&facts.slices, ns, &facts.name, Some(&cluster_id));
    if global_ips.is_empty() {
        let seen = slice_clusters(&facts.slices, ns, &facts.name);
        checks.push(Check::fail(
            Hop::Ceph,
            global,
            format!(
                "no ready address in an EndpointSlice of {} from cluster {cluster_id} (slices from: {})",
                facts.name,
                if seen.is_empty() { "none".to_owned() } else { seen.join(", ") }
            ),
            "the MCS agent has not published this cluster's endpoint: no global IP allocated yet, or the export is not Ready",
            "check the ServiceExport's Ready message and clusterset-agent's --global-cidr",
        ));
        return None;
    }
    checks.push(Check::pass(
        Hop::Ceph,
        global,
        format!(
            "{} (EndpointSlice from cluster {cluster_id})",
            ips_text(&global_ips)
        ),
    ));
    Some(global_ips)
}

/// Whether the per-cluster name's `answer` is the daemon's `global_ips`.
fn per_cluster_dns_check(answer: &DnsAnswer, global_ips: &[IpAddr]) -> Check {
    let check = format!("{} answers the global IP", answer.name);
    match &answer.answer {
        Ok(found) if same_set(found, global_ips) => Check::pass(Hop::Ceph, check, ips_text(found)),
        Ok(found) => Check::fail(
            Hop::Ceph,
            check,
            format!(
                "answers {}, the global IP is {}",
                ips_text(found),
                ips_text(global_ips)
            ),
            "the DNS data differ from this cluster's EndpointSlice: a stale answer, or a server fed from another cluster",
            "make sure --nameserver is this cluster's clusterset DNS server, and ask again after the records' TTL",
        ),
        Err(failure) if failure.kind == DnsFailureKind::NxDomain => Check::fail(
            Hop::Ceph,
            check,
            failure.to_string(),
            "the DNS server does not answer per-cluster names (Rook resolves them; the MCS DNS specification leaves them out)",
            "run the clusterset DNS server with Lighthouse names: clusterset-agent --lighthouse-names (or mcsctl dns serve --lighthouse)",
        ),
        Err(error) => {
            let (cause, fix) = dns_failure(error, true);
            Check::fail(Hop::Ceph, check, error.to_string(), cause, fix)
        }
    }
}

/// Whether `rook-ceph-mon-endpoints` has mon `id` at one of its `global_ips`.
fn mon_endpoints_entry_check(
    ceph: &CephFacts,
    id: &MonId,
    global_ips: &[IpAddr],
    ns: &str,
) -> Check {
    let check = format!(
        "{} has mon {id} at the global IP",
        rook::MON_ENDPOINTS_CONFIG_MAP
    );
    let entry = ceph
        .mon_endpoints
        .as_ref()
        .map(|config_map| mon_endpoints(config_map).remove(id.as_str()));
    match entry {
        None => Check::fail(
            Hop::Ceph,
            check,
            format!("no ConfigMap {ns}/{}", rook::MON_ENDPOINTS_CONFIG_MAP),
            "Rook has not created the cluster's mons in this namespace",
            "check the CephCluster's status and the Rook operator's logs",
        ),
        Some(entry) => mon_endpoints_check(check, id.as_str(), entry, global_ips, ns),
    }
}

/// Whether OSD `id` advertises one of its `global_ips` (its Deployment's `--public-addr`).
fn osd_public_addr_check(ceph: &CephFacts, id: u32, global_ips: &[IpAddr], ns: &str) -> Check {
    let check = format!("osd.{id} advertises the global IP (--public-addr)");
    let Some(deployment) = &ceph.osd_deployment else {
        return Check::fail(
            Hop::Ceph,
            check,
            format!("no Deployment {}{id} in {ns}", rook::OSD_NAME_PREFIX),
            "Rook has not created the OSD",
            "check the CephCluster's status and the Rook operator's logs",
        );
    };
    match args::osd_public_addr(deployment) {
        Some(address) if address.parse().is_ok_and(|ip| global_ips.contains(&ip)) => {
            Check::pass(Hop::Ceph, check, format!("--public-addr={address}"))
        }
        Some(address) => Check::fail(
            Hop::Ceph,
            check,
            format!(
                "--public-addr={address}, the global IP is {}",
                ips_text(global_ips)
            ),
            "the OSD's arguments are not updated to its global IP yet",
            format!(
                "the operator updates the OSD Deployments; follow it with mcsctl status -n {ns}"
            ),
        ),
        None => Check::fail(
            Hop::Ceph,
            check,
            "no --public-addr: it advertises its pod IP",
            "the OSD's arguments are not updated to its global IP yet; its pod IP is not reachable from other clusters",
            format!(
                "the operator updates the OSD Deployments; follow it with mcsctl status -n {ns}"
            ),
        ),
    }
}

/// What `rook-ceph-mon-endpoints` says of mon `id` (`entry`: its address, `None` when absent).
fn mon_endpoints_check(
    check: String,
    id: &str,
    entry: Option<Result<SocketAddr, String>>,
    global_ips: &[IpAddr],
    ns: &str,
) -> Check {
    match entry {
        None => Check::fail(
            Hop::Ceph,
            check,
            format!("mon {id} is not in its data"),
            "the mon was removed from the cluster, or is not added yet",
            format!("mcsctl status -n {ns} shows the mons the cluster has"),
        ),
        Some(Ok(address)) if global_ips.contains(&address.ip()) => {
            Check::pass(Hop::Ceph, check, format!("{id}={address}"))
        }
        Some(Ok(address)) => Check::fail(
            Hop::Ceph,
            check,
            format!("{id}={address}, the global IP is {}", ips_text(global_ips)),
            "the mon still advertises another address: the move to global IPs has not reached it yet",
            format!(
                "the operator moves the mons one at a time while the quorum holds; follow it with mcsctl status -n {ns}, and if it does not move, read the operator's logs"
            ),
        ),
        Some(Err(text)) => Check::fail(
            Hop::Ceph,
            check,
            format!("{id}={text}"),
            "the entry is not IP:port",
            "the entry is written by Rook or the operator; read their logs",
        ),
    }
}

/// What the monmap (`--monmap`) says of mon `id`.
fn monmap_check(monmap: Option<&MonMap>, id: &str, global_ips: &[IpAddr], ns: &str) -> Check {
    let check = format!("the monmap has mon {id} at the global IP");
    let Some(monmap) = monmap else {
        return Check::skip(
            Hop::Ceph,
            check,
            format!(
                "pass --monmap FILE with the output of `ceph mon dump -f json` (for example kubectl -n {ns} exec deploy/rook-ceph-tools -- ceph mon dump -f json) to compare the monmap"
            ),
        );
    };
    match monmap.mons.iter().find(|m| m.name == id) {
        None => Check::fail(
            Hop::Ceph,
            check,
            format!(
                "mon {id} is not in monmap epoch {} (it has {})",
                monmap.epoch,
                monmap
                    .mons
                    .iter()
                    .map(|m| m.name.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
            "the mon was removed from Ceph (a failover replaced it), or has not joined yet",
            format!(
                "compare with mcsctl status -n {ns}; a mon that never joins is rolled back by the operator"
            ),
        ),
        Some(mon) => match mon.ip() {
            Ok(ip) if global_ips.contains(&ip) => Check::pass(
                Hop::Ceph,
                check,
                format!("{id} at {} (epoch {})", mon.public_addrs, monmap.epoch),
            ),
            Ok(_) => Check::fail(
                Hop::Ceph,
                check,
                format!(
                    "{id} at {}, the global IP is {}",
                    mon.public_addrs,
                    ips_text(global_ips)
                ),
                "Ceph still knows the mon by another address: a mon cannot change its address, so it must be replaced by a new mon on the global IP",
                format!(
                    "the operator replaces the mons one at a time while the quorum holds; follow it with mcsctl status -n {ns}"
                ),
            ),
            Err(error) => Check::fail(
                Hop::Ceph,
                check,
                error.to_string(),
                "the monmap entry has no usable address",
                "check the monmap with ceph mon dump",
            ),
        },
    }
}

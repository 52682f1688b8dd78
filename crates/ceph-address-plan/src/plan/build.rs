//! The checks of a cluster's settings and names, and the plan of each daemon.

use std::collections::BTreeMap;
use std::net::{IpAddr, SocketAddr};

use mcs_types::names::{ClustersetName, Zone, dns_label_problem};

use crate::format;
use crate::input::{ClusterSettings, Daemon, DnsNameForm, ExternalMon, MonInput, OsdInput};
use crate::reject::Rejection;
use crate::{MonId, rook::MIN_MCS_CEPH_VERSION};

use super::MonOutputs;
use super::types::{Address, DaemonStatus, MonEndpoints, MonHostConfig, MonPlan, OsdPlan, WaitFor};

/// Checks the cluster-wide settings; the zone when it is valid, and whether clusterset names
/// can be built (MCS on with a valid cluster id).
pub(super) fn check_settings(
    settings: &ClusterSettings,
    rejections: &mut Vec<Rejection>,
) -> (Option<Zone>, bool) {
    if let Some(problem) = dns_label_problem(&settings.namespace, false) {
        rejections.push(Rejection::InvalidNamespace {
            namespace: settings.namespace.clone(),
            problem,
        });
    }
    let zone = Zone::new(&settings.clusterset_zone)
        .map_err(|e| rejections.push(Rejection::InvalidZone(e)))
        .ok();
    if !settings.mcs_enabled() {
        return (zone, false);
    }
    let cluster_id = &settings.multi_cluster_service.cluster_id;
    let mut names_buildable = zone.is_some();
    if cluster_id.is_empty() {
        rejections.push(Rejection::MissingClusterId);
        names_buildable = false;
    } else if let Some(problem) = dns_label_problem(cluster_id, false) {
        rejections.push(Rejection::InvalidClusterId {
            cluster_id: cluster_id.clone(),
            problem,
        });
        names_buildable = false;
    }
    if settings.host_network {
        rejections.push(Rejection::McsWithHostNetwork);
    }
    let (major, minor, patch) = MIN_MCS_CEPH_VERSION;
    match settings.ceph_version {
        None => rejections.push(Rejection::CephVersionUnknown),
        Some(version) => match version.is_at_least(major, minor, patch) {
            Some(true) => {}
            Some(false) => rejections.push(Rejection::CephTooOld { version }),
            None => rejections.push(Rejection::CephVersionAmbiguous { version }),
        },
    }
    (zone, names_buildable)
}

/// The name of the Service a daemon's export exports.
pub(super) fn exported_service_name(settings: &ClusterSettings, daemon: &Daemon) -> String {
    match settings.dns_name_form {
        DnsNameForm::ClusterIdPrefix => daemon.service_name(),
        DnsNameForm::UniqueServiceName => format!(
            "{}-{}",
            settings.multi_cluster_service.cluster_id,
            daemon.service_name()
        ),
    }
}

/// The clusterset name a daemon's global IP is resolved from.
pub(super) fn lookup_name(
    settings: &ClusterSettings,
    zone: &Zone,
    daemon: &Daemon,
) -> Result<ClustersetName, Rejection> {
    let invalid = |error| Rejection::InvalidClustersetName {
        daemon: daemon.clone(),
        error,
    };
    let service = exported_service_name(settings, daemon);
    let name = ClustersetName::service(&settings.namespace, &service)
        .and_then(|n| n.in_zone(zone.clone()))
        .map_err(invalid)?;
    match settings.dns_name_form {
        DnsNameForm::ClusterIdPrefix => name
            .cluster_service(&settings.multi_cluster_service.cluster_id)
            .map_err(invalid),
        DnsNameForm::UniqueServiceName => Ok(name),
    }
}

/// Checks that an MCS daemon's export Service and clusterset names can be built.
pub(super) fn check_names(
    settings: &ClusterSettings,
    zone: &Zone,
    daemon: &Daemon,
) -> Result<(), Rejection> {
    if settings.dns_name_form == DnsNameForm::UniqueServiceName {
        let name = exported_service_name(settings, daemon);
        if name.len() > mcs_types::names::MAX_LABEL_LEN {
            return Err(Rejection::ServiceNameTooLong {
                daemon: daemon.clone(),
                len: name.len(),
                name,
            });
        }
    }
    lookup_name(settings, zone, daemon).map(|_| ())
}

pub(super) fn check_family(
    settings: &ClusterSettings,
    what: impl FnOnce() -> String,
    ip: IpAddr,
) -> Option<Rejection> {
    (!settings.ip_family.admits(ip)).then(|| Rejection::WrongIpFamily {
        what: what(),
        ip,
        family: settings.ip_family,
    })
}

/// Sorts the daemons of an inventory (mons and OSDs by id, external mons by name) and checks
/// them: ids and names listed twice, external mon names, and the IP family of every address
/// given (external mons' endpoints, mons' cluster and node addresses, global IPs).
pub(super) fn check_inventory(
    settings: &ClusterSettings,
    mons: &mut [MonInput],
    external_mons: &mut [ExternalMon],
    osds: &mut [OsdInput],
    global_ips: &BTreeMap<Daemon, IpAddr>,
    rejections: &mut Vec<Rejection>,
) {
    for id in sort_and_find_duplicates(mons, |m| m.id.clone()) {
        rejections.push(Rejection::DuplicateMon(id));
    }
    check_duplicate_osds(osds, rejections);
    check_external_mons(settings, mons, external_mons, rejections);
    check_mon_addresses(settings, mons, rejections);
    for (daemon, ip) in global_ips {
        rejections.extend(check_family(
            settings,
            || format!("global IP of {daemon}"),
            *ip,
        ));
    }
}

/// Sorts OSDs by id and reports each id listed more than once.
fn check_duplicate_osds(osds: &mut [OsdInput], rejections: &mut Vec<Rejection>) {
    // OSD ids are plain numbers: sort without the clone-per-comparison of the generic helper.
    osds.sort_unstable_by_key(|o| o.id);
    let mut last_duplicate = None;
    for pair in osds.windows(2) {
        if pair[0].id == pair[1].id && last_duplicate != Some(pair[0].id) {
            last_duplicate = Some(pair[0].id);
            rejections.push(Rejection::DuplicateOsd(pair[0].id));
        }
    }
}

/// Sorts external mons by name and checks their names (valid, listed once, not a mon's id)
/// and the IP family of their endpoints.
fn check_external_mons(
    settings: &ClusterSettings,
    mons: &[MonInput],
    external_mons: &mut [ExternalMon],
    rejections: &mut Vec<Rejection>,
) {
    let mut external_duplicates = sort_and_find_duplicates(external_mons, |e| e.name.clone());
    for external in external_mons.iter() {
        if external.name.is_empty() || external.name.contains(['=', ',']) {
            rejections.push(Rejection::InvalidExternalMonName(external.name.clone()));
        }
        if mons.iter().any(|m| m.id.as_str() == external.name) {
            external_duplicates.push(external.name.clone());
        }
        rejections.extend(check_family(
            settings,
            || format!("endpoint of external mon {}", external.name),
            external.endpoint.ip(),
        ));
    }
    external_duplicates.sort();
    external_duplicates.dedup();
    rejections.extend(
        external_duplicates
            .into_iter()
            .map(Rejection::DuplicateExternalMon),
    );
}

/// Checks the IP family of the (sorted) mons' cluster IPs and, with host networking, that
/// each mon has a node address of the right family.
fn check_mon_addresses(
    settings: &ClusterSettings,
    mons: &[MonInput],
    rejections: &mut Vec<Rejection>,
) {
    // Mons are sorted: check each id once even when it is listed twice.
    let distinct_mons = mons
        .iter()
        .enumerate()
        .filter(|(i, m)| *i == 0 || mons[i - 1].id != m.id)
        .map(|(_, m)| m);
    for mon in distinct_mons {
        if let Some(ip) = mon.cluster_ip {
            rejections.extend(check_family(
                settings,
                || format!("cluster IP of mon.{}", mon.id),
                ip,
            ));
        }
        let node_ip = mon.node.as_ref().and_then(|n| n.address);
        match node_ip {
            Some(ip) if settings.host_network => rejections.extend(check_family(
                settings,
                || format!("node address of mon.{}", mon.id),
                ip,
            )),
            None if settings.host_network => {
                rejections.push(Rejection::HostNetworkMonWithoutNodeAddress(mon.id.clone()));
            }
            _ => {}
        }
    }
}

/// Checks that the names of every mon and of the (sorted) OSDs' highest id can be built in
/// `zone`: the longest OSD names are those of the highest id.
pub(super) fn check_longest_names(
    settings: &ClusterSettings,
    zone: &Zone,
    mons: &[MonInput],
    osds: &[OsdInput],
    rejections: &mut Vec<Rejection>,
) {
    let daemons = mons
        .iter()
        .map(|m| Daemon::Mon(m.id.clone()))
        .chain(osds.last().map(|o| Daemon::Osd(o.id)));
    for daemon in daemons {
        if let Err(rejection) = check_names(settings, zone, &daemon) {
            rejections.push(rejection);
        }
    }
}

/// Plans one mon (pure).
pub(super) fn plan_mon(
    settings: &ClusterSettings,
    mon: MonInput,
    global_ip: Option<IpAddr>,
) -> MonPlan {
    let port = mon
        .advertised
        .map_or_else(|| settings.new_mon_port(), |a| a.port());
    let node_ip = mon.node.as_ref().and_then(|n| n.address);
    // The address a mon of this id should advertise, or what it waits for.
    let expected: Result<Address, WaitFor> = if settings.host_network {
        node_ip.map(Address::Node).ok_or(WaitFor::ClusterIp)
    } else if settings.mcs_enabled() {
        global_ip.map(Address::Global).ok_or(WaitFor::GlobalIp)
    } else {
        mon.cluster_ip
            .map(Address::ClusterIp)
            .ok_or(WaitFor::ClusterIp)
    };
    let (address, status) = match (mon.advertised, expected) {
        (None, Ok(address)) => (address, DaemonStatus::Start),
        (None, Err(wait)) => (Address::Waiting(wait), DaemonStatus::Waiting),
        (Some(advertised), Ok(address)) if address.ip() == Some(advertised.ip()) => {
            (address, DaemonStatus::UpToDate)
        }
        (Some(advertised), Ok(address)) => (
            Address::Retiring(advertised.ip()),
            DaemonStatus::Replace {
                advertised,
                expected: address.ip(),
            },
        ),
        // An MCS mon on its cluster IP is known to be wrong before any lookup: replace it
        // (its replacement is exported instead; exporting this one would waste a global IP).
        (Some(advertised), Err(WaitFor::GlobalIp)) if Some(advertised.ip()) == mon.cluster_ip => (
            Address::Retiring(advertised.ip()),
            DaemonStatus::Replace {
                advertised,
                expected: None,
            },
        ),
        (Some(_), Err(wait)) => (Address::Waiting(wait), DaemonStatus::Waiting),
    };
    MonPlan {
        input: mon,
        port,
        address,
        status,
    }
}

/// Plans one OSD (pure).
pub(super) fn plan_osd(
    settings: &ClusterSettings,
    osd: OsdInput,
    global_ip: Option<IpAddr>,
) -> OsdPlan {
    let (address, status) = if settings.mcs_enabled() {
        match global_ip {
            Some(ip) if osd.advertised == Some(ip) => (Address::Global(ip), DaemonStatus::UpToDate),
            Some(ip) => (
                Address::Global(ip),
                DaemonStatus::UpdateArgs {
                    advertised: osd.advertised,
                },
            ),
            None => (Address::Waiting(WaitFor::GlobalIp), DaemonStatus::Waiting),
        }
    } else if osd.advertised.is_some() {
        (
            Address::PodIp,
            DaemonStatus::UpdateArgs {
                advertised: osd.advertised,
            },
        )
    } else {
        (Address::PodIp, DaemonStatus::UpToDate)
    };
    OsdPlan {
        input: osd,
        address,
        status,
    }
}

/// Plans the (sorted) OSDs, each with its global IP when known.
pub(super) fn plan_osds(
    settings: &ClusterSettings,
    osds: Vec<OsdInput>,
    global_ips: &BTreeMap<Daemon, IpAddr>,
) -> BTreeMap<u32, OsdPlan> {
    // Both are sorted by OSD id: walk them together instead of a map lookup per OSD.
    let mut osd_ips = global_ips
        .range(Daemon::Osd(0)..)
        .filter_map(|(d, ip)| match d {
            Daemon::Osd(id) => Some((*id, *ip)),
            Daemon::Mon(_) => None,
        })
        .peekable();
    osds.into_iter()
        .map(|o| {
            while osd_ips.next_if(|(id, _)| *id < o.id).is_some() {}
            let global_ip = osd_ips.next_if(|(id, _)| *id == o.id).map(|(_, ip)| ip);
            (o.id, plan_osd(settings, o, global_ip))
        })
        .collect()
}

/// The ConfigMap, Secret and peer-token outputs, from the mons (pure).
pub(super) fn mon_outputs(
    settings: &ClusterSettings,
    stored_max_mon_id: Option<u32>,
    mons: &[MonPlan],
    external_mons: &[ExternalMon],
) -> MonOutputs {
    let max_mon_id = mons
        .iter()
        .map(|m| m.id().index())
        .chain(stored_max_mon_id)
        .max();
    // (name, endpoint, in quorum) of every mon clients can reach: Rook's AllMonitors().
    let mut reachable: Vec<(&str, SocketAddr, bool)> =
        Vec::with_capacity(mons.len() + external_mons.len());
    for mon in mons {
        if let Some(endpoint) = mon.endpoint() {
            reachable.push((mon.id().as_str(), endpoint, !mon.input.out_of_quorum));
        }
    }
    for external in external_mons {
        reachable.push((&external.name, external.endpoint, true));
    }
    let endpoint_texts: Vec<String> = reachable.iter().map(|(_, e, _)| e.to_string()).collect();
    let data = reachable
        .iter()
        .zip(&endpoint_texts)
        .map(|((name, _, _), endpoint)| format!("{name}={endpoint}"))
        .collect::<Vec<_>>()
        .join(",");
    let config = MonHostConfig::of(
        reachable
            .iter()
            .filter(|(_, _, in_quorum)| *in_quorum)
            .map(|(name, endpoint, _)| (*name, *endpoint)),
    );
    let out_of_quorum = mons
        .iter()
        .filter(|m| m.input.out_of_quorum)
        .map(|m| m.id().as_str())
        .collect::<Vec<_>>()
        .join(",");
    let endpoints = MonEndpoints {
        data,
        mapping: format::mapping_json(mons.iter().map(|m| {
            (
                m.id().as_str(),
                m.input.node.as_ref(),
                m.input.zone.as_deref(),
            )
        })),
        max_mon_id: max_mon_id.map_or_else(|| "-1".to_owned(), |m| m.to_string()),
        out_of_quorum,
        csi_cluster_config_json: format::csi_cluster_config_json(
            &settings.namespace,
            endpoint_texts.iter().map(String::as_str),
        ),
        external_mons: external_mons
            .iter()
            .map(|e| e.name.as_str())
            .collect::<Vec<_>>()
            .join(","),
    };
    MonOutputs {
        peer_mon_host: format::peer_token_mon_host(endpoint_texts.iter().map(String::as_str)),
        endpoints,
        config,
        max_mon_id,
        next_mon_id: MonId::next_after(max_mon_id),
    }
}

/// Sorts `items` by `key` and reports each key that occurs more than once.
pub(super) fn sort_and_find_duplicates<T, K: Ord + Clone>(
    items: &mut [T],
    key: impl Fn(&T) -> K,
) -> Vec<K> {
    items.sort_by_key(|item| key(item));
    let mut duplicates: Vec<K> = items
        .windows(2)
        .filter(|pair| key(&pair[0]) == key(&pair[1]))
        .map(|pair| key(&pair[0]))
        .collect();
    duplicates.dedup();
    duplicates
}

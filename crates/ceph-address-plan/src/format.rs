//! Rook's text formats: mon endpoints, `mon_host` address vectors, the `mapping` and
//! `csi-cluster-config-json` JSON (as Go's `encoding/json` writes them), the peer-token
//! `mon_host`, and the `--public-bind-addr` value.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use serde::Deserialize;

use crate::input::{ExternalMon, IpFamily, MonInput, NodeInfo};
use crate::{MonId, rook};

/// A mon endpoint as Go's `net.JoinHostPort` writes it: `10.0.0.1:6789`, `[fd00::1]:3300`.
///
/// ```
/// use ceph_address_plan::format::endpoint;
/// assert_eq!(endpoint("242.0.0.1".parse()?, 6789), "242.0.0.1:6789");
/// assert_eq!(endpoint("fd00::1".parse()?, 3300), "[fd00::1]:3300");
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
pub fn endpoint(ip: IpAddr, port: u16) -> String {
    SocketAddr::new(ip, port).to_string()
}

/// One mon's entry in `mon_host` (Rook's `PopulateMonHostMembers`): `[v2:<ip>:3300]` for a mon
/// on the msgr2 port, else `[v2:<ip>:3300,v1:<ip>:<port>]`.
///
/// ```
/// use ceph_address_plan::format::mon_host_entry;
/// let mon = "10.0.0.1:6789".parse()?;
/// assert_eq!(mon_host_entry(mon), "[v2:10.0.0.1:3300,v1:10.0.0.1:6789]");
/// let msgr2_only = "[fd00::1]:3300".parse()?;
/// assert_eq!(mon_host_entry(msgr2_only), "[v2:[fd00::1]:3300]");
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
pub fn mon_host_entry(mon: SocketAddr) -> String {
    let v2 = endpoint(mon.ip(), rook::MON_MSGR2_PORT);
    if mon.port() == rook::MON_MSGR2_PORT {
        format!("[v2:{v2}]")
    } else {
        format!("[v2:{v2},v1:{mon}]")
    }
}

/// The `--public-bind-addr` value of a mon (Rook's `makeMonDaemonContainer`): the pod IP, with
/// the msgr2 port when the mon listens on 3300 only (bracketed for IPv6, no port in dual
/// stack, where the family of the pod IP is not known in advance).
///
/// ```
/// use ceph_address_plan::format::mon_bind_addr;
/// use ceph_address_plan::IpFamily;
/// assert_eq!(mon_bind_addr(6789, IpFamily::IPv4), "$(ROOK_POD_IP)");
/// assert_eq!(mon_bind_addr(3300, IpFamily::IPv4), "$(ROOK_POD_IP):3300");
/// assert_eq!(mon_bind_addr(3300, IpFamily::IPv6), "[$(ROOK_POD_IP)]:3300");
/// assert_eq!(mon_bind_addr(3300, IpFamily::DualStack), "$(ROOK_POD_IP)");
/// ```
pub fn mon_bind_addr(mon_port: u16, family: IpFamily) -> String {
    if mon_port != rook::MON_MSGR2_PORT {
        return rook::POD_IP.to_owned();
    }
    match family {
        IpFamily::IPv4 => format!("{}:{mon_port}", rook::POD_IP),
        IpFamily::IPv6 => format!("[{}]:{mon_port}", rook::POD_IP),
        IpFamily::DualStack => rook::POD_IP.to_owned(),
    }
}

/// Appends `text` as a JSON string exactly as Go's `encoding/json` writes it (HTML-safe: `<`,
/// `>` and `&` escaped, as are U+2028 and U+2029), so the bytes match what Rook stores.
///
/// ```
/// let mut out = String::new();
/// ceph_address_plan::format::push_go_json_string(&mut out, "a<b>\"c\"\n");
/// assert_eq!(out, r#""a\u003cb\u003e\"c\"\n""#);
/// ```
pub fn push_go_json_string(out: &mut String, text: &str) {
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '<' | '>' | '&' | '\u{2028}' | '\u{2029}' => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c if u32::from(c) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

/// One entry of the `mapping` JSON: `null` when nothing is known, else the non-empty fields in
/// Rook's order and spelling (`Name`, `Hostname`, `Address`, `zone`).
fn push_schedule_entry(out: &mut String, node: Option<&NodeInfo>, zone: Option<&str>) {
    let name = node.map_or("", |n| n.name.as_str());
    let hostname = node.map_or("", |n| n.hostname.as_str());
    let address = node.and_then(|n| n.address).map(|a| a.to_string());
    let zone = zone.unwrap_or("");
    let fields = [
        ("Name", name),
        ("Hostname", hostname),
        ("Address", address.as_deref().unwrap_or("")),
        ("zone", zone),
    ];
    if fields.iter().all(|(_, v)| v.is_empty()) {
        out.push_str("null");
        return;
    }
    out.push('{');
    let mut first = true;
    for (key, value) in fields {
        if value.is_empty() {
            continue;
        }
        if !first {
            out.push(',');
        }
        first = false;
        push_go_json_string(out, key);
        out.push(':');
        push_go_json_string(out, value);
    }
    out.push('}');
}

/// The `mapping` value: `{"node":{"<id>":<entry>,...}}` with ids in Go's map-key order (byte
/// order of the id strings, as `encoding/json` sorts map keys).
///
/// ```
/// use ceph_address_plan::format::mapping_json;
/// use ceph_address_plan::NodeInfo;
/// let node = NodeInfo { name: "node0".into(), hostname: "myhost".into(), address: Some("1.1.1.1".parse()?) };
/// assert_eq!(
///     mapping_json([("a", Some(&node), None)]),
///     r#"{"node":{"a":{"Name":"node0","Hostname":"myhost","Address":"1.1.1.1"}}}"#
/// );
/// assert_eq!(mapping_json([]), r#"{"node":{}}"#);
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
pub fn mapping_json<'a>(
    entries: impl IntoIterator<Item = (&'a str, Option<&'a NodeInfo>, Option<&'a str>)>,
) -> String {
    let mut sorted: Vec<_> = entries.into_iter().collect();
    sorted.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut out = String::from("{\"node\":{");
    for (i, (id, node, zone)) in sorted.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_go_json_string(&mut out, id);
        out.push(':');
        push_schedule_entry(&mut out, node, zone);
    }
    out.push_str("}}");
    out
}

/// The `csi-cluster-config-json` value: one ceph-csi cluster entry whose `clusterID` is the
/// cluster namespace, with the mon endpoints and ceph-csi's zero-valued option blocks, exactly
/// as Rook writes it (captured from a Rook operator log of 2025).
///
/// ```
/// use ceph_address_plan::format::csi_cluster_config_json;
/// let json = csi_cluster_config_json("rook-ceph", ["10.96.11.92:6789"]);
/// assert!(json.starts_with(r#"[{"clusterID":"rook-ceph","monitors":["10.96.11.92:6789"],"cephFS":{"#));
/// assert!(json.ends_with(r#""readAffinity":{"enabled":false,"crushLocationLabels":null},"namespace":""}]"#));
/// ```
pub fn csi_cluster_config_json<'a>(
    namespace: &str,
    monitors: impl IntoIterator<Item = &'a str>,
) -> String {
    let mut out = String::from("[{\"clusterID\":");
    push_go_json_string(&mut out, namespace);
    out.push_str(",\"monitors\":[");
    for (i, monitor) in monitors.into_iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_go_json_string(&mut out, monitor);
    }
    out.push_str(concat!(
        "],\"cephFS\":{\"netNamespaceFilePath\":\"\",\"subvolumeGroup\":\"\",\"radosNamespace\":\"\",",
        "\"kernelMountOptions\":\"\",\"fuseMountOptions\":\"\"},",
        "\"rbd\":{\"netNamespaceFilePath\":\"\",\"radosNamespace\":\"\",\"mirrorDaemonCount\":0},",
        "\"nfs\":{\"netNamespaceFilePath\":\"\"},",
        "\"readAffinity\":{\"enabled\":false,\"crushLocationLabels\":null},",
        "\"namespace\":\"\"}]"
    ));
    out
}

/// The `mon_host` of the RBD mirror bootstrap peer token: the set of mon endpoints, sorted as
/// Go sorts strings (bytes), joined by `,`.
///
/// ```
/// use ceph_address_plan::format::peer_token_mon_host;
/// assert_eq!(
///     peer_token_mon_host(["242.0.0.9:6789", "242.0.0.10:6789", "242.0.0.9:6789"]),
///     "242.0.0.10:6789,242.0.0.9:6789"
/// );
/// ```
pub fn peer_token_mon_host<'a>(endpoints: impl IntoIterator<Item = &'a str>) -> String {
    let mut sorted: Vec<&str> = endpoints.into_iter().collect();
    sorted.sort_unstable_by(|a, b| a.as_bytes().cmp(b.as_bytes()));
    sorted.dedup();
    sorted.join(",")
}

/// What [`read_mon_endpoints`] found in a `rook-ceph-mon-endpoints` ConfigMap: the reverse of
/// [`MonEndpoints`](crate::MonEndpoints), which the planner writes.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ReadMonEndpoints {
    /// `maxMonId`, `None` for `-1`, empty or unreadable.
    pub max_mon_id: Option<u32>,
    /// The mons of `data`, in its order, with what the ConfigMap says of them: the advertised
    /// endpoint (`None` when it is not `ip:port`), `outOfQuorum`, and the `mapping` entry (node
    /// and zone). Cluster IPs and PVC sizes are not in the ConfigMap.
    pub mons: Vec<MonInput>,
    /// The entries of `data` listed in `externalMons`, with a readable endpoint.
    pub external_mons: Vec<ExternalMon>,
    /// The endpoint text of the mons in `mons` whose endpoint is not `ip:port` (Rook lists a
    /// mon being placed as `d=:6789`), by id: what to show of them.
    pub unreadable_endpoints: BTreeMap<MonId, String>,
    /// Entries and values that were skipped or not understood, one sentence each.
    pub notes: Vec<String>,
}

/// One `mapping` entry (Rook's `MonScheduleInfo`: capitalised keys, lower-case `zone`).
#[derive(Debug, Default, Deserialize)]
struct ScheduleInfo {
    #[serde(default, rename = "Name")]
    name: String,
    #[serde(default, rename = "Hostname")]
    hostname: String,
    #[serde(default, rename = "Address")]
    address: String,
    #[serde(default)]
    zone: String,
}

#[derive(Debug, Default, Deserialize)]
struct Mapping {
    #[serde(default)]
    node: BTreeMap<String, Option<ScheduleInfo>>,
}

/// The non-empty items of a `,`-joined list (Rook's `outOfQuorum`, `externalMons`).
pub fn split_list(text: &str) -> impl Iterator<Item = &str> {
    text.split(',').map(str::trim).filter(|s| !s.is_empty())
}

/// Reads the mons of a `rook-ceph-mon-endpoints` ConfigMap's data (`data`, `maxMonId`,
/// `mapping`, `outOfQuorum`, `externalMons`) as Rook's `ParseMonEndpoints` and `loadMonConfig`
/// do: entries without exactly one `=` are skipped, as are names that are neither Rook mon ids
/// nor listed in `externalMons`; a mon whose endpoint is not `ip:port` is taken as not running.
/// Every skip is noted.
///
/// ```
/// use ceph_address_plan::format::read_mon_endpoints;
/// let data = [
///     ("data".to_owned(), "a=242.1.0.11:6789,b=242.1.0.12:6789".to_owned()),
///     ("maxMonId".to_owned(), "1".to_owned()),
///     ("outOfQuorum".to_owned(), "b".to_owned()),
/// ].into();
/// let read = read_mon_endpoints(&data);
/// assert_eq!(read.max_mon_id, Some(1));
/// assert_eq!(read.mons[0].advertised, Some("242.1.0.11:6789".parse()?));
/// assert!(read.mons[1].out_of_quorum);
/// assert!(read.notes.is_empty());
/// # Ok::<(), std::net::AddrParseError>(())
/// ```
pub fn read_mon_endpoints(data: &BTreeMap<String, String>) -> ReadMonEndpoints {
    let get = |key: &str| data.get(key).map_or("", String::as_str);
    let where_ = rook::MON_ENDPOINTS_CONFIG_MAP;
    let mut out = ReadMonEndpoints::default();

    match get(rook::KEY_MAX_MON_ID).trim() {
        "" | "-1" => {}
        text => match text.parse::<u32>() {
            Ok(index) => out.max_mon_id = Some(index),
            Err(_) => out.notes.push(format!(
                "{where_}: maxMonId {text:?} is not a mon index; the highest listed mon is used instead"
            )),
        },
    }
    let external: BTreeSet<&str> = split_list(get(rook::KEY_EXTERNAL_MONS)).collect();
    let out_of_quorum: BTreeSet<&str> = split_list(get(rook::KEY_OUT_OF_QUORUM)).collect();
    let mapping: Mapping = match get(rook::KEY_MAPPING).trim() {
        "" => Mapping::default(),
        text => serde_json::from_str(text).unwrap_or_else(|e| {
            out.notes.push(format!(
                "{where_}: mapping is not Rook's placement JSON ({e}); mon placement is left out"
            ));
            Mapping::default()
        }),
    };

    for entry in split_list(get(rook::KEY_DATA)) {
        let Some((name, endpoint_text)) = entry.split_once('=').filter(|(_, e)| !e.contains('='))
        else {
            out.notes.push(format!(
                "{where_}: data entry {entry:?} is not <id>=<ip:port>; skipped"
            ));
            continue;
        };
        let endpoint = match endpoint_text.parse::<SocketAddr>() {
            Ok(endpoint) => Some(endpoint),
            Err(_) => {
                out.notes.push(format!(
                    "{where_}: endpoint {endpoint_text:?} of {name} is not ip:port; the mon is taken as not running"
                ));
                None
            }
        };
        if external.contains(name) {
            if let Some(endpoint) = endpoint {
                out.external_mons.push(ExternalMon {
                    name: name.to_owned(),
                    endpoint,
                });
            }
            continue;
        }
        let Ok(id) = name.parse::<MonId>() else {
            out.notes.push(format!(
                "{where_}: {name:?} is not a Rook mon id (a, b, ..., aa, ...) and not listed in externalMons; skipped"
            ));
            continue;
        };
        if endpoint.is_none() {
            out.unreadable_endpoints
                .insert(id.clone(), endpoint_text.to_owned());
        }
        let mut mon = MonInput::new(id);
        mon.advertised = endpoint;
        mon.out_of_quorum = out_of_quorum.contains(name);
        if let Some(Some(info)) = mapping.node.get(name) {
            mon.node = Some(NodeInfo {
                name: info.name.clone(),
                hostname: info.hostname.clone(),
                address: info.address.parse().ok(),
            });
            if !info.zone.is_empty() {
                mon.zone = Some(info.zone.clone());
            }
        }
        out.mons.push(mon);
    }
    out
}

/// The `data` of `rook-ceph-mon-endpoints` with mon `mon` set to `endpoint` (empty while the
/// mon has no address, `:6789`) or removed (`None`): the other entries keep their text and
/// order, and a mon already listed keeps its place. The one editor of `data`, the reverse of
/// [`read_mon_endpoints`].
///
/// ```
/// use ceph_address_plan::format::edit_mon_data;
/// let data = "a=10.96.0.10:6789,b=10.96.0.11:6789";
/// assert_eq!(edit_mon_data(data, "d", Some(":6789")), "a=10.96.0.10:6789,b=10.96.0.11:6789,d=:6789");
/// assert_eq!(edit_mon_data("a=1.1.1.1:6789,d=:6789", "d", Some("242.1.0.4:6789")), "a=1.1.1.1:6789,d=242.1.0.4:6789");
/// assert_eq!(edit_mon_data("a=1.1.1.1:6789,d=242.1.0.4:6789", "a", None), "d=242.1.0.4:6789");
/// ```
pub fn edit_mon_data(data: &str, mon: &str, endpoint: Option<&str>) -> String {
    let is_mon = |entry: &str| entry.split_once('=').map(|(name, _)| name) == Some(mon);
    let mut entries: Vec<String> = split_list(data)
        .filter(|entry| !is_mon(entry))
        .map(str::to_owned)
        .collect();
    let position = split_list(data).position(is_mon);
    if let Some(endpoint) = endpoint {
        let entry = format!("{mon}={endpoint}");
        match position {
            Some(at) if at <= entries.len() => entries.insert(at, entry),
            _ => entries.push(entry),
        }
    }
    entries.join(",")
}

/// The keys of a `rook-ceph-mon-endpoints` ConfigMap's `data` that change when one mon is
/// listed, moved or removed (the mon migration's edit of the ConfigMap): `data` edited by
/// [`edit_mon_data`], `maxMonId` raised to the mon's index (as [`read_mon_endpoints`] reads
/// the stored one), and `mapping` with the mon's entry removed (`endpoint` `None`) or, when
/// `placed_like` has a node there, set to that mon's (the new mon runs where it does). The
/// other keys are not returned: the caller applies these three.
///
/// ```
/// use ceph_address_plan::format::edit_mon_endpoints;
/// use ceph_address_plan::rook;
/// let data = [
///     ("data".to_owned(), "a=10.96.0.10:6789".to_owned()),
///     ("maxMonId".to_owned(), "0".to_owned()),
///     ("mapping".to_owned(), r#"{"node":{"a":{"Name":"n0"}}}"#.to_owned()),
/// ].into();
/// let written = edit_mon_endpoints(&data, &"d".parse()?, Some("242.1.0.4:6789"), Some(&"a".parse()?));
/// assert_eq!(written[rook::KEY_DATA], "a=10.96.0.10:6789,d=242.1.0.4:6789");
/// assert_eq!(written[rook::KEY_MAX_MON_ID], "3");
/// assert_eq!(written[rook::KEY_MAPPING], r#"{"node":{"a":{"Name":"n0"},"d":{"Name":"n0"}}}"#);
/// # Ok::<(), ceph_address_plan::InvalidMonId>(())
/// ```
pub fn edit_mon_endpoints(
    data: &BTreeMap<String, String>,
    mon: &MonId,
    endpoint: Option<&str>,
    placed_like: Option<&MonId>,
) -> BTreeMap<String, String> {
    let get = |key: &str| data.get(key).map_or("", String::as_str);
    let new_data = edit_mon_data(get(rook::KEY_DATA), mon.as_str(), endpoint);
    let stored = read_mon_endpoints(data).max_mon_id;
    let max = stored.map_or(mon.index(), |m| m.max(mon.index()));
    let mut mapping: serde_json::Value = serde_json::from_str(get(rook::KEY_MAPPING))
        .unwrap_or_else(|_| serde_json::json!({"node": {}}));
    if let Some(nodes) = mapping
        .get_mut("node")
        .and_then(serde_json::Value::as_object_mut)
    {
        if endpoint.is_none() {
            nodes.remove(mon.as_str());
        } else if let Some(node) = placed_like.and_then(|m| nodes.get(m.as_str())).cloned() {
            nodes.insert(mon.as_str().to_owned(), node);
        }
    }
    [
        (rook::KEY_DATA.to_owned(), new_data),
        (rook::KEY_MAX_MON_ID.to_owned(), max.to_string()),
        (rook::KEY_MAPPING.to_owned(), mapping.to_string()),
    ]
    .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn go_json_escapes_like_encoding_json() {
        let mut out = String::new();
        push_go_json_string(&mut out, "tab\there & \u{1}\u{2028}é\\");
        assert_eq!(out, r#""tab\there \u0026 \u0001\u2028é\\""#);
    }

    #[test]
    fn mapping_sorts_ids_as_go_sorts_map_keys_and_omits_empty_fields() {
        let node = NodeInfo {
            name: "k1".into(),
            hostname: String::new(),
            address: Some("fd00::5".parse().unwrap()),
        };
        let json = mapping_json([
            ("b", None, None),
            ("aa", Some(&node), Some("z1")),
            ("a", None, Some("z2")),
        ]);
        assert_eq!(
            json,
            r#"{"node":{"a":{"zone":"z2"},"aa":{"Name":"k1","Address":"fd00::5","zone":"z1"},"b":null}}"#
        );
    }

    #[test]
    fn csi_config_matches_a_real_rook_log_byte_for_byte() {
        // From a Rook operator log (2025-04-17, Rook with ceph-csi ClusterInfo), cluster rook-ceph.
        let logged = r#"[{"clusterID":"rook-ceph","monitors":["10.96.11.92:6789","10.96.170.97:6789","10.96.228.121:6789"],"cephFS":{"netNamespaceFilePath":"","subvolumeGroup":"","radosNamespace":"","kernelMountOptions":"","fuseMountOptions":""},"rbd":{"netNamespaceFilePath":"","radosNamespace":"","mirrorDaemonCount":0},"nfs":{"netNamespaceFilePath":""},"readAffinity":{"enabled":false,"crushLocationLabels":null},"namespace":""}]"#;
        let ours = csi_cluster_config_json(
            "rook-ceph",
            [
                "10.96.11.92:6789",
                "10.96.170.97:6789",
                "10.96.228.121:6789",
            ],
        );
        assert_eq!(ours, logged);
        assert!(csi_cluster_config_json("rook-ceph", []).contains(r#""monitors":[],"#));
    }
    #[test]
    fn mon_endpoints_round_trip_through_the_planner_and_the_reader() {
        use crate::{CephVersion, ClusterSettings, Inventory, Plan, PlanInput};
        let mut cluster = ClusterSettings::new("my-cluster", "rook-ceph");
        cluster.multi_cluster_service.enabled = true;
        cluster.multi_cluster_service.cluster_id = "east".into();
        cluster.ceph_version = Some(CephVersion::new(18, 2, 4));
        let mut inventory = Inventory {
            max_mon_id: Some(30),
            ..Inventory::default()
        };
        let mons = [
            ("d", "242.1.0.11:6789", false, Some("z1")),
            ("e", "[fd00::12]:3300", true, None),
            ("ab", "242.1.0.13:6789", false, None),
        ];
        for (id, endpoint, out_of_quorum, zone) in mons {
            let mut mon = MonInput::new(id.parse().unwrap());
            mon.advertised = Some(endpoint.parse().unwrap());
            mon.out_of_quorum = out_of_quorum;
            mon.zone = zone.map(str::to_owned);
            if id == "d" {
                mon.node = Some(NodeInfo {
                    name: "node-0".into(),
                    hostname: "host<0>".into(),
                    address: Some("10.0.0.1".parse().unwrap()),
                });
            }
            inventory.mons.push(mon);
        }
        inventory.external_mons.push(ExternalMon {
            name: "peer".into(),
            endpoint: "192.168.1.1:6789".parse().unwrap(),
        });
        cluster.ip_family = IpFamily::DualStack;
        let plan = Plan::new(PlanInput {
            cluster,
            inventory: inventory.clone(),
        })
        .unwrap();

        let written = plan.mon_endpoints().to_data();
        let read = read_mon_endpoints(&written);
        assert!(read.notes.is_empty(), "{:?}", read.notes);
        assert_eq!(read.max_mon_id, Some(30));
        assert_eq!(read.external_mons, inventory.external_mons);
        let mut expected = inventory.mons.clone();
        expected.sort_by(|a, b| a.id.cmp(&b.id));
        assert_eq!(read.mons, expected);
        // Reading what was read and writing it again gives the same bytes.
        let again = Plan::new(PlanInput {
            cluster: plan.settings().clone(),
            inventory: Inventory {
                max_mon_id: read.max_mon_id,
                mons: read.mons,
                external_mons: read.external_mons,
                ..Inventory::default()
            },
        })
        .unwrap();
        assert_eq!(again.mon_endpoints().to_data(), written);
    }

    #[test]
    fn the_reader_skips_and_notes_what_rook_would_ignore() {
        let data: BTreeMap<String, String> = [
            (
                "data",
                "a=10.0.0.1:6789,b=oops,c,d=1=2,Q=1.2.3.4:6789, ,ext=10.9.9.9:6789",
            ),
            ("maxMonId", "x"),
            ("externalMons", "ext"),
            ("mapping", "{not json"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let read = read_mon_endpoints(&data);
        let ids: Vec<_> = read.mons.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["a", "b"]);
        assert_eq!(read.mons[1].advertised, None);
        assert_eq!(read.external_mons[0].name, "ext");
        assert_eq!(read.max_mon_id, None);
        assert_eq!(read.notes.len(), 6, "{:#?}", read.notes);
        assert_eq!(
            read.unreadable_endpoints,
            BTreeMap::from([("b".parse().unwrap(), "oops".to_owned())])
        );
    }

    #[test]
    fn what_the_editor_writes_the_reader_reads() {
        let data: BTreeMap<String, String> = [
            ("data", "b=10.96.0.11:6789,a=10.96.0.10:6789"),
            ("maxMonId", "1"),
            (
                "mapping",
                r#"{"node":{"a":{"Name":"n0","zone":"z1"},"b":null}}"#,
            ),
            ("outOfQuorum", ""),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        let d: MonId = "d".parse().unwrap();
        let a: MonId = "a".parse().unwrap();
        let with = |edit: BTreeMap<String, String>| {
            let mut next = data.clone();
            next.extend(edit);
            next
        };

        // Listed while being placed: no endpoint yet, its text kept.
        let placing = with(edit_mon_endpoints(&data, &d, Some(":6789"), None));
        let read = read_mon_endpoints(&placing);
        assert_eq!(read.max_mon_id, Some(3));
        assert_eq!(read.mons[2].id, d);
        assert_eq!(read.mons[2].advertised, None);
        assert_eq!(read.unreadable_endpoints[&d], ":6789");

        // Started: its endpoint, and the node of the mon it was placed like.
        let started = with(edit_mon_endpoints(
            &placing,
            &d,
            Some("242.1.0.4:6789"),
            Some(&a),
        ));
        let read = read_mon_endpoints(&started);
        assert!(read.notes.is_empty(), "{:?}", read.notes);
        assert_eq!(
            started["data"],
            "b=10.96.0.11:6789,a=10.96.0.10:6789,d=242.1.0.4:6789"
        );
        assert_eq!(
            read.mons[2].advertised,
            Some("242.1.0.4:6789".parse().unwrap())
        );
        assert_eq!(read.mons[2].node, read.mons[1].node);
        assert_eq!(read.mons[2].zone.as_deref(), Some("z1"));

        // Removed: gone from data and mapping; maxMonId never goes down.
        let removed = with(edit_mon_endpoints(&started, &a, None, None));
        let read = read_mon_endpoints(&removed);
        let ids: Vec<&str> = read.mons.iter().map(|m| m.id.as_str()).collect();
        assert_eq!(ids, ["b", "d"]);
        assert_eq!(read.max_mon_id, Some(3));
        assert!(
            !removed["mapping"].contains("\"a\""),
            "{}",
            removed["mapping"]
        );
    }
}

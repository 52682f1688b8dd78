//! Rook's text formats: mon endpoints, `mon_host` address vectors, the `mapping` and
//! `csi-cluster-config-json` JSON (as Go's `encoding/json` writes them), the peer-token
//! `mon_host`, and the `--public-bind-addr` value.

use std::fmt::Write as _;
use std::net::{IpAddr, SocketAddr};

use crate::input::{IpFamily, NodeInfo};
use crate::rook;

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
}

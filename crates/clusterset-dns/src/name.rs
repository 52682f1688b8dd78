//! DNS names, the bottom layer of the crate: the wire form of the zone's names (what the
//! indexes are keyed by and queries are parsed into), fully qualified hickory names for records,
//! the reverse (PTR) names of addresses, and the fast hash of the zone's maps.

use std::collections::{HashMap, HashSet};
use std::hash::{BuildHasherDefault, Hasher};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use hickory_proto::rr::Name;

/// A fast, non-randomised hash for zone names (FxHash). Only the zone's own names are inserted,
/// so hash flooding by clients is not possible: queries only look up.
#[derive(Debug, Default, Clone, Copy)]
pub struct NameHasher(u64);

impl Hasher for NameHasher {
    fn write(&mut self, bytes: &[u8]) {
        const K: u64 = 0x51_7c_c1_b7_27_22_0a_95;
        let mut chunks = bytes.chunks_exact(8);
        for chunk in &mut chunks {
            let mut word = [0u8; 8];
            word.copy_from_slice(chunk);
            self.0 = (self.0.rotate_left(5) ^ u64::from_le_bytes(word)).wrapping_mul(K);
        }
        for byte in chunks.remainder() {
            self.0 = (self.0.rotate_left(5) ^ u64::from(*byte)).wrapping_mul(K);
        }
    }

    fn finish(&self) -> u64 {
        self.0
    }
}

/// Hash maps keyed by the zone's own names and keys: FxHash (see [`NameHasher`]).
pub(crate) type FastMap<K, V> = HashMap<K, V, BuildHasherDefault<NameHasher>>;

/// A hash set of the same kind.
pub(crate) type FastSet<K> = HashSet<K, BuildHasherDefault<NameHasher>>;

/// The wire form of a lower-case presentation name without the trailing dot.
pub fn wire_name(name: &str) -> Vec<u8> {
    let mut wire = Vec::with_capacity(name.len() + 2);
    if !name.is_empty() {
        for label in name.split('.') {
            // Labels of zone names are validated DNS labels (at most 63 bytes).
            wire.push(u8::try_from(label.len()).unwrap_or(63));
            wire.extend_from_slice(label.as_bytes());
        }
    }
    wire.push(0);
    wire
}

/// A lower-case name without the trailing dot as a fully qualified hickory name. Names come
/// from validated labels, so they always parse; the root is the fallback that never happens.
pub(crate) fn fqdn(name: &str) -> Name {
    let mut parsed = Name::from_ascii(name).unwrap_or_else(|_| Name::root());
    parsed.set_fqdn(true);
    parsed
}

/// Whether `name` is `apex` or below it (both lower case, no trailing dot).
pub(crate) fn in_zone(apex: &str, name: &str) -> bool {
    name == apex
        || name
            .strip_suffix(apex)
            .is_some_and(|rest| rest.ends_with('.'))
}

/// The reverse-lookup name of an address (`4.3.2.1.in-addr.arpa`, nibbles for IPv6).
pub fn reverse_name(ip: IpAddr) -> String {
    match ip {
        IpAddr::V4(v4) => {
            let [a, b, c, d] = v4.octets();
            format!("{d}.{c}.{b}.{a}.in-addr.arpa")
        }
        IpAddr::V6(v6) => {
            let mut name = String::with_capacity(72);
            for byte in v6.octets().iter().rev() {
                name.push_str(&format!("{:x}.{:x}.", byte & 0xf, byte >> 4));
            }
            name.push_str("ip6.arpa");
            name
        }
    }
}

/// The address of a canonical reverse name (as [`reverse_name`] writes it), in wire form.
pub(crate) fn parse_reverse(key: &[u8]) -> Option<IpAddr> {
    if let Some(body) = key.strip_suffix(b"\x07in-addr\x04arpa\x00") {
        let mut octets = [0u8; 4];
        let mut pos = 0;
        for i in 0..4 {
            let len = usize::from(*body.get(pos)?);
            let label = body.get(pos + 1..pos + 1 + len)?;
            *octets.get_mut(3 - i)? = parse_octet(label)?;
            pos += 1 + len;
        }
        return (pos == body.len()).then_some(IpAddr::V4(Ipv4Addr::from(octets)));
    }
    let body = key.strip_suffix(b"\x03ip6\x04arpa\x00")?;
    if body.len() != 64 {
        return None;
    }
    let mut octets = [0u8; 16];
    for (i, label) in body.chunks_exact(2).enumerate() {
        let [1, digit] = label else { return None };
        let nibble = match digit {
            b'0'..=b'9' => digit - b'0',
            b'a'..=b'f' => digit - b'a' + 10,
            _ => return None,
        };
        let byte = octets.get_mut(15 - i / 2)?;
        *byte |= if i % 2 == 0 { nibble } else { nibble << 4 };
    }
    Some(IpAddr::V6(Ipv6Addr::from(octets)))
}

/// A decimal octet without leading zeros.
fn parse_octet(label: &[u8]) -> Option<u8> {
    if label.is_empty() || label.len() > 3 || (label.len() > 1 && label.first() == Some(&b'0')) {
        return None;
    }
    let mut value = 0u16;
    for digit in label {
        if !digit.is_ascii_digit() {
            return None;
        }
        value = value * 10 + u16::from(digit - b'0');
    }
    u8::try_from(value).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reverse_names_parse_back_to_their_address() {
        for ip in [
            "10.0.0.1",
            "255.0.10.100",
            "0.0.0.0",
            "fd00::1",
            "2001:db8::ab:cdef",
        ] {
            let ip: IpAddr = ip.parse().unwrap();
            assert_eq!(parse_reverse(&wire_name(&reverse_name(ip))), Some(ip));
        }
        for bad in [
            "01.0.0.10.in-addr.arpa",
            "256.0.0.10.in-addr.arpa",
            "0.0.10.in-addr.arpa",
            "1.0.0.0.10.in-addr.arpa",
            "x.0.0.10.in-addr.arpa",
            "1.ip6.arpa",
        ] {
            assert_eq!(parse_reverse(&wire_name(bad)), None, "{bad}");
        }
    }
}

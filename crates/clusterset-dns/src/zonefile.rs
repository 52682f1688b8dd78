//! The zone in master-file format (RFC 1035 section 5), from the same records model the server
//! answers from: SOA and NS first, then every name of the zone in sorted order. Reverse (PTR)
//! names live outside the zone and are not part of the file.

use crate::zone::ClustersetZone;

/// Renders `zone` as a master file.
pub(crate) fn render(zone: &ClustersetZone) -> String {
    let mut names: Vec<&str> = zone.names().filter(|n| zone.in_zone(n)).collect();
    names.sort_unstable_by(|a, b| {
        let apex = zone.apex();
        (*b == apex).cmp(&(*a == apex)).then_with(|| a.cmp(b))
    });
    let mut out = format!("$ORIGIN {}.\n", zone.apex());
    for name in names {
        let Some(records) = zone.records(name) else {
            continue;
        };
        for qtype in records.record_types() {
            for record in zone.answer(name, qtype).answers {
                // hickory's presentation form: "<name> <ttl> IN <type> <rdata>".
                out.push_str(&record.to_string());
                out.push('\n');
            }
        }
    }
    out
}

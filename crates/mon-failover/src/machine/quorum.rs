//! Quorum arithmetic behind the machine's two safety guards.
//!
//! Ceph mons keep a quorum while a strict majority of the monmap is in it. Every monmap change
//! the machine causes must keep that true *at once*, without counting on a mon that has not
//! joined yet:
//!
//! - **join guard**: a new mon that joins is in the monmap before it is in the quorum (it first
//!   synchronizes its store), so the mons in quorum must be a majority of the monmap *plus one*;
//! - **removal guard**: the mons in quorum that stay must be a majority of the monmap *minus
//!   the removed mon*, and at least one mon must stay.
//!
//! ```
//! use mon_failover::quorum::{join_keeps_majority, removal_keeps_majority};
//!
//! // Three healthy mons: a fourth may join (3 of 4 stay in quorum while it syncs) ...
//! assert!(join_keeps_majority(3, 3));
//! // ... but not while one of the three is down: 2 of 4 is no quorum.
//! assert!(!join_keeps_majority(3, 2));
//! // Removing the dead mon first is safe (2 of 2), and then the new mon may join (2 of 3).
//! assert!(removal_keeps_majority(3, 2, false));
//! assert!(join_keeps_majority(2, 2));
//! // Four mons, one down: removing a healthy one leaves 2 of 3.
//! assert!(removal_keeps_majority(4, 3, true));
//! // Never the last mon.
//! assert!(!removal_keeps_majority(1, 1, true));
//! ```

/// The smallest strict majority of `monmap_size` mons.
///
/// ```
/// assert_eq!(mon_failover::quorum::majority(3), 2);
/// assert_eq!(mon_failover::quorum::majority(4), 3);
/// ```
pub const fn majority(monmap_size: usize) -> usize {
    monmap_size / 2 + 1
}

/// Whether a new mon may join a monmap of `monmap_size` mons of which `in_quorum` are in the
/// quorum, without the quorum depending on the joiner.
pub const fn join_keeps_majority(monmap_size: usize, in_quorum: usize) -> bool {
    in_quorum >= majority(monmap_size + 1)
}

/// Whether removing one mon from a monmap of `monmap_size` mons, of which `in_quorum` are in
/// the quorum, leaves a quorum: `removed_in_quorum` says whether the removed mon is one of them.
pub const fn removal_keeps_majority(
    monmap_size: usize,
    in_quorum: usize,
    removed_in_quorum: bool,
) -> bool {
    if monmap_size < 2 {
        return false;
    }
    let staying = in_quorum.saturating_sub(removed_in_quorum as usize);
    staying >= majority(monmap_size - 1)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guards against a brute-force definition: after the change, count the mons that
    /// are in quorum and compare with the new monmap size.
    #[test]
    fn guards_match_the_definition_for_small_monmaps() {
        for size in 0..=9usize {
            for in_quorum in 0..=size {
                let join_ok = 2 * in_quorum > size + 1;
                assert_eq!(
                    join_keeps_majority(size, in_quorum),
                    join_ok,
                    "join {size}/{in_quorum}"
                );
                for removed_in_quorum in [false, true] {
                    if removed_in_quorum && in_quorum == 0
                        || !removed_in_quorum && in_quorum == size
                    {
                        continue; // no such mon
                    }
                    let staying = in_quorum - usize::from(removed_in_quorum);
                    let remove_ok = size >= 2 && 2 * staying > size - 1;
                    assert_eq!(
                        removal_keeps_majority(size, in_quorum, removed_in_quorum),
                        remove_ok,
                        "remove from {size}/{in_quorum} (removed in quorum: {removed_in_quorum})"
                    );
                }
            }
        }
    }
}

//! Stable IP allocation from a CIDR (Globalnet style): a cluster gives each exported service a
//! global IP from its global CIDR, and each imported service a clusterset IP from its clusterset
//! CIDR. An assignment lasts as long as its key exists, survives restarts through
//! [`IpPool::restore`], and is released explicitly.

use std::collections::BTreeMap;
use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use ipnet::IpNet;

/// Allocation failures.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AllocError {
    /// Every address of the CIDR is assigned.
    #[error(
        "no free address left in {cidr} ({assigned} assigned): give the cluster a larger CIDR or unexport services"
    )]
    Exhausted {
        /// The pool's CIDR.
        cidr: IpNet,
        /// How many addresses are assigned.
        assigned: usize,
    },
    /// A persisted assignment lies outside the pool's CIDR.
    #[error(
        "{key} holds {ip}, which is outside {cidr}: the CIDR changed; release the old assignment (unexport and export again) or restore the old CIDR"
    )]
    OutsidePool {
        /// The key that holds the address.
        key: String,
        /// The address.
        ip: IpAddr,
        /// The pool's CIDR.
        cidr: IpNet,
    },
    /// Two keys claim one address.
    #[error(
        "{ip} is claimed by both {holder} and {claimant}: one of the persisted assignments is stale"
    )]
    AlreadyAssigned {
        /// The address.
        ip: IpAddr,
        /// The key that holds it.
        holder: String,
        /// The key that also claims it.
        claimant: String,
    },
}

/// A pool of addresses from one CIDR, assigned to keys (for example
/// [`ServiceKey`](mcs_types::ServiceKey)s). The network address, and for IPv4 prefixes shorter than
/// /31 the broadcast address, are never assigned.
///
/// ```
/// use mcs_controller::IpPool;
///
/// let mut pool = IpPool::new("242.1.0.0/30".parse()?);
/// assert_eq!(pool.assign(&"a")?.to_string(), "242.1.0.1");
/// assert_eq!(pool.assign(&"b")?.to_string(), "242.1.0.2");
/// assert_eq!(pool.assign(&"a")?.to_string(), "242.1.0.1"); // stable
/// assert!(pool.assign(&"c").is_err()); // .0 and .3 are never assigned
/// pool.release(&"a");
/// assert_eq!(pool.assign(&"c")?.to_string(), "242.1.0.1");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Debug, Clone)]
pub struct IpPool<K> {
    cidr: IpNet,
    by_key: BTreeMap<K, IpAddr>,
    by_ip: BTreeMap<IpAddr, K>,
    /// Addresses below this offset are all assigned (a search hint, not state).
    next_free_hint: u128,
}

impl<K: Ord + Clone + fmt::Display> IpPool<K> {
    /// An empty pool over `cidr` (host bits of the CIDR are ignored).
    pub fn new(cidr: IpNet) -> Self {
        Self {
            cidr: cidr.trunc(),
            by_key: BTreeMap::new(),
            by_ip: BTreeMap::new(),
            next_free_hint: 0,
        }
    }

    /// The pool's CIDR.
    pub fn cidr(&self) -> IpNet {
        self.cidr
    }

    /// The address assigned to `key`, if any.
    pub fn get(&self, key: &K) -> Option<IpAddr> {
        self.by_key.get(key).copied()
    }

    /// How many addresses are assigned.
    pub fn len(&self) -> usize {
        self.by_key.len()
    }

    /// Whether no address is assigned.
    pub fn is_empty(&self) -> bool {
        self.by_key.is_empty()
    }

    /// Every assignment, for persisting.
    pub fn assignments(&self) -> impl Iterator<Item = (&K, IpAddr)> {
        self.by_key.iter().map(|(k, ip)| (k, *ip))
    }

    /// Re-establishes a persisted assignment (after a restart). Restoring the same assignment
    /// twice is fine; an address outside the CIDR or claimed by another key is an error and
    /// changes nothing.
    pub fn restore(&mut self, key: K, ip: IpAddr) -> Result<(), AllocError> {
        if !self.cidr.contains(&ip) || !self.usable(ip) {
            return Err(AllocError::OutsidePool {
                key: key.to_string(),
                ip,
                cidr: self.cidr,
            });
        }
        if let Some(holder) = self.by_ip.get(&ip)
            && *holder != key
        {
            return Err(AllocError::AlreadyAssigned {
                ip,
                holder: holder.to_string(),
                claimant: key.to_string(),
            });
        }
        if let Some(previous) = self.by_key.insert(key.clone(), ip) {
            self.by_ip.remove(&previous);
        }
        self.by_ip.insert(ip, key);
        Ok(())
    }

    /// The address of `key`: its existing assignment, or the lowest free address.
    pub fn assign(&mut self, key: &K) -> Result<IpAddr, AllocError> {
        if let Some(ip) = self.by_key.get(key) {
            return Ok(*ip);
        }
        let size = self.size();
        let mut offset = self.next_free_hint.max(self.first_usable_offset());
        while offset < size {
            let ip = self.nth(offset);
            if self.usable(ip) && !self.by_ip.contains_key(&ip) {
                self.by_key.insert(key.clone(), ip);
                self.by_ip.insert(ip, key.clone());
                self.next_free_hint = offset + 1;
                return Ok(ip);
            }
            offset += 1;
        }
        Err(AllocError::Exhausted {
            cidr: self.cidr,
            assigned: self.by_key.len(),
        })
    }

    /// Releases the address of `key`; returns it.
    pub fn release(&mut self, key: &K) -> Option<IpAddr> {
        let ip = self.by_key.remove(key)?;
        self.by_ip.remove(&ip);
        let offset = self.offset_of(ip);
        self.next_free_hint = self.next_free_hint.min(offset);
        Some(ip)
    }

    /// Releases every assignment whose key `keep` rejects (for example exports that no longer
    /// exist after a full resync); returns what was released.
    pub fn retain(&mut self, mut keep: impl FnMut(&K) -> bool) -> Vec<(K, IpAddr)> {
        let gone: Vec<K> = self.by_key.keys().filter(|k| !keep(k)).cloned().collect();
        gone.into_iter()
            .filter_map(|k| self.release(&k).map(|ip| (k, ip)))
            .collect()
    }

    fn size(&self) -> u128 {
        let host_bits = u32::from(self.cidr.max_prefix_len() - self.cidr.prefix_len());
        1u128.checked_shl(host_bits).unwrap_or(u128::MAX)
    }

    fn base(&self) -> u128 {
        match self.cidr.network() {
            IpAddr::V4(v4) => u128::from(u32::from(v4)),
            IpAddr::V6(v6) => u128::from(v6),
        }
    }

    fn nth(&self, offset: u128) -> IpAddr {
        let value = self.base().wrapping_add(offset);
        match self.cidr {
            // The offset is below the v4 pool size, so the value fits in 32 bits.
            IpNet::V4(_) => IpAddr::V4(Ipv4Addr::from(value as u32)),
            IpNet::V6(_) => IpAddr::V6(Ipv6Addr::from(value)),
        }
    }

    fn offset_of(&self, ip: IpAddr) -> u128 {
        let value = match ip {
            IpAddr::V4(v4) => u128::from(u32::from(v4)),
            IpAddr::V6(v6) => u128::from(v6),
        };
        value.wrapping_sub(self.base())
    }

    /// Point-to-point sized pools (/31, /32, /127, /128) use every address; larger ones skip
    /// the network address.
    fn first_usable_offset(&self) -> u128 {
        u128::from(self.cidr.prefix_len() + 1 < self.cidr.max_prefix_len())
    }

    /// Not the network address, nor the IPv4 broadcast address of prefixes shorter than /31.
    fn usable(&self, ip: IpAddr) -> bool {
        let offset = self.offset_of(ip);
        let broadcast = matches!(self.cidr, IpNet::V4(_))
            && self.cidr.prefix_len() < 31
            && offset == self.size() - 1;
        offset >= self.first_usable_offset() && !broadcast
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeSet;

    fn pool(cidr: &str) -> IpPool<String> {
        IpPool::new(cidr.parse().unwrap())
    }

    #[test]
    fn assigns_lowest_free_and_is_stable() {
        let mut p = pool("242.1.0.0/16");
        assert_eq!(p.assign(&"a".into()).unwrap().to_string(), "242.1.0.1");
        assert_eq!(p.assign(&"b".into()).unwrap().to_string(), "242.1.0.2");
        assert_eq!(p.assign(&"a".into()).unwrap().to_string(), "242.1.0.1");
        assert_eq!(p.release(&"a".into()).unwrap().to_string(), "242.1.0.1");
        assert_eq!(p.assign(&"c".into()).unwrap().to_string(), "242.1.0.1");
        assert_eq!(p.assign(&"d".into()).unwrap().to_string(), "242.1.0.3");
    }

    #[test]
    fn restore_keeps_persisted_addresses_and_rejects_bad_ones() {
        let mut p = pool("242.1.0.0/24");
        p.restore("mon-a".into(), "242.1.0.7".parse().unwrap())
            .unwrap();
        p.restore("mon-a".into(), "242.1.0.7".parse().unwrap())
            .unwrap();
        assert_eq!(p.assign(&"mon-a".into()).unwrap().to_string(), "242.1.0.7");
        let err = p
            .restore("mon-b".into(), "242.1.0.7".parse().unwrap())
            .unwrap_err();
        assert!(matches!(err, AllocError::AlreadyAssigned { .. }), "{err}");
        let err = p
            .restore("mon-c".into(), "242.2.0.7".parse().unwrap())
            .unwrap_err();
        assert_eq!(
            err.to_string(),
            "mon-c holds 242.2.0.7, which is outside 242.1.0.0/24: the CIDR changed; release the old assignment (unexport and export again) or restore the old CIDR"
        );
        assert!(
            p.restore("x".into(), "242.1.0.255".parse().unwrap())
                .is_err()
        );
        assert_eq!(p.len(), 1);
    }

    #[test]
    fn exhaustion_is_reported_with_the_fix() {
        let mut p = pool("10.0.0.0/30");
        p.assign(&"a".into()).unwrap();
        p.assign(&"b".into()).unwrap();
        let err = p.assign(&"c".into()).unwrap_err();
        assert_eq!(
            err.to_string(),
            "no free address left in 10.0.0.0/30 (2 assigned): give the cluster a larger CIDR or unexport services"
        );
    }

    #[test]
    fn ipv6_pools_work() {
        let mut p = pool("fd00:242::/112");
        assert_eq!(p.assign(&"a".into()).unwrap().to_string(), "fd00:242::1");
        let mut small = pool("fd00::/127");
        assert_eq!(small.assign(&"a".into()).unwrap().to_string(), "fd00::");
        assert_eq!(small.assign(&"b".into()).unwrap().to_string(), "fd00::1");
    }

    #[test]
    fn retain_releases_what_is_gone() {
        let mut p = pool("242.1.0.0/24");
        for k in ["a", "b", "c"] {
            p.assign(&k.to_owned()).unwrap();
        }
        let released = p.retain(|k| k != "b");
        assert_eq!(
            released,
            vec![("b".to_owned(), "242.1.0.2".parse().unwrap())]
        );
        assert_eq!(p.assign(&"d".into()).unwrap().to_string(), "242.1.0.2");
    }

    proptest! {
        #[test]
        fn never_assigns_one_address_twice(ops in proptest::collection::vec((0u8..20, any::<bool>()), 0..200)) {
            let mut p = pool("242.1.0.0/27");
            for (key, release) in ops {
                let key = format!("k{key}");
                if release {
                    p.release(&key);
                } else {
                    let _ = p.assign(&key);
                }
                let ips: BTreeSet<IpAddr> = p.assignments().map(|(_, ip)| ip).collect();
                prop_assert_eq!(ips.len(), p.len());
                for ip in &ips {
                    prop_assert!(p.cidr().contains(ip));
                    prop_assert!(ip.to_string() != "242.1.0.0" && ip.to_string() != "242.1.0.31");
                }
            }
        }
    }
}

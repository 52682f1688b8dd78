//! Query counters of the server: queries answered, by transport and response code.
//!
//! Counting sits on the hot path, so it never takes a lock and never allocates. Every UDP
//! worker owns one slot (its own cache line) and adds a whole batch to it with relaxed atomics
//! after answering the batch; TCP connections add each answer to one of a few striped slots.
//! Reading ([`QueryCounter::snapshot`]) sums the slots; it is meant for scrapes, not for every
//! query.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::wire::{Rcode, Transport};

/// Answers counted per response code, in [`Rcode::ALL`] order: what one worker adds up locally
/// before it publishes the sum.
pub type LocalCounts = [u64; Rcode::COUNT];

/// The counters of one worker, alone on its cache lines (so that workers never write to the
/// same line).
#[derive(Debug, Default)]
#[repr(align(128))]
struct Slot {
    counts: [AtomicU64; Rcode::COUNT],
}

impl Slot {
    fn add(&self, rcode: Rcode, n: u64) {
        if let Some(counter) = self.counts.get(rcode.index()) {
            counter.fetch_add(n, Ordering::Relaxed);
        }
    }

    fn add_all(&self, local: &LocalCounts) {
        for (counter, n) in self.counts.iter().zip(local) {
            if *n != 0 {
                counter.fetch_add(*n, Ordering::Relaxed);
            }
        }
    }

    fn load(&self) -> LocalCounts {
        let mut out = [0; Rcode::COUNT];
        for (value, counter) in out.iter_mut().zip(&self.counts) {
            *value = counter.load(Ordering::Relaxed);
        }
        out
    }
}

/// TCP connections spread their counting over this many slots (by connection number), so that
/// connections served on different threads rarely write to the same cache line.
const TCP_SLOTS: usize = 8;

/// A handle on a server's query counters: cheap to clone, keeps counting after the server is
/// gone (the counts then stay as they were). Get one from
/// [`DnsServer::query_counter`](crate::DnsServer::query_counter).
#[derive(Debug, Clone)]
pub struct QueryCounter {
    slots: Arc<[Slot]>,
    udp_slots: usize,
}

impl QueryCounter {
    /// Counters for `udp_workers` UDP workers and the TCP connections.
    pub(crate) fn new(udp_workers: usize) -> Self {
        let udp_slots = udp_workers.max(1);
        Self {
            slots: (0..udp_slots + TCP_SLOTS)
                .map(|_| Slot::default())
                .collect(),
            udp_slots,
        }
    }

    /// The slot of UDP worker `worker`.
    pub(crate) fn udp_worker(&self, worker: usize) -> WorkerCounter {
        WorkerCounter {
            counter: self.clone(),
            slot: worker % self.udp_slots,
        }
    }

    /// The slot of TCP connection number `connection`.
    pub(crate) fn tcp_connection(&self, connection: usize) -> WorkerCounter {
        WorkerCounter {
            counter: self.clone(),
            slot: self.udp_slots + connection % TCP_SLOTS,
        }
    }

    /// The answers counted so far. Each counter is read on its own (relaxed), so a snapshot
    /// taken while queries are answered may count a batch that a counter read a moment earlier
    /// missed; every counter only grows.
    pub fn snapshot(&self) -> QueryCounts {
        let mut counts = QueryCounts::default();
        for (i, slot) in self.slots.iter().enumerate() {
            let into = if i < self.udp_slots {
                &mut counts.udp
            } else {
                &mut counts.tcp
            };
            for (total, n) in into.iter_mut().zip(slot.load()) {
                *total += n;
            }
        }
        counts
    }
}

/// The counters one worker (a UDP socket's thread, or a TCP connection) adds to.
#[derive(Debug, Clone)]
pub(crate) struct WorkerCounter {
    counter: QueryCounter,
    slot: usize,
}

impl WorkerCounter {
    /// Adds one answer.
    pub(crate) fn add(&self, rcode: Rcode) {
        if let Some(slot) = self.counter.slots.get(self.slot) {
            slot.add(rcode, 1);
        }
    }

    /// Adds the counts of a batch (and leaves `local` as it is).
    pub(crate) fn add_all(&self, local: &LocalCounts) {
        if let Some(slot) = self.counter.slots.get(self.slot) {
            slot.add_all(local);
        }
    }
}

/// Queries answered, by transport and response code: a snapshot of a [`QueryCounter`].
///
/// ```
/// use clusterset_dns::stats::QueryCounts;
/// use clusterset_dns::wire::{Rcode, Transport};
///
/// let counts: QueryCounts = [(Transport::Udp, Rcode::NxDomain, 2), (Transport::Tcp, Rcode::NoError, 1)]
///     .into_iter()
///     .collect();
/// assert_eq!(counts.get(Transport::Udp, Rcode::NxDomain), 2);
/// assert_eq!(counts.total(), 3);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct QueryCounts {
    udp: LocalCounts,
    tcp: LocalCounts,
}

impl QueryCounts {
    /// Queries answered over `transport` with `rcode`.
    pub fn get(&self, transport: Transport, rcode: Rcode) -> u64 {
        let counts = match transport {
            Transport::Udp => &self.udp,
            Transport::Tcp => &self.tcp,
        };
        counts.get(rcode.index()).copied().unwrap_or(0)
    }

    /// All queries answered.
    pub fn total(&self) -> u64 {
        self.udp.iter().chain(&self.tcp).sum()
    }

    /// Every (transport, code, count), zeros included: UDP first, codes in [`Rcode::ALL`]
    /// order.
    pub fn iter(&self) -> impl Iterator<Item = (Transport, Rcode, u64)> + '_ {
        [Transport::Udp, Transport::Tcp]
            .into_iter()
            .flat_map(move |t| Rcode::ALL.into_iter().map(move |r| (t, r, self.get(t, r))))
    }
}

impl FromIterator<(Transport, Rcode, u64)> for QueryCounts {
    /// Sums the counts given (a transport and code may appear more than once).
    fn from_iter<I: IntoIterator<Item = (Transport, Rcode, u64)>>(iter: I) -> Self {
        let mut counts = Self::default();
        for (transport, rcode, n) in iter {
            let into = match transport {
                Transport::Udp => &mut counts.udp,
                Transport::Tcp => &mut counts.tcp,
            };
            if let Some(total) = into.get_mut(rcode.index()) {
                *total = total.saturating_add(n);
            }
        }
        counts
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn workers_add_to_their_own_slots_and_the_snapshot_sums_them_by_transport() {
        let counter = QueryCounter::new(2);
        let mut batch: LocalCounts = [0; Rcode::COUNT];
        batch[Rcode::NoError.index()] = 30;
        batch[Rcode::NxDomain.index()] = 2;
        counter.udp_worker(0).add_all(&batch);
        counter.udp_worker(1).add_all(&batch);
        counter.udp_worker(1).add(Rcode::Refused);
        // Connections beyond the stripes share slots; all of them count.
        for connection in 0..TCP_SLOTS + 3 {
            counter.tcp_connection(connection).add(Rcode::ServFail);
        }
        let counts = counter.clone().snapshot();
        assert_eq!(counts.get(Transport::Udp, Rcode::NoError), 60);
        assert_eq!(counts.get(Transport::Udp, Rcode::NxDomain), 4);
        assert_eq!(counts.get(Transport::Udp, Rcode::Refused), 1);
        assert_eq!(counts.get(Transport::Udp, Rcode::ServFail), 0);
        assert_eq!(
            counts.get(Transport::Tcp, Rcode::ServFail),
            TCP_SLOTS as u64 + 3
        );
        assert_eq!(counts.get(Transport::Tcp, Rcode::NoError), 0);
        assert_eq!(counts.total(), 60 + 4 + 1 + 11);
        assert_eq!(counts.iter().count(), 2 * Rcode::COUNT);
        assert_eq!(
            counts.iter().map(|(_, _, n)| n).sum::<u64>(),
            counts.total()
        );
    }

    #[test]
    fn slots_do_not_share_cache_lines() {
        assert!(std::mem::align_of::<Slot>() >= 128);
        assert_eq!(std::mem::size_of::<Slot>() % 128, 0);
    }
}

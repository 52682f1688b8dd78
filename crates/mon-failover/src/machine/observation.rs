//! What the machine is told at every step: Ceph's view of the mons, where each mon should be,
//! and what became of the commands of the previous step.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::net::IpAddr;

use ceph_address_plan::MonId;
use serde::{Deserialize, Serialize};

use super::Command;

/// Which kind of address mons must advertise.
///
/// With Multi-Cluster Services enabled every mon advertises the clusterset-global IP of its own
/// exported Service; disabled, it advertises its Service's cluster-local IP (Rook's default).
/// Changing this value makes every mon on the other kind of address misplaced, and the machine
/// moves them back one at a time (see the crate documentation, "Disabling MCS").
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Addressing {
    /// The Service's cluster IP (MCS disabled).
    ClusterLocal,
    /// The clusterset-global IP of the mon's exported Service (MCS enabled).
    Clusterset,
}

impl fmt::Display for Addressing {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Addressing::ClusterLocal => "cluster-local",
            Addressing::Clusterset => "clusterset",
        })
    }
}

/// Whether a mon advertises the address it should, as the runtime judges it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Placement {
    /// The mon advertises the address it should.
    Placed,
    /// The mon advertises another address and must be replaced by a new mon.
    Misplaced,
    /// Cannot be decided now (for example the MCS agent has not resolved the export yet). The
    /// mon is left alone until it can.
    Unknown,
}

/// One mon of the monmap.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct ObservedMon {
    /// The IP the monmap holds for the mon (its public address).
    pub address: IpAddr,
    /// Whether the mon is in the quorum.
    pub in_quorum: bool,
    /// Whether that address is the one the mon should advertise.
    pub placement: Placement,
}

/// Ceph's view, or why there is none.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum ClusterView {
    /// No mon answered with a quorum (for example `ceph quorum_status` timed out). The machine
    /// does nothing until Ceph answers again: it never changes mons it cannot see.
    Unreachable {
        /// Why, for status output.
        reason: String,
    },
    /// The monmap, with quorum membership, from one consistent answer of the quorum.
    Reachable {
        /// Every mon of the monmap.
        mons: BTreeMap<MonId, ObservedMon>,
    },
}

impl ClusterView {
    /// A reachable cluster with these mons.
    pub fn reachable(mons: impl IntoIterator<Item = (MonId, ObservedMon)>) -> Self {
        ClusterView::Reachable {
            mons: mons.into_iter().collect(),
        }
    }
}

/// What became of one command of the previous step. Drivers report every outcome once, in the
/// observation that follows the execution; after a restart there are none, and the machine
/// re-issues what it still needs (every command is idempotent).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum CommandOutcome {
    /// The command completed.
    Done(Command),
    /// [`Command::ProvisionAddress`] completed and the mon's address is known.
    AddressReady {
        /// The mon.
        mon: MonId,
        /// Its address.
        address: IpAddr,
    },
    /// [`Command::ProvisionAddress`] completed but the address is not known yet (for example
    /// the clusterset DNS name does not resolve yet).
    AddressPending {
        /// The mon.
        mon: MonId,
    },
    /// The command failed; the machine retries it until its phase times out.
    Failed {
        /// The command.
        command: Command,
        /// What went wrong.
        error: String,
    },
}

/// Everything the machine is told at one step.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Observation {
    /// Which kind of address mons must advertise now.
    pub addressing: Addressing,
    /// Ceph's view of the mons.
    pub cluster: ClusterView,
    /// What became of the previous step's commands.
    pub outcomes: Vec<CommandOutcome>,
}

impl Observation {
    /// An observation of a reachable cluster with no command outcomes.
    pub fn reachable(
        addressing: Addressing,
        mons: impl IntoIterator<Item = (MonId, ObservedMon)>,
    ) -> Self {
        Observation {
            addressing,
            cluster: ClusterView::reachable(mons),
            outcomes: Vec::new(),
        }
    }

    /// The same observation with these command outcomes.
    pub fn with_outcomes(mut self, outcomes: Vec<CommandOutcome>) -> Self {
        self.outcomes = outcomes;
        self
    }
}

/// The monmap of a reachable cluster, with the quorum arithmetic the machine's guards use.
#[derive(Debug, Clone, Copy)]
pub(crate) struct MonView<'a> {
    pub mons: &'a BTreeMap<MonId, ObservedMon>,
}

impl MonView<'_> {
    pub fn contains(&self, mon: &MonId) -> bool {
        self.mons.contains_key(mon)
    }

    pub fn in_quorum(&self, mon: &MonId) -> bool {
        self.mons.get(mon).is_some_and(|m| m.in_quorum)
    }

    pub fn address(&self, mon: &MonId) -> Option<IpAddr> {
        self.mons.get(mon).map(|m| m.address)
    }

    /// Mons of the monmap that are out of quorum, except those in `except`.
    pub fn out_of_quorum_except(&self, except: &[&MonId]) -> BTreeSet<MonId> {
        self.mons
            .iter()
            .filter(|(id, m)| !m.in_quorum && !except.contains(id))
            .map(|(id, _)| id.clone())
            .collect()
    }

    pub fn quorum_size(&self) -> usize {
        self.mons.values().filter(|m| m.in_quorum).count()
    }
}

//! What the machine asks its driver to do. Every command is idempotent: the machine re-issues a
//! command whose outcome it has not seen (for example after a restart), so doing it twice must
//! be the same as doing it once.

use std::fmt;
use std::net::IpAddr;

use ceph_address_plan::MonId;
use serde::{Deserialize, Serialize};

use super::Addressing;

/// One action for the driver: [`MonRuntime`](crate::MonRuntime) actions and one monmap change
/// through [`CephMonAdmin`](crate::CephMonAdmin).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", tag = "action")]
pub enum Command {
    /// Create what gives the new mon its address (Rook: its Service and, with MCS, its
    /// ServiceExport) and report the address once it is known
    /// ([`MonRuntime::provision_address`](crate::MonRuntime::provision_address)).
    ProvisionAddress {
        /// The new mon.
        mon: MonId,
        /// Which kind of address it gets.
        addressing: Addressing,
    },
    /// Start the mon daemon advertising `address`; it joins the quorum by itself
    /// ([`MonRuntime::start`](crate::MonRuntime::start)).
    StartMon {
        /// The mon.
        mon: MonId,
        /// Its public address.
        address: IpAddr,
    },
    /// Remove the mon from the monmap (`ceph mon remove`,
    /// [`CephMonAdmin::remove_mon`](crate::CephMonAdmin::remove_mon)).
    RemoveFromMonmap {
        /// The mon.
        mon: MonId,
    },
    /// Stop the mon daemon and delete everything the runtime holds for it: data, Service,
    /// export ([`MonRuntime::delete`](crate::MonRuntime::delete)).
    DeleteMon {
        /// The mon.
        mon: MonId,
    },
}

impl Command {
    /// The mon the command acts on.
    pub fn mon(&self) -> &MonId {
        match self {
            Command::ProvisionAddress { mon, .. }
            | Command::StartMon { mon, .. }
            | Command::RemoveFromMonmap { mon }
            | Command::DeleteMon { mon } => mon,
        }
    }
}

impl fmt::Display for Command {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Command::ProvisionAddress { mon, addressing } => {
                write!(f, "provision a {addressing} address for mon {mon}")
            }
            Command::StartMon { mon, address } => write!(f, "start mon {mon} at {address}"),
            Command::RemoveFromMonmap { mon } => write!(f, "remove mon {mon} from the monmap"),
            Command::DeleteMon { mon } => write!(f, "stop and delete mon {mon}"),
        }
    }
}

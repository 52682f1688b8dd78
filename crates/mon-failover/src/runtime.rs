//! The mon runtime port: what gives a mon its address and runs its daemon.
//!
//! The operator implements it with Kubernetes objects (Rook-layout Service, ServiceExport and
//! Deployment per mon); `ceph-local`'s `LocalMonRuntime` implements it with local `ceph-mon`
//! processes for tests, the demo and the network-namespace lab.

use std::net::IpAddr;

use async_trait::async_trait;
use ceph_address_plan::MonId;

use crate::admin::AdminError;
use crate::program::CommandError;
use crate::{Addressing, Placement};

/// What went wrong in a runtime.
#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    /// A Ceph program failed.
    #[error(transparent)]
    Command(#[from] CommandError),
    /// The admin port failed (for example fetching the monmap for a new mon).
    #[error(transparent)]
    Admin(#[from] AdminError),
    /// A file operation failed.
    #[error("{context}")]
    Io {
        /// What was being done, with the path.
        context: String,
        /// The OS error.
        source: std::io::Error,
    },
    /// The runtime has no address of this kind for the mon.
    #[error("no {addressing} address can be given to mon {mon}: {fix}")]
    NoAddress {
        /// The mon.
        mon: MonId,
        /// The kind of address.
        addressing: Addressing,
        /// What to change.
        fix: String,
    },
    /// Another runtime's error (for example a Kubernetes API error): its message, and its
    /// causes as this error's.
    #[error(transparent)]
    Other(Box<dyn std::error::Error + Send + Sync>),
}

/// Runs mon daemons and gives them addresses. Every method is idempotent: the machine re-issues
/// a command whose outcome it did not see. With the `mock` feature, `MockMonRuntime` is a
/// mockall mock.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait MonRuntime: Send + Sync {
    /// Creates what gives `mon` an address of this kind (Rook: its Service and, for
    /// [`Addressing::Clusterset`], its ServiceExport) and returns the address once it is known,
    /// `None` while it is not (for example the export is not resolved yet).
    async fn provision_address(
        &self,
        mon: &MonId,
        addressing: Addressing,
    ) -> Result<Option<IpAddr>, RuntimeError>;

    /// Whether `mon`, which the monmap shows at `advertised`, is where it should be under
    /// `addressing`: [`Placement::Unknown`] while that cannot be decided.
    async fn placement(
        &self,
        mon: &MonId,
        advertised: IpAddr,
        addressing: Addressing,
    ) -> Result<Placement, RuntimeError>;

    /// Starts the mon daemon advertising `address` (bound to its own local address). A mon not
    /// in the monmap is built from the current monmap and joins the quorum by itself.
    async fn start(&self, mon: &MonId, address: IpAddr) -> Result<(), RuntimeError>;

    /// Stops the mon daemon, keeping its data and address.
    async fn stop(&self, mon: &MonId) -> Result<(), RuntimeError>;

    /// Stops the mon daemon and deletes everything the runtime holds for it: data, address,
    /// (Rook) Service and export.
    async fn delete(&self, mon: &MonId) -> Result<(), RuntimeError>;
}

/// The placement of a mon advertising `advertised`, given the address it should have under the
/// current addressing (`desired`) and whether it has an address of the other kind.
///
/// ```
/// use mon_failover::{judge_placement, Placement};
/// let ip = |s: &str| s.parse::<std::net::IpAddr>().unwrap();
/// assert_eq!(judge_placement(ip("242.1.0.4"), Some(ip("242.1.0.4")), false), Placement::Placed);
/// assert_eq!(judge_placement(ip("10.96.0.4"), Some(ip("242.1.0.4")), true), Placement::Misplaced);
/// // No global IP yet, but the mon sits on its cluster IP: it must move.
/// assert_eq!(judge_placement(ip("10.96.0.4"), None, true), Placement::Misplaced);
/// // Nothing known about the mon: leave it alone.
/// assert_eq!(judge_placement(ip("10.96.0.4"), None, false), Placement::Unknown);
/// ```
pub fn judge_placement(
    advertised: IpAddr,
    desired: Option<IpAddr>,
    has_other_kind: bool,
) -> Placement {
    match desired {
        Some(desired) if desired == advertised => Placement::Placed,
        Some(_) => Placement::Misplaced,
        None if has_other_kind => Placement::Misplaced,
        None => Placement::Unknown,
    }
}

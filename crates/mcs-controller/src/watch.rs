//! What the core's watches deliver ([`Event`]) and which objects they select (the label
//! selectors below): the contract between [`AgentCore`](crate::core::AgentCore) and the shell
//! that watches the API servers for it.

use mcs_types::labels::{
    CLUSTERSET_ENDPOINTSLICE_CONTROLLER, ENDPOINTSLICE_MANAGED_BY_LABEL,
    KUBERNETES_SERVICE_NAME_LABEL,
};

use crate::broker;

/// One event of a watch (list, then watch) of one kind of object, with the semantics of
/// kube-runtime's `watcher::Event`, which the agent's kube shell converts into it one to one.
///
/// A watch starts, and after an error it cannot resume from may start again, with a complete
/// list: [`Init`](Self::Init), one [`InitApply`](Self::InitApply) per object, then
/// [`InitDone`](Self::InitDone). Until `InitDone` the previous view stays in use; at `InitDone`
/// the listed objects replace it (an object not listed again was deleted meanwhile). Between
/// lists, [`Apply`](Self::Apply) and [`Delete`](Self::Delete) report single changes.
#[derive(Debug, Clone, PartialEq)]
pub enum Event<K> {
    /// An object was added or modified.
    Apply(K),
    /// An object was deleted (its last known state).
    Delete(K),
    /// A list starts: the objects until [`InitDone`](Self::InitDone) are the complete set.
    Init,
    /// One object of the list.
    InitApply(K),
    /// The list is complete: objects it did not deliver are gone.
    InitDone,
}

impl<K> Event<K> {
    /// The object the event carries (none for [`Init`](Self::Init) and
    /// [`InitDone`](Self::InitDone)).
    pub fn object_mut(&mut self) -> Option<&mut K> {
        match self {
            Self::Apply(object) | Self::Delete(object) | Self::InitApply(object) => Some(object),
            Self::Init | Self::InitDone => None,
        }
    }
}

/// The label selector of the watch of the member cluster's own EndpointSlices: the slices of a
/// Service (`kubernetes.io/service-name` set) that our controller did not write.
///
/// ```
/// assert_eq!(
///     mcs_controller::watch::local_slices_selector(),
///     "kubernetes.io/service-name,endpointslice.kubernetes.io/managed-by!=mcs-controller.clusterset.io"
/// );
/// ```
pub fn local_slices_selector() -> String {
    format!(
        "{KUBERNETES_SERVICE_NAME_LABEL},{ENDPOINTSLICE_MANAGED_BY_LABEL}!={CLUSTERSET_ENDPOINTSLICE_CONTROLLER}"
    )
}

/// The label selector of the watch of the EndpointSlices the agent imported: those managed by
/// our controller.
///
/// ```
/// assert_eq!(
///     mcs_controller::watch::imported_slices_selector(),
///     "endpointslice.kubernetes.io/managed-by=mcs-controller.clusterset.io"
/// );
/// ```
pub fn imported_slices_selector() -> String {
    format!("{ENDPOINTSLICE_MANAGED_BY_LABEL}={CLUSTERSET_ENDPOINTSLICE_CONTROLLER}")
}

/// The label selector of the broker's Lease watch: the heartbeat Leases (those with a cluster
/// id label), not the other Leases of the namespace.
pub const LEASES_SELECTOR: &str = broker::CLUSTER_ID_LABEL;

//! The typed values of a [`DaemonEntry`]'s text fields that the operator reads back (its mon
//! migration gate, `mcsctl`): the daemon's state and the words of a Valid and Ready export.
//! One home for writing and parsing them.

use std::fmt;
use std::str::FromStr;

use ceph_address_plan::DaemonStatus;

use crate::DaemonEntry;

/// [`DaemonEntry::export`] of an export that is Valid and Ready.
pub const EXPORT_VALID_READY: &str = "Valid, Ready";

/// Where a daemon stands, as [`DaemonEntry::state`] says it: the planner's
/// [`DaemonStatus`] without its details.
///
/// ```
/// use mcs_ceph_api::DaemonState;
/// assert_eq!(DaemonState::Replace.to_string(), "Replace");
/// assert_eq!("UpdateArgs".parse::<DaemonState>(), Ok(DaemonState::UpdateArgs));
/// assert!("Gone".parse::<DaemonState>().is_err());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum DaemonState {
    /// It advertises its planned address.
    UpToDate,
    /// It does not run yet.
    Start,
    /// Its Deployment's arguments must change.
    UpdateArgs,
    /// A mon on the wrong address: a new mon replaces it.
    Replace,
    /// Its address is not known yet.
    Waiting,
}

impl DaemonState {
    /// Every state, in the order above.
    pub const ALL: [Self; 5] = [
        Self::UpToDate,
        Self::Start,
        Self::UpdateArgs,
        Self::Replace,
        Self::Waiting,
    ];

    /// The state's name in the status.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::UpToDate => "UpToDate",
            Self::Start => "Start",
            Self::UpdateArgs => "UpdateArgs",
            Self::Replace => "Replace",
            Self::Waiting => "Waiting",
        }
    }
}

impl From<DaemonStatus> for DaemonState {
    fn from(status: DaemonStatus) -> Self {
        match status {
            DaemonStatus::UpToDate => Self::UpToDate,
            DaemonStatus::Start => Self::Start,
            DaemonStatus::UpdateArgs { .. } => Self::UpdateArgs,
            DaemonStatus::Replace { .. } => Self::Replace,
            DaemonStatus::Waiting => Self::Waiting,
        }
    }
}

impl fmt::Display for DaemonState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A [`DaemonEntry::state`] that is none of [`DaemonState`]'s (written by another version).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownDaemonState(pub String);

impl fmt::Display for UnknownDaemonState {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "unknown daemon state {:?}", self.0)
    }
}

impl std::error::Error for UnknownDaemonState {}

impl FromStr for DaemonState {
    type Err = UnknownDaemonState;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .into_iter()
            .find(|state| state.as_str() == text)
            .ok_or_else(|| UnknownDaemonState(text.to_owned()))
    }
}

impl DaemonEntry {
    /// [`DaemonEntry::state`] parsed (`None` for a state this version does not know).
    pub fn daemon_state(&self) -> Option<DaemonState> {
        self.state.parse().ok()
    }

    /// Whether the entry's Service is exported and its export is Valid and Ready.
    pub fn export_valid_ready(&self) -> bool {
        self.exported && self.export.as_deref() == Some(EXPORT_VALID_READY)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_state_reads_back_as_itself() {
        for state in DaemonState::ALL {
            assert_eq!(state.to_string().parse::<DaemonState>(), Ok(state));
        }
        assert_eq!(
            "Replaced".parse::<DaemonState>(),
            Err(UnknownDaemonState("Replaced".to_owned()))
        );
    }
}

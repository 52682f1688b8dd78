//! The decision's view of an exported daemon's ServiceExport.

use ceph_address_plan::{ExportStatus, export_problem};
use mcs_ceph_api::EXPORT_VALID_READY;

/// What the decision keeps of an observed ServiceExport.
#[derive(Debug, Clone)]
pub(super) struct ObservedExport {
    pub(super) uid: Option<String>,
    pub(super) status: Option<mcs_types::ServiceExportStatus>,
}

/// The export of one exported daemon, as observed.
#[derive(Debug, Clone)]
pub(super) struct ExportView {
    pub(super) name: String,
    pub(super) observed: Option<ObservedExport>,
}

impl ExportView {
    pub(super) fn status(&self) -> Option<ExportStatus> {
        self.observed.as_ref().map(|o| {
            o.status
                .as_ref()
                .map(ExportStatus::from)
                .unwrap_or_default()
        })
    }

    pub(super) fn condition(&self, type_: &str) -> Option<&str> {
        let status = self.observed.as_ref()?.status.as_ref()?;
        status
            .conditions
            .iter()
            .find(|c| c.type_ == type_)
            .map(|c| c.status.as_str())
    }

    /// Valid=False.
    pub(super) fn invalid(&self) -> bool {
        self.condition("Valid") == Some("False")
    }

    /// Conflict=True.
    pub(super) fn conflict(&self) -> bool {
        self.condition("Conflict") == Some("True")
    }

    /// The MCS implementation has taken the export: Valid (or no Valid condition) and Ready,
    /// or Valid without any Ready condition. A conflict does not stop the name from resolving.
    pub(super) fn taken(&self) -> bool {
        match (self.condition("Valid"), self.condition("Ready")) {
            (Some("False"), _) => false,
            (_, Some("True")) => true,
            (Some("True"), None) => true,
            _ => false,
        }
    }

    /// The export's state in words.
    pub(super) fn describe(&self) -> String {
        match self.status() {
            None => "not created yet".to_owned(),
            Some(status) => match export_problem(&status) {
                None => EXPORT_VALID_READY.to_owned(),
                Some(problem) => problem,
            },
        }
    }
}

//! Condition types and reasons of ServiceExport and ServiceImport, and helpers that read and set
//! conditions the way Kubernetes (`k8s.io/apimachinery/pkg/api/meta.SetStatusCondition`) does.
//!
//! ```
//! use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
//! use k8s_openapi::jiff::Timestamp;
//! use mcs_types::conditions::{set_condition, ConflictReason, ConflictReasons, DesiredCondition};
//!
//! let mut conditions: Vec<Condition> = Vec::new();
//! let t0 = Time(Timestamp::from_second(1_700_000_000)?);
//! let t1 = Time(Timestamp::from_second(1_700_000_060)?);
//!
//! assert!(set_condition(&mut conditions, DesiredCondition::export_valid(), Some(1), t0.clone()));
//! // The same condition again changes nothing: no write needed.
//! assert!(!set_condition(&mut conditions, DesiredCondition::export_valid(), Some(1), t1.clone()));
//!
//! let reasons = ConflictReasons::from_iter([ConflictReason::Type, ConflictReason::Port]);
//! let conflict = DesiredCondition::export_conflict(&reasons, "Conflicting ports and type.");
//! set_condition(&mut conditions, conflict, Some(1), t1);
//! assert_eq!(conditions[1].reason, "PortConflict,TypeConflict");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use std::collections::BTreeSet;
use std::fmt;
use std::str::FromStr;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};

/// The status of a condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ConditionStatus {
    /// `"True"`
    True,
    /// `"False"`
    False,
    /// `"Unknown"`
    Unknown,
}

impl ConditionStatus {
    /// The wire value.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::True => "True",
            Self::False => "False",
            Self::Unknown => "Unknown",
        }
    }

    /// Parses the wire value; anything else is `None`.
    pub fn parse(value: &str) -> Option<Self> {
        match value {
            "True" => Some(Self::True),
            "False" => Some(Self::False),
            "Unknown" => Some(Self::Unknown),
            _ => None,
        }
    }
}

impl From<bool> for ConditionStatus {
    fn from(value: bool) -> Self {
        if value { Self::True } else { Self::False }
    }
}

/// Declares a string enum with `as_str`, `Display` and `FromStr`.
macro_rules! wire_enum {
    ($(#[$meta:meta])* $name:ident { $($(#[$vmeta:meta])* $variant:ident => $text:literal,)+ }) => {
        $(#[$meta])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
        pub enum $name {
            $($(#[$vmeta])* $variant,)+
        }

        impl $name {
            /// Every value, in the order the specification lists them.
            pub const ALL: &'static [Self] = &[$(Self::$variant,)+];

            /// The wire value.
            pub fn as_str(self) -> &'static str {
                match self {
                    $(Self::$variant => $text,)+
                }
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl FromStr for $name {
            type Err = UnknownValue;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    _ => Err(UnknownValue {
                        what: stringify!($name),
                        value: s.to_owned(),
                        known: &[$($text,)+],
                    }),
                }
            }
        }
    };
}

/// A condition type or reason string that is not one of the known values.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what} {value:?}; known values are {}", known.join(", "))]
pub struct UnknownValue {
    /// The Rust type that was parsed.
    pub what: &'static str,
    /// The value that was given.
    pub value: String,
    /// The values that are known.
    pub known: &'static [&'static str],
}

wire_enum! {
    /// Condition types of a ServiceExport.
    ServiceExportConditionType {
        /// The export and its Service are valid and exportable. Says nothing about propagation.
        Valid => "Valid",
        /// The export has been pushed to (or is ready to be pulled by) the MCS implementation.
        Ready => "Ready",
        /// A property of the service differs between the clusters that export it.
        Conflict => "Conflict",
    }
}

wire_enum! {
    /// Reasons of ServiceExport conditions (mcs-api `ServiceExportConditionReason`).
    ServiceExportConditionReason {
        /// `Valid=True`.
        Valid => "Valid",
        /// `Valid=False`: there is no Service with the export's name and namespace.
        NoService => "NoService",
        /// `Valid=False`: the Service cannot be exported (for example ExternalName).
        InvalidServiceType => "InvalidServiceType",
        /// `Ready=True`: pushed to the control or data plane.
        Exported => "Exported",
        /// `Ready=True`: ready to be pulled (pull-model implementations).
        Ready => "Ready",
        /// `Ready=False` or `Ready=Unknown`: being exported.
        Pending => "Pending",
        /// `Ready=False`: exporting failed; the message says why.
        Failed => "Failed",
        /// `Conflict=True`: port sets differ.
        PortConflict => "PortConflict",
        /// `Conflict=True`: headless and non-headless Services are exported together.
        TypeConflict => "TypeConflict",
        /// `Conflict=True`: `sessionAffinity` differs.
        SessionAffinityConflict => "SessionAffinityConflict",
        /// `Conflict=True`: `sessionAffinityConfig` differs.
        SessionAffinityConfigConflict => "SessionAffinityConfigConflict",
        /// `Conflict=True`: `exportedLabels` differ.
        LabelsConflict => "LabelsConflict",
        /// `Conflict=True`: `exportedAnnotations` differ.
        AnnotationsConflict => "AnnotationsConflict",
        /// `Conflict=True`: `internalTrafficPolicy` differs.
        InternalTrafficPolicyConflict => "InternalTrafficPolicyConflict",
        /// `Conflict=True`: `trafficDistribution` differs.
        TrafficDistributionConflict => "TrafficDistributionConflict",
        /// `Conflict=True`: IP families differ so that traffic may reach only some backends.
        IPFamilyConflict => "IPFamilyConflict",
        /// `Conflict=False`.
        NoConflicts => "NoConflicts",
    }
}

wire_enum! {
    /// One kind of conflict between the exports of a service; several are reported together,
    /// comma-joined, in one `Conflict` condition reason (see [`ConflictReasons`]).
    ConflictReason {
        /// `PortConflict`
        Port => "PortConflict",
        /// `TypeConflict`
        Type => "TypeConflict",
        /// `SessionAffinityConflict`
        SessionAffinity => "SessionAffinityConflict",
        /// `SessionAffinityConfigConflict`
        SessionAffinityConfig => "SessionAffinityConfigConflict",
        /// `LabelsConflict`
        Labels => "LabelsConflict",
        /// `AnnotationsConflict`
        Annotations => "AnnotationsConflict",
        /// `InternalTrafficPolicyConflict`
        InternalTrafficPolicy => "InternalTrafficPolicyConflict",
        /// `TrafficDistributionConflict`
        TrafficDistribution => "TrafficDistributionConflict",
        /// `IPFamilyConflict`
        IpFamily => "IPFamilyConflict",
    }
}

impl From<ConflictReason> for ServiceExportConditionReason {
    fn from(reason: ConflictReason) -> Self {
        match reason {
            ConflictReason::Port => Self::PortConflict,
            ConflictReason::Type => Self::TypeConflict,
            ConflictReason::SessionAffinity => Self::SessionAffinityConflict,
            ConflictReason::SessionAffinityConfig => Self::SessionAffinityConfigConflict,
            ConflictReason::Labels => Self::LabelsConflict,
            ConflictReason::Annotations => Self::AnnotationsConflict,
            ConflictReason::InternalTrafficPolicy => Self::InternalTrafficPolicyConflict,
            ConflictReason::TrafficDistribution => Self::TrafficDistributionConflict,
            ConflictReason::IpFamily => Self::IPFamilyConflict,
        }
    }
}

wire_enum! {
    /// Condition types of a ServiceImport.
    ServiceImportConditionType {
        /// The import is usable in this cluster.
        Ready => "Ready",
    }
}

wire_enum! {
    /// Reasons of ServiceImport conditions.
    ServiceImportConditionReason {
        /// `Ready=True`.
        Ready => "Ready",
        /// `Ready=False` or `Unknown`: being imported.
        Pending => "Pending",
        /// `Ready=False`: the service's IP families are not supported in this cluster.
        IPFamilyNotSupported => "IPFamilyNotSupported",
    }
}

/// A set of conflict reasons, written comma-joined in a fixed order
/// (`PortConflict,TypeConflict`), as the mcs-api condition reason pattern allows.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct ConflictReasons {
    known: BTreeSet<ConflictReason>,
    unknown: Vec<String>,
}

impl ConflictReasons {
    /// No conflicts.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds one reason.
    pub fn insert(&mut self, reason: ConflictReason) {
        self.known.insert(reason);
    }

    /// Whether there are no reasons at all.
    pub fn is_empty(&self) -> bool {
        self.known.is_empty() && self.unknown.is_empty()
    }

    /// Whether `reason` is present.
    pub fn contains(&self, reason: ConflictReason) -> bool {
        self.known.contains(&reason)
    }

    /// The known reasons, in specification order.
    pub fn iter(&self) -> impl Iterator<Item = ConflictReason> + '_ {
        self.known.iter().copied()
    }

    /// Reasons that were parsed from a condition but are not standard (another implementation
    /// may raise its own); kept so that nothing read is lost.
    pub fn unknown(&self) -> &[String] {
        &self.unknown
    }

    /// Parses a comma-joined reason such as `PortConflict,TypeConflict`. `NoConflicts` and empty
    /// parts contribute nothing.
    pub fn parse(reason: &str) -> Self {
        let mut out = Self::new();
        for part in reason.split(',').map(str::trim).filter(|p| !p.is_empty()) {
            match ConflictReason::from_str(part) {
                Ok(known) => out.insert(known),
                Err(_) if part == ServiceExportConditionReason::NoConflicts.as_str() => {}
                Err(_) => {
                    if !out.unknown.iter().any(|u| u == part) {
                        out.unknown.push(part.to_owned());
                    }
                }
            }
        }
        out
    }

    /// The condition reason: known reasons in specification order, then unknown ones as read,
    /// comma-joined; `NoConflicts` when empty.
    pub fn join(&self) -> String {
        if self.is_empty() {
            return ServiceExportConditionReason::NoConflicts
                .as_str()
                .to_owned();
        }
        self.known
            .iter()
            .map(|r| r.as_str())
            .chain(self.unknown.iter().map(String::as_str))
            .collect::<Vec<_>>()
            .join(",")
    }
}

impl FromIterator<ConflictReason> for ConflictReasons {
    fn from_iter<I: IntoIterator<Item = ConflictReason>>(iter: I) -> Self {
        Self {
            known: iter.into_iter().collect(),
            unknown: Vec::new(),
        }
    }
}

/// A condition as a controller wants it, without timestamps; [`set_condition`] turns it into a
/// `metav1.Condition`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DesiredCondition {
    /// The condition type.
    pub type_: String,
    /// The status.
    pub status: ConditionStatus,
    /// The reason (CamelCase, commas allowed).
    pub reason: String,
    /// A human-readable message.
    pub message: String,
}

impl DesiredCondition {
    /// A condition of any type.
    pub fn new(
        type_: impl Into<String>,
        status: ConditionStatus,
        reason: impl Into<String>,
        message: impl Into<String>,
    ) -> Self {
        Self {
            type_: type_.into(),
            status,
            reason: reason.into(),
            message: message.into(),
        }
    }

    fn export(
        type_: ServiceExportConditionType,
        status: ConditionStatus,
        reason: ServiceExportConditionReason,
        message: impl Into<String>,
    ) -> Self {
        Self::new(type_.as_str(), status, reason.as_str(), message)
    }

    /// `Valid=True` with reason `Valid`.
    pub fn export_valid() -> Self {
        Self::export(
            ServiceExportConditionType::Valid,
            ConditionStatus::True,
            ServiceExportConditionReason::Valid,
            "Service is valid for export",
        )
    }

    /// `Valid=False` with reason `NoService`.
    pub fn export_no_service(namespace: &str, name: &str) -> Self {
        Self::export(
            ServiceExportConditionType::Valid,
            ConditionStatus::False,
            ServiceExportConditionReason::NoService,
            format!(
                "Service {namespace}/{name} not found: create a Service with the same name and namespace as the ServiceExport"
            ),
        )
    }

    /// `Valid=False` with reason `InvalidServiceType`.
    pub fn export_invalid_service_type(service_type: &str) -> Self {
        Self::export(
            ServiceExportConditionType::Valid,
            ConditionStatus::False,
            ServiceExportConditionReason::InvalidServiceType,
            format!(
                "Service type {service_type} cannot be exported: export a ClusterIP or headless Service"
            ),
        )
    }

    /// `Ready=True` with reason `Exported`.
    pub fn export_exported() -> Self {
        Self::export(
            ServiceExportConditionType::Ready,
            ConditionStatus::True,
            ServiceExportConditionReason::Exported,
            "The service has been exported",
        )
    }

    /// `Ready=Unknown` with reason `Pending`.
    pub fn export_pending(message: impl Into<String>) -> Self {
        Self::export(
            ServiceExportConditionType::Ready,
            ConditionStatus::Unknown,
            ServiceExportConditionReason::Pending,
            message,
        )
    }

    /// `Ready=False` with reason `Failed`.
    pub fn export_failed(message: impl Into<String>) -> Self {
        Self::export(
            ServiceExportConditionType::Ready,
            ConditionStatus::False,
            ServiceExportConditionReason::Failed,
            message,
        )
    }

    /// `Conflict=True` with the reasons comma-joined, or `Conflict=False`/`NoConflicts` when
    /// `reasons` is empty.
    pub fn export_conflict(reasons: &ConflictReasons, message: impl Into<String>) -> Self {
        Self::new(
            ServiceExportConditionType::Conflict.as_str(),
            ConditionStatus::from(!reasons.is_empty()),
            reasons.join(),
            message,
        )
    }

    /// `Conflict=False` with reason `NoConflicts`.
    pub fn export_no_conflict() -> Self {
        Self::export_conflict(&ConflictReasons::new(), "")
    }

    /// A ServiceImport `Ready` condition.
    pub fn import_ready(
        status: ConditionStatus,
        reason: ServiceImportConditionReason,
        message: impl Into<String>,
    ) -> Self {
        Self::new(
            ServiceImportConditionType::Ready.as_str(),
            status,
            reason.as_str(),
            message,
        )
    }
}

/// The condition of type `type_`, if present.
pub fn find_condition<'a>(conditions: &'a [Condition], type_: &str) -> Option<&'a Condition> {
    conditions.iter().find(|c| c.type_ == type_)
}

/// Whether the condition of type `type_` is present with status `True`.
pub fn is_condition_true(conditions: &[Condition], type_: &str) -> bool {
    find_condition(conditions, type_).is_some_and(|c| c.status == ConditionStatus::True.as_str())
}

/// Sets `desired` in `conditions` as Kubernetes' `meta.SetStatusCondition` does, and says whether
/// anything changed (so that a controller writes status only when it must).
///
/// - A new condition is appended with `lastTransitionTime = now`.
/// - An existing one gets a new `lastTransitionTime` only when its status changes; reason,
///   message and `observedGeneration` are updated in place.
pub fn set_condition(
    conditions: &mut Vec<Condition>,
    desired: DesiredCondition,
    observed_generation: Option<i64>,
    now: Time,
) -> bool {
    let status = desired.status.as_str();
    match conditions.iter_mut().find(|c| c.type_ == desired.type_) {
        None => {
            conditions.push(Condition {
                type_: desired.type_,
                status: status.to_owned(),
                reason: desired.reason,
                message: desired.message,
                observed_generation,
                last_transition_time: now,
            });
            true
        }
        Some(existing) => {
            let mut changed = false;
            if existing.status != status {
                existing.status = status.to_owned();
                existing.last_transition_time = now;
                changed = true;
            }
            if existing.reason != desired.reason {
                existing.reason = desired.reason;
                changed = true;
            }
            if existing.message != desired.message {
                existing.message = desired.message;
                changed = true;
            }
            if existing.observed_generation != observed_generation {
                existing.observed_generation = observed_generation;
                changed = true;
            }
            changed
        }
    }
}

/// A status object with a `conditions` list; the provided methods read and set conditions the
/// Kubernetes way. Implemented by the ServiceExport and ServiceImport statuses.
pub trait StatusConditions {
    /// The conditions.
    fn conditions(&self) -> &[Condition];

    /// The conditions, for changing.
    fn conditions_mut(&mut self) -> &mut Vec<Condition>;

    /// The condition of type `type_`, if present.
    fn condition_of_type(&self, type_: &str) -> Option<&Condition> {
        find_condition(self.conditions(), type_)
    }

    /// Whether the condition of type `type_` is present with status `True`.
    fn condition_is_true(&self, type_: &str) -> bool {
        is_condition_true(self.conditions(), type_)
    }

    /// Sets a condition (see [`set_condition`]); says whether anything changed.
    fn set_condition(
        &mut self,
        desired: DesiredCondition,
        observed_generation: Option<i64>,
        now: Time,
    ) -> bool {
        set_condition(self.conditions_mut(), desired, observed_generation, now)
    }
}

/// Implements [`StatusConditions`] for a status struct with a `conditions: Vec<Condition>` field.
macro_rules! impl_status_conditions {
    ($status:ty) => {
        impl $crate::conditions::StatusConditions for $status {
            fn conditions(&self) -> &[Condition] {
                &self.conditions
            }

            fn conditions_mut(&mut self) -> &mut Vec<Condition> {
                &mut self.conditions
            }
        }
    };
}

pub(crate) use impl_status_conditions;

/// Removes the condition of type `type_`; says whether one was removed.
pub fn remove_condition(conditions: &mut Vec<Condition>, type_: &str) -> bool {
    let before = conditions.len();
    conditions.retain(|c| c.type_ != type_);
    conditions.len() != before
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::jiff::Timestamp;

    fn at(second: i64) -> Time {
        Time(Timestamp::from_second(second).unwrap())
    }

    #[test]
    fn transition_time_changes_only_with_status() {
        let mut conditions = Vec::new();
        assert!(set_condition(
            &mut conditions,
            DesiredCondition::export_pending("waiting for the broker"),
            Some(1),
            at(10)
        ));
        // Same status, new message and generation: updated, but the transition time stays.
        assert!(set_condition(
            &mut conditions,
            DesiredCondition::export_pending("still waiting"),
            Some(2),
            at(20)
        ));
        assert_eq!(conditions.len(), 1);
        assert_eq!(conditions[0].last_transition_time, at(10));
        assert_eq!(conditions[0].message, "still waiting");
        assert_eq!(conditions[0].observed_generation, Some(2));
        // Status change moves the transition time.
        assert!(set_condition(
            &mut conditions,
            DesiredCondition::export_exported(),
            Some(2),
            at(30)
        ));
        assert_eq!(conditions[0].status, "True");
        assert_eq!(conditions[0].reason, "Exported");
        assert_eq!(conditions[0].last_transition_time, at(30));
        // Identical again: nothing changes.
        assert!(!set_condition(
            &mut conditions,
            DesiredCondition::export_exported(),
            Some(2),
            at(40)
        ));
        assert_eq!(conditions[0].last_transition_time, at(30));
    }

    #[test]
    fn conditions_are_keyed_by_type() {
        let mut conditions = Vec::new();
        set_condition(
            &mut conditions,
            DesiredCondition::export_valid(),
            None,
            at(1),
        );
        set_condition(
            &mut conditions,
            DesiredCondition::export_no_conflict(),
            None,
            at(1),
        );
        set_condition(
            &mut conditions,
            DesiredCondition::export_no_service("shop", "web"),
            None,
            at(2),
        );
        assert_eq!(conditions.len(), 2);
        let valid = find_condition(&conditions, "Valid").unwrap();
        assert_eq!(valid.status, "False");
        assert_eq!(valid.reason, "NoService");
        assert!(!is_condition_true(&conditions, "Valid"));
        assert!(remove_condition(&mut conditions, "Valid"));
        assert!(!remove_condition(&mut conditions, "Valid"));
        assert_eq!(conditions.len(), 1);
    }

    #[test]
    fn conflict_reasons_join_in_spec_order_and_parse_back() {
        let reasons: ConflictReasons = ConflictReason::ALL.iter().rev().copied().collect();
        let joined = reasons.join();
        assert_eq!(
            joined,
            "PortConflict,TypeConflict,SessionAffinityConflict,SessionAffinityConfigConflict,\
             LabelsConflict,AnnotationsConflict,InternalTrafficPolicyConflict,\
             TrafficDistributionConflict,IPFamilyConflict"
        );
        assert_eq!(ConflictReasons::parse(&joined), reasons);
        assert_eq!(ConflictReasons::new().join(), "NoConflicts");
        assert!(ConflictReasons::parse("NoConflicts").is_empty());
    }

    #[test]
    fn unknown_conflict_reasons_are_kept() {
        let parsed = ConflictReasons::parse("TypeConflict,VendorConflict,VendorConflict");
        assert!(parsed.contains(ConflictReason::Type));
        assert_eq!(parsed.unknown(), ["VendorConflict"]);
        assert_eq!(parsed.join(), "TypeConflict,VendorConflict");
    }

    #[test]
    fn joined_reasons_match_the_crd_reason_pattern() {
        // ^[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?$ from metav1.Condition
        let reasons: ConflictReasons = ConflictReason::ALL.iter().copied().collect();
        let joined = reasons.join();
        let bytes = joined.as_bytes();
        assert!(bytes[0].is_ascii_alphabetic());
        assert!(
            bytes
                .iter()
                .all(|b| b.is_ascii_alphanumeric() || b"_,:".contains(b))
        );
        assert!(bytes[bytes.len() - 1].is_ascii_alphanumeric());
        assert!(joined.len() <= 1024);
    }

    #[test]
    fn unknown_values_are_named_with_the_known_ones() {
        let err = ServiceExportConditionType::from_str("Accepted").unwrap_err();
        assert_eq!(
            err.to_string(),
            "unknown ServiceExportConditionType \"Accepted\"; known values are Valid, Ready, Conflict"
        );
        for reason in ServiceExportConditionReason::ALL {
            assert_eq!(
                ServiceExportConditionReason::from_str(reason.as_str()),
                Ok(*reason)
            );
        }
    }
}

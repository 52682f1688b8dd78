//! Events about the CephCluster: a Warning when a condition turns False (or changes its False
//! reason), a Normal Event when it recovers.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition;

use super::status::{ACCEPTED, EXPORTED, RESOLVED};

/// Events carry at most this many bytes of note (the Events API limit).
const MAX_NOTE: usize = 1024;

/// Severity of an Event.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum EventType {
    /// Things got better.
    Normal,
    /// Something needs attention.
    Warning,
}

/// An Event about the CephCluster.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventNote {
    /// Severity.
    pub type_: EventType,
    /// The condition reason that changed (`CephTooOld`, `LookupFailed`, ...).
    pub reason: String,
    /// What happened and what to do (at most 1 kB).
    pub note: String,
    /// What the operator was doing (`CheckGuards`, `Export`, `Resolve`).
    pub action: &'static str,
}

impl EventNote {
    /// A Warning Event; the note is cut to the 1 kB an Event holds.
    pub fn warning(reason: &str, note: String, action: &'static str) -> Self {
        Self {
            type_: EventType::Warning,
            reason: reason.to_owned(),
            note: truncate(note, MAX_NOTE),
            action,
        }
    }
}

pub(super) fn truncate(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max.saturating_sub(3);
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
        text.push_str("...");
    }
    text
}

/// Events for the transitions of `Accepted`, `Exported` and `Resolved`: a Warning when one
/// turns False (or changes its False reason), a Normal Event when one recovers from False.
pub(super) fn events(prior: &[Condition], now: &[Condition]) -> Vec<EventNote> {
    let mut events = Vec::new();
    for (type_, action) in [
        (ACCEPTED, "CheckGuards"),
        (EXPORTED, "Export"),
        (RESOLVED, "Resolve"),
    ] {
        let Some(new) = now.iter().find(|c| c.type_ == type_) else {
            continue;
        };
        let old = prior.iter().find(|c| c.type_ == type_);
        let was_false = old.is_some_and(|c| c.status == "False");
        let type_ = if new.status == "False"
            && (!was_false || old.is_some_and(|c| c.reason != new.reason))
        {
            EventType::Warning
        } else if new.status == "True" && was_false {
            EventType::Normal
        } else {
            continue;
        };
        events.push(EventNote {
            type_,
            reason: new.reason.clone(),
            note: truncate(new.message.clone(), MAX_NOTE),
            action,
        });
    }
    events
}

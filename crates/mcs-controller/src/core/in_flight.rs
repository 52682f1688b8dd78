//! The writes in flight, per target: the latest one sent, and the earlier ones it replaced
//! before their echo arrived. A watch event that is the echo of an earlier write (the watch
//! runs behind the writes) is recognised as ours, and does not release the latest: comparing
//! the stored object again then would write the latest write's content a second time.

use std::collections::HashMap;

use crate::write::{Target, Write};

/// At most this many earlier writes are remembered per target (older ones are forgotten: an
/// echo of one of them then reads as a change, and costs one reconcile).
const EARLIER_KEPT: usize = 8;

/// Which of our writes an observed object is the echo of.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Echo {
    /// The latest write: nothing of ours is in flight any more.
    Latest,
    /// An earlier write, replaced before its echo came: the latest is still on its way.
    Earlier,
    /// None of ours (someone else changed the object, or overwrote ours before we saw it).
    NotOurs,
}

impl Echo {
    /// Whether the event was one of our own writes coming back.
    pub(super) fn is_ours(self) -> bool {
        matches!(self, Self::Latest | Self::Earlier)
    }
}

/// The writes in flight.
#[derive(Debug, Default)]
pub(super) struct InFlight {
    latest: HashMap<Target, Write>,
    earlier: HashMap<Target, Vec<Write>>,
}

impl InFlight {
    /// The latest write in flight to `target`.
    pub(super) fn get(&self, target: &Target) -> Option<&Write> {
        self.latest.get(target)
    }

    /// Records `write` as sent; false (and nothing recorded) when the same write is the latest
    /// in flight already.
    pub(super) fn send(&mut self, write: &Write) -> bool {
        let target = write.target();
        if self.latest.get(&target) == Some(write) {
            return false;
        }
        if let Some(replaced) = self.latest.insert(target.clone(), write.clone()) {
            let earlier = self.earlier.entry(target).or_default();
            earlier.push(replaced);
            if earlier.len() > EARLIER_KEPT {
                earlier.remove(0);
            }
        }
        true
    }

    /// Forgets every write in flight to `target` (it failed, was dropped, or its object
    /// changed in a way none of them explains).
    pub(super) fn release(&mut self, target: &Target) {
        self.latest.remove(target);
        self.earlier.remove(target);
    }

    /// Which write in flight to `target` an observed state is the echo of (`is_echo` tells
    /// whether it matches one); `None` when nothing is in flight. Changes nothing.
    pub(super) fn classify(
        &self,
        target: &Target,
        is_echo: impl Fn(&Write) -> bool,
    ) -> Option<Echo> {
        let latest = self.latest.get(target)?;
        if is_echo(latest) {
            return Some(Echo::Latest);
        }
        let earlier = self
            .earlier
            .get(target)
            .is_some_and(|e| e.iter().any(&is_echo));
        Some(if earlier {
            Echo::Earlier
        } else {
            Echo::NotOurs
        })
    }

    /// Settles `target` after an event classified as `echo`: the latest write's echo, or none
    /// of ours, releases everything; an earlier write's echo forgets that write and the ones
    /// before it, and keeps the latest in flight.
    pub(super) fn settle(&mut self, target: &Target, echo: Echo, is_echo: impl Fn(&Write) -> bool) {
        match echo {
            Echo::Latest | Echo::NotOurs => self.release(target),
            Echo::Earlier => {
                if let Some(earlier) = self.earlier.get_mut(target)
                    && let Some(at) = earlier.iter().rposition(&is_echo)
                {
                    earlier.drain(..=at);
                }
            }
        }
    }

    /// Whether nothing is in flight.
    #[cfg(test)]
    pub(super) fn is_empty(&self) -> bool {
        self.latest.is_empty() && self.earlier.is_empty()
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use k8s_openapi::apimachinery::pkg::apis::meta::v1::{Condition, Time};
    use mcs_types::ServiceExportStatus;
    use mcs_types::ServiceKey;

    fn status(reason: &str) -> Write {
        let mut status = ServiceExportStatus::default();
        status.conditions.push(Condition {
            type_: "Ready".into(),
            status: "True".into(),
            reason: reason.into(),
            message: String::new(),
            observed_generation: Some(1),
            last_transition_time: Time(k8s_openapi::jiff::Timestamp::UNIX_EPOCH),
        });
        Write::ApplyServiceExportStatus {
            key: ServiceKey::new("ns", "web"),
            status,
        }
    }

    fn reason(write: &Write) -> &str {
        match write {
            Write::ApplyServiceExportStatus { status, .. } => &status.conditions[0].reason,
            _ => "",
        }
    }

    #[test]
    fn the_echo_of_an_earlier_write_keeps_the_latest_in_flight() {
        let mut in_flight = InFlight::default();
        let (pending, exported) = (status("Pending"), status("Exported"));
        let target = pending.target();
        assert!(in_flight.send(&pending));
        assert!(in_flight.send(&exported));
        assert!(
            !in_flight.send(&exported),
            "the same write twice is sent once"
        );
        // The watch delivers the first write: ours, and the second is still on its way.
        let is_pending = |w: &Write| reason(w) == "Pending";
        let echo = in_flight.classify(&target, is_pending).unwrap();
        assert_eq!(echo, Echo::Earlier);
        in_flight.settle(&target, echo, is_pending);
        assert_eq!(in_flight.get(&target), Some(&exported));
        assert!(
            !in_flight.send(&exported),
            "still in flight: not sent again"
        );
        // Then the second.
        let is_exported = |w: &Write| reason(w) == "Exported";
        let echo = in_flight.classify(&target, is_exported).unwrap();
        assert_eq!(echo, Echo::Latest);
        in_flight.settle(&target, echo, is_exported);
        assert!(in_flight.is_empty());
    }

    #[test]
    fn a_change_that_is_none_of_ours_releases_every_write() {
        let mut in_flight = InFlight::default();
        let (pending, exported) = (status("Pending"), status("Exported"));
        let target = pending.target();
        in_flight.send(&pending);
        in_flight.send(&exported);
        let someone_else = |w: &Write| reason(w) == "SomeoneElse";
        let echo = in_flight.classify(&target, someone_else).unwrap();
        assert_eq!(echo, Echo::NotOurs);
        assert!(!echo.is_ours());
        in_flight.settle(&target, echo, someone_else);
        assert!(in_flight.is_empty());
        assert_eq!(in_flight.classify(&target, someone_else), None);
    }
}

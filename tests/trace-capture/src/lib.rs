//! Test support: a [`tracing`] subscriber that records what code logs, for tests that assert
//! it — the spans (name, fields, parent) and the events (level, fields, and the spans they
//! happened in, innermost first).
//!
//! ```
//! let capture = clusterset_trace_capture::Capture::new();
//! {
//!     let _default = capture.set_default();
//!     let span = tracing::info_span!("reconcile", namespace = "shop", name = "web");
//!     let _entered = span.enter();
//!     let error = std::io::Error::other("refused");
//!     tracing::warn!(error = %error, "write failed");
//! }
//! let event = capture.event("write failed").unwrap();
//! assert_eq!(event.level, tracing::Level::WARN);
//! assert_eq!(event.field("error"), Some("refused"));
//! let span = event.span("reconcile").unwrap();
//! assert_eq!(span.field("namespace"), Some("shop"));
//! assert_eq!(span.field("name"), Some("web"));
//! ```
#![forbid(unsafe_code)]

use std::collections::BTreeMap;
use std::fmt;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use tracing::field::{Field, Visit};
use tracing::span::{Attributes, Id, Record};
use tracing::subscriber::{DefaultGuard, NoSubscriber};
use tracing::{Dispatch, Event, Level, Subscriber};
use tracing_subscriber::layer::{Context, SubscriberExt};
use tracing_subscriber::registry::LookupSpan;
use tracing_subscriber::{Layer, Registry};

/// A span as recorded: its name, its fields (as they were last recorded) and its parent's
/// name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SpanRecord {
    /// The span's name.
    pub name: &'static str,
    /// Its fields, each formatted (`%` values by `Display`, `?` values by `Debug`, strings as
    /// they are).
    pub fields: BTreeMap<String, String>,
    /// The name of the span it was opened in, if any.
    pub parent: Option<&'static str>,
}

impl SpanRecord {
    /// The value of the field `name`.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }
}

/// An event as recorded.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct EventRecord {
    /// Its level.
    pub level: Level,
    /// Its message (the field `message`), empty without one.
    pub message: String,
    /// Its other fields, formatted as [`SpanRecord::fields`].
    pub fields: BTreeMap<String, String>,
    /// The spans it happened in, innermost first.
    pub spans: Vec<SpanRecord>,
}

impl EventRecord {
    /// The value of the field `name`.
    pub fn field(&self, name: &str) -> Option<&str> {
        self.fields.get(name).map(String::as_str)
    }

    /// The innermost span named `name` the event happened in.
    pub fn span(&self, name: &str) -> Option<&SpanRecord> {
        self.spans.iter().find(|s| s.name == name)
    }
}

#[derive(Debug, Default)]
struct Records {
    /// Every span opened, in the order they were opened.
    spans: Vec<SpanRecord>,
    events: Vec<EventRecord>,
}

/// What the subscriber recorded; clones share it.
#[derive(Debug, Clone, Default)]
pub struct Capture {
    records: Arc<Mutex<Records>>,
}

/// The index of a span in [`Records::spans`], kept in the span's extensions.
struct Index(usize);

impl Capture {
    /// Nothing recorded yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// The layer that records into this capture.
    pub fn layer<S>(&self) -> impl Layer<S> + use<S>
    where
        S: Subscriber + for<'a> LookupSpan<'a>,
    {
        CaptureLayer {
            records: Arc::clone(&self.records),
        }
    }

    /// Makes a subscriber recording every level into this capture the current thread's default
    /// until the guard is dropped (a `#[tokio::test]` runs its tasks on that thread).
    ///
    /// Tests run in parallel threads: while a single subscriber is registered in the process,
    /// tracing decides whether a callsite first hit on another thread is enabled with that
    /// thread's default alone (none: never), and remembers it, so that this capture would miss
    /// the callsite's events afterwards. A second subscriber kept registered for the life of
    /// the process (one that records nothing) makes tracing ask every registered subscriber.
    pub fn set_default(&self) -> DefaultGuard {
        static BYSTANDER: OnceLock<Dispatch> = OnceLock::new();
        BYSTANDER.get_or_init(|| Dispatch::new(NoSubscriber::default()));
        tracing::subscriber::set_default(Registry::default().with(self.layer()))
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Every span opened so far, in order.
    pub fn spans(&self) -> Vec<SpanRecord> {
        self.lock().spans.clone()
    }

    /// Every event so far, in order.
    pub fn events(&self) -> Vec<EventRecord> {
        self.lock().events.clone()
    }

    /// The first event whose message is `message`.
    pub fn event(&self, message: &str) -> Option<EventRecord> {
        self.lock()
            .events
            .iter()
            .find(|e| e.message == message)
            .cloned()
    }
}

struct CaptureLayer {
    records: Arc<Mutex<Records>>,
}

impl CaptureLayer {
    fn lock(&self) -> std::sync::MutexGuard<'_, Records> {
        self.records.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Collects fields as text.
#[derive(Default)]
struct Fields(BTreeMap<String, String>);

impl Visit for Fields {
    fn record_str(&mut self, field: &Field, value: &str) {
        self.0.insert(field.name().to_owned(), value.to_owned());
    }

    fn record_debug(&mut self, field: &Field, value: &dyn fmt::Debug) {
        self.0.insert(field.name().to_owned(), format!("{value:?}"));
    }
}

impl<S> Layer<S> for CaptureLayer
where
    S: Subscriber + for<'a> LookupSpan<'a>,
{
    fn on_new_span(&self, attrs: &Attributes<'_>, id: &Id, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let mut fields = Fields::default();
        attrs.record(&mut fields);
        let record = SpanRecord {
            name: span.name(),
            fields: fields.0,
            parent: span.parent().map(|p| p.name()),
        };
        let mut records = self.lock();
        span.extensions_mut().insert(Index(records.spans.len()));
        records.spans.push(record);
    }

    fn on_record(&self, id: &Id, values: &Record<'_>, ctx: Context<'_, S>) {
        let Some(span) = ctx.span(id) else { return };
        let extensions = span.extensions();
        let Some(Index(index)) = extensions.get::<Index>() else {
            return;
        };
        let mut fields = Fields::default();
        values.record(&mut fields);
        if let Some(record) = self.lock().spans.get_mut(*index) {
            record.fields.extend(fields.0);
        }
    }

    fn on_event(&self, event: &Event<'_>, ctx: Context<'_, S>) {
        let mut fields = Fields::default();
        event.record(&mut fields);
        let message = fields.0.remove("message").unwrap_or_default();
        let mut records = self.lock();
        let spans = ctx
            .event_scope(event)
            .into_iter()
            .flatten()
            .filter_map(|span| {
                let extensions = span.extensions();
                let Index(index) = extensions.get::<Index>()?;
                records.spans.get(*index).cloned()
            })
            .collect();
        records.events.push(EventRecord {
            level: *event.metadata().level(),
            message,
            fields: fields.0,
            spans,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_spans_their_later_fields_and_the_spans_of_each_event() {
        let capture = Capture::new();
        {
            let _default = capture.set_default();
            let outer = tracing::info_span!("pass", round = 1);
            let _outer = outer.enter();
            let inner = tracing::debug_span!(
                "reconcile",
                namespace = "shop",
                name = tracing::field::Empty
            );
            inner.record("name", "web");
            inner.in_scope(|| tracing::debug!(writes = 2, "reconciled"));
            tracing::error!(error = ?"gone", "outside");
        }
        let spans = capture.spans();
        assert_eq!(spans.len(), 2);
        assert_eq!(spans[1].name, "reconcile");
        assert_eq!(spans[1].parent, Some("pass"));
        assert_eq!(spans[1].field("name"), Some("web"));

        let reconciled = capture.event("reconciled").unwrap();
        assert_eq!(reconciled.level, Level::DEBUG);
        assert_eq!(reconciled.field("writes"), Some("2"));
        let names: Vec<_> = reconciled.spans.iter().map(|s| s.name).collect();
        assert_eq!(names, ["reconcile", "pass"]);
        assert_eq!(
            reconciled.span("reconcile").unwrap().field("namespace"),
            Some("shop")
        );
        assert_eq!(reconciled.span("pass").unwrap().field("round"), Some("1"));

        let outside = capture.event("outside").unwrap();
        assert_eq!(outside.field("error"), Some("\"gone\""));
        assert!(outside.span("reconcile").is_none());
        assert!(capture.event("never logged").is_none());
    }

    #[test]
    fn another_thread_is_not_recorded() {
        let capture = Capture::new();
        let _default = capture.set_default();
        std::thread::spawn(|| tracing::warn!("elsewhere"))
            .join()
            .unwrap();
        assert!(capture.events().is_empty());
    }
}

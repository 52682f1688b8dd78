#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns
//! What the running agent tells its operators about one imported service: its lag series
//! lives as long as its ServiceImport, the writes of its reconcile are logged in one span with
//! its namespace and name, and a failed write's error is the structured field `error`.
//!
//! Cluster c0's runtime runs on watch events taken from a simulation in which c1 exports
//! shop/web (its broker record with its publication time, its heartbeat Lease); the test is
//! c0's API servers: it answers c0's writes and sends back the watch events they cause.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use clusterset_agent_runtime::kube_io::{AgentWriter, Feed, WriteError};
use clusterset_agent_runtime::metrics::Metrics;
use clusterset_agent_runtime::readiness::Readiness;
use clusterset_agent_runtime::runtime::{Clock, Runtime};
use clusterset_sim::{self as sim, Simulation};
use clusterset_trace_capture::Capture;
use futures::channel::mpsc;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::jiff::Timestamp;
use mcs_controller::broker::{Heartbeat, lease_name};
use mcs_controller::core::{AgentCore, Input};
use mcs_controller::watch::Event;
use mcs_controller::write::Write;
use mcs_types::ServiceKey;

/// c0's API servers as far as its writes go: each write recorded; the first apply of a
/// ServiceImport fails as if the API server could not be reached; the heartbeat Lease stored
/// as sent.
#[derive(Default)]
struct Servers {
    writes: Mutex<Vec<Write>>,
    failed_once: Mutex<bool>,
}

#[async_trait]
impl AgentWriter for Servers {
    async fn write(&self, write: &Write) -> Result<(), WriteError> {
        self.writes.lock().unwrap().push(write.clone());
        if matches!(write, Write::ApplyServiceImport(_)) {
            let mut failed = self.failed_once.lock().unwrap();
            if !*failed {
                *failed = true;
                return Err(WriteError::unreachable("connection refused"));
            }
        }
        Ok(())
    }

    async fn heartbeat(&self, heartbeat: &Heartbeat) -> Result<Option<Lease>, WriteError> {
        let mut lease = match heartbeat {
            Heartbeat::Create(lease) | Heartbeat::Replace(lease) => (**lease).clone(),
            Heartbeat::Blocked { .. } => return Ok(None),
        };
        lease.metadata.resource_version = Some("1".into());
        Ok(Some(lease))
    }
}

impl Servers {
    fn written(&self, matching: impl Fn(&Write) -> bool) -> Option<Write> {
        self.writes
            .lock()
            .unwrap()
            .iter()
            .rev()
            .find(|w| matching(w))
            .cloned()
    }
}

fn listed<T>(items: Vec<T>, wrap: fn(Event<T>) -> Input) -> Vec<Input> {
    let mut inputs = vec![wrap(Event::Init)];
    inputs.extend(items.into_iter().map(|i| wrap(Event::InitApply(i))));
    inputs.push(wrap(Event::InitDone));
    inputs
}

async fn wait_for(what: &str, mut condition: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !condition() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

const LAG_SERIES: &str =
    "clusterset_agent_service_propagation_lag_seconds{namespace=\"shop\",service=\"web\"}";

#[tokio::test]
async fn an_imported_services_lag_series_span_and_errors() {
    let capture = Capture::new();
    let _default = capture.set_default();

    let mut sim = Simulation::new(2, &["shop"], Timestamp::now(), None).unwrap();
    sim.start_all();
    sim.settle(1000);
    let web = ServiceKey::new("shop", "web");
    sim.export(1, &web, &[80]);
    sim.settle_accepted(1000)
        .unwrap_or_else(|refused| panic!("{refused}"));
    let c1 = sim.clusters[1].core.config().cluster_id.clone();
    let record = sim.record(&c1, &web).unwrap().clone();
    assert!(record.published_at().is_some());
    let c1_lease = sim.leases.get(&lease_name(&c1)).unwrap().clone();

    let servers = Arc::new(Servers::default());
    let metrics = Arc::new(Metrics::new());
    let runtime = Runtime {
        core: AgentCore::new(sim.clusters[0].core.config().clone()),
        writer: Arc::clone(&servers) as Arc<dyn AgentWriter>,
        metrics: Arc::clone(&metrics),
        readiness: Arc::new(Readiness::default()),
        zone: None,
        write_concurrency: 4,
        heartbeat_every: Duration::from_secs(10),
        clock: Clock::system(),
        election: clusterset_agent_runtime::runtime::Election::None,
    };
    let (events, feeds) = mpsc::unbounded::<Feed>();
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let task = tokio::spawn(runtime.run(feeds, async {
        let _ = stopped.await;
    }));
    let send = |input: Input| events.unbounded_send(Feed::Input(Box::new(input))).unwrap();

    // c0's first lists: namespace shop and nothing else of its own; c1's record and Lease on
    // the hub.
    let mut inputs = listed(vec![sim::namespace("shop")], Input::Namespace);
    inputs.extend(listed(Vec::new(), Input::Service));
    inputs.extend(listed(Vec::new(), Input::ServiceExport));
    inputs.extend(listed(Vec::new(), Input::LocalEndpointSlice));
    inputs.extend(listed(Vec::new(), Input::ServiceImport));
    inputs.extend(listed(Vec::new(), Input::ImportedEndpointSlice));
    inputs.extend(listed(vec![record.clone()], Input::Record));
    inputs.extend(listed(vec![c1_lease], Input::Lease));
    for input in inputs {
        send(input);
    }

    // The import is decided (its lag observed), its first apply fails and is retried.
    wait_for("the ServiceImport's lag series", || {
        metrics.encode().contains(LAG_SERIES)
    })
    .await;
    let retried = || {
        servers
            .writes
            .lock()
            .unwrap()
            .iter()
            .filter(|w| matches!(w, Write::ApplyServiceImport(_)))
            .count()
            == 2
    };
    wait_for("the retried apply of the ServiceImport", retried).await;
    let Some(Write::ApplyServiceImport(import)) =
        servers.written(|w| matches!(w, Write::ApplyServiceImport(_)))
    else {
        unreachable!()
    };
    send(Input::ServiceImport(Event::Apply(*import.clone())));

    // c1 withdraws its export: c0 deletes the import; once its deletion is seen, the series
    // of shop/web goes.
    send(Input::Record(Event::Delete(record)));
    wait_for("the ServiceImport's deletion", || {
        servers
            .written(|w| matches!(w, Write::DeleteServiceImport(_)))
            .is_some()
    })
    .await;
    assert!(metrics.encode().contains(LAG_SERIES), "not before");
    send(Input::ServiceImport(Event::Delete(*import)));
    wait_for("the lag series to go", || {
        !metrics.encode().contains(LAG_SERIES)
    })
    .await;
    stop.send(()).unwrap();
    task.await.unwrap();

    // One span per service reconcile, with the service's namespace and name.
    let spans: Vec<_> = capture
        .spans()
        .into_iter()
        .filter(|s| s.name == "reconcile_service")
        .collect();
    assert!(spans.len() >= 3, "{spans:?}");
    for span in &spans {
        assert_eq!(span.field("namespace"), Some("shop"), "{span:?}");
        assert_eq!(span.field("service"), Some("web"), "{span:?}");
    }
    // The failed write is logged in its service's span, its error in the field `error`.
    let failed = capture
        .event("write failed; retrying with backoff")
        .unwrap();
    assert_eq!(failed.level, tracing::Level::WARN);
    assert_eq!(failed.field("write"), Some("apply_service_import"));
    let error = failed.field("error").unwrap();
    assert!(error.contains("connection refused"), "{error}");
    let span = failed.span("reconcile_service").unwrap();
    assert_eq!(
        (span.field("namespace"), span.field("service")),
        (Some("shop"), Some("web"))
    );
    // The writes of shop/web after the failed one in the same pass were not attempted, in the
    // same span.
    let skipped = capture
        .event("write not attempted: an earlier write of this service failed")
        .unwrap();
    assert!(skipped.span("reconcile_service").is_some(), "{skipped:?}");
}

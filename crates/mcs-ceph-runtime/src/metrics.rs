//! Prometheus metrics of the operator (prometheus-client), served on `/metrics` under the
//! `mcs_ceph_operator` prefix.

use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of a count by one word (`result`, `kind`, `watch`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct KindLabels {
    /// The kind.
    pub kind: String,
}

/// Labels of per-daemon series.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct DaemonLabels {
    /// The CephCluster's namespace.
    pub namespace: String,
    /// The CephCluster's name.
    pub cluster: String,
    /// `mon.a`, `osd.7`.
    pub daemon: String,
}

/// Labels of the failover step count.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct StepLabels {
    /// `provision_address`, `start_mon`, `remove_from_monmap`, `delete_mon`, or `tick` (a
    /// reconcile's run of the machine as a whole).
    pub step: String,
    /// `done`, `address_ready`, `address_pending`, `failed` (or `error` for a `tick`).
    pub outcome: String,
}

/// Every metric of the operator.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Reconciles by result (`ok`, `error`, `not_synced`).
    pub reconciles: Family<KindLabels, Counter>,
    /// Seconds one reconcile took (decision, writes and lookups).
    pub reconcile_duration: Histogram,
    /// Writes carried out, by kind (`apply_service`, `apply_service_export`, `apply_status`).
    pub writes: Family<KindLabels, Counter>,
    /// Failed writes, by kind.
    pub write_errors: Family<KindLabels, Counter>,
    /// Events published, by type (`Normal`, `Warning`).
    pub events: Family<KindLabels, Counter>,
    /// Global IP lookups by result (`ok`, `error`).
    pub lookups: Family<KindLabels, Counter>,
    /// Seconds per lookup.
    pub lookup_duration: Histogram,
    /// Failed watches, by watch.
    pub watch_errors: Family<KindLabels, Counter>,
    /// 1 when a daemon advertises its planned address, else 0.
    pub daemon_up_to_date: Family<DaemonLabels, Gauge>,
    /// 1 while this replica holds the leader Lease (and so may write), else 0.
    pub leader: Gauge,
    /// Mon failover steps executed, by step and outcome.
    pub failover_steps: Family<StepLabels, Counter>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

fn labels(kind: &str) -> KindLabels {
    KindLabels {
        kind: kind.to_owned(),
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("mcs_ceph_operator");
        let metrics = Self {
            registry: Registry::default(),
            reconciles: Family::default(),
            reconcile_duration: Histogram::new(exponential_buckets(0.001, 2.0, 16)),
            writes: Family::default(),
            write_errors: Family::default(),
            events: Family::default(),
            lookups: Family::default(),
            lookup_duration: Histogram::new(exponential_buckets(0.001, 2.0, 14)),
            watch_errors: Family::default(),
            daemon_up_to_date: Family::default(),
            leader: Gauge::default(),
            failover_steps: Family::default(),
        };
        registry.register(
            "reconciles",
            "Reconciles by result",
            metrics.reconciles.clone(),
        );
        registry.register(
            "reconcile_duration_seconds",
            "Seconds per reconcile (decision, writes and lookups)",
            metrics.reconcile_duration.clone(),
        );
        registry.register(
            "writes",
            "Server-side applies by kind",
            metrics.writes.clone(),
        );
        registry.register(
            "write_errors",
            "Failed server-side applies by kind",
            metrics.write_errors.clone(),
        );
        registry.register("events", "Events published by type", metrics.events.clone());
        registry.register(
            "dns_lookups",
            "Global IP lookups by result",
            metrics.lookups.clone(),
        );
        registry.register(
            "dns_lookup_duration_seconds",
            "Seconds per global IP lookup",
            metrics.lookup_duration.clone(),
        );
        registry.register(
            "watch_errors",
            "Failed watch requests by watch (retried with backoff)",
            metrics.watch_errors.clone(),
        );
        registry.register(
            "daemon_up_to_date",
            "1 when a daemon advertises its planned address, else 0",
            metrics.daemon_up_to_date.clone(),
        );
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease and writes, else 0",
            metrics.leader.clone(),
        );
        registry.register(
            "failover_steps",
            "Mon failover steps executed by step and outcome",
            metrics.failover_steps.clone(),
        );
        Self {
            registry: root,
            ..metrics
        }
    }

    /// Counts a reconcile.
    pub fn reconciled(&self, result: &str, took: Duration) {
        self.reconciles.get_or_create(&labels(result)).inc();
        self.reconcile_duration.observe(took.as_secs_f64());
    }

    /// Counts a write (and whether it failed).
    pub fn wrote(&self, kind: &str, ok: bool) {
        let family = if ok { &self.writes } else { &self.write_errors };
        family.get_or_create(&labels(kind)).inc();
    }

    /// Counts an Event.
    pub fn evented(&self, type_: &str) {
        self.events.get_or_create(&labels(type_)).inc();
    }

    /// Counts a lookup.
    pub fn looked_up(&self, ok: bool, took: Duration) {
        self.lookups
            .get_or_create(&labels(if ok { "ok" } else { "error" }))
            .inc();
        self.lookup_duration.observe(took.as_secs_f64());
    }

    /// Counts a failed watch request.
    pub fn watch_failed(&self, watch: &str) {
        self.watch_errors.get_or_create(&labels(watch)).inc();
    }

    /// Counts a mon failover step and its outcome.
    pub fn failover_step(&self, step: &str, outcome: &str) {
        self.failover_steps
            .get_or_create(&StepLabels {
                step: step.to_owned(),
                outcome: outcome.to_owned(),
            })
            .inc();
    }

    /// Sets the per-daemon readiness of one cluster.
    pub fn set_daemons(&self, namespace: &str, cluster: &str, daemons: &[(String, bool)]) {
        for (daemon, up_to_date) in daemons {
            self.daemon_up_to_date
                .get_or_create(&DaemonLabels {
                    namespace: namespace.to_owned(),
                    cluster: cluster.to_owned(),
                    daemon: daemon.clone(),
                })
                .set(i64::from(*up_to_date));
        }
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        clusterset_daemon::encode_metrics(&self.registry)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_exposed_with_the_prefix() {
        let metrics = Metrics::new();
        metrics.reconciled("ok", Duration::from_millis(3));
        metrics.wrote("apply_service", true);
        metrics.wrote("apply_status", false);
        metrics.evented("Warning");
        metrics.looked_up(false, Duration::from_millis(20));
        metrics.watch_failed("services");
        metrics.set_daemons(
            "rook-ceph",
            "my-cluster",
            &[("osd.0".into(), true), ("mon.a".into(), false)],
        );
        metrics.leader.set(1);
        metrics.failover_step("provision_address", "address_pending");
        let text = metrics.encode();
        for line in [
            "mcs_ceph_operator_reconciles_total{kind=\"ok\"} 1",
            "mcs_ceph_operator_reconcile_duration_seconds_count 1",
            "mcs_ceph_operator_writes_total{kind=\"apply_service\"} 1",
            "mcs_ceph_operator_write_errors_total{kind=\"apply_status\"} 1",
            "mcs_ceph_operator_events_total{kind=\"Warning\"} 1",
            "mcs_ceph_operator_dns_lookups_total{kind=\"error\"} 1",
            "mcs_ceph_operator_dns_lookup_duration_seconds_count 1",
            "mcs_ceph_operator_watch_errors_total{kind=\"services\"} 1",
            "mcs_ceph_operator_daemon_up_to_date{namespace=\"rook-ceph\",cluster=\"my-cluster\",daemon=\"osd.0\"} 1",
            "mcs_ceph_operator_daemon_up_to_date{namespace=\"rook-ceph\",cluster=\"my-cluster\",daemon=\"mon.a\"} 0",
            "mcs_ceph_operator_leader 1",
            "mcs_ceph_operator_failover_steps_total{step=\"provision_address\",outcome=\"address_pending\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
    }
}

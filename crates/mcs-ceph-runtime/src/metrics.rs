//! Prometheus metrics of the operator (prometheus-client), served on `/metrics` under the
//! `mcs_ceph_operator` prefix.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

/// Labels of a count by outcome: `result` (`ok`, `error`, `not_synced`).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ResultLabels {
    /// The outcome.
    pub result: String,
}

/// Labels of a count by operation: `operation` (`apply_service`, `apply_status`, ...; the
/// agent's writes carry the same label).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// The kind of write.
    pub operation: String,
}

/// Labels of the Event count: `type` (`Normal`, `Warning`), the Event's own field.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct TypeLabels {
    /// The Event type.
    pub r#type: String,
}

/// Labels of the watch failure count: `watch` (`cephclusters`, `services`, ...).
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct WatchLabels {
    /// The watch.
    pub watch: String,
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
    pub reconciles: Family<ResultLabels, Counter>,
    /// Seconds one reconcile took (decision, writes and lookups).
    pub reconcile_duration: Histogram,
    /// Writes carried out, by operation (`apply_service`, `apply_service_export`,
    /// `apply_status`, ...).
    pub writes: Family<OperationLabels, Counter>,
    /// Failed writes, by operation.
    pub write_errors: Family<OperationLabels, Counter>,
    /// Events published, by type (`Normal`, `Warning`).
    pub events: Family<TypeLabels, Counter>,
    /// Global IP lookups by result (`ok`, `error`).
    pub lookups: Family<ResultLabels, Counter>,
    /// Seconds per lookup.
    pub lookup_duration: Histogram,
    /// Failed watches, by watch.
    pub watch_errors: Family<WatchLabels, Counter>,
    /// 1 when a daemon advertises its planned address, else 0; per CephCluster, kept by
    /// [`Metrics::set_daemons`], [`Metrics::forget_cluster`] and [`Metrics::retain_clusters`]
    /// to the clusters that exist and the daemons they have.
    pub daemon_up_to_date: Family<DaemonLabels, Gauge>,
    /// The daemons of each CephCluster (namespace, name) exposed in `daemon_up_to_date`, so
    /// that their series can be removed; its lock also orders a reconcile's update against the
    /// removal of its cluster.
    exposed_daemons: Mutex<BTreeMap<(String, String), BTreeSet<String>>>,
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

fn result(result: &str) -> ResultLabels {
    ResultLabels {
        result: result.to_owned(),
    }
}

fn operation(operation: &str) -> OperationLabels {
    OperationLabels {
        operation: operation.to_owned(),
    }
}

fn daemon(namespace: &str, cluster: &str, daemon: &str) -> DaemonLabels {
    DaemonLabels {
        namespace: namespace.to_owned(),
        cluster: cluster.to_owned(),
        daemon: daemon.to_owned(),
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
            exposed_daemons: Mutex::default(),
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
            "Writes (server-side applies and deletes) by operation",
            metrics.writes.clone(),
        );
        registry.register(
            "write_errors",
            "Failed writes by operation",
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
    pub fn reconciled(&self, outcome: &str, took: Duration) {
        self.reconciles.get_or_create(&result(outcome)).inc();
        self.reconcile_duration.observe(took.as_secs_f64());
    }

    /// Counts a write (and whether it failed).
    pub fn wrote(&self, kind: &str, ok: bool) {
        let family = if ok { &self.writes } else { &self.write_errors };
        family.get_or_create(&operation(kind)).inc();
    }

    /// Counts an Event.
    pub fn evented(&self, type_: &str) {
        self.events
            .get_or_create(&TypeLabels {
                r#type: type_.to_owned(),
            })
            .inc();
    }

    /// Counts a lookup.
    pub fn looked_up(&self, ok: bool, took: Duration) {
        self.lookups
            .get_or_create(&result(if ok { "ok" } else { "error" }))
            .inc();
        self.lookup_duration.observe(took.as_secs_f64());
    }

    /// Counts a failed watch request.
    pub fn watch_failed(&self, watch: &str) {
        self.watch_errors
            .get_or_create(&WatchLabels {
                watch: watch.to_owned(),
            })
            .inc();
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

    fn exposed(&self) -> MutexGuard<'_, BTreeMap<(String, String), BTreeSet<String>>> {
        self.exposed_daemons
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }

    /// Sets the per-daemon readiness of one cluster to exactly `daemons`: the series of its
    /// daemons not listed (removed OSDs, a cluster disabled or blocked) are removed. Unless
    /// `exists` (asked under the same lock as [`Metrics::forget_cluster`] takes, after the
    /// watch cache has dropped a deleted cluster) says the cluster is still there, its series are
    /// removed instead: a reconcile that ends after its cluster was deleted leaves nothing
    /// behind.
    pub fn set_daemons(
        &self,
        namespace: &str,
        cluster: &str,
        daemons: &[(String, bool)],
        exists: impl FnOnce() -> bool,
    ) {
        let mut exposed = self.exposed();
        let key = (namespace.to_owned(), cluster.to_owned());
        let before = exposed.remove(&key).unwrap_or_default();
        let now: BTreeSet<String> = if exists() {
            daemons.iter().map(|(name, _)| name.clone()).collect()
        } else {
            BTreeSet::new()
        };
        self.remove_series(namespace, cluster, before.difference(&now));
        if now.is_empty() {
            return;
        }
        for (name, up_to_date) in daemons {
            self.daemon_up_to_date
                .get_or_create(&daemon(namespace, cluster, name))
                .set(i64::from(*up_to_date));
        }
        exposed.insert(key, now);
    }

    /// Removes every series of a deleted cluster.
    pub fn forget_cluster(&self, namespace: &str, cluster: &str) {
        let mut exposed = self.exposed();
        let key = (namespace.to_owned(), cluster.to_owned());
        let gone = exposed.remove(&key).unwrap_or_default();
        self.remove_series(namespace, cluster, &gone);
    }

    /// Removes the series of every cluster for which `exists(namespace, name)` is false (after
    /// a relist: the clusters deleted while the watch was away).
    pub fn retain_clusters(&self, exists: impl Fn(&str, &str) -> bool) {
        let mut exposed = self.exposed();
        let gone: Vec<(String, String)> = exposed
            .keys()
            .filter(|(namespace, name)| !exists(namespace, name))
            .cloned()
            .collect();
        for key in gone {
            let daemons = exposed.remove(&key).unwrap_or_default();
            self.remove_series(&key.0, &key.1, &daemons);
        }
    }

    fn remove_series<'a>(
        &self,
        namespace: &str,
        cluster: &str,
        daemons: impl IntoIterator<Item = &'a String>,
    ) {
        for name in daemons {
            self.daemon_up_to_date
                .remove(&daemon(namespace, cluster, name));
        }
    }

    /// The metrics in the OpenMetrics text format.
    pub fn encode(&self) -> String {
        clusterset_daemon::encode_metrics(&self.registry)
    }
}

/// What `/metrics` serves ([`clusterset_daemon::Endpoints`]).
impl clusterset_daemon::MetricsText for Metrics {
    fn metrics_text(&self) -> String {
        self.encode()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_family_is_exposed_with_the_prefix_and_labels_named_for_what_they_hold() {
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
            || true,
        );
        metrics.leader.set(1);
        metrics.failover_step("provision_address", "address_pending");
        let text = metrics.encode();
        for line in [
            "mcs_ceph_operator_reconciles_total{result=\"ok\"} 1",
            "mcs_ceph_operator_reconcile_duration_seconds_count 1",
            "mcs_ceph_operator_writes_total{operation=\"apply_service\"} 1",
            "mcs_ceph_operator_write_errors_total{operation=\"apply_status\"} 1",
            "mcs_ceph_operator_events_total{type=\"Warning\"} 1",
            "mcs_ceph_operator_dns_lookups_total{result=\"error\"} 1",
            "mcs_ceph_operator_dns_lookup_duration_seconds_count 1",
            "mcs_ceph_operator_watch_errors_total{watch=\"services\"} 1",
            "mcs_ceph_operator_daemon_up_to_date{namespace=\"rook-ceph\",cluster=\"my-cluster\",daemon=\"osd.0\"} 1",
            "mcs_ceph_operator_daemon_up_to_date{namespace=\"rook-ceph\",cluster=\"my-cluster\",daemon=\"mon.a\"} 0",
            "mcs_ceph_operator_leader 1",
            "mcs_ceph_operator_failover_steps_total{step=\"provision_address\",outcome=\"address_pending\"} 1",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        assert!(!text.contains("kind="), "{text}");
    }

    /// The `daemon_up_to_date` series, sorted.
    fn daemon_series(metrics: &Metrics) -> Vec<String> {
        let mut series: Vec<String> = metrics
            .encode()
            .lines()
            .filter(|l| l.starts_with("mcs_ceph_operator_daemon_up_to_date{"))
            .map(str::to_owned)
            .collect();
        series.sort();
        series
    }

    fn series(namespace: &str, cluster: &str, daemon: &str, value: u8) -> String {
        format!(
            "mcs_ceph_operator_daemon_up_to_date{{namespace=\"{namespace}\",cluster=\"{cluster}\",daemon=\"{daemon}\"}} {value}"
        )
    }

    #[test]
    fn a_clusters_daemon_series_follow_its_daemons_and_go_with_the_cluster() {
        let metrics = Metrics::new();
        let both = [("osd.0".to_owned(), true), ("osd.1".to_owned(), false)];
        metrics.set_daemons("rook-ceph", "east", &both, || true);
        metrics.set_daemons("other", "west", &[("mon.a".into(), true)], || true);
        assert_eq!(
            daemon_series(&metrics),
            [
                series("other", "west", "mon.a", 1),
                series("rook-ceph", "east", "osd.0", 1),
                series("rook-ceph", "east", "osd.1", 0),
            ]
        );

        // osd.1 removed from the plan: its series goes, osd.0's stays.
        metrics.set_daemons("rook-ceph", "east", &both[..1], || true);
        assert!(!metrics.encode().contains("daemon=\"osd.1\""));
        assert!(daemon_series(&metrics).contains(&series("rook-ceph", "east", "osd.0", 1)));

        // The cluster disabled or blocked (no daemons): every series of it goes.
        metrics.set_daemons("rook-ceph", "east", &[], || true);
        assert_eq!(
            daemon_series(&metrics),
            [series("other", "west", "mon.a", 1)]
        );

        // Deleted: gone, and the other cluster's series are untouched.
        metrics.set_daemons("rook-ceph", "east", &both, || true);
        metrics.forget_cluster("rook-ceph", "east");
        assert_eq!(
            daemon_series(&metrics),
            [series("other", "west", "mon.a", 1)]
        );
        metrics.forget_cluster("other", "west");
        assert!(daemon_series(&metrics).is_empty());
    }

    #[test]
    fn a_reconcile_ending_after_its_cluster_was_deleted_leaves_no_series() {
        let metrics = Metrics::new();
        let daemons = [("osd.0".to_owned(), true)];
        metrics.set_daemons("rook-ceph", "east", &daemons, || true);
        // The cache no longer holds the cluster when the reconcile publishes its daemons.
        metrics.set_daemons("rook-ceph", "east", &daemons, || false);
        assert!(daemon_series(&metrics).is_empty());
        metrics.set_daemons("rook-ceph", "west", &daemons, || false);
        assert!(daemon_series(&metrics).is_empty());
    }

    #[test]
    fn retaining_the_listed_clusters_removes_the_others() {
        let metrics = Metrics::new();
        for cluster in ["a", "b", "c"] {
            metrics.set_daemons("rook-ceph", cluster, &[("osd.0".into(), true)], || true);
        }
        metrics.retain_clusters(|namespace, name| namespace == "rook-ceph" && name != "b");
        assert_eq!(
            daemon_series(&metrics),
            [
                series("rook-ceph", "a", "osd.0", 1),
                series("rook-ceph", "c", "osd.0", 1),
            ]
        );
    }
}

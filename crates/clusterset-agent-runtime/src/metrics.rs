//! Prometheus metrics of the agent (prometheus-client), served on `/metrics`.

use std::sync::atomic::AtomicU64;
use std::sync::{Arc, PoisonError, RwLock};

use clusterset_dns::QueryCounts;
use clusterset_dns::wire::Transport;
use prometheus_client::collector::Collector;
use prometheus_client::encoding::{DescriptorEncoder, EncodeLabelSet, EncodeMetric};
use prometheus_client::metrics::MetricType;
use prometheus_client::metrics::counter::{ConstCounter, Counter};
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::{Histogram, exponential_buckets};
use prometheus_client::registry::Registry;

use mcs_controller::core::Stats;

/// Labels of per-operation counters.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct OperationLabels {
    /// The write or watch (`publish_record`, `apply_service_import`, `leases`, ...).
    pub operation: String,
}

/// Labels of per-service series.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ServiceLabels {
    /// The service's namespace.
    pub namespace: String,
    /// The service's name.
    pub service: String,
}

/// Labels of the foreign-writer gauge.
#[derive(Debug, Clone, Hash, PartialEq, Eq, EncodeLabelSet)]
pub struct ForeignWriterLabels {
    /// Why the object is ignored: `record_namespace` (a record outside its cluster's records
    /// namespace), `shared_namespace` (a record in the shared broker namespace while those are
    /// ignored), `lease_name` (a Lease that names a cluster whose Lease it is not).
    pub reason: String,
}

/// Where the DNS query counts come from: read at every scrape.
pub type DnsQuerySource = Arc<dyn Fn() -> QueryCounts + Send + Sync>;

/// The `dns_queries` family, read from the DNS server's counters at scrape time (nothing is
/// copied between scrapes, and the server's hot path knows nothing of Prometheus).
#[derive(Default)]
struct DnsQueries {
    source: RwLock<Option<DnsQuerySource>>,
}

impl std::fmt::Debug for DnsQueries {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let set = self
            .source
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .is_some();
        f.debug_struct("DnsQueries")
            .field("source_set", &set)
            .finish()
    }
}

impl Collector for DnsQueries {
    fn encode(&self, mut encoder: DescriptorEncoder) -> Result<(), std::fmt::Error> {
        let source = self
            .source
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone();
        // Without a DNS server (--no-dns) the family is left out.
        let Some(source) = source else {
            return Ok(());
        };
        let counts = source();
        let mut family = encoder.encode_descriptor(
            "dns_queries",
            "DNS queries answered by the clusterset DNS server, by transport and response code",
            None,
            MetricType::Counter,
        )?;
        for (transport, rcode, n) in counts.iter() {
            let labels = [
                ("protocol", transport_label(transport)),
                ("rcode", rcode.as_str()),
            ];
            ConstCounter::new(n).encode(family.encode_family(&labels)?)?;
        }
        Ok(())
    }
}

fn transport_label(transport: Transport) -> &'static str {
    match transport {
        Transport::Udp => "udp",
        Transport::Tcp => "tcp",
    }
}

/// Every metric of the agent, registered under the `clusterset_agent` prefix.
#[derive(Debug)]
pub struct Metrics {
    registry: Registry,
    /// Local ServiceExports.
    pub exports: Gauge,
    /// This cluster's records in the broker.
    pub published_records: Gauge,
    /// Records of all clusters in the broker.
    pub broker_records: Gauge,
    /// ServiceImports stored in this cluster.
    pub imports: Gauge,
    /// Exporting clusters whose heartbeat stopped.
    pub stale_clusters: Gauge,
    /// Records and Leases on the hub ignored because their writer could not have been the
    /// cluster they name, by reason.
    pub foreign_writer_objects: Family<ForeignWriterLabels, Gauge>,
    /// Propagation lag, seconds from a record's publication to the import write here.
    pub propagation_lag: Histogram,
    /// The last propagation lag per imported service, seconds; a service's series goes with
    /// its ServiceImport ([`Metrics::forget_service`]).
    pub service_propagation_lag: Family<ServiceLabels, Gauge<f64, AtomicU64>>,
    /// Failed broker reads (watch errors) and writes, by operation.
    pub broker_sync_errors: Family<OperationLabels, Counter>,
    /// Failed member-cluster reads and writes, by operation.
    pub local_errors: Family<OperationLabels, Counter>,
    /// Writes carried out, by operation.
    pub writes: Family<OperationLabels, Counter>,
    /// Writes to the member cluster dropped because their object or its namespace was gone
    /// (404), by operation.
    pub writes_dropped: Family<OperationLabels, Counter>,
    /// 1 while this replica holds the leader Lease (and so runs the control loop), else 0.
    pub leader: Gauge,
    /// DNS queries answered, by protocol and response code (see [`Metrics::set_dns_query_source`]).
    dns_queries: Arc<DnsQueries>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    /// Creates and registers every metric.
    pub fn new() -> Self {
        let mut root = Registry::default();
        let registry = root.sub_registry_with_prefix("clusterset_agent");
        let metrics = Self {
            registry: Registry::default(),
            exports: Gauge::default(),
            published_records: Gauge::default(),
            broker_records: Gauge::default(),
            imports: Gauge::default(),
            stale_clusters: Gauge::default(),
            foreign_writer_objects: Family::default(),
            propagation_lag: Histogram::new(exponential_buckets(0.005, 2.0, 16)),
            service_propagation_lag: Family::default(),
            broker_sync_errors: Family::default(),
            local_errors: Family::default(),
            writes: Family::default(),
            writes_dropped: Family::default(),
            leader: Gauge::default(),
            dns_queries: Arc::default(),
        };
        registry.register("exports", "Local ServiceExports", metrics.exports.clone());
        registry.register(
            "leader",
            "1 while this replica holds the leader Lease and runs the control loop, else 0 (every replica serves DNS)",
            metrics.leader.clone(),
        );
        registry.register(
            "published_records",
            "This cluster's export records in the broker",
            metrics.published_records.clone(),
        );
        registry.register(
            "broker_records",
            "Export records of all clusters in the broker",
            metrics.broker_records.clone(),
        );
        registry.register(
            "imports",
            "ServiceImports stored in this cluster",
            metrics.imports.clone(),
        );
        registry.register(
            "stale_clusters",
            "Exporting clusters whose heartbeat Lease ran out",
            metrics.stale_clusters.clone(),
        );
        registry.register(
            "foreign_writer_objects",
            "Records and Leases on the hub ignored because their writer could not have been the cluster they name",
            metrics.foreign_writer_objects.clone(),
        );
        registry.register(
            "propagation_lag_seconds",
            "Seconds from an exporting agent publishing a record to this agent writing the import",
            metrics.propagation_lag.clone(),
        );
        registry.register(
            "service_propagation_lag_seconds",
            "The last propagation lag of each imported service",
            metrics.service_propagation_lag.clone(),
        );
        registry.register(
            "broker_sync_errors",
            "Failed watches of and writes to the broker",
            metrics.broker_sync_errors.clone(),
        );
        registry.register(
            "local_errors",
            "Failed watches of and writes to the member cluster",
            metrics.local_errors.clone(),
        );
        registry.register("writes", "Writes carried out", metrics.writes.clone());
        registry.register(
            "writes_dropped",
            "Writes to the member cluster dropped because their object or its namespace was gone (404)",
            metrics.writes_dropped.clone(),
        );
        registry.register_collector(Box::new(Arc::clone(&metrics.dns_queries)));
        Self {
            registry: root,
            ..metrics
        }
    }

    /// Sets the gauges from the core's counts.
    pub fn set_stats(&self, stats: &Stats) {
        let set = |gauge: &Gauge, value: usize| {
            gauge.set(i64::try_from(value).unwrap_or(i64::MAX));
        };
        set(&self.exports, stats.local_exports);
        set(&self.published_records, stats.published_records);
        set(&self.broker_records, stats.broker_records);
        set(&self.imports, stats.imports);
        set(&self.stale_clusters, stats.stale_clusters);
        for (reason, count) in stats.foreign_writers {
            set(
                &self
                    .foreign_writer_objects
                    .get_or_create(&ForeignWriterLabels {
                        reason: reason.to_owned(),
                    }),
                count,
            );
        }
    }

    /// Counts one failure of `operation` against the broker or the member cluster.
    pub fn count_error(&self, broker: bool, operation: &str) {
        let family = if broker {
            &self.broker_sync_errors
        } else {
            &self.local_errors
        };
        family
            .get_or_create(&OperationLabels {
                operation: operation.to_owned(),
            })
            .inc();
    }

    /// Records a propagation lag of `seconds` for a service.
    pub fn observe_lag(&self, namespace: &str, service: &str, seconds: f64) {
        self.propagation_lag.observe(seconds);
        self.service_propagation_lag
            .get_or_create(&ServiceLabels {
                namespace: namespace.to_owned(),
                service: service.to_owned(),
            })
            .set(seconds);
    }

    /// Removes the lag series of a service no longer imported (its ServiceImport deleted).
    pub fn forget_service(&self, namespace: &str, service: &str) {
        self.service_propagation_lag.remove(&ServiceLabels {
            namespace: namespace.to_owned(),
            service: service.to_owned(),
        });
    }

    /// Exposes `dns_queries_total{protocol,rcode}` from `source`, read at every scrape (every
    /// transport and response code, zeros included). Until this is called (or with `--no-dns`)
    /// the family is absent. A later call replaces the source.
    ///
    /// ```
    /// use clusterset_agent_runtime::metrics::Metrics;
    /// use clusterset_dns::{QueryCounts, Rcode, wire::Transport};
    ///
    /// let metrics = Metrics::new();
    /// assert!(!metrics.encode().contains("dns_queries"));
    /// // In the agent: let counter = server.query_counter(); move || counter.snapshot()
    /// metrics.set_dns_query_source(|| [(Transport::Udp, Rcode::NxDomain, 4)].into_iter().collect());
    /// assert!(metrics.encode().contains(r#"clusterset_agent_dns_queries_total{protocol="udp",rcode="NXDOMAIN"} 4"#));
    /// ```
    pub fn set_dns_query_source(&self, source: impl Fn() -> QueryCounts + Send + Sync + 'static) {
        let source: DnsQuerySource = Arc::new(source);
        *self
            .dns_queries
            .source
            .write()
            .unwrap_or_else(PoisonError::into_inner) = Some(source);
    }

    /// The metrics in the Prometheus text format.
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
    use clusterset_dns::Rcode;

    use super::*;

    #[test]
    fn exposes_every_family_with_the_prefix() {
        let metrics = Metrics::new();
        metrics.set_stats(&Stats {
            local_exports: 3,
            published_records: 2,
            broker_records: 7,
            imports: 5,
            stale_clusters: 1,
            foreign_writers: [
                ("record_namespace", 2),
                ("shared_namespace", 0),
                ("lease_name", 1),
            ],
        });
        metrics.count_error(true, "publish_record");
        metrics.count_error(false, "services");
        metrics.observe_lag("shop", "web", 0.25);
        metrics.set_dns_query_source(|| {
            [
                (Transport::Udp, Rcode::NoError, 12),
                (Transport::Udp, Rcode::NxDomain, 3),
                (Transport::Tcp, Rcode::Refused, 2),
            ]
            .into_iter()
            .collect()
        });
        let text = metrics.encode();
        for line in [
            "clusterset_agent_exports 3",
            "clusterset_agent_published_records 2",
            "clusterset_agent_broker_records 7",
            "clusterset_agent_foreign_writer_objects{reason=\"record_namespace\"} 2",
            "clusterset_agent_foreign_writer_objects{reason=\"lease_name\"} 1",
            "clusterset_agent_imports 5",
            "clusterset_agent_stale_clusters 1",
            "clusterset_agent_broker_sync_errors_total{operation=\"publish_record\"} 1",
            "clusterset_agent_local_errors_total{operation=\"services\"} 1",
            "clusterset_agent_service_propagation_lag_seconds{namespace=\"shop\",service=\"web\"} 0.25",
            "clusterset_agent_propagation_lag_seconds_count 1",
            "# TYPE clusterset_agent_dns_queries counter",
            "clusterset_agent_dns_queries_total{protocol=\"udp\",rcode=\"NOERROR\"} 12",
            "clusterset_agent_dns_queries_total{protocol=\"udp\",rcode=\"NXDOMAIN\"} 3",
            "clusterset_agent_dns_queries_total{protocol=\"tcp\",rcode=\"REFUSED\"} 2",
        ] {
            assert!(text.contains(line), "missing {line:?} in\n{text}");
        }
        // Every protocol and response code is exposed, zeros included.
        for protocol in ["udp", "tcp"] {
            for rcode in Rcode::ALL {
                let series = format!(
                    "clusterset_agent_dns_queries_total{{protocol=\"{protocol}\",rcode=\"{rcode}\"}} "
                );
                assert_eq!(text.matches(&series).count(), 1, "{series:?} in\n{text}");
            }
        }
        assert!(
            text.contains("clusterset_agent_dns_queries_total{protocol=\"udp\",rcode=\"OTHER\"} 0"),
            "{text}"
        );
    }

    #[test]
    fn a_services_lag_series_goes_when_it_is_forgotten_and_the_others_stay() {
        let metrics = Metrics::new();
        metrics.observe_lag("shop", "web", 0.25);
        metrics.observe_lag("shop", "cart", 0.5);
        let web = "clusterset_agent_service_propagation_lag_seconds{namespace=\"shop\",service=\"web\"} 0.25";
        let cart = "clusterset_agent_service_propagation_lag_seconds{namespace=\"shop\",service=\"cart\"} 0.5";
        let text = metrics.encode();
        assert!(text.contains(web) && text.contains(cart), "{text}");
        metrics.forget_service("shop", "web");
        metrics.forget_service("shop", "never-seen");
        let text = metrics.encode();
        assert!(!text.contains("service=\"web\""), "{text}");
        assert!(text.contains(cart), "{text}");
        // The histogram keeps every observation: it is not per service.
        assert!(
            text.contains("clusterset_agent_propagation_lag_seconds_count 2"),
            "{text}"
        );
    }

    #[test]
    fn dns_queries_are_read_at_every_scrape_and_absent_without_dns() {
        let metrics = Metrics::new();
        assert!(!metrics.encode().contains("dns_queries"));
        let answered = Arc::new(AtomicU64::new(1));
        let source = Arc::clone(&answered);
        metrics.set_dns_query_source(move || {
            [(
                Transport::Udp,
                Rcode::NoError,
                source.load(std::sync::atomic::Ordering::Relaxed),
            )]
            .into_iter()
            .collect()
        });
        let line = |n: u64| {
            format!(
                "clusterset_agent_dns_queries_total{{protocol=\"udp\",rcode=\"NOERROR\"}} {n}\n"
            )
        };
        assert!(metrics.encode().contains(&line(1)));
        answered.store(5, std::sync::atomic::Ordering::Relaxed);
        assert!(metrics.encode().contains(&line(5)));
    }
}

//! `/metrics`, `/healthz` and `/readyz`: the server every clusterset daemon shares
//! ([`clusterset_daemon::http`]) with the operator's metrics and readiness.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use clusterset_daemon::{MetricsText, ReadinessCheck};
use tokio::net::TcpListener;

use crate::metrics::Metrics;

/// What `/readyz` reports: ready once every watch cache has synced and reconciling started.
#[derive(Debug, Default)]
pub struct Readiness {
    synced: AtomicBool,
}

impl Readiness {
    /// Records that the caches synced and the reconciler runs.
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
    }

    /// `Ok` when ready, else what is still awaited.
    pub fn check(&self) -> Result<(), String> {
        if self.synced.load(Ordering::Relaxed) {
            Ok(())
        } else {
            Err("waiting for the watch caches to sync (see the log for failing watches)".to_owned())
        }
    }
}

impl MetricsText for Metrics {
    fn metrics_text(&self) -> String {
        self.encode()
    }
}

impl ReadinessCheck for Readiness {
    fn readiness(&self) -> Result<(), String> {
        self.check()
    }
}

/// Serves `/metrics`, `/healthz` and `/readyz` until the task is dropped.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
) -> std::io::Result<()> {
    clusterset_daemon::serve(listener, Arc::new((metrics, readiness))).await
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http::{Request, StatusCode};
    use http_body_util::BodyExt;

    async fn get(
        path: &str,
        metrics: &Arc<Metrics>,
        readiness: &Arc<Readiness>,
    ) -> (StatusCode, String) {
        let request = Request::get(path).body(()).unwrap();
        let endpoints = (Arc::clone(metrics), Arc::clone(readiness));
        let response = clusterset_daemon::respond(&request, &endpoints);
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn ready_only_after_the_caches_synced() {
        let metrics = Arc::new(Metrics::new());
        let readiness = Arc::new(Readiness::default());
        let (status, body) = get("/readyz", &metrics, &readiness).await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert!(body.contains("watch caches"), "{body}");
        assert_eq!(
            get("/healthz", &metrics, &readiness).await.0,
            StatusCode::OK
        );
        readiness.set_synced();
        assert_eq!(get("/readyz", &metrics, &readiness).await.0, StatusCode::OK);
        metrics.wrote("apply_service", true);
        let (status, body) = get("/metrics", &metrics, &readiness).await;
        assert_eq!(status, StatusCode::OK);
        assert!(body.contains("mcs_ceph_operator_writes_total{operation=\"apply_service\"} 1"));
        assert_eq!(
            get("/nope", &metrics, &readiness).await.0,
            StatusCode::NOT_FOUND
        );
    }
}

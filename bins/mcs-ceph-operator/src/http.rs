//! `/metrics`, `/healthz` and `/readyz` over HTTP/1.1 (hyper), as the clusterset agent serves
//! them.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::{Method, Request, Response, StatusCode};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
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

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

/// The response to one request.
pub fn respond(
    request: &Request<impl Sized>,
    metrics: &Metrics,
    readiness: &Readiness,
) -> Response<Full<Bytes>> {
    if request.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "use GET\n".into());
    }
    match request.uri().path() {
        "/metrics" => {
            let mut response = text(StatusCode::OK, metrics.encode());
            response.headers_mut().insert(
                http::header::CONTENT_TYPE,
                http::HeaderValue::from_static(
                    "application/openmetrics-text; version=1.0.0; charset=utf-8",
                ),
            );
            response
        }
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => match readiness.check() {
            Ok(()) => text(StatusCode::OK, "ready\n".into()),
            Err(waiting) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{waiting}\n")),
        },
        other => text(
            StatusCode::NOT_FOUND,
            format!("{other} not found: try /metrics, /healthz or /readyz\n"),
        ),
    }
}

/// Serves until the task is dropped.
pub async fn serve(
    listener: TcpListener,
    metrics: Arc<Metrics>,
    readiness: Arc<Readiness>,
) -> std::io::Result<()> {
    loop {
        let (stream, peer) = listener.accept().await?;
        let metrics = Arc::clone(&metrics);
        let readiness = Arc::clone(&readiness);
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let response = respond(&request, &metrics, &readiness);
                async move { Ok::<_, Infallible>(response) }
            });
            if let Err(e) = http1::Builder::new()
                .serve_connection(TokioIo::new(stream), service)
                .await
            {
                tracing::debug!(error = %e, %peer, "HTTP connection ended");
            }
        });
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use http_body_util::BodyExt;

    async fn get(path: &str, metrics: &Metrics, readiness: &Readiness) -> (StatusCode, String) {
        let request = Request::get(path).body(()).unwrap();
        let response = respond(&request, metrics, readiness);
        let status = response.status();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (status, String::from_utf8(body.to_vec()).unwrap())
    }

    #[tokio::test]
    async fn ready_only_after_the_caches_synced() {
        let metrics = Metrics::new();
        let readiness = Readiness::default();
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
        assert!(body.contains("mcs_ceph_operator_writes_total{kind=\"apply_service\"} 1"));
        assert_eq!(
            get("/nope", &metrics, &readiness).await.0,
            StatusCode::NOT_FOUND
        );
    }
}

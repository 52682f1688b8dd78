//! `/metrics`, `/healthz` and `/readyz` over HTTP/1.1 (hyper).

use std::convert::Infallible;
use std::net::SocketAddr;
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

/// What `/readyz` reports: ready only once the local and the broker caches have synced and the
/// core has started.
#[derive(Debug, Default)]
pub struct Readiness {
    local_synced: AtomicBool,
    broker_synced: AtomicBool,
    started: AtomicBool,
}

impl Readiness {
    /// Records the sync state.
    pub fn set(&self, local_synced: bool, broker_synced: bool, started: bool) {
        self.local_synced.store(local_synced, Ordering::Relaxed);
        self.broker_synced.store(broker_synced, Ordering::Relaxed);
        self.started.store(started, Ordering::Relaxed);
    }

    /// `Ok` when ready, else what is still awaited.
    pub fn check(&self) -> Result<(), String> {
        let mut waiting = Vec::new();
        if !self.local_synced.load(Ordering::Relaxed) {
            waiting.push("the member cluster's caches to sync");
        }
        if !self.broker_synced.load(Ordering::Relaxed) {
            waiting.push("the broker's caches to sync");
        }
        if waiting.is_empty() && !self.started.load(Ordering::Relaxed) {
            waiting.push("the first reconcile");
        }
        if waiting.is_empty() {
            Ok(())
        } else {
            Err(format!("waiting for {}", waiting.join(" and ")))
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
        let (stream, peer): (_, SocketAddr) = listener.accept().await?;
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

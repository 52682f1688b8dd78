//! `/metrics`, `/healthz` and `/readyz` over HTTP/1.1 (hyper, already in kube's graph): the
//! one HTTP server of every daemon.
//!
//! A daemon implements [`MetricsText`] on its metrics and [`ReadinessCheck`] on its readiness,
//! and serves the pair as [`Endpoints`] ([`Endpoints::listen`]); [`Endpoints::respond`] is the
//! pure part, for tests.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::Arc;

use ::http::{HeaderValue, Method, Request, Response, StatusCode, header};
use http_body_util::Full;
use hyper::body::{Bytes, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::TokioIo;
use prometheus_client::registry::Registry;
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

/// The content type of `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A daemon's metrics, as `/metrics` serves them.
pub trait MetricsText: Send + Sync + 'static {
    /// The metrics in the OpenMetrics text format (see [`encode_metrics`]).
    fn metrics_text(&self) -> String;
}

/// A daemon's readiness, as `/readyz` reports it.
pub trait ReadinessCheck: Send + Sync + 'static {
    /// `Ok` when ready to serve, else what is still awaited (the `/readyz` body).
    fn readiness(&self) -> Result<(), String>;
}

/// What a daemon serves over HTTP: `/metrics` from its metrics, `/healthz`, and `/readyz` from
/// its readiness. Cheap to clone (both are shared).
#[derive(Clone)]
pub struct Endpoints {
    metrics: Arc<dyn MetricsText>,
    readiness: Arc<dyn ReadinessCheck>,
}

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints").finish_non_exhaustive()
    }
}

/// A registry in the OpenMetrics text format.
pub fn encode_metrics(registry: &Registry) -> String {
    let mut text = String::new();
    // Writing into a String cannot fail.
    let _ = prometheus_client::encoding::text::encode(&mut text, registry);
    text
}

fn text(status: StatusCode, body: String) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body)));
    *response.status_mut() = status;
    response
}

impl Endpoints {
    /// The endpoints of a daemon with these metrics and this readiness.
    pub fn new(metrics: Arc<impl MetricsText>, readiness: Arc<impl ReadinessCheck>) -> Self {
        Self { metrics, readiness }
    }

    /// The response to one request: `GET /metrics`, `/healthz` (always ok while the process
    /// answers), `/readyz` (503 with what is awaited until ready); 405 for other methods, 404
    /// with the valid paths otherwise.
    ///
    /// ```
    /// use std::sync::Arc;
    /// use clusterset_daemon::{Endpoints, MetricsText, ReadinessCheck};
    ///
    /// struct Starting;
    /// impl MetricsText for Starting {
    ///     fn metrics_text(&self) -> String { String::new() }
    /// }
    /// impl ReadinessCheck for Starting {
    ///     fn readiness(&self) -> Result<(), String> { Err("waiting for the caches".into()) }
    /// }
    ///
    /// let endpoints = Endpoints::new(Arc::new(Starting), Arc::new(Starting));
    /// let request = http::Request::get("/readyz").body(()).unwrap();
    /// assert_eq!(endpoints.respond(&request).status(), http::StatusCode::SERVICE_UNAVAILABLE);
    /// ```
    pub fn respond(&self, request: &Request<impl Sized>) -> Response<Full<Bytes>> {
        if request.method() != Method::GET {
            return text(StatusCode::METHOD_NOT_ALLOWED, "use GET\n".into());
        }
        match request.uri().path() {
            "/metrics" => {
                let mut response = text(StatusCode::OK, self.metrics.metrics_text());
                response.headers_mut().insert(
                    header::CONTENT_TYPE,
                    HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE),
                );
                response
            }
            "/healthz" => text(StatusCode::OK, "ok\n".into()),
            "/readyz" => match self.readiness.readiness() {
                Ok(()) => text(StatusCode::OK, "ready\n".into()),
                Err(waiting) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{waiting}\n")),
            },
            other => text(
                StatusCode::NOT_FOUND,
                format!("{other} not found: try /metrics, /healthz or /readyz\n"),
            ),
        }
    }

    /// Serves [`respond`](Self::respond) on `listener` until the task is dropped (or accepting
    /// fails).
    pub async fn serve(self, listener: TcpListener) -> std::io::Result<()> {
        loop {
            let (stream, peer): (_, SocketAddr) = listener.accept().await?;
            let endpoints = self.clone();
            tokio::spawn(async move {
                let service = service_fn(move |request: Request<Incoming>| {
                    let response = endpoints.respond(&request);
                    async move { Ok::<_, Infallible>(response) }
                });
                if let Err(e) = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), service)
                    .await
                {
                    tracing::debug!(error = %crate::ErrorChain(&e), %peer, "HTTP connection ended");
                }
            });
        }
    }

    /// Binds `address` and [`serve`](Self::serve)s there from a spawned task (abort it to
    /// stop), logging the address bound (with port 0, the port the system gave). Fails only
    /// when `address` cannot be bound.
    pub async fn listen(
        self,
        address: SocketAddr,
    ) -> std::io::Result<(SocketAddr, JoinHandle<std::io::Result<()>>)> {
        let listener = TcpListener::bind(address).await?;
        let bound = listener.local_addr()?;
        tracing::info!(address = %bound, "HTTP endpoints listening");
        Ok((bound, tokio::spawn(self.serve(listener))))
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::atomic::{AtomicBool, Ordering};

    use http_body_util::BodyExt;
    use prometheus_client::metrics::counter::Counter;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    struct Metrics {
        registry: Registry,
        requests: Counter,
    }

    impl Metrics {
        fn new() -> Self {
            let mut registry = Registry::with_prefix("test_daemon");
            let requests = Counter::default();
            registry.register("requests", "Requests handled", requests.clone());
            Self { registry, requests }
        }
    }

    impl MetricsText for Metrics {
        fn metrics_text(&self) -> String {
            encode_metrics(&self.registry)
        }
    }

    #[derive(Default)]
    struct Readiness {
        ready: AtomicBool,
    }

    impl ReadinessCheck for Readiness {
        fn readiness(&self) -> Result<(), String> {
            if self.ready.load(Ordering::Relaxed) {
                Ok(())
            } else {
                Err("waiting for the caches to sync".into())
            }
        }
    }

    async fn get(
        endpoints: &Endpoints,
        method: Method,
        path: &str,
    ) -> (StatusCode, String, String) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap();
        let response = endpoints.respond(&request);
        let status = response.status();
        let content_type = response
            .headers()
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default();
        let body = response.into_body().collect().await.unwrap().to_bytes();
        (
            status,
            String::from_utf8(body.to_vec()).unwrap(),
            content_type,
        )
    }

    #[tokio::test]
    async fn each_path_answers_as_a_kubernetes_probe_and_prometheus_expect() {
        let (metrics, readiness) = (Arc::new(Metrics::new()), Arc::new(Readiness::default()));
        let endpoints = Endpoints::new(Arc::clone(&metrics), Arc::clone(&readiness));
        let (status, body, _) = get(&endpoints, Method::GET, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "waiting for the caches to sync\n");
        let (status, body, _) = get(&endpoints, Method::GET, "/healthz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ok\n"));
        readiness.ready.store(true, Ordering::Relaxed);
        let (status, body, _) = get(&endpoints, Method::GET, "/readyz").await;
        assert_eq!((status, body.as_str()), (StatusCode::OK, "ready\n"));
        metrics.requests.inc();
        let (status, body, content_type) = get(&endpoints, Method::GET, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type, OPENMETRICS_CONTENT_TYPE);
        assert!(body.contains("test_daemon_requests_total 1"), "{body}");
        let (status, body, _) = get(&endpoints, Method::GET, "/nope").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert_eq!(body, "/nope not found: try /metrics, /healthz or /readyz\n");
        let (status, body, _) = get(&endpoints, Method::POST, "/metrics").await;
        assert_eq!(
            (status, body.as_str()),
            (StatusCode::METHOD_NOT_ALLOWED, "use GET\n")
        );
    }

    #[tokio::test]
    async fn listens_over_tcp_on_loopback_until_aborted() {
        let readiness = Arc::new(Readiness::default());
        readiness.ready.store(true, Ordering::Relaxed);
        let endpoints = Endpoints::new(Arc::new(Metrics::new()), readiness);
        let (address, server) = endpoints
            .listen(SocketAddr::from(([127, 0, 0, 1], 0)))
            .await
            .unwrap();
        assert_ne!(address.port(), 0, "the port the system gave");
        let mut stream = tokio::net::TcpStream::connect(address).await.unwrap();
        stream
            .write_all(b"GET /readyz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            .await
            .unwrap();
        let mut reply = String::new();
        stream.read_to_string(&mut reply).await.unwrap();
        assert!(reply.starts_with("HTTP/1.1 200 OK"), "{reply}");
        assert!(reply.ends_with("ready\n"), "{reply}");
        server.abort();
    }

    #[tokio::test]
    async fn an_address_in_use_is_an_error() {
        let taken = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = taken.local_addr().unwrap();
        let endpoints = Endpoints::new(Arc::new(Metrics::new()), Arc::new(Readiness::default()));
        let error = endpoints.listen(address).await.unwrap_err();
        assert_eq!(error.kind(), std::io::ErrorKind::AddrInUse);
    }
}

//! `/metrics`, `/healthz` and `/readyz` over HTTP/1.1 (hyper, already in kube's graph).
//!
//! A daemon implements [`Endpoints`] (its metrics text and its readiness) and runs [`serve`] on
//! a listener; [`respond`] is the pure part, for tests.

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

/// The content type of `/metrics`.
pub const OPENMETRICS_CONTENT_TYPE: &str =
    "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// What a daemon exposes over HTTP.
pub trait Endpoints: Send + Sync + 'static {
    /// The metrics in the OpenMetrics text format (see [`encode_metrics`]).
    fn metrics_text(&self) -> String;
    /// `Ok` when ready to serve, else what is still awaited (shown in the `/readyz` body).
    fn readiness(&self) -> Result<(), String>;
}

/// A daemon's metrics, as `/metrics` serves them.
pub trait MetricsText: Send + Sync + 'static {
    /// The metrics in the OpenMetrics text format (see [`encode_metrics`]).
    fn metrics_text(&self) -> String;
}

/// A daemon's readiness, as `/readyz` reports it.
pub trait ReadinessCheck: Send + Sync + 'static {
    /// `Ok` when ready to serve, else what is still awaited.
    fn readiness(&self) -> Result<(), String>;
}

/// A daemon's metrics and its readiness are its endpoints: each daemon implements the two
/// halves on its own types and serves the pair.
impl<M: MetricsText, R: ReadinessCheck> Endpoints for (Arc<M>, Arc<R>) {
    fn metrics_text(&self) -> String {
        self.0.metrics_text()
    }

    fn readiness(&self) -> Result<(), String> {
        self.1.readiness()
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

/// The response to one request: `GET /metrics`, `/healthz` (always ok while the process
/// answers), `/readyz` (503 with what is awaited until ready); 405 for other methods, 404 with
/// the valid paths otherwise.
///
/// ```
/// use clusterset_daemon::{Endpoints, respond};
///
/// struct Starting;
/// impl Endpoints for Starting {
///     fn metrics_text(&self) -> String { String::new() }
///     fn readiness(&self) -> Result<(), String> { Err("waiting for the caches".into()) }
/// }
///
/// let request = http::Request::get("/readyz").body(()).unwrap();
/// assert_eq!(respond(&request, &Starting).status(), http::StatusCode::SERVICE_UNAVAILABLE);
/// ```
pub fn respond<E: Endpoints + ?Sized>(
    request: &Request<impl Sized>,
    endpoints: &E,
) -> Response<Full<Bytes>> {
    if request.method() != Method::GET {
        return text(StatusCode::METHOD_NOT_ALLOWED, "use GET\n".into());
    }
    match request.uri().path() {
        "/metrics" => {
            let mut response = text(StatusCode::OK, endpoints.metrics_text());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                HeaderValue::from_static(OPENMETRICS_CONTENT_TYPE),
            );
            response
        }
        "/healthz" => text(StatusCode::OK, "ok\n".into()),
        "/readyz" => match endpoints.readiness() {
            Ok(()) => text(StatusCode::OK, "ready\n".into()),
            Err(waiting) => text(StatusCode::SERVICE_UNAVAILABLE, format!("{waiting}\n")),
        },
        other => text(
            StatusCode::NOT_FOUND,
            format!("{other} not found: try /metrics, /healthz or /readyz\n"),
        ),
    }
}

/// Serves [`respond`] on `listener` until the task is dropped (or accepting fails).
pub async fn serve<E: Endpoints>(listener: TcpListener, endpoints: Arc<E>) -> std::io::Result<()> {
    loop {
        let (stream, peer): (_, SocketAddr) = listener.accept().await?;
        let endpoints = Arc::clone(&endpoints);
        tokio::spawn(async move {
            let service = service_fn(move |request: Request<Incoming>| {
                let response = respond(&request, endpoints.as_ref());
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

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use std::sync::atomic::{AtomicBool, Ordering};

    use http_body_util::BodyExt;
    use prometheus_client::metrics::counter::Counter;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    use super::*;

    struct Daemon {
        registry: Registry,
        requests: Counter,
        ready: AtomicBool,
    }

    impl Daemon {
        fn new() -> Self {
            let mut registry = Registry::with_prefix("test_daemon");
            let requests = Counter::default();
            registry.register("requests", "Requests handled", requests.clone());
            Self {
                registry,
                requests,
                ready: AtomicBool::new(false),
            }
        }
    }

    impl Endpoints for Daemon {
        fn metrics_text(&self) -> String {
            encode_metrics(&self.registry)
        }
        fn readiness(&self) -> Result<(), String> {
            if self.ready.load(Ordering::Relaxed) {
                Ok(())
            } else {
                Err("waiting for the caches to sync".into())
            }
        }
    }

    async fn get(daemon: &Daemon, method: Method, path: &str) -> (StatusCode, String, String) {
        let request = Request::builder()
            .method(method)
            .uri(path)
            .body(())
            .unwrap();
        let response = respond(&request, daemon);
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
        let daemon = Daemon::new();
        let (status, body, _) = get(&daemon, Method::GET, "/readyz").await;
        assert_eq!(status, StatusCode::SERVICE_UNAVAILABLE);
        assert_eq!(body, "waiting for the caches to sync\n");
        assert_eq!(
            get(&daemon, Method::GET, "/healthz").await.0,
            StatusCode::OK
        );
        daemon.ready.store(true, Ordering::Relaxed);
        assert_eq!(get(&daemon, Method::GET, "/readyz").await.0, StatusCode::OK);
        daemon.requests.inc();
        let (status, body, content_type) = get(&daemon, Method::GET, "/metrics").await;
        assert_eq!(status, StatusCode::OK);
        assert_eq!(content_type, OPENMETRICS_CONTENT_TYPE);
        assert!(body.contains("test_daemon_requests_total 1"), "{body}");
        let (status, body, _) = get(&daemon, Method::GET, "/nope").await;
        assert_eq!(status, StatusCode::NOT_FOUND);
        assert!(body.contains("/metrics, /healthz or /readyz"), "{body}");
        assert_eq!(
            get(&daemon, Method::POST, "/metrics").await.0,
            StatusCode::METHOD_NOT_ALLOWED
        );
    }

    #[tokio::test]
    async fn serves_over_tcp_on_loopback() {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = listener.local_addr().unwrap();
        let daemon = Arc::new(Daemon::new());
        daemon.ready.store(true, Ordering::Relaxed);
        let server = tokio::spawn(serve(listener, Arc::clone(&daemon)));
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
}

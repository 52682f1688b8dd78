//! What every clusterset daemon (`clusterset-agent`, `mcs-ceph-operator`) shares, so that both
//! answer probes, expose metrics and log the same way:
//! - [`http`]: `/metrics`, `/healthz` and `/readyz` over HTTP/1.1 for any [`Endpoints`];
//! - [`logging`]: the `--log-format text|json` flag and the subscriber set-up (`RUST_LOG`).
#![forbid(unsafe_code)]

pub mod http;
pub mod logging;

pub use http::{Endpoints, encode_metrics, respond, serve};
pub use logging::{LogFormat, init_logging};

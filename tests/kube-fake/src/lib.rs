//! Test support (not published): a Kubernetes API server in miniature that is strict as a real
//! one is ([`api::FakeApi`]: kube-syntax's rules), served over HTTP on loopback for process
//! tests ([`http::ApiServer`]) or behind a `kube::Client` on a tower-test mock service for unit
//! tests ([`mock::client`]), and the recorded member cluster east ([`fixture`]) it answers from;
//! and the strict half of every tower-test mock API server of the daemons' tests
//! ([`strict`]: each request checked by kube-syntax's rules on the test's catalog, refused as a
//! real server refuses it, and every refusal failing the test unless it expects it); and the
//! checks of our CRDs ([`crd`]: by the API server's rules, and the committed files of
//! `deploy/` against what the commands print); and the charts of `deploy/helm` rendered and
//! linted by the real Helm 4 ([`helm`]: found and run) and checked ([`chart`]: every rendered
//! object by kube-syntax's rules, the plain manifests of `deploy/` against the chart).
//!
//! A dev-dependency only: no library has it in its public API.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod api;
pub mod chart;
pub mod crd;
pub mod fixture;
pub mod helm;
pub mod http;
pub mod mock;
pub mod strict;

pub use api::{FakeApi, Seen, is_watch, objects_of, seen};

//! Test support (not published): a Kubernetes API server in miniature that is strict as a real
//! one is ([`api::FakeApi`]: kube-syntax's rules), served over HTTP on loopback for process
//! tests ([`http::ApiServer`]) or behind a `kube::Client` on a tower-test mock service for unit
//! tests ([`mock::client`]), and the recorded member cluster east ([`fixture`]) it answers from.
//!
//! A dev-dependency only: no library has it in its public API.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

pub mod api;
pub mod fixture;
pub mod http;
pub mod mock;

pub use api::{FakeApi, Seen, objects_of, seen};

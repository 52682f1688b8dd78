//! `mcs-ceph-operator`: brings a Rook-layout Ceph cluster onto clusterset addresses through the
//! Kubernetes Multi-Cluster Services API.
//!
//! This package is the binary's flags and their wiring ([`cli`]); the decisions are in the pure
//! crate [`mcs_ceph_core`], the kube shell (watch caches, writes, the reconciler, the mon
//! migration's ports, metrics and HTTP) in [`mcs_ceph_runtime`].
#![forbid(unsafe_code)]

pub mod cli;

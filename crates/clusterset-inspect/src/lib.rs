//! The IO of `mcsctl status` and `mcsctl diagnose`: reaching a cluster as kubectl does
//! ([`kubeconfig::connect`]), reading it through kube ([`reader::ClusterReader`], implemented by
//! [`reader::KubeReader`]), what each command reads
//! ([`status::fetch`], [`diagnose::gather`]), the clusterset DNS answers to the diagnosis's
//! questions ([`diagnose::ask`], with clusterset-dns's resolver) and a monmap given as Ceph's
//! JSON ([`diagnose::read_monmap`], with mon-failover's types). What is read becomes the
//! inputs of clusterset-report's pure functions, which judge it.
#![forbid(unsafe_code)]

pub mod diagnose;
pub mod kubeconfig;
pub mod reader;
pub mod status;

pub use reader::{ClusterReader, KubeReader, ReadError};

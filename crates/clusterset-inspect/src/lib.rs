//! The IO of `mcsctl status` and `mcsctl diagnose`: reading a cluster through kube
//! ([`reader::ClusterReader`], implemented by [`reader::KubeReader`] on a client that
//! `clusterset_daemon::kubeconfig` connects, as kubectl does), what each command reads
//! ([`status::fetch`], [`diagnose::gather`]), the clusterset DNS answers to the diagnosis's
//! questions ([`diagnose::ask`], with clusterset-dns's resolver) and a monmap given as Ceph's
//! JSON ([`diagnose::read_monmap`], with mon-failover's types). What is read becomes the
//! inputs of clusterset-report's pure functions, which judge it. Also what `status --watch`
//! watches ([`watch`]) and what `mcsctl version` and shell completion read (methods of
//! [`KubeReader`]).
#![forbid(unsafe_code)]

pub mod diagnose;
pub mod reader;
pub mod status;
pub mod watch;

pub use reader::{ClusterReader, KubeReader, ReadError};

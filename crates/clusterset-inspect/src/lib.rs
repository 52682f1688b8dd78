//! The IO of the command line's reading commands: reading a cluster through kube
//! ([`reader::ClusterReader`], implemented by [`reader::KubeReader`] on a client that
//! `clusterset_daemon::kubeconfig` connects, as kubectl does), what each command reads
//! ([`status::fetch`], [`diagnose::gather`], [`version::read`]), the clusterset DNS answers to
//! the diagnosis's questions ([`diagnose::ask`], with clusterset-dns's resolver) and to `mcsctl
//! resolve`'s names ([`resolve::resolve`]), and a monmap given as Ceph's JSON
//! ([`diagnose::read_monmap`], with mon-failover's types; from a file or stdin:
//! [`diagnose::load_monmap`]). What is read becomes the inputs of clusterset-report's pure
//! functions, which judge it. Also `status --watch`'s watch ([`watch::StatusWatch`]: what it
//! watches, each change followed by a new reading) and the names shell completion offers
//! (methods of [`KubeReader`]).
#![forbid(unsafe_code)]

pub mod diagnose;
pub mod reader;
pub mod resolve;
pub mod status;
pub mod version;
pub mod watch;

pub use reader::{ClusterReader, KubeReader, ReadError};

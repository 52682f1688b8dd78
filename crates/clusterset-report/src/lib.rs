//! What the clusterset command line shows, computed by pure functions (no client, no runtime,
//! no IO): what `mcsctl status` and `mcsctl diagnose` make of a member cluster's objects already
//! read — the views of the objects ([`view`]: export and import conditions, MCS EndpointSlice
//! addresses, what a Rook mon advertises, a CephCluster's MCS settings), the status report with
//! its problems ([`status`]), the diagnosis of one service hop by hop with causes and fixes
//! ([`diagnose`], the DNS answers and the monmap taken as data) — the summary of a plan
//! (`mcsctl plan -o table`, [`plan`]), the CRDs' and the resolved names' tables ([`crds`],
//! [`resolve`]), what `mcsctl version` shows of the components found ([`version`]), the
//! tables all of them are drawn as ([`table`], with kubectl's `-o wide` and `--no-headers`), the
//! output forms of every command (`-o table|wide|yaml|json|name|jsonpath=`, which a command
//! takes, and rendering a report in them: [`output`]), the durations the flags take
//! (`--timeout=30s`, [`duration`]) and `-o jsonpath=` templates ([`jsonpath`]); and what the
//! commands compute from their arguments: the plan of `mcsctl plan`'s files
//! ([`plan::plan_document`], given the text of each file), the names `mcsctl resolve` asks for
//! ([`resolve::names_to_ask`]).
//!
//! The reading (kube, DNS, files) is the IO crate clusterset-inspect's; the binary parses
//! flags, wires, prints and chooses the exit status.
#![forbid(unsafe_code)]

pub mod crds;
pub mod diagnose;
pub mod duration;
pub mod jsonpath;
pub mod output;
pub mod plan;
pub mod resolve;
pub mod status;
pub mod table;
pub mod version;
pub mod view;

/// Which namespaces to read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scope {
    /// One namespace.
    Namespace(String),
    /// Every namespace (`--all-namespaces`).
    All,
}

impl std::fmt::Display for Scope {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Namespace(ns) => write!(f, "namespace {ns}"),
            Self::All => f.write_str("all namespaces"),
        }
    }
}

/// A list of a resource type that may not be served (its CRD is not installed): `None`.
pub type MaybeServed<T> = Option<Vec<T>>;

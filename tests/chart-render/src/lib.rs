//! Test support (not published): renders a Helm chart as Helm 3 would, for the charts of
//! `deploy/helm`, and checks the rendered objects by Kubernetes' own rules (kube-syntax).
//!
//! No Helm binary is available to the tests, so this crate implements a faithful subset of
//! Go's `text/template` with Helm's settings and the Sprig functions the charts use; what it
//! does not implement it refuses with the file, the line and the construct
//! ([`RenderError::Unsupported`]), never passes through:
//!
//! - syntax: text, `{{ }}` with `{{-`/`-}}` trimming, comments `{{/* */}}`, pipelines (`|`),
//!   parenthesized pipelines, fields (`.Values.a.b`, `.Release.Name`, `.Release.Namespace`,
//!   `.Release.Service`, `.Chart.Name`, `.Chart.Version`, `.Chart.AppVersion`), `.`, `$`,
//!   variables (`$x := ...`, `$x = ...`), string, number, `true`, `false` and `nil` literals;
//! - actions: `if`/`else if`/`else`, `with`/`else`, `range`/`else` over lists and maps (by
//!   sorted keys, with `$i, $e :=`), `define`, `template`, `end`;
//! - functions: `and`, `or`, `not`, `eq`, `ne`, `printf` (`%s %v %d %q %%`), `default`,
//!   `quote`, `trunc`, `trimSuffix`, `replace`, `contains`, `join`, `indent`, `nindent`,
//!   `toYaml`, `include`, `required`.
//!
//! Helm's semantics kept: numbers of values are `float64` (`1000000` prints `1e+06`; `eq` of
//! one and a template's `1` is an error), missing keys print nothing, a field of nil is an
//! error, `nindent` starts with a newline, `toYaml` sorts keys as go-yaml does and quotes only
//! what YAML 1.1 would misread, `quote` escapes as Go's `%q`. [`Chart::render`] renders a chart
//! directory (refusing subcharts, `crds/`, a values schema, and a rendered number that Helm's
//! YAML 1.1 parser and this crate's would read differently, such as `0644`); [`check`]
//! validates what it rendered; [`plain`] compares it with the plain manifests of `deploy/`.
//! Documents are parsed with serde-saphyr, which reads YAML 1.1's booleans (`yes`, `on`, `y`)
//! as go-yaml does.
#![forbid(unsafe_code)]

pub mod chart;
pub mod check;
mod error;
mod exec;
mod funcs;
mod parse;
pub mod plain;
pub mod value;
mod yaml;

pub use chart::{Chart, Manifest, Release, Rendered, merge, render_template};
pub use error::RenderError;

//! What goes wrong while loading or rendering a chart: every error names the file and, for a
//! template, the line.

use std::path::PathBuf;

/// An error of the renderer. Nothing is passed through: a construct the renderer does not
/// implement is [`RenderError::Unsupported`], never output.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// Template syntax, a function or a field the renderer does not implement (Helm may have
    /// it; the renderer refuses it rather than guess what Helm would print).
    #[error(
        "{file}:{line}: {construct} is not implemented by chart-render (it refuses what it cannot render as Helm does)"
    )]
    Unsupported {
        /// The template (`chart/templates/x.yaml`).
        file: String,
        /// The line, from 1.
        line: usize,
        /// The construct refused, e.g. `function "lookup"`.
        construct: String,
    },
    /// A template that Go's template parser refuses too.
    #[error("parse error at ({file}:{line}): {message}")]
    Parse {
        /// The template.
        file: String,
        /// The line, from 1.
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// A template that fails while it runs, as Helm reports it (`required`, a field of nil,
    /// a value of the wrong type for a function).
    #[error("execution error at ({file}:{line}): {message}")]
    Execution {
        /// The template.
        file: String,
        /// The line, from 1.
        line: usize,
        /// What failed (for `required`, its message).
        message: String,
    },
    /// A file of the chart cannot be read.
    #[error("reading {path}: {source}")]
    Io {
        /// The file or directory.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A YAML file of the chart, or a rendered template, is not valid YAML.
    #[error("{file}: invalid YAML: {source}")]
    Yaml {
        /// The file, or the rendered template.
        file: String,
        /// The parser's error.
        #[source]
        source: Box<serde_saphyr::Error>,
    },
    /// The chart itself is not one the renderer can render (no name, a dependency, a `crds/`
    /// directory, a rendered document that is not an object).
    #[error("{file}: {message}")]
    Chart {
        /// The file.
        file: String,
        /// What is wrong.
        message: String,
    },
}

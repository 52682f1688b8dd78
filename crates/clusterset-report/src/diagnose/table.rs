//! The diagnosis as text for people.

use std::fmt::Write as _;

use super::{Diagnosis, Outcome};
use crate::table::{Layout, style, styled};

/// The diagnosis as text for people.
pub fn render_table(diagnosis: &Diagnosis) -> String {
    render_table_in(diagnosis, Layout::default())
}

/// [`render_table`] in `layout`: `--no-headers` drops the title line; `-o wide` is the same
/// (every check already has its detail, cause and fix).
pub fn render_table_in(diagnosis: &Diagnosis, layout: Layout) -> String {
    let mut out = String::new();
    if layout.headers {
        let _ = writeln!(
            out,
            "{} {}/{}",
            styled("Diagnosing service", style::HEADER),
            diagnosis.namespace,
            diagnosis.service
        );
    }
    let width = diagnosis
        .checks
        .iter()
        .map(|c| c.hop.as_str().len())
        .max()
        .unwrap_or(0);
    for check in &diagnosis.checks {
        let (word, word_style) = match check.result {
            Outcome::Pass => ("PASS", style::GOOD),
            Outcome::Fail => ("FAIL", style::BAD),
            Outcome::Skip => ("SKIP", style::DIM),
        };
        let _ = writeln!(
            out,
            "{}  {:width$}  {}: {}",
            styled(word, word_style),
            check.hop.as_str(),
            check.check,
            check.detail
        );
        let indent = " ".repeat(width + 8);
        if let Some(cause) = &check.cause {
            let _ = writeln!(out, "{indent}{} {cause}", styled("cause:", style::WARN));
        }
        if let Some(fix) = &check.fix {
            let _ = writeln!(out, "{indent}{}   {fix}", styled("fix:", style::WARN));
        }
    }
    out.push('\n');
    match &diagnosis.breaks_at {
        None => {
            let _ = writeln!(
                out,
                "{}",
                styled(
                    &format!("No problems found ({} checks).", diagnosis.checks.len()),
                    style::GOOD
                )
            );
        }
        Some(at) => {
            let _ = writeln!(
                out,
                "{}",
                styled(
                    &format!(
                        "{} of {} checks failed; the service breaks at {at}.",
                        diagnosis.failed,
                        diagnosis.checks.len()
                    ),
                    style::BAD
                )
            );
        }
    }
    out
}

//! The one home of command output: the `-o table|yaml|json` choice, rendering a serializable
//! report in it, and writing to stdout. Tables and styles are clusterset-report's
//! ([`clusterset_report::table`]).
//!
//! Styles (anstyle) are written through anstream, which passes them on only when stdout is a
//! terminal that supports colour and `NO_COLOR` is unset (`CLICOLOR_FORCE` forces them), and
//! strips them otherwise. YAML and JSON never carry styles.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use clap::ValueEnum;
use serde::Serialize;

/// Output formats of every read command (`-o`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// YAML.
    Yaml,
    /// JSON.
    Json,
}

/// Renders `value` in `format`; `table` draws the table form.
pub fn render<T: Serialize + ?Sized>(
    value: &T,
    format: Format,
    table: impl FnOnce(&T) -> String,
) -> anyhow::Result<String> {
    match format {
        Format::Table => Ok(table(value)),
        Format::Yaml => serde_saphyr::to_string(&value).context("rendering the output as YAML"),
        Format::Json => serde_json::to_string_pretty(value)
            .map(|json| json + "\n")
            .context("rendering the output as JSON"),
    }
}

/// Renders a list of objects in `format`: YAML as one document per object (what
/// `kubectl apply -f -` takes), JSON as an array, or the table `table` draws.
pub fn render_list<T: Serialize>(
    items: &[T],
    format: Format,
    table: impl FnOnce(&[T]) -> String,
) -> anyhow::Result<String> {
    match format {
        Format::Yaml => {
            serde_saphyr::to_string_multiple(items).context("rendering the output as YAML")
        }
        Format::Json | Format::Table => render(items, format, table),
    }
}

/// Writes `text` to stdout (styles only on a colour terminal). A closed pipe
/// (`mcsctl crds | head`) ends the command quietly.
pub fn print(text: &str) -> anyhow::Result<ExitCode> {
    let mut stdout = anstream::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(ExitCode::SUCCESS),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(ExitCode::SUCCESS),
        Err(e) => Err(anyhow::Error::new(e).context("writing the output")),
    }
}

/// Writes `text` like [`print`], then exits with 1 when `problems` is true, else 0.
pub fn print_verdict(text: &str, problems: bool) -> anyhow::Result<ExitCode> {
    print(text)?;
    Ok(if problems {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_render_the_same_value() {
        #[derive(Serialize)]
        struct V {
            a: u32,
        }
        let v = V { a: 1 };
        assert_eq!(
            render(&v, Format::Json, |_| String::new()).unwrap_or_default(),
            "{\n  \"a\": 1\n}\n"
        );
        assert_eq!(
            render(&v, Format::Yaml, |_| String::new()).unwrap_or_default(),
            "a: 1\n"
        );
        assert_eq!(
            render(&v, Format::Table, |v| format!("A={}", v.a)).unwrap_or_default(),
            "A=1"
        );
    }
}

//! The one home of command output: the `-o table|yaml|json` choice, rendering a serializable
//! report in it, aligned tables, styles, and writing to stdout.
//!
//! Styles (anstyle) are written through anstream, which passes them on only when stdout is a
//! terminal that supports colour and `NO_COLOR` is unset (`CLICOLOR_FORCE` forces them), and
//! strips them otherwise. YAML and JSON never carry styles.

use std::fmt::Write as _;
use std::io::Write as _;
use std::process::ExitCode;

use anstyle::{AnsiColor, Style};
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

/// Styles of the output, one per meaning.
pub mod style {
    use super::{AnsiColor, Style};

    /// Column headers and section titles.
    pub const HEADER: Style = Style::new().bold();
    /// Something is as it should be.
    pub const GOOD: Style = AnsiColor::Green.on_default();
    /// Something is wrong.
    pub const BAD: Style = AnsiColor::Red.on_default().bold();
    /// Something is not there yet or not known.
    pub const WARN: Style = AnsiColor::Yellow.on_default();
    /// Less important text.
    pub const DIM: Style = Style::new().dimmed();
    /// No style.
    pub const PLAIN: Style = Style::new();
}

/// `text` in `style` (the escape codes are stripped on the way out when colours are off).
pub fn styled(text: &str, style: Style) -> String {
    if style == Style::new() {
        text.to_owned()
    } else {
        format!("{style}{text}{style:#}")
    }
}

/// One table cell: its text and style.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cell {
    text: String,
    style: Style,
}

impl Cell {
    /// A cell in `style`.
    pub fn new(text: impl Into<String>, style: Style) -> Self {
        Self {
            text: text.into(),
            style,
        }
    }
}

impl From<String> for Cell {
    fn from(text: String) -> Self {
        Self::new(text, style::PLAIN)
    }
}

impl From<&str> for Cell {
    fn from(text: &str) -> Self {
        Self::new(text, style::PLAIN)
    }
}

/// A table in kubectl's style: upper-case headers, columns three spaces apart.
#[derive(Debug, Clone, Default)]
pub struct Table {
    headers: Vec<&'static str>,
    rows: Vec<Vec<Cell>>,
}

impl Table {
    /// A table with these column headers.
    pub fn new(headers: &[&'static str]) -> Self {
        Self {
            headers: headers.to_vec(),
            rows: Vec::new(),
        }
    }

    /// Adds a row (missing cells are empty).
    pub fn row(&mut self, cells: impl IntoIterator<Item = Cell>) {
        self.rows.push(cells.into_iter().collect());
    }

    /// The table as text, one line per row, without trailing spaces.
    pub fn render(&self) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self.headers.iter().map(|h| h.chars().count()).collect();
        for row in &self.rows {
            for (i, cell) in row.iter().enumerate().take(columns) {
                widths[i] = widths[i].max(cell.text.chars().count());
            }
        }
        let mut out = String::new();
        let header: Vec<Cell> = self
            .headers
            .iter()
            .map(|h| Cell::new(*h, style::HEADER))
            .collect();
        for row in std::iter::once(&header).chain(&self.rows) {
            let mut line = String::new();
            let last = (0..columns)
                .rev()
                .find(|&i| row.get(i).is_some_and(|c| !c.text.is_empty()))
                .unwrap_or(0);
            for (i, width) in widths.iter().enumerate().take(last + 1) {
                let (text, cell_style) = row
                    .get(i)
                    .map_or(("", style::PLAIN), |c| (c.text.as_str(), c.style));
                line.push_str(&styled(text, cell_style));
                if i < last {
                    let pad = width.saturating_sub(text.chars().count()) + 3;
                    line.extend(std::iter::repeat_n(' ', pad));
                }
            }
            let _ = writeln!(out, "{line}");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn strip(text: &str) -> String {
        let mut out = Vec::new();
        let mut stream = anstream::StripStream::new(&mut out);
        let _ = stream.write_all(text.as_bytes());
        String::from_utf8_lossy(&out).into_owned()
    }

    #[test]
    fn tables_align_on_the_plain_text_and_keep_styles_around_cells() {
        let mut table = Table::new(&["NAME", "STATUS", "NOTE"]);
        table.row([Cell::from("a"), Cell::new("True", style::GOOD), "".into()]);
        table.row([
            Cell::from("longer-name"),
            Cell::new("False", style::BAD),
            "why".into(),
        ]);
        let text = table.render();
        assert!(text.contains("\u{1b}[32mTrue\u{1b}[0m"), "{text:?}");
        assert_eq!(
            strip(&text),
            "NAME          STATUS   NOTE\n\
             a             True\n\
             longer-name   False    why\n"
        );
    }

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

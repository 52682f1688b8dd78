//! Tables in kubectl's style and the styles of the output: what every command's table form is
//! drawn with.
//!
//! Styles (anstyle) are written as escape codes around the text; the binary writes them through
//! anstream, which passes them on only to a terminal that supports colour with `NO_COLOR`
//! unset, and strips them otherwise.

use std::fmt::Write as _;

use anstyle::{AnsiColor, Style};

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

/// How a command's table form is drawn: kubectl's `-o wide` (more columns) and
/// `--no-headers` (no column header lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    /// `-o wide`: the extra columns too.
    pub wide: bool,
    /// The column headers (`--no-headers` turns them off).
    pub headers: bool,
}

impl Default for Layout {
    /// `-o table`: the usual columns, with headers.
    fn default() -> Self {
        Self {
            wide: false,
            headers: true,
        }
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
        self.render_in(Layout::default())
    }

    /// The table as text in `layout`: without the header line under `--no-headers` (the
    /// columns are then as wide as their cells, as kubectl's are). Which columns there are is
    /// the caller's choice (`layout.wide`).
    pub fn render_in(&self, layout: Layout) -> String {
        let columns = self.headers.len();
        let mut widths: Vec<usize> = self
            .headers
            .iter()
            .map(|h| if layout.headers { h.chars().count() } else { 0 })
            .collect();
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
        let header_row = layout.headers.then_some(&header);
        for row in header_row.into_iter().chain(&self.rows) {
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
    use std::io::Write as _;

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
        let no_headers = table.render_in(Layout {
            headers: false,
            ..Layout::default()
        });
        assert_eq!(
            strip(&no_headers),
            "a             True\n\
             longer-name   False   why\n"
        );
    }
}

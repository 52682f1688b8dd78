//! The one home of command output: the global `-o table|wide|yaml|json|name` and
//! `--no-headers` flags, which of them a command takes, rendering a serializable report in
//! the chosen one, and writing to stdout. Tables and styles are clusterset-report's
//! ([`clusterset_report::table`]).
//!
//! Styles (anstyle) are written through anstream, which passes them on only when stdout is a
//! terminal that supports colour and `NO_COLOR` is unset (`CLICOLOR_FORCE` forces them), and
//! strips them otherwise. YAML, JSON and names never carry styles.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use clap::{Args, ValueEnum};
use clusterset_report::table::Layout;
use serde::Serialize;

use crate::UsageError;

/// Output formats (`-o`), kubectl's.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum Format {
    /// Aligned columns for people.
    Table,
    /// The table with more columns.
    Wide,
    /// YAML.
    Yaml,
    /// JSON.
    Json,
    /// One `resource.group/name` line per object (`kubectl get -o name`).
    Name,
}

impl Format {
    /// The flag's spelling of the format.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Table => "table",
            Self::Wide => "wide",
            Self::Yaml => "yaml",
            Self::Json => "json",
            Self::Name => "name",
        }
    }
}

/// Every format: what the commands that list objects take.
pub const ALL: &[Format] = &[
    Format::Table,
    Format::Wide,
    Format::Yaml,
    Format::Json,
    Format::Name,
];
/// The formats of a report that lists no objects (`diagnose`, `resolve`, `version`).
pub const REPORT: &[Format] = &[Format::Table, Format::Wide, Format::Yaml, Format::Json];

/// `-o` and `--no-headers`: global flags, taken anywhere on the line (`mcsctl -o json status`,
/// `mcsctl status -o json`).
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs {
    /// Output format: table, wide (more columns), yaml, json, or name (resource/name lines).
    /// Default: table; yaml for crds, and for plan when stdout is not a terminal.
    #[arg(short, long, value_enum, global = true)]
    pub output: Option<Format>,
    /// Tables without their column headers.
    #[arg(long, global = true)]
    pub no_headers: bool,
}

/// The chosen format and table layout.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// The format.
    pub format: Format,
    /// How a table is drawn (`wide`, `--no-headers`).
    pub layout: Layout,
}

impl OutputArgs {
    /// The shape `command` prints in: `-o` (one of `takes`), else `default`; a format the
    /// command does not take is a usage error naming the ones it does.
    pub fn shape(
        &self,
        command: &str,
        default: Format,
        takes: &[Format],
    ) -> Result<Shape, UsageError> {
        let format = self.output.unwrap_or(default);
        if !takes.contains(&format) {
            let names: Vec<&str> = takes.iter().map(|f| f.as_str()).collect();
            return Err(UsageError(format!(
                "mcsctl {command} does not print -o {}: it takes {}",
                format.as_str(),
                names.join(", ")
            )));
        }
        Ok(Shape {
            format,
            layout: Layout {
                wide: format == Format::Wide,
                headers: !self.no_headers,
            },
        })
    }

    /// Refuses `-o` and `--no-headers` for a command that prints no report.
    pub fn refuse(&self, command: &str) -> Result<(), UsageError> {
        match (self.output, self.no_headers) {
            (Some(format), _) => Err(UsageError(format!(
                "mcsctl {command} does not take -o {}: it prints no report",
                format.as_str()
            ))),
            (None, true) => Err(UsageError(format!(
                "mcsctl {command} does not take --no-headers: it prints no table"
            ))),
            (None, false) => Ok(()),
        }
    }
}

/// Renders `value` in `shape`; `table` draws the table forms, `names` gives the `-o name`
/// lines (commands that list no objects refuse `-o name` in [`OutputArgs::shape`]).
pub fn render<T: Serialize + ?Sized>(
    value: &T,
    shape: Shape,
    table: impl FnOnce(&T, Layout) -> String,
    names: impl FnOnce(&T) -> Vec<String>,
) -> anyhow::Result<String> {
    match shape.format {
        Format::Table | Format::Wide => Ok(table(value, shape.layout)),
        Format::Yaml => serde_saphyr::to_string(&value).context("rendering the output as YAML"),
        Format::Json => serde_json::to_string_pretty(value)
            .map(|json| json + "\n")
            .context("rendering the output as JSON"),
        Format::Name => Ok(names(value).into_iter().map(|line| line + "\n").collect()),
    }
}

/// For [`render`] in commands that refuse `-o name`.
pub fn no_names<T: ?Sized>(_: &T) -> Vec<String> {
    Vec::new()
}

/// Renders a list of objects in `shape`: YAML as one document per object (what
/// `kubectl apply -f -` takes), JSON as an array, or as [`render`] does.
pub fn render_list<T: Serialize>(
    items: &[T],
    shape: Shape,
    table: impl FnOnce(&[T], Layout) -> String,
    names: impl FnOnce(&[T]) -> Vec<String>,
) -> anyhow::Result<String> {
    match shape.format {
        Format::Yaml => {
            serde_saphyr::to_string_multiple(items).context("rendering the output as YAML")
        }
        _ => render(items, shape, table, names),
    }
}

/// What goes between two reports of `status --watch` in `format`: a blank line between
/// tables, `---` between YAML documents, nothing between JSON documents (a stream of them,
/// as `jq` reads) or name lists.
pub fn watch_separator(format: Format) -> &'static str {
    match format {
        Format::Table | Format::Wide => "\n",
        Format::Yaml => "---\n",
        Format::Json | Format::Name => "",
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

    fn shape(format: Format) -> Shape {
        Shape {
            format,
            layout: Layout::default(),
        }
    }

    #[test]
    fn formats_render_the_same_value() {
        #[derive(Serialize)]
        struct V {
            a: u32,
        }
        let v = V { a: 1 };
        let table = |v: &V, layout: Layout| format!("A={} wide={}", v.a, layout.wide);
        let names = |v: &V| vec![format!("v/{}", v.a)];
        assert_eq!(
            render(&v, shape(Format::Json), table, names).unwrap_or_default(),
            "{\n  \"a\": 1\n}\n"
        );
        assert_eq!(
            render(&v, shape(Format::Yaml), table, names).unwrap_or_default(),
            "a: 1\n"
        );
        assert_eq!(
            render(&v, shape(Format::Table), table, names).unwrap_or_default(),
            "A=1 wide=false"
        );
        assert_eq!(
            render(&v, shape(Format::Name), table, names).unwrap_or_default(),
            "v/1\n"
        );
    }

    #[test]
    fn a_format_a_command_does_not_print_is_a_usage_error_naming_the_others() {
        let args = OutputArgs {
            output: Some(Format::Name),
            no_headers: true,
        };
        let error = args.shape("diagnose", Format::Table, REPORT).err();
        assert_eq!(
            error.map(|e| e.0).as_deref(),
            Some("mcsctl diagnose does not print -o name: it takes table, wide, yaml, json")
        );
        let wide = OutputArgs {
            output: Some(Format::Wide),
            no_headers: true,
        }
        .shape("status", Format::Table, ALL)
        .ok();
        assert_eq!(
            wide.map(|s| s.layout),
            Some(Layout {
                wide: true,
                headers: false
            })
        );
        assert!(OutputArgs::default().refuse("demo").is_ok());
        assert!(args.refuse("demo").is_err());
    }
}

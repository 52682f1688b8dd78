//! The one home of command output: the global `-o table|wide|yaml|json|name|jsonpath=TEMPLATE`
//! and `--no-headers` flags, which of them a command takes, rendering a serializable report in
//! the chosen one, and writing to stdout. Tables and styles are clusterset-report's
//! ([`clusterset_report::table`]).
//!
//! Styles (anstyle) are written through anstream, which passes them on only when stdout is a
//! terminal that supports colour and `NO_COLOR` is unset (`CLICOLOR_FORCE` forces them), and
//! strips them otherwise. YAML, JSON and names never carry styles.

use std::io::Write as _;
use std::process::ExitCode;

use anyhow::Context;
use clap::builder::{EnumValueParser, PossibleValue, TypedValueParser};
use clap::{Args, ValueEnum};
use clusterset_report::jsonpath::Template;
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
    /// `jsonpath=TEMPLATE`: a template applied to the JSON document.
    #[value(skip)]
    JsonPath,
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
            Self::JsonPath => "jsonpath",
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

/// A value of `-o`: a format, and for `jsonpath=TEMPLATE` its template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The format.
    pub format: Format,
    /// The template of `-o jsonpath=TEMPLATE`.
    pub template: Option<Template>,
}

/// The parser of `-o`: a [`Format`]'s name (clap's error lists them when it is none), or
/// `jsonpath=TEMPLATE` (a template clusterset-report's `jsonpath` refuses is a usage error
/// naming what it does not implement).
#[derive(Debug, Clone, Copy)]
struct ChoiceParser;

impl TypedValueParser for ChoiceParser {
    type Value = Choice;

    fn parse_ref(
        &self,
        cmd: &clap::Command,
        arg: Option<&clap::Arg>,
        value: &std::ffi::OsStr,
    ) -> Result<Choice, clap::Error> {
        if let Some(template) = value.to_str().and_then(|v| v.strip_prefix("jsonpath=")) {
            return Template::parse(template)
                .map(|template| Choice {
                    format: Format::JsonPath,
                    template: Some(template),
                })
                .map_err(|e| {
                    clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{e}\n"))
                        .with_cmd(cmd)
                });
        }
        EnumValueParser::<Format>::new()
            .parse_ref(cmd, arg, value)
            .map(|format| Choice {
                format,
                template: None,
            })
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(
            Format::value_variants()
                .iter()
                .filter_map(ValueEnum::to_possible_value),
        ))
    }
}

/// `-o` and `--no-headers`: global flags, taken anywhere on the line (`mcsctl -o json status`,
/// `mcsctl status -o json`).
#[derive(Debug, Clone, Default, Args)]
pub struct OutputArgs {
    /// Output format: table, wide (more columns), yaml, json, name (resource/name lines), or
    /// jsonpath=TEMPLATE (kubectl's templates: {.a.b}, [N], [*], {range}…{end}). Default: table;
    /// yaml for crds, and for plan when stdout is not a terminal.
    #[arg(short, long, global = true, value_parser = ChoiceParser)]
    pub output: Option<Choice>,
    /// Tables without their column headers.
    #[arg(long, global = true)]
    pub no_headers: bool,
}

/// The chosen format and table layout.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Shape {
    /// The format.
    pub format: Format,
    /// How a table is drawn (`wide`, `--no-headers`).
    pub layout: Layout,
    /// The template of `-o jsonpath=`.
    pub template: Option<Template>,
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
        let format = self.format().unwrap_or(default);
        // A template reads the JSON document: taken wherever JSON is.
        let taken = if format == Format::JsonPath {
            takes.contains(&Format::Json)
        } else {
            takes.contains(&format)
        };
        if !taken {
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
            template: self.output.as_ref().and_then(|c| c.template.clone()),
        })
    }

    /// The format of `-o`, if given.
    pub fn format(&self) -> Option<Format> {
        self.output.as_ref().map(|c| c.format)
    }

    /// Refuses `-o` and `--no-headers` for a command that prints no report.
    pub fn refuse(&self, command: &str) -> Result<(), UsageError> {
        match (self.format(), self.no_headers) {
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
    shape: &Shape,
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
        Format::JsonPath => {
            let document = serde_json::to_value(value).context("rendering the output as JSON")?;
            Ok(shape
                .template
                .as_ref()
                .map(|t| t.render(&document))
                .unwrap_or_default())
        }
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
    shape: &Shape,
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
        Format::JsonPath => "\n",
    }
}

/// Writes `text` to stdout (styles only on a colour terminal). A closed pipe
/// (`mcsctl crds | head`) ends the command quietly.
pub fn print(text: &str) -> anyhow::Result<ExitCode> {
    write(text).map(|_| ExitCode::SUCCESS)
}

/// Writes `text` like [`print`]: `false` when the reader closed the pipe (nothing more to
/// print: `mcsctl status -w | head` ends).
pub fn write(text: &str) -> anyhow::Result<bool> {
    let mut stdout = anstream::stdout().lock();
    match stdout
        .write_all(text.as_bytes())
        .and_then(|()| stdout.flush())
    {
        Ok(()) => Ok(true),
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(false),
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
            template: None,
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
            render(&v, &shape(Format::Json), table, names).unwrap_or_default(),
            "{\n  \"a\": 1\n}\n"
        );
        assert_eq!(
            render(&v, &shape(Format::Yaml), table, names).unwrap_or_default(),
            "a: 1\n"
        );
        assert_eq!(
            render(&v, &shape(Format::Table), table, names).unwrap_or_default(),
            "A=1 wide=false"
        );
        assert_eq!(
            render(&v, &shape(Format::Name), table, names).unwrap_or_default(),
            "v/1\n"
        );
    }

    #[test]
    fn a_format_a_command_does_not_print_is_a_usage_error_naming_the_others() {
        let args = OutputArgs {
            output: Some(Choice {
                format: Format::Name,
                template: None,
            }),
            no_headers: true,
        };
        let error = args.shape("diagnose", Format::Table, REPORT).err();
        assert_eq!(
            error.map(|e| e.0).as_deref(),
            Some("mcsctl diagnose does not print -o name: it takes table, wide, yaml, json")
        );
        let wide = OutputArgs {
            output: Some(Choice {
                format: Format::Wide,
                template: None,
            }),
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

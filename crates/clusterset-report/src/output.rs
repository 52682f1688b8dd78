//! The one home of the command line's output forms: the formats of `-o` (kubectl's
//! `table|wide|yaml|json|name|jsonpath=TEMPLATE`) and `--no-headers`, which of them a command
//! takes ([`Requested::shape`], [`Requested::refuse`]), and rendering a serializable report in
//! the chosen one ([`render`], [`render_list`]). Tables are [`crate::table`]'s; writing to
//! stdout is the binary's.
//!
//! ```
//! use clusterset_report::output::{Choice, Format, Requested, render, no_names};
//! let requested = Requested { choice: Some(Choice::parse("json")?), no_headers: false };
//! let shape = requested.shape("version", Format::Table, Format::REPORT)?;
//! let text = render(&serde_json::json!({"a": 1}), &shape, |_, _| String::new(), no_names)?;
//! assert_eq!(text, "{\n  \"a\": 1\n}\n");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

use serde::Serialize;

use crate::jsonpath::{JsonPathError, Template};
use crate::table::Layout;

/// Output formats (`-o`), kubectl's.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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
    JsonPath,
}

impl Format {
    /// Every format a command that lists objects takes, in the order `-o`'s help lists them
    /// (`jsonpath=` is taken wherever JSON is, and listed apart).
    pub const ALL: &[Format] = &[
        Format::Table,
        Format::Wide,
        Format::Yaml,
        Format::Json,
        Format::Name,
    ];

    /// The formats of a report that lists no objects (`diagnose`, `resolve`, `version`).
    pub const REPORT: &[Format] = &[Format::Table, Format::Wide, Format::Yaml, Format::Json];

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

    /// What the format prints, for `-o`'s help.
    pub fn about(self) -> &'static str {
        match self {
            Self::Table => "Aligned columns for people",
            Self::Wide => "The table with more columns",
            Self::Yaml => "YAML",
            Self::Json => "JSON",
            Self::Name => "One `resource.group/name` line per object (`kubectl get -o name`)",
            Self::JsonPath => "`jsonpath=TEMPLATE`: a template applied to the JSON document",
        }
    }

    /// The format named `name` among [`Format::ALL`] (`jsonpath` takes a template: see
    /// [`Choice::parse`]).
    pub fn named(name: &str) -> Option<Self> {
        Self::ALL.iter().copied().find(|f| f.as_str() == name)
    }

    /// What goes between two reports of `status --watch` in this format: a blank line between
    /// tables, `---` between YAML documents, nothing between JSON documents (a stream of them,
    /// as `jq` reads) or name lists.
    pub fn watch_separator(self) -> &'static str {
        match self {
            Self::Table | Self::Wide => "\n",
            Self::Yaml => "---\n",
            Self::Json | Self::Name => "",
            Self::JsonPath => "\n",
        }
    }
}

/// A value of `-o`: a format, and for `jsonpath=TEMPLATE` its template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Choice {
    /// The format.
    pub format: Format,
    /// The template of `-o jsonpath=TEMPLATE`.
    pub template: Option<Template>,
}

/// Why a value of `-o` is none.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ChoiceError {
    /// `jsonpath=TEMPLATE` with a template [`Template::parse`] refuses.
    #[error(transparent)]
    Template(#[from] JsonPathError),
    /// No format has this name (the command line lists them: [`Format::ALL`]).
    #[error("no output format is named {0:?}")]
    Unknown(String),
}

impl Choice {
    /// The value `text` of `-o`: a [`Format`]'s name, or `jsonpath=TEMPLATE`.
    ///
    /// ```
    /// use clusterset_report::output::{Choice, ChoiceError, Format};
    /// assert_eq!(Choice::parse("wide")?.format, Format::Wide);
    /// assert_eq!(Choice::parse("jsonpath={.a}")?.format, Format::JsonPath);
    /// assert!(matches!(Choice::parse("jsonpath={..a}"), Err(ChoiceError::Template(_))));
    /// assert!(matches!(Choice::parse("jsonpath"), Err(ChoiceError::Unknown(_))));
    /// # Ok::<(), ChoiceError>(())
    /// ```
    pub fn parse(text: &str) -> Result<Self, ChoiceError> {
        if let Some(template) = text.strip_prefix("jsonpath=") {
            return Ok(Self {
                format: Format::JsonPath,
                template: Some(Template::parse(template)?),
            });
        }
        Format::named(text)
            .map(|format| Self {
                format,
                template: None,
            })
            .ok_or_else(|| ChoiceError::Unknown(text.to_owned()))
    }
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

/// A format or flag of the output that a command does not take: a usage error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NotTaken {
    /// `-o FORMAT` that the command does not print.
    #[error("mcsctl {command} does not print -o {format}: it takes {takes}")]
    Format {
        /// The command.
        command: String,
        /// The format asked for.
        format: &'static str,
        /// The formats it takes, comma-separated.
        takes: String,
    },
    /// `-o` given to a command that prints no report.
    #[error("mcsctl {command} does not take -o {format}: it prints no report")]
    NoReport {
        /// The command.
        command: String,
        /// The format asked for.
        format: &'static str,
    },
    /// `--no-headers` given to a command that prints no table.
    #[error("mcsctl {command} does not take --no-headers: it prints no table")]
    NoTable {
        /// The command.
        command: String,
    },
}

/// What the output flags ask for: `-o` (if given) and `--no-headers`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Requested {
    /// `-o`.
    pub choice: Option<Choice>,
    /// `--no-headers`.
    pub no_headers: bool,
}

impl Requested {
    /// The format of `-o`, if given.
    pub fn format(&self) -> Option<Format> {
        self.choice.as_ref().map(|c| c.format)
    }

    /// The shape `command` prints in: `-o` (one of `takes`; `jsonpath=` wherever JSON is),
    /// else `default`; a format the command does not take is refused, naming the ones it does.
    pub fn shape(
        &self,
        command: &str,
        default: Format,
        takes: &[Format],
    ) -> Result<Shape, NotTaken> {
        let format = self.format().unwrap_or(default);
        // A template reads the JSON document: taken wherever JSON is.
        let taken = if format == Format::JsonPath {
            takes.contains(&Format::Json)
        } else {
            takes.contains(&format)
        };
        if !taken {
            let names: Vec<&str> = takes.iter().map(|f| f.as_str()).collect();
            return Err(NotTaken::Format {
                command: command.to_owned(),
                format: format.as_str(),
                takes: names.join(", "),
            });
        }
        Ok(Shape {
            format,
            layout: Layout {
                wide: format == Format::Wide,
                headers: !self.no_headers,
            },
            template: self.choice.as_ref().and_then(|c| c.template.clone()),
        })
    }

    /// Refuses `-o` and `--no-headers` for a command that prints no report.
    pub fn refuse(&self, command: &str) -> Result<(), NotTaken> {
        match (self.format(), self.no_headers) {
            (Some(format), _) => Err(NotTaken::NoReport {
                command: command.to_owned(),
                format: format.as_str(),
            }),
            (None, true) => Err(NotTaken::NoTable {
                command: command.to_owned(),
            }),
            (None, false) => Ok(()),
        }
    }
}

/// A report that cannot be rendered as YAML or JSON.
#[derive(Debug, thiserror::Error)]
pub enum RenderError {
    /// As YAML.
    #[error("rendering the output as YAML")]
    Yaml(#[source] serde_saphyr::SerializeError),
    /// As JSON (also the document a template reads).
    #[error("rendering the output as JSON")]
    Json(#[source] serde_json::Error),
}

/// Renders `value` in `shape`; `table` draws the table forms, `names` gives the `-o name`
/// lines (commands that list no objects refuse `-o name` in [`Requested::shape`]).
pub fn render<T: Serialize + ?Sized>(
    value: &T,
    shape: &Shape,
    table: impl FnOnce(&T, Layout) -> String,
    names: impl FnOnce(&T) -> Vec<String>,
) -> Result<String, RenderError> {
    match shape.format {
        Format::Table | Format::Wide => Ok(table(value, shape.layout)),
        Format::Yaml => serde_saphyr::to_string(&value).map_err(RenderError::Yaml),
        Format::Json => serde_json::to_string_pretty(value)
            .map(|json| json + "\n")
            .map_err(RenderError::Json),
        Format::Name => Ok(names(value).into_iter().map(|line| line + "\n").collect()),
        Format::JsonPath => {
            let document = serde_json::to_value(value).map_err(RenderError::Json)?;
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
) -> Result<String, RenderError> {
    match shape.format {
        Format::Yaml => serde_saphyr::to_string_multiple(items).map_err(RenderError::Yaml),
        _ => render(items, shape, table, names),
    }
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

    fn requested(format: Format, no_headers: bool) -> Requested {
        Requested {
            choice: Some(Choice {
                format,
                template: None,
            }),
            no_headers,
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
        let template = Template::parse("{.a}").ok();
        let jsonpath = Shape {
            template,
            ..shape(Format::JsonPath)
        };
        assert_eq!(render(&v, &jsonpath, table, names).unwrap_or_default(), "1");
    }

    #[test]
    fn a_list_is_one_yaml_document_per_item_and_one_json_array() {
        let items = [1, 2];
        let table = |_: &[i32], _| String::new();
        assert_eq!(
            render_list(&items, &shape(Format::Yaml), table, no_names).unwrap_or_default(),
            "1\n---\n2\n"
        );
        assert_eq!(
            render_list(&items, &shape(Format::Json), table, no_names).unwrap_or_default(),
            "[\n  1,\n  2\n]\n"
        );
    }

    #[test]
    fn a_format_a_command_does_not_print_is_a_usage_error_naming_the_others() {
        let args = requested(Format::Name, true);
        let error = args.shape("diagnose", Format::Table, Format::REPORT).err();
        assert_eq!(
            error.map(|e| e.to_string()).as_deref(),
            Some("mcsctl diagnose does not print -o name: it takes table, wide, yaml, json")
        );
        let wide = requested(Format::Wide, true)
            .shape("status", Format::Table, Format::ALL)
            .ok();
        assert_eq!(
            wide.map(|s| s.layout),
            Some(Layout {
                wide: true,
                headers: false
            })
        );
        assert!(Requested::default().refuse("demo").is_ok());
        assert_eq!(
            args.refuse("demo").map_err(|e| e.to_string()),
            Err("mcsctl demo does not take -o name: it prints no report".to_owned())
        );
        assert_eq!(
            Requested {
                choice: None,
                no_headers: true
            }
            .refuse("dns")
            .map_err(|e| e.to_string()),
            Err("mcsctl dns does not take --no-headers: it prints no table".to_owned())
        );
    }

    #[test]
    fn a_template_is_taken_wherever_json_is() {
        let jsonpath = Requested {
            choice: Choice::parse("jsonpath={.a}").ok(),
            no_headers: false,
        };
        assert!(jsonpath.shape("status", Format::Table, Format::ALL).is_ok());
        assert!(
            jsonpath
                .shape("status", Format::Table, &[Format::Table])
                .is_err()
        );
    }

    #[test]
    fn every_listed_format_is_named_by_its_spelling() {
        for format in Format::ALL {
            assert_eq!(Format::named(format.as_str()), Some(*format));
        }
        assert_eq!(Format::named("jsonpath"), None);
        assert_eq!(Format::Yaml.watch_separator(), "---\n");
        assert_eq!(Format::Json.watch_separator(), "");
        assert_eq!(Format::Wide.watch_separator(), "\n");
    }
}

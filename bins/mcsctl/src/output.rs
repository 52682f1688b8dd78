//! The global output flags as clap takes them (`-o`, `--no-headers`), and writing to stdout.
//! What they mean (the formats, which a command takes, rendering a report in one) is
//! clusterset-report's [`clusterset_report::output`], the one home of output forms; tables and
//! styles are [`clusterset_report::table`]'s.
//!
//! Styles (anstyle) are written through anstream, which passes them on only when stdout is a
//! terminal that supports colour and `NO_COLOR` is unset (`CLICOLOR_FORCE` forces them), and
//! strips them otherwise. YAML, JSON and names never carry styles.

use std::io::Write as _;
use std::process::ExitCode;

use clap::Args;
use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
use clusterset_report::output::{Choice, ChoiceError, Format, Requested, Shape};

use crate::UsageError;

/// `-o`'s values that are a format's name, with what each prints (the help lists them).
fn possible_values() -> impl Iterator<Item = PossibleValue> {
    Format::ALL
        .iter()
        .map(|format| PossibleValue::new(format.as_str()).help(format.about()))
}

/// The parser of `-o`: [`Choice::parse`]; a value that names no format gets clap's error
/// listing them, and a template clusterset-report's `jsonpath` refuses is a usage error naming
/// what it does not implement.
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
        let refused = |error: ChoiceError| {
            clap::Error::raw(clap::error::ErrorKind::InvalidValue, format!("{error}\n"))
                .with_cmd(cmd)
        };
        match value.to_str().map(Choice::parse) {
            Some(Ok(choice)) => Ok(choice),
            Some(Err(error @ ChoiceError::Template(_))) => Err(refused(error)),
            // No format's name (or not UTF-8): clap's own error, listing the formats.
            Some(Err(ChoiceError::Unknown(_))) | None => {
                let name =
                    PossibleValuesParser::new(possible_values()).parse_ref(cmd, arg, value)?;
                Choice::parse(&name).map_err(refused)
            }
        }
    }

    fn possible_values(&self) -> Option<Box<dyn Iterator<Item = PossibleValue> + '_>> {
        Some(Box::new(possible_values()))
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

impl OutputArgs {
    /// What the flags ask for.
    fn requested(&self) -> Requested {
        Requested {
            choice: self.output.clone(),
            no_headers: self.no_headers,
        }
    }

    /// The shape `command` prints in ([`Requested::shape`]); a format it does not take is a
    /// usage error.
    pub fn shape(
        &self,
        command: &str,
        default: Format,
        takes: &[Format],
    ) -> Result<Shape, UsageError> {
        self.requested()
            .shape(command, default, takes)
            .map_err(|e| UsageError::of(&e))
    }

    /// The format of `-o`, if given.
    pub fn format(&self) -> Option<Format> {
        self.requested().format()
    }

    /// Refuses `-o` and `--no-headers` for a command that prints no report (a usage error).
    pub fn refuse(&self, command: &str) -> Result<(), UsageError> {
        self.requested()
            .refuse(command)
            .map_err(|e| UsageError::of(&e))
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

//! Runs parsed templates as Go's `text/template` does with Helm's settings: missing keys of
//! maps are `nil` and print as nothing, a field of `nil` is an error, variables are scoped to
//! the action that declares them, `range` goes over maps by sorted keys.

use std::collections::HashMap;

use crate::error::RenderError;
use crate::funcs;
use crate::parse::{Arg, Node, Pipe, Template};
use crate::value::Val;

/// How deep `include` and `template` may nest here (Helm stops runaway recursion at 1000
/// levels; deeper than this, the renderer refuses rather than overflow its stack).
const MAX_DEPTH: usize = 32;

/// What went wrong inside a function or an action, before the file and line are known.
#[derive(Debug)]
pub(crate) enum Failure {
    /// Go fails too.
    Exec(String),
    /// The renderer does not implement it.
    Unsupported(String),
    /// An error of a nested template, already located.
    Located(RenderError),
}

impl Failure {
    fn locate(self, file: &str, line: usize) -> RenderError {
        match self {
            Self::Exec(message) => RenderError::Execution {
                file: file.to_owned(),
                line,
                message,
            },
            Self::Unsupported(construct) => RenderError::Unsupported {
                file: file.to_owned(),
                line,
                construct,
            },
            Self::Located(error) => error,
        }
    }
}

/// The named templates of a chart (from every file), and the files' own bodies.
#[derive(Debug, Default)]
pub(crate) struct Engine {
    defines: HashMap<String, (String, Vec<Node>)>,
    bodies: HashMap<String, Vec<Node>>,
}

impl Engine {
    /// Adds a parsed file; its `define`s replace earlier ones of the same name, as in Helm.
    pub(crate) fn add(&mut self, file: &str, template: Template) {
        for (name, body) in template.defines {
            self.defines.insert(name, (file.to_owned(), body));
        }
        self.bodies.insert(file.to_owned(), template.body);
    }

    /// Runs the body of `file` with `root` as dot and `$`.
    pub(crate) fn execute(&self, file: &str, root: &Val) -> Result<String, RenderError> {
        let body = self.bodies.get(file).ok_or_else(|| RenderError::Chart {
            file: file.to_owned(),
            message: "no such template".to_owned(),
        })?;
        let mut exec = Exec {
            engine: self,
            file: file.to_owned(),
            vars: vec![("$".to_owned(), root.clone())],
            depth: 0,
        };
        let mut out = String::new();
        exec.walk(&mut out, root, body)?;
        Ok(out)
    }

    /// Runs the named template `name` with `data` (`include`, `template`).
    pub(crate) fn call(&self, name: &str, data: &Val, depth: usize) -> Result<String, Failure> {
        if depth >= MAX_DEPTH {
            return Err(Failure::Unsupported(format!(
                "include or template nested more than {MAX_DEPTH} levels deep (at {name:?})"
            )));
        }
        let (file, body) = self.defines.get(name).ok_or_else(|| {
            Failure::Exec(format!(
                "no template {name:?} associated with template \"gotpl\""
            ))
        })?;
        let mut exec = Exec {
            engine: self,
            file: file.clone(),
            vars: vec![("$".to_owned(), data.clone())],
            depth: depth + 1,
        };
        let mut out = String::new();
        exec.walk(&mut out, data, body).map_err(Failure::Located)?;
        Ok(out)
    }
}

/// One running template.
pub(crate) struct Exec<'a> {
    pub(crate) engine: &'a Engine,
    file: String,
    vars: Vec<(String, Val)>,
    pub(crate) depth: usize,
}

impl Exec<'_> {
    fn walk(&mut self, out: &mut String, dot: &Val, nodes: &[Node]) -> Result<(), RenderError> {
        for node in nodes {
            match node {
                Node::Text(text) => out.push_str(text),
                Node::Output(pipe) => {
                    let value = self.pipe(dot, pipe)?;
                    if pipe.decl.is_empty() {
                        let text = value
                            .scalar_text()
                            .ok_or_else(|| RenderError::Unsupported {
                                file: self.file.clone(),
                                line: pipe.line,
                                construct: format!(
                                    "printing a {} (Go prints it in its own syntax; use toYaml)",
                                    value.type_name()
                                ),
                            })?;
                        out.push_str(&text);
                    }
                }
                Node::If {
                    branches,
                    otherwise,
                } => {
                    let mark = self.vars.len();
                    let mut taken = false;
                    for (condition, body) in branches {
                        if self.pipe(dot, condition)?.truth() {
                            self.walk(out, dot, body)?;
                            taken = true;
                            break;
                        }
                    }
                    if !taken {
                        self.walk(out, dot, otherwise)?;
                    }
                    self.vars.truncate(mark);
                }
                Node::With {
                    pipe,
                    body,
                    otherwise,
                } => {
                    let mark = self.vars.len();
                    let value = self.pipe(dot, pipe)?;
                    if value.truth() {
                        self.walk(out, &value, body)?;
                    } else {
                        self.walk(out, dot, otherwise)?;
                    }
                    self.vars.truncate(mark);
                }
                Node::Range {
                    pipe,
                    body,
                    otherwise,
                } => self.range(out, dot, pipe, body, otherwise)?,
                Node::Call { line, name, pipe } => {
                    let data = match pipe {
                        Some(pipe) => self.pipe(dot, pipe)?,
                        None => Val::Nil,
                    };
                    let text = self
                        .engine
                        .call(name, &data, self.depth)
                        .map_err(|f| f.locate(&self.file, *line))?;
                    out.push_str(&text);
                }
            }
        }
        Ok(())
    }

    fn range(
        &mut self,
        out: &mut String,
        dot: &Val,
        pipe: &Pipe,
        body: &[Node],
        otherwise: &[Node],
    ) -> Result<(), RenderError> {
        let value = self.commands(dot, pipe)?;
        let items: Vec<(Val, Val)> = match value {
            Val::List(items) => items
                .into_iter()
                .enumerate()
                .map(|(i, v)| (Val::Int(i64::try_from(i).unwrap_or(i64::MAX)), v))
                .collect(),
            Val::Map(map) => map.into_iter().map(|(k, v)| (Val::Str(k), v)).collect(),
            Val::Nil => Vec::new(),
            Val::Int(_) => {
                return Err(Failure::Unsupported("range over an integer".to_owned())
                    .locate(&self.file, pipe.line));
            }
            other => {
                return Err(Failure::Exec(format!(
                    "range can't iterate over {}",
                    other.type_name()
                ))
                .locate(&self.file, pipe.line));
            }
        };
        if items.is_empty() {
            return self.walk(out, dot, otherwise);
        }
        let mark = self.vars.len();
        for (key, item) in items {
            match pipe.decl.as_slice() {
                [element] => self.vars.push((element.clone(), item.clone())),
                [k, element] => {
                    self.vars.push((k.clone(), key));
                    self.vars.push((element.clone(), item.clone()));
                }
                _ => {}
            }
            self.walk(out, &item, body)?;
            self.vars.truncate(mark);
        }
        Ok(())
    }

    /// A pipeline's value, its declaration or assignment carried out.
    pub(crate) fn pipe(&mut self, dot: &Val, pipe: &Pipe) -> Result<Val, RenderError> {
        let value = self.commands(dot, pipe)?;
        if let [name] = pipe.decl.as_slice() {
            if pipe.assign {
                let slot = self
                    .vars
                    .iter_mut()
                    .rev()
                    .find(|(n, _)| n == name)
                    .ok_or_else(|| {
                        Failure::Exec(format!("undefined variable: {name}"))
                            .locate(&self.file, pipe.line)
                    })?;
                slot.1 = value.clone();
            } else {
                self.vars.push((name.clone(), value.clone()));
            }
        }
        Ok(value)
    }

    fn commands(&mut self, dot: &Val, pipe: &Pipe) -> Result<Val, RenderError> {
        let mut value: Option<Val> = None;
        for cmd in &pipe.cmds {
            value = Some(
                self.command(dot, cmd, value)
                    .map_err(|f| f.locate(&self.file, pipe.line))?,
            );
        }
        Ok(value.unwrap_or(Val::Nil))
    }

    fn command(&mut self, dot: &Val, args: &[Arg], piped: Option<Val>) -> Result<Val, Failure> {
        match args {
            [Arg::Func(name), rest @ ..] => funcs::call(self, dot, name, rest, piped),
            [only] => {
                if piped.is_some() {
                    return Err(Failure::Exec(
                        "can't give argument to non-function".to_owned(),
                    ));
                }
                self.arg(dot, only)
            }
            _ => Err(Failure::Exec(
                "can't give argument to non-function".to_owned(),
            )),
        }
    }

    /// The value of one word of a command.
    pub(crate) fn arg(&mut self, dot: &Val, arg: &Arg) -> Result<Val, Failure> {
        match arg {
            Arg::Dot => Ok(dot.clone()),
            Arg::Field(fields) => fields_of(dot, fields, ""),
            Arg::Var(name, fields) => {
                let value = self
                    .vars
                    .iter()
                    .rev()
                    .find(|(n, _)| n == name)
                    .map(|(_, v)| v.clone())
                    .ok_or_else(|| Failure::Exec(format!("undefined variable: {name}")))?;
                fields_of(&value, fields, name)
            }
            Arg::Str(s) => Ok(Val::Str(s.clone())),
            Arg::Int(i) => Ok(Val::Int(*i)),
            Arg::Float(f) => Ok(Val::Float(*f)),
            Arg::Bool(b) => Ok(Val::Bool(*b)),
            Arg::Nil => Err(Failure::Exec("nil is not a command".to_owned())),
            Arg::Func(name) => funcs::call(self, dot, name, &[], None),
            Arg::Pipe(pipe) => self.commands(dot, pipe).map_err(Failure::Located),
        }
    }
}

/// `value.a.b`: a map's missing key is nil; a struct's missing field, or a field of nil or of
/// a scalar, is an error.
fn fields_of(value: &Val, fields: &[String], base: &str) -> Result<Val, Failure> {
    let mut current = value.clone();
    let mut path = base.to_owned();
    for field in fields {
        current = match current {
            Val::Map(mut map) => map.remove(field).unwrap_or(Val::Nil),
            Val::Struct(type_name, mut map) => map.remove(field).ok_or_else(|| {
                Failure::Unsupported(format!("the field {path}.{field} (of {type_name})"))
            })?,
            Val::Nil => {
                return Err(Failure::Exec(format!(
                    "nil pointer evaluating interface {{}}.{field} (at {path}.{field})"
                )));
            }
            other => {
                return Err(Failure::Exec(format!(
                    "can't evaluate field {field} in type {} (at {path}.{field})",
                    other.type_name()
                )));
            }
        };
        path.push('.');
        path.push_str(field);
    }
    Ok(current)
}

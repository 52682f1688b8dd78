//! Go's template syntax, the subset the renderer implements: text, `{{ }}` with `{{-`/`-}}`
//! trimming, comments, pipelines of fields, variables, literals and functions, and the actions
//! `if`/`else if`/`else`, `with`/`else`, `range`/`else`, `define`, `template` and `end`.
//! Everything else is refused with the file, the line and the construct.

use crate::error::RenderError;
use crate::funcs::FUNCTIONS;

/// A parsed template file: its own body and the named templates it defines.
#[derive(Debug, Clone)]
pub(crate) struct Template {
    /// The body (empty for a file of `define`s only).
    pub body: Vec<Node>,
    /// `define "name"` ... `end`, in order.
    pub defines: Vec<(String, Vec<Node>)>,
}

/// A node of a template's tree.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    /// Text, already trimmed by its neighbours' markers.
    Text(String),
    /// `{{ pipeline }}`: printed unless it declares a variable.
    Output(Pipe),
    /// `if`, its `else if`s, and `else`.
    If {
        branches: Vec<(Pipe, Vec<Node>)>,
        otherwise: Vec<Node>,
    },
    /// `with` (dot rebound) and `else`.
    With {
        pipe: Pipe,
        body: Vec<Node>,
        otherwise: Vec<Node>,
    },
    /// `range` over a list or a map (by sorted keys), and `else`.
    Range {
        pipe: Pipe,
        body: Vec<Node>,
        otherwise: Vec<Node>,
    },
    /// `template "name" pipeline`.
    Call {
        line: usize,
        name: String,
        pipe: Option<Pipe>,
    },
}

/// A pipeline: an optional declaration (`$x :=`, `$i, $e :=` in `range`) or assignment
/// (`$x =`), then commands joined by `|`.
#[derive(Debug, Clone)]
pub(crate) struct Pipe {
    pub line: usize,
    pub decl: Vec<String>,
    pub assign: bool,
    pub cmds: Vec<Vec<Arg>>,
}

/// One word of a command.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    /// `.`
    Dot,
    /// `.a.b` (fields of dot).
    Field(Vec<String>),
    /// `$x.a.b` (`$` is the root).
    Var(String, Vec<String>),
    Str(String),
    Int(i64),
    Float(f64),
    Bool(bool),
    Nil,
    /// A function by name (its arguments are the command's other words).
    Func(String),
    /// `( pipeline )`.
    Pipe(Box<Pipe>),
}

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Field(Vec<String>),
    Dot,
    Var(String, Vec<String>),
    Str(String),
    Int(i64),
    Float(f64),
    Bar,
    Open,
    Close,
    Declare,
    Assign,
    Comma,
}

#[derive(Debug)]
enum Item {
    Text(String),
    Action { line: usize, tokens: Vec<Tok> },
}

/// Go's `isSpace` for trimming: space, tab, carriage return, newline.
const SPACE: &[char] = &[' ', '\t', '\r', '\n'];

fn is_space(b: u8) -> bool {
    matches!(b, b' ' | b'\t' | b'\r' | b'\n')
}

/// Parses one template file named `file` (`chart/templates/x.yaml`).
pub(crate) fn parse(file: &str, text: &str) -> Result<Template, RenderError> {
    let items = lex(file, text)?;
    let mut parser = Parser {
        file,
        items,
        pos: 0,
        defines: Vec::new(),
    };
    let (body, end) = parser.list(true)?;
    match end {
        Stop::Eof => Ok(Template {
            body,
            defines: parser.defines,
        }),
        Stop::End(line) => Err(parser.parse_error(line, "unexpected {{end}}")),
        Stop::Else(line, _) => Err(parser.parse_error(line, "unexpected {{else}}")),
    }
}

fn unsupported(file: &str, line: usize, construct: impl Into<String>) -> RenderError {
    RenderError::Unsupported {
        file: file.to_owned(),
        line,
        construct: construct.into(),
    }
}

fn parse_error(file: &str, line: usize, message: impl Into<String>) -> RenderError {
    RenderError::Parse {
        file: file.to_owned(),
        line,
        message: message.into(),
    }
}

fn lex(file: &str, src: &str) -> Result<Vec<Item>, RenderError> {
    let bytes = src.as_bytes();
    let mut items = Vec::new();
    let mut pos = 0;
    let mut line = 1;
    let mut trim_next = false;
    loop {
        let start = src[pos..].find("{{").map(|i| pos + i);
        let mut text = &src[pos..start.unwrap_or(src.len())];
        if trim_next {
            text = text.trim_start_matches(SPACE);
        }
        let Some(start) = start else {
            if !text.is_empty() {
                items.push(Item::Text(text.to_owned()));
            }
            return Ok(items);
        };
        let mut i = start + 2;
        let left_trim =
            bytes.get(i) == Some(&b'-') && bytes.get(i + 1).is_some_and(|b| is_space(*b));
        if left_trim {
            text = text.trim_end_matches(SPACE);
            i += 2;
        }
        if !text.is_empty() {
            items.push(Item::Text(text.to_owned()));
        }
        line += src[pos..start].matches('\n').count();
        let action_line = line;
        if src[i..].starts_with("/*") {
            let close = src[i + 2..]
                .find("*/")
                .map(|j| i + 2 + j)
                .ok_or_else(|| parse_error(file, action_line, "unclosed comment"))?;
            let after = close + 2;
            let (end, trim) = if src[after..].starts_with("}}") {
                (after + 2, false)
            } else if src[after..].starts_with(" -}}") {
                (after + 4, true)
            } else {
                return Err(parse_error(
                    file,
                    action_line,
                    "comment ends before closing delimiter",
                ));
            };
            line += src[start..end].matches('\n').count();
            trim_next = trim;
            pos = end;
            continue;
        }
        let mut tokens = Vec::new();
        loop {
            let Some(&c) = bytes.get(i) else {
                return Err(parse_error(file, action_line, "unclosed action"));
            };
            if src[i..].starts_with("}}") {
                trim_next = false;
                i += 2;
                break;
            }
            if is_space(c) {
                if src[i + 1..].starts_with("-}}") {
                    trim_next = true;
                    i += 4;
                    break;
                }
                i += 1;
                continue;
            }
            let (token, next) = lex_token(file, action_line, src, i)?;
            tokens.push(token);
            i = next;
        }
        line += src[start..i].matches('\n').count();
        items.push(Item::Action {
            line: action_line,
            tokens,
        });
        pos = i;
    }
}

fn ident_len(src: &str, from: usize) -> usize {
    src[from..]
        .char_indices()
        .find(|(_, c)| !(c.is_alphanumeric() || *c == '_'))
        .map_or(src.len() - from, |(i, _)| i)
}

/// `.a.b` from `from` (at a `.`): the field names and the end.
fn field_chain(src: &str, mut i: usize) -> (Vec<String>, usize) {
    let mut fields = Vec::new();
    while src[i..].starts_with('.') {
        let len = ident_len(src, i + 1);
        let starts_with_letter = src[i + 1..]
            .chars()
            .next()
            .is_some_and(|c| c.is_alphabetic() || c == '_');
        if len == 0 || !starts_with_letter {
            break;
        }
        fields.push(src[i + 1..i + 1 + len].to_owned());
        i += 1 + len;
    }
    (fields, i)
}

fn lex_token(file: &str, line: usize, src: &str, i: usize) -> Result<(Tok, usize), RenderError> {
    let bytes = src.as_bytes();
    let c = bytes[i];
    let next = bytes.get(i + 1).copied();
    Ok(match c {
        b'|' => (Tok::Bar, i + 1),
        b'(' => (Tok::Open, i + 1),
        b')' => {
            if next == Some(b'.') && bytes.get(i + 2).is_some_and(u8::is_ascii_alphabetic) {
                return Err(unsupported(
                    file,
                    line,
                    "a field of a parenthesized pipeline",
                ));
            }
            (Tok::Close, i + 1)
        }
        b',' => (Tok::Comma, i + 1),
        b':' if next == Some(b'=') => (Tok::Declare, i + 2),
        b'=' => (Tok::Assign, i + 1),
        b'"' => {
            let mut out = String::new();
            let mut chars = src[i + 1..].char_indices();
            loop {
                let Some((j, ch)) = chars.next() else {
                    return Err(parse_error(file, line, "unterminated quoted string"));
                };
                match ch {
                    '"' => break (Tok::Str(out), i + 1 + j + 1),
                    '\n' => return Err(parse_error(file, line, "unterminated quoted string")),
                    '\\' => {
                        let Some((_, escaped)) = chars.next() else {
                            return Err(parse_error(file, line, "unterminated quoted string"));
                        };
                        out.push(match escaped {
                            'n' => '\n',
                            't' => '\t',
                            'r' => '\r',
                            '\\' => '\\',
                            '"' => '"',
                            '\'' => '\'',
                            'a' => '\u{7}',
                            'b' => '\u{8}',
                            'f' => '\u{c}',
                            'v' => '\u{b}',
                            other => {
                                return Err(unsupported(
                                    file,
                                    line,
                                    format!("the string escape \\{other}"),
                                ));
                            }
                        });
                    }
                    ch => out.push(ch),
                }
            }
        }
        b'`' => {
            let close = src[i + 1..]
                .find('`')
                .ok_or_else(|| parse_error(file, line, "unterminated raw quoted string"))?;
            (
                Tok::Str(src[i + 1..i + 1 + close].to_owned()),
                i + 1 + close + 1,
            )
        }
        b'\'' => return Err(unsupported(file, line, "a character constant")),
        b'$' => {
            let len = ident_len(src, i + 1);
            let name = src[i..i + 1 + len].to_owned();
            let (fields, end) = field_chain(src, i + 1 + len);
            (Tok::Var(name, fields), end)
        }
        b'.' if next.is_some_and(|b| b.is_ascii_alphabetic() || b == b'_' || b >= 0x80) => {
            match field_chain(src, i) {
                // A `.` before a character that starts no field name is dot.
                (fields, _) if fields.is_empty() => (Tok::Dot, i + 1),
                (fields, end) => (Tok::Field(fields), end),
            }
        }
        b'.' if next.is_some_and(|b| b.is_ascii_digit()) => number(file, line, src, i)?,
        b'.' => (Tok::Dot, i + 1),
        b'0'..=b'9' => number(file, line, src, i)?,
        b'-' | b'+' if next.is_some_and(|b| b.is_ascii_digit() || b == b'.') => {
            number(file, line, src, i)?
        }
        c if c.is_ascii_alphabetic() || c == b'_' || c >= 0x80 => {
            let len = ident_len(src, i);
            if len == 0 {
                return Err(parse_error(file, line, "unexpected character in action"));
            }
            (Tok::Ident(src[i..i + len].to_owned()), i + len)
        }
        other => {
            return Err(parse_error(
                file,
                line,
                format!("unexpected {:?} in action", other as char),
            ));
        }
    })
}

fn number(file: &str, line: usize, src: &str, i: usize) -> Result<(Tok, usize), RenderError> {
    let bytes = src.as_bytes();
    let mut j = i;
    if matches!(bytes[j], b'-' | b'+') {
        j += 1;
    }
    let body_start = j;
    if src[j..].starts_with("0x")
        || src[j..].starts_with("0X")
        || src[j..].starts_with("0o")
        || src[j..].starts_with("0b")
    {
        return Err(unsupported(
            file,
            line,
            "a hexadecimal, octal or binary number",
        ));
    }
    while bytes.get(j).is_some_and(u8::is_ascii_digit) {
        j += 1;
    }
    let mut float = false;
    if bytes.get(j) == Some(&b'.') {
        float = true;
        j += 1;
        while bytes.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
    }
    if matches!(bytes.get(j), Some(b'e' | b'E')) {
        float = true;
        j += 1;
        if matches!(bytes.get(j), Some(b'-' | b'+')) {
            j += 1;
        }
        while bytes.get(j).is_some_and(u8::is_ascii_digit) {
            j += 1;
        }
    }
    let text = &src[i..j];
    if bytes
        .get(j)
        .is_some_and(|b| b.is_ascii_alphanumeric() || *b == b'_' || *b == b'.')
    {
        return Err(parse_error(
            file,
            line,
            format!("bad number syntax: {:?}", &src[i..=j]),
        ));
    }
    if !float && bytes[body_start] == b'0' && j - body_start > 1 {
        return Err(unsupported(file, line, "an octal number"));
    }
    let token = if float {
        text.parse()
            .map(Tok::Float)
            .map_err(|_| parse_error(file, line, format!("bad number syntax: {text:?}")))?
    } else {
        text.parse()
            .map(Tok::Int)
            .map_err(|_| parse_error(file, line, format!("bad number syntax: {text:?}")))?
    };
    Ok((token, j))
}

enum Stop {
    Eof,
    End(usize),
    Else(usize, Vec<Tok>),
}

struct Parser<'a> {
    file: &'a str,
    items: Vec<Item>,
    pos: usize,
    defines: Vec<(String, Vec<Node>)>,
}

/// What a pipeline may declare.
#[derive(Clone, Copy, PartialEq)]
enum Decl {
    None,
    One,
    Range,
}

impl Parser<'_> {
    fn parse_error(&self, line: usize, message: impl Into<String>) -> RenderError {
        parse_error(self.file, line, message)
    }

    fn unsupported(&self, line: usize, construct: impl Into<String>) -> RenderError {
        unsupported(self.file, line, construct)
    }

    /// Nodes up to the end of the file (`top`), an `end` or an `else`.
    fn list(&mut self, top: bool) -> Result<(Vec<Node>, Stop), RenderError> {
        let mut nodes = Vec::new();
        while self.pos < self.items.len() {
            let item = std::mem::replace(&mut self.items[self.pos], Item::Text(String::new()));
            self.pos += 1;
            let (line, tokens) = match item {
                Item::Text(text) => {
                    nodes.push(Node::Text(text));
                    continue;
                }
                Item::Action { line, tokens } => (line, tokens),
            };
            let keyword = match tokens.first() {
                Some(Tok::Ident(word)) => word.as_str(),
                None => return Err(self.parse_error(line, "missing value for command")),
                _ => "",
            };
            let rest = tokens.get(1..).unwrap_or_default().to_vec();
            match keyword {
                "if" => nodes.push(self.parse_if(line, &rest)?),
                "with" | "range" => {
                    let decl = if keyword == "range" {
                        Decl::Range
                    } else {
                        Decl::One
                    };
                    let pipe = self.pipe(line, &rest, decl)?;
                    let (body, otherwise) = self.body_and_else(line, keyword)?;
                    nodes.push(if keyword == "range" {
                        Node::Range {
                            pipe,
                            body,
                            otherwise,
                        }
                    } else {
                        Node::With {
                            pipe,
                            body,
                            otherwise,
                        }
                    });
                }
                "else" => return Ok((nodes, Stop::Else(line, rest))),
                "end" => {
                    if !rest.is_empty() {
                        return Err(self.parse_error(line, "unexpected words after end"));
                    }
                    return Ok((nodes, Stop::End(line)));
                }
                "define" => {
                    if !top {
                        return Err(
                            self.parse_error(line, "unexpected {{define}}: not at the top level")
                        );
                    }
                    let [Tok::Str(name)] = rest.as_slice() else {
                        return Err(self.parse_error(line, "define takes one name, a string"));
                    };
                    let (body, end) = self.list(false)?;
                    match end {
                        Stop::End(_) => self.defines.push((name.clone(), body)),
                        Stop::Else(l, _) => {
                            return Err(self.parse_error(l, "unexpected {{else}} in define"));
                        }
                        Stop::Eof => return Err(self.parse_error(line, "unexpected EOF in define")),
                    }
                }
                "template" => {
                    let Some(Tok::Str(name)) = rest.first() else {
                        return Err(self.parse_error(line, "template takes a name, a string"));
                    };
                    let pipe = match rest.get(1..) {
                        Some(more) if !more.is_empty() => {
                            Some(self.pipe(line, more, Decl::None)?)
                        }
                        _ => None,
                    };
                    nodes.push(Node::Call {
                        line,
                        name: name.clone(),
                        pipe,
                    });
                }
                "block" | "break" | "continue" => {
                    return Err(self.unsupported(line, format!("the {keyword} action")));
                }
                _ => nodes.push(Node::Output(self.pipe(line, &tokens, Decl::One)?)),
            }
        }
        Ok((nodes, Stop::Eof))
    }

    fn parse_if(&mut self, line: usize, tokens: &[Tok]) -> Result<Node, RenderError> {
        let mut branches = Vec::new();
        let mut condition = self.pipe(line, tokens, Decl::One)?;
        loop {
            let (body, end) = self.list(false)?;
            branches.push((condition, body));
            match end {
                Stop::End(_) => {
                    return Ok(Node::If {
                        branches,
                        otherwise: Vec::new(),
                    });
                }
                Stop::Eof => return Err(self.parse_error(line, "unexpected EOF: if without end")),
                Stop::Else(else_line, rest) => match rest.first() {
                    None => {
                        let otherwise = self.until_end(line, "if")?;
                        return Ok(Node::If {
                            branches,
                            otherwise,
                        });
                    }
                    Some(Tok::Ident(word)) if word == "if" => {
                        condition = self.pipe(else_line, &rest[1..], Decl::One)?;
                    }
                    Some(Tok::Ident(word)) if word == "with" => {
                        return Err(self.unsupported(else_line, "else with"));
                    }
                    Some(_) => {
                        return Err(self.parse_error(else_line, "unexpected words after else"));
                    }
                },
            }
        }
    }

    fn body_and_else(
        &mut self,
        line: usize,
        keyword: &str,
    ) -> Result<(Vec<Node>, Vec<Node>), RenderError> {
        let (body, end) = self.list(false)?;
        match end {
            Stop::End(_) => Ok((body, Vec::new())),
            Stop::Eof => {
                Err(self.parse_error(line, format!("unexpected EOF: {keyword} without end")))
            }
            Stop::Else(else_line, rest) => {
                if !rest.is_empty() {
                    return Err(
                        self.unsupported(else_line, format!("else with words in {keyword}"))
                    );
                }
                Ok((body, self.until_end(line, keyword)?))
            }
        }
    }

    fn until_end(&mut self, line: usize, keyword: &str) -> Result<Vec<Node>, RenderError> {
        let (nodes, end) = self.list(false)?;
        match end {
            Stop::End(_) => Ok(nodes),
            Stop::Else(l, _) => {
                Err(self.parse_error(l, format!("expected end; found else in {keyword}")))
            }
            Stop::Eof => {
                Err(self.parse_error(line, format!("unexpected EOF: {keyword} without end")))
            }
        }
    }

    fn pipe(&self, line: usize, tokens: &[Tok], decl: Decl) -> Result<Pipe, RenderError> {
        let mut names = Vec::new();
        let mut assign = false;
        let mut rest = tokens;
        match tokens {
            [
                Tok::Var(a, fa),
                Tok::Comma,
                Tok::Var(b, fb),
                Tok::Declare,
                more @ ..,
            ] if decl == Decl::Range && fa.is_empty() && fb.is_empty() => {
                names = vec![a.clone(), b.clone()];
                rest = more;
            }
            [
                Tok::Var(name, fields),
                op @ (Tok::Declare | Tok::Assign),
                more @ ..,
            ] if decl != Decl::None && fields.is_empty() => {
                names.push(name.clone());
                assign = *op == Tok::Assign;
                rest = more;
            }
            _ => {}
        }
        if names.iter().any(|n| n == "$") {
            return Err(self.parse_error(line, "cannot declare or assign $"));
        }
        let mut cmds = Vec::new();
        let mut i = 0;
        loop {
            let (cmd, next) = self.command(line, rest, i)?;
            cmds.push(cmd);
            i = next;
            match rest.get(i) {
                None => break,
                Some(Tok::Bar) => i += 1,
                Some(other) => {
                    return Err(self.parse_error(line, format!("unexpected {other:?} in pipeline")));
                }
            }
        }
        Ok(Pipe {
            line,
            decl: names,
            assign,
            cmds,
        })
    }

    /// One command from `tokens[i..]`, up to `|`, `)` or the end.
    fn command(
        &self,
        line: usize,
        tokens: &[Tok],
        mut i: usize,
    ) -> Result<(Vec<Arg>, usize), RenderError> {
        let mut args = Vec::new();
        while let Some(token) = tokens.get(i) {
            let arg = match token {
                Tok::Bar | Tok::Close => break,
                Tok::Open => {
                    let close = matching_close(tokens, i)
                        .ok_or_else(|| self.parse_error(line, "unclosed left paren"))?;
                    let inner = self.pipe(line, &tokens[i + 1..close], Decl::None)?;
                    i = close;
                    Arg::Pipe(Box::new(inner))
                }
                Tok::Dot => Arg::Dot,
                Tok::Field(fields) => Arg::Field(fields.clone()),
                Tok::Var(name, fields) => Arg::Var(name.clone(), fields.clone()),
                Tok::Str(s) => Arg::Str(s.clone()),
                Tok::Int(n) => Arg::Int(*n),
                Tok::Float(f) => Arg::Float(*f),
                Tok::Ident(word) => match word.as_str() {
                    "true" => Arg::Bool(true),
                    "false" => Arg::Bool(false),
                    "nil" => Arg::Nil,
                    name if FUNCTIONS.contains(&name) => Arg::Func(name.to_owned()),
                    "if" | "else" | "end" | "with" | "range" | "define" | "template" | "block" => {
                        return Err(self.parse_error(line, format!("unexpected {word} in command")));
                    }
                    name => return Err(self.unsupported(line, format!("function {name:?}"))),
                },
                Tok::Declare | Tok::Assign | Tok::Comma => {
                    return Err(self.parse_error(line, format!("unexpected {token:?} in command")));
                }
            };
            args.push(arg);
            i += 1;
        }
        match args.first() {
            None => Err(self.parse_error(line, "missing value for command")),
            Some(Arg::Func(_)) | Some(Arg::Pipe(_)) if args.len() == 1 => Ok((args, i)),
            Some(Arg::Func(_)) => Ok((args, i)),
            Some(Arg::Field(fields)) | Some(Arg::Var(_, fields))
                if args.len() > 1 && !fields.is_empty() =>
            {
                Err(self.unsupported(
                    line,
                    format!("a method call with arguments (.{})", fields.join(".")),
                ))
            }
            Some(_) if args.len() > 1 => {
                Err(self.parse_error(line, "can't give argument to non-function"))
            }
            Some(_) => Ok((args, i)),
        }
    }
}

fn matching_close(tokens: &[Tok], open: usize) -> Option<usize> {
    let mut depth = 0usize;
    for (i, token) in tokens.iter().enumerate().skip(open) {
        match token {
            Tok::Open => depth += 1,
            Tok::Close => {
                depth -= 1;
                if depth == 0 {
                    return Some(i);
                }
            }
            _ => {}
        }
    }
    None
}

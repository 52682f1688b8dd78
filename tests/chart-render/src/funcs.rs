//! The functions the renderer implements, each as Go's `text/template` or Sprig/Helm defines
//! it: Go's `and`, `or`, `not`, `eq`, `ne`, `printf`; Sprig's `default`, `quote`, `trunc`,
//! `trimSuffix`, `replace`, `contains`, `join`, `indent`, `nindent`; Helm's `toYaml`,
//! `include`, `required`. Any other name is refused when the template is parsed.

use crate::exec::{Exec, Failure};
use crate::parse::Arg;
use crate::value::{Val, go_quote};
use crate::yaml::to_yaml;

/// Every function a template may call.
pub(crate) const FUNCTIONS: &[&str] = &[
    "and",
    "contains",
    "default",
    "eq",
    "include",
    "indent",
    "join",
    "ne",
    "nindent",
    "not",
    "or",
    "printf",
    "quote",
    "replace",
    "required",
    "toYaml",
    "trimSuffix",
    "trunc",
];

fn value(exec: &mut Exec<'_>, dot: &Val, arg: &Arg) -> Result<Val, Failure> {
    match arg {
        Arg::Nil => Ok(Val::Nil),
        other => exec.arg(dot, other),
    }
}

fn arity(name: &str, args: &[Val], want: usize) -> Result<(), Failure> {
    if args.len() == want {
        Ok(())
    } else {
        Err(Failure::Exec(format!(
            "wrong number of args for {name}: want {want} got {}",
            args.len()
        )))
    }
}

fn string<'v>(name: &str, value: &'v Val) -> Result<&'v str, Failure> {
    match value {
        Val::Str(s) => Ok(s),
        Val::Nil => Err(Failure::Exec(format!(
            "error calling {name}: invalid value; expected string"
        ))),
        other => Err(Failure::Exec(format!(
            "error calling {name}: wrong type for value; expected string; got {}",
            other.type_name()
        ))),
    }
}

fn int(name: &str, value: &Val) -> Result<i64, Failure> {
    match value {
        Val::Int(i) => Ok(*i),
        other => Err(Failure::Exec(format!(
            "error calling {name}: wrong type for value; expected int; got {}",
            other.type_name()
        ))),
    }
}

/// Sprig's `strval`: what `fmt.Sprint` prints, for scalars.
fn strval(name: &str, value: &Val) -> Result<String, Failure> {
    value.scalar_text().ok_or_else(|| {
        Failure::Unsupported(format!(
            "{name} of a {} (Go prints it in its own syntax)",
            value.type_name()
        ))
    })
}

/// Calls `name` with the words `args` and, last, the value piped in.
pub(crate) fn call(
    exec: &mut Exec<'_>,
    dot: &Val,
    name: &str,
    args: &[Arg],
    piped: Option<Val>,
) -> Result<Val, Failure> {
    // `and` and `or` evaluate their arguments only as far as needed (Go 1.18).
    if name == "and" || name == "or" {
        let count = args.len() + usize::from(piped.is_some());
        if count == 0 {
            return Err(Failure::Exec(format!(
                "wrong number of args for {name}: want at least 1 got 0"
            )));
        }
        let mut last = Val::Nil;
        for arg in args {
            last = value(exec, dot, arg)?;
            if last.truth() != (name == "and") {
                return Ok(last);
            }
        }
        if let Some(piped) = piped {
            last = piped;
        }
        return Ok(last);
    }
    let mut values = Vec::with_capacity(args.len() + 1);
    for arg in args {
        values.push(value(exec, dot, arg)?);
    }
    values.extend(piped);
    let v = values.as_slice();
    Ok(match name {
        "not" => {
            arity(name, v, 1)?;
            Val::Bool(!v[0].truth())
        }
        "eq" => {
            if v.len() < 2 {
                return Err(Failure::Exec("missing argument for comparison".to_owned()));
            }
            let mut truth = false;
            for other in &v[1..] {
                truth |= equal(&v[0], other)?;
            }
            Val::Bool(truth)
        }
        "ne" => {
            arity(name, v, 2)?;
            Val::Bool(!equal(&v[0], &v[1])?)
        }
        "default" => match v {
            [] => {
                return Err(Failure::Exec(
                    "wrong number of args for default: want at least 1 got 0".to_owned(),
                ));
            }
            [fallback] => fallback.clone(),
            [fallback, given, ..] => {
                if given.truth() {
                    given.clone()
                } else {
                    fallback.clone()
                }
            }
        },
        "quote" => {
            let mut quoted = Vec::new();
            for item in v.iter().filter(|i| **i != Val::Nil) {
                quoted.push(go_quote(&strval(name, item)?));
            }
            Val::Str(quoted.join(" "))
        }
        "toYaml" => {
            arity(name, v, 1)?;
            Val::Str(to_yaml(&v[0]).map_err(Failure::Unsupported)?)
        }
        "indent" | "nindent" => {
            arity(name, v, 2)?;
            let pad = " ".repeat(usize::try_from(int(name, &v[0])?).unwrap_or(0));
            let text = format!(
                "{pad}{}",
                string(name, &v[1])?.replace('\n', &format!("\n{pad}"))
            );
            Val::Str(if name == "nindent" {
                format!("\n{text}")
            } else {
                text
            })
        }
        "trunc" => {
            arity(name, v, 2)?;
            let count = int(name, &v[0])?;
            let text = string(name, &v[1])?;
            let len = i64::try_from(text.len()).unwrap_or(i64::MAX);
            let cut = if count < 0 && len + count > 0 {
                Some(usize::try_from(len + count).unwrap_or(0)..text.len())
            } else if count >= 0 && len > count {
                Some(0..usize::try_from(count).unwrap_or(0))
            } else {
                None
            };
            match cut {
                Some(range) => Val::Str(
                    text.get(range)
                        .ok_or_else(|| {
                            Failure::Unsupported("trunc inside a multi-byte character".to_owned())
                        })?
                        .to_owned(),
                ),
                None => Val::Str(text.to_owned()),
            }
        }
        "trimSuffix" => {
            arity(name, v, 2)?;
            let suffix = string(name, &v[0])?;
            let text = string(name, &v[1])?;
            Val::Str(text.strip_suffix(suffix).unwrap_or(text).to_owned())
        }
        "replace" => {
            arity(name, v, 3)?;
            let (old, new, text) = (
                string(name, &v[0])?,
                string(name, &v[1])?,
                string(name, &v[2])?,
            );
            if old.is_empty() {
                return Err(Failure::Unsupported(
                    "replace of an empty string".to_owned(),
                ));
            }
            Val::Str(text.replace(old, new))
        }
        "contains" => {
            arity(name, v, 2)?;
            Val::Bool(string(name, &v[1])?.contains(string(name, &v[0])?))
        }
        "join" => {
            arity(name, v, 2)?;
            let separator = string(name, &v[0])?;
            let parts = match &v[1] {
                Val::List(items) => items
                    .iter()
                    .filter(|i| **i != Val::Nil)
                    .map(|i| strval(name, i))
                    .collect::<Result<Vec<_>, _>>()?,
                Val::Nil => Vec::new(),
                other => vec![strval(name, other)?],
            };
            Val::Str(parts.join(separator))
        }
        "printf" => {
            let Some((format, rest)) = v.split_first() else {
                return Err(Failure::Exec(
                    "wrong number of args for printf: want at least 1 got 0".to_owned(),
                ));
            };
            Val::Str(printf(string(name, format)?, rest)?)
        }
        "required" => {
            arity(name, v, 2)?;
            let message = string(name, &v[0])?;
            match &v[1] {
                Val::Nil => return Err(Failure::Exec(message.to_owned())),
                Val::Str(s) if s.is_empty() => return Err(Failure::Exec(message.to_owned())),
                given => given.clone(),
            }
        }
        "include" => {
            arity(name, v, 2)?;
            let template = string(name, &v[0])?;
            Val::Str(exec.engine.call(template, &v[1], exec.depth)?)
        }
        other => return Err(Failure::Unsupported(format!("function {other:?}"))),
    })
}

/// Go's `eq` of two values: basic kinds compare by value; an `int` (a template's number) and a
/// `float64` (a value's number) cannot be compared, as in Go; nil equals only nil.
fn equal(a: &Val, b: &Val) -> Result<bool, Failure> {
    Ok(match (a, b) {
        (Val::Nil, Val::Nil) => true,
        (Val::Nil, _) | (_, Val::Nil) => false,
        (Val::Bool(x), Val::Bool(y)) => x == y,
        (Val::Int(x), Val::Int(y)) => x == y,
        (Val::Float(x), Val::Float(y)) => x == y,
        (Val::Str(x), Val::Str(y)) => x == y,
        (Val::List(_) | Val::Map(_) | Val::Struct(..), _)
        | (_, Val::List(_) | Val::Map(_) | Val::Struct(..)) => {
            return Err(Failure::Exec(format!(
                "error calling eq: non-comparable types {} and {}",
                a.type_name(),
                b.type_name()
            )));
        }
        _ => {
            return Err(Failure::Exec(format!(
                "error calling eq: incompatible types for comparison ({} and {})",
                a.type_name(),
                b.type_name()
            )));
        }
    })
}

/// `fmt.Sprintf` for the verbs `%s` (strings), `%v` (scalars), `%d` (ints), `%q` (strings)
/// and `%%`; what Go prints as an error (`%!d(float64=2)`, `%!s(MISSING)`), flags and widths
/// are refused.
fn printf(format: &str, args: &[Val]) -> Result<String, Failure> {
    let mut out = String::new();
    let mut next = args.iter();
    let mut chars = format.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        let verb = chars
            .next()
            .ok_or_else(|| Failure::Unsupported("printf with a trailing %".to_owned()))?;
        if verb == '%' {
            out.push('%');
            continue;
        }
        let arg = next.next().ok_or_else(|| {
            Failure::Unsupported(format!(
                "printf %{verb} without an argument (Go prints %!{verb}(MISSING))"
            ))
        })?;
        match (verb, arg) {
            ('s', Val::Str(s)) => out.push_str(s),
            ('q', Val::Str(s)) => out.push_str(&go_quote(s)),
            ('d', Val::Int(i)) => out.push_str(&i.to_string()),
            ('v', Val::Nil) => out.push_str("<nil>"),
            ('v', other) => out.push_str(&strval("printf %v", other)?),
            (verb, other) => {
                return Err(Failure::Unsupported(format!(
                    "printf %{verb} of a {} (Go prints %!{verb}(...) or its own syntax)",
                    other.type_name()
                )));
            }
        }
    }
    if next.next().is_some() {
        return Err(Failure::Unsupported(
            "printf with more arguments than verbs (Go prints %!(EXTRA ...))".to_owned(),
        ));
    }
    Ok(out)
}

//! The values a template works on, with Go's types as Helm has them: numbers from values files
//! are `float64` (Helm reads them through JSON), numbers written in a template are `int`;
//! Go's printing of each, and Go's truth.

use std::collections::BTreeMap;

use serde_json::Value;

/// A value inside a template.
#[derive(Debug, Clone, PartialEq)]
pub enum Val {
    /// Go's `nil` (a missing key of `.Values` too).
    Nil,
    /// `bool`.
    Bool(bool),
    /// `int` (a number literal of the template, an index of `range`).
    Int(i64),
    /// `float64` (every number of the values).
    Float(f64),
    /// `string`.
    Str(String),
    /// `[]interface{}`.
    List(Vec<Val>),
    /// `map[string]interface{}` (`.Values` and its maps): a missing key is `nil`.
    Map(BTreeMap<String, Val>),
    /// A Go struct (`.Release`, `.Chart`, the root): a missing field is an error.
    Struct(&'static str, BTreeMap<String, Val>),
}

impl Val {
    /// A value of the chart's values: numbers become `float64`, as Helm has them.
    pub fn from_json(value: &Value) -> Self {
        match value {
            Value::Null => Self::Nil,
            Value::Bool(b) => Self::Bool(*b),
            Value::Number(n) => Self::Float(n.as_f64().unwrap_or(f64::NAN)),
            Value::String(s) => Self::Str(s.clone()),
            Value::Array(items) => Self::List(items.iter().map(Self::from_json).collect()),
            Value::Object(map) => Self::Map(
                map.iter()
                    .map(|(k, v)| (k.clone(), Self::from_json(v)))
                    .collect(),
            ),
        }
    }

    /// Go's name of the value's type, as its error messages print it.
    pub fn type_name(&self) -> &'static str {
        match self {
            Self::Nil => "<nil>",
            Self::Bool(_) => "bool",
            Self::Int(_) => "int",
            Self::Float(_) => "float64",
            Self::Str(_) => "string",
            Self::List(_) => "[]interface {}",
            Self::Map(_) => "map[string]interface {}",
            Self::Struct(name, _) => name,
        }
    }

    /// Go's truth (`if`, `with`, `and`, `or`, `not`): false, 0, "", nil and empty lists and
    /// maps are false; structs are true. Sprig's `empty` is its negation.
    pub fn truth(&self) -> bool {
        match self {
            Self::Nil => false,
            Self::Bool(b) => *b,
            Self::Int(i) => *i != 0,
            Self::Float(f) => *f != 0.0,
            Self::Str(s) => !s.is_empty(),
            Self::List(items) => !items.is_empty(),
            Self::Map(map) => !map.is_empty(),
            Self::Struct(..) => true,
        }
    }

    /// What `fmt.Sprint` prints of a scalar (`{{ x }}`, `quote`, `printf "%v"`); `None` for
    /// lists, maps and structs, which Go prints in its own syntax (`[a b]`, `map[a:b]`) that
    /// the renderer does not reproduce. `nil` prints as Helm leaves it: empty.
    pub fn scalar_text(&self) -> Option<String> {
        match self {
            Self::Nil => Some(String::new()),
            Self::Bool(b) => Some(b.to_string()),
            Self::Int(i) => Some(i.to_string()),
            Self::Float(f) => Some(go_float(*f)),
            Self::Str(s) => Some(s.clone()),
            Self::List(_) | Self::Map(_) | Self::Struct(..) => None,
        }
    }
}

/// Go's `%v` of a `float64` (`strconv.FormatFloat(f, 'g', -1, 64)`): the shortest digits,
/// with an exponent when it is below -4 or at least 6 (so 1000000 prints `1e+06`, as Helm
/// prints a large integer from values.yaml).
pub fn go_float(f: f64) -> String {
    if f.is_nan() {
        return "NaN".to_owned();
    }
    if f.is_infinite() {
        return if f > 0.0 { "+Inf" } else { "-Inf" }.to_owned();
    }
    if f == 0.0 {
        return if f.is_sign_negative() { "-0" } else { "0" }.to_owned();
    }
    // Rust's `{:e}` is the shortest representation that reads back: `d.ddde±x`.
    let scientific = format!("{:e}", f.abs());
    let (mantissa, exponent) = scientific.split_once('e').unwrap_or((&scientific, "0"));
    let exponent: i32 = exponent.parse().unwrap_or(0);
    let digits: String = mantissa.chars().filter(char::is_ascii_digit).collect();
    let sign = if f < 0.0 { "-" } else { "" };
    if !(-4..6).contains(&exponent) {
        let (first, rest) = digits.split_at(1);
        let fraction = if rest.is_empty() {
            String::new()
        } else {
            format!(".{rest}")
        };
        let exp_sign = if exponent < 0 { '-' } else { '+' };
        return format!("{sign}{first}{fraction}e{exp_sign}{:02}", exponent.abs());
    }
    let point = exponent + 1;
    let body = if point <= 0 {
        format!("0.{}{digits}", "0".repeat(point.unsigned_abs() as usize))
    } else if point as usize >= digits.len() {
        format!("{digits}{}", "0".repeat(point as usize - digits.len()))
    } else {
        let (whole, fraction) = digits.split_at(point as usize);
        format!("{whole}.{fraction}")
    };
    format!("{sign}{body}")
}

/// Go's `strconv.Quote` (`%q`, Sprig's `quote`): double quotes, `\"` and `\\`, the C escapes,
/// and `\x`/`\u` for other control characters.
pub fn go_quote(text: &str) -> String {
    let mut out = String::with_capacity(text.len() + 2);
    out.push('"');
    for c in text.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{7}' => out.push_str("\\a"),
            '\u{8}' => out.push_str("\\b"),
            '\u{c}' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\u{b}' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                out.push_str(&format!("\\x{:02x}", c as u32));
            }
            c if c.is_control() => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floats_print_as_go_prints_them() {
        for (f, text) in [
            (2.0, "2"),
            (65532.0, "65532"),
            (100000.0, "100000"),
            (1000000.0, "1e+06"),
            (1234567.5, "1.2345675e+06"),
            (0.5, "0.5"),
            (0.0001, "0.0001"),
            (0.00001, "1e-05"),
            (-3.25, "-3.25"),
            (0.0, "0"),
            (1e21, "1e+21"),
        ] {
            assert_eq!(go_float(f), text, "{f}");
        }
    }

    #[test]
    fn quoting_is_go_s() {
        assert_eq!(go_quote("a \"b\" \\ c"), r#""a \"b\" \\ c""#);
        assert_eq!(go_quote("tab\tnl\n\u{1}"), r#""tab\tnl\n\x01""#);
        assert_eq!(go_quote("é"), "\"é\"");
    }

    #[test]
    fn truth_is_go_s() {
        assert!(!Val::Nil.truth());
        assert!(!Val::Float(0.0).truth());
        assert!(!Val::Str(String::new()).truth());
        assert!(!Val::List(vec![]).truth());
        assert!(!Val::Map(BTreeMap::new()).truth());
        assert!(Val::Str("false".into()).truth());
        assert!(Val::Struct("x", BTreeMap::new()).truth());
    }
}

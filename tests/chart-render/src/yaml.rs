//! Helm's `toYaml`: `sigs.k8s.io/yaml.Marshal` (the value through JSON, then go-yaml v2's
//! block style: map keys in go-yaml's order, sequences not indented under their key, strings
//! quoted only where YAML 1.1 would read them as something else), without the last newline.
//! What go-yaml would fold or write as a literal block (strings over 80 characters with
//! spaces, multi-line strings) is refused.

use std::cmp::Ordering;

use crate::value::{Val, go_float};

/// `toYaml value`; the error names what is not implemented.
pub(crate) fn to_yaml(value: &Val) -> Result<String, String> {
    let mut out = String::new();
    match value {
        Val::Map(map) if !map.is_empty() => block_map(&mut out, map.iter().collect(), 0)?,
        Val::Struct(_, _) => return Err("toYaml of .Release, .Chart or the root".to_owned()),
        Val::List(items) if !items.is_empty() => block_list(&mut out, items, 0)?,
        scalar => {
            out.push_str(&flow(scalar, 0)?);
            out.push('\n');
        }
    }
    Ok(out.strip_suffix('\n').unwrap_or(&out).to_owned())
}

/// A scalar, or an empty collection in flow style, written from `column`.
fn flow(value: &Val, column: usize) -> Result<String, String> {
    Ok(match value {
        Val::Nil => "null".to_owned(),
        Val::Bool(b) => b.to_string(),
        Val::Int(i) => i.to_string(),
        // JSON writes an integral float64 as an integer, which go-yaml reads back as an int.
        Val::Float(f) if f.fract() == 0.0 && f.abs() < 9.0e18 => format!("{f:.0}"),
        Val::Float(f) => go_float(*f),
        Val::Str(s) => string(s, column)?,
        Val::List(items) if items.is_empty() => "[]".to_owned(),
        Val::Map(map) if map.is_empty() => "{}".to_owned(),
        _ => return Err("toYaml of a nested .Release or .Chart".to_owned()),
    })
}

fn is_block(value: &Val) -> bool {
    matches!(value, Val::Map(m) if !m.is_empty()) || matches!(value, Val::List(l) if !l.is_empty())
}

fn block_map(
    out: &mut String,
    mut entries: Vec<(&String, &Val)>,
    indent: usize,
) -> Result<(), String> {
    entries.sort_by(|a, b| key_order(a.0, b.0));
    let pad = " ".repeat(indent);
    for (key, value) in entries {
        out.push_str(&pad);
        let key = string(key, indent)?;
        out.push_str(&key);
        out.push(':');
        let column = indent + key.chars().count() + 2;
        match value {
            Val::Map(map) if !map.is_empty() => {
                out.push('\n');
                block_map(out, map.iter().collect(), indent + 2)?;
            }
            Val::List(items) if !items.is_empty() => {
                out.push('\n');
                block_list(out, items, indent)?;
            }
            scalar => {
                out.push(' ');
                out.push_str(&flow(scalar, column)?);
                out.push('\n');
            }
        }
    }
    Ok(())
}

fn block_list(out: &mut String, items: &[Val], indent: usize) -> Result<(), String> {
    let pad = " ".repeat(indent);
    for item in items {
        out.push_str(&pad);
        out.push_str("- ");
        if is_block(item) {
            // The item's first line follows the dash; the rest are indented under it.
            let mut nested = String::new();
            match item {
                Val::Map(map) => block_map(&mut nested, map.iter().collect(), indent + 2)?,
                Val::List(list) => block_list(&mut nested, list, indent + 2)?,
                _ => {}
            }
            out.push_str(&nested[indent + 2..]);
        } else {
            out.push_str(&flow(item, indent + 2)?);
            out.push('\n');
        }
    }
    Ok(())
}

/// go-yaml v2's order of map keys (`keyList.Less`): rune by rune; a letter after a non-letter;
/// runs of digits compared as numbers.
fn key_order(a: &str, b: &str) -> Ordering {
    let ar: Vec<char> = a.chars().collect();
    let br: Vec<char> = b.chars().collect();
    let mut i = 0;
    while i < ar.len() && i < br.len() {
        if ar[i] == br[i] {
            i += 1;
            continue;
        }
        let (al, bl) = (ar[i].is_alphabetic(), br[i].is_alphabetic());
        if al && bl {
            return ar[i].cmp(&br[i]);
        }
        if al || bl {
            return if bl {
                Ordering::Less
            } else {
                Ordering::Greater
            };
        }
        let (mut an, mut bn) = (0i64, 0i64);
        if ar[i] == '0' || br[i] == '0' {
            let mut j = i;
            while j > 0 && ar[j - 1].is_ascii_digit() {
                j -= 1;
                if ar[j] != '0' {
                    an = 1;
                    bn = 1;
                    break;
                }
            }
        }
        let mut ai = i;
        while ai < ar.len() && ar[ai].is_ascii_digit() {
            an = an
                .saturating_mul(10)
                .saturating_add(i64::from(ar[ai] as u8 - b'0'));
            ai += 1;
        }
        let mut bi = i;
        while bi < br.len() && br[bi].is_ascii_digit() {
            bn = bn
                .saturating_mul(10)
                .saturating_add(i64::from(br[bi] as u8 - b'0'));
            bi += 1;
        }
        if an != bn {
            return an.cmp(&bn);
        }
        if ai != bi {
            return ai.cmp(&bi);
        }
        return ar[i].cmp(&br[i]);
    }
    ar.len().cmp(&br.len())
}

/// Whether go-yaml v2 reads `s` unquoted as something other than a string (`resolve`): YAML
/// 1.1's booleans and nulls, numbers (with `_`, `0x`, `0o`, `0b`, leading-zero octal), the
/// special floats, the merge key, and base-60 floats such as `1:20`.
fn resolves_to_non_string(s: &str) -> bool {
    const WORDS: &[&str] = &[
        "", "~", "null", "Null", "NULL", "y", "Y", "yes", "Yes", "YES", "n", "N", "no", "No", "NO",
        "true", "True", "TRUE", "false", "False", "FALSE", "on", "On", "ON", "off", "Off", "OFF",
        ".nan", ".NaN", ".NAN", ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF", "-.inf",
        "-.Inf", "-.INF", "<<",
    ];
    if WORDS.contains(&s) {
        return true;
    }
    let plain: String = s.chars().filter(|c| *c != '_').collect();
    let unsigned = plain.strip_prefix(['-', '+']).unwrap_or(&plain);
    let all = |text: &str, f: fn(char) -> bool| !text.is_empty() && text.chars().all(f);
    let integer = all(unsigned, |c| c.is_ascii_digit())
        || unsigned
            .strip_prefix("0x")
            .is_some_and(|h| all(h, |c| c.is_ascii_hexdigit()))
        || unsigned
            .strip_prefix("0o")
            .is_some_and(|o| all(o, |c| ('0'..='7').contains(&c)))
        || unsigned
            .strip_prefix("0b")
            .is_some_and(|b| all(b, |c| c == '0' || c == '1'));
    integer || is_yaml_float(s) || is_base60_float(s)
}

/// `^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`
fn is_yaml_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(i) => (&s[..i], Some(&s[i + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.chars().all(|c| c.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", fraction)) => digits(fraction),
        Some((whole, fraction)) => digits(whole) && (fraction.is_empty() || digits(fraction)),
        None => digits(mantissa),
    };
    let exponent_ok = exponent.is_none_or(|e| digits(e.strip_prefix(['-', '+']).unwrap_or(e)));
    mantissa_ok && exponent_ok
}

/// `^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$`
fn is_base60_float(s: &str) -> bool {
    let s = s.strip_prefix(['-', '+']).unwrap_or(s);
    let (main, fraction) = s.split_once('.').unwrap_or((s, ""));
    if !fraction.chars().all(|c| c.is_ascii_digit() || c == '_') {
        return false;
    }
    let mut parts = main.split(':');
    let first = parts.next().unwrap_or("");
    let first_ok = first.starts_with(|c: char| c.is_ascii_digit())
        && first.chars().all(|c| c.is_ascii_digit() || c == '_');
    let rest: Vec<&str> = parts.collect();
    first_ok
        && !rest.is_empty()
        && rest.iter().all(|p| match p.as_bytes() {
            [d] => d.is_ascii_digit(),
            [a, b] => (b'0'..=b'5').contains(a) && b.is_ascii_digit(),
            _ => false,
        })
}

/// Whether libyaml's emitter may write `s` plain in block context (`yaml_emitter_analyze_scalar`).
fn plain_allowed(s: &str) -> bool {
    let first = s.chars().next().unwrap_or(' ');
    let second = s.chars().nth(1);
    if s.starts_with("---") || s.starts_with("...") {
        return false;
    }
    if "#,[]{}&*!|>'\"%@`".contains(first) {
        return false;
    }
    if matches!(first, '-' | '?' | ':') && second.is_none_or(|c| c == ' ' || c == '\t') {
        return false;
    }
    if s.starts_with([' ', '\t']) || s.ends_with([' ', '\t']) || s.ends_with(':') {
        return false;
    }
    !(s.contains(": ") || s.contains(":\t") || s.contains(" #") || s.contains("\t#"))
}

/// Whether libyaml's emitter (line width 80) would break the line at a space of `s` written
/// from `column`: at a single space followed by a non-space past column 80.
fn would_fold(s: &str, column: usize) -> bool {
    let chars: Vec<char> = s.chars().collect();
    chars.iter().enumerate().any(|(i, c)| {
        *c == ' '
            && column + i > 80
            && (i == 0 || chars[i - 1] != ' ')
            && chars.get(i + 1).is_some_and(|n| *n != ' ')
    })
}

/// A string as go-yaml v2 writes it from `column`: plain, double-quoted when YAML would read
/// it as another type, single-quoted when plain is not allowed.
fn string(s: &str, column: usize) -> Result<String, String> {
    if s.contains(['\n', '\r']) {
        return Err("toYaml of a multi-line string (go-yaml writes a literal block)".to_owned());
    }
    if s.chars()
        .any(|c| c.is_control() && c != '\t' || c == '\u{feff}')
    {
        return Err("toYaml of a string with control characters".to_owned());
    }
    let quoted = resolves_to_non_string(s) || !plain_allowed(s);
    if would_fold(s, column + usize::from(quoted)) {
        return Err("toYaml of a string with a space past column 80 (go-yaml folds it)".to_owned());
    }
    if resolves_to_non_string(s) {
        return Ok(format!(
            "\"{}\"",
            s.replace('\\', "\\\\").replace('"', "\\\"")
        ));
    }
    if plain_allowed(s) {
        return Ok(s.to_owned());
    }
    Ok(format!("'{}'", s.replace('\'', "''")))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn yaml(value: serde_json::Value) -> String {
        to_yaml(&Val::from_json(&value)).unwrap()
    }

    #[test]
    fn maps_are_sorted_and_lists_sit_under_their_key() {
        assert_eq!(
            yaml(
                json!({"requests": {"memory": "64Mi", "cpu": "50m"}, "limits": {"memory": "256Mi"}})
            ),
            "limits:\n  memory: 256Mi\nrequests:\n  cpu: 50m\n  memory: 64Mi"
        );
        assert_eq!(
            yaml(
                json!({"tolerations": [{"key": "k", "operator": "Exists"}, {"effect": "NoSchedule"}], "a": [1, [2, 3]]})
            ),
            "a:\n- 1\n- - 2\n  - 3\ntolerations:\n- key: k\n  operator: Exists\n- effect: NoSchedule"
        );
        assert_eq!(
            yaml(json!([{"a": {"b": [{"c": "d", "e": {}}]}}])),
            "- a:\n    b:\n    - c: d\n      e: {}"
        );
    }

    #[test]
    fn empty_and_scalar_values_are_flow() {
        assert_eq!(yaml(json!({})), "{}");
        assert_eq!(yaml(json!([])), "[]");
        assert_eq!(yaml(json!(null)), "null");
        assert_eq!(
            yaml(json!({"a": null, "b": [], "c": true})),
            "a: null\nb: []\nc: true"
        );
        assert_eq!(yaml(json!("x")), "x");
    }

    #[test]
    fn numbers_go_through_json() {
        assert_eq!(
            yaml(json!({"a": 65532, "b": 1000000, "c": 0.5, "d": 1234567.5})),
            "a: 65532\nb: 1000000\nc: 0.5\nd: 1.2345675e+06"
        );
    }

    #[test]
    fn strings_are_quoted_only_where_yaml_would_misread_them() {
        for (text, written) in [
            ("RuntimeDefault", "RuntimeDefault"),
            ("kubernetes.io/hostname", "kubernetes.io/hostname"),
            ("true", "\"true\""),
            ("yes", "\"yes\""),
            ("Off", "\"Off\""),
            ("", "\"\""),
            ("~", "\"~\""),
            ("123", "\"123\""),
            ("1_000", "\"1_000\""),
            ("0x1F", "\"0x1F\""),
            ("1.5e3", "\"1.5e3\""),
            (".5", "\".5\""),
            ("1:20", "\"1:20\""),
            ("1.2.3", "1.2.3"),
            ("v1", "v1"),
            ("-x", "-x"),
            ("- x", "'- x'"),
            ("a: b", "'a: b'"),
            ("it's #1", "'it''s #1'"),
            ("it's", "it's"),
            ("a #b", "'a #b'"),
            ("*", "'*'"),
            ("{x}", "'{x}'"),
            (" lead", "' lead'"),
            ("ends:", "'ends:'"),
            ("10.0.0.1:53", "10.0.0.1:53"),
            ("O'Brien: x", "'O''Brien: x'"),
        ] {
            assert_eq!(string(text, 0).unwrap(), written, "{text:?}");
        }
    }

    #[test]
    fn keys_follow_go_yaml_s_order() {
        let mut keys = vec!["b", "a10", "a2", "a_", "aZ", "a-b", "ab", "A"];
        keys.sort_by(|a, b| key_order(a, b));
        assert_eq!(keys, ["A", "a-b", "a_", "a2", "a10", "aZ", "ab", "b"]);
    }

    #[test]
    fn what_go_yaml_would_fold_or_write_as_a_block_is_refused() {
        assert!(string("line\nline", 0).is_err());
        assert!(string(&"word ".repeat(20), 0).is_err());
        assert!(string(&"x".repeat(100), 0).is_ok());
        // Past column 80 by its position, not its length.
        assert!(string("a b", 80).is_err());
        assert!(string("a b", 79).is_ok());
        assert!(string("a b", 70).is_ok());
        assert!(
            to_yaml(&Val::from_json(
                &serde_json::json!({"k": format!("{} b", "a".repeat(78))})
            ))
            .is_err()
        );
    }
}

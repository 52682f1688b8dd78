//! The template language, construct by construct, with what Helm 3 prints for each (Go's
//! `text/template`, Sprig, Helm's `include`/`toYaml`/`required`), and every refusal: the
//! renderer names the file, the line and the construct it does not implement.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use chart_render::{RenderError, render_template};
use serde_json::{Value, json};

fn render(text: &str, values: Value) -> String {
    render_template("", text, &values).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn with_helpers(helpers: &str, text: &str, values: Value) -> String {
    render_template(helpers, text, &values).unwrap_or_else(|e| panic!("{text:?}: {e}"))
}

fn error(text: &str, values: Value) -> RenderError {
    match render_template("", text, &values) {
        Ok(out) => panic!("{text:?} rendered {out:?}"),
        Err(e) => e,
    }
}

fn unsupported(text: &str) -> (usize, String) {
    match error(text, json!({})) {
        RenderError::Unsupported {
            file,
            line,
            construct,
        } => {
            assert_eq!(file, "test/templates/test.yaml");
            (line, construct)
        }
        other => panic!("{text:?}: {other}"),
    }
}

#[test]
fn text_and_values_print_as_helm_prints_them() {
    assert_eq!(render("a: {{ .Values.x }}\n", json!({"x": "b"})), "a: b\n");
    assert_eq!(
        render(
            "{{ .Values.n }} {{ .Values.big }} {{ .Values.f }}",
            json!({"n": 2, "big": 1000000, "f": 0.5})
        ),
        "2 1e+06 0.5"
    );
    assert_eq!(
        render(
            "{{ .Values.t }}/{{ 3 }}/{{ -2 }}/{{ 1.5 }}",
            json!({"t": true})
        ),
        "true/3/-2/1.5"
    );
    // A missing key prints nothing (Helm removes Go's "<no value>").
    assert_eq!(render("[{{ .Values.missing }}]", json!({})), "[]");
    assert_eq!(
        render("{{ \"a\\tb\" }}{{ `raw\\n` }}", json!({})),
        "a\tbraw\\n"
    );
}

#[test]
fn release_and_chart_fields() {
    assert_eq!(
        render(
            "{{ .Release.Name }} {{ .Release.Namespace }} {{ .Release.Service }} {{ .Chart.Name }} {{ .Chart.Version }} {{ .Chart.AppVersion }}",
            json!({})
        ),
        "release-name default Helm test 0.1.0 1.16.0"
    );
}

#[test]
fn trim_markers_remove_whitespace_and_newlines_on_their_side() {
    assert_eq!(render("a  \n  {{- \"b\" -}}  \n  c", json!({})), "abc");
    assert_eq!(render("a\n{{- \"b\" }}\nc", json!({})), "ab\nc");
    assert_eq!(render("a\n{{ \"b\" -}}\n\nc", json!({})), "a\nbc");
    // `-3` without a space is a number, not a trim marker.
    assert_eq!(render("a {{-3}} b", json!({})), "a -3 b");
}

#[test]
fn comments_print_nothing_and_may_trim() {
    assert_eq!(
        render("a {{/* a comment\nover lines */}} b", json!({})),
        "a  b"
    );
    assert_eq!(render("a\n{{- /* trimmed */ -}}\nb", json!({})), "ab");
    assert!(matches!(
        error("{{/* x */ }}", json!({})),
        RenderError::Parse { .. }
    ));
}

#[test]
fn if_else_if_else_by_go_s_truth() {
    let t = "{{ if .Values.a }}A{{ else if .Values.b }}B{{ else }}C{{ end }}";
    assert_eq!(render(t, json!({"a": 1, "b": true})), "A");
    assert_eq!(render(t, json!({"a": 0, "b": "x"})), "B");
    assert_eq!(render(t, json!({"a": "", "b": []})), "C");
    assert_eq!(render(t, json!({"a": {}, "b": false})), "C");
    assert_eq!(render(t, json!({"a": null})), "C");
    assert_eq!(render(t, json!({"a": [0]})), "A");
    assert_eq!(render(t, json!({"a": "false"})), "A");
    // Nested, with trimming as charts write it.
    let nested = "x:\n{{- if .Values.a }}\n  {{- if .Values.b }}\n  ab\n  {{- end }}\n{{- end }}\n";
    assert_eq!(render(nested, json!({"a": true, "b": true})), "x:\n  ab\n");
    assert_eq!(render(nested, json!({"a": true, "b": false})), "x:\n");
}

#[test]
fn with_rebinds_dot_and_has_an_else() {
    let t = "{{ with .Values.m }}{{ .k }}{{ else }}none{{ end }}";
    assert_eq!(render(t, json!({"m": {"k": "v"}})), "v");
    assert_eq!(render(t, json!({"m": {}})), "none");
    // `$` stays the root inside.
    assert_eq!(
        render(
            "{{ with .Values.m }}{{ $.Release.Name }}{{ end }}",
            json!({"m": 1})
        ),
        "release-name"
    );
}

#[test]
fn range_over_lists_and_maps_by_sorted_keys() {
    assert_eq!(
        render(
            "{{ range .Values.l }}[{{ . }}]{{ end }}",
            json!({"l": ["a", "b"]})
        ),
        "[a][b]"
    );
    assert_eq!(
        render(
            "{{ range $i, $e := .Values.l }}{{ $i }}={{ $e }};{{ end }}",
            json!({"l": ["a", "b"]})
        ),
        "0=a;1=b;"
    );
    assert_eq!(
        render(
            "{{ range $k, $v := .Values.m }}{{ $k }}={{ $v }};{{ end }}",
            json!({"m": {"b": 2, "a": 1}})
        ),
        "a=1;b=2;"
    );
    assert_eq!(
        render(
            "{{ range .Values.l }}x{{ else }}empty{{ end }}",
            json!({"l": []})
        ),
        "empty"
    );
    assert_eq!(
        render(
            "{{ range .Values.missing }}x{{ else }}empty{{ end }}",
            json!({})
        ),
        "empty"
    );
    assert!(matches!(
        error("{{ range .Values.s }}x{{ end }}", json!({"s": "abc"})),
        RenderError::Execution { .. }
    ));
}

#[test]
fn variables_are_scoped_to_their_action() {
    assert_eq!(
        render(
            "{{ $x := \"a\" }}{{ $x }}{{ $x = \"b\" }}{{ $x }}",
            json!({})
        ),
        "ab"
    );
    assert_eq!(
        render("{{ if true }}{{ $y := 1 }}{{ $y }}{{ end }}", json!({})),
        "1"
    );
    assert!(matches!(
        error("{{ if true }}{{ $y := 1 }}{{ end }}{{ $y }}", json!({})),
        RenderError::Execution { .. }
    ));
    assert_eq!(render("{{ $.Values.a }}", json!({"a": "root"})), "root");
}

#[test]
fn define_include_and_template() {
    let helpers = "{{- define \"t.name\" -}}\n{{ .Chart.Name }}-x\n{{- end }}\n{{- define \"t.labels\" -}}\na: {{ .Values.a }}\nb: c\n{{- end }}";
    assert_eq!(
        with_helpers(helpers, "name: {{ include \"t.name\" . }}", json!({})),
        "name: test-x"
    );
    assert_eq!(
        with_helpers(
            helpers,
            "labels:\n  {{- include \"t.labels\" . | nindent 2 }}\n",
            json!({"a": 1})
        ),
        "labels:\n  a: 1\n  b: c\n"
    );
    assert_eq!(
        with_helpers(helpers, "{{ template \"t.name\" . }}", json!({})),
        "test-x"
    );
    match error("{{ include \"nope\" . }}", json!({})) {
        RenderError::Execution { message, .. } => {
            assert!(message.contains("no template \"nope\""), "{message}")
        }
        other => panic!("{other}"),
    }
}

#[test]
fn the_standard_fullname_helper_renders_as_helm_create_s() {
    let helpers = r#"{{- define "t.fullname" -}}
{{- if .Values.fullnameOverride }}
{{- .Values.fullnameOverride | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- $name := default .Chart.Name .Values.nameOverride }}
{{- if contains $name .Release.Name }}
{{- .Release.Name | trunc 63 | trimSuffix "-" }}
{{- else }}
{{- printf "%s-%s" .Release.Name $name | trunc 63 | trimSuffix "-" }}
{{- end }}
{{- end }}
{{- end }}"#;
    let t = "{{ include \"t.fullname\" . }}";
    assert_eq!(with_helpers(helpers, t, json!({})), "release-name-test");
    assert_eq!(
        with_helpers(helpers, t, json!({"nameOverride": "name"})),
        "release-name"
    );
    assert_eq!(
        with_helpers(
            helpers,
            t,
            json!({"fullnameOverride": format!("{}-", "a".repeat(62))})
        ),
        "a".repeat(62)
    );
}

#[test]
fn sprig_and_go_functions() {
    let v = json!({"s": "a\"b", "n": 3, "e": "", "l": ["10.0.0.0/8", "fd00::/8"], "b": false});
    for (t, out) in [
        ("{{ .Values.s | quote }}", r#""a\"b""#),
        ("{{ .Values.n | quote }}", r#""3""#),
        ("{{ .Values.b | quote }}", r#""false""#),
        ("{{ quote .Values.missing }}", ""),
        ("{{ .Values.e | default \"d\" }}", "d"),
        ("{{ .Values.s | default \"d\" }}", "a\"b"),
        ("{{ .Values.b | default true }}", "true"),
        ("{{ \"abcdef\" | trunc 3 }}", "abc"),
        ("{{ \"abcdef\" | trunc -2 }}", "ef"),
        ("{{ \"ab\" | trunc 5 }}", "ab"),
        ("{{ \"a-\" | trimSuffix \"-\" }}", "a"),
        ("{{ \"1.0+2\" | replace \"+\" \"_\" }}", "1.0_2"),
        ("{{ contains \"b\" \"abc\" }}", "true"),
        ("{{ join \",\" .Values.l }}", "10.0.0.0/8,fd00::/8"),
        (
            "{{ printf \"%s-%d-%v-%q-%%\" \"a\" 2 .Values.n \"q\" }}",
            "a-2-3-\"q\"-%",
        ),
        ("{{ printf \"%v\" nil }}", "<nil>"),
        ("{{ \"a\\nb\" | indent 2 }}", "  a\n  b"),
        ("{{ \"a\\nb\" | nindent 2 }}", "\n  a\n  b"),
        ("{{ eq .Values.s \"a\\\"b\" }}", "true"),
        ("{{ eq 1 2 1 }}", "true"),
        ("{{ ne .Values.n 3.0 }}", "false"),
        ("{{ and 1 0 2 }}", "0"),
        ("{{ and 1 2 }}", "2"),
        ("{{ or 0 \"\" \"x\" }}", "x"),
        ("{{ or 0 false }}", "false"),
        ("{{ not .Values.e }}", "true"),
        ("{{ (printf \"%s\" \"x\") | quote }}", "\"x\""),
        ("{{ required \"need n\" .Values.n }}", "3"),
    ] {
        assert_eq!(render(t, v.clone()), out, "{t}");
    }
}

#[test]
fn to_yaml_with_nindent_as_charts_use_it() {
    let t = "resources:\n  {{- toYaml .Values.r | nindent 2 }}\ntolerations:\n{{ toYaml .Values.t | indent 2 }}\n";
    assert_eq!(
        render(
            t,
            json!({"r": {"requests": {"memory": "64Mi", "cpu": "50m"}}, "t": [{"key": "a", "operator": "Exists"}]})
        ),
        "resources:\n  requests:\n    cpu: 50m\n    memory: 64Mi\ntolerations:\n  - key: a\n    operator: Exists\n"
    );
    assert_eq!(
        render(
            "{{ toYaml .Values.m }}",
            json!({"m": {"on": "yes", "num": 65532, "n": "x"}})
        ),
        "\"n\": x\nnum: 65532\n\"on\": \"yes\""
    );
}

#[test]
fn required_fails_with_its_message_on_nil_and_empty_strings() {
    for values in [json!({}), json!({"id": ""}), json!({"id": null})] {
        match error(
            "\nid: {{ required \"clusterId is required\" .Values.id }}",
            values,
        ) {
            RenderError::Execution {
                file,
                line,
                message,
            } => {
                assert_eq!(
                    (file.as_str(), line, message.as_str()),
                    ("test/templates/test.yaml", 2, "clusterId is required")
                );
            }
            other => panic!("{other}"),
        }
    }
    // false and 0 are values.
    assert_eq!(
        render("{{ required \"x\" .Values.b }}", json!({"b": false})),
        "false"
    );
}

#[test]
fn go_s_runtime_errors_are_errors() {
    // A field of nil.
    assert!(matches!(
        error("{{ .Values.a.b }}", json!({})),
        RenderError::Execution { .. }
    ));
    // A field of a string.
    assert!(matches!(
        error("{{ .Values.a.b }}", json!({"a": "x"})),
        RenderError::Execution { .. }
    ));
    // Comparing a values number (float64) with a template number (int), as Go refuses.
    match error("{{ eq .Values.n 1 }}", json!({"n": 1})) {
        RenderError::Execution { message, .. } => assert!(
            message.contains("incompatible types for comparison"),
            "{message}"
        ),
        other => panic!("{other}"),
    }
    // Sprig's string parameters take strings only; int parameters ints only.
    assert!(matches!(
        error("{{ .Values.n | trunc 3 }}", json!({"n": 12345})),
        RenderError::Execution { .. }
    ));
    assert!(matches!(
        error("{{ \"x\" | indent .Values.n }}", json!({"n": 2})),
        RenderError::Execution { .. }
    ));
    assert!(matches!(
        error("{{ not 1 2 }}", json!({})),
        RenderError::Execution { .. }
    ));
}

#[test]
fn go_s_parse_errors_are_errors() {
    for t in [
        "{{ if .Values.a }}x",
        "{{ end }}",
        "{{ else }}",
        "{{ .Values.a",
        "{{ }}",
        "{{ \"a\" .Values.b }}",
        "{{ \"unterminated }}",
        "{{ if true }}{{ define \"x\" }}{{ end }}{{ end }}",
    ] {
        assert!(
            matches!(error(t, json!({})), RenderError::Parse { .. }),
            "{t}"
        );
    }
}

#[test]
fn unknown_functions_are_refused_with_their_name_and_line() {
    for (t, name) in [
        ("a\n{{ lookup \"v1\" \"Secret\" \"ns\" \"n\" }}", "lookup"),
        ("a\n{{ tpl .Values.x . }}", "tpl"),
        ("a\n{{ .Values.x | upper }}", "upper"),
        (
            "a\n{{ semverCompare \">=1.0\" .Chart.Version }}",
            "semverCompare",
        ),
        // Refused even where it would not run.
        ("a\n{{ if false }}{{ toJson . }}{{ end }}", "toJson"),
    ] {
        let (line, construct) = unsupported(t);
        assert_eq!((line, construct), (2, format!("function {name:?}")), "{t}");
    }
    let text = error("{{ tpl .Values.x . }}", json!({})).to_string();
    assert_eq!(
        text,
        "test/templates/test.yaml:1: function \"tpl\" is not implemented by chart-render (it refuses what it cannot render as Helm does)"
    );
}

#[test]
fn unimplemented_syntax_and_fields_are_refused() {
    for (t, construct) in [
        ("{{ block \"x\" . }}{{ end }}", "the block action"),
        (
            "{{ range .Values.l }}{{ break }}{{ end }}",
            "the break action",
        ),
        (
            "{{ if false }}{{ else with .Values }}{{ end }}",
            "else with",
        ),
        ("{{ 'a' }}", "a character constant"),
        ("{{ 0x1F }}", "a hexadecimal, octal or binary number"),
        ("{{ (.Values).x }}", "a field of a parenthesized pipeline"),
        (
            "{{ .Capabilities.KubeVersion }}",
            "the field .Capabilities (of the root context)",
        ),
        (
            "{{ .Files.Get \"x\" }}",
            "a method call with arguments (.Files.Get)",
        ),
        ("{{ .Files }}", "the field .Files (of the root context)"),
        (
            "{{ .Chart.Home }}",
            "the field .Chart.Home (of *chart.Metadata)",
        ),
        (
            "{{ .Release.Revision }}",
            "the field .Release.Revision (of .Release)",
        ),
        (
            "{{ .Values.m }}",
            "printing a map[string]interface {} (Go prints it in its own syntax; use toYaml)",
        ),
        (
            "{{ printf \"%d\" .Values.n }}",
            "printf %d of a float64 (Go prints %!d(...) or its own syntax)",
        ),
        (
            "{{ printf \"%s\" }}",
            "printf %s without an argument (Go prints %!s(MISSING))",
        ),
        (
            "{{ toYaml .Values.long }}",
            "toYaml of a string with a space past column 80 (go-yaml folds it)",
        ),
        (
            "{{ toYaml .Values.multi }}",
            "toYaml of a multi-line string (go-yaml writes a literal block)",
        ),
    ] {
        let values =
            json!({"m": {"a": 1}, "n": 2, "l": [1], "long": "word ".repeat(20), "multi": "a\nb"});
        match render_template("", t, &values) {
            Err(RenderError::Unsupported {
                construct: found,
                line: 1,
                ..
            }) => assert_eq!(found, construct, "{t}"),
            other => panic!("{t}: {other:?}"),
        }
    }
}

#[test]
fn nothing_panics_on_truncated_or_garbled_templates() {
    let t = "{{- define \"x\" -}}{{ if .Values.a }}{{ .Values.b | default \"c\" | quote }}{{ else }}{{ include \"x\" . }}{{ end }}{{- end }}{{ range $i, $e := .Values.l }}{{ $e }}{{ end }}{{/* c */}}";
    for end in 0..=t.len() {
        if let Some(prefix) = t.get(..end) {
            let _ = render_template("", prefix, &json!({"a": true, "l": [1]}));
        }
    }
    // Recursion ends in a refusal, not a stack overflow.
    let recursive = "{{- define \"loop\" }}{{ include \"loop\" . }}{{ end }}";
    match render_template(recursive, "{{ include \"loop\" . }}", &json!({})) {
        Err(RenderError::Unsupported { construct, .. }) => {
            assert_eq!(
                construct,
                "include or template nested more than 32 levels deep (at \"loop\")"
            );
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn odd_input_is_an_error_never_a_panic_or_a_hang() {
    for t in [
        "{{ .é }}",
        "{{ .€ }}",
        "{{ $é }}",
        "{{ $ }}",
        "{{ 1.2.3 }}",
        "{{ \"\\x\" }}",
        "{{ ( }}",
        "{{ ) }}",
        "{{ | }}",
        "{{ quote | }}",
        "{{ .Values.a | }}",
        "{{- -}}",
        "{{-}}",
        "{{ - }}",
        "{{ -. }}",
        "{{ . . }}",
        "{{ $x := }}",
        "{{ := 1 }}",
        "{{ $x, $y := 1 }}",
        "{{ range $a, $b, $c := . }}{{ end }}",
        "{{ define }}",
        "{{ template }}",
        "{{ template 1 }}",
        "{{ end 1 }}",
        "{{ if }}{{ end }}",
        "{{ else if }}",
        "{{",
        "}}",
        "{{ \"a }}",
        "{{ `a }}",
        "{{/*",
        "{{/* */",
        "{{ 99999999999999999999 }}",
        "{{ 1e999 }}",
        "{{ .Values.a.b.c }}",
        "{{ printf \"%\" }}",
        "{{ printf \"%z\" 1 }}",
        "{{ trunc -9999999999 \"a\" }}",
        "é{{ \"é\" | trunc 1 }}",
        "{{ indent -1 \"a\" }}",
    ] {
        let _ = render_template("", t, &json!({"a": {"b": 1}}));
    }
    // Every prefix of a template with multi-byte characters.
    let t = "é: {{ .Values.é | default \"ü\" | quote }}\n{{- range $k, $v := .Values.m }}{{ $k }}→{{ $v }}{{ end }}";
    for (end, _) in t.char_indices() {
        let _ = render_template("", &t[..end], &json!({"m": {"x": "y"}}));
    }
}

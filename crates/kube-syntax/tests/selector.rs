//! Label selectors parsed and matched as `k8s.io/apimachinery/pkg/labels.Parse` does, with its
//! messages, and field selectors as `fields.ParseSelector` and the API server's field labels.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use kube_syntax::selector::{
    COMMON_SELECTABLE_FIELDS, FieldLabels, FieldSelector, LabelSelector, Operator, Requirement,
};

fn labels(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

fn parse(text: &str) -> LabelSelector {
    LabelSelector::parse(text).unwrap_or_else(|e| panic!("{text:?} must parse: {e}"))
}

fn error(text: &str) -> String {
    match LabelSelector::parse(text) {
        Ok(selector) => panic!("{text:?} must be refused, parsed as {selector:?}"),
        Err(error) => error.message,
    }
}

fn values(list: &[&str]) -> Vec<String> {
    list.iter().map(|v| (*v).to_owned()).collect()
}

#[test]
fn operators_parse_into_requirements() {
    let cases: &[(&str, Operator, &[&str])] = &[
        ("k=v", Operator::Equals, &["v"]),
        ("k==v", Operator::Equals, &["v"]),
        ("k!=v", Operator::NotEquals, &["v"]),
        ("k in (a,b)", Operator::In, &["a", "b"]),
        ("k in (b,a,b)", Operator::In, &["a", "b"]),
        ("k notin (a,b)", Operator::NotIn, &["a", "b"]),
        ("k", Operator::Exists, &[]),
        ("!k", Operator::DoesNotExist, &[]),
        ("k>1", Operator::GreaterThan, &["1"]),
        ("k<1", Operator::LessThan, &["1"]),
        ("k>05", Operator::GreaterThan, &["05"]),
        ("k=", Operator::Equals, &[""]),
        ("k!=", Operator::NotEquals, &[""]),
        ("k in ()", Operator::In, &[""]),
        ("k in (,a)", Operator::In, &["", "a"]),
        ("k in (a,)", Operator::In, &["", "a"]),
        ("k in (a,,b)", Operator::In, &["", "a", "b"]),
        ("k notin (,)", Operator::NotIn, &[""]),
        // `,,` consumes both commas: a value or a third comma must follow.
        ("k in (,,a)", Operator::In, &["", "a"]),
        ("k in (,,,)", Operator::In, &[""]),
        ("example.com/Key_1=Value.1", Operator::Equals, &["Value.1"]),
        // `in` and `notin` are identifiers where a key or a value stands.
        ("in=notin", Operator::Equals, &["notin"]),
        ("notin in (in,notin)", Operator::In, &["in", "notin"]),
        ("in", Operator::Exists, &[]),
        ("!notin", Operator::DoesNotExist, &[]),
    ];
    for (text, operator, expected) in cases {
        let selector = parse(text);
        let [requirement] = selector.requirements() else {
            panic!("{text:?}: {selector:?}");
        };
        assert_eq!(requirement.operator, *operator, "{text:?}");
        assert_eq!(requirement.values, values(expected), "{text:?}");
    }
    assert_eq!(parse("in=notin").requirements()[0].key, "in");
}

#[test]
fn whitespace_and_several_requirements() {
    let selector = parse("  a = 1 ,\tb!=2,\r\nc in ( x , y ) , ! d , e notin(z) ,f  ");
    let got: Vec<(&str, Operator, Vec<String>)> = selector
        .requirements()
        .iter()
        .map(|r| (r.key.as_str(), r.operator, r.values.clone()))
        .collect();
    assert_eq!(
        got,
        [
            ("a", Operator::Equals, values(&["1"])),
            ("b", Operator::NotEquals, values(&["2"])),
            ("c", Operator::In, values(&["x", "y"])),
            ("d", Operator::DoesNotExist, values(&[])),
            ("e", Operator::NotIn, values(&["z"])),
            ("f", Operator::Exists, values(&[])),
        ]
    );
    // Upstream's good strings.
    for text in [
        "x=a,y=b,z=c",
        "",
        "x!=a,y=b",
        "x=",
        "x= ",
        "x=,z= ",
        "x= ,z= ",
        "!x",
        "x>1",
        "x>1,z<5",
        "x in (foo,,baz),y,z notin ()",
    ] {
        parse(text);
    }
}

#[test]
fn empty_selector_matches_everything() {
    for text in ["", " ", "\t\n"] {
        let selector = parse(text);
        assert!(selector.requirements().is_empty());
        assert!(selector.matches(&BTreeMap::new()));
        assert!(selector.matches(&labels(&[("a", "b")])));
        assert_eq!(selector.to_string(), "");
    }
    assert_eq!(LabelSelector::default(), parse(""));
}

#[test]
fn syntax_errors_with_the_api_server_messages() {
    let cases = [
        (
            "k in a",
            "unable to parse requirement: found 'a' expected: '('",
        ),
        (
            "k in (a",
            "unable to parse requirement: found '', expected: ',' or ')'",
        ),
        (
            "k in (a b)",
            "unable to parse requirement: found 'b', expected: ',' or ')'",
        ),
        (
            "k in (=)",
            "unable to parse requirement: found '=', expected: ',', ')' or identifier",
        ),
        (
            "k in (a,=)",
            "unable to parse requirement: found '=', expected: ',', or identifier",
        ),
        (
            "k in (a,,)",
            "unable to parse requirement: found ')', expected: ',', or identifier",
        ),
        (
            "k in (,,)",
            "unable to parse requirement: found ')', expected: ',', or identifier",
        ),
        (
            ",",
            "found ',', expected: !, identifier, or 'end of string'",
        ),
        (
            "=a",
            "found '=', expected: !, identifier, or 'end of string'",
        ),
        ("k=a,", "found '', expected: identifier after ','"),
        ("k=,", "found '', expected: identifier after ','"),
        ("a,,b", "found ',', expected: identifier after ','"),
        ("k==a==b", "found '==', expected: ',' or 'end of string'"),
        ("!k=a", "found '=', expected: ',' or 'end of string'"),
        ("k=a b", "found 'b', expected: ',' or 'end of string'"),
        (
            "!",
            "unable to parse requirement: found '', expected: identifier",
        ),
        (
            "k (a)",
            "unable to parse requirement: found '(', expected: in, notin, =, ==, !=, gt, lt",
        ),
        (
            "k v",
            "unable to parse requirement: found 'v', expected: in, notin, =, ==, !=, gt, lt",
        ),
        (
            "k=(",
            "unable to parse requirement: found '(', expected: identifier",
        ),
    ];
    for (text, expected) in cases {
        assert_eq!(error(text), expected, "{text:?}");
    }
    // Upstream's bad strings.
    for text in ["x=a||y=b", "x==a==b", "!x=a", "x<a"] {
        error(text);
    }
}

#[test]
fn invalid_values_are_reported_as_upstream_prints_them() {
    let message = error("endpointslice.kubernetes.io/managed-by=clusterset.io/mcs-controller");
    assert!(
        message.starts_with(
            "unable to parse requirement: values[0][endpointslice.kubernetes.io/managed-by]: Invalid value: \"clusterset.io/mcs-controller\""
        ),
        "{message}"
    );
    assert!(
        message.ends_with(
            ": a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
        ),
        "{message}"
    );
    for (text, key, value) in [
        ("k=-a", "k", "-a"),
        ("k!=a_", "k", "a_"),
        ("k in (good,-bad)", "k", "-bad"),
        ("app notin (a/b)", "app", "a/b"),
    ] {
        // Set values are sorted before they are checked: "-bad" is values[0].
        let message = error(text);
        let prefix =
            format!("unable to parse requirement: values[0][{key}]: Invalid value: \"{value}\"");
        assert!(message.starts_with(&prefix), "{text:?}: {message}");
    }
    // Two problems of one value are joined with "; ".
    let message = error(&format!("k={}-", "a".repeat(63)));
    assert!(
        message.contains(": must be no more than 63 bytes; a valid label must be"),
        "{message}"
    );
}

#[test]
fn invalid_keys_are_reported_at_the_nil_path() {
    for (text, key) in [
        ("a/b/c=v", "a/b/c"),
        ("-k", "-k"),
        ("/k in (a)", "/k"),
        ("!Example.com/k", "Example.com/k"),
    ] {
        let message = error(text);
        let prefix = format!("unable to parse requirement: <nil>: Invalid value: \"{key}\": ");
        assert!(message.starts_with(&prefix), "{text:?}: {message}");
    }
    assert!(
        error(&format!("{}=v", "k".repeat(64)))
            .ends_with("name part must be no more than 63 bytes")
    );
}

#[test]
fn greater_and_less_need_integers() {
    assert_eq!(
        error("k>a"),
        "unable to parse requirement: values[0]: Invalid value: \"a\": for 'Gt', 'Lt' operators, the value must be an integer"
    );
    assert!(error("k<1.5").contains("the value must be an integer"));
    assert!(error("k>").contains("values[0]: Invalid value: \"\""));
    // A negative bound is an integer but no label value: upstream refuses it too.
    assert!(
        error("k>-5")
            .starts_with("unable to parse requirement: values[0][k]: Invalid value: \"-5\"")
    );
    let gt = parse("k>5");
    assert!(gt.matches(&labels(&[("k", "6")])));
    assert!(!gt.matches(&labels(&[("k", "5")])));
    assert!(!gt.matches(&labels(&[("k", "x")])));
    assert!(!gt.matches(&labels(&[])));
    let lt = parse("k<5");
    assert!(lt.matches(&labels(&[("k", "-10")])));
    assert!(!lt.matches(&labels(&[("k", "5")])));
    assert!(!lt.matches(&labels(&[("k", "")])));
    assert!(!lt.matches(&labels(&[])));
}

#[test]
fn matching_semantics() {
    let set = labels(&[("app", "web"), ("tier", "front"), ("empty", "")]);
    let cases = [
        ("app=web", true),
        ("app==web", true),
        ("app=db", false),
        ("missing=web", false),
        ("app!=db", true),
        ("app!=web", false),
        // NotEquals and NotIn hold when the label is absent.
        ("missing!=web", true),
        ("missing notin (a,b)", true),
        ("app in (web,db)", true),
        ("app in (db)", false),
        ("missing in (web)", false),
        ("app notin (db)", true),
        ("app notin (web)", false),
        ("app", true),
        ("missing", false),
        ("!missing", true),
        ("!app", false),
        ("empty=", true),
        ("empty", true),
        ("empty in ()", true),
        ("missing=", false),
        ("app=web,tier=front", true),
        ("app=web,tier=back", false),
        ("app=web,!missing,tier in (front,back)", true),
    ];
    for (text, expected) in cases {
        assert_eq!(parse(text).matches(&set), expected, "{text:?}");
    }
}

#[test]
fn display_round_trips() {
    for text in [
        "",
        "a=b",
        "a==b",
        "a!=b",
        "a=",
        "a in (x,y)",
        "a in (y,x,x)",
        "a notin ()",
        "a in (,x)",
        "a",
        "!a",
        "a>1",
        "a<1",
        "x in (foo,,baz),y,z notin ()",
        " example.com/k = V_1 , !other ",
        "in=notin,notin in (in)",
    ] {
        let once = parse(text);
        let shown = once.to_string();
        let again = LabelSelector::parse(&shown)
            .unwrap_or_else(|e| panic!("{text:?} shown as {shown:?} does not parse: {e}"));
        assert_eq!(again, once, "{text:?} shown as {shown:?}");
        assert_eq!(again.to_string(), shown);
    }
    assert_eq!(parse("a in (y,x,x)").to_string(), "a in (x,y)");
    assert_eq!(parse(" a = b , ! c ").to_string(), "a=b,!c");
}

#[test]
fn requirement_new_checks_as_new_requirement_does() {
    assert!(Requirement::new("k", Operator::In, vec![]).is_err());
    assert!(Requirement::new("k", Operator::Equals, values(&["a", "b"])).is_err());
    assert!(Requirement::new("k", Operator::Exists, values(&["a"])).is_err());
    assert!(Requirement::new("k", Operator::GreaterThan, values(&["1", "2"])).is_err());
    assert_eq!(
        Requirement::new("a/b/c", Operator::Exists, vec![])
            .unwrap_err()
            .field,
        "key"
    );
    let error = Requirement::new("k", Operator::In, vec![]).unwrap_err();
    assert_eq!(
        error.to_string(),
        "values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
    );
    let ok = Requirement::new("k", Operator::NotIn, values(&["a"])).unwrap();
    assert_eq!(ok.to_string(), "k notin (a)");
    assert!(ok.matches(&labels(&[])));
}

#[test]
fn field_selectors_parse() {
    type Terms<'a> = &'a [(&'a str, bool, &'a str)];
    let cases: &[(&str, Terms)] = &[
        ("", &[]),
        ("metadata.name=x", &[("metadata.name", false, "x")]),
        ("metadata.name==x", &[("metadata.name", false, "x")]),
        ("metadata.name!=x", &[("metadata.name", true, "x")]),
        ("metadata.name=", &[("metadata.name", false, "")]),
        (
            "metadata.name=a,metadata.namespace!=b",
            &[
                ("metadata.name", false, "a"),
                ("metadata.namespace", true, "b"),
            ],
        ),
        // Escapes in values: `\,`, `\=` and `\\`.
        ("metadata.name=a\\,b", &[("metadata.name", false, "a,b")]),
        ("metadata.name=a\\=b", &[("metadata.name", false, "a=b")]),
        ("metadata.name=a\\\\b", &[("metadata.name", false, "a\\b")]),
        // Empty terms are skipped.
        ("metadata.name=a,", &[("metadata.name", false, "a")]),
        (",metadata.name=a,,", &[("metadata.name", false, "a")]),
        // The first operator from the left splits.
        ("a=b!c", &[("a", false, "b!c")]),
        ("a!=b", &[("a", true, "b")]),
        ("a==b", &[("a", false, "b")]),
    ];
    for (text, expected) in cases {
        let selector = FieldSelector::parse(text).unwrap_or_else(|e| panic!("{text:?}: {e}"));
        let got: Vec<(&str, bool, &str)> = selector
            .requirements()
            .iter()
            .map(|r| (r.field.as_str(), r.negated, r.value.as_str()))
            .collect();
        assert_eq!(&got, expected, "{text:?}");
    }
}

#[test]
fn field_selector_errors() {
    let cases = [
        (
            "metadata.name",
            "invalid selector: 'metadata.name'; can't understand 'metadata.name'",
        ),
        ("a=b,c", "invalid selector: 'a=b,c'; can't understand 'c'"),
        (
            "a=b=c",
            "invalid field selector: unescaped character in value: 61",
        ),
        (
            "a==b,c=d\\",
            "invalid field selector: invalid escape sequence: \\",
        ),
        (
            "a=b\\x",
            "invalid field selector: invalid escape sequence: \\x",
        ),
        (
            "a=b\\!",
            "invalid field selector: invalid escape sequence: \\!",
        ),
    ];
    for (text, expected) in cases {
        let error = FieldSelector::parse(text).unwrap_err();
        assert_eq!(error.message, expected, "{text:?}");
    }
}

#[test]
fn field_selectors_per_kind() {
    assert_eq!(
        COMMON_SELECTABLE_FIELDS,
        ["metadata.name", "metadata.namespace"]
    );
    // Kinds without a conversion of their own: DefaultMetaV1FieldSelectorConversion.
    for (group, kind) in [
        ("", "ConfigMap"),
        ("discovery.k8s.io", "EndpointSlice"),
        ("apps", "Deployment"),
        ("apps", "ReplicaSet"),
        ("coordination.k8s.io", "Lease"),
    ] {
        assert_eq!(FieldLabels::builtin(group, kind), FieldLabels::Default);
        assert!(FieldSelector::parse_for(group, kind, "metadata.name=web").is_ok());
        assert!(FieldSelector::parse_for(group, kind, "metadata.namespace!=kube-system").is_ok());
        assert_eq!(
            FieldSelector::parse_for(group, kind, "spec.type=ClusterIP")
                .unwrap_err()
                .message,
            "\"spec.type\" is not a known field selector: only \"metadata.name\", \"metadata.namespace\""
        );
    }
    // Services select on their type and cluster IP.
    assert!(FieldSelector::parse_for("", "Service", "spec.type=ClusterIP").is_ok());
    assert!(FieldSelector::parse_for("", "Service", "spec.clusterIP!=None").is_ok());
    // Kinds with their own conversion: `field label not supported`.
    for (group, kind, field) in [
        ("", "Service", "spec.ports"),
        ("", "Pod", "spec.containers"),
        ("", "Event", "message"),
        ("", "Secret", "data"),
        ("", "Node", "metadata.namespace"),
        ("", "Namespace", "metadata.namespace"),
        ("events.k8s.io", "Event", "involvedObject.name"),
    ] {
        assert_eq!(
            FieldSelector::parse_for(group, kind, &format!("{field}=x"))
                .unwrap_err()
                .message,
            format!("field label not supported: {field}"),
        );
    }
    assert!(
        FieldSelector::parse_for(
            "",
            "Event",
            "involvedObject.name=web,involvedObject.kind=Service,reportingComponent=x,source=y"
        )
        .is_ok()
    );
    assert!(
        FieldLabels::builtin("", "Event")
            .fields()
            .contains(&"involvedObject.name")
    );
    // events.k8s.io/v1 names the core fields its own way.
    assert!(
        FieldSelector::parse_for(
            "events.k8s.io",
            "Event",
            "regarding.name=web,regarding.kind=Service,reportingController=c,reason=r,type=Normal"
        )
        .is_ok()
    );
    assert!(FieldSelector::parse_for("", "Pod", "spec.nodeName=n1,status.phase!=Running").is_ok());
    assert!(FieldSelector::parse_for("", "Pod", "spec.host=n1").is_ok());
    assert!(FieldSelector::parse_for("", "Secret", "type=kubernetes.io/tls").is_ok());
    assert_eq!(
        FieldSelector::parse_for("batch", "Job", "spec.x=1")
            .unwrap_err()
            .message,
        "field label \"spec.x\" not supported for Job"
    );
    // Custom resources (crConverter): metadata.namespace only when namespaced.
    let namespaced = FieldLabels::CustomResource { namespaced: true };
    assert!(FieldSelector::parse_with(namespaced, "metadata.namespace=demo").is_ok());
    assert_eq!(
        FieldSelector::parse_with(namespaced, "spec.x=1")
            .unwrap_err()
            .message,
        "field label not supported: spec.x"
    );
    assert_eq!(
        FieldSelector::parse_with(
            FieldLabels::CustomResource { namespaced: false },
            "metadata.namespace=demo"
        )
        .unwrap_err()
        .message,
        "field label not supported: metadata.namespace"
    );
    // A syntax error comes before the field check.
    assert_eq!(
        FieldSelector::parse_for("", "Service", "nonsense")
            .unwrap_err()
            .message,
        "invalid selector: 'nonsense'; can't understand 'nonsense'"
    );
}

#[test]
fn field_selector_matching() {
    let selector =
        FieldSelector::parse("metadata.name=web,metadata.namespace!=kube-system").unwrap();
    let object = |name: &'static str, namespace: &'static str| {
        move |field: &str| match field {
            "metadata.name" => Some(name.to_owned()),
            "metadata.namespace" => Some(namespace.to_owned()),
            _ => None,
        }
    };
    assert!(selector.matches(object("web", "demo")));
    assert!(!selector.matches(object("db", "demo")));
    assert!(!selector.matches(object("web", "kube-system")));
    // A field the object lacks reads as empty.
    assert!(FieldSelector::parse("spec.x=").unwrap().matches(|_| None));
    assert!(FieldSelector::parse("").unwrap().matches(|_| None));
}

//! Label keys and values, annotation keys and the annotations' total size, against
//! `IsQualifiedName`, `IsValidLabelValue` and `ValidateAnnotations`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use kube_syntax::labels::{
    MAX_ANNOTATIONS_SIZE, MAX_LABEL_VALUE_LEN, annotation_key, annotations_errors, label_key,
    label_value, label_value_problems, labels_errors,
};
use kube_syntax::{ErrorKind, Rule};

const LABEL_VALUE_MSG: &str = "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')";

fn map(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
    pairs
        .iter()
        .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
        .collect()
}

#[test]
fn label_values_accepted() {
    for value in [
        "",
        "simple",
        "now-with-dashes",
        "1-starts-with-num",
        "end-with-num-1",
        "1234",
        "UpperCase",
        "a_b",
        "a.b",
        "a-b_c.d",
        "mcs-controller.clusterset.io",
        "endpointslice-controller.k8s.io",
    ] {
        assert!(label_value(value).is_ok(), "{value:?} must be accepted");
    }
    let longest = "a".repeat(MAX_LABEL_VALUE_LEN);
    assert_eq!(longest.len(), 63);
    assert!(label_value(&longest).is_ok());
}

#[test]
fn label_values_refused() {
    for value in [
        "nospecialchars%^=@",
        "Tama-nui-te-rā.is.Māori.sun",
        "\\backslashes\\are\\bad",
        "-starts-with-dash",
        "ends-with-dash-",
        ".starts.with.dot",
        "ends.with.dot.",
        "_starts_with_underscore",
        "ends_with_underscore_",
        "has space",
        "a/b",
        "/",
        "clusterset.io/mcs-controller",
    ] {
        let error = label_value(value).unwrap_err();
        assert_eq!(error.rule, Rule::LabelValue);
        assert_eq!(error.problems, [LABEL_VALUE_MSG], "{value:?}");
    }
    assert_eq!(
        label_value(&"a".repeat(64)).unwrap_err().problems,
        ["must be no more than 63 bytes"]
    );
    assert_eq!(
        label_value_problems(&format!("{}/", "a".repeat(63))),
        ["must be no more than 63 bytes", LABEL_VALUE_MSG]
    );
}

#[test]
fn the_managed_by_value_a_real_server_refused() {
    let error = label_value("clusterset.io/mcs-controller").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("\"clusterset.io/mcs-controller\" is not a valid label value: {LABEL_VALUE_MSG}")
    );
    assert_eq!(
        error.at("metadata.labels").to_string(),
        format!(
            "metadata.labels: Invalid value: \"clusterset.io/mcs-controller\": {LABEL_VALUE_MSG}"
        )
    );
    // The same string is a good key: '/' belongs to keys.
    assert!(label_key("clusterset.io/mcs-controller").is_ok());
    assert!(label_value("mcs-controller.clusterset.io").is_ok());
}

#[test]
fn label_keys_are_qualified_names() {
    for key in [
        "app",
        "App",
        "app.kubernetes.io/name",
        "kubernetes.io/service-name",
        "example.com/UPPER_case.ok",
        "1.2.3/x",
    ] {
        assert!(label_key(key).is_ok(), "{key:?}");
    }
    for key in ["", "/a", "a/", "a/b/c", "Example.com/a", "-a", "a b", "a=b"] {
        let error = label_key(key).unwrap_err();
        assert_eq!(error.rule, Rule::LabelKey, "{key:?}");
    }
    assert!(label_key(&"a".repeat(63)).is_ok());
    assert!(label_key(&"a".repeat(64)).is_err());
}

#[test]
fn annotation_keys_are_qualified_names_in_lower_case() {
    for key in [
        "a",
        "A",
        "example.com/a",
        "Example.COM/a",
        "api-approved.kubernetes.io",
        "kubectl.kubernetes.io/last-applied-configuration",
    ] {
        assert!(annotation_key(key).is_ok(), "{key:?}");
    }
    for key in ["", "/a", "a/b/c", "a b", "_a", "example.com/"] {
        let error = annotation_key(key).unwrap_err();
        assert_eq!(error.rule, Rule::AnnotationKey, "{key:?}");
        // The value reported is the key as written, not its lower case.
        assert_eq!(error.value, key);
    }
    assert_eq!(annotation_key("A B").unwrap_err().value, "A B");
}

#[test]
fn labels_errors_lists_each_problem_of_each_label() {
    assert!(labels_errors("metadata.labels", &BTreeMap::new()).is_empty());
    assert!(labels_errors("metadata.labels", &map(&[("app", "web"), ("tier", "")])).is_empty());

    let errors = labels_errors(
        "metadata.labels",
        &map(&[
            (
                "endpointslice.kubernetes.io/managed-by",
                "clusterset.io/mcs-controller",
            ),
            ("good", "fine"),
        ]),
    );
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].field, "metadata.labels");
    assert_eq!(
        errors[0].kind,
        ErrorKind::Invalid("\"clusterset.io/mcs-controller\"".to_owned())
    );
    assert_eq!(errors[0].detail, LABEL_VALUE_MSG);

    // A bad key and a bad value of one label: the key first, then the value.
    let errors = labels_errors("spec.selector", &map(&[("a/b/c", "-x")]));
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert_eq!(errors[0].kind, ErrorKind::Invalid("\"a/b/c\"".to_owned()));
    assert_eq!(errors[1].kind, ErrorKind::Invalid("\"-x\"".to_owned()));
    assert!(errors.iter().all(|e| e.field == "spec.selector"));

    // Two problems of one value are two errors, as `ValidateLabels` lists them.
    let long_and_bad = format!("{}-", "a".repeat(63));
    let errors = labels_errors("metadata.labels", &map(&[("k", &long_and_bad)]));
    assert_eq!(errors.len(), 2, "{errors:#?}");
    assert_eq!(errors[0].detail, "must be no more than 63 bytes");
    assert_eq!(errors[1].detail, LABEL_VALUE_MSG);
}

#[test]
fn annotations_total_size_limit_is_256_kib_of_keys_and_values() {
    assert_eq!(MAX_ANNOTATIONS_SIZE, 262_144);
    let key = "example.com/big";
    let exactly = map(&[(key, &"x".repeat(MAX_ANNOTATIONS_SIZE - key.len()))]);
    assert!(annotations_errors("metadata.annotations", &exactly).is_empty());

    let over = map(&[(key, &"x".repeat(MAX_ANNOTATIONS_SIZE - key.len() + 1))]);
    let errors = annotations_errors("metadata.annotations", &over);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].field, "metadata.annotations");
    assert_eq!(errors[0].kind, ErrorKind::TooLong(262_144));
    assert_eq!(
        errors[0].to_string(),
        "metadata.annotations: Too long: may not be more than 262144 bytes"
    );

    // Spread over many annotations, keys counted too.
    let mut many = BTreeMap::new();
    let mut size = 0;
    let mut i = 0;
    while size < MAX_ANNOTATIONS_SIZE {
        let key = format!("k{i:05}");
        let value = "v".repeat(1000.min(MAX_ANNOTATIONS_SIZE - size - key.len()));
        size += key.len() + value.len();
        many.insert(key, value);
        i += 1;
    }
    assert_eq!(size, MAX_ANNOTATIONS_SIZE);
    assert!(annotations_errors("metadata.annotations", &many).is_empty());
    many.insert("z".to_owned(), String::new());
    assert_eq!(
        annotations_errors("metadata.annotations", &many)[0].kind,
        ErrorKind::TooLong(262_144)
    );
}

#[test]
fn annotations_errors_reports_bad_keys_and_size() {
    let errors = annotations_errors(
        "metadata.annotations",
        &map(&[("good.example.com/ok", "v"), ("bad key", "v")]),
    );
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(errors[0].kind, ErrorKind::Invalid("\"bad key\"".to_owned()));
    // Values may hold anything.
    assert!(
        annotations_errors(
            "metadata.annotations",
            &map(&[("a", "any / thing: at all\n")])
        )
        .is_empty()
    );
}

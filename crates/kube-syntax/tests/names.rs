//! DNS-1123 labels and subdomains, DNS-1035 labels, qualified names, IANA port names and the
//! name rule of each kind, against the limits of `k8s.io/apimachinery/pkg/util/validation`.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kube_syntax::Rule;
use kube_syntax::names::{
    MAX_LABEL_LEN, MAX_QUALIFIED_NAME_LEN, MAX_SUBDOMAIN_LEN, dns1035_label,
    dns1035_label_problems, dns1123_label, dns1123_label_problems, dns1123_subdomain,
    dns1123_subdomain_problems, iana_service_name, iana_service_name_problems, object_name,
    object_name_problems, object_name_rule, qualified_name, qualified_name_problems,
};

const LABEL_REGEX_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const SUBDOMAIN_REGEX_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035_REGEX_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const NAME_PART_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// A subdomain of exactly `len` characters made of 63-character labels.
fn subdomain_of_len(len: usize) -> String {
    let mut out = String::new();
    while out.len() < len {
        if !out.is_empty() {
            out.push('.');
        }
        let room = (len - out.len()).min(63);
        out.push_str(&"a".repeat(room));
    }
    // The last label may have been one character: keep it alphanumeric.
    assert_eq!(out.len(), len);
    out
}

#[test]
fn dns1123_label_accepts_what_the_api_server_accepts() {
    let good = [
        "a",
        "ab",
        "abc",
        "a1",
        "a-1",
        "a--1--2--b",
        "0",
        "01",
        "0-a",
        "1-2-3",
        "123-abc",
        "rook-ceph-mon-a",
    ];
    for value in good {
        assert!(dns1123_label(value).is_ok(), "{value:?} must be accepted");
        assert!(dns1123_label_problems(value).is_empty(), "{value:?}");
    }
    let longest = "a".repeat(MAX_LABEL_LEN);
    assert_eq!(longest.len(), 63);
    assert!(dns1123_label(&longest).is_ok());
    let mixed = format!("0{}9", "-".repeat(61));
    assert_eq!(mixed.len(), 63);
    assert!(dns1123_label(&mixed).is_ok());
}

#[test]
fn dns1123_label_refuses_with_the_api_server_messages() {
    let bad = [
        "", "A", "ABC", "aBc", "A1", "a-1-B", "-", "a-", "-a", "1-", "-1", "_", "a_", "_a", "a_b",
        "1_", "_1", "1_2", "a@b", "a,b", "a b", " a", "a ", "é", "a/b",
    ];
    for value in bad {
        let error = dns1123_label(value).unwrap_err();
        assert_eq!(error.rule, Rule::Dns1123Label);
        assert_eq!(error.value, value);
        assert_eq!(error.problems, [LABEL_REGEX_MSG], "{value:?}");
    }
    // A valid subdomain that is not a label: upstream says why, in its own words.
    for value in [".", "a.b", "1.2", "a.b.c"] {
        let problems = dns1123_label_problems(value);
        if value == "." {
            assert_eq!(problems, [LABEL_REGEX_MSG], "{value:?}");
        } else {
            assert_eq!(problems, ["must not contain dots"], "{value:?}");
        }
    }
    let too_long = "a".repeat(64);
    assert_eq!(
        dns1123_label(&too_long).unwrap_err().problems,
        ["must be no more than 63 characters"]
    );
    // Both problems, length first.
    let long_and_upper = "A".repeat(64);
    assert_eq!(
        dns1123_label_problems(&long_and_upper),
        ["must be no more than 63 characters", LABEL_REGEX_MSG]
    );
}

#[test]
fn dns1123_label_error_prints_value_rule_and_problems() {
    let error = dns1123_label("Web").unwrap_err();
    assert_eq!(
        error.to_string(),
        format!("\"Web\" is not a valid RFC 1123 label: {LABEL_REGEX_MSG}")
    );
    assert_eq!(
        error.at("metadata.namespace").to_string(),
        format!("metadata.namespace: Invalid value: \"Web\": {LABEL_REGEX_MSG}")
    );
}

#[test]
fn dns1123_subdomain_limits() {
    let good = [
        "a",
        "ab",
        "a1",
        "0",
        "0.a",
        "a.b.c",
        "a-1.b-2",
        "a--1--2--b.c",
        "1.2.3.4",
        "east.rook-ceph.rook-ceph-mon-a",
        "example.com",
    ];
    for value in good {
        assert!(
            dns1123_subdomain(value).is_ok(),
            "{value:?} must be accepted"
        );
    }
    // Upstream applies no per-label limit inside a subdomain.
    let long_label = "a".repeat(100);
    assert!(dns1123_subdomain(&long_label).is_ok());

    let longest = subdomain_of_len(MAX_SUBDOMAIN_LEN);
    assert_eq!(longest.len(), 253);
    assert!(dns1123_subdomain(&longest).is_ok());
    let too_long = subdomain_of_len(MAX_SUBDOMAIN_LEN + 1);
    assert_eq!(
        dns1123_subdomain(&too_long).unwrap_err().problems,
        ["must be no more than 253 characters"]
    );

    let bad = [
        "", "A", "a.B", "a..b", ".a", "a.", ".", "..", "-a", "a-", "a.-b", "a-.b", "a_b", "a/b",
        "a b", "a@b",
    ];
    for value in bad {
        let error = dns1123_subdomain(value).unwrap_err();
        assert_eq!(error.rule, Rule::Dns1123Subdomain);
        assert_eq!(error.problems, [SUBDOMAIN_REGEX_MSG], "{value:?}");
    }
    let long_and_bad = format!("{}.", "a".repeat(253));
    assert_eq!(
        dns1123_subdomain_problems(&long_and_bad),
        ["must be no more than 253 characters", SUBDOMAIN_REGEX_MSG]
    );
}

#[test]
fn dns1035_label_must_start_with_a_letter() {
    for value in [
        "a",
        "ab",
        "a1",
        "a-1",
        "a--1--2--b",
        "web",
        "rook-ceph-mon-a",
    ] {
        assert!(dns1035_label(value).is_ok(), "{value:?}");
    }
    assert!(dns1035_label(&"a".repeat(63)).is_ok());
    for value in [
        "", "0", "01", "0-a", "1-2", "0web", "-a", "a-", "A", "aB", "a_b", "a.b", "a b", "é",
    ] {
        let error = dns1035_label(value).unwrap_err();
        assert_eq!(error.rule, Rule::Dns1035Label);
        assert_eq!(error.problems, [DNS1035_REGEX_MSG], "{value:?}");
    }
    assert_eq!(
        dns1035_label_problems(&"a".repeat(64)),
        ["must be no more than 63 characters"]
    );
    assert_eq!(
        dns1035_label_problems(&format!("0{}", "a".repeat(63))),
        ["must be no more than 63 characters", DNS1035_REGEX_MSG]
    );
}

#[test]
fn qualified_names_accept_prefixes_and_upper_case_names() {
    let good = [
        "simple",
        "now-with-dashes",
        "1-starts-with-num",
        "1234",
        "simple/simple",
        "now-with-dashes/simple",
        "now-with-dashes/now-with-dashes",
        "now.with.dots/simple",
        "now-with.dashes-and.dots/simple",
        "1-num.2-num/3-num",
        "1234/5678",
        "1.2.3.4/5678",
        "Uppercase_Is_OK_123",
        "example.com/Uppercase_Is_OK_123",
        "requests.storage-foo",
        "kubernetes.io/service-name",
        "endpointslice.kubernetes.io/managed-by",
        "multicluster.kubernetes.io/service-name",
        "a_b",
        "a.b",
        "a-b",
    ];
    for value in good {
        assert!(qualified_name(value).is_ok(), "{value:?} must be accepted");
    }
    let name63 = "a".repeat(MAX_QUALIFIED_NAME_LEN);
    assert!(qualified_name(&name63).is_ok());
    let prefix253 = subdomain_of_len(253);
    assert!(qualified_name(&format!("{prefix253}/{name63}")).is_ok());
}

#[test]
fn qualified_names_refused_with_each_problem() {
    let name_part_bad = [
        "nospecialchars%^=@",
        "cantendwithadash-",
        "-cantstartwithadash-",
        "only/one/slash",
        "Example.com/abc",
        "example_com/abc",
        "example.com/",
        "/simple",
        "a/b/c",
        "_a",
        "a_",
        ".a",
        "a.",
        "a b",
        "",
    ];
    for value in name_part_bad {
        let error = qualified_name(value).unwrap_err();
        assert_eq!(error.rule, Rule::QualifiedName, "{value:?}");
        assert!(!error.problems.is_empty(), "{value:?}");
    }

    // The name part.
    assert_eq!(qualified_name_problems("a-"), [NAME_PART_MSG]);
    assert_eq!(
        qualified_name_problems(""),
        ["name part must be non-empty", NAME_PART_MSG]
    );
    assert_eq!(
        qualified_name_problems(&"a".repeat(64)),
        ["name part must be no more than 63 bytes"]
    );
    assert_eq!(
        qualified_name_problems(&format!("example.com/{}", "a".repeat(64))),
        ["name part must be no more than 63 bytes"]
    );
    assert_eq!(
        qualified_name_problems("example.com/"),
        ["name part must be non-empty", NAME_PART_MSG]
    );

    // The prefix.
    assert_eq!(
        qualified_name_problems("/a"),
        ["prefix part must be non-empty"]
    );
    assert_eq!(
        qualified_name_problems("Example.com/a"),
        [format!("prefix part {SUBDOMAIN_REGEX_MSG}")]
    );
    assert_eq!(
        qualified_name_problems(&format!("{}/a", subdomain_of_len(254))),
        ["prefix part must be no more than 253 bytes"]
    );
    // Both parts wrong: prefix first.
    assert_eq!(
        qualified_name_problems("/"),
        [
            "prefix part must be non-empty",
            "name part must be non-empty",
            NAME_PART_MSG
        ]
    );

    // More than one '/'.
    let problems = qualified_name_problems("a/b/c");
    assert_eq!(problems.len(), 1);
    assert!(
        problems[0].starts_with("a valid label key must consist of alphanumeric characters"),
        "{problems:?}"
    );
    assert!(
        problems[0]
            .ends_with("with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"),
        "{problems:?}"
    );
    assert_eq!(qualified_name_problems("a//b"), problems);
}

#[test]
fn iana_port_names() {
    for value in [
        "http",
        "https",
        "metrics",
        "h2c",
        "a",
        "1a",
        "a1",
        "grpc-web",
        "a-b-c",
        "abcdefghijklmno",
        "12345678901234a",
    ] {
        assert!(iana_service_name(value).is_ok(), "{value:?}");
    }
    let cases: &[(&str, &[&str])] = &[
        ("abcdefghijklmnop", &["must be no more than 15 characters"]),
        (
            "",
            &[
                "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                "must contain at least one letter (a-z)",
            ],
        ),
        ("1234", &["must contain at least one letter (a-z)"]),
        (
            "Http",
            &["must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"],
        ),
        (
            "a_b",
            &["must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)"],
        ),
        ("a--b", &["must not contain consecutive hyphens"]),
        ("-http", &["must not begin or end with a hyphen"]),
        ("http-", &["must not begin or end with a hyphen"]),
        (
            "--",
            &[
                "must contain at least one letter (a-z)",
                "must not contain consecutive hyphens",
                "must not begin or end with a hyphen",
            ],
        ),
    ];
    for (value, expected) in cases {
        assert_eq!(&iana_service_name_problems(value), expected, "{value:?}");
        assert_eq!(
            iana_service_name(value).unwrap_err().rule,
            Rule::IanaServiceName
        );
    }
}

#[test]
fn object_name_rule_per_kind() {
    assert_eq!(object_name_rule("", "Service"), Rule::Dns1123Label);
    assert_eq!(object_name_rule("", "Namespace"), Rule::Dns1123Label);
    for (group, kind) in [
        ("", "ConfigMap"),
        ("", "Secret"),
        ("", "Pod"),
        ("", "Event"),
        ("apps", "Deployment"),
        ("discovery.k8s.io", "EndpointSlice"),
        ("coordination.k8s.io", "Lease"),
        ("events.k8s.io", "Event"),
        ("multicluster.x-k8s.io", "ServiceExport"),
        ("about.k8s.io", "ClusterProperty"),
        // A custom "Service" kind of another group is named as any custom resource.
        ("example.com", "Service"),
        ("example.com", "Namespace"),
    ] {
        assert_eq!(
            object_name_rule(group, kind),
            Rule::Dns1123Subdomain,
            "{group}/{kind}"
        );
    }

    // Service: a DNS-1123 label in Kubernetes 1.37 (RelaxedServiceNameValidation; 1.35 holds
    // them to DNS-1035 labels and refuses `0web`).
    assert!(object_name("", "Service", "web").is_ok());
    assert!(object_name("", "Service", "0web").is_ok());
    assert_eq!(
        object_name("", "Service", "web.east").unwrap_err().problems,
        ["must not contain dots"]
    );
    assert_eq!(
        object_name("", "Service", "Web").unwrap_err().problems,
        [LABEL_REGEX_MSG]
    );
    // Namespace: DNS-1123 label (digits first allowed, dots not).
    assert!(object_name("", "Namespace", "0ns").is_ok());
    assert_eq!(
        object_name_problems("", "Namespace", "a.b"),
        ["must not contain dots"]
    );
    // Others: subdomain (dots and digits first allowed, longer than 63 allowed).
    assert!(object_name("", "ConfigMap", "0.config.map").is_ok());
    assert!(object_name("discovery.k8s.io", "EndpointSlice", &"a".repeat(253)).is_ok());
    assert!(object_name("discovery.k8s.io", "EndpointSlice", &"a".repeat(254)).is_err());
    assert_eq!(
        object_name("", "ConfigMap", "Config").unwrap_err().rule,
        Rule::Dns1123Subdomain
    );
}

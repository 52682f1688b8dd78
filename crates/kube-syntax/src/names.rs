//! DNS-style names (`k8s.io/apimachinery/pkg/util/validation`) and qualified names
//! (`k8s.io/apimachinery/pkg/api/validate/content`, which counts lengths in bytes), and the rule
//! that names an object of each kind.
//!
//! ```
//! use kube_syntax::names::{dns1035_label, dns1123_subdomain, object_name_rule};
//! use kube_syntax::Rule;
//! assert!(dns1035_label("rook-ceph-mon-a").is_ok());
//! assert!(dns1035_label("0-starts-with-a-digit").is_err());
//! assert!(dns1123_subdomain("east.rook-ceph.rook-ceph-mon-a").is_ok());
//! assert_eq!(object_name_rule("", "Service"), Rule::Dns1123Label);
//! ```

use crate::error::{Invalid, Rule};

/// The longest DNS-1123 or DNS-1035 label.
pub const MAX_LABEL_LEN: usize = 63;
/// The longest DNS-1123 subdomain.
pub const MAX_SUBDOMAIN_LEN: usize = 253;
/// The longest name part of a qualified name.
pub const MAX_QUALIFIED_NAME_LEN: usize = 63;

const DNS1123_LABEL_MSG: &str = "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')";
const DNS1123_SUBDOMAIN_MSG: &str = "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')";
const DNS1035_LABEL_MSG: &str = "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an alphabetic character, and end with an alphanumeric character (e.g. 'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')";
const QUALIFIED_NAME_MSG: &str = "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')";

/// `must be no more than N characters` (`validation.MaxLenError`: names).
pub(crate) fn max_len_msg(max: usize) -> String {
    format!("must be no more than {max} characters")
}

/// `must be no more than N bytes` (`content.MaxLenError`: label keys and values, and the
/// prefix of a qualified name).
pub(crate) fn max_bytes_msg(max: usize) -> String {
    format!("must be no more than {max} bytes")
}

fn lower_alnum(b: u8) -> bool {
    b.is_ascii_lowercase() || b.is_ascii_digit()
}

/// Whether `s` is `[a-z0-9]([-a-z0-9]*[a-z0-9])?` (any length).
fn is_label_shape(s: &[u8]) -> bool {
    match (s.first(), s.last()) {
        (Some(&first), Some(&last)) => {
            lower_alnum(first)
                && lower_alnum(last)
                && s.iter().all(|&b| lower_alnum(b) || b == b'-')
        }
        _ => false,
    }
}

/// Whether `label` is a DNS-1123 label (the fast form of [`dns1123_label`], for hot paths that
/// need no message).
pub fn is_dns1123_label(label: &[u8]) -> bool {
    label.len() <= MAX_LABEL_LEN && is_label_shape(label)
}

/// Whether `label` is a DNS-1035 label (the fast form of [`dns1035_label`]).
pub fn is_dns1035_label(label: &[u8]) -> bool {
    label.first().is_some_and(u8::is_ascii_lowercase) && is_dns1123_label(label)
}

/// Problems of `value` as a DNS-1123 label (none when valid).
pub fn dns1123_label_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > MAX_LABEL_LEN {
        problems.push(max_len_msg(MAX_LABEL_LEN));
    }
    if !is_label_shape(value.as_bytes()) {
        // A valid subdomain that is no label (its length checked above) has dots.
        if is_subdomain_shape(value) {
            problems.push("must not contain dots".to_owned());
        } else {
            problems.push(DNS1123_LABEL_MSG.to_owned());
        }
    }
    problems
}

/// Whether `s` is dot-separated DNS-1123 label shapes (any length).
fn is_subdomain_shape(s: &str) -> bool {
    s.split('.').all(|part| is_label_shape(part.as_bytes()))
}

/// A DNS-1123 label (`IsDNS1123Label`): 1-63 lower-case letters, digits or `-`, starting and
/// ending with a letter or digit. Namespace names follow it.
pub fn dns1123_label(value: &str) -> Result<(), Invalid> {
    Invalid::check(Rule::Dns1123Label, value, dns1123_label_problems(value))
}

/// Problems of `value` as a DNS-1123 subdomain (none when valid).
pub fn dns1123_subdomain_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > MAX_SUBDOMAIN_LEN {
        problems.push(max_len_msg(MAX_SUBDOMAIN_LEN));
    }
    if !is_subdomain_shape(value) {
        problems.push(DNS1123_SUBDOMAIN_MSG.to_owned());
    }
    problems
}

/// A DNS-1123 subdomain (`IsDNS1123Subdomain`): at most 253 characters of dot-separated
/// DNS-1123 labels (the labels themselves may be longer than 63 here, as upstream allows).
pub fn dns1123_subdomain(value: &str) -> Result<(), Invalid> {
    Invalid::check(
        Rule::Dns1123Subdomain,
        value,
        dns1123_subdomain_problems(value),
    )
}

/// Problems of `value` as a DNS-1035 label (none when valid).
pub fn dns1035_label_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > MAX_LABEL_LEN {
        problems.push(max_len_msg(MAX_LABEL_LEN));
    }
    let starts_with_letter = value.as_bytes().first().is_some_and(u8::is_ascii_lowercase);
    if !(starts_with_letter && is_label_shape(value.as_bytes())) {
        problems.push(DNS1035_LABEL_MSG.to_owned());
    }
    problems
}

/// A DNS-1035 label (`IsDNS1035Label`): a DNS-1123 label that starts with a letter. Service
/// names follow it.
pub fn dns1035_label(value: &str) -> Result<(), Invalid> {
    Invalid::check(Rule::Dns1035Label, value, dns1035_label_problems(value))
}

/// Whether `s` is `([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]`.
pub(crate) fn is_qualified_name_part(s: &str) -> bool {
    let bytes = s.as_bytes();
    match (bytes.first(), bytes.last()) {
        (Some(first), Some(last)) => {
            first.is_ascii_alphanumeric()
                && last.is_ascii_alphanumeric()
                && bytes
                    .iter()
                    .all(|&b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_' || b == b'.')
        }
        _ => false,
    }
}

/// Problems of `value` as a qualified name (none when valid).
pub fn qualified_name_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let parts: Vec<&str> = value.split('/').collect();
    let name = match parts.as_slice() {
        [name] => *name,
        [prefix, name] => {
            if prefix.is_empty() {
                problems.push("prefix part must be non-empty".to_owned());
            } else {
                // `content.IsDNS1123Subdomain`: its length in bytes.
                if prefix.len() > MAX_SUBDOMAIN_LEN {
                    problems.push(format!("prefix part {}", max_bytes_msg(MAX_SUBDOMAIN_LEN)));
                }
                if !is_subdomain_shape(prefix) {
                    problems.push(format!("prefix part {DNS1123_SUBDOMAIN_MSG}"));
                }
            }
            *name
        }
        _ => {
            problems.push(
                "a valid label key must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
                    .to_owned(),
            );
            return problems;
        }
    };
    if name.is_empty() {
        problems.push("name part must be non-empty".to_owned());
    } else if name.len() > MAX_QUALIFIED_NAME_LEN {
        problems.push(format!(
            "name part {}",
            max_bytes_msg(MAX_QUALIFIED_NAME_LEN)
        ));
    }
    if !is_qualified_name_part(name) {
        problems.push(QUALIFIED_NAME_MSG.to_owned());
    }
    problems
}

/// A qualified name (`IsQualifiedName`): `[prefix/]name`, the prefix a DNS-1123 subdomain, the
/// name 1-63 of `[A-Za-z0-9-_.]` starting and ending alphanumeric.
pub fn qualified_name(value: &str) -> Result<(), Invalid> {
    Invalid::check(Rule::QualifiedName, value, qualified_name_problems(value))
}

/// Problems of `value` as an IANA service name (none when valid).
pub fn iana_service_name_problems(value: &str) -> Vec<String> {
    let mut problems = Vec::new();
    if value.len() > 15 {
        problems.push(max_len_msg(15));
    }
    if value.is_empty()
        || !value
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
    {
        problems.push(
            "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)".to_owned(),
        );
    }
    if !value.bytes().any(|b| b.is_ascii_lowercase()) {
        problems.push("must contain at least one letter (a-z)".to_owned());
    }
    if value.contains("--") {
        problems.push("must not contain consecutive hyphens".to_owned());
    }
    if value.starts_with('-') || value.ends_with('-') {
        problems.push("must not begin or end with a hyphen".to_owned());
    }
    problems
}

/// An IANA service name (`IsValidPortName`): a port's name where a number could stand
/// (`targetPort: metrics`).
pub fn iana_service_name(value: &str) -> Result<(), Invalid> {
    Invalid::check(
        Rule::IanaServiceName,
        value,
        iana_service_name_problems(value),
    )
}

/// The rule that an object's `metadata.name` follows, by API group and kind, as the API server
/// validates it: Services and Namespaces are DNS-1123 labels, everything else we know
/// (ConfigMaps, Secrets, Deployments, EndpointSlices, Leases, Events, custom resources)
/// DNS-1123 subdomains. RBAC objects are held to DNS-1123 subdomains too, stricter than the
/// server (which takes any path segment, such as `system:controller:x`).
///
/// Service names follow Kubernetes 1.37 (`RelaxedServiceNameValidation`, on by default since
/// 1.36): a name that starts with a digit (`0web`) is accepted. Kubernetes 1.35 still holds
/// them to DNS-1035 labels ([`dns1035_label`]), as the MCS API holds the names it exports:
/// code that must run on both takes a DNS-1035 label.
pub fn object_name_rule(group: &str, kind: &str) -> Rule {
    match (group, kind) {
        ("", "Service") | ("", "Namespace") => Rule::Dns1123Label,
        _ => Rule::Dns1123Subdomain,
    }
}

/// Problems of `name` as the name of an object of `kind` in `group` (none when valid).
pub fn object_name_problems(group: &str, kind: &str, name: &str) -> Vec<String> {
    match object_name_rule(group, kind) {
        Rule::Dns1123Label => dns1123_label_problems(name),
        _ => dns1123_subdomain_problems(name),
    }
}

/// Checks `name` as the name of an object of `kind` in `group` (`""` for the core group).
pub fn object_name(group: &str, kind: &str, name: &str) -> Result<(), Invalid> {
    Invalid::check(
        object_name_rule(group, kind),
        name,
        object_name_problems(group, kind, name),
    )
}

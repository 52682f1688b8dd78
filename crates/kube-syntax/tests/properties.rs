//! Properties of the rules over generated values: what the grammars generate is accepted, the
//! rules nest as upstream's do (DNS-1035 ⊂ DNS-1123 label ⊂ subdomain and label value), and
//! selectors built from valid parts parse, round-trip and match the labels built for them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::BTreeMap;

use kube_syntax::labels::{label_key, label_value};
use kube_syntax::names::{
    dns1035_label, dns1123_label, dns1123_subdomain, iana_service_name, qualified_name,
};
use kube_syntax::selector::{FieldSelector, LabelSelector, Operator};
use proptest::prelude::*;

/// `(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?`, at most 63.
fn valid_label_value() -> impl Strategy<Value = String> {
    prop_oneof![
        Just(String::new()),
        "[A-Za-z0-9]",
        "[A-Za-z0-9][-A-Za-z0-9_.]{0,61}[A-Za-z0-9]",
    ]
}

/// `[a-z0-9]([-a-z0-9]*[a-z0-9])?`, at most 63.
fn valid_dns1123_label() -> impl Strategy<Value = String> {
    prop_oneof!["[a-z0-9]", "[a-z0-9][-a-z0-9]{0,61}[a-z0-9]"]
}

/// Up to four DNS-1123 labels of up to 20 characters, joined with dots.
fn valid_subdomain() -> impl Strategy<Value = String> {
    prop::collection::vec(
        prop_oneof!["[a-z0-9]", "[a-z0-9][-a-z0-9]{0,18}[a-z0-9]"],
        1..5,
    )
    .prop_map(|labels| labels.join("."))
}

/// A label key: an optional subdomain prefix, then a name part of up to 63.
fn valid_label_key() -> impl Strategy<Value = String> {
    let name = prop_oneof!["[A-Za-z0-9]", "[A-Za-z0-9][-A-Za-z0-9_.]{0,61}[A-Za-z0-9]"];
    (prop::option::of(valid_subdomain()), name).prop_map(|(prefix, name)| match prefix {
        Some(prefix) => format!("{prefix}/{name}"),
        None => name,
    })
}

/// A requirement of a selector, and a value that satisfies it where one is needed.
#[derive(Debug, Clone)]
enum Term {
    Equals(String, String),
    NotEquals(String, String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
    Exists(String),
    DoesNotExist(String),
    Greater(String, i32),
    Less(String, i32),
}

impl Term {
    fn key(&self) -> &str {
        match self {
            Term::Equals(k, _)
            | Term::NotEquals(k, _)
            | Term::In(k, _)
            | Term::NotIn(k, _)
            | Term::Exists(k)
            | Term::DoesNotExist(k)
            | Term::Greater(k, _)
            | Term::Less(k, _) => k,
        }
    }

    /// The text, with some white space.
    fn text(&self, spaced: bool) -> String {
        let s = if spaced { " " } else { "" };
        match self {
            Term::Equals(k, v) => format!("{k}{s}={s}{v}"),
            Term::NotEquals(k, v) => format!("{k}{s}!={s}{v}"),
            Term::In(k, vs) => format!("{k} in{s}({s}{}{s})", vs.join(",")),
            Term::NotIn(k, vs) => format!("{k} notin{s}({}){s}", vs.join(",")),
            Term::Exists(k) => format!("{s}{k}{s}"),
            Term::DoesNotExist(k) => format!("!{s}{k}"),
            Term::Greater(k, n) => format!("{k}{s}>{s}{n}"),
            Term::Less(k, n) => format!("{k}<{n}"),
        }
    }

    /// What the label of this key must hold to satisfy the term (`None`: absent).
    fn satisfying(&self) -> Option<String> {
        match self {
            Term::Equals(_, v) => Some(v.clone()),
            Term::NotEquals(_, v) => Some(format!("{v}x")),
            Term::In(_, vs) => Some(vs[0].clone()),
            // Longer than each of the values: none of them.
            Term::NotIn(_, vs) => Some(format!("{}x", vs.concat())),
            Term::Exists(_) => Some(String::new()),
            Term::DoesNotExist(_) => None,
            Term::Greater(_, n) => Some((i64::from(*n) + 1).to_string()),
            Term::Less(_, n) => Some((i64::from(*n) - 1).to_string()),
        }
    }
}

fn term() -> impl Strategy<Value = Term> {
    let key = valid_label_key;
    // Empty values in a set are their own cases (`(a,,)` is refused, `(a,,b)` is not: see
    // tests/selector.rs); here the sets hold non-empty values.
    let values = || {
        prop::collection::vec(
            valid_label_value().prop_filter("a non-empty value", |v| !v.is_empty()),
            1..4,
        )
    };
    prop_oneof![
        (key(), valid_label_value()).prop_map(|(k, v)| Term::Equals(k, v)),
        (key(), valid_label_value()).prop_map(|(k, v)| Term::NotEquals(k, v)),
        (key(), values()).prop_map(|(k, vs)| Term::In(k, vs)),
        (key(), values()).prop_map(|(k, vs)| Term::NotIn(k, vs)),
        key().prop_map(Term::Exists),
        key().prop_map(Term::DoesNotExist),
        // Non-negative: a leading '-' is no label value.
        (key(), 0..i32::MAX).prop_map(|(k, n)| Term::Greater(k, n)),
        (key(), 1..i32::MAX).prop_map(|(k, n)| Term::Less(k, n)),
    ]
}

/// Terms with distinct keys (so that labels can satisfy all of them).
fn terms() -> impl Strategy<Value = Vec<Term>> {
    prop::collection::vec(term(), 0..6).prop_map(|terms| {
        let mut seen = std::collections::BTreeSet::new();
        terms
            .into_iter()
            .filter(|t| seen.insert(t.key().to_owned()))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn generated_label_values_pass(value in valid_label_value()) {
        prop_assert!(value.len() <= 63);
        prop_assert!(label_value(&value).is_ok(), "{value:?}");
    }

    #[test]
    fn any_string_with_a_slash_is_no_label_value(before in ".{0,40}", after in ".{0,40}") {
        let value = format!("{before}/{after}");
        prop_assert!(label_value(&value).is_err(), "{value:?}");
    }

    #[test]
    fn label_values_over_63_are_refused(value in "[a-z]{64,100}") {
        let error = label_value(&value).unwrap_err();
        prop_assert_eq!(&error.problems, &["must be no more than 63 bytes".to_owned()]);
    }

    #[test]
    fn dns1123_labels_are_subdomains_label_values_and_keys(label in valid_dns1123_label()) {
        prop_assert!(dns1123_label(&label).is_ok(), "{label:?}");
        prop_assert!(dns1123_subdomain(&label).is_ok(), "{label:?}");
        prop_assert!(label_value(&label).is_ok(), "{label:?}");
        prop_assert!(label_key(&label).is_ok(), "{label:?}");
        prop_assert!(qualified_name(&format!("{label}/{label}")).is_ok(), "{label:?}");
    }

    #[test]
    fn dns1035_is_within_dns1123_label(value in "[-a-z0-9A-Z_.]{0,70}") {
        if dns1035_label(&value).is_ok() {
            prop_assert!(dns1123_label(&value).is_ok(), "{value:?}");
            prop_assert!(value.starts_with(|c: char| c.is_ascii_lowercase()));
        }
        if dns1123_label(&value).is_ok() {
            prop_assert!(dns1123_subdomain(&value).is_ok(), "{value:?}");
            prop_assert!(label_value(&value).is_ok(), "{value:?}");
            let starts_with_letter = value.starts_with(|c: char| c.is_ascii_lowercase());
            prop_assert_eq!(dns1035_label(&value).is_ok(), starts_with_letter, "{:?}", value);
        }
    }

    #[test]
    fn a_dns1123_label_with_a_leading_letter_is_dns1035(
        first in "[a-z]",
        rest in prop_oneof![Just(String::new()), "[-a-z0-9]{0,61}[a-z0-9]"],
    ) {
        let value = format!("{first}{rest}");
        prop_assert!(dns1035_label(&value).is_ok(), "{value:?}");
    }

    #[test]
    fn generated_subdomains_and_keys_pass(subdomain in valid_subdomain(), key in valid_label_key()) {
        prop_assert!(dns1123_subdomain(&subdomain).is_ok(), "{subdomain:?}");
        prop_assert!(label_key(&key).is_ok(), "{key:?}");
        // Uppercase in the prefix is refused, in the name it is fine.
        if let Some((prefix, name)) = key.split_once('/') {
            let upper_name = format!("{prefix}/{}", name.to_ascii_uppercase());
            prop_assert!(label_key(&upper_name).is_ok(), "{upper_name:?}");
            if prefix.chars().any(|c| c.is_ascii_lowercase()) {
                let upper_prefix = format!("{}/{name}", prefix.to_ascii_uppercase());
                prop_assert!(label_key(&upper_prefix).is_err(), "{upper_prefix:?}");
            }
        }
    }

    #[test]
    fn more_than_one_slash_is_no_key(a in "[a-z]{1,5}", b in "[a-z]{1,5}", c in "[a-z]{1,5}") {
        let key = format!("{a}/{b}/{c}");
        prop_assert!(label_key(&key).is_err());
    }

    #[test]
    fn port_names_with_a_letter_and_single_hyphens_pass(
        parts in prop::collection::vec("[a-z0-9]{1,3}", 1..4),
        letter in "[a-z]",
    ) {
        let name = format!("{letter}{}", parts.join("-"));
        if name.len() <= 15 {
            prop_assert!(iana_service_name(&name).is_ok(), "{name:?}");
        } else {
            prop_assert!(iana_service_name(&name).is_err(), "{name:?}");
        }
    }

    #[test]
    fn selectors_of_valid_parts_parse_and_match_their_labels(
        terms in terms(),
        spaced in any::<bool>(),
        extra in prop::collection::btree_map(valid_label_key(), valid_label_value(), 0..3),
    ) {
        let text = terms.iter().map(|t| t.text(spaced)).collect::<Vec<_>>().join(",");
        let selector = LabelSelector::parse(&text)
            .map_err(|e| TestCaseError::fail(format!("{text:?}: {e}")))?;
        prop_assert_eq!(selector.requirements().len(), terms.len());
        for (term, requirement) in terms.iter().zip(selector.requirements()) {
            prop_assert_eq!(requirement.key.as_str(), term.key());
            let operator = match term {
                Term::Equals(..) => Operator::Equals,
                Term::NotEquals(..) => Operator::NotEquals,
                Term::In(..) => Operator::In,
                Term::NotIn(..) => Operator::NotIn,
                Term::Exists(_) => Operator::Exists,
                Term::DoesNotExist(_) => Operator::DoesNotExist,
                Term::Greater(..) => Operator::GreaterThan,
                Term::Less(..) => Operator::LessThan,
            };
            prop_assert_eq!(requirement.operator, operator);
        }

        // Round trip through the display.
        let shown = selector.to_string();
        let again = LabelSelector::parse(&shown)
            .map_err(|e| TestCaseError::fail(format!("{shown:?}: {e}")))?;
        prop_assert_eq!(&again, &selector);

        // Labels built to satisfy every term match, with unrelated labels beside them.
        let mut labels: BTreeMap<String, String> = extra
            .into_iter()
            .filter(|(k, _)| terms.iter().all(|t| t.key() != k))
            .collect();
        let mut satisfiable = true;
        for term in &terms {
            match (term, term.satisfying()) {
                (Term::DoesNotExist(_), _) => {}
                (_, Some(value)) => {
                    labels.insert(term.key().to_owned(), value);
                }
                (_, None) => satisfiable = false,
            }
        }
        if satisfiable {
            prop_assert!(selector.matches(&labels), "{text:?} on {labels:?}");
        }
        // Every term with a required key fails when that key goes.
        for term in &terms {
            let needs_key = matches!(
                term,
                Term::Equals(..) | Term::In(..) | Term::Exists(_) | Term::Greater(..) | Term::Less(..)
            );
            if needs_key && satisfiable {
                let mut without = labels.clone();
                without.remove(term.key());
                prop_assert!(!selector.matches(&without), "{text:?} on {without:?}");
            }
        }
    }

    #[test]
    fn selector_parsing_never_panics(text in ".{0,60}") {
        let _ = LabelSelector::parse(&text);
        let _ = FieldSelector::parse(&text);
    }

    #[test]
    fn field_selector_escapes_round_trip(value in "[-a-z0-9=,\\\\!. ]{0,20}") {
        let escaped: String = value
            .chars()
            .flat_map(|c| match c {
                '\\' | ',' | '=' => vec!['\\', c],
                c => vec![c],
            })
            .collect();
        let selector = FieldSelector::parse(&format!("metadata.name={escaped}"))
            .map_err(|e| TestCaseError::fail(format!("{escaped:?}: {e}")))?;
        prop_assert_eq!(selector.requirements().len(), 1);
        prop_assert_eq!(&selector.requirements()[0].value, &value);
    }
}

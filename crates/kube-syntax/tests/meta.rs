//! Field managers (`ValidatePatchOptions`, `ValidateFieldManager`) and `metav1.Condition`
//! fields (`ValidateCondition`, and the 316-character type of the CRD schema).
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kube_syntax::meta::{
    MAX_CONDITION_REASON_LEN, MAX_CONDITION_TYPE_LEN, MAX_FIELD_MANAGER_LEN, condition_errors,
    condition_reason, condition_type, field_manager, field_manager_errors,
};
use kube_syntax::{ErrorKind, Rule};
use serde_json::json;

#[test]
fn field_manager_length_limit_is_128() {
    assert_eq!(MAX_FIELD_MANAGER_LEN, 128);
    for apply in [false, true] {
        assert!(field_manager(&"m".repeat(128), apply).is_ok());
        let error = field_manager(&"m".repeat(129), apply).unwrap_err();
        assert_eq!(error.rule, Rule::FieldManager);
        assert_eq!(error.problems, ["may not be more than 128 bytes"]);
    }
    // Bytes, not characters: 64 two-byte characters fit, 65 do not.
    assert!(field_manager(&"é".repeat(64), false).is_ok());
    assert!(field_manager(&"é".repeat(65), false).is_err());
}

#[test]
fn field_manager_empty_is_refused_for_apply_only() {
    assert!(field_manager("", false).is_ok());
    assert_eq!(
        field_manager("", true).unwrap_err().problems,
        ["is required for apply patch"]
    );
    for manager in [
        "clusterset-agent",
        "kubectl-client-side-apply",
        "a b",
        "x/y:z",
    ] {
        assert!(field_manager(manager, true).is_ok(), "{manager:?}");
    }
}

#[test]
fn field_manager_refuses_characters_that_are_not_printable() {
    for manager in [
        "a\u{7}b",
        "tab\there",
        "new\nline",
        "nul\0",
        "\u{200b}zero-width",
    ] {
        assert!(field_manager(manager, false).is_err(), "{manager:?}");
    }
    assert_eq!(
        field_manager("ab\u{7}", false).unwrap_err().problems,
        ["invalid character U+0007 (at position 2)"]
    );
    // Positions are byte offsets, one problem per character.
    assert_eq!(
        field_manager("é\n\t", false).unwrap_err().problems,
        [
            "invalid character U+000A (at position 2)",
            "invalid character U+0009 (at position 3)"
        ]
    );
}

#[test]
fn field_manager_errors_are_the_api_server_field_errors() {
    assert!(field_manager_errors("fieldManager", "agent", true).is_empty());
    let required = field_manager_errors("fieldManager", "", true);
    assert_eq!(required.len(), 1);
    assert_eq!(
        required[0].to_string(),
        "fieldManager: Required value: is required for apply patch"
    );
    assert!(field_manager_errors("fieldManager", "", false).is_empty());
    let long = field_manager_errors("fieldManager", &"m".repeat(129), false);
    assert_eq!(
        long[0].to_string(),
        "fieldManager: Too long: may not be more than 128 bytes"
    );
    let control = field_manager_errors("fieldManager", "a\u{1b}", false);
    assert_eq!(
        control[0].to_string(),
        // The value quoted as Go's %q quotes it.
        "fieldManager: Invalid value: \"a\\x1b\": invalid character U+001B (at position 1)"
    );
}

#[test]
fn condition_type_is_a_qualified_name_of_at_most_316() {
    assert_eq!(MAX_CONDITION_TYPE_LEN, 316);
    for value in ["Ready", "Available", "example.com/Synced", "a_b.c-d"] {
        assert!(condition_type(value).is_ok(), "{value:?}");
    }
    // 252 + '/' + 63 = 316: the longest.
    let prefix = format!(
        "{}.{}.{}.{}",
        "a".repeat(63),
        "b".repeat(63),
        "c".repeat(63),
        "d".repeat(60)
    );
    assert_eq!(prefix.len(), 252);
    let longest = format!("{prefix}/{}", "N".repeat(63));
    assert_eq!(longest.len(), 316);
    assert!(condition_type(&longest).is_ok());
    // 253 + '/' + 63 = 317: a good qualified name, but over 316.
    let over = format!("{prefix}d/{}", "N".repeat(63));
    assert_eq!(over.len(), 317);
    let error = condition_type(&over).unwrap_err();
    assert_eq!(error.rule, Rule::ConditionType);
    assert_eq!(error.problems, ["must be no more than 316 characters"]);

    for value in ["", "Not Ready", "-Ready", "a/b/c", "/Ready"] {
        assert!(condition_type(value).is_err(), "{value:?}");
    }
}

#[test]
fn condition_reason_pattern_and_limit() {
    assert_eq!(MAX_CONDITION_REASON_LEN, 1024);
    for value in [
        "A",
        "Ready",
        "my_name",
        "MY_NAME",
        "MyName",
        "ReasonA,ReasonB",
        "ReasonA:ReasonB",
        "ends_",
        "a1",
        "ConflictingType,ConflictingPorts",
    ] {
        assert!(condition_reason(value).is_ok(), "{value:?}");
    }
    for value in [
        "",
        "1Reason",
        "_a",
        "Not Ready",
        "a-b",
        "a.b",
        "Reason,",
        "Reason:",
        "a/b",
        "é",
    ] {
        let error = condition_reason(value).unwrap_err();
        assert_eq!(error.rule, Rule::ConditionReason, "{value:?}");
        assert!(
            error.problems[0].ends_with(
                "regex used for validation is '[A-Za-z]([A-Za-z0-9_,:]*[A-Za-z0-9_])?')"
            ),
            "{value:?}: {:?}",
            error.problems
        );
    }
    assert!(condition_reason(&"R".repeat(1024)).is_ok());
    assert_eq!(
        condition_reason(&"R".repeat(1025)).unwrap_err().problems,
        ["must be no more than 1024 characters"]
    );
}

fn good_condition() -> serde_json::Value {
    json!({
        "type": "Ready",
        "status": "True",
        "observedGeneration": 3,
        "lastTransitionTime": "2024-05-01T10:00:00Z",
        "reason": "AllGood",
        "message": "everything is fine",
    })
}

#[test]
fn a_good_condition_has_no_errors() {
    assert!(condition_errors("status.conditions[0]", &good_condition()).is_empty());
    for status in ["True", "False", "Unknown"] {
        let mut condition = good_condition();
        condition["status"] = json!(status);
        assert!(condition_errors("c", &condition).is_empty(), "{status}");
    }
    let mut no_message = good_condition();
    no_message.as_object_mut().unwrap().remove("message");
    no_message
        .as_object_mut()
        .unwrap()
        .remove("observedGeneration");
    assert!(condition_errors("c", &no_message).is_empty());
}

#[test]
fn bad_conditions_are_refused_field_by_field() {
    let field = "status.conditions[1]";
    let shown = |condition: serde_json::Value| -> Vec<String> {
        condition_errors(field, &condition)
            .iter()
            .map(ToString::to_string)
            .collect()
    };

    let mut missing_time = good_condition();
    missing_time
        .as_object_mut()
        .unwrap()
        .remove("lastTransitionTime");
    assert_eq!(
        shown(missing_time),
        ["status.conditions[1].lastTransitionTime: Required value"]
    );

    let mut maybe = good_condition();
    maybe["status"] = json!("Maybe");
    assert_eq!(
        shown(maybe),
        [
            "status.conditions[1].status: Unsupported value: \"Maybe\": supported values: \"False\", \"True\", \"Unknown\""
        ]
    );

    let mut negative = good_condition();
    negative["observedGeneration"] = json!(-1);
    assert_eq!(
        shown(negative),
        [
            "status.conditions[1].observedGeneration: Invalid value: -1: must be greater than or equal to zero"
        ]
    );

    let mut bad_reason = good_condition();
    bad_reason["reason"] = json!("Not Ready");
    let errors = condition_errors(field, &bad_reason);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].field, "status.conditions[1].reason");
    assert_eq!(
        errors[0].kind,
        ErrorKind::Invalid("\"Not Ready\"".to_owned())
    );

    let mut long_reason = good_condition();
    long_reason["reason"] = json!("R".repeat(1025));
    assert_eq!(
        shown(long_reason),
        ["status.conditions[1].reason: Too long: may not be more than 1024 bytes"]
    );

    let mut long_message = good_condition();
    long_message["message"] = json!("m".repeat(32769));
    assert_eq!(
        shown(long_message),
        ["status.conditions[1].message: Too long: may not be more than 32768 bytes"]
    );
    let mut longest_message = good_condition();
    longest_message["message"] = json!("m".repeat(32768));
    assert!(condition_errors(field, &longest_message).is_empty());

    let mut bad_type = good_condition();
    bad_type["type"] = json!("Not Ready");
    let errors = condition_errors(field, &bad_type);
    assert_eq!(errors.len(), 1);
    assert_eq!(errors[0].field, "status.conditions[1].type");

    // Everything missing: every required field, in upstream's order.
    assert_eq!(
        shown(json!({})),
        [
            "status.conditions[1].type: Required value: is required",
            "status.conditions[1].status: Required value",
            "status.conditions[1].lastTransitionTime: Required value",
            "status.conditions[1].reason: Required value",
        ]
    );
    // Empty strings are missing too.
    assert_eq!(
        condition_errors(
            field,
            &json!({"type": "", "status": "", "lastTransitionTime": "", "reason": ""})
        )
        .len(),
        4
    );
}

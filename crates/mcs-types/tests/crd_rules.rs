//! Every CRD the crate generates passes the API server's CRD rules (kube-syntax): names,
//! structural schemas, and the approval annotation of protected groups. A real API server
//! refused `clusterproperties.about.k8s.io` without that annotation; this test is the rule.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use kube_syntax::crd::{APPROVAL_ANNOTATION, crd_errors, is_protected_group};

fn all_crds() -> Vec<serde_json::Value> {
    mcs_types::crd::mcs_crds()
        .unwrap()
        .into_iter()
        .chain(mcs_types::crd::about_crds().unwrap())
        .map(|crd| serde_json::to_value(crd).unwrap())
        .collect()
}

#[test]
fn every_generated_crd_is_accepted_by_the_api_server_rules() {
    for crd in all_crds() {
        let errors = crd_errors(&crd);
        assert!(
            errors.is_empty(),
            "{} would be refused: {errors:#?}",
            crd["metadata"]["name"]
        );
    }
}

#[test]
fn crds_of_protected_groups_carry_the_approval_annotation_and_others_do_not() {
    let mut protected = 0;
    for crd in all_crds() {
        let group = crd["spec"]["group"].as_str().unwrap();
        let annotation = crd["metadata"]["annotations"][APPROVAL_ANNOTATION].as_str();
        if is_protected_group(group) {
            protected += 1;
            assert!(
                annotation.is_some_and(|url| url.starts_with("https://")),
                "{group}: {annotation:?}"
            );
        } else {
            assert_eq!(annotation, None, "{group} is not protected");
        }
    }
    assert_eq!(protected, 1, "about.k8s.io is the one protected group");
}

#[test]
fn without_the_annotation_the_about_crd_is_refused_as_a_real_server_refuses_it() {
    let mut crd = serde_json::to_value(mcs_types::crd::cluster_property_crd().unwrap()).unwrap();
    crd["metadata"]
        .as_object_mut()
        .unwrap()
        .remove("annotations");
    let errors = crd_errors(&crd);
    assert_eq!(errors.len(), 1, "{errors:#?}");
    assert_eq!(
        errors[0].to_string(),
        "metadata.annotations[api-approved.kubernetes.io]: Required value: protected groups must \
         have approval annotation \"api-approved.kubernetes.io\", see \
         https://github.com/kubernetes/enhancements/pull/1111"
    );
}

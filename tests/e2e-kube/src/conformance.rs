//! The upstream MCS conformance suite (`sigs.k8s.io/mcs-api/conformance`, its test binary built
//! by `tests/k8s-tools/build.sh` as `mcs-conformance.test`) run against the two clusters of a
//! [`World`] with its agents: every spec passes except the ones that need traffic between pods
//! ([`NEEDS_POD_TRAFFIC`]), which ginkgo is told to skip, and which must be exactly the ones it
//! skipped.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::Instant;

use anyhow::{Context, bail};

use crate::World;
use crate::local::Tools;

/// The specs that run a command (`nslookup`, `dig`, `nc`) in a pod through `exec`, which needs
/// a kubelet and a pod network: the suite's own clusters have kwok's nodes, which run no
/// container. Each is (its text, as ginkgo reports it, up to the leaf; why it needs traffic).
pub const NEEDS_POD_TRAFFIC: [(&str, &str); 6] = [
    (
        "Connectivity to a service that is not exported should be inaccessible",
        "execs `nc` in a pod of each cluster against the service's pod IP",
    ),
    (
        "Connectivity to an exported ClusterIP service should be accessible through DNS",
        "execs a request in a pod to the clusterset name",
    ),
    (
        "Connectivity to a ClusterIP service existing in two clusters but exported from one \
         should only access the exporting cluster",
        "execs requests in a pod to the clusterset name",
    ),
    (
        "A DNS lookup of the <service>.<ns>.svc.clusterset.local domain for a ClusterIP service \
         should resolve to the clusterset IP",
        "execs `nslookup` in a pod against the cluster's DNS",
    ),
    (
        "A DNS SRV query of the <service>.<ns>.svc.clusterset.local domain for a ClusterIP \
         service should return valid SRV records",
        "execs `dig SRV` in a pod against the cluster's DNS",
    ),
    (
        "DNS lookups of the <service>.<ns>.svc.cluster.local domain for a ClusterIP service \
         should only resolve local services",
        "execs `nslookup` in a pod against the cluster's DNS",
    ),
];

/// The specs that fail by a bug of the suite at the commit the module proxy serves (62ede9a),
/// fixed upstream by commit 6d94ce4 ("conformance: fix annotations/labels tests"): they expect
/// the ServiceExport's own metadata annotation (`dummy-svcexport: dummy`) on the ServiceImport
/// (their failure says so, in gomega's words),
/// where KEP-1645 propagates only `spec.exportedAnnotations` and `spec.exportedLabels` (which
/// the failure shows the import has). Each is (its text, what its failure must say): a failure
/// for any other reason is a problem.
pub const SUITE_BUGS: [(&str, &str); 2] = [
    (
        "Only labels and annotations specified as exported in the ServiceExport should be \
         propagated to the ServiceImport",
        "<string>\"dummy-svcexport\": <string>\"dummy\"",
    ),
    (
        "A service exported on two clusters with conflicting annotations and labels should apply \
         the conflict resolution policy and report a Conflict condition on each ServiceExport",
        "<string>\"dummy-svcexport\": <string>\"dummy\"",
    ),
];

/// ginkgo's selection of the specs that run: the DNS and Connectivity labels are the specs of
/// [`NEEDS_POD_TRAFFIC`] but one, which has neither label and is skipped by its text.
const LABEL_FILTER: &str = "!DNS && !Connectivity";
const SKIP: &str = "should be inaccessible";

/// One spec's outcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Spec {
    /// Its full text (containers, then the leaf).
    pub text: String,
    /// Its labels.
    pub labels: Vec<String>,
    /// `passed`, `failed`, `skipped`, ...
    pub state: String,
    /// The failure's message, if it failed.
    pub failure: String,
}

/// Runs the suite against `world`'s clusters; every spec's outcome.
pub async fn run(world: &World) -> anyhow::Result<Vec<Spec>> {
    let tools = Tools::find(&["mcs-conformance"])?;
    let binary = tools.binary("mcs-conformance", "mcs-conformance.test");
    let dir = world.dir.path();
    let kubeconfig = dir.join("conformance.kubeconfig");
    let merged = world
        .east
        .kubeconfig()
        .clone()
        .merge(world.west.kubeconfig().clone())
        .context("cannot merge the clusters' kubeconfigs")?;
    std::fs::write(&kubeconfig, serde_json::to_vec_pretty(&merged)?)?;
    let report = dir.join("conformance.json");
    let started = Instant::now();
    let output = tokio::process::Command::new(&binary)
        .arg(format!("-kubeconfig={}", kubeconfig.display()))
        .arg(format!(
            "-contexts={},{}",
            world.east.context, world.west.context
        ))
        .arg(format!("-ginkgo.label-filter={LABEL_FILTER}"))
        .arg(format!("-ginkgo.skip={SKIP}"))
        .arg(format!("-ginkgo.json-report={}", report.display()))
        .arg("-ginkgo.no-color")
        .arg("-test.timeout=20m")
        .current_dir(dir)
        .kill_on_drop(true)
        .output()
        .await
        .with_context(|| format!("cannot run {}", binary.display()))?;
    let specs = read_report(&report).with_context(|| {
        format!(
            "the suite wrote no report ({}); its output:\n{}{}",
            output.status,
            String::from_utf8_lossy(&output.stdout),
            String::from_utf8_lossy(&output.stderr)
        )
    })?;
    println!(
        "MCS conformance suite on {}: {} in {:.1?}",
        world.target,
        output.status,
        started.elapsed()
    );
    for spec in &specs {
        println!(
            "  {:<8} [{}] {}",
            spec.state,
            spec.labels.join(", "),
            spec.text
        );
        if !spec.failure.is_empty() {
            println!("           {}", spec.failure.replace('\n', "\n           "));
        }
    }
    Ok(specs)
}

/// The specs of ginkgo's JSON report (`-ginkgo.json-report`): `[{"SpecReports": [...]}]`.
fn read_report(path: &Path) -> anyhow::Result<Vec<Spec>> {
    let text = std::fs::read_to_string(path)?;
    let suites: Vec<serde_json::Value> = serde_json::from_str(&text)?;
    let mut specs = Vec::new();
    for report in suites
        .iter()
        .filter_map(|s| s["SpecReports"].as_array())
        .flatten()
        // The suite's set-up and tear-down nodes are reported as specs without a leaf text.
        .filter(|r| r["LeafNodeType"] == "It")
    {
        let texts = |key: &str| -> Vec<String> {
            report[key]
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|t| t.as_str())
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
                .collect()
        };
        let mut text = texts("ContainerHierarchyTexts");
        text.push(report["LeafNodeText"].as_str().unwrap_or("").to_owned());
        let mut labels: BTreeSet<String> = texts("LeafNodeLabels").into_iter().collect();
        for container in report["ContainerHierarchyLabels"]
            .as_array()
            .into_iter()
            .flatten()
        {
            labels.extend(
                container
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(|l| l.as_str())
                    .map(str::to_owned),
            );
        }
        specs.push(Spec {
            text: text.join(" "),
            labels: labels.into_iter().collect(),
            state: report["State"].as_str().unwrap_or("unknown").to_owned(),
            failure: report["Failure"]["Message"]
                .as_str()
                .unwrap_or("")
                .to_owned(),
        });
    }
    Ok(specs)
}

/// Fails unless every spec passed but those of [`NEEDS_POD_TRAFFIC`], which must all have been
/// skipped (a spec skipped that is not listed, or listed and not skipped, is an error too), and
/// those of [`SUITE_BUGS`], which must have failed for that bug and no other reason.
pub fn check(specs: &[Spec]) -> anyhow::Result<()> {
    let skipped: BTreeSet<&str> = specs
        .iter()
        .filter(|s| s.state == "skipped")
        .map(|s| s.text.as_str())
        .collect();
    let listed: BTreeSet<&str> = NEEDS_POD_TRAFFIC.iter().map(|(text, _)| *text).collect();
    let mut problems = Vec::new();
    for spec in specs
        .iter()
        .filter(|s| s.state != "passed" && s.state != "skipped")
    {
        let suite_bug = SUITE_BUGS
            .iter()
            .any(|(text, says)| spec.text == *text && spec.failure.contains(says));
        if !suite_bug {
            problems.push(format!("{}: {}\n  {}", spec.state, spec.text, spec.failure));
        }
    }
    for (text, says) in SUITE_BUGS {
        if !specs.iter().any(|s| s.text == text && s.state == "failed") {
            problems.push(format!(
                "expected to fail by the suite's own bug (its failure saying {says}), but did \
                 not: {text} (a newer suite, or the agent propagating the ServiceExport's own \
                 annotations)"
            ));
        }
    }
    for text in skipped.difference(&listed) {
        problems.push(format!(
            "skipped, but not listed as needing pod traffic: {text}"
        ));
    }
    for text in listed.difference(&skipped) {
        problems.push(format!(
            "listed as needing pod traffic, but not skipped: {text}"
        ));
    }
    if !specs.iter().any(|s| s.state == "passed") {
        problems.push("no spec passed".to_owned());
    }
    if !problems.is_empty() {
        bail!(
            "the MCS conformance suite found {} problem(s):\n{}",
            problems.len(),
            problems.join("\n")
        );
    }
    Ok(())
}

/// The scenario: the suite passes on `world` (the skipped specs are exactly the listed ones).
pub async fn upstream_mcs_conformance(world: &mut World) -> anyhow::Result<()> {
    let specs = run(world).await?;
    let passed = specs.iter().filter(|s| s.state == "passed").count();
    println!(
        "MCS conformance: {passed} passed, {} skipped (need pod traffic), {} in all",
        specs.iter().filter(|s| s.state == "skipped").count(),
        specs.len()
    );
    check(&specs)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(text: &str, state: &str) -> Spec {
        Spec {
            text: text.to_owned(),
            labels: Vec::new(),
            state: state.to_owned(),
            failure: String::new(),
        }
    }

    fn all_listed_skipped() -> Vec<Spec> {
        NEEDS_POD_TRAFFIC
            .iter()
            .map(|(text, _)| spec(text, "skipped"))
            .chain(SUITE_BUGS.iter().map(|(text, says)| Spec {
                failure: format!("Expected {{{says}}}"),
                ..spec(text, "failed")
            }))
            .chain([spec("A ServiceImport should exist", "passed")])
            .collect()
    }

    #[test]
    fn passes_when_all_ran_specs_pass_and_only_the_listed_ones_are_skipped() {
        check(&all_listed_skipped()).unwrap();
    }

    #[test]
    fn a_failed_spec_fails() {
        let mut specs = all_listed_skipped();
        specs.push(spec(
            "Unexporting should delete the ServiceImport",
            "failed",
        ));
        let error = check(&specs).unwrap_err().to_string();
        assert!(error.contains("failed: Unexporting"), "{error}");
    }

    #[test]
    fn a_spec_skipped_but_not_listed_fails_and_so_does_one_listed_but_run() {
        let mut specs = all_listed_skipped();
        specs.push(spec("Something new", "skipped"));
        specs[0].state = "passed".to_owned();
        let error = check(&specs).unwrap_err().to_string();
        assert!(
            error.contains("not listed as needing pod traffic: Something new"),
            "{error}"
        );
        assert!(
            error.contains("listed as needing pod traffic, but not skipped"),
            "{error}"
        );
    }

    #[test]
    fn a_suite_bug_failing_for_another_reason_or_passing_is_a_problem() {
        let mut specs = all_listed_skipped();
        let bug = specs
            .iter_mut()
            .find(|s| s.text == SUITE_BUGS[0].0)
            .unwrap();
        bug.failure = "timed out waiting for the ServiceImport".to_owned();
        let error = check(&specs).unwrap_err().to_string();
        assert!(error.contains("timed out waiting"), "{error}");
        let mut specs = all_listed_skipped();
        let bug = specs
            .iter_mut()
            .find(|s| s.text == SUITE_BUGS[1].0)
            .unwrap();
        bug.state = "passed".to_owned();
        let error = check(&specs).unwrap_err().to_string();
        assert!(error.contains("expected to fail"), "{error}");
    }

    #[test]
    fn nothing_passed_fails() {
        let specs: Vec<Spec> = NEEDS_POD_TRAFFIC
            .iter()
            .map(|(text, _)| spec(text, "skipped"))
            .collect();
        assert!(check(&specs).is_err());
    }

    #[test]
    fn ginkgo_s_report_is_read_with_containers_labels_and_failures() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("report.json");
        std::fs::write(
            &path,
            serde_json::json!([{"SpecReports": [
                {"LeafNodeType": "SynchronizedBeforeSuite", "State": "passed"},
                {"LeafNodeType": "It", "ContainerHierarchyTexts": ["", "A ClusterIP service"],
                 "ContainerHierarchyLabels": [["ClusterIP"], []],
                 "LeafNodeText": "should work", "LeafNodeLabels": ["Required"],
                 "State": "failed", "Failure": {"Message": "boom"}},
            ]}])
            .to_string(),
        )
        .unwrap();
        let specs = read_report(&path).unwrap();
        assert_eq!(
            specs,
            vec![Spec {
                text: "A ClusterIP service should work".to_owned(),
                labels: vec!["ClusterIP".to_owned(), "Required".to_owned()],
                state: "failed".to_owned(),
                failure: "boom".to_owned(),
            }]
        );
    }
}

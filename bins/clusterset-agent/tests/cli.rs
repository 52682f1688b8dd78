#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns
//! The binary as a process: `crd` prints the broker CRD, and bad flags stop the agent before it
//! connects anywhere, with a message that names the fix.

use std::process::{Command, Output};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

fn agent(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_clusterset-agent"))
        .args(args)
        .env_clear()
        .output()
        .unwrap()
}

#[test]
fn crd_prints_the_broker_crds_as_yaml() {
    let out = agent(&["crd"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Vec<CustomResourceDefinition> =
        serde_saphyr::from_multiple(&String::from_utf8(out.stdout).unwrap()).unwrap();
    assert_eq!(printed, mcs_controller::crd::broker_crds().unwrap());
}

#[test]
fn bad_settings_fail_before_connecting_and_name_the_fix() {
    let cases: [(&[&str], &str); 4] = [
        (
            &["--cluster-id", "East", "--global-cidr", "242.1.0.0/16"],
            "invalid cluster id \"East\"",
        ),
        (
            &[
                "--cluster-id",
                "east",
                "--global-cidr",
                "242.1.0.0/16,242.2.0.0/16",
            ],
            "give at most one IPv4 and one IPv6 CIDR",
        ),
        (&["--cluster-id", "east"], "--endpoint-mode pod-addresses"),
        (
            &[
                "--cluster-id",
                "east",
                "--global-cidr",
                "242.1.0.0/16",
                "--clusterset-cidr",
                "242.1.0.0/24",
            ],
            "must be disjoint",
        ),
    ];
    for (flags, expected) in cases {
        let mut args = vec!["run", "--broker-kubeconfig", "/nonexistent/hub.kubeconfig"];
        args.extend_from_slice(flags);
        let out = agent(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

#[test]
fn a_missing_required_flag_is_a_usage_error() {
    let out = agent(&["run"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cluster-id"));
}

#[test]
fn the_committed_broker_crd_is_the_one_the_agent_prints() {
    // The text itself, so that any field, and any change of form, counts.
    kube_fake::crd::assert_committed(
        "deploy/clusterset-agent/broker-crd.yaml",
        &clusterset_agent::cli::crd_yaml().unwrap(),
        "cargo run -p clusterset-agent -- crd",
    );
}

#[test]
fn the_committed_hub_manifests_are_the_ones_the_agent_prints() {
    let out = agent(&["hub-manifests", "--cluster", "east", "--cluster", "west"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    kube_fake::crd::assert_committed(
        "deploy/clusterset-agent/hub.yaml",
        &String::from_utf8_lossy(&out.stdout),
        "cargo run -p clusterset-agent -- hub-manifests --cluster east --cluster west",
    );
}

#[test]
fn hub_manifests_refuse_bad_input_with_the_fix() {
    for (args, expected) in [
        (vec!["hub-manifests"], "--cluster"),
        (
            vec!["hub-manifests", "--cluster", "east", "--cluster", "east"],
            "cluster east is named twice",
        ),
        (
            vec!["hub-manifests", "--cluster", "East"],
            "--cluster \"East\"",
        ),
        (
            vec![
                "hub-manifests",
                "--cluster",
                "east",
                "--broker-namespace",
                "Broker",
            ],
            "namespace \"Broker\"",
        ),
    ] {
        let out = agent(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?} succeeded");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
}

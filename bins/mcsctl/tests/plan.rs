//! `mcsctl plan` prints exactly the library's plan document for a CephCluster manifest and an
//! inventory, works on Rook's own example manifest, and refuses bad input with a clear message.
#![allow(clippy::unwrap_used, clippy::expect_used)] // test helpers, not only #[test] fns

use std::path::PathBuf;
use std::process::{Command, Output};

use ceph_address_plan::manifest::{CephClusterManifest, InventoryFile};
use ceph_address_plan::{Plan, PlanInput};

fn repo(path: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

fn mcsctl(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcsctl"))
        .args(args)
        .output()
        .unwrap()
}

fn stdout_of(args: &[&str]) -> String {
    let out = mcsctl(args);
    assert!(
        out.status.success(),
        "mcsctl {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

fn stderr_of_failure(args: &[&str]) -> String {
    let out = mcsctl(args);
    assert_eq!(out.status.code(), Some(1), "mcsctl {args:?} should fail");
    String::from_utf8(out.stderr).unwrap()
}

/// The document the library makes for the examples, built without mcsctl.
fn library_document_of_the_examples() -> serde_json::Value {
    let manifest: CephClusterManifest = serde_saphyr::from_str(
        &std::fs::read_to_string(repo("examples/cephcluster.yaml")).unwrap(),
    )
    .unwrap();
    let mut cluster = manifest.settings().unwrap();
    let file: InventoryFile =
        serde_saphyr::from_str(&std::fs::read_to_string(repo("examples/inventory.yaml")).unwrap())
            .unwrap();
    let (overrides, inventory) = file.into_parts();
    overrides.apply(&mut cluster);
    let plan = Plan::new(PlanInput { cluster, inventory }).unwrap();
    serde_json::to_value(plan.document().unwrap()).unwrap()
}

#[test]
fn the_examples_plan_in_json_and_yaml_alike() {
    let cluster = repo("examples/cephcluster.yaml");
    let inventory = repo("examples/inventory.yaml");
    let args = [
        "plan",
        "--cluster",
        cluster.to_str().unwrap(),
        "--inventory",
        inventory.to_str().unwrap(),
    ];
    let json: serde_json::Value =
        serde_json::from_str(&stdout_of(&[&args[..], &["-o", "json"]].concat())).unwrap();
    assert_eq!(json, library_document_of_the_examples());
    let yaml: serde_json::Value = serde_saphyr::from_str(&stdout_of(&args)).unwrap();
    assert_eq!(yaml, json);

    // The example shows each kind of work: mons to replace, an OSD to update, one to wait for.
    assert_eq!(json["ready"], false);
    assert_eq!(json["nextMonId"], "e");
    let replaced: Vec<&str> = json["monReplacements"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["mon"].as_str().unwrap())
        .collect();
    assert_eq!(replaced, ["b", "c"]);
    assert_eq!(
        json["lookups"][0]["name"],
        "east.rook-ceph-osd-2.rook-ceph.svc.clusterset.local"
    );
    assert_eq!(
        json["reasons"][3],
        "osd.2 waits for export rook-ceph-osd-2: Ready=False (Pending): Awaiting sync of the ServiceImport to the broker"
    );
    assert_eq!(
        json["monEndpoints"]["data"],
        "b=10.96.12.11:6789,c=10.96.12.12:6789,d=242.1.0.13:6789"
    );
}

#[test]
fn rooks_example_cluster_plans_without_an_inventory() {
    let fixture = repo("tests/fixtures/upstream/rook/cluster-test.yaml");
    let json: serde_json::Value = serde_json::from_str(&stdout_of(&[
        "plan",
        "--cluster",
        fixture.to_str().unwrap(),
        "-o",
        "json",
    ]))
    .unwrap();
    // cluster-test.yaml: my-cluster in rook-ceph, one mon, MCS off, image v20.
    assert_eq!(json["cluster"]["name"], "my-cluster");
    assert_eq!(json["cluster"]["cephVersion"], "20");
    assert_eq!(json["cluster"]["multiClusterService"]["enabled"], false);
    assert_eq!(
        json["reasons"],
        serde_json::json!(["mon.a waits for Service rook-ceph-mon-a to get a cluster IP"])
    );
    assert_eq!(json["services"][0]["metadata"]["name"], "rook-ceph-mon-a");
    assert_eq!(json["serviceExports"], serde_json::json!([]));
}

#[test]
fn rejected_input_exits_1_and_says_what_to_change() {
    let dir = std::env::temp_dir().join(format!("mcsctl-plan-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let old_ceph = dir.join("old-ceph.yaml");
    std::fs::write(
        &old_ceph,
        std::fs::read_to_string(repo("examples/cephcluster.yaml"))
            .unwrap()
            .replace("v18.2.4", "v17.2.5"),
    )
    .unwrap();
    let err = stderr_of_failure(&["plan", "--cluster", old_ceph.to_str().unwrap()]);
    assert!(
        err.contains("Ceph 17.2.5 is older than 17.2.6") && err.contains("upgrade Ceph"),
        "{err}"
    );

    let typo = dir.join("typo.yaml");
    std::fs::write(&typo, "globalIps:\n  rook-ceph-osd-0: 242.1.0.20\n").unwrap();
    let cluster = repo("examples/cephcluster.yaml");
    let err = stderr_of_failure(&[
        "plan",
        "--cluster",
        cluster.to_str().unwrap(),
        "--inventory",
        typo.to_str().unwrap(),
    ]);
    assert!(
        err.contains("parsing the inventory") && err.contains("globalIps"),
        "{err}"
    );

    let no_cluster = dir.join("pool.yaml");
    std::fs::write(
        &no_cluster,
        "apiVersion: ceph.rook.io/v1\nkind: CephBlockPool\nmetadata: {name: p}\n",
    )
    .unwrap();
    let err = stderr_of_failure(&["plan", "--cluster", no_cluster.to_str().unwrap()]);
    assert!(
        err.contains("must hold exactly one CephCluster document; it holds: CephBlockPool"),
        "{err}"
    );

    let missing = dir.join("missing.yaml");
    let err = stderr_of_failure(&["plan", "--cluster", missing.to_str().unwrap()]);
    assert!(
        err.contains("reading") && err.contains("missing.yaml"),
        "{err}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn usage_errors_exit_with_2() {
    let out = mcsctl(&["plan"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--cluster <FILE>"));
    let cluster = repo("examples/cephcluster.yaml");
    let out = mcsctl(&["plan", "--cluster", cluster.to_str().unwrap(), "-o", "xml"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains("[possible values: table, wide, yaml, json, name]")
    );
}

#[test]
fn the_table_summarises_the_plan_of_the_examples() {
    let cluster = repo("examples/cephcluster.yaml");
    let inventory = repo("examples/inventory.yaml");
    let table = stdout_of(&[
        "plan",
        "--cluster",
        cluster.to_str().unwrap(),
        "--inventory",
        inventory.to_str().unwrap(),
        "-o",
        "table",
    ]);
    let document = library_document_of_the_examples();
    assert!(
        table.starts_with(
            "CephCluster rook-ceph/rook-ceph: MCS enabled, clusterID east; not ready\n"
        ),
        "{table}"
    );
    // Every reason of the document, each on its own line.
    for reason in document["reasons"].as_array().unwrap() {
        let line = format!("  - {}\n", reason.as_str().unwrap());
        assert!(table.contains(&line), "{line:?} missing from\n{table}");
    }
    // One row per daemon, with its status.
    let rows: Vec<Vec<&str>> = table
        .lines()
        .skip_while(|l| !l.starts_with("DAEMON"))
        .skip(1)
        .take_while(|l| !l.is_empty())
        .map(|l| l.split_whitespace().collect())
        .collect();
    let daemons: Vec<(&str, &str)> = rows.iter().map(|r| (r[0], r[4])).collect();
    assert_eq!(
        daemons,
        [
            ("mon.b", "replace"),
            ("mon.c", "replace"),
            ("mon.d", "upToDate"),
            ("osd.0", "upToDate"),
            ("osd.1", "updateArgs"),
            ("osd.2", "waiting")
        ]
    );
    assert!(
        table.contains(&format!(
            "rook-ceph-mon-endpoints data: {}\n",
            document["monEndpoints"]["data"].as_str().unwrap()
        )),
        "{table}"
    );
    assert!(
        table.ends_with("to apply: 6 Services, 4 ServiceExports (-o yaml shows them)\n"),
        "{table}"
    );
}

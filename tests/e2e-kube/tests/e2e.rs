//! The clusterset on real Kubernetes clusters: by default two clusters of each supported
//! release that the suite starts itself (etcd, kube-apiserver, kube-controller-manager,
//! kube-scheduler and kwok from `tests/k8s-tools`), or the user's (kind, k3d) named by
//! kubeconfig contexts; the agents and the operator as processes with the ServiceAccounts and
//! RBAC of `deploy/`. The scenarios are in `src/scenarios.rs`; the settings in `src/lib.rs` and
//! docs/e2e.md.
//!
//! `bash tests/k8s-tools/build.sh && cargo build -p clusterset-agent -p mcs-ceph-operator -p clusterset-gateway &&
//! cargo test -p clusterset-e2e` (the README's test command runs it too).

use clusterset_e2e::{Target, World, charts, gateway, scenarios};
use futures::FutureExt;

/// Runs scenario `name` on a fresh [`World`] of every target (each selected release, or the
/// user's clusters); prints how long the scenario took on each (after the set-up: installing
/// and starting the agents) and whether it passed. The first failure ends it.
async fn run<F>(name: &str, scenario: F) -> anyhow::Result<()>
where
    F: for<'w> Fn(&'w mut World) -> futures::future::BoxFuture<'w, anyhow::Result<()>>,
{
    for target in Target::all()? {
        let mut world = World::start(&target).await?;
        let started = std::time::Instant::now();
        // A failed assertion panics: the agents are still stopped and the namespaces deleted.
        let outcome = std::panic::AssertUnwindSafe(scenario(&mut world))
            .catch_unwind()
            .await;
        let passed = matches!(outcome, Ok(Ok(())));
        println!(
            "scenario {name} on {target}: {} in {:.1?}",
            if passed { "passed" } else { "FAILED" },
            started.elapsed()
        );
        if !passed {
            world.print_logs();
        }
        world.stop().await?;
        match outcome {
            Ok(result) => result?,
            Err(panic) => std::panic::resume_unwind(panic),
        }
    }
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_import_conflict_restart_unexport() -> anyhow::Result<()> {
    run("export_import_conflict_restart_unexport", |w| {
        Box::pin(scenarios::export_import_conflict_restart_unexport(w))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn operator_brings_osds_to_global_ips() -> anyhow::Result<()> {
    run("operator_brings_osds_to_global_ips", |w| {
        Box::pin(scenarios::operator_brings_osds_to_global_ips(w))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gateway_follows_the_api_servers() -> anyhow::Result<()> {
    run("gateway_follows_the_api_servers", |w| {
        Box::pin(gateway::gateway_follows_the_api_servers(w))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn faults_lose_nothing() -> anyhow::Result<()> {
    run("faults_lose_nothing", |w| {
        Box::pin(scenarios::faults_lose_nothing(w))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_member_can_speak_only_for_itself() -> anyhow::Result<()> {
    run("a_member_can_speak_only_for_itself", |w| {
        Box::pin(scenarios::a_member_can_speak_only_for_itself(w))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn upstream_mcs_conformance_suite() -> anyhow::Result<()> {
    run("upstream_mcs_conformance_suite", |w| {
        Box::pin(clusterset_e2e::conformance::upstream_mcs_conformance(w))
    })
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn agent_replicas_one_leads_all_serve_dns() -> anyhow::Result<()> {
    run("agent_replicas_one_leads_all_serve_dns", |w| {
        Box::pin(scenarios::agent_replicas_one_leads_all_serve_dns(w))
    })
    .await
}

/// Both Helm charts installed into the real API servers (every object accepted), their
/// daemons run with the charts' ServiceAccounts, RBAC and settings: an export -> import, the
/// operator on a Rook layout, then `helm uninstall` (the operator's CRD kept). Holds the
/// suite's serial lock itself (no `World`: its agents are the charts').
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn charts_install_and_their_daemons_work() -> anyhow::Result<()> {
    const NAME: &str = "charts_install_and_their_daemons_work";
    for target in Target::all()? {
        let started = std::time::Instant::now();
        match charts::charts_install_and_their_daemons_work(&target).await {
            Ok(took) => println!("scenario {NAME} on {target}: passed in {took:.1?}"),
            Err(error) => {
                // Counted from the call: the set-up may be what failed.
                println!(
                    "scenario {NAME} on {target}: FAILED in {:.1?}",
                    started.elapsed()
                );
                return Err(error);
            }
        }
    }
    Ok(())
}

/// The strict fake API server (kube-fake) refuses the corpus of `src/strictness.rs` as the
/// real API server of east of every target does: the same status code, reason, message and
/// details. Runs on its own namespace `e2e-strictness-<seconds>`, with the suite's serial lock:
/// no agent runs meanwhile (an agent would write the status of the corpus's ServiceExport, and
/// the real server would then answer a stale resourceVersion's 409 where the fake, seeded with
/// the object as it was, checks the body).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_fake_api_server_refuses_as_real_ones_do() -> anyhow::Result<()> {
    use clusterset_e2e::strictness;
    let _no_agents = clusterset_e2e::exclusive().await;
    let mut runs = std::collections::BTreeMap::new();
    let mut failures = String::new();
    for target in Target::all()? {
        let (compared, release) = strictness::compare(&target).await?;
        strictness::print(&target, release, &compared);
        let report = strictness::mismatches(&compared, release);
        if !report.is_empty() {
            failures.push_str(&format!("---- {target} ----\n{report}"));
        }
        runs.insert(target.to_string(), compared);
    }
    for line in strictness::release_differences(&runs) {
        println!("the releases answer differently: {line}");
    }
    assert!(
        failures.is_empty(),
        "the fake API server answered differently from the real one:\n{failures}"
    );
    Ok(())
}

/// The scale bench (`src/scale.rs`, `cargo run --release -p clusterset-e2e --bin scale`) at
/// small size, so that it cannot rot: 100 OSDs in 10 failure domains, then 200 exports at once
/// and 10 one at a time. It asserts counts, never times: the failure domains are written one at
/// a time; the status stays small (under 64 bytes per daemon without managedFields, 64 KB in
/// all); each export is published once (one broker write, no withdrawal); every export status
/// write changes the stored status (a watch sees each change; a write of the same status makes
/// no event) and no condition gets a new `lastTransitionTime` with the same status; nothing is
/// written in 10 s idle after either run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn scale_counts_at_small_size() -> anyhow::Result<()> {
    use clusterset_e2e::scale;
    use std::time::Duration;
    const OSDS: u32 = 100;
    const EXPORTS: u32 = 200;
    let (idle, limit) = (Duration::from_secs(10), Duration::from_secs(300));
    run("scale_counts_at_small_size", |w| {
        Box::pin(async move {
            let report = scale::operator_run(w, OSDS, 10, idle, limit).await?;
            scale::print_operator(&report);
            assert_eq!(
                report.overlapping_domains, 0,
                "one failure domain at a time"
            );
            assert_eq!(report.domain_gaps.len(), 9);
            let daemons = usize::try_from(OSDS + 3)?;
            assert!(
                report.status_bytes_without_managed_fields / daemons < 64,
                "{} bytes of status for {daemons} daemons",
                report.status_bytes_without_managed_fields
            );
            assert!(report.status_bytes < 64 * 1024, "{}", report.status_bytes);
            assert_eq!(report.idle_writes, 0.0, "writes in {idle:?} idle");

            let report = scale::exports_run(w, EXPORTS, 10, idle, limit).await?;
            scale::print_exports(&report);
            let east = &report.agent_writes[0];
            let count = |op: &str| east.get(op).copied().unwrap_or(0.0);
            assert_eq!(count("publish_record"), f64::from(EXPORTS), "{east:?}");
            assert_eq!(count("withdraw_record"), 0.0, "{east:?}");
            // One status write per status change: every write the agent counts changed the
            // stored status (a write of the same status makes no watch event). How many changes
            // an export goes through depends on what the agent saw when (under load it may see
            // the ServiceExport before its Service: `Valid=False` first), not on a fixed count.
            let statuses = &report.export_statuses;
            assert!(
                count("apply_service_export_status") <= statuses.total_changes() as f64,
                "{} export status writes, {} status changes seen: {east:?}",
                count("apply_service_export_status"),
                statuses.total_changes()
            );
            assert_eq!(
                statuses.total_transition_rewrites(),
                0,
                "conditions rewritten with a new lastTransitionTime and the same status: {:?}",
                statuses.transition_rewrites
            );
            assert_eq!(report.idle_writes, 0.0, "writes in {idle:?} idle");
            Ok(())
        })
    })
    .await
}

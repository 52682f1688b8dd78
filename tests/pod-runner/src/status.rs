//! The pod status a kubelet would report, from what the runner knows of its processes (pure):
//! phase, the conditions `PodScheduled`, `Initialized`, `ContainersReady` and `Ready`, the pod
//! IP, and each container's state with its restart count.

use std::net::IpAddr;

use k8s_openapi::api::core::v1::{
    ContainerState as K8sState, ContainerStateRunning, ContainerStateTerminated,
    ContainerStateWaiting, ContainerStatus, PodCondition, PodIP, PodStatus,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;

use crate::plan::RestartPolicy;

/// The reason (and `status.reason`) of a pod refused for its unsupported fields.
pub const UNSUPPORTED_REASON: &str = "UnsupportedPodSpec";

/// A container's state as the runner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum State {
    /// Not running: not started yet, or waiting to be restarted.
    Waiting {
        /// The kubelet's reason (`PodInitializing`, `CrashLoopBackOff`, ...).
        reason: String,
        /// More, if any.
        message: Option<String>,
    },
    /// Running since then.
    Running {
        /// When it started.
        started_at: Timestamp,
    },
    /// Exited.
    Terminated(Exit),
}

/// How a container's process ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Exit {
    /// Its exit code (128 + the signal when it was killed).
    pub exit_code: i32,
    /// When it started.
    pub started_at: Timestamp,
    /// When it ended.
    pub finished_at: Timestamp,
}

/// One container of a pod as the runner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerRun {
    /// Its name.
    pub name: String,
    /// Its image (as the spec says).
    pub image: String,
    /// Its state now.
    pub state: State,
    /// How its previous run ended, once it was restarted.
    pub last: Option<Exit>,
    /// How many times it was started again.
    pub restart_count: i32,
    /// Its startup probe succeeded (or it has none) in this run.
    pub started: bool,
    /// Its readiness probe succeeds (or it has none).
    pub probe_ready: bool,
}

/// A pod as the runner sees it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodRun {
    /// Its restart policy.
    pub restart_policy: RestartPolicy,
    /// Its IP.
    pub pod_ip: IpAddr,
    /// When the runner took it.
    pub start_time: Timestamp,
    /// Its init containers, in order.
    pub init: Vec<ContainerRun>,
    /// Its containers.
    pub containers: Vec<ContainerRun>,
}

/// A kubelet's phase of `run`.
pub fn phase(run: &PodRun) -> &'static str {
    let failed_for_good = |c: &ContainerRun| {
        matches!(&c.state, State::Terminated(e) if e.exit_code != 0)
            && !run.restart_policy.retries_init()
    };
    if run.init.iter().any(failed_for_good) {
        return "Failed";
    }
    if !initialized(run) {
        return "Pending";
    }
    let exits: Option<Vec<i32>> = run
        .containers
        .iter()
        .map(|c| match &c.state {
            State::Terminated(e) if !run.restart_policy.restarts(e.exit_code) => Some(e.exit_code),
            _ => None,
        })
        .collect();
    match exits {
        Some(codes) if codes.iter().all(|c| *c == 0) => "Succeeded",
        Some(_) => "Failed",
        None if run.containers.iter().all(|c| {
            c.restart_count == 0 && !matches!(c.state, State::Running { .. } | State::Terminated(_))
        }) =>
        {
            "Pending"
        }
        None => "Running",
    }
}

fn initialized(run: &PodRun) -> bool {
    run.init
        .iter()
        .all(|c| matches!(&c.state, State::Terminated(e) if e.exit_code == 0))
}

/// The status to report for `run`; `previous` (the status reported before) keeps each
/// condition's `lastTransitionTime` while its status does not change.
pub fn pod_status(run: &PodRun, previous: Option<&PodStatus>, now: Timestamp) -> PodStatus {
    let initialized = initialized(run);
    let ready = initialized && run.containers.iter().all(container_ready);
    let conditions = [
        ("PodScheduled", true, None),
        (
            "Initialized",
            initialized,
            (!initialized).then_some("ContainersNotInitialized"),
        ),
        (
            "ContainersReady",
            ready,
            (!ready).then_some("ContainersNotReady"),
        ),
        ("Ready", ready, (!ready).then_some("ContainersNotReady")),
    ]
    .into_iter()
    .map(|(kind, status, reason)| condition(kind, status, reason, None, previous, now))
    .collect();
    PodStatus {
        phase: Some(phase(run).to_owned()),
        conditions: Some(conditions),
        pod_ip: Some(run.pod_ip.to_string()),
        pod_ips: Some(vec![PodIP {
            ip: run.pod_ip.to_string(),
        }]),
        start_time: Some(Time(run.start_time)),
        init_container_statuses: (!run.init.is_empty()).then(|| {
            run.init
                .iter()
                .map(|c| container_status(c, false))
                .collect()
        }),
        container_statuses: Some(
            run.containers
                .iter()
                .map(|c| container_status(c, initialized))
                .collect(),
        ),
        ..PodStatus::default()
    }
}

/// The status of a pod that stays Pending: refused (`reason` [`UNSUPPORTED_REASON`]) or
/// waiting for an object (`CreateContainerConfigError`, `FailedMount`), with `message`.
pub fn pending_status(
    reason: &str,
    message: &str,
    previous: Option<&PodStatus>,
    now: Timestamp,
) -> PodStatus {
    let conditions = [
        ("PodScheduled", true, None),
        ("Initialized", false, Some(reason)),
        ("ContainersReady", false, Some(reason)),
        ("Ready", false, Some(reason)),
    ]
    .into_iter()
    .map(|(kind, status, reason)| {
        condition(kind, status, reason, reason.map(|_| message), previous, now)
    })
    .collect();
    PodStatus {
        phase: Some("Pending".to_owned()),
        reason: Some(reason.to_owned()),
        message: Some(message.to_owned()),
        conditions: Some(conditions),
        ..PodStatus::default()
    }
}

fn condition(
    kind: &str,
    status: bool,
    reason: Option<&str>,
    message: Option<&str>,
    previous: Option<&PodStatus>,
    now: Timestamp,
) -> PodCondition {
    let status = if status { "True" } else { "False" }.to_owned();
    let since = previous
        .and_then(|p| p.conditions.as_ref())
        .and_then(|cs| cs.iter().find(|c| c.type_ == kind))
        .filter(|c| c.status == status)
        .and_then(|c| c.last_transition_time.clone())
        .unwrap_or(Time(now));
    PodCondition {
        type_: kind.to_owned(),
        status,
        reason: reason.map(str::to_owned),
        message: message.map(str::to_owned),
        last_transition_time: Some(since),
        ..PodCondition::default()
    }
}

/// Running, started (its startup probe passed) and ready (its readiness probe passes).
fn container_ready(c: &ContainerRun) -> bool {
    matches!(c.state, State::Running { .. }) && c.started && c.probe_ready
}

fn container_status(c: &ContainerRun, can_be_ready: bool) -> ContainerStatus {
    let running = matches!(c.state, State::Running { .. }) && c.started;
    ContainerStatus {
        name: c.name.clone(),
        image: c.image.clone(),
        image_id: String::new(),
        ready: can_be_ready && container_ready(c),
        started: Some(running),
        restart_count: c.restart_count,
        state: Some(k8s_state(&c.state)),
        last_state: c
            .last
            .as_ref()
            .map(|e| k8s_state(&State::Terminated(e.clone()))),
        ..ContainerStatus::default()
    }
}

fn k8s_state(state: &State) -> K8sState {
    match state {
        State::Waiting { reason, message } => K8sState {
            waiting: Some(ContainerStateWaiting {
                reason: Some(reason.clone()),
                message: message.clone(),
            }),
            ..K8sState::default()
        },
        State::Running { started_at } => K8sState {
            running: Some(ContainerStateRunning {
                started_at: Some(Time(*started_at)),
            }),
            ..K8sState::default()
        },
        State::Terminated(exit) => K8sState {
            terminated: Some(ContainerStateTerminated {
                exit_code: exit.exit_code,
                reason: Some(
                    if exit.exit_code == 0 {
                        "Completed"
                    } else {
                        "Error"
                    }
                    .to_owned(),
                ),
                started_at: Some(Time(exit.started_at)),
                finished_at: Some(Time(exit.finished_at)),
                ..ContainerStateTerminated::default()
            }),
            ..K8sState::default()
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(seconds: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + seconds).unwrap()
    }

    fn exit(code: i32) -> State {
        State::Terminated(Exit {
            exit_code: code,
            started_at: at(0),
            finished_at: at(1),
        })
    }

    fn container(name: &str, state: State, restarts: i32) -> ContainerRun {
        ContainerRun {
            name: name.to_owned(),
            image: "ceph".to_owned(),
            state,
            last: None,
            restart_count: restarts,
            started: true,
            probe_ready: true,
        }
    }

    fn run(
        policy: RestartPolicy,
        init: Vec<ContainerRun>,
        containers: Vec<ContainerRun>,
    ) -> PodRun {
        PodRun {
            restart_policy: policy,
            pod_ip: "10.244.0.9".parse().unwrap(),
            start_time: at(0),
            init,
            containers,
        }
    }

    fn waiting(reason: &str) -> State {
        State::Waiting {
            reason: reason.to_owned(),
            message: None,
        }
    }

    #[test]
    fn phases_follow_init_containers_then_containers_and_the_policy() {
        use RestartPolicy::*;
        let running = State::Running { started_at: at(2) };
        let cases = [
            (
                run(
                    Always,
                    vec![container("i", running.clone(), 0)],
                    vec![container("c", waiting("PodInitializing"), 0)],
                ),
                "Pending",
            ),
            (
                run(
                    Never,
                    vec![container("i", exit(1), 0)],
                    vec![container("c", waiting("PodInitializing"), 0)],
                ),
                "Failed",
            ),
            (
                run(
                    OnFailure,
                    vec![container("i", exit(1), 0)],
                    vec![container("c", waiting("PodInitializing"), 0)],
                ),
                "Pending",
            ),
            (
                run(
                    Always,
                    vec![container("i", exit(0), 0)],
                    vec![container("c", running.clone(), 0)],
                ),
                "Running",
            ),
            (
                run(
                    Always,
                    vec![],
                    vec![container("c", waiting("CrashLoopBackOff"), 3)],
                ),
                "Running",
            ),
            (
                run(
                    OnFailure,
                    vec![],
                    vec![container("c", exit(0), 0), container("d", exit(0), 1)],
                ),
                "Succeeded",
            ),
            (
                run(
                    Never,
                    vec![],
                    vec![container("c", exit(0), 0), container("d", exit(2), 0)],
                ),
                "Failed",
            ),
            (
                run(OnFailure, vec![], vec![container("c", exit(2), 0)]),
                "Running",
            ),
        ];
        for (i, (run, want)) in cases.iter().enumerate() {
            assert_eq!(phase(run), *want, "case {i}");
        }
    }

    #[test]
    fn conditions_keep_their_transition_time_until_they_change() {
        let pod = run(
            RestartPolicy::Always,
            vec![container("i", exit(0), 0)],
            vec![container("c", State::Running { started_at: at(2) }, 1)],
        );
        let first = pod_status(&pod, None, at(5));
        let second = pod_status(&pod, Some(&first), at(9));
        let conditions = second.conditions.clone().unwrap();
        let summary: Vec<(&str, &str)> = conditions
            .iter()
            .map(|c| (c.type_.as_str(), c.status.as_str()))
            .collect();
        assert_eq!(
            summary,
            [
                ("PodScheduled", "True"),
                ("Initialized", "True"),
                ("ContainersReady", "True"),
                ("Ready", "True")
            ]
        );
        assert!(
            conditions
                .iter()
                .all(|c| c.last_transition_time == Some(Time(at(5))))
        );
        assert_eq!(second.pod_ip.as_deref(), Some("10.244.0.9"));
        let statuses = second.container_statuses.clone().unwrap();
        assert_eq!((statuses[0].restart_count, statuses[0].ready), (1, true));
        let mut stopped = pod.clone();
        stopped.containers[0].state = waiting("CrashLoopBackOff");
        let third = pod_status(&stopped, Some(&second), at(12));
        let mut unready = pod.clone();
        unready.containers[0].probe_ready = false;
        let unready = pod_status(&unready, Some(&second), at(10));
        let condition = |s: &PodStatus, kind: &str| {
            s.conditions
                .clone()
                .unwrap()
                .into_iter()
                .find(|c| c.type_ == kind)
                .unwrap()
                .status
        };
        assert_eq!(
            condition(&unready, "Ready"),
            "False",
            "a failing readiness probe"
        );
        assert_eq!(unready.container_statuses.unwrap()[0].started, Some(true));
        let ready = third
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(
            (ready.status.as_str(), ready.last_transition_time),
            ("False", Some(Time(at(12))))
        );
    }

    #[test]
    fn a_refused_pod_is_pending_with_the_reason_on_its_conditions() {
        let status = pending_status(UNSUPPORTED_REASON, "spec.volumes[0].projected", None, at(1));
        assert_eq!(status.phase.as_deref(), Some("Pending"));
        assert_eq!(status.reason.as_deref(), Some(UNSUPPORTED_REASON));
        let ready = status
            .conditions
            .unwrap()
            .into_iter()
            .find(|c| c.type_ == "Ready")
            .unwrap();
        assert_eq!(ready.reason.as_deref(), Some(UNSUPPORTED_REASON));
        assert_eq!(ready.message.as_deref(), Some("spec.volumes[0].projected"));
    }
}

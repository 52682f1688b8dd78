//! The Events a kubelet records about a pod (`kubectl describe pod` shows them): container
//! started, back-off, probe failures, stops, and why a pod stays Pending. Sent by the runner's
//! tasks to one publisher (kube's `Recorder`, which folds repeats into a series).

use k8s_openapi::api::core::v1::ObjectReference;
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use tokio::sync::mpsc;
use tokio::task::JoinHandle;

/// One Event about a pod.
#[derive(Debug, Clone)]
pub struct PodEvent {
    /// The pod.
    pub pod: ObjectReference,
    /// A warning (else normal).
    pub warning: bool,
    /// The kubelet's reason (`Started`, `BackOff`, `Unhealthy`, `Killing`, `FailedMount`, ...).
    pub reason: String,
    /// What happened.
    pub note: String,
}

/// Where the runner's tasks send Events.
pub type Events = mpsc::UnboundedSender<PodEvent>;

/// A reference to pod `namespace/name` of UID `uid`.
pub fn pod_reference(namespace: &str, name: &str, uid: &str) -> ObjectReference {
    ObjectReference {
        api_version: Some("v1".to_owned()),
        kind: Some("Pod".to_owned()),
        namespace: Some(namespace.to_owned()),
        name: Some(name.to_owned()),
        uid: Some(uid.to_owned()),
        ..ObjectReference::default()
    }
}

/// Starts the publisher of the runner on `node`; a failed write is logged.
pub fn publisher(client: kube::Client, node: &str) -> (Events, JoinHandle<()>) {
    let recorder = Recorder::new(
        client,
        Reporter {
            controller: "clusterset-pod-runner".to_owned(),
            instance: Some(node.to_owned()),
        },
    );
    let (events, mut queue) = mpsc::unbounded_channel::<PodEvent>();
    let task = tokio::spawn(async move {
        while let Some(event) = queue.recv().await {
            let published = recorder
                .publish(
                    &Event {
                        type_: if event.warning {
                            EventType::Warning
                        } else {
                            EventType::Normal
                        },
                        reason: event.reason.clone(),
                        note: Some(event.note.chars().take(1000).collect()),
                        action: event.reason,
                        secondary: None,
                    },
                    &event.pod,
                )
                .await;
            if let Err(error) = published {
                tracing::warn!(%error, "pod runner: Event not written");
            }
        }
    });
    (events, task)
}

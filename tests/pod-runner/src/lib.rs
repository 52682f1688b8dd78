//! The pod runner of the lab's nodes: test support that runs the containers
//! of pods bound to a node as real processes, so that Kubernetes objects (a Rook layout's
//! Deployments, ConfigMaps and Secrets) drive real Ceph daemons.
//!
//! # Design
//!
//! **kwok is the node, the runner runs processes.** kwok already plays the kubelet's node
//! half in the e2e harness (`clusterset_e2e::local::LocalCluster`: the Node object, its
//! heartbeat Lease); the runner does not do that again. kwok's pod stages (`pod-ready`,
//! `pod-complete`, `pod-delete`, written by `tests/k8s-tools/build.sh` into its `stages.yaml`)
//! would also mark every pod Running with a made-up IP and confirm its deletion; a pod the
//! runner serves carries the label [`MARKER`] (its value: the runner's name), and
//! [`kwok::kwok_stages_leaving_marked_pods`] derives from kwok's stages a copy whose pod stages
//! select only pods **without** that label. So for a marked pod kwok does nothing: the runner
//! reports its status and, once its processes are gone, confirms its deletion (grace period 0,
//! with the pod's UID as precondition), as a kubelet does. Unmarked pods keep kwok's behaviour.
//! With no runner serving them, marked pods stay Pending and deleted ones Terminating, as the
//! pods of a node whose kubelet is down.
//!
//! **Pure parts apart from the runtime.** [`refuse`] walks the pod spec as stored JSON and
//! names every field the runner does not honour (unknown fields included: nothing is ignored
//! silently); [`plan`] turns a pod and what is around it (its namespace's ConfigMaps, Secrets
//! and Services, its pod IP, its tokens, the node's resources and DNS) into a
//! [`plan::PodPlan`] (command lines with `$(VAR)` expanded, the environment, volumes resolved
//! to host paths with their files, mounts, probes, capabilities, `resolv.conf`, init
//! containers in order, the restart policy); [`status`] turns what the runner knows of the
//! processes into the `PodStatus` a kubelet would write; [`kwok`] rewrites kwok's stages.
//! None of them does IO or reads the clock. [`runner`] is the kube and tokio shell around
//! them ([`volumes`], [`process`], [`rootfs`], [`events`] its IO).
//!
//! **What honours what.**
//! - *Processes* come from the Ceph Reef root filesystem through the lab's one way of running
//!   Ceph programs, [`mon_failover_io::CephInstall`] (`ip netns exec NS unshare --mount ...
//!   chroot ROOT`): the runner runs `/bin/sh` of the root with a small script that bind-mounts
//!   each volume at its `mountPath` (read-only where asked, ConfigMap and Secret volumes always)
//!   in the process's own mount namespace, changes to `workingDir`, and `exec`s the container's
//!   command. Each start of a container gets a root of its own ([`rootfs`]: an overlay whose
//!   lower layer is the Ceph root and whose writable layer is removed when it ends, as a
//!   container runtime makes a new container), so nothing a container writes, its mount points
//!   included, reaches the shared root; its probes run in that same root. The runner's
//!   directory is shared into it at its own path (where the volumes are). Mounts go parents
//!   first, and are made read-only only once every mount point exists, so a Secret mounted
//!   inside a ConfigMap's volume (Rook's `/etc/ceph` and `/etc/ceph/keyring-store`) works. The
//!   container's `image` is reported but not pulled: every container runs the root's
//!   programs.
//! - *Network*: each pod gets an IP from the runner's pool, added to the device of the network
//!   namespace the runner is given, and reported as `status.podIP` (and to `fieldRef:
//!   status.podIP`); the processes run in that namespace. Pods of one runner share it (as the
//!   lab's pods share their cluster's namespace), each with its own address.
//! - *Volumes*: ConfigMap and Secret volumes are written as the kubelet's atomic writer writes
//!   them (a timestamped directory, `..data` pointing at it, each key a link through `..data`),
//!   and written again when the object changes, so a process sees the new files at once and
//!   never half of them; projected volumes the same way, from ConfigMaps, Secrets, the pod's
//!   metadata (downward API, also as a volume of its own) and ServiceAccount tokens the runner
//!   gets by TokenRequest, bound to the pod and renewed after 80% of their lifetime as the
//!   kubelet does (so the API server's own token volume works); `emptyDir` is a directory of
//!   the pod, removed with it; `hostPath` is a path under the runner's node directory (never
//!   the real host's), kept across pods. `subPath` and `subPathExpr` mount a path inside the
//!   volume (made in an `emptyDir` or `hostPath` if missing; a ConfigMap's or Secret's file as
//!   it is at the start, not updated, as on a kubelet).
//! - *Lifecycle*: init containers one after the other (a failed one run again unless the
//!   policy is `Never`, when the pod fails), then every container; a container that exits is
//!   started again by the restart policy after a back-off (doubling, capped); each process is
//!   the leader of its own process group, and a deleted pod's groups get SIGTERM, then SIGKILL
//!   after the grace period. Probes as the kubelet runs them (exec: the command in the
//!   container's environment, mounts and network; tcpSocket and httpGet: a connection from the
//!   root's bash, a request from its python3, to the pod's IP, in the same place; each with
//!   its timeout, period, delay and thresholds): the startup probe gates the others and
//!   `started`, a failed startup or liveness probe stops the container (SIGTERM, then SIGKILL
//!   after the grace period) and the restart policy decides, the readiness probe sets the
//!   container's readiness. Status: phase,
//!   `PodScheduled`, `Initialized`, `ContainersReady`, `Ready`, pod IP, each container's state,
//!   last state, `started`, `ready` and restart count. Events as a kubelet records them
//!   ([`events`]: `Started`, `BackOff`, `Unhealthy`, `Killing`, and the reason a pod stays
//!   Pending).
//! - *Environment*: as the kubelet builds it: `envFrom`, then `env` (values, ConfigMap and
//!   Secret keys, the pod's fields, `resourceFieldRef`: with no requests or limits (they are
//!   refused, below) a limit is the node's allocatable amount and a request 0, as on a
//!   kubelet), `$(VAR)` expanded, then the Services' variables (`<NAME>_SERVICE_HOST`, ... of
//!   the namespace's Services unless `enableServiceLinks: false`, and of `default/kubernetes`
//!   always), and `HOSTNAME`, `PATH`, `HOME`.
//! - *DNS*: the pod's `resolv.conf` as the kubelet writes it, mounted at `/etc/resolv.conf`:
//!   `ClusterFirst` with the cluster DNS the runner is given (`--cluster-dns`), `None` and
//!   `dnsConfig`; `Default` (and `ClusterFirst` when the runner has no cluster DNS, as such a
//!   kubelet falls back) keeps the root's. The cluster's DNS server itself is not the runner's.
//! - *Refused by name* (the pod stays Pending, `status.reason` and the conditions' reason
//!   [`status::UNSUPPORTED_REASON`], the message listing each field): gRPC probes, lifecycle
//!   hooks, resources with requests or limits, a pod security context, a container security
//!   context asking for anything but what the runner does (root, a writable root filesystem,
//!   `privileged`, capabilities added and dropped), volume types other than those above,
//!   projections other than ConfigMap, Secret, downward API and ServiceAccount token, downward
//!   API fields other than the pod's metadata, mount propagation, host ports, sidecars, host
//!   network, PID or IPC, `subdomain`, and any field not listed in [`refuse`].
//! - *Capabilities*: a container that is not privileged gets the container runtimes' default
//!   set (`CapBnd` `a80425fb`), changed by its `capabilities.add` and `drop`, as its bounding
//!   set (the root's `setpriv`, after the mounts); a privileged one keeps every capability.
//! - *Hostname*: each container runs in a UTS namespace of its own whose hostname is the
//!   pod's `spec.hostname` or name (and `HOSTNAME` says so), as the kubelet sets it.
//! - *Not honoured, and not a field*: the processes share the host's PID and IPC namespaces
//!   and run as root without cgroups; no termination message is read (the API server's
//!   default `terminationMessagePath` is accepted); a pod that ended keeps its IP until it is
//!   deleted; there is no kubelet API (no `kubectl logs` or `exec`: a container's output is in
//!   `<dir>/pods/<name>_<uid>/logs/`).
//!
//! # Tests
//!
//! The pure parts' unit tests run anywhere. `tests/runner.rs` runs the runner against a
//! cluster of the e2e harness (kube-apiserver 1.37, etcd, controller manager, scheduler, kwok
//! with [`kwok::kwok_stages_leaving_marked_pods`]'s stages), in network namespaces of its own
//! (`cspr-<pid>-<n>`, removed at the end), as root, with the Ceph root (`sudo bash
//! tests/lab/ceph-reef-root.sh`) and the tools (`bash tests/k8s-tools/build.sh etcd kwok
//! k8s-1.37`); without them it fails with the command that fixes it:
//! `sudo cargo test -p clusterset-pod-runner`.
#![forbid(unsafe_code)]

pub mod events;
pub mod kwok;
pub mod plan;
pub mod process;
pub mod quantity;
pub mod refuse;
pub mod rootfs;
pub mod runner;
pub mod status;
pub mod volumes;

pub use plan::ClusterDns;
pub use runner::{Backoff, PodNetwork, PodRunner, RunnerConfig, RunnerError};

/// The label that leaves a pod to the runner whose name is its value (kwok's derived stages
/// skip it).
pub const MARKER: &str = "clusterset.io/pod-runner";

//! The pod runner against a real cluster: kube-apiserver, etcd, the controller manager, the
//! scheduler and kwok started by the e2e harness (`LocalCluster`), kwok given stages that
//! leave the runner's pods alone; the containers run from the Ceph Reef root in a network
//! namespace of the test (`cspr-<pid>-<n>`), as root.
//!
//! Needs root, `iproute2`, the Ceph root (`sudo bash tests/lab/ceph-reef-root.sh`) and the
//! Kubernetes tools (`bash tests/k8s-tools/build.sh etcd kwok k8s-1.37`); fails, never skips,
//! without them.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use clusterset_e2e::local::{LocalCluster, NODE, Release, Tools};
use clusterset_e2e::{kubeconfig_client, wait_for};
use clusterset_pod_runner::kwok::kwok_stages_leaving_marked_pods;
use clusterset_pod_runner::{Backoff, ClusterDns, MARKER, PodNetwork, PodRunner, RunnerConfig};
use k8s_openapi::api::authentication::v1::TokenReview;
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, Pod, Secret, Service, ServiceAccount};
use kube::api::{Api, DeleteParams, Patch, PatchParams, PostParams};
use mon_failover_io::CephInstall;
use serde_json::json;

/// The runner's name (the value of its label).
const RUNNER: &str = "lab";
/// The pod IPs the runner gives out (in its network namespace only).
const POD_IPS: [&str; 4] = ["10.245.0.10", "10.245.0.11", "10.245.0.12", "10.245.0.13"];

/// The clusters of the tests start one at a time (2 cores).
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// A network namespace of the test, with a device `eth0` for the pod IPs (one end of a veth
/// pair whose other end is in the namespace too); deleted on drop.
struct Netns {
    name: String,
}

impl Netns {
    fn create(name: &str) -> anyhow::Result<Self> {
        // One left by a crashed run of the same process id, if any.
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", name])
            .stderr(std::process::Stdio::null())
            .status();
        let run = |args: &[&str]| -> anyhow::Result<()> {
            let status = std::process::Command::new("ip")
                .args(args)
                .status()
                .with_context(|| format!("cannot run ip {}: install iproute2", args.join(" ")))?;
            if !status.success() {
                bail!(
                    "ip {} failed ({status}): the test needs root",
                    args.join(" ")
                );
            }
            Ok(())
        };
        run(&["netns", "add", name])?;
        let netns = Netns {
            name: name.to_owned(),
        };
        run(&["-n", name, "link", "set", "lo", "up"])?;
        // A veth pair inside the namespace (no dummy devices in every kernel).
        run(&[
            "-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", "eth1",
        ])?;
        run(&["-n", name, "link", "set", "eth0", "up"])?;
        run(&["-n", name, "link", "set", "eth1", "up"])?;
        Ok(netns)
    }

    /// The addresses on `eth0`.
    fn addresses(&self) -> String {
        let output = std::process::Command::new("ip")
            .args(["-n", &self.name, "-o", "addr", "show", "dev", "eth0"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).into_owned()
    }

    /// The namespace's identity as `readlink /proc/self/ns/net` prints it inside it.
    fn identity(&self) -> String {
        let output = std::process::Command::new("ip")
            .args(["netns", "exec", &self.name, "readlink", "/proc/self/ns/net"])
            .output()
            .unwrap();
        String::from_utf8_lossy(&output.stdout).trim().to_owned()
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["netns", "del", &self.name])
            .status();
    }
}

/// A cluster, a namespace in it, a network namespace and a runner serving them.
struct World {
    client: kube::Client,
    namespace: String,
    netns: Netns,
    dir: tempfile::TempDir,
    runner: Option<PodRunner>,
    _cluster: LocalCluster,
    _cluster_dir: tempfile::TempDir,
}

impl World {
    async fn start(test: u8) -> anyhow::Result<Self> {
        let root = std::process::Command::new("id").arg("-u").output()?;
        if String::from_utf8_lossy(&root.stdout).trim() != "0" {
            bail!(
                "the pod runner's tests need root (network namespaces, mounts): run them with sudo"
            );
        }
        let install = CephInstall::root_from_env()?;
        let tools = Tools::find(&["etcd", "kwok", "k8s-1.37"])?;
        let cluster_dir = tempfile::Builder::new().prefix("cspr-cluster-").tempdir()?;
        let stages =
            kwok_stages_leaving_marked_pods(&std::fs::read_to_string(tools.kwok_stages())?)?;
        let stages_path = cluster_dir.path().join("kwok-stages.yaml");
        std::fs::write(&stages_path, stages)?;
        let tools = tools.with_kwok_stages(&stages_path);
        let cluster_path = cluster_dir.path().join("cluster");
        std::fs::create_dir(&cluster_path)?;
        let cluster =
            LocalCluster::start(&tools, Release { minor: 37 }, "cspr", &cluster_path).await?;
        let client = kubeconfig_client(&cluster.kubeconfig).await?;
        let namespace = format!("cspr-{test}");
        let namespaces: Api<Namespace> = Api::all(client.clone());
        namespaces
            .create(
                &PostParams::default(),
                &serde_json::from_value(json!({"metadata": {"name": namespace}}))?,
            )
            .await?;
        let accounts: Api<ServiceAccount> = Api::namespaced(client.clone(), &namespace);
        wait_for(
            "the namespace's default ServiceAccount",
            Duration::from_secs(60),
            || async { Ok(accounts.get_opt("default").await?.map(|_| ())) },
        )
        .await?;
        let netns = Netns::create(&format!("cspr-{}-{test}", std::process::id()))?;
        let dir = tempfile::Builder::new()
            .prefix("cspr-runner-")
            .tempdir_in("/tmp")?;
        let config = RunnerConfig {
            name: RUNNER.to_owned(),
            node: NODE.to_owned(),
            namespace: namespace.clone(),
            dir: dir.path().to_path_buf(),
            install,
            network: PodNetwork {
                netns: Some(netns.name.clone()),
                device: Some("eth0".to_owned()),
                prefix_len: 24,
                ips: POD_IPS.iter().map(|ip| ip.parse().unwrap()).collect(),
            },
            backoff: Backoff {
                initial: Duration::from_millis(500),
                max: Duration::from_secs(2),
            },
            // As kubeadm's clusters have it (the suite's clusters run no DNS: nothing answers).
            cluster_dns: Some(ClusterDns {
                nameserver: "10.96.0.10".parse().unwrap(),
                domain: "cluster.local".to_owned(),
            }),
        };
        let runner = PodRunner::start(client.clone(), config).await?;
        Ok(World {
            client,
            namespace,
            netns,
            dir,
            runner: Some(runner),
            _cluster: cluster,
            _cluster_dir: cluster_dir,
        })
    }

    fn pods(&self) -> Api<Pod> {
        Api::namespaced(self.client.clone(), &self.namespace)
    }

    /// A file the pods wrote in the node's `hostPath` `/var/lib/cspr`.
    fn node_file(&self, name: &str) -> PathBuf {
        self.dir.path().join("node/var/lib/cspr").join(name)
    }

    fn read(&self, name: &str) -> String {
        std::fs::read_to_string(self.node_file(name)).unwrap_or_default()
    }

    async fn create(&self, object: serde_json::Value) -> anyhow::Result<()> {
        let kind = object["kind"].as_str().unwrap_or("").to_owned();
        let post = PostParams::default();
        match kind.as_str() {
            "ConfigMap" => {
                let api: Api<ConfigMap> = Api::namespaced(self.client.clone(), &self.namespace);
                api.create(&post, &serde_json::from_value(object)?).await?;
            }
            "Secret" => {
                let api: Api<Secret> = Api::namespaced(self.client.clone(), &self.namespace);
                api.create(&post, &serde_json::from_value(object)?).await?;
            }
            _ => {
                self.pods()
                    .create(&post, &serde_json::from_value(object)?)
                    .await?;
            }
        }
        Ok(())
    }

    /// Waits until pod `name`'s status passes `check`; the last status in the error.
    async fn pod_until(
        &self,
        name: &str,
        what: &str,
        check: impl Fn(&Pod) -> bool,
    ) -> anyhow::Result<Pod> {
        let pods = self.pods();
        let last = std::sync::Mutex::new(None);
        let found = wait_for(
            &format!("pod {name}: {what}"),
            Duration::from_secs(60),
            || async {
                let pod = pods.get(name).await?;
                let matched = check(&pod);
                *last.lock().unwrap() = Some(pod.status.clone());
                Ok(matched.then_some(pod))
            },
        )
        .await;
        found.with_context(|| format!("its last status: {:?}", last.lock().unwrap()))
    }

    async fn stop(mut self) {
        if let Some(runner) = self.runner.take() {
            runner.shutdown().await;
        }
    }
}

/// A pod for the runner: its label; otherwise as the API server defaults it (the token volume,
/// the Services' variables, `dnsPolicy: ClusterFirst`).
fn pod(name: &str, policy: &str, spec: serde_json::Value) -> serde_json::Value {
    let mut pod = json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "labels": {MARKER: RUNNER}},
        "spec": {
            "restartPolicy": policy, "terminationGracePeriodSeconds": 5,


            "volumes": [{"name": "out", "hostPath": {"path": "/var/lib/cspr", "type": "DirectoryOrCreate"}}],
        },
    });
    for (key, value) in spec.as_object().unwrap() {
        pod["spec"][key] = value.clone();
    }
    pod
}

/// A container running `script` with `/bin/sh -c`, the node's `/var/lib/cspr` at `/out`.
fn shell(name: &str, script: &str) -> serde_json::Value {
    json!({"name": name, "image": "quay.io/ceph/ceph:v18.2.7", "command": ["/bin/sh", "-c"],
           "args": [script], "volumeMounts": [{"name": "out", "mountPath": "/out"}]})
}

fn condition(pod: &Pod, kind: &str) -> Option<String> {
    pod.status
        .as_ref()?
        .conditions
        .as_ref()?
        .iter()
        .find(|c| c.type_ == kind)
        .map(|c| c.status.clone())
}

fn phase(pod: &Pod) -> &str {
    pod.status
        .as_ref()
        .and_then(|s| s.phase.as_deref())
        .unwrap_or("")
}

fn restarts(pod: &Pod) -> i32 {
    pod.status
        .as_ref()
        .and_then(|s| s.container_statuses.as_ref())
        .and_then(|c| c.first())
        .map_or(-1, |c| c.restart_count)
}

async fn wait_file(
    path: &Path,
    what: &str,
    check: impl Fn(&str) -> bool,
) -> anyhow::Result<String> {
    wait_for(what, Duration::from_secs(60), || async {
        let text = std::fs::read_to_string(path).unwrap_or_default();
        Ok(check(&text).then_some(text))
    })
    .await
}

#[tokio::test]
async fn a_pod_runs_init_containers_in_order_then_its_container_with_env_files_ip_and_updates() {
    let _serial = SERIAL.lock().await;
    let world = World::start(1).await.unwrap();
    world
        .create(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "conf"},
                       "data": {"greeting": "hello"}}),
        )
        .await
        .unwrap();
    let services: Api<Service> = Api::namespaced(world.client.clone(), &world.namespace);
    let mon = services
        .create(
            &PostParams::default(),
            &serde_json::from_value(json!({"metadata": {"name": "rook-ceph-mon-a"}, "spec": {
                "ports": [{"name": "tcp-msgr1", "port": 6789}, {"name": "tcp-msgr2", "port": 3300}],
            }}))
            .unwrap(),
        )
        .await
        .unwrap();
    let mon_ip = mon.spec.unwrap().cluster_ip.unwrap();
    world
        .create(
            json!({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "keys"},
                       "stringData": {"token": "s3cret"}}),
        )
        .await
        .unwrap();
    let main = r#"echo main >> /out/order
env | sort > /out/env
cat /scratch/from-init > /out/scratch
cat /etc/conf/keys/token > /out/token
readlink /proc/self/ns/net > /out/netns
pwd > /out/pwd
ceph-mon --version > /out/ceph-version
if touch /etc/conf/x 2>/dev/null; then echo writable; else echo read-only; fi > /out/conf-mode
SA=/var/run/secrets/kubernetes.io/serviceaccount
cat $SA/token > /out/sa-token; cat $SA/namespace > /out/sa-namespace; cat $SA/ca.crt > /out/sa-ca.crt
cat /etc/podinfo/labels > /out/labels
cat /etc/resolv.conf > /out/resolv.conf
grep CapBnd /proc/self/status > /out/capbnd
hostname > /out/hostname
echo in-sub > /sub/x
cat /etc/greeting-file > /out/greeting-file
echo mine > /etc/cspr-written && cat /etc/cspr-written > /out/rootfs-write
echo written > /out/written
while true; do cat /etc/conf/greeting > /out/greeting.tmp; mv /out/greeting.tmp /out/greeting; sleep 0.1; done"#;
    let mut container = shell("main", main);
    container["workingDir"] = json!("/work");
    container["env"] = json!([
        {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "greeting"}}},
        {"name": "KEYRING", "valueFrom": {"secretKeyRef": {"name": "keys", "key": "token"}}},
        {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
        {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
        {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "BIND", "value": "--public-bind-addr=$(POD_IP)"},
        {"name": "POD_MEMORY_LIMIT", "valueFrom": {"resourceFieldRef": {"resource": "limits.memory"}}},
        {"name": "POD_CPU_REQUEST", "valueFrom": {"resourceFieldRef": {"resource": "requests.cpu", "divisor": "1"}}},
    ]);
    container["volumeMounts"] = json!([
        {"name": "out", "mountPath": "/out"},
        {"name": "scratch", "mountPath": "/scratch"},
        {"name": "keys", "mountPath": "/etc/conf/keys"},
                {"name": "conf", "mountPath": "/etc/conf"},
                {"name": "podinfo", "mountPath": "/etc/podinfo"},
        {"name": "out", "mountPath": "/sub", "subPath": "sub/dir"},
        {"name": "conf", "mountPath": "/etc/greeting-file", "subPath": "greeting"},
    ]);
    let mut second = shell(
        "second",
        "echo second >> /out/order; echo from-init > /scratch/from-init",
    );
    second["volumeMounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "scratch", "mountPath": "/scratch"}));
    world
                .create(pod("writer", "Always", json!({
                        // No `automountServiceAccountToken: false`: the API server adds its token volume
            // (projected: a token, its CA, the namespace), as to every pod of the tests.
            "initContainers": [shell("first", "echo first >> /out/order"), second],
            "containers": [container],
            "volumes": [
                {"name": "out", "hostPath": {"path": "/var/lib/cspr", "type": "DirectoryOrCreate"}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "conf", "configMap": {"name": "conf"}},
                                                {"name": "keys", "secret": {"secretName": "keys"}},
                {"name": "podinfo", "downwardAPI": {"items": [
                    {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                ]}},
            ],
        })))
        .await
        .unwrap();

    let running = world
        .pod_until("writer", "Running and Ready", |p| {
            phase(p) == "Running" && condition(p, "Ready").as_deref() == Some("True")
        })
        .await
        .unwrap();
    let status = running.status.clone().unwrap();
    let ip = status.pod_ip.clone().unwrap();
    assert_eq!(ip, POD_IPS[0], "the first IP of the runner's pool");
    for kind in ["PodScheduled", "Initialized", "ContainersReady", "Ready"] {
        assert_eq!(condition(&running, kind).as_deref(), Some("True"), "{kind}");
    }
    let init: Vec<(String, i32)> = status
        .init_container_statuses
        .unwrap()
        .iter()
        .map(|c| {
            let code = c
                .state
                .as_ref()
                .and_then(|s| s.terminated.as_ref())
                .map_or(-1, |t| t.exit_code);
            (c.name.clone(), code)
        })
        .collect();
    assert_eq!(init, [("first".to_owned(), 0), ("second".to_owned(), 0)]);
    assert!(
        world.netns.addresses().contains(&format!("{ip}/24")),
        "{}",
        world.netns.addresses()
    );

    wait_file(&world.node_file("written"), "the container's files", |t| {
        !t.is_empty()
    })
    .await
    .unwrap();
    let env = wait_file(&world.node_file("env"), "the container's env", |t| {
        t.contains("POD_IP")
    })
    .await
    .unwrap();
    assert_eq!(
        world.read("order"),
        "first\nsecond\nmain\n",
        "init containers in order, then main"
    );
    for line in [
        "GREETING=hello".to_owned(),
        "KEYRING=s3cret".to_owned(),
        format!("POD_IP={ip}"),
        "POD_NAME=writer".to_owned(),
        format!("POD_NAMESPACE={}", world.namespace),
        format!("BIND=--public-bind-addr={ip}"),
        "HOSTNAME=writer".to_owned(),
        // The node's allocatable memory (4Ti: the harness's node), no request.
        "POD_MEMORY_LIMIT=4398046511104".to_owned(),
        "POD_CPU_REQUEST=0".to_owned(),
        format!("ROOK_CEPH_MON_A_SERVICE_HOST={mon_ip}"),
        "ROOK_CEPH_MON_A_SERVICE_PORT_TCP_MSGR2=3300".to_owned(),
        format!("ROOK_CEPH_MON_A_PORT_6789_TCP=tcp://{mon_ip}:6789"),
        "KUBERNETES_SERVICE_HOST=10.96.0.1".to_owned(),
    ] {
        assert!(
            env.lines().any(|l| l == line),
            "{line} not in the env:\n{env}"
        );
    }
    assert_eq!(
        world.read("scratch"),
        "from-init\n",
        "emptyDir shared with the init container"
    );
    assert_eq!(
        world.read("token"),
        "s3cret",
        "the Secret's file, mounted inside the ConfigMap's"
    );
    assert_eq!(world.read("pwd"), "/work\n", "workingDir");
    assert_eq!(
        world.read("sub/dir/x"),
        "in-sub\n",
        "a subPath of the hostPath, made"
    );
    assert_eq!(
        world.read("greeting-file"),
        "hello",
        "a ConfigMap key by subPath"
    );
    assert_eq!(
        world.read("hostname"),
        "writer\n",
        "the pod's name, in a UTS namespace of its own"
    );
    assert_eq!(
        world.read("capbnd"),
        "CapBnd:\t00000000a80425fb\n",
        "a container that is not privileged has the runtimes' default capabilities"
    );
    assert_eq!(
        world.read("resolv.conf"),
        format!(
            "nameserver 10.96.0.10\nsearch {}.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n",
            world.namespace
        ),
        "dnsPolicy ClusterFirst (the API server's default)"
    );
    assert_eq!(
        world.read("labels"),
        "clusterset.io/pod-runner=\"lab\"\n",
        "downwardAPI labels"
    );
    assert_eq!(
        world.read("sa-namespace"),
        world.namespace,
        "the token volume's namespace"
    );
    let roots: Api<ConfigMap> = Api::namespaced(world.client.clone(), &world.namespace);
    let root_ca = roots.get("kube-root-ca.crt").await.unwrap().data.unwrap()["ca.crt"].clone();
    assert_eq!(world.read("sa-ca.crt"), root_ca, "the token volume's CA");
    let review: TokenReview =
        serde_json::from_value(json!({"spec": {"token": world.read("sa-token")}})).unwrap();
    let reviewed = Api::<TokenReview>::all(world.client.clone())
        .create(&PostParams::default(), &review)
        .await
        .unwrap()
        .status
        .unwrap();
    assert_eq!(reviewed.authenticated, Some(true), "{reviewed:?}");
    assert_eq!(
        reviewed.user.and_then(|u| u.username).as_deref(),
        Some(format!("system:serviceaccount:{}:default", world.namespace).as_str()),
        "the token is the pod's ServiceAccount's"
    );
    // The container's root is its own (an overlay of the Ceph root): what it wrote and its
    // mount points are not in the shared root.
    assert_eq!(
        world.read("rootfs-write"),
        "mine\n",
        "the container's root is writable"
    );
    let shared = CephInstall::root_from_env().unwrap();
    let root = shared.root_dir().unwrap();
    for path in [
        "etc/cspr-written",
        "out",
        "scratch",
        "etc/conf",
        "etc/podinfo",
        "run/secrets",
    ] {
        assert!(
            !root.join(path).exists(),
            "{} is in the shared root",
            root.join(path).display()
        );
    }
    let ceph = world.read("ceph-version");
    assert!(
        ceph.starts_with("ceph version 18.2"),
        "the Ceph Reef root's ceph-mon: {ceph}"
    );
    assert_eq!(
        world.read("conf-mode"),
        "read-only\n",
        "a ConfigMap volume is read-only"
    );
    assert_eq!(
        world.read("netns").trim(),
        world.netns.identity(),
        "the runner's network namespace"
    );
    wait_file(&world.node_file("greeting"), "the ConfigMap's file", |t| {
        t == "hello"
    })
    .await
    .unwrap();

    let maps: Api<ConfigMap> = Api::namespaced(world.client.clone(), &world.namespace);
    let changed = Instant::now();
    maps.patch(
        "conf",
        &PatchParams::default(),
        &Patch::Merge(json!({"data": {"greeting": "bonjour"}})),
    )
    .await
    .unwrap();
    wait_file(
        &world.node_file("greeting"),
        "the ConfigMap's update in the running container",
        |t| t == "bonjour",
    )
    .await
    .unwrap();
    println!(
        "ConfigMap update seen by the container {:?} after the patch",
        changed.elapsed()
    );
    world.stop().await;
}

#[tokio::test]
async fn containers_restart_by_policy_and_a_deleted_pod_is_stopped_and_removed() {
    let _serial = SERIAL.lock().await;
    let world = World::start(2).await.unwrap();
    // `$$` is Kubernetes' escape of `$`: the shell sees `$$`, its PID.
    let crasher = "echo $$$$ >> /out/starts; while [ ! -e /out/crash ]; do sleep 0.1; done; rm /out/crash; exit 3";
    world
        .create(pod(
            "crasher",
            "Always",
            json!({"containers": [shell("main", crasher)]}),
        ))
        .await
        .unwrap();
    world
        .create(pod(
            "once",
            "OnFailure",
            json!({"containers": [shell("main", "exit 0")]}),
        ))
        .await
        .unwrap();
    world
        .create(pod(
            "failing",
            "Never",
            json!({"containers": [shell("main", "exit 1")]}),
        ))
        .await
        .unwrap();
    world
        .create(pod(
            "init-fails",
            "Never",
            json!({
                "initContainers": [shell("init", "exit 2")],
                "containers": [shell("main", "echo should-not-run >> /out/init-fails")],
            }),
        ))
        .await
        .unwrap();

    world
        .pod_until("crasher", "Running", |p| {
            phase(p) == "Running" && restarts(p) == 0
        })
        .await
        .unwrap();
    std::fs::write(world.node_file("crash"), "").unwrap();
    let restarted = world
        .pod_until("crasher", "restarted once after exit 3", |p| {
            restarts(p) == 1 && condition(p, "Ready").as_deref() == Some("True")
        })
        .await
        .unwrap();
    let container = &restarted
        .status
        .clone()
        .unwrap()
        .container_statuses
        .unwrap()[0];
    let last = container
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .unwrap();
    assert_eq!(last.exit_code, 3);
    events_of(&world, "crasher", &["Started", "BackOff"]).await;
    let starts = wait_file(&world.node_file("starts"), "the second start", |t| {
        t.lines().count() == 2
    })
    .await
    .unwrap();

    let once = world
        .pod_until("once", "Succeeded", |p| phase(p) == "Succeeded")
        .await
        .unwrap();
    assert_eq!(restarts(&once), 0, "OnFailure does not restart an exit 0");
    let failing = world
        .pod_until("failing", "Failed", |p| phase(p) == "Failed")
        .await
        .unwrap();
    assert_eq!(restarts(&failing), 0, "Never does not restart");
    let init_failed = world
        .pod_until("init-fails", "Failed", |p| phase(p) == "Failed")
        .await
        .unwrap();
    assert_eq!(
        condition(&init_failed, "Initialized").as_deref(),
        Some("False")
    );
    assert_eq!(
        world.read("init-fails"),
        "",
        "the container after a failed init container never ran"
    );

    let pid: i32 = starts.lines().last().unwrap().trim().parse().unwrap();
    assert!(
        Path::new(&format!("/proc/{pid}")).exists(),
        "the crasher runs as process {pid}"
    );
    let crasher_ip = restarted
        .status
        .as_ref()
        .and_then(|s| s.pod_ip.clone())
        .unwrap();
    let on_device = format!("{crasher_ip}/24");
    assert!(
        world.netns.addresses().contains(&on_device),
        "{}",
        world.netns.addresses()
    );
    world
        .pods()
        .delete("crasher", &DeleteParams::default())
        .await
        .unwrap();
    let pods = world.pods();
    wait_for(
        "the deleted pod removed by the runner",
        Duration::from_secs(60),
        || async { Ok(pods.get_opt("crasher").await?.is_none().then_some(())) },
    )
    .await
    .unwrap();
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "process {pid} was stopped"
    );
    assert!(
        !world.netns.addresses().contains(&on_device),
        "the pod's IP {crasher_ip} was removed: {}",
        world.netns.addresses()
    );
    world.stop().await;
}

#[tokio::test]
async fn unsupported_fields_keep_a_pod_pending_by_name_and_a_missing_config_map_waits() {
    let _serial = SERIAL.lock().await;
    let world = World::start(3).await.unwrap();
    let mut probed = shell("main", "sleep 1000");
    probed["livenessProbe"] = json!({"grpc": {"port": 8080}});
    probed["resources"] = json!({"limits": {"cpu": "1"}});
    world
        .create(pod("refused", "Always", json!({"containers": [probed]})))
        .await
        .unwrap();
    let refused = world
        .pod_until("refused", "refused by name", |p| {
            p.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("UnsupportedPodSpec")
        })
        .await
        .unwrap();
    let status = refused.status.clone().unwrap();
    let message = status.message.unwrap();
    assert!(
        message.contains("spec.containers[0].livenessProbe.grpc"),
        "{message}"
    );
    assert!(
        message.contains("spec.containers[0].resources.limits"),
        "{message}"
    );
    assert_eq!(status.phase.as_deref(), Some("Pending"));
    events_of(&world, "refused", &["UnsupportedPodSpec"]).await;
    let ready = status
        .conditions
        .unwrap()
        .into_iter()
        .find(|c| c.type_ == "Ready")
        .unwrap();
    assert_eq!(
        (ready.status.as_str(), ready.reason.as_deref()),
        ("False", Some("UnsupportedPodSpec"))
    );

    // A pod without the label is kwok's: it turns Running with kwok's IP. Once kwok has done
    // that for a pod created after the refused one, it has passed over the refused one.
    let mut unmarked = pod(
        "kwoks",
        "Always",
        json!({"containers": [shell("main", "sleep 1000")]}),
    );
    unmarked["metadata"]["labels"] = json!({});
    world.create(unmarked).await.unwrap();
    let kwoks = world
        .pod_until("kwoks", "Running by kwok", |p| phase(p) == "Running")
        .await
        .unwrap();
    let kwok_ip = kwoks.status.unwrap().pod_ip.unwrap();
    assert!(
        kwok_ip.starts_with("10.244."),
        "kwok's IP, not the runner's: {kwok_ip}"
    );
    let still = world.pods().get("refused").await.unwrap();
    assert_eq!(phase(&still), "Pending", "kwok left the runner's pod alone");
    assert_eq!(
        still.status.and_then(|s| s.reason).as_deref(),
        Some("UnsupportedPodSpec")
    );

    let mut waiting = shell("main", "cat /etc/later/k > /out/later; sleep 1000");
    waiting["volumeMounts"]
        .as_array_mut()
        .unwrap()
        .push(json!({"name": "later", "mountPath": "/etc/later"}));
    world
        .create(pod("waiting", "Always", json!({
            "containers": [waiting],
            "volumes": [
                {"name": "out", "hostPath": {"path": "/var/lib/cspr", "type": "DirectoryOrCreate"}},
                {"name": "later", "configMap": {"name": "later"}},
            ],
        })))
        .await
        .unwrap();
    let waiting = world
        .pod_until("waiting", "waiting for its ConfigMap", |p| {
            p.status.as_ref().and_then(|s| s.reason.as_deref()) == Some("FailedMount")
        })
        .await
        .unwrap();
    assert_eq!(phase(&waiting), "Pending");
    world
        .create(
            json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "later"},
                       "data": {"k": "v"}}),
        )
        .await
        .unwrap();
    let running = world
        .pod_until("waiting", "Running once its ConfigMap exists", |p| {
            phase(p) == "Running"
        })
        .await
        .unwrap();
    assert_eq!(
        running.status.and_then(|s| s.reason),
        None,
        "the pending reason is cleared"
    );
    wait_file(&world.node_file("later"), "the ConfigMap's file", |t| {
        t == "v"
    })
    .await
    .unwrap();
    world.stop().await;
}

/// Waits until pod `name` has Events of every reason in `reasons` (kube's Recorder writes
/// events.k8s.io Events; the core API shows them too).
async fn events_of(world: &World, name: &str, reasons: &[&str]) -> Vec<String> {
    let events: Api<k8s_openapi::api::core::v1::Event> =
        Api::namespaced(world.client.clone(), &world.namespace);
    let selector = format!("involvedObject.name={name}");
    wait_for(
        &format!("Events {reasons:?} of pod {name}"),
        Duration::from_secs(30),
        || async {
            let list = events
                .list(&kube::api::ListParams::default().fields(&selector))
                .await?;
            let found: Vec<String> = list.items.iter().filter_map(|e| e.reason.clone()).collect();
            Ok(reasons
                .iter()
                .all(|r| found.iter().any(|f| f == r))
                .then_some(found))
        },
    )
    .await
    .unwrap()
}

fn started(pod: &Pod) -> Option<bool> {
    pod.status
        .as_ref()?
        .container_statuses
        .as_ref()?
        .first()?
        .started
}

#[tokio::test]
async fn exec_probes_gate_start_and_readiness_and_a_failed_liveness_probe_restarts() {
    let _serial = SERIAL.lock().await;
    let world = World::start(4).await.unwrap();
    let mut container = shell(
        "main",
        "rm -f /out/kill-me; grep CapBnd /proc/self/status > /out/probed-capbnd; \
         echo $$$$ >> /out/probed-starts; exec sleep 1000",
    );
    let exec = |command: &[&str]| json!({"exec": {"command": command}, "periodSeconds": 1});
    container["startupProbe"] = exec(&["test", "-e", "/out/started"]);
    container["startupProbe"]["failureThreshold"] = json!(60);
    container["readinessProbe"] = exec(&["test", "-e", "/out/ready"]);
    container["livenessProbe"] = exec(&["test", "!", "-e", "/out/kill-me"]);
    container["livenessProbe"]["failureThreshold"] = json!(2);
    container["securityContext"] = json!({"privileged": true});
    world
        .create(pod("probed", "Always", json!({"containers": [container]})))
        .await
        .unwrap();

    let running = world
        .pod_until("probed", "Running, not started", |p| {
            phase(p) == "Running" && started(p) == Some(false)
        })
        .await
        .unwrap();
    assert_eq!(condition(&running, "Ready").as_deref(), Some("False"));
    std::fs::write(world.node_file("started"), "").unwrap();
    let unready = world
        .pod_until("probed", "started once its startup probe passes", |p| {
            started(p) == Some(true)
        })
        .await
        .unwrap();
    assert_eq!(
        condition(&unready, "Ready").as_deref(),
        Some("False"),
        "its readiness probe fails"
    );
    std::fs::write(world.node_file("ready"), "").unwrap();
    world
        .pod_until("probed", "Ready once its readiness probe passes", |p| {
            condition(p, "Ready").as_deref() == Some("True")
        })
        .await
        .unwrap();
    std::fs::write(world.node_file("kill-me"), "").unwrap();
    let restarted = world
        .pod_until(
            "probed",
            "restarted after its liveness probe failed, Ready again",
            |p| restarts(p) == 1 && condition(p, "Ready").as_deref() == Some("True"),
        )
        .await
        .unwrap();
    let status = &restarted.status.unwrap().container_statuses.unwrap()[0];
    let last = status
        .last_state
        .as_ref()
        .and_then(|s| s.terminated.as_ref())
        .unwrap();
    assert_eq!(last.exit_code, 143, "stopped by SIGTERM");
    events_of(&world, "probed", &["Started", "Unhealthy", "Killing"]).await;
    // tcpSocket and httpGet probes, to the pod's IP, of a server in the container.
    let mut server = shell("http", "cd /tmp && exec python3 -m http.server 8080");
    server["ports"] = json!([{"name": "http", "containerPort": 8080}]);
    server["readinessProbe"] = json!({"httpGet": {"port": 8080, "path": "/"}, "periodSeconds": 1});
    server["livenessProbe"] = json!({"tcpSocket": {"port": "http"}, "periodSeconds": 1});
    world
        .create(pod("served", "Always", json!({"containers": [server]})))
        .await
        .unwrap();
    let served = world
        .pod_until("served", "Ready by its httpGet probe", |p| {
            condition(p, "Ready").as_deref() == Some("True")
        })
        .await
        .unwrap();
    assert_eq!(restarts(&served), 0, "its tcpSocket liveness probe passes");
    let own = std::fs::read_to_string("/proc/self/status").unwrap();
    let own = own.lines().find(|l| l.starts_with("CapBnd")).unwrap();
    assert_eq!(
        world.read("probed-capbnd").trim(),
        own,
        "a privileged container keeps every capability"
    );
    let starts = world.read("probed-starts");
    assert_eq!(starts.lines().count(), 2, "{starts}");
    world.stop().await;
}

/// A mon as Rook lays it out (simplified: its keyring made by an init container instead of
/// Rook's Secret): the config from a ConfigMap projected at `/etc/ceph`, the mon's data and
/// admin socket on the node's `hostPath`s, `--public-addr` from `fieldRef: status.podIP`, the
/// store made by an init container, a startup probe on the admin socket.
#[tokio::test]
async fn a_rook_layout_mon_pod_runs_ceph_mon_reachable_at_its_pod_ip() {
    let _serial = SERIAL.lock().await;
    let world = World::start(5).await.unwrap();
    let fsid = "6e7c1f1a-3c1e-4a57-9a4e-0c2b8f6f2d11";
    world
        .create(json!({"apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "rook-config-override"},
        "data": {"config": format!(
            "[global]\nfsid = {fsid}\nauth_cluster_required = cephx\n\
             auth_service_required = cephx\nauth_client_required = cephx\n\
             mon_data_avail_crit = 0\nlog_to_stderr = true\nlog_file = \"\"\n"
        )}}))
        .await
        .unwrap();
    let data = "/var/lib/ceph/mon/ceph-a";
    let keyring = format!("{data}/keyring");
    let mon_host = "[v2:$(ROOK_POD_IP):3300,v1:$(ROOK_POD_IP):6789]";
    let env =
        json!([{"name": "ROOK_POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}]);
    let mounts = json!([
        {"name": "rook-config-override", "mountPath": "/etc/ceph", "readOnly": true},
        {"name": "ceph-daemon-data", "mountPath": data},
        {"name": "ceph-daemons-sock-dir", "mountPath": "/run/ceph"},
    ]);
    let container = |name: &str, command: serde_json::Value, args: serde_json::Value| {
        json!({"name": name, "image": "quay.io/ceph/ceph:v18.2.7", "command": command,
               "args": args, "env": env, "volumeMounts": mounts})
    };
    let keyring_init = format!(
        "ceph-authtool --create-keyring {keyring} --gen-key -n mon. --cap mon 'allow *' && \
         ceph-authtool {keyring} --gen-key -n client.admin --cap mon 'allow *'"
    );
    let mkfs = format!(
        "monmaptool --create --fsid {fsid} --addv a {mon_host} /tmp/monmap && \
         ceph-mon --mkfs -i a --monmap /tmp/monmap --keyring {keyring} --mon-data {data}/data"
    );
    let mut mon = container(
        "mon",
        json!(["ceph-mon"]),
        json!([
            "--foreground",
            "--id=a",
            format!("--mon-data={data}/data"),
            format!("--keyring={keyring}"),
            "--public-addr=$(ROOK_POD_IP)",
            format!("--mon-host={mon_host}"),
            "--admin-socket=/run/ceph/ceph-mon.a.asok",
        ]),
    );
    mon["startupProbe"] = json!({"exec": {"command": ["ceph", "--admin-daemon", "/run/ceph/ceph-mon.a.asok", "mon_status"]},
                                 "periodSeconds": 2, "timeoutSeconds": 20, "failureThreshold": 30});
    world
        .create(pod("rook-ceph-mon-a", "Always", json!({
            "initContainers": [
                container("keyring", json!(["/bin/sh", "-c"]), json!([keyring_init])),
                container("init-mon-fs", json!(["/bin/sh", "-c"]), json!([mkfs])),
            ],
            "containers": [mon],
            "volumes": [
                {"name": "rook-config-override", "projected": {"sources": [
                    {"configMap": {"name": "rook-config-override", "items": [{"key": "config", "path": "ceph.conf", "mode": 0o444}]}},
                ]}},
                {"name": "ceph-daemon-data", "hostPath": {"path": "/var/lib/rook/mon-a/data", "type": "DirectoryOrCreate"}},
                {"name": "ceph-daemons-sock-dir", "hostPath": {"path": "/var/lib/rook/exporter", "type": "DirectoryOrCreate"}},
            ],
        })))
        .await
        .unwrap();
    let ready = world
        .pod_until(
            "rook-ceph-mon-a",
            "Ready (its startup probe on the admin socket passed)",
            |p| condition(p, "Ready").as_deref() == Some("True"),
        )
        .await
        .unwrap();
    let ip = ready.status.unwrap().pod_ip.unwrap();

    // A client in the pods' network namespace reaches the mon at the pod IP the status reports.
    let node_data = world.dir.path().join("node/var/lib/rook/mon-a/data");
    let quorum = CephInstall::root_from_env()
        .unwrap()
        .sharing(&node_data)
        .command("ceph", Some(&world.netns.name))
        .args([
            "-c",
            "/dev/null",
            "--mon-host",
            &ip,
            "-n",
            "client.admin",
            "--keyring",
        ])
        .arg(node_data.join("keyring"))
        .args(["quorum_status", "-f", "json", "--connect-timeout", "30"])
        .output(Duration::from_secs(60))
        .await
        .unwrap();
    let quorum: serde_json::Value = serde_json::from_slice(&quorum).unwrap();
    assert_eq!(quorum["quorum_names"], json!(["a"]), "{quorum}");
    let addr = quorum["monmap"]["mons"][0]["public_addr"].as_str().unwrap();
    assert!(
        addr.starts_with(&format!("{ip}:6789")),
        "mon.a at {addr}, the pod's IP {ip}"
    );
    world.stop().await;
}

//! The Helm charts of `deploy/helm` installed into the real API servers by the real Helm 4, and
//! their daemons run with what the charts install: `charts_install_and_their_daemons_work`.
//!
//! The agent chart goes into both clusters and the operator chart into east, as a user installs
//! them (docs/clusterset-agent.md and docs/operator.md, "Install with Helm"): the release
//! [`RELEASE`] in a namespace of its own (so that no name collides with the plain objects of
//! `deploy/` the other scenarios use), the broker kubeconfig Secret made from a token of the
//! hub's `agent-<id>` ServiceAccount, the operator's CRD (already applied by [`crate::install`],
//! without Helm's ownership marks) adopted with Helm 4's `--take-ownership`. Every object of
//! each release must be accepted: Helm exits 0 (with `--wait`, the Deployments rolled out on
//! kwok's node), `helm status` says `deployed`, and every object of `helm get manifest` exists
//! and carries the release's ownership annotations.
//!
//! Then the daemons run as processes the way the charts' Deployments run them: the container's
//! `args` and `env` read from `helm get manifest` (the Downward API's `metadata.name` and
//! `metadata.namespace` given as a pod would get them, the Secret volume's files written from
//! the Secret in the cluster and the paths into it mapped to those files), and a kubeconfig with
//! a token of the chart's ServiceAccount (TokenRequest), so that what is tested is the charts'
//! RBAC and settings. Only the listening addresses (loopback, port 0) and the operator's
//! `--nameserver` (in a pod, CoreDNS forwards the clusterset zone to the agent's DNS Service)
//! are the harness's.
//!
//! Checked: both agents hold their leader Lease (the Lease the chart's Role grants, in the
//! release namespace); a Service with a pod exported in east is imported in west with a
//! clusterset IP, and west's agent answers its name; the operator is ready, holds its leader
//! Lease and brings the OSDs of a Rook-layout namespace to their global IPs; unexporting
//! removes the imports; no daemon logged a refusal (a 403: RBAC the chart forgot). Last, `helm
//! uninstall` removes every object of the releases but the operator's CRD, which
//! `helm.sh/resource-policy: keep` keeps.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use anyhow::{Context, anyhow, bail, ensure};
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{PodSpec, Secret};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use kube::api::{Api, DeleteParams, DynamicObject, ListParams};
use kube::core::GroupVersionKind;
use kube::discovery::pinned_kind;
use kube_fake::chart::Rendered;
use kube_fake::helm::{Failure, Helm, Kube};
use mcs_types::v1beta1::{ServiceExport, ServiceImport};
use serde_json::{Value, json};

use crate::{
    Agent, Cluster, DNS_LISTENING, Daemon, Settings, Target, gateway, scenarios, wait_for,
};

/// The release name of both charts: their objects are `e2e-helm-clusterset-agent` and
/// `e2e-helm-mcs-ceph-operator`, beside deploy/'s `clusterset-agent` and `mcs-ceph-operator`.
pub const RELEASE: &str = "e2e-helm";
/// The agent's chart.
pub const AGENT_CHART: &str = "deploy/helm/clusterset-agent";
/// The operator's chart.
pub const OPERATOR_CHART: &str = "deploy/helm/mcs-ceph-operator";
/// The gateway chart.
pub const GATEWAY_CHART: &str = "deploy/helm/clusterset-gateway";
/// The operator chart's CRD, which `helm uninstall` keeps.
pub const OPERATOR_CRD: &str = "cephclusteraddressings.clusterset.io";
/// The broker kubeconfig Secret the agent chart mounts (its `broker.kubeconfigSecret` default).
const BROKER_SECRET: &str = "clusterset-broker";
/// The OSDs of the Rook layout the operator reconciles.
const OSDS: u32 = 2;
const LONG: Duration = Duration::from_secs(60);

/// Installs both charts into `target`'s clusters, runs their daemons with what the charts
/// install, checks an export → import and the operator, and uninstalls (the module's docs).
/// Holds the suite's serial lock throughout: no other scenario's agents run meanwhile. How long
/// it ran after the set-up (building the daemons, starting the clusters, installing the CRDs
/// and the hub), as the other scenarios count.
pub async fn charts_install_and_their_daemons_work(target: &Target) -> anyhow::Result<Duration> {
    let _serial = crate::exclusive().await;
    let settings = Settings::from_env()?;
    let (east, west, _faults) = crate::connect(target).await?;
    let set_up = Instant::now();
    crate::install(&east, &west).await?;
    scenarios::ensure_ceph_cluster_crd(&east).await?;
    println!(
        "installed the CRDs and the hub on both clusters in {:.1?}",
        set_up.elapsed()
    );
    let started = Instant::now();
    let helm = Helm::find().map_err(|message| anyhow!(message))?;
    let dir = tempfile::tempdir()?;
    let mut run = Run {
        logs: crate::log_dir(dir.path())?,
        // The user's clusters pull images: the charts' pods would not start there (or, with the
        // images loaded, would be a second agent per cluster id); kwok's pods run nothing.
        pods: matches!(target, Target::Local(_)),
        settings,
        helm,
        east,
        west,
        dir,
        agent_namespace: crate::run_name("e2e-helm-agent")?,
        gateway_namespace: crate::run_name("e2e-helm-gateway")?,
        operator_namespace: crate::run_name("e2e-helm-operator")?,
        namespace: crate::run_name("e2e-charts")?,
        releases: Vec::new(),
        agents: Vec::new(),
        operator: None,
    };
    let mut outcome = run.scenario().await;
    if outcome.is_err() {
        run.print_logs();
        // A wait that timed out is often RBAC the chart forgot: say so first.
        let refused = run.refusals();
        if !refused.is_empty() {
            outcome = outcome.context(format!(
                "the API servers refused the charts' daemons (RBAC the charts do not grant?):\n{}",
                refused.join("\n")
            ));
        }
    }
    let cleaned = run.clean_up().await;
    outcome?;
    cleaned?;
    Ok(started.elapsed())
}

/// One run of the scenario: the clusters, what it installed and started (for the clean-up).
struct Run {
    settings: Settings,
    helm: Helm,
    east: Cluster,
    west: Cluster,
    dir: tempfile::TempDir,
    logs: PathBuf,
    /// Whether the charts' pods may run (`--wait` for them): on the suite's own clusters.
    pods: bool,
    /// The agent release's namespace (both clusters).
    agent_namespace: String,
    /// The gateway release's namespace (both clusters).
    gateway_namespace: String,
    /// The operator release's namespace (east).
    operator_namespace: String,
    /// The test's own namespace (both clusters): the exported Service and the Rook layout.
    namespace: String,
    /// Installed releases not yet uninstalled: (cluster id, namespace).
    releases: Vec<(String, String)>,
    agents: Vec<Agent>,
    operator: Option<Daemon>,
}

/// The workload of a release whose one container the harness runs as a process.
#[derive(Debug, Clone, Copy)]
enum Workload {
    /// The agent's and the operator's.
    Deployment,
    /// The gateway's, on a node whose IP (`status.hostIP`) is `host_ip`.
    DaemonSet { host_ip: std::net::Ipv4Addr },
}

impl Workload {
    fn kind(self) -> &'static str {
        match self {
            Self::Deployment => "Deployment",
            Self::DaemonSet { .. } => "DaemonSet",
        }
    }
}

/// What a chart's Deployment (or DaemonSet) runs, read from its manifest, as a process runs it.
#[derive(Debug)]
struct ChartProcess {
    /// The ServiceAccount of the pod.
    service_account: String,
    /// The pod name (`POD_NAME` of the Downward API) the process gets.
    pod_name: String,
    /// The container's `args`.
    args: Vec<String>,
    /// The container's `env`, resolved as the kubelet resolves it for a pod.
    env: Vec<(String, String)>,
}

impl Run {
    fn cluster(&self, id: &str) -> anyhow::Result<&Cluster> {
        [&self.east, &self.west]
            .into_iter()
            .find(|c| c.id == id)
            .with_context(|| format!("no cluster {id}"))
    }

    /// Helm's view of `cluster`: its admin kubeconfig and context.
    fn kube(&self, cluster: &Cluster) -> anyhow::Result<Kube> {
        Ok(Kube {
            kubeconfig: cluster.admin_kubeconfig(self.dir.path())?,
            context: cluster.context.clone(),
        })
    }

    async fn scenario(&mut self) -> anyhow::Result<()> {
        // 1. The agent chart into both clusters, the operator chart into east.
        for (n, id) in [(1u8, "east"), (2u8, "west")] {
            self.install_agent_chart(n, id).await?;
        }
        self.install_operator_chart().await?;
        for (id, namespace) in self.releases.clone() {
            self.release_accepted(&id, &namespace).await?;
        }

        // 2. The agents, as the chart's Deployment runs them.
        for id in ["east", "west"] {
            let agent = self.start_agent(id).await?;
            self.agents.push(agent);
        }

        // 3. Export in east -> import in west, DNS in west.
        crate::create_namespace(&[&self.east, &self.west], &self.namespace).await?;
        self.export_is_imported().await?;

        // 3b. The gateway chart into both clusters; its DaemonSet's process in a gateway
        // namespace of the test per cluster: both publish and route, east's DNATs the export.
        for (n, id) in [(1u8, "east"), (2u8, "west")] {
            self.install_gateway_chart(n, id).await?;
            self.release_accepted(id, &self.gateway_namespace.clone())
                .await?;
        }
        self.gateways_work().await?;

        // 4. The operator, as its chart's Deployment runs it, on a Rook layout.
        let operator = self.start_operator().await?;
        self.operator = Some(operator);
        let rook = Instant::now();
        scenarios::rook_layout(&self.east, &self.namespace, OSDS).await?;
        let west_dns = self.agents.get(1).context("no agent of west")?.dns;
        let osds =
            scenarios::osds_at_global_ips(&self.east, &self.namespace, OSDS, west_dns, rook).await;
        if osds.is_err() {
            let east_dns = self.agents.first().context("no agent of east")?.dns;
            let mut answers = Vec::new();
            for id in 0..OSDS {
                let name = format!(
                    "east.rook-ceph-osd-{id}.{}.svc.clusterset.local",
                    self.namespace
                );
                let answer = crate::dig(east_dns, &name, "A").await;
                answers.push(format!("east's agent answers {name}: {answer:?}"));
            }
            eprintln!(
                "---- {} in east ----\n{}\n{}",
                self.namespace,
                namespace_state(&self.east, &self.namespace).await,
                answers.join("\n")
            );
        }
        osds?;

        // 5. Unexport everything, stop the daemons: no refusal in their logs.
        if let Some(operator) = self.operator.as_mut() {
            operator.terminate().await?;
        }
        self.unexport_all().await?;
        for agent in &mut self.agents {
            agent.daemon.terminate().await?;
        }
        self.no_refusals()?;

        // 6. Uninstall: every object goes but the operator's CRD.
        for (id, namespace) in self.releases.clone() {
            self.uninstall(&id, &namespace).await?;
        }
        let crds: Api<CustomResourceDefinition> = Api::all(self.east.client.clone());
        let crd = crds
            .get_opt(OPERATOR_CRD)
            .await?
            .with_context(|| format!("helm uninstall deleted the CRD {OPERATOR_CRD}"))?;
        ensure!(
            crd.metadata.deletion_timestamp.is_none(),
            "helm uninstall is deleting the CRD {OPERATOR_CRD}, which the chart keeps \
             (helm.sh/resource-policy: keep)"
        );
        println!("the CRD {OPERATOR_CRD} is kept after helm uninstall");
        Ok(())
    }

    /// The Secret `clusterset-broker` in `namespace` of `cluster`, as docs/clusterset-agent.md
    /// says: a kubeconfig with a token of the hub's `agent-<id>` and the hub's CA embedded.
    async fn broker_secret(
        &self,
        cluster: &Cluster,
        id: &str,
        namespace: &str,
    ) -> anyhow::Result<()> {
        let broker = self
            .east
            .service_account_kubeconfig(
                crate::BROKER_NAMESPACE,
                &format!("agent-{id}"),
                self.dir.path(),
            )
            .await?;
        cluster
            .apply(&json!({
                "apiVersion": "v1", "kind": "Secret",
                "metadata": {"name": BROKER_SECRET, "namespace": namespace},
                "data": {"kubeconfig": base64(&embedded_ca(&broker)?)?},
            }))
            .await
    }

    /// `helm install` of the agent chart into cluster `id` with the values a user gives:
    /// cluster id, CIDRs as the harness's agents have them (`242.<n>.0.0/16` global,
    /// `243.<n>.0.0/16` clusterset), Lighthouse names (which the operator resolves), and the
    /// broker Secret made first, as docs/clusterset-agent.md says.
    async fn install_agent_chart(&mut self, n: u8, id: &str) -> anyhow::Result<()> {
        let cluster = self.cluster(id)?.clone();
        let namespace = self.agent_namespace.clone();
        crate::create_namespace(&[&cluster], &namespace).await?;
        self.releases.push((id.to_owned(), namespace.clone()));
        self.broker_secret(&cluster, id, &namespace).await?;
        let mut values = json!({
            "clusterId": id,
            "globalCidrs": [format!("242.{n}.0.0/16")],
            "clustersetCidrs": [format!("243.{n}.0.0/16")],
            "dns": {"lighthouseNames": true},
        });
        if !self.pods {
            values["replicas"] = json!(0);
        }
        self.helm_install(&cluster, AGENT_CHART, &namespace, &[], values)
            .await
    }

    /// `helm install` of the operator chart into east with its defaults, adopting the CRD that
    /// [`crate::install`] applied without Helm's marks (`--take-ownership`); without it, Helm
    /// refuses the CRD and installs nothing.
    async fn install_operator_chart(&mut self) -> anyhow::Result<()> {
        let east = self.east.clone();
        let namespace = self.operator_namespace.clone();
        crate::create_namespace(&[&east], &namespace).await?;
        let values = if self.pods {
            json!({})
        } else {
            json!({"replicas": 0})
        };
        let (helm, kube, chart, ns, plain_values) = (
            self.helm.clone(),
            self.kube(&east)?,
            crate::repo_root().join(OPERATOR_CHART),
            namespace.clone(),
            values.clone(),
        );
        let refused = blocking(move || {
            Ok(helm
                .install(&kube, &chart, RELEASE, &ns, &[], &plain_values)
                .err())
        })
        .await?
        .context(
            "helm install without --take-ownership installed the CRD that Helm does not own",
        )?;
        ensure!(
            refused.message.contains(OPERATOR_CRD),
            "helm install without --take-ownership failed, but not over the CRD: {refused}"
        );
        match self.helm_status(&east, &namespace).await {
            Err(error) if format!("{error:#}").contains("not found") => {}
            other => bail!("the refused install left a release behind: {other:?}"),
        }
        println!(
            "without --take-ownership: refused, nothing installed ({})",
            refused.message.trim()
        );
        self.releases.push((east.id.clone(), namespace.clone()));
        self.helm_install(
            &east,
            OPERATOR_CHART,
            &namespace,
            &["--take-ownership"],
            values,
        )
        .await
    }

    async fn helm_install(
        &self,
        cluster: &Cluster,
        chart: &str,
        namespace: &str,
        options: &[&str],
        values: Value,
    ) -> anyhow::Result<()> {
        let kube = self.kube(cluster)?;
        let mut options: Vec<String> = options.iter().map(|o| (*o).to_owned()).collect();
        options.push("--create-namespace".to_owned());
        if self.pods {
            options.extend(["--wait".to_owned(), "--timeout=3m".to_owned()]);
        }
        let (helm, chart_path, ns) = (
            self.helm.clone(),
            crate::repo_root().join(chart),
            namespace.to_owned(),
        );
        let started = Instant::now();
        let release = blocking(move || {
            let options: Vec<&str> = options.iter().map(String::as_str).collect();
            helm.install(&kube, &chart_path, RELEASE, &ns, &options, &values)
        })
        .await?;
        let status = release["info"]["status"].as_str().unwrap_or_default();
        ensure!(
            status == "deployed",
            "helm install {RELEASE} {chart} in {}'s {namespace}: status {status:?}, not deployed",
            cluster.id
        );
        println!(
            "helm install {RELEASE} {chart} -n {namespace} into {}: deployed{} in {:.1?}",
            cluster.id,
            if self.pods { " and rolled out" } else { "" },
            started.elapsed()
        );
        Ok(())
    }

    /// The release in `namespace` of cluster `id` is `deployed` (`helm status`) and every
    /// object of `helm get manifest` exists, with the release's ownership annotations.
    async fn release_accepted(&self, id: &str, namespace: &str) -> anyhow::Result<()> {
        let cluster = self.cluster(id)?;
        let status = self.helm_status(cluster, namespace).await?;
        let state = status["info"]["status"].as_str().unwrap_or_default();
        ensure!(
            state == "deployed",
            "helm status {RELEASE} -n {namespace} in {id}: {state:?}"
        );
        let manifest = self.manifest(cluster, namespace).await?;
        let mut kinds = BTreeMap::<String, u32>::new();
        for object in manifest.objects() {
            let (what, found) = get_object(cluster, object, namespace).await?;
            let found = found.with_context(|| {
                format!("{what} of release {RELEASE} ({namespace}) is not in {id}")
            })?;
            let annotations = found.metadata.annotations.unwrap_or_default();
            for (key, want) in [
                ("meta.helm.sh/release-name", RELEASE),
                ("meta.helm.sh/release-namespace", namespace),
            ] {
                ensure!(
                    annotations.get(key).map(String::as_str) == Some(want),
                    "{what} in {id} is not the release's: {key} is {:?}, not {want:?}",
                    annotations.get(key)
                );
            }
            *kinds
                .entry(object["kind"].as_str().unwrap_or_default().to_owned())
                .or_default() += 1;
        }
        println!(
            "release {RELEASE} in {id}'s {namespace}: deployed, all {} objects of its manifest \
             exist and are the release's {kinds:?}",
            manifest.objects().len()
        );
        Ok(())
    }

    async fn helm_status(&self, cluster: &Cluster, namespace: &str) -> anyhow::Result<Value> {
        let (helm, kube, ns) = (self.helm.clone(), self.kube(cluster)?, namespace.to_owned());
        blocking(move || helm.status(&kube, RELEASE, &ns)).await
    }

    async fn manifest(&self, cluster: &Cluster, namespace: &str) -> anyhow::Result<Rendered> {
        let (helm, kube, ns) = (self.helm.clone(), self.kube(cluster)?, namespace.to_owned());
        blocking(move || helm.manifest(&kube, RELEASE, &ns)).await
    }

    /// What the one container of the release's Deployment runs, as a process: its args, its
    /// env resolved as the kubelet does (fieldRefs, the Secret volume's files), and its
    /// ServiceAccount.
    async fn chart_process(
        &self,
        cluster: &Cluster,
        namespace: &str,
        manifest: &Rendered,
        workload: Workload,
    ) -> anyhow::Result<ChartProcess> {
        let kind = workload.kind();
        let objects = manifest.of_kind(kind);
        let [object] = objects.as_slice() else {
            bail!(
                "the release in {namespace} has {} {kind}s, not one",
                objects.len()
            );
        };
        let name = object["metadata"]["name"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let pod: PodSpec = serde_json::from_value(object["spec"]["template"]["spec"].clone())
            .with_context(|| format!("{kind} {name} has no pod template"))?;
        let [container] = pod.containers.as_slice() else {
            bail!(
                "Deployment {name} has {} containers, not one",
                pod.containers.len()
            );
        };
        ensure!(
            container.command.is_none() && container.env_from.is_none(),
            "Deployment {name}'s container sets command or envFrom, which the harness does not run"
        );
        // The volumes' mount paths -> local directories with what the kubelet would put there.
        let mut mounts = Vec::new();
        for mount in container.volume_mounts.iter().flatten() {
            let volume = pod
                .volumes
                .iter()
                .flatten()
                .find(|v| v.name == mount.name)
                .with_context(|| format!("Deployment {name} mounts no volume {}", mount.name))?;
            let local = self
                .dir
                .path()
                .join(format!("{}-{namespace}-volume-{}", cluster.id, volume.name));
            std::fs::create_dir_all(&local)?;
            if let Some(source) = &volume.secret {
                let secret_name = source.secret_name.clone().unwrap_or_default();
                let secrets: Api<Secret> = Api::namespaced(cluster.client.clone(), namespace);
                let secret = secrets.get(&secret_name).await.with_context(|| {
                    format!(
                        "Deployment {name} mounts Secret {secret_name}, which is not in {namespace}"
                    )
                })?;
                let data = secret.data.unwrap_or_default();
                let items: Vec<(String, String)> = match &source.items {
                    Some(items) => items
                        .iter()
                        .map(|i| (i.key.clone(), i.path.clone()))
                        .collect(),
                    None => data.keys().map(|k| (k.clone(), k.clone())).collect(),
                };
                for (key, path) in items {
                    let bytes = data.get(&key).with_context(|| {
                        format!(
                            "Secret {secret_name} has no key {key} (Deployment {name} mounts it)"
                        )
                    })?;
                    std::fs::write(local.join(path), &bytes.0)?;
                }
            } else if volume.empty_dir.is_none() {
                bail!(
                    "Deployment {name}'s volume {} is neither a Secret nor an emptyDir",
                    volume.name
                );
            }
            mounts.push((mount.mount_path.clone(), local));
        }
        let pod_name = format!("{name}-e2e{}", std::process::id());
        let mut env = Vec::new();
        for var in container.env.iter().flatten() {
            let value = match (&var.value, &var.value_from) {
                (Some(value), None) => in_mounts(value, &mounts),
                (None, Some(from)) => {
                    match from.field_ref.as_ref().map(|f| f.field_path.as_str()) {
                        Some("metadata.name") => pod_name.clone(),
                        Some("metadata.namespace") => namespace.to_owned(),
                        Some("status.hostIP") => match workload {
                            Workload::DaemonSet { host_ip } => host_ip.to_string(),
                            Workload::Deployment => bail!(
                                "env {} of {kind} {name} is the node's IP, which the harness gives only to a gateway",
                                var.name
                            ),
                        },
                        _ => bail!(
                            "env {} of Deployment {name} comes from {from:?}, which the harness \
                         does not give",
                            var.name
                        ),
                    }
                }
                (None, None) => String::new(),
                (Some(_), Some(_)) => bail!("env {} has both value and valueFrom", var.name),
            };
            env.push((var.name.clone(), value));
        }
        Ok(ChartProcess {
            service_account: pod
                .service_account_name
                .clone()
                .unwrap_or_else(|| "default".to_owned()),
            pod_name,
            args: container.args.clone().unwrap_or_default(),
            env,
        })
    }

    /// `helm install` of the gateway chart into cluster `id` with the values a user gives (the
    /// harness agents' CIDRs, kwok's pod CIDR, the broker Secret of the agent's hub
    /// credentials). On the suite's own clusters kwok's node is labelled the gateway node, so
    /// the DaemonSet's pod is scheduled and `--wait` waits for it.
    async fn install_gateway_chart(&mut self, n: u8, id: &str) -> anyhow::Result<()> {
        let cluster = self.cluster(id)?.clone();
        let namespace = self.gateway_namespace.clone();
        crate::create_namespace(&[&cluster], &namespace).await?;
        self.releases.push((id.to_owned(), namespace.clone()));
        self.broker_secret(&cluster, id, &namespace).await?;
        if self.pods {
            cluster
                .apply(&json!({
                    "apiVersion": "v1", "kind": "Node",
                    "metadata": {"name": crate::local::NODE, "labels": {"clusterset.io/gateway": "true"}},
                }))
                .await?;
        }
        let values = json!({
            "clusterId": id,
            "globalCidr": format!("242.{n}.0.0/16"),
            "podCidr": "10.244.0.0/16",
            "serviceCidr": "10.96.0.0/12",
            "egressIps": [format!("242.{n}.255.254")],
        });
        self.helm_install(&cluster, GATEWAY_CHART, &namespace, &[], values)
            .await?;
        if self.pods {
            // The DaemonSet's pod was scheduled on the labelled node, and is ready.
            let daemonsets: Api<k8s_openapi::api::apps::v1::DaemonSet> =
                Api::namespaced(cluster.client.clone(), &namespace);
            let ready = daemonsets
                .list(&ListParams::default())
                .await?
                .items
                .iter()
                .filter_map(|d| {
                    d.status
                        .as_ref()
                        .map(|s| (s.desired_number_scheduled, s.number_ready))
                })
                .collect::<Vec<_>>();
            ensure!(
                ready == [(1, 1)],
                "the gateway DaemonSet in {id} is not one ready pod on the labelled node: (desired, ready) {ready:?}"
            );
        }
        Ok(())
    }

    /// Each cluster's gateway as its chart's DaemonSet runs it (args, env with the node's IP
    /// the underlay address, a token of the chart's ServiceAccount, the broker Secret's
    /// kubeconfig), in a gateway namespace of the test, reaching the API servers through
    /// forwarded ports: both publish their records and route to each other, and east's DNATs
    /// the export of step 3 to its pod.
    async fn gateways_work(&self) -> anyhow::Result<()> {
        let ((east_ns, east_ip), (west_ns, west_ip)) = gateway::gateway_nodes("hg")?;
        let mut gateways = Vec::new();
        for (id, netns, host_ip) in [("east", east_ns, east_ip), ("west", west_ns, west_ip)] {
            let cluster = self.cluster(id)?;
            let namespace = &self.gateway_namespace;
            let manifest = self.manifest(cluster, namespace).await?;
            let process = self
                .chart_process(
                    cluster,
                    namespace,
                    &manifest,
                    Workload::DaemonSet { host_ip },
                )
                .await?;
            let kubeconfig = cluster
                .service_account_kubeconfig(namespace, &process.service_account, self.dir.path())
                .await?;
            let mut env = vec![(
                "KUBECONFIG".to_owned(),
                netns
                    .forwarded_kubeconfig(&kubeconfig)?
                    .display()
                    .to_string(),
            )];
            for (name, value) in &process.env {
                let value = if name == "CLUSTERSET_BROKER_KUBECONFIG" {
                    netns
                        .forwarded_kubeconfig(Path::new(value))?
                        .display()
                        .to_string()
                } else {
                    value.clone()
                };
                env.push((name.clone(), value));
            }
            gateways.push(gateway::Gateway::spawn(
                netns,
                &self.settings.binary("clusterset-gateway")?,
                &process.args,
                &env,
                self.logs.join(format!("chart-gateway-{id}.log")),
            )?);
            println!(
                "gateway {id} as the chart runs it (ServiceAccount {namespace}/{}, {} env vars, args {:?}, node IP {host_ip})",
                process.service_account,
                process.env.len(),
                process.args
            );
        }
        let [east_gw, west_gw] = gateways.as_mut_slice() else {
            bail!("two gateways were started");
        };
        gateway::gateways_meet(&self.east, east_gw, west_gw).await?;
        let global = gateway::global_ip(&self.east, &self.namespace).await?;
        let pod = gateway::pod_ip(&self.east, &self.namespace, "web-0").await?;
        gateway::dnat_becomes(east_gw, &global, Some(&pod)).await?;
        println!(
            "the charts' gateways published their records, route to each other, and east's maps {global} to web-0 ({pod})"
        );
        for gateway in gateways.iter_mut() {
            gateway.terminate().await?;
        }
        for id in ["east", "west"] {
            let records: Api<mcs_controller::broker::GatewayRecord> =
                Api::namespaced(self.east.client.clone(), &crate::records_namespace(id)?);
            records.delete(id, &DeleteParams::default()).await?;
        }
        Ok(())
    }

    /// The agent of cluster `id` as the chart runs it, with a token of the chart's
    /// ServiceAccount; ready, and holding the leader Lease the chart's Role grants.
    async fn start_agent(&self, id: &str) -> anyhow::Result<Agent> {
        let cluster = self.cluster(id)?;
        let namespace = &self.agent_namespace;
        let manifest = self.manifest(cluster, namespace).await?;
        let process = self
            .chart_process(cluster, namespace, &manifest, Workload::Deployment)
            .await?;
        let kubeconfig = cluster
            .service_account_kubeconfig(namespace, &process.service_account, self.dir.path())
            .await?;
        let broker = process
            .env
            .iter()
            .find(|(k, _)| k == "CLUSTERSET_BROKER_KUBECONFIG")
            .map(|(_, v)| PathBuf::from(v))
            .context("the chart's agent has no CLUSTERSET_BROKER_KUBECONFIG")?;
        crate::no_other_agent(&self.east, id).await?;
        let mut daemon = Daemon::new(
            &format!("chart agent {id}"),
            &self.settings.binary("clusterset-agent")?,
            process.args.clone(),
            &kubeconfig,
            "--http-listen",
            &self.logs,
        )
        .listening("--dns-listen", DNS_LISTENING);
        for (name, value) in &process.env {
            daemon = daemon.env(name, value);
        }
        let mut agent = Agent {
            cluster_id: id.to_owned(),
            dns: std::net::SocketAddr::from(([127, 0, 0, 1], 0)),
            broker_kubeconfig: broker,
            daemon,
        };
        let started = Instant::now();
        agent.start().await?;
        let lease = leader_lease(&manifest)?;
        holds_lease(cluster, namespace, &lease, &process.pod_name).await?;
        wait_for(&format!("agent {id} to report leading"), LONG, || async {
            Ok((agent.daemon.metric("clusterset_agent_leader").await? == 1.0).then_some(()))
        })
        .await?;
        println!(
            "agent {id} as the chart runs it (ServiceAccount {namespace}/{}, {} env vars, args \
             {:?}): ready in {:.1?}, DNS on {}, leads ({namespace}/{lease} held by {})",
            process.service_account,
            process.env.len(),
            process.args,
            started.elapsed(),
            agent.dns,
            process.pod_name
        );
        Ok(agent)
    }

    /// A Service with a pod behind it, exported in east: imported in west with a clusterset IP,
    /// which west's agent answers for its name.
    async fn export_is_imported(&self) -> anyhow::Result<()> {
        let (east, west, namespace) = (&self.east, &self.west, self.namespace.as_str());
        east.apply(&scenarios::service(namespace, 80)).await?;
        scenarios::backend(east, namespace).await?;
        let exported = Instant::now();
        east.apply(&scenarios::export(namespace)).await?;
        let (ips, by_source) = scenarios::imported(west, namespace, "web", &["east"]).await?;
        println!(
            "export in east -> import in west (the charts' agents): {:.1?} (ips {ips:?}, \
             endpoints {by_source:?})",
            exported.elapsed()
        );
        let west_agent = self.agents.get(1).context("no agent of west")?;
        let name = format!("web.{namespace}.svc.clusterset.local");
        let dns = west_agent.dns;
        let answers = wait_for("west's DNS answer", LONG, || {
            let (name, want) = (name.clone(), ips.clone());
            async move {
                let answers = crate::dig(dns, &name, "A").await?;
                Ok((answers == want).then_some(answers))
            }
        })
        .await?;
        println!("dig @{dns} (west's chart agent) {name} A -> {answers:?}");
        Ok(())
    }

    /// The operator as its chart runs it (all namespaces, the ClusterRole; leader election),
    /// with a token of the chart's ServiceAccount and east's agent as its nameserver: ready
    /// (`/readyz` 200) and holding its leader Lease.
    async fn start_operator(&self) -> anyhow::Result<Daemon> {
        let east = &self.east;
        let namespace = &self.operator_namespace;
        let manifest = self.manifest(east, namespace).await?;
        let process = self
            .chart_process(east, namespace, &manifest, Workload::Deployment)
            .await?;
        let kubeconfig = east
            .service_account_kubeconfig(namespace, &process.service_account, self.dir.path())
            .await?;
        let mut args = process.args.clone();
        // In a pod, CoreDNS forwards the clusterset zone to the agent's DNS Service.
        let east_agent = self.agents.first().context("no agent of east")?;
        args.push(format!("--nameserver={}", east_agent.dns));
        let mut operator = Daemon::new(
            "chart operator east",
            &self.settings.binary("mcs-ceph-operator")?,
            args,
            &kubeconfig,
            "--listen",
            &self.logs,
        );
        for (name, value) in &process.env {
            operator = operator.env(name, value);
        }
        let started = Instant::now();
        operator.start().await?;
        let lease = leader_lease(&manifest)?;
        holds_lease(east, namespace, &lease, &process.pod_name).await?;
        println!(
            "operator as its chart runs it (ServiceAccount {namespace}/{}): ready in {:.1?}, \
             leads ({namespace}/{lease} held by {})",
            process.service_account,
            started.elapsed(),
            process.pod_name
        );
        Ok(operator)
    }

    /// Deletes every ServiceExport of the test namespace in east (the operator's and `web`)
    /// and waits until no ServiceImport of it is left in either cluster: the agents removed
    /// east's records from the hub and the imports (their delete rights).
    async fn unexport_all(&self) -> anyhow::Result<()> {
        let namespace = self.namespace.as_str();
        let exports: Api<ServiceExport> = Api::namespaced(self.east.client.clone(), namespace);
        exports
            .delete_collection(&DeleteParams::default(), &ListParams::default())
            .await?;
        let started = Instant::now();
        for cluster in [&self.east, &self.west] {
            let imports: Api<ServiceImport> = Api::namespaced(cluster.client.clone(), namespace);
            wait_for(
                &format!("{}'s ServiceImports of {namespace} to go", cluster.id),
                LONG,
                || {
                    let imports = imports.clone();
                    async move {
                        let left = imports.list(&ListParams::default()).await?;
                        Ok(left.items.is_empty().then_some(()))
                    }
                },
            )
            .await?;
        }
        println!(
            "unexported: every import of {namespace} gone in both clusters in {:.1?}",
            started.elapsed()
        );
        Ok(())
    }

    /// The lines of the daemons' logs that report a refusal of the API server (a 403).
    fn refusals(&self) -> Vec<String> {
        let daemons = self
            .agents
            .iter()
            .map(|a| &a.daemon)
            .chain(self.operator.as_ref());
        let mut refused = Vec::new();
        for daemon in daemons {
            for line in daemon.log().lines() {
                let lower = line.to_lowercase();
                if lower.contains("forbidden")
                    || lower.contains("code: 403")
                    || lower.contains("\"code\":403")
                {
                    refused.push(format!("{}: {line}", daemon.name));
                }
            }
        }
        refused
    }

    /// No daemon logged a refusal of the API server (a 403: RBAC the chart does not grant).
    fn no_refusals(&self) -> anyhow::Result<()> {
        let refused = self.refusals();
        ensure!(
            refused.is_empty(),
            "the API servers refused the charts' daemons (RBAC the charts do not grant):\n{}",
            refused.join("\n")
        );
        println!("no daemon was refused anything (no 403 in their logs)");
        Ok(())
    }

    /// `helm uninstall` of the release in `namespace` of cluster `id`: every object of its
    /// manifest goes, but those Helm keeps (`helm.sh/resource-policy: keep`); `helm status`
    /// no longer finds it.
    async fn uninstall(&mut self, id: &str, namespace: &str) -> anyhow::Result<()> {
        let cluster = self.cluster(id)?.clone();
        let manifest = self.manifest(&cluster, namespace).await?;
        let (helm, kube, ns) = (
            self.helm.clone(),
            self.kube(&cluster)?,
            namespace.to_owned(),
        );
        let started = Instant::now();
        let printed = blocking(move || helm.uninstall(&kube, RELEASE, &ns, &[])).await?;
        self.releases
            .retain(|(i, n)| !(i.as_str() == id && n.as_str() == namespace));
        println!(
            "helm uninstall {RELEASE} -n {namespace} in {id} ({:.1?}): {}",
            started.elapsed(),
            printed.trim().replace('\n', " / ")
        );
        match self.helm_status(&cluster, namespace).await {
            Err(error) if format!("{error:#}").contains("not found") => {}
            Err(error) => return Err(error),
            Ok(status) => bail!(
                "after helm uninstall, helm status still finds the release: {}",
                status["info"]["status"]
            ),
        }
        let mut kept = Vec::new();
        for object in manifest.objects() {
            let keep = object["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep";
            let (what, _) = get_object(&cluster, object, namespace).await?;
            if keep {
                kept.push(what);
                continue;
            }
            wait_for(&format!("{what} to go"), LONG, || async {
                let (_, found) = get_object(&cluster, object, namespace).await?;
                Ok(found
                    .is_none_or(|o| o.metadata.deletion_timestamp.is_some())
                    .then_some(()))
            })
            .await
            .with_context(|| format!("helm uninstall left {what} in {id}"))?;
        }
        println!(
            "every object of the release is gone from {id} but {}",
            if kept.is_empty() {
                "none kept".to_owned()
            } else {
                format!("the kept {kept:?}")
            }
        );
        Ok(())
    }

    fn print_logs(&self) {
        let daemons = self
            .agents
            .iter()
            .map(|a| &a.daemon)
            .chain(self.operator.as_ref());
        for daemon in daemons {
            eprintln!("{}", daemon.failure_report());
        }
    }

    /// Stops what still runs, uninstalls what is still installed and deletes the namespaces
    /// (after a failure too); the first error, after trying everything.
    async fn clean_up(&mut self) -> anyhow::Result<()> {
        let mut first_error = None;
        let mut note = |result: anyhow::Result<()>| {
            if let Err(error) = result {
                eprintln!("clean-up: {error:#}");
                first_error.get_or_insert(error);
            }
        };
        if let Some(operator) = self.operator.as_mut() {
            note(operator.terminate().await);
        }
        for agent in &mut self.agents {
            note(agent.daemon.terminate().await);
        }
        for (id, namespace) in std::mem::take(&mut self.releases) {
            let kube = self.cluster(&id).and_then(|c| self.kube(c));
            let helm = self.helm.clone();
            note(match kube {
                Ok(kube) => blocking(move || {
                    helm.uninstall(&kube, RELEASE, &namespace, &["--ignore-not-found"])
                })
                .await
                .map(|_| ()),
                Err(error) => Err(error),
            });
        }
        let namespaces = [
            self.agent_namespace.clone(),
            self.gateway_namespace.clone(),
            self.operator_namespace.clone(),
            self.namespace.clone(),
        ];
        crate::delete_namespaces(&[&self.east, &self.west], &namespaces).await;
        first_error.map_or(Ok(()), Err)
    }
}

/// What is in `namespace` of `cluster` that an export depends on, for a failure's report: the
/// pods (phase, readiness, node), the ServiceExports' conditions, the ServiceImports' IPs and
/// the EndpointSlices' endpoints.
async fn namespace_state(cluster: &Cluster, namespace: &str) -> String {
    use k8s_openapi::api::core::v1::Pod;
    use k8s_openapi::api::discovery::v1::EndpointSlice;
    let client = &cluster.client;
    let lp = ListParams::default();
    let mut lines = Vec::new();
    match Api::<Pod>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
    {
        Ok(pods) => lines.extend(pods.items.iter().map(|pod| {
            let status = pod.status.clone().unwrap_or_default();
            let ready = status
                .conditions
                .iter()
                .flatten()
                .find(|c| c.type_ == "Ready")
                .map(|c| c.status.clone());
            format!(
                "Pod {}: {:?}, Ready {ready:?}, node {:?}, IP {:?}",
                pod.metadata.name.clone().unwrap_or_default(),
                status.phase,
                pod.spec.as_ref().and_then(|s| s.node_name.clone()),
                status.pod_ip
            )
        })),
        Err(error) => lines.push(format!("cannot list the pods: {error}")),
    }
    match Api::<ServiceExport>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
    {
        Ok(exports) => lines.extend(exports.items.iter().map(|export| {
            let conditions: Vec<String> = export
                .status
                .iter()
                .flat_map(|s| &s.conditions)
                .map(|c| format!("{}={} ({})", c.type_, c.status, c.reason))
                .collect();
            format!(
                "ServiceExport {}: {conditions:?}",
                export.metadata.name.clone().unwrap_or_default()
            )
        })),
        Err(error) => lines.push(format!("cannot list the ServiceExports: {error}")),
    }
    match Api::<ServiceImport>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
    {
        Ok(imports) => lines.extend(imports.items.iter().map(|import| {
            format!(
                "ServiceImport {}: ips {:?}",
                import.metadata.name.clone().unwrap_or_default(),
                import.spec.ips
            )
        })),
        Err(error) => lines.push(format!("cannot list the ServiceImports: {error}")),
    }
    match Api::<EndpointSlice>::namespaced(client.clone(), namespace)
        .list(&lp)
        .await
    {
        Ok(slices) => lines.extend(slices.items.iter().map(|slice| {
            let endpoints: Vec<String> = slice
                .endpoints
                .iter()
                .map(|e| {
                    format!(
                        "{:?} ready {:?}",
                        e.addresses,
                        e.conditions.as_ref().and_then(|c| c.ready)
                    )
                })
                .collect();
            format!(
                "EndpointSlice {} {:?}: {endpoints:?}",
                slice.metadata.name.clone().unwrap_or_default(),
                slice.metadata.labels.clone().unwrap_or_default()
            )
        })),
        Err(error) => lines.push(format!("cannot list the EndpointSlices: {error}")),
    }
    lines.join("\n")
}

/// Runs a Helm command (a blocking process) off the async workers.
async fn blocking<T: Send + 'static>(
    command: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> anyhow::Result<T> {
    Ok(tokio::task::spawn_blocking(command)
        .await
        .context("the Helm command's task failed")??)
}

/// `value` with a volume's mount path at its start replaced by the local directory that holds
/// the volume's files.
fn in_mounts(value: &str, mounts: &[(String, PathBuf)]) -> String {
    for (mount_path, local) in mounts {
        if let Some(rest) = value.strip_prefix(mount_path.as_str())
            && (rest.is_empty() || rest.starts_with('/'))
        {
            return format!("{}{rest}", local.display());
        }
    }
    value.to_owned()
}

/// The kubeconfig file `path` with its cluster's CA embedded (`certificate-authority-data`,
/// as `kubectl config set-cluster --embed-certs` writes it): a Secret's copy must stand alone.
fn embedded_ca(path: &Path) -> anyhow::Result<Vec<u8>> {
    let text = std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))?;
    let mut kubeconfig: Value = serde_json::from_slice(&text)?;
    for cluster in kubeconfig["clusters"]
        .as_array_mut()
        .context("a kubeconfig without clusters")?
    {
        let entry = &mut cluster["cluster"];
        if let Some(file) = entry["certificate-authority"].as_str().map(str::to_owned) {
            let pem = std::fs::read(&file).with_context(|| format!("cannot read the CA {file}"))?;
            entry["certificate-authority-data"] = base64(&pem)?;
            if let Some(object) = entry.as_object_mut() {
                object.remove("certificate-authority");
            }
        }
    }
    Ok(serde_json::to_vec_pretty(&kubeconfig)?)
}

/// `bytes` in base64, as a JSON string (k8s-openapi's `ByteString` serializes so).
fn base64(bytes: &[u8]) -> anyhow::Result<Value> {
    Ok(serde_json::to_value(k8s_openapi::ByteString(
        bytes.to_vec(),
    ))?)
}

/// The leader Lease the release's Role grants by name (`get`/`update` with `resourceNames`).
fn leader_lease(manifest: &Rendered) -> anyhow::Result<String> {
    manifest
        .of_kind("Role")
        .into_iter()
        .flat_map(|role| role["rules"].as_array().cloned().unwrap_or_default())
        .filter(|rule| {
            rule["resources"]
                .as_array()
                .is_some_and(|r| r.iter().any(|r| r == "leases"))
        })
        .find_map(|rule| rule["resourceNames"][0].as_str().map(str::to_owned))
        .context("the release's RBAC grants no Lease by name (no leader-election Role)")
}

/// Waits until Lease `namespace/name` of `cluster` is held by `holder`.
async fn holds_lease(
    cluster: &Cluster,
    namespace: &str,
    name: &str,
    holder: &str,
) -> anyhow::Result<()> {
    let leases: Api<Lease> = Api::namespaced(cluster.client.clone(), namespace);
    wait_for(
        &format!(
            "{holder} to hold the Lease {namespace}/{name} in {}",
            cluster.id
        ),
        LONG,
        || {
            let leases = leases.clone();
            async move {
                let lease = leases.get_opt(name).await?;
                let held_by = lease
                    .and_then(|l| l.spec?.holder_identity)
                    .unwrap_or_default();
                if held_by == holder {
                    Ok(Some(()))
                } else {
                    Err(anyhow!("held by {held_by:?}"))
                }
            }
        },
    )
    .await
}

/// Object `object` of a manifest (`Kind name`, for messages) as `cluster` has it, if it does;
/// a namespaced object without a namespace is in `namespace` (the release's, as Helm installs it).
async fn get_object(
    cluster: &Cluster,
    object: &Value,
    namespace: &str,
) -> anyhow::Result<(String, Option<DynamicObject>)> {
    let api_version = object["apiVersion"].as_str().unwrap_or_default();
    let kind = object["kind"].as_str().unwrap_or_default();
    let name = object["metadata"]["name"]
        .as_str()
        .context("an object without a name")?;
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    let gvk = GroupVersionKind::gvk(group, version, kind);
    let (resource, capabilities) = pinned_kind(&cluster.client, &gvk)
        .await
        .with_context(|| format!("{api_version} {kind} is not served by {}", cluster.id))?;
    let (api, what): (Api<DynamicObject>, String) =
        if capabilities.scope == kube::discovery::Scope::Namespaced {
            let ns = object["metadata"]["namespace"]
                .as_str()
                .unwrap_or(namespace);
            (
                Api::namespaced_with(cluster.client.clone(), ns, &resource),
                format!("{kind} {ns}/{name}"),
            )
        } else {
            (
                Api::all_with(cluster.client.clone(), &resource),
                format!("{kind} {name}"),
            )
        };
    let found = api
        .get_opt(name)
        .await
        .with_context(|| format!("cannot read {what} in {}", cluster.id))?;
    Ok((what, found))
}

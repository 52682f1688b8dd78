//! A pod turned into what to run (pure): each container's command line and environment, the
//! volumes' host directories and files, the mounts, the restart policy.

use std::collections::BTreeMap;
use std::net::IpAddr;
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, DownwardAPIVolumeFile, EnvVar, KeyToPath, Pod, Probe,
    ProjectedVolumeSource, Secret, Service, Volume,
};
use k8s_openapi::apimachinery::pkg::util::intstr::IntOrString;

use crate::refuse::{Unsupported, unsupported_fields};

/// The `fieldRef` paths the runner resolves (`metadata.labels['k']` and
/// `metadata.annotations['k']` too).
pub const FIELD_REFS: &[&str] = &[
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "metadata.labels['<key>']",
    "metadata.annotations['<key>']",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.podIP",
    "status.podIPs",
];

/// The file mode of a ConfigMap's or Secret's files when the volume names none (the API
/// server's default, 0644).
pub const DEFAULT_MODE: u32 = 0o644;

/// What a pod needs from around it to be planned.
#[derive(Debug, Clone)]
pub struct PlanInputs<'a> {
    /// The pod's IP (already chosen: the runner gives one before planning).
    pub pod_ip: IpAddr,
    /// The ConfigMaps of the pod's namespace, by name.
    pub config_maps: &'a BTreeMap<String, ConfigMap>,
    /// The Secrets of the pod's namespace, by name.
    pub secrets: &'a BTreeMap<String, Secret>,
    /// The pod's own directory (its volumes live under it).
    pub pod_dir: PathBuf,
    /// The node's root: a `hostPath` volume's path is taken under it, never on the real host.
    pub node_dir: PathBuf,
    /// The pod's ServiceAccount tokens, by audience (`""`: the API server's own), for its
    /// `serviceAccountToken` projections ([`token_audiences`] says which it needs).
    pub tokens: &'a BTreeMap<String, String>,
    /// The Services of the pod's namespace and the `kubernetes` Service of `default`, for the
    /// Service environment variables ([`service_env`]).
    pub services: &'a [Service],
    /// The node's allocatable resources (`status.allocatable`): what a container without
    /// limits may use, for `resourceFieldRef`.
    pub node_allocatable:
        &'a BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    /// The cluster's DNS (the kubelet's `--cluster-dns` and `--cluster-domain`), if any.
    pub cluster_dns: Option<&'a ClusterDns>,
    /// The node's `resolv.conf` (the root's), for `dnsPolicy: Default` with a `dnsConfig`.
    pub node_resolv_conf: &'a str,
}

/// The cluster's DNS, as the kubelet is told it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ClusterDns {
    /// The DNS Service's IP (`--cluster-dns`).
    pub nameserver: IpAddr,
    /// The cluster's domain (`--cluster-domain`, `cluster.local`).
    pub domain: String,
}

/// Nameservers, search domains and options of a `resolv.conf`.
type Resolver = (Vec<String>, Vec<String>, Vec<(String, Option<String>)>);

/// The `resolv.conf` the kubelet writes for `pod`, or `None` when the pod keeps the node's
/// (the root's). `ClusterFirst` without a cluster DNS falls back to `Default`, as on a kubelet
/// that has none.
pub fn resolv_conf(pod: &Pod, inputs: &PlanInputs<'_>) -> Option<String> {
    let spec = pod.spec.as_ref()?;
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let config = spec.dns_config.as_ref();
    let policy = spec.dns_policy.as_deref().unwrap_or("ClusterFirst");
    let cluster_first = matches!(policy, "ClusterFirst" | "ClusterFirstWithHostNet");
    let (mut servers, mut search, mut options): Resolver = match (policy, inputs.cluster_dns) {
        (_, Some(dns)) if cluster_first => {
            let domain = &dns.domain;
            (
                vec![dns.nameserver.to_string()],
                vec![
                    format!("{namespace}.svc.{domain}"),
                    format!("svc.{domain}"),
                    domain.clone(),
                ],
                vec![("ndots".to_owned(), Some("5".to_owned()))],
            )
        }
        ("None", _) => (Vec::new(), Vec::new(), Vec::new()),
        _ => {
            config?;
            parse_resolv_conf(inputs.node_resolv_conf)
        }
    };
    if let Some(config) = config {
        servers.extend(config.nameservers.iter().flatten().cloned());
        search.extend(config.searches.iter().flatten().cloned());
        for option in config.options.iter().flatten() {
            let name = option.name.clone().unwrap_or_default();
            options.retain(|(n, _)| *n != name);
            options.push((name, option.value.clone()));
        }
    }
    let mut text: String = servers
        .iter()
        .take(3)
        .map(|s| format!("nameserver {s}\n"))
        .collect();
    if !search.is_empty() {
        text.push_str(&format!("search {}\n", search.join(" ")));
    }
    if !options.is_empty() {
        let options: Vec<String> = options
            .iter()
            .map(|(n, v)| v.as_ref().map_or_else(|| n.clone(), |v| format!("{n}:{v}")))
            .collect();
        text.push_str(&format!("options {}\n", options.join(" ")));
    }
    Some(text)
}

/// A `resolv.conf`'s nameservers, search domains and options.
fn parse_resolv_conf(text: &str) -> Resolver {
    let (mut servers, mut search, mut options) = (Vec::new(), Vec::new(), Vec::new());
    for line in text.lines() {
        let mut words = line.split_whitespace();
        match words.next() {
            Some("nameserver") => servers.extend(words.next().map(str::to_owned)),
            Some("search" | "domain") => search = words.map(str::to_owned).collect(),
            Some("options") => options.extend(words.map(|w| match w.split_once(':') {
                Some((n, v)) => (n.to_owned(), Some(v.to_owned())),
                None => (w.to_owned(), None),
            })),
            _ => {}
        }
    }
    (servers, search, options)
}

/// The environment variables the kubelet gives a container for the Services (Docker links
/// style): those of `namespace` when the pod has `enableServiceLinks` (the default), and the
/// API server's `kubernetes` Service of `default` always; Services without a cluster IP give
/// none.
pub fn service_env(services: &[Service], namespace: &str, links: bool) -> Vec<(String, String)> {
    let mut chosen: BTreeMap<String, &Service> = BTreeMap::new();
    for service in services {
        let name = service.metadata.name.clone().unwrap_or_default();
        let ns = service.metadata.namespace.as_deref().unwrap_or("");
        let master = ns == "default" && name == "kubernetes";
        if master {
            chosen.entry(name).or_insert(service);
        } else if ns == namespace && links {
            chosen.insert(name, service);
        }
    }
    let mut env = Vec::new();
    for (name, service) in chosen {
        let Some(spec) = &service.spec else { continue };
        let Some(ip) = spec
            .cluster_ip
            .as_deref()
            .filter(|ip| !ip.is_empty() && *ip != "None")
        else {
            continue;
        };
        let prefix = name.to_uppercase().replace('-', "_");
        let ports = spec.ports.as_deref().unwrap_or_default();
        env.push((format!("{prefix}_SERVICE_HOST"), ip.to_owned()));
        if let Some(first) = ports.first() {
            env.push((format!("{prefix}_SERVICE_PORT"), first.port.to_string()));
        }
        for port in ports {
            if let Some(port_name) = port.name.as_deref().filter(|n| !n.is_empty()) {
                let port_name = port_name.to_uppercase().replace('-', "_");
                env.push((
                    format!("{prefix}_SERVICE_PORT_{port_name}"),
                    port.port.to_string(),
                ));
            }
        }
        let host = |port: i32| match ip.parse::<IpAddr>() {
            Ok(IpAddr::V6(_)) => format!("[{ip}]:{port}"),
            _ => format!("{ip}:{port}"),
        };
        for (i, port) in ports.iter().enumerate() {
            let protocol = port.protocol.as_deref().unwrap_or("TCP");
            let url = format!("{}://{}", protocol.to_lowercase(), host(port.port));
            if i == 0 {
                env.push((format!("{prefix}_PORT"), url.clone()));
            }
            let port_prefix = format!("{prefix}_PORT_{}_{}", port.port, protocol.to_uppercase());
            env.push((port_prefix.clone(), url));
            env.push((format!("{port_prefix}_PROTO"), protocol.to_lowercase()));
            env.push((format!("{port_prefix}_PORT"), port.port.to_string()));
            env.push((format!("{port_prefix}_ADDR"), ip.to_owned()));
        }
    }
    env
}

/// The audiences of the ServiceAccount tokens `pod` mounts (`""` for the API server's own),
/// each with the lifetime it asks (the API server's default when `None`).
pub fn token_audiences(pod: &Pod) -> BTreeMap<String, Option<i64>> {
    pod.spec
        .iter()
        .flat_map(|s| s.volumes.iter().flatten())
        .filter_map(|v| v.projected.as_ref())
        .flat_map(|p| p.sources.iter().flatten())
        .filter_map(|s| s.service_account_token.as_ref())
        .map(|t| (t.audience.clone().unwrap_or_default(), t.expiration_seconds))
        .collect()
}

/// Why a pod cannot be planned.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PlanError {
    /// It needs fields the runner does not honour: it stays Pending for good.
    #[error("the pod runner does not honour {}", list(.0))]
    Refused(Vec<Unsupported>),
    /// It needs an object (or a key of one) that does not exist yet: planned again later.
    #[error("{reason}: {message}")]
    Waiting {
        /// The kubelet's reason (`CreateContainerConfigError`, `FailedMount`).
        reason: &'static str,
        /// What is missing.
        message: String,
    },
}

fn list(fields: &[Unsupported]) -> String {
    fields
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ")
}

/// A pod's restart policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RestartPolicy {
    /// Restart every container that exits.
    Always,
    /// Restart a container that exits with a non-zero code.
    OnFailure,
    /// Never restart.
    Never,
}

impl RestartPolicy {
    /// Whether a container that exited with `code` is started again.
    pub fn restarts(self, code: i32) -> bool {
        match self {
            RestartPolicy::Always => true,
            RestartPolicy::OnFailure => code != 0,
            RestartPolicy::Never => false,
        }
    }

    /// Whether a failed init container (non-zero exit) is run again, as the kubelet does: for
    /// every policy but `Never`.
    pub fn retries_init(self) -> bool {
        self != RestartPolicy::Never
    }
}

/// What to run for one pod.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PodPlan {
    /// The pod's namespace.
    pub namespace: String,
    /// The pod's name.
    pub name: String,
    /// The pod's UID (a pod made again under the same name is another pod).
    pub uid: String,
    /// Its containers' hostname: `spec.hostname`, or its name (at most 63 characters), as
    /// the kubelet sets it.
    pub hostname: String,
    /// Its restart policy.
    pub restart_policy: RestartPolicy,
    /// From SIGTERM to SIGKILL when it is deleted.
    pub grace_period: Duration,
    /// Its volumes, in the spec's order.
    pub volumes: Vec<VolumePlan>,
    /// Its init containers, run one after the other, in order.
    pub init_containers: Vec<ContainerPlan>,
    /// Its containers, run together once every init container succeeded.
    pub containers: Vec<ContainerPlan>,
    /// The `resolv.conf` to write at [`PodPlan::resolv_conf_path`] (mounted at
    /// `/etc/resolv.conf` in every container), if the pod does not keep the root's.
    pub resolv_conf: Option<String>,
    /// Where its `resolv.conf` is written (in the pod's directory).
    pub resolv_conf_path: PathBuf,
}

/// A volume and where it is on the host.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumePlan {
    /// The volume's name.
    pub name: String,
    /// Its directory (or file, for a `hostPath` of type `File`) on the host.
    pub host_path: PathBuf,
    /// What it holds.
    pub source: VolumeSource,
}

/// What a volume holds.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum VolumeSource {
    /// The files of a ConfigMap or a Secret, written as the kubelet writes them (and rewritten
    /// when the object changes).
    Files(Vec<VolumeFile>),
    /// An empty directory of the pod, removed with it.
    EmptyDir,
    /// A path of the node, kept across pods.
    HostPath {
        /// The volume's `type` (`""` for none).
        kind: String,
    },
}

/// One file of a ConfigMap or Secret volume.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VolumeFile {
    /// Its path in the volume (a key, or an item's `path`).
    pub path: String,
    /// Its content.
    pub data: Vec<u8>,
    /// Its mode.
    pub mode: u32,
}

/// One container, ready to start.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContainerPlan {
    /// The container's name.
    pub name: String,
    /// The image it names (reported in its status; the processes come from the root).
    pub image: String,
    /// The command and its arguments, `$(VAR)` references expanded.
    pub argv: Vec<String>,
    /// Its environment, in order.
    pub env: Vec<(String, String)>,
    /// Its working directory, if it names one.
    pub working_dir: Option<String>,
    /// Its volume mounts.
    pub mounts: Vec<Mount>,
    /// Its exec probes.
    pub probes: Vec<ProbePlan>,
    /// Its capabilities (the bounding set of its processes, names as `setpriv` takes them:
    /// `net_admin`), or `None` for all of them (privileged).
    pub capabilities: Option<Vec<String>>,
}

/// The capabilities container runtimes (containerd, CRI-O, Docker) give a container that is
/// not privileged.
pub const DEFAULT_CAPABILITIES: &[&str] = &[
    "chown",
    "dac_override",
    "fsetid",
    "fowner",
    "mknod",
    "net_raw",
    "setgid",
    "setuid",
    "setfcap",
    "setpcap",
    "net_bind_service",
    "sys_chroot",
    "kill",
    "audit_write",
];

/// A container's capabilities: all when privileged (`None`), else the default set with its
/// `drop`s removed (`ALL`: every one) and its `add`s added.
fn capabilities(container: &Container) -> Option<Vec<String>> {
    let context = container.security_context.as_ref();
    if context.and_then(|c| c.privileged) == Some(true) {
        return None;
    }
    let name = |n: &String| n.to_lowercase().trim_start_matches("cap_").to_owned();
    let caps = context.and_then(|c| c.capabilities.as_ref());
    let drop: Vec<String> = caps
        .iter()
        .flat_map(|c| c.drop.iter().flatten())
        .map(name)
        .collect();
    let mut set: Vec<String> = if drop.iter().any(|d| d == "all") {
        Vec::new()
    } else {
        DEFAULT_CAPABILITIES
            .iter()
            .map(|c| (*c).to_owned())
            .filter(|c| !drop.contains(c))
            .collect()
    };
    for add in caps.iter().flat_map(|c| c.add.iter().flatten()).map(name) {
        if !set.contains(&add) {
            set.push(add);
        }
    }
    Some(set)
}

/// Which probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProbeKind {
    /// Until it succeeds the others wait; failing it restarts the container.
    Startup,
    /// Failing it restarts the container.
    Liveness,
    /// The container is ready only while it succeeds.
    Readiness,
}

/// An exec probe, with the API server's defaults filled in.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbePlan {
    /// Which probe.
    pub kind: ProbeKind,
    /// The command run in the container (its environment, mounts and network).
    pub argv: Vec<String>,
    /// Before the first run.
    pub initial_delay: Duration,
    /// Between runs.
    pub period: Duration,
    /// A run that takes longer fails.
    pub timeout: Duration,
    /// Successes in a row that make it succeed.
    pub success_threshold: u32,
    /// Failures in a row that make it fail.
    pub failure_threshold: u32,
}

/// The command that runs a probe's handler in the container: its own for `exec`; for
/// `tcpSocket` a connection from bash (`/dev/tcp`), for `httpGet` a request from python3
/// (a status from 200 to 399 passes, certificates unchecked, as the kubelet's); both from the
/// root, to the pod's IP unless the probe names a host. A named port is the container's port
/// of that name.
fn probe_command(probe: &Probe, container: &Container, pod_ip: IpAddr) -> Option<Vec<String>> {
    if let Some(exec) = &probe.exec {
        return Some(exec.command.clone().unwrap_or_default());
    }
    let port = |port: &IntOrString| match port {
        IntOrString::Int(n) => Some(*n),
        IntOrString::String(name) => container
            .ports
            .iter()
            .flatten()
            .find(|p| p.name.as_deref() == Some(name.as_str()))
            .map(|p| p.container_port),
    };
    let host = |host: Option<&String>| {
        host.filter(|h| !h.is_empty())
            .cloned()
            .unwrap_or_else(|| pod_ip.to_string())
    };
    if let Some(tcp) = &probe.tcp_socket {
        let script = format!(
            "exec 3<>/dev/tcp/{}/{}",
            host(tcp.host.as_ref()),
            port(&tcp.port)?
        );
        return Some(vec!["bash".to_owned(), "-c".to_owned(), script]);
    }
    let http = probe.http_get.as_ref()?;
    let scheme = http.scheme.as_deref().unwrap_or("HTTP").to_lowercase();
    let host = match host(http.host.as_ref()).parse::<IpAddr>() {
        Ok(IpAddr::V6(ip)) => format!("[{ip}]"),
        _ => host(http.host.as_ref()),
    };
    let url = format!(
        "{scheme}://{host}:{}{}",
        port(&http.port)?,
        http.path.as_deref().unwrap_or("/")
    );
    let headers: BTreeMap<&str, &str> = http
        .http_headers
        .iter()
        .flatten()
        .map(|h| (h.name.as_str(), h.value.as_str()))
        .collect();
    let headers = serde_json::to_string(&headers).unwrap_or_default();
    let script = "import json, ssl, sys, urllib.error, urllib.request\n\
        request = urllib.request.Request(sys.argv[1], headers=json.loads(sys.argv[2]))\n\
        try:\n    code = urllib.request.urlopen(request, context=ssl._create_unverified_context()).status\n\
        except urllib.error.HTTPError as error:\n    code = error.code\n\
        sys.exit(0 if 200 <= code < 400 else 1)\n";
    Some(vec![
        "python3".to_owned(),
        "-c".to_owned(),
        script.to_owned(),
        url,
        headers,
    ])
}

/// The container's probes; a probe whose port names no port of the container is refused.
fn probes(path: &str, container: &Container, pod_ip: IpAddr) -> Result<Vec<ProbePlan>, PlanError> {
    let seconds = |s: Option<i32>, default: u64| {
        Duration::from_secs(s.map_or(default, |s| u64::from(s.max(0).unsigned_abs())))
    };
    let count = |n: Option<i32>, default: u32| n.map_or(default, |n| n.max(1).unsigned_abs());
    [
        (ProbeKind::Startup, &container.startup_probe),
        (ProbeKind::Liveness, &container.liveness_probe),
        (ProbeKind::Readiness, &container.readiness_probe),
    ]
    .into_iter()
    .filter_map(|(kind, probe)| Some((kind, probe.as_ref()?)))
    .map(|(kind, probe)| {
        let field = match kind {
            ProbeKind::Startup => "startupProbe",
            ProbeKind::Liveness => "livenessProbe",
            ProbeKind::Readiness => "readinessProbe",
        };
        let argv = probe_command(probe, container, pod_ip).ok_or_else(|| {
            PlanError::Refused(vec![Unsupported {
                field: format!("{path}.{field}"),
                reason: "its port names no port of the container".to_owned(),
            }])
        })?;
        Ok(ProbePlan {
            kind,
            argv,
            initial_delay: seconds(probe.initial_delay_seconds, 0),
            period: seconds(probe.period_seconds, 10),
            timeout: seconds(probe.timeout_seconds, 1),
            success_threshold: count(probe.success_threshold, 1),
            failure_threshold: count(probe.failure_threshold, 3),
        })
    })
    .collect()
}

/// A volume mounted in a container.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mount {
    /// The volume's path on the host.
    pub host: PathBuf,
    /// Where the container sees it.
    pub container: String,
    /// Mounted read-only.
    pub read_only: bool,
    /// A `subPath` directory of an `emptyDir` or `hostPath` volume, made before the
    /// container starts if missing (as the kubelet makes it).
    pub make_dir: bool,
}

/// Plans `pod`: refuses it by name if it needs what the runner does not honour, waits if it
/// needs an object that is missing, else says what to run.
pub fn plan_pod(pod: &Pod, inputs: &PlanInputs<'_>) -> Result<PodPlan, PlanError> {
    let spec = pod.spec.as_ref().ok_or_else(|| {
        PlanError::Refused(vec![Unsupported {
            field: "spec".to_owned(),
            reason: "missing".to_owned(),
        }])
    })?;
    let json = serde_json::to_value(spec).unwrap_or_default();
    let mut refused = unsupported_fields(&json);
    if spec.containers.iter().any(|c| c.command.is_none()) {
        refused.extend(
            spec.containers
                .iter()
                .enumerate()
                .filter(|(_, c)| c.command.is_none())
                .map(|(i, _)| Unsupported {
                    field: format!("spec.containers[{i}].command"),
                    reason: "missing: the image's entrypoint is not known, name the command"
                        .to_owned(),
                }),
        );
    }
    let volumes = spec.volumes.as_deref().unwrap_or_default();
    let planned_volumes: Vec<Result<VolumePlan, PlanError>> = volumes
        .iter()
        .enumerate()
        .map(|(i, v)| plan_volume(i, v, pod, inputs))
        .collect();
    for volume in &planned_volumes {
        if let Err(PlanError::Refused(fields)) = volume {
            refused.extend(fields.iter().cloned());
        }
    }
    if !refused.is_empty() {
        return Err(PlanError::Refused(refused));
    }
    let volumes: Vec<VolumePlan> = planned_volumes.into_iter().collect::<Result<_, _>>()?;
    let meta = &pod.metadata;
    let containers = |list: &[Container], which: &str| -> Result<Vec<ContainerPlan>, PlanError> {
        list.iter()
            .enumerate()
            .map(|(i, c)| plan_container(&format!("spec.{which}[{i}]"), c, pod, &volumes, inputs))
            .collect()
    };
    let resolv = resolv_conf(pod, inputs);
    let resolv_path = inputs.pod_dir.join("resolv.conf");
    Ok(PodPlan {
        namespace: meta.namespace.clone().unwrap_or_default(),
        name: meta.name.clone().unwrap_or_default(),
        uid: meta.uid.clone().unwrap_or_default(),
        hostname: spec
            .hostname
            .clone()
            .filter(|h| !h.is_empty())
            .or_else(|| meta.name.clone())
            .unwrap_or_default()
            .chars()
            .take(63)
            .collect::<String>()
            .trim_end_matches(['-', '.'])
            .to_owned(),
        restart_policy: match spec.restart_policy.as_deref() {
            Some("OnFailure") => RestartPolicy::OnFailure,
            Some("Never") => RestartPolicy::Never,
            _ => RestartPolicy::Always,
        },
        grace_period: Duration::from_secs(
            spec.termination_grace_period_seconds
                .unwrap_or(30)
                .max(0)
                .unsigned_abs(),
        ),
        init_containers: with_resolv_conf(
            containers(
                spec.init_containers.as_deref().unwrap_or_default(),
                "initContainers",
            )?,
            resolv.as_ref(),
            &resolv_path,
        ),
        containers: with_resolv_conf(
            containers(&spec.containers, "containers")?,
            resolv.as_ref(),
            &resolv_path,
        ),
        resolv_conf: resolv,
        resolv_conf_path: resolv_path,
        volumes,
    })
}

/// `containers` with the pod's `resolv.conf` mounted at `/etc/resolv.conf`, when it has one.
fn with_resolv_conf(
    mut containers: Vec<ContainerPlan>,
    resolv: Option<&String>,
    path: &Path,
) -> Vec<ContainerPlan> {
    if resolv.is_some() {
        for container in &mut containers {
            container.mounts.push(Mount {
                host: path.to_path_buf(),
                container: "/etc/resolv.conf".to_owned(),
                read_only: true,
                make_dir: false,
            });
            container
                .mounts
                .sort_by_key(|m| Path::new(&m.container).components().count());
        }
    }
    containers
}

fn plan_volume(
    index: usize,
    volume: &Volume,
    pod: &Pod,
    inputs: &PlanInputs<'_>,
) -> Result<VolumePlan, PlanError> {
    let own_dir = inputs.pod_dir.join("volumes").join(&volume.name);
    let plan = |host_path, source| VolumePlan {
        name: volume.name.clone(),
        host_path,
        source,
    };
    if let Some(source) = &volume.config_map {
        let name = source.name.clone();
        let files = match inputs.config_maps.get(&name) {
            Some(map) => volume_files(
                &config_map_data(map),
                source.items.as_deref(),
                source.default_mode,
                source.optional,
            )
            .map_err(|key| waiting_mount(&format!("ConfigMap {name}"), &key))?,
            None if source.optional == Some(true) => Vec::new(),
            None => return Err(waiting_mount(&format!("ConfigMap {name}"), "")),
        };
        return Ok(plan(own_dir, VolumeSource::Files(files)));
    }
    if let Some(source) = &volume.secret {
        let name = source.secret_name.clone().unwrap_or_default();
        let files = match inputs.secrets.get(&name) {
            Some(secret) => volume_files(
                &secret_data(secret),
                source.items.as_deref(),
                source.default_mode,
                source.optional,
            )
            .map_err(|key| waiting_mount(&format!("Secret {name}"), &key))?,
            None if source.optional == Some(true) => Vec::new(),
            None => return Err(waiting_mount(&format!("Secret {name}"), "")),
        };
        return Ok(plan(own_dir, VolumeSource::Files(files)));
    }
    if let Some(source) = &volume.projected {
        let files = projected_files(source, pod, inputs)?;
        return Ok(plan(own_dir, VolumeSource::Files(files)));
    }
    if let Some(source) = &volume.downward_api {
        let items = source.items.as_deref().unwrap_or_default();
        let files = downward_files(items, source.default_mode, pod);
        return Ok(plan(own_dir, VolumeSource::Files(files)));
    }
    if volume.empty_dir.is_some() {
        return Ok(plan(own_dir, VolumeSource::EmptyDir));
    }
    if let Some(source) = &volume.host_path {
        let path = Path::new(&source.path);
        let clean = path.is_absolute()
            && path
                .components()
                .all(|c| !matches!(c, Component::ParentDir));
        if !clean {
            return Err(PlanError::Refused(vec![Unsupported {
                field: format!("spec.volumes[{index}].hostPath.path"),
                reason: "not an absolute path without `..`".to_owned(),
            }]));
        }
        let relative = path.strip_prefix("/").unwrap_or(path);
        return Ok(plan(
            inputs.node_dir.join(relative),
            VolumeSource::HostPath {
                kind: source.type_.clone().unwrap_or_default(),
            },
        ));
    }
    // Refused already, by name, by `unsupported_fields` (a volume type not honoured).
    Err(PlanError::Refused(Vec::new()))
}

/// The files of a projected volume: each source's, in order (the API server refuses two
/// sources writing the same path).
fn projected_files(
    source: &ProjectedVolumeSource,
    pod: &Pod,
    inputs: &PlanInputs<'_>,
) -> Result<Vec<VolumeFile>, PlanError> {
    let mode = source.default_mode;
    let mut files = Vec::new();
    for projection in source.sources.iter().flatten() {
        if let Some(map) = &projection.config_map {
            let name = &map.name;
            match inputs.config_maps.get(name) {
                Some(object) => files.extend(
                    volume_files(
                        &config_map_data(object),
                        map.items.as_deref(),
                        mode,
                        map.optional,
                    )
                    .map_err(|key| waiting_mount(&format!("ConfigMap {name}"), &key))?,
                ),
                None if map.optional == Some(true) => {}
                None => return Err(waiting_mount(&format!("ConfigMap {name}"), "")),
            }
        }
        if let Some(secret) = &projection.secret {
            let name = &secret.name;
            match inputs.secrets.get(name) {
                Some(object) => files.extend(
                    volume_files(
                        &secret_data(object),
                        secret.items.as_deref(),
                        mode,
                        secret.optional,
                    )
                    .map_err(|key| waiting_mount(&format!("Secret {name}"), &key))?,
                ),
                None if secret.optional == Some(true) => {}
                None => return Err(waiting_mount(&format!("Secret {name}"), "")),
            }
        }
        if let Some(downward) = &projection.downward_api {
            files.extend(downward_files(
                downward.items.as_deref().unwrap_or_default(),
                mode,
                pod,
            ));
        }
        if let Some(token) = &projection.service_account_token {
            let audience = token.audience.clone().unwrap_or_default();
            let Some(value) = inputs.tokens.get(&audience) else {
                return Err(PlanError::Waiting {
                    reason: "FailedMount",
                    message: format!(
                        "waiting for a token of the pod's ServiceAccount (audience {audience:?})"
                    ),
                });
            };
            files.push(VolumeFile {
                path: token.path.clone(),
                data: value.clone().into_bytes(),
                mode: mode.map_or(DEFAULT_MODE, |m| m.unsigned_abs() & 0o7777),
            });
        }
    }
    Ok(files)
}

/// A downward API volume's files: the pod's metadata fields (a map as the kubelet writes it,
/// one `key="value"` line per entry, sorted).
fn downward_files(
    items: &[DownwardAPIVolumeFile],
    default_mode: Option<i32>,
    pod: &Pod,
) -> Vec<VolumeFile> {
    let meta = &pod.metadata;
    let map_lines = |map: Option<&BTreeMap<String, String>>| {
        map.into_iter()
            .flatten()
            .map(|(k, v)| format!("{k}={v:?}\n"))
            .collect::<String>()
    };
    items
        .iter()
        .filter_map(|item| {
            let path = &item.field_ref.as_ref()?.field_path;
            let data = match path.as_str() {
                "metadata.labels" => map_lines(meta.labels.as_ref()),
                "metadata.annotations" => map_lines(meta.annotations.as_ref()),
                // Only metadata fields pass `unsupported_fields`.
                _ => field_value(path, pod, IpAddr::from([0, 0, 0, 0])),
            };
            let mode = item.mode.or(default_mode);
            Some(VolumeFile {
                path: item.path.clone(),
                data: data.into_bytes(),
                mode: mode.map_or(DEFAULT_MODE, |m| m.unsigned_abs() & 0o7777),
            })
        })
        .collect()
}

fn config_map_data(map: &ConfigMap) -> BTreeMap<String, Vec<u8>> {
    let mut data: BTreeMap<String, Vec<u8>> = map
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.clone().into_bytes()))
        .collect();
    let binary = map.binary_data.iter().flatten();
    data.extend(binary.map(|(k, v)| (k.clone(), v.0.clone())));
    data
}

fn secret_data(secret: &Secret) -> BTreeMap<String, Vec<u8>> {
    secret
        .data
        .iter()
        .flatten()
        .map(|(k, v)| (k.clone(), v.0.clone()))
        .collect()
}

fn waiting_mount(object: &str, key: &str) -> PlanError {
    PlanError::Waiting {
        reason: "FailedMount",
        message: if key.is_empty() {
            format!("{object} not found")
        } else {
            format!("{object} has no key {key:?}")
        },
    }
}

/// A ConfigMap's or Secret's files in a volume: every key, or the `items` chosen (a missing
/// key is an error unless the volume is optional). `Err` is the missing key.
fn volume_files(
    data: &BTreeMap<String, Vec<u8>>,
    items: Option<&[KeyToPath]>,
    default_mode: Option<i32>,
    optional: Option<bool>,
) -> Result<Vec<VolumeFile>, String> {
    let mode = |m: Option<i32>| {
        m.or(default_mode)
            .map_or(DEFAULT_MODE, |m| m.unsigned_abs() & 0o7777)
    };
    match items {
        None => Ok(data
            .iter()
            .map(|(key, value)| VolumeFile {
                path: key.clone(),
                data: value.clone(),
                mode: mode(None),
            })
            .collect()),
        Some(items) => {
            let mut files = Vec::new();
            for item in items {
                match data.get(&item.key) {
                    Some(value) => files.push(VolumeFile {
                        path: item.path.clone(),
                        data: value.clone(),
                        mode: mode(item.mode),
                    }),
                    None if optional == Some(true) => {}
                    None => return Err(item.key.clone()),
                }
            }
            Ok(files)
        }
    }
}

fn plan_container(
    path: &str,
    container: &Container,
    pod: &Pod,
    volumes: &[VolumePlan],
    inputs: &PlanInputs<'_>,
) -> Result<ContainerPlan, PlanError> {
    let mut env: Vec<(String, String)> = Vec::new();
    let set = |env: &mut Vec<(String, String)>, name: String, value: String| {
        env.retain(|(n, _)| *n != name);
        env.push((name, value));
    };
    for source in container.env_from.iter().flatten() {
        let prefix = source.prefix.clone().unwrap_or_default();
        let pairs: Vec<(String, String)> = if let Some(r) = &source.config_map_ref {
            match inputs.config_maps.get(&r.name) {
                Some(map) => map
                    .data
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), v.clone()))
                    .collect(),
                None if r.optional == Some(true) => Vec::new(),
                None => return Err(waiting_config(&format!("configmap {:?} not found", r.name))),
            }
        } else if let Some(r) = &source.secret_ref {
            match inputs.secrets.get(&r.name) {
                Some(secret) => secret
                    .data
                    .iter()
                    .flatten()
                    .map(|(k, v)| (k.clone(), String::from_utf8_lossy(&v.0).into_owned()))
                    .collect(),
                None if r.optional == Some(true) => Vec::new(),
                None => return Err(waiting_config(&format!("secret {:?} not found", r.name))),
            }
        } else {
            Vec::new()
        };
        for (key, value) in pairs {
            set(&mut env, format!("{prefix}{key}"), value);
        }
    }
    let enable_links = pod.spec.as_ref().and_then(|s| s.enable_service_links) != Some(false);
    let namespace = pod.metadata.namespace.as_deref().unwrap_or("");
    let services = service_env(inputs.services, namespace, enable_links);
    // `$(VAR)` sees the variables defined so far, then the Services' (as the kubelet's).
    let visible = |env: &[(String, String)]| -> Vec<(String, String)> {
        services.iter().chain(env).cloned().collect()
    };
    for var in container.env.iter().flatten() {
        if let Some(value) = env_value(var, pod, inputs, &visible(&env))? {
            set(&mut env, var.name.clone(), value);
        }
    }
    for (name, value) in &services {
        if !env.iter().any(|(n, _)| n == name) {
            env.push((name.clone(), value.clone()));
        }
    }
    let argv = container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
        .map(|arg| expand(arg, &env))
        .collect();
    let mut mounts = Vec::new();
    for (i, mount) in container.volume_mounts.iter().flatten().enumerate() {
        let volume = volumes
            .iter()
            .find(|v| v.name == mount.name)
            .ok_or_else(|| {
                PlanError::Refused(vec![Unsupported {
                    field: format!("{path}.volumeMounts[{i}].name"),
                    reason: format!("no volume {:?} in the pod", mount.name),
                }])
            })?;
        // `subPath`, or `subPathExpr` expanded with the container's environment: a relative
        // path inside the volume (a ConfigMap's or Secret's file is bound as it is then, and
        // not updated, as on a kubelet).
        let sub = match (&mount.sub_path, &mount.sub_path_expr) {
            (Some(sub), _) if !sub.is_empty() => sub.clone(),
            (_, Some(expr)) if !expr.is_empty() => expand(expr, &env),
            _ => String::new(),
        };
        let inside = Path::new(&sub)
            .components()
            .all(|c| matches!(c, Component::Normal(_)));
        if !inside {
            return Err(PlanError::Refused(vec![Unsupported {
                field: format!("{path}.volumeMounts[{i}].subPath"),
                reason: format!("{sub:?} is not a relative path inside the volume"),
            }]));
        }
        let makes_dirs = matches!(
            volume.source,
            VolumeSource::EmptyDir | VolumeSource::HostPath { .. }
        );
        mounts.push(Mount {
            host: volume.host_path.join(&sub),
            container: mount.mount_path.clone(),
            read_only: mount.read_only == Some(true)
                || matches!(volume.source, VolumeSource::Files(_)),
            make_dir: !sub.is_empty() && makes_dirs,
        });
    }
    // Parents before the volumes inside them, as container runtimes mount them.
    mounts.sort_by_key(|m| Path::new(&m.container).components().count());
    Ok(ContainerPlan {
        name: container.name.clone(),
        image: container.image.clone().unwrap_or_default(),
        argv,
        env,
        working_dir: container.working_dir.clone().filter(|d| !d.is_empty()),
        mounts,
        probes: probes(path, container, inputs.pod_ip)?,
        capabilities: capabilities(container),
    })
}

fn waiting_config(message: &str) -> PlanError {
    PlanError::Waiting {
        reason: "CreateContainerConfigError",
        message: message.to_owned(),
    }
}

/// The value of `var` (`None`: an optional reference that is missing, so the variable is not
/// set, as the kubelet does).
fn env_value(
    var: &EnvVar,
    pod: &Pod,
    inputs: &PlanInputs<'_>,
    env: &[(String, String)],
) -> Result<Option<String>, PlanError> {
    let Some(from) = &var.value_from else {
        return Ok(Some(expand(var.value.as_deref().unwrap_or(""), env)));
    };
    if let Some(r) = &from.config_map_key_ref {
        let value = inputs
            .config_maps
            .get(&r.name)
            .and_then(|m| m.data.as_ref()?.get(&r.key).cloned());
        return match value {
            Some(value) => Ok(Some(value)),
            None if r.optional == Some(true) => Ok(None),
            None => Err(waiting_config(&format!(
                "couldn't find key {} in ConfigMap {}/{}",
                r.key,
                pod.metadata.namespace.as_deref().unwrap_or(""),
                r.name
            ))),
        };
    }
    if let Some(r) = &from.secret_key_ref {
        let value = inputs
            .secrets
            .get(&r.name)
            .and_then(|s| s.data.as_ref()?.get(&r.key).cloned());
        return match value {
            Some(value) => Ok(Some(String::from_utf8_lossy(&value.0).into_owned())),
            None if r.optional == Some(true) => Ok(None),
            None => Err(waiting_config(&format!(
                "couldn't find key {} in Secret {}/{}",
                r.key,
                pod.metadata.namespace.as_deref().unwrap_or(""),
                r.name
            ))),
        };
    }
    if let Some(r) = &from.field_ref {
        return Ok(Some(field_value(&r.field_path, pod, inputs.pod_ip)));
    }
    if let Some(r) = &from.resource_field_ref {
        return Ok(Some(resource_value(
            &r.resource,
            r.divisor.as_ref(),
            inputs,
        )));
    }
    // Refused by `unsupported_fields` (resourceFieldRef, fileKeyRef, ...).
    Ok(None)
}

/// The `resourceFieldRef` resources the runner resolves.
pub const RESOURCE_FIELDS: &[&str] = &[
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
];

/// A `resourceFieldRef`'s value as the kubelet gives it to a container without requests or
/// limits (the runner refuses those): a limit is the node's allocatable amount, a request 0;
/// divided by `divisor` (default 1), rounded up.
fn resource_value(
    resource: &str,
    divisor: Option<&k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
    inputs: &PlanInputs<'_>,
) -> String {
    // The API server stores an unset divisor as "0", which means 1.
    let divisor = divisor
        .and_then(|d| crate::quantity::parse(&d.0))
        .filter(|d| *d > 0.0)
        .unwrap_or(1.0);
    let value = match resource.split_once('.') {
        Some(("limits", name)) => inputs
            .node_allocatable
            .get(name)
            .and_then(|q| crate::quantity::parse(&q.0))
            .unwrap_or(0.0),
        _ => 0.0,
    };
    crate::quantity::divided(value, divisor)
}

/// `Some` when the runner resolves `fieldRef` path `path`.
pub fn field_ref_supported(path: &str) -> Option<()> {
    let keyed = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix("['"))
            .and_then(|rest| rest.strip_suffix("']"))
            .is_some()
    };
    (FIELD_REFS.contains(&path) || keyed("metadata.labels") || keyed("metadata.annotations"))
        .then_some(())
}

fn field_value(path: &str, pod: &Pod, pod_ip: IpAddr) -> String {
    let meta = &pod.metadata;
    let spec = pod.spec.as_ref();
    let key = |prefix: &str| {
        path.strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix("['"))
            .and_then(|rest| rest.strip_suffix("']"))
            .map(str::to_owned)
    };
    match path {
        "metadata.name" => meta.name.clone().unwrap_or_default(),
        "metadata.namespace" => meta.namespace.clone().unwrap_or_default(),
        "metadata.uid" => meta.uid.clone().unwrap_or_default(),
        "spec.nodeName" => spec.and_then(|s| s.node_name.clone()).unwrap_or_default(),
        "spec.serviceAccountName" => spec
            .and_then(|s| s.service_account_name.clone())
            .unwrap_or_default(),
        "status.podIP" | "status.podIPs" => pod_ip.to_string(),
        _ => {
            if let Some(k) = key("metadata.labels") {
                meta.labels
                    .as_ref()
                    .and_then(|l| l.get(&k).cloned())
                    .unwrap_or_default()
            } else if let Some(k) = key("metadata.annotations") {
                meta.annotations
                    .as_ref()
                    .and_then(|a| a.get(&k).cloned())
                    .unwrap_or_default()
            } else {
                String::new()
            }
        }
    }
}

/// Kubernetes' `$(VAR)` expansion: a defined variable's reference is replaced by its value, an
/// undefined one is left as written, `$$` is a `$`.
pub fn expand(input: &str, env: &[(String, String)]) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        if let Some(tail) = after.strip_prefix('$') {
            out.push('$');
            rest = tail;
        } else if let Some(tail) = after.strip_prefix('(')
            && let Some(end) = tail.find(')')
        {
            let name = &tail[..end];
            match env.iter().rev().find(|(n, _)| n == name) {
                Some((_, value)) => out.push_str(value),
                None => {
                    out.push_str("$(");
                    out.push_str(name);
                    out.push(')');
                }
            }
            rest = &tail[end + 1..];
        } else {
            out.push('$');
            rest = after;
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use k8s_openapi::ByteString;
    use serde_json::json;

    fn pod(spec: serde_json::Value) -> Pod {
        serde_json::from_value(json!({
            "metadata": {"name": "mon-a", "namespace": "rook", "uid": "u-1",
                         "labels": {"app": "rook-ceph-mon"}},
            "spec": spec,
        }))
        .unwrap()
    }

    fn base(mut extra: serde_json::Value) -> serde_json::Value {
        let mut spec = json!({
            "restartPolicy": "OnFailure", "terminationGracePeriodSeconds": 5,
            "dnsPolicy": "Default", "enableServiceLinks": false, "nodeName": "node-0",
            "automountServiceAccountToken": false,
            "containers": [{"name": "main", "image": "quay.io/ceph/ceph:v18",
                            "command": ["/bin/sh", "-c"], "args": ["echo $(GREETING) $$(x) $(NOPE)"]}],
        });
        if let (Some(spec), Some(extra)) = (spec.as_object_mut(), extra.as_object_mut()) {
            spec.append(extra);
        }
        spec
    }

    struct World {
        maps: BTreeMap<String, ConfigMap>,
        secrets: BTreeMap<String, Secret>,
        tokens: BTreeMap<String, String>,
        services: Vec<Service>,
        allocatable: BTreeMap<String, k8s_openapi::apimachinery::pkg::api::resource::Quantity>,
        dns: Option<ClusterDns>,
    }

    impl World {
        fn new() -> Self {
            let map: ConfigMap = serde_json::from_value(json!({
                "metadata": {"name": "conf"},
                "data": {"ceph.conf": "[global]\n", "greeting": "hello"},
            }))
            .unwrap();
            let mut secret = Secret::default();
            secret.metadata.name = Some("keys".to_owned());
            secret.data = Some(BTreeMap::from([(
                "keyring".to_owned(),
                ByteString(b"[mon.]\nkey = AQ==\n".to_vec()),
            )]));
            World {
                maps: BTreeMap::from([("conf".to_owned(), map)]),
                secrets: BTreeMap::from([("keys".to_owned(), secret)]),
                tokens: BTreeMap::new(),
                services: Vec::new(),
                allocatable: serde_json::from_value(json!({"cpu": "1000", "memory": "4Ti"}))
                    .unwrap(),
                dns: None,
            }
        }

        fn inputs(&self) -> PlanInputs<'_> {
            PlanInputs {
                pod_ip: "10.244.0.11".parse().unwrap(),
                config_maps: &self.maps,
                secrets: &self.secrets,
                pod_dir: "/run/pods/u-1".into(),
                node_dir: "/run/node".into(),
                tokens: &self.tokens,
                services: &self.services,
                node_allocatable: &self.allocatable,
                cluster_dns: self.dns.as_ref(),
                node_resolv_conf: "nameserver 192.0.2.53\nsearch example.org\n",
            }
        }
    }

    #[test]
    fn env_resolves_values_references_and_fields_in_order_and_expands_the_command() {
        let world = World::new();
        let spec = base(json!({"containers": [{
            "name": "main", "image": "ceph", "command": ["/bin/sh", "-c"],
            "args": ["echo $(GREETING) $$(x) $(NOPE) $(POD_IP)"],
            "envFrom": [{"configMapRef": {"name": "conf"}, "prefix": "CM_"}],
            "env": [
                {"name": "GREETING", "valueFrom": {"configMapKeyRef": {"name": "conf", "key": "greeting"}}},
                {"name": "KEY", "valueFrom": {"secretKeyRef": {"name": "keys", "key": "keyring"}}},
                {"name": "POD_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                {"name": "POD_NAMESPACE", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}},
                {"name": "APP", "valueFrom": {"fieldRef": {"fieldPath": "metadata.labels['app']"}}},
                {"name": "BIND", "value": "--public-bind-addr=$(POD_IP)"},
                {"name": "MISSING", "valueFrom": {"configMapKeyRef": {"name": "none", "key": "k", "optional": true}}},
            ],
        }]}));
        let plan = plan_pod(&pod(spec), &world.inputs()).unwrap();
        let main = &plan.containers[0];
        assert_eq!(
            main.argv,
            ["/bin/sh", "-c", "echo hello $(x) $(NOPE) 10.244.0.11"]
        );
        let names: Vec<&str> = main.env.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            names,
            [
                "CM_ceph.conf",
                "CM_greeting",
                "GREETING",
                "KEY",
                "POD_IP",
                "POD_NAME",
                "POD_NAMESPACE",
                "APP",
                "BIND"
            ]
        );
        let get = |n: &str| {
            main.env
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("KEY"), Some("[mon.]\nkey = AQ==\n"));
        assert_eq!(get("POD_NAMESPACE"), Some("rook"));
        assert_eq!(get("APP"), Some("rook-ceph-mon"));
        assert_eq!(get("BIND"), Some("--public-bind-addr=10.244.0.11"));
        assert_eq!(plan.restart_policy, RestartPolicy::OnFailure);
        assert_eq!(plan.grace_period, Duration::from_secs(5));
    }

    #[test]
    fn volumes_resolve_to_the_pods_directory_and_the_nodes_and_carry_their_files() {
        let world = World::new();
        let spec = base(json!({
            "volumes": [
                {"name": "config", "configMap": {"name": "conf", "items": [{"key": "ceph.conf", "path": "ceph.conf"}]}},
                {"name": "keyring", "secret": {"secretName": "keys", "defaultMode": 0o600}},
                {"name": "scratch", "emptyDir": {}},
                {"name": "data", "hostPath": {"path": "/var/lib/rook/mon-a", "type": "DirectoryOrCreate"}},
            ],
            "initContainers": [
                {"name": "first", "image": "ceph", "command": ["true"]},
                {"name": "second", "image": "ceph", "command": ["true"],
                 "volumeMounts": [{"name": "data", "mountPath": "/var/lib/ceph/mon/ceph-a"}]},
            ],
            "containers": [{"name": "main", "image": "ceph", "command": ["ceph-mon"],
                "volumeMounts": [
                    {"name": "config", "mountPath": "/etc/ceph"},
                    {"name": "keyring", "mountPath": "/etc/ceph/keyring-store"},
                    {"name": "scratch", "mountPath": "/scratch"},
                    {"name": "data", "mountPath": "/var/lib/ceph/mon/ceph-a", "readOnly": true},
                ]}],
        }));
        let plan = plan_pod(&pod(spec), &world.inputs()).unwrap();
        let hosts: Vec<&Path> = plan.volumes.iter().map(|v| v.host_path.as_path()).collect();
        assert_eq!(
            hosts,
            [
                Path::new("/run/pods/u-1/volumes/config"),
                Path::new("/run/pods/u-1/volumes/keyring"),
                Path::new("/run/pods/u-1/volumes/scratch"),
                Path::new("/run/node/var/lib/rook/mon-a"),
            ]
        );
        assert_eq!(
            plan.volumes[0].source,
            VolumeSource::Files(vec![VolumeFile {
                path: "ceph.conf".into(),
                data: b"[global]\n".to_vec(),
                mode: 0o644
            }])
        );
        assert_eq!(
            plan.volumes[1].source,
            VolumeSource::Files(vec![VolumeFile {
                path: "keyring".into(),
                data: b"[mon.]\nkey = AQ==\n".to_vec(),
                mode: 0o600
            }])
        );
        let init: Vec<&str> = plan
            .init_containers
            .iter()
            .map(|c| c.name.as_str())
            .collect();
        assert_eq!(init, ["first", "second"]);
        let mounts: Vec<(&str, bool)> = plan.containers[0]
            .mounts
            .iter()
            .map(|m| (m.container.as_str(), m.read_only))
            .collect();
        assert_eq!(
            mounts,
            [
                ("/scratch", false),
                ("/etc/ceph", true),
                ("/etc/ceph/keyring-store", true),
                ("/var/lib/ceph/mon/ceph-a", true)
            ],
            "parents before the volumes inside them"
        );
    }

    #[test]
    fn a_missing_object_waits_and_a_refusal_names_every_field() {
        let world = World::new();
        let missing = base(json!({"volumes": [{"name": "c", "configMap": {"name": "later"}}]}));
        assert_eq!(
            plan_pod(&pod(missing), &world.inputs()),
            Err(PlanError::Waiting {
                reason: "FailedMount",
                message: "ConfigMap later not found".into()
            })
        );
        let key = base(json!({"containers": [{"name": "m", "command": ["x"],
            "env": [{"name": "A", "valueFrom": {"secretKeyRef": {"name": "keys", "key": "nope"}}}]}]}));
        assert!(matches!(
            plan_pod(&pod(key), &world.inputs()),
            Err(PlanError::Waiting {
                reason: "CreateContainerConfigError",
                ..
            })
        ));
        let refused = base(json!({
            "volumes": [{"name": "t", "nfs": {"server": "nfs", "path": "/x"}},
                        {"name": "h", "hostPath": {"path": "/var/../etc"}}],
            "containers": [{"name": "m", "image": "ceph", "tty": true}],
        }));
        let Err(PlanError::Refused(fields)) = plan_pod(&pod(refused), &world.inputs()) else {
            panic!("not refused");
        };
        let mut names: Vec<&str> = fields.iter().map(|f| f.field.as_str()).collect();
        names.sort();
        assert_eq!(
            names,
            [
                "spec.containers[0].command",
                "spec.containers[0].tty",
                "spec.volumes[0].nfs",
                "spec.volumes[1].hostPath.path"
            ]
        );
    }

    #[test]
    fn the_api_servers_token_volume_waits_for_its_token_then_projects_every_source() {
        let mut world = World::new();
        let ca: ConfigMap = serde_json::from_value(json!({
            "metadata": {"name": "kube-root-ca.crt"}, "data": {"ca.crt": "PEM"},
        }))
        .unwrap();
        world.maps.insert("kube-root-ca.crt".to_owned(), ca);
        // The volume the API server adds to a pod that does not opt out, as 1.37 writes it.
        let spec = base(json!({"volumes": [
            {"name": "kube-api-access-x", "projected": {"defaultMode": 420, "sources": [
                {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
                {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                {"downwardAPI": {"items": [{"path": "namespace",
                    "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}},
            ]}},
            {"name": "info", "downwardAPI": {"items": [
                {"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}},
                {"path": "name", "fieldRef": {"fieldPath": "metadata.name"}, "mode": 0o600},
            ]}},
        ]}));
        let pod = pod(spec);
        assert_eq!(
            token_audiences(&pod),
            BTreeMap::from([(String::new(), Some(3607))])
        );
        assert!(matches!(
            plan_pod(&pod, &world.inputs()),
            Err(PlanError::Waiting {
                reason: "FailedMount",
                ..
            })
        ));
        world.tokens.insert(String::new(), "eyJ.token".to_owned());
        let plan = plan_pod(&pod, &world.inputs()).unwrap();
        let files = |i: usize| match &plan.volumes[i].source {
            VolumeSource::Files(files) => files
                .iter()
                .map(|f| {
                    (
                        f.path.clone(),
                        String::from_utf8_lossy(&f.data).into_owned(),
                        f.mode,
                    )
                })
                .collect::<Vec<_>>(),
            other => panic!("{other:?}"),
        };
        let owned = |p: &str, d: &str, m: u32| (p.to_owned(), d.to_owned(), m);
        assert_eq!(
            files(0),
            [
                owned("token", "eyJ.token", 0o644),
                owned("ca.crt", "PEM", 0o644),
                owned("namespace", "rook", 0o644)
            ]
        );
        assert_eq!(
            files(1),
            [
                owned("labels", "app=\"rook-ceph-mon\"\n", 0o644),
                owned("name", "mon-a", 0o600)
            ]
        );
    }

    fn service(namespace: &str, name: &str, ip: &str, ports: serde_json::Value) -> Service {
        serde_json::from_value(json!({
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"clusterIP": ip, "ports": ports},
        }))
        .unwrap()
    }

    #[test]
    fn services_give_the_kubelets_variables_and_the_api_servers_always() {
        let services = [
            service(
                "default",
                "kubernetes",
                "10.96.0.1",
                json!([{"name": "https", "port": 443}]),
            ),
            service(
                "rook",
                "rook-ceph-mon-a",
                "10.96.3.4",
                json!([
                    {"name": "tcp-msgr1", "port": 6789, "protocol": "TCP"},
                    {"name": "tcp-msgr2", "port": 3300},
                ]),
            ),
            service("rook", "headless", "None", json!([{"port": 80}])),
            service("other", "elsewhere", "10.96.9.9", json!([{"port": 80}])),
        ];
        let env: BTreeMap<String, String> =
            service_env(&services, "rook", true).into_iter().collect();
        let want: BTreeMap<String, String> = [
            ("KUBERNETES_SERVICE_HOST", "10.96.0.1"),
            ("KUBERNETES_SERVICE_PORT", "443"),
            ("KUBERNETES_SERVICE_PORT_HTTPS", "443"),
            ("KUBERNETES_PORT", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP", "tcp://10.96.0.1:443"),
            ("KUBERNETES_PORT_443_TCP_PROTO", "tcp"),
            ("KUBERNETES_PORT_443_TCP_PORT", "443"),
            ("KUBERNETES_PORT_443_TCP_ADDR", "10.96.0.1"),
            ("ROOK_CEPH_MON_A_SERVICE_HOST", "10.96.3.4"),
            ("ROOK_CEPH_MON_A_SERVICE_PORT", "6789"),
            ("ROOK_CEPH_MON_A_SERVICE_PORT_TCP_MSGR1", "6789"),
            ("ROOK_CEPH_MON_A_SERVICE_PORT_TCP_MSGR2", "3300"),
            ("ROOK_CEPH_MON_A_PORT", "tcp://10.96.3.4:6789"),
            ("ROOK_CEPH_MON_A_PORT_6789_TCP", "tcp://10.96.3.4:6789"),
            ("ROOK_CEPH_MON_A_PORT_6789_TCP_PROTO", "tcp"),
            ("ROOK_CEPH_MON_A_PORT_6789_TCP_PORT", "6789"),
            ("ROOK_CEPH_MON_A_PORT_6789_TCP_ADDR", "10.96.3.4"),
            ("ROOK_CEPH_MON_A_PORT_3300_TCP", "tcp://10.96.3.4:3300"),
            ("ROOK_CEPH_MON_A_PORT_3300_TCP_PROTO", "tcp"),
            ("ROOK_CEPH_MON_A_PORT_3300_TCP_PORT", "3300"),
            ("ROOK_CEPH_MON_A_PORT_3300_TCP_ADDR", "10.96.3.4"),
        ]
        .into_iter()
        .map(|(k, v)| (k.to_owned(), v.to_owned()))
        .collect();
        assert_eq!(env, want);
        let without: Vec<String> = service_env(&services, "rook", false)
            .into_iter()
            .map(|(k, _)| k)
            .collect();
        assert!(
            without.iter().all(|k| k.starts_with("KUBERNETES_")),
            "{without:?}"
        );
        assert_eq!(without.len(), 8);
    }

    #[test]
    fn service_variables_are_seen_by_expansion_and_lose_to_the_containers_own() {
        let mut world = World::new();
        world.services = vec![service("rook", "mon", "10.96.3.4", json!([{"port": 6789}]))];
        let spec = base(json!({"enableServiceLinks": true, "containers": [{
            "name": "m", "command": ["echo", "$(MON_SERVICE_HOST)"],
            "env": [{"name": "MON_SERVICE_PORT", "value": "1"}, {"name": "A", "value": "$(MON_PORT)"}],
        }]}));
        let plan = plan_pod(&pod(spec), &world.inputs()).unwrap();
        let main = &plan.containers[0];
        assert_eq!(main.argv, ["echo", "10.96.3.4"]);
        let get = |n: &str| {
            main.env
                .iter()
                .find(|(k, _)| k == n)
                .map(|(_, v)| v.as_str())
        };
        assert_eq!(get("MON_SERVICE_PORT"), Some("1"));
        assert_eq!(get("A"), Some("tcp://10.96.3.4:6789"));
    }

    #[test]
    fn exec_probes_get_the_api_servers_defaults() {
        let world = World::new();
        let spec = base(json!({"containers": [{"name": "m", "command": ["ceph-mon"],
            "startupProbe": {"exec": {"command": ["sh", "-c", "ok"]}, "failureThreshold": 6, "periodSeconds": 10},
            "livenessProbe": {"exec": {"command": ["true"]}, "initialDelaySeconds": 10},
        }]}));
        let plan = plan_pod(&pod(spec), &world.inputs()).unwrap();
        assert_eq!(
            plan.containers[0].probes,
            [
                ProbePlan {
                    kind: ProbeKind::Startup,
                    argv: vec!["sh".into(), "-c".into(), "ok".into()],
                    initial_delay: Duration::ZERO,
                    period: Duration::from_secs(10),
                    timeout: Duration::from_secs(1),
                    success_threshold: 1,
                    failure_threshold: 6,
                },
                ProbePlan {
                    kind: ProbeKind::Liveness,
                    argv: vec!["true".into()],
                    initial_delay: Duration::from_secs(10),
                    period: Duration::from_secs(10),
                    timeout: Duration::from_secs(1),
                    success_threshold: 1,
                    failure_threshold: 3,
                },
            ]
        );
    }

    #[test]
    fn resource_fields_give_the_nodes_allocatable_as_limits_and_zero_as_requests() {
        let world = World::new();
        let field = |name: &str, resource: &str, divisor: Option<&str>| {
            let mut r = json!({"resource": resource});
            if let Some(d) = divisor {
                r["divisor"] = json!(d);
            }
            json!({"name": name, "valueFrom": {"resourceFieldRef": r}})
        };
        // Rook's daemons' variables.
        let spec = base(
            json!({"containers": [{"name": "m", "command": ["ceph-mon"], "env": [
                            field("POD_MEMORY_LIMIT", "limits.memory", None),
                field("POD_MEMORY_REQUEST", "requests.memory", None),
                field("POD_CPU_LIMIT", "limits.cpu", Some("1")),
                field("POD_CPU_REQUEST", "requests.cpu", Some("1")),
                field("MILLICORES", "limits.cpu", Some("1m")),
            field("STORED_UNSET", "limits.memory", Some("0")),
            ]}]}),
        );
        let plan = plan_pod(&pod(spec), &world.inputs()).unwrap();
        let env = &plan.containers[0].env;
        let values: Vec<&str> = env.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(
            values,
            [
                "4398046511104",
                "0",
                "1000",
                "0",
                "1000000",
                "4398046511104"
            ]
        );
    }

    #[test]
    fn resolv_conf_follows_the_dns_policy_as_the_kubelet_writes_it() {
        let mut world = World::new();
        let resolv = |world: &World, dns: serde_json::Value| {
            let mut spec = base(json!({}));
            for (k, v) in dns.as_object().unwrap() {
                spec[k] = v.clone();
            }
            plan_pod(&pod(spec), &world.inputs()).unwrap().resolv_conf
        };
        let options = json!({"nameservers": ["10.0.0.1"], "searches": ["x.test"],
                             "options": [{"name": "ndots", "value": "2"}, {"name": "edns0"}]});
        // No cluster DNS: ClusterFirst falls back to the node's file, as on such a kubelet.
        assert_eq!(resolv(&world, json!({"dnsPolicy": "ClusterFirst"})), None);
        assert_eq!(resolv(&world, json!({"dnsPolicy": "Default"})), None);
        assert_eq!(
            resolv(
                &world,
                json!({"dnsPolicy": "Default", "dnsConfig": options})
            )
            .as_deref(),
            Some(
                "nameserver 192.0.2.53\nnameserver 10.0.0.1\nsearch example.org x.test\noptions ndots:2 edns0\n"
            )
        );
        world.dns = Some(ClusterDns {
            nameserver: "10.96.0.10".parse().unwrap(),
            domain: "cluster.local".to_owned(),
        });
        assert_eq!(
            resolv(&world, json!({"dnsPolicy": "ClusterFirst"})).as_deref(),
            Some(
                "nameserver 10.96.0.10\nsearch rook.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n"
            )
        );
        assert_eq!(
            resolv(&world, json!({"dnsPolicy": "None", "dnsConfig": options})).as_deref(),
            Some("nameserver 10.0.0.1\nsearch x.test\noptions ndots:2 edns0\n")
        );
        let mut spec = base(json!({}));
        spec["dnsPolicy"] = json!("ClusterFirst");
        let plan = plan_pod(&pod(spec), &world.inputs()).unwrap();
        let mount = plan.containers[0]
            .mounts
            .iter()
            .find(|m| m.container == "/etc/resolv.conf")
            .unwrap();
        assert_eq!(
            (mount.host.as_path(), mount.read_only),
            (Path::new("/run/pods/u-1/resolv.conf"), true)
        );
    }

    #[test]
    fn capabilities_are_the_runtimes_defaults_changed_by_the_security_context() {
        let world = World::new();
        let caps = |context: serde_json::Value| {
            let spec = base(
                json!({"containers": [{"name": "m", "command": ["x"], "securityContext": context}]}),
            );
            plan_pod(&pod(spec), &world.inputs()).unwrap().containers[0]
                .capabilities
                .clone()
        };
        assert_eq!(caps(json!({})).unwrap().len(), 14);
        assert_eq!(caps(json!({"privileged": true})), None);
        assert_eq!(
            caps(
                json!({"privileged": false, "capabilities": {"drop": ["ALL"], "add": ["NET_ADMIN", "CAP_SYS_ADMIN"]}})
            ),
            Some(vec!["net_admin".to_owned(), "sys_admin".to_owned()])
        );
        let dropped = caps(json!({"capabilities": {"drop": ["NET_RAW"]}})).unwrap();
        assert!(!dropped.contains(&"net_raw".to_owned()) && dropped.len() == 13);
    }

    #[test]
    fn tcp_and_http_probes_become_commands_to_the_pods_ip() {
        let world = World::new();
        let spec = base(json!({"containers": [{"name": "m", "command": ["x"],
            "ports": [{"name": "metrics", "containerPort": 9283}],
            "livenessProbe": {"tcpSocket": {"port": "metrics"}},
            "readinessProbe": {"httpGet": {"port": 8443, "path": "/ok", "scheme": "HTTPS",
                "httpHeaders": [{"name": "X-A", "value": "1"}]}},
        }]}));
        let plan = plan_pod(&pod(spec), &world.inputs()).unwrap();
        let probes = &plan.containers[0].probes;
        assert_eq!(
            probes[0].argv,
            ["bash", "-c", "exec 3<>/dev/tcp/10.244.0.11/9283"]
        );
        assert_eq!(probes[1].argv[0], "python3");
        assert_eq!(probes[1].argv[3], "https://10.244.0.11:8443/ok");
        assert_eq!(probes[1].argv[4], r#"{"X-A":"1"}"#);
        let unnamed = base(json!({"containers": [{"name": "m", "command": ["x"],
            "livenessProbe": {"tcpSocket": {"port": "nope"}}}]}));
        let Err(PlanError::Refused(fields)) = plan_pod(&pod(unnamed), &world.inputs()) else {
            panic!("not refused");
        };
        assert_eq!(fields[0].field, "spec.containers[0].livenessProbe");
    }

    #[test]
    fn sub_paths_mount_a_path_inside_the_volume() {
        let world = World::new();
        let mount = |sub: serde_json::Value| {
            let mut volume_mount = json!({"name": "data", "mountPath": "/var/lib/ceph"});
            for (k, v) in sub.as_object().unwrap() {
                volume_mount[k] = v.clone();
            }
            let spec = base(json!({
                "volumes": [{"name": "data", "emptyDir": {}}],
                "containers": [{"name": "m", "command": ["x"], "volumeMounts": [volume_mount],
                                "env": [{"name": "POD_NAME", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}}]}],
            }));
            plan_pod(&pod(spec), &world.inputs()).map(|p| p.containers[0].mounts[0].clone())
        };
        let sub = mount(json!({"subPath": "mon/a"})).unwrap();
        assert_eq!(
            (sub.host, sub.make_dir),
            (PathBuf::from("/run/pods/u-1/volumes/data/mon/a"), true)
        );
        let expr = mount(json!({"subPathExpr": "$(POD_NAME)"})).unwrap();
        assert_eq!(expr.host, PathBuf::from("/run/pods/u-1/volumes/data/mon-a"));
        assert!(!mount(json!({})).unwrap().make_dir);
        let Err(PlanError::Refused(fields)) = mount(json!({"subPath": "../escape"})) else {
            panic!("not refused");
        };
        assert_eq!(
            fields[0].field,
            "spec.containers[0].volumeMounts[0].subPath"
        );
    }

    #[test]
    fn restart_policies_decide_by_exit_code() {
        assert!(RestartPolicy::Always.restarts(0));
        assert!(RestartPolicy::OnFailure.restarts(1));
        assert!(!RestartPolicy::OnFailure.restarts(0));
        assert!(!RestartPolicy::Never.restarts(1));
        assert!(!RestartPolicy::Never.retries_init());
    }

    #[test]
    fn expansion_follows_kubernetes() {
        let env = vec![("A".to_owned(), "1".to_owned())];
        assert_eq!(expand("$(A)-$$(A)-$(B)-$-$", &env), "1-$(A)-$(B)-$-$");
        assert_eq!(expand("$(A", &env), "$(A");
    }
}

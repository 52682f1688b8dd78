//! `mcsctl version`: the client's version, the Kubernetes server's (`/version`), and the
//! server-side versions of the clusterset components it runs — the Pods labelled
//! `app.kubernetes.io/part-of=clusterset` (the charts label mcs-ceph-operator's and
//! clusterset-agent's Pods so), by their `app.kubernetes.io/name` and `app.kubernetes.io/version`.

use std::fmt::Write as _;

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::apimachinery::pkg::version::Info;
use serde::Serialize;

use crate::Scope;
use crate::table::{Cell, Layout, Table, style, styled};

/// The label selector of the clusterset components' Pods:
/// `app.kubernetes.io/part-of=clusterset`.
pub fn part_of_selector() -> String {
    format!(
        "{}={}",
        mcs_types::labels::APP_PART_OF_LABEL,
        mcs_types::labels::CLUSTERSET_PART_OF
    )
}
/// The label naming a component (`mcs-ceph-operator`, `clusterset-agent`).
pub const NAME_LABEL: &str = mcs_types::labels::APP_NAME_LABEL;
/// The label carrying a component's version.
pub const VERSION_LABEL: &str = mcs_types::labels::APP_VERSION_LABEL;

/// The client's version.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ClientVersion {
    /// The workspace version mcsctl was built from.
    pub version: String,
}

/// One running Pod of a clusterset component.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Component {
    /// `app.kubernetes.io/name` (`-` when the Pod lacks it).
    pub name: String,
    /// The Pod's namespace.
    pub namespace: String,
    /// The Pod's name.
    pub pod: String,
    /// `app.kubernetes.io/version`, when the Pod has it.
    pub version: Option<String>,
    /// The images of its containers, `,`-separated.
    pub image: String,
    /// Whether the Pod's `Ready` condition is `True`.
    pub ready: bool,
    /// Ready containers out of all, as kubectl shows them (`1/1`).
    pub ready_containers: String,
    /// The node it runs on.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub node: Option<String>,
    /// Its IP.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub pod_ip: Option<String>,
}

/// What `mcsctl version` prints.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct VersionReport {
    /// The client.
    pub client_version: ClientVersion,
    /// The API server's `/version`, when asked (not with `--client`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub server_version: Option<Info>,
    /// The clusterset components found, when asked.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub components: Option<Vec<Component>>,
    /// Where the components were looked for (`all namespaces`, `namespace NS`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
}

impl VersionReport {
    /// The client's version alone (`--client`, or before the server's is known).
    pub fn of_client(client_version: ClientVersion) -> Self {
        Self {
            client_version,
            server_version: None,
            components: None,
            scope: None,
        }
    }

    /// The client's version, the server's, and the components of `pods` (found in `scope`).
    pub fn of_cluster(
        client_version: ClientVersion,
        server_version: Info,
        pods: &[Pod],
        scope: &Scope,
    ) -> Self {
        Self {
            client_version,
            server_version: Some(server_version),
            components: Some(components(pods)),
            scope: Some(scope.to_string()),
        }
    }
}

/// The components of `pods`, sorted by component, namespace and Pod.
pub fn components(pods: &[Pod]) -> Vec<Component> {
    let mut components: Vec<Component> = pods
        .iter()
        .map(|pod| {
            let labels = pod.metadata.labels.clone().unwrap_or_default();
            let spec = pod.spec.clone().unwrap_or_default();
            let status = pod.status.clone().unwrap_or_default();
            let statuses = status.container_statuses.unwrap_or_default();
            let ready = status
                .conditions
                .unwrap_or_default()
                .iter()
                .any(|c| c.type_ == "Ready" && c.status == "True");
            Component {
                name: labels
                    .get(NAME_LABEL)
                    .cloned()
                    .unwrap_or_else(|| "-".to_owned()),
                namespace: pod.metadata.namespace.clone().unwrap_or_default(),
                pod: pod.metadata.name.clone().unwrap_or_default(),
                version: labels.get(VERSION_LABEL).cloned(),
                image: spec
                    .containers
                    .iter()
                    .filter_map(|c| c.image.clone())
                    .collect::<Vec<_>>()
                    .join(","),
                ready,
                ready_containers: format!(
                    "{}/{}",
                    statuses.iter().filter(|s| s.ready).count(),
                    spec.containers.len()
                ),
                node: spec.node_name,
                pod_ip: status.pod_ip,
            }
        })
        .collect();
    components
        .sort_by(|a, b| (&a.name, &a.namespace, &a.pod).cmp(&(&b.name, &b.namespace, &b.pod)));
    components
}

/// The report for people, as `kubectl version` prints it, then one row per component Pod:
/// `-o wide` adds its node and IP; `--no-headers` drops the column headers.
pub fn render_table_in(report: &VersionReport, layout: Layout) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "Client Version: {}", report.client_version.version);
    if let Some(server) = &report.server_version {
        let _ = writeln!(out, "Server Version: {}", server.git_version);
    }
    let Some(components) = &report.components else {
        return out;
    };
    let scope = report.scope.as_deref().unwrap_or("all namespaces");
    if components.is_empty() {
        let _ = writeln!(
            out,
            "{} no Pods labelled {} in {scope}: mcs-ceph-operator and clusterset-agent are not installed from their charts here",
            styled("Components:", style::HEADER),
            part_of_selector()
        );
        return out;
    }
    let mut headers = vec!["COMPONENT", "NAMESPACE", "POD", "VERSION", "IMAGE", "READY"];
    if layout.wide {
        headers.extend(["NODE", "IP"]);
    }
    let mut table = Table::new(&headers);
    for c in components {
        let ready_style = if c.ready { style::GOOD } else { style::BAD };
        let wide = layout.wide.then(|| {
            [
                Cell::from(c.node.clone().unwrap_or_else(|| "-".to_owned())),
                Cell::from(c.pod_ip.clone().unwrap_or_else(|| "-".to_owned())),
            ]
        });
        table.row(
            [
                Cell::from(c.name.as_str()),
                Cell::from(c.namespace.as_str()),
                Cell::from(c.pod.as_str()),
                c.version
                    .as_deref()
                    .map_or_else(|| Cell::new("-", style::WARN), Cell::from),
                Cell::from(c.image.as_str()),
                Cell::new(c.ready_containers.clone(), ready_style),
            ]
            .into_iter()
            .chain(wide.into_iter().flatten()),
        );
    }
    out.push_str(&table.render_in(layout));
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn pod(name: &str, component: &str, ready: bool) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": name, "namespace": "clusterset-system", "labels": {
                "app.kubernetes.io/part-of": "clusterset",
                "app.kubernetes.io/name": component,
                "app.kubernetes.io/version": "0.1.0"}},
            "spec": {"nodeName": "node-1", "containers": [{"name": "c", "image": format!("{component}:0.1.0")}]},
            "status": {"podIP": "10.0.0.7",
                "conditions": [{"type": "Ready", "status": if ready { "True" } else { "False" }}],
                "containerStatuses": [{"name": "c", "ready": ready, "restartCount": 0, "image": "", "imageID": ""}]}
        }))
        .unwrap()
    }

    #[test]
    fn components_are_grouped_by_name_with_version_image_and_readiness() {
        let pods = [
            pod("agent-b", "clusterset-agent", false),
            pod("operator-a", "mcs-ceph-operator", true),
            pod("agent-a", "clusterset-agent", true),
        ];
        let found = components(&pods);
        let rows: Vec<(&str, &str, bool)> = found
            .iter()
            .map(|c| (c.name.as_str(), c.pod.as_str(), c.ready))
            .collect();
        assert_eq!(
            rows,
            [
                ("clusterset-agent", "agent-a", true),
                ("clusterset-agent", "agent-b", false),
                ("mcs-ceph-operator", "operator-a", true)
            ]
        );
        assert_eq!(found[0].image, "clusterset-agent:0.1.0");
        assert_eq!(found[1].ready_containers, "0/1");
        let report = VersionReport {
            client_version: ClientVersion {
                version: "0.1.0".to_owned(),
            },
            server_version: None,
            components: Some(found),
            scope: None,
        };
        let wide = render_table_in(
            &report,
            Layout {
                wide: true,
                headers: true,
            },
        );
        assert!(wide.contains("NODE"), "{wide}");
        assert!(wide.contains("10.0.0.7"), "{wide}");
        let plain = render_table_in(
            &report,
            Layout {
                wide: false,
                headers: false,
            },
        );
        assert!(
            !plain.contains("COMPONENT") && !plain.contains("node-1"),
            "{plain}"
        );
    }

    #[test]
    fn the_client_alone_has_no_server_part_and_a_cluster_brings_its_components_and_scope() {
        let client = ClientVersion {
            version: "0.1.0".to_owned(),
        };
        let alone = VersionReport::of_client(client.clone());
        assert_eq!(
            render_table_in(&alone, Layout::default()),
            "Client Version: 0.1.0\n"
        );
        assert_eq!(
            serde_json::to_value(&alone).unwrap(),
            serde_json::json!({"clientVersion": {"version": "0.1.0"}})
        );
        let server: Info = serde_json::from_value(serde_json::json!({
            "major": "1", "minor": "37", "gitVersion": "v1.37.0", "gitCommit": "", "gitTreeState": "",
            "buildDate": "", "goVersion": "", "compiler": "", "platform": ""
        }))
        .unwrap();
        let pods = [pod("agent-a", "clusterset-agent", true)];
        let report = VersionReport::of_cluster(
            client,
            server,
            &pods,
            &Scope::Namespace("clusterset-system".to_owned()),
        );
        assert_eq!(report.scope.as_deref(), Some("namespace clusterset-system"));
        assert_eq!(report.components.map(|c| c.len()), Some(1));
        assert_eq!(
            report.server_version.map(|v| v.git_version).as_deref(),
            Some("v1.37.0")
        );
    }
}

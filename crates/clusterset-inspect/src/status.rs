//! What `mcsctl status` reads: [`fetch`].

use std::collections::{BTreeMap, BTreeSet};

use ceph_address_plan::rook;
use clusterset_report::Scope;
use clusterset_report::status::{CephNamespace, DAEMON_SERVICES, Fetched, OSD_DEPLOYMENTS};
use clusterset_report::view::CephClusterView;
use mcs_types::labels::SERVICE_NAME_LABEL;

use crate::reader::{ClusterReader, Result};

/// Reads what `status` needs in `scope`.
pub async fn fetch(reader: &dyn ClusterReader, scope: &Scope) -> Result<Fetched> {
    let (ceph_clusters, addressings, exports, imports, slices) = tokio::try_join!(
        reader.ceph_clusters(scope),
        reader.addressings(scope),
        reader.service_exports(scope, None),
        reader.service_imports(scope, None),
        reader.endpoint_slices(scope, SERVICE_NAME_LABEL),
    )?;
    let namespaces: BTreeSet<String> = ceph_clusters
        .iter()
        .flatten()
        .map(|c| CephClusterView::of(c).namespace)
        .collect();
    let mut ceph_namespaces = BTreeMap::new();
    for namespace in namespaces {
        let (services, mon_endpoints, osd_deployments) = tokio::try_join!(
            reader.services(&namespace, DAEMON_SERVICES),
            reader.config_map(&namespace, rook::MON_ENDPOINTS_CONFIG_MAP),
            reader.deployments(&namespace, OSD_DEPLOYMENTS),
        )?;
        ceph_namespaces.insert(
            namespace,
            CephNamespace {
                services,
                mon_endpoints,
                osd_deployments,
            },
        );
    }
    Ok(Fetched {
        scope: scope.clone(),
        ceph_clusters,
        addressings,
        exports,
        imports,
        slices,
        ceph_namespaces,
    })
}

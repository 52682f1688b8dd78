//! `mcsctl crds -o table`: one line per CRD.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::table::{Cell, Table};

/// One line per CRD: name, group, kind, versions (storage version marked), scope.
pub fn render_table(crds: &[CustomResourceDefinition]) -> String {
    let mut table = Table::new(&["NAME", "GROUP", "KIND", "VERSIONS", "SCOPE"]);
    for crd in crds {
        let versions: Vec<String> = crd
            .spec
            .versions
            .iter()
            .map(|v| {
                if v.storage {
                    format!("{} (storage)", v.name)
                } else {
                    v.name.clone()
                }
            })
            .collect();
        table.row([
            Cell::from(crd.metadata.name.clone().unwrap_or_default()),
            Cell::from(crd.spec.group.as_str()),
            Cell::from(crd.spec.names.kind.as_str()),
            Cell::from(versions.join(", ")),
            Cell::from(crd.spec.scope.as_str()),
        ]);
    }
    table.render()
}

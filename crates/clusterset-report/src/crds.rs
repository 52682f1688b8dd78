//! `mcsctl crds -o table`: one line per CRD.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

use crate::table::{Cell, Layout, Table};

/// The CRD type as `kubectl get -o name` names it.
pub const CRD_RESOURCE: &str = "customresourcedefinition.apiextensions.k8s.io";

/// One line per CRD: name, group, kind, versions (storage version marked), scope.
pub fn render_table(crds: &[CustomResourceDefinition]) -> String {
    render_table_in(crds, Layout::default())
}

/// [`render_table`] in `layout`: `-o wide` adds the plural, the short names and the
/// categories; `--no-headers` drops the header line.
pub fn render_table_in(crds: &[CustomResourceDefinition], layout: Layout) -> String {
    let mut headers = vec!["NAME", "GROUP", "KIND", "VERSIONS", "SCOPE"];
    if layout.wide {
        headers.extend(["PLURAL", "SHORT-NAMES", "CATEGORIES"]);
    }
    let mut table = Table::new(&headers);
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
        let names = &crd.spec.names;
        let list = |items: &Option<Vec<String>>| {
            items
                .as_ref()
                .filter(|i| !i.is_empty())
                .map_or_else(|| "-".to_owned(), |i| i.join(","))
        };
        let wide = layout.wide.then(|| {
            [
                Cell::from(names.plural.as_str()),
                Cell::from(list(&names.short_names)),
                Cell::from(list(&names.categories)),
            ]
        });
        table.row(
            [
                Cell::from(crd.metadata.name.clone().unwrap_or_default()),
                Cell::from(crd.spec.group.as_str()),
                Cell::from(names.kind.as_str()),
                Cell::from(versions.join(", ")),
                Cell::from(crd.spec.scope.as_str()),
            ]
            .into_iter()
            .chain(wide.into_iter().flatten()),
        );
    }
    table.render_in(layout)
}

/// The CRDs as `kubectl get -o name` prints them.
pub fn names(crds: &[CustomResourceDefinition]) -> Vec<String> {
    crds.iter()
        .map(|crd| {
            format!(
                "{CRD_RESOURCE}/{}",
                crd.metadata.name.as_deref().unwrap_or_default()
            )
        })
        .collect()
}

//! `mcsctl resolve`: the names to ask for ([`names_to_ask`]), the outcome of each name
//! ([`NameResult`]), and its table.

use std::net::IpAddr;

use mcs_types::names::{ClustersetName, NameError, NameForm, Zone};
use serde::Serialize;

use crate::table::{Cell, Layout, Table, style};

/// The outcome of one name.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct NameResult {
    /// The name asked.
    pub name: String,
    /// Its addresses (empty when it failed).
    pub addresses: Vec<String>,
    /// Why it failed.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

impl NameResult {
    /// The outcome of `name`: its addresses, or why it did not resolve.
    ///
    /// ```
    /// use clusterset_report::resolve::NameResult;
    /// let ip: std::net::IpAddr = "242.1.0.7".parse()?;
    /// let ok = NameResult::new("web.shop.svc.clusterset.local", Ok::<_, String>(&[ip][..]));
    /// assert_eq!((ok.addresses, ok.error), (vec!["242.1.0.7".to_owned()], None));
    /// let failed = NameResult::new("nope", Err::<&[std::net::IpAddr], _>("no such name (NXDOMAIN)"));
    /// assert_eq!(failed.error.as_deref(), Some("no such name (NXDOMAIN)"));
    /// assert!(failed.addresses.is_empty());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn new<E: std::fmt::Display>(
        name: impl std::fmt::Display,
        outcome: Result<&[IpAddr], E>,
    ) -> Self {
        let (addresses, error) = match outcome {
            Ok(addresses) => (addresses.iter().map(ToString::to_string).collect(), None),
            Err(error) => (Vec::new(), Some(error.to_string())),
        };
        Self {
            name: name.to_string(),
            addresses,
            error,
        }
    }
}

/// Why a name given to `mcsctl resolve` cannot be asked for: a usage error.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AskError {
    /// Not a clusterset name in the zone.
    #[error("cannot resolve {text:?}")]
    NotInZone {
        /// The name as given.
        text: String,
        /// Why.
        #[source]
        source: NameError,
    },
    /// The cluster id does not make a per-cluster name of it.
    #[error("--cluster-id {cluster_id:?} with {text:?}")]
    ClusterId {
        /// The cluster id.
        cluster_id: String,
        /// The name as given.
        text: String,
        /// Why.
        #[source]
        source: NameError,
    },
    /// A cluster id with a name that is not a service name.
    #[error("--cluster-id needs service names (<svc>.<ns>.svc.{zone}), not {text:?}")]
    NotAService {
        /// The name as given.
        text: String,
        /// The zone.
        zone: Zone,
    },
}

/// The names to ask for: each of `texts` parsed in `zone`, and with a `cluster_id` turned into
/// its per-cluster form (`<id>.<svc>.<ns>.svc.<zone>`, which needs service names).
///
/// ```
/// use clusterset_report::resolve::names_to_ask;
/// use mcs_types::names::Zone;
/// let zone: Zone = "clusterset.local".parse()?;
/// let names = names_to_ask(&["web.shop.svc.clusterset.local".to_owned()], &zone, Some("east"))?;
/// assert_eq!(names[0].to_string(), "east.web.shop.svc.clusterset.local");
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn names_to_ask(
    texts: &[String],
    zone: &Zone,
    cluster_id: Option<&str>,
) -> Result<Vec<ClustersetName>, AskError> {
    texts
        .iter()
        .map(|text| {
            let name = ClustersetName::parse(text, zone).map_err(|source| AskError::NotInZone {
                text: text.clone(),
                source,
            })?;
            match cluster_id {
                None => Ok(name),
                Some(id) if name.form() == &NameForm::Service => {
                    name.cluster_service(id)
                        .map_err(|source| AskError::ClusterId {
                            cluster_id: id.to_owned(),
                            text: text.clone(),
                            source,
                        })
                }
                Some(_) => Err(AskError::NotAService {
                    text: text.clone(),
                    zone: zone.clone(),
                }),
            }
        })
        .collect()
}

/// Whether any name failed: the exit status of `mcsctl resolve`.
pub fn any_failed(results: &[NameResult]) -> bool {
    results.iter().any(|r| r.error.is_some())
}

/// One line per name: its addresses, or `-` when it failed.
pub fn render_table(results: &[NameResult]) -> String {
    render_table_in(results, Layout::default())
}

/// [`render_table`] in `layout`: `-o wide` adds why a name failed (`ERROR`); `--no-headers`
/// drops the header line.
pub fn render_table_in(results: &[NameResult], layout: Layout) -> String {
    let mut headers = vec!["NAME", "ADDRESSES"];
    if layout.wide {
        headers.push("ERROR");
    }
    let mut table = Table::new(&headers);
    for result in results {
        let addresses = match &result.error {
            None => Cell::from(result.addresses.join(",")),
            Some(_) => Cell::new("-", style::BAD),
        };
        let error = layout
            .wide
            .then(|| Cell::from(result.error.clone().unwrap_or_else(|| "-".to_owned())));
        table.row(
            [Cell::from(result.name.as_str()), addresses]
                .into_iter()
                .chain(error),
        );
    }
    table.render_in(layout)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ask(texts: &[&str], cluster_id: Option<&str>) -> Result<Vec<String>, String> {
        let zone: Zone = mcs_types::names::DEFAULT_ZONE
            .parse()
            .map_err(|e: NameError| e.to_string())?;
        let texts: Vec<String> = texts.iter().map(|t| (*t).to_owned()).collect();
        names_to_ask(&texts, &zone, cluster_id)
            .map(|names| names.iter().map(ToString::to_string).collect())
            .map_err(|e| match std::error::Error::source(&e) {
                Some(cause) => format!("{e}: {cause}"),
                None => e.to_string(),
            })
    }

    #[test]
    fn names_are_parsed_in_the_zone_and_made_per_cluster_with_an_id() {
        assert_eq!(
            ask(&["web.shop.svc.clusterset.local"], None),
            Ok(vec!["web.shop.svc.clusterset.local".to_owned()])
        );
        assert_eq!(
            ask(&["web.shop.svc.clusterset.local"], Some("east")),
            Ok(vec!["east.web.shop.svc.clusterset.local".to_owned()])
        );
    }

    #[test]
    fn each_refusal_names_the_name_and_the_flag() {
        assert_eq!(
            ask(&["bad name!"], None),
            Err("cannot resolve \"bad name!\": name \"bad name!\" is not in the clusterset zone \"clusterset.local\"".to_owned())
        );
        assert!(
            ask(&["web.shop.svc.clusterset.local"], Some("BAD ID"))
                .is_err_and(|e| e.starts_with("--cluster-id \"BAD ID\" with \"web.shop.svc.clusterset.local\": invalid cluster id \"BAD ID\""))
        );
        assert_eq!(
            ask(&["east.web.shop.svc.clusterset.local"], Some("east")),
            Err("--cluster-id needs service names (<svc>.<ns>.svc.clusterset.local), not \"east.web.shop.svc.clusterset.local\"".to_owned())
        );
    }

    #[test]
    fn a_failed_name_fails_the_run() {
        let ip: IpAddr = [242, 1, 0, 7].into();
        let ok = NameResult::new("a", Ok::<_, String>(&[ip][..]));
        let failed = NameResult::new("b", Err::<&[IpAddr], _>("NXDOMAIN"));
        assert!(!any_failed(std::slice::from_ref(&ok)));
        assert!(any_failed(&[ok, failed]));
    }
}

//! `mcsctl resolve`: the outcome of each name, and its table.

use std::net::IpAddr;

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

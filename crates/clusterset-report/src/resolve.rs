//! `mcsctl resolve`: the outcome of each name, and its table.

use serde::Serialize;

use crate::table::{Cell, Table, style};

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

/// One line per name: its addresses, or `-` when it failed.
pub fn render_table(results: &[NameResult]) -> String {
    let mut table = Table::new(&["NAME", "ADDRESSES"]);
    for result in results {
        let addresses = match &result.error {
            None => Cell::from(result.addresses.join(",")),
            Some(_) => Cell::new("-", style::BAD),
        };
        table.row([Cell::from(result.name.as_str()), addresses]);
    }
    table.render()
}

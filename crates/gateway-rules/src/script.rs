//! The text `nft -f -` applies: the whole table replaced in one transaction, or a delta of
//! element and export-chain changes, also one transaction.

use std::collections::BTreeMap;
use std::fmt::{self, Write as _};
use std::net::Ipv4Addr;

use crate::rules::{
    Chain, ChainName, Collection, Element, RuleSet, TABLE, declaration, export_chain,
};

impl RuleSet {
    /// The text of ONE nftables transaction that replaces the table `ip clusterset_gw`
    /// completely and touches no other table: `table ip clusterset_gw {}` (creates it if
    /// missing, so the delete cannot fail), `delete table ip clusterset_gw`, then the whole
    /// table. `nft -f` applies a file as one batch: all of it or, on any error, none of it,
    /// so the old table stays exactly as it was.
    pub fn to_nft_script(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = self.write_script(&mut out);
        out
    }

    fn write_script(&self, out: &mut String) -> fmt::Result {
        writeln!(out, "table ip {TABLE} {{}}")?;
        writeln!(out, "delete table ip {TABLE}")?;
        writeln!(out, "table ip {TABLE} {{")?;
        for collection in Collection::ALL {
            writeln!(out, "\t{}", declaration(collection))?;
            let elements = self.elements(collection);
            if !elements.is_empty() {
                writeln!(out, "\t\telements = {{")?;
                let last = elements.len() - 1;
                for (i, element) in elements.iter().enumerate() {
                    let comma = if i == last { "" } else { "," };
                    writeln!(out, "\t\t\t{element}{comma}")?;
                }
                writeln!(out, "\t\t}}")?;
            }
            writeln!(out, "\t}}")?;
        }
        for chain in self.chains() {
            write_chain(out, &chain)?;
        }
        writeln!(out, "}}")
    }

    /// The transaction that turns the table of `self` (as applied) into that of `next` by
    /// adding and deleting set and map elements and export chains only, or `None` when the base
    /// chains differ (another pod CIDR, global CIDR or egress IPs): then replace the whole table
    /// with [`RuleSet::to_nft_script`]. Routes are not part of it.
    pub fn delta_to(&self, next: &RuleSet) -> Option<Delta> {
        if self.base_chains() != next.base_chains() {
            return None;
        }
        let mut delta = Delta::default();
        for collection in Collection::ALL {
            let old = keyed(self.elements(collection));
            let new = keyed(next.elements(collection));
            for (key, element) in &old {
                if new.get(key) != Some(element) {
                    delta.delete_elements.push((collection, *element));
                }
            }
            for (key, element) in &new {
                if old.get(key) != Some(element) {
                    delta.add_elements.push((collection, *element));
                }
            }
        }
        let old = self.export_endpoints();
        let new = next.export_endpoints();
        for global in old.keys() {
            if !new.contains_key(global) {
                delta.delete_chains.push(ChainName::Export(*global));
            }
        }
        for (global, endpoints) in new {
            match old.get(global) {
                None => delta.add_chains.push(export_chain(*global, endpoints)),
                Some(before) if before != endpoints => {
                    delta.replace_chains.push(export_chain(*global, endpoints));
                }
                Some(_) => {}
            }
        }
        Some(delta)
    }
}

fn keyed(elements: Vec<Element>) -> BTreeMap<String, Element> {
    elements.into_iter().map(|e| (e.key(), e)).collect()
}

fn write_chain(out: &mut String, chain: &Chain) -> fmt::Result {
    writeln!(out, "\tchain {} {{", chain.name)?;
    if let Some(hook) = chain.hook {
        writeln!(out, "\t\t{hook}")?;
    }
    for rule in &chain.rules {
        writeln!(out, "\t\t{rule}")?;
    }
    writeln!(out, "\t}}")
}

/// The changes from one applied [`RuleSet`] to the next, as element and export-chain commands
/// of one transaction (see [`RuleSet::delta_to`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    delete_elements: Vec<(Collection, Element)>,
    delete_chains: Vec<ChainName>,
    add_chains: Vec<Chain>,
    replace_chains: Vec<Chain>,
    add_elements: Vec<(Collection, Element)>,
}

impl Delta {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.delete_elements.is_empty()
            && self.delete_chains.is_empty()
            && self.add_chains.is_empty()
            && self.replace_chains.is_empty()
            && self.add_elements.is_empty()
    }

    /// How many commands the transaction has.
    pub fn len(&self) -> usize {
        self.delete_elements.len()
            + self.delete_chains.len()
            + self.add_chains.len()
            + self.replace_chains.len()
            + self.add_elements.len()
    }

    /// The global IPs whose ingress or egress the delta changes (for logs).
    pub fn touched_addresses(&self) -> Vec<Ipv4Addr> {
        let mut out: Vec<Ipv4Addr> = self
            .delete_elements
            .iter()
            .chain(&self.add_elements)
            .filter_map(|(_, element)| match element {
                Element::Mapping(key, _) | Element::GotoExport(key) => Some(*key),
                Element::Prefix(_) => None,
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The text of the transaction: element deletions, export chains deleted, created or
    /// rewritten (`flush chain` then its rule), element additions; a changed element is deleted
    /// and added again. `nft -f` applies it all or nothing; it fails (changing nothing) if the
    /// table is not the one the delta starts from, and the caller then replaces the table.
    pub fn to_nft_script(&self) -> String {
        let mut out = String::new();
        // Writing into a String cannot fail.
        let _ = self.write_script(&mut out);
        out
    }

    fn write_script(&self, out: &mut String) -> fmt::Result {
        for (collection, element) in &self.delete_elements {
            writeln!(
                out,
                "delete element ip {TABLE} {} {{ {} }}",
                collection.name(),
                element.key()
            )?;
        }
        for chain in &self.delete_chains {
            writeln!(out, "delete chain ip {TABLE} {chain}")?;
        }
        for chain in &self.add_chains {
            writeln!(out, "add chain ip {TABLE} {}", chain.name)?;
            write_rules(out, chain)?;
        }
        for chain in &self.replace_chains {
            writeln!(out, "flush chain ip {TABLE} {}", chain.name)?;
            write_rules(out, chain)?;
        }
        for (collection, element) in &self.add_elements {
            writeln!(
                out,
                "add element ip {TABLE} {} {{ {element} }}",
                collection.name()
            )?;
        }
        Ok(())
    }
}

fn write_rules(out: &mut String, chain: &Chain) -> fmt::Result {
    for rule in &chain.rules {
        writeln!(out, "add rule ip {TABLE} {} {rule}", chain.name)?;
    }
    Ok(())
}

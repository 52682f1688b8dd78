//! The text `nft -f -` applies: the whole table replaced in one transaction, or a delta of
//! element and export-chain changes, also one transaction.

use std::fmt::{self, Write as _};
use std::net::Ipv4Addr;

use crate::rules::{
    Chain, ChainName, Collection, Element, RuleSet, TABLE, declaration, one_of_chain,
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
                    out.push_str("\t\t\t");
                    push_element(out, element);
                    out.push_str(if i == last { "\n" } else { ",\n" });
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
    /// adding and deleting set and map elements and `one_of_<N>` chains only, or `None` when the base
    /// chains differ (another pod CIDR, global CIDR or egress IPs): then replace the whole table
    /// with [`RuleSet::to_nft_script`]. Routes are not part of it.
    pub fn delta_to(&self, next: &RuleSet) -> Option<Delta> {
        if self.base_chains() != next.base_chains() {
            return None;
        }
        let mut delta = Delta::default();
        for collection in Collection::ALL {
            let (deleted, added) = diff(&self.elements(collection), &next.elements(collection));
            delta
                .delete_elements
                .extend(deleted.into_iter().map(|e| (collection, e)));
            delta
                .add_elements
                .extend(added.into_iter().map(|e| (collection, e)));
        }
        // A chain `one_of_<N>` depends on N only: it is added when the first export with N
        // endpoints comes and deleted when the last goes, never rewritten.
        let (old, new) = (self.endpoint_counts(), next.endpoint_counts());
        delta.delete_chains.extend(
            old.difference(&new)
                .map(|endpoints| ChainName::OneOf(*endpoints)),
        );
        delta.add_chains.extend(
            new.difference(&old)
                .map(|endpoints| one_of_chain(*endpoints)),
        );
        Some(delta)
    }
}

/// The elements to delete from `old` and to add to make it `new`, both sorted by key (as
/// [`RuleSet::elements`] gives them): a merge walk, no map built. A changed element is in both.
fn diff(old: &[Element], new: &[Element]) -> (Vec<Element>, Vec<Element>) {
    let (mut deleted, mut added) = (Vec::new(), Vec::new());
    let (mut o, mut n) = (old.iter().peekable(), new.iter().peekable());
    loop {
        match (o.peek(), n.peek()) {
            (None, None) => break,
            (Some(before), None) => {
                deleted.push(**before);
                o.next();
            }
            (None, Some(after)) => {
                added.push(**after);
                n.next();
            }
            (Some(before), Some(after)) => match before.key().cmp(&after.key()) {
                std::cmp::Ordering::Less => {
                    deleted.push(**before);
                    o.next();
                }
                std::cmp::Ordering::Greater => {
                    added.push(**after);
                    n.next();
                }
                std::cmp::Ordering::Equal => {
                    if before != after {
                        deleted.push(**before);
                        added.push(**after);
                    }
                    o.next();
                    n.next();
                }
            },
        }
    }
    (deleted, added)
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

/// The changes from one applied [`RuleSet`] to the next, as element and `one_of_<N>` chain
/// commands of one transaction (see [`RuleSet::delta_to`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Delta {
    delete_elements: Vec<(Collection, Element)>,
    delete_chains: Vec<ChainName>,
    add_chains: Vec<Chain>,
    add_elements: Vec<(Collection, Element)>,
}

impl Delta {
    /// Whether nothing changes.
    pub fn is_empty(&self) -> bool {
        self.delete_elements.is_empty()
            && self.delete_chains.is_empty()
            && self.add_chains.is_empty()
            && self.add_elements.is_empty()
    }

    /// How many commands the transaction has.
    pub fn len(&self) -> usize {
        self.delete_elements.len()
            + self.delete_chains.len()
            + self.add_chains.len()
            + self.add_elements.len()
    }

    /// The global IPs whose ingress or egress the delta changes (for logs).
    pub fn touched_addresses(&self) -> Vec<Ipv4Addr> {
        let mut out: Vec<Ipv4Addr> = self
            .delete_elements
            .iter()
            .chain(&self.add_elements)
            .filter_map(|(_, element)| match element {
                Element::Mapping(key, _)
                | Element::GotoOneOf(key, _)
                | Element::Endpoint { global: key, .. } => Some(*key),
                Element::Prefix(_) => None,
            })
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// The text of the transaction: element deletions, `one_of_<N>` chains deleted (no export
    /// has N endpoints any more) or created (with their rule), element additions; a changed
    /// element is deleted and added again. `nft -f` applies it all or nothing; it fails (changing nothing) if the
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

/// Writes `element` as its `Display` does, without the formatting machinery: the elements are
/// most of a large table's text.
fn push_element(out: &mut String, element: &Element) {
    match element {
        Element::Prefix(net) => {
            push_ipv4(out, net.network());
            out.push('/');
            push_decimal(out, net.prefix_len());
        }
        Element::Mapping(key, value) => {
            push_ipv4(out, *key);
            out.push_str(" : ");
            push_ipv4(out, *value);
        }
        Element::GotoOneOf(global, endpoints) => {
            push_ipv4(out, *global);
            out.push_str(" : goto one_of_");
            push_number(out, *endpoints);
        }
        Element::Endpoint {
            global,
            index,
            endpoint,
        } => {
            push_ipv4(out, *global);
            out.push_str(" . ");
            push_number(out, *index as usize);
            out.push_str(" : ");
            push_ipv4(out, *endpoint);
        }
    }
}

fn push_ipv4(out: &mut String, ip: Ipv4Addr) {
    for (i, octet) in ip.octets().into_iter().enumerate() {
        if i > 0 {
            out.push('.');
        }
        push_decimal(out, octet);
    }
}

fn push_number(out: &mut String, n: usize) {
    if n >= 10 {
        push_number(out, n / 10);
    }
    out.push(char::from(b'0' + (n % 10) as u8));
}

fn push_decimal(out: &mut String, n: u8) {
    if n >= 100 {
        out.push(char::from(b'0' + n / 100));
    }
    if n >= 10 {
        out.push(char::from(b'0' + n / 10 % 10));
    }
    out.push(char::from(b'0' + n % 10));
}

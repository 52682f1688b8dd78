//! Applying a [`RuleSet`] to this network namespace: the table through `nft -f -` (one atomic
//! transaction), the routes through `ip route`.
//!
//! **Why the `nft` and `ip` programs, not a netlink crate.** The nftables side is one text
//! transaction that `nft -f` applies all or nothing; `nft` is the reference implementation of
//! the syntax, so what `clusterset-gateway check` prints is exactly what is applied and what
//! `nft list table ip clusterset_gw` shows back. The `nftables` crate drives the same `nft`
//! program through its JSON form (one more serialisation, no gain in atomicity); `rustables`
//! speaks netlink itself but covers less of the language (verdict maps with `goto`, `numgen`,
//! `jhash` and `ct original` are what this table needs) and would add a netlink stack to the
//! graph. For routes, `rtnetlink` (async, tokio, netlink-packet-*) or `neli` would each add a
//! dozen crates for four commands: `ip route replace` (idempotent), `ip -j route show proto`
//! (our routes, marked by a protocol number of our own), `ip route del` and `ip -j route get`
//! (is a peer gateway directly reachable). The gateway runs where `nft` and `ip` are installed
//! (the image has them); a missing program is an error that names it.

use std::io::Write as _;
use std::net::Ipv4Addr;
use std::process::{Command, Stdio};

use anyhow::{Context, Result, bail};
use gateway_rules::{GatewayState, Route, RuleSet, TABLE};
use ipnet::Ipv4Net;

/// The routing protocol number that marks the routes this gateway owns (`ip route ... proto
/// 147`): the routes it removes when a peer goes are only these.
pub const ROUTE_PROTOCOL: &str = "147";

/// Reads, parses and checks a state file; the rule set it gives.
pub fn load(path: &std::path::Path) -> Result<RuleSet> {
    let text = std::fs::read_to_string(path)
        .with_context(|| format!("reading the state file {}", path.display()))?;
    rules_from_text(&text).with_context(|| format!("the state file {}", path.display()))
}

/// The rule set of a state file's text.
pub fn rules_from_text(text: &str) -> Result<RuleSet> {
    let state = GatewayState::parse(text)?;
    Ok(RuleSet::desired(&state)?)
}

/// How a rule set was applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Applied {
    /// The table was replaced whole.
    Replaced,
    /// Only these many element and export-chain commands were applied.
    Delta(usize),
    /// The table already was this rule set.
    Unchanged,
}

/// Applies `rules`: checks that every peer gateway is directly reachable, then programs the
/// table in one transaction (a delta from `previous`, what this process applied last, when
/// only elements changed; the whole table otherwise, or if the delta is refused), then the
/// routes. If the check or `nft` fails, nothing has changed.
pub fn apply(rules: &RuleSet, previous: Option<&RuleSet>) -> Result<Applied> {
    // Only the routes not in place yet are checked and written. When the routes are those
    // this process applied last, they are not even listed (a change of exports costs the `nft`
    // delta alone); `ensure_routes`, which `run` calls every ROUTES_RESYNC, puts back a
    // route someone deleted.
    let present = match previous {
        Some(previous) if previous.routes() == rules.routes() => rules
            .routes()
            .iter()
            .map(|r| (r.destination, Some(r.via)))
            .collect(),
        _ => our_routes()?,
    };
    let missing: Vec<&Route> = rules
        .routes()
        .iter()
        .filter(|r| !present.contains(&(r.destination, Some(r.via))))
        .collect();
    for route in &missing {
        check_direct(route.via, &route.destination.to_string())?;
    }
    let applied = match previous.and_then(|p| p.delta_to(rules)) {
        Some(delta) if delta.is_empty() && table_exists() => Applied::Unchanged,
        Some(delta) if !delta.is_empty() => match nft_transaction(&delta.to_nft_script()) {
            Ok(()) => Applied::Delta(delta.len()),
            Err(error) => {
                tracing::warn!(
                    error = format!("{error:#}"),
                    "the delta was refused; replacing the whole table"
                );
                nft_transaction(&rules.to_nft_script())?;
                Applied::Replaced
            }
        },
        _ => {
            nft_transaction(&rules.to_nft_script())?;
            Applied::Replaced
        }
    };
    apply_routes(rules.routes(), &missing, &present)?;
    Ok(applied)
}

/// How often `run` checks that its routes are still in place ([`ensure_routes`]).
pub const ROUTES_RESYNC: std::time::Duration = std::time::Duration::from_secs(10);

/// Puts back the routes of `rules` that are not in place (someone deleted or changed them), and
/// deletes ours no longer wanted; how many it wrote or deleted.
pub fn ensure_routes(rules: &RuleSet) -> Result<usize> {
    let present = our_routes()?;
    // A route whose peer is not reachable now is skipped (and logged); the others are put back.
    let missing: Vec<&Route> = rules
        .routes()
        .iter()
        .filter(|r| !present.contains(&(r.destination, Some(r.via))))
        .filter(|r| match check_direct(r.via, &r.destination.to_string()) {
            Ok(()) => true,
            Err(error) => {
                tracing::error!(error = format!("{error:#}"), "a route cannot be put back");
                false
            }
        })
        .collect();
    let extra = present
        .iter()
        .filter(|(dst, _)| !rules.routes().iter().any(|r| r.destination == *dst))
        .count();
    apply_routes(rules.routes(), &missing, &present)?;
    Ok(missing.len() + extra)
}

/// [`ensure_routes`] for the rule set in place, if any, logging what it put back.
pub fn resync_routes(applied: Option<&RuleSet>) {
    let Some(rules) = applied else {
        return;
    };
    match ensure_routes(rules) {
        Ok(0) => {}
        Ok(changed) => tracing::warn!(
            changed,
            "routes were not as applied (deleted or changed by someone else): put back"
        ),
        Err(error) => tracing::error!(error = format!("{error:#}"), "checking the routes failed"),
    }
}

/// Runs `nft -f -` with `script` on stdin: one transaction.
pub fn nft_transaction(script: &str) -> Result<()> {
    let mut child = Command::new("nft")
        .args(["-f", "-"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .context("running `nft` (is nftables installed?)")?;
    if let Some(mut stdin) = child.stdin.take() {
        stdin
            .write_all(script.as_bytes())
            .context("writing the transaction to nft")?;
    }
    let output = child.wait_with_output().context("waiting for nft")?;
    if !output.status.success() {
        bail!(
            "nft refused the transaction ({}), nothing was changed: {}",
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(())
}

/// Whether our table exists in this namespace.
fn table_exists() -> bool {
    Command::new("nft")
        .args(["list", "table", "ip", TABLE])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// `nft list table ip clusterset_gw`.
pub fn show() -> Result<String> {
    run("nft", &["list", "table", "ip", TABLE])
}

/// Runs a program; its stdout, or an error with its stderr.
fn run(program: &str, args: &[&str]) -> Result<String> {
    let output = Command::new(program)
        .args(args)
        .output()
        .with_context(|| format!("running `{program}` (is it installed?)"))?;
    if !output.status.success() {
        bail!(
            "`{program} {}` failed ({}): {}",
            args.join(" "),
            output.status,
            String::from_utf8_lossy(&output.stderr).trim()
        );
    }
    Ok(String::from_utf8_lossy(&output.stdout).into_owned())
}

/// Refuses a peer gateway `via` (the next hop to `destination`) that is not on a network this
/// gateway reaches directly (`ip route get` must answer without a `gateway`).
pub fn check_direct(via: Ipv4Addr, destination: &str) -> Result<()> {
    let via = via.to_string();
    let answer = run("ip", &["-j", "route", "get", &via]).with_context(|| {
        format!(
            "peer gateway {via} (for {destination}) is not reachable from this node; fix: connect the gateways' underlay or correct the peer's gateway address"
        )
    })?;
    let json: serde_json::Value =
        serde_json::from_str(&answer).context("reading `ip -j route get`")?;
    if let Some(next_hop) = json
        .get(0)
        .and_then(|r| r.get("gateway"))
        .and_then(|g| g.as_str())
    {
        bail!(
            "peer gateway {via} (for {destination}) is not on a network this node reaches directly (its route goes via {next_hop}); fix: use the peer gateway's address on the underlay or tunnel shared with this gateway"
        );
    }
    Ok(())
}

/// Our routes now: destination and next hop (`ip` prints a /32 without its length).
pub fn our_routes() -> Result<Vec<(Ipv4Net, Option<Ipv4Addr>)>> {
    let text = run("ip", &["-j", "route", "show", "proto", ROUTE_PROTOCOL])?;
    let json: serde_json::Value =
        serde_json::from_str(if text.trim().is_empty() { "[]" } else { &text })
            .context("reading `ip -j route show`")?;
    Ok(json
        .as_array()
        .map(|routes| {
            routes
                .iter()
                .filter_map(|r| {
                    let dst = r.get("dst")?.as_str()?;
                    let dst: Ipv4Net = if dst.contains('/') {
                        dst.parse().ok()?
                    } else {
                        Ipv4Net::new(dst.parse().ok()?, 32).ok()?
                    };
                    let via = r.get("gateway").and_then(|g| g.as_str()?.parse().ok());
                    Some((dst, via))
                })
                .collect()
        })
        .unwrap_or_default())
}

/// Writes the `missing` routes (`ip route replace`, idempotent) and deletes those of ours
/// (`present`) no longer wanted.
fn apply_routes(
    wanted: &[Route],
    missing: &[&Route],
    present: &[(Ipv4Net, Option<Ipv4Addr>)],
) -> Result<()> {
    for route in missing {
        let (dst, via) = (route.destination.to_string(), route.via.to_string());
        run(
            "ip",
            &[
                "route",
                "replace",
                &dst,
                "via",
                &via,
                "proto",
                ROUTE_PROTOCOL,
            ],
        )?;
    }
    for (dst, _) in present {
        if !wanted.iter().any(|r| r.destination == *dst) {
            run(
                "ip",
                &["route", "del", &dst.to_string(), "proto", ROUTE_PROTOCOL],
            )?;
        }
    }
    Ok(())
}

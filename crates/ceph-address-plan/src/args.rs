//! The address arguments of Rook's daemon containers, written and read in one place: what the
//! plan gives a daemon ([`DaemonArgs`]), the one reader of what a container passes now
//! ([`public_addr`], and for an OSD Deployment [`osd_public_addr`]), and the one editor that
//! puts the plan's arguments in place of the ones a container has ([`replace_address_args`]).
//!
//! Ceph takes an option both as `--flag=value` and as `--flag value` (two arguments). Rook and
//! this crate write the first form; the reader and the editor understand both, so that a
//! Deployment written either way is read (and rewritten) the same by every tool.
//!
//! ```
//! use ceph_address_plan::args::{self, DaemonArgs};
//! let planned = DaemonArgs {
//!     public_addr: "242.1.0.20".parse()?,
//!     msgr1_off: false,
//!     public_bind_addr: Some("$(ROOK_POD_IP)".into()),
//!     cluster_addr: Some("$(ROOK_POD_IP)".into()),
//! };
//! let rook: Vec<String> = ["--foreground", "--public-addr", "10.244.1.7"].map(String::from).into();
//! assert_eq!(args::public_addr(&rook), Some("10.244.1.7"));
//! let edited = args::replace_address_args(&rook, &args::OSD_ADDRESS_FLAGS, &planned.to_args());
//! assert_eq!(args::public_addr(&edited), Some("242.1.0.20"));
//! assert_eq!(edited[0], "--foreground");
//! # Ok::<(), std::net::AddrParseError>(())
//! ```

use std::net::IpAddr;

use k8s_openapi::api::apps::v1::Deployment;
use k8s_openapi::api::core::v1::Container;

/// `--public-addr`: the address a daemon advertises.
pub const PUBLIC_ADDR: &str = "--public-addr";
/// `--ms-bind-msgr1`: `false` for a mon on the msgr2 port only.
pub const MS_BIND_MSGR1: &str = "--ms-bind-msgr1";
/// `--public-bind-addr`: the address a daemon binds its public messenger to.
pub const PUBLIC_BIND_ADDR: &str = "--public-bind-addr";
/// `--cluster-addr`: the address an OSD binds its cluster messenger to.
pub const CLUSTER_ADDR: &str = "--cluster-addr";

/// The address flags the plan owns on a mon's containers (what [`DaemonArgs`] writes for a mon).
pub const MON_ADDRESS_FLAGS: [&str; 3] = [PUBLIC_ADDR, MS_BIND_MSGR1, PUBLIC_BIND_ADDR];
/// The address flags the plan owns on an OSD's container (what [`DaemonArgs`] writes for an
/// OSD).
pub const OSD_ADDRESS_FLAGS: [&str; 3] = [PUBLIC_ADDR, PUBLIC_BIND_ADDR, CLUSTER_ADDR];

/// The name of the OSD container in Rook's OSD Deployments.
pub const OSD_CONTAINER: &str = "osd";

/// The address-related arguments of a daemon's container, in the order Rook writes them.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DaemonArgs {
    /// `--public-addr=<ip>`: the address the daemon advertises (no port; the mon keeps the port
    /// of its monmap entry).
    pub public_addr: IpAddr,
    /// `--ms-bind-msgr1=false` for a mon on the msgr2 port only.
    pub msgr1_off: bool,
    /// `--public-bind-addr=<...>`: the pod IP the daemon binds (absent with host networking).
    pub public_bind_addr: Option<String>,
    /// `--cluster-addr=<...>`: OSDs with MCS bind the cluster network to the pod IP too.
    pub cluster_addr: Option<String>,
}

impl DaemonArgs {
    /// The arguments as strings, each as `--flag=value` (Rook's `config.NewFlag`); [`public_addr`]
    /// reads the address back.
    ///
    /// ```
    /// use ceph_address_plan::DaemonArgs;
    /// let args = DaemonArgs {
    ///     public_addr: "242.1.0.20".parse()?,
    ///     msgr1_off: false,
    ///     public_bind_addr: Some("$(ROOK_POD_IP)".into()),
    ///     cluster_addr: Some("$(ROOK_POD_IP)".into()),
    /// };
    /// assert_eq!(args.to_args(), [
    ///     "--public-addr=242.1.0.20",
    ///     "--public-bind-addr=$(ROOK_POD_IP)",
    ///     "--cluster-addr=$(ROOK_POD_IP)",
    /// ]);
    /// # Ok::<(), std::net::AddrParseError>(())
    /// ```
    pub fn to_args(&self) -> Vec<String> {
        let mut args = vec![format!("{PUBLIC_ADDR}={}", self.public_addr)];
        if self.msgr1_off {
            args.push(format!("{MS_BIND_MSGR1}=false"));
        }
        if let Some(bind) = &self.public_bind_addr {
            args.push(format!("{PUBLIC_BIND_ADDR}={bind}"));
        }
        if let Some(cluster) = &self.cluster_addr {
            args.push(format!("{CLUSTER_ADDR}={cluster}"));
        }
        args
    }
}

/// Whether `arg` is `flag` alone (`--flag`, its value in the next argument) or with its value
/// (`--flag=value`, the value returned).
fn match_flag<'a>(arg: &'a str, flag: &str) -> Option<Option<&'a str>> {
    let rest = arg.strip_prefix(flag)?;
    if rest.is_empty() {
        Some(None)
    } else {
        rest.strip_prefix('=').map(Some)
    }
}

/// The value of the first `flag` in `args`, written `--flag=value` or `--flag value`.
///
/// ```
/// use ceph_address_plan::args::flag_value;
/// let args = ["--id=3", "--public-bind-addr", "$(ROOK_POD_IP)"].map(String::from);
/// assert_eq!(flag_value(&args, "--id"), Some("3"));
/// assert_eq!(flag_value(&args, "--public-bind-addr"), Some("$(ROOK_POD_IP)"));
/// assert_eq!(flag_value(&args, "--public-addr"), None);
/// ```
pub fn flag_value<'a>(args: impl IntoIterator<Item = &'a String>, flag: &str) -> Option<&'a str> {
    let mut args = args.into_iter();
    while let Some(arg) = args.next() {
        match match_flag(arg, flag) {
            Some(Some(value)) => return Some(value),
            Some(None) => return args.next().map(String::as_str),
            None => {}
        }
    }
    None
}

/// The first `--public-addr` of `args` (either form), as text: an IP when Rook or the plan
/// wrote it, but read as found.
///
/// ```
/// use ceph_address_plan::args::public_addr;
/// assert_eq!(public_addr(&["--public-addr=242.1.0.20".to_owned()]), Some("242.1.0.20"));
/// assert_eq!(public_addr(&["--public-addr".to_owned(), "242.1.0.21".to_owned()]), Some("242.1.0.21"));
/// assert_eq!(public_addr(&["--public-addrv=1".to_owned()]), None);
/// ```
pub fn public_addr<'a>(args: impl IntoIterator<Item = &'a String>) -> Option<&'a str> {
    flag_value(args, PUBLIC_ADDR)
}

/// The OSD container of a Deployment: the one named `osd`, else the first.
pub fn osd_container(deployment: &Deployment) -> Option<&Container> {
    let containers = &deployment.spec.as_ref()?.template.spec.as_ref()?.containers;
    containers
        .iter()
        .find(|c| c.name == OSD_CONTAINER)
        .or_else(|| containers.first())
}

/// A container's command line: `command`, then `args`.
pub fn command_line(container: &Container) -> impl Iterator<Item = &String> {
    container
        .command
        .iter()
        .flatten()
        .chain(container.args.iter().flatten())
}

/// The `--public-addr` an OSD Deployment passes (either form), as text: what the operator
/// observes and `mcsctl` shows as the OSD's advertised address.
///
/// ```
/// use ceph_address_plan::args::osd_public_addr;
/// let deployment = serde_json::from_value(serde_json::json!({
///     "spec": {"selector": {}, "template": {"spec": {"containers": [
///         {"name": "osd", "command": ["ceph-osd"], "args": ["--public-addr", "242.1.0.20"]}]}}}
/// }))?;
/// assert_eq!(osd_public_addr(&deployment), Some("242.1.0.20"));
/// # Ok::<(), serde_json::Error>(())
/// ```
pub fn osd_public_addr(deployment: &Deployment) -> Option<&str> {
    public_addr(command_line(osd_container(deployment)?))
}

/// `current` without the address arguments of `flags` (`--flag=value`, or `--flag` with the
/// value that follows it), the others unchanged and in order, then `planned`. Applied to its
/// own output with the same `planned`, it gives the same list.
///
/// ```
/// use ceph_address_plan::args::{OSD_ADDRESS_FLAGS, replace_address_args};
/// let current = ["--foreground", "--public-addr", "10.0.0.1", "--id=3", "--cluster-addr=$(ROOK_POD_IP)"]
///     .map(String::from);
/// let planned = ["--public-addr=242.1.0.23".to_owned()];
/// assert_eq!(
///     replace_address_args(&current, &OSD_ADDRESS_FLAGS, &planned),
///     ["--foreground", "--id=3", "--public-addr=242.1.0.23"]
/// );
/// ```
pub fn replace_address_args(current: &[String], flags: &[&str], planned: &[String]) -> Vec<String> {
    let mut out = Vec::with_capacity(current.len() + planned.len());
    let mut args = current.iter();
    while let Some(arg) = args.next() {
        match flags.iter().find_map(|flag| match_flag(arg, flag)) {
            Some(Some(_)) => {}
            Some(None) => {
                args.next();
            }
            None => out.push(arg.clone()),
        }
    }
    out.extend(planned.iter().cloned());
    out
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    fn strings(args: &[&str]) -> Vec<String> {
        args.iter().map(|a| (*a).to_owned()).collect()
    }

    #[test]
    fn the_reader_reads_back_what_the_writer_writes_in_either_form() {
        for (public_addr, msgr1_off, bind, cluster) in [
            (
                "242.1.0.20",
                false,
                Some("$(ROOK_POD_IP)"),
                Some("$(ROOK_POD_IP)"),
            ),
            ("fd00:242::1", true, Some("[$(ROOK_POD_IP)]:3300"), None),
            ("192.168.10.5", false, None, None),
        ] {
            let written = DaemonArgs {
                public_addr: public_addr.parse().unwrap(),
                msgr1_off,
                public_bind_addr: bind.map(str::to_owned),
                cluster_addr: cluster.map(str::to_owned),
            };
            let args = written.to_args();
            let read: IpAddr = super::public_addr(&args).unwrap().parse().unwrap();
            assert_eq!(read, written.public_addr);
            assert_eq!(flag_value(&args, PUBLIC_BIND_ADDR), bind);
            assert_eq!(flag_value(&args, CLUSTER_ADDR), cluster);
            assert_eq!(
                flag_value(&args, MS_BIND_MSGR1),
                msgr1_off.then_some("false")
            );
            // The same arguments split in two (`--flag value`) read the same.
            let split: Vec<String> = args
                .iter()
                .flat_map(|a| {
                    let (flag, value) = a.split_once('=').unwrap();
                    [flag.to_owned(), value.to_owned()]
                })
                .collect();
            assert_eq!(super::public_addr(&split), Some(public_addr));
            assert_eq!(flag_value(&split, PUBLIC_BIND_ADDR), bind);
        }
    }

    #[test]
    fn the_reader_takes_the_first_public_addr_and_not_similar_flags() {
        let args = strings(&[
            "--public-addrv=1.1.1.1",
            "--public-bind-addr=$(ROOK_POD_IP)",
            "--public-addr=242.1.0.1",
            "--public-addr",
            "242.1.0.2",
        ]);
        assert_eq!(public_addr(&args), Some("242.1.0.1"));
        assert_eq!(public_addr(&strings(&["--public-addr"])), None);
        assert_eq!(public_addr(&strings(&[])), None);
    }

    #[test]
    fn address_args_are_replaced_in_place_and_the_rest_kept_in_order() {
        let current = strings(&[
            "--foreground",
            "--public-addr=10.0.0.1",
            "--id=3",
            "--cluster-addr=$(ROOK_POD_IP)",
        ]);
        let planned = strings(&["--public-addr=242.1.0.23"]);
        let args = replace_address_args(&current, &OSD_ADDRESS_FLAGS, &planned);
        assert_eq!(args, ["--foreground", "--id=3", "--public-addr=242.1.0.23"]);
        assert_eq!(
            replace_address_args(&args, &OSD_ADDRESS_FLAGS, &planned),
            args,
            "idempotent"
        );
    }

    #[test]
    fn two_argument_flags_are_replaced_with_their_value() {
        let current = strings(&[
            "--public-addr",
            "10.244.0.5",
            "--fsid=f",
            "--public-bind-addr",
            "$(ROOK_POD_IP)",
            "--ms-bind-msgr1",
            "false",
        ]);
        let planned = DaemonArgs {
            public_addr: "242.1.0.4".parse().unwrap(),
            msgr1_off: false,
            public_bind_addr: Some("$(ROOK_POD_IP)".into()),
            cluster_addr: None,
        }
        .to_args();
        let edited = replace_address_args(&current, &MON_ADDRESS_FLAGS, &planned);
        assert_eq!(
            edited,
            [
                "--fsid=f",
                "--public-addr=242.1.0.4",
                "--public-bind-addr=$(ROOK_POD_IP)"
            ]
        );
        assert_eq!(public_addr(&edited), Some("242.1.0.4"));
        // Flags the daemon's plan does not own are kept (an OSD's `--ms-bind-msgr1`).
        let osd = replace_address_args(&current, &OSD_ADDRESS_FLAGS, &[]);
        assert_eq!(osd, ["--fsid=f", "--ms-bind-msgr1", "false"]);
    }

    #[test]
    fn the_osd_container_is_the_one_named_osd_and_command_comes_first() {
        let deployment: Deployment = serde_json::from_value(serde_json::json!({
            "spec": {"selector": {}, "template": {"spec": {"containers": [
                {"name": "log-collector", "args": ["--public-addr=9.9.9.9"]},
                {"name": "osd", "command": ["ceph-osd", "--public-addr=242.1.0.30"],
                 "args": ["--public-addr=10.0.0.1"]}]}}}
        }))
        .unwrap();
        assert_eq!(osd_container(&deployment).unwrap().name, "osd");
        assert_eq!(osd_public_addr(&deployment), Some("242.1.0.30"));
        let unnamed: Deployment = serde_json::from_value(serde_json::json!({
            "spec": {"selector": {}, "template": {"spec": {"containers": [
                {"name": "main", "args": ["--public-addr", "242.1.0.31"]}]}}}
        }))
        .unwrap();
        assert_eq!(osd_public_addr(&unnamed), Some("242.1.0.31"));
        let empty: Deployment = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(osd_public_addr(&empty), None);
    }
}

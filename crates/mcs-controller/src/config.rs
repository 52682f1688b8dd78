//! The agent's settings, validated: who this cluster is, which address ranges it allocates
//! from, and how it treats clusters that stop heartbeating.

use std::time::Duration;

use crate::EndpointMode;
use ipnet::IpNet;
use mcs_types::ClusterId;

use crate::broker::{SharedRecords, records_namespace};

/// Settings the agent cannot run with; each message says what to change.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// Two ranges of the same family for one purpose.
    #[error(
        "two {purpose} CIDRs of one address family ({first} and {second}): give at most one IPv4 and one IPv6 CIDR"
    )]
    TwoOfAFamily {
        /// `global` or `clusterset`.
        purpose: &'static str,
        /// The first range.
        first: IpNet,
        /// The second range.
        second: IpNet,
    },
    /// A global range overlaps a clusterset range.
    #[error(
        "global CIDR {global} overlaps clusterset CIDR {clusterset}: the two must be disjoint, or an address could be handed out twice"
    )]
    Overlap {
        /// The global range.
        global: IpNet,
        /// The clusterset range.
        clusterset: IpNet,
    },
    /// Global-ingress endpoints need a global range.
    #[error(
        "endpoint mode global-ingress publishes each service's global IP, but no --global-cidr is set: set one (for example 242.1.0.0/16, unique to this cluster) or use --endpoint-mode pod-addresses on flat networks"
    )]
    NoGlobalCidr,
    /// The heartbeat Lease duration is out of range.
    #[error("lease duration {0:?} is out of range: use between 3 seconds and 1 hour")]
    LeaseDuration(Duration),
    /// The broker namespace is not a DNS label.
    #[error("broker namespace {value:?}: {problem}")]
    BrokerNamespace {
        /// The value given.
        value: String,
        /// What is wrong.
        problem: String,
    },
}

/// The validated settings of one agent.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentConfig {
    /// This cluster's id.
    pub cluster_id: ClusterId,
    /// This agent instance (the pod name): the holder identity of the heartbeat Lease.
    pub identity: String,
    /// The broker namespace on the hub cluster (the heartbeat Leases; every cluster's records
    /// live in `<broker namespace>-<cluster>`).
    pub broker_namespace: String,
    /// How records in the shared broker namespace are treated (the upgrade from a broker
    /// without per-cluster records namespaces).
    pub shared_records: SharedRecords,
    /// This cluster's global ranges (at most one per family): one address per exported service.
    pub global_cidrs: Vec<IpNet>,
    /// This cluster's clusterset ranges (at most one per family): one address per import.
    pub clusterset_cidrs: Vec<IpNet>,
    /// How exported endpoints are published.
    pub endpoint_mode: EndpointMode,
    /// Heartbeat Lease duration; a cluster whose Lease is older is marked stale.
    pub lease_duration: Duration,
    /// How long a stale cluster's exports keep being imported (marked) before they are left out;
    /// `None` keeps them until the cluster returns or its records are removed.
    pub stale_drop_after: Option<Duration>,
    /// How long the first status of an export waits for the export to be published: a valid
    /// export that has never been `Ready=True` waits for the hub to accept its record before it
    /// says `Ready=Unknown/Pending`, and a new export seen before its Service waits for the
    /// Service before it says `Valid=False/NoService`. An export published within it gets one
    /// status write for its publication (`Ready=True`) instead of two or three.
    /// [`Self::DEFAULT_FIRST_STATUS_WAIT`] in the agent; zero writes each state at once.
    pub first_status_wait: Duration,
}

fn one_per_family(purpose: &'static str, cidrs: &[IpNet]) -> Result<(), ConfigError> {
    for (i, first) in cidrs.iter().enumerate() {
        for second in &cidrs[i + 1..] {
            if matches!(
                (first, second),
                (IpNet::V4(_), IpNet::V4(_)) | (IpNet::V6(_), IpNet::V6(_))
            ) {
                return Err(ConfigError::TwoOfAFamily {
                    purpose,
                    first: *first,
                    second: *second,
                });
            }
        }
    }
    Ok(())
}

fn overlaps(a: &IpNet, b: &IpNet) -> bool {
    a.contains(&b.network()) || b.contains(&a.network())
}

impl AgentConfig {
    /// The agent's [`Self::first_status_wait`]: 5 s.
    pub const DEFAULT_FIRST_STATUS_WAIT: Duration = Duration::from_secs(5);

    /// Checks the settings.
    ///
    /// ```
    /// use std::time::Duration;
    /// use mcs_controller::AgentConfig;
    /// use mcs_controller::EndpointMode;
    /// use mcs_types::ClusterId;
    /// let config = AgentConfig {
    ///     cluster_id: ClusterId::new("east")?,
    ///     identity: "agent-0".into(),
    ///     broker_namespace: "clusterset-broker".into(),
    ///     shared_records: Default::default(),
    ///     global_cidrs: vec!["242.1.0.0/16".parse()?],
    ///     clusterset_cidrs: vec!["243.1.0.0/16".parse()?],
    ///     endpoint_mode: EndpointMode::GlobalIngress,
    ///     lease_duration: Duration::from_secs(30),
    ///     stale_drop_after: None,
    ///     first_status_wait: AgentConfig::DEFAULT_FIRST_STATUS_WAIT,
    /// };
    /// assert!(config.validate().is_ok());
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn validate(&self) -> Result<(), ConfigError> {
        one_per_family("global", &self.global_cidrs)?;
        one_per_family("clusterset", &self.clusterset_cidrs)?;
        for global in &self.global_cidrs {
            for clusterset in &self.clusterset_cidrs {
                if overlaps(global, clusterset) {
                    return Err(ConfigError::Overlap {
                        global: *global,
                        clusterset: *clusterset,
                    });
                }
            }
        }
        if self.endpoint_mode == EndpointMode::GlobalIngress && self.global_cidrs.is_empty() {
            return Err(ConfigError::NoGlobalCidr);
        }
        if !(Duration::from_secs(3)..=Duration::from_secs(3600)).contains(&self.lease_duration) {
            return Err(ConfigError::LeaseDuration(self.lease_duration));
        }
        if let Some(problem) = mcs_types::names::dns_label_problem(&self.broker_namespace, false) {
            return Err(ConfigError::BrokerNamespace {
                value: self.broker_namespace.clone(),
                problem,
            });
        }
        Ok(())
    }

    /// This cluster's records namespace on the hub: `<broker namespace>-<cluster id>`
    /// ([`records_namespace`]).
    pub fn records_namespace(&self) -> String {
        records_namespace(&self.broker_namespace, &self.cluster_id)
    }

    /// Where this agent publishes its records: its records namespace, or the shared broker
    /// namespace while [`SharedRecords::Write`] (the upgrade's first step).
    pub fn publish_namespace(&self) -> String {
        match self.shared_records {
            SharedRecords::Write => self.broker_namespace.clone(),
            SharedRecords::Ignore | SharedRecords::Read => self.records_namespace(),
        }
    }

    /// The heartbeat Lease duration in whole seconds, as the Lease stores it.
    pub fn lease_duration_seconds(&self) -> i32 {
        i32::try_from(self.lease_duration.as_secs()).unwrap_or(i32::MAX)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> AgentConfig {
        AgentConfig {
            cluster_id: ClusterId::new("east").unwrap(),
            identity: "agent-0".into(),
            broker_namespace: "clusterset-broker".into(),
            shared_records: SharedRecords::Ignore,
            global_cidrs: vec!["242.1.0.0/16".parse().unwrap()],
            clusterset_cidrs: vec!["243.1.0.0/16".parse().unwrap()],
            endpoint_mode: EndpointMode::GlobalIngress,
            lease_duration: Duration::from_secs(30),
            stale_drop_after: None,
            first_status_wait: AgentConfig::DEFAULT_FIRST_STATUS_WAIT,
        }
    }

    #[test]
    fn bad_settings_name_the_fix() {
        type Change = Box<dyn Fn(&mut AgentConfig)>;
        let cases: Vec<(&str, Change, &str)> = vec![
            (
                "two v4 global",
                Box::new(|c| c.global_cidrs.push("242.2.0.0/16".parse().unwrap())),
                "give at most one IPv4 and one IPv6 CIDR",
            ),
            (
                "overlap",
                Box::new(|c| c.clusterset_cidrs = vec!["242.1.128.0/17".parse().unwrap()]),
                "must be disjoint",
            ),
            (
                "no global",
                Box::new(|c| c.global_cidrs.clear()),
                "--endpoint-mode pod-addresses",
            ),
            (
                "lease",
                Box::new(|c| c.lease_duration = Duration::from_secs(1)),
                "between 3 seconds and 1 hour",
            ),
            (
                "namespace",
                Box::new(|c| c.broker_namespace = "Broker".into()),
                "broker namespace \"Broker\"",
            ),
        ];
        for (name, change, expected) in cases {
            let mut c = config();
            change(&mut c);
            let err = c.validate().unwrap_err().to_string();
            assert!(err.contains(expected), "{name}: {err}");
        }
        let mut dual = config();
        dual.global_cidrs.push("fd00:242::/112".parse().unwrap());
        assert_eq!(dual.validate(), Ok(()));
        let mut flat = config();
        flat.global_cidrs.clear();
        flat.endpoint_mode = EndpointMode::PodAddresses;
        assert_eq!(flat.validate(), Ok(()));
    }
}

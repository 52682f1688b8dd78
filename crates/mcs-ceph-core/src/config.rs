//! How the operator addresses every cluster it manages (its flags, as plain values).

use std::time::Duration;

use ceph_address_plan::DnsNameForm;

/// The field manager of every write the operator makes.
pub const FIELD_MANAGER: &str = "mcs-ceph-operator";

/// Where a daemon's global IP comes from.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub enum GlobalIpSource {
    /// Resolve the export's clusterset name (Rook's way).
    #[default]
    Dns,
    /// Read `spec.ips` of the ServiceImport of the same name: for MCS implementations whose
    /// ServiceImport carries the export's global IP. No DNS lookups.
    ServiceImport,
}

/// When a failed lookup is tried again: `first` after the first failure, doubling per further
/// failure, at most `max`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct RetryPolicy {
    /// Wait after the first failure.
    pub first: Duration,
    /// Longest wait.
    pub max: Duration,
}

impl Default for RetryPolicy {
    /// 1 s, doubling up to 1 min: a name is usually missing only until the MCS implementation
    /// has imported the export and its endpoints are ready (seconds), and a lookup is one DNS
    /// query.
    fn default() -> Self {
        Self {
            first: Duration::from_secs(1),
            max: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The wait after `failures` failures in a row (at least 1).
    pub fn delay(&self, failures: u32) -> Duration {
        let doublings = failures.saturating_sub(1).min(31);
        self.first
            .checked_mul(1u32 << doublings)
            .unwrap_or(self.max)
            .min(self.max)
    }
}

/// The operator's configuration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Config {
    /// Which clusterset name to resolve.
    pub dns_name_form: DnsNameForm,
    /// The clusterset DNS zone.
    pub clusterset_zone: String,
    /// Namespace of Rook's operator (the `rook.io/operator-namespace` label); Rook's default when
    /// unset.
    pub rook_operator_namespace: Option<String>,
    /// Where global IPs come from.
    pub global_ip_source: GlobalIpSource,
    /// Retries of failed lookups.
    pub retry: RetryPolicy,
    /// How long an OSD's Deployment must have been gone before the operator deletes the
    /// Service and ServiceExport it made for that OSD (Rook recreates a Deployment within
    /// seconds when it replaces it; an OSD removed for good stays gone).
    pub removed_osd_grace: Duration,
}

/// [`Config::removed_osd_grace`] by default: 10 minutes.
pub const DEFAULT_REMOVED_OSD_GRACE: Duration = Duration::from_secs(600);

impl Default for Config {
    fn default() -> Self {
        Self {
            dns_name_form: DnsNameForm::default(),
            clusterset_zone: mcs_types::names::DEFAULT_ZONE.to_owned(),
            rook_operator_namespace: None,
            global_ip_source: GlobalIpSource::default(),
            retry: RetryPolicy::default(),
            removed_osd_grace: DEFAULT_REMOVED_OSD_GRACE,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn retries_double_up_to_the_cap() {
        let policy = RetryPolicy::default();
        let secs: Vec<u64> = [1, 2, 3, 7, 8, 40]
            .iter()
            .map(|f| policy.delay(*f).as_secs())
            .collect();
        assert_eq!(secs, [1, 2, 4, 60, 60, 60]);
        assert_eq!(policy.delay(0).as_secs(), 1);
    }
}

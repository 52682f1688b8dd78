//! Resolving clusterset names to addresses: the [`ClustersetResolver`] trait (mockable) and its
//! hickory-resolver implementation with per-query timeouts, bounded retries with backoff, a TTL
//! cache, and errors that say which name failed and why.

use std::net::{IpAddr, SocketAddr};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use futures::{FutureExt, StreamExt};
use hickory_proto::op::ResponseCode;
use hickory_resolver::config::{
    ConnectionConfig, LookupIpStrategy, NameServerConfig, ResolverConfig as HickoryConfig,
    ResolverOpts,
};
use hickory_resolver::net::runtime::TokioRuntimeProvider;
use hickory_resolver::net::{DnsError, NetError};
use hickory_resolver::{Resolver, TokioResolver};
use mcs_types::names::ClustersetName;

/// The addresses a name resolved to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolution {
    /// The name asked for.
    pub name: ClustersetName,
    /// Its addresses (IPv4 first, then IPv6, each in answer order).
    pub addresses: Vec<IpAddr>,
    /// Until when the answer may be used (its TTL).
    pub valid_until: Instant,
}

/// Why a name did not resolve.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ResolveError {
    /// The name does not exist.
    #[error(
        "{name}: no such name (NXDOMAIN): check that the service is exported (a ServiceExport in its namespace), that the cluster id is right, and for a headless service that it has ready endpoints"
    )]
    NxDomain {
        /// The name.
        name: String,
    },
    /// The name exists but has no addresses.
    #[error(
        "{name}: the name exists but has no A or AAAA records (NODATA): the ServiceImport has no clusterset IPs yet"
    )]
    NoData {
        /// The name.
        name: String,
    },
    /// No answer in time, after every attempt.
    #[error(
        "{name}: no answer after {attempts} attempts of {timeout:?} each: is the nameserver reachable?"
    )]
    Timeout {
        /// The name.
        name: String,
        /// Attempts made.
        attempts: u32,
        /// The per-attempt timeout.
        timeout: Duration,
    },
    /// The server answered with an error code.
    #[error("{name}: the server answered {code} after {attempts} attempts{hint}")]
    ServerError {
        /// The name.
        name: String,
        /// The response code (`SERVFAIL`, `REFUSED`, ...).
        code: String,
        /// Attempts made.
        attempts: u32,
        /// What the code usually means here.
        hint: &'static str,
    },
    /// Anything else (network errors, malformed answers).
    #[error("{name}: lookup failed after {attempts} attempts: {message}")]
    Failed {
        /// The name.
        name: String,
        /// Attempts made.
        attempts: u32,
        /// The cause.
        message: String,
    },
}

impl ResolveError {
    /// Whether trying again later may help (timeouts, SERVFAIL, network errors); NXDOMAIN,
    /// NODATA and REFUSED are answers.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::NxDomain { .. } | Self::NoData { .. } => false,
            Self::ServerError { code, .. } => code != "REFUSED",
            Self::Timeout { .. } | Self::Failed { .. } => true,
        }
    }
}

/// Resolves clusterset names. Implemented with hickory-resolver by [`HickoryClustersetResolver`];
/// a mockall mock (`MockClustersetResolver`) is available with the `mock` feature.
#[cfg_attr(any(test, feature = "mock"), mockall::automock)]
#[async_trait]
pub trait ClustersetResolver: Send + Sync {
    /// The addresses of `name` (A and AAAA).
    async fn resolve(&self, name: &ClustersetName) -> Result<Resolution, ResolveError>;
}

/// Resolves `names` with at most `concurrency` lookups in flight; results come back in the
/// order of `names`.
///
/// The future is `Send`, so a controller can run it inside a spawned task (a plain `async fn`
/// over a stream of borrowed names is not, because of how the compiler proves `Send` for the
/// closure's higher-ranked lifetimes). To time each lookup, wrap the resolver in one that
/// measures its own `resolve` calls.
///
/// ```
/// use clusterset_dns::{ClustersetResolver, resolve_all};
/// use mcs_types::names::ClustersetName;
/// use std::sync::Arc;
///
/// fn spawn_lookups(resolver: Arc<dyn ClustersetResolver>, names: Vec<ClustersetName>) {
///     tokio::spawn(async move { resolve_all(resolver.as_ref(), &names, 8).await });
/// }
/// ```
pub fn resolve_all<'a, R: ClustersetResolver + ?Sized>(
    resolver: &'a R,
    names: &'a [ClustersetName],
    concurrency: usize,
) -> futures::future::BoxFuture<'a, Vec<Result<Resolution, ResolveError>>> {
    futures::stream::iter(names)
        .map(move |name| resolver.resolve(name))
        .buffered(concurrency.max(1))
        .collect()
        .boxed()
}

/// How [`HickoryClustersetResolver`] asks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ResolverSettings {
    /// The nameserver (UDP, falling back to TCP for truncated answers); `None` uses the system's
    /// (`/etc/resolv.conf`).
    pub nameserver: Option<SocketAddr>,
    /// Time for one attempt.
    pub timeout: Duration,
    /// Attempts per name (at least 1).
    pub attempts: u32,
    /// Wait before the second attempt; doubles for each further one.
    pub backoff: Duration,
    /// Longest wait between attempts.
    pub max_backoff: Duration,
    /// Names kept in the TTL cache.
    pub cache_size: u64,
    /// Longest time a negative answer (NXDOMAIN, NODATA) is kept in the cache; `None` keeps
    /// it for the zone's SOA minimum. A controller that retries a name on its own schedule
    /// (a name that does not exist *yet*: an export not imported, an endpoint not ready) wants
    /// every retry to ask the server, so the default keeps none.
    pub negative_cache_max: Option<Duration>,
}

impl Default for ResolverSettings {
    /// 1 s per attempt, 4 attempts, backoff 100 ms doubling up to 1 s, 1,024 cached names,
    /// negative answers not cached.
    fn default() -> Self {
        Self {
            nameserver: None,
            timeout: Duration::from_secs(1),
            attempts: 4,
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(1),
            cache_size: 1024,
            negative_cache_max: Some(Duration::ZERO),
        }
    }
}

/// The wait before attempt `attempt` (0-based; attempt 0 does not wait).
pub fn backoff_delay(settings: &ResolverSettings, attempt: u32) -> Duration {
    if attempt == 0 {
        return Duration::ZERO;
    }
    let factor = 1u32.checked_shl(attempt - 1).unwrap_or(u32::MAX);
    settings
        .backoff
        .checked_mul(factor)
        .unwrap_or(settings.max_backoff)
        .min(settings.max_backoff)
}

/// A [`ClustersetResolver`] on hickory-resolver. Its cache keeps answers for their TTL, so
/// asking again within the TTL sends no query; negative answers are kept for at most
/// [`ResolverSettings::negative_cache_max`] (by default not at all).
#[derive(Debug, Clone)]
pub struct HickoryClustersetResolver {
    resolver: TokioResolver,
    settings: ResolverSettings,
}

/// The resolver could not be built.
#[derive(Debug, thiserror::Error)]
#[error(
    "cannot set up the DNS resolver: {0} (pass a nameserver explicitly, e.g. --nameserver 127.0.0.1:53)"
)]
pub struct ResolverSetupError(String);

impl HickoryClustersetResolver {
    /// A resolver with `settings`. Must be called inside a tokio runtime.
    pub fn new(settings: ResolverSettings) -> Result<Self, ResolverSetupError> {
        let mut builder = match settings.nameserver {
            Some(address) => {
                let mut udp = ConnectionConfig::udp();
                udp.port = address.port();
                let mut tcp = ConnectionConfig::tcp();
                tcp.port = address.port();
                let server = NameServerConfig::new(address.ip(), true, vec![udp, tcp]);
                let config = HickoryConfig::from_parts(None, vec![], vec![server]);
                Resolver::builder_with_config(config, TokioRuntimeProvider::default())
            }
            None => Resolver::builder_tokio().map_err(|e| ResolverSetupError(e.to_string()))?,
        };
        let options: &mut ResolverOpts = builder.options_mut();
        options.timeout = settings.timeout;
        options.attempts = 0; // our own loop retries, with backoff
        options.cache_size = settings.cache_size;
        if let Some(max) = settings.negative_cache_max {
            options.negative_min_ttl = Some(Duration::ZERO);
            options.negative_max_ttl = Some(max);
        }
        options.ip_strategy = LookupIpStrategy::Ipv4AndIpv6;
        options.ndots = 0;
        let resolver = builder
            .build()
            .map_err(|e| ResolverSetupError(e.to_string()))?;
        Ok(Self { resolver, settings })
    }

    /// Forgets every cached answer.
    pub fn clear_cache(&self) {
        self.resolver.clear_cache();
    }

    async fn attempt(&self, name: &ClustersetName) -> Result<Resolution, Attempt> {
        let lookup = self
            .resolver
            .lookup_ip(name.to_fqdn().as_str())
            .await
            .map_err(classify)?;
        let mut addresses: Vec<IpAddr> = lookup.iter().collect();
        addresses.sort_by_key(|ip| ip.is_ipv6());
        Ok(Resolution {
            name: name.clone(),
            addresses,
            valid_until: lookup.valid_until(),
        })
    }
}

/// How one attempt failed.
enum Attempt {
    NxDomain,
    NoData,
    Timeout,
    Code(ResponseCode),
    Other(String),
}

fn classify(error: NetError) -> Attempt {
    match error {
        NetError::Timeout => Attempt::Timeout,
        NetError::Dns(DnsError::NoRecordsFound(no_records)) => {
            if no_records.response_code == ResponseCode::NXDomain {
                Attempt::NxDomain
            } else {
                Attempt::NoData
            }
        }
        NetError::Dns(DnsError::ResponseCode(code)) => Attempt::Code(code),
        other => Attempt::Other(other.to_string()),
    }
}

/// The RFC mnemonic of a response code (`SERVFAIL`, `REFUSED`, ...).
fn mnemonic(code: ResponseCode) -> String {
    match code {
        ResponseCode::FormErr => "FORMERR".to_owned(),
        ResponseCode::ServFail => "SERVFAIL".to_owned(),
        ResponseCode::NXDomain => "NXDOMAIN".to_owned(),
        ResponseCode::NotImp => "NOTIMP".to_owned(),
        ResponseCode::Refused => "REFUSED".to_owned(),
        ResponseCode::NotAuth => "NOTAUTH".to_owned(),
        other => format!("RCODE{}", u16::from(other)),
    }
}

#[async_trait]
impl ClustersetResolver for HickoryClustersetResolver {
    async fn resolve(&self, name: &ClustersetName) -> Result<Resolution, ResolveError> {
        let attempts = self.settings.attempts.max(1);
        let text = name.to_string();
        let mut last = Attempt::Timeout;
        for attempt in 0..attempts {
            tokio::time::sleep(backoff_delay(&self.settings, attempt)).await;
            match self.attempt(name).await {
                Ok(resolution) => return Ok(resolution),
                Err(Attempt::NxDomain) => return Err(ResolveError::NxDomain { name: text }),
                Err(Attempt::NoData) => return Err(ResolveError::NoData { name: text }),
                Err(Attempt::Code(ResponseCode::Refused)) => {
                    last = Attempt::Code(ResponseCode::Refused);
                    break;
                }
                Err(failure) => last = failure,
            }
            tracing::debug!(name = %text, attempt, "lookup attempt failed");
        }
        let made = match last {
            Attempt::Code(ResponseCode::Refused) => 1,
            _ => attempts,
        };
        Err(match last {
            Attempt::Timeout => ResolveError::Timeout {
                name: text,
                attempts: made,
                timeout: self.settings.timeout,
            },
            Attempt::Code(code) => ResolveError::ServerError {
                name: text,
                code: mnemonic(code),
                attempts: made,
                hint: match code {
                    ResponseCode::ServFail => {
                        ": a clusterset DNS server answers SERVFAIL until it has synced its data"
                    }
                    ResponseCode::Refused => {
                        ": the server is not authoritative for this zone (is it the clusterset DNS server, and is the zone right?)"
                    }
                    _ => "",
                },
            },
            Attempt::Other(message) => ResolveError::Failed {
                name: text,
                attempts: made,
                message,
            },
            Attempt::NxDomain | Attempt::NoData => ResolveError::Failed {
                name: text,
                attempts: made,
                message: "unexpected negative answer".to_owned(),
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use mcs_types::names::ClustersetName;

    fn name(svc: &str) -> ClustersetName {
        ClustersetName::service("rook-ceph", svc).unwrap()
    }

    #[test]
    fn backoff_doubles_up_to_the_cap() {
        let settings = ResolverSettings {
            backoff: Duration::from_millis(100),
            max_backoff: Duration::from_millis(350),
            ..ResolverSettings::default()
        };
        let delays: Vec<u128> = (0..6)
            .map(|a| backoff_delay(&settings, a).as_millis())
            .collect();
        assert_eq!(delays, [0, 100, 200, 350, 350, 350]);
        assert_eq!(backoff_delay(&settings, 200), Duration::from_millis(350));
    }

    #[tokio::test]
    async fn resolve_all_asks_once_per_name_and_keeps_the_order() {
        let mut mock = MockClustersetResolver::new();
        mock.expect_resolve().times(3).returning(|n| {
            if n.service_label() == "rook-ceph-mon-b" {
                return Err(ResolveError::NxDomain {
                    name: n.to_string(),
                });
            }
            Ok(Resolution {
                name: n.clone(),
                addresses: vec!["242.1.0.1".parse().unwrap()],
                valid_until: Instant::now(),
            })
        });
        let names = [
            name("rook-ceph-mon-a"),
            name("rook-ceph-mon-b"),
            name("rook-ceph-mon-c"),
        ];
        let results = resolve_all(&mock, &names, 2).await;
        assert_eq!(results.len(), 3);
        assert_eq!(results[0].as_ref().unwrap().name, names[0]);
        assert!(
            matches!(&results[1], Err(ResolveError::NxDomain { name }) if name.starts_with("rook-ceph-mon-b."))
        );
        assert_eq!(results[2].as_ref().unwrap().name, names[2]);
    }

    #[tokio::test]
    async fn resolve_all_runs_in_a_spawned_task() {
        let mut mock = MockClustersetResolver::new();
        mock.expect_resolve().times(2).returning(|n| {
            Ok(Resolution {
                name: n.clone(),
                addresses: vec!["242.1.0.7".parse().unwrap()],
                valid_until: Instant::now(),
            })
        });
        let resolver: std::sync::Arc<dyn ClustersetResolver> = std::sync::Arc::new(mock);
        let names = vec![name("rook-ceph-osd-0"), name("rook-ceph-osd-1")];
        let task = tokio::spawn(async move { resolve_all(resolver.as_ref(), &names, 2).await });
        let results = task.await.unwrap();
        assert_eq!(results.len(), 2);
        assert!(
            results
                .iter()
                .all(|r| r.as_ref().unwrap().addresses.len() == 1)
        );
    }

    #[test]
    fn only_answers_that_may_change_are_transient() {
        let n = || "web.shop.svc.clusterset.local".to_owned();
        assert!(!ResolveError::NxDomain { name: n() }.is_transient());
        assert!(!ResolveError::NoData { name: n() }.is_transient());
        let code = |c: &str| ResolveError::ServerError {
            name: n(),
            code: c.to_owned(),
            attempts: 1,
            hint: "",
        };
        assert!(code("SERVFAIL").is_transient());
        assert!(!code("REFUSED").is_transient());
    }
}

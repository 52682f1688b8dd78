//! What `mcsctl resolve` asks: every name through clusterset-dns's resolver, as
//! clusterset-report's [`NameResult`]s ([`resolve`]).

use clusterset_dns::{ClustersetResolver, resolve_all};
use clusterset_report::resolve::NameResult;
use mcs_types::names::ClustersetName;

/// How many names are asked at once.
pub const CONCURRENT_LOOKUPS: usize = 16;

/// Asks `resolver` for every one of `names` (at most [`CONCURRENT_LOOKUPS`] at once): each
/// one's addresses or why it did not resolve, in the order of `names`.
pub async fn resolve(
    resolver: &dyn ClustersetResolver,
    names: &[ClustersetName],
) -> Vec<NameResult> {
    resolve_all(resolver, names, CONCURRENT_LOOKUPS)
        .await
        .iter()
        .zip(names)
        .map(|(result, name)| NameResult::new(name, result.as_ref().map(|r| &r.addresses[..])))
        .collect()
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use async_trait::async_trait;
    use clusterset_dns::{Resolution, ResolveError};

    /// Knows web.shop at 242.1.0.7, nothing else.
    struct OneName;

    #[async_trait]
    impl ClustersetResolver for OneName {
        async fn resolve(&self, name: &ClustersetName) -> Result<Resolution, ResolveError> {
            if name.service_label() == "web" {
                Ok(Resolution {
                    name: name.clone(),
                    addresses: vec!["242.1.0.7".parse().unwrap()],
                    valid_until: std::time::Instant::now(),
                })
            } else {
                Err(ResolveError::NxDomain {
                    name: name.to_string(),
                })
            }
        }
    }

    #[tokio::test]
    async fn every_name_gets_its_addresses_or_why_not_in_order() {
        let names = [
            ClustersetName::service("shop", "db").unwrap(),
            ClustersetName::service("shop", "web").unwrap(),
        ];
        let results = resolve(&OneName, &names).await;
        assert_eq!(results.len(), 2);
        assert_eq!(results[0].name, "db.shop.svc.clusterset.local");
        assert!(results[0].addresses.is_empty() && results[0].error.is_some());
        assert_eq!(results[1].name, "web.shop.svc.clusterset.local");
        assert_eq!(results[1].addresses, ["242.1.0.7"]);
        assert_eq!(results[1].error, None);
    }
}

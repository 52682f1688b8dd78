//! Properties of the rule set over generated states: one backend set per global IP, no address
//! outside our networks, the same script whatever the input order, deltas that change only
//! what changed, and validate's overlap checks against an independent range arithmetic.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns

use std::collections::{BTreeMap, BTreeSet};
use std::net::Ipv4Addr;

use gateway_rules::{
    Backend, Collection, Element, Export, GatewayState, Ingress, Peer, Problem, RuleSet,
};
use ipnet::Ipv4Net;
use proptest::prelude::*;

fn pod_ip(i: u16) -> Ipv4Addr {
    Ipv4Addr::new(10, 244, (i >> 8) as u8, i as u8)
}

fn global_ip(cluster: u8, i: u16) -> Ipv4Addr {
    Ipv4Addr::new(242, cluster, (i >> 8) as u8, i as u8)
}

fn backend() -> impl Strategy<Value = Backend> {
    prop_oneof![
        4 => prop::collection::btree_set(1u16..=1000, 0..5)
            .prop_map(|s| Backend::Endpoints(s.into_iter().map(pod_ip).collect())),
        1 => (1u8..=250).prop_map(|i| Backend::ClusterIp(Ipv4Addr::new(10, 96, 0, i))),
    ]
}

/// A valid state: this cluster is 242.<own>.0.0/16, peers other /16s of 242/8.
fn state() -> impl Strategy<Value = GatewayState> {
    (
        1u8..=20,
        prop::collection::btree_set(21u8..=200, 0..4),
        prop::collection::btree_map(1u16..=2000, backend(), 0..40),
        1u16..=3,
    )
        .prop_map(|(own, peers, exports, egress)| GatewayState {
            cluster_id: format!("c{own}"),
            global_cidr: Ipv4Net::new(Ipv4Addr::new(242, own, 0, 0), 16).unwrap(),
            pod_cidr: "10.244.0.0/16".parse().unwrap(),
            service_cidr: "10.96.0.0/16".parse().unwrap(),
            egress_ips: (0..egress).map(|i| global_ip(own, 0xfffe - i)).collect(),
            exports: exports
                .into_iter()
                .map(|(i, backend)| Export {
                    namespace: "ns".into(),
                    name: format!("svc-{i}"),
                    global_ip: global_ip(own, i),
                    backend,
                })
                .collect(),
            peers: peers
                .into_iter()
                .map(|p| Peer {
                    cluster_id: format!("c{p}"),
                    global_cidr: Ipv4Net::new(Ipv4Addr::new(242, p, 0, 0), 16).unwrap(),
                    gateway: Ipv4Addr::new(172, 31, 0, p),
                })
                .collect(),
        })
}

/// A permutation of `items` chosen by `seed` (Fisher-Yates on a linear congruential sequence).
fn shuffled<T>(mut items: Vec<T>, seed: u64) -> Vec<T> {
    let mut x = seed | 1;
    for i in (1..items.len()).rev() {
        x = x
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        items.swap(i, (x >> 33) as usize % (i + 1));
    }
    items
}

fn permuted(state: &GatewayState, seed: u64) -> GatewayState {
    let mut out = state.clone();
    out.exports = shuffled(out.exports, seed)
        .into_iter()
        .map(|mut export| {
            if let Backend::Endpoints(endpoints) = export.backend {
                export.backend = Backend::Endpoints(shuffled(endpoints, seed ^ 0x55));
            }
            export
        })
        .collect();
    out.peers = shuffled(out.peers, seed ^ 0xaa);
    out.egress_ips = shuffled(out.egress_ips, seed ^ 0xff);
    out
}

/// Every IPv4 address or prefix written in `script`.
fn addresses_in(script: &str) -> Vec<Ipv4Net> {
    script
        .split(|c: char| !(c.is_ascii_digit() || c == '.' || c == '/'))
        .filter_map(|word| {
            word.parse::<Ipv4Net>()
                .ok()
                .or_else(|| word.parse::<Ipv4Addr>().ok().map(Ipv4Net::from))
        })
        .collect()
}

fn our_networks(state: &GatewayState) -> Vec<Ipv4Net> {
    let mut out = vec![state.global_cidr, state.pod_cidr, state.service_cidr];
    out.extend(state.peers.iter().map(|p| p.global_cidr));
    out
}

/// The first and last address of a prefix, as numbers.
fn range(net: Ipv4Net) -> (u32, u32) {
    let first = u32::from(net.network());
    let size = 1u64 << (32 - net.prefix_len());
    (first, (u64::from(first) + size - 1) as u32)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_global_ip_maps_to_exactly_one_backend_set(state in state()) {
        let rules = RuleSet::desired(&state).unwrap();
        prop_assert_eq!(rules.ingress().len(), state.exports.len());
        let single: BTreeMap<Ipv4Addr, Ipv4Addr> = rules
            .elements(Collection::GlobalToBackend)
            .into_iter()
            .filter_map(|e| match e { Element::Mapping(k, v) => Some((k, v)), _ => None })
            .collect();
        let multi: BTreeMap<Ipv4Addr, usize> = rules
            .elements(Collection::MultiEndpointExports)
            .into_iter()
            .filter_map(|e| match e { Element::GotoOneOf(k, n) => Some((k, n)), _ => None })
            .collect();
        // global IP -> its endpoints, in the order of their index.
        let mut picked: BTreeMap<Ipv4Addr, Vec<(u32, Ipv4Addr)>> = BTreeMap::new();
        for element in rules.elements(Collection::ExportEndpoints) {
            match element {
                Element::Endpoint { global, index, endpoint } => {
                    picked.entry(global).or_default().push((index, endpoint));
                }
                other => prop_assert!(false, "{} in export_endpoints", other),
            }
        }
        let chains: BTreeMap<String, Vec<String>> = rules
            .export_chains()
            .iter()
            .map(|c| (c.name.to_string(), c.rules.iter().map(|r| r.to_string()).collect()))
            .collect();
        for export in &state.exports {
            let g = export.global_ip;
            let in_single = single.contains_key(&g);
            let in_multi = multi.contains_key(&g);
            prop_assert!(!(in_single && in_multi), "{} is in both maps", g);
            match &export.backend {
                Backend::ClusterIp(ip) => {
                    prop_assert_eq!(&rules.ingress()[&g], &Ingress::KubeProxy(*ip));
                    prop_assert!(!in_single && !in_multi);
                }
                Backend::Endpoints(endpoints) => {
                    let mut expected = endpoints.clone();
                    expected.sort();
                    match expected.as_slice() {
                        [] => {
                            prop_assert_eq!(&rules.ingress()[&g], &Ingress::Rejected);
                            prop_assert!(!in_single && !in_multi);
                        }
                        [one] => {
                            prop_assert_eq!(single.get(&g), Some(one));
                            prop_assert!(!in_multi);
                        }
                        many => {
                            // The export goes to `one_of_<N>`, which picks `g . i` for i < N,
                            // and `g . i` is its i-th endpoint: each of its endpoints and only
                            // those.
                            prop_assert!(in_multi && !in_single);
                            prop_assert_eq!(multi[&g], many.len());
                            let chain = &chains[&format!("one_of_{}", many.len())];
                            prop_assert_eq!(
                                chain,
                                &vec![format!(
                                    "dnat ip to ip daddr . numgen random mod {} map @export_endpoints",
                                    many.len()
                                )]
                            );
                            let expected: Vec<(u32, Ipv4Addr)> = (0u32..).zip(many.iter().copied()).collect();
                            prop_assert_eq!(&picked[&g], &expected);
                        }
                    }
                }
            }
        }
        // Nothing else: as many map entries as exports that have them.
        prop_assert_eq!(
            single.len() + multi.len(),
            rules.ingress().values().filter(|i| matches!(i, Ingress::Single(_) | Ingress::OneOf(_))).count()
        );
        prop_assert_eq!(picked.keys().collect::<Vec<_>>(), multi.keys().collect::<Vec<_>>());
        // One chain per number of endpoints in use, no other.
        let counts: BTreeSet<usize> = multi.values().copied().collect();
        prop_assert_eq!(
            chains.keys().cloned().collect::<BTreeSet<_>>(),
            counts.iter().map(|n| format!("one_of_{n}")).collect::<BTreeSet<_>>()
        );
        prop_assert_eq!(rules.rule_count(), 6 + counts.len());
    }

    #[test]
    fn no_rule_or_element_names_an_address_outside_our_networks(state in state()) {
        let rules = RuleSet::desired(&state).unwrap();
        let ours = our_networks(&state);
        let script = rules.to_nft_script();
        let written = addresses_in(&script);
        prop_assert!(written.len() >= rules.element_count());
        for net in written.iter().chain(rules.addresses().iter()) {
            prop_assert!(
                ours.iter().any(|o| o.contains(net)),
                "{} is outside {:?}:\n{}", net, ours, script
            );
        }
    }

    #[test]
    fn the_script_is_the_same_for_the_same_state_in_any_order(state in state(), seed in any::<u64>()) {
        let first = RuleSet::desired(&state).unwrap();
        let again = RuleSet::desired(&state).unwrap();
        let other = RuleSet::desired(&permuted(&state, seed)).unwrap();
        prop_assert_eq!(&first, &again);
        prop_assert_eq!(&first, &other);
        prop_assert_eq!(first.to_nft_script(), other.to_nft_script());
        prop_assert_eq!(first.routes(), other.routes());
        let delta = first.delta_to(&other).unwrap();
        prop_assert!(delta.is_empty(), "{}", delta.to_nft_script());
    }

    #[test]
    fn a_delta_touches_only_the_export_that_changed(
        state in state(),
        index in any::<prop::sample::Index>(),
        backend in backend(),
    ) {
        prop_assume!(!state.exports.is_empty());
        let before = RuleSet::desired(&state).unwrap();
        let mut changed = state.clone();
        let i = index.index(changed.exports.len());
        changed.exports[i].backend = backend;
        let after = RuleSet::desired(&changed).unwrap();
        let delta = before.delta_to(&after).unwrap();
        let global = changed.exports[i].global_ip;
        let mut pods: BTreeSet<Ipv4Addr> = BTreeSet::new();
        for export in [&state.exports[i], &changed.exports[i]] {
            if let Backend::Endpoints(endpoints) = &export.backend {
                pods.extend(endpoints);
            }
        }
        for touched in delta.touched_addresses() {
            prop_assert!(touched == global || pods.contains(&touched), "{} touched:\n{}", touched, delta.to_nft_script());
        }
        // The script names only those pods, the export's global IP, and the global IPs of other
        // exports sharing one of those pods (a shared pod leaves with the lowest global IP).
        let sharing: BTreeSet<Ipv4Addr> = state
            .exports
            .iter()
            .filter(|e| matches!(&e.backend, Backend::Endpoints(p) if p.iter().any(|ip| pods.contains(ip))))
            .map(|e| e.global_ip)
            .collect();
        let script = delta.to_nft_script();
        for net in addresses_in(&script) {
            let ip = net.addr();
            prop_assert!(
                ip == global || pods.contains(&ip) || sharing.contains(&ip),
                "{} named:\n{}", net, script
            );
        }
    }

    #[test]
    fn validate_refuses_exactly_the_overlapping_global_cidrs(
        a in (any::<u32>(), 8u8..=30),
        // The peer's prefix: a's address with one bit flipped (near it: overlaps are common)
        // or an unrelated address.
        b in (prop_oneof![(0u32..32).prop_map(Some), Just(None)], any::<u32>(), 8u8..=30),
    ) {
        let b_address = match b.0 {
            Some(bit) => a.0 ^ (1 << bit),
            None => b.1,
        };
        let own = Ipv4Net::new(Ipv4Addr::from(a.0), a.1).unwrap().trunc();
        let peer = Ipv4Net::new(Ipv4Addr::from(b_address), b.2).unwrap().trunc();
        // Pod, service and gateway in 127/8, and the drawn prefixes kept away from them.
        let pod: Ipv4Net = "127.0.0.0/24".parse().unwrap();
        let service: Ipv4Net = "127.1.0.0/24".parse().unwrap();
        prop_assume!(![own, peer].iter().any(|n| n.contains(&pod) || pod.contains(n) || n.contains(&service) || service.contains(n)));
        let gateway = Ipv4Addr::new(127, 2, 0, 1);
        prop_assume!(!own.contains(&gateway) && !peer.contains(&gateway));
        let state = GatewayState {
            cluster_id: "own".into(),
            global_cidr: own,
            pod_cidr: pod,
            service_cidr: service,
            egress_ips: vec![own.network()],
            exports: Vec::new(),
            peers: vec![Peer { cluster_id: "peer".into(), global_cidr: peer, gateway }],
        };
        let (a_first, a_last) = range(own);
        let (b_first, b_last) = range(peer);
        let overlapping = a_first <= b_last && b_first <= a_last;
        match state.validate() {
            Ok(()) => prop_assert!(!overlapping, "{} and {} overlap", own, peer),
            Err(invalid) => {
                prop_assert!(overlapping, "{}", invalid);
                prop_assert_eq!(invalid.problems, vec![Problem::GlobalCidrsOverlap {
                    first: "own".into(), first_cidr: own, second: "peer".into(), second_cidr: peer,
                }]);
            }
        }
    }
}

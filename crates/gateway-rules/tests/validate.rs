//! Every bad input is refused, with a message that names the conflicting values and the fix;
//! the example state file and the edge cases that are valid are accepted.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers, not only #[test] fns

use std::net::Ipv4Addr;

use gateway_rules::{Backend, Export, GatewayState, Ingress, Peer, Problem, RuleSet};

fn ip(text: &str) -> Ipv4Addr {
    text.parse().unwrap()
}

fn export(name: &str, global: &str, backend: Backend) -> Export {
    Export {
        namespace: "rook-ceph".into(),
        name: name.into(),
        global_ip: ip(global),
        backend,
    }
}

fn peer(id: &str, cidr: &str, gateway: &str) -> Peer {
    Peer {
        cluster_id: id.into(),
        global_cidr: cidr.parse().unwrap(),
        gateway: ip(gateway),
    }
}

/// A valid state: east with two exports and one peer.
fn east() -> GatewayState {
    GatewayState {
        cluster_id: "east".into(),
        global_cidr: "242.1.0.0/16".parse().unwrap(),
        pod_cidr: "10.244.0.0/24".parse().unwrap(),
        service_cidr: "10.96.0.0/16".parse().unwrap(),
        egress_ips: vec![ip("242.1.255.254")],
        exports: vec![
            export(
                "mon-a",
                "242.1.0.1",
                Backend::Endpoints(vec![ip("10.244.0.10")]),
            ),
            export("api", "242.1.0.2", Backend::ClusterIp(ip("10.96.0.20"))),
        ],
        peers: vec![peer("west", "242.2.0.0/16", "172.31.255.2")],
    }
}

/// The only problem of `state`, and its message.
fn only_problem(state: &GatewayState) -> (Problem, String) {
    let invalid = state.validate().unwrap_err();
    assert_eq!(invalid.problems.len(), 1, "{invalid}");
    let problem = invalid.problems[0].clone();
    let message = problem.to_string();
    assert!(message.contains("; fix: "), "{message}");
    // desired() refuses it too: an invalid state gives no rules.
    assert_eq!(RuleSet::desired(state).unwrap_err(), invalid);
    (problem, message)
}

fn assert_names(message: &str, values: &[&str]) {
    for value in values {
        assert!(message.contains(value), "{message:?} does not name {value}");
    }
}

#[test]
fn the_valid_state_and_the_example_file_are_accepted() {
    east().validate().unwrap();
    let text = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/gateway-state.yaml"
    ))
    .unwrap();
    let state = GatewayState::parse(&text).unwrap();
    state.validate().unwrap();
    assert_eq!(state.exports.len(), 5);
}

#[test]
fn overlapping_global_cidrs_of_this_cluster_and_a_peer_are_refused() {
    let mut state = east();
    state.peers[0].global_cidr = "242.1.128.0/17".parse().unwrap();
    let (problem, message) = only_problem(&state);
    assert!(matches!(problem, Problem::GlobalCidrsOverlap { .. }));
    assert_names(
        &message,
        &["east", "242.1.0.0/16", "west", "242.1.128.0/17"],
    );
}

#[test]
fn overlapping_global_cidrs_of_two_peers_are_refused() {
    let mut state = east();
    state
        .peers
        .push(peer("north", "242.0.0.0/14", "172.31.255.3"));
    let invalid = state.validate().unwrap_err();
    // 242.0.0.0/14 holds both 242.1/16 (east) and 242.2/16 (west).
    let messages: Vec<String> = invalid.problems.iter().map(|p| p.to_string()).collect();
    assert_eq!(messages.len(), 2, "{invalid}");
    assert_names(
        &messages[1],
        &["west", "242.2.0.0/16", "north", "242.0.0.0/14"],
    );
}

#[test]
fn a_global_cidr_overlapping_the_pod_or_service_cidr_is_refused() {
    let mut state = east();
    state.pod_cidr = "242.1.0.0/24".parse().unwrap();
    state.exports.clear();
    let (problem, message) = only_problem(&state);
    assert!(matches!(
        problem,
        Problem::GlobalCidrOverlapsLocal { network: "pod", .. }
    ));
    assert_names(&message, &["242.1.0.0/16", "pod CIDR 242.1.0.0/24"]);

    let mut state = east();
    state.peers[0].global_cidr = "10.96.0.0/12".parse().unwrap();
    let (problem, message) = only_problem(&state);
    assert!(matches!(
        problem,
        Problem::GlobalCidrOverlapsLocal {
            network: "service",
            ..
        }
    ));
    assert_names(
        &message,
        &["west", "10.96.0.0/12", "service CIDR 10.96.0.0/16"],
    );
}

#[test]
fn a_global_ip_outside_the_global_cidr_is_refused() {
    let mut state = east();
    state.exports[0].global_ip = ip("242.2.0.1");
    let (problem, message) = only_problem(&state);
    assert!(matches!(problem, Problem::GlobalIpOutsideGlobalCidr { .. }));
    assert_names(&message, &["rook-ceph/mon-a", "242.2.0.1", "242.1.0.0/16"]);
}

#[test]
fn an_egress_ip_outside_the_global_cidr_is_refused() {
    let mut state = east();
    state.egress_ips = vec![ip("242.2.255.254")];
    let (_, message) = only_problem(&state);
    assert_names(&message, &["242.2.255.254", "242.1.0.0/16"]);
}

#[test]
fn no_egress_ip_a_duplicate_one_or_one_that_is_exported_is_refused() {
    let mut state = east();
    state.egress_ips.clear();
    let (problem, _) = only_problem(&state);
    assert!(matches!(problem, Problem::NoEgressIp { .. }));

    let mut state = east();
    state.egress_ips.push(ip("242.1.255.254"));
    let (problem, _) = only_problem(&state);
    assert!(matches!(problem, Problem::DuplicateEgressIp { .. }));

    let mut state = east();
    state.egress_ips = vec![ip("242.1.0.1")];
    let (problem, message) = only_problem(&state);
    assert!(matches!(problem, Problem::EgressIpIsExported { .. }));
    assert_names(&message, &["242.1.0.1", "rook-ceph/mon-a"]);
}

#[test]
fn two_exports_with_the_same_global_ip_are_refused() {
    let mut state = east();
    state.exports[1].global_ip = ip("242.1.0.1");
    let (problem, message) = only_problem(&state);
    assert!(matches!(problem, Problem::DuplicateGlobalIp { .. }));
    assert_names(&message, &["rook-ceph/mon-a", "rook-ceph/api", "242.1.0.1"]);
}

#[test]
fn the_same_export_twice_is_refused() {
    let mut state = east();
    state.exports.push(export(
        "mon-a",
        "242.1.0.9",
        Backend::Endpoints(vec![ip("10.244.0.10")]),
    ));
    let (problem, message) = only_problem(&state);
    assert!(matches!(problem, Problem::DuplicateExport { .. }));
    assert_names(&message, &["rook-ceph/mon-a", "242.1.0.1", "242.1.0.9"]);
}

#[test]
fn an_endpoint_outside_the_pod_cidr_or_listed_twice_is_refused() {
    let mut state = east();
    state.exports[0].backend = Backend::Endpoints(vec![ip("10.245.0.10")]);
    let (problem, message) = only_problem(&state);
    assert!(matches!(problem, Problem::EndpointOutsidePodCidr { .. }));
    assert_names(
        &message,
        &["10.245.0.10", "rook-ceph/mon-a", "10.244.0.0/24"],
    );

    let mut state = east();
    state.exports[0].backend = Backend::Endpoints(vec![ip("10.244.0.10"), ip("10.244.0.10")]);
    let (problem, _) = only_problem(&state);
    assert!(matches!(problem, Problem::DuplicateEndpoint { .. }));
}

#[test]
fn a_cluster_ip_outside_the_service_cidr_is_refused() {
    let mut state = east();
    state.exports[1].backend = Backend::ClusterIp(ip("10.97.0.1"));
    let (_, message) = only_problem(&state);
    assert_names(&message, &["10.97.0.1", "rook-ceph/api", "10.96.0.0/16"]);
}

#[test]
fn a_peer_gateway_inside_a_global_cidr_or_the_local_networks_is_refused() {
    for (gateway, names) in [
        (
            "242.2.0.1",
            ["the global CIDR of cluster west", "242.2.0.0/16"],
        ),
        (
            "242.1.0.7",
            ["the global CIDR of cluster east", "242.1.0.0/16"],
        ),
        ("10.244.0.1", ["this cluster's pod CIDR", "10.244.0.0/24"]),
    ] {
        let mut state = east();
        state.peers[0].gateway = ip(gateway);
        let (problem, message) = only_problem(&state);
        assert!(matches!(problem, Problem::PeerGatewayInsideCidr { .. }));
        assert_names(&message, &["west", gateway, names[0], names[1]]);
    }
}

#[test]
fn duplicate_or_empty_cluster_ids_are_refused() {
    let mut state = east();
    state.peers[0].cluster_id = "east".into();
    let (problem, message) = only_problem(&state);
    assert!(matches!(problem, Problem::DuplicateClusterId { .. }));
    assert_names(&message, &["east", "242.1.0.0/16", "242.2.0.0/16"]);

    let mut state = east();
    state.peers[0].cluster_id = String::new();
    let (problem, message) = only_problem(&state);
    assert!(matches!(problem, Problem::EmptyClusterId { .. }));
    assert_names(&message, &["peer 1", "242.2.0.0/16"]);
}

#[test]
fn every_problem_is_reported_at_once() {
    let mut state = east();
    state.egress_ips = vec![ip("1.2.3.4")];
    state.exports[0].backend = Backend::Endpoints(vec![ip("10.245.0.10")]);
    state.peers[0].global_cidr = "242.1.0.0/16".parse().unwrap();
    let invalid = state.validate().unwrap_err();
    assert_eq!(invalid.problems.len(), 3, "{invalid}");
    let text = invalid.to_string();
    assert!(
        text.starts_with("the gateway state is invalid (3 problems)"),
        "{text}"
    );
    assert_eq!(text.lines().count(), 4, "{text}");
}

#[test]
fn an_export_without_endpoints_is_valid_and_gets_no_dnat() {
    let mut state = east();
    state.exports[0].backend = Backend::Endpoints(Vec::new());
    let rules = RuleSet::desired(&state).unwrap();
    assert_eq!(rules.ingress()[&ip("242.1.0.1")], Ingress::Rejected);
    let script = rules.to_nft_script();
    assert!(!script.contains("242.1.0.1 :"), "{script}");
    assert!(
        script.contains("ip daddr 242.1.0.0/16 reject with icmp type host-unreachable"),
        "{script}"
    );
}

#[test]
fn a_state_file_with_an_unknown_field_or_two_backends_does_not_parse() {
    let base = "clusterId: east\nglobalCidr: 242.1.0.0/16\npodCidr: 10.244.0.0/24\nserviceCidr: 10.96.0.0/16\negressIps: [242.1.255.254]\n";
    GatewayState::parse(base).unwrap().validate().unwrap();
    // `peers:` with nothing after it (null) is no peer.
    let empty = GatewayState::parse(&format!("{base}peers:\nexports:\n")).unwrap();
    assert!(empty.peers.is_empty() && empty.exports.is_empty());
    let misspelt = format!("{base}egresIps: [242.1.255.253]\n");
    let error = GatewayState::parse(&misspelt).unwrap_err();
    assert!(format!("{:?}", error).contains("egresIps"), "{error:?}");
    let both = format!(
        "{base}exports:\n  - {{namespace: a, name: b, globalIp: 242.1.0.1, endpoints: [10.244.0.2], clusterIp: 10.96.0.1}}\n"
    );
    let error = GatewayState::parse(&both).unwrap_err();
    assert!(
        format!("{:?}", error).contains("exactly one of"),
        "{error:?}"
    );
    let neither = format!("{base}exports:\n  - {{namespace: a, name: b, globalIp: 242.1.0.1}}\n");
    assert!(GatewayState::parse(&neither).is_err());
}

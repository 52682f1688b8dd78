#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]
//! The leader-election flags every daemon flattens (`lease::LeaderElectionArgs`): one set of
//! names, one identity rule and one check of the timing, with each daemon's default Lease name,
//! variables and earlier names.

use std::time::Duration;

use clap::{CommandFactory, Parser};
use clusterset_daemon::lease::{
    ElectionAliases, ElectionEnv, ElectionFlagsError, LeaderElectionArgs, LeaderElectionDefaults,
    LeaseSettings,
};

/// A daemon whose flags had these names already (the agent's case).
#[derive(Debug, Clone, PartialEq, Eq)]
struct New;

impl LeaderElectionDefaults for New {
    const LEASE_NAME: &'static str = "new-daemon";
    const ENV: ElectionEnv = ElectionEnv {
        leader_election: "NEW_LEADER_ELECTION",
        lease_name: "NEW_LEADER_LEASE_NAME",
        lease_duration: "NEW_LEADER_LEASE_DURATION_SECONDS",
        renew_deadline: "NEW_LEADER_LEASE_RENEW_DEADLINE_SECONDS",
        retry_period: "NEW_LEADER_LEASE_RETRY_SECONDS",
    };
    const ALIASES: ElectionAliases = ElectionAliases::NONE;
}

/// A daemon whose flags had other names (the operator's case).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Old;

impl LeaderElectionDefaults for Old {
    const LEASE_NAME: &'static str = "old-daemon";
    const ENV: ElectionEnv = ElectionEnv {
        leader_election: "OLD_LEADER_ELECTION",
        lease_name: "OLD_LEASE_NAME",
        lease_duration: "OLD_LEASE_DURATION_SECONDS",
        renew_deadline: "OLD_LEASE_RENEW_DEADLINE_SECONDS",
        retry_period: "OLD_LEASE_RETRY_SECONDS",
    };
    const ALIASES: ElectionAliases = ElectionAliases {
        identity: &["instance"],
        lease_name: &["lease-name"],
        lease_namespace: &["lease-namespace"],
        lease_duration: &["lease-duration-seconds"],
        renew_deadline: &["lease-renew-deadline-seconds"],
        retry_period: &["lease-retry-seconds"],
    };
}

#[derive(Debug, Parser)]
struct Cli<D: LeaderElectionDefaults> {
    #[command(flatten)]
    election: LeaderElectionArgs<D>,
}

fn parse<D: LeaderElectionDefaults>(args: &[&str]) -> LeaderElectionArgs<D> {
    Cli::<D>::try_parse_from(std::iter::once("daemon").chain(args.iter().copied()))
        .unwrap_or_else(|e| panic!("{args:?}: {e}"))
        .election
}

/// The leader-election flags' long names (with their hidden aliases) and variables.
fn flags<D: LeaderElectionDefaults>() -> Vec<(String, Vec<String>, Option<String>)> {
    let command = Cli::<D>::command();
    command
        .get_arguments()
        .filter(|a| a.get_long().is_some())
        .filter(|a| a.get_long() != Some("help"))
        .map(|a| {
            (
                a.get_long().unwrap().to_owned(),
                a.get_all_aliases()
                    .unwrap_or_default()
                    .into_iter()
                    .map(str::to_owned)
                    .collect(),
                a.get_env().map(|e| e.to_string_lossy().into_owned()),
            )
        })
        .collect()
}

#[test]
fn every_daemon_has_the_same_flag_names_with_its_own_variables() {
    let names = |flags: Vec<(String, Vec<String>, Option<String>)>| {
        flags
            .into_iter()
            .map(|(long, _, _)| long)
            .collect::<Vec<_>>()
    };
    let expected = [
        "leader-election",
        "identity",
        "leader-lease-name",
        "leader-lease-namespace",
        "leader-lease-duration-seconds",
        "leader-lease-renew-deadline-seconds",
        "leader-lease-retry-seconds",
    ];
    assert_eq!(names(flags::<New>()), expected);
    assert_eq!(names(flags::<Old>()), expected);
    let env: Vec<Option<String>> = flags::<Old>().into_iter().map(|(_, _, e)| e).collect();
    assert_eq!(
        env,
        [
            "OLD_LEADER_ELECTION",
            "POD_NAME",
            "OLD_LEASE_NAME",
            "POD_NAMESPACE",
            "OLD_LEASE_DURATION_SECONDS",
            "OLD_LEASE_RENEW_DEADLINE_SECONDS",
            "OLD_LEASE_RETRY_SECONDS",
        ]
        .map(|e| Some(e.to_owned()))
    );
    assert!(
        flags::<New>()
            .iter()
            .all(|(_, aliases, _)| aliases.is_empty())
    );
}

#[test]
fn by_default_the_daemon_s_lease_in_the_client_s_namespace_with_client_go_s_timing() {
    let settings = parse::<New>(&["--identity", "new-daemon-5d8f-abcde"])
        .settings("daemon-system")
        .unwrap()
        .unwrap();
    assert_eq!(
        settings,
        LeaseSettings::new("new-daemon", "daemon-system", "new-daemon-5d8f-abcde")
    );
    assert_eq!(settings.claim.duration, Duration::from_secs(15));
    assert_eq!(settings.renew_deadline, Duration::from_secs(10));
    assert_eq!(settings.retry_period, Duration::from_secs(2));
    // Another daemon, its own default.
    let settings = parse::<Old>(&["--identity", "old-0"])
        .settings("daemon-system")
        .unwrap()
        .unwrap();
    assert_eq!(settings.claim.name, "old-daemon");
}

#[test]
fn every_flag_sets_its_part_and_election_can_be_turned_off() {
    let settings = parse::<New>(&[
        "--identity=new-1",
        "--leader-lease-name=leader",
        "--leader-lease-namespace=other",
        "--leader-lease-duration-seconds=30",
        "--leader-lease-renew-deadline-seconds=20",
        "--leader-lease-retry-seconds=5",
    ])
    .settings("daemon-system")
    .unwrap()
    .unwrap();
    let secs = Duration::from_secs;
    assert_eq!(
        settings,
        LeaseSettings::new("leader", "other", "new-1")
            .with_timing(secs(30), secs(20), secs(5))
            .unwrap()
    );
    for off in [
        ["--leader-election", "false"],
        ["--leader-election=false", ""],
    ] {
        let args: Vec<&str> = off.into_iter().filter(|a| !a.is_empty()).collect();
        assert_eq!(parse::<New>(&args).settings("daemon-system").unwrap(), None);
    }
}

#[test]
fn earlier_names_are_hidden_aliases_of_the_new_ones() {
    let old = parse::<Old>(&[
        "--instance=old-1",
        "--lease-name=leader",
        "--lease-namespace=other",
        "--lease-duration-seconds=30",
        "--lease-renew-deadline-seconds=20",
        "--lease-retry-seconds=5",
    ]);
    let new = parse::<Old>(&[
        "--identity=old-1",
        "--leader-lease-name=leader",
        "--leader-lease-namespace=other",
        "--leader-lease-duration-seconds=30",
        "--leader-lease-renew-deadline-seconds=20",
        "--leader-lease-retry-seconds=5",
    ]);
    assert_eq!(old, new);
    let help = Cli::<Old>::command().render_long_help().to_string();
    for hidden in [
        "--instance",
        "--lease-name",
        "--lease-namespace",
        "--lease-retry",
    ] {
        assert!(!help.contains(hidden), "{hidden} shown: {help}");
    }
    assert!(help.contains("--leader-lease-name"), "{help}");
    assert!(help.contains("[default: old-daemon]"), "{help}");
    // A daemon without earlier names accepts only the new ones.
    assert!(Cli::<New>::try_parse_from(["daemon", "--instance=x"]).is_err());
}

#[test]
fn timings_that_cannot_work_are_refused_with_the_flags_to_fix() {
    let error: ElectionFlagsError = parse::<New>(&["--leader-lease-renew-deadline-seconds=20"])
        .settings("daemon-system")
        .unwrap_err();
    assert_eq!(
        clusterset_daemon::ErrorChain(&error).to_string(),
        "set 0 < --leader-lease-retry-seconds < --leader-lease-renew-deadline-seconds < \
         --leader-lease-duration-seconds: leader election needs retry period < renew deadline \
         < Lease duration, all above zero; got retry period 2s, renew deadline 20s, duration 15s"
    );
    assert!(
        parse::<New>(&["--leader-lease-retry-seconds=0"])
            .settings("daemon-system")
            .is_err()
    );
    // Without election nothing is held, so nothing is checked.
    assert_eq!(
        parse::<New>(&["--leader-election=false", "--leader-lease-retry-seconds=0"])
            .settings("daemon-system")
            .unwrap(),
        None
    );
}

#[test]
fn the_lease_namespace_must_be_a_namespace_name() {
    let error = Cli::<Old>::try_parse_from(["daemon", "--lease-namespace", "Daemon_System"])
        .unwrap_err()
        .to_string();
    assert!(
        error.contains("\"Daemon_System\" is not a namespace name"),
        "{error}"
    );
}

#[test]
fn the_identity_is_the_pod_s_name_else_the_host_name_never_a_fixed_one() {
    let args = parse::<New>(&["--identity", "new-daemon-5d8f-abcde"]);
    assert_eq!(args.identity(), "new-daemon-5d8f-abcde");
    let settings = args.settings("daemon-system").unwrap().unwrap();
    assert_eq!(settings.claim.identity, args.identity());
    // An empty POD_NAME (or flag) is no identity.
    assert_ne!(parse::<New>(&["--identity="]).identity(), "");
    // Without the flag (and POD_NAME): the host name, the same for every daemon (it is the
    // machine's, in a pod the pod's), never the daemon's name.
    let new = parse::<New>(&[]);
    if new.identity.is_none() {
        let host = new.identity();
        assert!(!host.is_empty() && host != "new-daemon", "{host}");
        assert_eq!(parse::<Old>(&[]).identity(), host);
    }
}

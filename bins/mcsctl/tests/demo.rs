//! `mcsctl demo` for real: three Debian ceph-mon daemons move to global IPs published in our
//! DNS server. Run on a pseudo-terminal (`script`), as a person would, and the key lines must
//! appear in order. Needs ceph-mon and ceph-common (`.ci/run` installs them); fails without.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers too

use std::process::Command;

#[test]
fn the_demo_moves_three_mons_to_global_ips_with_quorum_kept_on_a_terminal() {
    let mcsctl = env!("CARGO_BIN_EXE_mcsctl");
    assert!(
        !mcsctl.contains([' ', '\'']),
        "the test quotes the binary path simply: {mcsctl}"
    );
    let out = Command::new("script")
        .args([
            "-q",
            "-e",
            "-c",
            &format!("{mcsctl} demo --net 79"),
            "/dev/null",
        ])
        .output()
        .expect("script (bsdutils) runs the demo on a pseudo-terminal");
    let text = String::from_utf8_lossy(&out.stdout).replace('\r', "");
    assert!(
        out.status.success(),
        "the demo failed ({}):\n{text}\n{}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let expected = [
        "Step 1/4: a Ceph cluster with three mons on cluster IPs (MCS off)",
        "Step 2/4: the clusterset DNS server",
        "quorum a,b,c formed",
        "Step 3/4: MCS enabled",
        "rook-ceph-mon-d.rook-ceph.svc.clusterset.local resolves to 127.0.79.21",
        "started mon d advertising 127.0.79.21",
        "mon d is in quorum; removed mon a from the monmap",
        "deleted mon a (daemon and data)",
        "rook-ceph-mon-e.rook-ceph.svc.clusterset.local resolves to 127.0.79.22",
        "mon e is in quorum; removed mon b from the monmap",
        "rook-ceph-mon-f.rook-ceph.svc.clusterset.local resolves to 127.0.79.23",
        "mon f is in quorum; removed mon c from the monmap",
        "Step 4/4: summary",
        "mon d at 127.0.79.21 (rook-ceph-mon-d.rook-ceph.svc.clusterset.local)",
        "mon f at 127.0.79.23",
        "in quorum: d,e,f of 3",
        "quorum kept throughout",
        "3 mons migrated in",
    ];
    let mut rest = text.as_str();
    for line in expected {
        match rest.find(line) {
            Some(at) => rest = &rest[at + line.len()..],
            None => panic!("{line:?} missing or out of order in:\n{text}"),
        }
    }
    assert!(!text.contains("LOST"), "{text}");
}

#[test]
fn without_ceph_the_demo_says_how_to_install_it() {
    let out = Command::new(env!("CARGO_BIN_EXE_mcsctl"))
        .args(["demo"])
        .env("PATH", "/nonexistent")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("sudo apt-get install ceph-mon ceph-common"),
        "{stderr}"
    );
    assert!(stderr.contains("ceph-mon"), "{stderr}");
    assert!(out.stdout.is_empty(), "nothing started");
}

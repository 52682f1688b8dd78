//! Conventions every command follows, checked on the process: help with examples, shell
//! completions, exit status 2 for usage errors, colours only on a terminal without NO_COLOR, and
//! a progress spinner on stderr only when stderr is a terminal.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers too

mod common;

use std::process::Command;

use common::{mcsctl, mcsctl_with, stderr, stdout};

const COMMANDS: [&str; 9] = [
    "crds",
    "plan",
    "dns",
    "resolve",
    "status",
    "diagnose",
    "demo",
    "version",
    "completions",
];

#[test]
fn every_command_has_help_with_examples() {
    let top = mcsctl(&["--help"]);
    assert_eq!(top.status.code(), Some(0));
    let text = stdout(&top);
    for command in COMMANDS {
        assert!(
            text.contains(&format!("\n  {command} ")),
            "{command} missing from\n{text}"
        );
    }
    assert!(
        text.contains("Exit status: 0 ok, 1 problems found or the command failed, 2 usage error."),
        "{text}"
    );
    for command in COMMANDS {
        for flag in ["--help", "-h"] {
            let out = mcsctl(&[command, flag]);
            assert_eq!(out.status.code(), Some(0), "{command} {flag}");
            let help = stdout(&out);
            assert!(
                help.contains(&format!("Examples:\n  mcsctl {command}")),
                "mcsctl {command} {flag} has no examples:\n{help}"
            );
        }
    }
    let serve = stdout(&mcsctl(&["dns", "serve", "--help"]));
    assert!(
        serve.contains("Examples:\n  mcsctl dns serve --listen"),
        "{serve}"
    );
}

#[test]
fn read_commands_take_the_same_output_formats() {
    for command in ["crds", "plan", "resolve", "status", "diagnose", "version"] {
        let help = stdout(&mcsctl(&[command, "-h"]));
        assert!(
            help.contains("-o, --output <OUTPUT>")
                && help.contains("[possible values: table, wide, yaml, json, name]")
                && help.contains("--no-headers"),
            "mcsctl {command}:\n{help}"
        );
    }
}

#[test]
fn completions_for_bash_zsh_and_fish_name_every_command() {
    for shell in ["bash", "zsh", "fish"] {
        let out = mcsctl(&["completions", shell]);
        assert_eq!(out.status.code(), Some(0), "{shell}: {}", stderr(&out));
        let script = stdout(&out);
        for command in ["status", "diagnose", "completions", "resolve"] {
            assert!(script.contains(command), "{shell} lacks {command}");
        }
        // Flags of the new commands complete too.
        assert!(script.contains("all-namespaces"), "{shell}");
        assert!(script.contains("kubeconfig"), "{shell}");
        let first = script.lines().next().unwrap_or_default();
        match shell {
            "bash" => assert!(script.contains("complete -F _mcsctl"), "{script}"),
            "zsh" => assert_eq!(first, "#compdef mcsctl"),
            _ => assert!(script.contains("complete -c mcsctl"), "{script}"),
        }
    }
    // The bash script is valid bash.
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("mcsctl.bash");
    std::fs::write(&file, mcsctl(&["completions", "bash"]).stdout).unwrap();
    let check = Command::new("bash").arg("-n").arg(&file).output().unwrap();
    assert!(
        check.status.success(),
        "{}",
        String::from_utf8_lossy(&check.stderr)
    );
    // An unknown shell is a usage error.
    let out = mcsctl(&["completions", "tcsh"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        stderr(&out).contains("invalid value 'tcsh'"),
        "{}",
        stderr(&out)
    );
}

#[test]
fn usage_errors_exit_2() {
    for args in [
        &[][..],
        &["frobnicate"][..],
        &["status", "--bogus"][..],
        &["resolve"][..],
        &["crds", "-o", "xml"][..],
    ] {
        let out = mcsctl(args);
        assert_eq!(
            out.status.code(),
            Some(2),
            "mcsctl {args:?}: {}",
            stderr(&out)
        );
        assert!(out.stdout.is_empty(), "mcsctl {args:?}");
    }
    let out = mcsctl(&["--version"]);
    assert_eq!(out.status.code(), Some(0));
    assert!(stdout(&out).starts_with("mcsctl "));
}

/// Runs `mcsctl args` on a pseudo-terminal (`script`), stdout and stderr together.
fn on_terminal(args: &str, env: &[(&str, &str)]) -> String {
    let mcsctl = env!("CARGO_BIN_EXE_mcsctl");
    assert!(!mcsctl.contains([' ', '\'']), "quoted simply: {mcsctl}");
    let mut command = Command::new("script");
    command
        .args(["-q", "-e", "-c", &format!("{mcsctl} {args}"), "/dev/null"])
        .env("TERM", "xterm-256color");
    for variable in ["NO_COLOR", "CLICOLOR", "CLICOLOR_FORCE", "CI"] {
        command.env_remove(variable);
    }
    command.envs(env.iter().copied());
    let out = command
        .output()
        .expect("script (bsdutils) runs mcsctl on a terminal");
    String::from_utf8_lossy(&out.stdout).replace('\r', "")
}

#[test]
fn colours_only_on_a_terminal_and_never_with_no_color() {
    let bold_header = "\u{1b}[1mNAME\u{1b}[0m";
    let terminal = on_terminal("crds -o table", &[]);
    assert!(terminal.contains(bold_header), "{terminal:?}");
    let no_color = on_terminal("crds -o table", &[("NO_COLOR", "1")]);
    assert!(!no_color.contains('\u{1b}'), "{no_color:?}");
    assert!(no_color.contains("NAME"), "{no_color:?}");
    let piped = mcsctl(&["crds", "-o", "table"]);
    assert!(!stdout(&piped).contains('\u{1b}'));
    // YAML and JSON never carry styles, even on a terminal.
    let json = on_terminal("crds -o json", &[]);
    assert!(!json.contains('\u{1b}'), "{json:?}");
}

#[test]
fn waiting_shows_a_spinner_on_a_terminal_and_nothing_on_a_pipe() {
    // A nameserver that never answers: every attempt waits for its timeout.
    let silent = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let address = silent.local_addr().unwrap().to_string();
    let args = format!(
        "resolve web.shop.svc.clusterset.local --nameserver {address} --timeout 400ms --attempts 2"
    );
    let terminal = on_terminal(&args, &[]);
    assert!(
        terminal.contains("resolving 1 name(s), up to 2 attempts of 400 ms each"),
        "{terminal:?}"
    );
    assert!(
        terminal.contains("error: web.shop.svc.clusterset.local: no answer after 2 attempts"),
        "{terminal:?}"
    );
    let piped = mcsctl_with(
        &[
            "resolve",
            "web.shop.svc.clusterset.local",
            "--nameserver",
            &address,
            "--timeout=400ms",
            "--attempts",
            "2",
        ],
        &[],
    );
    assert_eq!(piped.status.code(), Some(1));
    assert_eq!(
        stderr(&piped).lines().collect::<Vec<_>>().len(),
        1,
        "only the error, no spinner: {:?}",
        stderr(&piped)
    );
    drop(silent);
}

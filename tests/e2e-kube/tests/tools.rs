#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test helpers
//! `tests/k8s-tools/build.sh` refuses what it cannot build with, saying what to do: no Go, a Go
//! older than a module asks for, an unknown module or option; and `--check` names what is
//! missing or stale with the command that builds it. (A disk with too little room is refused
//! the same way, naming both directories and the room each has; showing it needs a small file
//! system mounted, so it was checked by hand: a 50 MiB tmpfs as the cache, 2026-11-29.)

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

fn script() -> PathBuf {
    clusterset_e2e::repo_root().join("tests/k8s-tools/build.sh")
}

/// A directory of the commands the script uses besides Go, found on this PATH.
fn path_without_go(dir: &Path) -> PathBuf {
    let bin = dir.join("bin");
    std::fs::create_dir_all(&bin).unwrap();
    for tool in [
        "bash",
        "dirname",
        "awk",
        "sort",
        "head",
        "cat",
        "sha256sum",
        "cut",
        "grep",
        "df",
        "tr",
        "date",
        "mkdir",
        "mv",
        "rm",
        "tail",
        "printf",
    ] {
        let found = std::env::split_paths(&std::env::var_os("PATH").unwrap())
            .map(|d| d.join(tool))
            .find(|p| p.exists())
            .unwrap_or_else(|| panic!("{tool} is not on PATH"));
        symlink(found, bin.join(tool)).unwrap();
    }
    bin
}

/// Runs the script with `PATH=path` (where `bash` is looked up too).
fn run(args: &[&str], path: &std::ffi::OsStr, tools: &Path) -> Output {
    Command::new("bash")
        .arg(script())
        .args(args)
        .env_clear()
        .env("PATH", path)
        .env("HOME", std::env::var_os("HOME").unwrap_or_default())
        .env("CLUSTERSET_K8S_TOOLS", tools)
        .output()
        .unwrap()
}

fn stderr(output: &Output) -> String {
    String::from_utf8_lossy(&output.stderr).into_owned()
}

#[test]
fn no_go_is_refused_with_how_to_get_it() {
    let dir = tempfile::tempdir().unwrap();
    let path = path_without_go(dir.path());
    let output = run(&[], path.as_os_str(), &dir.path().join("tools"));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains("no 'go' command on PATH") && stderr(&output).contains("Go 1.26"),
        "{}",
        stderr(&output)
    );
}

#[test]
fn a_go_older_than_a_module_asks_for_is_refused_with_the_toolchain_to_set() {
    let dir = tempfile::tempdir().unwrap();
    let path = path_without_go(dir.path());
    // A go command that says it is 1.24.
    std::fs::write(
        path.join("go"),
        "#!/bin/sh\nif [ \"$1 $2\" = \"env GOVERSION\" ]; then echo go1.24.3; exit 0; fi\nexit 3\n",
    )
    .unwrap();
    Command::new("chmod")
        .arg("+x")
        .arg(path.join("go"))
        .status()
        .unwrap();
    let output = run(&["helm"], path.as_os_str(), &dir.path().join("tools"));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    let text = stderr(&output);
    assert!(
        text.contains("helm needs Go 1.26.0 and this go command is go1.24.3")
            && text.contains("export GOTOOLCHAIN=go1.26.0"),
        "{text}"
    );
}

#[test]
fn unknown_modules_and_options_are_refused_naming_the_modules() {
    let dir = tempfile::tempdir().unwrap();
    let path = std::env::var_os("PATH").unwrap();
    for (args, says) in [
        (
            vec!["kube-proxy"],
            "no module 'kube-proxy' here: the modules are etcd kwok helm",
        ),
        (vec!["--fast"], "unknown option '--fast'"),
    ] {
        let output = run(&args, &path, dir.path());
        assert_eq!(
            output.status.code(),
            Some(1),
            "{args:?}: {}",
            stderr(&output)
        );
        assert!(
            stderr(&output).contains(says),
            "{args:?}: {}",
            stderr(&output)
        );
    }
}

#[test]
fn check_names_what_is_missing_and_the_command_that_builds_it() {
    let dir = tempfile::tempdir().unwrap();
    let tools = dir.path().join("empty");
    let output = Command::new("bash")
        .arg(script())
        .args(["--check", "helm", "etcd"])
        .env("CLUSTERSET_K8S_TOOLS", &tools)
        .output()
        .unwrap();
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert!(
        stderr(&output).contains(&format!(
            "missing or stale in {}: helm etcd; build them with: bash tests/k8s-tools/build.sh helm etcd",
            tools.display()
        )),
        "{}",
        stderr(&output)
    );
}

//! What the layout tests share (`tests/dependencies.rs`, `tests/packages.rs`,
//! `tests/functions.rs`, run by `cargo test --workspace` like every other test): the
//! workspace's root, its `cargo metadata`, and the lists docs/architecture.md keeps.
#![forbid(unsafe_code)]
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)] // test support: a failure is the report

use std::path::{Path, PathBuf};

/// The workspace's root directory.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_owned()
}

/// `cargo metadata` of the workspace, with the lock file as it is.
///
/// # Panics
/// When cargo fails (its error is the message).
pub fn metadata() -> serde_json::Value {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = std::process::Command::new(cargo)
        .args(["metadata", "--format-version", "1", "--locked"])
        .current_dir(workspace_root())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

/// docs/architecture.md.
pub fn architecture_doc() -> String {
    std::fs::read_to_string(workspace_root().join("docs/architecture.md")).unwrap()
}

/// The crates named (in backticks, after its first colon) by the paragraph of `doc` that
/// starts with `start` ("Pure crates", "Published crates").
///
/// # Panics
/// When there is no such paragraph, or it has no colon.
pub fn documented_list(doc: &str, start: &str) -> Vec<String> {
    let paragraph: Vec<&str> = doc
        .lines()
        .skip_while(|l| !l.starts_with(start))
        .take_while(|l| !l.trim().is_empty())
        .collect();
    assert!(
        !paragraph.is_empty(),
        "docs/architecture.md has a paragraph starting with {start:?}"
    );
    let paragraph = paragraph.join(" ");
    let (_, list) = paragraph
        .split_once(':')
        .unwrap_or_else(|| panic!("the {start:?} paragraph lists them after a colon"));
    list.split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

//! No code: this package holds the tests of the workspace's layout (`tests/dependencies.rs`),
//! run by `cargo test --workspace` like every other test.
#![forbid(unsafe_code)]

//! No code: this package holds the tests of the container images (`tests/images.rs`): it builds
//! both with `deploy/images/build.sh`, unpacks each and runs it through `chroot` as the image's
//! user on a read-only root (docs/images.md). Run by `cargo test --workspace` like every other
//! test; it needs root, buildah, skopeo, umoci and debootstrap, and fails without them.
#![forbid(unsafe_code)]

//! A container's root filesystem, as a container runtime gives one: an overlay whose lower
//! layer is the Ceph root (read-only, shared by every container) and whose upper layer is the
//! container's own, removed when it ends. Nothing a container writes, its mount points
//! included, reaches the shared root.

use std::io;
use std::path::{Path, PathBuf};

use nix::mount::{MntFlags, MsFlags, mount, umount2};

/// A mounted overlay; unmounted and removed when dropped.
#[derive(Debug)]
pub struct Rootfs {
    dir: PathBuf,
    merged: PathBuf,
}

impl Rootfs {
    /// Mounts an overlay of `lower` with a new upper layer in `dir` (made, and removed on
    /// drop) at `dir/rootfs`.
    pub fn mount(lower: &Path, dir: &Path) -> io::Result<Self> {
        let (upper, work, merged) = (dir.join("upper"), dir.join("work"), dir.join("rootfs"));
        for path in [&upper, &work, &merged] {
            std::fs::create_dir_all(path)?;
        }
        let paths = [lower, &upper, &work];
        if paths
            .iter()
            .any(|p| p.to_string_lossy().contains([',', ':']))
        {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "an overlay cannot name {} (a ',' or ':' in a path)",
                    dir.display()
                ),
            ));
        }
        let options = format!(
            "lowerdir={},upperdir={},workdir={}",
            lower.display(),
            upper.display(),
            work.display()
        );
        mount(
            Some("overlay"),
            &merged,
            Some("overlay"),
            MsFlags::empty(),
            Some(options.as_str()),
        )
        .map_err(|errno| {
            io::Error::other(format!("mount overlay on {}: {errno}", merged.display()))
        })?;
        Ok(Rootfs {
            dir: dir.to_path_buf(),
            merged,
        })
    }

    /// Where it is mounted.
    pub fn path(&self) -> &Path {
        &self.merged
    }
}

impl Drop for Rootfs {
    fn drop(&mut self) {
        // Detached: processes of the container still ending keep it until they are gone.
        let _ = umount2(&self.merged, MntFlags::MNT_DETACH);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

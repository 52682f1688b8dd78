//! Volumes on the host: ConfigMap and Secret files written as the kubelet's atomic writer
//! writes them, `emptyDir` and `hostPath` directories made.

use std::io;
use std::os::unix::fs::{PermissionsExt, symlink};
use std::path::Path;

use crate::plan::{VolumeFile, VolumePlan, VolumeSource};

/// The link the kubelet's atomic writer points at the current files.
const DATA: &str = "..data";

/// Makes `volume` on the host: its files written (or written again when they changed), its
/// directory made. `Err` with the kubelet's mount failure text when a `hostPath` of type
/// `Directory` or `File` is missing.
pub fn prepare(volume: &VolumePlan, stamp: &str) -> io::Result<()> {
    match &volume.source {
        VolumeSource::Files(files) => write_atomically(&volume.host_path, files, stamp),
        VolumeSource::EmptyDir => std::fs::create_dir_all(&volume.host_path),
        VolumeSource::HostPath { kind } => host_path(&volume.host_path, kind),
    }
}

fn host_path(path: &Path, kind: &str) -> io::Result<()> {
    let missing = |what: &str| {
        io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "hostPath type check failed: {} is not a {what}",
                path.display()
            ),
        )
    };
    match kind {
        "Directory" if !path.is_dir() => Err(missing("directory")),
        "File" if !path.is_file() => Err(missing("file")),
        "FileOrCreate" => {
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent)?;
            }
            if !path.exists() {
                std::fs::write(path, b"")?;
            }
            Ok(())
        }
        "Directory" | "File" => Ok(()),
        // DirectoryOrCreate, and no type (a bind mount needs something to mount).
        _ if path.exists() => Ok(()),
        _ => std::fs::create_dir_all(path),
    }
}

/// Writes `files` into `dir` as the kubelet does: into a new directory `..<stamp>`, then
/// `..data` swapped to it by one rename, each top-level name a link through `..data`; names no
/// longer there are removed, and so is the previous directory. A reader sees the old files or
/// the new ones, never a mix.
pub fn write_atomically(dir: &Path, files: &[VolumeFile], stamp: &str) -> io::Result<()> {
    std::fs::create_dir_all(dir)?;
    let generation = format!("..{stamp}");
    let target = dir.join(&generation);
    std::fs::create_dir_all(&target)?;
    for file in files {
        let path = target.join(&file.path);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, &file.data)?;
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(file.mode))?;
    }
    let previous = std::fs::read_link(dir.join(DATA)).ok();
    let temporary = dir.join("..data_tmp");
    let _ = std::fs::remove_file(&temporary);
    symlink(&generation, &temporary)?;
    std::fs::rename(&temporary, dir.join(DATA))?;
    let names: Vec<String> = files
        .iter()
        .filter_map(|f| f.path.split('/').next().map(str::to_owned))
        .collect();
    for name in &names {
        let link = dir.join(name);
        if link.symlink_metadata().is_err() {
            symlink(Path::new(DATA).join(name), &link)?;
        }
    }
    for entry in std::fs::read_dir(dir)?.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        // Only the writer's own links: a mount point a container made for a volume inside
        // this one is a directory, and stays.
        let link = entry.file_type().is_ok_and(|t| t.is_symlink());
        let stale_link = link && !name.starts_with("..") && !names.contains(&name);
        if stale_link {
            std::fs::remove_file(entry.path())?;
        }
    }
    if let Some(previous) = previous.filter(|p| p.as_os_str() != generation.as_str()) {
        let _ = std::fs::remove_dir_all(dir.join(previous));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(path: &str, data: &str) -> VolumeFile {
        VolumeFile {
            path: path.to_owned(),
            data: data.as_bytes().to_vec(),
            mode: 0o600,
        }
    }

    #[test]
    fn files_are_swapped_through_the_data_link_and_stale_names_go() {
        let dir = tempfile::tempdir().unwrap();
        let volume = dir.path().join("conf");
        write_atomically(&volume, &[file("a", "1"), file("sub/b", "2")], "1").unwrap();
        assert_eq!(std::fs::read_to_string(volume.join("a")).unwrap(), "1");
        assert_eq!(std::fs::read_to_string(volume.join("sub/b")).unwrap(), "2");
        assert_eq!(
            std::fs::read_link(volume.join("a")).unwrap(),
            Path::new("..data/a")
        );
        let mode = std::fs::metadata(volume.join("a"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        // A mount point a container made for a volume inside this one.
        std::fs::create_dir(volume.join("keyring-store")).unwrap();
        write_atomically(&volume, &[file("a", "one")], "2").unwrap();
        assert_eq!(std::fs::read_to_string(volume.join("a")).unwrap(), "one");
        assert!(
            volume.join("sub").symlink_metadata().is_err(),
            "a removed key goes"
        );
        assert!(!volume.join("..1").exists(), "the previous generation goes");
        let mut names: Vec<String> = std::fs::read_dir(&volume)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        assert_eq!(names, ["..2", "..data", "a", "keyring-store"]);
    }

    #[test]
    fn host_paths_are_made_or_checked_by_type() {
        let dir = tempfile::tempdir().unwrap();
        let made = dir.path().join("var/lib/rook");
        host_path(&made, "DirectoryOrCreate").unwrap();
        assert!(made.is_dir());
        host_path(&dir.path().join("etc/x.conf"), "FileOrCreate").unwrap();
        assert!(dir.path().join("etc/x.conf").is_file());
        let missing = host_path(&dir.path().join("nope"), "Directory").unwrap_err();
        assert!(
            missing.to_string().contains("is not a directory"),
            "{missing}"
        );
    }
}

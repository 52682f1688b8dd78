//! The container images, built and run for real (docs/images.md).
//!
//! `deploy/images/build.sh` builds the three images from the workspace (`cargo build --release
//! --locked`, a Debian trixie root made by debootstrap, buildah) as OCI archives. Each archive is
//! copied to an OCI layout with skopeo, unpacked with umoci, and run through `chroot` as the
//! image's user on a read-only bind mount of its root with a tmpfs on `/tmp`, as a Pod with
//! `readOnlyRootFilesystem` and an `emptyDir` runs it: the entrypoint with `--version` (and
//! `crd` for the agent and the operator), in the operator's image `ceph --version`, in the
//! gateway's `nft --version` and `ip -V`, and the gateway's `check` and `apply` of a state file
//! in a network namespace of the test, as root with every capability but `CAP_NET_ADMIN`
//! dropped (what its chart grants), after which the image's `nft` lists the table. Containers
//! cannot be run here (crun refuses this sandbox's cgroups), so chroot stands in for the
//! runtime. The image's configuration (user, entrypoint, command, PATH, labels), its layers and
//! its sizes are checked too, and the Dockerfiles for Docker users against the recipe of the
//! script.
//!
//! Needs root, buildah, skopeo, umoci, debootstrap, capsh and ip (`sudo bash .ci/run` installs
//! them and runs every test); fails, never skips, without them. The first run builds the release binaries
//! and the Debian root (minutes); later runs reuse what is current.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Instant;

use serde_json::Value;

/// The workspace version: every image is tagged with it and its binary prints it.
const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The oldest Ceph the operator supports (its `CephTooOld` guard), so the oldest `ceph` CLI its
/// image may carry.
const CEPH_MINIMUM: (u32, u32, u32) = (17, 2, 6);
/// Upper bounds of the images' sizes, in MiB: compressed (what a node pulls: the manifest's
/// layers) and unpacked (the root file system). docs/images.md records the measured sizes.
const AGENT_MAX_MIB: (u64, u64) = (16, 40);
const OPERATOR_MAX_MIB: (u64, u64) = (130, 340);
const GATEWAY_MAX_MIB: (u64, u64) = (18, 45);
/// The capabilities the gateway's chart leaves it (it drops all others) and that its image's
/// runs here keep: changing the nftables tables and routes of its network namespace.
const GATEWAY_CAPABILITIES: &str = "cap_net_admin";

const TOOLS: [&str; 12] = [
    "id",
    "git",
    "bash",
    "buildah",
    "skopeo",
    "umoci",
    "debootstrap",
    "chroot",
    "unshare",
    "mount",
    "capsh",
    "ip",
];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .ancestors()
        .nth(2)
        .unwrap()
        .to_owned()
}

fn read(relative: &str) -> String {
    std::fs::read_to_string(workspace_root().join(relative))
        .unwrap_or_else(|e| panic!("reading {relative}: {e}"))
}

/// A program on the PATH, or in the sbin directories that a non-login root shell may lack.
fn find_tool(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH").unwrap_or_default();
    std::env::split_paths(&path)
        .chain(["/usr/local/sbin", "/usr/sbin", "/sbin"].map(PathBuf::from))
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

fn tool(name: &str) -> PathBuf {
    find_tool(name).unwrap_or_else(|| panic!("{name} is missing (preflight checked it)"))
}

/// Root and the tools, or a failure that says how to get them.
fn preflight() -> Result<(), String> {
    let missing: Vec<&str> = TOOLS
        .into_iter()
        .filter(|t| find_tool(t).is_none())
        .collect();
    if !missing.is_empty() {
        return Err(format!(
            "missing {missing:?}: apt-get install --no-install-recommends buildah skopeo umoci \
             debootstrap libcap2-bin iproute2 (`sudo bash .ci/run` installs everything the tests \
             use)"
        ));
    }
    let uid = Command::new(tool("id"))
        .arg("-u")
        .output()
        .map_err(|e| format!("running id -u: {e}"))?;
    if String::from_utf8_lossy(&uid.stdout).trim() != "0" {
        return Err(
            "the image tests need root (debootstrap, buildah's storage, unpacking with \
                    owners, chroot): run them as root, e.g. `sudo env PATH=\"$PATH\" cargo test \
                    -p clusterset-images`, or `sudo bash .ci/run`, which installs the tools and \
                    runs every test"
                .to_owned(),
        );
    }
    Ok(())
}

fn run(command: &mut Command) -> Output {
    let shown = format!("{command:?}");
    let out = command
        .output()
        .unwrap_or_else(|e| panic!("starting {shown}: {e}"));
    assert!(
        out.status.success(),
        "{shown} failed ({}):\nstdout:\n{}\nstderr:\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn json(command: &mut Command) -> Value {
    serde_json::from_slice(&run(command).stdout).unwrap()
}

/// The archives that deploy/images/build.sh wrote, by image name; built once for all tests.
fn built() -> &'static BTreeMap<String, PathBuf> {
    static BUILT: OnceLock<Result<BTreeMap<String, PathBuf>, String>> = OnceLock::new();
    let built = BUILT.get_or_init(|| {
        preflight()?;
        let started = Instant::now();
        let out = Command::new(tool("bash"))
            .arg(workspace_root().join("deploy/images/build.sh"))
            .current_dir(workspace_root())
            .output()
            .map_err(|e| format!("starting deploy/images/build.sh: {e}"))?;
        let stdout = String::from_utf8_lossy(&out.stdout);
        if !out.status.success() {
            return Err(format!(
                "deploy/images/build.sh failed ({}):\nstdout:\n{stdout}\nstderr:\n{}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        println!(
            "deploy/images/build.sh: {:.0} s\n{stdout}",
            started.elapsed().as_secs_f64()
        );
        Ok(stdout
            .lines()
            .filter_map(|line| line.strip_prefix("image "))
            .filter_map(|rest| rest.split_once(' '))
            .map(|(name, archive)| (name.to_owned(), PathBuf::from(archive)))
            .collect())
    });
    match built {
        Ok(images) => images,
        Err(e) => panic!("{e}"),
    }
}

/// An image as a container runtime would see it: its configuration and manifest, unpacked.
struct Unpacked {
    name: String,
    dir: PathBuf,
    config: Value,
    manifest: Value,
    /// umoci's runtime configuration of the bundle (the process a runtime would start).
    runtime: Value,
    /// The capabilities its runs keep, all others dropped (as its chart's securityContext
    /// does); `None`: those of the image's user (none for a non-root user).
    capabilities: Option<&'static str>,
}

impl Unpacked {
    fn rootfs(&self) -> PathBuf {
        self.dir.join("bundle/rootfs")
    }

    fn entrypoint(&self) -> Vec<String> {
        strings(&self.config["config"]["Entrypoint"])
    }

    fn label(&self, name: &str) -> &str {
        self.config["config"]["Labels"][name]
            .as_str()
            .unwrap_or_else(|| panic!("{}: no label {name}: {:#}", self.name, self.config))
    }

    /// Runs `args` in the image through chroot, as the image's user, on a read-only bind mount
    /// of its root with a fresh tmpfs on /tmp, the devices a runtime gives a container on /dev
    /// (a `Command` of Rust's opens /dev/null for its child's stdin) and /proc, with the image's
    /// PATH and nothing else of this environment but TMPDIR=/tmp; in a mount namespace of its
    /// own, which takes the mounts along when it ends. Fails the test unless it succeeds.
    fn run(&self, args: &[&str]) -> Output {
        run(&mut self.command(&Place::default(), args))
    }

    /// The command that runs `args` in the image (as [`Unpacked::run`] does), at `place`: in
    /// its network namespace, with its state file as /tmp/state.yaml, with its capabilities.
    fn command(&self, place: &Place, args: &[&str]) -> Command {
        // With capabilities, capsh does the chroot, then drops every other capability from the
        // bounding set and clears the inheritable set before it starts the program, as root:
        // the program's permitted and effective sets are then exactly the ones kept, as a
        // runtime leaves them after `capabilities: {drop: [ALL], add: [...]}`.
        const SCRIPT: &str = r#"chroot=$1; capsh=$2; root=$3; user=$4; path=$5; keep=$6; state=$7; shift 7
mount --bind "$root" "$root"
mount -o remount,bind,ro "$root"
mount -t tmpfs -o mode=1777,size=64m tmpfs "$root/tmp"
mount -t tmpfs -o mode=755,size=64k tmpfs "$root/dev"
for device in null zero full random urandom tty; do
  : >"$root/dev/$device"
  mount --bind "/dev/$device" "$root/dev/$device"
done
mount -t proc proc "$root/proc"
if [ -n "$state" ]; then cp "$state" "$root/tmp/state.yaml"; fi
if [ "$keep" = "-" ]; then
  exec env -i "$path" TMPDIR=/tmp "$chroot" --userspec="$user" "$root" "$@"
fi
drop=$("$capsh" --print | sed -n 's/^Bounding set =//p' | tr ',' '\n' | grep -vxF -e "$keep" | paste -sd, -)
program=$1; shift
exec env -i "$path" TMPDIR=/tmp "$capsh" --chroot="$root" --drop="$drop" --inh= --shell="$program" -- "$@""#;
        let user = self.config["config"]["User"].as_str().unwrap();
        let path = strings(&self.config["config"]["Env"])
            .into_iter()
            .find(|e| e.starts_with("PATH="))
            .unwrap_or_else(|| panic!("{}: the image sets no PATH", self.name));
        let keep = match (place.capabilities.or(self.capabilities), self.capabilities) {
            (_, None) => "-".to_owned(),
            (Some(keep), Some(_)) => keep.to_owned(),
            (None, Some(_)) => unreachable!(),
        };
        let mut args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
        if keep != "-" {
            // capsh starts a path, not a name: the image's PATH decides, as a runtime's would.
            args[0] = self.which(&args[0], &path);
        }
        let mut command = match &place.netns {
            Some(netns) => {
                let mut command = Command::new(tool("ip"));
                command
                    .args(["netns", "exec", &netns.0])
                    .arg(tool("unshare"));
                command
            }
            None => Command::new(tool("unshare")),
        };
        command
            .args(["--mount", "--propagation", "private", "--", "sh", "-euc"])
            .args([SCRIPT, "sh"])
            .arg(tool("chroot"))
            .arg(tool("capsh"))
            .arg(self.rootfs())
            .args([user, &path, &keep])
            .arg(place.state.as_deref().unwrap_or(Path::new("")))
            .args(args);
        command
    }

    /// Where `name` is in the image, through the image's PATH (`PATH=...`).
    fn which(&self, name: &str, path: &str) -> String {
        if name.starts_with('/') {
            return name.to_owned();
        }
        path.trim_start_matches("PATH=")
            .split(':')
            .map(|dir| format!("{dir}/{name}"))
            .find(|candidate| {
                self.rootfs()
                    .join(candidate.trim_start_matches('/'))
                    .symlink_metadata()
                    .is_ok()
            })
            .unwrap_or_else(|| panic!("{}: no {name} on the image's {path}", self.name))
    }
}

/// Where [`Unpacked::command`] runs a program of an image, beyond its own root.
#[derive(Default)]
struct Place<'a> {
    /// A network namespace of the test (otherwise this process's).
    netns: Option<&'a Netns>,
    /// A file of this host, copied to the image's /tmp/state.yaml.
    state: Option<PathBuf>,
    /// Other capabilities to keep than the image's (only for an image run with capabilities);
    /// "" keeps none.
    capabilities: Option<&'static str>,
}

/// A network namespace of the test (`ip netns add`), deleted when dropped; the host's own
/// network configuration is never touched.
struct Netns(String);

impl Netns {
    fn new(name: String) -> Self {
        let _ = Command::new(tool("ip"))
            .args(["netns", "del", &name])
            .output();
        run(Command::new(tool("ip")).args(["netns", "add", &name]));
        Self(name)
    }

    /// `ip -n NAME ARGS...` (the host's ip, in the namespace).
    fn ip(&self, args: &[&str]) -> Output {
        run(Command::new(tool("ip")).args(["-n", &self.0]).args(args))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new(tool("ip"))
            .args(["netns", "del", &self.0])
            .output();
    }
}

impl Drop for Unpacked {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .map(|items| {
            items
                .iter()
                .map(|i| i.as_str().unwrap().to_owned())
                .collect()
        })
        .unwrap_or_default()
}

/// skopeo copy of the archive to an OCI layout, umoci unpack of the layout to a bundle.
fn unpack(name: &str) -> Unpacked {
    let archive = built()
        .get(name)
        .unwrap_or_else(|| panic!("build.sh named no archive for {name}: {:?}", built()));
    assert_eq!(
        archive.file_name().unwrap().to_str().unwrap(),
        format!("{name}-{VERSION}.oci.tar")
    );
    let dir = archive
        .parent()
        .unwrap()
        .join(format!(".unpack-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let source = format!("oci-archive:{}", archive.display());
    let layout = format!("{}:{VERSION}", dir.join("layout").display());
    let config = json(Command::new(tool("skopeo")).args(["inspect", "--config", &source]));
    let manifest = json(Command::new(tool("skopeo")).args(["inspect", "--raw", &source]));
    run(Command::new(tool("skopeo")).args(["copy", "--quiet", &source, &format!("oci:{layout}")]));
    run(Command::new(tool("umoci"))
        .args(["unpack", "--image", &layout])
        .arg(dir.join("bundle")));
    let runtime =
        serde_json::from_str(&std::fs::read_to_string(dir.join("bundle/config.json")).unwrap())
            .unwrap();
    Unpacked {
        name: name.to_owned(),
        dir,
        config,
        manifest,
        runtime,
        capabilities: None,
    }
}

/// Bytes of the files and symbolic links under `dir` (what the unpacked image takes).
fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    for entry in std::fs::read_dir(dir).unwrap() {
        let entry = entry.unwrap();
        let meta = entry.path().symlink_metadata().unwrap();
        total += if meta.is_dir() {
            tree_bytes(&entry.path())
        } else {
            meta.len()
        };
    }
    total
}

fn git_head() -> String {
    let root = workspace_root();
    let out = run(Command::new(tool("git"))
        .arg("-c")
        .arg(format!("safe.directory={}", root.display()))
        .arg("-C")
        .arg(&root)
        .args(["rev-parse", "HEAD"]));
    String::from_utf8(out.stdout).unwrap().trim().to_owned()
}

/// The `description` of a binary's Cargo.toml.
fn description(name: &str) -> String {
    read(&format!("bins/{name}/Cargo.toml"))
        .lines()
        .find_map(|l| l.strip_prefix("description = \""))
        .and_then(|l| l.strip_suffix('"'))
        .unwrap()
        .to_owned()
}

/// The release binary that `cargo build --release` left in the workspace's target directory.
fn release_binary(name: &str) -> PathBuf {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let metadata = json(
        Command::new(cargo)
            .args(["metadata", "--format-version", "1", "--no-deps", "--locked"])
            .current_dir(workspace_root()),
    );
    Path::new(metadata["target_directory"].as_str().unwrap()).join(format!("release/{name}"))
}

/// What every image must be: the configuration, the labels, the layers, the binary of this
/// workspace running as the image's user (`uid`, its group the same) on a read-only root, and
/// the sizes. Returns the measured sizes (compressed, unpacked) in bytes.
fn check_image(image: &Unpacked, max_mib: (u64, u64), uid: u32) -> (u64, u64) {
    let name = image.name.as_str();
    let entry = format!("/usr/local/bin/{name}");
    let config = &image.config["config"];

    // User: numeric (so that runAsNonRoot can verify a non-root one); it exists in the image.
    assert_eq!(config["User"], format!("{uid}:{uid}"), "{name}");
    assert_eq!(image.runtime["process"]["user"]["uid"], uid, "{name}");
    assert_eq!(image.runtime["process"]["user"]["gid"], uid, "{name}");
    let passwd = std::fs::read_to_string(image.rootfs().join("etc/passwd")).unwrap();
    assert!(
        passwd
            .lines()
            .any(|l| l.split(':').nth(2) == Some(&uid.to_string())
                && l.split(':').nth(3) == Some(&uid.to_string())),
        "{name}: /etc/passwd names the user {uid}:\n{passwd}"
    );
    // Entrypoint the binary, command `run`; what a runtime starts.
    assert_eq!(image.entrypoint(), std::slice::from_ref(&entry), "{name}");
    assert_eq!(strings(&config["Cmd"]), ["run"], "{name}");
    assert_eq!(
        strings(&image.runtime["process"]["args"]),
        [entry.clone(), "run".to_owned()],
        "{name}"
    );
    assert_eq!(image.config["os"], "linux");
    let arch = match std::env::consts::ARCH {
        "x86_64" => "amd64",
        "aarch64" => "arm64",
        other => other,
    };
    assert_eq!(image.config["architecture"], arch);

    // OCI labels.
    assert_eq!(image.label("org.opencontainers.image.title"), name);
    assert_eq!(
        image.label("org.opencontainers.image.description"),
        description(name)
    );
    assert_eq!(image.label("org.opencontainers.image.version"), VERSION);
    assert_eq!(
        image.label("org.opencontainers.image.source"),
        env!("CARGO_PKG_REPOSITORY")
    );
    assert_eq!(
        image.label("org.opencontainers.image.licenses"),
        env!("CARGO_PKG_LICENSE")
    );
    let head = git_head();
    let revision = image.label("org.opencontainers.image.revision");
    assert!(
        revision == head || revision == format!("{head}-dirty"),
        "{name}: revision {revision}, HEAD {head}"
    );
    let created = image.label("org.opencontainers.image.created");
    assert_eq!(image.config["created"], created, "{name}");
    assert!(
        created.len() == 20 && created.ends_with('Z') && created.as_bytes()[10] == b'T',
        "{name}: created {created}: RFC 3339 in UTC"
    );

    // Two layers, gzip-compressed: the Debian base, then the binary.
    let layers = image.manifest["layers"].as_array().unwrap();
    assert_eq!(layers.len(), 2, "{name}: {:#}", image.manifest);
    for layer in layers {
        assert_eq!(
            layer["mediaType"], "application/vnd.oci.image.layer.v1.tar+gzip",
            "{name}"
        );
    }
    assert_eq!(
        image.config["rootfs"]["diff_ids"].as_array().unwrap().len(),
        2
    );

    // The binary is the workspace's current release binary, not an older one.
    let inside = std::fs::read(image.rootfs().join(entry.trim_start_matches('/'))).unwrap();
    let outside = std::fs::read(release_binary(name)).unwrap();
    assert!(
        inside == outside,
        "{name}: the image's binary differs from target/release/{name}"
    );

    // It runs, as the image's user, on a read-only root.
    let version = image.run(&[&entry, "--version"]);
    assert_eq!(
        String::from_utf8_lossy(&version.stdout),
        format!("{name} {VERSION}\n")
    );

    // The certificates for TLS to API servers.
    let bundle = image.rootfs().join("etc/ssl/certs/ca-certificates.crt");
    let certificates = std::fs::read_to_string(&bundle).unwrap();
    assert!(
        certificates.matches("BEGIN CERTIFICATE").count() > 100,
        "{name}: {}",
        bundle.display()
    );

    // Sizes.
    let compressed: u64 = layers
        .iter()
        .map(|l| l["size"].as_u64().unwrap())
        .sum::<u64>()
        + image.manifest["config"]["size"].as_u64().unwrap();
    let unpacked = tree_bytes(&image.rootfs());
    println!(
        "{name}: {:.1} MiB compressed, {:.1} MiB unpacked",
        mib(compressed),
        mib(unpacked)
    );
    assert!(
        compressed <= max_mib.0 << 20 && unpacked <= max_mib.1 << 20,
        "{name}: {:.1} MiB compressed, {:.1} MiB unpacked: over the bounds {max_mib:?} MiB",
        mib(compressed),
        mib(unpacked)
    );
    (compressed, unpacked)
}

/// The agent's and the operator's `crd` prints their CustomResourceDefinitions.
fn check_crd(image: &Unpacked) {
    let name = image.name.as_str();
    let crd = image.run(&[&format!("/usr/local/bin/{name}"), "crd"]);
    let crd = String::from_utf8_lossy(&crd.stdout);
    assert!(
        crd.contains("kind: CustomResourceDefinition"),
        "{name} crd printed:\n{crd}"
    );
}

/// Distroless-like: no shell, no package manager; dpkg's status lists exactly the packages whose
/// files the image holds (`packages`, the script's list), for scanners; Debian's os-release.
fn check_only_packages(image: &Unpacked, packages: &[String]) {
    let name = image.name.as_str();
    let root = image.rootfs();
    for absent in [
        "usr/bin/sh",
        "usr/bin/bash",
        "usr/bin/apt-get",
        "usr/bin/dpkg",
    ] {
        assert!(
            root.join(absent).symlink_metadata().is_err(),
            "{name}: the image has no {absent}"
        );
    }
    let status = std::fs::read_to_string(root.join("var/lib/dpkg/status")).unwrap();
    let listed: BTreeSet<&str> = status
        .lines()
        .filter_map(|l| l.strip_prefix("Package: "))
        .collect();
    assert_eq!(
        listed,
        packages.iter().map(String::as_str).collect::<BTreeSet<_>>(),
        "{name}"
    );
    let os_release = std::fs::read_to_string(root.join("etc/os-release")).unwrap();
    let suite = script_value("deploy/images/debian-root.sh", "SUITE");
    assert!(
        os_release.contains(&format!("VERSION_CODENAME={suite}")),
        "{name}: {os_release}"
    );
}

/// The version of a package in an image's dpkg status.
fn package_version(image: &Unpacked, package: &str) -> String {
    let status = std::fs::read_to_string(image.rootfs().join("var/lib/dpkg/status")).unwrap();
    status
        .split("\n\n")
        .find(|stanza| stanza.lines().any(|l| l == format!("Package: {package}")))
        .and_then(|stanza| stanza.lines().find_map(|l| l.strip_prefix("Version: ")))
        .unwrap_or_else(|| panic!("{}: dpkg's status has no {package}", image.name))
        .to_owned()
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// A bash array assigned in a script, `NAME=(a b c)`, as its words.
fn script_array(script: &str, name: &str) -> Vec<String> {
    let text = read(script);
    let start = text
        .find(&format!("\n{name}=("))
        .unwrap_or_else(|| panic!("{script} assigns {name}=(...)"));
    let rest = &text[start + name.len() + 3..];
    rest[..rest.find(')').unwrap()]
        .split_whitespace()
        .map(str::to_owned)
        .collect()
}

/// A plain variable assigned in a script, `NAME=value`.
fn script_value(script: &str, name: &str) -> String {
    read(script)
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{name}=")))
        .unwrap_or_else(|| panic!("{script} assigns {name}"))
        .to_owned()
}

#[test]
fn the_agent_image_runs_its_binary_as_non_root_on_a_read_only_root_and_holds_only_what_it_needs() {
    let image = unpack("clusterset-agent");
    check_image(&image, AGENT_MAX_MIB, 65532);
    check_crd(&image);
    check_only_packages(
        &image,
        &script_array("deploy/images/build.sh", "AGENT_PACKAGES"),
    );
}

#[test]
fn the_operator_image_runs_its_binary_and_a_ceph_cli_of_at_least_17_2_6_as_non_root_on_a_read_only_root()
 {
    let image = unpack("mcs-ceph-operator");
    check_image(&image, OPERATOR_MAX_MIB, 65532);
    check_crd(&image);

    // The root holds nftables and iproute2 for the gateway's image only: they, and what they
    // brought, are purged from the operator's.
    let status = std::fs::read_to_string(image.rootfs().join("var/lib/dpkg/status")).unwrap();
    for package in script_array("deploy/images/debian-root.sh", "GATEWAY_PACKAGES") {
        assert!(
            !status.contains(&format!("\nPackage: {package}\n"))
                && !status.starts_with(&format!("Package: {package}\n")),
            "the operator's image lists {package} in dpkg's status"
        );
    }
    for absent in ["usr/sbin/nft", "usr/bin/ip", "usr/sbin/ip"] {
        assert!(
            image.rootfs().join(absent).symlink_metadata().is_err(),
            "the operator's image has no {absent}"
        );
    }

    // The ceph CLI that mon migration runs, found on the image's PATH by name as the operator
    // finds it; `ceph --version` imports the rados bindings, so librados loads too.
    let out = image.run(&["ceph", "--version"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let version = text
        .strip_prefix("ceph version ")
        .and_then(|rest| rest.split_whitespace().next())
        .unwrap_or_else(|| panic!("ceph --version printed {text:?}"));
    let parts: Vec<u32> = version
        .split(['.', '-', '+'])
        .take(3)
        .map(|p| p.parse().unwrap())
        .collect();
    let version_tuple = (parts[0], parts[1], parts[2]);
    println!("mcs-ceph-operator: ceph {version}");
    assert!(
        version_tuple >= CEPH_MINIMUM,
        "the operator's image carries ceph {version}; the operator requires {CEPH_MINIMUM:?} or later"
    );
}

#[test]
fn the_gateway_image_runs_nft_and_ip_as_root_with_only_net_admin_and_programs_its_table_in_a_network_namespace()
 {
    let mut image = unpack("clusterset-gateway");
    image.capabilities = Some(GATEWAY_CAPABILITIES);
    // As root: the capability its chart adds reaches root's processes only (docs/images.md).
    check_image(&image, GATEWAY_MAX_MIB, 0);
    let packages = script_array("deploy/images/build.sh", "GATEWAY_PACKAGES");
    check_only_packages(&image, &packages);
    for package in script_array("deploy/images/build.sh", "AGENT_PACKAGES")
        .into_iter()
        .chain(script_array(
            "deploy/images/debian-root.sh",
            "GATEWAY_PACKAGES",
        ))
    {
        assert!(
            packages.contains(&package),
            "the gateway's image holds {package} (GATEWAY_PACKAGES: {packages:?})"
        );
    }

    // The programs the gateway runs, found on the image's PATH by name as it finds them; their
    // libraries load.
    let nft = image.run(&["nft", "--version"]);
    let nft = String::from_utf8_lossy(&nft.stdout);
    let packaged = package_version(&image, "nftables");
    let upstream = packaged.split(['-', '+']).next().unwrap();
    assert!(
        nft.starts_with(&format!("nftables v{upstream} ")),
        "nft --version printed {nft:?}; the image's nftables is {packaged}"
    );
    let ip = image.run(&["ip", "-V"]);
    let ip = String::from_utf8_lossy(&ip.stdout);
    assert!(
        ip.starts_with("ip utility, iproute2-"),
        "ip -V printed {ip:?}"
    );
    println!("clusterset-gateway: {} / {}", nft.trim(), ip.trim());

    // In a network namespace of the test: the example state, whose peer gateway 172.31.255.2
    // is on the network of a veth pair there, both ends in the namespace (a peer must be
    // directly reachable; this kernel has no dummy interfaces).
    let netns = Netns::new(format!("csimg-{}", std::process::id()));
    netns.ip(&["link", "set", "lo", "up"]);
    netns.ip(&[
        "link", "add", "csimg0", "type", "veth", "peer", "name", "csimg1",
    ]);
    netns.ip(&["address", "add", "172.31.255.1/24", "dev", "csimg0"]);
    netns.ip(&["link", "set", "csimg0", "up"]);
    netns.ip(&["link", "set", "csimg1", "up"]);
    let place = Place {
        netns: Some(&netns),
        state: Some(workspace_root().join("examples/gateway-state.yaml")),
        capabilities: None,
    };
    let entry = "/usr/local/bin/clusterset-gateway";
    let in_netns = |args: &[&str]| run(&mut image.command(&place, args));

    let check = in_netns(&[entry, "check", "--state", "/tmp/state.yaml"]);
    let check = String::from_utf8_lossy(&check.stdout);
    assert!(
        check.contains("table ip clusterset_gw")
            && check.contains("# route 242.2.0.0/16 via 172.31.255.2"),
        "clusterset-gateway check printed:\n{check}"
    );

    // Without NET_ADMIN, nft is refused: the capabilities are really dropped, and NET_ADMIN is
    // the one the gateway needs.
    let refused = image
        .command(
            &Place {
                netns: Some(&netns),
                state: place.state.clone(),
                capabilities: Some(""),
            },
            &[entry, "apply", "--state", "/tmp/state.yaml"],
        )
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        !refused.status.success() && stderr.contains("Operation not permitted"),
        "apply without any capability: {} {stderr}",
        refused.status
    );

    in_netns(&[entry, "apply", "--state", "/tmp/state.yaml"]);
    let table = in_netns(&["nft", "list", "table", "ip", "clusterset_gw"]);
    let table = String::from_utf8_lossy(&table.stdout);
    assert!(
        table.starts_with("table ip clusterset_gw {")
            && table.contains("242.1.0.1")
            && table.contains("10.244.0.10")
            && table.contains("242.1.255.254"),
        "nft list table ip clusterset_gw in the namespace:\n{table}"
    );
    let routes = in_netns(&["ip", "route", "show", "proto", "147"]);
    let routes = String::from_utf8_lossy(&routes.stdout);
    assert_eq!(
        routes.trim(),
        "242.2.0.0/16 via 172.31.255.2 dev csimg0",
        "the gateway's routes in the namespace"
    );
    // Applying again changes nothing and succeeds (idempotent: `apply` replaces its table).
    in_netns(&[entry, "apply", "--state", "/tmp/state.yaml"]);
    let again = in_netns(&["nft", "list", "table", "ip", "clusterset_gw"]);
    assert_eq!(String::from_utf8_lossy(&again.stdout), table);
}

/// The Dockerfiles, for users who build with Docker, install what the script's images hold:
/// the same Debian release and packages, the same user, entrypoint and command; and their
/// builder's Debian is no newer than the runtime's, so the binary's glibc is there.
#[test]
fn the_dockerfiles_agree_with_the_image_recipe() {
    let suite = script_value("deploy/images/debian-root.sh", "SUITE");
    let packages: BTreeSet<String> = script_array("deploy/images/debian-root.sh", "PACKAGES")
        .into_iter()
        .collect();
    let user = script_value("deploy/images/build.sh", "USER_ID");
    let debian = |codename: &str| match codename {
        "bookworm" => 12,
        "trixie" => 13,
        "forky" => 14,
        other => panic!("which Debian release is {other}?"),
    };

    for (name, dockerfile, runtime) in [
        (
            "mcs-ceph-operator",
            "deploy/mcs-ceph-operator/Dockerfile",
            format!("FROM debian:{suite}-slim"),
        ),
        (
            "clusterset-agent",
            "deploy/clusterset-agent/Dockerfile",
            format!("FROM gcr.io/distroless/cc-debian{}:nonroot", debian(&suite)),
        ),
    ] {
        let text = read(dockerfile);
        let instructions: Vec<String> = text
            .replace("\\\n", " ")
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty() && !l.starts_with('#'))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .collect();
        let froms: Vec<&String> = instructions
            .iter()
            .filter(|i| i.starts_with("FROM "))
            .collect();
        assert_eq!(froms.len(), 2, "{dockerfile}: a builder and a runtime");
        let builder = froms[0]
            .strip_prefix("FROM rust:1.95-")
            .and_then(|b| b.strip_suffix(" AS builder"))
            .unwrap_or_else(|| panic!("{dockerfile}: {}", froms[0]));
        assert!(
            debian(builder) <= debian(&suite),
            "{dockerfile}: a {builder} build needs its glibc at run time, and {suite} is older"
        );
        assert_eq!(froms[1], &runtime, "{dockerfile}");
        assert!(
            instructions.contains(&format!("RUN cargo build --release --locked -p {name}")),
            "{dockerfile}"
        );
        assert!(
            instructions.contains(&format!(
                "COPY --from=builder /src/target/release/{name} /usr/local/bin/{name}"
            )),
            "{dockerfile}"
        );
        assert!(instructions.contains(&format!("USER {user}:{user}")));
        assert!(instructions.contains(&format!("ENTRYPOINT [\"/usr/local/bin/{name}\"]")));
        assert_eq!(
            instructions.last().unwrap(),
            "CMD [\"run\"]",
            "{dockerfile}"
        );
        if name == "mcs-ceph-operator" {
            let install = instructions
                .iter()
                .find_map(|i| i.split_once("apt-get install ").map(|(_, rest)| rest))
                .unwrap_or_else(|| panic!("{dockerfile} installs packages"));
            let installed: BTreeSet<String> = install
                .split("&&")
                .next()
                .unwrap()
                .split_whitespace()
                .filter(|w| !w.starts_with('-'))
                .map(str::to_owned)
                .collect();
            assert_eq!(installed, packages, "{dockerfile}");
        }
    }
}

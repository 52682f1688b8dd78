#!/usr/bin/env bash
# Builds the container images of clusterset-agent, mcs-ceph-operator and clusterset-gateway as OCI
# archives, from Debian packages and the workspace's release binaries; no base image is pulled
# (docs/images.md).
#
#   sudo bash deploy/images/build.sh                      # all three, into <cargo target dir>/images
#   sudo bash deploy/images/build.sh clusterset-gateway   # one of them
#   sudo bash deploy/images/build.sh --out DIR            # elsewhere
#   sudo bash deploy/images/build.sh --load               # also into local container storage
#                                                         # (podman images, podman push)
#
# Each image is two layers: a Debian trixie base (deploy/images/debian-root.sh, cached under
# /var/cache/clusterset) and the binary from `cargo build --release --locked`, as
# /usr/local/bin/<name>, entrypoint the binary, command `run`, OCI labels
# (org.opencontainers.image.*), tagged with the workspace version:
#
# - mcs-ceph-operator: minbase + ca-certificates + ceph-common (the `ceph` CLI of mon migration,
#   Ceph 18.2), with what Debian's slim images leave out left out; the packages that the root
#   holds for the gateway only are purged from its copy.
# - clusterset-agent: only the files of base-files, netbase, libc6, libgcc-s1 and ca-certificates
#   (distroless-like: no shell, no package manager), with the users, nsswitch.conf, the
#   ld.so cache and a dpkg status file that lists those packages for scanners.
# - clusterset-gateway: the same, plus the files of nftables and iproute2 and of the libraries
#   that `nft` and `ip` link (GATEWAY_PACKAGES): the gateway programs its table with `nft -f -`
#   and its routes with `ip route`. Only those files, not minbase: minbase would add a shell,
#   apt, dpkg, perl-base and coreutils (~100 MiB more unpacked) that the gateway never runs.
#
# Users: the agent and the operator run as the numeric non-root user 65532. The gateway runs as
# user 0: it changes the node's nftables and routes (hostNetwork), which takes CAP_NET_ADMIN, and
# its chart drops every capability but NET_ADMIN. A capability that a Pod adds reaches the
# process of a non-root user only through the ambient set, which a securityContext cannot set,
# or file capabilities (on `nft` and `ip` too, its child processes; off with
# allowPrivilegeEscalation: false), so the gateway must be root to use it;
# root with only NET_ADMIN and a read-only root file system can change the network and nothing
# else (no CAP_DAC_OVERRIDE, CAP_SYS_ADMIN, CAP_CHOWN...).
#
# Nothing in any image is written at run time except under /tmp (an emptyDir with a read-only
# root file system): the operator writes the `ceph` CLI's keyring in a private temporary
# directory there; the agent and the gateway write nothing.
#
# An archive is reused when everything it was made from is the same (this script, the root, the
# binary, the labels); `cargo build` runs every time, so an image never holds a stale binary.
# The last lines of the output, `image <name> <archive>`, are what tests/images reads.
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
WORKSPACE=$(cd "$HERE/../.." && pwd)
ROOT=${CLUSTERSET_IMAGE_ROOT:-/var/cache/clusterset/image-root}
CARGO=${CARGO:-cargo}
ALL_IMAGES=(clusterset-agent mcs-ceph-operator clusterset-gateway)
# The agent's image holds only the files of these packages (from the same root as the operator's,
# so both carry the same versions). The binary needs libc and libgcc_s; ca-certificates for TLS
# to API servers whose kubeconfig names no CA; base-files for /etc/os-release; netbase for
# /etc/services and /etc/protocols.
AGENT_PACKAGES=(base-files netbase libc6 libgcc-s1 ca-certificates)
# The gateway's image holds the agent's packages (the same reasons), then nftables with the
# libraries `nft` links (libnftables1 and what it links: libnftnl11, libmnl0, libjansson4,
# libxtables12, libgmp10; the command line's libedit2 with libbsd0, libmd0, libtinfo6), then
# iproute2 with the libraries `ip` links (libbpf1, libelf1t64 with zlib1g and libzstd1, libcap2,
# libselinux1 with libpcre2-8-0). The build checks with the image's own loader that `nft` and
# `ip` find every library they link. Other iproute2 programs that link more (arpd: libdb5.3) are
# not the gateway's and may not start; nor do its shell scripts (there is no shell).
GATEWAY_PACKAGES=(base-files netbase libc6 libgcc-s1 ca-certificates
  nftables libnftables1 libnftnl11 libmnl0 libjansson4 libxtables12 libgmp10
  libedit2 libbsd0 libmd0 libtinfo6
  iproute2 libbpf1 libelf1t64 zlib1g libzstd1 libcap2 libselinux1 libpcre2-8-0)
# The agent's and the operator's user; the gateway's is 0 (root: see the header).
USER_ID=65532
GATEWAY_USER_ID=0
IMAGE_PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin

say() { printf '==> %s\n' "$*"; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

usage() {
  sed -n '2,10p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'
}

out=""
load=false
images=()
while [ $# -gt 0 ]; do
  case "$1" in
    --out) [ $# -ge 2 ] || fail "--out needs a directory"; out=$2; shift 2 ;;
    --out=*) out=${1#--out=}; shift ;;
    --load) load=true; shift ;;
    -h|--help) usage; exit 0 ;;
    clusterset-agent|mcs-ceph-operator|clusterset-gateway) images+=("$1"); shift ;;
    *) usage >&2; fail "unknown argument '$1' (images: ${ALL_IMAGES[*]})" ;;
  esac
done
[ ${#images[@]} -gt 0 ] || images=("${ALL_IMAGES[@]}")

# ---- what it needs ----

[ "$EUID" -eq 0 ] || fail "building images needs root (debootstrap, chroot, buildah's storage); try: sudo env PATH=\"\$PATH\" bash $0"
missing=()
for tool in debootstrap buildah skopeo; do
  command -v "$tool" >/dev/null || missing+=("$tool")
done
[ ${#missing[@]} -eq 0 ] \
  || fail "missing: ${missing[*]}; install them: apt-get install --no-install-recommends buildah skopeo umoci debootstrap (or run sudo bash .ci/run, which installs everything the tests use)"
command -v "$CARGO" >/dev/null \
  || fail "cargo is not on root's PATH; keep yours: sudo env PATH=\"\$PATH\" bash $0"

# ---- the base root, the binaries, the labels ----

bash "$HERE/debian-root.sh"
stamp=$(cat "$ROOT/.clusterset-image-root")
base_epoch=$(sed -n 's/^built=//p' <<<"$stamp")
ceph_version=$(sed -n 's/^ceph=//p' <<<"$stamp")

cd "$WORKSPACE"
# The variables cargo sets for the program it runs (when this script runs from a test, `cargo
# run` or a build script) are no settings of ours, and some crates' fingerprints track them
# (ring's, CARGO_MANIFEST_DIR): with them, every build from a test would rebuild the release
# binaries, and the next from a shell again.
while read -r variable; do
  unset "$variable"
done < <(compgen -e | grep -E '^(CARGO_PKG_|CARGO_MANIFEST_|CARGO_CRATE_|CARGO_BIN_|CARGO_PRIMARY_PACKAGE$|CARGO_TARGET_TMPDIR$)')
# All the binaries every time, even for one image: cargo unifies the features of the packages it
# builds together, so building one alone makes another binary than building them all (and would
# make the others' archives stale).
packages=()
for image in "${ALL_IMAGES[@]}"; do packages+=(-p "$image"); done
say "cargo build --release --locked ${packages[*]}"
"$CARGO" build --release --locked "${packages[@]}"
target_dir=$("$CARGO" metadata --format-version 1 --no-deps --locked \
  | sed -n 's/.*"target_directory":"\([^"]*\)".*/\1/p')
[ -n "$target_dir" ] || fail "cargo metadata did not name the target directory"
[ -n "$out" ] || out="$target_dir/images"
mkdir -p "$out"
out=$(cd "$out" && pwd)

# Labels: the version of the package, the repository, its license; the commit built (with
# "-dirty" when the work tree has uncommitted changes) and its time, which is also the image's
# creation time, so that the same commit builds the same image.
git_() { git -c safe.directory="$WORKSPACE" -C "$WORKSPACE" "$@"; }
if git_ rev-parse --git-dir >/dev/null 2>&1; then
  revision=$(git_ rev-parse HEAD)
  git_ diff --quiet HEAD -- 2>/dev/null || revision="$revision-dirty"
  epoch=${SOURCE_DATE_EPOCH:-$(git_ log -1 --format=%ct)}
else
  revision=unknown
  epoch=${SOURCE_DATE_EPOCH:-$(date +%s)}
fi
created=$(date -u -d "@$epoch" +%Y-%m-%dT%H:%M:%SZ)
workspace_field() { sed -n "s/^$1 = \"\\(.*\\)\"\$/\\1/p" "$WORKSPACE/Cargo.toml" | head -1; }
source_url=$(workspace_field repository)
license=$(workspace_field license)

# ---- buildah, with a private store that is removed afterwards ----

work=$(mktemp -d "$out/.build.XXXXXX")
cleanup() {
  buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs rm --all >/dev/null 2>&1 || true
  unmount_under "$work"
  rm -rf --one-file-system "$work"
}
unmount_under() {
  local dir=$1 target
  while read -r target; do
    [ -n "$target" ] && umount -l "$target"
  done < <(findmnt -rn -o TARGET | awk -v d="$dir/" 'index($0, d) == 1' | sort -r)
}
trap cleanup EXIT
b() { buildah --root "$work/storage" --runroot "$work/run" --storage-driver vfs "$@"; }

# The operator's root file system: the whole cached root, less what is not part of an image,
# less the packages the root holds for the gateway only: dpkg purges those from the copy (their
# files, their status, debconf's answers), as if they had never been installed, and what that run
# of dpkg leaves behind (its log, the previous status, ldconfig's cache of inodes, apt's marks)
# is removed.
fill_operator() {
  local dest=$1 log gateway_only states
  read -ra gateway_only <<<"$(sed -n 's/^gateway-only=//p' <<<"$stamp")"
  [ ${#gateway_only[@]} -gt 0 ] \
    || fail "$ROOT/.clusterset-image-root names no gateway-only packages; rebuild the root: rm -rf $ROOT && bash $HERE/debian-root.sh"
  tar -C "$ROOT" --numeric-owner --one-file-system -cf - \
    --exclude=./.clusterset-image-root --exclude='./dev/*' --exclude='./proc/*' \
    --exclude='./sys/*' --exclude='./tmp/*' --exclude='./run/*' \
    --exclude='./var/lib/apt/lists/*' --exclude='./var/cache/apt/*' . \
    | tar -C "$dest" --numeric-owner -xpf -
  log=$(mktemp "$work/purge.XXXXXX")
  # The maintainer scripts' /dev/null, for this run only (the image's /dev is the runtime's).
  mknod -m 666 "$dest/dev/null" c 1 3
  chroot "$dest" env -i PATH="$IMAGE_PATH" DEBIAN_FRONTEND=noninteractive LC_ALL=C \
    dpkg --purge "${gateway_only[@]}" >"$log" 2>&1 \
    || { cat "$log" >&2; fail "dpkg --purge ${gateway_only[*]} failed in the operator's copy of $ROOT (output above)"; }
  rm -f "$log" "$dest/dev/null" "$dest/var/log/dpkg.log" "$dest"/var/lib/dpkg/*-old \
    "$dest"/var/cache/debconf/*-old
  # apt's marks of the purged packages as automatically installed.
  states="$dest/var/lib/apt/extended_states"
  if [ -f "$states" ]; then
    awk -v drop=" ${gateway_only[*]} " 'BEGIN { RS = ""; ORS = "\n\n" }
      { split($0, line, "\n"); package = substr(line[1], 10) }
      index(drop, " " package " ") == 0' "$states" >"$log"
    cat "$log" >"$states"
    rm -f "$log"
  fi
  rm -rf "$dest/var/cache/ldconfig"
}

# The agent's and the gateway's: the files of the packages as dpkg lists them, in the root's
# merged-/usr layout. fill_packages DEST PACKAGE...
fill_packages() {
  local dest=$1 link pkg path list
  shift
  list=$(mktemp "$work/files.XXXXXX")
  for link in bin sbin lib lib64; do
    [ -L "$ROOT/$link" ] && cp -P "$ROOT/$link" "$dest/$link"
  done
  for pkg in "$@"; do
    chroot "$ROOT" dpkg-query -W "$pkg" >/dev/null 2>&1 \
      || fail "package $pkg is not installed in $ROOT; add it to deploy/images/debian-root.sh (PACKAGES or GATEWAY_PACKAGES) or take it out of this image's list"
  done
  {
    for pkg in "$@"; do
      # Paths that the slim root left out (docs, man pages) are listed but absent.
      chroot "$ROOT" dpkg-query -L "$pkg" | while read -r path; do
        case "$path" in /|/.) continue ;; esac
        if [ -e "$ROOT$path" ] || [ -L "$ROOT$path" ]; then printf '.%s\n' "$path"; fi
      done
    done
    # What no package lists: the certificates that ca-certificates' postinst put together, the
    # name service switch, the loader's configuration (libc-bin's, for ldconfig below).
    (cd "$ROOT" && find ./etc/ssl/certs ./etc/nsswitch.conf ./etc/ld.so.conf ./etc/ld.so.conf.d)
  } | sort -u >"$list"
  tar -C "$ROOT" --numeric-owner --no-recursion -cf - -T "$list" \
    | tar -C "$dest" --numeric-owner --keep-directory-symlink -xpf -
  cat >"$dest/etc/passwd" <<EOF
root:x:0:0:root:/root:/sbin/nologin
nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin
nonroot:x:$USER_ID:$USER_ID:nonroot:/home/nonroot:/sbin/nologin
EOF
  cat >"$dest/etc/group" <<EOF
root:x:0:
nogroup:x:65534:
nonroot:x:$USER_ID:
EOF
  mkdir -p "$dest/root" "$dest/home/nonroot" "$dest/tmp" "$dest/usr/local/bin" "$dest/var/lib/dpkg"
  chmod 0700 "$dest/root" "$dest/home/nonroot"
  chown "$USER_ID:$USER_ID" "$dest/home/nonroot"
  chmod 1777 "$dest/tmp"
  # The loader's cache, by the root's own (static) ldconfig.
  "$ROOT/usr/sbin/ldconfig" -r "$dest"
  # ldconfig's own cache of what it read (inodes, times): not needed, and never the same twice.
  rm -rf "$dest/var/cache/ldconfig"
  # For scanners (trivy, grype, syft read dpkg's status): the packages the image holds.
  chroot "$ROOT" dpkg-query -s "$@" >"$dest/var/lib/dpkg/status"
  rm -f "$list"
}

# needs_only_what_it_holds DEST PROGRAM...: each program's shared libraries are in the image (the
# image's own loader lists them, as ldd does), or the build fails naming what is missing.
needs_only_what_it_holds() {
  local dest=$1 loader program missing
  shift
  loader=$(cd "$dest" && find usr/lib64 usr/lib -maxdepth 2 -name 'ld-linux*.so.*' -print -quit 2>/dev/null || true)
  [ -n "$loader" ] || fail "no dynamic loader (ld-linux*.so.*) in the image; is libc6 in its packages?"
  for program in "$@"; do
    [ -e "$dest$program" ] || fail "the image has no $program; add its package to GATEWAY_PACKAGES"
    missing=$(chroot "$dest" "/$loader" --list "$program" 2>&1 | grep 'not found' || true)
    [ -z "$missing" ] \
      || fail "$program in the image needs libraries it does not hold: $(tr -s ' \t\n' ' ' <<<"$missing"); add their packages (dpkg -S <library> in $ROOT) to GATEWAY_PACKAGES"
  done
}

description_of() {
  sed -n 's/^description = "\(.*\)"$/\1/p' "$WORKSPACE/bins/$1/Cargo.toml" | head -1
}

# build_image NAME: writes $out/NAME-VERSION.oci.tar unless the one there is current.
build_image() {
  local name=$1 version binary archive inputs base ctr mnt started bytes user
  started=$(date +%s)
  version=$("$CARGO" pkgid --locked -p "$name")
  version=${version##*[#@]}
  binary="$target_dir/release/$name"
  [ -x "$binary" ] || fail "cargo build did not leave $binary"
  archive="$out/$name-$version.oci.tar"
  inputs=$(printf 'script=%s\nroot-recipe=%s\nroot=%s\nbinary=%s\nversion=%s\nrevision=%s\ncreated=%s\n' \
    "$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-64)" "$(sha256sum "$HERE/debian-root.sh" | cut -c1-64)" \
    "$(sha256sum <<<"$stamp" | cut -c1-64)" "$(sha256sum "$binary" | cut -c1-64)" \
    "$version" "$revision" "$created")
  if [ -f "$archive" ] && [ -f "$archive.inputs" ] && [ "$(cat "$archive.inputs")" = "$inputs" ]; then
    say "$name: reusing $archive (made from the same binary, root and labels)"
    return
  fi

  say "$name: base layer"
  ctr=$(b from --quiet scratch)
  mnt=$(b mount "$ctr")
  case "$name" in
    mcs-ceph-operator) fill_operator "$mnt"
      base="Debian $(sed -n 's/^suite=//p' <<<"$stamp") minbase, ca-certificates, ceph-common $ceph_version (deploy/images/debian-root.sh)" ;;
    clusterset-agent) fill_packages "$mnt" "${AGENT_PACKAGES[@]}"
      base="Debian $(sed -n 's/^suite=//p' <<<"$stamp"): the files of ${AGENT_PACKAGES[*]} (deploy/images/build.sh)" ;;
    clusterset-gateway) fill_packages "$mnt" "${GATEWAY_PACKAGES[@]}"
      needs_only_what_it_holds "$mnt" /usr/sbin/nft /usr/bin/ip
      base="Debian $(sed -n 's/^suite=//p' <<<"$stamp"): the files of ${GATEWAY_PACKAGES[*]} (deploy/images/build.sh)" ;;
    *) fail "no recipe for the image $name" ;;
  esac
  bytes=$(du -sb "$mnt" | cut -f1)
  b umount "$ctr" >/dev/null
  b config --created-by "$base" "$ctr"
  b commit --quiet --identity-label=false --timestamp "$base_epoch" --rm "$ctr" "base-$name" >/dev/null

  say "$name: $name $version layer"
  ctr=$(b from --quiet "base-$name")
  b copy --quiet --chown 0:0 --chmod 0755 "$ctr" "$binary" "/usr/local/bin/$name" >/dev/null
  bytes=$((bytes + $(stat -c %s "$binary")))
  case "$name" in
    clusterset-gateway) user="$GATEWAY_USER_ID:$GATEWAY_USER_ID" ;;
    *) user="$USER_ID:$USER_ID" ;;
  esac
  b config \
    --created-by "cargo build --release --locked -p $name; /usr/local/bin/$name" \
    --user "$user" \
    --entrypoint "[\"/usr/local/bin/$name\"]" \
    --cmd '["run"]' \
    --env "PATH=$IMAGE_PATH" \
    --workingdir / \
    --label "org.opencontainers.image.title=$name" \
    --label "org.opencontainers.image.description=$(description_of "$name")" \
    --label "org.opencontainers.image.version=$version" \
    --label "org.opencontainers.image.revision=$revision" \
    --label "org.opencontainers.image.created=$created" \
    --label "org.opencontainers.image.source=$source_url" \
    --label "org.opencontainers.image.licenses=$license" \
    "$ctr"
  rm -f "$archive.inputs" "$archive.tmp"
  b commit --quiet --identity-label=false --timestamp "$epoch" --disable-compression=false --rm \
    "$ctr" "oci-archive:$archive.tmp:$version" >/dev/null
  mv "$archive.tmp" "$archive"
  printf '%s\n' "$inputs" >"$archive.inputs"
  say "$name: wrote $archive ($(( $(stat -c %s "$archive") / 1024 / 1024 )) MiB compressed, $((bytes / 1024 / 1024)) MiB unpacked, $(( $(date +%s) - started )) s)"
}

for image in "${images[@]}"; do
  build_image "$image"
done

if $load; then
  for image in "${images[@]}"; do
    version=$("$CARGO" pkgid --locked -p "$image")
    version=${version##*[#@]}
    say "skopeo copy oci-archive:$out/$image-$version.oci.tar containers-storage:localhost/$image:$version"
    skopeo copy --quiet "oci-archive:$out/$image-$version.oci.tar" "containers-storage:localhost/$image:$version"
  done
fi

for image in "${images[@]}"; do
  version=$("$CARGO" pkgid --locked -p "$image")
  printf 'image %s %s\n' "$image" "$out/$image-${version##*[#@]}.oci.tar"
done

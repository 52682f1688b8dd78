#!/usr/bin/env bash
# Builds, or reuses when it is current, the Debian root filesystem that the container images of
# deploy/images/build.sh are made from (docs/images.md): Debian trixie minbase with ca-certificates
# and ceph-common (Ceph 18.2 "Reef": the `ceph` CLI that the operator's mon migration runs; the
# operator requires Ceph >= 17.2.6, and bookworm has only 16.2), then nftables and iproute2 (the
# `nft` and `ip` programs of clusterset-gateway), docs, man pages and locales left out as Debian's
# slim images do, and the non-root user `nonroot` (65532).
#
#   sudo bash deploy/images/debian-root.sh           # builds /var/cache/clusterset/image-root
#   CLUSTERSET_IMAGE_ROOT=/srv/image-root sudo -E bash deploy/images/debian-root.sh
#
# The operator's image is this root, less the packages that nftables and iproute2 brought (purged
# from its copy; the stamp names them), plus the binary; the agent's and the gateway's take only
# the files of the few packages their binaries need from it. The root is reused when it was built by this same recipe
# and `apt-get` finds nothing newer for it; otherwise it is built again beside the old one and
# swapped in, so a failed build never leaves a half-made root behind
# (deploy/images/debian-root-lib.sh, shared with tests/lab/ceph-reef-root.sh).
set -euo pipefail

# shellcheck source=debian-root-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/debian-root-lib.sh"

MIRROR=${CLUSTERSET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
# Installed on top of minbase, without recommends. deploy/mcs-ceph-operator/Dockerfile installs
# the same on debian:trixie-slim (tests/images checks that the two agree).
PACKAGES=(ca-certificates ceph-common)
# Installed after PACKAGES, for the gateway's image only (it takes their files and those of the
# libraries they link: deploy/images/build.sh, GATEWAY_PACKAGES). Installing them here keeps one
# root, so that every image carries the same versions and the reuse check below sees their
# updates too; the packages they add are recorded in the stamp (gateway-only=) and build.sh
# purges those from the operator's copy, which stays minbase + PACKAGES.
GATEWAY_PACKAGES=(nftables iproute2)
# The images' user: numeric, so that Kubernetes' runAsNonRoot can verify it (distroless's
# `nonroot`); the same as the Deployments' runAsUser.
USER_ID=65532
# The marker of a finished build: the recipe (this file and the library), the suite, the Ceph,
# nftables and iproute2 versions installed, the packages only the gateway's (gateway-only=) and
# when the root was built (the epoch the images' base layer is stamped with).
STAMP=.clusterset-image-root

need_root_and_debootstrap
ROOT=$(checked_root CLUSTERSET_IMAGE_ROOT "${CLUSTERSET_IMAGE_ROOT:-/var/cache/clusterset/image-root}" \
  "$STAMP" /var/cache/clusterset/image-root)
recipe=$(recipe_of "${BASH_SOURCE[0]}" "$(dirname "${BASH_SOURCE[0]}")/debian-root-lib.sh")

# What apt-get update fetched to look for upgrades is not part of the images (build.sh leaves
# it out too), nor is the host's name server.
forget_apt_lists() {
  rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin
  : >"$ROOT/etc/resolv.conf"
}

if is_current "$ROOT" "$STAMP" "$recipe" forget_apt_lists; then
  say "reusing $ROOT ($(grep '^ceph=' "$ROOT/$STAMP"))"
  exit 0
fi

NEW="$ROOT.new"
bootstrap_minbase "$NEW" "$SUITE" "$MIRROR"

# What Debian's slim images leave out (their /etc/dpkg/dpkg.cfg.d/docker): dpkg skips these
# paths from now on, and those of the packages debootstrap installed are deleted below. Each
# package's copyright file stays.
cat >"$NEW/etc/dpkg/dpkg.cfg.d/clusterset-slim" <<'EOF'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
EOF

installed() { in_root "$NEW" dpkg-query -W -f '${db:Status-Abbrev} ${Package}\n' | awk '$1 == "ii" { print $2 }' | sort; }
install_packages "$NEW" "${PACKAGES[@]}"
before=$(installed)
install_packages "$NEW" "${GATEWAY_PACKAGES[@]}"
gateway_only=$(comm -13 <(printf '%s\n' "$before") <(installed) | paste -sd' ')
[ -n "$gateway_only" ] || fail "installing ${GATEWAY_PACKAGES[*]} added no package: were they already in PACKAGES?"

say "the user nonroot ($USER_ID), and what slim images leave out"
in_root "$NEW" groupadd --gid "$USER_ID" nonroot
# Its home is not written at run time (the root file system is read-only); it exists because
# some programs look it up. 65532 is above login.defs' UID_MAX (60000), hence -K.
in_root "$NEW" useradd --uid "$USER_ID" --gid "$USER_ID" --home-dir /home/nonroot --create-home \
  --shell /usr/sbin/nologin -K UID_MAX="$USER_ID" -K GID_MAX="$USER_ID" nonroot
find "$NEW/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
find "$NEW/usr/share/doc" -mindepth 1 -type d -empty -delete
rm -rf "$NEW"/usr/share/{man,groff,info,lintian,linda,locale}/*
# Nothing of the build or of this host stays: apt's lists and logs, the host's name and name
# server (a container runtime provides both).
rm -rf "$NEW"/var/lib/apt/lists/* "$NEW"/var/cache/apt/*.bin "$NEW"/var/log/apt/* \
  "$NEW"/var/log/{dpkg.log,alternatives.log,bootstrap.log} "$NEW"/var/cache/debconf/*-old \
  "$NEW/usr/sbin/policy-rc.d" "$NEW/etc/hostname"
: >"$NEW/etc/resolv.conf"

ceph_version=$(in_root "$NEW" dpkg-query -W -f '${Version}' ceph-common)
nft_version=$(in_root "$NEW" dpkg-query -W -f '${Version}' nftables)
ip_version=$(in_root "$NEW" dpkg-query -W -f '${Version}' iproute2)
printf 'recipe=%s\nsuite=%s\nceph=%s\nnftables=%s\niproute2=%s\ngateway-only=%s\nbuilt=%s\n' \
  "$recipe" "$SUITE" "$ceph_version" "$nft_version" "$ip_version" "$gateway_only" "$(date +%s)" \
  >"$NEW/$STAMP"

swap_in "$NEW" "$ROOT"
say "built $ROOT: Ceph $ceph_version, nftables $nft_version, iproute2 $ip_version ($(du -sh "$ROOT" | cut -f1))"

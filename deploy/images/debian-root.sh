#!/usr/bin/env bash
# Builds, or reuses when it is current, the Debian root filesystem that the container images of
# deploy/images/build.sh are made from (docs/images.md): Debian trixie minbase with ca-certificates
# and ceph-common (Ceph 18.2 "Reef": the `ceph` CLI that the operator's mon migration runs; the
# operator requires Ceph >= 17.2.6, and bookworm has only 16.2), docs, man pages and locales left
# out as Debian's slim images do, and the non-root user `nonroot` (65532).
#
#   sudo bash deploy/images/debian-root.sh           # builds /var/cache/clusterset/image-root
#   CLUSTERSET_IMAGE_ROOT=/srv/image-root sudo -E bash deploy/images/debian-root.sh
#
# The operator's image is this root plus the binary; the agent's takes only the files of the few
# packages its binary needs from it. The root is reused when it was built by this same recipe
# and `apt-get` finds nothing newer for it; otherwise it is built again beside the old one and
# swapped in, so a failed build never leaves a half-made root behind (as
# tests/lab/ceph-reef-root.sh does for the lab's root).
set -euo pipefail

ROOT=${CLUSTERSET_IMAGE_ROOT:-/var/cache/clusterset/image-root}
MIRROR=${CLUSTERSET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
# Installed on top of minbase, without recommends. deploy/mcs-ceph-operator/Dockerfile installs
# the same on debian:trixie-slim (tests/images checks that the two agree).
PACKAGES=(ca-certificates ceph-common)
# The images' user: numeric, so that Kubernetes' runAsNonRoot can verify it (distroless's
# `nonroot`); the same as the Deployments' runAsUser.
USER_ID=65532
# The marker of a finished build: the recipe (this file), the suite, the Ceph version installed
# and when the root was built (the epoch the images' base layer is stamped with).
STAMP=.clusterset-image-root

say() { printf '==> %s\n' "$*"; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "building a root filesystem needs root; try: sudo bash $0"
command -v debootstrap >/dev/null || fail "debootstrap is missing; install it: apt-get install debootstrap"

# The root is deleted and replaced when it is out of date: refuse anything that is not plainly a
# directory of its own (the file system root, a relative path, one that holds something else).
case "$ROOT" in
  /*) ;;
  *) fail "CLUSTERSET_IMAGE_ROOT must be an absolute path, not '$ROOT'" ;;
esac
ROOT=$(realpath -m "$ROOT")
[ "$ROOT" != / ] && [ "$(dirname "$ROOT")" != / ] \
  || fail "CLUSTERSET_IMAGE_ROOT=$ROOT is too close to / to be replaced; choose a directory of its own, e.g. /var/cache/clusterset/image-root"
if [ -d "$ROOT" ] && [ ! -f "$ROOT/$STAMP" ] && [ -n "$(ls -A "$ROOT")" ]; then
  fail "$ROOT is not empty and has no $STAMP: it is not a root this script built, and it will not replace it; remove it yourself or choose another CLUSTERSET_IMAGE_ROOT"
fi

recipe=$(sha256sum "${BASH_SOURCE[0]}" | cut -c1-16)

# Nothing of the host may stay mounted inside a root that is about to be deleted.
unmount_under() {
  local dir=$1 target
  while read -r target; do
    [ -n "$target" ] && umount -l "$target"
  done < <(findmnt -rn -o TARGET | awk -v d="$dir/" 'index($0, d) == 1' | sort -r)
}

in_root() { chroot "$1" env DEBIAN_FRONTEND=noninteractive LC_ALL=C "${@:2}"; }

is_current() {
  [ -f "$ROOT/$STAMP" ] || return 1
  grep -qx "recipe=$recipe" "$ROOT/$STAMP" || { say "$ROOT was built by another recipe"; return 1; }
  cp /etc/resolv.conf "$ROOT/etc/resolv.conf"
  in_root "$ROOT" apt-get update -q >/dev/null || { say "apt-get update failed inside $ROOT"; return 1; }
  local upgrades
  upgrades=$(in_root "$ROOT" apt-get -s dist-upgrade | grep -c '^Inst ' || true)
  # What apt-get update fetched is not part of the images (build.sh leaves it out too).
  rm -rf "$ROOT"/var/lib/apt/lists/* "$ROOT"/var/cache/apt/*.bin
  : >"$ROOT/etc/resolv.conf"
  if [ "$upgrades" -ne 0 ]; then
    say "$ROOT: $upgrades package(s) have newer versions"
    return 1
  fi
}

if is_current; then
  say "reusing $ROOT ($(grep '^ceph=' "$ROOT/$STAMP"))"
  exit 0
fi

NEW="$ROOT.new"
unmount_under "$NEW"
rm -rf --one-file-system "$NEW"
mkdir -p "$(dirname "$ROOT")"

say "debootstrap --variant=minbase $SUITE $NEW $MIRROR"
debootstrap --variant=minbase "$SUITE" "$NEW" "$MIRROR" >"$NEW.debootstrap.log" 2>&1 \
  || { tail -20 "$NEW.debootstrap.log" >&2; fail "debootstrap failed (log: $NEW.debootstrap.log)"; }
rm -f "$NEW.debootstrap.log"

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

# No daemon starts while packages install.
printf '#!/bin/sh\nexit 101\n' >"$NEW/usr/sbin/policy-rc.d"
chmod 755 "$NEW/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$NEW/etc/resolv.conf"

say "apt-get install ${PACKAGES[*]} (inside the root)"
in_root "$NEW" apt-get update -q >/dev/null
in_root "$NEW" apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >"$NEW.apt.log" 2>&1 \
  || { tail -30 "$NEW.apt.log" >&2; fail "apt-get install failed inside $NEW (log: $NEW.apt.log)"; }
rm -f "$NEW.apt.log"
in_root "$NEW" apt-get clean

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
printf 'recipe=%s\nsuite=%s\nceph=%s\nbuilt=%s\n' "$recipe" "$SUITE" "$ceph_version" "$(date +%s)" \
  >"$NEW/$STAMP"

unmount_under "$ROOT"
rm -rf --one-file-system "$ROOT"
mv "$NEW" "$ROOT"
say "built $ROOT: Ceph $ceph_version ($(du -sh "$ROOT" | cut -f1))"

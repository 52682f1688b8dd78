#!/usr/bin/env bash
# Builds, or reuses when it is current, the Debian trixie root filesystem with Ceph 18 (Reef)
# that the lab runs its Ceph daemons from (docs/lab.md, "Ceph Reef from a root filesystem").
#
#   sudo bash tests/lab/ceph-reef-root.sh            # builds /var/cache/clusterset/ceph-reef
#   CLUSTERSET_CEPH_ROOT=/srv/reef sudo -E bash tests/lab/ceph-reef-root.sh
#
# Debian bookworm ships Ceph 16.2.15, whose OSDs cannot bind a pod IP while advertising a global
# IP (they ignore public_bind_addr); Reef can. The root filesystem is reused when it was built by
# this same recipe and `apt-get` finds nothing newer for it; otherwise it is built again beside
# the old one and swapped in, so a failed build never leaves a half-made root behind.
set -euo pipefail

ROOT=${CLUSTERSET_CEPH_ROOT:-/var/cache/clusterset/ceph-reef}
MIRROR=${CLUSTERSET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
PACKAGES=(ceph-mon ceph-osd ceph-mgr rbd-mirror ceph-common)
# The marker of a finished build: the recipe (this file) and the Ceph version installed.
STAMP=.clusterset-ceph-root

say() { printf '==> %s\n' "$*"; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

[ "$(id -u)" -eq 0 ] || fail "building a root filesystem needs root; try: sudo bash $0"
command -v debootstrap >/dev/null || fail "debootstrap is missing; install it: apt-get install debootstrap"

# The root is deleted and replaced when it is out of date: refuse anything that is not plainly a
# directory of its own (the file system root, a relative path, one that holds something else).
case "$ROOT" in
  /*) ;;
  *) fail "CLUSTERSET_CEPH_ROOT must be an absolute path, not '$ROOT'" ;;
esac
ROOT=$(realpath -m "$ROOT")
[ "$ROOT" != / ] && [ "$(dirname "$ROOT")" != / ] \
  || fail "CLUSTERSET_CEPH_ROOT=$ROOT is too close to / to be replaced; choose a directory of its own, e.g. /var/cache/clusterset/ceph-reef"
if [ -d "$ROOT" ] && [ ! -f "$ROOT/$STAMP" ] && [ -n "$(ls -A "$ROOT")" ]; then
  fail "$ROOT is not empty and has no $STAMP: it is not a root this script built, and it will not replace it; remove it yourself or choose another CLUSTERSET_CEPH_ROOT"
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

# No daemon starts while packages install (the lab starts its own).
printf '#!/bin/sh\nexit 101\n' >"$NEW/usr/sbin/policy-rc.d"
chmod 755 "$NEW/usr/sbin/policy-rc.d"
cp /etc/resolv.conf "$NEW/etc/resolv.conf"

say "apt-get install ${PACKAGES[*]} (inside the root)"
in_root "$NEW" apt-get update -q >/dev/null
in_root "$NEW" apt-get install -y -q --no-install-recommends "${PACKAGES[@]}" >"$NEW.apt.log" 2>&1 \
  || { tail -30 "$NEW.apt.log" >&2; fail "apt-get install failed inside $NEW (log: $NEW.apt.log)"; }
rm -f "$NEW.apt.log"
in_root "$NEW" apt-get clean

# Reef 18.2.7's mgr imports python3-bcrypt at the top of mgr_util.py; bcrypt is a PyO3 module,
# which refuses the mgr's sub-interpreters ("PyO3 modules do not yet support subinterpreters"),
# so every module that imports mgr_util (rbd_support among them) fails to load. Only the
# dashboard's password hashing uses bcrypt: the import is replaced by a stand-in that imports
# bcrypt on first use, wherever that use is.
MGR_UTIL="$NEW/usr/share/ceph/mgr/mgr_util.py"
if grep -q '^import bcrypt$' "$MGR_UTIL"; then
  # The root's own python3: the host may have none.
  in_root "$NEW" python3 - /usr/share/ceph/mgr/mgr_util.py <<'EOF'
import sys
path = sys.argv[1]
text = open(path).read()
lazy = """class _BcryptOnFirstUse:  # clusterset lab: bcrypt (PyO3) cannot load in mgr sub-interpreters
    def __getattr__(self, name):
        import bcrypt
        return getattr(bcrypt, name)


bcrypt = _BcryptOnFirstUse()
"""
if text.count("\nimport bcrypt\n") != 1:
    sys.exit("mgr_util.py: expected one top-level `import bcrypt`; the patch needs a look")
open(path, "w").write(text.replace("\nimport bcrypt\n", "\n" + lazy, 1))
EOF
  in_root "$NEW" python3 -c 'import ast; ast.parse(open("/usr/share/ceph/mgr/mgr_util.py").read())' \
    || fail "the patched mgr_util.py does not parse"
fi

ceph_version=$(in_root "$NEW" dpkg-query -W -f '${Version}' ceph-mon)
printf 'recipe=%s\nceph=%s\nsuite=%s\n' "$recipe" "$ceph_version" "$SUITE" >"$NEW/$STAMP"

unmount_under "$ROOT"
rm -rf --one-file-system "$ROOT"
mv "$NEW" "$ROOT"
say "built $ROOT: Ceph $ceph_version ($(du -sh "$ROOT" | cut -f1))"

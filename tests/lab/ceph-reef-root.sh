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
# the old one and swapped in, so a failed build never leaves a half-made root behind
# (deploy/images/debian-root-lib.sh, shared with the container images' root).
set -euo pipefail

# shellcheck source=../../deploy/images/debian-root-lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/../../deploy/images/debian-root-lib.sh"

MIRROR=${CLUSTERSET_DEBIAN_MIRROR:-http://deb.debian.org/debian}
SUITE=trixie
PACKAGES=(ceph-mon ceph-osd ceph-mgr rbd-mirror ceph-common)
# The marker of a finished build: the recipe (this file and the library) and the Ceph version.
STAMP=.clusterset-ceph-root

need_root_and_debootstrap
ROOT=$(checked_root CLUSTERSET_CEPH_ROOT "${CLUSTERSET_CEPH_ROOT:-/var/cache/clusterset/ceph-reef}" \
  "$STAMP" /var/cache/clusterset/ceph-reef)
recipe=$(recipe_of "${BASH_SOURCE[0]}" "$(dirname "${BASH_SOURCE[0]}")/../../deploy/images/debian-root-lib.sh")

if is_current "$ROOT" "$STAMP" "$recipe"; then
  say "reusing $ROOT ($(grep '^ceph=' "$ROOT/$STAMP"))"
  exit 0
fi

NEW="$ROOT.new"
bootstrap_minbase "$NEW" "$SUITE" "$MIRROR"
# No daemon starts while packages install (the lab starts its own).
install_packages "$NEW" "${PACKAGES[@]}"

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

swap_in "$NEW" "$ROOT"
say "built $ROOT: Ceph $ceph_version ($(du -sh "$ROOT" | cut -f1))"

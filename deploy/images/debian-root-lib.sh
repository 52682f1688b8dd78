# What the two Debian root filesystems of this repository share (sourced, it only defines
# functions): deploy/images/debian-root.sh (the container images' base) and
# tests/lab/ceph-reef-root.sh (the lab's Ceph Reef). Each root is reused while it was built by
# the same recipe and `apt-get` finds nothing newer for it; otherwise it is built again beside the
# old one and swapped in, so a failed build never leaves a half-made root behind.

say() { printf '==> %s\n' "$*"; }
fail() { printf 'error: %s\n' "$*" >&2; exit 1; }

# Building a root needs root and debootstrap.
need_root_and_debootstrap() {
  [ "$(id -u)" -eq 0 ] || fail "building a root filesystem needs root; try: sudo bash $0"
  command -v debootstrap >/dev/null || fail "debootstrap is missing; install it: apt-get install debootstrap"
}

# checked_root VARIABLE PATH STAMP EXAMPLE: PATH made absolute and real, if it is plainly a
# directory of its own that this recipe may delete and replace: not the file system root or
# just below it, not a relative path, not one that holds something this recipe did not build
# (no STAMP). Use as ROOT=$(checked_root ...): a refusal ends the script.
checked_root() {
  local variable=$1 root=$2 stamp=$3 example=$4
  case "$root" in
    /*) ;;
    *) fail "$variable must be an absolute path, not '$root'" ;;
  esac
  root=$(realpath -m "$root")
  [ "$root" != / ] && [ "$(dirname "$root")" != / ] \
    || fail "$variable=$root is too close to / to be replaced; choose a directory of its own, e.g. $example"
  if [ -d "$root" ] && [ ! -f "$root/$stamp" ] && [ -n "$(ls -A "$root")" ]; then
    fail "$root is not empty and has no $stamp: it is not a root this script built, and it will not replace it; remove it yourself or choose another $variable"
  fi
  printf '%s\n' "$root"
}

# recipe_of FILE...: the recipe's fingerprint (its scripts, this library among them).
recipe_of() { cat "$@" | sha256sum | cut -c1-16; }

# Nothing of the host may stay mounted inside a root that is about to be deleted.
unmount_under() {
  local dir=$1 target
  while read -r target; do
    [ -n "$target" ] && umount -l "$target"
  done < <(findmnt -rn -o TARGET | awk -v d="$dir/" 'index($0, d) == 1' | sort -r)
}

# in_root ROOT COMMAND...: COMMAND inside ROOT, non-interactive.
in_root() { chroot "$1" env DEBIAN_FRONTEND=noninteractive LC_ALL=C "${@:2}"; }

# is_current ROOT STAMP RECIPE [CLEANUP...]: whether ROOT was finished by RECIPE and has no
# newer packages; CLEANUP (a command and its arguments) runs after apt-get has looked.
is_current() {
  local root=$1 stamp=$2 recipe=$3 upgrades
  shift 3
  [ -f "$root/$stamp" ] || return 1
  grep -qx "recipe=$recipe" "$root/$stamp" || { say "$root was built by another recipe"; return 1; }
  cp /etc/resolv.conf "$root/etc/resolv.conf"
  in_root "$root" apt-get update -q >/dev/null || { say "apt-get update failed inside $root"; return 1; }
  upgrades=$(in_root "$root" apt-get -s dist-upgrade | grep -c '^Inst ' || true)
  if [ $# -gt 0 ]; then "$@"; fi
  if [ "$upgrades" -ne 0 ]; then
    say "$root: $upgrades package(s) have newer versions"
    return 1
  fi
}

# bootstrap_minbase NEW SUITE MIRROR: a fresh minbase root at NEW (whatever was there goes).
bootstrap_minbase() {
  local new=$1 suite=$2 mirror=$3
  unmount_under "$new"
  rm -rf --one-file-system "$new"
  mkdir -p "$(dirname "$new")"
  say "debootstrap --variant=minbase $suite $new $mirror"
  debootstrap --variant=minbase "$suite" "$new" "$mirror" >"$new.debootstrap.log" 2>&1 \
    || { tail -20 "$new.debootstrap.log" >&2; fail "debootstrap failed (log: $new.debootstrap.log)"; }
  rm -f "$new.debootstrap.log"
}

# install_packages NEW PACKAGE...: the packages, without recommends, with no daemon started
# (policy-rc.d stays: the caller removes it if its root must not have it).
install_packages() {
  local new=$1
  shift
  printf '#!/bin/sh\nexit 101\n' >"$new/usr/sbin/policy-rc.d"
  chmod 755 "$new/usr/sbin/policy-rc.d"
  cp /etc/resolv.conf "$new/etc/resolv.conf"
  say "apt-get install $* (inside the root)"
  in_root "$new" apt-get update -q >/dev/null
  in_root "$new" apt-get install -y -q --no-install-recommends "$@" >"$new.apt.log" 2>&1 \
    || { tail -30 "$new.apt.log" >&2; fail "apt-get install failed inside $new (log: $new.apt.log)"; }
  rm -f "$new.apt.log"
  in_root "$new" apt-get clean
}

# swap_in NEW ROOT: the finished NEW replaces ROOT.
swap_in() {
  local new=$1 root=$2
  unmount_under "$root"
  rm -rf --one-file-system "$root"
  mv "$new" "$root"
}

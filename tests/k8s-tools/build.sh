#!/usr/bin/env bash
# Builds, or reuses when current, the Kubernetes test tools pinned by the Go modules beside this
# script (docs/e2e.md, "The tools"):
#
#   k8s-1.35/, k8s-1.37/   kube-apiserver, kube-controller-manager, kube-scheduler of each release
#   etcd/                  etcd 3.6
#   kwok/                  kwok (the nodes of the e2e suite's own clusters)
#   helm/                  helm 4 (the charts' lint, template and install)
#   mcs-conformance/       the upstream MCS conformance suite's test binary
#
#   bash tests/k8s-tools/build.sh            # builds into /var/cache/clusterset/k8s-tools/<module>/bin
#   bash tests/k8s-tools/build.sh --check    # exit 1, naming what is missing or stale, if any is
#   bash tests/k8s-tools/build.sh helm etcd  # only these modules (also with --check)
#   CLUSTERSET_K8S_TOOLS=/srv/k8s-tools bash tests/k8s-tools/build.sh
#
# Each module's binaries are reused while they were built from the same go.mod and go.sum, by
# this same script and the same Go; otherwise they are built again beside the old ones and
# swapped in, so a failed build never leaves half a tool set behind. Everything comes from the Go
# module proxy (GOPROXY as the machine sets it); nothing is downloaded from anywhere else.
# Cold, the six modules take about 20 minutes on 2 cores and 11 GiB of disk (8 GiB of it Go's
# build cache, which makes the next build of a changed module take a minute or two).
set -euo pipefail

HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
CACHE=${CLUSTERSET_K8S_TOOLS:-/var/cache/clusterset/k8s-tools}
STAMP=.clusterset-k8s-tools
MODULES=(etcd kwok helm mcs-conformance k8s-1.35 k8s-1.37)
MIN_FREE_GIB=12

say() { printf 'k8s-tools: %s\n' "$*"; }
fail() { printf 'k8s-tools: error: %s\n' "$*" >&2; exit 1; }

check_only=false
selected=()
for argument in "$@"; do
  case "$argument" in
    --check) check_only=true ;;
    -*) fail "unknown option '$argument': run it with no argument to build every module, with module names (${MODULES[*]}) to build those, or with --check to see whether they are current" ;;
    *)
      [ -f "$HERE/$argument/go.mod" ] ||
        fail "no module '$argument' here: the modules are ${MODULES[*]}"
      selected+=("$argument")
      ;;
  esac
done
if [ ${#selected[@]} -gt 0 ]; then MODULES=("${selected[@]}"); fi

command -v go >/dev/null 2>&1 ||
  fail "no 'go' command on PATH: the tools are Go modules; install Go 1.26 or newer (the machines have it in /usr/local/go/bin), or set GOTOOLCHAIN to a release the module proxy serves"
go_version=$(go env GOVERSION)

# The newest Go any module asks for (its `go` line); an older go command would try to download a
# toolchain, which fails here with a message that does not say why.
version_at_least() { [ "$(printf '%s\n%s\n' "$2" "$1" | sort -V | head -1)" = "$2" ]; }
for module in "${MODULES[@]}"; do
  wanted=$(awk '$1 == "go" { print $2; exit }' "$HERE/$module/go.mod")
  if ! version_at_least "${go_version#go}" "$wanted"; then
    fail "$module needs Go $wanted and this go command is $go_version: install a newer Go, or export GOTOOLCHAIN=go$wanted (the go command then takes that release from the module proxy)"
  fi
done

# The version a module pins of `path`, for the version stamps the binaries report.
pinned() { (cd "$HERE/$1" && go list -m -f '{{.Version}}' "$2"); }

build_module() {
  local module=$1 out="$CACHE/$1" new="$CACHE/$1.new" ldflags="-s -w"
  case "$module" in
    k8s-*)
      local version minor
      version=$(pinned "$module" k8s.io/kubernetes)
      minor=$(echo "$version" | cut -d. -f2)
      # What the release scripts stamp: /version reports the release, and the components'
      # version checks see a real one.
      ldflags+=" -X k8s.io/component-base/version.gitVersion=$version -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor -X k8s.io/component-base/version.gitTreeState=clean"
      ldflags+=" -X k8s.io/client-go/pkg/version.gitVersion=$version -X k8s.io/client-go/pkg/version.gitMajor=1 -X k8s.io/client-go/pkg/version.gitMinor=$minor"
      ;;
    helm)
      ldflags+=" -X helm.sh/helm/v4/internal/version.version=$(pinned helm helm.sh/helm/v4)"
      ;;
    kwok)
      local kwok_version
      kwok_version=$(pinned kwok sigs.k8s.io/kwok)
      ldflags+=" -X sigs.k8s.io/kwok/pkg/consts.Version=${kwok_version#v}"
      ;;
  esac
  rm -rf "$new"
  mkdir -p "$new/bin"
  if [ "$module" = mcs-conformance ]; then
    # A suite of Go tests: its test binary, run by the e2e tests with ginkgo's flags.
    (cd "$HERE/$module" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go test -c -trimpath -ldflags "$ldflags" -o "$new/bin/mcs-conformance.test" sigs.k8s.io/mcs-api/conformance)
  else
    # `tool`: every package of the module's tool directives.
    (cd "$HERE/$module" && CGO_ENABLED=0 GOFLAGS=-mod=readonly go build -trimpath -ldflags "$ldflags" -o "$new/bin/" tool)
  fi
  case "$module" in
    # A module path that ends in a major version names its binary after the element before it.
    etcd) mv "$new/bin/server" "$new/bin/etcd" ;;
    # kwok runs no stage it is not given: the ones kwokctl gives it, from the module itself
    # (nodes initialized and kept Ready with Leases; pods Ready with IPs, completed, deleted).
    kwok)
      local dir
      dir=$(cd "$HERE/kwok" && go list -m -f '{{.Dir}}' sigs.k8s.io/kwok)
      for stage in node/fast/node-initialize node/heartbeat-with-lease/node-heartbeat-with-lease \
        pod/fast/pod-ready pod/fast/pod-complete pod/fast/pod-delete; do
        printf -- '---\n'
        cat "$dir/kustomize/stage/$stage.yaml"
      done > "$new/stages.yaml"
      ;;
  esac
  stamp_line "$module" > "$new/$STAMP"
  rm -rf "$out.old"
  if [ -d "$out" ]; then mv "$out" "$out.old"; fi
  mv "$new" "$out"
  rm -rf "$out.old"
}

# The key of a module's build: what it pins and how it is built (the function below, not the
# rest of this script); the stamp line adds which Go built it.
key_of() {
  { cat "$HERE/$1/go.mod" "$HERE/$1/go.sum"; declare -f build_module; } | sha256sum | cut -c1-16
}
stamp_line() { echo "key=$(key_of "$1") go=$go_version"; }
is_current() { [ -f "$CACHE/$1/$STAMP" ] && grep -qxF "$(stamp_line "$1")" "$CACHE/$1/$STAMP"; }

if $check_only; then
  stale=()
  for module in "${MODULES[@]}"; do
    is_current "$module" || stale+=("$module")
  done
  if [ ${#stale[@]} -gt 0 ]; then
    fail "missing or stale in $CACHE: ${stale[*]}; build them with: bash tests/k8s-tools/build.sh ${selected[*]}"
  fi
  say "current in $CACHE: ${MODULES[*]}"
  exit 0
fi

mkdir -p "$CACHE"
free_mib() { df --output=avail -BM "$1" 2>/dev/null | tail -1 | tr -dc '0-9'; }
gocache_dir=$(dirname "$(go env GOCACHE)")
mkdir -p "$gocache_dir"
for module in "${MODULES[@]}"; do
  if ! is_current "$module"; then
    cache_free=$(free_mib "$CACHE") go_free=$(free_mib "$gocache_dir")
    if [ "$cache_free" -lt $((MIN_FREE_GIB * 1024)) ] || [ "$go_free" -lt $((MIN_FREE_GIB * 1024)) ]; then
      fail "only ${cache_free} MiB free for $CACHE and ${go_free} MiB for Go's build cache ($(go env GOCACHE)); building the tools needs ${MIN_FREE_GIB} GiB: free disk (go clean -cache, cargo clean in other checkouts) and run again"
    fi
    break
  fi
done

all_started=$(date +%s)
for module in "${MODULES[@]}"; do
  if is_current "$module"; then
    say "reusing $CACHE/$module ($(cd "$CACHE/$module/bin" && echo *))"
    continue
  fi
  started=$(date +%s)
  say "building $module with $go_version ..."
  build_module "$module"
  say "built $CACHE/$module/bin: $(cd "$CACHE/$module/bin" && echo *) in $(( $(date +%s) - started )) s"
done
say "done in $(( $(date +%s) - all_started )) s"

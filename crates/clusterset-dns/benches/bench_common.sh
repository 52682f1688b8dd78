# Shared by dnsperf.sh and cpu_sharers.sh (sourced, from the repository root): the check for
# the tools a script needs, the server and the latency harness built once, the synthetic zone and its query file, and the wait for a
# server to answer.

ZONE=clusterset.local
BENCH_SERVER=target/release/examples/bench_server
LATENCY=target/release/examples/dns_latency

# Stops with the install command unless every tool named after it is on the PATH.
require_tools() { # "packages to install" tool...
  local packages=$1 tool; shift
  for tool in "$@"; do
    command -v "$tool" >/dev/null || { echo "error: $tool is missing: apt-get install $packages" >&2; exit 1; }
  done
}

build_bench_tools() {
  cargo build --release --quiet -p clusterset-dns --example bench_server --example dns_latency
}

# The zone of $1 services as a master file ($2/zone.db, for the peer servers) and an A query
# for every service name, the lookup clusterset clients make ($2/queries.txt).
zone_and_queries() { # services work-dir
  "$BENCH_SERVER" --services "$1" --listen 127.0.0.1:15353 --print-zone >"$2/zone.db"
  grep -E "^svc-[0-9]+\.bench\.svc\.$ZONE\. .* IN A " "$2/zone.db" | awk '{print $1, "A"}' >"$2/queries.txt"
}

# Waits (up to about 10 s) until the server on 127.0.0.1:$1 answers svc-0's A query with an
# address. dig prints its own errors ("connection refused") on standard output too, so only an
# address counts: before this check, a server still starting passed at once.
wait_for() { # port
  local answer
  for _ in $(seq 1 100); do
    answer=$(dig +short +time=1 +tries=1 @127.0.0.1 -p "$1" "svc-0.bench.svc.$ZONE" A 2>/dev/null) || answer=
    if [[ $answer =~ ^[0-9]+\.[0-9]+\.[0-9]+\.[0-9]+$ ]]; then
      return 0
    fi
    sleep 0.1
  done
  echo "error: nothing answers on port $1" >&2
  return 1
}

#!/usr/bin/env bash
# Which threads share the DNS server's core while it answers at a fixed rate, and for how long
# each of them holds it: a thread that runs for milliseconds on the server's core delays every
# query that arrives meanwhile, whatever the server does, and sets the tail latency.
#
#   bash crates/clusterset-dns/benches/cpu_sharers.sh      (from the repository root, as root)
#
# Our server (examples/bench_server.rs, 1,000 services) on SERVER_CPU (default 1), the open-loop
# harness (examples/dns_latency.rs) on CLIENT_CPU (default 0) at RATE queries/s (default 65000)
# for DURATION seconds (default 10), while `perf record -e sched:sched_switch` traces
# SERVER_CPU. Prints the harness's percentiles and, per thread that ran on SERVER_CPU, its time
# there, its longest uninterrupted run and its number of runs (the idle task is left out).
# PRIORITY=realtime runs the server at real-time priority (`chrt -f 1`). Needs: perf, dig.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."

SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
RATE=${RATE:-65000}
DURATION=${DURATION:-10}
PRIORITY=${PRIORITY:-normal}
PORT=15353

# shellcheck source=crates/clusterset-dns/benches/bench_common.sh
source crates/clusterset-dns/benches/bench_common.sh
require_tools "linux-perf bind9-dnsutils util-linux" perf dig taskset chrt

WORK=$(mktemp -d /tmp/clusterset-dns-sharers.XXXXXX)
SERVER=
cleanup() {
  # The server dies of the kill (status 143): under `set -e` that status would end the trap
  # before the work directory is removed and become the script's.
  if [[ -n $SERVER ]]; then
    kill "$SERVER" 2>/dev/null || true
    wait "$SERVER" 2>/dev/null || true
  fi
  rm -rf "$WORK"
}
trap cleanup EXIT

build_bench_tools
zone_and_queries 1000 "$WORK"

case $PRIORITY in
  normal) AT_PRIORITY=() ;;
  realtime) AT_PRIORITY=(chrt -f 1) ;;
  *) echo "error: PRIORITY=$PRIORITY: use normal or realtime" >&2; exit 2 ;;
esac
"${AT_PRIORITY[@]}" taskset -c "$SERVER_CPU" "$BENCH_SERVER" --services 1000 --listen 127.0.0.1:$PORT \
  --workers 1 >"$WORK/server.out" 2>&1 &
SERVER=$!
wait_for $PORT
# Warm-up: every service's answers are computed on its first query.
taskset -c "$CLIENT_CPU" "$LATENCY" --server 127.0.0.1:$PORT \
  --queries "$WORK/queries.txt" --rate "$RATE" --duration 2 >/dev/null

perf record -q -o "$WORK/sched.data" -e sched:sched_switch -C "$SERVER_CPU" -- \
  taskset -c "$CLIENT_CPU" "$LATENCY" --server 127.0.0.1:$PORT \
  --queries "$WORK/queries.txt" --rate "$RATE" --duration "$DURATION" 2>/dev/null
echo "server at $PRIORITY priority on CPU $SERVER_CPU, harness on CPU $CLIENT_CPU at $RATE queries/s"
printf '%-36s %10s %12s %8s\n' "thread on CPU $SERVER_CPU" "total ms" "longest ms" "runs"
perf script -i "$WORK/sched.data" -F time,trace 2>/dev/null | awk '
  {
    for (i = 1; i <= NF; i++) {
      if ($i ~ /^next_comm=/) { next_comm = substr($i, 11); while ($(i + 1) !~ /^next_pid=/ && i < NF) { i++; next_comm = next_comm " " $i } }
      if ($i ~ /^next_pid=/) next_pid = substr($i, 10)
    }
    t = $1 + 0
    if (current != "") { d = t - since; total[current] += d; runs[current]++; if (d > longest[current]) longest[current] = d }
    current = next_comm "/" next_pid; since = t
  }
  END {
    for (k in total) if (k !~ /^swapper/) printf "%-36s %10.1f %12.2f %8d\n", k, total[k] * 1e3, longest[k] * 1e3, runs[k]
  }' | sort -k3,3 -rn | head -n 12

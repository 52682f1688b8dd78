#!/usr/bin/env bash
# dnsperf benchmark of the clusterset DNS server against Knot DNS, NSD and unbound serving the
# same records, each pinned to the same single core, dnsperf pinned to the other one.
#
#   bash crates/clusterset-dns/benches/dnsperf.sh            (from the repository root, as root)
#
# Environment: SERVICES (zone size, default 1000), DURATION (seconds per run, default 10),
# SERVER_CPU (default 1), CLIENT_CPU (default 0), CLIENTS (dnsperf -c, default 16),
# CHURN_SERVICES (default 10000). Needs: dnsperf knot nsd unbound bind9-dnsutils (Debian packages).
#
# For each server: peak queries/s (dnsperf, unlimited), then latency at half that peak
# (examples/dns_latency.rs: open loop at a fixed rate, percentiles from every answer), once at
# the normal priority and once with every thread of the server at real-time priority
# (`chrt -f 1`, the same for every server), and for ours also under churn: a batch that changes
# all CHURN_SERVICES services every second while the harness runs at half load.
#
# Why the real-time measurement: on this VM two other threads share the server's core, the
# kernel's DAMON thread (kdamond) and the VM agent, and run for up to ~6 ms at a time; at the
# normal priority a query that arrives then waits for them, which sets every server's p99
# (`bash crates/clusterset-dns/benches/cpu_sharers.sh` shows them). At real-time priority the
# server preempts them, and the percentiles measure the server.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/../../.."

SERVICES=${SERVICES:-1000}
DURATION=${DURATION:-10}
SERVER_CPU=${SERVER_CPU:-1}
CLIENT_CPU=${CLIENT_CPU:-0}
CLIENTS=${CLIENTS:-16}
CHURN_SERVICES=${CHURN_SERVICES:-10000}

# shellcheck source=crates/clusterset-dns/benches/bench_common.sh
source crates/clusterset-dns/benches/bench_common.sh
require_tools "dnsperf knot nsd unbound bind9-dnsutils util-linux" dnsperf knotd nsd unbound dig taskset chrt

WORK=$(mktemp -d /tmp/clusterset-dns-bench.XXXXXX)
PIDS=()
cleanup() {
  for pid in "${PIDS[@]}"; do kill "$pid" 2>/dev/null || true; done
  for pid in "${PIDS[@]}"; do wait "$pid" 2>/dev/null || true; done
  rm -rf "$WORK"
}
trap cleanup EXIT

echo "==> building the server (release)"
build_bench_tools

echo "==> zone of $SERVICES services and the query file"
zone_and_queries "$SERVICES" "$WORK"
echo "    $(wc -l <"$WORK/zone.db") records, $(wc -l <"$WORK/queries.txt") queries"

# --- peers' configurations ---------------------------------------------------------------------
mkdir -p "$WORK/knot" "$WORK/nsd" "$WORK/unbound"
cat >"$WORK/knot/knot.conf" <<CONF
server:
    listen: 127.0.0.1@15354
    rundir: "$WORK/knot"
    udp-workers: 1
    tcp-workers: 1
    background-workers: 1
log:
  - target: stderr
    any: error
database:
    storage: "$WORK/knot"
template:
  - id: default
    storage: "$WORK"
    journal-content: none
    zonefile-sync: -1
zone:
  - domain: $ZONE
    file: "$WORK/zone.db"
CONF

cat >"$WORK/nsd/nsd.conf" <<CONF
server:
    ip-address: 127.0.0.1@15355
    server-count: 1
    tcp-count: 10
    username: ""
    chroot: ""
    zonesdir: "$WORK"
    database: ""
    pidfile: "$WORK/nsd/nsd.pid"
    xfrdfile: "$WORK/nsd/xfrd.state"
    zonelistfile: "$WORK/nsd/zone.list"
    verbosity: 0
    hide-version: yes
remote-control:
    control-enable: no
zone:
    name: $ZONE
    zonefile: zone.db
CONF

{
  cat <<CONF
server:
    interface: 127.0.0.1@15356
    num-threads: 1
    do-daemonize: no
    username: ""
    chroot: ""
    directory: "$WORK/unbound"
    pidfile: "$WORK/unbound/unbound.pid"
    access-control: 127.0.0.0/8 allow
    do-ip6: no
    verbosity: 0
    local-zone: "$ZONE." static
CONF
  grep -v '^\$ORIGIN' "$WORK/zone.db" | grep -v ' IN SOA ' | sed 's/.*/    local-data: "&"/'
  echo "remote-control:"
  echo "    control-enable: no"
} >"$WORK/unbound/unbound.conf"

start() { # name port command...
  local name=$1 port=$2; shift 2
  taskset -c "$SERVER_CPU" "$@" >"$WORK/$name.out" 2>&1 &
  PIDS+=($!)
  wait_for "$port"
}

stop_last() {
  local pid=${PIDS[-1]}
  kill "$pid" 2>/dev/null || true
  wait "$pid" 2>/dev/null || true
  unset 'PIDS[-1]'
}

peak() { # port -> queries per second
  taskset -c "$CLIENT_CPU" dnsperf -s 127.0.0.1 -p "$1" -d "$WORK/queries.txt" -l "$DURATION" \
    -c "$CLIENTS" -q 1000 -t 2 2>&1 | tee "$WORK/peak-$1.txt" | awk '/Queries per second/ {printf "%d", $4}'
}

latency() { # port qps -> "p50 .. p99.9 (ms) lost"
  # dnsperf 2.10 gives per-query latencies only with -v (a printed line per query, which costs
  # the client core at these rates); our open-loop harness keeps them in memory instead. Same
  # harness for every server.
  taskset -c "$CLIENT_CPU" "$LATENCY" --server "127.0.0.1:$1" --queries "$WORK/queries.txt" \
    --rate "$2" --duration "$DURATION" --clients "$CLIENTS" >"$WORK/lat-$1.txt" 2>&1 || true
  awk '{ for (i = 1; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] } }
       END { printf "p50 %.3f ms, p99 %.3f ms, p99.9 %.3f ms (%d answers), lost %d", v["p50_ms"], v["p99_ms"], v["p99.9_ms"], v["answered"], v["lost"] }' "$WORK/lat-$1.txt"
}

# Real-time priority (SCHED_FIFO 1) for the threads of process $1 and of its descendants (NSD
# answers from a forked child) whose name starts with $2 (every thread when $2 is empty).
# Fails when no thread matched: a measurement "at real-time priority" must be one.
realtime() { # pid [thread name prefix]
  RAISED=0
  raise_threads "$@"
  if ((RAISED == 0)); then
    echo "error: process $1 has no thread named ${2:-(any)}* to raise to real-time priority" >&2
    exit 1
  fi
}
raise_threads() { # pid [thread name prefix]
  local task comm child
  for task in /proc/"$1"/task/*; do
    comm=$(cat "$task/comm" 2>/dev/null) || continue
    [[ -z ${2:-} || $comm == "$2"* ]] || continue
    chrt -f -p 1 "${task##*/}" >/dev/null || { echo "error: chrt -f -p 1 ${task##*/} ($comm) failed" >&2; exit 1; }
    RAISED=$((RAISED + 1))
  done
  for child in $(cat /proc/"$1"/task/*/children 2>/dev/null); do
    raise_threads "$child" "${2:-}"
  done
}

declare -A PEAK RESULT RESULT_RT
run_one() { # name port command...
  local name=$1 port=$2
  start "$@"
  peak "$port" >/dev/null # warm-up
  PEAK[$name]=$(peak "$port")
  RESULT[$name]=$(latency "$port" $((PEAK[$name] / 2)))
  realtime "${PIDS[-1]}"
  RESULT_RT[$name]=$(latency "$port" $((PEAK[$name] / 2)))
  stop_last
  printf '    %-22s peak %7d q/s; at %d q/s: %s\n' "$name" "${PEAK[$name]}" $((PEAK[$name] / 2)) "${RESULT[$name]}"
  printf '    %-22s %*s at real-time priority: %s\n' "" 16 "" "${RESULT_RT[$name]}"
}

echo "==> servers on CPU $SERVER_CPU, dnsperf on CPU $CLIENT_CPU, $DURATION s per run, $CLIENTS clients"
run_one clusterset-dns 15353 "$BENCH_SERVER" --services "$SERVICES" --listen 127.0.0.1:15353 --workers 1
run_one knot 15354 knotd -c "$WORK/knot/knot.conf"
run_one nsd 15355 nsd -d -c "$WORK/nsd/nsd.conf"
run_one unbound 15356 unbound -d -c "$WORK/unbound/unbound.conf"

echo "==> ratios (clusterset-dns peak / peer peak)"
for peer in knot nsd unbound; do
  awk -v a="${PEAK[clusterset-dns]}" -v b="${PEAK[$peer]}" -v p="$peer" 'BEGIN { printf "    vs %-8s %.2fx\n", p, a / b }'
done

churn() { # label, normal|realtime (the UDP workers' priority), extra bench_server flags...
  local label=$1; shift
  echo "==> clusterset-dns with $CHURN_SERVICES services, all of them changing every second, at half load ($label)"
  start churn 15353 "$BENCH_SERVER" --services "$CHURN_SERVICES" --listen 127.0.0.1:15353 --workers 1 --churn-ms 1000 "${@:2}"
  if [[ $1 == realtime ]]; then realtime "${PIDS[-1]}" dns-udp; fi
  printf '    while updating: %s\n' "$(latency 15353 "$half")"
  stop_last
  grep '^churn:' "$WORK/churn.out" | sed 's/^/    /' | tail -n 3
  awk '/^churn:/ { t=$NF; if (t ~ /ms$/) { sub(/ms$/, "", t); v=t+0 } else if (t ~ /µs$/) { sub(/µs$/, "", t); v=t/1000 } else { sub(/s$/, "", t); v=t*1000 } sum+=v; n++; if (v>max) max=v }
       END { if (n) printf "    batch apply: mean %.1f ms, max %.1f ms over %d batches\n", sum/n, max, n }' "$WORK/churn.out"
}
half=$((PEAK[clusterset-dns] / 2))
# The writer shares the query thread's core here (everything of ours is pinned to SERVER_CPU):
# once at the same priority, once with the writer and the reaper at nice 19, once with the
# query thread at real-time priority (the writer then runs only when no query waits).
churn "writer at the query thread's priority" normal
churn "writer and reaper at nice 19" normal --writer-nice 19
churn "query thread at real-time priority, writer and reaper at the normal priority" realtime

#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The egress proxy against a direct loopback connection, in one run: bulk
# CONNECT throughput and per-request latency (small requests, each on a new
# connection). Targets: >= 0.9x direct throughput, < 200 us added median.
# Bulk data also goes through the bench's own floor relay (see
# egress-bench.c), which says how much of the gap any TCP relay pays here.
#
# Each measurement runs in a private network namespace with a loopback of
# its own: once with the host's default TCP congestion control, and once
# with cubic (the stock Debian kernel's default) when the host's is another.
# The choice matters: with BBR, a relay's two hops sharing two cores are
# held back by BBR's pacing (docs/egress.md, Cost). The host's own setting
# is never changed. Without the privilege to make a namespace, it measures
# once, on the host's loopback, and says so. What it cannot measure (a host
# that refuses cubic in a namespace, when its
# net.ipv4.tcp_allowed_congestion_control leaves it out) it names and goes
# on; a measurement that fails is reported, the others still run, and the
# exit status is then 1.
#
# Uses the binary named by the argument or $SHINKEN, else the release tree's
# (its own release tree, build/bench-egress). Everything it dials is on
# loopback.
#   sh bench/egress/run.sh [SHINKEN]
#   EGRESS_BENCH_BYTES (default 1 GiB per bulk run), EGRESS_BENCH_REQUESTS (3000)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
bytes=${EGRESS_BENCH_BYTES:-1073741824}
n=${EGRESS_BENCH_REQUESTS:-3000}

# One measurement with the client BENCH (egress-bench.c, compiled), on the
# loopback of the network namespace it runs in; with CONGESTION_CONTROL,
# that namespace is a fresh one of its own.
#   measure SHINKEN BENCH [CONGESTION_CONTROL]
measure() {
  SHINKEN=$1 bench=$2
  if [ -n "${3:-}" ]; then
    ip link set lo up
    if ! why=$(sysctl -qw net.ipv4.tcp_congestion_control="$3" 2>&1); then
      echo "not measured: this host does not let a network namespace use congestion control $3" \
        "(${why:-sysctl failed}; allowed: $(sysctl -n net.ipv4.tcp_allowed_congestion_control 2>/dev/null))"
      return 0
    fi
  fi
  work=$(mktemp -d)
  pid=
  trap 'if [ -n "$pid" ]; then kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; fi; rm -rf "$work"' EXIT
  trap 'exit 1' INT TERM
  # The bench host is pinned to loopback and opted in, so the proxy's own
  # checks run in full on every connection.
  cat >"$work/proxy.json" <<JSON
{ "listen": { "http": "127.0.0.1:0" },
  "domains": { "bench.test": "allow" },
  "allow_private_cidrs": [ "127.0.0.1/32" ],
  "hosts": { "bench.test": [ "127.0.0.1" ] },
  "audit": "$work/audit.log" }
JSON
  "$SHINKEN" proxy --config "$work/proxy.json" >"$work/out" 2>"$work/err" &
  pid=$!
  i=0
  until port=$(sed -n 's/^listening http 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/out" 2>/dev/null) &&
    [ -n "$port" ]; do
    i=$((i + 1))
    [ $i -lt 100 ] || { cat "$work/err"; echo "proxy did not start" >&2; exit 1; }
    sleep 0.1
  done
  echo "shinken proxy on 127.0.0.1:$port; $bytes bytes per bulk run, $n requests per latency run;" \
    "congestion control $(sysctl -n net.ipv4.tcp_congestion_control)"
  # The proxy's own CPU time over the run (utime + stime, in clock ticks):
  # on a machine where the client, the proxy and the servers share few
  # cores, the throughput ratio is bounded by CPU, and this says by how much.
  cpu() { awk '{ print $14 + $15 }' "/proc/$pid/stat"; }
  c0=$(cpu)
  "$bench" "$port" bench.test "$bytes" "$n"
  c1=$(cpu)
  hz=$(getconf CLK_TCK)
  # Through the proxy: one warm-up bulk run of BYTES/8, three of BYTES, and
  # N/10 + N requests.
  awk -v t=$((c1 - c0)) -v hz="$hz" -v b="$bytes" -v n="$n" 'BEGIN {
    printf "proxy CPU time over the run: %.2f s for %.0f MB of bulk data and %d requests\n", t / hz, 3.125 * b / 1e6, n + int(n / 10) + 1 }'
  echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
}

if [ "${1:-}" = --measure ]; then
  shift
  measure "$@"
  exit 0
fi

SHINKEN=${1:-${SHINKEN:-}}
if [ -z "$SHINKEN" ]; then
  b="$root/build/bench-egress"
  [ -f "$b/build.ninja" ] || meson setup "$b" "$root" -Dbuildtype=release -Dtests=false >/dev/null
  ninja -C "$b" src/cli/shinken >"$b.log" 2>&1 || { tail -20 "$b.log"; exit 1; }
  SHINKEN="$b/src/cli/shinken"
fi
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
cc -O2 -pthread -o "$bin/egress-bench" "$root/bench/egress/egress-bench.c"
host_cc=$(sysctl -n net.ipv4.tcp_congestion_control)
if ! unshare --net true 2>/dev/null; then
  echo "no private network namespace (it needs root): measuring once, on the host's loopback"
  (measure "$SHINKEN" "$bin/egress-bench")
  exit 0
fi
status=0
for cc in "$host_cc" cubic; do
  if [ "$cc" = cubic ] && [ "$host_cc" = cubic ]; then break; fi
  if [ "$cc" = "$host_cc" ]; then
    echo "== congestion control $cc (the host's default)"
  else
    echo "== congestion control $cc (the stock Debian kernel's default)"
  fi
  unshare --net sh "$0" --measure "$SHINKEN" "$bin/egress-bench" "$cc" ||
    { echo "== congestion control $cc: the measurement failed (above)"; status=1; }
done
exit $status

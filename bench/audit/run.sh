#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The audit log's speed: sustained append with checkpoints on (one producer
# end to end, and the writer's own capacity), and verify of the resulting
# store, each beside its floor (a bare SQLite loop) in the same run; then the
# CLI's `shinken audit verify` on the same store.
# It builds its own release tree (build/bench-audit). EVENTS defaults to
# 1000000. Then the egress proxy's latency with the timeline on and off
# (SHINKEN_BENCH_PROXY=0 leaves it out).
# usage: [EVENTS=N] sh bench/audit/run.sh
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build/bench-audit
n=${EVENTS:-1000000}
[ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dbuildtype=release >/dev/null
ninja -C "$build" src/cli/shinken bench/audit/audit-bench bench/audit/proxy-bench >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/shk-audit-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "audit bench: $n events, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
mkdir "$tmp/nosync"
"$build/bench/audit/audit-bench" append "$tmp" "$n"
"$build/bench/audit/audit-bench" capacity "$tmp"
"$build/bench/audit/audit-bench" verify "$tmp"
/usr/bin/time -f "cli-verify         %e s (shinken audit verify, the whole process)" \
  "$build/src/cli/shinken" audit verify --db "$tmp/audit.db" >/dev/null
if [ "${SHINKEN_BENCH_PROXY:-1}" = 1 ]; then
  # The egress proxy's added latency with the timeline on against off, in
  # the same run and the same process: two capability managers, one
  # keeping no store and one writing every event, each with a session whose
  # proxy allows a loopback origin; requests alternate between the two
  # (proxy-bench.c). PROXY_REQUESTS (default 3000) each.
  mkdir "$tmp/proxy"
  SHINKEN_POLICY_DIR=${SHINKEN_POLICY_DIR:-$root/policies} XDG_STATE_HOME=$tmp/proxy/state \
    "$build/bench/audit/proxy-bench" "$tmp/proxy" "${PROXY_REQUESTS:-3000}"
fi

#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The audit log's speed: sustained append with checkpoints on (one producer
# end to end, and the writer's own capacity), and verify of the resulting
# store, each beside its floor (a bare SQLite loop) in the same run; then the
# CLI's `shinken audit verify` on the same store.
# It builds its own release tree (build/bench-audit). EVENTS defaults to
# 1000000. With SHINKEN_BENCH_PROXY=1 it also runs the egress proxy's bench
# with the audit log on and off (once the proxy emits to it).
# usage: [EVENTS=N] sh bench/audit/run.sh
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build/bench-audit
n=${EVENTS:-1000000}
[ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dbuildtype=release >/dev/null
ninja -C "$build" src/cli/shinken bench/audit/audit-bench >/dev/null
tmp=$(mktemp -d "${TMPDIR:-/var/tmp}/shk-audit-bench.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
echo "audit bench: $n events, $(nproc) cores, load $(cut -d' ' -f1-3 /proc/loadavg)"
mkdir "$tmp/nosync"
"$build/bench/audit/audit-bench" append "$tmp" "$n"
"$build/bench/audit/audit-bench" capacity "$tmp"
"$build/bench/audit/audit-bench" verify "$tmp"
/usr/bin/time -f "cli-verify         %e s (shinken audit verify, the whole process)" \
  "$build/src/cli/shinken" audit verify --db "$tmp/audit.db" >/dev/null
if [ "${SHINKEN_BENCH_PROXY:-0}" = 1 ]; then
  # The proxy's added latency with the audit log on against off, in the same
  # run: bench/egress measures proxied requests, and SHINKEN_AUDIT (which
  # the egress bench passes to the manager it starts once the proxy emits
  # to the log) is the only difference between the two runs.
  for mode in off on; do
    echo "egress latency, audit $mode:"
    SHINKEN_AUDIT=$mode sh "$root/bench/egress/run.sh"
  done
fi

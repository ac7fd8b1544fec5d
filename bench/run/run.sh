#!/bin/sh
# Benchmark: the start-up cost of `shinken run -- /bin/true` against bwrap
# alone with the usual isolation, in the same run, on the same machine:
# wall time, CPU time and peak memory, and their ratios. Target: shinken at
# most 1.5x bwrap's wall time.
#
# `shinken run -- /bin/true` as written starts only for an unprivileged
# caller (as root the sandbox is a degraded layer that needs
# --allow-degraded; see docs/sandbox.md), so that is the headline: run as
# root, the bench measures both commands as BENCH_USER (default nobody),
# then, second, root's own degraded run with --allow-degraded.
#
#   sh bench/run/run.sh            builds build/bench-run (release) first
#   SHINKEN=path sh bench/run/run.sh
#   RUNS=500 BENCH_USER=someone sh bench/run/run.sh
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
runs=${RUNS:-400}

if [ -z "${SHINKEN:-}" ]; then
  b=$root/build/bench-run
  [ -f "$b/build.ninja" ] || meson setup "$b" "$root" --buildtype=release -Dtests=false >/dev/null
  ninja -C "$b" src/cli/shinken >/dev/null 2>&1 || ninja -C "$b" src/cli/shinken
  SHINKEN=$b/src/cli/shinken
fi
bwrap=$(command -v bwrap) || { echo "run.sh: bwrap is needed" >&2; exit 1; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
cc -O2 -o "$tmp/startup" "$root/bench/run/startup.c"
cd "$tmp"

bench() { # UID GID [--allow-degraded]
  uid=$1 gid=$2; shift 2
  "$tmp/startup" "$runs" "$uid" "$gid" "$SHINKEN" run "$@" -- /bin/true ::: \
    "$bwrap" --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --new-session -- /bin/true
}

echo "shinken: $SHINKEN"
if [ "$(id -u)" = 0 ]; then
  user=${BENCH_USER:-nobody}
  echo "== as $user (unprivileged): shinken run -- /bin/true"
  bench "$(id -u "$user")" "$(id -g "$user")"
  echo "== as root (degraded layer): shinken run --allow-degraded -- /bin/true"
  bench -1 -1 --allow-degraded
else
  echo "== as $(id -un): shinken run -- /bin/true"
  bench -1 -1
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"

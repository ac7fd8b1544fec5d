#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Benchmark: the start-up cost of `shinken run -- /bin/true` against bwrap
# alone with the usual isolation, in the same run, on the same machine:
# wall time, CPU time and peak memory, and their ratios. Target: shinken at
# most 1.25x bwrap's wall time. The last line says what one CPUID costs
# here, which much of the ratio depends on (bench/run/cpuid.c).
#
# `shinken run -- /bin/true` as written starts only for an unprivileged
# caller (as root the sandbox is a degraded layer that needs
# --allow-degraded; see docs/sandbox.md), so that is the headline: run as
# root, the bench measures both commands as BENCH_USER (default nobody),
# then root's own degraded run with --allow-degraded. Then the cost of
# masks: MASKS protected paths that exist (half files, half directories),
# masked by `shinken run --deny`, against bwrap making the same masks.
#
# BASELINE=path/to/another/shinken runs that binary too, in the same
# rounds, for a before-and-after comparison on a shared machine.
#
#   sh bench/run/run.sh            builds build/bench-run (release) first
#   SHINKEN=path sh bench/run/run.sh
#   RUNS=500 BENCH_USER=someone MASKS=100 BASELINE=/tmp/old/shinken sh bench/run/run.sh
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
runs=${RUNS:-400}
masks=${MASKS:-50}

if [ -z "${SHINKEN:-}" ]; then
  b=$root/build/bench-run
  [ -f "$b/build.ninja" ] || meson setup "$b" "$root" --buildtype=release -Dtests=false >/dev/null
  ninja -C "$b" src/cli/shinken >/dev/null 2>&1 || ninja -C "$b" src/cli/shinken
  SHINKEN=$b/src/cli/shinken
fi
bwrap=$(command -v bwrap) || { echo "run.sh: bwrap is needed" >&2; exit 1; }

tmp=$(mktemp -d) home=$(mktemp -d)
trap 'rm -rf "$tmp" "$home"' EXIT
chmod 755 "$tmp" "$home"
cc -O2 -o "$tmp/startup" "$root/bench/run/startup.c"
cc -O2 -o "$tmp/cpuid" "$root/bench/run/cpuid.c"
cd "$tmp"
# The commands may run as another user, who cannot read the caller's home
# (root's is 0700, and shinken run refuses a configuration it cannot read):
# both run with an empty home of their own, outside the working directory.
export HOME="$home"
# --allow-degraded asks the admin policy: the source tree's, unless given.
export SHINKEN_POLICY_DIR="${SHINKEN_POLICY_DIR:-$root/policies}"
peer="$bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --new-session"

# bench UID GID [SHINKEN-OPTIONS...] ::: PEER-OPTIONS: each shinken (and the
# baseline) with the options, against bwrap with the peer's.
bench() {
  b_uid=$1 b_gid=$2; shift 2
  opts="" popts=""
  while [ $# -gt 0 ] && [ "$1" != ::: ]; do opts="$opts $1"; shift; done
  [ $# -gt 0 ] && shift
  popts="$*"
  # shellcheck disable=SC2086
  if [ -n "${BASELINE:-}" ]; then
    "$tmp/startup" "$runs" "$b_uid" "$b_gid" shinken "$SHINKEN" run $opts -- /bin/true ::: \
      baseline "$BASELINE" run $opts -- /bin/true ::: $peer $popts -- /bin/true
  else
    "$tmp/startup" "$runs" "$b_uid" "$b_gid" shinken "$SHINKEN" run $opts -- /bin/true ::: \
      $peer $popts -- /bin/true
  fi
}

# The masks: existing files and directories in the working directory,
# which both sandboxes bind writable.
mkdir -p m
i=0 denies="" pmasks=""
while [ $i -lt "$masks" ]; do
  if [ $((i % 2)) = 0 ]; then
    : >"m/f$i"; denies="$denies --deny m/f$i"; pmasks="$pmasks --ro-bind /dev/null $tmp/m/f$i"
  else
    mkdir "m/d$i"; denies="$denies --deny m/d$i"; pmasks="$pmasks --tmpfs $tmp/m/d$i --remount-ro $tmp/m/d$i"
  fi
  i=$((i + 1))
done
chmod -R a+rwX m

echo "shinken: $SHINKEN${BASELINE:+ (baseline: $BASELINE)}"
if [ "$(id -u)" = 0 ]; then
  user=${BENCH_USER:-nobody}
  uid=$(id -u "$user") gid=$(id -g "$user")
  echo "== as $user (unprivileged): shinken run -- /bin/true"
  bench "$uid" "$gid"
  echo "== as root (degraded layer): shinken run --allow-degraded -- /bin/true"
  bench -1 -1 --allow-degraded
  echo "== as $user, $masks masks: shinken run --deny ... against bwrap making the same masks"
  # shellcheck disable=SC2086
  bench "$uid" "$gid" $denies ::: --bind "$tmp" "$tmp" $pmasks
else
  echo "== as $(id -un): shinken run -- /bin/true"
  bench -1 -1
  echo "== $masks masks: shinken run --deny ... against bwrap making the same masks"
  # shellcheck disable=SC2086
  bench -1 -1 $denies ::: --bind "$tmp" "$tmp" $pmasks
fi
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
# Much of the ratio is a constant of the machine: each program with the C
# library runs 68 CPUIDs as it starts (glibc 2.36), which trap on a virtual
# machine, and the launcher is one such program more than bwrap's chain.
echo "one CPUID: $("$tmp/cpuid") us"

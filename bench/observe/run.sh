#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The write observer's cost on write-heavy workloads (observe-bench.py),
# against the release build's shinken (build/bench-observe).
# usage: [ROUNDS=N] [FILES=N] sh bench/observe/run.sh    (15 rounds of 20000 files by default)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build/bench-observe
[ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dbuildtype=release -Dtests=false >/dev/null
ninja -C "$build" src/cli/shinken >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cc -O2 -o "$tmp/writes" "$root/bench/observe/writes.c"
SHINKEN_POLICY_DIR="${SHINKEN_POLICY_DIR:-$root/policies}" \
  /usr/bin/python3 "$root/bench/observe/observe-bench.py" "$build/src/cli/shinken" "$tmp/writes" \
  "${ROUNDS:-15}" "${FILES:-20000}"

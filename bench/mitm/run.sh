#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# TLS inspection against a direct TLS connection to the same loopback
# upstream, in one run (mitm-bench.c): bulk throughput (target >= 0.7x
# direct) and the added latency of a small request on a new connection with
# the leaf cached (target p50 < 1 ms). Builds its own release tree
# (build/bench-mitm). Everything it dials is on loopback.
#   sh bench/mitm/run.sh [BYTES [REQUESTS]]   (256 MiB per round, 2000)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
b=$root/build/bench-mitm
[ -f "$b/build.ninja" ] || meson setup "$b" "$root" -Dbuildtype=release >/dev/null
ninja -C "$b" bench/mitm/bench-mitm >"$b.log" 2>&1 || { tail -20 "$b.log"; exit 1; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
"$b/bench/mitm/bench-mitm" "$tmp" "$@"

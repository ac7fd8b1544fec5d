#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Revoke under flood (revoke-flood.c): revoke -> refusal of the next
# connection in one egress session while another session of the same
# process holds or is refused thousands of idle connections, p50/p99, with
# the same loop and no flood as the peer; and the connections admitted after
# a revoke returned (must be 0). Builds its own release tree
# (build/bench-egress-revoke). Everything it dials is on loopback.
#   sh bench/egress/revoke-flood.sh [ITERATIONS [FLOOD]]   (1000, 3000)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
b=$root/build/bench-egress-revoke
[ -f "$b/build.ninja" ] || meson setup "$b" "$root" -Dbuildtype=release >/dev/null
ninja -C "$b" bench/egress/bench-revoke-flood >"$b.log" 2>&1 || { tail -20 "$b.log"; exit 1; }
echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) on $(nproc) cores"
exec "$b/bench/egress/bench-revoke-flood" "$@"

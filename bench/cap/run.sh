#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Grant and revoke latency of the capability manager, end to end, with the
# audit timeline on and off side by side in one run, and revoke -> refusal
# while another session holds FLOOD idle connections to its proxy (real
# managers, real session proxies, a loopback upstream pinned by name).
# It builds its own release tree (build/bench-cap).
# usage: [ITERATIONS=N] [FLOOD=N] sh bench/cap/run.sh    (1000 and 3000 by default)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build/bench-cap
n=${ITERATIONS:-1000}
flood=${FLOOD:-3000}
[ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dbuildtype=release >/dev/null
ninja -C "$build" bench/cap/bench-grant-revoke >/dev/null
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# The shipped policies, and a manifest of the bench's own: api.test at tier
# Auto (a grant is one call), ask.test at Ask (a grant, then an approval).
"$build/bench/cap/bench-grant-revoke" "$root/policies" "$root/bench/cap/manifest.json" "$tmp" "$n" "$flood"

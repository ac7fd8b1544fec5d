#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Live fs.scope and persistence unlock latencies (see unlock-bench.py), against the release
# build's shinken (build/bench-unlock). Needs root (the fixtures under /srv).
# usage: [ITERATIONS=N] sh bench/unlock/run.sh    (200 by default)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build/bench-unlock
[ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dbuildtype=release -Dtests=false >/dev/null
ninja -C "$build" src/cli/shinken >/dev/null
exec /usr/bin/python3 "$root/bench/unlock/unlock-bench.py" "$build/src/cli/shinken" "$root" "${ITERATIONS:-200}"

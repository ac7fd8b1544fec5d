#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Ask loop's latencies (see ask-bench.py), against the release build's
# shinken (build/bench-ask).
# usage: [ITERATIONS=N] sh bench/ask/run.sh    (300 by default)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build/bench-ask
[ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dbuildtype=release -Dtests=false >/dev/null
ninja -C "$build" src/cli/shinken >/dev/null
exec /usr/bin/python3 "$root/bench/ask/ask-bench.py" "$build/src/cli/shinken" "$root" "${ITERATIONS:-300}"

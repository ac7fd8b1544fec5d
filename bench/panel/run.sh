#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The Permission Panel's latencies (see bench.js), against the release
# build's shinken (build/bench-panel), each beside its peer on the control
# socket in the same run.
# usage: [ITERATIONS=N] sh bench/panel/run.sh [SHINKEN]    (100 by default;
# without SHINKEN, a release build of its own)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
shinken=${1:-}
if [ -z "$shinken" ]; then
  build=$root/build/bench-panel
  [ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dbuildtype=release -Dtests=false >/dev/null
  ninja -C "$build" src/cli/shinken >/dev/null
  shinken=$build/src/cli/shinken
fi
exec node "$root/bench/panel/bench.js" --shinken "$shinken" --src "$root" --n "${ITERATIONS:-100}"

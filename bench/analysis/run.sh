#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The analyzer's benchmark: compare of the shipped policy sets, one
# grant-time pattern check with a warm solver (each beside its peers), and
# how much of the conformance corpus the encoder covers.
# It builds its own release tree (build/bench-analysis); ITERATIONS defaults
# to 200. The corpus is ../shared/cedar-conformance beside the source tree.
# usage: [ITERATIONS=N] [CHECK_MS=M] sh bench/analysis/run.sh
#   CHECK_MS=M also asks each covered corpus set three questions, M ms each.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build/bench-analysis
[ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dbuildtype=release >/dev/null
ninja -C "$build" bench/analysis/bench-analysis bench/analysis/bench-analysis-coverage >/dev/null
echo "== 1, 2: compare and the grant-time check (machine: $(nproc) cores, load $(cut -d' ' -f1 /proc/loadavg))"
"$build/bench/analysis/bench-analysis" "$root/policies" "${ITERATIONS:-200}"
conf=""
for d in "$root/../shared/cedar-conformance" "$root/../../shared/cedar-conformance"; do
  [ -d "$d" ] && conf=$d && break
done
if [ -z "$conf" ]; then
  echo "== 3: skipped: the conformance corpus is not beside the source tree"
  exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
tar xzf "$conf/corpus-tests.tar.gz" -C "$tmp"
(cd "$tmp" && find corpus-tests -name '*.json' ! -name '*.entities.json' | sort) >"$tmp/list"
echo "== 3: corpus coverage"
if [ -n "${CHECK_MS:-}" ]; then
  "$build/bench/analysis/bench-analysis-coverage" "$tmp" "$tmp/list" --check "$CHECK_MS"
else
  "$build/bench/analysis/bench-analysis-coverage" "$tmp" "$tmp/list"
fi

#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Runs one libFuzzer target for a fixed time, starting from the seed corpus
# in the repository (copied, so the run never writes into the source tree).
# Any crash, leak or timeout makes libFuzzer exit nonzero, and so this test.
set -eu
exe=$1 seconds=$2 seeds=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
mkdir "$work/corpus"
if [ -d "$seeds" ]; then cp -r "$seeds"/. "$work/corpus/" 2>/dev/null || true; fi
cd "$work"
exec "$exe" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -error_exitcode=1 -timeout_exitcode=1 \
  -max_len=4096 -print_final_stats=1 "$work/corpus"

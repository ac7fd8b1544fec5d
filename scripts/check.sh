#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Builds Shinken under ASan and UBSan, builds the libFuzzer targets with
# clang, runs every test (those that run the binary also against the
# release build's static one), and ends with the line 'N passed, N failed'.
set -u
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root" || exit 1

build() { # DIR, then meson options
  dir=$1; shift
  if [ ! -f "$dir/build.ninja" ]; then
    meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
  else
    # A build directory made earlier gets the options this script needs.
    meson configure "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
  fi
  ninja -C "$dir" >"$dir.build.log" 2>&1 || { tail -50 "$dir.build.log"; return 1; }
}

mkdir -p build
logs=""
status=0
# Every build here makes every warning an error (a user's build makes only
# the ones that always mean a bug errors; see meson.build). The test build
# also compiles in fault injection, for the out-of-memory tests
# (tests/unit/test-cedar-oom.c).
if build build/check -Dwerror=true -Db_sanitize=address,undefined -Db_lundef=false -Dfault_injection=true; then
  # SHINKEN_TEST_SUITES is a list of arguments (--suite NAME ...).
  # shellcheck disable=SC2086
  meson test -C build/check --no-rebuild --print-errorlogs --num-processes 2 \
    ${SHINKEN_TEST_SUITES:-} || status=1
  [ -f build/check/meson-logs/testlog.json ] && logs="$logs build/check/meson-logs/testlog.json"
else
  echo "build failed: build/check"; status=1
fi
# The binary people run is the release build's static PIE, which the
# sanitizers cannot build: the suites that run it run again against it.
if build build/static -Dwerror=true -Dbuildtype=release; then
  meson test -C build/static --no-rebuild --print-errorlogs --num-processes 2 \
    --suite sandbox --suite egress --suite e2e || status=1
  [ -f build/static/meson-logs/testlog.json ] && logs="$logs build/static/meson-logs/testlog.json"
else
  echo "build failed: build/static"; status=1
fi
if [ "${SHINKEN_NO_FUZZ:-0}" != 1 ]; then
  if CC=clang build build/fuzz -Dwerror=true -Dfuzz=true -Dtests=false -Db_sanitize=address,undefined \
      -Db_lundef=false -Dc_args=-fsanitize=fuzzer-no-link; then
    meson test -C build/fuzz --no-rebuild --print-errorlogs --suite fuzz || status=1
    [ -f build/fuzz/meson-logs/testlog.json ] && logs="$logs build/fuzz/meson-logs/testlog.json"
  else
    echo "build failed: build/fuzz"; status=1
  fi
fi
# shellcheck disable=SC2086
if [ -n "$logs" ]; then /usr/bin/python3 scripts/summarize.py $logs || status=1; else echo "0 passed, 1 failed"; fi
exit $status

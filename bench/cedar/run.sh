#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# Cedar benchmark: Shinken against the official engine (cedar-wasm 4.13,
# preparsed policies and schema, statefulIsAuthorized), same policies,
# entities and requests, in one run. Prints a table and the ratios.
#
#   sh bench/cedar/run.sh [PATH-TO-SHINKEN]     (default build/release/src/cli/shinken)
#
# Three numbers per workload:
#   shinken batch   `shinken cedar authorize --requests`: the whole command,
#                   process start, loading, parsing each request line,
#                   deciding and printing each answer
#   shinken decide  shk_cedar_is_authorized alone on prebuilt requests
#                   (bench/cedar/decide.c, linked against libshinken)
#   cedar-wasm      statefulIsAuthorized per request (its API takes the
#                   request and the entities as JSON on every call)
# All three count CPU time (user + system), not wall time, so that other
# work on a shared machine does not skew the ratios.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
bin=${1:-$root/build/release/src/cli/shinken}
shinken=$(cd "$(dirname "$bin")" && pwd)/$(basename "$bin")
[ -x "$shinken" ] || { echo "run.sh: no shinken binary at $shinken (make build)" >&2; exit 1; }
# The binary is BUILD/src/cli/shinken; the library is BUILD/libshinken.a.
lib=$(dirname "$(dirname "$(dirname "$shinken")")")/libshinken.a
[ -f "$lib" ] || { echo "run.sh: $lib not found next to the shinken binary" >&2; exit 1; }
conf=""
for d in "$root/../shared/cedar-conformance" "$root/../../shared/cedar-conformance"; do
  [ -d "$d" ] && conf=$d && break
done
[ -n "$conf" ] || { echo "run.sh: the conformance data (../shared/cedar-conformance) is needed for the workloads" >&2; exit 1; }
[ -d "$root/tests/node/node_modules/@cedar-policy/cedar-wasm" ] ||
  { echo "run.sh: run 'npm ci' in tests/node first" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
node "$root/bench/cedar/bench.js" make "$work" "$conf"

# shellcheck disable=SC2046
cc -O2 -I"$root/include" -o "$work/decide" "$root/bench/cedar/decide.c" "$lib" \
  $(pkg-config --libs jansson libseccomp libevent libevent_openssl libevent_pthreads openssl sqlite3) -lpthread -lm

field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"; }

printf '%-10s | %-22s | %-22s | %-22s | %s\n' workload "shinken batch" "shinken decide" "cedar-wasm" \
  "speed-up batch, decide"
status=0
for w in sandbox_a sandbox_b gen1000; do
  d=$work/$w
  set -- --policies "$d/policies.cedar" --entities "$d/entities.json"
  [ -f "$d/schema.cedarschema" ] && set -- "$@" --schema "$d/schema.cedarschema"
  n=$(wc -l <"$d/requests.jsonl")

  # The batch command gets the requests ten times over, so that its CPU
  # time is well above the clock's 10 ms resolution.
  for _ in 1 2 3 4 5 6 7 8 9 10; do cat "$d/requests.jsonl"; done |
    /usr/bin/time -f '%U %S' -o "$work/time" "$shinken" cedar authorize "$@" --requests - >"$work/out" ||
    { echo "run.sh: shinken failed on $w" >&2; exit 1; }
  batch_s=$(awk '{ print $1 + $2 }' "$work/time")
  batch_allow=$(($(grep -c '"decision":"allow"' "$work/out" || true) / 10))

  "$work/decide" "$d" $((200000 / n + 1)) >"$work/decide.json"
  dec_n=$(field decisions <"$work/decide.json")
  dec_s=$(field seconds <"$work/decide.json")
  dec_allow=$(field allow <"$work/decide.json")

  node "$root/bench/cedar/bench.js" wasm "$d" >"$work/wasm.json"
  wasm_s=$(field seconds <"$work/wasm.json")
  wasm_allow=$(field allow <"$work/wasm.json")

  # Same inputs must give the same answers, or the numbers mean nothing.
  if [ "$batch_allow" != "$wasm_allow" ] || [ "$dec_allow" != "$wasm_allow" ]; then
    echo "run.sh: $w: allowed: shinken batch $batch_allow, decide $dec_allow, cedar-wasm $wasm_allow" >&2
    status=1
  fi

  awk -v w="$w" -v n="$n" -v bs="$batch_s" -v dn="$dec_n" -v ds="$dec_s" -v ws="$wasm_s" 'BEGIN {
    bus = bs / (10 * n) * 1e6; dus = ds / dn * 1e6; wus = ws / n * 1e6;
    printf "%-10s | %9.0f/s %7.2f us | %9.0f/s %7.3f us | %9.0f/s %7.1f us | %6.0fx, %6.0fx\n",
      w, 1e6 / bus, bus, 1e6 / dus, dus, 1e6 / wus, wus, wus / bus, wus / dus }'
done
exit $status

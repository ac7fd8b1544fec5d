#!/bin/sh
# Cedar benchmark: Shinken against the official engine (cedar-wasm 4.13,
# preparsed policies and schema, statefulIsAuthorized), same policies,
# entities and requests, in one run. Prints a table and the ratios.
#
#   sh bench/cedar/run.sh [PATH-TO-SHINKEN]     (default build/release/shinken)
#
# Three numbers per workload:
#   shinken batch   `shinken cedar authorize --requests`: the whole command,
#                   process start, loading, parsing each request line,
#                   deciding and printing each answer
#   shinken decide  shk_cedar_is_authorized alone on prebuilt requests
#                   (bench/cedar/decide.c, linked against libshinken)
#   cedar-wasm      statefulIsAuthorized per request (its API takes the
#                   request and the entities as JSON on every call)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
shinken=$(cd "$(dirname "${1:-$root/build/release/shinken}")" && pwd)/$(basename "${1:-shinken}")
[ -x "$shinken" ] || { echo "run.sh: no shinken binary at $shinken (make build)" >&2; exit 1; }
build=$(dirname "$(dirname "$(dirname "$shinken")")")
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

# The decision harness, built against the same static library as shinken.
lib=$build/libshinken.a
[ -f "$lib" ] || { echo "run.sh: $lib not found next to the shinken binary" >&2; exit 1; }
# shellcheck disable=SC2046
cc -O2 -I"$root/include" -o "$work/decide" "$root/bench/cedar/decide.c" "$lib" \
  $(pkg-config --libs jansson libseccomp libevent libevent_openssl libevent_pthreads openssl sqlite3 2>/dev/null ||
    pkg-config --libs jansson libseccomp libevent libevent_openssl openssl sqlite3) -lpthread -lm

now() { date +%s.%N; }
field() { sed -n "s/.*\"$1\":\([0-9.e+-]*\).*/\1/p"; }

printf '%-10s %9s | %-22s %-22s %-22s | %s\n' workload decisions "shinken batch" "shinken decide" "cedar-wasm" "ratio batch / decide"
status=0
for w in sandbox_a sandbox_b gen1000; do
  d=$work/$w
  schema=""
  [ -f "$d/schema.cedarschema" ] && schema="--schema $d/schema.cedarschema"
  n=$(wc -l <"$d/requests.jsonl")

  t0=$(now)
  # shellcheck disable=SC2086
  "$shinken" cedar authorize --policies "$d/policies.cedar" --entities "$d/entities.json" $schema \
    --requests "$d/requests.jsonl" >"$work/out" || { echo "run.sh: shinken failed on $w" >&2; exit 1; }
  t1=$(now)
  batch_allow=$(grep -c '"decision":"allow"' "$work/out" || true)

  passes=$((200000 / n + 1))
  "$work/decide" "$d" "$passes" >"$work/decide.json"
  dec_n=$(field decisions <"$work/decide.json")
  dec_s=$(field seconds <"$work/decide.json")

  node "$root/bench/cedar/bench.js" wasm "$d" >"$work/wasm.json"
  wasm_s=$(field seconds <"$work/wasm.json")
  wasm_allow=$(field allow <"$work/wasm.json")

  # Same inputs must give the same answers, or the numbers mean nothing.
  [ "$batch_allow" = "$wasm_allow" ] || { echo "run.sh: $w: shinken allowed $batch_allow, cedar-wasm $wasm_allow" >&2; status=1; }

  awk -v w="$w" -v n="$n" -v t0="$t0" -v t1="$t1" -v dn="$dec_n" -v ds="$dec_s" -v ws="$wasm_s" 'BEGIN {
    b = t1 - t0; bus = b / n * 1e6; dus = ds / dn * 1e6; wus = ws / n * 1e6;
    printf "%-10s %9d | %8.0f/s %7.2f us | %8.0f/s %7.3f us | %8.0f/s %7.1f us | %6.0fx / %6.0fx\n",
      w, n, n / b, bus, dn / ds, dus, n / ws, wus, wus / bus, wus / dus }'
done
exit $status

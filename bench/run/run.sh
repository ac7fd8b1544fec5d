#!/bin/sh
# Benchmark: the start-up cost of `shinken run -- /bin/true` against bwrap
# alone with the usual isolation, in the same run, on the same machine.
# Reports wall time (hyperfine), peak RSS (/usr/bin/time -v) and the ratio.
# Target: shinken at most 1.5x bwrap's wall time.
#
#   sh bench/run/run.sh            builds build/bench-run (release) first
#   SHINKEN=path sh bench/run/run.sh
#   RUNS=200 sh bench/run/run.sh
#   BENCH_USER=nobody sh bench/run/run.sh   both commands as that user (from root)
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
runs=${RUNS:-100}

if [ -z "${SHINKEN:-}" ]; then
  b=$root/build/bench-run
  [ -f "$b/build.ninja" ] || meson setup "$b" "$root" --buildtype=release -Dtests=false >/dev/null
  ninja -C "$b" src/cli/shinken >/dev/null
  SHINKEN=$b/src/cli/shinken
fi
for t in hyperfine bwrap python3 /usr/bin/time; do
  command -v "$t" >/dev/null || { echo "run.sh: $t is needed" >&2; exit 1; }
done

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
chmod 755 "$tmp"
cd "$tmp"

as=""
if [ -n "${BENCH_USER:-}" ]; then
  u=$(id -u "$BENCH_USER") && g=$(id -g "$BENCH_USER") || exit 1
  as="setpriv --reuid=$u --regid=$g --clear-groups "
fi
# As root, shinken run starts only with --allow-degraded (root's files stay
# readable inside; see docs/sandbox.md).
allow=""
[ -z "$as" ] && [ "$(id -u)" = 0 ] && allow="--allow-degraded "
shinken_cmd="${as}$SHINKEN run ${allow}-- /bin/true"
bwrap_cmd="${as}bwrap --ro-bind / / --dev /dev --proc /proc --unshare-all --die-with-parent --new-session -- /bin/true"

# Both must work before they are timed.
$shinken_cmd || { echo "run.sh: '$shinken_cmd' failed" >&2; exit 1; }
$bwrap_cmd || { echo "run.sh: '$bwrap_cmd' failed" >&2; exit 1; }

echo "shinken: $SHINKEN (as ${BENCH_USER:-$(id -un)})"
# The machine is shared, so its load drifts: the two commands are measured in
# alternating rounds and compared by their medians over all rounds.
rounds=${ROUNDS:-5}
per=$((runs / rounds))
for r in $(seq "$rounds"); do
  if [ $((r % 2)) = 1 ]; then
    set -- -n "shinken run" "$shinken_cmd" -n bwrap "$bwrap_cmd"
  else
    set -- -n bwrap "$bwrap_cmd" -n "shinken run" "$shinken_cmd"
  fi
  hyperfine -N --style basic --warmup 5 --runs "$per" --export-json "times-$r.json" "$@" >/dev/null
done

# Peak RSS: the largest of the processes each command waited for, over 20
# runs (the median is reported).
peak() {
  for _ in $(seq 20); do
    # shellcheck disable=SC2086
    /usr/bin/time -v $1 2>&1 >/dev/null | awk -F': ' '/Maximum resident set size/ { print $2 }'
  done | sort -n | awk '{ a[NR] = $1 } END { print a[int((NR + 1) / 2)] }'
}
rss_shinken=$(peak "$shinken_cmd")
rss_bwrap=$(peak "$bwrap_cmd")

python3 - "$rss_shinken" "$rss_bwrap" times-*.json <<'PY'
import json, statistics, sys
t = {"shinken run": [], "bwrap": []}
cpu = {"shinken run": [], "bwrap": []}
for f in sys.argv[3:]:
    for x in json.load(open(f))["results"]:
        t[x["command"]] += x["times"]
        cpu[x["command"]].append(x["user"] + x["system"])
s, b = statistics.median(t["shinken run"]), statistics.median(t["bwrap"])
ratio = s / b
rs, rb = int(sys.argv[1]), int(sys.argv[2])
n = len(t["bwrap"])
print(f"wall (median of {n} runs each)  shinken run {s*1e3:.2f} ms   bwrap {b*1e3:.2f} ms")
print(f"      min                       shinken run {min(t['shinken run'])*1e3:.2f} ms   bwrap {min(t['bwrap'])*1e3:.2f} ms")
print(f"ratio {ratio:.2f}x bwrap's wall time (target <= 1.50x): {'met' if ratio <= 1.5 else 'NOT met'}")
cs, cb = statistics.mean(cpu["shinken run"]), statistics.mean(cpu["bwrap"])
print(f"cpu (user+sys, mean)        shinken run {cs*1e3:.2f} ms   bwrap {cb*1e3:.2f} ms   ratio {cs/cb:.2f}x")
print(f"ratio of the minimums       {min(t['shinken run'])/min(t['bwrap']):.2f}x (least disturbed by load)")
print(f"peak RSS (median of 20)  shinken run {rs} KiB   bwrap {rb} KiB   ratio {rs/rb:.2f}x")
PY

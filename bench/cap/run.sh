#!/bin/sh
# Grant and revoke latency of the capability manager, end to end: a real
# daemon, a real session proxy, a loopback upstream pinned by name.
# It builds its own release tree (build/bench-cap); ITERATIONS defaults to 1000.
# usage: [ITERATIONS=N] sh bench/cap/run.sh
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$root/build/bench-cap
n=${ITERATIONS:-1000}
[ -f "$build/build.ninja" ] || meson setup "$build" "$root" -Dbuildtype=release >/dev/null
ninja -C "$build" src/cli/shinken bench/cap/bench-grant-revoke >/dev/null
tmp=$(mktemp -d)
trap 'kill $dpid $upid 2>/dev/null; rm -rf "$tmp"' EXIT
export SHINKEN_SOCKET="$tmp/manager.sock"
# A loopback upstream that accepts and closes.
python3 -c '
import socket,sys
s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1); s.bind(("127.0.0.1",0)); s.listen(512)
print(s.getsockname()[1], flush=True)
while True:
    c,_=s.accept(); c.close()
' >"$tmp/port" &
upid=$!
while [ ! -s "$tmp/port" ]; do sleep 0.05; done
port=$(cat "$tmp/port")
printf '{"allow_private_cidrs":["127.0.0.1/32"],"hosts":{"api.test":["127.0.0.1"],"ask.test":["127.0.0.1"]}}' \
  >"$tmp/proxy.json"
# The shipped policies, and a manifest of the bench's own: api.test at tier
# Auto (a grant is one call), ask.test at Ask (a grant, then an approval).
printf '{"socket":"%s","event_log":"%s/events.log","policy_dir":"%s/policies","manifest":"%s/bench/cap/manifest.json"}' \
  "$SHINKEN_SOCKET" "$tmp" "$root" "$root" >"$tmp/daemon.json"
"$build/src/cli/shinken" daemon --config "$tmp/daemon.json" >"$tmp/daemon.out" &
dpid=$!
while [ ! -S "$SHINKEN_SOCKET" ]; do sleep 0.05; done
# Hold a session open on a control connection for the whole run.
python3 - "$SHINKEN_SOCKET" "$tmp/proxy.json" "$build/bench/cap/bench-grant-revoke" "$port" "$n" <<'PY'
import json, socket, subprocess, sys
sock, cfg, exe, port, n = sys.argv[1:]
c = socket.socket(socket.AF_UNIX); c.connect(sock); f = c.makefile("rb")
c.sendall(json.dumps({"op": "open_session", "egress": True, "proxy_config": cfg}).encode() + b"\n")
a = json.loads(f.readline())
sys.exit(subprocess.call([exe, a["session"], a["egress_dir"], "api.test", "ask.test", port, n]))
PY

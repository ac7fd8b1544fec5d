#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Live fs.scope and persistence unlock latencies, end to end, against a running sandbox
(`shinken run --net proxy`, its manager embedded), on its control socket:

  grant:   a grant of write on a host path is sent -> its answer arrives.
           The manager answers only after the mount is attached in the
           sandbox, so this is grant-to-visible (target p99 < 20 ms);
  revoke:  the revoke is sent -> its answer arrives, after the mount is
           detached: revoke-to-gone (target p99 < 10 ms);
  peer:    in the same run and session, a net.egress grant and its revoke,
           which change no mount: what the decision and the handle cost, so
           grant / peer says what the mount adds;
  persist: the same for a persistence grant that does not survive the
           session (an overlay over a host directory, its store entry made
           at the grant and deleted at the revoke).
Every tenth round, the sandbox itself checks that the granted path is
writable after the grant and read-only after the revoke (outside the
timing), so the numbers are of mounts that really came and went.

usage: unlock-bench.py SHINKEN SRCDIR [ITERATIONS]"""
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time

SHINKEN, SRC = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 200


def percentile(v, p):
    v = sorted(v)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def rpc(sock, **req):
    sock.sendall(json.dumps(req).encode() + b"\n")
    buf = b""
    while not buf.endswith(b"\n"):
        chunk = sock.recv(65536)
        if not chunk:
            raise SystemExit("the manager closed the control socket")
        buf += chunk
    return json.loads(buf)


tmp = tempfile.mkdtemp(prefix="shk-unlock-bench.", dir="/srv")
# Persistence is tried beneath /home: the admin tier forbids it in /srv.
home = tempfile.mkdtemp(prefix="shk-unlock-bench.", dir="/home")
try:
    os.chmod(home, 0o755)
    kept = home + "/kept"
    os.mkdir(kept, 0o777)
    # A copy of the policy whose manifest lets the image persist there
    # with no human to ask.
    pol = tmp + "/policies"
    shutil.copytree(os.path.join(SRC, "policies"), pol)
    man = json.load(open(pol + "/manifests/default.json"))
    for c in man["capabilities"]:
        if c["class"] == "persistence":
            c["tier"], c["scope"]["paths"] = "Notify", [home]
    json.dump(man, open(pol + "/manifests/default.json", "w"))
    os.chmod(tmp, 0o755)
    ws, xdg, data = tmp + "/ws", tmp + "/xdg", tmp + "/data"
    os.mkdir(ws)
    os.mkdir(xdg, 0o700)
    os.mkdir(data, 0o777)
    env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "XDG_RUNTIME_DIR": xdg, "SHINKEN_SOCKET": tmp + "/none.sock",
           "SHINKEN_POLICY_DIR": pol}
    loop = ('while :; do for f in go.*; do [ -e "$f" ] || continue; n=${f#go.}; '
            'sh "$f" > out.$n 2>&1; echo $? > rc.t.$n; mv rc.t.$n rc.$n; rm -f "$f"; done; sleep 0.005; done')
    run = subprocess.Popen([SHINKEN, "run", "--allow-degraded", "--net", "proxy", "--verbose", "--", "sh", "-c", loop],
                           cwd=ws, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                           stderr=subprocess.PIPE)
    line = b""
    while b"grant egress with" not in line:
        line = run.stderr.readline()
        if not line and run.poll() is not None:
            raise SystemExit("shinken run ended: %r" % line)
    m = re.search(rb"session (\S+); grant egress with: SHINKEN_SOCKET=(\S+) ", line)
    sid, path = m.group(1).decode(), m.group(2).decode()
    steps = [0]

    def inside(script):
        steps[0] += 1
        n = steps[0]
        with open("%s/go.t" % ws, "w") as f:
            f.write(script + "\n")
        os.rename("%s/go.t" % ws, "%s/go.%d" % (ws, n))
        while not os.path.exists("%s/rc.%d" % (ws, n)):
            time.sleep(0.002)
        return int(open("%s/rc.%d" % (ws, n)).read())

    inside("true")  # the sandbox has started and been reported
    ctl = socket.socket(socket.AF_UNIX)
    ctl.connect(path)
    fs_scope = {"write": [data]}
    eg_scope = {"domains": ["registry.npm.example"], "ports": [443]}  # an Auto entry of the manifest
    grant, revoke, pgrant, prevoke, kgrant, krevoke = [], [], [], [], [], []
    p_scope = {"paths": [kept]}
    for i in range(N):
        t0 = time.perf_counter()
        a = rpc(ctl, op="grant", session=sid, scope=fs_scope, **{"class": "fs.scope"})
        t1 = time.perf_counter()
        if not a.get("ok"):
            raise SystemExit("grant refused: %s" % a)
        if i % 10 == 0 and inside("echo %d > %s/w" % (i, data)) != 0:
            raise SystemExit("round %d: the granted path is not writable inside" % i)
        t2 = time.perf_counter()
        b = rpc(ctl, op="revoke", handle=a["handle"])
        t3 = time.perf_counter()
        if not b.get("ok"):
            raise SystemExit("revoke refused: %s" % b)
        if i % 10 == 0 and inside("echo %d > %s/w" % (i, data)) == 0:
            raise SystemExit("round %d: the revoked path is still writable inside" % i)
        grant.append(t1 - t0)
        revoke.append(t3 - t2)
        t0 = time.perf_counter()
        a = rpc(ctl, op="grant", session=sid, scope=eg_scope, **{"class": "net.egress"})
        t1 = time.perf_counter()
        rpc(ctl, op="revoke", handle=a["handle"])
        t2 = time.perf_counter()
        pgrant.append(t1 - t0)
        prevoke.append(t2 - t1)
        t0 = time.perf_counter()
        a = rpc(ctl, op="grant", session=sid, scope=p_scope, **{"class": "persistence"})
        t1 = time.perf_counter()
        if not a.get("ok"):
            raise SystemExit("persistence grant refused: %s" % a)
        if i % 10 == 0 and (inside("echo %d > %s/w" % (i, kept)) != 0 or os.path.exists(kept + "/w")):
            raise SystemExit("round %d: the persisted path is not writable inside, or the write reached the host" % i)
        t2 = time.perf_counter()
        rpc(ctl, op="revoke", handle=a["handle"])
        t3 = time.perf_counter()
        if i % 10 == 0 and inside("test -e %s/w" % kept) == 0:
            raise SystemExit("round %d: what the revoked persistence grant wrote is still there" % i)
        kgrant.append(t1 - t0)
        krevoke.append(t3 - t2)
    ms = lambda v, p: percentile(v, p) * 1000  # noqa: E731
    print("fs.scope live unlock, %d rounds (ms):" % N)
    for name, v, peer in [("grant-to-visible", grant, pgrant), ("revoke-to-gone", revoke, prevoke)]:
        print("  %-17s p50 %6.2f  p99 %6.2f  | peer (net.egress) p50 %6.2f  p99 %6.2f  | ratio p50 %.1fx" %
              (name, ms(v, 50), ms(v, 99), ms(peer, 50), ms(peer, 99), ms(v, 50) / ms(peer, 50)))
    print("persistence (an overlay, its store entry made and deleted), %d rounds (ms):" % N)
    for name, v, peer in [("grant-to-visible", kgrant, pgrant), ("revoke-to-gone", krevoke, prevoke)]:
        print("  %-17s p50 %6.2f  p99 %6.2f  | peer (net.egress) p50 %6.2f  p99 %6.2f  | ratio p50 %.1fx" %
              (name, ms(v, 50), ms(v, 99), ms(peer, 50), ms(peer, 99), ms(v, 50) / ms(peer, 50)))
    print("targets (fs.scope): grant-to-visible p99 < 20 ms: %s; revoke-to-gone p99 < 10 ms: %s" %
          ("met" if ms(grant, 99) < 20 else "NOT met", "met" if ms(revoke, 99) < 10 else "NOT met"))
    ctl.close()
    run.kill()
    run.wait()
finally:
    shutil.rmtree(tmp, True)
    shutil.rmtree(home, True)

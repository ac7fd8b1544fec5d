#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Ask loop's latencies, end to end, against a real `shinken daemon`:

  raise:   a CONNECT the policy answers Ask for is sent -> its card reaches a
           subscriber on the control socket (target p99 < 20 ms);
  release: the approve request is sent on the control socket -> the held
           connection reaches the upstream (target p99 < 5 ms);
  peer:    in the same run, a CONNECT to a destination a live handle covers
           is sent -> it reaches the upstream (the proxy's own path, with no
           human in it), so release / peer says what the Ask loop adds;
  auto:    a CONNECT to a new destination the manifest puts at Auto is sent
           -> it reaches the upstream (held, a handle issued on the
           manager's issuer thread, resumed), so auto / peer says what
           issuing with no human costs.

usage: ask-bench.py SHINKEN SRCDIR [ITERATIONS]"""
import json
import os
import socket
import sys
import tempfile
import threading
import time

SHINKEN, SRC = sys.argv[1], sys.argv[2]
N = int(sys.argv[3]) if len(sys.argv) > 3 else 300
os.environ["SHINKEN"], os.environ["SHINKEN_SRCDIR"] = SHINKEN, SRC
sys.path.insert(0, os.path.join(SRC, "tests", "e2e"))
from mgrlib import Control, Daemon, percentile, proxy_config  # noqa: E402


class Upstream:
    """Accepts and records when each connection arrived."""

    def __init__(self):
        self.srv = socket.socket()
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(512)
        self.port = self.srv.getsockname()[1]
        self.cv = threading.Condition()
        self.arrivals = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            with self.cv:
                self.arrivals.append((time.monotonic(), c))
                self.cv.notify_all()

    def wait(self, n):
        with self.cv:
            self.cv.wait_for(lambda: len(self.arrivals) >= n, timeout=10)
            return self.arrivals[n - 1][0] if len(self.arrivals) >= n else None


def connect(edir, host, port):
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(10)
    s.connect(os.path.join(edir, "http.sock"))
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return s


def stats(name, v):
    ms = [x * 1000 for x in v]
    print(f"{name:8s} n={len(ms)} p50={percentile(ms, 50):.3f} ms p99={percentile(ms, 99):.3f} ms "
          f"max={max(ms):.3f} ms")
    return percentile(ms, 50), percentile(ms, 99)


def main():
    tmp = tempfile.mkdtemp(prefix="shk-bench-ask-")
    with open(os.path.join(SRC, "policies", "manifests", "default.json")) as f:
        manifest = json.load(f)
    manifest["capabilities"].insert(0, {"class": "net.egress", "tier": "Auto", "scope": {"domains": ["**.auto.test"]}})
    with open(os.path.join(tmp, "manifest.json"), "w") as f:
        json.dump(manifest, f)
    d = Daemon(tmp, "d", config={"manifest": os.path.join(tmp, "manifest.json")})
    up = Upstream()
    autos = [f"h{i}.auto.test" for i in range(N)]
    cfg = proxy_config(tmp, "ask.test", "peer.test", *autos)
    ctl, sub, res = Control(d.sock), Control(d.sock), Control(d.sock)
    a = ctl.call(op="open_session", name="bench", egress=True, proxy_config=cfg)
    sid, edir = a["session"], a["egress_dir"]
    g = ctl.call(op="grant", session=sid, **{"class": "net.egress"}, scope={"domains": ["peer.test"]})
    if g.get("decision") == "ask":
        ctl.call(op="resolve", pending=g["pending"], resolution="approve")
    sub.call(op="subscribe")
    raise_t, release_t, peer_t, auto_t = [], [], [], []
    arrived = 0
    for i in range(N):
        # The peer: a destination a live handle covers.
        t0 = time.monotonic()
        p = connect(edir, "peer.test", up.port)
        arrived += 1
        t1 = up.wait(arrived)
        peer_t.append(t1 - t0)
        p.close()
        # The Ask path: held, raised, approved once, released.
        t0 = time.monotonic()
        s = connect(edir, "ask.test", up.port)
        while True:
            line = json.loads(sub.f.readline())
            if line.get("event") == "raised":
                break
        t1 = time.monotonic()
        raise_t.append(t1 - t0)
        card = line["card"]["id"]
        t0 = time.monotonic()
        sub_ans = res.call(op="resolve", card=card, resolution="once")
        arrived += 1
        t1 = up.wait(arrived)
        release_t.append(t1 - t0)
        assert sub_ans.get("ok"), sub_ans
        s.close()
        # Its "resolved" line.
        while json.loads(sub.f.readline()).get("event") != "resolved":
            pass
        # Auto: a new destination, a handle with no human.
        t0 = time.monotonic()
        s = connect(edir, autos[i], up.port)
        arrived += 1
        t1 = up.wait(arrived)
        auto_t.append(t1 - t0)
        s.close()
    print(f"ask loop, {N} iterations (the machine may be shared: compare ratios)")
    _, r99 = stats("raise", raise_t)
    p50, p99 = stats("release", release_t)
    q50, q99 = stats("peer", peer_t)
    a50, a99 = stats("auto", auto_t)
    print(f"auto/peer: p50 {a50 / q50:.2f}x p99 {a99 / q99:.2f}x")
    print(f"release/peer: p50 {p50 / q50:.2f}x p99 {p99 / q99:.2f}x; targets: raise p99 < 20 ms "
          f"({'met' if r99 < 20 else 'missed'}), release p99 < 5 ms ({'met' if p99 < 5 else 'missed'})")
    for c in (ctl, sub, res):
        c.close()
    d.stop()


main()

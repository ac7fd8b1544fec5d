#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A flood on one session's proxy does not delay a revoke in another.

Session "flood" holds 3,000 idle connections to its proxy (whose own per-session limits are lifted, so
that the manager's defences are what is judged), and a client
keeps asking that proxy for a destination it may not reach (so its handle
check runs all the time), while session "victim" is granted api.test, uses
it, and has it revoked, a hundred times. The daemon starts with a soft
descriptor limit of 1,024, as a login session gives it. Judged from
outside: the upstream listener counts every connection that reached it, and
must see exactly the ones made before each revoke (each grant admits its
connection) and none after a revoke returned. The control run is the same
daemon with a hard limit of 1,024 too, so that it cannot raise it: there
the flood leaves the victim's connection unserved. The revoke-to-refusal
times are printed (bench/cap measures them properly); nothing here is timed
as a pass or a failure."""
import os
import resource
import shutil
import socket
import tempfile
import threading
import time

from mgrlib import UNLIMITED, Checks, Control, Daemon, Upstream, bench_policies, percentile, proxy_config, \
    proxy_connect, raise_nofile

FLOOD = 3000
ROUNDS = 100


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def start(tmp, name, cfg, hard):
    d = Daemon(tmp, name, bench_policies(),
               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard)))
    ctl = Control(d.sock)
    a = ctl.call(op="open_session", name="flood", egress=True, proxy_config=cfg[0])
    b = ctl.call(op="open_session", name="victim", egress=True, proxy_config=cfg[1])
    return d, ctl, a, b


def flood_of(d, a, n, patience):
    """Up to n idle connections to session a's proxy, trying for at most
    `patience` seconds (a proxy out of descriptors leaves its backlog full);
    returns them once the manager's count of descriptors stops growing."""
    base = open_fds(d.p.pid)
    flood = []
    deadline = time.monotonic() + patience
    while len(flood) < n and time.monotonic() < deadline:
        s = socket.socket(socket.AF_UNIX)
        s.setblocking(False)
        try:
            s.connect(os.path.join(a["egress_dir"], "http.sock"))
            flood.append(s)
        except BlockingIOError:
            s.close()
            time.sleep(0.005)
    last, still = -1, 0
    while still < 5 and time.monotonic() < deadline + 10:
        now = open_fds(d.p.pid)
        still = still + 1 if now == last else 0
        last = now
        time.sleep(0.1)
    return flood, last - base


def main():
    chk = Checks()
    hard = raise_nofile()
    if hard < FLOOD + 1000:
        if os.environ.get("SHINKEN_MUST_WORK"):
            chk(False, f"the descriptor limit ({hard}) is too low for a flood of {FLOOD}")
            chk.finish()
        print(f"skip: the descriptor limit ({hard}) is too low for a flood of {FLOOD}")
        os._exit(77)
    tmp = tempfile.mkdtemp(prefix="shk-flood-")
    up = Upstream()
    # The flooding session's proxy has no limits of its own: the manager's
    # defences are what is judged here.
    cfg = (proxy_config(tmp, "api.test", "other.test", limits=UNLIMITED, name="flood.json"),
           proxy_config(tmp, "api.test", "other.test"))
    flood, stop = [], threading.Event()
    d = None
    try:
        d, ctl, a, b = start(tmp, "d", cfg, hard)
        flood, held = flood_of(d, a, FLOOD, 30)
        chk(len(flood) == FLOOD and held >= FLOOD, f"the flooded proxy holds the {FLOOD} connections ({held})")
        asked = [0]

        def busy():
            while not stop.is_set():
                try:
                    s, _ = proxy_connect(a["egress_dir"], "other.test", up.port)
                    s.close()
                    asked[0] += 1
                except OSError:
                    pass
        t = threading.Thread(target=busy, daemon=True)
        t.start()

        latencies, admitted, refused_after, leaks = [], 0, 0, 0
        for _ in range(ROUNDS):
            g = ctl.call(op="grant", session=b["session"], **{"class": "net.egress"},
                         scope={"domains": ["api.test"]})
            if not chk(g.get("ok") is True, f"grant to the victim session: {g}"):
                break
            seen = up.count()
            s, st = proxy_connect(b["egress_dir"], "api.test", up.port)
            s.close()
            admitted += st == 200
            deadline = time.monotonic() + 5
            while up.count() == seen and time.monotonic() < deadline:
                time.sleep(0.001)
            t0 = time.monotonic()
            r = ctl.call(op="revoke", handle=g["handle"])
            returned = up.count()
            s, st = proxy_connect(b["egress_dir"], "api.test", up.port)
            s.close()
            latencies.append(time.monotonic() - t0)
            chk(r.get("ok") is True, f"revoke: {r}")
            refused_after += st == 403
            leaks += up.count() != returned
        stop.set()
        t.join()
        time.sleep(1)
        chk(asked[0] > 0, f"the flooded proxy checked handles meanwhile ({asked[0]} requests)")
        chk(admitted == ROUNDS, f"each grant admitted its connection ({admitted} of {ROUNDS})")
        chk(refused_after == ROUNDS, f"each connection after a revoke was refused ({refused_after} of {ROUNDS})")
        chk(leaks == 0 and up.count() == admitted,
            f"the upstream saw no connection after a revoke returned ({leaks} rounds leaked; "
            f"{up.count()} connections for {admitted} admitted)")
        held = open_fds(d.p.pid)
        chk(held >= FLOOD, f"the flood was still held at the end ({held} descriptors)")
        print(f"revoke -> refusal of the next connection under a flood of {FLOOD} (ms, this test's client): "
              f"p50 {percentile(latencies, 50) * 1e3:.2f}  p99 {percentile(latencies, 99) * 1e3:.2f}  "
              f"max {max(latencies) * 1e3:.2f}")
        ctl.close()
        for s in flood:
            s.close()
        d.stop()
        # The control: a manager that cannot raise its limit runs out, and
        # the other session's next connection is not served.
        d, ctl, a, b = start(tmp, "control", cfg, 1024)
        g = ctl.call(op="grant", session=b["session"], **{"class": "net.egress"}, scope={"domains": ["api.test"]})
        flood, held = flood_of(d, a, FLOOD, 5)
        try:
            s, st = proxy_connect(b["egress_dir"], "api.test", up.port, timeout=3)
            s.close()
        except OSError:
            st = 0
        chk(g.get("ok") is True and st != 200,
            f"control: without the raised limit the flood starves the other session ({held} held, status {st})")
        ctl.close()
    finally:
        stop.set()
        for s in flood:
            s.close()
        if d:
            d.stop()
        up.close()
        shutil.rmtree(tmp, ignore_errors=True)
    chk.finish()


main()

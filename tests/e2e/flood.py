#!/usr/bin/python3
"""A flood on one session's proxy does not delay a revoke in another.

Session "flood" holds 3,000 idle connections to its proxy while session
"victim" is granted api.test, uses it, and has it revoked, a hundred times.
Judged from outside: the upstream listener counts every connection that
reached it, and must see exactly the ones made before each revoke (the
control: each grant admits its connection) and none after a revoke
returned. The revoke-to-refusal times are printed (bench/cap measures them
properly); nothing here is timed as a pass or a failure."""
import os
import shutil
import socket
import tempfile
import time

from mgrlib import Checks, Control, Daemon, Upstream, bench_policies, percentile, proxy_config, proxy_connect, \
    raise_nofile

FLOOD = 3000
ROUNDS = 100


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


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
    cfg = proxy_config(tmp, "api.test")
    d = Daemon(tmp, "d", bench_policies())
    flood = []
    try:
        ctl = Control(d.sock)
        a = ctl.call(op="open_session", name="flood", egress=True, proxy_config=cfg)
        b = ctl.call(op="open_session", name="victim", egress=True, proxy_config=cfg)
        base = open_fds(d.p.pid)
        for _ in range(FLOOD):
            s = socket.socket(socket.AF_UNIX)
            s.connect(os.path.join(a["egress_dir"], "http.sock"))
            flood.append(s)
        deadline = time.monotonic() + 30
        while open_fds(d.p.pid) < base + FLOOD and time.monotonic() < deadline:
            time.sleep(0.05)
        held = open_fds(d.p.pid) - base
        chk(held >= FLOOD, f"the flooded proxy holds the {FLOOD} connections ({held})")

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
        time.sleep(1)
        chk(admitted == ROUNDS, f"control: each grant admitted its connection ({admitted} of {ROUNDS})")
        chk(refused_after == ROUNDS, f"each connection after a revoke was refused ({refused_after} of {ROUNDS})")
        chk(leaks == 0 and up.count() == admitted,
            f"the upstream saw no connection after a revoke returned ({leaks} rounds leaked; "
            f"{up.count()} connections for {admitted} admitted)")
        held = open_fds(d.p.pid) - base
        chk(held >= FLOOD, f"the flood was still held at the end ({held})")
        print(f"revoke -> refusal of the next connection under a flood of {FLOOD} (ms, this test's client): "
              f"p50 {percentile(latencies, 50) * 1e3:.2f}  p99 {percentile(latencies, 99) * 1e3:.2f}  "
              f"max {max(latencies) * 1e3:.2f}")
        ctl.close()
    finally:
        for s in flood:
            s.close()
        d.stop()
        up.close()
        shutil.rmtree(tmp, ignore_errors=True)
    chk.finish()


main()

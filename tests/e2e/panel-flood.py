#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A flood of idle connections to the Permission Panel stops neither the
page nor the control socket.

A daemon with a descriptor limit of 1,024 (soft and hard, so that it cannot
raise it) serves the panel with its default cap on connections; a local
client opens 2,000 connections to the panel's port and sends nothing on
them. Judged from outside, while the flood is held: the daemon holds no
more descriptors than the cap allows, the control socket answers, a
logged-in browser's requests (the page and its state) are served, and the
flood's oldest connections were closed by the daemon. The control run is
the same daemon with the cap lifted (panel.max_connections 100000): there
the flood takes the daemon's descriptors and the control socket gives no
answer."""
import http.client
import json
import os
import resource
import socket
import tempfile
import time

from mgrlib import Checks, Control, Daemon, raise_nofile

FLOOD = 2000
CAP = 64  # the default panel.max_connections
SLACK = 16


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def start(tmp, name, panel):
    d = Daemon(tmp, name, config={"panel": panel},
               preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (1024, 1024)))
    d.p.stdout.readline()  # audit log ...
    url = d.p.stdout.readline().strip()[len("panel "):]
    base, _, token = url.partition("/login#")
    host = base[len("http://"):]
    addr, _, port = host.rpartition(":")
    return d, base, host, addr, int(port), token


def request(addr, port, host, method, path, headers=None, body=None, timeout=5):
    """(status, headers, body), or (None, error text) when nothing came."""
    try:
        c = http.client.HTTPConnection(addr, port, timeout=timeout)
        h = {"Host": host}
        h.update(headers or {})
        c.request(method, path, body=json.dumps(body).encode() if body is not None else None, headers=h)
        r = c.getresponse()
        out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        c.close()
        return out
    except OSError as e:
        return None, str(e), b""


def login(addr, port, host, base, token):
    s, h, body = request(addr, port, host, "POST", "/api/login",
                         {"Origin": base, "Content-Type": "application/json"}, {"token": token})
    cookie = (h.get("set-cookie", "") if s == 200 else "").split(";")[0]
    return cookie


def flood(addr, port, n, patience=10):
    """n connections, each made once the last one is (so that the kernel's
    backlog does not drop them), for at most `patience` seconds: a daemon
    out of descriptors leaves its backlog full."""
    socks = []
    deadline = time.monotonic() + patience
    while len(socks) < n and time.monotonic() < deadline:
        s = socket.socket()
        s.settimeout(0.2)
        try:
            s.connect((addr, port))
        except OSError:
            pass
        s.setblocking(False)
        socks.append(s)
    return socks


def closed_by_peer(socks):
    """How many of the flood's connections the daemon closed (EOF or reset)."""
    n = 0
    for s in socks:
        try:
            if s.recv(1) == b"":
                n += 1
        except BlockingIOError:
            pass
        except OSError:
            n += 1
    return n


def control_answers(sock):
    try:
        ctl = Control(sock, timeout=3)
        a = ctl.call(op="sessions")
        ctl.close()
        return a.get("ok") is True
    except (OSError, ValueError, RuntimeError):
        return False


def settle(pid, secs=10):
    """The daemon's descriptor count once it stops changing."""
    last, still, end = -1, 0, time.monotonic() + secs
    while still < 5 and time.monotonic() < end:
        now = open_fds(pid)
        still = still + 1 if now == last else 0
        last = now
        time.sleep(0.1)
    return last


def main():
    chk = Checks()
    raise_nofile()
    tmp = tempfile.mkdtemp(prefix="shk-panel-flood-")

    # With the cap (the default).
    d, base, host, addr, port, token = start(tmp, "capped", {"listen": "127.0.0.1:0"})
    try:
        cookie = login(addr, port, host, base, token)
        chk(cookie.startswith("shk_panel="), f"the test logs in ({cookie!r})")
        base_fds = open_fds(d.p.pid)
        socks = flood(addr, port, FLOOD)
        held = settle(d.p.pid)
        chk(held - base_fds <= CAP + SLACK,
            f"with {FLOOD} idle connections the daemon holds at most the cap of them ({held - base_fds} more "
            f"descriptors)")
        chk(control_answers(d.sock), "the control socket answers during the flood")
        s, _, body = request(addr, port, host, "GET", "/")
        chk(s == 200 and b"panel.js" in body, f"the page loads during the flood ({s})")
        s, _, body = request(addr, port, host, "GET", "/api/state", {"Cookie": cookie})
        chk(s == 200 and json.loads(body or b"{}").get("ok") is True,
            f"a logged-in request is answered during the flood ({s} {body[:80]!r})")
        gone = closed_by_peer(socks)
        chk(gone > 0, f"the daemon closed flood connections to make room ({gone} of {FLOOD})")
        for x in socks:
            x.close()
    finally:
        d.stop()

    # The control: the cap lifted, the same flood.
    d, base, host, addr, port, token = start(tmp, "uncapped", {"listen": "127.0.0.1:0", "max_connections": 100000})
    try:
        base_fds = open_fds(d.p.pid)
        socks = flood(addr, port, FLOOD)
        held = settle(d.p.pid)
        chk(held - base_fds > CAP + SLACK, f"control: without the cap the flood takes descriptors "
                                          f"({held - base_fds} more)")
        chk(not control_answers(d.sock), f"control: without the cap the control socket gives no answer "
                                         f"({held} descriptors)")
        for x in socks:
            x.close()
    finally:
        d.stop()
    chk.finish()


main()

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The control plane holds against its own clients and against a shortage
of descriptors, judged from outside with real clients of a real daemon:

- 128 idle clients and one that sends requests and never reads answers do
  not stop a fresh client's `shinken sessions` (its latency is printed); the
  client that never reads is dropped, while one that sends as much and reads
  is not (the control);
- a client that owns no session and sends nothing is closed after the idle
  time; one that sent a request and then nothing too; one that opened a
  session stays as long as its session (the control);
- connections are capped per peer uid: the one over the cap is told so, and
  a connection is admitted again once one closes;
- with its descriptors used up by a flood on a session's proxy (whose own
  per-session limits are lifted for the purpose), the manager
  refuses a new client with a line saying so (it does not leave it waiting),
  answers the clients it has, and does not spin; once the flood ends it
  serves new clients again;
- the manager raises its soft descriptor limit to the hard one."""
import fcntl
import os
import shutil
import socket
import struct
import resource
import tempfile
import termios
import time

from mgrlib import UNLIMITED, Checks, Control, Daemon, closed_by_peer, cpu_seconds, proxy_config

chk = Checks()


def pending_bytes(s):
    """Bytes waiting in the socket's receive queue."""
    return struct.unpack("i", fcntl.ioctl(s.fileno(), termios.FIONREAD, b"\0\0\0\0"))[0]


def stuck_and_idle(tmp):
    d = Daemon(tmp, "stuck")
    idle, stuck = [], None
    try:
        for _ in range(128):
            s = socket.socket(socket.AF_UNIX)
            s.connect(d.sock)
            idle.append(s)
        rc, out, err, t = d.cli("sessions")
        chk(rc == 0, f"128 idle clients: a fresh client is served ({rc}, {err!r})")
        # One client sends requests and never reads: the answers fill its
        # receive queue, then wait in the manager's buffer for it.
        stuck = socket.socket(socket.AF_UNIX)
        stuck.connect(d.sock)
        stuck.setblocking(False)
        req = b'{"op":"sessions"}\n' * 256
        dropped = False

        def pump(seconds):
            nonlocal dropped
            end = time.monotonic() + seconds
            while time.monotonic() < end and not dropped:
                try:
                    stuck.send(req)
                except BlockingIOError:
                    time.sleep(0.005)
                except OSError:
                    dropped = True
                time.sleep(0.002)
        # Until its receive queue stops growing: the kernel holds no more.
        last, still = -1, 0
        deadline = time.monotonic() + 20
        while still < 5 and time.monotonic() < deadline and not dropped:
            pump(0.1)
            n = pending_bytes(stuck)
            still = still + 1 if n == last else 0
            last = n
        chk(last > 0, f"the stuck client's receive queue is full ({last} bytes)")
        times = []
        for _ in range(5):
            pump(0.2)
            rc, out, err, t = d.cli("sessions", "--json", timeout=20)
            chk(rc == 0 and '"ok":true' in out, f"with a client that never reads, a fresh client is served ({rc} {err!r})")
            times.append(t)
        print("a fresh client's `shinken sessions` beside 128 idle clients and one that never reads: "
              + ", ".join(f"{t * 1e3:.0f} ms" for t in times))
        # It is dropped once it leaves more than its share unread.
        deadline = time.monotonic() + 60
        while not dropped and time.monotonic() < deadline:
            pump(0.5)
        chk(dropped, "the client that never reads is dropped")
        # The control: a client that reads, sending the same, is kept.
        reader = Control(d.sock)
        ok = all(reader.call(op="sessions").get("ok") for _ in range(3000))
        chk(ok, "a client that reads its answers is served throughout")
        reader.close()
        # With the idle clients still there, the manager does not spin.
        c0 = cpu_seconds(d.p.pid)
        time.sleep(2)
        used = cpu_seconds(d.p.pid) - c0
        chk(used < 0.5, f"the manager is quiet beside 128 idle clients ({used:.2f} s of CPU in 2 s)")
    finally:
        for s in idle:
            s.close()
        if stuck:
            stuck.close()
        d.stop()


def idle_timeout(tmp):
    d = Daemon(tmp, "idle", {"control_idle_ms": 1000})
    try:
        silent = socket.socket(socket.AF_UNIX)
        silent.connect(d.sock)
        talker = Control(d.sock)
        talker.call(op="sessions")
        owner = Control(d.sock)
        sid = owner.call(op="open_session").get("session")
        chk(not closed_by_peer(silent, 0.3), "an idle client is not closed at once")
        chk(closed_by_peer(silent, 5), "an idle client that owns no session is closed after the idle time")
        chk(closed_by_peer(talker.s, 5), "a client that sent a request and then nothing is closed too")
        chk(not closed_by_peer(owner.s, 2.5), "control: a client that opened a session stays while it is idle")
        rc, out, err, _ = d.cli("sessions")
        chk(rc == 0 and sid and sid in out, f"its session stays open ({out!r})")
        owner.close()
        deadline = time.monotonic() + 5
        while sid in d.cli("sessions")[1] and time.monotonic() < deadline:
            time.sleep(0.05)
        chk(sid not in d.cli("sessions")[1], "when it goes, its session ends")
        silent.close()
        talker.close()
    finally:
        d.stop()


def caps(tmp):
    d = Daemon(tmp, "caps", {"control_max_clients_per_uid": 4})
    try:
        held = [Control(d.sock) for _ in range(4)]
        rc, out, err, _ = d.cli("sessions")
        chk(rc == 4 and "too many control connections from uid" in err, f"the connection over the cap is refused ({rc}, {err!r})")
        chk(all(c.call(op="sessions").get("ok") for c in held), "the connections under the cap are served")
        held.pop().close()
        time.sleep(0.2)
        rc, out, err, _ = d.cli("sessions")
        chk(rc == 0, f"once one closes, a new one is admitted ({rc}, {err!r})")
        for c in held:
            c.close()
    finally:
        d.stop()


def exhaustion(tmp):
    # The raise: a soft limit below the hard one is taken to the hard one.
    d = Daemon(tmp, "raise", preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 1024)))
    with open(f"/proc/{d.p.pid}/limits") as f:
        line = next(l for l in f if l.startswith("Max open files"))
    chk(line.split()[3:5] == ["1024", "1024"], f"the manager raised its soft descriptor limit to the hard one ({line!r})")
    d.stop()
    # Too few descriptors: a proxy flood uses them up.
    d = Daemon(tmp, "exhaust", preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256)))
    flood = []
    try:
        held = Control(d.sock)
        a = held.call(op="open_session", egress=True,
                      proxy_config=proxy_config(tmp, "api.test", limits=UNLIMITED, name="unlimited.json"))
        # Connect until the manager holds as many descriptors as it may
        # (the proxy's backlog holds the rest).
        deadline = time.monotonic() + 20
        while len(os.listdir(f"/proc/{d.p.pid}/fd")) < 256 and time.monotonic() < deadline:
            s = socket.socket(socket.AF_UNIX)
            s.setblocking(False)
            try:
                s.connect(os.path.join(a["egress_dir"], "http.sock"))
                flood.append(s)
            except BlockingIOError:
                s.close()
                time.sleep(0.01)
        chk(len(os.listdir(f"/proc/{d.p.pid}/fd")) >= 256, "the flood used up the manager's descriptors")
        time.sleep(1)
        rc, out, err, t = d.cli("sessions", timeout=20)
        chk(rc == 4 and "file descriptors" in err,
            f"out of descriptors, a new client is told so at once ({rc}, {err!r}, {t:.2f} s)")
        chk(held.call(op="sessions").get("ok") is True, "a client already connected is still answered")
        c0 = cpu_seconds(d.p.pid)
        time.sleep(2)
        used = cpu_seconds(d.p.pid) - c0
        chk(used < 0.5, f"out of descriptors, the manager does not spin ({used:.2f} s of CPU in 2 s)")
        for s in flood:
            s.close()
        flood = []
        deadline = time.monotonic() + 15
        rc = -1
        while rc != 0 and time.monotonic() < deadline:
            rc, out, err, _ = d.cli("sessions")
            time.sleep(0.2)
        chk(rc == 0, f"once the flood is gone, new clients are served ({err!r})")
        held.close()
    finally:
        for s in flood:
            s.close()
        d.stop()


def main():
    tmp = tempfile.mkdtemp(prefix="shk-control-")
    try:
        stuck_and_idle(tmp)
        idle_timeout(tmp)
        caps(tmp)
        exhaustion(tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    chk.finish()


main()

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""run-ask.py: the inline prompt of `shinken run --net proxy` (its manager
embedded), driven through a real pseudo-terminal as a person at a terminal
would use it.

A connection no handle covers, to a host the default manifest puts at Ask
(**.test), is held at the session's proxy and its card is drawn on the
caller's terminal; the test reads the terminal and presses the keys. What
the workload's curl got, what a loopback upstream saw (it counts every
request by its Host) and what the run's control socket says about the open
cards are all judged from outside the sandbox:

- [o] approve once: the held request goes on with the upstream's bytes, and
  the next one to the same host raises a new card;
- [d] deny: 403 with X-Shinken-Decision and the human's reason, and the
  upstream saw nothing;
- [s] approve for the session: later requests to that host go through with
  no card;
- [p] approve the pattern (a.pat.test's card offers *.pat.test at its
  port): the held request goes on and the sibling b.pat.test raises no
  card; [c] cancel refuses the request, and a top-level name (cancel.test)
  is offered no pattern;
- while a card shows, the workload's output is held back (it cannot draw
  over the card), and a key that is not the card's answers nothing;
- self-approval: while a card is open, the workload types the answer into
  its own terminal (TIOCSTI and /dev/tty) and tries every control socket it
  can name; the card stays open (the run's socket lists it) and the request
  stays held. The control: the same attacker run outside the sandbox does
  resolve a card.
- the control run: without a terminal the same request is refused at once,
  no card is raised, and the summary says how to grant.
"""
import atexit
import fcntl
import http.server
import json
import os
import re
import select
import shutil
import signal
import socketserver
import struct
import subprocess
import sys
import termios
import threading
import time

SHINKEN = os.environ["SHINKEN"]
TIMEOUT = 30
CARD = b"[o] approve once"

# The attacker: run inside the sandbox (and, for the control, outside it)
# while a card is open. It types the answers into its terminal and sends a
# resolution of every card it can list to every control socket it can find.
# It writes what it tried to the file argv[1] (for the log only: the effect
# is judged from outside).
ATTACKER = r'''
import fcntl, glob, json, os, socket, sys, termios
log = []
for key in (b"s", b"o"):
    try:
        fcntl.ioctl(0, termios.TIOCSTI, key)
        log.append("TIOCSTI %r: sent" % key)
    except OSError as e:
        log.append("TIOCSTI %r: %s" % (key, e))
try:
    with open("/dev/tty", "wb", buffering=0) as t:
        t.write(b"s")
    log.append("/dev/tty: written")
except OSError as e:
    log.append("/dev/tty: %s" % e)
paths = set(glob.glob(sys.argv[2] + "/**/*.sock", recursive=True))
# The run's own control socket, by its name (the test wrote the run's pid).
with open(sys.argv[3]) as f:
    paths.add(sys.argv[2] + "/shinken/run-%s.sock" % f.read().strip())
for d in ("/run", "/tmp", "/var/tmp", os.environ.get("XDG_RUNTIME_DIR", "/nonexistent")):
    paths |= set(glob.glob(d + "/**/*.sock", recursive=True))
for p in sorted(paths):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(3)
        s.connect(p)
        f = s.makefile("rwb")
        def call(**req):
            f.write(json.dumps(req).encode() + b"\n")
            f.flush()
            return json.loads(f.readline() or b"{}")
        cards = call(op="cards").get("cards", [])
        for c in cards:
            log.append("%s: resolve %s -> %s" % (p, c.get("id"), call(op="resolve", card=c.get("id"),
                                                                       resolution="session", surface="inline")))
            log.append("%s: resolve %s -> %s" % (p, c.get("id"), call(op="resolve", card=c.get("id"),
                                                                       resolution="session")))
        log.append("%s: %d cards" % (p, len(cards)))
    except Exception as e:
        log.append("%s: %s" % (p, e))
with open(sys.argv[1], "w") as f:
    f.write("\n".join(log) + "\n")
'''


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lib import fail, scratch, skip  # noqa: E402  (tests/lib.py: how a test skips and fails)


def read_count(path):
    """The counter the workload writes (0 before its first write)."""
    try:
        with open(path) as f:
            return int(f.read().strip() or 0)
    except (OSError, ValueError):
        return 0


def ok(cond, what):
    if not cond:
        fail(what)
    print("ok: " + what, file=sys.stderr)


class Upstream:
    """A loopback HTTP server that answers "hello HOST" and counts the
    requests it got for each Host."""

    def __init__(self):
        counts = self.counts = {}
        lock = self.lock = threading.Lock()

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                host = (self.headers.get("Host") or "").split(":")[0]
                with lock:
                    counts[host] = counts.get(host, 0) + 1
                body = ("hello %s\n" % host).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *a):
                pass

        socketserver.ThreadingTCPServer.daemon_threads = True
        self.srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.port = self.srv.server_address[1]
        threading.Thread(target=self.srv.serve_forever, daemon=True).start()

    def count(self, host):
        with self.lock:
            return self.counts.get(host, 0)


class Terminal:
    """A pty whose slave is the controlling terminal of one command."""

    def __init__(self, argv, env, cwd):
        self.master, self.slave = os.openpty()
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 120, 0, 0))
        self.seen = b""
        slave = self.slave

        def child():
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave, env=env, cwd=cwd,
                                     preexec_fn=child, close_fds=True)
        atexit.register(self.close)

    def send(self, data):
        os.write(self.master, data)

    def read_for(self, seconds):
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            r, _, _ = select.select([self.master], [], [], left)
            if r:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    return
                self.seen += chunk

    def expect(self, needle, what, timeout=TIMEOUT):
        """Reads until NEEDLE appears after the last match; returns what came before it."""
        end = time.monotonic() + timeout
        while needle not in self.seen:
            left = end - time.monotonic()
            if left <= 0 or self.proc.poll() is not None and not select.select([self.master], [], [], 0)[0]:
                fail("%s: %r never appeared; the terminal showed:\n%s"
                     % (what, needle, self.seen.decode(errors="replace")))
            self.read_for(min(left, 0.2))
        before, _, self.seen = self.seen.partition(needle)
        return before

    def wait(self, what):
        end = time.monotonic() + TIMEOUT
        while self.proc.poll() is None:
            if time.monotonic() > end:
                fail("%s: the command did not end; the terminal showed:\n%s"
                     % (what, self.seen.decode(errors="replace")))
            self.read_for(0.1)
        self.read_for(0.2)
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        for fd in (self.master, self.slave):
            try:
                os.close(fd)
            except OSError:
                pass


def plain(b):
    """The terminal's bytes without escape sequences."""
    return re.sub(rb"\x1b(\[[0-9;?]*[A-Za-z]|[78\\(][B]?|[78\\])|[\x0f\x18]", b"", b).decode(errors="replace")


def cli(env, *args):
    p = subprocess.run([SHINKEN] + list(args), env=env, capture_output=True, text=True, timeout=30)
    print("--- shinken %s -> %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr), file=sys.stderr)
    return p.returncode, p.stdout, p.stderr


def open_cards(env, sid):
    rc, out, _ = cli(env, "approvals", sid, "--json")
    return json.loads(out).get("cards", []) if rc == 0 else None


def sandbox_procs(root):
    """{pid: state} of root's descendants in another PID namespace (the
    sandbox's processes), read from /proc outside it."""
    own = os.stat("/proc/self/ns/pid").st_ino
    procs = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                rest = f.read().rsplit(")", 1)[1].split()
            ns = os.stat("/proc/%s/ns/pid" % d).st_ino
        except OSError:
            continue
        procs[int(d)] = (int(rest[1]), rest[0], ns)
    mine, changed = set(), True
    while changed:
        changed = False
        for pid, (ppid, _, _) in procs.items():
            if pid not in mine and (ppid == root or ppid in mine):
                mine.add(pid)
                changed = True
    return {p: procs[p][1] for p in mine if procs[p][2] != own and procs[p][1] not in "ZX"}


def cgroup_frozen(pid):
    """Whether the cgroup freezer holds PID, read from outside: its cgroup v1
    freezer's freezer.state, or its cgroup v2 cgroup's cgroup.events."""
    try:
        with open("/proc/%d/cgroup" % pid) as f:
            lines = f.read().splitlines()
    except OSError:
        return False
    for line in lines:
        _, ctl, path = line.split(":", 2)
        try:
            if "freezer" in ctl.split(","):
                with open("/sys/fs/cgroup/freezer%s/freezer.state" % path) as f:
                    if f.read().strip() == "FROZEN":
                        return True
            elif ctl == "" and path != "/":
                base = "/sys/fs/cgroup/unified" if os.path.isdir("/sys/fs/cgroup/unified") else "/sys/fs/cgroup"
                with open("%s%s/cgroup.events" % (base, path)) as f:
                    if "frozen 1" in f.read().splitlines():
                        return True
        except OSError:
            pass
    return False


def stop_pending(pid):
    """Whether a SIGSTOP is pending for PID, read from its /proc status."""
    try:
        with open("/proc/%d/status" % pid) as f:
            masks = [int(l.split()[1], 16) for l in f if l.startswith(("SigPnd:", "ShdPnd:"))]
    except (OSError, ValueError, IndexError):
        return False
    return any(m & (1 << (signal.SIGSTOP - 1)) for m in masks)


def held(root):
    """{pid: how} for the sandbox's processes under ROOT: "frozen" where the
    cgroup freezer holds it, "stopped" where a signal stopped it, "stopping"
    where it sleeps in the kernel (state D) with a SIGSTOP pending (it runs
    nothing of its own before it stops: a shell's vfork parent waiting for
    a stopped child stays there), else its /proc state. As root the session
    has a cgroup, so the freezer must hold it; an unprivileged caller
    without a delegated cgroup is stopped."""
    return {p: "frozen" if cgroup_frozen(p) else "stopped" if s in "Tt"
            else "stopping" if s == "D" and stop_pending(p) else s
            for p, s in sandbox_procs(root).items()}


HELD = ("frozen", "stopped", "stopping")


def all_held(how):
    want = ("frozen",) if os.geteuid() == 0 else HELD
    return bool(how) and all(h in want for h in how.values())


def takeover(run, env, ws, how):
    """Take over from the CLI, then resume: the cgroup freezer holds every
    process of the sandbox, judged from outside by the freezer's state and
    by a counter the workload writes, which stops advancing and goes on
    after resume. HOW names the manager hosting the session."""
    counter, stop = ws + "/counter", ws + "/stop"
    script = ("i=0; while [ ! -e stop ]; do i=$((i+1)); echo $i > counter.new; mv counter.new counter; sleep 0.02; done; "
              "echo AFTER-TAKEOVER")
    t = Terminal(run + ["--", "sh", "-c", script], env, ws)
    banner = t.expect(b"grant egress with: ", "%s takeover: the session line" % how)
    sid = re.search(rb"session (\S+);", banner).group(1).decode()
    m = re.search(rb"SHINKEN_SOCKET=(\S+)", t.seen)
    cenv = dict(env, SHINKEN_SOCKET=m.group(1).decode()) if m else env


    def runs(procs):
        return bool(procs) and not any(h in HELD for h in procs.values())

    end = time.monotonic() + TIMEOUT
    while read_count(counter) == 0 and time.monotonic() < end:
        time.sleep(0.05)
    before, c0 = held(t.proc.pid), read_count(counter)
    time.sleep(0.3)
    ok(runs(before) and read_count(counter) > c0 > 0,
       "%s takeover control: the sandbox runs and its counter advances (%s, %d)" % (how, before, c0))
    rc, out, err = cli(cenv, "takeover", sid)
    frozen = held(t.proc.pid)
    if how == "daemon" and os.geteuid() != 0 and not any(h == "frozen" for h in frozen.values()):
        # An unprivileged caller's sandbox has no cgroup of its own here,
        # and the daemon did not launch it: refused, saying so, and nothing
        # is left half-frozen.
        ok(rc != 0 and "no freezer" in err and runs(frozen) and read_count(counter) > c0,
           "%s takeover without a cgroup: refused with the reason, the sandbox still runs (%s)" % (how, err.strip()))
        open(stop, "w").close()
        t.expect(b"AFTER-TAKEOVER", "%s: the workload ends" % how)
        ok(t.wait("shinken run") == 0, "%s: the command ends normally" % how)
        t.close()
        os.unlink(stop)
        os.unlink(counter)
        return
    ok(rc == 0 and all_held(frozen),
       "%s takeover: the cgroup freezer holds every process of the sandbox (%d %s %s)" % (how, rc, frozen, err))
    time.sleep(0.1)
    c1 = read_count(counter)
    time.sleep(0.6)
    ok(read_count(counter) == c1, "%s takeover: the counter stops advancing while frozen (%d, %d)" % (how, c1, read_count(counter)))
    open(stop, "w").close()
    t.read_for(0.8)
    ok(b"AFTER-TAKEOVER" not in t.seen, "%s takeover: the workload does not go on" % how)
    os.unlink(stop)
    rc, out, _ = cli(cenv, "resume", sid)
    ok(rc == 0, "%s resume is answered" % how)
    time.sleep(0.4)
    after = held(t.proc.pid)
    ok(read_count(counter) > c1 and runs(after),
       "%s resume: the processes are thawed and the counter advances again (%d > %d, %s)" % (how, read_count(counter), c1, after))
    open(stop, "w").close()
    t.expect(b"AFTER-TAKEOVER", "%s: the workload after resume" % how)
    ok(t.wait("shinken run after resume") == 0, "%s resume: the command ends normally" % how)
    t.close()
    os.unlink(stop)
    os.unlink(counter)


def takeover_vfork(run, env, ws, rounds=6):
    """Take over a workload whose shell starts programs with vfork(2), as
    dash does: a freeze may find a vfork parent waiting in the kernel
    (state D) for a child that was stopped before it could exec, and no
    signal stops that parent until the child goes on. First on purpose:
    shk-vfork-park leaves its parent so, before the take over, beside a
    loop that writes a counter. Then ROUNDS times on a shell loop that
    runs programs back to back. Each round is judged from outside: the take
    over is answered, every process of the sandbox is held, and the counter
    stops; after resume it advances again."""
    counter, stop = ws + "/counter", ws + "/stop"
    park = os.path.join(os.environ["SHINKEN_BUILDDIR"], "tests", "cli", "shk-vfork-park")
    script = ("(i=0; while [ ! -e stop ]; do i=$((i+1)); echo $i > counter.new; mv counter.new counter; "
              "/bin/true; done) & %s; echo PARK-DONE=$?; wait; echo AFTER-VFORK" % park)
    t = Terminal(run + ["--", "sh", "-c", script], env, ws)
    banner = t.expect(b"grant egress with: ", "vfork takeover: the session line")
    sid = re.search(rb"session (\S+);", banner).group(1).decode()
    cenv = dict(env, SHINKEN_SOCKET=re.match(rb"SHINKEN_SOCKET=(\S+)", t.seen).group(1).decode())

    def advances(past):
        end = time.monotonic() + TIMEOUT
        while read_count(counter) <= past and time.monotonic() < end:
            time.sleep(0.02)
        return read_count(counter) > past

    def parked():
        return [p for p, s in sandbox_procs(t.proc.pid).items() if s == "D" and not stop_pending(p)]

    end = time.monotonic() + TIMEOUT
    while not parked() and time.monotonic() < end:
        time.sleep(0.05)
    ok(parked() and advances(0),
       "vfork takeover control: a vfork parent waits in the kernel with no stop pending, and the counter advances (%s)"
       % held(t.proc.pid))
    for i in range(rounds + 1):
        rc, _, err = cli(cenv, "takeover", sid)
        frozen = held(t.proc.pid)
        ok(rc == 0 and all_held(frozen),
           "vfork takeover %d: answered, and every process of the sandbox is held (%d %s %s)"
           % (i, rc, frozen, err.strip()))
        c1 = read_count(counter)
        time.sleep(0.3)
        ok(read_count(counter) == c1, "vfork takeover %d: the counter stops (%d, %d)" % (i, c1, read_count(counter)))
        rc, _, _ = cli(cenv, "resume", sid)
        ok(rc == 0 and advances(c1), "vfork takeover %d: after resume the counter advances again" % i)
        if i == 0:
            # The parked child stopped itself: resume by the cgroup
            # freezer leaves it so. Continued from here, it runs.
            for p, s in sandbox_procs(t.proc.pid).items():
                if s in "Tt":
                    os.kill(p, signal.SIGCONT)
            t.expect(b"PARK-DONE=0", "vfork takeover: the parked program ends")
    open(stop, "w").close()
    t.expect(b"AFTER-VFORK", "vfork takeover: the workload ends")
    ok(t.wait("shinken run after the vfork takeovers") == 0, "vfork takeover: the command ends normally")
    t.close()
    os.unlink(stop)
    os.unlink(counter)


def inline_takeover(run, env, ws, P, up):
    """Take over from the inline prompt: [t] on a card freezes the sandbox
    (judged from outside: the freezer's state, a counter that stops), the
    prompt offers resume or end; [r] thaws it and draws the card again,
    which [o] then approves; a second run is ended with [e] while frozen,
    and its upstream gets nothing."""
    counter = ws + "/counter"
    ticker = "(i=0; while :; do i=$((i+1)); echo $i > counter.new; mv counter.new counter; sleep 0.02; done) & T=$!; "
    script = (ticker + "curl -sS --max-time 60 http://tk.test:%d/; echo RC-tk=$?; kill $T; echo AFTER-TK" % P)
    cmd = run + ["--resolve", "tk.test:127.0.0.1", "--", "sh", "-c", script]


    for key in (b"r", b"e"):
        t = Terminal(cmd, env, ws)
        t.expect(CARD, "inline takeover: the card for tk.test")
        t.read_for(0.6)
        ok("[t] take over" in plain(t.seen), "inline takeover: the card offers [t] take over")
        end = time.monotonic() + TIMEOUT
        while read_count(counter) == 0 and time.monotonic() < end:
            time.sleep(0.05)
        c0 = read_count(counter)
        ok(c0 > 0 and not all_held(held(t.proc.pid)), "inline takeover control: the sandbox runs (%d)" % c0)
        t.send(b"t")
        shown = plain(t.expect(b"[e] end the session", "inline takeover: the take over prompt"))
        frozen = held(t.proc.pid)
        ok(all_held(frozen), "inline takeover: [t] freezes every process of the sandbox (%s)" % frozen)
        c1 = read_count(counter)
        time.sleep(0.6)
        ok(read_count(counter) == c1, "inline takeover: the counter stops while frozen (%d, %d)" % (c1, read_count(counter)))
        t.send(key)
        if key == b"r":
            plain(t.expect(CARD, "inline takeover: the card again after resume"))
            time.sleep(0.2)
            ok(read_count(counter) > c1 and not all_held(held(t.proc.pid)),
               "inline takeover: [r] thaws the sandbox, its counter goes on, the card is drawn again")
            time.sleep(0.6)
            t.send(b"o")
            out = plain(t.expect(b"AFTER-TK", "inline takeover: the workload after approve"))
            ok("hello tk.test" in out and up.count("tk.test") == 1,
               "inline takeover: the card still approves after resume, on the same connection")
            ok(t.wait("shinken run after inline resume") == 0, "inline takeover: the command ends normally")
        else:
            rc = t.wait("shinken run ended while taken over")
            ok(rc != 0 and b"AFTER-TK" not in t.seen and b"the session was ended" in t.seen and up.count("tk.test") == 1,
               "inline takeover: [e] kills the frozen sandbox, the run says why, the upstream got nothing (%d)" % rc)
        t.close()
    os.unlink(counter)


def breaker(run, env, ws, P, answer):
    """Three denials in a row trip the breaker: the session is frozen (every
    process of the sandbox stopped, seen from /proc) and a breaker card
    asks to resume or end it; ANSWER is the key."""
    script = ("for h in d1 d2 d3; do curl -sS --max-time 60 -o /dev/null -w \"%%{http_code}\\n\" "
              "http://$h.test:%d/; echo RC-$h=$?; done; sleep 0.3; echo AFTER-BREAKER" % P)
    t = Terminal(run + ["--", "sh", "-c", script], env, ws)
    t.expect(b"grant egress with: ", "breaker: the session line")
    for i, h in enumerate(("d1", "d2", "d3")):
        t.expect(CARD, "breaker: the card for %s" % h)
        if i == 0:
            before = sandbox_procs(t.proc.pid)
            ok(before and not all(s == "T" for s in before.values()),
               "breaker control: before the breaker, the sandbox's processes run (%s)" % before)
        time.sleep(0.6)
        t.send(b"d")
    t.expect(b"[r] resume", "the breaker card")
    frozen = held(t.proc.pid)
    ok(all_held(frozen), "breaker: after three denials every process of the sandbox is frozen (%s)" % frozen)
    time.sleep(1.0)
    ok(b"AFTER-BREAKER" not in t.seen, "breaker: the workload does not go on while frozen")
    time.sleep(0.3)
    t.send(answer)
    return t


def main():
    if not shutil.which("curl"):
        skip("no curl")
    # --as-user: the same test as an unprivileged caller (uid 65534), which
    # root becomes with setpriv.
    if sys.argv[1:] == ["--as-user"]:
        if os.geteuid() != 0:
            skip("needs root to become another user")
        if not shutil.which("setpriv"):
            skip("no setpriv")
        # The system's interpreter: root's own may live where that user
        # cannot read.
        py = "/usr/bin/python3" if os.access("/usr/bin/python3", os.X_OK) else sys.executable
        os.execvp("setpriv", ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "--",
                              py, os.path.abspath(__file__)])
    tmp = scratch("shk-run-ask.")
    atexit.register(shutil.rmtree, tmp, True)
    ws, xdg = tmp + "/ws", tmp + "/xdg"
    os.mkdir(ws)
    os.mkdir(xdg, 0o700)
    with open(ws + "/attacker.py", "w") as f:
        f.write(ATTACKER)
    up = Upstream()
    env = {"PATH": "/usr/bin:/bin", "TERM": "xterm", "HOME": tmp, "XDG_RUNTIME_DIR": xdg,
           "SHINKEN_SOCKET": tmp + "/no-daemon.sock",
           "SHINKEN_POLICY_DIR": os.environ.get("SHINKEN_POLICY_DIR", "")}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if k in os.environ:
            env[k] = os.environ[k]
    hosts = ["once.test", "deny.test", "sess.test", "a.pat.test", "b.pat.test", "cancel.test", "tick.test",
             "self.test", "ctl.test"]
    run = [SHINKEN, "run"] + (["--allow-degraded"] if os.getuid() == 0 else []) + ["--net", "proxy",
                                                                                   "--allow-cidr", "127.0.0.1/32"]
    for h in hosts:
        run += ["--resolve", h + ":127.0.0.1"]
    P = up.port

    def get(host, tag):
        return ("curl -sS --max-time 60 -D - http://%s:%d/; echo RC-%s=$?; " % (host, P, tag))

    # ---- the control: no terminal, so no card; refused at once ----
    script = get("once.test", "ctl")
    start = time.monotonic()
    p = subprocess.run(run + ["--", "sh", "-c", script], env=env, cwd=ws, stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=60)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    print("--- control run\n%s%s" % (out, err), file=sys.stderr)
    ok("403" in out.split("\n", 1)[0] and "RC-ctl=0" in out,
       "control: without a terminal the request is refused at once (403)")
    ok(time.monotonic() - start < 20 and up.count("once.test") == 0, "control: the upstream saw nothing")
    ok("shinken grant" in err, "control: the summary says how to grant")

    # ---- the inline prompt ----
    script = ("trap 'kill $T 2>/dev/null' EXIT; "
              + get("once.test", "once1") + get("once.test", "once2") + get("deny.test", "deny")
              + get("sess.test", "sess1") + get("sess.test", "sess2")
              + get("a.pat.test", "pat1") + get("b.pat.test", "pat2") + get("cancel.test", "cancel")
              + "(while :; do echo TICK; sleep 0.05; done) & T=$!; " + get("tick.test", "tick")
              + "kill $T; wait $T 2>/dev/null; echo TICKER-STOPPED; "
              + "(" + get("self.test", "self").rstrip("; ") + ") & C=$!; sleep 1.5; "
              + "python3 attacker.py inside.log %s run.pid; wait $C; " % xdg
              + get("ctl.test", "ctl") + "echo ALL-DONE")
    t = Terminal(run + ["--", "sh", "-c", script], env, ws)
    with open(ws + "/run.pid", "w") as f:
        f.write("%d\n" % t.proc.pid)
    banner = t.expect(b"grant egress with: ", "the session line")
    sid = re.search(rb"session (\S+);", banner).group(1).decode()
    sock = re.match(rb"SHINKEN_SOCKET=(\S+)", t.seen).group(1).decode()
    cenv = dict(env, SHINKEN_SOCKET=sock)

    # Approve once.
    shown = plain(t.expect(CARD, "the card for once.test"))
    ok("once.test:%d" % P in shown, "the card names the exact host and port")
    ok(up.count("once.test") == 0, "held: the upstream saw nothing before the answer")
    cards = open_cards(cenv, sid)
    ok(cards is not None and len(cards) == 1 and cards[0]["scope"]["domains"] == ["once.test"],
       "the card is open in the run's manager while the prompt shows")
    time.sleep(0.6)  # a key in the first 400 ms is not taken
    t.send(b"o")
    out = plain(t.expect(b"RC-once1=", "curl after approve once"))
    ok("hello once.test" in out and "200" in out, "approve once: the held request got the upstream's bytes")
    ok(up.count("once.test") == 1, "approve once: the upstream saw exactly one request")

    # Once covers nothing later: a new card, denied.
    t.expect(CARD, "a new card for the second once.test")
    time.sleep(0.6)
    t.send(b"d")
    out = plain(t.expect(b"RC-once2=", "curl after deny"))
    ok("403" in out and "X-Shinken-Decision: held-denied" in out and "denied at the terminal" in out,
       "deny: 403 with X-Shinken-Decision and the human's reason")
    ok(up.count("once.test") == 1, "deny: the upstream saw no second request")

    t.expect(CARD, "the card for deny.test")
    time.sleep(0.6)
    t.send(b"d")
    out = plain(t.expect(b"RC-deny=", "curl to deny.test"))
    ok("403" in out and up.count("deny.test") == 0, "deny: refused, and the upstream saw nothing")

    # Approve for the session: the next request goes through with no card.
    t.expect(CARD, "the card for sess.test")
    time.sleep(0.6)
    t.send(b"s")
    out = plain(t.expect(b"RC-sess1=", "curl after approve for the session"))
    ok("hello sess.test" in out, "approve for the session: the held request went on")
    out = plain(t.expect(b"RC-sess2=", "the second sess.test"))
    ok("hello sess.test" in out and "approve once" not in out,
       "approve for the session: a later request goes through with no card")
    ok(up.count("sess.test") == 2, "the upstream saw both sess.test requests")

    # Approve the pattern: the card for a.pat.test offers *.pat.test at its
    # port; [p] grants it, and the sibling b.pat.test then raises no card.
    shown = plain(t.expect(b"[c] cancel", "the card for a.pat.test, to its last line"))
    ok("[p] approve the pattern" in shown and "*.pat.test:%d" % P in shown,
       "a card for a name with a registrable parent offers its pattern")
    time.sleep(0.6)
    t.send(b"p")
    out = plain(t.expect(b"RC-pat1=", "curl after approve the pattern"))
    ok("hello a.pat.test" in out, "approve the pattern: the held request went on")
    out = plain(t.expect(b"RC-pat2=", "the sibling b.pat.test"))
    ok("hello b.pat.test" in out and "approve once" not in out,
       "approve the pattern: a sibling goes through with no card")
    ok(up.count("a.pat.test") == 1 and up.count("b.pat.test") == 1, "the upstream saw both siblings once")

    # Cancel: refused now, and no pattern is offered under a top-level name.
    shown = plain(t.expect(b"[c] cancel", "the card for cancel.test, to its last line"))
    ok("[p]" not in shown and "cancel.test" in shown, "no pattern is offered for a top-level name (its last line is [c] cancel)")
    time.sleep(0.6)
    t.send(b"c")
    out = plain(t.expect(b"RC-cancel=", "curl after cancel"))
    ok("403" in out and up.count("cancel.test") == 0, "cancel: refused, and the upstream saw nothing")

    # The workload cannot draw over the card: its output is held back while
    # it shows, and goes on after.
    t.expect(CARD, "the card for tick.test")
    t.seen = b""
    t.read_for(1.0)
    ok(b"TICK" not in t.seen, "while the card shows, the workload's output is held back")
    t.send(b"x")
    t.read_for(0.5)
    ok(up.count("tick.test") == 0 and b"RC-tick" not in t.seen, "a key that is not the card's answers nothing")
    t.send(b"o")
    out = plain(t.expect(b"RC-tick=", "curl to tick.test"))
    ok("hello tick.test" in out, "the card is answered once its key is pressed")
    t.expect(b"TICKER-STOPPED", "the ticker")
    ok(b"TICK" in t.seen or "TICK" in out, "the control: the ticker's output came once the card was gone")

    # Self-approval: the attacker runs inside while the self.test card is
    # open. Its log lands in the writable root; the verdict is the card's.
    t.expect(CARD, "the card for self.test")
    end = time.monotonic() + TIMEOUT
    while not os.path.exists(ws + "/inside.log") and time.monotonic() < end:
        t.read_for(0.2)
    with open(ws + "/inside.log") as f:
        print("--- what the attacker inside tried\n" + f.read(), file=sys.stderr)
    t.read_for(1.0)
    cards = open_cards(cenv, sid)
    ok(cards is not None and [c["scope"]["domains"] for c in cards] == [["self.test"]],
       "self-approval: after every attempt from inside, the card is still open")
    ok(up.count("self.test") == 0 and b"RC-self" not in t.seen, "self-approval: the request is still held")
    time.sleep(0.3)
    t.send(b"d")
    out = plain(t.expect(b"RC-self=", "curl to self.test"))
    ok("403" in out and "denied at the terminal" in out, "self-approval: it was the terminal's key that answered")

    # The control: the same attacker outside the sandbox resolves a card.
    t.expect(CARD, "the card for ctl.test")
    a = subprocess.run([sys.executable, ws + "/attacker.py", tmp + "/outside.log", xdg, ws + "/run.pid"], stdin=subprocess.DEVNULL,
                       capture_output=True, timeout=60)
    with open(tmp + "/outside.log") as f:
        print("--- what the attacker outside did\n" + f.read() + a.stderr.decode(), file=sys.stderr)
    out = plain(t.expect(b"RC-ctl=", "curl to ctl.test"))
    ok("hello ctl.test" in out, "control: run outside the sandbox, the attacker does resolve the card")
    t.expect(b"ALL-DONE", "the end of the script")
    ok(t.wait("shinken run") == 0, "shinken run exits with the command's status")
    t.close()

    # Notify: the grant goes through with no human, and the terminal shows
    # a notice that revokes it with one key. The policy is the shipped one
    # with notify.test put at Notify.
    pol = tmp + "/policies"
    shutil.copytree(os.environ["SHINKEN_POLICY_DIR"], pol)
    with open(pol + "/manifests/default.json") as f:
        man = json.load(f)
    man["capabilities"].insert(0, {"class": "net.egress", "tier": "Notify", "scope": {"domains": ["notify.test"]}})
    with open(pol + "/manifests/default.json", "w") as f:
        json.dump(man, f)
    script = (get("notify.test", "n1") + "while [ ! -e go ]; do sleep 0.05; done; " + get("notify.test", "n2"))
    t = Terminal(run + ["--resolve", "notify.test:127.0.0.1", "--", "sh", "-c", script],
                 dict(env, SHINKEN_POLICY_DIR=pol), ws)
    shown = plain(t.expect(b"[r] revoke it", "the notice for notify.test"))
    ok("notify.test:%d" % P in shown and "approve once" not in shown,
       "notify: a notice, not a card, names the grant")
    # The notice comes once the handle is issued; the request reaches the
    # upstream on the proxy's loop meanwhile.
    end = time.monotonic() + 10
    while up.count("notify.test") == 0 and time.monotonic() < end:
        time.sleep(0.05)
    ok(up.count("notify.test") == 1, "notify: the request went through with no human")
    time.sleep(0.6)
    t.send(b"r")
    # The answer may reach the terminal before the notice is drawn (nothing
    # waits for the notice), or be held back while it shows and come after
    # [r]: look in all the output since the run began, and wait for it only
    # when it has not come yet.
    out = "" if "RC-n1=" in shown else plain(t.expect(b"RC-n1=", "the first notify.test"))
    ok("hello notify.test" in shown + out, "notify: the first request got the upstream's bytes")
    t.read_for(0.5)
    open(ws + "/go", "w").close()
    out = plain(t.expect(b"RC-n2=", "the second notify.test"))
    ok("403" in out and "revoked" in out and up.count("notify.test") == 1,
       "notify: after [r] the grant is revoked and the next request refused")
    ok(t.wait("shinken run with a notice") == 0, "notify: the command ends normally")
    t.close()
    os.unlink(ws + "/go")

    # A run attached to a `shinken daemon`: the daemon holds the request,
    # and its card of this session is drawn on this terminal all the same;
    # the daemon's timeline says the terminal answered.
    sys.path.insert(0, os.path.join(os.environ["SHINKEN_SRCDIR"], "tests", "e2e"))
    from mgrlib import Daemon, wait_event
    d = Daemon(tmp, "daemon")
    atexit.register(d.stop)
    script = get("daemon.test", "d1")
    t = Terminal(run + ["--resolve", "daemon.test:127.0.0.1", "--", "sh", "-c", script],
                 dict(env, SHINKEN_SOCKET=d.sock), ws)
    shown = plain(t.expect(CARD, "the daemon's card for daemon.test"))
    ok("daemon.test:%d" % P in shown and up.count("daemon.test") == 0,
       "daemon: the request is held and its card drawn on the run's terminal")
    time.sleep(0.6)
    t.send(b"o")
    out = plain(t.expect(b"RC-d1=", "curl through the daemon"))
    ok("hello daemon.test" in out and up.count("daemon.test") == 1, "daemon: approve once let it through")
    ev = wait_event(d.db, lambda e: e["event.name"] == "card-resolved" and e.get("shinken.outcome") == "approved-once")
    ok(ev is not None and ev.get("shinken.human.surface") == "inline" and ev.get("process.pid") == t.proc.pid,
       "daemon: the timeline records the run's terminal as who answered (%s)" % ev)
    ok(t.wait("shinken run with a daemon") == 0, "daemon: the command ends normally")
    t.close()
    takeover(run, dict(env, SHINKEN_SOCKET=d.sock), ws, "daemon")
    d.stop()

    # Take over from the CLI, of the run's own manager's session.
    takeover(run, env, ws, "embedded")
    takeover_vfork(run, env, ws)
    inline_takeover(run, env, ws, P, up)

    # Breakers: resume continues the frozen session; end kills it.
    t = breaker(run, env, ws, P, b"r")
    t.expect(b"AFTER-BREAKER", "breaker: the workload goes on after resume")
    ok(t.wait("shinken run after resume") == 0, "breaker: after resume the command ends normally")
    t.close()
    t = breaker(run, env, ws, P, b"e")
    rc = t.wait("shinken run after end")
    ok(rc != 0 and b"AFTER-BREAKER" not in t.seen and b"the session was ended" in t.seen,
       "breaker: end kills the sandbox, and shinken run says why (%d)" % rc)
    t.close()


if __name__ == "__main__":
    main()

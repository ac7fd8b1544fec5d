# SPDX-License-Identifier: Apache-2.0
"""Helpers of the capability manager's end-to-end tests: a `shinken daemon`
under test with its own configuration and audit store, control connections,
a loopback upstream that counts what reaches it, the session proxy's
client, and the audit timeline as `shinken audit` prints it.

Every address used is loopback: the upstream listens on 127.0.0.1 and is
reached by names pinned to it in the proxy configuration (and opted in with
allow_private_cidrs, as an admin would)."""
import json
import os
import resource
import socket
import subprocess
import sys
import threading
import time

SHINKEN = os.environ["SHINKEN"]
SRC = os.environ["SHINKEN_SRCDIR"]


class Checks:
    """Counts checks and failures; finish() prints the tally and exits."""

    def __init__(self):
        self.n = 0
        self.failed = []

    def __call__(self, cond, what):
        self.n += 1
        if not cond:
            self.failed.append(what)
            print("FAIL:", what, file=sys.stderr)
        return cond

    def finish(self):
        print(f"{self.n - len(self.failed)} of {self.n} checks passed")
        sys.exit(1 if self.failed else 0)


def raise_nofile():
    """Takes the hard descriptor limit, for tests that open thousands."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
    return hard


class Upstream:
    """A loopback TCP server that keeps (and counts) every connection it
    accepts, echoing what it reads."""

    def __init__(self):
        self.srv = socket.socket()
        self.srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.srv.bind(("127.0.0.1", 0))
        self.srv.listen(512)
        self.port = self.srv.getsockname()[1]
        self.accepted = 0
        self.lock = threading.Lock()
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self):
        while True:
            try:
                c, _ = self.srv.accept()
            except OSError:
                return
            with self.lock:
                self.accepted += 1
            threading.Thread(target=self._pump, args=(c,), daemon=True).start()

    @staticmethod
    def _pump(c):
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                c.sendall(d)
        except OSError:
            pass
        c.close()

    def count(self):
        with self.lock:
            return self.accepted

    def close(self):
        self.srv.close()


class Control:
    """A control connection speaking newline-delimited JSON."""

    def __init__(self, path, timeout=30):
        self.s = socket.socket(socket.AF_UNIX)
        self.s.settimeout(timeout)
        self.s.connect(path)
        self.f = self.s.makefile("rb")

    def call(self, **req):
        self.s.sendall(json.dumps(req).encode() + b"\n")
        line = self.f.readline()
        if not line:
            raise RuntimeError("manager closed the control connection")
        return json.loads(line)

    def close(self):
        self.f.close()
        self.s.close()


def proxy_connect(egress_dir, host, port, timeout=5):
    """CONNECT through the session's HTTP proxy socket: (socket, status)."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(timeout)
    s.connect(os.path.join(egress_dir, "http.sock"))
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.") else 0
    return s, status


def proxy_config(tmp, *names, limits=None, name="proxy.json"):
    """A proxy configuration pinning each name to the loopback upstream,
    with the proxy's per-session limits if given."""
    path = os.path.join(tmp, name)
    conf = {"allow_private_cidrs": ["127.0.0.1/32"], "hosts": {n: ["127.0.0.1"] for n in names}}
    if limits:
        conf["limits"] = limits
    with open(path, "w") as f:
        json.dump(conf, f)
    return path


# A session proxy that lets one sandbox hold thousands of idle connections
# and all of the process's descriptors: the manager's own defences are what
# the flood tests judge, not the proxy's limits (tests/egress judges those).
UNLIMITED = {"connections": 1000000, "setup": 1000000, "fd_reserve": 0, "idle_timeout_ms": 600000,
             "request_timeout_ms": 600000}


def bench_policies():
    """The shipped policies with the benchmark's manifest, in which api.test
    is at tier Auto: a grant is one call, with no human to ask."""
    return {"policy_dir": os.path.join(SRC, "policies"), "manifest": os.path.join(SRC, "bench", "cap", "manifest.json")}


def cpu_seconds(pid):
    """User and system time the process has used, in seconds."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


class Daemon:
    """A `shinken daemon` on a private socket and audit store."""

    def __init__(self, tmp, name, config=None, env=None, preexec_fn=None):
        self.dir = os.path.join(tmp, name)
        os.makedirs(self.dir, mode=0o700, exist_ok=True)
        conf = {"socket": os.path.join(self.dir, "run", "manager.sock"),
                "audit_db": os.path.join(self.dir, "audit", "audit.db"),
                "policy_dir": os.path.join(SRC, "policies")}
        conf.update(config or {})
        self.sock, self.db = conf["socket"], conf["audit_db"]
        self.config = os.path.join(self.dir, "daemon.json")
        with open(self.config, "w") as f:
            json.dump(conf, f)
        self.env = dict(env or os.environ, SHINKEN_SOCKET=self.sock)
        self.p = subprocess.Popen([SHINKEN, "daemon", "--config", self.config], stdout=subprocess.PIPE,
                                  stderr=subprocess.PIPE, text=True, env=self.env, preexec_fn=preexec_fn)
        self.banner = self.p.stdout.readline()
        if not self.banner.startswith("listening "):
            self.p.wait(timeout=10)
            raise RuntimeError(f"the daemon did not start: {self.banner!r} {self.p.stderr.read()!r}")

    def cli(self, *args, timeout=30):
        """Runs `shinken ARGS` against this daemon: (status, out, err,
        seconds); a run that does not end in time is status -1."""
        t0 = time.monotonic()
        try:
            p = subprocess.run([SHINKEN, *args], capture_output=True, text=True, env=self.env, timeout=timeout)
        except subprocess.TimeoutExpired:
            return -1, "", f"no answer in {timeout} s", time.monotonic() - t0
        return p.returncode, p.stdout, p.stderr, time.monotonic() - t0

    def stop(self):
        if self.p.poll() is None:
            self.p.terminate()
            try:
                self.p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait()
        return self.p.returncode


def audit_events(db, env=None):
    """Every event of the store, as `shinken audit tail --json` prints it."""
    p = subprocess.run([SHINKEN, "audit", "tail", "--db", db, "-n", "0", "--json"], capture_output=True,
                       text=True, timeout=60, env=env)
    if p.returncode != 0:
        raise RuntimeError(f"audit tail: {p.stderr}")
    return [json.loads(line) for line in p.stdout.splitlines() if line.strip()]


def wait_event(db, pred, timeout=10):
    """The first event for which pred holds, waiting for the writer to
    commit it; None when none came."""
    deadline = time.monotonic() + timeout
    while True:
        for e in audit_events(db):
            if pred(e):
                return e
        if time.monotonic() > deadline:
            return None
        time.sleep(0.1)


class Client(threading.Thread):
    """CONNECT through a session's proxy, in the background: status, the
    head and body of the answer, and whether the tunnel echoed."""

    def __init__(self, edir, host, port, timeout=20):
        super().__init__(daemon=True)
        self.edir, self.host, self.port, self.timeout = edir, host, port, timeout
        self.status, self.head, self.body, self.echoed, self.done_at = None, b"", b"", False, None
        self.sock = None
        self.start()

    def run(self):
        s = socket.socket(socket.AF_UNIX)
        self.sock = s
        s.settimeout(self.timeout)
        try:
            s.connect(os.path.join(self.edir, "http.sock"))
            s.sendall(f"CONNECT {self.host}:{self.port} HTTP/1.1\r\nHost: {self.host}\r\n\r\n".encode())
            data = b""
            while b"\r\n\r\n" not in data:
                d = s.recv(4096)
                if not d:
                    break
                data += d
            self.done_at = time.monotonic()
            self.head, _, rest = data.partition(b"\r\n\r\n")
            self.status = int(self.head.split(b" ")[1]) if self.head.startswith(b"HTTP/1.") else 0
            if self.status == 200:
                s.sendall(b"ping")
                self.echoed = s.recv(4) == b"ping"
            else:
                self.body = rest
                while True:
                    d = s.recv(4096)
                    if not d:
                        break
                    self.body += d
        except OSError:
            self.status = self.status or -1
        finally:
            s.close()


def cards(d, sid):
    """The open cards of session SID, as `shinken approvals --json` lists them."""
    rc, out, err, _ = d.cli("approvals", sid, "--json")
    ans = json.loads(out) if rc == 0 else {}
    return ans.get("cards", [])


def wait_cards(d, sid, n, attempts, timeout=10):
    """The session's open cards once there are n standing for `attempts`
    attempts in all (what there is when the time runs out)."""
    deadline = time.monotonic() + timeout
    cs = []
    while time.monotonic() < deadline:
        cs = cards(d, sid)
        if len(cs) >= n and sum(c.get("attempts", 0) for c in cs) >= attempts:
            return cs
        time.sleep(0.05)
    return cs


def closed_by_peer(s, within):
    """True when the other end closes s (EOF or reset) within `within` seconds."""
    s.settimeout(within)
    try:
        while True:
            d = s.recv(65536)
            if not d:
                return True
    except socket.timeout:
        return False
    except OSError:
        return True


def percentile(values, p):
    v = sorted(values)
    return v[min(len(v) - 1, int(len(v) * p / 100))] if v else float("nan")

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Permission Panel's HTTP server, judged from outside any browser: a
real `shinken daemon` serving the panel on loopback, and raw HTTP requests
that each break one rule (no cookie, a wrong Host, a foreign Origin, no
CSRF token, a replayed login token, a non-JSON body, an operation the
panel does not offer), each next to a control request that keeps the rule
and is served, so that every check can fail. Also: the login file is 0600
and `shinken panel` prints it, a non-loopback listen address is refused,
failed logins are rate limited, the security headers are on every answer,
an answer given through the panel is recorded as the panel's, and the
panel's port cannot be reached from inside a sandbox, nor through a
session's egress proxy."""
import http.client
import json
import os
import socket
import stat
import subprocess
import tempfile
import time

from mgrlib import SHINKEN, Checks, Control, Daemon, Upstream, audit_events, proxy_config, wait_event

chk = Checks()


class Panel:
    def __init__(self, url):
        self.url = url
        base, _, self.token = url.partition("/login#")
        self.host = base[len("http://"):]
        self.origin = base
        self.addr, _, port = self.host.rpartition(":")
        self.port = int(port)
        self.cookie = None
        self.csrf = None

    def req(self, method, path, body=None, headers=None, host=None):
        """(status, headers dict (lower-case names), body bytes)."""
        c = http.client.HTTPConnection(self.addr, self.port, timeout=10)
        c.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        h = {"Host": host if host is not None else self.host}
        h.update(headers or {})
        data = json.dumps(body).encode() if body is not None else b""
        if body is not None and "Content-Type" not in h:
            h["Content-Type"] = "application/json"
        if method == "POST":
            h["Content-Length"] = str(len(data))
        for k, v in h.items():
            if v is not None:
                c.putheader(k, v)
        c.endheaders()
        if data:
            c.send(data)
        r = c.getresponse()
        out = r.status, {k.lower(): v for k, v in r.getheaders()}, r.read()
        c.close()
        return out

    def login(self, token):
        return self.req("POST", "/api/login", {"token": token}, {"Origin": self.origin})

    def authed(self, extra=None):
        h = {"Cookie": f"shk_panel={self.cookie}", "Origin": self.origin, "X-CSRF-Token": self.csrf}
        h.update(extra or {})
        return h


def main():
    tmp = tempfile.mkdtemp(prefix="shk-panel-")

    # A non-loopback address is refused before anything starts.
    for bad in ("0.0.0.0:0", "192.168.1.1:8080", "[::]:0", "localhost:0"):
        conf = os.path.join(tmp, "bad.json")
        with open(conf, "w") as f:
            json.dump({"socket": os.path.join(tmp, "bad", "m.sock"), "audit_db": os.path.join(tmp, "bad.db"),
                       "panel": {"listen": bad}}, f)
        p = subprocess.run([SHINKEN, "daemon", "--config", conf], capture_output=True, text=True, timeout=30)
        chk(p.returncode == 1 and "loopback" in p.stderr and "\n" == p.stderr[-1:] and p.stderr.count("\n") == 1,
            f"listen {bad} is refused in one sentence ({p.returncode}, {p.stderr!r})")

    up = Upstream()
    d = Daemon(tmp, "d", config={"panel": {"listen": "127.0.0.1:0"}})
    try:
        d.p.stdout.readline()  # audit log ...
        line = d.p.stdout.readline().strip()
        chk(line.startswith("panel http://127.0.0.1:") and "/login#" in line, f"the daemon prints the URL ({line!r})")
        url = line[len("panel "):]
        login_file = os.path.splitext(d.sock)[0] + ".panel-login"
        st = os.lstat(login_file)
        chk(stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600, f"the login file is 0600 ({oct(st.st_mode)})")
        rc, out, err, _ = d.cli("panel", "--config", d.config)
        chk(rc == 0 and out.strip() == url, f"shinken panel prints the same URL ({rc}, {out!r}, {err!r})")
        p = Panel(url)

        # Security headers, on a page and on an error.
        for path in ("/", "/api/state"):
            s, h, _ = p.req("GET", path)
            csp = h.get("content-security-policy", "")
            chk("default-src 'none'" in csp and "script-src 'self'" in csp and "frame-ancestors 'none'" in csp
                and "unsafe-inline" not in csp, f"{path}: strict CSP ({csp!r})")
            chk(h.get("x-frame-options") == "DENY" and h.get("x-content-type-options") == "nosniff",
                f"{path}: X-Frame-Options DENY, nosniff ({h})")
            chk(not any(k.startswith("access-control-") for k in h), f"{path}: no CORS header ({h})")
        s, h, body = p.req("GET", "/")
        chk(s == 200 and b"panel.js" in body and b"<script>" not in body, "the page loads its script from a file")

        # No cookie: 401 (the control, with the cookie, comes after login).
        s, _, _ = p.req("GET", "/api/state")
        chk(s == 401, f"no cookie -> 401 ({s})")
        s, _, _ = p.req("POST", "/api/call", {"op": "sessions"}, {"Origin": p.origin})
        chk(s == 401, f"a POST without a cookie -> 401 ({s})")

        # Login from a foreign Origin or with a wrong Host is refused, and
        # does not spend the token.
        s, _, _ = p.req("POST", "/api/login", {"token": p.token}, {"Origin": "http://evil.example"})
        chk(s == 403, f"a login from a foreign Origin -> 403 ({s})")
        s, _, _ = p.req("POST", "/api/login", {"token": p.token}, {"Origin": p.origin}, host="evil.example")
        chk(s == 421, f"a login with a rebound Host -> 421 ({s})")
        s, h, body = p.login(p.token)
        chk(s == 200, f"the token logs in ({s}, {body!r})")
        cookie = h.get("set-cookie", "")
        chk("HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie,
            f"the cookie is HttpOnly and SameSite=Strict ({cookie!r})")
        p.cookie = cookie.split(";")[0].partition("=")[2]
        p.csrf = json.loads(body or b"{}").get("csrf")
        # The token is spent: a replay is refused, and the file holds a new one.
        s, _, _ = p.login(p.token)
        chk(s == 403, f"a replayed login token -> 403 ({s})")
        rc, out, _, _ = d.cli("panel", "--config", d.config)
        chk(rc == 0 and out.strip() != url and "/login#" in out, "the login file now holds the next token")
        next_token = out.strip().partition("#")[2]

        # The control for each rule: the request that keeps them all is served.
        s, _, body = p.req("POST", "/api/call", {"op": "sessions"}, p.authed())
        chk(s == 200 and json.loads(body).get("ok") is True, f"an authenticated POST is served ({s}, {body!r})")
        s, _, body = p.req("GET", "/api/state", headers={"Cookie": f"shk_panel={p.cookie}"})
        chk(s == 200 and "cards" in json.loads(body), f"GET /api/state with the cookie ({s})")
        # ... and each rule broken alone is refused.
        s, _, _ = p.req("GET", "/api/state", headers={"Cookie": f"shk_panel={p.cookie}"}, host=f"evil.example:{p.port}")
        chk(s == 421, f"a wrong Host -> 421 ({s})")
        s, _, _ = p.req("GET", "/api/state", headers={"Cookie": f"shk_panel={p.cookie}"}, host=f"localhost:{p.port}")
        chk(s == 421, f"another name for loopback is a wrong Host too ({s})")
        s, _, _ = p.req("POST", "/api/call", {"op": "sessions"}, p.authed({"X-CSRF-Token": None}))
        chk(s == 403, f"a POST without the CSRF token -> 403 ({s})")
        s, _, _ = p.req("POST", "/api/call", {"op": "sessions"}, p.authed({"X-CSRF-Token": "0" * 64}))
        chk(s == 403, f"a POST with a wrong CSRF token -> 403 ({s})")
        s, _, _ = p.req("POST", "/api/call", {"op": "sessions"}, p.authed({"Origin": "http://evil.example"}))
        chk(s == 403, f"a cross-origin POST -> 403 ({s})")
        s, _, _ = p.req("POST", "/api/call", {"op": "sessions"}, p.authed({"Origin": None}))
        chk(s == 403, f"a POST without Origin -> 403 ({s})")
        s, _, _ = p.req("POST", "/api/call", {"op": "sessions"}, p.authed({"Content-Type": "text/plain"}))
        chk(s == 415, f"a POST that is not JSON (a form could send it) -> 415 ({s})")
        s, _, _ = p.req("POST", "/api/call", {"op": "sessions"}, p.authed({"Cookie": "shk_panel=" + "0" * 64}))
        chk(s == 401, f"a forged cookie -> 401 ({s})")
        s, h, _ = p.req("OPTIONS", "/api/call", headers={"Origin": "http://evil.example",
                                                        "Access-Control-Request-Method": "POST"})
        chk(s == 405 and not any(k.startswith("access-control-") for k in h), f"no CORS preflight ({s})")
        s, _, body = p.req("POST", "/api/call", {"op": "open_session", "name": "x"}, p.authed())
        chk(s == 403 and b"does not offer" in body, f"an operation the panel does not offer -> 403 ({s}, {body!r})")

        # An answer through the panel is the panel's. A session, a card by a
        # held connection, and the answer.
        ctl = Control(d.sock)
        cfg = proxy_config(tmp, "api.test")
        a = ctl.call(op="open_session", name="panel-http", egress=True, proxy_config=cfg)
        chk(a.get("ok") is True, f"open_session ({a})")
        edir = a.get("egress_dir", "/nonexistent")
        # A page is open (the event stream): the panel is a surface.
        ev = http.client.HTTPConnection(p.addr, p.port, timeout=10)
        ev.putrequest("GET", "/api/events", skip_host=True, skip_accept_encoding=True)
        ev.putheader("Host", p.host)
        ev.putheader("Cookie", f"shk_panel={p.cookie}")
        ev.endheaders()
        evr = ev.getresponse()
        chk(evr.status == 200 and evr.getheader("Content-Type") == "text/event-stream", "the event stream opens")
        hello = evr.readline()
        chk(hello.startswith(b"event: hello"), f"the stream greets ({hello!r})")
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(20)
        s.connect(os.path.join(edir, "http.sock"))
        s.sendall(f"CONNECT api.test:{up.port} HTTP/1.1\r\nHost: api.test\r\n\r\n".encode())
        got = b""
        deadline = time.monotonic() + 10
        while not (b"event: card\ndata: " in got and got.endswith(b"\n\n")) and time.monotonic() < deadline:
            got += evr.readline()
        data = [l for l in got.split(b"\n") if l.startswith(b"data: ")]
        chk(b"event: card" in got and data and b'"raised"' in data[-1], f"the stream carries the card ({got[-300:]!r})")
        card = json.loads(data[-1][6:]).get("card", {}) if data else {}
        s2, _, body = p.req("POST", "/api/call", {"op": "resolve", "card": card.get("id", "x"), "resolution": "once",
                                                  "surface": "cli"}, p.authed())
        chk(s2 == 200 and json.loads(body).get("ok") is True, f"approve once through the panel ({body!r})")
        head = b""
        while b"\r\n\r\n" not in head:
            x = s.recv(1)
            if not x:
                break
            head += x
        chk(head.startswith(b"HTTP/1.1 200"), f"the held connection went on ({head!r})")
        s.close()
        e = wait_event(d.db, lambda e: e.get("event.name") == "card-resolved"
                       and e.get("shinken.card.id") == card.get("id") and e.get("shinken.human.surface") == "panel"
                       and "panel login" in e.get("shinken.human.name", ""))
        chk(e is not None, "the timeline records the answer as the panel's, whatever the request said of itself")
        ev.close()

        # The panel's port from inside a sandbox: the sandbox's loopback is
        # its own. The control: the same connect from here reaches it.
        probe = ("import socket,sys\ntry:\n s=socket.socket(); s.settimeout(3)\n"
                 f" sys.exit(0 if s.connect_ex(('127.0.0.1', {p.port})) == 0 else 7)\n"
                 "except OSError:\n sys.exit(7)\n")
        outside = subprocess.run(["python3", "-c", probe], timeout=30)
        chk(outside.returncode == 0, "control: the panel's port is reachable outside the sandbox")
        args = [SHINKEN, "run", "--net", "proxy"] + (["--allow-degraded"] if os.getuid() == 0 else []) + \
               ["--", "python3", "-c", probe]
        inside = subprocess.run(args, capture_output=True, text=True, timeout=60, env=d.env)
        chk(inside.returncode == 7, f"inside a sandbox the panel's port is not reachable ({inside.returncode}, "
            f"{inside.stderr[-300:]!r})")
        # Through a session's egress proxy that allows no private address:
        # loopback is refused.
        plain = os.path.join(tmp, "plain.json")
        with open(plain, "w") as f:
            json.dump({}, f)
        a = ctl.call(op="open_session", name="panel-reach", egress=True, proxy_config=plain, ask=False)
        chk(a.get("ok") is True, f"open_session ({a})")
        s = socket.socket(socket.AF_UNIX)
        s.settimeout(10)
        s.connect(os.path.join(a.get("egress_dir", "/nonexistent"), "http.sock"))
        s.sendall(f"CONNECT 127.0.0.1:{p.port} HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n".encode())
        head = s.recv(4096)
        s.close()
        chk(head.startswith(b"HTTP/1.1 403"), f"the proxy refuses the panel's address ({head[:80]!r})")
        ctl.close()

        # Failed logins are rate limited: after five in a minute (the
        # replay above was one) a wrong token is refused with 429 at once;
        # the right one still logs in, so a flood of guesses from another
        # local user cannot lock the human out.
        codes = [p.login("f" * 64)[0] for _ in range(6)]
        chk(codes[:4] == [403] * 4 and codes[4:] == [429] * 2, f"failed logins are limited ({codes})")
        s, _, _ = p.login(next_token)
        chk(s == 200, f"during the pause the right token still logs in ({s})")
        s, _, _ = p.login(next_token)
        chk(s == 429, f"and a replay of it is refused ({s})")
    finally:
        rc = d.stop()
        up.close()
    chk(rc == 0, f"the daemon ends cleanly ({rc}, {d.p.stderr.read()[-2000:]!r})")
    chk(not os.path.exists(os.path.splitext(d.sock)[0] + ".panel-login"),
        "the login file is removed when the daemon ends")
    chk.finish()


if __name__ == "__main__":
    main()

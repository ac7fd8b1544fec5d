#!/usr/bin/python3
"""End-to-end test of the capability manager: a real `shinken daemon`, a
session with an egress proxy, and grants, attenuation and revocation judged
by what a client of the session's proxy socket can and cannot reach.

Every address used is loopback: the upstream is an echo server on
127.0.0.1, reached by the name api.test pinned to it in the proxy config
(and opted in with allow_private_cidrs, as an admin would)."""
import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

SHINKEN = os.environ["SHINKEN"]
SRC = os.environ["SHINKEN_SRCDIR"]
failures = []
checks = 0


def check(cond, what):
    global checks
    checks += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what, file=sys.stderr)


def echo_server():
    """A loopback echo server; counts the connections it accepted."""
    srv = socket.socket()
    srv.bind(("127.0.0.1", 0))
    srv.listen(64)
    accepted = []

    def serve():
        while True:
            try:
                c, _ = srv.accept()
            except OSError:
                return
            accepted.append(c)

            def pump(c=c):
                try:
                    while True:
                        d = c.recv(65536)
                        if not d:
                            break
                        c.sendall(d)
                except OSError:
                    pass
                c.close()
            threading.Thread(target=pump, daemon=True).start()
    threading.Thread(target=serve, daemon=True).start()
    return srv, accepted


class Control:
    """A control connection speaking newline-delimited JSON."""

    def __init__(self, path):
        self.s = socket.socket(socket.AF_UNIX)
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


def connect_via(egress_dir, host, port):
    """CONNECT through the session's HTTP proxy socket. Returns the socket
    and the status code."""
    s = socket.socket(socket.AF_UNIX)
    s.settimeout(5)
    s.connect(os.path.join(egress_dir, "http.sock"))
    s.sendall(f"CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    status = int(head.split(b" ")[1]) if head.startswith(b"HTTP/1.") else 0
    return s, status, head


def cli(*args, env=None):
    p = subprocess.run([SHINKEN, *args], capture_output=True, text=True, env=env, timeout=30)
    return p.returncode, p.stdout, p.stderr


# Runs inside the sandbox: tries the proxy until the grant lets it through,
# then waits for the test's word and tries once more.
CLIENT = r"""
import os, socket, sys, time
port = sys.argv[1]
def tunnel():
    s = socket.create_connection(("127.0.0.1", 3128), timeout=5)
    s.sendall(f"CONNECT api.test:{port} HTTP/1.1\r\nHost: api.test:{port}\r\n\r\n".encode())
    head = b""
    while b"\r\n\r\n" not in head:
        d = s.recv(1)
        if not d:
            break
        head += d
    if not head.startswith(b"HTTP/1.1 200"):
        s.close()
        return None
    return s
def attempt():
    s = tunnel()
    if not s:
        return "refused"
    s.sendall(b"ping")
    got = s.recv(4)
    s.close()
    return "echoed" if got == b"ping" else "broken"
deadline = time.time() + 15
while time.time() < deadline:
    r = attempt()
    if r != "refused":
        break
    time.sleep(0.1)
kept = tunnel() if r == "echoed" else None
open("first", "w").write(r)
while not os.path.exists("go") and time.time() < deadline + 15:
    time.sleep(0.05)
open("second", "w").write(attempt())
state = "none"
if kept:
    kept.settimeout(3)
    try:
        kept.sendall(b"x")
        state = "open" if kept.recv(1) == b"x" else "cut"
    except OSError:
        state = "cut"
open("third", "w").write(state)
"""


def main():
    tmp = tempfile.mkdtemp(prefix="shk-e2e-")
    sock = os.path.join(tmp, "run", "manager.sock")
    events = os.path.join(tmp, "events.log")
    srv, accepted = echo_server()
    port = srv.getsockname()[1]
    proxy_cfg = os.path.join(tmp, "proxy.json")
    with open(proxy_cfg, "w") as f:
        json.dump({"allow_private_cidrs": ["127.0.0.1/32"], "hosts": {"api.test": ["127.0.0.1"],
                   "other.test": ["127.0.0.1"], "standing.test": ["127.0.0.1"]}}, f)
    # The admin's standing grants: every session gets egress to
    # standing.test; a standing privileged install is still subject to the
    # admin forbid at low trust.
    standing = os.path.join(tmp, "standing.json")
    with open(standing, "w") as f:
        json.dump([{"class": "net.egress", "scope": {"domains": ["standing.test"]}},
                   {"class": "install.privileged", "scope": {"scope": "pkg"}}], f)
    cfg = os.path.join(tmp, "daemon.json")
    with open(cfg, "w") as f:
        json.dump({"socket": sock, "event_log": events, "policy_dir": os.path.join(SRC, "policies"),
                   "standing": standing}, f)
    env = dict(os.environ, SHINKEN_SOCKET=sock)
    # The session tier may only narrow: a permit there stops the daemon.
    sess_pol = os.path.join(tmp, "session.cedar")
    with open(sess_pol, "w") as f:
        f.write('permit(principal, action, resource);\n')
    bad_cfg = os.path.join(tmp, "bad.json")
    with open(bad_cfg, "w") as f:
        json.dump({"socket": sock, "session_policy": sess_pol, "policy_dir": os.path.join(SRC, "policies")}, f)
    p = subprocess.run([SHINKEN, "daemon", "--config", bad_cfg], capture_output=True, text=True, timeout=30)
    check(p.returncode == 1 and "may only narrow" in p.stderr and p.stderr.count("\n") == 1,
          f"a permit in the session tier is refused ({p.returncode}, {p.stderr!r})")
    check(not os.path.exists(sock), "no manager started on a refused configuration")
    daemon = subprocess.Popen([SHINKEN, "daemon", "--config", cfg], stdout=subprocess.PIPE, text=True)
    try:
        line = daemon.stdout.readline()
        check(line.startswith("listening "), f"daemon announces its socket (got {line!r})")
        check(oct(os.stat(sock).st_mode & 0o777) == "0o600", "control socket is 0600")
        check(oct(os.stat(os.path.dirname(sock)).st_mode & 0o777) == "0o700", "socket directory is 0700")

        ctl = Control(sock)
        ans = ctl.call(op="open_session", name="e2e", trust_tier="standard", egress=True,
                       proxy_config=proxy_cfg)
        check(ans.get("ok") is True, f"open_session: {ans}")
        sid, edir = ans["session"], ans["egress_dir"]

        # The standing grant is there from the start, as a standing handle.
        rc, out, _ = cli("grants", sid, "--json", env=env)
        st = [g for g in json.loads(out)["grants"] if g["lifecycle"] == "standing"] if rc == 0 else []
        check(len(st) == 2 and all(g["live"] for g in st), f"standing grants issued to the new session ({out!r})")
        s, code, _ = connect_via(edir, "standing.test", port)
        s.close()
        check(code == 200, f"a standing grant admits its destination without a grant call (got {code})")
        low = ctl.call(op="open_session", name="low", trust_tier="low", egress=True, proxy_config=proxy_cfg)
        rc, out, _ = cli("grants", low.get("session", "x"), "--json", env=env)
        classes = sorted(g["class"] for g in json.loads(out)["grants"]) if rc == 0 else []
        check(classes == ["net.egress"], f"at low trust the admin forbid keeps the standing install out ({classes})")
        ctl.call(op="close_session", session=low.get("session", "x"))
        for g in st:
            cli("revoke", g["handle"], env=env)
        n_seen = len(accepted)

        # Before any grant: deny by default, and the upstream saw nothing.
        s, st, _ = connect_via(edir, "api.test", port)
        s.close()
        check(st == 403, f"no grant: CONNECT refused with 403 (got {st})")
        check(len(accepted) == n_seen, "no grant: the upstream got no connection")

        # The manifest puts **.test at Ask: without a human's approval, refused.
        rc, out, err = cli("grant", sid, "net.egress", "--scope", '{"domains":["api.test"]}', env=env)
        check(rc == 2 and "no policy permits" in err, f"Ask tier without approval refused (rc {rc}, {err!r})")

        # With approval: granted, naming what decided.
        rc, out, err = cli("grant", sid, "net.egress", "--scope", '{"domains":["api.test"]}',
                           "--approve", "--json", env=env)
        g = json.loads(out) if out.strip() else {}
        check(rc == 0 and g.get("decision") == "granted", f"approved grant issued (rc {rc}, {out!r} {err!r})")
        check(g.get("policy") == "project-manifest-tiers" and g.get("tier") == "Ask",
              f"grant answer names policy and tier: {g}")
        handle = g.get("handle", "")
        check(len(handle) == 64, "handle is 256 bits of hex")

        # The grant is live on the running session: the tunnel works, byte-exact.
        s, st, _ = connect_via(edir, "api.test", port)
        check(st == 200, f"granted: CONNECT allowed (got {st})")
        payload = os.urandom(4096)
        s.sendall(payload)
        got = b""
        while len(got) < len(payload):
            d = s.recv(65536)
            if not d:
                break
            got += d
        check(got == payload, "tunnel echoes bytes exactly")
        check(len(accepted) == n_seen + 1, "upstream got exactly one connection")

        # Other names stay refused.
        s2, st, _ = connect_via(edir, "other.test", port)
        s2.close()
        check(st == 403, f"ungranted name refused (got {st})")

        # Revoke: the open tunnel is closed and the next connection refused.
        t0 = time.monotonic()
        rc, out, err = cli("revoke", handle, "--json", env=env)
        r = json.loads(out) if out.strip() else {}
        check(rc == 0 and r.get("tunnels_closed", 0) >= 1, f"revoke closed the open tunnel: {out!r} {err!r}")
        s.settimeout(2)
        try:
            tail = s.recv(1)
        except OSError:
            tail = b""
        check(tail == b"", "the tunnel opened under the handle is closed after revoke")
        s.close()
        n_before = len(accepted)
        s, st, _ = connect_via(edir, "api.test", port)
        s.close()
        check(st == 403, f"after revoke: CONNECT refused (got {st})")
        check(len(accepted) == n_before, "after revoke: the upstream got no new connection")
        check(time.monotonic() - t0 < 5, "revoke took effect promptly")

        # Attenuation and the membrane.
        rc, out, _ = cli("grant", sid, "net.egress", "--scope", '{"domains":["**.test"]}', "--approve",
                         "--json", env=env)
        parent = json.loads(out).get("handle", "") if rc == 0 else ""
        check(rc == 0, "wide grant issued")
        rc, out, err = cli("attenuate", parent, "--scope", '{"domains":["**.example"]}', env=env)
        check(rc == 2 and "domains" in err, f"widening attenuation refused, naming the field ({err!r})")
        rc, out, err = cli("attenuate", parent, "--scope", '{"domains":["api.test"]}', "--json", env=env)
        child = json.loads(out).get("handle", "") if rc == 0 else ""
        check(rc == 0 and child and child != parent, f"narrower attenuation issued ({err!r})")
        rc, out, err = cli("revoke", parent, env=env)
        check(rc == 0, "parent revoked")
        rc, out, _ = cli("grants", sid, "--json", env=env)
        lst = {g["handle"]: g for g in json.loads(out)["grants"]}
        check(child in lst and lst[child]["live"] is False, "the child of a revoked parent is dead")
        s, st, _ = connect_via(edir, "api.test", port)
        s.close()
        check(st == 403, "the child of a revoked handle no longer admits connections")

        # Once: one connection, then nothing.
        rc, out, _ = cli("grant", sid, "net.egress", "--scope", '{"domains":["api.test"]}', "--approve",
                         "--once", env=env)
        check(rc == 0, "once grant issued")
        s, st, _ = connect_via(edir, "api.test", port)
        s.close()
        check(st == 200, f"once grant admits one connection (got {st})")
        s, st, _ = connect_via(edir, "api.test", port)
        s.close()
        check(st == 403, f"once grant admits no second connection (got {st})")

        # The manifest refuses before Cedar; the admin tier cannot be crossed.
        rc, out, err = cli("grant", sid, "net.egress", "--scope", '{"domains":["evil.invalid"]}',
                           "--approve", env=env)
        check(rc == 2 and "outside the manifest" in err, f"manifest refusal ({err!r})")
        rc, out, err = cli("grant", sid, "fs.scope", "--scope", '{"write":["/root/.ssh"]}', "--approve",
                           env=env)
        check(rc == 2 and "admin-fs-credentials-and-shell-rc" in err, f"admin forbid on ~/.ssh ({err!r})")
        rc, out, err = cli("grant", sid, "peripheral", "--scope", '{"input_inject":true}', "--approve", env=env)
        check(rc == 2, f"Block tier refused ({err!r})")
        rc, out, err = cli("grant", sid, "credentials", "--scope", '{"never_raw":false}', env=env)
        check(rc == 2 and "never_raw" in err, f"raw credentials refused ({err!r})")
        rc, out, err = cli("grant", sid, "net.egress", "--scope", '{"domain":["x.test"]}', env=env)
        check(rc == 2 and "unknown field" in err, f"unknown scope field refused ({err!r})")
        rc, out, err = cli("grant", "no-such-session", "clipboard", "--scope", "{}", env=env)
        check(rc == 2 and "no such session" in err, f"unknown session refused ({err!r})")
        rc, out, err = cli("grant", sid, "net.egress", env=env)
        check(rc == 1 and err.count("\n") <= 2, f"missing --scope is bad input ({err!r})")

        rc, out, _ = cli("sessions", "--json", env=env)
        check(rc == 0 and any(x["session"] == sid for x in json.loads(out)["sessions"]), "sessions lists it")

        # A grant whose OS delta cannot be pushed leaves nothing: a session
        # without an egress proxy gets no net.egress handle, and says why.
        bare = ctl.call(op="open_session", name="bare", egress=False).get("session", "x")
        rc, out, err = cli("grant", bare, "net.egress", "--scope", '{"domains":["api.test"]}', "--approve", env=env)
        check(rc == 2 and "OS delta failed" in err, f"a failed OS delta refuses the grant ({err!r})")
        rc, out, _ = cli("grants", bare, "--json", env=env)
        check(rc == 0 and not any(g["class"] == "net.egress" for g in json.loads(out)["grants"]),
              "a failed OS delta leaves no handle")
        ctl.call(op="close_session", session=bare)
        # The same with a fault injected into the push on a session that has
        # a proxy: no handle, no proxy entry (the destination stays refused).
        fsock = os.path.join(tmp, "fault", "manager.sock")
        fcfg = os.path.join(tmp, "fault.json")
        with open(fcfg, "w") as f:
            json.dump({"socket": fsock, "event_log": events, "policy_dir": os.path.join(SRC, "policies")}, f)
        fenv = dict(env, SHINKEN_SOCKET=fsock, SHINKEN_FAULT="grant-delta")
        fd = subprocess.Popen([SHINKEN, "daemon", "--config", fcfg], stdout=subprocess.PIPE, text=True, env=fenv)
        try:
            fd.stdout.readline()
            fctl = Control(fsock)
            fa = fctl.call(op="open_session", egress=True, proxy_config=proxy_cfg)
            rc, out, err = cli("grant", fa["session"], "net.egress", "--scope", '{"domains":["api.test"]}',
                               "--approve", env=fenv)
            check(rc == 2 and "injected fault" in err, f"an injected delta fault refuses the grant ({err!r})")
            rc, out, _ = cli("grants", fa["session"], "--json", env=fenv)
            check(rc == 0 and json.loads(out)["grants"] == [], "after the injected fault no handle remains")
            n0 = len(accepted)
            s2, code, _ = connect_via(fa["egress_dir"], "api.test", port)
            s2.close()
            check(code == 403 and len(accepted) == n0, "after the injected fault the proxy admits nothing")
            fctl.close()
        finally:
            fd.terminate()
            fd.wait(timeout=10)

        # The exfiltration shape: a session that ingested external content
        # and touched sensitive data never gets egress at Auto. The manifest
        # has **.npm.example at Auto: granted before, Ask (refused without a
        # human) after.
        scope = '{"domains":["registry.npm.example"],"ports":[443]}'
        rc, out, err = cli("grant", sid, "net.egress", "--scope", scope, "--json", env=env)
        check(rc == 0 and json.loads(out).get("tier") == "Auto", f"Auto egress before taint ({out!r} {err!r})")
        ans = ctl.call(op="taint", session=sid, ingested_external=True)
        check(ans.get("ok") is True, f"taint recorded: {ans}")
        rc, out, err = cli("grant", sid, "net.egress", "--scope", scope, env=env)
        check(rc == 0, "external alone does not stop Auto egress")
        ctl.call(op="taint", session=sid, touched_sensitive=True)
        rc, out, err = cli("grant", sid, "net.egress", "--scope", scope, "--json", env=env)
        a = json.loads(out) if out.strip() else {}
        check(rc == 2 and a.get("tier") == "Ask", f"external + sensitive: egress promoted to Ask ({out!r})")
        rc, out, err = cli("grant", sid, "net.egress", "--scope", scope, "--external", "--json", env=env)
        a = json.loads(out) if out.strip() else {}
        check(rc == 2 and a.get("tier") == "Ask", f"external provenance promotes Auto at least one tier ({out!r})")
        bad = ctl.call(op="taint", session=sid, bogus=True)
        check(bad.get("ok") is False and "unknown field" in bad.get("error", ""), "taint refuses unknown fields")

        # Closing the launcher's connection ends the session: its proxy is gone.
        ctl.close()
        deadline = time.time() + 5
        while os.path.exists(os.path.join(edir, "http.sock")) and time.time() < deadline:
            time.sleep(0.05)
        check(not os.path.exists(os.path.join(edir, "http.sock")), "session sockets removed with the session")

        # Events: one JSON line each, with the fields the audit needs.
        # The manager's events carry an actor; the proxy's audit lines (same
        # file) carry a protocol and never a path, query or header value.
        # The session-closed event follows the socket's removal: wait for it.
        deadline = time.time() + 5
        while time.time() < deadline:
            with open(events) as f:
                lines = [json.loads(l) for l in f if l.startswith("{")]
            if any(e.get("decision") == "session-closed" for e in lines):
                break
            time.sleep(0.05)
        evs = [e for e in lines if "actor" in e]
        audit = [e for e in lines if "protocol" in e]
        check(len(evs) + len(audit) == len(lines), "every line is an event or an audit line")
        check(any(a.get("decision") in ("deny", "denied", "blocked") or a.get("decision") for a in audit),
              "the proxy audited its decisions")
        check(any(str(a.get("rule", "")).startswith("handle:") for a in audit),
              "an allowed connection's audit line names the handle that allowed it")
        kinds = {e["decision"] for e in evs}
        check({"granted", "refused", "revoked", "attenuated", "session-opened", "session-closed"} <= kinds,
              f"event kinds: {kinds}")
        check(any(e["decision"] == "refused" and "OS delta failed" in e.get("reason", "") and not e.get("handle")
                  for e in evs), "the failed OS delta has an event saying so, naming no handle")
        check(all("time" in e and "actor" in e for e in evs), "events carry time and actor")
        check(any(e["decision"] == "granted" and e.get("handle") == handle for e in evs), "grant event names the handle")

        # A live grant reaches a running sandbox: `shinken run --net proxy`
        # registers with this daemon; a client inside keeps trying until the
        # grant arrives, and after the revoke its next try is refused.
        work = os.path.join(tmp, "work")
        os.makedirs(work)
        os.chmod(tmp, 0o755)
        client = os.path.join(work, "client.py")
        with open(client, "w") as f:
            f.write(CLIENT)
        n_before = len(accepted)
        run = subprocess.Popen([SHINKEN, "run", "--allow-degraded", "--net", "proxy", "--proxy-config", proxy_cfg,
                                "--write", work, "--", "/usr/bin/python3", client, str(port)],
                               cwd=work, env=dict(env, ASAN_OPTIONS="detect_leaks=0"),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        rsid = None
        deadline = time.time() + 15
        while not rsid and time.time() < deadline:
            rc, out, _ = cli("sessions", "--json", env=env)
            rsid = next((x["session"] for x in json.loads(out)["sessions"] if x["session"].startswith("run-")),
                        None) if rc == 0 else None
            time.sleep(0.1)
        check(rsid is not None, "shinken run registered its session with the daemon")
        time.sleep(0.5)
        check(not os.path.exists(os.path.join(work, "first")), "inside, nothing gets out before the grant")
        rc, out, err = cli("grant", rsid or "none", "net.egress", "--scope", '{"domains":["api.test"]}',
                           "--approve", "--json", env=env)
        h = json.loads(out).get("handle", "") if rc == 0 else ""
        check(rc == 0, f"grant to the running sandbox's session ({err!r})")
        deadline = time.time() + 10
        while not os.path.exists(os.path.join(work, "first")) and time.time() < deadline:
            time.sleep(0.05)
        first = open(os.path.join(work, "first")).read() if os.path.exists(os.path.join(work, "first")) else ""
        check(first == "echoed", f"inside, the granted connection echoes ({first!r})")
        check(len(accepted) == n_before + 2, "the upstream saw the sandbox's two connections")
        rc, _, _ = cli("revoke", h, env=env)
        open(os.path.join(work, "go"), "w").close()
        _, run_err = run.communicate(timeout=20)
        second = open(os.path.join(work, "second")).read() if os.path.exists(os.path.join(work, "second")) else ""
        check(second == "refused", f"inside, the next connection after revoke is refused ({second!r})")
        check(len(accepted) == n_before + 2, "after revoke the upstream saw nothing new")
        third = open(os.path.join(work, "third")).read() if os.path.exists(os.path.join(work, "third")) else ""
        check(third == "cut", f"inside, the tunnel already open under the handle is cut by the revoke ({third!r})")
        check(run.returncode == 0, f"shinken run exits with the client's status ({run.returncode}: {run_err[-300:]!r})")
        rc, out, _ = cli("sessions", "--json", env=env)
        check(not any(x["session"] == rsid for x in json.loads(out)["sessions"]),
              "the run's session ended with the command")

        # A new session, then the manager dies: the session has no network.
        ctl = Control(sock)
        ans = ctl.call(op="open_session", egress=True, proxy_config=proxy_cfg)
        edir2 = ans["egress_dir"]
        daemon.send_signal(signal.SIGTERM)
        daemon.wait(timeout=10)
        try:
            s, st, _ = connect_via(edir2, "api.test", port)
            s.close()
            reached = True
        except OSError:
            reached = False
        check(not reached, "with the manager gone the session's proxy is unreachable")
        ctl.close()
    finally:
        if daemon.poll() is None:
            daemon.kill()
            daemon.wait()
        srv.close()
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{checks - len(failures)} of {checks} checks passed")
    sys.exit(1 if failures else 0)


main()

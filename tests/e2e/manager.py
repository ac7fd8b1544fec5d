#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""End-to-end test of the capability manager: a real `shinken daemon`, a
session with an egress proxy, and grants, attenuation and revocation judged
by what a client of the session's proxy socket can and cannot reach. The
manager's events are read from its audit store (`shinken audit tail`); the
proxy's verdicts are events of the same store (proxy-verdict).

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
# Whether this build has the SHINKEN_FAULT switch (meson option
# fault_injection): test builds do, release builds must not.
FAULTS = sys.argv[1] == "faults"
# Where the build installs its policies: the one default location.
INSTALLED = sys.argv[2]
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


def audit_events(db):
    """The manager's events, as `shinken audit tail --json` prints them."""
    p = subprocess.run([SHINKEN, "audit", "tail", "--db", db, "-n", "0", "--json"], capture_output=True, text=True,
                       timeout=60)
    return [json.loads(l) for l in p.stdout.splitlines() if l.strip()] if p.returncode == 0 else []


def has_event(db, pred, timeout=10):
    """Whether an event for which pred holds reaches the store in time (the
    writer commits in batches)."""
    deadline = time.time() + timeout
    while True:
        if any(pred(e) for e in audit_events(db)):
            return True
        if time.time() > deadline:
            return False
        time.sleep(0.1)


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

def refused_daemon(tmp, sock, name, policy_dir, env=None):
    """Starts a daemon on `policy_dir` that must refuse to start; returns
    its stderr."""
    cfg = os.path.join(tmp, name + ".json")
    conf = {"socket": sock, "audit_db": os.path.join(tmp, "refused-audit", "audit.db")}
    if policy_dir:
        conf["policy_dir"] = policy_dir
    with open(cfg, "w") as f:
        json.dump(conf, f)
    p = subprocess.run([SHINKEN, "daemon", "--config", cfg], capture_output=True, text=True, timeout=30, env=env)
    check(p.returncode == 1 and p.stderr.count("\n") == 1, f"{name}: the daemon refuses to start ({p.returncode}, {p.stderr!r})")
    check(not os.path.exists(sock), f"{name}: no manager started")
    return p.stderr


def policy_dir_checks(tmp, sock):
    """The policy comes only from a place no one but root and the manager's
    user can change; each refusal has a control that starts."""
    def copy(where):
        shutil.copytree(os.path.join(SRC, "policies"), where)
        os.chmod(where, 0o755)
        return where
    # Control: a private copy, and one below a sticky world-writable
    # directory (as /tmp is), load.
    good = copy(os.path.join(tmp, "good"))
    sticky = os.path.join(tmp, "sticky")
    os.mkdir(sticky)
    os.chmod(sticky, 0o1777)
    below_sticky = copy(os.path.join(sticky, "policies"))
    link = os.path.join(tmp, "link")
    os.symlink(good, link)
    for d in (good, below_sticky, link):
        ssock = os.path.join(tmp, "ok", "m.sock")
        cfg = os.path.join(tmp, "ok.json")
        with open(cfg, "w") as f:
            json.dump({"socket": ssock, "policy_dir": d, "audit_db": os.path.join(tmp, "ok-audit", "audit.db")}, f)
        p = subprocess.Popen([SHINKEN, "daemon", "--config", cfg], stdout=subprocess.PIPE, text=True)
        line = p.stdout.readline()
        p.terminate()
        p.wait(timeout=10)
        check(line.startswith("listening "), f"a trusted policy directory loads: {d} ({line!r})")
    # The directory, one of its files, and an ancestor writable by others.
    open_dir = copy(os.path.join(tmp, "open"))
    os.chmod(open_dir, 0o777)
    err = refused_daemon(tmp, sock, "open-dir", open_dir)
    check("writable by group or others" in err and open_dir in err, f"a world-writable policy directory ({err!r})")
    open_file = copy(os.path.join(tmp, "open-file"))
    os.chmod(os.path.join(open_file, "admin.cedar"), 0o666)
    err = refused_daemon(tmp, sock, "open-file", open_file)
    check("admin.cedar" in err and "the file is writable by group or others" in err, f"a writable policy file ({err!r})")
    manifest = copy(os.path.join(tmp, "open-manifest"))
    os.chmod(os.path.join(manifest, "manifests"), 0o775)
    err = refused_daemon(tmp, sock, "open-manifest", manifest)
    check("manifests" in err and "writable by group or others" in err, f"a group-writable manifest directory ({err!r})")
    pub = os.path.join(tmp, "pub")
    os.mkdir(pub)
    os.chmod(pub, 0o777)
    below_pub = copy(os.path.join(pub, "policies"))
    err = refused_daemon(tmp, sock, "open-ancestor", below_pub)
    check(f"{pub} is writable by group or others" in err, f"a policy directory below a writable one ({err!r})")
    publink = os.path.join(pub, "link")
    os.symlink(good, publink)
    err = refused_daemon(tmp, sock, "open-link", publink)
    check("writable by group or others" in err, f"a link in a writable directory is not followed ({err!r})")
    if os.geteuid() == 0:
        owned = copy(os.path.join(tmp, "owned"))
        os.chown(os.path.join(owned, "project.cedar"), 65534, 65534)
        err = refused_daemon(tmp, sock, "owned", owned)
        check("project.cedar" in err and "owned by someone other than root" in err, f"a file of another user ({err!r})")
    # Nothing baked in: without the configuration and the environment, the
    # installed copy is the only place looked at, never the source tree.
    if os.path.exists(INSTALLED):
        print(f"note: {INSTALLED} exists (an installed copy), so the default-location check is not run")
    else:
        env = {k: v for k, v in os.environ.items() if k != "SHINKEN_POLICY_DIR"}
        err = refused_daemon(tmp, sock, "default", None, env=env)
        check(INSTALLED in err and SRC not in err,
              f"with no policy directory named, only the installed location is tried ({err!r})")


def layer_checks(tmp):
    """Turning a layer off goes through the policy: the shipped admin tier
    lets the operator's own run do it when asked on the command line, and an
    admin tier that forbids it outright refuses the run before it starts."""
    strict = os.path.join(tmp, "strict")
    shutil.copytree(os.path.join(SRC, "policies"), strict)
    admin = os.path.join(strict, "admin.cedar")
    with open(admin) as f:
        text = f.read()
    clause = ' unless { context.trust_tier == "high" && context.approval_state == "approved" };'
    check(clause in text, "the shipped admin tier lets the operator's own runs turn a layer off")
    with open(admin, "w") as f:
        f.write(text.replace(clause, ";"))
    flags = ["--net", "host"] + (["--allow-degraded"] if os.geteuid() == 0 else [])
    runenv = dict(os.environ, ASAN_OPTIONS="detect_leaks=0")
    for pdir, want in ((os.path.join(SRC, "policies"), 0), (strict, 125)):
        p = subprocess.run([SHINKEN, "run", *flags, "--", "/bin/true"], capture_output=True, text=True,
                           timeout=60, cwd=tmp, env=dict(runenv, SHINKEN_POLICY_DIR=pdir))
        check(p.returncode == want, f"run {' '.join(flags)} under {pdir}: exit {p.returncode} ({p.stderr[-300:]!r})")
        if want:
            check("admin-no-disabling-the-sandbox" in p.stderr and "nothing was run" in p.stderr,
                  f"the refusal names the admin's rule ({p.stderr!r})")
    # Without a policy to ask, nothing is turned off.
    p = subprocess.run([SHINKEN, "run", *flags, "--", "/bin/true"], capture_output=True, text=True, timeout=60,
                       cwd=tmp, env=dict(runenv, SHINKEN_POLICY_DIR=os.path.join(tmp, "nowhere")))
    check(p.returncode == 125 and "cannot ask the policy" in p.stderr, f"no policy, no layer off ({p.stderr!r})")


def main():
    tmp = tempfile.mkdtemp(prefix="shk-e2e-")
    sock = os.path.join(tmp, "run", "manager.sock")
    db = os.path.join(tmp, "audit", "audit.db")
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
        json.dump({"socket": sock, "audit_db": db, "policy_dir": os.path.join(SRC, "policies"),
                   "standing": standing}, f)
    env = dict(os.environ, SHINKEN_SOCKET=sock)
    # The session tier may only narrow: a permit there stops the daemon.
    sess_pol = os.path.join(tmp, "session.cedar")
    with open(sess_pol, "w") as f:
        f.write('permit(principal, action, resource);\n')
    bad_cfg = os.path.join(tmp, "bad.json")
    with open(bad_cfg, "w") as f:
        json.dump({"socket": sock, "session_policy": sess_pol, "policy_dir": os.path.join(SRC, "policies"),
                   "audit_db": db}, f)
    p = subprocess.run([SHINKEN, "daemon", "--config", bad_cfg], capture_output=True, text=True, timeout=30)
    check(p.returncode == 1 and "may only narrow" in p.stderr and p.stderr.count("\n") == 1,
          f"a permit in the session tier is refused ({p.returncode}, {p.stderr!r})")
    check(not os.path.exists(sock), "no manager started on a refused configuration")
    policy_dir_checks(tmp, sock)
    layer_checks(tmp)
    daemon = subprocess.Popen([SHINKEN, "daemon", "--config", cfg], stdout=subprocess.PIPE, text=True)
    try:
        line = daemon.stdout.readline()
        check(line.startswith("listening "), f"daemon announces its socket (got {line!r})")
        check(oct(os.stat(sock).st_mode & 0o777) == "0o600", "control socket is 0600")
        check(oct(os.stat(os.path.dirname(sock)).st_mode & 0o777) == "0o700", "socket directory is 0700")

        ctl = Control(sock)
        ans = ctl.call(op="open_session", ask=False, name="e2e", trust_tier="standard", egress=True,
                       proxy_config=proxy_cfg)
        check(ans.get("ok") is True, f"open_session: {ans}")
        sid, edir = ans["session"], ans["egress_dir"]

        # The standing egress grant is there from the start, as a standing
        # handle; the standing privileged install too where this manager
        # can run privileged commands (doctor says: root), else it is
        # refused: no enforcement point for it.
        dr = subprocess.run([SHINKEN, "doctor", "--json"], capture_output=True, text=True, timeout=60)
        sudo_here = any(c["class"] == "install.privileged" and c["available"]
                        for c in json.loads(dr.stdout)["live_unlocks"])
        rc, out, _ = cli("grants", sid, "--json", env=env)
        st = [g for g in json.loads(out)["grants"] if g["lifecycle"] == "standing"] if rc == 0 else []
        want = ["install.privileged", "net.egress"] if sudo_here else ["net.egress"]
        check(sorted(g["class"] for g in st) == want and all(g["live"] for g in st),
              f"the standing grants issued to the new session ({out!r})")
        if not sudo_here:
            check(has_event(db, lambda e: e.get("gen_ai.conversation.id") == sid and e["event.name"] == "grant"
                            and e.get("shinken.class") == "install.privileged" and e.get("shinken.outcome") == "refused"
                            and e.get("shinken.reason", "").startswith("no enforcement point on this host for install.privileged: ")),
                  "the standing install is refused: no enforcement point on this host")
        s, code, _ = connect_via(edir, "standing.test", port)
        s.close()
        check(code == 200, f"a standing grant admits its destination without a grant call (got {code})")
        low = ctl.call(op="open_session", ask=False, name="low", trust_tier="low", egress=True, proxy_config=proxy_cfg)
        rc, out, _ = cli("grants", low.get("session", "x"), "--json", env=env)
        classes = sorted(g["class"] for g in json.loads(out)["grants"]) if rc == 0 else []
        check(classes == ["net.egress"], f"at low trust the standing install stays out ({classes})")
        check(has_event(db, lambda e: e.get("gen_ai.conversation.id") == low.get("session")
                        and e["event.name"] == "decision" and e.get("shinken.class") == "install.privileged"
                        and e.get("shinken.decision") == "deny" and e.get("shinken.policy.id") == "admin-install-low-trust"),
              "at low trust the admin forbid refuses the standing install, before the enforcement check")
        ctl.call(op="close_session", session=low.get("session", "x"))
        for g in st:
            cli("revoke", g["handle"], env=env)
        n_seen = len(accepted)

        # Before any grant: deny by default, and the upstream saw nothing.
        s, st, _ = connect_via(edir, "api.test", port)
        s.close()
        check(st == 403, f"no grant: CONNECT refused with 403 (got {st})")
        check(len(accepted) == n_seen, "no grant: the upstream got no connection")

        # The manifest puts **.test at Ask: without a human's answer the grant
        # waits as a pending request, naming the tier and the rule.
        rc, out, err = cli("grant", sid, "net.egress", "--scope", '{"domains":["api.test"]}', "--json", env=env)
        a = json.loads(out) if out.strip() else {}
        check(rc == 2 and a.get("decision") == "ask" and len(a.get("pending", "")) == 32 and a.get("tier") == "Ask"
              and a.get("policy") == "project-manifest-tiers" and "manifest entry 1" in a.get("error", ""),
              f"Ask tier without approval waits for a human (rc {rc}, {out!r})")
        rc, out, err = cli("grant", sid, "net.egress", "--scope", '{"domains":["api.test"]}', env=env)
        check(rc == 2 and "needs a human's approval" in err and err.count("\n") == 1, f"the CLI says it waits ({err!r})")
        s0, code, _ = connect_via(edir, "api.test", port)
        s0.close()
        check(code == 403, f"a pending request grants nothing (got {code})")
        # Approval is not a field any client may set.
        ans = ctl.call(op="grant", session=sid, **{"class": "net.egress"}, scope={"domains": ["api.test"]},
                       approval="approved")
        check(ans.get("ok") is False and "not a field" in ans.get("error", ""), f"approval field refused: {ans}")
        # A human channel answers: this control peer approves, and the
        # record names it by the credentials the kernel gave.
        ask = ctl.call(op="grant", session=sid, **{"class": "net.egress"}, scope={"domains": ["api.test"]}, once=True)
        res = ctl.call(op="resolve", pending=ask.get("pending", "x"), resolution="approve")
        by = res.get("resolved_by", {})
        check(res.get("ok") is True and res.get("decision") == "granted" and by.get("pid") == os.getpid()
              and by.get("uid") == os.getuid() and by.get("channel") == "control",
              f"resolve approves and records the peer: {res}")
        check(has_event(db, lambda e: e["event.name"] == "card-resolved" and e.get("shinken.outcome") == "approved"
                        and e.get("shinken.card.id") == ask.get("pending") and e.get("process.pid") == os.getpid()),
              "the approval event names who resolved it")
        cli("revoke", res.get("handle", "x"), env=env)
        again = ctl.call(op="resolve", pending=ask.get("pending", "x"), resolution="approve")
        check(again.get("ok") is False and "no pending request" in again.get("error", ""),
              f"a pending request is answered once: {again}")
        deny = ctl.call(op="grant", session=sid, **{"class": "net.egress"}, scope={"domains": ["other.test"]})
        res = ctl.call(op="resolve", pending=deny.get("pending", "x"), resolution="deny")
        check(res.get("ok") is True and res.get("decision") == "denied" and "handle" not in res,
              f"a denied request is refused: {res}")
        s0, code, _ = connect_via(edir, "other.test", port)
        s0.close()
        check(code == 403, f"a denied request grants nothing (got {code})")

        # With --approve: the CLI resolves the request it raised; granted,
        # naming what decided and who approved.
        rc, out, err = cli("grant", sid, "net.egress", "--scope", '{"domains":["api.test"]}',
                           "--approve", "--json", env=env)
        g = json.loads(out) if out.strip() else {}
        check(rc == 0 and g.get("decision") == "granted", f"approved grant issued (rc {rc}, {out!r} {err!r})")
        check(g.get("policy") == "project-manifest-tiers" and g.get("tier") == "Ask",
              f"grant answer names policy and tier: {g}")
        check(g.get("resolved_by", {}).get("uid") == os.getuid() and g["resolved_by"].get("pid") not in (None, os.getpid()),
              f"the CLI's own process is recorded as the approver: {g}")
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
        check(rc == 1 and "domains" in err, f"widening attenuation refused, naming the field ({err!r})")
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
        check(rc == 1 and "never_raw" in err, f"raw credentials refused ({err!r})")
        rc, out, err = cli("grant", sid, "net.egress", "--scope", '{"domain":["x.test"]}', env=env)
        check(rc == 1 and "unknown field" in err, f"unknown scope field refused ({err!r})")
        rc, out, err = cli("grant", "no-such-session", "clipboard", "--scope", "{}", env=env)
        check(rc == 1 and "no such session" in err, f"unknown session refused ({err!r})")
        rc, out, err = cli("grant", sid, "net.egress", env=env)
        check(rc == 64 and err.count("\n") == 1, f"missing --scope is a usage error ({err!r})")

        rc, out, _ = cli("sessions", "--json", env=env)
        check(rc == 0 and any(x["session"] == sid for x in json.loads(out)["sessions"]), "sessions lists it")

        # A class with no enforcement point on this host is refused, with the
        # reason, before any human is asked; nothing is issued or pending.
        # fs.scope has one (mounts into the running sandbox), but this session
        # runs no sandbox: it is refused as well, saying so.
        n_handles = len(json.loads(cli("grants", sid, "--json", env=env)[1])["grants"])
        n_pending = [x["pending"] for x in json.loads(cli("sessions", "--json", env=env)[1])["sessions"]
                     if x["session"] == sid]
        for cls, scope in [("fs.scope", '{"write":["/work/x"]}'), ("gpu", '{"device_ids":["0"]}'),
                           ("clipboard", '{"paste_in":true}')]:
            rc, out, err = cli("grant", sid, cls, "--scope", scope, "--approve", "--json", env=env)
            a = json.loads(out) if out.strip() else {}
            why = a.get("error", "")
            check(rc == 2 and a.get("decided_by") == "enforcement"
                  and (why.startswith(f"no enforcement point on this host for {cls}: ") if cls != "fs.scope"
                       else "no running sandbox" in why or why.startswith("no enforcement point")),
                  f"{cls}: refused for want of an enforcement point, with the reason ({out!r})")
        # credentials has one (the broker), but a secret the store does not
        # hold is refused by it, naming the secret: never granted empty.
        rc, out, err = cli("grant", sid, "credentials", "--scope", '{"broker_scopes":["github:read"]}', "--approve",
                           "--json", env=env)
        a = json.loads(out) if out.strip() else {}
        check(rc == 2 and a.get("decided_by") == "enforcement" and "no secret named github:read" in a.get("error", ""),
              f"credentials: a secret the store does not hold is refused, with the reason ({out!r})")
        rc, out, _ = cli("grants", sid, "--json", env=env)
        check(len(json.loads(out)["grants"]) == n_handles, "no handle was issued for a class with no mechanism")
        rc, out, _ = cli("sessions", "--json", env=env)
        check([x["pending"] for x in json.loads(out)["sessions"] if x["session"] == sid] == n_pending,
              "no pending request was raised for a class with no mechanism")

        # Nonsense durations are refused with one sentence, not wrapped into
        # a negative expiry.
        for op, extra in [("grant", {"session": sid, "class": "net.egress", "scope": {"domains": ["api.test"]}}),
                          ("open_session", {})]:
            a = ctl.call(op=op, ttl_ms=2**63 - 1, **extra)
            check(a.get("ok") is False and "at most" in a.get("error", ""), f"{op}: ttl 2^63-1 refused ({a})")
        a = ctl.call(op="grant", session=sid, **{"class": "net.egress"},
                     scope={"domains": ["registry.npm.example"], "ports": [443]}, ttl_ms=31622400000)
        check(a.get("ok") is True and 0 < a.get("expires_ms", 0) <= time.time() * 1000 + 24 * 3600 * 1000 + 5000,
              f"the longest ttl is clamped to the session's end ({a})")

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
            json.dump({"socket": fsock, "audit_db": os.path.join(tmp, "fault-audit", "audit.db"),
                       "policy_dir": os.path.join(SRC, "policies")}, f)
        # A release build has no such switch: the same grant goes through.
        fenv = dict(env, SHINKEN_SOCKET=fsock, SHINKEN_FAULT="grant-delta")
        fd = subprocess.Popen([SHINKEN, "daemon", "--config", fcfg], stdout=subprocess.PIPE, text=True, env=fenv)
        try:
            fd.stdout.readline()
            fctl = Control(fsock)
            fa = fctl.call(op="open_session", ask=False, egress=True, proxy_config=proxy_cfg)
            rc, out, err = cli("grant", fa["session"], "net.egress", "--scope", '{"domains":["api.test"]}',
                               "--approve", env=fenv)
            if FAULTS:
                check(rc == 2 and "injected fault" in err, f"an injected delta fault refuses the grant ({err!r})")
                rc, out, _ = cli("grants", fa["session"], "--json", env=fenv)
                check(rc == 0 and json.loads(out)["grants"] == [], "after the injected fault no handle remains")
                n0 = len(accepted)
                s2, code, _ = connect_via(fa["egress_dir"], "api.test", port)
                s2.close()
                check(code == 403 and len(accepted) == n0, "after the injected fault the proxy admits nothing")
            else:
                check(rc == 0, f"a build without fault injection ignores SHINKEN_FAULT ({err!r})")
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

        # A closed session's handles leave the table: 300 sessions of ten
        # handles each, opened and closed, leave none behind, and the list of
        # grants stays small enough to answer.
        rc, out, _ = cli("grants", "--json", env=env)
        before = len(json.loads(out)["grants"]) if rc == 0 else -1
        for i in range(300):
            a = ctl.call(op="open_session", ask=False, egress=True, proxy_config=proxy_cfg)
            for k in range(9):
                ctl.call(op="grant", session=a["session"], **{"class": "net.egress"},
                         scope={"domains": ["registry.npm.example"], "ports": [443]})
            ctl.call(op="close_session", session=a["session"])
        rc, out, err = cli("grants", "--json", env=env)
        check(rc == 0 and len(json.loads(out)["grants"]) == before,
              f"300 closed sessions left no handle behind (rc {rc}, {err!r})")

        # Closing the launcher's connection ends the session: its proxy is gone.
        ctl.close()
        deadline = time.time() + 5
        while os.path.exists(os.path.join(edir, "http.sock")) and time.time() < deadline:
            time.sleep(0.05)
        check(not os.path.exists(os.path.join(edir, "http.sock")), "session sockets removed with the session")

        # Events. The proxy's verdicts carry a protocol and never a path,
        # query or header value; they and the manager's events are in its
        # audit store, one canonical entry each. The session's end
        # follows the socket's removal: wait for it.
        check(has_event(db, lambda e: e["event.name"] == "session-close" and e.get("gen_ai.conversation.id") == sid),
              "the session's end is recorded")
        evs = audit_events(db)
        lines = [e for e in evs if e["event.name"] == "proxy-verdict"]
        check(lines and all("shinken.egress.protocol" in e for e in lines), "every proxy verdict names its protocol")
        check(any(a.get("shinken.decision") == "deny" for a in lines), "the proxy's refusals are on the timeline")
        check(any(str(a.get("shinken.egress.rule", "")).startswith("handle:") for a in lines),
              "an allowed connection's verdict names the handle that allowed it")
        kinds = {e["event.name"] for e in evs}
        check({"session-open", "decision", "grant", "card-raised", "card-resolved", "egress-check", "use-once",
               "attenuate", "revoke", "taint", "session-close"} <= kinds, f"event kinds: {kinds}")
        check(any(e["event.name"] == "grant" and e.get("shinken.outcome") == "refused"
                  and "OS delta failed" in e.get("shinken.reason", "") and "shinken.handle.id" not in e for e in evs),
              "the failed OS delta has an event saying so, naming no handle")
        check(all("time" in e and "seq" in e for e in evs), "events carry their time and sequence number")
        check(any(e["event.name"] == "grant" and e.get("shinken.handle.id") == handle
                  and e.get("shinken.outcome") == "granted" for e in evs), "grant event names the handle")
        check(any(e["event.name"] == "egress-check" and e.get("shinken.handle.id") == handle
                  and e.get("server.address") == "api.test" for e in evs),
              "the connection a handle allowed is recorded with the handle, host and port")

        # A live grant reaches a running sandbox: `shinken run --net proxy`
        # registers with this daemon; a client inside keeps trying until the
        # grant arrives (its held try goes on the moment the grant is
        # issued), and after the revoke its next try waits on a card that a
        # human denies.
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
        # After the revoke the next try is held for a human (the manifest
        # puts api.test at Ask): deny its card from here.
        card = None
        deadline = time.time() + 10
        while not card and time.time() < deadline:
            rc, out, _ = cli("approvals", rsid or "none", "--json", env=env)
            card = next(iter(json.loads(out).get("cards", [])), None) if rc == 0 else None
            time.sleep(0.05)
        check(card is not None, "inside, the next connection after revoke waits on a card")
        rc, _, err = cli("deny", (card or {}).get("id", "x"), "--reason", "revoked", env=env)
        check(rc == 0, f"shinken deny answers it ({err!r})")
        _, run_err = run.communicate(timeout=20)
        second = open(os.path.join(work, "second")).read() if os.path.exists(os.path.join(work, "second")) else ""
        check(second == "refused", f"inside, the next connection after revoke is refused ({second!r})")
        check(len(accepted) == n_before + 2, "after revoke the upstream saw nothing new")
        third = open(os.path.join(work, "third")).read() if os.path.exists(os.path.join(work, "third")) else ""
        check(third == "cut", f"inside, the tunnel already open under the handle is cut by the revoke ({third!r})")
        check(run.returncode == 0, f"shinken run exits with the client's status ({run.returncode}: {run_err[-300:]!r})")
        # The launcher's account of its sandbox is on the timeline: what
        # stage 2 said it enforced, and the exit.
        st = has_event(db, lambda e: e["event.name"] == "sandbox-start" and e.get("gen_ai.conversation.id") == rsid)
        evs = audit_events(db)
        start = next((e for e in evs if e["event.name"] == "sandbox-start" and e.get("gen_ai.conversation.id") == rsid), {})
        end = next((e for e in evs if e["event.name"] == "sandbox-exit" and e.get("gen_ai.conversation.id") == rsid), {})
        check(st and "seccomp" in start.get("shinken.sandbox.enforced", []) and "egress-bridge" in
              start.get("shinken.sandbox.enforced", []), f"the sandbox's start names what it enforced ({start})")
        check(end.get("process.exit.code") == 0 and end.get("shinken.outcome") == "exited",
              f"the sandbox's exit is recorded with its status ({end})")
        rc, out, _ = cli("sessions", "--json", env=env)
        check(not any(x["session"] == rsid for x in json.loads(out)["sessions"]),
              "the run's session ended with the command")

        # A new session, then the manager dies: the session has no network.
        ctl = Control(sock)
        ans = ctl.call(op="open_session", ask=False, egress=True, proxy_config=proxy_cfg)
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

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""`shinken run --net proxy --panel`: the run's own manager serves the
Permission Panel, and a person at it grants the running session what it
needs. Judged from outside the sandbox:

- the run says the panel's URL, and `SHINKEN_SOCKET=... shinken panel`
  prints the same one from the login file beside the run's socket;
- the panel lists the run's session, and a grant made through it lets the
  workload's next request reach a loopback upstream, which counts it; the
  control is the same request before the grant: refused, and the upstream
  saw nothing;
- the workload cannot read the login file, nor reach the panel's port
  (the control: both work from outside while the run is up);
- the login file is gone when the run ends.
"""
import http.client
import json
import os
import re
import shutil
import subprocess
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lib import fail, scratch, skip  # noqa: E402  (tests/lib.py: how a test skips and fails)

sys.path.insert(0, os.path.join(os.environ["SHINKEN_SRCDIR"], "tests", "e2e"))
from panel import Panel  # noqa: E402  (the panel's HTTP client of tests/e2e/panel.py)

sys.path.insert(0, os.path.join(os.environ["SHINKEN_SRCDIR"], "tests", "cli"))
from importlib import import_module  # noqa: E402

Upstream = import_module("run-ask").Upstream

SHINKEN = os.environ["SHINKEN"]
failed = []


def ok(cond, what):
    print(("ok: " if cond else "FAIL: ") + what, file=sys.stderr)
    if not cond:
        failed.append(what)


def wait_for(path, timeout=30):
    end = time.monotonic() + timeout
    while not os.path.exists(path):
        if time.monotonic() > end:
            return False
        time.sleep(0.05)
    return True


def main():
    if not shutil.which("curl"):
        skip("no curl")
    tmp = scratch("shk-run-panel.")
    try:
        run_test(tmp)
    finally:
        shutil.rmtree(tmp, True)
    if failed:
        fail("%d checks failed" % len(failed))


def run_test(tmp):
    ws, xdg = tmp + "/ws", tmp + "/xdg"
    os.mkdir(ws)
    os.mkdir(xdg, 0o700)
    up = Upstream()
    env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "XDG_RUNTIME_DIR": xdg, "XDG_STATE_HOME": tmp + "/state",
           "SHINKEN_SOCKET": tmp + "/no-daemon.sock", "SHINKEN_POLICY_DIR": os.environ.get("SHINKEN_POLICY_DIR", "")}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if k in os.environ:
            env[k] = os.environ[k]
    P = up.port
    login_glob = xdg + "/shinken"

    def get(tag):
        return "curl -sS --max-time 30 -o /dev/null -w '%%{http_code}' http://grant.test:%d/; echo ' RC-%s'; " % (P, tag)

    # The workload: a request before the grant (the control), then it waits
    # for the test; tries the login file and the panel's port from inside;
    # then the same request after the grant.
    script = (get("before") + "touch before.done; while [ ! -e go ]; do sleep 0.05; done; "
              "if cat \"$(cat login.path)\" >/dev/null 2>&1; then echo LOGIN-READ; else echo LOGIN-HIDDEN; fi; "
              "if curl -s --noproxy '*' --max-time 3 -o /dev/null \"http://127.0.0.1:$(cat panel.port)/\"; "
              "then echo PANEL-REACHED; else echo PANEL-UNREACHABLE; fi; "
              + get("after"))
    cmd = [SHINKEN, "run"] + (["--allow-degraded"] if os.getuid() == 0 else []) + [
        "--net", "proxy", "--panel", "--allow-cidr", "127.0.0.1/32", "--resolve", "grant.test:127.0.0.1",
        "--", "sh", "-c", script]
    p = subprocess.Popen(cmd, env=env, cwd=ws, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, text=True)
    try:
        line = ""
        end = time.monotonic() + 60
        while "shinken: panel " not in line and time.monotonic() < end:
            line = p.stderr.readline()
            if not line:
                break
        m = re.search(r"shinken: panel (http://127\.0\.0\.1:\d+/login#\S+)", line)
        if not m:
            fail("the run did not say the panel's URL (%r)" % line)
        url = m.group(1)
        ok(True, "the run says the panel's URL")
        socks = [f for f in os.listdir(login_glob) if f.startswith("run-") and f.endswith(".sock")]
        ok(len(socks) == 1, "one run socket (%s)" % socks)
        sock = os.path.join(login_glob, socks[0])
        login = sock[:-len(".sock")] + ".panel-login"
        with open(ws + "/login.path", "w") as f:
            f.write(login)
        panel = Panel(url)
        with open(ws + "/panel.port", "w") as f:
            f.write(str(panel.port))
        q = subprocess.run([SHINKEN, "panel"], env=dict(env, SHINKEN_SOCKET=sock), capture_output=True, text=True,
                           timeout=30)
        ok(q.returncode == 0 and q.stdout.strip() == url,
           "SHINKEN_SOCKET=<run socket> shinken panel prints the same URL (%d %r %r)" % (q.returncode, q.stdout,
                                                                                        q.stderr))
        # The control: the request before any grant was refused, and the
        # upstream saw nothing.
        ok(wait_for(ws + "/before.done"), "the workload made its first request")
        ok(up.count("grant.test") == 0, "control: before the grant the upstream saw nothing")
        # The panel, from outside: it is reachable here, logs in, and lists
        # the run's session.
        s, h, body = panel.login(panel.token)
        ok(s == 200, "the URL's token logs in (%d %r)" % (s, body))
        panel.cookie = h.get("set-cookie", "").split(";")[0].partition("=")[2]
        panel.csrf = json.loads(body or b"{}").get("csrf")
        s, _, body = panel.req("POST", "/api/call", {"op": "sessions"}, panel.authed())
        sessions = json.loads(body).get("sessions", []) if s == 200 else []
        ok(len(sessions) == 1 and sessions[0]["session"].startswith("run-"),
           "the panel lists the run's session (%d %r)" % (s, body[:300]))
        sid = sessions[0]["session"] if sessions else ""
        # A grant through the panel; one the policy asks a human for is
        # approved there, as the page's Approve button does.
        s, _, body = panel.req("POST", "/api/call", {"op": "grant", "session": sid, "class": "net.egress",
                                                     "scope": {"domains": ["grant.test"], "ports": [P]}},
                               panel.authed())
        a = json.loads(body or b"{}")
        if not a.get("ok") and a.get("decision") == "ask":
            s, _, body = panel.req("POST", "/api/call", {"op": "resolve", "pending": a.get("pending"),
                                                         "resolution": "approve"}, panel.authed())
            a = json.loads(body or b"{}")
        ok(a.get("ok") is True and a.get("handle"), "the panel grants grant.test to the run (%r)" % a)
        open(ws + "/go", "w").close()
        out, err = p.communicate(timeout=90)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    print("--- the run's output\n" + out + "\n--- its stderr\n" + err, file=sys.stderr)
    ok("403 RC-before" in out, "control: the request before the grant was refused (403)")
    ok("200 RC-after" in out and up.count("grant.test") == 1,
       "after the panel's grant the workload's request reached the upstream (%d)" % up.count("grant.test"))
    ok("LOGIN-HIDDEN" in out, "the workload cannot read the panel's login file")
    ok("PANEL-UNREACHABLE" in out, "the workload cannot reach the panel's port")
    ok(p.returncode == 0, "shinken run exits with the command's status (%d)" % p.returncode)
    ok(not os.path.exists(login), "the login file is gone when the run ends")
    # The control for the two from-inside checks: from outside, while the
    # run was up, the file was read (shinken panel above) and the port
    # answered (the login above); a fresh connection now is refused.
    try:
        c = http.client.HTTPConnection(panel.addr, panel.port, timeout=3)
        c.request("GET", "/")
        c.getresponse()
        ok(False, "the panel ends with the run")
    except OSError:
        ok(True, "the panel ends with the run")


if __name__ == "__main__":
    main()

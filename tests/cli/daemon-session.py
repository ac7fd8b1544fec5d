#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""daemon-session.py CASE: `shinken run --net proxy` sessions hosted by a
real `shinken daemon`, judged from outside.

sessions: two runs from two working directories with two commands; `shinken
sessions` tells them apart by each one's command, working directory, pid
(the run's own, as this test started it), start time and user. The control
is the other session: each field names its own run, not the other's.

summary: a run the daemon hosts is summed up at its end like an embedded
one, from the daemon's count: two CONNECTs the run's --deny-domain refuses
are one line naming the host and the rule, two the daemon holds for a
human until the client gives up are one line saying so and how to grant,
and the line says the timeline keeps every connection; the control grants
the host (--allow-domain), and nothing is said.

foreign: an unprivileged user meeting root's daemon (its directory 0700)
is told the manager belongs to root, and not to start one; the control
is root, whom the same command serves, and the same user with no manager
at all, who is told to start one.

no-runtime-dir: a user with neither XDG_RUNTIME_DIR nor SHINKEN_SOCKET
(after `su -`), whose default place is root's /run/shinken, is told so by
`shinken sessions` and by `shinken daemon` (which fails at once), and
what to do instead; the control follows that advice (a 0700 directory of
the user's and SHINKEN_SOCKET) and the daemon starts and answers."""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.join(os.environ["SHINKEN_SRCDIR"], "tests", "e2e"))
from mgrlib import Daemon  # noqa: E402

SHINKEN = os.environ["SHINKEN"]
CASE = sys.argv[1]


def fail(why):
    print("FAIL: " + why, file=sys.stderr)
    sys.exit(1)


TMP = tempfile.mkdtemp(prefix="shk-dsession.", dir="/var/tmp")
D = Daemon(TMP, "d")
RUNS = []


def cleanup():
    for p in RUNS:
        if p.poll() is None:
            p.kill()
            p.wait()
    D.stop()
    shutil.rmtree(TMP, True)


def start_run(ws, argv):
    """A `shinken run --net proxy --verbose -- ARGV` in WS against the
    daemon; returns (process, session id) once it said its session."""
    os.makedirs(ws, exist_ok=True)
    degraded = ["--allow-degraded"] if os.getuid() == 0 else []
    p = subprocess.Popen([SHINKEN, "run"] + degraded + ["--net", "proxy", "--verbose", "--"] + argv, cwd=ws,
                         env=D.env, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True)
    RUNS.append(p)
    end = time.monotonic() + 30
    line = ""
    while "shinken: session " not in line:
        if time.monotonic() > end or p.poll() is not None:
            fail("no session line from %s: %r" % (argv, line))
        line = p.stderr.readline()
    return p, re.search(r"session (\S+?);?\s", line).group(1)


def case_sessions():
    t0 = time.time()
    a, sa = start_run(TMP + "/ws-a", ["sleep", "60"])
    b, sb = start_run(TMP + "/ws-b", ["sleep", "61"])
    t1 = time.time()
    rc, out, err, _ = D.cli("sessions", "--json")
    if rc != 0:
        fail("sessions --json failed: %r" % err)
    by_id = {s["session"]: s for s in json.loads(out)["sessions"]}
    if sa not in by_id or sb not in by_id:
        fail("sessions does not list both runs: %r" % out)
    user = subprocess.run(["id", "-un"], capture_output=True, text=True).stdout.strip()
    for sid, p, ws, cmd, other_ws, other_cmd in [(sa, a, "ws-a", "sleep 60", "ws-b", "sleep 61"),
                                                 (sb, b, "ws-b", "sleep 61", "ws-a", "sleep 60")]:
        s = by_id[sid]
        if s.get("pid") != p.pid:
            fail("session %s: pid %r, not its run's %d" % (sid, s.get("pid"), p.pid))
        if s.get("cwd") != os.path.realpath(TMP + "/" + ws):
            fail("session %s: cwd %r, not %s" % (sid, s.get("cwd"), ws))
        if not s.get("command", "").startswith("shinken run") or not s["command"].endswith("-- " + cmd):
            fail("session %s: command %r does not name its run of %s" % (sid, s.get("command"), cmd))
        if other_cmd in s["command"] or other_ws in s["cwd"]:
            fail("session %s carries the other session's command or directory: %r" % (sid, s))
        if s.get("user") != user or s.get("uid") != os.getuid():
            fail("session %s: user %r uid %r, not %s" % (sid, s.get("user"), s.get("uid"), user))
        if not (t0 - 1) * 1000 <= s.get("started_ms", 0) <= (t1 + 1) * 1000:
            fail("session %s: started_ms %r is not when it started" % (sid, s.get("started_ms")))
    # The table a person reads: a header and one line per session with the
    # same fields.
    rc, out, err, _ = D.cli("sessions")
    print("--- shinken sessions -> %d\n%s%s" % (rc, out, err), file=sys.stderr)
    lines = out.splitlines()
    if rc != 0 or not lines or not re.match(r"SESSION +PID +USER +STARTED .*CWD +COMMAND$", lines[0]):
        fail("sessions has no header naming the columns: %r" % out)
    for sid, p, ws, cmd in [(sa, a, "ws-a", "sleep 60"), (sb, b, "ws-b", "sleep 61")]:
        row = [l for l in lines if l.startswith(sid + " ")]
        if len(row) != 1 or (" %d " % p.pid) not in row[0] or (" %s " % user) not in row[0] \
                or ("/" + ws + " ") not in row[0] or not row[0].endswith(cmd):
            fail("no row for %s with its pid, user, directory and command: %r" % (sid, out))


def case_summary():
    import socket
    import threading
    host = "blocked.example.test"
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    port = listener.getsockname()[1]

    def accept_forever():
        while True:
            c, _ = listener.accept()
            c.close()

    threading.Thread(target=accept_forever, daemon=True).start()
    ask_twice = ("for i in 1 2; do exec 3<>/dev/tcp/127.0.0.1/3128 || exit 9; "
                 "printf 'CONNECT %s:%d HTTP/1.1\\r\\nHost: %s:%d\\r\\n\\r\\n' >&3; "
                 "IFS= read -r -t 3 line <&3; echo \"answer: $line\"; exec 3<&-; done" % (host, port, host, port))

    def run(options):
        ws = TMP + "/ws"
        os.makedirs(ws, exist_ok=True)
        degraded = ["--allow-degraded"] if os.getuid() == 0 else []
        p = subprocess.run([SHINKEN, "run"] + degraded + ["--net", "proxy", "--verbose"] + options +
                           ["--", "/bin/bash", "-c", ask_twice], cwd=ws, env=D.env, stdin=subprocess.DEVNULL,
                           capture_output=True, text=True, timeout=90)
        print("--- run %s -> %d\n%s%s" % (" ".join(options), p.returncode, p.stdout, p.stderr), file=sys.stderr)
        return p.stdout, p.stderr

    out, err = run(["--deny-domain", host])
    if out.count("answer: HTTP/1.1 403") != 2:
        fail("the daemon's proxy did not refuse both requests: %r" % out)
    if not re.search(r"^shinken: refused 2 connections to %s:%d \(forbidden by the rule '[^']*%s[^']*'\)$"
                     % (re.escape(host), port, re.escape(host)), err, re.M):
        fail("no summary of the daemon's session: %r" % err)
    if "on the manager's audit timeline" not in err:
        fail("the summary does not say where the daemon keeps every connection: %r" % err)
    # Held for a human, whom nobody is: the client gives up after 3 s.
    out, err = run([])
    m = re.search(r"^shinken: session (\S+);", err, re.M)
    if not m:
        fail("the daemon's session was not said: %r" % err)
    line = ("shinken: refused 2 connections to %s:%d (held for a human's answer, and the client gave up waiting; "
            "'shinken approvals' shows what waits, or 'shinken grant %s net.egress --scope "
            "'{\"domains\":[\"%s\"]}'' grants it ahead)" % (host, port, m.group(1), host))
    if line not in err.splitlines():
        fail("no summary of the held requests: %r" % err)
    out, err = run(["--allow-domain", host, "--resolve", "%s:127.0.0.1" % host, "--allow-cidr", "127.0.0.0/8"])
    if out.count("answer: HTTP/1.1 200") != 2:
        fail("control: the granted host was not reached: %r" % out)
    if "shinken: refused" in err:
        fail("control: a refusal was said for a granted host: %r" % err)


def case_foreign():
    if os.getuid() != 0:
        fail("the case needs root, to run the daemon as root and the client as another user")
    os.chmod(TMP, 0o755)
    shinken = SHINKEN
    AS = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if subprocess.call(AS + ["test", "-x", SHINKEN]) != 0:
        shinken = TMP + "/shinken"
        shutil.copy(SHINKEN, shinken)
        os.chmod(shinken, 0o755)
    mine = TMP + "/nobody"
    os.mkdir(mine)
    os.chown(mine, 65534, 65534)

    def sessions(as_user, sock):
        p = subprocess.run((AS if as_user else []) + [shinken, "sessions"], capture_output=True, text=True,
                           env={"PATH": "/usr/bin:/bin", "SHINKEN_SOCKET": sock}, timeout=30)
        print("--- %s sessions at %s -> %d\n%s%s" % ("nobody" if as_user else "root", sock, p.returncode, p.stdout,
                                                   p.stderr), file=sys.stderr)
        return p.returncode, p.stderr

    rc, err = sessions(True, D.sock)
    if rc != 4 or "belongs to root" not in err or "start one" in err or err.count("\n") != 1:
        fail("nobody meeting root's manager was not told it is root's (and not to start one): %d %r" % (rc, err))
    rc, err = sessions(False, D.sock)
    if rc != 0:
        fail("control: root is not served by its own manager: %d %r" % (rc, err))
    rc, err = sessions(True, mine + "/manager.sock")
    if rc != 4 or "start one with 'shinken daemon'" not in err:
        fail("control: with no manager at all, nobody is not told to start one: %d %r" % (rc, err))


def case_no_runtime_dir():
    if os.getuid() != 0:
        fail("the case needs root, to become another user")
    os.chmod(TMP, 0o755)
    AS = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    shinken, policies = SHINKEN, os.environ.get("SHINKEN_POLICY_DIR", "")
    if subprocess.call(AS + ["test", "-x", SHINKEN, "-a", "-r", policies + "/schema.cedarschema"]) != 0:
        shinken, policies = TMP + "/shinken", TMP + "/policies"
        shutil.copy(SHINKEN, shinken)
        shutil.copytree(os.environ.get("SHINKEN_POLICY_DIR", ""), policies)
        subprocess.check_call(["chmod", "-R", "a+rX", shinken, policies])
    home = TMP + "/nobody-home"
    os.mkdir(home)
    os.chown(home, 65534, 65534)
    env = {"PATH": "/usr/bin:/bin", "HOME": home, "SHINKEN_POLICY_DIR": policies}

    def as_nobody(args, extra=None, timeout=30):
        p = subprocess.run(AS + [shinken] + args, capture_output=True, text=True, env=dict(env, **(extra or {})),
                           timeout=timeout)
        print("--- nobody %s -> %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr), file=sys.stderr)
        return p.returncode, p.stderr

    advice = "without XDG_RUNTIME_DIR a user's manager has no default place"
    rc, err = as_nobody(["sessions"])
    # Where root's /run/shinken is there and closed, "it belongs to root"
    # is the right answer as well.
    right = (advice in err and "SHINKEN_SOCKET=DIR/manager.sock" in err) or "belongs to root" in err
    if rc != 4 or not right or "start one with 'shinken daemon'" in err:
        fail("sessions without XDG_RUNTIME_DIR does not say what to do: %d %r" % (rc, err))
    rc, err = as_nobody(["daemon"])
    if rc == 0 or advice not in err:
        fail("the daemon without XDG_RUNTIME_DIR does not say what to do: %d %r" % (rc, err))
    # Control: the advice, followed.
    mine = home + "/run"
    subprocess.check_call(AS + ["mkdir", "-m", "0700", mine])
    sock = {"SHINKEN_SOCKET": mine + "/manager.sock"}
    d = subprocess.Popen(AS + [shinken, "daemon"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                         env=dict(env, **sock))
    try:
        banner = d.stdout.readline()
        if not banner.startswith("listening " + mine):
            fail("control: the daemon on the user's own socket did not start: %r %r" % (banner, d.stderr.read()))
        rc, err = as_nobody(["sessions"], sock)
        if rc != 0:
            fail("control: sessions of the user's own daemon failed: %d %r" % (rc, err))
    finally:
        d.terminate()
        d.wait(timeout=20)


try:
    {"sessions": case_sessions, "no-runtime-dir": case_no_runtime_dir, "foreign": case_foreign, "summary": case_summary}[CASE]()
finally:
    cleanup()
print("ok: " + CASE)

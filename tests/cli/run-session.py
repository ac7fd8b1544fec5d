#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""run-session.py CASE [WHO]: what `shinken run` says on its own stderr about
the session it ran: the session line and SHINKEN_SESSION, the summary of
refused connections at exit (and each one live with --verbose), and a kill
by the memory limit. Each case has its control run, which differs in the
one thing the claim is about and shows that the line is not said anyway.

The refused requests are real: the workload (bash, through /dev/tcp) asks
the session's egress proxy for a CONNECT to a host that is not granted; the
control grants it with --allow-domain.
"""
import atexit
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

SHINKEN = os.environ["SHINKEN"]
CASE = sys.argv[1]
WHO = sys.argv[2] if len(sys.argv) > 2 else "root"
HOST = "blocked.example.test"


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lib import fail, skip  # noqa: E402  (tests/lib.py: how a test skips and fails)


def scratch():
    base = "/var/lib/shinken-tests"
    try:
        os.makedirs(base, exist_ok=True)
        os.chmod(base, 0o755)
    except OSError:
        base = "/var/tmp"
    d = tempfile.mkdtemp(prefix="shk-session.", dir=base)
    os.chmod(d, 0o755)
    atexit.register(shutil.rmtree, d, True)
    return d


TMP = scratch()
# The writable root, away from the socket the run looks for a daemon at.
WS = TMP + "/ws"
os.mkdir(WS)
POLICIES = os.environ.get("SHINKEN_POLICY_DIR", "")
AS = []
if WHO == "user":
    if os.getuid() != 0:
        skip("needs root to become another user")
    AS = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
    if subprocess.call(AS + ["test", "-x", SHINKEN, "-a", "-r", POLICIES + "/schema.cedarschema"]) != 0:
        shutil.copy(SHINKEN, TMP + "/shinken")
        shutil.copytree(POLICIES, TMP + "/policies")
        subprocess.check_call(["chmod", "-R", "a+rX", TMP])
        SHINKEN, POLICIES = TMP + "/shinken", TMP + "/policies"
    os.makedirs(TMP + "/home")
    for d in (TMP + "/home", WS):
        os.chown(d, 65534, 65534)


def run(options, script, extra_env=None):
    """`shinken run OPTIONS -- bash -c SCRIPT` with pipes for stdio (no
    terminal); returns (status, stdout, stderr)."""
    degraded = ["--allow-degraded"] if not AS and os.getuid() == 0 else []
    env = {"PATH": "/usr/bin:/bin", "HOME": TMP + "/home" if AS else TMP,
           "SHINKEN_POLICY_DIR": POLICIES,
           # No daemon: the session's manager is embedded in shinken run.
           "SHINKEN_SOCKET": TMP + "/no-daemon.sock"}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if k in os.environ:
            env[k] = os.environ[k]
    env.update(extra_env or {})
    argv = AS + [SHINKEN, "run"] + degraded + options + ["--", "/bin/bash", "-c", script]
    p = subprocess.run(argv, cwd=WS, env=env, stdin=subprocess.DEVNULL, capture_output=True,
                       timeout=60)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    print("--- %s -> %d\n%s%s" % (" ".join(options), p.returncode, out, err), file=sys.stderr)
    return p.returncode, out, err


# A listener on the host's loopback, where HOST is pinned (--resolve) in
# the control run that grants it.
LISTENER = socket.socket()
LISTENER.bind(("127.0.0.1", 0))
LISTENER.listen(16)
PORT = LISTENER.getsockname()[1]


def accept_forever():
    while True:
        c, _ = LISTENER.accept()
        c.close()


threading.Thread(target=accept_forever, daemon=True).start()
GRANT = ["--allow-domain", HOST, "--resolve", "%s:127.0.0.1" % HOST, "--allow-cidr", "127.0.0.0/8"]

# Two CONNECTs to HOST through the session's HTTP proxy (the bridge on the
# sandbox's loopback); prints the proxy's status line of each.
ASK_TWICE = (
    "for i in 1 2; do exec 3<>/dev/tcp/127.0.0.1/3128 || exit 9; "
    "printf 'CONNECT %s:%d HTTP/1.1\\r\\nHost: %s:%d\\r\\n\\r\\n' >&3; "
    "IFS= read -r -t 10 line <&3; echo \"answer: $line\"; exec 3<&-; done" % (HOST, PORT, HOST, PORT))

SUMMARY = re.compile(r"^shinken: refused 2 connections to %s:%d \(not granted; 'shinken grant "
                     r"(\S+) net\.egress --scope '\{\"domains\":\[\"%s\"\]\}'' or approve when asked\)$"
                     % (re.escape(HOST), PORT, re.escape(HOST)), re.M)


def refusals(err):
    return [l for l in err.splitlines() if l.startswith("shinken: refused")]


def case_summary():
    rc, out, err = run(["--net", "proxy"], ASK_TWICE)
    if out.count("answer: HTTP/1.1 403") != 2:
        fail("the proxy did not refuse both requests: %r" % out)
    m = SUMMARY.search(err)
    if not m:
        fail("no summary line for the two refusals in shinken's stderr: %r" % err)
    if len(refusals(err)) != 1:
        fail("the two refusals are not one line: %r" % refusals(err))
    if "SHINKEN_EVENT_LOG=FILE" not in err:
        fail("the summary does not say how to keep the full log: %r" % err)
    if "shinken: refused" in out:
        fail("the summary went to the workload's stdout")
    # The full log, kept where SHINKEN_EVENT_LOG says, and named.
    log = TMP + "/events.jsonl"
    if AS:
        open(log, "w").close()
        os.chown(log, 65534, 65534)
    rc, out, err = run(["--net", "proxy"], ASK_TWICE, {"SHINKEN_EVENT_LOG": log})
    if not SUMMARY.search(err) or ("logged in %s" % log) not in err:
        fail("with SHINKEN_EVENT_LOG the summary does not name the log: %r" % err)
    with open(log) as f:
        if sum(1 for l in f if HOST in l and '"deny"' in l) != 2:
            fail("the kept log does not hold the two refusals")
    # Control: the host granted, nothing is refused and nothing is said.
    rc, out, err = run(["--net", "proxy"] + GRANT, ASK_TWICE)
    if out.count("answer: HTTP/1.1 200") != 2:
        fail("control: the granted host was not reached: %r" % out)
    if refusals(err):
        fail("control: a refusal was reported for a granted host: %r" % err)


def case_verbose():
    # Live: each refusal is said as it happens, and the summary still at
    # the end.
    rc, out, err = run(["--net", "proxy", "--verbose"], ASK_TWICE)
    live = [l for l in refusals(err) if l.startswith("shinken: refused a connection to %s:%d (not granted"
                                                     % (HOST, PORT))]
    if len(live) != 2:
        fail("--verbose did not say each refusal: %r" % err)
    if not SUMMARY.search(err):
        fail("--verbose lost the summary at exit: %r" % err)
    # Control: without --verbose, only the summary.
    rc, out, err = run(["--net", "proxy"], ASK_TWICE)
    if len(refusals(err)) != 1:
        fail("control: without --verbose there is more than the summary: %r" % err)


def case_session():
    rc, out, err = run(["--net", "proxy", "--verbose"], 'echo "inside: ${SHINKEN_SESSION-unset}"')
    m = re.search(r"^shinken: session (\S+); grant egress with: SHINKEN_SOCKET=(\S+) shinken grant (\S+) "
                  r"net\.egress", err, re.M)
    if not m:
        fail("no session line with --verbose: %r" % err)
    sid = m.group(1)
    if m.group(3) != sid:
        fail("the session line's grant names another session: %r" % m.group(0))
    if ("inside: %s\n" % sid) not in out:
        fail("the workload's SHINKEN_SESSION is not the session said: %r" % out)
    # --env-clean keeps it too.
    rc, out, err = run(["--net", "proxy", "--verbose", "--env-clean"],
                       'echo "inside: ${SHINKEN_SESSION-unset}"')
    m = re.search(r"^shinken: session (\S+);", err, re.M)
    if not m or ("inside: %s\n" % m.group(1)) not in out:
        fail("--env-clean lost SHINKEN_SESSION: %r %r" % (out, err))
    # Control: without --verbose and without a terminal, no line; and
    # without a session (no --net proxy), no variable.
    rc, out, err = run(["--net", "proxy"], "true")
    if "shinken: session" in err:
        fail("control: the session line was said without a terminal or --verbose: %r" % err)
    rc, out, err = run(["--verbose"], 'echo "inside: ${SHINKEN_SESSION-unset}"')
    if "inside: unset\n" not in out or "shinken: session" in err:
        fail("control: a run without a session has one: %r %r" % (out, err))


def case_mem_kill():
    probe = os.environ.get("SHK_PROBE") or sys.argv[3]
    line = "shinken: killed by the memory limit (64M)"
    rc, out, err = run(["--mem", "64M"], "exec %s memhog 512 %s/mem" % (probe, WS))
    if "limit" in err and "cgroup" in err and rc == 125:
        skip("no memory limit on this host: %s" % err.strip())
    if rc != 137:
        fail("the hog was not killed (status %d)" % rc)
    if line not in err.splitlines():
        fail("the kill does not say which limit: %r" % err)
    # Control: under the limit, no such line.
    rc, out, err = run(["--mem", "64M"], "exec %s memhog 16 %s/mem" % (probe, WS))
    if "touched 16 MiB" not in out or "killed by" in err:
        fail("control: a run under the limit (status %d) said: %r" % (rc, err))


def case_proxy_env():
    # The caller's own JAVA_TOOL_OPTIONS and git configuration survive
    # --net proxy: the proxy's settings are added after them.
    mine = {"JAVA_TOOL_OPTIONS": "-Xmx64m", "GIT_CONFIG_COUNT": "1", "GIT_CONFIG_KEY_0": "user.name",
            "GIT_CONFIG_VALUE_0": "Caller Name"}
    script = ('echo "java=$JAVA_TOOL_OPTIONS"; echo "count=$GIT_CONFIG_COUNT"; '
              'echo "name=$(git config --get user.name)"; echo "proxy=$(git config --get http.proxy)"')
    java = "-Dhttp.proxyHost=127.0.0.1 -Dhttp.proxyPort=3128"
    rc, out, err = run(["--net", "proxy"], script, mine)
    if rc != 0 or ("java=-Xmx64m " not in out) or java not in out:
        fail("the caller's JAVA_TOOL_OPTIONS was not kept with the proxy's after it: %r" % out)
    if "count=2\n" not in out or "name=Caller Name\n" not in out or "proxy=http://127.0.0.1:3128\n" not in out:
        fail("the caller's git configuration was not kept beside the proxy's: %r" % out)
    # Control: without --net proxy the caller's values arrive as they are
    # (so the additions above are the proxy's), and without values of the
    # caller's the proxy's stand alone.
    rc, out, err = run([], script, mine)
    if "java=-Xmx64m\n" not in out or "count=1\n" not in out or "proxy=\n" not in out:
        fail("control: without --net proxy the caller's values changed: %r" % out)
    rc, out, err = run(["--net", "proxy"], script)
    if ("java=%s" % java) not in out or "count=1\n" not in out or "proxy=http://127.0.0.1:3128\n" not in out:
        fail("control: the proxy's settings alone are not as before: %r" % out)


{"summary": case_summary, "verbose": case_verbose, "session": case_session,
 "mem-kill": case_mem_kill, "proxy-env": case_proxy_env}[CASE]()
print("ok: " + CASE)

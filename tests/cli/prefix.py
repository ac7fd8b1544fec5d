#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""prefix.py: sessions and handles are accepted by any unique prefix, as git
accepts commit ids. A real session (shinken run --net proxy, its manager
embedded) is granted to, listed and revoked by prefixes of its ids; a
prefix two handles share is refused as ambiguous, naming both; an id
nothing begins with is the manager's "unknown" (the control: nothing is
guessed)."""
import atexit
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time

SHINKEN = os.environ["SHINKEN"]


def fail(why):
    print("FAIL: " + why, file=sys.stderr)
    sys.exit(1)


TMP = tempfile.mkdtemp(prefix="shk-prefix.", dir="/var/tmp")
atexit.register(shutil.rmtree, TMP, True)
WS, XDG = TMP + "/ws", TMP + "/xdg"
os.mkdir(WS)
os.mkdir(XDG, 0o700)
env = {"PATH": "/usr/bin:/bin", "HOME": TMP, "XDG_RUNTIME_DIR": XDG,
       "SHINKEN_SOCKET": TMP + "/no-daemon.sock",
       "SHINKEN_POLICY_DIR": os.environ.get("SHINKEN_POLICY_DIR", "")}
for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
    if k in os.environ:
        env[k] = os.environ[k]
degraded = ["--allow-degraded"] if os.getuid() == 0 else []
run = subprocess.Popen([SHINKEN, "run"] + degraded + ["--net", "proxy", "--verbose", "--", "sleep", "60"],
                       cwd=WS, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE)
atexit.register(run.kill)
line = b""
end = time.monotonic() + 30
while b"grant egress with" not in line:
    if time.monotonic() > end or run.poll() is not None:
        fail("no session line: %r" % line)
    line = run.stderr.readline()
m = re.search(rb"session (\S+); grant egress with: SHINKEN_SOCKET=(\S+) ", line)
sid, sock = m.group(1).decode(), m.group(2).decode()
cenv = dict(env, SHINKEN_SOCKET=sock)


def cli(*args):
    p = subprocess.run([SHINKEN] + list(args), env=cenv, capture_output=True, text=True, timeout=30)
    print("--- shinken %s -> %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr), file=sys.stderr)
    return p.returncode, p.stdout, p.stderr


def grant(session, domain):
    rc, out, err = cli("grant", session, "net.egress", "--scope", '{"domains":["%s"]}' % domain, "--approve")
    m = re.search(r"^granted (\S+)", out, re.M)
    if rc != 0 or not m:
        fail("grant to %s was not granted (%d): %s" % (session, rc, err))
    return m.group(1)


# Seventeen handles: two of them begin with the same hexadecimal digit.
handles = [grant(sid[: len(sid) - 4] if i % 2 else sid, "d%d.example.test" % i) for i in range(17)]
rc, out, err = cli("grants", sid[:-3])
if rc != 0 or any(h not in out for h in handles):
    fail("grants by a prefix of the session did not list every handle")
h1, h2 = next((a, b) for i, a in enumerate(handles) for b in handles[i + 1:] if a[0] == b[0])
common = os.path.commonprefix([h1, h2])
rc, out, err = cli("revoke", common)
if rc != 1 or "ambiguous" not in err:
    fail("the shared prefix %r was not refused as ambiguous: %d %s" % (common, rc, err))
rc, out, err = cli("revoke", h1[: len(common) + 1])
if rc != 0 or ("revoked %s" % h1) not in out:
    fail("revoke by a unique prefix of %s: %d %s" % (h1, rc, out + err))
# Control: nothing begins with it, so nothing is guessed.
rc, out, err = cli("grant", "zz-no-such-session", "net.egress", "--scope", '{"domains":["c.example.test"]}')
if rc != 1:
    fail("control: a grant to a session nothing begins with exited %d" % rc)
print("ok: prefixes")

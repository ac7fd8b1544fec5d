#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""examples.py PROFILE: each example profile (examples/profiles/) does what
its README says, judged from outside the sandbox.

The egress profiles: every domain a profile allows is pinned to a listener
on the host's loopback (--resolve and --allow-cidr, layered on top of the
profile), and the workload asks the session's proxy for a CONNECT to it:
the listener must see the connection. A domain the profile does not allow,
pinned the same way, must not reach it, and is in the summary of refusals.
The control run has the same pins without the profile: nothing reaches the
listener. The Debian build profile: the workload writes its .deb into the
parent of the source tree, and gets a minimal environment; the control
without the profile can do neither.
"""
import atexit
import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import threading

SHINKEN = os.environ["SHINKEN"]
NAME = sys.argv[1]
PROFILE = os.path.join(os.environ["SHINKEN_SRCDIR"], "examples", "profiles", NAME + ".json")


def fail(why):
    print("FAIL: " + why, file=sys.stderr)
    sys.exit(1)


base = "/var/lib/shinken-tests"
try:
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o755)
except OSError:
    base = "/var/tmp"
TMP = tempfile.mkdtemp(prefix="shk-examples.", dir=base)
atexit.register(shutil.rmtree, TMP, True)
WS = os.path.join(TMP, "src", "pkg")
os.makedirs(WS)


def run(options, script):
    degraded = ["--allow-degraded"] if os.getuid() == 0 else []
    env = {"PATH": "/usr/bin:/bin", "HOME": TMP, "SHINKEN_SOCKET": TMP + "/no-daemon.sock",
           "SHINKEN_POLICY_DIR": os.environ.get("SHINKEN_POLICY_DIR", ""),
           "EXAMPLE_SETTING": "caller-only"}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if k in os.environ:
            env[k] = os.environ[k]
    argv = [SHINKEN, "run"] + degraded + options + ["--", "/bin/bash", "-c", script]
    p = subprocess.run(argv, cwd=WS, env=env, stdin=subprocess.DEVNULL, capture_output=True, timeout=60)
    out, err = p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace")
    print("--- %s -> %d\n%s%s" % (" ".join(options), p.returncode, out, err), file=sys.stderr)
    return p.returncode, out, err


class Listener:
    def __init__(self):
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        threading.Thread(target=self.serve, daemon=True).start()

    def serve(self):
        while True:
            c, _ = self.sock.accept()
            self.accepted += 1
            c.close()


def connect_script(host, port):
    return ("exec 3<>/dev/tcp/127.0.0.1/3128 || exit 9; "
            "printf 'CONNECT %s:%d HTTP/1.1\\r\\nHost: %s:%d\\r\\n\\r\\n' >&3; "
            "IFS= read -r -t 10 line <&3; echo \"answer: $line\"" % (host, port, host, port))


def reaches(profile_opts, host):
    """Whether a CONNECT to HOST, pinned to a fresh listener, reaches it."""
    lst = Listener()
    pins = ["--resolve", "%s:127.0.0.1" % host, "--allow-cidr", "127.0.0.0/8"]
    rc, out, err = run(profile_opts + ["--net", "proxy"] + pins, connect_script(host, lst.port))
    ok = "answer: HTTP/1.1 200" in out
    if ok != (lst.accepted > 0):
        fail("the proxy's answer (%r) and the listener (%d connections) disagree" % (out, lst.accepted))
    return ok, err


with open(PROFILE) as f:
    prof = json.load(f)

# Every profile loads and runs a command.
rc, out, err = run(["--profile", PROFILE], "echo loaded")
if rc != 0 or "loaded" not in out:
    fail("%s does not run a command (status %d)" % (PROFILE, rc))

if prof.get("net") == "proxy":
    for d in prof["allow-domain"]:
        ok, err = reaches(["--profile", PROFILE], d)
        if not ok:
            fail("%s: %s is allowed but was not reached" % (NAME, d))
        ok, err = reaches([], d)
        if ok:
            fail("control: %s was reached without the profile" % d)
    for d in ["evil.example.test"] + [p.replace("**.", "www.") for p in prof.get("deny-domain", [])]:
        ok, err = reaches(["--profile", PROFILE], d)
        if ok:
            fail("%s: %s is not allowed but was reached" % (NAME, d))
        if "shinken: refused 1 connection to %s:" % d not in err:
            fail("%s: the refusal of %s is not in the summary: %r" % (NAME, d, err))
elif NAME == "debian-build":
    script = 'echo deb > ../pkg_1.0_all.deb; echo "setting: ${EXAMPLE_SETTING-unset}"'
    rc, out, err = run(["--profile", PROFILE], script)
    if not os.path.exists(os.path.join(TMP, "src", "pkg_1.0_all.deb")):
        fail("the build could not write its .deb beside the source tree")
    if "setting: unset" not in out:
        fail("the build's environment is not minimal: %r" % out)
    os.unlink(os.path.join(TMP, "src", "pkg_1.0_all.deb"))
    rc, out, err = run([], script)
    if os.path.exists(os.path.join(TMP, "src", "pkg_1.0_all.deb")):
        fail("control: the parent was writable without the profile")
    if "setting: caller-only" not in out:
        fail("control: the caller's environment did not reach the command without the profile")
else:
    fail("no test for the example profile %s" % NAME)
print("ok: " + NAME)

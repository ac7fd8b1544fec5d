# SPDX-License-Identifier: Apache-2.0
"""runsession.py: what the CLI tests against a real session share: a
`shinken run --net proxy` (its manager embedded) in a private temporary
directory, its session id and control socket read from the session line
it prints, and `cli()`, which runs a shinken command against that socket
and logs what it said."""
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


class Session:
    """A `shinken run --net proxy -- sleep 60` held for the test; its
    temporary directory (named PREFIX...) goes at exit."""

    def __init__(self, prefix):
        tmp = tempfile.mkdtemp(prefix=prefix, dir="/var/tmp")
        atexit.register(shutil.rmtree, tmp, True)
        ws, xdg = tmp + "/ws", tmp + "/xdg"
        os.mkdir(ws)
        os.mkdir(xdg, 0o700)
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "XDG_RUNTIME_DIR": xdg,
               "SHINKEN_SOCKET": tmp + "/no-daemon.sock",
               "SHINKEN_POLICY_DIR": os.environ.get("SHINKEN_POLICY_DIR", "")}
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if k in os.environ:
                env[k] = os.environ[k]
        degraded = ["--allow-degraded"] if os.getuid() == 0 else []
        run = subprocess.Popen([SHINKEN, "run"] + degraded + ["--net", "proxy", "--verbose", "--", "sleep", "60"],
                               cwd=ws, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                               stderr=subprocess.PIPE)
        atexit.register(run.kill)
        line = b""
        end = time.monotonic() + 30
        while b"grant egress with" not in line:
            if time.monotonic() > end or run.poll() is not None:
                fail("no session line: %r" % line)
            line = run.stderr.readline()
        m = re.search(rb"session (\S+); grant egress with: SHINKEN_SOCKET=(\S+) ", line)
        self.sid, self.sock = m.group(1).decode(), m.group(2).decode()
        self.env = dict(env, SHINKEN_SOCKET=self.sock)

    def cli(self, *args):
        p = subprocess.run([SHINKEN] + list(args), env=self.env, capture_output=True, text=True, timeout=30)
        print("--- shinken %s -> %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr), file=sys.stderr)
        return p.returncode, p.stdout, p.stderr

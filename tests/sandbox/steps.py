"""A sandbox that runs the test's steps, shared by the tests that act on a
running sandbox from outside (unlock.py, sudo.py).

`shinken run --net proxy` runs a loop that waits for go.N in the working
directory, runs it, and leaves its output in out.N and its status in rc.N
(renamed into place, so that a reader never sees half of it). The test
drops a step in, acts from outside (grants, revokes, approvals) and reads
what the step saw."""
import atexit
import json
import os
import pwd
import re
import subprocess
import sys
import time

from lib import fail

SHINKEN = os.environ["SHINKEN"]

LOOP = r'''
i=1
while [ $i -le 40 ]; do
  while [ ! -e go.$i ]; do sleep 0.01; done
  sh go.$i > out.$i 2>&1; echo $? > rc.tmp.$i; mv rc.tmp.$i rc.$i
  i=$((i+1))
done
'''


def start_daemon(tmp, policy_dir, **config):
    """A daemon of the test's own (in TMP/daemon), with CONFIG's keys
    besides; its socket."""
    ddir = tmp + "/daemon"
    os.mkdir(ddir, 0o700)
    conf = {"socket": ddir + "/manager.sock", "audit_db": ddir + "/audit.db", "policy_dir": policy_dir,
            "state_dir": ddir + "/state", **config}
    json.dump(conf, open(ddir + "/daemon.json", "w"))
    dmn = subprocess.Popen([SHINKEN, "daemon", "--config", ddir + "/daemon.json"], stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    atexit.register(dmn.kill)
    banner = dmn.stdout.readline()
    if not banner.startswith("listening "):
        fail("the daemon did not start: %r %r" % (banner, dmn.stderr.read()))
    return conf["socket"]


class Sandbox:
    """The running sandbox, its session id (sid) and the environment that
    reaches its manager (env, sock). TMP is the test's home, WS the
    sandbox's working directory and XDG the caller's runtime directory;
    STEP_LIMIT is how long a step may take, in seconds."""

    def __init__(self, tmp, ws, xdg, extra=(), user=None, daemon=None, policy_dir=None, hold=None,
                 step_limit=20):
        self.ws, self.step_limit = ws, step_limit
        env = {"PATH": "/usr/bin:/bin", "HOME": tmp, "XDG_RUNTIME_DIR": xdg,
               "SHINKEN_SOCKET": daemon or tmp + "/no-daemon.sock",
               "SHINKEN_POLICY_DIR": policy_dir or os.environ.get("SHINKEN_POLICY_DIR", "")}
        if hold:
            # Test builds: the launcher reports the sandbox's start only
            # once this file exists (the command waits until then).
            env["SHINKEN_HOLD_START"] = hold
        for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
            if k in os.environ:
                env[k] = os.environ[k]
        pre = []
        if user:
            pw = pwd.getpwnam(user)
            for d in (tmp, ws, xdg):
                os.chown(d, pw.pw_uid, pw.pw_gid)
            pre = ["setpriv", "--reuid", str(pw.pw_uid), "--regid", str(pw.pw_gid), "--clear-groups", "--"]
        degraded = [] if user else ["--allow-degraded"]
        self.n = 0
        # A sandbox before this one may have left its steps here.
        for f in os.listdir(ws):
            if re.match(r"(go|rc|out)\.", f):
                os.unlink(os.path.join(ws, f))
        self.run = subprocess.Popen(pre + [SHINKEN, "run"] + degraded + list(extra) +
                                    ["--net", "proxy", "--verbose", "--", "sh", "-c", LOOP],
                                    cwd=ws, env=env, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                                    stderr=subprocess.PIPE)
        atexit.register(self.run.kill)
        line = b""
        end = time.monotonic() + 30
        while b"grant egress with" not in line:
            if time.monotonic() > end or self.run.poll() is not None:
                fail("no session line: %r" % line)
            line = self.run.stderr.readline()
        m = re.search(rb"session (\S+); grant egress with: (?:SHINKEN_SOCKET=(\S+) )?", line)
        self.sid = m.group(1).decode()
        self.sock = m.group(2).decode() if m.group(2) else daemon
        self.env = dict(env, SHINKEN_SOCKET=self.sock)
        self.pre = pre
        # The session line comes before the sandbox has started: once a
        # step ran inside, the launcher has reported it to the manager.
        if not hold:
            self.inside("true")

    def start(self, script):
        """Starts SCRIPT in the sandbox; its step number."""
        self.n += 1
        with open("%s/go.tmp" % self.ws, "w") as f:
            f.write(script + "\n")
        os.chmod("%s/go.tmp" % self.ws, 0o644)
        os.rename("%s/go.tmp" % self.ws, "%s/go.%d" % (self.ws, self.n))
        return self.n

    def wait(self, n, script=""):
        """(status, output) of step N."""
        end = time.monotonic() + self.step_limit
        rc = "%s/rc.%d" % (self.ws, n)
        while not os.path.exists(rc):
            if time.monotonic() > end or self.run.poll() is not None:
                fail("the sandbox did not finish step %d (%s)" % (n, script))
            time.sleep(0.01)
        out = open("%s/out.%d" % (self.ws, n)).read()
        status = int(open(rc).read())
        print("inside: %s -> %d %r" % (script, status, out), file=sys.stderr)
        return status, out

    def inside(self, script):
        """Runs SCRIPT in the sandbox; returns (status, output)."""
        return self.wait(self.start(script), script)

    def cli(self, *args):
        p = subprocess.run(self.pre + [SHINKEN] + list(args), env=self.env, capture_output=True, text=True,
                           timeout=30)
        print("--- shinken %s -> %d\n%s%s" % (" ".join(args), p.returncode, p.stdout, p.stderr), file=sys.stderr)
        return p.returncode, p.stdout, p.stderr

#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""pty.py WHO: `shinken run -- bash` driven through a real pseudo-terminal,
as a person at a terminal would use it, as root (WHO=root) or as an
unprivileged user (WHO=user).

The test holds the master side of a fresh pty; the slave side is the
caller's terminal, the controlling terminal of `shinken run`. Everything is
judged from outside the sandbox, on that terminal: what bash prints, the
state of the outer `shinken run` process (/proc), and the terminal's
settings after the session is gone.

Each claim has its control: the same keys sent to a bash that is given the
caller's terminal directly (what a workload got before it had a pty of its
own) show the effect the relay prevents: the terminal's settings changed
after exit.
"""
import atexit
import fcntl
import os
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import termios
import time

SHINKEN = os.environ["SHINKEN"]
WHO = sys.argv[1] if len(sys.argv) > 1 else "root"
TIMEOUT = 20


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lib import fail, skip  # noqa: E402  (tests/lib.py: how a test skips and fails)


class Terminal:
    """A pty whose slave is the controlling terminal of one command."""

    def __init__(self, argv, env, cwd, rows=24, cols=80):
        self.master, self.slave = os.openpty()
        self.set_size(rows, cols)
        self.seen = b""
        slave = self.slave

        def child():
            os.setsid()
            fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

        self.proc = subprocess.Popen(argv, stdin=slave, stdout=slave, stderr=slave,
                                     env=env, cwd=cwd, preexec_fn=child, close_fds=True)

    def set_size(self, rows, cols):
        # The kernel sends SIGWINCH to the terminal's foreground process
        # group, as a terminal emulator's resize does.
        fcntl.ioctl(self.master, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))

    def send(self, data):
        os.write(self.master, data)

    def expect(self, needle, what, timeout=TIMEOUT):
        """Reads until NEEDLE appears after the last match; returns what came before it."""
        end = time.monotonic() + timeout
        while needle not in self.seen:
            left = end - time.monotonic()
            if left <= 0:
                fail("%s: %r never appeared; the terminal showed:\n%s"
                     % (what, needle, self.seen.decode(errors="replace")))
            r, _, _ = select.select([self.master], [], [], left)
            if r:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    fail("%s: the terminal closed before %r; it showed:\n%s"
                         % (what, needle, self.seen.decode(errors="replace")))
                self.seen += chunk
        before, _, self.seen = self.seen.partition(needle)
        return before

    def drain(self, seconds):
        end = time.monotonic() + seconds
        while True:
            left = end - time.monotonic()
            if left <= 0:
                return
            r, _, _ = select.select([self.master], [], [], left)
            if r:
                try:
                    chunk = os.read(self.master, 4096)
                except OSError:
                    return
                if not chunk:
                    return
                self.seen += chunk

    def wait(self, what):
        end = time.monotonic() + TIMEOUT
        while self.proc.poll() is None:
            if time.monotonic() > end:
                self.proc.kill()
                fail("%s: the command did not end; the terminal showed:\n%s"
                     % (what, self.seen.decode(errors="replace")))
            self.drain(0.1)
        return self.proc.returncode

    def close(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()
        os.close(self.master)
        os.close(self.slave)


def proc_state(pid):
    with open("/proc/%d/stat" % pid) as f:
        return f.read().rsplit(")", 1)[1].split()[0]


def settings(fd):
    # iflag, oflag, cflag, lflag and the control characters; the speeds
    # are left out (a pty has none that matter).
    a = termios.tcgetattr(fd)
    return (a[0], a[1], a[2], a[3], a[6])


# A command that changes the terminal's settings the way a crashed curses
# program or a `read -s` that never finished leaves them: echo and canonical
# mode off.
SPOIL = b"stty -echo -icanon; echo spoiled-$((6*7))\n"


def command(extra):
    argv = [SHINKEN, "run"] + extra + ["--", "/bin/bash", "--norc", "--noprofile", "-i"]
    if WHO == "user":
        argv = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"] + argv
    return argv


def main():
    if WHO == "user" and os.getuid() != 0:
        skip("needs root to become another user")
    if not os.path.exists("/bin/bash"):
        skip("no /bin/bash")
    extra = ["--allow-degraded"] if WHO == "root" and os.getuid() == 0 else []
    # Like scratch.sh: a place the sandbox shows as it is on the host.
    base = "/var/lib/shinken-tests"
    try:
        os.makedirs(base, exist_ok=True)
        os.chmod(base, 0o755)
    except OSError:
        base = "/var/tmp"
    tmp = tempfile.mkdtemp(prefix="shk-pty.", dir=base)
    os.chmod(tmp, 0o755)
    atexit.register(shutil.rmtree, tmp, True)
    global SHINKEN
    policies = os.environ.get("SHINKEN_POLICY_DIR", "")
    if WHO == "user" and subprocess.call(
            ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
             "test", "-x", SHINKEN, "-a", "-r", policies + "/schema.cedarschema"]) != 0:
        # The build tree is out of that user's reach (a clone under /root).
        shutil.copy(SHINKEN, tmp + "/shinken")
        shutil.copytree(policies, tmp + "/policies")
        subprocess.check_call(["chmod", "-R", "a+rX", tmp])
        SHINKEN, policies = tmp + "/shinken", tmp + "/policies"
    # The workload's writable root, the user's own.
    ws = tmp + "/ws"
    os.mkdir(ws)
    if WHO == "user":
        os.chown(ws, 65534, 65534)
    env = {"PATH": "/usr/bin:/bin", "TERM": "xterm", "HOME": tmp,
           "SHINKEN_POLICY_DIR": policies,
           # A prompt that a command's output cannot be taken for.
           "PS1": "PROMPT$((40+2))> "}
    for k in ("LANG", "LC_ALL", "ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if k in os.environ:
            env[k] = os.environ[k]
    prompt = b"PROMPT42> "

    # The control: bash on the caller's terminal itself. What it does to the
    # terminal's settings outlives it.
    t = Terminal(["/bin/bash", "--norc", "--noprofile", "-i"], env, ws)
    before = settings(t.slave)
    t.expect(prompt, "control: the first prompt")
    t.send(SPOIL)
    t.expect(b"spoiled-42", "control: stty ran")
    t.send(b"exit\n")
    t.wait("control: exit")
    if settings(t.slave) == before:
        fail("control: bash's stty did not change the caller's terminal; the test shows nothing")
    t.close()

    t = Terminal(command(extra), env, ws, rows=24, cols=80)
    pid = t.proc.pid
    before = settings(t.slave)
    start = t.expect(prompt, "the first prompt")
    if b"no job control" in start:
        fail("bash has no job control inside: %r" % start)

    # The sandbox's terminal has the caller's size from the start.
    t.send(b"stty size\n")
    out = t.expect(prompt, "stty size")
    if b"24 80" not in out:
        fail("the workload's terminal is not the caller's size (24 80): %r" % out)

    # Job control: a background job is listed as bash's own.
    t.send(b"sleep 300 &\n")
    t.expect(prompt, "a background job")
    t.send(b"jobs; echo jobs-$((1+1))\n")
    out = t.expect(b"jobs-2", "jobs")
    if b"Running" not in out or b"sleep 300" not in out:
        fail("the background job is not listed: %r" % out)
    t.expect(prompt, "after jobs")
    t.send(b"kill %1\n")
    t.expect(prompt, "kill %1")

    # Ctrl-C interrupts the foreground job, not the session.
    t.send(b"sleep 300; echo not-$((9*9))\n")
    t.drain(1.0)
    t.send(b"\x03")
    t.send(b"echo after-int-$((2+3))\n")
    out = t.expect(b"after-int-5", "Ctrl-C")
    if b"not-81" in out:
        fail("Ctrl-C did not interrupt the foreground job: %r" % out)
    if t.proc.poll() is not None:
        fail("Ctrl-C ended the session (status %s)" % t.proc.returncode)
    t.expect(prompt, "after Ctrl-C")

    # Ctrl-Z suspends the job inside; the outer `shinken run` keeps running.
    t.send(b"sleep 300\n")
    t.drain(1.0)
    t.send(b"\x1a")
    out = t.expect(prompt, "Ctrl-Z")
    if b"Stopped" not in out:
        fail("Ctrl-Z did not stop the job inside: %r" % out)
    state = proc_state(pid)
    if state == "T":
        fail("Ctrl-Z stopped the outer shinken run")
    t.send(b"jobs; echo jobs-$((1+2))\n")
    out = t.expect(b"jobs-3", "jobs after Ctrl-Z")
    if b"Stopped" not in out:
        fail("the suspended job is not listed as stopped: %r" % out)
    t.expect(prompt, "after jobs")
    t.send(b"kill -9 %1\n")
    t.expect(prompt, "kill %1")

    # A resize of the caller's terminal reaches the workload: its
    # terminal's size changes and bash is told (SIGWINCH).
    t.send(b"trap 'echo winch-$((3+4))' WINCH\n")
    t.expect(prompt, "trap")
    t.set_size(50, 132)
    t.expect(b"winch-7", "SIGWINCH inside after a resize")
    t.send(b"stty size\n")
    out = t.expect(prompt, "stty size after the resize")
    if b"50 132" not in out:
        fail("the resize did not reach the workload's terminal: %r" % out)

    # What the workload does to its terminal stays there.
    t.send(SPOIL)
    t.expect(b"spoiled-42", "stty inside")
    t.send(b"exit 3\n")
    rc = t.wait("exit")
    if rc != 3:
        fail("shinken run exited %s, not the shell's 3; it showed:\n%s"
             % (rc, t.seen.decode(errors="replace")))
    after = settings(t.slave)
    if after != before:
        fail("the caller's terminal settings changed: %r before, %r after" % (before, after))
    t.close()
    print("ok: job control, Ctrl-C, Ctrl-Z, resize and the caller's terminal settings")


if __name__ == "__main__":
    signal.signal(signal.SIGALRM, lambda *_: fail("timed out"))
    signal.alarm(80)
    main()

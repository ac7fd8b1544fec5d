#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""sudo.py CASE: privileged commands inside a running sandbox (the sudo
shim and install.privileged), judged from outside the sandbox.

A `shinken run --net proxy` whose session is a daemon's (the test's own,
root, with the shipped policy: install.privileged {scope: pkg} is Ask) runs
a shell loop that executes the steps this test drops into its working
directory (go.N -> rc.N, out.N). The human's answers come from outside,
through the daemon's control socket (shinken approvals / approve / deny),
as a person's would.

Cases:
  install  `sudo apt-get update` and `sudo apt-get install -y shk-hello`
           from a file: repository the test builds (dpkg-deb,
           dpkg-scanpackages) raise a card naming the exact command; once
           approved for the session the package's program runs inside the
           sandbox, while the host's dpkg database and /usr/bin do not
           change. Controls: before the approval the program is not there
           inside; the workload itself still cannot write /usr (its view
           of the overlay is read-only).
  deny     the card denied with a reason: the shim exits nonzero printing
           the reason, and neither apt's index of the repository nor the
           package is inside (the control is install's, where the same
           command approved makes both).
  scope    `sudo id`, not a package manager's command, is refused at once
           under the shipped scope pkg, with no card; the control, `sudo
           dpkg --print-architecture` in the same sandbox, raises a card and
           prints the host's architecture once approved.
  caps     with a manifest whose install.privileged entry is scope any,
           `sudo sleep` approved: the host reads the command's /proc
           status while it runs: uid 0 of a user namespace that is neither
           the host's nor the sandbox's, effective, permitted and bounding
           sets exactly the six capabilities, no_new_privs set, and the
           sandbox's network namespace (the control: the workload's, which
           the host reads the same way, shares it; the host's does not).
  restricted  a sandbox with --restrict-reads (whose Landlock rules name
           the system directories' own files, which an overlay would hide):
           sudo is refused with that reason and raises no card; the
           workload still reads /etc afterwards (control: the same read
           before).
  inline   the embedded manager of a `shinken run` on a terminal: the
           inline prompt shows the card with the exact command line, and
           nothing of the command's output before the answer (the
           control); [o] runs it and the shim prints its output and status.
  user     an unprivileged caller (its manager embedded): the manager
           refuses the privileged command with the reason (the sandbox does
           not map the host's root) and raises no card; the control shows
           the request reached the manager (its refusal, not the shim's
           "no manager").
"""
import atexit
import hashlib
import json
import os
import pwd
import shutil
import subprocess
import sys
import tempfile
import time

SHINKEN = os.environ["SHINKEN"]
CASE = sys.argv[1]

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lib import fail, skip  # noqa: E402
import steps  # noqa: E402  (tests/sandbox/steps.py: a sandbox that runs the test's steps)

if os.getuid() != 0:
    skip("needs root (the test user, and a repository outside /tmp)")
for tool in ("dpkg-deb", "dpkg-scanpackages", "apt-get"):
    if not shutil.which(tool):
        skip("%s is missing (scripts/install-deps.sh installs dpkg-dev)" % tool)

# Outside /tmp and /var/tmp, which are the sandbox's own: /srv.
os.makedirs("/srv", exist_ok=True)
TMP = tempfile.mkdtemp(prefix="shk-sudo.", dir="/srv")
os.chmod(TMP, 0o755)
atexit.register(shutil.rmtree, TMP, True)
WS, XDG = TMP + "/ws", TMP + "/xdg"
os.mkdir(WS)
os.mkdir(XDG, 0o700)

def digest(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def build_repo():
    """A file: repository holding one tiny package, shk-hello; the apt
    options that use it alone."""
    pkg = TMP + "/pkg"
    os.makedirs(pkg + "/DEBIAN")
    os.makedirs(pkg + "/usr/bin")
    with open(pkg + "/DEBIAN/control", "w") as f:
        f.write("Package: shk-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: test <t@example.invalid>\n"
                "Description: the sudo test's package\n")
    with open(pkg + "/usr/bin/shk-hello", "w") as f:
        f.write("#!/bin/sh\necho hello from shk-hello\n")
    os.chmod(pkg + "/usr/bin/shk-hello", 0o755)
    repo = TMP + "/repo"
    os.mkdir(repo)
    subprocess.run(["dpkg-deb", "--build", pkg, repo + "/shk-hello_1.0_all.deb"], check=True,
                   capture_output=True)
    idx = subprocess.run(["dpkg-scanpackages", ".", "/dev/null"], cwd=repo, check=True, capture_output=True)
    with open(repo + "/Packages", "wb") as f:
        f.write(idx.stdout)
    for dirpath, dirs, files in os.walk(TMP + "/repo"):
        os.chmod(dirpath, 0o755)
        for n in files:
            os.chmod(os.path.join(dirpath, n), 0o644)
    with open(TMP + "/sources.list", "w") as f:
        f.write("deb [trusted=yes] file:%s ./\n" % repo)
    os.chmod(TMP + "/sources.list", 0o644)
    return "-q -o Dir::Etc::SourceList=%s/sources.list -o Dir::Etc::SourceParts=/nonexistent" % TMP


class Sandbox(steps.Sandbox):
    """A sandbox with a daemon of the test's own, unless it is USER's
    (whose privileged commands the embedded manager refuses); its steps may
    take two minutes (apt)."""

    def __init__(self, user=None, policy_dir=None, extra=()):
        daemon = None if user else steps.start_daemon(TMP, policy_dir or os.environ["SHINKEN_POLICY_DIR"])
        super().__init__(TMP, WS, XDG, extra=extra, user=user, daemon=daemon, step_limit=120)

    def cards(self):
        rc, out, _ = self.cli("approvals", self.sid, "--json")
        return [c for c in json.loads(out).get("cards", []) if c.get("class") == "install.privileged"] \
            if rc == 0 else []

    def card(self, n, limit=30):
        """The install.privileged card step N raised."""
        end = time.monotonic() + limit
        while True:
            cs = self.cards()
            if cs:
                return cs[0]
            if time.monotonic() > end or os.path.exists("%s/rc.%d" % (WS, n)):
                fail("no install.privileged card was raised for step %d" % n)
            time.sleep(0.1)


def host_state():
    return (digest("/var/lib/dpkg/status"), os.path.exists("/usr/bin/shk-hello"))


def card_names(card, words):
    text = json.dumps(card)
    for w in words:
        if w not in text:
            fail("the card does not name the command (%r missing): %s" % (w, text))


def case_install():
    opts = build_repo()
    before = host_state()
    if before[1]:
        fail("the host already has /usr/bin/shk-hello: the test cannot judge the install")
    sb = Sandbox()
    rc, _ = sb.inside("test -e /usr/bin/shk-hello")
    if rc == 0:
        fail("control: the package's program is inside before any install")
    n = sb.start("sudo apt-get %s update && sudo apt-get %s install -y shk-hello && shk-hello" % (opts, opts))
    card = sb.card(n)
    card_names(card, ["apt-get", "update"])
    rc, _, _ = sb.cli("approve", card["id"], "--session")
    if rc != 0:
        fail("the approval failed")
    rc, out = sb.wait(n, "sudo apt-get install")
    if rc != 0 or "hello from shk-hello" not in out:
        fail("after the approval the install did not work inside: %d %r" % (rc, out))
    rc, out = sb.inside("grep -A1 '^Package: shk-hello' /var/lib/dpkg/status")
    if rc != 0 or "install ok installed" not in out:
        fail("the sandbox's dpkg database does not list the package: %r" % out)
    if host_state() != before:
        fail("the install changed the host: its dpkg database or /usr/bin/shk-hello")
    rc, _ = sb.inside("touch /usr/bin/shk-workload")
    if rc == 0 or os.path.exists("/usr/bin/shk-workload"):
        fail("the workload itself could write /usr after the install")
    rc, out = sb.inside("sudo dpkg -s shk-hello")
    if rc != 0 or "Status: install ok installed" not in out or sb.cards():
        fail("the session's approval does not cover the next package command: %d %r" % (rc, out))
    # What the overlays kept is in the daemon's store while the session
    # lives (the control), and gone once it has ended.
    store = TMP + "/daemon/state/persist/sudo"
    if not os.path.isdir(store) or not os.listdir(store):
        fail("control: the overlays' store entries are not in %s" % store)
    sb.run.terminate()
    sb.run.wait(30)
    end = time.monotonic() + 20
    while os.listdir(store):
        if time.monotonic() > end:
            fail("the overlays' store entries outlived the session: %s" % os.listdir(store))
        time.sleep(0.1)


def case_deny():
    opts = build_repo()
    before = host_state()
    sb = Sandbox()
    n = sb.start("sudo apt-get %s update" % opts)
    card = sb.card(n)
    card_names(card, ["apt-get", "update"])
    rc, _, _ = sb.cli("deny", card["id"], "--reason", "not-in-this-session")
    if rc != 0:
        fail("the denial failed")
    rc, out = sb.wait(n, "sudo apt-get update")
    if rc == 0 or "not-in-this-session" not in out:
        fail("the denied command did not fail with the reason: %d %r" % (rc, out))
    rc, _ = sb.inside("test -e /var/lib/apt/lists/%s_repo_._Packages" % TMP.replace("/", "_")
                      + " || test -e /usr/bin/shk-hello")
    if rc == 0:
        fail("the denied command ran anyway")
    if host_state() != before:
        fail("the host changed")


def case_scope():
    sb = Sandbox()
    rc, out = sb.inside("sudo id -u")
    if rc == 0 or "Shinken refused" not in out or '"any"' not in out:
        fail("sudo of a non-package command was not refused with the scope's reason: %d %r" % (rc, out))
    if sb.cards():
        fail("a card was raised for a command the scope refuses")
    n = sb.start("sudo dpkg --print-architecture")
    card = sb.card(n)
    card_names(card, ["dpkg", "--print-architecture"])
    sb.cli("approve", card["id"], "--once")
    rc, out = sb.wait(n, "sudo dpkg --print-architecture")
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout
    if rc != 0 or out != arch:
        fail("control: the package command was not run after the approval: %d %r" % (rc, out))


def status_of(pid):
    fields = {}
    for line in open("/proc/%d/status" % pid):
        k, _, v = line.partition(":")
        fields[k] = v.strip()
    return fields


def find_proc(prog, word):
    """The pid of the process running PROG with the argument WORD (not the
    shim, whose command line has it too)."""
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                argv = open("/proc/%s/cmdline" % d, "rb").read().split(b"\0")
            except OSError:
                continue
            if argv and os.path.basename(argv[0]) == prog.encode() and word.encode() in argv:
                return int(d)
    return None


def case_caps():
    pol = TMP + "/policies"
    shutil.copytree(os.environ["SHINKEN_POLICY_DIR"], pol)
    mf = pol + "/manifests/default.json"
    text = open(mf).read()
    wide = text.replace('{ "class": "install.privileged", "tier": "Ask", "scope": { "scope": "pkg" } }',
                        '{ "class": "install.privileged", "tier": "Ask", "scope": { "scope": "any" } }')
    if wide == text:
        fail("the shipped manifest has no install.privileged entry this test knows how to widen")
    open(mf, "w").write(wide)
    sb = Sandbox(policy_dir=pol)
    word = "7.%d" % os.getpid()
    n = sb.start("sleep 9.%d & sudo sleep %s; echo done" % (os.getpid(), word))
    card = sb.card(n)
    card_names(card, ["sleep", word])
    sb.cli("approve", card["id"], "--once")
    end = time.monotonic() + 30
    pid = None
    while not pid:
        pid = find_proc("sleep", word)
        if time.monotonic() > end:
            fail("the approved command never ran")
        time.sleep(0.05)
    st = status_of(pid)
    print("command status: %r" % st, file=sys.stderr)
    want = sum(1 << c for c in (0, 1, 3, 4, 6, 7))  # CHOWN DAC_OVERRIDE FOWNER FSETID SETGID SETUID
    for k in ("CapEff", "CapPrm", "CapBnd"):
        if int(st[k], 16) != want:
            fail("the command's %s is %s, not exactly the six capabilities (%x)" % (k, st[k], want))
    if int(st["CapAmb"], 16) != 0 or st.get("NoNewPrivs") != "1":
        fail("the command has ambient capabilities or may gain privileges: %r" % st)
    ns = lambda p, k: os.stat("/proc/%s/ns/%s" % (p, k)).st_ino  # noqa: E731
    # The workload: its own sleep, started beside the shim.
    workload = find_proc("sleep", "9.%d" % os.getpid())
    if workload is None:
        fail("control: the workload's process was not found")
    if ns(pid, "user") in (ns("self", "user"), ns(workload, "user")):
        fail("the command is in the host's or the workload's user namespace")
    if ns(workload, "net") == ns("self", "net"):
        fail("control: the workload shares the host's network namespace")
    if ns(pid, "net") != ns(workload, "net"):
        fail("the command is not in the sandbox's network namespace")
    rc, out = sb.wait(n, "sudo sleep")
    if rc != 0 or "done" not in out:
        fail("the approved command did not end well: %d %r" % (rc, out))


def case_restricted():
    sb = Sandbox(extra=["--restrict-reads"])
    rc, before = sb.inside("cat /etc/hostname")
    if rc != 0:
        fail("control: the restricted sandbox cannot read /etc/hostname")
    rc, out = sb.inside("sudo dpkg --print-architecture")
    if rc == 0 or "Shinken refused" not in out or "--restrict-reads" not in out:
        fail("sudo in a sandbox with restricted reads was not refused with the reason: %d %r" % (rc, out))
    if sb.cards():
        fail("a card was raised for a command this sandbox cannot take")
    rc, after = sb.inside("cat /etc/hostname")
    if rc != 0 or after != before:
        fail("after the refusal the workload no longer reads /etc: %d %r" % (rc, after))


def case_inline():
    import fcntl
    import select
    import termios
    import struct
    master, slave = os.openpty()
    fcntl.ioctl(master, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 200, 0, 0))

    def child():
        os.setsid()
        fcntl.ioctl(slave, termios.TIOCSCTTY, 0)

    env = {"PATH": "/usr/bin:/bin", "HOME": TMP, "XDG_RUNTIME_DIR": XDG, "TERM": "dumb",
           "SHINKEN_SOCKET": TMP + "/no-daemon.sock", "SHINKEN_POLICY_DIR": os.environ.get("SHINKEN_POLICY_DIR", "")}
    for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
        if k in os.environ:
            env[k] = os.environ[k]
    word = "--print-architecture"
    proc = subprocess.Popen([SHINKEN, "run", "--allow-degraded", "--net", "proxy", "--", "sh", "-c",
                             "sudo dpkg %s; echo RC=$?" % word], stdin=slave, stdout=slave, stderr=slave,
                            env=env, cwd=WS, preexec_fn=child, close_fds=True)
    atexit.register(proc.kill)
    seen = b""

    def expect(needle, what):
        nonlocal seen
        end = time.monotonic() + 60
        while needle not in seen:
            if time.monotonic() > end:
                fail("%s: %r never appeared; the terminal showed:\n%s" % (what, needle, seen.decode(errors="replace")))
            r, _, _ = select.select([master], [], [], 0.2)
            if r:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    pass
        before, _, seen = seen.partition(needle)
        return before

    expect(b"the sandbox asks for sudo dpkg " + word.encode(), "the card naming the command")
    arch = subprocess.run(["dpkg", "--print-architecture"], capture_output=True, text=True).stdout.strip()
    shown = expect(b"[o] approve once", "the card's keys")
    if arch.encode() in shown or b"RC=" in shown:
        fail("control: the command's output came before the answer")
    time.sleep(0.6)  # the prompt takes no key in its first 400 ms (a stray keystroke answers nothing)
    os.write(master, b"o")
    expect(arch.encode(), "the command's output after [o]")
    expect(b"RC=0", "the shim's status")


def case_user():
    import fcntl
    with open("/var/lock/shinken-test-user.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            pwd.getpwnam("shinken-test")
        except KeyError:
            if subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                               "--shell", "/bin/sh", "shinken-test"]).returncode != 0:
                fail("cannot create the user shinken-test")
    sb = Sandbox(user="shinken-test")
    rc, out = sb.inside("sudo dpkg --print-architecture")
    if rc == 0 or "Shinken refused" not in out or "does not map the host's root" not in out:
        fail("an unprivileged caller's sudo was not refused with the reason: %d %r" % (rc, out))
    if sb.cards():
        fail("a card was raised for a command this manager cannot run")


globals()["case_" + CASE]()
print("1 passed, 0 failed")

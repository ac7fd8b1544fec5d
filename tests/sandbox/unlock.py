#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""unlock.py CASE: live fs.scope unlocks, judged from outside the sandbox.

A `shinken run --net proxy` (its manager embedded) runs a small shell loop
that executes, inside the sandbox, the commands this test drops into its
writable working directory, one at a time (go.N -> rc.N, out.N). So the
same running sandbox is asked to read or write a host path before a grant,
after it, and after the revoke, and the host looks at what happened: the
file the workload wrote is (or is not) on the host, the content it read is
(or is not) the host's secret.

Cases (each with its control step, which differs in the one thing the claim
is about):
  write    a write grant on a read-only host path: the host sees the
           sandbox's write; before the grant (control) and after the revoke
           the write fails and nothing lands on the host.
  ttl      a grant with a lifetime: its mount goes when the lifetime ends,
           with no revoke (control: writable before).
  open     what revoke does not take: a file the workload opened for
           writing while the grant was live stays writable through that
           descriptor (the host sees the later write), while a new open
           fails (the documented limit, shown to hold as documented).
  stop     the stronger revoke (--stop): the process that holds the file
           open is stopped, so its next write never reaches the host; the
           sandbox's other processes (the loop that runs these steps: the
           control) go on.
  read     a path masked with --deny: its file becomes readable after a read
           grant (control: before it, not), and is masked again on revoke.
  deny     a write grant with a deny path inside: the deny path stays masked
           while its sibling (control) is readable and writable.
  symlink  the sandbox replaces a directory in its writable root with a
           symlink to a read-only host directory and the grant names the
           link: the grant is refused and nothing lands in the link's
           target; the control grants the target itself, and the write
           lands (so the write would have landed had the mount followed).
  git      a write grant on a tree holding a git repository: the
           repository's metadata (hooks, config) stays read-only inside,
           while a file of its work tree (control) is writable.
  doctor   `shinken doctor --json` says per class how a grant reaches a
           running sandbox; each class it calls refused is refused, with
           that very reason, when a running session asks for it, and the one
           it calls available (fs.scope) is granted (the control); a gpu
           grant on a host doctor says has no gpu is refused, saying so.
  ceiling  a daemon-hosted session whose `shinken run` read a manifest
           without the path in its fs.scope write list, so its Landlock
           was applied without it: the daemon (whose manifest has it)
           refuses the write grant, saying Landlock would refuse every
           write, rather than answer "granted" for a mount with no effect;
           the control, the same with the daemon's own manifest, is
           granted and the write lands.
  user     the write case as an unprivileged user, whose manager clones the
           host path in a user namespace of its own.
  persist  a persistence grant (not surviving the session) on a read-only
           host directory: inside, the host's files show and the sandbox's
           writes and deletions succeed, while the host's directory does
           not change (judged on the host) and the writes are in the state
           directory's store; on revoke they are gone from the sandbox and
           from the store, as they are after the session's end. Control:
           before the grant the write fails.
  survive  a persistence grant with survives_session: what the sandbox
           wrote is in the store after its session ended, `shinken persist
           list|show` say so, and the image's next session sees it again
           once granted (control: before that grant it does not); `persist
           rm` is refused while it is mounted, and after the revoke it
           deletes the data, which the next grant then no longer shows.
  gpu      a daemon whose device root is a scratch directory of nodes the
           test made (mknod, with the DRM major for dri/card0 and the
           kmsg device's numbers for dri/renderD128, whose writes the host
           reads back in its kernel log): after a gpu grant the nodes are
           in the running sandbox's /dev and a write through the second
           reaches the host's log; before the grant (control) and after
           the revoke they are not there and the write reaches nothing.
           A gpu id the host lacks, and mode exclusive, are refused.
  peripheral  the same for a peripheral grant of the mic (a directory,
           snd/, mounted whole); input_inject is refused.
  before   grants made to a session whose sandbox has not started yet
           (its launcher holds the start: a test build's switch) are kept
           for the start and mounted before the command runs: the
           command's very first step writes through the write grant and
           the host sees it; a second grant, of a path the sandbox's view
           does not have (/tmp is its own), cannot be mounted at the start
           and is revoked, saying so, instead of staying "granted"; the
           control, a path with no grant, stays read-only.
  persist-user  the persist case as an unprivileged user, whose overlay is
           made in a user namespace of its own.
"""
import atexit
import json
import os
import pwd
import re
import shutil
import subprocess
import sys
import tempfile
import time

SHINKEN = os.environ["SHINKEN"]
CASE = sys.argv[1]
SECRET = "host-secret-%d\n" % os.getpid()


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lib import fail, skip  # noqa: E402  (tests/lib.py: how a test skips and fails)
import steps  # noqa: E402  (tests/sandbox/steps.py: a sandbox that runs the test's steps)


if os.getuid() != 0:
    skip("needs root (fixtures under /srv, and the test user)")

# The host paths granted live must lie inside the manifest's fs.scope write
# ceiling (/home, /root, /tmp, /work, /srv) and outside the sandbox's private
# directories (/tmp and /var/tmp are fresh inside): /srv.
os.makedirs("/srv", exist_ok=True)
HOSTDIR = tempfile.mkdtemp(prefix="shk-unlock.", dir="/srv")
os.chmod(HOSTDIR, 0o755)
atexit.register(shutil.rmtree, HOSTDIR, True)
# The working directory (the writable root) too: the symlink case grants a
# path in it, which the manifest must cover for the mechanism to be reached.
TMP = tempfile.mkdtemp(prefix="shk-unlock.", dir="/srv")
os.chmod(TMP, 0o755)
atexit.register(shutil.rmtree, TMP, True)
WS, XDG = TMP + "/ws", TMP + "/xdg"
os.mkdir(WS)
os.mkdir(XDG, 0o700)

def start_daemon(policy_dir, **config):
    return steps.start_daemon(TMP, policy_dir, **config)


class Sandbox(steps.Sandbox):
    def __init__(self, extra=(), user=None, daemon=None, policy_dir=None, hold=None):
        super().__init__(TMP, WS, XDG, extra=extra, user=user, daemon=daemon, policy_dir=policy_dir, hold=hold)

    def grant(self, scope):
        rc, out, err = self.cli("grant", self.sid, "fs.scope", "--scope", scope)
        m = re.search(r"granted ([0-9a-f]{64})", out)
        return rc, (m.group(1) if m else None), out + err


def fixture(name, content=SECRET, base=None):
    d = os.path.join(base or HOSTDIR, name)
    os.mkdir(d)
    os.chmod(d, 0o777)
    with open(d + "/f", "w") as f:
        f.write(content)
    os.chmod(d + "/f", 0o644)
    return d


def case_write():
    d = fixture("data")
    sb = Sandbox()
    # Control: the same write before the grant fails, and nothing lands.
    rc, _ = sb.inside("echo before > %s/before" % d)
    if rc == 0 or os.path.exists(d + "/before"):
        fail("the sandbox could write %s before any grant: the control is broken" % d)
    rc, h, out = sb.grant('{"write":["%s"]}' % d)
    if rc != 0 or not h:
        fail("the write grant was not given: %s" % out)
    rc, _ = sb.inside("echo granted > %s/granted" % d)
    if rc != 0 or open(d + "/granted").read() != "granted\n":
        fail("after the grant, the sandbox's write did not reach the host's %s" % d)
    rc, _, _ = sb.cli("revoke", h)
    if rc != 0:
        fail("the revoke failed")
    rc, _ = sb.inside("echo after > %s/after" % d)
    if rc == 0 or os.path.exists(d + "/after"):
        fail("after the revoke, the sandbox could still write %s" % d)
    rc, out = sb.inside("cat %s/f" % d)
    if rc != 0 or out != SECRET:
        fail("after the revoke, the read-only view of %s is not back: %r" % (d, out))


def case_ttl():
    d = fixture("ttl")
    sb = Sandbox()
    rc, _, _ = sb.cli("grant", sb.sid, "fs.scope", "--scope", '{"write":["%s"]}' % d, "--ttl", "2s")
    if rc != 0:
        fail("the grant with a lifetime was not given")
    rc, _ = sb.inside("echo in > %s/in" % d)
    if rc != 0 or not os.path.exists(d + "/in"):
        fail("control: the path is not writable while the grant lives")
    end = time.monotonic() + 15
    while True:
        rc, _ = sb.inside("echo late > %s/late" % d)
        if rc != 0:
            break
        os.unlink(d + "/late")
        if time.monotonic() > end:
            fail("the mount outlived the grant's lifetime by more than 13 s")
        time.sleep(0.5)
    if os.path.exists(d + "/late"):
        fail("a write after the expiry reached the host")


def case_open():
    d = fixture("open")
    sb = Sandbox()
    rc, h, out = sb.grant('{"write":["%s"]}' % d)
    if rc != 0 or not h:
        fail("the write grant was not given: %s" % out)
    # A process inside holds a descriptor open on the granted path, and
    # writes through it each time the test drops a token.
    rc, _ = sb.inside("(exec 3>>%s/held; while [ ! -e stop ]; do for t in tok.*; do [ -e \"$t\" ] || continue; "
                      "echo \"$t\" >&3; rm -f \"$t\"; done; sleep 0.01; done) > /dev/null 2>&1 &" % d)
    if rc != 0:
        fail("could not start the holder inside")
    open(WS + "/tok.1", "w").close()
    end = time.monotonic() + 10
    while "tok.1" not in (open(d + "/held").read() if os.path.exists(d + "/held") else ""):
        if time.monotonic() > end:
            fail("control: the holder's write did not reach the host while the grant lived")
        time.sleep(0.02)
    sb.cli("revoke", h)
    rc, _ = sb.inside("echo new > %s/new" % d)
    if rc == 0 or os.path.exists(d + "/new"):
        fail("after the revoke, a new open could write the path")
    open(WS + "/tok.2", "w").close()
    end = time.monotonic() + 10
    while "tok.2" not in open(d + "/held").read():
        if time.monotonic() > end:
            fail("the descriptor opened before the revoke no longer writes: the documentation says it stays "
                 "open, and it does not")
        time.sleep(0.02)
    open(WS + "/stop", "w").close()


def case_stop():
    d = fixture("stop")
    sb = Sandbox()
    rc, h, out = sb.grant('{"write":["%s"]}' % d)
    if rc != 0 or not h:
        fail("the write grant was not given: %s" % out)
    rc, _ = sb.inside("(exec 3>>%s/held; while :; do for t in tok.*; do [ -e \"$t\" ] || continue; "
                      "echo \"$t\" >&3; rm -f \"$t\"; done; sleep 0.01; done) > /dev/null 2>&1 &" % d)
    open(WS + "/tok.1", "w").close()
    end = time.monotonic() + 10
    while "tok.1" not in (open(d + "/held").read() if os.path.exists(d + "/held") else ""):
        if time.monotonic() > end:
            fail("control: the holder's write did not reach the host while the grant lived")
        time.sleep(0.02)
    rc, out, _ = sb.cli("revoke", h, "--stop", "--json")
    a = json.loads(out) if out.strip() else {}
    if rc != 0 or a.get("processes_stopped", 0) < 1:
        fail("revoke --stop stopped no process: %r" % out)
    open(WS + "/tok.2", "w").close()
    time.sleep(1)
    if "tok.2" in open(d + "/held").read():
        fail("the holder still writes through its descriptor after revoke --stop")
    if not os.path.exists(WS + "/tok.2"):
        fail("something still takes the tokens after revoke --stop")
    rc, _ = sb.inside("true")
    if rc != 0:
        fail("control: the sandbox's other processes did not survive revoke --stop")


def case_read():
    d = fixture("masked")
    sb = Sandbox(["--deny", d])
    rc, out = sb.inside("cat %s/f" % d)
    if rc == 0 or SECRET in out:
        fail("the --deny'd file was readable before any grant: the control is broken")
    rc, h, out = sb.grant('{"read":["%s"]}' % d)
    if rc != 0 or not h:
        fail("the read grant was not given: %s" % out)
    rc, out = sb.inside("cat %s/f" % d)
    if rc != 0 or out != SECRET:
        fail("after the read grant, the host's file is not readable inside: %r" % out)
    rc, _ = sb.inside("echo x > %s/w" % d)
    if rc == 0 or os.path.exists(d + "/w"):
        fail("a read grant let the sandbox write %s" % d)
    sb.cli("revoke", h)
    rc, out = sb.inside("cat %s/f" % d)
    if rc == 0 or SECRET in out:
        fail("after the revoke, the file is still readable: %r" % out)


def case_deny():
    d = fixture("tree")
    os.mkdir(d + "/secret")
    with open(d + "/secret/key", "w") as f:
        f.write(SECRET)
    os.chmod(d + "/secret", 0o777)
    sb = Sandbox()
    rc, h, out = sb.grant('{"write":["%s"],"deny":["%s/secret"]}' % (d, d))
    if rc != 0 or not h:
        fail("the grant was not given: %s" % out)
    # Control: the sibling is readable and writable through the grant.
    rc, out = sb.inside("cat %s/f && echo w > %s/sibling" % (d, d))
    if rc != 0 or out != SECRET or not os.path.exists(d + "/sibling"):
        fail("the granted tree is not readable and writable inside: the control is broken")
    rc, out = sb.inside("cat %s/secret/key" % d)
    if rc == 0 or SECRET in out:
        fail("the deny path inside the grant is readable: %r" % out)
    rc, _ = sb.inside("echo x > %s/secret/planted" % d)
    if rc == 0 or os.path.exists(d + "/secret/planted"):
        fail("the deny path inside the grant is writable")


def case_symlink():
    target = fixture("target")
    os.chmod(target, 0o755)
    sb = Sandbox()
    link = WS + "/sub"
    rc, _ = sb.inside("ln -s %s %s" % (target, link))
    if rc != 0 or not os.path.islink(link):
        fail("the sandbox could not plant its symlink")
    rc, h, out = sb.grant('{"write":["%s"]}' % link)
    if rc == 0 or h:
        fail("a grant naming a symlink the sandbox planted was given: %s" % out)
    if "symbolic link" not in out:
        fail("the refusal does not say why: %r" % out)
    rc, _ = sb.inside("echo x > %s/pwned" % link)
    if rc == 0 or os.path.exists(target + "/pwned"):
        fail("the write through the planted link landed in %s" % target)
    # Control: granting the target itself makes the same write land.
    rc, h, out = sb.grant('{"write":["%s"]}' % target)
    if rc != 0 or not h:
        fail("the control grant of the target was not given: %s" % out)
    rc, _ = sb.inside("echo x > %s/pwned" % link)
    if rc != 0 or not os.path.exists(target + "/pwned"):
        fail("control: with the target granted, the write did not land")


def case_git():
    d = fixture("proj")
    subprocess.run(["git", "init", "-q", d], check=True)
    sb = Sandbox()
    rc, h, out = sb.grant('{"write":["%s"]}' % d)
    if rc != 0 or not h:
        fail("the write grant was not given: %s" % out)
    rc, _ = sb.inside("echo work > %s/file" % d)
    if rc != 0 or not os.path.exists(d + "/file"):
        fail("control: the work tree of the granted repository is not writable")
    rc, _ = sb.inside("echo 'touch /tmp/pwned' > %s/.git/hooks/pre-commit" % d)
    if rc == 0 or os.path.exists(d + "/.git/hooks/pre-commit"):
        fail("a hook could be planted in the granted repository")
    before = open(d + "/.git/config").read()
    rc, _ = sb.inside("echo '[core] fsmonitor = /tmp/x' >> %s/.git/config" % d)
    if rc == 0 or open(d + "/.git/config").read() != before:
        fail("the granted repository's .git/config could be changed")
    # The mount points made for what was missing (commondir, ...) go with
    # the revoke: the repository is as git left it.
    sb.cli("revoke", h)
    if os.path.exists(d + "/.git/commondir"):
        fail("the revoke left the mount point .git/commondir in the repository")
    if subprocess.run(["git", "-C", d, "status", "--short"], capture_output=True).returncode != 0:
        fail("git no longer reads the repository after the revoke")


def case_doctor():
    p = subprocess.run([SHINKEN, "doctor", "--json"], capture_output=True, text=True, timeout=60)
    live = {c["class"]: c for c in json.loads(p.stdout)["live_unlocks"]}
    print(json.dumps(live, indent=1), file=sys.stderr)
    want = {"fs.scope", "persistence", "install.privileged", "gpu", "peripheral"}
    if set(live) != want:
        fail("doctor does not list each class of live unlock: %s" % sorted(live))
    # Every class has a mechanism here (root); one this version could not
    # apply would be listed with its scope below and judged refused.
    scopes = {}
    sb = Sandbox()
    for cls, scope in scopes.items():
        c = live[cls]
        if c["available"]:
            fail("doctor calls %s available, which this version has no mechanism for" % cls)
        if not c["refused"]:
            fail("doctor refuses %s without a reason" % cls)
        rc, out, err = sb.cli("grant", sb.sid, cls, "--scope", scope, "--json")
        a = json.loads(out) if out.strip() else {}
        if rc == 0 or a.get("ok") or a.get("handle"):
            fail("%s was granted although doctor says it is refused" % cls)
        # A Block tier refuses before the mechanism is asked; otherwise the
        # refusal is doctor's sentence.
        if a.get("decided_by") == "enforcement" and a.get("error") != c["refused"]:
            fail("%s: the grant's reason %r is not doctor's %r" % (cls, a.get("error"), c["refused"]))
    for cls in ("fs.scope", "persistence", "install.privileged", "gpu", "peripheral"):
        if not live[cls]["available"] or not live[cls]["mechanism"]:
            fail("doctor calls %s unavailable here: %s" % (cls, live[cls]["refused"]))
    # Where this host has no GPU, doctor says so, and a gpu grant is
    # refused with the reason before any human is asked.
    if live["gpu"].get("devices"):
        rc, out, err = sb.cli("grant", sb.sid, "gpu", "--scope", '{"device_ids":["0"]}', "--json")
        a = json.loads(out) if out.strip() else {}
        if rc == 0 or a.get("decided_by") != "enforcement" or "no gpu" not in a.get("error", ""):
            fail("a gpu grant on a host with no gpu was not refused with the reason: %s%s" % (out, err))
    d = fixture("doctor")
    rc, h, out = sb.grant('{"read":["%s"]}' % d)
    if rc != 0 or not h:
        fail("control: fs.scope, which doctor calls available, was not granted: %s" % out)


def case_ceiling():
    d = fixture("ceiling")
    src = os.environ.get("SHINKEN_POLICY_DIR") or os.path.join(os.environ["SHINKEN_SRCDIR"], "policies")
    narrow = TMP + "/policies"
    shutil.copytree(src, narrow)
    mpath = narrow + "/manifests/default.json"
    m = json.load(open(mpath))
    for c in m["capabilities"]:
        if c["class"] == "fs.scope":
            c["scope"]["write"] = [w for w in c["scope"]["write"] if w != "/srv"]
    json.dump(m, open(mpath, "w"))
    sock = start_daemon(src)
    sb = Sandbox(daemon=sock, policy_dir=narrow)
    rc, h, out = sb.grant('{"write":["%s"]}' % d)
    if rc == 0 or h:
        fail("a write grant beyond the sandbox's Landlock was answered granted: %s" % out)
    if "Landlock" not in out:
        fail("the refusal does not say why: %r" % out)
    sb.run.kill()
    sb.run.wait()
    # Control: the run reads the daemon's own manifest; the same grant is
    # given and the write lands.
    sb = Sandbox(daemon=sock)
    rc, h, out = sb.grant('{"write":["%s"]}' % d)
    if rc != 0 or not h:
        fail("control: the write grant within the ceiling was not given: %s" % out)
    rc, _ = sb.inside("echo in > %s/in" % d)
    if rc != 0 or not os.path.exists(d + "/in"):
        fail("control: the write did not land")


def ensure_user(name):
    """The escape suite's test user, made the same way under the same lock
    (tests run in parallel: one of them creates it)."""
    import fcntl
    with open("/var/lock/shinken-test-user.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            pwd.getpwnam(name)
        except KeyError:
            if subprocess.run(["useradd", "--system", "--no-create-home", "--home-dir", "/nonexistent",
                               "--shell", "/bin/sh", name]).returncode != 0:
                fail("cannot create the user " + name)


def case_user():
    ensure_user("shinken-test")
    d = fixture("user")
    sb = Sandbox(user="shinken-test")
    rc, _ = sb.inside("echo before > %s/before" % d)
    if rc == 0 or os.path.exists(d + "/before"):
        fail("the sandbox could write %s before any grant: the control is broken" % d)
    rc, h, out = sb.grant('{"write":["%s"]}' % d)
    if rc != 0 or not h:
        fail("the write grant was not given: %s" % out)
    rc, _ = sb.inside("echo granted > %s/granted" % d)
    if rc != 0 or not os.path.exists(d + "/granted"):
        fail("after the grant, the unprivileged sandbox's write did not reach the host")
    sb.cli("revoke", h)
    rc, _ = sb.inside("echo after > %s/after" % d)
    if rc == 0 or os.path.exists(d + "/after"):
        fail("after the revoke, the sandbox could still write %s" % d)


def persist_base():
    """Where persistence is tried: the admin tier forbids it in /srv (and
    every system directory), so beneath /home, which the manifest's write
    ceiling holds."""
    d = tempfile.mkdtemp(prefix="shk-persist.", dir="/home")
    os.chmod(d, 0o755)
    atexit.register(shutil.rmtree, d, True)
    return d


def persist_policy(base):
    """A copy of the policy whose manifest lets the image persist beneath
    BASE with no human to ask (Notify), survives_session allowed."""
    src = os.environ.get("SHINKEN_POLICY_DIR") or os.path.join(os.environ["SHINKEN_SRCDIR"], "policies")
    pdir = TMP + "/persist-policies"
    if not os.path.exists(pdir):
        shutil.copytree(src, pdir)
        mpath = pdir + "/manifests/default.json"
        m = json.load(open(mpath))
        for c in m["capabilities"]:
            if c["class"] == "persistence":
                c["tier"] = "Notify"
                c["scope"]["paths"] = [base]
        json.dump(m, open(mpath, "w"))
        for root, dirs, files in os.walk(pdir):
            for f in dirs + files:
                os.chmod(os.path.join(root, f), 0o755 if f in dirs else 0o644)
    return pdir


def store_entries(root, path):
    """The store's entries (directory names) of PATH for image default."""
    d = os.path.join(root, "default")
    enc = "".join(c if c.isalnum() or c in "._-" else "%%%02X" % ord(c) for c in path)
    return sorted(e for e in (os.listdir(d) if os.path.isdir(d) else []) if e == enc or e.startswith(enc + "@"))


def persist_case(user=None):
    base = persist_base()
    d = fixture("persist", base=base)
    store = TMP + "/.local/state/shinken/persist"
    sb = Sandbox(policy_dir=persist_policy(base), user=user)
    rc, _ = sb.inside("echo before > %s/new" % d)
    if rc == 0 or os.path.exists(d + "/new"):
        fail("control: the sandbox could write %s before any grant" % d)
    rc, out, err = sb.cli("grant", sb.sid, "persistence", "--scope", '{"paths":["%s"]}' % d)
    m = re.search(r"granted ([0-9a-f]{64})", out)
    if rc != 0 or not m:
        fail("the persistence grant was not given: %s%s" % (out, err))
    h = m.group(1)
    rc, out = sb.inside("cat %s/f && echo kept > %s/new && rm %s/f && ls %s" % (d, d, d, d))
    if rc != 0 or not out.startswith(SECRET) or "new" not in out or out.count("\nf\n"):
        fail("inside, the persisted directory did not show the host's file and take the writes: %r" % out)
    # Judged on the host: its directory did not change ...
    if os.path.exists(d + "/new") or open(d + "/f").read() != SECRET:
        fail("the sandbox's write or deletion reached the host's %s" % d)
    # ... and the write is in the store.
    ents = store_entries(store, d)
    if len(ents) != 1 or "@" not in ents[0]:
        fail("no session-only entry for %s in the store %s: %s" % (d, store, ents))
    up = os.path.join(store, "default", ents[0], "upper")
    if open(up + "/new").read() != "kept\n":
        fail("the store's upper layer does not hold the sandbox's write")
    rc, _, _ = sb.cli("revoke", h)
    if rc != 0:
        fail("the revoke failed")
    rc, out = sb.inside("cat %s/new" % d)
    if rc == 0:
        fail("after the revoke, the sandbox still sees what it persisted: %r" % out)
    rc, out = sb.inside("cat %s/f" % d)
    if rc != 0 or out != SECRET:
        fail("after the revoke, the host's file is not back in the sandbox's view: %r" % out)
    if store_entries(store, d):
        fail("a grant that does not survive the session left its data in the store: %s" % store_entries(store, d))
    # The session's end discards it too: a new grant, a write, and the
    # command ends (the step stops the loop that runs the steps).
    rc, out, err = sb.cli("grant", sb.sid, "persistence", "--scope", '{"paths":["%s"]}' % d)
    if rc != 0:
        fail("the second persistence grant was not given: %s%s" % (out, err))
    rc, _ = sb.inside("echo again > %s/again" % d)
    if rc != 0 or len(store_entries(store, d)) != 1:
        fail("the second grant's write is not in the store: %s" % store_entries(store, d))
    with open(WS + "/go.tmp", "w") as f:
        f.write("kill $PPID\n")
    os.rename(WS + "/go.tmp", "%s/go.%d" % (WS, sb.n + 1))
    try:
        sb.run.wait(timeout=20)
    except subprocess.TimeoutExpired:
        fail("the run did not end when its command did")
    if store_entries(store, d) or os.path.exists(d + "/again"):
        fail("the session's end left the data of a grant that does not survive it: %s" % store_entries(store, d))


def case_persist():
    persist_case()


def case_persist_user():
    ensure_user("shinken-test")
    persist_case(user="shinken-test")


def case_survive():
    base = persist_base()
    d = fixture("survive", base=base)
    store = TMP + "/.local/state/shinken/persist"
    scope = '{"paths":["%s"],"survives_session":true}' % d
    pol = persist_policy(base)
    sb = Sandbox(policy_dir=pol)
    rc, out, err = sb.cli("grant", sb.sid, "persistence", "--scope", scope)
    if rc != 0 or "granted" not in out:
        fail("the persistence grant was not given: %s%s" % (out, err))
    rc, _ = sb.inside("echo one > %s/kept" % d)
    if rc != 0 or os.path.exists(d + "/kept"):
        fail("the write failed inside (%d) or reached the host" % rc)
    rc, out, _ = sb.cli("persist", "rm", "default", d)
    if rc == 0 or "mounted" not in out + _:
        fail("persist rm removed data a running sandbox has mounted")
    sb.run.kill()
    sb.run.wait()
    ents = store_entries(store, d)
    if len(ents) != 1 or "@" in ents[0]:
        fail("after the session, the surviving entry is not in the store: %s" % ents)
    rc, out, _ = sb.cli("persist", "list", "--json")
    got = [e for e in json.loads(out)["entries"] if e["path"] == d] if rc == 0 else []
    if not got or not got[0]["survives_session"] or got[0]["in_use"] or got[0]["image"] != "default":
        fail("persist list does not show the kept entry: %s" % out)
    rc, out, _ = sb.cli("persist", "show", "default", d)
    if rc != 0 or "%s/kept" % d not in out:
        fail("persist show does not list the kept file: %s" % out)
    # The image's next session: before the grant the file is not there
    # (control), after it the file is back.
    sb = Sandbox(policy_dir=pol)
    rc, _ = sb.inside("cat %s/kept" % d)
    if rc == 0:
        fail("control: the next session saw the persisted file before any grant")
    rc, out, err = sb.cli("grant", sb.sid, "persistence", "--scope", scope)
    m = re.search(r"granted ([0-9a-f]{64})", out)
    if rc != 0 or not m:
        fail("the second session's persistence grant was not given: %s%s" % (out, err))
    rc, out = sb.inside("cat %s/kept" % d)
    if rc != 0 or out != "one\n":
        fail("the image's next session does not see what the last one persisted: %r" % out)
    sb.cli("revoke", m.group(1))
    rc, out, err = sb.cli("persist", "rm", "default", d)
    if rc != 0 or store_entries(store, d):
        fail("persist rm did not delete the kept data: %s%s" % (out, err))
    rc, out, err = sb.cli("grant", sb.sid, "persistence", "--scope", scope)
    if rc != 0:
        fail("the third grant was not given: %s%s" % (out, err))
    rc, out = sb.inside("cat %s/kept" % d)
    if rc == 0:
        fail("after persist rm, the data came back: %r" % out)


def device_daemon(devroot):
    """A daemon whose device root is DEVROOT, with a policy that lets gpu
    and peripheral grants through with no human to ask (Notify)."""
    src = os.environ.get("SHINKEN_POLICY_DIR") or os.path.join(os.environ["SHINKEN_SRCDIR"], "policies")
    pdir = TMP + "/device-policies"
    shutil.copytree(src, pdir)
    mpath = pdir + "/manifests/default.json"
    m = json.load(open(mpath))
    for c in m["capabilities"]:
        if c["class"] in ("gpu", "peripheral"):
            c["tier"] = "Notify"
    json.dump(m, open(mpath, "w"))
    return start_daemon(pdir, device_root=devroot), pdir


def node(path, major, minor):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    os.mknod(path, 0o666 | 0o020000, os.makedev(major, minor))
    os.chmod(path, 0o666)


def in_kmsg(token):
    p = subprocess.run(["dmesg"], capture_output=True, text=True)
    if p.returncode != 0:
        skip("cannot read the kernel log to judge the device's effect: %s" % p.stderr.strip())
    return token in p.stdout


def device_case(cls, scope, probe, present):
    devroot = HOSTDIR + "/devroot"
    os.mkdir(devroot)
    node(devroot + "/dri/card0", 226, 0)            # the DRM major: a node, no driver behind it here
    node(devroot + "/dri/renderD128", 1, 11)        # /dev/kmsg's numbers: its writes reach the kernel log
    node(devroot + "/snd/controlC0", 116, 0)        # ALSA's major
    node(devroot + "/snd/pcmC0D0p", 1, 11)
    try:
        os.stat(devroot + "/dri/renderD128")
        with open(devroot + "/dri/renderD128", "w") as f:
            f.write("shinken-unlock-probe %d\n" % os.getpid())
    except OSError as e:
        skip("the scratch device nodes cannot be used here (%s)" % e)
    sock, pdir = device_daemon(devroot)
    sb = Sandbox(daemon=sock, policy_dir=pdir)
    tok = "shinken-unlock-%s-%d" % (cls, os.getpid())
    # Control: before the grant the node is not in the sandbox, and the
    # write reaches nothing.
    rc, _ = sb.inside("echo %s-before > %s" % (tok, probe))
    if rc == 0 or in_kmsg(tok + "-before"):
        fail("control: the sandbox could write %s before any grant" % probe)
    rc, out, err = sb.cli("grant", sb.sid, cls, "--scope", scope)
    m = re.search(r"granted ([0-9a-f]{64})", out)
    if rc != 0 or not m:
        fail("the %s grant was not given: %s%s" % (cls, out, err))
    rc, out = sb.inside("ls -l %s && echo %s-granted > %s" % (" ".join(present), tok, probe))
    if rc != 0:
        fail("after the grant, the device nodes are not usable inside: %r" % out)
    time.sleep(0.1)
    if not in_kmsg(tok + "-granted"):
        fail("after the grant, the write through %s did not reach the host's device" % probe)
    rc, _, _ = sb.cli("revoke", m.group(1))
    if rc != 0:
        fail("the revoke failed")
    rc, out = sb.inside("ls %s; echo %s-revoked > %s" % (" ".join(present), tok, probe))
    if rc == 0 or in_kmsg(tok + "-revoked"):
        fail("after the revoke, the sandbox could still write %s: %r" % (probe, out))
    return sb


def case_gpu():
    sb = device_case("gpu", '{"device_ids":["0"],"mode":"shared"}', "/dev/dri/renderD128",
                     ["/dev/dri/card0", "/dev/dri/renderD128"])
    for scope, why in (('{"device_ids":["3"]}', "no gpu with device id 3"),
                       ('{"device_ids":["0"],"mode":"exclusive"}', "exclusive")):
        rc, out, err = sb.cli("grant", sb.sid, "gpu", "--scope", scope)
        if rc == 0 or why not in out + err:
            fail("gpu %s was not refused with the reason (%r): %s%s" % (scope, why, out, err))


def case_peripheral():
    sb = device_case("peripheral", '{"mic":true}', "/dev/snd/pcmC0D0p", ["/dev/snd/controlC0", "/dev/snd/pcmC0D0p"])
    rc, out, err = sb.cli("grant", sb.sid, "peripheral", "--scope", '{"camera":true}')
    if rc == 0 or "no camera" not in out + err:
        fail("a camera this host lacks was not refused with the reason: %s%s" % (out, err))
    rc, out, err = sb.cli("grant", sb.sid, "peripheral", "--scope", '{"input_inject":true}')
    if rc == 0:
        fail("input_inject was granted: %s" % out)


def case_before():
    d = fixture("before")
    ctl = fixture("before-control")
    hidden = tempfile.mkdtemp(prefix="shk-unlock.", dir="/tmp")
    atexit.register(shutil.rmtree, hidden, True)
    hold = TMP + "/hold"
    sb = Sandbox(hold=hold)
    # The command's first step, waiting for its start.
    with open(WS + "/go.tmp", "w") as f:
        f.write("echo first > %s/first\n" % d)
    os.rename(WS + "/go.tmp", WS + "/go.1")
    sb.n = 1
    rc, h, out = sb.grant('{"write":["%s"]}' % d)
    if rc != 0 or not h or "applied when the session's sandbox starts" not in out:
        fail("the grant before the start was not kept for it: %s" % out)
    rc, h2, out = sb.grant('{"write":["%s"]}' % hidden)
    if rc != 0 or not h2:
        fail("the second grant before the start was not kept for it: %s" % out)
    if os.path.exists(d + "/first"):
        fail("the command ran before its start was reported")
    open(hold, "w").close()
    end = time.monotonic() + 20
    while not os.path.exists(WS + "/rc.1"):
        if time.monotonic() > end or sb.run.poll() is not None:
            fail("the sandbox did not start once released")
        time.sleep(0.01)
    if open(WS + "/rc.1").read().strip() != "0" or not os.path.exists(d + "/first"):
        fail("the command's first write did not land: the grant was not mounted before it ran (%s)" %
             open(WS + "/out.1").read())
    rc, _ = sb.inside("echo x > %s/x" % ctl)
    if rc == 0 or os.path.exists(ctl + "/x"):
        fail("control: a path with no grant was writable")
    rc, out, _ = sb.cli("grants", sb.sid, "--json")
    live = {g["handle"]: g["live"] for g in json.loads(out)["grants"]} if rc == 0 else {}
    if not live.get(h) or live.get(h2, True):
        fail("after the start, the applied grant is not live or the one that could not be mounted is: %s" % out)
    rc, _, _ = sb.cli("revoke", h)
    rc, _ = sb.inside("echo after > %s/after" % d)
    if rc == 0 or os.path.exists(d + "/after"):
        fail("after the revoke, the grant made before the start still writes")


{"before": case_before, "gpu": case_gpu, "peripheral": case_peripheral, "persist": case_persist, "persist-user": case_persist_user, "survive": case_survive, "doctor": case_doctor, "ttl": case_ttl, "open": case_open, "ceiling": case_ceiling, "stop": case_stop, "write": case_write, "read": case_read, "deny": case_deny, "symlink": case_symlink,
 "git": case_git, "user": case_user}[CASE]()
print("ok: " + CASE, file=sys.stderr)

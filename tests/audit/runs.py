#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""runs.py CASE: the timeline of `shinken run`'s embedded manager (no
daemon), judged from outside the sandbox by reading the run's own store.

  concurrent  two runs at once each write a log of their own (a store has
              one writer), both signed with the user's one key: each
              verifies with `shinken audit verify --run`, the checkpoints
              check with `shinken audit key`'s key alone, their origins
              differ, and a changed byte in one is found (the control: the
              untouched one still verifies). `audit runs` lists both,
              `--run` finds one by its session's prefix.
  start       the sandbox-start event is in the store while the workload
              still runs (the control: sandbox-exit is not, until it ends).
  limits      a workload killed by --mem has sandbox.limit=memory on its
              exit; one that meets --pids has pids; the control run with
              room under the limits has no limit at all.
  masked      with $XDG_STATE_HOME set, the workload reads neither the
              user's signing key nor any log (the control: a file beside
              the state directory is readable).
  unrecorded  (test builds) a sandbox whose start the timeline cannot
              take is killed before the workload does anything lasting
              (the control: the same run with the timeline working).
"""
import atexit
import base64
import glob
import hashlib
import json
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import time

SHINKEN = os.environ["SHINKEN"]
CASE = sys.argv[1]


sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lib import fail, skip  # noqa: E402  (tests/lib.py: how a test skips and fails)


def scratch():
    """Not under /tmp or /var/tmp, which the sandbox replaces with its own:
    the state directory must be one the workload would see if nothing
    masked it (the masked case's control shows it does)."""
    base = "/var/lib/shinken-tests"
    try:
        os.makedirs(base, exist_ok=True)
        os.chmod(base, 0o755)
    except OSError:
        base = "/var/tmp"
    return tempfile.mkdtemp(prefix="shk-audit-runs.", dir=base)


TMP = scratch()
atexit.register(shutil.rmtree, TMP, True)
WS = TMP + "/ws"
os.mkdir(WS)
STATE = TMP + "/state"
RUNS = STATE + "/shinken/runs"
os.mkdir(TMP + "/home")
# The state directory outside the home, which the sandbox hides apart from
# the working directory: only the protection of Shinken's state hides it.
ENV = {"PATH": "/usr/bin:/bin", "HOME": TMP + "/home", "XDG_STATE_HOME": STATE,
       "SHINKEN_POLICY_DIR": os.environ.get("SHINKEN_POLICY_DIR", ""),
       # No daemon: the session's manager is embedded in shinken run.
       "SHINKEN_SOCKET": TMP + "/no-daemon.sock"}
for k in ("ASAN_OPTIONS", "UBSAN_OPTIONS"):
    if k in os.environ:
        ENV[k] = os.environ[k]


def start(options, script):
    degraded = ["--allow-degraded"] if os.getuid() == 0 else []
    argv = [SHINKEN, "run"] + degraded + ["--net", "proxy"] + options + ["--", "/bin/sh", "-c", script]
    return subprocess.Popen(argv, cwd=WS, env=ENV, stdin=subprocess.DEVNULL,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def finish(p):
    out, err = p.communicate(timeout=120)
    err = err.decode(errors="replace")
    print("--- %s -> %d\n%s" % (" ".join(p.args), p.returncode, err), file=sys.stderr)
    return p.returncode, err


def audit(*args):
    p = subprocess.run([SHINKEN, "audit", *args], env=ENV, capture_output=True, text=True,
                       timeout=120)
    return p.returncode, p.stdout, p.stderr


def logs():
    return sorted(glob.glob(RUNS + "/*.db"))


def events(db):
    c = sqlite3.connect("file:%s?mode=ro" % db, uri=True)
    try:
        return [json.loads(e) for (e,) in c.execute("SELECT entry FROM events ORDER BY seq")]
    finally:
        c.close()


def named(evs, name):
    return [e for e in evs if e["event.name"] == name]


def check_signature(vkey, note):
    """The checkpoint's Ed25519 signature, with the verifier key alone."""
    name, kid, key = vkey.split("+", 2)
    raw = base64.b64decode(key)
    text, sigs = note.split("\n\n", 1)
    for line in sigs.splitlines():
        dash, signer, sig = line.split(" ")
        sig = base64.b64decode(sig)
        if signer == name and sig[:4].hex() == kid:
            with open(TMP + "/text", "wb") as f:
                f.write((text + "\n").encode())
            with open(TMP + "/sig", "wb") as f:
                f.write(sig[4:])
            with open(TMP + "/pub.der", "wb") as f:
                f.write(bytes.fromhex("302a300506032b6570032100") + raw[1:])
            return subprocess.call(["openssl", "pkeyutl", "-verify", "-pubin", "-keyform", "DER",
                                    "-inkey", TMP + "/pub.der", "-rawin", "-in", TMP + "/text",
                                    "-sigfile", TMP + "/sig"], stdout=subprocess.DEVNULL) == 0
    return False


def case_concurrent():
    # Both alive at once: each waits for the other's file before it ends.
    a = start([], "touch %s/a; i=0; while [ ! -e %s/b ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done" % (WS, WS))
    b = start([], "touch %s/b; i=0; while [ ! -e %s/a ] && [ $i -lt 200 ]; do sleep 0.05; i=$((i+1)); done" % (WS, WS))
    for p in (a, b):
        rc, err = finish(p)
        if rc != 0:
            fail("a concurrent run failed (%d): %s" % (rc, err))
    dbs = logs()
    if len(dbs) != 2:
        fail("two concurrent runs left %d logs in %s: %s" % (len(dbs), RUNS, dbs))
    rc, vkey, err = audit("key")
    if rc != 0:
        fail("shinken audit key: %s" % err)
    vkey = vkey.strip()
    origins, sessions = set(), []
    for db in dbs:
        evs = events(db)
        opened = named(evs, "session-open")
        if len(opened) != 1 or not named(evs, "sandbox-exit"):
            fail("%s lacks its session's events: %s" % (db, [e["event.name"] for e in evs]))
        sessions.append(opened[0]["gen_ai.conversation.id"])
        rc, out, err = audit("verify", "--run", os.path.basename(db)[:-3])
        if rc != 0 or not out.startswith("verified: %d events" % len(evs)):
            fail("verify --run %s: %d %s%s" % (db, rc, out, err))
        c = sqlite3.connect(db)
        (origin,) = c.execute("SELECT value FROM meta WHERE key = 'origin'").fetchone()
        (note,) = c.execute("SELECT note FROM checkpoints ORDER BY size DESC LIMIT 1").fetchone()
        c.close()
        origins.add(origin)
        if not origin.startswith(vkey.split("+")[0] + "/run/") or note.split("\n")[0] != origin:
            fail("the run's origin %r is not the user's key's name and /run/" % origin)
        if not check_signature(vkey, note):
            fail("the run's checkpoint does not verify with the user's key %s" % vkey)
    if len(origins) != 2:
        fail("the two runs' logs share an origin: %s" % origins)
    rc, out, err = audit("runs")
    if rc != 0 or not all(s in out for s in sessions):
        fail("shinken audit runs does not list both sessions %s:\n%s%s" % (sessions, out, err))
    rc, out, err = audit("tail", "-n", "0", "--run", sessions[0][:12])
    if rc != 0 or "session-open gen_ai.conversation.id=" + sessions[0] not in out:
        fail("tail --run SESSION-PREFIX did not read that run's log: %s%s" % (out, err))
    rc, out, err = audit("tail", "--run", "no-such-run")
    if rc != 1 or "no run's log" not in err:
        fail("tail --run of an unknown run: %d %s" % (rc, err))
    # A changed byte in one log is found; the control: the other verifies.
    c = sqlite3.connect(dbs[0], isolation_level=None)
    (entry,) = c.execute("SELECT entry FROM events WHERE seq = 1").fetchone()
    c.execute("UPDATE events SET entry = ? WHERE seq = 1", (entry.replace("session-open", "session-opeN"),))
    c.close()
    rc, out, err = audit("verify", "--run", os.path.basename(dbs[0])[:-3])
    if rc != 3 or "first bad seq 1" not in out:
        fail("a changed byte in a run's log was not found: %d %s%s" % (rc, out, err))
    rc, out, err = audit("verify", "--run", os.path.basename(dbs[1])[:-3])
    if rc != 0:
        fail("control: the untouched run's log does not verify: %d %s%s" % (rc, out, err))
    # The user's own log, which the key was made with, verifies too.
    rc, out, err = audit("verify")
    if rc != 0:
        fail("the user's log beside the runs does not verify: %s%s" % (out, err))


def case_start():
    p = start([], "touch %s/up; i=0; while [ ! -e %s/go ] && [ $i -lt 1200 ]; do sleep 0.05; i=$((i+1)); done" % (WS, WS))
    deadline = time.time() + 60
    while not os.path.exists(WS + "/up") and time.time() < deadline and p.poll() is None:
        time.sleep(0.05)
    if not os.path.exists(WS + "/up"):
        finish(p)
        fail("the workload never started")
    # The workload runs (it waits for WS/go): its start must be on disk.
    deadline = time.time() + 20
    found, during = False, []
    while time.time() < deadline and not found:
        dbs = logs()
        during = events(dbs[0]) if dbs else []
        found = bool(named(during, "sandbox-start"))
        if not found:
            time.sleep(0.05)
    exit_during = named(during, "sandbox-exit")
    still_running = p.poll() is None
    open(WS + "/go", "w").close()
    rc, err = finish(p)
    if not found:
        fail("no sandbox-start in the run's log while the workload ran: %s" % [e["event.name"] for e in during])
    s = named(during, "sandbox-start")[0]
    if "seccomp" not in s.get("shinken.sandbox.enforced", []):
        fail("sandbox-start does not carry what stage 2 enforced: %s" % s)
    if exit_during or not still_running:
        fail("control: the workload had ended when its start was read (exit recorded: %s)" % bool(exit_during))
    after = events(logs()[0])
    if len(named(after, "sandbox-start")) != 1 or len(named(after, "sandbox-exit")) != 1:
        fail("after the run: not one sandbox-start and one sandbox-exit: %s" % [e["event.name"] for e in after])
    if rc != 0:
        fail("the run failed: %d %s" % (rc, err))


def exit_event(options, script):
    before = set(logs())
    rc, err = finish(start(options, script))
    new = sorted(set(logs()) - before)
    if len(new) != 1:
        fail("the run left %d new logs" % len(new))
    ex = named(events(new[0]), "sandbox-exit")
    if len(ex) != 1:
        fail("no sandbox-exit in the run's log")
    return rc, err, ex[0]


def case_limits():
    hog = "exec python3 -c 'x = bytearray(%d << 20); x[::4096] = b\"x\" * len(x[::4096])'"
    rc, err, ex = exit_event(["--mem", "48M"], hog % 400)
    if rc == 125 and "limit" in err:
        skip("no memory limit on this host: %s" % err.strip())
    if ex.get("shinken.sandbox.limit") != "memory":
        fail("a workload the memory limit killed: sandbox-exit %s" % ex)
    rc, err, ex = exit_event(["--mem", "48M"], hog % 8)
    if rc != 0 or "shinken.sandbox.limit" in ex:
        fail("control: a workload under the memory limit: %d, sandbox-exit %s" % (rc, ex))
    forks = "i=0; while [ $i -lt 12 ]; do sleep 1 & i=$((i+1)); done; wait"
    rc, err, ex = exit_event(["--pids", "6"], forks)
    if rc == 125 and "limit" in err:
        skip("no pids limit on this host: %s" % err.strip())
    if ex.get("shinken.sandbox.limit") != "pids":
        fail("a workload the pids limit refused forks: sandbox-exit %s" % ex)
    rc, err, ex = exit_event(["--pids", "64"], forks)
    if rc != 0 or "shinken.sandbox.limit" in ex:
        fail("control: a workload under the pids limit: %d, sandbox-exit %s" % (rc, ex))


def case_masked():
    # The user's key and every run's log exist once one run has gone.
    rc, err = finish(start([], "true"))
    key = STATE + "/shinken/audit.key"
    if rc != 0 or not os.path.exists(key) or not logs():
        fail("the first run left no key or log: %d %s" % (rc, err))
    # The control: a file beside the state directory is readable inside.
    with open(STATE + "/beside", "w") as f:
        f.write("beside\n")
    script = ("for f in %s %s %s %s/beside; do cat \"$f\" >> %s/seen 2>/dev/null && echo \"$f\" >> %s/read; done"
              % (key, logs()[0], STATE + "/shinken/audit.db", STATE, WS, WS))
    rc, err = finish(start([], script))
    read = open(WS + "/read").read().split() if os.path.exists(WS + "/read") else []
    if STATE + "/beside" not in read:
        fail("control: the workload could not read a file beside the state directory (%s)" % err)
    leaked = [f for f in read if f != STATE + "/beside"]
    if leaked:
        fail("the workload read Shinken's state (%s: $XDG_STATE_HOME set): %s" % (STATE, leaked))
    seen = open(WS + "/seen").read()
    if "PRIVATE+KEY" in seen:
        fail("the signing key reached the workload")


def case_unrecorded():
    # A start the timeline cannot take stops the sandbox: the workload,
    # which waits a moment and then leaves a file on the host, leaves none.
    # The fault point (test builds) makes the manager's record of the
    # start fail as a full queue would.
    if len(sys.argv) < 3 or sys.argv[2] != "faults":
        skip("this build has no fault injection (meson option fault_injection)")
    script = "sleep 1; touch %s/ran" % WS
    ENV["SHINKEN_FAULT"] = "sandbox-start-record"
    rc, err = finish(start([], script))
    del ENV["SHINKEN_FAULT"]
    if os.path.exists(WS + "/ran"):
        fail("the workload went on running although its start was not recorded")
    if rc == 0 or "start cannot be recorded" not in err:
        fail("the run did not fail saying why: %d %s" % (rc, err))
    # The launcher's account at the end still says what ran, and how it
    # ended: killed.
    ex = named(events(logs()[0]), "sandbox-exit")
    if len(ex) != 1 or ex[0].get("shinken.sandbox.signal") != "SIGKILL":
        fail("the log does not say the sandbox was killed: %s" % ex)
    # The control: the same run with the timeline working leaves the file.
    rc, err = finish(start([], script))
    if rc != 0 or not os.path.exists(WS + "/ran"):
        fail("control: the workload did not run to its end: %d %s" % (rc, err))


{"concurrent": case_concurrent, "start": case_start, "limits": case_limits,
 "masked": case_masked, "unrecorded": case_unrecorded}[CASE]()
print("ok: " + CASE)

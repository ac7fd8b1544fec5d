# SPDX-License-Identifier: Apache-2.0
"""Crash test: a writer killed with SIGKILL while it appends at full speed
loses at most what it had not committed; the store verifies (also while
the writer runs), and the next writer continues the same log (the
sequence, the tree and the last checkpoint) instead of starting a new
one."""
import os
import random
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auditlib import EMIT, cleanup, connect, emit, fail, rows, verify, workdir

base = workdir()
db = os.path.join(base, "state", "audit.db")
rnd = random.Random()
expected_starts = 0
for round_ in range(3):
    before = len(rows(db)) if os.path.exists(db) else 0
    # Full durability (synchronous=FULL), a checkpoint every 500 events.
    p = subprocess.Popen([EMIT, "--db", db, "--forever", "--cp-events", "500"],
                         stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    expected_starts += 1
    # Kill it once it has written a while, at a moment of its choosing.
    deadline = time.time() + 60
    while time.time() < deadline:
        time.sleep(0.05)
        try:
            if connect(db).execute("SELECT seq FROM events WHERE seq >= ? LIMIT 1",
                                   (before + 2000,)).fetchall():
                break
        except Exception:
            pass  # not created yet
    # A reader verifies while the writer appends: one snapshot, no false
    # alarm.
    code, out = verify(db)
    if code != 0:
        fail("verify during writing: exit %d\n%s" % (code, out))
    time.sleep(rnd.uniform(0.0, 0.3))
    if p.poll() is not None:
        fail("the writer stopped by itself: " + p.stderr.read().decode())
    p.send_signal(signal.SIGKILL)
    p.wait()
    code, out = verify(db)
    print("round %d: killed after %d events: exit %d: %s" % (round_, len(rows(db)) - before, code,
                                                             out.strip()))
    if code != 0:
        fail("the store does not verify after a crash:\n" + out)
    r = rows(db)
    if [s for s, _, _ in r] != list(range(len(r))):
        fail("the sequence has a gap after a crash")
    if len(r) <= before + 2000:
        fail("the writer committed fewer events than it had been seen to")
    if b'"event.name":"audit-stop"' in r[-1][1]:
        fail("a killed writer cannot have written its stop event")

# A clean run after the crashes continues the same log.
n = len(rows(db))
emit(db, "--count", "10", "--cp-events", "500")
r = rows(db)
if len(r) != n + 12:
    fail("expected %d events after the restart, found %d" % (n + 12, len(r)))
if b'"event.name":"audit-start"' not in r[n][1] or b'"seq":%d,' % n not in r[n][1]:
    fail("the restarted writer did not continue at seq %d: %r" % (n, r[n][1][:120]))
if b'"prev":"%s"' % r[n - 1][2].hex().encode() not in r[n][1]:
    fail("the restarted writer's first event does not link to the last one before the crash")
starts = sum(b'"event.name":"audit-start"' in e for _, e, _ in r)
if starts != expected_starts + 1:
    fail("expected %d audit-start events, found %d" % (expected_starts + 1, starts))
code, out = verify(db)
if code != 0 or "later events are not signed" in out:
    fail("the continued log should verify and be signed to its end:\n" + out)
origins = connect(db).execute("SELECT COUNT(*) FROM meta WHERE key = 'origin'").fetchone()[0]
if origins != 1:
    fail("a restart must not start a new log")
print("after %d crashes and a restart: %s" % (expected_starts, out.strip()))
cleanup(base)

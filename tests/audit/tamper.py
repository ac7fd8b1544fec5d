# SPDX-License-Identifier: Apache-2.0
"""Tamper tests on a real store: each change an attacker with write access
to the database could make is detected by `shinken audit verify` (exit 3)
and named by the first sequence number it implicates."""
import glob
import os
import random
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auditlib import (connect, copy_log, cleanup, emit, fail, first_bad, leaf, rows, verify,
                      workdir)

N = 400        # events the producer emits (the log also has start and stop)
EVERY = 50     # a checkpoint every EVERY events

seed = int(os.environ.get("SHINKEN_TEST_SEED", random.SystemRandom().randrange(1 << 30)))
rnd = random.Random(seed)
print("seed", seed)

base = workdir()
logdir = os.path.join(base, "log")
os.mkdir(logdir)
db = os.path.join(logdir, "audit.db")
emit(db, "--count", str(N), "--cp-events", str(EVERY), "--no-fsync")
total = len(rows(db))
code, out = verify(db)
if code != 0:
    fail("the untouched log does not verify: " + out)
c = connect(db)
sizes = [s for (s,) in c.execute("SELECT size FROM checkpoints ORDER BY size")]
latest_note = c.execute("SELECT note FROM checkpoints ORDER BY size DESC LIMIT 1").fetchone()[0]
c.close()
if len(sizes) < 5:
    fail("expected a checkpoint every %d events, got sizes %s" % (EVERY, sizes))


def flip(b: bytes, i=None) -> bytes:
    i = rnd.randrange(len(b)) if i is None else i
    return b[:i] + bytes([b[i] ^ (1 << rnd.randrange(8))]) + b[i + 1:]


def row_at(d, seq):
    return connect(d).execute("SELECT entry, leaf FROM events WHERE seq = ?", (seq,)).fetchone()


def set_row(d, seq, entry, lf):
    c = connect(d)
    c.execute("UPDATE events SET entry = ?, leaf = ? WHERE seq = ?", (entry, lf, seq))
    c.close()


def pick():
    return rnd.randrange(1, total - 2)


def cp_before(seq):
    """The size of the last checkpoint that does not cover seq."""
    return max([0] + [s for s in sizes if s <= seq])


# Each case changes a copy of the log and says which seq verify must name.
def entry_byte(d):
    r = pick()
    e, lf = row_at(d, r)
    e = e.encode() if isinstance(e, str) else e
    set_row(d, r, flip(e), lf)
    return r


def leaf_byte(d):
    r = pick()
    e, lf = row_at(d, r)
    set_row(d, r, e, flip(lf))
    return r


def seq_bit(d):
    r = pick()
    c = connect(d)
    c.execute("UPDATE events SET seq = seq | ? WHERE seq = ?", (1 << rnd.randrange(12, 30), r))
    c.close()
    return r


def delete_row(d):
    r = pick()
    connect(d).execute("DELETE FROM events WHERE seq = ?", (r,))
    return r


def swap_rows(d):
    a = pick()
    b = a + rnd.randrange(1, total - 1 - a)
    ea, la = row_at(d, a)
    eb, lb = row_at(d, b)
    set_row(d, a, eb, lb)
    set_row(d, b, ea, la)
    return a


def insert_copy(d):
    r = pick()
    c = connect(d)
    c.execute("UPDATE events SET seq = seq + 1000000 WHERE seq >= ?", (r,))
    c.execute("UPDATE events SET seq = seq - 999999 WHERE seq >= 1000000")
    e, lf = c.execute("SELECT entry, leaf FROM events WHERE seq = 3").fetchone()
    c.execute("INSERT INTO events(seq, entry, leaf) VALUES (?, ?, ?)", (r, e, lf))
    c.close()
    return r


def insert_forged(d):
    """An event made to fit: its own seq, the previous leaf, a correct leaf
    hash. Only the chain to the next event and the checkpoints give it away."""
    r = pick()
    c = connect(d)
    prev = c.execute("SELECT leaf FROM events WHERE seq = ?", (r - 1,)).fetchone()[0]
    c.execute("UPDATE events SET seq = seq + 1000000 WHERE seq >= ?", (r,))
    c.execute("UPDATE events SET seq = seq - 999999 WHERE seq >= 1000000")
    e = ('{"event.name":"grant","prev":"%s","seq":%d,"shinken.outcome":"granted",'
         '"time":"2026-01-01T00:00:00.000000000Z"}' % (prev.hex(), r)).encode()
    c.execute("INSERT INTO events(seq, entry, leaf) VALUES (?, ?, ?)", (r, e, leaf(e)))
    c.close()
    return r


def rewrite_with_hash(d):
    """An entry changed and its leaf hash recomputed to match."""
    r = pick()
    e, _ = row_at(d, r)
    e = e.encode() if isinstance(e, str) else e
    e = e.replace(b'"event.name":"', b'"event.name":"x', 1)
    set_row(d, r, e, leaf(e))
    return r


def truncate(d):
    """The last events deleted, their checkpoints left."""
    t = rnd.randrange(sizes[-2], total - 1)
    connect(d).execute("DELETE FROM events WHERE seq >= ?", (t,))
    return t


def note_byte(d):
    k = rnd.randrange(len(sizes))
    c = connect(d)
    note = c.execute("SELECT note FROM checkpoints WHERE size = ?", (sizes[k],)).fetchone()[0]
    body = note.encode()
    # A byte of the signed text (its size or root lines) or of the signature.
    i = rnd.randrange(len(note.split("\n")[0]) + 1, len(body) - 2)
    while body[i:i + 1] == b"\n":
        i -= 1
    c.execute("UPDATE checkpoints SET note = ? WHERE size = ?",
              (flip(body, i).decode("utf-8", "replace"), sizes[k]))
    c.close()
    return sizes[k - 1] if k else 0


def cp_size(d):
    k = rnd.randrange(len(sizes))
    connect(d).execute("UPDATE checkpoints SET size = size + 1000000 WHERE size = ?", (sizes[k],))
    # Reordered by the change, the checkpoint comes last: it vouches from
    # the last good one.
    return sizes[-1] if k < len(sizes) - 1 else sizes[-2]


def other_key(name):
    """A fresh key from another log: what an attacker who wants to sign
    new checkpoints would put in place."""
    other_key.n += 1
    d = os.path.join(base, "other-%s%d" % (name, other_key.n))
    os.mkdir(d)
    emit(os.path.join(d, "audit.db"), "--count", "1", "--no-fsync")
    return open(os.path.join(d, "audit.key")).read()


other_key.n = 0


def replace_key(d):
    path = os.path.join(d, "audit.key")
    os.chmod(path, 0o600)
    open(path, "w").write(other_key("a"))
    return 0


def replace_key_and_meta(d):
    """The key file and the log's record of it both replaced."""
    key = other_key("b")
    path = os.path.join(d, "audit.key")
    open(path, "w").write(key)
    name, kid, b64 = key.strip()[len("PRIVATE+KEY+"):].split("+", 2)
    oc = connect(os.path.join(base, "other-b%d" % other_key.n, "audit.db"))
    vkey = oc.execute("SELECT value FROM meta WHERE key = 'key'").fetchone()[0]
    origin = oc.execute("SELECT value FROM meta WHERE key = 'origin'").fetchone()[0]
    oc.close()
    c = connect(os.path.join(d, "audit.db"))
    c.execute("UPDATE meta SET value = ? WHERE key = 'key'", (vkey,))
    c.execute("UPDATE meta SET value = ? WHERE key = 'origin'", (origin,))
    c.close()
    return 0


cases = [entry_byte, leaf_byte, seq_bit, delete_row, swap_rows, insert_copy, insert_forged,
         rewrite_with_hash, truncate, note_byte, cp_size, replace_key, replace_key_and_meta]
failures = []
for case in cases:
    d = copy_log(logdir, case.__name__)
    want = case(d) if case.__name__.startswith("replace_key") else case(os.path.join(d, "audit.db"))
    code, out = verify(os.path.join(d, "audit.db"))
    got = first_bad(out)
    summary = [l for l in out.splitlines() if l.startswith(("tampered", "verified"))]
    print("%-22s expect seq %-4d exit %d: %s" % (case.__name__, want, code,
                                                  summary[0] if summary else out))
    if code != 3 or got != want:
        failures.append("%s: expected exit 3 naming seq %d, got exit %d naming %s:\n%s"
                        % (case.__name__, want, code, got, out))

# Truncated cleanly (events and their checkpoints): only a checkpoint kept
# elsewhere can tell. Without it the shorter log verifies; with it, verify
# names the first missing event.
d = copy_log(logdir, "clean-truncation")
kept = os.path.join(base, "kept.checkpoint")
open(kept, "w").write(latest_note)
t = rnd.randrange(sizes[1], sizes[-1])
c = connect(os.path.join(d, "audit.db"))
c.execute("DELETE FROM events WHERE seq >= ?", (t,))
c.execute("DELETE FROM checkpoints WHERE size > ?", (t,))
c.close()
code, out = verify(os.path.join(d, "audit.db"))
print("clean truncation at %d without an outside checkpoint: exit %d" % (t, code))
if code != 0:
    failures.append("a cleanly truncated log should still verify on its own:\n" + out)
code, out = verify(os.path.join(d, "audit.db"), "--checkpoint", kept)
print("clean truncation at %d with the kept checkpoint: exit %d: %s" % (t, code, out.strip()))
if code != 3 or first_bad(out) != t:
    failures.append("truncation past the kept checkpoint: expected seq %d, got exit %d:\n%s"
                    % (t, code, out))
# The untouched log extends the kept checkpoint.
code, out = verify(db, "--checkpoint", kept)
if code != 0 or "extends" not in out:
    failures.append("the untouched log should extend its own checkpoint:\n" + out)

# A trusted verifier key given on the command line catches the key swap
# even when the attacker also rewrote every record of the key: here the
# stored checkpoints still carry the old signatures, so both ways fail.
d = copy_log(logdir, "trusted-key")
replace_key_and_meta(d)
vkey = connect(db).execute("SELECT value FROM meta WHERE key = 'key'").fetchone()[0]
code, out = verify(os.path.join(d, "audit.db"), "--key", vkey)
if code != 3 or first_bad(out) != 0:
    failures.append("the trusted key should expose the swapped key:\n" + out)

cleanup(base, *glob.glob(logdir + "-*"))
if failures:
    fail("\n".join(failures))
print("all %d mutations detected and named" % (len(cases) + 1))

# SPDX-License-Identifier: Apache-2.0
"""Helpers for the audit tests: make a log with the test producer, run the
CLI, read and change the store directly with SQLite (as an attacker would)."""
import hashlib
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

SHINKEN = os.environ["SHINKEN"]
EMIT = os.environ["AUDIT_EMIT"]


def fail(msg):
    print("FAIL: " + msg, file=sys.stderr)
    sys.exit(1)


def workdir():
    d = tempfile.mkdtemp(prefix="shk-audit-test-")
    return d


def emit(db, *args, check=True):
    p = subprocess.run([EMIT, "--db", db, *args], capture_output=True, text=True, timeout=240)
    if check and p.returncode != 0:
        fail("audit-emit %s: %s" % (" ".join(args), p.stderr))
    return p


def shinken(*args, input=None):
    return subprocess.run([SHINKEN, "audit", *args], capture_output=True, text=True,
                          timeout=240, input=input)


def verify(db, *args):
    p = shinken("verify", "--db", db, *args)
    return p.returncode, p.stdout + p.stderr


def first_bad(out):
    for line in out.splitlines():
        if line.startswith("tampered: first bad seq "):
            return int(line.split()[4].rstrip(":"))
    return None


def connect(db):
    return sqlite3.connect(db, isolation_level=None)


def leaf(entry: bytes) -> bytes:
    return hashlib.sha256(b"\x00" + entry).digest()


def rows(db):
    c = connect(db)
    r = c.execute("SELECT seq, entry, leaf FROM events ORDER BY seq").fetchall()
    c.close()
    return [(s, e.encode() if isinstance(e, str) else e, l) for s, e, l in r]


def copy_log(src_dir, name):
    dst = src_dir + "-" + name
    shutil.copytree(src_dir, dst)
    return dst


def cleanup(*dirs):
    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)

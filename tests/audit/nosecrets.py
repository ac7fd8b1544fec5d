# SPDX-License-Identifier: Apache-2.0
"""Secrets never enter the log: a value handed to the builder as a
sensitive parameter is stored only as its SHA-256. The store (database,
WAL, index), every export and every reading tool are searched for the
value, in the clear and in the encodings a tool might use, and nothing is
found. The control run puts the same value in a plain field and the same
search finds it, so the search can fail."""
import base64
import glob
import hashlib
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auditlib import cleanup, emit, fail, shinken, workdir

secret = "sk-live-" + os.urandom(16).hex()
forms = {
    "clear": secret.encode(),
    "hex": secret.encode().hex().encode(),
    "base64": base64.b64encode(secret.encode()),
    "json-escaped": secret.encode().replace(b"-", b"\\u002d"),
}
digest = hashlib.sha256(secret.encode()).hexdigest().encode()


def outputs(db):
    """Everything the tools print about the log."""
    out = {}
    for name, args in [("export-jsonl", ["export", "--format", "jsonl"]),
                       ("export-otlp", ["export", "--format", "otlp-json"]),
                       ("tail", ["tail", "-n", "0"]), ("tail-json", ["tail", "-n", "0", "--json"]),
                       ("show", ["show", "0"]), ("show-4", ["show", "4"]),
                       ("prove", ["prove", "4"]), ("verify", ["verify"])]:
        p = shinken(*args[:1], "--db", db, *args[1:])
        if p.returncode != 0:
            fail("%s failed: %s" % (name, p.stderr))
        out[name] = (p.stdout + p.stderr).encode()
    return out


def files(db):
    """The store and its WAL and index, while a writer has them open (the
    events not yet checkpointed into the main file are in the WAL), and
    after it closed."""
    return {os.path.basename(f): open(f, "rb").read() for f in glob.glob(db + "*")}


def search(db, during):
    found = []
    places = list(during.items()) + list(files(db).items()) + list(outputs(db).items())
    for where, data in places:
        for form, b in forms.items():
            if b in data:
                found.append("%s (%s)" % (where, form))
    return found, any(digest in d for _, d in places)


def run(leak):
    base = workdir()
    db = os.path.join(base, "audit.db")
    # Hold the writer open (--forever) to read its WAL, then a clean run.
    p = subprocess.Popen([os.environ["AUDIT_EMIT"], "--db", db, "--forever", "--no-fsync",
                          "--secret", secret] + (["--leak"] if leak else []),
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(0.5)
    during = {"open-" + k: v for k, v in files(db).items()}
    p.kill()
    p.wait()
    emit(db, "--count", "200", "--cp-events", "50", "--secret", secret,
         *(["--leak"] if leak else []))
    found, hashed = search(db, during)
    cleanup(base)
    return found, hashed


found, hashed = run(leak=False)
if found:
    fail("the secret was found in: " + ", ".join(found))
if not hashed:
    fail("the secret's SHA-256 is not in the log: the parameter was not recorded at all")
print("the secret is in none of the store's files, exports or tool outputs; its hash is")

found, _ = run(leak=True)
if not any(f.startswith("audit.db") for f in found) or not any("export" in f for f in found):
    fail("control: a secret put in a plain field should be found, found only in %s" % found)
print("control: the same search finds a secret put in a plain field (%d places)" % len(found))

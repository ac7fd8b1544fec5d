# SPDX-License-Identifier: Apache-2.0
"""The reading tools on a real store: prove (checked with the script
docs/audit.md gives, which needs nothing but SHA-256), the checkpoint's
signature (checked with the openssl command line, as docs/audit.md shows),
key, tail (also -f), show, export (each JSONL line re-derived by Python's
own JSON encoder, which gives RFC 8785's form for these values; OTLP/JSON's
shape), and verify's answers to bad input and a kept checkpoint."""
import base64
import hashlib
import json
import os
import re
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from auditlib import SHINKEN, cleanup, connect, emit, fail, shinken, verify, workdir

DOC = os.path.join(os.environ["SHINKEN_SRCDIR"], "docs", "audit.md")


def doc_block(marker):
    """The fenced code block that follows <!-- test: MARKER --> in docs/audit.md."""
    text = open(DOC).read()
    m = re.search(r"<!-- test: %s -->\s*```\w*\n(.*?)```" % re.escape(marker), text, re.S)
    if not m:
        fail("docs/audit.md has no block marked %s" % marker)
    return m.group(1)


base = workdir()
db = os.path.join(base, "audit.db")
emit(db, "--count", "1000", "--cp-events", "100", "--no-fsync")
n = connect(db).execute("SELECT COUNT(*) FROM events").fetchone()[0]

# prove, and the documented check.
check = os.path.join(base, "check_proof.py")
open(check, "w").write(doc_block("check-proof"))
for seq in [0, 1, 2, 511, 512, n - 1]:
    p = shinken("prove", "--db", db, str(seq))
    if p.returncode != 0:
        fail("prove %d: %s" % (seq, p.stderr))
    proof = os.path.join(base, "proof-%d.json" % seq)
    open(proof, "w").write(p.stdout)
    r = subprocess.run([sys.executable, check, proof], capture_output=True, text=True)
    if r.returncode != 0:
        fail("the documented check rejects the proof of %d: %s%s" % (seq, r.stdout, r.stderr))
    # The same check rejects a changed entry, a changed path, another index.
    pj = json.loads(p.stdout)
    for name, change in [("entry", lambda j: j.update(entry=j["entry"].replace("seq", "seQ"))),
                         ("path", lambda j: j["path"].__setitem__(0, "00" * 32)),
                         ("index", lambda j: j.update(seq=(j["seq"] + 1) % j["tree_size"]))]:
        j = json.loads(p.stdout)
        change(j)
        open(proof, "w").write(json.dumps(j))
        r = subprocess.run([sys.executable, check, proof], capture_output=True, text=True)
        if r.returncode == 0:
            fail("the documented check accepts a proof of %d with a changed %s" % (seq, name))
if shinken("prove", "--db", db, str(n + 5)).returncode != 1:
    fail("prove of an event that does not exist should fail with exit 1")

# The checkpoint's signature, with the openssl command line only.
vkey = shinken("key", "--db", db).stdout.strip()
if not re.fullmatch(r"[^+\s]+\+[0-9a-f]{8}\+[A-Za-z0-9+/]+=*", vkey):
    fail("key printed %r, not NAME+KEYID+BASE64" % vkey)
name, kid, b64 = vkey.split("+", 2)
raw = base64.b64decode(b64)
if raw[0] != 1 or hashlib.sha256(name.encode() + b"\n\x01" + raw[1:]).hexdigest()[:8] != kid:
    fail("the verifier key's ID is not SHA-256(name || 0x0A || 0x01 || key)[:4]")
open(os.path.join(base, "checkpoint"), "w").write(pj["checkpoint"])
script = doc_block("check-signature")
for good in [True, False]:
    if not good:
        note = pj["checkpoint"].split("\n")
        note[1] = str(int(note[1]) - 1)
        open(os.path.join(base, "checkpoint"), "w").write("\n".join(note))
    r = subprocess.run(["sh", "-c", script, "sh", vkey, os.path.join(base, "checkpoint")],
                       cwd=base, capture_output=True, text=True)
    if (r.returncode == 0) != good:
        fail("openssl's verdict on a %s checkpoint: exit %d %s%s"
             % ("good" if good else "changed", r.returncode, r.stdout, r.stderr))

# tail
p = shinken("tail", "--db", db, "-n", "3")
lines = p.stdout.splitlines()
if p.returncode != 0 or len(lines) != 3 or not lines[-1].startswith("%d " % (n - 1)):
    fail("tail -n 3 printed:\n" + p.stdout + p.stderr)
p = shinken("tail", "--db", db, "-n", "0", "--session", "s-3", "--json")
sess = [json.loads(l) for l in p.stdout.splitlines()]
if not sess or any(e.get("gen_ai.conversation.id") != "s-3" for e in sess):
    fail("tail --session s-3 printed other sessions")
p = shinken("tail", "--db", db, "-n", "2", "--session", "s-3")
if len(p.stdout.splitlines()) != 2 or "gen_ai.conversation.id=s-3" not in p.stdout:
    fail("tail -n 2 --session s-3 printed:\n" + p.stdout)
follow = subprocess.Popen([SHINKEN, "audit", "tail", "--db", db, "-f", "-n", "1", "--json"],
                          stdout=subprocess.PIPE, text=True)
time.sleep(0.5)
emit(db, "--count", "5", "--no-fsync")
seen = []
deadline = time.time() + 30
while len(seen) < 1 + 7 and time.time() < deadline:
    seen.append(json.loads(follow.stdout.readline()))
follow.kill()
follow.wait()
if [e["seq"] for e in seen] != list(range(n - 1, n + 7)) or seen[-1]["event.name"] != "audit-stop":
    fail("tail -f did not follow the new events: %s" % [e["seq"] for e in seen])
n += 7

# show
p = shinken("show", "--db", db, "4")
if p.returncode != 0 or "shinken.sandbox.enforced" not in p.stdout or "leaf hash" not in p.stdout:
    fail("show 4 printed:\n" + p.stdout + p.stderr)
p = shinken("show", "--db", db, "999999")
if p.returncode != 1 or "no event 999999" not in p.stderr:
    fail("show of a missing event: exit %d %s" % (p.returncode, p.stderr))

# export jsonl: every line is the stored entry, and in canonical form.
p = shinken("export", "--db", db, "--format", "jsonl")
lines = p.stdout.splitlines()
if p.returncode != 0 or len(lines) != n:
    fail("export jsonl printed %d lines for %d events" % (len(lines), n))
for line in lines:
    again = json.dumps(json.loads(line), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    if again != line:
        fail("an entry is not in canonical form:\n%s\n%s" % (line, again))
mid = json.loads(lines[n // 2])["time"]
p = shinken("export", "--db", db, "--format", "jsonl", "--since", mid)
if not 0 < len(p.stdout.splitlines()) < n:
    fail("--since %s kept %d of %d" % (mid, len(p.stdout.splitlines()), n))
if shinken("export", "--db", db, "--format", "jsonl", "--since", "yesterday").returncode != 1:
    fail("--since yesterday should be refused")

# export otlp-json
p = shinken("export", "--db", db, "--format", "otlp-json")
doc = json.loads(p.stdout)
recs = doc["resourceLogs"][0]["scopeLogs"][0]["logRecords"]
if len(recs) != n:
    fail("otlp-json has %d records for %d events" % (len(recs), n))
attrs = {a["key"]: a["value"] for a in recs[4]["attributes"]}
entry = json.loads(lines[4])
if (recs[4]["eventName"] != entry["event.name"] or attrs["shinken.seq"] != {"intValue": "4"}
        or attrs["gen_ai.conversation.id"] != {"stringValue": entry["gen_ai.conversation.id"]}
        or "arrayValue" not in attrs["shinken.sandbox.enforced"]):
    fail("otlp-json record 4 does not carry the entry: %s" % recs[4])
t = entry["time"]
sec = int(__import__("calendar").timegm(time.strptime(t[:19], "%Y-%m-%dT%H:%M:%S")))
if recs[4]["timeUnixNano"] != "%d%s" % (sec, t[20:29]):
    fail("timeUnixNano %s does not match %s" % (recs[4]["timeUnixNano"], t))

# verify: bad input is exit 1 with a sentence; a kept checkpoint is extended.
for args, why in [(["--checkpoint", os.path.join(base, "nope")], "missing checkpoint file"),
                  (["--key", "not-a-key"], "malformed key")]:
    code, out = verify(db, *args)
    if code != 1 or "shinken: audit:" not in out:
        fail("verify with a %s: exit %d %s" % (why, code, out))
open(os.path.join(base, "junk"), "w").write("hello\n")
code, out = verify(db, "--checkpoint", os.path.join(base, "junk"))
if code != 1:
    fail("verify with a junk checkpoint: exit %d %s" % (code, out))
code, out = verify(os.path.join(base, "missing.db"))
if code != 1:
    fail("verify of a missing store: exit %d %s" % (code, out))
open(os.path.join(base, "kept"), "w").write(pj["checkpoint"])
code, out = verify(db, "--checkpoint", os.path.join(base, "kept"), "--key", vkey)
if code != 0 or "extends" not in out:
    fail("verify against a kept checkpoint and the trusted key: exit %d %s" % (code, out))
print("prove, key, tail, show, export and verify behave as documented")
cleanup(base)

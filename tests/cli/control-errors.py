#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""control-errors.py: the mistakes the manager would otherwise carry out
without a word are refused with one sentence and status 1 (bad input),
against a real session (shinken run --net proxy, its manager embedded):
the handles of a session that does not exist, the revoke of a handle
already revoked, and a grant whose scope grants nothing. Each row has its
control, the same command made valid, which succeeds; and a refused grant
leaves no handle behind. The manager decides these, not the CLI: a client
that speaks JSON on the control socket itself gets the same refusals."""
import json
import re
import socket

from runsession import Session, fail

S = Session("shk-ctlerr.")
sid, cli = S.sid, S.cli


def raw(req):
    """REQ sent on the control socket as the manager's protocol has it (one
    JSON line each way), with no shinken command in between."""
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as c:
        c.settimeout(30)
        c.connect(S.sock)
        c.sendall(json.dumps(req).encode() + b"\n")
        buf = b""
        while not buf.endswith(b"\n"):
            chunk = c.recv(4096)
            if not chunk:
                break
            buf += chunk
    return json.loads(buf)


def raw_refused(what, req, sentence):
    ans = raw(req)
    if ans.get("ok") is not False or "decision" in ans or sentence not in ans.get("error", ""):
        fail("%s on the socket: not refused as bad input with '%s': %r" % (what, sentence, ans))


def handles():
    rc, out, _ = cli("grants", sid, "--json")
    if rc != 0:
        fail("grants of the live session failed")
    return {g["handle"]: g["live"] for g in json.loads(out)["grants"]}


def refused(what, args, sentence):
    """ARGS exits 1 with one line on stderr holding SENTENCE."""
    rc, _, err = cli(*args)
    if rc != 1 or err.count("\n") != 1 or sentence not in err:
        fail("%s: exited %d, not 1 with '%s' in one line: %r" % (what, rc, sentence, err))


# A handle to revoke, granted with --approve (the manifest may ask).
rc, out, err = cli("grant", sid, "net.egress", "--scope", '{"domains":["a.test"]}', "--approve")
h = re.search(r"granted (\S+)", out)
if rc != 0 or not h:
    fail("control: a grant that grants something failed: %r" % err)
handle = h.group(1)

# 1. The handles of a session nobody opened; control: the live session's.
refused("grants of an unknown session", ["grants", "no-such-session"], "no session 'no-such-session'")
if handle not in handles():
    fail("control: grants of the live session does not list its handle")
raw_refused("grants of an unknown session", {"op": "grants", "session": "no-such-session"},
            "no session 'no-such-session'")
if not raw({"op": "grants", "session": sid}).get("ok"):
    fail("control: grants of the live session on the socket failed")

# 2. A revoke twice; control: the first one.
rc, _, err = cli("revoke", handle)
if rc != 0:
    fail("control: the first revoke failed: %r" % err)
refused("a second revoke", ["revoke", handle], "handle %s was already revoked" % handle)
raw_refused("a second revoke", {"op": "revoke", "handle": handle}, "handle %s was already revoked" % handle)
if handles().get(handle) is not False:
    fail("the revoked handle is not listed as revoked")

# 3. Scopes that grant nothing; each row leaves no handle behind.
before = handles()
for cls, scope in [("net.egress", "{}"), ("net.egress", '{"ports":[443]}'),
                   ("net.egress", '{"domains":[],"cidrs":[]}'), ("net.egress", '{"tls_inspect":true}'),
                   ("fs.scope", '{"deny":["/etc"]}'), ("clipboard", "{}")]:
    refused("%s %s" % (cls, scope), ["grant", sid, cls, "--scope", scope, "--approve"], "grants nothing")
    raw_refused("%s %s" % (cls, scope), {"op": "grant", "session": sid, "class": cls, "scope": json.loads(scope)},
                "grants nothing")
if handles() != before:
    fail("a scope that grants nothing left a handle")
# Control: ports with a domain grant something.
rc, _, err = cli("grant", sid, "net.egress", "--scope", '{"domains":["b.test"],"ports":[443]}', "--approve")
if rc != 0:
    fail("control: a domain with ports was refused: %r" % err)
# Control on the socket: the same kind of grant is not refused as granting
# nothing (it is decided: granted, or held for a human).
ans = raw({"op": "grant", "session": sid, "class": "net.egress", "scope": {"domains": ["c.test"], "ports": [443]}})
if "grants nothing" in ans.get("error", "") or not (ans.get("ok") or "decision" in ans):
    fail("control: a domain with ports on the socket was not decided: %r" % ans)
# install.privileged's empty scope is its narrower choice (packages), which
# grants something: it goes to the decision, never "grants nothing".
ans = raw({"op": "grant", "session": sid, "class": "install.privileged", "scope": {}})
if "grants nothing" in ans.get("error", "") or "decision" not in ans:
    fail("install.privileged {} was not decided: %r" % ans)
print("ok: control errors")

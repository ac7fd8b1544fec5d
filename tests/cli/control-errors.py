#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""control-errors.py: the mistakes the manager would carry out without a
word are refused by the CLI with one sentence and status 1 (bad input),
against a real session (shinken run --net proxy, its manager embedded):
the handles of a session that does not exist, the revoke of a handle
already revoked, and a grant whose scope grants nothing. Each row has its
control, the same command made valid, which succeeds; and a refused grant
leaves no handle behind."""
import json
import re

from runsession import Session, fail

S = Session("shk-ctlerr.")
sid, cli = S.sid, S.cli


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

# 2. A revoke twice; control: the first one.
rc, _, err = cli("revoke", handle)
if rc != 0:
    fail("control: the first revoke failed: %r" % err)
refused("a second revoke", ["revoke", handle], "handle %s was already revoked" % handle)
if handles().get(handle) is not False:
    fail("the revoked handle is not listed as revoked")

# 3. Scopes that grant nothing; each row leaves no handle behind.
before = handles()
for cls, scope in [("net.egress", "{}"), ("net.egress", '{"ports":[443]}'),
                   ("net.egress", '{"domains":[],"cidrs":[]}'), ("net.egress", '{"tls_inspect":true}'),
                   ("fs.scope", '{"deny":["/etc"]}'), ("clipboard", "{}")]:
    refused("%s %s" % (cls, scope), ["grant", sid, cls, "--scope", scope, "--approve"], "grants nothing")
if handles() != before:
    fail("a scope that grants nothing left a handle")
# Control: ports with a domain grant something.
rc, _, err = cli("grant", sid, "net.egress", "--scope", '{"domains":["b.test"],"ports":[443]}', "--approve")
if rc != 0:
    fail("control: a domain with ports was refused: %r" % err)
print("ok: control errors")

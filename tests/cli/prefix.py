#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""prefix.py: sessions and handles are accepted by any unique prefix, as git
accepts commit ids. A real session (shinken run --net proxy, its manager
embedded) is granted to, listed and revoked by prefixes of its ids; a
prefix two handles share is refused as ambiguous, naming both; an id
nothing begins with is the manager's "unknown" (the control: nothing is
guessed)."""
import os
import re

from runsession import Session, fail

S = Session("shk-prefix.")
sid, cli = S.sid, S.cli


def grant(session, domain):
    rc, out, err = cli("grant", session, "net.egress", "--scope", '{"domains":["%s"]}' % domain, "--approve")
    m = re.search(r"^granted (\S+)", out, re.M)
    if rc != 0 or not m:
        fail("grant to %s was not granted (%d): %s" % (session, rc, err))
    return m.group(1)


# Seventeen handles: two of them begin with the same hexadecimal digit.
handles = [grant(sid[: len(sid) - 4] if i % 2 else sid, "d%d.example.test" % i) for i in range(17)]
rc, out, err = cli("grants", sid[:-3])
if rc != 0 or any(h not in out for h in handles):
    fail("grants by a prefix of the session did not list every handle")
h1, h2 = next((a, b) for i, a in enumerate(handles) for b in handles[i + 1:] if a[0] == b[0])
common = os.path.commonprefix([h1, h2])
rc, out, err = cli("revoke", common)
if rc != 1 or "ambiguous" not in err:
    fail("the shared prefix %r was not refused as ambiguous: %d %s" % (common, rc, err))
rc, out, err = cli("revoke", h1[: len(common) + 1])
if rc != 0 or ("revoked %s" % h1) not in out:
    fail("revoke by a unique prefix of %s: %d %s" % (h1, rc, out + err))
# Control: nothing begins with it, so nothing is guessed.
rc, out, err = cli("grant", "zz-no-such-session", "net.egress", "--scope", '{"domains":["c.example.test"]}')
if rc != 1:
    fail("control: a grant to a session nothing begins with exited %d" % rc)
print("ok: prefixes")

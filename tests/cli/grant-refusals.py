#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""grant-refusals.py: a grant that is not given says why in terms of the
next step, against a real session (shinken run --net proxy, its manager
embedded) and the shipped policies: one that needs a human says so with
its tier and the command that approves it (which this test then runs, and
it is granted); one outside the image manifest says so and that no
approval grants it; one an administrator's rule forbids names the rule; a
class this host cannot enforce points at shinken doctor. The control: a
grant the policy allows is granted, and says none of these."""
import os
import re
import subprocess

from runsession import Session, fail

S = Session("shk-grantref.")
sid, cli = S.sid, S.cli


def refused(args, *needles):
    rc, out, err = cli("grant", sid, *args)
    if rc != 2 or err.count("\n") != 1:
        fail("grant %s: exited %d, not 2 with one line: %r" % (args, rc, err))
    for n in needles:
        if n not in err:
            fail("grant %s: '%s' is not in %r" % (args, n, err))
    return err


# Needs a human: the tier, the pending request, and the command that
# approves it, which works as printed.
err = refused(["net.egress", "--scope", '{"domains":["api.test"]}'], "needs a human's approval (tier Ask)",
              "pending request ")
m = re.search(r"approves it with: (shinken grant .* --approve)$", err.strip())
if not m:
    fail("no command to approve with: %r" % err)
p = subprocess.run(m.group(1).replace("shinken", os.environ["SHINKEN"], 1), shell=True, env=S.env,
                   capture_output=True, text=True, timeout=30)
if p.returncode != 0 or not p.stdout.startswith("granted "):
    fail("the approving command as printed did not grant: %d %r %r" % (p.returncode, p.stdout, p.stderr))

refused(["net.egress", "--scope", '{"domains":["evil.invalid"]}'], "outside the manifest of image ",
        "evil.invalid", "no approval grants what the image's manifest leaves out")
refused(["fs.scope", "--scope", '{"write":["/home/u/.ssh"]}'],
        "forbidden by admin rule 'admin-fs-credentials-and-shell-rc'", "write on /home/u/.ssh",
        "holds against every approval")
refused(["net.egress", "--scope", '{"domains":["api.test"]}', "--external"],
        "forbidden by admin rule 'admin-block-tier' (tier Block)")
refused(["gpu", "--scope", '{"device_ids":["0"]}'], "no enforcement point on this host for gpu", "shinken doctor")

# Control: what the policy allows is granted, with none of the refusals'
# words.
rc, out, err = cli("grant", sid, "net.egress", "--scope", '{"domains":["registry.npm.example"],"ports":[443]}')
if rc != 0 or not out.startswith("granted ") or "refused" in err or "approval" in err:
    fail("control: an allowed grant was not simply granted: %d %r %r" % (rc, out, err))
print("ok: grant refusals")

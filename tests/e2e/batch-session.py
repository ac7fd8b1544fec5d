#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Approving a batch for the session, end to end: held connections to
sibling hosts (a.pkg.test and b.pkg.test at one port) join one card, and
`shinken approve CARD --session` grants ONE handle, the card's pattern
(*.pkg.test at that port), not one per exact scope. Judged from outside the
manager: `shinken grants` lists one net.egress handle; the loopback upstream,
which counts the connections it accepts, saw both siblings; and revoking that
one handle closes both siblings' open tunnels and lets neither through again
(the upstream sees nothing more).

Controls: before the approval the upstream saw nothing; a card for one
host asked twice is approved as that host's exact scope (a handle of its own,
no pattern), and its tunnel is not touched by the revoke of the pattern's
handle."""
import json
import os
import shutil
import tempfile
import time

from mgrlib import (SRC, Checks, Client, Control, Daemon, Upstream, cards, closed_by_peer, proxy_config,
                    proxy_connect, wait_cards)

chk = Checks()


def egress_grants(d, sid):
    rc, out, err, _ = d.cli("grants", sid, "--json")
    chk(rc == 0, f"shinken grants ({rc}, {err!r})")
    gs = json.loads(out).get("grants", []) if rc == 0 else []
    return [g for g in gs if g.get("class") == "net.egress"]


def tunnel(edir, host, port):
    """An open CONNECT tunnel that echoed once, or None."""
    s, st = proxy_connect(edir, host, port)
    if st != 200:
        s.close()
        return None
    s.sendall(b"ping")
    if s.recv(4) != b"ping":
        s.close()
        return None
    return s


def main():
    tmp = tempfile.mkdtemp(prefix="shk-batchsess-")
    up = Upstream()
    manifest = os.path.join(tmp, "manifest.json")
    with open(manifest, "w") as f:
        json.dump({"image": "batch", "capabilities": [
            {"class": "net.egress", "tier": "Ask", "scope": {"domains": ["**.pkg.test", "solo.test"]}}]}, f)
    d = Daemon(tmp, "d", config={"manifest": manifest, "card_timeout_ms": 5000, "batch_window_ms": 300,
                                 "policy_dir": os.path.join(SRC, "policies")})
    cfg = proxy_config(tmp, "a.pkg.test", "b.pkg.test", "solo.test")
    pat = f"*.pkg.test:{up.port}"
    try:
        ctl = Control(d.sock)
        sub = Control(d.sock, timeout=10)
        chk(sub.call(op="subscribe").get("subscribed") is True, "a human surface subscribes")
        a = ctl.call(op="open_session", name="batch-session", egress=True, proxy_config=cfg)
        chk(a.get("ok") is True, f"open_session: {a}")
        sid, edir = a.get("session", "x"), a.get("egress_dir", "/nonexistent")

        # Control first: one host asked twice is approved as its exact scope.
        n0 = up.count()
        s1 = Client(edir, "solo.test", up.port)
        s2 = Client(edir, "solo.test", up.port)
        cs = wait_cards(d, sid, 1, 2)
        chk(len(cs) == 1, f"two attempts at one host make one card ({[(c.get('scope'), c.get('attempts')) for c in cs]})")
        rc, out, err, _ = d.cli("approve", cs[0].get("id", "x") if cs else "x", "--session")
        chk(rc == 0 and "one handle" not in out, f"approve --session of one scope ({rc}, {out!r}, {err!r})")
        s1.join(10)
        s2.join(10)
        chk(s1.status == 200 and s2.status == 200 and up.count() == n0 + 2,
            f"both attempts at solo.test went through ({s1.status}, {s2.status}, {up.count() - n0})")
        gs = egress_grants(d, sid)
        chk(len(gs) == 1 and "solo.test" in json.dumps(gs[0].get("scope")) and "*" not in json.dumps(gs[0].get("scope")),
            f"one exact handle for solo.test ({[g.get('scope') for g in gs]})")
        solo_handle = gs[0].get("handle") if gs else "x"

        # Two siblings: one card, approved for the session.
        n1 = up.count()
        x = Client(edir, "a.pkg.test", up.port)
        y = Client(edir, "b.pkg.test", up.port)
        cs = wait_cards(d, sid, 1, 2)
        chk(len(cs) == 1 and cs[0].get("attempts") == 2 and cs[0].get("pattern") == pat,
            f"two held siblings make one card proposing {pat} ({[(c.get('pattern'), c.get('attempts')) for c in cs]})")
        time.sleep(0.2)
        chk(x.status is None and y.status is None and up.count() == n1,
            "while the card is open the upstream saw nothing")
        rc, out, err, _ = d.cli("approve", cs[0].get("id", "x") if cs else "x", "--session")
        chk(rc == 0 and "one handle" in out and pat in out,
            f"approve --session says the batch became one handle for {pat} ({rc}, {out!r}, {err!r})")
        x.join(10)
        y.join(10)
        chk(x.status == 200 and x.echoed and y.status == 200 and y.echoed and up.count() == n1 + 2,
            f"both siblings went through ({x.status}, {y.status}, {up.count() - n1})")
        gs = egress_grants(d, sid)
        pkg = [g for g in gs if g.get("handle") != solo_handle]
        chk(len(pkg) == 1 and "*.pkg.test" in json.dumps(pkg[0].get("scope")),
            f"shinken grants shows one handle for the batch, its pattern ({[g.get('scope') for g in pkg]})")
        handle = pkg[0].get("handle", "x") if pkg else "x"

        # Open tunnels under each handle, then revoke the pattern's one.
        ta = tunnel(edir, "a.pkg.test", up.port)
        tb = tunnel(edir, "b.pkg.test", up.port)
        ts = tunnel(edir, "solo.test", up.port)
        chk(ta is not None and tb is not None and ts is not None, "tunnels open under both handles, with no card")
        chk(cards(d, sid) == [], "and raise no card")
        rc, out, err, _ = d.cli("revoke", handle, "--json")
        closed_n = json.loads(out).get("tunnels_closed") if rc == 0 else None
        chk(rc == 0 and closed_n == 2, f"revoking the batch's handle closed its two tunnels ({rc}, {out!r}, {err!r})")
        chk(ta is not None and closed_by_peer(ta, 5) and tb is not None and closed_by_peer(tb, 5),
            "the revoke closed both siblings' tunnels")
        if ts is not None:
            ts.settimeout(5)
            ts.sendall(b"ping")
            chk(ts.recv(4) == b"ping", "control: the solo.test tunnel under its own handle is untouched")
            ts.close()
        n2 = up.count()
        p = Client(edir, "a.pkg.test", up.port)
        q = Client(edir, "b.pkg.test", up.port)
        time.sleep(0.5)
        for c in wait_cards(d, sid, 1, 1, timeout=3):
            d.cli("cancel", c.get("id", "x"))
        p.join(10)
        q.join(10)
        chk(p.status != 200 and q.status != 200 and up.count() == n2,
            f"after the revoke neither sibling gets through, and the upstream saw nothing ({p.status}, {q.status}, "
            f"{up.count() - n2})")
    finally:
        d.stop()
        up.close()
        shutil.rmtree(tmp, ignore_errors=True)
    chk.finish()


if __name__ == "__main__":
    main()

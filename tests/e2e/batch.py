#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""Batching and patterns in the Ask loop, end to end: held connections to
sibling hosts (a.pkg.test and b.pkg.test at one port) join one card that
proposes their pattern (*.pkg.test at that port); approving the pattern
releases both on their own client connections (the upstream counts two),
and a third sibling then goes through with no card at all.

Controls, judged the same way from outside the manager: two hosts whose only
common parent is the top-level label (alpha.test, beta.test) make two cards
with no pattern (no "*.test" is ever proposed); and siblings whose pattern
the manifest does not allow (only the exact names a.shop.test and
b.shop.test are listed) make cards that offer none, and approving a pattern
on them is refused."""
import json
import os
import shutil
import tempfile
import time

from mgrlib import (SRC, Checks, Client, Control, Daemon, Upstream, audit_events, cards, proxy_config, proxy_connect,
                    wait_cards)

chk = Checks()


def session(ctl, cfg, name):
    a = ctl.call(op="open_session", name=name, egress=True, proxy_config=cfg)
    chk(a.get("ok") is True, f"open_session {name}: {a}")
    return a.get("session", "x"), a.get("egress_dir", "/nonexistent")


def main():
    tmp = tempfile.mkdtemp(prefix="shk-batch-")
    up = Upstream()
    manifest = os.path.join(tmp, "manifest.json")
    with open(manifest, "w") as f:
        json.dump({"image": "batch", "capabilities": [
            {"class": "net.egress", "tier": "Ask", "scope": {"domains": ["**.pkg.test", "alpha.test", "beta.test"]}},
            {"class": "net.egress", "tier": "Ask", "scope": {"domains": ["a.shop.test", "b.shop.test"]}},
            {"class": "net.egress", "tier": "Block", "scope": {"domains": ["evil.mall.test"]}},
            {"class": "net.egress", "tier": "Ask", "scope": {"domains": ["**.mall.test"]}}]}, f)
    d = Daemon(tmp, "d", config={"manifest": manifest, "card_timeout_ms": 5000, "batch_window_ms": 300,
                                 "policy_dir": os.path.join(SRC, "policies")})
    names = ["a.pkg.test", "b.pkg.test", "c.pkg.test", "alpha.test", "beta.test", "a.shop.test", "b.shop.test",
             "a.mall.test", "evil.mall.test"]
    cfg = proxy_config(tmp, *names)
    pat = f"*.pkg.test:{up.port}"
    try:
        ctl = Control(d.sock)
        sub = Control(d.sock, timeout=10)
        chk(sub.call(op="subscribe").get("subscribed") is True, "a human surface subscribes")

        # Two siblings: one card, proposing their pattern.
        sid, edir = session(ctl, cfg, "siblings")
        n0 = up.count()
        a = Client(edir, "a.pkg.test", up.port)
        b = Client(edir, "b.pkg.test", up.port)
        cs = wait_cards(d, sid, 1, 2)
        chk(len(cs) == 1 and cs[0].get("attempts") == 2,
            f"two held siblings make one card standing for both ({[(c.get('id'), c.get('attempts')) for c in cs]})")
        card = cs[0] if cs else {}
        chk(card.get("pattern") == pat, f"the card proposes {pat} ({card.get('pattern')})")
        chk([p.get("pattern") for p in card.get("patterns", [])] == [pat] and
            all(p.get("tier") == "ask" for p in card.get("patterns", [])),
            f"its patterns list the proposed one at tier ask ({card.get('patterns')})")
        chk("pattern" in card.get("answers", []), f"pattern is among its answers ({card.get('answers')})")
        time.sleep(0.2)
        chk(a.status is None and b.status is None and up.count() == n0,
            "while the card is open, neither client got an answer and the upstream saw nothing")
        rc, out, err, _ = d.cli("approve", card.get("id", "x"), "--pattern", pat)
        chk(rc == 0, f"shinken approve --pattern ({rc}, {out!r}, {err!r})")
        a.join(10)
        b.join(10)
        chk(a.status == 200 and a.echoed and b.status == 200 and b.echoed,
            f"both held connections completed with the upstream's bytes ({a.status}, {b.status})")
        chk(up.count() == n0 + 2, f"the upstream saw exactly two connections ({up.count() - n0})")

        # A third sibling goes through under the pattern, with no card.
        s, st = proxy_connect(edir, "c.pkg.test", up.port)
        echoed = False
        if st == 200:
            s.sendall(b"ping")
            echoed = s.recv(4) == b"ping"
        s.close()
        chk(st == 200 and echoed, f"a third sibling goes through at once ({st})")
        chk(cards(d, sid) == [], "and raises no card")
        chk(up.count() == n0 + 3, f"the upstream saw it ({up.count() - n0})")
        # A sibling at another port is not covered by the pattern.
        other = Client(edir, "c.pkg.test", up.port + 1 if up.port < 65535 else up.port - 1)
        oc = wait_cards(d, sid, 1, 1)
        chk(len(oc) == 1 and oc[0].get("scope", {}).get("domains") == ["c.pkg.test"],
            f"the same host at another port raises a card of its own ({oc})")
        for c in oc:
            d.cli("cancel", c.get("id", "x"))
        other.join(10)

        # The grant is the pattern, recorded with the card that asked.
        time.sleep(0.3)
        evs = audit_events(d.db)
        grants = [e for e in evs if e.get("event.name") == "grant" and e.get("gen_ai.conversation.id") == sid]
        scopes = [json.loads(e.get("shinken.scope", "{}")) for e in grants]
        chk(len(grants) == 1 and scopes[0].get("domains") == ["*.pkg.test"] and
            scopes[0].get("ports") == [up.port] and grants[0].get("shinken.card.id") == card.get("id"),
            f"one grant, of the pattern, naming the card ({[(e.get('shinken.scope'), e.get('shinken.card.id')) for e in grants]})")
        res = [e for e in evs if e.get("event.name") == "card-resolved" and e.get("shinken.card.id") == card.get("id")]
        chk(len(res) == 1 and res[0].get("shinken.outcome") == "approved-pattern" and
            pat in res[0].get("shinken.reason", ""),
            f"the card's resolution is recorded as approved-pattern ({res})")

        # Control: no common parent below the top-level label, so two cards
        # and no pattern.
        sid2, edir2 = session(ctl, cfg, "unrelated")
        n1 = up.count()
        x = Client(edir2, "alpha.test", up.port)
        y = Client(edir2, "beta.test", up.port)
        cs = wait_cards(d, sid2, 2, 2)
        chk(len(cs) == 2 and all(c.get("attempts") == 1 for c in cs),
            f"two unrelated hosts make two cards ({[(c.get('scope'), c.get('attempts')) for c in cs]})")
        chk(all(not c.get("pattern") and c.get("patterns") == [] and "pattern" not in c.get("answers", [])
                for c in cs), f"neither proposes a pattern ({[(c.get('pattern'), c.get('patterns')) for c in cs]})")
        for c in cs:
            rc, out, err, _ = d.cli("approve", c.get("id", "x"), "--pattern", f"*.test:{up.port}")
            chk(rc != 0 and "pattern" in err, f"a pattern is refused on a card that proposes none ({rc}, {err!r})")
            d.cli("deny", c.get("id", "x"), "--reason", "not needed")
        x.join(10)
        y.join(10)
        chk(x.status == 403 and y.status == 403 and up.count() == n1,
            f"both were refused and the upstream saw neither ({x.status}, {y.status})")

        # Control: a pattern the manifest does not allow is not offered.
        sid3, edir3 = session(ctl, cfg, "forbidden")
        n2 = up.count()
        p = Client(edir3, "a.shop.test", up.port)
        q = Client(edir3, "b.shop.test", up.port)
        cs = wait_cards(d, sid3, 2, 2)
        chk(len(cs) == 2 and all(not c.get("pattern") and c.get("patterns") == [] for c in cs),
            f"siblings whose pattern the manifest does not allow make two cards with no pattern "
            f"({[(c.get('scope'), c.get('pattern'), c.get('attempts')) for c in cs]})")
        for c in cs:
            rc, out, err, _ = d.cli("approve", c.get("id", "x"), "--pattern", f"*.shop.test:{up.port}")
            chk(rc != 0, f"approving *.shop.test is refused ({rc}, {err!r})")
            d.cli("cancel", c.get("id", "x"))
        p.join(10)
        q.join(10)
        chk(p.status == 403 and q.status == 403 and up.count() == n2,
            f"both were refused and the upstream saw neither ({p.status}, {q.status})")

        # Control: a pattern that would cover a blocked name is not offered,
        # and the blocked name stays refused.
        sid4, edir4 = session(ctl, cfg, "blocked-inside")
        n3 = up.count()
        m = Client(edir4, "a.mall.test", up.port)
        cs = wait_cards(d, sid4, 1, 1)
        chk(len(cs) == 1 and not cs[0].get("pattern") and cs[0].get("patterns") == [],
            f"no pattern is offered that would cover a Block-tier name ({[(c.get('pattern'), c.get('patterns')) for c in cs]})")
        for c in cs:
            rc, out, err, _ = d.cli("approve", c.get("id", "x"), "--pattern", f"*.mall.test:{up.port}")
            chk(rc != 0, f"approving *.mall.test is refused ({rc}, {err!r})")
            d.cli("approve", c.get("id", "x"), "--session")
        m.join(10)
        chk(m.status == 200 and up.count() == n3 + 1, f"the exact host, approved for the session, went on ({m.status})")
        s, st = proxy_connect(edir4, "evil.mall.test", up.port)
        s.close()
        chk(st == 403 and up.count() == n3 + 1 and cards(d, sid4) == [],
            f"the blocked sibling is refused at once with no card ({st})")
    finally:
        d.stop()
        up.close()
        shutil.rmtree(tmp, ignore_errors=True)
    chk.finish()


if __name__ == "__main__":
    main()

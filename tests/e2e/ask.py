#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Ask loop, end to end: a connection the policy answers Ask for is
held at the session's proxy, a card is raised in the manager, and a human's
answer from the CLI (`shinken approve`, `deny`, `cancel`) or the card's
timeout releases the same client connection.

A real daemon, real clients on the session's proxy socket, and a loopback
upstream that counts every connection it accepts: what the client reads and
what the upstream saw are judged from outside the manager. The default
manifest puts **.test at Ask. The control: a session opened with "ask":
false refuses the same connection at once, and no card is raised."""
import json
import os
import shutil
import subprocess
import tempfile
import time

from mgrlib import SHINKEN, Checks, Client, Control, Daemon, Upstream, audit_events, cards, proxy_config, wait_event

chk = Checks()


def wait_card(d, sid, timeout=10, attempts=1):
    """The session's open card, once it stands for `attempts` attempts."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        cs = cards(d, sid)
        if cs and cs[0].get("attempts", 0) >= attempts:
            return cs[0]
        time.sleep(0.05)
    return None


def session(ctl, cfg, name, **kw):
    a = ctl.call(op="open_session", name=name, egress=True, proxy_config=cfg, **kw)
    chk(a.get("ok") is True, f"open_session {name}: {a}")
    return a.get("session", "x"), a.get("egress_dir", "/nonexistent")


def main():
    tmp = tempfile.mkdtemp(prefix="shk-ask-")
    up = Upstream()
    # A short timeout, so that the timeout case does not wait two minutes.
    d = Daemon(tmp, "d", config={"card_timeout_ms": 3000})
    cfg = proxy_config(tmp, "api.test", "other.test")
    try:
        ctl = Control(d.sock)

        # A harness's subscriber: the stream of card events follows its
        # answer on the same connection.
        sub = Control(d.sock, timeout=10)
        chk(sub.call(op="subscribe").get("subscribed") is True, "subscribe is answered")
        chk(sub.call(op="subscribe").get("ok") is False, "a connection subscribes once")

        # Approve once: the held connection goes on, on the same client
        # connection, and the upstream sees exactly that one.
        sid, edir = session(ctl, cfg, "once")
        n0 = up.count()
        c = Client(edir, "api.test", up.port)
        card = wait_card(d, sid)
        chk(card is not None, "a card is raised for the held connection")
        card = card or {}
        chk(card.get("class") == "net.egress" and card.get("scope", {}).get("domains") == ["api.test"]
            and card.get("scope", {}).get("ports") == [up.port] and card.get("tier") == "ask",
            f"the card names the class, the exact host and port, and the tier ({card})")
        chk(card.get("session", {}).get("name") == sid and card.get("expires_ms", 0) > card.get("raised_ms", 0),
            "the card names its session and when it times out")
        time.sleep(0.3)
        chk(c.status is None and up.count() == n0, "while the card is open, the client got nothing and the "
            "upstream saw nothing")
        rc, out, err, _ = d.cli("approve", card.get("id", "x"), "--once")
        chk(rc == 0, f"shinken approve --once ({rc}, {out!r}, {err!r})")
        c.join(10)
        chk(c.status == 200 and c.echoed, f"the held connection completed with the upstream's bytes ({c.status})")
        chk(up.count() == n0 + 1, f"the upstream saw exactly one connection ({up.count() - n0})")
        lines = []
        try:
            while not any(l.get("event") == "resolved" for l in lines):
                lines.append(json.loads(sub.f.readline()))
        except (OSError, ValueError):
            pass
        raised = [l for l in lines if l.get("event") == "raised"]
        resolved = [l for l in lines if l.get("event") == "resolved"]
        chk(raised and raised[0].get("card", {}).get("id") == card.get("id"),
            f"the subscriber got the card as it was raised ({lines[:1]})")
        chk(resolved and resolved[0].get("card") == card.get("id") and resolved[0].get("by", {}).get("surface") == "cli",
            f"and its resolution, with who answered ({resolved[:1]})")
        # Once means once: the next attempt is held again, on a new card.
        c2 = Client(edir, "api.test", up.port)
        card2 = wait_card(d, sid)
        chk(card2 is not None and card2.get("id") != card.get("id"), "after once, the next attempt raises a new card")
        rc, _, _, _ = d.cli("cancel", (card2 or {}).get("id", "x"))
        c2.join(10)
        chk(rc == 0 and c2.status == 403 and up.count() == n0 + 1, f"cancel refuses it ({c2.status})")
        chk(b"X-Shinken-Decision: held-denied" in c2.head, f"the refusal says it was held ({c2.head!r})")
        # Nothing of this card remains open; a card that is gone cannot be answered.
        rc, _, err, _ = d.cli("approve", card.get("id", "x"))
        # It is bad input (1), not a refusal: no decision said no.
        chk(rc == 1 and "no" in err, f"a resolved card cannot be answered again ({rc}, {err!r})")

        # Deny with a reason: the agent reads it, the upstream sees nothing,
        # and the same request is refused at once from then on, with no card.
        sid, edir = session(ctl, cfg, "deny")
        fol = subprocess.Popen([SHINKEN, "approvals", sid, "-f", "--json"], stdout=subprocess.PIPE, text=True,
                               env=d.env)
        n0 = up.count()
        c = Client(edir, "api.test", up.port)
        card = wait_card(d, sid) or {}
        first = json.loads(fol.stdout.readline() or "{}")
        chk(first.get("event") == "raised" and first.get("card", {}).get("id") == card.get("id"),
            f"shinken approvals -f prints the card as it is raised ({first})")
        rc, _, err, _ = d.cli("deny", card.get("id", "x"), "--reason", "not during the review")
        c.join(10)
        chk(rc == 0 and c.status == 403, f"deny refuses the held connection ({rc}, {err!r}, {c.status})")
        chk(b"not during the review" in c.body, f"the body carries the human's reason ({c.body!r})")
        chk(up.count() == n0, "a denied connection never reached the upstream")
        resolved = json.loads(fol.stdout.readline() or "{}")
        chk(resolved.get("event") == "resolved" and resolved.get("result") == "denied",
            f"and then its resolution ({resolved})")
        fol.kill()
        fol.wait()
        t0 = time.monotonic()
        c = Client(edir, "api.test", up.port)
        c.join(10)
        chk(c.status == 403 and c.done_at - t0 < 2 and not cards(d, sid),
            f"the denied request is refused at once, with no new card ({c.status})")

        # Approve for the session: this attempt and the later ones go through
        # with no card.
        sid, edir = session(ctl, cfg, "sess")
        n0 = up.count()
        c = Client(edir, "api.test", up.port)
        card = wait_card(d, sid) or {}
        rc, _, err, _ = d.cli("approve", card.get("id", "x"), "--session")
        c.join(10)
        chk(rc == 0 and c.status == 200 and c.echoed, f"approve --session lets the held connection on ({err!r})")
        c = Client(edir, "api.test", up.port)
        c.join(10)
        chk(c.status == 200 and c.echoed and not cards(d, sid), "the next attempt needs no card")
        chk(up.count() == n0 + 2, "the upstream saw the two connections")

        # Three concurrent attempts at the same destination join one card;
        # approving it once releases each of them.
        sid, edir = session(ctl, cfg, "batch")
        n0 = up.count()
        cs = [Client(edir, "other.test", up.port) for _ in range(3)]
        card = wait_card(d, sid, attempts=3)
        chk(card is not None and len(cards(d, sid)) == 1, "three concurrent attempts raise one card")
        d.cli("approve", (card or {}).get("id", "x"), "--once")
        for c in cs:
            c.join(10)
        chk(all(c.status == 200 and c.echoed for c in cs) and up.count() == n0 + 3,
            f"each held attempt went on ({[c.status for c in cs]}, {up.count() - n0})")

        # A grant issued by any path releases what it covers: `shinken
        # grant --approve` while a connection is held.
        sid, edir = session(ctl, cfg, "grant")
        c = Client(edir, "api.test", up.port)
        chk(wait_card(d, sid) is not None, "held again in a new session")
        rc, out, err, _ = d.cli("grant", sid, "net.egress", "--scope", '{"domains":["api.test"]}', "--approve")
        c.join(10)
        chk(rc == 0 and c.status == 200 and c.echoed, f"a grant releases the held connection it covers ({err!r})")

        # Timeout: nobody answers, the client is refused and told so.
        sid, edir = session(ctl, cfg, "timeout")
        n0 = up.count()
        t0 = time.monotonic()
        c = Client(edir, "api.test", up.port)
        chk(wait_card(d, sid) is not None, "a card for the timeout case")
        c.join(15)
        chk(c.status == 403 and c.done_at - t0 >= 2.5 and up.count() == n0,
            f"the card's timeout refuses the held connection ({c.status}, {c.done_at and c.done_at - t0})")
        chk(b"timed out" in c.body or b"no human" in c.body.lower(), f"the body says it timed out ({c.body!r})")

        # The control: with the Ask loop off the same connection is refused
        # at once and raises no card.
        sid, edir = session(ctl, cfg, "noask", ask=False)
        t0 = time.monotonic()
        c = Client(edir, "api.test", up.port)
        c.join(10)
        chk(c.status == 403 and c.done_at - t0 < 2 and not cards(d, sid),
            f"ask: false refuses at once with no card ({c.status})")
        chk(ctl.call(op="open_session", ask="yes").get("ok") is False, "ask must be a boolean")
        # A launcher's account of its sandbox: malformed is refused, and
        # never for a session that does not exist.
        for bad in ({"started": "yes"}, {"started": True, "enforced": "seccomp"}, {"started": True, "signal": 99},
                    {"started": True, "exit_status": "0"}):
            chk(ctl.call(op="sandbox_ran", session=sid, **bad).get("ok") is False, f"sandbox_ran refuses {bad}")
        chk(ctl.call(op="sandbox_ran", session="nope", started=False).get("ok") is False,
            "sandbox_ran needs a session that exists")

        # The timeline: raised, resolved by whom, and the proxy's verdicts.
        ev = wait_event(d.db, lambda e: e["event.name"] == "card-resolved" and e.get("shinken.outcome") == "denied")
        chk(ev is not None and ev.get("shinken.human.surface") == "cli" and ev.get("shinken.human.uid") == os.getuid()
            and isinstance(ev.get("process.pid"), int) and ev.get("shinken.reason") == "not during the review",
            f"the denial is recorded with who gave it and why ({ev})")
        evs = audit_events(d.db)
        chk(any(e["event.name"] == "card-raised" and e.get("shinken.card.id") == card.get("id") for e in evs),
            "each card's raising is recorded")
        chk(any(e["event.name"] == "card-resolved" and e.get("shinken.outcome") == "timed-out" for e in evs),
            "the timeout is recorded as timed out, not as a denial")
        chk(any(e["event.name"] == "grant" and e.get("shinken.lifetime") == "once" and e.get("shinken.card.id")
                and e.get("shinken.outcome") == "granted" for e in evs),
            "an approved card's handle is granted through the grant path, naming the card")
        chk(any(e["event.name"] == "proxy-verdict" and e.get("shinken.decision") == "hold" for e in evs)
            and any(e["event.name"] == "proxy-verdict" and e.get("shinken.reason") == "held-denied" for e in evs),
            "the proxy's holds and their refusals are on the timeline")
        sub.close()
        ctl.close()
    finally:
        d.stop()
        up.close()
        shutil.rmtree(tmp, ignore_errors=True)
    chk.finish()


main()

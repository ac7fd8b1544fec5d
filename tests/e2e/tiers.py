#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The Auto and Notify tiers of the Ask loop, end to end: a connection no
handle covers, to a destination the manifest puts at Auto or Notify, gets
a session handle with no human and goes on, on the same client connection;
Notify also tells every human surface (a "notice" line on the card stream,
naming the handle and the revoke that undoes it); a revoke then sticks for
the session. Judged from outside the manager: what the client read, what a
loopback upstream saw, the card stream, the handles and the audit store.

Controls: an Ask-tier destination is held for a human (a card, not a
handle), a Block-tier one is refused at once with no card, and a session
opened with "ask": false still gets its Auto handle but not its Ask."""
import json
import os
import select
import shutil
import tempfile
import threading
import time

from mgrlib import SRC, Checks, Control, Daemon, Upstream, audit_events, proxy_config, proxy_connect, wait_event

chk = Checks()


def echoes(s):
    try:
        s.sendall(b"ping")
        return s.recv(4) == b"ping"
    except OSError:
        return False
    finally:
        s.close()


def lines_until(sub, pred, timeout=5):
    """Card-stream lines, until one for which pred holds (returned) or the
    timeout (None)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        r, _, _ = select.select([sub.s], [], [], max(0, deadline - time.monotonic()))
        if not r:
            break
        line = sub.f.readline()
        if not line:
            break
        ev = json.loads(line)
        if pred(ev):
            return ev
    return None


def main():
    tmp = tempfile.mkdtemp(prefix="shk-tiers-")
    up = Upstream()
    manifest = os.path.join(tmp, "manifest.json")
    with open(manifest, "w") as f:
        json.dump({"image": "tiers", "capabilities": [
            {"class": "net.egress", "tier": "Auto", "scope": {"domains": ["auto.test"]}},
            {"class": "net.egress", "tier": "Notify", "scope": {"domains": ["notify.test"]}},
            {"class": "net.egress", "tier": "Ask", "scope": {"domains": ["ask.test"]}},
            {"class": "net.egress", "tier": "Block", "scope": {"domains": ["block.test"]}}]}, f)
    d = Daemon(tmp, "d", config={"manifest": manifest, "card_timeout_ms": 3000,
                                 "policy_dir": os.path.join(SRC, "policies")})
    cfg = proxy_config(tmp, "auto.test", "notify.test", "ask.test", "block.test")
    try:
        ctl = Control(d.sock)
        sub = Control(d.sock, timeout=10)
        chk(sub.call(op="subscribe").get("subscribed") is True, "a human surface subscribes")
        a = ctl.call(op="open_session", name="tiers", egress=True, proxy_config=cfg)
        chk(a.get("ok") is True, f"open_session: {a}")
        sid, edir = a.get("session", "x"), a.get("egress_dir", "/nonexistent")

        # Auto: a handle with no human, and the same connection goes on.
        n0 = up.count()
        s, st = proxy_connect(edir, "auto.test", up.port)
        chk(st == 200 and echoes(s), f"auto: the connection goes on with no human ({st})")
        chk(up.count() == n0 + 1, "auto: the upstream saw it")
        g = ctl.call(op="grants", session=sid)
        auto = [h for h in g.get("grants", []) if "auto.test" in json.dumps(h.get("scope"))]
        chk(len(auto) == 1, f"auto: one session handle was issued ({g})")
        s, st = proxy_connect(edir, "auto.test", up.port)
        chk(st == 200 and echoes(s), "auto: the next connection goes under the same handle")
        g = ctl.call(op="grants", session=sid)
        chk(len([h for h in g.get("grants", []) if "auto.test" in json.dumps(h.get("scope"))]) == 1,
            "auto: no second handle")
        ev = wait_event(d.db, lambda e: e["event.name"] == "grant" and e.get("shinken.outcome") == "granted"
                        and "auto.test" in e.get("shinken.scope", ""))
        chk(ev is not None and ev.get("shinken.tier") == "Auto" and "shinken.human.uid" not in ev,
            f"auto: the grant is recorded at tier Auto, with no human ({ev})")
        chk(ctl.call(op="cards", session=sid).get("cards") == [], "auto: no card was raised")

        # Notify: the same, and a notice on the card stream with the revoke.
        s, st = proxy_connect(edir, "notify.test", up.port)
        chk(st == 200 and echoes(s), f"notify: the connection goes on with no human ({st})")
        note = lines_until(sub, lambda e: e.get("event") == "notice")
        chk(note is not None and note.get("session") == sid and note.get("tier") == "notify"
            and note.get("scope", {}).get("domains") == ["notify.test"] and note.get("handle")
            and note.get("revoke") == "shinken revoke " + note.get("handle", ""),
            f"notify: the human surface got a notice with the handle and the revoke ({note})")
        rc, out, err, _ = d.cli("revoke", (note or {}).get("handle", "none"))
        chk(rc == 0, f"notify: the notice's revoke works ({rc} {out} {err})")
        n1 = up.count()
        s, st = proxy_connect(edir, "notify.test", up.port)
        body = s.recv(4096)
        s.close()
        chk(st == 403 and b"revoked" in body, f"notify: after the revoke, the next connection is refused ({st} {body!r})")
        chk(up.count() == n1, "notify: the upstream saw nothing after the revoke")
        chk(lines_until(sub, lambda e: e.get("event") == "notice", timeout=1) is None,
            "notify: no new handle, so no new notice")

        # Auto after a revoke: refused too.
        rc, out, err, _ = d.cli("revoke", auto[0].get("handle", "none") if auto else "none")
        chk(rc == 0, f"auto: revoked ({rc} {err})")
        s, st = proxy_connect(edir, "auto.test", up.port)
        s.close()
        chk(st == 403, f"auto: a revoke sticks for the session ({st})")

        # The controls: Ask is held for a human, Block refused with no card.
        s, st = proxy_connect(edir, "block.test", up.port)
        s.close()
        chk(st == 403 and ctl.call(op="cards", session=sid).get("cards") == [],
            f"block: refused at once, no card ({st})")
        n2 = up.count()
        res = {}

        def held():
            s2, res["st"] = proxy_connect(edir, "ask.test", up.port, timeout=10)
            s2.close()
        t = threading.Thread(target=held, daemon=True)
        t.start()
        card = None
        for _ in range(100):
            cs = ctl.call(op="cards", session=sid).get("cards", [])
            if cs:
                card = cs[0]
                break
            time.sleep(0.05)
        chk(card is not None and card.get("tier") == "ask" and up.count() == n2,
            "ask: held for a human, a card raised, nothing sent upstream")
        t.join(10)
        chk(res.get("st") == 403, f"ask: refused when the card timed out ({res})")

        # A session with "ask": false: Auto still applies, Ask is refused at once.
        b = ctl.call(op="open_session", name="noask", egress=True, proxy_config=cfg, ask=False)
        s, st = proxy_connect(b.get("egress_dir", "/nonexistent"), "auto.test", up.port)
        chk(st == 200 and echoes(s), f"ask false: Auto still issues ({st})")
        t0 = time.monotonic()
        s, st = proxy_connect(b.get("egress_dir", "/nonexistent"), "ask.test", up.port)
        s.close()
        chk(st == 403 and time.monotonic() - t0 < 2 and ctl.call(op="cards", session=b.get("session")).get("cards") == [],
            f"ask false: Ask is refused at once, no card ({st})")
        # Take over needs the session's freezer, which only the embedder
        # of a sandbox has: a daemon's session is refused, saying so.
        rc, out, err, _ = d.cli("takeover", sid)
        chk(rc != 0 and "freez" in err, f"takeover of a daemon's session is refused with the reason ({rc} {err})")
        sub.close()
        ctl.close()
    finally:
        d.stop()
        shutil.rmtree(tmp, True)
    chk.finish()


if __name__ == "__main__":
    main()

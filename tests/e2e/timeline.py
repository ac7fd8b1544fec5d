#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""A session's authority timeline, read back with `shinken audit`.

A real daemon; a session with an egress proxy; a grant the policy asks a
human for, approved with `shinken grant --approve`; a connection that uses
it; the revoke; the next connection, refused; the session's end. Each of
these is found in the store (`shinken audit tail --json`, `show`) with the
fields that say what happened, who asked and who approved; `shinken audit
verify` passes on the store, and (the control) fails on a copy in which one
event was changed."""
import json
import os
import shutil
import sqlite3
import subprocess
import tempfile
import time

from mgrlib import SHINKEN, Checks, Control, Daemon, Upstream, audit_events, proxy_config, proxy_connect, wait_event

chk = Checks()


def one(evs, name, **fields):
    """The events named `name` whose fields have these values."""
    want = {k.replace("__", "."): v for k, v in fields.items()}
    return [e for e in evs if e["event.name"] == name and all(e.get(k) == v for k, v in want.items())]


def main():
    tmp = tempfile.mkdtemp(prefix="shk-timeline-")
    up = Upstream()
    d = Daemon(tmp, "d")
    try:
        ctl = Control(d.sock)
        a = ctl.call(op="open_session", ask=False, name="tl", egress=True, proxy_config=proxy_config(tmp, "api.test"),
                     model="model-x")
        sid, edir = a["session"], a["egress_dir"]
        rc, out, err, _ = d.cli("grant", sid, "net.egress", "--scope", '{"domains":["api.test"]}', "--approve",
                                "--json")
        g = json.loads(out) if rc == 0 else {}
        chk(rc == 0 and g.get("decision") == "granted", f"approved grant ({rc}, {out!r}, {err!r})")
        handle, card, approver = g.get("handle"), g.get("pending"), g.get("resolved_by", {}).get("pid")
        s, st = proxy_connect(edir, "api.test", up.port)
        s.sendall(b"ping")
        chk(st == 200 and s.recv(4) == b"ping", f"the grant is used: a tunnel ({st})")
        rc, out, err, _ = d.cli("revoke", handle or "x", "--json")
        chk(rc == 0 and json.loads(out).get("tunnels_closed") == 1, f"revoked, its tunnel closed ({out!r})")
        s.close()
        s, st = proxy_connect(edir, "api.test", up.port)
        s.close()
        chk(st == 403, f"the next connection is refused ({st})")
        ctl.call(op="close_session", session=sid)
        chk(wait_event(d.db, lambda e: e["event.name"] == "session-close" and e.get("gen_ai.conversation.id") == sid)
            is not None, "the session's end reaches the store")
        evs = audit_events(d.db)
        mine = [e for e in evs if e.get("gen_ai.conversation.id") == sid]
        p = subprocess.run([SHINKEN, "audit", "tail", "--db", d.db, "-n", "0", "--json", "--session", sid],
                           capture_output=True, text=True, timeout=30)
        chk([json.loads(l) for l in p.stdout.splitlines()] == mine, "audit tail --session shows the session's events")
        me = {"process.pid": os.getpid(), "shinken.human.uid": os.getuid(), "shinken.human.surface": "control"}
        opened = one(mine, "session-open", gen_ai__request__model="model-x", shinken__outcome="opened")
        chk(len(opened) == 1 and all(opened[0].get(k) == v for k, v in me.items()),
            f"session-open, with the model and who opened it ({opened})")
        asked = one(mine, "decision", shinken__decision="ask", shinken__tier="Ask",
                    shinken__policy__id="project-manifest-tiers", shinken__class="net.egress")
        chk(len(asked) == 1 and "api.test" in asked[0].get("shinken.scope", "") and asked[0].get("shinken.reason"),
            f"the decision to ask, with policy, tier, scope and reason ({asked})")
        chk(len(one(mine, "card-raised", shinken__card__id=card, shinken__decision="ask")) == 1,
            "the pending request raised, by its id")
        cli_exe = os.path.realpath(SHINKEN)
        resolved = one(mine, "card-resolved", shinken__card__id=card, shinken__outcome="approved",
                       process__pid=approver, process__executable__path=cli_exe, shinken__human__uid=os.getuid())
        chk(len(resolved) == 1, f"approved by the CLI's process, by pid, uid and program ({one(mine, 'card-resolved')})")
        chk(len(one(mine, "decision", shinken__decision="allow", shinken__card__id=card)) == 1,
            "decided again with the human's answer")
        granted = one(mine, "grant", shinken__outcome="granted", shinken__handle__id=handle, shinken__card__id=card,
                      shinken__lifetime="session")
        chk(len(granted) == 1, f"the grant, naming its handle ({one(mine, 'grant')})")
        used = one(mine, "egress-check", shinken__decision="allow", shinken__handle__id=handle,
                   server__address="api.test", server__port=up.port, shinken__egress__protocol="connect")
        chk(len(used) == 1 and used[0].get("shinken.egress.rule", "").startswith("handle:"),
            f"the connection the handle allowed, by host and port ({used})")
        revoked = one(mine, "revoke", shinken__handle__id=handle, shinken__outcome="revoked", shinken__count=1)
        chk(len(revoked) == 1 and revoked[0].get("process.pid") not in (None, os.getpid()),
            f"the revoke, with the tunnel it closed and who asked ({revoked})")
        after = [e for e in one(mine, "egress-check", shinken__decision="none", server__address="api.test")
                 if revoked and e["seq"] > revoked[0]["seq"]]
        chk(len(after) == 1 and "shinken.handle.id" not in after[0],
            f"the refused connection after it: no handle had an opinion ({after})")
        chk(len(one(mine, "session-close", shinken__reason="closed by request", **{"shinken__count": 1})) == 1,
            "the session's end, with the handles it took away")
        chk(all(len(e["time"]) == 30 and e["time"].endswith("Z") for e in evs), "every event has its time, to the ns")
        chk(not any("event_log" in json.dumps(e) or "/" in e.get("server.address", "") for e in evs),
            "no path in a destination")
        # One event, shown by its sequence number.
        if granted:
            p = subprocess.run([SHINKEN, "audit", "show", "--db", d.db, str(granted[0]["seq"])], capture_output=True,
                               text=True, timeout=30)
            chk(p.returncode == 0 and handle in p.stdout, f"audit show prints the grant ({p.stdout!r})")
        # The proxy's verdicts are events of the same timeline: its refusal
        # of api.test, with the reason the client was given.
        chk(wait_event(d.db, lambda e: e["event.name"] == "proxy-verdict" and e.get("shinken.decision") == "deny"
                       and e.get("server.address") == "api.test" and e.get("shinken.reason")) is not None,
            "the proxy's refusal is a proxy-verdict event of the timeline")
        ctl.close()
    finally:
        d.stop()
        up.close()
    try:
        p = subprocess.run([SHINKEN, "audit", "verify", "--db", d.db], capture_output=True, text=True, timeout=60)
        print(p.stdout.strip())
        chk(p.returncode == 0, f"audit verify passes on the store ({p.returncode}, {p.stdout!r} {p.stderr!r})")
        # The control: the same check fails on a copy with one event changed.
        bad = os.path.join(tmp, "bad.db")
        shutil.copy(d.db, bad)
        shutil.copy(os.path.join(os.path.dirname(d.db), "audit.key"), os.path.join(tmp, "audit.key"))
        db = sqlite3.connect(bad)
        n = db.execute("UPDATE events SET entry = replace(entry, 'api.test', 'api.tesu') "
                       "WHERE seq = (SELECT min(seq) FROM events WHERE entry LIKE '%api.test%')").rowcount
        db.commit()
        db.close()
        p = subprocess.run([SHINKEN, "audit", "verify", "--db", bad], capture_output=True, text=True, timeout=60)
        chk(n == 1 and p.returncode == 3, f"control: verify finds a changed event ({n}, {p.returncode}, {p.stdout!r})")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    chk.finish()


main()

# SPDX-License-Identifier: Apache-2.0
"""The secret broker, end to end: `shinken run --net proxy` with inspected
grants to api.test and other.test (a local HTTPS upstream with its own
test CA, trusted through upstream_ca) and a credentials grant for the
secret github:read, bound to api.test. What reached the upstream is judged
from the upstream's own log, outside the sandbox: the brokered header
arrives, the client's own Authorization and the sentinel never do; the
sentinel sent to other.test is refused and other.test got nothing (its
control: the same request without the sentinel arrives); after the
credentials handle is revoked nothing is injected. Then the secret's
bytes are looked for everywhere they must not be: the audit store and its
export, the daemon's output, the sandbox's files, the environment and
memory of a sandboxed process, and a core dump of the daemon."""
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from lib import scratch, skip  # noqa: E402
from mgrlib import SHINKEN, Checks, Daemon, audit_events  # noqa: E402
from mitm import Log, TLSServer, make_handler, make_pki, serve  # noqa: E402

chk = Checks()
TOKEN = "ghp_R3alS3cretT0kenValue0123456789abcdXY"


def proc_memory_has(pid, needle):
    """Whether NEEDLE is in any readable mapping of PID (as root)."""
    found = False
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb", 0) as mem:
        for line in maps:
            m = re.match(r"([0-9a-f]+)-([0-9a-f]+) r", line)
            if not m or "[vvar]" in line or "[vsyscall]" in line:
                continue
            a, b = int(m.group(1), 16), int(m.group(2), 16)
            # A sanitizer build's stage 2 reserves terabytes of shadow,
            # which holds the sanitizer's bookkeeping, never data.
            if SANITIZED and b - a > 1 << 32:
                continue
            # In chunks, overlapping by the needle's length, so that a
            # large mapping is never read into memory at once.
            step = 1 << 24
            for off in range(a, b, step):
                try:
                    mem.seek(off)
                    if needle in mem.read(min(step + len(needle), b - off)):
                        found = True
                except OSError:
                    break
    return found


# A sanitizer build maps terabytes of shadow memory, which gcore cannot
# dump in any useful time: the core dump checks are made against the
# release build, whose run of this same test (CI runs the e2e suite against
# it as well) is the one that judges them.
SANITIZED = b"libasan.so" in open(os.environ["SHINKEN"], "rb").read()


def core_has(pid, needle, tmp, control=None):
    """Forces a core dump of PID (gcore) and says whether NEEDLE (and
    CONTROL) are in it; None when no dump could be made."""
    core = os.path.join(tmp, "core")
    g = subprocess.run(["gcore", "-o", core, str(pid)], capture_output=True, text=True, timeout=120)
    cores = glob.glob(core + "*")
    if g.returncode != 0 or not cores:
        print(f"gcore could not dump {pid}: {g.stderr[-200:]!r}", file=sys.stderr)
        return (None, None) if control is not None else None
    with open(cores[0], "rb") as f:
        data = f.read()
    for c in cores:
        os.unlink(c)
    if control is None:
        return needle in data
    return needle in data, bool(control) and control in data


def main():
    for tool in ("openssl", "curl", "gcore"):
        if not shutil.which(tool):
            skip(f"{tool} is not installed")
    if os.geteuid() != 0:
        skip("reading the memory of sandboxed processes and forcing a core dump needs root")
    tmp = scratch("shk-broker-")
    os.chmod(tmp, 0o755)
    pki = os.path.join(tmp, "pki")
    os.mkdir(pki)
    ca, cert, _bad, _pin = make_pki(pki)
    root = os.path.join(tmp, "www")
    os.mkdir(root)
    log = Log()
    srv, port = serve(log, root, cert)
    # A plain-HTTP upstream: the secret must never be sent to it.
    plog = Log()
    psrv = TLSServer(("127.0.0.1", 0), make_handler(plog, root))
    threading.Thread(target=psrv.serve_forever, daemon=True).start()
    pport = psrv.server_address[1]

    xdg = os.path.join(tmp, "xdg")
    os.makedirs(xdg, mode=0o700)
    base_env = dict(os.environ, XDG_STATE_HOME=xdg, ASAN_OPTIONS="detect_leaks=0")
    base_env.pop("XDG_RUNTIME_DIR", None)
    # The store: the value on standard input, never on the command line.
    p = subprocess.run([SHINKEN, "secret", "add", "github:read", "--host", "api.test", "--env", "GH_TOKEN"],
                       input=TOKEN + "\n", capture_output=True, text=True, env=base_env, timeout=30)
    chk(p.returncode == 0, f"secret add ({p.returncode}, {p.stderr!r})")
    p = subprocess.run([SHINKEN, "secret", "list"], capture_output=True, text=True, env=base_env, timeout=30)
    chk(p.returncode == 0 and "github:read" in p.stdout and TOKEN not in p.stdout and "R3al" not in p.stdout,
        f"secret list names the secret and never its value ({p.stdout!r})")
    p = subprocess.run([SHINKEN, "secret", "add", "x", TOKEN, "--host", "api.test"], capture_output=True,
                       text=True, env=base_env, timeout=30)
    chk(p.returncode == 64 and TOKEN not in p.stderr, f"a value on the command line is refused ({p.stderr!r})")

    pcfg = os.path.join(tmp, "proxy.json")
    with open(pcfg, "w") as f:
        json.dump({"allow_private_cidrs": ["127.0.0.1/32"],
                   "hosts": {n: ["127.0.0.1"] for n in ("api.test", "other.test")}, "upstream_ca": ca}, f)
    standing = os.path.join(tmp, "standing.json")
    with open(standing, "w") as f:
        json.dump([{"class": "net.egress", "scope": {"domains": [f"api.test:{port}"], "tls_inspect": True}},
                   {"class": "net.egress", "scope": {"domains": [f"other.test:{port}"], "tls_inspect": True}},
                   {"class": "net.egress", "scope": {"domains": [f"api.test:{pport}", f"other.test:{pport}"]}}],
                  f)
    d = Daemon(tmp, "d", {"standing": standing}, env=base_env)
    work = os.path.join(tmp, "work")
    os.mkdir(work)
    env = dict(d.env)
    api, other = f"https://api.test:{port}", f"https://other.test:{port}"
    # The workload: requests before the revoke, a pause the test ends by
    # creating "go", then one request after it; a sleeper to inspect.
    script = f"""
        echo "$GH_TOKEN" > sentinel
        touch started
        while [ ! -f granted ]; do sleep 0.1; done
        curl -sS -o /dev/null -H 'Authorization: Bearer client-own' '{api}/hello?n=1'
        curl -sS -o /dev/null -H "X-Key: $GH_TOKEN" '{api}/hello?n=2'
        curl -sS -o /dev/null -w '%{{http_code}}' -H "Authorization: Bearer $GH_TOKEN" '{other}/hello?n=3' > other.code
        curl -sS -o /dev/null -H 'Authorization: Bearer client-own' '{other}/hello?n=4'
        curl -sS -o /dev/null -w '%{{http_code}}' "{other}/hello?t=$GH_TOKEN&n=3q" > otherq.code
        curl -sS -o /dev/null -w '%{{http_code}}' "http://other.test:{pport}/q/$GH_TOKEN?n=p3" > plain-otherq.code
        curl -sS -o /dev/null -w '%{{http_code}}' -H 'Authorization: Bearer client-own' 'http://api.test:{pport}/hello?n=p1' > plain.code
        curl -sS -o /dev/null -w '%{{http_code}}' 'http://other.test:{pport}/hello?n=p2' > plain-other.code
        sleep 300 & echo $! > sleeper.pid
        touch ready
        while [ ! -f go ]; do sleep 0.1; done
        curl -sS -o /dev/null -w '%{{http_code}}' -H 'Authorization: Bearer client-own' '{api}/hello?n=5' > after.code
        kill %1
        touch done
    """
    run = subprocess.Popen([SHINKEN, "run", "--allow-degraded", "--net", "proxy", "--proxy-config", pcfg, "--",
                            "/bin/sh", "-c", script], cwd=work, env=env, stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE, text=True)
    try:
        # The credentials grant, once the session exists.
        sid = None
        for _ in range(200):
            rc, out, _err, _t = d.cli("sessions", "--json")
            ss = json.loads(out or "[]") if rc == 0 else []
            ss = ss.get("sessions", ss) if isinstance(ss, dict) else ss
            if ss:
                sid = ss[0].get("id") or ss[0].get("session")
                break
            time.sleep(0.05)
        chk(sid is not None, "the run's session is listed")
        rc, out, err, _t = d.cli("grant", sid, "credentials", "--scope",
                                 '{"broker_scopes": ["github:read"], "never_raw": true}', "--approve", "--json")
        ans = json.loads(out or "{}")
        handle = ans.get("handle")
        chk(handle is not None, f"the credentials grant is given ({out!r} {err!r})")
        # A core dump of the daemon, forced once the grant has loaded the
        # secret into the broker: its locked, undumpable pages are left out.
        # Control: the session's sentinels, in ordinary memory, are in it.
        sentinel_early = ""
        for _ in range(200):
            if os.path.exists(os.path.join(work, "started")):
                sentinel_early = open(os.path.join(work, "sentinel")).read().strip()
                break
            time.sleep(0.05)
        if SANITIZED:
            print("# core dumps: checked by the release build's run (a sanitizer build cannot be dumped in time)")
        else:
            has_token, has_sentinel = core_has(d.p.pid, TOKEN.encode(), tmp, sentinel_early.encode())
            chk(has_token is False, "the daemon's core dump holds no secret")
            chk(has_sentinel is True, "control: the core dump holds the broker's ordinary memory (the sentinel)")
        open(os.path.join(work, "granted"), "w").close()
        # Hold the workload until the grant is there: it waits for "ready"
        # only after its first requests, so grant before it starts them.
        for _ in range(600):
            if os.path.exists(os.path.join(work, "ready")) or run.poll() is not None:
                break
            time.sleep(0.05)
        chk(os.path.exists(os.path.join(work, "ready")), f"the workload got to its pause ({run.poll()})")
        reqs = {re.sub(r".*n=", "", r["path"]): r for r in log.find(lambda r: "n=" in r["path"])}
        sentinel = open(os.path.join(work, "sentinel")).read().strip() if os.path.exists(
            os.path.join(work, "sentinel")) else ""
        chk(len(sentinel) == len(TOKEN) and sentinel.startswith("ghp_") and sentinel != TOKEN,
            f"the sandbox's GH_TOKEN is a sentinel of the secret's shape ({len(sentinel)} bytes)")
        r1 = reqs.get("1", {})
        chk(r1.get("auth") == "Bearer " + TOKEN, "the upstream got the brokered Authorization")
        chk("client-own" not in json.dumps(r1, default=str), "the client's own Authorization was stripped")
        chk(sentinel and sentinel not in json.dumps(log.requests, default=str),
            "the upstream never saw the sentinel")
        r2 = reqs.get("2")
        chk(r2 is not None and r2.get("auth") == "Bearer " + TOKEN, "a request carrying the sentinel got the secret")
        code3 = open(os.path.join(work, "other.code")).read().strip()
        chk(code3 == "403" and "3" not in reqs, f"the sentinel sent to other.test is refused ({code3}) and "
            "other.test got nothing")
        chk("4" in reqs and reqs["4"].get("auth") == "Bearer client-own",
            "control: other.test gets a request without the sentinel as sent")
        # In the request line (a query, a path) it is refused the same way,
        # over TLS and over plain HTTP; the control is request 4 and p2.
        codeq = open(os.path.join(work, "otherq.code")).read().strip()
        chk(codeq == "403" and "3q" not in reqs and not log.find(lambda r: "n=3q" in r["path"]),
            f"the sentinel in the query to other.test is refused ({codeq}) and other.test got nothing")

        # Plain HTTP to the secret's host: refused, since the secret was not
        # added with --allow-plain-http; the plain upstream got nothing.
        # Control: plain HTTP to another host goes through.
        pcode = open(os.path.join(work, "plain.code")).read().strip()
        chk(pcode == "403" and not plog.find(lambda r: "n=p1" in r["path"]),
            f"plain HTTP to the secret's host is refused ({pcode}) and reached nothing")
        pcode2 = open(os.path.join(work, "plain-other.code")).read().strip()
        chk(pcode2 == "200" and plog.find(lambda r: "n=p2" in r["path"]),
            f"control: plain HTTP to another host goes through ({pcode2})")
        pcodeq = open(os.path.join(work, "plain-otherq.code")).read().strip()
        chk(pcodeq == "403" and not plog.find(lambda r: "n=p3" in r["path"]),
            f"the sentinel in a plain-HTTP path to another host is refused ({pcodeq}) and reached nothing")

        # The sandboxed process: its environment and memory hold the
        # sentinel at most, never the secret.
        pid_in = int(open(os.path.join(work, "sleeper.pid")).read())
        host_pids = [p for p in os.listdir("/proc") if p.isdigit()]
        sandboxed = {}
        for p in host_pids:
            try:
                environ = open(f"/proc/{p}/environ", "rb").read()
            except OSError:
                continue
            if sentinel.encode() in environ:
                sandboxed[int(p)] = environ
        chk(sandboxed, f"a sandboxed process (pid {pid_in} inside) is found by its environment")
        # A process that ends while it is read (a short-lived tool of the
        # workload) is passed over; the long-lived ones must be read whole.
        read_whole = 0
        for p, environ in sandboxed.items():
            chk(TOKEN.encode() not in environ, f"process {p}'s environment holds no secret")
            try:
                chk(not proc_memory_has(p, TOKEN.encode()), f"process {p}'s memory holds no secret")
                read_whole += 1
            except (FileNotFoundError, ProcessLookupError):
                pass
        chk(read_whole > 0, "the memory of at least one sandboxed process was read whole")

        # After brokered requests too: the proxy wipes the heads it sent.
        if not SANITIZED:
            chk(core_has(d.p.pid, TOKEN.encode(), tmp) is False,
                "the daemon's core dump after brokered requests holds no secret")
        # Revoke: the next request is not injected (its connection closes).
        rc, out, err, _t = d.cli("revoke", handle, "--json")
        chk(rc == 0, f"revoke ({out!r} {err!r})")
        n_before = len(log.requests)
        open(os.path.join(work, "go"), "w").close()
        run.wait(timeout=120)
        code5 = open(os.path.join(work, "after.code")).read().strip() if os.path.exists(
            os.path.join(work, "after.code")) else "?"
        after = log.requests[n_before:]
        chk(all(TOKEN not in json.dumps(r, default=str) for r in after),
            f"after the revoke nothing is injected ({code5})")
        chk(code5 != "200" or all(r.get("auth") == "Bearer client-own" for r in after),
            "after the revoke the request does not go out with the secret")
    finally:
        if run.poll() is None:
            run.kill()
            run.wait()
        out, err = run.communicate() if run.stdout else ("", "")
    d.stop()
    dout, derr = d.p.stdout.read(), d.p.stderr.read()
    srv.shutdown()
    psrv.shutdown()

    # The audit: "credential github:read brokered for api.test", never the value.
    evs = audit_events(d.db, env=base_env)
    brokered = [e for e in evs if e.get("event.name") == "credential-brokered"]
    refused = [e for e in evs if e.get("event.name") == "credential-refused"]
    text = json.dumps(evs)
    chk(brokered and "github:read" in json.dumps(brokered) and "api.test" in json.dumps(brokered),
        "the audit records the credential brokered for api.test")
    chk(refused and "other.test" in json.dumps(refused), "the audit records the refused sentinel")
    exp = subprocess.run([SHINKEN, "audit", "export", "--db", d.db, "--format", "jsonl"], capture_output=True,
                         text=True, env=base_env, timeout=60)
    with open(d.db, "rb") as f:
        db_bytes = f.read()
    wal = d.db + "-wal"
    if os.path.exists(wal):
        db_bytes += open(wal, "rb").read()
    for what, data in (("the audit events", text), ("the audit export", exp.stdout), ("the audit store", db_bytes),
                       ("the daemon's output", dout + derr), ("the run's output", (out or "") + (err or ""))):
        if isinstance(data, str):
            data = data.encode()
        chk(TOKEN.encode() not in data, f"{what} hold no secret")
    leaked = []
    for dirpath, _dirs, files in os.walk(work):
        for name in files:
            with open(os.path.join(dirpath, name), "rb") as f:
                if TOKEN.encode() in f.read():
                    leaked.append(name)
    chk(not leaked, f"the sandbox's files hold no secret ({leaked})")
    # Control: the store's plaintext is not on disk, but the value is real.
    store = open(os.path.join(xdg, "shinken", "broker", "secrets"), "rb").read()
    chk(TOKEN.encode() not in store, "the store holds the value encrypted only")
    chk.finish()


if __name__ == "__main__":
    main()

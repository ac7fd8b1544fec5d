#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""The control socket is never inside a sandbox's reach.

Judged from outside: a command that would create a marker file in its
working directory either runs (the marker is there) or is refused before it
runs (no marker, and no socket appeared in the workspace), each refusal
beside a control run that differs only in where the socket is:

- a daemon whose socket lies inside the run's writable root refuses the
  run's session (`shinken run --net proxy` connects to it);
- a run with no daemon, whose embedded manager would put its socket under
  an XDG_RUNTIME_DIR inside the workspace, is refused;
- a daemon refuses to create its socket in a directory others may write."""
import json
import os
import shutil
import stat
import subprocess
import tempfile

from mgrlib import SHINKEN, Checks, Daemon

chk = Checks()


def run_in(work, env):
    """`shinken run --net proxy` of a command that leaves a marker."""
    marker = os.path.join(work, "marker")
    if os.path.exists(marker):
        os.unlink(marker)
    p = subprocess.run([SHINKEN, "run", "--allow-degraded", "--net", "proxy", "--", "/bin/sh", "-c",
                        "echo ran > marker"], cwd=work, env=dict(env, ASAN_OPTIONS="detect_leaks=0"),
                       capture_output=True, text=True, timeout=60)
    return p.returncode, p.stderr, os.path.exists(marker)


def sockets_under(top):
    found = []
    for d, _, files in os.walk(top):
        found += [os.path.join(d, f) for f in files if stat.S_ISSOCK(os.lstat(os.path.join(d, f)).st_mode)]
    return found


def main():
    tmp = tempfile.mkdtemp(prefix="shk-place-")
    os.chmod(tmp, 0o755)
    work = os.path.join(tmp, "work")
    os.mkdir(work)
    base = {k: v for k, v in os.environ.items() if k not in ("SHINKEN_SOCKET", "XDG_RUNTIME_DIR")}
    try:
        # A daemon serving from inside the workspace, and one outside it.
        for inside in (True, False):
            sock = os.path.join(work if inside else tmp, "rt-" + str(inside), "manager.sock")
            d = Daemon(tmp, f"d-{inside}", {"socket": sock})
            try:
                rc, err, ran = run_in(work, dict(base, SHINKEN_SOCKET=sock))
            finally:
                d.stop()
            if inside:
                chk(rc == 125 and not ran and "is inside the writable root" in err and "nothing was run" in err,
                    f"a daemon's socket inside the run's writable root refuses the run ({rc}, {err!r})")
            else:
                chk(rc == 0 and ran, f"control: a daemon's socket elsewhere serves the run ({rc}, {err!r})")
        # No daemon: the embedded manager's socket under XDG_RUNTIME_DIR.
        for inside in (True, False):
            rt = os.path.join(work if inside else tmp, "xdg-" + str(inside))
            os.mkdir(rt, 0o700)
            rc, err, ran = run_in(work, dict(base, XDG_RUNTIME_DIR=rt))
            if inside:
                chk(rc == 125 and not ran and "the control socket" in err and "is inside the writable root" in err,
                    f"XDG_RUNTIME_DIR in the workspace refuses the run ({rc}, {err!r})")
            else:
                chk(rc == 0 and ran, f"control: XDG_RUNTIME_DIR elsewhere, the run runs ({rc}, {err!r})")
        chk(sockets_under(work) == [], f"no socket was ever created in the workspace ({sockets_under(work)})")
        # A socket directory others may write is refused; a private one is
        # the control (the daemons above).
        shared = os.path.join(tmp, "shared")
        os.mkdir(shared)
        os.chmod(shared, 0o777)
        cfg = os.path.join(tmp, "shared.json")
        with open(cfg, "w") as f:
            json.dump({"socket": os.path.join(shared, "m.sock"), "audit_db": os.path.join(tmp, "shared-audit.db"),
                       "policy_dir": os.path.join(os.environ["SHINKEN_SRCDIR"], "policies")}, f)
        p = subprocess.run([SHINKEN, "daemon", "--config", cfg], capture_output=True, text=True, timeout=30)
        chk(p.returncode == 1 and "writable by group or others" in p.stderr and p.stderr.count("\n") == 1,
            f"a daemon refuses a socket directory others may write ({p.returncode}, {p.stderr!r})")
        chk(not os.path.exists(os.path.join(shared, "m.sock")), "no socket was created there")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    chk.finish()


main()

#!/usr/bin/python3
# SPDX-License-Identifier: Apache-2.0
"""What the write observer costs a write-heavy workload: `shinken run` with
the observer (the default) against `shinken run --no-observe`, in the same
rounds, alternating, for two workloads in a writable root:

  files: N small files created and removed (writes.c): 2N + 2 observed calls;
  untar: `tar xf` of an archive of N small files, then `rm -r` of them.

Each round runs both variants in a rotating order; the median is the
headline, the range (min..max) shows the spread. Run as root, it measures
root's own degraded run (--allow-degraded) and an unprivileged user's
(BENCH_USER, nobody by default).

usage: observe-bench.py SHINKEN WRITES ROUNDS N"""
import os
import pwd
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

SHINKEN, WRITES, ROUNDS, N = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])


def main():
    # Not under /tmp or /var/tmp, which the sandbox replaces with its own:
    # the workload and the archive must be visible inside.
    base = "/var/lib/shinken-bench"
    os.makedirs(base, exist_ok=True)
    os.chmod(base, 0o755)
    tmp = tempfile.mkdtemp(prefix="observe.", dir=base)
    os.chmod(tmp, 0o777)
    home = os.path.join(tmp, "home")
    os.mkdir(home, 0o777)
    ws = os.path.join(tmp, "ws")
    os.mkdir(ws, 0o777)
    exe = os.path.join(tmp, "writes")
    shutil.copy(WRITES, exe)
    os.chmod(exe, 0o755)
    src = os.path.join(tmp, "src")
    os.mkdir(src)
    for i in range(N):
        with open(os.path.join(src, "f%d" % i), "w") as f:
            f.write("sixteen bytes.\n")
    tar = os.path.join(tmp, "files.tar")
    subprocess.run(["tar", "cf", tar, "-C", tmp, "src"], check=True)
    shutil.rmtree(src)
    os.chmod(tar, 0o644)
    env = dict(os.environ, HOME=home)
    env.setdefault("SHINKEN_POLICY_DIR", os.path.join(os.path.dirname(SHINKEN), "policies"))
    workloads = {
        "files": [exe, str(N), "d"],
        "untar": ["sh", "-c", "tar xf %s && rm -r src" % tar],
    }
    callers = []
    if os.geteuid() == 0:
        user = os.environ.get("BENCH_USER", "nobody")
        pw = pwd.getpwnam(user)
        callers.append((user, pw.pw_uid, pw.pw_gid, []))
        callers.append(("root", None, None, ["--allow-degraded"]))
    else:
        callers.append(("caller", None, None, []))
    try:
        for who, uid, gid, extra in callers:
            os.chown(ws, uid if uid is not None else 0, gid if gid is not None else 0)
            for wname, cmd in workloads.items():
                variants = {"observer": [], "no-observe": ["--no-observe"]}
                times = {v: [] for v in variants}
                names = list(variants)
                for r in range(ROUNDS + 1):
                    order = names[r % 2:] + names[:r % 2]
                    for v in order:
                        argv = [SHINKEN, "run"] + extra + variants[v] + ["--"] + cmd

                        def drop(uid=uid, gid=gid):
                            if uid is not None:
                                os.setgroups([])
                                os.setgid(gid)
                                os.setuid(uid)
                        t0 = time.perf_counter()
                        p = subprocess.run(argv, cwd=ws, env=env, preexec_fn=drop,
                                           stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
                        dt = (time.perf_counter() - t0) * 1000
                        if p.returncode != 0:
                            sys.exit("%s %s %s failed: %s" % (who, wname, v, p.stderr.decode()))
                        if r > 0:  # the first round warms the caches
                            times[v].append(dt)
                on, off = times["observer"], times["no-observe"]
                ratios = sorted(a / b for a, b in zip(on, off))
                print("%-7s %-6s N=%d rounds=%d  observer %.1f ms (%.1f..%.1f)  "
                      "no-observe %.1f ms (%.1f..%.1f)  ratio %.3f (per-round %.3f..%.3f)  "
                      "per observed call %.2f us" % (
                          who, wname, N, ROUNDS, statistics.median(on), min(on), max(on),
                          statistics.median(off), min(off), max(off),
                          statistics.median(on) / statistics.median(off), ratios[0], ratios[-1],
                          (statistics.median(on) - statistics.median(off)) * 1000 / (2 * N + 2)),
                      flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


main()

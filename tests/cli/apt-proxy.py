#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""apt-proxy.py: apt inside `shinken run --net proxy` as an unprivileged
user, offline: a flat Debian repository with one package is served on the
host's loopback under a pinned name (--resolve, --allow-cidr, as an
administrator opens an internal mirror), and inside the sandbox, as the
caller's own uid (no APT::Sandbox::User, no root), `apt-get update` and
`apt-get download` fetch through the session's proxy. Judged outside: the
mirror served the index and the package to the run, and the .deb in the
workspace is the one served, byte for byte. The control is the same run
without the mirror's name granted: apt fails, and the mirror sees nothing.
"""
import atexit
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import tempfile
import threading

SHINKEN = os.environ["SHINKEN"]
POLICIES = os.environ.get("SHINKEN_POLICY_DIR", "")
MIRROR = "deb.mirror.test"


def fail(why):
    print("FAIL: " + why, file=sys.stderr)
    sys.exit(1)


def skip(why):
    if os.environ.get("SHINKEN_MUST_WORK") == "1":
        fail("(SHINKEN_MUST_WORK=1, would skip) " + why)
    print("SKIP: " + why, file=sys.stderr)
    sys.exit(77)


if os.getuid() != 0:
    skip("needs root to become another user")
for tool in ("apt-get", "dpkg-deb", "setpriv"):
    if not shutil.which(tool):
        skip("no " + tool)

TMP = tempfile.mkdtemp(prefix="shk-apt.", dir="/var/tmp")
atexit.register(shutil.rmtree, TMP, True)
os.chmod(TMP, 0o755)

# The repository: one package, built here.
repo = TMP + "/repo"
pkg = TMP + "/pkg"
os.makedirs(pkg + "/DEBIAN")
os.makedirs(pkg + "/usr/share/doc/shk-hello")
with open(pkg + "/DEBIAN/control", "w") as f:
    f.write("Package: shk-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: Shinken <dev@shinken.invalid>\n"
            "Description: a package of the apt test\n")
with open(pkg + "/usr/share/doc/shk-hello/README", "w") as f:
    f.write("hello\n")
os.makedirs(repo)
deb = repo + "/shk-hello_1.0_all.deb"
subprocess.check_call(["dpkg-deb", "--root-owner-group", "-b", pkg, deb], stdout=subprocess.DEVNULL)
data = open(deb, "rb").read()
sha = hashlib.sha256(data).hexdigest()
with open(repo + "/Packages", "w") as f:
    f.write("Package: shk-hello\nVersion: 1.0\nArchitecture: all\nMaintainer: Shinken <dev@shinken.invalid>\n"
            "Filename: ./shk-hello_1.0_all.deb\nSize: %d\nSHA256: %s\nDescription: a package of the apt test\n\n"
            % (len(data), sha))

SERVED = []


class Mirror(http.server.SimpleHTTPRequestHandler):
    def __init__(self, *a, **kw):
        super().__init__(*a, directory=repo, **kw)

    def do_GET(self):
        SERVED.append(os.path.normpath(self.path))
        super().do_GET()

    def log_message(self, *a):
        pass


srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Mirror)
threading.Thread(target=srv.serve_forever, daemon=True).start()
PORT = srv.server_address[1]

# The user's copies, where nobody may read them.
shinken, policies = SHINKEN, POLICIES
AS = ["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"]
if subprocess.call(AS + ["test", "-x", SHINKEN, "-a", "-r", POLICIES + "/schema.cedarschema"]) != 0:
    shutil.copy(SHINKEN, TMP + "/shinken")
    shutil.copytree(POLICIES, TMP + "/policies")
    subprocess.check_call(["chmod", "-R", "a+rX", TMP + "/shinken", TMP + "/policies"])
    shinken, policies = TMP + "/shinken", TMP + "/policies"

APT = ("set -e; mkdir -p lists/partial cache/archives/partial; "
       "echo 'deb [trusted=yes] http://%s:%d/ ./' >sources.list; "
       "printf 'Dir::Etc::SourceList \"%%s/sources.list\";\\nDir::Etc::SourceParts \"/nonexistent\";\\n"
       "Dir::State::Lists \"%%s/lists\";\\nDir::Cache \"%%s/cache\";\\nDebug::NoLocking \"1\";\\n' "
       "\"$PWD\" \"$PWD\" \"$PWD\" >apt.conf; export APT_CONFIG=$PWD/apt.conf; "
       "apt-get update; apt-get download shk-hello; id -u" % (MIRROR, PORT))


def run(ws, options):
    os.makedirs(ws)
    os.chown(ws, 65534, 65534)
    env = {"PATH": "/usr/bin:/bin", "HOME": ws, "SHINKEN_POLICY_DIR": policies,
           "SHINKEN_SOCKET": TMP + "/no-daemon.sock"}
    p = subprocess.run(AS + [shinken, "run", "--net", "proxy"] + options + ["--", "/bin/sh", "-c", APT], cwd=ws,
                       env=env, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    print("--- %s -> %d\n%s%s" % (" ".join(options), p.returncode, p.stdout, p.stderr), file=sys.stderr)
    return p.returncode, p.stdout, p.stderr


pins = ["--resolve", "%s:127.0.0.1" % MIRROR, "--allow-cidr", "127.0.0.0/8"]
rc, out, err = run(TMP + "/ws", ["--allow-domain", MIRROR] + pins)
if rc != 0:
    fail("apt through the proxy as an unprivileged user failed (%d): %s" % (rc, err[-2000:]))
if out.strip().splitlines()[-1] != "65534":
    fail("apt did not run as the caller's own uid: %r" % out)
if "/Packages" not in SERVED or "/shk-hello_1.0_all.deb" not in SERVED:
    fail("the mirror did not serve the index and the package: %r" % SERVED)
got = TMP + "/ws/shk-hello_1.0_all.deb"
if not os.path.exists(got) or hashlib.sha256(open(got, "rb").read()).hexdigest() != sha:
    fail("the .deb in the workspace is not the one served")
if "setgroups" in err or "Sandbox" in err:
    fail("apt complained of dropping privileges: %r" % err)

# Control: the mirror's name not granted; apt fails and nothing is served.
SERVED.clear()
rc, out, err = run(TMP + "/ws-control", pins)
if rc == 0 or SERVED or os.path.exists(TMP + "/ws-control/shk-hello_1.0_all.deb"):
    fail("control: without the grant apt still reached the mirror (%d, %r)" % (rc, SERVED))
print("ok: apt through the proxy as an unprivileged user")

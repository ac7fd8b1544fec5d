# SPDX-License-Identifier: Apache-2.0
"""TLS inspection, end to end: `shinken run --net proxy` against a local
HTTPS upstream with a test CA of its own, which the session proxy is told
to trust (upstream_ca). The daemon's standing grants give every session
api.test (inspected), ro.test (inspected, limited), bad.test (inspected,
served with a certificate no trusted CA signed) and tunnel.test (not
inspected). Inside the sandbox curl, Python's urllib, Node's https, git
over HTTPS (dumb HTTP) and npm reach the upstream without being told of
any CA; what reached the upstream is judged from the upstream's own log,
outside the sandbox, and each refusal has a control run showing the same
request going through where the protection does not apply."""
import hashlib
import http.server
import json
import os
import shutil
import socketserver
import ssl
import subprocess
import sys
import threading

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lib import scratch, skip  # noqa: E402
from mgrlib import SHINKEN, Checks, Daemon, audit_events  # noqa: E402

chk = Checks()
NAMES = ["api.test", "ro.test", "bad.test", "tunnel.test", "other.test"]


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw)


def make_pki(d):
    """A test CA, a server certificate it signs for every test name, and a
    self-signed one that no trusted CA signed (bad.test's)."""
    ca_key, ca = os.path.join(d, "ca.key"), os.path.join(d, "ca.pem")
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", ca_key, "-out", ca, "-days", "2", "-subj", "/CN=shinken test upstream CA",
       "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign")
    key, csr, crt = (os.path.join(d, n) for n in ("srv.key", "srv.csr", "srv.pem"))
    sh("openssl", "req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-keyout", key,
       "-out", csr, "-subj", "/CN=api.test")
    ext = os.path.join(d, "ext.cnf")
    with open(ext, "w") as f:
        f.write("subjectAltName=" + ",".join("DNS:" + n for n in NAMES) + "\nextendedKeyUsage=serverAuth\n")
    sh("openssl", "x509", "-req", "-in", csr, "-CA", ca, "-CAkey", ca_key, "-CAcreateserial", "-out", crt,
       "-days", "2", "-extfile", ext)
    bad_key, bad = os.path.join(d, "bad.key"), os.path.join(d, "bad.pem")
    sh("openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes",
       "-keyout", bad_key, "-out", bad, "-days", "2", "-subj", "/CN=bad.test", "-addext",
       "subjectAltName=DNS:bad.test")
    # The real upstream key's pin, as curl --pinnedpubkey takes it.
    der = subprocess.run(["openssl", "pkey", "-in", key, "-pubout", "-outform", "DER"], check=True,
                         capture_output=True).stdout
    import base64
    pin = "sha256//" + base64.b64encode(hashlib.sha256(der).digest()).decode()
    return ca, (crt, key), (bad, bad_key), pin


class Log:
    def __init__(self):
        self.lock = threading.Lock()
        self.requests = []

    def add(self, r):
        with self.lock:
            self.requests.append(r)

    def find(self, pred):
        with self.lock:
            return [r for r in self.requests if pred(r)]


def make_handler(log, root):
    class H(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *a):
            pass

        def _record(self, body=b""):
            log.add({"method": self.command, "path": self.path, "host": self.headers.get("Host"),
                     "auth": self.headers.get("Authorization"), "body": body})

        def _send(self, code, body, ctype="text/plain"):
            self.send_response(code)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(body)

        def do_GET(self):
            self._record()
            path = self.path.split("?")[0]
            if path == "/hello":
                return self._send(200, b"hello from upstream\n")
            if path == "/auth":
                return self._send(200, (self.headers.get("Authorization") or "none").encode())
            if path == "/chunked":
                self.send_response(200)
                self.send_header("Transfer-Encoding", "chunked")
                self.end_headers()
                for part in (b"chunk one ", b"chunk two\n"):
                    self.wfile.write(b"%x\r\n%s\r\n" % (len(part), part))
                self.wfile.write(b"0\r\n\r\n")
                return
            if path == "/npm/tiny":
                meta = {"name": "tiny", "dist-tags": {"latest": "1.0.0"},
                        "versions": {"1.0.0": {"name": "tiny", "version": "1.0.0",
                                               "dist": {"tarball": "https://api.test/npm/tiny.tgz"}}}}
                return self._send(200, json.dumps(meta).encode(), "application/json")
            f = os.path.normpath(os.path.join(root, path.lstrip("/")))
            if f.startswith(root + "/") and os.path.isfile(f):
                with open(f, "rb") as fh:
                    return self._send(200, fh.read(), "application/octet-stream")
            return self._send(404, b"no such thing\n")

        def do_HEAD(self):
            self.do_GET()

        def do_POST(self):
            n = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(n)
            self._record(body)
            self._send(200, b"posted %d\n" % len(body))

    return H


class TLSServer(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True


def serve(log, root, cert):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(*cert)
    srv = TLSServer(("127.0.0.1", 0), make_handler(log, root))
    srv.socket = ctx.wrap_socket(srv.socket, server_side=True)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return srv, srv.server_address[1]


def main():
    for tool in ("openssl", "curl", "git", "node", "npm"):
        if not shutil.which(tool):
            skip(f"{tool} is not installed")
    tmp = scratch("shk-mitm-")
    os.chmod(tmp, 0o755)
    pki = os.path.join(tmp, "pki")
    os.mkdir(pki)
    ca, cert, bad_cert, pin = make_pki(pki)
    root = os.path.join(tmp, "www")
    os.mkdir(root)
    # A git repository served as dumb HTTP: plain files.
    src = os.path.join(tmp, "src")
    sh("git", "init", "-q", "-b", "main", src)
    with open(os.path.join(src, "README"), "w") as f:
        f.write("served through an inspected grant\n")
    sh("git", "-C", src, "add", "README")
    sh("git", "-C", src, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m", "one")
    sh("git", "clone", "-q", "--bare", src, os.path.join(root, "repo.git"))
    sh("git", "-C", os.path.join(root, "repo.git"), "update-server-info")
    log, badlog = Log(), Log()
    srv, port = serve(log, root, cert)
    bsrv, bport = serve(badlog, root, bad_cert)

    pcfg = os.path.join(tmp, "proxy.json")
    with open(pcfg, "w") as f:
        json.dump({"allow_private_cidrs": ["127.0.0.1/32"], "hosts": {n: ["127.0.0.1"] for n in NAMES},
                   "upstream_ca": ca}, f)
    standing = os.path.join(tmp, "standing.json")
    with open(standing, "w") as f:
        json.dump([{"class": "net.egress", "scope": {"domains": [f"api.test:{port}"], "tls_inspect": True}},
                   {"class": "net.egress", "scope": {"domains": [f"ro.test:{port}"], "tls_inspect": True,
                                                     "limited": True}},
                   {"class": "net.egress", "scope": {"domains": [f"bad.test:{bport}"], "tls_inspect": True}},
                   {"class": "net.egress", "scope": {"domains": [f"tunnel.test:{port}"]}}], f)
    state = os.path.join(tmp, "state")
    d = Daemon(tmp, "d", {"standing": standing, "state_dir": state})
    work = os.path.join(tmp, "work")
    os.mkdir(work)
    env = {k: v for k, v in d.env.items() if k not in ("XDG_RUNTIME_DIR",)}
    env["ASAN_OPTIONS"] = "detect_leaks=0"

    def run(script, timeout=90):
        p = subprocess.run([SHINKEN, "run", "--allow-degraded", "--net", "proxy", "--proxy-config", pcfg,
                            "--", "/bin/sh", "-c", script], cwd=work, env=env, capture_output=True,
                           text=True, timeout=timeout)
        return p.returncode, p.stdout, p.stderr

    try:
        api = f"https://api.test:{port}"
        # The CA: made on first use, its key 0600 in the manager's state.
        rc, out, err = run(f"curl -sS {api}/hello")
        chk(rc == 0 and out == "hello from upstream\n", f"curl through an inspected grant ({rc}, {out!r}, {err!r})")
        key = os.path.join(state, "ca", "ca.pem")
        chk(os.path.exists(key) and (os.stat(key).st_mode & 0o777) == 0o600, "the CA's file is 0600")
        chk((os.stat(os.path.dirname(key)).st_mode & 0o777) == 0o700, "the CA's directory is 0700")
        # The certificate the client saw is the proxy's, minted for the name.
        rc, out, err = run(f"curl -sS -v {api}/hello 2>&1 >/dev/null | grep -i 'issuer:'")
        chk(rc == 0 and "Shinken inspection CA" in out, f"the leaf is the proxy's ({out!r})")
        # The sandbox sees the bundle at the system path and the variables.
        rc, out, err = run("grep -c 'BEGIN CERTIFICATE' /etc/ssl/certs/ca-certificates.crt; "
                           "echo $SSL_CERT_FILE $NODE_EXTRA_CA_CERTS $REQUESTS_CA_BUNDLE $CURL_CA_BUNDLE "
                           "$GIT_SSL_CAINFO $PIP_CERT $npm_config_cafile")
        lines = out.split("\n")
        chk(rc == 0 and len(lines) > 1 and lines[1].split() == ["/etc/ssl/certs/ca-certificates.crt"] * 7,
            f"the trust variables point at the bundle ({out!r})")
        # The key is never visible inside: judged by the CA's private key
        # bytes not coming out of the sandbox, whatever the workload tries.
        with open(key, "rb") as f:
            key_pem = f.read()
        rc, out, err = run(f"cat {key} 2>&1; ls {os.path.dirname(key)} 2>&1; cat $HOME/.local/state/shinken/ca/ca.pem 2>&1; true")
        chk(b"PRIVATE KEY" not in out.encode() and key_pem.split(b"\n")[1].decode() not in out,
            f"the CA key cannot be read from inside ({out[:200]!r})")
        # Control: the same command outside the sandbox reads it.
        p = subprocess.run(["cat", key], capture_output=True)
        chk(b"PRIVATE KEY" in p.stdout, "control: outside, the key file reads")

        # Python's urllib, Node's https (through a CONNECT of its own: Node
        # 20's fetch has no proxy support), git over HTTPS, npm.
        rc, out, err = run(f"python3 -c 'import urllib.request as u; print(u.urlopen(\"{api}/hello\").read().decode(), end=\"\")'")
        chk(rc == 0 and out == "hello from upstream\n", f"python urllib ({rc}, {out!r}, {err[-300:]!r})")
        node = ("const http=require('http'),https=require('https');"
                f"http.request({{host:'127.0.0.1',port:3128,method:'CONNECT',path:'api.test:{port}'}})"
                ".on('connect',(res,sock)=>{https.get({socket:sock,servername:'api.test',host:'api.test',"
                f"port:{port},path:'/chunked',agent:false}},r=>{{let b='';r.on('data',d=>b+=d);"
                "r.on('end',()=>{console.log(r.statusCode+' '+b.trim());process.exit(0)})})"
                ".on('error',e=>{console.log('error '+e.message);process.exit(1)})}).end()")
        rc, out, err = run(f"node -e \"{node}\"")
        chk(rc == 0 and out.strip() == "200 chunk one chunk two", f"node https, chunked response ({rc}, {out!r}, {err[-300:]!r})")
        rc, out, err = run(f"git clone -q {api}/repo.git r && cat r/README")
        chk(rc == 0 and out == "served through an inspected grant\n", f"git clone over HTTPS ({rc}, {out!r}, {err[-300:]!r})")
        rc, out, err = run(f"HOME=$PWD npm view tiny version --registry {api}/npm/")
        chk(rc == 0 and out.strip() == "1.0.0", f"npm view against the registry ({rc}, {out!r}, {err[-300:]!r})")

        # Keep-alive: two requests on one connection; a POST with a body.
        rc, out, err = run(f"curl -sS {api}/hello {api}/hello -w '%{{num_connects}}\\n'")
        chk(rc == 0 and out.count("hello from upstream") == 2 and out.strip().endswith("0"),
            f"keep-alive: the second request reuses the connection ({out!r})")
        rc, out, err = run(f"curl -sS -d 'some=data' {api}/post")
        chk(rc == 0 and out == "posted 9\n" and log.find(lambda r: r["method"] == "POST" and r["body"] == b"some=data"),
            f"a POST and its body go through a full grant ({out!r})")
        # No rewrite hook: the client's Authorization reaches the upstream.
        rc, out, err = run(f"curl -sS -H 'Authorization: Bearer client-token' {api}/auth")
        chk(rc == 0 and out == "Bearer client-token", f"Authorization passes unchanged without a broker ({out!r})")

        # Limited mode: a POST is refused and never reaches the upstream; GET passes.
        before = len(log.find(lambda r: r["method"] == "POST"))
        rc, out, err = run(f"curl -sS -o /dev/null -D - -d 'x=1' https://ro.test:{port}/post")
        chk("403" in out.split("\n")[0] and "inspect-limited-method" in out, f"limited mode refuses POST ({out!r})")
        chk(len(log.find(lambda r: r["method"] == "POST")) == before, "the upstream got no POST from limited mode")
        rc, out, err = run(f"curl -sS https://ro.test:{port}/hello")
        chk(rc == 0 and out == "hello from upstream\n", "control: limited mode passes GET")

        # A Host that names another destination than the grant's.
        n = len(log.requests)
        rc, out, err = run(f"curl -sS -D - -o /dev/null -H 'Host: other.test:{port}' {api}/hello")
        chk("400" in out.split("\n")[0] and "inspect-host-mismatch" in out, f"a mismatched Host is refused ({out!r})")
        chk(len(log.requests) == n, "the upstream got nothing for the mismatched Host")
        # An SNI other than the granted name: the handshake fails.
        rc, out, err = run(f"openssl s_client -brief -connect 127.0.0.1:1080 </dev/null 2>&1 | head -1; "
                           f"curl -sS --connect-to api.test:{port}:api.test:{port} -H 'Host: api.test:{port}' "
                           f"--proxy http://127.0.0.1:3128 https://other.test:{port}/hello 2>&1; true")
        chk("hello from upstream" not in out, f"an SNI for another name is refused ({out[-300:]!r})")

        # A client that pins the real upstream key fails closed; the same
        # pin outside the sandbox, straight to the upstream, succeeds.
        rc, out, err = run(f"curl -sS --pinnedpubkey '{pin}' {api}/hello")
        chk(rc != 0 and "hello from upstream" not in out, f"a pinned client fails closed ({rc}, {err[-200:]!r})")
        p = subprocess.run(["curl", "-sS", "--cacert", ca, "--pinnedpubkey", pin, "--resolve",
                            f"api.test:{port}:127.0.0.1", f"{api}/hello"], capture_output=True, text=True)
        chk(p.returncode == 0 and p.stdout == "hello from upstream\n", f"control: the pin matches the real upstream ({p.stderr!r})")

        # An upstream whose certificate does not verify: the connection fails.
        rc, out, err = run(f"curl -sS -D - https://bad.test:{bport}/hello")
        chk("502" in out.split("\n")[0] and "inspect-upstream-unverified" in out,
            f"an unverifiable upstream fails the connection ({rc}, {out!r})")
        chk(not badlog.requests, "the unverified upstream got no request")

        # Control: a grant without tls_inspect is a tunnel: the client sees
        # the upstream's own certificate (and, not trusting its CA, fails).
        rc, out, err = run(f"curl -sS -v https://tunnel.test:{port}/hello 2>&1 | grep -i 'issuer:'; "
                           f"curl -sS --cacert {ca} https://tunnel.test:{port}/hello")
        chk("shinken test upstream CA" in out and "hello from upstream" in out, f"control: a plain grant tunnels ({out!r})")

        # The audit: one record per request with method, status, bytes and
        # duration, and never the path.
        evs = [e for e in audit_events(d.db) if e.get("event") == "proxy-verdict" or "method" in json.dumps(e)]
        text = json.dumps(evs)
        chk('"GET"' in text and '"POST"' in text, "the audit records each request's method")
        chk("/hello" not in text and "client-token" not in text and "/auth" not in text,
            "the audit holds no path or header value")
    finally:
        d.stop()
        srv.shutdown()
        bsrv.shutdown()
    chk.finish()


if __name__ == "__main__":
    main()

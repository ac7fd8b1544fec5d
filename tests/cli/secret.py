# SPDX-License-Identifier: Apache-2.0
"""`shinken secret` as a person meets it: the value from standard input or
from a prompt on the terminal that does not echo it, never from argv; a
listing that never shows a value; one sentence and the bad-input status
for each bad field; the store's files 0600 and the value not in them in
the clear; a store changed on disk refused."""
import os
import pty
import subprocess
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from lib import scratch  # noqa: E402

SHINKEN = os.environ["SHINKEN"]
TOKEN = "npm_S3cretValueOfTheTest0123456789"
failed = []


def chk(cond, what):
    if not cond:
        failed.append(what)
        print("FAIL:", what, file=sys.stderr)


def main():
    tmp = scratch("shk-secret-")
    env = dict(os.environ, XDG_STATE_HOME=os.path.join(tmp, "state"))

    def sec(*args, stdin=""):
        p = subprocess.run([SHINKEN, "secret", *args], input=stdin, capture_output=True, text=True, env=env,
                           timeout=30)
        return p.returncode, p.stdout, p.stderr

    rc, out, err = sec("add", "npm", "--host", "registry.npm.test", "--header", "Authorization: Bearer {}",
                       "--env", "NPM_TOKEN", stdin=TOKEN + "\n")
    chk(rc == 0 and TOKEN not in out + err, f"add from standard input ({rc}, {err!r})")
    d = os.path.join(tmp, "state", "shinken", "broker")
    for f in ("secrets", "secrets.key"):
        st = os.stat(os.path.join(d, f))
        chk(st.st_mode & 0o777 == 0o600, f"{f} is 0600")
    chk(os.stat(d).st_mode & 0o777 == 0o700, "the store's directory is 0700")
    chk(TOKEN.encode() not in open(os.path.join(d, "secrets"), "rb").read(), "the value is not in the file in the clear")
    rc, out, err = sec("list")
    chk(rc == 0 and "npm" in out and "registry.npm.test" in out and "NPM_TOKEN" in out, f"list ({out!r})")
    chk("S3cret" not in out and "npm_S" not in out, "list shows no part of the value")

    # The prompt: on the terminal, without echo.
    pid, fd = pty.fork()
    if pid == 0:
        os.execve(SHINKEN, [SHINKEN, "secret", "add", "gh", "--host", "**.github.test"], env)
    seen = b""
    while b"not shown" not in seen:
        seen += os.read(fd, 1024)
    os.write(fd, b"ghp_TypedAtThePrompt0123456789xyz\n")
    while True:
        try:
            chunk = os.read(fd, 1024)
        except OSError:
            break
        if not chunk:
            break
        seen += chunk
    _, status = os.waitpid(pid, 0)
    chk(os.waitstatus_to_exitcode(status) == 0, f"add at the prompt ({seen!r})")
    chk(b"TypedAtThePrompt" not in seen, "the prompt does not echo the value")
    rc, out, _ = sec("list", "--json")
    chk(rc == 0 and '"gh"' in out and "TypedAtThePrompt" not in out, f"list --json ({out!r})")

    # Bad input: one sentence, status 1 (64 for usage), never the value.
    for args, stdin, want, word in (
            (["add", "x", "--host", "a_b.test"], TOKEN, 1, "--host"),
            (["add", "x", "--host", "a.test", "--header", "X-Auth: no place"], TOKEN, 1, "{}"),
            (["add", "x", "--host", "a.test", "--env", "9X"], TOKEN, 1, "--env"),
            (["add", "x", "--host", "a.test"], "ghp_short", 1, "fewer than 12"),
            (["add", "x", "--host", "a.test"], "", 1, "empty"),
            (["add", "x", "--host", "a.test"], TOKEN + "\nsecond line", 1, "one line"),
            (["add", "npm", "--host", "a.test"], TOKEN, 1, "already"),
            (["add", "x", TOKEN, "--host", "a.test"], "", 64, "never from the command line"),
            (["add", "x"], TOKEN, 64, "--host"),
            (["rm", "nosuch"], "", 1, "no secret named nosuch"),
            (["frob"], "", 64, "frob")):
        rc, out, err = sec(*args, stdin=stdin)
        chk(rc == want and len(err.strip().splitlines()) == 1 and word in err,
            f"{args}: status {rc} (want {want}), {err!r}")
        chk(TOKEN not in err and "ghp_short" not in err, f"{args}: the error holds no value")

    rc, _, _ = sec("rm", "gh")
    chk(rc == 0, "rm")
    rc, out, _ = sec("list")
    chk(rc == 0 and "gh " not in out and "npm" in out, f"rm removed one secret ({out!r})")

    # A store changed on disk does not decrypt; one others could read is refused.
    path = os.path.join(d, "secrets")
    data = bytearray(open(path, "rb").read())
    data[-20] ^= 1
    open(path, "wb").write(bytes(data))
    rc, out, err = sec("list")
    chk(rc == 1 and "does not decrypt" in err, f"a changed store is refused ({rc}, {err!r})")
    data[-20] ^= 1
    open(path, "wb").write(bytes(data))
    chk(sec("list")[0] == 0, "control: the store as written lists")
    os.chmod(path, 0o644)
    rc, out, err = sec("list")
    chk(rc == 1 and "0600" in err, f"a store others can read is refused ({rc}, {err!r})")
    print(f"{'FAILED' if failed else 'ok'}: shinken secret")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()

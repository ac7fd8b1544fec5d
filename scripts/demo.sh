#!/bin/sh
# SPDX-License-Identifier: Apache-2.0
# The demo. First Shinken's main job: a command run with least authority by
# `shinken run`, trying what a prompt-injected agent would try. Then the
# decision layer: a coding agent's session asks to use capabilities, and
# Shinken's Cedar engine decides each request against the shipped example
# policies (policies/examples/) and Shinken's schema, naming the rules that
# decided.
set -eu
shinken=${1:?usage: demo.sh PATH-TO-SHINKEN}
shinken=$(cd "$(dirname "$shinken")" && pwd)/$(basename "$shinken")
root=$(cd "$(dirname "$0")/.." && pwd)
ex=$root/policies/examples

# Part 1: shinken run, the main job. An "agent" command tries what a
# prompt-injected agent would try; each attempt is judged here, outside.
# The run gets a home of the demo's own, with a key in ~/.ssh and a
# ~/.bashrc, so that each refusal is of something that is there (an agent
# that lists a masked ~/.ssh sees an empty directory; reading the key is
# the attempt that counts) and the demo never touches the caller's own.
work=$(mktemp -d /var/tmp/shinken-demo.XXXXXX)
trap 'rm -rf "$work"' EXIT
chmod 0755 "$work"
mkdir -p "$work/home/.ssh" "$work/project"
chmod 0700 "$work/home/.ssh"
echo "demo private key $$" >"$work/home/.ssh/id_ed25519"
echo "# the demo's ~/.bashrc" >"$work/home/.bashrc"
cp "$work/home/.bashrc" "$work/bashrc.before"
cd "$work/project"
echo "== shinken doctor: what this host enforces"
"$shinken" doctor | sed -n '/^class/,$p' | sed 's/^/    /'
# As root, root's own files stay readable inside (the doctor says so), so
# shinken run refuses unless told to go on knowing that.
degraded=""
[ "$(id -u)" = 0 ] && degraded=--allow-degraded
echo
echo "== shinken run $degraded -- bash agent.sh   (in $work/project, HOME=$work/home)"
cat >agent.sh <<'AGENT'
try() { if sh -c "$2" >/dev/null 2>&1; then echo "    $1: DONE"; else echo "    $1: refused"; fi; }
try "write a file in the workspace          " 'echo ok > result.txt'
try "append to ~/.bashrc                     " 'echo evil >> "$HOME/.bashrc"'
try "read ~/.ssh/id_ed25519                  " 'grep -q "demo private key" "$HOME/.ssh/id_ed25519"'
try "write /etc/passwd                       " 'echo x >> /etc/passwd'
try "open a TCP connection (no grant)        " 'exec 3<>/dev/tcp/127.0.0.1/22'
try "signal a process outside (pid $HOST_PID)    " 'kill -0 "$HOST_PID"'
AGENT

status=0
HOME="$work/home" HOST_PID=$$ "$shinken" run $degraded -- bash agent.sh >"$work/run.out" 2>&1 || status=$?
grep -v "^shinken: degraded" "$work/run.out" || true
# A run that did not run is a broken demo, not a result.
[ "$status" = 0 ] || { echo "demo: shinken run failed (status $status)" >&2; exit 1; }
# Judged outside: what the agent did, and that what it was refused is there.
[ -f result.txt ] && echo "    (outside: result.txt is in the workspace)"
cmp -s "$work/home/.bashrc" "$work/bashrc.before" && echo "    (outside: ~/.bashrc is as it was)"
grep -q "demo private key" "$work/home/.ssh/id_ed25519" && echo "    (outside: the key it could not read is there)"
echo

echo "== Cedar: Shinken decides what an agent may use. Session s-2026-11-30-01, agent 'coder',"
echo "policies: policies/examples/session.cedar (schema: policies/schema.cedarschema)."

ask() { # REQUEST-NAME WHAT
  printf '\n%s\n' "$2"
  status=0
  out=$("$shinken" cedar authorize --schema "$root/policies/schema.cedarschema" \
    --policies "$ex/session.cedar" --entities "$ex/entities.json" \
    --request-json "$ex/requests/$1.json") || status=$?
  # 0 is ALLOW and 2 is DENY; anything else is a broken demo, not an answer.
  [ "$status" -le 2 ] && [ "$status" -ne 1 ] || exit 1
  printf '%s\n' "$out" | sed 's/^/    /'
}

ask egress-pypi "1. net.egress to files.pypi.example:443 (to pip install a dependency)"
ask egress-metadata "2. net.egress to 169.254.169.254:80, a URL it found in a README (external provenance)"
ask install-unapproved "3. install.privileged, scope pkg, not yet approved by a human"
ask install-approved "4. the same, after the human approved it"
ask write-after-expiry "5. fs.scope write to /home/dev/project/src/main.c, after the session expired"
